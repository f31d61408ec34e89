/*
 * hf_convert.c - float conversions bit for bit as convert_hf_to_gguf.py computes them
 * (numpy 1.24's scalar half-float code, torch's bfloat16 widening, gguf-py's BF16 and Q8_0).
 */
#include "hf_convert.h"

#include <math.h>
#include <string.h>

#include "tensorfs.h"

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

/* Nearest-even float32 to half; NaN keeps its payload's top 10 bits, made non-zero. */
uint16_t tfs_hf_f32_to_f16(uint32_t f)
{
	uint16_t sign = (uint16_t)((f & 0x80000000u) >> 16);
	uint32_t exp = f & 0x7f800000u, sig = f & 0x007fffffu;
	if (exp == 0x7f800000u) {
		if (sig == 0)
			return sign | 0x7c00u;
		uint16_t r = (uint16_t)(0x7c00u + (sig >> 13));
		return sign | (r == 0x7c00u ? 0x7c01u : r);
	}
	if (exp >= 0x47800000u)         /* 2^16 and up: overflow */
		return sign | 0x7c00u;
	if (exp <= 0x38000000u) {       /* below 2^-14: a subnormal half, or zero */
		if (exp < 0x33000000u)  /* below 2^-25: rounds to zero */
			return sign;
		unsigned e = exp >> 23;
		uint32_t m = 0x00800000u | sig;   /* value = m * 2^(e-150) */
		unsigned shift = 126 - e;         /* half subnormal unit is 2^-24 */
		uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return sign | (uint16_t)q;        /* q may reach 0x400: the smallest normal */
	}
	uint32_t h = ((exp - 0x38000000u) >> 13) | (sig >> 13);
	uint32_t rem = sig & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++;                      /* may carry into the exponent, up to infinity */
	return sign | (uint16_t)h;
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

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* gguf-py's np_roundf: half away from zero, as floor(a) + floor(2 * (a - floor(a))). */
static float round_away(float x)
{
	float a = fabsf(x), fl = floorf(a);
	float b = fl + floorf(2.0f * (a - fl));
	return x < 0 ? -b : b;
}

/* One Q8_0 block of 32 values. */
static void q8_0_block(uint8_t *dst, const uint32_t *src)
{
	float x[32], amax = 0.0f;
	bool nan = false;
	for (int j = 0; j < 32; j++) {
		x[j] = bits_f32(src[j]);
		float a = fabsf(x[j]);
		if (isnan(a))
			nan = true;    /* numpy's max propagates NaN */
		else if (a > amax)
			amax = a;
	}
	if (nan)
		amax = NAN;
	float d = amax / 127.0f;
	float id = d == 0.0f ? 0.0f : 1.0f / d;
	uint16_t dh = tfs_hf_f32_to_f16(f32_bits(d));
	dst[0] = (uint8_t)dh;
	dst[1] = (uint8_t)(dh >> 8);
	for (int j = 0; j < 32; j++) {
		float q = round_away(x[j] * id);
		/* numpy casts NaN (and anything out of int32's range) to int8 0 */
		int8_t v = isnan(q) || fabsf(q) >= 2147483648.0f ? 0 : (int8_t)(int32_t)q;
		dst[2 + j] = (uint8_t)v;
	}
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
