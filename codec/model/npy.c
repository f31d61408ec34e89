/* npy.c - .npy headers (format 1.0) for the npy/ view. */
#include "npy.h"
#include "cursor.h"
#include "dtype.h"

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

/* The header dict's text without the spaces outside quotes (and a trailing newline). */
static int dict_normal(tfs_buf *out, const uint8_t *p, size_t n)
{
	bool quoted = false;

	if (tfs_buf_reserve(out, n + 1))
		return TFS_E_NOMEM;
	for (size_t k = 0; k < n; k++) {
		if (p[k] == '\'')
			quoted = !quoted;
		if (!quoted && (p[k] == ' ' || p[k] == '\n' || p[k] == '\t'))
			continue;
		out->data[out->len++] = (char)p[k];
	}
	out->data[out->len] = 0;
	return 0;
}

/* The dict and where the data start, from a .npy file's first n bytes (versions 1-3). */
static int npy_dict(const uint8_t *p, size_t n, const uint8_t **dict, size_t *dlen,
		    uint64_t *data_off, tfs_error *err)
{
	if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
		return tfs_error_set(err, TFS_E_INVALID, "not a .npy file (no \\x93NUMPY magic)");
	size_t fixed = p[6] == 1 ? 10 : 12;
	uint64_t hlen = p[6] == 1 ? tfs_le16(p + 8) : n >= 12 ? tfs_le32(p + 8) : UINT64_MAX;

	if (p[6] < 1 || p[6] > 3 || hlen > n - fixed)
		return tfs_error_set(err, TFS_E_INVALID, ".npy header version %u.%u, length %llu: "
				     "not whole in the %zu bytes written", p[6], p[7],
				     (unsigned long long)hlen, n);
	*dict = p + fixed;
	*dlen = (size_t)hlen;
	*data_off = fixed + hlen;
	return 0;
}

int tfs_npy_check(uint64_t *data_off, const tfs_model *m, size_t i, const uint8_t *p, size_t n,
		  tfs_error *err)
{
	tfs_buf want = { 0 }, want_n = { 0 }, got_n = { 0 };
	const uint8_t *d, *wd;
	size_t dl, wdl;
	uint64_t woff;
	bool raw;
	int rc = npy_dict(p, n, &d, &dl, data_off, err);

	if (!rc)
		rc = tfs_npy_header(&want, &raw, m, i, err);
	if (!rc)
		rc = npy_dict((const uint8_t *)want.data, want.len, &wd, &wdl, &woff, err);
	if (!rc && (dict_normal(&want_n, wd, wdl) || dict_normal(&got_n, d, dl)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if (!rc && strcmp(want_n.data, got_n.data) != 0)
		rc = tfs_error_set(err, TFS_E_INVALID, "the .npy header says %.300s, the tensor is "
				   "%.300s (dtype, shape and C order must stay)", got_n.data,
				   want_n.data);
	tfs_buf_free(&want);
	tfs_buf_free(&want_n);
	tfs_buf_free(&got_n);
	return rc;
}
