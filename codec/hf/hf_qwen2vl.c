/*
 * hf_qwen2vl.c - the text model of Qwen2_5_VLForConditionalGeneration (Qwen2.5-VL), as
 * llama.cpp de3ff81's converter writes it (conversion/qwenvl.py: Qwen2VLModel, a TextModel of
 * GGUF architecture qwen2vl):
 *  - Qwen2's tensors (q/k/v biases, nothing permuted) under model. (or, as transformers 4.52+
 *    saves them, model.language_model.: "language_model." dropped), the vision tower
 *    (visual.*) left out as TextModel leaves it;
 *  - TextModel's keys only, M-RoPE's sections (rope_scaling's mrope_section) among them;
 *  - Qwen2Model's tokenizer (tokenizer.model, else byte-level BPE).
 * Qwen2_5_VLConfig (transformers 4.57) makes its text_config a Qwen2_5_VLTextConfig: from
 * text_config when config.json has one, else from all of config.json's keys (the published
 * repos' flat config.json); to_dict() has both, and the converter merges text_config over the
 * top.  Its projector is hf_mmproj_qwen25vl.c's.
 */
#include "hf_arch.h"

#include <stdio.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

/* Qwen2Model's blocks (Qwen2VLModel maps the same names) */
static const tfs_hf_name qwen2vl_blocks[] = {
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

/* Qwen2_5_VLTextConfig (the sizes are not defaulted: see hf_arch.c) */
static const tfs_hf_default text_defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 152064 }, { "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 8 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 32768 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 1000000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ NULL, 0, 0 },
};

/* Qwen2_5_VLConfig.__init__: without a text_config, its text config is made of all the other
 * keyword arguments (config.json's keys but text_config, vision_config and its own
 * image/video token ids); its to_dict() names its own model_type. */
static int q25vl_post_init(json_t *obj, const char *where, tfs_error *err)
{
	static const char *const own[] = { "text_config", "vision_config", "image_token_id",
					   "video_token_id", "model_type" };
	json_t *tc = json_object_get(obj, "text_config");
	if (tc && !json_is_null(tc))
		return 0;
	json_t *t = json_deep_copy(obj);
	int bad = !t;
	for (size_t i = 0; !bad && i < sizeof own / sizeof own[0]; i++)
		json_object_del(t, own[i]);
	bad = bad || json_object_set_new(t, "model_type", json_string("qwen2_5_vl_text")) ||
	      json_object_set_new(obj, "text_config", t);
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where) : 0;
}

static const tfs_hf_config_class configs[] = {
	{ "qwen2_5_vl", (const tfs_hf_default[]){ { NULL, 0, 0 } }, "qwen2_5_vl_text",
	  q25vl_post_init, false },
	{ "qwen2_5_vl_text", text_defaults, NULL, NULL, false },
	{ NULL, NULL, NULL, NULL, false },
};

const tfs_hf_arch tfs_hf_arch_qwen2vl = {
	TFS_HF_CLASSES("Qwen2_5_VLForConditionalGeneration"), .gguf = "qwen2vl",
	TFS_HF_NAMES(tfs_hf_globals, qwen2vl_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS,
	.configs = configs, .vocab = TFS_HF_VOCAB_SPM_GPT2,
};
