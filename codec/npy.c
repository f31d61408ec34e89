/* npy.c - .npy headers (format 1.0) for the npy/ view. */
#include "internal.h"

/* Whether npy/ serves tensor t's raw bytes: its dtype is a numpy dtype. */
static bool npy_raw(const tfs_tensor *t)
{
	const tfs_dtype_info *d = tfs_dtype(t->dtype);
	return t->q.mode == TFS_QMODE_NONE && d && d->npy_descr;
}

bool tfs_npy_available(const tfs_model *m, size_t i)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);
	return t && (npy_raw(t) || tfs_tensor_has_f32(m, i, NULL));
}

int tfs_npy_header(tfs_buf *out, bool *raw, const tfs_model *m, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(m, i);
	if (!t)
		return tfs_error_set(err, TFS_E_NOTFOUND, "no tensor %zu", i);
	const tfs_dtype_info *d = tfs_dtype(t->dtype);
	uint32_t n_dims;
	int64_t ne[TFS_MAX_DIMS + 1];
	const char *descr;

	if (npy_raw(t)) {
		*raw = true;
		descr = d->npy_descr;
		n_dims = t->n_dims;
		memcpy(ne, t->ne, sizeof(t->ne));
	} else {
		const char *why = "no float view";
		if (!tfs_tensor_has_f32(m, i, &why))
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': %s", t->name, why);
		*raw = false;
		descr = "<f4";
		tfs_tensor_f32_shape(m, i, &n_dims, ne);
	}

	tfs_buf dict = { 0 };
	int rc = tfs_buf_printf(&dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (uint32_t k = n_dims; k-- > 0 && !rc;)
		rc = tfs_buf_printf(&dict, "%lld%s", (long long)ne[k],
				    n_dims == 1 ? "," : (k ? ", " : ""));
	if (!rc)
		rc = tfs_buf_printf(&dict, "), }");
	/* magic(6) + version(2) + len(2) + dict + padding + '\n' = multiple of 64 */
	size_t total = 10 + dict.len + 1;
	size_t pad = (64 - total % 64) % 64;
	uint16_t hlen = (uint16_t)(dict.len + pad + 1);
	if (!rc && dict.len + pad + 1 > 65535)
		rc = TFS_E_INVALID;
	if (!rc)
		rc = tfs_buf_append(out, "\x93NUMPY\x01\x00", 8);
	if (!rc)
		rc = tfs_buf_append(out, &hlen, 2);
	if (!rc)
		rc = tfs_buf_append(out, dict.data, dict.len);
	for (size_t k = 0; k < pad && !rc; k++)
		rc = tfs_buf_append(out, " ", 1);
	if (!rc)
		rc = tfs_buf_append(out, "\n", 1);
	tfs_buf_free(&dict);
	if (rc)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory building a .npy header");
	return 0;
}
