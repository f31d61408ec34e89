/*
 * mlx_math.c - dequantization of MLX-quantized matrices (Ollama's safetensors models).
 *
 * A quantized row is a run of little-endian uint32 words; read as one
 * little-endian bit stream, element k occupies bits [bits*k, bits*(k+1)).
 * Elements are grouped in runs of `group`; group g has one scale (and, for
 * affine, one bias) in the companion rows srow / brow.
 *
 *  1. affine: w = scale[g] * q + bias[g]; q unsigned, 2..8 bits; scale and bias
 *     in BF16, F16 or F32.
 *  2. nvfp4:  w = FP4(q) * E4M3(scale[g]) [* global scale]; group 16.
 *  3. mxfp4:  w = FP4(q) * 2^(scale[g] - 127); group 32.
 *  4. mxfp8:  w = E4M3(byte) * 2^(scale[g] - 127); group 32.
 *
 * The arithmetic is float32, one rounding per operation (multiply, then add,
 * then the global scale).  MLX itself returns its results in the scale dtype
 * (bf16 usually); the reference files in tests/data (made from MLX's formulas)
 * hold the unrounded float32 values, and so does tensorfs: rounding to bf16
 * would throw information away that the f32 view can keep.
 */
#include "mlx_math_impl.h"

#include <string.h>

/* ==== scales and biases (the E4M3 and E8M0 decoders are in dequant.h) ==== */

/* The bits-wide code of element k (bits 1..8), reading only the bytes it spans. */
static inline uint32_t code_at(const uint8_t *w, uint64_t k, uint32_t bits)
{
	uint64_t pos = k * bits;
	uint32_t off = (uint32_t)(pos & 7), v = w[pos >> 3];

	if (off + bits > 8)
		v |= (uint32_t)w[(pos >> 3) + 1] << 8;
	return (v >> off) & ((1u << bits) - 1);
}

bool tfs_mlx_desc_ok(const tfs_mlx_desc *d)
{
	if (d->group == 0)
		return false;
	switch (d->mode) {
	case TFS_QMODE_AFFINE:
		return d->bits >= 2 && d->bits <= 8 &&
		       (d->scale_dtype == TFS_DT_BF16 || d->scale_dtype == TFS_DT_F16 ||
			d->scale_dtype == TFS_DT_F32) &&
		       (d->bias_dtype == TFS_DT_BF16 || d->bias_dtype == TFS_DT_F16 ||
			d->bias_dtype == TFS_DT_F32);
	case TFS_QMODE_NVFP4:
	case TFS_QMODE_MXFP4:
		return d->bits == 4;
	case TFS_QMODE_MXFP8:
		return d->bits == 8;
	default:
		return false;
	}
}

/* ==== the row kernel ==== */

void tfs_mlx_dequant_row(const tfs_mlx_desc *d, const uint8_t *wrow, const uint8_t *srow,
			 const uint8_t *brow, const float *gscale, uint64_t k0, uint64_t n,
			 float *out)
{
	const uint64_t end = k0 + n;
	uint64_t k = k0;

	if (!tfs_mlx_desc_ok(d) || (d->mode == TFS_QMODE_AFFINE && !brow)) {
		/* a descriptor the reader should never have produced: no values */
		uint32_t nan = 0x7fc00000u;

		for (uint64_t i = 0; i < n; i++)
			memcpy(out + i, &nan, 4);
		return;
	}

	/* one group segment at a time: [k, seg_end) shares a scale */
	while (k < end) {
		const uint64_t g = k / d->group;
		uint64_t seg_end = (g + 1) * d->group;

		if (seg_end > end)
			seg_end = end;

		switch (d->mode) {
		case TFS_QMODE_AFFINE: {
			const float s = tfs_mlx_param(srow, d->scale_dtype, g);
			const float b = tfs_mlx_param(brow, d->bias_dtype, g);

			if (d->bits == 8) {
				for (; k < seg_end; k++)
					*out++ = s * (float)wrow[k] + b;
			} else if (d->bits == 4) {
				for (; k < seg_end; k++)
					*out++ = s * (float)((wrow[k >> 1] >> (4 * (k & 1))) & 0xf) + b;
			} else {
				for (; k < seg_end; k++)
					*out++ = s * (float)code_at(wrow, k, d->bits) + b;
			}
			break;
		}
		case TFS_QMODE_NVFP4: {
			const float s = tfs_e4m3_mlx(srow[g]);

			if (gscale) {
				const float gs = *gscale;

				for (; k < seg_end; k++)
					*out++ = tfs_fp4_values[(wrow[k >> 1] >> (4 * (k & 1))) & 0xf] * s * gs;
			} else {
				for (; k < seg_end; k++)
					*out++ = tfs_fp4_values[(wrow[k >> 1] >> (4 * (k & 1))) & 0xf] * s;
			}
			break;
		}
		case TFS_QMODE_MXFP4: {
			const float s = tfs_e8m0_mlx(srow[g]);

			for (; k < seg_end; k++)
				*out++ = tfs_fp4_values[(wrow[k >> 1] >> (4 * (k & 1))) & 0xf] * s;
			break;
		}
		case TFS_QMODE_MXFP8: {
			const float s = tfs_e8m0_mlx(srow[g]);

			for (; k < seg_end; k++)
				*out++ = tfs_e4m3_mlx(wrow[k]) * s;
			break;
		}
		default:
			return;
		}
	}
}

const char *tfs_qmode_name(tfs_qmode q)
{
	switch (q) {
	case TFS_QMODE_AFFINE: return "affine";
	case TFS_QMODE_NVFP4: return "nvfp4";
	case TFS_QMODE_MXFP4: return "mxfp4";
	case TFS_QMODE_MXFP8: return "mxfp8";
	default: return "none";
	}
}
