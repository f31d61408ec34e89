/*
 * io.c - file I/O with every call checked (io.h): EINTR and short transfers handled, one
 * error convention (0 or a tfs_code naming the path and the offset).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

/* ==== reads and writes ==== */

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

int tfs_io_pread(int fd, const char *path, uint64_t pos, void *p, uint64_t n, tfs_error *err)
{
	uint8_t *b = p;
	while (n) {
		ssize_t r = pread(fd, b, n > (1u << 30) ? 1u << 30 : (size_t)n, (off_t)pos);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return tfs_error_sys(err, errno, "%s: read at offset %llu", path,
					     (unsigned long long)pos);
		if (r == 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: ends early at offset %llu", path,
					     (unsigned long long)pos);
		b += r;
		pos += (uint64_t)r;
		n -= (uint64_t)r;
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

/* ==== copies ==== */

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

static void progressed(const tfs_io_progress *p, uint64_t n)
{
	if (p && p->done) {
		*p->done += n;
		if (p->fn)
			p->fn(p->ctx, "writing", *p->done, p->total);
	}
}

static int read_fd(const void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	const tfs_io_from *f = ctx;
	return tfs_io_pread(f->fd, f->path, off, buf, len, err);
}

/* A copy through a buffer: read, then written. */
static int copy_read_write(int fd, const char *path, uint64_t pos, const tfs_io_from *from,
			   uint64_t off, uint64_t len, const tfs_io_progress *p, tfs_error *err)
{
	size_t cap = len < (8u << 20) ? (size_t)len : 8u << 20;
	uint8_t *buf = malloc(cap ? cap : 1);
	int rc = buf ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	while (!rc && len) {
		size_t k = len < cap ? (size_t)len : cap;
		if (!(rc = from->read ? from->read(from->ctx, buf, k, off, err)
				      : read_fd(from, buf, k, off, err)) &&
		    !(rc = tfs_io_pwrite(fd, path, pos, buf, k, err))) {
			off += k;
			pos += k;
			len -= k;
			progressed(p, k);
		}
	}
	free(buf);
	return rc;
}

/* One copy_file_range of at most k bytes: the count, 0 when the kernel cannot copy between
 * these files (the caller writes instead), or a tfs_code. */
static int64_t kernel_copy(int fd, const char *path, uint64_t pos, const tfs_io_from *from,
			   uint64_t off, size_t k, tfs_error *err)
{
	for (;;) {
		loff_t in = (loff_t)off, out = (loff_t)pos;
		ssize_t r = copy_file_range(from->fd, &in, fd, &out, k, 0);
		if (r > 0)
			return r;
		if (r == 0)
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: ended at offset %llu while copying from it: did it "
					     "change after it was opened?", from->path,
					     (unsigned long long)off);
		int e = errno;
		if (e == EINTR)
			continue;
		if (e == EXDEV || e == ENOSYS || e == EINVAL || e == EOPNOTSUPP || e == EBADF)
			return 0;
		if (e == EIO)
			return tfs_error_sys(err, e, "copying %s [%llu, +%zu) to %s", from->path,
					     (unsigned long long)off, k, path);
		return write_error(err, e, path, pos);
	}
}

int tfs_io_copy(int fd, const char *path, uint64_t pos, const tfs_io_from *from, uint64_t off,
		uint64_t len, const tfs_io_progress *p, tfs_error *err)
{
	bool kernel = from->fd >= 0;
	if (!kernel)
		return copy_read_write(fd, path, pos, from, off, len, p, err);
	while (len) {
		size_t k = len > COPY_CHUNK ? COPY_CHUNK : (size_t)len;
		int64_t r = k;
		if (kernel && (r = kernel_copy(fd, path, pos, from, off, k, err)) < 0)
			return (int)r;
		if (r == 0) { /* the kernel cannot: written from the mapping, else through a buffer */
			if (!from->map)
				return copy_read_write(fd, path, pos, from, off, len, p, err);
			kernel = false;
			continue;
		}
		if (!kernel) {
			int rc = tfs_io_pwrite(fd, path, pos, from->map + off, k, err);
			if (rc)
				return rc;
		}
		off += (uint64_t)r;
		pos += (uint64_t)r;
		len -= (uint64_t)r;
		progressed(p, (uint64_t)r);
	}
	return 0;
}

/* ==== sharing extents (reflink) ==== */

/*
 * A probe, not a guess from the file system's name: XFS with reflink=1, btrfs, bcachefs and
 * OCFS2 say yes, ext4, tmpfs, XFS without reflink or another file system than the source's
 * say no.
 */
uint32_t tfs_io_clone_block(int fd, int from_fd, uint64_t from_size)
{
	struct stat st;
	struct statfs sf;
	if (from_fd < 0 || fstat(fd, &st) || st.st_size != 0 || fstatfs(fd, &sf))
		return 0;
	uint64_t blk = (uint64_t)sf.f_bsize;
	if (blk < 512 || blk > (1u << 16) || (blk & (blk - 1)) || from_size < blk)
		return 0;
	struct file_clone_range r = { .src_fd = from_fd, .src_length = blk };
	bool ok = ioctl(fd, FICLONERANGE, &r) == 0;
	if (ftruncate(fd, 0) != 0)
		return 0;
	return ok ? (uint32_t)blk : 0;
}

#define CLONE_CHUNK (1ull << 30)

int tfs_io_clone(uint64_t *cloned, int fd, uint64_t pos, int from_fd, uint64_t off,
		 uint64_t len, const tfs_io_progress *p)
{
	*cloned = 0;
	while (*cloned < len) {
		uint64_t k = len - *cloned > CLONE_CHUNK ? CLONE_CHUNK : len - *cloned;
		struct file_clone_range r = { .src_fd = from_fd, .src_offset = off + *cloned,
					      .src_length = k, .dest_offset = pos + *cloned };
		if (ioctl(fd, FICLONERANGE, &r) != 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		*cloned += k;
		progressed(p, k);
	}
	return 0;
}

/* ==== directories and temporary files ==== */

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

/*
 * A temporary is first an unnamed O_TMPFILE in its directory and gets its name only once
 * it is written and fsynced (tfs_io_tmpfile_link): a repack killed while it copies
 * gigabytes leaves nothing behind for anyone to clean up.  File systems without O_TMPFILE
 * get a named temporary at once (mkostemp, by the caller).
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
