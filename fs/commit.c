/*
 * commit.c - what a handle wrote becomes a change of the model, at flush, fsync and
 * release (and at once for a setxattr that retypes or converts).
 *
 * A metadata value's text is parsed as its key's type and journaled; a tensor's or layer's
 * staged bytes are fsynced and journaled in the staging directory with their dtype and
 * shape (kept, declared with setxattr, or a new tensor's default).  Each change is durable
 * before close returns; bytes the same as the model's are no change.
 */
#include "fs.h"
#include "ops.h"
#include "tree.h"
#include "write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Default dtype and shape of a new tensor of nbytes bytes: F32 [n/4] when it divides, else
 * bytes (U8 in safetensors, I8 in GGUF, which has no U8: tfs_model_bytes_dtype). */
static void default_type(tfsd_fs *fs, uint64_t nbytes, int *dtype, uint32_t *nd, int64_t *ne)
{
	*nd = 1;
	if (nbytes % 4 == 0) {
		*dtype = TFS_DT_F32;
		ne[0] = (int64_t)(nbytes / 4);
	} else {
		*dtype = tfs_model_bytes_dtype(fs->model);
		ne[0] = (int64_t)nbytes;
	}
}

/*
 * The dtype and shape for size bytes written as tensor node n: what was declared with
 * setxattr on it; else those of tensor item (kept; a vector may change length); else a new
 * tensor's default.
 */
void tfsd_tensor_spec(tfsd_fs *fs, const tfsd_node *n, long item, uint64_t size, int *dtype,
		      uint32_t *nd, int64_t *ne)
{
	if (n->pend_dtype >= 0 || n->pend_shape) {
		*dtype = n->pend_dtype >= 0 ? n->pend_dtype : TFS_DT_F32;
		const tfs_dtype_info *d = tfs_dtype(*dtype);
		if (n->pend_shape) {
			*nd = n->pend_ndims;
			memcpy(ne, n->pend_ne, sizeof(n->pend_ne));
		} else {
			*nd = 1;
			ne[0] = d ? (int64_t)(size / d->block_bytes * d->block_elems) : 0;
		}
	} else if (item >= 0) {
		const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)item);
		*dtype = t->dtype;
		*nd = t->n_dims;
		memcpy(ne, t->ne, sizeof(t->ne));
		const tfs_dtype_info *d = tfs_dtype(*dtype);
		if (*nd == 1 && d && t->q.mode == TFS_QMODE_NONE && size % d->block_bytes == 0)
			ne[0] = (int64_t)(size / d->block_bytes * d->block_elems);
	} else {
		default_type(fs, size, dtype, nd, ne);
	}
}

/* Whether the handle's staged bytes are its tensor's or layer's bytes as they are, with
 * nothing declared (cp of a tensor onto itself, a copy written back): then there is no
 * change to journal, and no repack for it.  fs->lock held. */
static bool unchanged_bytes(tfsd_fs *fs, const tfsd_handle *h, int dtype)
{
	const tfsd_node *n = h->node;
	uint64_t off, len;
	if (n->item < 0 || dtype >= 0 || n->pend_dtype >= 0 || n->pend_shape)
		return false;
	int32_t src = tfsd_node_bytes(fs, n, &off, &len);
	return src >= 0 && tfsd_same_bytes(h->data_fd, h->data_size,
					  tfs_model_source(fs->model, (size_t)src), off, len);
}

/* Journals the handle's staged bytes as tensor/layer n, with dtype/shape given or kept. */
int tfsd_commit_data(tfsd_fs *fs, tfsd_handle *h, int dtype, uint32_t nd, const int64_t *ne_in)
{
	tfsd_node *n = h->node;
	tfs_error err;
	int rc;
	if (h->data_fd < 0)
		return 0; /* nothing staged since the last commit */
	if (fsync(h->data_fd) < 0)
		return -errno;
	pthread_rwlock_wrlock(&fs->lock);
	if (n->deleted || unchanged_bytes(fs, h, dtype)) {
		pthread_rwlock_unlock(&fs->lock);
		if (!n->deleted)
			tfsd_handle_drop_data(h); /* the same bytes again: nothing to journal */
		return 0;
	}
	tfs_buf name = { 0 };
	if (n->item >= 0)
		rc = tfs_buf_printf(&name, "%s", n->kind == N_RAW
					? tfs_model_tensor(fs->model, (size_t)n->item)->name
					: tfs_model_extra(fs->model, (size_t)n->item)->name);
	else
		rc = tfs_name_decode(&name, n->fname);
	if (rc) {
		pthread_rwlock_unlock(&fs->lock);
		tfs_buf_free(&name);
		return -EINVAL;
	}
	if (n->kind == N_EXTRA) {
		rc = tfs_staging_set_extra(fs->staging, fs->model, name.data, h->data_path, &err);
		if (!rc && n->item < 0) {
			tfsd_tree_unindex(fs, n);
			n->item = tfs_model_find_extra(fs->model, name.data);
			tfsd_tree_index(fs, n);
		}
	} else {
		int64_t ne[TFS_MAX_DIMS];
		if (dtype < 0) {
			tfsd_tensor_spec(fs, n, n->item, h->data_size, &dtype, &nd, ne);
		} else {
			memcpy(ne, ne_in, sizeof(ne));
		}
		rc = tfs_staging_set_tensor(fs->staging, fs->model, name.data, dtype, nd, ne,
					    h->data_path, &err);
		if (!rc && n->item < 0) {
			tfsd_tree_unindex(fs, n);
			n->item = tfs_model_find_tensor(fs->model, name.data);
			tfsd_tree_index(fs, n);
			if (n->item >= 0 && tfsd_tree_add_tensor(fs, n->item, false))
				rc = TFS_E_NOMEM;
		}
	}
	if (!rc) {
		fs->gen++;
		n->ver++; /* new bytes, a new inode (tfsd_node_ino) */
		n->pend_dtype = -1; /* declared once: from now on the tensor's own */
		n->pend_shape = false;
	}
	pthread_rwlock_unlock(&fs->lock);
	tfs_buf_free(&name);
	if (rc)
		return tfsd_fail(fs, &err);
	/* the file is the journal's now: never written again through this handle */
	close(h->data_fd);
	h->data_fd = -1;
	free(h->data_path);
	h->data_path = NULL;
	return 0;
}

/* Parses and journals the handle's text as the new value of key node n. */
int tfsd_commit_text(tfsd_fs *fs, tfsd_handle *h, const char *type_name)
{
	tfsd_node *n = h->node;
	tfs_error err;
	tfs_buf tn = { 0 };
	uint8_t *data = NULL;
	uint64_t len;
	uint32_t type;
	int rc;

	pthread_rwlock_wrlock(&fs->lock);
	if (n->deleted || n->item < 0) {
		pthread_rwlock_unlock(&fs->lock);
		return 0;
	}
	const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)n->item);
	if (!type_name) {
		if (tfs_value_type_name(&tn, kv->type, kv->data, kv->len)) {
			pthread_rwlock_unlock(&fs->lock);
			tfs_buf_free(&tn);
			return -EIO;
		}
		type_name = tn.data;
	}
	rc = tfs_value_parse(&data, &len, &type, type_name, h->text.data ? h->text.data : "",
			     h->text.len, &err);
	if (!rc && type == kv->type && len == kv->len && memcmp(data, kv->data, len) == 0) {
		free(data); /* the same value: nothing to record */
	} else if (!rc) {
		char *key = strdup(kv->name);
		rc = key ? tfs_staging_set_kv(fs->staging, fs->model, key, type, data, len, &err)
			 : tfs_error_set(&err, TFS_E_NOMEM, "out of memory");
		free(key);
		free(data);
		if (!rc)
			fs->gen++;
	} else {
		char msg[TFS_ERRMSG_MAX];
		snprintf(msg, sizeof(msg), "metadata/%.200s: %.800s", n->fname, err.msg);
		snprintf(err.msg, sizeof(err.msg), "%s", msg);
	}
	pthread_rwlock_unlock(&fs->lock);
	tfs_buf_free(&tn);
	return rc ? tfsd_fail(fs, &err) : 0;
}

/* Whether an empty text is a value of key node n's type (a string is; a number is not). */
static bool empty_is_value(tfsd_fs *fs, const tfsd_node *n)
{
	tfs_error err;
	uint8_t *d = NULL;
	uint64_t l;
	uint32_t t;
	tfs_buf tn = { 0 };
	pthread_rwlock_rdlock(&fs->lock);
	const tfs_kv *kv = n->item >= 0 ? tfs_model_kv(fs->model, (size_t)n->item) : NULL;
	bool bad = !kv || tfs_value_type_name(&tn, kv->type, kv->data, kv->len) ||
		   tfs_value_parse(&d, &l, &t, tn.data, "", 0, &err);
	pthread_rwlock_unlock(&fs->lock);
	free(d);
	tfs_buf_free(&tn);
	return !bad;
}

int tfsd_handle_commit(tfsd_fs *fs, tfsd_handle *h)
{
	if (h->scratch)
		return 0;
	if (h->failed && h->error)
		return h->error;
	if (!h->writing || !h->dirty)
		return 0;
	if ((h->node->kind == N_EXTRA || h->node->kind == N_RAW) && !h->wrote)
		return 0; /* truncated at open, nothing written yet (a shell's dup2 flushes here):
			   * release commits an empty file if nothing comes; committing it now
			   * would replace a layer whose new bytes are then refused */
	/* a key's flush between open(O_TRUNC) and the first write (a shell's dup2 does this):
	 * an empty string is a value, anything else is still to come */
	if (h->node->kind == N_KEY && !h->wrote && !empty_is_value(fs, h->node))
		return 0;
	h->dirty = false;
	if (h->node->kind == N_KEY)
		return tfsd_commit_text(fs, h, NULL);
	if (h->node->kind == N_F32 || h->node->kind == N_NPY)
		return tfsd_numbers_commit(fs, h);
	return tfsd_commit_data(fs, h, -1, 0, NULL);
}

void tfsd_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tfsd_handle *h = (tfsd_handle *)(uintptr_t)fi->fh;
	fuse_reply_err(req, -tfsd_handle_commit(fuse_req_userdata(req), h));
}

void tfsd_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	tfsd_handle *h = (tfsd_handle *)(uintptr_t)fi->fh;
	fuse_reply_err(req, -tfsd_handle_commit(fuse_req_userdata(req), h));
}
