/*
 * hf_qwen3vlmoe.c - the text model of Qwen3VLMoeForConditionalGeneration (Qwen3-VL-30B-A3B,
 * 235B-A22B), as llama.cpp de3ff81's converter writes it (conversion/qwen3vl.py:
 * Qwen3VLMoeTextModel, a Qwen3MoeModel of GGUF architecture qwen3vlmoe):
 *  - Qwen3-MoE's tensors (q/k norms, the router) under model.language_model. ("language_model."
 *    dropped), the vision tower (model.visual.*) left out as TextModel leaves it;
 *  - the experts stacked in the checkpoint the other way round from Qwen3.5-MoE's:
 *    mlp.experts.gate_up_proj [E, hidden, 2 ff] transposed and cut in halves into
 *    ffn_gate_exps and ffn_up_exps, mlp.experts.down_proj [E, ff, hidden] transposed into
 *    ffn_down_exps (each computed on read, tfs_hf_own TFS_HF_OWN_T, as Llama 4's); experts
 *    saved one by one (mlp.experts.E.*) are stacked as Qwen3-MoE's (so the reverse view shows
 *    them one by one, as it does Qwen3-MoE's: passes_experts);
 *  - TextModel's keys (M-RoPE's sections), Qwen2MoeModel's expert feed-forward lengths, then
 *    n_deepstack_layers (hf_qwen3vl.c's);
 *  - TextModel's tokenizer (gpt2).
 * Qwen3VLMoeConfig (transformers 4.57) makes text_config a Qwen3VLMoeTextConfig (all defaults
 * when absent).  Its projector is Qwen3-VL's (hf_mmproj_qwen3vl.c: the same converter class).
 */
#include "hf_moe.h"
#include "hf_names.h"
#include "hf_plan_impl.h"

#include <stdio.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, HD = TFS_HF_D_HEAD,
       NO = TFS_HF_D_NONE, EX = TFS_HF_D_EXPERTS, FE = TFS_HF_D_FF_EXP, XN = TFS_HF_XF_NONE };

/* Qwen3MoeModel's blocks */
static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.gate", "ffn_gate_inp", EX, H, XN, true },
};

/* Qwen3VLMoeTextModel.modify_tensors: a layer's mlp.experts.gate_up_proj ([E, hidden, 2 ff]:
 * permute(0, 2, 1) of each half, gate the first) and down_proj ([E, ff, hidden]: permuted),
 * with or without ".weight"; TFS_PASSTHROUGH for any other tensor. */
static int vlmoe_experts(const hparams *h, const tfs_model *st, size_t idx, const char *where,
			 tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	static const char lm[] = "model.language_model.", ex[] = "mlp.experts.";
	const tfs_tensor *t = tfs_model_tensor(st, idx);
	char name[512];
	const char *rest;
	unsigned long b;
	*n = 0;
	if (!strncmp(t->name, lm, sizeof lm - 1))
		snprintf(name, sizeof name, "model.%s", t->name + sizeof lm - 1);
	else
		snprintf(name, sizeof name, "%s", t->name);
	if (!tfs_hf_index_of(name, "model.layers.", &b, &rest) || strncmp(rest, ex, sizeof ex - 1))
		return TFS_PASSTHROUGH;
	const char *x = rest + sizeof ex - 1;
	bool down = !strcmp(x, "down_proj") || !strcmp(x, "down_proj.weight");
	if (!down && strcmp(x, "gate_up_proj") && strcmp(x, "gate_up_proj.weight"))
		return TFS_PASSTHROUGH;   /* an expert of its own (mlp.experts.E.*) */
	if ((int64_t)b >= h->n_layer)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name for "
				     "architecture qwen3vlmoe (the converter cannot map it)", where,
				     t->name);
	return tfs_hf_moe_transposed(h, st, idx, b, down, tfs_hf_moe_dim(FE, h),
				     "moe_intermediate_size", where, out, n, err);
}

static const char *const k_experts[] = { "num_local_experts", "num_experts", NULL };

/* experts saved one by one are stacked as Qwen2MoeModel does (down, gate, up) */
static const tfs_hf_moe experts = {
	"mlp.experts", { "down_proj", "gate_proj", "up_proj" },
	{ "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps" },
	{ H, FE, FE }, { FE, H, H }, k_experts, vlmoe_experts,
};

/* Qwen2MoeModel.set_gguf_parameters' own, then Qwen3VLMoeTextModel's deepstack count */
static int vlmoe_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const char *const k[][2] = {
		{ "moe_intermediate_size", "expert_feed_forward_length" },
		{ "shared_expert_intermediate_size", "expert_shared_feed_forward_length" },
	};
	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(h->root, k[i][0]);
		int rc = v && !json_is_null(v) ? tfs_hf_add_u32(l, h, k[i][1], v, k[i][0], err) : 0;
		if (rc)
			return rc;
	}
	return tfs_hf_qwen3vl_keys(l, h, err);
}

enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL, DB = TFS_HF_DEF_BOOL,
       DHD = TFS_HF_DEF_HEAD_DIM, DKV = TFS_HF_DEF_KV_HEADS };

/* Qwen3VLMoeTextConfig (transformers 4.57; the sizes are not defaulted: see hf_arch.c) */
static const tfs_hf_default text_defaults[] = {
	{ "vocab_size", DI, 151936 }, { "num_key_value_heads", DKV, 16 },
	{ "head_dim", DHD, 0 }, { "max_position_embeddings", DI, 128000 },
	{ "rms_norm_eps", DR, 1e-6 }, { "rope_theta", DR, 5000000.0 }, { "rope_scaling", DN, 0 },
	{ "tie_word_embeddings", DB, 0 }, { "moe_intermediate_size", DI, 1408 },
	{ "num_experts_per_tok", DI, 4 }, { "num_experts", DI, 60 }, { NULL, 0, 0 },
};

static const tfs_hf_config_class configs[] = {
	{ "qwen3_vl_moe", (const tfs_hf_default[]){ { NULL, 0, 0 } }, "qwen3_vl_moe_text", NULL,
	  false },
	{ "qwen3_vl_moe_text", text_defaults, NULL, NULL, false },
	{ NULL, NULL, NULL, NULL, false },
};

const tfs_hf_arch tfs_hf_arch_qwen3vlmoe = {
	TFS_HF_CLASSES("Qwen3VLMoeForConditionalGeneration"), .gguf = "qwen3vlmoe",
	TFS_HF_NAMES(tfs_hf_globals, blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_PASSES_EXPERTS, .params = vlmoe_keys,
	.configs = configs, .vocab = TFS_HF_VOCAB_GPT2, .moe = &experts,
	.xconfig = tfs_hf_qwen3vl_xconfig,
};
