/*
 * hf_qwen35.c - Qwen3.5 in the GGUF view: Qwen3_5ForCausalLM as llama.cpp de3ff81's converter
 * writes it (conversion/qwen.py: Qwen3_5TextModel = _Qwen35MRopeMixin +
 * _LinearAttentionVReorderBase + Qwen3NextModel + _QwenMtpMixin + Qwen2MoeModel + TextModel).
 *
 * What the class does that the common plan does not:
 *  1. blocks: num_hidden_layers + the MTP layers (mtp_num_hidden_layers, else counted from the
 *     mtp.layers.N tensors; none at all is the converter's assertion); mtp.* tensors renamed
 *     to the block after the last (mtp.layers.K.x -> model.layers.(N+K).x, mtp.fc -> eh_proj,
 *     pre_fc_norm_embedding -> enorm, pre_fc_norm_hidden -> hnorm, norm -> shared_head.norm);
 *  2. hybrid layers: linear attention (Gated DeltaNet: in_proj_qkv/z/b/a, conv1d, dt_bias,
 *     A_log, norm, out_proj) or full attention (q_proj with its output gate: 2 x heads x
 *     head_dim rows, q/k norms), by layer_types;
 *  3. with fewer key heads than value heads, the value heads reordered from grouped by key
 *     head to tiled (_reorder_v_heads): the V rows of in_proj_qkv and conv1d, the rows of
 *     in_proj_z/b/a, dt_bias, A_log, the columns of out_proj (a gather, hf_plan.h);
 *  4. A_log -> ssm_a = -exp(A_log) in float32 (tfs_hf_neg_exp, hf_sleef.h); dt_bias ->
 *     ssm_dt.bias; conv1d squeezed to 2-D and kept F32; every *norm.weight but
 *     linear_attn.norm's + 1;
 *  5. keys: block_count with the MTP layers, rope.dimension_sections (mrope_section, else
 *     [11, 11, 10, 0]), nextn_predict_layers, ssm.*, attention.recurrent_layers,
 *     full_attention_interval, rope.dimension_count (head_dim x partial_rotary_factor).
 * Qwen3.5's model_type (qwen3_5_text) is unknown to transformers 4.57, whose AutoConfig the
 * converter tries first: config.json is read as written (no defaults).
 * Qwen3NextModel's hooks (prepare, rename, fix with or without 3's reorder, keys but 5's
 * sections) are exported for Qwen3-Next's row (hf_qwen3next.h, hf_qwen3next.c).  The
 * rows' reverse (hf_export.h): hf_qwen35_x.c.
 */
#include "hf_plan_impl.h"
#include "hf_moe.h"
#include "hf_qwen35_x.h"
#include "hf_qwen3next.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE, HK = TFS_HF_D_HOOK,
       EX = TFS_HF_D_EXPERTS, FE = TFS_HF_D_FF_EXP, FS = TFS_HF_D_FF_SHEXP, ONE = TFS_HF_D_ONE };
enum { XN = TFS_HF_XF_NONE, X1 = TFS_HF_XF_PLUS_ONE };

/* ==== tensor names ==== */

static const tfs_hf_name globals[] = {
	{ "model.embed_tokens", "token_embd", VOC, H, XN, true },
	{ "model.norm", "output_norm", H, NO, X1, true },
	{ "lm_head", "output", VOC, H, XN, false },
};

/* Whether a layer has linear or full attention is its config's (layer_types), so no block
 * tensor is required (the converter writes what there is). */
#define LAYER \
	{ "input_layernorm", "attn_norm", H, NO, X1, false }, \
	{ "post_attention_layernorm", "post_attention_norm", H, NO, X1, false }, \
	/* full attention */ \
	{ "self_attn.q_proj", "attn_q", HK, NO, XN, false }, \
	{ "self_attn.k_proj", "attn_k", KV, H, XN, false }, \
	{ "self_attn.v_proj", "attn_v", KV, H, XN, false }, \
	{ "self_attn.o_proj", "attn_output", H, Q, XN, false }, \
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, X1, false }, \
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, X1, false }, \
	/* linear attention (Gated DeltaNet) */ \
	{ "linear_attn.in_proj_qkv", "attn_qkv", HK, NO, XN, false }, \
	{ "linear_attn.in_proj_z", "attn_gate", HK, NO, XN, false }, \
	{ "linear_attn.in_proj_b", "ssm_beta", HK, NO, XN, false }, \
	{ "linear_attn.in_proj_a", "ssm_alpha", HK, NO, XN, false }, \
	{ "linear_attn.conv1d", "ssm_conv1d", HK, NO, XN, false }, \
	{ "linear_attn.dt_proj", "ssm_dt", HK, NO, XN, false }, \
	{ "linear_attn.A_log", "ssm_a", HK, NO, XN, false }, \
	{ "linear_attn.norm", "ssm_norm", HK, NO, XN, false }, \
	{ "linear_attn.out_proj", "ssm_out", HK, NO, XN, false }, \
	/* the MTP layer's own (renamed from mtp.*) */ \
	{ "eh_proj", "nextn.eh_proj", H, HK, XN, false }, \
	{ "enorm", "nextn.enorm", H, NO, X1, false }, \
	{ "hnorm", "nextn.hnorm", H, NO, X1, false }, \
	{ "shared_head.norm", "nextn.shared_head_norm", H, NO, X1, false }, \
	{ "shared_head.head", "nextn.shared_head_head", VOC, H, XN, false }, \
	{ "embed_tokens", "nextn.embed_tokens", VOC, H, XN, false }

static const tfs_hf_name blocks[] = {
	LAYER,
	/* the dense MLP */
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, false },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, false },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, false },
};

/* Qwen3.5-MoE: the router, the experts stacked in the checkpoint (gate_up_proj, split in
 * two, and down_proj; per-expert tensors go to hf_moe.c's stacking), a shared expert and its
 * gate */
static const tfs_hf_name moe_blocks[] = {
	LAYER,
	{ "mlp.gate", "ffn_gate_inp", EX, H, XN, false },
	{ "mlp.experts.gate_up_proj", "ffn_gate_exps", HK, NO, XN, false },
	{ "mlp.experts.down_proj", "ffn_down_exps", HK, NO, XN, false },
	{ "mlp.shared_expert_gate", "ffn_gate_inp_shexp", ONE, H, XN, false },
	{ "mlp.shared_expert.gate_proj", "ffn_gate_shexp", FS, H, XN, false },
	{ "mlp.shared_expert.up_proj", "ffn_up_shexp", FS, H, XN, false },
	{ "mlp.shared_expert.down_proj", "ffn_down_shexp", H, FS, XN, false },
};

static const char *const k_experts[] = { "num_local_experts", "num_experts", NULL };

/* Qwen2MoeModel's stacking of per-expert tensors (hf_moe.c) */
static const tfs_hf_moe experts = {
	"mlp.experts", { "down_proj", "gate_proj", "up_proj" },
	{ "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps" },
	{ H, FE, FE }, { FE, H, H }, k_experts, NULL,
};

/* ==== config ==== */

static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer", "num_layers",
				       NULL };

/* num_hidden_layers as config.json has it (TextModel's block count before the MTP layers) */
static int64_t trunk_layers(const hparams *h)
{
	json_t *v = tfs_hf_find(h->root, k_layer, NULL);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* A size the class reads as hparams[key]: a positive integer, else an error naming it. */
static int need_size(int64_t *out, const hparams *h, const char *key, tfs_error *err)
{
	json_t *v;
	int rc = tfs_hf_need(&v, h, key, err);
	if (rc)
		return rc;
	if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 1 << 20)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a positive integer "
				     "(up to 2^20)", h->where, key);
	*out = json_integer_value(v);
	return 0;
}

/* The linear attention's sizes: key heads, value heads, their head dims. */
typedef struct { int64_t nk, nv, dk, dv; bool reorder; } lin_sizes;

static int linear_sizes(lin_sizes *s, const hparams *h, tfs_error *err)
{
	int rc;
	if ((rc = need_size(&s->nk, h, "linear_num_key_heads", err)) ||
	    (rc = need_size(&s->nv, h, "linear_num_value_heads", err)) ||
	    (rc = need_size(&s->dk, h, "linear_key_head_dim", err)) ||
	    (rc = need_size(&s->dv, h, "linear_value_head_dim", err)))
		return rc;
	if (s->nv % s->nk)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: linear_num_value_heads %lld is not a "
				     "multiple of linear_num_key_heads %lld", h->where,
				     (long long)s->nv, (long long)s->nk);
	return 0;
}

/* ==== the MTP layers ==== */

/* "mtp.layers.K.<rest>": K (digits only, as str.isdecimal), else -1 */
static long mtp_layer(const char *name, const char **rest)
{
	static const char pre[] = "mtp.layers.";
	if (strncmp(name, pre, sizeof pre - 1))
		return -1;
	const char *p = name + sizeof pre - 1;
	long k = 0;
	for (; *p >= '0' && *p <= '9' && k < 1 << 20; p++)
		k = 10 * k + (*p - '0');
	if (p == name + sizeof pre - 1 || *p != '.')
		return -1;
	*rest = p + 1;
	return k;
}

/* _QwenMtpMixin.__init__: block_count = num_hidden_layers + mtp_num_hidden_layers, or (that
 * 0 or absent) the count of mtp.layers.K the tensors name; h->n_layer becomes the total. */
int tfs_hf_qnext_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	json_t *v = json_object_get(h->root, "mtp_num_hidden_layers");
	int64_t n = 0, most = 0;
	if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
		  json_integer_value(v) > 256))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"mtp_num_hidden_layers\" is not an "
				     "integer from 0 to 256", h->where);
	if (v)
		n = json_integer_value(v);
	for (size_t i = 0; n == 0 && i < tfs_model_n_tensors(st); i++) {
		const tfs_tensor *t = tfs_model_tensor(st, i);
		const char *name = t->name, *rest;
		if (!strncmp(name, "model.mtp.", 10))
			name += 6;
		long k = t->deleted ? -1 : mtp_layer(name, &rest);
		if (k >= 0 && k < 256 && k + 1 > most)
			most = k + 1;
	}
	if (n == 0)
		n = most;
	if (n == 0)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: no MTP layer (no "
				     "\"mtp_num_hidden_layers\" and no mtp.layers.N tensors): the "
				     "converter's %s class stops on that (its assertion) unless told "
				     "--no-mtp, which the view does not offer", h->where,
				     h->arch->classes[0]);
	h->n_layer += n;
	return 0;
}

/* _QwenMtpMixin.filter_tensors (after TextModel's): model.mtp. -> mtp.; mtp.layers.K.x ->
 * model.layers.(N+K).x; mtp.fc/pre_fc_norm_embedding/pre_fc_norm_hidden/norm.<suffix> -> the
 * block after the trunk's eh_proj/enorm/hnorm/shared_head.norm; Qwen3NextModel's dt_bias ->
 * dt_proj.bias. */
bool tfs_hf_qnext_rename(char *name, size_t cap, const hparams *h)
{
	static const char *const remap[][2] = {
		{ "fc", "eh_proj" }, { "pre_fc_norm_embedding", "enorm" },
		{ "pre_fc_norm_hidden", "hnorm" }, { "norm", "shared_head.norm" },
	};
	char tmp[512];
	size_t n = strlen(name);
	if (n > 8 && !strcmp(name + n - 8, ".dt_bias") && n + 6 < cap)
		strcpy(name + n - 8, ".dt_proj.bias");
	/* Qwen2MoeModel: the experts stacked in the checkpoint named as weights */
	if (n + 8 < cap && ((n > 22 && !strcmp(name + n - 22, ".mlp.experts.down_proj")) ||
			    (n > 25 && !strcmp(name + n - 25, ".mlp.experts.gate_up_proj"))))
		strcpy(name + n, ".weight");
	if (!strncmp(name, "model.mtp.", 10))   /* (a loop: gcc's -Warray-bounds under ASan
						 * took memmove's bounds for [0, 0]) */
		for (size_t i = 0; (name[i] = name[i + 6]) != '\0'; i++)
			;
	if (strncmp(name, "mtp.", 4) || strlen(name) >= sizeof tmp)
		return true;
	int64_t base = trunk_layers(h);
	const char *rest, *dot = strchr(name + 4, '.');
	long k = mtp_layer(name, &rest);
	if (k >= 0) {
		snprintf(tmp, sizeof tmp, "model.layers.%lld.%s", (long long)(base + k), rest);
	} else if (dot && !strchr(dot + 1, '.')) {   /* three parts: mtp.<what>.<suffix> */
		tmp[0] = 0;
		for (size_t i = 0; i < N(remap); i++)
			if (strlen(remap[i][0]) == (size_t)(dot - name - 4) &&
			    !strncmp(name + 4, remap[i][0], (size_t)(dot - name - 4)))
				snprintf(tmp, sizeof tmp, "model.layers.%lld.%s%s", (long long)base,
					 remap[i][1], dot);
		if (!tmp[0])
			return true;
	} else {
		return true;
	}
	if (strlen(tmp) < cap)
		strcpy(name, tmp);
	return true;
}

/* ==== the tensors ==== */

/* The source tensor's numpy shape with its size-1 axes dropped (torch's squeeze) */
static uint32_t squeezed(int64_t *shape, const tfs_tensor *t)
{
	uint32_t n = 0;
	for (uint32_t i = t->n_dims; i-- > 0;)
		if (t->ne[i] != 1)
			shape[n++] = t->ne[i];
	return n;
}

static int check_dims(const tfs_tensor *t, const char *shard, const int64_t *want, uint32_t wn,
		      bool squeeze, const hparams *h, tfs_error *err)
{
	int64_t shape[TFS_MAX_DIMS];
	uint32_t n = squeeze ? squeezed(shape, t) : t->n_dims;
	for (uint32_t i = 0; !squeeze && i < n; i++)
		shape[i] = t->ne[n - 1 - i];
	bool ok = n == wn;
	for (uint32_t i = 0; ok && i < n; i++)
		ok = shape[i] == want[i];
	if (ok)
		return 0;
	char got[96] = "", exp[96] = "";
	for (uint32_t i = 0, k = 0; i < n && k < sizeof got; i++)
		k += (size_t)snprintf(got + k, sizeof got - k, "%s%lld", i ? ", " : "",
				      (long long)shape[i]);
	for (uint32_t i = 0, k = 0; i < wn && k < sizeof exp; i++)
		k += (size_t)snprintf(exp + k, sizeof exp - k, "%s%lld", i ? ", " : "",
				      (long long)want[i]);
	return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has shape [%s]%s, but %s says "
			     "[%s] (Qwen3.5's sizes: heads, head_dim, linear_* heads and dims)",
			     shard, t->name, got, squeeze ? " squeezed" : "", h->where, exp);
}

static void gather(tfs_hf_tensor *o, int kind, int64_t skip, const lin_sizes *s, int64_t unit)
{
	if (s->nk == s->nv || !s->reorder)   /* _LinearAttentionVReorderBase: only when they
					      * differ (Qwen3-Next has no such base) */
		return;
	o->gather = (tfs_hf_gather){ (uint8_t)kind, (uint64_t)skip, (uint64_t)s->nk,
				     (uint64_t)(s->nv / s->nk), (uint64_t)unit, { 0, 0, 0 } };
}

/* The linear attention's tensors: shapes, the value heads' reorder, A_log's -exp, conv1d
 * squeezed and F32. */
static int fix_linear(tfs_hf_tensor *o, const tfs_tensor *t, const char *g, const hparams *h,
		      const char *shard, bool reorder, tfs_error *err)
{
	lin_sizes s;
	int rc = linear_sizes(&s, h, err);
	if (rc)
		return rc;
	s.reorder = reorder;
	int64_t qk = 2 * s.nk * s.dk, v = s.nv * s.dv, hid = h->hidden;
	int64_t w[2] = { 0, hid };
	enum { R = TFS_HF_GATHER_ROWS, C = TFS_HF_GATHER_COLS };
	if (!strcmp(g, "attn_qkv")) {
		w[0] = qk + v;
		gather(o, R, qk, &s, s.dv);
	} else if (!strcmp(g, "attn_gate")) {
		w[0] = v;
		gather(o, R, 0, &s, s.dv);
	} else if (!strcmp(g, "ssm_beta") || !strcmp(g, "ssm_alpha")) {
		w[0] = s.nv;
		gather(o, R, 0, &s, 1);
	} else if (!strcmp(g, "ssm_out")) {
		w[0] = hid;
		w[1] = v;
		gather(o, C, 0, &s, s.dv);
	} else if (!strcmp(g, "ssm_conv1d")) {
		/* Qwen3NextModel squeezes it: [channels, 1, kernel] -> [channels, kernel] */
		json_t *kv = json_object_get(h->root, "linear_conv_kernel_dim");
		int64_t want[2] = { qk + v, json_is_integer(kv) ? json_integer_value(kv) : -1 };
		int64_t shape[TFS_MAX_DIMS];
		uint32_t n = squeezed(shape, t);
		if (want[1] < 0 && n == 2)
			want[1] = shape[1];
		if ((rc = check_dims(t, shard, want, 2, true, h, err)))
			return rc;
		o->n_dims = 2;
		o->ne[0] = want[1];
		o->ne[1] = want[0];
		o->ne[2] = o->ne[3] = 1;
		o->dtype = TFS_DT_F32;   /* SSM_CONV1D is always F32 */
		gather(o, R, qk, &s, s.dv);
		return 0;
	} else {   /* 1-D: ssm_dt (dt_bias), ssm_a (A_log), ssm_norm */
		bool norm = !strcmp(g, "ssm_norm");
		w[0] = norm ? s.dv : s.nv;
		if ((rc = check_dims(t, shard, w, 1, false, h, err)))
			return rc;
		if (!norm)
			gather(o, R, 0, &s, 1);
		if (strcmp(g, "ssm_a"))
			return 0;
		if (t->dtype == TFS_DT_F16)
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is F16: the "
					     "converter takes exp of it in F16, which the reference's "
					     "torch (1.13) cannot; store A_log as F32 or BF16", shard,
					     t->name);
		o->neg_exp = true;
		return 0;
	}
	return check_dims(t, shard, w, 2, false, h, err);
}

/* Qwen2MoeModel's experts stacked in the checkpoint: down_proj [experts, hidden, ff] as it
 * is; gate_up_proj [experts, 2 ff, hidden] split in two: gate (each expert's first ff rows),
 * then up (the rest), two outputs of one tensor. */
static int fix_experts(tfs_hf_tensor *o, const tfs_tensor *t, const char *g, const hparams *h,
		       const char *shard, unsigned part, unsigned *parts, tfs_error *err)
{
	int64_t e = tfs_hf_moe_dim(TFS_HF_D_EXPERTS, h), ff = tfs_hf_moe_dim(TFS_HF_D_FF_EXP, h);
	bool down = !strcmp(g, "ffn_down_exps");
	int64_t w[3] = { e, down ? h->hidden : 2 * ff, down ? ff : h->hidden };
	int rc = check_dims(t, shard, w, 3, false, h, err);
	if (rc || down)
		return rc;
	if (parts)
		*parts = 2;
	o->ne[1] = ff;
	o->gather = (tfs_hf_gather){ TFS_HF_GATHER_SPLIT, part, 2, 0, 0, { 0, 0, 0 } };
	char *dot = part ? strstr(o->name, ".ffn_gate_exps.") : NULL;
	if (dot) {   /* ".ffn_gate_exps." -> ".ffn_up_exps." */
		memmove(dot + 7, dot + 9, strlen(dot + 9) + 1);
		memcpy(dot + 1, "ffn_up", 6);
	}
	return 0;
}

/* The row's fix hook: full attention's gated q_proj, the MTP layer's eh_proj, the linear
 * attention's tensors, the experts stacked in the checkpoint. */
int tfs_hf_qnext_fix(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m, const hparams *h,
		     const char *shard, unsigned part, unsigned *parts, bool reorder, tfs_error *err)
{
	const char *g = m->gguf;
	if (!strcmp(g, "ffn_gate_exps") || !strcmp(g, "ffn_down_exps"))
		return fix_experts(o, t, g, h, shard, part, parts, err);
	if (!strcmp(g, "attn_q")) {   /* q and its output gate: 2 x heads x head_dim rows */
		int64_t w[2] = { 2 * h->n_head * h->head_dim, h->hidden };
		return check_dims(t, shard, w, 2, false, h, err);
	}
	if (!strcmp(g, "nextn.eh_proj")) {   /* [hidden, 2 x hidden] */
		int64_t w[2] = { h->hidden, 2 * h->hidden };
		return check_dims(t, shard, w, 2, false, h, err);
	}
	if (m->rows != TFS_HF_D_HOOK)
		return 0;
	return fix_linear(o, t, g, h, shard, reorder, err);
}

static int q35_fix(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m, const hparams *h,
		   const char *shard, unsigned part, unsigned *parts, tfs_error *err)
{
	return tfs_hf_qnext_fix(o, t, m, h, shard, part, parts, true, err);
}

/* ==== keys ==== */

static int add_u32(tfs_hf_kvs *l, const hparams *h, const char *suffix, int64_t v,
		   tfs_error *err)
{
	char name[128];
	snprintf(name, sizeof name, "%s.%s", h->arch->gguf, suffix);
	if (v < 0 || v > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s would be %lld, not a 32-bit "
				     "unsigned integer", h->where, name, (long long)v);
	return tfs_hf_kvs_add_u32(l, name, (uint32_t)v, err);
}

/* attention.recurrent_layers: layer_types' linear_attention layers, the MTP layers not */
static int recurrent_layers(tfs_hf_kvs *l, const hparams *h, const json_t *lt, tfs_error *err)
{
	int64_t trunk = trunk_layers(h);
	if ((int64_t)json_array_size(lt) != trunk)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: layer_types has %zu entries, but "
				     "num_hidden_layers is %lld (the converter refuses that)",
				     h->where, json_array_size(lt), (long long)trunk);
	size_t n = (size_t)h->n_layer;
	uint8_t *d = malloc(12 + n);
	char name[128];
	if (!d)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	uint32_t sub = TFS_GGUF_BOOL;
	uint64_t cnt = n;
	memcpy(d, &sub, 4);
	memcpy(d + 4, &cnt, 8);
	for (size_t i = 0; i < n; i++) {
		const char *t = json_string_value(json_array_get(lt, i));
		d[12 + i] = (int64_t)i < trunk && t && !strcmp(t, "linear_attention");
	}
	snprintf(name, sizeof name, "%s.attention.recurrent_layers", h->arch->gguf);
	int rc = tfs_hf_kvs_add(l, name, TFS_GGUF_ARRAY, d, 12 + n, err);
	free(d);
	return rc;
}

/* rope.dimension_count: int((head_dim or hidden // heads) x partial_rotary_factor (0.25)) */
static int rope_dims(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *hd = json_object_get(h->root, "head_dim");
	json_t *pf = json_object_get(h->rope, "partial_rotary_factor");
	double dim = json_is_integer(hd) ? (double)json_integer_value(hd)
					 : (double)(h->hidden / h->n_head);
	if (hd && !json_is_null(hd) && !json_is_integer(hd))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"head_dim\" is not an integer",
				     h->where);
	if (pf && !json_is_number(pf))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"partial_rotary_factor\" is not a "
				     "number", h->where);
	double f = pf ? json_number_value(pf) : 0.25;
	return add_u32(l, h, "rope.dimension_count", (int64_t)(dim * f), err);
}

/* Qwen2MoeModel's, _QwenMtpMixin's and Qwen3NextModel's keys after TextModel's (block_count
 * rewritten in its place with the MTP layers) */
int tfs_hf_qnext_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const struct { const char *suffix, *key; } ssm[] = {
		{ "ssm.conv_kernel", "linear_conv_kernel_dim" },
		{ "ssm.state_size", "linear_key_head_dim" },
		{ "ssm.group_count", "linear_num_key_heads" },
		{ "ssm.time_step_rank", "linear_num_value_heads" },
	};
	int64_t trunk = trunk_layers(h), x;
	json_t *v;
	int rc = add_u32(l, h, "block_count", h->n_layer, err);
	static const char *const moe[][2] = {
		{ "moe_intermediate_size", "expert_feed_forward_length" },
		{ "shared_expert_intermediate_size", "expert_shared_feed_forward_length" },
	};
	for (size_t i = 0; !rc && i < N(moe); i++)
		if ((v = json_object_get(h->root, moe[i][0])) && !json_is_null(v))
			rc = tfs_hf_add_u32(l, h, moe[i][1], v, moe[i][0], err);
	if (!rc && h->n_layer > trunk)
		rc = add_u32(l, h, "nextn_predict_layers", h->n_layer - trunk, err);
	for (size_t i = 0; !rc && i < N(ssm); i++)
		if (!(rc = tfs_hf_need(&v, h, ssm[i].key, err)))
			rc = tfs_hf_add_u32(l, h, ssm[i].suffix, v, ssm[i].key, err);
	lin_sizes s;
	if (rc || (rc = linear_sizes(&s, h, err)) ||
	    (rc = add_u32(l, h, "ssm.inner_size", s.dv * s.nv, err)))
		return rc;
	json_t *lt = json_object_get(h->root, "layer_types");
	if (lt && !json_is_null(lt) && (rc = json_is_array(lt) ? recurrent_layers(l, h, lt, err)
				: tfs_error_set(err, TFS_E_FORMAT, "%s: \"layer_types\" is not a "
						"list", h->where)))
		return rc;
	v = json_object_get(h->root, "full_attention_interval");
	if (v && !json_is_integer(v))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"full_attention_interval\" is not an "
				     "integer", h->where);
	x = v ? json_integer_value(v) : 4;
	if ((rc = add_u32(l, h, "full_attention_interval", x, err)))
		return rc;
	return rope_dims(l, h, err);
}

/* ... then _Qwen35MRopeMixin's */
static int q35_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	int rc = tfs_hf_qnext_keys(l, h, err);
	if (rc || json_object_get(h->rope, "mrope_section"))
		return rc;
	static const int32_t sections[] = { 11, 11, 10, 0 };   /* _Qwen35MRopeMixin's default */
	char name[128];
	snprintf(name, sizeof name, "%s.rope.dimension_sections", h->arch->gguf);
	return tfs_hf_kvs_add_arr_i32(l, name, sections, N(sections), err);
}

/* ==== the rows ==== */

static const struct tfs_hf_hooks hooks = {
	.prepare = tfs_hf_qnext_prepare, .rename = tfs_hf_qnext_rename, .fix = q35_fix,
};

/* Qwen3.5's model_type (qwen3_5_text) is unknown to transformers 4.57: no config class */
const tfs_hf_arch tfs_hf_arch_qwen35 = {
	TFS_HF_CLASSES("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration"),
	.gguf = "qwen35", TFS_HF_NAMES(globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = q35_keys, .vocab = TFS_HF_VOCAB_GPT2, .hooks = &hooks,
	.xtensor = tfs_hf_qwen35_xtensor, .xconfig = tfs_hf_qnext_xconfig,
};

const tfs_hf_arch tfs_hf_arch_qwen35moe = {
	TFS_HF_CLASSES("Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"),
	.gguf = "qwen35moe", TFS_HF_NAMES(globals, moe_blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = q35_keys, .vocab = TFS_HF_VOCAB_GPT2, .moe = &experts, .hooks = &hooks,
	.xtensor = tfs_hf_qwen35_xtensor, .xconfig = tfs_hf_qnext_xconfig,
};
