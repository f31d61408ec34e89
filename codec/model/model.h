/*
 * model.h - the format-neutral model: its keys, tensors, extra files and sources, their
 * accessors, and reading a tensor's bytes or its f32 view (public).
 *
 * Every _open has one _free; getters return pointers borrowed until the model is freed
 * or changed.
 */
#ifndef TFS_MODEL_H
#define TFS_MODEL_H

#include "../base/base.h"
#include "../num/mlx_math.h"

typedef struct tfs_source tfs_source;   /* source.h */

/* ==== the model ==== */

typedef enum {
	TFS_FMT_GGUF = 1,
	TFS_FMT_SAFETENSORS,   /* one file or a sharded set */
	TFS_FMT_OLLAMA,        /* an Ollama manifest: classic (GGUF layer) or per-tensor */
} tfs_format;

#define TFS_MAX_DIMS 8

/* 32 bytes: a model may have millions of keys (the daemon's memory is bounded by the header). */
typedef struct {
	char *name;            /* the model's (its name arena, or malloc'd: name_owned); any
				* byte but NUL */
	const uint8_t *data;   /* payload (see above) */
	uint64_t len;
	uint32_t type;         /* tfs_gguf_type */
	bool deleted;
	bool data_owned;       /* data was malloc'd by the model (an edit), not borrowed */
	bool name_owned;       /* name was malloc'd (a rename), not in the name arena */
} tfs_kv;

typedef struct {
	char *name;            /* owned */
	int dtype;             /* tfs_dtype_id */
	uint32_t n_dims;       /* 0 = scalar */
	int64_t ne[TFS_MAX_DIMS]; /* GGUF order: ne[0] varies fastest (numpy's last axis) */
	uint64_t nbytes;       /* stored bytes */
	int32_t src;           /* index of the source file holding the bytes */
	uint64_t offset;       /* absolute offset of the bytes in that source */
	/* MLX quantization (Ollama per-tensor models): the f32 view of this packed
	 * U32 tensor is computed from it and its companion tensors. */
	tfs_mlx_desc q;        /* q.mode == TFS_QMODE_NONE for ordinary tensors */
	int32_t q_scale, q_bias, q_gscale; /* companion tensor indices, or -1 */
	bool deleted;
} tfs_tensor;

/* A file a source holds that is neither metadata nor a tensor (Ollama layers). */
typedef struct {
	char *name;            /* file name under layers/ ("template", "params", "config.json") */
	char *media_type;      /* e.g. application/vnd.ollama.image.template */
	int32_t src;
	uint64_t offset;
	uint64_t size;
	bool deleted;
} tfs_extra;

typedef struct tfs_model tfs_model;

void tfs_model_free(tfs_model *m);
/*
 * Stops every thread working for m in the background (a quantized view's pool and its
 * look-ahead, a remote file's readahead) and waits for them; work they had not finished
 * is dropped, and they start again when a later read needs them.  Call it before fork():
 * a child inherits the state of threads it does not have (a condition variable's
 * waiters), and freeing the model there would wait for them forever.
 */
void tfs_model_quiesce(tfs_model *m);
tfs_format tfs_model_format(const tfs_model *m);
const char *tfs_model_format_name(const tfs_model *m);   /* "gguf", "safetensors", "ollama" */
/* Questions the driver asks of a model, answered by its format (by_format.c): */
/* Whether layers/ is shown: the model holds extra files, or its format has them (Ollama). */
bool tfs_model_has_layers(const tfs_model *m);
/* The dtype of a new tensor of plain bytes: U8 where the format has it, else I8 (GGUF). */
int tfs_model_bytes_dtype(const tfs_model *m);
/* Whether index.json's "version", "alignment" and "data_offset" are the facts of the model
 * file's own header (a GGUF file; not the GGUF layer of an Ollama model). */
bool tfs_model_header_facts(const tfs_model *m);
/* The directory the format keeps this model's staging in (an Ollama store's model:
 * <root>/.tensorfs-staging/<host>/<ns>/<model>/<tag>), allocated, its parents not made;
 * NULL: none (use the one beside the output) or out of memory. */
char *tfs_model_staging_home(const tfs_model *m);
/* Whether m is read over HTTP(S) in a format tensorfs cannot write from there (an Ollama
 * registry's model: tensorfs writes Ollama models into a local store). */
bool tfs_model_remote_read_only(const tfs_model *m);
const char *tfs_model_path(const tfs_model *m);          /* the resolved main file (GGUF file,
                                                            index.json / .safetensors, manifest) */
/* Every slot, deleted ones included (check ->deleted); indices are stable for the model's life. */
size_t tfs_model_n_kv(const tfs_model *m);
const tfs_kv *tfs_model_kv(const tfs_model *m, size_t i);
size_t tfs_model_n_tensors(const tfs_model *m);
const tfs_tensor *tfs_model_tensor(const tfs_model *m, size_t i);
size_t tfs_model_n_extras(const tfs_model *m);
const tfs_extra *tfs_model_extra(const tfs_model *m, size_t i);
size_t tfs_model_n_sources(const tfs_model *m);
const tfs_source *tfs_model_source(const tfs_model *m, size_t i);
/* Index of the live key / tensor / extra of that name, or -1. */
long tfs_model_find_kv(const tfs_model *m, const char *name);
long tfs_model_find_tensor(const tfs_model *m, const char *name);
long tfs_model_find_extra(const tfs_model *m, const char *name);

/* Reads len bytes of tensor i's stored bytes from byte offset off (clipped at its end);
 * returns the count read or a negative tfs_code. */
int64_t tfs_tensor_read_raw(const tfs_model *m, size_t i, uint64_t off, uint64_t len, void *out,
			    tfs_error *err);
/* The same, all len bytes or an error (TFS_E_IO) naming the file, the tensor and the offset
 * where its bytes ran out: for readers whose plan says the range is inside the tensor. */
int tfs_tensor_read_exact(const tfs_model *m, size_t i, uint64_t off, uint64_t len, void *out,
			  tfs_error *err);

/*
 * The f32 view: number of float32 values (0 when there is none: then *why, if
 * not NULL, says why, e.g. "no float conversion for this dtype"), and its shape
 * in GGUF order (ne[0] fastest).  For an MLX-quantized tensor that is the
 * logical, dequantized shape; for C64 a trailing axis of 2 (re, im) is added.
 */
uint64_t tfs_tensor_f32_count(const tfs_model *m, size_t i, const char **why);
/* Whether tensor i has an f32 view at all (an empty tensor has one, of 0 values);
 * when not, *why (if not NULL) says why. */
bool tfs_tensor_has_f32(const tfs_model *m, size_t i, const char **why);
int tfs_tensor_f32_shape(const tfs_model *m, size_t i, uint32_t *n_dims,
			 int64_t ne[TFS_MAX_DIMS + 1]);
/* Reads count float32 values of the f32 view starting at value index first.
 * Dequantizes only the blocks touched. */
int tfs_tensor_read_f32(const tfs_model *m, size_t i, uint64_t first, uint64_t count, float *out,
			tfs_error *err);

#endif
