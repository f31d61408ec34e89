/* open.c - tfs_model_open: recognize a source and hand it to its reader. */
#include "layout.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The first bytes of a file (up to cap), for sniffing. */
static ssize_t peek(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = pread(fd, buf, cap, 0);
	int e = errno;
	close(fd);
	errno = e;
	return n;
}

static const char lfs_magic[] = "version https://git-lfs.github.com/spec/v1";

typedef struct {
	tfs_format fmt;
	bool guessed;    /* no magic, no telling name: tried as safetensors */
	bool maybe_file; /* a missing dir/file tried as an Ollama name */
} source_kind;

/* Which reader a source needs: a path's magic bytes or name, a directory (a sharded set),
 * or an Ollama model name.  Fails for a missing file, an LFS pointer, a big-endian GGUF. */
static int classify(const char *source, source_kind *k, tfs_error *err)
{
	struct stat st;
	memset(k, 0, sizeof(*k));
	if (stat(source, &st) < 0) {
		/* not a path: maybe an Ollama model reference ("llama3:8b"); one that looks like
		 * a file name (a known extension, or starting with / . ~) never is one */
		if (errno == ENOENT && source[0] != '/' && source[0] != '.' && source[0] != '~' &&
		    !ends_with(source, ".gguf") && !ends_with(source, ".safetensors") &&
		    !ends_with(source, ".json")) {
			/* dir/file may be a missing file too: then it is called one, unless it
			 * names a tag (host/ns/model:tag) */
			const char *slash = strrchr(source, '/');
			k->fmt = TFS_FMT_OLLAMA;
			k->maybe_file = slash && !strchr(slash, ':');
			return 0;
		}
		return tfs_error_sys(err, errno, "%s", source);
	}
	if (S_ISDIR(st.st_mode)) {
		k->fmt = TFS_FMT_SAFETENSORS; /* a directory holding model.safetensors.index.json */
		return 0;
	}
	char head[64] = { 0 };
	ssize_t n = peek(source, head, sizeof(head) - 1);
	if (n < 0)
		return tfs_error_sys(err, errno, "%s", source);
	/* an LFS pointer first: a repository cloned without git-lfs has them under the
	 * models' own names (model.gguf) */
	if ((size_t)n >= sizeof(lfs_magic) - 1 &&
	    memcmp(head, lfs_magic, sizeof(lfs_magic) - 1) == 0) {
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: is a Git LFS pointer file, not the model itself "
				     "(run 'git lfs pull' to fetch it)", source);
	} else if ((n >= 4 && strncasecmp(head, "GGUF", 4) == 0) || ends_with(source, ".gguf")) {
		k->fmt = TFS_FMT_GGUF; /* its reader names a bad magic */
	} else if (ends_with(source, ".json") || head[0] == '{') {
		/* an index.json of a sharded set, or an Ollama manifest */
		char big[4096] = { 0 };
		ssize_t got = peek(source, big, sizeof(big) - 1);
		k->fmt = (got > 0 && strstr(big, "\"schemaVersion\"")) ? TFS_FMT_OLLAMA
								    : TFS_FMT_SAFETENSORS;
	} else if (n >= 4 && memcmp(head, "FUGG", 4) == 0) {
		return tfs_error_set(err, TFS_E_FORMAT, "%s: big-endian GGUF is not supported", source);
	} else {
		k->fmt = TFS_FMT_SAFETENSORS;
		k->guessed = !ends_with(source, ".safetensors");
	}
	return 0;
}

/* The reader's error, said in the user's terms where the source was a guess. */
static int open_failed(const char *source, const source_kind *k, int rc, tfs_error *err)
{
	/* (a model that exists, with another tag, keeps the error listing its tags) */
	if (k->maybe_file && (rc == TFS_E_NOTFOUND || rc == TFS_E_INVALID) &&
	    !(err && strstr(err->msg, "; its tags are: ")))
		return tfs_error_set(err, rc, "%s: no such file (nor %s)", source,
				     rc == TFS_E_NOTFOUND ? "an Ollama model of that name"
							  : "a valid Ollama model name");
	if (k->guessed && rc == TFS_E_FORMAT && err) {
		char why[TFS_ERRMSG_MAX];
		snprintf(why, sizeof(why), "%s", err->msg);
		tfs_error_set(err, rc, "%s: not a GGUF, safetensors or Ollama manifest file "
			      "(as safetensors: %s)", source, why);
	}
	return rc;
}

/* Opens url as a source: its header fetched on demand (tfs_source_head), its data read
 * through the block cache (tfs_source_pread). */
int tfs_model_add_remote_source(tfs_model *m, const char *url, const tfs_open_opts *o,
				int32_t *idx, tfs_error *err)
{
	tfs_remote *r = NULL;
	int32_t i;
	int rc = tfs_remote_open(&r, url, o, err);
	if (rc)
		return rc;
	/* a source in memory first (its bytes: the header, as fetched), then made remote */
	if ((rc = tfs_model_add_mem_source(m, url, tfs_remote_map(r), tfs_remote_size(r), &i,
					   err))) {
		tfs_remote_free(r);
		return rc;
	}
	m->src[i].remote = r;
	m->src[i].mtime_sec = tfs_remote_mtime(r);
	*idx = i;
	return 0;
}

/* A GGUF or single safetensors file over HTTP(S), told by its first bytes. */
static int open_remote(tfs_model **out, const char *url, const tfs_open_opts *o,
		       tfs_error *err)
{
	tfs_model *m = NULL;
	int32_t src;
	int rc = tfs_model_new(&m, TFS_FMT_SAFETENSORS, url, err);
	if (!rc)
		rc = tfs_model_add_remote_source(m, url, o, &src, err);
	if (!rc) {
		const tfs_source *s = &m->src[src];
		const char *p = (const char *)s->map;
		if (s->size >= sizeof(lfs_magic) - 1 && memcmp(p, lfs_magic, sizeof(lfs_magic) - 1) == 0)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: is a Git LFS pointer file, not the "
					   "model itself", url);
		else if (s->size >= 4 && memcmp(p, "FUGG", 4) == 0)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: big-endian GGUF is not supported", url);
		else if (s->size >= 4 && memcmp(p, "GGUF", 4) == 0)
			rc = (m->format = TFS_FMT_GGUF, tfs_gguf_read(m, src, err));
		else if ((rc = tfs_safetensors_open_src(m, src, err)) == TFS_E_FORMAT && err) {
			char why[TFS_ERRMSG_MAX];
			snprintf(why, sizeof(why), "%s", err->msg);
			tfs_error_set(err, rc, "%s: not a GGUF or safetensors file (as safetensors: %s)",
				      url, why);
		}
	}
	if (rc) {
		tfs_model_free(m);
		return rc;
	}
	m->changed = false;
	*out = m;
	return 0;
}

/* ==== a sharded safetensors set over HTTP(S) ==== */

typedef struct {
	const char *index_url;
	size_t base_len;          /* the index URL up to its last '/' (before any query) */
	const tfs_open_opts *o;
} remote_shards;

/* A shard: its name (percent-encoded) resolved against the index's URL, a remote source. */
static int open_remote_shard(void *ctx, tfs_model *m, const char *name, int32_t *src,
			     tfs_error *err)
{
	const remote_shards *rs = ctx;
	size_t n = strlen(name);
	char *url = malloc(rs->base_len + 3 * n + 1), *label = strdup(name);
	int rc = 0;
	if (!url || !label) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", rs->index_url);
		goto out;
	}
	memcpy(url, rs->index_url, rs->base_len);
	char *p = url + rs->base_len;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-._~", c))
			*p++ = (char)c;
		else
			p += sprintf(p, "%%%02X", c);
	}
	*p = '\0';
	if ((rc = tfs_model_add_remote_source(m, url, rs->o, src, err)))
		goto out;
	free(m->src[*src].label); /* the weight_map's name, not the encoded one */
	m->src[*src].label = label;
	label = NULL;
out:
	free(label);
	free(url);
	return rc;
}

/* The index of a sharded set at url: fetched whole, each shard a remote source. */
static int open_remote_index(tfs_model **out, const char *url, const tfs_open_opts *o,
			     tfs_error *err)
{
	tfs_model *m = NULL;
	uint8_t *text = NULL;
	uint64_t len = 0;
	size_t q = strcspn(url, "?#"), base = q;
	while (base && url[base - 1] != '/')
		base--;
	remote_shards rs = { url, base, o };
	int rc = tfs_remote_fetch_small(url, o, TFS_MAX_ST_HEADER, NULL, &text, &len, NULL, err);
	if (!rc)
		rc = tfs_model_new(&m, TFS_FMT_SAFETENSORS, url, err);
	if (!rc)
		rc = tfs_safetensors_open_index(m, url, text, len, open_remote_shard, &rs, err);
	free(text);
	if (rc) {
		tfs_model_free(m);
		return rc;
	}
	m->changed = false;
	*out = m;
	return 0;
}

/* Whether url's path names a JSON file (a sharded set's index). */
static bool url_is_json(const char *url)
{
	size_t n = strcspn(url, "?#");
	return n >= 5 && strncasecmp(url + n - 5, ".json", 5) == 0;
}

/* hf://ORG/REPO[/PATH][@REV]: the hub's resolve URL, with $HF_TOKEN unless a token was
 * given; a repo alone is its model.safetensors.index.json if it has one, else its
 * model.safetensors. */
static int open_hf(tfs_model **out, const char *source, const tfs_open_opts *opts,
		   tfs_error *err)
{
	tfs_open_opts o = *opts;
	const char *tok = getenv("HF_TOKEN");
	if (!o.token && tok && *tok)
		o.token = tok;
	char *url = tfs_hf_url(source, "model.safetensors.index.json");
	if (!url)
		return tfs_error_set(err, TFS_E_INVALID, "%s: not of the form hf://ORG/REPO[/PATH]"
				     "[@REVISION]", source);
	bool repo_only = strchr(strchr(source + 5, '/') + 1, '/') == NULL;
	int rc = url_is_json(url) ? open_remote_index(out, url, &o, err)
				  : open_remote(out, url, &o, err);
	/* no index: the single file; but a shard the index names that is missing is that */
	bool no_index = rc == TFS_E_NOTFOUND && strstr(err->msg, url);
	free(url);
	if (no_index && repo_only) {
		if (!(url = tfs_hf_url(source, "model.safetensors")))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
		tfs_error_clear(err);
		rc = open_remote(out, url, &o, err);
		free(url);
	}
	return rc;
}

int tfs_model_open(tfs_model **out, const char *source, const tfs_open_opts *opts,
		   tfs_error *err)
{
	static const tfs_open_opts none;
	tfs_model *m = NULL;
	source_kind k;
	int rc;

	*out = NULL;
	if (!opts)
		opts = &none;
	if (tfs_is_url(source)) {
		/* Ollama takes https://host/ns/model:tag for a model of its store: one that is
		 * there is that; anything else is a file on a web server */
		if ((rc = tfs_model_new(&m, TFS_FMT_OLLAMA, source, err)))
			return rc;
		rc = tfs_ollama_open(m, source, opts, err);
		if (rc == 0) {
			m->changed = false;
			for (size_t i = 0; i < m->n_src; i++)
				posix_fadvise(m->src[i].fd, 0, 0, POSIX_FADV_NORMAL);
			*out = m;
			return 0;
		}
		tfs_model_free(m);
		if (rc != TFS_E_NOTFOUND && rc != TFS_E_INVALID)
			return rc;
		tfs_error_clear(err);
		/* a model of an Ollama registry: its manifest's URL, or a name with a scheme */
		if ((rc = tfs_model_new(&m, TFS_FMT_OLLAMA, source, err)))
			return rc;
		rc = tfs_ollama_open_registry(m, source, opts, err);
		if (rc == 0) {
			m->changed = false;
			*out = m;
			return 0;
		}
		tfs_model_free(m);
		if (rc != 1)
			return rc;
		if (url_is_json(source))
			return open_remote_index(out, source, opts, err);
		rc = open_remote(out, source, opts, err);
		if (rc == TFS_E_NOTFOUND && tfs_is_registry_source(source))
			/* an Ollama name whose manifest the registry does not have either */
			tfs_error_set(err, rc, "%s: not found (HTTP 404), neither as a model of "
				      "an Ollama registry (no manifest of that tag) nor as a file",
				      source);
		return rc;
	}
	if (tfs_is_hf(source))
		return open_hf(out, source, opts, err);
	if ((rc = classify(source, &k, err)) || (rc = tfs_model_new(&m, k.fmt, source, err)))
		return rc;
	if (k.fmt == TFS_FMT_GGUF) {
		int32_t src;
		rc = tfs_model_add_source(m, source, NULL, &src, err);
		if (!rc)
			rc = tfs_gguf_read(m, src, err);
	} else if (k.fmt == TFS_FMT_SAFETENSORS) {
		rc = tfs_safetensors_open(m, source, err);
	} else {
		rc = tfs_ollama_open(m, source, opts, err);
	}
	if (rc) {
		tfs_model_free(m);
		return open_failed(source, &k, rc, err);
	}
	m->changed = false;
	/* index.json names the source by its absolute path, whatever the caller typed (an
	 * Ollama name stays a name) */
	m->abs_path = realpath(source, NULL);
	/* headers are read: reads of tensor data may read ahead again */
	for (size_t i = 0; i < m->n_src; i++)
		posix_fadvise(m->src[i].fd, 0, 0, POSIX_FADV_NORMAL);
	*out = m;
	return 0;
}

int tfs_model_open_mem(tfs_model **out, const char *name, const void *data, size_t size,
		       tfs_error *err)
{
	const char *p = data;
	bool gguf = size >= 4 && strncasecmp(p, "GGUF", 4) == 0;
	tfs_model *m = NULL;
	int32_t src;
	int rc;

	*out = NULL;
	if (size >= 4 && memcmp(p, "FUGG", 4) == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: big-endian GGUF is not supported", name);
	if (size >= sizeof(lfs_magic) - 1 && memcmp(p, lfs_magic, sizeof(lfs_magic) - 1) == 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: is a Git LFS pointer file, not the model itself "
				     "(run 'git lfs pull' to fetch it)", name);
	if ((rc = tfs_model_new(&m, gguf ? TFS_FMT_GGUF : TFS_FMT_SAFETENSORS, name, err)) ||
	    (rc = tfs_model_add_mem_source(m, name, data, size, &src, err)) ||
	    (rc = gguf ? tfs_gguf_read(m, src, err) : tfs_safetensors_open_src(m, src, err))) {
		tfs_model_free(m);
		return rc;
	}
	m->changed = false;
	*out = m;
	return 0;
}
