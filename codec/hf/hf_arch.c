/*
 * hf_arch.c - the dense rows of the first classes (Llama, Mistral, Qwen2, Gemma 2,
 * Gemma 3, Phi-3, SmolLM3, Granite, OLMo 2), as llama.cpp's converter (release de3ff81)
 * writes them, and the global tensors most rows share (tfs_hf_globals); tfs_hf_archs[]
 * (hf_registry.c) lists them.  Defaults are transformers 4.57's config classes (the version the
 * release's requirements pin); the structural sizes (num_hidden_layers, hidden_size,
 * num_attention_heads, intermediate_size) are not defaulted: a config.json without them is
 * refused naming the key (transformers would assume its reference model's sizes, which no
 * repo's weights match).
 */
#include "hf_arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE };
enum { XN = TFS_HF_XF_NONE, XQ = TFS_HF_XF_PERMUTE_Q, XK = TFS_HF_XF_PERMUTE_K,
       X1 = TFS_HF_XF_PLUS_ONE };

/* ==== tensor names ==== */

/* The three global tensors of most rows (the other layers' rows use it too) */
const tfs_hf_name tfs_hf_globals[TFS_HF_N_GLOBALS] = {
	{ "model.embed_tokens", "token_embd", VOC, H, XN, true },
	{ "model.norm", "output_norm", H, NO, XN, true },
	{ "lm_head", "output", VOC, H, XN, false },
};

/* Gemma: the final norm + 1 (lm_head of Gemma 2 is dropped before mapping) */
static const tfs_hf_name gemma_globals[] = {
	{ "model.embed_tokens", "token_embd", VOC, H, XN, true },
	{ "model.norm", "output_norm", H, NO, X1, true },
	{ "lm_head", "output", VOC, H, XN, false },
};

#define ATTN(xq, xk) \
	{ "self_attn.q_proj", "attn_q", Q, H, xq, true }, \
	{ "self_attn.k_proj", "attn_k", KV, H, xk, true }, \
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true }, \
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true }
#define MLP \
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true }, \
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true }, \
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true }

/* LlamaModel's blocks (the classes that convert as Llama does use them too) */
const tfs_hf_name tfs_hf_llama_blocks[TFS_HF_N_LLAMA_BLOCKS] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	ATTN(XQ, XK),
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	MLP,
};

static const tfs_hf_name qwen2_blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	ATTN(XN, XN),
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	MLP,
};

/* Gemma 2 and 3: a norm after attention and around the MLP; every norm + 1 */
#define GEMMA_NORMS \
	{ "input_layernorm", "attn_norm", H, NO, X1, true }, \
	{ "post_attention_layernorm", "post_attention_norm", H, NO, X1, true }, \
	{ "pre_feedforward_layernorm", "ffn_norm", H, NO, X1, true }, \
	{ "post_feedforward_layernorm", "post_ffw_norm", H, NO, X1, true }

static const tfs_hf_name gemma2_blocks[] = {
	GEMMA_NORMS,
	ATTN(XN, XN),
	MLP,
};

static const tfs_hf_name gemma3_blocks[] = {
	GEMMA_NORMS,
	ATTN(XN, XN),
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, X1, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, X1, true },
	MLP,
};

/* Phi-3: q, k and v fused, gate and up fused (the converter keeps both fused) */
static const tfs_hf_name phi3_blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.qkv_proj", "attn_qkv", TFS_HF_D_QKV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.gate_up_proj", "ffn_up", TFS_HF_D_FF2, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* OLMo 2: q/k norms over all heads, norms after attention and MLP only (OLMo 3's too) */
const tfs_hf_name tfs_hf_olmo2_blocks[TFS_HF_N_OLMO2_BLOCKS] = {
	ATTN(XN, XN),
	{ "self_attn.q_norm", "attn_q_norm", Q, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", KV, NO, XN, true },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, XN, true },
	{ "post_feedforward_layernorm", "post_ffw_norm", H, NO, XN, true },
	MLP,
};

/* ==== config class defaults (transformers 4.57) ==== */

enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL, DB = TFS_HF_DEF_BOOL,
       DHD = TFS_HF_DEF_HEAD_DIM, DKV = TFS_HF_DEF_KV_HEADS };

/* LlamaConfig */
static const tfs_hf_default llama_defaults[] = {
	{ "vocab_size", DI, 32000 }, { "num_key_value_heads", DKV, 0 },
	{ "max_position_embeddings", DI, 2048 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 }, { "head_dim", DHD, 0 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* MistralConfig */
static const tfs_hf_default mistral_defaults[] = {
	{ "vocab_size", DI, 32000 }, { "num_key_value_heads", DKV, 8 },
	{ "max_position_embeddings", DI, 4096 * 32 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "head_dim", DHD, 0 }, { "sliding_window", DI, 4096 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* Qwen2Config: no head_dim attribute */
static const tfs_hf_default qwen2_defaults[] = {
	{ "vocab_size", DI, 151936 }, { "num_key_value_heads", DKV, 32 },
	{ "max_position_embeddings", DI, 32768 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* Gemma2Config */
static const tfs_hf_default gemma2_defaults[] = {
	{ "vocab_size", DI, 256000 }, { "num_key_value_heads", DI, 4 }, { "head_dim", DI, 256 },
	{ "max_position_embeddings", DI, 8192 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "query_pre_attn_scalar", DI, 256 },
	{ "sliding_window", DI, 4096 }, { "final_logit_softcapping", DR, 30.0 },
	{ "attn_logit_softcapping", DR, 50.0 }, { "tie_word_embeddings", DB, 1 },
	{ NULL, 0, 0 },
};

/* Gemma3TextConfig (Gemma3Config's text_config) */
static const tfs_hf_default gemma3_defaults[] = {
	{ "vocab_size", DI, 262208 }, { "num_key_value_heads", DI, 4 }, { "head_dim", DI, 256 },
	{ "max_position_embeddings", DI, 131072 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 1000000.0 }, { "query_pre_attn_scalar", DI, 256 },
	{ "sliding_window", DI, 4096 }, { "final_logit_softcapping", DN, 0 },
	{ "attn_logit_softcapping", DN, 0 }, { "rope_scaling", DN, 0 },
	{ "rope_local_base_freq", DR, 10000.0 }, { "tie_word_embeddings", DB, 1 },
	{ NULL, 0, 0 },
};

/* Phi3Config */
static const tfs_hf_default phi3_defaults[] = {
	{ "vocab_size", DI, 32064 }, { "num_key_value_heads", DKV, 0 },
	{ "max_position_embeddings", DI, 4096 }, { "original_max_position_embeddings", DI, 4096 },
	{ "rms_norm_eps", DR, 1e-5 }, { "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "partial_rotary_factor", DR, 1.0 }, { "sliding_window", DN, 0 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* SmolLM3Config: no head_dim attribute */
static const tfs_hf_default smollm3_defaults[] = {
	{ "vocab_size", DI, 128256 }, { "num_key_value_heads", DKV, 4 },
	{ "max_position_embeddings", DI, 32768 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 2000000.0 }, { "rope_scaling", DN, 0 }, { "sliding_window", DN, 0 },
	{ "tie_word_embeddings", DB, 1 }, { NULL, 0, 0 },
};

/* GraniteConfig: no head_dim attribute; the four multipliers */
static const tfs_hf_default granite_defaults[] = {
	{ "vocab_size", DI, 32000 }, { "num_key_value_heads", DKV, 0 },
	{ "max_position_embeddings", DI, 2048 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "embedding_multiplier", DR, 1.0 }, { "logits_scaling", DR, 1.0 },
	{ "residual_multiplier", DR, 1.0 }, { "attention_multiplier", DR, 1.0 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* Olmo2Config */
static const tfs_hf_default olmo2_defaults[] = {
	{ "vocab_size", DI, 50304 }, { "num_key_value_heads", DKV, 0 },
	{ "max_position_embeddings", DI, 2048 }, { "rms_norm_eps", DR, 1e-5 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* Phi3Config._rope_scaling_adjustment: rope_scaling type su or yarn is longrope */
static int phi3_post_init(json_t *obj, const char *where, tfs_error *err)
{
	json_t *rs = json_object_get(obj, "rope_scaling");
	const char *t = json_string_value(json_object_get(rs, "type"));
	if (t && (!strcmp(t, "su") || !strcmp(t, "yarn")) &&
	    json_object_set_new(rs, "type", json_string("longrope")))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	return 0;
}

/* ==== the classes' own keys ==== */

/* Qwen2Model: _try_set_pooling_type reads modules.json, which a causal LM does not have */

/* Gemma2Model.set_gguf_parameters (not TextModel's) */
static int gemma2_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const tfs_hf_needed k[] = {
		{ "max_position_embeddings", "context_length", false, 0 },
		{ "hidden_size", "embedding_length", false, 0 },
		{ "num_hidden_layers", "block_count", false, 0 },
		{ "intermediate_size", "feed_forward_length", false, 0 },
		{ "num_attention_heads", "attention.head_count", false, 0 },
		{ "num_key_value_heads", "attention.head_count_kv", false, 0 },
		{ "rms_norm_eps", "attention.layer_norm_rms_epsilon", true, 0 },
		{ "head_dim", "attention.key_length", false, 0 },
		{ "head_dim", "attention.value_length", false, 0 },
	}, after[] = {   /* after general.file_type */
		{ "attn_logit_softcapping", "attn_logit_softcapping", true, 0 },
		{ "final_logit_softcapping", "final_logit_softcapping", true, 0 },
		{ "sliding_window", "attention.sliding_window", false, 0 },
	};
	int rc = tfs_hf_add_needed(l, h, k, N(k), err);
	if (!rc)
		rc = tfs_hf_kvs_add_u32(l, "general.file_type", h->ftype, err);
	return rc ? rc : tfs_hf_add_needed(l, h, after, N(after), err);
}

/* Gemma3Model.set_gguf_parameters after TextModel's (keys written again keep their place);
 * EmbeddingGemma's too (hf_egemma.c) */
int tfs_hf_gemma3_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const tfs_hf_needed k[] = {
		{ "max_position_embeddings", "context_length", false, 0 },
		{ "num_attention_heads", "attention.head_count", false, 0 },
		{ "rms_norm_eps", "attention.layer_norm_rms_epsilon", true, 0 },
		{ "head_dim", "attention.key_length", false, 0 },
		{ "head_dim", "attention.value_length", false, 0 },
	};
	int rc = tfs_hf_add_needed(l, h, k, N(k), err);
	if (rc)
		return rc;
	json_t *rp = json_object_get(h->rope, "full_attention");
	json_t *theta = json_object_get(json_is_object(rp) ? rp : h->rope, "rope_theta");
	char name[128];
	snprintf(name, sizeof name, "%s.rope.freq_base", h->arch->gguf);
	rc = theta ? tfs_hf_add_f32(l, h, "rope.freq_base", theta, "rope_theta", err)
		   : tfs_hf_kvs_add_f32(l, name, 1000000.0f, err);
	json_t *v = json_object_get(h->root, "attn_logit_softcapping");
	if (!rc && v && !json_is_null(v))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: attn_logit_softcapping is set; the "
				     "converter refuses it for Gemma 3", h->where);
	v = json_object_get(h->root, "final_logit_softcapping");
	if (!rc && tfs_hf_py_true(v))
		rc = tfs_hf_add_f32(l, h, "final_logit_softcapping", v, "final_logit_softcapping",
				    err);
	v = json_object_get(h->root, "sliding_window_pattern");
	bool one = json_is_integer(v) && json_integer_value(v) == 1;
	if (!rc && !one && !(rc = tfs_hf_need(&v, h, "sliding_window", err)))
		rc = tfs_hf_add_u32(l, h, "attention.sliding_window", v, "sliding_window", err);
	if (!rc && !(rc = tfs_hf_need(&v, h, "num_key_value_heads", err)))
		rc = tfs_hf_add_u32(l, h, "attention.head_count_kv", v, "num_key_value_heads", err);
	return rc;
}

/* Phi3MiniModel.set_gguf_parameters (not TextModel's) */
static int phi3_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const char *const k_ctx[] = { "n_positions", "max_position_embeddings", NULL };
	static const char *const k_embd[] = { "hidden_size", "n_embd", NULL };
	static const char *const k_ff[] = { "intermediate_size", NULL };
	static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer",
					       "num_layers", NULL };
	static const char *const k_head[] = { "num_attention_heads", "n_head", NULL };
	static const char *const k_kv[] = { "num_key_value_heads", "n_head_kv", NULL };
	static const char *const k_rms[] = { "rms_norm_eps", NULL };
	const json_t *rp = json_object_get(h->rope, "full_attention");
	json_t *orig = json_object_get(h->rope, "original_max_position_embeddings");
	json_t *theta = json_object_get(json_is_object(rp) ? rp : h->rope, "rope_theta");
	struct { const char *const *keys; const char *suffix; json_t *v; bool f; } k[] = {
		{ k_ctx, "context_length", NULL, false },
		{ NULL, "rope.scaling.original_context_length", orig, false },
		{ k_embd, "embedding_length", NULL, false },
		{ k_ff, "feed_forward_length", NULL, false },
		{ k_layer, "block_count", NULL, false },
		{ k_head, "attention.head_count", NULL, false },
		{ k_kv, "attention.head_count_kv", NULL, false },
		{ k_rms, "attention.layer_norm_rms_epsilon", NULL, true },
	};
	char name[128];
	int rc;
	for (size_t i = 0; i < N(k); i++) {
		const char *which = k[i].suffix;
		json_t *v = k[i].keys ? tfs_hf_find(h->root, k[i].keys, &which) : k[i].v;
		const char *key = k[i].keys ? k[i].keys[0] : "original_max_position_embeddings";
		if (!v)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\" (the converter needs "
					     "it for Phi3ForCausalLM)", h->where, key);
		if ((rc = k[i].f ? tfs_hf_add_f32(l, h, k[i].suffix, v, which, err)
				 : tfs_hf_add_u32(l, h, k[i].suffix, v, which, err)))
			return rc;
	}
	snprintf(name, sizeof name, "%s.rope.dimension_count", h->arch->gguf);
	if ((rc = tfs_hf_kvs_add_u32(l, name, (uint32_t)tfs_hf_phi3_rope_dims(h), err)))
		return rc;
	if (!theta)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"rope_theta\"", h->where);
	if ((rc = tfs_hf_add_f32(l, h, "rope.freq_base", theta, "rope_theta", err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "general.file_type", h->ftype, err)))
		return rc;
	json_t *sw = json_object_get(h->root, "sliding_window");
	snprintf(name, sizeof name, "%s.attention.sliding_window", h->arch->gguf);
	if (!sw || json_is_null(sw))   /* 0 tells Phi-4 from the other Phi-3 models */
		return tfs_hf_kvs_add_u32(l, name, 0, err);
	return tfs_hf_add_u32(l, h, "attention.sliding_window", sw, "sliding_window", err);
}

/* GraniteModel.set_gguf_parameters' own: the multipliers as scales, when truthy */
static int granite_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const struct { const char *key, *suffix; } k[] = {
		{ "attention_multiplier", "attention.scale" },
		{ "embedding_multiplier", "embedding_scale" },
		{ "residual_multiplier", "residual_scale" },
		{ "logits_scaling", "logit_scale" },
	};
	for (size_t i = 0; i < N(k); i++) {
		json_t *v = json_object_get(h->root, k[i].key);
		int rc = tfs_hf_py_true(v) ? tfs_hf_add_f32(l, h, k[i].suffix, v, k[i].key, err) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* Olmo2Model.set_gguf_parameters' own: a sliding window and its per-layer pattern, when
 * config.json has sliding_window (layer_types, else every 4th layer global). */
int tfs_hf_olmo2_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *sw = json_object_get(h->root, "sliding_window");
	if (!sw)
		return 0;
	int rc = tfs_hf_add_u32(l, h, "attention.sliding_window", sw, "sliding_window", err);
	if (rc)
		return rc;
	json_t *lt = json_object_get(h->root, "layer_types");
	size_t n = json_is_array(lt) ? json_array_size(lt) : (size_t)h->n_layer;
	uint8_t *d = malloc(12 + n);
	char name[128];
	if (!d)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	uint32_t sub = TFS_GGUF_BOOL;
	uint64_t cnt = n;
	memcpy(d, &sub, 4);   /* little-endian hosts only, as the rest of tensorfs */
	memcpy(d + 4, &cnt, 8);
	for (size_t i = 0; i < n; i++) {
		const char *t = json_string_value(json_array_get(lt, i));
		d[12 + i] = json_is_array(lt) ? (t && !strcmp(t, "sliding_attention"))
					      : (i + 1) % 4 != 0;
	}
	snprintf(name, sizeof name, "%s.attention.sliding_window_pattern", h->arch->gguf);
	rc = tfs_hf_kvs_add(l, name, TFS_GGUF_ARRAY, d, 12 + n, err);
	free(d);
	return rc;
}

/* ==== the rows ==== */

#define BASE TFS_HF_ARCH_BASE_PARAMS
#define LLAMA TFS_HF_ARCH_LLAMA_PARAMS

const tfs_hf_arch tfs_hf_arch_llama = {
	TFS_HF_CLASSES("LlamaForCausalLM", "LLaMAForCausalLM"), .gguf = "llama",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_llama_blocks), .flags = BASE | LLAMA,
	.extra = tfs_hf_llama3_freqs, TFS_HF_CONFIG("llama", llama_defaults),
	.vocab = TFS_HF_VOCAB_LLAMA,
};

const tfs_hf_arch tfs_hf_arch_mistral = {
	TFS_HF_CLASSES("MistralForCausalLM"), .gguf = "llama",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_llama_blocks), .flags = BASE | LLAMA,
	.extra = tfs_hf_llama3_freqs, TFS_HF_CONFIG("mistral", mistral_defaults),
	.vocab = TFS_HF_VOCAB_LLAMA,
};

const tfs_hf_arch tfs_hf_arch_qwen2 = {
	TFS_HF_CLASSES("Qwen2ForCausalLM"), .gguf = "qwen2",
	TFS_HF_NAMES(tfs_hf_globals, qwen2_blocks), .flags = BASE,
	TFS_HF_CONFIG("qwen2", qwen2_defaults), .vocab = TFS_HF_VOCAB_SPM_GPT2,
};

const tfs_hf_arch tfs_hf_arch_gemma2 = {
	TFS_HF_CLASSES("Gemma2ForCausalLM"), .gguf = "gemma2",
	TFS_HF_NAMES(gemma_globals, gemma2_blocks), .flags = TFS_HF_ARCH_NO_LM_HEAD,
	.params = gemma2_keys, TFS_HF_CONFIG("gemma2", gemma2_defaults),
	.vocab = TFS_HF_VOCAB_GEMMA2,
};

/* Gemma3Config: its text_config a Gemma3TextConfig */
static const tfs_hf_config_class gemma3_configs[] = {
	{ "gemma3_text", gemma3_defaults, NULL, NULL, false },
	{ "gemma3", (const tfs_hf_default[]){ { NULL, 0, 0 } }, "gemma3_text", NULL, false },
	{ NULL, NULL, NULL, NULL, false },
};

const tfs_hf_arch tfs_hf_arch_gemma3 = {
	TFS_HF_CLASSES("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"), .gguf = "gemma3",
	TFS_HF_NAMES(gemma_globals, gemma3_blocks), .flags = BASE | TFS_HF_ARCH_TRIM_EMBD,
	.params = tfs_hf_gemma3_keys, .configs = gemma3_configs, .vocab = TFS_HF_VOCAB_GEMMA3,
};

static const tfs_hf_config_class phi3_configs[] = {
	{ "phi3", phi3_defaults, NULL, phi3_post_init, false },
	{ NULL, NULL, NULL, NULL, false },
};

const tfs_hf_arch tfs_hf_arch_phi3 = {
	TFS_HF_CLASSES("Phi3ForCausalLM"), .gguf = "phi3",
	TFS_HF_NAMES(tfs_hf_globals, phi3_blocks), .params = phi3_keys, .extra = tfs_hf_phi3_factors,
	.configs = phi3_configs, .vocab = TFS_HF_VOCAB_PHI3,
};

/* SmolLM3Model: LlamaModel's conversion, its own architecture name */
const tfs_hf_arch tfs_hf_arch_smollm3 = {
	TFS_HF_CLASSES("SmolLM3ForCausalLM"), .gguf = "smollm3",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_llama_blocks), .flags = BASE | LLAMA,
	.extra = tfs_hf_llama3_freqs, TFS_HF_CONFIG("smollm3", smollm3_defaults),
	.vocab = TFS_HF_VOCAB_LLAMA,
};

const tfs_hf_arch tfs_hf_arch_granite = {
	TFS_HF_CLASSES("GraniteForCausalLM"), .gguf = "granite",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_llama_blocks),
	.flags = BASE | LLAMA | TFS_HF_ARCH_DROP_HEAD_DIM,
	.params = granite_keys, .extra = tfs_hf_llama3_freqs,
	TFS_HF_CONFIG("granite", granite_defaults), .vocab = TFS_HF_VOCAB_LLAMA,
};

/* Olmo2Model: TextModel's conversion, no permutation */
const tfs_hf_arch tfs_hf_arch_olmo2 = {
	TFS_HF_CLASSES("Olmo2ForCausalLM"), .gguf = "olmo2",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_olmo2_blocks), .flags = BASE,
	.params = tfs_hf_olmo2_keys,
	TFS_HF_CONFIG("olmo2", olmo2_defaults), .vocab = TFS_HF_VOCAB_GPT2,
};
