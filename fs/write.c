/*
 * write.c - a handle writing a file of a writable mount (-o rw): opening it for writing,
 * write(), truncate() and the O_TRUNC of an open.
 *
 * Nothing here touches the source: a metadata value's text is gathered in the handle; a
 * tensor's or layer's new bytes are written into a staging data file of the handle's own.
 * commit.c turns either into a journaled change at close.
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

#define MAX_VALUE_TEXT (256u << 20)  /* a metadata value written through the mount */

/*
 * Gives h a staged data file of its own (nothing when it has one): empty, or with copy
 * the node's current bytes.  A file a commit handed to the journal is never written again
 * (its bytes are what was journaled, and the model maps it), so after a commit the next
 * write lands here and starts a new file.
 */
int tfsd_stage_data(tfsd_fs *fs, tfsd_handle *h, bool copy)
{
	tfsd_node *n = h->node;
	tfs_error err;
	uint64_t off = 0, len = 0;
	tfs_source *held = NULL;
	int rc, e = 0;
	const bool view = n->kind == N_F32 || n->kind == N_NPY;
	if (h->data_fd >= 0)
		return 0;
	pthread_rwlock_wrlock(&fs->lock);
	rc = tfs_staging_new_data(fs->staging, &h->data_path, &err);
	if (!rc && copy && !view && !n->deleted && n->item >= 0) {
		int32_t src = tfsd_node_bytes(fs, n, &off, &len);
		/* a copy of the source, taken under the lock: a commit may close a superseded
		 * source (and any kind: a remote file is read through its block cache) */
		if (len && tfs_source_held_new(&held, tfs_model_source(fs->model, (size_t)src),
					       &err))
			e = tfsd_fail(fs, &err);
	}
	pthread_rwlock_unlock(&fs->lock);
	if (rc)
		return tfsd_fail(fs, &err);
	if (!e && (h->data_fd = open(h->data_path, O_RDWR | O_CLOEXEC)) < 0)
		e = -errno;
	if (!e && held && tfs_source_copy_out(h->data_fd, h->data_path, held, off, len, &err))
		e = tfsd_fail(fs, &err);
	tfs_source_held_free(held);
	rc = e;
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
	return trunc ? tfsd_stage_data(fs, h, false) : 0;
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

/* After a write that failed part-way or was refused (rc, a -errno): nothing of this handle
 * is committed. */
static int refuse(tfsd_handle *h, int rc)
{
	h->dirty = false;
	h->failed = true;
	return rc;
}

/* A scratch file is written in place. */
static int write_scratch(tfsd_fs *fs, tfsd_handle *h, const char *buf, size_t size, off_t off)
{
	pthread_rwlock_rdlock(&fs->lock);
	/* renamed onto an item since: its bytes were taken at the rename */
	int rc = h->node->kind != N_SCRATCH || h->node->deleted
		 ? -ESTALE : tfsd_pwrite(h->node->scratch_fd, h->node->scratch_path, (uint64_t)off,
					 buf, size);
	pthread_rwlock_unlock(&fs->lock);
	return rc;
}

/* A value's text is gathered in the handle; a bad scalar is refused at once (shells ignore
 * errors from close, and a number or a bool arrives in one write). */
static int write_text(tfsd_fs *fs, tfsd_handle *h, const char *buf, size_t size, off_t off)
{
	uint64_t end = (uint64_t)off + size;
	if (end > MAX_VALUE_TEXT)
		return refuse(h, -EFBIG); /* nothing of a value cut short is committed */
	if (end > h->text.len) {
		if (tfs_buf_reserve(&h->text, end - h->text.len))
			return -ENOMEM;
		memset(h->text.data + h->text.len, 0, end - h->text.len);
		h->text.len = end;
		h->text.data[end] = '\0';
	}
	memcpy(h->text.data + off, buf, size);
	int rc = check_scalar_text(fs, h);
	return rc ? refuse(h, rc) : 0;
}

/* A tensor's or layer's bytes go to the handle's staged copy. */
static int write_data(tfsd_fs *fs, tfsd_handle *h, const char *buf, size_t size, off_t off)
{
	int rc = tfsd_stage_data(fs, h, true);
	if (rc)
		return rc;
	/* a full disk (or any error) part-way: the bytes are incomplete, so nothing of this
	 * handle is committed, and close() reports it too */
	if ((h->error = tfsd_pwrite(h->data_fd, h->data_path, (uint64_t)off, buf, size)))
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
	int rc;
	if (!h->writing) {
		rc = -EBADF;
	} else if (h->failed) { /* a value refused by an earlier write stays refused */
		rc = h->error ? h->error : -EINVAL;
	} else if (h->scratch) {
		rc = write_scratch(fs, h, buf, size, off);
	} else {
		rc = h->node->kind == N_KEY ? write_text(fs, h, buf, size, off)
					    : write_data(fs, h, buf, size, off);
		if (!rc) {
			h->dirty = true;
			h->wrote = true;
		}
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
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
		rc = tfsd_stage_data(fs, h, size != 0);
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
	rc = tfsd_stage_data(fs, h, false);
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
