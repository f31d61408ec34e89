/*
 * hf_llama4.c - Llama 4's text model (Llama4ForConditionalGeneration, Llama4ForCausalLM; GGUF
 * architecture llama4), as llama.cpp de3ff81's converter writes it (conversion/llama.py:
 * Llama4Model, a LlamaModel with undo_permute False):
 *  - LlamaModel's attention without the Q/K row permutation, under language_model.; the
 *    vision model and the projector left out as TextModel leaves them;
 *  - interleaved layers: dense ones (feed_forward.{gate,up,down}_proj, intermediate_size_mlp)
 *    and MoE ones (feed_forward.router, a shared expert, and the experts stacked in the
 *    checkpoint: gate_up_proj [E, hidden, 2 ff] transposed and cut in halves into
 *    ffn_gate_exps and ffn_up_exps, down_proj [E, ff, hidden] transposed into ffn_down_exps,
 *    each computed on read, tfs_hf_own TFS_HF_OWN_T);
 *  - hparams' intermediate_size is intermediate_size_mlp's (Llama4Model.__init__ swaps them:
 *    the row's prepare hook), the experts' is kept as intermediate_size_moe;
 *  - LlamaModel's keys after TextModel's, then interleave_moe_layer_step,
 *    expert_feed_forward_length and, when every layer_types entry is full_attention
 *    (MobileLLM), attention.sliding_window 0; llama3 rope scaling's rope_freqs;
 *  - TextModel's tokenizer (gpt2).
 * Llama4Config completes text_config as a Llama4TextConfig (transformers 4.57's defaults and
 * what its __init__ derives: no_rope_layers, moe_layers, layer_types).
 */
#include "hf_moe.h"
#include "hf_names.h"
#include "hf_plan_impl.h"
#include "hf_export.h"

#include <stdio.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       NO = TFS_HF_D_NONE, EX = TFS_HF_D_EXPERTS, XN = TFS_HF_XF_NONE,
       D_MOE = TFS_HF_D_ROW };   /* the experts' and the shared expert's intermediate size */

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "feed_forward.gate_proj", "ffn_gate", FF, H, XN, false },
	{ "feed_forward.up_proj", "ffn_up", FF, H, XN, false },
	{ "feed_forward.down_proj", "ffn_down", H, FF, XN, false },
	{ "feed_forward.router", "ffn_gate_inp", EX, H, XN, false },
	{ "feed_forward.shared_expert.gate_proj", "ffn_gate_shexp", D_MOE, H, XN, false },
	{ "feed_forward.shared_expert.up_proj", "ffn_up_shexp", D_MOE, H, XN, false },
	{ "feed_forward.shared_expert.down_proj", "ffn_down_shexp", H, D_MOE, XN, false },
};

/* Llama4Model.__init__: intermediate_size_moe = intermediate_size, intermediate_size =
 * intermediate_size_mlp (a KeyError without either) */
static int l4_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	(void)st;
	json_t *moe = json_object_get(h->root, "intermediate_size");
	json_t *mlp = json_object_get(h->root, "intermediate_size_mlp");
	if (!moe || !mlp)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\" (Llama4Model needs it)",
				     h->where, moe ? "intermediate_size_mlp" : "intermediate_size");
	if (json_object_set(h->root, "intermediate_size_moe", moe) ||
	    json_object_set(h->root, "intermediate_size", mlp))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	json_int_t ff = json_integer_value(mlp);
	if (!json_is_integer(mlp) || ff <= 0 || ff > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"intermediate_size_mlp\" is not a "
				     "positive 32-bit integer", h->where);
	h->ff = ff;
	return 0;
}

static int64_t l4_dim(int d, const hparams *h)
{
	json_t *v = json_object_get(h->root, "intermediate_size_moe");
	(void)d;
	return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : -1;
}

static const char *l4_dim_text(int d)
{
	(void)d;
	return "intermediate_size (the experts')";
}

/* Llama4Model.modify_tensors: a layer's feed_forward.experts.gate_up_proj ([E, hidden,
 * 2 ff]: transposed, gate the first half of its rows, up the second) and down_proj ([E, ff,
 * hidden]: transposed); TFS_PASSTHROUGH for any other tensor. */
static int l4_experts(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		      tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	static const char lm[] = "language_model.", ex[] = "feed_forward.experts.";
	const tfs_tensor *t = tfs_model_tensor(st, idx);
	const char *name = t->name, *rest;
	unsigned long b;
	*n = 0;
	if (!strncmp(name, lm, sizeof lm - 1))
		name += sizeof lm - 1;
	if (!tfs_hf_index_of(name, "model.layers.", &b, &rest) || strncmp(rest, ex, sizeof ex - 1))
		return TFS_PASSTHROUGH;
	const char *x = rest + sizeof ex - 1;
	bool down = !strcmp(x, "down_proj");
	if ((!down && strcmp(x, "gate_up_proj")) || (int64_t)b >= h->n_layer)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name for "
				     "architecture llama4 (the converter cannot map it)", where,
				     t->name);
	return tfs_hf_moe_transposed(h, st, idx, b, down, l4_dim(D_MOE, h), "intermediate_size",
				     where, out, n, err);
}

static const char *const k_experts[] = { "num_local_experts", NULL };

/* the experts are the tensor hook's (stacked in the checkpoint); none are stacked here */
static const tfs_hf_moe experts = {
	"feed_forward.experts", { "gate_up_proj", "gate_up_proj", "down_proj" },
	{ "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps" },
	{ D_MOE, D_MOE, H }, { H, H, D_MOE }, k_experts, l4_experts,
};

/* Llama4Model.set_gguf_parameters' own, after LlamaModel's */
static int l4_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const tfs_hf_needed k[] = {
		{ "interleave_moe_layer_step", "interleave_moe_layer_step", false, 0 },
		{ "intermediate_size_moe", "expert_feed_forward_length", false, 0 },
	};
	int rc = tfs_hf_add_needed(l, h, k, sizeof k / sizeof k[0], err);
	if (rc)
		return rc;
	json_t *lt = json_object_get(h->root, "layer_types");
	if (!lt)
		return 0;
	if (!json_is_array(lt))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"layer_types\" is not a list",
				     h->where);
	for (size_t i = 0; i < json_array_size(lt); i++) {
		const char *s = json_string_value(json_array_get(lt, i));
		if (!s || strcmp(s, "full_attention"))
			return 0;
	}
	char name[128];   /* all full attention (MobileLLM): no sliding window */
	snprintf(name, sizeof name, "%s.attention.sliding_window", h->arch->gguf);
	return tfs_hf_kvs_add_u32(l, name, 0, err);
}

/* Llama4TextConfig (transformers 4.57): the keys the converter reads */
static const tfs_hf_default text_defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 202048 }, { "hidden_size", TFS_HF_DEF_INT, 5120 },
	{ "intermediate_size", TFS_HF_DEF_INT, 8192 },
	{ "intermediate_size_mlp", TFS_HF_DEF_INT, 16384 },
	{ "num_hidden_layers", TFS_HF_DEF_INT, 48 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 40 },
	{ "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 8 },
	{ "head_dim", TFS_HF_DEF_INT, 128 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 131072 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 500000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ "num_experts_per_tok", TFS_HF_DEF_INT, 1 },
	{ "num_local_experts", TFS_HF_DEF_INT, 16 },
	{ "interleave_moe_layer_step", TFS_HF_DEF_INT, 1 },
	{ "no_rope_layer_interval", TFS_HF_DEF_INT, 4 },
	{ "attention_chunk_size", TFS_HF_DEF_INT, 8192 }, { NULL, 0, 0 },
};

/* Llama4TextConfig.__init__: head_dim hidden_size // num_attention_heads when None (128 when
 * absent),
 * no_rope_layers (a NoPE layer every no_rope_layer_interval), moe_layers and layer_types
 * (chunked_attention for the rope layers, full_attention for the others) */
static int text_post_init(json_t *c, const char *where, tfs_error *err)
{
	json_t *nl = json_object_get(c, "num_hidden_layers");
	json_t *iv = json_object_get(c, "no_rope_layer_interval");
	json_t *nr = json_object_get(c, "no_rope_layers");
	json_int_t n = json_integer_value(nl), k = json_integer_value(iv);
	json_t *hd = json_object_get(c, "head_dim"), *hs = json_object_get(c, "hidden_size");
	json_t *nh = json_object_get(c, "num_attention_heads");
	if (json_is_null(hd) && json_is_integer(hs) && json_integer_value(nh) > 0 &&
	    json_object_set_new(c, "head_dim", json_integer(json_integer_value(hs) /
							    json_integer_value(nh))))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	if (!json_is_integer(nl) || n < 0 || n > 65536 || !json_is_integer(iv) || k == 0)
		return 0;   /* the size checks name a bad layer count; transformers fails on 0 */
	int bad = 0;
	if (!json_array_size(nr)) {   /* None or [] */
		nr = json_array();
		for (json_int_t i = 0; nr && i < n; i++)
			bad |= json_array_append_new(nr, json_integer((i + 1) % k != 0));
		bad |= !nr || json_object_set_new(c, "no_rope_layers", nr);
	}
	json_t *lt = json_object_get(c, "layer_types");
	if (!bad && (!lt || json_is_null(lt))) {
		lt = json_array();
		for (size_t i = 0; lt && i < json_array_size(nr); i++)
			bad |= json_array_append_new(lt, json_string(
				json_is_true(json_array_get(nr, i)) ||
				json_integer_value(json_array_get(nr, i)) ? "chunked_attention"
									   : "full_attention"));
		bad |= !lt || json_object_set_new(c, "layer_types", lt);
	}
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where) : 0;
}

/* Llama4Config: text_config always a Llama4TextConfig */
static const tfs_hf_config_class configs[] = {
	{ "llama4", (const tfs_hf_default[]){ { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
					      { NULL, 0, 0 } }, "llama4_text", NULL, false },
	{ "llama4_text", text_defaults, NULL, text_post_init, false },
	{ NULL, NULL, NULL, NULL, false },
};

static const struct tfs_hf_hooks hooks = { .prepare = l4_prepare, .dim = l4_dim,
					   .dim_text = l4_dim_text };

/* The reverse view (hf_export.h): l4_experts' tensors as the checkpoint stacks them:
 * ffn_gate_exps and ffn_up_exps ([E, ff, hidden]) transposed back into
 * feed_forward.experts.gate_up_proj [E, hidden, 2 ff], gate the first half of its columns
 * and up the second; ffn_down_exps into down_proj [E, ff, hidden].  The exact inverses of
 * the converter's transpose and split. */
static int l4_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	unsigned long b;
	const char *r;
	if (!tfs_hf_index_of(t->name, "blk.", &b, &r))
		return 0;
	char name[160], other[160];
	size_t src[2] = { i, i };
	int rc;
	if (!strcmp(r, "ffn_down_exps.weight")) {
		snprintf(name, sizeof name, "model.layers.%lu.feed_forward.experts.down_proj", b);
		rc = tfs_hf_export_add_mix(x, name, src, 1, true, false, err);
		return rc ? rc : 1;
	}
	bool gate = !strcmp(r, "ffn_gate_exps.weight");
	if (!gate && strcmp(r, "ffn_up_exps.weight"))
		return 0;
	/* the pair: found by the gate, its up taken with it (each needs the other) */
	snprintf(other, sizeof other, "blk.%lu.%s", b, gate ? "ffn_up_exps.weight" :
		 "ffn_gate_exps.weight");
	long j = tfs_model_find_tensor(x->m, other);
	if (j < 0 || tfs_model_tensor(x->m, (size_t)j)->deleted)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: no %s to make "
				     "gate_up_proj of", t->name, other);
	if (!gate)
		return 1;
	src[1] = (size_t)j;
	snprintf(name, sizeof name, "model.layers.%lu.feed_forward.experts.gate_up_proj", b);
	rc = tfs_hf_export_add_mix(x, name, src, 2, true, true, err);
	return rc ? rc : 1;
}

/* config.json back from Llama4Model's keys: intermediate_size_mlp is feed_forward_length
 * (l4_prepare swapped them) and intermediate_size the experts'; interleave_moe_layer_step;
 * a sliding window of 0 (every layer full attention: MobileLLM) as layer_types. */
static int l4_xconfig(json_t *config, json_t *gen, const tfs_hf_export *x)
{
	double v, nl;
	(void)gen;
	if (!config)
		return 0;
	json_t *mlp = json_object_get(config, "intermediate_size");
	if (mlp)
		json_object_set(config, "intermediate_size_mlp", mlp);
	if (tfs_hf_xkv_num(x, ".expert_feed_forward_length", &v))
		json_object_set_new(config, "intermediate_size", json_integer((json_int_t)v));
	json_object_del(config, "moe_intermediate_size");
	if (tfs_hf_xkv_num(x, ".interleave_moe_layer_step", &v))
		json_object_set_new(config, "interleave_moe_layer_step",
				    json_integer((json_int_t)v));
	if (tfs_hf_xkv_num(x, ".attention.sliding_window", &v) && v == 0 &&
	    tfs_hf_xkv_num(x, ".block_count", &nl)) {
		json_t *lt = json_array();
		for (double k = 0; lt && k < nl; k++)
			json_array_append_new(lt, json_string("full_attention"));
		json_object_set_new(config, "layer_types", lt);
		json_object_del(config, "sliding_window");
	}
	return 0;
}

const tfs_hf_arch tfs_hf_arch_llama4 = {
	TFS_HF_CLASSES("Llama4ForConditionalGeneration", "Llama4ForCausalLM"), .gguf = "llama4",
	TFS_HF_NAMES(tfs_hf_globals, blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_LLAMA_PARAMS, .params = l4_keys,
	.extra = tfs_hf_llama3_freqs, .configs = configs, .vocab = TFS_HF_VOCAB_GPT2,
	.moe = &experts, .hooks = &hooks, .xconfig = l4_xconfig, .xtensor = l4_xtensor,
};
