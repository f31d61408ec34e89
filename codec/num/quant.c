/*
 * quant.c - float32 to every element type tensorfs can write (the inverse of dequant.c).
 *
 * For the GGML types the bytes are bit-identical to ggml's reference quantizers as
 * ggml_quantize_chunk() runs them with no importance matrix (Q8_K: quantize_row_q8_K_ref):
 * the same search for scales, done with float (never double) arithmetic in the same order,
 * the same float-to-int conversions and the same half-precision rounding.  The file is built
 * with -ffp-contract=off: a fused a * b + c rounds once where ggml rounds twice.
 *
 * Every GGML quantizer works on one block (or super-block) at a time and never looks at its
 * neighbours, so quantizing a tensor block by block, or only the blocks that changed, gives
 * the same bytes as quantizing it whole.
 *
 * Block layouts are drawn above each encoder, lowest address first; "d" is an IEEE half
 * unless said otherwise; multi-byte fields are little-endian.
 */
#include "dequant.h"
#include "quant_impl.h"
#include "testing.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ==== scalar conversions ==== */

/* What x86's cvttss2si gives: truncation, or INT32_MIN for NaN and out-of-range values.
 * ggml's (int8_t)/(uint8_t) casts of floats compile to it and keep the low byte. */
static inline int32_t trunc_i32(float v)
{
#if defined(__x86_64__)
	return _mm_cvttss_si32(_mm_set_ss(v));
#else
	return (v >= -2147483648.f && v < 2147483648.f) ? (int32_t)v : INT32_MIN;
#endif
}

/* roundf (half away from zero) without the call: v - trunc(v) is exact, so comparing it
 * with 0.5 decides as roundf does; beyond 2^23 every float is already an integer. */
static inline float round_away(float v)
{
	if (!(fabsf(v) < 8388608.f))
		return v;
	const float t = (float)(int32_t)v, f = v - t;

	return t + (float)((f >= 0.5f) - (f <= -0.5f));   /* no branch: the sign is random */
}

static inline uint8_t trunc_u8(float v)
{
	return (uint8_t)(uint32_t)trunc_i32(v);
}

/* ==== run-time kernel choice ==== */

static struct {
	void (*affine8)(int n, const float *x, const float *w, uint8_t *L, float *scale,
			float *neg_min, const tfs_affine_search *a);
	void (*symmetric8)(int n, int nmax, const float *x, const float *w, int8_t *L,
			   float *scale);
	void (*f16)(const float *x, uint8_t *y, size_t n);
	void (*bf16)(const float *x, uint8_t *y, size_t n);
	void (*q4_nibbles)(const float *x, float off, float id, float add, uint8_t *q);
	uint32_t (*q5_levels)(const float *x, float off, float id, float add, int cap, uint8_t *q);
	void (*fp4_nibbles)(const float *x, int n, float d, uint8_t *q);
	bool (*tq2_0)(const float *x, float id, uint8_t *qs);
	bool (*q8_k)(const float *x, uint8_t *b);
	bool (*min_max32)(const float *x, float *mn, float *mx);
	bool (*q4_1)(const float *x, uint8_t *b);
	void (*q1_0_signs)(const float *x, uint8_t *qs);
	bool (*tq1_0)(const float *x, float id, uint8_t *qs);
	bool (*q2_0)(const float *x, float id, uint8_t *qs);
	void (*fit_q3_16)(const float *x, int8_t *L, float *scale);
	void (*fit_iq4_8)(const float *x, const float *w, float *d);
	void (*iq4_nibbles)(const float *x, float id, uint8_t *q);
	void (*levels)(const float *x, int n, float off, float d, int lo, int hi, int add, uint8_t *L);
} g_simd;
static pthread_once_t g_simd_once = PTHREAD_ONCE_INIT;
static bool g_force_scalar;   /* tests: tfs_quantize_set_scalar */

static void choose_simd(void)
{
#if defined(__x86_64__)
	if (!g_force_scalar && tfs_cpu_has_avx2()) {
		g_simd.affine8 = tfs_fit_affine8_avx2;
		g_simd.symmetric8 = tfs_fit_symmetric8_avx2;
		g_simd.f16 = tfs_f32_to_f16_avx2;
		g_simd.bf16 = tfs_f32_to_bf16_avx2;
		g_simd.q4_nibbles = tfs_q4_nibbles_avx2;
		g_simd.q5_levels = tfs_q5_levels_avx2;
		g_simd.fp4_nibbles = tfs_fp4_nibbles_avx2;
		g_simd.tq2_0 = tfs_tq2_0_avx2;
		g_simd.q8_k = tfs_q8_k_avx2;
		g_simd.min_max32 = tfs_min_max32_avx2;
		g_simd.q4_1 = tfs_q4_1_avx2;
		g_simd.q1_0_signs = tfs_q1_0_signs_avx2;
		g_simd.tq1_0 = tfs_tq1_0_avx2;
		g_simd.q2_0 = tfs_q2_0_avx2;
		g_simd.fit_q3_16 = tfs_fit_q3_16_avx2;
		g_simd.fit_iq4_8 = tfs_fit_iq4_8_avx2;
		g_simd.iq4_nibbles = tfs_iq4_nibbles_avx2;
		g_simd.levels = tfs_levels_avx2;
	}
#endif
}

void tfs_quantize_set_scalar(bool scalar)
{
	pthread_once(&g_simd_once, choose_simd);
	g_force_scalar = scalar;
	memset(&g_simd, 0, sizeof(g_simd));
	choose_simd();
}

/* ==== the plain 32-element blocks ==== */

/* Largest magnitude of n values, and the value that has it (the first one on ties). */
static float signed_absmax(const float *x, int n, float *amax_out)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < n; j++) {
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	}
	*amax_out = amax;
	return max;
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
	float lo = FLT_MAX, hi = -FLT_MAX;

	if (n == 32 && g_simd.min_max32 && g_simd.min_max32(x, mn, mx))
		return;

	for (int j = 0; j < n; j++) {
		if (x[j] < lo)
			lo = x[j];
		if (x[j] > hi)
			hi = x[j];
	}
	*mn = lo;
	*mx = hi;
}

/* |d|16 bytes: low nibbles = elements 0..15, high = 16..31|  q = x/d + 8, d = -max/8 */
static void enc_q4_0(const float *x, uint8_t *b)
{
	float amax, max = signed_absmax(x, 32, &amax);
	const float d = max / -8, id = d != 0.0f ? 1.0f / d : 0.0f;

	put_half(b, d);
	if (g_simd.q4_nibbles) {
		g_simd.q4_nibbles(x, 0.0f, id, 8.5f, b + 2);   /* x - 0 is x, -0 and NaN included */
		return;
	}
	for (int j = 0; j < 16; j++) {
		int lo = (int8_t)trunc_u8(x[j] * id + 8.5f), hi = (int8_t)trunc_u8(x[j + 16] * id + 8.5f);
		uint8_t q0 = (uint8_t)(lo < 15 ? lo : 15), q1 = (uint8_t)(hi < 15 ? hi : 15);

		b[2 + j] = (uint8_t)(q0 | q1 << 4);
	}
}

/* |d|m|16 bytes of nibbles|  q = (x - m)/d, d = (max - min)/15 */
static void enc_q4_1(const float *x, uint8_t *b)
{
	float mn, mx;

	if (g_simd.q4_1 && g_simd.q4_1(x, b))
		return;
	min_max(x, 32, &mn, &mx);
	const float d = (mx - mn) / 15, id = d != 0.0f ? 1.0f / d : 0.0f;

	put_half(b, d);
	put_half(b + 2, mn);
	if (g_simd.q4_nibbles) {
		g_simd.q4_nibbles(x, mn, id, 0.5f, b + 4);
		return;
	}
	for (int j = 0; j < 16; j++) {
		int lo = (int8_t)trunc_u8((x[j] - mn) * id + 0.5f);
		int hi = (int8_t)trunc_u8((x[j + 16] - mn) * id + 0.5f);
		uint8_t q0 = (uint8_t)(lo < 15 ? lo : 15), q1 = (uint8_t)(hi < 15 ? hi : 15);

		b[4 + j] = (uint8_t)(q0 | q1 << 4);
	}
}

/* |d|u32 fifth bits|16 bytes of low nibbles|  q = x/d + 16, d = -max/16 */
static void enc_q5_0(const float *x, uint8_t *b)
{
	float amax, max = signed_absmax(x, 32, &amax);
	const float d = max / -16, id = d != 0.0f ? 1.0f / d : 0.0f;
	uint32_t qh = 0;

	put_half(b, d);
	if (g_simd.q5_levels) {
		qh = g_simd.q5_levels(x, 0.0f, id, 16.5f, 31, b + 6);
		memcpy(b + 2, &qh, 4);
		return;
	}
	for (int j = 0; j < 16; j++) {
		int lo = (int8_t)trunc_u8(x[j] * id + 16.5f), hi = (int8_t)trunc_u8(x[j + 16] * id + 16.5f);
		uint8_t q0 = (uint8_t)(lo < 31 ? lo : 31), q1 = (uint8_t)(hi < 31 ? hi : 31);

		b[6 + j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
		qh |= (uint32_t)((q0 >> 4) & 1) << j | (uint32_t)((q1 >> 4) & 1) << (j + 16);
	}
	memcpy(b + 2, &qh, 4);
}

/* |d|m|u32 fifth bits|16 bytes of low nibbles|  q = (x - m)/d, d = (max - min)/31 */
static void enc_q5_1(const float *x, uint8_t *b)
{
	float mn, mx;
	uint32_t qh = 0;

	min_max(x, 32, &mn, &mx);
	const float d = (mx - mn) / 31, id = d != 0.0f ? 1.0f / d : 0.0f;

	put_half(b, d);
	put_half(b + 2, mn);
	if (g_simd.q5_levels) {
		qh = g_simd.q5_levels(x, mn, id, 0.5f, 0, b + 8);
		memcpy(b + 4, &qh, 4);
		return;
	}
	for (int j = 0; j < 16; j++) {
		uint8_t q0 = trunc_u8((x[j] - mn) * id + 0.5f), q1 = trunc_u8((x[j + 16] - mn) * id + 0.5f);

		b[8 + j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
		qh |= (uint32_t)((q0 >> 4) & 1) << j | (uint32_t)((q1 >> 4) & 1) << (j + 16);
	}
	memcpy(b + 4, &qh, 4);
}

/* Q8_0's and Q8_1's scale d = amax/127 (as a half at h) and 32 codes q = round(x/d) (at q);
 * returns d. */
static float fit_q8(const float *x, uint8_t *h, uint8_t *q)
{
	float amax = 0.0f;

	for (int j = 0; j < 32; j++)
		amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
	const float d = amax / 127, id = d != 0.0f ? 1.0f / d : 0.0f;

	put_half(h, d);
	for (int j = 0; j < 32; j++)
		q[j] = trunc_u8(round_away(x[j] * id));
	return d;
}

/* |d|32 int8| */
static void enc_q8_0(const float *x, uint8_t *b)
{
	fit_q8(x, b, b + 2);
}

/* |d|s = d * (sum of q)|32 int8|  (the sum as ggml's quantize_row_q8_1_ref computes it, in
 * float from the int8 codes) */
static void enc_q8_1(const float *x, uint8_t *b)
{
	const float d = fit_q8(x, b, b + 4);
	int sum = 0;

	for (int j = 0; j < 32; j++)
		sum += (int8_t)b[4 + j];
	put_half(b + 2, (float)sum * d);
}

/* |d = mean |x||16 bytes: bit j = (x_j >= 0)|  (Q1_0, 128 elements) */
static void enc_q1_0(const float *x, uint8_t *b)
{
	float sum = 0.0f;

	for (int j = 0; j < 128; j++)
		sum += fabsf(x[j]);
	put_half(b, sum / 128);
	if (g_simd.q1_0_signs) {
		g_simd.q1_0_signs(x, b + 2);
		return;
	}
	memset(b + 2, 0, 16);
	for (int j = 0; j < 128; j++)
		if (x[j] >= 0.0f)
			b[2 + j / 8] |= (uint8_t)(1u << (j % 8));
}

/* |d = amax|16 bytes: 2-bit codes, code = clamp(round(x/d) + 1, 0, 3)|  (Q2_0, 64 elements) */
static void enc_q2_0(const float *x, uint8_t *b)
{
	float amax = 0.0f;

	for (int j = 0; j < 64; j++)
		if (fabsf(x[j]) > amax)
			amax = fabsf(x[j]);
	const float id = amax > 0.0f ? 1.0f / amax : 0.0f;

	put_half(b, amax);
	if (g_simd.q2_0 && g_simd.q2_0(x, id, b + 2))
		return;
	memset(b + 2, 0, 16);
	for (int j = 0; j < 64; j++) {
		int q = clampi((int)((uint32_t)trunc_i32(round_away(x[j] * id)) + 1u), 0, 3);

		b[2 + j / 4] |= (uint8_t)(q << (2 * (j % 4)));
	}
}

/* ==== FP4 microscaling ==== */

/* The E2M1 code (values doubled, as tfs_kvalues_fp4x2) nearest to x at scale e; the first
 * of equals wins. */
static int nearest_fp4(float x, float e)
{
	/* Only code 0 and the codes of x's sign can win: one of the other sign is never
	 * nearer than 0 (|k e + |x|| >= |x| however it rounds), and code 0 comes first. */
	const int base = x < 0 ? 8 : 0;
	int best = 0;
	float best_err = fabsf((float)tfs_kvalues_fp4x2[0] * e - x);

	for (int i = 1; i < 8; i++) {
		const float err = fabsf((float)tfs_kvalues_fp4x2[base + i] * e - x);
		const bool better = err < best_err;

		best = better ? base + i : best;
		best_err = better ? err : best_err;
	}
	return best;
}

/* |E8M0 e|16 bytes: low nibbles = elements 0..15, high = 16..31|  e = floor(log2 amax) + 125 */
static void enc_mxfp4(const float *x, uint8_t *b)
{
	float amax = 0.0f;

	for (int j = 0; j < 32; j++)
		if (amax < fabsf(x[j]))
			amax = fabsf(x[j]);
	const uint8_t e = amax > 0.0f ? trunc_u8(floorf(log2f(amax)) - 2 + 127) : 0;
	const float d = tfs_e8m0_half_to_f32(e);

	b[0] = e;
	if (g_simd.fp4_nibbles) {
		g_simd.fp4_nibbles(x, 32, d, b + 1);
		return;
	}
	for (int j = 0; j < 16; j++)
		b[1 + j] = (uint8_t)(nearest_fp4(x[j], d) | nearest_fp4(x[j + 16], d) << 4);
}

/* ggml's UE4M3 encoding of a positive scale: mantissa rounded half up, saturating at 0x7E. */
static uint8_t ue4m3_from_f32(float x)
{
	if (!(x > 0.0f))
		return 0;
	if (x > 448.0f)
		x = 448.0f;
	uint32_t bits = tfs_f32_bits(x);
	int e = (int)((bits >> 23) & 0xff) - 127 + 7, m = (int)((bits >> 20) & 7);

	if (e <= 0) {
		int sub = trunc_i32(x * 512.0f + 0.5f);

		return (uint8_t)(sub > 7 ? 7 : sub < 1 ? 0 : sub);
	}
	if (e >= 15)
		return 0x7e;
	m += (int)((bits >> 19) & 1);
	if (m > 7) {
		m = 0;
		if (++e >= 15)
			return 0x7e;
	}
	return (uint8_t)(e << 3 | m);
}

/* |4 UE4M3 scales|32 bytes: per 16-element sub-block s, 8 bytes, low nibbles = elements
 * 16s..16s+7, high = 16s+8..16s+15| */
static void enc_nvfp4(const float *x, uint8_t *b)
{
	for (int s = 0; s < 4; s++) {
		const float *xs = x + 16 * s;
		float amax = 0.0f;

		for (int j = 0; j < 16; j++)
			if (amax < fabsf(xs[j]))
				amax = fabsf(xs[j]);
		b[s] = ue4m3_from_f32(amax / 6.0f);
		const float d = tfs_ue4m3_half_to_f32(b[s]);

		if (g_simd.fp4_nibbles) {
			g_simd.fp4_nibbles(xs, 16, d, b + 4 + 8 * s);
			continue;
		}
		for (int j = 0; j < 8; j++)
			b[4 + 8 * s + j] = (uint8_t)(nearest_fp4(xs[j], d) | nearest_fp4(xs[j + 8], d) << 4);
	}
}

/* ==== ternary ==== */

static inline int ternary(float v, float id)
{
	const float p = v * id;

	/* lroundf's result where it is defined; glibc's LONG_MIN beyond (NaN, inf) */
	if (fabsf(p) < 8388608.f)
		return (int)round_away(p) + 1;
	return (int)(lroundf(p) + 1);
}

/* |48 bytes: 5 trits each|4 bytes: 4 trits each|d|  (TQ1_0)  a byte holds
 * ceil(t * 256 / 243) for its base-3 number t, first element most significant */
static void enc_tq1_0(const float *x, uint8_t *b)
{
	float amax = 0.0f;

	for (int j = 0; j < 256; j++)
		amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
	const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
	static const struct { int byte0, nbytes, ntrits; } runs[3] = { { 0, 32, 5 }, { 32, 16, 5 },
								       { 48, 4, 4 } };
	int r = 0;

	if (g_simd.tq1_0 && g_simd.tq1_0(x, id, b)) {   /* the two 5-trit runs */
		r = 2;
		x += 240;
	}
	for (; r < 3; r++) {
		for (int m = 0; m < runs[r].nbytes; m++) {
			uint8_t q = 0;

			for (int n = 0; n < runs[r].ntrits; n++)
				q = (uint8_t)(q * 3 + ternary(x[m + n * runs[r].nbytes], id));
			if (runs[r].ntrits == 4)
				q = (uint8_t)(q * 3);
			b[runs[r].byte0 + m] = (uint8_t)(((uint16_t)q * 256 + 242) / 243);
		}
		x += runs[r].nbytes * runs[r].ntrits;
	}
	put_half(b + 52, amax);
}

/* |64 bytes: bits 2s of byte 32c + m = element 128c + 32s + m, as trit + 1|d|  (TQ2_0) */
static void enc_tq2_0(const float *x, uint8_t *b)
{
	float amax = 0.0f;

	for (int j = 0; j < 256; j++)
		amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
	const float id = amax != 0.0f ? 1.0f / amax : 0.0f;

	put_half(b + 64, amax);
	if (g_simd.tq2_0 && g_simd.tq2_0(x, id, b))
		return;
	for (int c = 0; c < 2; c++)
		for (int m = 0; m < 32; m++) {
			uint8_t q = 0;

			for (int s = 0; s < 4; s++)
				q = (uint8_t)(q + ((ternary(x[128 * c + 32 * s + m], id) & 3) << (2 * s)));
			b[32 * c + m] = q;
		}
}

/* ==== K-quants: super-blocks of 256 ==== */

/* The last pass of every K-quant: L[i] = clamp(nearest((x[i] + off) / d), lo, hi) + add.
 * off is 0 where ggml divides x alone (x + 0 differs from x only for -0, same level). */
void tfs_final_levels(const float *x, int n, float off, float d, int lo, int hi, int add,
		      uint8_t *L)
{
	if (g_simd.levels) {
		g_simd.levels(x, n, off, d, lo, hi, add, L);
		return;
	}
	for (int i = 0; i < n; i++)
		L[i] = (uint8_t)(clampi(nearest_int(off != 0.0f ? (x[i] + off) / d : x[i] / d), lo, hi) + add);
}

/* Symmetric levels -nmax..nmax-1 for n values, weighted by w (NULL: by x^2): starts from the
 * scale that maps the largest magnitude to -nmax, then tries 18 nearby ones and keeps the one
 * with the best weighted fit (ggml's make_qx_quants, rmse_type 1).  L gets level + nmax;
 * returns the scale. */
float tfs_fit_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L)
{
	float amax, max = signed_absmax(x, n, &amax);

	if (amax < GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float iscale = -nmax / max, sumlx = 0, suml2 = 0;

	for (int i = 0; i < n; i++) {
		int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
		float wi = w ? w[i] : x[i] * x[i];

		L[i] = (int8_t)(l + nmax);
		sumlx += wi * x[i] * l;
		suml2 += wi * l * l;
	}
	float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;

	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < n; i++) {
			int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
			float wi = w ? w[i] : x[i] * x[i];

			sumlx += wi * x[i] * l;
			suml2 += wi * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < n; i++)
				L[i] = (int8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

/* Q3_K's sub-block fit: symmetric levels -4..3, then up to 5 passes moving single levels
 * while that improves the x^2-weighted fit.  L gets level + 4; returns the scale. */
static float fit_q3(const float *x, int8_t *L)
{
	const int n = 16, nmax = 4;
	float amax, max = signed_absmax(x, n, &amax);

	if (amax < GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float iscale = -nmax / max, sumlx = 0, suml2 = 0;

	for (int i = 0; i < n; i++) {
		int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
		float w = x[i] * x[i];

		L[i] = (int8_t)l;
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	for (int pass = 0; pass < 5; pass++) {
		int changed = 0;

		for (int i = 0; i < n; i++) {
			float w = x[i] * x[i], slx = sumlx - w * x[i] * L[i];

			if (!(slx > 0))
				continue;
			float sl2 = suml2 - w * L[i] * L[i];
			int nl = clampi(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);

			if (nl == L[i])
				continue;
			slx += w * x[i] * nl;
			sl2 += w * nl * nl;
			if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (int8_t)nl;
				sumlx = slx;
				suml2 = sl2;
				changed++;
			}
		}
		if (!changed)
			break;
	}
	for (int i = 0; i < n; i++)
		L[i] = (int8_t)(L[i] + nmax);
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Affine levels 0..nmax with an offset (min <= 0): fits x ~ scale * L + min by weighted
 * least squares over nstep + 1 candidate scales.  *neg_min gets -min; returns the scale. */
float tfs_fit_affine(int n, const float *x, const float *w, uint8_t *L, float *neg_min,
		     const tfs_affine_search *a)
{
	uint8_t Laux[32];
	float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];

	for (int i = 1; i < n; i++) {
		if (x[i] < mn)
			mn = x[i];
		if (x[i] > mx)
			mx = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (mn > 0)
		mn = 0;
	if (mx == mn) {
		memset(L, 0, (size_t)n);
		*neg_min = -mn;
		return 0.0f;
	}
	float iscale = a->nmax / (mx - mn), scale = 1 / iscale, best_err = 0;

	for (int i = 0; i < n; i++) {
		L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - mn)), 0, a->nmax);
		float diff = scale * L[i] + mn - x[i];

		best_err += w[i] * (a->use_mad ? fabsf(diff) : diff * diff);
	}
	for (int is = 0; is <= a->nstep; is++) {
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;

		iscale = (a->rmin + a->rdelta * is + a->nmax) / (mx - mn);
		for (int i = 0; i < n; i++) {
			int l = clampi(nearest_int(iscale * (x[i] - mn)), 0, a->nmax);

			Laux[i] = (uint8_t)l;
			sum_l += w[i] * l;
			sum_l2 += w[i] * l * l;
			sum_xl += w[i] * l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;

		if (!(D > 0))
			continue;
		float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D, err = 0;

		if (this_min > 0) {
			this_min = 0;
			this_scale = sum_xl / sum_l2;
		}
		for (int i = 0; i < n; i++) {
			float diff = this_scale * Laux[i] + this_min - x[i];

			err += w[i] * (a->use_mad ? fabsf(diff) : diff * diff);
		}
		if (err < best_err) {
			memcpy(L, Laux, (size_t)n);
			best_err = err;
			scale = this_scale;
			mn = this_min;
		}
	}
	*neg_min = -mn;
	return scale;
}

void tfs_quant_ready(void)
{
	pthread_once(&g_simd_once, choose_simd);
}

void tfs_fit_symmetric_subs(int nsub, int n, int nmax, const float *x, const float *w,
			    int8_t *L, float *scales)
{
	int j = 0;

	for (; g_simd.symmetric8 && j + 8 <= nsub; j += 8)
		g_simd.symmetric8(n, nmax, x + n * j, w ? w + n * j : NULL, L + n * j, scales + j);
	for (; j < nsub; j++)
		scales[j] = tfs_fit_symmetric(n, nmax, x + n * j, w ? w + n * j : NULL, L + n * j);
}

void tfs_fit_affine_subs(int nsub, int n, const float *x, const float *w, uint8_t *L,
			 float *scales, float *neg_mins, const tfs_affine_search *a)
{
	int j = 0;

	for (; g_simd.affine8 && j + 8 <= nsub; j += 8)
		g_simd.affine8(n, x + n * j, w + n * j, L + n * j, scales + j, neg_mins + j, a);
	for (; j < nsub; j++)
		scales[j] = tfs_fit_affine(n, x + n * j, w + n * j, L + n * j, &neg_mins[j], a);
}

/* ggml's make_qp_quants: levels 0..nmax with weights w, the step returned.  L is unsigned
 * bytes as in ggml, so a negative level (of a negative number: IQ2_S's one negated
 * magnitude, a K-quant's negative sub-block scale) wraps, and the wrapped value is what the
 * later passes see.  IQ2_S's sub-block steps; Q2_K's, Q4_K's and Q5_K's super-block scales and
 * mins with an importance matrix. */
float tfs_fit_nonnegative(int n, int nmax, const float *x, uint8_t *L, const float *w)
{
	float max = 0;

	for (int i = 0; i < n; i++)
		max = ggml_max(max, x[i]);
	if (max < GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = (float)nmax / max;

	for (int i = 0; i < n; i++)
		L[i] = (uint8_t)nearest_int(iscale * x[i]);
	float scale = 1 / iscale, best_mse = 0;

	for (int i = 0; i < n; i++) {
		float diff = x[i] - scale * L[i];

		best_mse += w[i] * diff * diff;
	}
	for (int is = -4; is <= 4; is++) {
		if (is == 0)
			continue;
		float iscale_is = (0.1f * (float)is + (float)nmax) / max, scale_is = 1 / iscale_is;
		float mse = 0;

		for (int i = 0; i < n; i++) {
			int l = nearest_int(iscale_is * x[i]);
			float diff = x[i] - scale_is * (float)(l < nmax ? l : nmax);

			mse += w[i] * diff * diff;
		}
		if (mse < best_mse) {
			best_mse = mse;
			iscale = iscale_is;
		}
	}
	float sumlx = 0, suml2 = 0;

	for (int i = 0; i < n; i++) {
		int l = nearest_int(iscale * x[i]);

		l = l < nmax ? l : nmax;
		L[i] = (uint8_t)l;
		sumlx += w[i] * x[i] * (float)l;
		suml2 += w[i] * (float)l * (float)l;
	}
	for (int itry = 0; itry < 5; itry++) {
		int n_changed = 0;

		for (int i = 0; i < n; i++) {
			float slx = sumlx - w[i] * x[i] * L[i];
			float sl2 = suml2 - w[i] * L[i] * L[i];

			if (!(slx > 0 && sl2 > 0))
				continue;
			int new_l = nearest_int(x[i] * sl2 / slx);

			new_l = new_l < nmax ? new_l : nmax;
			if (new_l == L[i])
				continue;
			slx += w[i] * x[i] * (float)new_l;
			sl2 += w[i] * (float)new_l * (float)new_l;
			if (slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (uint8_t)new_l;
				sumlx = slx;
				suml2 = sl2;
				n_changed++;
			}
		}
		if (!n_changed)
			break;
	}
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Packs 256 2-bit levels: byte 32c + l holds elements 128c + l + 32s at bits 2s. */
void tfs_pack_2bit(const uint8_t *L, uint8_t *qs)
{
	for (int c = 0; c < 2; c++)
		for (int l = 0; l < 32; l++) {
			const uint8_t *p = L + 128 * c + l;

			qs[32 * c + l] = (uint8_t)(p[0] | p[32] << 2 | p[64] << 4 | p[96] << 6);
		}
}

/* |16 scale bytes: low nibble scale, high nibble min|64 bytes 2-bit levels|d|dmin|  (84)
 * w = d * sc * q - dmin * m */
static void enc_q2_k(const float *x, uint8_t *b)
{
	static const tfs_affine_search search = { 3, -0.5f, 0.1f, 15, true };
	uint8_t L[256];
	float w[256], mins[16], scales[16], max_scale = 0, max_min = 0;

	for (int l = 0; l < 256; l++)
		w[l] = fabsf(x[l]);
	if (g_simd.affine8) {
		g_simd.affine8(16, x, w, L, scales, mins, &search);
		g_simd.affine8(16, x + 128, w + 128, L + 128, scales + 8, mins + 8, &search);
	} else {
		for (int j = 0; j < 16; j++)
			scales[j] = tfs_fit_affine(16, x + 16 * j, w + 16 * j, L + 16 * j, &mins[j], &search);
	}
	for (int j = 0; j < 16; j++) {
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	uint8_t *sc = b, *qs = b + 16;

	if (max_scale > 0) {
		float iscale = 15.f / max_scale;

		for (int j = 0; j < 16; j++)
			sc[j] = (uint8_t)nearest_int(iscale * scales[j]);
		put_half(b + 80, max_scale / 15.f);
	} else {
		memset(sc, 0, 16);
		put_half(b + 80, 0.f);
	}
	if (max_min > 0) {
		float iscale = 15.f / max_min;

		for (int j = 0; j < 16; j++)
			sc[j] = (uint8_t)(sc[j] | (uint32_t)nearest_int(iscale * mins[j]) << 4);
		put_half(b + 82, max_min / 15.f);
	} else {
		put_half(b + 82, 0.f);
	}
	for (int j = 0; j < 16; j++) {
		const float d = half_back(b + 80) * (sc[j] & 0xf);

		if (d == 0.0f)
			continue;
		const float dm = half_back(b + 82) * (sc[j] >> 4);

		tfs_final_levels(x + 16 * j, 16, dm, d, 0, 3, 0, L + 16 * j);
	}
	tfs_pack_2bit(L, qs);
}

/* The 6-bit signed scale j of Q3_K's 12 scale bytes, minus 32. */
static int q3_scale(const uint8_t *s, int j)
{
	int lo = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;

	return (int8_t)(uint8_t)(lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}

/* |32 bytes high bits: bit s of byte m = element 32s + m|64 bytes 2-bit low levels|
 * 12 bytes of 6-bit scales|d|  (110)  w = d * (scale - 32) * (q - 4) */
static void enc_q3_k(const float *x, uint8_t *b)
{
	int8_t L[256];
	float scales[16], max_scale = 0, amax = 0;

	if (g_simd.fit_q3_16) {
		g_simd.fit_q3_16(x, L, scales);
	} else {
		for (int j = 0; j < 16; j++)
			scales[j] = fit_q3(x + 16 * j, L + 16 * j);
	}
	for (int j = 0; j < 16; j++) {
		if (fabsf(scales[j]) > amax) {
			amax = fabsf(scales[j]);
			max_scale = scales[j];
		}
	}
	int8_t Ls[16] = { 0 };
	float d = 0.f;

	if (max_scale != 0.0f) {
		float iscale = -32.f / max_scale;

		for (int j = 0; j < 16; j++)
			Ls[j] = (int8_t)(clampi((int8_t)(uint8_t)nearest_int(iscale * scales[j]), -32,
						31) + 32);
		d = 1 / iscale;
	}
	tfs_q3_k_finish(x, Ls, d, L, b);
}

void tfs_q3_k_finish(const float *x, const int8_t *Ls, float d_block, int8_t *L, uint8_t *b)
{
	uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;

	memset(sc, 0, 12);
	for (int j = 0; j < 16; j++) {
		const int l = Ls[j];

		if (j < 8)
			sc[j] = (uint8_t)(l & 0xf);
		else
			sc[j - 8] = (uint8_t)(sc[j - 8] | (l & 0xf) << 4);
		sc[8 + j % 4] = (uint8_t)(sc[8 + j % 4] | (l >> 4) << (2 * (j / 4)));
	}
	put_half(b + 108, d_block);
	for (int j = 0; j < 16; j++) {
		const float d = half_back(b + 108) * q3_scale(sc, j);

		if (d == 0.0f)
			continue;
		tfs_final_levels(x + 16 * j, 16, 0.0f, d, -4, 3, 4, (uint8_t *)L + 16 * j);
	}
	memset(hmask, 0, 32);
	for (int k = 0; k < 8; k++)   /* element 32k + m: bit k of hmask[m]; no branch */
		for (int m = 0; m < 32; m++) {
			const uint8_t high = L[32 * k + m] > 3;

			hmask[m] = (uint8_t)(hmask[m] | high << k);
			L[32 * k + m] = (int8_t)(L[32 * k + m] - 4 * high);
		}
	tfs_pack_2bit((const uint8_t *)L, qs);
}

/* Q4_K / Q5_K: the 8 scales and 8 mins, 6 bits each, in 12 bytes. */
void tfs_put_scale_min_k4(uint8_t *s, int j, uint8_t ls, uint8_t lm)
{
	if (j < 4) {
		s[j] = ls;
		s[j + 4] = lm;
	} else {
		s[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
		s[j - 4] = (uint8_t)(s[j - 4] | (ls >> 4) << 6);
		s[j] = (uint8_t)(s[j] | (lm >> 4) << 6);
	}
}

void tfs_get_scale_min_k4(const uint8_t *s, int j, uint8_t *ls, uint8_t *lm)
{
	if (j < 4) {
		*ls = s[j] & 63;
		*lm = s[j + 4] & 63;
	} else {
		*ls = (uint8_t)((s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4);
		*lm = (uint8_t)((s[j + 4] >> 4) | (s[j] >> 6) << 4);
	}
}

/* The part Q4_K and Q5_K share: fits 8 sub-blocks of 32 with levels 0..nmax, writes d, dmin
 * (at b) and the 12 scale bytes (at b + 4), and leaves the fits' levels in L. */
static void fit_k4(const float *x, uint8_t *b, uint8_t *L, const tfs_affine_search *search)
{
	float w[256], mins[8], scales[8], max_scale = 0, max_min = 0;

	for (int j = 0; j < 8; j++) {
		const float *xs = x + 32 * j;
		float sum_x2 = 0;

		for (int l = 0; l < 32; l++)
			sum_x2 += xs[l] * xs[l];
		const float av_x = sqrtf(sum_x2 / 32);

		for (int l = 0; l < 32; l++)
			w[32 * j + l] = av_x + fabsf(xs[l]);
	}
	if (g_simd.affine8)
		g_simd.affine8(32, x, w, L, scales, mins, search);
	else
		for (int j = 0; j < 8; j++)
			scales[j] = tfs_fit_affine(32, x + 32 * j, w + 32 * j, L + 32 * j, &mins[j], search);
	for (int j = 0; j < 8; j++) {
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;

	for (int j = 0; j < 8; j++) {
		uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
		uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);

		tfs_put_scale_min_k4(b + 4, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
	}
	put_half(b, max_scale / 63.f);
	put_half(b + 2, max_min / 63.f);
}

/* Q4_K's and Q5_K's last pass: every sub-block's levels 0..nmax at the scale and min its
 * bytes at b now say (a sub-block of scale 0 keeps the fit's). */
static void k4_levels(const float *x, int nmax, const uint8_t *b, uint8_t *L)
{
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;

		tfs_get_scale_min_k4(b + 4, j, &sc, &m);
		const float d = half_back(b) * sc;

		if (d == 0.0f)
			continue;
		const float dm = half_back(b + 2) * m;

		tfs_final_levels(x + 32 * j, 32, dm, d, 0, nmax, 0, L + 32 * j);
	}
}

/* |d|dmin|12 bytes scales and mins|128 bytes: byte 32c + l = elements 64c + l (low nibble)
 * and 64c + 32 + l (high)|  (144)  w = d * sc * q - dmin * m */
static void enc_q4_k(const float *x, uint8_t *b)
{
	static const tfs_affine_search search = { 15, -1.f, 0.1f, 20, false };
	uint8_t L[256];

	fit_k4(x, b, L, &search);
	tfs_q4_k_finish(x, L, b);
}

void tfs_q4_k_finish(const float *x, uint8_t *L, uint8_t *b)
{
	k4_levels(x, 15, b, L);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++)
			b[16 + 32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
}

/* |d|dmin|12 bytes scales and mins|32 bytes fifth bits: bits 2c, 2c+1 of byte l for elements
 * 64c + l, 64c + 32 + l|128 bytes low nibbles as Q4_K|  (176) */
static void enc_q5_k(const float *x, uint8_t *b)
{
	static const tfs_affine_search search = { 31, -0.5f, 0.1f, 15, false };
	uint8_t L[256];

	fit_k4(x, b, L, &search);
	tfs_q5_k_finish(x, L, b);
}

void tfs_q5_k_finish(const float *x, uint8_t *L, uint8_t *b)
{
	uint8_t *qh = b + 16, *ql = b + 48;

	k4_levels(x, 31, b, L);
	memset(qh, 0, 32);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++) {
			uint8_t l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];

			qh[l] = (uint8_t)(qh[l] | (l1 >> 4) << (2 * c) | (l2 >> 4) << (2 * c + 1));
			ql[32 * c + l] = (uint8_t)((l1 & 0xf) | (l2 & 0xf) << 4);
		}
}

/* |128 bytes low nibbles|64 bytes high 2 bits|16 int8 scales|d|  (210)
 * w = d * scale * (q - 32); element 128h + 32s + l: nibble of ql[64h + l + 32(s&1)]
 * (high when s >= 2), bits 2s of qh[32h + l] */
static void enc_q6_k(const float *x, uint8_t *b)
{
	int8_t L[256];
	float scales[16];

	tfs_fit_symmetric_subs(16, 16, 32, x, NULL, L, scales);
	tfs_q6_k_finish(x, scales, L, b);
}

void tfs_q6_k_finish(const float *x, const float *scales, int8_t *L, uint8_t *b)
{
	float max_scale = 0, max_abs = 0;
	uint8_t *ql = b, *qh = b + 128;
	int8_t sc[16];

	for (int j = 0; j < 16; j++) {
		if (fabsf(scales[j]) > max_abs) {
			max_abs = fabsf(scales[j]);
			max_scale = scales[j];
		}
	}
	if (max_abs < GROUP_EPS) {
		memset(b, 0, 210);
		return;
	}
	const float iscale = -128.f / max_scale;

	put_half(b + 208, 1 / iscale);
	for (int j = 0; j < 16; j++) {
		int v = nearest_int(iscale * scales[j]);

		sc[j] = (int8_t)(uint8_t)(v < 127 ? v : 127);
	}
	memcpy(b + 192, sc, 16);
	for (int j = 0; j < 16; j++) {
		const float d = half_back(b + 208) * sc[j];

		if (d == 0.0f)
			continue;
		tfs_final_levels(x + 16 * j, 16, 0.0f, d, -32, 31, 32, (uint8_t *)L + 16 * j);
	}
	for (int h = 0; h < 2; h++)
		for (int l = 0; l < 32; l++) {
			const int8_t *p = L + 128 * h + l;

			ql[64 * h + l] = (uint8_t)((p[0] & 0xf) | (p[64] & 0xf) << 4);
			ql[64 * h + 32 + l] = (uint8_t)((p[32] & 0xf) | (p[96] & 0xf) << 4);
			qh[32 * h + l] = (uint8_t)(p[0] >> 4 | (p[32] >> 4) << 2 | (p[64] >> 4) << 4 |
						   (p[96] >> 4) << 6);
		}
}

/* |float d|256 int8|16 int16 sums of 16|  (292)  q = round(-127 x / max), d = 1/(-127/max) */
static void enc_q8_k(const float *x, uint8_t *b)
{
	if (g_simd.q8_k && g_simd.q8_k(x, b))
		return;
	float amax, max = signed_absmax(x, 256, &amax);
	int8_t *qs = (int8_t *)(b + 4);

	if (amax == 0.0f) {
		memset(b, 0, 292);
		return;
	}
	const float iscale = -127.f / max, d = 1 / iscale;

	for (int j = 0; j < 256; j++) {
		int v = nearest_int(iscale * x[j]);

		qs[j] = (int8_t)(v < 127 ? v : 127);
	}
	for (int j = 0; j < 16; j++) {
		int16_t sum = 0;

		for (int i = 0; i < 16; i++)
			sum = (int16_t)(sum + qs[16 * j + i]);
		memcpy(b + 260 + 2 * j, &sum, 2);
	}
	memcpy(b, &d, 4);
}

/* ==== IQ4: the non-linear 4-bit code book ==== */

/* Index of the code book value nearest to x (the lower one on exact ties is not taken:
 * the upper wins unless strictly nearer, as ggml decides). */
static int nearest_iq4(float x)
{
	const int8_t *v = tfs_kvalues_iq4nl;

	if (x <= v[0])
		return 0;
	if (x >= v[15])
		return 15;
	int lo = 0, hi = 15;

	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;

		if (x < v[mid])
			hi = mid;
		else
			lo = mid;
	}
	return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/* The scale of one 32-element IQ4 block, weighted by x^2 (ww NULL) or by ww: the scale
 * mapping the largest magnitude to the book's end, then 15 candidates around it; 0 for an
 * all-zero block. */
static float fit_iq4(const float *x, const float *ww)
{
	const int8_t *v = tfs_kvalues_iq4nl;
	float amax, max = signed_absmax(x, 32, &amax);

	if (amax < GROUP_EPS)
		return 0;
	float d = -max / v[0], id = 1 / d, sumqx = 0, sumq2 = 0;

	for (int j = 0; j < 32; j++) {
		float q = v[nearest_iq4(id * x[j])], w = ww ? ww[j] : x[j] * x[j];

		sumqx += w * q * x[j];
		sumq2 += w * q * q;
	}
	d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
	float best = d * sumqx;

	for (int t = -7; t <= 7; t++) {
		id = (t + v[0]) / max;
		sumqx = sumq2 = 0;
		for (int j = 0; j < 32; j++) {
			float q = v[nearest_iq4(id * x[j])], w = ww ? ww[j] : x[j] * x[j];

			sumqx += w * q * x[j];
			sumq2 += w * q * q;
		}
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			d = sumqx / sumq2;
			best = d * sumqx;
		}
	}
	return d;
}

/* 32 code book indices at inverse scale id, packed: byte j = element j | element 16 + j. */
static void put_iq4_nibbles(const float *x, float id, uint8_t *q)
{
	if (g_simd.iq4_nibbles) {
		g_simd.iq4_nibbles(x, id, q);
		return;
	}
	for (int j = 0; j < 16; j++)
		q[j] = (uint8_t)(nearest_iq4(id * x[j]) | nearest_iq4(id * x[j + 16]) << 4);
}

/* With an importance matrix, ggml weighs each value of an n-value (super-)block by
 * qw sqrt(sigma2 + x^2), sigma2 twice the block's mean square; else by x^2 (w NULL). */
static const float *iq4_weights(const float *x, int n, const float *qw, float *w)
{
	float sigma2 = 0;

	if (!qw)
		return NULL;
	for (int j = 0; j < n; j++)
		sigma2 += x[j] * x[j];
	sigma2 *= 2.f / (float)n;
	for (int j = 0; j < n; j++)
		w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
	return w;
}

/* |d|16 bytes: indices into the code book, low nibbles 0..15, high 16..31|  (18);
 * qw: importance weights or NULL */
static void enc_iq4_nl_w(const float *x, const float *qw, uint8_t *b)
{
	float w[32];
	const float d = fit_iq4(x, iq4_weights(x, 32, qw, w));

	put_half(b, d);
	put_iq4_nibbles(x, d != 0.0f ? 1 / d : 0, b + 2);
}

static void enc_iq4_nl(const float *x, uint8_t *b)
{
	const float d = fit_iq4(x, NULL);

	put_half(b, d);
	put_iq4_nibbles(x, d != 0.0f ? 1 / d : 0, b + 2);
}

/* Eight IQ4_NL blocks, their scales fitted together; qw: their 256 importance weights, or
 * NULL. */
static void enc_iq4_nl8(const float *x, const float *qw, uint8_t *b)
{
	float d[8], w[256];

	for (int k = 0; qw && k < 8; k++)
		iq4_weights(x + 32 * k, 32, qw + 32 * k, w + 32 * k);
	g_simd.fit_iq4_8(x, qw ? w : NULL, d);
	for (int k = 0; k < 8; k++) {
		put_half(b + 18 * k, d[k]);
		put_iq4_nibbles(x + 32 * k, d[k] != 0.0f ? 1 / d[k] : 0, b + 18 * k + 2);
	}
}

/* |d|u16 scale high bits (2 per block)|4 bytes scale low nibbles|128 bytes: per 32-element
 * block, 16 bytes as IQ4_NL|  (136)  w = d * (scale - 32) * book[q]; qw: importance weights
 * or NULL */
static void enc_iq4_xs_w(const float *x, const float *qw, uint8_t *b)
{
	float scales[8], max_scale = 0, amax_scale = 0, w[256];
	const float *ww = iq4_weights(x, 256, qw, w);
	uint16_t sh = 0;

	if (g_simd.fit_iq4_8)
		g_simd.fit_iq4_8(x, ww, scales);
	else
		for (int ib = 0; ib < 8; ib++)
			scales[ib] = fit_iq4(x + 32 * ib, ww ? ww + 32 * ib : NULL);
	for (int ib = 0; ib < 8; ib++) {
		if (fabsf(scales[ib]) > amax_scale) {
			amax_scale = fabsf(scales[ib]);
			max_scale = scales[ib];
		}
	}
	const float d = -max_scale / 32, id = d != 0.0f ? 1 / d : 0.f;

	put_half(b, d);
	memset(b + 4, 0, 4);
	for (int ib = 0; ib < 8; ib++) {
		int l = clampi(nearest_int(id * scales[ib]), -32, 31);
		const float dl = d * l;

		put_iq4_nibbles(x + 32 * ib, dl != 0.0f ? 1 / dl : 0.f, b + 8 + 16 * ib);
		l += 32;
		b[4 + ib / 2] = (uint8_t)(b[4 + ib / 2] | (l & 0xf) << (4 * (ib % 2)));
		sh = (uint16_t)(sh | (l >> 4) << (2 * ib));
	}
	memcpy(b + 2, &sh, 2);
}

static void enc_iq4_xs(const float *x, uint8_t *b)
{
	enc_iq4_xs_w(x, NULL, b);
}

/* ==== the table and the entry points ==== */

typedef void (*enc_fn)(const float *x, uint8_t *b);

static const enc_fn k_encoders[TFS_DT_GGML_COUNT] = {
	[TFS_DT_Q4_0] = enc_q4_0, [TFS_DT_Q4_1] = enc_q4_1, [TFS_DT_Q5_0] = enc_q5_0,
	[TFS_DT_Q5_1] = enc_q5_1, [TFS_DT_Q8_0] = enc_q8_0, [TFS_DT_Q8_1] = enc_q8_1,
	[TFS_DT_Q1_0] = enc_q1_0,
	[TFS_DT_Q2_0] = enc_q2_0, [TFS_DT_MXFP4] = enc_mxfp4, [TFS_DT_NVFP4] = enc_nvfp4,
	[TFS_DT_TQ1_0] = enc_tq1_0, [TFS_DT_TQ2_0] = enc_tq2_0,
	[TFS_DT_Q2_K] = enc_q2_k, [TFS_DT_Q3_K] = enc_q3_k, [TFS_DT_Q4_K] = enc_q4_k,
	[TFS_DT_Q5_K] = enc_q5_k, [TFS_DT_Q6_K] = enc_q6_k, [TFS_DT_Q8_K] = enc_q8_k,
	[TFS_DT_IQ4_NL] = enc_iq4_nl, [TFS_DT_IQ4_XS] = enc_iq4_xs,
};

/* The IQ types' grid searches, which take importance weights (quant.h). */
typedef int (*enc_iq_fn)(const float *x, const float *qw, uint8_t *b);

static const enc_iq_fn k_iq_encoders[TFS_DT_GGML_COUNT] = {
	[TFS_DT_IQ2_XXS] = tfs_enc_iq2_xxs, [TFS_DT_IQ2_XS] = tfs_enc_iq2_xs,
	[TFS_DT_IQ2_S] = tfs_enc_iq2_s, [TFS_DT_IQ3_XXS] = tfs_enc_iq3_xxs,
	[TFS_DT_IQ3_S] = tfs_enc_iq3_s, [TFS_DT_IQ1_S] = tfs_enc_iq1_s,
	[TFS_DT_IQ1_M] = tfs_enc_iq1_m,
};

/* (testing.h) the encoders above call no kernel of g_simd: one that comes to must be
 * left out here */
bool tfs_quantize_has_simd(int id)
{
	return !(id >= 0 && id < TFS_DT_GGML_COUNT && k_iq_encoders[id]);
}

bool tfs_quantize_takes_imatrix(int id)
{
	return (id >= 0 && id < TFS_DT_GGML_COUNT && k_iq_encoders[id]) || id == TFS_DT_IQ4_NL ||
	       id == TFS_DT_IQ4_XS || tfs_quantize_weighs_blocks(id) || tfs_quantize_weighs_rows(id);
}

/* The types ggml quantizes only with an importance matrix (ggml_quantize_requires_imatrix). */
bool tfs_quantize_needs_imatrix(int id)
{
	return id == TFS_DT_IQ2_XXS || id == TFS_DT_IQ2_XS || id == TFS_DT_IQ1_S;
}

/* ==== element types: floats rounded, integers checked ==== */

/* The magnitude a (finite, >= 0) as a small float with mbits mantissa bits and exponent bias
 * `bias`, nearest-even, subnormals included.  The code may pass the format's largest finite
 * one; the caller decides what overflow means. */
static uint32_t minifloat_code(float a, int mbits, int bias)
{
	uint32_t ax = tfs_f32_bits(a), e32 = ax >> 23, m = ax & 0x7fffffu;
	int e = (int)(e32 ? e32 : 1) - 127 + bias;

	if (e32)
		m |= 0x800000u;
	if (e >= 1)   /* normal: drop 23 - mbits bits; a carry bumps the exponent */
		return tfs_rne_shift(((uint32_t)(e - 1) << 23) + m, (unsigned)(23 - mbits));
	return tfs_rne_shift(m, (unsigned)(23 - mbits + 1 - e));
}

/* F8_E4M3 (fn: no infinity, 0x7F is NaN), as torch and ml_dtypes round: nearest-even, and
 * anything past 464 (halfway to the next binade's first value) is NaN. */
static uint8_t f32_to_e4m3(float f)
{
	uint8_t sign = (uint8_t)((tfs_f32_bits(f) >> 24) & 0x80u);
	float a = fabsf(f);

	if (!(a <= FLT_MAX))
		return sign | 0x7f;
	uint32_t c = minifloat_code(a, 3, 7);

	return sign | (uint8_t)(c > 0x7f ? 0x7f : c);
}

/* F8_E5M2 (IEEE-like): nearest-even, overflow to infinity, NaN as 0x7F. */
static uint8_t f32_to_e5m2(float f)
{
	uint8_t sign = (uint8_t)((tfs_f32_bits(f) >> 24) & 0x80u);
	float a = fabsf(f);

	if (a != a)
		return sign | 0x7f;
	if (a > FLT_MAX)
		return sign | 0x7c;
	uint32_t c = minifloat_code(a, 2, 15);

	return sign | (uint8_t)(c > 0x7c ? 0x7c : c);
}

/* F8_E4M3FNUZ and F8_E5M2FNUZ (no infinity, no -0, 0x80 the only NaN), as torch and ml_dtypes
 * convert: nearest-even; what rounds past the largest finite value (240, 57344), infinities
 * and NaN become NaN; a negative value that rounds to zero is +0. */
static uint8_t f32_to_fnuz(float f, int mbits, int bias)
{
	uint8_t sign = (uint8_t)((tfs_f32_bits(f) >> 24) & 0x80u);
	float a = fabsf(f);

	if (!(a <= FLT_MAX))
		return 0x80;
	uint32_t c = minifloat_code(a, mbits, bias);

	if (c > 0x7f)
		return 0x80;
	return c ? (uint8_t)(sign | c) : 0;
}

/* F6_E2M3, F6_E3M2 and F4 (E2M1) have no infinity and no NaN: nearest-even, and a finite
 * value past the largest (7.5, 28, 6) saturates to it, as ml_dtypes converts.  -1 for an
 * infinity or a NaN, which they cannot hold (ml_dtypes makes them the largest value and
 * -0). */
static int f32_to_mx(float f, int ebits, int mbits)
{
	const int width = 1 + ebits + mbits;
	const uint32_t max = (1u << (width - 1)) - 1;
	uint32_t sign = (tfs_f32_bits(f) >> 31) << (width - 1);
	float a = fabsf(f);

	if (!(a <= FLT_MAX))
		return -1;
	uint32_t c = minifloat_code(a, mbits, (1 << (ebits - 1)) - 1);

	return (int)(sign | (c > max ? max : c));
}

/* F8_E8M0 (2^(e-127); 0xFF is NaN; no sign, no zero) of a positive value, as torch and
 * ml_dtypes convert one: the power of two below it, or the one above from 1.5 times it up
 * (ties go up); 2^-127 for anything smaller; NaN past 1.5 * 2^127 and for infinities and
 * NaN.  -1 for zero and negative values, which it cannot hold (torch drops the sign and makes
 * 0 the smallest value, ml_dtypes makes them NaN). */
static int f32_to_e8m0(float f)
{
	uint32_t b = tfs_f32_bits(f), e = (b >> 23) & 0xffu, frac = b & 0x7fffffu;

	if (e == 0xff)
		return 0xff;
	if ((b >> 31) || (e == 0 && frac == 0))
		return -1;
	if (e == 0)   /* frac * 2^-149: 2^-127 is frac 2^22 */
		return frac >= 0x600000u ? 1 : 0;
	e += frac >= 0x400000u;
	return e >= 0xff ? 0xff : (int)e;
}

/* F8_E8M0, F6 and F4: the float element types that refuse some values.  Returns 0,
 * TFS_E_INVALID for a value the type cannot hold (with the element's index), or NOT_NARROW
 * for a type it does not write. */
#define NOT_NARROW 1
static int encode_narrow_floats(uint8_t *dst, int id, const char *name, const float *src,
				uint64_t n, uint64_t first, tfs_error *err)
{
	int ebits = 0, mbits = 0;

	switch (id) {
	case TFS_DT_F8_E8M0:
		for (uint64_t i = 0; i < n; i++) {
			int c = f32_to_e8m0(src[i]);

			if (c < 0)
				return tfs_error_set(err, TFS_E_INVALID, "element %" PRIu64 " (%g) "
						     "cannot be stored as %s, which holds only "
						     "positive values", first + i, (double)src[i], name);
			dst[i] = (uint8_t)c;
		}
		return 0;
	case TFS_DT_F6_E2M3: ebits = 2; mbits = 3; break;
	case TFS_DT_F6_E3M2: ebits = 3; mbits = 2; break;
	case TFS_DT_F4: ebits = 2; mbits = 1; break;
	default:
		return NOT_NARROW;
	}
	const unsigned width = 1u + (unsigned)(ebits + mbits);   /* 6 or 4 bits, low first */
	uint32_t acc = 0;
	unsigned have = 0;

	for (uint64_t i = 0; i < n; i++) {
		int c = f32_to_mx(src[i], ebits, mbits);

		if (c < 0)
			return tfs_error_set(err, TFS_E_INVALID, "element %" PRIu64 " (%g) cannot be "
					     "stored as %s, which has no infinity and no NaN",
					     first + i, (double)src[i], name);
		acc |= (uint32_t)c << have;
		for (have += width; have >= 8; have -= 8, acc >>= 8)
			*dst++ = (uint8_t)acc;
	}
	return 0;   /* n is whole blocks: nothing is left in acc */
}

typedef struct {
	double lo, hi;   /* inclusive range, exact in double for every type below */
	unsigned bytes;
	bool is_signed;
} int_type;

static const int_type *int_type_of(int id)
{
	static const int_type k_int[] = {
		{ -128.0, 127.0, 1, true }, { -32768.0, 32767.0, 2, true },
		{ -2147483648.0, 2147483647.0, 4, true },
		{ -9223372036854775808.0, 9223372036854775807.0, 8, true },
		{ 0.0, 255.0, 1, false }, { 0.0, 65535.0, 2, false }, { 0.0, 4294967295.0, 4, false },
		{ 0.0, 18446744073709551615.0, 8, false }, { 0.0, 1.0, 1, false },
	};
	switch (id) {
	case TFS_DT_I8: return &k_int[0];
	case TFS_DT_I16: return &k_int[1];
	case TFS_DT_I32: return &k_int[2];
	case TFS_DT_I64: return &k_int[3];
	case TFS_DT_U8: return &k_int[4];
	case TFS_DT_U16: return &k_int[5];
	case TFS_DT_U32: return &k_int[6];
	case TFS_DT_U64: return &k_int[7];
	case TFS_DT_BOOL: return &k_int[8];
	default: return NULL;
	}
}

/* Integers: every value must be integral and in range (2^63 and 2^64 themselves are not:
 * the double bounds above round up to them, hence the strict test at the top). */
static int encode_ints(uint8_t *dst, const int_type *t, const char *name, const float *src,
		       uint64_t n, uint64_t first, tfs_error *err)
{
	for (uint64_t i = 0; i < n; i++) {
		double v = src[i];

		if (v != v || v != trunc(v))
			return tfs_error_set(err, TFS_E_INVALID,
					     "element %" PRIu64 " (%g) is not an integer, as %s needs",
					     first + i, v, name);
		if (v < t->lo || v > t->hi || (t->bytes == 8 && v >= t->hi))
			return tfs_error_set(err, TFS_E_INVALID,
					     "element %" PRIu64 " (%g) is out of the range of %s",
					     first + i, v, name);
		uint64_t u = t->is_signed ? (uint64_t)(int64_t)v : (uint64_t)v;

		memcpy(dst + i * t->bytes, &u, t->bytes);   /* little-endian hosts only */
	}
	return 0;
}

/* One-element-per-block float types.  Returns false for a type it does not write. */
static bool encode_floats(uint8_t *dst, int id, const float *src, uint64_t n)
{
	switch (id) {
	case TFS_DT_F32:
		memcpy(dst, src, n * 4);
		return true;
	case TFS_DT_F64:
		for (uint64_t i = 0; i < n; i++) {
			double v = src[i];

			memcpy(dst + 8 * i, &v, 8);
		}
		return true;
	case TFS_DT_F16: case TFS_DT_BF16:
		if (id == TFS_DT_F16 ? g_simd.f16 != NULL : g_simd.bf16 != NULL) {
			(id == TFS_DT_F16 ? g_simd.f16 : g_simd.bf16)(src, dst, n);
			return true;
		}
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = id == TFS_DT_F16 ? tfs_f32_to_f16(src[i]) : tfs_f32_to_bf16(src[i]);

			memcpy(dst + 2 * i, &h, 2);
		}
		return true;
	case TFS_DT_F8_E4M3:
		for (uint64_t i = 0; i < n; i++)
			dst[i] = f32_to_e4m3(src[i]);
		return true;
	case TFS_DT_F8_E5M2:
		for (uint64_t i = 0; i < n; i++)
			dst[i] = f32_to_e5m2(src[i]);
		return true;
	case TFS_DT_F8_E4M3FNUZ:
		for (uint64_t i = 0; i < n; i++)
			dst[i] = f32_to_fnuz(src[i], 3, 8);
		return true;
	case TFS_DT_F8_E5M2FNUZ:
		for (uint64_t i = 0; i < n; i++)
			dst[i] = f32_to_fnuz(src[i], 2, 16);
		return true;
	default:
		return false;
	}
}

/* ==== entry points ==== */

static bool is_plain_float(int id)
{
	switch (id) {
	case TFS_DT_F32: case TFS_DT_F64: case TFS_DT_F16: case TFS_DT_BF16:
	case TFS_DT_F8_E4M3: case TFS_DT_F8_E5M2: case TFS_DT_F8_E4M3FNUZ: case TFS_DT_F8_E5M2FNUZ:
	case TFS_DT_F8_E8M0: case TFS_DT_F6_E2M3: case TFS_DT_F6_E3M2: case TFS_DT_F4:
		return true;
	default:
		return false;
	}
}

bool tfs_quantize_supported(int id)
{
	if (id >= 0 && id < TFS_DT_GGML_COUNT && (k_encoders[id] || k_iq_encoders[id]))
		return true;
	return is_plain_float(id) || int_type_of(id) != NULL;
}

int tfs_quantize(void *dst, int id, const float *src, uint64_t nelems, tfs_error *err)
{
	return tfs_quantize_from(dst, id, src, nelems, 0, err);
}

int tfs_quantize_from(void *dst, int id, const float *src, uint64_t nelems, uint64_t first,
		      tfs_error *err)
{
	return tfs_quantize_weighted(dst, id, src, nelems, first, 0, NULL, err);
}

/* The IQ types: super-block by super-block, each with its columns' weights. */
static int encode_iq(uint8_t *out, int id, const tfs_dtype_info *t, const float *src,
		     uint64_t nelems, uint64_t first, uint64_t n_per_row, const float *qw,
		     tfs_error *err)
{
	if (!qw && tfs_quantize_needs_imatrix(id))
		return tfs_error_set(err, TFS_E_UNSUPPORTED,
				     "%s needs an importance matrix to quantize (as in ggml), and "
				     "none was given (mount with -o imatrix=FILE)", t->name);
	if (qw && (n_per_row == 0 || n_per_row % 256 || first % 256))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s rows of %" PRIu64 " values are not whole 256-value blocks",
				     t->name, n_per_row);
	for (uint64_t i = 0; i < nelems / 256; i++) {
		const float *w = qw ? qw + (first + 256 * i) % n_per_row : NULL;

		if (k_iq_encoders[id](src + 256 * i, w, out + i * t->block_bytes) == 0)
			continue;
		/* where ggml's search aborts: say whose numbers made it overflow */
		for (int k = 0; w && k < 256; k++)
			if (!(w[k] >= 0.0f && w[k] <= FLT_MAX))
				return tfs_error_set(err, TFS_E_INVALID,
						     "values %" PRIu64 "..%" PRIu64 " cannot be "
						     "quantized as %s: the importance matrix weighs "
						     "column %" PRIu64 " by %g (its weights must be "
						     "finite and >= 0; ggml's search aborts)",
						     first + 256 * i, first + 256 * i + 255, t->name,
						     (first + 256 * i + (uint64_t)k) % n_per_row,
						     (double)w[k]);
		return tfs_error_set(err, TFS_E_INVALID,
				     "values %" PRIu64 "..%" PRIu64 " cannot be quantized as %s: "
				     "a NaN or an infinity among them, or values so large that "
				     "their weighted squares overflow (ggml's search aborts on them)",
				     first + 256 * i, first + 256 * i + 255, t->name);
	}
	return 0;
}

int tfs_quantize_weighted(void *dst, int id, const float *src, uint64_t nelems, uint64_t first,
			  uint64_t n_per_row, const float *qw, tfs_error *err)
{
	const tfs_dtype_info *t = tfs_dtype(id);

	pthread_once(&g_simd_once, choose_simd);

	if (!t)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "unknown tensor type %d", id);
	if (!tfs_quantize_supported(id))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensorfs cannot write %s from floats",
				     t->name);
	if (nelems % t->block_elems)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%" PRIu64 " values are not a whole number of %" PRIu32
				     "-element %s blocks", nelems, t->block_elems, t->name);
	if (qw && (id == TFS_DT_IQ4_NL || id == TFS_DT_IQ4_XS)) {
		const uint32_t be = t->block_elems;

		if (n_per_row == 0 || n_per_row % be || first % be)
			return tfs_error_set(err, TFS_E_INVALID, "%s rows of %" PRIu64 " values are "
					     "not whole %" PRIu32 "-value blocks", t->name, n_per_row,
					     be);
		for (uint64_t i = 0; i < nelems / be; i++) {
			const uint64_t col = (first + be * i) % n_per_row;

			if (id == TFS_DT_IQ4_XS) {
				enc_iq4_xs_w(src + be * i, qw + col, (uint8_t *)dst + 136 * i);
			} else if (g_simd.fit_iq4_8 && i + 8 <= nelems / be && col + 256 <= n_per_row) {
				/* eight blocks of one row at once */
				enc_iq4_nl8(src + be * i, qw + col, (uint8_t *)dst + 18 * i);
				i += 7;
			} else {
				enc_iq4_nl_w(src + be * i, qw + col, (uint8_t *)dst + 18 * i);
			}
		}
		return 0;
	}
	if (qw && tfs_quantize_weighs_blocks(id))
		return tfs_quantize_k_weighted(dst, id, src, nelems, first, n_per_row, qw, err);
	if (qw && tfs_quantize_weighs_rows(id))
		return tfs_quantize_row_weighted(dst, id, src, nelems, first, n_per_row, qw, err);
	if (id < TFS_DT_GGML_COUNT && k_iq_encoders[id])
		return encode_iq(dst, id, t, src, nelems, first, n_per_row, qw, err);
	const int_type *it = int_type_of(id);

	if (it)
		return encode_ints(dst, it, t->name, src, nelems, first, err);
	if (encode_floats(dst, id, src, nelems))
		return 0;
	int rc = encode_narrow_floats(dst, id, t->name, src, nelems, first, err);

	if (rc != NOT_NARROW)
		return rc;
	const enc_fn enc = k_encoders[id];
	const uint64_t nblocks = nelems / t->block_elems;
	uint8_t *out = dst;
	uint64_t i = 0;

	if (id == TFS_DT_IQ4_NL && g_simd.fit_iq4_8)   /* IQ4_NL's blocks are fitted 8 at a time */
		for (; i + 8 <= nblocks; i += 8)
			enc_iq4_nl8(src + 32 * i, NULL, out + 18 * i);
	for (; i < nblocks; i++)
		enc(src + i * t->block_elems, out + i * t->block_bytes);
	return 0;
}
