/* remote.c - a model file over HTTP(S): the header in memory, data through the block cache. */
#include "remote.h"
#include "cache.h"
#include "http.h"
#include "cursor.h"

#include <curl/curl.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <syslog.h>
#include <unistd.h>

#define FIRST_FETCH  (64u << 10)   /* the first request: most headers fit */
#define HEAD_MAX     (1ull << 30)  /* a header larger than this is refused */
#define CHUNK_MIN    (8ull << 20)  /* a data fetch, doubling on sequential reads... */
#define CHUNK_MAX    (128ull << 20)/* ...up to this */
#define MAX_SIZE     (1ull << 46)  /* 64 TiB: a larger size is a server's mistake */
#define PART_BLOCKS  ((2ull << 20) / TFS_CACHE_BLOCK) /* a fetch is split in parts of >= 2 MiB */
/* ...unless connections= was left to its default and the server answers within this
 * (microseconds): on the same machine or a LAN a request's wait costs nothing worth hiding,
 * and parts (or chunks) written into one cache file at once cost CPU (1.5x per byte on 2
 * cores, scripts/bench-remote.sh), so a fetch is one request, one chunk ahead. */
#define NEAR_LATENCY_US 2000
#define MAX_PARTS    16            /* ...on at most this many connections at once */
/* Chunks fetched ahead of a sequential reader at once: the second one's parts queue for
 * the connections the first one's free, so none idles between chunks (a request's latency
 * each time, 20 ms in scripts/bench-remote.sh's proxy). */
#define PREFETCH_DEPTH 2
/* Received bytes are gathered into writes of this size: libcurl hands the body over 16 KiB
 * at a time, and a 16 KiB pwrite costs the cache file's inode lock (contended between
 * fetches), a small folio and a reader's wakeup each time.  (A writer thread per fetch, so
 * that receiving and writing overlap, was measured slower on 2 cores.) */
#define WRITE_BATCH  (1u << 20)

struct tfs_remote {
	tfs_http *http;
	tfs_cache *cache;
	tfs_validator v;
	uint8_t *head;            /* reserved for min(size, HEAD_MAX) bytes; head_len readable */
	uint64_t head_cap, head_len;
	pthread_mutex_t lock;     /* the cache's map, inflight, chunk */
	pthread_cond_t fetched;
	uint8_t *inflight;        /* per block: being fetched by some thread */
	uint64_t n_blocks;
	uint64_t chunk, seq_end;  /* the next fetch's size; where the last one ended */
	uint64_t seq_from;        /* the first block of the last fetch, when it was sequential */
	bool seq;                 /* the last fetch continued the one before */
	int prefetching;          /* threads fetching chunks ahead of a sequential reader */
	bool changed;             /* the file changed on the server: every read fails */
	int parts;                /* a fetch's parts fetched at once (-o connections) */
	bool parts_auto;          /* connections= not given: one part for a near server */
	int64_t near_us;          /* NEAR_LATENCY_US, or TFS_NEAR_LATENCY_US (see near_latency) */
};

uint64_t tfs_remote_size(const tfs_remote *r) { return r->v.size; }

int64_t tfs_remote_mtime(const tfs_remote *r)
{
	time_t t = r->v.last_modified[0] ? curl_getdate(r->v.last_modified, NULL) : -1;
	return t < 0 ? 0 : (int64_t)t;
}
const char *tfs_remote_etag(const tfs_remote *r) { return r->v.etag; }

const uint8_t *tfs_remote_map(const tfs_remote *r) { return r->head; }

void tfs_remote_stats(const tfs_remote *r, uint64_t *requests, uint64_t *bytes)
{
	tfs_http_stats(r->http, requests, bytes);
}

void tfs_remote_quiesce(tfs_remote *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock); /* a readahead thread still running uses r */
	while (r->prefetching)
		pthread_cond_wait(&r->fetched, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

void tfs_remote_free(tfs_remote *r)
{
	if (!r)
		return;
	tfs_remote_quiesce(r);
	if (r->head)
		munmap(r->head, (size_t)r->head_cap);
	tfs_cache_free(r->cache);
	tfs_http_free(r->http);
	free(r->inflight);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->fetched);
	free(r);
}

/* ==== fetching into the cache ==== */

typedef struct {
	tfs_remote *r;
	uint64_t marked;          /* blocks before this one are written and marked */
	uint8_t *buf;             /* received, not yet written: buf[0, buf_len) at buf_pos */
	uint64_t buf_pos;
	size_t buf_len;
} fetch_state;

/* Marks blocks [f->marked, upto) present and lets their readers go. */
static void mark_upto(fetch_state *f, uint64_t upto)
{
	tfs_remote *r = f->r;
	if (upto <= f->marked)
		return;
	pthread_mutex_lock(&r->lock);
	tfs_cache_mark(r->cache, f->marked, upto);
	memset(r->inflight + f->marked, 0, (size_t)(upto - f->marked));
	pthread_cond_broadcast(&r->fetched);
	pthread_mutex_unlock(&r->lock);
	f->marked = upto;
}

/* Writes [pos, pos + n) into the cache and marks the blocks it completes. */
static int store(fetch_state *f, uint64_t pos, const void *data, size_t n)
{
	if (tfs_cache_write(f->r->cache, pos, data, n))
		return -1;
	uint64_t end = pos + n;
	mark_upto(f, end == f->r->v.size ? f->r->n_blocks : end / TFS_CACHE_BLOCK);
	return 0;
}

/* Writes what is gathered. */
static int flush(fetch_state *f)
{
	if (!f->buf_len)
		return 0;
	if (store(f, f->buf_pos, f->buf, f->buf_len))
		return -1;
	f->buf_pos += f->buf_len;
	f->buf_len = 0;
	return 0;
}

/* The body of a checked response (tfs_http_get checks it before): gathered, then into the
 * cache, each block marked as soon as it is written whole, so readers need not wait for the
 * whole chunk.  A retry resumes at the byte after the last one given here, so what is
 * gathered stays valid across attempts. */
static int to_cache(void *ctx, uint64_t pos, const void *data, size_t n)
{
	fetch_state *f = ctx;
	if (!f->buf) /* no memory for gathering: written as it comes */
		return store(f, pos, data, n);
	if (f->buf_len && f->buf_pos + f->buf_len != pos && flush(f))
		return -1;
	if (!f->buf_len)
		f->buf_pos = pos;
	const uint8_t *p = data;
	while (n) {
		size_t k = WRITE_BATCH - f->buf_len < n ? WRITE_BATCH - f->buf_len : n;
		memcpy(f->buf + f->buf_len, p, k);
		f->buf_len += k;
		p += k;
		n -= k;
		if (f->buf_len == WRITE_BATCH && flush(f))
			return -1;
	}
	return 0;
}

/* The first missing block of [b0, b1) whose fetch this thread takes on, as [*s, *e), within
 * the item's blocks [lo, hi): blocks others fetch are waited for.  Called with the lock;
 * false when all are present. */
static bool claim(tfs_remote *r, uint64_t b0, uint64_t b1, bool exact, uint64_t lo, uint64_t hi,
		  uint64_t *s, uint64_t *e)
{
	uint64_t m = b0, cb;
	for (;;) {
		while (m < b1 && tfs_cache_has(r->cache, m))
			m++;
		if (m == b1)
			return false;
		if (!r->inflight[m])
			break;
		pthread_cond_wait(&r->fetched, &r->lock);
		m = b0;
	}
	bool seq = m * TFS_CACHE_BLOCK == r->seq_end;
	r->seq = seq && !exact;
	r->seq_from = m;
	r->chunk = seq ? (r->chunk * 2 < CHUNK_MAX ? r->chunk * 2 : CHUNK_MAX) : CHUNK_MIN;
	cb = r->chunk / TFS_CACHE_BLOCK;
	uint64_t cap = tfs_cache_cap(r->cache) / 4 / TFS_CACHE_BLOCK; /* a small cache: smaller */
	if (tfs_cache_cap(r->cache) && cb > cap)
		cb = cap ? cap : 1;
	uint64_t start = m, limit = exact ? b1 : m + cb;
	if (!exact && !seq) { /* a random read: the aligned chunk around it */
		start = m - m % cb;
		if (start < lo)
			start = lo;
		limit = start + cb;
		for (uint64_t b = m; b > start; b--)
			if (tfs_cache_has(r->cache, b - 1) || r->inflight[b - 1]) {
				start = b;
				break;
			}
	}
	if (limit > r->n_blocks)
		limit = r->n_blocks;
	if (limit > hi && hi > m) /* not past the item */
		limit = hi;
	uint64_t end = m + 1;
	while (end < limit && !r->inflight[end] && !tfs_cache_has(r->cache, end))
		end++;
	memset(r->inflight + start, 1, (size_t)(end - start));
	*s = start;
	*e = end;
	r->seq_end = end * TFS_CACHE_BLOCK;
	return true;
}

/* Fetches blocks [s, e) into the cache on one connection (the lock not held). */
static int fetch_part(tfs_remote *r, uint64_t s, uint64_t e, tfs_error *err)
{
	uint64_t off = s * TFS_CACHE_BLOCK, end = e * TFS_CACHE_BLOCK;
	if (end > r->v.size)
		end = r->v.size;
	size_t batch = end - off < WRITE_BATCH ? (size_t)(end - off) : WRITE_BATCH;
	fetch_state f = { .r = r, .marked = s, .buf = malloc(batch) };
	/* what is written is pinned until marked: a mount evicting a block this one writes
	 * again (both fetched it) would punch part of it and leave it marked present */
	int pin = tfs_cache_pin(r->cache, off, end - off);
	int rc = tfs_http_get(r->http, off, end - off, &r->v, NULL, to_cache, &f, NULL, err);
	if (!rc && flush(&f))
		rc = tfs_error_sys(err, errno ? errno : EIO, "%s: cannot store what was received",
				   tfs_http_url(r->http));
	free(f.buf);
	if (!rc)
		mark_upto(&f, e);
	if (pin >= 0)
		close(pin);
	pthread_mutex_lock(&r->lock);
	if (rc && r->v.changed && !r->changed) {
		r->changed = true; /* said once; every read fails from now on */
		syslog(LOG_ERR, "tensorfs: %s", err ? err->msg : tfs_http_url(r->http));
	}
	memset(r->inflight + f.marked, 0, (size_t)(e - f.marked));
	pthread_cond_broadcast(&r->fetched);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* Whether fetches go one request at a time (see NEAR_LATENCY_US). */
static bool near(tfs_remote *r)
{
	int64_t latency = r->parts_auto ? tfs_http_latency_us(r->http) : -1;
	return latency >= 0 && latency < r->near_us;
}

/* NEAR_LATENCY_US, or the microseconds TFS_NEAR_LATENCY_US gives: the tests' (mount_remote)
 * on a machine whose load alone makes a local server's answers take over 2 ms (under the
 * sanitizers, with every core busy, they took 2-3 ms: no fetch was one request). */
static int64_t near_latency(void)
{
	const char *e = getenv("TFS_NEAR_LATENCY_US");
	char *end;
	long long v = e ? strtoll(e, &end, 10) : -1;

	return e && *e && !*end && v >= 0 ? (int64_t)v : NEAR_LATENCY_US;
}

typedef struct {
	tfs_remote *r;
	uint64_t s, e;
	int rc;
	bool started;
	pthread_t thread;
	tfs_error err;
} part_job;

static void *part_main(void *arg)
{
	part_job *j = arg;
	j->rc = fetch_part(j->r, j->s, j->e, &j->err);
	return NULL;
}

/* Fetches blocks [s, e) into the cache: a range of several parts is split across up to
 * `connections` connections in parallel (unless the server is near: NEAR_LATENCY_US), this
 * thread fetching the first part (the blocks a sequential reader wants first). */
static int fetch(tfs_remote *r, uint64_t s, uint64_t e, tfs_error *err)
{
	uint64_t k = (e - s) / PART_BLOCKS;
	if (k > (uint64_t)r->parts)
		k = (uint64_t)r->parts;
	if (near(r))
		k = 1;
	if (k < 2)
		return fetch_part(r, s, e, err);
	part_job jobs[MAX_PARTS];
	uint64_t step = (e - s + k - 1) / k;
	for (uint64_t i = 1; i < k; i++) {
		uint64_t a = s + i * step, b = a + step < e ? a + step : e;
		jobs[i] = (part_job){ .r = r, .s = a, .e = b };
		jobs[i].started = pthread_create(&jobs[i].thread, NULL, part_main, &jobs[i]) == 0;
	}
	int rc = fetch_part(r, s, s + step, err);
	for (uint64_t i = 1; i < k; i++) {
		if (jobs[i].started)
			pthread_join(jobs[i].thread, NULL);
		else
			part_main(&jobs[i]);
		if (!rc && jobs[i].rc) {
			rc = jobs[i].rc;
			if (err)
				*err = jobs[i].err;
		}
	}
	return rc;
}

/* ==== readahead: one chunk ahead of a sequential reader, on a thread of its own ==== */

typedef struct {
	tfs_remote *r;
	uint64_t s, e;
} prefetch_job;

static void *prefetch_main(void *arg)
{
	prefetch_job *j = arg;
	tfs_remote *r = j->r;
	tfs_error err;
	fetch(r, j->s, j->e, &err); /* a failure: the reader fetches it again, and says why */
	free(j);
	pthread_mutex_lock(&r->lock);
	r->prefetching--;
	pthread_cond_broadcast(&r->fetched);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* After a read at block b of a sequential reader, in the chunk fetched last: the next chunk
 * is fetched meanwhile (while up to PREFETCH_DEPTH chunks are in flight), up to the end of
 * the item read (block hi). */
static void readahead(tfs_remote *r, uint64_t b, uint64_t hi)
{
	pthread_mutex_lock(&r->lock);
	uint64_t s = r->seq_end / TFS_CACHE_BLOCK, e = s, cb;
	int depth = near(r) ? 1 : PREFETCH_DEPTH;
	if (r->prefetching >= depth || r->changed || !r->seq || b < r->seq_from ||
	    s >= r->n_blocks || s >= hi || r->inflight[s] || tfs_cache_has(r->cache, s)) {
		pthread_mutex_unlock(&r->lock);
		return;
	}
	r->chunk = r->chunk * 2 < CHUNK_MAX ? r->chunk * 2 : CHUNK_MAX;
	cb = r->chunk / TFS_CACHE_BLOCK;
	if (tfs_cache_cap(r->cache) && cb > tfs_cache_cap(r->cache) / 4 / TFS_CACHE_BLOCK)
		cb = tfs_cache_cap(r->cache) / 4 / TFS_CACHE_BLOCK + 1;
	while (e < s + cb && e < r->n_blocks && e < hi && !r->inflight[e] &&
	       !tfs_cache_has(r->cache, e))
		e++;
	prefetch_job *j = malloc(sizeof(*j));
	pthread_attr_t a;
	pthread_t t;
	bool started = false;
	if (j && pthread_attr_init(&a) == 0) {
		*j = (prefetch_job){ r, s, e };
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		memset(r->inflight + s, 1, (size_t)(e - s));
		started = pthread_create(&t, &a, prefetch_main, j) == 0;
		pthread_attr_destroy(&a);
		if (!started)
			memset(r->inflight + s, 0, (size_t)(e - s));
	}
	if (started) {
		r->prefetching++;
		r->seq_from = s;
		r->seq_end = e * TFS_CACHE_BLOCK;
	} else {
		free(j);
	}
	pthread_mutex_unlock(&r->lock);
}

static int changed_error(tfs_remote *r, tfs_error *err)
{
	return tfs_error_sys(err, EIO, "%s: the file changed on the server since it was "
			     "mounted: remount to read the new version", tfs_http_url(r->http));
}

static int lost_error(tfs_remote *r, uint64_t off, uint64_t len, tfs_error *err)
{
	return tfs_error_sys(err, EIO, "%s: the cache keeps losing [%llu, +%llu)",
			     tfs_http_url(r->http), (unsigned long long)off,
			     (unsigned long long)len);
}

/* The blocks of the item at bytes [lo, hi): [*blo, *bhi). */
static void item_blocks(const tfs_remote *r, uint64_t lo, uint64_t hi, uint64_t *blo,
			uint64_t *bhi)
{
	if (hi > r->v.size || hi <= lo)
		lo = 0, hi = r->v.size;
	*blo = lo / TFS_CACHE_BLOCK;
	*bhi = (hi + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK;
}

/* Makes the blocks of [off, off+len) present, fetching what is missing: exactly that (the
 * header), or whole chunks (data) within the item at [lo, hi). */
static int ensure(tfs_remote *r, uint64_t off, uint64_t len, bool exact, uint64_t lo,
		  uint64_t hi, tfs_error *err)
{
	uint64_t blo, bhi;
	item_blocks(r, lo, hi, &blo, &bhi);
	uint64_t b0 = off / TFS_CACHE_BLOCK, b1 = (off + len + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK;
	for (int round = 0; round < 100; round++) { /* a cap smaller than the range: bounded */
		uint64_t s, e;
		pthread_mutex_lock(&r->lock);
		bool changed = r->changed;
		bool need = !changed && claim(r, b0, b1, exact, blo, bhi, &s, &e);
		pthread_mutex_unlock(&r->lock);
		if (changed)
			return changed_error(r, err);
		if (!need)
			return 0;
		int rc = fetch(r, s, e, err);
		if (rc)
			return rc;
	}
	return lost_error(r, off, len, err);
}

/* Reads [off, off+len) through the cache, fetching what is missing (see ensure). */
static int cached_read(tfs_remote *r, void *buf, uint64_t off, uint64_t len, bool exact,
		       uint64_t lo, uint64_t hi, tfs_error *err)
{
	uint64_t blo, bhi;
	item_blocks(r, lo, hi, &blo, &bhi);
	for (int round = 0; round < 100; round++) {
		int rc = ensure(r, off, len, exact, lo, hi, err);
		if (rc)
			return rc;
		rc = tfs_cache_read(r->cache, buf, off, len, err);
		if (rc == 0 && !exact)
			readahead(r, off / TFS_CACHE_BLOCK, bhi);
		if (rc <= 0)
			return rc;
		pthread_mutex_lock(&r->lock); /* evicted meanwhile: fetch it again */
		tfs_cache_resync(r->cache, off, len);
		pthread_mutex_unlock(&r->lock);
	}
	return lost_error(r, off, len, err);
}

int tfs_remote_ready(tfs_remote *r, uint64_t off, uint64_t len, uint64_t lo, uint64_t hi,
		     int *fd, tfs_error *err)
{
	uint64_t blo, bhi;
	item_blocks(r, lo, hi, &blo, &bhi);
	uint64_t end;
	if (tfs_add_overflow(off, len, &end) || end > r->v.size || !len)
		return tfs_error_set(err, TFS_E_INVALID, "%s: read [%llu, +%llu) past its end",
				     tfs_http_url(r->http), (unsigned long long)off,
				     (unsigned long long)len);
	for (int round = 0; round < 100; round++) {
		/* pinned first, then present by the map file: they stay so until *fd is closed */
		int pin = tfs_cache_pin(r->cache, off, len);
		if (pin < 0)
			return TFS_PASSTHROUGH;
		int rc = ensure(r, off, len, false, lo, hi, err);
		if (rc) {
			close(pin);
			return rc;
		}
		if (tfs_cache_holds(r->cache, off, len)) {
			readahead(r, off / TFS_CACHE_BLOCK, bhi);
			*fd = pin;
			return 0;
		}
		close(pin); /* another mount evicted a block: fetch it again */
		pthread_mutex_lock(&r->lock);
		tfs_cache_resync(r->cache, off, len);
		pthread_mutex_unlock(&r->lock);
	}
	return lost_error(r, off, len, err);
}

int tfs_remote_pread(tfs_remote *r, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	return tfs_remote_pread_in(r, buf, len, off, 0, r->v.size, err);
}

int tfs_remote_pread_in(tfs_remote *r, void *buf, uint64_t len, uint64_t off, uint64_t lo,
			uint64_t hi, tfs_error *err)
{
	uint64_t end;
	if (tfs_add_overflow(off, len, &end) || end > r->v.size)
		return tfs_error_set(err, TFS_E_INVALID, "%s: read [%llu, +%llu) past its end",
				     tfs_http_url(r->http), (unsigned long long)off,
				     (unsigned long long)len);
	if (!len)
		return 0;
	if (end <= r->head_len && !r->changed) {
		memcpy(buf, r->head + off, (size_t)len);
		return 0;
	}
	return cached_read(r, buf, off, len, false, lo, hi, err);
}

/* ==== the header ==== */

int tfs_remote_head(tfs_remote *r, uint64_t end, tfs_error *err)
{
	if (end <= r->head_len)
		return 0;
	if (end > r->head_cap)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: header of more than %llu bytes",
				     tfs_http_url(r->http), (unsigned long long)r->head_cap);
	uint64_t want = r->head_len * 2 > end ? r->head_len * 2 : end;
	want = (want + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK * TFS_CACHE_BLOCK;
	if (want > r->head_cap)
		want = r->head_cap;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), a = r->head_len & ~(pg - 1);
	uint64_t b = (want + pg - 1) & ~(pg - 1);
	if (mprotect(r->head + a, (size_t)(b - a), PROT_READ | PROT_WRITE) < 0)
		return tfs_error_sys(err, errno, "%s: header memory", tfs_http_url(r->http));
	int rc = cached_read(r, r->head + r->head_len, r->head_len, want - r->head_len, true, 0,
			     r->v.size, err);
	if (rc)
		return rc;
	r->head_len = want;
	return 0;
}

int tfs_remote_forget(tfs_remote *r, tfs_error *err)
{
	uint64_t had = r->head_len;
	pthread_mutex_lock(&r->lock);
	while (r->prefetching) /* a readahead thread of the read that proved them wrong */
		pthread_cond_wait(&r->fetched, &r->lock);
	int rc = tfs_cache_forget(r->cache);
	pthread_mutex_unlock(&r->lock);
	if (rc)
		return tfs_error_set(err, TFS_E_INVALID, "%s: its cached bytes cannot be dropped "
				     "(another mount is reading them, or the cache cannot be written)",
				     tfs_http_url(r->http));
	r->head_len = 0;
	return tfs_remote_head(r, had, err);
}

typedef struct {
	uint8_t *buf;
	uint64_t cap;
} first_bytes;

static int to_buffer(void *ctx, uint64_t pos, const void *data, size_t n)
{
	first_bytes *f = ctx;
	if (pos + n > f->cap)
		return -1;
	memcpy(f->buf + pos, data, n);
	return 0;
}

/* The first request: the size and validator, and the first bytes (into the cache). */
static int first_request(tfs_remote *r, const char *source, const tfs_open_opts *o,
			 tfs_error *err)
{
	const char *url = tfs_http_target_url(r->http); /* the cache's key: no credential */
	char *dir = o->cache_dir ? strdup(o->cache_dir) : tfs_cache_default_dir();
	static uint8_t none;
	first_bytes f = { malloc(FIRST_FETCH), FIRST_FETCH };
	tfs_validator old;
	uint64_t got = 0;
	bool cached = dir && tfs_cache_last_get(dir, url, &old) == 0 && old.etag[0];
	int rc = !dir || !f.buf ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
	if (!rc) {
		r->v = cached ? old : r->v;
		rc = tfs_http_get(r->http, 0, FIRST_FETCH, &r->v, cached ? old.etag : NULL,
				  to_buffer, &f, &got, err);
	}
	if (rc == TFS_PASSTHROUGH) /* 304: the cached version is the server's */
		got = 0, rc = 0;
	if (!rc && r->v.size == 0)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: empty file", source);
	if (!rc && r->v.size > MAX_SIZE)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: the server says it has %llu bytes: more "
				   "than a model file can be", source, (unsigned long long)r->v.size);
	if (!rc)
		rc = tfs_cache_open(&r->cache, dir, url, &r->v, o->cache_size, err);
	if (!rc) {
		tfs_cache_last_put(dir, url, &r->v);
		uint64_t full = got == r->v.size ? (got + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK
						 : got / TFS_CACHE_BLOCK;
		int pin = got ? tfs_cache_pin(r->cache, 0, got) : -1; /* as a fetch does */
		if (got && tfs_cache_write(r->cache, 0, f.buf ? f.buf : &none, (size_t)got) == 0)
			tfs_cache_mark(r->cache, 0, full);
		if (pin >= 0)
			close(pin);
	}
	free(f.buf);
	free(dir);
	return rc;
}

int tfs_remote_open(tfs_remote **out, const char *url, const tfs_open_opts *o, tfs_error *err)
{
	tfs_remote *r = calloc(1, sizeof(*r));
	*out = NULL;
	if (!r)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", url);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->fetched, NULL);
	r->chunk = CHUNK_MIN;
	r->parts = o->connections > 0 ? (o->connections < MAX_PARTS ? o->connections : MAX_PARTS)
				      : 4;
	r->parts_auto = o->connections <= 0;
	r->near_us = near_latency();
	int rc = tfs_http_new(&r->http, url, o, err);
	if (!rc)
		rc = first_request(r, url, o, err);
	if (!rc) {
		r->n_blocks = (r->v.size + TFS_CACHE_BLOCK - 1) / TFS_CACHE_BLOCK;
		r->head_cap = r->v.size < HEAD_MAX ? r->v.size : HEAD_MAX;
		r->head = mmap(NULL, (size_t)r->head_cap, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r->head == MAP_FAILED) {
			r->head = NULL;
			rc = tfs_error_sys(err, errno, "%s: header memory", url);
		} else if (!(r->inflight = calloc(r->n_blocks + 1, 1))) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", url);
		}
	}
	if (!rc)
		rc = tfs_remote_head(r, r->head_cap < FIRST_FETCH ? r->head_cap : FIRST_FETCH, err);
	if (rc) {
		tfs_remote_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* ==== a small file, whole (an index) ==== */

typedef struct {
	uint8_t *buf;
	uint64_t len, cap, limit;
	const tfs_validator *v;
} growing;

static int to_growing(void *ctx, uint64_t pos, const void *data, size_t n)
{
	growing *g = ctx;
	if (pos != g->len || n > g->limit - g->len || g->v->size > g->limit)
		return -1; /* a file too large is said by the caller */
	if (g->len + n + 1 > g->cap) {
		uint64_t cap = (g->len + n + 1) * 2;
		uint8_t *b = realloc(g->buf, (size_t)cap);
		if (!b)
			return -1;
		g->buf = b;
		g->cap = cap;
	}
	memcpy(g->buf + g->len, data, n);
	g->len += n;
	return 0;
}

static int fetch_whole(tfs_http *h, const char *url, uint64_t cap, const char *accept,
		       uint8_t **out, uint64_t *len, int64_t *mtime, tfs_error *err);

int tfs_remote_fetch_small(const char *url, const tfs_open_opts *o, uint64_t cap,
			   const char *accept, uint8_t **out, uint64_t *len, int64_t *mtime,
			   tfs_error *err)
{
	tfs_http *h = NULL;
	int rc = tfs_http_new(&h, url, o, err);
	return rc ? rc : fetch_whole(h, url, cap, accept, out, len, mtime, err);
}

int tfs_remote_fetch_target(tfs_target *t, const char *source, const tfs_open_opts *o,
			    uint64_t cap, uint8_t **out, uint64_t *len, tfs_error *err)
{
	tfs_http *h = NULL;
	int rc = tfs_http_new_target(&h, source, t, o, err);
	return rc ? rc : fetch_whole(h, source, cap, NULL, out, len, NULL, err);
}

/* Fetches the file of h whole (h freed). */
static int fetch_whole(tfs_http *h, const char *url, uint64_t cap, const char *accept,
		       uint8_t **out, uint64_t *len, int64_t *mtime, tfs_error *err)
{
	tfs_validator v = { .known = false };
	growing g = { .limit = cap, .v = &v };
	int rc = 0;
	if (!rc && tfs_http_whole(h, accept))
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", url);
	if (!rc)
		rc = tfs_http_get(h, 0, cap + 1, &v, NULL, to_growing, &g, NULL, err);
	if (v.known && v.size > cap)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: file too large (%llu bytes, at most %llu)",
				   url, (unsigned long long)v.size, (unsigned long long)cap);
	if (!rc && !g.buf)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: empty file", url);
	tfs_http_free(h);
	if (rc) {
		free(g.buf);
		return rc;
	}
	g.buf[g.len] = '\0';
	*out = g.buf;
	*len = g.len;
	if (mtime) {
		time_t t = v.last_modified[0] ? curl_getdate(v.last_modified, NULL) : -1;
		*mtime = t < 0 ? 0 : (int64_t)t;
	}
	return 0;
}

int tfs_remote_exists(const char *source, const tfs_open_opts *o, tfs_error *err)
{
	tfs_http *h = NULL;
	int rc = tfs_http_new(&h, source, o, err);
	if (!rc)
		rc = tfs_http_head(h, err);
	tfs_http_free(h);
	return rc;
}
