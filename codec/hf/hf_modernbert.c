/*
 * hf_modernbert.c - ModernBERT encoders (ModernBertModel: answerdotai/ModernBERT-base and the
 * embedding models built on it, GGUF architecture modern-bert) as llama.cpp de3ff81's
 * converter (conversion/bert.py: ModernBertModel, a BertModel) writes them:
 *
 *  - tensors: "model." dropped, then BertModel.filter_tensors; gguf-py's MODERN_BERT names:
 *    the fused Wqkv as attn_qkv, the GLU pair Wi (up and gate, 2 x intermediate_size rows)
 *    as ffn_up, pre-norms attn_norm (none in layer 0: an identity there) and mlp_norm,
 *    embeddings.norm and final_norm; rotary positions;
 *  - keys: TextModel's (global_rope_theta as the rope base, local_rope_theta the sliding
 *    window's, norm_eps as the RMS epsilon), BertModel's (causal false, pooling type,
 *    classifier labels), then local_attention as the sliding window,
 *    global_attn_every_n_layers as its pattern, rope scaling none, vocab_size and
 *    hidden_activation;
 *  - vocabulary: hf_vocab.c's "modern-bert": add_bos, add_eos, add_sep true, then gpt2 (a
 *    GPT-NeoX-style BPE tokenizer.json: its added runs of spaces split at first, hf_bpe.c);
 *  - defaults: transformers 4.57's ModernBertConfig (what the converter reads of it).
 * The reverse view (hf_export.h): the base model's names again (layers.N.*, no "model."),
 * config.json by ModernBertConfig's names (global_rope_theta, local_rope_theta, norm_eps,
 * layer_norm_eps, local_attention, global_attn_every_n_layers, hidden_activation), the
 * pooling module (hf_export_st.c); its tokenizer.json GPT-NeoX's with the [CLS] A [SEP]
 * template (hf_export_json.c).
 */
#include "hf_plan_impl.h"
#include "hf_export.h"
#include "hf_names.h"

#include <stdlib.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, QKV = TFS_HF_D_QKV, FF = TFS_HF_D_FF,
       FF2 = TFS_HF_D_FF2, VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE };
enum { XN = TFS_HF_XF_NONE };

/* gguf-py's TensorNameMap for MODERN_BERT, after the rename below */
static const tfs_hf_name globals[] = {
	{ "embeddings.tok_embeddings", "token_embd", VOC, H, XN, true },
	{ "embeddings.norm", "token_embd_norm", H, NO, XN, true },
	{ "final_norm", "output_norm", H, NO, XN, true },
};

static const tfs_hf_name blocks[] = {
	{ "attn_norm", "attn_norm", H, NO, XN, false },   /* layer 0 has none */
	{ "attn.Wqkv", "attn_qkv", QKV, H, XN, true },
	{ "attn.Wo", "attn_output", H, Q, XN, true },
	{ "mlp_norm", "ffn_norm", H, NO, XN, true },
	{ "mlp.Wi", "ffn_up", FF2, H, XN, true },
	{ "mlp.Wo", "ffn_down", H, FF, XN, true },
};

/* BertModel's keys, then ModernBertModel.set_gguf_parameters' own. */
static int keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *v;
	char name[128];
	int rc = tfs_hf_bert_keys(l, h, err);
	if (rc || (rc = tfs_hf_need(&v, h, "local_attention", err)) ||
	    (rc = tfs_hf_add_u32(l, h, "attention.sliding_window", v, "local_attention", err)))
		return rc;
	v = json_object_get(h->root, "global_attn_every_n_layers");
	if (v && !json_is_null(v) &&
	    (rc = tfs_hf_add_u32(l, h, "attention.sliding_window_pattern", v,
				 "global_attn_every_n_layers", err)))
		return rc;
	snprintf(name, sizeof name, "%s.rope.scaling.type", h->arch->gguf);
	if ((rc = tfs_hf_kvs_add_str(l, name, "none", err)) ||
	    (rc = tfs_hf_need(&v, h, "vocab_size", err)) ||
	    (rc = tfs_hf_add_u32(l, h, "vocab_size", v, "vocab_size", err)))
		return rc;
	v = json_object_get(h->root, "hidden_activation");
	if (!tfs_hf_py_true(v))
		return 0;
	if (!json_is_string(v))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: hidden_activation is not a string",
				     h->where);
	snprintf(name, sizeof name, "%s.hidden_activation", h->arch->gguf);
	return tfs_hf_kvs_add_str(l, name, json_string_value(v), err);
}

/* ModernBertModel.filter_tensors ("model." dropped), BertModel's, then layers.N. as the
 * plan's model.layers.N. */
static bool mb_rename(char *name, size_t cap, const hparams *h)
{
	if (strncmp(name, "model.", 6) == 0) {
		size_t k;
		for (k = 0; name[k + 6]; k++)   /* a loop: gcc -O2 with sanitizers warns on memmove */
			name[k] = name[k + 6];
		name[k] = 0;
	}
	if (!tfs_hf_bert_rename(name, cap, h))
		return false;
	if (strncmp(name, "layers.", 7) == 0)
		tfs_hf_prepend(name, cap, "model.");   /* (one that does not fit maps to none) */
	return true;
}

static const struct tfs_hf_hooks hooks = { .rename = mb_rename, .fix = tfs_hf_bert_fix };

/* ==== the reverse view ==== */

/* (its tensors: tfs_hf_export_xtensor_unprefixed, the rename hook's "model." undone) */

/* TextModel's names moved to ModernBertConfig's (whose defaults would otherwise win: its
 * global_rope_theta is read before rope_theta), TextModel's other epsilon, the sliding
 * window's rope base and pattern, the activation. */
static int mb_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	static const char *const moved[][2] = {
		{ "rope_theta", "global_rope_theta" }, { "rms_norm_eps", "norm_eps" },
		{ "sliding_window", "local_attention" },
	};
	(void)gen;
	float f;
	double n;
	size_t len;
	if (!c)
		return 0;
	int bad = tfs_hf_xconfig_move_keys(c, moved, sizeof moved / sizeof moved[0]);
	if (!bad && tfs_hf_xkv_f32(x, ".attention.layer_norm_epsilon", &f))
		bad = json_object_set_new(c, "layer_norm_eps", json_real((double)f));
	if (!bad && tfs_hf_xkv_f32(x, ".rope.freq_base_swa", &f))
		bad = json_object_set_new(c, "local_rope_theta", json_real((double)f));
	if (!bad && tfs_hf_xkv_num(x, ".attention.sliding_window_pattern", &n))
		bad = json_object_set_new(c, "global_attn_every_n_layers",
					  json_integer((json_int_t)n));
	const char *act = tfs_hf_xkv_str(x, ".hidden_activation", &len);
	if (!bad && act)
		bad = json_object_set_new(c, "hidden_activation", json_stringn(act, len));
	return bad ? TFS_E_NOMEM : tfs_hf_xlabels(c, x);
}

/* classifier labels the converter would drop (hf_export_st.c) */
static int mb_xtensors(tfs_hf_export *x, tfs_error *err)
{
	return tfs_hf_xlabels_check(x, err);
}

enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL };

/* ModernBertConfig (4.57): what the converter reads of it (hidden_activation: post_init) */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", DI, 50368 }, { "hidden_size", DI, 768 },
	{ "intermediate_size", DI, 1152 }, { "num_hidden_layers", DI, 22 },
	{ "num_attention_heads", DI, 12 }, { "max_position_embeddings", DI, 8192 },
	{ "norm_eps", DR, 1e-5 }, { "global_rope_theta", DR, 160000.0 },
	{ "global_attn_every_n_layers", DI, 3 }, { "local_attention", DI, 128 },
	{ "local_rope_theta", DR, 10000.0 }, { NULL, 0, 0 },
};

/* ModernBertConfig's hidden_activation="gelu" (a text: no default kind holds one) */
static int post_init(json_t *c, const char *where, tfs_error *err)
{
	if (json_object_get(c, "hidden_activation"))
		return 0;
	if (json_object_set_new(c, "hidden_activation", json_string("gelu")))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	return 0;
}

const tfs_hf_arch tfs_hf_arch_modern_bert = {
	TFS_HF_CLASSES("ModernBertModel"), .gguf = "modern-bert", TFS_HF_NAMES(globals, blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS, .params = keys,
	.configs = (const tfs_hf_config_class[]){ { "modernbert", defaults, NULL, post_init,
						    false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_MODERN_BERT, .hooks = &hooks, .xtensor = tfs_hf_export_xtensor_unprefixed,
	.xtensors = mb_xtensors, .xconfig = mb_xconfig,
};
