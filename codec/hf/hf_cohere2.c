/*
 * hf_cohere2.c - Command R7B and Command A (Cohere2ForCausalLM, GGUF architecture cohere2), as
 * llama.cpp de3ff81's converter writes it (conversion/command_r.py: Cohere2Model, a TextModel):
 * Q/K not permuted, one norm per layer (input_layernorm: attention and MLP in parallel), no
 * output tensor (the embeddings are tied), no biases (the converter's modify_tensors means to
 * skip all-zero ones, but its torch.any() of a lazy tensor fails: a repo with a .bias is
 * refused, as the converter fails on it);
 * TextModel's keys, then logit_scale, attention.sliding_window, vocab_size, the rotary
 * dimensions (int(rotary_pct * hidden_size // heads)) and rope scaling type none; the tokenizer
 * gpt2's.  Cohere2Config's defaults (transformers 4.57): head_dim hidden_size // heads.
 */
#include "hf_arch.h"
#include "hf_plan_impl.h"

#include <stdio.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

static const tfs_hf_name globals[] = {
	{ "model.embed_tokens", "token_embd", VOC, H, XN, true },
	{ "model.norm", "output_norm", H, NO, XN, true },
};

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* Cohere2Config: the keys the converter reads */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 256000 }, { "logit_scale", TFS_HF_DEF_REAL, 0.0625 },
	{ "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 0 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 8192 },
	{ "layer_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 1 },
	{ "rope_theta", TFS_HF_DEF_REAL, 10000.0 }, { "rope_scaling", TFS_HF_DEF_NULL, 0 },
	{ "sliding_window", TFS_HF_DEF_INT, 4096 }, { "head_dim", TFS_HF_DEF_HEAD_DIM, 0 },
	{ NULL, 0, 0 },
};

/* Cohere2Model.set_gguf_parameters' own, after TextModel's: these, then rope scaling type
 * none.  The rotary dimensions are int(rotary_pct * (hidden_size // heads)). */
static const tfs_hf_needed needed[] = {
	{ "logit_scale", "logit_scale", true, TFS_HF_NEED_AS_IS },
	{ "sliding_window", "attention.sliding_window", false, TFS_HF_NEED_AS_IS },
	{ "vocab_size", "vocab_size", false, TFS_HF_NEED_AS_IS },
	{ "rotary_pct", "rope.dimension_count", false, TFS_HF_NEED_HEAD_RATIO },
};

static int keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	char name[128];
	int rc = tfs_hf_add_needed(l, h, h->arch->needed, h->arch->n_needed, err);
	if (rc)
		return rc;
	snprintf(name, sizeof name, "%s.rope.scaling.type", h->arch->gguf);
	return tfs_hf_kvs_add_str(l, name, "none", err);
}

/* modify_tensors: `if torch.any(data_torch != 0)` of a .bias, a lazy tensor, asks its len()
 * (a 0-d meta tensor: TypeError), so a .bias fails the conversion */
static int no_bias(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m, const hparams *h,
		   const char *shard, unsigned part, unsigned *parts, tfs_error *err)
{
	(void)o, (void)m, (void)h, (void)part, (void)parts;
	size_t n = strlen(t->name);
	if (n >= 5 && !strcmp(t->name + n - 5, ".bias"))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s': llama.cpp's converter "
				     "fails on a Cohere2 bias (torch.any of a lazy tensor)", shard,
				     t->name);
	return 0;
}

static const struct tfs_hf_hooks hooks = { .fix = no_bias, .keys_only = true };

const tfs_hf_arch tfs_hf_arch_cohere2 = {
	TFS_HF_CLASSES("Cohere2ForCausalLM"), .gguf = "cohere2",
	TFS_HF_NAMES(globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS, .params = keys,
	TFS_HF_CONFIG("cohere2", defaults), .vocab = TFS_HF_VOCAB_GPT2, .hooks = &hooks,
	.needed = needed, .n_needed = sizeof needed / sizeof needed[0],
};
