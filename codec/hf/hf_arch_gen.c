/*
 * hf_arch_gen.c - the tensors some classes generate (generate_extra_tensors), and the keys
 * they write while doing it:
 *  - LlamaModel: rope_freqs.weight, llama3 rope scaling's factors (hf_rope.c's arithmetic);
 *  - Phi3MiniModel: rope_factors_long.weight and rope_factors_short.weight (longrope, as
 *    rope_scaling lists them, rounded to float32) and <arch>.rope.scaling.attn_factor.
 */
#include "hf_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hf_rope.h"

/* rope_parameters' full_attention part, or all of it. */
static const json_t *rope_params(const hparams *h)
{
	json_t *r = json_object_get(h->rope, "full_attention");
	return json_is_object(r) ? r : h->rope;
}

/* LlamaModel.generate_extra_tensors: the llama3 rope scaling's factors (float32, dim/2). */
int tfs_hf_llama3_freqs(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early, const hparams *h,
			tfs_error *err)
{
	(void)early;
	return tfs_hf_llama3_freqs_factor(gen, ngen, h, 8.0, err);
}

int tfs_hf_llama3_freqs_factor(tfs_hf_gen *gen, size_t *ngen, const hparams *h,
			       double factor, tfs_error *err)
{
	const json_t *rs = rope_params(h);
	*ngen = 0;
	/* a truthy rope_parameters whose rope_type, lowercased, is llama3 */
	if (json_object_size(rs) == 0)
		return 0;
	const char *rt = json_string_value(json_object_get(rs, "rope_type"));
	if (!rt || strcasecmp(rt, "llama3") != 0)
		return 0;
	double v[5] = { 10000.0, factor, 1.0, 4.0, 8192 };   /* base, factor, lo, hi, old_ctx */
	static const char *const keys[5] = { "rope_theta", "factor", "low_freq_factor",
		"high_freq_factor", "original_max_position_embeddings" };
	for (size_t i = 0; i < 5; i++) {
		json_t *x = json_object_get(rs, keys[i]);
		if (json_is_number(x))
			v[i] = json_number_value(x);
	}
	if (!(v[0] > 0))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: llama3 rope_scaling with rope_theta %g",
				     h->where, v[0]);
	/* equal low and high frequency factors (Llama 4's 1.0, 1.0) are taken: the converter's
	 * assert of different wavelengths is commented out ("Errors for Llama4"), and the
	 * smoothed branch between them is then empty (or 0/0, as torch divides) */
	size_t m = (size_t)(h->head_dim + 1) / 2;
	float *f = malloc(m * sizeof *f);
	if (!f)
		return tfs_error_set(err, TFS_E_NOMEM, "rope_freqs: out of memory");
	tfs_hf_llama3_rope(f, h->head_dim, v[0], v[1], v[2], v[3], v[4]);
	gen[0] = (tfs_hf_gen){ "rope_freqs.weight", f, m };
	*ngen = 1;
	return 0;
}

/* A list of numbers as float32 (torch.tensor(list, dtype=float32)): *out malloc'd. */
static int factor_list(float **out, const json_t *a, const char *key, const hparams *h,
		       tfs_error *err)
{
	size_t n = json_array_size(a);
	*out = malloc((n ? n : 1) * sizeof **out);
	if (!*out)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(a, i);
		if (!json_is_number(x))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: rope_scaling.%s[%zu] is not a "
					     "number", h->where, key, i);
		(*out)[i] = (float)json_number_value(x);
	}
	return 0;
}

/* The rotary dimensions: int(partial_rotary_factor * hidden_size) // num_attention_heads. */
int64_t tfs_hf_phi3_rope_dims(const hparams *h)
{
	json_t *prf = json_object_get(h->rope, "partial_rotary_factor");
	double pct = json_is_number(prf) ? json_number_value(prf) : 1.0;
	return (int64_t)floor(pct * (double)h->hidden) / h->n_head;
}

/* Phi3MiniModel.generate_extra_tensors: the long and short rope factors of longrope. */
int tfs_hf_phi3_factors(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early, const hparams *h,
			tfs_error *err)
{
	const json_t *rp = h->rope;
	json_t *lf = json_object_get(rp, "long_factor"), *sf = json_object_get(rp, "short_factor");
	json_t *ctx = json_object_get(h->root, "n_positions");
	json_t *orig = json_object_get(rp, "original_max_position_embeddings");
	*ngen = 0;
	if (!ctx)
		ctx = json_object_get(h->root, "max_position_embeddings");
	if (!json_array_size(lf))   /* `if not long_factors` */
		return 0;
	if (!json_is_number(ctx) || !json_is_number(orig) || json_number_value(orig) <= 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: longrope rope_scaling without "
				     "max_position_embeddings and original_max_position_embeddings",
				     h->where);
	double scale = json_number_value(ctx) / json_number_value(orig), af;
	const char *rt = json_string_value(json_object_get(rp, "rope_type"));
	if (!rt || !*rt)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: rope_scaling has no type", h->where);
	if (!strcasecmp(rt, "su") || !strcasecmp(rt, "longrope"))
		af = scale > 1.0 ? sqrt(1 + log(scale) / log(json_number_value(orig))) : 1.0;
	else if (!strcasecmp(rt, "yarn"))
		af = scale > 1.0 ? 0.1 * log(scale) + 1.0 : 1.0;
	else
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: rope scaling type %s with rope "
				     "factors: the converter does not support it", h->where, rt);
	char name[128];
	snprintf(name, sizeof name, "%s.rope.scaling.attn_factor", h->arch->gguf);
	int rc = tfs_hf_kvs_add_f32(early, name, (float)af, err);
	if (rc)
		return rc;
	int64_t dims = tfs_hf_phi3_rope_dims(h);
	if (!json_is_array(sf) || json_array_size(sf) != json_array_size(lf) ||
	    2 * (int64_t)json_array_size(lf) != dims)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: rope_scaling's long_factor and "
				     "short_factor must each hold %g numbers (the rotary dimensions "
				     "/ 2)", h->where, (double)dims / 2);
	float *l = NULL, *s = NULL;
	if ((rc = factor_list(&l, lf, "long_factor", h, err)) ||
	    (rc = factor_list(&s, sf, "short_factor", h, err))) {
		free(l);
		free(s);
		return rc;
	}
	gen[0] = (tfs_hf_gen){ "rope_factors_long.weight", l, json_array_size(lf) };
	gen[1] = (tfs_hf_gen){ "rope_factors_short.weight", s, json_array_size(sf) };
	*ngen = 2;
	return 0;
}
