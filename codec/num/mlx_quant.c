/*
 * mlx_quant.c - MLX quantization (mx.quantize) of Ollama per-tensor weights: the f32/ and
 * npy/ views of an MLX-quantized weight written back on a rw mount.
 *
 * One group of values becomes its codes (in the packed U32 weight) and its scale (and, for
 * affine, its bias) exactly as MLX's quantizer computes them (OLLAMA_FORMATS.md; MLX
 * ops.cpp affine_quantize / fp_quantize and their CPU kernels), float32 throughout:
 *
 *  1. affine (bits 2..8): w_max, w_min of the group; scale = max((max - min) / (2^bits - 1),
 *     1e-7), negated unless |min| > |max|; edge = min or max (the larger magnitude);
 *     q0 = rint(edge / scale); when q0 != 0: scale = edge / q0, bias = edge, else bias = 0;
 *     q = clamp(rint((w - bias) / scale), 0, 2^bits - 1).  Scale and bias are then rounded
 *     (nearest-even) to the companions' dtype (BF16, F16 or F32), as MLX casts them to the
 *     input's dtype after the codes are made.
 *  2. mxfp4 / mxfp8 (group 32): e = rint(log2(amax / maxval)) (0 when amax / maxval is 0),
 *     maxval 6 or 448; scale byte e + 127; each w / 2^e becomes the nearest FP4 value (the
 *     first of equally near ones in FP4_LUT order: +0, .5, ... 6, -0, -.5, ... -6) or the
 *     E4M3 byte of MLX's encoder (PyTorch's, saturating at 448, 0x7E).
 *  3. nvfp4 (group 16): scale byte = E4M3(amax / 6); w / E4M3(scale) to FP4 as above (all
 *     codes 0 when the scale is 0).  With a `.global_scale` g (Ollama's convention,
 *     w = FP4 * E4M3(s) * g) the values w / g are quantized and g is kept.
 *
 * MLX's GPU kernels round halves away from zero where its CPU kernels (and these) round
 * them to even; a tie is rare and changes one code by one.
 */
#include "mlx_math_impl.h"
#include "quant_impl.h"

#include <math.h>
#include <string.h>

/* ==== encoders ==== */

/* E4M3 as MLX encodes it (PyTorch's fp8e4m3fn_from_fp32_value, nearest-even, but with MLX's
 * bound 543 << 21: 448 and more saturate to 0x7E, so 0x7F never comes out); finite input. */
uint8_t tfs_mlx_e4m3_encode(float f)
{
	const uint32_t fp8_max = 543u << 21, denorm_mask = 141u << 23;
	uint32_t bits, sign;
	uint8_t r;

	memcpy(&bits, &f, 4);
	sign = bits & 0x80000000u;
	bits ^= sign;
	if (bits >= fp8_max) {
		r = 0x7E;
	} else if (bits < (121u << 23)) {
		float a, dm;

		memcpy(&a, &bits, 4);
		memcpy(&dm, &denorm_mask, 4);
		a += dm;
		memcpy(&bits, &a, 4);
		r = (uint8_t)(bits - denorm_mask);
	} else {
		uint32_t mant_odd = (bits >> 20) & 1u;

		bits += ((uint32_t)(7 - 127) << 23) + 0x7FFFFu;
		bits += mant_odd;
		r = (uint8_t)(bits >> 20);
	}
	return r | (uint8_t)(sign >> 24);
}

/* The FP4 code nearest to v: MLX's argmin of |v - FP4_LUT[k]| (the first of ties). */
static uint32_t fp4_code(float v)
{
	uint32_t best = 0;
	float bd = fabsf(v - tfs_fp4_values[0]);

	for (uint32_t k = 1; k < 16; k++) {
		float d = fabsf(v - tfs_fp4_values[k]);

		if (d < bd) {
			bd = d;
			best = k;
		}
	}
	return best;
}

/* Stores code c (bits wide, 1..8) as element k of a little-endian bit stream. */
static void put_code(uint8_t *w, uint64_t k, uint32_t bits, uint32_t c)
{
	const uint64_t pos = k * bits;
	const uint32_t off = (uint32_t)(pos & 7), mask = ((1u << bits) - 1) << off;
	uint8_t *p = w + (pos >> 3);
	uint32_t v = p[0] | (off + bits > 8 ? (uint32_t)p[1] << 8 : 0);

	v = (v & ~mask) | ((c << off) & mask);
	p[0] = (uint8_t)v;
	if (off + bits > 8)
		p[1] = (uint8_t)(v >> 8);
}

/* Stores the i-th scale or bias of a row in dtype dt (BF16, F16, F32), nearest-even. */
static void put_param(uint8_t *row, int dt, uint64_t i, float f)
{
	uint16_t h;

	if (dt == TFS_DT_F32) {
		memcpy(row + 4 * i, &f, 4);
		return;
	}
	h = dt == TFS_DT_BF16 ? tfs_f32_to_bf16(f) : tfs_f32_to_f16(f);
	row[2 * i] = (uint8_t)h;
	row[2 * i + 1] = (uint8_t)(h >> 8);
}

/* ==== one group ==== */

static int quantize_affine(const tfs_mlx_desc *d, const float *x, uint64_t g, uint8_t *wrow,
			   uint8_t *srow, uint8_t *brow, tfs_error *err)
{
	const float n_bins = (float)((1u << d->bits) - 1), eps = 1e-7f;
	float w_max = -INFINITY, w_min = INFINITY;

	for (uint32_t j = 0; j < d->group; j++) {
		w_max = x[j] > w_max ? x[j] : w_max;
		w_min = x[j] < w_min ? x[j] : w_min;
	}
	const bool mask = fabsf(w_min) > fabsf(w_max);
	float scale = (w_max - w_min) / n_bins;

	scale = scale < eps ? eps : scale;
	scale = mask ? scale : -scale;
	const float edge = mask ? w_min : w_max, q0 = rintf(edge / scale);
	float bias = 0;

	if (q0 != 0) {
		scale = edge / q0;
		bias = edge;
	}
	if (!isfinite(scale) || !isfinite(bias))
		return tfs_error_set(err, TFS_E_INVALID, "the group's range [%g, %g] has no finite "
				     "scale", (double)w_min, (double)w_max);
	for (uint32_t j = 0; j < d->group; j++) {
		float q = rintf((x[j] - bias) / scale);

		q = q < 0 ? 0 : q > n_bins ? n_bins : q;
		put_code(wrow, g * d->group + j, d->bits, (uint32_t)q);
	}
	put_param(srow, d->scale_dtype, g, scale);
	put_param(brow, d->bias_dtype, g, bias);
	if (!isfinite(tfs_mlx_param(srow, d->scale_dtype, g)) ||
	    !isfinite(tfs_mlx_param(brow, d->bias_dtype, g)))
		return tfs_error_set(err, TFS_E_INVALID, "scale %g or bias %g overflows %s",
				     (double)scale, (double)bias, tfs_dtype(d->scale_dtype)->name);
	return 0;
}

/* mxfp4 / mxfp8: a power-of-two scale. */
static int quantize_mx(const tfs_mlx_desc *d, const float *x, uint64_t g, uint8_t *wrow,
		       uint8_t *srow, tfs_error *err)
{
	const float maxval = d->bits == 4 ? 6.0f : 448.0f;
	float amax = 0;

	for (uint32_t j = 0; j < d->group; j++)
		amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
	const float s = amax / maxval;
	const int e = s == 0 ? 0 : (int)rintf(log2f(s));

	if (e < -127)
		return tfs_error_set(err, TFS_E_INVALID, "the group's largest magnitude %g is too "
				     "small for an E8M0 scale", (double)amax);
	const float p = ldexpf(1.0f, e);

	for (uint32_t j = 0; j < d->group; j++) {
		const float v = x[j] / p;
		const uint64_t k = g * d->group + j;

		if (d->bits == 4)
			put_code(wrow, k, 4, fp4_code(v));
		else
			wrow[k] = tfs_mlx_e4m3_encode(v);
	}
	srow[g] = (uint8_t)(e + 127);
	return 0;
}

/* nvfp4: an E4M3 scale per 16 values, after the global scale (when there is one). */
static int quantize_nv(const tfs_mlx_desc *d, const float *x, const float *gscale, uint64_t g,
		       uint8_t *wrow, uint8_t *srow, tfs_error *err)
{
	float v[64], amax = 0;

	if (d->group > 64)
		return tfs_error_set(err, TFS_E_INVALID, "nvfp4 groups of %u values", d->group);
	if (gscale && (!isfinite(*gscale) || *gscale == 0))
		return tfs_error_set(err, TFS_E_INVALID, "its global scale is %g", (double)*gscale);
	for (uint32_t j = 0; j < d->group; j++) {
		v[j] = gscale ? x[j] / *gscale : x[j];
		if (!isfinite(v[j]))
			return tfs_error_set(err, TFS_E_INVALID, "value %g over the global scale %g "
					     "overflows", (double)x[j], (double)*gscale);
		amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
	}
	const uint8_t sb = tfs_mlx_e4m3_encode(amax / 6.0f);
	const float s = tfs_e4m3_mlx(sb);

	for (uint32_t j = 0; j < d->group; j++)
		put_code(wrow, g * d->group + j, 4, s == 0 ? 0 : fp4_code(v[j] / s));
	srow[g] = sb;
	return 0;
}

int tfs_mlx_quantize_group(const tfs_mlx_desc *d, const float *x, const float *gscale,
			   uint64_t g, uint8_t *wrow, uint8_t *srow, uint8_t *brow, tfs_error *err)
{
	if (!tfs_mlx_desc_ok(d) || (d->mode == TFS_QMODE_AFFINE && !brow))
		return tfs_error_set(err, TFS_E_INVALID, "not a valid MLX quantization");
	for (uint32_t j = 0; j < d->group; j++)
		if (!isfinite(x[j]))
			return tfs_error_set(err, TFS_E_INVALID, "value %u of the group is %g: %s "
					     "cannot hold it", j, (double)x[j], tfs_qmode_name(d->mode));
	switch (d->mode) {
	case TFS_QMODE_AFFINE:
		return quantize_affine(d, x, g, wrow, srow, brow, err);
	case TFS_QMODE_NVFP4:
		return quantize_nv(d, x, gscale, g, wrow, srow, err);
	default:
		return quantize_mx(d, x, g, wrow, srow, err);
	}
}
