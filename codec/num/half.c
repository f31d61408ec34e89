/*
 * half.c - float32 to IEEE half and bfloat16, nearest-even (quant.h): the scalar conversions
 * the quantizers and their SIMD kernels share.
 */
#include "quant_impl.h"

/* ==== float32 to 16-bit floats (the quantizers and the SIMD kernels use them) ==== */

/* IEEE half, nearest-even; NaN becomes 0x7E00 with its sign (as ggml's conversion does). */
uint16_t tfs_f32_to_f16(float f)
{
	uint32_t x = tfs_f32_bits(f), ax = x & 0x7fffffffu;
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);

	if (ax > 0x7f800000u)
		return sign | 0x7e00u;
	if (ax >= 0x477ff000u)                 /* 65520 and up round to infinity */
		return sign | 0x7c00u;
	if (ax < 0x38800000u) {                /* below 2^-14: a half subnormal */
		uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | (e ? 0x800000u : 0);
		unsigned shift = e ? 126 - e : 125;

		return sign | (uint16_t)tfs_rne_shift(m, shift);
	}
	/* a carry out of the mantissa rightly bumps the exponent */
	return sign | (uint16_t)tfs_rne_shift(ax - 0x38000000u, 13);
}

/* bfloat16, nearest-even; NaN keeps its top bits and is made quiet (ggml, torch agree). */
uint16_t tfs_f32_to_bf16(float f)
{
	uint32_t u = tfs_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
