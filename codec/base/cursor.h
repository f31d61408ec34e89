/*
 * cursor.h - what every parser reads through (codec-private): caps on untrusted sizes,
 * overflow-checked arithmetic, the bounds-checked cursor, little-endian loads.
 */
#ifndef TFS_CURSOR_H
#define TFS_CURSOR_H

#include "base.h"

#include <string.h>

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

#endif
