/*
 * mlx_requant.c - an MLX-quantized weight written back from its f32 view (mx.quantize of
 * each edited group: num/mlx_quant.c).
 *
 * tfs_mlx_requantize walks the weight row by row: a group whose values are bit for bit what
 * it dequantizes to keeps its codes, scale and bias; only the edited groups are quantized.
 */
#include "mlx_math_impl.h"
#include "model_impl.h"
#include "requant.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_VALUES (1u << 18)   /* at least 1 MiB of float32 per step (whole rows) */

/* ==== a whole tensor ==== */

/* One weight being written back: its layout, its companions, and a chunk's buffers. */
typedef struct {
	const tfs_model *m;
	const tfs_tensor *t;
	size_t i, si, bi;        /* weight, scale, bias (bi meaningful when has_bias) */
	bool has_bias;
	uint64_t words, k, groups, rows, per;   /* per: rows per chunk */
	uint32_t sb, bb;         /* bytes per scale / bias */
	float *gs;               /* global scales (gn of them), or NULL */
	uint64_t gn;
	float *vals, *old;
	uint8_t *w, *s, *b;
} mlx_job;

static void job_free(mlx_job *j)
{
	free(j->gs);
	free(j->vals);
	free(j->old);
	free(j->w);
	free(j->s);
	free(j->b);
}

static uint32_t param_size(int dt)
{
	return dt == TFS_DT_F32 ? 4 : dt == TFS_DT_U8 ? 1 : 2;
}

/* The global scales of j's weight as floats (F32, BF16 or F16; one, or one per row). */
static int job_gscales(mlx_job *j, tfs_error *err)
{
	const int32_t gi = j->t->q_gscale;

	if (gi < 0)
		return 0;
	const tfs_tensor *g = tfs_model_tensor(j->m, (size_t)gi);
	const uint32_t gb = param_size(j->t->q.gscale_dtype);
	uint8_t *raw = malloc(g->nbytes ? g->nbytes : 1);

	j->gn = g->nbytes / gb;
	j->gs = malloc((j->gn ? j->gn : 1) * sizeof(float));
	if (!raw || !j->gs) {
		free(raw);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	int64_t got = tfs_tensor_read_raw(j->m, (size_t)gi, 0, g->nbytes, raw, err);
	for (uint64_t r = 0; got == (int64_t)g->nbytes && r < j->gn; r++)
		j->gs[r] = tfs_mlx_param(raw, j->t->q.gscale_dtype, r);
	free(raw);
	if (got != (int64_t)g->nbytes || (j->gn != 1 && j->gn < j->rows))
		return tfs_error_set(err, TFS_E_FORMAT, "tensor '%s': its global scale '%s' does not "
				     "match it", j->t->name, g->name);
	return 0;
}

/* Checks tensor i's layout against its companions and allocates the chunk buffers. */
static int job_init(mlx_job *j, const tfs_model *m, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);

	memset(j, 0, sizeof(*j));
	j->m = m;
	j->t = t;
	j->i = i;
	if (!t || t->q.mode == TFS_QMODE_NONE || !tfs_mlx_desc_ok(&t->q) || t->n_dims == 0 ||
	    t->ne[0] <= 0 || t->q_scale < 0 || (t->q.mode == TFS_QMODE_AFFINE && t->q_bias < 0))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s' is not an MLX-quantized "
				     "weight tensorfs can write", t ? t->name : "?");
	j->si = (size_t)t->q_scale;
	j->has_bias = t->q.mode == TFS_QMODE_AFFINE;
	j->bi = j->has_bias ? (size_t)t->q_bias : 0;
	j->words = (uint64_t)t->ne[0];
	j->k = j->words * 32 / t->q.bits;
	j->groups = j->k / t->q.group;
	j->rows = 1;
	for (uint32_t d = 1; d < t->n_dims; d++)
		j->rows *= (uint64_t)t->ne[d];
	j->sb = param_size(t->q.scale_dtype);
	j->bb = param_size(t->q.bias_dtype);
	if (j->words * 32 % t->q.bits || j->k % t->q.group || t->nbytes != j->rows * j->words * 4 ||
	    tfs_model_tensor(m, j->si)->nbytes != j->rows * j->groups * j->sb ||
	    (j->has_bias && tfs_model_tensor(m, j->bi)->nbytes != j->rows * j->groups * j->bb))
		return tfs_error_set(err, TFS_E_FORMAT, "quantized tensor '%s' does not match its "
				     "companions", t->name);
	int rc = job_gscales(j, err);
	if (rc)
		return rc;
	j->per = CHUNK_VALUES / j->k ? CHUNK_VALUES / j->k : 1;
	j->vals = malloc(j->per * j->k * sizeof(float));
	j->old = malloc(j->per * j->k * sizeof(float));
	j->w = malloc(j->per * j->words * 4);
	j->s = malloc(j->per * j->groups * j->sb);
	j->b = malloc(j->per * j->groups * j->bb);
	return j->vals && j->old && j->w && j->s && j->b ? 0
	       : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
}

/* Reads rows [r0, r0 + nr) of tensor idx, rb bytes per row, into buf. */
static int read_rows(const mlx_job *j, size_t idx, uint64_t rb, uint64_t r0, uint64_t nr,
		     uint8_t *buf, tfs_error *err)
{
	return tfs_tensor_read_exact(j->m, idx, r0 * rb, nr * rb, buf, err);
}

/* Rows [r0, r0 + nr): compares each group with what it dequantizes to, quantizes the
 * edited ones into the chunk buffers. */
static int job_rows(mlx_job *j, uint64_t r0, uint64_t nr, uint64_t *changed, tfs_error *err)
{
	const tfs_mlx_desc *q = &j->t->q;
	const uint64_t wb = j->words * 4, sr = j->groups * j->sb, br = j->groups * j->bb;
	int rc = read_rows(j, j->i, wb, r0, nr, j->w, err);

	if (!rc)
		rc = read_rows(j, j->si, sr, r0, nr, j->s, err);
	if (!rc && j->has_bias)
		rc = read_rows(j, j->bi, br, r0, nr, j->b, err);
	for (uint64_t r = 0; !rc && r < nr; r++) {
		const float *gp = j->gs ? &j->gs[j->gn == 1 ? 0 : r0 + r] : NULL;
		uint8_t *wr = j->w + r * wb, *srow = j->s + r * sr;
		uint8_t *brow = j->has_bias ? j->b + r * br : NULL;
		const float *v = j->vals + r * j->k;

		tfs_mlx_dequant_row(q, wr, srow, brow, gp, 0, j->k, j->old + r * j->k);
		for (uint64_t g = 0; !rc && g < j->groups; g++) {
			const uint64_t at = g * q->group;

			if (!memcmp(v + at, j->old + r * j->k + at, q->group * sizeof(float)))
				continue;
			tfs_error e = { 0 };
			if ((rc = tfs_mlx_quantize_group(q, v + at, gp, g, wr, srow, brow, &e)))
				return tfs_error_set(err, rc, "tensor '%.200s': row %llu, elements "
						     "%llu..%llu: %.600s", j->t->name,
						     (unsigned long long)(r0 + r),
						     (unsigned long long)at,
						     (unsigned long long)(at + q->group - 1), e.msg);
			++*changed;
		}
	}
	return rc;
}

int tfs_mlx_requantize(const tfs_model *m, size_t i, int in_fd, uint64_t in_off, int w_fd,
		       int s_fd, int b_fd, uint64_t *changed, tfs_error *err)
{
	mlx_job j;
	uint64_t n_changed = 0;
	int rc = job_init(&j, m, i, err);

	if (!rc && j.has_bias && b_fd < 0)
		rc = tfs_error_set(err, TFS_E_INVALID, "tensor '%s': no file for its biases",
				   j.t->name);
	for (uint64_t r0 = 0; !rc && r0 < j.rows; r0 += j.per) {
		const uint64_t nr = j.rows - r0 < j.per ? j.rows - r0 : j.per;
		const uint64_t sr = j.groups * j.sb, br = j.groups * j.bb;

		rc = tfs_staged_pread(in_fd, j.vals, nr * j.k * sizeof(float),
				      in_off + r0 * j.k * sizeof(float), err);
		if (!rc)
			rc = job_rows(&j, r0, nr, &n_changed, err);
		if (!rc)
			rc = tfs_staged_pwrite(w_fd, j.w, nr * j.words * 4, r0 * j.words * 4, err);
		if (!rc)
			rc = tfs_staged_pwrite(s_fd, j.s, nr * sr, r0 * sr, err);
		if (!rc && j.has_bias)
			rc = tfs_staged_pwrite(b_fd, j.b, nr * br, r0 * br, err);
	}
	job_free(&j);
	if (!rc && changed)
		*changed = n_changed;
	return rc;
}
