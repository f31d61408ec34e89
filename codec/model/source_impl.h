/*
 * source_impl.h - a source's insides and its operations table (codec-private).
 *
 * Each kind of source is one const tfs_source_ops table in source.c; every reader goes
 * through the functions of source.h, which call the table.  A new kind (bytes computed by
 * a callback: a tensor converted to another dtype, quantized into a cache file...) is one
 * more table with its constructor, and no reader, no writer and nothing of fs/ changes.
 */
#ifndef TFS_SOURCE_IMPL_H
#define TFS_SOURCE_IMPL_H

#include "source.h"
#include "io.h"

struct tfs_remote;

/* What s->map holds. */
typedef enum {
	TFS_BYTES_NONE,    /* nothing (map NULL): read through the operations */
	TFS_BYTES_MAPPED,  /* a file's read-only mapping of all its bytes (advise around use) */
	TFS_BYTES_MEMORY,  /* all its bytes, in memory borrowed from the caller */
	TFS_BYTES_HEAD,    /* its first bytes only, as many as head() made present */
} tfs_source_bytes;

typedef struct {
	const char *kind;         /* "file", "memory", "remote", "computed", "closed" */
	tfs_source_bytes bytes;
	bool remote;              /* bytes come over the network */
	/* Reads up to len bytes at off (inside the source: the caller checked) of an item at
	 * [lo, hi) into buf: the count, short only where a file ends early, or a tfs_code. */
	int64_t (*read)(const tfs_source *s, void *buf, uint64_t len, uint64_t off, uint64_t lo,
			uint64_t hi, tfs_error *err);
	/* Optional (NULL: TFS_PASSTHROUGH): tfs_source_splice_fd. */
	int (*splice_fd)(tfs_source_fd *out, const tfs_source *s, uint64_t off, uint64_t len,
			 uint64_t lo, uint64_t hi, tfs_error *err);
	/* Optional: a file holding all the bytes at their offsets, to copy or clone from
	 * (borrowed), or -1. */
	int (*file_fd)(const tfs_source *s);
	/* Optional: makes the first end bytes readable at map (TFS_BYTES_HEAD). */
	int (*head)(const tfs_source *s, uint64_t end, tfs_error *err);
	/* Optional: drops copies of the bytes kept on the way (a cache) and fetches the head
	 * again: bytes that proved wrong may be the copy's fault. */
	int (*forget)(const tfs_source *s, tfs_error *err);
	/* Optional: a copy of s reading the same bytes that stays valid whatever happens to s
	 * afterwards (the model changed or freed), for an image being read.  NULL: the copy
	 * borrows s's state (it must outlive the copy). */
	int (*hold)(tfs_source *copy, const tfs_source *s, tfs_error *err);
	/* Frees what the kind holds (not path and label). */
	void (*release)(tfs_source *s);
	/* Optional: waits until no thread of the kind's runs in the background (a remote
	 * file's readahead); they may start again on a later read. */
	void (*quiesce)(const tfs_source *s);
} tfs_source_ops;

struct tfs_source {
	char *path;            /* as opened */
	char *label;           /* what index.json calls it: shard file name, blob digest, ... */
	uint64_t size;
	const uint8_t *map;    /* see ops->bytes; NULL when size is 0 */
	int64_t mtime_sec, mtime_nsec;
	bool staged;           /* added by tfs_model_set_*_file; closed (tfs_source_close) once
	                        * no tensor or file refers to it any more */
	const tfs_source_ops *ops;
	int fd;                /* a local file's descriptor; -1 for the other kinds */
	void *ctx;             /* the kind's state (a remote file: its struct tfs_remote) */
	const struct tfs_computed_ops *computed; /* a computed source's callbacks on ctx */
};

/* ==== making sources (path and label are set by the caller) ==== */

/* Opens path read-only and maps it (readahead off: tfs_source_advise_normal turns it on once
 * the model is open): s's kind, fd, map, size and mtime. */
int tfs_source_open_file(tfs_source *s, const char *path, tfs_error *err);
/* size bytes at data, borrowed (they must outlive s). */
void tfs_source_init_memory(tfs_source *s, const uint8_t *data, uint64_t size);
/* A remote file, s taking r over (freed with s); map: its header. */
void tfs_source_init_remote(tfs_source *s, struct tfs_remote *r);
/* Opens url as a remote file (tfs_remote_open: one ranged GET of its first bytes) and makes
 * s that file: its header fetched on demand (tfs_source_head), its data read through the
 * block cache. */
int tfs_source_open_remote(tfs_source *s, const char *url, const tfs_open_opts *o,
			   tfs_error *err);
/*
 * A computed source (views/: a tensor converted to another dtype, a Q/K-permuted tensor,
 * a quantized one): its bytes are made by callbacks on ctx.  Every callback may be called
 * from many threads at once.
 */
typedef struct tfs_computed_ops {
	/* Up to len bytes at off (inside the source: the caller checked) into buf: the
	 * count (short only at the end), or a negative tfs_code with err set. */
	int64_t (*read)(void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err);
	/* Optional (NULL: TFS_PASSTHROUGH): a file holding a prefix of [off, off+len), to
	 * splice or copy from: out->fd (borrowed: valid while ctx is; or out->pinned: the
	 * caller's own, closed by tfs_source_fd_done), out->at (where byte off is in it),
	 * out->len (1..len bytes held there: a row run, say).  out comes with at = off and
	 * len = len.  0, TFS_PASSTHROUGH (read instead), or a negative tfs_code. */
	int (*splice_fd)(void *ctx, uint64_t off, uint64_t len, tfs_source_fd *out,
			 tfs_error *err);
	/* Optional: another reference to ctx for a copy of the source (tfs_source_hold) that
	 * must stay valid whatever happens to the model (a refcount); NULL: the copy borrows
	 * ctx (which must then outlive the copy). */
	void *(*hold)(void *ctx);
	/* Optional: drops one reference (the source's, or a hold's). */
	void (*release)(void *ctx);
} tfs_computed_ops;

/* Makes s a computed source of size bytes, taking ctx over (ops->release when s is
 * closed); kind "computed", no mapping, fd -1. */
void tfs_source_init_computed(tfs_source *s, const tfs_computed_ops *ops, void *ctx,
			      uint64_t size);
/* Frees what the kind holds and leaves s closed (size 0; path and label kept). */
void tfs_source_close(tfs_source *s);
/* tfs_source_close, and frees path and label. */
void tfs_source_free(tfs_source *s);
/* ops->quiesce, where the kind has one. */
void tfs_source_quiesce(const tfs_source *s);
/* A copy of s for a reader that must not depend on s (ops->hold); free with
 * tfs_source_free. */
int tfs_source_hold(tfs_source *copy, const tfs_source *s, tfs_error *err);
/* Turns readahead back on for a local file once its headers are parsed. */
void tfs_source_advise_normal(const tfs_source *s);

/* ==== reading (codec) ==== */

/* All its bytes at their offsets in memory (a mapping or memory), or NULL (remote). */
const uint8_t *tfs_source_data(const tfs_source *s);
/* Makes the first `end` bytes of s readable at s->map (a remote source fetches them; a
 * local one has them all).  0 or an error naming the source. */
int tfs_source_head(const tfs_source *s, uint64_t end, tfs_error *err);
/* Drops cached copies of s's bytes (ops->forget); 0 for kinds without. */
int tfs_source_forget(const tfs_source *s, tfs_error *err);
/* Compares n tensor bytes at off of a source without a mapping of its data with pb: 4 KiB
 * at the start, middle and end, read through the source.  *differ says whether they
 * differ; 0 or an error. */
int tfs_source_samples_differ(bool *differ, const tfs_source *sa, uint64_t off,
			      const uint8_t *pb, uint64_t n, tfs_error *err);
/* A whole regular file of at most cap bytes, read into a new NUL-terminated buffer. */
int tfs_read_small_file(const char *path, uint64_t cap, uint8_t **out, uint64_t *len,
			tfs_error *err);

/* ==== copying into new files ==== */

/* Block size in which fd (a new empty file) can share extents with s; 0: it can't. */
uint32_t tfs_source_clone_block(int fd, const tfs_source *s);
/* Copies [off, off + len) of s to pos of fd (path): copy_file_range from a local file
 * (written from its mapping where the kernel cannot), else read through s; with blk
 * (tfs_source_clone_block) set and pos and off equal modulo blk, the whole blocks of the
 * range are cloned and only the partial blocks at its two ends copied.  progress may be
 * NULL. */
int tfs_source_copy(int fd, const char *path, uint64_t pos, const tfs_source *s, uint64_t off,
		    uint64_t len, uint32_t blk, const tfs_io_progress *progress, tfs_error *err);

#endif
