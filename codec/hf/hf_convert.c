/*
 * hf_convert.c - float conversions bit for bit as convert_hf_to_gguf.py computes them
 * (numpy 1.24's scalar half-float code, torch's bfloat16 widening, gguf-py's BF16 and Q8_0).
 */
#include "hf_convert.h"

#include <math.h>
#include <string.h>

#include "dtype.h"

/* ==== scalar conversions ==== */

uint32_t tfs_hf_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = h & 0x7c00u, sig = h & 0x03ffu;
	if (exp == 0x7c00u)             /* inf, NaN: the payload shifted, not quieted */
		return sign | 0x7f800000u | (sig << 13);
	if (exp != 0)
		return sign | (((uint32_t)(h & 0x7fffu) + 0x1c000u) << 13);
	if (sig == 0)
		return sign;
	int e = 0;                      /* subnormal: normalize */
	sig <<= 1;
	while (!(sig & 0x0400u)) {
		sig <<= 1;
		e++;
	}
	return sign | ((uint32_t)(127 - 15 - e) << 23) | ((sig & 0x03ffu) << 13);
}

/* Nearest-even float32 to half; NaN keeps its payload's top 10 bits, made non-zero (numpy's
 * rule: a signalling NaN stays signalling).  The finite cases as Fabian Giesen's
 * float_to_half_fast3_rtne: subnormal halves by one float addition (which rounds to nearest
 * even), normal ones by adding the rounding bias to the bits. */
uint16_t tfs_hf_f32_to_f16(uint32_t f)
{
	uint16_t sign = (uint16_t)((f & 0x80000000u) >> 16);
	uint32_t x = f & 0x7fffffffu;
	if (x >= 0x47800000u) {         /* 2^16 and up: overflow, infinity, NaN */
		if (x <= 0x7f800000u)
			return sign | 0x7c00u;
		uint16_t r = (uint16_t)(0x7c00u + ((x & 0x007fffffu) >> 13));
		return sign | (r == 0x7c00u ? 0x7c01u : r);
	}
	if (x < 0x38800000u) {          /* below 2^-14: a subnormal half, or zero */
		const uint32_t magic = (127 - 15 + 23 - 10 + 1) << 23;
		float fx, fm;
		memcpy(&fx, &x, 4);
		memcpy(&fm, &magic, 4);
		fx += fm;
		uint32_t u;
		memcpy(&u, &fx, 4);
		return sign | (uint16_t)(u - magic);
	}
	x += ((uint32_t)(15 - 127) << 23) + 0xfffu + ((x >> 13) & 1);
	return sign | (uint16_t)(x >> 13);
}

uint16_t tfs_hf_f32_to_bf16(uint32_t f)
{
	if ((f & 0x7fffffffu) > 0x7f800000u)   /* NaN: quiet, low half dropped */
		return (uint16_t)(((f & 0xffff0000u) | (64u << 16)) >> 16);
	return (uint16_t)(((uint64_t)f + 0x7fffu + ((f >> 16) & 1)) >> 16);
}

/* ==== arrays ==== */

void tfs_hf_to_f32(uint32_t *dst, const uint8_t *src, int src_dtype, size_t n)
{
	switch (src_dtype) {
	case TFS_DT_F32:
		memcpy(dst, src, 4 * n);
		break;
	case TFS_DT_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = tfs_hf_f16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
		break;
	case TFS_DT_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = (uint32_t)(src[2 * i] | src[2 * i + 1] << 8) << 16;
		break;
	}
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/*
 * gguf-py's np_roundf, floor(a) + floor(2 * (a - floor(a))) with the sign put back, is
 * rounding half away from zero (a - floor(a) is exact below 2^23, and above it a is whole);
 * x * id is at most 127 and a bit here, so an int conversion that truncates, then a step
 * away from zero when what was cut is at least one half, gives it exactly.  numpy casts NaN
 * (and infinities: 0 * inf) to int8 0.
 */
static int8_t round_q8(float x)
{
	if (!(fabsf(x) < 256.0f))
		return 0;
	int t = (int)x;
	float r = x - (float)t;
	t += (r >= 0.5f) - (r <= -0.5f);
	return (int8_t)t;
}

/* One Q8_0 block of 32 values. */
static void q8_0_block(uint8_t *dst, const uint32_t *src)
{
	float x[32], amax = 0.0f;
	int nan = -1;
	memcpy(x, src, sizeof x);
	for (int j = 0; j < 32; j++) {
		float a = fabsf(x[j]);
		if (a != a && nan < 0)
			nan = j;
		amax = a > amax ? a : amax;
	}
	/* numpy's max propagates NaN; which payload depends on its SIMD lanes (a NaN block's
	 * scale may differ from the converter's in its NaN payload; its int8s are all 0 alike) */
	if (nan >= 0)
		amax = NAN;
	float d = amax / 127.0f;
	float id = d == 0.0f ? 0.0f : 1.0f / d;
	uint16_t dh = tfs_hf_f32_to_f16(f32_bits(d));
	dst[0] = (uint8_t)dh;
	dst[1] = (uint8_t)(dh >> 8);
	for (int j = 0; j < 32; j++)
		dst[2 + j] = (uint8_t)round_q8(x[j] * id);
}

void tfs_hf_from_f32(uint8_t *dst, int out_dtype, const uint32_t *src, size_t n)
{
	switch (out_dtype) {
	case TFS_DT_F32:
		memcpy(dst, src, 4 * n);
		break;
	case TFS_DT_F16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = tfs_hf_f32_to_f16(src[i]);
			dst[2 * i] = (uint8_t)h;
			dst[2 * i + 1] = (uint8_t)(h >> 8);
		}
		break;
	case TFS_DT_BF16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = tfs_hf_f32_to_bf16(src[i]);
			dst[2 * i] = (uint8_t)h;
			dst[2 * i + 1] = (uint8_t)(h >> 8);
		}
		break;
	case TFS_DT_Q8_0:
		for (size_t b = 0; b < n / 32; b++)
			q8_0_block(dst + 34 * b, src + 32 * b);
		break;
	}
}
