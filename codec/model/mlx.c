/*
 * mlx.c - dequantization of MLX-quantized matrices (Ollama's safetensors models).
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
#include "dequant.h"
#include "model_impl.h"

#include <string.h>
#include <sys/mman.h>

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

/* ==== the f32 view of a quantized tensor (the model calls it) ==== */

/* Rows of t: every dimension but the first (GGUF order). */
static uint64_t rows_of(const tfs_tensor *t)
{
	uint64_t r = 1;
	for (uint32_t d = 1; d < t->n_dims; d++)
		r *= (uint64_t)t->ne[d];
	return r;
}

/* The stored bytes of tensor i in its mapping, after checking they lie in its source. */
static const uint8_t *tensor_bytes(const tfs_model *m, int32_t i, tfs_error *err)
{
	if (i < 0 || (size_t)i >= m->n_t) {
		tfs_error_set(err, TFS_E_INVALID, "%s: no tensor %d", m->path, i);
		return NULL;
	}
	const tfs_tensor *t = &m->t[i];
	if (t->src < 0 || (size_t)t->src >= m->n_src) {
		tfs_error_set(err, TFS_E_INVALID, "%s: tensor '%s' has no source", m->path, t->name);
		return NULL;
	}
	const tfs_source *s = &m->src[t->src];
	uint64_t end;
	if (!s->map || tfs_add_overflow(t->offset, t->nbytes, &end) || end > s->size) {
		tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' extends past the file", s->path,
			      t->name);
		return NULL;
	}
	return s->map + t->offset;
}

static uint32_t param_bytes(int dt)
{
	return dt == TFS_DT_F32 ? 4 : dt == TFS_DT_U8 ? 1 : 2;
}

static float load_gscale(const uint8_t *p, int dt, uint64_t i)
{
	if (dt == TFS_DT_BF16)
		return tfs_bf16_to_f32(tfs_le16(p + 2 * i));
	if (dt == TFS_DT_F16)
		return tfs_f16_to_f32(tfs_le16(p + 2 * i));
	float f;
	memcpy(&f, p + 4 * i, 4);
	return f;
}

int tfs_mlx_read_f32(const tfs_model *m, const tfs_tensor *t, uint64_t first, uint64_t count,
		     float *out, tfs_error *err)
{
	const tfs_mlx_desc *q = &t->q;
	if (t->n_dims == 0 || t->ne[0] <= 0 || q->bits == 0 || q->group == 0 || t->q_scale < 0 ||
	    (q->mode == TFS_QMODE_AFFINE && t->q_bias < 0))
		return tfs_error_set(err, TFS_E_INVALID, "%s: tensor '%s' is not a valid quantized "
				     "tensor", m->path, t->name);
	const uint64_t words = (uint64_t)t->ne[0];
	const uint64_t k = words * 32 / q->bits, groups = k / q->group;
	const uint64_t rows = rows_of(t);
	const tfs_tensor *sc = &m->t[t->q_scale];
	const uint64_t sb = param_bytes(q->scale_dtype), bb = param_bytes(q->bias_dtype);
	uint64_t total;

	const uint8_t *w = tensor_bytes(m, (int32_t)(t - m->t), err);
	const uint8_t *s = tensor_bytes(m, t->q_scale, err);
	const uint8_t *b = t->q_bias >= 0 ? tensor_bytes(m, t->q_bias, err) : NULL;
	const uint8_t *g = t->q_gscale >= 0 ? tensor_bytes(m, t->q_gscale, err) : NULL;
	if (!w || !s || (t->q_bias >= 0 && !b) || (t->q_gscale >= 0 && !g))
		return err ? err->code : TFS_E_FORMAT;
	/* re-check what open validated: every row of every part is inside its bytes */
	uint64_t gn = 0;
	if (g) {
		const tfs_tensor *gt = &m->t[t->q_gscale];
		gn = gt->nbytes / param_bytes(q->gscale_dtype);
	}
	if (tfs_mul_overflow(rows, k, &total) || first + count > total ||
	    rows * words * 4 > t->nbytes || rows * groups * sb > sc->nbytes ||
	    (b && rows * groups * bb > m->t[t->q_bias].nbytes) || (g && gn != 1 && gn < rows))
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: quantized tensor '%s' does not match its companions",
				     m->path, t->name);

	uint64_t r = first / k, k0 = first % k;
	uint64_t r_end = (first + count + k - 1) / k;
	/* the mappings are MADV_RANDOM: ask for the rows this read needs */
	tfs_source_advise(m, t->src, t->offset + r * words * 4, (r_end - r) * words * 4, MADV_WILLNEED);
	tfs_source_advise(m, sc->src, sc->offset + r * groups * sb, (r_end - r) * groups * sb,
			  MADV_WILLNEED);
	if (b)
		tfs_source_advise(m, m->t[t->q_bias].src, m->t[t->q_bias].offset + r * groups * bb,
				  (r_end - r) * groups * bb, MADV_WILLNEED);
	uint64_t r_first = r;
	while (count) {
		uint64_t n = k - k0 < count ? k - k0 : count;
		float gs, *gp = NULL;
		if (g) {
			gs = load_gscale(g, q->gscale_dtype, gn == 1 ? 0 : r);
			gp = &gs;
		}
		tfs_mlx_dequant_row(q, w + r * words * 4, s + r * groups * sb,
				    b ? b + r * groups * bb : NULL, gp, k0, n, out);
		out += n;
		count -= n;
		k0 = 0;
		r++;
	}
	tfs_source_advise(m, t->src, t->offset + r_first * words * 4, (r_end - r_first) * words * 4,
			  MADV_DONTNEED);
	return 0;
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
