/*
 * commit.h - writing files safely: the temporaries of one write and the files they replace,
 * renamed together at the end (commit.c; codec-private).
 */
#ifndef TFS_COMMIT_H
#define TFS_COMMIT_H

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

#endif
