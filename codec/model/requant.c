/*
 * requant.c - a tensor's float32 values written back as its own dtype (f32/ and npy/ of a
 * rw mount).
 *
 * The values come from a staged file, the stored bytes from the model; both are walked in
 * chunks of whole blocks, so memory does not grow with the tensor.  A block whose values are
 * bit for bit what its stored block dequantizes to was not edited and keeps its bytes (a
 * quantizer run on dequantized values does not in general give the same bytes back); every
 * other block is quantized with tfs_quantize, which works block by block.  With an importance
 * matrix, Q4_0, Q4_1, Q5_0 and Q5_1 weigh each block by the mean square of its whole row (as
 * ggml does): a run of blocks that cuts a row reads the rest of the row's values (staged, or
 * from the model) for that figure, and still rewrites only its own blocks.
 */
#include "mlx_math_impl.h"
#include "requant.h"
#include "model_impl.h"
#include "quant_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHUNK_VALUES (1u << 18)   /* 1 MiB of float32 per step */

/* The type a tensor's float32 values are written back as: its own, but C64's (re, im)
 * pairs are two F32 values each, stored as they are. */
static int values_type(int dtype)
{
	return dtype == TFS_DT_C64 ? TFS_DT_F32 : dtype;
}

bool tfs_tensor_numbers_writable(const tfs_model *m, size_t i, const tfs_imatrix *im,
				 const char **why)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);
	const tfs_dtype_info *d = t ? tfs_dtype(t->dtype) : NULL;
	const char *w = NULL;

	if (!d)
		w = "no such tensor";
	else if (t->q.mode != TFS_QMODE_NONE) {
		const tfs_tensor *sc = t->q_scale >= 0 ? tfs_model_tensor(m, (size_t)t->q_scale) : NULL;
		const tfs_tensor *bi = t->q_bias >= 0 ? tfs_model_tensor(m, (size_t)t->q_bias) : NULL;

		if (!tfs_mlx_desc_ok(&t->q) || !sc || (t->q.mode == TFS_QMODE_AFFINE && !bi))
			w = "its MLX quantization is not one tensorfs knows";
		else if (sc->deleted || (bi && bi->deleted))
			w = "its .scale or .bias companion was deleted";
	} else if (tfs_quantize_needs_imatrix(t->dtype) && !im)
		w = "its type needs an importance matrix to quantize (as in ggml): mount with "
		    "-o imatrix=FILE (llama.cpp's imatrix), or write tensors/ with quantized bytes";
	else if (tfs_quantize_needs_imatrix(t->dtype) && !tfs_imatrix_has(im, t->name))
		w = "its type needs an importance matrix to quantize (as in ggml), and the "
		    "imatrix file has no entry for this tensor";
	else if (!tfs_quantize_supported(values_type(t->dtype)))
		w = "tensorfs cannot quantize its type";
	if (why && w)
		*why = w;
	return w == NULL;
}

int tfs_staged_pread(int fd, void *buf, size_t len, uint64_t off, tfs_error *err)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? tfs_error_sys(err, errno, "reading the staged values")
				     : tfs_error_set(err, TFS_E_INVALID, "the staged values end early");
		done += (size_t)r;
	}
	return 0;
}

int tfs_staged_pwrite(int fd, const void *buf, size_t len, uint64_t off, tfs_error *err)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return tfs_error_sys(err, errno, "writing the requantized bytes");
		done += (size_t)r;
	}
	return 0;
}

/* ==== importance weights ==== */

/* The imatrix weights of the tensor being quantized, one expert's row (ne[0] values) at a
 * time, as llama-quantize gives them to ggml_quantize_chunk. */
typedef struct {
	const tfs_imatrix *im;  /* NULL: quantized without */
	const char *name;
	uint64_t ne0, per_mat, n_mat;
	uint64_t mat;           /* the expert whose row w holds (UINT64_MAX: none yet) */
	float *w;
	/* Q4_0..Q5_1 weigh each block by its whole row: a run that cuts a row reads the row's
	 * values (n from value `first`) into row_vals through read_row */
	int (*read_row)(void *ctx, uint64_t first, uint64_t n, float *out, tfs_error *err);
	void *ctx;
	float *row_vals;
} weights;

static int load_weights(weights *qw, uint64_t mat, tfs_error *err)
{
	if (qw->mat == mat)
		return 0;
	qw->mat = UINT64_MAX;
	int rc = tfs_imatrix_weights(qw->im, qw->name, qw->ne0, qw->n_mat, mat, qw->w, err);

	if (!rc)
		qw->mat = mat;
	return rc;
}

/* The weights tensor t needs as qtype: none unless the type takes them and im has them
 * (a type that cannot do without was refused by the caller); an entry of the wrong size
 * fails here, before any work. */
static int weights_init(weights *qw, const tfs_model *m, size_t i, int qtype,
			const tfs_imatrix *im, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);

	memset(qw, 0, sizeof(*qw));
	if (!tfs_quantize_takes_imatrix(qtype) || !tfs_imatrix_has(im, t->name))
		return 0;
	const uint64_t count = tfs_tensor_f32_count(m, i, NULL);

	qw->im = im;
	qw->name = t->name;
	qw->ne0 = t->n_dims ? (uint64_t)t->ne[0] : 1;
	qw->per_mat = qw->ne0 * (t->n_dims > 1 ? (uint64_t)t->ne[1] : 1);
	qw->n_mat = qw->per_mat ? count / qw->per_mat : 0;
	qw->mat = UINT64_MAX;
	if (!qw->n_mat)
		return 0;   /* an empty tensor quantizes to nothing */
	if (!(qw->w = malloc(qw->ne0 * sizeof(float))))
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	return load_weights(qw, 0, err);
}

/* Where a row's values are read from: the staged values of a rw write, or the model. */
typedef struct {
	int fd;
	uint64_t off;
	const tfs_model *m;
	size_t i;
} row_source;

static int read_staged_row(void *ctx, uint64_t first, uint64_t n, float *out, tfs_error *err)
{
	const row_source *rs = ctx;

	return tfs_staged_pread(rs->fd, out, n * sizeof(float), rs->off + first * sizeof(float),
				err);
}

static int read_model_row(void *ctx, uint64_t first, uint64_t n, float *out, tfs_error *err)
{
	const row_source *rs = ctx;

	return tfs_tensor_read_f32(rs->m, rs->i, first, n, out, err);
}

static void weights_free(weights *qw)
{
	free(qw->w);
	free(qw->row_vals);
}

/* k values of one row from value `first` (ggml weighing each block by its row: the row's
 * mean square from vals when they are the whole row, else from the row read whole). */
static int quantize_in_row(weights *qw, uint8_t *dst, int qtype, const float *vals, uint64_t k,
			   uint64_t first, tfs_error *err)
{
	const uint64_t start = first - first % qw->ne0;
	float sigma2;

	if (k == qw->ne0) {
		sigma2 = tfs_quantize_row_sigma2(vals, qw->ne0);
	} else {
		if (!qw->row_vals && !(qw->row_vals = malloc(qw->ne0 * sizeof(float))))
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		int rc = qw->read_row(qw->ctx, start, qw->ne0, qw->row_vals, err);

		if (rc)
			return rc;
		sigma2 = tfs_quantize_row_sigma2(qw->row_vals, qw->ne0);
	}
	return tfs_quantize_weighted_part(dst, qtype, vals, k, first, qw->ne0, qw->w, sigma2, err);
}

/* n values (whole blocks) starting at value `first` of the tensor, quantized as qtype with
 * each expert's weights (or none) into dst. */
static int quantize_run(weights *qw, uint8_t *dst, int qtype, const float *vals, uint64_t n,
			uint64_t first, tfs_error *err)
{
	const tfs_dtype_info *d = tfs_dtype(qtype);
	const bool by_rows = tfs_quantize_weighs_rows(qtype);

	if (!qw->im)
		return tfs_quantize_from(dst, qtype, vals, n, first, err);
	while (n) {
		/* up to the end of the expert's matrix (or of the row) */
		const uint64_t unit = by_rows ? qw->ne0 : qw->per_mat, end = (first / unit + 1) * unit;
		const uint64_t k = end - first < n ? end - first : n;
		int rc = load_weights(qw, first / qw->per_mat, err);

		if (!rc && by_rows)
			rc = quantize_in_row(qw, dst, qtype, vals, k, first, err);
		else if (!rc)
			rc = tfs_quantize_weighted(dst, qtype, vals, k, first, qw->ne0, qw->w, err);
		if (rc)
			return rc;
		dst += k / d->block_elems * d->block_bytes;
		vals += k;
		first += k;
		n -= k;
	}
	return 0;
}

/* One chunk of nb blocks starting at block b0: compares, requantizes what changed. */
static int requant_chunk(const tfs_model *m, size_t i, int qtype, weights *qw, uint64_t b0,
			 uint64_t nb, const float *vals, float *old, uint8_t *raw, uint64_t *changed,
			 tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);
	const tfs_dtype_info *d = tfs_dtype(qtype);
	const size_t be = d->block_elems, bb = d->block_bytes;
	int rc = tfs_tensor_read_exact(m, i, b0 * bb, nb * bb, raw, err);

	if (rc)
		return rc;
	d->to_f32(raw, old, nb);
	for (uint64_t k = 0, end; k < nb; k = end) {
		if (memcmp(vals + k * be, old + k * be, be * sizeof(float)) == 0) {
			end = k + 1;
			continue;
		}
		/* a run of edited blocks: one call (F16's blocks are single values) */
		for (end = k + 1; end < nb && memcmp(vals + end * be, old + end * be,
						     be * sizeof(float)) != 0; end++)
			;
		rc = quantize_run(qw, raw + k * bb, qtype, vals + k * be, (end - k) * be,
				  (b0 + k) * be, err);
		if (rc) {
			char msg[TFS_ERRMSG_MAX];

			snprintf(msg, sizeof(msg), "tensor '%.200s': %.800s", t->name, err->msg);
			return tfs_error_set(err, rc, "%s", msg);
		}
		*changed += end - k;
	}
	return 0;
}

int tfs_tensor_requantize(const tfs_model *m, size_t i, const tfs_imatrix *im, int in_fd,
			  uint64_t in_off, int out_fd, uint64_t *changed, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);
	const char *why = "no such tensor";
	uint64_t n_changed = 0;
	weights qw;

	if (t && t->q.mode != TFS_QMODE_NONE)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s' is MLX-quantized: its "
				     "values are requantized with its scales, not as a GGML type",
				     t->name);
	if (t && tfs_quantize_needs_imatrix(t->dtype) && !tfs_imatrix_has(im, t->name))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s' is %s, which needs an "
				     "importance matrix to quantize (as in ggml), and %s: the values "
				     "were not written; write tensors/%s with quantized bytes instead",
				     t->name, tfs_dtype(t->dtype)->name,
				     im ? "the imatrix file has no entry for it"
					: "none was given (mount with -o imatrix=FILE)", t->name);
	if (!t || !tfs_tensor_numbers_writable(m, i, im, &why))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': %s", t ? t->name : "?", why);
	const int qtype = values_type(t->dtype);
	const tfs_dtype_info *d = tfs_dtype(qtype);
	const uint64_t count = tfs_tensor_f32_count(m, i, NULL), nblocks = count / d->block_elems;
	const uint64_t per = CHUNK_VALUES / d->block_elems ? CHUNK_VALUES / d->block_elems : 1;
	float *vals = malloc(per * d->block_elems * sizeof(float));
	float *old = malloc(per * d->block_elems * sizeof(float));
	uint8_t *raw = malloc(per * d->block_bytes);
	int rc = vals && old && raw ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");

	row_source rs = { .fd = in_fd, .off = in_off };

	if (!rc)
		rc = weights_init(&qw, m, i, qtype, im, err);
	else
		memset(&qw, 0, sizeof(qw));
	qw.read_row = read_staged_row;
	qw.ctx = &rs;

	for (uint64_t b0 = 0; !rc && b0 < nblocks; b0 += per) {
		uint64_t nb = nblocks - b0 < per ? nblocks - b0 : per;

		rc = tfs_staged_pread(in_fd, vals, nb * d->block_elems * sizeof(float),
				in_off + b0 * d->block_elems * sizeof(float), err);
		if (!rc)
			rc = requant_chunk(m, i, qtype, &qw, b0, nb, vals, old, raw, &n_changed, err);
		if (!rc)
			rc = tfs_staged_pwrite(out_fd, raw, nb * d->block_bytes, b0 * d->block_bytes, err);
	}
	weights_free(&qw);
	free(vals);
	free(old);
	free(raw);
	if (!rc && changed)
		*changed = n_changed;
	return rc;
}

/* ==== conversion to another dtype ==== */

int tfs_tensor_convert_check(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
			     tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);
	const tfs_dtype_info *d = tfs_dtype(dtype);
	const char *why = "no such tensor";

	if (!t || !d)
		return tfs_error_set(err, TFS_E_INVALID, "%s", t ? "unknown dtype" : why);
	if (t->q.mode != TFS_QMODE_NONE)
		why = "MLX-quantized";
	else if (tfs_dtype(t->dtype)->f32_per_elem != 1)
		why = "complex values have no real type to become";
	else if (tfs_tensor_has_f32(m, i, &why))
		why = NULL;
	if (why)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s' cannot be converted: %s",
				     t->name, why);
	if (!tfs_quantize_supported(dtype))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': tensorfs cannot quantize "
				     "to %s", t->name, d->name);
	/* ggml quantizes rows: the fastest dimension must be whole blocks */
	if (t->n_dims == 0 || t->ne[0] % d->block_elems)
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': rows of %lld values are not "
				     "whole %u-value %s blocks", t->name,
				     (long long)(t->n_dims ? t->ne[0] : 1), d->block_elems, d->name);
	if (tfs_quantize_needs_imatrix(dtype) && !tfs_imatrix_has(im, t->name))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': %s needs an importance "
				     "matrix to quantize (as in ggml), and %s", t->name, d->name,
				     im ? "the imatrix file has no entry for this tensor"
					: "none was given (mount with -o imatrix=FILE)");
	return 0;
}

int tfs_tensor_convert(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
		       int out_fd, tfs_error *err)
{
	int rc = tfs_tensor_convert_check(m, i, dtype, im, err);
	weights qw = { 0 };

	if (rc)
		return rc;
	const tfs_dtype_info *d = tfs_dtype(dtype);
	const uint64_t count = tfs_tensor_f32_count(m, i, NULL), nblocks = count / d->block_elems;
	const uint64_t per = CHUNK_VALUES / d->block_elems ? CHUNK_VALUES / d->block_elems : 1;
	float *vals = malloc(per * d->block_elems * sizeof(float));
	uint8_t *raw = malloc(per * d->block_bytes);

	rc = vals && raw ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	row_source rs = { .m = m, .i = i };

	if (!rc)
		rc = weights_init(&qw, m, i, dtype, im, err);
	qw.read_row = read_model_row;
	qw.ctx = &rs;
	for (uint64_t b0 = 0; !rc && b0 < nblocks; b0 += per) {
		uint64_t nb = nblocks - b0 < per ? nblocks - b0 : per;

		rc = tfs_tensor_read_f32(m, i, b0 * d->block_elems, nb * d->block_elems, vals, err);
		if (!rc)
			rc = quantize_run(&qw, raw, dtype, vals, nb * d->block_elems,
					  b0 * d->block_elems, err);
		if (!rc)
			rc = tfs_staged_pwrite(out_fd, raw, nb * d->block_bytes, b0 * d->block_bytes, err);
	}
	weights_free(&qw);
	free(vals);
	free(raw);
	return rc;
}

int tfs_tensor_convert_blocks(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
			      uint64_t b0, uint64_t nb, void *out, float *vals, tfs_error *err)
{
	const tfs_dtype_info *d = tfs_dtype(dtype);
	weights qw = { 0 };
	row_source rs = { .m = m, .i = i };
	int rc = d ? weights_init(&qw, m, i, dtype, im, err)
		   : tfs_error_set(err, TFS_E_INVALID, "unknown dtype");

	qw.read_row = read_model_row;
	qw.ctx = &rs;

	if (!rc)
		rc = tfs_tensor_read_f32(m, i, b0 * d->block_elems, nb * d->block_elems, vals, err);
	if (!rc)
		rc = quantize_run(&qw, out, dtype, vals, nb * d->block_elems, b0 * d->block_elems,
				  err);
	weights_free(&qw);
	return rc;
}
