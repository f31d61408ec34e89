/*
 * hf_export_kv.c - the GGUF keys of the model a Hugging Face export reads (hf_export.h's
 * tfs_hf_xkv_*): found by name, scalars as numbers, strings and arrays as their bytes; the
 * special token ids and where the files name them; JSON text; the export's list of tensors
 * grown, a tensor made of a key's element (tfs_hf_export_add_kv), and each tensor's name
 * by the row's maps read backwards (tfs_hf_export_mapped_name, tfs_hf_export_add_as).  Its
 * own file so that the export's tensors (hf_export.c), its files (hf_export_config.c,
 * hf_export_json.c) and the rows' xtensor hooks all use it without calling each other (a
 * row may call nothing that reaches the registry).
 */
#include "hf_export.h"
#include "hf_names.h"
#include "hf_plan_impl.h"
#include "hf_vocab.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* ==== the model's keys ==== */

static const tfs_kv *find_kv(const tfs_hf_export *x, const char *name)
{
	char full[256];
	if (name[0] == '.') {
		snprintf(full, sizeof full, "%s%s", x->arch, name);
		name = full;
	}
	long i = tfs_model_find_kv(x->m, name);
	return i < 0 ? NULL : tfs_model_kv(x->m, (size_t)i);
}

static bool scalar_num(uint32_t type, const uint8_t *d, uint64_t len, double *v)
{
	static const uint8_t size[TFS_GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
	if (type >= TFS_GGUF_TYPE_COUNT || !size[type] || len < size[type])
		return false;
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		float f; uint64_t u64; int64_t i64; double g; } u;
	memcpy(&u, d, size[type]);
	switch (type) {
	case TFS_GGUF_UINT8: *v = u.u8; break;
	case TFS_GGUF_INT8: *v = u.i8; break;
	case TFS_GGUF_UINT16: *v = u.u16; break;
	case TFS_GGUF_INT16: *v = u.i16; break;
	case TFS_GGUF_UINT32: *v = u.u32; break;
	case TFS_GGUF_INT32: *v = u.i32; break;
	case TFS_GGUF_FLOAT32: *v = u.f; break;
	case TFS_GGUF_BOOL: *v = u.u8 != 0; break;
	case TFS_GGUF_UINT64: *v = (double)u.u64; break;
	case TFS_GGUF_INT64: *v = (double)u.i64; break;
	default: *v = u.g; break;
	}
	return true;
}

bool tfs_hf_xkv_num(const tfs_hf_export *x, const char *name, double *v)
{
	const tfs_kv *kv = find_kv(x, name);
	return kv && !kv->deleted && scalar_num(kv->type, kv->data, kv->len, v);
}

bool tfs_hf_xkv_f32(const tfs_hf_export *x, const char *name, float *v)
{
	const tfs_kv *kv = find_kv(x, name);
	if (!kv || kv->deleted || kv->type != TFS_GGUF_FLOAT32 || kv->len < 4)
		return false;
	memcpy(v, kv->data, 4);
	return true;
}

const char *tfs_hf_xkv_str(const tfs_hf_export *x, const char *name, size_t *len)
{
	const tfs_kv *kv = find_kv(x, name);
	uint64_t n;
	if (!kv || kv->deleted || kv->type != TFS_GGUF_STRING || kv->len < 8)
		return NULL;
	memcpy(&n, kv->data, 8);
	if (n > kv->len - 8)
		return NULL;
	*len = (size_t)n;
	return (const char *)kv->data + 8;
}

bool tfs_hf_xkv_arr(const tfs_hf_export *x, const char *name, uint32_t *type, uint64_t *n,
		    const uint8_t **data, uint64_t *len)
{
	const tfs_kv *kv = find_kv(x, name);
	if (!kv || kv->deleted || kv->type != TFS_GGUF_ARRAY || kv->len < 12)
		return false;
	memcpy(type, kv->data, 4);
	memcpy(n, kv->data + 4, 8);
	*data = kv->data + 12;
	*len = kv->len - 12;
	return true;
}

/* gguf-py SpecialVocab's special token types, in its order, and the GGUF key of each id */
const char *const tfs_hf_xspecial_types[] = { "bos", "eos", "unk", "sep", "pad", "cls", "mask" };
const char *const tfs_hf_xspecial_keys[] = {
	"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
	"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
	"tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
	"tokenizer.ggml.mask_token_id",
};

void tfs_hf_xspecial_places(const tfs_hf_export *x, uint8_t place[TFS_HF_N_SPECIAL])
{
	const char *pre = "tokenizer.ggml.", *post = "_token_id";
	size_t lp = strlen(pre), ls = strlen(post);
	int run = 1, last = -1;
	memset(place, TFS_HF_SP_NONE, TFS_HF_N_SPECIAL);
	for (size_t i = 0; i < tfs_model_n_kv(x->m); i++) {
		const tfs_kv *kv = tfs_model_kv(x->m, i);
		size_t n = strlen(kv->name);
		if (kv->deleted || n <= lp + ls || strncmp(kv->name, pre, lp) ||
		    strcmp(kv->name + n - ls, post))
			continue;
		int k = -1;
		for (size_t j = 0; j < TFS_HF_N_SPECIAL; j++)
			if (!strcmp(kv->name, tfs_hf_xspecial_keys[j]))
				k = (int)j;
		if (k < 0 || (k <= last && ++run > 2))
			return;
		place[k] = run == 1 ? TFS_HF_SP_BOTH : TFS_HF_SP_CONFIG;
		last = k;
	}
}

/* ==== tensor names and array keys ==== */

/* The next string of an array key's strings at *p (*left bytes left: each a uint64 length,
 * then its bytes), its length in *n; NULL at one that overruns. */
const char *tfs_hf_xnext_str(const uint8_t **p, uint64_t *left, size_t *n)
{
	uint64_t k;
	if (*left < 8)
		return NULL;
	memcpy(&k, *p, 8);
	if (k > *left - 8)
		return NULL;
	const char *s = (const char *)*p + 8;
	*p += 8 + k;
	*left -= 8 + k;
	*n = (size_t)k;
	return s;
}

/* ==== the vocabulary ==== */

bool tfs_hf_xvocab_get(tfs_hf_xvocab *v, const tfs_hf_export *x)
{
	uint32_t t, mt;
	memset(v, 0, sizeof *v);
	if (!tfs_hf_xkv_arr(x, "tokenizer.ggml.tokens", &t, &v->n, &v->tok, &v->tok_len) ||
	    t != TFS_GGUF_STRING)
		return false;
	if (tfs_hf_xkv_arr(x, "tokenizer.ggml.token_type", &v->type_t, &v->n_type, &v->type,
			   &v->type_len) && (v->type_t != TFS_GGUF_INT32 || v->n_type != v->n ||
					     v->type_len < 4 * v->n))
		return false;
	if (tfs_hf_xkv_arr(x, "tokenizer.ggml.merges", &mt, &v->n_merges, &v->merges,
			   &v->merges_len) && mt != TFS_GGUF_STRING)
		return false;
	/* every string inside its key: the walks of its users need not check again */
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	size_t n;
	for (uint64_t i = 0; i < v->n; i++)
		if (!tfs_hf_xnext_str(&p, &left, &n))
			return false;
	p = v->merges;
	left = v->merges_len;
	for (uint64_t i = 0; i < v->n_merges; i++)
		if (!tfs_hf_xnext_str(&p, &left, &n))
			return false;
	return true;
}

int32_t tfs_hf_xvocab_type(const tfs_hf_xvocab *v, uint64_t i)
{
	int32_t t = 1;   /* NORMAL */
	if (v->type)
		memcpy(&t, v->type + 4 * i, 4);
	return t;
}

/* (its bytes in the tokens array) */
const char *tfs_hf_xvocab_text(const tfs_hf_xvocab *v, uint64_t id, size_t *n)
{
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	const char *s = NULL;
	for (uint64_t i = 0; i <= id && i < v->n; i++)
		if (!(s = tfs_hf_xnext_str(&p, &left, n)))
			return NULL;
	return id < v->n ? s : NULL;
}

int tfs_hf_xadded_tokens(tfs_buf *b, const tfs_hf_xvocab *v, uint64_t end, bool unknown)
{
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	bool first = true;
	int rc = tfs_buf_append(b, "[", 1);
	for (uint64_t i = 0; !rc && i < end && i < v->n; i++) {
		size_t n;
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		int32_t t = tfs_hf_xvocab_type(v, i);
		if (!s)
			return TFS_E_FORMAT;
		if (t != TFS_TOK_CONTROL && t != TFS_TOK_USER_DEFINED &&
		    !(unknown && t == TFS_TOK_UNKNOWN))
			continue;
		rc = tfs_buf_printf(b, "%s\n    {\"id\": %llu, \"content\": ", first ? "" : ",",
				    (unsigned long long)i) || tfs_hf_xjstr(b, s, n) ||
		     tfs_buf_printf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": "
				    "false, \"normalized\": false, \"special\": %s}",
				    t == TFS_TOK_USER_DEFINED ? "false" : "true");
		first = false;
	}
	return rc ? rc : tfs_buf_append(b, "\n  ]", 4);
}

/* ==== JSON text ==== */

/* s[0..n) as a JSON string */
int tfs_hf_xjstr(tfs_buf *b, const char *s, size_t n)
{
	int rc = tfs_buf_append(b, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		rc = tfs_buf_append(b, s + run, i - run);
		run = i + 1;
		if (!rc)
			rc = c == '"' ? tfs_buf_append(b, "\\\"", 2) : c == '\\'
			     ? tfs_buf_append(b, "\\\\", 2) : c == '\n' ? tfs_buf_append(b, "\\n", 2)
			     : c == '\t' ? tfs_buf_append(b, "\\t", 2) : c == '\r'
			     ? tfs_buf_append(b, "\\r", 2) : tfs_buf_printf(b, "\\u%04x", c);
	}
	if (!rc)
		rc = tfs_buf_append(b, s + run, n - run);
	return rc ? rc : tfs_buf_append(b, "\"", 1);
}

int tfs_hf_xjcstr(tfs_buf *b, const char *s) { return tfs_hf_xjstr(b, s, strlen(s)); }

/* the shortest decimal that reads back as float32 f, with a '.' or an exponent */
int tfs_hf_xjf32(tfs_buf *b, float f)
{
	char s[48];
	if (!isfinite(f))
		return tfs_buf_printf(b, "%s", isnan(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity");
	for (int p = 1; p <= 9; p++) {
		snprintf(s, sizeof s, "%.*g", p, (double)f);
		if (strtof(s, NULL) == f)
			break;
	}
	/* a whole number as Python writes it (10000.0, not 1e+04) */
	if (strstr(s, "e+") && fabsf(f) < 1e16f && f == truncf(f))
		snprintf(s, sizeof s, "%.1f", (double)f);
	if (!strpbrk(s, ".en"))
		strcat(s, ".0");
	return tfs_buf_printf(b, "%s", s);
}

/* ",\n  \"key\": " (the first member without the comma) */
int tfs_hf_xmember(tfs_buf *b, const char *key)
{
	bool first = b->len && b->data[b->len - 1] == '{';
	int rc = tfs_buf_printf(b, "%s\n  ", first ? "" : ",");
	return rc ? rc : (tfs_hf_xjcstr(b, key) || tfs_buf_append(b, ": ", 2));
}

int tfs_hf_xadd_token_flags(tfs_buf *b, const tfs_hf_export *x)
{
	int rc = 0;
	double v;
	for (size_t i = 0; !rc && i < TFS_HF_N_SPECIAL; i++) {
		char key[64], name[64];
		snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", tfs_hf_xspecial_types[i]);
		snprintf(name, sizeof name, "add_%s_token", tfs_hf_xspecial_types[i]);
		if (tfs_hf_xkv_num(x, key, &v))
			rc = tfs_hf_xmember(b, name) || tfs_buf_printf(b, "%s", v ? "true" : "false");
	}
	return rc;
}

/* ==== the export's tensors ==== */

/* A free entry at the end of x->t (grown as mapped: a model refused early costs nothing). */
tfs_hf_xtensor *tfs_hf_export_push(tfs_hf_export *x)
{
	if (x->n_t == x->cap_t) {
		size_t cap = x->cap_t ? 2 * x->cap_t : 64;
		tfs_hf_xtensor *p = realloc(x->t, cap * sizeof *p);
		if (!p)
			return NULL;
		x->t = p;
		x->cap_t = cap;
	}
	return &x->t[x->n_t];
}

int tfs_hf_export_add_kv(tfs_hf_export *x, const char *name, const char *key, uint64_t elem,
			 tfs_error *err)
{
	long k = tfs_model_find_kv(x->m, key);
	const tfs_kv *kv = k >= 0 ? tfs_model_kv(x->m, (size_t)k) : NULL;
	uint32_t type = 0;
	uint64_t n = 0;
	if (kv && !kv->deleted && kv->type == TFS_GGUF_ARRAY && kv->len >= 12) {
		memcpy(&type, kv->data, 4);
		memcpy(&n, kv->data + 4, 8);
	}
	if (type != TFS_GGUF_FLOAT32 || elem >= n || n > (kv->len - 12) / 4)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "key %s: no float32 element %" PRIu64,
				     key, elem);
	tfs_hf_xtensor *o = tfs_hf_export_push(x);
	char *nm = o ? strdup(name) : NULL;
	if (!nm)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	*o = (tfs_hf_xtensor){ .name = nm, .n_dims = 1, .ne = { 1 }, .cols = 1, .rows = 1,
			       .base = elem, .from_kv = true, .kv = (size_t)k };
	x->n_t++;
	return 0;
}

int tfs_hf_export_add_mix(tfs_hf_export *x, const char *name, const size_t *src, unsigned n_src,
			  bool transposed, bool halves, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, src[0]);
	const char *why = NULL;
	for (unsigned k = 0; k < n_src; k++) {
		const tfs_tensor *u = tfs_model_tensor(x->m, src[k]);
		if (!tfs_tensor_has_f32(x->m, src[k], &why) || u->n_dims != t->n_dims ||
		    memcmp(u->ne, t->ne, sizeof u->ne))
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: %s", u->name,
					     why ? why : "not of its partner's shape");
	}
	if (n_src < 1 || n_src > 2 || t->n_dims < 1 || t->n_dims > 3 ||
	    (transposed && t->n_dims != 3))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: no float form of its "
				     "shape", t->name);
	tfs_hf_xtensor *o = tfs_hf_export_push(x);
	char *nm = o ? strdup(name) : NULL;
	if (!nm)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	*o = (tfs_hf_xtensor){ .name = nm, .src = src[0], .n_dims = t->n_dims,
			       .n_src = (uint8_t)n_src, .transposed = transposed, .halves = halves,
			       .src2 = src[n_src - 1] };
	memcpy(o->ne, t->ne, sizeof o->ne);
	if (transposed) {   /* [A, J, E] -> [J x n, A, E] */
		o->ne[0] = t->ne[1] * n_src;
		o->ne[1] = t->ne[0];
		o->inner = (uint64_t)t->ne[0];
	} else {
		o->ne[0] = t->ne[0] * n_src;
	}
	o->cols = (uint64_t)o->ne[0];
	o->rows = 1;
	for (uint32_t d = 1; d < t->n_dims; d++)
		o->rows *= (uint64_t)o->ne[d];
	x->n_t++;
	return 0;
}

int tfs_hf_export_add_groups(tfs_hf_export *x, const char *name, size_t src_t, size_t src_n,
			     tfs_error *err)
{
	const tfs_tensor *a = tfs_model_tensor(x->m, src_t), *b = tfs_model_tensor(x->m, src_n);
	const char *why = NULL;
	if (!tfs_tensor_has_f32(x->m, src_t, &why) || !tfs_tensor_has_f32(x->m, src_n, &why))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: %s", a->name, why);
	/* a: ne [seg_t, cols, groups]; b: ne [cols, seg_n, groups] */
	if (a->n_dims != 3 || b->n_dims != 3 || a->ne[1] != b->ne[0] || a->ne[2] != b->ne[2] ||
	    a->ne[0] > UINT32_MAX || b->ne[1] > UINT32_MAX)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensors %s and %s: not of one "
				     "[groups, cols, rows] and [groups, rows, cols]", a->name,
				     b->name);
	tfs_hf_xtensor *o = tfs_hf_export_push(x);
	char *nm = o ? strdup(name) : NULL;
	if (!nm)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	*o = (tfs_hf_xtensor){ .name = nm, .src = src_t, .src2 = src_n, .n_dims = 2, .n_src = 2,
			       .seg_t = (uint32_t)a->ne[0], .seg_n = (uint32_t)b->ne[1],
			       .ne = { a->ne[1], (a->ne[0] + b->ne[1]) * a->ne[2] } };
	o->cols = (uint64_t)o->ne[0];
	o->rows = (uint64_t)o->ne[1];
	x->n_t++;
	return 0;
}

/* ==== the tensor map, backwards: a tensor's name, and the tensor added ==== */

/* The entry of map[0..n) whose GGUF name is gguf[0..len), or NULL. */
static const tfs_hf_name *by_gguf(const tfs_hf_name *map, size_t n, const char *gguf, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(map[i].gguf) == len && !memcmp(map[i].gguf, gguf, len))
			return &map[i];
	return NULL;
}

/* Whether the row's rename hook (struct tfs_hf_hooks renames_back) gives mapped name buf
 * from buf with its suffix's '.' as '_' (MiniMax-M2's e_score_correction_bias, the name its
 * checkpoints have: buf becomes that), or from buf itself; false: from neither. */
static bool renamed_back(const tfs_hf_arch *row, char *buf)
{
	const struct tfs_hf_hooks *hk = row->hooks;
	hparams h = { .arch = row };
	char a[512], *dot = strrchr(buf, '.');
	if (!hk || !hk->renames_back || !hk->rename || strlen(buf) >= sizeof a)
		return true;
	for (int k = 0; k < 2; k++) {
		strcpy(a, buf);
		if (k == 0 && dot)
			a[dot - buf] = '_';
		if ((k == 1 || dot) && hk->rename(a, sizeof a, &h) && !strcmp(a, buf)) {
			if (k == 0)
				*dot = '_';
			return true;
		}
	}
	return false;
}

/* The HF name of GGUF tensor name (allocated), and its map entry: a block's or a global's
 * with its suffix (.weight, .bias); a parameter's, whose GGUF name the table holds whole
 * (Gemma 4's router scales, "ffn_gate_inp.scale"), without one; so too a weight the
 * converter named so from a parameter (tfs_hf_named_as_weight: Gemma 4's layer_scalar and
 * stacked experts). */
static char *hf_name(const tfs_hf_arch *row, const char *name, const tfs_hf_name **e)
{
	const char *suffix = strrchr(name, '.'), *base = name;
	unsigned long blk;
	bool block = tfs_hf_index_of(name, "blk.", &blk, &base);
	const tfs_hf_name *map = block ? row->blocks : row->globals;
	size_t n = block ? row->n_blocks : row->n_globals;
	if ((*e = by_gguf(map, n, base, strlen(base))))
		suffix = "";
	else if (!suffix || (strcmp(suffix, ".weight") && strcmp(suffix, ".bias")) ||
		 !(*e = by_gguf(map, n, base, (size_t)(suffix - base))))
		return NULL;
	char buf[512];
	int k = block ? snprintf(buf, sizeof buf, "model.layers.%lu.%s", blk, (*e)->hf)
		      : snprintf(buf, sizeof buf, "%s", (*e)->hf);
	if (k < 0 || (size_t)k + strlen(suffix) >= sizeof buf)
		return NULL;
	if (strcmp(suffix, ".weight") || !tfs_hf_named_as_weight(row, buf))
		strcat(buf, suffix);
	return !block || renamed_back(row, buf) ? strdup(buf) : NULL;
}

char *tfs_hf_export_mapped_name(const tfs_hf_export *x, size_t i, const tfs_hf_name **e)
{
	return hf_name(x->row, tfs_model_tensor(x->m, i)->name, e);
}

int tfs_hf_export_xtensor_unprefixed(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_hf_name *e;
	char *name = tfs_hf_export_mapped_name(x, i, &e);
	if (!name)
		return 0;   /* (hf_export.c says it has no name) */
	if (strncmp(name, "model.", 6) == 0)
		for (size_t k = 0; (name[k] = name[k + 6]); k++)
			;
	int rc = tfs_hf_export_add_as(x, i, name, e, err);
	return rc ? rc : 1;
}

int tfs_hf_xconfig_move_keys(json_t *c, const char *const (*moved)[2], size_t n)
{
	for (size_t k = 0; k < n; k++) {
		json_t *v = json_object_get(c, moved[k][0]);
		if (v && (json_object_set(c, moved[k][1], v) || json_object_del(c, moved[k][0])))
			return TFS_E_NOMEM;
	}
	return 0;
}

int tfs_hf_export_add_as(tfs_hf_export *x, size_t i, char *name, const tfs_hf_name *e,
			 tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	tfs_hf_xtensor *o = tfs_hf_export_add_src(x, name, i, e->xform, err);
	free(name);   /* (add_src keeps a copy) */
	if (!o)
		return err->code;
	if (e->xform == TFS_HF_XF_PERMUTE_Q || e->xform == TFS_HF_XF_PERMUTE_K) {
		double h = 0, kv = 0;
		tfs_hf_xkv_num(x, ".attention.head_count", &h);
		if (e->xform == TFS_HF_XF_PERMUTE_K && tfs_hf_xkv_num(x, ".attention.head_count_kv",
								      &kv) && kv > 0)
			h = kv;
		o->heads = h >= 1 && h <= (double)o->rows ? (uint32_t)h : 0;
		if (!o->heads || o->rows % (2 * (uint64_t)o->heads))
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: %" PRIu64 " rows are "
					     "not %u heads of an even size", t->name, o->rows,
					     o->heads);
	}
	if (!strcmp(t->name, "output.weight"))
		x->tied = false;
	return 0;
}

tfs_hf_xtensor *tfs_hf_export_add_src(tfs_hf_export *x, const char *name, size_t src,
				      uint8_t xform, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, src);
	const char *why = NULL;
	if (!tfs_tensor_has_f32(x->m, src, &why) || t->n_dims == 0 || t->n_dims > 4) {
		tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: %s", t->name,
			      why ? why : "no float form of its shape");
		return NULL;
	}
	tfs_hf_xtensor *o = tfs_hf_export_push(x);
	char *nm = o ? strdup(name) : NULL;
	if (!nm) {
		tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		return NULL;
	}
	*o = (tfs_hf_xtensor){ .name = nm, .src = src, .n_dims = t->n_dims, .xform = xform };
	memcpy(o->ne, t->ne, sizeof o->ne);
	o->cols = t->n_dims >= 2 ? (uint64_t)t->ne[0] : 1;
	o->rows = 1;
	for (uint32_t d = 0; d < t->n_dims; d++)
		o->rows *= (uint64_t)t->ne[d];
	o->rows /= o->cols;
	x->n_t++;
	return o;
}

int tfs_hf_export_add_parts(tfs_hf_export *x, const char *name, uint32_t n_dims,
			    const int64_t *ne, unsigned n_part, const size_t *src,
			    const uint64_t *len, const uint64_t *base, tfs_error *err)
{
	uint64_t cols = n_dims >= 2 ? (uint64_t)ne[0] : 1, rows = 1, group = 0;
	for (uint32_t d = 0; d < n_dims && d < TFS_MAX_DIMS; d++)
		rows *= (uint64_t)ne[d];
	rows /= cols ? cols : 1;
	for (unsigned k = 0; k < n_part && k < 4; k++)
		group += len[k];
	uint64_t groups = group ? rows / group : 0;
	bool fit = n_part >= 1 && n_part <= 4 && n_dims >= 1 && n_dims <= TFS_MAX_DIMS && cols &&
		   groups && groups * group == rows;
	for (unsigned k = 0; fit && k < n_part; k++) {
		const tfs_tensor *t = tfs_model_tensor(x->m, src[k]);
		uint64_t n = 1;
		for (uint32_t d = 0; d < t->n_dims; d++)
			n *= (uint64_t)t->ne[d];
		fit = tfs_tensor_has_f32(x->m, src[k], NULL) && t->n_dims >= 2 &&
		      (uint64_t)t->ne[0] == cols && base[k] + groups * len[k] <= n / cols;
	}
	if (!fit)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: %s has no float form or "
				     "not the rows it is made of", name,
				     tfs_model_tensor(x->m, src[0])->name);
	tfs_hf_xtensor *o = tfs_hf_export_push(x);
	char *nm = o ? strdup(name) : NULL;
	if (!nm)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	*o = (tfs_hf_xtensor){ .name = nm, .src = src[0], .n_dims = n_dims, .cols = cols,
			       .rows = rows, .n_part = (uint8_t)n_part };
	for (uint32_t d = 0; d < TFS_MAX_DIMS; d++)
		o->ne[d] = d < n_dims ? ne[d] : 1;
	for (unsigned k = 0; k < n_part; k++) {
		o->part_src[k] = src[k];
		o->part_len[k] = len[k];
		o->part_base[k] = base[k];
	}
	x->n_t++;
	return 0;
}
