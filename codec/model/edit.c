/*
 * edit.c - changing a model in memory (the write path's first half).
 *
 * Changes never touch a source: a changed value is owned by the model, a
 * tensor's or an extra file's new bytes live in a file of their own, added as
 * a new source.  Slots are never removed, only marked deleted, so indices the
 * FUSE layer holds stay valid; the name maps only hold live names.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "edit.h"
#include "model_impl.h"
#include "value.h"
#include "dtype.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

/* True when keys and tensors are written as GGUF: a GGUF file or the model layer of a
 * classic Ollama model (its reader ran tfs_gguf_read, which sets gguf_version). */
bool tfs_model_gguf_encoded(const tfs_model *m)
{
	return m->ops->gguf_encoded(m);
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
bool tfs_safetensors_dtype_ok(int dtype)
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
	/* what the format allows (a GGUF type, a reserved key, strings only) */
	return m->ops->check_kv(m, key, type, data, len, err);
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
		if (kv->data_owned)
			free((void *)kv->data);
		kv->type = type;
		kv->data = data;
		kv->len = len;
	}
	m->kv[i].data_owned = true;
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

/* Renames slot i (whose name lives at *namep; *ownedp: whether it was malloc'd, NULL: it
 * always is) in map from `from` to `to`. */
static int rename_slot(tfs_model *m, tfs_strmap *map, tfs_strmap_name_fn fn, char **namep,
		       bool *ownedp, long i, const char *to, tfs_error *err)
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
	if (!ownedp || *ownedp)
		free(old);
	if (ownedp)
		*ownedp = true;
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
	return rename_slot(m, &m->kv_map, tfs_kv_name, &m->kv[i].name, &m->kv[i].name_owned, i,
			   to, err);
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
	return rename_slot(m, &m->t_map, tfs_t_name, &m->t[i].name, NULL, i, to, err);
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
	if (!gguf && !tfs_safetensors_dtype_ok(dtype))
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
	tfs_source_close(&m->src[si]);
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

int tfs_model_set_tensor_files(tfs_model *m, const tfs_tensor_file *f, size_t n,
			       tfs_error *err)
{
	int32_t si[TFS_MAX_TENSOR_FILES];
	long idx[TFS_MAX_TENSOR_FILES];
	uint64_t nbytes;
	size_t k;
	int rc = 0;

	if (n > TFS_MAX_TENSOR_FILES)
		return tfs_error_set(err, TFS_E_INVALID, "%s: %zu tensors in one change", m->path, n);
	/* everything is checked, and every file added, before any tensor changes */
	for (k = 0; k < n && !rc; k++) {
		idx[k] = tfs_model_find_tensor(m, f[k].name);
		si[k] = -1;
		if (idx[k] < 0)
			rc = tfs_error_set(err, TFS_E_NOTFOUND, "%s: no tensor '%s'", m->path,
					   f[k].name);
		else if (!(rc = check_tensor_spec(m, f[k].name, f[k].dtype, f[k].n_dims, f[k].ne,
						  &nbytes, err)) &&
			 !(rc = tfs_model_add_source(m, f[k].path, NULL, &si[k], err))) {
			m->src[si[k]].staged = true;
			if (m->src[si[k]].size != nbytes)
				rc = tfs_error_set(err, TFS_E_INVALID, "%s: tensor '%s': %llu bytes "
						   "were written, it needs %llu", m->path, f[k].name,
						   (unsigned long long)m->src[si[k]].size,
						   (unsigned long long)nbytes);
		}
	}
	if (rc) {
		for (size_t r = 0; r < k; r++)
			release_staged_source(m, si[r]);
		return rc;
	}
	for (k = 0; k < n; k++) {
		tfs_tensor *t = &m->t[idx[k]];
		int32_t old = t->src;

		set_tensor_bytes(t, f[k].dtype, f[k].n_dims, f[k].ne, m->src[si[k]].size, si[k], 0);
		release_staged_source(m, old);
	}
	m->changed = true;
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
	if (!m->ops->extras)
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
	if ((rc = tfs_source_present(s, src->offset, src->size, err)))
		return rc;
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
