/*
 * hf_mmproj_gemma3.c - Gemma3ForConditionalGeneration's projector (the converter's
 * Gemma3VisionModel): a SigLIP vision tower (vision_tower.vision_model.*, SiglipVisionConfig's
 * defaults) and Gemma 3's projector (multi_modal_projector.*: the input projection, forced
 * F16, and the soft embedding norm, + 1).
 */
#include "hf_mmproj.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* transformers 4.57's SiglipVisionConfig (Gemma3Config makes one of vision_config) */
static const tfs_hf_default siglip_defaults[] = {
	{ "hidden_size", TFS_HF_DEF_INT, 768 },
	{ "intermediate_size", TFS_HF_DEF_INT, 3072 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 12 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 12 },
	{ "num_channels", TFS_HF_DEF_INT, 3 },
	{ "image_size", TFS_HF_DEF_INT, 224 },
	{ "patch_size", TFS_HF_DEF_INT, 16 },
	{ "layer_norm_eps", TFS_HF_DEF_REAL, 1e-6 },
	{ "attention_dropout", TFS_HF_DEF_REAL, 0.0 },
	{ NULL, 0, 0 },
};

#define VM "vision_tower.vision_model."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for the projector's names (the
 * tower's: .siglip) */
static const tfs_hf_mm_name gemma3_names[] = {
	{ "multi_modal_projector.mm_input_projection", "mm.input_projection" },
	{ "multi_modal_projector.mm_soft_emb_norm", "mm.soft_emb_norm" },
};

/* Gemma3VisionModel.filter_tensors: the tower and the projector, "_weight" -> ".weight" */
static bool gemma3_filter(char *out, size_t cap, const char *name)
{
	static const char *const prefixes[] = { "multi_modal_projector.", "vision_tower.",
						"multimodal_projector.", "vision_model." };
	if (strstr(name, "vision_model.head."))
		return false;   /* tinygemma3's head */
	bool ours = false;
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
		ours |= !strncmp(name, prefixes[i], strlen(prefixes[i]));
	if (!ours)
		return false;
	tfs_hf_replace(out, cap, name, "_weight", ".weight");
	return true;
}

/* tensor_force_quant: the input projection F16 (llama.cpp #13025), the embeddings F32 */
static int gemma3_force(const char *name, const char *gguf, uint32_t ftype)
{
	(void)gguf, (void)ftype;
	if (strstr(name, "input_projection"))
		return TFS_DT_F16;
	if (strstr(name, ".embeddings."))
		return TFS_DT_F32;
	return -1;
}

/* modify_tensors: Gemma3RMSNorm's weight is stored minus one */
static bool gemma3_plus_one(const char *name)
{
	return strstr(name, "soft_emb_norm.weight") != NULL;
}

static int gemma3_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	json_t *eps = json_object_get(mm->vision, "layer_norm_eps");
	json_t *seq = json_object_get(mm->pre, "image_seq_length");
	json_t *is = json_object_get(mm->vision, "image_size");
	json_t *ps = json_object_get(mm->vision, "patch_size");
	int rc;
	if ((rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "gemma3", err)))
		return rc;
	if (eps && !json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's \"layer_norm_eps\" is "
				     "not a number", mm->where);
	if ((rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				     eps ? (float)json_number_value(eps) : 1e-6f, err)) ||
	    (rc = tfs_hf_kvs_add_bool(l, "clip.use_gelu", true, err)))
		return rc;
	/* proj_scale_factor = (image_size // patch_size) // int(image_seq_length ** 0.5),
	 * written when it is not 4 (tinygemma3) */
	if (seq && !json_is_integer(seq))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"image_seq_length\" is not an integer",
				     mm->pre_where);
	json_int_t n = seq ? json_integer_value(seq) : 256;
	json_int_t side = n >= 0 ? (json_int_t)pow((double)n, 0.5) : -1;
	json_int_t i = json_integer_value(is), p = json_integer_value(ps);
	if (!json_is_integer(is) || !json_is_integer(ps) || p <= 0 || side <= 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: image_size, patch_size and the "
				     "preprocessor's image_seq_length cannot give the projector's "
				     "scale factor", mm->where);
	json_int_t a = i / p - ((i % p) && ((i < 0) != (p < 0)));   /* Python's // */
	json_int_t scale = a / side - ((a % side) && (a < 0));
	if (scale > 0 && scale != 4)
		return tfs_hf_kvs_add_u32(l, "clip.vision.projector.scale_factor", (uint32_t)scale,
					  err);
	return 0;
}

static const char *const gemma3_classes[] = { "Gemma3ForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_gemma3 = {
	.classes = gemma3_classes,
	.vision_defaults = siglip_defaults,
	.names = gemma3_names,
	.n_names = sizeof gemma3_names / sizeof gemma3_names[0],
	.siglip = VM,
	.filter = gemma3_filter,
	.force = gemma3_force,
	.plus_one = gemma3_plus_one,
	.keys = gemma3_keys,
};
