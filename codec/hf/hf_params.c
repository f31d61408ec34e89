/*
 * hf_params.c - config.json as the converter reads it and the hyperparameter keys it writes.
 *
 *  1. hparams: AutoConfig.from_pretrained(dir).to_dict(): config.json with the config class's
 *     defaults for the keys it leaves out (the row's defaults); text_config merged to the top
 *     (TextModel.__init__);
 *  2. rope_parameters: hparams' rope_parameters or rope_scaling, with rope_theta, the local
 *     (sliding window) theta, rope_type from type, partial_rotary_factor and
 *     original_max_position_embeddings mirrored into it;
 *  3. TextModel.set_gguf_parameters: block count, context, sizes, heads, rope scaling, rope
 *     bases, norm epsilons, experts, head_dim, general.file_type; then the row's own keys.
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

/* A size (-1 when absent or null); present, it must be a positive integer.  Missing and
 * required: the error names `name`, the key config.json lacks. */
static int get_size(int64_t *out, const json_t *c, const char *const *keys, const char *name,
		    const hparams *h, bool required, tfs_error *err)
{
	const char *which = name;
	json_t *v = tfs_hf_find(c, keys, &which);
	*out = -1;
	if (!v || json_is_null(v)) {
		if (required)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\"", h->where, name);
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    json_integer_value(v) > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a positive 32-bit "
				     "integer", h->where, which);
	*out = json_integer_value(v);
	return 0;
}

/* ==== hparams: to_dict() ==== */

/* The class default d into root when it applies. */
static int apply_default(json_t *root, const tfs_hf_default *d, const hparams *h,
			 tfs_error *err)
{
	json_t *cur = json_object_get(root, d->key), *v = NULL;
	bool computed = d->kind == TFS_HF_DEF_HEAD_DIM || d->kind == TFS_HF_DEF_KV_HEADS;
	if (cur && !(computed && json_is_null(cur)))
		return 0;
	json_t *heads = json_object_get(root, "num_attention_heads");
	json_t *hidden = json_object_get(root, "hidden_size");
	switch (d->kind) {
	case TFS_HF_DEF_INT: v = json_integer((json_int_t)d->v); break;
	case TFS_HF_DEF_REAL: v = json_real(d->v); break;
	case TFS_HF_DEF_NULL: v = json_null(); break;
	case TFS_HF_DEF_BOOL: v = json_boolean(d->v != 0); break;
	case TFS_HF_DEF_KV_HEADS:   /* absent: v (0: the head count); null: the head count */
		if (!cur && d->v > 0) {
			v = json_integer((json_int_t)d->v);
			break;
		}
		if (!heads)
			return 0;
		v = json_deep_copy(heads);
		break;
	default:   /* HEAD_DIM: hidden_size // num_attention_heads */
		if (!json_is_integer(heads) || !json_is_integer(hidden) ||
		    json_integer_value(heads) <= 0)
			return 0;   /* the size checks name the problem */
		v = json_integer(json_integer_value(hidden) / json_integer_value(heads));
		break;
	}
	if (!v || json_object_set_new(root, d->key, v))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	return 0;
}

/* rope_parameters as TextModel.__init__ builds it (h->rope). */
static int build_rope(hparams *h, tfs_error *err)
{
	static const char *const k_theta[] = { "global_rope_theta", "rope_global_theta",
		"rope_theta_global", "rope_theta", "rotary_emb_base", NULL };
	static const char *const k_local[] = { "local_rope_theta", "rope_local_theta",
		"rope_theta_local", "swa_rope_theta", "rope_local_base_freq", NULL };
	static const char *const k_prf[] = { "partial_rotary_factor", "rope_pct", "rope_percent",
		NULL };
	static const char *const k_omp[] = { "original_max_position_embeddings", NULL };
	json_t *rp = json_object_get(h->root, "rope_parameters");
	if (!rp)
		rp = json_object_get(h->root, "rope_scaling");
	if (rp && !json_is_null(rp) && !json_is_object(rp))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: rope_scaling is not an object",
				     h->where);
	h->rope = json_is_object(rp) ? json_deep_copy(rp) : json_object();
	if (!h->rope)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	json_t *r = h->rope, *v;
	if (json_object_get(r, "full_attention") || json_object_get(r, "sliding_attention"))
		return 0;
	int bad = 0;
	if ((v = tfs_hf_find(h->root, k_local, NULL)) && !json_is_null(v))
		bad |= json_object_set_new(r, "sliding_attention",
					   json_pack("{s:O}", "rope_theta", v));
	if (!json_object_get(r, "rope_theta") && (v = tfs_hf_find(h->root, k_theta, NULL)) &&
	    !json_is_null(v))
		bad |= json_object_set(r, "rope_theta", v);
	if (!json_object_get(r, "rope_type") && (v = json_object_get(r, "type")) &&
	    !json_is_null(v))
		bad |= json_object_set(r, "rope_type", v);
	if (!json_object_get(r, "partial_rotary_factor") &&
	    (v = tfs_hf_find(h->root, k_prf, NULL)) && !json_is_null(v))
		bad |= json_object_set(r, "partial_rotary_factor", v);
	if (!json_object_get(r, "original_max_position_embeddings") &&
	    (v = tfs_hf_find(h->root, k_omp, NULL)) && !json_is_null(v))
		bad |= json_object_set(r, "original_max_position_embeddings", v);
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where) : 0;
}

/* The defaults of config class model_type into obj (none for a class not known). */
static int complete(json_t *obj, const char *model_type, const hparams *h, tfs_error *err)
{
	const tfs_hf_config_class *cc = tfs_hf_config_class_find(model_type);
	for (const tfs_hf_default *d = cc ? cc->defaults : NULL; d && d->key; d++) {
		int rc = apply_default(obj, d, h, err);
		if (rc)
			return rc;
	}
	int rc = cc && (cc->derive & TFS_HF_CC_GEMMA4) ? tfs_hf_gemma4_fill(obj, h->where, err) : 0;
	if (rc)
		return rc;
	if (cc && (cc->derive & TFS_HF_CC_GPTOSS_ROPE) && !json_object_get(obj, "rope_scaling") &&
	    json_object_set_new(obj, "rope_scaling", json_pack("{s:s,s:f,s:f,s:f,s:b,s:i}",
			"rope_type", "yarn", "factor", 32.0, "beta_fast", 32.0, "beta_slow", 1.0,
			"truncate", 0, "original_max_position_embeddings", 4096)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	json_t *rs = json_object_get(obj, "rope_scaling");
	const char *t = json_string_value(json_object_get(rs, "type"));
	bool su_yarn = t && (!strcmp(t, "su") || !strcmp(t, "yarn"));
	if (cc && (cc->derive & TFS_HF_CC_LONGROPE) && su_yarn &&
	    json_object_set_new(rs, "type", json_string("longrope")))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	if (!cc || !cc->text_type)
		return 0;
	/* a sub-config: text_config completed by its own class (absent: all defaults) */
	json_t *tc = json_object_get(obj, "text_config");
	if (!json_is_object(tc)) {
		if (json_object_set_new(obj, "text_config", json_object()))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
		tc = json_object_get(obj, "text_config");
	}
	return complete(tc, cc->text_type, h, err);
}

/* h->root: AutoConfig's to_dict() (config.json with its class's defaults), then
 * text_config merged to the top ({**hparams, **hparams["text_config"]}). */
static int build_root(hparams *h, tfs_error *err)
{
	h->root = json_deep_copy(h->file);
	if (!h->root)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	const char *mt = json_string_value(json_object_get(h->root, "model_type"));
	int rc = complete(h->root, mt, h, err);
	if (rc)
		return rc;
	json_t *tc = json_object_get(h->root, "text_config");
	if (json_is_object(tc) && json_object_update(h->root, tc))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	return build_rope(h, err);
}

static int check_sizes(hparams *h, tfs_error *err)
{
	/* no model has 65536 layers or heads or a head that size; bounds keep the arithmetic
	 * (and what is allocated per layer or head) small */
	static const struct { const char *key; size_t off; } capped[] = {
		{ "num_hidden_layers", offsetof(hparams, n_layer) },
		{ "num_attention_heads", offsetof(hparams, n_head) },
		{ "num_key_value_heads", offsetof(hparams, n_kv) },
		{ "head_dim", offsetof(hparams, head_dim) },
	};
	for (size_t i = 0; i < sizeof capped / sizeof capped[0]; i++) {
		int64_t v = *(const int64_t *)((const char *)h + capped[i].off);
		if (v > 65536)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is %lld, more than any "
					     "model has (65536)", h->where, capped[i].key, (long long)v);
	}
	if (h->n_kv < 0)
		h->n_kv = h->n_head;
	if (h->head_dim < 0) {
		if (h->hidden % h->n_head)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: hidden_size %lld is not a "
					     "multiple of num_attention_heads %lld", h->where,
					     (long long)h->hidden, (long long)h->n_head);
		h->head_dim = h->hidden / h->n_head;
	}
	if (h->n_head % h->n_kv)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: num_attention_heads %lld is not a "
				     "multiple of num_key_value_heads %lld", h->where,
				     (long long)h->n_head, (long long)h->n_kv);
	return 0;
}

int tfs_hf_read_hparams(hparams *h, tfs_error *err)
{
	static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer",
					       "num_layers", NULL };
	static const char *const k_head[] = { "num_attention_heads", "n_head", "n_heads", NULL };
	static const char *const k_kv[] = { "num_key_value_heads", "n_kv_heads", NULL };
	static const char *const k_hidden[] = { "hidden_size", "n_embd", "dim", NULL };
	static const char *const k_ff[] = { "intermediate_size", "n_inner", NULL };
	static const char *const k_vocab[] = { "vocab_size", NULL };
	static const char *const k_hd[] = { "head_dim", NULL };
	const json_t *c;
	int rc = build_root(h, err);
	c = h->root;
	if (rc || (rc = get_size(&h->n_layer, c, k_layer, "num_hidden_layers", h, true, err)) ||
	    (rc = get_size(&h->n_head, c, k_head, "num_attention_heads", h, true, err)) ||
	    (rc = get_size(&h->hidden, c, k_hidden, "hidden_size", h, true, err)) ||
	    (rc = get_size(&h->n_kv, c, k_kv, "num_key_value_heads", h, false, err)) ||
	    (rc = get_size(&h->ff, c, k_ff, "intermediate_size", h, false, err)) ||
	    (rc = get_size(&h->vocab, c, k_vocab, "vocab_size", h, false, err)) ||
	    (rc = get_size(&h->head_dim, c, k_hd, "head_dim", h, false, err)))
		return rc;
	static const char *const k_nextn[] = { "num_nextn_predict_layers", NULL };
	int64_t nextn = -1;
	if ((h->arch->flags & TFS_HF_ARCH_NEXTN_LAYERS) &&
	    !(rc = get_size(&nextn, c, k_nextn, "num_nextn_predict_layers", h, false, err)) &&
	    nextn > 0)
		h->n_layer += nextn;   /* Glm4MoeModel: block_count += num_nextn_predict_layers */
	return rc ? rc : check_sizes(h, err);
}

void tfs_hf_hparams_free(hparams *h)
{
	json_decref(h->file);
	json_decref(h->root);
	json_decref(h->rope);
	h->file = h->root = h->rope = NULL;
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
