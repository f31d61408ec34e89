/*
 * write.c - changing a model, and writing it back atomically.
 *
 * Changes never touch a source: a changed value is owned by the model, a
 * tensor's or an extra file's new bytes live in a file of their own, added as
 * a new source.  Slots are never removed, only marked deleted, so indices the
 * FUSE layer holds stay valid; the name maps only hold live names.
 *
 * Writing goes through a "commit": every output file is first written to a
 * temporary beside its final name (".<name>.tensorfs-tmp.XXXXXX"), fsynced and
 * validated with the reader; only then are the temporaries renamed over their
 * final names, in the order they were added (the file that makes the set
 * consistent - the GGUF file, an index.json, a manifest - last), and each
 * directory fsynced.  A failure before the renames removes the temporaries
 * and leaves every output untouched.
 */
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#endif
#include "formats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>



/* True when keys and tensors are written as GGUF: a GGUF file or the model layer of a
 * classic Ollama model (its reader ran tfs_gguf_read, which sets gguf_version). */
bool tfs_model_gguf_encoded(const tfs_model *m)
{
	return m->format == TFS_FMT_GGUF || (m->format == TFS_FMT_OLLAMA && m->gguf_version != 0);
}

bool tfs_utf8_valid(const char *str, size_t n)
{
	const uint8_t *s = (const uint8_t *)str;
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			k = 1, cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			k = 2, cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			k = 3, cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i <= k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		/* overlong forms, surrogates, beyond U+10FFFF */
		if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
			return false;
		i += k + 1;
	}
	return true;
}

/* The dtypes a safetensors header can name (SAFETENSORS_CHECKLIST.md, "Dtypes"). */
bool tfs_st_dtype_ok(int dtype)
{
	switch (dtype) {
	case TFS_DT_F32: case TFS_DT_F16: case TFS_DT_BF16: case TFS_DT_F64:
	case TFS_DT_I8: case TFS_DT_I16: case TFS_DT_I32: case TFS_DT_I64:
		return true;
	default:
		return dtype >= TFS_DT_BOOL && dtype < TFS_DT_END;
	}
}

/* A name the user gives to a key, tensor or file. */
static int check_new_name(const tfs_model *m, const char *name, const char *what, bool tensor,
			  tfs_error *err)
{
	size_t len = strlen(name);
	if (len == 0)
		return tfs_error_set(err, TFS_E_INVALID, "%s: empty %s name", m->path, what);
	if (len > TFS_MAX_NAME)
		return tfs_error_set(err, TFS_E_INVALID, "%s: %s name of %zu bytes is too long",
				     m->path, what, len);
	if (tensor && tfs_model_gguf_encoded(m) && len >= 64)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: tensor name '%s' is %zu bytes long; GGUF (ggml) allows at "
				     "most 63", m->path, name, len);
	if (!tfs_model_gguf_encoded(m) && !tfs_utf8_valid(name, len))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: %s name '%s' is not valid UTF-8, which a safetensors "
				     "header requires", m->path, what, name);
	return 0;
}

/* Whether key may hold this value in m's format. */
static int check_kv(const tfs_model *m, const char *key, uint32_t type, const uint8_t *data,
		    uint64_t len, tfs_error *err)
{
	tfs_error e2 = { 0 };
	if (!data || tfs_value_check(type, data, len, &e2)) {
		const char *why = data ? e2.msg : "no payload";
		return tfs_error_set(err, TFS_E_INVALID, "%s: key '%s': invalid value: %s", m->path,
				     key, why);
	}
	if (tfs_model_gguf_encoded(m)) {
		if (strcmp(key, "general.alignment") == 0) {
			uint32_t a = type == TFS_GGUF_UINT32 && len == 4 ? tfs_le32(data) : 0;
			if (type != TFS_GGUF_UINT32)
				return tfs_error_set(err, TFS_E_INVALID,
						     "%s: general.alignment must be of type uint32",
						     m->path);
			if (a == 0 || (a & (a - 1)))
				return tfs_error_set(err, TFS_E_INVALID,
						     "%s: general.alignment %u is not a power of two",
						     m->path, a);
		}
		return 0;
	}
	/* a sharded set's index "metadata" holds JSON scalars too (safetensors_write.c) */
	const tfs_st_layout *l = m->format == TFS_FMT_SAFETENSORS ? m->priv : NULL;
	if (l && l->index_path && type != TFS_GGUF_ARRAY && type != TFS_GGUF_STRING)
		return 0;
	/* safetensors __metadata__ (and Ollama per-tensor blobs): strings only */
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

/* ==== changing a model ==== */

int tfs_model_set_kv(tfs_model *m, const char *key, uint32_t type, uint8_t *data, uint64_t len,
		     tfs_error *err)
{
	int rc;
	if ((rc = check_new_name(m, key, "key", false, err)) ||
	    (rc = check_kv(m, key, type, data, len, err))) {
		free(data);
		return rc;
	}
	long i = tfs_model_find_kv(m, key);
	if (i < 0) {
		if ((rc = tfs_model_push_kv(m, key, strlen(key), type, data, len, err))) {
			free(data);
			return rc;
		}
		i = (long)m->n_kv - 1;
	} else {
		tfs_kv *kv = &m->kv[i];
		free(kv->owned);
		kv->type = type;
		kv->data = data;
		kv->len = len;
	}
	m->kv[i].owned = data;
	m->changed = true;
	return 0;
}

int tfs_model_del_kv(tfs_model *m, const char *key, tfs_error *err)
{
	long i = tfs_model_find_kv(m, key);
	if (i < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no key '%s'", m->path, key);
	tfs_kv *kv = &m->kv[i];
	tfs_strmap_del(&m->kv_map, key, strlen(key), tfs_kv_name, m);
	kv->deleted = true;
	m->changed = true;
	return 0;
}

/* Renames slot i (whose name lives at *namep) in map from `from` to `to`. */
static int rename_slot(tfs_model *m, tfs_strmap *map, tfs_strmap_name_fn fn, char **namep,
		       long i, const char *to, tfs_error *err)
{
	char *nn = strdup(to);
	if (!nn)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	char *old = *namep;
	tfs_strmap_del(map, old, strlen(old), fn, m);
	*namep = nn;
	if (tfs_strmap_put(map, nn, strlen(nn), (uint32_t)i, fn, m)) {
		*namep = old;
		free(nn);
		/* the old name's tombstone left room for it: this cannot grow the map */
		tfs_strmap_put(map, old, strlen(old), (uint32_t)i, fn, m);
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	}
	free(old);
	m->changed = true;
	return 0;
}

int tfs_model_rename_kv(tfs_model *m, const char *from, const char *to, tfs_error *err)
{
	long i = tfs_model_find_kv(m, from);
	int rc;
	if (i < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no key '%s'", m->path, from);
	if (strcmp(from, to) == 0)
		return 0;
	if ((rc = check_new_name(m, to, "key", false, err)))
		return rc;
	if (tfs_model_find_kv(m, to) >= 0)
		return tfs_error_set(err, TFS_E_EXISTS, "%s: key '%s' already exists", m->path, to);
	const tfs_kv *kv = &m->kv[i];
	if ((rc = check_kv(m, to, kv->type, kv->data, kv->len, err)))
		return rc;
	return rename_slot(m, &m->kv_map, tfs_kv_name, &m->kv[i].name, i, to, err);
}

int tfs_model_rename_tensor(tfs_model *m, const char *from, const char *to, tfs_error *err)
{
	long i = tfs_model_find_tensor(m, from);
	int rc;
	if (i < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no tensor '%s'", m->path, from);
	if (strcmp(from, to) == 0)
		return 0;
	if ((rc = check_new_name(m, to, "tensor", true, err)))
		return rc;
	if (tfs_model_find_tensor(m, to) >= 0)
		return tfs_error_set(err, TFS_E_EXISTS, "%s: tensor '%s' already exists", m->path,
				     to);
	return rename_slot(m, &m->t_map, tfs_t_name, &m->t[i].name, i, to, err);
}

int tfs_model_del_tensor(tfs_model *m, const char *name, tfs_error *err)
{
	long i = tfs_model_find_tensor(m, name);
	if (i < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no tensor '%s'", m->path, name);
	tfs_strmap_del(&m->t_map, name, strlen(name), tfs_t_name, m);
	m->t[i].deleted = true;
	m->changed = true;
	return 0;
}

/* Checks dtype and shape for m's format and computes the bytes they need. */
static int check_tensor_spec(const tfs_model *m, const char *name, int dtype, uint32_t n_dims,
			     const int64_t *ne, uint64_t *nbytes, tfs_error *err)
{
	const tfs_dtype_info *d = tfs_dtype(dtype);
	bool gguf = tfs_model_gguf_encoded(m);
	if (!d || !d->block_elems)
		return tfs_error_set(err, TFS_E_INVALID, "%s: tensor '%s': unknown dtype %d",
				     m->path, name, dtype);
	if (gguf && dtype >= TFS_DT_GGML_COUNT)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: tensor '%s': dtype %s cannot be stored in a GGUF file",
				     m->path, name, d->name);
	if (!gguf && !tfs_st_dtype_ok(dtype))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: tensor '%s': dtype %s cannot be stored in a safetensors file",
				     m->path, name, d->name);
	uint32_t max_dims = gguf ? 4 : TFS_MAX_DIMS;
	if (n_dims > max_dims)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: tensor '%s' has %u dimensions; at most %u are allowed",
				     m->path, name, n_dims, max_dims);
	uint64_t nel = 1;
	for (uint32_t k = 0; k < n_dims; k++) {
		if (ne[k] < 0 || tfs_mul_overflow(nel, (uint64_t)ne[k], &nel) ||
		    nel > (uint64_t)INT64_MAX)
			return tfs_error_set(err, TFS_E_INVALID,
					     "%s: tensor '%s': invalid dimension %lld", m->path,
					     name, (long long)ne[k]);
	}
	if (gguf && n_dims > 0 && ne[0] % d->block_elems)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: tensor '%s': a row of %lld elements is not a multiple of "
				     "the %s block size %u", m->path, name, (long long)ne[0],
				     d->name, d->block_elems);
	tfs_error e2 = { 0 };
	if (tfs_dtype_nbytes(nbytes, dtype, nel, &e2))
		return tfs_error_set(err, TFS_E_INVALID, "%s: tensor '%s': %s", m->path, name,
				     e2.msg);
	return 0;
}

/*
 * Closes staged source si (its fd and mapping; the slot stays, indices are stable) when no
 * tensor or file refers to it: a tensor's older staged bytes, or a file the model refused.
 * A long-running writable mount would otherwise hold one fd and one mapping per commit.
 */
static void release_staged_source(tfs_model *m, int32_t si)
{
	if (si < 0 || (size_t)si >= m->n_src || !m->src[si].staged || m->src[si].fd < 0)
		return;
	for (size_t i = 0; i < m->n_t; i++)
		if (m->t[i].src == si)
			return;
	for (size_t i = 0; i < m->n_x; i++)
		if (m->x[i].src == si)
			return;
	tfs_source *s = &m->src[si];
	if (s->map)
		munmap((void *)s->map, s->size);
	close(s->fd);
	s->map = NULL;
	s->fd = -1;
	s->size = 0;
}

/* Tensor t's bytes are now [offset, +nbytes) of source si, of this dtype and shape. */
static void set_tensor_bytes(tfs_tensor *t, int dtype, uint32_t n_dims, const int64_t *ne,
			     uint64_t nbytes, int32_t si, uint64_t offset)
{
	bool same = t->dtype == dtype && t->n_dims == n_dims;
	for (uint32_t k = 0; same && k < n_dims; k++)
		same = t->ne[k] == ne[k];
	if (!same) {
		/* a new type or shape is no longer the packed half of an MLX triple */
		memset(&t->q, 0, sizeof(t->q));
		t->q_scale = t->q_bias = t->q_gscale = -1;
	}
	t->dtype = dtype;
	t->n_dims = n_dims;
	for (uint32_t k = 0; k < TFS_MAX_DIMS; k++)
		t->ne[k] = k < n_dims ? ne[k] : 1;
	t->nbytes = nbytes;
	t->src = si;
	t->offset = offset;
}

int tfs_model_set_tensor_file(tfs_model *m, const char *name, int dtype, uint32_t n_dims,
			      const int64_t *ne, const char *path, tfs_error *err)
{
	uint64_t nbytes;
	int32_t si;
	int rc;
	long i = tfs_model_find_tensor(m, name);
	if (i < 0 && (rc = check_new_name(m, name, "tensor", true, err)))
		return rc;
	if ((rc = check_tensor_spec(m, name, dtype, n_dims, ne, &nbytes, err)))
		return rc;
	if ((rc = tfs_model_add_source(m, path, NULL, &si, err)))
		return rc;
	m->src[si].staged = true;
	if (m->src[si].size != nbytes) {
		rc = tfs_error_set(err, TFS_E_INVALID,
				   "%s: tensor '%s': %llu bytes were written, but %s of this "
				   "shape needs %llu", m->path, name,
				   (unsigned long long)m->src[si].size, tfs_dtype(dtype)->name,
				   (unsigned long long)nbytes);
		release_staged_source(m, si);
		return rc;
	}
	tfs_tensor *t;
	int32_t old = -1;
	if (i < 0) {
		if ((rc = tfs_model_push_tensor(m, name, strlen(name), &t, err))) {
			release_staged_source(m, si);
			return rc;
		}
	} else {
		t = &m->t[i];
		old = t->src;
	}
	set_tensor_bytes(t, dtype, n_dims, ne, nbytes, si, 0);
	m->changed = true;
	release_staged_source(m, old);
	return 0;
}

/* The media type of an Ollama layer that a file of this name becomes. */
static int extra_media_type(char *out, size_t cap, const char *name)
{
	static const char *const known[] = { "template", "system", "params", "messages",
					     "license", "prompt", "adapter", "projector" };
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		if (strcmp(name, known[k]) == 0)
			return snprintf(out, cap, "application/vnd.ollama.image.%s", name);
	return snprintf(out, cap, "application/vnd.ollama.image.json");
}

/* The part of an Ollama media type after the last '.': "params", "template", "json"... */
static const char *media_kind(const char *media_type)
{
	const char *dot = strrchr(media_type, '.');
	return dot ? dot + 1 : media_type;
}

/* Whether a params value is of a kind Ollama's options take: a string, number, bool or
 * null, or an array of those (e.g. "stop": ["</s>", "<|eot_id|>"]). */
static bool params_value_ok(const json_t *v, bool in_array)
{
	if (json_is_string(v) || json_is_number(v) || json_is_boolean(v) || json_is_null(v))
		return true;
	if (!json_is_array(v) || in_array)
		return false;
	size_t k;
	json_t *e;
	json_array_foreach(v, k, e)
		if (!params_value_ok(e, true))
			return false;
	return true;
}

/*
 * Checks that the bytes of an Ollama layer of this media type are what Ollama accepts:
 * text layers (template, system, license, prompt) are UTF-8; params is a JSON object of
 * option values; messages a JSON array of {"role", "content"} objects; JSON layers and the
 * config a JSON object.  Weights (model, adapter, projector ...) are not looked into.
 */
int tfs_extra_check(const char *name, const char *media_type, const uint8_t *p, uint64_t n,
		    tfs_error *err)
{
	const char *kind = media_kind(media_type);
	bool text = !strcmp(kind, "template") || !strcmp(kind, "system") ||
		    !strcmp(kind, "license") || !strcmp(kind, "prompt");
	bool json = !strcmp(kind, "params") || !strcmp(kind, "messages") || !strcmp(kind, "json") ||
		    !strcmp(name, "config.json");
	if (text && !tfs_utf8_valid((const char *)p, (size_t)n))
		return tfs_error_set(err, TFS_E_INVALID, "layers/%s: not valid UTF-8 text", name);
	if (!json)
		return 0;
	json_error_t je;
	json_t *j = json_loadb((const char *)p, (size_t)n, JSON_REJECT_DUPLICATES, &je);
	const char *why = NULL;
	if (!j)
		return tfs_error_set(err, TFS_E_INVALID, "layers/%s: not valid JSON: %s (line %d)",
				     name, je.text, je.line);
	if (!strcmp(kind, "messages")) {
		size_t k;
		json_t *msg;
		if (!json_is_array(j))
			why = "must be a JSON array of {\"role\", \"content\"} messages";
		json_array_foreach(j, k, msg)
			if (!why && (!json_is_string(json_object_get(msg, "role")) ||
				     !json_is_string(json_object_get(msg, "content"))))
				why = "every message needs a \"role\" and a \"content\" string";
	} else if (!json_is_object(j)) {
		why = "must be a JSON object";
	} else if (!strcmp(kind, "params")) {
		const char *key;
		json_t *v;
		json_object_foreach(j, key, v)
			if (!why && !params_value_ok(v, false))
				why = "a parameter's value must be a string, number, bool or an "
				      "array of those";
	}
	json_decref(j);
	return why ? tfs_error_set(err, TFS_E_INVALID, "layers/%s: %s", name, why) : 0;
}

int tfs_model_set_extra_file(tfs_model *m, const char *name, const char *path, tfs_error *err)
{
	int32_t si;
	int rc;
	char mt[128];
	if (m->format != TFS_FMT_OLLAMA)
		return tfs_error_set(err, TFS_E_UNSUPPORTED,
				     "%s: only Ollama models hold extra files", m->path);
	long i = tfs_model_find_extra(m, name);
	if (i < 0 && (rc = check_new_name(m, name, "file", false, err)))
		return rc;
	if (i < 0)
		extra_media_type(mt, sizeof(mt), name);
	else
		snprintf(mt, sizeof(mt), "%s", m->x[i].media_type);
	if ((rc = tfs_model_add_source(m, path, NULL, &si, err)))
		return rc;
	m->src[si].staged = true;
	if ((rc = tfs_extra_check(name, mt, m->src[si].map, m->src[si].size, err))) {
		release_staged_source(m, si);
		return rc;
	}
	if (i < 0) {
		if ((rc = tfs_model_push_extra(m, name, mt, si, 0, m->src[si].size, err))) {
			release_staged_source(m, si);
			return rc;
		}
	} else {
		tfs_extra *x = &m->x[i];
		int32_t old = x->src;
		x->src = si;
		x->offset = 0;
		x->size = m->src[si].size;
		release_staged_source(m, old);
	}
	m->changed = true;
	return 0;
}

int tfs_model_del_extra(tfs_model *m, const char *name, tfs_error *err)
{
	long i = tfs_model_find_extra(m, name);
	if (i < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no file '%s'", m->path, name);
	tfs_strmap_del(&m->x_map, name, strlen(name), tfs_x_name, m);
	m->x[i].deleted = true;
	m->changed = true;
	return 0;
}

/*
 * The replacements behind a rename onto an existing name (`mv new old`): `to` keeps its
 * slot (its place in the file) and takes the bytes of `from` with the dtype and shape
 * given; `from` is deleted.  Checked in full before anything changes.
 */
int tfs_model_replace_tensor(tfs_model *m, const char *from, const char *to, int dtype,
			     uint32_t n_dims, const int64_t *ne, tfs_error *err)
{
	long a = tfs_model_find_tensor(m, from), b = tfs_model_find_tensor(m, to);
	uint64_t nbytes;
	int rc;
	if (a < 0 || b < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no tensor '%s'", m->path,
				     a < 0 ? from : to);
	if (a == b)
		return 0;
	if ((rc = check_tensor_spec(m, to, dtype, n_dims, ne, &nbytes, err)))
		return rc;
	tfs_tensor *src = &m->t[a], *dst = &m->t[b];
	if (src->nbytes != nbytes)
		return tfs_error_set(err, TFS_E_INVALID,
				     "tensors/%s: %llu bytes were given, but %s of this shape needs "
				     "%llu", to, (unsigned long long)src->nbytes,
				     tfs_dtype(dtype)->name, (unsigned long long)nbytes);
	int32_t old = dst->src;
	set_tensor_bytes(dst, dtype, n_dims, ne, nbytes, src->src, src->offset);
	tfs_strmap_del(&m->t_map, from, strlen(from), tfs_t_name, m);
	src->deleted = true;
	m->changed = true;
	release_staged_source(m, old);
	return 0;
}

int tfs_model_replace_extra(tfs_model *m, const char *from, const char *to, tfs_error *err)
{
	long a = tfs_model_find_extra(m, from), b = tfs_model_find_extra(m, to);
	int rc;
	if (a < 0 || b < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no file '%s'", m->path,
				     a < 0 ? from : to);
	if (a == b)
		return 0;
	tfs_extra *src = &m->x[a], *dst = &m->x[b];
	const tfs_source *s = &m->src[src->src];
	if (src->size && (!s->map || src->offset + src->size > s->size))
		return tfs_error_set(err, TFS_E_INVALID, "layers/%s: its bytes cannot be read", from);
	if ((rc = tfs_extra_check(to, dst->media_type, s->map ? s->map + src->offset : NULL,
				  src->size, err)))
		return rc;
	int32_t old = dst->src;
	dst->src = src->src;
	dst->offset = src->offset;
	dst->size = src->size;
	tfs_strmap_del(&m->x_map, from, strlen(from), tfs_x_name, m);
	src->deleted = true;
	m->changed = true;
	release_staged_source(m, old);
	return 0;
}

/* ==== I/O helpers (every call checked, EINTR and short writes handled) ==== */

static int write_error(tfs_error *err, int e, const char *path, uint64_t pos)
{
	if (e == ENOSPC || e == EDQUOT)
		return tfs_error_sys(err, e,
				     "%s: no space left for the new file (at offset %llu); nothing "
				     "was replaced", path, (unsigned long long)pos);
	return tfs_error_sys(err, e, "%s: write at offset %llu", path, (unsigned long long)pos);
}

int tfs_io_pwrite(int fd, const char *path, uint64_t pos, const void *p, size_t n,
		  tfs_error *err)
{
	const uint8_t *b = p;
	while (n) {
		size_t k = n > (1u << 30) ? (1u << 30) : n;
		ssize_t w = pwrite(fd, b, k, (off_t)pos);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return write_error(err, errno, path, pos);
		}
		if (w == 0)
			return write_error(err, ENOSPC, path, pos);
		b += w;
		n -= (size_t)w;
		pos += (uint64_t)w;
	}
	return 0;
}

int tfs_io_zeros(int fd, const char *path, uint64_t pos, uint64_t n, tfs_error *err)
{
	static const uint8_t zeros[4096];
	while (n) {
		size_t k = n > sizeof(zeros) ? sizeof(zeros) : (size_t)n;
		int rc = tfs_io_pwrite(fd, path, pos, zeros, k, err);
		if (rc)
			return rc;
		pos += k;
		n -= k;
	}
	return 0;
}

/* Reserves the file's final size up front, so a full disk fails at once and not after
 * copying gigabytes.  File systems without fallocate just skip it. */
int tfs_io_reserve(int fd, const char *path, uint64_t size, tfs_error *err)
{
	if (size == 0)
		return 0;
	if (size > (uint64_t)INT64_MAX)
		return tfs_error_set(err, TFS_E_INVALID, "%s: file of %llu bytes is too large", path,
				     (unsigned long long)size);
	for (;;) {
		if (fallocate(fd, 0, 0, (off_t)size) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
			return tfs_error_sys(err, errno,
					     "%s: cannot reserve %llu bytes for the new file; nothing "
					     "was replaced", path, (unsigned long long)size);
		return 0; /* EOPNOTSUPP, ENOSYS, EINVAL...: write without a reservation */
	}
}

#define COPY_CHUNK (64u << 20)
/*
 * No sync_file_range() in the copy loop, on purpose.  Measured on ext4 (virtio disk, 2
 * cores), 1.1 GiB: starting writeback after each 64 MiB chunk (SYNC_FILE_RANGE_WRITE) and
 * waiting for the chunk before it (WAIT_BEFORE) cut a standalone copy_file_range + fsync
 * from 1.71 to 1.28 s (best of 8), but the whole repack (`tensorfs unmount`,
 * scripts/bench-repack.sh with TENSORFS_B) came out 4-14% slower than without it in three
 * A/B runs.  16/32 MiB chunks measured the same as 64, 8 MiB slower.  The fsync dominates
 * (about 1.2 s at the disk's ~0.9 GB/s); the rest of the gap to `cp && sync` is freeing
 * the replaced file (see scripts/bench-repack.sh).
 */

int tfs_io_copy(int fd, const char *path, uint64_t pos, const tfs_model *m, int32_t si,
		uint64_t off, uint64_t len, const tfs_write_opts *o, uint64_t *done, uint64_t total,
		tfs_error *err)
{
	uint64_t end;
	if (si < 0 || (size_t)si >= m->n_src)
		return tfs_error_set(err, TFS_E_INVALID, "%s: no source %d", m->path, si);
	const tfs_source *s = &m->src[si];
	if (tfs_add_overflow(off, len, &end) || end > s->size)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: bytes [%llu, +%llu) lie past its end (%llu bytes): did it "
				     "change after it was opened?", s->path,
				     (unsigned long long)off, (unsigned long long)len,
				     (unsigned long long)s->size);
	bool kernel_copy = true;
	while (len) {
		size_t k = len > COPY_CHUNK ? COPY_CHUNK : (size_t)len;
		ssize_t r;
		if (kernel_copy) {
			loff_t in = (loff_t)off, out = (loff_t)pos;
			r = copy_file_range(s->fd, &in, fd, &out, k, 0);
			if (r < 0) {
				int e = errno;
				if (e == EINTR)
					continue;
				if (e == EXDEV || e == ENOSYS || e == EINVAL || e == EOPNOTSUPP ||
				    e == EBADF) {
					kernel_copy = false; /* fall back to writing from the map */
					continue;
				}
				if (e == EIO)
					return tfs_error_sys(err, e, "copying %s [%llu, +%zu) to %s",
							     s->path, (unsigned long long)off, k,
							     path);
				return write_error(err, e, path, pos);
			}
			if (r == 0)
				return tfs_error_set(err, TFS_E_FORMAT,
						     "%s: ended at offset %llu while copying from it: "
						     "did it change after it was opened?", s->path,
						     (unsigned long long)off);
		} else {
			r = pwrite(fd, s->map + off, k, (off_t)pos);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				return write_error(err, errno, path, pos);
			}
			if (r == 0)
				return write_error(err, ENOSPC, path, pos);
		}
		off += (uint64_t)r;
		pos += (uint64_t)r;
		len -= (uint64_t)r;
		if (done) {
			*done += (uint64_t)r;
			if (o && o->progress)
				o->progress(o->progress_ctx, "writing", *done, total);
		}
	}
	return 0;
}

/* fsyncs the directory holding path. */
int tfs_io_fsync_dir(const char *path, tfs_error *err)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	int fd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;
	if (fd < 0) {
		rc = tfs_error_sys(err, errno, "%s: open directory", dir);
	} else {
		if (fsync(fd) < 0 && errno != EINVAL)
			rc = tfs_error_sys(err, errno, "%s: fsync directory", dir);
		close(fd);
	}
	free(dir);
	return rc;
}

/* Test hook: TFS_TEST_CRASH_AT=<where> makes the process die there, as a kill -9 would. */
void tfs_test_crash_point(const char *where)
{
	const char *at = getenv("TFS_TEST_CRASH_AT");
	if (at && strcmp(at, where) == 0)
		_exit(9);
}

/* ==== commits: temporaries renamed over their final names ==== */

/*
 * A temporary is first an unnamed O_TMPFILE in its directory and gets its name only once
 * it is written and fsynced (tfs_io_tmpfile_link): a repack killed while it copies
 * gigabytes leaves nothing behind for anyone to clean up.  File systems without O_TMPFILE
 * get a named temporary at once (mkostemp), as before.
 */
int tfs_io_tmpfile_open(const char *dir, mode_t mode)
{
	int fd = open(dir[0] ? dir : "/", O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
	if (fd >= 0 && fchmod(fd, mode) < 0) { /* O_TMPFILE's mode is subject to the umask */
		close(fd);
		return -1;
	}
	return fd;
}

/* Gives the unnamed file fd a name made from tmpl ("...XXXXXX", the X's replaced in place). */
int tfs_io_tmpfile_link(int fd, char *tmpl, tfs_name_hook hook, void *hook_ctx, tfs_error *err)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char proc[64];
	size_t n = strlen(tmpl);
	if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX") != 0)
		return tfs_error_set(err, TFS_E_INVALID, "%s: bad temporary name", tmpl);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t r = (uint64_t)ts.tv_nsec * 6364136223846793005ull ^ (uint64_t)getpid() << 32 ^
		     (uint64_t)fd;
	for (int attempt = 0; attempt < 100; attempt++) {
		for (size_t k = n - 6; k < n; k++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			tmpl[k] = chars[(r >> 33) % (sizeof(chars) - 1)];
		}
		int rc = hook ? hook(hook_ctx, tmpl, err) : 0;
		if (rc)
			return rc;
		if (linkat(AT_FDCWD, proc, AT_FDCWD, tmpl, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			return tfs_error_sys(err, errno, "%s: cannot name the temporary file", tmpl);
	}
	return tfs_error_set(err, TFS_E_IO, "%s: no free temporary name", tmpl);
}

typedef struct {
	char *tmp, *final;
	int fd;           /* open until sealed */
	struct stat st;   /* the sealed temporary's identity */
	bool sealed, renamed;
	bool anon;        /* an O_TMPFILE not linked yet: tmp still ends in XXXXXX */
} commit_file;

struct tfs_commit {
	commit_file *f;
	size_t n, cap;
	tfs_name_hook hook;   /* told every temporary's name before it is created */
	void *hook_ctx;
};

void tfs_commit_set_name_hook(tfs_commit *c, tfs_name_hook hook, void *ctx)
{
	c->hook = hook;
	c->hook_ctx = ctx;
}

int tfs_commit_new(tfs_commit **out, tfs_error *err)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
}

/* Creates the temporary for final: ".<name>.tensorfs-tmp.XXXXXX" in final's directory, with
 * final's mode (0644 for a new file).  *fd stays the commit's until tfs_commit_seal; *tmp is
 * borrowed from the commit. */
int tfs_commit_add(tfs_commit *c, const char *final, int *fd, const char **tmp, tfs_error *err)
{
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 4;
		commit_file *p = realloc(c->f, ncap * sizeof(*p));
		if (!p)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		c->f = p;
		c->cap = ncap;
	}
	const char *base = tfs_basename(final);
	size_t dlen = (size_t)(base - final);
	int blen = (int)strnlen(base, 200); /* keep the temporary's name under NAME_MAX */
	commit_file *f = &c->f[c->n];
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (!(f->final = strdup(final)) ||
	    asprintf(&f->tmp, "%.*s.%.*s.tensorfs-tmp.XXXXXX", (int)dlen, final, blen, base) < 0) {
		free(f->final);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	char *dir = dlen ? strndup(final, dlen - 1) : strdup(".");
	if (!dir) {
		free(f->final);
		free(f->tmp);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	f->fd = tfs_io_tmpfile_open(dir, 0600);
	free(dir);
	f->anon = f->fd >= 0;
	if (!f->anon) {
		/* no O_TMPFILE here: the name exists from now on (told to the hook once known) */
		f->fd = mkostemp(f->tmp, O_CLOEXEC);
		if (f->fd >= 0 && c->hook) {
			int rc = c->hook(c->hook_ctx, f->tmp, err);
			if (rc) {
				close(f->fd);
				unlink(f->tmp);
				free(f->final);
				free(f->tmp);
				return rc;
			}
		}
	}
	if (f->fd < 0) {
		int rc = tfs_error_sys(err, errno, "%s: cannot create a temporary file", f->tmp);
		free(f->final);
		free(f->tmp);
		return rc;
	}
	struct stat st;
	mode_t mode = 0644;
	if (stat(final, &st) == 0) {
		mode = st.st_mode & 07777;
		if (fchown(f->fd, st.st_uid, st.st_gid) < 0) {
			/* not ours to give away: the new file belongs to us */
		}
	}
	if (fchmod(f->fd, mode) < 0) {
		int rc = tfs_error_sys(err, errno, "%s: chmod", f->tmp);
		close(f->fd);
		if (!f->anon)
			unlink(f->tmp);
		free(f->final);
		free(f->tmp);
		return rc;
	}
	c->n++;
	*fd = f->fd;
	*tmp = f->tmp;
	return 0;
}

int tfs_commit_seal(tfs_commit *c, tfs_error *err)
{
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->sealed)
			continue;
		if (fsync(f->fd) < 0)
			return tfs_error_sys(err, errno, "%s: fsync", f->tmp);
		if (f->anon) {
			int rc = tfs_io_tmpfile_link(f->fd, f->tmp, c->hook, c->hook_ctx, err);
			if (rc)
				return rc;
			f->anon = false;
		}
		if (fstat(f->fd, &f->st) < 0)
			return tfs_error_sys(err, errno, "%s: stat", f->tmp);
		int fd = f->fd;
		f->fd = -1;
		if (close(fd) < 0 && errno != EINTR)
			return tfs_error_sys(err, errno, "%s: close", f->tmp);
		int rc = tfs_io_fsync_dir(f->tmp, err);
		if (rc)
			return rc;
		f->sealed = true;
	}
	return 0;
}

size_t tfs_commit_count(const tfs_commit *c) { return c->n; }

int tfs_commit_get(const tfs_commit *c, size_t i, const char **tmp, const char **final,
		   struct stat *st)
{
	if (i >= c->n)
		return TFS_E_NOTFOUND;
	*tmp = c->f[i].tmp;
	*final = c->f[i].final;
	if (st)
		*st = c->f[i].st;
	return 0;
}

int tfs_commit_apply(tfs_commit *c, tfs_error *err)
{
	int rc = tfs_commit_seal(c, err);
	if (rc)
		return rc;
	tfs_test_crash_point("before_rename");
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->renamed)
			continue;
		if (rename(f->tmp, f->final) < 0)
			return tfs_error_sys(err, errno, "renaming %s to %s", f->tmp, f->final);
		f->renamed = true;
		if ((rc = tfs_io_fsync_dir(f->final, err)))
			return rc;
		if (i + 1 < c->n)
			tfs_test_crash_point("mid_rename");
	}
	return 0;
}

void tfs_commit_abort(tfs_commit *c)
{
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->fd >= 0) {
			close(f->fd);
			f->fd = -1;
		}
		if (!f->renamed && f->tmp) {
			if (!f->anon)
				unlink(f->tmp);
			f->renamed = true; /* gone: nothing left to do for it */
		}
	}
}

void tfs_commit_free(tfs_commit *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		if (c->f[i].fd >= 0)
			close(c->f[i].fd);
		free(c->f[i].tmp);
		free(c->f[i].final);
	}
	free(c->f);
	free(c);
}

/* ==== validation: the new file read back with the reader ==== */

/* ne with the dims past n_dims as 1, trailing 1s ignored (ggml drops them when writing). */
static uint32_t eff_dims(const tfs_tensor *t, int64_t ne[TFS_MAX_DIMS])
{
	uint32_t n = 0;
	for (uint32_t k = 0; k < TFS_MAX_DIMS; k++) {
		ne[k] = k < t->n_dims ? t->ne[k] : 1;
		if (ne[k] != 1)
			n = k + 1;
	}
	return n;
}

static bool same_range(const uint8_t *a, const uint8_t *b, uint64_t n)
{
	while (n) {
		size_t k = n > (1u << 30) ? (1u << 30) : (size_t)n;
		if (memcmp(a, b, k))
			return false;
		a += k;
		b += k;
		n -= k;
	}
	return true;
}

#define SAMPLE 4096

/*
 * Checks that w (the written file, as read back) holds exactly m's live keys with the same
 * payloads and m's live tensors with the same dtype, shape and size.  Tensor bytes are
 * compared in full for new bytes (a staged file: offset 0, the whole source) and small
 * tensors; for the others a sample at the start, middle and end: their bytes were copied by
 * the kernel from a file that is not modified, and a 40 GB re-read would double the repack.
 */
int tfs_write_validate(const tfs_model *m, const tfs_model *w, tfs_error *err)
{
	size_t n_kv = 0, n_t = 0, w_kv = 0, w_t = 0;
	for (size_t i = 0; i < m->n_kv; i++) {
		const tfs_kv *a = &m->kv[i];
		if (a->deleted)
			continue;
		n_kv++;
		long j = tfs_model_find_kv(w, a->name);
		if (j < 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: key '%s' is missing", w->path,
					     a->name);
		const tfs_kv *b = &w->kv[j];
		if (a->type != b->type || a->len != b->len || !same_range(a->data, b->data, a->len))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: key '%s' reads back differently",
					     w->path, a->name);
	}
	for (size_t i = 0; i < w->n_kv; i++)
		w_kv += !w->kv[i].deleted;
	if (w_kv != n_kv)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %zu keys read back, %zu expected",
				     w->path, w_kv, n_kv);

	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *a = &m->t[i];
		if (a->deleted)
			continue;
		n_t++;
		long j = tfs_model_find_tensor(w, a->name);
		if (j < 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is missing", w->path,
					     a->name);
		const tfs_tensor *b = &w->t[j];
		int64_t na[TFS_MAX_DIMS], nb[TFS_MAX_DIMS];
		uint32_t da = eff_dims(a, na), db = eff_dims(b, nb);
		if (a->dtype != b->dtype || a->nbytes != b->nbytes || da != db ||
		    memcmp(na, nb, sizeof(na)))
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: tensor '%s' reads back with another type or shape",
					     w->path, a->name);
		const tfs_source *sa = &m->src[a->src], *sb = &w->src[b->src];
		if (a->offset + a->nbytes > sa->size || b->offset + b->nbytes > sb->size)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' lies past the end",
					     w->path, a->name);
		const uint8_t *pa = sa->map + a->offset, *pb = sb->map + b->offset;
		uint64_t n = a->nbytes;
		bool staged = a->offset == 0 && sa->size == n;
		bool ok;
		if (n == 0)
			ok = true;
		else if (staged || n <= 4 * SAMPLE)
			ok = same_range(pa, pb, n);
		else
			ok = same_range(pa, pb, SAMPLE) &&
			     same_range(pa + n / 2, pb + n / 2, SAMPLE) &&
			     same_range(pa + n - SAMPLE, pb + n - SAMPLE, SAMPLE);
		if (!ok)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': bytes differ",
					     w->path, a->name);
	}
	for (size_t i = 0; i < w->n_t; i++)
		w_t += !w->t[i].deleted;
	if (w_t != n_t)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %zu tensors read back, %zu expected",
				     w->path, w_t, n_t);
	return 0;
}

/* Reads back a GGUF file just written and checks it against m and the layout rules
 * (GGUF_CHECKLIST.md: version 3, contiguous aligned offsets, padded data section). */
int tfs_gguf_validate(const tfs_model *m, const char *tmp, tfs_error *err)
{
	tfs_model *w = NULL;
	int32_t si;
	int rc = tfs_model_new(&w, TFS_FMT_GGUF, tmp, err);
	if (rc)
		return rc;
	if ((rc = tfs_model_add_source(w, tmp, NULL, &si, err)) ||
	    (rc = tfs_gguf_read(w, si, err)))
		goto out;
	uint64_t a = w->alignment, expect = 0;
	if (w->gguf_version != 3 || w->data_offset % a) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: bad version or data section alignment",
				   tmp);
		goto out;
	}
	for (size_t i = 0; i < w->n_t; i++) {
		const tfs_tensor *t = &w->t[i];
		if (t->offset != w->data_offset + expect) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is not where expected",
					   tmp, t->name);
			goto out;
		}
		expect += (t->nbytes + a - 1) / a * a;
	}
	if (w->n_t && w->src[si].size != w->data_offset + expect) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: file size %llu, expected %llu", tmp,
				   (unsigned long long)w->src[si].size,
				   (unsigned long long)(w->data_offset + expect));
		goto out;
	}
	rc = tfs_write_validate(m, w, err);
out:
	tfs_model_free(w);
	return rc;
}

/* ==== writing a model ==== */

/* The output's final path: o->output or the source; a symlink is followed, so the link
 * keeps pointing at the (replaced) file. Allocated. */
char *tfs_output_path(const tfs_model *m, const tfs_write_opts *o)
{
	const char *out = o && o->output ? o->output : m->path;
	struct stat st;
	if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode)) {
		char *r = realpath(out, NULL);
		if (r)
			return r;
	}
	return strdup(out);
}

/*
 * Writes every file of m's new state to temporaries registered in c, fsyncs and validates
 * them; renames nothing.  On failure the caller aborts c (removing the temporaries).
 */
int tfs_model_write_prepare(tfs_model *m, const tfs_write_opts *o, tfs_commit *c,
			    tfs_error *err)
{
	static const tfs_write_opts none;
	if (!o)
		o = &none;
	switch (m->format) {
	case TFS_FMT_GGUF: {
		char *final = tfs_output_path(m, o);
		const char *tmp;
		int fd, rc;
		if (!final)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		rc = tfs_commit_add(c, final, &fd, &tmp, err);
		free(final);
		if (rc)
			return rc;
		if ((rc = tfs_gguf_write(m, fd, tmp, o, err)) || (rc = tfs_commit_seal(c, err)))
			return rc;
		tfs_error e2 = { 0 };
		if ((rc = tfs_gguf_validate(m, tmp, &e2)))
			return tfs_error_set(err, rc,
					     "the new file does not read back as written (%s); "
					     "nothing was replaced", e2.msg);
		return 0;
	}
	case TFS_FMT_SAFETENSORS:
		return tfs_safetensors_write(m, o, c, err);
	case TFS_FMT_OLLAMA:
		return tfs_ollama_write(m, o, c, err);
	}
	return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: unknown format", m->path);
}

int tfs_model_write(tfs_model *m, const tfs_write_opts *o, tfs_error *err)
{
	tfs_commit *c;
	int rc;
	if (!m->changed)
		return 0; /* nothing changed: nothing is written */
	if ((rc = tfs_commit_new(&c, err)))
		return rc;
	rc = tfs_model_write_prepare(m, o, c, err);
	if (!rc)
		rc = tfs_commit_apply(c, err);
	if (rc)
		tfs_commit_abort(c);
	tfs_commit_free(c);
	return rc;
}
