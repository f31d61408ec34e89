/*
 * hf_gptoss.c - GPT-OSS in the GGUF view (hf_gptoss.h): its row, GptOssConfig's defaults and
 * rope_scaling, its experts (MXFP4 repacked, or dequantized and transposed; gate/up
 * interleaved), expert biases and attention sinks, and the reader of the tensors computed
 * from them.
 */
#include "hf_gptoss.h"
#include "hf_moe.h"
#include "hf_names.h"
#include "hf_convert.h"
#include "hf_plan_impl.h"
#include "hf_export.h"
#include "source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, NO = TFS_HF_D_NONE,
       VOC = TFS_HF_D_VOCAB, EX = TFS_HF_D_EXPERTS, XN = TFS_HF_XF_NONE };

/* ==== the row ==== */


/* biased q/k/v/o, the norm after attention named post_attention_norm, a biased router; the
 * experts and sinks are the class's own (take) */
static const tfs_hf_name layer[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "mlp.router", "ffn_gate_inp", EX, H, XN, true },
};

/* GptOssModel.set_gguf_parameters: after TextModel's, the sliding window and the experts'
 * feed-forward length (intermediate_size) */
static int gptoss_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *v;
	int rc = tfs_hf_need(&v, h, "sliding_window", err);
	if (!rc)
		rc = tfs_hf_add_u32(l, h, "attention.sliding_window", v, "sliding_window", err);
	if (!rc)
		rc = tfs_hf_need(&v, h, "intermediate_size", err);
	if (!rc)
		rc = tfs_hf_add_u32(l, h, "expert_feed_forward_length", v, "intermediate_size",
				    err);
	return rc;
}

/* ==== the experts ==== */

static int64_t n_experts(const hparams *h)
{
	return tfs_hf_moe_dim(TFS_HF_D_EXPERTS, h);
}

/* numpy shape of t as text */
static void shape_text(char *out, size_t cap, const tfs_tensor *t)
{
	size_t k = (size_t)snprintf(out, cap, "[");
	for (uint32_t i = 0; i < t->n_dims && k < cap; i++)
		k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? ", " : "",
				      (long long)t->ne[t->n_dims - 1 - i]);
	if (k < cap)
		snprintf(out + k, cap - k, "]");
}

/* t must have numpy shape want (nd dims; a want of -1 is not checked) and, float, a float
 * dtype (else U8). */
static int check(const tfs_tensor *t, const int64_t *want, uint32_t nd, bool is_float,
		 const char *what, const char *where, const hparams *h, tfs_error *err)
{
	bool ok = t->n_dims == nd;
	for (uint32_t i = 0; ok && i < nd; i++)
		ok = want[i] < 0 || t->ne[nd - 1 - i] == want[i];
	char got[96], exp[96];
	if (!ok) {
		size_t k = (size_t)snprintf(exp, sizeof exp, "[");
		for (uint32_t i = 0; i < nd && k < sizeof exp; i++)
			k += (size_t)snprintf(exp + k, sizeof exp - k, "%s%lld", i ? ", " : "",
					      (long long)want[i]);
		if (k < sizeof exp)
			snprintf(exp + k, sizeof exp - k, "]");
		shape_text(got, sizeof got, t);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has shape %s, but %s "
				     "says %s (%s)", where, t->name, got, h->where, exp, what);
	}
	bool fl = t->dtype == TFS_DT_F32 || t->dtype == TFS_DT_F16 || t->dtype == TFS_DT_BF16;
	if (is_float ? !fl : t->dtype != TFS_DT_U8) {
		const tfs_dtype_info *di = tfs_dtype(t->dtype);
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is %s; the converter "
				     "reads it as %s", where, t->name, di ? di->name : "of an "
				     "unknown type", is_float ? "F32, F16 or BF16" : "U8 (MXFP4)");
	}
	return 0;
}

/* out: name, shape ne (GGUF order, nd dims), source src, computed as own. */
static void put(tfs_hf_stack *out, const tfs_tensor *t, long src, const char *name,
		const int64_t *ne, uint32_t nd, tfs_hf_own own)
{
	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "%s", name);
	out->shape = *t;
	out->shape.name = out->name;
	out->shape.n_dims = nd;
	memset(out->shape.ne, 0, sizeof out->shape.ne);
	for (uint32_t d = 0; d < nd; d++)
		out->shape.ne[d] = ne[d];
	out->src = src;
	out->own = own;
}

/* A layer's (b) expert tensor x (after "mlp.experts.") of modify_tensors: the biases, the
 * dequantized experts (transposed; gate_up split by columns, even gate, odd up). */
static int take_expert(const tfs_tensor *t, size_t idx, unsigned long b, const char *x,
		       const hparams *h, const char *where, tfs_hf_stack *out, size_t *n,
		       tfs_error *err)
{
	static const char *const proj[2] = { "gate", "up" };
	int64_t e = n_experts(h), hid = h->hidden, ff = h->ff, ff2 = ff > 0 ? 2 * ff : -1;
	bool down = !strncmp(x, "down_proj", 9), bias = !strcmp(x, down ? "down_proj_bias" :
							       "gate_up_proj_bias");
	if (!bias && strcmp(x, down ? "down_proj" : "gate_up_proj"))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name for "
				     "architecture gpt-oss (the converter cannot map it)", where,
				     t->name);
	int64_t want[3] = { e, bias ? (down ? hid : ff2) : (down ? ff : hid),
			    down ? hid : ff2 };
	int rc = check(t, want, bias ? 2 : 3, true, bias ? (down ? "num_local_experts, "
		       "hidden_size" : "num_local_experts, 2 x intermediate_size") : down ?
		       "num_local_experts, intermediate_size, hidden_size" : "num_local_experts, "
		       "hidden_size, 2 x intermediate_size", where, h, err);
	if (!rc && !down && t->ne[0] % 2)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': an odd count of gate/up "
				   "columns", where, t->name);
	if (rc)
		return rc;
	char name[128];
	int64_t ne[3] = { t->ne[0], t->ne[1], t->ne[2] };
	if (!bias)   /* [E, A, B] -> [E, B / stride, A] */
		ne[0] = t->ne[1], ne[1] = t->ne[0] / (down ? 1 : 2);
	else if (!down)
		ne[0] = t->ne[0] / 2;
	uint8_t kind = bias ? TFS_HF_OWN_COLS : TFS_HF_OWN_T;
	for (int k = 0; k < (down ? 1 : 2); k++) {
		snprintf(name, sizeof name, "blk.%lu.ffn_%s_exps.%s", b, down ? "down" : proj[k],
			 bias ? "bias" : "weight");
		put(&out[k], t, (long)idx, name, ne, bias ? 2 : 3, (tfs_hf_own){
		    .kind = down && bias ? TFS_HF_OWN_NONE : kind, .stride = down ? 1 : 2,
		    .first = (uint32_t)k, .src2 = -1 });
	}
	*n = down ? 1 : 2;
	return 0;
}

/* GptOssModel.modify_tensors (and filter_tensors' sinks): a layer's sinks and experts; the
 * MXFP4 blocks and scales left out (first() wrote them). */
static int take(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(st, idx);
	unsigned long b;
	const char *rest;
	*n = 0;
	if (!tfs_hf_index_of(t->name, "model.layers.", &b, &rest))
		return TFS_PASSTHROUGH;
	bool sinks = strcmp(rest, "self_attn.sinks") == 0;
	if (!sinks && strncmp(rest, "mlp.experts.", 12))
		return TFS_PASSTHROUGH;
	if ((int64_t)b >= h->n_layer)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name (%s "
				     "says num_hidden_layers %lld)", where, t->name, h->where,
				     (long long)h->n_layer);
	const char *x = rest + 12;
	if (!sinks)
		return !strcmp(x, "down_proj_blocks") || !strcmp(x, "down_proj_scales") ||
		       !strcmp(x, "gate_up_proj_blocks") || !strcmp(x, "gate_up_proj_scales") ? 0
		       : take_expert(t, idx, b, x, h, where, out, n, err);
	int64_t want[1] = { h->n_head };
	int rc = check(t, want, 1, true, "num_attention_heads", where, h, err);
	if (rc)
		return rc;
	char name[128];
	snprintf(name, sizeof name, "blk.%lu.attn_sinks.weight", b);
	put(&out[0], t, (long)idx, name, t->ne, 1, (tfs_hf_own){ .kind = TFS_HF_OWN_NONE });
	*n = 1;
	return 0;
}

/* The MXFP4 pair of a *_scales tensor: blocks (the last *_blocks read before it, as
 * generate_extra_tensors pairs them) checked against scales and the config. */
static int mxfp4_pair(const hparams *h, const tfs_model *st, long blocks, size_t sidx,
		      bool down, unsigned long b, tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	const tfs_tensor *s = tfs_model_tensor(st, sidx);
	const char *where = tfs_model_path(st);
	char want_name[160], name[128];
	snprintf(want_name, sizeof want_name, "model.layers.%lu.mlp.experts.%s_blocks", b,
		 down ? "down_proj" : "gate_up_proj");
	const tfs_tensor *bl = blocks >= 0 ? tfs_model_tensor(st, (size_t)blocks) : NULL;
	if (!bl || strcmp(bl->name, want_name))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is not read right after "
				     "'%s' (the converter pairs a *_scales with the *_blocks read "
				     "before it)", where, s->name, want_name);
	if ((int64_t)b >= h->n_layer)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name (%s "
				     "says num_hidden_layers %lld)", where, s->name, h->where,
				     (long long)h->n_layer);
	int64_t e = n_experts(h), rows = down ? h->hidden : (h->ff > 0 ? 2 * h->ff : -1);
	int64_t cols = down ? h->ff : h->hidden;
	int64_t ws[3] = { e, rows, cols > 0 ? cols / 32 : -1 };
	int rc = check(s, ws, 3, false, down ? "num_local_experts, hidden_size, "
		       "intermediate_size / 32" : "num_local_experts, 2 x intermediate_size, "
		       "hidden_size / 32", where, h, err);
	int64_t wb[4] = { s->ne[2], s->ne[1], s->ne[0], 16 };
	if (!rc)
		rc = check(bl, wb, 4, false, "its scales' shape and 16", where, h, err);
	if (!rc && cols > 0 && cols % 32)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %s %lld is no multiple of "
				   "MXFP4's 32", where, s->name, down ? "intermediate_size" :
				   "hidden_size", (long long)cols);
	if (!rc && !down && s->ne[1] % 2)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': an odd count of gate/up "
				   "rows", where, s->name);
	if (rc)
		return rc;
	int64_t ne[3] = { s->ne[0] * 32, down ? s->ne[1] : s->ne[1] / 2, s->ne[2] };
	static const char *const proj[3] = { "down", "gate", "up" };
	for (int k = down ? 0 : 1; k < (down ? 1 : 3); k++) {
		snprintf(name, sizeof name, "blk.%lu.ffn_%s_exps.weight", b, proj[k]);
		put(&out[(*n)++], bl, blocks, name, ne, 3, (tfs_hf_own){ .kind = TFS_HF_OWN_MXFP4,
		    .stride = (uint8_t)(down ? 1 : 2), .first = (uint32_t)(down ? 0 : k - 1),
		    .src2 = (long)sidx });
	}
	return 0;
}

/* Source tensors in the converter's reading order: shards by file name, then names. */
static int cmp_order(const void *a, const void *b, void *ctx)
{
	const tfs_model *st = ctx;
	const tfs_tensor *x = tfs_model_tensor(st, *(const size_t *)a);
	const tfs_tensor *y = tfs_model_tensor(st, *(const size_t *)b);
	int c = strcmp(tfs_source_label(tfs_model_source(st, (size_t)x->src)),
		       tfs_source_label(tfs_model_source(st, (size_t)y->src)));
	return c ? c : strcmp(x->name, y->name);
}

/* GptOssModel.generate_extra_tensors: the MXFP4 experts, in reading order, first. */
static int first(const hparams *h, const tfs_model *st, tfs_hf_stack **out,
		 size_t *nout, bool *mxfp4, tfs_error *err)
{
	json_t *qc = json_object_get(h->root, "quantization_config");
	const char *qm = json_string_value(json_object_get(qc, "quant_method"));
	*mxfp4 = qm && strcmp(qm, "mxfp4") == 0;
	*out = NULL;
	*nout = 0;
	size_t cap = 0, ns = 0, nt = tfs_model_n_tensors(st);
	size_t *order = malloc((nt ? nt : 1) * sizeof *order);
	if (!order)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	for (size_t i = 0; i < nt; i++)
		if (!tfs_model_tensor(st, i)->deleted)
			order[ns++] = i;
	qsort_r(order, ns, sizeof *order, cmp_order, (void *)st);
	long blocks = -1;
	int rc = 0;
	for (size_t k = 0; !rc && k < ns; k++) {
		const tfs_tensor *t = tfs_model_tensor(st, order[k]);
		unsigned long b;
		const char *rest;
		if (!tfs_hf_index_of(t->name, "model.layers.", &b, &rest) ||
		    strncmp(rest, "mlp.experts.", 12))
			continue;
		const char *x = rest + 12;
		if (!strcmp(x, "down_proj_blocks") || !strcmp(x, "gate_up_proj_blocks")) {
			blocks = (long)order[k];
			continue;
		}
		bool down = !strcmp(x, "down_proj_scales");
		if (!down && strcmp(x, "gate_up_proj_scales"))
			continue;
		if (*nout + 2 > cap) {
			size_t c = cap ? 2 * cap : 16;
			tfs_hf_stack *grown = realloc(*out, c * sizeof *grown);
			if (!grown) {
				rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
				break;
			}
			*out = grown;
			cap = c;
		}
		rc = mxfp4_pair(h, st, blocks, order[k], down, b, *out, nout, err);
	}
	free(order);
	return rc;
}

static const tfs_hf_moe experts = {
	"mlp.experts", { "down_proj", "gate_up_proj", "gate_up_proj" },
	{ "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps" },
	{ H, TFS_HF_D_FF, TFS_HF_D_FF }, { TFS_HF_D_FF, H, H }, NULL, take,
};

/* ==== the row ==== */

/* GptOssConfig (transformers 4.57): the keys the converter reads */
static const tfs_hf_default defaults[] = {
	{ "num_hidden_layers", TFS_HF_DEF_INT, 36 }, { "num_local_experts", TFS_HF_DEF_INT, 128 },
	{ "vocab_size", TFS_HF_DEF_INT, 201088 }, { "hidden_size", TFS_HF_DEF_INT, 2880 },
	{ "intermediate_size", TFS_HF_DEF_INT, 2880 }, { "head_dim", TFS_HF_DEF_INT, 64 },
	{ "num_attention_heads", TFS_HF_DEF_INT, 64 },
	{ "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 8 },
	{ "sliding_window", TFS_HF_DEF_INT, 128 }, { "rope_theta", TFS_HF_DEF_REAL, 150000.0 },
	{ "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 131072 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 },
	{ "num_experts_per_tok", TFS_HF_DEF_INT, 4 }, { NULL, 0, 0 },
};

/* GptOssConfig.__init__: no rope_scaling is its default dict, yarn x32 from 4096 */
static int post_init(json_t *obj, const char *where, tfs_error *err)
{
	if (!json_object_get(obj, "rope_scaling") &&
	    json_object_set_new(obj, "rope_scaling", json_pack("{s:s,s:f,s:f,s:f,s:b,s:i}",
			"rope_type", "yarn", "factor", 32.0, "beta_fast", 32.0, "beta_slow", 1.0,
			"truncate", 0, "original_max_position_embeddings", 4096)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	return 0;
}

static const struct tfs_hf_hooks hooks = { .first = first };

static int taken(int rc)
{
	return rc ? rc : 1;
}

/* The reverse view (hf_export.h): what take() and first() made, as the dequantized
 * checkpoint holds it: blk.N.attn_sinks.weight as self_attn.sinks; ffn_gate_exps and
 * ffn_up_exps ([E, ff, hidden], whatever their GGUF type: MXFP4 is shown dequantized) as
 * mlp.experts.gate_up_proj [E, hidden, 2 ff], gate the even columns and up the odd ones,
 * and their biases as gate_up_proj_bias [E, 2 ff] so; ffn_down_exps as down_proj
 * [E, ff, hidden] and its bias as down_proj_bias.  The exact inverses of the converter's
 * transpose and [::2] / [1::2]. */
static int xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	unsigned long b;
	const char *r;
	if (!tfs_hf_index_of(t->name, "blk.", &b, &r))
		return 0;
	const char *suf = strrchr(r, '.');
	char name[160], other[160];
	size_t src[2] = { i, i };
	if (!strcmp(r, "attn_sinks.weight")) {
		snprintf(name, sizeof name, "model.layers.%lu.self_attn.sinks", b);
		return taken(tfs_hf_export_add_mix(x, name, src, 1, false, false, err));
	}
	bool bias = suf && !strcmp(suf, ".bias");
	if (!suf || (!bias && strcmp(suf, ".weight")))
		return 0;
	size_t n = (size_t)(suf - r);
	bool gate = n == 13 && !strncmp(r, "ffn_gate_exps", n);
	bool up = n == 11 && !strncmp(r, "ffn_up_exps", n);
	if (n == 13 && !strncmp(r, "ffn_down_exps", n)) {
		snprintf(name, sizeof name, "model.layers.%lu.mlp.experts.down_proj%s", b,
			 bias ? "_bias" : "");
		return taken(tfs_hf_export_add_mix(x, name, src, 1, !bias, false, err));
	}
	if (!gate && !up)
		return 0;
	/* the pair: found by the gate, its up taken with it (each needs the other) */
	snprintf(other, sizeof other, "blk.%lu.%s%s", b, gate ? "ffn_up_exps" : "ffn_gate_exps",
		 suf);
	long j = tfs_model_find_tensor(x->m, other);
	if (j < 0 || tfs_model_tensor(x->m, (size_t)j)->deleted)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: no %s to make "
				     "gate_up_proj of", t->name, other);
	if (up)
		return 1;
	src[1] = (size_t)j;
	snprintf(name, sizeof name, "model.layers.%lu.mlp.experts.gate_up_proj%s", b,
		 bias ? "_bias" : "");
	return taken(tfs_hf_export_add_mix(x, name, src, 2, !bias, false, err));
}

const tfs_hf_arch tfs_hf_arch_gptoss = {
	TFS_HF_CLASSES("GptOssForCausalLM"), .gguf = "gpt-oss", TFS_HF_NAMES(tfs_hf_globals, layer),
	.flags = TFS_HF_ARCH_BASE_PARAMS, .params = gptoss_keys,
	.configs = (const tfs_hf_config_class[]){ { "gpt_oss", defaults, NULL, post_init, false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_GPT2, .moe = &experts, .hooks = &hooks, .xtensor = xtensor,
};

/* ==== reading ==== */

/* Output bytes computed per step (whole rows; at least one). */
#define STEP_BYTES (256u << 10)


/* An MXFP4 block's 16 code bytes from the checkpoint's (element 2i low, 2i + 1 high) to
 * ggml's (byte j: element j low, element j + 16 high). */
static void repack16(uint8_t *o, const uint8_t *s)
{
	for (int j = 0; j < 16; j++) {
		int sh = (j & 1) * 4;
		o[j] = (uint8_t)(((s[j >> 1] >> sh) & 15) | ((s[8 + (j >> 1)] >> sh) & 15) << 4);
	}
}

/* Output rows [g, g + n) of an MXFP4 tensor: source rows g * stride + first, ... */
static int rows_mxfp4(const tfs_model *st, const tfs_hf_tensor *t, uint64_t g, uint64_t n,
		      uint8_t *o, tfs_error *err)
{
	uint64_t nb = (uint64_t)t->ne[0] / 32, sr = g * t->own.stride + t->own.first;
	uint64_t nsr = (n - 1) * t->own.stride + 1;
	uint8_t *bl = malloc(nsr * nb * 17);
	if (!bl)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	uint8_t *sc = bl + nsr * nb * 16;
	int rc = tfs_tensor_read_exact(st, (size_t)t->src, sr * nb * 16, nsr * nb * 16, bl, err);
	if (!rc)
		rc = tfs_tensor_read_exact(st, (size_t)t->own.src2, sr * nb, nsr * nb, sc, err);
	for (uint64_t i = 0; !rc && i < n; i++) {
		uint64_t r = i * t->own.stride;
		for (uint64_t k = 0; k < nb; k++) {
			uint8_t *d = o + (i * nb + k) * 17;
			d[0] = sc[r * nb + k];
			repack16(d + 1, bl + (r * nb + k) * 16);
		}
	}
	free(bl);
	return rc;
}

/* Output rows [g, g + n) of a column-taking tensor (a bias): output element x is source
 * element x * stride + first. */
static int rows_cols(const tfs_model *st, const tfs_hf_tensor *t, uint64_t g, uint64_t n,
		     uint8_t *o, tfs_error *err)
{
	uint64_t cnt = n * (uint64_t)t->ne[0], ses = tfs_dtype(t->src_dtype)->block_bytes;
	uint64_t x0 = g * (uint64_t)t->ne[0], sn = (cnt - 1) * t->own.stride + 1;
	uint64_t fo = (sn * ses + 3) & ~(uint64_t)3;   /* the floats 4-aligned after the bytes */
	uint8_t *sb = malloc(fo + (sn + cnt) * 4);
	if (!sb)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	uint32_t *f = (uint32_t *)(sb + fo), *pick = f + sn;
	int rc = tfs_tensor_read_exact(st, (size_t)t->src, (x0 * t->own.stride + t->own.first) * ses,
				       sn * ses, sb, err);
	if (!rc) {
		tfs_hf_to_f32(f, sb, t->src_dtype, (size_t)sn);
		for (uint64_t i = 0; i < cnt; i++)
			pick[i] = f[i * t->own.stride];
		tfs_hf_from_f32(o, t->dtype, pick, (size_t)cnt);
	}
	free(sb);
	return rc;
}

/* Output rows [g, g + n) of a transposed tensor: row (e, c) of A values is source column
 * c * stride + first of expert e's [A, B] (B: own.width, else C x stride); read per source
 * row, rows of one expert at a time. */
static int rows_t(const tfs_model *st, const tfs_hf_tensor *t, uint64_t g, uint64_t n,
		  uint8_t *o, tfs_error *err)
{
	uint64_t A = (uint64_t)t->ne[0], C = (uint64_t)t->ne[1];
	uint64_t B = t->own.width ? t->own.width : C * t->own.stride;
	uint64_t ses = tfs_dtype(t->src_dtype)->block_bytes;
	uint64_t orb = t->nbytes / (C * (uint64_t)t->ne[2]);
	uint64_t span = (n - 1) * t->own.stride + 1;
	uint64_t fo = (span * ses + 3) & ~(uint64_t)3;   /* the floats 4-aligned after the bytes */
	uint8_t *sb = malloc(fo + (span + n * A) * 4);
	if (!sb)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	uint32_t *f = (uint32_t *)(sb + fo), *rows = f + span;
	int rc = 0;
	for (uint64_t r = g; !rc && r < g + n;) {
		uint64_t e = r / C, c0 = r % C, c1 = C < c0 + (g + n - r) ? C : c0 + (g + n - r);
		uint64_t m = c1 - c0, sp = (m - 1) * t->own.stride + 1;
		for (uint64_t a = 0; !rc && a < A; a++) {
			uint64_t at = (e * A + a) * B + c0 * t->own.stride + t->own.first;
			if ((rc = tfs_tensor_read_exact(st, (size_t)t->src, at * ses, sp * ses, sb, err)))
				break;
			tfs_hf_to_f32(f, sb, t->src_dtype, (size_t)sp);
			for (uint64_t c = 0; c < m; c++)
				rows[c * A + a] = f[c * t->own.stride];
		}
		for (uint64_t c = 0; !rc && c < m; c++)
			tfs_hf_from_f32(o + (r - g + c) * orb, t->dtype, rows + c * A, (size_t)A);
		r += m;
	}
	free(sb);
	return rc;
}

int tfs_hf_own_read(const tfs_model *st, const tfs_hf_tensor *t, uint64_t off, uint64_t end,
		    uint8_t *o, tfs_error *err)
{
	uint64_t nrows = 1;
	for (uint32_t d = 1; d < t->n_dims; d++)
		nrows *= (uint64_t)t->ne[d];
	uint64_t rb = t->nbytes / nrows, per = STEP_BYTES / rb ? STEP_BYTES / rb : 1;
	uint8_t *buf = malloc(per * rb);
	if (!buf)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	int rc = 0;
	for (uint64_t g = off / rb; !rc && g * rb < end;) {
		uint64_t n = (end - g * rb + rb - 1) / rb;
		if (n > per)
			n = per;
		switch (t->own.kind) {
		case TFS_HF_OWN_MXFP4: rc = rows_mxfp4(st, t, g, n, buf, err); break;
		case TFS_HF_OWN_COLS: rc = rows_cols(st, t, g, n, buf, err); break;
		default: rc = rows_t(st, t, g, n, buf, err); break;
		}
		uint64_t lo = g * rb, hi = (g + n) * rb;
		uint64_t a = lo > off ? lo : off, b = hi < end ? hi : end;
		if (!rc)
			memcpy(o + (a - off), buf + (a - lo), (size_t)(b - a));
		g += n;
	}
	free(buf);
	return rc;
}
