/* http.c - ranged GETs with libcurl: a small pool of connections, every response checked. */
#include "http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNECTIONS 64
#define MAX_ATTEMPTS 8        /* tries of one range without progress */
#define MAX_TOTAL_ATTEMPTS 64 /* tries of one range in all */
#define MAX_RETRY_AFTER 30    /* seconds: a longer Retry-After is cut to this */
#define MIN_PROGRESS (64u << 10) /* bytes an attempt must bring to restart the time budget */
#define ERROR_BODY 2048       /* the start of an error answer kept (an S3 error document) */

struct tfs_http {
	char *url;                /* what messages name: the source as typed (or hf's URL) */
	tfs_target t;             /* what is requested, and how it is authenticated */
	char *cafile;
	char *accept;             /* an Accept header's value, or NULL (tfs_http_whole) */
	bool whole;               /* a 200 with the whole file answers a GET from byte 0 */
	long timeout;             /* seconds: connect, and a stall of the body */
	struct timespec down_until; /* after a range got no answer: fail at once until then */
	pthread_mutex_t lock;
	pthread_cond_t freed;
	CURL *easy[MAX_CONNECTIONS];
	bool busy[MAX_CONNECTIONS];
	int n;
	uint64_t requests, bytes;
	int64_t latency[4];       /* us, of the last answered requests (ring; -1: none yet) */
	unsigned latency_at;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int tfs_http_new(tfs_http **out, const char *url, const tfs_open_opts *o, tfs_error *err)
{
	tfs_target t;
	int rc = tfs_target_resolve(&t, url, o, err);
	return rc ? rc : tfs_http_new_target(out, url, &t, o, err);
}

int tfs_http_new_target(tfs_http **out, const char *source, tfs_target *t,
			const tfs_open_opts *o, tfs_error *err)
{
	pthread_once(&global_once, global_init);
	tfs_http *h = calloc(1, sizeof(*h));
	const char *ca = o->cafile ? o->cafile : getenv("CURL_CA_BUNDLE");
	const char *name = t->scheme && t->scheme->named_by_url ? t->url : source;
	if (!h || !(h->url = strdup(name)) || (ca && *ca && !(h->cafile = strdup(ca)))) {
		tfs_target_free(t);
		tfs_http_free(h);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	}
	h->t = *t;
	memset(t, 0, sizeof(*t));
	h->n = o->connections > 0 ? (o->connections < MAX_CONNECTIONS ? o->connections
								       : MAX_CONNECTIONS) : 4;
	h->timeout = o->timeout > 0 ? o->timeout : 30;
	for (int i = 0; i < 4; i++)
		h->latency[i] = -1;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->freed, NULL);
	*out = h;
	return 0;
}

void tfs_http_free(tfs_http *h)
{
	if (!h)
		return;
	for (int i = 0; i < MAX_CONNECTIONS; i++)
		if (h->easy[i])
			curl_easy_cleanup(h->easy[i]);
	tfs_target_free(&h->t);
	free(h->cafile);
	free(h->accept);
	free(h->url);
	if (h->n) {
		pthread_mutex_destroy(&h->lock);
		pthread_cond_destroy(&h->freed);
	}
	free(h);
}

const char *tfs_http_url(const tfs_http *h) { return h->url; }
const char *tfs_http_target_url(const tfs_http *h) { return h->t.url; }

int tfs_http_whole(tfs_http *h, const char *accept)
{
	h->whole = true;
	free(h->accept);
	h->accept = NULL;
	return accept && !(h->accept = strdup(accept)) ? -1 : 0;
}

void tfs_http_stats(const tfs_http *h, uint64_t *requests, uint64_t *bytes)
{
	pthread_mutex_lock((pthread_mutex_t *)&h->lock);
	*requests = h->requests;
	*bytes = h->bytes;
	pthread_mutex_unlock((pthread_mutex_t *)&h->lock);
}

/* ==== one transfer ==== */

typedef enum { OK, CHANGED, NO_RANGE, BAD_RANGE, SINK } xfer_fail;

typedef struct {
	long status;
	char etag[256], last_modified[64];
	char bucket_region[64];   /* x-amz-bucket-region (an S3 bucket elsewhere) */
	char body[ERROR_BODY];    /* the start of an error answer's body */
	size_t body_len;
	bool have_range;
	uint64_t first, last, total;
	int64_t length;           /* Content-Length, or -1 */
	long retry_after;
	/* the request */
	uint64_t pos, end;        /* next byte expected; end (exclusive) */
	tfs_validator *v;
	bool whole;               /* the handle takes a whole 200 (tfs_http_whole) */
	bool got_whole;           /* ...and this response is one: its body ends it */
	bool checked;
	xfer_fail fail;
	tfs_http_sink sink;
	void *ctx;
	uint64_t received;
	long wait_s;              /* this attempt's connect and stall timeout */
	int64_t last_byte_ms;     /* when the last byte arrived (or the attempt began) */
	bool stalled;             /* given up: no byte for wait_s seconds */
} xfer;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* libcurl's progress callback: ends a transfer that has had no byte for wait_s seconds
 * (CURLOPT_LOW_SPEED_TIME averages over a window, so a trickle then a stall lasts longer). */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	xfer *x = ud;
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (now_ms() - x->last_byte_ms <= x->wait_s * 1000)
		return 0;
	x->stalled = true;
	return 1;
}

/* Copies a header's value (trimmed) into dst. */
static void header_value(char *dst, size_t cap, const char *p, size_t n)
{
	while (n && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	while (n && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' '))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, p, n);
	dst[n] = '\0';
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud)
{
	xfer *x = ud;
	size_t n = size * nitems;
	char val[256];
	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) { /* a new response (redirects) */
		const char *sp = memchr(line, ' ', n);
		x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		x->etag[0] = x->last_modified[0] = x->bucket_region[0] = '\0';
		x->body_len = 0;
		x->have_range = false;
		x->retry_after = -1;
		x->length = -1;
		return n;
	}
	const char *colon = memchr(line, ':', n);
	if (!colon)
		return n;
	size_t kl = (size_t)(colon - line), vl = n - kl - 1;
	if (kl == 4 && strncasecmp(line, "etag", 4) == 0) {
		header_value(x->etag, sizeof(x->etag), colon + 1, vl);
	} else if (kl == 19 && strncasecmp(line, "x-amz-bucket-region", 19) == 0) {
		header_value(x->bucket_region, sizeof(x->bucket_region), colon + 1, vl);
	} else if (kl == 13 && strncasecmp(line, "last-modified", 13) == 0) {
		header_value(x->last_modified, sizeof(x->last_modified), colon + 1, vl);
	} else if (kl == 11 && strncasecmp(line, "retry-after", 11) == 0) {
		header_value(val, sizeof(val), colon + 1, vl);
		x->retry_after = strtol(val, NULL, 10);
	} else if (kl == 14 && strncasecmp(line, "content-length", 14) == 0) {
		char *e;
		header_value(val, sizeof(val), colon + 1, vl);
		unsigned long long l = strtoull(val, &e, 10);
		x->length = e != val && !*e ? (int64_t)(l > INT64_MAX ? INT64_MAX : l) : -1;
	} else if (kl == 13 && strncasecmp(line, "content-range", 13) == 0) {
		unsigned long long a = 0, b = 0, t = 0;   /* what sscanf does not fill stays 0 */
		header_value(val, sizeof(val), colon + 1, vl);
		x->have_range = sscanf(val, "bytes %llu-%llu/%llu", &a, &b, &t) == 3 && a <= b &&
				b < t;
		x->first = a;
		x->last = b;
		x->total = t;
	}
	return n;
}

/* Whether this response is the same version of the file as v (an empty ETag or date on
 * both sides is no difference; one side without it is). */
static bool same_version(const xfer *x, const tfs_validator *v, uint64_t total)
{
	return strcmp(x->etag, v->etag) == 0 && strcmp(x->last_modified, v->last_modified) == 0 &&
	       total == v->size;
}

/* Checks a 206 before any of its body is used; fills v on the first response.  A handle
 * made whole (tfs_http_whole) also takes a 200 from byte 0: the file, however long. */
static xfer_fail check_response(xfer *x)
{
	if (x->status == 200 && x->whole && x->pos == 0 && !x->v->known) {
		snprintf(x->v->etag, sizeof(x->v->etag), "%s", x->etag);
		snprintf(x->v->last_modified, sizeof(x->v->last_modified), "%s", x->last_modified);
		x->v->size = x->length >= 0 ? (uint64_t)x->length : 0;
		x->v->known = true;
		x->got_whole = true;
		return OK;
	}
	if (x->status == 200)
		return NO_RANGE;
	if (x->status != 206 || !x->have_range || x->first != x->pos)
		return BAD_RANGE;
	if (!x->v->known) {
		snprintf(x->v->etag, sizeof(x->v->etag), "%s", x->etag);
		snprintf(x->v->last_modified, sizeof(x->v->last_modified), "%s", x->last_modified);
		x->v->size = x->total;
		x->v->known = true;
		if (x->end > x->total) /* the first request may ask past a small file's end */
			x->end = x->total;
	} else if (!same_version(x, x->v, x->total)) {
		return CHANGED;
	}
	if (x->last + 1 != x->end)
		return BAD_RANGE;
	return OK;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
	xfer *x = ud;
	size_t n = size * nmemb;
	if (!x->checked) {
		if (x->status != 200 && x->status != 206) { /* an error page: its start kept */
			size_t k = sizeof(x->body) - 1 - x->body_len;
			k = n < k ? n : k;
			memcpy(x->body + x->body_len, data, k);
			x->body_len += k;
			x->body[x->body_len] = '\0';
			return n;
		}
		if ((x->fail = check_response(x)) != OK)
			return 0;
		x->checked = true;
	}
	if (n > x->end - x->pos) { /* more than Content-Range said (or than asked for) */
		x->fail = x->got_whole ? SINK : BAD_RANGE;
		return 0;
	}
	if (x->sink(x->ctx, x->pos, data, n)) {
		x->fail = SINK;
		return 0;
	}
	x->pos += n;
	x->received += n;
	x->last_byte_ms = now_ms();
	return n;
}

/* ==== the pool ==== */

/* A connection of the pool for this thread's transfer (waits while all are busy). */
static int take(tfs_http *h, tfs_error *err)
{
	pthread_mutex_lock(&h->lock);
	for (;;) {
		for (int i = 0; i < h->n; i++) {
			if (h->busy[i])
				continue;
			if (!h->easy[i] && !(h->easy[i] = curl_easy_init()))
				break;
			h->busy[i] = true;
			pthread_mutex_unlock(&h->lock);
			return i;
		}
		bool none = true;
		for (int i = 0; i < h->n; i++)
			none &= !h->busy[i];
		if (none) {
			pthread_mutex_unlock(&h->lock);
			return tfs_error_set(err, TFS_E_NOMEM, "%s: cannot start libcurl", h->url);
		}
		pthread_cond_wait(&h->freed, &h->lock);
	}
}

int64_t tfs_http_latency_us(const tfs_http *h)
{
	int64_t best = -1;
	pthread_mutex_lock((pthread_mutex_t *)&h->lock);
	for (int i = 0; i < 4; i++)
		if (h->latency[i] >= 0 && (best < 0 || h->latency[i] < best))
			best = h->latency[i];
	pthread_mutex_unlock((pthread_mutex_t *)&h->lock);
	return best;
}

/* latency_us < 0: the request got no answer to time */
static void give_back(tfs_http *h, int i, uint64_t requests, uint64_t bytes, int64_t latency_us)
{
	pthread_mutex_lock(&h->lock);
	h->busy[i] = false;
	h->requests += requests;
	h->bytes += bytes;
	if (latency_us >= 0)
		h->latency[h->latency_at++ % 4] = latency_us;
	pthread_cond_signal(&h->freed);
	pthread_mutex_unlock(&h->lock);
}

/* Sets up easy handle c for a GET of [x->pos, x->end). */
static void setup(tfs_http *h, CURL *c, xfer *x, char *range, size_t cap,
		  struct curl_slist *hdrs)
{
	long follow = h->t.follow;
	long wait = x->wait_s;
	curl_easy_reset(c); /* keeps the connection, the DNS and TLS session caches */
	snprintf(range, cap, "%llu-%llu", (unsigned long long)x->pos,
		 (unsigned long long)(x->end - 1));
	curl_easy_setopt(c, CURLOPT_URL, h->t.url);
	curl_easy_setopt(c, CURLOPT_RANGE, range);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L); /* no token to another host */
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, wait);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stall of `wait` seconds */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, wait);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "tensorfs/0.1.0");
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10); /* fewer, larger cache writes */
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, NULL); /* bytes as stored, no gzip */
	if (h->cafile)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->cafile);
	if (h->t.token) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, h->t.token);
	}
	if (hdrs)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
}

/* The request's headers: the fixed ones (lines), and a signature made now (s3://). */
static CURLcode headers(tfs_http *h, const char *method, const char *const *lines,
			struct curl_slist **hdrs)
{
	*hdrs = NULL;
	for (size_t i = 0; lines[i]; i++) {
		struct curl_slist *l = curl_slist_append(*hdrs, lines[i]);
		if (!l)
			return CURLE_OUT_OF_MEMORY;
		*hdrs = l;
	}
	if (h->t.scheme->sign && h->t.scheme->sign(&h->t, method, hdrs))
		return CURLE_OUT_OF_MEMORY;
	return CURLE_OK;
}

/* One request on connection i; returns the curl code (x says the rest). */
static CURLcode perform(tfs_http *h, int i, xfer *x, const char *const *lines)
{
	char range[64];
	CURL *c = h->easy[i];
	struct curl_slist *hdrs = NULL;
	if (headers(h, "GET", lines, &hdrs) != CURLE_OK) {
		curl_slist_free_all(hdrs);
		give_back(h, i, 0, 0, -1);
		x->status = 0;
		x->fail = SINK;
		return CURLE_OUT_OF_MEMORY;
	}
	setup(h, c, x, range, sizeof(range), hdrs);
	x->status = 0;
	x->length = -1;
	x->got_whole = false;
	x->checked = false;
	x->fail = OK;
	x->retry_after = -1;
	x->received = 0;
	x->stalled = false;
	x->last_byte_ms = now_ms();
	x->body_len = 0;
	x->body[0] = x->bucket_region[0] = '\0';
	CURLcode rc = curl_easy_perform(c);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	for (struct curl_slist *l = hdrs; l; l = l->next) /* a session token, a signature */
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(hdrs);
	if (rc == CURLE_ABORTED_BY_CALLBACK && x->stalled)
		rc = CURLE_OPERATION_TIMEDOUT;
	long redirects = 0;
	curl_off_t sent = 0, first = 0;
	curl_easy_getinfo(c, CURLINFO_REDIRECT_COUNT, &redirects);
	/* from the request sent to the first byte back (both times count the redirects before) */
	bool timed = x->status == 206 && x->received &&
		     curl_easy_getinfo(c, CURLINFO_PRETRANSFER_TIME_T, &sent) == CURLE_OK &&
		     curl_easy_getinfo(c, CURLINFO_STARTTRANSFER_TIME_T, &first) == CURLE_OK &&
		     first >= sent;
	give_back(h, i, 1 + (uint64_t)redirects, x->received, timed ? (int64_t)(first - sent) : -1);
	return rc;
}

/* ==== retries ==== */

static bool retryable_curl(CURLcode rc)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT: case CURLE_RECV_ERROR: case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE: case CURLE_GOT_NOTHING: case CURLE_COULDNT_CONNECT:
	case CURLE_HTTP2: case CURLE_HTTP2_STREAM: case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The error of a response that is not retried: a clear line naming the URL. */
static int final_error(const tfs_http *h, const xfer *x, int tries, tfs_error *err)
{
	const char *u = h->url;
	if (x->fail == CHANGED) {
		x->v->changed = true;
		return tfs_error_sys(err, EIO, "%s: the file changed on the server (ETag %s, %llu "
				     "bytes, was %s, %llu bytes): remount to read the new version", u,
				     x->etag[0] ? x->etag : "none", (unsigned long long)x->total,
				     x->v->etag[0] ? x->v->etag : "none",
				     (unsigned long long)x->v->size);
	}
	if (x->fail == NO_RANGE)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: the server does not support Range "
				     "requests (HTTP 200 for a ranged GET)", u);
	if (x->status == 416)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: empty file (HTTP 416 for its first "
				     "bytes)", u);
	tfs_refusal r = { x->status, x->body, x->bucket_region, tries };
	return h->t.scheme->refused(&h->t, u, &r, err);
}

/* How long to wait before try number `tries` (>= 1) of a range. */
static long backoff_ms(const xfer *x, int tries)
{
	if ((x->status == 429 || x->status == 503) && x->retry_after >= 0)
		return (x->retry_after < MAX_RETRY_AFTER ? x->retry_after : MAX_RETRY_AFTER) * 1000L;
	long ms = 100L << (tries < 6 ? tries : 6); /* 200 ms doubling, up to 6.4 s */
	/* jitter as the AWS SDKs add it: clients throttled together do not retry together
	 * (a seed of each thread's own: processes started together draw differently) */
	static __thread unsigned seed;
	if (!seed)
		seed = (unsigned)now_ms() ^ (unsigned)getpid() * 2654435761u ^
		       (unsigned)(uintptr_t)&seed;
	return ms / 2 + (long)(rand_r(&seed) % (ms / 2 + 1));
}

static bool retryable(CURLcode rc, const xfer *x)
{
	if (x->fail == CHANGED || x->fail == NO_RANGE || x->fail == SINK)
		return false;
	if (x->fail == BAD_RANGE)
		return true; /* a wrong Content-Range: a confused proxy, maybe not the next time */
	if (rc != CURLE_OK && rc != CURLE_WRITE_ERROR)
		return retryable_curl(rc);
	if (x->status == 206)
		return true; /* a body that ended early without an error */
	if (x->status == 400 && (strstr(x->body, "<Code>RequestTimeout</Code>") ||
				 strstr(x->body, "<Code>Throttling")))
		return true; /* S3's throttling and idle-connection answers */
	return x->status == 429 || x->status == 408 || x->status >= 500;
}

/* ==== the time budget: a range without progress for 2 x timeout fails ==== */

/* Whether the server is taken as down (a range got no answer within its budget lately). */
static bool server_down(tfs_http *h)
{
	pthread_mutex_lock(&h->lock);
	int64_t until = (int64_t)h->down_until.tv_sec * 1000 + h->down_until.tv_nsec / 1000000;
	pthread_mutex_unlock(&h->lock);
	return now_ms() < until;
}

static void mark_down(tfs_http *h)
{
	int64_t until = now_ms() + h->timeout * 1000;
	pthread_mutex_lock(&h->lock);
	h->down_until.tv_sec = until / 1000;
	h->down_until.tv_nsec = (until % 1000) * 1000000;
	pthread_mutex_unlock(&h->lock);
}

/* The error of a range given up on: a clear line naming the URL (and what was asked,
 * when the source is not a URL: an s3:// key's endpoint). */
static int give_up(tfs_http *h, const xfer *x, CURLcode cc, int total, bool out_of_time,
		   tfs_error *err)
{
	char name[TFS_ERRMSG_MAX / 2];
	if (strcmp(h->url, h->t.url) != 0)
		snprintf(name, sizeof(name), "%s (%s)", h->url, h->t.url);
	else
		snprintf(name, sizeof(name), "%s", h->url);
	if (x->status && x->fail != OK && x->fail != BAD_RANGE)
		return final_error(h, x, total + 1, err);
	if (x->fail == OK && x->status >= 300 && cc == CURLE_OK)
		return final_error(h, x, total + 1, err);
	if (out_of_time && cc != CURLE_OK && cc != CURLE_WRITE_ERROR) {
		mark_down(h); /* no answer: the next reads fail at once for a while */
		return tfs_error_sys(err, EIO, "%s: no answer within %ld s (%s, after %d tries; "
				     "-o timeout=%ld)", name, 2 * h->timeout,
				     curl_easy_strerror(cc), total + 1, h->timeout);
	}
	if (cc == CURLE_PEER_FAILED_VERIFICATION)
		return tfs_error_sys(err, EIO, "%s: %s: the server's certificate is not trusted "
				     "(give its CA with -o cafile=FILE or CURL_CA_BUNDLE)", name,
				     curl_easy_strerror(cc));
	if (cc == CURLE_SSL_CACERT_BADFILE)
		return tfs_error_sys(err, EIO, "%s: cannot read the CA certificates %s",
				     h->url, h->cafile ? h->cafile : "(the system's)");
	if (cc != CURLE_OK && cc != CURLE_WRITE_ERROR)
		return tfs_error_sys(err, EIO, "%s: %s (after %d tries)", name,
				     curl_easy_strerror(cc), total + 1);
	if (x->fail == SINK)
		return tfs_error_sys(err, EIO, "%s: cannot store what was received", h->url);
	return tfs_error_sys(err, EIO, "%s: bad responses (HTTP %ld, Content-Range not the bytes "
			     "asked for) after %d tries", h->url, x->status, total + 1);
}

/* Before an attempt: the seconds it may wait for the server (the budget left, at most
 * timeout, at least 1). */
static long attempt_wait(const tfs_http *h, int64_t deadline)
{
	int64_t left = deadline - now_ms();
	long s = left > 0 ? (long)((left + 999) / 1000) : 1;
	return s < h->timeout ? s : h->timeout;
}

int tfs_http_get(tfs_http *h, uint64_t off, uint64_t len, tfs_validator *v,
		 const char *if_none_match, tfs_http_sink sink, void *ctx, uint64_t *got,
		 tfs_error *err)
{
	xfer x = { .pos = off, .end = off + len, .v = v, .sink = sink, .ctx = ctx,
		   .whole = h->whole };
	const char *lines[3] = { NULL };
	size_t n_lines = 0;
	char inm[300], acc[300];
	int tries = 0, total = 0, rc = 0;
	int64_t deadline = now_ms() + 2000 * h->timeout;
	if (if_none_match && *if_none_match) {
		snprintf(inm, sizeof(inm), "If-None-Match: %s", if_none_match);
		lines[n_lines++] = inm;
	}
	if (h->accept) {
		snprintf(acc, sizeof(acc), "Accept: %s", h->accept);
		lines[n_lines++] = acc;
	}
	while (x.pos < x.end || !v->known) {
		if (server_down(h)) { /* also after waiting for a connection another range held */
			rc = tfs_error_sys(err, EIO, "%s: the server did not answer a moment ago (no "
					   "answer within %ld s): not asked again yet", h->url,
					   2 * h->timeout);
			break;
		}
		int i = take(h, err);
		if (i < 0) {
			rc = i;
			break;
		}
		if (server_down(h)) {
			give_back(h, i, 0, 0, -1);
			continue;
		}
		uint64_t before = x.pos;
		x.wait_s = attempt_wait(h, deadline);
		CURLcode cc = perform(h, i, &x, lines);
		if (x.status == 304 && if_none_match && *if_none_match && x.fail == OK &&
		    strcmp(x.etag[0] ? x.etag : if_none_match, if_none_match) == 0) {
			v->known = true;
			rc = TFS_PASSTHROUGH;
			break;
		}
		if (cc == CURLE_OK && x.fail == OK && x.status == 206 && x.pos == x.end)
			break;
		if (cc == CURLE_OK && x.fail == OK && x.got_whole &&
		    (!v->size || x.pos == v->size)) { /* the whole file (the length it said) */
			v->size = x.pos;
			x.end = x.pos;
			break;
		}
		if (x.pos > before)
			tries = 0; /* progress: a dropped connection resumes where it stopped */
		if (x.pos - before >= MIN_PROGRESS)
			deadline = now_ms() + 2000 * h->timeout;
		/* a refused connection is tried 3 times (a server restarting), not 8 */
		int cap = cc == CURLE_COULDNT_CONNECT ? 3 : MAX_ATTEMPTS;
		long pause = backoff_ms(&x, tries + 1);
		bool late = now_ms() + pause >= deadline;
		if (!retryable(cc, &x) || ++tries >= cap || ++total >= MAX_TOTAL_ATTEMPTS || late) {
			rc = give_up(h, &x, cc, total, late && retryable(cc, &x), err);
			break;
		}
		sleep_ms(pause);
	}
	if (got)
		*got = x.pos - off;
	return rc;
}

/* ==== HEAD: whether a file is there ==== */

int tfs_http_head(tfs_http *h, tfs_error *err)
{
	static const char *const none[] = { NULL };
	for (int tries = 1;; tries++) {
		xfer x = { .wait_s = h->timeout, .end = 1 };
		struct curl_slist *hdrs = NULL;
		char range[64];
		int i = take(h, err);
		if (i < 0)
			return i;
		CURLcode cc = headers(h, "HEAD", none, &hdrs);
		if (cc == CURLE_OK) {
			setup(h, h->easy[i], &x, range, sizeof(range), hdrs);
			curl_easy_setopt(h->easy[i], CURLOPT_RANGE, NULL);
			curl_easy_setopt(h->easy[i], CURLOPT_NOBODY, 1L);
			x.last_byte_ms = now_ms();
			cc = curl_easy_perform(h->easy[i]);
			curl_easy_setopt(h->easy[i], CURLOPT_HTTPHEADER, NULL);
		}
		for (struct curl_slist *l = hdrs; l; l = l->next)
			explicit_bzero(l->data, strlen(l->data));
		curl_slist_free_all(hdrs);
		give_back(h, i, 1, 0, -1);
		if (cc == CURLE_OK && x.status >= 200 && x.status < 300)
			return 1;
		if (cc == CURLE_OK && (x.status == 404 || x.status == 410))
			return 0;
		bool again = cc == CURLE_OK ? x.status == 429 || x.status >= 500 : retryable_curl(cc);
		if (again && tries < MAX_ATTEMPTS) {
			sleep_ms(backoff_ms(&x, tries));
			continue;
		}
		if (cc != CURLE_OK)
			return tfs_error_sys(err, EIO, "%s: %s (after %d tries)", h->url,
					     curl_easy_strerror(cc), tries);
		tfs_refusal r = { x.status, "", x.bucket_region, tries };
		return h->t.scheme->refused(&h->t, h->url, &r, err);
	}
}
