/* open.c - tfs_model_open: recognize a source and hand it to its format (format.h); a remote
 * source as its row of the scheme table (net/scheme_impl.h) says. */
#include "open.h"
#include "format.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

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

static const char lfs_magic[] = TFS_LFS_MAGIC;

/* A local source as the formats' probes see it: its stat, its first bytes. */
typedef struct {
	tfs_probe p;
	struct stat st;
	char head[4096];
} probed;

/* Which format reads a local source (a path, or a model name): each format of the table
 * (registry.c) asked in turn, the first sure one taking it, else the first that guesses.
 * Fails for a missing or unreadable path, an LFS pointer, what a probe rejects. */
static int classify(const char *source, probed *k, const tfs_format_ops **fmt,
		    tfs_error *err)
{
	memset(k, 0, sizeof(*k));
	k->p.source = source;
	k->p.head = k->head;
	if (stat(source, &k->st) == 0)
		k->p.st = &k->st;
	else if (errno != ENOENT)
		return tfs_error_sys(err, errno, "%s", source);
	if (k->p.st && !S_ISDIR(k->st.st_mode)) {
		ssize_t n = peek(source, k->head, sizeof(k->head) - 1);
		if (n < 0)
			return tfs_error_sys(err, errno, "%s", source);
		k->p.n = (size_t)n;
		/* an LFS pointer first: a repository cloned without git-lfs has them under the
		 * models' own names (model.gguf) */
		if ((size_t)n >= sizeof(lfs_magic) - 1 &&
		    memcmp(k->head, lfs_magic, sizeof(lfs_magic) - 1) == 0)
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: is a Git LFS pointer file, not the model itself "
					     "(run 'git lfs pull' to fetch it)", source);
	}
	const tfs_format_ops *guess = NULL;
	for (size_t i = 0; tfs_formats[i]; i++) {
		int v = tfs_formats[i]->probe(&k->p, err);
		if (v < 0)
			return v;
		if (v == TFS_PROBE_YES) {
			*fmt = tfs_formats[i];
			return 0;
		}
		if (v == TFS_PROBE_GUESS && !guess)
			guess = tfs_formats[i];
	}
	if (!guess)
		return k->p.st ? tfs_error_set(err, TFS_E_FORMAT, "%s: not a model file", source)
			       : tfs_error_sys(err, ENOENT, "%s", source);
	*fmt = guess;
	return 0;
}

/* A GGUF or single safetensors file of a remote scheme, told by its first bytes. */
static int open_remote(tfs_model **out, const char *url, const tfs_open_opts *o,
		       tfs_error *err)
{
	tfs_model *m = NULL;
	int32_t src;
	int rc = tfs_model_new(&m, &tfs_safetensors_format, url, err);
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
			rc = (m->ops = &tfs_gguf_format, tfs_gguf_read(m, src, err));
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

/* ==== remote sources: each a row of the scheme table (net/scheme_impl.h) ==== */

typedef struct {
	const char *index_url;
	const tfs_open_opts *o;
} remote_shards;

/* A shard: its name beside the index (as the index's scheme joins it: a URL's
 * percent-encoded, an S3 key's as it is), a remote source. */
static int open_remote_shard(void *ctx, tfs_model *m, const char *name, int32_t *src,
			     tfs_error *err)
{
	const remote_shards *rs = ctx;
	char *url = tfs_remote_join(rs->index_url, name), *label = strdup(name);
	int rc = 0;
	if (!url || !label) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", rs->index_url);
		goto out;
	}
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

/* The index of a sharded set at url: fetched whole, each shard a remote source.  *missing:
 * the index itself is not there (not a shard it names). */
static int open_remote_index(tfs_model **out, const char *url, const tfs_open_opts *o,
			     bool *missing, tfs_error *err)
{
	tfs_model *m = NULL;
	uint8_t *text = NULL;
	uint64_t len = 0;
	remote_shards rs = { url, o };
	int rc = tfs_remote_fetch_small(url, o, TFS_MAX_ST_HEADER, NULL, &text, &len, NULL, err);
	*missing = rc == TFS_E_NOTFOUND;
	if (!rc)
		rc = tfs_model_new(&m, &tfs_safetensors_format, url, err);
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

/* A remote file: a sharded set's index (.json), else a GGUF or safetensors file.
 * *missing: the file itself is not there. */
static int open_remote_file(tfs_model **out, const char *file, const tfs_open_opts *o,
			    bool *missing, tfs_error *err)
{
	if (tfs_remote_name_ends(file, ".json"))
		return open_remote_index(out, file, o, missing, err);
	int rc = open_remote(out, file, o, err);
	*missing = rc == TFS_E_NOTFOUND;
	return rc;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcasecmp(s + n - t, tail) == 0;
}

/* Which name of a listed directory is its model (*key, borrowed from names): a sharded set's
 * index, model.safetensors, else the only GGUF, else the only safetensors file.  0, or an
 * error when none or several are (their names said). */
static int dir_model(const char **key, const char *dir, char **names, size_t n,
		     tfs_error *err)
{
	*key = NULL;
	static const char *const suffixes[] = { ".gguf", ".safetensors" };
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], "model.safetensors.index.json") == 0)
			return (*key = names[i], 0);
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], "model.safetensors") == 0)
			return (*key = names[i], 0);
	for (size_t k = 0; k < 2; k++) {
		const char *one = NULL, *other = NULL;
		for (size_t i = 0; i < n; i++)
			if (ends_with(names[i], suffixes[k]) && !other)
				*(one ? &other : &one) = names[i];
		if (one && other)
			return tfs_error_set(err, TFS_E_INVALID, "%s: several %s keys under the prefix "
					     "(%s, %s%s): name one", dir, suffixes[k] + 1, one,
					     other, n > 2 ? ", ..." : "");
		if (one)
			return (*key = one, 0);
	}
	if (!n)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no key under the prefix", dir);
	return tfs_error_set(err, TFS_E_FORMAT, "%s: no model under the prefix (no "
			     "model.safetensors.index.json, model.safetensors, .gguf or "
			     ".safetensors key among its %zu)", dir, n);
}

/* The model of a listed remote directory (names, n: its listing). */
static int open_listed(tfs_model **out, const char *dir, char **names, size_t n,
		       const tfs_open_opts *o, tfs_error *err)
{
	const char *key = NULL;
	bool missing;
	int rc = dir_model(&key, dir, names, n, err);
	char *file = rc ? NULL : tfs_remote_join(dir, key);
	if (!rc && !file)
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", dir);
	if (!rc)
		rc = open_remote_file(out, file, o, &missing, err);
	free(file);
	return rc;
}

/* A remote directory (a repo, a prefix): listed and its model chosen (dir_model) when its
 * row can list; else its model.safetensors.index.json, else its model.safetensors. */
static int open_remote_dir(tfs_model **out, const tfs_scheme *s, const char *dir,
			   const tfs_open_opts *o, tfs_error *err)
{
	static const char *const models[] = { "model.safetensors.index.json",
					       "model.safetensors" };
	char **names = NULL;
	size_t n = 0;
	int rc;
	if (s->list) {
		if (!(rc = s->list(dir, o, &names, &n, err)))
			rc = open_listed(out, dir, names, n, o, err);
		tfs_remote_names_free(names, n);
		return rc;
	}
	for (size_t i = 0; i < 2; i++) {
		bool missing = false;
		char *file = s->join(dir, models[i]);
		if (!file)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", dir);
		if (i)
			tfs_error_clear(err);
		rc = open_remote_file(out, file, o, &missing, err);
		free(file);
		if (!(rc == TFS_E_NOTFOUND && missing))
			break;
	}
	return rc;
}

/* A file that is not there, of a row that can list: the prefix of that name (what `aws s3
 * ls` finds), its model when keys are under it; else the file's error (err), said so. */
static int open_as_prefix(tfs_model **out, const tfs_scheme *s, const char *source,
			  const tfs_open_opts *o, tfs_error *err)
{
	char **names = NULL, *dir = NULL, why[TFS_ERRMSG_MAX];
	size_t n = 0;
	tfs_error lerr = { 0 };
	snprintf(why, sizeof(why), "%s", err->msg);
	if (asprintf(&dir, "%s/", source) < 0)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	int rc = s->list(dir, o, &names, &n, &lerr);
	if (!rc && n) {
		tfs_error_clear(err);
		rc = open_listed(out, dir, names, n, o, err);
	} else if (!rc) {
		rc = tfs_error_set(err, TFS_E_NOTFOUND, "%s, nor any key under the prefix %s", why,
				   dir);
	} else {
		rc = tfs_error_set(err, TFS_E_NOTFOUND, "%s; as the prefix %s: %s", why, dir,
				   lerr.msg);
	}
	tfs_remote_names_free(names, n);
	free(dir);
	return rc;
}

/* A source of a row of the scheme table: a model a format finds by URL (an Ollama name with
 * a scheme), a directory, or a file (a sharded set's index, a GGUF or a safetensors file). */
static int open_scheme(tfs_model **out, const tfs_scheme *s, const char *source,
		       const tfs_open_opts *o, tfs_error *err)
{
	int rc;
	bool missing = false;
	for (size_t i = 0; s->formats_by_url && tfs_formats[i]; i++)
		if (tfs_formats[i]->open_url &&
		    (rc = tfs_formats[i]->open_url(out, tfs_formats[i], source, o, err)) !=
		    TFS_PASSTHROUGH)
			return rc;
	if (s->is_dir(source))
		return open_remote_dir(out, s, source, o, err);
	rc = open_remote_file(out, source, o, &missing, err);
	if (rc == TFS_E_NOTFOUND && missing && s->list)
		return open_as_prefix(out, s, source, o, err);
	for (size_t i = 0; rc == TFS_E_NOTFOUND && s->formats_by_url && tfs_formats[i]; i++)
		if (tfs_formats[i]->url_not_found)
			tfs_formats[i]->url_not_found(source, err);
	return rc;
}

int tfs_model_open(tfs_model **out, const char *source, const tfs_open_opts *opts,
		   tfs_error *err)
{
	static const tfs_open_opts none;
	tfs_model *m = NULL;
	const tfs_format_ops *fmt = NULL;
	probed k;
	int rc;

	*out = NULL;
	if (!opts)
		opts = &none;
	const tfs_scheme *scheme = tfs_scheme_of(source);
	if (scheme)
		return open_scheme(out, scheme, source, opts, err);
	if ((rc = classify(source, &k, &fmt, err)) || (rc = tfs_model_new(&m, fmt, source, err)))
		return rc;
	if ((rc = fmt->open(m, &k.p, opts, err))) {
		tfs_model_free(m);
		return rc;
	}
	m->changed = false;
	/* index.json names the source by its absolute path, whatever the caller typed (an
	 * Ollama name stays a name) */
	m->abs_path = realpath(source, NULL);
	/* headers are read: reads of tensor data may read ahead again */
	for (size_t i = 0; i < m->n_src; i++)
		tfs_source_advise_normal(&m->src[i]);
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
	if ((rc = tfs_model_new(&m, gguf ? &tfs_gguf_format : &tfs_safetensors_format, name, err)) ||
	    (rc = tfs_model_add_mem_source(m, name, data, size, &src, err)) ||
	    (rc = gguf ? tfs_gguf_read(m, src, err) : tfs_safetensors_open_src(m, src, err))) {
		tfs_model_free(m);
		return rc;
	}
	m->changed = false;
	*out = m;
	return 0;
}
