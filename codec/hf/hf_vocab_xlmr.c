/*
 * hf_vocab_xlmr.c - XLMRobertaModel's vocabulary as llama.cpp's converter (de3ff81,
 * conversion/bert.py _xlmroberta_set_vocab) writes it from sentencepiece.bpe.model:
 *  - a unigram model (the converter asserts it); vocab_size = max(hparams' vocab_size, the
 *    model's pieces), the ids past the pieces "[PADi]" (-10000, unused);
 *  - fairseq's order: <s> <pad> </s> <unk> (control x3, unknown; scores 0), then the model's
 *    pieces from id 3 on, one place up; the last token falls off;
 *  - keys: tokenizer.ggml.model "t5", pre "default", tokens, scores, token types,
 *    add_space_prefix (add_dummy_prefix), token_type_count (type_vocab_size, else 1),
 *    remove_extra_whitespaces, the precompiled charsmap (bytes: an array of UINT8) when there
 *    is one, then gguf-py's SpecialVocab.
 * Without sentencepiece.bpe.model the converter reads tokenizer.json through transformers'
 * tokenizer: refused for XLMRobertaModel; NomicBertModel's MoE variant
 * (nomic-embed-text-v2-moe ships tokenizer.json alone) has it (json_vocab):
 *  - XLMRobertaTokenizerFast over a Unigram model.vocab ([piece, score] by id, no fairseq
 *    shift): vocab_size = max(hparams' vocab_size, the pieces), "[PADi]" past them;
 *  - a token's text is its added token's content when one has its id (tokenizers'
 *    id_to_token), else its piece; its score the piece's; its type UNKNOWN for the unk id
 *    (tokenizer_config.json's unk_token among the added tokens, else model.unk_id, else 3),
 *    CONTROL for all_special_ids, USER_DEFINED for another added token, else NORMAL;
 *  - add_space_prefix is tokenizer_config.json's add_prefix_space and
 *    remove_extra_whitespaces its clean_up_tokenization_spaces (the tokenizer's attributes:
 *    both false by default), the charsmap normalizer.precompiled_charsmap's base64.
 */
#include "hf_vocab_impl.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const char **s;
	size_t *len;
	float *score;
	int32_t *type;
	char **owned;         /* "[PADi]" names, one per token at most */
	size_t n;
} tokens;

static void tokens_free(tokens *t)
{
	for (size_t i = 0; t->owned && i < t->n; i++)
		free(t->owned[i]);
	free(t->owned);
	free(t->s);
	free(t->len);
	free(t->score);
	free(t->type);
	*t = (tokens){ 0 };
}

/* The token list of model sp with vs tokens, moved into fairseq's order. */
static int xlmr_tokens(tokens *t, const tfs_spm_model *sp, size_t vs, tfs_error *err)
{
	static const char *const first[4] = { "<s>", "<pad>", "</s>", "<unk>" };
	*t = (tokens){ .n = vs };
	t->s = calloc(vs, sizeof *t->s);
	t->len = calloc(vs, sizeof *t->len);
	t->score = calloc(vs, sizeof *t->score);
	t->type = calloc(vs, sizeof *t->type);
	t->owned = calloc(vs, sizeof *t->owned);
	if (!t->s || !t->len || !t->score || !t->type || !t->owned)
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory for %zu tokens", vs);
	for (size_t i = 0; i < vs; i++) {
		if (i < 4) {
			t->s[i] = first[i];
			t->len[i] = strlen(first[i]);
			t->type[i] = i < 3 ? TFS_TOK_CONTROL : TFS_TOK_UNKNOWN;
			continue;
		}
		size_t k = i - 1;   /* the model's id of token i */
		if (k < sp->n) {
			const tfs_spm_piece *p = &sp->pieces[k];
			t->s[i] = p->piece;
			t->len[i] = p->len;
			t->score[i] = p->score;
			/* IsUnknown, IsControl, IsUnused, IsByte; a user-defined piece is NORMAL */
			t->type[i] = p->type == TFS_TOK_USER_DEFINED ? TFS_TOK_NORMAL : p->type;
			continue;
		}
		char pad[32];   /* [PADk]: named by its id before the move */
		int pn = snprintf(pad, sizeof pad, "[PAD%zu]", k);
		if (!(t->owned[i] = strdup(pad)))
			return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory");
		t->s[i] = t->owned[i];
		t->len[i] = (size_t)pn;
		t->score[i] = -10000.0f;
		t->type[i] = TFS_TOK_UNUSED;
	}
	return 0;
}

/* The precompiled charsmap as gguf-py writes bytes: an array of UINT8. */
static int put_charsmap(tfs_hf_kvs *out, const uint8_t *map, size_t n, tfs_error *err)
{
	uint8_t *p = malloc(12 + n);
	if (!p)
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory");
	uint32_t u8 = 0;   /* GGUF_TYPE_UINT8 */
	uint64_t cnt = n;
	memcpy(p, &u8, 4);
	memcpy(p + 4, &cnt, 8);
	memcpy(p + 12, map, n);
	int rc = tfs_hf_kvs_add(out, "tokenizer.ggml.precompiled_charsmap", 9 /* ARRAY */, p,
				12 + n, err);
	free(p);
	return rc;
}

/* hparams[key] as a count (absent: dflt). */
static int count_of(const json_t *config, const char *key, long long dflt, long long max,
		    long long *out, tfs_error *err)
{
	const json_t *v = json_object_get(config, key);
	*out = dflt;
	if (v && (!tfs_hf_py_int(v, out) || *out < 0 || *out > max))
		return tfs_error_set(err, TFS_E_FORMAT, "config.json: %s is not a count", key);
	return 0;
}

static int put_keys(tfs_hf_kvs *out, const tokens *t, bool prefix, bool remove_ws,
		    const uint8_t *charsmap, size_t charsmap_len, long long ntypes, tfs_error *err)
{
	int rc;
	if ((rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "t5", 2, err)) ||
	    (rc = tfs_hf_put_str(out, "tokenizer.ggml.pre", "default", 7, err)) ||
	    (rc = tfs_hf_kvs_add_arr_str(out, "tokenizer.ggml.tokens", t->s, t->len, t->n, err)) ||
	    (rc = tfs_hf_kvs_add_arr_f32(out, "tokenizer.ggml.scores", t->score, t->n, err)) ||
	    (rc = tfs_hf_kvs_add_arr_i32(out, "tokenizer.ggml.token_type", t->type, t->n, err)) ||
	    (rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_space_prefix", prefix, err)) ||
	    (rc = tfs_hf_put_u32(out, "tokenizer.ggml.token_type_count", (uint32_t)ntypes,
				 err)) ||
	    (rc = tfs_hf_put_bool(out, "tokenizer.ggml.remove_extra_whitespaces", remove_ws,
				  err)))
		return rc;
	return charsmap_len ? put_charsmap(out, charsmap, charsmap_len, err) : 0;
}

static int json_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		      const json_t *cfg, const json_t *config, tfs_error *err);

int tfs_hf_xlmr_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		      const json_t *cfg, const json_t *config, bool json, tfs_error *err)
{
	if (json) {
		/* with sentencepiece.bpe.model the converter reads that instead, and for
		 * nomic-bert-moe then sets token 250001 to <mask> (an IndexError below that) */
		uint8_t *d = NULL;
		uint64_t n = 0;
		int rc = tfs_hf_read_optional(files, "sentencepiece.bpe.model", &d, &n, err);
		bool has = d != NULL;
		free(d);
		if (!rc && has)
			rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "sentencepiece.bpe.model: "
					   "nomic-bert-moe's vocabulary from it (token 250001 made "
					   "<mask>) is not supported; tokenizer.json alone is");
		return rc ? rc : json_vocab(out, files, tok, cfg, config, err);
	}
	uint8_t *data = NULL;
	uint64_t len = 0;
	tfs_spm_model sp = { 0 };
	tokens t = { 0 };
	long long vs = 0, ntypes = 1;
	int rc = tfs_hf_read_file(files, "sentencepiece.bpe.model", &data, &len, err);
	if (rc == TFS_E_NOTFOUND)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "sentencepiece.bpe.model: no such file "
				     "(without it the converter reads XLM-RoBERTa's vocabulary with "
				     "transformers' tokenizer, which tensorfs does not reproduce)");
	if (!rc)
		rc = tfs_spm_parse(&sp, data, len, "sentencepiece.bpe.model", err);
	if (!rc && sp.model_type != 1)
		rc = tfs_error_set(err, TFS_E_FORMAT, "sentencepiece.bpe.model: not a unigram "
				   "model (trainer_spec.model_type %d; the converter asserts 1)",
				   sp.model_type);
	if (!rc && !(rc = count_of(config, "vocab_size", 0, 1ll << 31, &vs, err)))
		rc = count_of(config, "type_vocab_size", 1, UINT32_MAX, &ntypes, err);
	if (vs < (long long)sp.n)
		vs = (long long)sp.n;
	if (!rc && vs < 4)
		rc = tfs_error_set(err, TFS_E_FORMAT, "sentencepiece.bpe.model: %lld tokens, fewer "
				   "than XLM-R's four special ones", vs);
	if (!rc && !(rc = xlmr_tokens(&t, &sp, (size_t)vs, err)) &&
	    !(rc = put_keys(out, &t, sp.add_dummy_prefix, sp.remove_extra_whitespaces,
			    sp.charsmap, sp.charsmap_len, ntypes, err)))
		rc = tfs_hf_special_vocab(out, files, tok, cfg, false, (long long)t.n, err);
	tokens_free(&t);
	tfs_spm_free(&sp);
	free(data);
	return rc;
}

/* ==== tokenizer.json through transformers (NomicBertModel's MoE variant) ==== */

/* XLMRobertaTokenizerFast's defaults of bos, eos, unk, sep, pad, cls and mask (as the
 * tests' transformers stand-in has them: tests/hf/refconv) */
static const char *const xlmr_named[TFS_HF_SPECIAL_ATTRS] = { "<s>", "</s>", "<unk>", "</s>",
	"<pad>", "<s>", "<mask>" };

/* tokenizer.json's added tokens and the Unigram pieces, indexed once: how many there are is
 * the file's to choose, and a scan of them for each token, each special token and each
 * added one was a hang for a large list (cubic in the added tokens) */
typedef struct {
	json_t *by_id;       /* "ID": the last entry given that id (tokenizers' added vocabulary) */
	json_t *added_ids;   /* content: the highest id whose entry (by_id) has it
			      * (get_added_vocab's {content: id}) */
	json_t *listed;      /* content: the id of the last entry in the list that has it */
	json_t *pieces;      /* piece: its last index in model.vocab */
} vocab_index;

static void index_free(vocab_index *x)
{
	json_decref(x->by_id);
	json_decref(x->added_ids);
	json_decref(x->listed);
	json_decref(x->pieces);
}

/* the entry's content, or NULL when it has no string */
static const json_t *content_of(const json_t *a)
{
	const json_t *c = json_object_get(a, "content");
	return json_is_string(c) ? c : NULL;
}

/* t[c] = id (keep: only when above the id there) */
static int set_id(json_t *t, const json_t *c, long long id, bool keep_highest)
{
	json_t *cur = json_object_getn(t, json_string_value(c), json_string_length(c));
	if (keep_highest && cur && json_integer_value(cur) >= id)
		return 0;
	return json_object_setn_new(t, json_string_value(c), json_string_length(c),
				    json_integer(id));
}

static int index_vocab(vocab_index *x, const json_t *pieces, const json_t *added,
		       tfs_error *err)
{
	const json_t *a, *c;
	size_t i;
	char key[24];
	long long k;
	int bad = !(x->by_id = json_object()) || !(x->added_ids = json_object()) ||
		  !(x->listed = json_object()) || !(x->pieces = json_object());
	json_array_foreach(added, i, a) {
		if (bad || !tfs_hf_py_int(json_object_get(a, "id"), &k))
			continue;
		snprintf(key, sizeof key, "%lld", k);
		bad = json_object_set(x->by_id, key, (json_t *)a) ||
		      ((c = content_of(a)) && set_id(x->listed, c, k, false));
	}
	const char *id;
	json_t *e;
	json_object_foreach(x->by_id, id, e)
		if (!bad && (c = content_of(e)))
			bad = set_id(x->added_ids, c, strtoll(id, NULL, 10), true);
	json_array_foreach(pieces, i, e)
		if (!bad && json_is_string(c = json_array_get(e, 0)))
			bad = set_id(x->pieces, c, (long long)i, false);
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "tokenizer.json: out of memory") : 0;
}

/* The added token of id (the last given), or NULL. */
static const json_t *added_of(const vocab_index *x, long long id)
{
	char key[24];
	snprintf(key, sizeof key, "%lld", id);
	return json_object_get(x->by_id, key);
}

/* The id transformers gives token text s: the last added entry's that has it, else the
 * last piece's; -1: none. */
static long long id_of(const vocab_index *x, const char *s)
{
	const json_t *v = json_object_get(x->listed, s);
	if (!v)
		v = json_object_get(x->pieces, s);
	return v ? json_integer_value(v) : -1;
}

/* Whether id is among get_added_vocab()'s values ({content: id}: the highest id of a
 * content). */
static bool added_value(const vocab_index *x, long long id)
{
	const json_t *c = content_of(added_of(x, id));
	const json_t *v = c ? json_object_getn(x->added_ids, json_string_value(c),
					       json_string_length(c)) : NULL;
	return v && json_integer_value(v) == id;
}

/* Python's base64.b64decode of an ASCII string (validate=False) as CPython's binascii reads
 * it: characters outside the alphabet skipped, a quad's '=' padding ends the input (what
 * follows is ignored), a quad left open refused; the characters taken are decoded by
 * OpenSSL's EVP_DecodeBlock.  *out malloc'd. */
static int b64_decode(const char *s, size_t n, uint8_t **out, size_t *out_n, tfs_error *err)
{
	char *in = malloc(n + 4);
	uint8_t *o = malloc(n / 4 * 3 + 3);
	size_t q = 0, pads = 0;
	bool done = false;
	if (!in || !o) {
		free(in), free(o);
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer.json: out of memory");
	}
	for (size_t i = 0; i < n && !done; i++) {
		char c = s[i];
		if (c == '=')   /* (binascii: pads counted from a quad's third character) */
			done = q % 4 >= 2 && q % 4 + ++pads >= 4;
		else if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			 (c >= '0' && c <= '9') || c == '+' || c == '/')
			in[q++] = c, pads = 0;
	}
	size_t tail = (4 - q % 4) % 4;
	const char *why = done || !tail ? NULL : tail == 3 ? "a data character 1 more than a "
		"multiple of 4" : "incorrect base64 padding";
	memset(in + q, '=', tail);
	int k = why || q + tail > INT32_MAX ? -1 : EVP_DecodeBlock(o, (unsigned char *)in,
								   (int)(q + tail));
	free(in);
	if (k < 0) {
		free(o);
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: normalizer."
				     "precompiled_charsmap: %s", why ? why : "not base64");
	}
	*out = o;
	*out_n = (size_t)k - tail;   /* (EVP_DecodeBlock counts the padding's zero bytes) */
	return 0;
}

/* The tokens of a Unigram tokenizer.json read as _xlmroberta_set_vocab reads them through
 * transformers (vs tokens: the pieces, then [PADi]). */
static int json_tokens(tokens *t, const json_t *pieces, const vocab_index *x, long long unk_id,
		       const json_t *special, size_t vs, tfs_error *err)
{
	size_t np = json_array_size(pieces);
	*t = (tokens){ .n = vs };
	t->s = calloc(vs, sizeof *t->s);
	t->len = calloc(vs, sizeof *t->len);
	t->score = calloc(vs, sizeof *t->score);
	t->type = calloc(vs, sizeof *t->type);
	t->owned = calloc(vs, sizeof *t->owned);
	bool *sp = calloc(np + 1, sizeof *sp);
	int rc = 0;
	if (!t->s || !t->len || !t->score || !t->type || !t->owned || !sp) {
		free(sp);
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory for %zu tokens", vs);
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)special, k, v) {   /* all_special_ids */
		long long id = id_of(x, k);
		if (id >= 0 && (size_t)id < np)
			sp[id] = true;
	}
	for (size_t i = 0; !rc && i < vs; i++) {
		if (i >= np) {
			char pad[32];
			int pn = snprintf(pad, sizeof pad, "[PAD%zu]", i);
			if (!(t->owned[i] = strdup(pad))) {
				rc = tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory");
				break;
			}
			t->s[i] = t->owned[i];
			t->len[i] = (size_t)pn;
			t->score[i] = -10000.0f;
			t->type[i] = TFS_TOK_UNUSED;
			continue;
		}
		const json_t *e = json_array_get(pieces, i), *a = added_of(x, (long long)i);
		const json_t *text = a ? json_object_get(a, "content") : json_array_get(e, 0);
		const json_t *score = json_array_get(e, 1);
		if (!json_is_string(text) || !json_is_number(score)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model.vocab[%zu] is not "
					   "a [piece, score] pair", i);
			break;
		}
		/* (an integer score: gguf-py types the scores' array by its items, and refuses
		 * one of mixed types; all integers would be an INT32 array) */
		if (!json_is_real(score)) {
			rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "tokenizer.json: model.vocab[%zu]'s "
					   "score is an integer (not a float: the converter's array "
					   "of scores is then not FLOAT32, or refused for mixed types)",
					   i);
			break;
		}
		t->s[i] = json_string_value(text);
		t->len[i] = json_string_length(text);
		t->score[i] = (float)json_number_value(score);
		t->type[i] = (long long)i == unk_id ? TFS_TOK_UNKNOWN
			: sp[i] ? TFS_TOK_CONTROL
			: a && added_value(x, (long long)i) ? TFS_TOK_USER_DEFINED
			: TFS_TOK_NORMAL;
	}
	free(sp);
	return rc;
}

/* The unk id: tokenizer_config.json's unk_token among get_added_vocab(), else model.unk_id
 * (3 when absent; None: no token is UNKNOWN, -1). */
static int unk_id_of(long long *out, const json_t *cfg, const json_t *model,
		     const vocab_index *x, tfs_error *err)
{
	const json_t *u = json_object_get(cfg, "unk_token"), *d = json_object_get(model, "unk_id");
	if (u && !json_is_string(u) && !json_is_null(u))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: unk_token is not "
				     "a string (the converter looks it up as a key: unhashable)");
	*out = 3;
	if (d && !json_is_null(d) && !tfs_hf_py_int(d, out))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model.unk_id is not an "
				     "integer");
	if (d && json_is_null(d))
		*out = -1;
	const json_t *best = json_is_string(u) ? json_object_getn(x->added_ids,
		json_string_value(u), json_string_length(u)) : NULL;   /* {content: id} */
	if (best && json_integer_value(best) >= 0)
		*out = json_integer_value(best);
	return 0;
}

static int json_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		      const json_t *cfg, const json_t *config, tfs_error *err)
{
	if (!tok)
		return tfs_error_set(err, TFS_E_NOTFOUND, "tokenizer.json: no such file (the "
				     "converter reads XLM-R's vocabulary from it without "
				     "sentencepiece.bpe.model)");
	const json_t *model = json_object_get(tok->root, "model");
	const json_t *pieces = json_object_get(model, "vocab");
	const json_t *added = json_object_get(tok->root, "added_tokens");
	const json_t *nz = json_object_get(tok->root, "normalizer");
	const json_t *pcm = json_object_get(nz, "precompiled_charsmap");
	const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
	if (!json_is_array(pieces) || tok->has_vocab)
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model.vocab is not a "
				     "Unigram model's list of [piece, score]");
	if (!json_is_string(pcm))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: no normalizer."
				     "precompiled_charsmap (the converter reads it)");
	if (!cls || (strcmp(cls, "XLMRobertaTokenizer") && strcmp(cls, "XLMRobertaTokenizerFast")))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tokenizer_config.json: tokenizer_class "
				     "%s%s%s: the GGUF view reproduces transformers' "
				     "XLMRobertaTokenizer(Fast) here", cls ? "'" : "",
				     cls ? cls : "absent", cls ? "'" : "");
	long long vs = 0, ntypes = 1, unk;
	json_t *special = NULL;
	uint8_t *map = NULL;
	size_t map_n = 0;
	tokens t = { 0 };
	vocab_index x = { 0 };
	int rc = count_of(config, "vocab_size", 0, 1ll << 31, &vs, err);
	if (!rc)
		rc = count_of(config, "type_vocab_size", 1, UINT32_MAX, &ntypes, err);
	if (vs < (long long)json_array_size(pieces))
		vs = (long long)json_array_size(pieces);
	if (!rc)
		rc = index_vocab(&x, pieces, added, err);
	if (!rc)
		rc = unk_id_of(&unk, cfg, model, &x, err);
	if (!rc)
		rc = b64_decode(json_string_value(pcm), json_string_length(pcm), &map, &map_n, err);
	if (!rc)
		rc = tfs_hf_all_special(&special, files, cfg, xlmr_named, err);
	if (!rc)
		rc = json_tokens(&t, pieces, &x, unk, special, (size_t)vs, err);
	if (!rc)
		rc = put_keys(out, &t, tfs_hf_py_true(json_object_get(cfg, "add_prefix_space")),
			      tfs_hf_py_true(json_object_get(cfg, "clean_up_tokenization_spaces")),
			      map, map_n, ntypes, err);
	if (!rc)
		rc = tfs_hf_special_vocab(out, files, tok, cfg, false, (long long)t.n, err);
	tokens_free(&t);
	index_free(&x);
	json_decref(special);
	free(map);
	return rc;
}
