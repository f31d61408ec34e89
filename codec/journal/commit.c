/*
 * commit.c - writing files safely: checked I/O, and commits.
 *
 * A commit writes every output file to a temporary beside its final name
 * (".<name>.tensorfs-tmp.XXXXXX", unnamed until sealed where the file system has
 * O_TMPFILE), fsyncs it and lets the caller validate it; only then are the temporaries
 * renamed over their final names, in the order they were added (the file that makes the
 * set consistent - the GGUF file, an index.json, a manifest - last), and each directory
 * fsynced.  A failure before the renames removes the temporaries and leaves every output
 * untouched.  The format writers use this; they are called by write.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "commit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

/* ==== I/O helpers (every call checked, EINTR and short writes handled) ==== */

static int write_error(tfs_error *err, int e, const char *path, uint64_t pos)
{
	if (e == ENOSPC || e == EDQUOT)
		return tfs_error_sys(err, e,
				     "%s: no space left for the new file (at offset %llu); nothing "
				     "was replaced", path, (unsigned long long)pos);
	return tfs_error_sys(err, e, "%s: write at offset %llu", path, (unsigned long long)pos);
}

int tfs_io_pwrite(int fd, const char *path, uint64_t pos, const void *p, size_t n,
		  tfs_error *err)
{
	const uint8_t *b = p;
	while (n) {
		size_t k = n > (1u << 30) ? (1u << 30) : n;
		ssize_t w = pwrite(fd, b, k, (off_t)pos);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return write_error(err, errno, path, pos);
		}
		if (w == 0)
			return write_error(err, ENOSPC, path, pos);
		b += w;
		n -= (size_t)w;
		pos += (uint64_t)w;
	}
	return 0;
}

int tfs_io_zeros(int fd, const char *path, uint64_t pos, uint64_t n, tfs_error *err)
{
	static const uint8_t zeros[4096];
	while (n) {
		size_t k = n > sizeof(zeros) ? sizeof(zeros) : (size_t)n;
		int rc = tfs_io_pwrite(fd, path, pos, zeros, k, err);
		if (rc)
			return rc;
		pos += k;
		n -= k;
	}
	return 0;
}

/* Reserves the file's final size up front, so a full disk fails at once and not after
 * copying gigabytes.  File systems without fallocate just skip it. */
int tfs_io_reserve(int fd, const char *path, uint64_t size, tfs_error *err)
{
	if (size == 0)
		return 0;
	if (size > (uint64_t)INT64_MAX)
		return tfs_error_set(err, TFS_E_INVALID, "%s: file of %llu bytes is too large", path,
				     (unsigned long long)size);
	for (;;) {
		if (fallocate(fd, 0, 0, (off_t)size) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
			return tfs_error_sys(err, errno,
					     "%s: cannot reserve %llu bytes for the new file; nothing "
					     "was replaced", path, (unsigned long long)size);
		return 0; /* EOPNOTSUPP, ENOSYS, EINVAL...: write without a reservation */
	}
}

#define COPY_CHUNK (64u << 20)
/*
 * No sync_file_range() in the copy loop, on purpose.  Measured on ext4 (virtio disk, 2
 * cores), 1.1 GiB: starting writeback after each 64 MiB chunk (SYNC_FILE_RANGE_WRITE) and
 * waiting for the chunk before it (WAIT_BEFORE) cut a standalone copy_file_range + fsync
 * from 1.71 to 1.28 s (best of 8), but the whole repack (`tensorfs unmount`,
 * scripts/bench-repack.sh with TENSORFS_B) came out 4-14% slower than without it in three
 * A/B runs.  16/32 MiB chunks measured the same as 64, 8 MiB slower.  The fsync dominates
 * (about 1.2 s at the disk's ~0.9 GB/s); the rest of the gap to `cp && sync` is freeing
 * the replaced file (see scripts/bench-repack.sh).
 */

/* tfs_io_copy from a source with no file (remote): read through it, then written. */
static int copy_read_write(int fd, const char *path, uint64_t pos, const tfs_source *s,
			   uint64_t off, uint64_t len, const tfs_write_opts *o, uint64_t *done,
			   uint64_t total, tfs_error *err)
{
	size_t cap = len < (8u << 20) ? (size_t)len : 8u << 20;
	uint8_t *buf = malloc(cap ? cap : 1);
	int rc = buf ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	while (!rc && len) {
		size_t k = len < cap ? (size_t)len : cap;
		if (!(rc = tfs_source_pread(s, buf, k, off, err)) &&
		    !(rc = tfs_io_pwrite(fd, path, pos, buf, k, err))) {
			off += k;
			pos += k;
			len -= k;
			if (done && (*done += k, o && o->progress))
				o->progress(o->progress_ctx, "writing", *done, total);
		}
	}
	free(buf);
	return rc;
}

/* Checks that [off, off + len) lies inside source si. */
static int source_range(const tfs_model *m, int32_t si, uint64_t off, uint64_t len,
			tfs_error *err)
{
	uint64_t end;
	if (si < 0 || (size_t)si >= m->n_src)
		return tfs_error_set(err, TFS_E_INVALID, "%s: no source %d", m->path, si);
	const tfs_source *s = &m->src[si];
	if (tfs_add_overflow(off, len, &end) || end > s->size)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: bytes [%llu, +%llu) lie past its end (%llu bytes): did it "
				     "change after it was opened?", s->path,
				     (unsigned long long)off, (unsigned long long)len,
				     (unsigned long long)s->size);
	return 0;
}

int tfs_io_copy(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t si,
		uint64_t off, uint64_t len, const tfs_write_opts *o, uint64_t *done, uint64_t total,
		tfs_error *err)
{
	int rc = source_range(m, si, off, len, err);
	if (rc)
		return rc;
	const tfs_source *s = &m->src[si];
	if (s->remote)
		return copy_read_write(fd, path, pos, s, off, len, o, done, total, err);
	bool kernel_copy = true;
	while (len) {
		size_t k = len > COPY_CHUNK ? COPY_CHUNK : (size_t)len;
		ssize_t r;
		if (kernel_copy) {
			loff_t in = (loff_t)off, out = (loff_t)pos;
			r = copy_file_range(s->fd, &in, fd, &out, k, 0);
			if (r < 0) {
				int e = errno;
				if (e == EINTR)
					continue;
				if (e == EXDEV || e == ENOSYS || e == EINVAL || e == EOPNOTSUPP ||
				    e == EBADF) {
					kernel_copy = false; /* fall back to writing from the map */
					continue;
				}
				if (e == EIO)
					return tfs_error_sys(err, e, "copying %s [%llu, +%zu) to %s",
							     s->path, (unsigned long long)off, k,
							     path);
				return write_error(err, e, path, pos);
			}
			if (r == 0)
				return tfs_error_set(err, TFS_E_FORMAT,
						     "%s: ended at offset %llu while copying from it: "
						     "did it change after it was opened?", s->path,
						     (unsigned long long)off);
		} else {
			r = pwrite(fd, s->map + off, k, (off_t)pos);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				return write_error(err, errno, path, pos);
			}
			if (r == 0)
				return write_error(err, ENOSPC, path, pos);
		}
		off += (uint64_t)r;
		pos += (uint64_t)r;
		len -= (uint64_t)r;
		if (done) {
			*done += (uint64_t)r;
			if (o && o->progress)
				o->progress(o->progress_ctx, "writing", *done, total);
		}
	}
	return 0;
}

/* ==== sharing extents (reflink) ==== */

/*
 * Whether fd (a new, empty output file) can share extents with source si, and in which
 * block size: one block of the source is cloned into fd with FICLONERANGE and the file
 * truncated again.  A probe, not a guess from the file system's name: XFS with reflink=1,
 * btrfs, bcachefs and OCFS2 say yes, ext4, tmpfs, XFS without reflink or another file
 * system than the source's say no.  0 when not.
 */
uint32_t tfs_io_clone_block(int fd, const tfs_model *m, int32_t si)
{
	struct stat st;
	struct statfs sf;
	if (si < 0 || (size_t)si >= m->n_src || m->src[si].fd < 0 || fstat(fd, &st) ||
	    st.st_size != 0 || fstatfs(fd, &sf))
		return 0;
	uint64_t blk = (uint64_t)sf.f_bsize;
	if (blk < 512 || blk > (1u << 16) || (blk & (blk - 1)) || m->src[si].size < blk)
		return 0;
	struct file_clone_range r = { .src_fd = m->src[si].fd, .src_length = blk };
	bool ok = ioctl(fd, FICLONERANGE, &r) == 0;
	if (ftruncate(fd, 0) != 0)
		return 0;
	return ok ? (uint32_t)blk : 0;
}

#define CLONE_CHUNK (1ull << 30)

/* Clones [off, off + len) of source s to pos of fd, all three multiples of the block
 * size; *cloned gets what was.  Fails (without an error message) where the file system
 * refuses, so the caller copies the rest. */
static int clone_blocks(int fd, const tfs_source *s, uint64_t pos, uint64_t off, uint64_t len,
			const tfs_write_opts *o, uint64_t *done, uint64_t total, uint64_t *cloned)
{
	*cloned = 0;
	while (*cloned < len) {
		uint64_t k = len - *cloned > CLONE_CHUNK ? CLONE_CHUNK : len - *cloned;
		struct file_clone_range r = { .src_fd = s->fd, .src_offset = off + *cloned,
					      .src_length = k, .dest_offset = pos + *cloned };
		if (ioctl(fd, FICLONERANGE, &r) != 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		*cloned += k;
		if (done) {
			*done += k;
			if (o && o->progress)
				o->progress(o->progress_ctx, "writing", *done, total);
		}
	}
	return 0;
}

/*
 * tfs_io_copy, sharing the source's extents where it can: with blk (tfs_io_clone_block)
 * set and pos and off equal modulo blk, the whole blocks of the range are cloned and only
 * the partial blocks at its two ends copied.  Anything the file system refuses to clone
 * is copied instead.
 */
int tfs_io_copy_shared(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t si,
		       uint64_t off, uint64_t len, uint32_t blk, const tfs_write_opts *o,
		       uint64_t *done, uint64_t total, tfs_error *err)
{
	int rc = source_range(m, si, off, len, err);
	if (rc)
		return rc;
	uint64_t lead = blk ? (blk - pos % blk) % blk : 0;
	if (!blk || m->src[si].fd < 0 || (pos - off) % blk || len < lead + blk)
		return tfs_io_copy(fd, path, pos, m, si, off, len, o, done, total, err);
	uint64_t mid = (len - lead) / blk * blk, cloned;
	if ((rc = tfs_io_copy(fd, path, pos, m, si, off, lead, o, done, total, err)))
		return rc;
	clone_blocks(fd, &m->src[si], pos + lead, off + lead, mid, o, done, total, &cloned);
	lead += cloned;
	return tfs_io_copy(fd, path, pos + lead, m, si, off + lead, len - lead, o, done, total,
			   err);
}

/* fsyncs the directory holding path. */
int tfs_io_fsync_dir(const char *path, tfs_error *err)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	int fd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;
	if (fd < 0) {
		rc = tfs_error_sys(err, errno, "%s: open directory", dir);
	} else {
		if (fsync(fd) < 0 && errno != EINVAL)
			rc = tfs_error_sys(err, errno, "%s: fsync directory", dir);
		close(fd);
	}
	free(dir);
	return rc;
}

/* Test hook: TFS_TEST_CRASH_AT=<where> makes the process die there, as a kill -9 would. */
void tfs_test_crash_point(const char *where)
{
	const char *at = getenv("TFS_TEST_CRASH_AT");
	if (at && strcmp(at, where) == 0)
		_exit(9);
}

/* ==== commits: temporaries renamed over their final names ==== */

/*
 * A temporary is first an unnamed O_TMPFILE in its directory and gets its name only once
 * it is written and fsynced (tfs_io_tmpfile_link): a repack killed while it copies
 * gigabytes leaves nothing behind for anyone to clean up.  File systems without O_TMPFILE
 * get a named temporary at once (mkostemp), as before.
 */
int tfs_io_tmpfile_open(const char *dir, mode_t mode)
{
	int fd = open(dir[0] ? dir : "/", O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
	if (fd >= 0 && fchmod(fd, mode) < 0) { /* O_TMPFILE's mode is subject to the umask */
		close(fd);
		return -1;
	}
	return fd;
}

/* Gives the unnamed file fd a name made from tmpl ("...XXXXXX", the X's replaced in place). */
int tfs_io_tmpfile_link(int fd, char *tmpl, tfs_name_hook hook, void *hook_ctx, tfs_error *err)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char proc[64];
	size_t n = strlen(tmpl);
	if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX") != 0)
		return tfs_error_set(err, TFS_E_INVALID, "%s: bad temporary name", tmpl);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t r = (uint64_t)ts.tv_nsec * 6364136223846793005ull ^ (uint64_t)getpid() << 32 ^
		     (uint64_t)fd;
	for (int attempt = 0; attempt < 100; attempt++) {
		for (size_t k = n - 6; k < n; k++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			tmpl[k] = chars[(r >> 33) % (sizeof(chars) - 1)];
		}
		int rc = hook ? hook(hook_ctx, tmpl, err) : 0;
		if (rc)
			return rc;
		if (linkat(AT_FDCWD, proc, AT_FDCWD, tmpl, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			return tfs_error_sys(err, errno, "%s: cannot name the temporary file", tmpl);
	}
	return tfs_error_set(err, TFS_E_IO, "%s: no free temporary name", tmpl);
}

typedef struct {
	char *tmp, *final;
	int fd;           /* open until sealed */
	struct stat st;   /* the sealed temporary's identity */
	bool sealed, renamed;
	bool anon;        /* an O_TMPFILE not linked yet: tmp still ends in XXXXXX */
} commit_file;

struct tfs_commit {
	commit_file *f;
	size_t n, cap;
	tfs_name_hook hook;   /* told every temporary's name before it is created */
	void *hook_ctx;
};

void tfs_commit_set_name_hook(tfs_commit *c, tfs_name_hook hook, void *ctx)
{
	c->hook = hook;
	c->hook_ctx = ctx;
}

int tfs_commit_new(tfs_commit **out, tfs_error *err)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
}

/* Creates the temporary for final: ".<name>.tensorfs-tmp.XXXXXX" in final's directory, with
 * final's mode (0644 for a new file).  *fd stays the commit's until tfs_commit_seal; *tmp is
 * borrowed from the commit. */
int tfs_commit_add(tfs_commit *c, const char *final, int *fd, const char **tmp, tfs_error *err)
{
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 4;
		commit_file *p = realloc(c->f, ncap * sizeof(*p));
		if (!p)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		c->f = p;
		c->cap = ncap;
	}
	const char *base = tfs_basename(final);
	size_t dlen = (size_t)(base - final);
	int blen = (int)strnlen(base, 200); /* keep the temporary's name under NAME_MAX */
	commit_file *f = &c->f[c->n];
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (!(f->final = strdup(final)) ||
	    asprintf(&f->tmp, "%.*s.%.*s.tensorfs-tmp.XXXXXX", (int)dlen, final, blen, base) < 0) {
		free(f->final);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	char *dir = dlen ? strndup(final, dlen - 1) : strdup(".");
	if (!dir) {
		free(f->final);
		free(f->tmp);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	f->fd = tfs_io_tmpfile_open(dir, 0600);
	free(dir);
	f->anon = f->fd >= 0;
	if (!f->anon) {
		/* no O_TMPFILE here: the name exists from now on (told to the hook once known) */
		f->fd = mkostemp(f->tmp, O_CLOEXEC);
		if (f->fd >= 0 && c->hook) {
			int rc = c->hook(c->hook_ctx, f->tmp, err);
			if (rc) {
				close(f->fd);
				unlink(f->tmp);
				free(f->final);
				free(f->tmp);
				return rc;
			}
		}
	}
	if (f->fd < 0) {
		int rc = tfs_error_sys(err, errno, "%s: cannot create a temporary file", f->tmp);
		free(f->final);
		free(f->tmp);
		return rc;
	}
	struct stat st;
	mode_t mode = 0644;
	if (stat(final, &st) == 0) {
		mode = st.st_mode & 07777;
		if (fchown(f->fd, st.st_uid, st.st_gid) < 0) {
			/* not ours to give away: the new file belongs to us */
		}
	}
	if (fchmod(f->fd, mode) < 0) {
		int rc = tfs_error_sys(err, errno, "%s: chmod", f->tmp);
		close(f->fd);
		if (!f->anon)
			unlink(f->tmp);
		free(f->final);
		free(f->tmp);
		return rc;
	}
	c->n++;
	*fd = f->fd;
	*tmp = f->tmp;
	return 0;
}

int tfs_commit_seal(tfs_commit *c, tfs_error *err)
{
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->sealed)
			continue;
		if (fsync(f->fd) < 0)
			return tfs_error_sys(err, errno, "%s: fsync", f->tmp);
		if (f->anon) {
			int rc = tfs_io_tmpfile_link(f->fd, f->tmp, c->hook, c->hook_ctx, err);
			if (rc)
				return rc;
			f->anon = false;
		}
		if (fstat(f->fd, &f->st) < 0)
			return tfs_error_sys(err, errno, "%s: stat", f->tmp);
		int fd = f->fd;
		f->fd = -1;
		if (close(fd) < 0 && errno != EINTR)
			return tfs_error_sys(err, errno, "%s: close", f->tmp);
		int rc = tfs_io_fsync_dir(f->tmp, err);
		if (rc)
			return rc;
		f->sealed = true;
	}
	return 0;
}

size_t tfs_commit_count(const tfs_commit *c) { return c->n; }

int tfs_commit_get(const tfs_commit *c, size_t i, const char **tmp, const char **final,
		   struct stat *st)
{
	if (i >= c->n)
		return TFS_E_NOTFOUND;
	*tmp = c->f[i].tmp;
	*final = c->f[i].final;
	if (st)
		*st = c->f[i].st;
	return 0;
}

int tfs_commit_apply(tfs_commit *c, tfs_error *err)
{
	int rc = tfs_commit_seal(c, err);
	if (rc)
		return rc;
	tfs_test_crash_point("before_rename");
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->renamed)
			continue;
		if (rename(f->tmp, f->final) < 0)
			return tfs_error_sys(err, errno, "renaming %s to %s", f->tmp, f->final);
		f->renamed = true;
		if ((rc = tfs_io_fsync_dir(f->final, err)))
			return rc;
		if (i + 1 < c->n)
			tfs_test_crash_point("mid_rename");
	}
	return 0;
}

void tfs_commit_abort(tfs_commit *c)
{
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->fd >= 0) {
			close(f->fd);
			f->fd = -1;
		}
		if (!f->renamed && f->tmp) {
			if (!f->anon)
				unlink(f->tmp);
			f->renamed = true; /* gone: nothing left to do for it */
		}
	}
}

void tfs_commit_free(tfs_commit *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		if (c->f[i].fd >= 0)
			close(c->f[i].fd);
		free(c->f[i].tmp);
		free(c->f[i].final);
	}
	free(c->f);
	free(c);
}

/* ==== where a repack writes ==== */

/* The output's final path: o->output or the source; a symlink is followed, so the link
 * keeps pointing at the (replaced) file. Allocated. */
char *tfs_output_path(const tfs_model *m, const tfs_write_opts *o)
{
	const char *out = o && o->output ? o->output : m->path;
	struct stat st;
	if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode)) {
		char *r = realpath(out, NULL);
		if (r)
			return r;
	}
	return strdup(out);
}
