/*
 * layout.h - what the safetensors and Ollama readers leave behind for their writers
 * (codec-private; fs/ never sees it).  Each format's entry points: format.h.
 *
 * A model opened from safetensors or from an Ollama manifest keeps, in m->priv
 * (freed by m->ops->free_priv), the layout of its source files that the model itself
 * does not describe: which file each tensor came from is t->src, its place is
 * t->offset; what is recorded here is the rest the writer needs to write the
 * same files again.
 */
#ifndef TFS_LAYOUT_H
#define TFS_LAYOUT_H

#include "model_impl.h"
#include "image_impl.h"

#include <jansson.h>

/* ==== safetensors (m->ops == &tfs_safetensors_format) ==== */

/*
 * On-disk layout of one safetensors file:
 *  1. u64 little-endian N: the header length (N <= 100,000,000);
 *  2. N bytes of UTF-8 JSON: an object name -> {"dtype", "shape", "data_offsets": [begin, end]}
 *     plus an optional "__metadata__" object string -> string;
 *  3. the byte buffer: every tensor's bytes, contiguous from 0 in offset order, and
 *     nothing after the last one.  Tensor offsets in m->t are absolute (8 + N + begin).
 */
typedef struct {
	int32_t src;            /* m->src index of this file */
	uint64_t header_len;    /* N; the byte buffer starts at 8 + N */
	uint32_t n_tensors;     /* tensors read from it (those with t->src == src) */
	bool has_metadata;      /* it had a "__metadata__" object (absent and null: false) */
	char **meta_keys;       /* the keys of its "__metadata__", in file order */
	uint32_t n_meta_keys;
} tfs_safetensors_shard;

typedef struct {
	/* A single .safetensors file: n_shards == 1, index_path == NULL. */
	char *index_path;       /* model.safetensors.index.json of a sharded set */
	char *index_rest;       /* that document as compact JSON without its "weight_map"
	                           (usually {"metadata": {...}}), keys in file order */
	char **index_meta_keys; /* the keys of the index's "metadata" object (they are model keys:
	                           strings as strings, integers as UINT64/INT64, reals as FLOAT64,
	                           booleans as BOOL, arrays/objects as their compact JSON string) */
	uint32_t n_index_meta_keys;
	tfs_safetensors_shard *shards;   /* in m->src order; shard files sorted by name */
	size_t n_shards;
} tfs_safetensors_layout;

/*
 * Parses the safetensors file already added as source src into m: validates it
 * exactly as the reference crate does (plus: duplicate JSON keys and more than
 * TFS_MAX_DIMS dims are rejected) and pushes every tensor, in data order, with
 * absolute offsets.  A tensor whose name is already in m is an error naming both
 * sources.  On success *header_len is N and, if metadata is not NULL, *metadata
 * is the "__metadata__" object (a new reference the caller json_decref()s) or NULL
 * when absent/null.  No keys are pushed.  TFS_E_FORMAT with a message naming the
 * file on any defect.
 */
int tfs_safetensors_parse(tfs_model *m, int32_t src, uint64_t *header_len, json_t **metadata,
			  tfs_error *err);

/* ==== Ollama (m->ops == &tfs_ollama_format) ==== */

/* What a manifest layer became in the model. */
typedef enum {
	TFS_OLLAMA_MODEL,           /* the GGUF model layer: the model's keys and tensors */
	TFS_OLLAMA_TENSOR,          /* a safetensors blob: tensors [first_tensor, +n_tensors) */
	TFS_OLLAMA_EXTRA,           /* a file under layers/: m->x[extra] */
} tfs_ollama_role;

typedef struct {
	char *media_type;       /* as in the manifest */
	char *digest;           /* "sha256:<64 hex>" as in the manifest */
	uint64_t size;
	char *name;             /* the layer's "name" (tensor and json layers), or NULL */
	char *from;             /* the layer's "from", or NULL */
	tfs_ollama_role role;
	int32_t src;            /* m->src index of the blob */
	int32_t extra;          /* TFS_OLLAMA_EXTRA: index in m->x */
	uint32_t first_tensor, n_tensors; /* TFS_OLLAMA_TENSOR */
} tfs_ollama_layer;

typedef struct {
	char *root;             /* the store: <root>/manifests/..., <root>/blobs/sha256-<hex>;
	                           NULL for a registry's model over HTTP(S) */
	char *blob_base;        /* over HTTP(S): "<base>/v2/<ns>/<model>/blobs/" (a blob's URL is
	                           it and its digest), else NULL */
	uint8_t *manifest_buf;  /* over HTTP(S): the manifest as fetched (its source's bytes) */
	uint64_t manifest_len;
	char *manifest_path;    /* == m->path */
	char *host, *ns, *model, *tag; /* the name's parts when the manifest sits at
	                                  <root>/manifests/<host>/<ns>/<model>/<tag>, else NULL */
	int32_t manifest_src;   /* m->src index of the manifest (also the extra manifest.json) */
	char *manifest_rest;    /* the manifest as compact JSON without config/layers
	                           (schemaVersion, mediaType and unknown keys, in file order) */
	tfs_ollama_layer config;    /* role TFS_OLLAMA_EXTRA, the extra "config.json" */
	tfs_ollama_layer *layers;   /* in manifest order */
	size_t n_layers;
} tfs_ollama_layout;

/*
 * Names under layers/: the config blob is "config.json", the manifest
 * "manifest.json"; a layer application/vnd.ollama.image.<kind> is "<kind>" (the
 * second of a kind "<kind>.1", ...).  A json layer is its "name" with '%' and '/'
 * written as %25 and %2F; when that is one of the names above or starts with
 * "json:", "json:" is put in front (so "config.json" from a json layer is
 * "json:config.json").  tfs_ollama_json_name() undoes that.
 */
#define TFS_OLLAMA_JSON_PREFIX "json:"
/* The json layer name a layers/ file name stands for (allocated), or NULL when it is not
 * a valid encoding. */
char *tfs_ollama_json_name(const char *file);

#endif
