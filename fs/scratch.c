/*
 * scratch.c - editors' temporary files on a writable mount.
 *
 * Editors and tools save by writing a temporary beside the file and renaming it over
 * the original (sed -i's sedXXXXXX, Python's tmpXXXXXXXX, vim's x~ backup and .x.swp
 * swap file, "cp x .tmp && mv .tmp x").  Such a file is no key, tensor or layer: it is
 * a scratch file, whose bytes live in an unnamed file of the staging directory and are
 * never journaled.  Only a rename onto a real name makes its bytes a change (namespace.c).
 * A scratch name is one of the patterns below that names no item of the model (a model
 * that really has a key ".x" keeps it as a key).
 */
#include "fs.h"
#include "tree.h"
#include "write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* n chars of s from set */
static bool all_of(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(set, s[i]))
			return false;
	return true;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n > k && memcmp(s + n - k, suffix, k) == 0;
}

/* The names editors and tools give their temporaries. */
static bool editor_temp_name(const char *f)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t n = strlen(f);
	if (f[0] == '.')                 /* .x.swp, .#x, .tmp, rsync's .x.AbCdEf, gedit's ... */
		return true;
	if (f[n - 1] == '~')             /* backups: x~ */
		return true;
	if (f[0] == '#' && n > 2 && f[n - 1] == '#') /* emacs auto-save: #x# */
		return true;
	if (ends_with(f, n, ".tmp"))     /* x.tmp */
		return true;
	if (n == 9 && !strncmp(f, "sed", 3) && all_of(f + 3, 6, alnum)) /* GNU sed -i */
		return true;
	/* Python's tempfile: "tmp" + 8 of [a-z0-9_], then the caller's suffix */
	if (n >= 11 && !strncmp(f, "tmp", 3) &&
	    all_of(f + 3, 8, "abcdefghijklmnopqrstuvwxyz0123456789_") &&
	    (n == 11 || f[11] == '.'))
		return true;
	/* vim's probe of whether it may create files here: 4913, then + 123 while taken */
	if (n >= 4 && n <= 5 && all_of(f, n, "0123456789")) {
		long v = strtol(f, NULL, 10);
		return v >= 4913 && (v - 4913) % 123 == 0;
	}
	return false;
}

bool tfsd_scratch_name(tfsd_fs *fs, tfsd_dir d, const char *fname)
{
	return (d == D_METADATA || d == D_TENSORS || d == D_LAYERS) && fname[0] &&
	       editor_temp_name(fname) && tfsd_dir_item(fs, d, fname) < 0;
}

/* Copies the current bytes of n's item (a value's text, a tensor's or layer's bytes) into fd. */
static int copy_item(tfsd_fs *fs, tfsd_node *n, int fd)
{
	if (n->kind == N_KEY) {
		tfs_buf b = { 0 };
		int rc = tfsd_node_text(fs, n, &b);
		if (!rc && b.len && pwrite(fd, b.data, b.len, 0) != (ssize_t)b.len)
			rc = -errno;
		tfs_buf_free(&b);
		return rc;
	}
	uint64_t off, len;
	tfs_error err;
	int32_t src = tfsd_node_bytes(fs, n, &off, &len);
	if (len && tfs_source_copy_out(fd, "a scratch file", tfs_model_source(fs->model, (size_t)src),
				       off, len, &err))
		return tfsd_fail(fs, &err);
	return 0;
}

int tfsd_scratch_make(tfsd_fs *fs, tfsd_node *n, bool from_item)
{
	tfs_error err;
	int fd;
	char *path;
	if (tfs_staging_scratch_open(fs->staging, &fd, &path, &err))
		return tfsd_fail(fs, &err);
	int rc = from_item && n->item >= 0 ? copy_item(fs, n, fd) : 0;
	if (rc) {
		close(fd);
		if (path)
			unlink(path);
		free(path);
		return rc;
	}
	tfsd_tree_unindex(fs, n);
	n->origin = from_item ? n->item : -1;
	n->item = -1;
	n->kind = N_SCRATCH;
	tfsd_tree_index(fs, n);
	n->scratch_fd = fd;
	n->scratch_path = path;
	n->pend_dtype = -1;
	n->pend_shape = false;
	free(n->pend_type);
	n->pend_type = NULL;
	n->typed = false;
	return 0;
}

int tfsd_scratch_read_all(tfsd_node *n, tfs_buf *out, uint64_t max)
{
	struct stat st;
	if (fstat(n->scratch_fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	size_t len = (size_t)st.st_size, got = 0;
	if (tfs_buf_reserve(out, len))
		return -ENOMEM;
	while (got < len) {
		ssize_t r = pread(n->scratch_fd, out->data + out->len + got, len - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	out->len += len;
	out->data[out->len] = '\0';
	return 0;
}
