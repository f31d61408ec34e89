/*
 * ollama_registry.c - a model of an Ollama registry over HTTP(S): the registry API Ollama
 * pulls from; the manifest fetched whole, each blob a remote source.
 */
#include "ollama_impl.h"
#include "open.h"
#include "remote.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ==== a registry's model over HTTP(S) ==== */

static bool has_suffix(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

/* The manifest URL and the blobs' base URL of source: a registry's manifest URL
 * (scheme://host/v2/<name>/manifests/<tag>), or an Ollama name with a scheme
 * (scheme://host/ns/model[:tag]; without a tag only for registry.ollama.ai, as a URL of a
 * file is no model name).  *named: the latter.  n: the name's parts.  false: neither (or out
 * of memory: then the caller's file fetch says so). */
static bool registry_urls(const char *source, char **manifest, char **blobs, tfs_ollama_name *n,
			  bool *named)
{
	const char *sep = strstr(source, "://"), *path = sep ? strchr(sep + 3, '/') : NULL;
	size_t len = strlen(source);
	if (!path || strcspn(source, "?#") != len)
		return false;
	const char *mf = NULL;
	for (const char *p = path; (p = strstr(p, "/manifests/")) != NULL; p++)
		mf = p;
	*manifest = *blobs = NULL;
	if (strncmp(path, "/v2/", 4) == 0 && mf && mf > path + 4) {
		const char *tag = mf + 11, *model = tfs_ollama_last_slash(path + 3, mf);
		const char *ns = model ? tfs_ollama_last_slash(path + 3, model) : NULL;
		if (!*tag || strchr(tag, '/') || !model || model + 1 >= mf)
			return false;
		snprintf(n->host, sizeof(n->host), "%.*s", (int)(path - sep - 3), sep + 3);
		snprintf(n->ns, sizeof(n->ns), "%.*s", ns ? (int)(model - ns - 1) : 0,
			 ns ? ns + 1 : "");
		snprintf(n->model, sizeof(n->model), "%.*s", (int)(mf - model - 1), model + 1);
		snprintf(n->tag, sizeof(n->tag), "%s", tag);
		*named = false;
		if (!(*manifest = strdup(source)) ||
		    asprintf(blobs, "%.*s/blobs/", (int)(mf - source), source) < 0) {
			free(*manifest);
			*manifest = *blobs = NULL;
			return false;
		}
		return true;
	}
	tfs_error e;
	const char *last = strrchr(path, '/');
	int slashes = 0;
	for (const char *p = path; *p; p++)
		slashes += *p == '/';
	if (slashes != 2 || has_suffix(source, len, ".gguf") ||
	    has_suffix(source, len, ".safetensors") || has_suffix(source, len, ".json") ||
	    tfs_ollama_parse_name(n, source, &e) != 0 ||
	    (!strchr(last, ':') && strcmp(n->host, "registry.ollama.ai") != 0))
		return false;
	int sl = (int)(sep - source);
	*named = true;
	if (asprintf(manifest, "%.*s://%s/v2/%s/%s/manifests/%s", sl, source, n->host, n->ns,
		     n->model, n->tag) < 0) {
		*manifest = NULL;
		return false;
	}
	if (asprintf(blobs, "%.*s://%s/v2/%s/%s/blobs/", sl, source, n->host, n->ns,
		     n->model) < 0) {
		free(*manifest);
		*manifest = *blobs = NULL;
		return false;
	}
	return true;
}

bool tfs_is_registry_source(const char *source)
{
	char *manifest, *blobs;
	tfs_ollama_name n;
	bool named;
	if (!registry_urls(source, &manifest, &blobs, &n, &named))
		return false;
	free(manifest);
	free(blobs);
	return true;
}

/* A model of an Ollama registry over HTTP(S) (the registry API Ollama pulls from): source is
 * its manifest's URL (http(s)://HOST/v2/NS/MODEL/manifests/TAG), or an Ollama name with a
 * scheme (http(s)://HOST/NS/MODEL:TAG) that is not in the local store.  The manifest is
 * fetched whole, each blob is a remote source (HOST/v2/NS/MODEL/blobs/DIGEST).
 * TFS_PASSTHROUGH when source is neither (or, a name, has no manifest there: the caller
 * tries it as a file). */
static int open_registry(tfs_model *m, const char *source, const tfs_open_opts *o,
			 tfs_error *err)
{
	char *manifest, *blobs;
	tfs_ollama_name n;
	bool named;
	json_t *root = NULL;

	if (!registry_urls(source, &manifest, &blobs, &n, &named))
		return TFS_PASSTHROUGH;
	tfs_ollama_layout *lay = calloc(1, sizeof(*lay));
	if (!lay) {
		free(manifest);
		free(blobs);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	}
	lay->manifest_src = -1;
	lay->config.src = lay->config.extra = -1;
	lay->manifest_path = manifest;
	lay->blob_base = blobs;
	m->priv = lay;
	if (!(lay->host = strdup(n.host)) || !(lay->ns = strdup(n.ns)) ||
	    !(lay->model = strdup(n.model)) || !(lay->tag = strdup(n.tag)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	int64_t mtime = 0;
	int rc = tfs_remote_fetch_small(manifest, o, TFS_MAX_MANIFEST, MT_MANIFEST,
					&lay->manifest_buf, &lay->manifest_len, &mtime, err);
	if (rc == TFS_E_NOTFOUND && named)
		return TFS_PASSTHROUGH; /* no such model there: maybe a file after all */
	if (rc)
		return rc;
	char *p = strdup(manifest);
	if (!p)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	free(m->path);
	m->path = p;
	if (!(rc = tfs_ollama_read_manifest(m, lay, &root, err))) {
		/* the model's times: the manifest's Last-Modified */
		m->src[lay->manifest_src].mtime_sec = mtime;
		rc = tfs_ollama_add_layers(m, lay, o, err);
	}
	json_decref(root);
	return rc;
}

int tfs_ollama_open_url(tfs_model **out, const tfs_format_ops *self, const char *url,
			const tfs_open_opts *o, tfs_error *err)
{
	tfs_model *m = NULL;
	int rc;
	/* Ollama takes https://host/ns/model:tag for a model of its store: one that is
	 * there is that; anything else is a file on a web server */
	if ((rc = tfs_model_new(&m, self, url, err)))
		return rc;
	rc = tfs_ollama_open(m, url, o, err);
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
	if ((rc = tfs_model_new(&m, self, url, err)))
		return rc;
	rc = open_registry(m, url, o, err);
	if (rc == 0) {
		m->changed = false;
		*out = m;
		return 0;
	}
	tfs_model_free(m);
	return rc;
}

void tfs_ollama_url_not_found(const char *url, tfs_error *err)
{
	if (tfs_is_registry_source(url))
		/* an Ollama name whose manifest the registry does not have either */
		tfs_error_set(err, TFS_E_NOTFOUND, "%s: not found (HTTP 404), neither as a model of "
			      "an Ollama registry (no manifest of that tag) nor as a file", url);
}
