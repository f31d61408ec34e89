/*
 * source.h - a source: one file's bytes a model reads from, whatever holds them (public).
 *
 * A source is opaque: a reader asks it for bytes through the functions below and never
 * looks at what holds them.  Kinds (source.c): a local file (a descriptor and a read-only
 * mapping), bytes in memory, a remote file (HTTP(S), read through codec's block cache),
 * bytes computed by a callback (a view's converted, permuted or quantized tensor:
 * tfs_computed_ops in source_impl.h); no reader knows which.
 */
#ifndef TFS_SOURCE_H
#define TFS_SOURCE_H

#include "../base/base.h"

#include <time.h>

typedef struct tfs_source tfs_source;

/* What index.json calls it (a shard's file name, a blob's digest...); its path or URL as
 * opened; its size in bytes; its modification time (a remote file's Last-Modified). */
const char *tfs_source_label(const tfs_source *s);
const char *tfs_source_path(const tfs_source *s);
uint64_t tfs_source_size(const tfs_source *s);
struct timespec tfs_source_mtime(const tfs_source *s);
/* Whether its bytes come over the network (fetched on demand). */
bool tfs_source_is_remote(const tfs_source *s);
/* A remote file's ETag ("" when its server sends none); NULL for the other kinds. */
const char *tfs_source_etag(const tfs_source *s);

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
/* tfs_source_pread_in that stops where a file ends early (it shrank since it was opened):
 * the count read, or a negative tfs_code. */
int64_t tfs_source_read(const tfs_source *s, void *buf, uint64_t len, uint64_t off, uint64_t lo,
			uint64_t hi, tfs_error *err);

/* A descriptor holding a range's bytes at their offsets in the source, to splice from. */
typedef struct {
	int fd;
	bool pinned; /* the caller's own (a remote file's block cache, pinned: no mount punches
	              * the range's blocks): give it back with tfs_source_fd_done once the bytes
	              * have left it; else the source's own, valid while the source is */
	bool owned;  /* the caller's own copy of a file nobody punches or truncates (a
	              * quantized view's cache file, which may be closed meanwhile): splice from
	              * it as from the source's own, and close it (tfs_source_fd_done) after */
	uint64_t at;  /* where the range's first byte is in fd: off for a file, a cache; a
	               * computed source's bytes may sit elsewhere (a shard's row run) */
	uint64_t len; /* how many of the range's bytes fd holds from there (1..len asked):
	               * a computed source may give a prefix; ask again for the rest */
} tfs_source_fd;

/* For a reader that moves [off, off+len) (of an item at [lo, hi), as tfs_source_pread_in)
 * out of a file itself (splice, no copy): a local file's own descriptor; a remote file's
 * block cache file, the range made present and pinned; a computed source's file holding
 * a prefix of the range (out->at, out->len).  0; TFS_PASSTHROUGH when there is no such
 * file (bytes in memory, or no pin could be had): read the bytes instead; or an error
 * naming the source. */
int tfs_source_splice_fd(tfs_source_fd *out, const tfs_source *s, uint64_t off, uint64_t len,
			 uint64_t lo, uint64_t hi, tfs_error *err);
void tfs_source_fd_done(tfs_source_fd *f);

/* A concatenation's pieces (a stacked expert tensor of a mixture of experts: its experts'
 * bytes in their shards, codec/model/concat.h): how many, 0 for any other source; and piece
 * k: the label of the source holding it (a shard's file name), where and how many bytes.
 * false when s has no piece k. */
size_t tfs_source_n_pieces(const tfs_source *s);
bool tfs_source_piece(const tfs_source *s, size_t k, const char **label, uint64_t *off,
		      uint64_t *len);

/* Its bytes in memory, for a source that has no file (reply straight from them), else NULL. */
const uint8_t *tfs_source_memory(const tfs_source *s);
/* A local file's read-only mapping of all its bytes (NULL for other kinds): readers of it
 * advise the pages they use (tfs_source_madvise). */
const uint8_t *tfs_source_mapping(const tfs_source *s);
/* Whether a local file still holds [off, +len) (one fstat; other kinds: always): 0, or an
 * EIO error saying the file shrank under the mount.  Call it before touching the mapping
 * there: a mapped page past a file's new end faults (SIGBUS). */
int tfs_source_present(const tfs_source *s, uint64_t off, uint64_t len, tfs_error *err);
/* madvise(advice) of the whole pages around [off, off + len) of the mapping; nothing for a
 * source without one. */
void tfs_source_madvise(const tfs_source *s, uint64_t off, uint64_t len, int advice);
/* A descriptor of the caller's own of a local file holding the source's bytes at their
 * offsets (F_DUPFD_CLOEXEC: it outlives changes to the model); -1 with errno set
 * otherwise (EBADF for a source that is no local file). */
int tfs_source_dup_fd(const tfs_source *s);

/* A copy of s of the caller's own that reads the same bytes whatever happens to s or its
 * model afterwards (a local file: its own descriptor; a remote file: the same block cache),
 * for copying an item's bytes outside the lock that keeps the model still.  0 and *out
 * (free with tfs_source_held_free), or an error. */
int tfs_source_held_new(tfs_source **out, const tfs_source *s, tfs_error *err);
void tfs_source_held_free(tfs_source *held);
/* Copies [off, off + len) of s to the start of fd (path names it in messages), whatever
 * kind s is (copy_file_range from a local file; read through the others).  0 or an error. */
int tfs_source_copy_out(int fd, const char *path, const tfs_source *s, uint64_t off,
			uint64_t len, tfs_error *err);

#endif
