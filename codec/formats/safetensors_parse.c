/*
 * safetensors_parse.c - one safetensors file's header, read and checked as the reference
 * crate does (tfs_safetensors_parse); safetensors.c builds models of such files.
 *
 * File layout (see layout.h and tests/data/SAFETENSORS_CHECKLIST.md):
 *  1. u64 LE N, N <= 100,000,000, 8 + N <= file size;
 *  2. N bytes of UTF-8 JSON: {"<tensor>": {"dtype", "shape", "data_offsets": [b, e]}, ...,
 *     "__metadata__": {"<key>": "<string>"} | null};
 *  3. the byte buffer: tensors contiguous from 0 in (b, e) order, last e + 8 + N == file size.
 */
#include "format.h"
#include "dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char lfs_magic[] = TFS_LFS_MAGIC;

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

int tfs_safetensors_parse(tfs_model *m, int32_t si, uint64_t *header_len, json_t **metadata,
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
