/*
 * hf_qwen3next.c - Qwen3-Next (Qwen3NextForCausalLM, GGUF architecture qwen3next), as llama.cpp
 * de3ff81's converter writes it (conversion/qwen.py: Qwen3NextModel = _QwenMtpMixin +
 * Qwen2MoeModel + TextModel).  Qwen3.5's class derives from it, so its hooks are hf_qwen35.c's
 * (hf_qwen3next.h) without what Qwen3.5 adds (the value heads' reorder, mrope's sections);
 * what is its own:
 *  - the linear attention's q, k, v and z fused per key head (in_proj_qkvz: [q k v z] x key
 *    heads) split into attn_qkv (q of every head, then k, then v) and attn_gate (z): two
 *    outputs of one tensor, each a gather of row segments (TFS_HF_GATHER_SEGS, hf_plan.h);
 *    in_proj_ba kept as it is (ssm_ba);
 *  - per-expert tensors stacked as Qwen2MoeModel's (hf_moe.c), a shared expert and its gate;
 *  - Qwen3NextConfig's defaults (transformers 4.57) and its layer_types (every
 *    full_attention_interval-th layer full).
 */
#include "hf_moe.h"
#include "hf_qwen3next.h"
#include "hf_qwen35_x.h"

#include <stdlib.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, KV = TFS_HF_D_KV, Q = TFS_HF_D_Q, HD = TFS_HF_D_HEAD,
       VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE, HK = TFS_HF_D_HOOK, EX = TFS_HF_D_EXPERTS,
       FE = TFS_HF_D_FF_EXP, FS = TFS_HF_D_FF_SHEXP, ONE = TFS_HF_D_ONE };
enum { XN = TFS_HF_XF_NONE, X1 = TFS_HF_XF_PLUS_ONE };

static const tfs_hf_name globals[] = {
	{ "model.embed_tokens", "token_embd", VOC, H, XN, true },
	{ "model.norm", "output_norm", H, NO, X1, true },
	{ "lm_head", "output", VOC, H, XN, false },
};

/* a layer has linear or full attention by layer_types: no block tensor is required */
static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, X1, false },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, X1, false },
	{ "self_attn.q_proj", "attn_q", HK, NO, XN, false },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, false },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, false },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, false },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, X1, false },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, X1, false },
	{ "linear_attn.in_proj_qkvz", "attn_qkv", HK, NO, XN, false },
	{ "linear_attn.in_proj_ba", "ssm_ba", HK, NO, XN, false },
	{ "linear_attn.conv1d", "ssm_conv1d", HK, NO, XN, false },
	{ "linear_attn.dt_proj", "ssm_dt", HK, NO, XN, false },
	{ "linear_attn.A_log", "ssm_a", HK, NO, XN, false },
	{ "linear_attn.norm", "ssm_norm", HK, NO, XN, false },
	{ "linear_attn.out_proj", "ssm_out", HK, NO, XN, false },
	{ "mlp.gate", "ffn_gate_inp", EX, H, XN, false },
	{ "mlp.shared_expert_gate", "ffn_gate_inp_shexp", ONE, H, XN, false },
	{ "mlp.shared_expert.gate_proj", "ffn_gate_shexp", FS, H, XN, false },
	{ "mlp.shared_expert.up_proj", "ffn_up_shexp", FS, H, XN, false },
	{ "mlp.shared_expert.down_proj", "ffn_down_shexp", H, FS, XN, false },
	/* the MTP layer's own (renamed from mtp.*) */
	{ "eh_proj", "nextn.eh_proj", H, HK, XN, false },
	{ "enorm", "nextn.enorm", H, NO, X1, false },
	{ "hnorm", "nextn.hnorm", H, NO, X1, false },
	{ "shared_head.norm", "nextn.shared_head_norm", H, NO, X1, false },
	{ "shared_head.head", "nextn.shared_head_head", VOC, H, XN, false },
	{ "embed_tokens", "nextn.embed_tokens", VOC, H, XN, false },
};

static const char *const k_experts[] = { "num_local_experts", "num_experts", NULL };

/* Qwen2MoeModel's stacking of per-expert tensors */
static const tfs_hf_moe experts = {
	"mlp.experts", { "down_proj", "gate_proj", "up_proj" },
	{ "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps" },
	{ H, FE, FE }, { FE, H, H }, k_experts, NULL,
};

static int64_t cfg_int(const hparams *h, const char *key)
{
	json_t *v = json_object_get(h->root, key);
	return json_is_integer(v) && json_integer_value(v) > 0 &&
	       json_integer_value(v) <= 1 << 20 ? json_integer_value(v) : -1;
}

static int bad_shape(const tfs_tensor *t, const char *shard, const hparams *h, int64_t rows,
		     tfs_error *err)
{
	return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is not [%lld, %lld] as %s's "
			     "linear_* heads and dims say", shard, t->name, (long long)rows,
			     (long long)h->hidden, h->where);
}

/* in_proj_qkvz [key heads x (2 dk + 2 r dv), hidden] (r: value heads per key head): part 0
 * attn_qkv (segments q, k, v of every head), part 1 attn_gate (segment z); in_proj_ba
 * [key heads x 2 r, hidden] as it is. */
static int qn_fix(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m, const hparams *h,
		  const char *shard, unsigned part, unsigned *parts, tfs_error *err)
{
	bool qkvz = !strcmp(m->gguf, "attn_qkv"), ba = !strcmp(m->gguf, "ssm_ba");
	if (!qkvz && !ba)
		return tfs_hf_qnext_fix(o, t, m, h, shard, part, parts, false, err);
	int64_t nk = cfg_int(h, "linear_num_key_heads"), nv = cfg_int(h, "linear_num_value_heads");
	int64_t dk = cfg_int(h, "linear_key_head_dim"), dv = cfg_int(h, "linear_value_head_dim");
	if (nk < 0 || nv < 0 || dk < 0 || dv < 0 || nv % nk)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: linear_num_key_heads, "
				     "linear_num_value_heads (a multiple of it), linear_key_head_dim "
				     "and linear_value_head_dim must be positive integers", h->where);
	int64_t rv = nv / nk * dv, g = qkvz ? 2 * dk + 2 * rv : 2 * (nv / nk);
	if (t->n_dims != 2 || t->ne[1] != nk * g || t->ne[0] != h->hidden)
		return bad_shape(t, shard, h, nk * g, err);
	if (ba)
		return 0;
	if (parts)
		*parts = 2;
	o->gather = (tfs_hf_gather){ TFS_HF_GATHER_SEGS, 0, (uint64_t)nk, (uint64_t)g, 0,
				     { (uint64_t)dk, (uint64_t)dk, (uint64_t)rv } };
	o->ne[1] = nk * (2 * dk + rv);
	if (part) {   /* z: the gate, named attn_gate */
		o->gather = (tfs_hf_gather){ TFS_HF_GATHER_SEGS, (uint64_t)(2 * dk + rv),
					     (uint64_t)nk, (uint64_t)g, 0, { (uint64_t)rv, 0, 0 } };
		o->ne[1] = nk * rv;
		char *at = strstr(o->name, ".attn_qkv."), *nn;
		if (at) {   /* ".attn_qkv." -> ".attn_gate." (o->name is malloc'd, one byte
			     * longer now) */
			size_t pre = (size_t)(at - o->name), n = strlen(o->name);
			if (!(nn = malloc(n + 2)))
				return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
			memcpy(nn, o->name, pre);
			memcpy(nn + pre, ".attn_gate", 10);
			memcpy(nn + pre + 10, at + 9, n - pre - 9 + 1);
			free(o->name);
			o->name = nn;
		}
	}
	return 0;
}

/* ==== config ==== */

enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL, DB = TFS_HF_DEF_BOOL,
};

/* Qwen3NextConfig: the keys the converter reads */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", DI, 151936 }, { "hidden_size", DI, 2048 },
	{ "intermediate_size", DI, 5632 }, { "num_hidden_layers", DI, 48 },
	{ "num_attention_heads", DI, 16 }, { "num_key_value_heads", DI, 2 },
	{ "max_position_embeddings", DI, 32768 }, { "rms_norm_eps", DR, 1e-6 },
	{ "tie_word_embeddings", DB, 0 }, { "rope_theta", DR, 10000.0 },
	{ "rope_scaling", DN, 0 }, { "partial_rotary_factor", DR, 0.25 },
	{ "head_dim", DI, 256 }, { "linear_conv_kernel_dim", DI, 4 },
	{ "linear_key_head_dim", DI, 128 }, { "linear_value_head_dim", DI, 128 },
	{ "linear_num_key_heads", DI, 16 }, { "linear_num_value_heads", DI, 32 },
	{ "moe_intermediate_size", DI, 512 }, { "shared_expert_intermediate_size", DI, 512 },
	{ "num_experts_per_tok", DI, 10 }, { "num_experts", DI, 512 },
	{ "norm_topk_prob", DB, 1 }, { NULL, 0, 0 },
};

/* Qwen3NextConfig.__init__: layer_types, when absent or None, linear_attention but every
 * full_attention_interval-th layer (4 when absent) */
static int post_init(json_t *c, const char *where, tfs_error *err)
{
	json_t *lt = json_object_get(c, "layer_types"), *n = json_object_get(c, "num_hidden_layers");
	json_t *iv = json_object_get(c, "full_attention_interval");
	json_int_t k = iv ? (json_is_integer(iv) ? json_integer_value(iv) : 0) : 4;
	if ((lt && !json_is_null(lt)) || k <= 0 || !json_is_integer(n) ||
	    json_integer_value(n) < 0 || json_integer_value(n) > 65536)
		return 0;
	int bad = json_object_set_new(c, "layer_types", lt = json_array());
	for (json_int_t i = 0; lt && i < json_integer_value(n); i++)
		bad |= json_array_append_new(lt, json_string((i + 1) % k ? "linear_attention"
								       : "full_attention"));
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where) : 0;
}

static const struct tfs_hf_hooks hooks = {
	.prepare = tfs_hf_qnext_prepare, .rename = tfs_hf_qnext_rename, .fix = qn_fix,
};

const tfs_hf_arch tfs_hf_arch_qwen3next = {
	TFS_HF_CLASSES("Qwen3NextForCausalLM"), .gguf = "qwen3next",
	TFS_HF_NAMES(globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = tfs_hf_qnext_keys,
	.configs = (const tfs_hf_config_class[]){ { "qwen3_next", defaults, NULL, post_init, false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_GPT2, .moe = &experts, .hooks = &hooks,
	.xtensor = tfs_hf_qwen3next_xtensor, .xconfig = tfs_hf_qnext_xconfig,
};
