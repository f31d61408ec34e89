/*
 * hf_mmproj_gemma4.c - Gemma4ForConditionalGeneration's projector (the converter's
 * Gemma4VisionAudioModel): Gemma 4's vision tower (model.vision_tower.*: a patch embedder
 * whose input projection is reordered to (n_embd, 3, p, p), a 2-D position table, the
 * encoder's layers renamed vision_model.model.layers.*, clipped linears' scalar bounds, the
 * optional standardization) and its projector into the text model
 * (model.embed_vision.embedding_projection); the audio tower when config.json has an
 * audio_config (E2B, E4B: model.audio_tower.*, a conformer renamed conformer.*: the
 * subsampling convolutions, the layers' feed-forward pairs, chunked attention with relative
 * positions, light convolution; model.embed_audio.embedding_projection).  transformers 5's
 * Gemma4VisionConfig and Gemma4AudioConfig defaults.  Both encoders make MmprojModel's block
 * count 128.  The audio attention's per_dim_scale is written as torch's softplus of it
 * (tfs_hf_softplus, hf_sleef.h), which torch 1.13 has for float32 only: an F16 checkpoint's
 * fails in the converter, and is refused here.
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <string.h>

/* transformers 5's Gemma4VisionConfig (Gemma4Config makes one of vision_config); its string
 * and dict fields (hidden_activation, rope_parameters) are not read by the converter */
static const tfs_hf_default gemma4_vision_defaults[] = {
	{ "hidden_size", TFS_HF_DEF_INT, 768 },
	{ "intermediate_size", TFS_HF_DEF_INT, 3072 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 16 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 12 },
	{ "num_key_value_heads", TFS_HF_DEF_INT, 12 },
	{ "head_dim", TFS_HF_DEF_INT, 64 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-6 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 131072 },
	{ "attention_bias", TFS_HF_DEF_BOOL, 0 },
	{ "attention_dropout", TFS_HF_DEF_REAL, 0.0 },
	{ "pooling_kernel_size", TFS_HF_DEF_INT, 3 },
	{ "patch_size", TFS_HF_DEF_INT, 16 },
	{ "position_embedding_size", TFS_HF_DEF_INT, 10240 },
	{ "use_clipped_linears", TFS_HF_DEF_BOOL, 0 },
	{ "standardize", TFS_HF_DEF_BOOL, 0 },
	{ "initializer_range", TFS_HF_DEF_REAL, 0.02 },
	{ NULL, 0, 0 },
};

/* transformers 5's Gemma4AudioConfig (the fields the converter reads, and its own:
 * input_feat_size and layer_norm_eps are no fields of it, read with .get() defaults) */
static const tfs_hf_default gemma4_audio_defaults[] = {
	{ "hidden_size", TFS_HF_DEF_INT, 1024 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 12 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 8 },
	{ "conv_kernel_size", TFS_HF_DEF_INT, 5 },
	{ "residual_weight", TFS_HF_DEF_REAL, 0.5 },
	{ "attention_chunk_size", TFS_HF_DEF_INT, 12 },
	{ "attention_context_left", TFS_HF_DEF_INT, 13 },
	{ "attention_context_right", TFS_HF_DEF_INT, 0 },
	{ "attention_logit_cap", TFS_HF_DEF_REAL, 50.0 },
	{ "attention_invalid_logits_value", TFS_HF_DEF_REAL, -1.0e9 },
	{ "use_clipped_linears", TFS_HF_DEF_BOOL, 1 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-6 },
	{ "gradient_clipping", TFS_HF_DEF_REAL, 1e10 },
	{ "output_proj_dims", TFS_HF_DEF_INT, 1536 },
	{ "initializer_range", TFS_HF_DEF_REAL, 0.02 },
	{ NULL, 0, 0 },
};

#define VT "model.vision_tower."
#define LAYER "vision_model.model.layers.{bid}."
#define AT "conformer."
#define AL "conformer.layers.{bid}."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for these names (after the renames) */
static const tfs_hf_mm_name gemma4_names[] = {
	{ VT "patch_embedder.input_proj", "v.patch_embd" },
	{ VT "patch_embedder.position_embedding_table", "v.position_embd" },
	{ LAYER "self_attn.q_proj", "v.blk.{bid}.attn_q" },
	{ LAYER "self_attn.q_proj.linear", "v.blk.{bid}.attn_q" },
	{ LAYER "self_attn.q_norm", "v.blk.{bid}.attn_q_norm" },
	{ LAYER "self_attn.k_proj", "v.blk.{bid}.attn_k" },
	{ LAYER "self_attn.k_proj.linear", "v.blk.{bid}.attn_k" },
	{ LAYER "self_attn.k_norm", "v.blk.{bid}.attn_k_norm" },
	{ LAYER "self_attn.v_proj", "v.blk.{bid}.attn_v" },
	{ LAYER "self_attn.v_proj.linear", "v.blk.{bid}.attn_v" },
	{ LAYER "input_layernorm", "v.blk.{bid}.ln1" },
	{ LAYER "self_attn.o_proj", "v.blk.{bid}.attn_out" },
	{ LAYER "self_attn.o_proj.linear", "v.blk.{bid}.attn_out" },
	{ LAYER "post_attention_layernorm", "v.blk.{bid}.attn_post_norm" },
	{ LAYER "pre_feedforward_layernorm", "v.blk.{bid}.ln2" },
	{ LAYER "mlp.up_proj", "v.blk.{bid}.ffn_up" },
	{ LAYER "mlp.gate_proj", "v.blk.{bid}.ffn_gate" },
	{ LAYER "mlp.down_proj", "v.blk.{bid}.ffn_down" },
	{ LAYER "post_feedforward_layernorm", "v.blk.{bid}.ffn_post_norm" },
	{ LAYER "layer_scalar", "v.blk.{bid}.out_scale" },
	{ VT "std_bias", "v.std_bias" },
	{ VT "std_scale", "v.std_scale" },
	{ "model.embed_vision.embedding_projection", "mm.input_projection" },
	/* the audio tower (after modify_tensors' renames) */
	{ AT "subsample_conv_projection.layer{bid}.conv", "a.conv1d.{bid}" },
	{ AT "subsample_conv_projection.layer{bid}.norm", "a.conv1d.{bid}.norm" },
	{ AT "subsample_conv_projection.input_proj_linear", "a.input_projection" },
	{ AL "feed_forward1.pre_layer_norm", "a.blk.{bid}.ffn_norm" },
	{ AL "feed_forward1.ffw_layer_1", "a.blk.{bid}.ffn_up" },
	{ AL "feed_forward1.ffw_layer_2", "a.blk.{bid}.ffn_down" },
	{ AL "feed_forward1.post_layer_norm", "a.blk.{bid}.ffn_post_norm" },
	{ AL "feed_forward2.pre_layer_norm", "a.blk.{bid}.ffn_norm_1" },
	{ AL "feed_forward2.ffw_layer_1", "a.blk.{bid}.ffn_up_1" },
	{ AL "feed_forward2.ffw_layer_2", "a.blk.{bid}.ffn_down_1" },
	{ AL "feed_forward2.post_layer_norm", "a.blk.{bid}.ffn_post_norm_1" },
	{ AL "norm_pre_attn", "a.blk.{bid}.attn_pre_norm" },
	{ AL "self_attn.q_proj", "a.blk.{bid}.attn_q" },
	{ AL "self_attn.k_proj", "a.blk.{bid}.attn_k" },
	{ AL "self_attn.v_proj", "a.blk.{bid}.attn_v" },
	{ AL "self_attn.post", "a.blk.{bid}.attn_out" },
	{ AL "self_attn.relative_k_proj", "a.blk.{bid}.attn_k_rel" },
	{ AL "self_attn.per_dim_scale", "a.blk.{bid}.per_dim_scale" },
	{ AL "attention.attn.per_dim_scale", "a.blk.{bid}.per_dim_scale" },
	{ AL "attention.attn.per_dim_key_scale", "a.blk.{bid}.per_dim_k_scale" },
	{ AL "norm_post_attn", "a.blk.{bid}.attn_post_norm" },
	{ AL "lconv1d.pre_layer_norm", "a.blk.{bid}.conv_norm" },
	{ AL "lconv1d.linear_start", "a.blk.{bid}.conv_pw1" },
	{ AL "lconv1d.depthwise_conv1d", "a.blk.{bid}.conv_dw" },
	{ AL "lconv1d.conv_norm", "a.blk.{bid}.norm_conv" },
	{ AL "lconv1d.linear_end", "a.blk.{bid}.conv_pw2" },
	{ AL "norm_out", "a.blk.{bid}.ln2" },
	{ AT "output_proj", "a.pre_encode.out" },
	{ "model.embed_audio.embedding_projection", "mm.a.input_projection" },
};

/* map_tensor_name's try_suffixes after ".weight" and ".bias": the clipped linears' bounds */
static const char *const gemma4_suffixes[] = { ".input_max", ".input_min", ".output_max",
					       ".output_min", NULL };

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

static bool is_audio(const char *name)
{
	return strstr(name, "audio_tower") || strstr(name, "embed_audio");
}

/* MmprojModel.filter_tensors (the class has none of its own): every tensor but the text
 * model's, "language_model." ones already left out */
static bool gemma4_filter(char *out, size_t cap, const char *name)
{
	return (size_t)snprintf(out, cap, "%s", name) < cap;
}

/* modify_tensors' renames (the audio tower's per_dim_scale tensors gain ".weight" too) */
static void gemma4_rename(char *out, size_t cap, const char *name)
{
	char tmp[512];
	if (is_audio(name)) {
		tfs_hf_replace(tmp, sizeof tmp, name, "model.audio_tower.", "conformer.");
		tfs_hf_replace(out, cap, tmp, ".linear.", ".");
		if (ends_with(out, "per_dim_key_scale") || ends_with(out, "per_dim_scale")) {
			size_t n = strlen(out);
			snprintf(out + n, cap - n, ".weight");
		}
		return;
	}
	tfs_hf_replace(tmp, sizeof tmp, name, "model.vision_tower.encoder.", "vision_model.model.");
	tfs_hf_replace(out, cap, tmp, ".linear.weight", ".weight");
	if (ends_with(out, "layer_scalar") || ends_with(out, "position_embedding_table")) {
		size_t n = strlen(out);
		snprintf(out + n, cap - n, ".weight");
	}
}

/* modify_tensors of an audio tensor o (renamed, its shape t's, a scalar unsqueezed):
 * per_dim_scale as softplus(x), which torch 1.13 has for float32 only (BF16 is widened
 * before; F16 fails the converter); the depthwise convolution (C, 1, K) as (C, K). */
static int audio_split(tfs_hf_mm_part *o, const char *name, const tfs_tensor *t,
		       const tfs_hf_mm *mm, tfs_error *err)
{
	if (ends_with(o->name, "per_dim_key_scale.weight") ||
	    ends_with(o->name, "per_dim_scale.weight")) {
		if (t->dtype == TFS_DT_F16)
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: '%s' is F16, whose "
					     "softplus the converter cannot take (torch 1.13 has "
					     "none for Half)", mm->where, name);
		o->softplus = true;
		return 0;
	}
	if (!strstr(o->name, "lconv1d.depthwise_conv1d") || !ends_with(o->name, ".weight"))
		return 0;
	if (t->n_dims != 3 || t->ne[1] != 1)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: '%s' is not (channels, 1, kernel) "
				     "(the converter asserts it)", mm->where, name);
	o->n_dims = 2;
	o->ne[1] = t->ne[2];
	o->ne[2] = 1;
	return 0;
}

/* modify_tensors: each tensor renamed, as one part; a scalar (the bounds) as one value; the
 * patch embedder's input projection (n_embd, p x p x 3) reshaped to (n_embd, p, p, 3) and
 * permuted to (n_embd, 3, p, p): each row's columns (y, x, c) become (c, y, x), a gather of
 * p x p groups of 3 single values. */
static int gemma4_split(tfs_hf_mm_part *parts, size_t *n, const char *name, const tfs_tensor *t,
			const tfs_hf_mm *mm, tfs_error *err)
{
	tfs_hf_mm_part *o = &parts[0];
	memset(o, 0, sizeof *o);
	gemma4_rename(o->name, sizeof o->name, name);
	o->n_dims = t->n_dims ? t->n_dims : 1;   /* unsqueeze(0) */
	memcpy(o->ne, t->ne, sizeof o->ne);
	if (!t->n_dims)
		o->ne[0] = 1;
	*n = 1;
	if (is_audio(name))
		return audio_split(o, name, t, mm, err);
	if (!ends_with(o->name, "patch_embedder.input_proj.weight"))
		return 0;
	int64_t k = t->n_dims == 2 ? t->ne[0] : 0, p = 0;
	while ((p + 1) * (p + 1) <= k / 3)   /* int((k // 3) ** 0.5) */
		p++;
	if (p == 0 || 3 * p * p != k)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: '%s' is not (n_embd, 3 x p x p) (the "
				     "converter's reshape to patches fails)", mm->where, name);
	o->gather = (tfs_hf_gather){ .kind = TFS_HF_GATHER_COLS, .groups = (uint64_t)(p * p),
				     .per = 3, .unit = 1 };
	o->n_dims = 4;
	int64_t ne[4] = { p, p, 3, t->ne[1] };
	memcpy(o->ne, ne, sizeof ne);
	return 0;
}

/* tensor_force_quant: the audio tower's convolutions and the position table F32 */
static int gemma4_force(const char *name, const char *gguf, uint32_t ftype)
{
	(void)gguf, (void)ftype;
	if (is_audio(name) && (strstr(name, ".conv") || (strstr(name, "_conv") &&
							 strstr(name, ".weight"))))
		return TFS_DT_F32;
	if (strstr(name, "position_embedding_table"))
		return TFS_DT_F32;
	return -1;
}

/* __init__: a vision config is asserted, its image_size set to 224 (unused); the audio
 * config's feat_in (input_feat_size, else 128) and intermediate_size (4 x hidden_size) */
static int gemma4_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	if (!json_is_object(json_object_get(mm->file, "vision_config")))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no vision_config (the converter's "
				     "Gemma 4 projector needs one)", mm->where);
	if (json_object_set_new(mm->vision, "image_size", json_integer(224)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where);
	if (!mm->audio)
		return 0;
	json_t *feat = json_object_get(mm->audio, "input_feat_size");
	json_t *h = json_object_get(mm->audio, "hidden_size");
	if (!json_is_integer(h) || json_integer_value(h) < 0 ||
	    json_integer_value(h) > UINT32_MAX / 4)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: audio_config's \"hidden_size\" is not "
				     "a size", mm->where);
	if (json_object_set_new(mm->audio, "feat_in", feat ? json_incref(feat) : json_integer(128)) ||
	    json_object_set_new(mm->audio, "intermediate_size",
				json_integer(4 * json_integer_value(h))))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where);
	return 0;
}

static int gemma4_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	json_t *eps = json_object_get(mm->vision, "layer_norm_eps");
	int rc;
	if ((rc = tfs_hf_kvs_add_str(l, "clip.vision.projector_type", "gemma4v", err)))
		return rc;
	if (eps && !json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's \"layer_norm_eps\" is "
				     "not a number", mm->where);
	if ((rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				     eps ? (float)json_number_value(eps) : 1e-6f, err)) || !mm->audio)
		return rc;
	static const char *const k_feat[] = { "feat_in", NULL };
	eps = json_object_get(mm->audio, "layer_norm_eps");
	if ((rc = tfs_hf_kvs_add_str(l, "clip.audio.projector_type", "gemma4a", err)) ||
	    (rc = tfs_hf_mm_aparam(l, mm, "audio.num_mel_bins", k_feat, err)))
		return rc;
	if (eps && !json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: audio_config's \"layer_norm_eps\" is "
				     "not a number", mm->where);
	return tfs_hf_kvs_add_f32(l, "clip.audio.attention.layer_norm_epsilon",
				  eps ? (float)json_number_value(eps) : 1e-6f, err);
}

static const char *const gemma4_classes[] = { "Gemma4ForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_gemma4 = {
	.classes = gemma4_classes,
	.vision_defaults = gemma4_vision_defaults,
	.audio_defaults = gemma4_audio_defaults,
	.names = gemma4_names,
	.n_names = sizeof gemma4_names / sizeof gemma4_names[0],
	.block_count = 128,
	.suffixes = gemma4_suffixes,
	.filter = gemma4_filter,
	.force = gemma4_force,
	.keys = gemma4_keys,
	.prepare = gemma4_prepare,
	.split = gemma4_split,
};
