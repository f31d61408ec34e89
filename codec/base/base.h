/*
 * base.h - the base of the format library: errors (tfs_code, tfs_error), the growable byte
 * buffer, the progress callback, the options of opening and of writing a model (public).
 *
 * Conventions (libgit2 style): functions return 0 / a negative tfs_code (TFS_PASSTHROUGH,
 * positive, is not an error), out-params come first, and fill a caller-provided tfs_error
 * with a message naming the file and the problem.
 */
#ifndef TFS_BASE_H
#define TFS_BASE_H

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
	/* Not an error: "not mine, use the fallback" (the function does not handle this input
	 * and the caller should go its other way).  Positive, so `< 0` still means failure. */
	TFS_PASSTHROUGH = 1,
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

/* ==== progress, open and write options ==== */

typedef void (*tfs_progress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total);

/* An option by name (-o NAME=VALUE) that its owner above base reads itself: a computed
 * view's (its row of codec/views/registry.c) or a remote scheme's (its row of
 * codec/net/scheme.c).  base knows no name: a new view or scheme adds none here. */
typedef struct {
	const char *name;
	const char *value;
} tfs_named_opt;

#define TFS_NAMED_OPTS_MAX 32

typedef struct {
	bool verify;              /* check the sha256 of every Ollama blob, not only small ones */
	tfs_progress_fn progress; /* optional: long operations report here */
	void *progress_ctx;
	const char *ollama_models;/* store root for model references; NULL: $OLLAMA_MODELS or ~/.ollama/models */
	/* remote sources (http://, https://, hf://, s3://) */
	int connections;          /* connections per file (0: 4) */
	const char *cache_dir;    /* block cache; NULL: $XDG_CACHE_HOME/tensorfs or ~/.cache/tensorfs */
	uint64_t cache_size;      /* the cache's limit in bytes (0: none): the remote blocks', and
	                           * the same figure for quantize='s tensors (quantized/) */
	const char *token;        /* bearer token (NULL: $HF_TOKEN for hf:// sources) */
	const char *cafile;       /* CA bundle (NULL: $CURL_CA_BUNDLE, else the system's) */
	long timeout;             /* seconds to connect, or of a stalled transfer (0: 30) */
	/* options by name, each read by what owns it (tfs_open_opt): the views' (set with
	 * tfs_open_opts_set_view, views/view.h, which checks them) and the remote schemes' */
	tfs_named_opt named[TFS_NAMED_OPTS_MAX];
	size_t n_named;
} tfs_open_opts;

/* The value of the option name in o (the pointer given), or NULL when o or it is none. */
const char *tfs_open_opt(const tfs_open_opts *o, const char *name);
/* Sets the option name to value (borrowed: it must live as long as o), replacing its
 * value; NULL removes it.  0, or TFS_E_INVALID when o holds TFS_NAMED_OPTS_MAX names. */
int tfs_open_opt_set(tfs_open_opts *o, const char *name, const char *value);

typedef struct {
	tfs_progress_fn progress;
	void *progress_ctx;
	const char *output;      /* NULL: replace the source; a path; for Ollama "model:tag" too */
	bool unchanged_too;      /* written even when nothing changed (tensorfs convert) */
} tfs_write_opts;

/* ==== test hooks ==== */

/* TFS_TEST_CRASH_AT=<where> makes the process die there, as a kill -9 would (commit.c:
 * "before_rename", "mid_rename"; the recovery's "after_rename"; the daemon's
 * "before_repack", after its FUSE unmount). */
void tfs_test_crash_point(const char *where);

/* ==== paths ==== */

/* The basename of path (no allocation). */
const char *tfs_basename(const char *path);

#endif
