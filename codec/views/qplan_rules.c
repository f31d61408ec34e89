/*
 * qplan_rules.c - llama.cpp's choice of a tensor's type in a file type's mix (qplan.h says
 * what the output file is).
 *
 * The rules are llama.cpp 0.5.0's src/llama-quant.cpp, in its order, so that the two read
 * side by side: which tensors are quantized at all (tensor_allows_quantization), the mixes'
 * promotions (llama_tensor_get_type_impl, with its counters of attn_v / ffn_* tensors that
 * advance in the order llama.cpp visits the tensors: sorted by layer, then name; one
 * function per tensor role here), the fallbacks for rows that are not whole blocks
 * (tensor_type_fallback), and the tensors that need an importance matrix.
 */
#include "qplan_impl.h"
#include "value.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool has(const char *s, const char *part) { return strstr(s, part) != NULL; }

bool tfs_qrule_is_token_embd(const char *n)
{
	return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight");
}

tfs_qcat tfs_qrule_category(const char *n)
{
	if (!strcmp(n, "output.weight"))
		return TFS_QCAT_OUTPUT;
	if (tfs_qrule_is_token_embd(n))
		return TFS_QCAT_TOKEN_EMBD;
	if (has(n, "attn_qkv.weight"))
		return TFS_QCAT_ATTN_QKV;
	if (has(n, "attn_kv_b.weight"))
		return TFS_QCAT_ATTN_KV_B;
	if (has(n, "attn_v.weight"))
		return TFS_QCAT_ATTN_V;
	if (has(n, "attn_k.weight"))
		return TFS_QCAT_ATTN_K;
	if (has(n, "attn_q.weight"))
		return TFS_QCAT_ATTN_Q;
	if (has(n, "attn_output.weight"))
		return TFS_QCAT_ATTN_OUTPUT;
	if (has(n, "ffn_up"))
		return TFS_QCAT_FFN_UP;
	if (has(n, "ffn_gate"))
		return TFS_QCAT_FFN_GATE;
	if (has(n, "ffn_down"))
		return TFS_QCAT_FFN_DOWN;
	return TFS_QCAT_OTHER;
}

bool tfs_qrule_is_attn_v(tfs_qcat c)
{
	return c == TFS_QCAT_ATTN_V || c == TFS_QCAT_ATTN_QKV || c == TFS_QCAT_ATTN_KV_B;
}

/* A key's value as an unsigned integer (any integer type; an array: its first element, as
 * llama.cpp's per-layer keys give layer 0).  false when absent or not an integer. */
bool tfs_qrule_key_uint(const tfs_model *m, const char *key, uint32_t *v)
{
	long i = tfs_model_find_kv(m, key);
	if (i < 0)
		return false;
	const tfs_kv *kv = tfs_model_kv(m, (size_t)i);
	uint32_t type = kv->type;
	const uint8_t *p = kv->data;
	uint64_t len = kv->len;
	if (type == TFS_GGUF_ARRAY) {
		uint32_t et;
		uint64_t n;
		if (len < 12)
			return false;
		memcpy(&et, p, 4);
		memcpy(&n, p + 4, 8);
		if (n == 0)
			return false;
		type = et, p += 12, len -= 12;
	}
	/* the integer types: bytes, and whether signed */
	static const struct { uint8_t size; bool sign; } ints[TFS_GGUF_TYPE_COUNT] = {
		[TFS_GGUF_UINT8] = { 1, false }, [TFS_GGUF_INT8] = { 1, true },
		[TFS_GGUF_UINT16] = { 2, false }, [TFS_GGUF_INT16] = { 2, true },
		[TFS_GGUF_UINT32] = { 4, false }, [TFS_GGUF_INT32] = { 4, true },
		[TFS_GGUF_UINT64] = { 8, false }, [TFS_GGUF_INT64] = { 8, true },
	};
	if (type >= TFS_GGUF_TYPE_COUNT || !ints[type].size || len < ints[type].size)
		return false;
	const unsigned size = ints[type].size, shift = 64 - 8 * size;
	uint64_t u = 0;
	for (unsigned k = 0; k < size; k++)
		u |= (uint64_t)p[k] << (8 * k);
	if (ints[type].sign && shift)
		u = (uint64_t)((int64_t)(u << shift) >> shift);
	*v = (uint32_t)u;
	return true;
}

int tfs_qrule_read_hparams(tfs_qstate *s)
{
	const tfs_model *m = s->m;
	long i = tfs_model_find_kv(m, "general.architecture");
	const tfs_kv *kv = i >= 0 ? tfs_model_kv(m, (size_t)i) : NULL;
	uint64_t n;
	if (!kv || kv->type != TFS_GGUF_STRING || kv->len < 8)
		return tfs_error_set(s->err, TFS_E_FORMAT, "%s: no general.architecture key (a "
				     "string): llama.cpp cannot quantize it", tfs_model_path(m));
	memcpy(&n, kv->data, 8);
	if (n >= sizeof(s->arch) || n > kv->len - 8)
		return tfs_error_set(s->err, TFS_E_FORMAT, "%s: general.architecture is not an "
				     "architecture llama.cpp knows", tfs_model_path(m));
	memcpy(s->arch, kv->data + 8, n);
	s->arch[n] = '\0';

	char key[128];
	snprintf(key, sizeof(key), "%s.block_count", s->arch);
	if (!tfs_qrule_key_uint(m, key, &s->n_layer))
		return tfs_error_set(s->err, TFS_E_FORMAT, "%s: no %s key: llama.cpp cannot "
				     "quantize it", tfs_model_path(m), key);
	snprintf(key, sizeof(key), "%s.expert_count", s->arch);
	if (!tfs_qrule_key_uint(m, key, &s->n_expert))
		s->n_expert = 0;
	snprintf(key, sizeof(key), "%s.attention.head_count", s->arch);
	if (!tfs_qrule_key_uint(m, key, &s->n_head))
		s->n_head = 0;
	snprintf(key, sizeof(key), "%s.attention.head_count_kv", s->arch);
	if (!tfs_qrule_key_uint(m, key, &s->n_head_kv))
		s->n_head_kv = s->n_head;
	s->falcon = !strcmp(s->arch, "falcon");
	s->bailingmoe3 = !strcmp(s->arch, "bailingmoe3");
	/* llm_type 70B, the only model type the rules look at (the architectures whose
	 * load_hparams name one: llama with 80 layers and GQA, deci and qwen2 with 80, jais2
	 * with 68) */
	if (!strcmp(s->arch, "llama"))
		s->is_70b = s->n_expert != 8 && s->n_layer == 80 && s->n_head != s->n_head_kv;
	else if (!strcmp(s->arch, "deci") || !strcmp(s->arch, "qwen2"))
		s->is_70b = s->n_layer == 80;
	else if (!strcmp(s->arch, "jais2"))
		s->is_70b = s->n_layer == 68;
	return 0;
}

/* hparams.n_gqa(): heads per KV head of layer 0 (0 without KV heads) */
static uint32_t n_gqa(const tfs_qstate *s)
{
	return s->n_head_kv ? s->n_head / s->n_head_kv : 0;
}

/* ggml_n_dims: dimensions up to the last that is not 1, at least 1 */
uint32_t tfs_qrule_ggml_dims(const tfs_tensor *t)
{
	uint32_t n = 1;
	for (uint32_t k = 1; k < t->n_dims && k < 4; k++)
		if (t->ne[k] > 1)
			n = k + 1;
	return n;
}


static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* tensor_allows_quantization */
bool tfs_qrule_allows_quantization(const tfs_qstate *s, const char *name, uint32_t dims)
{
	static const char *const never[] = {
		"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup",
		"laurel", "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
		"indexer.k_proj.weight", "indexer.q_proj.weight",
		"time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
		"time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
		"time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
		"time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
		"time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
		"time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
		"sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
		".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
	};
	if (dims < 2)
		return false;
	/* name.rfind("weight") == name.size() - 6: the last "weight" ends the name */
	if (!ends_with(name, "weight"))
		return false;
	if (s->o->leave_output && !strcmp(name, "output.weight"))
		return false;
	for (size_t k = 0; k < sizeof(never) / sizeof(never[0]); k++)
		if (has(name, never[k]))
			return false;
	/* LLM_TN(arch)(POS_EMBD / TOKEN_TYPES): the names of the architectures that have them
	 * (others compare with "__missing__"); taken as never quantized whatever the arch */
	return strcmp(name, "position_embd.weight") && strcmp(name, "token_types.weight");
}

/* The layer of an expert tensor, from its name (layer_info); -1 after a failure. */
static int layer_of(tfs_qstate *s, int counter, const char *name)
{
	int il = counter;
	if (s->n_expert > 1) {
		if (sscanf(name, "blk.%d.", &il) != 1) {
			s->rc = tfs_error_set(s->err, TFS_E_FORMAT, "tensor '%s': its layer cannot "
					      "be told (llama.cpp: failed to determine layer)", name);
			return -1;
		}
		if (il < 0 || (uint32_t)il >= s->n_layer) {
			s->rc = tfs_error_set(s->err, TFS_E_FORMAT, "tensor '%s': layer %d is not "
					      "in [0, %" PRIu32 ")", name, il, s->n_layer);
			return -1;
		}
	}
	return il;
}

static bool use_more_bits(int i_layer, int n_layers)
{
	return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
	       (i_layer - n_layers / 8) % 3 == 2;
}


/* ---- llama_tensor_get_type_impl, one function per branch of its if-chain ---- */

static bool ft_in(int ft, const int *list, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (list[k] == ft)
			return true;
	return false;
}
#define FT_IN(ft, ...) ft_in(ft, (const int[]){ __VA_ARGS__ }, \
			     sizeof((const int[]){ __VA_ARGS__ }) / sizeof(int))

/* output.weight, and token_embd when the embeddings are tied */
static int output_type(const tfs_qstate *s, int new_type, const tfs_tensor *t)
{
	const int ft = s->ftype;
	if (s->o->set_output_type)
		return s->o->output_type;
	if (ft == TFS_FTYPE_MXFP4_MOE)
		return TFS_DT_Q8_0;
	if (s->falcon || t->ne[0] % tfs_qblck(new_type) != 0)
		return TFS_DT_Q8_0;
	if (FT_IN(ft, TFS_FTYPE_IQ2_XXS, TFS_FTYPE_IQ2_XS, TFS_FTYPE_IQ3_XXS, TFS_FTYPE_IQ1_S,
		  TFS_FTYPE_IQ2_S, TFS_FTYPE_IQ2_M, TFS_FTYPE_IQ1_M))
		return TFS_DT_Q5_K;
	if (new_type != TFS_DT_Q8_0)
		return TFS_DT_Q6_K;
	return new_type;
}

/* MXFP4_MOE: expert tensors MXFP4, the rest Q8_0 */
static int mxfp4_moe_type(const tfs_qstate *s, const tfs_tensor *t, tfs_qcat cat)
{
	const bool expert_role = cat == TFS_QCAT_FFN_UP || cat == TFS_QCAT_FFN_GATE ||
				 cat == TFS_QCAT_FFN_DOWN;
	if (t->ne[2] > 1 && (!s->bailingmoe3 || expert_role))
		return TFS_DT_MXFP4;
	return TFS_DT_Q8_0;
}

static int token_embd_type(const tfs_qstate *s, int new_type)
{
	const int ft = s->ftype;
	if (s->o->set_token_embd_type)
		return s->o->token_embd_type;
	if (FT_IN(ft, TFS_FTYPE_IQ2_XXS, TFS_FTYPE_IQ2_XS, TFS_FTYPE_IQ1_S, TFS_FTYPE_IQ1_M))
		return TFS_DT_Q2_K;
	if (FT_IN(ft, TFS_FTYPE_IQ2_S, TFS_FTYPE_IQ2_M, TFS_FTYPE_IQ3_XXS))
		return TFS_DT_IQ3_S;
	if (FT_IN(ft, TFS_FTYPE_TQ1_0, TFS_FTYPE_TQ2_0, TFS_FTYPE_Q2_0))
		return TFS_DT_Q4_K;
	return new_type;
}

/* IQ2_XXS, IQ2_XS, IQ1_S, IQ2_S, IQ2_M, IQ1_M */
static bool is_iq_low(int ft)
{
	return FT_IN(ft, TFS_FTYPE_IQ2_XXS, TFS_FTYPE_IQ2_XS, TFS_FTYPE_IQ1_S, TFS_FTYPE_IQ2_S,
		     TFS_FTYPE_IQ2_M, TFS_FTYPE_IQ1_M);
}

static int iq_low_type(tfs_qstate *s, int new_type, tfs_qcat cat)
{
	const int ft = s->ftype;
	const bool iq2_sm = ft == TFS_FTYPE_IQ2_S || ft == TFS_FTYPE_IQ2_M;
	if (tfs_qrule_is_attn_v(cat)) {
		if (n_gqa(s) >= 4 || s->n_expert >= 4)
			new_type = TFS_DT_Q4_K;
		else
			new_type = iq2_sm ? TFS_DT_IQ3_S : TFS_DT_Q2_K;
		++s->i_attention_wv;
	} else if (s->n_expert == 8 && cat == TFS_QCAT_ATTN_K) {
		new_type = TFS_DT_Q4_K;
	} else if (cat == TFS_QCAT_FFN_DOWN) {
		if (s->i_ffn_down < s->n_ffn_down / 8)
			new_type = iq2_sm ? TFS_DT_IQ3_S : TFS_DT_Q2_K;
		++s->i_ffn_down;
	} else if (cat == TFS_QCAT_ATTN_OUTPUT) {
		if (s->n_expert == 8)
			new_type = TFS_DT_Q5_K;
		else if (ft == TFS_FTYPE_IQ1_S || ft == TFS_FTYPE_IQ1_M)
			new_type = TFS_DT_IQ2_XXS;
		else if (iq2_sm)
			new_type = TFS_DT_IQ3_S;
	}
	return new_type;
}

/* attn_v (and attn_qkv, attn_kv_b), the if-chain before the 70B and 8-expert rules */
static int attn_v_mix(const tfs_qstate *s, int new_type)
{
	const int ft = s->ftype;
	const uint32_t gqa = n_gqa(s);
	if (ft == TFS_FTYPE_Q2_K)
		return gqa >= 4 ? TFS_DT_Q4_K : TFS_DT_Q3_K;
	if (ft == TFS_FTYPE_Q2_K_S && gqa >= 4)
		return TFS_DT_Q4_K;
	if (ft == TFS_FTYPE_IQ3_XXS)
		return gqa >= 4 ? TFS_DT_Q4_K : !s->has_imatrix ? TFS_DT_IQ3_S : TFS_DT_IQ3_XXS;
	if ((ft == TFS_FTYPE_IQ3_XS || ft == TFS_FTYPE_IQ3_S) && gqa >= 4)
		return TFS_DT_Q4_K;
	if (ft == TFS_FTYPE_IQ3_M)
		return TFS_DT_Q4_K;
	if (ft == TFS_FTYPE_Q3_K_M)
		return s->i_attention_wv < 2 ? TFS_DT_Q5_K : TFS_DT_Q4_K;
	if (ft == TFS_FTYPE_Q3_K_L)
		return TFS_DT_Q5_K;
	if ((ft == TFS_FTYPE_IQ4_NL || ft == TFS_FTYPE_IQ4_XS) && gqa >= 4)
		return TFS_DT_Q5_K;
	if ((ft == TFS_FTYPE_Q4_K_M || ft == TFS_FTYPE_Q5_K_M) &&
	    use_more_bits(s->i_attention_wv, s->n_attention_wv))
		return TFS_DT_Q6_K;
	if (ft == TFS_FTYPE_Q4_K_S && s->i_attention_wv < 4)
		return TFS_DT_Q5_K;
	return new_type;
}

static int attn_v_type(tfs_qstate *s, int new_type)
{
	new_type = attn_v_mix(s, new_type);
	/* 70B: 8 heads share attn_v, 8x smaller than attn_q: more bits cost little */
	if (s->is_70b && (new_type == TFS_DT_Q3_K || new_type == TFS_DT_Q4_K))
		new_type = TFS_DT_Q5_K;
	if (s->n_expert == 8)
		new_type = TFS_DT_Q8_0;
	++s->i_attention_wv;
	return new_type;
}

static int attn_k_type(const tfs_qstate *s, int new_type)
{
	if (s->n_expert == 8)
		return TFS_DT_Q8_0;
	if (s->ftype == TFS_FTYPE_IQ3_XS)
		return TFS_DT_IQ3_XXS;
	if (s->ftype == TFS_FTYPE_IQ3_XXS)
		return TFS_DT_IQ2_S;
	return new_type;
}

static int attn_q_type(const tfs_qstate *s, int new_type)
{
	if (s->ftype == TFS_FTYPE_IQ3_XS)
		return TFS_DT_IQ3_XXS;
	if (s->ftype == TFS_FTYPE_IQ3_XXS)
		return TFS_DT_IQ2_S;
	return new_type;
}

/* ffn_down of layer il of nl */
static int ffn_down_mix(const tfs_qstate *s, int new_type, int il, int nl)
{
	const int ft = s->ftype;
	if (ft == TFS_FTYPE_Q2_K)
		return TFS_DT_Q3_K;
	if (ft == TFS_FTYPE_Q2_K_S)
		return il < nl / 8 ? TFS_DT_Q4_K : new_type;
	if (ft == TFS_FTYPE_IQ3_XXS && !s->has_imatrix)
		return il < nl / 8 ? TFS_DT_Q4_K : TFS_DT_Q3_K;
	if (ft == TFS_FTYPE_Q3_K_M)
		return il < nl / 16 ? TFS_DT_Q5_K
		       : !s->falcon || use_more_bits(il, nl) ? TFS_DT_Q4_K : TFS_DT_Q3_K;
	if (ft == TFS_FTYPE_IQ3_M &&
	    (il < nl / 8 || (s->n_expert == 8 && use_more_bits(il, nl))))
		return TFS_DT_Q4_K;
	if (ft == TFS_FTYPE_Q3_K_L)
		return s->falcon ? TFS_DT_Q4_K : TFS_DT_Q5_K;
	if (ft == TFS_FTYPE_Q4_K_M) {
		if (s->falcon)
			return il < nl / 16 ? TFS_DT_Q6_K
			       : use_more_bits(il, nl) ? TFS_DT_Q5_K : TFS_DT_Q4_K;
		return use_more_bits(il, nl) ? TFS_DT_Q6_K : new_type;
	}
	if (il < nl / 8 && (ft == TFS_FTYPE_IQ4_NL || ft == TFS_FTYPE_IQ4_XS) && !s->has_imatrix)
		return TFS_DT_Q5_K;
	if (ft == TFS_FTYPE_Q5_K_M && use_more_bits(il, nl))
		return TFS_DT_Q6_K;
	if (ft == TFS_FTYPE_Q4_K_S && !s->falcon && il < nl / 8)
		return TFS_DT_Q5_K;
	/* guards the first ffn_down layers, only with an imatrix */
	if ((ft == TFS_FTYPE_Q4_0 || ft == TFS_FTYPE_Q5_0) && s->has_imatrix && il < nl / 8)
		return ft == TFS_FTYPE_Q4_0 ? TFS_DT_Q4_1 : TFS_DT_Q5_1;
	return new_type;
}

static int ffn_down_type(tfs_qstate *s, int new_type, const tfs_tensor *t)
{
	const int il = layer_of(s, s->i_ffn_down, t->name);
	if (il < 0)
		return -1;
	new_type = ffn_down_mix(s, new_type, il, s->n_ffn_down);
	++s->i_ffn_down;
	return new_type;
}

static int attn_output_type(const tfs_qstate *s, int new_type)
{
	const int ft = s->ftype;
	if (s->falcon)
		return ft == TFS_FTYPE_Q3_K_L ? TFS_DT_Q4_K : new_type;
	if (s->n_expert == 8)
		return FT_IN(ft, TFS_FTYPE_Q2_K, TFS_FTYPE_IQ3_XS, TFS_FTYPE_IQ3_XXS,
			     TFS_FTYPE_Q3_K_S, TFS_FTYPE_Q3_K_M, TFS_FTYPE_IQ4_NL,
			     TFS_FTYPE_Q4_K_S, TFS_FTYPE_Q4_K_M, TFS_FTYPE_IQ3_S,
			     TFS_FTYPE_IQ3_M, TFS_FTYPE_IQ4_XS) ? TFS_DT_Q5_K : new_type;
	if (ft == TFS_FTYPE_Q2_K)
		return TFS_DT_Q3_K;
	if (ft == TFS_FTYPE_IQ3_XXS)
		return TFS_DT_IQ3_S;
	if (ft == TFS_FTYPE_Q3_K_M)
		return TFS_DT_Q4_K;
	if (ft == TFS_FTYPE_Q3_K_L)
		return TFS_DT_Q5_K;
	if (ft == TFS_FTYPE_IQ3_M)
		return TFS_DT_Q4_K;
	return new_type;
}

/* unreachable (attn_qkv is attn_v-like above), kept as llama.cpp has it */
static int attn_qkv_type(const tfs_qstate *s, int new_type)
{
	const int ft = s->ftype;
	if (ft == TFS_FTYPE_Q3_K_M || ft == TFS_FTYPE_Q3_K_L || ft == TFS_FTYPE_IQ3_M)
		return TFS_DT_Q4_K;
	if (ft == TFS_FTYPE_Q4_K_M)
		return TFS_DT_Q5_K;
	if (ft == TFS_FTYPE_Q5_K_M)
		return TFS_DT_Q6_K;
	return new_type;
}

static int ffn_gate_up_type(tfs_qstate *s, int new_type, const tfs_tensor *t, tfs_qcat cat)
{
	int *i_ffn = cat == TFS_QCAT_FFN_GATE ? &s->i_ffn_gate : &s->i_ffn_up;
	const int nl = cat == TFS_QCAT_FFN_GATE ? s->n_ffn_gate : s->n_ffn_up;
	const int il = layer_of(s, *i_ffn, t->name);
	if (il < 0)
		return -1;
	if (s->ftype == TFS_FTYPE_IQ3_XS && il >= nl / 8 && il < 7 * nl / 8)
		new_type = TFS_DT_IQ3_XXS;
	++*i_ffn;
	return new_type;
}

/* llama_tensor_get_type_impl: the mix's type of one tensor (t, visited in order). */
static int mix_type(tfs_qstate *s, int new_type, const tfs_tensor *t, tfs_qcat cat)
{
	if (cat == TFS_QCAT_OUTPUT || (s->has_tied_embeddings && cat == TFS_QCAT_TOKEN_EMBD))
		return output_type(s, new_type, t);
	if (s->ftype == TFS_FTYPE_MXFP4_MOE)
		return mxfp4_moe_type(s, t, cat);
	if (cat == TFS_QCAT_TOKEN_EMBD)
		return token_embd_type(s, new_type);
	if (is_iq_low(s->ftype))
		return iq_low_type(s, new_type, cat);
	if (tfs_qrule_is_attn_v(cat))
		return attn_v_type(s, new_type);
	switch (cat) {
	case TFS_QCAT_ATTN_K: return attn_k_type(s, new_type);
	case TFS_QCAT_ATTN_Q: return attn_q_type(s, new_type);
	case TFS_QCAT_FFN_DOWN: return ffn_down_type(s, new_type, t);
	case TFS_QCAT_ATTN_OUTPUT: return attn_output_type(s, new_type);
	case TFS_QCAT_ATTN_QKV: return attn_qkv_type(s, new_type);
	case TFS_QCAT_FFN_GATE: case TFS_QCAT_FFN_UP:
		return ffn_gate_up_type(s, new_type, t, cat);
	default: return new_type;
	}
}
/* tensor_type_fallback: a type whose blocks fit rows of ne[0]; -1 after a failure. */
static int fallback(tfs_qstate *s, const tfs_tensor *t, int type, bool *fell)
{
	const int64_t ncols = t->ne[0];
	int ret = type;
	*fell = false;
	if (ncols % tfs_qblck(type) == 0)
		return type;
	*fell = true;
	switch (type) {
	case TFS_DT_IQ1_S: case TFS_DT_IQ1_M: case TFS_DT_IQ2_XXS: case TFS_DT_IQ2_XS:
	case TFS_DT_IQ2_S: case TFS_DT_IQ3_XXS: case TFS_DT_IQ3_S: case TFS_DT_IQ4_XS:
		ret = TFS_DT_IQ4_NL;
		break;
	case TFS_DT_Q2_0: case TFS_DT_Q2_K: case TFS_DT_Q3_K: case TFS_DT_TQ1_0:
	case TFS_DT_TQ2_0:
		ret = TFS_DT_Q4_0;
		break;
	case TFS_DT_Q4_K: ret = TFS_DT_Q5_0; break;
	case TFS_DT_Q5_K: ret = TFS_DT_Q5_1; break;
	case TFS_DT_Q6_K: ret = TFS_DT_Q8_0; break;
	default:
		/* 0.5.0's default: a type of blocks of 32 at most (Q4_0 ... Q8_0, IQ4_NL, MXFP4)
		 * goes on to F16 below; larger blocks (Q1_0's 128) have no fallback */
		if (tfs_qblck(type) > 32) {
			s->rc = tfs_error_set(s->err, TFS_E_INVALID, "tensor '%s': rows of %"
					      PRId64 " values are not whole %s blocks, and llama.cpp "
					      "has no fallback type for %s", t->name, ncols,
					      tfs_qdname(type), tfs_qdname(type));
			return -1;
		}
		break;
	}
	/* most likely not a multiple of 32 either: F16 */
	if (ncols % tfs_qblck(ret) != 0)
		ret = TFS_DT_F16;
	return ret;
}

/* llama_tensor_get_type for a tensor that allows quantization */
int tfs_qrule_get_type(tfs_qstate *s, const tfs_tensor *t, tfs_qcat cat, int default_type,
		       bool *fell)
{
	*fell = false;
	if (s->o->set_token_embd_type && cat == TFS_QCAT_TOKEN_EMBD)
		return s->o->token_embd_type;
	if (s->o->set_output_type && cat == TFS_QCAT_OUTPUT)
		return s->o->output_type;
	int new_type = default_type;
	if (tfs_qis_quantized(default_type)) {
		if (!s->o->pure)
			new_type = mix_type(s, new_type, t, cat);
		if (new_type < 0)
			return -1;
		new_type = fallback(s, t, new_type, fell);
	}
	return new_type;
}

/* tensor_requires_imatrix */
bool tfs_qrule_requires_imatrix(const char *name, int dtype, int ftype)
{
	if (tfs_qrule_is_token_embd(name) || !strcmp(name, "output.weight"))
		return false;
	switch (dtype) {
	case TFS_DT_IQ3_XXS: case TFS_DT_IQ2_XXS: case TFS_DT_IQ2_XS: case TFS_DT_IQ2_S:
	case TFS_DT_IQ1_M: case TFS_DT_IQ1_S:
		return true;
	case TFS_DT_Q2_K:
		return ftype == TFS_FTYPE_Q2_K_S;
	default:
		return false;
	}
}
