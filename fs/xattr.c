/*
 * xattr.c - the user.tensorfs.* extended attributes.
 *
 * Read: what a file is (type, dtype, shape, offset, media_type) and, on the root, the
 * mount's pid, source, format, staging, status and last_error.  Written (rw mounts): a
 * key's type, a tensor's dtype or shape (declared for a file not in the model yet, else its
 * bytes restaged as that), or convert (its values requantized to another dtype).
 */
#include "fs.h"
#include "ops.h"
#include "tree.h"
#include "write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XATTR_PREFIX "user.tensorfs."

/* ==== reading ==== */

/* Whether npy node n serves the raw bytes (else the f32 view). */
static bool npy_is_raw(tfsd_fs *fs, tfsd_node *n)
{
	const tfs_buf *c;
	pthread_mutex_lock(&fs->cache_lock);
	bool raw = tfsd_node_content(fs, n, &c) == 0 && n->raw_npy;
	pthread_mutex_unlock(&fs->cache_lock);
	return raw;
}

/* The root's attribute name (past the prefix): the mount's. */
static int root_xattr(tfsd_fs *fs, const char *name, tfs_buf *out)
{
	if (strcmp(name, "pid") == 0)
		return tfs_buf_printf(out, "%d", (int)getpid()) ? -ENOMEM : 0;
	if (strcmp(name, "source") == 0)
		return tfs_buf_printf(out, "%s", tfs_model_path(fs->model)) ? -ENOMEM : 0;
	if (strcmp(name, "format") == 0)
		return tfs_buf_printf(out, "%s", tfs_model_format_name(fs->model)) ? -ENOMEM : 0;
	if (strcmp(name, "staging") == 0 && fs->staging)
		return tfs_buf_printf(out, "%s", tfs_staging_dir(fs->staging)) ? -ENOMEM : 0;
	if (strcmp(name, "status") == 0 && fs->status_path)
		return tfs_buf_printf(out, "%s", fs->status_path) ? -ENOMEM : 0;
	if (strcmp(name, "last_error") == 0)
		return tfsd_last_error(out);
	return -ENODATA;
}

/* Attribute name (user.tensorfs.<name>) of node n into out; -ENODATA: n has none. */
static int node_xattr(tfsd_fs *fs, tfsd_node *n, const char *name, tfs_buf *out)
{
	if (strncmp(name, XATTR_PREFIX, strlen(XATTR_PREFIX)) != 0)
		return -ENODATA;
	name += strlen(XATTR_PREFIX);
	if (n->kind == N_DIR && n->dir == D_ROOT)
		return root_xattr(fs, name, out);
	if (n->kind == N_SCRATCH && n->pend_type && strcmp(name, "type") == 0)
		return tfs_buf_printf(out, "%s", n->pend_type) ? -ENOMEM : 0;
	if (n->kind == N_KEY && n->item >= 0 && strcmp(name, "type") == 0) {
		const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)n->item);
		return tfs_value_type_name(out, kv->type, kv->data, kv->len) ? -EIO : 0;
	}
	if (n->kind == N_EXTRA && n->item >= 0 && strcmp(name, "media_type") == 0)
		return tfs_buf_printf(out, "%s", tfs_model_extra(fs->model, (size_t)n->item)->media_type)
			       ? -ENOMEM : 0;
	if (n->kind == N_RAW || n->kind == N_F32 || n->kind == N_NPY ||
	    (n->kind == N_SCRATCH && n->dir == D_TENSORS)) {
		int dtype;
		uint32_t nd;
		const int64_t *ne;
		uint64_t offset = 0;
		bool have_offset = false;
		if (n->item >= 0) {
			const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);
			dtype = t->dtype;
			nd = t->n_dims;
			ne = t->ne;
			offset = t->offset;
			have_offset = true;
		} else {
			dtype = n->pend_dtype;
			nd = n->pend_ndims;
			ne = n->pend_ne;
			if (dtype < 0 && strcmp(name, "dtype") == 0)
				return -ENODATA;
			if (!n->pend_shape && strcmp(name, "shape") == 0)
				return -ENODATA;
		}
		if (strcmp(name, "dtype") == 0) {
			const tfs_dtype_info *d = tfs_dtype(dtype);
			return tfs_buf_printf(out, "%s", d ? d->name : "unknown") ? -ENOMEM : 0;
		}
		if (strcmp(name, "shape") == 0) {
			/* each view's own shape: f32/ (and npy/ as float32) the dequantized one */
			uint32_t vnd;
			int64_t vne[TFS_MAX_DIMS + 1];
			if (n->item >= 0 && (n->kind == N_F32 || (n->kind == N_NPY && !npy_is_raw(fs, n))) &&
			    tfs_tensor_f32_shape(fs->model, (size_t)n->item, &vnd, vne) == 0) {
				nd = vnd;
				ne = vne;
			}
			if (tfs_buf_reserve(out, 0))
				return -ENOMEM;
			for (uint32_t k = nd; k-- > 0;)
				if (tfs_buf_printf(out, "%lld%s", (long long)ne[k], k ? "," : ""))
					return -ENOMEM;
			return 0;
		}
		if (strcmp(name, "offset") == 0 && have_offset)
			return tfs_buf_printf(out, "%llu", (unsigned long long)offset) ? -ENOMEM : 0;
	}
	return -ENODATA;
}

void tfsd_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfs_buf b = { 0 };
	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *n = tfsd_live_node(fs, ino);
	int rc = n ? node_xattr(fs, n, name, &b) : -ENOENT;
	pthread_rwlock_unlock(&fs->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, b.len);
	else if (size < b.len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, b.data ? b.data : "", b.len);
	tfs_buf_free(&b);
}

void tfsd_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char *const all[] = { "type", "dtype", "shape", "offset", "media_type",
					   "pid", "source", "format", "staging", "status",
					   "last_error" };
	tfsd_fs *fs = fuse_req_userdata(req);
	tfs_buf list = { 0 }, b = { 0 };
	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *n = tfsd_live_node(fs, ino);
	int rc = n ? 0 : -ENOENT;
	for (size_t i = 0; n && i < sizeof(all) / sizeof(all[0]); i++) {
		char name[64];
		snprintf(name, sizeof(name), XATTR_PREFIX "%s", all[i]);
		b.len = 0;
		if (node_xattr(fs, n, name, &b) == 0)
			tfs_buf_append(&list, name, strlen(name) + 1);
	}
	pthread_rwlock_unlock(&fs->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, list.len);
	else if (size < list.len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, list.data ? list.data : "", list.len);
	tfs_buf_free(&list);
	tfs_buf_free(&b);
}

/* ==== writing (rw mounts) ==== */

/* Zero text of a type, for typing a new empty key. */
static const char *zero_text(const char *type_name)
{
	if (strncmp(type_name, "array", 5) == 0)
		return "[]";
	if (strcmp(type_name, "string") == 0)
		return "";
	if (strcmp(type_name, "bool") == 0)
		return "false";
	if (strncmp(type_name, "float", 5) == 0)
		return "0.0";
	return "0";
}

/* Parses "4,256" (numpy order) into GGUF-order ne. */
static int parse_shape(const char *s, uint32_t *nd, int64_t *ne)
{
	int64_t v[TFS_MAX_DIMS];
	uint32_t k = 0;
	while (*s) {
		char *end;
		if (k == TFS_MAX_DIMS || *s < '0' || *s > '9')
			return -EINVAL;
		errno = 0;
		long long x = strtoll(s, &end, 10);
		if (errno || x < 0)
			return -EINVAL;
		v[k++] = x;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -EINVAL;
	}
	*nd = k;
	for (uint32_t i = 0; i < k; i++)
		ne[i] = v[k - 1 - i];
	for (uint32_t i = k; i < TFS_MAX_DIMS; i++)
		ne[i] = 1;
	return 0;
}

/*
 * Declares the type (metadata/), dtype or shape (tensors/) of a file not in the model yet:
 * a scratch file or a new tensor not written yet.  Its bytes are read as that when they
 * become an item (a rename, a close).  fs->lock held for writing; -errno.
 */
static int declare_type(tfsd_node *n, const char *name, const char *v)
{
	if (n->dir == D_METADATA && strcmp(name, "user.tensorfs.type") == 0) {
		uint8_t *d = NULL;
		uint64_t l;
		uint32_t t;
		tfs_error err;
		const char *zero = zero_text(v);
		if (tfs_value_parse(&d, &l, &t, v, zero, strlen(zero), &err))
			return -EINVAL; /* not a type name */
		free(d);
		char *c = strdup(v);
		if (!c)
			return -ENOMEM;
		free(n->pend_type);
		n->pend_type = c;
	} else if (n->dir == D_TENSORS && strcmp(name, "user.tensorfs.dtype") == 0) {
		if ((n->pend_dtype = tfs_dtype_from_name(v)) < 0)
			return -EINVAL;
	} else if (n->dir == D_TENSORS && strcmp(name, "user.tensorfs.shape") == 0) {
		int rc = parse_shape(v, &n->pend_ndims, n->pend_ne);
		if (rc)
			return rc;
		n->pend_shape = true;
	} else {
		return strncmp(name, "user.tensorfs.", 14) == 0 ? -EACCES : -ENOTSUP;
	}
	n->typed = true;
	return 0;
}

/* user.tensorfs.type on a key: its current text (or the type's zero for an empty value)
 * read again as that type. */
static int retype_key(tfsd_fs *fs, tfsd_node *n, const char *type_name)
{
	tfsd_handle h = { .node = n, .data_fd = -1, .writing = true, .dirty = true };
	pthread_rwlock_rdlock(&fs->lock);
	int rc = tfsd_node_text(fs, n, &h.text);
	pthread_rwlock_unlock(&fs->lock);
	if (!rc && h.text.len <= 1) {
		h.text.len = 0;
		tfs_buf_printf(&h.text, "%s", zero_text(type_name));
	}
	if (!rc)
		rc = tfsd_commit_text(fs, &h, type_name);
	if (!rc)
		n->typed = true;
	tfs_buf_free(&h.text);
	return rc;
}

/* user.tensorfs.dtype / .shape on a tensor: its bytes restaged as that dtype or shape (a
 * vector given a new dtype keeps its bytes, so its length follows). */
static int retype_tensor(tfsd_fs *fs, tfsd_node *n, bool is_dtype, const char *v)
{
	int dtype = -1;
	uint32_t nd = 0;
	int64_t ne[TFS_MAX_DIMS];
	int rc = is_dtype ? ((dtype = tfs_dtype_from_name(v)) < 0 ? -EINVAL : 0)
			  : parse_shape(v, &nd, ne);
	if (rc)
		return rc;
	pthread_rwlock_rdlock(&fs->lock);
	const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);
	if (is_dtype) {
		nd = t->n_dims;
		memcpy(ne, t->ne, sizeof(ne));
		const tfs_dtype_info *d = tfs_dtype(dtype);
		if (nd == 1 && d && t->nbytes % d->block_bytes == 0)
			ne[0] = (int64_t)(t->nbytes / d->block_bytes * d->block_elems);
	} else {
		dtype = t->dtype;
	}
	pthread_rwlock_unlock(&fs->lock);
	tfsd_handle h = { .node = n, .data_fd = -1 };
	rc = tfsd_start_write(fs, &h, false);
	if (!rc)
		rc = tfsd_stage_data(fs, &h, true);
	if (!rc)
		rc = tfsd_commit_data(fs, &h, dtype, nd, ne);
	if (!rc)
		n->typed = true;
	tfsd_handle_drop_data(&h);
	return rc;
}

/* user.tensorfs.convert on a tensor: its values requantized as that dtype, same shape. */
static int convert_tensor(tfsd_fs *fs, tfsd_node *n, const char *v)
{
	const int dtype = tfs_dtype_from_name(v);
	tfsd_handle h = { .node = n, .data_fd = -1 };
	tfs_error err = { 0 };
	int64_t ne[TFS_MAX_DIMS];
	uint32_t nd = 0;
	int rc;

	pthread_rwlock_wrlock(&fs->lock);
	rc = tfs_staging_new_data(fs->staging, &h.data_path, &err);
	pthread_rwlock_unlock(&fs->lock);
	if (rc)
		return tfsd_fail(fs, &err);
	if ((h.data_fd = open(h.data_path, O_RDWR | O_CLOEXEC)) < 0) {
		tfsd_handle_drop_data(&h);
		return -errno;
	}
	pthread_rwlock_rdlock(&fs->lock);
	if (dtype < 0) {
		rc = tfs_error_set(&err, TFS_E_INVALID, "tensors/%s: no dtype %.100s (dtype names "
				   "are upper case: Q8_0, F16, ...)", n->fname, v);
	} else if (n->deleted || n->item < 0) {
		rc = tfs_error_set(&err, TFS_E_NOTFOUND, "tensors/%s: no such tensor", n->fname);
	} else {
		const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);

		nd = t->n_dims;
		memcpy(ne, t->ne, sizeof(ne));
		rc = tfs_tensor_convert(fs->model, (size_t)n->item, dtype, fs->imatrix, h.data_fd, &err);
	}
	pthread_rwlock_unlock(&fs->lock);
	if (!rc) {
		struct stat st;

		h.data_size = fstat(h.data_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
		rc = tfsd_commit_data(fs, &h, dtype, nd, ne);
	} else {
		rc = tfsd_fail(fs, &err);
	}
	tfsd_handle_drop_data(&h);
	return rc;
}

void tfsd_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		      size_t size, int flags)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	char v[256];
	int rc;
	if (!fs->opts.rw) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (size >= sizeof(v)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(v, value, size);
	v[size] = '\0';
	if (size && v[size - 1] == '\n')
		v[size - 1] = '\0';

	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *n = tfsd_live_node(fs, ino);
	pthread_rwlock_unlock(&fs->lock);
	bool is_dtype = strcmp(name, "user.tensorfs.dtype") == 0;
	if (!n) {
		rc = -ENOENT;
	} else if (n->kind == N_SCRATCH || (n->kind == N_RAW && n->item < 0)) {
		/* not in the model yet: remembered for when it is */
		pthread_rwlock_wrlock(&fs->lock);
		rc = n->kind == N_SCRATCH || n->kind == N_RAW ? declare_type(n, name, v) : -ESTALE;
		pthread_rwlock_unlock(&fs->lock);
	} else if (n->kind == N_KEY && strcmp(name, "user.tensorfs.type") == 0) {
		rc = retype_key(fs, n, v);
	} else if (n->kind == N_RAW && (is_dtype || strcmp(name, "user.tensorfs.shape") == 0)) {
		rc = retype_tensor(fs, n, is_dtype, v);
	} else if (n->kind == N_RAW && strcmp(name, "user.tensorfs.convert") == 0) {
		rc = convert_tensor(fs, n, v);
	} else {
		rc = strncmp(name, "user.tensorfs.", 14) == 0 ? -EACCES : -ENOTSUP;
	}
	fuse_reply_err(req, -rc);
}
