/*
 * ollama_impl.h - what the files of the Ollama reader share (codec-private: only
 * codec/formats/ollama*.c include it).
 *
 *   ollama.c           the layout, the manifest and its layers, tfs_ollama_open, the format
 *   ollama_store.c     model names and the store: where a name's manifest is
 *   ollama_blob.c      opening a layer's blob and checking its size and sha256
 *   ollama_quant.c     which tensors of a per-tensor model are MLX-quantized
 *   ollama_registry.c  a registry's model over HTTP(S)
 *   ollama_write.c     the writer
 */
#ifndef TFS_OLLAMA_IMPL_H
#define TFS_OLLAMA_IMPL_H

#include "format.h"

#include <jansson.h>

#define MT_PREFIX "application/vnd.ollama.image."
#define MT_MODEL MT_PREFIX "model"
#define MT_TENSOR MT_PREFIX "tensor"
#define MT_JSON MT_PREFIX "json"
#define MT_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/* ==== model names and the store (ollama_store.c) ==== */

/* A model name's parts (ollama types/model/name.go). */
typedef struct {
	char host[351], ns[81], model[81], tag[81];
} tfs_ollama_name;

/* [scheme://][host/][namespace/]model[:tag], defaults registry.ollama.ai/library/?:latest. */
int tfs_ollama_parse_name(tfs_ollama_name *n, const char *ref, tfs_error *err);
/* The last '/' in [s, end), or NULL. */
const char *tfs_ollama_last_slash(const char *s, const char *end);
/* "a/b/c" (c NULL: "a/b"), allocated; NULL when out of memory. */
char *tfs_ollama_join3(const char *a, const char *b, const char *c);
/* Finds the store of a manifest path: the directory above its last "manifests"
 * component (after realpath); <root>/manifests/<host>/<ns>/<model>/<tag> also names it. */
int tfs_ollama_locate_store(tfs_ollama_layout *lay, const char *path, tfs_error *err);
/* The manifest path of a model reference under the store root. */
int tfs_ollama_resolve_ref(const char *ref, const tfs_open_opts *o, char **manifest,
			   tfs_error *err);

/* ==== blobs (ollama_blob.c) ==== */

/* Opens (once per digest) the blob of layer l, checks its size and, when due, its sha256. */
int tfs_ollama_open_blob(tfs_model *m, tfs_ollama_layout *lay, tfs_ollama_layer *l,
			 bool always_hash, const tfs_open_opts *o, tfs_error *err);

/* ==== MLX-quantized tensors (ollama_quant.c) ==== */

/* Marks the packed tensors among [first, end) (pushed from one blob, whose __metadata__ is
 * meta) as MLX-quantized, after checking their companions' shapes so that every later read
 * stays in bounds. */
int tfs_ollama_setup_quant(tfs_model *m, size_t first, size_t end, const json_t *meta,
			   const char *blob, tfs_error *err);

/* ==== the manifest (ollama.c) ==== */

/* Reads the manifest (a file of the store, or lay->manifest_buf as fetched) into lay;
 * *out: its JSON document (the caller's to free, also on failure). */
int tfs_ollama_read_manifest(tfs_model *m, tfs_ollama_layout *lay, json_t **out, tfs_error *err);
/* Opens every layer's blob and adds what it holds to m: keys and tensors, extra files. */
int tfs_ollama_add_layers(tfs_model *m, tfs_ollama_layout *lay, const tfs_open_opts *o,
			  tfs_error *err);

#endif
