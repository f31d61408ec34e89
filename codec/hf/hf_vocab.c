/*
 * hf_vocab.c - the tokenizer keys of a Hugging Face model's GGUF view, in the order and with
 * the values llama.cpp's convert_hf_to_gguf.py (de3ff81) writes them.  Each architecture's
 * set_vocab is its row's vocab kind (tfs_hf_archs[], hf_arch.h), one of:
 *   llama    LlamaModel: add_space_prefix from tokenizer_config.json first; then
 *            tokenizer.model -> _set_vocab_sentencepiece ("llama"), else a tokenizer.json
 *            BPE with byte_fallback and a Sequence decoder -> _set_vocab_llama_hf (needs
 *            transformers: refused), else _set_vocab_gpt2 ("gpt2"); CodeLlama's infill ids
 *            (vocab_size 32016); add_bos_token false for vocab_size 49152.
 *   spm-gpt2 Qwen2Model: tokenizer.model -> sentencepiece, else gpt2.
 *   gpt2     TextModel's own: gpt2.
 *   gemma2   sentencepiece, then add_space_prefix false.
 *   gemma3   tokenizer.model -> sentencepiece + add_space_prefix false, else gpt2.
 *   phi3     Phi3MiniModel: tokenizer_config.json's tokenizer_class GPT2Tokenizer -> gpt2,
 *            else its own sentencepiece reading (added tokens from tokenizer_config.json
 *            and tokenizer.json, without the others' special-looking rule).
 *   bert     BertModel: get_vocab_base over a WordPiece tokenizer.json, the tokens in
 *            phantom-space form, tokenizer.ggml.model "bert", token_type_count first.
 *   xlmr     XLMRobertaModel: _xlmroberta_set_vocab over sentencepiece.bpe.model ("t5",
 *            fairseq's order, the charsmap; xlmr-json: a tokenizer.json's; hf_vocab_xlmr.c).
 *   glm      _set_vocab_glm: gpt2, then GLM's bos, eot, unk and eom ids.
 *   glm4     Glm4Model.set_vocab: gpt2, then GLM-4-0414's eos, eot, unk and bos ids.
 *   hunyuan  HunYuanModel.set_vocab (tokenizer.json; its tiktoken file is not read): gpt2
 *            (SpecialVocab without pad when pad_token_id < 0), then eod_token_id as the eos
 *            id, generation_config.json's first eos id as the eot id when it lists two.
 *   ernie    Ernie4_5Model.set_vocab: tokenizer.model only, then tokenizer_config.json's
 *            add_prefix_space (any value, as its truth) when it has the key.
 *   modern-bert  ModernBertModel: add_bos, add_eos, add_sep true first, then gpt2.
 *   own      the row's own_vocab hook (Gemma 4's, hf_gemma4.c).
 * Each vocabulary ends with gguf-py's SpecialVocab (hf_special.c): merges, special ids,
 * add_bos/add_eos/add_sep, chat template, normalizer flags.  A key written twice keeps its
 * first place and takes the last value, as gguf-py's writer does.
 */
#include "hf_vocab_impl.h"
#include "hf_arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== the token list ==== */

typedef struct {
	const char **s;   /* token text (borrowed from a parsed file, or owned below) */
	size_t *len;
	float *score;
	int32_t *type;
	size_t n;
	char **owned;     /* strings made here ([PAD7], replaced spaces) */
	size_t n_owned, cap_owned;
} toklist;

static int toks_init(toklist *t, size_t n, tfs_error *err)
{
	*t = (toklist){ .n = n };
	size_t m = n ? n : 1;
	t->s = calloc(m, sizeof *t->s);
	t->len = calloc(m, sizeof *t->len);
	t->score = calloc(m, sizeof *t->score);
	t->type = calloc(m, sizeof *t->type);
	if (!t->s || !t->len || !t->score || !t->type)
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory for %zu tokens", n);
	return 0;
}

static void toks_free(toklist *t)
{
	for (size_t i = 0; i < t->n_owned; i++)
		free(t->owned[i]);
	free(t->owned);
	free(t->s);
	free(t->len);
	free(t->score);
	free(t->type);
	*t = (toklist){ 0 };
}

/* Sets token i to a copy of s (n bytes) the list owns. */
static int toks_set_copy(toklist *t, size_t i, const char *s, size_t n, tfs_error *err)
{
	if (t->n_owned == t->cap_owned) {
		size_t cap = t->cap_owned ? 2 * t->cap_owned : 64;
		char **o = realloc(t->owned, cap * sizeof *o);
		if (!o)
			return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory");
		t->owned = o;
		t->cap_owned = cap;
	}
	char *c = malloc(n + 1);
	if (!c)
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory");
	memcpy(c, s, n);
	c[n] = 0;
	t->owned[t->n_owned++] = c;
	t->s[i] = c;
	t->len[i] = n;
	return 0;
}

static int toks_set_pad(toklist *t, size_t i, tfs_error *err)
{
	char pad[32];
	int n = snprintf(pad, sizeof pad, "[PAD%zu]", i);
	return toks_set_copy(t, i, pad, (size_t)n, err);
}

/* Sets token i to s with U+2581 (the SentencePiece space) written as ' ' ("pre-normalize
 * user-defined spaces"). */
static int toks_set_spaced(toklist *t, size_t i, const char *s, size_t n, tfs_error *err)
{
	char *c = malloc(n ? n : 1);
	if (!c)
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory");
	size_t k = 0;
	for (size_t j = 0; j < n;) {
		if (j + 3 <= n && memcmp(s + j, "\xe2\x96\x81", 3) == 0) {
			c[k++] = ' ';
			j += 3;
		} else {
			c[k++] = s[j++];
		}
	}
	int rc = toks_set_copy(t, i, c, k, err);
	free(c);
	return rc;
}

static bool starts(const char *s, size_t n, const char *p)
{
	size_t m = strlen(p);
	return n >= m && memcmp(s, p, m) == 0;
}

static bool ends(const char *s, size_t n, const char *p)
{
	size_t m = strlen(p);
	return n >= m && memcmp(s + n - m, p, m) == 0;
}

static bool equals(const char *s, size_t n, const char *p)
{
	return n == strlen(p) && memcmp(s, p, n) == 0;
}

/* The converter's does_token_look_special. */
static bool looks_special(const char *s, size_t n)
{
	return equals(s, n, "<pad>") || equals(s, n, "<mask>") || equals(s, n, "<2mass>") ||
	       equals(s, n, "[@BOS@]") ||
	       (starts(s, n, "<|") && ends(s, n, "|>")) ||
	       (starts(s, n, "<\xef\xbd\x9c") && ends(s, n, "\xef\xbd\x9c>")) ||
	       (starts(s, n, "<unused") && ends(s, n, ">"));
}

static int put_tokens(tfs_hf_kvs *out, const toklist *t, bool scores, tfs_error *err)
{
	int rc;
	if (t->n == 0)   /* add_array skips an empty list */
		return 0;
	rc = tfs_hf_kvs_add_arr_str(out, "tokenizer.ggml.tokens", t->s, t->len, t->n, err);
	if (!rc && scores)
		rc = tfs_hf_kvs_add_arr_f32(out, "tokenizer.ggml.scores", t->score, t->n, err);
	if (!rc)
		rc = tfs_hf_kvs_add_arr_i32(out, "tokenizer.ggml.token_type", t->type, t->n, err);
	return rc;
}

/* ==== _set_vocab_sentencepiece ==== */

/* "12" -> 12 as Python's int() of a JSON key (digits, optional sign and spaces). */
static bool key_int(const char *k, long long *out)
{
	char *end;
	while (*k == ' ' || *k == '\t' || *k == '\n')
		k++;
	if (!*k)
		return false;
	long long v = strtoll(k, &end, 10);
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	if (*end)
		return false;
	*out = v;
	return true;
}

/* added_tokens.json's pieces (user-defined), each id below vs ("ignore token: id is out
 * of range" otherwise). */
static int added_tokens_json(toklist *t, const tfs_hf_files *files, long long vs,
			     tfs_error *err)
{
	json_t *added = NULL;
	int rc = tfs_hf_read_json(files, "added_tokens.json", &added, err);
	if (rc || !added)
		return rc;
	if (!json_is_object(added)) {
		json_decref(added);
		return tfs_error_set(err, TFS_E_FORMAT, "added_tokens.json: not an object");
	}
	const char *key;
	size_t klen;
	json_t *v;
	json_object_keylen_foreach(added, key, klen, v) {
		long long id;
		if (!tfs_hf_py_int(v, &id) || id < 0) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "added_tokens.json: '%s' has no token "
					   "id (a non-negative integer)", key);
			break;
		}
		if (id >= vs)
			continue;
		if ((rc = toks_set_copy(t, (size_t)id, key, klen, err)))
			break;
		t->score[id] = -1000.0f;
		t->type[id] = TFS_TOK_USER_DEFINED;
	}
	json_decref(added);
	return rc;
}

/* tokenizer_config.json's added_tokens_decoder over t's vs tokens: control (special, or
 * special-looking) or user-defined with U+2581 as ' '; ids from vs on are skipped.  With
 * phi3, Phi3MiniModel's rule: control when special, else user-defined as written, and an id
 * beyond the list is an error (the converter's IndexError). */
static int added_decoder(toklist *t, const json_t *cfg, long long vs, bool phi3, tfs_error *err)
{
	const char *key;
	json_t *v;
	int rc = 0;
	json_object_foreach(json_object_get(cfg, "added_tokens_decoder"), key, v) {
		long long id;
		const json_t *c = json_object_get(v, "content");
		bool ok_id = key_int(key, &id) && id >= 0;
		if (!ok_id || !json_is_string(c) || (phi3 && id >= vs))
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: "
					     "added_tokens_decoder '%s': %s", key,
					     !json_is_string(c) ? "no content string" :
					     "not a token id of the vocabulary");
		if (id >= vs)
			continue;
		const char *s = json_string_value(c);
		size_t n = json_string_length(c);
		bool special = tfs_hf_py_true(json_object_get(v, "special"));
		if (special || (!phi3 && looks_special(s, n))) {
			rc = toks_set_copy(t, (size_t)id, s, n, err);
			t->type[id] = TFS_TOK_CONTROL;
		} else {
			rc = phi3 ? toks_set_copy(t, (size_t)id, s, n, err)
				  : toks_set_spaced(t, (size_t)id, s, n, err);
			t->type[id] = TFS_TOK_USER_DEFINED;
		}
		t->score[id] = -1000.0f;
		if (rc)
			return rc;
	}
	return 0;
}

/* Phi3MiniModel's last step: tokenizer.json's added tokens (control when special). */
static int phi3_json_added(toklist *t, const tfs_hf_tok *tok, long long vs, tfs_error *err)
{
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(tok ? tok->root : NULL, "added_tokens"), i, a) {
		long long id;
		const json_t *c = json_object_get(a, "content");
		if (!tfs_hf_py_int(json_object_get(a, "id"), &id) || id < 0 || id >= vs ||
		    !json_is_string(c))
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added token %zu: no "
					     "content, or an id outside the vocabulary", i);
		int rc = toks_set_copy(t, (size_t)id, json_string_value(c), json_string_length(c),
				       err);
		if (rc)
			return rc;
		t->score[id] = -1000.0f;
		t->type[id] = tfs_hf_py_true(json_object_get(a, "special")) ? TFS_TOK_CONTROL
									    : TFS_TOK_USER_DEFINED;
	}
	return 0;
}

/* find_hparam(["vocab_size_per_layer_input", "vocab_size"], optional=True) or the model's
 * piece count; phi3: hparams.get('vocab_size', piece count). */
static int spm_vocab_size(const json_t *config, size_t pieces, bool phi3, long long *vs,
			  tfs_error *err)
{
	const json_t *v = phi3 ? NULL : json_object_get(config, "vocab_size_per_layer_input");
	if (!v)
		v = json_object_get(config, "vocab_size");
	*vs = (long long)pieces;
	if (!v || (!phi3 && !tfs_hf_py_true(v)))
		return 0;
	if (!tfs_hf_py_int(v, vs) || *vs < 0 || *vs > (1ll << 31))
		return tfs_error_set(err, TFS_E_FORMAT, "config.json: vocab_size is not a count of "
				     "tokens");
	return 0;
}

/* The token list of tokenizer.model (sp, its pieces up to vs) and the repo's added tokens. */
static int spm_tokens(toklist *t, const tfs_spm_model *sp, long long vs, bool phi3,
		      const tfs_hf_files *files, const tfs_hf_tok *tok, const json_t *cfg,
		      tfs_error *err)
{
	int rc = toks_init(t, (size_t)vs, err);
	for (size_t i = 0; i < t->n && !rc; i++) {
		if (i < sp->n) {
			const tfs_spm_piece *p = &sp->pieces[i];
			t->s[i] = p->piece;
			t->len[i] = p->len;
			t->score[i] = p->score;
			/* IsUnknown, IsControl, IsUnused, IsByte; USER_DEFINED stays NORMAL */
			t->type[i] = p->type == TFS_TOK_USER_DEFINED ? TFS_TOK_NORMAL : p->type;
		} else {
			rc = toks_set_pad(t, i, err);
			t->score[i] = -10000.0f;
			t->type[i] = TFS_TOK_UNUSED;
		}
	}
	if (!rc)
		rc = added_tokens_json(t, files, vs, err);
	if (!rc)
		rc = added_decoder(t, cfg, vs, phi3, err);
	if (!rc && phi3)
		rc = phi3_json_added(t, tok, vs, err);
	return rc;
}

/* _set_vocab_sentencepiece (phi3: Phi3MiniModel.set_vocab's own reading). */
static int vocab_sentencepiece(tfs_hf_kvs *out, const tfs_hf_files *files, const uint8_t *model,
			       uint64_t model_len, const tfs_hf_tok *tok, const json_t *cfg,
			       const json_t *config, bool phi3, tfs_error *err)
{
	tfs_spm_model sp;
	toklist t = { 0 };
	long long vs;
	int rc = tfs_spm_parse(&sp, model, model_len, "tokenizer.model", err);
	if (rc)
		return rc;
	if ((rc = spm_vocab_size(config, sp.n, phi3, &vs, err)))
		goto out;
	if (phi3 && (size_t)vs < sp.n) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "config.json: vocab_size %lld is less than "
				   "the %zu pieces of tokenizer.model", vs, sp.n);
		goto out;
	}
	if ((rc = spm_tokens(&t, &sp, vs, phi3, files, tok, cfg, err)))
		goto out;
	if ((rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "llama", 5, err)) ||
	    (rc = tfs_hf_put_str(out, "tokenizer.ggml.pre", "default", 7, err)) ||
	    (rc = put_tokens(out, &t, true, err)))
		goto out;
	rc = tfs_hf_special_vocab(out, files, tok, cfg, false, (long long)t.n, err);
out:
	toks_free(&t);
	tfs_spm_free(&sp);
	return rc;
}

/* ==== _set_vocab_gpt2 (get_vocab_base) ==== */

/* tokenizer.vocab (model.vocab, then the added tokens over it) as an id -> text list t of
 * vs tokens; NULL text: no token (a [PADi]).  *max_id its largest id. */
static int bpe_reverse(toklist *t, const tfs_hf_tok *tok, const json_t *added, long long vs,
		       tfs_error *err)
{
	int rc = toks_init(t, (size_t)vs, err);
	for (size_t k = 0; k < tok->n && !rc; k++) {
		t->s[tok->id[k]] = tok->text + tok->off[k];
		t->len[tok->id[k]] = tok->off[k + 1] - tok->off[k];
	}
	size_t i;
	json_t *a;
	json_array_foreach(added, i, a) {
		if (rc)
			break;
		const json_t *c = json_object_get(a, "content");
		size_t id = (size_t)json_integer_value(json_object_get(a, "id"));
		uint32_t old;
		/* the text now maps to the added id: its vocabulary id loses it */
		if (tfs_hf_tok_id(tok, json_string_value(c), json_string_length(c), &old) &&
		    old != id && t->s[old] && t->len[old] == json_string_length(c) &&
		    memcmp(t->s[old], json_string_value(c), t->len[old]) == 0)
			t->s[old] = NULL;
		t->s[id] = json_string_value(c);
		t->len[id] = json_string_length(c);
	}
	return rc;
}

/* The added tokens checked; *count: the size of tokenizer.vocab, *max_id its largest id. */
static int bpe_count(const tfs_hf_tok *tok, const json_t *added, long long *count,
		     long long *max_id, tfs_error *err)
{
	size_t i, extra = 0;
	json_t *a;
	*max_id = -1;
	for (size_t k = 0; k < tok->n; k++)
		if ((long long)tok->id[k] > *max_id)
			*max_id = tok->id[k];
	json_array_foreach(added, i, a) {
		const json_t *c = json_object_get(a, "content"), *id = json_object_get(a, "id");
		uint32_t v;
		if (!json_is_string(c) || !json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) > INT32_MAX)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added token %zu has "
					     "no content or id", i);
		if (json_integer_value(id) > *max_id)
			*max_id = json_integer_value(id);
		extra += !tfs_hf_tok_id(tok, json_string_value(c), json_string_length(c), &v);
	}
	*count = (long long)(tok->n + extra);
	return 0;
}

/* Each token's type (and a user-defined one's text): normal, or an added token's flags
 * (those of the added token at its id).  get_vocab_base also writes an added token that is
 * not "normalized" as decode(encode(token)); taken here as the token itself, which it is
 * unless the decoder changes the token's own characters (a ByteLevel decoder and a token
 * made only of byte characters such as 'Ġ', or clean_up_tokenization_spaces patterns). */
static int bpe_types(toklist *t, const json_t *added, tfs_error *err)
{
	json_t *added_text = json_object(), *a;
	const json_t **by_id = calloc(t->n + 1, sizeof *by_id);
	size_t i;
	int rc = 0;
	if (!added_text || !by_id)
		rc = tfs_error_set(err, TFS_E_NOMEM, "tokenizer.json: out of memory");
	json_array_foreach(added, i, a) {
		const json_t *c = json_object_get(a, "content");
		if (rc)
			break;
		by_id[json_integer_value(json_object_get(a, "id"))] = a;
		if (json_object_setn(added_text, json_string_value(c), json_string_length(c), a))
			rc = tfs_error_set(err, TFS_E_NOMEM, "tokenizer.json: out of memory");
	}
	for (size_t k = 0; k < t->n && !rc; k++) {
		if (!t->s[k]) {
			rc = toks_set_pad(t, k, err);
			t->type[k] = TFS_TOK_UNUSED;
			continue;
		}
		const json_t *ak = json_object_getn(added_text, t->s[k], t->len[k]);
		bool is_added = ak != NULL;
		if (by_id[k])
			ak = by_id[k];
		if (!is_added) {
			t->type[k] = TFS_TOK_NORMAL;
		} else if (tfs_hf_py_true(json_object_get(ak, "special")) ||
			   looks_special(t->s[k], t->len[k])) {
			t->type[k] = TFS_TOK_CONTROL;
		} else {
			t->type[k] = TFS_TOK_USER_DEFINED;
			rc = toks_set_spaced(t, k, t->s[k], t->len[k], err);
		}
	}
	free(by_id);
	json_decref(added_text);
	return rc;
}

static int vocab_size_of(const json_t *config, long long dflt, long long *out, tfs_error *err)
{
	const json_t *v = json_object_get(config, "vocab_size");
	*out = dflt;
	if (v && (!tfs_hf_py_int(v, out) || *out < 0 || *out > (1ll << 31)))
		return tfs_error_set(err, TFS_E_FORMAT, "config.json: vocab_size is not a count of "
				     "tokens");
	return 0;
}

/* GLM's special tokens set after SpecialVocab's own (_set_special_token), in this order, by
 * the text of tokenizer.json's added tokens (KeyError without one). */
typedef struct {
	const char *type[4], *text[4];
} glm_special;

/* _set_vocab_glm (GLM-4.5, GLM-4.7-Flash) */
static const glm_special glm45 = {
	{ "bos", "eot", "unk", "eom" },
	{ "[gMASK]", "<|user|>", "<|endoftext|>", "<|observation|>" },
};

/* Glm4Model.set_vocab (GLM-4-0414) */
static const glm_special glm4 = {
	{ "eos", "eot", "unk", "bos" },
	{ "<|endoftext|>", "<|user|>", "<|endoftext|>", "<|endoftext|>" },
};

static int glm_ids(long long ids[4], const glm_special *g, const json_t *added, tfs_error *err)
{
	const char *const *text = g->text;
	for (int k = 0; k < 4; k++) {
		size_t i;
		const json_t *a;
		ids[k] = -1;
		json_array_foreach(added, i, a)
			if (json_is_string(json_object_get(a, "content")) &&
			    !strcmp(json_string_value(json_object_get(a, "content")), text[k]))
				tfs_hf_py_int(json_object_get(a, "id"), &ids[k]);
		if (ids[k] < 0)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: no added token "
					     "\"%s\" (GLM's converter looks it up)", text[k]);
	}
	return 0;
}

static int vocab_gpt2(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		      const json_t *cfg, const json_t *config, const glm_special *glm,
		      const char *const *types, size_t ntypes, tfs_error *err)
{
	long long gid[4];
	const json_t *model = json_object_get(tok->root, "model");
	const json_t *added = json_object_get(tok->root, "added_tokens");
	const char *type = json_string_value(json_object_get(model, "type"));
	if (!type || strcmp(type, "BPE") != 0)
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model type %s: only a "
				     "byte-level BPE tokenizer is supported without tokenizer.model",
				     type ? type : "(none)");
	if (!tok->has_vocab)
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model.vocab is not an "
				     "object");
	if (added && !json_is_array(added))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added_tokens is not a list");
	long long count = 0, max_id = -1, vs = 0;
	toklist t = { 0 };
	const char *pre;
	int rc = glm ? glm_ids(gid, glm, added, err) : 0;
	if (!rc)
		rc = bpe_count(tok, added, &count, &max_id, err);
	if (!rc && !(rc = vocab_size_of(config, count, &vs, err)) && max_id >= vs)
		rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: token id %lld is not below "
				   "config.json's vocab_size %lld", max_id, vs);
	if (!rc)
		rc = tfs_hf_bpe_pre(&pre, NULL, tok, cfg, "tokenizer.json", err);
	if (!rc && !(rc = bpe_reverse(&t, tok, added, vs, err)))
		rc = bpe_types(&t, added, err);
	if (!rc && !(rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "gpt2", 4, err)) &&
	    !(rc = tfs_hf_put_str(out, "tokenizer.ggml.pre", pre, strlen(pre), err)) &&
	    !(rc = put_tokens(out, &t, false, err)))
		rc = types ? tfs_hf_special_vocab_types(out, files, tok, cfg, true, types, ntypes,
							err)
			   : tfs_hf_special_vocab_ids(out, files, tok, cfg, true, -1,
						      glm ? glm->type : NULL, gid, glm ? 4 : 0, err);
	toks_free(&t);
	return rc;
}

/* ==== BertModel.set_vocab (get_vocab_base over a WordPiece tokenizer.json) ==== */

/* The phantom-space form llama.cpp's WordPiece reads: a control token as it is, "##x" as
 * "x", any other token (a word's start) as U+2581 + token. */
static int bert_phantom(toklist *t, tfs_error *err)
{
	int rc = 0;
	for (size_t k = 0; k < t->n && !rc; k++) {
		const char *s = t->s[k];
		size_t n = t->len[k];
		if (t->type[k] == TFS_TOK_CONTROL)
			continue;
		if (starts(s, n, "##")) {
			t->s[k] = s + 2;
			t->len[k] = n - 2;
			continue;
		}
		char *c = malloc(n + 3);
		if (!c)
			return tfs_error_set(err, TFS_E_NOMEM, "tokenizer: out of memory");
		memcpy(c, "\xe2\x96\x81", 3);
		memcpy(c + 3, s, n);
		rc = toks_set_copy(t, k, c, n + 3, err);
		free(c);
	}
	return rc;
}

static int vocab_bert(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		      const json_t *cfg, const json_t *config, tfs_error *err)
{
	if (!tok)
		return tfs_error_set(err, TFS_E_NOTFOUND, "tokenizer.json: no such file (BERT's "
				     "WordPiece vocabulary is read from it)");
	const json_t *model = json_object_get(tok->root, "model");
	const json_t *added = json_object_get(tok->root, "added_tokens");
	const char *type = json_string_value(json_object_get(model, "type"));
	if (!type || strcmp(type, "WordPiece") != 0 || !tok->has_vocab)
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model type %s: BERT's "
				     "conversion reads a WordPiece vocabulary", type ? type : "(none)");
	if (added && !json_is_array(added))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added_tokens is not a list");
	long long count = 0, max_id = -1, vs = 0, ntypes = 1;
	const json_t *tv = json_object_get(config, "type_vocab_size");
	toklist t = { 0 };
	const char *pre;
	int rc = bpe_count(tok, added, &count, &max_id, err);
	if (!rc && !(rc = vocab_size_of(config, count, &vs, err)) && max_id >= vs)
		rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: token id %lld is not below "
				   "config.json's vocab_size %lld", max_id, vs);
	if (!rc && tv && (!tfs_hf_py_int(tv, &ntypes) || ntypes < 0 || ntypes > UINT32_MAX))
		rc = tfs_error_set(err, TFS_E_FORMAT, "config.json: type_vocab_size is not a "
				   "32-bit count");
	if (!rc)
		rc = tfs_hf_bpe_pre(&pre, NULL, tok, cfg, "tokenizer.json", err);
	if (!rc && !(rc = bpe_reverse(&t, tok, added, vs, err)) && !(rc = bpe_types(&t, added, err)))
		rc = bert_phantom(&t, err);
	if (!rc && !(rc = tfs_hf_put_u32(out, "tokenizer.ggml.token_type_count",
					 (uint32_t)ntypes, err)) &&
	    !(rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "bert", 4, err)) &&
	    !(rc = tfs_hf_put_str(out, "tokenizer.ggml.pre", pre, strlen(pre), err)) &&
	    !(rc = put_tokens(out, &t, false, err)))
		rc = tfs_hf_special_vocab(out, files, tok, cfg, false, (long long)t.n, err);
	toks_free(&t);
	return rc;
}

/* ==== per architecture ==== */

/* The kinds of set_vocab (a row's vocab member, hf_arch.h) */
enum {
	V_LLAMA = TFS_HF_VOCAB_LLAMA, V_SPM_GPT2 = TFS_HF_VOCAB_SPM_GPT2, V_GPT2 = TFS_HF_VOCAB_GPT2,
	V_GEMMA2 = TFS_HF_VOCAB_GEMMA2, V_GEMMA3 = TFS_HF_VOCAB_GEMMA3, V_PHI3 = TFS_HF_VOCAB_PHI3,
	V_GLM = TFS_HF_VOCAB_GLM, V_BERT = TFS_HF_VOCAB_BERT, V_XLMR = TFS_HF_VOCAB_XLMR,
	V_GLM4 = TFS_HF_VOCAB_GLM4, V_ERNIE = TFS_HF_VOCAB_ERNIE, V_HUNYUAN = TFS_HF_VOCAB_HUNYUAN,
};

/* LlamaModel.set_vocab's tail: CodeLlama's infill ids, add_bos_token false for 49152. */
static int llama_extras(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
			const json_t *cfg, const json_t *config, tfs_error *err)
{
	static const char *const infill[] = { "prefix", "suffix", "middle", "eot" };
	static const long long infill_ids[] = { 32007, 32008, 32009, 32010 };
	long long vs;
	int rc = 0;
	if (vocab_size_of(config, 32000, &vs, err))
		vs = -1;   /* not a number: compares unequal, as in Python */
	tfs_error_clear(err);
	if (vs == 32016)
		rc = tfs_hf_fixed_ids(out, files, tok, cfg, infill, infill_ids, 4, err);
	if (!rc && vs == 49152)
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_bos_token", false, err);
	return rc;
}

/* Messages start with the repo file they are about ("tokenizer.json: ..."); with files->where
 * set, they become "WHERE/tokenizer.json: ...". */
static int name_where(const tfs_hf_files *files, int rc, tfs_error *err)
{
	static const char *const names[] = { "tokenizer.model", "tokenizer.json",
		"tokenizer_config.json", "added_tokens.json", "merges.txt", "config.json",
		"chat_template.jinja", "chat_template.json" };
	if (!rc || !err || !files->where || !*files->where)
		return rc;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		size_t n = strlen(names[i]);
		if (strncmp(err->msg, names[i], n) == 0 && err->msg[n] == ':') {
			char msg[TFS_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", err->msg);
			return tfs_error_set(err, rc, "%s/%s", files->where, msg);
		}
	}
	return rc;
}

/* The repo's tokenizer files. */
typedef struct {
	uint8_t *spm;          /* tokenizer.model, or NULL */
	uint64_t spm_len;
	tfs_hf_tok *tok;       /* tokenizer.json, or NULL */
	json_t *cfg;           /* tokenizer_config.json, or NULL */
} tok_files;

static int read_files(tok_files *f, const tfs_hf_files *files, tfs_error *err)
{
	int rc = tfs_hf_read_optional(files, "tokenizer.model", &f->spm, &f->spm_len, err);
	if (rc || (rc = tfs_hf_tok_read(&f->tok, files, err)) ||
	    (rc = tfs_hf_read_json(files, "tokenizer_config.json", &f->cfg, err)))
		return rc;
	if (f->cfg && !json_is_object(f->cfg))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: not an object");
	return 0;
}

/* No tokenizer.model: gpt2, except for the llama family a SentencePiece-style BPE. */
static int vocab_json(tfs_hf_kvs *out, const tfs_hf_files *files, const tok_files *f,
		      const json_t *config, bool llama, const glm_special *glm, tfs_error *err)
{
	if (!f->tok)
		return tfs_error_set(err, TFS_E_NOTFOUND, "no tokenizer: neither tokenizer.model "
				     "nor tokenizer.json");
	const json_t *model = json_object_get(f->tok->root, "model");
	const char *type = json_string_value(json_object_get(model, "type"));
	const json_t *bf = json_object_get(model, "byte_fallback");
	const char *dec = json_string_value(json_object_get(json_object_get(f->tok->root,
									    "decoder"), "type"));
	bool bpe = type && strcmp(type, "BPE") == 0;
	bool llama3 = bpe && tfs_hf_py_true(json_object_get(model, "ignore_merges")) &&
		      !(bf ? tfs_hf_py_true(bf) : true);
	if (llama && !llama3 && bpe && tfs_hf_py_true(bf) && dec && strcmp(dec, "Sequence") == 0)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tokenizer.json: a SentencePiece-"
				     "style BPE (byte_fallback) without tokenizer.model: the "
				     "converter reads it with transformers (LlamaHfVocab), which "
				     "tensorfs does not reproduce");
	return vocab_gpt2(out, files, f->tok, f->cfg, config, glm, NULL, 0, err);
}

/* HunYuanModel.set_vocab with a tokenizer.json. */
static int vocab_hunyuan(tfs_hf_kvs *out, const tfs_hf_files *files, const tok_files *f,
			 const json_t *config, tfs_error *err)
{
	static const char *const no_pad[] = { "bos", "eos", "unk", "sep", "cls", "mask" };
	long long pad = 0;
	const json_t *v = json_object_get(config, "pad_token_id");
	if (!f->tok)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "no tokenizer.json: HunYuan's tiktoken "
				     "tokenizer (its converter's other path) is not supported");
	if (v && !json_is_null(v) && !tfs_hf_py_int(v, &pad))
		return tfs_error_set(err, TFS_E_FORMAT, "config.json: pad_token_id is not an integer");
	int rc = vocab_gpt2(out, files, f->tok, f->cfg, config, NULL, pad < 0 ? no_pad : NULL, 6,
			    err);
	return rc ? rc : tfs_hf_hunyuan_ids(out, files, config, err);
}

static int vocab_by_kind(tfs_hf_kvs *out, const tfs_hf_files *files, const tok_files *f,
			 const tfs_hf_arch *row, const json_t *config, tfs_error *err)
{
	int rc = 0, kind = row->vocab;
	bool llama = kind == V_LLAMA;
	if (kind == TFS_HF_VOCAB_OWN)   /* the class's own (Gemma 4) */
		return row->own_vocab(out, files, f->tok, f->cfg, err);
	if (kind == V_BERT)
		return vocab_bert(out, files, f->tok, f->cfg, config, err);
	if (kind == V_XLMR || kind == TFS_HF_VOCAB_XLMR_JSON)   /* its file */
		return tfs_hf_xlmr_vocab(out, files, f->tok, f->cfg, config, kind != V_XLMR, err);
	if (kind == V_HUNYUAN)
		return vocab_hunyuan(out, files, f, config, err);
	if (kind == TFS_HF_VOCAB_MODERN_BERT)   /* SpecialVocab may set them again, in place */
		return (rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_bos_token", true, err)) ||
		       (rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_eos_token", true, err)) ||
		       (rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_sep_token", true, err)) ? rc
		       : vocab_json(out, files, f, config, false, NULL, err);
	if (llama) {   /* add_prefix_space first; tekken.json alone: the Mistral format */
		const json_t *aps = json_object_get(f->cfg, "add_prefix_space");
		if (aps && !json_is_null(aps))
			rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_space_prefix",
					     tfs_hf_py_true(aps), err);
	}
	if (kind == V_PHI3) {
		const json_t *cls = json_object_get(f->cfg, "tokenizer_class");
		if (f->cfg && !cls)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: no "
					     "tokenizer_class (Phi-3's converter reads it)");
		if (json_is_string(cls) && strcmp(json_string_value(cls), "GPT2Tokenizer") == 0)
			return vocab_json(out, files, f, config, false, NULL, err);
		if (!f->spm)
			return tfs_error_set(err, TFS_E_NOTFOUND, "no tokenizer.model (Phi-3's "
					     "converter needs it unless tokenizer_class is "
					     "GPT2Tokenizer)");
	}
	if (!rc && f->spm)
		rc = vocab_sentencepiece(out, files, f->spm, f->spm_len, f->tok, f->cfg, config,
					 kind == V_PHI3, err);
	else if (!rc && (kind == V_GEMMA2 || kind == V_ERNIE))
		rc = tfs_error_set(err, TFS_E_NOTFOUND, "no tokenizer.model (%s's converter reads "
				   "only SentencePiece)", kind == V_GEMMA2 ? "Gemma 2" : "ERNIE 4.5");
	else if (!rc)
		rc = vocab_json(out, files, f, config, llama, kind == V_GLM ? &glm45
							     : kind == V_GLM4 ? &glm4 : NULL, err);
	if (!rc && (kind == V_GEMMA2 || (kind == V_GEMMA3 && f->spm)))
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_space_prefix", false, err);
	if (!rc && llama)
		rc = llama_extras(out, files, f->tok, f->cfg, config, err);
	const json_t *aps = json_object_get(f->cfg, "add_prefix_space");
	if (!rc && kind == V_ERNIE && aps)   /* struct.pack('?'): its truth */
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_space_prefix", tfs_hf_py_true(aps),
				     err);
	return rc;
}

static int vocab_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const char *arch,
		      const json_t *config, tfs_error *err)
{
	const tfs_hf_arch *row = tfs_hf_arch_find_for(arch, config);
	if (!row || row->vocab == TFS_HF_VOCAB_NONE ||
	    (row->vocab == TFS_HF_VOCAB_OWN && !row->own_vocab))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "architecture %s: no tokenizer "
				     "conversion for it", arch);
	tok_files f = { 0 };
	int rc = read_files(&f, files, err);
	if (!rc)
		rc = vocab_by_kind(out, files, &f, row, config, err);
	free(f.spm);
	tfs_hf_tok_close(f.tok);
	json_decref(f.cfg);
	return rc;
}

int tfs_hf_vocab_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const char *arch,
		      const json_t *config, tfs_error *err)
{
	return name_where(files, vocab_keys(out, files, arch, config, err), err);
}
