/*
 * quant_iq3.c - STUB: to be written (bit-exact with ggml's IQ3 quantizers).
 */
#include "quant.h"

int tfs_enc_iq3_xxs(const float *x, const float *qw, uint8_t *b)
{
	(void)x; (void)qw; (void)b;
	return -1;
}

int tfs_enc_iq3_s(const float *x, const float *qw, uint8_t *b)
{
	(void)x; (void)qw; (void)b;
	return -1;
}

