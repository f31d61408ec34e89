/*
 * quant_iq1.c - STUB: to be written (bit-exact with ggml's IQ1 quantizers).
 */
#include "quant.h"

int tfs_enc_iq1_s(const float *x, const float *qw, uint8_t *b)
{
	(void)x; (void)qw; (void)b;
	return -1;
}

int tfs_enc_iq1_m(const float *x, const float *qw, uint8_t *b)
{
	(void)x; (void)qw; (void)b;
	return -1;
}

