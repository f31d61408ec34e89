/*
 * layout.h - what the safetensors and Ollama readers leave behind for their writers, and
 * each format's reader, writer and image entry points (codec-private; fs/ never sees it).
 *
 * A model opened from safetensors or from an Ollama manifest keeps, in m->priv
 * (freed by m->priv_free), the layout of its source files that the model itself
 * does not describe: which file each tensor came from is t->src, its place is
 * t->offset; what is recorded here is the rest the writer needs to write the
 * same files again.
 */
#ifndef TFS_LAYOUT_H
#define TFS_LAYOUT_H

#include "model_impl.h"
#include "image_impl.h"
#include "open.h"

#include <jansson.h>

/* ==== safetensors (m->format == TFS_FMT_SAFETENSORS) ==== */

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
} tfs_st_shard;

typedef struct {
	/* A single .safetensors file: n_shards == 1, index_path == NULL. */
	char *index_path;       /* model.safetensors.index.json of a sharded set */
	char *index_rest;       /* that document as compact JSON without its "weight_map"
	                           (usually {"metadata": {...}}), keys in file order */
	char **index_meta_keys; /* the keys of the index's "metadata" object (they are model keys:
	                           strings as strings, integers as UINT64/INT64, reals as FLOAT64,
	                           booleans as BOOL, arrays/objects as their compact JSON string) */
	uint32_t n_index_meta_keys;
	tfs_st_shard *shards;   /* in m->src order; shard files sorted by name */
	size_t n_shards;
} tfs_st_layout;

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
int tfs_st_parse(tfs_model *m, int32_t src, uint64_t *header_len, json_t **metadata,
		 tfs_error *err);

/* ==== Ollama (m->format == TFS_FMT_OLLAMA) ==== */

/* What a manifest layer became in the model. */
typedef enum {
	TFS_OL_MODEL,           /* the GGUF model layer: the model's keys and tensors */
	TFS_OL_TENSOR,          /* a safetensors blob: tensors [first_tensor, +n_tensors) */
	TFS_OL_EXTRA,           /* a file under layers/: m->x[extra] */
} tfs_ol_role;

typedef struct {
	char *media_type;       /* as in the manifest */
	char *digest;           /* "sha256:<64 hex>" as in the manifest */
	uint64_t size;
	char *name;             /* the layer's "name" (tensor and json layers), or NULL */
	char *from;             /* the layer's "from", or NULL */
	tfs_ol_role role;
	int32_t src;            /* m->src index of the blob */
	int32_t extra;          /* TFS_OL_EXTRA: index in m->x */
	uint32_t first_tensor, n_tensors; /* TFS_OL_TENSOR */
} tfs_ol_layer;

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
	tfs_ol_layer config;    /* role TFS_OL_EXTRA, the extra "config.json" */
	tfs_ol_layer *layers;   /* in manifest order */
	size_t n_layers;
} tfs_ol_layout;

/*
 * Names under layers/: the config blob is "config.json", the manifest
 * "manifest.json"; a layer application/vnd.ollama.image.<kind> is "<kind>" (the
 * second of a kind "<kind>.1", ...).  A json layer is its "name" with '%' and '/'
 * written as %25 and %2F; when that is one of the names above or starts with
 * "json:", "json:" is put in front (so "config.json" from a json layer is
 * "json:config.json").  tfs_ol_json_name() undoes that.
 */
#define TFS_OL_JSON_PREFIX "json:"
/* The json layer name a layers/ file name stands for (allocated), or NULL when it is not
 * a valid encoding. */
char *tfs_ol_json_name(const char *file);

/* ==== per-format entry points (readers, writers, images) ==== */

typedef struct tfs_commit tfs_commit;   /* commit.h */

/* Per-format readers: fill an empty model (created by tfs_model_new) from path. */
int tfs_gguf_read(tfs_model *m, int32_t src, tfs_error *err);
int tfs_safetensors_open(tfs_model *m, const char *path, tfs_error *err);
/* Opens a shard of a sharded set by its file name (as the weight_map says it): adds it to m
 * as a source (its label: name) and sets *src.  0 or an error naming the file or URL. */
typedef int (*tfs_st_shard_opener)(void *ctx, tfs_model *m, const char *name, int32_t *src,
				   tfs_error *err);
/* Reads a sharded set from its index's text (of index_path, a path or URL), each shard
 * added by opener (in the order of their names). */
int tfs_safetensors_open_index(tfs_model *m, const char *index_path, const uint8_t *text,
			       uint64_t len, tfs_st_shard_opener opener, void *ctx,
			       tfs_error *err);
int tfs_ollama_open(tfs_model *m, const char *ref, const tfs_open_opts *o, tfs_error *err);
/* A model of an Ollama registry over HTTP(S) (the registry API Ollama pulls from): source is
 * its manifest's URL (http(s)://HOST/v2/NS/MODEL/manifests/TAG), or an Ollama name with a
 * scheme (http(s)://HOST/NS/MODEL:TAG) that is not in the local store.  The manifest is
 * fetched whole, each blob is a remote source (HOST/v2/NS/MODEL/blobs/DIGEST).  1 when
 * source is neither (or, a name, has no manifest there: the caller tries it as a file). */
int tfs_ollama_open_registry(tfs_model *m, const char *source, const tfs_open_opts *o,
			     tfs_error *err);
/* Opens url as a remote source (open.c): its header fetched on demand, its data read
 * through the block cache; its label is the URL's last path segment. */
int tfs_model_add_remote_source(tfs_model *m, const char *url, const tfs_open_opts *o,
				int32_t *idx, tfs_error *err);

/* Reads one safetensors file, source src, as the model's only shard. */
int tfs_safetensors_open_src(tfs_model *m, int32_t src, tfs_error *err);

/* Per-format writers: write the model's current state to a new file at tmp_path
 * (already-open fd), used by tfs_model_write. */
int tfs_gguf_write(const tfs_model *m, int fd, const char *path, const tfs_write_opts *o,
		   tfs_error *err);

/* The key a GGUF writer adds, an array of zero bytes, to move the data section so that
 * unchanged tensors keep their block offsets (extents shared with the source); readers hide it. */
#define TFS_GGUF_PADDING_KEY "tensorfs.padding"

int tfs_safetensors_write(tfs_model *m, const tfs_write_opts *o, tfs_commit *c, tfs_error *err);
int tfs_ollama_write(tfs_model *m, const tfs_write_opts *o, tfs_commit *c, tfs_error *err);
int tfs_st_write_file(const tfs_model *m, const uint32_t *ts, size_t nt, const uint32_t *keys,
		      size_t nk, const json_t *meta, int fd, const char *path,
		      const tfs_write_opts *o, tfs_error *err);
int tfs_st_check_file(const tfs_model *m, const uint32_t *ts, size_t nt, const uint32_t *keys,
		      size_t nk, const json_t *meta, const char *path, tfs_error *err);

/* The GGUF file of m's keys and tensors (gguf_write.c). */
int tfs_gguf_image(tfs_image **out, const tfs_model *m, tfs_error *err);
/* The size of the file tfs_gguf_image lays out, without building its header. */
int tfs_gguf_image_size(const tfs_model *m, uint64_t *size, tfs_error *err);
/* One safetensors file: tensors ts (slots of m), keys as "__metadata__" (+ meta's strings). */
int tfs_st_image(tfs_image **out, const tfs_model *m, const uint32_t *ts, size_t nt,
		 const uint32_t *keys, size_t nk, const json_t *meta, tfs_error *err);
/* Every live tensor and string key of m as one safetensors file (a sharded set merged). */
int tfs_st_image_all(tfs_image **out, const tfs_model *m, tfs_error *err);
/* tfs_st_image with the tensors named names[i] and no keys (mlx_export.c). */
int tfs_st_image_named(tfs_image **out, const tfs_model *m, const uint32_t *ts, size_t nt,
		       const char *const *names, const json_t *meta, tfs_error *err);
/* Whether a per-tensor Ollama model has an mlx-lm form (mlx_export.c), and that form. */
bool tfs_mlx_exportable(const tfs_model *m);
int tfs_mlx_image(tfs_image **out, const tfs_model *m, tfs_error *err);

#endif
