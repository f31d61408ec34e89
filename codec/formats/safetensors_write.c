/*
 * safetensors_write.c - safetensors writer: one file, a sharded set, Ollama tensor blobs.
 *
 * A file is written as the reference crate lays it out (SAFETENSORS_CHECKLIST.md, "Write"):
 *  1. u64 little-endian N;
 *  2. N bytes of compact JSON: "__metadata__" first when there is any (string -> string,
 *     keys in model order), then the tensors, each {"dtype","shape","data_offsets"};
 *     the header is padded with spaces to a multiple of 8;
 *  3. the tensors' bytes, contiguous from 0, nothing after the last one.
 * Tensor order: the model's order (the source's data order, new tensors last), not the
 * reference's dtype-then-name sort: a rewrite then keeps the source's layout, and runs of
 * unchanged tensors stay runs.  Readers sort by offsets, so both are equally valid.
 *
 * A sharded set (model.safetensors.index.json) rewrites only the shards whose content
 * changes (a tensor of it deleted, renamed, given new bytes, or its metadata changed; new
 * tensors go into the last shard), then the index (weight_map sorted by name, "metadata"
 * with total_size recomputed, 2-space indent, keys sorted like transformers writes it).
 * Keys read from a shard's "__metadata__" stay in that shard; other keys - the index's
 * and new ones - are written to the index's "metadata".  Each file is atomic; the index,
 * renamed last, commits the set (staging.c rolls a crash in between forward).
 */
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#endif
#include "format.h"
#include "commit.h"
#include "hex.h"
#include "edit.h"
#include "value.h"
#include "dtype.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>



/* ==== the header ==== */

/* A JSON string as serde_json writes it. */
static int json_str(tfs_buf *b, const char *s, size_t n)
{
	if (tfs_buf_append(b, "\"", 1))
		return TFS_E_NOMEM;
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)s[i];
		char esc[7];
		size_t k = 0;
		if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c, k = 2;
		} else if (c < 0x20) {
			esc[0] = '\\';
			k = 2;
			switch (c) {
			case '\b': esc[1] = 'b'; break;
			case '\f': esc[1] = 'f'; break;
			case '\n': esc[1] = 'n'; break;
			case '\r': esc[1] = 'r'; break;
			case '\t': esc[1] = 't'; break;
			default:
				memcpy(esc + 1, "u00", 3);
				tfs_hex(esc + 4, &c, 1);
				k = 6;
			}
		} else {
			continue;
		}
		if (tfs_buf_append(b, s + run, i - run) || tfs_buf_append(b, esc, k))
			return TFS_E_NOMEM;
		run = i + 1;
	}
	if (tfs_buf_append(b, s + run, n - run) || tfs_buf_append(b, "\"", 1))
		return TFS_E_NOMEM;
	return 0;
}

/* The string a STRING payload holds. */
static const char *payload_str(const tfs_kv *kv, size_t *n)
{
	*n = (size_t)(kv->len - 8);
	return (const char *)kv->data + 8;
}

/* "__metadata__":{...}: meta's string members (a blob's own metadata, e.g. Ollama's
 * quantization parameters, as it was), then the keys keys[0..nk) (strings only). */
static int st_metadata(tfs_buf *b, const tfs_model *m, const uint32_t *keys, size_t nk,
		       const json_t *meta, tfs_error *err)
{
	const char *mk;
	json_t *mv;
	bool sep = false;
	if (tfs_buf_append(b, "\"__metadata__\":{", 16))
		return TFS_E_NOMEM;
	json_object_foreach((json_t *)meta, mk, mv) {
		if (!json_is_string(mv))
			continue;
		if ((sep && tfs_buf_append(b, ",", 1)) || json_str(b, mk, strlen(mk)) ||
		    tfs_buf_append(b, ":", 1) ||
		    json_str(b, json_string_value(mv), json_string_length(mv)))
			return TFS_E_NOMEM;
		sep = true;
	}
	for (size_t i = 0; i < nk; i++) {
		const tfs_kv *kv = &m->kv[keys[i]];
		size_t n;
		const char *v;
		if (kv->type != TFS_GGUF_STRING || kv->len < 8)
			return tfs_error_set(err, TFS_E_INVALID,
					     "%s: key '%s' is not a string, and safetensors "
					     "metadata holds only strings", m->path, kv->name);
		v = payload_str(kv, &n);
		if (!tfs_utf8_valid(kv->name, strlen(kv->name)) || !tfs_utf8_valid(v, n))
			return tfs_error_set(err, TFS_E_INVALID, "%s: key '%s' is not valid UTF-8",
					     m->path, kv->name);
		if ((sep && tfs_buf_append(b, ",", 1)) ||
		    json_str(b, kv->name, strlen(kv->name)) || tfs_buf_append(b, ":", 1) ||
		    json_str(b, v, n))
			return TFS_E_NOMEM;
		sep = true;
	}
	return tfs_buf_append(b, "}", 1) ? TFS_E_NOMEM : 0;
}

/* One tensor's entry, named name, its bytes at data offset off. */
static int st_entry(tfs_buf *b, const tfs_model *m, const tfs_tensor *t, const char *name,
		    uint64_t off, tfs_error *err)
{
	const tfs_dtype_info *d = tfs_dtype(t->dtype);
	if (!d || !tfs_safetensors_dtype_ok(t->dtype))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: tensor '%s' has dtype %s, which safetensors cannot store",
				     m->path, t->name, d ? d->name : "?");
	if (!tfs_utf8_valid(name, strlen(name)))
		return tfs_error_set(err, TFS_E_INVALID, "%s: tensor name '%s' is not valid UTF-8",
				     m->path, name);
	if (json_str(b, name, strlen(name)) ||
	    tfs_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", d->name))
		return TFS_E_NOMEM;
	for (uint32_t k = t->n_dims; k-- > 0;)
		if (tfs_buf_printf(b, "%s%lld", k + 1 == t->n_dims ? "" : ",", (long long)t->ne[k]))
			return TFS_E_NOMEM;
	if (tfs_buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
			   (unsigned long long)(off + t->nbytes)))
		return TFS_E_NOMEM;
	return 0;
}

/* The JSON header: metadata (when there is any), then tensors ts[0..nt) in that order,
 * named names[i] (NULL: their own names), contiguous; *data_size their total. */
static int st_header(tfs_buf *b, const tfs_model *m, const uint32_t *ts, size_t nt,
		     const char *const *names, const uint32_t *keys, size_t nk,
		     const json_t *meta, uint64_t *data_size, tfs_error *err)
{
	uint64_t off = 0;
	int rc;
	if (tfs_buf_append(b, "{", 1))
		return TFS_E_NOMEM;
	bool sep = nk || json_object_size(meta); /* a comma before the next entry */
	if (sep && (rc = st_metadata(b, m, keys, nk, meta, err)))
		return rc;
	for (size_t i = 0; i < nt; i++) {
		const tfs_tensor *t = &m->t[ts[i]];
		if (sep && tfs_buf_append(b, ",", 1))
			return TFS_E_NOMEM;
		if ((rc = st_entry(b, m, t, names ? names[i] : t->name, off, err)))
			return rc;
		sep = true;
		off += t->nbytes;
	}
	if (tfs_buf_append(b, "}", 1))
		return TFS_E_NOMEM;
	while (b->len % 8)
		if (tfs_buf_append(b, " ", 1))
			return TFS_E_NOMEM;
	if (b->len > TFS_MAX_ST_HEADER)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: the header would be %zu bytes, over the 100 MB limit",
				     m->path, b->len);
	*data_size = off;
	return 0;
}

/* The image of one safetensors file (see tfs_safetensors_write_file); with data_start != 0 the JSON
 * header is padded with spaces (as the format allows) so the data starts there. */
static int st_image(tfs_image **out, const tfs_model *m, const uint32_t *ts, size_t nt,
		    const char *const *names, const uint32_t *keys, size_t nk, const json_t *meta,
		    uint64_t data_start, tfs_error *err)
{
	tfs_image *im;
	uint64_t data = 0;
	int rc = tfs_image_new(&im, err);
	if (rc)
		return rc;
	/* the length prefix first, filled in once the header is built */
	if (tfs_buf_append(&im->head, "\0\0\0\0\0\0\0\0", 8))
		rc = TFS_E_NOMEM;
	if (!rc)
		rc = st_header(&im->head, m, ts, nt, names, keys, nk, meta, &data, err);
	while (!rc && im->head.len < data_start)
		if (tfs_buf_append(&im->head, " ", 1))
			rc = TFS_E_NOMEM;
	uint64_t n = im->head.len - 8, pos = im->head.len;
	if (!rc)
		memcpy(im->head.data, &n, 8);
	for (size_t i = 0; !rc && i < nt; i++) {
		const tfs_tensor *t = &m->t[ts[i]];
		rc = tfs_image_add(im, pos, t->src, t->offset, t->nbytes);
		pos += t->nbytes;
	}
	if (rc == TFS_E_NOMEM)
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if (rc) {
		tfs_image_free(im);
		return rc;
	}
	im->size = pos;
	*out = im;
	return 0;
}

int tfs_safetensors_image(tfs_image **out, const tfs_model *m, const uint32_t *ts, size_t nt,
			  const uint32_t *keys, size_t nk, const json_t *meta, tfs_error *err)
{
	return st_image(out, m, ts, nt, NULL, keys, nk, meta, 0, err);
}

int tfs_safetensors_image_named(tfs_image **out, const tfs_model *m, const uint32_t *ts, size_t nt,
				const char *const *names, const json_t *meta, tfs_error *err)
{
	return st_image(out, m, ts, nt, names, NULL, 0, meta, 0, err);
}

int tfs_safetensors_image_all(tfs_image **out, const tfs_model *m, tfs_error *err)
{
	uint32_t *ts = malloc((m->n_t ? m->n_t : 1) * sizeof(*ts));
	uint32_t *ks = malloc((m->n_kv ? m->n_kv : 1) * sizeof(*ks));
	size_t nt = 0, nk = 0;
	int rc;
	if (!ts || !ks) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->n_t; i++)
		if (!m->t[i].deleted)
			ts[nt++] = (uint32_t)i;
	/* safetensors metadata holds strings: a sharded index's other values (total_size)
	 * describe the set, not the merged file */
	for (size_t i = 0; i < m->n_kv; i++)
		if (!m->kv[i].deleted && m->kv[i].type == TFS_GGUF_STRING)
			ks[nk++] = (uint32_t)i;
	rc = tfs_safetensors_image(out, m, ts, nt, ks, nk, NULL, err);
out:
	free(ts);
	free(ks);
	return rc;
}

/*
 * Writes one safetensors file to fd: tensors ts[0..nt) (slots of m) in that order, the
 * keys keys[0..nk) as "__metadata__" (all must be strings).
 */
int tfs_safetensors_write_file(const tfs_model *m, const uint32_t *ts, size_t nt,
			       const uint32_t *keys, size_t nk, const json_t *meta, int fd,
			       const char *path, const tfs_write_opts *o, tfs_error *err)
{
	tfs_image *im;
	uint64_t shift;
	int rc = st_image(&im, m, ts, nt, NULL, keys, nk, meta, 0, err);
	if (rc)
		return rc;
	/* where fd's file system shares extents with the source, the header grows by the
	 * spaces that put most tensors at their source's offset modulo the block size, and
	 * their whole blocks are cloned (see gguf_write_image) */
	uint32_t blk = tfs_image_clone_plan(im, m, fd, 1, &shift);
	if (blk && shift) {
		uint64_t want = im->head.len + shift;
		tfs_image_free(im);
		if ((rc = st_image(&im, m, ts, nt, NULL, keys, nk, meta, want, err)))
			return rc;
	}
	im->clone_blk = blk;
	rc = tfs_image_write(im, m, fd, path, o, err);
	tfs_image_free(im);
	return rc;
}

/* ==== validation of one written file ==== */

static bool same_bytes(const uint8_t *a, const uint8_t *b, uint64_t n)
{
	return n == 0 || memcmp(a, b, (size_t)n) == 0;
}

/* Reads back a file tfs_safetensors_write_file wrote and compares it with what was asked for. */
int tfs_safetensors_check_file(const tfs_model *m, const uint32_t *ts, size_t nt,
			       const uint32_t *keys, size_t nk, const json_t *meta,
			       const char *path, tfs_error *err)
{
	size_t n_meta = 0;
	const char *mk;
	json_t *mv;
	json_object_foreach((json_t *)meta, mk, mv)
		n_meta += json_is_string(mv) && tfs_model_find_kv(m, mk) < 0;
	tfs_model *w = NULL;
	tfs_error e = { 0 };
	int rc = tfs_model_new(&w, &tfs_safetensors_format, path, &e);
	if (!rc)
		rc = tfs_safetensors_open(w, path, &e);
	if (rc)
		goto out;
	size_t live = 0;
	for (size_t i = 0; i < w->n_kv; i++)
		live += !w->kv[i].deleted;
	if (live != nk + n_meta || w->n_t != nt) {
		rc = tfs_error_set(&e, TFS_E_FORMAT, "%zu keys and %zu tensors, expected %zu and %zu",
				   live, w->n_t, nk + n_meta, nt);
		goto out;
	}
	for (size_t i = 0; i < nk; i++) {
		const tfs_kv *a = &m->kv[keys[i]];
		long j = tfs_model_find_kv(w, a->name);
		if (j < 0 || w->kv[j].len != a->len || !same_bytes(w->kv[j].data, a->data, a->len)) {
			rc = tfs_error_set(&e, TFS_E_FORMAT, "key '%s' reads back differently",
					   a->name);
			goto out;
		}
	}
	for (size_t i = 0; i < nt; i++) {
		const tfs_tensor *a = &m->t[ts[i]];
		long j = tfs_model_find_tensor(w, a->name);
		const tfs_tensor *b = j >= 0 ? &w->t[j] : NULL;
		bool ok = b && a->dtype == b->dtype && a->nbytes == b->nbytes &&
			  a->n_dims == b->n_dims;
		for (uint32_t k = 0; ok && k < a->n_dims; k++)
			ok = a->ne[k] == b->ne[k];
		if (ok && !tfs_source_data(&m->src[a->src])) { /* no mapping of its data */
			bool differ;
			ok = tfs_source_samples_differ(&differ, &m->src[a->src], a->offset,
						       w->src[b->src].map + b->offset, a->nbytes,
						       &e) == 0 && !differ;
		} else if (ok) {
			const uint8_t *pa = m->src[a->src].map + a->offset;
			const uint8_t *pb = w->src[b->src].map + b->offset;
			uint64_t n = a->nbytes;
			bool staged = a->offset == 0 && m->src[a->src].size == n;
			if (staged || n <= 3 * 4096)
				ok = same_bytes(pa, pb, n);
			else
				ok = same_bytes(pa, pb, 4096) &&
				     same_bytes(pa + n / 2, pb + n / 2, 4096) &&
				     same_bytes(pa + n - 4096, pb + n - 4096, 4096);
		}
		if (!ok) {
			rc = tfs_error_set(&e, TFS_E_FORMAT, "tensor '%s' reads back differently",
					   a->name);
			goto out;
		}
	}
out:
	tfs_model_free(w);
	if (rc)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: the new file does not read back as written (%s); nothing "
				     "was replaced", path, e.msg);
	return 0;
}

/* ==== one file ==== */

static int push_u32(uint32_t **v, size_t *n, size_t *cap, uint32_t x)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		uint32_t *p = realloc(*v, nc * sizeof(*p));
		if (!p)
			return TFS_E_NOMEM;
		*v = p;
		*cap = nc;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static int write_single(tfs_model *m, const tfs_write_opts *o, tfs_commit *c, tfs_error *err)
{
	uint32_t *ts = NULL, *ks = NULL;
	size_t nt = 0, ct = 0, nk = 0, ck = 0;
	char *final = NULL;
	const char *tmp;
	int fd, rc;
	for (size_t i = 0; i < m->n_t; i++)
		if (!m->t[i].deleted && push_u32(&ts, &nt, &ct, (uint32_t)i))
			goto nomem;
	for (size_t i = 0; i < m->n_kv; i++)
		if (!m->kv[i].deleted && push_u32(&ks, &nk, &ck, (uint32_t)i))
			goto nomem;
	if (!(final = tfs_output_path(m, o)))
		goto nomem;
	if ((rc = tfs_commit_add(c, final, &fd, &tmp, err)))
		goto out;
	if ((rc = tfs_safetensors_write_file(m, ts, nt, ks, nk, NULL, fd, tmp, o, err)) ||
	    (rc = tfs_commit_seal(c, err)))
		goto out;
	rc = tfs_safetensors_check_file(m, ts, nt, ks, nk, NULL, tmp, err);
out:
	free(final);
	free(ts);
	free(ks);
	return rc;
nomem:
	rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	goto out;
}

/* ==== a sharded set ==== */

static bool in_list(char *const *v, uint32_t n, const char *s)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* Whether shard sh's file already holds exactly tensors ts and metadata keys ks. */
static bool shard_unchanged(const tfs_model *m, const tfs_safetensors_shard *sh, const uint32_t *ts,
			    size_t nt, const uint32_t *ks, size_t nk)
{
	const tfs_source *s = &m->src[sh->src];
	if (nt != sh->n_tensors || s->size < 8 + sh->header_len)
		return false;
	json_t *h = json_loadb((const char *)s->map + 8, (size_t)sh->header_len, 0, NULL);
	json_t *meta = json_object_get(h, "__metadata__");
	bool same = h != NULL && json_object_size(meta) == nk;
	for (size_t i = 0; same && i < nt; i++) {
		const tfs_tensor *t = &m->t[ts[i]];
		json_t *e = json_object_get(h, t->name);
		json_t *offs = json_object_get(e, "data_offsets");
		same = t->src == sh->src && e &&
		       (uint64_t)json_integer_value(json_array_get(offs, 0)) + 8 + sh->header_len ==
			       t->offset;
	}
	for (size_t i = 0; same && i < nk; i++) {
		const tfs_kv *kv = &m->kv[ks[i]];
		json_t *v = json_object_get(meta, kv->name);
		size_t n;
		const char *str = kv->type == TFS_GGUF_STRING ? payload_str(kv, &n) : NULL;
		same = str && json_is_string(v) && json_string_length(v) == n &&
		       memcmp(json_string_value(v), str, n) == 0;
	}
	json_decref(h);
	return same;
}

/* An index "metadata" value for kv: the JSON it came from when it was an array or object. */
static json_t *index_value(const tfs_kv *kv, const json_t *orig)
{
	const uint8_t *p = kv->data;
	switch (kv->type) {
	case TFS_GGUF_STRING: {
		size_t n = (size_t)(kv->len - 8);
		if (json_is_array(orig) || json_is_object(orig)) {
			json_t *v = json_loadb((const char *)p + 8, n, JSON_DECODE_ANY, NULL);
			if (v)
				return v;
		}
		return json_stringn((const char *)p + 8, n);
	}
	case TFS_GGUF_UINT8: return json_integer(p[0]);
	case TFS_GGUF_INT8: return json_integer((int8_t)p[0]);
	case TFS_GGUF_UINT16: return json_integer(tfs_le16(p));
	case TFS_GGUF_INT16: return json_integer((int16_t)tfs_le16(p));
	case TFS_GGUF_UINT32: return json_integer(tfs_le32(p));
	case TFS_GGUF_INT32: return json_integer((int32_t)tfs_le32(p));
	case TFS_GGUF_UINT64:
		return tfs_le64(p) > INT64_MAX ? NULL : json_integer((json_int_t)tfs_le64(p));
	case TFS_GGUF_INT64: return json_integer((json_int_t)tfs_le64(p));
	case TFS_GGUF_BOOL: return json_boolean(p[0] != 0);
	case TFS_GGUF_FLOAT32: {
		float f;
		memcpy(&f, p, 4);
		return json_real(f);
	}
	case TFS_GGUF_FLOAT64: {
		double d;
		memcpy(&d, p, 8);
		return json_real(d);
	}
	default:
		return NULL;
	}
}

static char *dir_join(const char *file_in_dir, const char *name)
{
	const char *base = tfs_basename(file_in_dir);
	char *s;
	if (asprintf(&s, "%.*s%s", (int)(base - file_in_dir), file_in_dir, name) < 0)
		return NULL;
	return s;
}

/* Whether the set is written into another directory than its source's (then every shard
 * is written there, changed or not). */
static bool written_elsewhere(const tfs_model *m, const char *index_final)
{
	char *src_real = realpath(m->path, NULL), *d = dir_join(index_final, ".");
	char *out_real = d ? realpath(d, NULL) : NULL;
	bool elsewhere = true;
	if (src_real && out_real) {
		const char *b = tfs_basename(src_real);
		elsewhere = strlen(out_real) != (size_t)(b - src_real - 1) ||
			    strncmp(out_real, src_real, (size_t)(b - src_real - 1)) != 0;
	}
	free(d);
	free(src_real);
	free(out_real);
	return elsewhere;
}

/* Each tensor's shard (readers pushed the shards' tensors in shard order; new ones go into
 * the last), and the live tensors' total size. */
static uint64_t shard_homes(const tfs_model *m, const tfs_safetensors_layout *l, uint32_t *home)
{
	uint64_t total_size = 0, end = l->shards[0].n_tensors;
	size_t k = 0;
	for (size_t i = 0; i < m->n_t; i++) {
		while (k + 1 < l->n_shards && i >= end)
			end += l->shards[++k].n_tensors;
		home[i] = (uint32_t)k;
		if (!m->t[i].deleted)
			total_size += m->t[i].nbytes;
	}
	return total_size;
}

/* Shard s, written (through c) when it changed or the set goes elsewhere. */
static int write_shard(tfs_model *m, const tfs_safetensors_layout *l, size_t s,
		       const uint32_t *home, bool elsewhere, const char *index_final,
		       const tfs_write_opts *o, tfs_commit *c, tfs_error *err)
{
	const tfs_safetensors_shard *sh = &l->shards[s];
	uint32_t *ts = NULL, *ks = NULL;
	size_t nt = 0, ct = 0, nk = 0, ck = 0;
	char *final = NULL;
	int rc = 0;
	for (size_t i = 0; i < m->n_t && !rc; i++)
		if (!m->t[i].deleted && home[i] == s && push_u32(&ts, &nt, &ct, (uint32_t)i))
			rc = TFS_E_NOMEM;
	for (uint32_t i = 0; i < sh->n_meta_keys && !rc; i++) {
		long j = tfs_model_find_kv(m, sh->meta_keys[i]);
		if (j >= 0 && push_u32(&ks, &nk, &ck, (uint32_t)j))
			rc = TFS_E_NOMEM;
	}
	if (rc) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	} else if (elsewhere || !shard_unchanged(m, sh, ts, nt, ks, nk)) {
		const char *tmp;
		int fd;
		if (!(final = dir_join(index_final, m->src[sh->src].label)))
			rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		else if (!(rc = tfs_commit_add(c, final, &fd, &tmp, err)) &&
			 !(rc = tfs_safetensors_write_file(m, ts, nt, ks, nk, NULL, fd, tmp, o,
							   err)) &&
			 !(rc = tfs_commit_seal(c, err)))
			rc = tfs_safetensors_check_file(m, ts, nt, ks, nk, NULL, tmp, err);
	}
	free(final);
	free(ts);
	free(ks);
	return rc;
}

/* The index document: its other members as they were, then metadata (the keys no shard
 * holds) and weight_map.  *out is allocated text. */
static int index_text(const tfs_model *m, const tfs_safetensors_layout *l, const uint32_t *home,
		      char **out, tfs_error *err)
{
	json_error_t je;
	json_t *root = json_loads(l->index_rest ? l->index_rest : "{}", 0, &je);
	json_t *ometa = json_object_get(root, "metadata");
	json_t *meta = json_object(), *wm = json_object();
	int rc = 0;
	if (!root || !meta || !wm)
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	for (size_t i = 0; !rc && i < m->n_kv; i++) {
		const tfs_kv *kv = &m->kv[i];
		bool in_shard = false;
		if (kv->deleted)
			continue;
		for (size_t s = 0; s < l->n_shards && !in_shard; s++)
			in_shard = in_list(l->shards[s].meta_keys, l->shards[s].n_meta_keys,
					   kv->name);
		/* a shard's key belongs to the shard, unless the index had it too (then both) */
		if (in_shard && !json_object_get(ometa, kv->name))
			continue;
		json_t *v = index_value(kv, json_object_get(ometa, kv->name));
		if (!v)
			rc = tfs_error_set(err, TFS_E_INVALID,
					   "%s: key '%s' has a type the index's metadata cannot hold",
					   m->path, kv->name);
		else
			json_object_set_new(meta, kv->name, v);
	}
	for (size_t i = 0; !rc && i < m->n_t; i++)
		if (!m->t[i].deleted)
			json_object_set_new(wm, m->t[i].name,
					    json_string(m->src[l->shards[home[i]].src].label));
	if (!rc) {
		if (json_object_size(meta) || ometa)
			json_object_set(root, "metadata", meta);
		json_object_set(root, "weight_map", wm);
		if (!(*out = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS)))
			rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	json_decref(meta);
	json_decref(wm);
	json_decref(root);
	return rc;
}

static int write_sharded(tfs_model *m, const tfs_safetensors_layout *l, const tfs_write_opts *o,
			 tfs_commit *c, tfs_error *err)
{
	char *index_final = tfs_output_path(m, o), *text = NULL;
	uint32_t *home = calloc(m->n_t ? m->n_t : 1, sizeof(*home));
	int rc = 0;
	if (!index_final || !home || l->n_shards == 0) {
		rc = tfs_error_set(err, l->n_shards ? TFS_E_NOMEM : TFS_E_INVALID,
				   l->n_shards ? "out of memory" : "%s: a set without shards", m->path);
		goto out;
	}
	bool elsewhere = written_elsewhere(m, index_final);
	uint64_t total_size = shard_homes(m, l, home);
	/* total_size in the index is recomputed (and the model's key follows) */
	if (tfs_model_find_kv(m, "total_size") >= 0 &&
	    in_list(l->index_meta_keys, l->n_index_meta_keys, "total_size")) {
		uint8_t *p = malloc(8);
		if (!p) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
			goto out;
		}
		memcpy(p, &total_size, 8);
		if ((rc = tfs_model_set_kv(m, "total_size", TFS_GGUF_UINT64, p, 8, err)))
			goto out;
	}
	for (size_t s = 0; s < l->n_shards && !rc; s++)
		rc = write_shard(m, l, s, home, elsewhere, index_final, o, c, err);
	if (!rc)
		rc = index_text(m, l, home, &text, err);
	if (!rc) {
		const char *tmp;
		int fd;
		size_t n = strlen(text);
		text[n] = '\n';
		if (!(rc = tfs_commit_add(c, index_final, &fd, &tmp, err)) &&
		    !(rc = tfs_io_pwrite(fd, tmp, 0, text, n + 1, err)))
			rc = tfs_commit_seal(c, err);
	}
out:
	free(text);
	free(home);
	free(index_final);
	return rc;
}

int tfs_safetensors_write(tfs_model *m, const tfs_write_opts *o, tfs_commit *c, tfs_error *err)
{
	const tfs_safetensors_layout *l = m->priv;
	if (l && l->index_path)
		return write_sharded(m, l, o, c, err);
	return write_single(m, o, c, err);
}

/* ==== the format ==== */

static const char *st_image_name(const tfs_model *m)
{
	(void)m;
	return "model.safetensors";
}

static bool st_gguf_encoded(const tfs_model *m)
{
	(void)m;
	return false;
}

/* The table sits with the writer: it names the reader's operations (safetensors.c) and the
 * writer's, and the writer reads its files back through it. */
const tfs_format_ops tfs_safetensors_format = {
	.name = "safetensors",
	.id = TFS_FMT_SAFETENSORS,
	.probe = tfs_safetensors_probe,
	.open = tfs_safetensors_open_probed,
	.free_priv = tfs_safetensors_layout_free,
	.image_name = st_image_name,
	.image = tfs_safetensors_image_all,
	.write = tfs_safetensors_write,
	.gguf_encoded = st_gguf_encoded,
	.check_kv = tfs_safetensors_check_kv,
	.bytes_dtype = TFS_DT_U8,
	.remote_writable = true,
};
