/*
 * open.h - opening a model from a path, a name, a URL or memory (public).
 */
#ifndef TFS_OPEN_H
#define TFS_OPEN_H

#include "../model/model.h"

/*
 * Opens source: a .gguf file, a .safetensors file, a model.safetensors.index.json
 * (or the directory holding one), an Ollama manifest path, or an Ollama model
 * reference ("llama3", "llama3:8b", "host/ns/model:tag").  Reads headers only,
 * never tensor data.  On failure *out is NULL and err names the file and the
 * problem.  opts may be NULL.
 */
int tfs_model_open(tfs_model **out, const char *source, const tfs_open_opts *opts,
		   tfs_error *err);
/*
 * Opens a GGUF or a single safetensors file held in memory (the fuzz harnesses use it: no
 * file per input).  The format is told by the magic as tfs_model_open does; name stands for
 * the path in messages.  data is borrowed, not copied: it must outlive the model.  Such a
 * model is read like any other, but cannot be written (it has no file to copy from).
 */
int tfs_model_open_mem(tfs_model **out, const char *name, const void *data, size_t size,
		       tfs_error *err);

/* Whether source names a model of an Ollama registry over HTTP(S) (its manifest's URL, or an
 * Ollama name with a scheme: see tfs_model_open); by its form only, nothing is fetched. */
bool tfs_is_registry_source(const char *source);

#endif
