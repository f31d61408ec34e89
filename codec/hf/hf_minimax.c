/*
 * hf_minimax.c - MiniMax-M2 (MiniMaxM2ForCausalLM, GGUF architecture minimax-m2), as llama.cpp
 * de3ff81's converter writes it (conversion/minimax.py: MiniMaxM2Model, a TextModel):
 *  - attention with q/k norms over all heads (qk_norm_type per_layer), no permutation;
 *  - a router (block_sparse_moe.gate), its score correction bias (ModelBase.filter_tensors:
 *    e_score_correction_bias -> e_score_correction.bias: exp_probs_b.bias), and per-expert
 *    w1/w2/w3 stacked as Mixtral's (hf_moe.c): ffn_gate_exps, ffn_down_exps, ffn_up_exps;
 *  - TextModel's keys (experts, sigmoid gating from scoring_func, head_dim), then
 *    expert_feed_forward_length (intermediate_size) and rope.dimension_count (rotary_dim);
 *  - TextModel's tokenizer (gpt2).
 * minimax_m2 is unknown to transformers 4.57 (AutoConfig fails): config.json is read as
 * written, no defaults.
 */
#include "hf_moe.h"
#include "hf_plan_impl.h"

#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, NO = TFS_HF_D_NONE,
       EX = TFS_HF_D_EXPERTS, FE = TFS_HF_D_FF_EXP, XN = TFS_HF_XF_NONE };

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", Q, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", KV, NO, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "block_sparse_moe.gate", "ffn_gate_inp", EX, H, XN, true },
	{ "block_sparse_moe.e_score_correction", "exp_probs_b", EX, NO, XN, false },
};

static const char *const k_experts[] = { "num_local_experts", "num_experts", NULL };

/* merged as w1, w2, w3 (MiniMaxM2Model.modify_tensors) */
static const tfs_hf_moe experts = {
	"block_sparse_moe.experts", { "w1", "w2", "w3" },
	{ "ffn_gate_exps", "ffn_down_exps", "ffn_up_exps" },
	{ FE, H, FE }, { H, FE, H }, k_experts, NULL,
};

/* ModelBase.filter_tensors: the router's score correction bias named as a bias */
static bool mm_rename(char *name, size_t cap, const hparams *h)
{
	static const char tail[] = "e_score_correction_bias";
	size_t n = strlen(name), k = sizeof tail - 1;
	(void)h;
	if (n >= k && n < cap && !strcmp(name + n - k, tail))
		name[n - 5] = '.';   /* "_bias" -> ".bias" */
	return true;
}

/* MiniMaxM2Model.set_gguf_parameters' own, after TextModel's */
static const tfs_hf_needed needed[] = {
	{ "intermediate_size", "expert_feed_forward_length", false, 0 },
	{ "rotary_dim", "rope.dimension_count", false, 0 },
};

static int mm_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	return tfs_hf_add_needed(l, h, h->arch->needed, h->arch->n_needed, err);
}

static const struct tfs_hf_hooks hooks = { .rename = mm_rename, .renames_back = true };

const tfs_hf_arch tfs_hf_arch_minimax_m2 = {
	TFS_HF_CLASSES("MiniMaxM2ForCausalLM"), .gguf = "minimax-m2",
	TFS_HF_NAMES(tfs_hf_globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = mm_keys, .vocab = TFS_HF_VOCAB_GPT2, .moe = &experts, .hooks = &hooks,
	.needed = needed, .n_needed = sizeof needed / sizeof needed[0],
};
