/*
 * hf_mmproj_internvl.c - InternVLChatModel's projector (InternVL 2.5/3: the converter's
 * InternVisionModel, conversion/internvl.py, chosen by vision_config's architectures): the
 * InternViT tower (vision_model.*: a class embedding, learned position embeddings, LayerNorm
 * blocks with a fused attn.qkv and layer scales ls1/ls2) and the mlp1 projector (LayerNorm,
 * Linear, GELU, Linear: mlp1.0/1/3 as mm.model.mlp.{bid}, which TensorNameMap names only
 * below the tower's block count).
 * What the class does:
 *  - hparams_vision: vision_config as config.json has it (internvl_chat is remote code:
 *    AutoConfig fails and the converter reads config.json); image_size and patch_size their
 *    first element when they are lists;
 *  - filter_tensors: only vision_model.*, mlp*, model.vision_tower.* and
 *    model.multi_modal_projector.* (Intern-S1's projector renamed to mlp1.0/1/3);
 *    vision_model.* under vision_tower.; ".weight" appended to the layer scales, lambda_* and
 *    the position embedding when they lack it;
 *  - modify_tensors: attn.qkv (weight and bias) split in three equal row ranges, named
 *    self_attn.q_proj/k_proj/v_proj;
 *  - tensor_force_quant: position embeddings F32 (MmprojModel's rule already does it);
 *  - keys: projector type internvl, layer_norm_eps (required), use_silu or use_gelu by
 *    hidden_act (else the converter's ValueError), int(1 / downsample_ratio) as the scale
 *    factor (required), config.json's min_dynamic_patch / max_dynamic_patch when above 0.
 *    The preprocessor's image_mean/std are MmprojModel's: InternVL repos without
 *    preprocessor_config.json stop the converter (KeyError), and the view says so.
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <string.h>

#define LAYER "vision_tower.vision_model.encoder.layers.{bid}."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for these names */
static const tfs_hf_mm_name internvl_names[] = {
	{ "vision_tower.vision_model.embeddings.class_embedding", "v.class_embd" },
	{ "vision_tower.vision_model.embeddings.patch_embedding", "v.patch_embd" },
	{ "vision_tower.vision_model.embeddings.position_embedding", "v.position_embd" },
	{ LAYER "self_attn.q_proj", "v.blk.{bid}.attn_q" },
	{ LAYER "self_attn.k_proj", "v.blk.{bid}.attn_k" },
	{ LAYER "self_attn.v_proj", "v.blk.{bid}.attn_v" },
	{ LAYER "attn.q_norm", "v.blk.{bid}.attn_q_norm" },
	{ LAYER "attn.k_norm", "v.blk.{bid}.attn_k_norm" },
	{ LAYER "attn.proj", "v.blk.{bid}.attn_out" },
	{ LAYER "norm1", "v.blk.{bid}.ln1" },
	{ LAYER "norm2", "v.blk.{bid}.ln2" },
	{ LAYER "mlp.fc1", "v.blk.{bid}.ffn_up" },
	{ LAYER "mlp.fc2", "v.blk.{bid}.ffn_down" },
	{ LAYER "ls1", "v.blk.{bid}.ls1" },
	{ LAYER "ls2", "v.blk.{bid}.ls2" },
	{ "vision_tower.vision_model.post_layernorm", "v.post_ln" },
	{ "mlp1.{bid}", "mm.model.mlp.{bid}" },
};

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* InternVisionModel.filter_tensors */
static bool internvl_filter(char *out, size_t cap, const char *name)
{
	static const char *const prefixes[] = { "vision_model", "mlp", "model.vision_tower",
		"model.multi_modal_projector" };
	/* Intern-S1's projector under InternVL's names */
	static const char *const renames[][2] = {
		{ "model.multi_modal_projector.layer_norm.bias", "mlp1.0.bias" },
		{ "model.multi_modal_projector.layer_norm.weight", "mlp1.0.weight" },
		{ "model.multi_modal_projector.linear_1.bias", "mlp1.1.bias" },
		{ "model.multi_modal_projector.linear_1.weight", "mlp1.1.weight" },
		{ "model.multi_modal_projector.linear_2.bias", "mlp1.3.bias" },
		{ "model.multi_modal_projector.linear_2.weight", "mlp1.3.weight" },
	};
	bool kept = false;
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
		kept = kept || starts_with(name, prefixes[i]);
	if (!kept)
		return false;
	for (size_t i = 0; i < sizeof renames / sizeof renames[0]; i++)
		if (!strcmp(name, renames[i][0]))
			name = renames[i][1];
	int n = snprintf(out, cap, "%s%s", starts_with(name, "vision_model") ? "vision_tower." : "",
			 name);
	if ((strstr(out, ".ls") || strstr(out, ".lambda_") || strstr(out, "position_embedding")) &&
	    !ends_with(out, ".weight") && n >= 0 && (size_t)n + 7 < cap)
		strcat(out, ".weight");
	return n >= 0 && (size_t)n < cap;
}

/* tensor_force_quant: position embeddings F32 */
static int internvl_force(const char *name, const char *gguf, uint32_t ftype)
{
	(void)name, (void)ftype;
	return strstr(gguf, ".position_embd.") ? TFS_DT_F32 : -1;
}

/* set_gguf_parameters: image_size and patch_size lists as their first element */
static int internvl_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	static const char *const keys[] = { "image_size", "patch_size" };
	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(mm->vision, keys[i]);
		if (!json_is_array(v))
			continue;
		json_t *first = json_array_get(v, 0);
		if (!first)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's \"%s\" is an "
					     "empty list", mm->where, keys[i]);
		if (json_object_set(mm->vision, keys[i], first))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where);
	}
	return 0;
}

/* modify_tensors: qkv (weight and bias) split in three equal row ranges */
static int internvl_split(tfs_hf_mm_part *parts, size_t *n, const char *name,
			  const tfs_tensor *t, const tfs_hf_mm *mm, tfs_error *err)
{
	static const char *const qkv[] = { "self_attn.q_proj", "self_attn.k_proj",
		"self_attn.v_proj" };
	*n = 0;
	if (!strstr(name, ".qkv."))
		return 0;
	return tfs_hf_mm_split_qkv(parts, n, name, t, mm, "attn.qkv", qkv, err);
}

/* config.json's key k as a tile count when it is an integer above 0 (0: not written) */
static int tiles(uint32_t *out, const tfs_hf_mm *mm, const char *k, tfs_error *err)
{
	json_t *v = json_object_get(mm->file, k);
	*out = 0;
	if (!v || json_is_null(v) || (json_is_integer(v) && json_integer_value(v) <= 0))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) > (json_int_t)UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not an unsigned 32-bit "
				     "integer", mm->where, k);
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

static int internvl_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	json_t *eps = json_object_get(mm->vision, "layer_norm_eps");
	json_t *act = json_object_get(mm->vision, "hidden_act");
	json_t *ratio = json_object_get(mm->file, "downsample_ratio");
	const char *a = json_string_value(act);
	uint32_t lo, hi;
	int rc;
	if (!json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's \"layer_norm_eps\" is "
				     "%s (the converter needs a number)", mm->where,
				     eps ? "not a number" : "missing");
	if (!a || (strcmp(a, "silu") && strcmp(a, "gelu")))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: vision_config's \"hidden_act\" "
				     "is %s%s%s; the converter takes silu or gelu only", mm->where,
				     a ? "\"" : "", a ? a : "missing", a ? "\"" : "");
	/* int(1.0 / downsample_ratio): the quotient truncated toward zero */
	double q = json_is_number(ratio) && json_number_value(ratio) != 0
		 ? 1.0 / json_number_value(ratio) : -1;
	if (!json_is_number(ratio) || !(q >= 0 && q < 4294967296.0))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"downsample_ratio\" is %s (the "
				     "converter needs a ratio whose inverse is an unsigned 32-bit "
				     "integer)", mm->where, ratio ? "out of range" : "missing");
	if ((rc = tiles(&lo, mm, "min_dynamic_patch", err)) ||
	    (rc = tiles(&hi, mm, "max_dynamic_patch", err)))
		return rc;
	if ((rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "internvl", err)) ||
	    (rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				     (float)json_number_value(eps), err)) ||
	    (rc = tfs_hf_kvs_add_bool(l, strcmp(a, "silu") ? "clip.use_gelu" : "clip.use_silu",
				      true, err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "clip.vision.projector.scale_factor", (uint32_t)q,
				     err)))
		return rc;
	if (lo && (rc = tfs_hf_kvs_add_u32(l, "clip.vision.preproc_min_tiles", lo, err)))
		return rc;
	return hi ? tfs_hf_kvs_add_u32(l, "clip.vision.preproc_max_tiles", hi, err) : 0;
}

static const char *const internvl_classes[] = { "InternVisionModel", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_internvl = {
	.classes = internvl_classes,
	.names = internvl_names,
	.n_names = sizeof internvl_names / sizeof internvl_names[0],
	.filter = internvl_filter,
	.force = internvl_force,
	.prepare = internvl_prepare,
	.split = internvl_split,
	.keys = internvl_keys,
};
