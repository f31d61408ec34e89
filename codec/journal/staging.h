/*
 * staging.h - the staging journal of a writable mount, and repacking it (public).
 */
#ifndef TFS_STAGING_H
#define TFS_STAGING_H

#include "../model/edit.h"

/* ==== staging: the crash-safe journal of a writable mount ==== */

/*
 * A staging directory records every change made through a writable mount so
 * that it survives a crash of the daemon, and drives the repack:
 *   <dir>/journal.json  the ordered list of changes (replaced atomically: write a
 *                       temporary, fsync, rename, fsync the directory)
 *   <dir>/data/<n>      staged bytes: a changed value's payload, a tensor's new bytes
 *   <dir>/lock          flock()ed while a mount or a repack uses the directory
 * The journal names the source it applies to (path, size, mtime); replaying
 * it onto a freshly opened source reproduces the staged state.
 */
typedef struct tfs_staging tfs_staging;

/* Default staging directory for an output path: "<dir of output>/.<name>.tensorfs-staging"
 * (the same filesystem as the output, so the repack can rename over it). Allocated. */
char *tfs_staging_default_dir(const char *output);

/* Opens (creating if needed) and locks the staging directory for source/output.
 * Fails with TFS_E_EXISTS if another process holds the lock, TFS_E_INVALID when the
 * journal belongs to another source. */
int tfs_staging_open(tfs_staging **out, const char *dir, const tfs_model *m, const char *output,
		     tfs_error *err);
void tfs_staging_free(tfs_staging *s);      /* unlocks; keeps the directory */
const char *tfs_staging_dir(const tfs_staging *s);
/* Where a repack writes when not told otherwise (tfs_write_opts.output): the output the
 * staging directory was opened for, or the journal's, or the model's path; borrowed. */
const char *tfs_staging_output(const tfs_staging *s);
/* Removes the staging directory when it holds nothing (no changes, no repack in
 * progress, nothing else in it); 0 when removed.  Call before tfs_staging_free. */
int tfs_staging_remove(tfs_staging *s);
/* True when the journal holds changes not yet repacked. */
bool tfs_staging_dirty(const tfs_staging *s);
/* Applies the recorded changes to m (just opened from the same source). Also
 * finishes an interrupted repack first if one is recorded (see tfs_staging_repack). */
int tfs_staging_replay(tfs_staging *s, tfs_model *m, tfs_error *err);

/* A new, empty file under data/ for staged bytes; *path is allocated. */
int tfs_staging_new_data(tfs_staging *s, char **path, tfs_error *err);
/*
 * Bytes that are not a change yet (an editor's temporary file): an unnamed file in data/
 * (O_TMPFILE), so nothing is left behind when it is closed or the daemon dies.  *fd is
 * O_RDWR; *path is NULL, or (a file system without O_TMPFILE) the named file, which the
 * caller removes when done.  tfs_staging_scratch_link gives it a data/<n> name (*path,
 * allocated) for tfs_staging_set_tensor / _set_extra; named: what _open returned.
 */
int tfs_staging_scratch_open(tfs_staging *s, int *fd, char **path, tfs_error *err);
int tfs_staging_scratch_link(tfs_staging *s, int fd, const char *named, char **path,
			     tfs_error *err);

/* Each records one change durably (data fsynced, journal replaced) and applies it to m.
 * Paths come from tfs_staging_new_data. */
int tfs_staging_set_kv(tfs_staging *s, tfs_model *m, const char *key, uint32_t type,
		       const uint8_t *data, uint64_t len, tfs_error *err);
int tfs_staging_del_kv(tfs_staging *s, tfs_model *m, const char *key, tfs_error *err);
/* replace: a key/tensor already named `to` is deleted by the same journal op (else
 * TFS_E_EXISTS). */
int tfs_staging_rename_kv(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			  bool replace, tfs_error *err);
int tfs_staging_set_tensor(tfs_staging *s, tfs_model *m, const char *name, int dtype,
			   uint32_t n_dims, const int64_t *ne, const char *data_path,
			   tfs_error *err);
/* Sets several existing tensors' bytes in one journal op (crash-safe together: an MLX
 * weight and its companions); see tfs_model_set_tensor_files. */
int tfs_staging_set_tensors(tfs_staging *s, tfs_model *m, const tfs_tensor_file *f, size_t n,
			    tfs_error *err);
int tfs_staging_del_tensor(tfs_staging *s, tfs_model *m, const char *name, tfs_error *err);
int tfs_staging_rename_tensor(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			      bool replace, tfs_error *err);
int tfs_staging_set_extra(tfs_staging *s, tfs_model *m, const char *name, const char *data_path,
			  tfs_error *err);
int tfs_staging_del_extra(tfs_staging *s, tfs_model *m, const char *name, tfs_error *err);
/* A rename onto an existing name, as one journal op: `to` keeps its place and takes the new
 * value (a key) or from's bytes with the dtype/shape given (a tensor) or from's bytes (a
 * layer); `from` is deleted.  See tfs_model_replace_tensor. */
int tfs_staging_replace_kv(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			   uint32_t type, const uint8_t *data, uint64_t len, tfs_error *err);
int tfs_staging_replace_tensor(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			       int dtype, uint32_t n_dims, const int64_t *ne, tfs_error *err);
int tfs_staging_replace_extra(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			      tfs_error *err);

/*
 * Repacks: when the journal holds changes, writes m to the output with
 * tfs_model_write (recording the temporary's identity in the journal first, so
 * a crash between the rename and the clean-up is recognized), then empties the
 * staging directory.  On failure the source and the staging directory are
 * untouched and err says why.  Nothing staged: nothing is written, returns 0.
 */
int tfs_staging_repack(tfs_staging *s, tfs_model *m, const tfs_write_opts *o, tfs_error *err);

/*
 * Finishes or undoes a repack that a crash interrupted (see tfs_staging_repack), without
 * opening any model; a directory that does not exist or holds no journal is fine.  Call it
 * before tfs_model_open when mounting rw: a sharded set or an Ollama model whose repack was
 * cut between two renames only reads back consistently after it.  Fails with TFS_E_EXISTS
 * while another process holds the directory.
 */
int tfs_staging_recover(const char *staging_dir, tfs_error *err);

#endif
