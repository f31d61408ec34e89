/*
 * mlx.c - the f32 view of MLX-quantized tensors (Ollama's per-tensor models), dequantized
 * row by row (num/mlx_math.c); mlx_requant.c writes it back.
 */
#include "mlx_math_impl.h"
#include "model_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
	return tfs_source_present(s, t->offset, t->nbytes, err) ? NULL : s->map + t->offset;
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
