/*
 * hf_spm.c - SentencePiece's tokenizer.model read in C: a protobuf ModelProto.
 *
 * Protobuf wire format: a message is a run of fields, each
 *   1. a key, varint: field number << 3 | wire type
 *   2. a value by wire type: 0 varint, 1 fixed64, 2 varint length + bytes, 5 fixed32
 *      (3 and 4, groups, appear nowhere in sentencepiece_model.proto: refused).
 * A varint is 7 bits a byte, low first, the top bit set on all bytes but the last (<= 10).
 * Unknown fields, and known fields with another wire type, are skipped as protobuf does;
 * of a repeated scalar field the last value counts.
 *
 * ModelProto (sentencepiece_model.proto), the fields read:
 *   1  pieces, repeated SentencePiece:
 *        1 piece (string)  2 score (float)  3 type (enum, default 1 NORMAL; 2 UNKNOWN,
 *        3 CONTROL, 4 USER_DEFINED, 5 UNUSED, 6 BYTE; other numbers leave the default)
 *   2  trainer_spec:      3 model_type (1 UNIGRAM default, 2 BPE, 3 WORD, 4 CHAR)
 *                         35 byte_fallback (bool)
 *   3  normalizer_spec:   2 precompiled_charsmap (bytes), 3 add_dummy_prefix (default
 *                         true), 4 remove_extra_whitespaces (default true)
 */
#include "hf_vocab.h"
#include "strmap.h"
#include "model_impl.h" /* tfs_utf8_valid */

#include <stdlib.h>
#include <string.h>

#define SPM_MAX_PIECES (1u << 24)   /* real vocabularies: <= 256K pieces */

/* ==== wire format ==== */

static int pb_varint(tfs_cursor *c, uint64_t *v, const char *what)
{
	uint64_t at = c->origin + c->pos, x = 0;
	for (unsigned shift = 0; shift < 70; shift += 7) {
		uint8_t b;
		int rc = tfs_cursor_u8(c, &b, what);
		if (rc)
			return rc;
		if (shift == 63 && (b & 0x7e))
			break;   /* more than 64 bits */
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return tfs_error_set(c->err, TFS_E_FORMAT, "%s: offset %llu: %s: varint longer than 64 "
			     "bits", c->file, (unsigned long long)at, what);
}

/* Reads a field's key: *num its number, *wt its wire type. */
static int pb_key(tfs_cursor *c, uint32_t *num, unsigned *wt, const char *what)
{
	uint64_t at = c->origin + c->pos, k;
	int rc = pb_varint(c, &k, what);
	if (rc)
		return rc;
	*wt = (unsigned)(k & 7);
	if ((k >> 3) == 0 || (k >> 3) > 0x1fffffff)
		return tfs_error_set(c->err, TFS_E_FORMAT, "%s: offset %llu: %s: field number %llu",
				     c->file, (unsigned long long)at, what,
				     (unsigned long long)(k >> 3));
	if (*wt == 3 || *wt == 4 || *wt > 5)
		return tfs_error_set(c->err, TFS_E_FORMAT, "%s: offset %llu: %s: wire type %u "
				     "(not a protobuf message this reader knows)", c->file,
				     (unsigned long long)at, what, *wt);
	*num = (uint32_t)(k >> 3);
	return 0;
}

/* A length-delimited value as a cursor of its own (messages name offsets in the file). */
static int pb_sub(tfs_cursor *c, tfs_cursor *sub, const char *what)
{
	uint64_t n;
	const uint8_t *p;
	int rc = pb_varint(c, &n, what);
	if (rc)
		return rc;
	uint64_t origin = c->origin + c->pos;
	if ((rc = tfs_cursor_bytes(c, &p, n, what)))
		return rc;
	*sub = (tfs_cursor){ .base = p, .size = n, .origin = origin, .file = c->file,
			     .err = c->err };
	return 0;
}

static int pb_skip(tfs_cursor *c, unsigned wt, const char *what)
{
	const uint8_t *p;
	uint64_t v;
	tfs_cursor sub;
	switch (wt) {
	case 0: return pb_varint(c, &v, what);
	case 1: return tfs_cursor_bytes(c, &p, 8, what);
	case 2: return pb_sub(c, &sub, what);
	default: return tfs_cursor_bytes(c, &p, 4, what);   /* 5 */
	}
}

/* ==== ModelProto ==== */

static int read_piece(tfs_cursor *c, tfs_spm_piece *pc)
{
	*pc = (tfs_spm_piece){ .piece = "", .len = 0, .score = 0.0f, .type = TFS_TOK_NORMAL };
	while (tfs_cursor_left(c)) {
		uint32_t num;
		unsigned wt;
		int rc = pb_key(c, &num, &wt, "piece field");
		if (rc)
			return rc;
		if (num == 1 && wt == 2) {
			tfs_cursor s;
			if ((rc = pb_sub(c, &s, "piece text")))
				return rc;
			pc->piece = (const char *)s.base;
			pc->len = (size_t)s.size;
		} else if (num == 2 && wt == 5) {
			uint32_t bits;
			if ((rc = tfs_cursor_u32(c, &bits, "piece score")))
				return rc;
			memcpy(&pc->score, &bits, 4);
		} else if (num == 3 && wt == 0) {
			uint64_t t;
			if ((rc = pb_varint(c, &t, "piece type")))
				return rc;
			if (t >= TFS_TOK_NORMAL && t <= TFS_TOK_BYTE)
				pc->type = (int)t;
		} else if ((rc = pb_skip(c, wt, "piece field"))) {
			return rc;
		}
	}
	return 0;
}

/* trainer_spec and normalizer_spec: the bools and enum above (a repeated message merges). */
static int read_spec(tfs_cursor *c, tfs_spm_model *m, bool trainer)
{
	while (tfs_cursor_left(c)) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		int rc = pb_key(c, &num, &wt, trainer ? "trainer_spec field" : "normalizer_spec field");
		if (rc)
			return rc;
		bool known = wt == 0 && (trainer ? (num == 3 || num == 35) : (num == 3 || num == 4));
		if (!trainer && num == 2 && wt == 2) {   /* precompiled_charsmap: the last one */
			tfs_cursor map;
			if ((rc = pb_sub(c, &map, "precompiled_charsmap")))
				return rc;
			m->charsmap = map.base;
			m->charsmap_len = (size_t)map.size;
			continue;
		}
		if (!known) {
			if ((rc = pb_skip(c, wt, trainer ? "trainer_spec field" :
					  "normalizer_spec field")))
				return rc;
			continue;
		}
		if ((rc = pb_varint(c, &v, trainer ? "trainer_spec value" : "normalizer_spec value")))
			return rc;
		if (trainer && num == 3)
			m->model_type = v <= 4 ? (int)v : -1;
		else if (trainer)
			m->byte_fallback = v != 0;
		else if (num == 3)
			m->add_dummy_prefix = v != 0;
		else
			m->remove_extra_whitespaces = v != 0;
	}
	return 0;
}

static int push_piece(tfs_spm_model *m, size_t *cap, const tfs_spm_piece *pc, tfs_cursor *c)
{
	if (m->n == SPM_MAX_PIECES)
		return tfs_error_set(c->err, TFS_E_FORMAT, "%s: more than %u pieces", c->file,
				     SPM_MAX_PIECES);
	if (m->n == *cap) {
		size_t nc = *cap ? 2 * *cap : 1024;
		tfs_spm_piece *p = realloc(m->pieces, nc * sizeof *p);
		if (!p)
			return tfs_error_set(c->err, TFS_E_NOMEM, "%s: out of memory", c->file);
		m->pieces = p;
		*cap = nc;
	}
	m->pieces[m->n++] = *pc;
	return 0;
}

/* ==== the loader's checks ==== */

static const char *spm_name(const void *ctx, uint32_t i, size_t *len)
{
	const tfs_spm_piece *p = (const tfs_spm_piece *)ctx + i;
	*len = p->len;
	return p->piece;
}

/* "<0x41>" -> 0x41 (sentencepiece's ByteToPiece spelling only: upper-case hex), else -1. */
static int piece_byte(const tfs_spm_piece *p)
{
	static const char hex[] = "0123456789ABCDEF";
	if (p->len != 6 || memcmp(p->piece, "<0x", 3) != 0 || p->piece[5] != '>')
		return -1;
	const char *hi = memchr(hex, p->piece[3], 16), *lo = memchr(hex, p->piece[4], 16);
	if (!hi || !lo)
		return -1;
	return (int)((hi - hex) * 16 + (lo - hex));
}

static int check_model(const tfs_spm_model *m, const char *file, tfs_error *err)
{
	if (m->model_type < 1)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: trainer_spec.model_type is not one "
				     "SentencePiece knows", file);
	if (m->n == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no pieces (not a SentencePiece model?)",
				     file);
	/* SentencePiece keeps two maps: normal pieces (NORMAL, USER_DEFINED, UNUSED) and
	 * reserved ones (the rest); a piece may be in each once. */
	tfs_strmap normal = { 0 }, reserved = { 0 };
	bool bytes[256] = { false };
	long unk = -1;
	int rc = 0;
	for (size_t i = 0; i < m->n && !rc; i++) {
		const tfs_spm_piece *p = &m->pieces[i];
		if (p->len == 0) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: piece %zu is empty", file, i);
			break;
		}
		if (!tfs_utf8_valid(p->piece, p->len)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: piece %zu is not valid UTF-8", file,
					   i);
			break;
		}
		bool is_normal = p->type == TFS_TOK_NORMAL || p->type == TFS_TOK_USER_DEFINED ||
				 p->type == TFS_TOK_UNUSED;
		tfs_strmap *map = is_normal ? &normal : &reserved;
		long prev = tfs_strmap_get(map, p->piece, p->len, spm_name, m->pieces);
		if (prev >= 0) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: piece %zu '%.*s' is already piece "
					   "%ld", file, i, (int)(p->len > 64 ? 64 : p->len), p->piece,
					   prev);
			break;
		}
		if (tfs_strmap_put(map, p->piece, p->len, (uint32_t)i, spm_name, m->pieces)) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
			break;
		}
		if (p->type == TFS_TOK_UNKNOWN) {
			if (unk >= 0)
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: pieces %ld and %zu are both "
						   "the unknown piece", file, unk, i);
			unk = (long)i;
		} else if (p->type == TFS_TOK_BYTE) {
			int b = piece_byte(p);
			if (!m->byte_fallback)
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: byte piece %zu '%.*s' although "
						   "byte_fallback is false", file, i, (int)p->len,
						   p->piece);
			else if (b < 0)
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: byte piece %zu '%.*s' is not "
						   "<0xXX>", file, i, (int)(p->len > 64 ? 64 : p->len),
						   p->piece);
			else
				bytes[b] = true;
		}
	}
	tfs_strmap_free(&normal);
	tfs_strmap_free(&reserved);
	if (rc)
		return rc;
	if (unk < 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no unknown piece (type UNKNOWN)", file);
	if (m->byte_fallback)
		for (int b = 0; b < 256; b++)
			if (!bytes[b])
				return tfs_error_set(err, TFS_E_FORMAT, "%s: byte_fallback is true but "
						     "byte piece <0x%02X> is missing", file, b);
	return 0;
}

int tfs_spm_parse(tfs_spm_model *m, const uint8_t *data, uint64_t len, const char *file,
		  tfs_error *err)
{
	*m = (tfs_spm_model){ .model_type = 1, .add_dummy_prefix = true,
			      .remove_extra_whitespaces = true };
	tfs_cursor c = { .base = data, .size = len, .file = file, .err = err };
	size_t cap = 0;
	int rc = 0;
	while (!rc && tfs_cursor_left(&c)) {
		uint32_t num;
		unsigned wt;
		tfs_cursor sub;
		if ((rc = pb_key(&c, &num, &wt, "ModelProto field")))
			break;
		if (wt != 2 || num < 1 || num > 3) {
			rc = pb_skip(&c, wt, "ModelProto field");
			continue;
		}
		if ((rc = pb_sub(&c, &sub, num == 1 ? "piece" : num == 2 ? "trainer_spec" :
				 "normalizer_spec")))
			break;
		if (num == 1) {
			tfs_spm_piece pc;
			if (!(rc = read_piece(&sub, &pc)))
				rc = push_piece(m, &cap, &pc, &c);
		} else {
			rc = read_spec(&sub, m, num == 2);
		}
	}
	if (!rc)
		rc = check_model(m, file, err);
	if (rc)
		tfs_spm_free(m);
	return rc;
}

void tfs_spm_free(tfs_spm_model *m)
{
	free(m->pieces);
	m->pieces = NULL;
	m->n = 0;
}
