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
 * tokenizer (add_prefix_space, its ids): refused here.
 */
#include "hf_vocab_impl.h"

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

static int put_keys(tfs_hf_kvs *out, const tokens *t, const tfs_spm_model *sp,
		    long long ntypes, tfs_error *err)
{
	int rc;
	if ((rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "t5", 2, err)) ||
	    (rc = tfs_hf_put_str(out, "tokenizer.ggml.pre", "default", 7, err)) ||
	    (rc = tfs_hf_kvs_add_arr_str(out, "tokenizer.ggml.tokens", t->s, t->len, t->n, err)) ||
	    (rc = tfs_hf_kvs_add_arr_f32(out, "tokenizer.ggml.scores", t->score, t->n, err)) ||
	    (rc = tfs_hf_kvs_add_arr_i32(out, "tokenizer.ggml.token_type", t->type, t->n, err)) ||
	    (rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_space_prefix", sp->add_dummy_prefix,
				  err)) ||
	    (rc = tfs_hf_put_u32(out, "tokenizer.ggml.token_type_count", (uint32_t)ntypes,
				 err)) ||
	    (rc = tfs_hf_put_bool(out, "tokenizer.ggml.remove_extra_whitespaces",
				  sp->remove_extra_whitespaces, err)))
		return rc;
	return sp->charsmap_len ? put_charsmap(out, sp->charsmap, sp->charsmap_len, err) : 0;
}

int tfs_hf_xlmr_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		      const json_t *cfg, const json_t *config, tfs_error *err)
{
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
	    !(rc = put_keys(out, &t, &sp, ntypes, err)))
		rc = tfs_hf_special_vocab(out, files, tok, cfg, false, (long long)t.n, err);
	tokens_free(&t);
	tfs_spm_free(&sp);
	free(data);
	return rc;
}
