/*
 * hf_export_json.c - the small files of a GGUF model's Hugging Face form (hf_export.h):
 * config.json, generation_config.json, tokenizer.json, tokenizer_config.json, from its keys.
 *
 * config.json holds what TextModel.set_gguf_parameters (hf_params.c) made the GGUF keys
 * from, read back: each "ARCH.<suffix>" key of `text_keys` under its config.json name (the
 * first name the converter's find_hparam tries), rope scaling, tied embeddings (no
 * output.weight), the special token ids; floats in the shortest text that reads back as the
 * same float32.  tokenizer.json is written for a byte-level BPE vocabulary (tokenizer.ggml.model
 * "gpt2") whose tokenizer.ggml.pre the pre-tokenizer table (hf_pre_table.h, hf_bpe.c) has: the
 * NORMAL tokens as the BPE vocabulary, CONTROL and USER_DEFINED ones as added tokens (special
 * or not), the merges as they are; tokenizer_config.json names the special tokens and holds
 * the chat template.  Another vocabulary has no tokenizer files (tfs_hf_export's tok_why).
 */
#include "hf_export.h"
#include "hf_vocab.h"
#include "hf_moe.h"
#include "dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== JSON text ==== */

/* s[0..n) as a JSON string */
static int jstr(tfs_buf *b, const char *s, size_t n)
{
	int rc = tfs_buf_append(b, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		rc = tfs_buf_append(b, s + run, i - run);
		run = i + 1;
		if (!rc)
			rc = c == '"' ? tfs_buf_append(b, "\\\"", 2) : c == '\\'
			     ? tfs_buf_append(b, "\\\\", 2) : c == '\n' ? tfs_buf_append(b, "\\n", 2)
			     : c == '\t' ? tfs_buf_append(b, "\\t", 2) : c == '\r'
			     ? tfs_buf_append(b, "\\r", 2) : tfs_buf_printf(b, "\\u%04x", c);
	}
	if (!rc)
		rc = tfs_buf_append(b, s + run, n - run);
	return rc ? rc : tfs_buf_append(b, "\"", 1);
}

static int jcstr(tfs_buf *b, const char *s) { return jstr(b, s, strlen(s)); }

/* the shortest decimal that reads back as float32 f, with a '.' or an exponent */
static int jf32(tfs_buf *b, float f)
{
	char s[48];
	if (!isfinite(f))
		return tfs_buf_printf(b, "%s", isnan(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity");
	for (int p = 1; p <= 9; p++) {
		snprintf(s, sizeof s, "%.*g", p, (double)f);
		if (strtof(s, NULL) == f)
			break;
	}
	/* a whole number as Python writes it (10000.0, not 1e+04) */
	if (strstr(s, "e+") && fabsf(f) < 1e16f && f == truncf(f))
		snprintf(s, sizeof s, "%.1f", (double)f);
	if (!strpbrk(s, ".en"))
		strcat(s, ".0");
	return tfs_buf_printf(b, "%s", s);
}

/* ",\n  \"key\": " (the first member without the comma) */
static int member(tfs_buf *b, const char *key)
{
	bool first = b->len && b->data[b->len - 1] == '{';
	int rc = tfs_buf_printf(b, "%s\n  ", first ? "" : ",");
	return rc ? rc : (jcstr(b, key) || tfs_buf_append(b, ": ", 2));
}

/* ==== config.json ==== */

/* The keys TextModel writes from config.json (hf_params.c), by their GGUF suffix. */
static const struct { const char *gguf, *hf; bool f; } text_keys[] = {
	{ ".vocab_size", "vocab_size", false },
	{ ".embedding_length", "hidden_size", false },
	{ ".feed_forward_length", "intermediate_size", false },
	{ ".block_count", "num_hidden_layers", false },
	{ ".attention.head_count", "num_attention_heads", false },
	{ ".attention.head_count_kv", "num_key_value_heads", false },
	{ ".attention.key_length", "head_dim", false },
	{ ".context_length", "max_position_embeddings", false },
	{ ".attention.layer_norm_rms_epsilon", "rms_norm_eps", true },
	{ ".rope.freq_base", "rope_theta", true },
	{ ".attention.sliding_window", "sliding_window", false },
	{ ".attn_logit_softcapping", "attn_logit_softcapping", true },
	{ ".final_logit_softcapping", "final_logit_softcapping", true },
	/* the experts' (the count's name is the row's moe->n_keys[0]: make_config) */
	{ ".expert_used_count", "num_experts_per_tok", false },
	{ ".expert_feed_forward_length", "moe_intermediate_size", false },
	{ ".expert_shared_feed_forward_length", "shared_expert_intermediate_size", false },
	/* GraniteModel's: the multipliers as scales */
	{ ".attention.scale", "attention_multiplier", true },
	{ ".embedding_scale", "embedding_multiplier", true },
	{ ".residual_scale", "residual_multiplier", true },
	{ ".logit_scale", "logits_scaling", true },
};

/* gguf-py SpecialVocab's special token types, in its order, and the GGUF key of each id */
static const char *const special_types[] = { "bos", "eos", "unk", "sep", "pad", "cls", "mask" };
static const char *const special_keys[] = {
	"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
	"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
	"tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
	"tokenizer.ggml.mask_token_id",
};
#define N_SPECIAL (sizeof special_types / sizeof *special_types)

/* The model_type of the row's class: its name before "For", lowercased (Qwen2ForCausalLM:
 * qwen2), as transformers' auto classes name it. */
static void model_type(char *out, size_t cap, const tfs_hf_arch *row)
{
	const char *c = row->classes[0], *f = strstr(c, "For");
	size_t n = f ? (size_t)(f - c) : strlen(c), k = 0;
	for (; k < n && k + 1 < cap; k++)
		out[k] = (char)(c[k] >= 'A' && c[k] <= 'Z' ? c[k] - 'A' + 'a' : c[k]);
	out[k] = 0;
	/* a class whose config is a text sub-config (Gemma3ForCausalLM: gemma3_text) */
	const tfs_hf_config_class *cc = tfs_hf_config_class_find(out);
	if (cc && cc->text_type)
		snprintf(out, cap, "%s", cc->text_type);
}

static int rope_scaling(tfs_buf *b, const tfs_hf_export *x)
{
	size_t n;
	const char *t = tfs_hf_xkv_str(x, ".rope.scaling.type", &n);
	float factor;
	double orig;
	/* no scaling: the original context alone (Phi-3's, from config.json's top level) */
	if (!t || (n == 4 && !memcmp(t, "none", 4)))
		return tfs_hf_xkv_num(x, ".rope.scaling.original_context_length", &orig)
		       ? member(b, "original_max_position_embeddings") ||
			 tfs_buf_printf(b, "%.0f", orig) : 0;
	int rc = member(b, "rope_scaling") || tfs_buf_append(b, "{\"rope_type\": ", 14) ||
		 jstr(b, t, n);
	if (!rc && tfs_hf_xkv_f32(x, ".rope.scaling.factor", &factor))
		rc = tfs_buf_append(b, ", \"factor\": ", 12) || jf32(b, factor);
	if (!rc && tfs_hf_xkv_num(x, ".rope.scaling.original_context_length", &orig))
		rc = tfs_buf_printf(b, ", \"original_max_position_embeddings\": %.0f", orig);
	return rc ? rc : tfs_buf_append(b, "}", 1);
}

static int make_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	char mt[64];
	double v, hidden = 0, heads = 0, dims;
	uint32_t type;
	uint64_t ntok = 0, len;
	const uint8_t *data;
	model_type(mt, sizeof mt, x->row);
	int rc = tfs_buf_append(b, "{", 1) || member(b, "architectures") ||
		 tfs_buf_append(b, "[", 1) || jcstr(b, x->row->classes[0]) ||
		 tfs_buf_append(b, "]", 1) || member(b, "model_type") || jcstr(b, mt);
	if (!rc && !tfs_hf_xkv_num(x, ".vocab_size", &v) &&
	    tfs_hf_xkv_arr(x, "tokenizer.ggml.tokens", &type, &ntok, &data, &len))
		rc = member(b, "vocab_size") || tfs_buf_printf(b, "%llu", (unsigned long long)ntok);
	for (size_t i = 0; !rc && i < sizeof text_keys / sizeof *text_keys; i++) {
		float f;
		if (text_keys[i].f ? !tfs_hf_xkv_f32(x, text_keys[i].gguf, &f)
				   : !tfs_hf_xkv_num(x, text_keys[i].gguf, &v))
			continue;
		rc = member(b, text_keys[i].hf) ||
		     (text_keys[i].f ? jf32(b, f) : tfs_buf_printf(b, "%.0f", v));
	}
	if (!rc && x->row->moe && x->row->moe->n_keys && tfs_hf_xkv_num(x, ".expert_count", &v))
		rc = member(b, x->row->moe->n_keys[0]) || tfs_buf_printf(b, "%.0f", v);
	/* LlamaModel writes rope.dimension_count = head_dim: a head_dim config.json had */
	tfs_hf_xkv_num(x, ".embedding_length", &hidden);
	tfs_hf_xkv_num(x, ".attention.head_count", &heads);
	if (!rc && (x->row->flags & TFS_HF_ARCH_LLAMA_PARAMS) &&
	    !tfs_hf_xkv_num(x, ".attention.key_length", &v) &&
	    tfs_hf_xkv_num(x, ".rope.dimension_count", &dims) && heads > 0 && dims != hidden / heads)
		rc = member(b, "head_dim") || tfs_buf_printf(b, "%.0f", dims);
	if (!rc)
		rc = rope_scaling(b, x);
	for (size_t i = 0; !rc && i < N_SPECIAL; i++) {
		char name[64];
		snprintf(name, sizeof name, "%s_token_id", special_types[i]);
		if (tfs_hf_xkv_num(x, special_keys[i], &v))
			rc = member(b, name) || tfs_buf_printf(b, "%.0f", v);
	}
	static const char *const dt[] = { "float32", "float16", "bfloat16" };
	int d = x->dtype == TFS_DT_F32 ? 0 : x->dtype == TFS_DT_F16 ? 1 : 2;
	if (!rc)
		rc = member(b, "tie_word_embeddings") ||
		     tfs_buf_printf(b, "%s", x->tied ? "true" : "false") ||
		     member(b, "torch_dtype") || jcstr(b, dt[d]) || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== generation_config.json ==== */

static const struct { const char *gguf, *hf; } gen_keys[] = {
		{ "tokenizer.ggml.bos_token_id", "bos_token_id" },
		{ "tokenizer.ggml.eos_token_id", "eos_token_id" },
		{ "tokenizer.ggml.padding_token_id", "pad_token_id" },
		{ "general.sampling.top_k", "top_k" }, { "general.sampling.top_p", "top_p" },
		{ "general.sampling.min_p", "min_p" }, { "general.sampling.temp", "temperature" },
		{ "general.sampling.penalty_repeat", "repetition_penalty" },
};
#define N_GEN (sizeof gen_keys / sizeof *gen_keys)

/* Whether the model has any key generation_config.json holds. */
static bool has_generation(const tfs_hf_export *x)
{
	double v;
	for (size_t i = 0; i < N_GEN; i++)
		if (tfs_hf_xkv_num(x, gen_keys[i].gguf, &v))
			return true;
	return false;
}

static int make_generation(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	int rc = tfs_buf_append(b, "{", 1);
	for (size_t i = 0; !rc && i < N_GEN; i++) {
		double v;
		float f;
		if (tfs_hf_xkv_f32(x, gen_keys[i].gguf, &f))
			rc = member(b, gen_keys[i].hf) || jf32(b, f);
		else if (tfs_hf_xkv_num(x, gen_keys[i].gguf, &v))
			rc = member(b, gen_keys[i].hf) || tfs_buf_printf(b, "%.0f", v);
	}
	rc = rc || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== the vocabulary ==== */

enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };

typedef struct {
	const uint8_t *tok, *type, *merges;   /* the arrays' elements */
	uint64_t n, n_type, n_merges, tok_len, type_len, merges_len;
	uint32_t type_t;
} vocab;

/* The next string of an array of strings at *p (len bytes left); NULL at a bad one. */
static const char *next_str(const uint8_t **p, uint64_t *left, size_t *n)
{
	uint64_t k;
	if (*left < 8)
		return NULL;
	memcpy(&k, *p, 8);
	if (k > *left - 8)
		return NULL;
	const char *s = (const char *)*p + 8;
	*p += 8 + k;
	*left -= 8 + k;
	*n = (size_t)k;
	return s;
}

static bool get_vocab(vocab *v, const tfs_hf_export *x)
{
	uint32_t t, mt;
	memset(v, 0, sizeof *v);
	if (!tfs_hf_xkv_arr(x, "tokenizer.ggml.tokens", &t, &v->n, &v->tok, &v->tok_len) ||
	    t != TFS_GGUF_STRING)
		return false;
	if (tfs_hf_xkv_arr(x, "tokenizer.ggml.token_type", &v->type_t, &v->n_type, &v->type,
			   &v->type_len) && (v->type_t != TFS_GGUF_INT32 || v->n_type != v->n ||
					     v->type_len < 4 * v->n))
		return false;
	if (tfs_hf_xkv_arr(x, "tokenizer.ggml.merges", &mt, &v->n_merges, &v->merges,
			   &v->merges_len) && mt != TFS_GGUF_STRING)
		return false;
	/* every string inside its key: the walks below need not check again */
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	size_t n;
	for (uint64_t i = 0; i < v->n; i++)
		if (!next_str(&p, &left, &n))
			return false;
	p = v->merges;
	left = v->merges_len;
	for (uint64_t i = 0; i < v->n_merges; i++)
		if (!next_str(&p, &left, &n))
			return false;
	return true;
}

static int32_t tok_type(const vocab *v, uint64_t i)
{
	int32_t t = TOK_NORMAL;
	if (v->type)
		memcpy(&t, v->type + 4 * i, 4);
	return t;
}

/* The text of token id (its bytes in the tokens array), or NULL. */
static const char *token_text(const vocab *v, uint64_t id, size_t *n)
{
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	const char *s = NULL;
	for (uint64_t i = 0; i <= id && i < v->n; i++)
		if (!(s = next_str(&p, &left, n)))
			return NULL;
	return id < v->n ? s : NULL;
}

static bool is_pad_filler(const char *s, size_t n, uint64_t id)
{
	char f[32];
	int k = snprintf(f, sizeof f, "[PAD%llu]", (unsigned long long)id);
	return (size_t)k == n && !memcmp(s, f, n);
}

static int added_tokens(tfs_buf *b, const vocab *v)
{
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	bool first = true;
	int rc = tfs_buf_append(b, "[", 1);
	for (uint64_t i = 0; !rc && i < v->n; i++) {
		size_t n;
		const char *s = next_str(&p, &left, &n);
		int32_t t = tok_type(v, i);
		if (!s)
			return TFS_E_FORMAT;
		if (t != TOK_CONTROL && t != TOK_USER)
			continue;
		rc = tfs_buf_printf(b, "%s\n    {\"id\": %llu, \"content\": ", first ? "" : ",",
				    (unsigned long long)i) || jstr(b, s, n) ||
		     tfs_buf_printf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": "
				    "false, \"normalized\": false, \"special\": %s}",
				    t == TOK_CONTROL ? "true" : "false");
		first = false;
	}
	return rc ? rc : tfs_buf_append(b, "\n  ]", 4);
}

static int bpe_model(tfs_buf *b, const vocab *v, bool ignore_merges)
{
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	bool first = true;
	int rc = tfs_buf_printf(b, "{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
				"\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
				"\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": "
				"%s, \"vocab\": {", ignore_merges ? "true" : "false");
	for (uint64_t i = 0; !rc && i < v->n; i++) {
		size_t n;
		const char *s = next_str(&p, &left, &n);
		int32_t t = tok_type(v, i);
		if (!s)
			return TFS_E_FORMAT;
		if (t == TOK_CONTROL || t == TOK_USER || (t == TOK_UNUSED && is_pad_filler(s, n, i)))
			continue;
		rc = tfs_buf_append(b, first ? "\n    " : ",\n    ", first ? 5 : 6) ||
		     jstr(b, s, n) || tfs_buf_printf(b, ": %llu", (unsigned long long)i);
		first = false;
	}
	rc = rc || tfs_buf_append(b, "}, \"merges\": [", 14);
	p = v->merges;
	left = v->merges_len;
	for (uint64_t i = 0; !rc && i < v->n_merges; i++) {
		size_t n;
		const char *s = next_str(&p, &left, &n);
		if (!s)
			return TFS_E_FORMAT;
		rc = tfs_buf_append(b, i ? ",\n    " : "\n    ", i ? 6 : 5) || jstr(b, s, n);
	}
	return rc ? rc : tfs_buf_append(b, "]}", 2);
}

/* The post-processor: the BOS template when the GGUF adds one (as Llama 3's file has it) */
static int post_processor(tfs_buf *b, const tfs_hf_export *x, const vocab *v)
{
	double add = 0, bos;
	size_t n;
	const char *s;
	const char *bl = "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
			 "false, \"use_regex\": true}";
	if (!tfs_hf_xkv_num(x, "tokenizer.ggml.add_bos_token", &add) || !add ||
	    !tfs_hf_xkv_num(x, "tokenizer.ggml.bos_token_id", &bos) ||
	    !(s = token_text(v, (uint64_t)bos, &n)))
		return tfs_buf_printf(b, "%s", bl);
	tfs_buf q = { 0 };
	int rc = jstr(&q, s, n) ||
		 tfs_buf_printf(b, "{\"type\": \"Sequence\", \"processors\": [%s, {\"type\": "
				"\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": %s, "
				"\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
				"\"pair\": [{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, "
				"{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": "
				"{\"id\": %s, \"type_id\": 1}}, {\"Sequence\": {\"id\": \"B\", "
				"\"type_id\": 1}}], \"special_tokens\": {%s: {\"id\": %s, \"ids\": "
				"[%.0f], \"tokens\": [%s]}}}]}", bl, q.data, q.data, q.data, q.data,
				q.data, bos, q.data);
	tfs_buf_free(&q);
	return rc;
}

/* tokenizer.ggml.pre, when the vocabulary has a tokenizer.json form, else NULL */
static const char *bpe_pre(const tfs_hf_export *x, const char **nz, const char **pre)
{
	size_t n;
	static __thread char name[64];
	const char *model = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	if (!model || n != 4 || memcmp(model, "gpt2", 4))
		return NULL;
	const char *p = tfs_hf_xkv_str(x, "tokenizer.ggml.pre", &n);
	if (!p || n >= sizeof name)
		return NULL;
	memcpy(name, p, n);
	name[n] = 0;
	return tfs_hf_pre_json(name, nz, pre) ? name : NULL;
}

static int make_tokenizer(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	const char *nz, *pre, *name = bpe_pre(x, &nz, &pre);
	if (!name || !get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: no tokenizer.json form, "
				     "or a malformed vocabulary");
	bool im = !strcmp(name, "llama-bpe") || !strcmp(name, "tekken");
	int rc = tfs_buf_printf(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  "
				"\"padding\": null,\n  \"added_tokens\": ") ||
		 added_tokens(b, &v);
	rc = rc || tfs_buf_printf(b, ",\n  \"normalizer\": %s,\n  \"pre_tokenizer\": %s,\n  "
				  "\"post_processor\": ", nz, pre) ||
	     post_processor(b, x, &v) ||
	     tfs_buf_printf(b, ",\n  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
			    "true, \"trim_offsets\": true, \"use_regex\": true},\n  \"model\": ") ||
	     bpe_model(b, &v, im) || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== tokenizer.model: a SentencePiece vocabulary (tokenizer.ggml.model "llama") ==== */

/* The GGUF's vocabulary as SentencePiece's ModelProto (the fields hf_spm.c reads, the
 * converter's _create_vocab_sentencepiece reads back): every token a piece with its text,
 * score and type (the GGUF's token types are SentencePiece's numbers), trainer_spec a BPE
 * model (llama.cpp's SPM tokenizer merges by score as SentencePiece's BPE does) with
 * byte_fallback when there are BYTE pieces and the special pieces' ids, normalizer_spec
 * "identity" with add_dummy_prefix from tokenizer.ggml.add_space_prefix and no
 * whitespace folding (llama.cpp's SPM tokenizer does neither more nor less). */

typedef struct {
	const uint8_t *score;
	uint64_t n_score, score_len;
} spm_scores;

static bool is_spm(const tfs_hf_export *x, spm_scores *sc)
{
	size_t n;
	uint32_t t;
	const char *model = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	vocab v;
	if (!model || n != 5 || memcmp(model, "llama", 5) || !get_vocab(&v, x))
		return false;
	spm_scores dummy;
	sc = sc ? sc : &dummy;
	memset(sc, 0, sizeof *sc);
	return !tfs_hf_xkv_arr(x, "tokenizer.ggml.scores", &t, &sc->n_score, &sc->score,
			       &sc->score_len) ||
	       (t == TFS_GGUF_FLOAT32 && sc->n_score == v.n && sc->score_len >= 4 * v.n);
}

static int pb_varint(tfs_buf *b, uint64_t v)
{
	uint8_t o[10];
	size_t k = 0;
	do {
		o[k] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			o[k] |= 0x80;
		k++;
	} while (v);
	return tfs_buf_append(b, o, k);
}

static int pb_bytes(tfs_buf *b, unsigned num, const void *p, size_t n)
{
	return pb_varint(b, (uint64_t)num << 3 | 2) || pb_varint(b, n) || tfs_buf_append(b, p, n);
}

/* an int32 field (negative: ten bytes, as protobuf writes it) */
static int pb_int(tfs_buf *b, unsigned num, int64_t v)
{
	return pb_varint(b, (uint64_t)num << 3) || pb_varint(b, (uint64_t)v);
}

static int make_spm(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	spm_scores sc;
	if (!is_spm(x, &sc) || !get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: malformed vocabulary");
	const uint8_t *p = v.tok;
	uint64_t left = v.tok_len;
	bool bytes = false;
	unsigned unk = 0;
	tfs_buf piece = { 0 }, spec = { 0 };
	int rc = 0;
	for (uint64_t i = 0; !rc && i < v.n; i++) {
		size_t n = 0;
		const char *s = next_str(&p, &left, &n);
		int32_t t = tok_type(&v, i);
		float f = 0;
		if (sc.score)
			memcpy(&f, sc.score + 4 * i, 4);
		if (t < 1 || t > 6)
			t = TOK_NORMAL;
		/* SentencePiece has one UNKNOWN piece: the first; any other (an older
		 * converter's [PADn] fillers) is UNUSED, which neither tokenizer produces */
		if (t == 2 && unk++)
			t = TOK_UNUSED;
		bytes |= t == 6;
		piece.len = 0;
		uint8_t fb[5] = { 2 << 3 | 5 };
		memcpy(fb + 1, &f, 4);
		rc = pb_bytes(&piece, 1, s, n) || tfs_buf_append(&piece, fb, 5) ||
		     pb_int(&piece, 3, t) || pb_bytes(b, 1, piece.data, piece.len);
	}
	/* trainer_spec: model_type BPE, vocab_size, byte_fallback, the special pieces */
	static const struct { const char *key; unsigned id, piece; } sp[] = {
		{ "tokenizer.ggml.unknown_token_id", 40, 45 },
		{ "tokenizer.ggml.bos_token_id", 41, 46 },
		{ "tokenizer.ggml.eos_token_id", 42, 47 },
		{ "tokenizer.ggml.padding_token_id", 43, 48 },
	};
	rc = rc || pb_int(&spec, 3, 2) || pb_int(&spec, 4, (int64_t)v.n) ||
	     (bytes && pb_int(&spec, 35, 1));
	for (size_t i = 0; !rc && i < sizeof sp / sizeof *sp; i++) {
		double id;
		size_t n;
		const char *s;
		if (tfs_hf_xkv_num(x, sp[i].key, &id) && id >= 0 &&
		    (s = token_text(&v, (uint64_t)id, &n)))
			rc = pb_int(&spec, sp[i].id, (int64_t)id) || pb_bytes(&spec, sp[i].piece, s, n);
		else
			rc = pb_int(&spec, sp[i].id, -1);
	}
	rc = rc || pb_bytes(b, 2, spec.data, spec.len);
	/* normalizer_spec: identity, add_dummy_prefix, no whitespace folding, escaping */
	double dummy = 1;
	tfs_hf_xkv_num(x, "tokenizer.ggml.add_space_prefix", &dummy);
	spec.len = 0;
	rc = rc || pb_bytes(&spec, 1, "identity", 8) || pb_int(&spec, 3, dummy != 0) ||
	     pb_int(&spec, 4, 0) || pb_int(&spec, 5, 1) || pb_bytes(b, 3, spec.data, spec.len);
	tfs_buf_free(&piece);
	tfs_buf_free(&spec);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* added_tokens.json: the USER_DEFINED tokens, which the converter reads back as such (score
 * -1000, the score its readers give every added token) */
static bool has_user_tokens(const tfs_hf_export *x)
{
	vocab v;
	if (!get_vocab(&v, x) || !v.type)
		return false;
	for (uint64_t i = 0; i < v.n; i++)
		if (tok_type(&v, i) == TOK_USER)
			return true;
	return false;
}

static int make_added_tokens(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	if (!get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: malformed vocabulary");
	const uint8_t *p = v.tok;
	uint64_t left = v.tok_len;
	bool first = true;
	int rc = tfs_buf_append(b, "{", 1);
	for (uint64_t i = 0; !rc && i < v.n; i++) {
		size_t n = 0;
		const char *s = next_str(&p, &left, &n);
		if (tok_type(&v, i) != TOK_USER)
			continue;
		rc = tfs_buf_append(b, first ? "\n  " : ",\n  ", first ? 3 : 4) || jstr(b, s, n) ||
		     tfs_buf_printf(b, ": %llu", (unsigned long long)i);
		first = false;
	}
	rc = rc || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

static int make_tokenizer_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	double id, ctx;
	size_t n;
	if (!get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.tokens: none, or malformed");
	int rc = tfs_buf_append(b, "{", 1);
	for (size_t i = 0; !rc && i < N_SPECIAL; i++) {
		char key[64], name[64];
		snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", special_types[i]);
		snprintf(name, sizeof name, "add_%s_token", special_types[i]);
		if (tfs_hf_xkv_num(x, key, &id))
			rc = member(b, name) || tfs_buf_printf(b, "%s", id ? "true" : "false");
	}
	for (size_t i = 0; !rc && i < N_SPECIAL; i++) {
		char name[64];
		const char *s;
		snprintf(name, sizeof name, "%s_token", special_types[i]);
		if (tfs_hf_xkv_num(x, special_keys[i], &id) &&
		    (s = token_text(&v, (uint64_t)id, &n)))
			rc = member(b, name) || jstr(b, s, n);
	}
	if (!rc && tfs_hf_xkv_num(x, "tokenizer.ggml.add_space_prefix", &id))
		rc = member(b, "add_prefix_space") || tfs_buf_printf(b, "%s", id ? "true" : "false");
	const char *tmpl = tfs_hf_xkv_str(x, "tokenizer.chat_template", &n);
	if (!rc && tmpl)
		rc = member(b, "chat_template") || jstr(b, tmpl, n);
	if (!rc && tfs_hf_xkv_num(x, ".context_length", &ctx))
		rc = member(b, "model_max_length") || tfs_buf_printf(b, "%.0f", ctx);
	rc = rc || member(b, "clean_up_tokenization_spaces") || tfs_buf_printf(b, "false") ||
	     member(b, "tokenizer_class") ||
	     jcstr(b, is_spm(x, NULL) ? "LlamaTokenizer" : "PreTrainedTokenizerFast") ||
	     tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}


/* ==== README.md: the model card, whose front matter holds the general.* keys ==== */

/* The converter's Metadata reads these model card keys (gguf-py metadata.py) into the
 * general.* keys of the same name. */
static const char *const card_keys[] = {
	"name", "author", "version", "organization", "description", "finetune", "basename",
	"size_label", "license", "license_name", "license_link",
};

/* a general.* array of strings as a YAML flow list (JSON strings) */
static int card_list(tfs_buf *b, const tfs_hf_export *x, const char *key, const char *card)
{
	uint32_t t;
	uint64_t n, len;
	const uint8_t *p;
	if (!tfs_hf_xkv_arr(x, key, &t, &n, &p, &len) || t != TFS_GGUF_STRING)
		return 0;
	int rc = tfs_buf_printf(b, "%s: [", card);
	for (uint64_t i = 0; !rc && i < n; i++) {
		size_t k;
		const char *s = next_str(&p, &len, &k);
		if (!s)
			break;
		rc = tfs_buf_printf(b, "%s", i ? ", " : "") || jstr(b, s, k);
	}
	return rc ? rc : tfs_buf_append(b, "]\n", 2);
}

static int make_readme(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	int rc = tfs_buf_append(b, "---\n", 4);
	for (size_t i = 0; !rc && i < sizeof card_keys / sizeof *card_keys; i++) {
		char key[64];
		size_t n;
		snprintf(key, sizeof key, "general.%s", card_keys[i]);
		const char *s = tfs_hf_xkv_str(x, key, &n);
		if (s)
			rc = tfs_buf_printf(b, "%s: ", card_keys[i]) || jstr(b, s, n) ||
			     tfs_buf_append(b, "\n", 1);
	}
	rc = rc || card_list(b, x, "general.tags", "tags") ||
	     card_list(b, x, "general.languages", "language") ||
	     tfs_buf_printf(b, "library_name: transformers\n---\n\nThe Hugging Face form of a "
			    "GGUF model (%s), as tensorfs shows it: each tensor dequantized as ggml "
			    "dequantizes it.\n", x->row->classes[0]);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== the list ==== */

int tfs_hf_export_list_files(tfs_hf_export *x, tfs_error *err)
{
	const char *nz, *pre;
	(void)err;
	x->n_files = 0;
	x->files[x->n_files] = "README.md";
	x->make[x->n_files++] = make_readme;
	x->files[x->n_files] = "config.json";
	x->make[x->n_files++] = make_config;
	if (has_generation(x)) {
		x->files[x->n_files] = "generation_config.json";
		x->make[x->n_files++] = make_generation;
	}
	if (bpe_pre(x, &nz, &pre)) {
		x->files[x->n_files] = "tokenizer.json";
		x->make[x->n_files++] = make_tokenizer;
		x->files[x->n_files] = "tokenizer_config.json";
		x->make[x->n_files++] = make_tokenizer_config;
	} else if (is_spm(x, NULL)) {
		if (has_user_tokens(x)) {
			x->files[x->n_files] = "added_tokens.json";
			x->make[x->n_files++] = make_added_tokens;
		}
		x->files[x->n_files] = "tokenizer.model";
		x->make[x->n_files++] = make_spm;
		x->files[x->n_files] = "tokenizer_config.json";
		x->make[x->n_files++] = make_tokenizer_config;
	} else {
		size_t n = 0, pn = 0;
		const char *m = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
		const char *p = tfs_hf_xkv_str(x, "tokenizer.ggml.pre", &pn);
		snprintf(x->tok_why, sizeof x->tok_why, "no tokenizer files: tokenizer.ggml.model "
			 "%.*s (pre %.*s) has no tokenizer.json or tokenizer.model form here",
			 m ? (int)n : 4, m ? m : "none", p ? (int)pn : 4, p ? p : "none");
	}
	return 0;
}

size_t tfs_hf_export_n_files(const tfs_hf_export *x) { return x->n_files; }

const char *tfs_hf_export_file_name(const tfs_hf_export *x, size_t i)
{
	return i < x->n_files ? x->files[i] : NULL;
}

int tfs_hf_export_file(tfs_buf *out, const tfs_hf_export *x, size_t i, tfs_error *err)
{
	if (i >= x->n_files)
		return tfs_error_set(err, TFS_E_NOTFOUND, "no such file");
	return x->make[i](out, x, err);
}
