/*
 * hf_qwen35_x.c - the rows of Qwen3.5, Qwen3.5-MoE and Qwen3-Next read backwards
 * (hf_export.h): their xtensor and xconfig hooks, which undo what the converter's
 * Qwen3NextModel and _LinearAttentionVReorderBase did (hf_qwen35.c's and hf_qwen3next.c's
 * plan hooks):
 *  - the MTP layer (the blocks after num_hidden_layers) back under mtp.*: mtp.layers.K.* and
 *    mtp.fc/pre_fc_norm_embedding/pre_fc_norm_hidden/norm (nextn.*), its experts one by one;
 *  - ssm_dt.bias as linear_attn.dt_bias, conv1d [channels, 1, kernel] again (the same bytes);
 *  - Qwen3.5's value heads, tiled by the converter, grouped by key head again (a reorder of
 *    rows, or out_proj's columns: the inverse of its permutation);
 *  - A_log from ssm_a = -exp(A_log): for each value a, a float x whose -exp (hf_sleef.c's
 *    tfs_hf_neg_exp, as torch 1.13 computes it) is a bit for bit, found by bisection (SLEEF's
 *    expf_u10 is monotonic over the floats: checked over every float of [-105, 101], where
 *    it goes from 0 to infinity), of those the one of fewest significant bits (a BF16 A_log
 *    comes back as it was); a value no float maps to (not the converter's) has no A_log: the
 *    model is refused, in one line;
 *  - Qwen3-Next's in_proj_qkvz made again of attn_qkv and attn_gate (per key head q, k, v,
 *    z: the converter's split keeps every element) and Qwen3.5-MoE's stacked experts
 *    (gate_up_proj: per expert gate, then up; down_proj as it is), as the published
 *    checkpoints hold them (Qwen3.5-MoE stacked but in the MTP layer; Qwen3-Next one by
 *    one);
 *  - config.json: num_hidden_layers without the MTP layers (mtp_num_hidden_layers), the
 *    linear attention's heads and dims from the ssm.* keys, layer_types from
 *    attention.recurrent_layers, full_attention_interval, partial_rotary_factor from the rope
 *    dimensions, num_experts, Qwen3.5's model_type and its M-RoPE sections unless they are
 *    the class's default written after the others (_Qwen35MRopeMixin's: no mrope_section).
 * Norms + 1 are the maps' (their xform), undone on read by hf_export.c.
 */
#include "hf_qwen35_x.h"
#include "hf_sleef.h"
#include "hf_export.h"
#include "hf_names.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ==== -exp(x) backwards ==== */

/* A float's bits as an integer of the same order (-0 just below +0), and back. */
static int64_t ord(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b & 0x80000000u ? -(int64_t)(b & 0x7fffffffu) - 1 : (int64_t)b;
}

static float unord(int64_t k)
{
	uint32_t b = k < 0 ? (uint32_t)(-(k + 1)) | 0x80000000u : (uint32_t)k;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

/* The first float of [-105, 101] (by ord) whose exp is above t (strict) or at least t;
 * ord(101) + 1 when none.  exp is 0 at -105 and infinite at 101. */
static int64_t first_exp(float t, bool strict)
{
	int64_t lo = ord(-105.0f), hi = ord(101.0f) + 1;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		float f = tfs_hf_sleef_expf(unord(mid));
		if (strict ? f > t : f >= t)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* The float of [lo, hi] (by ord) with the most trailing zero bits (+0 when they span it):
 * the one of fewest significant bits, a BF16 value when there is one. */
static float simplest(int64_t lo, int64_t hi)
{
	if (lo < 0 && hi >= 0)
		return 0.0f;
	uint32_t a = (uint32_t)(lo < 0 ? -(hi + 1) : lo), b = (uint32_t)(lo < 0 ? -(lo + 1) : hi);
	uint32_t c = b;   /* magnitudes a <= b: the multiple of the largest power of two in them */
	for (int k = 31; k > 0; k--)
		if ((b >> k << k) >= a) {
			c = b >> k << k;
			break;
		}
	return unord(lo < 0 ? -(int64_t)c - 1 : (int64_t)c);
}

/* An A_log whose -exp (tfs_hf_neg_exp) is a, bit for bit: of the floats that give it (an
 * interval, exp being monotonic), the one of fewest significant bits, so that a BF16
 * checkpoint's A_log comes back as it was when it is one of them; false when no float maps
 * to a. */
bool tfs_hf_neg_exp_inverse(float a, float *out)
{
	uint32_t b;
	memcpy(&b, &a, 4);
	b ^= 0x80000000u;
	float t;
	memcpy(&t, &b, 4);
	if (isnan(t)) {   /* a NaN is its own exp when quiet (x + x) */
		*out = t;
		return (b & 0x00400000u) != 0;
	}
	if (signbit(t))
		return false;
	int64_t lo = first_exp(t, false), hi = first_exp(t, true);
	if (lo >= hi)
		return false;
	*out = simplest(lo, hi - 1);
	return true;
}

/* ==== the reverse view's tensors ==== */

/* The linear attention's sizes from the ssm.* keys: key heads, value heads, their dims. */
typedef struct { uint64_t nk, nv, dk, dv; } lin_sizes;

static bool linear_sizes(const tfs_hf_export *x, lin_sizes *s)
{
	double nk, nv, dk, inner;
	if (!tfs_hf_xkv_num(x, ".ssm.group_count", &nk) ||
	    !tfs_hf_xkv_num(x, ".ssm.time_step_rank", &nv) ||
	    !tfs_hf_xkv_num(x, ".ssm.state_size", &dk) ||
	    !tfs_hf_xkv_num(x, ".ssm.inner_size", &inner) || nk < 1 || nv < 1 || dk < 1 ||
	    nk > 1 << 20 || nv > 1 << 20 || dk > 1 << 20 || inner > 1e12 ||
	    fmod(nv, nk) != 0 || fmod(inner, nv) != 0 || inner < nv)
		return false;
	*s = (lin_sizes){ (uint64_t)nk, (uint64_t)nv, (uint64_t)dk, (uint64_t)(inner / nv) };
	return true;
}

/* Tensor o's value heads (from row or column skip on, units of unit) grouped by key head
 * again, when s (Qwen3.5 with fewer key heads than value heads) says they were tiled. */
static int tile(tfs_hf_xtensor *o, const lin_sizes *s, bool cols, uint64_t skip,
		uint64_t unit, const char *gguf, tfs_error *err)
{
	if (!s)
		return 0;
	uint64_t n = cols ? o->cols : o->rows;
	if (skip + s->nv * unit != n)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: %llu %s, not %llu and "
				     "%llu value heads of %llu as the ssm.* keys say", gguf,
				     (unsigned long long)n, cols ? "columns" : "rows",
				     (unsigned long long)skip, (unsigned long long)s->nv,
				     (unsigned long long)unit);
	o->tile_cols = cols;
	o->tile_skip = skip;
	o->tile_groups = s->nk;
	o->tile_per = s->nv / s->nk;
	o->tile_unit = unit;
	return 0;
}

/* GGUF tensor blk.N.<what>.weight's index, or -1 (err set) naming `to` it is needed for. */
static long partner(const tfs_hf_export *x, unsigned long blk, const char *what,
		    const char *of, const char *to, tfs_error *err)
{
	char name[96];
	snprintf(name, sizeof name, "blk.%lu.%s.weight", blk, what);
	long j = tfs_model_find_tensor(x->m, name);
	if (j < 0 || tfs_model_tensor(x->m, (size_t)j)->deleted) {
		tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: no %s to make %s of", of, name,
			      to);
		return -1;
	}
	return j;
}

/* A layer's stacked experts ffn_{down,gate,up}_exps (ne [cols, rows, experts]): stacked as
 * Qwen3.5-MoE's checkpoints hold them (down_proj as it is; gate_up_proj per expert its gate
 * rows, then its up rows, made when the gate is met, the up taken with it), or one 2-D
 * tensor per expert (the expert's slice).  1 when taken, or an error. */
static int experts(tfs_hf_export *x, size_t i, const char *pre, unsigned long blk,
		   const char *proj, bool stacked, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	char name[192];
	if (t->n_dims != 3)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: not 3-D experts",
				     t->name);
	if (stacked && strcmp(proj, "down")) {
		bool gate = !strcmp(proj, "gate");
		long j = partner(x, blk, gate ? "ffn_up_exps" : "ffn_gate_exps", t->name,
				 "gate_up_proj", err);
		if (j < 0 || !gate)
			return j < 0 ? TFS_E_UNSUPPORTED : 1;
		snprintf(name, sizeof name, "%smlp.experts.gate_up_proj", pre);
		size_t src[2] = { i, (size_t)j };
		uint64_t len[2] = { (uint64_t)t->ne[1], (uint64_t)t->ne[1] }, base[2] = { 0, 0 };
		int64_t ne[3] = { t->ne[0], 2 * t->ne[1], t->ne[2] };
		int rc = tfs_hf_export_add_parts(x, name, 3, ne, 2, src, len, base, err);
		return rc ? rc : 1;
	}
	if (stacked) {
		snprintf(name, sizeof name, "%smlp.experts.down_proj", pre);
		return tfs_hf_export_add_src(x, name, i, TFS_HF_XF_NONE, err) ? 1 : err->code;
	}
	for (int64_t e = 0; e < t->ne[2]; e++) {
		snprintf(name, sizeof name, "%smlp.experts.%lld.%s_proj.weight", pre, (long long)e,
			 proj);
		tfs_hf_xtensor *o = tfs_hf_export_add_src(x, name, i, TFS_HF_XF_NONE, err);
		if (!o)
			return err->code;
		o->n_dims = 2;
		o->ne[2] = 1;
		o->rows = (uint64_t)t->ne[1];
		o->base = (uint64_t)e * o->rows * o->cols;
	}
	return 1;
}

/* linear_attn.A_log from ssm_a (its value heads grouped again by s): each value's inverse,
 * computed now (the whole model refused when one has none). */
static int a_log(tfs_hf_export *x, size_t i, const char *pre, const lin_sizes *s,
		 tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	char name[192];
	snprintf(name, sizeof name, "%slinear_attn.A_log", pre);
	tfs_hf_xtensor *o = tfs_hf_export_add_src(x, name, i, TFS_HF_XF_NONE, err);
	if (!o)
		return err->code;
	uint64_t n = o->rows * o->cols;
	if (n > 1 << 24 || (s && (o->n_dims != 1 || n != s->nv)))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: not the %llu value heads "
				     "the ssm.* keys say", t->name,
				     (unsigned long long)(s ? s->nv : 0));
	float *a = malloc(n * sizeof *a);
	if (!(o->vals = malloc(n * sizeof *a)) || !a) {
		free(a);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	int rc = tfs_tensor_read_f32(x->m, i, 0, n, a, err);
	for (uint64_t k = 0; !rc && k < n; k++) {
		uint64_t per = s ? s->nv / s->nk : 1, g = k / per, p = k % per;
		float v = a[s ? p * s->nk + g : k];
		if (!tfs_hf_neg_exp_inverse(v, &o->vals[k]))
			rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: its value %.9g is "
					   "-exp(x) of no float32 x (torch's exp), so no A_log "
					   "gives it back", t->name, (double)v);
	}
	free(a);
	return rc ? rc : 1;
}

/* Qwen3-Next's in_proj_qkvz of a layer: attn_qkv's q, k and v rows and attn_gate's z rows,
 * per key head; attn_gate taken with it (1), or an error. */
static int qkvz(tfs_hf_export *x, size_t i, const char *pre, unsigned long blk, bool gate,
		tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	lin_sizes s;
	long j = partner(x, blk, gate ? "attn_qkv" : "attn_gate", t->name, "in_proj_qkvz", err);
	if (j < 0 || gate)
		return j < 0 ? TFS_E_UNSUPPORTED : 1;
	if (!linear_sizes(x, &s))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: no ssm.* keys of its "
				     "heads", t->name);
	char name[192];
	snprintf(name, sizeof name, "%slinear_attn.in_proj_qkvz.weight", pre);
	uint64_t rv = s.nv / s.nk * s.dv, qk = s.nk * s.dk;
	size_t src[4] = { i, i, i, (size_t)j };
	uint64_t len[4] = { s.dk, s.dk, rv, rv }, base[4] = { 0, qk, 2 * qk, 0 };
	int64_t ne[2] = { t->ne[0], (int64_t)(s.nk * (2 * s.dk + 2 * rv)) };
	int rc = t->n_dims == 2 && (uint64_t)t->ne[1] == 2 * qk + s.nk * rv ? 0
		 : tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: not the rows of q, k and v "
				 "the ssm.* keys say", t->name);
	if (!rc)
		rc = tfs_hf_export_add_parts(x, name, 2, ne, 4, src, len, base, err);
	return rc ? rc : 1;
}

/* The MTP layer's own tensors (the block after the trunk's), by their nextn.* names */
static const struct { const char *gguf, *hf; bool plus_one; } mtp_own[] = {
	{ "nextn.eh_proj.weight", "mtp.fc.weight", false },
	{ "nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight", true },
	{ "nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight", true },
	{ "nextn.shared_head_norm.weight", "mtp.norm.weight", true },
};

/* A layer's tensor by the row's map under prefix pre, its reorder (s), conv1d 3-D again */
static int mapped(tfs_hf_export *x, size_t i, const char *pre, const char *base,
		  const lin_sizes *s, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	const char *sfx = strrchr(base, '.');
	const tfs_hf_name *e = NULL;
	for (size_t k = 0; sfx && !e && k < x->row->n_blocks; k++)
		if (strlen(x->row->blocks[k].gguf) == (size_t)(sfx - base) &&
		    !strncmp(x->row->blocks[k].gguf, base, (size_t)(sfx - base)))
			e = &x->row->blocks[k];
	if (!e || (strcmp(sfx, ".weight") && strcmp(sfx, ".bias")))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s has no Hugging Face name "
				     "in the %s row", t->name, x->row->classes[0]);
	char name[192];
	bool dt = !strcmp(base, "ssm_dt.bias");
	snprintf(name, sizeof name, "%s%s%s", pre, dt ? "linear_attn.dt_bias" : e->hf,
		 dt ? "" : sfx);
	tfs_hf_xtensor *o = tfs_hf_export_add_src(x, name, i, e->xform, err);
	if (!o)
		return err->code;
	uint64_t qk = s ? 2 * s->nk * s->dk : 0, dv = s ? s->dv : 0;
	int rc = 0;
	if (!strcmp(e->gguf, "ssm_conv1d")) {   /* [channels, kernel] -> [channels, 1, kernel] */
		o->n_dims = 3;
		o->ne[2] = o->ne[1];
		o->ne[1] = 1;
		rc = tile(o, s, false, qk, dv, t->name, err);
	} else if (!strcmp(e->gguf, "attn_qkv") || !strcmp(e->gguf, "attn_gate")) {
		rc = tile(o, s, false, e->gguf[5] == 'q' ? qk : 0, dv, t->name, err);
	} else if (!strcmp(e->gguf, "ssm_beta") || !strcmp(e->gguf, "ssm_alpha") || dt) {
		rc = tile(o, s, false, 0, 1, t->name, err);
	} else if (!strcmp(e->gguf, "ssm_out")) {
		rc = tile(o, s, true, 0, dv, t->name, err);
	}
	return rc ? rc : 1;
}

/* The rows' xtensor hook: a layer's tensor i (globals: the maps'), the MTP layer's under
 * mtp.*; qwen35: Qwen3.5's value heads and stacked experts, else Qwen3-Next's in_proj_qkvz. */
static int qx_xtensor(tfs_hf_export *x, size_t i, bool qwen35, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	unsigned long blk;
	const char *base;
	double nl, mtp = 0;
	if (!tfs_hf_index_of(t->name, "blk.", &blk, &base))
		return 0;
	if (!tfs_hf_xkv_num(x, ".block_count", &nl))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "no %s.block_count", x->arch);
	tfs_hf_xkv_num(x, ".nextn_predict_layers", &mtp);
	unsigned long trunk = mtp >= 0 && mtp < nl ? (unsigned long)(nl - mtp) : (unsigned long)nl;
	char pre[64];
	if (blk < trunk)
		snprintf(pre, sizeof pre, "model.layers.%lu.", blk);
	else
		snprintf(pre, sizeof pre, "mtp.layers.%lu.", blk - trunk);
	for (size_t k = 0; blk == trunk && k < N(mtp_own); k++)
		if (!strcmp(base, mtp_own[k].gguf))
			return tfs_hf_export_add_src(x, mtp_own[k].hf, i, mtp_own[k].plus_one
						     ? TFS_HF_XF_PLUS_ONE : TFS_HF_XF_NONE, err)
			       ? 1 : err->code;
	static const char *const proj[] = { "down", "gate", "up" };
	for (size_t k = 0; k < N(proj); k++) {
		size_t n = strlen(proj[k]);
		if (!strncmp(base, "ffn_", 4) && !strncmp(base + 4, proj[k], n) &&
		    !strcmp(base + 4 + n, "_exps.weight"))
			return experts(x, i, pre, blk, proj[k], qwen35 && blk < trunk, err);
	}
	lin_sizes s;
	bool tiled = qwen35 && linear_sizes(x, &s) && s.nk != s.nv;
	if (!strcmp(base, "ssm_a"))
		return a_log(x, i, pre, tiled ? &s : NULL, err);
	if (!qwen35 && (!strcmp(base, "attn_qkv.weight") || !strcmp(base, "attn_gate.weight")))
		return qkvz(x, i, pre, blk, base[5] == 'g', err);
	return mapped(x, i, pre, base, tiled ? &s : NULL, err);
}

int tfs_hf_qwen35_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	return qx_xtensor(x, i, true, err);
}

int tfs_hf_qwen3next_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	return qx_xtensor(x, i, false, err);
}

/* ==== config.json ==== */

/* Whether the model's rope.dimension_sections are _Qwen35MRopeMixin's default, which it
 * writes after Qwen3NextModel's keys (rope.dimension_count) when config.json has no
 * mrope_section: config.json then has none either. */
static bool mixin_sections(const tfs_hf_export *x)
{
	char sec[96], dim[96];
	uint32_t type;
	uint64_t n, len;
	const uint8_t *d;
	int32_t v[4];
	snprintf(sec, sizeof sec, "%s.rope.dimension_sections", x->arch);
	snprintf(dim, sizeof dim, "%s.rope.dimension_count", x->arch);
	long a = tfs_model_find_kv(x->m, sec), b = tfs_model_find_kv(x->m, dim);
	if (a < 0 || b < 0 || a < b || !tfs_hf_xkv_arr(x, sec, &type, &n, &d, &len) || n != 4 ||
	    len < 16)
		return false;
	memcpy(v, d, sizeof v);
	return v[0] == 11 && v[1] == 11 && v[2] == 10 && v[3] == 0;
}

/* config.json's keys from Qwen3NextModel's and _QwenMtpMixin's; 0 or TFS_E_NOMEM. */
int tfs_hf_qnext_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	static const struct { const char *gguf, *hf; } as_is[] = {
		{ ".ssm.conv_kernel", "linear_conv_kernel_dim" },
		{ ".ssm.state_size", "linear_key_head_dim" },
		{ ".ssm.group_count", "linear_num_key_heads" },
		{ ".ssm.time_step_rank", "linear_num_value_heads" },
		{ ".full_attention_interval", "full_attention_interval" },
	};
	double v, nl = 0, mtp = 0, dims, hd = 0, hidden, heads;
	lin_sizes s;
	int bad = 0;
	(void)gen;
	if (!c)
		return 0;
	if (strcmp(x->arch, "qwen3next"))
		bad |= json_object_set_new(c, "model_type", json_string(x->row->moe
					   ? "qwen3_5_moe_text" : "qwen3_5_text"));
	if (tfs_hf_xkv_num(x, ".block_count", &nl) &&
	    tfs_hf_xkv_num(x, ".nextn_predict_layers", &mtp) && mtp > 0 && mtp < nl) {
		bad |= json_object_set_new(c, "num_hidden_layers",
					   json_integer((json_int_t)(nl - mtp)));
		bad |= json_object_set_new(c, "mtp_num_hidden_layers",
					   json_integer((json_int_t)mtp));
		nl -= mtp;
	}
	json_t *ne = json_object_get(c, "num_local_experts");
	if (ne) {   /* (Qwen2MoeModel's name; Qwen3NextConfig's default of it is 512) */
		bad |= json_object_set(c, "num_experts", ne);
		json_object_del(c, "num_local_experts");
	}
	for (size_t k = 0; k < N(as_is); k++)
		if (tfs_hf_xkv_num(x, as_is[k].gguf, &v))
			bad |= json_object_set_new(c, as_is[k].hf, json_integer((json_int_t)v));
	if (linear_sizes(x, &s))
		bad |= json_object_set_new(c, "linear_value_head_dim",
					   json_integer((json_int_t)s.dv));
	uint32_t type;
	uint64_t n, len;
	const uint8_t *d;
	if (tfs_hf_xkv_arr(x, ".attention.recurrent_layers", &type, &n, &d, &len) &&
	    type == TFS_GGUF_BOOL && n >= nl && len >= n) {
		json_t *lt = json_array();
		for (uint64_t k = 0; lt && k < (uint64_t)nl; k++)
			bad |= json_array_append_new(lt, json_string(d[k] ? "linear_attention"
								     : "full_attention"));
		bad |= json_object_set_new(c, "layer_types", lt);
	}
	/* rope.dimension_count = int(head_dim x partial_rotary_factor): the factor back */
	if (!tfs_hf_xkv_num(x, ".attention.key_length", &hd) &&
	    tfs_hf_xkv_num(x, ".embedding_length", &hidden) &&
	    tfs_hf_xkv_num(x, ".attention.head_count", &heads) && heads > 0)
		hd = floor(hidden / heads);
	if (tfs_hf_xkv_num(x, ".rope.dimension_count", &dims) && hd > 0 && dims <= hd) {
		double f = dims / hd;
		while ((double)(int64_t)(hd * f) < dims)
			f = nextafter(f, INFINITY);
		bad |= json_object_set_new(c, "partial_rotary_factor", json_real(f));
	}
	if (mixin_sections(x))
		json_object_del(c, "rope_scaling");
	return bad ? TFS_E_NOMEM : 0;
}
