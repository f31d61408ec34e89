/*
 * hf_card.c - what gguf-py's Metadata reads of a repo besides config.json: a model card's
 * YAML front matter (README.md: a top-level mapping whose values are plain, quoted or block
 * scalars, flow ([a, b]) or block ("- a") sequences of scalars; nested mappings are skipped
 * (and a sequence item that is one counts as an entry with nothing the converter uses);
 * scalars resolve as YAML 1.1 does (null, booleans, numbers are not strings)), and the
 * general.sampling.* keys of generation_config.json.
 */
#include "hf_card.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tfs_hf_dupn(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void yval_free(yval *v)
{
	free(v->s);
	for (size_t i = 0; i < v->n; i++)
		yval_free(&v->items[i]);
	free(v->items);
	memset(v, 0, sizeof *v);
}

void tfs_hf_card_free(ycard *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->e[i].key);
		yval_free(&c->e[i].v);
	}
	free(c->e);
	memset(c, 0, sizeof *c);
}

const yval *tfs_hf_card_get(const ycard *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->e[i].key, key) == 0)
			return &c->e[i].v;
	return NULL;
}

/* YAML 1.1's resolution of a plain scalar: null, bool, int, float, or a string. */
static ykind resolve_plain(const char *s)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
	/* PyYAML's booleans (y and n are not among them) */
	static const char *const bools[] = { "yes", "Yes", "YES", "no", "No", "NO", "true",
		"True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF" };
	for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
		if (strcmp(s, nulls[i]) == 0)
			return Y_NULL;
	for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
		if (strcmp(s, bools[i]) == 0)
			return Y_OTHER;
	const char *p = s;
	if (*p == '+' || *p == '-')
		p++;
	if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF") ||
	    !strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
		return Y_OTHER;
	/* int: decimal (with _), 0x.., 0b.., octal, sexagesimal (12:30);
	 * float: [-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)? or \.[0-9_]+... */
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'b') && p[2]) {
		const char *q = p + 2;
		while (*q && (isxdigit((unsigned char)*q) || *q == '_'))
			q++;
		return *q ? Y_STR : Y_OTHER;
	}
	bool digits = false, dot = false;
	const char *q = p;
	while (is_digit(*q) || *q == '_' || *q == ':') {
		digits |= is_digit(*q);
		q++;
	}
	if (!*q && digits)
		return Y_OTHER;   /* integer */
	if (*q == '.') {
		dot = true;
		q++;
		while (is_digit(*q) || *q == '_' || *q == '.')
			q++;
	}
	if (dot && (*q == 'e' || *q == 'E') && (q[1] == '+' || q[1] == '-') && is_digit(q[2])) {
		q += 2;
		while (is_digit(*q))
			q++;
	}
	if (dot && !*q && (digits || q > p + 1))
		return Y_OTHER;   /* float */
	return Y_STR;
}

typedef struct {
	char **lines;   /* the front matter's lines, without their newline */
	size_t n;
} ylines;

static size_t indent_of(const char *l)
{
	size_t i = 0;
	while (l[i] == ' ')
		i++;
	return i;
}

static bool blank_or_comment(const char *l)
{
	const char *p = l + indent_of(l);
	return !*p || *p == '#';
}

/* Cuts a trailing " # comment" outside quotes, and trailing spaces. */
static void strip_comment(char *s)
{
	char q = 0;
	for (char *p = s; *p; p++) {
		if (q) {
			if (*p == q)
				q = 0;
		} else if (*p == '\'' || *p == '"') {
			if (p == s || p[-1] == ' ' || p[-1] == '[' || p[-1] == ',')
				q = *p;
		} else if (*p == '#' && (p == s || p[-1] == ' ' || p[-1] == '\t')) {
			*p = 0;
			break;
		}
	}
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = 0;
}

/* A quoted scalar at *p ('...' or "..."): its text; *p moves past it. */
static char *quoted(const char **pp)
{
	const char *p = *pp;
	char q = *p++;
	size_t cap = strlen(p) + 1, n = 0;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	while (*p) {
		if (q == '\'' && p[0] == '\'' && p[1] == '\'') {
			out[n++] = '\'';
			p += 2;
			continue;
		}
		if (*p == q) {
			p++;
			break;
		}
		if (q == '"' && *p == '\\' && p[1]) {
			p++;
			char c = *p++;
			switch (c) {
			case 'n': out[n++] = '\n'; break;
			case 't': out[n++] = '\t'; break;
			case '0': out[n++] = '\0'; break;
			case 'x': case 'u': case 'U': {
				int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
				unsigned long cp = 0;
				for (int k = 0; k < digits && isxdigit((unsigned char)*p); k++, p++)
					cp = cp * 16 + (unsigned long)(isdigit((unsigned char)*p) ? *p - '0'
						: (tolower((unsigned char)*p) - 'a' + 10));
				/* UTF-8 (escapes are rare in model cards; enough room: 4 <= 6+ chars) */
				if (cp < 0x80) {
					out[n++] = (char)cp;
				} else if (cp < 0x800) {
					out[n++] = (char)(0xc0 | cp >> 6);
					out[n++] = (char)(0x80 | (cp & 0x3f));
				} else if (cp < 0x10000) {
					out[n++] = (char)(0xe0 | cp >> 12);
					out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
					out[n++] = (char)(0x80 | (cp & 0x3f));
				} else {
					out[n++] = (char)(0xf0 | cp >> 18);
					out[n++] = (char)(0x80 | ((cp >> 12) & 0x3f));
					out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
					out[n++] = (char)(0x80 | (cp & 0x3f));
				}
				break;
			}
			default: out[n++] = c; break;
			}
			continue;
		}
		out[n++] = *p++;
	}
	out[n] = 0;
	*pp = p;
	return out;
}

/* One scalar's text (a flow item or a whole value): quoted or plain. */
static int scalar(yval *v, const char *text)
{
	while (*text == ' ')
		text++;
	if (*text == '\'' || *text == '"') {
		const char *p = text;
		v->kind = Y_STR;
		return (v->s = quoted(&p)) ? 0 : -1;
	}
	if (*text == '{' || (*text == '[' && text[1] != ']')) {
		v->kind = Y_MAP;   /* nested: nothing the converter uses */
		return 0;
	}
	v->kind = resolve_plain(text);
	if (v->kind == Y_STR)
		return (v->s = strdup(text)) ? 0 : -1;
	return 0;
}

/* A flow sequence [a, "b", c] (on one line, or continued on the next ones). */
static int flow_list(yval *v, const char *text)
{
	v->kind = Y_LIST;
	const char *p = text + 1;
	for (;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (!*p || *p == ']')
			return 0;
		yval it = { 0 };
		if (*p == '\'' || *p == '"') {
			it.kind = Y_STR;
			if (!(it.s = quoted(&p)))
				return -1;
		} else {
			const char *e = p;
			int depth = 0;
			while (*e && (depth || (*e != ',' && *e != ']'))) {
				depth += (*e == '[' || *e == '{') - (*e == ']' || *e == '}');
				e++;
			}
			char *t = tfs_hf_dupn(p, (size_t)(e - p));
			if (!t)
				return -1;
			size_t n = strlen(t);
			while (n && t[n - 1] == ' ')
				t[--n] = 0;
			int rc = scalar(&it, t);
			free(t);
			if (rc)
				return rc;
			p = e;
		}
		yval *items = realloc(v->items, (v->n + 1) * sizeof *items);
		if (!items) {
			yval_free(&it);
			return -1;
		}
		v->items = items;
		v->items[v->n++] = it;
		while (*p && *p != ',' && *p != ']')
			p++;
	}
}

/* A block scalar (| or >, at t): the more indented lines after line k, joined (literal) or
 * folded, clipped. */
static int block_scalar(yval *v, const ylines *y, size_t k, const char *t, size_t *next)
{
	bool fold = *t == '>';
	size_t ind = 0, cap = 2, n = 0;   /* room for the final newline and NUL */
	for (size_t j = k + 1; j < y->n && (!*y->lines[j] || indent_of(y->lines[j]) > 0); j++)
		cap += strlen(y->lines[j]) + 1;
	char *s = malloc(cap);
	if (!s)
		return -1;
	size_t j = k + 1;
	for (; j < y->n; j++) {
		const char *l = y->lines[j];
		if (*l && indent_of(l) == 0)
			break;
		if (!ind && *l)
			ind = indent_of(l);
		const char *c = strlen(l) >= ind ? l + ind : "";
		if (n && fold && *c && s[n - 1] != '\n')
			s[n++] = ' ';
		else if (n)
			s[n++] = '\n';
		memcpy(s + n, c, strlen(c));
		n += strlen(c);
	}
	while (n && s[n - 1] == '\n')
		n--;
	s[n++] = '\n';
	s[n] = 0;
	v->kind = Y_STR;
	v->s = s;
	*next = j;
	return 0;
}

/* A flow sequence (at t), possibly over several lines. */
static int flow_value(yval *v, const ylines *y, size_t k, const char *t, size_t *next)
{
	size_t total = strlen(t) + 1, j = k + 1;
	while (!strchr(t, ']') && j < y->n && indent_of(y->lines[j]) > 0)
		total += strlen(y->lines[j++]) + 1;
	char *all = malloc(total + 1);
	if (!all)
		return -1;
	strcpy(all, t);
	for (size_t x = k + 1; x < j; x++) {
		strcat(all, " ");
		strcat(all, y->lines[x] + indent_of(y->lines[x]));
	}
	int rc = flow_list(v, all);
	free(all);
	*next = j;
	return rc;
}

/* A scalar (at t); a plain one may continue on more indented lines. */
static int scalar_value(yval *v, const ylines *y, size_t k, const char *t, size_t *next)
{
	size_t j = k + 1;
	if (*t == '\'' || *t == '"' || *t == '{') {
		while (j < y->n && *y->lines[j] && indent_of(y->lines[j]) > 0)
			j++;
		*next = j;
		return scalar(v, t);
	}
	size_t total = strlen(t) + 1;
	while (j < y->n && *y->lines[j] && indent_of(y->lines[j]) > 0)
		total += strlen(y->lines[j++]) + 1;
	char *all = malloc(total);
	if (!all)
		return -1;
	strcpy(all, t);
	for (size_t x = k + 1; x < j; x++) {
		char *c = strdup(y->lines[x] + indent_of(y->lines[x]));
		if (!c) {
			free(all);
			return -1;
		}
		strip_comment(c);
		strcat(all, " ");
		strcat(all, c);
		free(c);
	}
	int rc = scalar(v, all);
	free(all);
	*next = j;
	return rc;
}

/* One "- item" line's item (text after the dash) appended to v's list. */
static int list_item(yval *v, const char *l, size_t ind)
{
	char *it_text = strdup(l + ind + 1);
	if (!it_text)
		return -1;
	strip_comment(it_text);
	yval it = { 0 };
	const char *c = it_text;
	int rc = 0;
	while (*c == ' ')
		c++;
	/* "- key: value" is a mapping */
	const char *colon = strstr(c, ": ");
	if ((colon || (strlen(c) && c[strlen(c) - 1] == ':')) && *c != '\'' && *c != '"')
		it.kind = Y_MAP;
	else
		rc = scalar(&it, c);
	free(it_text);
	yval *items = realloc(v->items, (v->n + 1) * sizeof *items);
	if (!items) {
		yval_free(&it);
		return -1;
	}
	v->items = items;
	v->items[v->n++] = it;
	return rc;
}

/* A block list: the "- item" lines from line j on (at their indent). */
static int block_list(yval *v, const ylines *y, size_t j, size_t *next)
{
	size_t ind = indent_of(y->lines[j]);
	int rc = 0;
	v->kind = Y_LIST;
	while (j < y->n && !rc) {
		const char *l = y->lines[j];
		if (blank_or_comment(l)) {
			j++;
			continue;
		}
		if (indent_of(l) < ind || (indent_of(l) == ind && l[ind] != '-'))
			break;
		if (indent_of(l) > ind) {   /* part of the previous item */
			j++;
			continue;
		}
		rc = list_item(v, l, ind);
		j++;
	}
	*next = j;
	return rc;
}

/* Nothing after the colon: a block of "- item" lines (at any indent), or an indented
 * mapping, or null. */
static int block_value(yval *v, const ylines *y, size_t k, size_t *next)
{
	size_t j = k + 1;
	while (j < y->n && blank_or_comment(y->lines[j]))
		j++;
	if (j < y->n && y->lines[j][indent_of(y->lines[j])] == '-' &&
	    (y->lines[j][indent_of(y->lines[j]) + 1] == ' ' ||
	     !y->lines[j][indent_of(y->lines[j]) + 1]))
		return block_list(v, y, j, next);
	if (j < y->n && indent_of(y->lines[j]) > 0) {
		v->kind = Y_MAP;
		while (j < y->n && (blank_or_comment(y->lines[j]) || indent_of(y->lines[j]) > 0))
			j++;
		*next = j;
	} else {
		v->kind = Y_NULL;
	}
	return 0;
}

/* The value of the key on line k, whose text after ':' is rest; *next gets the line after. */
static int value(yval *v, const ylines *y, size_t k, const char *rest, size_t *next)
{
	*next = k + 1;
	char *r = strdup(rest);
	if (!r)
		return -1;
	strip_comment(r);
	const char *t = r;
	while (*t == ' ')
		t++;
	int rc = *t == '|' || *t == '>' ? block_scalar(v, y, k, t, next)
		 : *t == '[' ? flow_value(v, y, k, t, next)
		 : *t ? scalar_value(v, y, k, t, next)
		 : block_value(v, y, k, next);
	free(r);
	return rc;
}

/* text cut into its lines (in place): y->lines. */
static int split_lines(ylines *y, char *text)
{
	size_t cap = 0;
	for (char *p = text; *p;) {
		char *e = strchr(p, '\n');
		if (y->n == cap) {
			cap = cap ? 2 * cap : 64;
			char **l = realloc(y->lines, cap * sizeof *l);
			if (!l)
				return -1;
			y->lines = l;
		}
		y->lines[y->n++] = p;
		if (!e)
			break;
		*e = 0;
		p = e + 1;
	}
	return 0;
}

/* The key of top-level line l (*key, allocated) and the text after its colon (*rest);
 * 1 for a line that is no "key: ..." (skipped), -1 out of memory. */
static int line_key(char **key, char **rest, char *l)
{
	if (*l == '"' || *l == '\'') {
		const char *p = l;
		if (!(*key = quoted(&p)))
			return -1;
		*rest = (char *)p;
		if (**rest != ':') {
			free(*key);
			return 1;
		}
		(*rest)++;
		return 0;
	}
	char *colon = l;
	while ((colon = strchr(colon, ':')) && colon[1] && colon[1] != ' ')
		colon++;
	if (!colon)
		return 1;
	size_t kn = (size_t)(colon - l);
	while (kn && l[kn - 1] == ' ')
		kn--;
	if (!(*key = tfs_hf_dupn(l, kn)))
		return -1;
	*rest = colon + 1;
	return 0;
}

/* key = v into c (both taken over): a repeated key's last value wins, as in PyYAML. */
static int card_put(ycard *c, char *key, yval v)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->e[i].key, key) == 0) {
			yval_free(&c->e[i].v);
			c->e[i].v = v;
			free(key);
			return 0;
		}
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 32;
		yentry *ne = realloc(c->e, nc * sizeof *ne);
		if (!ne) {
			free(key);
			yval_free(&v);
			return -1;
		}
		c->e = ne;
		c->cap = nc;
	}
	c->e[c->n++] = (yentry){ key, v };
	return 0;
}

/* Reads the front matter's top-level keys into c.  Lines it cannot read are skipped. */
static int parse_card(ycard *c, char *text)
{
	ylines y = { 0 };
	int rc = split_lines(&y, text);
	for (size_t k = 0; k < y.n && !rc;) {
		char *l = y.lines[k], *key, *rest;
		if (blank_or_comment(l) || indent_of(l) > 0 || *l == '-') {
			k++;
			continue;
		}
		if ((rc = line_key(&key, &rest, l)) == 1) {
			rc = 0;
			k++;
			continue;
		}
		if (rc)
			break;
		yval v = { 0 };
		size_t next;
		if ((rc = value(&v, &y, k, rest, &next))) {
			free(key);
			yval_free(&v);
			break;
		}
		k = next;
		rc = card_put(c, key, v);
	}
	free(y.lines);
	return rc;
}

/* Metadata.load_model_card: the YAML between a first line "---" and the next "---\n". */
int tfs_hf_card_load(ycard *c, const tfs_hf_files *files, tfs_error *err)
{
	uint8_t *text = NULL;
	uint64_t len = 0;
	int rc = tfs_hf_read_optional(files, "README.md", &text, &len, err);
	if (rc || !text)
		return rc;
	/* Python reads it as text: universal newlines */
	char *s = (char *)text;
	size_t w = 0;
	for (size_t r = 0; r < len; r++) {
		if (s[r] == '\r') {
			s[w++] = '\n';
			if (r + 1 < len && s[r + 1] == '\n')
				r++;
		} else {
			s[w++] = s[r];
		}
	}
	len = w;
	s[len] = 0;
	if (len < 4 || memcmp(s, "---\n", 4) != 0 || memchr(s, 0, (size_t)len)) {
		free(text);
		return 0;
	}
	char *body = s + 4, *end = strstr(body, "---\n");
	if (end)
		*end = 0;
	rc = parse_card(c, body);
	free(text);
	if (rc)
		return tfs_error_set(err, TFS_E_NOMEM, "README.md: out of memory");
	return 0;
}

/* ==== general.sampling.* (generation_config.json) ==== */

/* Metadata.load's gen_config: generation_config.json's sequence, top_k, top_p, min_p,
 * xtc_probability, xtc_threshold, temperature, penalty_last_n, penalty_repeat (else
 * repetition_penalty), mirostat, mirostat_tau, mirostat_eta, in that order, as INT32 (top_k,
 * penalty_last_n, mirostat), STRING (sequence, when not empty) or FLOAT32.  A file that is not
 * a JSON object counts as absent, as it does for the converter; a null value is left out.
 * Values the converter cannot write (it stops on them: a string for a number, a non-integer or
 * an out-of-range integer for INT32, a number beyond FLOAT32) are left out, as are NaN and
 * Infinity, which Python's json reads and jansson does not. */

enum { S_STR, S_I32, S_F32 };

static int sampling_key(tfs_hf_kvs *out, const char *key, int kind, const json_t *v,
			tfs_error *err)
{
	if (!v || json_is_null(v))
		return 0;
	if (kind == S_STR) {
		/* add_string leaves an empty (or any false) value out */
		if (!json_is_string(v) || json_string_length(v) == 0)
			return 0;
		return tfs_hf_kvs_add_strn(out, key, json_string_value(v), json_string_length(v),
					   err);
	}
	double d;
	if (json_is_boolean(v))   /* a Python bool is an int */
		d = json_is_true(v);
	else if (json_is_integer(v))
		d = (double)json_integer_value(v);
	else if (json_is_real(v) && kind == S_F32)
		d = json_real_value(v);
	else
		return 0;
	if (kind == S_I32) {
		long long i = json_is_integer(v) ? json_integer_value(v) : (long long)d;
		if (i < INT32_MIN || i > INT32_MAX)
			return 0;
		return tfs_hf_kvs_add_i32(out, key, (int32_t)i, err);
	}
	float f = (float)d;    /* struct.pack('<f'): the nearest float, overflow refused */
	if (isinf(f) && !isinf(d))
		return 0;
	return tfs_hf_kvs_add_f32(out, key, f, err);
}

int tfs_hf_sampling_keys(tfs_hf_kvs *out, const tfs_hf_files *files, tfs_error *err)
{
	uint8_t *text = NULL;
	uint64_t len = 0;
	int rc = tfs_hf_read_optional(files, "generation_config.json", &text, &len, err);
	if (rc || !text)
		return rc;
	json_t *g = json_loadb((const char *)text, (size_t)len, JSON_DECODE_ANY, NULL);
	free(text);
	if (!json_is_object(g) || json_object_size(g) == 0) {
		json_decref(g);
		return 0;
	}
	/* penalty_repeat: gen_config.get("penalty_repeat", gen_config.get("repetition_penalty")) */
	const json_t *repeat = json_object_get(g, "penalty_repeat");
	if (!repeat)
		repeat = json_object_get(g, "repetition_penalty");
	static const struct { const char *key, *name; int kind; } k[] = {
		{ "general.sampling.sequence", "sequence", S_STR },
		{ "general.sampling.top_k", "top_k", S_I32 },
		{ "general.sampling.top_p", "top_p", S_F32 },
		{ "general.sampling.min_p", "min_p", S_F32 },
		{ "general.sampling.xtc_probability", "xtc_probability", S_F32 },
		{ "general.sampling.xtc_threshold", "xtc_threshold", S_F32 },
		{ "general.sampling.temp", "temperature", S_F32 },
		{ "general.sampling.penalty_last_n", "penalty_last_n", S_I32 },
		{ "general.sampling.penalty_repeat", NULL, S_F32 },
		{ "general.sampling.mirostat", "mirostat", S_I32 },
		{ "general.sampling.mirostat_tau", "mirostat_tau", S_F32 },
		{ "general.sampling.mirostat_eta", "mirostat_eta", S_F32 },
	};
	for (size_t i = 0; !rc && i < sizeof k / sizeof k[0]; i++)
		rc = sampling_key(out, k[i].key, k[i].kind,
				  k[i].name ? json_object_get(g, k[i].name) : repeat, err);
	json_decref(g);
	return rc;
}
