/*
 * internal.h - what codec/ modules share and fs/ never sees.
 */
#ifndef TFS_INTERNAL_H
#define TFS_INTERNAL_H

#include "tensorfs.h"

#include <string.h>
#include <sys/mman.h>

/* ==== caps on untrusted sizes ==== */
#define TFS_MAX_STRING      (1ull << 30)   /* GGUF string bytes (ggml: 1 GiB) */
#define TFS_MAX_ARRAY       (1ull << 30)   /* GGUF array elements (ggml: 1 Gi) */
#define TFS_MAX_NAME        65536          /* key / tensor name bytes */
#define TFS_MAX_ST_HEADER   100000000ull   /* safetensors header bytes (reference: 100 MB) */
#define TFS_MAX_ITEMS       (1ull << 20)   /* keys or tensors in a model (real ones: < 10K) */
#define TFS_MAX_VALUE_TEXT  (256ull << 20) /* a metadata value's text form */
#define TFS_MAX_MANIFEST    (16u << 20)    /* Ollama manifest / config JSON bytes */

/* ==== overflow-checked arithmetic (true on overflow) ==== */
#define tfs_add_overflow(a, b, out) __builtin_add_overflow((a), (b), (out))
#define tfs_mul_overflow(a, b, out) __builtin_mul_overflow((a), (b), (out))

/* ==== the bounds-checked cursor every parser reads through ==== */

typedef struct {
	const uint8_t *base;  /* start of the readable range */
	uint64_t size;        /* bytes in the range */
	uint64_t pos;         /* next byte to read, relative to base */
	uint64_t origin;      /* absolute file offset of base (for messages) */
	const char *file;     /* file name for messages */
	tfs_error *err;
	/* When base is a whole-file mapping advised MADV_RANDOM: read ahead explicitly just
	 * past what was parsed, 64 KiB first and doubling up to 4 MiB (so opening reads about
	 * the header, not the file). */
	bool prefetch;
	uint64_t ra_end, ra_step;
	/* When base is a remote source's header (fill non-NULL): bytes up to `have` are there;
	 * reading past it calls fill(fill_ctx, absolute end, err) for more (tfs_source_head). */
	int (*fill)(const void *fill_ctx, uint64_t end, tfs_error *err);
	const void *fill_ctx;
	uint64_t have;
	uint64_t expect;   /* where the parser guesses it will soon read to (0: no guess) */
} tfs_cursor;

static inline uint64_t tfs_cursor_left(const tfs_cursor *c) { return c->size - c->pos; }

/* Each returns 0, or TFS_E_FORMAT naming the file, the offset and `what`. */
int tfs_cursor_bytes(tfs_cursor *c, const uint8_t **p, uint64_t n, const char *what);
int tfs_cursor_u8(tfs_cursor *c, uint8_t *v, const char *what);
int tfs_cursor_u16(tfs_cursor *c, uint16_t *v, const char *what);
int tfs_cursor_u32(tfs_cursor *c, uint32_t *v, const char *what);
int tfs_cursor_u64(tfs_cursor *c, uint64_t *v, const char *what);
/* A GGUF string: u64 length (<= cap and <= remaining bytes) then bytes, not NUL-terminated. */
int tfs_cursor_str(tfs_cursor *c, const uint8_t **p, uint64_t *len, uint64_t cap,
		   const char *what);

/* Little-endian loads from unaligned memory. */
static inline uint16_t tfs_le16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t tfs_le32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t tfs_le64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* ==== half / bfloat16 / fp8 scalar conversions (exact, shared by kernels) ==== */
float tfs_f16_to_f32(uint16_t h);      /* quiets signalling NaNs as ggml does */
float tfs_bf16_to_f32(uint16_t h);

/* ==== string set: name -> index, for duplicate checks and lookups ==== */
typedef struct {
	uint32_t *slots;  /* index + 1; 0 = empty */
	size_t cap;       /* power of two */
	size_t count;
} tfs_strmap;
/* names(ctx, idx) gives the name stored at idx (with its length). */
typedef const char *(*tfs_strmap_name_fn)(const void *ctx, uint32_t idx, size_t *len);
long tfs_strmap_get(const tfs_strmap *s, const char *name, size_t len, tfs_strmap_name_fn fn,
		    const void *ctx);
int tfs_strmap_put(tfs_strmap *s, const char *name, size_t len, uint32_t idx,
		   tfs_strmap_name_fn fn, const void *ctx);
void tfs_strmap_del(tfs_strmap *s, const char *name, size_t len, tfs_strmap_name_fn fn,
		    const void *ctx);
void tfs_strmap_free(tfs_strmap *s);

/* ==== the model ==== */

struct tfs_name_chunk {
	struct tfs_name_chunk *next;
	char text[];
};

struct tfs_model {
	tfs_format format;
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

	/* format-private state (safetensors shards, Ollama manifest) */
	void *priv;
	void (*priv_free)(void *priv);
};

/* The name maps' callbacks: the name of kv / tensor / extra slot i of the model ctx. */
const char *tfs_kv_name(const void *ctx, uint32_t i, size_t *len);
const char *tfs_t_name(const void *ctx, uint32_t i, size_t *len);
const char *tfs_x_name(const void *ctx, uint32_t i, size_t *len);

/* Allocates an empty model of the given format. */
int tfs_model_new(tfs_model **out, tfs_format fmt, const char *path, tfs_error *err);
/* Opens and maps a file as a source; *idx gets its index. label may be NULL (= basename). */
int tfs_model_add_source(tfs_model *m, const char *path, const char *label, int32_t *idx,
			 tfs_error *err);
/* Adds size bytes at data (borrowed, not copied) as a source with no file (fd -1). */
int tfs_model_add_mem_source(tfs_model *m, const char *name, const uint8_t *data, uint64_t size,
			     int32_t *idx, tfs_error *err);
/* Makes the first `end` bytes of source s readable at s->map (a remote source fetches
 * them; a local one has them all).  0 or an error naming the source. */
int tfs_source_head(const tfs_source *s, uint64_t end, tfs_error *err);
/* A whole regular file of at most cap bytes, read into a new NUL-terminated buffer
 * (source.c). */
int tfs_read_small_file(const char *path, uint64_t cap, uint8_t **out, uint64_t *len,
			tfs_error *err);
/* Frees what a remote source holds (source.c). */
void tfs_source_release_remote(tfs_source *s);
/* Reads one safetensors file, source src, as the model's only shard. */
int tfs_safetensors_open_src(tfs_model *m, int32_t src, tfs_error *err);
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
	if (src < 0 || (size_t)src >= m->n_src || !m->src[src].map || m->src[src].fd < 0 || !len)
		return; /* fd -1: the caller's memory (tfs_model_open_mem), never advised away */
	const tfs_source *s = &m->src[src];
	uint64_t pg = 4096, a = off & ~(pg - 1), b = off + len;
	if (advice == MADV_DONTNEED) {
		/* only pages wholly inside the range: neighbours may be in use */
		a = (off + pg - 1) & ~(pg - 1);
		b &= ~(pg - 1);
	}
	if (b > s->size)
		b = s->size;
	if (b > a)
		madvise((void *)(uintptr_t)(s->map + a), (size_t)(b - a), advice);
}

/* The f32 view of an MLX-quantized tensor (t->q.mode != TFS_QMODE_NONE): called by
 * tfs_tensor_read_f32 (model.c); mlx.c holds it, beside the MLX math after it checked [first, first + count) is in range. */
int tfs_mlx_read_f32(const tfs_model *m, const tfs_tensor *t, uint64_t first, uint64_t count,
		     float *out, tfs_error *err);

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

/* Per-format writers: write the model's current state to a new file at tmp_path
 * (already-open fd), used by tfs_model_write. */
int tfs_gguf_write(const tfs_model *m, int fd, const char *path, const tfs_write_opts *o,
		   tfs_error *err);

/* ==== the write path (write.c, *_write.c, staging.c) ==== */

#include <jansson.h>
#include <sys/stat.h>

/* A commit: the temporaries of one repack and the files they replace, renamed
 * together at the end. */
typedef struct tfs_commit tfs_commit;
/* Told the name of a temporary file before that name is created (0, or a tfs_code that
 * stops the commit): the staging journal records it, so a crash cannot leave it behind. */
typedef int (*tfs_name_hook)(void *ctx, const char *tmp, tfs_error *err);
int tfs_commit_new(tfs_commit **out, tfs_error *err);
void tfs_commit_set_name_hook(tfs_commit *c, tfs_name_hook hook, void *ctx);
int tfs_commit_add(tfs_commit *c, const char *final, int *fd, const char **tmp, tfs_error *err);
int tfs_commit_seal(tfs_commit *c, tfs_error *err);
size_t tfs_commit_count(const tfs_commit *c);
int tfs_commit_get(const tfs_commit *c, size_t i, const char **tmp, const char **final,
		   struct stat *st);
int tfs_commit_apply(tfs_commit *c, tfs_error *err);
void tfs_commit_abort(tfs_commit *c);
void tfs_commit_free(tfs_commit *c);
int tfs_model_write_prepare(tfs_model *m, const tfs_write_opts *o, tfs_commit *c,
			    tfs_error *err);
int tfs_write_validate(const tfs_model *m, const tfs_model *w, tfs_error *err);
/* (source.c) Compares n tensor bytes at off of a source without a mapping of its data with pb:
 * 4 KiB at the start, middle and end, read through the source.  0 same, 1 different, or an
 * error. */
int tfs_source_samples_differ(const tfs_source *sa, uint64_t off, const uint8_t *pb, uint64_t n,
			      tfs_error *err);
int tfs_io_pwrite(int fd, const char *path, uint64_t pos, const void *p, size_t n,
		  tfs_error *err);
int tfs_io_zeros(int fd, const char *path, uint64_t pos, uint64_t n, tfs_error *err);
int tfs_io_reserve(int fd, const char *path, uint64_t size, tfs_error *err);
int tfs_io_copy(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t src,
		uint64_t off, uint64_t len, const tfs_write_opts *o, uint64_t *done, uint64_t total,
		tfs_error *err);
/* ==== float bits (quant.c, dtype.c) ==== */

static inline uint32_t tfs_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* Round-to-nearest-even of the unsigned integer m / 2^shift. */
static inline uint32_t tfs_rne_shift(uint32_t m, unsigned shift)
{
	if (shift == 0)
		return m;
	if (shift > 31)
		return 0;
	uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);

	return r + (rem > half || (rem == half && (r & 1)));
}

/* The key a GGUF writer adds, an array of zero bytes, to move the data section so that
 * unchanged tensors keep their block offsets (extents shared with the source); readers hide it. */
#define TFS_GGUF_PADDING_KEY "tensorfs.padding"
/* Block size in which fd (a new empty file) can share extents with source src; 0: it can't. */
uint32_t tfs_io_clone_block(int fd, const tfs_model *m, int32_t src);
/* tfs_io_copy, cloning whole blocks when blk != 0 and pos == off modulo blk. */
int tfs_io_copy_shared(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t src,
		       uint64_t off, uint64_t len, uint32_t blk, const tfs_write_opts *o,
		       uint64_t *done, uint64_t total, tfs_error *err);
int tfs_io_fsync_dir(const char *path_in_dir, tfs_error *err);
/* The output's final path: o->output or the source; a symlink is followed, so the link
 * keeps pointing at the (replaced) file.  Allocated. */
char *tfs_output_path(const tfs_model *m, const tfs_write_opts *o);
/* An unnamed O_TMPFILE in dir (a named mkostemp file where unsupported), named from tmpl
 * by tfs_io_tmpfile_link once written and fsynced. */
int tfs_io_tmpfile_open(const char *dir, mode_t mode);
int tfs_io_tmpfile_link(int fd, char *tmpl, tfs_name_hook hook, void *hook_ctx, tfs_error *err);
void tfs_test_crash_point(const char *where);
int tfs_gguf_validate(const tfs_model *m, const char *path, tfs_error *err);
bool tfs_model_gguf_encoded(const tfs_model *m);
bool tfs_utf8_valid(const char *s, size_t n);
bool tfs_st_dtype_ok(int dtype);
int tfs_safetensors_write(tfs_model *m, const tfs_write_opts *o, tfs_commit *c, tfs_error *err);
int tfs_ollama_write(tfs_model *m, const tfs_write_opts *o, tfs_commit *c, tfs_error *err);
int tfs_st_write_file(const tfs_model *m, const uint32_t *ts, size_t nt, const uint32_t *keys,
		      size_t nk, const json_t *meta, int fd, const char *path,
		      const tfs_write_opts *o, tfs_error *err);
int tfs_st_check_file(const tfs_model *m, const uint32_t *ts, size_t nt, const uint32_t *keys,
		      size_t nk, const json_t *meta, const char *path, tfs_error *err);

/* ==== images: a file laid out in memory (image.c) ==== */

typedef struct {
	uint64_t pos;      /* where in the file */
	uint64_t len;
	int32_t src;       /* the source holding the bytes */
	uint64_t src_off;
} tfs_extent;

struct tfs_image {
	tfs_buf head;          /* bytes [0, head.len) */
	tfs_extent *ext;       /* source ranges, in file order, after the head */
	size_t n_ext, cap_ext;
	uint64_t size;         /* zeros between and after extents up to size */
	int *fds;              /* with tfs_image_own_fds: a descriptor per source (-1 unused) */
	size_t n_fds;
	struct tfs_remote **remotes; /* and per source its remote file (NULL: local), the model's */
	uint32_t clone_blk;    /* tfs_image_write clones whole blocks of this size (0: copies) */
};

int tfs_image_new(tfs_image **out, tfs_error *err);
/* Appends an extent (after every earlier one); 0 or TFS_E_NOMEM. */
int tfs_image_add(tfs_image *im, uint64_t pos, int32_t src, uint64_t src_off, uint64_t len);
/* Duplicates the descriptors of the sources the extents name, for tfs_image_read. */
int tfs_image_own_fds(tfs_image *im, const tfs_model *m, tfs_error *err);
/* For writing im to fd (a new empty file): whether fd can share extents with the source
 * holding most of im's bytes (the block size, else 0), and the shift, a multiple of step
 * below the block size, that moving the data section by would align the most extent bytes
 * with their source's blocks (*shift).  See tfs_io_copy_shared. */
uint32_t tfs_image_clone_plan(const tfs_image *im, const tfs_model *m, int fd, uint64_t step,
			      uint64_t *shift);
/* Writes the image to fd (reserved, header, zeros, sources copied with tfs_io_copy). */
int tfs_image_write(const tfs_image *im, const tfs_model *m, int fd, const char *path,
		    const tfs_write_opts *o, tfs_error *err);
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

/* The basename of path (no allocation). */
const char *tfs_basename(const char *path);

#endif
