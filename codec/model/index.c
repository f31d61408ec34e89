/* index.c - index.json and the file-name encoding of the mount. */
#include "index.h"
#include "image.h"
#include "model_impl.h"
#include "concat.h"
#include "names.h"
#include "sorted.h"
#include "value.h"
#include "dtype.h"

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
	if (!s || !strstr(s, "\\u0001"))
		return s; /* nothing marked (most pieces) */
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

/* ==== values as JSON ==== */

int tfs_value_format_json(tfs_buf *out, uint32_t type, const uint8_t *data, uint64_t len,
			  tfs_error *err)
{
	if (type == TFS_GGUF_ARRAY)
		return tfs_value_format(out, type, data, len, err);
	/* a scalar is formatted as the one element of an array (elements are JSON), brackets
	 * dropped: one escaping and float rule for both */
	uint64_t n = 1, wlen;
	if (tfs_add_overflow(len, 12, &wlen))
		return tfs_error_set(err, TFS_E_INVALID, "value too large");
	uint8_t *w = malloc(wlen);
	if (!w)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory formatting a value");
	memcpy(w, &type, 4);
	memcpy(w + 4, &n, 8);
	memcpy(w + 12, data, len);
	size_t start = out->len;
	int rc = tfs_value_format(out, TFS_GGUF_ARRAY, w, wlen, err);
	free(w);
	if (rc)
		return rc;
	if (out->len < start + 2 || out->data[start] != '[' || out->data[out->len - 1] != ']')
		return tfs_error_set(err, TFS_E_FORMAT, "value of type %u does not format", type);
	memmove(out->data + start, out->data + start + 1, out->len - start - 2);
	out->len -= 2;
	out->data[out->len] = '\0';
	return 0;
}

uint64_t tfs_model_param_count(const tfs_model *m)
{
	bool *companion = calloc(m->n_t ? m->n_t : 1, sizeof(bool));
	uint64_t total = 0;
	for (size_t i = 0; companion && i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted || t->q.mode == TFS_QMODE_NONE)
			continue;
		int32_t c[3] = { t->q_scale, t->q_bias, t->q_gscale };
		for (int k = 0; k < 3; k++)
			if (c[k] >= 0 && (size_t)c[k] < m->n_t)
				companion[c[k]] = true;
	}
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted || (companion && companion[i]))
			continue;
		uint32_t nd = t->n_dims;
		int64_t ne[TFS_MAX_DIMS + 1];
		memcpy(ne, t->ne, sizeof(t->ne));
		if (t->q.mode != TFS_QMODE_NONE)
			tfs_tensor_f32_shape(m, i, &nd, ne);
		uint64_t n = 1;
		for (uint32_t k = 0; k < nd; k++)
			if (tfs_mul_overflow(n, (uint64_t)ne[k], &n))
				n = UINT64_MAX;
		total = total + n < total ? UINT64_MAX : total + n;
	}
	free(companion);
	return total;
}

/* ==== index.json ==== */

/* A key's value is put in the document as this placeholder string (with the key's slot
 * number after it) and replaced by its exact JSON text after jansson has dumped the rest:
 * jansson has no integers past INT64_MAX and no shortest round-trip floats.  Dumped, it
 * is "\u0000tfs-value:N": no key or tensor name can hold a NUL, so no dumped string
 * begins with that escape. */
#define VALUE_MARK_TAIL "tfs-value:"
#define VALUE_MARK_DUMPED "\"\\u0000tfs-value:"
/* ==== the index's parts ==== */

static json_t *sources_json(const tfs_model *m)
{
	json_t *sources = json_array();
	for (size_t i = 0; i < m->n_src; i++) {
		if (m->src[i].staged && m->src[i].fd < 0)
			continue; /* a superseded staged file, closed */
		json_t *s = json_object();
		json_object_set_new(s, "file", json_name(m->src[i].label));
		json_object_set_new(s, "path", json_name(m->src[i].path));
		json_object_set_new(s, "size", json_integer((json_int_t)m->src[i].size));
		json_array_append_new(sources, s);
	}
	return sources;
}

/* Key slot i: name, type, file; with values, a mark dump() replaces by the value. */
static json_t *key_json(const tfs_model *m, size_t i, bool values, tfs_buf *b)
{
	const tfs_kv *kv = &m->kv[i];
	json_t *k = json_object();
	json_object_set_new(k, "name", json_name(kv->name));
	b->len = 0;
	if (tfs_value_type_name(b, kv->type, kv->data, kv->len) == 0)
		json_object_set_new(k, "type", json_string(b->data));
	b->len = 0;
	if (tfs_name_encode(b, kv->name) == 0)
		json_object_set_new(k, "file", json_name(b->data));
	if (values) {
		char mark[48];
		int n = snprintf(mark, sizeof(mark), "#" VALUE_MARK_TAIL "%zu", i);
		mark[0] = '\0';
		json_object_set_new(k, "value", json_stringn_nocheck(mark, (size_t)n));
	}
	return k;
}

static json_t *quant_json(const tfs_model *m, const tfs_tensor *t)
{
	json_t *q = json_object();
	json_object_set_new(q, "mode", json_string(tfs_qmode_name(t->q.mode)));
	json_object_set_new(q, "bits", json_integer(t->q.bits));
	json_object_set_new(q, "group_size", json_integer(t->q.group));
	if (t->q_scale >= 0)
		json_object_set_new(q, "scale", json_name(m->t[t->q_scale].name));
	if (t->q_bias >= 0)
		json_object_set_new(q, "bias", json_name(m->t[t->q_bias].name));
	if (t->q_gscale >= 0)
		json_object_set_new(q, "global_scale", json_name(m->t[t->q_gscale].name));
	return q;
}

/* A concatenation's pieces (a stacked expert tensor: each expert's shard, offset and bytes),
 * or NULL for any other source. */
static json_t *pieces_json(const tfs_source *s)
{
	size_t n;
	const tfs_concat_piece *p = tfs_concat_pieces(s, &n);
	if (!p)
		return NULL;
	json_t *a = json_array();
	for (size_t k = 0; k < n; k++) {
		json_t *o = json_object();
		json_object_set_new(o, "source", json_name(tfs_source_label(p[k].src)));
		json_object_set_new(o, "offset", json_integer((json_int_t)p[k].off));
		json_object_set_new(o, "nbytes", json_integer((json_int_t)p[k].len));
		json_array_append_new(a, o);
	}
	return a;
}

/* Tensor slot i: name, file, dtype, ne and shape, place, its f32 view, its quantization. */
static json_t *tensor_json(const tfs_model *m, size_t i, tfs_buf *b)
{
	const tfs_tensor *t = &m->t[i];
	const tfs_dtype_info *d = tfs_dtype(t->dtype);
	json_t *o = json_object();
	json_object_set_new(o, "name", json_name(t->name));
	b->len = 0;
	if (tfs_name_encode(b, t->name) == 0)
		json_object_set_new(o, "file", json_name(b->data));
	json_object_set_new(o, "dtype", json_string(d ? d->name : "unknown"));
	json_object_set_new(o, "ne", ne_array(t->ne, t->n_dims, false));
	json_object_set_new(o, "shape", ne_array(t->ne, t->n_dims, true));
	json_object_set_new(o, "offset", json_integer((json_int_t)t->offset));
	json_object_set_new(o, "nbytes", json_integer((json_int_t)t->nbytes));
	if (t->src >= 0 && (size_t)t->src < m->n_src) {
		json_object_set_new(o, "source", json_name(m->src[t->src].label));
		json_t *pj = pieces_json(&m->src[t->src]);
		if (pj)
			json_object_set_new(o, "pieces", pj);
	}
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
	if (t->q.mode != TFS_QMODE_NONE)
		json_object_set_new(o, "quantization", quant_json(m, t));
	return o;
}

static json_t *extra_json(const tfs_model *m, const tfs_extra *x)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_name(x->name));
	json_object_set_new(o, "media_type", json_name(x->media_type));
	json_object_set_new(o, "size", json_integer((json_int_t)x->size));
	if (x->src >= 0 && (size_t)x->src < m->n_src)
		json_object_set_new(o, "source", json_name(m->src[x->src].label));
	return o;
}


/* A string key's value of m, or NULL. */
static json_t *kv_string(const tfs_model *m, const char *name)
{
	long i = tfs_model_find_kv(m, name);
	if (i < 0 || m->kv[i].type != TFS_GGUF_STRING || m->kv[i].len < 8)
		return NULL;
	uint64_t n = tfs_le64(m->kv[i].data);
	return n <= m->kv[i].len - 8 ? json_stringn((const char *)m->kv[i].data + 8, (size_t)n)
				     : NULL;
}

/* A model attached to the model (model_impl.h: its kind has an index member; views/hf.c: a
 * Hugging Face repo's GGUF view, its projector): its file (named name), or why there is
 * none. */
static json_t *attached_json(const tfs_model *v, const char *why, const char *name)
{
	uint64_t size;
	if (!v || tfs_model_image_size(&size, v, NULL))
		return json_pack("{s:o}", "unavailable", json_name(why ? why : "unknown"));
	json_t *o = json_pack("{s:s, s:I, s:I, s:I}", "name", name, "size",
			      (json_int_t)size, "keys", (json_int_t)v->n_kv, "tensors",
			      (json_int_t)v->n_t);
	json_t *arch = kv_string(v, "general.architecture");
	if (arch)
		json_object_set_new(o, "architecture", arch);
	return o;
}

/* The document's first fields, up to "sources" (the pieces below add "keys" and the rest). */
static json_t *head_json(const tfs_model *m, bool values)
{
	json_t *root = json_object();
	json_object_set_new(root, "format", json_string(tfs_model_format_name(m)));
	/* the absolute path, whatever the caller typed (an Ollama name stays a name) */
	json_object_set_new(root, "source", json_name(m->abs_path ? m->abs_path : m->path));
	if (m->gguf_version) {
		json_object_set_new(root, "version", json_integer(m->gguf_version));
		json_object_set_new(root, "alignment", json_integer(m->alignment));
		json_object_set_new(root, "data_offset", json_integer((json_int_t)m->data_offset));
	}
	/* the whole model as one file (model.gguf / model.safetensors at the mount's root) */
	uint64_t isize;
	if (tfs_image_name(m) && tfs_model_image_size(&isize, m, NULL) == 0)
		json_object_set_new(root, "model_file",
				    json_pack("{s:s, s:I}", "name", tfs_image_name(m), "size",
					      (json_int_t)isize));
	tfs_buf cfg = { 0 };
	tfs_error cerr;
	if (tfs_config_name(m) && tfs_model_config_json(&cfg, m, &cerr) == 0)
		json_object_set_new(root, "config_file",
				    json_pack("{s:s, s:I}", "name", tfs_config_name(m), "size",
					      (json_int_t)cfg.len));
	tfs_buf_free(&cfg);
	/* the models attached to it that their kind lists, in the order attached */
	for (size_t i = 0; i < m->n_att; i++) {
		const struct tfs_attached *a = &m->att[i];
		const tfs_attach_kind *k = a->kind;
		if (!k->index_member || !(a->obj || a->why))
			continue;
		const char *file = k->index_file ? k->index_file
				   : a->obj ? tfs_image_name(a->obj) : "";
		json_object_set_new(root, k->index_member, attached_json(a->obj, a->why, file));
	}
	if (values) {
		uint64_t bytes = 0;
		for (size_t i = 0; i < m->n_t; i++)
			bytes += m->t[i].deleted ? 0 : m->t[i].nbytes;
		json_object_set_new(root, "parameters", json_integer((json_int_t)tfs_model_param_count(m)));
		json_object_set_new(root, "tensor_bytes", json_integer((json_int_t)bytes));
	}
	json_object_set_new(root, "sources", sources_json(m));
	return root;
}

static json_t *layers_json(const tfs_model *m)
{
	json_t *files = json_array();
	for (size_t i = 0; i < m->n_x; i++)
		if (!m->x[i].deleted)
			json_array_append_new(files, extra_json(m, &m->x[i]));
	return files;
}

/* ==== index.json as a stream of pieces ====
 * The document jansson would dump of the whole model (JSON_INDENT(1), keys in order) is
 * cut into pieces, each a pure function of its slot:
 *
 *   0                  the head: "{", the fields up to "sources", then "keys": [
 *   1 .. n_kv          key slot i: "," unless it is the first live key, a newline, and
 *                      the key's object dumped alone and indented to depth 2 (deleted: "")
 *   n_kv + 1           the separator: "]" closing the keys, then "tensors": [ (with tensors)
 *   then n_t pieces    tensor slot i, as the keys (none without tensors)
 *   last               the tail: "]" closing the tensors, "layers", "}" and a newline
 *
 * Only the head and the tail are kept as text; every INDEX_EVERY-th piece's offset is
 * recorded by a sizing pass at open, so a read regenerates at most INDEX_EVERY pieces
 * before its offset, and a read that goes on where the last one stopped none. */

#define INDEX_EVERY 64
#define KEYS_OPEN ",\n \"keys\": ["
#define TENSORS_OPEN ",\n \"tensors\": ["
#define LAYERS_OPEN ",\n \"layers\": "

struct tfs_index {
	const tfs_model *m;
	bool values, with_tensors;
	size_t n_kv, n_t;           /* key and tensor slots (n_t 0 without tensors) */
	size_t first_kv, first_t;   /* the first live slot (n_kv / n_t: none) */
	size_t n_pieces;
	tfs_buf head, tail;
	uint64_t size;
	uint64_t *marks;            /* marks[k]: offset of piece k * INDEX_EVERY */
	size_t n_marks;
	size_t cur;                 /* the piece held in text (SIZE_MAX: none) */
	uint64_t cur_off;           /* and its offset */
	tfs_buf text, scratch;
};

static int index_nomem(const tfs_index *s, tfs_error *err)
{
	return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory building index.json",
			     s->m->path);
}

/* Appends to out the text in (dumped at depth 0) as it reads at depth: each newline
 * followed by depth more spaces of JSON_INDENT(1); value marks replaced by the values. */
static int emit_text(tfs_index *s, const char *in, int depth, tfs_buf *out, tfs_error *err)
{
	const size_t ml = strlen(VALUE_MARK_DUMPED);
	const char *p = in;
	int rc = 0;
	while (!rc && *p) {
		size_t run = strcspn(p, "\n\"");
		rc = tfs_buf_append(out, p, run);
		p += run;
		if (rc || !*p)
			break;
		if (*p == '\n') {
			rc = tfs_buf_append(out, "\n  ", 1 + (size_t)depth); /* depth <= 2 */
			p++;
			continue;
		}
		if (!s->values || strncmp(p, VALUE_MARK_DUMPED, ml) != 0) {
			rc = tfs_buf_append(out, p++, 1);
			continue;
		}
		char *end;
		unsigned long long slot = strtoull(p + ml, &end, 10);
		if (*end != '"' || slot >= s->m->n_kv)
			return tfs_error_set(err, TFS_E_INVALID, "%s: index.json: internal error: "
					     "bad value mark", s->m->path);
		const tfs_kv *kv = &s->m->kv[slot];
		size_t at = out->len;
		tfs_error verr;
		if (tfs_value_format_json(out, kv->type, kv->data, kv->len, &verr)) {
			/* a value too large to show (an array over the text cap): null */
			out->len = at;
			rc = tfs_buf_append(out, "null", 4);
		}
		p = end + 1;
	}
	return rc ? index_nomem(s, err) : 0;
}

/* Dumps o (taking it) at depth and appends it to out. */
static int emit(tfs_index *s, json_t *o, int depth, tfs_buf *out, tfs_error *err)
{
	char *t = o ? dumps(o) : NULL;
	json_decref(o);
	if (!t)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: cannot build index.json", s->m->path);
	int rc = emit_text(s, t, depth, out, err);
	free(t);
	return rc;
}

/* A key or tensor slot's piece: its separator and its object, at depth 2. */
static int emit_slot(tfs_index *s, json_t *o, bool first, tfs_buf *out, tfs_error *err)
{
	if (tfs_buf_append(out, first ? "\n  " : ",\n  ", first ? 3 : 4)) {
		json_decref(o);
		return index_nomem(s, err);
	}
	return emit(s, o, 2, out, err);
}

/* Appends piece j (see above) to out. */
static int index_piece(tfs_index *s, size_t j, tfs_buf *out, tfs_error *err)
{
	const tfs_model *m = s->m;
	if (j == 0)
		return tfs_buf_append(out, s->head.data, s->head.len) ? index_nomem(s, err) : 0;
	if (--j < s->n_kv) {
		if (m->kv[j].deleted)
			return 0;
		return emit_slot(s, key_json(m, j, s->values, &s->scratch), j == s->first_kv, out,
				 err);
	}
	j -= s->n_kv;
	if (j == 0) {
		const char *close = s->first_kv < s->n_kv ? "\n ]" : "]";
		int rc = tfs_buf_append(out, close, strlen(close));
		if (!rc && s->with_tensors)
			rc = tfs_buf_append(out, TENSORS_OPEN, strlen(TENSORS_OPEN));
		return rc ? index_nomem(s, err) : 0;
	}
	if (--j < s->n_t) {
		if (m->t[j].deleted)
			return 0;
		return emit_slot(s, tensor_json(m, j, &s->scratch), j == s->first_t, out, err);
	}
	return tfs_buf_append(out, s->tail.data, s->tail.len) ? index_nomem(s, err) : 0;
}

/* The head and the tail, as text (see above). */
static int index_ends(tfs_index *s, tfs_error *err)
{
	int rc = emit(s, head_json(s->m, s->values), 0, &s->head, err);
	if (rc)
		return rc;
	/* "{\n ...\n}" without its "\n}" (or "{}" without its "}"), the keys opened */
	bool empty = s->head.len < 3;
	s->head.len -= empty ? 1 : 2;
	size_t skip = empty ? 1 : 0; /* no comma after "{" */
	if (tfs_buf_append(&s->head, &KEYS_OPEN[skip], strlen(KEYS_OPEN) - skip))
		return index_nomem(s, err);
	if (s->with_tensors && tfs_buf_append(&s->tail, s->first_t < s->n_t ? "\n ]" : "]",
					      s->first_t < s->n_t ? 3 : 1))
		return index_nomem(s, err);
	if (tfs_buf_append(&s->tail, LAYERS_OPEN, strlen(LAYERS_OPEN)))
		return index_nomem(s, err);
	rc = emit(s, layers_json(s->m), 1, &s->tail, err);
	if (!rc && tfs_buf_append(&s->tail, "\n}\n", 3))
		rc = index_nomem(s, err);
	return rc;
}

/* A stream with its head and tail built, not yet sized. */
static int index_prepare(tfs_index **out, const tfs_model *m, bool values, bool with_tensors,
			 tfs_error *err)
{
	tfs_index *s = calloc(1, sizeof(*s));
	if (!s)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory building index.json",
				     m->path);
	s->m = m;
	s->values = values;
	s->with_tensors = with_tensors;
	s->n_kv = m->n_kv;
	s->n_t = with_tensors ? m->n_t : 0;
	for (s->first_kv = 0; s->first_kv < s->n_kv && m->kv[s->first_kv].deleted; s->first_kv++)
		;
	for (s->first_t = 0; s->first_t < s->n_t && m->t[s->first_t].deleted; s->first_t++)
		;
	s->n_pieces = s->n_kv + s->n_t + 3;
	s->cur = SIZE_MAX;
	int rc = index_ends(s, err);
	if (rc) {
		tfs_index_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int tfs_index_open(tfs_index **out, const tfs_model *m, bool values, bool with_tensors,
		   tfs_error *err)
{
	tfs_index *s;
	tfs_error_clear(err);
	int rc = index_prepare(&s, m, values, with_tensors, err);
	if (rc)
		return rc;
	s->n_marks = (s->n_pieces + INDEX_EVERY - 1) / INDEX_EVERY;
	s->marks = calloc(s->n_marks, sizeof(*s->marks));
	if (!s->marks)
		rc = index_nomem(s, err);
	uint64_t off = 0;
	for (size_t j = 0; !rc && j < s->n_pieces; j++) {
		if (j % INDEX_EVERY == 0)
			s->marks[j / INDEX_EVERY] = off;
		s->text.len = 0;
		rc = index_piece(s, j, &s->text, err);
		off += s->text.len;
	}
	if (rc) {
		tfs_index_free(s);
		return rc;
	}
	s->size = off;
	*out = s;
	return 0;
}

uint64_t tfs_index_size(const tfs_index *s)
{
	return s->size;
}

/* Makes piece j, at offset at, the one held in s->text. */
static int index_hold(tfs_index *s, size_t j, uint64_t at, tfs_error *err)
{
	if (s->cur == j)
		return 0;
	s->cur = SIZE_MAX;
	if (j >= s->n_pieces)
		return tfs_error_set(err, TFS_E_INVALID, "%s: index.json: internal error: the "
				     "document is shorter than its size", s->m->path);
	s->text.len = 0;
	int rc = index_piece(s, j, &s->text, err);
	if (!rc) {
		s->cur = j;
		s->cur_off = at;
	}
	return rc;
}

int tfs_index_read(size_t *got, tfs_index *s, void *buf, uint64_t off, size_t len,
		   tfs_error *err)
{
	*got = 0;
	if (off >= s->size)
		return 0;
	if (len > s->size - off)
		len = (size_t)(s->size - off);
	/* from the last recorded offset at or before off, or the held piece if it is later */
	size_t lo = tfs_last_at_most(s->marks, s->n_marks, off);
	size_t j = lo * INDEX_EVERY;
	uint64_t at = s->marks[lo];
	if (s->cur != SIZE_MAX && s->cur >= j && s->cur_off <= off) {
		j = s->cur;
		at = s->cur_off;
	}
	while (*got < len) {
		int rc = index_hold(s, j, at, err);
		if (rc)
			return rc;
		uint64_t end = at + s->text.len;
		if (off < end) {
			size_t n = (size_t)(end - off) < len - *got ? (size_t)(end - off) : len - *got;
			memcpy((char *)buf + *got, s->text.data + (off - at), n);
			*got += n;
			off += n;
		}
		if (off >= end) {
			at = end;
			j++;
		}
	}
	return 0;
}

void tfs_index_free(tfs_index *s)
{
	if (!s)
		return;
	tfs_buf_free(&s->head);
	tfs_buf_free(&s->tail);
	tfs_buf_free(&s->text);
	tfs_buf_free(&s->scratch);
	free(s->marks);
	free(s);
}

/* The whole document appended to out: every piece in turn (no sizing pass). */
static int index_whole(tfs_buf *out, const tfs_model *m, bool values, bool with_tensors,
		       tfs_error *err)
{
	tfs_index *s = NULL;
	tfs_error_clear(err);
	int rc = index_prepare(&s, m, values, with_tensors, err);
	for (size_t j = 0; !rc && j < s->n_pieces; j++)
		rc = index_piece(s, j, out, err);
	if (!rc && !out->data && tfs_buf_reserve(out, 0))
		rc = index_nomem(s, err);
	tfs_index_free(s);
	return rc;
}

int tfs_model_index_json(tfs_buf *out, const tfs_model *m, tfs_error *err)
{
	return index_whole(out, m, false, true, err);
}

int tfs_model_info_json(tfs_buf *out, const tfs_model *m, bool with_tensors, tfs_error *err)
{
	return index_whole(out, m, true, with_tensors, err);
}
