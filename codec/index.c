/* index.c - index.json and the file-name encoding of the mount. */
#include "internal.h"

#include <jansson.h>
#include <stdlib.h>

/* ==== names ==== */

int tfs_name_encode(tfs_buf *out, const char *name)
{
	size_t start = out->len;
	int rc = 0;
	if (strcmp(name, ".") == 0)
		return tfs_buf_append(out, "%2E", 3);
	if (strcmp(name, "..") == 0)
		return tfs_buf_append(out, "%2E%2E", 6);
	for (const char *p = name; *p && !rc; p++) {
		if (*p == '%')
			rc = tfs_buf_append(out, "%25", 3);
		else if (*p == '/')
			rc = tfs_buf_append(out, "%2F", 3);
		else
			rc = tfs_buf_append(out, p, 1);
	}
	if (rc)
		return rc;
	if (out->len - start > 255) {
		size_t cut = 200;
		/* do not split a %XX escape */
		for (size_t k = 1; k <= 2; k++)
			if (out->data[start + cut - k] == '%')
				cut -= k;
		out->len = start + cut;
		uint64_t h = 1469598103934665603ull;
		for (const char *p = name; *p; p++) {
			h ^= (uint8_t)*p;
			h *= 1099511628211ull;
		}
		return tfs_buf_printf(out, "%%~%016llx", (unsigned long long)h);
	}
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

int tfs_name_decode(tfs_buf *out, const char *s)
{
	for (const char *p = s; *p; p++) {
		char c = *p;
		if (c == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
			int v = hexval(p[1]) * 16 + hexval(p[2]);
			if (v == 0)
				return TFS_E_INVALID;
			c = (char)v;
			p += 2;
		}
		if (tfs_buf_append(out, &c, 1))
			return TFS_E_NOMEM;
	}
	return 0;
}

/* ==== index.json ==== */

static json_t *ne_array(const int64_t *ne, uint32_t n, bool reversed)
{
	json_t *a = json_array();
	for (uint32_t k = 0; k < n; k++)
		json_array_append_new(a, json_integer(ne[reversed ? n - 1 - k : k]));
	return a;
}

static const char *qmode_name(tfs_qmode q)
{
	switch (q) {
	case TFS_QMODE_AFFINE: return "affine";
	case TFS_QMODE_NVFP4: return "nvfp4";
	case TFS_QMODE_MXFP4: return "mxfp4";
	case TFS_QMODE_MXFP8: return "mxfp8";
	default: return "none";
	}
}

/* ==== names that are not UTF-8 ====
 * jansson writes UTF-8 only (a name it cannot write made the whole dump fail).  A name's
 * bytes that are not UTF-8 are written as \udcXX, Python's surrogateescape, as metadata
 * text writes them: json_name() puts each such byte, and each 0x01 byte, into the document
 * as 0x01 and two hex digits; dumps() turns the dumped "\u0001XX" into "\udcXX" (or back
 * into "\u0001").  So every string of the document that comes from the model (names,
 * labels, paths, media types) goes through json_name(). */

static json_t *json_name(const char *s)
{
	size_t n = strlen(s);
	if (tfs_utf8_valid(s, n) && !memchr(s, 1, n))
		return json_stringn_nocheck(s, n);
	tfs_buf b = { 0 };
	for (size_t i = 0; i < n;) {
		uint8_t c = (uint8_t)s[i];
		size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
			 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
		if (c != 1 && k && k <= n - i && tfs_utf8_valid(s + i, k)) {
			tfs_buf_append(&b, s + i, k);
			i += k;
		} else {
			tfs_buf_printf(&b, "\x01%02x", c);
			i++;
		}
	}
	json_t *j = b.data ? json_stringn_nocheck(b.data, b.len) : NULL;
	tfs_buf_free(&b);
	return j;
}

static char *dumps(const json_t *root)
{
	char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	char *r = s, *w = s;
	while (s && *r) {
		if (!strncmp(r, "\\u0001", 6) && r[6] && r[7]) {
			bool same = r[6] == '0' && r[7] == '1';
			memcpy(w, same ? "\\u0001" : "\\udc", same ? 6 : 4);
			w += same ? 6 : 4;
			if (!same) {
				*w++ = r[6];
				*w++ = r[7];
			}
			r += 8;
		} else {
			if (*r == '\\' && r[1]) /* an escape pair: its second char starts nothing */
				*w++ = *r++;
			*w++ = *r++;
		}
	}
	if (s)
		*w = '\0';
	return s;
}

int tfs_model_index_json(tfs_buf *out, const tfs_model *m, tfs_error *err)
{
	json_t *root = json_object();
	json_t *keys = json_array(), *tensors = json_array(), *files = json_array(),
	       *sources = json_array();
	tfs_buf b = { 0 };
	int rc = 0;

	json_object_set_new(root, "format", json_string(tfs_model_format_name(m)));
	/* the absolute path, whatever the caller typed (an Ollama name stays a name) */
	char *abs = realpath(m->path, NULL);
	json_object_set_new(root, "source", json_name(abs ? abs : m->path));
	free(abs);
	if (m->gguf_version) {
		json_object_set_new(root, "version", json_integer(m->gguf_version));
		json_object_set_new(root, "alignment", json_integer(m->alignment));
		json_object_set_new(root, "data_offset", json_integer((json_int_t)m->data_offset));
	}
	for (size_t i = 0; i < m->n_src; i++) {
		if (m->src[i].staged && m->src[i].fd < 0)
			continue; /* a superseded staged file, closed */
		json_t *s = json_object();
		json_object_set_new(s, "file", json_name(m->src[i].label));
		json_object_set_new(s, "path", json_name(m->src[i].path));
		json_object_set_new(s, "size", json_integer((json_int_t)m->src[i].size));
		json_array_append_new(sources, s);
	}
	for (size_t i = 0; i < m->n_kv && !rc; i++) {
		const tfs_kv *kv = &m->kv[i];
		if (kv->deleted)
			continue;
		b.len = 0;
		json_t *k = json_object();
		json_object_set_new(k, "name", json_name(kv->name));
		if (tfs_value_type_name(&b, kv->type, kv->data, kv->len) == 0)
			json_object_set_new(k, "type", json_string(b.data));
		b.len = 0;
		if (tfs_name_encode(&b, kv->name) == 0)
			json_object_set_new(k, "file", json_name(b.data));
		json_array_append_new(keys, k);
	}
	for (size_t i = 0; i < m->n_t && !rc; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted)
			continue;
		const tfs_dtype_info *d = tfs_dtype(t->dtype);
		json_t *o = json_object();
		json_object_set_new(o, "name", json_name(t->name));
		b.len = 0;
		if (tfs_name_encode(&b, t->name) == 0)
			json_object_set_new(o, "file", json_name(b.data));
		json_object_set_new(o, "dtype", json_string(d ? d->name : "unknown"));
		json_object_set_new(o, "ne", ne_array(t->ne, t->n_dims, false));
		json_object_set_new(o, "shape", ne_array(t->ne, t->n_dims, true));
		json_object_set_new(o, "offset", json_integer((json_int_t)t->offset));
		json_object_set_new(o, "nbytes", json_integer((json_int_t)t->nbytes));
		if (t->src >= 0 && (size_t)t->src < m->n_src)
			json_object_set_new(o, "source", json_name(m->src[t->src].label));
		const char *why = NULL;
		if (tfs_tensor_has_f32(m, i, &why)) {
			uint32_t nd;
			int64_t ne[TFS_MAX_DIMS + 1];
			tfs_tensor_f32_shape(m, i, &nd, ne);
			json_object_set_new(o, "f32_shape", ne_array(ne, nd, true));
		} else {
			json_object_set_new(o, "f32", json_false());
			json_object_set_new(o, "f32_unavailable", json_string(why ? why : "unknown"));
		}
		if (t->q.mode != TFS_QMODE_NONE) {
			json_t *q = json_object();
			json_object_set_new(q, "mode", json_string(qmode_name(t->q.mode)));
			json_object_set_new(q, "bits", json_integer(t->q.bits));
			json_object_set_new(q, "group_size", json_integer(t->q.group));
			if (t->q_scale >= 0)
				json_object_set_new(q, "scale", json_name(m->t[t->q_scale].name));
			if (t->q_bias >= 0)
				json_object_set_new(q, "bias", json_name(m->t[t->q_bias].name));
			if (t->q_gscale >= 0)
				json_object_set_new(q, "global_scale", json_name(m->t[t->q_gscale].name));
			json_object_set_new(o, "quantization", q);
		}
		json_array_append_new(tensors, o);
	}
	for (size_t i = 0; i < m->n_x; i++) {
		const tfs_extra *x = &m->x[i];
		if (x->deleted)
			continue;
		json_t *o = json_object();
		json_object_set_new(o, "name", json_name(x->name));
		json_object_set_new(o, "media_type", json_name(x->media_type));
		json_object_set_new(o, "size", json_integer((json_int_t)x->size));
		if (x->src >= 0 && (size_t)x->src < m->n_src)
			json_object_set_new(o, "source", json_name(m->src[x->src].label));
		json_array_append_new(files, o);
	}
	json_object_set_new(root, "sources", sources);
	json_object_set_new(root, "keys", keys);
	json_object_set_new(root, "tensors", tensors);
	json_object_set_new(root, "layers", files);
	tfs_buf_free(&b);

	char *s = dumps(root);
	json_decref(root);
	if (!s)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: cannot build index.json", m->path);
	rc = tfs_buf_append(out, s, strlen(s));
	if (!rc)
		rc = tfs_buf_append(out, "\n", 1);
	free(s);
	if (rc)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	return 0;
}
