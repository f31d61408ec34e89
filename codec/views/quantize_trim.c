/*
 * quantize_trim.c - linking a quantized tensor's complete file into the cache directory, within
 * its bound (-o cache_size=, tfs_quant_opts.cache_size).
 *
 * With a bound, the least recently used files of other tensors are removed before a new file
 * is linked, until the directory's files and the new one fit in it.  What is counted and how:
 *   1. the cache files are the directory's names of 64 hex digits; temporaries (unnamed
 *      O_TMPFILE files, named .tmp-PID-*) are never counted nor touched: they are files
 *      another thread or process is still writing;
 *   2. a file's size is what it takes on disk (st_blocks), as the remote block cache counts;
 *   3. "used" is the file's modification time: set when its bytes are written, and again each
 *      time a view opens it from the cache (quantize_pool.c open_cached), as the remote
 *      cache stamps an entry's map when it is mounted; ties go by name;
 *   4. trimming and linking are done under an flock of the directory, so that two threads,
 *      or two mounts sharing the directory, never both make room for their file from the
 *      same count (a file another mount removed first is no error);
 *   5. a file this view has open (the same inode as one of its descriptors) is kept while it
 *      is read or is the tensor last asked for (it goes at a later trim); otherwise its
 *      descriptor is closed before it is removed, so that its space is freed now: a later
 *      read opens it again by name, and finding it gone computes it anew.  A descriptor of
 *      another view or process keeps a removed file readable there (Linux).
 * A tensor larger than the bound is never written (quantize_pool.c begin: its reads compute
 * the blocks they need, as without a cache).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "quantize_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	char name[65];
	struct timespec mtime;
	uint64_t bytes;
	dev_t dev;
	ino_t ino;
} cache_file;

static bool is_key(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return n == 64;
}

static int older_first(const void *a, const void *b)
{
	const cache_file *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The cache files of the directory dfd (oldest first) into *out and *n, the bytes they take
 * into *usage.  -1 when it cannot be read. */
static int scan(int dfd, cache_file **out, size_t *n, uint64_t *usage)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	*usage = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		struct stat st;
		if (!is_key(de->d_name) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (*n == cap) {
			cache_file *m = realloc(*out, (cap = cap ? 2 * cap : 64) * sizeof(**out));
			if (!m)
				break;  /* (trimmed by what was seen) */
			*out = m;
		}
		cache_file *f = &(*out)[(*n)++];
		memcpy(f->name, de->d_name, 65);
		f->mtime = st.st_mtim;
		f->bytes = (uint64_t)st.st_blocks * 512;
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		*usage += f->bytes;
	}
	closedir(d);
	if (*n)
		qsort(*out, *n, sizeof(**out), older_first);
	return 0;
}

/* Whether f may be removed now (v->mu held): not a file of this view being read; this
 * view's descriptor of it is closed first. */
static bool let_go(tfs_qview *v, const cache_file *f)
{
	for (size_t i = 0; i < v->n_t; i++) {
		tfs_qt *t = &v->t[i];
		struct stat st;
		if (t->fd < 0 || strcmp(t->key, f->name) != 0)
			continue;
		if (fstat(t->fd, &st) < 0 || st.st_dev != f->dev || st.st_ino != f->ino)
			return true;  /* another file under its name: this view's is unnamed */
		if (t->users || i == v->last_demand || t->state != TFS_QT_DONE)
			return false;
		close(t->fd);
		t->fd = -1;
		t->state = TFS_QT_IDLE;
		v->open_fds--;
		return true;
	}
	return true;
}

/* Room for t's file fd in the directory dfd (its flock held): the least recently used files
 * of other tensors removed until it fits.  false: it is larger than the bound itself. */
static bool make_room(tfs_qview *v, const tfs_qt *t, int fd, int dfd)
{
	struct stat st;
	cache_file *f;
	size_t n;
	uint64_t usage;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_blocks * 512 > v->cap)
		return false;
	const uint64_t need = (uint64_t)st.st_blocks * 512;
	if (scan(dfd, &f, &n, &usage) < 0)
		return true;  /* (linked as without a bound; the link will say) */
	bool there = false;  /* another mount linked it first: nothing is added */
	for (size_t i = 0; i < n; i++)
		there |= strcmp(f[i].name, t->key) == 0;
	for (size_t i = 0; i < n && !there && usage + need > v->cap; i++) {
		pthread_mutex_lock(&v->mu);
		bool go = let_go(v, &f[i]);
		pthread_mutex_unlock(&v->mu);
		if (go && (unlinkat(dfd, f[i].name, 0) == 0 || errno == ENOENT))
			usage = usage > f[i].bytes ? usage - f[i].bytes : 0;
	}
	free(f);
	return true;
}

bool tfs_qview_cache_link(tfs_qview *v, tfs_qt *t, int fd)
{
	char path[PATH_MAX], proc[64];
	if (snprintf(path, sizeof(path), "%s/%s", v->dir, t->key) >= (int)sizeof(path))
		return false;
	int dfd = v->cap ? open(v->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (dfd >= 0)
		while (flock(dfd, LOCK_EX) < 0 && errno == EINTR)
			;
	bool ok = dfd < 0 || make_room(v, t, fd, dfd);
	if (ok) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		ok = t->tmp ? rename(t->tmp, path) == 0
			    : linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 ||
			      errno == EEXIST;
	}
	if (dfd >= 0)
		close(dfd);  /* (the flock goes with it) */
	return ok;
}
