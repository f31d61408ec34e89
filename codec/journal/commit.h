/*
 * commit.h - the commit of a write, validation and the write path's file helpers
 * (codec-private).
 */
#ifndef TFS_COMMIT_H
#define TFS_COMMIT_H

#include "model_impl.h"
#include "edit.h"
#include <sys/stat.h>

/* A commit: the temporaries of one repack and the files they replace, renamed
 * together at the end. */
typedef struct tfs_commit tfs_commit;
/* Told the name of a temporary file before that name is created (0, or a tfs_code that
 * stops the commit): the staging journal records it, so a crash cannot leave it behind. */
typedef int (*tfs_name_hook)(void *ctx, const char *tmp, tfs_error *err);
int tfs_commit_new(tfs_commit **out, tfs_error *err);
void tfs_commit_set_name_hook(tfs_commit *c, tfs_name_hook hook, void *ctx);
int tfs_commit_add(tfs_commit *c, const char *final, int *fd, const char **tmp, tfs_error *err);
int tfs_commit_seal(tfs_commit *c, tfs_error *err);
size_t tfs_commit_count(const tfs_commit *c);
int tfs_commit_get(const tfs_commit *c, size_t i, const char **tmp, const char **final,
		   struct stat *st);
int tfs_commit_apply(tfs_commit *c, tfs_error *err);
void tfs_commit_abort(tfs_commit *c);
void tfs_commit_free(tfs_commit *c);
int tfs_model_write_prepare(tfs_model *m, const tfs_write_opts *o, tfs_commit *c,
			    tfs_error *err);
int tfs_write_validate(const tfs_model *m, const tfs_model *w, tfs_error *err);

int tfs_io_pwrite(int fd, const char *path, uint64_t pos, const void *p, size_t n,
		  tfs_error *err);
int tfs_io_zeros(int fd, const char *path, uint64_t pos, uint64_t n, tfs_error *err);
int tfs_io_reserve(int fd, const char *path, uint64_t size, tfs_error *err);
int tfs_io_copy(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t src,
		uint64_t off, uint64_t len, const tfs_write_opts *o, uint64_t *done, uint64_t total,
		tfs_error *err);

/* Block size in which fd (a new empty file) can share extents with source src; 0: it can't. */
uint32_t tfs_io_clone_block(int fd, const tfs_model *m, int32_t src);
/* tfs_io_copy, cloning whole blocks when blk != 0 and pos == off modulo blk. */
int tfs_io_copy_shared(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t src,
		       uint64_t off, uint64_t len, uint32_t blk, const tfs_write_opts *o,
		       uint64_t *done, uint64_t total, tfs_error *err);
int tfs_io_fsync_dir(const char *path_in_dir, tfs_error *err);

/* The output's final path: o->output or the source; a symlink is followed, so the link
 * keeps pointing at the (replaced) file.  Allocated. */
char *tfs_output_path(const tfs_model *m, const tfs_write_opts *o);
/* An unnamed O_TMPFILE in dir (a named mkostemp file where unsupported), named from tmpl
 * by tfs_io_tmpfile_link once written and fsynced. */
int tfs_io_tmpfile_open(const char *dir, mode_t mode);
int tfs_io_tmpfile_link(int fd, char *tmpl, tfs_name_hook hook, void *hook_ctx, tfs_error *err);
void tfs_test_crash_point(const char *where);
int tfs_gguf_validate(const tfs_model *m, const char *path, tfs_error *err);

#endif
