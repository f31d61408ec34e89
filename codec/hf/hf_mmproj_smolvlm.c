/*
 * hf_mmproj_smolvlm.c - SmolVLMForConditionalGeneration's and Idefics3ForConditionalGeneration's
 * projector (SmolVLM, SmolVLM2, Idefics3: the converter's SmolVLMModel, conversion/smolvlm.py):
 * a SigLIP tower (model.vision_model.*: LayerNorm blocks with biases, learned position
 * embeddings) and the connector (model.connector.modality_projection.proj, mm.model.fc), which
 * takes the tower's output after a pixel shuffle of scale_factor.
 * What the class does:
 *  - hparams_vision: SmolVLMVisionConfig's (Idefics3VisionConfig's: the same) defaults; its
 *    __init__'s .get() defaults for SmolVLM2's config.json, which lacks intermediate_size and
 *    the layer count, are those defaults again;
 *  - filter_tensors: names with vision_tower, vision_model or model.connector;
 *  - tensor_force_quant: the embeddings (patch and position) F32;
 *  - keys: projector type idefics3, layer_norm_eps as the norm epsilon, config.json's
 *    scale_factor (2 when absent: the config class's default), use_gelu, and the
 *    preprocessor's size.longest_edge (else the tower's image size) as the preprocessed image
 *    size.
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <string.h>

/* transformers 4.57's SmolVLMVisionConfig and Idefics3VisionConfig */
static const tfs_hf_default vision_defaults[] = {
	{ "hidden_size", TFS_HF_DEF_INT, 1152 },
	{ "intermediate_size", TFS_HF_DEF_INT, 3072 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 12 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 16 },
	{ "num_channels", TFS_HF_DEF_INT, 3 },
	{ "image_size", TFS_HF_DEF_INT, 224 },
	{ "patch_size", TFS_HF_DEF_INT, 32 },
	{ "layer_norm_eps", TFS_HF_DEF_REAL, 1e-6 },
	{ "attention_dropout", TFS_HF_DEF_REAL, 0.0 },
	{ "initializer_range", TFS_HF_DEF_REAL, 0.02 },
	{ NULL, 0, 0 },
};

#define VM "model.vision_model."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for the projector's names (the
 * tower's: .siglip) */
static const tfs_hf_mm_name smolvlm_names[] = {
	{ "model.connector.modality_projection.proj", "mm.model.fc" },
};

/* SmolVLMModel.filter_tensors */
static bool smolvlm_filter(char *out, size_t cap, const char *name)
{
	if (!strstr(name, "vision_tower") && !strstr(name, "vision_model") &&
	    !strstr(name, "model.connector"))
		return false;
	snprintf(out, cap, "%s", name);
	return true;
}

/* tensor_force_quant: the embeddings F32 (the patch embedding too: before MmprojModel's) */
static int smolvlm_force(const char *name, const char *gguf, uint32_t ftype)
{
	(void)gguf, (void)ftype;
	return strstr(name, ".embeddings.") ? TFS_DT_F32 : -1;
}

/* a clip.* uint32 of value v (add_uint32: struct.pack("I") of an int) */
static int add_size(tfs_hf_kvs *l, const char *key, const json_t *v, const char *what,
		    const char *where, tfs_error *err)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (json_int_t)UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s is not an unsigned 32-bit integer",
				     where, what);
	return tfs_hf_kvs_add_u32(l, key, (uint32_t)json_integer_value(v), err);
}

static int smolvlm_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	json_t *eps = json_object_get(mm->vision, "layer_norm_eps");
	json_t *scale = json_object_get(mm->file, "scale_factor");
	json_t *size = json_object_get(mm->pre, "size");
	json_t *edge = json_object_get(size, "longest_edge");
	int rc;
	if (eps && !json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's \"layer_norm_eps\" is "
				     "not a number", mm->where);
	if (size && !json_is_object(size))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"size\" is not an object (the "
				     "converter reads its longest_edge)", mm->pre_where);
	if (!edge)   /* (the base keys have checked image_size) */
		edge = json_object_get(mm->vision, "image_size");
	if ((rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "idefics3", err)) ||
	    (rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				     eps ? (float)json_number_value(eps) : 1e-5f, err)))
		return rc;
	if (scale)
		rc = add_size(l, "clip.vision.projector.scale_factor", scale,
			      "\"scale_factor\"", mm->where, err);
	else
		rc = tfs_hf_kvs_add_u32(l, "clip.vision.projector.scale_factor", 2, err);
	if (rc || (rc = tfs_hf_kvs_add_bool(l, "clip.use_gelu", true, err)))
		return rc;
	return add_size(l, "clip.vision.preproc_image_size", edge, "size.longest_edge",
			mm->pre_where, err);
}

static const char *const smolvlm_classes[] = { "SmolVLMForConditionalGeneration",
					       "Idefics3ForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_smolvlm = {
	.classes = smolvlm_classes,
	.vision_defaults = vision_defaults,
	.names = smolvlm_names,
	.n_names = sizeof smolvlm_names / sizeof smolvlm_names[0],
	.siglip = VM,
	.filter = smolvlm_filter,
	.force = smolvlm_force,
	.keys = smolvlm_keys,
};
