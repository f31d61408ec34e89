/*
 * scheme.c - the remote schemes, one row each (scheme_impl.h): http:// and https:// (a URL
 * as it is, an optional bearer token), hf:// (a Hugging Face hub's resolve URL, $HF_TOKEN),
 * s3:// (s3.c: SigV4).  A new scheme is a file with its row's functions and a line here.
 */
#include "scheme_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ==== http://, https:// ==== */

bool tfs_is_url(const char *source)
{
	return strncasecmp(source, "http://", 7) == 0 || strncasecmp(source, "https://", 8) == 0;
}

static int http_resolve(tfs_target *t, const char *source, const tfs_open_opts *o,
			tfs_error *err)
{
	t->follow = true;
	if (!(t->url = strdup(source)) || (o && o->token && !(t->token = strdup(o->token))))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	return 0;
}

/* name (percent-encoded) resolved against the URL's directory (before any query). */
static char *http_join(const char *source, const char *name)
{
	size_t base = strcspn(source, "?#"), n = strlen(name);
	while (base && source[base - 1] != '/')
		base--;
	char *url = malloc(base + 3 * n + 1), *p;
	if (!url)
		return NULL;
	memcpy(url, source, base);
	p = url + base;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-._~", c))
			*p++ = (char)c;
		else
			p += sprintf(p, "%%%02X", c);
	}
	*p = '\0';
	return url;
}

static bool never_dir(const char *source)
{
	(void)source;
	return false;
}

static size_t http_name_len(const char *source) { return strcspn(source, "?#"); }

void tfs_remote_last_name(char *out, size_t cap, const char *source, size_t prefix, size_t n)
{
	while (n > prefix && source[n - 1] == '/')
		n--;
	size_t b = n;
	while (b > prefix && source[b - 1] != '/')
		b--;
	snprintf(out, cap, "%.*s", (int)(n - b), source + b);
}

static void http_dir_name(char *out, size_t cap, const char *source)
{
	tfs_remote_last_name(out, cap, source, strcspn(source, ":") + 3, http_name_len(source));
}

int tfs_refused_http(const tfs_target *t, const char *source, const tfs_refusal *r,
		     tfs_error *err)
{
	if (r->status == 404 || r->status == 410)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: not found (HTTP %ld)", source,
				     r->status);
	if (r->status == 401 || r->status == 403)
		return tfs_error_sys(err, EACCES, "%s: access denied (HTTP %ld)%s", source, r->status,
				     t->token ? ": is the token right, and granted access to this "
						"model?"
					      : ": if the server wants a bearer token, give it with "
						"-o token_file=FILE");
	return tfs_error_sys(err, EIO, "%s: HTTP %ld", source, r->status);
}

/* ==== hf:// ==== */

bool tfs_is_hf(const char *source) { return strncmp(source, "hf://", 5) == 0; }

char *tfs_hf_url(const char *source, const char *default_path)
{
	const char *endpoint = getenv("HF_ENDPOINT"), *spec = source + 5;
	const char *at = strrchr(spec, '@'), *rev = at ? at + 1 : "main";
	size_t n = at ? (size_t)(at - spec) : strlen(spec);
	const char *s1 = memchr(spec, '/', n);
	const char *s2 = s1 ? memchr(s1 + 1, '/', n - (size_t)(s1 + 1 - spec)) : NULL;
	size_t repo = s2 ? (size_t)(s2 - spec) : n;
	const char *path = s2 ? s2 + 1 : default_path;
	int path_len = s2 ? (int)(n - repo - 1) : (int)strlen(default_path);
	char *url;
	if (!endpoint || !*endpoint)
		endpoint = "https://huggingface.co";
	if (!s1 || s1 == spec || repo == (size_t)(s1 - spec) + 1 || path_len <= 0 || !*rev ||
	    strchr(rev, '/'))
		return NULL;
	size_t el = strlen(endpoint);
	while (el && endpoint[el - 1] == '/')
		el--;
	if (asprintf(&url, "%.*s/%.*s/resolve/%s/%.*s", (int)el, endpoint, (int)repo, spec, rev,
		     path_len, path) < 0)
		return NULL;
	return url;
}

static int hf_resolve(tfs_target *t, const char *source, const tfs_open_opts *o,
		      tfs_error *err)
{
	const char *tok = o && o->token ? o->token : getenv("HF_TOKEN");
	t->follow = true;
	if (!(t->url = tfs_hf_url(source, "")))
		return tfs_error_set(err, TFS_E_INVALID, "%s: not of the form hf://ORG/REPO/PATH"
				     "[@REVISION]", source);
	if (tok && *tok && !(t->token = strdup(tok)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	return 0;
}

/* hf://ORG/REPO[/DIR/FILE][@REV] + name: hf://ORG/REPO[/DIR]/name[@REV]. */
static char *hf_join(const char *source, const char *name)
{
	const char *spec = source + 5, *at = strrchr(spec, '@');
	size_t n = at ? (size_t)(at - spec) : strlen(spec);
	const char *s1 = memchr(spec, '/', n);
	const char *s2 = s1 ? memchr(s1 + 1, '/', n - (size_t)(s1 + 1 - spec)) : NULL;
	size_t dir = n;                          /* a repo: its root */
	if (s2) {
		dir = n;
		while (dir > (size_t)(s2 - spec) && spec[dir - 1] != '/')
			dir--;
		dir--;                           /* without the '/' */
	}
	char *s = NULL;
	if (asprintf(&s, "hf://%.*s/%s%s", (int)dir, spec, name, at ? at : "") < 0)
		return NULL;
	return s;
}

static size_t hf_name_len(const char *source)
{
	const char *at = strrchr(source + 5, '@');
	return at ? (size_t)(at - source) : strlen(source);
}

/* hf://ORG/REPO[@REV]: REPO. */
static void hf_dir_name(char *out, size_t cap, const char *source)
{
	const char *r = strchr(source + 5, '/');
	r = r ? r + 1 : source + 5;
	snprintf(out, cap, "%.*s", (int)strcspn(r, "@/"), r);
}

static bool hf_is_dir(const char *source)
{
	const char *org = source + 5, *repo = strchr(org, '/');
	return repo && !strchr(repo + 1, '/');
}

static int hf_refused(const tfs_target *t, const char *source, const tfs_refusal *r,
		      tfs_error *err)
{
	if ((r->status == 401 || r->status == 403) && !t->token)
		return tfs_error_sys(err, EACCES, "%s: access denied (HTTP %ld): a private or gated "
				     "model needs a token: set HF_TOKEN or -o token_file=FILE",
				     source, r->status);
	return tfs_refused_http(t, source, r, err);
}

/* ==== the table ==== */

static const tfs_scheme scheme_http = {
	.prefix = "http://", .resolve = http_resolve, .join = http_join, .is_dir = never_dir,
	.name_len = http_name_len, .dir_name = http_dir_name, .formats_by_url = true,
	.refused = tfs_refused_http,
};
static const tfs_scheme scheme_https = {
	.prefix = "https://", .resolve = http_resolve, .join = http_join, .is_dir = never_dir,
	.name_len = http_name_len, .dir_name = http_dir_name, .formats_by_url = true,
	.refused = tfs_refused_http,
};
static const tfs_scheme scheme_hf = {
	.prefix = "hf://", .named_by_url = true, .resolve = hf_resolve, .join = hf_join,
	.is_dir = hf_is_dir, .name_len = hf_name_len, .dir_name = hf_dir_name,
	.dir_is_repo = true, .refused = hf_refused,
};

static const tfs_scheme *const schemes[] = { &scheme_http, &scheme_https, &scheme_hf,
					     &tfs_scheme_s3 };

const tfs_scheme *tfs_scheme_of(const char *source)
{
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strncasecmp(source, schemes[i]->prefix, strlen(schemes[i]->prefix)) == 0)
			return schemes[i];
	return NULL;
}

bool tfs_is_remote(const char *source) { return source && tfs_scheme_of(source) != NULL; }

int tfs_remote_option_check(const char *name, const char *value, tfs_error *err)
{
	for (size_t i = 0; name && i < sizeof(schemes) / sizeof(schemes[0]); i++)
		for (const char *const *n = schemes[i]->opts; n && *n; n++)
			if (!strcmp(*n, name))
				return schemes[i]->check_opt ? schemes[i]->check_opt(name, value, err)
							     : 0;
	return tfs_error_set(err, TFS_E_NOTFOUND, "-o %s: no remote scheme takes it",
			     name ? name : "(null)");
}

int tfs_target_resolve(tfs_target *t, const char *source, const tfs_open_opts *o,
		       tfs_error *err)
{
	memset(t, 0, sizeof(*t));
	if (!(t->scheme = tfs_scheme_of(source)))
		return tfs_error_set(err, TFS_E_INVALID, "%s: not a remote source", source);
	int rc = t->scheme->resolve(t, source, o, err);
	if (rc)
		tfs_target_free(t);
	return rc;
}

void tfs_target_free(tfs_target *t)
{
	if (t->token) {
		explicit_bzero(t->token, strlen(t->token));
		free(t->token);
	}
	if (t->scheme && t->scheme->free_auth)
		t->scheme->free_auth(t);
	free(t->url);
	free(t->host);
	memset(t, 0, sizeof(*t));
}

char *tfs_remote_join(const char *source, const char *name)
{
	const tfs_scheme *s = tfs_scheme_of(source);
	return s ? s->join(source, name) : NULL;
}

bool tfs_remote_is_dir(const char *source)
{
	const tfs_scheme *s = tfs_scheme_of(source);
	return s && s->is_dir(source);
}

bool tfs_remote_name_ends(const char *source, const char *suffix)
{
	const tfs_scheme *s = tfs_scheme_of(source);
	size_t n = s && s->name_len ? s->name_len(source) : strlen(source), t = strlen(suffix);
	return n >= t && strncasecmp(source + n - t, suffix, t) == 0;
}

int tfs_remote_list(const char *dir, const tfs_open_opts *o, char ***names, size_t *n,
		    tfs_error *err)
{
	const tfs_scheme *s = tfs_scheme_of(dir);
	*names = NULL;
	*n = 0;
	if (!s || !s->list)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: cannot be listed", dir);
	return s->list(dir, o, names, n, err);
}

void tfs_remote_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}
