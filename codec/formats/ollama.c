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
 * formats.h).
 */
#include "layout.h"
#include "dtype.h"
#include "remote.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sys/mman.h>

#define MT_PREFIX "application/vnd.ollama.image."
#define MT_MODEL MT_PREFIX "model"
#define MT_TENSOR MT_PREFIX "tensor"
#define MT_JSON MT_PREFIX "json"
#define MT_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

#define HASH_ALWAYS_BELOW (16ull << 20)   /* small non-weight layers hashed at every open */
#define PROGRESS_ABOVE (64ull << 20)      /* blobs that report progress when verified */
#define HASH_CHUNK (8ull << 20)

/* ==== model names (ollama types/model/name.go) ==== */

typedef struct {
	char host[351], ns[81], model[81], tag[81];
} ol_name;

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
static const char *last_slash(const char *s, const char *end)
{
	while (end > s)
		if (*--end == '/')
			return end;
	return NULL;
}

/* [scheme://][host/][namespace/]model[:tag], defaults registry.ollama.ai/library/?:latest. */
static int parse_name(ol_name *n, const char *ref, tfs_error *err)
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

	const char *p = last_slash(s, end);
	what = "model";
	if (!set_part(n->model, sizeof(n->model), p ? p + 1 : s, (size_t)(end - (p ? p + 1 : s)),
		      false, false))
		goto bad;
	if (!p)
		return 0;
	end = p;
	p = last_slash(s, end);
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

static char *join3(const char *a, const char *b, const char *c)
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
	char *p = join3(dir, part, NULL);
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
			p = join3(dir, de->d_name, NULL);
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
	return join3(home, ".ollama", "models");
}

/* ==== the layout (m->priv) ==== */

static void layer_free(tfs_ol_layer *l)
{
	free(l->media_type);
	free(l->digest);
	free(l->name);
	free(l->from);
}

static void layout_free(void *p)
{
	tfs_ol_layout *l = p;
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
static int parse_layer(tfs_ol_layer *l, const json_t *v, const char *file, const char *what,
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

/* ==== blobs ==== */

static void hex32(char out[65], const unsigned char *md)
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[md[i] >> 4];
		out[2 * i + 1] = hx[md[i] & 15];
	}
	out[64] = '\0';
}

/* Checks the sha256 of source si against the digest (hex at digest + 7). */
static int check_sha256(const tfs_model *m, int32_t si, const char *digest,
			const tfs_open_opts *o, const char *manifest, tfs_error *err)
{
	const tfs_source *s = &m->src[si];
	const char *blob = tfs_basename(s->path);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	bool report = o && o->progress && s->size > PROGRESS_ABOVE;

	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: cannot set up sha256", blob);
	}
	/* a remote blob's bytes come through the block cache, a chunk at a time */
	size_t cap = s->size < HASH_CHUNK ? (size_t)s->size : HASH_CHUNK;
	uint8_t *buf = s->remote ? malloc(cap ? cap : 1) : NULL;
	if (s->remote && !buf && s->size) {
		EVP_MD_CTX_free(ctx);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", blob);
	}
	for (uint64_t done = 0; done < s->size;) {
		uint64_t n = s->size - done < HASH_CHUNK ? s->size - done : HASH_CHUNK;
		int upd;
		if (s->remote) {
			int rc = tfs_source_pread(s, buf, n, done, err);
			if (rc) {
				free(buf);
				EVP_MD_CTX_free(ctx);
				return rc;
			}
			upd = EVP_DigestUpdate(ctx, buf, (size_t)n);
		} else {
			tfs_source_advise(m, si, done, n, MADV_WILLNEED);
			upd = EVP_DigestUpdate(ctx, s->map + done, (size_t)n);
			tfs_source_advise(m, si, done, n, MADV_DONTNEED);
		}
		if (upd != 1) {
			free(buf);
			EVP_MD_CTX_free(ctx);
			return tfs_error_set(err, TFS_E_IO, "%s: sha256 failed", blob);
		}
		done += n;
		if (report)
			o->progress(o->progress_ctx, blob, done, s->size);
	}
	free(buf);
	int ok = EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	if (ok != 1 || mdlen != 32)
		return tfs_error_set(err, TFS_E_IO, "%s: sha256 failed", blob);
	char hex[65];
	hex32(hex, md);
	if (strcasecmp(hex, digest + 7) != 0)
		return tfs_error_set(err, TFS_E_DIGEST,
				     "%s: blob %s is corrupt: its sha256 is %s, the manifest says %s; "
				     "refusing to open it", manifest, blob, hex, digest + 7);
	return 0;
}

static int check_blob(tfs_model *m, tfs_ol_layout *lay, tfs_ol_layer *l, bool always_hash,
		      const tfs_open_opts *o, const char *name, tfs_error *err);

/* Opens (once per digest) the blob of layer l, checks its size and, when due, its sha256. */
static int open_blob(tfs_model *m, tfs_ol_layout *lay, tfs_ol_layer *l, bool always_hash,
		     const tfs_open_opts *o, tfs_error *err)
{
	char name[80];
	snprintf(name, sizeof(name), "sha256-%s", l->digest + 7);
	for (size_t i = 0; i < m->n_src; i++) {
		if (strcasecmp(m->src[i].label, l->digest) == 0) {
			l->src = (int32_t)i;
			break;
		}
	}
	if (l->src >= 0) {
		/* a blob named again: by another layer, which must not give it another size */
		const tfs_source *s = &m->src[l->src];
		if (s->size != l->size)
			return tfs_error_set(err, TFS_E_DIGEST,
					     "%s: blob %s is %llu bytes, the manifest says %llu; "
					     "refusing to open it", lay->manifest_path, name,
					     (unsigned long long)s->size, (unsigned long long)l->size);
		return 0;
	}
	int rc;
	if (lay->blob_base) { /* over HTTP(S): the registry's blob URL */
		char *url = NULL;
		if (asprintf(&url, "%s%s", lay->blob_base, l->digest) < 0)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory",
					     lay->manifest_path);
		rc = tfs_model_add_remote_source(m, url, o, &l->src, err);
		free(url);
		if (rc)
			return rc;
		return check_blob(m, lay, l, always_hash, o, l->digest, err);
	}
	char *path = join3(lay->root, "blobs", name);
	if (!path)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", lay->manifest_path);
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT)
			rc = tfs_error_set(err, TFS_E_NOTFOUND, "%s: blob %s (layer %s) is missing: %s",
					   lay->manifest_path, name, l->media_type, path);
		else
			rc = tfs_error_sys(err, e, "%s: blob %s (layer %s): %s", lay->manifest_path,
					   name, l->media_type, path);
		free(path);
		return rc;
	}
	rc = tfs_model_add_source(m, path, l->digest, &l->src, err);
	free(path);
	if (rc)
		return rc;
	return check_blob(m, lay, l, always_hash, o, name, err);
}

/* An opened blob against its layer: its size, and when due its sha256. */
static int check_blob(tfs_model *m, tfs_ol_layout *lay, tfs_ol_layer *l, bool always_hash,
		      const tfs_open_opts *o, const char *name, tfs_error *err)
{
	const tfs_source *s = &m->src[l->src];
	if (s->size != l->size)
		return tfs_error_set(err, TFS_E_DIGEST,
				     "%s: blob %s is %llu bytes, the manifest says %llu; refusing to "
				     "open it", lay->manifest_path, name, (unsigned long long)s->size,
				     (unsigned long long)l->size);
	/* The small layers (template, params, license, config files...) are hashed at every
	 * open; weights (a GGUF model, tensor blobs, adapters, projectors) only with verify:
	 * a mount reads their headers, never all of their bytes. */
	bool weights = !strcmp(l->media_type, MT_MODEL) || !strcmp(l->media_type, MT_TENSOR) ||
		       !strcmp(l->media_type, MT_PREFIX "adapter") ||
		       !strcmp(l->media_type, MT_PREFIX "projector") ||
		       !strcmp(l->media_type, MT_PREFIX "draft");
	if (!always_hash && !(!weights && s->size < HASH_ALWAYS_BELOW) && !(o && o->verify))
		return 0;
	int rc = check_sha256(m, l->src, l->digest, o, lay->manifest_path, err);
	/* a remote blob's bytes came through the block cache: a bad copy there (a disk error,
	 * a file edited) is dropped and the blob fetched again, once, before it is blamed */
	if (rc == TFS_E_DIGEST && s->remote) {
		if ((rc = tfs_remote_forget(s->remote, err)))
			return rc;
		rc = check_sha256(m, l->src, l->digest, o, lay->manifest_path, err);
	}
	return rc;
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
	    !strncmp(s, TFS_OL_JSON_PREFIX, strlen(TFS_OL_JSON_PREFIX)))
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
		if (tfs_buf_printf(&enc, "%s%s", TFS_OL_JSON_PREFIX, b.data)) {
			tfs_buf_free(&b);
			return NULL;
		}
		tfs_buf_free(&b);
		return enc.data;
	}
	return b.data;
}

char *tfs_ol_json_name(const char *file)
{
	if (!strncmp(file, TFS_OL_JSON_PREFIX, strlen(TFS_OL_JSON_PREFIX)))
		file += strlen(TFS_OL_JSON_PREFIX);
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
static int push_numbered(tfs_model *m, const char *base, tfs_ol_layer *l, tfs_error *err)
{
	char name[128];
	snprintf(name, sizeof(name), "%s", base);
	for (unsigned i = 1; tfs_model_find_extra(m, name) >= 0; i++)
		snprintf(name, sizeof(name), "%s.%u", base, i);
	l->role = TFS_OL_EXTRA;
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

/* ==== MLX-quantized tensors ==== */

/* x/quant QuantizationParams: quant type -> mode, bits, default group. */
static void quant_params(const char *qt, tfs_qmode *mode, uint32_t *bits, uint32_t *group)
{
	if (!strcasecmp(qt, "nvfp4"))
		*mode = TFS_QMODE_NVFP4, *bits = 4, *group = 16;
	else if (!strcasecmp(qt, "mxfp4"))
		*mode = TFS_QMODE_MXFP4, *bits = 4, *group = 32;
	else if (!strcasecmp(qt, "mxfp8"))
		*mode = TFS_QMODE_MXFP8, *bits = 8, *group = 32;
	else if (!strcasecmp(qt, "int4") || !strcasecmp(qt, "fp4") || !strcasecmp(qt, "q4"))
		*mode = TFS_QMODE_AFFINE, *bits = 4, *group = 64;
	else if (!strcasecmp(qt, "int8") || !strcasecmp(qt, "fp8") || !strcasecmp(qt, "q8"))
		*mode = TFS_QMODE_AFFINE, *bits = 8, *group = 64;
	else
		*mode = TFS_QMODE_AFFINE, *bits = 8, *group = 32;
}

static bool common_group(int64_t g)
{
	return g == 16 || g == 32 || g == 64 || g == 128;
}

/* x/mlxrunner inferQuantTypeFromShapes: "int4"/"int8" and a group from the ratio of the
 * packed words to the scales per row; NULL when nothing fits. */
static const char *infer_quant(int64_t wcols, int64_t scols, const char *hint, int64_t *group)
{
	*group = 0;
	if (wcols <= 0 || scols <= 0 || wcols > INT64_MAX / 8)
		return NULL;
	int64_t g4 = wcols * 8 / scols, g8 = wcols * 4 / scols;
	bool h8 = hint && strchr(hint, '8'), h4 = hint && strchr(hint, '4');
	if (g4 == 32)
		return *group = 32, "int4";
	if (g8 == 64)
		return *group = 64, "int8";
	if (g4 == 64 && g8 == 32) {
		if (h8)
			return *group = 32, "int8";
		if (h4)
			return *group = 64, "int4";
	}
	if (common_group(g4) && !common_group(g8))
		return *group = g4, "int4";
	if (common_group(g8) && !common_group(g4))
		return *group = g8, "int8";
	return NULL;
}

/* Go strconv.Atoi as Ollama uses it: a bad or missing number is 0. */
static int64_t atoi_go(const json_t *v)
{
	if (!json_is_string(v))
		return 0;
	const char *s = json_string_value(v);
	int64_t x = 0;
	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (INT64_MAX - 9) / 10)
			return 0;
		x = x * 10 + (*s - '0');
	}
	return x;
}

static const char *meta_str(const json_t *meta, const char *key)
{
	const json_t *v = meta ? json_object_get(meta, key) : NULL;
	return json_is_string(v) && json_string_length(v) ? json_string_value(v) : NULL;
}

/* Index of tensor base+suffix if it came from the same blob ([first, end)), else -1. */
static long companion(const tfs_model *m, const char *base, const char *suffix, size_t first,
		      size_t end)
{
	char *n = malloc(strlen(base) + strlen(suffix) + 1);
	if (!n)
		return -1;
	strcpy(n, base);
	strcat(n, suffix);
	long j = tfs_model_find_tensor(m, n);
	free(n);
	return j >= 0 && (size_t)j >= first && (size_t)j < end ? j : -1;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_param_dtype(int dt)
{
	return dt == TFS_DT_BF16 || dt == TFS_DT_F16 || dt == TFS_DT_F32;
}

static uint64_t rows_of(const tfs_tensor *t)
{
	uint64_t r = 1;
	for (uint32_t d = 1; d < t->n_dims; d++)
		r *= (uint64_t)t->ne[d];
	return r;
}

/* Same rank and the same leading (row) dims as the packed tensor. */
static bool same_rows(const tfs_tensor *a, const tfs_tensor *b)
{
	if (a->n_dims != b->n_dims)
		return false;
	for (uint32_t d = 1; d < a->n_dims; d++)
		if (a->ne[d] != b->ne[d])
			return false;
	return true;
}

/*
 * Marks the packed tensors among [first, end) (pushed from one blob, whose
 * __metadata__ is meta) as MLX-quantized, after checking their companions'
 * shapes so that every later read stays in bounds.
 */
/* The quantization type and group of packed tensor t (its .scale sc): the blob metadata's
 * per-tensor keys, else its uniform ones, else inferred from the shapes as Ollama does.
 * NULL: not quantized. */
static const char *quant_of(const tfs_tensor *t, const tfs_tensor *sc, const json_t *meta,
			    int64_t *gs)
{
	size_t nl = strlen(t->name);
	char *key = malloc(nl + 16);
	const char *qt = NULL;
	*gs = 0;
	if (key) {
		sprintf(key, "%s.quant_type", t->name);
		qt = meta_str(meta, key);
		sprintf(key, "%s.group_size", t->name);
		*gs = atoi_go(meta ? json_object_get(meta, key) : NULL);
		free(key);
	}
	if (!qt)
		qt = meta_str(meta, "quant_type");
	if (!*gs)
		*gs = atoi_go(meta ? json_object_get(meta, "group_size") : NULL);
	int64_t inferred_gs = 0;
	const char *inferred = NULL;
	if (t->n_dims > 0 && sc->n_dims > 0)
		inferred = infer_quant(t->ne[0], sc->ne[0], qt, &inferred_gs);
	if (!*gs)
		*gs = inferred_gs;
	return qt ? qt : inferred;
}

/* The packed words and the scales' shape fit the quantization q: K values per row in whole
 * groups, scales [rows..., K / group]. */
static int check_packing(const tfs_tensor *t, const tfs_tensor *sc, const tfs_mlx_desc *q,
			 const char *qt, const char *blob, tfs_error *err)
{
	const char *name = t->name;
	if (t->dtype != TFS_DT_U32 || t->n_dims == 0 || t->ne[0] <= 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: quantized tensor '%s' must be U32 with at least one word "
				     "per row", blob, name);
	if (q->group == 0 || ((uint64_t)t->ne[0] * 32) % q->bits)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': %s with group %u does not fit %lld words per "
				     "row", blob, name, qt, q->group, (long long)t->ne[0]);
	uint64_t k = (uint64_t)t->ne[0] * 32 / q->bits;
	if (k % q->group)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': %llu values per row are not a whole number of "
				     "groups of %u", blob, name, (unsigned long long)k, q->group);
	if (!same_rows(t, sc) || (uint64_t)sc->ne[0] != k / q->group)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': its .scale shape does not match %llu rows of "
				     "%llu groups", blob, name, (unsigned long long)rows_of(t),
				     (unsigned long long)(k / q->group));
	return 0;
}

/* The companions of packed tensor i besides its .scale: affine's .bias (its scale and bias
 * dtypes), the fp modes' one-byte scales, nvfp4's optional .global_scale. */
static int link_companions(tfs_model *m, size_t i, const tfs_tensor *sc, tfs_mlx_desc *q,
			   const char *qt, size_t first, size_t end, const char *blob,
			   tfs_error *err)
{
	tfs_tensor *t = &m->t[i];
	const char *name = t->name;
	const tfs_dtype_info *sdi = tfs_dtype(sc->dtype);
	if (q->mode == TFS_QMODE_AFFINE) {
		if (!is_param_dtype(sc->dtype))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': affine scales must "
					     "be BF16, F16 or F32", blob, name);
		q->scale_dtype = sc->dtype;
		long bi = companion(m, name, ".bias", first, end);
		if (bi < 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': affine "
					     "quantization without its .bias", blob, name);
		const tfs_tensor *bt = &m->t[bi];
		if (!same_rows(t, bt) || bt->ne[0] != sc->ne[0] || !is_param_dtype(bt->dtype))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': its .bias does "
					     "not match its .scale (shape, or dtype not BF16/F16/F32)",
					     blob, name);
		q->bias_dtype = bt->dtype;
		t->q_bias = (int32_t)bi;
	} else {
		if (!sdi || sdi->block_elems != 1 || sdi->block_bytes != 1)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %s scales must be "
					     "one byte each", blob, name, qt);
		q->scale_dtype = TFS_DT_U8;
	}
	long gi = q->mode == TFS_QMODE_NVFP4 ? companion(m, name, ".global_scale", first, end) : -1;
	if (gi >= 0) {
		const tfs_tensor *g = &m->t[gi];
		uint64_t gn = 1;
		for (uint32_t d = 0; d < g->n_dims; d++)
			gn *= (uint64_t)g->ne[d];
		if (!is_param_dtype(g->dtype) || (gn != 1 && gn != rows_of(t)))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': .global_scale "
					     "must be F32/BF16/F16, one value or one per row", blob,
					     name);
		q->gscale_dtype = g->dtype;
		t->q_gscale = (int32_t)gi;
	}
	return 0;
}

static int setup_quant(tfs_model *m, size_t first, size_t end, const json_t *meta,
		       const char *blob, tfs_error *err)
{
	for (size_t i = first; i < end; i++) {
		const char *name = m->t[i].name;
		if (ends_with(name, ".scale") || ends_with(name, ".bias") ||
		    ends_with(name, ".global_scale"))
			continue;
		long si = companion(m, name, ".scale", first, end);
		if (si < 0)
			continue;
		const tfs_tensor *sc = &m->t[si];
		int64_t gs;
		const char *qt = quant_of(&m->t[i], sc, meta, &gs);
		if (!qt)
			continue; /* Ollama does not treat it as quantized either */
		tfs_mlx_desc q = { 0 };
		uint32_t defgroup;
		int rc;
		quant_params(qt, &q.mode, &q.bits, &defgroup);
		q.group = gs ? (gs > (1 << 24) ? 0 : (uint32_t)gs) : defgroup;
		if ((rc = check_packing(&m->t[i], sc, &q, qt, blob, err)) ||
		    (rc = link_companions(m, i, sc, &q, qt, first, end, blob, err)))
			return rc;
		m->t[i].q = q;
		m->t[i].q_scale = (int32_t)si;
	}
	return 0;
}

/* ==== opening ==== */

/* Finds the store of a manifest path: the directory above its last "manifests"
 * component (after realpath); <root>/manifests/<host>/<ns>/<model>/<tag> also names it. */
static int locate_store(tfs_ol_layout *lay, const char *path, tfs_error *err)
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
		char *p = de->d_name[0] != '.' ? join3(model_dir, de->d_name, NULL) : NULL;
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
static int resolve_ref(const char *ref, const tfs_open_opts *o,
		       char **manifest, tfs_error *err)
{
	ol_name n;
	int rc = parse_name(&n, ref, err);
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
			rc = tfs_error_set(err, TFS_E_NOTFOUND,
					   "%s: model %s/%s/%s:%s not found in the Ollama store %s%s%s",
					   ref, n.host, n.ns, n.model, n.tag, root,
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

static int read_manifest(tfs_model *m, tfs_ol_layout *lay, json_t **out, tfs_error *err)
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

static int add_layers(tfs_model *m, tfs_ol_layout *lay, const tfs_open_opts *o, tfs_error *err)
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
	if ((rc = open_blob(m, lay, &lay->config, true, o, err)))
		return rc;
	lay->config.role = TFS_OL_EXTRA;
	lay->config.extra = (int32_t)m->n_x;
	if ((rc = tfs_model_push_extra(m, "config.json", lay->config.media_type, lay->config.src,
				       0, lay->config.size, err)))
		return rc;

	for (size_t i = 0; i < lay->n_layers; i++) {
		tfs_ol_layer *l = &lay->layers[i];
		if ((rc = open_blob(m, lay, l, false, o, err)))
			return rc;
		if (!strcmp(l->media_type, MT_MODEL)) {
			l->role = TFS_OL_MODEL;
			if ((rc = tfs_gguf_read(m, l->src, err)))
				return rc;
		} else if (!strcmp(l->media_type, MT_TENSOR)) {
			json_t *meta = NULL;
			uint64_t hl;
			size_t before = m->n_t;
			l->role = TFS_OL_TENSOR;
			if ((rc = tfs_st_parse(m, l->src, &hl, &meta, err)))
				return rc;
			l->first_tensor = (uint32_t)before;
			l->n_tensors = (uint32_t)(m->n_t - before);
			rc = setup_quant(m, before, m->n_t, meta, m->src[l->src].path, err);
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
			l->role = TFS_OL_EXTRA;
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
	tfs_ol_layout *lay = calloc(1, sizeof(*lay));
	json_t *root = NULL;
	char *manifest = NULL;
	struct stat st;
	int rc;

	if (!lay)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", ref);
	lay->manifest_src = -1;
	lay->config.src = lay->config.extra = -1;
	m->priv = lay;
	m->priv_free = layout_free;

	if (stat(ref, &st) == 0 && S_ISREG(st.st_mode)) {
		rc = locate_store(lay, ref, err);
	} else {
		if ((rc = resolve_ref(ref, o, &manifest, err)))
			goto out;
		rc = locate_store(lay, manifest, err);
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
	if ((rc = read_manifest(m, lay, &root, err)))
		goto out;
	rc = add_layers(m, lay, o, err);
out:
	json_decref(root);
	free(manifest);
	return rc;
}

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
static bool registry_urls(const char *source, char **manifest, char **blobs, ol_name *n,
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
		const char *tag = mf + 11, *model = last_slash(path + 3, mf);
		const char *ns = model ? last_slash(path + 3, model) : NULL;
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
	    parse_name(n, source, &e) != 0 ||
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
	ol_name n;
	bool named;
	if (!registry_urls(source, &manifest, &blobs, &n, &named))
		return false;
	free(manifest);
	free(blobs);
	return true;
}

int tfs_ollama_open_registry(tfs_model *m, const char *source, const tfs_open_opts *o,
			     tfs_error *err)
{
	char *manifest, *blobs;
	ol_name n;
	bool named;
	json_t *root = NULL;

	if (!registry_urls(source, &manifest, &blobs, &n, &named))
		return 1;
	tfs_ol_layout *lay = calloc(1, sizeof(*lay));
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
	m->priv_free = layout_free;
	if (!(lay->host = strdup(n.host)) || !(lay->ns = strdup(n.ns)) ||
	    !(lay->model = strdup(n.model)) || !(lay->tag = strdup(n.tag)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	int64_t mtime = 0;
	int rc = tfs_remote_fetch_small(manifest, o, TFS_MAX_MANIFEST, MT_MANIFEST,
					&lay->manifest_buf, &lay->manifest_len, &mtime, err);
	if (rc == TFS_E_NOTFOUND && named)
		return 1; /* no such model there: maybe a file after all */
	if (rc)
		return rc;
	char *p = strdup(manifest);
	if (!p)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", source);
	free(m->path);
	m->path = p;
	if (!(rc = read_manifest(m, lay, &root, err))) {
		/* the model's times: the manifest's Last-Modified */
		m->src[lay->manifest_src].mtime_sec = mtime;
		rc = add_layers(m, lay, o, err);
	}
	json_decref(root);
	return rc;
}
