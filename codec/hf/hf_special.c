/*
 * hf_special.c - a repo's tokenizer files as the converter reads them (JSON as Python reads
 * it, keys written once), and gguf-py's SpecialVocab (vocab.py): merges, special token ids,
 * add_bos/add_eos, chat templates.
 */
#include "hf_vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== files ==== */

/* Reads a repo file; TFS_E_NOTFOUND (err set) when absent. */
int tfs_hf_read_file(const tfs_hf_files *f, const char *name, uint8_t **data, uint64_t *len,
		     tfs_error *err)
{
	*data = NULL;
	*len = 0;
	return f->read(f->ctx, name, data, len, err);
}

/* Python reads integers of any size; jansson fails beyond 64 bits ("too big integer").  A copy
 * of the text with ".0" after each integer of more than 18 digits (outside strings) reads
 * them as reals: such numbers (model_max_length = 1e30 written out) are never ids here. */
static char *widen_big_ints(const char *s, size_t n, size_t *out_n)
{
	tfs_buf b = { 0 };
	size_t i = 0, from = 0;
	bool in_str = false;
	while (i < n) {
		char c = s[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			i++;
			continue;
		}
		if (c == '"') {
			in_str = true;
			i++;
			continue;
		}
		if (c >= '0' && c <= '9') {
			size_t j = i;
			while (j < n && s[j] >= '0' && s[j] <= '9')
				j++;
			bool plain = j - i > 18 && (j == n || (s[j] != '.' && s[j] != 'e' && s[j] != 'E'));
			if (plain && (tfs_buf_append(&b, s + from, j - from) ||
				      tfs_buf_append(&b, ".0", 2))) {
				tfs_buf_free(&b);
				return NULL;
			}
			if (plain)
				from = j;
			i = j;
			continue;
		}
		i++;
	}
	if (tfs_buf_append(&b, s + from, n - from)) {
		tfs_buf_free(&b);
		return NULL;
	}
	*out_n = b.len;
	return b.data;
}

/* A repo JSON file parsed: 0 and *out, or *out NULL and 0 when absent, or an error. */
int tfs_hf_read_json(const tfs_hf_files *f, const char *name, json_t **out, tfs_error *err)
{
	uint8_t *data;
	uint64_t len;
	*out = NULL;
	int rc = tfs_hf_read_file(f, name, &data, &len, err);
	if (rc == TFS_E_NOTFOUND) {
		tfs_error_clear(err);
		return 0;
	}
	if (rc)
		return rc;
	json_error_t je;
	size_t wn = 0;
	char *wide = widen_big_ints((const char *)data, (size_t)len, &wn);
	free(data);
	if (!wide)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", name);
	*out = json_loadb(wide, wn, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	free(wide);
	if (!*out)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not JSON: line %d column %d: %s", name,
				     je.line, je.column, je.text);
	return 0;
}

/* Python's isinstance(v, int) on a JSON value: integers, and true/false (bool is an int). */
bool tfs_hf_py_int(const json_t *v, long long *out)
{
	if (json_is_integer(v))
		*out = json_integer_value(v);
	else if (json_is_boolean(v))
		*out = json_is_true(v);
	else
		return false;
	return true;
}

/* Python's truth value of a JSON value. */
bool tfs_hf_py_true(const json_t *v)
{
	if (!v)
		return false;
	switch (json_typeof(v)) {
	case JSON_OBJECT: return json_object_size(v) != 0;
	case JSON_ARRAY: return json_array_size(v) != 0;
	case JSON_STRING: return json_string_length(v) != 0;
	case JSON_INTEGER: return json_integer_value(v) != 0;
	case JSON_REAL: return json_real_value(v) != 0.0;
	case JSON_TRUE: return true;
	default: return false;
	}
}

/* ==== key writing ==== */

/* gguf-py raises on a key written twice; the converter then stops.  Here the first stays. */
bool tfs_hf_have_key(const tfs_hf_kvs *out, const char *name)
{
	return tfs_hf_kvs_find(out, name) >= 0;
}

int tfs_hf_put_str(tfs_hf_kvs *out, const char *name, const char *s, size_t n, tfs_error *err)
{
	if (n == 0 || tfs_hf_have_key(out, name))   /* add_string skips an empty string */
		return 0;
	return tfs_hf_kvs_add_strn(out, name, s, n, err);
}

int tfs_hf_put_u32(tfs_hf_kvs *out, const char *name, uint32_t v, tfs_error *err)
{
	return tfs_hf_have_key(out, name) ? 0 : tfs_hf_kvs_add_u32(out, name, v, err);
}

int tfs_hf_put_bool(tfs_hf_kvs *out, const char *name, bool v, tfs_error *err)
{
	return tfs_hf_have_key(out, name) ? 0 : tfs_hf_kvs_add_bool(out, name, v, err);
}

/* ==== SpecialVocab (gguf-py vocab.py) ==== */

#define SV_MAX 8

typedef struct {
	const char *const *types;   /* special token types, in the order they are tried */
	size_t n_types;
	long long n_vocab;          /* -1: None */
	long long id[SV_MAX];
	size_t order[SV_MAX];       /* the types with an id, in the order they were set */
	size_t n_ids;
	int add[SV_MAX];            /* add_{type}_token: -1 unset, 0, 1 */
	const json_t *chat_template;   /* borrowed from cfg; NULL: None */
	/* merges: from tokenizer.json, else merges.txt (strings) */
	const json_t *merges_json;
	char **merges_txt;
	size_t n_merges_txt;
} special_vocab;

static const char *const default_types[] = { "bos", "eos", "unk", "sep", "pad", "cls",
					     "mask" };

static void sv_free(special_vocab *sv)
{
	for (size_t i = 0; i < sv->n_merges_txt; i++)
		free(sv->merges_txt[i]);
	free(sv->merges_txt);
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
	int rc = tfs_hf_read_file(files, "merges.txt", &data, &len, err);
	if (rc == TFS_E_NOTFOUND) {
		tfs_error_clear(err);
		return 0;
	}
	if (rc)
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

/* _load: tokenizer.json (merges, added tokens), tokenizer_config.json, config.json. */
static int sv_load(special_vocab *sv, const tfs_hf_files *files, const json_t *tok,
		   const json_t *cfg, const json_t *config, bool load_merges, tfs_error *err)
{
	for (size_t i = 0; i < SV_MAX; i++)
		sv->add[i] = -1;
	int rc = 0;
	const json_t *added = NULL;
	if (tok) {
		const json_t *m = json_object_get(json_object_get(tok, "model"), "merges");
		if (load_merges && json_is_array(m) && json_array_size(m)) {
			const json_t *m0 = json_array_get(m, 0);
			if (!json_is_string(m0) && !(json_is_array(m0) && json_array_size(m0) == 2 &&
						     json_is_string(json_array_get(m0, 0))))
				return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: unknown "
						     "tokenizer merges format");
			sv->merges_json = m;
		}
		added = json_object_get(tok, "added_tokens");
	}
	if (cfg) {
		const json_t *ct = json_object_get(cfg, "chat_template");
		if (json_is_string(ct) || json_is_array(ct))
			sv->chat_template = ct;   /* other types: "Bad type ... - ignoring" */
		for (size_t t = 0; t < sv->n_types && !rc; t++) {
			char key[64];
			snprintf(key, sizeof key, "add_%s_token", sv->types[t]);
			const json_t *ae = json_object_get(cfg, key);
			if (json_is_boolean(ae))
				sv->add[t] = json_is_true(ae);
			snprintf(key, sizeof key, "%s_token", sv->types[t]);
			const json_t *e = json_object_get(cfg, key);
			if (json_is_object(e))
				e = json_object_get(e, "content");
			if (!json_is_string(e))
				continue;
			/* the first added token of that content */
			size_t i;
			json_t *a;
			json_array_foreach(added, i, a) {
				if (json_equal(json_object_get(a, "content"), (json_t *)e)) {
					rc = sv_set(sv, t, json_object_get(a, "id"),
						    "tokenizer.json", err);
					break;
				}
			}
		}
	}
	for (size_t t = 0; config && t < sv->n_types && !rc; t++) {
		char key[64];
		snprintf(key, sizeof key, "%s_token_id", sv->types[t]);
		rc = sv_set(sv, t, json_object_get(config, key), "config.json", err);
	}
	if (!rc && load_merges && !sv->merges_json)
		rc = sv_merges_txt(sv, files, err);
	return rc;
}

static const char *id_key(const char *typ)
{
	static const char *const map[][2] = {
		{ "bos", "tokenizer.ggml.bos_token_id" }, { "eos", "tokenizer.ggml.eos_token_id" },
		{ "unk", "tokenizer.ggml.unknown_token_id" },
		{ "sep", "tokenizer.ggml.seperator_token_id" },   /* sic, gguf-py's spelling */
		{ "pad", "tokenizer.ggml.padding_token_id" },
		{ "mask", "tokenizer.ggml.mask_token_id" }, { "eot", "tokenizer.ggml.eot_token_id" },
	};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (strcmp(map[i][0], typ) == 0)
			return map[i][1];
	return NULL;   /* cls, prefix, suffix, middle: gguf-py has no handler, skipped */
}

/* The merges as "a b" strings: the list form's spaces written as U+0120 ('Ġ'). */
static int put_merges(tfs_hf_kvs *out, const special_vocab *sv, tfs_error *err)
{
	const json_t *m = sv->merges_json;
	size_t n = m ? json_array_size(m) : sv->n_merges_txt;
	if (n == 0 || tfs_hf_have_key(out, "tokenizer.ggml.merges"))
		return 0;
	const char **s = calloc(n, sizeof *s);
	size_t *len = calloc(n, sizeof *len);
	char **made = NULL;
	int rc = 0;
	if (!s || !len) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "merges: out of memory");
		goto out;
	}
	if (!m) {
		for (size_t i = 0; i < n; i++) {
			s[i] = sv->merges_txt[i];
			len[i] = strlen(s[i]);
		}
	} else if (json_is_string(json_array_get(m, 0))) {
		for (size_t i = 0; i < n && !rc; i++) {
			const json_t *e = json_array_get(m, i);
			if (!json_is_string(e))
				rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: merge %zu is not a "
						   "string like the first", i);
			s[i] = json_string_value(e);
			len[i] = json_string_length(e);
		}
	} else {
		if (!(made = calloc(n, sizeof *made))) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "merges: out of memory");
			goto out;
		}
		for (size_t i = 0; i < n && !rc; i++) {
			const json_t *pair = json_array_get(m, i);
			tfs_buf b = { 0 };
			size_t k;
			json_t *part;
			if (!json_is_array(pair))
				rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: merge %zu is not a "
						   "list like the first", i);
			json_array_foreach(pair, k, part) {
				if (rc)
					break;
				if (!json_is_string(part)) {
					rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: merge %zu "
							   "has a part that is not a string", i);
					break;
				}
				const char *p = json_string_value(part);
				size_t pn = json_string_length(part);
				if (k && tfs_buf_append(&b, " ", 1))
					rc = TFS_E_NOMEM;
				for (size_t j = 0; j < pn && !rc; j++)
					if (tfs_buf_append(&b, p[j] == ' ' ? "\xc4\xa0" : p + j,
							   p[j] == ' ' ? 2 : 1))
						rc = TFS_E_NOMEM;
			}
			if (rc == TFS_E_NOMEM)
				rc = tfs_error_set(err, TFS_E_NOMEM, "merges: out of memory");
			made[i] = b.data;
			s[i] = b.data ? b.data : "";
			len[i] = b.len;
		}
	}
	if (!rc)
		rc = tfs_hf_kvs_add_arr_str(out, "tokenizer.ggml.merges", s, len, n, err);
out:
	for (size_t i = 0; made && i < n; i++)
		free(made[i]);
	free(made);
	free(s);
	free(len);
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

/* add_to_gguf. */
static int sv_write(tfs_hf_kvs *out, const special_vocab *sv, tfs_error *err)
{
	int rc = put_merges(out, sv, err);
	for (size_t i = 0; i < sv->n_ids && !rc; i++) {
		size_t t = sv->order[i];
		const char *key = id_key(sv->types[t]);
		if (!key)
			continue;
		if (sv->id[t] > UINT32_MAX)
			return tfs_error_set(err, TFS_E_FORMAT, "special token %s id %lld does not "
					     "fit GGUF's uint32", sv->types[t], sv->id[t]);
		rc = tfs_hf_put_u32(out, key, (uint32_t)sv->id[t], err);
	}
	for (size_t t = 0; t < sv->n_types && !rc; t++) {
		if (sv->add[t] < 0)
			continue;
		if (strcmp(sv->types[t], "bos") == 0)
			rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_bos_token", sv->add[t], err);
		else if (strcmp(sv->types[t], "eos") == 0)
			rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_eos_token", sv->add[t], err);
	}
	if (!rc && sv->chat_template)
		rc = put_chat_template(out, sv->chat_template, err);
	return rc;
}

int tfs_hf_special_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *tok,
			       const json_t *cfg, const json_t *config, bool load_merges,
			       long long n_vocab, tfs_error *err)
{
	special_vocab sv = { .types = default_types, .n_types = 7, .n_vocab = n_vocab };
	int rc = sv_load(&sv, files, tok, cfg, config, load_merges, err);
	if (!rc)
		rc = sv_write(out, &sv, err);
	sv_free(&sv);
	return rc;
}

int tfs_hf_codellama_ids(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *tok,
			 const json_t *cfg, const json_t *config, tfs_error *err)
{
	int rc;
	static const char *const infill[] = { "prefix", "suffix", "middle", "eot" };
	special_vocab sv = { .types = infill, .n_types = 4, .n_vocab = -1 };
	if (!(rc = sv_load(&sv, files, tok, cfg, config, false, err))) {
		static const long long ids[] = { 32007, 32008, 32009, 32010 };
		for (size_t k = 0; k < 4 && !rc; k++) {
			json_t *j = json_integer(ids[k]);
			rc = j ? sv_set(&sv, k, j, "CodeLlama", err) :
				 tfs_error_set(err, TFS_E_NOMEM, "out of memory");
			json_decref(j);
		}
	}
	if (!rc)
		rc = sv_write(out, &sv, err);
	sv_free(&sv);
	return rc;
}
