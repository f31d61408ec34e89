/*
 * http.h - ranged GETs over HTTP(S) with libcurl, checked and retried (codec/http.c).
 *
 * Every response is checked before a byte of its body is passed on: 206 with a
 * Content-Range naming exactly the bytes asked for, the same total size, ETag and
 * Last-Modified as the first response.  A change is TFS_E_IO with *changed set and never
 * retried; timeouts, resets, short bodies, 5xx and 429 (Retry-After honoured) are retried
 * from the first byte not yet received, with backoff and a cap.
 */
#ifndef TFS_HTTP_H
#define TFS_HTTP_H

#include "base.h"
#include "scheme_impl.h"

/* What identifies one version of a remote file. */
typedef struct {
	char etag[256];         /* "" when the server sends none */
	char last_modified[64];
	uint64_t size;          /* 0 until the first response */
	bool known;             /* filled by a response */
	bool changed;           /* a later response had another version */
} tfs_validator;

typedef struct tfs_http tfs_http;

/* A pool of connections (-o connections=N) to the remote file url (a source of a scheme:
 * scheme_impl.h), resolved by its scheme (the options' token, endpoint, ...); cafile and
 * timeout copied.  0 or TFS_E_NOMEM / TFS_E_INVALID. */
int tfs_http_new(tfs_http **out, const char *url, const tfs_open_opts *o, tfs_error *err);
/* The same for a target already resolved (taken over: freed with h, or now on an error);
 * messages name source. */
int tfs_http_new_target(tfs_http **out, const char *source, tfs_target *t,
			const tfs_open_opts *o, tfs_error *err);
void tfs_http_free(tfs_http *h);
/* What messages name (the source); the URL requested (what the cache is keyed by). */
const char *tfs_http_url(const tfs_http *h);
const char *tfs_http_target_url(const tfs_http *h);

/* Makes h fetch a small file whole: a GET from byte 0 may be answered with a 200 and the
 * whole file (a server without Range support for it, as a registry's manifests), and
 * requests carry "Accept: accept" when it is not NULL.  -1: out of memory. */
int tfs_http_whole(tfs_http *h, const char *accept);

/* Receives body bytes [pos, pos + n) in order; non-zero stops the transfer (an error). */
typedef int (*tfs_http_sink)(void *ctx, uint64_t pos, const void *data, size_t n);

/*
 * GET [off, off + len) of the file.  With v->known unset, the first response fills v (len
 * is then clipped to the file's size, and *got says how many bytes came); otherwise any
 * response with another validator fails.  With if_none_match (an ETag), a 304 answers
 * TFS_PASSTHROUGH (not an error: use the cached copy) and fills v from it.  0 when exactly the bytes asked were passed to sink.
 */
int tfs_http_get(tfs_http *h, uint64_t off, uint64_t len, tfs_validator *v,
		 const char *if_none_match, tfs_http_sink sink, void *ctx, uint64_t *got,
		 tfs_error *err);

/* A HEAD request for the file: 1 when it is there, 0 when the server says it is not (404,
 * 410), else an error (a refusal as the scheme words it; 5xx and connection errors are
 * retried first). */
int tfs_http_head(tfs_http *h, tfs_error *err);

/* The server's latency: the least time from a request sent to its first byte back, in
 * microseconds, over the last few answered requests; -1 before any. */
int64_t tfs_http_latency_us(const tfs_http *h);

/* Counters since tfs_http_new, for tests and benchmarks. */
void tfs_http_stats(const tfs_http *h, uint64_t *requests, uint64_t *bytes);

#endif
