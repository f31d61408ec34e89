/*
 * hf_seed_oss.c - Seed-OSS (SeedOssForCausalLM, GGUF architecture seed_oss), as llama.cpp
 * de3ff81's converter writes it (conversion/olmo.py: SeedOssModel, a TextModel with nothing of
 * its own): Q/K not permuted, q/k/v biases (o_proj's when attention_out_bias), the norm after
 * attention named post_attention_norm (SEED_OSS has no ffn_norm: gguf-py maps
 * post_attention_layernorm to ATTN_POST_NORM), TextModel's keys (head_dim as the key and value
 * lengths) and tokenizer (gpt2); SeedOssConfig's defaults (transformers 4.57).
 */
#include "hf_arch.h"

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, XN, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* SeedOssConfig: the keys the converter reads (head_dim 128 when absent, hidden_size //
 * num_attention_heads when None) */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 155136 }, { "hidden_size", TFS_HF_DEF_INT, 4096 },
	{ "intermediate_size", TFS_HF_DEF_INT, 27648 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 64 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 80 },
	{ "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 8 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 524288 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-6 }, { "rope_theta", TFS_HF_DEF_REAL, 10000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ "head_dim", TFS_HF_DEF_INT, 128 }, { NULL, 0, 0 },
};

/* SeedOssConfig.__init__: a head_dim of None is hidden_size // num_attention_heads */
static int post_init(json_t *c, const char *where, tfs_error *err)
{
	json_t *hs = json_object_get(c, "hidden_size"), *nh = json_object_get(c, "num_attention_heads");
	if (!json_is_null(json_object_get(c, "head_dim")) || !json_is_integer(hs) ||
	    json_integer_value(nh) <= 0)
		return 0;
	if (json_object_set_new(c, "head_dim", json_integer(json_integer_value(hs) /
							    json_integer_value(nh))))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	return 0;
}

const tfs_hf_arch tfs_hf_arch_seed_oss = {
	TFS_HF_CLASSES("SeedOssForCausalLM"), .gguf = "seed_oss",
	TFS_HF_NAMES(tfs_hf_globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.configs = (const tfs_hf_config_class[]){ { "seed_oss", defaults, NULL, post_init, false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_GPT2,
};
