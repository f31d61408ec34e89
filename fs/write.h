/*
 * write.h - a writable mount's internals: a handle's writes (write.c) and their commit
 * (commit.c), f32/ and npy/ written as numbers (numbers.c), editors' scratch files
 * (scratch.c).  Each returns 0 or -errno.
 */
#ifndef TFSD_WRITE_H
#define TFSD_WRITE_H

#include "fs.h"

/* ==== a handle writing (write.c; tfsd_handle_free and _drop_data are util.c's) ==== */
/* Makes h a writing handle (trunc: opened with O_TRUNC): a key's current text (or none), a
 * scratch file written in place, a view checked writable as numbers; -EACCES for others. */
int tfsd_start_write(tfsd_fs *fs, tfsd_handle *h, bool trunc);
/* Gives h a staged data file of its own (nothing when it has one): empty, or with copy the
 * node's current bytes (a view's: its values or .npy file). */
int tfsd_stage_data(tfsd_fs *fs, tfsd_handle *h, bool copy);

/* ==== a handle's writes become a change (commit.c) ==== */
/* Parses/journals what the handle wrote (at flush, fsync and release). */
int tfsd_handle_commit(tfsd_fs *fs, tfsd_handle *h);
/* The dtype and shape for size bytes written as tensor node n: what was declared with
 * setxattr on it; else those of tensor item (kept; a vector may change length); else a new
 * tensor's default.  fs->lock held. */
void tfsd_tensor_spec(tfsd_fs *fs, const tfsd_node *n, long item, uint64_t size, int *dtype,
		      uint32_t *nd, int64_t *ne);
/* Journals the handle's staged bytes as tensor/layer h->node, with dtype and shape ne of nd
 * dims (dtype -1: tfsd_tensor_spec's). */
int tfsd_commit_data(tfsd_fs *fs, tfsd_handle *h, int dtype, uint32_t nd, const int64_t *ne);
/* Parses the handle's text as type_name (NULL: its key's own type) and journals it as the
 * new value of key node h->node. */
int tfsd_commit_text(tfsd_fs *fs, tfsd_handle *h, const char *type_name);

/* ==== f32/ and npy/ of a rw mount (numbers.c) ==== */
/* Opening a view for writing: refused (logged) when its tensor cannot be written as
 * numbers. */
int tfsd_numbers_start(tfsd_fs *fs, tfsd_handle *h);
/* Fills the handle's new staged file with the view's current bytes (sets data_size). */
int tfsd_numbers_copy(tfsd_fs *fs, tfsd_handle *h);
/* Checks the staged view and journals the tensor's new stored bytes. */
int tfsd_numbers_commit(tfsd_fs *fs, tfsd_handle *h);

/* ==== scratch.c: editors' temporary files (sedXXXXXX, .x.swp, x~, tmpXXXXXXXX, ...) ==== */
/* Whether fname in directory d names a scratch file: an editor's temporary that names no
 * item of the model. */
bool tfsd_scratch_name(tfsd_fs *fs, tfsd_dir d, const char *fname);
/* Makes n a scratch file: empty, or (from_item) holding its item's current bytes, the
 * item staying in the model unlisted (n->origin).  Call with fs->lock held for writing. */
int tfsd_scratch_make(tfsd_fs *fs, tfsd_node *n, bool from_item);
/* Reads all of n's scratch bytes (at most max) into out. */
int tfsd_scratch_read_all(tfsd_node *n, tfs_buf *out, uint64_t max);

#endif
