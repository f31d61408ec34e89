/*
 * model_impl.h - the model's insides, what the readers and writers of codec/ fill and read
 * (codec-private; fs/ never sees it).
 */
#ifndef TFS_MODEL_IMPL_H
#define TFS_MODEL_IMPL_H

#include "model.h"
#include "format_ops.h"
#include "cursor.h"
#include "strmap.h"
#include "source_impl.h"
#include <string.h>
#include <sys/mman.h>

/* ==== the model ==== */

struct tfs_name_chunk {
	struct tfs_name_chunk *next;
	char text[];
};

struct tfs_model {
	const tfs_format_ops *ops;  /* its format's operations (format_ops.h) */
	char *path;                 /* main file: .gguf / .safetensors / index.json / manifest */
	char *abs_path;             /* realpath of path, taken once at open (NULL: a URL, a name) */

	tfs_kv *kv;       size_t n_kv, cap_kv;
	tfs_tensor *t;    size_t n_t, cap_t;
	tfs_extra *x;     size_t n_x, cap_x;
	tfs_source *src;  size_t n_src, cap_src;
	tfs_strmap kv_map, t_map, x_map;   /* live names -> index */
	/* the keys' names as read, packed NUL-terminated in chunks (no allocation per name) */
	struct tfs_name_chunk *names;
	size_t names_used, names_cap;

	bool changed;               /* any set/del/rename since open */

	/* GGUF (also the model layer of a classic Ollama model) */
	uint32_t gguf_version;
	uint32_t alignment;         /* general.alignment or 32 */
	uint64_t data_offset;       /* absolute start of the GGUF data section */

	/* format-private state (safetensors shards, Ollama manifest), freed by ops->free_priv */
	void *priv;

	/* views/: the GGUF this model shows as too (a Hugging Face repo's, llama.cpp's
	 * converter's), owned; or why there is none (NULL: no view was asked for) */
	struct tfs_model *gguf_view;
	char *gguf_view_why;
	/* views/hf_export.c: the model as a Hugging Face repo (hf/), freed first by
	 * hf_repo_free; or why it has none (NULL: none was made) */
	void *hf_repo;
	void (*hf_repo_free)(void *repo);
	char *hf_repo_why;
	/* views/: its projector (mmproj.gguf: the converter's --mmproj), owned; or why there
	 * is none (NULL: none to show) */
	struct tfs_model *mmproj;
	char *mmproj_why;
	/* views/: what a view is computed from (a quantized view's state: the model it
	 * quantizes, the plan, the cache), freed by owner_free after the view's sources */
	void *owner;
	void (*owner_free)(void *owner);
	/* Optional: stops the owner's background threads (tfs_model_quiesce). */
	void (*owner_quiesce)(void *owner);
};

/* The name maps' callbacks: the name of kv / tensor / extra slot i of the model ctx. */
const char *tfs_kv_name(const void *ctx, uint32_t i, size_t *len);
const char *tfs_t_name(const void *ctx, uint32_t i, size_t *len);
const char *tfs_x_name(const void *ctx, uint32_t i, size_t *len);

/* Allocates an empty model of the given format (formats/format.h: &tfs_gguf_format ...). */
int tfs_model_new(tfs_model **out, const tfs_format_ops *ops, const char *path,
		  tfs_error *err);
/* Opens and maps a file as a source; *idx gets its index. label may be NULL (= basename). */
int tfs_model_add_source(tfs_model *m, const char *path, const char *label, int32_t *idx,
			 tfs_error *err);
/* Adds size bytes at data (borrowed, not copied) as a source with no file (fd -1). */
int tfs_model_add_mem_source(tfs_model *m, const char *name, const uint8_t *data, uint64_t size,
			     int32_t *idx, tfs_error *err);
/* Opens url as a remote source (tfs_source_open_remote); its label is the URL's last path
 * segment.  *idx gets its index. */
int tfs_model_add_remote_source(tfs_model *m, const char *url, const tfs_open_opts *o,
				int32_t *idx, tfs_error *err);
/* Adds a computed source of size bytes (source_impl.h: tfs_computed_ops), taking ctx over
 * (released on failure too); path and label are label.  *idx gets its index. */
int tfs_model_add_computed_source(tfs_model *m, const char *label, const tfs_computed_ops *ops,
				  void *ctx, uint64_t size, int32_t *idx, tfs_error *err);
/* A tensor of a view (views/): its name, type, shape and size, and where its bytes are:
 * source src at offset (a copy of the base's), or, with ops, a new computed source of nbytes
 * bytes labelled "NAME.LABEL" (ctx taken over as tfs_model_add_computed_source takes it). */
typedef struct {
	const char *name;
	int dtype;                   /* tfs_dtype_id */
	uint32_t n_dims;             /* at most TFS_MAX_DIMS */
	const int64_t *ne;           /* n_dims of them, GGUF order */
	uint64_t nbytes;
	int32_t src;                 /* without ops: the source and offset of its bytes */
	uint64_t offset;
	const tfs_computed_ops *ops; /* or its bytes computed: ops, ctx and the label's suffix */
	void *ctx;
	const char *label;
} tfs_view_tensor;
/* Appends the view tensor vt to m (its computed source first, when it has one). */
int tfs_model_add_view_tensor(tfs_model *m, const tfs_view_tensor *vt, tfs_error *err);
/* Gives m its GGUF view (owned from then on: freed with m), or the reason it has none
 * (copied; view NULL). */
void tfs_model_set_gguf_view(tfs_model *m, tfs_model *view, const char *why);
/* Gives m its Hugging Face repo (views/hf_export.c: owned from then on, freed with m by
 * free_fn, first), or the reason it has none (copied; repo NULL). */
void tfs_model_set_hf_repo(tfs_model *m, void *repo, void (*free_fn)(void *), const char *why);
void *tfs_model_hf_repo(const tfs_model *m);
const char *tfs_model_hf_repo_why(const tfs_model *m);
/* Gives m its projector (owned from then on), or the reason it has none (copied). */
void tfs_model_set_mmproj(tfs_model *m, tfs_model *mmproj, const char *why);
/* m's GGUF view, no longer m's (the caller owns it), or NULL. */
tfs_model *tfs_model_take_gguf_view(tfs_model *m);
/* The output's final path: o->output or the source; a symlink is followed, so the link
 * keeps pointing at the (replaced) file.  Allocated. */
char *tfs_output_path(const tfs_model *m, const tfs_write_opts *o);
/* Appends a key whose payload is borrowed (points into a source mapping).  Rejects duplicates
 * (TFS_E_FORMAT "duplicate key"), names with NUL bytes.  name_len bytes of name are copied. */
int tfs_model_push_kv(tfs_model *m, const char *name, size_t name_len, uint32_t type,
		      const uint8_t *data, uint64_t len, tfs_error *err);
/* Appends a tensor (name copied; *out points at it until the next push); rejects duplicates.
 * All numeric fields are zeroed, src = -1, q_* = -1. */
int tfs_model_push_tensor(tfs_model *m, const char *name, size_t name_len, tfs_tensor **out,
			  tfs_error *err);
int tfs_model_push_extra(tfs_model *m, const char *name, const char *media_type, int32_t src,
			 uint64_t offset, uint64_t size, tfs_error *err);

/* madvise()s the page-aligned span of [off, off+len) of source src: MADV_WILLNEED before
 * reading through the mapping, MADV_DONTNEED after (keeps the daemon's RSS flat; the
 * page cache keeps the data). */
static inline void tfs_source_advise(const tfs_model *m, int32_t src, uint64_t off, uint64_t len, int advice)
{
	if (src < 0 || (size_t)src >= m->n_src || !len)
		return; /* (a source without a mapping, memory or remote, is never advised) */
	uint64_t pg = 4096, a = off, b = off + len;
	if (advice == MADV_DONTNEED) {
		/* only pages wholly inside the range: neighbours may be in use */
		a = (off + pg - 1) & ~(pg - 1);
		b &= ~(pg - 1);
		if (b <= a)
			return;
	}
	tfs_source_madvise(&m->src[src], a, b - a, advice);
}

/* Reads len staged values' bytes at off of fd (TFS_E_INVALID when they end early) / writes
 * requantized bytes at off of fd, whole; requant.c, mlx.c. */
int tfs_staged_pread(int fd, void *buf, size_t len, uint64_t off, tfs_error *err);
int tfs_staged_pwrite(int fd, const void *buf, size_t len, uint64_t off, tfs_error *err);

/* The f32 view of an MLX-quantized tensor (t->q.mode != TFS_QMODE_NONE): called by
 * tfs_tensor_read_f32 (model.c); mlx.c holds it, beside the MLX math after it checked [first, first + count) is in range. */
int tfs_mlx_read_f32(const tfs_model *m, const tfs_tensor *t, uint64_t first, uint64_t count,
		     float *out, tfs_error *err);

/* ==== edit.c ==== */

bool tfs_model_gguf_encoded(const tfs_model *m);
bool tfs_utf8_valid(const char *s, size_t n);
bool tfs_safetensors_dtype_ok(int dtype);

/* tfs_source_copy from source si of m, the range checked to lie inside it first. */
int tfs_model_copy(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t si,
		   uint64_t off, uint64_t len, uint32_t blk, const tfs_io_progress *progress,
		   tfs_error *err);

#endif
