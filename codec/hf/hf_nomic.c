/*
 * hf_nomic.c - nomic-embed-text v1 / v1.5 (NomicBertModel, GGUF architecture nomic-bert) as
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
 * The MoE variant (nomic-embed-text-v2-moe: nomic-bert-moe, its XLM-R Unigram tokenizer.json
 * read by transformers) is refused.
 * The reverse view (hf_export.h): encoder.layers.N.* again, config.json as nomic's own code
 * names its keys (n_embd, n_positions 8192 for a trained 2048, the settings the converter
 * asserts, auto_map to its code), the pooling module (hf_export_st.c).
 */
#include "hf_plan_impl.h"
#include "hf_vocab_impl.h"
#include "hf_export.h"
#include "hf_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, QKV = TFS_HF_D_QKV, FF = TFS_HF_D_FF,
       VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE, HK = TFS_HF_D_HOOK };
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

/* Python's `v == x` for a JSON number or bool (True == 1, False == 0) */
static bool py_eq(const json_t *v, double x)
{
	if (json_is_boolean(v))
		return (json_is_true(v) ? 1.0 : 0.0) == x;
	return json_is_number(v) && json_number_value(v) == x;
}

/* NomicBertModel.__init__: the checks and n_positions' trained length. */
static int nomic_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	(void)st;
	json_t *c = h->root, *v;
	if (tfs_hf_py_true(json_object_get(c, "moe_every_n_layers")))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: moe_every_n_layers: the MoE "
				     "variant (nomic-bert-moe, nomic-embed-text-v2-moe) is not "
				     "supported for the GGUF view", h->where);
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
	 * model: `x == "gelu" if moe else "swiglu"`) */
	static const struct { const char *key; int want; } checks[] = {
		{ "causal", 0 }, { "qkv_proj_bias", 2 }, { "mlp_fc1_bias", 2 },
		{ "mlp_fc2_bias", 2 }, { "prenorm", 0 }, { "rotary_emb_fraction", 3 },
		{ "rotary_emb_interleaved", 0 }, { "rotary_emb_scale_base", 1 },
	};
	for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
		if ((rc = tfs_hf_need(&v, h, checks[i].key, err)))
			return rc;
		bool ok = checks[i].want == 0 ? json_is_false(v)    /* is False */
			: checks[i].want == 1 ? json_is_null(v)     /* is None */
			: checks[i].want == 2 ? py_eq(v, 0.0)        /* == False */
			: py_eq(v, 1.0);                            /* == 1.0 */
		if (!ok)
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: %s: the converter supports "
					     "nomic-bert with %s only", h->where, checks[i].key,
					     checks[i].want == 0 ? "false" : checks[i].want == 1 ?
					     "null" : checks[i].want == 2 ? "false" : "1.0");
	}
	if (json_object_set_new(c, "n_positions", json_integer(n)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	return 0;
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
static int nomic_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	static const char *const moved[][2] = {
		{ "hidden_size", "n_embd" }, { "num_attention_heads", "n_head" },
		{ "intermediate_size", "n_inner" }, { "num_hidden_layers", "n_layer" },
		{ "rope_theta", "rotary_emb_base" }, { "layer_norm_eps", "layer_norm_epsilon" },
	};
	(void)gen;
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
	      json_object_set_new(c, "activation_function", json_string("swiglu")) ||
	      json_object_set_new(c, "causal", json_false()) ||
	      json_object_set_new(c, "qkv_proj_bias", json_false()) ||
	      json_object_set_new(c, "mlp_fc1_bias", json_false()) ||
	      json_object_set_new(c, "mlp_fc2_bias", json_false()) ||
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
	return bad ? TFS_E_NOMEM : tfs_hf_xlabels(c, x);
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
	.xtensors = nomic_xtensors, .xconfig = nomic_xconfig,
};
