/*
 * tensorfs.h - the format library behind tensorfs (public interface).
 *
 * codec/ knows nothing of FUSE.  It opens a model source (GGUF, safetensors,
 * a sharded safetensors set, an Ollama store entry) into one format-neutral,
 * mutable in-memory model: metadata keys, tensors, extra files (Ollama
 * layers), and the source files their bytes live in.  The same model can be
 * changed and serialized again in the source's format.
 *
 * Conventions (libgit2 style):
 *  - functions return 0 / a negative tfs_code, out-params come first, and
 *    fill a caller-provided tfs_error with a message naming the file and
 *    the problem;
 *  - every _open has one _free; getters return pointers borrowed until the
 *    model is freed or changed.
 */
#ifndef TENSORFS_H
#define TENSORFS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ==== errors ==== */

typedef enum {
	TFS_OK = 0,
	TFS_E_IO = -1,          /* a system call failed; err->sys_errno says which errno */
	TFS_E_FORMAT = -2,      /* malformed or unsupported input file */
	TFS_E_NOMEM = -3,
	TFS_E_NOTFOUND = -4,    /* no such key / tensor / file */
	TFS_E_INVALID = -5,     /* a value or request that cannot be applied */
	TFS_E_UNSUPPORTED = -6, /* valid, but tensorfs cannot do it (e.g. no f32 view) */
	TFS_E_DIGEST = -7,      /* a blob's size or sha256 does not match its manifest */
	TFS_E_EXISTS = -8,      /* the name is taken */
} tfs_code;

#define TFS_ERRMSG_MAX 1024

typedef struct {
	int code;       /* a tfs_code */
	int sys_errno;  /* with TFS_E_IO: the errno; 0 otherwise */
	char msg[TFS_ERRMSG_MAX];
} tfs_error;

/* Records code and a printf-style message in e (if e is not NULL); returns code. */
int tfs_error_set(tfs_error *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* TFS_E_IO with errno sys_errno; ": strerror(sys_errno)" is appended. */
int tfs_error_sys(tfs_error *e, int sys_errno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void tfs_error_clear(tfs_error *e);

/* ==== growable byte buffer ==== */

typedef struct {
	char *data;   /* always NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
} tfs_buf;

int tfs_buf_reserve(tfs_buf *b, size_t extra);               /* 0 or TFS_E_NOMEM */
int tfs_buf_append(tfs_buf *b, const void *p, size_t n);
int tfs_buf_printf(tfs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tfs_buf_free(tfs_buf *b);

/* ==== data types ==== */

/*
 * One id space for every element type tensorfs knows.  0..42 are GGML's
 * type ids exactly (so a GGUF type field maps 1:1); the safetensors-only
 * types follow from 64.  safetensors I8..I64, F16, BF16, F32, F64 map to the
 * GGML ids.
 */
typedef enum {
	TFS_DT_F32 = 0, TFS_DT_F16 = 1, TFS_DT_Q4_0 = 2, TFS_DT_Q4_1 = 3,
	/* 4, 5: removed Q4_2, Q4_3 */
	TFS_DT_Q5_0 = 6, TFS_DT_Q5_1 = 7, TFS_DT_Q8_0 = 8, TFS_DT_Q8_1 = 9,
	TFS_DT_Q2_K = 10, TFS_DT_Q3_K = 11, TFS_DT_Q4_K = 12, TFS_DT_Q5_K = 13,
	TFS_DT_Q6_K = 14, TFS_DT_Q8_K = 15, TFS_DT_IQ2_XXS = 16, TFS_DT_IQ2_XS = 17,
	TFS_DT_IQ3_XXS = 18, TFS_DT_IQ1_S = 19, TFS_DT_IQ4_NL = 20, TFS_DT_IQ3_S = 21,
	TFS_DT_IQ2_S = 22, TFS_DT_IQ4_XS = 23, TFS_DT_I8 = 24, TFS_DT_I16 = 25,
	TFS_DT_I32 = 26, TFS_DT_I64 = 27, TFS_DT_F64 = 28, TFS_DT_IQ1_M = 29,
	TFS_DT_BF16 = 30,
	/* 31..33: removed Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 */
	TFS_DT_TQ1_0 = 34, TFS_DT_TQ2_0 = 35,
	/* 36..38: removed IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 */
	TFS_DT_MXFP4 = 39, TFS_DT_NVFP4 = 40, TFS_DT_Q1_0 = 41, TFS_DT_Q2_0 = 42,
	TFS_DT_GGML_COUNT = 43,

	TFS_DT_BOOL = 64, TFS_DT_U8, TFS_DT_U16, TFS_DT_U32, TFS_DT_U64, TFS_DT_C64,
	TFS_DT_F8_E4M3, TFS_DT_F8_E5M2, TFS_DT_F8_E8M0, TFS_DT_F8_E4M3FNUZ,
	TFS_DT_F8_E5M2FNUZ, TFS_DT_F6_E2M3, TFS_DT_F6_E3M2, TFS_DT_F4,
	TFS_DT_END
} tfs_dtype_id;

/* Converts nblocks whole blocks at src (block_bytes each) to float32. */
typedef void (*tfs_to_f32_fn)(const void *src, float *dst, size_t nblocks);

typedef struct {
	const char *name;         /* "Q4_K", "F16", "BOOL", "F8_E4M3" ... (GGML / safetensors spelling) */
	uint32_t block_elems;     /* elements per block; 0 for a removed/unknown id */
	uint32_t block_bytes;     /* bytes per block (sub-byte types: F4 is 2 elems/1 byte, F6 4/3) */
	uint32_t f32_per_elem;    /* float32 values per element in the f32 view: 1, or 2 for C64 (re, im) */
	const char *npy_descr;    /* numpy descr of the raw bytes ("<f4", "|i1", "|b1", "<c8"...), or NULL
	                             when numpy has no such dtype (then npy/ serves float32) */
	tfs_to_f32_fn to_f32;     /* the fastest kernel this CPU runs; NULL: no float view */
	tfs_to_f32_fn to_f32_ref; /* the portable scalar reference kernel (tests compare the two) */
} tfs_dtype_info;

/* The traits of dtype id, or NULL for an id that is not a known type. */
const tfs_dtype_info *tfs_dtype(int id);
/* The id for a name as spelled in tfs_dtype_info.name (case-sensitive), or -1. */
int tfs_dtype_from_name(const char *name);
/* Bytes needed by nelems elements of dtype id; fails (TFS_E_FORMAT) when nelems is not a
 * whole number of blocks, or on overflow. */
int tfs_dtype_nbytes(uint64_t *out, int id, uint64_t nelems, tfs_error *err);

/* ==== float32 to a dtype (quant.c) ==== */

/*
 * Writes nelems float32 values at src as dtype id into dst (nelems / block_elems *
 * block_bytes bytes; the caller owns both).  For the GGML types the bytes equal ggml's
 * ggml_quantize_chunk() with no importance matrix (Q8_K: quantize_row_q8_K_ref) bit for bit;
 * every block is quantized on its own, so any whole run of blocks can be redone alone.  F16,
 * BF16, F8_E4M3, F8_E5M2 round to nearest-even (as ggml, torch and ml_dtypes do); integer
 * and BOOL types take only integral values in range.  Returns 0; TFS_E_INVALID when nelems
 * is not a whole number of blocks or a value does not fit an integer type (the message
 * names the element, or an IQ block holds values ggml's search aborts on); TFS_E_UNSUPPORTED
 * for a type it cannot write (C64), and for IQ2_XXS, IQ2_XS and IQ1_S, which need importance
 * weights (tfs_quantize_weighted).
 */
int tfs_quantize(void *dst, int id, const float *src, uint64_t nelems, tfs_error *err);
/* Tests and benchmarks: true makes tfs_quantize use only the portable scalar code (the
 * reference the SIMD kernels must match), false lets it choose again.  Not thread-safe. */
void tfs_quantize_set_scalar(bool scalar);
/* Whether tfs_quantize writes dtype id. */
bool tfs_quantize_supported(int id);
/* Whether ggml quantizes dtype id only with an importance matrix (IQ2_XXS, IQ2_XS, IQ1_S,
 * as ggml_quantize_requires_imatrix says). */
bool tfs_quantize_needs_imatrix(int id);
/* Whether dtype id's quantization takes an importance matrix (the IQ types, IQ1_S..IQ4_XS). */
bool tfs_quantize_takes_imatrix(int id);
/*
 * tfs_quantize with importance weights, as ggml_quantize_chunk(id, ..., imatrix): the values
 * are rows of n_per_row, and qw (n_per_row weights, llama.cpp's imatrix of the tensor or of
 * one expert) weighs column c of every row by qw[c].  first is the index of src[0] in the
 * rows (a part of a tensor may start mid-row at a block boundary).  qw NULL: as
 * tfs_quantize.  Only the types tfs_quantize_takes_imatrix names use qw; for the others it
 * is ignored.
 */
int tfs_quantize_weighted(void *dst, int id, const float *src, uint64_t nelems, uint64_t first,
			  uint64_t n_per_row, const float *qw, tfs_error *err);
/* IEEE half and bfloat16 from float32, nearest-even (NaN stays NaN). */
uint16_t tfs_f32_to_f16(float f);
uint16_t tfs_f32_to_bf16(float f);

/* ==== MLX / Ollama quantized tensors ==== */

typedef enum {
	TFS_QMODE_NONE = 0,
	TFS_QMODE_AFFINE, /* w = scale[g] * q + bias[g], q unsigned `bits` wide */
	TFS_QMODE_NVFP4,  /* w = FP4(q) * E4M3(scale[g]) [* global_scale], group 16 */
	TFS_QMODE_MXFP4,  /* w = FP4(q) * 2^(scale[g]-127), group 32 */
	TFS_QMODE_MXFP8,  /* w = E4M3(byte) * 2^(scale[g]-127), group 32 */
} tfs_qmode;

typedef struct {
	tfs_qmode mode;
	uint32_t bits;        /* 4 or 8 for the fp modes; 2..8 for affine */
	uint32_t group;       /* elements per scale */
	int scale_dtype;      /* TFS_DT_BF16 / F16 / F32 for affine; TFS_DT_U8 for the fp modes */
	int bias_dtype;       /* affine only */
	int gscale_dtype;     /* nvfp4 global scale: TFS_DT_F32 (or BF16/F16) */
} tfs_mlx_desc;

/* "affine", "nvfp4", "mxfp4", "mxfp8" ("none" for TFS_QMODE_NONE). */
const char *tfs_qmode_name(tfs_qmode q);

/*
 * Dequantizes elements [k0, k0 + n) of one row of an MLX-quantized matrix.
 * wrow: the row's packed little-endian uint32 words; srow / brow: the row's
 * scales / biases in their dtypes (brow NULL unless affine); gscale: the
 * row's global scale value already converted to float (1.0f when absent, and
 * then not multiplied in).  Results are bit-exact to MLX/Ollama.
 */
void tfs_mlx_dequant_row(const tfs_mlx_desc *d, const uint8_t *wrow, const uint8_t *srow,
			 const uint8_t *brow, const float *gscale, uint64_t k0, uint64_t n,
			 float *out);

/*
 * Quantizes group g of one row of an MLX-quantized matrix as MLX's mx.quantize does
 * (mlx_quant.c says how, step by step): x holds the group's d->group values; its codes go
 * into wrow (the row's packed words), its scale into srow[g] (and bias into brow[g],
 * affine only) in their dtypes; gscale: the row's nvfp4 global scale, or NULL.  Nothing
 * else of the rows changes.  TFS_E_INVALID when a value cannot be represented (NaN,
 * infinity, a range whose scale or bias overflows its dtype, an mx group too small for
 * an E8M0 scale), saying which.
 */
int tfs_mlx_quantize_group(const tfs_mlx_desc *d, const float *x, const float *gscale,
			   uint64_t g, uint8_t *wrow, uint8_t *srow, uint8_t *brow, tfs_error *err);
/* E4M3 as MLX encodes it: nearest-even (PyTorch's conversion), but 448 and up saturate
 * to 0x7E; finite input. */
uint8_t tfs_mlx_e4m3_encode(float f);

/* ==== GGUF metadata values ==== */

typedef enum {
	TFS_GGUF_UINT8 = 0, TFS_GGUF_INT8 = 1, TFS_GGUF_UINT16 = 2, TFS_GGUF_INT16 = 3,
	TFS_GGUF_UINT32 = 4, TFS_GGUF_INT32 = 5, TFS_GGUF_FLOAT32 = 6, TFS_GGUF_BOOL = 7,
	TFS_GGUF_STRING = 8, TFS_GGUF_ARRAY = 9, TFS_GGUF_UINT64 = 10, TFS_GGUF_INT64 = 11,
	TFS_GGUF_FLOAT64 = 12, TFS_GGUF_TYPE_COUNT = 13
} tfs_gguf_type;

/*
 * A metadata value is kept in its GGUF payload encoding, whatever the source
 * format: scalars as little-endian bytes, a string as u64 length + bytes, an
 * array as u32 element type + u64 count + elements.  The payload usually
 * points into the source's mapping (no copy, no per-element allocation).
 */

/* Text form served by metadata/<key>, without the trailing newline: decimal
 * integers, shortest round-trip floats, true/false, raw string bytes, arrays as
 * one JSON array.  Appends to out. */
int tfs_value_format(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len,
		     tfs_error *err);
/* A value as JSON: integers exact (uint64 too), floats as in tfs_value_format but
 * non-finite ones as NaN / Infinity / -Infinity (as Python's json writes them), bools,
 * strings JSON-escaped (bytes that are not UTF-8 as \udcXX), arrays in full.  Appends. */
int tfs_value_format_json(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len,
			  tfs_error *err);
/* Type name for the user.tensorfs.type xattr: "uint32", "string",
 * "array[string]", "array[array[int8]]" ... */
int tfs_value_type_name(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len);
/*
 * Parses text (one trailing newline is dropped) as a value of type type_name
 * (a name as returned by tfs_value_type_name) into a newly allocated payload
 * (*data, owned by the caller, free()).  TFS_E_INVALID with a message when the
 * text is not a value of that type.
 */
int tfs_value_parse(uint8_t **data, uint64_t *len, uint32_t *type, const char *type_name,
		    const char *text, size_t text_len, tfs_error *err);
/* Validates a payload of `type` whose encoding is exactly len bytes. */
int tfs_value_check(uint32_t type, const uint8_t *data, uint64_t len, tfs_error *err);

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

typedef struct {
	char *path;            /* as opened */
	char *label;           /* what index.json calls it: shard file name, blob digest, ... */
	int fd;
	uint64_t size;
	const uint8_t *map;    /* read-only mapping of the whole file (NULL when size is 0); with
	                        * fd -1, the caller's bytes (tfs_model_open_mem), borrowed */
	int64_t mtime_sec, mtime_nsec;
	bool staged;           /* added by tfs_model_set_*_file; closed (fd -1, size 0, map NULL)
	                        * once no tensor or file refers to it any more */
	struct tfs_remote *remote; /* an http(s) source (fd -1; map holds its header only), or NULL */
} tfs_source;

/*
 * Reads [off, off+len) of a source into buf, whatever it is: a local file (pread), bytes in
 * memory, or a remote file (through its block cache).  0, or an error naming the source
 * (TFS_E_IO with EIO when a remote file cannot be read or changed on the server).
 */
int tfs_source_pread(const tfs_source *s, void *buf, uint64_t len, uint64_t off, tfs_error *err);
/* The same, for bytes of an item at [lo, hi) of the source (a tensor, a layer): a remote
 * source fetches and reads ahead within the item only. */
int tfs_source_pread_in(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			uint64_t lo, uint64_t hi, tfs_error *err);

/*
 * For a reader of a remote source that moves bytes out of its block cache's data file
 * (of an item at [lo, hi), as tfs_source_pread_in)
 * itself (splice, no copy): makes [off, off+len) present in the cache and gives *fd, a
 * descriptor of that file of the caller's own (the bytes sit at their offsets in the source)
 * that pins them: no mount sharing the cache punches their blocks until the caller closes
 * it.  0; 1 when no such descriptor can be had (read with tfs_source_pread instead); or an
 * error.  Local sources answer TFS_E_INVALID.
 */
int tfs_source_cache_ready(const tfs_source *s, uint64_t off, uint64_t len, uint64_t lo,
			   uint64_t hi, int *fd, tfs_error *err);

typedef struct tfs_model tfs_model;

typedef void (*tfs_progress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total);

typedef struct {
	bool verify;              /* check the sha256 of every Ollama blob, not only small ones */
	tfs_progress_fn progress; /* optional: long operations report here */
	void *progress_ctx;
	const char *ollama_models;/* store root for model references; NULL: $OLLAMA_MODELS or ~/.ollama/models */
	/* remote sources (http://, https://, hf://) */
	int connections;          /* connections per file (0: 4) */
	const char *cache_dir;    /* block cache; NULL: $XDG_CACHE_HOME/tensorfs or ~/.cache/tensorfs */
	uint64_t cache_size;      /* the cache's limit in bytes (0: none) */
	const char *token;        /* bearer token (NULL: $HF_TOKEN for hf:// sources) */
	const char *cafile;       /* CA bundle (NULL: $CURL_CA_BUNDLE, else the system's) */
	long timeout;             /* seconds to connect, or of a stalled transfer (0: 30) */
} tfs_open_opts;

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
void tfs_model_free(tfs_model *m);

tfs_format tfs_model_format(const tfs_model *m);
const char *tfs_model_format_name(const tfs_model *m);   /* "gguf", "safetensors", "ollama" */
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
/* Whether source names a model of an Ollama registry over HTTP(S) (its manifest's URL, or an
 * Ollama name with a scheme: see tfs_model_open); by its form only, nothing is fetched. */
bool tfs_is_registry_source(const char *source);
const tfs_source *tfs_model_source(const tfs_model *m, size_t i);
/* Index of the live key / tensor / extra of that name, or -1. */
long tfs_model_find_kv(const tfs_model *m, const char *name);
long tfs_model_find_tensor(const tfs_model *m, const char *name);
long tfs_model_find_extra(const tfs_model *m, const char *name);

/* Reads len bytes of tensor i's stored bytes from byte offset off (clipped at its end);
 * returns the count read or a negative tfs_code. */
int64_t tfs_tensor_read_raw(const tfs_model *m, size_t i, uint64_t off, uint64_t len, void *out,
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

/*
 * The npy/ view: a .npy file (format 1.0, header padded to 64 bytes) holding
 * the raw bytes when the dtype has a native numpy dtype (and is not
 * MLX-quantized), float32 otherwise.  tfs_npy_header writes the header into out
 * and says whether the payload is raw bytes (*raw true) or the f32 view.
 * Fails when the tensor has neither.
 */
int tfs_npy_header(tfs_buf *out, bool *raw, const tfs_model *m, size_t i, tfs_error *err);
/* Whether tensor i has an npy/ view (a native numpy dtype or an f32 view). */
bool tfs_npy_available(const tfs_model *m, size_t i);
/* Checks the first n bytes of a .npy file written for tensor i: a whole header (versions
 * 1-3) whose dict says what tfs_npy_header says (descr, fortran_order False, shape; spaces
 * aside).  Sets *data_off to where the data start.  TFS_E_INVALID names the difference. */
int tfs_npy_check(uint64_t *data_off, const tfs_model *m, size_t i, const uint8_t *p, size_t n,
		  tfs_error *err);

/*
 * An importance matrix (llama.cpp's imatrix: its GGUF format, or the legacy .dat), for the
 * IQ1/IQ2/IQ3 types' quantizers.  Open indexes its entries (TFS_E_FORMAT names the file and
 * what is wrong with it); values are read when asked for.  tfs_imatrix_weights fills out with
 * the n_per_row column weights of expert mat (of n_mat: a tensor's ne[2], 1 for a matrix) of
 * tensor `name`, computed as llama-quantize does (sums / counts): TFS_E_NOTFOUND when the file
 * has no entry for it, TFS_E_INVALID when the entry's size is not n_per_row * n_mat.
 */
typedef struct tfs_imatrix tfs_imatrix;
int tfs_imatrix_open(tfs_imatrix **out, const char *path, tfs_error *err);
void tfs_imatrix_free(tfs_imatrix *im);
const char *tfs_imatrix_path(const tfs_imatrix *im);
size_t tfs_imatrix_n_entries(const tfs_imatrix *im);
/* Entry k's tensor name (sorted by name) and its count of values (*nval may be NULL). */
const char *tfs_imatrix_entry(const tfs_imatrix *im, size_t k, uint64_t *nval);
bool tfs_imatrix_has(const tfs_imatrix *im, const char *name);   /* im may be NULL */
int tfs_imatrix_weights(const tfs_imatrix *im, const char *name, uint64_t n_per_row,
			uint64_t n_mat, uint64_t mat, float *out, tfs_error *err);

/*
 * Writing tensor i as numbers (f32/ and npy/ of a rw mount).  tfs_tensor_numbers_writable
 * says whether its dtype can be written back from float32 (else *why says why: C64, a type
 * that needs an importance matrix when im (may be NULL) has no entry for the tensor, an MLX
 * weight whose companions are missing...); the IQ1/IQ2/IQ3 types are quantized with im's
 * weights for the tensor when it has them (as llama-quantize does), else without; an
 * MLX-quantized weight is written by tfs_mlx_requantize, every other tensor by
 * tfs_tensor_requantize (which refuses MLX weights).  tfs_tensor_requantize reads the tensor's whole f32 view (tfs_tensor_f32_count values) from
 * in_fd at in_off and writes its new stored bytes at out_fd's offset 0: each block whose values
 * are exactly what its stored block dequantizes to keeps its bytes, every other block is
 * quantized (tfs_quantize).  *changed (may be NULL) gets the blocks requantized.  Works in
 * chunks of 1 MiB of values.  TFS_E_INVALID: a value the dtype cannot hold (NaN into an
 * integer type...), named with its index.
 */
bool tfs_tensor_numbers_writable(const tfs_model *m, size_t i, const tfs_imatrix *im,
				 const char **why);
int tfs_tensor_requantize(const tfs_model *m, size_t i, const tfs_imatrix *im, int in_fd,
			  uint64_t in_off, int out_fd, uint64_t *changed, tfs_error *err);
/*
 * Tensor i, an MLX-quantized weight, written back from its f32 view (the values at in_fd
 * from in_off, as tfs_tensor_requantize): its new packed words go to w_fd, its scales to
 * s_fd and (affine) its biases to b_fd (-1 otherwise), each the whole companion from offset
 * 0.  A group whose values are bit for bit what it dequantizes to keeps its codes, scale
 * and bias; every other group is quantized by tfs_mlx_quantize_group.  The global scale
 * (nvfp4) is kept.  *changed (may be NULL) gets the groups requantized.  TFS_E_INVALID names
 * the tensor and the element of a value that cannot be represented.
 */
int tfs_mlx_requantize(const tfs_model *m, size_t i, int in_fd, uint64_t in_off, int w_fd,
		       int s_fd, int b_fd, uint64_t *changed, tfs_error *err);
/* Converting tensor i to another dtype (its values dequantized, then quantized as dtype;
 * same shape).  _check says whether it can be: TFS_E_UNSUPPORTED (an MLX weight, C64, a
 * dtype tensorfs cannot quantize to), TFS_E_INVALID (rows that are not whole blocks of
 * dtype).  tfs_tensor_convert writes the new bytes at out_fd's offset 0, 1 MiB of values at
 * a time. */
int tfs_tensor_convert_check(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
			     tfs_error *err);
int tfs_tensor_convert(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
		       int out_fd, tfs_error *err);

/*
 * File names on the mount.  A name is used as it is unless it cannot be a file
 * name: '%' and '/' always become %25 and %2F; "." and ".." become %2E and
 * %2E%2E; an encoded name longer than 255 bytes is cut to 200 bytes (never inside
 * an escape) and followed by "%~" and 16 hex digits of a hash of the full name.
 * tfs_name_decode undoes the escapes (not the shortening: those names are found
 * through the mount's table).  Both append to out.
 */
int tfs_name_encode(tfs_buf *out, const char *name);
int tfs_name_decode(tfs_buf *out, const char *file_name);

/* The index.json document (pretty-printed JSON) describing the model; appends to out. */
int tfs_model_index_json(tfs_buf *out, const tfs_model *m, tfs_error *err);
/*
 * `tensorfs info --json`: the index.json document plus each key's full "value" (see
 * tfs_value_format_json; null for an array too large to show), the model's "parameters"
 * (tfs_model_param_count) and "tensor_bytes" (stored bytes of all tensors).  with_tensors
 * false leaves out the "tensors" list.  Appends to out.
 */
int tfs_model_info_json(tfs_buf *out, const tfs_model *m, bool with_tensors, tfs_error *err);
/*
 * index.json as a stream, for a document too large to hold: the same bytes as
 * tfs_model_index_json (values false, with_tensors true) or tfs_model_info_json, generated
 * piece by piece on each read.  tfs_index_open makes a sizing pass over the whole document
 * (the time of generating it once) and keeps its size and the offset of every 64th piece
 * (one piece per key and per tensor), so its memory is a small fraction of the document's;
 * tfs_index_read regenerates from the nearest recorded offset before off, or goes on from
 * where the previous read stopped.  The stream borrows m, which must not change while it is
 * open (after a change open a new one).  One reader at a time: the caller serializes
 * tfs_index_read on a stream.  _read copies up to len bytes at off into buf, *got of them
 * (0 at or past the end).  Errors name the model's file.
 */
typedef struct tfs_index tfs_index;
int tfs_index_open(tfs_index **out, const tfs_model *m, bool values, bool with_tensors,
		   tfs_error *err);
uint64_t tfs_index_size(const tfs_index *s);
int tfs_index_read(tfs_index *s, void *buf, uint64_t off, size_t len, size_t *got,
		   tfs_error *err);
void tfs_index_free(tfs_index *s);
/* The parameter count: the elements of every live tensor, an MLX-quantized weight counted
 * in its dequantized shape and its .scale/.bias/.global_scale companions not at all. */
uint64_t tfs_model_param_count(const tfs_model *m);

/* ==== the whole model as one file ==== */

/*
 * An image is the file a repack would write now, laid out in memory: the header bytes
 * built, the tensors' bytes named as ranges of their sources (original or staged), the
 * padding as zeros.  It does not change when the model does: an image taken with own_fds
 * keeps its own descriptors of every source it reads from.
 */
typedef struct tfs_image tfs_image;
/* "model.gguf" (GGUF files, classic Ollama models), "model.safetensors" (one file or a
 * sharded set, merged; a per-tensor Ollama model in mlx-lm's layout), or NULL when the
 * model has no single-file form. */
const char *tfs_image_name(const tfs_model *m);
/* "config.json" when the model file needs one beside it (a per-tensor Ollama model: its
 * config.json layer with mlx-lm's "quantization" set), else NULL; its text. */
const char *tfs_config_name(const tfs_model *m);
int tfs_model_config_json(tfs_buf *out, const tfs_model *m, tfs_error *err);
int tfs_model_image(tfs_image **out, const tfs_model *m, bool own_fds, tfs_error *err);
uint64_t tfs_image_size(const tfs_image *im);
/* tfs_image_size of the image tfs_model_image would build (a GGUF file's without building
 * its header: index.json's "model_file" of a large header costs no memory). */
int tfs_model_image_size(const tfs_model *m, uint64_t *size, tfs_error *err);
/* Reads up to len bytes at off (clipped at the end); the count or a negative tfs_code.
 * Needs an image taken with own_fds. */
int64_t tfs_image_read(const tfs_image *im, uint64_t off, uint64_t len, void *out,
		       tfs_error *err);
void tfs_image_free(tfs_image *im);

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

typedef struct {
	tfs_progress_fn progress;
	void *progress_ctx;
	const char *output;      /* NULL: replace the source; a path; for Ollama "model:tag" too */
} tfs_write_opts;

/*
 * Writes the model, as changed, in its source format: to a temporary file beside
 * the output, fsynced, re-opened and validated with the reader, then renamed
 * over the output and the directory fsynced.  Unchanged tensor bytes are copied
 * with copy_file_range.  On failure the output is untouched.
 */
int tfs_model_write(tfs_model *m, const tfs_write_opts *o, tfs_error *err);

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
 * `tensorfs repack DIR`: locks the staging directory, finishes or undoes an interrupted
 * repack, and when changes remain opens the source the journal names (it must be
 * unchanged), replays them and repacks to o->output or the journal's output.  Returns 0
 * when there was nothing to do.
 */
int tfs_repack_dir(const char *staging_dir, const tfs_write_opts *o, tfs_error *err);

/*
 * Finishes or undoes a repack that a crash interrupted (see tfs_staging_repack), without
 * opening any model; a directory that does not exist or holds no journal is fine.  Call it
 * before tfs_model_open when mounting rw: a sharded set or an Ollama model whose repack was
 * cut between two renames only reads back consistently after it.  Fails with TFS_E_EXISTS
 * while another process holds the directory.
 */
int tfs_staging_recover(const char *staging_dir, tfs_error *err);

#endif
