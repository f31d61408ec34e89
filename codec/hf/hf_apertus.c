/*
 * hf_apertus.c - Apertus (ApertusForCausalLM, GGUF architecture apertus), as llama.cpp de3ff81's
 * converter writes it (conversion/llama.py: ApertusModel, a LlamaModel with undo_permute
 * False): Q/K not permuted, q/k norms per head, attention_layernorm and feedforward_layernorm,
 * an MLP of up and down only (xIELU); LlamaModel's keys (vocab_size, rope dimensions), its
 * llama3 rope_freqs and its tokenizer.  The xIELU parameters are tensors of each layer
 * (mlp.act_fn.alpha_n, alpha_p, beta, eps): the converter writes none of them but, once it has
 * seen one of a kind for every layer, the list of their values (float32, by layer) as the key
 * xielu.<kind>, while reading the tensors: after general.architecture, before TextModel's keys
 * (the prepare hook reads them, the extra hook writes them, in the order the kinds complete
 * when each layer's four are read together: alpha_n, alpha_p, beta, eps).  ApertusConfig's
 * defaults (transformers 4.57): llama3 rope scaling (factor 8 from 8192) with theta 1.2e7.
 */
#include "hf_arch.h"
#include "hf_export.h"
#include "hf_plan_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

static const tfs_hf_name blocks[] = {
	{ "attention_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, XN, true },
	{ "feedforward_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* ApertusConfig: the keys the converter reads (rope_scaling's llama3 dict: post_init) */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 131072 }, { "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 0 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 65536 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 12000000.0 },
	{ "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 }, { NULL, 0, 0 },
};

/* ApertusConfig.__init__'s rope_scaling default: llama3, factor 8 from 8192 positions */
static int post_init(json_t *c, const char *where, tfs_error *err)
{
	if (json_object_get(c, "rope_scaling"))
		return 0;
	json_t *rs = json_pack("{s:s, s:f, s:i, s:f, s:f}", "rope_type", "llama3", "factor", 8.0,
			       "original_max_position_embeddings", 8192, "low_freq_factor", 1.0,
			       "high_freq_factor", 4.0);
	if (!rs || json_object_set_new(c, "rope_scaling", rs))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	return 0;
}

/* The xIELU kinds in the order their keys complete, and where prepare keeps their values */
static const char *const kinds[] = { "alpha_n", "alpha_p", "beta", "eps" };
#define KEPT "tensorfs:xielu."

/* Each layer's act_fn.<kind> value (`.float().item()`: one value), as a list in h->root when
 * every layer has one. */
static int prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	int64_t n = h->n_layer;
	float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
	int rc = v ? 0 : tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	for (size_t k = 0; !rc && k < sizeof kinds / sizeof *kinds; k++) {
		int64_t found = 0;
		for (int64_t b = 0; !rc && b < n; b++) {
			char name[96];
			snprintf(name, sizeof name, "model.layers.%lld.mlp.act_fn.%s", (long long)b,
				 kinds[k]);
			long i = tfs_model_find_tensor(st, name);
			if (i < 0)
				continue;
			const tfs_tensor *t = tfs_model_tensor(st, (size_t)i);
			int64_t ne = 1;
			for (uint32_t d = 0; d < t->n_dims; d++)
				ne *= t->ne[d];
			if (ne != 1)
				rc = tfs_error_set(err, TFS_E_FORMAT, "tensor '%s': %lld values, not one "
						   "(the converter takes its .item())", name,
						   (long long)ne);
			else if (!(rc = tfs_tensor_read_f32(st, (size_t)i, 0, 1, &v[b], err)))
				found++;
		}
		if (rc || found != n || n == 0)
			continue;
		json_t *a = json_array();
		char key[64];
		for (int64_t b = 0; a && b < n; b++)
			if (json_array_append_new(a, json_real(v[b])))
				json_decref(a), a = NULL;
		snprintf(key, sizeof key, KEPT "%s", kinds[k]);
		if (!a || json_object_set_new(h->root, key, a))
			rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	}
	free(v);
	return rc;
}

/* LlamaModel's rope_freqs, then the xIELU keys (written while the tensors are read). */
static int extra(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early, const hparams *h,
		 tfs_error *err)
{
	int rc = tfs_hf_llama3_freqs(gen, ngen, early, h, err);
	for (size_t k = 0; !rc && k < sizeof kinds / sizeof *kinds; k++) {
		char key[64];
		snprintf(key, sizeof key, KEPT "%s", kinds[k]);
		json_t *a = json_object_get(h->root, key);
		size_t n = json_array_size(a);
		if (!n)
			continue;
		float *v = malloc(n * sizeof *v);
		if (!v)
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
		for (size_t i = 0; i < n; i++)
			v[i] = (float)json_real_value(json_array_get(a, i));
		snprintf(key, sizeof key, "xielu.%s", kinds[k]);
		rc = tfs_hf_kvs_add_arr_f32(early, key, v, n, err);
		free(v);
	}
	return rc;
}

/* modify_tensors: the act_fn parameters become keys, not tensors */
static bool drop_act_fn(char *name, size_t cap, const hparams *h)
{
	(void)cap, (void)h;
	return !strstr(name, ".mlp.act_fn.");
}

/* The reverse view: each layer's act_fn.<kind> back from xielu.<kind> (shape [1], which
 * .item() takes as the checkpoints' scalars) */
static int xtensors(tfs_hf_export *x, tfs_error *err)
{
	int rc = 0;
	for (size_t k = 0; !rc && k < sizeof kinds / sizeof *kinds; k++) {
		char key[64], name[96];
		snprintf(key, sizeof key, "xielu.%s", kinds[k]);
		long i = tfs_model_find_kv(x->m, key);
		if (i < 0)
			continue;
		for (uint64_t b = 0; !rc; b++) {
			snprintf(name, sizeof name, "model.layers.%llu.mlp.act_fn.%s",
				 (unsigned long long)b, kinds[k]);
			rc = tfs_hf_export_add_kv(x, name, key, b, err);
			if (rc == TFS_E_UNSUPPORTED && b > 0) {   /* the array's end */
				tfs_error_clear(err);
				rc = 0;
				break;
			}
		}
	}
	return rc;
}

static const struct tfs_hf_hooks hooks = { .prepare = prepare, .rename = drop_act_fn,
					    .keys_only = true };

const tfs_hf_arch tfs_hf_arch_apertus = {
	TFS_HF_CLASSES("ApertusForCausalLM"), .gguf = "apertus",
	TFS_HF_NAMES(tfs_hf_globals, blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_LLAMA_PARAMS, .extra = extra,
	.configs = (const tfs_hf_config_class[]){ { "apertus", defaults, NULL, post_init, false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_LLAMA, .hooks = &hooks, .xtensors = xtensors,
};
