/*
 * quant_iq2.c - STUB: to be written (bit-exact with ggml's IQ2 quantizers).
 */
#include "quant.h"

int tfs_enc_iq2_xxs(const float *x, const float *qw, uint8_t *b)
{
	(void)x; (void)qw; (void)b;
	return -1;
}

int tfs_enc_iq2_xs(const float *x, const float *qw, uint8_t *b)
{
	(void)x; (void)qw; (void)b;
	return -1;
}

int tfs_enc_iq2_s(const float *x, const float *qw, uint8_t *b)
{
	(void)x; (void)qw; (void)b;
	return -1;
}

