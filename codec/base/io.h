/*
 * io.h - the one layer of file I/O of codec and of the driver: every system call checked,
 * EINTR and short transfers handled.
 *
 * One convention: a function returns 0, or a negative tfs_code with err naming the path and
 * the offset (TFS_E_IO with the errno for a failed system call: the driver's one mapping
 * function turns it back into that errno).  Nothing here knows of models or sources: a
 * copy reads from what the caller describes (tfs_io_from).
 */
#ifndef TFS_IO_H
#define TFS_IO_H

#include "base.h"

#include <sys/types.h>

/* Writes n bytes of p at pos of fd (path names it in messages).  A full disk says that
 * nothing was replaced (the writers write new files beside the old). */
int tfs_io_pwrite(int fd, const char *path, uint64_t pos, const void *p, size_t n,
		  tfs_error *err);
/* Reads exactly n bytes at pos of fd into p: TFS_E_IO when the read fails, TFS_E_FORMAT
 * "ends early" when the file is shorter. */
int tfs_io_pread(int fd, const char *path, uint64_t pos, void *p, uint64_t n, tfs_error *err);
/* Writes n zero bytes at pos of fd. */
int tfs_io_zeros(int fd, const char *path, uint64_t pos, uint64_t n, tfs_error *err);
/* Reserves the file's final size up front (fallocate), so a full disk fails at once and not
 * after copying gigabytes.  File systems without fallocate just skip it. */
int tfs_io_reserve(int fd, const char *path, uint64_t size, tfs_error *err);

/* Where tfs_io_copy reads: a file (fd >= 0; copy_file_range, and when the kernel cannot,
 * writes from map when given, else reads and writes), or a reader (fd -1: read(ctx, ...)
 * fills buf with [off, off + len), 0 or a tfs_code). */
typedef struct {
	int fd;
	const char *path;         /* for messages */
	const uint8_t *map;       /* the file's bytes at their offsets, or NULL */
	int (*read)(const void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err);
	const void *ctx;
} tfs_io_from;

/* A long copy's progress: *done grows by every byte written, and fn (when not NULL) is told
 * ("writing", *done, total) after each chunk. */
typedef struct {
	tfs_progress_fn fn;
	void *ctx;
	uint64_t *done;
	uint64_t total;
} tfs_io_progress;

/* Copies [off, off + len) of from to pos of fd (path).  progress may be NULL. */
int tfs_io_copy(int fd, const char *path, uint64_t pos, const tfs_io_from *from, uint64_t off,
		uint64_t len, const tfs_io_progress *progress, tfs_error *err);
/* Clones [off, off + len) of from_fd to pos of fd (FICLONERANGE), all three multiples of
 * the file system's block size; *cloned gets what was.  -1 (no message) where the file
 * system refuses: the caller copies the rest. */
int tfs_io_clone(uint64_t *cloned, int fd, uint64_t pos, int from_fd, uint64_t off,
		 uint64_t len, const tfs_io_progress *progress);
/* The block size in which fd (a new, empty file) can share extents with from_fd (of
 * from_size bytes): one block cloned and the file truncated again; 0 when it cannot. */
uint32_t tfs_io_clone_block(int fd, int from_fd, uint64_t from_size);

/* fsyncs the directory holding path. */
int tfs_io_fsync_dir(const char *path_in_dir, tfs_error *err);

/* Told the name of a temporary file before that name is created (0, or a tfs_code that
 * stops the caller): a journal records it, so a crash cannot leave it behind. */
typedef int (*tfs_name_hook)(void *ctx, const char *tmp, tfs_error *err);
/* An unnamed O_TMPFILE in dir with mode (-1 where the file system has none: the caller makes
 * a named one), named from tmpl by tfs_io_tmpfile_link once written and fsynced. */
int tfs_io_tmpfile_open(const char *dir, mode_t mode);
/* Gives the unnamed file fd a name made from tmpl ("...XXXXXX", the X's replaced in place),
 * telling hook (may be NULL) each name first. */
int tfs_io_tmpfile_link(int fd, char *tmpl, tfs_name_hook hook, void *hook_ctx, tfs_error *err);

#endif
