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
 */
#include "hf_plan_impl.h"
#include "hf_vocab_impl.h"

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

const tfs_hf_arch tfs_hf_arch_nomic_bert = {
	TFS_HF_CLASSES("NomicBertModel"), .gguf = "nomic-bert", TFS_HF_NAMES(globals, blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS, .params = tfs_hf_bert_keys,
	.vocab = TFS_HF_VOCAB_BERT, .hooks = &hooks,
};
