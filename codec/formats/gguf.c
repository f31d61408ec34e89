/*
 * gguf.c - GGUF reader (v2 and v3).
 *
 * On-disk layout (all little-endian):
 *  1. magic "GGUF", u32 version (2 or 3), i64 n_tensors, i64 n_kv
 *  2. n_kv key/values: string key, i32 type, payload
 *       string = u64 length + bytes; array = i32 element type + u64 count + elements
 *  3. n_tensors infos: string name, u32 n_dims, i64 ne[n_dims], i32 type, u64 offset
 *  4. padding to general.alignment (default 32), then the data section;
 *     a tensor's bytes start at data_offset + offset (data_offset is the aligned
 *     position also when there are no tensors).
 *
 * Opening parses the header only.  Tensor ranges are checked to lie inside
 * the file, aligned, and not to overlap; gaps and any order are accepted, as the
 * spec allows (ggml itself insists on contiguous offsets).
 */
#include "format.h"
#include "value.h"
#include "dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GGUF_MAX_DEPTH 16  /* nested arrays */

static const uint8_t type_size[TFS_GGUF_TYPE_COUNT] = {
	[TFS_GGUF_UINT8] = 1, [TFS_GGUF_INT8] = 1, [TFS_GGUF_UINT16] = 2, [TFS_GGUF_INT16] = 2,
	[TFS_GGUF_UINT32] = 4, [TFS_GGUF_INT32] = 4, [TFS_GGUF_FLOAT32] = 4, [TFS_GGUF_BOOL] = 1,
	[TFS_GGUF_UINT64] = 8, [TFS_GGUF_INT64] = 8, [TFS_GGUF_FLOAT64] = 8,
};

/* Skips over one value of `type`, validating it; the cursor ends after it. */
static int skip_value(tfs_cursor *c, uint32_t type, int depth, const char *key)
{
	if (type >= TFS_GGUF_TYPE_COUNT)
		return tfs_error_set(c->err, TFS_E_FORMAT, "%s: key '%s' has invalid type %u",
				     c->file, key, type);
	const uint8_t *p;
	if (type == TFS_GGUF_STRING) {
		uint64_t len;
		return tfs_cursor_str(c, &p, &len, TFS_MAX_STRING, "string value");
	}
	if (type != TFS_GGUF_ARRAY)
		return tfs_cursor_bytes(c, &p, type_size[type], "value");

	if (depth >= GGUF_MAX_DEPTH)
		return tfs_error_set(c->err, TFS_E_FORMAT, "%s: key '%s': arrays nested deeper than %d",
				     c->file, key, GGUF_MAX_DEPTH);
	uint32_t et;
	uint64_t n;
	int rc;
	uint64_t at = c->origin + c->pos;
	if ((rc = tfs_cursor_u32(c, &et, "array type")) || (rc = tfs_cursor_u64(c, &n, "array length")))
		return rc;
	if (et >= TFS_GGUF_TYPE_COUNT)
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: key '%s': array at offset %llu has invalid element type %u",
				     c->file, key, (unsigned long long)at, et);
	if (n > TFS_MAX_ARRAY)
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: key '%s': array of %llu elements is over the limit",
				     c->file, key, (unsigned long long)n);
	/* every element takes at least min bytes: a cheap bound before walking */
	uint64_t min = et == TFS_GGUF_STRING ? 8 : et == TFS_GGUF_ARRAY ? 12 : type_size[et];
	uint64_t need;
	if (tfs_mul_overflow(n, min, &need) || need > tfs_cursor_left(c))
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: key '%s': array of %llu elements at offset %llu runs past the end of the file",
				     c->file, key, (unsigned long long)n, (unsigned long long)at);
	if (et != TFS_GGUF_STRING && et != TFS_GGUF_ARRAY)
		return tfs_cursor_bytes(c, &p, need, "array");
	uint64_t from = c->pos;
	for (uint64_t i = 0; i < n; i++) {
		/* a remote header is fetched as it is parsed: the end of this array, guessed from
		 * its elements so far (16 bytes each before the first), and n * 8 bytes more (a
		 * vocabulary's scores and types) */
		if (c->fill)
			c->expect = c->pos + (i ? (c->pos - from) / i : 16) * (n - i) + n * 8;
		if ((rc = skip_value(c, et, depth + 1, key)))
			return rc;
	}
	c->expect = 0;
	return 0;
}

/* tensorfs' own padding (TFS_GGUF_PADDING_KEY, an array of u8): part of the layout, not of
 * the model, so not shown; a writer adds it again where it is needed. */
static bool is_padding(const uint8_t *name, uint64_t name_len, uint32_t type,
		       const uint8_t *data, uint64_t len)
{
	return name_len == sizeof(TFS_GGUF_PADDING_KEY) - 1 &&
	       memcmp(name, TFS_GGUF_PADDING_KEY, name_len) == 0 && type == TFS_GGUF_ARRAY &&
	       len >= 4 && tfs_le32(data) == TFS_GGUF_UINT8;
}

static int read_kvs(tfs_model *m, tfs_cursor *c, uint64_t n_kv)
{
	int rc;
	for (uint64_t i = 0; i < n_kv; i++) {
		const uint8_t *name, *data;
		uint64_t name_len;
		uint32_t type;
		uint64_t at = c->origin + c->pos;
		if ((rc = tfs_cursor_str(c, &name, &name_len, TFS_MAX_NAME, "key")))
			return rc;
		if (name_len == 0)
			return tfs_error_set(c->err, TFS_E_FORMAT, "%s: key %llu (offset %llu) is empty",
					     c->file, (unsigned long long)i, (unsigned long long)at);
		char key[128];
		snprintf(key, sizeof(key), "%.*s", (int)(name_len < 100 ? name_len : 100), name);
		if ((rc = tfs_cursor_u32(c, &type, "value type")))
			return rc;
		uint64_t start = c->pos;
		if ((rc = skip_value(c, type, 0, key)))
			return rc;
		data = c->base + start;
		if (is_padding(name, name_len, type, data, c->pos - start))
			continue;
		if ((rc = tfs_model_push_kv(m, (const char *)name, name_len, type, data, c->pos - start,
					    c->err)))
			return rc;
	}
	return 0;
}

/* general.alignment: must be a u32 power of two when present. */
static int read_alignment(tfs_model *m, const char *file, tfs_error *err)
{
	long i = tfs_model_find_kv(m, "general.alignment");
	m->alignment = 32;
	if (i < 0)
		return 0;
	const tfs_kv *kv = &m->kv[i];
	if (kv->type != TFS_GGUF_UINT32)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: general.alignment must be of type uint32",
				     file);
	uint32_t a = tfs_le32(kv->data);
	if (a == 0 || (a & (a - 1)))
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: general.alignment %u is not a power of two", file, a);
	m->alignment = a;
	return 0;
}

typedef struct {
	uint64_t start, end;
	uint32_t t;
} span;

static int span_cmp(const void *a, const void *b)
{
	const span *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* One tensor info (name, n_dims, ne, type, offset) pushed to m; its offset stays relative to
 * the data section until read_tensors places it. */
static int read_tensor_info(tfs_model *m, tfs_cursor *c, int32_t src)
{
	const uint8_t *name;
	uint64_t name_len, offset, nel = 1;
	uint32_t n_dims, type;
	int64_t ne[TFS_MAX_DIMS];
	tfs_tensor *t;
	int rc;
	if ((rc = tfs_cursor_str(c, &name, &name_len, TFS_MAX_NAME, "tensor name")))
		return rc;
	char tn[128];
	snprintf(tn, sizeof(tn), "%.*s", (int)(name_len < 100 ? name_len : 100), name);
	if ((rc = tfs_cursor_u32(c, &n_dims, "n_dims")))
		return rc;
	if (n_dims > TFS_MAX_DIMS)
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: tensor '%s' has %u dimensions (at most %d)", c->file, tn,
				     n_dims, TFS_MAX_DIMS);
	for (uint32_t d = 0; d < n_dims; d++) {
		uint64_t v;
		if ((rc = tfs_cursor_u64(c, &v, "tensor dimension")))
			return rc;
		ne[d] = (int64_t)v;
		if (ne[d] < 0)
			return tfs_error_set(c->err, TFS_E_FORMAT,
					     "%s: tensor '%s' has negative dimension %lld", c->file, tn,
					     (long long)ne[d]);
		if (tfs_mul_overflow(nel, v, &nel) || nel > (uint64_t)INT64_MAX)
			return tfs_error_set(c->err, TFS_E_FORMAT,
					     "%s: tensor '%s': element count overflows", c->file, tn);
	}
	if ((rc = tfs_cursor_u32(c, &type, "tensor type")) ||
	    (rc = tfs_cursor_u64(c, &offset, "tensor offset")))
		return rc;
	const tfs_dtype_info *d = type < TFS_DT_GGML_COUNT ? tfs_dtype((int)type) : NULL;
	if (!d)
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: tensor '%s' has invalid or removed ggml type %u", c->file, tn,
				     type);
	if (n_dims > 0 && ne[0] % d->block_elems)
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: tensor '%s': row of %lld elements is not a multiple of the "
				     "%s block size %u", c->file, tn, (long long)ne[0], d->name,
				     d->block_elems);
	if ((rc = tfs_model_push_tensor(m, (const char *)name, name_len, &t, c->err)))
		return rc;
	t->dtype = (int)type;
	t->n_dims = n_dims;
	for (uint32_t k = 0; k < TFS_MAX_DIMS; k++)
		t->ne[k] = k < n_dims ? ne[k] : 1;
	if ((rc = tfs_dtype_nbytes(&t->nbytes, t->dtype, nel, c->err)))
		return tfs_error_set(c->err, TFS_E_FORMAT, "%s: tensor '%s': %s", c->file, tn,
				     c->err->msg);
	t->src = src;
	t->offset = offset; /* relative for now */
	return 0;
}

/* Tensors [first, m->n_t) placed at data_off: aligned, inside the file, not overlapping
 * (zero-size tensors occupy nothing and may share an offset). */
static int place_tensors(tfs_model *m, tfs_cursor *c, size_t first, uint64_t data_off,
			 int32_t src)
{
	const tfs_source *s = &m->src[src];
	uint64_t a = m->alignment;
	size_t n = m->n_t - first;
	int rc = 0;
	span *sp = n ? malloc(n * sizeof(*sp)) : NULL;
	if (n && !sp)
		return tfs_error_set(c->err, TFS_E_NOMEM, "%s: out of memory", c->file);
	for (size_t i = 0; !rc && i < n; i++) {
		tfs_tensor *t = &m->t[first + i];
		uint64_t rel = t->offset, end;
		if (rel % a)
			rc = tfs_error_set(c->err, TFS_E_FORMAT,
					   "%s: tensor '%s' offset %llu is not a multiple of the alignment %llu",
					   c->file, t->name, (unsigned long long)rel, (unsigned long long)a);
		else if (tfs_add_overflow(data_off, rel, &t->offset) ||
			 tfs_add_overflow(t->offset, t->nbytes, &end) || end > s->size)
			rc = tfs_error_set(c->err, TFS_E_FORMAT,
					   "%s: tensor '%s' [%llu, +%llu) lies past the end of the file (%llu bytes)",
					   c->file, t->name, (unsigned long long)rel,
					   (unsigned long long)t->nbytes, (unsigned long long)s->size);
		else
			sp[i] = (span){ rel, rel + t->nbytes, (uint32_t)(first + i) };
	}
	if (!rc && n > 1) /* sp is NULL when there are no tensors, and qsort's array must not be */
		qsort(sp, n, sizeof(*sp), span_cmp);
	for (size_t i = 1; !rc && i < n; i++) {
		size_t j = i - 1;
		if (sp[i].start == sp[i].end)
			continue;
		while (j > 0 && sp[j].start == sp[j].end)
			j--;
		if (sp[j].start != sp[j].end && sp[i].start < sp[j].end)
			rc = tfs_error_set(c->err, TFS_E_FORMAT,
					   "%s: tensor '%s' [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
					   c->file, m->t[sp[i].t].name, (unsigned long long)sp[i].start,
					   (unsigned long long)sp[i].end, m->t[sp[j].t].name,
					   (unsigned long long)sp[j].start, (unsigned long long)sp[j].end);
	}
	free(sp);
	return rc;
}

static int read_tensors(tfs_model *m, tfs_cursor *c, uint64_t n_tensors, int32_t src)
{
	int rc;
	size_t first = m->n_t;
	for (uint64_t i = 0; i < n_tensors; i++)
		if ((rc = read_tensor_info(m, c, src)))
			return rc;
	/*
	 * The data section starts at the header's end aligned up, also with no tensors: that
	 * is where writers put it (ggml's and ours always pad the header) and what gguf-py and
	 * @huggingface/gguf report.  A tensor-less file may end unpadded (the vocab files
	 * llama.cpp ships do, and recent ggml then reports the unpadded size): accepted, as
	 * nothing is read there.
	 */
	uint64_t data_off = c->pos, a = m->alignment;
	if (tfs_add_overflow(data_off, a - 1, &data_off))
		return tfs_error_set(c->err, TFS_E_FORMAT, "%s: bad data offset", c->file);
	data_off &= ~(a - 1);
	if (n_tensors > 0 && data_off > m->src[src].size)
		return tfs_error_set(c->err, TFS_E_FORMAT,
				     "%s: data section at %llu starts past the end of the file (%llu bytes)",
				     c->file, (unsigned long long)data_off,
				     (unsigned long long)m->src[src].size);
	m->data_offset = data_off;
	return place_tensors(m, c, first, data_off, src);
}

/* The cursor's fill for a remote source: its first `end` bytes fetched. */
static int fill_head(const void *src, uint64_t end, tfs_error *err)
{
	return tfs_source_head(src, end, err);
}

int tfs_gguf_read(tfs_model *m, int32_t src, tfs_error *err)
{
	const tfs_source *s = &m->src[src];
	tfs_cursor c = { .base = s->map, .size = s->size, .file = s->path, .err = err,
			 .prefetch = s->fd >= 0, .fill = tfs_source_is_remote(s) ? fill_head : NULL, .fill_ctx = s };
	const uint8_t *magic;
	uint32_t version;
	uint64_t n_tensors, n_kv;
	int rc;

	if (s->size < 4 || memcmp(s->map, "GGUF", 4) != 0) /* a remote header has >= 64 KiB */
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not a GGUF file (bad magic)", s->path);
	if ((rc = tfs_cursor_bytes(&c, &magic, 4, "magic")) ||
	    (rc = tfs_cursor_u32(&c, &version, "version")))
		return rc;
	if (version != 0 && (version & 0xFFFF) == 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: big-endian GGUF (version field 0x%08x) is not supported",
				     s->path, version);
	if (version == 1)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: GGUF v1 is not supported (v2 and v3 are)",
				     s->path);
	if (version != 2 && version != 3)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: unsupported GGUF version %u", s->path,
				     version);
	if ((rc = tfs_cursor_u64(&c, &n_tensors, "tensor count")) ||
	    (rc = tfs_cursor_u64(&c, &n_kv, "key count")))
		return rc;
	/* each key takes >= 13 bytes, each tensor info >= 24: cheap bounds before any loop */
	if ((int64_t)n_tensors < 0 || n_tensors > TFS_MAX_ITEMS ||
	    n_tensors > tfs_cursor_left(&c) / 24)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: invalid tensor count %lld", s->path,
				     (long long)n_tensors);
	if ((int64_t)n_kv < 0 || n_kv > TFS_MAX_ITEMS || n_kv > tfs_cursor_left(&c) / 13)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: invalid key count %lld", s->path,
				     (long long)n_kv);
	m->gguf_version = version;
	if ((rc = read_kvs(m, &c, n_kv)) || (rc = read_alignment(m, s->path, err)) ||
	    (rc = read_tensors(m, &c, n_tensors, src)))
		return rc;
	return 0;
}

/* ==== the format's reading operations (its table: gguf_write.c) ==== */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The GGUF magic, or the name (its reader names a bad magic).  A big-endian file is said so,
 * unless it is named .json (read as an index or a manifest). */
int tfs_gguf_probe(const tfs_probe *p, tfs_error *err)
{
	if (!p->st || S_ISDIR(p->st->st_mode))
		return TFS_PROBE_NO;
	if ((p->n >= 4 && strncasecmp(p->head, "GGUF", 4) == 0) || ends_with(p->source, ".gguf"))
		return TFS_PROBE_YES;
	if (p->n >= 4 && memcmp(p->head, "FUGG", 4) == 0 && !ends_with(p->source, ".json"))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: big-endian GGUF is not supported",
				     p->source);
	return TFS_PROBE_NO;
}

int tfs_gguf_open_probed(tfs_model *m, const tfs_probe *p, const tfs_open_opts *o,
			 tfs_error *err)
{
	int32_t src;
	int rc = tfs_model_add_source(m, p->source, NULL, &src, err);
	(void)o;
	return rc ? rc : tfs_gguf_read(m, src, err);
}

int tfs_gguf_check_kv(const tfs_model *m, const char *key, uint32_t type, const uint8_t *data,
		      uint64_t len, tfs_error *err)
{
	if (strcmp(key, TFS_GGUF_PADDING_KEY) == 0)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: key '%s' is reserved: tensorfs writes it to keep "
				     "tensors block-aligned on reflink file systems", m->path,
				     key);
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
