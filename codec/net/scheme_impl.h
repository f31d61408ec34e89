/*
 * scheme_impl.h - the remote schemes (codec-private): one row per scheme in scheme.c.
 *
 * A remote source is a string as the user typed it (https://host/x.gguf, hf://ORG/REPO,
 * s3://BUCKET/KEY).  Errors and the block cache name it so; a row resolves it into a
 * target, what a request actually asks: the HTTP(S) URL, and how it is authenticated
 * (a bearer token, or a signature computed for each request: the row's own settings, opaque
 * here, in t->auth).  Credentials live in the target only: never in a message, the cache's
 * file names or anything written.
 *
 * A row is all a scheme is: formats/open.c opens a source of any row the same way, from the
 * row (a file: a sharded set's index or a model file; a directory: listed and its model
 * chosen when the row can list, else its model.safetensors.index.json, else its
 * model.safetensors; a file that is not there, of a row that can list: the prefix of that
 * name), and views/hf.c asks the row whether a directory is a Hugging Face repo by its form
 * and what its name is.  A new scheme (gs://, az://) is a file with its row's functions and a
 * line in scheme.c's table.
 */
#ifndef TFS_SCHEME_IMPL_H
#define TFS_SCHEME_IMPL_H

#include "base.h"
#include "scheme.h"

typedef struct tfs_scheme tfs_scheme;
struct curl_slist;

/* What a request for a remote file asks. */
typedef struct {
	const tfs_scheme *scheme;
	char *url;                /* the HTTP(S) URL (no credential in it) */
	char *host;               /* its Host header when the request is signed, else NULL */
	char *token;              /* a bearer token, or NULL; never logged */
	void *auth;               /* the row's own settings, what its sign uses (s3://: SigV4's
	                           * credentials, region, endpoint), or NULL: freed by free_auth */
	bool follow;              /* redirects are followed (not with a signature: it names the host) */
} tfs_target;

/* An answer that is not the bytes asked for, as a scheme explains it. */
typedef struct {
	long status;              /* HTTP status */
	const char *body;         /* the start of its body (an S3 error document), "" if none */
	const char *region;       /* its x-amz-bucket-region header, "" if none */
	int tries;                /* requests made for it */
} tfs_refusal;

struct tfs_scheme {
	const char *prefix;       /* "s3://": matched without regard to case */
	bool named_by_url;        /* messages name the URL resolved (hf://: the hub's), not
	                           * the source as typed */
	/* The target of source, a file.  0, TFS_E_INVALID (not of the scheme's form, a bad
	 * endpoint, unreadable credentials: a line saying which), TFS_E_NOMEM. */
	int (*resolve)(tfs_target *t, const char *source, const tfs_open_opts *o,
		       tfs_error *err);
	/* The source of the file `name` in the directory of source: a shard beside its index,
	 * a file of a repo (source itself a directory: hf://ORG/REPO, s3://B/PREFIX/).
	 * Allocated; NULL when out of memory. */
	char *(*join)(const char *source, const char *name);
	/* Whether source names a directory (a repo, a prefix) rather than a file. */
	bool (*is_dir)(const char *source);
	/* The names directly under the directory dir, relative to it (a "subdirectory" ending in
	 * '/'): allocated array of allocated strings.  NULL: the row cannot list (hf://: a repo
	 * opens as its model.safetensors.index.json, else its model.safetensors). */
	int (*list)(const char *dir, const tfs_open_opts *o, char ***names, size_t *n,
		    tfs_error *err);
	/* Where the file's name ends in source (hf://: before "@REVISION"; http://: before a
	 * query); NULL: at its end. */
	size_t (*name_len)(const char *source);
	/* The directory's name (a repo's, a prefix's last component) into out. */
	void (*dir_name)(char *out, size_t cap, const char *source);
	/* A directory of the row is a Hugging Face repo by its form (hf://ORG/REPO); else one
	 * when it holds config.json (a HEAD request, as a local directory's stat). */
	bool dir_is_repo;
	/* A format may take a source of the row as its own (formats' open_url: an Ollama
	 * registry's URL), before it is read as a model file. */
	bool formats_by_url;
	/* The message for a refused or missing file (401, 403, 404, a redirect, ...): the
	 * whole line, naming source; TFS_E_NOTFOUND for a missing file, else TFS_E_IO (errno
	 * EACCES for a refusal). */
	int (*refused)(const tfs_target *t, const char *source, const tfs_refusal *r,
		       tfs_error *err);
	/* Appends a request's authentication headers to *hdrs, a signature made now for
	 * method (NULL: the row signs nothing).  0, or -1 when out of memory. */
	int (*sign)(const tfs_target *t, const char *method, struct curl_slist **hdrs);
	/* The -o options the row reads (tfs_open_opt: its own, by name; NULL-ended), or NULL;
	 * and its check of a value of one of them (0, or TFS_E_INVALID, the message
	 * "NAME=VALUE: why"). */
	const char *const *opts;
	int (*check_opt)(const char *name, const char *value, tfs_error *err);
	/* Frees (wiping) what resolve put in t->auth; NULL: nothing to free. */
	void (*free_auth)(tfs_target *t);
};

/* The row for source, or NULL (a local path). */
const tfs_scheme *tfs_scheme_of(const char *source);
/* Resolves source (of some row) into t.  Errors as the row's resolve; TFS_E_INVALID for
 * a source of no scheme. */
int tfs_target_resolve(tfs_target *t, const char *source, const tfs_open_opts *o,
		       tfs_error *err);
/* Frees what t holds, wiping its credentials. */
void tfs_target_free(tfs_target *t);
/* The row's join (see above); NULL for a local path or out of memory. */
char *tfs_remote_join(const char *source, const char *name);
/* Whether source is a remote directory (a repo: hf://ORG/REPO, s3://BUCKET/PREFIX/). */
bool tfs_remote_is_dir(const char *source);
/* Whether the remote file source's name ends in suffix (case-insensitive: ".json"). */
bool tfs_remote_name_ends(const char *source, const char *suffix);
/* The row's list (see above); TFS_E_UNSUPPORTED for a row that cannot list. */
int tfs_remote_list(const char *dir, const tfs_open_opts *o, char ***names, size_t *n,
		    tfs_error *err);
/* Frees what tfs_remote_list gave. */
void tfs_remote_names_free(char **names, size_t n);
/* The last component of source[prefix, n) into out, trailing '/'s dropped: a row's
 * dir_name. */
void tfs_remote_last_name(char *out, size_t cap, const char *source, size_t prefix, size_t n);
/* The default refusal message (http, https): the status, and a token's hint. */
int tfs_refused_http(const tfs_target *t, const char *source, const tfs_refusal *r,
		     tfs_error *err);

/* ==== the rows' own entry points (each scheme's file) ==== */

/* hf://ORG/REPO[/PATH][@REV] (scheme.c): $HF_ENDPOINT (default https://huggingface.co)
 * /ORG/REPO/resolve/REV (default main)/PATH, default_path when there is none.  Allocated;
 * NULL when source is not of that form (or out of memory). */
char *tfs_hf_url(const char *source, const char *default_path);
bool tfs_is_hf(const char *source);
bool tfs_is_url(const char *source);
bool tfs_is_s3(const char *source);

extern const tfs_scheme tfs_scheme_s3;

#endif
