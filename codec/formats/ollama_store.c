/*
 * ollama_store.c - Ollama model names and the store: where a name's manifest is.
 *
 * Store layout (tests/data/OLLAMA_FORMATS.md):
 *  1. <root>/manifests/<host>/<namespace>/<model>/<tag>: the manifest;
 *  2. <root>/blobs/sha256-<64 hex>: every blob, named by the sha256 of its bytes.
 * <root> is -o ollama_models, else $OLLAMA_MODELS, else ~/.ollama/models.
 */
#include "ollama_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ==== model names (ollama types/model/name.go) ==== */

static bool name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* isValidPart: 1..max chars, first [A-Za-z0-9_], then also '-' '.', ('.' not in a
 * namespace, ':' only in a host). */
static bool valid_part(const char *s, size_t len, size_t max, bool is_ns, bool is_host)
{
	if (len < 1 || len > max || !name_char_ok(s[0]))
		return false;
	for (size_t i = 1; i < len; i++) {
		char c = s[i];
		if (name_char_ok(c) || c == '-')
			continue;
		if (c == '.' && !is_ns)
			continue;
		if (c == ':' && is_host)
			continue;
		return false;
	}
	return true;
}

static bool set_part(char *dst, size_t cap, const char *s, size_t len, bool is_ns, bool is_host)
{
	if (!valid_part(s, len, cap - 1, is_ns, is_host))
		return false;
	memcpy(dst, s, len);
	dst[len] = '\0';
	return true;
}

/* The last '/' in [s, end), or NULL. */
const char *tfs_ollama_last_slash(const char *s, const char *end)
{
	while (end > s)
		if (*--end == '/')
			return end;
	return NULL;
}

/* [scheme://][host/][namespace/]model[:tag], defaults registry.ollama.ai/library/?:latest. */
int tfs_ollama_parse_name(tfs_ollama_name *n, const char *ref, tfs_error *err)
{
	const char *s = ref, *end = ref + strlen(ref);
	const char *colon = strrchr(s, ':'), *slash = strrchr(s, '/');
	const char *what = "model";

	if (strchr(s, '@'))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: model references with a digest are not supported", ref);
	/* ':' after the last '/' starts the tag ("/" cannot be in a tag, ':' can be in a host) */
	if (colon && (!slash || colon > slash)) {
		what = "tag";
		if (!set_part(n->tag, sizeof(n->tag), colon + 1, (size_t)(end - colon - 1), false,
			      false))
			goto bad;
		end = colon;
	} else {
		strcpy(n->tag, "latest");
	}
	strcpy(n->ns, "library");
	strcpy(n->host, "registry.ollama.ai");

	const char *p = tfs_ollama_last_slash(s, end);
	what = "model";
	if (!set_part(n->model, sizeof(n->model), p ? p + 1 : s, (size_t)(end - (p ? p + 1 : s)),
		      false, false))
		goto bad;
	if (!p)
		return 0;
	end = p;
	p = tfs_ollama_last_slash(s, end);
	what = "namespace";
	if (!set_part(n->ns, sizeof(n->ns), p ? p + 1 : s, (size_t)(end - (p ? p + 1 : s)), true,
		      false))
		goto bad;
	if (!p)
		return 0;
	end = p;
	const char *h = s, *sep = strstr(s, "://");
	if (sep && sep < end)
		h = sep + 3;
	what = "host";
	if (!set_part(n->host, sizeof(n->host), h, (size_t)(end - h), false, true))
		goto bad;
	return 0;
bad:
	return tfs_error_set(err, TFS_E_INVALID,
			     "%s: not a valid Ollama model name (bad %s part: parts are 1-80 "
			     "characters [A-Za-z0-9_.-] starting with a letter, digit or '_'; no '.' in "
			     "the namespace)", ref, what);
}

char *tfs_ollama_join3(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = c ? strlen(c) : 0;
	char *s = malloc(la + lb + lc + 3);
	if (!s)
		return NULL;
	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + 1, b, lb);
	if (c) {
		s[la + 1 + lb] = '/';
		memcpy(s + la + 2 + lb, c, lc + 1);
	} else {
		s[la + 1 + lb] = '\0';
	}
	return s;
}

/* dir/part, or when that does not exist, the entry of dir equal to part ignoring ASCII
 * case (names compare case-insensitively).  NULL with errno set when there is none. */
static char *child_ci(const char *dir, const char *part)
{
	char *p = tfs_ollama_join3(dir, part, NULL);
	struct stat st;
	if (!p || stat(p, &st) == 0)
		return p;
	free(p);
	DIR *d = opendir(dir);
	if (!d) {
		errno = ENOENT;
		return NULL;
	}
	struct dirent *de;
	p = NULL;
	while ((de = readdir(d))) {
		if (strcasecmp(de->d_name, part) == 0) {
			p = tfs_ollama_join3(dir, de->d_name, NULL);
			break;
		}
	}
	closedir(d);
	if (!p)
		errno = ENOENT;
	return p;
}

static char *models_root(const tfs_open_opts *o)
{
	if (o && o->ollama_models && o->ollama_models[0])
		return strdup(o->ollama_models);
	const char *env = getenv("OLLAMA_MODELS");
	if (env && env[0])
		return strdup(env);
	const char *home = getenv("HOME");
	if (!home || !home[0])
		return NULL;
	return tfs_ollama_join3(home, ".ollama", "models");
}

/* Finds the store of a manifest path: the directory above its last "manifests"
 * component (after realpath); <root>/manifests/<host>/<ns>/<model>/<tag> also names it. */
int tfs_ollama_locate_store(tfs_ollama_layout *lay, const char *path, tfs_error *err)
{
	char *real = realpath(path, NULL);
	if (!real)
		return tfs_error_sys(err, errno, "%s", path);
	lay->manifest_path = real;
	size_t len = strlen(real);
	const char *comp[4];
	int below = 0; /* components seen after the candidate */
	for (size_t end = len; end > 0;) {
		size_t start = end;
		while (start > 0 && real[start - 1] != '/')
			start--;
		if (end - start == 9 && !strncmp(real + start, "manifests", 9) && below > 0) {
			size_t rl = start > 1 ? start - 1 : 1; /* "/x/manifests" -> "/x"; "/manifests" -> "/" */
			if (!(lay->root = strndup(real, rl)))
				return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
			if (below == 4) {
				char **dst[4] = { &lay->tag, &lay->model, &lay->ns, &lay->host };
				for (int i = 0; i < 4; i++) {
					const char *e = strchr(comp[i], '/');
					*dst[i] = e ? strndup(comp[i], (size_t)(e - comp[i]))
						    : strdup(comp[i]);
					if (!*dst[i])
						return tfs_error_set(err, TFS_E_NOMEM,
								     "%s: out of memory", path);
				}
			}
			return 0;
		}
		if (below < 4)
			comp[below] = real + start;
		below++;
		end = start > 0 ? start - 1 : 0;
	}
	return tfs_error_set(err, TFS_E_FORMAT,
			     "%s: not inside an Ollama store (no manifests/ directory above it, "
			     "so the blobs cannot be found)", path);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The tags of a model (the manifests in its directory), sorted, comma-separated into buf
 * (cut with "..." when they do not fit); "" when there are none. */
static void list_tags(const char *model_dir, char *buf, size_t cap)
{
	char *names[256];
	size_t n = 0, len = 0;
	DIR *d = opendir(model_dir);
	buf[0] = '\0';
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) && n < sizeof(names) / sizeof(names[0])) {
		struct stat st;
		char *p = de->d_name[0] != '.' ? tfs_ollama_join3(model_dir, de->d_name, NULL)
					       : NULL;
		if (p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && (names[n] = strdup(de->d_name)))
			n++;
		free(p);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_str);
	for (size_t i = 0; i < n; i++) {
		int k = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", names[i]);
		if (k < 0 || (size_t)k >= cap - len) {
			snprintf(buf + (len < cap - 4 ? len : cap - 4), 4, "...");
			len = cap;
		}
		if (len < cap)
			len += (size_t)k;
		free(names[i]);
	}
}

/* The manifest path of a model reference under the store root. */
int tfs_ollama_resolve_ref(const char *ref, const tfs_open_opts *o,
			   char **manifest, tfs_error *err)
{
	tfs_ollama_name n;
	int rc = tfs_ollama_parse_name(&n, ref, err);
	if (rc)
		return rc;
	char *root = models_root(o);
	if (!root)
		return tfs_error_set(err, TFS_E_NOTFOUND,
				     "%s: no Ollama store: set OLLAMA_MODELS or HOME", ref);
	const char *parts[5] = { "manifests", n.host, n.ns, n.model, n.tag };
	char *dir = strdup(root);
	for (int i = 0; dir && i < 5; i++) {
		char *next = child_ci(dir, parts[i]);
		if (!next) {
			char tags[512] = "";
			if (i == 4)
				list_tags(dir, tags, sizeof(tags));
			/* no such model at all: the name may as well be a file mistyped */
			if (i < 4)
				rc = tfs_error_set(err, TFS_E_NOTFOUND, "%s: no such file, and no "
						   "Ollama model %s/%s/%s:%s in the store %s", ref,
						   n.host, n.ns, n.model, n.tag, root);
			else
				rc = tfs_error_set(err, TFS_E_NOTFOUND, "%s: model %s/%s/%s:%s not "
						   "found in the Ollama store %s%s%s", ref, n.host,
						   n.ns, n.model, n.tag, root,
						   tags[0] ? "; its tags are: " : "", tags);
			free(dir);
			free(root);
			return rc;
		}
		free(dir);
		dir = next;
	}
	free(root);
	if (!dir)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", ref);
	*manifest = dir;
	return 0;
}

/* A model of the store (its manifest at <root>/manifests/<host>/<ns>/<model>/<tag>) keeps
 * its staging directory in <root>/.tensorfs-staging/<host>/<ns>/<model>/<tag>: not inside
 * manifests/, where Ollama would take it for a model.  NULL for a manifest elsewhere. */
char *tfs_ollama_staging_home(const tfs_model *model)
{
	const char *mp = model->path, *m = NULL;
	for (const char *p = strstr(mp, "/manifests/"); p; p = strstr(p + 1, "/manifests/"))
		m = p;
	int slashes = 0;
	for (const char *p = m ? m + 11 : ""; *p; p++)
		slashes += *p == '/';
	char *s;
	if (m && slashes == 3 &&
	    asprintf(&s, "%.*s/.tensorfs-staging/%s", (int)(m - mp), mp, m + 11) >= 0)
		return s;
	return NULL;
}
