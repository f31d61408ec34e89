/*
 * quant_iq2.c - float32 to IQ2_XXS, IQ2_XS and IQ2_S: the bytes ggml's
 * quantize_row_iq2_{xxs,xs,s}_impl write, one 256-value super-block at a time.
 *
 * The three types code each group of 8 values as one point of a grid (a fixed set of
 * 8-vectors of 3 magnitudes, dequant.c's tables) plus 8 signs.  The search sees the
 * magnitudes as levels 0..2, i.e. 1, 3, 5 times a step (the decoder's bytes are 8, 25, 43:
 * ggml searches the idealised grid and lets the scales absorb the difference).  Block
 * layouts, lowest address first, d an IEEE half, multi-byte fields little-endian:
 *
 *  1. IQ2_XXS (66 bytes): |d|8 x (4 bytes: grid indices of 4 groups | u32: 4 x 7 sign bits,
 *     bits 28..31 the scale s of these 32 values)|.  Step of the 32: d * (0.5 + s) / 4.
 *  2. IQ2_XS (74 bytes): |d|32 x u16: 9-bit grid index, 7 sign bits above it|8 bytes: two
 *     4-bit scales per 32 values, the low nibble for the first 16|.
 *  3. IQ2_S (82 bytes): |d|32 bytes: low 8 bits of 10-bit grid indices|32 bytes: 8 sign
 *     bits per group|8 bytes: 2 high index bits per group, 4 groups a byte|8 bytes: scales
 *     as IQ2_XS|.
 *
 * IQ2_XXS and IQ2_XS keep 7 signs a group: the eighth makes the count of minus signs even.
 * A group with an odd count is therefore given the sign that is wrong for its least
 * important value (weight times square), whose magnitude the search then sees negated.
 *
 * The search, per sub-block of 32 (XXS) or 16 values, on magnitudes with weights w:
 *  1. candidate steps around the largest magnitude / 5 (XXS: around make_qp_quants' fit,
 *     the K-quants' search for non-negative levels 0..4);
 *  2. at each, every value rounds to a level 0..2; a group whose 8 levels are not a grid
 *     point takes the nearest of the grid points listed for that pattern (the points at the
 *     one or two smallest distances), nearest by weighted error (weights sqrt(w));
 *  3. the candidate with the best least-squares fit wins; its groups are redone at the
 *     fitted step (XXS: all of them; XS and S: those that were off the grid) and the step
 *     refitted;
 *  4. the super-block's d is the largest sub-block step / 31, each step a 4-bit multiple.
 * All arithmetic is float, in ggml's order, comparisons as ggml's (strict where ggml's
 * are): the same ties break the same way.
 *
 * ggml aborts where its search meets a NaN (a grid point none of whose distances compare
 * below FLT_MAX, a NaN step): those blocks give -1 here.
 */
#include "dequant.h"
#include "quant_impl.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

/* ==== the grids ==== */

enum {
	/* A pattern of 8 levels 0..2 packed 2 bits each (element 0 lowest) is a key; the
	 * largest is 0xaaaa. */
	KEY_SPAN = 0xaaab,
	MAX_POINTS = 1024,
};

/* The search's view of one grid, derived from dequant.c's magnitudes. */
typedef struct {
	const uint64_t *magnitudes;   /* dequant.c's grid: one magnitude byte per value */
	int npoints;
	int nwant;   /* an off-grid pattern lists the points at its nwant smallest distances */
	size_t nb_cap;   /* room for the lists: counts + indices, sized for this grid */
	/* key -> grid index, or -(1 + where the pattern's neighbour list starts in nb) */
	int32_t map[KEY_SPAN];
	uint16_t key[MAX_POINTS];
	uint16_t *nb;   /* each list: its length, then grid indices by distance, then index */
	bool ok;        /* the tables were built (false: the encoders fail) */
} iq2_grid;

/* List sizes: one count per pattern of the 3^8 off each grid, plus the neighbours (fixed
 * by the grids; list_neighbours checks).  With the maps, about 1.2 MB of zeroed data, only
 * touched for the types used. */
static uint16_t g_nb_xxs[119462], g_nb_xs[187770], g_nb_s[50253];

static iq2_grid g_xxs = { .magnitudes = tfs_grid_iq2xxs, .npoints = 256, .nwant = 2,
			  .nb_cap = sizeof(g_nb_xxs) / 2, .nb = g_nb_xxs };
static iq2_grid g_xs = { .magnitudes = tfs_grid_iq2xs, .npoints = 512, .nwant = 2,
			 .nb_cap = sizeof(g_nb_xs) / 2, .nb = g_nb_xs };
static iq2_grid g_s = { .magnitudes = tfs_grid_iq2s, .npoints = 1024, .nwant = 1,
			.nb_cap = sizeof(g_nb_s) / 2, .nb = g_nb_s };

/* A key the search can form: no field holds 3. */
static bool key_is_pattern(unsigned key)
{
	for (int i = 0; i < 8; i++)
		if (((key >> 2 * i) & 3) == 3)
			return false;
	return true;
}

/* dequant.c stores the magnitudes 1, 3, 5 of a step as bytes 0x08, 0x19, 0x2b. */
static int level_of_magnitude(uint8_t m)
{
	return m < 0x19 ? 0 : m == 0x19 ? 1 : 2;
}

/* The neighbour list of off-grid pattern `key` at nb[at]; returns its size (count and
 * indices).  ggml sorts the points by (distance, index) and keeps all at the nwant smallest
 * distances; a count of points per distance gives the same order without sorting. */
static size_t list_neighbours(iq2_grid *g, unsigned key, size_t at)
{
	uint8_t dist[MAX_POINTS];
	int count[129] = { 0 };   /* distances: 8 x (5 - 1)^2 at most */
	size_t n = at + 1;

	for (int p = 0; p < g->npoints; p++) {
		int d2 = 0;

		for (int i = 0; i < 8; i++) {
			/* in ggml's units, the odd multiples 2 l + 1 */
			int diff = 2 * ((int)((g->key[p] >> 2 * i) & 3) - (int)((key >> 2 * i) & 3));

			d2 += diff * diff;
		}
		dist[p] = (uint8_t)d2;
		count[d2]++;
	}
	for (int d2 = 0, have = 0; d2 <= 128 && have < g->nwant; d2++) {
		if (!count[d2])
			continue;
		have++;
		if (n + (size_t)count[d2] > g->nb_cap) {
			g->ok = false;   /* the lists outgrew their array: fix its size above */
			return 0;
		}
		for (int p = 0; p < g->npoints; p++)
			if (dist[p] == d2)
				g->nb[n++] = (uint16_t)p;
	}
	g->nb[at] = (uint16_t)(n - at - 1);
	return n - at;
}

static void build_grid(iq2_grid *g)
{
	size_t at = 0;

	g->ok = true;   /* until a list does not fit */
	for (unsigned k = 0; k < KEY_SPAN; k++)
		g->map[k] = -1;
	for (int p = 0; p < g->npoints; p++) {
		unsigned key = 0;

		for (int i = 0; i < 8; i++) {
			int l = level_of_magnitude((uint8_t)(g->magnitudes[p] >> 8 * i));

			key |= (unsigned)l << 2 * i;
		}
		g->key[p] = (uint16_t)key;
		g->map[key] = p;
	}
	/* patterns holding a 3 are never looked up: levels are clamped to 0..2 */
	for (unsigned k = 0; k < KEY_SPAN; k++)
		if (g->map[k] < 0 && key_is_pattern(k)) {
			g->map[k] = -(int32_t)at - 1;
			at += g->ok && at < g->nb_cap ? list_neighbours(g, k, at) : 0;
		}
}

static pthread_once_t g_xxs_once = PTHREAD_ONCE_INIT, g_xs_once = PTHREAD_ONCE_INIT,
		      g_s_once = PTHREAD_ONCE_INIT;

static void build_xxs(void) { build_grid(&g_xxs); }
static void build_xs(void) { build_grid(&g_xs); }
static void build_s(void) { build_grid(&g_s); }

/* ==== the search ==== */

/* (XXS and XS take quant_impl.h's GROUP_EPS: a sub-block below it is all zero) */
#define GROUP_EPS_S 1e-8f     /* S's threshold */

static inline int clamp_level(int l)
{
	return l < 0 ? 0 : l > 2 ? 2 : l;
}

/* Splits 8 values into magnitudes and sign bits (bit i: value i negative).  With
 * even_signs, an odd count of minus signs is made even at the least important value. */
static uint8_t split_signs(const float *x, const float *w, float *mag, bool even_signs)
{
	unsigned s = 0;
	int nneg = 0;

	for (int i = 0; i < 8; i++) {
		if (x[i] >= 0) {
			mag[i] = x[i];
		} else {
			mag[i] = -x[i];
			s |= 1u << i;
			nneg++;
		}
	}
	if (!even_signs)
		return (uint8_t)s;
	if (nneg % 2) {
		int imin = 0;
		float min = w[0] * x[0] * x[0];

		for (int i = 1; i < 8; i++) {
			float a = w[i] * x[i] * x[i];

			if (a < min) {
				min = a;
				imin = i;
			}
		}
		mag[imin] = -mag[imin];
		s ^= 1u << imin;
	}
	return (uint8_t)(s & 127);
}

/* Levels 0..2 of 8 magnitudes at inverse step id into L; returns their key. */
static unsigned round_group(const float *mag, float id, int8_t *L)
{
	unsigned key = 0;

	for (int i = 0; i < 8; i++) {
		int l = clamp_level(nearest_int(0.5f * (id * mag[i] - 1)));

		L[i] = (int8_t)l;
		key |= (unsigned)l << 2 * i;
	}
	return key;
}

static void levels_of_point(const iq2_grid *g, int p, int8_t *L)
{
	for (int i = 0; i < 8; i++)
		L[i] = (int8_t)((g->key[p] >> 2 * i) & 3);
}

/* The listed neighbour of off-grid pattern `key` nearest the magnitudes at step `scale`
 * (weights sw; the first of equals), its levels into L; -1 when no distance compares below
 * FLT_MAX (a NaN or infinity: ggml asserts).  ggml sums sw[i] * diff * diff over the 8
 * values of each point; a value's term takes one of 3 values (one per level), computed
 * here once, and each point's distance adds its 8 terms in ggml's order: the same floats. */
static int best_neighbour(const iq2_grid *g, unsigned key, const float *mag, const float *sw,
			  float scale, int8_t *L)
{
	const uint16_t *list = g->nb + (-g->map[key] - 1);
	float term[8][4], best_d2 = FLT_MAX;
	int best = -1;

	for (int i = 0; i < 8; i++)
		for (int l = 0; l < 3; l++) {
			float diff = scale * (float)(2 * l + 1) - mag[i];

			term[i][l] = sw[i] * diff * diff;
		}
	for (int j = 1; j <= list[0]; j++) {
		const unsigned pkey = g->key[list[j]];
		float d2 = 0;

#pragma GCC unroll 8   /* constant shifts: the loop is most of the quantizer's time */
		for (int i = 0; i < 8; i++)
			d2 += term[i][(pkey >> 2 * i) & 3];
		if (d2 < best_d2) {
			best_d2 = d2;
			best = list[j];
		}
	}
	if (best >= 0)
		levels_of_point(g, best, L);
	return best;
}

/* The grid point a group's levels 0..2 spell (from the search, always one); -1 if not. */
static int point_of_levels(const iq2_grid *g, const int8_t *L)
{
	unsigned key = 0;

	for (int i = 0; i < 8; i++) {
		if (L[i] < 0 || L[i] > 2)
			return -1;
		key |= (unsigned)L[i] << 2 * i;
	}
	return g->map[key] >= 0 ? g->map[key] : -1;
}

/* sum w x q and sum w q^2 over n values, q = 2 L + 1. */
static void fit_sums(int n, const float *w, const float *mag, const int8_t *L, float *sumqx,
		     float *sumq2)
{
	float sx = 0, s2 = 0;

	for (int i = 0; i < n; i++) {
		float q = (float)(2 * L[i] + 1);

		sx += w[i] * mag[i] * q;
		s2 += w[i] * q * q;
	}
	*sumqx = sx;
	*sumq2 = s2;
}

static void put_le16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/* The step nibble of a sub-block: nearest (scale / d - 1) / 2 in 0..15. */
static unsigned scale_nibble(float scale, float id)
{
	int l = nearest_int(0.5f * (id * scale - 1));

	return (unsigned)(l < 0 ? 0 : l > 15 ? 15 : l);
}

/* What a sub-block's fit gives: its step, and its groups' grid points and signs. */
typedef struct {
	float scale;
	int point[4];
	uint8_t signs[4];
} sub_fit;

enum { FIT_ZERO = 1 };   /* an all-zero sub-block: step 0, nothing written */

/* What every sub-block fit starts from: the square roots of its n weights (for the
 * neighbour search), its groups' magnitudes and signs (split_signs), and its largest
 * magnitude as ggml finds it. */
static float split_sub_block(const float *xb, const float *w, int n, bool even_signs,
			     float *sw, float *mag, sub_fit *f)
{
	float max;

	for (int i = 0; i < n; i++)
		sw[i] = sqrtf(w[i]);
	for (int k = 0; k < n / 8; k++)
		f->signs[k] = split_signs(xb + 8 * k, w + 8 * k, mag + 8 * k, even_signs);
	max = mag[0];
	for (int i = 1; i < n; i++)
		max = ggml_max(max, mag[i]);
	return max;
}

/* ggml's step search over the steps (5 + is/10)/m, is in [-range, range]: each group is
 * rounded onto the grid at the step (a neighbour where its point is off it), and the fit of
 * the best step is kept: its levels in L, which groups were on the grid in on_grid, and its
 * step in *scale (left as it was when none fits).  -1 where ggml aborts. */
static int scan_steps(const iq2_grid *g, int n, int range, float m, const float *mag,
		      const float *sw, const float *w, int8_t *L, bool *on_grid, float *scale)
{
	int8_t Laux[32];
	bool aux_on_grid[4];
	float best = 0;

	for (int is = -range; is <= range; is++) {
		float id = (5 + (float)is * 0.1f) / m, this_scale = 1 / id;
		float sumqx, sumq2;

		for (int k = 0; k < n / 8; k++) {
			unsigned key = round_group(mag + 8 * k, id, Laux + 8 * k);

			aux_on_grid[k] = g->map[key] >= 0;
			if (!aux_on_grid[k] && best_neighbour(g, key, mag + 8 * k, sw + 8 * k,
							      this_scale, Laux + 8 * k) < 0)
				return -1;
		}
		fit_sums(n, w, mag, Laux, &sumqx, &sumq2);
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			*scale = sumqx / sumq2;
			best = *scale * sumqx;
			memcpy(L, Laux, (size_t)n);
			memcpy(on_grid, aux_on_grid, (size_t)(n / 8) * sizeof(bool));
		}
	}
	return 0;
}

/* ==== IQ2_XXS ==== */

/* Fits 32 values xb with weights w; 0, FIT_ZERO, or -1 where ggml aborts. */
static int fit_xxs32(const float *xb, const float *w, sub_fit *f)
{
	const iq2_grid *g = &g_xxs;
	float sw[32], mag[32], max = split_sub_block(xb, w, 32, true, sw, mag, f);
	int8_t L[32];
	bool on_grid[4];

	if (max < GROUP_EPS)
		return FIT_ZERO;
	float scale = tfs_fit_nonnegative(32, 4, mag, (uint8_t *)L, w), eff_max = scale * 3;

	if (eff_max <= 0)
		return FIT_ZERO;
	if (scan_steps(g, 32, 6, eff_max, mag, sw, w, L, on_grid, &scale) < 0)
		return -1;
	if (scale > 0) {   /* every group again at the fitted step, then the step refitted */
		float id = 1 / scale, sumqx, sumq2;

		for (int k = 0; k < 4; k++) {
			int8_t lv[8];
			unsigned key = round_group(mag + 8 * k, id, lv);
			int p = g->map[key];

			if (p < 0 && (p = best_neighbour(g, key, mag + 8 * k, sw + 8 * k, scale,
							 L + 8 * k)) < 0)
				return -1;
			levels_of_point(g, p, L + 8 * k);
		}
		fit_sums(32, w, mag, L, &sumqx, &sumq2);
		if (sumq2 > 0)
			scale = sumqx / sumq2;
	}
	if (scale < 0) {   /* ggml's guard: a negative step is a positive one with signs flipped */
		scale = -scale;
		for (int k = 0; k < 4; k++)
			f->signs[k] = (uint8_t)(~f->signs[k] & 127);
	}
	/* a NaN step: ggml finds the levels off the grid or asserts on the step */
	if (!(scale >= 0))
		return -1;
	for (int k = 0; k < 4; k++)
		if ((f->point[k] = point_of_levels(g, L + 8 * k)) < 0)
			return -1;
	f->scale = scale;
	return 0;
}

int tfs_enc_iq2_xxs(const float *x, const float *qw, uint8_t *b)
{
	float scales[8], max_scale = 0, w[32];
	uint32_t q2[16] = { 0 };

	pthread_once(&g_xxs_once, build_xxs);
	if (!g_xxs.ok)
		return -1;
	const float sigma2 = sum_squares_256(x) / 256;

	for (int ib = 0; ib < 8; ib++) {
		const float *xb = x + 32 * ib;
		sub_fit f;

		for (int i = 0; i < 32; i++)
			w[i] = qw[32 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
		int rc = fit_xxs32(xb, w, &f);

		scales[ib] = 0;
		if (rc < 0)
			return -1;
		if (rc == FIT_ZERO)
			continue;
		for (int k = 0; k < 4; k++) {
			q2[2 * ib] |= (uint32_t)f.point[k] << 8 * k;
			q2[2 * ib + 1] |= (uint32_t)f.signs[k] << 7 * k;
		}
		scales[ib] = f.scale;
		max_scale = ggml_max(max_scale, f.scale);
	}
	memset(b, 0, 66);
	if (max_scale == 0)
		return 0;
	const float d = max_scale / 31, id = 1 / d;

	put_le16(b, tfs_f32_to_f16(d));
	for (int ib = 0; ib < 8; ib++)
		q2[2 * ib + 1] |= (uint32_t)scale_nibble(scales[ib], id) << 28;
	for (int j = 0; j < 16; j++)
		put_le32(b + 2 + 4 * j, q2[j]);
	return 0;
}

/* ==== IQ2_XS and IQ2_S: sub-blocks of 16 ==== */

/* Fits 16 values xb with weights w on grid g (XS: even_signs, 7 bits a group; S: 8);
 * 0, FIT_ZERO below eps, or -1 where ggml aborts. */
static int fit16(const iq2_grid *g, const float *xb, const float *w, bool even_signs,
		 float eps, sub_fit *f)
{
	float sw[16], mag[16], max = split_sub_block(xb, w, 16, even_signs, sw, mag, f);
	int8_t L[16] = { 0 };
	bool on_grid[2] = { true, true };

	if (max < eps)
		return FIT_ZERO;
	float scale = max / 5;

	if (scan_steps(g, 16, 9, max, mag, sw, w, L, on_grid, &scale) < 0)
		return -1;
	/* only the groups that needed a neighbour are redone at the fitted step */
	if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
		float id = 1 / scale, sumqx, sumq2;

		for (int k = 0; k < 2; k++) {
			if (on_grid[k])
				continue;
			unsigned key = round_group(mag + 8 * k, id, L + 8 * k);

			if (g->map[key] < 0 && best_neighbour(g, key, mag + 8 * k, sw + 8 * k, scale,
							      L + 8 * k) < 0)
				return -1;
		}
		fit_sums(16, w, mag, L, &sumqx, &sumq2);
		if (sumq2 > 0)
			scale = sumqx / sumq2;
	}
	if (scale < 0) {
		scale = -scale;
		for (int k = 0; k < 2; k++)
			f->signs[k] = (uint8_t)(even_signs ? ~f->signs[k] & 127 : ~f->signs[k]);
	}
	for (int k = 0; k < 2; k++)
		if ((f->point[k] = point_of_levels(g, L + 8 * k)) < 0)
			return -1;
	if (!(scale >= 0))
		return -1;
	f->scale = scale;
	return 0;
}

/* Both types' 8 scale bytes: sub-block 2j in the low nibble of byte j, 2j + 1 high. */
static void put_scales16(uint8_t *sc, const float *scales, float id)
{
	for (int j = 0; j < 8; j++)
		sc[j] = (uint8_t)(scale_nibble(scales[2 * j], id) |
				  scale_nibble(scales[2 * j + 1], id) << 4);
}

int tfs_enc_iq2_xs(const float *x, const float *qw, uint8_t *b)
{
	float scales[16], max_scale = 0, w[16];

	pthread_once(&g_xs_once, build_xs);
	if (!g_xs.ok)
		return -1;
	const float sigma2 = sum_squares_256(x) / 256;

	memset(b, 0, 74);
	for (int ib = 0; ib < 16; ib++) {
		const float *xb = x + 16 * ib;
		sub_fit f;

		for (int i = 0; i < 16; i++)
			w[i] = qw[16 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
		int rc = fit16(&g_xs, xb, w, true, GROUP_EPS, &f);

		scales[ib] = 0;
		if (rc < 0)
			return -1;
		if (rc == FIT_ZERO)
			continue;
		for (int k = 0; k < 2; k++)
			put_le16(b + 2 + 2 * (2 * ib + k), (unsigned)f.point[k] | f.signs[k] << 9);
		scales[ib] = f.scale;
		max_scale = ggml_max(max_scale, f.scale);
	}
	if (max_scale == 0) {
		memset(b + 2, 0, 64);
		return 0;
	}
	const float d = max_scale / 31;

	put_le16(b, tfs_f32_to_f16(d));
	put_scales16(b + 66, scales, 1 / d);
	return 0;
}

/* IQ2_S keeps what its sub-blocks wrote even when every step is 0 (d then 0), as ggml. */
int tfs_enc_iq2_s(const float *x, const float *qw, uint8_t *b)
{
	float scales[16], max_scale = 0, w[16];
	uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66;

	pthread_once(&g_s_once, build_s);
	if (!g_s.ok)
		return -1;
	const float sigma2 = 2 * sum_squares_256(x) / 256;

	memset(b, 0, 82);
	for (int ib = 0; ib < 16; ib++) {
		const float *xb = x + 16 * ib;
		sub_fit f;

		for (int i = 0; i < 16; i++)
			w[i] = qw ? qw[16 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i])
				  : 0.25f * sigma2 + xb[i] * xb[i];
		int rc = fit16(&g_s, xb, w, false, GROUP_EPS_S, &f);

		scales[ib] = 0;
		if (rc < 0)
			return -1;
		if (rc == FIT_ZERO)
			continue;
		for (int k = 0; k < 2; k++) {
			const int g8 = 2 * ib + k;

			qs[g8] = (uint8_t)f.point[k];
			qh[g8 / 4] |= (uint8_t)((f.point[k] >> 8) << 2 * (g8 % 4));
			signs[g8] = f.signs[k];
		}
		scales[ib] = f.scale;
		max_scale = ggml_max(max_scale, f.scale);
	}
	if (max_scale == 0)
		return 0;
	const float d = max_scale / 31;

	put_le16(b, tfs_f32_to_f16(d * 0.9875f));
	put_scales16(b + 74, scales, 1 / d);
	return 0;
}
