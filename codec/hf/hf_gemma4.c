/*
 * hf_gemma4.c - Gemma 4's text model, as llama.cpp's converter (de3ff81, conversion/gemma.py
 * Gemma4Model, a Gemma3Model) writes it: Gemma4ForCausalLM and the text model of
 * Gemma4ForConditionalGeneration (its vision and audio towers left out as TextModel leaves
 * them).
 *
 *  1. the row: tensor names (per-layer embeddings, layer_output_scale from the layer_scalar
 *     buffer and the experts, which the converter names ".weight", the router's scales
 *     named "*.scale"), no norm + 1 (Gemma4Model.norm_shift is
 *     0), token_embd cut to the tokenizer as Gemma 3;
 *  2. the keys, from config.json with transformers 5's Gemma4TextConfig defaults (below):
 *     Gemma3Model.set_gguf_parameters with its .get() defaults, then Gemma4Model's: shared KV layers, per-layer input size, the sliding window pattern,
 *     full and sliding head sizes, per-layer feed-forward and KV head counts, rope dims;
 *  3. rope_freqs.weight (generate_extra_tensors): the full layers' proportional rope as
 *     frequency factors, 1 for the rotated pairs and 1e30 for the others;
 *  4. the tokenizer (Gemma4Model.set_vocab): gguf-py's LlamaHfVocab over tokenizer.json,
 *     "gemma4", every token scored -1000, typed by transformers 5's all_special_tokens.
 * The mixture of experts (enable_moe_block, 26B-A4B) keeps the checkpoint's stacked experts.
 * Layers differ in head size and KV heads, so their attention shapes are not checked against
 * config.json here (TFS_HF_D_LAYER); llama.cpp checks them on load.
 */
#include "hf_arch.h"
#include "hf_vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum { H = TFS_HF_D_HIDDEN, FF = TFS_HF_D_FF, VOC = TFS_HF_D_VOCAB, L = TFS_HF_D_LAYER,
       NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

/* ==== the names ==== */

static const tfs_hf_name g4_globals[] = {
	{ "model.embed_tokens", "token_embd", VOC, H, XN, true },
	{ "model.norm", "output_norm", H, NO, XN, true },
	{ "lm_head", "output", VOC, H, XN, false },
	{ "model.embed_tokens_per_layer", "per_layer_token_embd", L, L, XN, false },
	{ "model.per_layer_model_projection", "per_layer_model_proj", L, H, XN, false },
	{ "model.per_layer_projection_norm", "per_layer_proj_norm", L, NO, XN, false },
};

/* k and v are absent on the layers that share another's KV, v on full layers with
 * attention_k_eq_v; the per-layer input tensors only with hidden_size_per_layer_input */
static const tfs_hf_name g4_blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, XN, true },
	{ "pre_feedforward_layernorm", "ffn_norm", H, NO, XN, true },
	{ "post_feedforward_layernorm", "post_ffw_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", L, H, XN, true },
	{ "self_attn.k_proj", "attn_k", L, H, XN, false },
	{ "self_attn.v_proj", "attn_v", L, H, XN, false },
	{ "self_attn.o_proj", "attn_output", H, L, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", L, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", L, NO, XN, false },
	{ "mlp.gate_proj", "ffn_gate", L, H, XN, true },
	{ "mlp.up_proj", "ffn_up", L, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, L, XN, true },
	{ "per_layer_input_gate", "inp_gate", L, H, XN, false },
	{ "per_layer_projection", "proj", H, L, XN, false },
	{ "post_per_layer_input_norm", "post_norm", H, NO, XN, false },
	{ "layer_scalar", "layer_output_scale", L, NO, XN, false },
	/* the mixture of experts beside the MLP (enable_moe_block): the router (its scale and
	 * per-expert scale renamed by Gemma4Model.modify_tensors), the experts as the
	 * checkpoint stacks them (gate and up fused), three more norms */
	{ "router.proj", "ffn_gate_inp", L, H, XN, false },
	{ "router.scale", "ffn_gate_inp.scale", H, NO, XN, false },
	{ "router.per_expert_scale", "ffn_down_exps.scale", L, NO, XN, false },
	{ "experts.gate_up_proj", "ffn_gate_up_exps", L, L, XN, false },
	{ "experts.down_proj", "ffn_down_exps", L, L, XN, false },
	{ "pre_feedforward_layernorm_2", "pre_ffw_norm_2", H, NO, XN, false },
	{ "post_feedforward_layernorm_1", "post_ffw_norm_1", H, NO, XN, false },
	{ "post_feedforward_layernorm_2", "post_ffw_norm_2", H, NO, XN, false },
};

/* ==== the config classes ==== */

/* transformers 4.57 (the release's pin) has no Gemma4Config, but a Gemma 4 repo converts only
 * with transformers 5 (4.57 cannot load its tokenizer_config.json), whose Gemma4TextConfig
 * fills these in (the structural sizes are not defaulted, as for every row) */
enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL, DB = TFS_HF_DEF_BOOL };

static const tfs_hf_default g4_text_defaults[] = {
	{ "vocab_size", DI, 262144 }, { "num_key_value_heads", DI, 4 }, { "head_dim", DI, 256 },
	{ "max_position_embeddings", DI, 131072 }, { "rms_norm_eps", DR, 1e-6 },
	{ "tie_word_embeddings", DB, 1 }, { "sliding_window", DI, 512 },
	{ "final_logit_softcapping", DN, 0 }, { "vocab_size_per_layer_input", DI, 262144 },
	{ "hidden_size_per_layer_input", DI, 256 }, { "attention_k_eq_v", DB, 0 },
	{ "num_kv_shared_layers", DI, 0 }, { "enable_moe_block", DB, 0 },
	{ "use_double_wide_mlp", DB, 0 }, { "num_experts", DN, 0 }, { "top_k_experts", DN, 0 },
	{ "moe_intermediate_size", DN, 0 }, { "global_head_dim", DI, 512 },
	{ "num_global_key_value_heads", DN, 0 }, { "use_bidirectional_attention", DN, 0 },
	{ NULL, 0, 0 },
};

static const tfs_hf_default g4_defaults[] = { { "tie_word_embeddings", DB, 1 }, { NULL, 0, 0 } };

/* Gemma4TextConfig.__post_init__: a bidirectional model's window, layer_types (every 6th
 * layer full, the last always full), the two layer types' rope. */
static int g4_post_init(json_t *c, const char *where, tfs_error *err)
{
	json_t *sw = json_object_get(c, "sliding_window"), *lt = json_object_get(c, "layer_types");
	json_t *n = json_object_get(c, "num_hidden_layers"), *rp;
	const char *bidi = json_string_value(json_object_get(c, "use_bidirectional_attention"));
	int bad = 0;
	if (bidi && !strcmp(bidi, "all") && json_is_integer(sw))
		bad |= json_object_set_new(c, "sliding_window",
					   json_integer(json_integer_value(sw) / 2 + 1));
	if ((!lt || json_is_null(lt)) && json_is_integer(n) && json_integer_value(n) > 0 &&
	    json_integer_value(n) <= 65536) {
		bad |= json_object_set_new(c, "layer_types", lt = json_array());
		for (json_int_t i = 0; lt && i < json_integer_value(n); i++)
			bad |= json_array_append_new(lt, json_string((i + 1) % 6 ? "sliding_attention"
									       : "full_attention"));
	}
	size_t nl = json_array_size(lt);
	const char *last = json_string_value(json_array_get(lt, nl - 1));
	if (nl && (!last || strcmp(last, "full_attention")))
		bad |= json_array_set_new(lt, nl - 1, json_string("full_attention"));
	rp = json_object_get(c, "rope_parameters");
	if (!rp || json_is_null(rp))
		bad |= json_object_set_new(c, "rope_parameters", json_pack(
			"{s:{s:s,s:f},s:{s:s,s:f,s:f}}", "sliding_attention", "rope_type", "default",
			"rope_theta", 10000.0, "full_attention", "rope_type", "proportional",
			"partial_rotary_factor", 0.25, "rope_theta", 1000000.0));
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where) : 0;
}

static const tfs_hf_config_class g4_classes[] = {
	{ "gemma4_text", g4_text_defaults, NULL, g4_post_init, false },
	{ "gemma4", g4_defaults, "gemma4_text", NULL, false },
	{ NULL, NULL, NULL, NULL, false },
};

/* ==== the keys ==== */

static void keyname(char *name, size_t cap, const hparams *h, const char *suffix)
{
	snprintf(name, cap, "%s.%s", h->arch->gguf, suffix);
}

/* hparams.get(key, dflt) as a u32 or f32 key (a key present with null fails as in Python). */
static int get_u32_or(tfs_hf_kvs *l, const hparams *h, const char *key, const char *suffix,
		      uint32_t dflt, tfs_error *err)
{
	char name[128];
	json_t *v = json_object_get(h->root, key);
	if (v)
		return tfs_hf_add_u32(l, h, suffix, v, key, err);
	keyname(name, sizeof name, h, suffix);
	return tfs_hf_kvs_add_u32(l, name, dflt, err);
}

static int get_f32_or(tfs_hf_kvs *l, const hparams *h, const json_t *obj, const char *key,
		      const char *suffix, float dflt, tfs_error *err)
{
	char name[128];
	json_t *v = json_object_get(obj, key);
	if (v)
		return tfs_hf_add_f32(l, h, suffix, v, key, err);
	keyname(name, sizeof name, h, suffix);
	return tfs_hf_kvs_add_f32(l, name, dflt, err);
}

/* An array key of n values (INT32, or BOOL when b). */
static int add_array(tfs_hf_kvs *l, const hparams *h, const char *suffix, const int32_t *v,
		     size_t n, bool b, tfs_error *err)
{
	char name[128];
	keyname(name, sizeof name, h, suffix);
	if (!b)
		return tfs_hf_kvs_add_arr_i32(l, name, v, n, err);
	uint8_t *d = malloc(12 + n);
	if (!d)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	uint32_t sub = TFS_GGUF_BOOL;
	uint64_t cnt = n;
	memcpy(d, &sub, 4);   /* little-endian hosts only, as the rest of tensorfs */
	memcpy(d + 4, &cnt, 8);
	for (size_t i = 0; i < n; i++)
		d[12 + i] = v[i] != 0;
	int rc = tfs_hf_kvs_add(l, name, TFS_GGUF_ARRAY, d, 12 + n, err);
	free(d);
	return rc;
}

/* hparams[key] as a non-negative integer (Python's KeyError, or a value struct.pack('I')
 * refuses, named). */
static int need_int(int64_t *out, const hparams *h, const char *key, tfs_error *err)
{
	json_t *v;
	int rc = tfs_hf_need(&v, h, key, err);
	if (rc)
		return rc;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a 32-bit unsigned "
				     "integer", h->where, key);
	*out = json_integer_value(v);
	return 0;
}

/* The layer types (hparams["layer_types"]): is_swa[i] for each; *n of them (malloc'd). */
static int layer_types(int32_t **is_swa, size_t *n, const hparams *h, tfs_error *err)
{
	json_t *lt;
	int rc = tfs_hf_need(&lt, h, "layer_types", err);
	if (rc)
		return rc;
	if (!json_is_array(lt))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: layer_types is not a list", h->where);
	*n = json_array_size(lt);
	if (!(*is_swa = calloc(*n ? *n : 1, sizeof **is_swa)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	for (size_t i = 0; i < *n; i++) {
		const char *t = json_string_value(json_array_get(lt, i));
		(*is_swa)[i] = t && strcmp(t, "sliding_attention") == 0;
	}
	return 0;
}

/* The full layers' value of key: global_key (global_head_dim, num_global_key_value_heads)
 * unless null, else the first per_layer_config entry of a full layer with key; NULL: none. */
static json_t *full_value(const hparams *h, const char *global_key, const char *key)
{
	json_t *v = json_object_get(h->root, global_key), *plc, *lc;
	if (v && !json_is_null(v))
		return v;
	plc = json_object_get(h->root, "per_layer_config");
	json_t *lt = json_object_get(h->root, "layer_types");
	const char *idx;
	json_object_foreach(plc, idx, lc) {
		char *end;
		long i = strtol(idx, &end, 10);
		const char *t = json_string_value(json_array_get(lt, (size_t)(i < 0 ? 0 : i)));
		if (*end || i < 0 || (size_t)i >= json_array_size(lt))
			continue;
		if (t && strcmp(t, "full_attention") == 0 && json_object_get(lc, key))
			return json_object_get(lc, key);
	}
	return NULL;
}

static int head_dim_full(int64_t *out, const hparams *h, tfs_error *err)
{
	json_t *v = full_value(h, "global_head_dim", "head_dim");
	if (!v || json_is_null(v))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no global_head_dim (nor a full layer's "
				     "head_dim in per_layer_config): the converter needs it for "
				     "Gemma 4", h->where);
	if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 65536)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: global_head_dim is not a head size",
				     h->where);
	*out = json_integer_value(v);
	return 0;
}

/* Gemma3Model.set_gguf_parameters' own keys, with its .get() defaults. */
static int gemma3_part(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *full = json_object_get(h->rope, "full_attention"), *v;
	int rc;
	if ((rc = get_u32_or(l, h, "max_position_embeddings", "context_length", 131072, err)) ||
	    (rc = get_u32_or(l, h, "num_attention_heads", "attention.head_count", 8, err)) ||
	    (rc = get_f32_or(l, h, h->root, "rms_norm_eps", "attention.layer_norm_rms_epsilon",
			     1e-6f, err)) ||
	    (rc = get_u32_or(l, h, "head_dim", "attention.key_length", 256, err)) ||
	    (rc = get_u32_or(l, h, "head_dim", "attention.value_length", 256, err)) ||
	    (rc = get_f32_or(l, h, json_is_object(full) ? full : h->rope, "rope_theta",
			     "rope.freq_base", 1000000.0f, err)))
		return rc;
	v = json_object_get(h->root, "attn_logit_softcapping");
	if (v && !json_is_null(v))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: attn_logit_softcapping is set; the "
				     "converter refuses it for Gemma 3 and 4", h->where);
	v = json_object_get(h->root, "final_logit_softcapping");
	if (tfs_hf_py_true(v) && (rc = tfs_hf_add_f32(l, h, "final_logit_softcapping", v,
					      "final_logit_softcapping", err)))
		return rc;
	v = json_object_get(h->root, "sliding_window_pattern");
	if (!(json_is_integer(v) && json_integer_value(v) == 1) &&
	    ((rc = tfs_hf_need(&v, h, "sliding_window", err)) ||
	     (rc = tfs_hf_add_u32(l, h, "attention.sliding_window", v, "sliding_window", err))))
		return rc;
	return get_u32_or(l, h, "num_key_value_heads", "attention.head_count_kv", 4, err);
}

/* Gemma4Model.set_gguf_parameters' own keys. */
static int gemma4_part(tfs_hf_kvs *l, const hparams *h, const int32_t *is_swa, size_t nl,
		       tfs_error *err)
{
	static const char *const k_exp[] = { "expert_intermediate_size", "moe_intermediate_size",
					     NULL };
	int64_t shared, hd_full, hd_swa, n_ff;
	const char *which = k_exp[0];
	json_t *v;
	char name[128];
	int rc = need_int(&shared, h, "num_kv_shared_layers", err);
	if (rc || (rc = tfs_hf_add_u32(l, h, "attention.shared_kv_layers",
				       json_object_get(h->root, "num_kv_shared_layers"),
				       "num_kv_shared_layers", err)))
		return rc;
	v = json_object_get(h->root, "hidden_size_per_layer_input");
	keyname(name, sizeof name, h, "embedding_length_per_layer_input");
	rc = tfs_hf_py_true(v) ? tfs_hf_add_u32(l, h, "embedding_length_per_layer_input", v,
					 "hidden_size_per_layer_input", err)
		       : tfs_hf_kvs_add_u32(l, name, 0, err);
	if (rc || (rc = add_array(l, h, "attention.sliding_window_pattern", is_swa, nl, true,
				  err)) ||
	    (rc = head_dim_full(&hd_full, h, err)) || (rc = need_int(&hd_swa, h, "head_dim", err)))
		return rc;
	static const char *const k_len[] = { "attention.key_length", "attention.value_length",
		"attention.key_length_swa", "attention.value_length_swa" };
	for (size_t i = 0; i < 4; i++) {
		keyname(name, sizeof name, h, k_len[i]);
		if ((rc = tfs_hf_kvs_add_u32(l, name, (uint32_t)(i < 2 ? hd_full : hd_swa), err)))
			return rc;
	}
	if (!(v = tfs_hf_find(h->root, k_exp, &which)))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no moe_intermediate_size (nor "
				     "expert_intermediate_size): the converter looks it up for "
				     "Gemma 4 (null is enough)", h->where);
	if (!json_is_null(v) && (rc = tfs_hf_add_u32(l, h, "expert_feed_forward_length", v,
						     which, err)))
		return rc;
	if (tfs_hf_py_true(json_object_get(h->root, "use_double_wide_mlp"))) {
		int32_t *ff = calloc((size_t)h->n_layer + 1, sizeof *ff);
		if ((rc = need_int(&n_ff, h, "intermediate_size", err)) || !ff) {
			free(ff);
			return rc ? rc : tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory",
						       h->where);
		}
		for (int64_t i = 0; i < h->n_layer; i++)
			ff[i] = (int32_t)(i < h->n_layer - shared ? n_ff : 2 * n_ff);
		rc = add_array(l, h, "feed_forward_length", ff, (size_t)h->n_layer, false, err);
		free(ff);
		if (rc)
			return rc;
	}
	json_t *kv_full = full_value(h, "num_global_key_value_heads", "num_key_value_heads");
	json_t *kv_swa = json_object_get(h->root, "num_key_value_heads");
	if (kv_full && !json_is_null(kv_full) && kv_swa && !json_is_null(kv_swa)) {
		int32_t *kv = calloc(nl + 1, sizeof *kv);
		if (!kv)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
		if (!json_is_integer(kv_full) || !json_is_integer(kv_swa))
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: num_key_value_heads or "
					   "num_global_key_value_heads is not an integer", h->where);
		for (size_t i = 0; !rc && i < nl; i++)
			kv[i] = (int32_t)json_integer_value(is_swa[i] ? kv_swa : kv_full);
		if (!rc)
			rc = add_array(l, h, "attention.head_count_kv", kv, nl, false, err);
		free(kv);
		if (rc)
			return rc;
	}
	/* the sliding layers' factor: rope_parameters' top level (a nested one has none) */
	v = json_object_get(h->rope, "partial_rotary_factor");
	double prf = json_is_number(v) ? json_number_value(v) : 1.0;
	keyname(name, sizeof name, h, "rope.dimension_count");
	if ((rc = tfs_hf_kvs_add_u32(l, name, (uint32_t)hd_full, err)))
		return rc;
	keyname(name, sizeof name, h, "rope.dimension_count_swa");
	return tfs_hf_kvs_add_u32(l, name, (uint32_t)(int64_t)((double)hd_swa * prf), err);
}

static int g4_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	int32_t *is_swa = NULL;
	size_t nl = 0;
	int64_t shared;
	int rc = gemma3_part(l, h, err);   /* then the converter's first need, first */
	if (!rc && !(rc = need_int(&shared, h, "num_kv_shared_layers", err)) &&
	    !(rc = layer_types(&is_swa, &nl, h, err)))
		rc = gemma4_part(l, h, is_swa, nl, err);
	free(is_swa);
	return rc;
}

/* ==== rope_freqs.weight ==== */

static int g4_rope_freqs(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early, const hparams *h,
			 tfs_error *err)
{
	(void)early;
	json_t *rp = json_object_get(json_object_get(h->root, "rope_parameters"),
				     "full_attention");
	json_t *type = json_object_get(rp, "rope_type"), *prf = json_object_get(rp,
										"partial_rotary_factor");
	int64_t hd;
	int rc = head_dim_full(&hd, h, err);
	if (!json_is_object(rp))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no rope_parameters.full_attention (the "
				     "converter needs it for Gemma 4)", h->where);
	if (!json_is_string(type) || strcmp(json_string_value(type), "proportional") != 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: rope_parameters.full_attention's "
				     "rope_type is not \"proportional\" (the converter asserts it)",
				     h->where);
	if (!json_is_number(prf))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no rope_parameters.full_attention."
				     "partial_rotary_factor", h->where);
	if (rc)
		return rc;
	int64_t n_rot = (int64_t)((double)hd * json_number_value(prf) / 2);
	int64_t n_unrot = (int64_t)((double)hd / 2) - n_rot;
	if (n_rot < 0 || n_unrot < 0 || n_rot + n_unrot == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: the full layers' rope (head size %lld, "
				     "partial_rotary_factor %g) gives no rope_freqs", h->where,
				     (long long)hd, json_number_value(prf));
	float *f = malloc((size_t)(n_rot + n_unrot) * sizeof *f);
	if (!f)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	for (int64_t i = 0; i < n_rot + n_unrot; i++)
		f[i] = i < n_rot ? 1.0f : 1e30f;
	gen[0] = (tfs_hf_gen){ "rope_freqs.weight", f, (size_t)(n_rot + n_unrot) };
	*ngen = 1;
	return 0;
}

/* ==== the tokenizer: LlamaHfVocab ==== */

/* GemmaTokenizerFast's defaults of bos, eos, unk, sep, pad, cls and mask; the set is
 * all_special_tokens as transformers 5 has it (4.57 cannot load a Gemma 4 repo's
 * tokenizer_config.json: 'list' object has no attribute 'keys'), which is what the release's
 * own models/ggml-vocab-gemma-4.gguf shows for google/gemma-4's files */
static const char *const gemma_named[TFS_HF_SPECIAL_ATTRS] = { "<bos>", "<eos>", "<unk>",
	NULL, "<pad>", NULL, NULL };
/* Gemma4Model.set_vocab: always rendered (user-defined) */
static const char *const visible[] = { "<|channel>", "<channel|>", "<|tool_call>",
	"<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>" };

static bool is_byte_token(const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdefABCDEF";
	return n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && s[3] && s[4] &&
	       strchr(hex, s[3]) && strchr(hex, s[4]);
}

/* LlamaHfVocab's checks of tokenizer.json (its model and decoder) and the tokenizer class
 * AutoTokenizer takes from tokenizer_config.json. */
static int check_files(const tfs_hf_tok *tok, const json_t *cfg, tfs_error *err)
{
	if (!tok)
		return tfs_error_set(err, TFS_E_NOTFOUND, "no tokenizer.json (Gemma 4's converter "
				     "reads it through transformers: LlamaHfVocab)");
	const json_t *model = json_object_get(tok->root, "model");
	const char *type = json_string_value(json_object_get(model, "type"));
	const json_t *bf = json_object_get(model, "byte_fallback");
	const char *dec = json_string_value(json_object_get(json_object_get(tok->root,
									    "decoder"), "type"));
	bool bpe = type && strcmp(type, "BPE") == 0;
	if (bpe && tfs_hf_py_true(json_object_get(model, "ignore_merges")) &&
	    !(bf ? tfs_hf_py_true(bf) : true))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: a Llama 3 style BPE; the "
				     "converter refuses it for Gemma 4 (\"Llama 3 must be converted "
				     "with BpeVocab\")");
	if (!bpe || !tfs_hf_py_true(bf) || !dec || strcmp(dec, "Sequence") != 0)
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: not a SentencePiece-style "
				     "BPE (type BPE, byte_fallback, a Sequence decoder), which "
				     "Gemma 4's converter needs");
	if (!tok->has_vocab)
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: model.vocab is not an "
				     "object");
	const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
	if (!cls || (strcmp(cls, "GemmaTokenizer") && strcmp(cls, "GemmaTokenizerFast")))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tokenizer_config.json: tokenizer_class "
				     "%s%s%s: the GGUF view reproduces transformers' "
				     "GemmaTokenizer(Fast) for Gemma 4", cls ? "'" : "",
				     cls ? cls : "missing", cls ? "'" : "");
	return 0;
}

/* The token list LlamaHfVocab makes: the vocabulary by id (get_vocab(): model.vocab, the
 * added tokens over it), then the added tokens past it in id order. */
typedef struct {
	const json_t *added;       /* tokenizer.json's added_tokens */
	const json_t **extra;      /* the added tokens past the vocabulary, by id */
	size_t vs, nadd;
	const char **s;
	size_t *len;
	float *score;
	int32_t *type;
} g4_vocab;

static void vocab_free(g4_vocab *v)
{
	free(v->extra);
	free(v->s);
	free(v->len);
	free(v->score);
	free(v->type);
}

/* An added token at its id: over the vocabulary's (whose text loses its old id), or kept in
 * v->extra by id. */
static void vocab_added(g4_vocab *v, const tfs_hf_tok *tok, const json_t *a, size_t at)
{
	const json_t *c = json_object_get(a, "content");
	uint32_t old;
	if (tfs_hf_tok_id(tok, json_string_value(c), json_string_length(c), &old) &&
	    old != at && old < v->vs && v->s[old] && v->len[old] == json_string_length(c) &&
	    memcmp(v->s[old], json_string_value(c), v->len[old]) == 0)
		v->s[old] = NULL;
	if (at < v->vs) {
		v->s[at] = json_string_value(c);
		v->len[at] = json_string_length(c);
		return;
	}
	size_t j = v->nadd++;   /* insertion by id (few of them) */
	while (j > 0 && json_integer_value(json_object_get(v->extra[j - 1], "id")) >
			(json_int_t)at) {
		v->extra[j] = v->extra[j - 1];
		j--;
	}
	v->extra[j] = a;
}

static int vocab_texts(g4_vocab *v, const tfs_hf_tok *tok, tfs_error *err)
{
	size_t na = json_array_size(v->added), i;
	const json_t *a;
	v->vs = tok->n;
	v->extra = calloc(na + 1, sizeof *v->extra);
	v->s = calloc(v->vs + na + 1, sizeof *v->s);
	v->len = calloc(v->vs + na + 1, sizeof *v->len);
	v->score = calloc(v->vs + na + 1, sizeof *v->score);
	v->type = calloc(v->vs + na + 1, sizeof *v->type);
	if (!v->extra || !v->s || !v->len || !v->score || !v->type)
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer.json: out of memory");
	for (size_t k = 0; k < tok->n; k++) {
		if (tok->id[k] >= v->vs)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: token id %u is not "
					     "below the vocabulary's size %zu (the converter's "
					     "LlamaHfVocab stops on it)", tok->id[k], v->vs);
		v->s[tok->id[k]] = tok->text + tok->off[k];
		v->len[tok->id[k]] = tok->off[k + 1] - tok->off[k];
	}
	json_array_foreach(v->added, i, a) {
		const json_t *c = json_object_get(a, "content"), *id = json_object_get(a, "id");
		if (!json_is_string(c) || !json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) > INT32_MAX)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added token %zu has "
					     "no content or id", i);
		vocab_added(v, tok, a, (size_t)json_integer_value(id));
	}
	for (size_t k = 0; k < v->vs; k++)
		if (!v->s[k])
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: no token has id "
					     "%zu (the converter's LlamaHfVocab stops on it)", k);
	for (size_t k = 0; k < v->nadd; k++) {
		const json_t *c = json_object_get(v->extra[k], "content");
		v->s[v->vs + k] = json_string_value(c);
		v->len[v->vs + k] = json_string_length(c);
	}
	return 0;
}

/* self.specials = {tok: get_vocab()[tok]}: every special token must be in the vocabulary. */
static int specials_known(const json_t *special, const tfs_hf_tok *tok, const json_t *added,
			  tfs_error *err)
{
	const char *sk;
	json_t *sv;
	json_object_foreach((json_t *)special, sk, sv) {
		uint32_t id;
		size_t i;
		const json_t *a;
		bool found = tfs_hf_tok_id(tok, sk, strlen(sk), &id);
		json_array_foreach(added, i, a) {
			const char *c = json_string_value(json_object_get(a, "content"));
			found |= c && strcmp(c, sk) == 0;
		}
		if (!found)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer_config.json: special token "
					     "'%s' is not in tokenizer.json's vocabulary (the "
					     "converter stops on it)", sk);
	}
	return 0;
}

/* Scores -1000; types: byte tokens, control (special), normal; past the vocabulary control
 * or user-defined; Gemma4Model's visible tokens user-defined. */
static void vocab_types(g4_vocab *v, const json_t *special)
{
	for (size_t k = 0; k < v->vs + v->nadd; k++) {
		bool sp = json_object_getn(special, v->s[k], v->len[k]) != NULL;
		v->score[k] = -1000.0f;
		if (k < v->vs)
			v->type[k] = is_byte_token(v->s[k], v->len[k]) ? TFS_TOK_BYTE
				     : sp ? TFS_TOK_CONTROL : TFS_TOK_NORMAL;
		else
			v->type[k] = sp ? TFS_TOK_CONTROL : TFS_TOK_USER_DEFINED;
		for (size_t j = 0; j < N(visible); j++)
			if (v->len[k] == strlen(visible[j]) &&
			    memcmp(v->s[k], visible[j], v->len[k]) == 0)
				v->type[k] = TFS_TOK_USER_DEFINED;
	}
}

static int g4_set_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
			const json_t *cfg, tfs_error *err)
{
	int rc = check_files(tok, cfg, err);
	if (rc)
		return rc;
	g4_vocab v = { .added = json_object_get(tok->root, "added_tokens") };
	json_t *special = NULL;
	if (v.added && !json_is_array(v.added))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.json: added_tokens is not a list");
	if (!(rc = vocab_texts(&v, tok, err)) && !(rc = tfs_hf_all_special(&special, files, cfg, gemma_named, err)))
		rc = specials_known(special, tok, v.added, err);
	if (!rc)
		vocab_types(&v, special);
	size_t n = v.vs + v.nadd;
	if (!rc && !(rc = tfs_hf_put_str(out, "tokenizer.ggml.model", "gemma4", 6, err)) &&
	    !(rc = tfs_hf_kvs_add_arr_str(out, "tokenizer.ggml.tokens", v.s, v.len, n, err)) &&
	    !(rc = tfs_hf_kvs_add_arr_f32(out, "tokenizer.ggml.scores", v.score, n, err)) &&
	    !(rc = tfs_hf_kvs_add_arr_i32(out, "tokenizer.ggml.token_type", v.type, n, err)) &&
	    !(rc = tfs_hf_special_vocab(out, files, tok, cfg, true, -1, err)) &&
	    !(rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_space_prefix", false, err)))
		rc = tfs_hf_put_bool(out, "tokenizer.ggml.add_bos_token", true, err);
	json_decref(special);
	vocab_free(&v);
	return rc;
}

/* ==== the row ==== */

const tfs_hf_arch tfs_hf_arch_gemma4 = {
	TFS_HF_CLASSES("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"), .gguf = "gemma4",
	TFS_HF_NAMES(g4_globals, g4_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_TRIM_EMBD | TFS_HF_ARCH_SCALAR_WEIGHT,
	.params = g4_keys, .extra = g4_rope_freqs, .configs = g4_classes,
	.vocab = TFS_HF_VOCAB_OWN, .own_vocab = g4_set_vocab, .xconfig = tfs_hf_gemma4_xconfig,
};
