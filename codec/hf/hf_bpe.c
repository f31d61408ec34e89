/*
 * hf_bpe.c - the name of a byte-level BPE tokenizer's pre-tokenizer (tokenizer.ggml.pre), as
 * llama.cpp's convert_hf_to_gguf.py finds it, without Python.
 *
 * The converter (get_vocab_base_pre) encodes a fixed check text with transformers'
 * AutoTokenizer, takes the sha256 of the ids' Python list text ("[128000, 198, ...]") and
 * looks it up in a table of hashes of known models.  Here:
 *   1. The normalizer + pre-tokenizer of tokenizer.json is looked up (hf_pre.c) in
 *      hf_pre_table.h, which holds, per configuration, how Hugging Face tokenizers splits the
 *      check text (made once by tests/hf/gen_pre_table.js with the real library).
 *   2. Each piece is mapped to GPT-2's byte characters and run through the file's BPE (its
 *      vocab, merges by rank, ignore_merges), the ids go through the post-processor (or the
 *      one transformers' Llama/Gemma fast tokenizers build from add_bos_token/add_eos_token),
 *      and the hash is looked up in the converter's table (last match wins, as its run of
 *      `if`s does).
 *   3. Without an answer there, a configuration only one llama.cpp pre-tokenizer has names it.
 * Added tokens in the check text (GPT-NeoX's runs of spaces): the library splits the text at
 * them first; the table holds that split for the sets of them known (hf_pre_table.h's
 * `added`).  The check text cannot be computed (and 3 decides) for another set, or when the
 * post-processor is one not handled here.
 * A WordPiece (BERT) tokenizer.json is hashed the same way, its words through WordPiece
 * (hf_wordpiece.c) instead of the BPE.
 */
#include "hf_pre.h"
#include "hex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== growable id list ==== */

typedef struct {
	uint32_t *v;
	size_t n, cap;
} ids_t;

static int ids_push(ids_t *l, uint32_t id)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		uint32_t *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return TFS_E_NOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = id;
	return 0;
}

/* ==== byte-level BPE ==== */

/* GPT-2's bytes_to_unicode: the character each byte is written as. */
static uint32_t byte_char(uint8_t b)
{
	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174))
		return b;
	/* the others, in order, from 256 */
	uint32_t k = 0;
	for (uint32_t x = 0; x < b; x++)
		if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174)))
			k++;
	return 256 + k;
}

/* Appends the UTF-8 of byte b's character (1 or 2 bytes) at out; returns its length. */
static size_t byte_utf8(uint8_t b, char *out)
{
	uint32_t c = byte_char(b);
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	out[0] = (char)(0xc0 | (c >> 6));
	out[1] = (char)(0x80 | (c & 0x3f));
	return 2;
}

typedef struct {
	uint64_t key;          /* (left id << 32 | right id) + 1; 0: empty */
	uint32_t rank, id;     /* the merge's rank and the merged token's id */
} merge_slot;

typedef struct {
	const tfs_hf_tok *tok;
	merge_slot *slots;
	size_t mask;
	bool ignore_merges;
	bool raw;              /* symbols are UTF-8 characters (else byte characters) */
	bool byte_fallback;    /* an unknown character as its bytes' <0xXX> tokens */
	bool fuse_unk;         /* consecutive unknown characters as one unk */
	bool have_unk;
	uint32_t unk;          /* model.unk_token's id */
	const char *file;
} bpe_t;

static bool vocab_id(const bpe_t *b, const char *s, size_t n, uint32_t *id)
{
	return tfs_hf_tok_id(b->tok, s, n, id);
}

static merge_slot *merge_find(const bpe_t *b, uint32_t l, uint32_t r)
{
	uint64_t key = (((uint64_t)l << 32) | r) + 1;
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & b->mask;
	while (b->slots[i].key && b->slots[i].key != key)
		i = (i + 1) & b->mask;
	return &b->slots[i];
}

#define MERGE_BATCH (TFS_HF_TOK_BATCH / 3)

/* Merges r0 .. r0 + m - 1 into the rank table, their texts (a, b, a + b) looked up together:
 * tokenizers refuses a merge whose part or concatenation is not in the vocabulary. */
static int merge_batch(bpe_t *b, size_t r0, size_t m, tfs_buf *cat, tfs_error *err)
{
	const tfs_hf_tok *tok = b->tok;
	const char *s[TFS_HF_TOK_BATCH];
	size_t len[TFS_HF_TOK_BATCH], at[MERGE_BATCH];
	uint32_t id[TFS_HF_TOK_BATCH];
	bool found[TFS_HF_TOK_BATCH];
	cat->len = 0;
	for (size_t j = 0; j < m; j++) {
		size_t r = r0 + j, oa = tok->moff[2 * r], ob = tok->moff[2 * r + 1];
		if (tok->mbad && tok->mbad[r])
			return tfs_error_set(err, TFS_E_FORMAT, "%s: merge %zu is neither \"a b\" nor "
					     "[\"a\", \"b\"]", b->file, r);
		at[j] = cat->len;   /* a + b, for its lookup */
		if (tfs_buf_append(cat, tok->mtext + oa, tok->moff[2 * r + 2] - oa))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", b->file);
		s[3 * j] = tok->mtext + oa;
		len[3 * j] = ob - oa;
		s[3 * j + 1] = tok->mtext + ob;
		len[3 * j + 1] = tok->moff[2 * r + 2] - ob;
		len[3 * j + 2] = len[3 * j] + len[3 * j + 1];
	}
	for (size_t j = 0; j < m; j++)
		s[3 * j + 2] = cat->data + at[j];
	tfs_hf_tok_ids(tok, s, len, 3 * m, id, found);
	for (size_t j = 0; j < m; j++) {
		if (!found[3 * j] || !found[3 * j + 1] || !found[3 * j + 2])
			return tfs_error_set(err, TFS_E_FORMAT, "%s: merge %zu '%.*s' '%.*s': a part "
					     "or their concatenation is not in the vocabulary",
					     b->file, r0 + j, (int)(len[3 * j] > 64 ? 64 : len[3 * j]),
					     s[3 * j], (int)(len[3 * j + 1] > 64 ? 64 : len[3 * j + 1]),
					     s[3 * j + 1]);
		__builtin_prefetch(merge_find(b, id[3 * j], id[3 * j + 1]));
	}
	for (size_t j = 0; j < m; j++) {
		merge_slot *ms = merge_find(b, id[3 * j], id[3 * j + 1]);
		/* a repeated merge: the later rank, as tokenizers' HashMap::collect keeps */
		*ms = (merge_slot){ .key = (((uint64_t)id[3 * j] << 32) | id[3 * j + 1]) + 1,
				    .rank = (uint32_t)(r0 + j), .id = id[3 * j + 2] };
	}
	return 0;
}

static int bpe_init(bpe_t *b, const tfs_hf_tok *tok, const char *file, tfs_error *err)
{
	const json_t *model = json_object_get(tok->root, "model");
	*b = (bpe_t){ .tok = tok, .file = file,
		      .ignore_merges = json_is_true(json_object_get(model, "ignore_merges")),
		      .byte_fallback = json_is_true(json_object_get(model, "byte_fallback")),
		      .fuse_unk = json_is_true(json_object_get(model, "fuse_unk")) };
	const json_t *unk = json_object_get(model, "unk_token");
	if (json_is_string(unk))
		b->have_unk = tfs_hf_tok_id(tok, json_string_value(unk), json_string_length(unk),
					    &b->unk);
	if (!tok->has_vocab)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: model.vocab is not an object", file);
	if (json_object_get(model, "merges"))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: model.merges is not a list", file);
	size_t n = tok->n_merges, cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	if (!(b->slots = calloc(cap, sizeof *b->slots)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	b->mask = cap - 1;
	tfs_buf cat = { 0 };
	int rc = 0;
	for (size_t r = 0; r < n && !rc; r += MERGE_BATCH)
		rc = merge_batch(b, r, n - r < MERGE_BATCH ? n - r : MERGE_BATCH, &cat, err);
	tfs_buf_free(&cat);
	return rc;
}

static void bpe_free(bpe_t *b)
{
	free(b->slots);
	b->slots = NULL;
}

typedef struct {
	uint32_t id, start, len;   /* a symbol of a word: token id, its bytes in the word */
} sym_t;

/* Tokenizes one piece (its byte characters w, n bytes) and appends the ids. */
/* The length of the character at w (n bytes left): a byte character (1 or 2 bytes), or
 * with raw a UTF-8 one (the check text is valid UTF-8). */
static size_t char_len(const bpe_t *b, const char *w, size_t n)
{
	unsigned c = (uint8_t)w[0];
	size_t l = !b->raw ? ((c & 0xe0) == 0xc0 ? 2 : 1) :
		   c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
	return l < n ? l : n;
}

/* The symbols of a word before merging: each character's token; without one, its bytes'
 * <0xXX> tokens (byte_fallback) or unk (consecutive ones fused when fuse_unk).  *unknown:
 * a character tokenizers could not encode (no unk). */
static void initial_symbols(const bpe_t *b, const char *w, size_t n, sym_t *s, size_t *ns,
			    bool *unknown)
{
	bool last_unk = false;
	*ns = 0;
	for (size_t i = 0, cl; i < n; i += cl) {
		size_t k = *ns;
		uint32_t id;
		cl = char_len(b, w + i, n - i);
		if (vocab_id(b, w + i, cl, &id)) {
			s[(*ns)++] = (sym_t){ id, (uint32_t)i, (uint32_t)cl };
			last_unk = false;
			continue;
		}
		for (size_t j = 0; b->byte_fallback && j < cl; j++) {
			char hx[8];
			snprintf(hx, sizeof hx, "<0x%02X>", (uint8_t)w[i + j]);
			if (!vocab_id(b, hx, 6, &id))
				break;
			s[(*ns)++] = (sym_t){ id, (uint32_t)(i + j), 1 };
		}
		if (*ns == k + cl && b->byte_fallback) {
			last_unk = false;
			continue;
		}
		*ns = k;
		if (!b->have_unk) {
			*unknown = true;
			return;
		}
		if (last_unk && b->fuse_unk)
			s[*ns - 1].len += (uint32_t)cl;
		else
			s[(*ns)++] = (sym_t){ b->unk, (uint32_t)i, (uint32_t)cl };
		last_unk = true;
	}
}

/* Tokenizes one piece (its characters w, n bytes) and appends the ids. */
static int bpe_word(const bpe_t *b, const char *w, size_t n, ids_t *out, bool *unknown)
{
	uint32_t id;
	if (b->ignore_merges && vocab_id(b, w, n, &id))
		return ids_push(out, id);
	sym_t *s = malloc((n ? n : 1) * sizeof *s);
	if (!s)
		return TFS_E_NOMEM;
	size_t ns = 0;
	initial_symbols(b, w, n, s, &ns, unknown);
	if (*unknown) {
		free(s);
		return 0;
	}
	for (;;) {
		size_t best = ns;
		uint32_t best_rank = UINT32_MAX, best_id = 0;
		for (size_t i = 0; i + 1 < ns; i++) {
			const merge_slot *m = merge_find(b, s[i].id, s[i + 1].id);
			if (m->key && m->rank < best_rank) {
				best_rank = m->rank;
				best_id = m->id;
				best = i;
			}
		}
		if (best == ns)
			break;
		s[best].id = best_id;
		s[best].len += s[best + 1].len;
		memmove(&s[best + 1], &s[best + 2], (ns - best - 2) * sizeof *s);
		ns--;
	}
	int rc = 0;
	for (size_t i = 0; i < ns && !rc; i++)
		rc = ids_push(out, s[i].id);
	free(s);
	return rc;
}

/* ==== post-processing ==== */

/* The id of token text s in the vocabulary or among the added tokens. */
static bool token_id(const bpe_t *b, const tfs_hf_tok *tok, const char *s, uint32_t *id)
{
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(tok->root, "added_tokens"), i, a) {
		const char *c = json_string_value(json_object_get(a, "content"));
		json_t *v = json_object_get(a, "id");
		if (c && strcmp(c, s) == 0 && json_is_integer(v) && json_integer_value(v) >= 0) {
			*id = (uint32_t)json_integer_value(v);
			return true;
		}
	}
	return vocab_id(b, s, strlen(s), id);
}

/* A tokenizer_config.json token entry: "text" or {"content": "text", ...}. */
static const char *config_token(const json_t *cfg, const char *key)
{
	const json_t *e = json_object_get(cfg, key);
	if (json_is_object(e))
		e = json_object_get(e, "content");
	return json_string_value(e);
}

/* seq through post-processor pp into out.  1: a processor not handled here. */
static int post_process(const json_t *pp, const ids_t *seq, ids_t *out)
{
	const char *type = json_string_value(json_object_get(pp, "type"));
	int rc = 0;
	if (!pp || json_is_null(pp) || (type && strcmp(type, "ByteLevel") == 0)) {
		for (size_t i = 0; i < seq->n && !rc; i++)
			rc = ids_push(out, seq->v[i]);
		return rc;
	}
	if (!type)
		return 1;
	if (strcmp(type, "Sequence") == 0) {
		ids_t cur = { 0 }, next = { 0 };
		for (size_t i = 0; i < seq->n && !rc; i++)
			rc = ids_push(&cur, seq->v[i]);
		size_t k;
		json_t *p;
		json_array_foreach(json_object_get(pp, "processors"), k, p) {
			if (rc)
				break;
			next.n = 0;
			if (!(rc = post_process(p, &cur, &next))) {
				ids_t t = cur;
				cur = next;
				next = t;
			}
		}
		for (size_t i = 0; i < cur.n && !rc; i++)
			rc = ids_push(out, cur.v[i]);
		free(cur.v);
		free(next.v);
		return rc;
	}
	if (strcmp(type, "TemplateProcessing") == 0) {
		const json_t *single = json_object_get(pp, "single");
		const json_t *specials = json_object_get(pp, "special_tokens");
		size_t k;
		json_t *item;
		if (!json_is_array(single))
			return 1;
		json_array_foreach(single, k, item) {
			const json_t *sp = json_object_get(item, "SpecialToken");
			const json_t *sq = json_object_get(item, "Sequence");
			if (sq) {
				for (size_t i = 0; i < seq->n && !rc; i++)
					rc = ids_push(out, seq->v[i]);
			} else if (sp) {
				const char *name = json_string_value(json_object_get(sp, "id"));
				const json_t *st = name ? json_object_get(specials, name) : NULL;
				const json_t *sids = json_object_get(st, "ids");
				size_t j;
				json_t *v;
				if (!json_is_array(sids))
					return 1;
				json_array_foreach(sids, j, v) {
					if (!json_is_integer(v) || rc)
						return rc ? rc : 1;
					rc = ids_push(out, (uint32_t)json_integer_value(v));
				}
			} else {
				return 1;
			}
			if (rc)
				return rc;
		}
		return 0;
	}
	if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
		const json_t *cls = json_object_get(pp, "cls"), *sep = json_object_get(pp, "sep");
		if (!json_is_integer(json_array_get(cls, 1)) || !json_is_integer(json_array_get(sep, 1)))
			return 1;
		rc = ids_push(out, (uint32_t)json_integer_value(json_array_get(cls, 1)));
		for (size_t i = 0; i < seq->n && !rc; i++)
			rc = ids_push(out, seq->v[i]);
		return rc ? rc : ids_push(out, (uint32_t)json_integer_value(json_array_get(sep, 1)));
	}
	return 1;
}

/* transformers' Llama/CodeLlama/Gemma fast tokenizers replace the post-processor with
 * [bos] $A [eos] from add_bos_token (default true) and add_eos_token (default false). */
static bool llama_class(const json_t *cfg)
{
	static const char *const names[] = { "LlamaTokenizer", "LlamaTokenizerFast",
		"CodeLlamaTokenizer", "CodeLlamaTokenizerFast", "GemmaTokenizer",
		"GemmaTokenizerFast" };
	const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
	for (size_t i = 0; cls && i < sizeof names / sizeof *names; i++)
		if (strcmp(cls, names[i]) == 0)
			return true;
	return false;
}

/* ids through what the converter's tokenizer.encode adds.  1: not computable here. */
static int add_specials(const bpe_t *b, const tfs_hf_tok *tok, const json_t *cfg,
			const ids_t *seq, ids_t *out)
{
	if (!llama_class(cfg))
		return post_process(json_object_get(tok->root, "post_processor"), seq, out);
	const json_t *ab = json_object_get(cfg, "add_bos_token");
	const json_t *ae = json_object_get(cfg, "add_eos_token");
	bool add_bos = ab ? json_is_true(ab) : true, add_eos = json_is_true(ae);
	uint32_t bos = 0, eos = 0;
	const char *bs = config_token(cfg, "bos_token"), *es = config_token(cfg, "eos_token");
	if ((add_bos && (!bs || !token_id(b, tok, bs, &bos))) ||
	    (add_eos && (!es || !token_id(b, tok, es, &eos))))
		return 1;   /* transformers raises: no BOS/EOS token to add */
	int rc = add_bos ? ids_push(out, bos) : 0;
	for (size_t i = 0; i < seq->n && !rc; i++)
		rc = ids_push(out, seq->v[i]);
	return rc ? rc : add_eos ? ids_push(out, eos) : 0;
}

/* ==== the check text's hash ==== */

/* Python's str(list) of the ids ("[1, 2, 3]"), its sha256 as 64 hex digits. */
static int hash_ids(const ids_t *all, char hex[65])
{
	tfs_buf list = { 0 };
	int e = tfs_buf_append(&list, "[", 1);
	for (size_t k = 0; k < all->n && !e; k++)
		e = tfs_buf_printf(&list, k ? ", %u" : "%u", all->v[k]);
	if (!e)
		e = tfs_buf_append(&list, "]", 1);
	if (e || tfs_sha256_hex(hex, list.data, list.len))
		e = TFS_E_NOMEM;
	tfs_buf_free(&list);
	return e ? TFS_E_NOMEM : 0;
}

/* Byte-level: the table's pieces of the check text in GPT-2's byte characters, each through
 * the BPE, an added token's piece as its id.  1: not computable here (added tokens in the
 * text the table has no split for). */
static int bytelevel_seq(const struct hf_pre_config *c, const tfs_hf_tok *tok, const bpe_t *b,
			 ids_t *seq, bool *unknown)
{
	if (!(c = tfs_hf_pre_added(c, tok)))
		return 1;
	const char *text = c->text ? c->text : tfs_hf_chktxt;
	char *w = malloc(2 * 65536);
	int rc = w ? 0 : TFS_E_NOMEM;
	for (size_t k = 0, pos = 0, len; !rc && k < c->n && !*unknown; pos += len, k++) {
		size_t wn = 0;
		len = c->lens[k] & ~TFS_HF_ADDED_PIECE;
		if (c->lens[k] & TFS_HF_ADDED_PIECE) {
			uint32_t id;
			memcpy(w, text + pos, len);
			w[len] = 0;
			if (!token_id(b, tok, w, &id))
				rc = 1;   /* (it is one: added_config found it) */
			else
				rc = ids_push(seq, id);
			continue;
		}
		for (size_t j = 0; j < len; j++)
			wn += byte_utf8((uint8_t)text[pos + j], w + wn);
		rc = bpe_word(b, w, wn, seq, unknown);
	}
	free(w);
	return rc;
}

/* The longest added token at s (n bytes left): its length and id, or 0.  *odd: a match
 * whose flags (normalized, lstrip, rstrip, single_word) tokenizers treats otherwise. */
static size_t added_at(const json_t *added, const char *s, size_t n, uint32_t *id, bool *odd)
{
	size_t best = 0, i;
	json_t *a;
	json_array_foreach(added, i, a) {
		const json_t *c = json_object_get(a, "content");
		size_t m = json_string_length(c);
		const char *t = json_string_value(c);
		if (!t || !m || m > n || m <= best || t[0] != s[0] || memcmp(t, s, m) != 0)
			continue;
		static const char *const flags[] = { "normalized", "lstrip", "rstrip", "single_word" };
		for (size_t f = 0; f < 4; f++)
			*odd |= json_is_true(json_object_get(a, flags[f]));
		best = m;
		*id = (uint32_t)json_integer_value(json_object_get(a, "id"));
	}
	return best;
}

/* s normalized into out: no normalizer, or Replace(String) ones (in a Sequence).  false:
 * another normalizer. */
static bool normalize(const json_t *nz, const char *s, size_t n, tfs_buf *out)
{
	const char *type = json_string_value(json_object_get(nz, "type"));
	const json_t *list = json_object_get(nz, "normalizers");
	size_t count = !nz || json_is_null(nz) ? 0 : list ? json_array_size(list) : 1;
	out->len = 0;
	if (tfs_buf_append(out, s, n))
		return false;
	if (type && strcmp(type, "Sequence") != 0 && list)
		return false;
	for (size_t k = 0; k < count; k++) {
		const json_t *r = list ? json_array_get(list, k) : nz;
		const char *rt = json_string_value(json_object_get(r, "type"));
		const char *from = json_string_value(json_object_get(json_object_get(r, "pattern"),
								     "String"));
		const json_t *to = json_object_get(r, "content");
		if (!rt || strcmp(rt, "Replace") != 0 || !from || !*from || !json_is_string(to))
			return false;
		tfs_buf next = { 0 };
		size_t fl = strlen(from);
		for (size_t i = 0; i < out->len;) {
			bool hit = i + fl <= out->len && memcmp(out->data + i, from, fl) == 0;
			if (tfs_buf_append(&next, hit ? json_string_value(to) : out->data + i,
					   hit ? json_string_length(to) : 1)) {
				tfs_buf_free(&next);
				return false;
			}
			i += hit ? fl : 1;
		}
		tfs_buf_free(out);
		*out = next;
	}
	return true;
}

/* Raw (SentencePiece-style) BPE, where the pre-tokenizer keeps the text whole: the check
 * text split at its added tokens (leftmost-longest), the parts between them normalized and
 * each tokenized whole.  1: not computable here. */
static int raw_seq(const struct hf_pre_config *c, const tfs_hf_tok *tok, const bpe_t *b,
		   ids_t *seq, bool *unknown)
{
	const json_t *added = json_object_get(tok->root, "added_tokens");
	const char *t = tfs_hf_chktxt;
	size_t n = strlen(t), from = 0;
	tfs_buf part = { 0 };
	bool odd = false;
	int rc = c->n == 1 ? 0 : 1;
	for (size_t i = 0; !rc && from < n && !*unknown;) {
		uint32_t id = 0;
		size_t m = i < n ? added_at(added, t + i, n - i, &id, &odd) : 0;
		if (odd)
			rc = 1;
		if (rc || (i < n && !m)) {
			i++;
			continue;
		}
		if (i > from) {   /* the text before the added token (or the end) */
			if (!normalize(json_object_get(tok->root, "normalizer"), t + from, i - from,
				       &part))
				rc = 1;
			else
				rc = bpe_word(b, part.data, part.len, seq, unknown);
		}
		if (!rc && m)
			rc = ids_push(seq, id);
		from = i += m;
	}
	tfs_buf_free(&part);
	return rc;
}

/* WordPiece (BERT): the table's words through the vocabulary (hf_wordpiece.c), then the
 * post-processor.  As check_hash. */
static int wordpiece_hash(const struct hf_pre_config *c, const tfs_hf_tok *tok,
			  const json_t *cfg, char hex[65], const char *file, tfs_error *err)
{
	ids_t seq = { 0 }, all = { 0 };
	bpe_t b = { .tok = tok };
	int rc = c->byte_level || !c->text ? 1 : tfs_hf_wordpiece_words(tok, c->text, c->lens,
									 c->n, &seq.v, &seq.n);
	seq.cap = seq.n;
	if (!rc)
		rc = add_specials(&b, tok, cfg, &seq, &all);
	if (!rc)
		rc = hash_ids(&all, hex);
	if (rc < 0)
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	free(seq.v);
	free(all.v);
	return rc ? rc : hex[0] ? 0 : 1;
}

/* 0 and hex set, 1 when not computable (hex ""), or an error. */
static int check_hash(const struct hf_pre_config *c, const tfs_hf_tok *tok, const json_t *cfg,
		      char hex[65], const char *file, tfs_error *err)
{
	hex[0] = 0;
	const json_t *model = json_object_get(tok->root, "model");
	const char *type = json_string_value(json_object_get(model, "type"));
	if (type && strcmp(type, "WordPiece") == 0)
		return wordpiece_hash(c, tok, cfg, hex, file, err);
	const char *cp = json_string_value(json_object_get(model, "continuing_subword_prefix"));
	const char *ew = json_string_value(json_object_get(model, "end_of_word_suffix"));
	if ((cp && *cp) || (ew && *ew))
		return 1;
	bpe_t b;
	int rc = bpe_init(&b, tok, file, err);
	ids_t seq = { 0 }, all = { 0 };
	bool unknown = false;
	if (rc) {
		bpe_free(&b);
		return rc;
	}
	b.raw = !c->byte_level;
	rc = c->byte_level ? bytelevel_seq(c, tok, &b, &seq, &unknown)
			   : raw_seq(c, tok, &b, &seq, &unknown);
	if (!rc && !unknown)
		rc = add_specials(&b, tok, cfg, &seq, &all);
	if (rc == 0 && !unknown)
		rc = hash_ids(&all, hex);
	if (rc < 0)   /* the steps after bpe_init fail only for memory */
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	free(seq.v);
	free(all.v);
	bpe_free(&b);
	if (rc)
		return rc;
	return hex[0] ? 0 : 1;
}

/* ==== the rule ==== */

/* Step 3: configurations that only one of llama.cpp's pre-tokenizers has. */
static const char *by_structure(const struct hf_pre_config *c, const tfs_hf_tok *tok,
				const json_t *cfg)
{
	if (strcmp(c->name, "llama3") == 0) {
		/* Meta's vocabulary hashes to llama-bpe when encode adds BOS, else smaug-bpe */
		ids_t none = { 0 }, out = { 0 };
		bpe_t b = { .tok = tok };
		int r = add_specials(&b, tok, cfg, &none, &out);
		free(out.v);
		return r == 0 && out.n > 0 ? "llama-bpe" : r == 0 ? "smaug-bpe" : NULL;
	}
	if (strcmp(c->name, "qwen2") == 0 || strcmp(c->name, "deepseek-v3") == 0 ||
	    strcmp(c->name, "tekken") == 0 || strcmp(c->name, "qwen35") == 0)
		return c->name;
	return NULL;
}

static void json_brief(const json_t *j, char *out, size_t cap)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	snprintf(out, cap, "%s", s ? s : "null");
	if (s && strlen(s) >= cap && cap > 4)
		memcpy(out + cap - 4, "...", 4);
	free(s);
}

int tfs_hf_bpe_pre(const char **name, char *chkhsh, const tfs_hf_tok *tok, const json_t *cfg,
		   const char *file, tfs_error *err)
{
	*name = NULL;
	if (chkhsh)
		chkhsh[0] = 0;
	const struct hf_pre_config *c = tfs_hf_pre_find(tok);
	if (!c) {
		char pre[200], nz[100];
		json_brief(json_object_get(tok->root, "pre_tokenizer"), pre, sizeof pre);
		json_brief(json_object_get(tok->root, "normalizer"), nz, sizeof nz);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: BPE pre-tokenizer not recognized: "
				     "normalizer %s with pre_tokenizer %s is no configuration "
				     "tensorfs knows the converter's name for", file, nz, pre);
	}
	char hex[65];
	int rc = check_hash(c, tok, cfg, hex, file, err);
	if (rc < 0)
		return rc;
	if (chkhsh)
		memcpy(chkhsh, hex, 65);
	if (rc == 0)
		*name = tfs_hf_pre_known(hex);
	if (!*name)
		*name = by_structure(c, tok, cfg);
	if (*name)
		return 0;
	return tfs_error_set(err, TFS_E_FORMAT, "%s: BPE pre-tokenizer not recognized: %s%s%s, "
			     "and its pre-tokenizer (%s: %s) is shared by several of llama.cpp's",
			     file, rc ? "the check text's hash cannot be computed here" :
			     "the check text's hash ", rc ? "" : hex,
			     rc ? "" : " is not in the converter's table", c->name, c->where);
}
