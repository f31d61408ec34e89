/*
 * hf_vocab.c - the tokenizer keys of a Hugging Face model's GGUF view, in the order and with
 * the values llama.cpp's convert_hf_to_gguf.py (c392e50) writes them:
 *   1. the vocabulary: LlamaModel/Qwen2Model.set_vocab choose
 *        tokenizer.model present            -> _set_vocab_sentencepiece ("llama")
 *        else (llama family) a tokenizer.json BPE with byte_fallback and a Sequence decoder
 *                                           -> _set_vocab_llama_hf (needs transformers: refused)
 *        else                               -> _set_vocab_gpt2 ("gpt2", tokenizer.json)
 *      each ending with gguf-py's SpecialVocab: merges, special ids, add_bos/add_eos, chat
 *      template;
 *   2. the llama family's extras: CodeLlama's infill ids (vocab_size 32016),
 *      add_space_prefix from tokenizer_config.json, add_bos_token false for vocab_size 49152.
 * Where the converter stops on a key written twice (gguf-py raises), the first value is kept.
 */
#include "hf_vocab_impl.h"

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
	int rc = 0;
	if (t->n == 0)   /* add_array skips an empty list */
		return 0;
	if (!tfs_hf_have_key(out, "tokenizer.ggml.tokens"))
		rc = tfs_hf_kvs_add_arr_str(out, "tokenizer.ggml.tokens", t->s, t->len, t->n, err);
	if (!rc && scores && !tfs_hf_have_key(out, "tokenizer.ggml.scores"))
		rc = tfs_hf_kvs_add_arr_f32(out, "tokenizer.ggml.scores", t->score, t->n, err);
	if (!rc && !tfs_hf_have_key(out, "tokenizer.ggml.token_type"))
		rc = tfs_hf_kvs_add_arr_i32(out, "tokenizer.ggml.token_type", t->type, t->n, err);
	return rc;
}

/* ==== _set_vocab_sentencepiece ==== */

static int vocab_size_of(const json_t *config, long long dflt, long long *out, tfs_error *err)
{
	const json_t *v = json_object_get(config, "vocab_size");
	if (!v || json_is_null(v)) {
		*out = dflt;
		if (!v)
			return 0;
	}
	if (!tfs_hf_py_int(v, out) || *out < 0 || *out > (1ll << 31))
		return tfs_error_set(err, TFS_E_FORMAT, "config.json: vocab_size is not a count of "
				     "tokens");
	return 0;
}

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

/* added_tokens.json's pieces (user-defined) and tokenizer_config.json's
 * added_tokens_decoder (control or user-defined) over t's vs tokens. */
static int spm_added(toklist *t, const tfs_hf_files *files, const json_t *cfg, long long vs,
		     tfs_error *err)
{
	json_t *added = NULL;
	int rc = tfs_hf_read_json(files, "added_tokens.json", &added, err);
	if (rc)
		return rc;
	if (added && !json_is_object(added)) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "added_tokens.json: not an object");
		goto out;
	}
	const char *key;
	size_t klen;
	json_t *v;
	json_object_keylen_foreach(added, key, klen, v) {
		long long id;
		if (!tfs_hf_py_int(v, &id) || id < 0) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "added_tokens.json: '%s' has no token "
					   "id (a non-negative integer)", key);
			goto out;
		}
		if (id >= vs)
			continue;   /* "ignore token: id is out of range" */
		if ((rc = toks_set_copy(t, (size_t)id, key, klen, err)))
			goto out;
		t->score[id] = -1000.0f;
		t->type[id] = TFS_TOK_USER_DEFINED;
	}
	json_object_keylen_foreach(json_object_get(cfg, "added_tokens_decoder"), key, klen, v) {
		long long id;
		const json_t *c = json_object_get(v, "content");
		if (!key_int(key, &id) || id < 0 || id >= vs || !json_is_string(c)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: "
					   "added_tokens_decoder '%s': %s", key,
					   !json_is_string(c) ? "no content string" :
					   "not a token id of the vocabulary");
			goto out;
		}
		const char *s = json_string_value(c);
		size_t n = json_string_length(c);
		if (tfs_hf_py_true(json_object_get(v, "special")) || looks_special(s, n)) {
			rc = toks_set_copy(t, (size_t)id, s, n, err);
			t->type[id] = TFS_TOK_CONTROL;
		} else {
			rc = toks_set_spaced(t, (size_t)id, s, n, err);
			t->type[id] = TFS_TOK_USER_DEFINED;
		}
		t->score[id] = -1000.0f;
		if (rc)
			goto out;
	}
out:
	json_decref(added);
	return rc;
}

static int vocab_sentencepiece(tfs_hf_kvs *out, const tfs_hf_files *files, const uint8_t *model,
			       uint64_t model_len, const json_t *tok, const json_t *cfg,
			       const json_t *config, tfs_error *err)
{
	tfs_spm_model sp;
	toklist t = { 0 };
	int rc = tfs_spm_parse(&sp, model, model_len, "tokenizer.model", err);
	if (rc)
		return rc;
	long long vs;
	if ((rc = vocab_size_of(config, (long long)sp.n, &vs, err)))
		goto out;
	if ((size_t)vs < sp.n) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "config.json: vocab_size %lld is less than "
				   "the %zu pieces of tokenizer.model", vs, sp.n);
		goto out;
	}
	if ((rc = toks_init(&t, (size_t)vs, err)))
		goto out;
	for (size_t i = 0; i < t.n && !rc; i++) {
		if (i < sp.n) {
			const tfs_spm_piece *p = &sp.pieces[i];
			t.s[i] = p->piece;
			t.len[i] = p->len;
			t.score[i] = p->score;
			/* IsUnknown, IsControl, IsUnused, IsByte; USER_DEFINED stays NORMAL */
			t.type[i] = p->type == TFS_TOK_USER_DEFINED ? TFS_TOK_NORMAL : p->type;
		} else {
			rc = toks_set_pad(&t, i, err);
			t.score[i] = -10000.0f;
			t.type[i] = TFS_TOK_UNUSED;
		}
	}
	if (rc || (rc = spm_added(&t, files, cfg, vs, err)))
		goto out;
	if ((rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "llama", 5, err)) ||
	    (rc = tfs_hf_put_str(out, "tokenizer.ggml.pre", "default", 7, err)) ||
	    (rc = put_tokens(out, &t, true, err)))
		goto out;
	rc = tfs_hf_special_vocab(out, files, tok, cfg, config, false, (long long)t.n, err);
out:
	toks_free(&t);
	tfs_spm_free(&sp);
	return rc;
}

/* ==== _set_vocab_gpt2 (get_vocab_base) ==== */

/* The vocabulary's and the added tokens' text -> id (*all), checked. */
static int bpe_vocab(json_t *all, const json_t *vocab, const json_t *added, tfs_error *err)
{
	const char *key;
	size_t klen, i;
	json_t *v, *a;
	json_object_keylen_foreach((json_t *)vocab, key, klen, v) {
		long long id;
		if (!json_is_integer(v) || (id = json_integer_value(v)) < 0 || id > INT32_MAX)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: vocab '%s' has no id",
					     key);
		json_object_setn(all, key, klen, v);
	}
	json_array_foreach(added, i, a) {
		const json_t *c = json_object_get(a, "content"), *id = json_object_get(a, "id");
		if (!json_is_string(c) || !json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) > INT32_MAX)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added token %zu has "
					     "no content or id", i);
		json_object_setn(all, json_string_value(c), json_string_length(c), (json_t *)id);
	}
	return 0;
}

/* Each token's type (and a user-defined one's text): normal, or an added token's flags
 * (those of the added token at its id). */
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

static int vocab_gpt2(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *tok,
		      const json_t *cfg, const json_t *config, tfs_error *err)
{
	const json_t *model = json_object_get(tok, "model");
	const json_t *vocab = json_object_get(model, "vocab");
	const json_t *added = json_object_get(tok, "added_tokens");
	const char *type = json_string_value(json_object_get(model, "type"));
	if (!type || strcmp(type, "BPE") != 0)
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model type %s: only a "
				     "byte-level BPE tokenizer is supported without tokenizer.model",
				     type ? type : "(none)");
	if (!json_is_object(vocab))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model.vocab is not an "
				     "object");
	if (added && !json_is_array(added))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added_tokens is not a list");
	const char *pre, *key;
	int rc = tfs_hf_bpe_pre(&pre, NULL, tok, cfg, "tokenizer.json", err);
	if (rc)
		return rc;

	/* tokenizer.vocab: the model's vocabulary and the added tokens, text -> id */
	json_t *all = json_object(), *v;
	toklist t = { 0 };
	size_t klen;
	long long max_id = -1, vs;
	rc = all ? bpe_vocab(all, vocab, added, err)
		 : tfs_error_set(err, TFS_E_NOMEM, "tokenizer.json: out of memory");
	json_object_foreach(all, key, v)
		if (json_integer_value(v) > max_id)
			max_id = json_integer_value(v);
	if (!rc && !(rc = vocab_size_of(config, (long long)json_object_size(all), &vs, err)) &&
	    max_id >= vs)
		rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: token id %lld is not below "
				   "config.json's vocab_size %lld", max_id, vs);
	if (!rc && !(rc = toks_init(&t, (size_t)vs, err))) {
		json_object_keylen_foreach(all, key, klen, v) {
			t.s[json_integer_value(v)] = key;
			t.len[json_integer_value(v)] = klen;
		}
		rc = bpe_types(&t, added, err);
	}
	if (!rc && !(rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "gpt2", 4, err)) &&
	    !(rc = tfs_hf_put_str(out, "tokenizer.ggml.pre", pre, strlen(pre), err)) &&
	    !(rc = put_tokens(out, &t, false, err)))
		rc = tfs_hf_special_vocab(out, files, tok, cfg, config, true, -1, err);
	toks_free(&t);
	json_decref(all);
	return rc;
}

/* ==== per architecture ==== */

static bool llama_family(const char *arch)
{
	return strcmp(arch, "LlamaForCausalLM") == 0 || strcmp(arch, "MistralForCausalLM") == 0;
}

/* LlamaModel.set_vocab's tail: CodeLlama, add_prefix_space, vocab_size 49152. */
static int llama_extras(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *tok,
			const json_t *cfg, const json_t *config, tfs_error *err)
{
	long long vs;
	int rc = 0;
	if (vocab_size_of(config, 32000, &vs, err))
		vs = -1;   /* not a number: compares unequal, as in Python */
	tfs_error_clear(err);
	if (vs == 32016) {
		rc = tfs_hf_codellama_ids(out, files, tok, cfg, config, err);
	}
	const json_t *aps = json_object_get(cfg, "add_prefix_space");
	if (!rc && aps)
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_space_prefix", tfs_hf_py_true(aps), err);
	if (!rc && vs == 49152)
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_bos_token", false, err);
	return rc;
}

/* Messages start with the repo file they are about ("tokenizer.json: ..."); with files->where
 * set, they become "WHERE/tokenizer.json: ...". */
static int name_where(const tfs_hf_files *files, int rc, tfs_error *err)
{
	static const char *const names[] = { "tokenizer.model", "tokenizer.json",
		"tokenizer_config.json", "added_tokens.json", "merges.txt", "config.json" };
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

static int vocab_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const char *arch,
		      const json_t *config, tfs_error *err);

int tfs_hf_vocab_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const char *arch,
		      const json_t *config, tfs_error *err)
{
	return name_where(files, vocab_keys(out, files, arch, config, err), err);
}

static int vocab_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const char *arch,
		      const json_t *config, tfs_error *err)
{
	bool llama = llama_family(arch);
	if (!llama && strcmp(arch, "Qwen2ForCausalLM") != 0 && strcmp(arch, "Qwen3ForCausalLM") != 0)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "architecture %s: no tokenizer "
				     "conversion for it", arch);
	json_t *tok = NULL, *cfg = NULL;
	uint8_t *spm = NULL;
	uint64_t spm_len = 0;
	int rc = tfs_hf_read_file(files, "tokenizer.model", &spm, &spm_len, err);
	if (rc == TFS_E_NOTFOUND) {
		tfs_error_clear(err);
		rc = 0;
	}
	if (rc || (rc = tfs_hf_read_json(files, "tokenizer.json", &tok, err)) ||
	    (rc = tfs_hf_read_json(files, "tokenizer_config.json", &cfg, err)))
		goto out;
	if (tok && !json_is_object(tok)) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: not an object");
		goto out;
	}
	if (cfg && !json_is_object(cfg)) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: not an object");
		goto out;
	}
	if (spm) {
		rc = vocab_sentencepiece(out, files, spm, spm_len, tok, cfg, config, err);
	} else if (!tok) {
		rc = tfs_error_set(err, TFS_E_NOTFOUND, "no tokenizer: neither tokenizer.model nor "
				   "tokenizer.json");
	} else {
		const json_t *model = json_object_get(tok, "model");
		const char *type = json_string_value(json_object_get(model, "type"));
		const json_t *bf = json_object_get(model, "byte_fallback");
		const char *dec = json_string_value(json_object_get(json_object_get(tok, "decoder"),
								    "type"));
		bool bpe = type && strcmp(type, "BPE") == 0;
		bool llama3 = bpe && tfs_hf_py_true(json_object_get(model, "ignore_merges")) &&
			      !(bf ? tfs_hf_py_true(bf) : true);
		if (llama && !llama3 && bpe && tfs_hf_py_true(bf) && dec && strcmp(dec, "Sequence") == 0)
			rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "tokenizer.json: a SentencePiece-"
					   "style BPE (byte_fallback) without tokenizer.model: the "
					   "converter reads it with transformers (LlamaHfVocab), which "
					   "tensorfs does not reproduce");
		else
			rc = vocab_gpt2(out, files, tok, cfg, config, err);
	}
	if (!rc && llama)
		rc = llama_extras(out, files, tok, cfg, config, err);
out:
	free(spm);
	json_decref(tok);
	json_decref(cfg);
	return rc;
}
