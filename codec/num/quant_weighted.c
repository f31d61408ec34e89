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
 * The fits, as ggml runs them:
 *   fit_symmetric_w  levels -nmax..nmax-1, the start scale -nmax/max and 18 nearby ones, the
 *                    best weighted least-squares one kept (ggml's make_qx_quants given
 *                    weights); Q4_0, Q5_0, Q3_K's sub-blocks and scales, Q6_K.
 *   tfs_fit_affine   levels 0..nmax with a min (quant.c; make_qkx3_quants given weights is
 *                    make_qkx2_quants), searched over 37 scales from (nmax - 0.9) / range in
 *                    steps of 0.05; Q4_1, Q5_1, Q2_K, Q4_K, Q5_K.
 *   fit_positive     the super-block scales of Q2_K, Q4_K, Q5_K: levels 0..nmax of
 *                    non-negative numbers, 9 start scales, then single levels moved while
 *                    that improves the fit (make_qp_quants); its levels are kept in bytes as
 *                    ggml keeps them, wrapping where a level would be negative.
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

/* ==== the fits ==== */

/* Symmetric levels -nmax..nmax-1 of n values weighted by w; L gets level + nmax; returns the
 * scale. */
static float fit_symmetric_w(int n, int nmax, const float *x, const float *w, int8_t *L)
{
	float max = 0, amax = 0;

	for (int i = 0; i < n; i++) {
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			max = x[i];
		}
	}
	if (amax < GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float iscale = -nmax / max, sumlx = 0, suml2 = 0;

	for (int i = 0; i < n; i++) {
		int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);

		L[i] = (int8_t)(l + nmax);
		sumlx += w[i] * x[i] * l;
		suml2 += w[i] * l * l;
	}
	float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;

	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < n; i++) {
			int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);

			sumlx += w[i] * x[i] * l;
			suml2 += w[i] * l * l;
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

/* fit_symmetric_w of nsub consecutive sub-blocks of n, eight at a time where the CPU has a
 * kernel for it. */
static void fit_symmetric_subs(int nsub, int n, int nmax, const float *x, const float *w,
			       int8_t *L, float *scales)
{
	const tfs_symmetric8w_fn k8 = tfs_quant_symmetric8w();
	int j = 0;

	for (; k8 && j + 8 <= nsub; j += 8)
		k8(n, nmax, x + n * j, w + n * j, L + n * j, scales + j);
	for (; j < nsub; j++)
		scales[j] = fit_symmetric_w(n, nmax, x + n * j, w + n * j, L + n * j);
}

/* The weighted squared error of x against levels of iscale, capped at nmax (no floor: the
 * numbers are meant to be >= 0). */
static float positive_error(int n, int nmax, const float *x, const float *w, float iscale)
{
	const float scale = 1 / iscale;
	float mse = 0;

	for (int i = 0; i < n; i++) {
		int l = nearest_int(iscale * x[i]);

		l = l < nmax ? l : nmax;
		float diff = x[i] - scale * l;

		mse += w[i] * diff * diff;
	}
	return mse;
}

/* Levels 0..nmax of n numbers meant to be >= 0 (sub-block scales or mins), weighted by w;
 * returns the scale. */
static float fit_positive(int n, int nmax, const float *x, const float *w, uint8_t *L)
{
	float max = 0;

	for (int i = 0; i < n; i++)
		max = ggml_max(max, x[i]);
	if (max < GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float iscale = nmax / max, scale = 1 / iscale, best_mse = 0;

	for (int i = 0; i < n; i++) {   /* the start: uncapped, as ggml rounds it */
		L[i] = (uint8_t)nearest_int(iscale * x[i]);
		float diff = x[i] - scale * L[i];

		best_mse += w[i] * diff * diff;
	}
	for (int is = -4; is <= 4; is++) {
		if (is == 0)
			continue;
		const float iscale_is = (0.1f * is + nmax) / max, mse = positive_error(n, nmax, x, w,
										     iscale_is);

		if (mse < best_mse) {
			best_mse = mse;
			iscale = iscale_is;
		}
	}
	float sumlx = 0, suml2 = 0;

	for (int i = 0; i < n; i++) {
		int l = nearest_int(iscale * x[i]);

		l = l < nmax ? l : nmax;
		L[i] = (uint8_t)l;   /* (the sums take l itself, the passes below the byte) */
		sumlx += w[i] * x[i] * l;
		suml2 += w[i] * l * l;
	}
	for (int pass = 0; pass < 5; pass++) {
		int changed = 0;

		for (int i = 0; i < n; i++) {
			float slx = sumlx - w[i] * x[i] * L[i], sl2 = suml2 - w[i] * L[i] * L[i];

			if (!(slx > 0 && sl2 > 0))
				continue;
			int nl = nearest_int(x[i] * sl2 / slx);

			nl = nl < nmax ? nl : nmax;
			if (nl == L[i])
				continue;
			slx += w[i] * x[i] * nl;
			sl2 += w[i] * nl * nl;
			if (slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (uint8_t)nl;
				sumlx = slx;
				suml2 = sl2;
				changed++;
			}
		}
		if (!changed)
			break;
	}
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
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
	put_half(b + 80, fit_positive(16, 15, scales, sw, Ls));
	put_half(b + 82, fit_positive(16, 15, mins, sw, Lm));
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

/* Q3_K's 16 6-bit scales (level + 32 in Ls) into its 12 scale bytes. */
static void put_q3_scales(const int8_t *Ls, uint8_t *sc)
{
	memset(sc, 0, 12);
	for (int j = 0; j < 16; j++) {
		const int l = Ls[j];

		if (j < 8)
			sc[j] = (uint8_t)(l & 0xf);
		else
			sc[j - 8] = (uint8_t)(sc[j - 8] | (l & 0xf) << 4);
		sc[8 + j % 4] = (uint8_t)(sc[8 + j % 4] | (l >> 4) << (2 * (j / 4)));
	}
}

void tfs_enc_q3_k_w(const float *x, const float *qw, uint8_t *b)
{
	const float sigma2 = 2 * sum_squares_256(x) / 256;
	int8_t L[256], Ls[16];
	float w[256], sw[16], scales[16];
	uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;

	for (int j = 0; j < 16; j++)
		sw[j] = weigh(16, x + 16 * j, qw + 16 * j, sigma2, w + 16 * j);
	fit_symmetric_subs(16, 16, 4, x, w, L, scales);
	const float d_block = fit_symmetric_w(16, 32, scales, sw, Ls);

	put_q3_scales(Ls, sc);
	put_half(b + 108, d_block);
	for (int j = 0; j < 16; j++) {
		const int lo = j < 8 ? sc[j] & 0xf : sc[j - 8] >> 4;
		const int s = (int8_t)(uint8_t)(lo | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
		const float d = half_back(b + 108) * s;

		if (d == 0.0f)
			continue;
		tfs_final_levels(x + 16 * j, 16, 0.0f, d, -4, 3, 4, (uint8_t *)L + 16 * j);
	}
	memset(hmask, 0, 32);
	for (int k = 0; k < 8; k++)   /* element 32k + m: bit k of hmask[m] */
		for (int m = 0; m < 32; m++) {
			const uint8_t high = L[32 * k + m] > 3;

			hmask[m] = (uint8_t)(hmask[m] | high << k);
			L[32 * k + m] = (int8_t)(L[32 * k + m] - 4 * high);
		}
	tfs_pack_2bit((const uint8_t *)L, qs);
}

/* What Q4_K and Q5_K share: d, dmin and the 12 scale bytes at b, the final levels in L. */
static void fit_k4_w(const float *x, const float *qw, int nmax, uint8_t *b, uint8_t *L)
{
	const tfs_affine_search search = k_fine_search(nmax);
	const float sigma2 = 2 * sum_squares_256(x) / 256;
	uint8_t Ls[8], Lm[8];
	float w[256], sw[8], scales[8], mins[8];

	for (int j = 0; j < 8; j++)
		sw[j] = weigh(32, x + 32 * j, qw + 32 * j, sigma2, w + 32 * j);
	tfs_fit_affine_subs(8, 32, x, w, L, scales, mins, &search);
	const float d_block = fit_positive(8, 63, scales, sw, Ls);
	const float m_block = fit_positive(8, 63, mins, sw, Lm);

	for (int j = 0; j < 8; j++) {
		/* Q5_K caps both at 63; Q4_K stores them as they are (they are <= 63 unless a
		 * negative level wrapped, which ggml keeps) */
		const uint8_t ls = nmax == 31 && Ls[j] > 63 ? 63 : Ls[j];
		const uint8_t lm = nmax == 31 && Lm[j] > 63 ? 63 : Lm[j];

		tfs_put_scale_min_k4(b + 4, j, ls, lm);
	}
	put_half(b, d_block);
	put_half(b + 2, m_block);
	for (int j = 0; j < 8; j++) {
		uint8_t s, m;

		tfs_get_scale_min_k4(b + 4, j, &s, &m);
		const float d = half_back(b) * s;

		if (d == 0.0f)
			continue;
		tfs_final_levels(x + 32 * j, 32, half_back(b + 2) * m, d, 0, nmax, 0, L + 32 * j);
	}
}

void tfs_enc_q4_k_w(const float *x, const float *qw, uint8_t *b)
{
	uint8_t L[256];

	fit_k4_w(x, qw, 15, b, L);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++)
			b[16 + 32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
}

void tfs_enc_q5_k_w(const float *x, const float *qw, uint8_t *b)
{
	uint8_t L[256], *qh = b + 16, *ql = b + 48;

	fit_k4_w(x, qw, 31, b, L);
	memset(qh, 0, 32);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++) {
			uint8_t l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];

			qh[l] = (uint8_t)(qh[l] | (l1 >> 4) << (2 * c) | (l2 >> 4) << (2 * c + 1));
			ql[32 * c + l] = (uint8_t)((l1 & 0xf) | (l2 & 0xf) << 4);
		}
}

void tfs_enc_q6_k_w(const float *x, const float *qw, uint8_t *b)
{
	int8_t L[256];
	float scales[16];

	fit_symmetric_subs(16, 16, 32, x, qw, L, scales);   /* the imatrix entries weigh Q6_K */
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
	fit_symmetric_subs(nb, 32, nmax, x, k->w, k->L, k->d);
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
