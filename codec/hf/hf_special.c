/*
 * hf_special.c - gguf-py's SpecialVocab (vocab.py of llama.cpp de3ff81) over a repo's
 * tokenizer files: merges, special token ids, add_bos/add_eos/add_sep (from
 * tokenizer_config.json and from tokenizer.json's post-processor), chat templates, the
 * normalizer's lowercase/strip_accents; and the key writing they share with hf_vocab.c.
 */
#include "hf_vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== key writing ==== */

/* gguf-py's add_key_value: a key written twice keeps its first place and takes the last
 * value (tfs_hf_kvs_add does the same). */
bool tfs_hf_have_key(const tfs_hf_kvs *out, const char *name)
{
	return tfs_hf_kvs_find(out, name) >= 0;
}

int tfs_hf_put_str(tfs_hf_kvs *out, const char *name, const char *s, size_t n, tfs_error *err)
{
	if (n == 0)   /* add_string skips an empty string */
		return 0;
	return tfs_hf_kvs_add_strn(out, name, s, n, err);
}

int tfs_hf_put_u32(tfs_hf_kvs *out, const char *name, uint32_t v, tfs_error *err)
{
	return tfs_hf_kvs_add_u32(out, name, v, err);
}

int tfs_hf_put_bool(tfs_hf_kvs *out, const char *name, bool v, tfs_error *err)
{
	return tfs_hf_kvs_add_bool(out, name, v, err);
}

/* ==== SpecialVocab (gguf-py vocab.py) ==== */

#define SV_MAX 12

typedef struct {
	const char *types[SV_MAX];  /* special token types, in the order they are tried */
	size_t n_types;
	long long n_vocab;          /* -1: None */
	long long id[SV_MAX];
	size_t order[SV_MAX];       /* the types with an id, in the order they were set */
	size_t n_ids;
	const char *add_name[SV_MAX];   /* add_special_token: name -> value, in the order */
	bool add[SV_MAX];               /* first set (a dict) */
	size_t n_add;
	json_t *chat_template;      /* owned; NULL: None */
	int lowercase, strip_accents;   /* -1 None */
	/* merges: from tokenizer.json (tok), else merges.txt (strings) */
	const tfs_hf_tok *merges_tok;
	char **merges_txt;
	size_t n_merges_txt;
} special_vocab;

static const char *const default_types[] = { "bos", "eos", "unk", "sep", "pad", "cls",
					     "mask" };

static void sv_init(special_vocab *sv, const char *const *types, size_t n, long long n_vocab)
{
	*sv = (special_vocab){ .n_types = n, .n_vocab = n_vocab, .lowercase = -1,
			       .strip_accents = -1 };
	for (size_t i = 0; i < n; i++)
		sv->types[i] = types[i];
}

static void sv_free(special_vocab *sv)
{
	for (size_t i = 0; i < sv->n_merges_txt; i++)
		free(sv->merges_txt[i]);
	free(sv->merges_txt);
	json_decref(sv->chat_template);
}

static long sv_type(const special_vocab *sv, const char *typ)
{
	for (size_t t = 0; t < sv->n_types; t++)
		if (strcmp(sv->types[t], typ) == 0)
			return (long)t;
	return -1;
}

/* self.special_token_types += (typ,) */
static size_t sv_add_type(special_vocab *sv, const char *typ)
{
	long t = sv_type(sv, typ);
	if (t >= 0)
		return (size_t)t;
	sv->types[sv->n_types] = typ;
	return sv->n_types++;
}

/* self.add_special_token[typ] = v (a dict: the first setting fixes the order) */
static void sv_set_add(special_vocab *sv, const char *typ, bool v)
{
	size_t i = 0;
	while (i < sv->n_add && strcmp(sv->add_name[i], typ) != 0)
		i++;
	if (i == sv->n_add) {
		if (i == SV_MAX)
			return;
		sv->add_name[sv->n_add++] = typ;
	}
	sv->add[i] = v;
}

/* _set_special_token: an int id, not negative, below n_vocab; the first one set stays. */
static int sv_set(special_vocab *sv, size_t typ, const json_t *v, const char *from,
		  tfs_error *err)
{
	long long id;
	if (!v || !tfs_hf_py_int(v, &id))
		return 0;
	if (id < 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: invalid value for special token type "
				     "%s: %lld", from, sv->types[typ], id);
	if (sv->n_vocab >= 0 && id >= sv->n_vocab)
		return 0;   /* the converter warns "out of range" and skips it */
	for (size_t i = 0; i < sv->n_ids; i++)
		if (sv->order[i] == typ)
			return 0;
	sv->id[typ] = id;
	sv->order[sv->n_ids++] = typ;
	return 0;
}

static int sv_merges_txt(special_vocab *sv, const tfs_hf_files *files, tfs_error *err)
{
	uint8_t *data;
	uint64_t len;
	int rc = tfs_hf_read_optional(files, "merges.txt", &data, &len, err);
	if (rc || !data)
		return rc;
	size_t cap = 0, line_no = 0;
	char *p = (char *)data, *end = p + len;
	while (!rc && p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		line_no++;
		/* a first line starting with '#' is a header; then each line's two fields */
		char *a = p, *ae, *b, *be, *x;
		p = nl ? nl + 1 : end;
		while (a < le && (*a == ' ' || *a == '\t' || *a == '\r'))
			a++;
		if (a == le || (line_no == 1 && *a == '#'))
			continue;
		for (ae = a; ae < le && *ae != ' ' && *ae != '\t' && *ae != '\r'; ae++)
			;
		for (b = ae; b < le && (*b == ' ' || *b == '\t' || *b == '\r'); b++)
			;
		for (be = b; be < le && *be != ' ' && *be != '\t' && *be != '\r'; be++)
			;
		for (x = be; x < le && (*x == ' ' || *x == '\t' || *x == '\r'); x++)
			;
		if (b == le || x != le)
			continue;   /* "Entry malformed, ignoring" */
		if (sv->n_merges_txt == cap) {
			size_t nc = cap ? 2 * cap : 1024;
			char **m = realloc(sv->merges_txt, nc * sizeof *m);
			if (!m) {
				rc = tfs_error_set(err, TFS_E_NOMEM, "merges.txt: out of memory");
				break;
			}
			sv->merges_txt = m;
			cap = nc;
		}
		char *m = malloc((size_t)(ae - a) + (size_t)(be - b) + 2);
		if (!m) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "merges.txt: out of memory");
			break;
		}
		sprintf(m, "%.*s %.*s", (int)(ae - a), a, (int)(be - b), b);
		sv->merges_txt[sv->n_merges_txt++] = m;
	}
	free(data);
	return rc;
}

/* A GGUF string array's payload built in place: the element type, the count, then each
 * string (u64 length, bytes). */
static int put_le(tfs_buf *b, uint64_t v, int bytes)
{
	uint8_t h[8];
	for (int i = 0; i < bytes; i++)
		h[i] = (uint8_t)(v >> (8 * i));
	return tfs_buf_append(b, h, (size_t)bytes);
}

static int arr_begin(tfs_buf *b, uint64_t n)
{
	return put_le(b, TFS_GGUF_STRING, 4) || put_le(b, n, 8) ? TFS_E_NOMEM : 0;
}

/* One element; with spaced, each ' ' of a part written as U+0120 ('\xc4\xa0'): the merges'
 * list form, joined "a b" (gguf-py: chr(ord(' ') + 256)). */
static int arr_merge(tfs_buf *b, const char *pa, size_t na, const char *pb, size_t nb,
		     bool joined, bool spaced)
{
	uint64_t n = na + (joined ? 1 + nb : 0);
	for (size_t i = 0; spaced && i < na; i++)
		n += pa[i] == ' ';
	for (size_t i = 0; spaced && joined && i < nb; i++)
		n += pb[i] == ' ';
	if (put_le(b, n, 8) || tfs_buf_reserve(b, (size_t)n))
		return TFS_E_NOMEM;
	for (int part = 0; part < (joined ? 2 : 1); part++) {
		const char *p = part ? pb : pa;
		size_t m = part ? nb : na;
		if (part)
			b->data[b->len++] = ' ';
		if (!spaced || !memchr(p, ' ', m)) {
			memcpy(b->data + b->len, p, m);
			b->len += m;
			continue;
		}
		for (size_t i = 0; i < m; i++) {
			if (p[i] == ' ') {
				b->data[b->len++] = '\xc4';
				b->data[b->len++] = '\xa0';
			} else {
				b->data[b->len++] = p[i];
			}
		}
	}
	return 0;
}

/* tokenizer.ggml.merges: "a b" strings (tokenizer.json's as they are, its pairs joined, or
 * merges.txt's). */
static int put_merges(tfs_hf_kvs *out, const special_vocab *sv, tfs_error *err)
{
	const tfs_hf_tok *t = sv->merges_tok;
	size_t n = t ? t->n_merges : sv->n_merges_txt;
	if (n == 0)
		return 0;
	tfs_buf b = { 0 };
	int rc = arr_begin(&b, n);
	for (size_t k = 0; k < n && !rc; k++) {
		if (!t) {
			rc = arr_merge(&b, sv->merges_txt[k], strlen(sv->merges_txt[k]), NULL, 0,
				       false, false);
			continue;
		}
		const char *a = t->mtext + t->moff[2 * k], *bb = t->mtext + t->moff[2 * k + 1];
		size_t na = t->moff[2 * k + 1] - t->moff[2 * k];
		size_t nb = t->moff[2 * k + 2] - t->moff[2 * k + 1];
		rc = arr_merge(&b, a, na, bb, nb, !(t->mbad && t->mbad[k]), t->merge_pairs);
	}
	rc = rc ? tfs_error_set(err, TFS_E_NOMEM, "merges: out of memory")
		: tfs_hf_kvs_add(out, "tokenizer.ggml.merges", TFS_GGUF_ARRAY, b.data, b.len, err);
	tfs_buf_free(&b);
	return rc;
}

/* add_chat_template: a string, or a list of {"name", "template"}: each named one as
 * tokenizer.chat_template.NAME (NAME's characters other than [A-Za-z0-9] as '_'), their names
 * as tokenizer.chat_templates, and "default" as tokenizer.chat_template.  gguf-py lists the
 * names from a Python set (an order that changes from run to run); here: first appearance. */
static int put_chat_template(tfs_hf_kvs *out, const json_t *ct, tfs_error *err)
{
	if (json_is_string(ct))
		return tfs_hf_put_str(out, "tokenizer.chat_template", json_string_value(ct),
			       json_string_length(ct), err);
	const json_t *def = NULL;
	size_t n = json_array_size(ct), n_names = 0, i;
	char **names = calloc(n ? n : 1, sizeof *names);
	json_t *choice;
	int rc = names ? 0 : tfs_error_set(err, TFS_E_NOMEM, "chat_template: out of memory");
	json_array_foreach(ct, i, choice) {
		if (rc)
			break;
		if (!json_is_object(choice)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: chat_template "
					   "entry %zu is not an object", i);
			break;
		}
		const json_t *jn = json_object_get(choice, "name");
		const json_t *tpl = json_object_get(choice, "template");
		const char *nm = jn ? json_string_value(jn) : "";
		if (!nm) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: chat_template "
					   "entry %zu: name is not a string", i);
			break;
		}
		/* one '_' per character (code point) that is not an ASCII letter or digit */
		char clean[256];
		size_t k = 0;
		for (const unsigned char *p = (const unsigned char *)nm; *p && k < sizeof clean - 1;
		     p++) {
			if ((*p & 0xc0) == 0x80)
				continue;
			clean[k++] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
				      (*p >= '0' && *p <= '9')) ? (char)*p : '_';
		}
		clean[k] = 0;
		if (!k || !tpl || json_is_null(tpl))
			continue;
		if (!json_is_string(tpl)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: chat template "
					   "'%s' is not a string", clean);
			break;
		}
		if (strcmp(clean, "default") == 0) {
			def = tpl;
			continue;
		}
		bool seen = false;
		for (size_t j = 0; j < n_names; j++)
			seen |= strcmp(names[j], clean) == 0;
		if (!seen && !(names[n_names++] = strdup(clean))) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "chat_template: out of memory");
			break;
		}
		char key[300];
		snprintf(key, sizeof key, "tokenizer.chat_template.%s", clean);
		rc = tfs_hf_put_str(out, key, json_string_value(tpl), json_string_length(tpl), err);
	}
	if (!rc && n_names && !tfs_hf_have_key(out, "tokenizer.chat_templates"))
		rc = tfs_hf_kvs_add_arr_str(out, "tokenizer.chat_templates",
					    (const char *const *)names, NULL, n_names, err);
	if (!rc && def)
		rc = tfs_hf_put_str(out, "tokenizer.chat_template", json_string_value(def),
			     json_string_length(def), err);
	for (size_t j = 0; names && j < n_names; j++)
		free(names[j]);
	free(names);
	return rc;
}

/* ==== loading (SpecialVocab._load) ==== */

/* Python's a == b for JSON values that may be absent (None). */
static bool py_eq(const json_t *a, const json_t *b)
{
	if (!a || json_is_null(a))
		return !b || json_is_null(b);
	return b && json_equal((json_t *)a, (json_t *)b);
}

/* item.get('SpecialToken', {}).get('id') of a template item (or 'Sequence'). */
static const json_t *tmpl_id(const json_t *item, const char *kind)
{
	return json_object_get(json_object_get(item, kind), "id");
}

/* What the loading shares: tokenizer_config.json (a copy it may change), the tokens it names. */
typedef struct {
	json_t *tc;   /* owned copy; NULL: no tokenizer_config.json */
	const json_t *bos, *cls, *eos, *sep;   /* special_bos ... (borrowed) */
} sv_ctx;

/* tokenizer_config[key] = v (when there is a tokenizer_config). */
static int tc_set(sv_ctx *c, const char *key, const json_t *v, tfs_error *err)
{
	if (!tfs_hf_py_true(c->tc))
		return 0;
	if (json_object_set(c->tc, key, v ? (json_t *)v : json_null()))
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer_config.json: out of memory");
	return 0;
}

/* TemplateProcessing<single>: the leading and trailing special tokens; 0 or an error. */
static int tp_single(special_vocab *sv, sv_ctx *c, const json_t *single, const json_t **first,
		     const json_t **last, tfs_error *err)
{
	size_t n = json_array_size(single);
	bool have_tc = tfs_hf_py_true(c->tc);
	int rc = 0;
	if (n <= 1)
		return 0;
	const json_t *f = tmpl_id(json_array_get(single, 0), "SpecialToken");
	if (tfs_hf_py_true(f)) {
		*first = f;
		if (!have_tc) {
			c->bos = f;
		} else if (!py_eq(f, c->bos) && !py_eq(f, c->cls)) {
			if (!tfs_hf_py_true(c->bos) && !(rc = tc_set(c, "bos_token", f, err)))
				c->bos = f;
			if (!rc && !tfs_hf_py_true(c->cls) && !(rc = tc_set(c, "cls_token", f, err)))
				c->cls = f;
		}
		sv_set_add(sv, "bos", py_eq(f, c->bos) || py_eq(f, c->cls));
	}
	const json_t *l = tmpl_id(json_array_get(single, n - 1), "SpecialToken");
	if (!rc && tfs_hf_py_true(l)) {
		*last = l;
		if (!have_tc) {
			c->eos = l;
		} else if (!py_eq(l, c->eos)) {
			/* the old EOS becomes EOT (or EOM) */
			const char *alt = sv_type(sv, "eot") < 0 ? "eot" :
					  sv_type(sv, "eom") < 0 ? "eom" : NULL;
			if (alt) {
				char key[16];
				snprintf(key, sizeof key, "%s_token", alt);
				sv_add_type(sv, alt);
				rc = tc_set(c, key, c->eos, err);
			}
			if (!rc && !(rc = tc_set(c, "eos_token", l, err)))
				c->eos = l;
		}
		sv_set_add(sv, "eos", py_eq(l, c->eos));
	}
	return rc;
}

/* TemplateProcessing<pair>: "$A [sep] [eos] $B" sets add_sep. */
static int tp_pair(special_vocab *sv, sv_ctx *c, const json_t *pair, const json_t *first,
		   const json_t *last, tfs_error *err)
{
	size_t n = json_array_size(pair), from = 0, to = n;
	if (tfs_hf_py_true(first) && py_eq(tmpl_id(json_array_get(pair, 0), "SpecialToken"), first))
		from = 1;
	if (tfs_hf_py_true(last) && n &&
	    py_eq(tmpl_id(json_array_get(pair, n - 1), "SpecialToken"), last))
		to = n - 1;
	if (to <= from)
		return 0;
	const json_t *a = tmpl_id(json_array_get(pair, from), "Sequence");
	const json_t *b = tmpl_id(json_array_get(pair, to - 1), "Sequence");
	if (!json_is_string(a) || strcmp(json_string_value(a), "A") != 0 || !json_is_string(b) ||
	    strcmp(json_string_value(b), "B") != 0 || to - 1 <= from + 1)
		return 0;
	size_t inner = to - from - 2;
	bool add_sep = false;
	const json_t *e = tmpl_id(json_array_get(pair, from + 1), "SpecialToken");
	if (tfs_hf_py_true(e) && (py_eq(e, c->sep) || py_eq(e, c->eos)) && !tfs_hf_py_true(last))
		add_sep = true;
	if (inner == 2) {
		e = tmpl_id(json_array_get(pair, from + 2), "SpecialToken");
		if (tfs_hf_py_true(e) && (py_eq(e, c->sep) || py_eq(e, c->eos)))
			add_sep = true;
	}
	sv_set_add(sv, "sep", add_sep);
	if (add_sep && !tfs_hf_py_true(c->sep))
		return tc_set(c, "sep_token", c->eos, err);
	return 0;
}

/* The post-processor's processors: RobertaProcessing and TemplateProcessing set add_bos,
 * add_eos, add_sep (gguf-py's "crude parsing"), and may name bos/cls/eos/sep/eot tokens. */
static int sv_post_processor(special_vocab *sv, sv_ctx *c, const json_t *pp, tfs_error *err)
{
	const json_t *procs = json_object_get(pp, "processors");
	size_t n = procs ? json_array_size(procs) : 1, i;
	int rc = 0;
	for (i = 0; i < n && !rc; i++) {
		const json_t *p = procs ? json_array_get(procs, i) : pp;
		const char *type = json_string_value(json_object_get(p, "type"));
		if (type && strcmp(type, "RobertaProcessing") == 0) {
			static const char *const t3[] = { "bos", "eos", "sep" };
			for (size_t k = 0; k < 3; k++)
				sv_set_add(sv, t3[k], true);
			const json_t *cls = json_object_get(p, "cls"), *sep = json_object_get(p, "sep");
			if (!tfs_hf_py_true(c->cls) && tfs_hf_py_true(c->tc)) {
				c->cls = cls ? json_array_get(cls, 0) : c->bos;
				rc = tc_set(c, "cls_token", c->cls, err);
			}
			if (!rc && !tfs_hf_py_true(c->sep) && tfs_hf_py_true(c->tc)) {
				c->sep = sep ? json_array_get(sep, 0) : c->eos;
				rc = tc_set(c, "sep_token", c->sep, err);
			}
		} else if (type && strcmp(type, "TemplateProcessing") == 0) {
			const json_t *first = NULL, *last = NULL;
			rc = tp_single(sv, c, json_object_get(p, "single"), &first, &last, err);
			const json_t *pair = json_object_get(p, "pair");
			if (!rc && json_array_size(pair))
				rc = tp_pair(sv, c, pair, first, last, err);
		}
	}
	return rc;
}

/* _parse_normalizer: Lowercase, StripAccents, BertNormalizer's flags, within Sequences. */
static void sv_normalizer(special_vocab *sv, const json_t *nz, int depth)
{
	const char *type = json_string_value(json_object_get(nz, "type"));
	const json_t *v;
	if (!type || depth > 32)
		return;
	if (strcmp(type, "Lowercase") == 0) {
		sv->lowercase = 1;
	} else if (strcmp(type, "StripAccents") == 0) {
		sv->strip_accents = 1;
	} else if (strcmp(type, "BertNormalizer") == 0) {
		/* (a null flag is None: not written) */
		if ((v = json_object_get(nz, "lowercase")))
			sv->lowercase = json_is_null(v) ? -1 : tfs_hf_py_true(v);
		if ((v = json_object_get(nz, "strip_accents")))
			sv->strip_accents = json_is_null(v) ? -1 : tfs_hf_py_true(v);
	} else if (strcmp(type, "Sequence") == 0) {
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(nz, "normalizers"), i, x)
			sv_normalizer(sv, x, depth + 1);
	}
}

/* chat_template.jinja (read as Python's text mode does: "\r\n" and "\r" as "\n"), else
 * chat_template.json's "chat_template".  The additional_chat_templates/ folder is not
 * read: a repo's files are read by name, never listed. */
static int alt_chat_template(const tfs_hf_files *files, json_t **out, tfs_error *err)
{
	uint8_t *d;
	uint64_t n;
	*out = NULL;
	int rc = tfs_hf_read_file(files, "chat_template.jinja", &d, &n, err);
	if (rc == TFS_E_NOTFOUND) {
		json_t *j = NULL;
		tfs_error_clear(err);
		if ((rc = tfs_hf_read_json(files, "chat_template.json", &j, err)))
			return rc;
		*out = json_incref(json_object_get(j, "chat_template"));
		json_decref(j);
		return 0;
	}
	if (rc)
		return rc;
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i] == '\r' && i + 1 < n && d[i + 1] == '\n')
			continue;
		d[w++] = d[i] == '\r' ? '\n' : d[i];
	}
	*out = json_stringn((const char *)d, w);
	free(d);
	if (!*out)
		return tfs_error_set(err, TFS_E_FORMAT, "chat_template.jinja: not UTF-8 text");
	return 0;
}

/* The chat template and each type's add_{type}_token and {type}_token (looked up among
 * tokenizer.json's added tokens) from tokenizer_config.json. */
static int sv_config(special_vocab *sv, const tfs_hf_files *files, const json_t *tc,
		     const json_t *added, tfs_error *err)
{
	json_t *alt = NULL;
	int rc = alt_chat_template(files, &alt, err);
	if (rc)
		return rc;
	const json_t *ct = json_object_get(tc, "chat_template");
	if (!ct)
		ct = alt;
	if (json_is_string(ct) || json_is_array(ct))
		sv->chat_template = json_incref((json_t *)ct);   /* else "Bad type ... - ignoring" */
	json_decref(alt);
	for (size_t t = 0; t < sv->n_types && !rc; t++) {
		char key[64];
		snprintf(key, sizeof key, "add_%s_token", sv->types[t]);
		const json_t *ae = json_object_get(tc, key);
		if (json_is_boolean(ae))
			sv_set_add(sv, sv->types[t], json_is_true(ae));
		snprintf(key, sizeof key, "%s_token", sv->types[t]);
		const json_t *e = json_object_get(tc, key);
		if (json_is_object(e))
			e = json_object_get(e, "content");
		if (!json_is_string(e))
			continue;
		size_t i;   /* the first added token of that content */
		json_t *a;
		json_array_foreach(added, i, a) {
			if (json_equal(json_object_get(a, "content"), (json_t *)e)) {
				rc = sv_set(sv, t, json_object_get(a, "id"), "tokenizer.json", err);
				break;
			}
		}
	}
	return rc;
}

/* _try_load_from_config_json: {type}_token_id of config.json as the file has it (not
 * transformers' class defaults), else of its text_config. */
static int sv_config_json(special_vocab *sv, const tfs_hf_files *files, tfs_error *err)
{
	json_t *config = NULL;
	int rc = tfs_hf_read_json(files, "config.json", &config, err);
	for (size_t t = 0; config && t < sv->n_types && !rc; t++) {
		char key[64];
		snprintf(key, sizeof key, "%s_token_id", sv->types[t]);
		const json_t *v = json_object_get(config, key);
		if (!v || json_is_null(v))
			v = json_object_get(json_object_get(config, "text_config"), key);
		rc = sv_set(sv, t, v, "config.json", err);
	}
	json_decref(config);
	return rc;
}

static int sv_load(special_vocab *sv, const tfs_hf_files *files, const tfs_hf_tok *tok,
		   const json_t *cfg, bool load_merges, tfs_error *err)
{
	sv_ctx c = { .tc = cfg ? json_copy((json_t *)cfg) : NULL };
	const json_t *root = tok ? tok->root : NULL;
	int rc = 0;
	if (cfg && !c.tc)
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer_config.json: out of memory");
	if (tok && load_merges && tok->has_merges && tok->n_merges)
		sv->merges_tok = tok;
	if (tfs_hf_py_true(json_object_get(root, "normalizer")))
		sv_normalizer(sv, json_object_get(root, "normalizer"), 0);
	const json_t *added = json_object_get(root, "added_tokens");
	if (tok && (json_object_size(root) || tok->has_vocab || tok->has_merges)) {
		c.bos = json_object_get(c.tc, "bos_token");
		c.cls = json_object_get(c.tc, "cls_token");
		c.eos = json_object_get(c.tc, "eos_token");
		c.sep = json_object_get(c.tc, "sep_token");
		if (!tfs_hf_py_true(c.bos) && tfs_hf_py_true(c.cls) && tfs_hf_py_true(c.tc) &&
		    !(rc = tc_set(&c, "bos_token", c.cls, err)))
			c.bos = c.cls;
		if (!rc && !tfs_hf_py_true(c.eos) && tfs_hf_py_true(c.sep) &&
		    tfs_hf_py_true(c.tc) && !(rc = tc_set(&c, "eos_token", c.sep, err)))
			c.eos = c.sep;
		const json_t *pp = json_object_get(root, "post_processor");
		if (!rc && json_is_object(pp) && json_object_size(pp))
			rc = sv_post_processor(sv, &c, pp, err);
	}
	if (!rc && tfs_hf_py_true(c.tc))
		rc = sv_config(sv, files, c.tc, added, err);
	if (!rc)
		rc = sv_config_json(sv, files, err);
	if (!rc && load_merges && !sv->merges_tok)
		rc = sv_merges_txt(sv, files, err);
	json_decref(c.tc);
	return rc;
}

/* add_to_gguf. */
static int sv_write(tfs_hf_kvs *out, const special_vocab *sv, tfs_error *err)
{
	static const char *const id_keys[][2] = {
		{ "bos", "tokenizer.ggml.bos_token_id" }, { "eos", "tokenizer.ggml.eos_token_id" },
		{ "unk", "tokenizer.ggml.unknown_token_id" },
		{ "sep", "tokenizer.ggml.seperator_token_id" },   /* sic, gguf-py's spelling */
		{ "pad", "tokenizer.ggml.padding_token_id" },
		{ "mask", "tokenizer.ggml.mask_token_id" }, { "eot", "tokenizer.ggml.eot_token_id" },
		{ "eom", "tokenizer.ggml.eom_token_id" },
	};   /* cls, prefix, suffix, middle, fsep: gguf-py has no handler, skipped */
	static const char *const add_keys[][2] = {
		{ "bos", "tokenizer.ggml.add_bos_token" }, { "eos", "tokenizer.ggml.add_eos_token" },
		{ "sep", "tokenizer.ggml.add_sep_token" },
	};
	int rc = put_merges(out, sv, err);
	for (size_t i = 0; i < sv->n_ids && !rc; i++) {
		size_t t = sv->order[i];
		for (size_t k = 0; k < sizeof id_keys / sizeof *id_keys && !rc; k++) {
			if (strcmp(id_keys[k][0], sv->types[t]) != 0)
				continue;
			if (sv->id[t] > UINT32_MAX)
				return tfs_error_set(err, TFS_E_FORMAT, "special token %s id %lld does "
						     "not fit GGUF's uint32", sv->types[t], sv->id[t]);
			rc = tfs_hf_put_u32(out, id_keys[k][1], (uint32_t)sv->id[t], err);
		}
	}
	for (size_t i = 0; i < sv->n_add && !rc; i++)
		for (size_t k = 0; k < sizeof add_keys / sizeof *add_keys && !rc; k++)
			if (strcmp(add_keys[k][0], sv->add_name[i]) == 0)
				rc = tfs_hf_put_bool(out, add_keys[k][1], sv->add[i], err);
	if (!rc && sv->chat_template)
		rc = put_chat_template(out, sv->chat_template, err);
	if (!rc && sv->lowercase >= 0)
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.normalizer.lowercase", sv->lowercase, err);
	if (!rc && sv->strip_accents >= 0)
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.normalizer.strip_accents",
				     sv->strip_accents, err);
	return rc;
}

int tfs_hf_special_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
			 const json_t *cfg, bool load_merges, long long n_vocab, tfs_error *err)
{
	return tfs_hf_special_vocab_ids(out, files, tok, cfg, load_merges, n_vocab, NULL, NULL, 0,
					err);
}

int tfs_hf_special_vocab_ids(tfs_hf_kvs *out, const tfs_hf_files *files,
			     const tfs_hf_tok *tok, const json_t *cfg, bool load_merges,
			     long long n_vocab, const char *const *types, const long long *ids,
			     size_t n, tfs_error *err)
{
	special_vocab sv;
	sv_init(&sv, default_types, 7, n_vocab);
	int rc = sv_load(&sv, files, tok, cfg, load_merges, err);
	for (size_t k = 0; k < n && !rc; k++) {   /* _set_special_token: unless already set */
		json_t *j = sv.n_types < SV_MAX ? json_integer(ids[k]) : NULL;
		rc = j ? sv_set(&sv, sv_add_type(&sv, types[k]), j, "tokenizer", err)
		       : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		json_decref(j);
	}
	if (!rc)
		rc = sv_write(out, &sv, err);
	sv_free(&sv);
	return rc;
}

int tfs_hf_special_vocab_types(tfs_hf_kvs *out, const tfs_hf_files *files,
			       const tfs_hf_tok *tok, const json_t *cfg, bool load_merges,
			       const char *const *types, size_t n, tfs_error *err)
{
	special_vocab sv;
	sv_init(&sv, types, n, -1);
	int rc = sv_load(&sv, files, tok, cfg, load_merges, err);
	if (!rc)
		rc = sv_write(out, &sv, err);
	sv_free(&sv);
	return rc;
}

int tfs_hf_hunyuan_ids(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *config,
		       tfs_error *err)
{
	long long id;
	int rc = 0;
	const json_t *v = json_object_get(config, "eod_token_id");
	if (v && !json_is_null(v)) {
		if (!tfs_hf_py_int(v, &id) || id < 0 || id > UINT32_MAX)
			return tfs_error_set(err, TFS_E_FORMAT, "config.json: eod_token_id is not a "
					     "32-bit unsigned integer");
		rc = tfs_hf_put_u32(out, "tokenizer.ggml.eos_token_id", (uint32_t)id, err);
	}
	json_t *gen = NULL;
	if (!rc)
		rc = tfs_hf_read_json(files, "generation_config.json", &gen, err);
	const json_t *eos = json_object_get(gen, "eos_token_id");
	if (!rc && json_is_array(eos) && json_array_size(eos) >= 2) {
		if (!tfs_hf_py_int(json_array_get(eos, 0), &id) || id < 0 || id > UINT32_MAX)
			rc = tfs_error_set(err, TFS_E_FORMAT, "generation_config.json: eos_token_id[0] "
					   "is not a 32-bit unsigned integer");
		else
			rc = tfs_hf_put_u32(out, "tokenizer.ggml.eot_token_id", (uint32_t)id, err);
	}
	json_decref(gen);
	return rc;
}

/* SpecialVocab(special_token_types=types) with ids[k] set for types[k] after loading, as
 * CodeLlama's (prefix, suffix, middle, eot: 32007..32010) and CodeGemma's are. */
int tfs_hf_fixed_ids(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		     const json_t *cfg, const char *const *types, const long long *ids, size_t n,
		     tfs_error *err)
{
	special_vocab sv;
	sv_init(&sv, types, n, -1);
	int rc = sv_load(&sv, files, tok, cfg, false, err);
	for (size_t k = 0; k < n && !rc; k++) {
		json_t *j = json_integer(ids[k]);
		rc = j ? sv_set(&sv, k, j, "tokenizer", err) :
			 tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		json_decref(j);
	}
	if (!rc)
		rc = sv_write(out, &sv, err);
	sv_free(&sv);
	return rc;
}
