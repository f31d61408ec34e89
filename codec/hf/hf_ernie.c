/*
 * hf_ernie.c - ERNIE 4.5 dense (Ernie4_5ForCausalLM, GGUF architecture ernie4_5), as llama.cpp
 * de3ff81's converter writes it (conversion/ernie.py: Ernie4_5Model, a TextModel): LlamaModel's
 * tensors without the Q/K permutation (o_proj's bias when use_bias), TextModel's keys (head_dim
 * as key and value length), the tokenizer SentencePiece's with tokenizer_config.json's
 * add_prefix_space (hf_vocab.c's ernie).  Ernie4_5Config's defaults (transformers 4.57): head_dim
 * 128, None meaning hidden_size // heads.  Not taken: the converter's other spellings of a
 * checkpoint (ernie.* names, fused qkv_proj and up_gate_proj), which no -PT repo has: their
 * tensors are refused as unknown.
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
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* Ernie4_5Config: the keys the converter reads */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 103424 }, { "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 2 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 131072 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 500000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 1 },
	{ "head_dim", TFS_HF_DEF_INT, 128 }, { NULL, 0, 0 },
};

/* Ernie4_5Config.__init__: a head_dim of None is hidden_size // num_attention_heads */
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

const tfs_hf_arch tfs_hf_arch_ernie4_5 = {
	TFS_HF_CLASSES("Ernie4_5ForCausalLM", "Ernie4_5_ForCausalLM"), .gguf = "ernie4_5",
	TFS_HF_NAMES(tfs_hf_globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.configs = (const tfs_hf_config_class[]){ { "ernie4_5", defaults, NULL, post_init, false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_ERNIE,
};
