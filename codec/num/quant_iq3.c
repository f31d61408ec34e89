/*
 * quant_iq3.c - IQ3_XXS and IQ3_S from floats, the bytes ggml's quantizers write.
 *
 * Both types code a 256-value super-block as 8 sub-blocks of 32 values, each 8 groups of 4
 * magnitudes.  A magnitude is a level l in 0..7 standing for 2 l + 1 (the grid bytes in
 * dequant.c are about 4 (2 l + 1)), and the four levels of a group must together be a
 * point of the type's grid: 256 points of the 8^4 for IQ3_XXS, 512 for IQ3_S.
 *
 * IQ3_XXS, 98 bytes:
 *   1. d: half, the super-block's scale
 *   2. 64 bytes: the grid index of each group of 4, in order
 *   3. 8 x u32, one per sub-block: bits 7 k .. 7 k + 6 the signs of values 8 k .. 8 k + 6
 *      (bit set: negative; the eighth sign is the one making the count of minus signs
 *      even), bits 28..31 the sub-block scale s.  value = d * (0.5 + s) / 2 * grid * sign
 * IQ3_S, 110 bytes:
 *   1. d: half
 *   2. 64 bytes: the low 8 bits of each group's 9-bit grid index
 *   3. 8 bytes: bit k of byte j = the ninth index bit of group k of sub-block j
 *   4. 32 bytes: the 8 signs of each 8 values, bit i = value i
 *   5. 4 bytes: the 4-bit scale s of sub-block 2 j (low nibble) and 2 j + 1 (high).
 *      value = d * (1 + 2 s) * grid * sign
 *
 * The search, per sub-block: value x weighs qw sqrt(sigma2 + x^2) (sigma2 = twice the mean
 * square of the super-block), or x^2 without importance weights.  The signs are set aside
 * (IQ3_XXS makes their count even by flipping the value that matters least, which is then
 * fitted as a negative magnitude) and the magnitudes are tried at inverse scales
 * (15 + 0.2 t) / max, t = -15..15 (XXS) or -9..9 (S).  At each, every value rounds to its
 * level; a group whose levels are no grid point takes, among its precomputed neighbours
 * (the grid points in the 2 (XXS) or 3 (S) nearest distance shells), the one of least
 * error weighted by the square roots of the weights.  The candidate with the best weighted
 * least-squares fit wins; the groups that had to move are rounded again at its scale (S:
 * every group) and the scale refitted.  The super-block's d is the largest sub-block scale
 * / 31 (stored times a small fudge factor, as ggml does), each sub-block's scale a 4-bit
 * code against it.
 *
 * Everything is float arithmetic in ggml's order: the rounding ties, the comparisons (< or
 * <=) and the sums' order decide the bytes, so none of it may be "simplified".
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "dequant.h"
#include "quant_impl.h"

/* ==== the grids and their neighbour lists ==== */

enum { POINTS = 8 * 8 * 8 * 8 };   /* every 4 levels of 3 bits, packed level i << 3 i */

/* The neighbour lists' total sizes (for each point off the grid: a count, then that many
 * grid indices), fixed by the grids in dequant.c; build_grid checks them. */
enum { NEAR_XXS = 22825, NEAR_S = 28317 };

typedef struct {
	int size;
	bool ok;             /* false: the tables could not be built (encoders fail) */
	float q[512][4];     /* 2 l + 1 for the levels of each grid point: what the fit sees */
	int32_t map[POINTS]; /* packed levels -> grid index, or ~(start of its neighbour list) */
	uint16_t *near;
} iq3_grid;

static uint16_t g_near_xxs[NEAR_XXS], g_near_s[NEAR_S];
static iq3_grid g_xxs = { .size = 256, .near = g_near_xxs };
static iq3_grid g_s = { .size = 512, .near = g_near_s };
static pthread_once_t g_xxs_once = PTHREAD_ONCE_INIT, g_s_once = PTHREAD_ONCE_INIT;

/*
 * Fills g from the dequantization grid (4 bytes per point, value 0 lowest): its levels,
 * the map, and for each point off the grid the grid points of its `shells` nearest squared
 * distances, nearer shells first, ascending indices within a shell (the order the nearest
 * neighbour search breaks ties by).  The grid bytes are not exactly 8 l + 4 (the top one
 * is 62), so a byte's level is its rank among the distinct bytes.
 */
static void build_grid(iq3_grid *g, const uint32_t *grid, int shells, int cap)
{
	bool seen[256] = { false }, on_grid[POINTS] = { false };
	int rank[256], nlevels = 0, used = 0;
	uint8_t lv[512][4];

	for (int k = 0; k < g->size; k++)
		for (int i = 0; i < 4; i++)
			seen[(grid[k] >> (8 * i)) & 0xff] = true;
	for (int v = 0; v < 256; v++)
		rank[v] = seen[v] ? nlevels++ : -1;
	if (nlevels != 8)
		return;
	for (int k = 0; k < g->size; k++) {
		int u = 0;

		for (int i = 0; i < 4; i++) {
			lv[k][i] = (uint8_t)rank[(grid[k] >> (8 * i)) & 0xff];
			g->q[k][i] = (float)(2 * lv[k][i] + 1);
			u |= lv[k][i] << (3 * i);
		}
		if (on_grid[u])
			return;
		on_grid[u] = true;
		g->map[u] = k;
	}
	if (!on_grid[0])
		return;   /* a sub-block no candidate fits keeps all levels 0 */
	for (int u = 0; u < POINTS; u++) {
		int d2[512], start = used, last = -1;

		if (on_grid[u])
			continue;
		for (int k = 0; k < g->size; k++) {
			d2[k] = 0;
			for (int i = 0; i < 4; i++) {
				int diff = 2 * (lv[k][i] - ((u >> (3 * i)) & 7));

				d2[k] += diff * diff;
			}
		}
		if (++used > cap)
			return;
		for (int s = 0; s < shells; s++) {
			int next = INT32_MAX;

			for (int k = 0; k < g->size; k++)
				if (d2[k] > last && d2[k] < next)
					next = d2[k];
			if (next == INT32_MAX)
				break;
			for (int k = 0; k < g->size; k++) {
				if (d2[k] != next)
					continue;
				if (used == cap)
					return;
				g->near[used++] = (uint16_t)k;
			}
			last = next;
		}
		g->near[start] = (uint16_t)(used - start - 1);
		g->map[u] = ~start;
	}
	g->ok = used == cap;
}

static void build_xxs(void)
{
	build_grid(&g_xxs, tfs_grid_iq3xxs, 2, NEAR_XXS);
}

static void build_s(void)
{
	build_grid(&g_s, tfs_grid_iq3s, 3, NEAR_S);
}

/* ==== one sub-block ==== */

static inline int level_of(float v, float id)
{
	int l = nearest_int(0.5f * (id * v - 1));

	return l < 0 ? 0 : l > 7 ? 7 : l;
}

/*
 * The grid point for the 4 magnitudes mag at inverse scale id: the point of their levels,
 * else (*off set) the neighbour with the least error sum w (scale q - mag)^2, the first
 * on ties.  -1 when no error is below FLT_MAX (an infinite or NaN weight or value), where
 * ggml asserts.
 */
static int round_group(const iq3_grid *g, const float *mag, const float *w, float id,
		       float scale, bool *off)
{
	int u = level_of(mag[0], id) | level_of(mag[1], id) << 3 | level_of(mag[2], id) << 6 |
		level_of(mag[3], id) << 9;

	*off = g->map[u] < 0;
	if (!*off)
		return g->map[u];
	const uint16_t *list = g->near + ~g->map[u];
	float best_d2 = FLT_MAX;
	int best = -1;

	for (int j = 1; j <= list[0]; j++) {
		const float *q = g->q[list[j]];
		float d2 = 0;

		for (int i = 0; i < 4; i++) {
			float diff = scale * q[i] - mag[i];

			d2 += w[i] * diff * diff;
		}
		if (d2 < best_d2) {
			best_d2 = d2;
			best = list[j];
		}
	}
	return best;
}

/* The weighted fit of magnitudes mag to the points idx: sum w x q, sum w q^2. */
static void fit_sums(const iq3_grid *g, const uint16_t *idx, const float *mag, const float *w,
		     float *sumqx, float *sumq2)
{
	float sx = 0, s2 = 0;

	for (int i = 0; i < 32; i++) {
		const float q = g->q[idx[i / 4]][i % 4];

		sx += w[i] * mag[i] * q;
		s2 += w[i] * q * q;
	}
	*sumqx = sx;
	*sumq2 = s2;
}

typedef struct {
	uint16_t idx[8];   /* grid index of each group of 4 */
	uint8_t signs[4];  /* bit i of byte k: value 8 k + i negative (XXS: 7 bits) */
	float scale;
	bool coded;        /* fit_sub_blocks: false for a sub-block too small to fit */
} sub_fit;

/* Magnitudes and signs of 32 values; with even_signs (IQ3_XXS, whose eighth sign is implied)
 * a group of 8 with an odd count of minus signs has its least important value's sign
 * flipped, that value then fitted as a negative magnitude. */
static void split_signs(const float *x, const float *w, bool even_signs, float *mag,
			uint8_t *signs)
{
	for (int k = 0; k < 4; k++) {
		unsigned s = 0, nneg = 0;

		for (int i = 0; i < 8; i++) {
			if (x[8 * k + i] >= 0) {
				mag[8 * k + i] = x[8 * k + i];
			} else {
				mag[8 * k + i] = -x[8 * k + i];
				s |= 1u << i;
				nneg++;
			}
		}
		if (even_signs && nneg % 2) {
			int imin = 0;
			float min = w[8 * k] * x[8 * k] * x[8 * k];

			for (int i = 1; i < 8; i++) {
				float e = w[8 * k + i] * x[8 * k + i] * x[8 * k + i];

				if (e < min) {
					min = e;
					imin = i;
				}
			}
			mag[8 * k + imin] = -mag[8 * k + imin];
			s ^= 1u << imin;
		}
		signs[k] = (uint8_t)(even_signs ? s & 127 : s);
	}
}

/*
 * Fits the 32 values x (weights qw, NULL: none; sigma2: twice the super-block's mean
 * square) to grid points and a scale.  xxs: IQ3_XXS's search, else IQ3_S's.  Returns 0,
 * 1 for a sub-block too small to fit (scale 0, nothing else set), -1 where ggml asserts:
 * a group with no finite error at any neighbour (NaN, or errors overflowing), or a NaN
 * scale.  (ggml's check that the final groups lie on the grid cannot fail here: a group
 * is always held as a grid index.)
 */
static int fit_sub_block(const iq3_grid *g, bool xxs, const float *x, const float *qw,
			 float sigma2, sub_fit *f)
{
	float w[32], sw[32], mag[32];

	for (int i = 0; i < 32; i++) {
		w[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i]) : x[i] * x[i];
		sw[i] = sqrtf(w[i]);
	}
	split_signs(x, w, xxs, mag, f->signs);

	float max = mag[0];

	for (int i = 1; i < 32; i++)
		max = max > mag[i] ? max : mag[i];   /* a NaN wins only as the latest value */
	if (xxs ? max < 1e-8f : max == 0)
		return 1;

	/* Without a winning candidate, XXS keeps all levels 0 as they are; S rounds again. */
	bool on[8], cand_on[8];
	uint16_t cand[8];
	float best = 0, scale = max / 15, sumqx, sumq2;
	const int ntry = xxs ? 15 : 9;

	for (int k = 0; k < 8; k++) {
		f->idx[k] = (uint16_t)g->map[0];
		on[k] = xxs;
	}
	for (int t = -ntry; t <= ntry; t++) {
		const float id = (15 + t * 0.2f) / max, this_scale = 1 / id;

		for (int k = 0; k < 8; k++) {
			bool off;
			int j = round_group(g, mag + 4 * k, sw + 4 * k, id, this_scale, &off);

			if (j < 0)
				return -1;
			cand[k] = (uint16_t)j;
			cand_on[k] = !off;
		}
		fit_sums(g, cand, mag, w, &sumqx, &sumq2);
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			scale = sumqx / sumq2;
			best = scale * sumqx;
			memcpy(f->idx, cand, sizeof(cand));
			memcpy(on, cand_on, sizeof(on));
		}
	}

	int n_off = 0;

	for (int k = 0; k < 8; k++)
		n_off += !on[k];
	if (n_off > 0 && scale > 0) {
		const float id = 1 / scale;

		for (int k = 0; k < 8; k++) {
			bool off;

			if (xxs && on[k])
				continue;
			int j = round_group(g, mag + 4 * k, sw + 4 * k, id, scale, &off);

			if (j < 0)
				return -1;
			f->idx[k] = (uint16_t)j;
		}
		fit_sums(g, f->idx, mag, w, &sumqx, &sumq2);
		if (sumq2 > 0)
			scale = sumqx / sumq2;
	}
	if (scale < 0) {   /* only with negative weights: the scale is stored unsigned */
		scale = -scale;
		for (int k = 0; k < 4; k++)
			f->signs[k] = (uint8_t)(xxs ? ~f->signs[k] & 127 : ~f->signs[k]);
	}
	if (!(scale >= 0))
		return -1;
	f->scale = scale;
	return 0;
}

/* ==== the two block types ==== */

/* A sub-block's 4-bit scale against the inverse super-block scale id: (1 + 2 s) / id. */
static inline unsigned scale_code(float scale, float id)
{
	int l = nearest_int(0.5f * (id * scale - 1));

	return (unsigned)(l < 0 ? 0 : l > 15 ? 15 : l);
}

/* Fits a block's 8 sub-blocks of 32 on grid g (xxs: IQ3_XXS's search): f[ib] (coded false for
 * a sub-block too small to fit, its step 0) and the largest step in *max_scale.  -1 where
 * ggml aborts. */
static int fit_sub_blocks(const iq3_grid *g, bool xxs, const float *x, const float *qw,
			  sub_fit f[8], float *max_scale)
{
	const float sigma2 = 2 * sum_squares_256(x) / 256;

	*max_scale = 0;
	for (int ib = 0; ib < 8; ib++) {
		int rc = fit_sub_block(g, xxs, x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2,
				       &f[ib]);

		if (rc < 0)
			return -1;
		f[ib].coded = rc == 0;
		if (!f[ib].coded) {
			f[ib].scale = 0;
			continue;
		}
		*max_scale = *max_scale > f[ib].scale ? *max_scale : f[ib].scale;
	}
	return 0;
}

int tfs_enc_iq3_xxs(const float *x, const float *qw, uint8_t *b)
{
	pthread_once(&g_xxs_once, build_xxs);
	if (!g_xxs.ok)
		return -1;

	sub_fit f[8];
	float max_scale;
	uint32_t aux[8] = { 0 };

	memset(b, 0, 98);
	if (fit_sub_blocks(&g_xxs, true, x, qw, f, &max_scale) < 0)
		return -1;
	if (!max_scale)   /* ggml then stores nothing but d = 0 */
		return 0;
	for (int ib = 0; ib < 8; ib++) {
		if (!f[ib].coded)
			continue;
		for (int k = 0; k < 8; k++)
			b[2 + 8 * ib + k] = (uint8_t)f[ib].idx[k];
		aux[ib] = f[ib].signs[0] | (uint32_t)f[ib].signs[1] << 7 |
			  (uint32_t)f[ib].signs[2] << 14 | (uint32_t)f[ib].signs[3] << 21;
	}
	const float d = max_scale / 31, id = 1 / d;
	const uint16_t h = tfs_f32_to_f16(d * 1.0125f);

	memcpy(b, &h, 2);
	for (int ib = 0; ib < 8; ib++) {
		aux[ib] |= (uint32_t)scale_code(f[ib].scale, id) << 28;
		memcpy(b + 66 + 4 * ib, &aux[ib], 4);
	}
	return 0;
}

int tfs_enc_iq3_s(const float *x, const float *qw, uint8_t *b)
{
	pthread_once(&g_s_once, build_s);
	if (!g_s.ok)
		return -1;

	sub_fit f[8];
	float max_scale;
	/* ggml moves on in the index and sign bytes only after a sub-block it fitted: a skipped
	 * (all-zero) one shifts the later ones forward, leaving zeros at the end. */
	uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74;

	memset(b, 0, 110);
	if (fit_sub_blocks(&g_s, false, x, qw, f, &max_scale) < 0)
		return -1;
	for (int ib = 0; ib < 8; ib++) {
		if (!f[ib].coded)
			continue;
		for (int k = 0; k < 8; k++) {
			qs[k] = (uint8_t)f[ib].idx[k];
			qh[ib] = (uint8_t)(qh[ib] | (f[ib].idx[k] >> 8) << k);
		}
		memcpy(signs, f[ib].signs, 4);
		qs += 8;
		signs += 4;
	}
	if (!max_scale)
		return 0;   /* d stays 0, the rest as written */
	const float d = max_scale / 31, id = 1 / d;
	const uint16_t h = tfs_f32_to_f16(d * 1.033f);

	memcpy(b, &h, 2);
	for (int ib = 0; ib < 8; ib += 2)
		b[106 + ib / 2] = (uint8_t)(scale_code(f[ib].scale, id) |
					    scale_code(f[ib + 1].scale, id) << 4);
	return 0;
}
