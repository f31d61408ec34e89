/*
 * hf_nomic.c - nomic-embed-text v1 / v1.5 (NomicBertModel, GGUF architecture nomic-bert) and
 * nomic-embed-text-v2-moe (NomicBertModel with moe_every_n_layers: nomic-bert-moe) as
 * llama.cpp de3ff81's converter (conversion/bert.py: NomicBertModel, a BertModel) writes it:
 *
 *  - config: the repo's own code (model_type nomic_bert, which transformers does not know):
 *    config.json as it is (AutoConfig fails, the converter reads the file); n_positions
 *    8192 with max_trained_positions 2048 written as 2048 (the trained length), anything
 *    else refused, as are the settings its asserts reject (causal, biases, prenorm, rotary
 *    fraction, interleaved or xPos rotary);
 *  - tensors: BertModel.filter_tensors, then gguf-py's NOMIC_BERT names: the fused Wqkv as
 *    attn_qkv, SwiGLU's fc11 / fc12 / fc2 as ffn_up / ffn_gate / ffn_down, emb_ln,
 *    norm1 / norm2 after attention and MLP; rotary positions (no position_embd);
 *  - keys: TextModel's (n_embd, n_head, n_inner, rotary_emb_base as the rope base,
 *    layer_norm_epsilon) and BertModel's (causal false, pooling type from modules.json);
 *  - vocabulary: BERT's WordPiece (hf_vocab.c's "bert"), padded with [PADi] to config.json's
 *    vocab_size (30528: a multiple of 64).
 * The MoE variant, a row of its own (the class is one: each row's takes hook says which
 * config.json is its, by bool(moe_every_n_layers), the converter's is_moe):
 *  - config: n_positions 2048 with max_trained_positions 2048 written as 512; its asserts
 *    the other way (gelu, qkv / fc1 / fc2 biases); _xlmroberta_tokenizer_init's
 *    max_position_embeddings less pad_token_id + 1 (when config.json has one);
 *  - tensors: NOMIC_BERT_MOE's names: biases, fc1 / fc2 as ffn_up / ffn_down in the dense
 *    layers, router.layer as ffn_gate_inp, the experts' mlp.experts.mlp.w1 and w2 (each
 *    [E x n_inner, n_embd]) viewed as ffn_up_exps and, transposed per expert, ffn_down_exps
 *    (the moe->tensor hook), mlp.experts.bias dropped;
 *  - keys: BertModel's, then moe_every_n_layers and moe_top_k as the experts used;
 *  - vocabulary: XLM-R's from a Unigram tokenizer.json read through transformers
 *    (hf_vocab_xlmr.c); with a sentencepiece.bpe.model (which the converter would read,
 *    then setting token 250001 to <mask>) refused.
 * The reverse view (hf_export.h): encoder.layers.N.* again, config.json as nomic's own code
 * names its keys (n_embd, n_positions 8192 for a trained 2048, 2048 for 512, the settings
 * the converter asserts, auto_map to its code, the MoE keys), the experts back as the
 * checkpoint holds them, the pooling module (hf_export_st.c).
 */
#include "hf_plan_impl.h"
#include "hf_vocab_impl.h"
#include "hf_export.h"
#include "hf_moe.h"
#include "hf_names.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, QKV = TFS_HF_D_QKV, FF = TFS_HF_D_FF,
       VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE, HK = TFS_HF_D_HOOK, EX = TFS_HF_D_EXPERTS };
enum { XN = TFS_HF_XF_NONE };

/* gguf-py's TensorNameMap for NOMIC_BERT, after the rename below */
static const tfs_hf_name globals[] = {
	{ "embeddings.word_embeddings", "token_embd", VOC, H, XN, true },
	{ "embeddings.token_type_embeddings", "token_types", HK, H, XN, false },
	{ "emb_ln", "token_embd_norm", H, NO, XN, true },
};

static const tfs_hf_name blocks[] = {
	{ "attn.Wqkv", "attn_qkv", QKV, H, XN, true },
	{ "attn.out_proj", "attn_output", H, Q, XN, true },
	{ "norm1", "attn_output_norm", H, NO, XN, true },
	{ "mlp.fc11", "ffn_up", FF, H, XN, true },
	{ "mlp.fc12", "ffn_gate", FF, H, XN, true },
	{ "mlp.fc2", "ffn_down", H, FF, XN, true },
	{ "norm2", "layer_output_norm", H, NO, XN, true },
};

/* NOMIC_BERT_MOE's: biases, gelu's fc1 / fc2 in the dense layers, the router in the MoE
 * ones (their experts: moe_experts below) */
static const tfs_hf_name moe_blocks[] = {
	{ "attn.Wqkv", "attn_qkv", QKV, H, XN, true },
	{ "attn.out_proj", "attn_output", H, Q, XN, true },
	{ "norm1", "attn_output_norm", H, NO, XN, true },
	{ "mlp.fc1", "ffn_up", FF, H, XN, false },
	{ "mlp.fc2", "ffn_down", H, FF, XN, false },
	{ "mlp.router.layer", "ffn_gate_inp", EX, H, XN, false },
	{ "norm2", "layer_output_norm", H, NO, XN, true },
};

/* Python's `v == x` for a JSON number or bool (True == 1, False == 0) */
static bool py_eq(const json_t *v, double x)
{
	if (json_is_boolean(v))
		return (json_is_true(v) ? 1.0 : 0.0) == x;
	return json_is_number(v) && json_number_value(v) == x;
}

/* NomicBertModel.is_moe: bool(moe_every_n_layers) of config.json (the rows' takes) */
static bool takes_dense(const json_t *config)
{
	return !tfs_hf_py_true(json_object_get(config, "moe_every_n_layers"));
}

static bool takes_moe(const json_t *config)
{
	return !takes_dense(config);
}

/* NomicBertModel.__init__: the checks and n_positions' trained length (moe: is_moe). */
static int prepare(hparams *h, bool moe, tfs_error *err)
{
	json_t *c = h->root, *v;
	long long npos, mtp = 2048;
	json_t *np;
	int rc = tfs_hf_need(&np, h, "n_positions", err);
	if (rc)
		return rc;
	v = json_object_get(c, "max_trained_positions");
	if (!tfs_hf_py_int(np, &npos) || (v && !tfs_hf_py_int(v, &mtp)))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: n_positions and max_trained_positions "
				     "must be integers", h->where);
	long long n = npos == 8192 && mtp == 2048 ? 2048 : npos == 2048 && mtp == 2048 ? 512 : 0;
	if (!n)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: unrecognized parameters: n_positions="
				     "%lld, max_trained_positions=%lld", h->where, npos, mtp);
	/* the asserts, in the converter's order (the activation's is always true for the dense
	 * model: `x == "gelu" if moe else "swiglu"`; the biases' `== is_moe`) */
	if (moe) {
		if ((rc = tfs_hf_need(&v, h, "activation_function", err)))
			return rc;
		if (!json_is_string(v) || strcmp(json_string_value(v), "gelu"))
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: activation_function: the "
					     "converter supports nomic-bert-moe with \"gelu\" only",
					     h->where);
	}
	static const struct { const char *key; int want; } checks[] = {
		{ "causal", 0 }, { "qkv_proj_bias", 2 }, { "mlp_fc1_bias", 2 },
		{ "mlp_fc2_bias", 2 }, { "prenorm", 0 }, { "rotary_emb_fraction", 3 },
		{ "rotary_emb_interleaved", 0 }, { "rotary_emb_scale_base", 1 },
	};
	for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
		if ((rc = tfs_hf_need(&v, h, checks[i].key, err)))
			return rc;
		int want = checks[i].want == 2 && moe ? 3 : checks[i].want;
		bool ok = want == 0 ? json_is_false(v)    /* is False */
			: want == 1 ? json_is_null(v)     /* is None */
			: want == 2 ? py_eq(v, 0.0)        /* == False */
			: py_eq(v, 1.0);                  /* == 1.0, == True */
		if (!ok)
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: %s: the converter supports "
					     "%s with %s only", h->where, checks[i].key,
					     h->arch->gguf, want == 0 ? "false" : want == 1 ?
					     "null" : want == 2 ? "false" : checks[i].want == 2 ?
					     "true" : "1.0");
	}
	if (json_object_set_new(c, "n_positions", json_integer(n)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	return 0;
}

static int nomic_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	(void)st;
	return prepare(h, false, err);
}

/* _xlmroberta_tokenizer_init (the MoE row's vocabulary is XLM-R's) before NomicBertModel's
 * checks: max_position_embeddings, when there is one, less pad_token_id + 1 (nomic's
 * config.json has n_positions instead). */
static int moe_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	(void)st;
	json_t *pad = json_object_get(h->root, "pad_token_id");
	json_t *mp = json_object_get(h->root, "max_position_embeddings");
	long long p, m;
	if (pad && !json_is_null(pad) && mp) {
		if (!tfs_hf_py_int(pad, &p) || !tfs_hf_py_int(mp, &m))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: pad_token_id and "
					     "max_position_embeddings must be integers", h->where);
		if (json_object_set_new(h->root, "max_position_embeddings",
					json_integer(m - (p + 1))))
			return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	}
	return prepare(h, true, err);
}

/* BertModel.filter_tensors (NomicBertModel's own drops only the experts' bias: MoE), then
 * encoder.layers.N. as the plan's model.layers.N. */
static bool nomic_rename(char *name, size_t cap, const hparams *h)
{
	if (!tfs_hf_bert_rename(name, cap, h))
		return false;
	if (strncmp(name, "encoder.layers.", 15) == 0) {   /* 15 bytes -> 13 */
		size_t k = 0;
		for (; name[k + 2]; k++)   /* a loop: gcc -O2 with sanitizers warns on memmove */
			name[k] = name[k + 2];
		name[k] = 0;
		memcpy(name, "model.layers.", 13);
	}
	return true;
}

static const struct tfs_hf_hooks hooks = { .prepare = nomic_prepare, .rename = nomic_rename,
					   .fix = tfs_hf_bert_fix };

/* NomicBertModel.filter_tensors: the experts' bias dropped, then the dense model's. */
static bool moe_rename(char *name, size_t cap, const hparams *h)
{
	return !strstr(name, "mlp.experts.bias") && nomic_rename(name, cap, h);
}

/* NomicBertModel.modify_tensors: a layer's mlp.experts.mlp.w1 ([E x n_inner, n_embd],
 * viewed as [E, n_inner, n_embd]: the same bytes) as ffn_up_exps, its w2 (the same view,
 * then transpose(1, 2): [E, n_embd, n_inner], computed on read, TFS_HF_OWN_T) as
 * ffn_down_exps; TFS_PASSTHROUGH for any other tensor. */
static int moe_tensor(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		      tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	static const char ex[] = "mlp.experts.";
	const tfs_tensor *t = tfs_model_tensor(st, idx);
	const char *rest;
	unsigned long b;
	*n = 0;
	if (!tfs_hf_index_of(t->name, "encoder.layers.", &b, &rest) ||
	    strncmp(rest, ex, sizeof ex - 1) || !strcmp(rest, "mlp.experts.bias"))
		return TFS_PASSTHROUGH;
	bool down = !strcmp(rest, "mlp.experts.mlp.w2");
	if ((!down && strcmp(rest, "mlp.experts.mlp.w1")) || (int64_t)b >= h->n_layer)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name for "
				     "architecture nomic-bert-moe (the converter cannot map it)",
				     where, t->name);
	int64_t e = tfs_hf_moe_dim(TFS_HF_D_EXPERTS, h), ff = h->ff;
	if (e < 0 || ff < 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no %s (the experts' view needs it)",
				     h->where, e < 0 ? "num_local_experts or num_experts" :
				     "n_inner");
	if (e > INT64_MAX / ff)   /* (config.json's count is any positive integer) */
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %lld experts of n_inner %lld: too "
				     "many", h->where, (long long)e, (long long)ff);
	if (t->n_dims != 2 || t->ne[0] != h->hidden || t->ne[1] != e * ff)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is not [%lld, %lld] "
				     "(experts x n_inner, n_embd)", where, t->name,
				     (long long)(e * ff), (long long)h->hidden);
	if (t->dtype != TFS_DT_F32 && t->dtype != TFS_DT_F16 && t->dtype != TFS_DT_BF16)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is not F32, F16 or "
				     "BF16; the GGUF view converts those only", where, t->name);
	tfs_hf_stack *o = &out[0];
	memset(o, 0, sizeof *o);
	snprintf(o->name, sizeof o->name, "blk.%lu.ffn_%s_exps.weight", b, down ? "down" : "up");
	o->shape = *t;
	o->shape.name = o->name;
	o->shape.n_dims = 3;
	memset(o->shape.ne, 0, sizeof o->shape.ne);
	o->shape.ne[0] = down ? ff : h->hidden;
	o->shape.ne[1] = down ? h->hidden : ff;
	o->shape.ne[2] = e;
	o->src = (long)idx;
	if (down)   /* output (e, c, a) is source (e, a, c): rows of n_embd */
		o->own = (tfs_hf_own){ .kind = TFS_HF_OWN_T, .stride = 1, .src2 = -1 };
	*n = 1;
	return 0;
}

/* (num_experts first: the name nomic-embed-text-v2-moe's config.json uses, which the reverse
 * view writes back) */
static const char *const k_experts[] = { "num_experts", "num_local_experts", NULL };

/* the experts are the tensor hook's (stacked in the checkpoint); none are stacked here */
static const tfs_hf_moe moe_experts = {
	"mlp.experts.mlp", { "w1", "w1", "w2" }, { "ffn_up_exps", "ffn_up_exps", "ffn_down_exps" },
	{ FF, FF, H }, { H, H, FF }, k_experts, moe_tensor,
};

/* NomicBertModel.set_gguf_parameters with is_moe: BertModel's, then moe_every_n_layers and
 * moe_top_k as the experts used. */
static int moe_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *n, *k;
	int rc = tfs_hf_bert_keys(l, h, err);
	if (!rc && !(rc = tfs_hf_need(&n, h, "moe_every_n_layers", err)) &&
	    !(rc = tfs_hf_add_u32(l, h, "moe_every_n_layers", n, "moe_every_n_layers", err)) &&
	    !(rc = tfs_hf_need(&k, h, "moe_top_k", err)))
		rc = tfs_hf_add_u32(l, h, "expert_used_count", k, "moe_top_k", err);
	return rc;
}

static const struct tfs_hf_hooks moe_hooks = { .prepare = moe_prepare, .rename = moe_rename,
					       .fix = tfs_hf_bert_fix };

/* ==== the reverse view ==== */

/* A layer's tensor under encoder.layers.N. (the rename hook's model.layers.N. undone): 1
 * when taken. */
static int nomic_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_hf_name *e;
	char *name = tfs_hf_export_mapped_name(x, i, &e);
	if (!name || strncmp(name, "model.layers.", 13) != 0) {
		free(name);
		return 0;   /* (a global: the maps' name) */
	}
	char *nm = malloc(strlen(name) + 3);
	if (nm)
		snprintf(nm, strlen(name) + 3, "encoder.layers.%s", name + 13);
	free(name);
	if (!nm)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	int rc = tfs_hf_export_add_as(x, i, nm, e, err);
	return rc ? rc : 1;
}

/* config.json's keys by TextModel's names moved to nomic's own, and what NomicBertModel
 * asserts: n_positions 8192 with max_trained_positions 2048 for a context of 2048 (the
 * converter's only other pair, 2048 and 2048, is 512: the MoE variant's) */
static int xconfig(json_t *c, const tfs_hf_export *x, bool moe)
{
	static const char *const moved[][2] = {
		{ "hidden_size", "n_embd" }, { "num_attention_heads", "n_head" },
		{ "intermediate_size", "n_inner" }, { "num_hidden_layers", "n_layer" },
		{ "rope_theta", "rotary_emb_base" }, { "layer_norm_eps", "layer_norm_epsilon" },
	};
	float eps;
	double ctx = 0;
	if (!c)
		return 0;
	int bad = tfs_hf_xconfig_move_keys(c, moved, sizeof moved / sizeof moved[0]);
	if (!bad && tfs_hf_xkv_f32(x, ".attention.layer_norm_epsilon", &eps))
		bad = json_object_set_new(c, "layer_norm_epsilon", json_real((double)eps));
	tfs_hf_xkv_num(x, ".context_length", &ctx);
	json_object_del(c, "max_position_embeddings");
	json_object_del(c, "num_key_value_heads");
	bad = bad || json_object_set_new(c, "model_type", json_string("nomic_bert")) ||
	      json_object_set_new(c, "n_positions", json_integer(ctx == 512 ? 2048 : 8192)) ||
	      json_object_set_new(c, "max_trained_positions", json_integer(2048)) ||
	      json_object_set_new(c, "activation_function", json_string(moe ? "gelu" : "swiglu")) ||
	      json_object_set_new(c, "causal", json_false()) ||
	      json_object_set_new(c, "qkv_proj_bias", json_boolean(moe)) ||
	      json_object_set_new(c, "mlp_fc1_bias", json_boolean(moe)) ||
	      json_object_set_new(c, "mlp_fc2_bias", json_boolean(moe)) ||
	      json_object_set_new(c, "prenorm", json_false()) ||
	      json_object_set_new(c, "rotary_emb_fraction", json_real(1.0)) ||
	      json_object_set_new(c, "rotary_emb_interleaved", json_false()) ||
	      json_object_set_new(c, "rotary_emb_scale_base", json_null());
	/* (the code transformers runs for it, trust_remote_code: nomic-embed-text-v1.5's) */
	json_t *am = bad ? NULL : json_pack("{s:s, s:s}", "AutoConfig", "nomic-ai/nomic-bert-2048"
					    "--configuration_hf_nomic_bert.NomicBertConfig",
					    "AutoModel", "nomic-ai/nomic-bert-2048--modeling_hf_nomic_"
					    "bert.NomicBertModel");
	bad = bad || !am || json_object_set_new(c, "auto_map", am);
	double n;
	if (!bad && tfs_hf_xkv_num(x, "tokenizer.ggml.token_type_count", &n))
		bad = json_object_set_new(c, "type_vocab_size", json_integer((json_int_t)n));
	/* the MoE keys: moe_top_k (TextModel's num_experts_per_tok would write the experts
	 * used before NomicBertModel does, elsewhere in the header) */
	if (!bad && moe && tfs_hf_xkv_num(x, ".moe_every_n_layers", &n))
		bad = json_object_set_new(c, "moe_every_n_layers", json_integer((json_int_t)n));
	if (!bad && moe && tfs_hf_xkv_num(x, ".expert_used_count", &n))
		bad = json_object_set_new(c, "moe_top_k", json_integer((json_int_t)n));
	if (moe)
		json_object_del(c, "num_experts_per_tok");
	return bad ? TFS_E_NOMEM : tfs_hf_xlabels(c, x);
}

static int nomic_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	(void)gen;
	return xconfig(c, x, false);
}

/* ... and the MoE variant's: gelu with biases, n_positions 2048 for a trained 512,
 * moe_every_n_layers, moe_top_k */
static int moe_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	(void)gen;
	return xconfig(c, x, true);
}

/* moe_tensor's experts back as the checkpoint holds them: ffn_up_exps ([E, n_inner, n_embd])
 * as mlp.experts.mlp.w1 [E x n_inner, n_embd] (the same values), ffn_down_exps ([E, n_embd,
 * n_inner]) transposed back per expert into w2 [E x n_inner, n_embd] (the exact inverse of
 * the converter's view and transpose); the others as nomic's.  The experts' bias, which the
 * converter drops, is not shown. */
static int moe_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	unsigned long b;
	const char *r;
	char name[96];
	if (!tfs_hf_index_of(t->name, "blk.", &b, &r))
		return nomic_xtensor(x, i, err);
	bool up = !strcmp(r, "ffn_up_exps.weight");
	if (!up && strcmp(r, "ffn_down_exps.weight"))
		return nomic_xtensor(x, i, err);
	if (t->n_dims != 3)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: not 3-D", t->name);
	snprintf(name, sizeof name, "encoder.layers.%lu.mlp.experts.mlp.w%d", b, up ? 1 : 2);
	tfs_hf_xtensor *o;
	int rc = 0;
	if (up) {
		if (!(o = tfs_hf_export_add_src(x, name, i, TFS_HF_XF_NONE, err)))
			return err->code;
	} else {
		if ((rc = tfs_hf_export_add_mix(x, name, &i, 1, true, false, err)))
			return rc;
		o = &x->t[x->n_t - 1];
	}
	/* [E, n_inner, n_embd] as [E x n_inner, n_embd]: the same rows */
	o->n_dims = 2;
	o->ne[1] = t->ne[2] * (up ? t->ne[1] : t->ne[0]);
	o->ne[2] = 0;
	return 1;
}

/* classifier labels the converter would drop (hf_export_st.c) */
static int nomic_xtensors(tfs_hf_export *x, tfs_error *err)
{
	return tfs_hf_xlabels_check(x, err);
}

const tfs_hf_arch tfs_hf_arch_nomic_bert = {
	TFS_HF_CLASSES("NomicBertModel"), .gguf = "nomic-bert", TFS_HF_NAMES(globals, blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS, .params = tfs_hf_bert_keys,
	.vocab = TFS_HF_VOCAB_BERT, .hooks = &hooks, .xtensor = nomic_xtensor,
	.xtensors = nomic_xtensors, .xconfig = nomic_xconfig, .takes = takes_dense,
};

const tfs_hf_arch tfs_hf_arch_nomic_bert_moe = {
	TFS_HF_CLASSES("NomicBertModel"), .gguf = "nomic-bert-moe",
	TFS_HF_NAMES(globals, moe_blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = moe_keys, .vocab = TFS_HF_VOCAB_XLMR_JSON, .moe = &moe_experts,
	.hooks = &moe_hooks, .xtensor = moe_xtensor, .xtensors = nomic_xtensors,
	.xconfig = moe_xconfig, .takes = takes_moe,
};
