/*
 * format.h - the formats: the one table of them (registry.c), each format's operations and
 * the entry points its files share (codec-private; fs/ never sees it).
 *
 * What a format does for a model is the table of operations in model/format_ops.h; each
 * format defines one instance in its own file.  Adding a format: a new file defining its
 * tfs_format_ops, a line in registry.c's table, and its declaration here.
 */
#ifndef TFS_FORMAT_H
#define TFS_FORMAT_H

#include "format_ops.h"
#include "layout.h"

/* The first line of a Git LFS pointer file, which a repository cloned without git-lfs has
 * under the model's own name. */
#define TFS_LFS_MAGIC "version https://git-lfs.github.com/spec/v1"

/* ==== the formats ==== */

/* Each format's table sits with its writer, which names the reader's operations and its
 * own, and reads what it wrote back through the table (so no file's references go round
 * in a circle: reader <- writer + table <- registry, open.c). */
extern const tfs_format_ops tfs_gguf_format;        /* gguf_write.c */
extern const tfs_format_ops tfs_ollama_format;      /* ollama_write.c */
extern const tfs_format_ops tfs_safetensors_format; /* safetensors_write.c */

/* The table, in the order their probes are asked (registry.c), NULL-terminated. */
extern const tfs_format_ops *const tfs_formats[];

/* ==== each format's entry points (readers, writers, images), shared between files ==== */

typedef struct tfs_commit tfs_commit;   /* commit.h */

/* Per-format readers: fill an empty model (created by tfs_model_new) from path. */
int tfs_gguf_read(tfs_model *m, int32_t src, tfs_error *err);
int tfs_safetensors_open(tfs_model *m, const char *path, tfs_error *err);
/* Opens a shard of a sharded set by its file name (as the weight_map says it): adds it to m
 * as a source (its label: name) and sets *src.  0 or an error naming the file or URL. */
typedef int (*tfs_safetensors_shard_opener)(void *ctx, tfs_model *m, const char *name, int32_t *src,
					    tfs_error *err);
/* Reads a sharded set from its index's text (of index_path, a path or URL), each shard
 * added by opener (in the order of their names). */
int tfs_safetensors_open_index(tfs_model *m, const char *index_path, const uint8_t *text,
			       uint64_t len, tfs_safetensors_shard_opener opener, void *ctx,
			       tfs_error *err);
int tfs_ollama_open(tfs_model *m, const char *ref, const tfs_open_opts *o, tfs_error *err);
/* (tfs_model_add_remote_source, a remote source of a model: model/source_impl.h.) */

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
int tfs_safetensors_write_file(const tfs_model *m, const uint32_t *ts, size_t nt,
			       const uint32_t *keys, size_t nk, const json_t *meta, int fd,
			       const char *path, const tfs_write_opts *o, tfs_error *err);
int tfs_safetensors_check_file(const tfs_model *m, const uint32_t *ts, size_t nt,
			       const uint32_t *keys, size_t nk, const json_t *meta,
			       const char *path, tfs_error *err);

/* The GGUF file of m's keys and tensors (gguf_write.c). */
int tfs_gguf_image(tfs_image **out, const tfs_model *m, tfs_error *err);
/* The size of the file tfs_gguf_image lays out, without building its header. */
int tfs_gguf_image_size(const tfs_model *m, uint64_t *size, tfs_error *err);
/* One safetensors file: tensors ts (slots of m), keys as "__metadata__" (+ meta's strings). */
int tfs_safetensors_image(tfs_image **out, const tfs_model *m, const uint32_t *ts, size_t nt,
			  const uint32_t *keys, size_t nk, const json_t *meta, tfs_error *err);
/* Every live tensor and string key of m as one safetensors file (a sharded set merged). */
int tfs_safetensors_image_all(tfs_image **out, const tfs_model *m, tfs_error *err);
/* tfs_safetensors_image with the tensors named names[i] and no keys (mlx_export.c). */
int tfs_safetensors_image_named(tfs_image **out, const tfs_model *m, const uint32_t *ts, size_t nt,
				const char *const *names, const json_t *meta, tfs_error *err);
/* Whether a per-tensor Ollama model has an mlx-lm form (mlx_export.c), and that form. */
bool tfs_mlx_exportable(const tfs_model *m);
int tfs_mlx_image(tfs_image **out, const tfs_model *m, tfs_error *err);

/* ==== the operations the tables name (see format_ops.h for what each does) ==== */

/* GGUF (gguf.c): its probe and open; its rules for a key's value (the reserved padding key,
 * general.alignment a power of two of type uint32), also an Ollama model's GGUF layer's. */
int tfs_gguf_probe(const tfs_probe *p, tfs_error *err);
int tfs_gguf_open_probed(tfs_model *m, const tfs_probe *p, const tfs_open_opts *o,
			 tfs_error *err);
int tfs_gguf_check_kv(const tfs_model *m, const char *key, uint32_t type, const uint8_t *data,
		      uint64_t len, tfs_error *err);
/* Reads back a GGUF file just written and checks it against m and the layout rules
 * (gguf_write.c). */
int tfs_gguf_validate(const tfs_model *m, const char *path, tfs_error *err);
/* w, a file just written and read back, against m, the model written: every key in full,
 * every tensor's type, shape and (sampled) bytes (validate.c; each writer's read-back). */
int tfs_write_validate(const tfs_model *m, const tfs_model *w, tfs_error *err);

/* Safetensors (safetensors.c): probe, open, the layout's free, the rule for a key's value
 * (a UTF-8 string; a sharded set's index metadata may hold scalars), the string rule alone
 * also an Ollama per-tensor model's. */
int tfs_safetensors_probe(const tfs_probe *p, tfs_error *err);
int tfs_safetensors_open_probed(tfs_model *m, const tfs_probe *p, const tfs_open_opts *o,
				tfs_error *err);
void tfs_safetensors_layout_free(void *p);
int tfs_safetensors_check_kv(const tfs_model *m, const char *key, uint32_t type,
			     const uint8_t *data, uint64_t len, tfs_error *err);

/* Ollama: probe, open, the layout's free (ollama.c); the URL operations (ollama_registry.c):
 * a model of the store named by a URL, or of a registry over HTTP(S), and the 404 of a
 * registry's name said so; a store model's staging directory (ollama_store.c):
 * <root>/.tensorfs-staging/<host>/<ns>/<model>/<tag>, or NULL; the config.json (name and
 * text) of a per-tensor model's single-file form (mlx_export.c). */
int tfs_ollama_probe(const tfs_probe *p, tfs_error *err);
int tfs_ollama_open_probed(tfs_model *m, const tfs_probe *p, const tfs_open_opts *o,
			   tfs_error *err);
void tfs_ollama_layout_free(void *p);
int tfs_ollama_open_url(tfs_model **out, const tfs_format_ops *self, const char *url,
			const tfs_open_opts *o, tfs_error *err);
void tfs_ollama_url_not_found(const char *url, tfs_error *err);
char *tfs_ollama_staging_home(const tfs_model *m);
const char *tfs_mlx_config_name(const tfs_model *m);
int tfs_mlx_config_json(tfs_buf *out, const tfs_model *m, tfs_error *err);

#endif
