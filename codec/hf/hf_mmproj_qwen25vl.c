/*
 * hf_mmproj_qwen25vl.c - Qwen2_5_VLForConditionalGeneration's projector (the converter's
 * Qwen2VLVisionModel, conversion/qwenvl.py): the vision tower (visual.blocks.*, RMS norms,
 * a gated MLP, window attention but every fullatt_block_indexes block) and its patch merger
 * (visual.merger.*: ln_q as v.post_ln, the MLP as mm.0 and mm.2).  What the class does:
 *  - hparams_vision: Qwen2_5_VLVisionConfig's defaults, then image_size 560 when absent,
 *    num_attention_heads and num_hidden_layers copied from num_heads and depth;
 *  - the fused attn.qkv (weight and bias) split in three equal row ranges (attn_q/k/v);
 *  - the Conv3D patch embedding [out, in, 2, p, p] split at its temporal axis into two
 *    Conv2D ones, v.patch_embd.weight and v.patch_embd.weight.1 (F16 at f16, else F32);
 *  - keys: projector type qwen2.5vl_merger, use_silu, n_wa_pattern (fullatt_block_indexes[0]
 *    + 1, the indexes evenly spaced by it), the norm epsilon of config.json's top level
 *    (rms_norm_eps, 1e-6 when absent there).
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <string.h>

/* transformers 4.57's Qwen2_5_VLVisionConfig (fullatt_block_indexes: q25_prepare) */
static const tfs_hf_default vision_defaults[] = {
	{ "depth", TFS_HF_DEF_INT, 32 },
	{ "hidden_size", TFS_HF_DEF_INT, 3584 },
	{ "intermediate_size", TFS_HF_DEF_INT, 3420 },
	{ "num_heads", TFS_HF_DEF_INT, 16 },
	{ "in_channels", TFS_HF_DEF_INT, 3 },
	{ "patch_size", TFS_HF_DEF_INT, 14 },
	{ "spatial_merge_size", TFS_HF_DEF_INT, 2 },
	{ "temporal_patch_size", TFS_HF_DEF_INT, 2 },
	{ "tokens_per_second", TFS_HF_DEF_INT, 4 },
	{ "window_size", TFS_HF_DEF_INT, 112 },
	{ "out_hidden_size", TFS_HF_DEF_INT, 3584 },
	{ "initializer_range", TFS_HF_DEF_REAL, 0.02 },
	{ NULL, 0, 0 },
};

#define BLK "visual.blocks.{bid}."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for these names (q, k and v are the
 * split qkv's; the merger's MLP layers 0 and 2 are mm.0 and mm.2) */
static const tfs_hf_mm_name q25_names[] = {
	{ "visual.patch_embed.proj", "v.patch_embd" },
	{ BLK "norm1", "v.blk.{bid}.ln1" },
	{ BLK "norm2", "v.blk.{bid}.ln2" },
	{ BLK "attn.q", "v.blk.{bid}.attn_q" },
	{ BLK "attn.k", "v.blk.{bid}.attn_k" },
	{ BLK "attn.v", "v.blk.{bid}.attn_v" },
	{ BLK "attn.proj", "v.blk.{bid}.attn_out" },
	{ BLK "mlp.gate_proj", "v.blk.{bid}.ffn_gate" },
	{ BLK "mlp.up_proj", "v.blk.{bid}.ffn_up" },
	{ BLK "mlp.down_proj", "v.blk.{bid}.ffn_down" },
	{ "visual.merger.ln_q", "v.post_ln" },
	{ "visual.merger.mlp.{bid}", "mm.{bid}" },
};

/* Qwen2VLVisionModel.filter_tensors: the tower and its merger only */
static bool q25_filter(char *out, size_t cap, const char *name)
{
	if (strncmp(name, "visual.", 7) != 0)
		return false;
	snprintf(out, cap, "%s", name);
	return true;
}

/* tensor_force_quant: position embeddings F32 (this tower has none) */
static int q25_force(const char *name, const char *gguf, uint32_t ftype)
{
	(void)name, (void)ftype;
	return strstr(gguf, ".position_embd.") ? TFS_DT_F32 : -1;
}

/* Qwen2VLVisionModel.__init__'s changes to hparams_vision */
static int q25_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	json_t *v = mm->vision;
	json_t *fa = json_pack("[iiii]", 7, 15, 23, 31);
	int bad = !fa || (!json_object_get(v, "fullatt_block_indexes") &&
			  json_object_set(v, "fullatt_block_indexes", fa));
	json_decref(fa);
	if (!bad && !json_object_get(v, "image_size"))
		bad = json_object_set_new(v, "image_size", json_integer(560));
	static const char *const from[][2] = { { "num_attention_heads", "num_heads" },
					       { "num_hidden_layers", "depth" } };
	for (size_t i = 0; !bad && i < 2; i++) {
		json_t *x = json_object_get(v, from[i][1]);
		bad = json_object_set_new(v, from[i][0], x ? json_deep_copy(x) : json_null());
	}
	json_t *ed = json_object_get(v, "embed_dim");   /* Qwen2-VL's names */
	if (!bad && ed) {
		json_t *hs = json_object_get(v, "hidden_size");
		bad = json_object_set_new(v, "intermediate_size", hs ? json_deep_copy(hs)
								      : json_null()) ||
		      json_object_set_new(v, "hidden_size", json_deep_copy(ed));
	}
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where) : 0;
}

/* modify_tensors: qkv split in three, the Conv3D patch embedding in two */
static int q25_split(tfs_hf_mm_part *parts, size_t *n, const char *name, const tfs_tensor *t,
		     const tfs_hf_mm *mm, tfs_error *err)
{
	*n = 0;
	if (strstr(name, ".qkv.")) {
		static const char *const qkv[] = { "q", "k", "v" };
		return tfs_hf_mm_split_qkv(parts, n, name, t, mm, "qkv", qkv, err);
	}
	if (!strstr(name, "patch_embed.proj.weight"))
		return 0;
	if (t->n_dims != 5 || t->ne[2] != 2)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: '%s' is not a Conv3D weight of "
				     "temporal patch size 2 (the converter's only one)", mm->where,
				     name);
	for (int k = 0; k < 2; k++) {
		tfs_hf_mm_part *p = &parts[k];
		memset(p, 0, sizeof *p);
		snprintf(p->name, sizeof p->name, "v.patch_embd.weight%s", k ? ".1" : "");
		p->gguf = true;
		p->n_dims = 4;
		int64_t ne[4] = { t->ne[0], t->ne[1], t->ne[3], t->ne[4] };
		memcpy(p->ne, ne, sizeof ne);
		/* each p x p kernel of the source is followed by its other temporal half */
		p->gather = (tfs_hf_gather){ TFS_HF_GATHER_SPLIT, (uint64_t)k, 2, 0,
					     (uint64_t)(t->ne[0] * t->ne[1]), { 0, 0, 0 } };
	}
	*n = 2;
	return 0;
}

static int q25_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	const char *mt = json_string_value(json_object_get(mm->file, "model_type"));
	if (!mt || strcmp(mt, "qwen2_5_vl"))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: model_type %s: the projector of "
				     "Qwen2_5_VLForConditionalGeneration is read for qwen2_5_vl only",
				     mm->where, mt ? mt : "(none)");
	json_t *fa = json_object_get(mm->vision, "fullatt_block_indexes");
	size_t n = json_array_size(fa);
	json_int_t first = n ? json_integer_value(json_array_get(fa, 0)) : -1;
	if (!n || !json_is_integer(json_array_get(fa, 0)) || first < 0 || first >= UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's "
				     "\"fullatt_block_indexes\" is not a list of block indexes",
				     mm->where);
	for (size_t i = 1; i < n; i++) {
		json_t *a = json_array_get(fa, i - 1), *b = json_array_get(fa, i);
		if (!json_is_integer(b) || json_integer_value(b) - json_integer_value(a) != first + 1)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: invalid fullatt_block_indexes "
					     "(not every %lld blocks: the converter refuses them)",
					     mm->where, (long long)first + 1);
	}
	json_t *eps = json_object_get(mm->file, "rms_norm_eps");
	if (eps && !json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"rms_norm_eps\" is not a number",
				     mm->where);
	int rc;
	if ((rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "qwen2.5vl_merger", err)) ||
	    (rc = tfs_hf_kvs_add_bool(l, "clip.use_silu", true, err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "clip.vision.n_wa_pattern", (uint32_t)(first + 1), err)))
		return rc;
	return tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				  eps ? (float)json_number_value(eps) : 1e-6f, err);
}

static const char *const q25_classes[] = { "Qwen2_5_VLForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_qwen25vl = {
	.classes = q25_classes,
	.vision_defaults = vision_defaults,
	.names = q25_names,
	.n_names = sizeof q25_names / sizeof q25_names[0],
	.filter = q25_filter,
	.force = q25_force,
	.prepare = q25_prepare,
	.split = q25_split,
	.keys = q25_keys,
};
