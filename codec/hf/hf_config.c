/*
 * hf_config.c - config.json as llama.cpp's converter reads it (its hparams), for the row the
 * class name found:
 *  1. hparams: AutoConfig.from_pretrained(dir).to_dict(): config.json with its config class's
 *     defaults for the keys it leaves out and what the class's __init__ derives (the config
 *     classes of the rows of tfs_hf_archs[], by model_type); text_config merged to the top
 *     (TextModel.__init__);
 *  2. rope_parameters: hparams' rope_parameters or rope_scaling, with rope_theta, the local
 *     (sliding window) theta, rope_type from type, partial_rotary_factor and
 *     original_max_position_embeddings mirrored into it;
 *  3. the sizes the plan checks tensors against, read and bounded.
 */
#include "hf_plan_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The defaults of config class model_type into obj, then what its __init__ derives (none
 * for a class not known). */
static int complete(json_t *obj, const char *model_type, const hparams *h, tfs_error *err)
{
	const tfs_hf_config_class *cc = tfs_hf_config_class_find(model_type);
	for (const tfs_hf_default *d = cc ? cc->defaults : NULL; d && d->key; d++) {
		int rc = apply_default(obj, d, h, err);
		if (rc)
			return rc;
	}
	int rc = cc && cc->post_init ? cc->post_init(obj, h->where, err) : 0;
	if (rc)
		return rc;
	if (!cc || !cc->text_type)
		return 0;
	/* a sub-config: text_config completed by its own class (absent: all defaults) */
	json_t *tc = json_object_get(obj, "text_config");
	if (!json_is_object(tc)) {
		if (json_object_set_new(obj, "text_config", json_object()))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
		tc = json_object_get(obj, "text_config");
	}
	const char *tt = cc->text_type;
	if (cc->text_own_type) {   /* CONFIG_MAPPING[text_config.get("model_type", text_type)] */
		json_t *m = json_object_get(tc, "model_type");
		if (json_is_string(m))
			tt = json_string_value(m);
		else if (json_object_set_new(tc, "model_type", json_string(tt)))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
		if (!tfs_hf_config_class_find(tt))
			return TFS_PASSTHROUGH;   /* a KeyError: AutoConfig fails */
	}
	return complete(tc, tt, h, err);
}

/* h->root: AutoConfig's to_dict() (config.json with its class's defaults; config.json as
 * written when AutoConfig would fail on a sub-config's model_type), then text_config merged
 * to the top ({**hparams, **hparams["text_config"]}). */
static int build_root(hparams *h, tfs_error *err)
{
	h->root = json_deep_copy(h->file);
	if (!h->root)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	const char *mt = json_string_value(json_object_get(h->root, "model_type"));
	int rc = complete(h->root, mt, h, err);
	if (rc == TFS_PASSTHROUGH) {   /* load_hparams' fallback: "Trying to load config.json" */
		json_decref(h->root);
		if (!(h->root = json_deep_copy(h->file)))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
		rc = 0;
	}
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

