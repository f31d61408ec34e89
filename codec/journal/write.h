/*
 * write.h - writing a changed model in its source format (public).
 */
#ifndef TFS_WRITE_H
#define TFS_WRITE_H

#include "../model/edit.h"

/*
 * Writes the model, as changed, in its source format: to a temporary file beside
 * the output, fsynced, re-opened and validated with the reader, then renamed
 * over the output and the directory fsynced.  Unchanged tensor bytes are copied
 * with copy_file_range.  On failure the output is untouched.
 */
int tfs_model_write(tfs_model *m, const tfs_write_opts *o, tfs_error *err);

#endif
