/*
 * safetensors.c - the safetensors reader: one file, or a sharded set described by
 * model.safetensors.index.json.
 *
 * File layout (see formats.h and tests/data/SAFETENSORS_CHECKLIST.md):
 *  1. u64 LE N, N <= 100,000,000, 8 + N <= file size;
 *  2. N bytes of UTF-8 JSON: {"<tensor>": {"dtype", "shape", "data_offsets": [b, e]}, ...,
 *     "__metadata__": {"<key>": "<string>"} | null};
 *  3. the byte buffer: tensors contiguous from 0 in (b, e) order, last e + 8 + N == file size.
 *
 * Index layout: {"metadata": {...}, "weight_map": {"<tensor>": "<shard file name>"}}; the
 * shards sit beside it.
 */
#include "layout.h"
#include "value.h"
#include "dtype.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

static const char lfs_magic[] = "version https://git-lfs.github.com/spec/v1";

/* ==== dtypes: the safetensors names and their bit sizes (crate enum order) ==== */

static const struct {
	const char *name;
	uint32_t bits;
} st_dtypes[] = {
	{ "BOOL", 8 }, { "F4", 4 }, { "F6_E2M3", 6 }, { "F6_E3M2", 6 }, { "U8", 8 }, { "I8", 8 },
	{ "F8_E5M2", 8 }, { "F8_E4M3", 8 }, { "F8_E8M0", 8 }, { "F8_E4M3FNUZ", 8 },
	{ "F8_E5M2FNUZ", 8 }, { "I16", 16 }, { "U16", 16 }, { "F16", 16 }, { "BF16", 16 },
	{ "I32", 32 }, { "U32", 32 }, { "F32", 32 }, { "C64", 64 }, { "F64", 64 }, { "I64", 64 },
	{ "U64", 64 },
};
_Static_assert(sizeof(st_dtypes) / sizeof(st_dtypes[0]) == 22, "22 safetensors dtypes");

/* Bits per element of a safetensors dtype name (case-sensitive), or 0. */
static uint32_t st_dtype_bits(const char *name)
{
	for (size_t i = 0; i < sizeof(st_dtypes) / sizeof(st_dtypes[0]); i++)
		if (strcmp(st_dtypes[i].name, name) == 0)
			return st_dtypes[i].bits;
	return 0;
}

/* ==== helpers ==== */

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF), as Rust's str::from_utf8. */
static bool utf8_valid(const uint8_t *p, uint64_t n, uint64_t *bad)
{
	uint64_t i = 0;
	while (i < n) {
		uint8_t c = p[i];
		uint32_t need, cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			need = 1, cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			need = 2, cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			need = 3, cp = c & 0x07;
		} else {
			*bad = i;
			return false;
		}
		if (n - i <= need) {
			*bad = i;
			return false;
		}
		for (uint32_t k = 1; k <= need; k++) {
			if ((p[i + k] & 0xC0) != 0x80) {
				*bad = i;
				return false;
			}
			cp = (cp << 6) | (p[i + k] & 0x3F);
		}
		if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
		    (need == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
			*bad = i;
			return false;
		}
		i += need + 1;
	}
	return true;
}

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

/* Prints a shape as "[2, 3]" into buf. */
static void shape_text(char *buf, size_t cap, const json_t *shape)
{
	size_t used = 0;
	size_t i;
	json_t *v;
	used += (size_t)snprintf(buf, cap, "[");
	json_array_foreach(shape, i, v) {
		if (used >= cap)
			break;
		used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "",
					 (long long)json_integer_value(v));
	}
	if (used < cap)
		snprintf(buf + used, cap - used, "]");
}

/* ==== one file ==== */

/* n bytes at off of source s (already known to lie inside it). */
static int read_at(const tfs_source *s, void *buf, uint64_t off, uint64_t n, tfs_error *err)
{
	int rc = tfs_source_head(s, off + n, err);
	return rc ? rc : tfs_source_pread(s, buf, n, off, err);
}

typedef struct {
	const char *name;     /* borrowed from the JSON document */
	int dtype;
	uint32_t n_dims;
	int64_t ne[TFS_MAX_DIMS];
	uint64_t nbytes;
	uint64_t begin, end;
	const json_t *shape;
} st_entry;

static int entry_cmp(const void *a, const void *b)
{
	const st_entry *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Reads one tensor entry's fields (not yet its offsets' place in the sequence). */
/* A tensor's shape: e->ne (GGUF order), e->n_dims, *numel (*overflow when it does not fit
 * 64 bits). */
static int parse_shape(st_entry *e, const char *file, const char *name, const json_t *shape,
		       uint64_t *numel, bool *overflow, tfs_error *err)
{
	if (!json_is_array(shape))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': shape is not an array",
				     file, name);
	size_t nd = json_array_size(shape);
	if (nd > TFS_MAX_DIMS)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s' has %zu dimensions; tensorfs supports at most %d",
				     file, name, nd, TFS_MAX_DIMS);
	*numel = 1;
	*overflow = false;
	for (size_t i = 0; i < nd; i++) {
		const json_t *d = json_array_get(shape, i);
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: tensor '%s': shape entry %zu is not a non-negative "
					     "integer", file, name, i);
		uint64_t dim = (uint64_t)json_integer_value(d);
		/* GGUF order: ne[0] is the last (fastest) axis */
		e->ne[nd - 1 - i] = (int64_t)dim;
		if (tfs_mul_overflow(*numel, dim, numel))
			*overflow = true;
	}
	e->n_dims = (uint32_t)nd;
	e->shape = shape;
	return 0;
}

/* data_offsets: exactly two non-negative integers, into e->begin / e->end. */
static int parse_offsets(st_entry *e, const char *file, const char *name, const json_t *off,
			 tfs_error *err)
{
	if (!json_is_array(off) || json_array_size(off) != 2)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': data_offsets must be exactly 2 integers", file,
				     name);
	const json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
	if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
	    json_integer_value(en) < 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': data_offsets are not non-negative integers",
				     file, name);
	e->begin = (uint64_t)json_integer_value(b);
	e->end = (uint64_t)json_integer_value(en);
	return 0;
}

static int parse_entry(st_entry *e, const char *file, const char *name, const json_t *v,
		       tfs_error *err)
{
	e->name = name;
	if (!json_is_object(v))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': entry is not an object",
				     file, name);
	const json_t *dt = json_object_get(v, "dtype");
	const json_t *shape = json_object_get(v, "shape");
	const json_t *off = json_object_get(v, "data_offsets");
	if (!dt || !shape || !off)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': missing field '%s'", file,
				     name, !dt ? "dtype" : !shape ? "shape" : "data_offsets");
	if (!json_is_string(dt))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': dtype is not a string",
				     file, name);
	const char *dts = json_string_value(dt);
	uint32_t bits = st_dtype_bits(dts);
	if (!bits)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': unknown dtype '%s' (safetensors names are "
				     "case-sensitive: BOOL, U8, I8, ..., F32, F8_E4M3, F4...)",
				     file, name, dts);
	e->dtype = tfs_dtype_from_name(dts);
	if (e->dtype < 0)
		return tfs_error_set(err, TFS_E_UNSUPPORTED,
				     "%s: tensor '%s': dtype %s is missing from the dtype table", file,
				     name, dts);

	uint64_t numel = 1;
	bool overflow = false;
	int rc;
	if ((rc = parse_shape(e, file, name, shape, &numel, &overflow, err)) ||
	    (rc = parse_offsets(e, file, name, off, err)))
		return rc;

	char st[160];
	uint64_t nbits;
	if (overflow || tfs_mul_overflow(numel, (uint64_t)bits, &nbits)) {
		shape_text(st, sizeof(st), shape);
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': size of shape %s x %s overflows", file, name,
				     st, dts);
	}
	if (nbits % 8) {
		shape_text(st, sizeof(st), shape);
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': %s of shape %s is %llu bits, not a whole "
				     "number of bytes", file, name, dts, st, (unsigned long long)nbits);
	}
	e->nbytes = nbits / 8;
	return 0;
}

/* Reads and checks the header's bytes (*hbuf, n of them; allocated): the length prefix,
 * that it fits the file, that it is UTF-8; a Git LFS pointer is named as one. */
static int st_read_header(const tfs_source *s, uint8_t **hbuf, uint64_t *hlen, tfs_error *err)
{
	const char *file = s->path;
	int rc;
	/*
	 * The header is read with pread, not through the mapping: a fault in the mapping
	 * reads around it (the device's whole read-ahead window, often megabytes of tensor
	 * data), and opening a model must read headers only.
	 */
	uint8_t head[sizeof(lfs_magic) - 1 > 8 ? sizeof(lfs_magic) - 1 : 8];
	uint64_t hn = s->size < sizeof(head) ? s->size : sizeof(head);
	if ((rc = read_at(s, head, 0, hn, err)))
		return rc;
	if (hn >= sizeof(lfs_magic) - 1 && memcmp(head, lfs_magic, sizeof(lfs_magic) - 1) == 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: is a Git LFS pointer, not the model: run git lfs pull", file);
	if (s->size < 8)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: file of %llu bytes is too small for a safetensors header",
				     file, (unsigned long long)s->size);
	tfs_cursor c = { .base = head, .size = hn, .file = file, .err = err };
	uint64_t n;
	if ((rc = tfs_cursor_u64(&c, &n, "header length")))
		return rc;
	if (n > TFS_MAX_ST_HEADER)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: header length %llu is over the limit of %llu bytes", file,
				     (unsigned long long)n, TFS_MAX_ST_HEADER);
	if (n > s->size - 8)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: header length %llu runs past the end of the file (%llu bytes)",
				     file, (unsigned long long)n, (unsigned long long)s->size);
	uint8_t *h = malloc(n ? (size_t)n : 1);
	uint64_t bad;
	if (!h)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory for a %llu-byte header",
				     file, (unsigned long long)n);
	if ((rc = read_at(s, h, 8, n, err)) == 0 && !utf8_valid(h, n, &bad))
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: header is not valid UTF-8 (at offset %llu)",
				   file, (unsigned long long)(8 + bad));
	if (rc) {
		free(h);
		return rc;
	}
	*hbuf = h;
	*hlen = n;
	return 0;
}

/* The header object's tensor entries (ents, count of them) and its "__metadata__" (*meta,
 * borrowed from root, or NULL): an object of strings. */
static int st_entries(json_t *root, const char *file, st_entry *ents, size_t cap, size_t *count,
		      json_t **meta, tfs_error *err)
{
	const char *key;
	json_t *val;
	int rc;
	*count = 0;
	*meta = NULL;
	json_object_foreach(root, key, val) {
		if (strcmp(key, "__metadata__") != 0) {
			if (*count >= cap) /* cannot happen: foreach visits json_object_size() keys */
				return tfs_error_set(err, TFS_E_FORMAT, "%s: header changed while read",
						     file);
			if ((rc = parse_entry(&ents[*count], file, key, val, err)))
				return rc;
			(*count)++;
			continue;
		}
		if (json_is_null(val))
			continue;
		if (!json_is_object(val))
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: __metadata__ is not an object of strings", file);
		const char *mk;
		json_t *mv;
		json_object_foreach(val, mk, mv)
			if (!json_is_string(mv))
				return tfs_error_set(err, TFS_E_FORMAT,
						     "%s: __metadata__ value of '%s' is not a string",
						     file, mk);
		*meta = val;
	}
	return 0;
}

/* The byte buffer: the tensors sorted by (begin, end) must tile [0, data_size) exactly,
 * each range holding the bytes its dtype and shape need. */
static int st_check_layout(st_entry *ents, size_t count, const char *file, uint64_t data_size,
			   tfs_error *err)
{
	qsort(ents, count, sizeof(*ents), entry_cmp);
	uint64_t at = 0;
	for (size_t i = 0; i < count; i++) {
		const st_entry *e = &ents[i];
		unsigned long long b = e->begin, en = e->end;
		if (e->end < e->begin)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' data_offsets [%llu, "
					     "%llu) end before they begin", file, e->name, b, en);
		if (e->begin != at && i == 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' data_offsets [%llu, "
					     "%llu): the first tensor must start at 0", file, e->name,
					     b, en);
		if (e->begin < at)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' data_offsets [%llu, "
					     "%llu) overlap tensor '%s'", file, e->name, b, en,
					     ents[i - 1].name);
		if (e->begin > at)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' data_offsets [%llu, "
					     "%llu) leave a gap after tensor '%s' (ends at %llu)", file,
					     e->name, b, en, ents[i - 1].name, (unsigned long long)at);
		if (e->end - e->begin != e->nbytes) {
			char st[160];
			shape_text(st, sizeof(st), e->shape);
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: tensor '%s' data_offsets [%llu, %llu) hold %llu bytes, "
					     "its dtype and shape %s need %llu", file, e->name, b, en,
					     en - b, st, (unsigned long long)e->nbytes);
		}
		at = e->end;
	}
	if (at != data_size)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: the tensors end at byte %llu of the data, but the file holds "
				     "%llu bytes of data (%s)", file, (unsigned long long)at,
				     (unsigned long long)data_size,
				     at < data_size ? "trailing bytes" : "truncated");
	return 0;
}

/* The entries become the model's tensors (a name another shard or blob has is an error). */
static int st_push(tfs_model *m, int32_t si, const st_entry *ents, size_t count,
		   uint64_t data_start, tfs_error *err)
{
	const char *file = m->src[si].path;
	int rc;
	for (size_t i = 0; i < count; i++) {
		long j = tfs_model_find_tensor(m, ents[i].name);
		if (j >= 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is also in %s", file,
					     ents[i].name,
					     m->t[j].src >= 0 ? m->src[m->t[j].src].path : "the model");
	}
	for (size_t i = 0; i < count; i++) {
		const st_entry *e = &ents[i];
		tfs_tensor *t;
		if ((rc = tfs_model_push_tensor(m, e->name, strlen(e->name), &t, err)))
			return rc;
		t->dtype = e->dtype;
		t->n_dims = e->n_dims;
		for (uint32_t d = 0; d < TFS_MAX_DIMS; d++)
			t->ne[d] = d < e->n_dims ? e->ne[d] : 1;
		t->nbytes = e->nbytes;
		t->src = si;
		t->offset = data_start + e->begin;
	}
	return 0;
}

int tfs_st_parse(tfs_model *m, int32_t si, uint64_t *header_len, json_t **metadata,
		 tfs_error *err)
{
	const tfs_source *s = &m->src[si];
	const char *file = s->path;
	json_t *root = NULL, *meta = NULL;
	st_entry *ents = NULL;
	uint8_t *hbuf = NULL;
	uint64_t n = 0;
	size_t count = 0;
	json_error_t je;
	int rc;

	if (metadata)
		*metadata = NULL;
	if ((rc = st_read_header(s, &hbuf, &n, err)))
		return rc;
	root = json_loadb((const char *)hbuf, (size_t)n, JSON_REJECT_DUPLICATES, &je);
	size_t cap = root ? json_object_size(root) : 0;
	if (!root)
		rc = tfs_error_set(err, TFS_E_FORMAT,
				   "%s: invalid JSON header: %s (line %d, column %d)", file, je.text,
				   je.line, je.column);
	else if (!json_is_object(root))
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: header is not a JSON object", file);
	else if (!(ents = calloc(cap ? cap : 1, sizeof(*ents))))
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	else if (!(rc = st_entries(root, file, ents, cap, &count, &meta, err)) &&
		 /* 8 + n: no overflow, n <= size - 8 */
		 !(rc = st_check_layout(ents, count, file, s->size - (8 + n), err)))
		rc = st_push(m, si, ents, count, 8 + n, err);
	if (!rc) {
		if (header_len)
			*header_len = n;
		if (metadata && meta)
			*metadata = json_incref(meta);
	}
	free(ents);
	json_decref(root);
	free(hbuf);
	return rc;
}

/* ==== layout (m->priv) ==== */

static void free_strv(char **v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void layout_free(void *p)
{
	tfs_st_layout *l = p;
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
static int push_st_metadata(tfs_model *m, tfs_st_shard *sh, const json_t *meta,
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
static int push_index_metadata(tfs_model *m, tfs_st_layout *l, const json_t *meta,
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
static int read_shard(tfs_model *m, tfs_st_layout *l, int32_t src, const char *path,
		      tfs_error *err)
{
	int rc;
	tfs_st_shard *ns = realloc(l->shards, sizeof(*ns) * (l->n_shards + 1));
	if (!ns)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
	l->shards = ns;
	tfs_st_shard *sh = &l->shards[l->n_shards++];
	memset(sh, 0, sizeof(*sh));
	sh->src = src;

	json_t *meta = NULL;
	size_t before = m->n_t;
	if ((rc = tfs_st_parse(m, src, &sh->header_len, &meta, err)))
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
static int open_shard(tfs_model *m, tfs_st_layout *l, const char *path, tfs_error *err)
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
static int keep_index(tfs_st_layout *l, json_t *root, const char *index_path, tfs_error *err)
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
			       uint64_t len, tfs_st_shard_opener opener, void *ctx,
			       tfs_error *err)
{
	const char **names = NULL;
	json_t *root = NULL;
	size_t nn = 0;
	int rc;
	tfs_st_layout *l = calloc(1, sizeof(*l));
	if (!l)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", index_path);
	m->priv = l;
	m->priv_free = layout_free;
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
	tfs_st_layout *l = calloc(1, sizeof(*l));
	if (!l)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", m->path);
	m->priv = l;
	m->priv_free = layout_free;
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
	tfs_st_layout *l = calloc(1, sizeof(*l));
	if (!l) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", path);
		goto out;
	}
	m->priv = l;
	m->priv_free = layout_free;
	rc = open_shard(m, l, path, err);
out:
	free(resolved);
	return rc;
}
