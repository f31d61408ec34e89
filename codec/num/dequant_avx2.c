/*
 * dequant_avx2.c - AVX2 + F16C versions of the hot float32 kernels.
 *
 * Built with -mavx2 -mfma -mf16c -ffp-contract=off and only called after
 * dtype.c has checked the CPU (tfs_deq_avx2_kernel).  Each kernel computes
 * exactly what its scalar twin in dequant.c computes: the same products and
 * differences in the same order and with the same operand order (so even NaN
 * payloads from random scale bytes match), never a fused multiply-add.
 * Halves are widened with F16C, which quiets signalling NaNs like
 * tfs_f16_to_f32.  Block layouts: see dequant.c.
 */
#include "dequant.h"

#include <immintrin.h>

/* ==== helpers ==== */

static inline float half_at(const uint8_t *p)
{
	return _cvtsh_ss(tfs_le16(p));
}

/* Stores 8 floats made from the low 8 signed bytes of v, times d (q * d). */
static inline void st8_i8(float *dst, __m128i v, __m256 d)
{
	_mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), d));
}

/* 16 signed bytes -> 16 floats times d. */
static inline void st16_i8(float *dst, __m128i v, __m256 d)
{
	st8_i8(dst, v, d);
	st8_i8(dst + 8, _mm_srli_si128(v, 8), d);
}

/* 16 unsigned bytes -> 16 floats: d * q - m. */
static inline void st16_u8_dm(float *dst, __m128i v, __m256 d, __m256 m)
{
	__m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
	__m256 b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));

	_mm256_storeu_ps(dst, _mm256_sub_ps(_mm256_mul_ps(d, a), m));
	_mm256_storeu_ps(dst + 8, _mm256_sub_ps(_mm256_mul_ps(d, b), m));
}

/* 16 signed bytes -> 16 floats: d * q. */
static inline void st16_d_i8(float *dst, __m128i v, __m256 d)
{
	__m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
	__m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));

	_mm256_storeu_ps(dst, _mm256_mul_ps(d, a));
	_mm256_storeu_ps(dst + 8, _mm256_mul_ps(d, b));
}

static inline __m128i load16(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

static inline __m256i load32(const uint8_t *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/* ==== plain types ==== */

static void f16_avx2(const void *src, float *dst, size_t n)
{
	const uint8_t *p = src;
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 a = _mm256_cvtph_ps(load16(p + 2 * i));
		__m256 b = _mm256_cvtph_ps(load16(p + 2 * i + 16));
		__m256 c = _mm256_cvtph_ps(load16(p + 2 * i + 32));
		__m256 d = _mm256_cvtph_ps(load16(p + 2 * i + 48));

		_mm256_storeu_ps(dst + i, a);
		_mm256_storeu_ps(dst + i + 8, b);
		_mm256_storeu_ps(dst + i + 16, c);
		_mm256_storeu_ps(dst + i + 24, d);
	}
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(load16(p + 2 * i)));
	for (; i < n; i++)
		dst[i] = half_at(p + 2 * i);
}

static void bf16_avx2(const void *src, float *dst, size_t n)
{
	const uint8_t *p = src;
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i v = load32(p + 2 * i);
		__m256i lo = _mm256_unpacklo_epi16(_mm256_setzero_si256(), v);
		__m256i hi = _mm256_unpackhi_epi16(_mm256_setzero_si256(), v);

		/* unpack works per 128-bit lane: lo = elems 0-3, 8-11; hi = 4-7, 12-15 */
		_mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_permute2x128_si256(lo, hi, 0x20)));
		_mm256_storeu_ps(dst + i + 8, _mm256_castsi256_ps(_mm256_permute2x128_si256(lo, hi, 0x31)));
	}
	for (; i < n; i++)
		dst[i] = tfs_bf16_to_f32(tfs_le16(p + 2 * i));
}

/* ==== legacy quants ==== */

static void q4_0_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i m4 = _mm_set1_epi8(0xf), eight = _mm_set1_epi8(8);

	for (size_t i = 0; i < nblocks; i++, b += 18, dst += 32) {
		const __m256 d = _mm256_set1_ps(half_at(b));
		const __m128i q = load16(b + 2);
		const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, m4), eight);
		const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), eight);

		st16_i8(dst, lo, d);
		st16_i8(dst + 16, hi, d);
	}
}

static void q4_1_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i m4 = _mm_set1_epi8(0xf);

	for (size_t i = 0; i < nblocks; i++, b += 20, dst += 32) {
		const __m256 d = _mm256_set1_ps(half_at(b)), m = _mm256_set1_ps(half_at(b + 2));
		const __m128i q = load16(b + 4);
		const __m128i v[2] = { _mm_and_si128(q, m4), _mm_and_si128(_mm_srli_epi16(q, 4), m4) };

		for (int h = 0; h < 2; h++) {
			__m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v[h]));
			__m256 c = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v[h], 8)));

			_mm256_storeu_ps(dst + 16 * h, _mm256_add_ps(_mm256_mul_ps(a, d), m));
			_mm256_storeu_ps(dst + 16 * h + 8, _mm256_add_ps(_mm256_mul_ps(c, d), m));
		}
	}
}

/* The 32 fifth bits of Q5_0/Q5_1 as 0x10 bytes, element order. */
static inline __m256i q5_high_bits(uint32_t qh)
{
	const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
					      2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);

	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* 16 nibble bytes -> 32 element bytes (low nibbles first, then high). */
static inline __m256i nibbles32(__m128i q)
{
	const __m128i m4 = _mm_set1_epi8(0xf);

	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

static void q5_0_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 22, dst += 32) {
		const __m256 d = _mm256_set1_ps(half_at(b));
		__m256i q = _mm256_or_si256(nibbles32(load16(b + 6)), q5_high_bits(tfs_le32(b + 2)));

		q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
		st16_i8(dst, _mm256_castsi256_si128(q), d);
		st16_i8(dst + 16, _mm256_extracti128_si256(q, 1), d);
	}
}

static void q5_1_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 24, dst += 32) {
		const __m256 d = _mm256_set1_ps(half_at(b)), m = _mm256_set1_ps(half_at(b + 2));
		const __m256i q = _mm256_or_si256(nibbles32(load16(b + 8)), q5_high_bits(tfs_le32(b + 4)));

		for (int k = 0; k < 4; k++) {
			__m128i part = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
			__m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));

			_mm256_storeu_ps(dst + 8 * k, _mm256_add_ps(_mm256_mul_ps(f, d), m));
		}
	}
}

static void q8_0_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 34, dst += 32) {
		const __m256 d = _mm256_set1_ps(half_at(b));

		st16_i8(dst, load16(b + 2), d);
		st16_i8(dst + 16, load16(b + 18), d);
	}
}

static void q8_1_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 36, dst += 32) {
		const __m256 d = _mm256_set1_ps(half_at(b));

		st16_i8(dst, load16(b + 4), d);
		st16_i8(dst + 16, load16(b + 20), d);
	}
}

/* ==== K-quants ==== */

static void q2_k_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i m3 = _mm_set1_epi8(3);

	for (size_t i = 0; i < nblocks; i++, b += 84) {
		const uint8_t *sc = b, *q = b + 16;
		const float d = half_at(b + 80), dmin = half_at(b + 82);

		for (int h = 0; h < 2; h++, q += 32) {
			const __m128i q0 = load16(q), q1 = load16(q + 16);

			for (int s = 0; s < 4; s++) {
				const __m128i sh = _mm_cvtsi32_si128(2 * s);

				for (int half = 0; half < 2; half++, dst += 16) {
					const uint8_t scb = *sc++;
					const __m256 dl = _mm256_set1_ps(d * (float)(scb & 0xf));
					const __m256 ml = _mm256_set1_ps(dmin * (float)(scb >> 4));
					__m128i v = _mm_and_si128(_mm_srl_epi16(half ? q1 : q0, sh), m3);

					st16_u8_dm(dst, v, dl, ml);
				}
			}
		}
	}
}

static void q3_k_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i m3 = _mm_set1_epi8(3), four = _mm_set1_epi8(4);

	for (size_t i = 0; i < nblocks; i++, b += 110) {
		const uint8_t *q = b + 32;
		const uint8_t *p = b + 96;
		const float d = half_at(b + 108);
		const __m128i hm[2] = { load16(b), load16(b + 16) };
		int scales[16], is = 0, bit = 0;

		for (int j = 0; j < 16; j++) {
			int lo = (j < 8 ? p[j] : p[j - 8] >> 4) & 0xf;
			int hi = (p[8 + (j % 4)] >> (2 * (j / 4))) & 3;

			scales[j] = (lo | hi << 4) - 32;
		}
		for (int h = 0; h < 2; h++, q += 32) {
			const __m128i qv[2] = { load16(q), load16(q + 16) };

			for (int s = 0; s < 4; s++, bit++) {
				const __m128i sh = _mm_cvtsi32_si128(2 * s);
				const __m128i mask = _mm_set1_epi8((char)(1 << bit));

				for (int half = 0; half < 2; half++, dst += 16) {
					const __m256 dl = _mm256_set1_ps(d * (float)scales[is++]);
					__m128i v = _mm_and_si128(_mm_srl_epi16(qv[half], sh), m3);
					__m128i clear = _mm_cmpeq_epi8(_mm_and_si128(hm[half], mask),
								       _mm_setzero_si128());

					v = _mm_sub_epi8(v, _mm_and_si128(clear, four));
					st16_d_i8(dst, v, dl);
				}
			}
		}
	}
}

static inline void k4_scale_min(const uint8_t *p, int j, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = p[j] & 63;
		*m = p[j + 4] & 63;
	} else {
		*sc = (uint8_t)((p[j + 4] & 0xf) | ((p[j - 4] >> 6) << 4));
		*m = (uint8_t)((p[j + 4] >> 4) | ((p[j] >> 6) << 4));
	}
}

/* 32 unsigned element bytes -> 32 floats: d * q - m. */
static inline void st32_u8_dm(float *dst, __m256i v, __m256 d, __m256 m)
{
	st16_u8_dm(dst, _mm256_castsi256_si128(v), d, m);
	st16_u8_dm(dst + 16, _mm256_extracti128_si256(v, 1), d, m);
}

static void q4_k_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256i m4 = _mm256_set1_epi8(0xf);

	for (size_t i = 0; i < nblocks; i++, b += 144) {
		const float d = half_at(b), dmin = half_at(b + 2);
		const uint8_t *q = b + 16;

		for (int c = 0; c < 4; c++, q += 32, dst += 64) {
			uint8_t sc, m;
			const __m256i v = load32(q);

			k4_scale_min(b + 4, 2 * c, &sc, &m);
			const __m256 d1 = _mm256_set1_ps(d * (float)sc), m1 = _mm256_set1_ps(dmin * (float)m);
			k4_scale_min(b + 4, 2 * c + 1, &sc, &m);
			const __m256 d2 = _mm256_set1_ps(d * (float)sc), m2 = _mm256_set1_ps(dmin * (float)m);

			st32_u8_dm(dst, _mm256_and_si256(v, m4), d1, m1);
			st32_u8_dm(dst + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), d2, m2);
		}
	}
}

static void q5_k_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256i m4 = _mm256_set1_epi8(0xf), one = _mm256_set1_epi8(1);

	for (size_t i = 0; i < nblocks; i++, b += 176) {
		const float d = half_at(b), dmin = half_at(b + 2);
		const uint8_t *q = b + 48;
		const __m256i qh = load32(b + 16);

		for (int c = 0; c < 4; c++, q += 32, dst += 64) {
			uint8_t sc, m;
			const __m256i v = load32(q);
			const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), one);
			const __m256i h2 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + 1)), one);

			k4_scale_min(b + 4, 2 * c, &sc, &m);
			const __m256 d1 = _mm256_set1_ps(d * (float)sc), m1 = _mm256_set1_ps(dmin * (float)m);
			k4_scale_min(b + 4, 2 * c + 1, &sc, &m);
			const __m256 d2 = _mm256_set1_ps(d * (float)sc), m2 = _mm256_set1_ps(dmin * (float)m);

			st32_u8_dm(dst, _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_slli_epi16(h1, 4)), d1, m1);
			st32_u8_dm(dst + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
							     _mm256_slli_epi16(h2, 4)), d2, m2);
		}
	}
}

/* 16 signed bytes -> 16 floats: ds * q, with ds = d * scale precomputed. */
static void q6_k_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256i m4 = _mm256_set1_epi8(0xf), m3 = _mm256_set1_epi8(3);
	const __m256i off = _mm256_set1_epi8(32);

	for (size_t i = 0; i < nblocks; i++, b += 210) {
		const float d = half_at(b + 208);
		const uint8_t *ql = b, *qh = b + 128;
		const int8_t *sc = (const int8_t *)(b + 192);
		__m256 ds[16];

		for (int k = 0; k < 16; k++)
			ds[k] = _mm256_set1_ps(d * (float)sc[k]);
		for (int h = 0; h < 2; h++, ql += 64, qh += 32, dst += 128) {
			const __m256i l0 = load32(ql), l1 = load32(ql + 32), hv = load32(qh);
			__m256i q[4];

			q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
					       _mm256_slli_epi16(_mm256_and_si256(hv, m3), 4));
			q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2), m3), 4));
			q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 4), m3), 4));
			q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 6), m3), 4));
			for (int k = 0; k < 4; k++) {
				const __m256i v = _mm256_sub_epi8(q[k], off);

				/* elements 32k + 0..15 use scale 8h + 2k, 16..31 use 8h + 2k + 1 */
				st16_d_i8(dst + 32 * k, _mm256_castsi256_si128(v), ds[8 * h + 2 * k]);
				st16_d_i8(dst + 32 * k + 16, _mm256_extracti128_si256(v, 1), ds[8 * h + 2 * k + 1]);
			}
		}
	}
}

static void q8_k_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 292, dst += 256) {
		float df;

		memcpy(&df, b, 4);
		const __m256 d = _mm256_set1_ps(df);
		for (int j = 0; j < 256; j += 16)
			st16_d_i8(dst + j, load16(b + 4 + j), d);
	}
}

/* ==== ternary, 1- and 2-bit ==== */

static void tq2_0_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);

	for (size_t i = 0; i < nblocks; i++, b += 66) {
		const __m256 d = _mm256_set1_ps(half_at(b + 64));

		for (int c = 0; c < 2; c++) {
			const __m256i v = load32(b + 32 * c);

			for (int s = 0; s < 4; s++, dst += 32) {
				__m256i q = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * s)), m3);

				q = _mm256_sub_epi8(q, one);
				st16_i8(dst, _mm256_castsi256_si128(q), d);
				st16_i8(dst + 16, _mm256_extracti128_si256(q, 1), d);
			}
		}
	}
}

/* 16 TQ1_0 bytes -> digit n of each, minus one, times d: 16 floats. */
static inline void tq1_16(float *dst, __m128i x, int pow3, __m256 d)
{
	__m256i w = _mm256_cvtepu8_epi16(x);

	/* digit = ((x * 3^n mod 256) * 3) >> 8 */
	w = _mm256_and_si256(_mm256_mullo_epi16(w, _mm256_set1_epi16((short)pow3)), _mm256_set1_epi16(0xff));
	w = _mm256_srli_epi16(_mm256_mullo_epi16(w, _mm256_set1_epi16(3)), 8);
	w = _mm256_sub_epi16(w, _mm256_set1_epi16(1));
	_mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(w))), d));
	_mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(w, 1))), d));
}

static void tq1_0_avx2(const void *src, float *dst, size_t nblocks)
{
	static const int pow3[5] = { 1, 3, 9, 27, 81 };
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 54) {
		const float df = half_at(b + 52);
		const __m256 d = _mm256_set1_ps(df);
		const __m128i x0 = load16(b), x1 = load16(b + 16), x2 = load16(b + 32);

		for (int n = 0; n < 5; n++, dst += 32) {
			tq1_16(dst, x0, pow3[n], d);
			tq1_16(dst + 16, x1, pow3[n], d);
		}
		for (int n = 0; n < 5; n++, dst += 16)
			tq1_16(dst, x2, pow3[n], d);
		for (int n = 0; n < 4; n++)
			for (int j = 0; j < 4; j++) {
				uint8_t q = (uint8_t)(b[48 + j] * pow3[n]);

				*dst++ = (float)((int)(((unsigned)q * 3) >> 8) - 1) * df;
			}
	}
}

static void q1_0_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);

	for (size_t i = 0; i < nblocks; i++, b += 18, dst += 128) {
		const float df = half_at(b);
		const __m256 d = _mm256_set1_ps(df), nd = _mm256_set1_ps(-df);

		for (int j = 0; j < 16; j++) {
			__m256i m = _mm256_and_si256(_mm256_set1_epi32(b[2 + j]), bit);

			m = _mm256_cmpeq_epi32(m, bit);
			_mm256_storeu_ps(dst + 8 * j, _mm256_blendv_ps(nd, d, _mm256_castsi256_ps(m)));
		}
	}
}

static void q2_0_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
	const __m256i m3 = _mm256_set1_epi32(3), one = _mm256_set1_epi32(1);

	for (size_t i = 0; i < nblocks; i++, b += 18, dst += 64) {
		const __m256 d = _mm256_set1_ps(half_at(b));

		for (int j = 0; j < 8; j++) {
			__m256i q = _mm256_srlv_epi32(_mm256_set1_epi32(tfs_le16(b + 2 + 2 * j)), shifts);

			q = _mm256_sub_epi32(_mm256_and_si256(q, m3), one);
			_mm256_storeu_ps(dst + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
		}
	}
}

/* ==== code-book quants (byte lookups with pshufb) ==== */

/* 16 nibble bytes -> two 16-byte vectors of table values (low nibbles, high nibbles). */
static inline void lut_nibbles(__m128i q, __m128i lut, __m128i *lo, __m128i *hi)
{
	const __m128i m4 = _mm_set1_epi8(0xf);

	*lo = _mm_shuffle_epi8(lut, _mm_and_si128(q, m4));
	*hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
}

static void iq4_nl_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i lut = _mm_loadu_si128((const __m128i *)tfs_kvalues_iq4nl);

	for (size_t i = 0; i < nblocks; i++, b += 18, dst += 32) {
		const __m256 d = _mm256_set1_ps(half_at(b));
		__m128i lo, hi;

		lut_nibbles(load16(b + 2), lut, &lo, &hi);
		st16_d_i8(dst, lo, d);
		st16_d_i8(dst + 16, hi, d);
	}
}

static void iq4_xs_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i lut = _mm_loadu_si128((const __m128i *)tfs_kvalues_iq4nl);

	for (size_t i = 0; i < nblocks; i++, b += 136) {
		const float d = half_at(b);
		const uint16_t sh = tfs_le16(b + 2);
		const uint8_t *sl = b + 4, *qs = b + 8;

		for (int ib = 0; ib < 8; ib++, qs += 16, dst += 32) {
			const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((sh >> (2 * ib)) & 3) << 4;
			const __m256 dl = _mm256_set1_ps(d * (float)(ls - 32));
			__m128i lo, hi;

			lut_nibbles(load16(qs), lut, &lo, &hi);
			st16_d_i8(dst, lo, dl);
			st16_d_i8(dst + 16, hi, dl);
		}
	}
}

static void mxfp4_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i lut = _mm_loadu_si128((const __m128i *)tfs_kvalues_fp4x2);

	for (size_t i = 0; i < nblocks; i++, b += 17, dst += 32) {
		const __m256 d = _mm256_set1_ps(tfs_e8m0_half_to_f32(b[0]));
		__m128i lo, hi;

		lut_nibbles(load16(b + 1), lut, &lo, &hi);
		st16_i8(dst, lo, d);
		st16_i8(dst + 16, hi, d);
	}
}

static void nvfp4_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m128i lut = _mm_loadu_si128((const __m128i *)tfs_kvalues_fp4x2);
	const __m128i m4 = _mm_set1_epi8(0xf);

	for (size_t i = 0; i < nblocks; i++, b += 36) {
		for (int s = 0; s < 4; s++, dst += 16) {
			const __m256 d = _mm256_set1_ps(tfs_ue4m3_half_to_f32(b[s]));
			const __m128i q = _mm_loadl_epi64((const __m128i *)(b + 4 + 8 * s));
			/* low nibbles in bytes 0..7, high nibbles in 8..15 */
			const __m128i idx = _mm_unpacklo_epi64(_mm_and_si128(q, m4),
							       _mm_and_si128(_mm_srli_epi16(q, 4), m4));

			st16_i8(dst, _mm_shuffle_epi8(lut, idx), d);
		}
	}
}

/* ==== grid quants ==== */

/* The sign bit (0x80000000) in each lane whose bit of signs is set. */
static inline __m256 signs8(uint32_t signs)
{
	const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
	__m256i m = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)signs), bit), bit);

	return _mm256_castsi256_ps(_mm256_slli_epi32(m, 31));
}

/* +-(db * g) for the 8 magnitudes of one grid entry (sign flips as in dequant.c). */
static inline void grid8(float *y, uint64_t grid, __m256 db, uint32_t signs)
{
	__m256 g = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)grid)));

	_mm256_storeu_ps(y, _mm256_xor_ps(_mm256_mul_ps(db, g), signs8(signs)));
}

static inline uint32_t iq_signs(uint32_t seven)
{
	return seven | ((uint32_t)__builtin_parity(seven) << 7);
}

static void iq2_xxs_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 66) {
		const float d = half_at(b);

		for (int ib = 0; ib < 8; ib++) {
			const uint8_t *idx = b + 2 + 8 * ib;
			const uint32_t aux = tfs_le32(idx + 4);
			const __m256 db = _mm256_set1_ps(d * (0.5f + (float)(aux >> 28)) * 0.25f);

			for (int l = 0; l < 4; l++, dst += 8)
				grid8(dst, tfs_grid_iq2xxs[idx[l]], db, iq_signs((aux >> (7 * l)) & 127));
		}
	}
}

static void iq2_xs_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 74) {
		const float d = half_at(b);
		const uint8_t *scales = b + 66;

		for (int ib = 0; ib < 8; ib++) {
			const __m256 db0 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] & 0xf)) * 0.25f);
			const __m256 db1 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f);

			for (int l = 0; l < 4; l++, dst += 8) {
				uint16_t q = tfs_le16(b + 2 + 2 * (4 * ib + l));

				grid8(dst, tfs_grid_iq2xs[q & 511], l < 2 ? db0 : db1, iq_signs(q >> 9));
			}
		}
	}
}

static void iq2_s_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 82) {
		const float d = half_at(b);
		const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;

		for (int ib = 0; ib < 8; ib++) {
			const __m256 db0 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] & 0xf)) * 0.25f);
			const __m256 db1 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f);

			for (int l = 0; l < 4; l++, dst += 8) {
				unsigned idx = qs[4 * ib + l] | ((qh[ib] >> (2 * l)) & 3u) << 8;

				grid8(dst, tfs_grid_iq2s[idx], l < 2 ? db0 : db1, signs[4 * ib + l]);
			}
		}
	}
}

/* Two 4-value iq3 grid entries as one 8-value entry. */
static inline uint64_t grid_pair(const uint32_t *grid, unsigned i1, unsigned i2)
{
	return grid[i1] | (uint64_t)grid[i2] << 32;
}

static void iq3_xxs_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 98) {
		const float d = half_at(b);
		const uint8_t *qs = b + 2;

		for (int ib = 0; ib < 8; ib++, qs += 8) {
			const uint32_t aux = tfs_le32(b + 66 + 4 * ib);
			const __m256 db = _mm256_set1_ps(d * (0.5f + (float)(aux >> 28)) * 0.5f);

			for (int l = 0; l < 4; l++, dst += 8)
				grid8(dst, grid_pair(tfs_grid_iq3xxs, qs[2 * l], qs[2 * l + 1]), db,
				      iq_signs((aux >> (7 * l)) & 127));
		}
	}
}

static void iq3_s_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += 110) {
		const float d = half_at(b);
		const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;

		for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
			const int s = ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 0xf;
			const __m256 db = _mm256_set1_ps(d * (float)(1 + 2 * s));

			for (int l = 0; l < 4; l++, dst += 8) {
				unsigned i1 = qs[2 * l] | ((qh[ib] >> (2 * l)) & 1u) << 8;
				unsigned i2 = qs[2 * l + 1] | ((qh[ib] >> (2 * l + 1)) & 1u) << 8;

				grid8(dst, grid_pair(tfs_grid_iq3s, i1, i2), db, signs[l]);
			}
		}
	}
}

/* dl * (g + delta) for the 8 signed bytes of an iq1s grid entry. */
static inline void grid1(float *y, uint64_t grid, __m256 dl, __m256 delta)
{
	__m256 g = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128((long long)grid)));

	_mm256_storeu_ps(y, _mm256_mul_ps(dl, _mm256_add_ps(g, delta)));
}

static void iq1_s_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256 pos = _mm256_set1_ps(0.125f), neg = _mm256_set1_ps(-0.125f);

	for (size_t i = 0; i < nblocks; i++, b += 50) {
		const float d = half_at(b);
		const uint8_t *qs = b + 2;

		for (int ib = 0; ib < 8; ib++, qs += 4) {
			const uint16_t qh = tfs_le16(b + 34 + 2 * ib);
			const __m256 dl = _mm256_set1_ps(d * (float)(2 * ((qh >> 12) & 7) + 1));
			const __m256 delta = qh & 0x8000 ? neg : pos;

			for (int l = 0; l < 4; l++, dst += 8)
				grid1(dst, tfs_grid_iq1s[qs[l] | ((qh >> (3 * l)) & 7u) << 8], dl, delta);
		}
	}
}

static void iq1_m_avx2(const void *src, float *dst, size_t nblocks)
{
	const uint8_t *b = src;
	const __m256 pos = _mm256_set1_ps(0.125f), neg = _mm256_set1_ps(-0.125f);

	for (size_t i = 0; i < nblocks; i++, b += 56) {
		const uint8_t *qs = b, *qh = b + 32;
		uint16_t sc[4];

		for (int k = 0; k < 4; k++)
			sc[k] = tfs_le16(b + 48 + 2 * k);
		const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
						  ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
		const float d = _cvtsh_ss(dbits);

		for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
			const unsigned shift = 6 * (ib % 2);
			const __m256 dl1 = _mm256_set1_ps(d * (float)(2 * ((sc[ib / 2] >> shift) & 7) + 1));
			const __m256 dl2 = _mm256_set1_ps(d * (float)(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1));

			for (int l = 0; l < 4; l++, dst += 8) {
				const unsigned nib = (qh[l / 2] >> (4 * (l % 2))) & 0xf;

				grid1(dst, tfs_grid_iq1s[qs[l] | (nib & 7) << 8], l < 2 ? dl1 : dl2,
				      nib & 8 ? neg : pos);
			}
		}
	}
}

/* ==== the table ==== */

tfs_to_f32_fn tfs_deq_avx2_kernel(int id)
{
	switch (id) {
	case TFS_DT_F16: return f16_avx2;
	case TFS_DT_BF16: return bf16_avx2;
	case TFS_DT_Q4_0: return q4_0_avx2;
	case TFS_DT_Q4_1: return q4_1_avx2;
	case TFS_DT_Q5_0: return q5_0_avx2;
	case TFS_DT_Q5_1: return q5_1_avx2;
	case TFS_DT_Q8_0: return q8_0_avx2;
	case TFS_DT_Q8_1: return q8_1_avx2;
	case TFS_DT_Q2_K: return q2_k_avx2;
	case TFS_DT_Q3_K: return q3_k_avx2;
	case TFS_DT_Q4_K: return q4_k_avx2;
	case TFS_DT_Q5_K: return q5_k_avx2;
	case TFS_DT_Q6_K: return q6_k_avx2;
	case TFS_DT_Q8_K: return q8_k_avx2;
	case TFS_DT_TQ1_0: return tq1_0_avx2;
	case TFS_DT_TQ2_0: return tq2_0_avx2;
	case TFS_DT_Q1_0: return q1_0_avx2;
	case TFS_DT_Q2_0: return q2_0_avx2;
	case TFS_DT_IQ4_NL: return iq4_nl_avx2;
	case TFS_DT_IQ4_XS: return iq4_xs_avx2;
	case TFS_DT_MXFP4: return mxfp4_avx2;
	case TFS_DT_NVFP4: return nvfp4_avx2;
	case TFS_DT_IQ2_XXS: return iq2_xxs_avx2;
	case TFS_DT_IQ2_XS: return iq2_xs_avx2;
	case TFS_DT_IQ2_S: return iq2_s_avx2;
	case TFS_DT_IQ3_XXS: return iq3_xxs_avx2;
	case TFS_DT_IQ3_S: return iq3_s_avx2;
	case TFS_DT_IQ1_S: return iq1_s_avx2;
	case TFS_DT_IQ1_M: return iq1_m_avx2;
	default: return NULL;
	}
}
