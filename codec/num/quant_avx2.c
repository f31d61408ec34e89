/*
 * quant_avx2.c - AVX2 + F16C versions of the costly parts of quant.c.
 *
 * Built with -mavx2 -mfma -mf16c -ffp-contract=off and only called after quant.c has
 * checked the CPU.  The scale searches of the K-quants are sequential sums over a
 * sub-block, so they cannot be split across lanes without changing the rounding; instead
 * each of the eight lanes runs one whole sub-block, with the scalar code's operations in
 * the scalar code's order (and never a fused multiply-add).  Where the scalar code branches,
 * the lanes compute both sides and blend.
 */
#include "dequant.h"
#include "quant_impl.h"

#include <immintrin.h>
#include <math.h>

/* ==== helpers ==== */

/* Round half to even through the 1.5 * 2^23 trick, as nearest_int in quant.c. */
static inline __m256i nearest8(__m256 v)
{
	__m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.f)));

	return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
				_mm256_set1_epi32(0x00400000));
}

static inline __m256i clamp8(__m256i v, int lo, int hi)
{
	return _mm256_max_epi32(_mm256_set1_epi32(lo), _mm256_min_epi32(_mm256_set1_epi32(hi), v));
}

static inline __m256 absf8(__m256 v)
{
	return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

/* x (8 sub-blocks of n, lane-major) into t[i][lane]. */
static void transpose_in(int n, const float *x, float *t)
{
	for (int j = 0; j < 8; j++)
		for (int i = 0; i < n; i++)
			t[8 * i + j] = x[n * j + i];
}

static void levels_out(int n, const __m256i *Lv, int add, uint8_t *L)
{
	int32_t tmp[8];

	for (int i = 0; i < n; i++) {
		_mm256_storeu_si256((__m256i *)tmp, Lv[i]);
		for (int j = 0; j < 8; j++)
			L[n * j + i] = (uint8_t)(tmp[j] + add);
	}
}

/* ==== affine fits (Q2_K, Q4_K, Q5_K) ==== */

typedef struct {
	int n;
	__m256 xt[32], wt[32];
	__m256 sum_w, sum_x, mx;
	__m256i L[32], Laux[32];
} affine_lanes;

/* The weighted error of levels Lv at scale sc and min mn. */
static __m256 affine_error(const affine_lanes *s, const __m256i *Lv, __m256 sc, __m256 mn,
			   bool use_mad)
{
	__m256 err = _mm256_setzero_ps();

	for (int i = 0; i < s->n; i++) {
		__m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(sc, _mm256_cvtepi32_ps(Lv[i])), mn),
					    s->xt[i]);

		diff = use_mad ? absf8(diff) : _mm256_mul_ps(diff, diff);
		err = _mm256_add_ps(err, _mm256_mul_ps(s->wt[i], diff));
	}
	return err;
}

/* One candidate scale: levels into Laux, and the least-squares scale and min they give;
 * returns the lanes where that fit beats best_err (and updates it, scale, mn and L there). */
static void affine_try(affine_lanes *s, const tfs_affine_search *a, int is, __m256 *best_err,
		       __m256 *scale, __m256 *mn)
{
	const __m256 iscale = _mm256_div_ps(_mm256_set1_ps(a->rmin + a->rdelta * is + a->nmax),
					    _mm256_sub_ps(s->mx, *mn));
	__m256 sum_l = _mm256_setzero_ps(), sum_l2 = sum_l, sum_xl = sum_l;

	for (int i = 0; i < s->n; i++) {
		__m256i l = clamp8(nearest8(_mm256_mul_ps(iscale, _mm256_sub_ps(s->xt[i], *mn))), 0, a->nmax);
		__m256 lf = _mm256_cvtepi32_ps(l), wl = _mm256_mul_ps(s->wt[i], lf);

		s->Laux[i] = l;
		sum_l = _mm256_add_ps(sum_l, wl);
		sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, lf));
		sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, s->xt[i]));
	}
	const __m256 D = _mm256_sub_ps(_mm256_mul_ps(s->sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
	const __m256 ok = _mm256_cmp_ps(D, _mm256_setzero_ps(), _CMP_GT_OQ);

	if (_mm256_movemask_ps(ok) == 0)
		return;
	__m256 this_scale = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(s->sum_w, sum_xl),
							_mm256_mul_ps(s->sum_x, sum_l)), D);
	__m256 this_min = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_l2, s->sum_x),
						      _mm256_mul_ps(sum_l, sum_xl)), D);
	const __m256 pos = _mm256_cmp_ps(this_min, _mm256_setzero_ps(), _CMP_GT_OQ);

	this_min = _mm256_blendv_ps(this_min, _mm256_setzero_ps(), pos);
	this_scale = _mm256_blendv_ps(this_scale, _mm256_div_ps(sum_xl, sum_l2), pos);
	const __m256 err = affine_error(s, s->Laux, this_scale, this_min, a->use_mad);
	const __m256 better = _mm256_and_ps(ok, _mm256_cmp_ps(err, *best_err, _CMP_LT_OQ));

	if (_mm256_movemask_ps(better) == 0)
		return;
	for (int i = 0; i < s->n; i++)
		s->L[i] = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(s->L[i]),
							       _mm256_castsi256_ps(s->Laux[i]), better));
	*best_err = _mm256_blendv_ps(*best_err, err, better);
	*scale = _mm256_blendv_ps(*scale, this_scale, better);
	*mn = _mm256_blendv_ps(*mn, this_min, better);
}

void tfs_fit_affine8_avx2(int n, const float *x, const float *w, uint8_t *L, float *scale_out,
			  float *neg_min, const tfs_affine_search *a)
{
	affine_lanes s;
	float xt[32 * 8], wt[32 * 8];

	memset(&s, 0, sizeof(s));
	s.n = n;
	transpose_in(n, x, xt);
	transpose_in(n, w, wt);
	for (int i = 0; i < n; i++) {
		s.xt[i] = _mm256_loadu_ps(xt + 8 * i);
		s.wt[i] = _mm256_loadu_ps(wt + 8 * i);
	}
	__m256 mn = s.xt[0], mx = s.xt[0];

	s.sum_w = s.wt[0];
	s.sum_x = _mm256_mul_ps(s.sum_w, s.xt[0]);
	for (int i = 1; i < n; i++) {
		mn = _mm256_min_ps(s.xt[i], mn);   /* x < mn ? x : mn, as the scalar test */
		mx = _mm256_max_ps(s.xt[i], mx);
		s.sum_w = _mm256_add_ps(s.sum_w, s.wt[i]);
		s.sum_x = _mm256_add_ps(s.sum_x, _mm256_mul_ps(s.wt[i], s.xt[i]));
	}
	mn = _mm256_blendv_ps(mn, _mm256_setzero_ps(), _mm256_cmp_ps(mn, _mm256_setzero_ps(), _CMP_GT_OQ));
	s.mx = mx;
	const __m256 flat = _mm256_cmp_ps(mx, mn, _CMP_EQ_OQ), flat_min = mn;
	const __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)a->nmax), _mm256_sub_ps(mx, mn));
	__m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);

	for (int i = 0; i < n; i++)
		s.L[i] = clamp8(nearest8(_mm256_mul_ps(iscale, _mm256_sub_ps(s.xt[i], mn))), 0, a->nmax);
	__m256 best_err = affine_error(&s, s.L, scale, mn, a->use_mad);

	for (int is = 0; is <= a->nstep; is++)
		affine_try(&s, a, is, &best_err, &scale, &mn);
	/* a flat sub-block (max == min) has no levels and no scale */
	for (int i = 0; i < n; i++)
		s.L[i] = _mm256_castps_si256(_mm256_andnot_ps(flat, _mm256_castsi256_ps(s.L[i])));
	scale = _mm256_andnot_ps(flat, scale);
	mn = _mm256_blendv_ps(mn, flat_min, flat);
	levels_out(n, s.L, 0, L);
	_mm256_storeu_ps(scale_out, scale);
	_mm256_storeu_ps(neg_min, _mm256_xor_ps(mn, _mm256_set1_ps(-0.0f)));   /* -mn: -0 for +0 */
}

/* ==== symmetric fits (Q6_K) ==== */

/* Sums of x^2-weighted x*l and l*l for levels at iscale, the levels into Lv (plus nmax). */
static void symmetric_pass(int n, const __m256 *xt, const __m256 *wt, int nmax, __m256 iscale,
			   __m256i *Lv, __m256 *sumlx, __m256 *suml2)
{
	__m256 slx = _mm256_setzero_ps(), sl2 = slx;

	for (int i = 0; i < n; i++) {
		__m256i l = clamp8(nearest8(_mm256_mul_ps(iscale, xt[i])), -nmax, nmax - 1);
		__m256 lf = _mm256_cvtepi32_ps(l), w = wt[i];

		Lv[i] = _mm256_add_epi32(l, _mm256_set1_epi32(nmax));
		slx = _mm256_add_ps(slx, _mm256_mul_ps(_mm256_mul_ps(w, xt[i]), lf));
		sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w, lf), lf));
	}
	*sumlx = slx;
	*suml2 = sl2;
}

void tfs_fit_symmetric8_avx2(int n, int nmax, const float *x, const float *w, int8_t *L,
			     float *scale_out)
{
	float t[32 * 8];
	__m256 xt[32], wt[32], amax = _mm256_setzero_ps(), max = amax, sumlx, suml2;
	__m256i Lv[32], Laux[32];

	if (w) {
		transpose_in(n, w, t);
		for (int i = 0; i < n; i++)
			wt[i] = _mm256_loadu_ps(t + 8 * i);
	}
	transpose_in(n, x, t);
	for (int i = 0; i < n; i++) {
		xt[i] = _mm256_loadu_ps(t + 8 * i);
		if (!w)
			wt[i] = _mm256_mul_ps(xt[i], xt[i]);
		__m256 ax = absf8(xt[i]), gt = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);

		amax = _mm256_blendv_ps(amax, ax, gt);
		max = _mm256_blendv_ps(max, xt[i], gt);
	}
	const __m256 zero = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_LT_OQ);
	symmetric_pass(n, xt, wt, nmax, _mm256_div_ps(_mm256_set1_ps((float)-nmax), max), Lv, &sumlx,
		       &suml2);
	__m256 scale = _mm256_blendv_ps(_mm256_setzero_ps(), _mm256_div_ps(sumlx, suml2),
					_mm256_cmp_ps(suml2, _mm256_setzero_ps(), _CMP_NEQ_UQ));
	__m256 best = _mm256_mul_ps(scale, sumlx);

	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		const __m256 iscale = _mm256_div_ps(_mm256_set1_ps(-(nmax + 0.1f * is)), max);

		symmetric_pass(n, xt, wt, nmax, iscale, Laux, &sumlx, &suml2);
		const __m256 better = _mm256_and_ps(
			_mm256_cmp_ps(suml2, _mm256_setzero_ps(), _CMP_GT_OQ),
			_mm256_cmp_ps(_mm256_mul_ps(sumlx, sumlx), _mm256_mul_ps(best, suml2), _CMP_GT_OQ));

		if (_mm256_movemask_ps(better) == 0)
			continue;
		for (int i = 0; i < n; i++)
			Lv[i] = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(Lv[i]),
								     _mm256_castsi256_ps(Laux[i]), better));
		const __m256 sc = _mm256_div_ps(sumlx, suml2);

		scale = _mm256_blendv_ps(scale, sc, better);
		best = _mm256_blendv_ps(best, _mm256_mul_ps(sc, sumlx), better);
	}
	for (int i = 0; i < n; i++)
		Lv[i] = _mm256_castps_si256(_mm256_andnot_ps(zero, _mm256_castsi256_ps(Lv[i])));
	levels_out(n, Lv, 0, (uint8_t *)L);
	_mm256_storeu_ps(scale_out, _mm256_andnot_ps(zero, scale));
}

/* ==== halves and bfloat16 ==== */

void tfs_f32_to_f16_avx2(const float *x, uint8_t *y, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		__m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);

		if (_mm256_movemask_ps(nan)) {   /* NaN: 0x7E00 with its sign, not its payload */
			for (int k = 0; k < 8; k++) {
				uint16_t hk = tfs_f32_to_f16(x[i + k]);

				memcpy(y + 2 * (i + k), &hk, 2);
			}
			continue;
		}
		_mm_storeu_si128((__m128i *)(y + 2 * i), h);
	}
	for (; i < n; i++) {
		uint16_t h = tfs_f32_to_f16(x[i]);

		memcpy(y + 2 * i, &h, 2);
	}
}

void tfs_f32_to_bf16_avx2(const float *x, uint8_t *y, size_t n)
{
	const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
	const __m256i absmask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i r[2];

		for (int h = 0; h < 2; h++) {
			__m256i u = _mm256_loadu_si256((const __m256i *)(x + i + 8 * h));
			__m256i rounded = _mm256_srli_epi32(
				_mm256_add_epi32(_mm256_add_epi32(u, bias),
						 _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), 16);
			__m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
			__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);

			r[h] = _mm256_blendv_epi8(rounded, quiet, nan);
		}
		/* 16 results of 16 bits: pack (no saturation: every value < 65536) and undo the
		 * lane interleave */
		__m256i p = _mm256_packus_epi32(r[0], r[1]);

		p = _mm256_permute4x64_epi64(p, 0xd8);
		_mm256_storeu_si256((__m256i *)(y + 2 * i), p);
	}
	for (; i < n; i++) {
		uint16_t h = tfs_f32_to_bf16(x[i]);

		memcpy(y + 2 * i, &h, 2);
	}
}

/* ==== element loops of the plain blocks ==== */

/* The low bytes of 32 int32 results (4 vectors), in order. */
static inline __m256i low_bytes32(const __m256i v[4])
{
	const __m256i m = _mm256_set1_epi32(0xff);
	__m256i a = _mm256_packus_epi32(_mm256_and_si256(v[0], m), _mm256_and_si256(v[1], m));
	__m256i b = _mm256_packus_epi32(_mm256_and_si256(v[2], m), _mm256_and_si256(v[3], m));

	/* undo the per-128-bit-lane interleave of the two packs */
	return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, b),
					   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline void store_low_bytes32(const __m256i v[4], uint8_t *out)
{
	_mm256_storeu_si256((__m256i *)out, low_bytes32(v));
}

/* Nibbles of 32 levels (int32, 0..15 in their low bytes): byte j = q[j] | q[16 + j] << 4. */
static inline void store_nibbles32(const __m256i v[4], uint8_t *out)
{
	const __m256i p = low_bytes32(v);
	const __m128i lo = _mm256_castsi256_si128(p), hi = _mm256_extracti128_si256(p, 1);

	_mm_storeu_si128((__m128i *)out,
			 _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi8(0x0f)),
				      _mm_slli_epi16(_mm_and_si128(hi, _mm_set1_epi8(0x0f)), 4)));
}

/* trunc((x - off) * id + add) for 32 values; cap > 0: the low byte as int8, then min(cap, it)
 * (what the scalar code's int8 casts and MIN do). */
static inline void levels32(const float *x, float off, float id, float add, int cap, __m256i v[4])
{
	for (int k = 0; k < 4; k++) {
		__m256 p = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + 8 * k),
								     _mm256_set1_ps(off)),
						       _mm256_set1_ps(id)), _mm256_set1_ps(add));
		__m256i t = _mm256_cvttps_epi32(p);

		if (cap > 0)
			t = _mm256_min_epi32(_mm256_srai_epi32(_mm256_slli_epi32(t, 24), 24),
					     _mm256_set1_epi32(cap));
		v[k] = t;
	}
}

void tfs_q4_nibbles_avx2(const float *x, float off, float id, float add, uint8_t *q)
{
	__m256i v[4];

	levels32(x, off, id, add, 15, v);
	store_nibbles32(v, q);
}

uint32_t tfs_q5_levels_avx2(const float *x, float off, float id, float add, int cap, uint8_t *q)
{
	__m256i v[4];

	levels32(x, off, id, add, cap, v);
	store_nibbles32(v, q);
	/* bit 4 of each level byte, moved to bit 7 for movemask: bit j of the result */
	return (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(low_bytes32(v), 3));
}

/* Indices of the nearest doubled-E2M1 values at scale e, first of equals (16 candidates in
 * order, as the scalar search). */
static inline __m256i fp4_index8(__m256 x, __m256 e)
{
	__m256 best_err = absf8(_mm256_sub_ps(_mm256_mul_ps(_mm256_setzero_ps(), e), x));
	__m256i best = _mm256_setzero_si256();

	for (int i = 1; i < 16; i++) {
		__m256 err = absf8(_mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps((float)tfs_kvalues_fp4x2[i]), e), x));
		__m256 better = _mm256_cmp_ps(err, best_err, _CMP_LT_OQ);

		best = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best),
							    _mm256_castsi256_ps(_mm256_set1_epi32(i)), better));
		best_err = _mm256_blendv_ps(best_err, err, better);
	}
	return best;
}

void tfs_fp4_nibbles_avx2(const float *x, int n, float d, uint8_t *q)
{
	const __m256 e = _mm256_set1_ps(d);
	__m256i v[4];

	if (n == 32) {
		for (int k = 0; k < 4; k++)
			v[k] = fp4_index8(_mm256_loadu_ps(x + 8 * k), e);
		store_nibbles32(v, q);
		return;
	}
	/* 16 values: byte j = index(x[j]) | index(x[8 + j]) << 4 */
	int32_t lo[8], hi[8];

	_mm256_storeu_si256((__m256i *)lo, fp4_index8(_mm256_loadu_ps(x), e));
	_mm256_storeu_si256((__m256i *)hi, fp4_index8(_mm256_loadu_ps(x + 8), e));
	for (int j = 0; j < 8; j++)
		q[j] = (uint8_t)(lo[j] | hi[j] << 4);
}

/* Round half away from zero, exactly as roundf for |v| < 2^23 (the caller checks). */
static inline __m256 round_away8(__m256 v)
{
	const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	const __m256 f = _mm256_sub_ps(v, t), one = _mm256_set1_ps(1.0f);
	const __m256 up = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one);
	const __m256 down = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), one);

	return _mm256_add_ps(t, _mm256_sub_ps(up, down));
}

bool tfs_tq2_0_avx2(const float *x, float id, uint8_t *qs)
{
	__m256i acc[8];

	for (int k = 0; k < 8; k++)
		acc[k] = _mm256_setzero_si256();
	for (int c = 0; c < 2; c++)
		for (int s = 0; s < 4; s++)
			for (int k = 0; k < 4; k++) {
				__m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + 128 * c + 32 * s + 8 * k),
							 _mm256_set1_ps(id));

				if (_mm256_movemask_ps(_mm256_cmp_ps(absf8(p), _mm256_set1_ps(8388608.f),
								     _CMP_NLT_UQ)))
					return false;   /* NaN or huge: lroundf's edge cases */
				__m256i t = _mm256_add_epi32(_mm256_cvttps_epi32(round_away8(p)),
							     _mm256_set1_epi32(1));

				t = _mm256_slli_epi32(_mm256_and_si256(t, _mm256_set1_epi32(3)), 2 * s);
				acc[4 * c + k] = _mm256_add_epi32(acc[4 * c + k], t);
			}
	store_low_bytes32(acc, qs);
	store_low_bytes32(acc + 4, qs + 32);
	return true;
}

bool tfs_q8_k_avx2(const float *x, uint8_t *b)
{
	__m256 amax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();

	for (int i = 0; i < 256; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);

		nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
		amax = _mm256_max_ps(amax, absf8(v));
	}
	if (_mm256_movemask_ps(nan))
		return false;
	float m8[8], am = 0;

	_mm256_storeu_ps(m8, amax);
	for (int j = 0; j < 8; j++)
		am = m8[j] > am ? m8[j] : am;
	if (am == 0.0f)
		return false;   /* the scalar code writes the zero block */
	int first = 0;

	while (fabsf(x[first]) != am)   /* the scalar search keeps the first largest */
		first++;
	const float iscale = -127.f / x[first], d = 1 / iscale;
	__m256i v[4];
	int8_t *qs = (int8_t *)(b + 4);

	for (int c = 0; c < 8; c++) {
		for (int k = 0; k < 4; k++)
			v[k] = _mm256_min_epi32(nearest8(_mm256_mul_ps(_mm256_set1_ps(iscale),
								      _mm256_loadu_ps(x + 32 * c + 8 * k))),
						_mm256_set1_epi32(127));
		store_low_bytes32(v, (uint8_t *)qs + 32 * c);
	}
	/* sums of 16: biased to unsigned bytes, summed in 8s by psadbw, the bias taken off */
	for (int c = 0; c < 8; c++) {
		__m256i q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)),
					     _mm256_set1_epi8((char)0x80));
		int64_t s8[4];

		_mm256_storeu_si256((__m256i *)s8, _mm256_sad_epu8(q, _mm256_setzero_si256()));
		for (int h = 0; h < 2; h++) {
			int16_t sum = (int16_t)(s8[2 * h] + s8[2 * h + 1] - 16 * 128);

			memcpy(b + 260 + 2 * (2 * c + h), &sum, 2);
		}
	}
	memcpy(b, &d, 4);
	return true;
}

bool tfs_min_max32_avx2(const float *x, float *mn, float *mx)
{
	__m256 lo = _mm256_loadu_ps(x), hi = lo, nan = _mm256_cmp_ps(lo, lo, _CMP_UNORD_Q);

	for (int k = 1; k < 4; k++) {
		__m256 v = _mm256_loadu_ps(x + 8 * k);

		nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
		lo = _mm256_min_ps(v, lo);
		hi = _mm256_max_ps(v, hi);
	}
	if (_mm256_movemask_ps(nan))
		return false;
	float l8[8], h8[8], l = l8[0], h;

	_mm256_storeu_ps(l8, lo);
	_mm256_storeu_ps(h8, hi);
	l = l8[0];
	h = h8[0];
	for (int j = 1; j < 8; j++) {
		l = l8[j] < l ? l8[j] : l;
		h = h8[j] > h ? h8[j] : h;
	}
	if (l == 0.0f || h == 0.0f)
		return false;   /* which zero the scalar code keeps depends on the order */
	*mn = l;
	*mx = h;
	return true;
}

/* ==== Q3_K's fit ==== */

/* The state of 8 sub-blocks' Q3_K fit. */
typedef struct {
	__m256 xt[16], sumlx, suml2, zero;
	__m256i L[16];
} q3_lanes;

static void q3_start(q3_lanes *s, const float *x)
{
	const int nmax = 4;
	float t[16 * 8];
	__m256 amax = _mm256_setzero_ps(), max = amax;

	transpose_in(16, x, t);
	for (int i = 0; i < 16; i++) {
		s->xt[i] = _mm256_loadu_ps(t + 8 * i);
		__m256 ax = absf8(s->xt[i]), gt = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);

		amax = _mm256_blendv_ps(amax, ax, gt);
		max = _mm256_blendv_ps(max, s->xt[i], gt);
	}
	s->zero = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_LT_OQ);
	const __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)-nmax), max);

	s->sumlx = s->suml2 = _mm256_setzero_ps();
	for (int i = 0; i < 16; i++) {
		__m256i l = clamp8(nearest8(_mm256_mul_ps(iscale, s->xt[i])), -nmax, nmax - 1);
		__m256 lf = _mm256_cvtepi32_ps(l), w = _mm256_mul_ps(s->xt[i], s->xt[i]);

		s->L[i] = l;
		s->sumlx = _mm256_add_ps(s->sumlx, _mm256_mul_ps(_mm256_mul_ps(w, s->xt[i]), lf));
		s->suml2 = _mm256_add_ps(s->suml2, _mm256_mul_ps(_mm256_mul_ps(w, lf), lf));
	}
}

/* Element i of one improvement pass: moves its level where that improves the fit; returns
 * the lanes that moved. */
static inline __m256 q3_step(q3_lanes *s, int i)
{
	const int nmax = 4;
	const __m256 w = _mm256_mul_ps(s->xt[i], s->xt[i]), wx = _mm256_mul_ps(w, s->xt[i]);
	const __m256 lf = _mm256_cvtepi32_ps(s->L[i]);
	__m256 slx = _mm256_sub_ps(s->sumlx, _mm256_mul_ps(wx, lf));
	__m256 sl2 = _mm256_sub_ps(s->suml2, _mm256_mul_ps(_mm256_mul_ps(w, lf), lf));
	const __m256i nl = clamp8(nearest8(_mm256_div_ps(_mm256_mul_ps(s->xt[i], sl2), slx)),
				  -nmax, nmax - 1);
	const __m256 nlf = _mm256_cvtepi32_ps(nl);
	__m256 take = _mm256_and_ps(_mm256_cmp_ps(slx, _mm256_setzero_ps(), _CMP_GT_OQ),
				    _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpeq_epi32(nl, s->L[i]),
									 _mm256_set1_epi32(-1))));

	slx = _mm256_add_ps(slx, _mm256_mul_ps(wx, nlf));
	sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w, nlf), nlf));
	take = _mm256_and_ps(take, _mm256_cmp_ps(sl2, _mm256_setzero_ps(), _CMP_GT_OQ));
	take = _mm256_and_ps(take, _mm256_cmp_ps(_mm256_mul_ps(_mm256_mul_ps(slx, slx), s->suml2),
						 _mm256_mul_ps(_mm256_mul_ps(s->sumlx, s->sumlx), sl2),
						 _CMP_GT_OQ));
	s->L[i] = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(s->L[i]),
						       _mm256_castsi256_ps(nl), take));
	s->sumlx = _mm256_blendv_ps(s->sumlx, slx, take);
	s->suml2 = _mm256_blendv_ps(s->suml2, sl2, take);
	return take;
}

static void q3_finish(q3_lanes *s, int8_t *L, float *scale_out)
{
	const int zmask = _mm256_movemask_ps(s->zero);

	for (int i = 0; i < 16; i++)
		s->L[i] = _mm256_castps_si256(_mm256_andnot_ps(s->zero, _mm256_castsi256_ps(s->L[i])));
	levels_out(16, s->L, 0, (uint8_t *)L);
	for (int j = 0; j < 8; j++)   /* the scalar code adds nmax to non-zero sub-blocks only */
		if (!(zmask >> j & 1))
			for (int i = 0; i < 16; i++)
				L[16 * j + i] = (int8_t)(L[16 * j + i] + 4);
	const __m256 sc = _mm256_blendv_ps(_mm256_setzero_ps(), _mm256_div_ps(s->sumlx, s->suml2),
					   _mm256_cmp_ps(s->suml2, _mm256_setzero_ps(), _CMP_GT_OQ));

	_mm256_storeu_ps(scale_out, _mm256_andnot_ps(s->zero, sc));
}

void tfs_fit_q3_16_avx2(const float *x, int8_t *L, float *scale_out)
{
	q3_lanes a, b;   /* two independent groups, interleaved to hide the divisions' latency */

	q3_start(&a, x);
	q3_start(&b, x + 128);
	for (int pass = 0; pass < 5; pass++) {
		__m256 changed = _mm256_setzero_ps();

		for (int i = 0; i < 16; i++) {
			changed = _mm256_or_ps(changed, q3_step(&a, i));
			changed = _mm256_or_ps(changed, q3_step(&b, i));
		}
		/* a lane whose pass changed nothing would change nothing again */
		if (_mm256_movemask_ps(changed) == 0)
			break;
	}
	q3_finish(&a, L, scale_out);
	q3_finish(&b, L + 128, scale_out + 8);
}

/* ==== IQ4: the non-linear code book ==== */

/* Index of the book value nearest each lane, as quant.c's nearest_iq4 (NaN: 15). */
static inline __m256i iq4_index8(__m256 x, __m256 book_lo, __m256 book_hi)
{
	__m256i cnt = _mm256_setzero_si256();

	for (int k = 0; k < 16; k++) {
		__m256 le = _mm256_cmp_ps(_mm256_set1_ps((float)tfs_kvalues_iq4nl[k]), x, _CMP_LE_OQ);

		cnt = _mm256_sub_epi32(cnt, _mm256_castps_si256(le));
	}
	/* cnt = the first index whose value exceeds x: x lies in [book[cnt-1], book[cnt]) */
	const __m256i lo_i = _mm256_sub_epi32(cnt, _mm256_set1_epi32(1));
	const __m256 below = _mm256_blendv_ps(_mm256_permutevar8x32_ps(book_lo, lo_i),
					      _mm256_permutevar8x32_ps(book_hi, lo_i),
					      _mm256_castsi256_ps(_mm256_cmpgt_epi32(lo_i, _mm256_set1_epi32(7))));
	const __m256 above = _mm256_blendv_ps(_mm256_permutevar8x32_ps(book_lo, cnt),
					      _mm256_permutevar8x32_ps(book_hi, cnt),
					      _mm256_castsi256_ps(_mm256_cmpgt_epi32(cnt, _mm256_set1_epi32(7))));
	const __m256 pick_lo = _mm256_cmp_ps(_mm256_sub_ps(x, below), _mm256_sub_ps(above, x), _CMP_LT_OQ);
	__m256i idx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(cnt),
							   _mm256_castsi256_ps(lo_i), pick_lo));
	const __m256 first = _mm256_cmp_ps(x, _mm256_set1_ps((float)tfs_kvalues_iq4nl[0]), _CMP_LE_OQ);
	const __m256 last = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_set1_ps((float)tfs_kvalues_iq4nl[15]),
						       _CMP_GE_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));

	idx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(idx),
						   _mm256_castsi256_ps(_mm256_set1_epi32(15)), last));
	return _mm256_castps_si256(_mm256_andnot_ps(first, _mm256_castsi256_ps(idx)));
}

static inline void iq4_books(__m256 *lo, __m256 *hi)
{
	float b[16];

	for (int k = 0; k < 16; k++)
		b[k] = (float)tfs_kvalues_iq4nl[k];
	*lo = _mm256_loadu_ps(b);
	*hi = _mm256_loadu_ps(b + 8);
}

static inline __m256 book_value8(__m256i idx, __m256 lo, __m256 hi)
{
	return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
				_mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7))));
}

/* x^2-weighted sums of q*x and q*q for book values at inverse scale id. */
static void iq4_pass(const __m256 *xt, const __m256 *wt, __m256 id, __m256 lo, __m256 hi,
		     __m256 *sumqx, __m256 *sumq2)
{
	__m256 sqx = _mm256_setzero_ps(), sq2 = sqx;

	for (int j = 0; j < 32; j++) {
		__m256 q = book_value8(iq4_index8(_mm256_mul_ps(id, xt[j]), lo, hi), lo, hi);
		__m256 wq = _mm256_mul_ps(wt[j], q);

		sqx = _mm256_add_ps(sqx, _mm256_mul_ps(wq, xt[j]));
		sq2 = _mm256_add_ps(sq2, _mm256_mul_ps(wq, q));
	}
	*sumqx = sqx;
	*sumq2 = sq2;
}

void tfs_fit_iq4_8_avx2(const float *x, const float *w, float *d_out)
{
	float t[32 * 8];
	__m256 xt[32], wt[32], amax = _mm256_setzero_ps(), max = amax, lo, hi, sumqx, sumq2;

	iq4_books(&lo, &hi);
	if (w) {
		transpose_in(32, w, t);
		for (int i = 0; i < 32; i++)
			wt[i] = _mm256_loadu_ps(t + 8 * i);
	}
	transpose_in(32, x, t);
	for (int i = 0; i < 32; i++) {
		xt[i] = _mm256_loadu_ps(t + 8 * i);
		if (!w)
			wt[i] = _mm256_mul_ps(xt[i], xt[i]);
		__m256 ax = absf8(xt[i]), gt = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);

		amax = _mm256_blendv_ps(amax, ax, gt);
		max = _mm256_blendv_ps(max, xt[i], gt);
	}
	const __m256 zero = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_LT_OQ);
	const float v0 = (float)tfs_kvalues_iq4nl[0];
	__m256 d = _mm256_div_ps(_mm256_sub_ps(_mm256_setzero_ps(), max), _mm256_set1_ps(v0));

	iq4_pass(xt, wt, _mm256_div_ps(_mm256_set1_ps(1.0f), d), lo, hi, &sumqx, &sumq2);
	d = _mm256_blendv_ps(_mm256_setzero_ps(), _mm256_div_ps(sumqx, sumq2),
			     _mm256_cmp_ps(sumq2, _mm256_setzero_ps(), _CMP_GT_OQ));
	__m256 best = _mm256_mul_ps(d, sumqx);

	for (int k = -7; k <= 7; k++) {
		iq4_pass(xt, wt, _mm256_div_ps(_mm256_set1_ps((float)(k + tfs_kvalues_iq4nl[0])), max),
			 lo, hi, &sumqx, &sumq2);
		const __m256 better = _mm256_and_ps(
			_mm256_cmp_ps(sumq2, _mm256_setzero_ps(), _CMP_GT_OQ),
			_mm256_cmp_ps(_mm256_mul_ps(sumqx, sumqx), _mm256_mul_ps(best, sumq2), _CMP_GT_OQ));
		const __m256 nd = _mm256_div_ps(sumqx, sumq2);

		d = _mm256_blendv_ps(d, nd, better);
		best = _mm256_blendv_ps(best, _mm256_mul_ps(nd, sumqx), better);
	}
	_mm256_storeu_ps(d_out, _mm256_andnot_ps(zero, d));
}

void tfs_iq4_nibbles_avx2(const float *x, float id, uint8_t *q)
{
	__m256 lo, hi;
	__m256i v[4];

	iq4_books(&lo, &hi);
	for (int k = 0; k < 4; k++)
		v[k] = iq4_index8(_mm256_mul_ps(_mm256_set1_ps(id), _mm256_loadu_ps(x + 8 * k)), lo, hi);
	store_nibbles32(v, q);
}

/* ==== the K-quants' final levels ==== */

void tfs_levels_avx2(const float *x, int n, float off, float d, int lo, int hi, int add, uint8_t *L)
{
	const __m256 vo = _mm256_set1_ps(off), vd = _mm256_set1_ps(d);

	for (int i = 0; i < n; i += 8) {
		__m256i l = clamp8(nearest8(_mm256_div_ps(_mm256_add_ps(_mm256_loadu_ps(x + i), vo), vd)),
				   lo, hi);
		int32_t t[8];

		_mm256_storeu_si256((__m256i *)t, _mm256_add_epi32(l, _mm256_set1_epi32(add)));
		for (int k = 0; k < 8; k++)
			L[i + k] = (uint8_t)t[k];
	}
}

bool tfs_q4_1_avx2(const float *x, uint8_t *b)
{
	float mn, mx;

	if (!tfs_min_max32_avx2(x, &mn, &mx))
		return false;
	const float d = (mx - mn) / 15, id = d != 0.0f ? 1.0f / d : 0.0f;

	if (d != d)
		return false;   /* a NaN half: the scalar conversion decides its bits */
	const uint16_t hd = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT), hm = _cvtss_sh(mn, _MM_FROUND_TO_NEAREST_INT);

	memcpy(b, &hd, 2);
	memcpy(b + 2, &hm, 2);
	tfs_q4_nibbles_avx2(x, mn, id, 0.5f, b + 4);
	return true;
}

void tfs_q1_0_signs_avx2(const float *x, uint8_t *qs)
{
	/* bit k of byte j: element 8j + k is >= 0 (-0 too; NaN not) */
	for (int j = 0; j < 16; j++)
		qs[j] = (uint8_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + 8 * j),
								  _mm256_setzero_ps(), _CMP_GE_OQ));
}

bool tfs_tq1_0_avx2(const float *x, float id, uint8_t *qs)
{
	static const struct { int byte0, nbytes, base; } runs[2] = { { 0, 32, 0 }, { 32, 16, 160 } };
	const __m256 vid = _mm256_set1_ps(id), lim = _mm256_set1_ps(8388608.f);

	for (int r = 0; r < 2; r++) {
		for (int v = 0; v < runs[r].nbytes / 8; v++) {
			__m256i q = _mm256_setzero_si256();

			for (int n = 0; n < 5; n++) {
				__m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + runs[r].base + n * runs[r].nbytes +
									8 * v), vid);

				if (_mm256_movemask_ps(_mm256_cmp_ps(absf8(p), lim, _CMP_NLT_UQ)))
					return false;   /* NaN or huge: lroundf's edge cases */
				__m256i t = _mm256_add_epi32(_mm256_cvttps_epi32(round_away8(p)),
							     _mm256_set1_epi32(1));

				q = _mm256_add_epi32(_mm256_mullo_epi32(q, _mm256_set1_epi32(3)), t);
			}
			/* ceil(q * 256 / 243): exact in float for q <= 242 */
			__m256 f = _mm256_div_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q),
									     _mm256_set1_ps(256.f)),
							       _mm256_set1_ps(242.f)),
						 _mm256_set1_ps(243.f));
			int32_t o[8];

			_mm256_storeu_si256((__m256i *)o, _mm256_cvttps_epi32(f));
			for (int k = 0; k < 8; k++)
				qs[runs[r].byte0 + 8 * v + k] = (uint8_t)o[k];
		}
	}
	return true;
}

bool tfs_q2_0_avx2(const float *x, float id, uint8_t *qs)
{
	const __m256 vid = _mm256_set1_ps(id), lim = _mm256_set1_ps(8388608.f);
	int32_t c[64];

	for (int v = 0; v < 8; v++) {
		__m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * v), vid);

		if (_mm256_movemask_ps(_mm256_cmp_ps(absf8(p), lim, _CMP_NLT_UQ)))
			return false;   /* NaN or huge: the scalar code decides */
		_mm256_storeu_si256((__m256i *)(c + 8 * v),
				    clamp8(_mm256_add_epi32(_mm256_cvttps_epi32(round_away8(p)),
							    _mm256_set1_epi32(1)), 0, 3));
	}
	for (int j = 0; j < 16; j++)
		qs[j] = (uint8_t)(c[4 * j] | c[4 * j + 1] << 2 | c[4 * j + 2] << 4 | c[4 * j + 3] << 6);
	return true;
}
