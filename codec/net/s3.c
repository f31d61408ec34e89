/* s3.c - s3://BUCKET/KEY: the AWS settings, SigV4 signatures, ListObjectsV2 (s3.h). */
#include "s3.h"
#include "remote.h"
#include "hex.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define LIST_CAP ((uint64_t)16 << 20)  /* a ListObjectsV2 page (1000 keys) is far smaller */
#define LIST_PAGES 64                  /* 64000 entries under one prefix: enough for a repo */

/* ==== the AWS settings ==== */

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

static void wipe(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void tfs_s3_auth_free(tfs_s3_auth *a)
{
	if (!a)
		return;
	wipe(a->key_id);
	wipe(a->secret);
	wipe(a->session_token);
	free(a->region);
	free(a->endpoint);
	free(a);
}

/* Trims spaces around s[0, n) in place: its start, and the length left in *n. */
static char *trim(char *s, size_t *n)
{
	while (*n && (*s == ' ' || *s == '\t'))
		s++, (*n)--;
	while (*n && (s[*n - 1] == ' ' || s[*n - 1] == '\t' || s[*n - 1] == '\r' ||
		      s[*n - 1] == '\n'))
		(*n)--;
	return s;
}

/* The settings of one section of an AWS file (INI: [section], key = value). */
typedef struct {
	bool found;               /* the section is in the file */
	char *key_id, *secret, *session_token, *region, *endpoint;
} profile;

static void profile_free(profile *p)
{
	wipe(p->key_id);
	wipe(p->secret);
	wipe(p->session_token);
	free(p->region);
	free(p->endpoint);
	memset(p, 0, sizeof(*p));
}

/* Reads section `section` of path into p (what p has already is kept: the first file
 * read wins).  A file that does not exist is no section; -1 when out of memory. */
static int read_section(profile *p, const char *path, const char *section)
{
	FILE *f = path ? fopen(path, "re") : NULL;
	char line[4096];
	bool in = false;
	int rc = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		char *s = trim(line, &n);
		s[n] = '\0';
		if (*s == '[') {
			char *e = strchr(s, ']');
			size_t k = e ? (size_t)(e - s - 1) : 0;
			char *name = trim(s + 1, &k);
			in = e && k == strlen(section) && strncmp(name, section, k) == 0;
			p->found |= in;
			continue;
		}
		char *eq = strchr(s, '=');
		if (!in || !eq || *s == '#' || *s == ';')
			continue;
		size_t kl = (size_t)(eq - s), vl = strlen(eq + 1);
		char *key = trim(s, &kl), *val = trim(eq + 1, &vl);
		key[kl] = '\0';
		val[vl] = '\0';
		char **slot = strcmp(key, "aws_access_key_id") == 0 ? &p->key_id
			    : strcmp(key, "aws_secret_access_key") == 0 ? &p->secret
			    : strcmp(key, "aws_session_token") == 0 ? &p->session_token
			    : strcmp(key, "region") == 0 ? &p->region
			    : strcmp(key, "endpoint_url") == 0 ? &p->endpoint : NULL;
		if (slot && !*slot && *val && !(*slot = strdup(val)))
			rc = -1;
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	return rc;
}

/* An AWS file's path: the variable's value, else ~/.aws/NAME (NULL without a home). */
static char *aws_file(const char *var, const char *name)
{
	const char *v = getenv(var), *home = getenv("HOME");
	char *path = NULL;
	if (v && *v)
		return strdup(v);
	if (home && *home && asprintf(&path, "%s/.aws/%s", home, name) < 0)
		return NULL;
	return path;
}

static bool dns_bucket(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-'))
			return false;
	return true;
}

/* The profile's settings: credentials file first, then the config file. */
static int load_profile(profile *p, const char *name, bool named, char *where, size_t cap,
			tfs_error *err)
{
	char *cred = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	char *conf = aws_file("AWS_CONFIG_FILE", "config");
	char section[300];
	int rc = 0;
	snprintf(section, sizeof(section), "%s%s", strcmp(name, "default") ? "profile " : "",
		 name);
	if (read_section(p, cred, name) || read_section(p, conf, section) ||
	    (!strcmp(name, "default") && read_section(p, conf, "profile default")))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if (!rc && named && !p->found)
		rc = tfs_error_set(err, TFS_E_INVALID, "AWS_PROFILE=%s: no such profile in %s or "
				   "%s", name, cred ? cred : "~/.aws/credentials",
				   conf ? conf : "~/.aws/config");
	if (!rc && (!p->key_id) != (!p->secret))
		rc = tfs_error_set(err, TFS_E_INVALID, "AWS profile %s (%s, %s): has %s but not %s",
				   name, cred ? cred : "~/.aws/credentials",
				   conf ? conf : "~/.aws/config",
				   p->key_id ? "aws_access_key_id" : "aws_secret_access_key",
				   p->key_id ? "aws_secret_access_key" : "aws_access_key_id");
	if (!rc && p->key_id)
		snprintf(where, cap, "AWS profile %s", name);
	free(cred);
	free(conf);
	return rc;
}

/* An endpoint given as from (endpoint=, AWS_ENDPOINT_URL=, ...): its length without
 * trailing '/'s in *n.  0, or TFS_E_INVALID saying why it is none. */
static int check_endpoint(size_t *n, const char *from, const char *ep, tfs_error *err)
{
	*n = strlen(ep);
	while (*n && ep[*n - 1] == '/')
		(*n)--;
	if (strncasecmp(ep, "http://", 7) && strncasecmp(ep, "https://", 8))
		return tfs_error_set(err, TFS_E_INVALID, "%s%s: not an http:// or https:// URL",
				     from, ep);
	if (strpbrk(ep, "?#@") || *n <= (size_t)(strstr(ep, "://") - ep) + 3)
		return tfs_error_set(err, TFS_E_INVALID, "%s%s: an endpoint is a URL with a "
				     "host and no user, query or fragment", from, ep);
	return 0;
}

/* s3_addressing=style into *path_style.  0, or TFS_E_INVALID. */
static int check_addressing(bool *path_style, const char *style, tfs_error *err)
{
	if (strcmp(style, "path") == 0)
		*path_style = true;
	else if (strcmp(style, "virtual") == 0)
		*path_style = false;
	else
		return tfs_error_set(err, TFS_E_INVALID, "s3_addressing=%s: not path or virtual",
				     style);
	return 0;
}

/* The region, endpoint and addressing style into a (environment, o, then profile p). */
static int load_place(tfs_s3_auth *a, const tfs_open_opts *o, const profile *p,
		      tfs_error *err)
{
	int rc = 0;
	const char *region = getenv("AWS_REGION");
	if (!region || !*region)
		region = getenv("AWS_DEFAULT_REGION");
	if (!region || !*region)
		region = p->region ? p->region : "us-east-1";
	const char *given = tfs_open_opt(o, "endpoint");
	const char *ep = given ? given : getenv("AWS_ENDPOINT_URL_S3");
	const char *ep_from = given ? "endpoint=" : "AWS_ENDPOINT_URL_S3=";
	if (!ep || !*ep)
		ep = getenv("AWS_ENDPOINT_URL"), ep_from = "AWS_ENDPOINT_URL=";
	if (!ep || !*ep)
		ep = p->endpoint, ep_from = "endpoint_url = ";
	if (!(a->region = strdup(region)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if (!rc && strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
		rc = tfs_error_set(err, TFS_E_INVALID, "region %s: not a region name", region);
	size_t n;
	if (!rc && ep && *ep && !(rc = check_endpoint(&n, ep_from, ep, err)) &&
	    !(a->endpoint = strndup(ep, n)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	a->path_style = a->endpoint != NULL;
	const char *style = tfs_open_opt(o, "s3_addressing");
	if (!rc && style)
		rc = check_addressing(&a->path_style, style, err);
	return rc;
}

int tfs_s3_auth_load(tfs_s3_auth **out, const tfs_open_opts *o, tfs_error *err)
{
	tfs_s3_auth *a = calloc(1, sizeof(*a));
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
	const char *name = getenv("AWS_PROFILE");
	bool named = name && *name;
	profile p = { .found = false };
	int rc = 0;
	*out = NULL;
	if (!a)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if (!named)
		name = "default";
	bool env_id = id && *id, env_secret = secret && *secret;
	if (env_id != env_secret)
		rc = tfs_error_set(err, TFS_E_INVALID, "%s is set but %s is not",
				   env_id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
				   env_id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
	/* the profile is read for its region and endpoint even with keys in the environment,
	 * as the CLI does; one named but missing is an error only when it is needed */
	if (!rc)
		rc = load_profile(&p, name, named && !env_id, a->creds_from, sizeof(a->creds_from),
				  err);
	if (!rc && env_id) {
		const char *tok = getenv("AWS_SESSION_TOKEN");
		a->key_id = strdup(id);
		a->secret = strdup(secret);
		a->session_token = dup_or_null(tok);
		snprintf(a->creds_from, sizeof(a->creds_from), "AWS_ACCESS_KEY_ID and "
			 "AWS_SECRET_ACCESS_KEY%s", tok && *tok ? " and AWS_SESSION_TOKEN" : "");
		if (!a->key_id || !a->secret || (tok && *tok && !a->session_token))
			rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	} else if (!rc && p.key_id) {
		a->key_id = p.key_id, a->secret = p.secret, a->session_token = p.session_token;
		p.key_id = p.secret = p.session_token = NULL;
	}
	if (!rc)
		rc = load_place(a, o, &p, err);
	if (!a->key_id)
		snprintf(a->creds_from, sizeof(a->creds_from), "none: anonymous requests");
	profile_free(&p);
	if (rc) {
		tfs_s3_auth_free(a);
		return rc;
	}
	*out = a;
	return 0;
}


/* ==== names and URLs ==== */

int tfs_s3_parse(const char *source, char **bucket, char **key, tfs_error *err)
{
	*bucket = *key = NULL;
	/* (the scheme first: source + 5 of a shorter string is past its end) */
	const char *b = strncasecmp(source, "s3://", 5) == 0 ? source + 5 : NULL;
	const char *slash = b ? strchr(b, '/') : NULL;
	size_t bl = !b ? 0 : slash ? (size_t)(slash - b) : strlen(b);
	if (!bl || memchr(b, '?', bl) || memchr(b, '@', bl))
		return tfs_error_set(err, TFS_E_INVALID, "%s: not of the form s3://BUCKET/KEY",
				     source);
	if (!(*bucket = strndup(b, bl)) || !(*key = strdup(slash ? slash + 1 : ""))) {
		free(*bucket);
		*bucket = NULL;
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	return 0;
}

/* Appends s URI-encoded as SigV4 wants (every byte but A-Z a-z 0-9 - . _ ~, and '/'
 * unless slash is false) to b. */
static int uri_encode(tfs_buf *b, const char *s, bool slash)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' ||
			     (slash && c == '/');
		if (plain ? tfs_buf_append(b, s, 1) : tfs_buf_printf(b, "%%%02X", c))
			return -1;
	}
	return 0;
}

int tfs_s3_url(const tfs_s3_auth *a, const char *bucket, const char *key, const char *query,
	       char **url, char **host)
{
	tfs_buf b = { 0 };
	bool path = a->path_style || (!a->endpoint && !dns_bucket(bucket));
	const char *ep = a->endpoint, *auth;
	char aws[128];
	if (!ep) {
		snprintf(aws, sizeof(aws), "https://s3.%s.amazonaws.com", a->region);
		ep = aws;
	}
	auth = strstr(ep, "://") + 3; /* virtual: the bucket before the host (and its path) */
	int rc = path ? tfs_buf_printf(&b, "%s/", ep) || uri_encode(&b, bucket, false) ||
			tfs_buf_append(&b, "/", 1)
		      : tfs_buf_printf(&b, "%.*s%s.%s/", (int)(auth - ep), ep, bucket, auth);
	if (!rc)
		rc = uri_encode(&b, key, true);
	if (!rc && query && *query)
		rc = tfs_buf_printf(&b, "?%s", query);
	if (!rc && !tfs_buf_append(&b, "", 1)) {
		const char *h = strstr((char *)b.data, "://") + 3;
		*host = strndup(h, strcspn(h, "/?"));
		*url = (char *)b.data;
		if (*host)
			return 0;
	}
	tfs_buf_free(&b);
	return -1;
}

/* ==== SigV4 ==== */

static void hmac(unsigned char out[32], const void *key, size_t kl, const char *msg)
{
	unsigned len = 32;
	HMAC(EVP_sha256(), key, (int)kl, (const unsigned char *)msg, strlen(msg), out, &len);
}

int tfs_sigv4(const tfs_s3_auth *a, char *out, size_t cap, const char *service, const char *amz_date,
	      const char *method, const char *uri, const char *query,
	      const char *const *headers, size_t n_headers, const char *payload_sha256)
{
	tfs_buf canon = { 0 }, names = { 0 };
	char date[9], scope[200], creq_hash[65], sts[400];
	unsigned char sig[32], key[32];
	char sig_hex[65];
	int rc = -1;
	snprintf(date, sizeof(date), "%.8s", amz_date);
	if (tfs_buf_printf(&canon, "%s\n%s\n%s\n", method, uri, query ? query : ""))
		goto out;
	for (size_t i = 0; i < n_headers; i++)
		if (tfs_buf_printf(&canon, "%s\n", headers[i]) ||
		    tfs_buf_printf(&names, "%s%.*s", i ? ";" : "",
				   (int)strcspn(headers[i], ":"), headers[i]))
			goto out;
	if (tfs_buf_append(&names, "", 1) ||
	    tfs_buf_printf(&canon, "\n%s\n%s", (char *)names.data, payload_sha256))
		goto out;
	tfs_sha256_hex(creq_hash, canon.data, canon.len);
	snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date, a->region, service);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, creq_hash);
	/* the signing key: derived for each request (four HMACs: microseconds), so that
	 * threads signing at once share nothing that changes */
	size_t sl = strlen(a->secret);
	char *k0 = malloc(sl + 5);
	if (!k0)
		goto out;
	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, a->secret, sl + 1);
	hmac(key, k0, sl + 4, date);
	explicit_bzero(k0, sl + 4);
	free(k0);
	hmac(key, key, 32, a->region);
	hmac(key, key, 32, service);
	hmac(key, key, 32, "aws4_request");
	hmac(sig, key, 32, sts);
	explicit_bzero(key, sizeof(key));
	tfs_hex(sig_hex, sig, 32);
	int n = snprintf(out, cap, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, "
			 "Signature=%s", a->key_id, scope, (char *)names.data, sig_hex);
	rc = n > 0 && (size_t)n < cap ? 0 : -1;
out:
	tfs_buf_free(&canon);
	tfs_buf_free(&names);
	return rc;
}

static int add_header(struct curl_slist **hdrs, const char *fmt, const char *v)
{
	char line[4200];
	snprintf(line, sizeof(line), fmt, v);
	struct curl_slist *l = curl_slist_append(*hdrs, line);
	explicit_bzero(line, sizeof(line));
	if (!l)
		return -1;
	*hdrs = l;
	return 0;
}

int tfs_s3_sign_request(const tfs_s3_auth *a, const char *method, const char *url, const char *host,
			time_t now, struct curl_slist **hdrs)
{
	if (!a->key_id)
		return 0;
	char amz_date[20], h_host[300], h_sha[100], h_date[40], h_tok[4200], auth[1024];
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
	const char *p = strstr(url, "://") + 3;
	p += strcspn(p, "/");
	size_t pl = strcspn(p, "?");
	char *uri = strndup(p, pl);
	if (!uri)
		return -1;
	snprintf(h_host, sizeof(h_host), "host:%s", host);
	snprintf(h_sha, sizeof(h_sha), "x-amz-content-sha256:%s", EMPTY_SHA256);
	snprintf(h_date, sizeof(h_date), "x-amz-date:%s", amz_date);
	const char *lines[4] = { h_host, h_sha, h_date, h_tok };
	size_t n = 3;
	if (a->session_token) {
		snprintf(h_tok, sizeof(h_tok), "x-amz-security-token:%s", a->session_token);
		n = 4;
	}
	int rc = tfs_sigv4(a, auth, sizeof(auth), "s3", amz_date, method, uri,
			   p[pl] == '?' ? p + pl + 1 : "", lines, n, EMPTY_SHA256);
	free(uri);
	explicit_bzero(h_tok, sizeof(h_tok));
	if (!rc)
		rc = add_header(hdrs, "Host: %s", host) ||
		     add_header(hdrs, "x-amz-content-sha256: %s", EMPTY_SHA256) ||
		     add_header(hdrs, "x-amz-date: %s", amz_date) ||
		     (a->session_token &&
		      add_header(hdrs, "x-amz-security-token: %s", a->session_token)) ||
		     add_header(hdrs, "Authorization: %s", auth) ? -1 : 0;
	explicit_bzero(auth, sizeof(auth));
	return rc;
}

/* ==== ListObjectsV2 ==== */

/* The text of the next <tag>...</tag> at or after *p (entities decoded), allocated; *p
 * moves past it.  NULL when there is none (or out of memory: *oom set). */
static char *xml_next(const char **p, const char *tag, const char *end, bool *oom)
{
	char open[64], close[64];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *a = strstr(*p, open);
	if (!a || (end && a > end))
		return NULL;
	a += strlen(open);
	const char *b = strstr(a, close);
	if (!b)
		return NULL;
	*p = b + strlen(close);
	char *s = malloc((size_t)(b - a) + 1), *d = s;
	if (!s) {
		*oom = true;
		return NULL;
	}
	static const struct { const char *e; char c; } ents[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' },
		{ "&apos;", '\'' },
	};
	while (a < b) {
		size_t i = 0;
		if (*a == '&')
			for (; i < sizeof(ents) / sizeof(ents[0]); i++)
				if (strncmp(a, ents[i].e, strlen(ents[i].e)) == 0)
					break;
		if (*a == '&' && i < sizeof(ents) / sizeof(ents[0])) {
			*d++ = ents[i].c;
			a += strlen(ents[i].e);
		} else {
			*d++ = *a++;
		}
	}
	*d = '\0';
	return s;
}

static int push_name(char ***names, size_t *n, char *s)
{
	char **v = realloc(*names, (*n + 1) * sizeof(*v));
	if (!v) {
		free(s);
		return -1;
	}
	*names = v;
	v[(*n)++] = s;
	return 0;
}

int tfs_s3_parse_list(const char *xml, char ***names, size_t *n, char **next, tfs_error *err)
{
	const char *p = xml;
	bool oom = false;
	char *s;
	*next = NULL;
	if (!strstr(xml, "<ListBucketResult"))
		return tfs_error_set(err, TFS_E_FORMAT, "not a ListObjectsV2 answer");
	/* <Contents><Key>..</Key>...</Contents>, then <CommonPrefixes><Prefix>..</Prefix> */
	while ((s = xml_next(&p, "Key", NULL, &oom)))
		if (push_name(names, n, s))
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	p = xml;
	const char *cp;
	while (!oom && (cp = strstr(p, "<CommonPrefixes>"))) {
		p = cp;
		if (!(s = xml_next(&p, "Prefix", NULL, &oom)))
			break;
		if (push_name(names, n, s))
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	p = xml;
	char *trunc = xml_next(&p, "IsTruncated", NULL, &oom);
	if (trunc && strcmp(trunc, "true") == 0) {
		p = xml;
		*next = xml_next(&p, "NextContinuationToken", NULL, &oom);
		if (!*next && !oom) {
			free(trunc);
			return tfs_error_set(err, TFS_E_FORMAT, "a truncated listing without "
					     "NextContinuationToken");
		}
	}
	free(trunc);
	return oom ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* Appends name=value (value URI-encoded, '/' too) to a query. */
static int query_add(tfs_buf *q, const char *name, const char *value)
{
	return tfs_buf_printf(q, "%s%s=", q->len ? "&" : "", name) || uri_encode(q, value, false);
}

int tfs_s3_list(const char *source, const tfs_open_opts *o, char ***names, size_t *n,
		tfs_error *err)
{
	char *bucket = NULL, *prefix = NULL, *token = NULL;
	int rc = tfs_s3_parse(source, &bucket, &prefix, err);
	*names = NULL;
	*n = 0;
	for (int page = 0; !rc && page < LIST_PAGES; page++) {
		tfs_buf q = { 0 };
		tfs_target t = { .scheme = &tfs_scheme_s3 };
		tfs_s3_auth *a = NULL;
		uint8_t *xml = NULL;
		uint64_t len = 0;
		if ((rc = tfs_s3_auth_load(&a, o, err)))
			break;
		t.auth = a;
		/* the query canonical: its names sorted */
		if ((token && query_add(&q, "continuation-token", token)) ||
		    query_add(&q, "delimiter", "/") || query_add(&q, "list-type", "2") ||
		    query_add(&q, "prefix", prefix) || tfs_buf_append(&q, "", 1) ||
		    tfs_s3_url(a, bucket, "", (char *)q.data, &t.url, &t.host)) {
			tfs_buf_free(&q);
			tfs_target_free(&t);
			rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
			break;
		}
		tfs_buf_free(&q);
		rc = tfs_remote_fetch_target(&t, source, o, LIST_CAP, &xml, &len, err);
		free(token);
		token = NULL;
		size_t before = *n;
		if (!rc && (rc = tfs_s3_parse_list((char *)xml, names, n, &token, err)) &&
		    rc != TFS_E_NOMEM) {
			char why[TFS_ERRMSG_MAX];
			snprintf(why, sizeof(why), "%s", err->msg);
			tfs_error_set(err, rc, "%s: listing the prefix: %s", source, why);
		}
		free(xml);
		size_t pl = strlen(prefix);
		for (size_t i = before; !rc && i < *n; i++) { /* relative to the prefix */
			char *s = (*names)[i];
			if (strncmp(s, prefix, pl) == 0)
				memmove(s, s + pl, strlen(s + pl) + 1);
		}
		if (!rc && !token)
			break;
	}
	if (!rc && token)
		rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: more than %d pages of keys under "
				   "the prefix", source, LIST_PAGES);
	free(token);
	free(bucket);
	free(prefix);
	if (rc) {
		for (size_t i = 0; i < *n; i++)
			free((*names)[i]);
		free(*names);
		*names = NULL;
		*n = 0;
	}
	return rc;
}

/* ==== the row ==== */

bool tfs_is_s3(const char *source) { return strncasecmp(source, "s3://", 5) == 0; }

static int s3_resolve(tfs_target *t, const char *source, const tfs_open_opts *o,
		      tfs_error *err)
{
	char *bucket = NULL, *key = NULL;
	tfs_s3_auth *a = NULL;
	int rc = tfs_s3_parse(source, &bucket, &key, err);
	if (!rc && (!*key || key[strlen(key) - 1] == '/'))
		rc = tfs_error_set(err, TFS_E_INVALID, "%s: names a prefix, not an object", source);
	if (!rc && !(rc = tfs_s3_auth_load(&a, o, err)))
		t->auth = a;
	if (!rc && tfs_s3_url(a, bucket, key, NULL, &t->url, &t->host))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	free(bucket);
	free(key);
	return rc;
}

/* s3://B/P/index.json + name: s3://B/P/name; s3://B/P/ + name: s3://B/P/name (literal:
 * an S3 key is not percent-encoded in an s3:// name). */
static char *s3_join(const char *source, const char *name)
{
	const char *slash = strrchr(source + 5, '/');
	size_t base = slash ? (size_t)(slash + 1 - source) : strlen(source);
	char *s = NULL;
	if (asprintf(&s, "%.*s%s%s", (int)base, source, slash ? "" : "/", name) < 0)
		return NULL;
	return s;
}

static bool s3_is_dir(const char *source)
{
	const char *slash = strchr(source + 5, '/');
	return !slash || !slash[1] || source[strlen(source) - 1] == '/';
}

/* The value of <tag> in an S3 error document, into out ("" when absent). */
static void xml_value(char *out, size_t cap, const char *body, const char *tag)
{
	const char *p = body;
	bool oom = false;
	char *s = xml_next(&p, tag, NULL, &oom);
	snprintf(out, cap, "%s", s ? s : "");
	free(s);
}

static int s3_refused(const tfs_target *t, const char *source, const tfs_refusal *r,
		      tfs_error *err)
{
	char code[64], region[64], bucket[256], msg[256];
	const tfs_s3_auth *a = t->auth;
	xml_value(code, sizeof(code), r->body, "Code");
	xml_value(region, sizeof(region), r->body, "Region");
	xml_value(msg, sizeof(msg), r->body, "Message");
	if (r->region[0])
		snprintf(region, sizeof(region), "%s", r->region);
	const char *b = source + 5;
	snprintf(bucket, sizeof(bucket), "%.*s", (int)strcspn(b, "/"), b);
	const char *where = a->endpoint ? a->endpoint : "AWS";
	if (region[0] && strcmp(region, a->region) != 0 &&
	    (r->status == 301 || r->status == 400 || r->status == 403))
		return tfs_error_sys(err, EIO, "%s: bucket %s is in region %s, not %s (HTTP %ld%s%s): "
				     "set AWS_REGION=%s", source, bucket, region, a->region,
				     r->status, code[0] ? " " : "", code, region);
	if (r->status == 301 || r->status == 307)
		return tfs_error_sys(err, EIO, "%s: the store redirects bucket %s elsewhere (HTTP "
				     "%ld%s%s): another region or endpoint", source, bucket,
				     r->status, code[0] ? " " : "", code);
	if (r->status == 404 && strcmp(code, "NoSuchBucket") == 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no bucket %s at %s (HTTP 404 "
				     "NoSuchBucket)", source, bucket, where);
	if (r->status == 404) /* (a prefix typed without its '/': formats/open.c lists it) */
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no such key in bucket %s (HTTP 404%s%s)",
				     source, bucket, code[0] ? " " : "", code);
	if (r->status == 403 && (strcmp(code, "SignatureDoesNotMatch") == 0 ||
				 strcmp(code, "InvalidAccessKeyId") == 0))
		return tfs_error_sys(err, EACCES, "%s: the store refused %s (HTTP 403 %s): %s "
				     "(credentials from %s)", source,
				     code[2] == 'g' ? "the request's signature" : "the access key ID",
				     code, code[2] == 'g' ? "is the secret key right?"
							  : "is it a key of this store?",
				     a->creds_from);
	if ((r->status == 403 || r->status == 400) && strcmp(code, "RequestTimeTooSkewed") == 0)
		return tfs_error_sys(err, EACCES, "%s: the store refused the request's time (HTTP "
				     "%ld RequestTimeTooSkewed): is this machine's clock right?",
				     source, r->status);
	if (r->status == 403 || r->status == 401)
		return tfs_error_sys(err, EACCES, "%s: access denied (HTTP %ld%s%s)%s", source,
				     r->status, code[0] ? " " : "", code,
				     a->key_id ? ": the key has no read access to it"
					       : ": no credentials were found (requests are anonymous): "
						 "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
						 "AWS_PROFILE");
	return tfs_error_sys(err, EIO, "%s: HTTP %ld%s%s%s%s (after %d tries)", source, r->status,
			     code[0] ? " " : "", code, msg[0] ? ": " : "", msg, r->tries);
}

static int s3_sign(const tfs_target *t, const char *method, struct curl_slist **hdrs)
{
	return t->auth ? tfs_s3_sign_request(t->auth, method, t->url, t->host, time(NULL), hdrs)
		       : 0;
}

static void s3_free_auth(tfs_target *t)
{
	tfs_s3_auth_free(t->auth);
	t->auth = NULL;
}

/* s3://BUCKET/DIR/NAME/: NAME (the bucket's when there is none). */
static void s3_dir_name(char *out, size_t cap, const char *source)
{
	tfs_remote_last_name(out, cap, source, 5, strlen(source));
}

/* -o endpoint=URL, s3_addressing=path|virtual: the row's options (scheme_impl.h). */
static const char *const s3_opts[] = { "endpoint", "s3_addressing", NULL };

static int s3_check_opt(const char *name, const char *value, tfs_error *err)
{
	size_t n;
	bool path;
	return !strcmp(name, "endpoint") ? check_endpoint(&n, "endpoint=", value, err)
					 : check_addressing(&path, value, err);
}

const tfs_scheme tfs_scheme_s3 = {
	.prefix = "s3://", .resolve = s3_resolve, .join = s3_join, .is_dir = s3_is_dir,
	.list = tfs_s3_list, .dir_name = s3_dir_name, .refused = s3_refused, .sign = s3_sign,
	.free_auth = s3_free_auth, .opts = s3_opts, .check_opt = s3_check_opt,
};
