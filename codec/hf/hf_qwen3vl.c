/*
 * hf_qwen3vl.c - the text model of Qwen3VLForConditionalGeneration (Qwen3-VL dense), as
 * llama.cpp de3ff81's converter writes it (conversion/qwen3vl.py: Qwen3VLTextModel, a
 * Qwen3Model of GGUF architecture qwen3vl):
 *  - Qwen3's tensors (q/k norms) under model.language_model. ("language_model." dropped), the
 *    vision tower (model.visual.*) left out as TextModel leaves it;
 *  - TextModel's keys (M-RoPE's sections among them), then n_deepstack_layers: the count of
 *    vision_config's deepstack_visual_indexes (Qwen3VLVisionConfig's [8, 16, 24] when absent);
 *  - Qwen2Model's tokenizer.
 * Qwen3VLConfig (transformers 4.57) makes text_config a Qwen3VLTextConfig (all defaults when
 * absent).  Its projector is hf_mmproj_qwen3vl.c's.
 */
#include "hf_arch.h"
#include "hf_export.h"

#include <stdio.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

/* Qwen3Model's blocks */
static const tfs_hf_name qwen3vl_blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* Qwen3VLTextConfig (the sizes are not defaulted: see hf_arch.c) */
static const tfs_hf_default text_defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 151936 },
	{ "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 32 }, { "head_dim", TFS_HF_DEF_INT, 128 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 128000 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-6 }, { "rope_theta", TFS_HF_DEF_REAL, 5000000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ NULL, 0, 0 },
};

/* Qwen3VLTextModel.set_gguf_parameters' own: the deepstack layers' count (hf_arch.h; also
 * Qwen3VLMoeTextModel's, hf_qwen3vlmoe.c) */
int tfs_hf_qwen3vl_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *vc = json_object_get(h->root, "vision_config");
	json_t *ds = json_object_get(vc, "deepstack_visual_indexes");
	size_t n = 3;   /* Qwen3VLVisionConfig's [8, 16, 24] */
	if (ds && !json_is_array(ds))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"deepstack_visual_indexes\" is not a "
				     "list", h->where);
	if (ds)
		n = json_array_size(ds);
	char name[128];
	snprintf(name, sizeof name, "%s.n_deepstack_layers", h->arch->gguf);
	return tfs_hf_kvs_add_u32(l, name, (uint32_t)n, err);
}

/* The reverse view: the deepstack layers' count back as vision_config's
 * deepstack_visual_indexes, of which the converter's text model reads the length only (the
 * GGUF does not keep which blocks they follow: written 0, 1, ...).  Always written: the
 * text config the view names (qwen3_vl_text) has no vision defaults to fall back on.  (Also
 * Qwen3-VL-MoE's, hf_qwen3vlmoe.c.) */
int tfs_hf_qwen3vl_xconfig(json_t *config, json_t *gen, const tfs_hf_export *x)
{
	(void)gen;
	double n;
	json_t *ds = json_array();
	if (!config || !tfs_hf_xkv_num(x, ".n_deepstack_layers", &n) || n < 0 || n > 1024) {
		json_decref(ds);
		return 0;
	}
	for (json_int_t i = 0; ds && i < (json_int_t)n; i++)
		if (json_array_append_new(ds, json_integer(i)))
			return json_decref(ds), TFS_E_NOMEM;
	return !ds || json_object_set_new(config, "vision_config",
					  json_pack("{so}", "deepstack_visual_indexes", ds))
	       ? TFS_E_NOMEM : 0;
}

static const tfs_hf_config_class configs[] = {
	{ "qwen3_vl", (const tfs_hf_default[]){ { NULL, 0, 0 } }, "qwen3_vl_text", NULL, false },
	{ "qwen3_vl_text", text_defaults, NULL, NULL, false },
	{ NULL, NULL, NULL, NULL, false },
};

const tfs_hf_arch tfs_hf_arch_qwen3vl = {
	TFS_HF_CLASSES("Qwen3VLForConditionalGeneration"), .gguf = "qwen3vl",
	TFS_HF_NAMES(tfs_hf_globals, qwen3vl_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS, .params = tfs_hf_qwen3vl_keys,
	.configs = configs, .vocab = TFS_HF_VOCAB_SPM_GPT2, .xconfig = tfs_hf_qwen3vl_xconfig,
};
