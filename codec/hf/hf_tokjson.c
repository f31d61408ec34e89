/*
 * hf_tokjson.c - tokenizer.json read compactly.
 *
 * A byte-level BPE tokenizer.json is mostly two members: model.vocab (text -> id, 150k
 * entries for Qwen) and model.merges (as many pairs).  Parsed as one JSON tree they cost
 * ~100 MB and most of a second; here they are read by a scanner of their own into packed
 * arrays (one text buffer, offsets, ids, a hash), and only the rest (added_tokens, normalizer,
 * pre_tokenizer, post_processor, decoder, the model's other members) goes through jansson:
 *   1. the top-level object and the "model" object are walked member by member;
 *   2. model.vocab, when an object, and model.merges, when a list, are decoded here (strings
 *      unescaped and checked as UTF-8, ids as integers);
 *   3. every other member's value is delimited (brackets and strings) and parsed by jansson,
 *      with integers beyond 64 bits read as reals as tfs_hf_read_json does.
 * A member given twice keeps its last value, as Python's json does.  Also the repo's other
 * JSON files (tfs_hf_read_json: integers of any size, as Python reads them).
 */
#include "hf_vocab_impl.h"

#include <stdlib.h>
#include <string.h>

/* ==== the repo's JSON files ==== */

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

int tfs_hf_json_loadb(const char *data, size_t len, const char *file, size_t at, json_t **out,
		      tfs_error *err)
{
	json_error_t je;
	size_t wn = 0;
	char *wide = widen_big_ints(data, len, &wn);
	if (!wide)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	*out = json_loadb(wide, wn, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	free(wide);
	if (*out)
		return 0;
	if (at == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not JSON: line %d column %d: %s", file,
				     je.line, je.column, je.text);
	return tfs_error_set(err, TFS_E_FORMAT, "%s: not JSON at byte %zu: %s", file,
			     at + (size_t)(je.position > 0 ? je.position : 0), je.text);
}

/* A repo JSON file parsed: 0 and *out, or *out NULL and 0 when absent, or an error. */
int tfs_hf_read_json(const tfs_hf_files *f, const char *name, json_t **out, tfs_error *err)
{
	uint8_t *data;
	uint64_t len;
	*out = NULL;
	int rc = tfs_hf_read_optional(f, name, &data, &len, err);
	if (rc || !data)
		return rc;
	rc = tfs_hf_json_loadb((const char *)data, (size_t)len, name, 0, out, err);
	free(data);
	return rc;
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

/* ==== a scanner over tokenizer.json ==== */

typedef struct {
	const char *start, *p, *end;
	const char *file;
	tfs_error *err;
} scan;

static int bad(scan *s, const char *what)
{
	if (s->p >= s->end)
		return tfs_error_set(s->err, TFS_E_FORMAT, "%s: not JSON: it ends at byte %zu, "
				     "inside a value (cut short?)", s->file,
				     (size_t)(s->end - s->start));
	return tfs_error_set(s->err, TFS_E_FORMAT, "%s: not JSON at byte %zu: %s", s->file,
			     (size_t)(s->p - s->start), what);
}

static void ws(scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* Skips white space; true (and consumes it) when the next byte is c. */
static bool next_is(scan *s, char c)
{
	ws(s);
	if (s->p < s->end && *s->p == c) {
		s->p++;
		return true;
	}
	return false;
}

/* ==== strings ==== */

/* Length of the valid UTF-8 sequence at p (< end), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	size_t n = end - p;
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		return n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		return n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 &&
		       (p[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

static int hex4(scan *s, unsigned *out)
{
	if (s->end - s->p < 4)
		return bad(s, "a \\u escape without four hex digits");
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = *s->p++;
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			v |= (unsigned)((c | 0x20) - 'a' + 10);
		else
			return bad(s, "a \\u escape without four hex digits");
	}
	*out = v;
	return 0;
}

static int put_code(tfs_buf *b, unsigned c)
{
	char u[4];
	size_t n;
	if (c < 0x80) {
		u[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		u[0] = (char)(0xc0 | (c >> 6));
		u[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		u[0] = (char)(0xe0 | (c >> 12));
		u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (c >> 18));
		u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	return tfs_buf_append(b, u, n);
}

/* One escape after the backslash, appended to b. */
static int escape(scan *s, tfs_buf *b)
{
	if (s->p >= s->end)
		return bad(s, "an unterminated string");
	char c = *s->p++;
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *k = c ? strchr(from, c) : NULL;
	if (k)
		return tfs_buf_append(b, to + (k - from), 1) ? TFS_E_NOMEM : 0;
	if (c != 'u')
		return bad(s, "an invalid escape in a string");
	unsigned u, lo;
	int rc = hex4(s, &u);
	if (rc)
		return rc;
	if (u >= 0xdc00 && u <= 0xdfff)
		return bad(s, "a lone UTF-16 surrogate in a string");
	if (u >= 0xd800 && u <= 0xdbff) {
		if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
			return bad(s, "a lone UTF-16 surrogate in a string");
		s->p += 2;
		if ((rc = hex4(s, &lo)))
			return rc;
		if (lo < 0xdc00 || lo > 0xdfff)
			return bad(s, "a lone UTF-16 surrogate in a string");
		u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
	}
	return put_code(b, u) ? TFS_E_NOMEM : 0;
}

/* A string (at its opening quote after white space) decoded and appended to b. */
static int string_into(scan *s, tfs_buf *b)
{
	if (!next_is(s, '"'))
		return bad(s, "a string expected");
	for (;;) {
		const char *run = s->p;
		while (s->p < s->end && *s->p != '"' && *s->p != '\\' &&
		       (unsigned char)*s->p >= 0x20) {
			size_t n = utf8_len((const unsigned char *)s->p, (const unsigned char *)s->end);
			if (!n)
				return bad(s, "a string that is not UTF-8");
			s->p += n;
		}
		if (s->p > run && tfs_buf_append(b, run, (size_t)(s->p - run)))
			return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
		if (s->p >= s->end || (unsigned char)*s->p < 0x20)
			return bad(s, s->p >= s->end ? "an unterminated string" :
				   "a control character in a string");
		if (*s->p++ == '"')
			return 0;
		int rc = escape(s, b);
		if (rc == TFS_E_NOMEM)
			return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
		if (rc)
			return rc;
	}
}

/* ==== other values, through jansson ==== */

/* Moves past one value: strings and brackets are followed, primitives run to a delimiter;
 * jansson checks the rest. */
static int skip_value(scan *s)
{
	size_t depth = 0;
	ws(s);
	do {
		if (s->p >= s->end)
			return bad(s, "the file ends inside a value");
		char c = *s->p;
		if (c == '"') {
			for (s->p++; s->p < s->end && *s->p != '"'; s->p++)
				if (*s->p == '\\')
					s->p++;
			if (s->p >= s->end)
				return bad(s, "an unterminated string");
			s->p++;
		} else if (c == '{' || c == '[') {
			depth++;
			s->p++;
		} else if (c == '}' || c == ']') {
			if (!depth)
				return bad(s, "a value expected");
			depth--;
			s->p++;
		} else if (depth && (c == ',' || c == ':' || c == ' ' || c == '\t' || c == '\n' ||
				     c == '\r')) {
			s->p++;
		} else {
			const char *v = s->p;
			while (s->p < s->end && !strchr(",:]} \t\n\r", *s->p))
				s->p++;
			if (s->p == v)
				return bad(s, "a value expected");
		}
	} while (depth);
	return 0;
}

static int jansson_value(scan *s, json_t **out)
{
	const char *v = (ws(s), s->p);
	int rc = skip_value(s);
	if (rc)
		return rc;
	return tfs_hf_json_loadb(v, (size_t)(s->p - v), s->file, (size_t)(v - s->start), out,
				 s->err);
}

/* ==== model.vocab ==== */

static uint32_t hash_text(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 16777619u;
	h ^= h >> 16;   /* murmur3's finalizer: the low bits index the table */
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	return h ^ (h >> 16);
}

/* The slot of text p (n bytes) probing from i: its entry's, or the empty one ending the run. */
static uint32_t *slot_from(const tfs_hf_tok *t, const char *p, size_t n, size_t i)
{
	while (t->slot[i]) {
		size_t k = t->slot[i] - 1;
		if (t->off[k + 1] - t->off[k] == n && memcmp(t->text + t->off[k], p, n) == 0)
			break;
		i = (i + 1) & t->mask;
	}
	return &t->slot[i];
}

static uint32_t *vocab_slot(const tfs_hf_tok *t, const char *p, size_t n)
{
	return slot_from(t, p, n, hash_text(p, n) & t->mask);
}

bool tfs_hf_tok_id(const tfs_hf_tok *t, const char *s, size_t n, uint32_t *id)
{
	if (!t->slot)
		return false;
	uint32_t k = *vocab_slot(t, s, n);
	if (!k)
		return false;
	*id = t->id[k - 1];
	return true;
}

void tfs_hf_tok_ids(const tfs_hf_tok *t, const char *const *s, const size_t *len, size_t n,
		    uint32_t *ids, bool *found)
{
	size_t at[TFS_HF_TOK_BATCH];
	for (size_t i = 0; i < n; i++)
		found[i] = false;
	if (!t->slot)
		return;
	for (size_t i = 0; i < n && i < TFS_HF_TOK_BATCH; i++) {   /* the slots' lines */
		at[i] = hash_text(s[i], len[i]) & t->mask;
		__builtin_prefetch(&t->slot[at[i]]);
	}
	for (size_t i = 0; i < n && i < TFS_HF_TOK_BATCH; i++)     /* the entries' offsets */
		if (t->slot[at[i]])
			__builtin_prefetch(&t->off[t->slot[at[i]] - 1]);
	for (size_t i = 0; i < n && i < TFS_HF_TOK_BATCH; i++)     /* their texts */
		if (t->slot[at[i]])
			__builtin_prefetch(t->text + t->off[t->slot[at[i]] - 1]);
	for (size_t i = 0; i < n && i < TFS_HF_TOK_BATCH; i++) {
		uint32_t k = *slot_from(t, s[i], len[i], at[i]);
		if (k) {
			ids[i] = t->id[k - 1];
			found[i] = true;
		}
	}
}

static int grow_u32(uint32_t **a, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 1024;
	while (c < need)
		c *= 2;
	uint32_t *n = realloc(*a, c * sizeof *n);
	if (!n)
		return TFS_E_NOMEM;
	*a = n;
	*cap = c;
	return 0;
}

/* A non-negative integer below 2^31 (the only ids the vocabulary may hold). */
static bool small_int(scan *s, uint32_t *out)
{
	ws(s);
	const char *v = s->p;
	uint64_t x = 0;
	while (s->p < s->end && *s->p >= '0' && *s->p <= '9' && x <= INT32_MAX)
		x = 10 * x + (uint64_t)(*s->p++ - '0');
	if (s->p == v || x > INT32_MAX || (s->p - v > 1 && *v == '0') ||
	    (s->p < s->end && !strchr(",} \t\n\r", *s->p)))
		return false;
	*out = (uint32_t)x;
	return true;
}

static int vocab_rehash(tfs_hf_tok *t)
{
	size_t cap = 1024;
	while (cap < 2 * t->n)
		cap *= 2;
	free(t->slot);
	if (!(t->slot = calloc(cap, sizeof *t->slot)))
		return TFS_E_NOMEM;
	t->mask = cap - 1;
	for (size_t k = 0; k < t->n; k++) {
		uint32_t *sl = vocab_slot(t, t->text + t->off[k], t->off[k + 1] - t->off[k]);
		if (!*sl)   /* a key given twice: the first entry */
			*sl = (uint32_t)k + 1;
	}
	return 0;
}

/* model.vocab: {"text": id, ...}, at its '{'. */
static int parse_vocab(scan *s, tfs_hf_tok *t, tfs_buf *text)
{
	size_t cap_off = 0, cap_id = 0;
	s->p++;
	t->n = 0;
	text->len = 0;
	if (grow_u32(&t->off, &cap_off, 1))
		return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
	t->off[0] = 0;
	if (next_is(s, '}'))
		return 0;
	do {
		int rc = string_into(s, text);
		uint32_t id;
		if (rc)
			return rc;
		if (!next_is(s, ':'))
			return bad(s, "':' expected");
		if (!small_int(s, &id)) {
			/* (an empty first key "" added nothing: text->data may still be NULL) */
			size_t n = text->len - t->off[t->n];
			return tfs_error_set(s->err, TFS_E_FORMAT, "%s: vocab '%.*s' has no id (an "
					     "integer from 0 to 2^31-1)", s->file, (int)(n > 64 ? 64 : n),
					     n ? text->data + t->off[t->n] : "");
		}
		if (text->len > UINT32_MAX || grow_u32(&t->off, &cap_off, t->n + 2) ||
		    grow_u32(&t->id, &cap_id, t->n + 1))
			return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
		t->id[t->n] = id;
		t->off[++t->n] = (uint32_t)text->len;
	} while (next_is(s, ','));
	if (!next_is(s, '}'))
		return bad(s, "',' or '}' expected in model.vocab");
	return 0;
}

/* Drops the later copies of a key given twice (their id goes to the first: Python's dict
 * keeps the first position and the last value) and builds the hash. */
static int vocab_index(tfs_hf_tok *t, tfs_error *err, const char *file)
{
	uint8_t *dup = NULL;
	if (!t->text && !(t->text = strdup("")))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	if (vocab_rehash(t))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	for (size_t k = 0; k < t->n; k++) {
		uint32_t first = *vocab_slot(t, t->text + t->off[k], t->off[k + 1] - t->off[k]) - 1;
		if (first == k)
			continue;
		if (!dup && !(dup = calloc(t->n, 1)))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
		t->id[first] = t->id[k];
		dup[k] = 1;
	}
	if (!dup)
		return 0;
	/* rare: compact the entries, then index them again */
	size_t w = 0, pos = 0, from = t->off[0];
	for (size_t k = 0; k < t->n; k++) {
		size_t n = t->off[k + 1] - from;
		if (!dup[k]) {
			memmove(t->text + pos, t->text + from, n);
			t->id[w] = t->id[k];
			t->off[w++] = (uint32_t)pos;
			pos += n;
		}
		from = t->off[k + 1];
	}
	t->off[w] = (uint32_t)pos;
	t->n = w;
	free(dup);
	return vocab_rehash(t) ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file) : 0;
}

/* ==== model.merges ==== */

/* One merge (at its value) into t: "a b" or ["a", "b"]; the first decides which. */
static int parse_merge(scan *s, tfs_hf_tok *t, tfs_buf *mt, size_t k)
{
	ws(s);
	bool pair = s->p < s->end && *s->p == '[';
	if (k == 0)
		t->merge_pairs = pair;
	if (pair != t->merge_pairs || (!pair && (s->p >= s->end || *s->p != '"')))
		return tfs_error_set(s->err, TFS_E_FORMAT, "%s: merge %zu is neither \"a b\" nor "
				     "[\"a\", \"b\"] like the first", s->file, k);
	size_t a = mt->len;
	int rc;
	if (pair) {
		s->p++;
		if ((rc = string_into(s, mt)))
			return rc;
		t->moff[2 * k + 1] = (uint32_t)mt->len;
		if (!next_is(s, ',') || (rc = string_into(s, mt)) || !next_is(s, ']'))
			return rc ? rc : tfs_error_set(s->err, TFS_E_FORMAT, "%s: merge %zu is not "
						      "a list of two strings", s->file, k);
		return 0;
	}
	if ((rc = string_into(s, mt)))
		return rc;
	/* (an empty merge "" added nothing: mt->data may still be NULL) */
	char *sp = mt->len > a ? memchr(mt->data + a, ' ', mt->len - a) : NULL;
	if (!sp || memchr(sp + 1, ' ', mt->len - (size_t)(sp + 1 - mt->data))) {
		/* kept whole, as the converter writes it; BPE needs two parts (hf_bpe.c says so) */
		if (!t->mbad && !(t->mbad = calloc(t->cap_merges, 1)))
			return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
		t->mbad[k] = 1;
		t->moff[2 * k + 1] = (uint32_t)mt->len;
		return 0;
	}
	/* the space dropped: part a, then part b */
	size_t at = (size_t)(sp - mt->data);
	memmove(sp, sp + 1, mt->len - at - 1);
	mt->len--;
	t->moff[2 * k + 1] = (uint32_t)at;
	return 0;
}

static int parse_merges(scan *s, tfs_hf_tok *t, tfs_buf *mt)
{
	s->p++;
	t->n_merges = 0;
	mt->len = 0;
	if (!(t->moff = malloc(sizeof *t->moff)))
		return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
	t->moff[0] = 0;
	if (next_is(s, ']'))
		return 0;
	do {
		size_t k = t->n_merges, cap = t->cap_merges;
		if (k == cap) {
			cap = cap ? 2 * cap : 4096;
			uint32_t *o = realloc(t->moff, (2 * cap + 1) * sizeof *o);
			uint8_t *b = t->mbad ? realloc(t->mbad, cap) : NULL;
			if (o)
				t->moff = o;
			if (b) {
				memset(b + t->cap_merges, 0, cap - t->cap_merges);
				t->mbad = b;
			}
			if (!o || (t->mbad && !b))
				return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
			t->cap_merges = cap;
		}
		int rc = parse_merge(s, t, mt, k);
		if (rc)
			return rc;
		if (mt->len > UINT32_MAX)
			return tfs_error_set(s->err, TFS_E_NOMEM, "%s: merges too large", s->file);
		t->moff[2 * k + 2] = (uint32_t)mt->len;
		t->n_merges++;
	} while (next_is(s, ','));
	if (!next_is(s, ']'))
		return bad(s, "',' or ']' expected in model.merges");
	return 0;
}

/* ==== the file ==== */

static void clear_model(tfs_hf_tok *t)
{
	free(t->text);
	free(t->off);
	free(t->id);
	free(t->slot);
	free(t->mtext);
	free(t->moff);
	free(t->mbad);
	json_t *root = t->root;
	*t = (tfs_hf_tok){ .root = root };
}

/* An object's members, at its '{': each value through member(), which consumes it. */
static int members(scan *s, int (*member)(scan *, tfs_hf_tok *, json_t *, const char *, size_t),
		   tfs_hf_tok *t, json_t *obj)
{
	tfs_buf key = { 0 };
	int rc = 0;
	s->p++;
	if (next_is(s, '}'))
		return 0;
	do {
		key.len = 0;
		if ((rc = string_into(s, &key)) || (tfs_buf_append(&key, "", 1) &&
		    (rc = tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file))))
			break;
		if (!next_is(s, ':')) {
			rc = bad(s, "':' expected");
			break;
		}
		if ((rc = member(s, t, obj, key.data, key.len - 1)))
			break;
	} while (next_is(s, ','));
	if (!rc && !next_is(s, '}'))
		rc = bad(s, "',' or '}' expected");
	tfs_buf_free(&key);
	return rc;
}

static int set_json(scan *s, json_t *obj, const char *key, size_t n)
{
	json_t *v;
	int rc = jansson_value(s, &v);
	if (!rc && json_object_setn_new(obj, key, n, v))
		rc = tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
	return rc;
}

static int model_member(scan *s, tfs_hf_tok *t, json_t *model, const char *key, size_t n)
{
	ws(s);
	char c = s->p < s->end ? *s->p : 0;
	bool vocab = n == 5 && memcmp(key, "vocab", 5) == 0 && c == '{';
	bool merges = n == 6 && memcmp(key, "merges", 6) == 0 && c == '[';
	if (!vocab && !merges)
		return set_json(s, model, key, n);
	json_object_deln(model, key, n);
	tfs_buf b = { 0 };
	int rc;
	if (vocab) {
		free(t->text);
		t->text = NULL;
		rc = parse_vocab(s, t, &b);
		t->text = b.data;
		t->has_vocab = true;
		return rc ? rc : vocab_index(t, s->err, s->file);
	}
	free(t->mtext);
	free(t->moff);
	free(t->mbad);
	t->moff = NULL;
	t->mbad = NULL;
	t->cap_merges = 0;
	rc = parse_merges(s, t, &b);
	t->mtext = b.data;
	t->has_merges = true;
	return rc;
}

static int top_member(scan *s, tfs_hf_tok *t, json_t *root, const char *key, size_t n)
{
	ws(s);
	if (!(n == 5 && memcmp(key, "model", 5) == 0 && s->p < s->end && *s->p == '{'))
		return set_json(s, root, key, n);
	json_t *model = json_object();
	if (!model || json_object_setn_new(root, key, n, model))
		return tfs_error_set(s->err, TFS_E_NOMEM, "%s: out of memory", s->file);
	clear_model(t);
	return members(s, model_member, t, model);
}

int tfs_hf_tok_parse(tfs_hf_tok *t, const char *data, size_t len, const char *file,
		     tfs_error *err)
{
	scan s = { .start = data, .p = data, .end = data + len, .file = file, .err = err };
	*t = (tfs_hf_tok){ .root = json_object() };
	if (!t->root)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	int rc;
	ws(&s);
	if (s.p >= s.end || *s.p != '{')
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: not a JSON object", file);
	else
		rc = members(&s, top_member, t, t->root);
	if (!rc && (ws(&s), s.p != s.end))
		rc = bad(&s, "more after the object");
	if (rc)
		tfs_hf_tok_clear(t);
	return rc;
}

void tfs_hf_tok_clear(tfs_hf_tok *t)
{
	clear_model(t);
	json_decref(t->root);
	t->root = NULL;
}

void tfs_hf_tok_close(tfs_hf_tok *t)
{
	if (t)
		tfs_hf_tok_clear(t);
	free(t);
}

int tfs_hf_tok_read(tfs_hf_tok **out, const tfs_hf_files *f, tfs_error *err)
{
	uint8_t *data;
	uint64_t len;
	*out = NULL;
	int rc = tfs_hf_read_optional(f, "tokenizer.json", &data, &len, err);
	if (rc || !data)
		return rc;
	tfs_hf_tok *t = malloc(sizeof *t);
	if (!t)
		rc = tfs_error_set(err, TFS_E_NOMEM, "tokenizer.json: out of memory");
	else if ((rc = tfs_hf_tok_parse(t, (const char *)data, (size_t)len, "tokenizer.json", err)))
		free(t);
	else
		*out = t;
	free(data);
	return rc;
}
