/*
 * hf_export_config.c - config.json and generation_config.json of a GGUF model's Hugging Face
 * form (hf_export.h), from its keys.
 *
 * config.json holds what TextModel.set_gguf_parameters (hf_params.c) made the GGUF keys
 * from, read back: each "ARCH.<suffix>" key of `text_keys` under its config.json name (the
 * first name the converter's find_hparam tries), or of the row's own `needed` keys (hf_arch.h)
 * under theirs, rope scaling (llama3's found again from rope_freqs.weight), tied embeddings
 * (no output.weight), the special token ids
 * (tfs_hf_xspecial_places: those gguf-py's SpecialVocab sets); floats in the shortest text
 * that reads back as the same float32.
 */
#include "hf_export.h"
#include "hf_moe.h"
#include "dtype.h"
#include "hf_rope.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hf_export_kv.c's JSON text, by short names */
static int jstr(tfs_buf *b, const char *s, size_t n) { return tfs_hf_xjstr(b, s, n); }
static int jcstr(tfs_buf *b, const char *s) { return tfs_hf_xjcstr(b, s); }
static int jf32(tfs_buf *b, float f) { return tfs_hf_xjf32(b, f); }
static int member(tfs_buf *b, const char *key) { return tfs_hf_xmember(b, key); }

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
	{ ".expert_group_count", "n_group", false },
	{ ".expert_group_used_count", "topk_group", false },
	/* GraniteModel's: the multipliers as scales */
	{ ".attention.scale", "attention_multiplier", true },
	{ ".embedding_scale", "embedding_multiplier", true },
	{ ".residual_scale", "residual_multiplier", true },
	{ ".logit_scale", "logits_scaling", true },
};

/* The row's own key (its needed member, hf_arch.h) written as GGUF suffix sfx (".x.y"), or
 * NULL: it takes precedence over text_keys' name (Cohere2's logit_scale, Granite's
 * logits_scaling). */
static const tfs_hf_needed *row_needed(const tfs_hf_arch *row, const char *sfx)
{
	for (size_t i = 0; i < row->n_needed; i++)
		if (sfx[0] == '.' && !strcmp(row->needed[i].suffix, sfx + 1))
			return &row->needed[i];
	return NULL;
}

/* the shortest decimal that reads back as double d, with a '.' or an exponent */
static int jf64(tfs_buf *b, double d)
{
	char s[48];
	for (int p = 1; p <= 17; p++) {
		snprintf(s, sizeof s, "%.*g", p, d);
		if (strtod(s, NULL) == d)
			break;
	}
	if (!strpbrk(s, ".en"))
		strcat(s, ".0");
	return tfs_buf_printf(b, "%s", s);
}

/* The row's needed keys back into config.json: as they are, or (HEAD_RATIO) the ratio whose
 * product with hidden_size // heads truncates to the GGUF's value. */
static int needed_keys(tfs_buf *b, const tfs_hf_export *x, double hidden, double heads)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < x->row->n_needed; i++) {
		const tfs_hf_needed *k = &x->row->needed[i];
		char sfx[128];
		double v;
		float f;
		snprintf(sfx, sizeof sfx, ".%s", k->suffix);
		if (k->kind == TFS_HF_NEED_HEAD_RATIO) {
			double per = heads > 0 ? floor(hidden / heads) : 0;
			if (per <= 0 || !tfs_hf_xkv_num(x, sfx, &v))
				continue;
			double r = v / per;
			while ((double)(uint32_t)(r * per) < v)
				r = nextafter(r, INFINITY);
			rc = member(b, k->key) || jf64(b, r);
		} else if (k->f32 && tfs_hf_xkv_f32(x, sfx, &f)) {
			rc = member(b, k->key) || jf32(b, f);
		} else if (!k->f32 && tfs_hf_xkv_num(x, sfx, &v)) {
			rc = member(b, k->key) || tfs_buf_printf(b, "%.0f", v);
		}
	}
	return rc;
}

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
	/* a name no config class has: the row's own config class (hunyuan_v1_dense) */
	if (!cc && row->configs && row->configs[0].model_type) {
		snprintf(out, cap, "%s", row->configs[0].model_type);
		cc = &row->configs[0];
	}
	if (cc && cc->text_type)
		snprintf(out, cap, "%s", cc->text_type);
}

/* llama3 rope scaling from the GGUF's rope_freqs.weight, which LlamaModel generated from it
 * (no key holds it): factor is its largest value, and the low and high frequency factors and
 * the original context are the first of the usual ones (1 and 4, or Llama 4's 1 and 1; a
 * power of two) whose factors, as the GGUF view computes them (hf_rope.h, the converter's
 * arithmetic bit for bit), are the tensor's; none: nothing written (hf/ without it). */
static int llama3_scaling(tfs_buf *b, const tfs_hf_export *x)
{
	enum { MAX_F = 1024 };
	long i = tfs_model_find_tensor(x->m, "rope_freqs.weight");
	const tfs_tensor *t = i >= 0 ? tfs_model_tensor(x->m, (size_t)i) : NULL;
	double base, dim = 0, hidden = 0, heads = 0;
	float want[MAX_F], got[MAX_F];
	tfs_error e;
	if (!t || t->n_dims != 1 || t->ne[0] < 1 || t->ne[0] > MAX_F ||
	    !tfs_hf_xkv_num(x, ".rope.freq_base", &base) || !(base > 0) ||
	    tfs_tensor_read_f32(x->m, (size_t)i, 0, (uint64_t)t->ne[0], want, &e))
		return 0;
	/* the converter's head_dim: config.json's (key_length), else hidden_size // heads */
	if (!tfs_hf_xkv_num(x, ".attention.key_length", &dim) &&
	    tfs_hf_xkv_num(x, ".embedding_length", &hidden) &&
	    tfs_hf_xkv_num(x, ".attention.head_count", &heads) && heads > 0)
		dim = floor(hidden / heads);
	size_t m = (size_t)t->ne[0];
	if ((size_t)(((int64_t)dim + 1) / 2) != m)
		return 0;
	float factor = want[0];
	for (size_t k = 1; k < m; k++)
		factor = want[k] > factor ? want[k] : factor;
	static const double lohi[][2] = { { 1, 4 }, { 1, 1 } };
	for (size_t c = 0; c < sizeof lohi / sizeof lohi[0]; c++)
		for (int q = 3; q <= 22; q++) {
			double old = q == 3 ? 8192 : ldexp(1, q);
			const double *lh = lohi[c];
			tfs_hf_llama3_rope(got, (int64_t)dim, base, factor, lh[0], lh[1], old);
			if (memcmp(got, want, m * sizeof *got))
				continue;
			return member(b, "rope_scaling") ||
			       tfs_buf_printf(b, "{\"rope_type\": \"llama3\", \"factor\": ") ||
			       jf32(b, factor) ||
			       tfs_buf_printf(b, ", \"low_freq_factor\": %.1f, "
					      "\"high_freq_factor\": %.1f, "
					      "\"original_max_position_embeddings\": %.0f}",
					      lh[0], lh[1], old);
		}
	return 0;
}

/* M-RoPE's sections (TextModel's rope.dimension_sections: rope_parameters' mrope_section
 * padded with zeros to 4) as rope_scaling's mrope_section, the trailing zeros left out: the
 * converter pads them again.  1: written, 0: the model has none, or an error. */
static int mrope_scaling(tfs_buf *b, const tfs_hf_export *x)
{
	uint32_t type;
	uint64_t n, len;
	const uint8_t *d;
	int32_t v[4];
	if (!tfs_hf_xkv_arr(x, ".rope.dimension_sections", &type, &n, &d, &len) ||
	    (type != TFS_GGUF_INT32 && type != TFS_GGUF_UINT32) || n != 4 || len < 16)
		return 0;
	memcpy(v, d, sizeof v);
	while (n > 0 && v[n - 1] == 0)
		n--;
	int rc = member(b, "rope_scaling") ||
		 tfs_buf_printf(b, "{\"rope_type\": \"default\", \"mrope_section\": [");
	for (uint64_t i = 0; !rc && i < n; i++)
		rc = tfs_buf_printf(b, "%s%" PRId32, i ? ", " : "", v[i]);
	return rc || tfs_buf_append(b, "]}", 2) ? -1 : 1;
}

static int rope_scaling(tfs_buf *b, const tfs_hf_export *x)
{
	size_t n;
	const char *t = tfs_hf_xkv_str(x, ".rope.scaling.type", &n);
	float factor;
	double orig;
	int rc = mrope_scaling(b, x);
	if (rc)
		return rc < 0 ? rc : 0;
	if (!t && tfs_model_find_tensor(x->m, "rope_freqs.weight") >= 0)
		return llama3_scaling(b, x);
	/* no scaling: the original context alone (Phi-3's, from config.json's top level) */
	if (!t || (n == 4 && !memcmp(t, "none", 4)))
		return tfs_hf_xkv_num(x, ".rope.scaling.original_context_length", &orig)
		       ? member(b, "original_max_position_embeddings") ||
			 tfs_buf_printf(b, "%.0f", orig) : 0;
	rc = member(b, "rope_scaling") || tfs_buf_append(b, "{\"rope_type\": ", 14) ||
	     jstr(b, t, n);
	if (!rc && tfs_hf_xkv_f32(x, ".rope.scaling.factor", &factor))
		rc = tfs_buf_append(b, ", \"factor\": ", 12) || jf32(b, factor);
	if (!rc && tfs_hf_xkv_num(x, ".rope.scaling.original_context_length", &orig))
		rc = tfs_buf_printf(b, ", \"original_max_position_embeddings\": %.0f", orig);
	/* YaRN's own (TextModel writes each the config has) */
	static const char *const yarn[][2] = {
		{ ".rope.scaling.yarn_ext_factor", "extrapolation_factor" },
		{ ".rope.scaling.yarn_attn_factor", "attention_factor" },
		{ ".rope.scaling.yarn_beta_fast", "beta_fast" },
		{ ".rope.scaling.yarn_beta_slow", "beta_slow" },
	};
	for (size_t i = 0; !rc && i < sizeof yarn / sizeof *yarn; i++)
		if (tfs_hf_xkv_f32(x, yarn[i][0], &factor))
			rc = tfs_buf_printf(b, ", \"%s\": ", yarn[i][1]) || jf32(b, factor);
	return rc ? rc : tfs_buf_append(b, "}", 1);
}

/* The row's xconfig hook on the JSON object b holds from start (config.json or, gen,
 * generation_config.json), written again in its order; floats as the shortest text that
 * reads back as the same double. */
static int row_xconfig(tfs_buf *b, size_t start, const tfs_hf_export *x, bool gen,
		       tfs_error *err)
{
	json_error_t je;
	json_t *o = json_loadb(b->data + start, b->len - start, 0, &je);
	if (!o)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s", gen ? "generation_config.json"
				     : "config.json", je.text);
	int rc = x->row->xconfig(gen ? NULL : o, gen ? o : NULL, x);
	char *t = rc ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	json_decref(o);
	if (rc)   /* (a hook fails only out of memory) */
		return tfs_error_set(err, rc, "out of memory");
	b->len = start;
	rc = t ? tfs_buf_printf(b, "%s\n", t) : TFS_E_NOMEM;
	free(t);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

int tfs_hf_export_make_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	size_t start = b->len;
	char mt[64];
	double v, hidden = 0, heads = 0, dims;
	uint32_t type;
	uint64_t ntok = 0, len;
	const uint8_t *data;
	uint8_t place[TFS_HF_N_SPECIAL];
	model_type(mt, sizeof mt, x->row);
	tfs_hf_xspecial_places(x, place);
	int rc = tfs_buf_append(b, "{", 1) || member(b, "architectures") ||
		 tfs_buf_append(b, "[", 1) || jcstr(b, x->row->classes[0]) ||
		 tfs_buf_append(b, "]", 1) || member(b, "model_type") || jcstr(b, mt);
	if (!rc && !tfs_hf_xkv_num(x, ".vocab_size", &v) &&
	    tfs_hf_xkv_arr(x, "tokenizer.ggml.tokens", &type, &ntok, &data, &len))
		rc = member(b, "vocab_size") || tfs_buf_printf(b, "%llu", (unsigned long long)ntok);
	for (size_t i = 0; !rc && i < sizeof text_keys / sizeof *text_keys; i++) {
		float f;
		bool dup = false;
		for (size_t k = 0; k < x->row->n_needed; k++)
			dup |= !strcmp(x->row->needed[k].key, text_keys[i].hf);
		if (dup || row_needed(x->row, text_keys[i].gguf))
			continue;
		if (text_keys[i].f ? !tfs_hf_xkv_f32(x, text_keys[i].gguf, &f)
				   : !tfs_hf_xkv_num(x, text_keys[i].gguf, &v))
			continue;
		rc = member(b, text_keys[i].hf) ||
		     (text_keys[i].f ? jf32(b, f) : tfs_buf_printf(b, "%.0f", v));
	}
	/* (a row without its own count keys: TextModel's first, num_local_experts) */
	if (!rc && x->row->moe && tfs_hf_xkv_num(x, ".expert_count", &v))
		rc = member(b, x->row->moe->n_keys ? x->row->moe->n_keys[0] : "num_local_experts")
		     || tfs_buf_printf(b, "%.0f", v);
	/* LlamaModel writes rope.dimension_count = head_dim: a head_dim config.json had */
	tfs_hf_xkv_num(x, ".embedding_length", &hidden);
	tfs_hf_xkv_num(x, ".attention.head_count", &heads);
	if (!rc && (x->row->flags & TFS_HF_ARCH_LLAMA_PARAMS) &&
	    !tfs_hf_xkv_num(x, ".attention.key_length", &v) &&
	    tfs_hf_xkv_num(x, ".rope.dimension_count", &dims) && heads > 0 && dims != hidden / heads)
		rc = member(b, "head_dim") || tfs_buf_printf(b, "%.0f", dims);
	/* ExpertGatingFuncType (1 + its index in the converter's list) as scoring_func */
	static const char *const gating[] = { "softmax", "sigmoid", NULL, "sqrtsoftplus" };
	if (!rc && tfs_hf_xkv_num(x, ".expert_gating_func", &v) && v >= 1 && v <= 4 &&
	    gating[(int)v - 1])
		rc = member(b, "scoring_func") || jcstr(b, gating[(int)v - 1]);
	if (!rc)
		rc = needed_keys(b, x, hidden, heads);
	if (!rc)
		rc = rope_scaling(b, x);
	for (size_t i = 0; !rc && i < TFS_HF_N_SPECIAL; i++) {
		char name[64];
		snprintf(name, sizeof name, "%s_token_id", tfs_hf_xspecial_types[i]);
		if (place[i] && tfs_hf_xkv_num(x, tfs_hf_xspecial_keys[i], &v))
			rc = member(b, name) || tfs_buf_printf(b, "%.0f", v);
	}
	static const char *const dt[] = { "float32", "float16", "bfloat16" };
	int d = x->dtype == TFS_DT_F32 ? 0 : x->dtype == TFS_DT_F16 ? 1 : 2;
	if (!rc)
		rc = member(b, "tie_word_embeddings") ||
		     tfs_buf_printf(b, "%s", x->tied ? "true" : "false") ||
		     member(b, "torch_dtype") || jcstr(b, dt[d]) || tfs_buf_append(b, "\n}\n", 3);
	if (rc)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	return x->row->xconfig ? row_xconfig(b, start, x, false, err) : 0;
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
bool tfs_hf_export_has_generation(const tfs_hf_export *x)
{
	double v;
	for (size_t i = 0; i < N_GEN; i++)
		if (tfs_hf_xkv_num(x, gen_keys[i].gguf, &v))
			return true;
	return false;
}

int tfs_hf_export_make_generation(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	size_t start = b->len;
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
	if (rc)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	return x->row->xconfig ? row_xconfig(b, start, x, true, err) : 0;
}
