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

/* ==== what is attached to a model ====
 * A layer above the model derives things from it and attaches them to it (views/: a Hugging
 * Face repo's GGUF view and its projector, a GGUF model's Hugging Face form), each as the
 * object of a kind that layer defines, or the reason it could not be made.  The model names
 * none of them: the kind says how its object is freed and stopped and whether index.json
 * lists it, and its address is the key (one attachment of each kind per model). */
typedef struct tfs_attach_kind {
	const char *name;             /* for messages ("the GGUF view") */
	void (*free)(void *obj);      /* frees obj, with the model (NULL: the model does not own it) */
	void (*quiesce)(void *obj);   /* stops its threads (tfs_model_quiesce; NULL: it has none) */
	/* index.json: obj is a model (a tfs_model), listed in the document's head under
	 * index_member (NULL: not listed) as a file named index_file (NULL: its own image name,
	 * model.gguf), or, when there is none, with the reason: {"unavailable": why} */
	const char *index_member;
	const char *index_file;
} tfs_attach_kind;

struct tfs_attached {
	const tfs_attach_kind *kind;
	void *obj;                    /* NULL: none */
	char *why;                    /* why there is none (NULL: none was asked for) */
};

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

	/* what a layer above derived from the model and attached to it, in the order attached
	 * (tfs_model_attach below; the kinds are that layer's: the model names none of them) */
	struct tfs_attached *att;
	size_t n_att;
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
/* Attaches obj of kind to m, in place of what of kind m had (freed), or, with obj NULL, the
 * reason there is none (copied; NULL: nothing).  An attachment of a new kind goes after the
 * others (index.json lists them in that order; tfs_model_free frees them in the reverse
 * order, before anything of m's: they may read through m's sources).  TFS_E_NOMEM when
 * out of memory: obj is freed by its kind, what m had of kind is gone all the same. */
int tfs_model_attach(tfs_model *m, const tfs_attach_kind *kind, void *obj, const char *why,
		     tfs_error *err);
/* What of kind is attached to m, or NULL; then _why says why there is none (NULL: none was
 * asked for). */
void *tfs_model_attached(const tfs_model *m, const tfs_attach_kind *kind);
const char *tfs_model_attached_why(const tfs_model *m, const tfs_attach_kind *kind);
/* What of kind is attached to m, no longer m's (the caller owns it), or NULL. */
void *tfs_model_detach(tfs_model *m, const tfs_attach_kind *kind);
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
