/*
 * hf_mmproj_qwen3vl.c - Qwen3VLForConditionalGeneration's projector (the converter's
 * Qwen3VLVisionModel, conversion/qwen3vl.py): the vision tower (visual.*, or model.visual.* as
 * transformers 4.52+ saves it: LayerNorms, fused qkv kept fused, learned position
 * embeddings), its merger (norm as v.post_ln, linear_fc1/2 as mm.0/mm.2) and the deepstack
 * mergers (deepstack_merger_list.K.* as v.deepstack.B.*, B the K-th deepstack_visual_indexes).
 * What the class does:
 *  - hparams_vision: Qwen3VLVisionConfig's defaults, then image_size, when absent,
 *    int(sqrt(num_position_embeddings) * patch_size); num_heads and depth copied as the head
 *    and block counts;
 *  - the Conv3D patch embedding split at its temporal axis as Qwen2.5-VL's
 *    (hf_mmproj_qwen25vl.c), its bias as v.patch_embd.bias;
 *  - keys: projector type qwen3vl_merger, use_gelu, spatial_merge_size, text_config's
 *    rms_norm_eps (1e-6) as the norm epsilon, is_deepstack_layers (one bool per block).
 * Qwen3.5 and Qwen3.5-MoE (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration)
 * are the same converter class, their tower Qwen3-VL's without deepstack mergers: a row of
 * their own only because transformers 4.57 (the converter's) does not know model_type qwen3_5,
 * so that the converter reads config.json as written: no vision config class's defaults, and
 * the class's own .get() defaults (deepstack_visual_indexes [], num_position_embeddings 2304,
 * patch_size 16) where a key is absent.
 */
#include "hf_mmproj.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* transformers 4.57's Qwen3VLVisionConfig (deepstack_visual_indexes: q3_prepare) */
static const tfs_hf_default vision_defaults[] = {
	{ "depth", TFS_HF_DEF_INT, 27 },
	{ "hidden_size", TFS_HF_DEF_INT, 1152 },
	{ "intermediate_size", TFS_HF_DEF_INT, 4304 },
	{ "num_heads", TFS_HF_DEF_INT, 16 },
	{ "in_channels", TFS_HF_DEF_INT, 3 },
	{ "patch_size", TFS_HF_DEF_INT, 16 },
	{ "spatial_merge_size", TFS_HF_DEF_INT, 2 },
	{ "temporal_patch_size", TFS_HF_DEF_INT, 2 },
	{ "out_hidden_size", TFS_HF_DEF_INT, 3584 },
	{ "num_position_embeddings", TFS_HF_DEF_INT, 2304 },
	{ "initializer_range", TFS_HF_DEF_REAL, 0.02 },
	{ NULL, 0, 0 },
};

#define BLK "visual.blocks.{bid}."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for the tower's names */
static const tfs_hf_mm_name q3_names[] = {
	{ "visual.patch_embed.proj", "v.patch_embd" },
	{ "visual.pos_embed", "v.position_embd" },
	{ BLK "norm1", "v.blk.{bid}.ln1" },
	{ BLK "norm2", "v.blk.{bid}.ln2" },
	{ BLK "attn.qkv", "v.blk.{bid}.attn_qkv" },
	{ BLK "attn.proj", "v.blk.{bid}.attn_out" },
	{ BLK "mlp.linear_fc1", "v.blk.{bid}.ffn_up" },
	{ BLK "mlp.linear_fc2", "v.blk.{bid}.ffn_down" },
};

/* Qwen3VLVisionModel.filter_tensors: model.visual. as visual., the tower's tensors only */
static bool q3_filter(char *out, size_t cap, const char *name)
{
	if (!strncmp(name, "lm_head.", 8) || !strncmp(name, "mtp.", 4))
		return false;
	if (!strncmp(name, "model.visual.", 13))
		name += 6;
	if (strncmp(name, "visual.", 7) != 0)
		return false;
	snprintf(out, cap, "%s", name);
	return true;
}

/* Qwen3VLVisionModel.__init__'s changes to hparams_vision; ds: deepstack_visual_indexes when
 * absent (the vision config class's, or the .get() default []) */
static int prepare(tfs_hf_mm *mm, json_t *ds, tfs_error *err)
{
	json_t *v = mm->vision;
	int bad = !ds || (!json_object_get(v, "deepstack_visual_indexes") &&
			  json_object_set(v, "deepstack_visual_indexes", ds));
	json_decref(ds);
	if (!bad && !json_object_get(v, "image_size")) {
		json_t *np = json_object_get(v, "num_position_embeddings");
		json_t *ps = json_object_get(v, "patch_size");
		json_t *np_def = json_integer(2304), *ps_def = json_integer(16);   /* .get()'s */
		if (!np)
			np = np_def;
		if (!ps)
			ps = ps_def;
		bool ok = json_is_number(np) && json_is_number(ps) && json_number_value(np) >= 0;
		double size = ok ? pow(json_number_value(np), 0.5) * json_number_value(ps) : 0;
		json_decref(np_def);
		json_decref(ps_def);
		if (!ok)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's "
					     "num_position_embeddings and patch_size cannot give the "
					     "image size", mm->where);
		bad = json_object_set_new(v, "image_size", json_integer((json_int_t)size));
	}
	static const char *const from[][2] = { { "num_attention_heads", "num_heads" },
					       { "num_hidden_layers", "depth" } };
	for (size_t i = 0; !bad && i < 2; i++) {
		json_t *x = json_object_get(v, from[i][1]);
		bad = json_object_set_new(v, from[i][0], x ? json_deep_copy(x) : json_null());
	}
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where) : 0;
}

static int q3_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	return prepare(mm, json_pack("[iii]", 8, 16, 24), err);   /* Qwen3VLVisionConfig's */
}

static int q35_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	return prepare(mm, json_array(), err);
}

/* One part, the source tensor unchanged, whose GGUF name the caller writes into p->name. */
static void whole(tfs_hf_mm_part *p, const tfs_tensor *t)
{
	memset(p, 0, sizeof *p);
	p->gguf = true;
	p->n_dims = t->n_dims;
	memcpy(p->ne, t->ne, sizeof p->ne);
}

/* The deepstack merger tensor name (visual.deepstack_merger_list.K.REST) as the converter
 * names it: v.deepstack.B.{norm,fc1,fc2}.SUFFIX, B = deepstack_visual_indexes[K]. */
static int deepstack(tfs_hf_mm_part *p, const char *name, const tfs_tensor *t,
		     const tfs_hf_mm *mm, tfs_error *err)
{
	static const char *const kinds[][2] = { { "norm.", "norm" }, { "linear_fc1.", "fc1" },
						{ "linear_fc2.", "fc2" } };
	const char *k = name + strlen("visual.deepstack_merger_list.");
	char *end;
	long i = strtol(k, &end, 10);
	json_t *ds = json_object_get(mm->vision, "deepstack_visual_indexes");
	json_t *b = end != k && *end == '.' && i >= 0 ? json_array_get(ds, (size_t)i) : NULL;
	json_t *nl = json_object_get(mm->vision, "num_hidden_layers");
	if (!json_is_integer(b) || json_integer_value(b) < 0 ||
	    json_integer_value(b) >= json_integer_value(nl))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: '%s' has no deepstack layer among "
				     "the tower's blocks (deepstack_visual_indexes)", mm->where, name);
	for (size_t j = 0; j < 3; j++)
		if (!strncmp(end + 1, kinds[j][0], strlen(kinds[j][0]))) {
			whole(p, t);
			snprintf(p->name, sizeof p->name, "v.deepstack.%lld.%s.%s",
				 (long long)json_integer_value(b), kinds[j][1],
				 end + 1 + strlen(kinds[j][0]));
			return 0;
		}
	return tfs_error_set(err, TFS_E_FORMAT, "%s: unexpected deepstack tensor '%s'", mm->where,
			     name);
}

/* modify_tensors: the deepstack and merger tensors renamed, the Conv3D patch embedding split
 * in two, its bias renamed */
static int q3_split(tfs_hf_mm_part *parts, size_t *n, const char *name, const tfs_tensor *t,
		    const tfs_hf_mm *mm, tfs_error *err)
{
	*n = 0;
	if (!strncmp(name, "visual.deepstack_merger_list.", 29)) {
		*n = 1;
		return deepstack(parts, name, t, mm, err);
	}
	if (!strncmp(name, "visual.merger.", 14)) {
		const char *s = name + 14;
		whole(parts, t);
		if (!strncmp(s, "linear_fc1.", 11) || !strncmp(s, "linear_fc2.", 11))
			snprintf(parts->name, sizeof parts->name, "mm.%d.%s", s[9] == '1' ? 0 : 2,
				 s + 11);
		else if (!strncmp(s, "norm.", 5))
			snprintf(parts->name, sizeof parts->name, "v.post_ln.%s", s + 5);
		else
			return tfs_error_set(err, TFS_E_FORMAT, "%s: unexpected merger tensor '%s'",
					     mm->where, name);
		*n = 1;
		return 0;
	}
	if (!strcmp(name, "visual.patch_embed.proj.bias")) {
		whole(parts, t);
		snprintf(parts->name, sizeof parts->name, "v.patch_embd.bias");
		*n = 1;
		return 0;
	}
	if (strcmp(name, "visual.patch_embed.proj.weight"))
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
		p->gather = (tfs_hf_gather){ TFS_HF_GATHER_SPLIT, (uint64_t)k, 2, 0,
					     (uint64_t)(t->ne[0] * t->ne[1]), { 0, 0, 0 } };
	}
	*n = 2;
	return 0;
}

static int q3_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	json_t *ms = json_object_get(mm->vision, "spatial_merge_size");
	json_t *tc = json_object_get(mm->file, "text_config");
	json_t *eps = json_object_get(tc, "rms_norm_eps");
	json_t *nl = json_object_get(mm->vision, "num_hidden_layers");
	json_t *ds = json_object_get(mm->vision, "deepstack_visual_indexes");
	if ((ms && !json_is_null(ms) && (!json_is_integer(ms) || json_integer_value(ms) < 0)) ||
	    (eps && !json_is_number(eps)) || !json_is_integer(nl) || json_integer_value(nl) < 0 ||
	    json_integer_value(nl) > 65536 || !json_is_array(ds))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's spatial_merge_size, "
				     "depth or deepstack_visual_indexes, or text_config's "
				     "rms_norm_eps, is not what the converter reads", mm->where);
	size_t n = (size_t)json_integer_value(nl);
	bool *is = calloc(n ? n : 1, sizeof *is);
	if (!is)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where);
	int rc = 0;
	for (size_t i = 0; !rc && i < json_array_size(ds); i++) {   /* Python's list index */
		json_t *x = json_array_get(ds, i);
		json_int_t k = json_is_integer(x) ? json_integer_value(x) : (json_int_t)n;
		if (k < 0)
			k += (json_int_t)n;
		if (k < 0 || k >= (json_int_t)n)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: deepstack_visual_indexes[%zu] is "
					   "not a block of the tower", mm->where, i);
		else
			is[k] = true;
	}
	if (!rc && !(rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "qwen3vl_merger", err)) &&
	    !(rc = tfs_hf_kvs_add_bool(l, "clip.use_gelu", true, err)) && ms && !json_is_null(ms))
		rc = tfs_hf_kvs_add_u32(l, "clip.vision.spatial_merge_size",
					(uint32_t)json_integer_value(ms), err);
	if (!rc)
		rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
					eps ? (float)json_number_value(eps) : 1e-6f, err);
	if (!rc && n)
		rc = tfs_hf_kvs_add_arr_bool(l, "clip.vision.is_deepstack_layers", is, n, err);
	free(is);
	return rc;
}

/* Qwen3VLMoeVisionConfig is Qwen3VLVisionConfig; the converter's class is the same */
static const char *const q3_classes[] = { "Qwen3VLForConditionalGeneration",
					  "Qwen3VLMoeForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_qwen3vl = {
	.classes = q3_classes,
	.vision_defaults = vision_defaults,
	.names = q3_names,
	.n_names = sizeof q3_names / sizeof q3_names[0],
	.filter = q3_filter,
	.prepare = q3_prepare,
	.split = q3_split,
	.keys = q3_keys,
};

static const char *const q35_classes[] = { "Qwen3_5ForConditionalGeneration",
					   "Qwen3_5MoeForConditionalGeneration", NULL };

/* Qwen3.5's: config.json as written (no vision_defaults) */
const tfs_hf_mmproj_class tfs_hf_mmproj_qwen35 = {
	.classes = q35_classes,
	.names = q3_names,
	.n_names = sizeof q3_names / sizeof q3_names[0],
	.filter = q3_filter,
	.prepare = q35_prepare,
	.split = q3_split,
	.keys = q3_keys,
};
