/*
 * hf_mmproj_lfm2vl.c - Lfm2VlForConditionalGeneration's projector (LFM2-VL: the converter's
 * LFM2VLModel, conversion/lfm2.py): a SigLIP2 NaFlex tower (vision_tower.vision_model.*, or
 * model.vision_tower.* as transformers saves it: the patch embedding a linear layer of
 * 16 x 16 x 3 inputs, learned position embeddings, LayerNorm blocks with biases) and the
 * projector after the pixel unshuffle (multi_modal_projector.*: its LayerNorm as
 * mm.input_norm, linear_1/linear_2 as mm.1/mm.2, which TensorNameMap names only below the
 * tower's block count).
 * What the class does:
 *  - hparams_vision: Siglip2VisionConfig's defaults, then image_size 256 whatever the config
 *    says (dynamic resolution has none: the converter's placeholder);
 *  - filter_tensors: model.vision_tower. and model.multi_modal_projector. without "model.";
 *    every other tensor but language_model.* kept (and a name the map lacks stops it);
 *  - modify_tensors: the patch embedding (n_embd, 768) viewed as (n_embd, 16, 16, 3) and
 *    permuted to (n_embd, 3, 16, 16): each row's columns (y, x, c) become (c, y, x);
 *  - keys: projector type lfm2, layer_norm_eps (required), config.json's downsample_factor
 *    (2 when absent) as the scale factor, use_gelu, and the block count written again, less
 *    the layers vision_feature_layer drops (-(vision_feature_layer + 1); -1 when absent).
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <string.h>

/* transformers 4.57's Siglip2VisionConfig (Lfm2VlConfig makes one of vision_config) */
static const tfs_hf_default vision_defaults[] = {
	{ "hidden_size", TFS_HF_DEF_INT, 768 },
	{ "intermediate_size", TFS_HF_DEF_INT, 3072 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 12 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 12 },
	{ "num_channels", TFS_HF_DEF_INT, 3 },
	{ "num_patches", TFS_HF_DEF_INT, 256 },
	{ "patch_size", TFS_HF_DEF_INT, 16 },
	{ "layer_norm_eps", TFS_HF_DEF_REAL, 1e-6 },
	{ "attention_dropout", TFS_HF_DEF_REAL, 0.0 },
	{ NULL, 0, 0 },
};

#define VM "vision_tower.vision_model."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for the projector's names (the
 * tower's: .siglip) */
static const tfs_hf_mm_name lfm2_names[] = {
	{ "multi_modal_projector.layer_norm", "mm.input_norm" },
	{ "multi_modal_projector.linear_{bid}", "mm.{bid}" },
};

/* LFM2VLModel.filter_tensors */
static bool lfm2_filter(char *out, size_t cap, const char *name)
{
	char tmp[512];
	tfs_hf_replace(tmp, sizeof tmp, name, "model.vision_tower.", "vision_tower.");
	tfs_hf_replace(out, cap, tmp, "model.multi_modal_projector.", "multi_modal_projector.");
	return true;
}

/* __init__: image_size 256 */
static int lfm2_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	if (json_object_set_new(mm->vision, "image_size", json_integer(256)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where);
	return 0;
}

/* modify_tensors: the patch embedding (n_embd, 16 x 16 x 3) as (n_embd, 3, 16, 16), a
 * gather of 256 groups of 3 single values of each row (hf_mmproj_gemma4.c's, p fixed) */
static int lfm2_split(tfs_hf_mm_part *parts, size_t *n, const char *name, const tfs_tensor *t,
		      const tfs_hf_mm *mm, tfs_error *err)
{
	*n = 0;
	if (!strstr(name, "patch_embedding.weight"))
		return 0;
	if (t->n_dims != 2 || t->ne[0] != 16 * 16 * 3)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: '%s' is not (n_embd, 768): the "
				     "converter views it as 16 x 16 x 3 patches of a linear layer",
				     mm->where, name);
	tfs_hf_mm_part *o = &parts[0];
	memset(o, 0, sizeof *o);
	snprintf(o->name, sizeof o->name, "%s", name);
	o->gather = (tfs_hf_gather){ .kind = TFS_HF_GATHER_COLS, .groups = 16 * 16, .per = 3,
				     .unit = 1 };
	o->n_dims = 4;
	int64_t ne[4] = { 16, 16, 3, t->ne[1] };
	memcpy(o->ne, ne, sizeof ne);
	*n = 1;
	return 0;
}

static int lfm2_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	static const char *const k_eps[] = { "layer_norm_eps", NULL };
	static const char *const k_block[] = { "n_layers", "num_hidden_layers", "n_layer",
		"num_layers", "depth", "layers", "encoder_layers", "vt_num_hidden_layers", NULL };
	json_t *eps = tfs_hf_find(mm->vision, k_eps, NULL);
	json_t *down = json_object_get(mm->file, "downsample_factor");
	json_t *feat = json_object_get(mm->file, "vision_feature_layer");
	json_t *nb = tfs_hf_find(mm->vision, k_block, NULL);
	int rc;
	if (!eps || !json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's \"layer_norm_eps\" is "
				     "%s (the converter needs a number)", mm->where,
				     eps ? "not a number" : "missing");
	if (down && (!json_is_integer(down) || json_integer_value(down) < 0 ||
		     json_integer_value(down) > (json_int_t)UINT32_MAX))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"downsample_factor\" is not an "
				     "unsigned 32-bit integer", mm->where);
	if (feat && !json_is_integer(feat))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"vision_feature_layer\" is not an "
				     "integer", mm->where);
	/* block count - (-(vision_feature_layer + 1)) (the base keys have checked the count) */
	json_int_t blocks = json_integer_value(nb) + (feat ? json_integer_value(feat) : -1) + 1;
	if (blocks < 0 || blocks > (json_int_t)UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_feature_layer %lld leaves %lld "
				     "blocks of the tower", mm->where,
				     (long long)json_integer_value(feat), (long long)blocks);
	if ((rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "lfm2", err)) ||
	    (rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				     (float)json_number_value(eps), err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "clip.vision.projector.scale_factor",
				     down ? (uint32_t)json_integer_value(down) : 2, err)) ||
	    (rc = tfs_hf_kvs_add_bool(l, "clip.use_gelu", true, err)))
		return rc;
	/* (the key MmprojModel wrote keeps its place, its value replaced: gguf-py's add of a
	 * duplicate key) */
	return tfs_hf_kvs_add_u32(l, "clip.vision.block_count", (uint32_t)blocks, err);
}

static const char *const lfm2_classes[] = { "Lfm2VlForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_lfm2vl = {
	.classes = lfm2_classes,
	.vision_defaults = vision_defaults,
	.names = lfm2_names,
	.n_names = sizeof lfm2_names / sizeof lfm2_names[0],
	.siglip = VM,
	.filter = lfm2_filter,
	.prepare = lfm2_prepare,
	.split = lfm2_split,
	.keys = lfm2_keys,
};
