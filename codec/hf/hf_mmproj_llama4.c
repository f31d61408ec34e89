/*
 * hf_mmproj_llama4.c - Llama4ForConditionalGeneration's projector (Llama 4 Scout, Maverick:
 * the converter's Llama4VisionModel, conversion/llama4.py): the vision model
 * (vision_model.*: a patch embedding by a linear layer, class and positional embeddings,
 * LayerNorm blocks with biases, the pixel-shuffle adapter vision_adapter.mlp.fc1/fc2 as
 * mm.model.mlp.1/2) and multi_modal_projector.linear_1 as mm.model.fc.
 * What the class does:
 *  - hparams_vision: Llama4VisionConfig's defaults;
 *  - filter_tensors: only names with multi_modal_projector or vision_model; the positional
 *    embedding (a parameter without a suffix) read as positional_embedding_vlm.weight; the
 *    class embedding keeps its bare name (v.class_embd, TensorNameMap's name as it is);
 *  - the blocks' post_attention_layernorm is written as v.blk.N.attn_post_norm: gguf-py's
 *    table maps that HF name to Gemma 4's entry, which comes after Llama 4's;
 *  - keys: projector type llama4, norm_eps as the norm epsilon, the projector scale factor
 *    int(1 / pixel_shuffle_ratio), use_gelu (hidden_act must be gelu: the converter asserts).
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <string.h>

/* transformers 4.57's Llama4VisionConfig */
static const tfs_hf_default vision_defaults[] = {
	{ "hidden_size", TFS_HF_DEF_INT, 768 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 34 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 16 },
	{ "num_channels", TFS_HF_DEF_INT, 3 },
	{ "intermediate_size", TFS_HF_DEF_INT, 5632 },
	{ "vision_output_dim", TFS_HF_DEF_INT, 7680 },
	{ "image_size", TFS_HF_DEF_INT, 448 },
	{ "patch_size", TFS_HF_DEF_INT, 14 },
	{ "norm_eps", TFS_HF_DEF_REAL, 1e-5 },
	{ "vision_feature_layer", TFS_HF_DEF_INT, -1 },
	{ "initializer_range", TFS_HF_DEF_REAL, 0.02 },
	{ "pixel_shuffle_ratio", TFS_HF_DEF_REAL, 0.5 },
	{ "projector_input_dim", TFS_HF_DEF_INT, 4096 },
	{ "projector_output_dim", TFS_HF_DEF_INT, 4096 },
	{ "multi_modal_projector_bias", TFS_HF_DEF_BOOL, 0 },
	{ "projector_dropout", TFS_HF_DEF_REAL, 0.0 },
	{ "attention_dropout", TFS_HF_DEF_REAL, 0.0 },
	{ "rope_theta", TFS_HF_DEF_INT, 10000 },
	{ NULL, 0, 0 },
};

#define BLK "vision_model.model.layers.{bid}."

/* gguf-py's TensorNameMap of MODEL_ARCH.MMPROJ for Llama 4's names */
static const tfs_hf_mm_name l4_names[] = {
	{ "vision_model.patch_embedding.linear", "v.patch_embd" },
	{ "vision_model.class_embedding", "v.class_embd" },
	{ "vision_model.positional_embedding_vlm", "v.position_embd" },
	{ "vision_model.layernorm_pre", "v.pre_ln" },
	{ "vision_model.layernorm_post", "v.post_ln" },
	{ BLK "self_attn.q_proj", "v.blk.{bid}.attn_q" },
	{ BLK "self_attn.k_proj", "v.blk.{bid}.attn_k" },
	{ BLK "self_attn.v_proj", "v.blk.{bid}.attn_v" },
	{ BLK "self_attn.o_proj", "v.blk.{bid}.attn_out" },
	{ BLK "input_layernorm", "v.blk.{bid}.ln1" },
	{ BLK "post_attention_layernorm", "v.blk.{bid}.attn_post_norm" },
	{ BLK "mlp.fc1", "v.blk.{bid}.ffn_up" },
	{ BLK "mlp.fc2", "v.blk.{bid}.ffn_down" },
	{ "vision_model.vision_adapter.mlp.fc{bid}", "mm.model.mlp.{bid}" },
};

/* Llama4VisionModel.filter_tensors */
static bool l4_filter(char *out, size_t cap, const char *name)
{
	if (!strstr(name, "multi_modal_projector") && !strstr(name, "vision_model"))
		return false;
	bool pos = strstr(name, "positional_embedding_vlm") && !strstr(name, ".weight");
	snprintf(out, cap, "%s%s", name, pos ? ".weight" : "");
	return true;
}

/* modify_tensors: multi_modal_projector.linear_1 (weight or bias) written as mm.model.fc.weight */
static int l4_split(tfs_hf_mm_part *parts, size_t *n, const char *name, const tfs_tensor *t,
		    const tfs_hf_mm *mm, tfs_error *err)
{
	(void)mm, (void)err;
	*n = 0;
	if (!strstr(name, "multi_modal_projector.linear_1"))
		return 0;
	memset(parts, 0, sizeof *parts);
	snprintf(parts->name, sizeof parts->name, "mm.model.fc.weight");
	parts->gguf = true;
	parts->n_dims = t->n_dims;
	memcpy(parts->ne, t->ne, sizeof parts->ne);
	*n = 1;
	return 0;
}

static int l4_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	json_t *eps = json_object_get(mm->vision, "norm_eps");
	json_t *ratio = json_object_get(mm->vision, "pixel_shuffle_ratio");
	const char *act = json_string_value(json_object_get(mm->vision, "hidden_act"));
	if (!json_is_number(eps) || !json_is_number(ratio) || json_number_value(ratio) <= 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's norm_eps or "
				     "pixel_shuffle_ratio is not what the converter reads", mm->where);
	if (json_object_get(mm->vision, "hidden_act") && (!act || strcmp(act, "gelu")))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: vision_config's hidden_act is not "
				     "gelu (the converter asserts it is)", mm->where);
	double f = 1.0 / json_number_value(ratio);   /* Python's int(): toward zero */
	if (f >= 4294967296.0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's pixel_shuffle_ratio "
				     "is too small", mm->where);
	int rc;
	if ((rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "llama4", err)) ||
	    (rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				     (float)json_number_value(eps), err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "clip.vision.projector.scale_factor", (uint32_t)f, err)))
		return rc;
	return tfs_hf_kvs_add_bool(l, "clip.use_gelu", true, err);
}

static const char *const l4_classes[] = { "Llama4ForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_llama4 = {
	.classes = l4_classes,
	.vision_defaults = vision_defaults,
	.names = l4_names,
	.n_names = sizeof l4_names / sizeof l4_names[0],
	.filter = l4_filter,
	.split = l4_split,
	.keys = l4_keys,
};
