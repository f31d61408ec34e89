/*
 * hf_glm4.c - GLM-4-0414 (Glm4ForCausalLM, GGUF architecture glm4), as llama.cpp de3ff81's
 * converter writes it (conversion/glm.py: Glm4Model, a TextModel): Q/K not permuted, q/k/v
 * biases, gate and up fused (ffn_up, 2 x intermediate_size), four norms a layer (attn_norm,
 * post_attention_norm after attention, ffn_norm before the MLP, post_ffw_norm after it);
 * TextModel's keys, then the rotary dimensions int(head_dim * partial_rotary_factor) (0.5
 * when absent); GLM-4-0414's tokenizer (gpt2 and its eos, eot, unk, bos: hf_vocab.c's glm4).
 * Glm4Config's defaults (transformers 4.57).  M-RoPE (Glm4v's mrope_section), which the
 * converter permutes Q/K for, is refused.
 */
#include "hf_arch.h"

#include <stdio.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "post_self_attn_layernorm", "post_attention_norm", H, NO, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.gate_up_proj", "ffn_up", TFS_HF_D_FF2, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
	{ "post_mlp_layernorm", "post_ffw_norm", H, NO, XN, true },
};

/* Glm4Config: the keys the converter reads */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 151552 }, { "num_key_value_heads", TFS_HF_DEF_INT, 2 },
	{ "head_dim", TFS_HF_DEF_INT, 128 }, { "partial_rotary_factor", TFS_HF_DEF_REAL, 0.5 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 131072 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 0.00000015625 },
	{ "rope_theta", TFS_HF_DEF_REAL, 10000.0 }, { "rope_scaling", TFS_HF_DEF_NULL, 0 },
	{ "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 }, { NULL, 0, 0 },
};

/* Glm4Model.set_gguf_parameters' own: the rotary dimensions. */
static int keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	if (json_object_get(h->rope, "mrope_section"))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: mrope_section: M-RoPE's Q/K "
				     "permutation (Glm4v) is not supported", h->where);
	json_t *prf = json_object_get(h->rope, "partial_rotary_factor");
	json_t *hd = json_object_get(h->root, "head_dim");
	double f = 0.5;
	if (prf && !json_is_number(prf))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"partial_rotary_factor\" is not a "
				     "number", h->where);
	if (prf)
		f = json_number_value(prf);
	if (hd && !json_is_null(hd) && !json_is_integer(hd))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"head_dim\" is not an integer",
				     h->where);
	double dims = (double)(hd && !json_is_null(hd) ? json_integer_value(hd)
							: h->hidden / h->n_head) * f;
	if (!(dims >= 0 && dims < 4294967296.0))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: partial_rotary_factor gives %g rotary "
				     "dimensions", h->where, dims);
	char name[128];
	snprintf(name, sizeof name, "%s.rope.dimension_count", h->arch->gguf);
	return tfs_hf_kvs_add_u32(l, name, (uint32_t)dims, err);
}

const tfs_hf_arch tfs_hf_arch_glm4 = {
	TFS_HF_CLASSES("Glm4ForCausalLM"), .gguf = "glm4",
	TFS_HF_NAMES(tfs_hf_globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS, .params = keys,
	TFS_HF_CONFIG("glm4", defaults), .vocab = TFS_HF_VOCAB_GLM4,
};
