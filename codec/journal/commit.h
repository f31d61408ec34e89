/*
 * commit.h - the commit of a write, validation and the write path's file helpers
 * (codec-private).
 */
#ifndef TFS_COMMIT_H
#define TFS_COMMIT_H

#include "model_impl.h"
#include "edit.h"
#include "io.h"
#include <sys/stat.h>

/* A commit: the temporaries of one repack and the files they replace, renamed
 * together at the end. */
typedef struct tfs_commit tfs_commit;
/* (tfs_name_hook, the hook told every temporary's name before it is created: base/io.h; the
 * staging journal records the name, so a crash cannot leave the file behind.) */
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


/* The output's final path: o->output or the source; a symlink is followed, so the link
 * keeps pointing at the (replaced) file.  Allocated. */
char *tfs_output_path(const tfs_model *m, const tfs_write_opts *o);
void tfs_test_crash_point(const char *where);

#endif
