/*
 * edit.h - changing a model in memory (public).
 */
#ifndef TFS_EDIT_H
#define TFS_EDIT_H

#include "model.h"

/* ==== changing a model (write path) ==== */

/* Sets (adds or replaces) key to an owned payload (ownership passes to the model, also on
 * failure). */
int tfs_model_set_kv(tfs_model *m, const char *key, uint32_t type, uint8_t *data, uint64_t len,
		     tfs_error *err);
int tfs_model_del_kv(tfs_model *m, const char *key, tfs_error *err);
int tfs_model_rename_kv(tfs_model *m, const char *from, const char *to, tfs_error *err);
int tfs_model_rename_tensor(tfs_model *m, const char *from, const char *to, tfs_error *err);
int tfs_model_del_tensor(tfs_model *m, const char *name, tfs_error *err);
/*
 * Sets tensor name's bytes to the whole content of the file at path (added as a
 * new source), adding the tensor if it does not exist.  dtype/n_dims/ne give
 * its type and shape; the file size must equal the bytes they need.
 */
int tfs_model_set_tensor_file(tfs_model *m, const char *name, int dtype, uint32_t n_dims,
			      const int64_t *ne, const char *path, tfs_error *err);
/* One tensor's new bytes in a change of several tensors at once. */
typedef struct {
	const char *name;
	int dtype;
	uint32_t n_dims;
	const int64_t *ne;
	const char *path;
} tfs_tensor_file;
#define TFS_MAX_TENSOR_FILES 4
/*
 * tfs_model_set_tensor_file for n (at most TFS_MAX_TENSOR_FILES) existing tensors at once
 * (an MLX weight and its companions): all of them change, or none (every file and spec is
 * checked first).
 */
int tfs_model_set_tensor_files(tfs_model *m, const tfs_tensor_file *f, size_t n,
			       tfs_error *err);
/* Sets an Ollama layer's bytes; fails (TFS_E_INVALID) when they are not what Ollama accepts
 * for the layer's kind (see tfs_extra_check). */
int tfs_model_set_extra_file(tfs_model *m, const char *name, const char *path, tfs_error *err);
/* Checks the bytes of layer `name` of media_type: text layers (template, system, license,
 * prompt) must be UTF-8, params a JSON object of option values, messages a JSON array of
 * {role, content}, JSON layers and config.json a JSON object.  0 or TFS_E_INVALID. */
int tfs_extra_check(const char *name, const char *media_type, const uint8_t *p, uint64_t n,
		    tfs_error *err);
/*
 * A rename onto an existing name: `to` keeps its slot (place in the file) and takes the
 * bytes of `from` (with the dtype/shape given, which must fit them exactly; a layer's
 * bytes must pass tfs_extra_check for to's kind); `from` is deleted.
 */
int tfs_model_replace_tensor(tfs_model *m, const char *from, const char *to, int dtype,
			     uint32_t n_dims, const int64_t *ne, tfs_error *err);
int tfs_model_replace_extra(tfs_model *m, const char *from, const char *to, tfs_error *err);
int tfs_model_del_extra(tfs_model *m, const char *name, tfs_error *err);

#endif
