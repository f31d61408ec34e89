/*
 * write_impl.h - write.c's private side: preparing a model's write into a commit, for the
 * write and for the recovery of an interrupted repack (codec-private).
 */
#ifndef TFS_WRITE_IMPL_H
#define TFS_WRITE_IMPL_H

#include "write.h"
#include "model_impl.h"
#include "commit.h"

int tfs_model_write_prepare(tfs_model *m, const tfs_write_opts *o, tfs_commit *c,
			    tfs_error *err);

#endif
