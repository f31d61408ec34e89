/*
 * hf_params.c - the hyperparameter keys the converter writes, and the helpers the rows' own
 * keys use (hf_arch.h: find_hparam, a value as a u32 or f32 key, a key that must be there):
 * TextModel.set_gguf_parameters: block count, context, sizes, heads, rope scaling, rope
 * bases, norm epsilons, experts, head_dim, general.file_type; then the row's own keys.
 * (config.json read as the converter's hparams: hf_config.c.)
 */
#include "hf_plan_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== config.json ==== */

/* Python's find_hparam: the value of the first of keys config has (JSON null included), or
 * NULL; *which gets that key. */
json_t *tfs_hf_find(const json_t *c, const char *const *keys, const char **which)
{
	for (; *keys; keys++) {
		json_t *v = json_object_get(c, *keys);
		if (v) {
			if (which)
				*which = *keys;
			return v;
		}
	}
	return NULL;
}

/* An integer hyperparameter as struct.pack('I') takes it (a bool is 0 or 1). */
static int get_u32(uint32_t *out, const json_t *v, const char *key, const hparams *h,
		   tfs_error *err)
{
	json_int_t i;
	if (json_is_integer(v))
		i = json_integer_value(v);
	else if (json_is_boolean(v))
		i = json_is_true(v);
	else
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not an integer", h->where,
				     key);
	if (i < 0 || i > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is %lld, not a 32-bit unsigned "
				     "integer", h->where, key, (long long)i);
	*out = (uint32_t)i;
	return 0;
}

/* A float hyperparameter as struct.pack('f') takes it. */
static int get_f32(float *out, const json_t *v, const char *key, const hparams *h,
		   tfs_error *err)
{
	double d;
	if (json_is_number(v))
		d = json_number_value(v);
	else if (json_is_boolean(v))
		d = json_is_true(v);
	else
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a number", h->where, key);
	if (isinf((float)d) && !isinf(d))   /* PyFloat_Pack4's OverflowError */
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is %g, too large for float32",
				     h->where, key, d);
	*out = (float)d;
	return 0;
}

int tfs_hf_add_u32(tfs_hf_kvs *l, const hparams *h, const char *suffix, const json_t *v,
		   const char *key, tfs_error *err)
{
	const char *arch = h->arch->gguf;
	uint32_t x = 0;
	char name[128];
	int rc = get_u32(&x, v, key, h, err);
	if (rc)
		return rc;
	snprintf(name, sizeof name, "%s.%s", arch, suffix);
	return tfs_hf_kvs_add_u32(l, name, x, err);
}

int tfs_hf_add_f32(tfs_hf_kvs *l, const hparams *h, const char *suffix, const json_t *v,
		   const char *key, tfs_error *err)
{
	const char *arch = h->arch->gguf;
	float x = 0;
	char name[128];
	int rc = get_f32(&x, v, key, h, err);
	if (rc)
		return rc;
	snprintf(name, sizeof name, "%s.%s", arch, suffix);
	return tfs_hf_kvs_add_f32(l, name, x, err);
}

int tfs_hf_need(json_t **v, const hparams *h, const char *key, tfs_error *err)
{
	*v = json_object_get(h->root, key);
	if (!*v)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\" (the converter needs it for "
				     "%s)", h->where, key, h->arch->classes[0]);
	return 0;
}

int tfs_hf_add_needed(tfs_hf_kvs *l, const hparams *h, const tfs_hf_needed *k, size_t n,
		      tfs_error *err)
{
	for (size_t i = 0; i < n; i++) {
		json_t *v;
		int rc = tfs_hf_need(&v, h, k[i].key, err);
		if (!rc && k[i].kind == TFS_HF_NEED_HEAD_RATIO) {
			char name[128];
			double d = json_is_number(v) ? json_number_value(v) *
				   (double)(h->hidden / h->n_head) : -1;
			if (!(d >= 0 && d < 4294967296.0))
				return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a number "
						     "of heads' dimensions", h->where, k[i].key);
			snprintf(name, sizeof name, "%s.%s", h->arch->gguf, k[i].suffix);
			rc = tfs_hf_kvs_add_u32(l, name, (uint32_t)d, err);
		} else if (!rc) {
			rc = k[i].f32 ? tfs_hf_add_f32(l, h, k[i].suffix, v, k[i].key, err)
				      : tfs_hf_add_u32(l, h, k[i].suffix, v, k[i].key, err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ==== keys: TextModel.set_gguf_parameters ==== */

/* The first key of keys the config has, as a u32 key: absent or null, nothing. */
static int opt_u32(tfs_hf_kvs *l, const hparams *h, const char *const *keys, const char *suffix,
		   tfs_error *err)
{
	const char *which = keys[0];
	json_t *v = tfs_hf_find(h->root, keys, &which);
	return v && !json_is_null(v) ? tfs_hf_add_u32(l, h, suffix, v, which, err) : 0;
}

static int opt_f32(tfs_hf_kvs *l, const hparams *h, const char *const *keys, const char *suffix,
		   tfs_error *err)
{
	const char *which = keys[0];
	json_t *v = tfs_hf_find(h->root, keys, &which);
	return v && !json_is_null(v) ? tfs_hf_add_f32(l, h, suffix, v, which, err) : 0;
}

static int add_str(tfs_hf_kvs *l, const hparams *h, const char *suffix, const char *s,
		   tfs_error *err)
{
	char name[128];
	snprintf(name, sizeof name, "%s.%s", h->arch->gguf, suffix);
	return tfs_hf_kvs_add_str(l, name, s, err);
}

/* rope scaling: linear and yarn keys, longrope's type; llama3 (rope_freqs), dynamic and
 * unknown types write nothing. */
static int rope_scaling_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *rp = json_object_get(h->rope, "full_attention");
	if (!json_is_object(rp))
		rp = h->rope;
	const char *type = json_string_value(json_object_get(rp, "rope_type"));
	json_t *factor = json_object_get(rp, "factor");
	bool has_factor = factor && !json_is_null(factor);
	int rc;
	if (!type)
		return 0;
	if (strcmp(type, "linear") == 0 && has_factor)
		return (rc = add_str(l, h, "rope.scaling.type", "linear", err)) ? rc
			: tfs_hf_add_f32(l, h, "rope.scaling.factor", factor, "rope_scaling.factor",
					 err);
	if (strcmp(type, "su") == 0 || strcmp(type, "longrope") == 0)
		return add_str(l, h, "rope.scaling.type", "longrope", err);
	if (strcmp(type, "yarn") != 0 || !has_factor)
		return 0;
	json_t *orig = json_object_get(rp, "original_max_position_embeddings");
	if (!orig)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: yarn rope_scaling without "
				     "\"original_max_position_embeddings\"", h->where);
	if ((rc = add_str(l, h, "rope.scaling.type", "yarn", err)) ||
	    (rc = tfs_hf_add_f32(l, h, "rope.scaling.factor", factor, "rope_scaling.factor",
				 err)) ||
	    (rc = tfs_hf_add_u32(l, h, "rope.scaling.original_context_length", orig,
				 "rope_scaling.original_max_position_embeddings", err)))
		return rc;
	static const char *const k_ext[] = { "extrapolation_factor", NULL };
	static const char *const k_attn[] = { "attention_factor", "attn_factor", NULL };
	static const char *const k_fast[] = { "beta_fast", NULL };
	static const char *const k_slow[] = { "beta_slow", NULL };
	hparams sub = *h;
	sub.root = rp;
	if ((rc = opt_f32(l, &sub, k_ext, "rope.scaling.yarn_ext_factor", err)) ||
	    (rc = opt_f32(l, &sub, k_attn, "rope.scaling.yarn_attn_factor", err)) ||
	    (rc = opt_f32(l, &sub, k_fast, "rope.scaling.yarn_beta_fast", err)))
		return rc;
	return opt_f32(l, &sub, k_slow, "rope.scaling.yarn_beta_slow", err);
}

/* rope.dimension_sections: rope_parameters' mrope_section (Qwen2-VL, Qwen3.5), padded with
 * zeros to 4 entries, the first 4. */
static int mrope_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *ms = json_object_get(h->rope, "mrope_section");
	int32_t v[4] = { 0, 0, 0, 0 };
	char name[128];
	if (!ms)
		return 0;
	for (size_t i = 0; i < json_array_size(ms) && i < 4; i++) {
		json_t *x = json_array_get(ms, i);
		if (!json_is_integer(x) || json_integer_value(x) < INT32_MIN ||
		    json_integer_value(x) > INT32_MAX)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: mrope_section[%zu] is not a "
					     "32-bit integer", h->where, i);
		v[i] = (int32_t)json_integer_value(x);
	}
	if (!json_is_array(ms))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"mrope_section\" is not a list",
				     h->where);
	snprintf(name, sizeof name, "%s.rope.dimension_sections", h->arch->gguf);
	return tfs_hf_kvs_add_arr_i32(l, name, v, 4, err);
}

/* rope bases (global, then the sliding window's), norm epsilons. */
static int rope_norm_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const char *const k_theta[] = { "rope_theta", NULL };
	static const char *const k_rms[] = { "rms_norm_eps", "norm_eps", NULL };
	static const char *const k_norm[] = { "layer_norm_eps", "layer_norm_epsilon",
					      "norm_epsilon", NULL };
	json_t *rp = json_object_get(h->rope, "full_attention");
	hparams sub = *h;
	sub.root = json_is_object(rp) ? rp : h->rope;
	int rc = opt_f32(l, &sub, k_theta, "rope.freq_base", err);
	sub.root = json_object_get(h->rope, "sliding_attention");
	if (!rc && json_is_object(sub.root))
		rc = opt_f32(l, &sub, k_theta, "rope.freq_base_swa", err);
	if (rc || (rc = opt_f32(l, h, k_rms, "attention.layer_norm_rms_epsilon", err)))
		return rc;
	return opt_f32(l, h, k_norm, "attention.layer_norm_epsilon", err);
}

/* experts (a dense model has none of these keys), head_dim, general.file_type. */
static int tail_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const char *const k_exp[] = { "num_local_experts", "num_experts",
					     "n_routed_experts", NULL };
	static const char *const k_used[] = { "num_experts_per_tok", "num_experts_per_token",
					      "top_k_experts", NULL };
	static const char *const k_grp[] = { "n_group", NULL };
	static const char *const k_topk[] = { "topk_group", NULL };
	static const char *const k_score[] = { "score_function", "scoring_func", "score_func",
		"moe_router_activation", "moe_router_activation_func", "expert_selection_fn", NULL };
	int rc;
	if ((rc = opt_u32(l, h, k_exp, "expert_count", err)) ||
	    (rc = opt_u32(l, h, k_used, "expert_used_count", err)) ||
	    (rc = opt_u32(l, h, k_grp, "expert_group_count", err)) ||
	    (rc = opt_u32(l, h, k_topk, "expert_group_used_count", err)))
		return rc;
	const char *which = k_score[0];
	json_t *v = tfs_hf_find(h->root, k_score, &which);
	if (v && !json_is_null(v)) {   /* ExpertGatingFuncType */
		static const char *const fn[] = { "softmax", "sigmoid", NULL, "sqrtsoftplus" };
		const char *s = json_string_value(v);
		uint32_t k = 0;
		while (k < 4 && !(s && fn[k] && !strcmp(s, fn[k])))
			k++;
		char name[128];
		snprintf(name, sizeof name, "%s.expert_gating_func", h->arch->gguf);
		if (k == 4)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not an expert gating "
					     "function the converter knows (sigmoid, softmax, "
					     "sqrtsoftplus)", h->where, which);
		if ((rc = tfs_hf_kvs_add_u32(l, name, k + 1, err)))
			return rc;
	}
	if ((v = json_object_get(h->root, "head_dim")) && !json_is_null(v) &&
	    ((rc = tfs_hf_add_u32(l, h, "attention.key_length", v, "head_dim", err)) ||
	     (rc = tfs_hf_add_u32(l, h, "attention.value_length", v, "head_dim", err))))
		return rc;
	return tfs_hf_kvs_add_u32(l, "general.file_type", h->ftype, err);
}

int tfs_hf_text_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer",
					       "num_layers", NULL };
	static const char *const k_ctx[] = { "max_position_embeddings", "n_ctx", "n_positions",
		"max_length", "max_sequence_length", "model_max_length", NULL };
	static const char *const k_embd[] = { "hidden_size", "n_embd", "dim", NULL };
	static const char *const k_ff[] = { "prefix_dense_intermediate_size",
		"dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim", NULL };
	static const char *const k_head[] = { "num_attention_heads", "n_head", "n_heads", NULL };
	static const char *const k_kv[] = { "num_key_value_heads", "n_kv_heads", NULL };
	const char *which = "num_hidden_layers";
	json_t *v = tfs_hf_find(h->root, k_layer, &which);
	int rc;
	if ((rc = tfs_hf_add_u32(l, h, "block_count", v, which, err)) ||
	    (rc = opt_u32(l, h, k_ctx, "context_length", err)) ||
	    (rc = opt_u32(l, h, k_embd, "embedding_length", err)) ||
	    (rc = opt_u32(l, h, k_ff, "feed_forward_length", err)) ||
	    (rc = opt_u32(l, h, k_head, "attention.head_count", err)) ||
	    (rc = opt_u32(l, h, k_kv, "attention.head_count_kv", err)))
		return rc;
	if (json_is_false(json_object_get(h->root, "is_causal"))) {
		char name[128];
		snprintf(name, sizeof name, "%s.attention.causal", h->arch->gguf);
		if ((rc = tfs_hf_kvs_add_bool(l, name, false, err)))
			return rc;
	}
	if ((rc = rope_scaling_keys(l, h, err)) || (rc = mrope_keys(l, h, err)) ||
	    (rc = rope_norm_keys(l, h, err)))
		return rc;
	return tail_keys(l, h, err);
}

/* LlamaModel.set_gguf_parameters' own: vocab_size, rope dimensions. */
static int llama_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *v;
	char name[128];
	int rc = tfs_hf_need(&v, h, "vocab_size", err);
	if (rc || (rc = tfs_hf_add_u32(l, h, "vocab_size", v, "vocab_size", err)))
		return rc;
	if ((v = json_object_get(h->root, "head_dim")) && !json_is_null(v))
		return tfs_hf_add_u32(l, h, "rope.dimension_count", v, "head_dim", err);
	snprintf(name, sizeof name, "%s.rope.dimension_count", h->arch->gguf);
	return tfs_hf_kvs_add_u32(l, name, (uint32_t)(h->hidden / h->n_head), err);
}

int tfs_hf_param_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	unsigned f = h->arch->flags;
	int rc = 0;
	if (f & TFS_HF_ARCH_DROP_HEAD_DIM)   /* hparams.pop("head_dim", None) */
		json_object_del(h->root, "head_dim");
	if (f & TFS_HF_ARCH_BASE_PARAMS)
		rc = tfs_hf_text_keys(l, h, err);
	if (!rc && (f & TFS_HF_ARCH_LLAMA_PARAMS))
		rc = llama_keys(l, h, err);
	if (!rc && h->arch->params)
		rc = h->arch->params(l, h, err);
	return rc;
}
