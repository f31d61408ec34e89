/*
 * ollama.c - the Ollama store reader: a manifest (by path or by model name) and its blobs.
 *
 * Store layout (tests/data/OLLAMA_FORMATS.md):
 *  1. <root>/manifests/<host>/<namespace>/<model>/<tag>: the manifest, JSON
 *     {"schemaVersion": 2, "mediaType": ..., "config": L, "layers": [L, ...]},
 *     L = {"mediaType", "digest": "sha256:<64 hex>", "size"[, "name"][, "from"]};
 *  2. <root>/blobs/sha256-<64 hex>: every blob, named by the sha256 of its bytes.
 * A classic model has one application/vnd.ollama.image.model layer, a GGUF file; a
 * per-tensor ("x/create") model has application/vnd.ollama.image.tensor layers, each a
 * safetensors file holding a tensor and, when MLX-quantized, its .scale / .bias /
 * .global_scale companions.  Every other layer becomes a file under layers/ (names:
 * layout.h).  This file reads the manifest and its layers; ollama_impl.h lists the others.
 */
#include "ollama_impl.h"
#include "dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ==== the layout (m->priv) ==== */

static void layer_free(tfs_ollama_layer *l)
{
	free(l->media_type);
	free(l->digest);
	free(l->name);
	free(l->from);
}

void tfs_ollama_layout_free(void *p)
{
	tfs_ollama_layout *l = p;
	if (!l)
		return;
	for (size_t i = 0; i < l->n_layers; i++)
		layer_free(&l->layers[i]);
	free(l->layers);
	layer_free(&l->config);
	free(l->root);
	free(l->blob_base);
	free(l->manifest_buf);
	free(l->manifest_path);
	free(l->host);
	free(l->ns);
	free(l->model);
	free(l->tag);
	free(l->manifest_rest);
	free(l);
}

/* ==== manifest ==== */

static bool valid_digest(const char *d)
{
	if (strncmp(d, "sha256", 6) != 0 || (d[6] != ':' && d[6] != '-'))
		return false;
	for (int i = 0; i < 64; i++) {
		char c = d[7 + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
			return false;
	}
	return d[71] == '\0';
}

static char *opt_str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

/* Reads one {"mediaType", "digest", "size"[, "name"][, "from"]} descriptor. */
static int parse_layer(tfs_ollama_layer *l, const json_t *v, const char *file, const char *what,
		       tfs_error *err)
{
	memset(l, 0, sizeof(*l));
	l->src = l->extra = -1;
	if (!json_is_object(v))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s is not an object", file, what);
	const json_t *mt = json_object_get(v, "mediaType"), *dg = json_object_get(v, "digest"),
		     *sz = json_object_get(v, "size"), *nm = json_object_get(v, "name"),
		     *fr = json_object_get(v, "from");
	if (!json_is_string(mt) || !json_string_length(mt))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s has no \"mediaType\" string", file,
				     what);
	if (!json_is_string(dg) || !valid_digest(json_string_value(dg)))
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: %s: \"digest\" is not \"sha256:<64 hex digits>\"", file, what);
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: %s: \"size\" is not a non-negative integer", file, what);
	if ((nm && !json_is_string(nm)) || (fr && !json_is_string(fr)))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s: \"%s\" is not a string", file,
				     what, nm && !json_is_string(nm) ? "name" : "from");
	l->size = (uint64_t)json_integer_value(sz);
	l->media_type = strdup(json_string_value(mt));
	l->digest = strdup(json_string_value(dg));
	l->digest[6] = ':';
	l->name = opt_str(v, "name");
	l->from = opt_str(v, "from");
	if (!l->media_type || !l->digest || (nm && !l->name) || (fr && !l->from))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	return 0;
}

/* ==== layer names under layers/ ==== */

static const char *const kinds[] = {
	"template", "system", "params", "license", "adapter", "projector",
	"messages", "prompt", "embed", "draft",
};

/* A name a json layer's encoding must not take: config.json, manifest.json, or
 * <kind>[.<n>] of any layer kind. */
static bool reserved_name(const char *s)
{
	if (!strcmp(s, "config.json") || !strcmp(s, "manifest.json") ||
	    !strncmp(s, TFS_OLLAMA_JSON_PREFIX, strlen(TFS_OLLAMA_JSON_PREFIX)))
		return true;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t k = strlen(kinds[i]);
		if (strncmp(s, kinds[i], k) != 0)
			continue;
		if (s[k] == '\0')
			return true;
		if (s[k] == '.' && s[k + 1]) {
			const char *p = s + k + 1;
			while (*p >= '0' && *p <= '9')
				p++;
			if (!*p)
				return true;
		}
	}
	return false;
}

/* A json layer name: a relative path without empty, "." or ".." segments. */
static bool valid_rel_path(const char *s)
{
	if (!s[0] || s[0] == '/')
		return false;
	for (const char *p = s;;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!e)
			return true;
		p = e + 1;
	}
}

static char *encode_json_name(const char *name)
{
	tfs_buf b = { 0 };
	for (const char *p = name; *p; p++) {
		int rc = *p == '%' ? tfs_buf_append(&b, "%25", 3)
			 : *p == '/' ? tfs_buf_append(&b, "%2F", 3)
				     : tfs_buf_append(&b, p, 1);
		if (rc) {
			tfs_buf_free(&b);
			return NULL;
		}
	}
	if (b.data && reserved_name(b.data)) {
		tfs_buf enc = { 0 };
		if (tfs_buf_printf(&enc, "%s%s", TFS_OLLAMA_JSON_PREFIX, b.data)) {
			tfs_buf_free(&b);
			return NULL;
		}
		tfs_buf_free(&b);
		return enc.data;
	}
	return b.data;
}

char *tfs_ollama_json_name(const char *file)
{
	if (!strncmp(file, TFS_OLLAMA_JSON_PREFIX, strlen(TFS_OLLAMA_JSON_PREFIX)))
		file += strlen(TFS_OLLAMA_JSON_PREFIX);
	size_t n = strlen(file);
	char *out = malloc(n + 1), *q = out;
	if (!out)
		return NULL;
	for (const char *p = file; *p; p++) {
		if (*p != '%') {
			*q++ = *p;
		} else if (!strncmp(p, "%25", 3)) {
			*q++ = '%', p += 2;
		} else if (!strncmp(p, "%2F", 3)) {
			*q++ = '/', p += 2;
		} else {
			free(out);
			return NULL;
		}
	}
	*q = '\0';
	return out;
}

/* Pushes an extra named base, or base.1, base.2 ... when taken. */
static int push_numbered(tfs_model *m, const char *base, tfs_ollama_layer *l, tfs_error *err)
{
	char name[128];
	snprintf(name, sizeof(name), "%s", base);
	for (unsigned i = 1; tfs_model_find_extra(m, name) >= 0; i++)
		snprintf(name, sizeof(name), "%s.%u", base, i);
	l->role = TFS_OLLAMA_EXTRA;
	l->extra = (int32_t)m->n_x;
	return tfs_model_push_extra(m, name, l->media_type, l->src, 0, l->size, err);
}

/* The kind of a media type application/vnd.ollama.image.<kind> ([a-z0-9_-]+), or NULL. */
static const char *media_kind(const char *mt)
{
	if (strncmp(mt, MT_PREFIX, strlen(MT_PREFIX)) != 0)
		return NULL;
	const char *k = mt + strlen(MT_PREFIX);
	if (!*k || strlen(k) > 64)
		return NULL;
	for (const char *p = k; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return NULL;
	return k;
}

/* ==== opening ==== */

int tfs_ollama_read_manifest(tfs_model *m, tfs_ollama_layout *lay, json_t **out, tfs_error *err)
{
	const char *file = lay->manifest_path;
	int rc = lay->manifest_buf
		 ? tfs_model_add_mem_source(m, file, lay->manifest_buf, lay->manifest_len,
					    &lay->manifest_src, err)
		 : tfs_model_add_source(m, file, "manifest", &lay->manifest_src, err);
	if (rc)
		return rc;
	if (lay->manifest_buf) { /* labelled as a store's manifest is */
		char *label = strdup("manifest");
		if (!label)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
		free(m->src[lay->manifest_src].label);
		m->src[lay->manifest_src].label = label;
	}
	const tfs_source *s = &m->src[lay->manifest_src];
	if (s->size > TFS_MAX_MANIFEST)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: manifest of %llu bytes is over the "
				     "limit of %u", file, (unsigned long long)s->size, TFS_MAX_MANIFEST);
	if (s->size == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: empty manifest", file);
	json_error_t je;
	json_t *root = json_loadb((const char *)s->map, (size_t)s->size, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: manifest is not valid JSON: %s (line %d, column %d)", file,
				     je.text, je.line, je.column);
	*out = root;
	const json_t *sv = json_object_get(root, "schemaVersion");
	if (!json_is_object(root) || !json_is_integer(sv))
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: not an Ollama manifest (no \"schemaVersion\")", file);
	if (json_integer_value(sv) != 2)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: manifest schemaVersion %lld, expected 2",
				     file, (long long)json_integer_value(sv));
	const json_t *mt = json_object_get(root, "mediaType");
	if (mt && !json_is_string(mt))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: manifest mediaType is not a string",
				     file);
	const json_t *layers = json_object_get(root, "layers");
	if (!json_is_array(layers))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: manifest has no \"layers\" array", file);
	if ((rc = parse_layer(&lay->config, json_object_get(root, "config"), file, "config",
			      err)))
		return rc;
	size_t n = json_array_size(layers);
	if (n > TFS_MAX_ITEMS)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: too many layers", file);
	lay->layers = calloc(n ? n : 1, sizeof(*lay->layers));
	if (!lay->layers)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	for (size_t i = 0; i < n; i++) {
		char what[32];
		snprintf(what, sizeof(what), "layer %zu", i);
		lay->n_layers = i + 1;
		if ((rc = parse_layer(&lay->layers[i], json_array_get(layers, i), file, what, err)))
			return rc;
	}
	json_t *rest = json_deep_copy(root);
	if (rest) {
		json_object_del(rest, "config");
		json_object_del(rest, "layers");
		lay->manifest_rest = json_dumps(rest, JSON_COMPACT);
		json_decref(rest);
	}
	if (!lay->manifest_rest)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	return 0;
}

int tfs_ollama_add_layers(tfs_model *m, tfs_ollama_layout *lay, const tfs_open_opts *o,
			  tfs_error *err)
{
	const char *file = lay->manifest_path;
	const tfs_source *ms = &m->src[lay->manifest_src];
	int rc;
	size_t n_model = 0, n_tensor = 0;

	for (size_t i = 0; i < lay->n_layers; i++) {
		if (!strcmp(lay->layers[i].media_type, MT_MODEL))
			n_model++;
		else if (!strcmp(lay->layers[i].media_type, MT_TENSOR))
			n_tensor++;
	}
	if (n_model > 1)
		return tfs_error_set(err, TFS_E_UNSUPPORTED,
				     "%s: %zu model layers; tensorfs reads models with one", file,
				     n_model);
	if (n_model && n_tensor)
		return tfs_error_set(err, TFS_E_UNSUPPORTED,
				     "%s: both a GGUF model layer and tensor layers", file);

	if ((rc = tfs_model_push_extra(m, "manifest.json", MT_MANIFEST, lay->manifest_src, 0,
				       ms->size, err)))
		return rc;
	/* the config blob is always verified: it is small and says what the model is */
	if ((rc = tfs_ollama_open_blob(m, lay, &lay->config, true, o, err)))
		return rc;
	lay->config.role = TFS_OLLAMA_EXTRA;
	lay->config.extra = (int32_t)m->n_x;
	if ((rc = tfs_model_push_extra(m, "config.json", lay->config.media_type, lay->config.src,
				       0, lay->config.size, err)))
		return rc;

	for (size_t i = 0; i < lay->n_layers; i++) {
		tfs_ollama_layer *l = &lay->layers[i];
		if ((rc = tfs_ollama_open_blob(m, lay, l, false, o, err)))
			return rc;
		if (!strcmp(l->media_type, MT_MODEL)) {
			l->role = TFS_OLLAMA_MODEL;
			if ((rc = tfs_gguf_read(m, l->src, err)))
				return rc;
		} else if (!strcmp(l->media_type, MT_TENSOR)) {
			json_t *meta = NULL;
			uint64_t hl;
			size_t before = m->n_t;
			l->role = TFS_OLLAMA_TENSOR;
			if ((rc = tfs_safetensors_parse(m, l->src, &hl, &meta, err)))
				return rc;
			l->first_tensor = (uint32_t)before;
			l->n_tensors = (uint32_t)(m->n_t - before);
			rc = tfs_ollama_setup_quant(m, before, m->n_t, meta, m->src[l->src].path,
						    err);
			json_decref(meta);
			if (rc)
				return rc;
		} else if (!strcmp(l->media_type, MT_JSON)) {
			if (!l->name || !valid_rel_path(l->name))
				return tfs_error_set(err, TFS_E_FORMAT,
						     "%s: layer %zu (%s) needs a \"name\" that is a "
						     "relative path without '.' or '..' parts", file, i,
						     l->media_type);
			char *enc = encode_json_name(l->name);
			if (!enc)
				return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
			l->role = TFS_OLLAMA_EXTRA;
			l->extra = (int32_t)m->n_x;
			rc = tfs_model_push_extra(m, enc, l->media_type, l->src, 0, l->size, err);
			free(enc);
			if (rc)
				return rc;
		} else {
			const char *kind = media_kind(l->media_type);
			char base[80];
			snprintf(base, sizeof(base), "%s", kind ? kind : "layer");
			if ((rc = push_numbered(m, base, l, err)))
				return rc;
		}
	}
	return 0;
}

int tfs_ollama_open(tfs_model *m, const char *ref, const tfs_open_opts *o, tfs_error *err)
{
	tfs_ollama_layout *lay = calloc(1, sizeof(*lay));
	json_t *root = NULL;
	char *manifest = NULL;
	struct stat st;
	int rc;

	if (!lay)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", ref);
	lay->manifest_src = -1;
	lay->config.src = lay->config.extra = -1;
	m->priv = lay;

	if (stat(ref, &st) == 0 && S_ISREG(st.st_mode)) {
		rc = tfs_ollama_locate_store(lay, ref, err);
	} else {
		if ((rc = tfs_ollama_resolve_ref(ref, o, &manifest, err)))
			goto out;
		rc = tfs_ollama_locate_store(lay, manifest, err);
	}
	if (rc)
		goto out;
	char *p = strdup(lay->manifest_path);
	if (!p) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", ref);
		goto out;
	}
	free(m->path);
	m->path = p;
	if ((rc = tfs_ollama_read_manifest(m, lay, &root, err)))
		goto out;
	rc = tfs_ollama_add_layers(m, lay, o, err);
out:
	json_decref(root);
	free(manifest);
	return rc;
}

/* ==== the format's reading operations (its table: ollama_write.c) ==== */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A manifest (JSON with a "schemaVersion" near its start), or a source that is no path but
 * may be a model reference ("llama3:8b"); one that looks like a file name (a known
 * extension, or starting with / . ~) never is one. */
int tfs_ollama_probe(const tfs_probe *p, tfs_error *err)
{
	const char *s = p->source;
	(void)err;
	if (!p->st)
		return s[0] != '/' && s[0] != '.' && s[0] != '~' && !ends_with(s, ".gguf") &&
		       !ends_with(s, ".safetensors") && !ends_with(s, ".json") ? TFS_PROBE_YES
									   : TFS_PROBE_NO;
	if (S_ISDIR(p->st->st_mode) || !(ends_with(s, ".json") || p->head[0] == '{'))
		return TFS_PROBE_NO;
	return p->n > 0 && strstr(p->head, "\"schemaVersion\"") ? TFS_PROBE_YES : TFS_PROBE_NO;
}

/* The reader's error, said in the user's terms where the source was a guess: a missing
 * dir/file is called one, unless it names a tag (host/ns/model:tag); a model that exists,
 * with another tag, keeps the error listing its tags. */
int tfs_ollama_open_probed(tfs_model *m, const tfs_probe *p, const tfs_open_opts *o,
			   tfs_error *err)
{
	int rc = tfs_ollama_open(m, p->source, o, err);
	const char *slash = strrchr(p->source, '/');
	bool maybe_file = !p->st && slash && !strchr(slash, ':');
	if (maybe_file && (rc == TFS_E_NOTFOUND || rc == TFS_E_INVALID) &&
	    !(err && strstr(err->msg, "; its tags are: ")))
		return tfs_error_set(err, rc, "%s: no such file (nor %s)", p->source,
				     rc == TFS_E_NOTFOUND ? "an Ollama model of that name"
							  : "a valid Ollama model name");
	return rc;
}
