/*
 * util.c - what the FUSE driver's modules share: the one mapping of codec errors to a
 * negative errno, the log of refused changes, per-thread buffers, file copies and writes
 * over codec's I/O layer, freeing a handle.  It calls nothing else of fs/, and everything
 * else of fs/ calls it.
 */
#include "fs.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

/* The one place a codec error becomes an errno: a negative one (-EIO), as everything in
 * fs/ returns; 0 for TFS_OK. */
int tfsd_errno(const tfs_error *err)
{
	switch (err->code) {
	case TFS_OK: return 0;
	case TFS_E_IO: return err->sys_errno ? -err->sys_errno : -EIO;
	case TFS_E_NOMEM: return -ENOMEM;
	case TFS_E_NOTFOUND: return -ENOENT;
	case TFS_E_INVALID: return -EINVAL;
	case TFS_E_UNSUPPORTED: return -ENOTSUP;
	case TFS_E_EXISTS: return -EEXIST;
	case TFS_E_FORMAT:
	case TFS_E_DIGEST:
	default: return -EIO;
	}
}

/* The last refused change, for the root xattr user.tensorfs.last_error. */
static pthread_mutex_t last_error_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[TFS_ERRMSG_MAX];

/* Logs a failed change so the user can see why (the errno alone says little): on stderr in
 * the foreground, else to syslog, and in the root xattr user.tensorfs.last_error. */
int tfsd_fail(tfsd_fs *fs, const tfs_error *err)
{
	/* the same failure again (every read of a remote file that changed): logged once */
	pthread_mutex_lock(&last_error_lock);
	bool again = strcmp(last_error, err->msg) == 0;
	snprintf(last_error, sizeof(last_error), "%s", err->msg);
	pthread_mutex_unlock(&last_error_lock);
	if (again)
		return tfsd_errno(err);
	if (fs->opts.foreground || fs->opts.debug)
		fprintf(stderr, "tensorfs: %s\n", err->msg);
	else
		syslog(LOG_WARNING, "%s: %s", fs->opts.mountpoint ? fs->opts.mountpoint : "", err->msg);
	return tfsd_errno(err);
}

int tfsd_last_error(tfs_buf *out)
{
	pthread_mutex_lock(&last_error_lock);
	int rc = !last_error[0] ? -ENODATA : tfs_buf_printf(out, "%s", last_error) ? -ENOMEM : 0;
	pthread_mutex_unlock(&last_error_lock);
	return rc;
}

bool tfsd_writable_dir(const tfsd_fs *fs, tfsd_dir d)
{
	return fs->opts.rw && (d == D_METADATA || d == D_TENSORS || d == D_LAYERS);
}

bool tfsd_writable_node(const tfsd_fs *fs, const tfsd_node *n)
{
	/* f32/ and npy/ files take new values; their directories stay as they are */
	return n->kind != N_DIR && (tfsd_writable_dir(fs, n->dir) ||
				    (fs->opts.rw && (n->kind == N_F32 || n->kind == N_NPY)));
}

/* Per-thread scratch for dequantized values. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
typedef struct { void *p[2]; size_t cap[2]; } scratch;
static void scratch_free(void *s)
{
	free(((scratch *)s)->p[0]);
	free(((scratch *)s)->p[1]);
	free(s);
}

static void scratch_init(void) { pthread_key_create(&scratch_key, scratch_free); }
void *tfsd_thread_buf(int slot, size_t n)
{
	pthread_once(&scratch_once, scratch_init);
	scratch *s = pthread_getspecific(scratch_key);
	if (!s) {
		if (!(s = calloc(1, sizeof(*s))))
			return NULL;
		pthread_setspecific(scratch_key, s);
	}
	if (s->cap[slot] < n) {
		free(s->p[slot]);
		s->p[slot] = malloc(n);
		s->cap[slot] = s->p[slot] ? n : 0;
	}
	return s->p[slot];
}

bool tfsd_same_bytes(int fd, uint64_t size, const tfs_source *s, uint64_t off, uint64_t len)
{
	const size_t chunk = 1u << 20;
	char *a = tfsd_thread_buf(0, chunk), *b = tfsd_thread_buf(1, chunk);
	tfs_error err;
	if (!a || !b || !s || tfs_source_is_remote(s) || size != len)
		return false; /* (a remote tensor is not fetched to be compared) */
	for (uint64_t at = 0; at < len; at += chunk) {
		size_t k = len - at < chunk ? (size_t)(len - at) : chunk;
		if (tfs_io_pread(fd, "the staged file", at, a, k, &err) ||
		    tfs_source_pread(s, b, k, off + at, &err) || memcmp(a, b, k) != 0)
			return false;
	}
	return true;
}

int tfsd_copy_range(int dst, int src, uint64_t off, uint64_t len)
{
	tfs_io_from from = { .fd = src, .path = "the source" };
	tfs_error err;
	return tfs_io_copy(dst, "the new file", 0, &from, off, len, NULL, &err) ? tfsd_errno(&err)
										 : 0;
}

int tfsd_pwrite(int fd, const char *path, uint64_t off, const void *buf, size_t n)
{
	tfs_error err;
	return tfs_io_pwrite(fd, path, off, buf, n, &err) ? tfsd_errno(&err) : 0;
}

/* Frees a handle: its text, staged file and snapshot fd. */
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

/* A handle's staged data file, not (or no longer) the journal's: closed and removed. */
void tfsd_handle_drop_data(tfsd_handle *h)
{
	if (h->data_fd >= 0)
		close(h->data_fd);
	h->data_fd = -1;
	if (h->data_path)
		unlink(h->data_path); /* never committed: the journal does not name it */
	free(h->data_path);
	h->data_path = NULL;
}
