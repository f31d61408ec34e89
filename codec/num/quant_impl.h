/*
 * quant_impl.h - what quant.c shares with its SIMD kernels (codec-private).
 *
 * The SIMD kernels (quant_avx2.c) fit eight sub-blocks at once, one per lane, each lane
 * doing exactly the scalar arithmetic of quant.c in the same order; their results must
 * equal the scalar ones bit for bit (tests/test_quant_ggml.c checks both paths against ggml).
 */
#ifndef TFS_QUANT_IMPL_H
#define TFS_QUANT_IMPL_H

#include "quant.h"
#include "dequant.h"
#include "dtype.h"
#include "cursor.h"

/* ==== float bits (quant.c, dtype.c) ==== */

static inline uint32_t tfs_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* Round-to-nearest-even of the unsigned integer m / 2^shift. */
static inline uint32_t tfs_rne_shift(uint32_t m, unsigned shift)
{
	if (shift == 0)
		return m;
	if (shift > 31)
		return 0;
	uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);

	return r + (rem > half || (rem == half && (r & 1)));
}

/* The search of an affine (scale and min) fit: levels 0..nmax, nstep + 1 candidate scales
 * (nmax + rmin + rdelta * step) / (max - min), error |e| (use_mad) or e^2. */
typedef struct {
	int nmax;
	float rmin, rdelta;
	int nstep;
	bool use_mad;
} tfs_affine_search;

/* ggml's nearest_int: round half to even by adding 1.5 * 2^23, the low mantissa bits then
 * being the integer (beyond +-2^22, or for NaN, garbage, but the same garbage as ggml's). */
static inline int nearest_int(float v)
{
	float s = v + 12582912.f;

	return (int)(tfs_f32_bits(s) & 0x007fffffu) - 0x00400000;
}

/* ggml's MAX: the first operand unless the second compares above it (NaN: the second). */
static inline float ggml_max(float a, float b) { return a > b ? a : b; }

/* The sum of x^2 over a 256-value super-block, in order (the IQ types' sigma2 is it / 256,
 * or twice that). */
static inline float sum_squares_256(const float *x)
{
	float s = 0;

	for (int i = 0; i < 256; i++)
		s += x[i] * x[i];
	return s;
}

static inline int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* A float as an IEEE half at p, and back. */
static inline void put_half(uint8_t *p, float v)
{
	uint16_t h = tfs_f32_to_f16(v);

	memcpy(p, &h, 2);
}

static inline float half_back(const uint8_t *p)
{
	return tfs_f16_to_f32(tfs_le16(p));
}

#define GROUP_EPS 1e-15f   /* a sub-block whose largest magnitude is below this is all zero */

/* ==== the K-quants' parts (quant.c), shared with the weighted quantizers (quant_weighted.c) ==== */

/* The last pass of every K-quant: L[i] = clamp(nearest((x[i] + off) / d), lo, hi) + add. */
void tfs_final_levels(const float *x, int n, float off, float d, int lo, int hi, int add,
		      uint8_t *L);
/* Affine levels 0..nmax of n values with an offset (min <= 0), weights w: the search a
 * describes (ggml's make_qkx2_quants, and make_qkx3_quants given weights).  *neg_min gets
 * -min; returns the scale. */
float tfs_fit_affine(int n, const float *x, const float *w, uint8_t *L, float *neg_min,
		     const tfs_affine_search *a);
/* tfs_fit_affine of nsub consecutive sub-blocks of n (16 or 32), eight at a time where the
 * CPU has a kernel for it. */
void tfs_fit_affine_subs(int nsub, int n, const float *x, const float *w, uint8_t *L,
			 float *scales, float *neg_mins, const tfs_affine_search *a);
/* Symmetric levels -nmax..nmax-1 of n values weighted by w (NULL: x^2), ggml's
 * make_qx_quants; L gets level + nmax; returns the scale.  _subs: nsub consecutive
 * sub-blocks of n (16 or 32), eight at a time where the CPU has a kernel for it. */
float tfs_fit_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L);
void tfs_fit_symmetric_subs(int nsub, int n, int nmax, const float *x, const float *w,
			    int8_t *L, float *scales);
/* Levels 0..nmax of n numbers meant to be >= 0 weighted by w, ggml's make_qp_quants (L
 * bytes: a negative level wraps, as in ggml); returns the step. */
float tfs_fit_nonnegative(int n, int nmax, const float *x, uint8_t *L, const float *w);
/* The kernels chosen for this CPU, once (every entry point that uses them calls it first). */
void tfs_quant_ready(void);
/* Packs 256 2-bit levels (Q2_K, Q3_K): byte 32c + l holds elements 128c + l + 32s at bits 2s. */
void tfs_pack_2bit(const uint8_t *L, uint8_t *qs);
/* Q4_K / Q5_K: scale and min j (6 bits each) in, and out of, the 12 scale bytes. */
void tfs_put_scale_min_k4(uint8_t *s, int j, uint8_t ls, uint8_t lm);
void tfs_get_scale_min_k4(const uint8_t *s, int j, uint8_t *ls, uint8_t *lm);
/* Q3_K after its fits: the 16 sub-block scales as 6-bit levels Ls (level + 32) and the
 * super-block's d_block, the fit's levels L (level + 4) in, the 110-byte block b out. */
void tfs_q3_k_finish(const float *x, const int8_t *Ls, float d_block, int8_t *L, uint8_t *b);
/* Q4_K / Q5_K after d, dmin and the scale bytes are written at b: the last pass over the
 * fit's levels L, and the levels packed (b's 144 / 176 bytes complete). */
void tfs_q4_k_finish(const float *x, uint8_t *L, uint8_t *b);
void tfs_q5_k_finish(const float *x, uint8_t *L, uint8_t *b);
/* Q6_K after its sub-block fit: the 16 sub-block scales and the levels L (level + 32) in,
 * the 210-byte block b out. */
void tfs_q6_k_finish(const float *x, const float *scales, int8_t *L, uint8_t *b);
/* The weighted quantizers (quant_weighted.c), ggml's quantize_row_<type>_impl given
 * importance weights: one 256-value super-block x with its weights qw. */
void tfs_enc_q2_k_w(const float *x, const float *qw, uint8_t *b);
void tfs_enc_q3_k_w(const float *x, const float *qw, uint8_t *b);
void tfs_enc_q4_k_w(const float *x, const float *qw, uint8_t *b);
void tfs_enc_q5_k_w(const float *x, const float *qw, uint8_t *b);
void tfs_enc_q6_k_w(const float *x, const float *qw, uint8_t *b);
/* tfs_quantize_weighted of the K-quants (each super-block with its weights) and of the
 * 32-value types (whole rows only). */
int tfs_quantize_k_weighted(uint8_t *out, int id, const float *src, uint64_t nelems,
			    uint64_t first, uint64_t n_per_row, const float *qw, tfs_error *err);
int tfs_quantize_row_weighted(uint8_t *out, int id, const float *src, uint64_t nelems,
			      uint64_t first, uint64_t n_per_row, const float *qw, tfs_error *err);

/* tfs_quantize, with messages numbering the elements from `first` (a part of a tensor). */
int tfs_quantize_from(void *dst, int id, const float *src, uint64_t nelems, uint64_t first,
		      tfs_error *err);

/*
 * The IQ types' grid searches (quant_iq1.c, quant_iq2.c, quant_iq3.c): one 256-value
 * super-block x as the type's block b, the bytes ggml's quantize_row_<type>_impl writes for
 * that super-block.  qw: its 256 importance weights (llama.cpp's imatrix for these columns),
 * or NULL for ggml's weighting without one (the caller never passes NULL for IQ2_XXS, IQ2_XS
 * and IQ1_S, which ggml refuses to quantize without).  Returns 0, or -1 (b undefined) on the
 * blocks where ggml aborts: a NaN, or squares beyond FLT_MAX (values past ~1e19), that turn
 * its weights or errors into NaN or infinity so that its grid search finds no point (a NaN
 * that does not reach the search gives the zero sub-block ggml writes).  The tables each
 * type searches are built once, on first use; thread-safe.
 */
int tfs_enc_iq2_xxs(const float *x, const float *qw, uint8_t *b);
int tfs_enc_iq2_xs(const float *x, const float *qw, uint8_t *b);
int tfs_enc_iq2_s(const float *x, const float *qw, uint8_t *b);
int tfs_enc_iq3_xxs(const float *x, const float *qw, uint8_t *b);
int tfs_enc_iq3_s(const float *x, const float *qw, uint8_t *b);
int tfs_enc_iq1_s(const float *x, const float *qw, uint8_t *b);
int tfs_enc_iq1_m(const float *x, const float *qw, uint8_t *b);

#if defined(__x86_64__)
/* Fits 8 sub-blocks of n (16 or 32) values: sub-block j is x[n*j .. n*j + n) with weights
 * w[n*j ..]; its levels go to L[n*j ..], its scale to scale[j], minus its min to neg_min[j]. */
void tfs_fit_affine8_avx2(int n, const float *x, const float *w, uint8_t *L, float *scale,
			  float *neg_min, const tfs_affine_search *a);
/* Fits 8 sub-blocks of n (16 or 32) values with symmetric levels -nmax..nmax-1 weighted by
 * w (same layout; NULL: x^2): tfs_fit_symmetric of each; L gets level + nmax. */
void tfs_fit_symmetric8_avx2(int n, int nmax, const float *x, const float *w, int8_t *L,
			     float *scale);
/* Q3_K's fit of the 16 sub-blocks of 16 (levels -4..3, L gets level + 4; all-zero sub-blocks:
 * 0). */
void tfs_fit_q3_16_avx2(const float *x, int8_t *L, float *scale);
/* The IQ4 scale of 8 blocks of 32 (x + 32 j), as quant.c's fit_iq4: weighted by w (same
 * layout), or by x^2 (w NULL). */
void tfs_fit_iq4_8_avx2(const float *x, const float *w, float *d);
/* IQ4 code book indices of 32 values at inverse scale id, as nibbles (byte j = index j |
 * index 16 + j << 4). */
void tfs_iq4_nibbles_avx2(const float *x, float id, uint8_t *q);
/* L[i] = clamp(nearest((x[i] + off) / d), lo, hi) + add for n (a multiple of 8) values: the
 * K-quants' last pass (off 0 where the scalar code divides x alone: +-0 give the same level). */
void tfs_levels_avx2(const float *x, int n, float off, float d, int lo, int hi, int add, uint8_t *L);
/* n floats to IEEE halves / bfloat16, nearest-even, as tfs_f32_to_f16 / tfs_f32_to_bf16. */
void tfs_f32_to_f16_avx2(const float *x, uint8_t *y, size_t n);
void tfs_f32_to_bf16_avx2(const float *x, uint8_t *y, size_t n);
/* Q4_0 / Q4_1 levels of 32 values, min(15, (int8)trunc((x - off) * id + add)), as nibbles:
 * byte j = level j | level 16 + j << 4. */
void tfs_q4_nibbles_avx2(const float *x, float off, float id, float add, uint8_t *q);
/* Q1_0's 16 sign bytes of 128 values. */
void tfs_q1_0_signs_avx2(const float *x, uint8_t *qs);
/* TQ1_0's first 48 bytes (the 5-trit ones) at inverse scale id; false (nothing certain
 * written) when a product is NaN or beyond 2^23. */
bool tfs_tq1_0_avx2(const float *x, float id, uint8_t *qs);
/* Q2_0's 16 code bytes at inverse scale id; false (nothing written) when a product is NaN
 * or beyond 2^23. */
bool tfs_q2_0_avx2(const float *x, float id, uint8_t *qs);
/* A whole Q4_1 block (F16C for its halves); false (nothing written) when the scalar code
 * must decide (see tfs_min_max32_avx2, or a NaN scale). */
bool tfs_q4_1_avx2(const float *x, uint8_t *b);
/* Q5_0 (cap 31) / Q5_1 (cap 0: none) levels of 32 values, low nibbles as above into q;
 * returns the fifth bits (bit j: level j). */
uint32_t tfs_q5_levels_avx2(const float *x, float off, float id, float add, int cap, uint8_t *q);
/* MXFP4 (n = 32) / NVFP4 (n = 16) code indices at half-scale d, as nibbles: byte j = index
 * of x[j] | index of x[n/2 + j] << 4. */
void tfs_fp4_nibbles_avx2(const float *x, int n, float d, uint8_t *q);
/* TQ2_0's 64 level bytes at inverse scale id; false (nothing written) when a product is NaN
 * or beyond 2^23, where the scalar code must decide. */
bool tfs_tq2_0_avx2(const float *x, float id, uint8_t *qs);
/* A whole Q8_K block; false (nothing written) for a block with a NaN or all zeros. */
bool tfs_q8_k_avx2(const float *x, uint8_t *b);
/* Min and max of 32 values as the scalar scan finds them; false for a NaN, or a zero min or
 * max (whose sign depends on the scan order): then the scalar code must decide. */
bool tfs_min_max32_avx2(const float *x, float *mn, float *mx);
#endif

#endif
