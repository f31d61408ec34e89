/*
 * quant_iq1.c - IQ1_S and IQ1_M: 256 floats to ggml's 1.5 / 1.75 bit blocks, bit-exact with
 * ggml's quantize_row_iq1_s_impl / quantize_row_iq1_m_impl.
 *
 * Both types code each group of 8 values as a point of one grid: 2048 of the 3^8 vectors of
 * levels -1, 0, +1 (tfs_grid_iq1s, an 11-bit index), shifted by +-DELTA (1/8) and scaled.
 *
 * IQ1_S, 50 bytes per 256 values (8 sub-blocks of 32):
 *   1. d: half, the super-block scale
 *   2. qs[32]: the low 8 bits of each group's grid index
 *   3. qh[8]: a u16 per sub-block: bits 3k..3k+2 the high index bits of its group k,
 *      bits 12..14 its scale s, bit 15 set when its shift is -DELTA
 *   value = d * (2 s + 1) * (level +- DELTA)
 * IQ1_M, 56 bytes per 256 values (16 sub-blocks of 16, a shift per group of 8):
 *   1. qs[32]: as IQ1_S
 *   2. qh[16]: a nibble per group (low nibble first): 3 high index bits, bit 3 the shift's sign
 *   3. sc[4]: u16s holding the 3-bit scale s of sub-block i at bits 3 (i % 4) of sc[i / 4];
 *      their top nibbles, sc[0] lowest, are the bits of the half d
 *
 * The search, per sub-block (what makes the result ggml's is repeating it operation for
 * operation, in float, in the same order; -ffp-contract=off keeps a * b + c rounding twice):
 *   - weights w = qw * sqrt(sigma2 + x^2), sigma2 twice the mean square of the super-block
 *     (IQ1_M without an imatrix: w = x^2);
 *   - with the levels' values fixed (-1 + delta, delta, 1 + delta for a shift delta), the
 *     best assignment is monotone in x, so sorting the values and trying every split i1 <= i2
 *     of the sorted list into levels -1 | 0 | +1, for each choice of shift(s), finds the
 *     exact weighted least-squares optimum: the one maximising sumqx^2 / sumq2;
 *   - a group whose 8 levels are not a grid point takes, of the grid points at the three
 *     smallest distances from it (precomputed), the one of least weighted error at that
 *     scale; the scale is then refitted to the chosen points;
 *   - d = the largest scale / 15 and each scale is rounded to an odd multiple of d.  ggml
 *     multiplies the stored d by 1.125 (IQ1_S) or refits d over the whole super-block and
 *     multiplies it by 1.1125 (IQ1_M): fudge factors, kept because the bytes must match.
 *
 * ggml sorts with qsort; glibc's is a merge sort for arrays this small, so equal values keep
 * their order, as in the insertion sort here.  Where ggml stops with a failed assertion (a
 * NaN scale: values whose squares overflow) or would read past the group (no neighbour at a
 * finite error) the encoders return -1.  A NaN among the values is no such case: every split
 * of its sub-block (of the super-block, once it reaches sigma2) scores NaN and none is taken,
 * so ggml writes it as skipped (scale 0), and so do these encoders.
 */
#include "dequant.h"
#include "quant_impl.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#define GRID_POINTS 2048
#define DELTA 0.125f
/* A group's 8 levels 0..2 (level + 1), two bits each, element 0 lowest: at most 0xaaaa. */
#define PACKED_LIMIT 0xaaab
/* 3^8 - 2048 packed points off the grid, each with a count and its nearest grid points:
 * build_tables fills exactly this many entries. */
#define NEIGHBOUR_SLOTS (4513 + 327721)

/* The level values with a positive and with a negative shift, levels -1, 0, +1. */
static const float k_plus[3] = { -1 + DELTA, DELTA, 1 + DELTA };
static const float k_minus[3] = { -1 - DELTA, -DELTA, 1 - DELTA };

/* ==== the tables: grid levels, packed point -> grid index, neighbour lists ==== */

static struct {
	uint8_t level[GRID_POINTS][8];   /* 0..2 */
	/* grid index, or -1 - (offset of the point's list in neighbours) */
	int32_t map[PACKED_LIMIT];
	/* per off-grid point: n, then n grid indices by distance, then index */
	uint16_t neighbours[NEIGHBOUR_SLOTS];
} g_iq1;

static pthread_once_t g_iq1_once = PTHREAD_ONCE_INIT;
static bool g_iq1_ok;   /* false: the tables could not be built (the encoders then fail) */

static int squared_distance4(int a, int b)   /* two vectors of 4 levels, as base-3 numbers */
{
	int d = 0;

	for (int i = 0; i < 4; i++, a /= 3, b /= 3)
		d += (a % 3 - b % 3) * (a % 3 - b % 3);
	return d;
}

/*
 * ggml ranks grid points by squared distance (in its units 2 level + 1: four times ours,
 * which orders them alike), then by index, and keeps every point at the three smallest
 * distances.  Only points of levels 0..2 ever need a list (ggml makes them for level 3 too).
 * A distance is the sum of those of the two halves of 4 levels, looked up.
 */
static void build_tables(void)
{
	static uint8_t half_dist[81][81];
	static uint8_t dist[GRID_POINTS];
	static uint8_t lo[GRID_POINTS], hi[GRID_POINTS];
	uint32_t used = 0;

	for (int a = 0; a < 81; a++)
		for (int b = 0; b < 81; b++)
			half_dist[a][b] = (uint8_t)squared_distance4(a, b);
	for (int i = 0; i < PACKED_LIMIT; i++)
		g_iq1.map[i] = INT32_MIN;
	for (int g = 0; g < GRID_POINTS; g++) {
		uint32_t packed = 0, b3[2] = { 0, 0 };

		for (int i = 7; i >= 0; i--) {
			const int l = (int8_t)(uint8_t)(tfs_grid_iq1s[g] >> (8 * i)) + 1;

			g_iq1.level[g][i] = (uint8_t)l;
			packed |= (uint32_t)l << (2 * i);
			b3[i / 4] = 3 * b3[i / 4] + (uint32_t)l;
		}
		g_iq1.map[packed] = g;
		lo[g] = (uint8_t)b3[0];
		hi[g] = (uint8_t)b3[1];
	}
	for (int p = 0; p < 6561; p++) {
		uint32_t packed = 0;
		int plo = p % 81, phi = p / 81, count[33] = { 0 }, nearest[3], found = 0;

		for (int i = 0, q = p; i < 8; i++, q /= 3)
			packed |= (uint32_t)(q % 3) << (2 * i);
		if (g_iq1.map[packed] >= 0)
			continue;
		for (int g = 0; g < GRID_POINTS; g++) {
			dist[g] = (uint8_t)(half_dist[plo][lo[g]] + half_dist[phi][hi[g]]);
			count[dist[g]]++;
		}
		for (int d = 0; d < 33 && found < 3; d++)
			if (count[d])
				nearest[found++] = d;
		const int n = count[nearest[0]] + count[nearest[1]] + count[nearest[2]];

		if (used + 1 + (uint32_t)n > NEIGHBOUR_SLOTS)
			return;   /* the grid is a constant: cannot happen (g_iq1_ok stays false) */
		g_iq1.map[packed] = -1 - (int32_t)used;
		g_iq1.neighbours[used++] = (uint16_t)n;
		for (int k = 0; k < 3; k++)
			for (int g = 0; g < GRID_POINTS; g++)
				if (dist[g] == nearest[k])
					g_iq1.neighbours[used++] = (uint16_t)g;
	}
	g_iq1_ok = used == NEIGHBOUR_SLOTS;
}

/* ==== shared steps ==== */

/* Four floats / ints, one per candidate second split point of a search (GCC's vector
 * extension: SSE on x86-64, NEON on arm64; each lane rounds as the scalar operation does). */
typedef float lanes4 __attribute__((vector_size(16)));
typedef int32_t mask4 __attribute__((vector_size(16)));

static const mask4 k_lane = { 0, 1, 2, 3 };

/* Bit l set: lane l of m is set. */
static inline unsigned lane_bits(mask4 m)
{
#if defined(__SSE2__)
	return (unsigned)_mm_movemask_ps((__m128)m);
#else
	return (m[0] & 1u) | (m[1] & 2u) | (m[2] & 4u) | (m[3] & 8u);
#endif
}

static inline lanes4 load4(const float *p)
{
	lanes4 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The positions of x[0..n) in ascending order of value; equal values keep their order. */
static void sort_positions(const float *x, int n, uint8_t *pos)
{
	float v[32];

	for (int i = 0; i < n; i++) {
		int j = i;

		for (; j > 0 && v[j - 1] > x[i]; j--) {
			v[j] = v[j - 1];
			pos[j] = pos[j - 1];
		}
		v[j] = x[i];
		pos[j] = (uint8_t)i;
	}
}

/* sigma2 of the weights: twice the mean square of the super-block. */
static float twice_mean_square(const float *x)
{
	return 2 * sum_squares_256(x) / 256;
}

/*
 * The grid point for a group of 8 values x (weights w) of levels L: L's own, or when L is off
 * the grid (*moved set), of the neighbours listed for L the one of least weighted squared
 * error at `scale`, levels valued as vals.  -1 when every such error is NaN or at least
 * FLT_MAX: ggml then scans the whole grid, reading values past the group (a bug in ggml), so
 * its answer cannot be reproduced; mostly it is an abort ("Oops, did not find grid point").
 */
static int nearest_on_grid(const uint8_t *L, const float *x, const float *w, float scale,
			   const float *vals, bool *moved)
{
	uint32_t packed = 0;

	for (int j = 0; j < 8; j++)
		packed |= (uint32_t)L[j] << (2 * j);
	const int32_t m = g_iq1.map[packed];

	if (m >= 0)
		return m;
	*moved = true;
	/* an element's error term depends only on its level: 24 terms cover every point */
	float err[8][3];

	for (int j = 0; j < 8; j++)
		for (int l = 0; l < 3; l++) {
			const float diff = scale * vals[l] - x[j];

			err[j][l] = w[j] * diff * diff;
		}
	const uint16_t *list = g_iq1.neighbours + (-1 - m);
	float best = FLT_MAX;
	int best_g = -1;

	for (int n = 1; n <= list[0]; n++) {
		const uint8_t *lv = g_iq1.level[list[n]];
		float d2 = 0;

		for (int j = 0; j < 8; j++)
			d2 += err[j][lv[j]];
		if (d2 < best) {
			best = d2;
			best_g = list[n];
		}
	}
	return best_g;
}

/* ==== IQ1_S and IQ1_M: the step after the split search ==== */

/*
 * Puts the ngroups groups of 8 levels L (of values xb, weights w) on the grid, group k
 * with level values vals[k], and, when a group had to move to a neighbour, refits the
 * scale to the points chosen (ggml's order: group by group, value by value).  index gets
 * the grid points; 1, or -1 where ggml fails (no neighbour, or a NaN scale).
 */
static int place_groups(const float *xb, const float *w, const uint8_t *L, int ngroups,
			const float *const *vals, float *scale, uint16_t *index)
{
	bool moved = false;

	for (int k = 0; k < ngroups; k++) {
		const int g = nearest_on_grid(L + 8 * k, xb + 8 * k, w + 8 * k, *scale, vals[k],
					      &moved);

		if (g < 0)
			return -1;
		index[k] = (uint16_t)g;
	}
	if (moved) {   /* the scale fitted to the levels chosen */
		float sumqx = 0, sumq2 = 0;

		for (int k = 0; k < ngroups; k++)
			for (int j = 0; j < 8; j++) {
				const float wj = w[8 * k + j], q = vals[k][g_iq1.level[index[k]][j]];

				sumqx += wj * q * xb[8 * k + j];
				sumq2 += wj * q * q;
			}
		if (sumqx > 0 && sumq2 > 0)
			*scale = sumqx / sumq2;
	}
	return *scale >= 0 ? 1 : -1;
}

/* ==== IQ1_S ==== */

/* One sub-block of 32 and its weights: the grid indices of its 4 groups, its scale and shift
 * (+1 / -1).  Returns 1 when it is coded (else scale 0), 0 when not, -1 where ggml fails. */
static int fit_iq1_s_block(const float *xb, const float *w, uint16_t index[4], float *scale_out,
			   int *shift_out)
{
	float max = fabsf(xb[0]);

	for (int i = 1; i < 32; i++)
		max = ggml_max(max, fabsf(xb[i]));
	if (max < 1e-12f)
		return 0;
	uint8_t pos[32], L[32];
	float sumx[33 + 3] = { 0 }, sumw[33 + 3] = { 0 };   /* + 3: whole lanes */

	sort_positions(xb, 32, pos);
	for (int j = 0; j < 32; j++) {
		sumx[j + 1] = sumx[j] + w[pos[j]] * xb[pos[j]];
		sumw[j + 1] = sumw[j] + w[pos[j]];
	}
	float best_score = -FLT_MAX, scale = max;
	int best1 = -1, best2 = -1, shift = 0;

	/* ggml's sums, (S[i1] - S[0]) v0 + (S[i2] - S[i1]) v1 + (S[32] - S[i2]) v2, for four
	 * i2 at a time, the terms of i1 alone hoisted.  ggml tries the candidates in order (i1,
	 * i2, shift +, -), each against the best so far; a run of candidates none of which beats
	 * it leaves it unchanged, so only runs where one does are replayed, in that order. */
	for (int i1 = 0; i1 <= 32; i1++) {
		const float x1 = sumx[i1] - sumx[0], w1 = sumw[i1] - sumw[0];
		const float px1 = x1 * k_plus[0], pw1 = w1 * k_plus[0] * k_plus[0];
		const float mx1 = x1 * k_minus[0], mw1 = w1 * k_minus[0] * k_minus[0];

		for (int i2 = i1; i2 <= 32; i2 += 4) {
			const lanes4 s_x = load4(&sumx[i2]), s_w = load4(&sumw[i2]);
			const lanes4 x2 = s_x - sumx[i1], w2 = s_w - sumw[i1];
			const lanes4 x3 = sumx[32] - s_x, w3 = sumw[32] - s_w;
			const lanes4 qx[2] = {
				px1 + x2 * k_plus[1] + x3 * k_plus[2],
				mx1 + x2 * k_minus[1] + x3 * k_minus[2],
			};
			const lanes4 q2[2] = {
				pw1 + w2 * k_plus[1] * k_plus[1] + w3 * k_plus[2] * k_plus[2],
				mw1 + w2 * k_minus[1] * k_minus[1] + w3 * k_minus[2] * k_minus[2],
			};
			const mask4 beats = (((q2[0] > 0) & (qx[0] * qx[0] > best_score * q2[0])) |
					     ((q2[1] > 0) & (qx[1] * qx[1] > best_score * q2[1]))) &
					    (i2 + k_lane <= 32);

			if (!lane_bits(beats))
				continue;
			for (int l = __builtin_ctz(lane_bits(beats)); l < 4 && i2 + l <= 32; l++)
				for (int m = 0; m < 2; m++) {
					const float cx = qx[m][l], c2 = q2[m][l];

					if (c2 > 0 && cx * cx > best_score * c2) {
						scale = cx / c2;
						best_score = scale * cx;
						best1 = i1, best2 = i2 + l, shift = m == 0 ? 1 : -1;
					}
				}
		}
	}
	if (best1 < 0)
		return 0;
	for (int j = 0; j < 32; j++)
		L[pos[j]] = j < best1 ? 0 : j < best2 ? 1 : 2;
	if (scale < 0) {   /* the mirror image: levels and shift negated */
		for (int j = 0; j < 32; j++)
			L[j] = (uint8_t)(2 - L[j]);
		scale = -scale;
		shift = -shift;
	}
	const float *vals = shift == 1 ? k_plus : k_minus;
	const float *const group_vals[4] = { vals, vals, vals, vals };

	if (place_groups(xb, w, L, 4, group_vals, &scale, index) < 0)
		return -1;
	*scale_out = scale;
	*shift_out = shift;
	return 1;
}

int tfs_enc_iq1_s(const float *x, const float *qw, uint8_t *b)
{
	float scales[8], max_scale = 0;
	int shifts[8];
	uint16_t qh[8] = { 0 };

	pthread_once(&g_iq1_once, build_tables);
	if (!g_iq1_ok)
		return -1;
	memset(b, 0, 50);
	if (!qw)
		return -1;   /* ggml requires an imatrix; callers never get here */
	const float sigma2 = twice_mean_square(x);

	for (int ib = 0; ib < 8; ib++) {
		const float *xb = x + 32 * ib;
		float w[32];
		uint16_t index[4];

		for (int i = 0; i < 32; i++)
			w[i] = qw[32 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
		const int rc = fit_iq1_s_block(xb, w, index, &scales[ib], &shifts[ib]);

		if (rc < 0)
			return -1;
		if (rc == 0) {
			scales[ib] = 0;
			shifts[ib] = 1;
			continue;
		}
		for (int k = 0; k < 4; k++) {
			b[2 + 4 * ib + k] = (uint8_t)index[k];
			qh[ib] = (uint16_t)(qh[ib] | (index[k] >> 8) << (3 * k));
		}
		max_scale = ggml_max(max_scale, scales[ib]);
	}
	if (max_scale != 0) {
		const float d = max_scale / 15, id = 1 / d;
		const uint16_t dh = tfs_f32_to_f16(d * 1.125f);

		memcpy(b, &dh, 2);
		for (int ib = 0; ib < 8; ib++) {
			int l = nearest_int(0.5f * (id * scales[ib] - 1));

			l = l < 0 ? 0 : l > 7 ? 7 : l;
			if (shifts[ib] == -1)
				l |= 8;
			qh[ib] = (uint16_t)(qh[ib] | l << 12);
		}
	}
	memcpy(b + 34, qh, sizeof(qh));
	return 0;
}

/* ==== IQ1_M ==== */

/*
 * The split search of one sub-block of 16 sorted as pos[], for the four choices of shift
 * (k: bit 1 set = the first group's is negative, bit 0 = the second's).  As ggml (since it
 * dropped summing each split from scratch), with prefix sums of w x and w kept per group,
 * the groups' shifts differing: the level values step by 1, so a group's sumqx for a split
 * is its total times v(+1) minus two prefix sums, and its sumq2 its total weight times
 * v(+1)^2 plus two prefix sums times constant differences of squares.
 *
 * ggml tries the splits in order (i1, then i2, then k), each against the best so far; here
 * four second split points are scored at once, and only runs of candidates where one beats
 * the best so far are replayed in ggml's order (as IQ1_S's search).
 */
static void search_iq1_m_splits(const float *xb, const float *w, const uint8_t *pos,
				float *scale_out, int *best1_out, int *best2_out, int *best_k_out)
{
	float sx[2][17 + 3] = { { 0 } }, sw[2][17 + 3] = { { 0 } };   /* + 3: whole lanes */

	for (int j = 0; j < 16; j++) {
		const int i = pos[j], h = i < 8 ? 0 : 1;

		sx[h][j + 1] = sx[h][j] + w[i] * xb[i];
		sx[1 - h][j + 1] = sx[1 - h][j];
		sw[h][j + 1] = sw[h][j] + w[i];
		sw[1 - h][j + 1] = sw[1 - h][j];
	}
	/* per group h: totals times v(+1) for each shift, and the difference-of-squares factors */
	const float dp1 = k_plus[0] * k_plus[0] - k_plus[1] * k_plus[1];
	const float dp2 = k_plus[1] * k_plus[1] - k_plus[2] * k_plus[2];
	const float dm1 = k_minus[0] * k_minus[0] - k_minus[1] * k_minus[1];
	const float dm2 = k_minus[1] * k_minus[1] - k_minus[2] * k_minus[2];
	float tx_p[2], tx_m[2], tw_p[2], tw_m[2];

	for (int h = 0; h < 2; h++) {
		tx_p[h] = sx[h][16] * k_plus[2];
		tx_m[h] = sx[h][16] * k_minus[2];
		tw_p[h] = sw[h][16] * k_plus[2] * k_plus[2];
		tw_m[h] = sw[h][16] * k_minus[2] * k_minus[2];
	}
	float best_score = -FLT_MAX, scale = *scale_out;
	int best1 = -1, best2 = -1, best_k = -1;

	for (int i1 = 0; i1 <= 16; i1++) {
		float a_p[2], a_m[2];   /* the part of sumq2 that depends on i1 alone */

		for (int h = 0; h < 2; h++) {
			a_p[h] = tw_p[h] + sw[h][i1] * dp1;
			a_m[h] = tw_m[h] + sw[h][i1] * dm1;
		}
		for (int i2 = i1; i2 <= 16; i2 += 4) {
			lanes4 qx_p[2], qx_m[2], q2_p[2], q2_m[2];

			for (int h = 0; h < 2; h++) {
				const lanes4 cut = sx[h][i1] + load4(&sx[h][i2]);
				const lanes4 s2 = load4(&sw[h][i2]);

				qx_p[h] = tx_p[h] - cut;
				qx_m[h] = tx_m[h] - cut;
				q2_p[h] = a_p[h] + s2 * dp2;
				q2_m[h] = a_m[h] + s2 * dm2;
			}
			const lanes4 qx[4] = { qx_p[0] + qx_p[1], qx_p[0] + qx_m[1],
					       qx_m[0] + qx_p[1], qx_m[0] + qx_m[1] };
			const lanes4 q2[4] = { q2_p[0] + q2_p[1], q2_p[0] + q2_m[1],
					       q2_m[0] + q2_p[1], q2_m[0] + q2_m[1] };
			mask4 beats = { 0 };

			for (int k = 0; k < 4; k++)
				beats |= (q2[k] > 0) & (qx[k] * qx[k] > best_score * q2[k]);
			beats &= i2 + k_lane <= 16;
			if (!lane_bits(beats))
				continue;
			for (int l = __builtin_ctz(lane_bits(beats)); l < 4 && i2 + l <= 16; l++)
				for (int k = 0; k < 4; k++) {
					const float cx = qx[k][l], c2 = q2[k][l];

					if (c2 > 0 && cx * cx > best_score * c2) {
						scale = cx / c2;
						best_score = scale * cx;
						best1 = i1, best2 = i2 + l, best_k = k;
					}
				}
		}
	}
	*scale_out = scale;
	*best1_out = best1;
	*best2_out = best2;
	*best_k_out = best_k;
}

/* The level values of group k (0, 1) of a sub-block with shift choice s. */
static inline const float *iq1_m_vals(int s, int k)
{
	return (k == 0 ? s < 2 : s % 2 == 0) ? k_plus : k_minus;
}

/* As fit_iq1_s_block, for a sub-block of 16: 2 groups, shift choice 0..3 in *shift_out. */
static int fit_iq1_m_block(const float *xb, const float *w, uint16_t index[2], float *scale_out,
			   int *shift_out)
{
	float max = fabsf(xb[0]);

	for (int i = 1; i < 16; i++)
		max = ggml_max(max, fabsf(xb[i]));
	if (max < 1e-7f)
		return 0;
	uint8_t pos[16], L[16];
	float scale = max;
	int best1, best2, best_k;

	sort_positions(xb, 16, pos);
	search_iq1_m_splits(xb, w, pos, &scale, &best1, &best2, &best_k);
	if (best1 < 0)
		return 0;
	for (int j = 0; j < 16; j++)
		L[pos[j]] = j < best1 ? 0 : j < best2 ? 1 : 2;
	if (scale < 0) {
		for (int j = 0; j < 16; j++)
			L[j] = (uint8_t)(2 - L[j]);
		scale = -scale;
		best_k = 3 - best_k;   /* both shifts negated */
	}
	const float *const group_vals[2] = { iq1_m_vals(best_k, 0), iq1_m_vals(best_k, 1) };

	if (place_groups(xb, w, L, 2, group_vals, &scale, index) < 0)
		return -1;
	*scale_out = scale;
	*shift_out = best_k;
	return 1;
}

int tfs_enc_iq1_m(const float *x, const float *qw, uint8_t *b)
{
	static const uint8_t k_sign_bits[4] = { 0x00, 0x80, 0x08, 0x88 };
	float w[256], scales[16], max_scale = 0;
	int shifts[16];
	uint8_t *qs = b, *qh = b + 32;
	uint16_t sc[4] = { 0 };

	pthread_once(&g_iq1_once, build_tables);
	if (!g_iq1_ok)
		return -1;
	memset(b, 0, 56);
	const float sigma2 = twice_mean_square(x);

	for (int i = 0; i < 256; i++)
		w[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i]) : x[i] * x[i];
	for (int ib = 0; ib < 16; ib++) {
		uint16_t index[2];
		const int rc = fit_iq1_m_block(x + 16 * ib, w + 16 * ib, index, &scales[ib],
					       &shifts[ib]);

		if (rc < 0)
			return -1;
		if (rc == 0) {
			scales[ib] = 0;
			shifts[ib] = 0;
			continue;
		}
		qs[2 * ib] = (uint8_t)index[0];
		qs[2 * ib + 1] = (uint8_t)index[1];
		qh[ib] = (uint8_t)((index[0] >> 8) | (index[1] >> 8) << 4);
		max_scale = ggml_max(max_scale, scales[ib]);
	}
	if (max_scale == 0)
		return 0;
	float d = max_scale / 15, sumqx = 0, sumq2 = 0;
	const float id = 1 / d;

	/* d refitted to every value as coded, the skipped sub-blocks' (grid point 0) too */
	for (int ib = 0; ib < 16; ib++) {
		int l = nearest_int(0.5f * (id * scales[ib] - 1));

		l = l < 0 ? 0 : l > 7 ? 7 : l;
		sc[ib / 4] = (uint16_t)(sc[ib / 4] | l << (3 * (ib % 4)));
		qh[ib] |= k_sign_bits[shifts[ib]];
		for (int k = 0; k < 2; k++) {
			const float *vals = iq1_m_vals(shifts[ib], k);
			const int g = qs[2 * ib + k] | (qh[ib] >> (4 * k) & 7) << 8;
			const uint8_t *lv = g_iq1.level[g];

			for (int j = 0; j < 8; j++) {
				const float wj = w[16 * ib + 8 * k + j];
				const float q = vals[lv[j]] * (float)(2 * l + 1);

				sumqx += wj * q * x[16 * ib + 8 * k + j];
				sumq2 += wj * q * q;
			}
		}
	}
	if (sumq2 > 0)
		d = sumqx / sumq2;
	const uint16_t dh = tfs_f32_to_f16(d * 1.1125f);

	sc[0] = (uint16_t)(sc[0] | (dh & 0x000f) << 12);
	sc[1] = (uint16_t)(sc[1] | (dh & 0x00f0) << 8);
	sc[2] = (uint16_t)(sc[2] | (dh & 0x0f00) << 4);
	sc[3] = (uint16_t)(sc[3] | (dh & 0xf000));
	memcpy(b + 48, sc, sizeof(sc));
	return 0;
}
