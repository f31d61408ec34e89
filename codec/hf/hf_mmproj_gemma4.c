/*
 * hf_mmproj_gemma4.c - Gemma4ForConditionalGeneration's projector (the converter's
 * Gemma4VisionAudioModel): Gemma 4's vision tower (model.vision_tower.*: a patch embedder
 * whose input projection is reordered to (n_embd, 3, p, p), a 2-D position table, the
 * encoder's layers renamed vision_model.model.layers.*, clipped linears' scalar bounds, the
 * optional standardization) and its projector into the text model
 * (model.embed_vision.embedding_projection); transformers 5's Gemma4VisionConfig defaults.
 * Both encoders make MmprojModel's block count 128; the audio tower (audio_config) is not
 * in the view yet: such a repo is refused.  (Its per_dim_scale tensors are torch's softplus,
 * by SLEEF over runs of 16 values and glibc's libm for the rest: docs/hf-view.md.)
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

#define VT "model.vision_tower."
#define LAYER "vision_model.model.layers.{bid}."

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

/* s with every `from` replaced by `to` (str.replace), into out (cap bytes) */
static void replace_all(char *out, size_t cap, const char *s, const char *from, const char *to)
{
	size_t k = 0, nf = strlen(from), nt = strlen(to);
	while (*s && k + 1 < cap) {
		if (!strncmp(s, from, nf) && k + nt < cap) {
			memcpy(out + k, to, nt);
			k += nt, s += nf;
			continue;
		}
		out[k++] = *s++;
	}
	out[k] = 0;
}

/* modify_tensors' renames of the vision tower's names (the audio tower's are left) */
static void gemma4_rename(char *out, size_t cap, const char *name)
{
	char tmp[512];
	if (is_audio(name)) {
		snprintf(out, cap, "%s", name);
		return;
	}
	replace_all(tmp, sizeof tmp, name, "model.vision_tower.encoder.", "vision_model.model.");
	replace_all(out, cap, tmp, ".linear.weight", ".weight");
	if (ends_with(out, "layer_scalar") || ends_with(out, "position_embedding_table")) {
		size_t n = strlen(out);
		snprintf(out + n, cap - n, ".weight");
	}
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
	if (is_audio(name) || !ends_with(o->name, "patch_embedder.input_proj.weight"))
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

/* __init__: a vision config is asserted, its image_size set to 224 (unused) */
static int gemma4_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	json_t *ac = json_object_get(mm->file, "audio_config");
	if (!json_is_object(json_object_get(mm->file, "vision_config")))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no vision_config (the converter's "
				     "Gemma 4 projector needs one)", mm->where);
	if (json_is_object(ac))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: Gemma 4's audio tower "
				     "(audio_config) is not in the GGUF view yet", mm->where);
	if (json_object_set_new(mm->vision, "image_size", json_integer(224)))
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
	return tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				  eps ? (float)json_number_value(eps) : 1e-6f, err);
}

static const char *const gemma4_classes[] = { "Gemma4ForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_gemma4 = {
	.classes = gemma4_classes,
	.vision_defaults = gemma4_vision_defaults,
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
