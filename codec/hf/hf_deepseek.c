/*
 * hf_deepseek.c - DeepSeek V2 and V3 in the GGUF view (DeepseekV2ForCausalLM,
 * DeepseekV3ForCausalLM), as llama.cpp de3ff81's converter writes them (its DeepseekV2Model,
 * GGUF architecture deepseek2), and GLM-4.5 (Glm4MoeForCausalLM, glm4moe: its MoE layers are
 * DeepSeek's, its attention Qwen's, its MTP layers kept as nextn.* tensors):
 *  - multi-head latent attention: q_a_proj/q_a_layernorm/q_b_proj (q_proj when q_lora_rank is
 *    null, V2-Lite), kv_a_proj_with_mqa, kv_a_layernorm, and kv_b_proj split per head into
 *    attn_k_b (each head's first qk_nope_head_dim rows, transposed) and attn_v_b (its next
 *    v_head_dim rows), computed on read from kv_b_proj's bytes (tfs_hf_slice_read);
 *  - the first first_k_dense_replace layers dense (mlp.{gate,up,down}_proj), the others with
 *    a router (mlp.gate), routed experts stacked as hf_moe.c does (n_routed_experts), shared
 *    experts (mlp.shared_experts.*) and V3's router bias (e_score_correction_bias ->
 *    exp_probs_b.bias);
 *  - the multi-token-prediction layers (model.layers.N for N >= num_hidden_layers) skipped,
 *    and lm_head when tie_word_embeddings;
 *  - keys: num_key_value_heads written as 1 (MLA as MQA), the MLA lengths and ranks, the
 *    expert counts, scale and norm, the yarn log multiplier (0.1 x mscale_all_dim).
 */
#include "hf_moe.h"
#include "hf_names.h"
#include "hf_plan_impl.h"
#include "hf_export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* axis kinds of the DeepSeek tables */
enum {
	D_QA = TFS_HF_D_ROW,      /* q_lora_rank */
	D_QB,                     /* num_attention_heads x (qk_nope + qk_rope) */
	D_KVA,                    /* kv_lora_rank + qk_rope_head_dim */
	D_KVR,                    /* kv_lora_rank */
	D_O,                      /* num_attention_heads x v_head_dim */
	D_SH,                     /* moe_intermediate_size x n_shared_experts */
	D_EXP,                    /* n_routed_experts */
	D_H2,                     /* 2 x hidden_size */
	D_LAST
};

enum { H = TFS_HF_D_HIDDEN, FF = TFS_HF_D_FF, VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE,
       FE = TFS_HF_D_FF_EXP };
enum { XN = TFS_HF_XF_NONE };

/* attn_k_b's rows of one head are read whole (tfs_hf_slice_read): their bound */
enum { HEAD_MAX = 64 << 20 };

/* ==== the rows ==== */


/* kv_b_proj and e_score_correction_bias are the hook's (ds_tensor); the dense MLP, the
 * router, the shared experts and q_proj / q_a_* / q_b_proj are there in some layers only */
#define DS_BLOCKS \
	{ "input_layernorm", "attn_norm", H, NO, XN, true }, \
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true }, \
	{ "self_attn.q_proj", "attn_q", D_QB, H, XN, false }, \
	{ "self_attn.q_a_proj", "attn_q_a", D_QA, H, XN, false }, \
	{ "self_attn.q_a_layernorm", "attn_q_a_norm", D_QA, NO, XN, false }, \
	{ "self_attn.q_b_proj", "attn_q_b", D_QB, D_QA, XN, false }, \
	{ "self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa", D_KVA, H, XN, true }, \
	{ "self_attn.kv_a_layernorm", "attn_kv_a_norm", D_KVR, NO, XN, true }, \
	{ "self_attn.o_proj", "attn_output", H, D_O, XN, true }, \
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, false }, \
	{ "mlp.up_proj", "ffn_up", FF, H, XN, false }, \
	{ "mlp.down_proj", "ffn_down", H, FF, XN, false }, \
	{ "mlp.gate", "ffn_gate_inp", D_EXP, H, XN, false }, \
	{ "mlp.shared_experts.gate_proj", "ffn_gate_shexp", D_SH, H, XN, false }, \
	{ "mlp.shared_experts.up_proj", "ffn_up_shexp", D_SH, H, XN, false }, \
	{ "mlp.shared_experts.down_proj", "ffn_down_shexp", H, D_SH, XN, false },

static const tfs_hf_name blocks[] = { DS_BLOCKS };

/* The MTP layers' own tensors, kept as nextn.* (GLM-4.5's and GLM-4.7-Flash's) */
#define NEXTN_BLOCKS \
	{ "eh_proj", "nextn.eh_proj", H, D_H2, XN, false }, \
	{ "embed_tokens", "nextn.embed_tokens", VOC, H, XN, false }, \
	{ "enorm", "nextn.enorm", H, NO, XN, false }, \
	{ "hnorm", "nextn.hnorm", H, NO, XN, false }, \
	{ "shared_head.head", "nextn.shared_head_head", VOC, H, XN, false }, \
	{ "shared_head.norm", "nextn.shared_head_norm", H, NO, XN, false },

/* GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek's blocks, its MTP layers kept, whose own
 * tensors are nextn.* (TFS_HF_ARCH_NEXTN_LAYERS counts them as layers) */
static const tfs_hf_name lite_blocks[] = {
	DS_BLOCKS
	NEXTN_BLOCKS
};

static int ds_tensor(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		     tfs_hf_stack *out, size_t *n, tfs_error *err);
static int glm_tensor(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		      tfs_hf_stack *out, size_t *n, tfs_error *err);

static const char *const k_routed[] = { "n_routed_experts", NULL };

static const tfs_hf_moe ds_moe = {
	"mlp.experts", { "down_proj", "gate_proj", "up_proj" },
	{ "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps" },
	{ H, FE, FE }, { FE, H, H }, k_routed, ds_tensor,
};


/* GLM-4.5 (Glm4MoeModel, glm4moe): Qwen-style attention (biases, q/k norms), a norm after
 * attention, the DeepSeek-style MoE layers, and the MTP layers kept: their own tensors are
 * nextn.* (TFS_HF_ARCH_NEXTN_LAYERS counts them as layers) */
enum { Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, HD = TFS_HF_D_HEAD };
static const tfs_hf_name glm_blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, XN, false },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, XN, false },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, false },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, false },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, false },
	{ "mlp.gate", "ffn_gate_inp", D_EXP, H, XN, false },
	{ "mlp.shared_experts.gate_proj", "ffn_gate_shexp", D_SH, H, XN, false },
	{ "mlp.shared_experts.up_proj", "ffn_up_shexp", D_SH, H, XN, false },
	{ "mlp.shared_experts.down_proj", "ffn_down_shexp", H, D_SH, XN, false },
	NEXTN_BLOCKS
};

static const tfs_hf_moe glm_moe = {
	"mlp.experts", { "down_proj", "gate_proj", "up_proj" },
	{ "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps" },
	{ H, FE, FE }, { FE, H, H }, k_routed, glm_tensor,
};

/* ==== config class defaults (transformers 4.57) ==== */

enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL, DB = TFS_HF_DEF_BOOL,
       DKV = TFS_HF_DEF_KV_HEADS };

/* DeepseekV2Config (Llama's parameters and values, then its own); head_dim is derived
 * (qk_rope_head_dim) in ds_keys */
static const tfs_hf_default v2_defaults[] = {
	{ "vocab_size", DI, 32000 }, { "num_key_value_heads", DKV, 0 },
	{ "max_position_embeddings", DI, 2048 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "tie_word_embeddings", DB, 0 }, { "first_k_dense_replace", DI, 0 },
	{ "kv_lora_rank", DI, 512 }, { "q_lora_rank", DI, 1536 }, { "n_group", DN, 0 },
	{ "n_routed_experts", DI, 64 }, { "n_shared_experts", DI, 2 },
	{ "qk_nope_head_dim", DI, 128 }, { "qk_rope_head_dim", DI, 64 },
	{ "routed_scaling_factor", DR, 1.0 }, { "topk_group", DN, 0 },
	{ "norm_topk_prob", DB, 0 }, { "v_head_dim", DI, 128 },
	{ "num_experts_per_tok", DN, 0 }, { "moe_intermediate_size", DI, 1407 },
	{ NULL, 0, 0 },
};

/* DeepseekV3Config */
static const tfs_hf_default v3_defaults[] = {
	{ "vocab_size", DI, 129280 }, { "num_key_value_heads", DKV, 128 },
	{ "max_position_embeddings", DI, 4096 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "tie_word_embeddings", DB, 0 }, { "first_k_dense_replace", DI, 3 },
	{ "kv_lora_rank", DI, 512 }, { "q_lora_rank", DI, 1536 }, { "n_group", DI, 8 },
	{ "n_routed_experts", DI, 256 }, { "n_shared_experts", DI, 1 },
	{ "qk_nope_head_dim", DI, 128 }, { "qk_rope_head_dim", DI, 64 },
	{ "routed_scaling_factor", DR, 2.5 }, { "topk_group", DI, 4 },
	{ "norm_topk_prob", DB, 1 }, { "v_head_dim", DI, 128 },
	{ "num_experts_per_tok", DI, 8 }, { "moe_intermediate_size", DI, 2048 },
	{ NULL, 0, 0 },
};

/* DeepseekV2Config and DeepseekV3Config.__init__: head_dim = qk_rope_head_dim */
static int ds_post_init(json_t *obj, const char *where, tfs_error *err)
{
	json_t *v = json_object_get(obj, "qk_rope_head_dim");
	if (v && json_object_set(obj, "head_dim", v))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	return 0;
}

static const tfs_hf_config_class config_classes[] = {
	{ "deepseek_v2", v2_defaults, NULL, ds_post_init, false },
	{ "deepseek_v3", v3_defaults, NULL, ds_post_init, false },
	{ NULL, NULL, NULL, NULL, false },
};

/* ==== axes ==== */

/* hparams[key] as a positive integer, or -1. */
static int64_t int_of(const hparams *h, const char *key)
{
	json_t *v = json_object_get(h->root, key);
	return json_is_integer(v) && json_integer_value(v) > 0 &&
	       json_integer_value(v) <= UINT32_MAX ? json_integer_value(v) : -1;
}

/* a x b, or -1 when either is unknown */
static int64_t mul(int64_t a, int64_t b) { return a < 0 || b < 0 ? -1 : a * b; }
static int64_t add(int64_t a, int64_t b) { return a < 0 || b < 0 ? -1 : a + b; }

static int64_t ds_dim(int d, const hparams *h)
{
	int64_t rope = int_of(h, "qk_rope_head_dim"), nope = int_of(h, "qk_nope_head_dim");
	int64_t kvr = int_of(h, "kv_lora_rank");
	static const char *const k_ff[] = { "moe_intermediate_size", "intermediate_size", NULL };
	switch (d) {
	case D_QA: return int_of(h, "q_lora_rank");
	case D_QB: return mul(h->n_head, add(nope, rope));
	case D_KVA: return add(kvr, rope);
	case D_KVR: return kvr;
	case D_O: return mul(h->n_head, int_of(h, "v_head_dim"));
	case D_SH: {
		json_t *v = tfs_hf_find(h->root, k_ff, NULL);
		int64_t ff = json_is_integer(v) ? json_integer_value(v) : -1;
		return mul(ff > 0 ? ff : -1, int_of(h, "n_shared_experts"));
	}
	case D_EXP: return int_of(h, "n_routed_experts");
	case D_H2: return mul(h->hidden, 2);
	default: return 0;
	}
}

static const char *ds_dim_text(int d)
{
	static const char *const text[] = {
		"q_lora_rank", "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)",
		"kv_lora_rank + qk_rope_head_dim", "kv_lora_rank",
		"num_attention_heads x v_head_dim", "moe_intermediate_size x n_shared_experts",
		"n_routed_experts", "2 x hidden_size",
	};
	return d >= D_QA && d < D_LAST ? text[d - D_QA] : "";
}

/* ==== tensors: the hook ==== */

static bool float_dtype(int dt)
{
	return dt == TFS_DT_F32 || dt == TFS_DT_F16 || dt == TFS_DT_BF16;
}

/* hparams[key] as an integer the converter's arithmetic takes, or an error naming it. */
static int need_int(int64_t *out, const hparams *h, const char *key, tfs_error *err)
{
	json_t *v = json_object_get(h->root, key);
	if (!v)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\" (the converter needs it for "
				     "%s)", h->where, key, h->arch->classes[0]);
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a 32-bit unsigned "
				     "integer", h->where, key);
	*out = json_integer_value(v);
	return 0;
}

/* kv_b_proj [heads x (nope + v), kv_lora_rank] -> attn_k_b [heads][kv_lora_rank][nope] (each
 * head's first nope rows, transposed) and attn_v_b [heads][v][kv_lora_rank]. */
static int split_kv_b(const hparams *h, const tfs_tensor *t, size_t idx, unsigned long bid,
		      const char *where, tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	int64_t heads, nope, v, rank = int_of(h, "kv_lora_rank");
	int rc;
	if ((rc = need_int(&heads, h, "num_key_value_heads", err)) ||
	    (rc = need_int(&v, h, "v_head_dim", err)) ||
	    (rc = need_int(&nope, h, "qk_nope_head_dim", err)))
		return rc;
	if (!float_dtype(t->dtype)) {
		const tfs_dtype_info *di = tfs_dtype(t->dtype);
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is %s; the GGUF view "
				     "converts F32, F16 and BF16 weights only", where, t->name,
				     di ? di->name : "of an unknown type");
	}
	if (t->n_dims != 2 || heads == 0 || t->ne[1] != heads * (nope + v) ||
	    (rank > 0 && t->ne[0] != rank) || t->ne[0] <= 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has shape [%lld, %lld] "
				     "(%u dims), but %s says [%lld, %lld] (num_key_value_heads x "
				     "(qk_nope_head_dim + v_head_dim), kv_lora_rank)", where,
				     t->name, (long long)(t->n_dims > 1 ? t->ne[1] : 0),
				     (long long)t->ne[0], t->n_dims, h->where,
				     (long long)(heads * (nope + v)), (long long)rank);
	if (nope == 0 || v == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: qk_nope_head_dim and v_head_dim must "
				     "not be 0", h->where);
	if ((uint64_t)nope * (uint64_t)t->ne[0] * 4 > HEAD_MAX)   /* F32 at most */
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s': a head of %lld x "
				     "%lld values; the GGUF view reads heads of at most %d MiB",
				     where, t->name, (long long)nope, (long long)t->ne[0],
				     HEAD_MAX >> 20);
	static const char *const names[2] = { "attn_k_b", "attn_v_b" };
	for (int k = 0; k < 2; k++) {
		tfs_hf_stack *o = &out[k];
		memset(o, 0, sizeof *o);
		snprintf(o->name, sizeof o->name, "blk.%lu.%s.weight", bid, names[k]);
		o->src = (long)idx;
		o->shape = *t;
		o->shape.name = o->name;
		o->shape.n_dims = 3;
		o->shape.ne[0] = k ? t->ne[0] : nope;
		o->shape.ne[1] = k ? v : t->ne[0];
		o->shape.ne[2] = heads;
		o->slice = (tfs_hf_slice){ (uint32_t)heads, (uint32_t)(nope + v),
					   (uint32_t)(k ? nope : 0), (uint32_t)(k ? v : nope), !k };
	}
	*n = 2;
	return 0;
}

/* DeepseekV2Model.modify_tensors (and ModelBase.filter_tensors' e_score_correction_bias) for
 * what hf_moe.c's stacking and the name tables do not cover. */
static int tensor_of(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		     bool ds, tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(st, idx);
	unsigned long bid;
	const char *rest;
	*n = 0;
	json_t *tie = json_object_get(h->root, "tie_word_embeddings");
	bool tied = tfs_hf_py_true(tie);
	if (ds && tied && (!strcmp(t->name, "lm_head.weight") ||
			   !strcmp(t->name, "model.lm_head.weight")))
		return 0;   /* tied: token_embd serves */
	if (!tfs_hf_index_of(t->name, "model.layers.", &bid, &rest))
		return TFS_PASSTHROUGH;
	if (ds && (int64_t)bid >= h->n_layer)
		return 0;   /* a multi-token-prediction layer (skip_mtp) */
	if (ds && !strcmp(rest, "self_attn.kv_b_proj.weight"))
		return split_kv_b(h, t, idx, bid, where, out, n, err);
	if (strcmp(rest, "mlp.gate.e_score_correction_bias"))
		return TFS_PASSTHROUGH;
	int64_t ne = int_of(h, "n_routed_experts");
	if (!float_dtype(t->dtype) || t->n_dims != 1 || (ne > 0 && t->ne[0] != ne))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is not a float vector of "
				     "n_routed_experts (%lld) values", where, t->name,
				     (long long)ne);
	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "blk.%lu.exp_probs_b.bias", bid);
	out->src = (long)idx;
	out->shape = *t;
	out->shape.name = out->name;
	*n = 1;
	return 0;
}

static int ds_tensor(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		     tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	return tensor_of(h, st, idx, where, true, out, n, err);
}

/* GLM-4.5's: only the router bias */
static int glm_tensor(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		      tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	return tensor_of(h, st, idx, where, false, out, n, err);
}

/* ==== keys: DeepseekV2Model.set_gguf_parameters ==== */

static int put_u32(tfs_hf_kvs *l, const hparams *h, const char *suffix, int64_t v,
		   tfs_error *err)
{
	char name[128];
	if (v < 0 || v > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s would be %lld, not a 32-bit "
				     "unsigned integer", h->where, suffix, (long long)v);
	snprintf(name, sizeof name, "%s.%s", h->arch->gguf, suffix);
	return tfs_hf_kvs_add_u32(l, name, (uint32_t)v, err);
}

static int ds_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *root = h->root, *v;
	int64_t nl, kvr = 512, rope, nope, vd;
	int rc;
	/* MLA written as MQA; rms_norm_eps 1e-6 when absent */
	if (json_object_set_new(root, "num_key_value_heads", json_integer(1)) ||
	    (!json_object_get(root, "rms_norm_eps") &&
	     json_object_set_new(root, "rms_norm_eps", json_real(1e-6))))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	if ((rc = tfs_hf_text_keys(l, h, err)))
		return rc;
	/* leading dense layers: first_k_dense_replace, else all without experts, none with */
	v = json_object_get(root, "first_k_dense_replace");
	json_t *nre = json_object_get(root, "n_routed_experts");
	bool moe = nre && !json_is_null(nre);
	if (v && !json_is_null(v))
		rc = tfs_hf_add_u32(l, h, "leading_dense_block_count", v, "first_k_dense_replace",
				    err);
	else
		rc = (rc = need_int(&nl, h, "num_hidden_layers", err)) ? rc :
			put_u32(l, h, "leading_dense_block_count", moe ? 0 : nl, err);
	if (rc || (rc = tfs_hf_need(&v, h, "vocab_size", err)) ||
	    (rc = tfs_hf_add_u32(l, h, "vocab_size", v, "vocab_size", err)))
		return rc;
	if (json_object_get(root, "kv_lora_rank") && (rc = need_int(&kvr, h, "kv_lora_rank", err)))
		return rc;
	if ((v = json_object_get(root, "q_lora_rank")) && !json_is_null(v) &&
	    (rc = tfs_hf_add_u32(l, h, "attention.q_lora_rank", v, "q_lora_rank", err)))
		return rc;
	if ((rc = need_int(&rope, h, "qk_rope_head_dim", err)) ||
	    (rc = put_u32(l, h, "attention.kv_lora_rank", kvr, err)) ||
	    (rc = put_u32(l, h, "attention.key_length", kvr + rope, err)) ||
	    (rc = put_u32(l, h, "attention.value_length", kvr, err)) ||
	    (rc = need_int(&nope, h, "qk_nope_head_dim", err)) ||
	    (rc = put_u32(l, h, "attention.key_length_mla", nope + rope, err)) ||
	    (rc = need_int(&vd, h, "v_head_dim", err)) ||
	    (rc = put_u32(l, h, "attention.value_length_mla", vd, err)))
		return rc;
	static const char *const k_ff[] = { "moe_intermediate_size", "intermediate_size", NULL };
	const char *which = k_ff[0];
	if (!(v = tfs_hf_find(root, k_ff, &which)))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"moe_intermediate_size\" nor "
				     "\"intermediate_size\"", h->where);
	if ((rc = tfs_hf_add_u32(l, h, "expert_feed_forward_length", v, which, err)) ||
	    (moe && (rc = tfs_hf_add_u32(l, h, "expert_count", nre, "n_routed_experts", err))))
		return rc;
	v = json_object_get(root, "n_shared_experts");
	if ((rc = v ? tfs_hf_add_u32(l, h, "expert_shared_count", v, "n_shared_experts", err)
		    : put_u32(l, h, "expert_shared_count", 0, err)))
		return rc;
	if ((v = json_object_get(root, "routed_scaling_factor")) && !json_is_null(v) &&
	    (rc = tfs_hf_add_f32(l, h, "expert_weights_scale", v, "routed_scaling_factor", err)))
		return rc;
	char name[128];
	snprintf(name, sizeof name, "%s.expert_weights_norm", h->arch->gguf);
	if ((v = json_object_get(root, "norm_topk_prob")) && tfs_hf_py_true(v) &&
	    (rc = tfs_hf_kvs_add_bool(l, name, true, err)))
		return rc;
	if ((rc = put_u32(l, h, "rope.dimension_count", rope, err)))
		return rc;
	/* [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]: 0.1 x mscale_all_dim */
	v = json_object_get(h->rope, "mscale_all_dim");
	if (v && !json_is_null(v)) {
		if (!json_is_number(v))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: rope_scaling's mscale_all_dim is "
					     "not a number", h->where);
		snprintf(name, sizeof name, "%s.rope.scaling.yarn_log_multiplier", h->arch->gguf);
		return tfs_hf_kvs_add_f32(l, name, (float)(0.1 * json_number_value(v)), err);
	}
	return 0;
}

/* Glm4MoeModel.set_gguf_parameters' own, after TextModel's: block_count with the MTP
 * layers, partial rotary, the expert keys, sigmoid gating, nextn_predict_layers. */
static int glm_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const struct { const char *key, *suffix; char kind; } opt[] = {
		{ "n_routed_experts", "expert_count", 'u' },
		{ "moe_intermediate_size", "expert_feed_forward_length", 'u' },
		{ "n_shared_experts", "expert_shared_count", 'u' },
		{ "first_k_dense_replace", "leading_dense_block_count", 'u' },
		{ NULL, "expert_gating_func", 'g' },
		{ "routed_scaling_factor", "expert_weights_scale", 'f' },
		{ "norm_topk_prob", "expert_weights_norm", 'b' },
		{ "num_nextn_predict_layers", "nextn_predict_layers", 'u' },
	};
	json_t *hd = json_object_get(h->root, "head_dim");
	json_t *prf = json_object_get(h->rope, "partial_rotary_factor");
	char name[128];
	int rc = put_u32(l, h, "block_count", h->n_layer, err);
	if (rc)
		return rc;
	if (hd && !json_is_null(hd) && !json_is_integer(hd))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"head_dim\" is not an integer",
				     h->where);
	if (prf && !json_is_number(prf))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"partial_rotary_factor\" is not a "
				     "number", h->where);
	double dim = hd && !json_is_null(hd) ? (double)json_integer_value(hd)
					     : (double)(h->hidden / h->n_head);
	if ((rc = put_u32(l, h, "rope.dimension_count",
			  (int64_t)(dim * (prf ? json_number_value(prf) : 0.5)), err)))
		return rc;
	for (size_t i = 0; i < N(opt) && !rc; i++) {
		json_t *v = opt[i].key ? json_object_get(h->root, opt[i].key) : NULL;
		snprintf(name, sizeof name, "%s.%s", h->arch->gguf, opt[i].suffix);
		if (opt[i].kind == 'g')
			rc = tfs_hf_kvs_add_u32(l, name, 2, err);   /* SIGMOID */
		else if (!v || json_is_null(v))
			continue;
		else if (opt[i].kind == 'u')
			rc = tfs_hf_add_u32(l, h, opt[i].suffix, v, opt[i].key, err);
		else if (opt[i].kind == 'f')
			rc = tfs_hf_add_f32(l, h, opt[i].suffix, v, opt[i].key, err);
		else
			rc = tfs_hf_kvs_add_bool(l, name, tfs_hf_py_true(v), err);
	}
	return rc;
}

/* ==== reading a slice ==== */


int tfs_hf_slice_read(const tfs_model *st, const tfs_hf_tensor *t, uint64_t e0, uint64_t cnt,
		      uint8_t *buf, tfs_error *err)
{
	const tfs_hf_slice *s = &t->slice;
	uint64_t es = tfs_dtype(t->src_dtype)->block_bytes;
	uint64_t cols = (uint64_t)tfs_model_tensor(st, (size_t)t->src)->ne[0];
	uint64_t end = e0 + cnt;
	int rc = 0;
	if (!s->transpose) {   /* rows [off, off + n) of each head, as they are */
		for (uint64_t e = e0; e < end && !rc;) {
			uint64_t r = e / cols, c = e % cols, k = cols - c;
			uint64_t sr = r / s->n * s->group + s->off + r % s->n;
			if (k > end - e)
				k = end - e;
			rc = tfs_tensor_read_exact(st, (size_t)t->src, (sr * cols + c) * es, k * es,
						   buf + (e - e0) * es, err);
			e += k;
		}
		return rc;
	}
	/* transposed: output element (head, c, j) is the source's (head x group + off + j, c);
	 * per head its n rows are read whole in one read (at most HEAD_MAX bytes: split_kv_b
	 * refuses larger heads; 128 KiB for DeepSeek-V3 in BF16), then picked in output order */
	uint64_t per = cols * s->n;
	uint8_t *tmp = malloc(s->n * cols * es);
	if (!tmp)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	for (uint64_t e = e0; e < end && !rc;) {
		uint64_t hd = e / per, stop = (hd + 1) * per < end ? (hd + 1) * per : end;
		uint64_t r0 = hd * s->group + s->off;
		rc = tfs_tensor_read_exact(st, (size_t)t->src, r0 * cols * es, s->n * cols * es, tmp, err);
		for (uint64_t x = e; x < stop && !rc; x++) {
			uint64_t w = x - hd * per, c = w / s->n, j = w % s->n;
			memcpy(buf + (x - e0) * es, tmp + (j * cols + c) * es, (size_t)es);
		}
		e = stop;
	}
	free(tmp);
	return rc;
}

/* Glm4MoeLiteModel.set_gguf_parameters: DeepseekV2Model's, the block count with the MTP
 * layers, nextn_predict_layers when there are some */
static int lite_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	int64_t trunk;
	int rc = ds_keys(l, h, err);
	if (rc || (rc = need_int(&trunk, h, "num_hidden_layers", err)) ||
	    (rc = put_u32(l, h, "block_count", h->n_layer, err)) || h->n_layer <= trunk)
		return rc;
	return put_u32(l, h, "nextn_predict_layers", h->n_layer - trunk, err);
}

/* ==== the reverse view (hf_export.h) ==== */

/* What tensor_of() made, as the checkpoint holds it: attn_k_b [heads, kv_lora, nope] and
 * attn_v_b [heads, v, kv_lora] as kv_b_proj [heads x (nope + v), kv_lora], each head's nope
 * rows k_b's transposed back, then its v rows (the exact inverse of the converter's view,
 * split and transpose: every element kept); exp_probs_b.bias as the router's
 * e_score_correction_bias. */
static int ds_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	unsigned long b;
	const char *r;
	if (!tfs_hf_index_of(t->name, "blk.", &b, &r))
		return 0;
	char name[160], other[160];
	if (!strcmp(r, "exp_probs_b.bias")) {
		snprintf(name, sizeof name, "model.layers.%lu.mlp.gate.e_score_correction_bias", b);
		int rc = tfs_hf_export_add_mix(x, name, &i, 1, false, false, err);
		return rc ? rc : 1;
	}
	bool kb = !strcmp(r, "attn_k_b.weight");
	if (!kb && strcmp(r, "attn_v_b.weight"))
		return 0;
	/* the pair: found by attn_k_b, attn_v_b taken with it (each needs the other) */
	snprintf(other, sizeof other, "blk.%lu.%s.weight", b, kb ? "attn_v_b" : "attn_k_b");
	long j = tfs_model_find_tensor(x->m, other);
	if (j < 0 || tfs_model_tensor(x->m, (size_t)j)->deleted)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: no %s to make kv_b_proj "
				     "of", t->name, other);
	if (!kb)
		return 1;
	snprintf(name, sizeof name, "model.layers.%lu.self_attn.kv_b_proj.weight", b);
	int rc = tfs_hf_export_add_groups(x, name, i, (size_t)j, err);
	return rc ? rc : 1;
}

/* What DeepSeek's and GLM-4.5's keys share, back into config.json: the leading dense
 * layers, the shared experts, the experts' scale and norm, and the MTP layers that
 * GLM-4.5's and GLM-4.7-Flash's block count holds after num_hidden_layers. */
static void moe_xconfig(json_t *config, const tfs_hf_export *x)
{
	static const struct { const char *gguf, *hf; } as_is[] = {
		{ ".leading_dense_block_count", "first_k_dense_replace" },
		{ ".expert_shared_count", "n_shared_experts" },
	};
	double v, nl, mtp;
	float f;
	for (size_t k = 0; k < N(as_is); k++)
		if (tfs_hf_xkv_num(x, as_is[k].gguf, &v))
			json_object_set_new(config, as_is[k].hf, json_integer((json_int_t)v));
	if (tfs_hf_xkv_f32(x, ".expert_weights_scale", &f))
		json_object_set_new(config, "routed_scaling_factor", json_real(f));
	if (tfs_hf_xkv_num(x, ".expert_weights_norm", &v))
		json_object_set_new(config, "norm_topk_prob", json_boolean(v != 0));
	if (tfs_hf_xkv_num(x, ".nextn_predict_layers", &mtp) &&
	    tfs_hf_xkv_num(x, ".block_count", &nl) && mtp < nl) {
		json_object_set_new(config, "num_hidden_layers",
				    json_integer((json_int_t)(nl - mtp)));
		json_object_set_new(config, "num_nextn_predict_layers",
				    json_integer((json_int_t)mtp));
	}
}

/* config.json back from ds_keys' keys: num_key_value_heads (written as 1: MLA as MQA; the
 * split of kv_b_proj needs the heads, which MLA's K/V have as many of as Q), the MLA ranks
 * and lengths (qk_nope_head_dim: key_length_mla - the rope dimensions), mscale_all_dim (the
 * shortest decimal m whose float32 of 0.1 x m is the yarn log multiplier), and
 * moe_xconfig's. */
static int ds_xconfig(json_t *config, json_t *gen, const tfs_hf_export *x)
{
	static const struct { const char *gguf, *hf; } as_is[] = {
		{ ".attention.q_lora_rank", "q_lora_rank" },
		{ ".attention.kv_lora_rank", "kv_lora_rank" },
		{ ".attention.value_length_mla", "v_head_dim" },
		{ ".rope.dimension_count", "qk_rope_head_dim" },
	};
	double v, rope, mla;
	float f;
	(void)gen;
	if (!config)
		return 0;
	if (tfs_hf_xkv_num(x, ".attention.head_count", &v))
		json_object_set_new(config, "num_key_value_heads", json_integer((json_int_t)v));
	for (size_t k = 0; k < N(as_is); k++)
		if (tfs_hf_xkv_num(x, as_is[k].gguf, &v))
			json_object_set_new(config, as_is[k].hf, json_integer((json_int_t)v));
	/* (the converter reads q_lora_rank null as q_proj's MLA: V2-Lite) */
	if (!json_object_get(config, "q_lora_rank"))
		json_object_set_new(config, "q_lora_rank", json_null());
	if (tfs_hf_xkv_num(x, ".attention.key_length_mla", &mla) &&
	    tfs_hf_xkv_num(x, ".rope.dimension_count", &rope))
		json_object_set_new(config, "qk_nope_head_dim",
				    json_integer((json_int_t)(mla - rope)));
	/* no head_dim: TextModel would write key_length (kv_lora + rope) at its place, where
	 * only DeepseekV2Config's head_dim (qk_rope_head_dim, ds_post_init) puts one; a row
	 * without config classes (GLM-4.7-Flash: config.json as written) has none */
	if (!x->row->configs)
		json_object_del(config, "head_dim");
	moe_xconfig(config, x);
	json_t *rs = json_object_get(config, "rope_scaling");
	if (json_is_object(rs) && tfs_hf_xkv_f32(x, ".rope.scaling.yarn_log_multiplier", &f)) {
		char t[48];
		double m = f / 0.1;
		for (int p = 1; p <= 17; p++) {
			snprintf(t, sizeof t, "%.*g", p, m);
			if ((float)(0.1 * strtod(t, NULL)) == f)
				break;
		}
		json_object_set_new(rs, "mscale_all_dim", json_real(strtod(t, NULL)));
	}
	return 0;
}

/* GLM-4.5's keys (glm_keys) back: moe_xconfig's, partial_rotary_factor (the shortest
 * decimal whose product with head_dim truncates to the rope dimensions), and no
 * scoring_func (glm_keys writes the gating itself: from config.json TextModel would write
 * it first too). */
static int glm_xconfig(json_t *config, json_t *gen, const tfs_hf_export *x)
{
	double dims, hd = 0, hidden, heads;
	(void)gen;
	if (!config)
		return 0;
	moe_xconfig(config, x);
	json_object_del(config, "scoring_func");
	if (!tfs_hf_xkv_num(x, ".attention.key_length", &hd) &&
	    tfs_hf_xkv_num(x, ".embedding_length", &hidden) &&
	    tfs_hf_xkv_num(x, ".attention.head_count", &heads) && heads > 0)
		hd = floor(hidden / heads);
	if (tfs_hf_xkv_num(x, ".rope.dimension_count", &dims) && hd > 0) {
		char t[48];
		for (int p = 1; p <= 17; p++) {
			snprintf(t, sizeof t, "%.*g", p, dims / hd);
			if ((double)(int64_t)(hd * strtod(t, NULL)) == dims)
				break;
		}
		json_object_set_new(config, "partial_rotary_factor", json_real(strtod(t, NULL)));
	}
	return 0;
}

/* ==== the rows ==== */

static const struct tfs_hf_hooks hooks = { .dim = ds_dim, .dim_text = ds_dim_text };

/* TextModel's keys come from ds_keys (after its changes to hparams) */
const tfs_hf_arch tfs_hf_arch_deepseek2 = {
	TFS_HF_CLASSES("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"), .gguf = "deepseek2",
	TFS_HF_NAMES(tfs_hf_globals, blocks), .params = ds_keys, .configs = config_classes,
	.vocab = TFS_HF_VOCAB_GPT2, .moe = &ds_moe, .hooks = &hooks, .xconfig = ds_xconfig,
	.xtensor = ds_xtensor,
};

const tfs_hf_arch tfs_hf_arch_glm4moe = {
	TFS_HF_CLASSES("Glm4MoeForCausalLM"), .gguf = "glm4moe",
	TFS_HF_NAMES(tfs_hf_globals, glm_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_NEXTN_LAYERS, .params = glm_keys,
	.vocab = TFS_HF_VOCAB_GLM, .moe = &glm_moe, .hooks = &hooks, .xconfig = glm_xconfig,
	.xtensor = ds_xtensor,
};

/* GLM-4.7-Flash: DeepseekV2Model with GLM's tokenizer and its MTP layers kept; its
 * model_type (glm4_moe_lite) is unknown to transformers 4.57: config.json as written */
const tfs_hf_arch tfs_hf_arch_glm4moe_lite = {
	TFS_HF_CLASSES("Glm4MoeLiteForCausalLM"), .gguf = "deepseek2",
	TFS_HF_NAMES(tfs_hf_globals, lite_blocks), .flags = TFS_HF_ARCH_NEXTN_LAYERS,
	.params = lite_keys, .vocab = TFS_HF_VOCAB_GLM, .moe = &ds_moe, .hooks = &hooks,
	.xconfig = ds_xconfig, .xtensor = ds_xtensor,
};
