/*
 * hf_hunyuan.c - Hunyuan dense (HunYuanDenseV1ForCausalLM, GGUF architecture hunyuan-dense), as
 * llama.cpp de3ff81's converter writes it (conversion/hunyuan.py: HunYuanModel, a TextModel):
 * Q/K not permuted, q/k norms per head (query_layernorm, key_layernorm), lm_head dropped when
 * the embeddings are tied; TextModel's keys without num_experts (popped: a prepare hook), then
 * for NTK-alpha rope scaling (rope_scaling type dynamic) the base scaled by
 * alpha ^ (head_dim / (head_dim - 2)), scaling type none and factor 1, and a context of 256K;
 * the tokenizer from tokenizer.json (hf_vocab.c's hunyuan: eos from eod_token_id, eot from
 * generation_config.json); its tiktoken file is not read.  HunYuanDenseV1Config's defaults
 * (transformers 4.57).
 */
#include "hf_arch.h"
#include "hf_export.h"
#include "hf_plan_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.query_layernorm", "attn_q_norm", HD, NO, XN, true },
	{ "self_attn.key_layernorm", "attn_k_norm", HD, NO, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* HunYuanDenseV1Config: the keys the converter reads (head_dim None by default) */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 290943 }, { "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 0 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 2048 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 10000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ "head_dim", TFS_HF_DEF_NULL, 0 }, { "pad_token_id", TFS_HF_DEF_INT, 0 },
	{ "eod_token_id", TFS_HF_DEF_INT, 3 }, { NULL, 0, 0 },
};

/* set_gguf_parameters: hparams.pop("num_experts") around TextModel's (a dense model's
 * num_experts is 1 at most; more is put back after, which no key of this class reads) */
static int prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	(void)st, (void)err;
	json_object_del(h->root, "num_experts");
	return 0;
}

/* modify_tensors: a tied model's lm_head.weight skipped */
static bool drop_tied_head(char *name, size_t cap, const hparams *h)
{
	(void)cap;
	return !(strcmp(name, "lm_head.weight") == 0 &&
		 tfs_hf_py_true(json_object_get(h->root, "tie_word_embeddings")));
}

static const struct tfs_hf_hooks hooks = { .prepare = prepare, .rename = drop_tied_head,
					    .keys_only = true };

/* HunYuanModel.set_gguf_parameters' own: NTK-alpha rope scaling (dynamic). */
static int keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	const char *rt = json_string_value(json_object_get(h->rope, "rope_type"));
	char name[128];
	int rc;
	if (!rt || (strcmp(rt, "dynamic") != 0 && strcmp(rt, "xdrope") != 0))
		return 0;
	json_t *a = json_object_get(h->rope, "alpha"), *b = json_object_get(h->rope, "rope_theta");
	json_t *hd = json_object_get(h->root, "head_dim");
	if ((a && !json_is_number(a)) || (b && !json_is_number(b)))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: rope_scaling's alpha or rope_theta is "
				     "not a number", h->where);
	if (!json_is_integer(hd) || json_integer_value(hd) == 2)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"head_dim\" is %s (HunYuan's "
				     "converter scales the rope base by it)", h->where,
				     hd ? "not an integer other than 2" : "absent");
	double alpha = a ? json_number_value(a) : 50, base = b ? json_number_value(b) : 10000.0;
	double dim = (double)json_integer_value(hd);
	double scaled = base * pow(alpha, dim / (dim - 2));
	json_t *sv = json_real(scaled);
	rc = sv ? tfs_hf_add_f32(l, h, "rope.freq_base", sv, "rope_theta", err)
		: tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	json_decref(sv);
	snprintf(name, sizeof name, "%s.rope.scaling.type", h->arch->gguf);
	if (rc || (rc = tfs_hf_kvs_add_str(l, name, "none", err)))
		return rc;
	snprintf(name, sizeof name, "%s.rope.scaling.factor", h->arch->gguf);
	if ((rc = tfs_hf_kvs_add_f32(l, name, 1.0f, err)) || strcmp(rt, "dynamic") != 0)
		return rc;
	json_t *ctx = json_object_get(h->root, "max_position_embeddings");
	if (base != 10000.0 || !json_is_integer(ctx) ||
	    (json_integer_value(ctx) != 32 * 1024 && json_integer_value(ctx) != 256 * 1024))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: dynamic rope scaling with rope_theta "
				     "%g and max_position_embeddings other than 32K or 256K: the "
				     "converter's assumptions fail", h->where, base);
	snprintf(name, sizeof name, "%s.rope.scaling.original_context_length", h->arch->gguf);
	if ((rc = tfs_hf_kvs_add_u32(l, name, 256 * 1024, err)))
		return rc;
	snprintf(name, sizeof name, "%s.context_length", h->arch->gguf);
	return tfs_hf_kvs_add_u32(l, name, 256 * 1024, err);
}

/* The reverse view: eos back as eod_token_id and eot as generation_config.json's first eos
 * (hf_special.c's tfs_hf_hunyuan_ids); the scaled rope base (rope scaling none, factor 1,
 * original context 256K: what keys() writes for dynamic) back as rope_theta 10000 and
 * NTK alpha, the shortest decimal alpha whose scaled base is the GGUF's float32. */
static int xconfig(json_t *config, json_t *gen, const tfs_hf_export *x)
{
	double eos, eot, base, dim, orig, factor;
	size_t n;
	const char *t;
	if (gen && tfs_hf_xkv_num(x, "tokenizer.ggml.eot_token_id", &eot) &&
	    tfs_hf_xkv_num(x, "tokenizer.ggml.eos_token_id", &eos))
		json_object_set_new(gen, "eos_token_id", json_pack("[II]", (json_int_t)eot,
								   (json_int_t)eos));
	if (!config)
		return 0;
	if (tfs_hf_xkv_num(x, "tokenizer.ggml.eos_token_id", &eos))
		json_object_set_new(config, "eod_token_id", json_integer((json_int_t)eos));
	if (!(t = tfs_hf_xkv_str(x, ".rope.scaling.type", &n)) || n != 4 || memcmp(t, "none", 4) ||
	    !tfs_hf_xkv_num(x, ".rope.scaling.factor", &factor) || factor != 1 ||
	    !tfs_hf_xkv_num(x, ".rope.scaling.original_context_length", &orig) ||
	    orig != 256 * 1024 || !tfs_hf_xkv_num(x, ".rope.freq_base", &base) ||
	    !tfs_hf_xkv_num(x, ".attention.key_length", &dim) || dim <= 2 || !(base > 10000.0))
		return 0;
	float want = (float)base;
	double a = pow(base / 10000.0, (dim - 2) / dim);
	char s[48];
	for (int p = 1; p <= 17; p++) {
		snprintf(s, sizeof s, "%.*g", p, a);
		if ((float)(10000.0 * pow(strtod(s, NULL), dim / (dim - 2))) == want)
			break;
	}
	double alpha = strtod(s, NULL);
	if ((float)(10000.0 * pow(alpha, dim / (dim - 2))) != want)
		return 0;
	json_object_set_new(config, "rope_theta", json_real(10000.0));
	json_object_set_new(config, "rope_scaling", json_pack("{sssf}", "type", "dynamic",
							      "alpha", alpha));
	json_object_del(config, "original_max_position_embeddings");
	return 0;
}

const tfs_hf_arch tfs_hf_arch_hunyuan_dense = {
	TFS_HF_CLASSES("HunYuanDenseV1ForCausalLM"), .gguf = "hunyuan-dense",
	TFS_HF_NAMES(tfs_hf_globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS, .params = keys,
	TFS_HF_CONFIG("hunyuan_v1_dense", defaults), .vocab = TFS_HF_VOCAB_HUNYUAN,
	.hooks = &hooks, .xconfig = xconfig,
};
