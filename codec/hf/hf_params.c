/*
 * hf_params.c - config.json as the converter reads it (find_hparam, hparams.get) and the
 * hyperparameter keys it writes (Model.set_gguf_parameters, LlamaModel, Qwen2Model).
 */
#include "hf_plan_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== config.json ==== */

/* Python's find_hparam: the value of the first of keys config has (JSON null included), or
 * NULL; *which gets that key. */
static json_t *find_hparam(const json_t *c, const char *const *keys, const char **which)
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

static int add_u32_hp(tfs_hf_kvs *l, const char *arch, const char *suffix, const json_t *v,
		      const char *key, const hparams *h, tfs_error *err)
{
	uint32_t x = 0;
	char name[128];
	int rc = get_u32(&x, v, key, h, err);
	if (rc)
		return rc;
	snprintf(name, sizeof name, "%s.%s", arch, suffix);
	return tfs_hf_kvs_add_u32(l, name, x, err);
}

static int add_f32_hp(tfs_hf_kvs *l, const char *arch, const char *suffix, const json_t *v,
		      const char *key, const hparams *h, tfs_error *err)
{
	float x = 0;
	char name[128];
	int rc = get_f32(&x, v, key, h, err);
	if (rc)
		return rc;
	snprintf(name, sizeof name, "%s.%s", arch, suffix);
	return tfs_hf_kvs_add_f32(l, name, x, err);
}

/* An optional size (-1 when absent or null); present, it must be a positive integer. */
static int get_size(int64_t *out, const json_t *c, const char *const *keys, const hparams *h,
		    bool required, tfs_error *err)
{
	const char *which = keys[0];
	json_t *v = find_hparam(c, keys, &which);
	*out = -1;
	if (!v || json_is_null(v)) {
		if (required)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\"", h->where, keys[0]);
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    json_integer_value(v) > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a positive 32-bit "
				     "integer", h->where, which);
	*out = json_integer_value(v);
	return 0;
}

int tfs_hf_read_hparams(hparams *h, tfs_error *err)
{
	static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer",
					       "num_layers", NULL };
	static const char *const k_head[] = { "num_attention_heads", "n_head", NULL };
	static const char *const k_kv[] = { "num_key_value_heads", NULL };
	static const char *const k_hidden[] = { "hidden_size", "n_embd", NULL };
	static const char *const k_ff[] = { "intermediate_size", "n_inner", NULL };
	static const char *const k_vocab[] = { "vocab_size", NULL };
	static const char *const k_hd[] = { "head_dim", NULL };
	int rc;
	if ((rc = get_size(&h->n_layer, h->root, k_layer, h, true, err)) ||
	    (rc = get_size(&h->n_head, h->root, k_head, h, true, err)) ||
	    (rc = get_size(&h->hidden, h->root, k_hidden, h, true, err)) ||
	    (rc = get_size(&h->n_kv, h->root, k_kv, h, false, err)) ||
	    (rc = get_size(&h->ff, h->root, k_ff, h, false, err)) ||
	    (rc = get_size(&h->vocab, h->root, k_vocab, h, false, err)) ||
	    (rc = get_size(&h->head_dim, h->root, k_hd, h, false, err)))
		return rc;
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
	h->has_head_dim = h->head_dim > 0;
	if (h->n_kv < 0)
		h->n_kv = h->n_head;
	if (!h->has_head_dim) {
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

/* ==== keys ==== */

/* Model.set_gguf_parameters: the keys of every architecture, general.file_type last. */
static int model_keys(tfs_hf_kvs *l, const tfs_hf_plan *p, const hparams *h, tfs_error *err)
{
	static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer",
					       "num_layers", NULL };
	static const char *const k_ctx[] = { "max_position_embeddings", "n_ctx", NULL };
	static const char *const k_embd[] = { "hidden_size", "n_embd", NULL };
	static const char *const k_ff[] = { "intermediate_size", "n_inner", NULL };
	static const char *const k_head[] = { "num_attention_heads", "n_head", NULL };
	static const char *const k_norm[] = { "layer_norm_eps", "layer_norm_epsilon",
					      "norm_epsilon", NULL };
	static const struct { const char *const *keys; const char *suffix; bool f; } opt[] = {
		{ k_ctx, "context_length", false },
		{ k_embd, "embedding_length", false },
		{ k_ff, "feed_forward_length", false },
		{ k_head, "attention.head_count", false },
	};
	const char *a = p->arch, *which = NULL;
	const json_t *c = h->root;
	json_t *v;
	int rc;

	v = find_hparam(c, k_layer, &which);
	if ((rc = add_u32_hp(l, a, "block_count", v, which, h, err)))
		return rc;
	for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
		v = find_hparam(c, opt[i].keys, &which);
		if (v && !json_is_null(v) &&
		    (rc = add_u32_hp(l, a, opt[i].suffix, v, which, h, err)))
			return rc;
	}
	/* hparams.get(): a key with null is absent */
	static const struct { const char *key, *suffix; bool f; } get[] = {
		{ "num_key_value_heads", "attention.head_count_kv", false },
		{ "rope_theta", "rope.freq_base", true },
		{ "rms_norm_eps", "attention.layer_norm_rms_epsilon", true },
	};
	for (size_t i = 0; i < sizeof get / sizeof get[0]; i++) {
		v = json_object_get(c, get[i].key);
		if (!v || json_is_null(v))
			continue;
		rc = get[i].f ? add_f32_hp(l, a, get[i].suffix, v, get[i].key, h, err)
			      : add_u32_hp(l, a, get[i].suffix, v, get[i].key, h, err);
		if (rc)
			return rc;
	}
	v = find_hparam(c, k_norm, &which);
	if (v && !json_is_null(v) &&
	    (rc = add_f32_hp(l, a, "attention.layer_norm_epsilon", v, which, h, err)))
		return rc;
	if ((v = json_object_get(c, "num_local_experts")) && !json_is_null(v) &&
	    (rc = add_u32_hp(l, a, "expert_count", v, "num_local_experts", h, err)))
		return rc;
	if ((v = json_object_get(c, "num_experts_per_tok")) && !json_is_null(v) &&
	    (rc = add_u32_hp(l, a, "expert_used_count", v, "num_experts_per_tok", h, err)))
		return rc;
	if ((v = json_object_get(c, "head_dim")) && !json_is_null(v) &&
	    ((rc = add_u32_hp(l, a, "attention.key_length", v, "head_dim", h, err)) ||
	     (rc = add_u32_hp(l, a, "attention.value_length", v, "head_dim", h, err))))
		return rc;
	return tfs_hf_kvs_add_u32(l, "general.file_type", p->ftype, err);
}

/* LlamaModel's keys (vocab size, rope dimensions, linear rope scaling) or Qwen2Model's
 * (yarn rope scaling). */
static int family_keys(tfs_hf_kvs *l, const tfs_hf_plan *p, const hparams *h, tfs_error *err)
{
	const char *a = p->arch;
	const json_t *c = h->root;
	int rc;
	json_t *rs = json_object_get(c, "rope_scaling");
	json_t *factor = json_is_object(rs) ? json_object_get(rs, "factor") : NULL;
	const char *type = factor ? json_string_value(json_object_get(rs, "type")) : NULL;
	char name[128];
	if (p->fam == FAM_LLAMA) {
		if (!json_object_get(c, "vocab_size"))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"vocab_size\"", h->where);
		if ((rc = add_u32_hp(l, a, "vocab_size", json_object_get(c, "vocab_size"),
				     "vocab_size", h, err)))
			return rc;
		/* head_dim when the key is there, else hidden_size // num_attention_heads */
		if (json_object_get(c, "head_dim"))
			rc = add_u32_hp(l, a, "rope.dimension_count", json_object_get(c, "head_dim"),
					"head_dim", h, err);
		else
			rc = (snprintf(name, sizeof name, "%s.rope.dimension_count", a),
			      tfs_hf_kvs_add_u32(l, name, (uint32_t)h->head_dim, err));
		if (rc)
			return rc;
		if (type && strcmp(type, "linear") == 0) {
			snprintf(name, sizeof name, "%s.rope.scaling.type", a);
			if ((rc = tfs_hf_kvs_add_str(l, name, "linear", err)) ||
			    (rc = add_f32_hp(l, a, "rope.scaling.factor", factor,
					     "rope_scaling.factor", h, err)))
				return rc;
		}
	} else if (type && strcmp(type, "yarn") == 0) {
		json_t *orig = json_object_get(rs, "original_max_position_embeddings");
		if (!orig)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: yarn rope_scaling without "
					     "\"original_max_position_embeddings\"", h->where);
		snprintf(name, sizeof name, "%s.rope.scaling.type", a);
		if ((rc = tfs_hf_kvs_add_str(l, name, "yarn", err)) ||
		    (rc = add_f32_hp(l, a, "rope.scaling.factor", factor, "rope_scaling.factor", h,
				     err)) ||
		    (rc = add_u32_hp(l, a, "rope.scaling.original_context_length", orig,
				     "rope_scaling.original_max_position_embeddings", h, err)))
			return rc;
	}
	return 0;
}

int tfs_hf_param_keys(tfs_hf_kvs *l, const tfs_hf_plan *p, const hparams *h,
		      tfs_error *err)
{
	int rc = model_keys(l, p, h, err);
	return rc ? rc : family_keys(l, p, h, err);
}
