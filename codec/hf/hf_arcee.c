/*
 * hf_arcee.c - Arcee (ArceeForCausalLM, arcee-ai/AFM-4.5B; GGUF architecture arcee), as
 * llama.cpp de3ff81's converter writes it (conversion/llama.py: ArceeModel, a LlamaModel that
 * also calls _try_set_pooling_type): Llama's tensors with Q/K permuted, but an MLP of up and
 * down only (ReLU²: MODEL_ARCH.ARCEE has no ffn_gate); LlamaModel's keys (vocab_size, rope
 * dimensions), its llama3 rope_freqs and its tokenizer, then pooling_type when the repo has a
 * sentence-transformers modules.json (tfs_hf_pooling_key; a causal LM's has none: no key).
 * ArceeConfig's defaults (transformers 4.57).
 */
#include "hf_arch.h"

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE, XQ = TFS_HF_XF_PERMUTE_Q,
       XK = TFS_HF_XF_PERMUTE_K };

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XQ, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XK, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* ArceeConfig: the keys the converter reads (head_dim None: hidden_size // heads) */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 32000 }, { "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 0 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 4096 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 10000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "head_dim", TFS_HF_DEF_HEAD_DIM, 0 },
	{ "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 }, { NULL, 0, 0 },
};

const tfs_hf_arch tfs_hf_arch_arcee = {
	TFS_HF_CLASSES("ArceeForCausalLM"), .gguf = "arcee",
	TFS_HF_NAMES(tfs_hf_globals, blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_LLAMA_PARAMS,
	.extra = tfs_hf_llama3_freqs, .params = tfs_hf_pooling_key,
	TFS_HF_CONFIG("arcee", defaults), .vocab = TFS_HF_VOCAB_LLAMA,
};
