/*
 * hf_mmproj_pixtral.c - Mistral3ForConditionalGeneration's projector (Mistral Small 3.1/3.2:
 * the converter's LlavaVisionModel, conversion/llava.py, for a vision_config of model_type
 * pixtral): the Pixtral tower (vision_tower.*: RMS norms, a gated MLP, 2-D rope) and the
 * projector (multi_modal_projector.*: its norm as mm.input_norm, the patch merger as
 * mm.patch_merger, linear_1/linear_2 as mm.1/mm.2).
 * What the class does:
 *  - hparams_vision: PixtralVisionConfig's defaults; layer_norm_eps 1e-5 when absent (it is
 *    hard-coded in transformers' modeling_pixtral.py);
 *  - the [IMG_BREAK] token's id looked up in tokenizer_config.json's added_tokens_decoder,
 *    then tokenizer.json's added_tokens (the converter fails without it); its embedding row
 *    is never written: MmprojModel skips every language_model.* tensor first;
 *  - the tower's q_proj and k_proj rows permuted as LlamaModel.permute does (the tower's head
 *    count), on read;
 *  - only tensors under vision_tower., multi_modal_projector. (and the class's other
 *    prefixes) kept: a checkpoint saved as model.vision_tower.* has none, as for the converter;
 *  - keys: projector type pixtral, the norm epsilon, use_silu or use_gelu (hidden_act; any
 *    other refused as the converter does), config.json's spatial_merge_size (Mistral3Config's
 *    2 when it leaves it out).
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* transformers 4.57's PixtralVisionConfig */
static const tfs_hf_default vision_defaults[] = {
	{ "hidden_size", TFS_HF_DEF_INT, 1024 },
	{ "intermediate_size", TFS_HF_DEF_INT, 4096 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 24 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 16 },
	{ "num_channels", TFS_HF_DEF_INT, 3 },
	{ "image_size", TFS_HF_DEF_INT, 1024 },
	{ "patch_size", TFS_HF_DEF_INT, 16 },
	{ "attention_dropout", TFS_HF_DEF_REAL, 0.0 },
	{ "rope_theta", TFS_HF_DEF_REAL, 10000.0 },
	{ "initializer_range", TFS_HF_DEF_REAL, 0.02 },
	{ NULL, 0, 0 },
};

#define BLK "vision_tower.transformer.layers.{bid}."

/* gguf-py's TensorNameMap entries of MODEL_ARCH.MMPROJ for pixtral-hf's names */
static const tfs_hf_mm_name px_names[] = {
	{ "vision_tower.patch_conv", "v.patch_embd" },
	{ "vision_tower.ln_pre", "v.pre_ln" },
	{ BLK "attention.q_proj", "v.blk.{bid}.attn_q" },
	{ BLK "attention.k_proj", "v.blk.{bid}.attn_k" },
	{ BLK "attention.v_proj", "v.blk.{bid}.attn_v" },
	{ BLK "attention.o_proj", "v.blk.{bid}.attn_out" },
	{ BLK "attention_norm", "v.blk.{bid}.ln1" },
	{ BLK "ffn_norm", "v.blk.{bid}.ln2" },
	{ BLK "feed_forward.gate_proj", "v.blk.{bid}.ffn_gate" },
	{ BLK "feed_forward.up_proj", "v.blk.{bid}.ffn_up" },
	{ BLK "feed_forward.down_proj", "v.blk.{bid}.ffn_down" },
	{ "multi_modal_projector.linear_{bid}", "mm.{bid}" },
	{ "multi_modal_projector.norm", "mm.input_norm" },
	{ "multi_modal_projector.patch_merger.merging_layer", "mm.patch_merger" },
};

/* LlavaVisionModel.modify_tensors: the tensors of its prefixes, the others skipped */
static bool px_filter(char *out, size_t cap, const char *name)
{
	static const char *const prefixes[] = { "multi_modal_projector.", "vision_tower.",
		"vision_encoder.", "vision_language_adapter.", "patch_merger.",
		"pre_mm_projector_norm" };
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) {
			snprintf(out, cap, "%s", name);
			return true;
		}
	return false;
}

/* Whether JSON file name (of the repo) has an added token "[IMG_BREAK]": in obj's
 * added_tokens_decoder (an object of id -> token) or added_tokens (a list of tokens).
 * TFS_E_NOTFOUND for a file that is not there, as the converter's open() fails. */
static int has_break(bool *found, const tfs_hf_mm *mm, const char *name, tfs_error *err)
{
	uint8_t *text = NULL;
	uint64_t len = 0;
	*found = false;
	int rc = mm->files->read(mm->files->ctx, name, &text, &len, err);
	if (rc)
		return rc;
	json_error_t je;
	json_t *j = json_loadb((const char *)text, (size_t)len, JSON_DECODE_ANY, &je);
	free(text);
	if (!json_is_object(j)) {
		json_decref(j);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s is not a JSON object", mm->where,
				     name);
	}
	const char *key;
	json_t *v, *dec = json_object_get(j, "added_tokens_decoder");
	json_object_foreach(dec, key, v) {
		const char *s = json_string_value(json_object_get(v, "content"));
		*found |= s && !strcmp(s, "[IMG_BREAK]");
	}
	size_t i;
	json_array_foreach(json_object_get(j, "added_tokens"), i, v) {
		const char *s = json_string_value(json_object_get(v, "content"));
		*found |= s && !strcmp(s, "[IMG_BREAK]");
	}
	json_decref(j);
	return 0;
}

/* LlavaVisionModel.__init__: layer_norm_eps, and get_token_id("[IMG_BREAK]") (its
 * ValueError, or a FileNotFoundError, without it) */
static int px_prepare(tfs_hf_mm *mm, tfs_error *err)
{
	json_t *v = mm->vision;
	json_t *mtv = json_object_get(v, "model_type");   /* Mistral3Config's pixtral if none */
	const char *mt = mtv ? json_string_value(mtv) : "pixtral";
	if (!mt || strcmp(mt, "pixtral"))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: vision_config's model_type is "
				     "'%s'; the converter's LlavaVisionModel knows pixtral's only",
				     mm->where, mt ? mt : "(none)");
	if (!json_object_get(v, "layer_norm_eps") &&
	    json_object_set_new(v, "layer_norm_eps", json_real(1e-5)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->where);
	bool found = false;
	int rc = has_break(&found, mm, "tokenizer_config.json", err);
	if (!rc && !found)
		rc = has_break(&found, mm, "tokenizer.json", err);
	if (rc == TFS_E_NOTFOUND || (!rc && !found))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no [IMG_BREAK] token in "
				     "tokenizer_config.json's added_tokens_decoder or tokenizer.json's "
				     "added_tokens (the converter needs its id)", mm->where);
	return rc;
}

/* modify_tensors: the tower's q_proj and k_proj (weight and bias) permuted */
static int px_split(tfs_hf_mm_part *parts, size_t *n, const char *name, const tfs_tensor *t,
		    const tfs_hf_mm *mm, tfs_error *err)
{
	static const char *const ends[] = { "q_proj.weight", "q_proj.bias", "k_proj.weight",
					    "k_proj.bias" };
	size_t len = strlen(name);
	bool perm = false;
	*n = 0;
	for (size_t i = 0; i < 4; i++)
		perm |= len >= strlen(ends[i]) && !strcmp(name + len - strlen(ends[i]), ends[i]);
	if (!perm)
		return 0;
	json_t *nh = json_object_get(mm->vision, "num_attention_heads");
	json_int_t heads = json_integer_value(nh);
	int64_t rows = t->n_dims ? t->ne[t->n_dims - 1] : 0;
	if (!json_is_integer(nh) || heads <= 0 || heads > 65536 || rows % (2 * heads))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %lld rows cannot be "
				     "permuted in vision_config's num_attention_heads heads of pairs",
				     mm->where, name, (long long)rows);
	tfs_hf_mm_part *p = &parts[0];
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s", name);
	p->n_dims = t->n_dims;
	memcpy(p->ne, t->ne, sizeof p->ne);
	p->perm_heads = (uint32_t)heads;
	*n = 1;
	return 0;
}

static int px_keys(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err)
{
	json_t *eps = json_object_get(mm->vision, "layer_norm_eps");
	json_t *av = json_object_get(mm->vision, "hidden_act");
	const char *act = av ? json_string_value(av) : "gelu";   /* PixtralVisionConfig's */
	json_t *ms = json_object_get(mm->file, "spatial_merge_size");
	bool silu = act && !strcmp(act, "silu");
	if (!act)
		act = "(not a string)";
	if (!json_is_number(eps))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: vision_config's layer_norm_eps is not "
				     "a number", mm->where);
	if (!silu && strcmp(act, "gelu"))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: vision_config's hidden_act '%s' "
				     "is neither silu nor gelu (the converter's 'Unsupported "
				     "hidden_act')", mm->where, act);
	if (ms && (!json_is_integer(ms) || json_integer_value(ms) < 0 ||
		   json_integer_value(ms) > UINT32_MAX))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: spatial_merge_size is not an unsigned "
				     "32-bit integer", mm->where);
	int rc;
	if ((rc = tfs_hf_kvs_add_str(l, "clip.projector_type", "pixtral", err)) ||
	    (rc = tfs_hf_kvs_add_f32(l, "clip.vision.attention.layer_norm_epsilon",
				     (float)json_number_value(eps), err)) ||
	    (rc = tfs_hf_kvs_add_bool(l, silu ? "clip.use_silu" : "clip.use_gelu", true, err)))
		return rc;
	/* Mistral3Config's spatial_merge_size is always in the loaded config (2 by default) */
	return tfs_hf_kvs_add_u32(l, "clip.vision.spatial_merge_size",
				  ms ? (uint32_t)json_integer_value(ms) : 2, err);
}

static const char *const px_classes[] = { "Mistral3ForConditionalGeneration", NULL };

const tfs_hf_mmproj_class tfs_hf_mmproj_pixtral = {
	.classes = px_classes,
	.vision_defaults = vision_defaults,
	.names = px_names,
	.n_names = sizeof px_names / sizeof px_names[0],
	.filter = px_filter,
	.prepare = px_prepare,
	.split = px_split,
	.keys = px_keys,
};
