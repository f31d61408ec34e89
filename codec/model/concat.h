/*
 * concat.h - a source that is other sources' byte ranges one after another (codec-private).
 *
 * A stacked expert tensor of a mixture-of-experts model (blk.N.ffn_{gate,up,down}_exps) is
 * the experts' 2-D tensors in expert order; they lie in one or more shards.  A concatenation
 * serves it from those bytes without gathering them: piece k is [off, off + len) of a source
 * (a shard), placed after pieces 0..k-1.
 *   - Where the bytes are the pieces' as they are, reads go piece by piece through the
 *     pieces' sources, and a reader that splices (fs/reply.c) gets each piece's own file:
 *     the shard's page cache, as tensors/ is served; no byte is copied.
 *   - Where they are computed from the pieces (another dtype), a read callback computes any
 *     range (the caller's conversion, on bounded chunks); the pieces still say where the
 *     bytes come from (index.json: each expert's shard and offset).
 * It is a computed source (source_impl.h): its callbacks are this file's, its state shared
 * by reference with every held copy (an image being read).
 */
#ifndef TFS_CONCAT_H
#define TFS_CONCAT_H

#include "source_impl.h"
#include "model_impl.h"

typedef struct {
	const tfs_source *src;  /* holds the piece's bytes (borrowed: kept by the owner) */
	uint64_t off, len;      /* where they are in it, how many */
} tfs_concat_piece;

typedef struct {
	/* Optional: bytes [off, off + len) of the concatenation (inside it: the caller
	 * checked) into buf, computed from the pieces: the count, or a negative tfs_code with
	 * err set.  NULL: the pieces' bytes as they are (then the concatenation's size is the
	 * sum of the pieces'). */
	int64_t (*read)(void *owner, const void *arg, void *buf, uint64_t len, uint64_t off,
			tfs_error *err);
	/* With read set: whether the pieces still hold the bytes in order, so that a reader
	 * may splice them (read then only refines what a splice would give: a NaN quieted).
	 * Without read: always. */
	bool splice;
	/* Optional: another reference to the owner (which keeps the pieces' sources), and
	 * dropping one.  NULL: the owner outlives every copy of the source. */
	void (*ref)(void *owner);
	void (*unref)(void *owner);
} tfs_concat_ops;

/*
 * Adds to m a computed source of size bytes (label: what index.json calls it) that is the
 * n pieces one after another, taking over one reference to owner (ops->unref when the last
 * copy of the source is closed; also on failure).  arg is passed to ops->read as is.  With
 * ops->read NULL, size must be the pieces' sum.  *idx: its source index.  0, or
 * TFS_E_NOMEM / TFS_E_INVALID (a piece outside its source, sizes that disagree).
 */
int tfs_model_add_concat_source(tfs_model *m, const char *label, const tfs_concat_piece *pieces,
				size_t n, uint64_t size, const tfs_concat_ops *ops, void *owner,
				const void *arg, int32_t *idx, tfs_error *err);

/* The pieces of a concatenation (borrowed while s is open) and their count; NULL and 0 for
 * any other source. */
const tfs_concat_piece *tfs_concat_pieces(const tfs_source *s, size_t *n);

#endif
