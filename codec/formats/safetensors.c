/*
 * safetensors.c - the safetensors format: a model of one file, or of a sharded set
 * described by model.safetensors.index.json (each file's header: safetensors_parse.c).
 *
 * Index layout: {"metadata": {...}, "weight_map": {"<tensor>": "<shard file name>"}}; the
 * shards sit beside it.
 */
#include "format.h"
#include "value.h"
#include "dtype.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

static const char lfs_magic[] = TFS_LFS_MAGIC;

/* ==== helpers ==== */

static char *path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *s = malloc(a + b + 2);
	if (!s)
		return NULL;
	memcpy(s, dir, a);
	s[a] = '/';
	memcpy(s + a + 1, name, b + 1);
	return s;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ==== layout (m->priv) ==== */

static void free_strv(char **v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void tfs_safetensors_layout_free(void *p)
{
	tfs_safetensors_layout *l = p;
	if (!l)
		return;
	for (size_t i = 0; i < l->n_shards; i++)
		free_strv(l->shards[i].meta_keys, l->shards[i].n_meta_keys);
	free(l->shards);
	free_strv(l->index_meta_keys, l->n_index_meta_keys);
	free(l->index_path);
	free(l->index_rest);
	free(l);
}

static int strv_push(char ***v, uint32_t *n, const char *s)
{
	char **nv = realloc(*v, sizeof(char *) * ((size_t)*n + 1));
	if (!nv)
		return TFS_E_NOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return TFS_E_NOMEM;
	(*n)++;
	return 0;
}

/* ==== metadata -> keys ==== */

/*
 * Adds key with an owned payload.  When the key exists already with the same type and
 * payload, nothing is added (*added false); a different value is an error.
 */
static int add_key(tfs_model *m, const char *key, uint32_t type, uint8_t *payload, uint64_t len,
		   const char *from, bool *added, tfs_error *err)
{
	*added = false;
	long j = tfs_model_find_kv(m, key);
	if (j >= 0) {
		const tfs_kv *kv = &m->kv[j];
		bool same = kv->type == type && kv->len == len && memcmp(kv->data, payload, len) == 0;
		free(payload);
		if (same)
			return 0;
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: metadata key '%s' differs from its value in an earlier "
				     "shard or the index", from, key);
	}
	int rc = tfs_model_push_kv(m, key, strlen(key), type, payload, len, err);
	if (rc) {
		free(payload);
		return rc;
	}
	m->kv[m->n_kv - 1].data_owned = true;
	*added = true;
	return 0;
}

static uint8_t *string_payload(const char *s, size_t n, uint64_t *len)
{
	uint8_t *p = malloc(8 + n);
	if (!p)
		return NULL;
	uint64_t l = n;
	memcpy(p, &l, 8);
	memcpy(p + 8, s, n);
	*len = 8 + n;
	return p;
}

/* A safetensors "__metadata__" object: every value a string. */
static int push_st_metadata(tfs_model *m, tfs_safetensors_shard *sh, const json_t *meta,
			    const char *file, tfs_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)meta, k, v) {
		uint64_t len;
		bool added;
		uint8_t *p = string_payload(json_string_value(v), json_string_length(v), &len);
		if (!p)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
		int rc = add_key(m, k, TFS_GGUF_STRING, p, len, file, &added, err);
		if (rc)
			return rc;
		if (strv_push(&sh->meta_keys, &sh->n_meta_keys, k))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	}
	return 0;
}

/* The index's "metadata": any JSON value, typed as described in formats.h. */
static int push_index_metadata(tfs_model *m, tfs_safetensors_layout *l, const json_t *meta,
			       const char *file, tfs_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)meta, k, v) {
		uint8_t *p = NULL;
		uint64_t len = 0;
		uint32_t type;
		bool added;
		if (json_is_null(v))
			continue;
		if (json_is_string(v)) {
			type = TFS_GGUF_STRING;
			p = string_payload(json_string_value(v), json_string_length(v), &len);
		} else if (json_is_integer(v)) {
			json_int_t x = json_integer_value(v);
			type = x < 0 ? TFS_GGUF_INT64 : TFS_GGUF_UINT64;
			if ((p = malloc(8)))
				memcpy(p, &x, 8), len = 8;
		} else if (json_is_real(v)) {
			double x = json_real_value(v);
			type = TFS_GGUF_FLOAT64;
			if ((p = malloc(8)))
				memcpy(p, &x, 8), len = 8;
		} else if (json_is_boolean(v)) {
			type = TFS_GGUF_BOOL;
			if ((p = malloc(1)))
				p[0] = json_is_true(v), len = 1;
		} else {
			char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			type = TFS_GGUF_STRING;
			if (s)
				p = string_payload(s, strlen(s), &len);
			free(s);
		}
		if (!p)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
		int rc = add_key(m, k, type, p, len, file, &added, err);
		if (rc)
			return rc;
		if (strv_push(&l->index_meta_keys, &l->n_index_meta_keys, k))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	}
	return 0;
}

/* ==== opening ==== */

/* Reads source src (of file path) as one more shard. */
static int read_shard(tfs_model *m, tfs_safetensors_layout *l, int32_t src, const char *path,
		      tfs_error *err)
{
	int rc;
	tfs_safetensors_shard *ns = realloc(l->shards, sizeof(*ns) * (l->n_shards + 1));
	if (!ns)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
	l->shards = ns;
	tfs_safetensors_shard *sh = &l->shards[l->n_shards++];
	memset(sh, 0, sizeof(*sh));
	sh->src = src;

	json_t *meta = NULL;
	size_t before = m->n_t;
	if ((rc = tfs_safetensors_parse(m, src, &sh->header_len, &meta, err)))
		return rc;
	sh->n_tensors = (uint32_t)(m->n_t - before);
	if (meta) {
		sh->has_metadata = true;
		rc = push_st_metadata(m, sh, meta, path, err);
		json_decref(meta);
	}
	return rc;
}

/* Adds the file at path as a source (label: its file name) and reads it as one shard. */
static int open_shard(tfs_model *m, tfs_safetensors_layout *l, const char *path, tfs_error *err)
{
	int32_t src;
	int rc = tfs_model_add_source(m, path, tfs_basename(path), &src, err);
	return rc ? rc : read_shard(m, l, src, path, err);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool valid_shard_name(const char *s)
{
	return s[0] && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/');
}

/* The index document (*root) parsed from text (of index_path), checked: a JSON object with
 * a "weight_map" object and, if any, a "metadata" object. */
static int parse_index(const char *index_path, const uint8_t *text, uint64_t len, json_t **root,
		       tfs_error *err)
{
	json_error_t je;
	int rc = 0;
	*root = NULL;
	if (len >= sizeof(lfs_magic) - 1 && memcmp(text, lfs_magic, sizeof(lfs_magic) - 1) == 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: is a Git LFS pointer, not the model: run git lfs pull",
				     index_path);
	if (!(*root = json_loadb((const char *)text, (size_t)len, JSON_REJECT_DUPLICATES, &je)))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: invalid JSON: %s (line %d, column %d)",
				     index_path, je.text, je.line, je.column);
	json_t *meta = json_object_get(*root, "metadata");
	if (!json_is_object(*root) || !json_is_object(json_object_get(*root, "weight_map")))
		rc = tfs_error_set(err, TFS_E_FORMAT,
				   "%s: not a safetensors index (no \"weight_map\" object)", index_path);
	else if (meta && !json_is_object(meta) && !json_is_null(meta))
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: \"metadata\" is not an object",
				   index_path);
	if (rc) {
		json_decref(*root);
		*root = NULL;
	}
	return rc;
}

/* The distinct shard file names of the weight map, each checked, sorted (names borrowed
 * from wm; *out allocated, *n of them with repeats). */
static int shard_names(json_t *wm, const char *index_path, const char ***out, size_t *n,
		       tfs_error *err)
{
	size_t nw = json_object_size(wm), nn = 0;
	const char **names = calloc(nw ? nw : 1, sizeof(*names));
	const char *tk;
	json_t *tv;
	if (!names)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", index_path);
	json_object_foreach(wm, tk, tv) {
		if (!json_is_string(tv) || !valid_shard_name(json_string_value(tv)) ||
		    strlen(json_string_value(tv)) != json_string_length(tv)) {
			free(names);
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: weight_map entry of tensor '%s' is not a file name in "
					     "the index's directory", index_path, tk);
		}
		if (nn < nw)
			names[nn++] = json_string_value(tv);
	}
	qsort(names, nn, sizeof(*names), str_cmp);
	*out = names;
	*n = nn;
	return 0;
}

/* The weight_map and the shards agree, one to one. */
static int check_weight_map(const tfs_model *m, json_t *wm, const char *index_path,
			    tfs_error *err)
{
	const char *tk;
	json_t *tv;
	json_object_foreach(wm, tk, tv) {
		long j = tfs_model_find_tensor(m, tk);
		if (j < 0)
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: weight_map lists tensor '%s' in %s, but %s has no such "
					     "tensor", index_path, tk, json_string_value(tv),
					     json_string_value(tv));
		const char *in = m->src[m->t[j].src].label;
		if (strcmp(in, json_string_value(tv)) != 0)
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: weight_map puts tensor '%s' in %s, but it is in %s",
					     index_path, tk, json_string_value(tv), in);
	}
	for (size_t i = 0; i < m->n_t; i++)
		if (!json_object_get(wm, m->t[i].name))
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: tensor '%s' of %s is not in the weight_map",
					     index_path, m->t[i].name, m->src[m->t[i].src].label);
	return 0;
}

/* The index's text without its weight_map, kept for the writer. */
static int keep_index(tfs_safetensors_layout *l, json_t *root, const char *index_path,
		      tfs_error *err)
{
	l->index_path = strdup(index_path);
	json_t *rest = json_deep_copy(root);
	if (rest) {
		json_object_del(rest, "weight_map");
		l->index_rest = json_dumps(rest, JSON_COMPACT);
		json_decref(rest);
	}
	if (!l->index_path || !l->index_rest)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", index_path);
	return 0;
}

int tfs_safetensors_open_index(tfs_model *m, const char *index_path, const uint8_t *text,
			       uint64_t len, tfs_safetensors_shard_opener opener, void *ctx,
			       tfs_error *err)
{
	const char **names = NULL;
	json_t *root = NULL;
	size_t nn = 0;
	int rc;
	tfs_safetensors_layout *l = calloc(1, sizeof(*l));
	if (!l)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", index_path);
	m->priv = l;
	if ((rc = parse_index(index_path, text, len, &root, err)))
		return rc;
	json_t *wm = json_object_get(root, "weight_map"), *meta = json_object_get(root, "metadata");
	if ((rc = shard_names(wm, index_path, &names, &nn, err)) ||
	    (rc = keep_index(l, root, index_path, err)))
		goto out;
	if (json_is_object(meta) && (rc = push_index_metadata(m, l, meta, index_path, err)))
		goto out;
	for (size_t i = 0; i < nn; i++) {
		int32_t src;
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		if ((rc = opener(ctx, m, names[i], &src, err)) ||
		    (rc = read_shard(m, l, src, m->src[src].path, err)))
			goto out;
	}
	rc = check_weight_map(m, wm, index_path, err);
out:
	free(names);
	json_decref(root);
	return rc;
}

/* A local shard: the file of that name beside the index (ctx: the index's directory). */
static int open_local_shard(void *ctx, tfs_model *m, const char *name, int32_t *src,
			    tfs_error *err)
{
	char *path = path_join(ctx, name);
	if (!path)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", name);
	int rc = tfs_model_add_source(m, path, name, src, err);
	free(path);
	return rc;
}

static int open_sharded(tfs_model *m, const char *index_path, tfs_error *err)
{
	uint8_t *text = NULL;
	uint64_t len = 0;
	char *dir = dir_of(index_path);
	int rc = dir ? tfs_read_small_file(index_path, TFS_MAX_ST_HEADER, &text, &len, err)
		     : tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", index_path);
	if (!rc)
		rc = tfs_safetensors_open_index(m, index_path, text, len, open_local_shard, dir,
						err);
	free(text);
	free(dir);
	return rc;
}

static int set_model_path(tfs_model *m, const char *path, tfs_error *err)
{
	if (strcmp(m->path, path) == 0)
		return 0;
	char *p = strdup(path);
	if (!p)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
	free(m->path);
	m->path = p;
	return 0;
}

int tfs_safetensors_open_src(tfs_model *m, int32_t src, tfs_error *err)
{
	tfs_safetensors_layout *l = calloc(1, sizeof(*l));
	if (!l)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	m->priv = l;
	return read_shard(m, l, src, m->src[src].path, err);
}

int tfs_safetensors_open(tfs_model *m, const char *path, tfs_error *err)
{
	char *resolved = NULL;
	struct stat st;
	int rc;

	if (stat(path, &st) < 0)
		return tfs_error_sys(err, errno, "%s", path);
	if (S_ISDIR(st.st_mode)) {
		resolved = path_join(path, ST_INDEX_NAME);
		if (resolved && stat(resolved, &st) < 0) {
			free(resolved);
			resolved = path_join(path, ST_SINGLE_NAME);
			if (resolved && stat(resolved, &st) < 0) {
				free(resolved);
				return tfs_error_set(err, TFS_E_NOTFOUND,
						     "%s: directory holds neither " ST_INDEX_NAME
						     " nor " ST_SINGLE_NAME, path);
			}
		}
		if (!resolved)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
		path = resolved;
	}
	if ((rc = set_model_path(m, path, err)))
		goto out;

	if (ends_with(path, ".json")) {
		rc = open_sharded(m, path, err);
		goto out;
	}
	tfs_safetensors_layout *l = calloc(1, sizeof(*l));
	if (!l) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
		goto out;
	}
	m->priv = l;
	rc = open_shard(m, l, path, err);
out:
	free(resolved);
	return rc;
}

/* ==== the format's reading operations (its table: safetensors_write.c) ==== */

/* A directory (holding model.safetensors.index.json), an index.json of a sharded set, a
 * .safetensors file; any other file is tried as one (a guess). */
int tfs_safetensors_probe(const tfs_probe *p, tfs_error *err)
{
	(void)err;
	if (!p->st)
		return TFS_PROBE_NO;
	if (S_ISDIR(p->st->st_mode) || ends_with(p->source, ".json") || p->head[0] == '{')
		return TFS_PROBE_YES;
	return ends_with(p->source, ".safetensors") ? TFS_PROBE_YES : TFS_PROBE_GUESS;
}

/* The reader's error, said in the user's terms where the source was a guess. */
int tfs_safetensors_open_probed(tfs_model *m, const tfs_probe *p, const tfs_open_opts *o,
				tfs_error *err)
{
	int rc = tfs_safetensors_open(m, p->source, err);
	(void)o;
	if (rc == TFS_E_FORMAT && err && tfs_safetensors_probe(p, NULL) == TFS_PROBE_GUESS) {
		char why[TFS_ERRMSG_MAX];
		snprintf(why, sizeof(why), "%s", err->msg);
		tfs_error_set(err, rc, "%s: not a GGUF, safetensors or Ollama manifest file "
			      "(as safetensors: %s)", p->source, why);
	}
	return rc;
}

static int check_string_kv(const tfs_model *m, const char *key, uint32_t type,
			   const uint8_t *data, uint64_t len, tfs_error *err)
{
	/* safetensors __metadata__: strings only */
	if (type != TFS_GGUF_STRING)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: key '%s': safetensors metadata values are strings; this "
				     "value has GGUF type %u", m->path, key, type);
	if (!tfs_utf8_valid((const char *)data + 8, (size_t)(len - 8)))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: key '%s': the value is not valid UTF-8, which a safetensors "
				     "header requires", m->path, key);
	return 0;
}

int tfs_safetensors_check_kv(const tfs_model *m, const char *key, uint32_t type,
			     const uint8_t *data, uint64_t len, tfs_error *err)
{
	/* a sharded set's index "metadata" holds JSON scalars too (safetensors_write.c) */
	const tfs_safetensors_layout *l = m->priv;
	if (l && l->index_path && type != TFS_GGUF_ARRAY && type != TFS_GGUF_STRING)
		return 0;
	return check_string_kv(m, key, type, data, len, err);
}
