/*
 * quant_weighted.c - Q4_0, Q4_1, Q5_0, Q5_1 and Q2_K..Q6_K with importance weights: the bytes
 * ggml_quantize_chunk(type, ..., imatrix) writes (its quantize_row_<type>_impl).
 *
 * With an importance matrix ggml fits these types by another search than without one
 * (quant.c): every value x weighs qw * sqrt(sigma2 + x^2), qw being the imatrix entry of its
 * column and sigma2 a mean square of its neighbourhood, and the scales are then fitted to
 * minimize that weighted error.  Where sigma2 comes from decides what can be quantized
 * alone:
 *   - the K-quants (Q2_K..Q5_K): the super-block's own 256 values (Q2_K: their mean square;
 *     Q3_K, Q4_K, Q5_K: twice it), so each super-block is still independent;
 *     Q6_K uses the imatrix entries themselves, unscaled;
 *   - Q4_0, Q4_1, Q5_0, Q5_1: the mean square of the whole row, so a block depends on its
 *     row (the caller gives sigma2: tfs_quantize_row_sigma2).
 *
 * The fits, as ggml runs them, are quant.c's (shared with the unweighted quantizers and the
 * IQ types):
 *   tfs_fit_symmetric    levels -nmax..nmax-1, the start scale -nmax/max and 18 nearby ones,
 *                        the best weighted least-squares one kept (ggml's make_qx_quants);
 *                        Q4_0, Q5_0, Q3_K's sub-blocks and scales, Q6_K.
 *   tfs_fit_affine       levels 0..nmax with a min (make_qkx3_quants given weights is
 *                        make_qkx2_quants), searched over 37 scales from (nmax - 0.9) / range
 *                        in steps of 0.05; Q4_1, Q5_1, Q2_K, Q4_K, Q5_K.
 *   tfs_fit_nonnegative  the super-block scales of Q2_K, Q4_K, Q5_K (make_qp_quants).
 * Eight sub-blocks are fitted at once where the CPU has a kernel for it (_subs).
 * Everything is float arithmetic in ggml's order (the build has -ffp-contract=off).  The
 * blocks' layouts are drawn in quant.c above the unweighted encoders.
 */
#include "quant_impl.h"

#include <inttypes.h>
#include <math.h>

static tfs_affine_search k_fine_search(int nmax)
{
	return (tfs_affine_search){ nmax, -0.9f, 0.05f, 36, false };
}

/* w[i] = qw[i] * sqrt(sigma2 + x[i]^2) for n values; returns their sum, in order. */
static float weigh(int n, const float *x, const float *qw, float sigma2, float *w)
{
	float sum = 0;

	for (int i = 0; i < n; i++)
		w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
	for (int i = 0; i < n; i++)
		sum += w[i];
	return sum;
}

/* ==== the K-quants ==== */

void tfs_enc_q2_k_w(const float *x, const float *qw, uint8_t *b)
{
	const tfs_affine_search search = k_fine_search(3);
	const float sigma2 = sum_squares_256(x) / 256;
	uint8_t L[256], Ls[16], Lm[16], *sc = b, *qs = b + 16;
	float w[256], sw[16], scales[16], mins[16];

	for (int j = 0; j < 16; j++)
		sw[j] = weigh(16, x + 16 * j, qw + 16 * j, sigma2, w + 16 * j);
	tfs_fit_affine_subs(16, 16, x, w, L, scales, mins, &search);
	put_half(b + 80, tfs_fit_nonnegative(16, 15, scales, Ls, sw));
	put_half(b + 82, tfs_fit_nonnegative(16, 15, mins, Lm, sw));
	const float dm = half_back(b + 80), mm = half_back(b + 82);

	for (int j = 0; j < 16; j++)
		sc[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
	for (int j = 0; j < 16; j++) {
		const float d = dm * (sc[j] & 0xf);

		if (d == 0.0f)
			continue;
		/* ggml adds the min even when it is 0: x + 0 and x differ only for -0, whose
		 * level is the same */
		tfs_final_levels(x + 16 * j, 16, mm * (sc[j] >> 4), d, 0, 3, 0, L + 16 * j);
	}
	tfs_pack_2bit(L, qs);
}

void tfs_enc_q3_k_w(const float *x, const float *qw, uint8_t *b)
{
	const float sigma2 = 2 * sum_squares_256(x) / 256;
	int8_t L[256], Ls[16];
	float w[256], sw[16], scales[16];

	for (int j = 0; j < 16; j++)
		sw[j] = weigh(16, x + 16 * j, qw + 16 * j, sigma2, w + 16 * j);
	tfs_fit_symmetric_subs(16, 16, 4, x, w, L, scales);
	tfs_q3_k_finish(x, Ls, tfs_fit_symmetric(16, 32, scales, sw, Ls), L, b);
}

/* What Q4_K and Q5_K share: d, dmin and the 12 scale bytes at b, the fits' levels in L. */
static void fit_k4_w(const float *x, const float *qw, int nmax, uint8_t *b, uint8_t *L)
{
	const tfs_affine_search search = k_fine_search(nmax);
	const float sigma2 = 2 * sum_squares_256(x) / 256;
	uint8_t Ls[8], Lm[8];
	float w[256], sw[8], scales[8], mins[8];

	for (int j = 0; j < 8; j++)
		sw[j] = weigh(32, x + 32 * j, qw + 32 * j, sigma2, w + 32 * j);
	tfs_fit_affine_subs(8, 32, x, w, L, scales, mins, &search);
	const float d_block = tfs_fit_nonnegative(8, 63, scales, Ls, sw);
	const float m_block = tfs_fit_nonnegative(8, 63, mins, Lm, sw);

	for (int j = 0; j < 8; j++) {
		/* Q5_K caps both at 63; Q4_K stores them as they are (they are <= 63 unless a
		 * negative level wrapped, which ggml keeps) */
		const uint8_t ls = nmax == 31 && Ls[j] > 63 ? 63 : Ls[j];
		const uint8_t lm = nmax == 31 && Lm[j] > 63 ? 63 : Lm[j];

		tfs_put_scale_min_k4(b + 4, j, ls, lm);
	}
	put_half(b, d_block);
	put_half(b + 2, m_block);
}

void tfs_enc_q4_k_w(const float *x, const float *qw, uint8_t *b)
{
	uint8_t L[256];

	fit_k4_w(x, qw, 15, b, L);
	tfs_q4_k_finish(x, L, b);
}

void tfs_enc_q5_k_w(const float *x, const float *qw, uint8_t *b)
{
	uint8_t L[256];

	fit_k4_w(x, qw, 31, b, L);
	tfs_q5_k_finish(x, L, b);
}

void tfs_enc_q6_k_w(const float *x, const float *qw, uint8_t *b)
{
	int8_t L[256];
	float scales[16];

	tfs_fit_symmetric_subs(16, 16, 32, x, qw, L, scales);   /* the imatrix entries weigh Q6_K */
	tfs_q6_k_finish(x, scales, L, b);
}

/* ==== the 32-value types, weighted by their row ==== */

/* Up to 8 blocks of 32 at a time: their weights w, and the fits of Q4_0, Q5_0 (symmetric, L
 * level + nmax, scale d) or Q4_1, Q5_1 (affine, L level, scale d, -min in neg_min). */
typedef struct {
	float w[256], d[8], neg_min[8];
	int8_t L[256];
} blocks8;

static void fit8_symmetric(blocks8 *k, int nb, int nmax, const float *x, const float *qw,
			   float sigma2)
{
	weigh(32 * nb, x, qw, sigma2, k->w);
	tfs_fit_symmetric_subs(nb, 32, nmax, x, k->w, k->L, k->d);
}

static void fit8_affine(blocks8 *k, int nb, int nmax, const float *x, const float *qw,
			float sigma2)
{
	const tfs_affine_search search = k_fine_search(nmax);

	weigh(32 * nb, x, qw, sigma2, k->w);
	tfs_fit_affine_subs(nb, 32, x, k->w, (uint8_t *)k->L, k->d, k->neg_min, &search);
}

static void enc_q4_0_w(const float *x, const float *qw, float sigma2, int nb, uint8_t *b)
{
	blocks8 k;

	fit8_symmetric(&k, nb, 8, x, qw, sigma2);
	for (int i = 0; i < nb; i++, b += 18) {
		const int8_t *L = k.L + 32 * i;

		put_half(b, k.d[i]);
		for (int j = 0; j < 16; j++)
			b[2 + j] = (uint8_t)(L[j] | L[j + 16] << 4);
	}
}

static void enc_q4_1_w(const float *x, const float *qw, float sigma2, int nb, uint8_t *b)
{
	blocks8 k;

	fit8_affine(&k, nb, 15, x, qw, sigma2);
	for (int i = 0; i < nb; i++, b += 20) {
		const uint8_t *L = (const uint8_t *)k.L + 32 * i;

		put_half(b, k.d[i]);
		put_half(b + 2, -k.neg_min[i]);
		for (int j = 0; j < 16; j++)
			b[4 + j] = (uint8_t)(L[j] | L[j + 16] << 4);
	}
}

/* The 5-bit levels L of 32 values: low nibbles at q, fifth bits (bit j: value j) returned. */
static uint32_t pack_5bit(const uint8_t *L, uint8_t *q)
{
	uint32_t qh = 0;

	for (int j = 0; j < 16; j++) {
		q[j] = (uint8_t)((L[j] & 0x0f) | (L[j + 16] & 0x0f) << 4);
		qh |= (uint32_t)((L[j] >> 4) & 1) << j | (uint32_t)((L[j + 16] >> 4) & 1) << (j + 16);
	}
	return qh;
}

static void enc_q5_0_w(const float *x, const float *qw, float sigma2, int nb, uint8_t *b)
{
	blocks8 k;

	fit8_symmetric(&k, nb, 16, x, qw, sigma2);
	for (int i = 0; i < nb; i++, b += 22) {
		const uint32_t qh = pack_5bit((const uint8_t *)k.L + 32 * i, b + 6);

		put_half(b, k.d[i]);
		memcpy(b + 2, &qh, 4);
	}
}

static void enc_q5_1_w(const float *x, const float *qw, float sigma2, int nb, uint8_t *b)
{
	blocks8 k;

	fit8_affine(&k, nb, 31, x, qw, sigma2);
	for (int i = 0; i < nb; i++, b += 24) {
		const uint32_t qh = pack_5bit((const uint8_t *)k.L + 32 * i, b + 8);

		put_half(b, k.d[i]);
		put_half(b + 2, -k.neg_min[i]);
		memcpy(b + 4, &qh, 4);
	}
}

/* ==== the dispatch ==== */

typedef void (*enc_k_w_fn)(const float *x, const float *qw, uint8_t *b);
typedef void (*enc_row_w_fn)(const float *x, const float *qw, float sigma2, int nb, uint8_t *b);

static enc_k_w_fn k_weighted_k(int id)
{
	switch (id) {
	case TFS_DT_Q2_K: return tfs_enc_q2_k_w;
	case TFS_DT_Q3_K: return tfs_enc_q3_k_w;
	case TFS_DT_Q4_K: return tfs_enc_q4_k_w;
	case TFS_DT_Q5_K: return tfs_enc_q5_k_w;
	case TFS_DT_Q6_K: return tfs_enc_q6_k_w;
	default: return NULL;
	}
}

static enc_row_w_fn k_weighted_row(int id)
{
	switch (id) {
	case TFS_DT_Q4_0: return enc_q4_0_w;
	case TFS_DT_Q4_1: return enc_q4_1_w;
	case TFS_DT_Q5_0: return enc_q5_0_w;
	case TFS_DT_Q5_1: return enc_q5_1_w;
	default: return NULL;
	}
}

bool tfs_quantize_weighs_rows(int id)
{
	return k_weighted_row(id) != NULL;
}

bool tfs_quantize_weighs_blocks(int id)
{
	return k_weighted_k(id) != NULL;
}

float tfs_quantize_row_sigma2(const float *row, uint64_t n_per_row)
{
	float sum = 0;

	for (uint64_t i = 0; i < n_per_row; i++)
		sum += row[i] * row[i];
	return sum / (float)n_per_row;
}

int tfs_quantize_k_weighted(uint8_t *out, int id, const float *src, uint64_t nelems,
			    uint64_t first, uint64_t n_per_row, const float *qw, tfs_error *err)
{
	const enc_k_w_fn enc = k_weighted_k(id);
	const tfs_dtype_info *t = tfs_dtype(id);

	if (n_per_row == 0 || n_per_row % 256 || first % 256)
		return tfs_error_set(err, TFS_E_INVALID, "%s rows of %" PRIu64 " values are not "
				     "whole 256-value blocks", t->name, n_per_row);
	for (uint64_t i = 0; i < nelems / 256; i++)
		enc(src + 256 * i, qw + (first + 256 * i) % n_per_row, out + i * t->block_bytes);
	return 0;
}

int tfs_quantize_weighted_part(void *dst, int id, const float *src, uint64_t nelems,
			       uint64_t first, uint64_t n_per_row, const float *qw, float sigma2,
			       tfs_error *err)
{
	const enc_row_w_fn enc = k_weighted_row(id);
	const tfs_dtype_info *t = tfs_dtype(id);

	tfs_quant_ready();   /* (called on its own by requant: the kernels must be chosen) */
	if (!enc || !qw)
		return tfs_quantize_weighted(dst, id, src, nelems, first, n_per_row, qw, err);
	if (n_per_row == 0 || n_per_row % 32 || first % 32 || nelems % 32 ||
	    first % n_per_row + nelems > n_per_row)
		return tfs_error_set(err, TFS_E_INVALID, "values %" PRIu64 "..%" PRIu64 " are not "
				     "whole %s blocks of one row of %" PRIu64, first,
				     first + nelems - 1, t->name, n_per_row);
	for (uint64_t i = 0; i < nelems / 32; i += 8) {
		const int nb = nelems / 32 - i < 8 ? (int)(nelems / 32 - i) : 8;

		enc(src + 32 * i, qw + (first + 32 * i) % n_per_row, sigma2, nb,
		    (uint8_t *)dst + i * t->block_bytes);
	}
	return 0;
}

int tfs_quantize_row_weighted(uint8_t *out, int id, const float *src, uint64_t nelems,
			      uint64_t first, uint64_t n_per_row, const float *qw, tfs_error *err)
{
	const tfs_dtype_info *t = tfs_dtype(id);

	if (n_per_row == 0 || n_per_row % 32 || first % n_per_row || nelems % n_per_row)
		return tfs_error_set(err, TFS_E_INVALID, "%s with an importance matrix weighs "
				     "each block by its whole row (as ggml does): values %" PRIu64
				     "..%" PRIu64 " are not whole rows of %" PRIu64, t->name, first,
				     first + nelems - 1, n_per_row);
	for (uint64_t r = 0; r < nelems / n_per_row; r++) {
		const float *row = src + r * n_per_row;
		int rc = tfs_quantize_weighted_part(out + r * (n_per_row / 32) * t->block_bytes, id,
						    row, n_per_row, 0, n_per_row, qw,
						    tfs_quantize_row_sigma2(row, n_per_row), err);

		if (rc)
			return rc;
	}
	return 0;
}
