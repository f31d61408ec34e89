/*
 * remote.h - a model file read over HTTP(S) or S3 (codec/net/remote.c): its header held in memory
 * for the parsers, its data read through the block cache (cache.h) in large chunks.
 */
#ifndef TFS_REMOTE_H
#define TFS_REMOTE_H

#include "base.h"
#include "scheme_impl.h"

typedef struct tfs_remote tfs_remote;

/*
 * Opens url: one ranged GET of its first 64 KiB (or a 304 when the cache holds them),
 * which gives its size and validator.  The first bytes are then at tfs_remote_map().
 */
int tfs_remote_open(tfs_remote **out, const char *url, const tfs_open_opts *o, tfs_error *err);
void tfs_remote_free(tfs_remote *r);
/* Waits until no readahead thread of r runs (they start again with the next sequential
 * read): before a fork, whose child must not inherit state of threads it does not have. */
void tfs_remote_quiesce(tfs_remote *r);
uint64_t tfs_remote_size(const tfs_remote *r);
/* Its Last-Modified time (seconds since the epoch), or 0. */
int64_t tfs_remote_mtime(const tfs_remote *r);
/* Its ETag ("" when the server sends none). */
const char *tfs_remote_etag(const tfs_remote *r);
/* The file's first bytes, the header: valid up to what tfs_remote_head made present;
 * pages past it are not readable (a stray read faults instead of reading zeros). */
const uint8_t *tfs_remote_map(const tfs_remote *r);
/* Makes the first `end` bytes present at tfs_remote_map() (fetching at least twice what
 * it had, so a header takes few requests).  0, or an error naming the URL. */
int tfs_remote_head(tfs_remote *r, uint64_t end, tfs_error *err);
/* Drops the file's cached bytes and fetches its header again (bytes that proved wrong, a
 * digest that does not match: the cache's copy may be what is wrong).  Only before the
 * header is parsed. */
int tfs_remote_forget(tfs_remote *r, tfs_error *err);
/* Reads [off, off+len) (inside the file) into buf, through the cache. */
int tfs_remote_pread(tfs_remote *r, void *buf, uint64_t len, uint64_t off, tfs_error *err);
/* The same, for bytes of an item at [lo, hi) of the file (a tensor): chunks fetched and read
 * ahead stay within it, as a reader of the item wants no more. */
int tfs_remote_pread_in(tfs_remote *r, void *buf, uint64_t len, uint64_t off, uint64_t lo,
			uint64_t hi, tfs_error *err);
/* For a reader that takes the bytes of [off, off+len) from the cache's data file itself
 * (splice), of an item at [lo, hi) (as tfs_remote_pread_in; [0, size) for none): makes them
 * present as tfs_remote_pread does (readahead too) and gives *fd, a
 * descriptor of that file of the caller's own (the bytes at their offsets in the remote
 * file) that pins them: no mount punches their blocks until the caller closes it.  0;
 * TFS_PASSTHROUGH when no such descriptor can be had (read with tfs_remote_pread instead);
 * or an error. */
int tfs_remote_ready(tfs_remote *r, uint64_t off, uint64_t len, uint64_t lo, uint64_t hi,
		     int *fd, tfs_error *err);
/* Fetches the whole of a small file at url (at most cap bytes, else an error), not cached:
 * *out (allocated, NUL-terminated), *len, and when mtime is not NULL its Last-Modified
 * (seconds; 0 when not said).  The server may answer with or without Range support;
 * accept, when not NULL, is sent as the Accept header. */
int tfs_remote_fetch_small(const char *url, const tfs_open_opts *o, uint64_t cap,
			   const char *accept, uint8_t **out, uint64_t *len, int64_t *mtime,
			   tfs_error *err);
/* The same for a target already resolved (taken over), messages naming source: a request
 * that is not a file of its own (an S3 listing). */
int tfs_remote_fetch_target(tfs_target *t, const char *source, const tfs_open_opts *o,
			    uint64_t cap, uint8_t **out, uint64_t *len, tfs_error *err);
/* Whether the remote file source is there (a HEAD request): 1, 0 (not found), or an error
 * naming it. */
int tfs_remote_exists(const char *source, const tfs_open_opts *o, tfs_error *err);
/* Requests and body bytes since the open. */
void tfs_remote_stats(const tfs_remote *r, uint64_t *requests, uint64_t *bytes);

#endif
