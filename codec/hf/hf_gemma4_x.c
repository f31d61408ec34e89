/*
 * hf_gemma4_x.c - Gemma 4's text model read backwards (hf_export.h): the xconfig hook of
 * hf_gemma4.c's row, which writes back into config.json what its keys hook (g4_keys, the
 * converter's Gemma4Model.set_gguf_parameters) and its rope_freqs.weight were made of.
 * Its tokenizer (tokenizer.ggml.model "gemma4") is hf_export_json.c's; its layer_scalar
 * keeps its checkpoints' name without ".weight" (hf_export.c, TFS_HF_ARCH_SCALAR_WEIGHT).
 * Its mixture of experts keeps the checkpoints' names (hf_export.c's hf_name: the router's
 * scales, parameters; the stacked experts without ".weight") and its config.json's keys.
 */
#include "hf_arch.h"
#include "hf_export.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "value.h"

/* An array key of the model as n int32/uint32 values (v: at least max of them); false
 * when absent or of another kind. */
static bool xarr_i32(const tfs_hf_export *x, const char *name, int64_t *v, size_t max,
		     size_t *n)
{
	uint32_t t;
	uint64_t cnt, len;
	const uint8_t *d;
	if (!tfs_hf_xkv_arr(x, name, &t, &cnt, &d, &len) || cnt > max ||
	    (t != TFS_GGUF_INT32 && t != TFS_GGUF_UINT32 && t != TFS_GGUF_BOOL) ||
	    len < cnt * (t == TFS_GGUF_BOOL ? 1 : 4))
		return false;
	for (uint64_t i = 0; i < cnt; i++) {
		int32_t k = 0;
		if (t == TFS_GGUF_BOOL)
			k = d[i] != 0;
		else
			memcpy(&k, d + 4 * i, 4);
		v[i] = k;
	}
	*n = (size_t)cnt;
	return true;
}

static bool has_tensor(const tfs_hf_export *x, unsigned blk, const char *what)
{
	char name[96];
	snprintf(name, sizeof name, "blk.%u.%s.weight", blk, what);
	return tfs_model_find_tensor(x->m, name) >= 0;
}

/* rope_parameters: rope_freqs' rotated pairs give the full layers' factor (not llama3
 * scaling, which the common writer may find in it: 1e30 past the rotated pairs); the sliding
 * layers' factor at the top level (Gemma4Model reads it there).  Nonzero: out of memory. */
static int g4_xrope(json_t *c, const tfs_hf_export *x, double hd_full, double hd_swa)
{
	double base, base_swa, dims_swa;
	int bad = 0;
	json_object_del(c, "rope_theta");
	json_object_del(c, "rope_scaling");
	json_t *full = json_object(), *slide = json_object(), *rp = json_object();
	bad |= !full || !slide || !rp;
	if (!bad && tfs_hf_xkv_num(x, ".rope.freq_base", &base))
		bad |= json_object_set_new(full, "rope_theta", json_real(
			(double)(float)base));
	long rf = tfs_model_find_tensor(x->m, "rope_freqs.weight");
	if (!bad && rf >= 0) {
		const tfs_tensor *t = tfs_model_tensor(x->m, (size_t)rf);
		int64_t nrot = 0;
		float f[4096];
		tfs_error e;
		if (t->n_dims == 1 && t->ne[0] <= 4096 &&
		    !tfs_tensor_read_f32(x->m, (size_t)rf, 0, (uint64_t)t->ne[0], f, &e))
			for (int64_t i = 0; i < t->ne[0]; i++)
				nrot += f[i] == 1.0f;
		double prf = 2.0 * (double)nrot / hd_full;
		while ((int64_t)(hd_full * prf / 2) < nrot)
			prf = nextafter(prf, INFINITY);
		bad |= json_object_set_new(full, "partial_rotary_factor", json_real(prf));
	}
	bad |= json_object_set_new(full, "rope_type", json_string("proportional"));
	if (tfs_hf_xkv_num(x, ".rope.freq_base_swa", &base_swa))
		bad |= json_object_set_new(slide, "rope_theta", json_real((double)(float)base_swa));
	bad |= json_object_set_new(slide, "rope_type", json_string("default"));
	bad |= json_object_set_new(rp, "full_attention", full);
	bad |= json_object_set_new(rp, "sliding_attention", slide);
	bad |= json_object_set_new(c, "rope_parameters", rp);
	if (tfs_hf_xkv_num(x, ".rope.dimension_count_swa", &dims_swa) && dims_swa != hd_swa &&
	    hd_swa > 0)
		bad |= json_object_set_new(c, "partial_rotary_factor",
					   json_real(dims_swa / hd_swa));
	return bad;
}

/* What g4_keys and Gemma4Model wrote, back as Gemma4TextConfig's keys: the head sizes
 * (key_length the full layers', key_length_swa the sliding ones'), layer_types from the
 * sliding window pattern, the shared KV layers, the per-layer input size, a per-layer
 * feed-forward length as use_double_wide_mlp, per-layer KV heads as
 * num_global_key_value_heads, keys equal to values (full layers without attn_v), and
 * rope_parameters: the full layers' proportional rope with the partial_rotary_factor
 * rope_freqs.weight was made of (its rotated pairs, 1.0), the sliding layers' default. */
int tfs_hf_gemma4_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	(void)gen;
	enum { MAXL = 1024 };   /* (layers: 24 KiB on the stack) */
	int64_t sw[MAXL], ff[MAXL], kv[MAXL];
	size_t nl = 0, nff = 0, nkv = 0;
	double hd_full, hd_swa, shared = 0, ple = 0;
	int bad = 0;
	if (!c)
		return 0;
	if (!tfs_hf_xkv_num(x, ".attention.key_length", &hd_full) ||
	    !tfs_hf_xkv_num(x, ".attention.key_length_swa", &hd_swa) ||
	    !xarr_i32(x, ".attention.sliding_window_pattern", sw, MAXL, &nl))
		return 0;
	tfs_hf_xkv_num(x, ".attention.shared_kv_layers", &shared);
	tfs_hf_xkv_num(x, ".embedding_length_per_layer_input", &ple);
	bad |= json_object_set_new(c, "head_dim", json_integer((json_int_t)hd_swa));
	bad |= json_object_set_new(c, "global_head_dim", json_integer((json_int_t)hd_full));
	json_t *lt = json_array();
	for (size_t i = 0; lt && i < nl; i++)
		bad |= json_array_append_new(lt, json_string(sw[i] ? "sliding_attention"
							       : "full_attention"));
	bad |= !lt || json_object_set_new(c, "layer_types", lt);
	bad |= json_object_set_new(c, "num_kv_shared_layers", json_integer((json_int_t)shared));
	bad |= json_object_set_new(c, "hidden_size_per_layer_input",
				   json_integer((json_int_t)ple));
	long pl = tfs_model_find_tensor(x->m, "per_layer_token_embd.weight");
	if (pl >= 0)
		bad |= json_object_set_new(c, "vocab_size_per_layer_input", json_integer(
			(json_int_t)tfs_model_tensor(x->m, (size_t)pl)->ne[1]));
	if (xarr_i32(x, ".feed_forward_length", ff, MAXL, &nff) && nff) {
		bad |= json_object_set_new(c, "intermediate_size", json_integer(ff[0]));
		bad |= json_object_set_new(c, "use_double_wide_mlp", json_true());
	}
	if (xarr_i32(x, ".attention.head_count_kv", kv, MAXL, &nkv) && nkv == nl) {
		for (size_t i = 0; i < nl; i++)
			bad |= json_object_set_new(c, sw[i] ? "num_key_value_heads"
						   : "num_global_key_value_heads",
						   json_integer(kv[i]));
	}
	bool k_eq_v = false;
	for (size_t i = 0; i < nl; i++)
		if (!sw[i] && has_tensor(x, (unsigned)i, "attn_k") &&
		    !has_tensor(x, (unsigned)i, "attn_v"))
			k_eq_v = true;
	if (k_eq_v)
		bad |= json_object_set_new(c, "attention_k_eq_v", json_true());
	/* the mixture of experts beside the MLP under Gemma4TextConfig's names (the common
	 * writer's num_experts_per_tok is TextModel's first choice, top_k_experts its last) */
	double n_exp, n_used;
	if (tfs_hf_xkv_num(x, ".expert_count", &n_exp) &&
	    tfs_hf_xkv_num(x, ".expert_used_count", &n_used)) {
		json_object_del(c, "num_experts_per_tok");
		bad |= json_object_set_new(c, "enable_moe_block", json_true());
		bad |= json_object_set_new(c, "num_experts", json_integer((json_int_t)n_exp));
		bad |= json_object_set_new(c, "top_k_experts", json_integer((json_int_t)n_used));
	}
	bad |= g4_xrope(c, x, hd_full, hd_swa);
	return bad ? TFS_E_NOMEM : 0;
}
