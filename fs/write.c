/*
 * write.c - the handlers of a writable mount (-o rw).
 *
 * Nothing here touches the source: a metadata value is parsed at close and
 * journaled in the staging directory; a tensor's or layer's new bytes are
 * written into a staging data file and journaled at close.  Each change is
 * durable (fsynced, journaled) before close returns.
 */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_VALUE_TEXT (256u << 20)  /* a metadata value written through the mount */



void tfsd_handle_free(tfsd_handle *h)
{
	if (!h)
		return;
	tfs_buf_free(&h->text);
	tfsd_handle_drop_data(h);
	if (h->snap)
		close(h->snap_fd);
	free(h);
}

/*
 * Gives h a staged data file of its own (nothing when it has one): empty, or with copy
 * the node's current bytes.  A file a commit handed to the journal is never written again
 * (its bytes are what was journaled, and the model maps it), so after a commit the next
 * write lands here and starts a new file.
 */
static int stage_data(tfsd_fs *fs, tfsd_handle *h, bool copy)
{
	tfsd_node *n = h->node;
	tfs_error err;
	uint64_t off = 0, len = 0;
	int sfd = -1, rc, e = 0;
	const bool view = n->kind == N_F32 || n->kind == N_NPY;
	if (h->data_fd >= 0)
		return 0;
	pthread_rwlock_wrlock(&fs->lock);
	rc = tfs_staging_new_data(fs->staging, &h->data_path, &err);
	if (!rc && copy && !view && !n->deleted && n->item >= 0) {
		int32_t src = tfsd_node_bytes(fs, n, &off, &len);
		/* a copy of the fd, taken under the lock: a commit may close a superseded source */
		if (len && (sfd = fcntl(tfs_model_source(fs->model, (size_t)src)->fd,
					F_DUPFD_CLOEXEC, 0)) < 0)
			e = errno;
	}
	pthread_rwlock_unlock(&fs->lock);
	if (rc)
		return tfsd_fail(fs, &err);
	if (!e && (h->data_fd = open(h->data_path, O_RDWR | O_CLOEXEC)) < 0)
		e = errno;
	rc = e ? -e : sfd >= 0 ? tfsd_copy_range(h->data_fd, sfd, off, len) : 0;
	if (sfd >= 0)
		close(sfd);
	h->data_size = len;
	if (!rc && copy && view)
		rc = tfsd_numbers_copy(fs, h);   /* the values (or .npy file) as the view shows them */
	if (rc) {
		tfsd_handle_drop_data(h);
		return rc;
	}
	return 0;
}

int tfsd_start_write(tfsd_fs *fs, tfsd_handle *h, bool trunc)
{
	tfsd_node *n = h->node;
	int rc = 0;
	h->writing = true;
	h->dirty = trunc;
	if (n->kind == N_SCRATCH) {
		h->scratch = true;
		h->dirty = false; /* written in place: nothing to commit */
		pthread_rwlock_rdlock(&fs->lock);
		if (trunc && n->kind == N_SCRATCH && ftruncate(n->scratch_fd, 0) < 0)
			rc = -errno;
		pthread_rwlock_unlock(&fs->lock);
		return rc;
	}
	if (n->kind == N_KEY) {
		if (trunc) {
			if (tfs_buf_reserve(&h->text, 0))
				return -ENOMEM;
			return 0;
		}
		pthread_rwlock_rdlock(&fs->lock);
		rc = tfsd_node_text(fs, n, &h->text);
		pthread_rwlock_unlock(&fs->lock);
		return rc;
	}
	if (n->kind == N_F32 || n->kind == N_NPY) {
		int rc2 = tfsd_numbers_start(fs, h);

		if (rc2)
			return rc2;
	} else if (n->kind != N_RAW && n->kind != N_EXTRA) {
		return -EACCES;
	}
	/* a partial update copies the current bytes at its first write: an open(O_RDWR) that
	 * only reads copies nothing */
	return trunc ? stage_data(fs, h, false) : 0;
}

/* For keys of a scalar type other than string: parses the text written so far;
 * -EINVAL (logged) when it is not a value of that type. */
static int check_scalar_text(tfsd_fs *fs, tfsd_handle *h)
{
	tfsd_node *n = h->node;
	tfs_error err;
	uint8_t *data = NULL;
	uint64_t len;
	uint32_t type;
	char tn[32] = "";
	if (h->text.len > 4096)
		return 0;
	pthread_rwlock_rdlock(&fs->lock);
	if (!n->deleted && n->item >= 0) {
		const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)n->item);
		if (kv->type != TFS_GGUF_STRING && kv->type != TFS_GGUF_ARRAY) {
			tfs_buf b = { 0 };
			if (tfs_value_type_name(&b, kv->type, kv->data, kv->len) == 0)
				snprintf(tn, sizeof(tn), "%s", b.data);
			tfs_buf_free(&b);
		}
	}
	pthread_rwlock_unlock(&fs->lock);
	if (!tn[0])
		return 0;
	int rc = tfs_value_parse(&data, &len, &type, tn, h->text.data, h->text.len, &err);
	free(data);
	if (!rc)
		return 0;
	char msg[TFS_ERRMSG_MAX];
	snprintf(msg, sizeof(msg), "metadata/%.200s: %.800s", n->fname, err.msg);
	snprintf(err.msg, sizeof(err.msg), "%s", msg);
	return tfsd_fail(fs, &err);
}

/* pwrite()s all of buf at off; 0 or an errno (a short write is a full disk). */
static int pwrite_all(int fd, const char *buf, size_t size, off_t off)
{
	size_t done = 0;
	while (done < size) {
		ssize_t r = pwrite(fd, buf + done, size - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : ENOSPC;
		done += (size_t)r;
	}
	return 0;
}

/* After a write that failed part-way or was refused: nothing of this handle is committed. */
static int refuse(tfsd_handle *h, int e)
{
	h->dirty = false;
	h->failed = true;
	return e;
}

/* A scratch file is written in place; 0 or an errno. */
static int write_scratch(tfsd_fs *fs, tfsd_handle *h, const char *buf, size_t size, off_t off)
{
	pthread_rwlock_rdlock(&fs->lock);
	/* renamed onto an item since: its bytes were taken at the rename */
	int e = h->node->kind != N_SCRATCH || h->node->deleted
		? ESTALE : pwrite_all(h->node->scratch_fd, buf, size, off);
	pthread_rwlock_unlock(&fs->lock);
	return e;
}

/* A value's text is gathered in the handle; a bad scalar is refused at once (shells ignore
 * errors from close, and a number or a bool arrives in one write).  0 or an errno. */
static int write_text(tfsd_fs *fs, tfsd_handle *h, const char *buf, size_t size, off_t off)
{
	uint64_t end = (uint64_t)off + size;
	if (end > MAX_VALUE_TEXT)
		return refuse(h, EFBIG); /* nothing of a value cut short is committed */
	if (end > h->text.len) {
		if (tfs_buf_reserve(&h->text, end - h->text.len))
			return ENOMEM;
		memset(h->text.data + h->text.len, 0, end - h->text.len);
		h->text.len = end;
		h->text.data[end] = '\0';
	}
	memcpy(h->text.data + off, buf, size);
	int rc = check_scalar_text(fs, h);
	return rc ? refuse(h, -rc) : 0;
}


/* A tensor's or layer's bytes go to the handle's staged copy.  0 or an errno. */
static int write_data(tfsd_fs *fs, tfsd_handle *h, const char *buf, size_t size, off_t off)
{
	int rc = stage_data(fs, h, true);
	if (rc)
		return -rc;
	/* a full disk (or any error) part-way: the bytes are incomplete, so nothing of this
	 * handle is committed, and close() reports it too */
	if ((h->error = pwrite_all(h->data_fd, buf, size, off)))
		return refuse(h, h->error);
	if ((uint64_t)off + size > h->data_size)
		h->data_size = (uint64_t)off + size;
	return 0;
}

void tfsd_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_handle *h = (tfsd_handle *)(uintptr_t)fi->fh;
	int e;
	if (!h->writing) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (h->failed) { /* a value refused by an earlier write stays refused */
		fuse_reply_err(req, h->error ? h->error : EINVAL);
		return;
	}
	if (h->scratch) {
		e = write_scratch(fs, h, buf, size, off);
	} else {
		e = h->node->kind == N_KEY ? write_text(fs, h, buf, size, off)
					   : write_data(fs, h, buf, size, off);
		if (!e) {
			h->dirty = true;
			h->wrote = true;
		}
	}
	if (e)
		fuse_reply_err(req, e);
	else
		fuse_reply_write(req, size);
}

/* Default dtype and shape of a new tensor of nbytes bytes: F32 [n/4] when it divides, else
 * bytes (U8 in safetensors, I8 in GGUF, which has no U8). */
static void default_type(tfsd_fs *fs, uint64_t nbytes, int *dtype, uint32_t *nd, int64_t *ne)
{
	bool gguf = tfs_model_format(fs->model) != TFS_FMT_SAFETENSORS;
	*nd = 1;
	if (nbytes % 4 == 0) {
		*dtype = TFS_DT_F32;
		ne[0] = (int64_t)(nbytes / 4);
	} else {
		*dtype = gguf ? TFS_DT_I8 : TFS_DT_U8;
		ne[0] = (int64_t)nbytes;
	}
}

/*
 * The dtype and shape for size bytes written as tensor node n: what was declared with
 * setxattr on it; else those of tensor item (kept; a vector may change length); else a new
 * tensor's default.
 */
static void tensor_spec(tfsd_fs *fs, const tfsd_node *n, long item, uint64_t size, int *dtype,
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
static int commit_data(tfsd_fs *fs, tfsd_handle *h, int dtype, uint32_t nd, const int64_t *ne_in)
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
			tensor_spec(fs, n, n->item, h->data_size, &dtype, &nd, ne);
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
static int commit_text(tfsd_fs *fs, tfsd_handle *h, const char *type_name)
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

int tfsd_handle_commit(tfsd_fs *fs, tfsd_handle *h)
{
	if (h->scratch)
		return 0;
	if (h->failed && h->error)
		return -h->error;
	if (!h->writing || !h->dirty)
		return 0;
	if ((h->node->kind == N_EXTRA || h->node->kind == N_RAW) && !h->wrote)
		return 0; /* truncated at open, nothing written yet (a shell's dup2 flushes here):
			   * release commits an empty file if nothing comes; committing it now
			   * would replace a layer whose new bytes are then refused */
	if (h->node->kind == N_KEY && !h->wrote) {
		/* a flush between open(O_TRUNC) and the first write (a shell's dup2 does this):
		 * an empty string is a value, anything else is still to come */
		tfs_error err;
		uint8_t *d = NULL;
		uint64_t l;
		uint32_t t;
		tfs_buf tn = { 0 };
		pthread_rwlock_rdlock(&fs->lock);
		const tfs_kv *kv = h->node->item >= 0 ? tfs_model_kv(fs->model, (size_t)h->node->item) : NULL;
		int bad = !kv || tfs_value_type_name(&tn, kv->type, kv->data, kv->len) ||
			  tfs_value_parse(&d, &l, &t, tn.data, "", 0, &err);
		pthread_rwlock_unlock(&fs->lock);
		free(d);
		tfs_buf_free(&tn);
		if (bad)
			return 0;
	}
	h->dirty = false;
	if (h->node->kind == N_KEY)
		return commit_text(fs, h, NULL);
	if (h->node->kind == N_F32 || h->node->kind == N_NPY)
		return tfsd_numbers_commit(fs, h);
	return commit_data(fs, h, -1, 0, NULL);
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

/* truncate()/ftruncate() of node n to size, through handle h (fi) or a temporary one
 * committed at once (truncate by path). */
static int truncate_node(tfsd_fs *fs, tfsd_node *n, tfsd_handle *fh, uint64_t size)
{
	/* truncate by path: a whole change, committed (or refused) at once */
	tfsd_handle tmp = { .node = n, .data_fd = -1, .wrote = true };
	tfsd_handle *h = fh ? fh : &tmp;
	if (fh)
		fh->wrote = true; /* ftruncate() is content: the next flush commits it */
	int rc = 0;
	if (n->kind == N_SCRATCH || h->scratch) {
		pthread_rwlock_rdlock(&fs->lock);
		rc = n->kind != N_SCRATCH ? -ESTALE
		     : ftruncate(n->scratch_fd, (off_t)size) < 0 ? -errno : 0;
		pthread_rwlock_unlock(&fs->lock);
		return rc;
	}
	if (!h->writing)
		rc = tfsd_start_write(fs, h, size == 0);
	if (!rc && n->kind != N_KEY)
		rc = stage_data(fs, h, size != 0);
	if (!rc && n->kind == N_KEY) {
		if (size > MAX_VALUE_TEXT)
			rc = -EFBIG;
		else if (size > h->text.len && tfs_buf_reserve(&h->text, size - h->text.len))
			rc = -ENOMEM;
		else if (size > h->text.len)
			memset(h->text.data + h->text.len, 0, size - h->text.len);
		if (!rc) {
			h->text.len = size;
			h->text.data[size] = '\0';
		}
	} else if (!rc && ftruncate(h->data_fd, (off_t)size) < 0) {
		rc = -errno;
	} else if (!rc) {
		h->data_size = size;
	}
	h->dirty = true;
	if (!rc && h == &tmp)
		rc = tfsd_handle_commit(fs, h);
	if (h == &tmp) {
		tfs_buf_free(&tmp.text);
		tfsd_handle_drop_data(&tmp);
	}
	return rc;
}

/* The handle an open(O_TRUNC) of n by thread tid truncates, taken off the node (NULL: not
 * one).  Without FUSE_CAP_ATOMIC_O_TRUNC the kernel opens without O_TRUNC, then sends the
 * truncation as a setattr(size 0) without a handle, from the opening thread; an
 * ftruncate() comes with its handle, a truncate() by path from no fresh opener. */
static tfsd_handle *opening_handle(tfsd_fs *fs, tfsd_node *n, pid_t tid)
{
	pthread_mutex_lock(&fs->cache_lock);
	tfsd_handle *h = n->opener;
	if (h && n->opener_tid == tid && h->writing && !h->wrote && !h->dirty)
		n->opener = NULL;
	else
		h = NULL;
	pthread_mutex_unlock(&fs->cache_lock);
	return h;
}

/* An open's O_TRUNC through handle h: staged as tfsd_start_write stages one, nothing written
 * yet (a flush before the first write commits nothing; the release does). */
static int truncate_at_open(tfsd_fs *fs, tfsd_handle *h)
{
	int rc = 0;
	h->dirty = true;
	if (h->node->kind == N_KEY) {
		h->text.len = 0;
		if (tfs_buf_reserve(&h->text, 0))
			return -ENOMEM;
		h->text.data[0] = '\0';
		return 0;
	}
	rc = stage_data(fs, h, false);
	if (!rc && ftruncate(h->data_fd, 0) < 0)
		rc = -errno;
	if (!rc)
		h->data_size = 0;
	return rc;
}

/*
 * The size a setattr reply carries, which the kernel takes as the file's size for every
 * handle: the committed one, except for a handle writing through the page cache (not
 * direct), whose own pages must match what it wrote.  A direct_io writer's truncation or
 * new size shows after its commit, so that readers meanwhile see the old file whole.
 */
static void reply_size(tfsd_node *n, const tfsd_handle *h, struct stat *st)
{
	if (h && h->writing && !h->direct && h->data_fd >= 0 && n->kind != N_KEY)
		st->st_size = (off_t)h->data_size; /* what this handle has written */
}

void tfsd_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		    struct fuse_file_info *fi)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_handle *fh = fi ? (tfsd_handle *)(uintptr_t)fi->fh : NULL;
	struct stat st;
	int rc = 0;
	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *n = tfsd_live_node(fs, ino);
	bool writable = n && tfsd_writable_node(fs, n);
	pthread_rwlock_unlock(&fs->lock);
	bool size = (to_set & FUSE_SET_ATTR_SIZE) != 0;
	tfsd_handle *oh = n && size && !fh && writable && fs->opts.rw && attr->st_size == 0
			 ? opening_handle(fs, n, fuse_req_ctx(req)->pid) : NULL;
	if (!n)
		rc = -ENOENT;
	else if (size && !fs->opts.rw)
		rc = -EROFS;
	else if (size && !writable)
		rc = -EACCES;
	else if (oh)
		rc = truncate_at_open(fs, oh);
	else if (size)
		rc = truncate_node(fs, n, fh, (uint64_t)attr->st_size);
	/* other attributes (mode, owner, times) are the mount's: accepted, not changed */
	if (!rc) {
		pthread_rwlock_rdlock(&fs->lock);
		rc = tfsd_node_attr(fs, n, &st);
		pthread_rwlock_unlock(&fs->lock);
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	reply_size(n, oh ? oh : fh, &st);
	st.st_ino = (ino_t)ino; /* the inode asked about, of whichever version */
	fuse_reply_attr(req, &st, fs->timeout);
}

/* The parent directory node of a change, checked writable. */
static int change_dir(tfsd_fs *fs, fuse_ino_t parent, tfsd_node **out)
{
	tfsd_node *p = tfsd_live_node(fs, parent);
	if (!p)
		return ENOENT;
	if (p->kind != N_DIR)
		return ENOTDIR;
	if (!fs->opts.rw)
		return EROFS;
	if (!tfsd_writable_dir(fs, p->dir))
		return EACCES;
	*out = p;
	return 0;
}

/* The node a create makes for name in directory d (fs->lock held for writing): the item of
 * that name when the model still has it unlisted (renamed to a scratch name by an editor:
 * it is written again, keeping its type); a scratch file; a new key (an empty string until
 * written); or a new tensor or layer (in the model once its bytes are closed). */
static int create_node(tfsd_fs *fs, tfsd_dir d, const char *name, tfsd_node **out)
{
	static const tfsd_node_kind kinds[D_COUNT] = {
		[D_METADATA] = N_KEY, [D_TENSORS] = N_RAW, [D_LAYERS] = N_EXTRA,
	};
	tfs_error err;
	tfs_buf key = { 0 };
	long item = tfsd_dir_item(fs, d, name);
	bool scratch = item < 0 && tfsd_scratch_name(fs, d, name);
	int rc = 0;
	if (tfs_name_decode(&key, name) || strlen(name) > 255)
		rc = EINVAL;
	if (!rc && item < 0 && !scratch && d == D_METADATA) {
		uint8_t *empty = calloc(1, 8);
		rc = empty ? tfs_staging_set_kv(fs->staging, fs->model, key.data, TFS_GGUF_STRING,
						empty, 8, &err) : 0;
		/* (a tfs_code is negative; the reply wants a positive errno) */
		rc = !empty ? ENOMEM : rc ? -tfsd_fail(fs, &err) : 0;
		free(empty);
		item = rc ? -1 : tfs_model_find_kv(fs->model, key.data);
	}
	tfs_buf_free(&key);
	if (rc)
		return rc;
	fuse_ino_t ino = tfsd_tree_add(fs, kinds[d], d, item, name);
	tfsd_node *n = ino ? tfsd_tree_get(fs, ino) : NULL;
	if (!n)
		return ENOMEM;
	if (scratch && (rc = -tfsd_scratch_make(fs, n, false))) {
		tfsd_tree_unlink(fs, n);
		return rc;
	}
	*out = n;
	return 0;
}

void tfsd_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		   struct fuse_file_info *fi)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_node *p, *n = NULL;
	int rc;

	pthread_rwlock_wrlock(&fs->lock);
	rc = change_dir(fs, parent, &p);
	if (!rc && tfsd_tree_find(fs, p->dir, name))
		rc = EEXIST;
	if (!rc)
		rc = create_node(fs, p->dir, name, &n);
	if (!rc)
		fs->gen++;
	pthread_rwlock_unlock(&fs->lock);

	tfsd_handle *h = NULL;
	if (!rc && !(h = calloc(1, sizeof(*h))))
		rc = ENOMEM;
	if (!rc) {
		h->node = n;
		h->data_fd = -1;
		rc = -tfsd_start_write(fs, h, true);
		h->dirty = false; /* an empty new tensor is only recorded once written */
	}
	if (rc) {
		tfsd_handle_free(h);
		fuse_reply_err(req, rc);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = tfsd_node_ino(n);
	e.attr.st_ino = e.ino;
	e.attr.st_mode = S_IFREG | 0644;
	e.attr.st_nlink = 1;
	e.attr.st_uid = fs->uid;
	e.attr.st_gid = fs->gid;
	e.attr_timeout = e.entry_timeout = fs->timeout;
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 0;
	__atomic_add_fetch(&n->nlookup, 1, __ATOMIC_RELAXED);
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		tfsd_handle_free(h);
}

/* Takes tensor item's f32/ and npy/ entries out of the tree. */
static void unlink_views(tfsd_fs *fs, long item)
{
	for (size_t k = 0; item >= 0 && k < fs->n_nodes; k++) {
		tfsd_node *v = fs->nodes[k];
		if (v && !v->deleted && v->item == item && (v->kind == N_F32 || v->kind == N_NPY))
			tfsd_tree_unlink(fs, v);
	}
}

/* Renames tensor item's f32/ and npy/ entries after its tensors/ entry's new name. */
static void rename_views(tfsd_fs *fs, long item, const char *newname)
{
	for (size_t k = 0; item >= 0 && k < fs->n_nodes; k++) {
		tfsd_node *v = fs->nodes[k];
		if (!v || v->deleted || v->item != item)
			continue;
		if (v->kind == N_F32) {
			tfsd_tree_rename(fs, v, newname);
		} else if (v->kind == N_NPY) {
			tfs_buf npy = { 0 };
			if (tfs_buf_printf(&npy, "%s.npy", newname) == 0)
				tfsd_tree_rename(fs, v, npy.data);
			tfs_buf_free(&npy);
		}
	}
}

/* The model name of item in directory d (borrowed). */
static const char *item_name(tfsd_fs *fs, tfsd_dir d, long item)
{
	return d == D_METADATA  ? tfs_model_kv(fs->model, (size_t)item)->name
	       : d == D_TENSORS ? tfs_model_tensor(fs->model, (size_t)item)->name
				: tfs_model_extra(fs->model, (size_t)item)->name;
}

/* Deletes item of directory d from the model (journaled). */
static int delete_item(tfsd_fs *fs, tfsd_dir d, long item, tfs_error *err)
{
	const char *name = item_name(fs, d, item);
	return d == D_METADATA  ? tfs_staging_del_kv(fs->staging, fs->model, name, err)
	       : d == D_TENSORS ? tfs_staging_del_tensor(fs->staging, fs->model, name, err)
				: tfs_staging_del_extra(fs->staging, fs->model, name, err);
}

/*
 * Removes node n.  A scratch file made by renaming an item away (`mv x x~`) takes the
 * item with it when nothing was written under the item's name since (`rm x~`); an
 * editor that saved a new x in between keeps it.
 */
static int remove_node(tfsd_fs *fs, tfsd_node *n, tfs_error *err)
{
	long item = n->kind == N_SCRATCH ? n->origin : n->item;
	bool del = item >= 0 && (n->kind != N_SCRATCH || !tfsd_item_node(fs, n->dir, item));
	int rc = del ? delete_item(fs, n->dir, item, err) : 0;
	if (rc)
		return rc;
	if (del && n->dir == D_TENSORS)
		unlink_views(fs, item);
	tfsd_tree_unlink(fs, n);
	fs->gen++;
	return 0;
}

void tfsd_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_node *p, *n = NULL;
	tfs_error err;
	pthread_rwlock_wrlock(&fs->lock);
	int rc = change_dir(fs, parent, &p);
	if (!rc && !(n = tfsd_tree_find(fs, p->dir, name)))
		rc = ENOENT;
	if (!rc && remove_node(fs, n, &err))
		rc = -tfsd_fail(fs, &err);
	pthread_rwlock_unlock(&fs->lock);
	fuse_reply_err(req, rc);
}

/* ==== rename: a new name, a scratch name, or onto an existing item ==== */

/* "<dir>/<file>: <msg>" into err as code. */
static int fail_at(tfs_error *err, int code, const tfsd_node *n, const char *fname, const char *msg)
{
	static const char *const dn[D_COUNT] = { [D_METADATA] = "metadata", [D_TENSORS] = "tensors",
						 [D_LAYERS] = "layers" };
	char m[TFS_ERRMSG_MAX];
	snprintf(m, sizeof(m), "%s", msg);
	return tfs_error_set(err, code, "%s/%.200s: %.700s", dn[n->dir] ? dn[n->dir] : "?", fname, m);
}

/*
 * The payload of key text parsed as type_name, journaled as the new value of key `to`
 * (set, or with from: replacing to and deleting from in one op).  A value equal to to's
 * current one is no change (with no from).
 */
static int stage_key_text(tfsd_fs *fs, const tfsd_node *n, const char *from, const char *to,
			  const char *fname, const char *type_name, const char *text, size_t len,
			  tfs_error *err)
{
	uint8_t *data = NULL;
	uint64_t dlen;
	uint32_t type;
	int rc = tfs_value_parse(&data, &dlen, &type, type_name, text, len, err);
	if (rc)
		return fail_at(err, rc, n, fname, err->msg);
	long cur = tfs_model_find_kv(fs->model, to);
	const tfs_kv *kv = cur >= 0 ? tfs_model_kv(fs->model, (size_t)cur) : NULL;
	if (!from && kv && kv->type == type && kv->len == dlen && !memcmp(kv->data, data, dlen))
		rc = 0;
	else if (from)
		rc = tfs_staging_replace_kv(fs->staging, fs->model, from, to, type, data, dlen, err);
	else
		rc = tfs_staging_set_kv(fs->staging, fs->model, to, type, data, dlen, err);
	free(data);
	return rc;
}

/* The type name of key item (into b). */
static const char *kv_type_name(tfsd_fs *fs, long item, tfs_buf *b)
{
	const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)item);
	return tfs_value_type_name(b, kv->type, kv->data, kv->len) ? NULL : b->data;
}

/*
 * Scratch file n, renamed to newname, becomes item `target` (-1: a new item named `name`):
 * its bytes are parsed or checked as the target's type (as declared on n with setxattr, else
 * the target's own, else a new item's default) and journaled; n is then the item's node.
 */
static int adopt_scratch(tfsd_fs *fs, tfsd_node *n, long target, const char *name,
			 const char *newname, tfs_error *err)
{
	char fname[600];   /* errors name the file the user renamed onto, then the scratch file */
	snprintf(fname, sizeof(fname), "%.255s (renamed from %.255s)", newname, n->fname);
	tfs_buf text = { 0 }, tn = { 0 };
	char *path = NULL;
	long item = -1;
	int rc;
	if (n->dir == D_METADATA) {
		const char *type = n->pend_type ? n->pend_type
				   : target >= 0 ? kv_type_name(fs, target, &tn) : "string";
		if ((rc = -tfsd_scratch_read_all(n, &text, 256u << 20)))
			return tfs_error_sys(err, rc, "%s: reading the new value", fname);
		rc = type ? stage_key_text(fs, n, NULL, name, fname, type, text.data, text.len, err)
			  : tfs_error_set(err, TFS_E_IO, "%s: unknown type", fname);
		tfs_buf_free(&text);
		tfs_buf_free(&tn);
		if (rc)
			return rc;
		item = tfs_model_find_kv(fs->model, name);
		tfsd_scratch_drop(n);
	} else {
		struct stat st;
		if (fsync(n->scratch_fd) < 0 || fstat(n->scratch_fd, &st) < 0)
			return tfs_error_sys(err, errno, "%s", fname);
		if ((rc = tfs_staging_scratch_link(fs->staging, n->scratch_fd, n->scratch_path, &path, err)))
			return rc;
		if (n->dir == D_TENSORS) {
			int dtype;
			uint32_t nd;
			int64_t ne[TFS_MAX_DIMS];
			tensor_spec(fs, n, target, (uint64_t)st.st_size, &dtype, &nd, ne);
			rc = tfs_staging_set_tensor(fs->staging, fs->model, name, dtype, nd, ne, path, err);
			item = rc ? -1 : tfs_model_find_tensor(fs->model, name);
		} else {
			rc = tfs_staging_set_extra(fs->staging, fs->model, name, path, err);
			item = rc ? -1 : tfs_model_find_extra(fs->model, name);
		}
		if (rc) {
			/* refused: the file stays a scratch file, now by the name it was given (an
			 * unnamed file cannot be linked again once its link is gone) */
			if (!n->scratch_path)
				n->scratch_path = path;
			else
				free(path);
			return rc;
		}
		free(path);
		/* the bytes are the journal's now: the file is closed, never removed */
		close(n->scratch_fd);
		n->scratch_fd = -1;
		free(n->scratch_path);
		n->scratch_path = NULL;
		if (target < 0 && n->dir == D_TENSORS && tfsd_tree_add_tensor(fs, item, false))
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	tfsd_tree_unindex(fs, n);
	n->kind = n->dir == D_METADATA ? N_KEY : n->dir == D_TENSORS ? N_RAW : N_EXTRA;
	n->item = item;
	n->origin = -1;
	tfsd_tree_index(fs, n);
	n->pend_dtype = -1;
	n->pend_shape = false;
	return 0;
}

/* Item n (a listed key, tensor or layer) replaces item target: one journal op. */
static int replace_with_item(tfsd_fs *fs, tfsd_node *n, long target, tfs_error *err)
{
	const char *from = item_name(fs, n->dir, n->item), *to = item_name(fs, n->dir, target);
	int rc;
	if (n->dir == D_METADATA) {
		/* the value as text, read again as the target's type (unless n's was declared) */
		const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)n->item);
		if (n->typed)
			return tfs_staging_replace_kv(fs->staging, fs->model, from, to, kv->type,
						      kv->data, kv->len, err);
		tfs_buf text = { 0 }, tn = { 0 };
		const char *type = kv_type_name(fs, target, &tn);
		rc = tfs_value_format(&text, kv->type, kv->data, kv->len, err);
		if (!rc && !type)
			rc = tfs_error_set(err, TFS_E_IO, "unknown type");
		if (!rc)
			rc = stage_key_text(fs, n, from, to, n->fname, type, text.data ? text.data : "",
					    text.len, err);
		tfs_buf_free(&text);
		tfs_buf_free(&tn);
		return rc;
	}
	if (n->dir == D_LAYERS)
		return tfs_staging_replace_extra(fs->staging, fs->model, from, to, err);
	int dtype;
	uint32_t nd;
	int64_t ne[TFS_MAX_DIMS];
	const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);
	tensor_spec(fs, n, n->typed ? n->item : target, t->nbytes, &dtype, &nd, ne);
	if ((rc = tfs_staging_replace_tensor(fs->staging, fs->model, from, to, dtype, nd, ne, err)))
		return rc;
	unlink_views(fs, n->item);
	return 0;
}

/* rename(n, newname) onto the model's item target (listed as victim, or unlisted). */
static int rename_onto_item(tfsd_fs *fs, tfsd_node *n, tfsd_node *victim, long target,
			    const char *newname, tfs_error *err)
{
	int rc;
	if (n->kind == N_SCRATCH)
		rc = adopt_scratch(fs, n, target, item_name(fs, n->dir, target), newname, err);
	else if (n->item < 0)
		rc = fail_at(err, TFS_E_INVALID, n, n->fname, "nothing was written to it yet");
	else if (n->item == target)
		return 0;
	else if (!(rc = replace_with_item(fs, n, target, err))) {
		tfsd_tree_unindex(fs, n);
		n->item = target;
		tfsd_tree_index(fs, n);
	}
	if (rc)
		return rc;
	if (victim && victim != n)
		tfsd_tree_unlink(fs, victim); /* its views show the new bytes: they stay */
	return -tfsd_tree_rename(fs, n, newname) ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* rename(n, newname) to a scratch name: an item stays in the model, unlisted, and the
 * scratch file holds a copy of its bytes (an editor's backup, `vim` with backupcopy=no). */
static int rename_to_scratch(tfsd_fs *fs, tfsd_node *n, tfsd_node *victim, const char *newname,
			     tfs_error *err)
{
	int rc;
	if (n->kind != N_SCRATCH && (rc = tfsd_scratch_make(fs, n, n->item >= 0)))
		return tfs_error_sys(err, -rc, "%s: copying it to %s", n->fname, newname);
	if (victim)
		tfsd_tree_unlink(fs, victim);
	return -tfsd_tree_rename(fs, n, newname) ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* rename(n, newname) to a name the model does not have. */
static int rename_to_new(tfsd_fs *fs, tfsd_node *n, tfsd_node *victim, const char *to,
			 const char *newname, tfs_error *err)
{
	int rc = 0;
	if (victim && (rc = remove_node(fs, victim, err)))  /* a new tensor not written yet */
		return rc;
	if (n->kind == N_SCRATCH) {
		rc = adopt_scratch(fs, n, -1, to, newname, err);
	} else if (n->item >= 0 && n->dir == D_LAYERS) {
		rc = fail_at(err, TFS_E_UNSUPPORTED, n, n->fname,
			     "a layer's name is its kind and cannot be changed");
	} else if (n->item >= 0) {
		const char *from = item_name(fs, n->dir, n->item);
		rc = n->dir == D_METADATA
			? tfs_staging_rename_kv(fs->staging, fs->model, from, to, false, err)
			: tfs_staging_rename_tensor(fs->staging, fs->model, from, to, false, err);
		if (!rc && n->dir == D_TENSORS)
			rename_views(fs, n->item, newname);
	}
	if (rc)
		return rc;
	return -tfsd_tree_rename(fs, n, newname) ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

void tfsd_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		   const char *newname, unsigned int flags)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_node *p, *np, *n = NULL, *victim = NULL;
	tfs_error err;
	tfs_buf to = { 0 };
	int rc;

	pthread_rwlock_wrlock(&fs->lock);
	rc = change_dir(fs, parent, &p);
	if (!rc)
		rc = change_dir(fs, newparent, &np);
	if (!rc && p != np)
		rc = EXDEV;  /* a key cannot become a tensor */
	if (!rc && (flags & ~(unsigned)RENAME_NOREPLACE))
		rc = EINVAL;
	if (!rc && !(n = tfsd_tree_find(fs, p->dir, name)))
		rc = ENOENT;
	if (!rc && (tfs_name_decode(&to, newname) || strlen(newname) > 255))
		rc = EINVAL;
	long target = rc ? -1 : tfsd_dir_item(fs, p->dir, newname);
	if (!rc)
		victim = tfsd_tree_find(fs, p->dir, newname);
	if (!rc && victim == n)
		goto out;
	if (!rc && (victim || target >= 0) && (flags & RENAME_NOREPLACE))
		rc = EEXIST;
	if (!rc) {
		int r = target >= 0 ? rename_onto_item(fs, n, victim, target, newname, &err)
			: tfsd_scratch_name(fs, p->dir, newname)
				? rename_to_scratch(fs, n, victim, newname, &err)
				: rename_to_new(fs, n, victim, to.data, newname, &err);
		rc = r ? -tfsd_fail(fs, &err) : 0;
		fs->gen++;
	}
out:
	pthread_rwlock_unlock(&fs->lock);
	tfs_buf_free(&to);
	fuse_reply_err(req, rc);
}

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
		rc = commit_text(fs, &h, type_name);
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
		rc = stage_data(fs, &h, true);
	if (!rc)
		rc = commit_data(fs, &h, dtype, nd, ne);
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
		rc = commit_data(fs, &h, dtype, nd, ne);
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
