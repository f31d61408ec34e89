/*
 * qplan.c - llama-quantize's choice of every tensor's type, and the keys it changes
 * (qplan.h says what the output file is).
 *
 * The rules are llama.cpp 0.5.0's src/llama-quant.cpp, in its order, so that the two read
 * side by side: which tensors are quantized at all (tensor_allows_quantization), the mixes'
 * promotions (llama_tensor_get_type_impl, with its counters of attn_v / ffn_* tensors that
 * advance in the order llama.cpp visits the tensors: sorted by layer, then name), the
 * fallbacks for rows that are not whole blocks (tensor_type_fallback), and the checks that
 * make llama_model_quantize fail (an importance matrix missing, requantizing, no fallback).
 */
#include "qplan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ALIGN 32                /* GGUF_DEFAULT_ALIGNMENT: llama.cpp pads with it */
#define QNT_VERSION 2           /* GGML_QNT_VERSION */
#define MAX_STR 127             /* llama_model_kv_override.val_str holds 127 bytes + NUL */

/* ==== file types ==== */

typedef struct {
	const char *name;
	int ftype;
} ftype_name;

/* llama-quantize's QUANT_OPTIONS, its order (COPY left out: it is not a quantization). */
static const ftype_name FTYPES[] = {
	{ "Q1_0", TFS_FTYPE_Q1_0 }, { "Q2_0", TFS_FTYPE_Q2_0 },
	{ "Q4_0", TFS_FTYPE_Q4_0 }, { "Q4_1", TFS_FTYPE_Q4_1 },
	{ "MXFP4_MOE", TFS_FTYPE_MXFP4_MOE }, { "Q5_0", TFS_FTYPE_Q5_0 },
	{ "Q5_1", TFS_FTYPE_Q5_1 }, { "IQ2_XXS", TFS_FTYPE_IQ2_XXS },
	{ "IQ2_XS", TFS_FTYPE_IQ2_XS }, { "IQ2_S", TFS_FTYPE_IQ2_S },
	{ "IQ2_M", TFS_FTYPE_IQ2_M }, { "IQ1_S", TFS_FTYPE_IQ1_S },
	{ "IQ1_M", TFS_FTYPE_IQ1_M }, { "TQ1_0", TFS_FTYPE_TQ1_0 },
	{ "TQ2_0", TFS_FTYPE_TQ2_0 }, { "Q2_K", TFS_FTYPE_Q2_K },
	{ "Q2_K_S", TFS_FTYPE_Q2_K_S }, { "IQ3_XXS", TFS_FTYPE_IQ3_XXS },
	{ "IQ3_S", TFS_FTYPE_IQ3_S }, { "IQ3_M", TFS_FTYPE_IQ3_M },
	{ "Q3_K", TFS_FTYPE_Q3_K_M }, { "IQ3_XS", TFS_FTYPE_IQ3_XS },
	{ "Q3_K_S", TFS_FTYPE_Q3_K_S }, { "Q3_K_M", TFS_FTYPE_Q3_K_M },
	{ "Q3_K_L", TFS_FTYPE_Q3_K_L }, { "IQ4_NL", TFS_FTYPE_IQ4_NL },
	{ "IQ4_XS", TFS_FTYPE_IQ4_XS }, { "Q4_K", TFS_FTYPE_Q4_K_M },
	{ "Q4_K_S", TFS_FTYPE_Q4_K_S }, { "Q4_K_M", TFS_FTYPE_Q4_K_M },
	{ "Q5_K", TFS_FTYPE_Q5_K_M }, { "Q5_K_S", TFS_FTYPE_Q5_K_S },
	{ "Q5_K_M", TFS_FTYPE_Q5_K_M }, { "Q6_K", TFS_FTYPE_Q6_K },
	{ "Q8_0", TFS_FTYPE_Q8_0 }, { "F16", TFS_FTYPE_F16 },
	{ "BF16", TFS_FTYPE_BF16 }, { "F32", TFS_FTYPE_ALL_F32 },
};
#define N_FTYPES (sizeof(FTYPES) / sizeof(FTYPES[0]))

int tfs_ftype_parse(const char *name)
{
	if (!name || !*name)
		return -1;
	for (size_t i = 0; i < N_FTYPES; i++)
		if (!strcasecmp(FTYPES[i].name, name))
			return FTYPES[i].ftype;
	/* a number, as std::stoi reads it: leading blanks, a sign, digits, anything after */
	char *end;
	long v = strtol(name, &end, 10);
	if (end == name)
		return -1;
	for (size_t i = 0; i < N_FTYPES; i++)
		if (FTYPES[i].ftype == v)
			return FTYPES[i].ftype;
	return -1;
}

const char *tfs_ftype_name(int ftype)
{
	const char *alias[] = { "Q3_K", "Q4_K", "Q5_K" };
	for (size_t i = 0; i < N_FTYPES; i++) {
		bool is_alias = false;
		for (size_t k = 0; k < 3; k++)
			is_alias |= !strcmp(FTYPES[i].name, alias[k]);
		if (FTYPES[i].ftype == ftype && !is_alias)
			return FTYPES[i].name;
	}
	return NULL;
}

int tfs_ftype_list(tfs_buf *out)
{
	for (size_t i = 0; i < N_FTYPES; i++)
		if (tfs_buf_printf(out, "%s%s", i ? ", " : "", FTYPES[i].name))
			return TFS_E_NOMEM;
	return 0;
}

int tfs_ftype_base_dtype(int ftype)
{
	switch (ftype) {
	case TFS_FTYPE_Q4_0: return TFS_DT_Q4_0;
	case TFS_FTYPE_Q4_1: return TFS_DT_Q4_1;
	case TFS_FTYPE_Q5_0: return TFS_DT_Q5_0;
	case TFS_FTYPE_Q5_1: return TFS_DT_Q5_1;
	case TFS_FTYPE_Q8_0: return TFS_DT_Q8_0;
	case TFS_FTYPE_F16: return TFS_DT_F16;
	case TFS_FTYPE_BF16: return TFS_DT_BF16;
	case TFS_FTYPE_ALL_F32: return TFS_DT_F32;
	case TFS_FTYPE_Q1_0: return TFS_DT_Q1_0;
	case TFS_FTYPE_Q2_0: return TFS_DT_Q2_0;
	case TFS_FTYPE_MXFP4_MOE: return TFS_DT_MXFP4;
	case TFS_FTYPE_Q2_K_S: case TFS_FTYPE_Q2_K: return TFS_DT_Q2_K;
	case TFS_FTYPE_IQ3_XS: return TFS_DT_IQ3_S;
	case TFS_FTYPE_Q3_K_S: case TFS_FTYPE_Q3_K_M: case TFS_FTYPE_Q3_K_L: return TFS_DT_Q3_K;
	case TFS_FTYPE_Q4_K_S: case TFS_FTYPE_Q4_K_M: return TFS_DT_Q4_K;
	case TFS_FTYPE_Q5_K_S: case TFS_FTYPE_Q5_K_M: return TFS_DT_Q5_K;
	case TFS_FTYPE_Q6_K: return TFS_DT_Q6_K;
	case TFS_FTYPE_TQ1_0: return TFS_DT_TQ1_0;
	case TFS_FTYPE_TQ2_0: return TFS_DT_TQ2_0;
	case TFS_FTYPE_IQ2_XXS: return TFS_DT_IQ2_XXS;
	case TFS_FTYPE_IQ2_XS: return TFS_DT_IQ2_XS;
	case TFS_FTYPE_IQ2_S: return TFS_DT_IQ2_XS;
	case TFS_FTYPE_IQ2_M: return TFS_DT_IQ2_S;
	case TFS_FTYPE_IQ3_XXS: return TFS_DT_IQ3_XXS;
	case TFS_FTYPE_IQ1_S: return TFS_DT_IQ1_S;
	case TFS_FTYPE_IQ1_M: return TFS_DT_IQ1_M;
	case TFS_FTYPE_IQ4_NL: return TFS_DT_IQ4_NL;
	case TFS_FTYPE_IQ4_XS: return TFS_DT_IQ4_XS;
	case TFS_FTYPE_IQ3_S: case TFS_FTYPE_IQ3_M: return TFS_DT_IQ3_S;
	default: return -1;
	}
}

/* ==== the plan ==== */

struct tfs_qplan {
	int ftype;
	uint32_t alignment;
	tfs_qtensor *t;
	size_t n_t;
	tfs_qkv *kv;
	size_t n_kv;
	uint64_t data_size;
};

int tfs_qplan_ftype(const tfs_qplan *p) { return p->ftype; }
size_t tfs_qplan_n_tensors(const tfs_qplan *p) { return p->n_t; }
uint64_t tfs_qplan_data_size(const tfs_qplan *p) { return p->data_size; }
uint32_t tfs_qplan_alignment(const tfs_qplan *p) { return p->alignment; }
size_t tfs_qplan_n_kv(const tfs_qplan *p) { return p->n_kv; }

const tfs_qtensor *tfs_qplan_tensor(const tfs_qplan *p, size_t i)
{
	return i < p->n_t ? &p->t[i] : NULL;
}

const tfs_qkv *tfs_qplan_kv(const tfs_qplan *p, size_t i)
{
	return i < p->n_kv ? &p->kv[i] : NULL;
}

void tfs_qplan_free(tfs_qplan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_kv; i++) {
		free((void *)p->kv[i].key);
		free((void *)p->kv[i].data);
	}
	free(p->kv);
	free(p->t);
	free(p);
}

/* ==== what llama.cpp reads of the model ==== */

/* tensor_category of llama-quant.cpp: broad roles told by name */
typedef enum {
	CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B,
	CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER
} category;

typedef struct {
	const tfs_model *m;
	const tfs_qplan_opts *o;
	int ftype;
	char arch[64];
	bool falcon, bailingmoe3, is_70b;
	uint32_t n_layer, n_expert, n_head, n_head_kv;
	/* quantize_state_impl's counters */
	int n_attention_wv, i_attention_wv;
	int n_ffn_down, n_ffn_gate, n_ffn_up, i_ffn_down, i_ffn_gate, i_ffn_up;
	bool has_imatrix, has_tied_embeddings;
	tfs_error *err;
	int rc;                 /* the first failure (llama.cpp throws) */
} state;

static bool has(const char *s, const char *part) { return strstr(s, part) != NULL; }

static bool is_token_embd(const char *n)
{
	return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight");
}

static category get_category(const char *n)
{
	if (!strcmp(n, "output.weight"))
		return CAT_OUTPUT;
	if (is_token_embd(n))
		return CAT_TOKEN_EMBD;
	if (has(n, "attn_qkv.weight"))
		return CAT_ATTN_QKV;
	if (has(n, "attn_kv_b.weight"))
		return CAT_ATTN_KV_B;
	if (has(n, "attn_v.weight"))
		return CAT_ATTN_V;
	if (has(n, "attn_k.weight"))
		return CAT_ATTN_K;
	if (has(n, "attn_q.weight"))
		return CAT_ATTN_Q;
	if (has(n, "attn_output.weight"))
		return CAT_ATTN_OUTPUT;
	if (has(n, "ffn_up"))
		return CAT_FFN_UP;
	if (has(n, "ffn_gate"))
		return CAT_FFN_GATE;
	if (has(n, "ffn_down"))
		return CAT_FFN_DOWN;
	return CAT_OTHER;
}

static bool is_attn_v(category c)
{
	return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

/* A key's value as an unsigned integer (any integer type; an array: its first element, as
 * llama.cpp's per-layer keys give layer 0).  false when absent or not an integer. */
static bool key_uint(const tfs_model *m, const char *key, uint32_t *v)
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

static int read_hparams(state *s)
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
	if (!key_uint(m, key, &s->n_layer))
		return tfs_error_set(s->err, TFS_E_FORMAT, "%s: no %s key: llama.cpp cannot "
				     "quantize it", tfs_model_path(m), key);
	snprintf(key, sizeof(key), "%s.expert_count", s->arch);
	if (!key_uint(m, key, &s->n_expert))
		s->n_expert = 0;
	snprintf(key, sizeof(key), "%s.attention.head_count", s->arch);
	if (!key_uint(m, key, &s->n_head))
		s->n_head = 0;
	snprintf(key, sizeof(key), "%s.attention.head_count_kv", s->arch);
	if (!key_uint(m, key, &s->n_head_kv))
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
static uint32_t n_gqa(const state *s)
{
	return s->n_head_kv ? s->n_head / s->n_head_kv : 0;
}

/* ggml_n_dims: dimensions up to the last that is not 1, at least 1 */
static uint32_t ggml_dims(const tfs_tensor *t)
{
	uint32_t n = 1;
	for (uint32_t k = 1; k < t->n_dims && k < 4; k++)
		if (t->ne[k] > 1)
			n = k + 1;
	return n;
}

static int blck(int dtype) { return (int)tfs_dtype(dtype)->block_elems; }
static bool is_quantized(int dtype) { return blck(dtype) > 1; }
static const char *dname(int dtype) { return tfs_dtype(dtype)->name; }

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* tensor_allows_quantization */
static bool allows_quantization(const state *s, const char *name, uint32_t dims)
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
static int layer_of(state *s, int counter, const char *name)
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

/* llama_tensor_get_type_impl: the mix's type of one tensor (t, visited in order). */
static int mix_type(state *s, int new_type, const tfs_tensor *t, category cat)
{
	const int ft = s->ftype;
	const char *name = t->name;
	const bool iq_low = ft == TFS_FTYPE_IQ2_XXS || ft == TFS_FTYPE_IQ2_XS ||
			    ft == TFS_FTYPE_IQ1_S || ft == TFS_FTYPE_IQ2_S ||
			    ft == TFS_FTYPE_IQ2_M || ft == TFS_FTYPE_IQ1_M;
	const bool iq2_sm = ft == TFS_FTYPE_IQ2_S || ft == TFS_FTYPE_IQ2_M;

	if (cat == CAT_OUTPUT || (s->has_tied_embeddings && cat == CAT_TOKEN_EMBD)) {
		if (s->o->set_output_type) {
			new_type = s->o->output_type;
		} else {
			const int64_t nx = t->ne[0];
			if (ft == TFS_FTYPE_MXFP4_MOE)
				new_type = TFS_DT_Q8_0;
			else if (s->falcon || nx % blck(new_type) != 0)
				new_type = TFS_DT_Q8_0;
			else if (ft == TFS_FTYPE_IQ2_XXS || ft == TFS_FTYPE_IQ2_XS ||
				 ft == TFS_FTYPE_IQ3_XXS || ft == TFS_FTYPE_IQ1_S ||
				 ft == TFS_FTYPE_IQ2_S || ft == TFS_FTYPE_IQ2_M ||
				 ft == TFS_FTYPE_IQ1_M)
				new_type = TFS_DT_Q5_K;
			else if (new_type != TFS_DT_Q8_0)
				new_type = TFS_DT_Q6_K;
		}
	} else if (ft == TFS_FTYPE_MXFP4_MOE) {
		/* expert tensors MXFP4, the rest Q8_0 */
		const bool expert_role = cat == CAT_FFN_UP || cat == CAT_FFN_GATE ||
					 cat == CAT_FFN_DOWN;
		if (t->ne[2] > 1 && (!s->bailingmoe3 || expert_role))
			new_type = TFS_DT_MXFP4;
		else
			new_type = TFS_DT_Q8_0;
	} else if (cat == CAT_TOKEN_EMBD) {
		if (s->o->set_token_embd_type)
			new_type = s->o->token_embd_type;
		else if (ft == TFS_FTYPE_IQ2_XXS || ft == TFS_FTYPE_IQ2_XS ||
			 ft == TFS_FTYPE_IQ1_S || ft == TFS_FTYPE_IQ1_M)
			new_type = TFS_DT_Q2_K;
		else if (iq2_sm || ft == TFS_FTYPE_IQ3_XXS)
			new_type = TFS_DT_IQ3_S;
		else if (ft == TFS_FTYPE_TQ1_0 || ft == TFS_FTYPE_TQ2_0 || ft == TFS_FTYPE_Q2_0)
			new_type = TFS_DT_Q4_K;
	} else if (iq_low) {
		if (is_attn_v(cat)) {
			if (n_gqa(s) >= 4 || s->n_expert >= 4)
				new_type = TFS_DT_Q4_K;
			else
				new_type = iq2_sm ? TFS_DT_IQ3_S : TFS_DT_Q2_K;
			++s->i_attention_wv;
		} else if (s->n_expert == 8 && cat == CAT_ATTN_K) {
			new_type = TFS_DT_Q4_K;
		} else if (cat == CAT_FFN_DOWN) {
			if (s->i_ffn_down < s->n_ffn_down / 8)
				new_type = iq2_sm ? TFS_DT_IQ3_S : TFS_DT_Q2_K;
			++s->i_ffn_down;
		} else if (cat == CAT_ATTN_OUTPUT) {
			if (s->n_expert == 8)
				new_type = TFS_DT_Q5_K;
			else if (ft == TFS_FTYPE_IQ1_S || ft == TFS_FTYPE_IQ1_M)
				new_type = TFS_DT_IQ2_XXS;
			else if (iq2_sm)
				new_type = TFS_DT_IQ3_S;
		}
	} else if (is_attn_v(cat)) {
		const uint32_t gqa = n_gqa(s);
		if (ft == TFS_FTYPE_Q2_K)
			new_type = gqa >= 4 ? TFS_DT_Q4_K : TFS_DT_Q3_K;
		else if (ft == TFS_FTYPE_Q2_K_S && gqa >= 4)
			new_type = TFS_DT_Q4_K;
		else if (ft == TFS_FTYPE_IQ3_XXS)
			new_type = gqa >= 4 ? TFS_DT_Q4_K
					    : !s->has_imatrix ? TFS_DT_IQ3_S : TFS_DT_IQ3_XXS;
		else if ((ft == TFS_FTYPE_IQ3_XS || ft == TFS_FTYPE_IQ3_S) && gqa >= 4)
			new_type = TFS_DT_Q4_K;
		else if (ft == TFS_FTYPE_IQ3_M)
			new_type = TFS_DT_Q4_K;
		else if (ft == TFS_FTYPE_Q3_K_M)
			new_type = s->i_attention_wv < 2 ? TFS_DT_Q5_K : TFS_DT_Q4_K;
		else if (ft == TFS_FTYPE_Q3_K_L)
			new_type = TFS_DT_Q5_K;
		else if ((ft == TFS_FTYPE_IQ4_NL || ft == TFS_FTYPE_IQ4_XS) && gqa >= 4)
			new_type = TFS_DT_Q5_K;
		else if ((ft == TFS_FTYPE_Q4_K_M || ft == TFS_FTYPE_Q5_K_M) &&
			 use_more_bits(s->i_attention_wv, s->n_attention_wv))
			new_type = TFS_DT_Q6_K;
		else if (ft == TFS_FTYPE_Q4_K_S && s->i_attention_wv < 4)
			new_type = TFS_DT_Q5_K;
		/* 70B: 8 heads share attn_v, 8x smaller than attn_q: more bits cost little */
		if (s->is_70b && (new_type == TFS_DT_Q3_K || new_type == TFS_DT_Q4_K))
			new_type = TFS_DT_Q5_K;
		if (s->n_expert == 8)
			new_type = TFS_DT_Q8_0;
		++s->i_attention_wv;
	} else if (cat == CAT_ATTN_K) {
		if (s->n_expert == 8)
			new_type = TFS_DT_Q8_0;
		else if (ft == TFS_FTYPE_IQ3_XS)
			new_type = TFS_DT_IQ3_XXS;
		else if (ft == TFS_FTYPE_IQ3_XXS)
			new_type = TFS_DT_IQ2_S;
	} else if (cat == CAT_ATTN_Q) {
		if (ft == TFS_FTYPE_IQ3_XS)
			new_type = TFS_DT_IQ3_XXS;
		else if (ft == TFS_FTYPE_IQ3_XXS)
			new_type = TFS_DT_IQ2_S;
	} else if (cat == CAT_FFN_DOWN) {
		const int il = layer_of(s, s->i_ffn_down, name), nl = s->n_ffn_down;
		if (il < 0)
			return -1;
		if (ft == TFS_FTYPE_Q2_K) {
			new_type = TFS_DT_Q3_K;
		} else if (ft == TFS_FTYPE_Q2_K_S) {
			if (il < nl / 8)
				new_type = TFS_DT_Q4_K;
		} else if (ft == TFS_FTYPE_IQ3_XXS && !s->has_imatrix) {
			new_type = il < nl / 8 ? TFS_DT_Q4_K : TFS_DT_Q3_K;
		} else if (ft == TFS_FTYPE_Q3_K_M) {
			new_type = il < nl / 16 ? TFS_DT_Q5_K
				   : !s->falcon || use_more_bits(il, nl) ? TFS_DT_Q4_K : TFS_DT_Q3_K;
		} else if (ft == TFS_FTYPE_IQ3_M &&
			   (il < nl / 8 || (s->n_expert == 8 && use_more_bits(il, nl)))) {
			new_type = TFS_DT_Q4_K;
		} else if (ft == TFS_FTYPE_Q3_K_L) {
			new_type = s->falcon ? TFS_DT_Q4_K : TFS_DT_Q5_K;
		} else if (ft == TFS_FTYPE_Q4_K_M) {
			if (s->falcon)
				new_type = il < nl / 16 ? TFS_DT_Q6_K
					   : use_more_bits(il, nl) ? TFS_DT_Q5_K : TFS_DT_Q4_K;
			else if (use_more_bits(il, nl))
				new_type = TFS_DT_Q6_K;
		} else if (il < nl / 8 && (ft == TFS_FTYPE_IQ4_NL || ft == TFS_FTYPE_IQ4_XS) &&
			   !s->has_imatrix) {
			new_type = TFS_DT_Q5_K;
		} else if (ft == TFS_FTYPE_Q5_K_M && use_more_bits(il, nl)) {
			new_type = TFS_DT_Q6_K;
		} else if (ft == TFS_FTYPE_Q4_K_S && !s->falcon && il < nl / 8) {
			new_type = TFS_DT_Q5_K;
		} else if ((ft == TFS_FTYPE_Q4_0 || ft == TFS_FTYPE_Q5_0) && s->has_imatrix &&
			   il < nl / 8) {
			/* guards the first ffn_down layers, only with an imatrix */
			new_type = ft == TFS_FTYPE_Q4_0 ? TFS_DT_Q4_1 : TFS_DT_Q5_1;
		}
		++s->i_ffn_down;
	} else if (cat == CAT_ATTN_OUTPUT) {
		if (!s->falcon) {
			if (s->n_expert == 8) {
				if (ft == TFS_FTYPE_Q2_K || ft == TFS_FTYPE_IQ3_XS ||
				    ft == TFS_FTYPE_IQ3_XXS || ft == TFS_FTYPE_Q3_K_S ||
				    ft == TFS_FTYPE_Q3_K_M || ft == TFS_FTYPE_IQ4_NL ||
				    ft == TFS_FTYPE_Q4_K_S || ft == TFS_FTYPE_Q4_K_M ||
				    ft == TFS_FTYPE_IQ3_S || ft == TFS_FTYPE_IQ3_M ||
				    ft == TFS_FTYPE_IQ4_XS)
					new_type = TFS_DT_Q5_K;
			} else {
				if (ft == TFS_FTYPE_Q2_K)
					new_type = TFS_DT_Q3_K;
				else if (ft == TFS_FTYPE_IQ3_XXS)
					new_type = TFS_DT_IQ3_S;
				else if (ft == TFS_FTYPE_Q3_K_M)
					new_type = TFS_DT_Q4_K;
				else if (ft == TFS_FTYPE_Q3_K_L)
					new_type = TFS_DT_Q5_K;
				else if (ft == TFS_FTYPE_IQ3_M)
					new_type = TFS_DT_Q4_K;
			}
		} else if (ft == TFS_FTYPE_Q3_K_L) {
			new_type = TFS_DT_Q4_K;
		}
	} else if (cat == CAT_ATTN_QKV) {
		/* unreachable (attn_qkv is attn_v-like above), kept as llama.cpp has it */
		if (ft == TFS_FTYPE_Q3_K_M || ft == TFS_FTYPE_Q3_K_L || ft == TFS_FTYPE_IQ3_M)
			new_type = TFS_DT_Q4_K;
		else if (ft == TFS_FTYPE_Q4_K_M)
			new_type = TFS_DT_Q5_K;
		else if (ft == TFS_FTYPE_Q5_K_M)
			new_type = TFS_DT_Q6_K;
	} else if (cat == CAT_FFN_GATE || cat == CAT_FFN_UP) {
		int *i_ffn = cat == CAT_FFN_GATE ? &s->i_ffn_gate : &s->i_ffn_up;
		const int nl = cat == CAT_FFN_GATE ? s->n_ffn_gate : s->n_ffn_up;
		const int il = layer_of(s, *i_ffn, name);
		if (il < 0)
			return -1;
		if (ft == TFS_FTYPE_IQ3_XS && il >= nl / 8 && il < 7 * nl / 8)
			new_type = TFS_DT_IQ3_XXS;
		++*i_ffn;
	}
	return new_type;
}

/* tensor_type_fallback: a type whose blocks fit rows of ne[0]; -1 after a failure. */
static int fallback(state *s, const tfs_tensor *t, int type, bool *fell)
{
	const int64_t ncols = t->ne[0];
	int ret = type;
	*fell = false;
	if (ncols % blck(type) == 0)
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
		if (blck(type) > 32) {
			s->rc = tfs_error_set(s->err, TFS_E_INVALID, "tensor '%s': rows of %"
					      PRId64 " values are not whole %s blocks, and llama.cpp "
					      "has no fallback type for %s", t->name, ncols,
					      dname(type), dname(type));
			return -1;
		}
		break;
	}
	/* most likely not a multiple of 32 either: F16 */
	if (ncols % blck(ret) != 0)
		ret = TFS_DT_F16;
	return ret;
}

/* llama_tensor_get_type for a tensor that allows quantization */
static int get_type(state *s, const tfs_tensor *t, category cat, int default_type, bool *fell)
{
	*fell = false;
	if (s->o->set_token_embd_type && cat == CAT_TOKEN_EMBD)
		return s->o->token_embd_type;
	if (s->o->set_output_type && cat == CAT_OUTPUT)
		return s->o->output_type;
	int new_type = default_type;
	if (is_quantized(default_type)) {
		if (!s->o->pure)
			new_type = mix_type(s, new_type, t, cat);
		if (new_type < 0)
			return -1;
		new_type = fallback(s, t, new_type, fell);
	}
	return new_type;
}

/* tensor_requires_imatrix */
static bool requires_imatrix(const char *name, int dtype, int ftype)
{
	if (is_token_embd(name) || !strcmp(name, "output.weight"))
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

/* ==== tensor order ==== */

/* llama_model_loader's weight_name_comparer: by the layer of a "blk.N." prefix (-1 without
 * one), then by name */
static int layer_key(const char *name)
{
	int l = -1;
	sscanf(name, "blk.%d.", &l);
	return l;
}

typedef struct {
	size_t i;
	int layer;
	const char *name;
} order_key;

static int by_layer_name(const void *a, const void *b)
{
	const order_key *x = a, *y = b;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* ==== keys ==== */

static int push_kv(tfs_qplan *p, tfs_qkv_op op, const char *key, uint32_t type,
		   const void *data, uint64_t len, tfs_error *err)
{
	tfs_qkv *kv = realloc(p->kv, (p->n_kv + 1) * sizeof(*kv));
	if (!kv)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	p->kv = kv;
	kv = &p->kv[p->n_kv];
	memset(kv, 0, sizeof(*kv));
	kv->op = op;
	kv->key = strdup(key);
	if (len) {
		uint8_t *d = malloc(len);
		if (d)
			memcpy(d, data, len);
		kv->data = d;
	}
	if (!kv->key || (len && !kv->data)) {
		free((void *)kv->key);
		free((void *)kv->data);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	kv->type = type;
	kv->len = len;
	p->n_kv++;
	return 0;
}

static int push_u32(tfs_qplan *p, const char *key, uint32_t v, tfs_error *err)
{
	return push_kv(p, TFS_QPLAN_KV_APPEND, key, TFS_GGUF_UINT32, &v, 4, err);
}

/* a string value as llama_model_kv_override holds it: 127 bytes at most, up to a NUL */
static int push_str(tfs_qplan *p, const char *key, const char *v, tfs_error *err)
{
	uint8_t buf[8 + MAX_STR];
	uint64_t n = strnlen(v, MAX_STR);
	memcpy(buf, &n, 8);
	memcpy(buf + 8, v, n);
	return push_kv(p, TFS_QPLAN_KV_APPEND, key, TFS_GGUF_STRING, buf, 8 + n, err);
}

/* the key changes of llama_model_quantize_impl (and llama-quantize's overrides) */
static int plan_keys(tfs_qplan *p, const tfs_model *m, const tfs_qplan_opts *o, int ftype,
		     tfs_error *err)
{
	int rc;
	if ((rc = push_u32(p, "general.quantization_version", QNT_VERSION, err)) ||
	    (rc = push_u32(p, "general.file_type", (uint32_t)ftype, err)))
		return rc;
	static const char *const split[] = { "split.no", "split.count", "split.tensors.count" };
	for (size_t k = 0; k < 3; k++)
		if (tfs_model_find_kv(m, split[k]) >= 0 &&
		    (rc = push_kv(p, TFS_QPLAN_KV_REMOVE, split[k], 0, NULL, 0, err)))
			return rc;
	if (!o->imatrix_file)
		return 0;
	/* llama-quantize's overrides: integers are written as u32 |value| */
	if ((rc = push_str(p, "quantize.imatrix.file", o->imatrix_file, err)))
		return rc;
	if (o->imatrix_dataset &&
	    (rc = push_str(p, "quantize.imatrix.dataset", o->imatrix_dataset, err)))
		return rc;
	int64_t e = o->imatrix_entries < 0 ? -o->imatrix_entries : o->imatrix_entries;
	if ((rc = push_u32(p, "quantize.imatrix.entries_count", (uint32_t)e, err)))
		return rc;
	if (o->imatrix_chunks > 0 &&
	    (rc = push_u32(p, "quantize.imatrix.chunks_count", (uint32_t)o->imatrix_chunks, err)))
		return rc;
	return 0;
}

int tfs_qplan_apply_kv(const tfs_qplan *p, tfs_model *m, tfs_error *err)
{
	for (size_t i = 0; i < p->n_kv; i++) {
		const tfs_qkv *kv = &p->kv[i];
		int rc = 0;
		if (tfs_model_find_kv(m, kv->key) >= 0)
			rc = tfs_model_del_kv(m, kv->key, err);
		if (!rc && kv->op == TFS_QPLAN_KV_APPEND) {
			uint8_t *d = malloc(kv->len ? kv->len : 1);
			if (!d)
				return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
			memcpy(d, kv->data, kv->len);
			rc = tfs_model_set_kv(m, kv->key, kv->type, d, kv->len, err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ==== the plan ==== */

/* The number of values tfs_imatrix has for tensor name (its entries are sorted by name), or
 * -1 without an entry. */
static int64_t imatrix_values(const tfs_imatrix *im, const char *name)
{
	size_t lo = 0, hi = tfs_imatrix_n_entries(im);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t nval = 0;
		int c = strcmp(tfs_imatrix_entry(im, mid, &nval), name);
		if (!c)
			return (int64_t)nval;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Whether ggml_quantize_chunk quantizes dtype differently with importance weights */
static bool ggml_takes_weights(int dtype)
{
	switch (dtype) {
	case TFS_DT_Q4_0: case TFS_DT_Q4_1: case TFS_DT_Q5_0: case TFS_DT_Q5_1:
	case TFS_DT_Q2_K: case TFS_DT_Q3_K: case TFS_DT_Q4_K: case TFS_DT_Q5_K: case TFS_DT_Q6_K:
		return true;
	default:
		return tfs_quantize_takes_imatrix(dtype);
	}
}

/* The checks llama_model_quantize makes before it converts tensor q (its main loop), and
 * those tensorfs adds for what it cannot do. */
static int check_convert(state *s, tfs_qtensor *q, const tfs_tensor *t, bool needs_imatrix)
{
	tfs_error *err = s->err;
	const tfs_imatrix *im = s->o->imatrix;
	if (im) {
		const uint64_t want = (uint64_t)t->ne[0] * (uint64_t)t->ne[2];
		const int64_t nval = imatrix_values(im, q->name);
		if (nval >= 0 && (uint64_t)nval != want && !is_token_embd(q->name))
			return tfs_error_set(err, TFS_E_INVALID, "the importance matrix has %" PRId64
					     " values for tensor '%s', which needs %" PRIu64
					     " (llama.cpp refuses it)", nval, q->name, want);
		const bool used = nval >= 0 && (uint64_t)nval == want;
		if (!used && needs_imatrix)
			return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': %s needs an "
					     "importance matrix, and the one given has no entry for "
					     "it", q->name, dname(q->dtype));
		q->weights_ignored = used && ggml_takes_weights(q->dtype) &&
				     !tfs_quantize_takes_imatrix(q->dtype);
	}
	if (q->src_dtype != TFS_DT_F32 && q->src_dtype != TFS_DT_F16 &&
	    q->src_dtype != TFS_DT_BF16 && !is_quantized(q->src_dtype))
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': llama.cpp cannot convert "
				     "%s tensors", q->name, dname(q->src_dtype));
	if (is_quantized(q->src_dtype) && !s->o->allow_requantize)
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s' is already quantized (%s): "
				     "requantizing it to %s is not allowed (llama-quantize "
				     "--allow-requantize)", q->name, dname(q->src_dtype),
				     dname(q->dtype));
	if (!tfs_quantize_supported(q->dtype))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': tensorfs cannot "
				     "quantize to %s", q->name, dname(q->dtype));
	if (t->n_dims > 4 || (t->n_dims == 4 && t->ne[3] > 1))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': llama.cpp quantizes "
				     "tensors of 3 dimensions at most", q->name);
	if (!tfs_tensor_has_f32(s->m, q->tensor, NULL))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': its %s values cannot "
				     "be read as float32", q->name, dname(q->src_dtype));
	return 0;
}

int tfs_qplan_new(tfs_qplan **out, const tfs_model *m, int ftype, const tfs_qplan_opts *o,
		  tfs_error *err)
{
	static const tfs_qplan_opts defaults = { 0 };
	state s = { .m = m, .o = o ? o : &defaults, .ftype = ftype, .err = err,
		    .has_tied_embeddings = true };
	order_key *keys = NULL;
	category *cats = NULL;
	bool *needs = NULL;
	tfs_qplan *p = NULL;
	uint64_t off = 0;
	int rc;

	*out = NULL;
	const int default_type = tfs_ftype_name(ftype) ? tfs_ftype_base_dtype(ftype) : -1;
	if (default_type < 0) {
		tfs_buf names = { 0 };
		tfs_ftype_list(&names);
		rc = tfs_error_set(err, TFS_E_INVALID, "%d is not a file type llama-quantize "
				   "knows (%s)", ftype, names.data ? names.data : "");
		tfs_buf_free(&names);
		return rc;
	}
	for (int k = 0; k < 2; k++) {
		const bool set = k ? s.o->set_output_type : s.o->set_token_embd_type;
		const int d = k ? s.o->output_type : s.o->token_embd_type;
		if (set && (d < 0 || d >= TFS_DT_GGML_COUNT || !tfs_dtype(d) || !blck(d)))
			return tfs_error_set(err, TFS_E_INVALID, "%d is not a ggml type", d);
	}
	if ((rc = read_hparams(&s)))
		return rc;
	s.has_imatrix = s.o->imatrix != NULL;

	/* the tensors in llama.cpp's order, and the counters of init_quantize_state_counters */
	size_t n = 0, nt = tfs_model_n_tensors(m);
	keys = calloc(nt ? nt : 1, sizeof(*keys));
	cats = calloc(nt ? nt : 1, sizeof(*cats));
	p = calloc(1, sizeof(*p));
	if (!keys || !cats || !p) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < nt; i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (t->deleted)
			continue;
		if (t->n_dims > 4) {
			rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s' has %u dimensions: "
					   "ggml has 4 at most", t->name, t->n_dims);
			goto fail;
		}
		keys[n++] = (order_key){ .i = i, .layer = layer_key(t->name), .name = t->name };
	}
	qsort(keys, n, sizeof(*keys), by_layer_name);
	for (size_t k = 0; k < n; k++) {
		cats[k] = get_category(keys[k].name);
		if (is_attn_v(cats[k]))
			s.n_attention_wv++;
		if (cats[k] == CAT_OUTPUT)
			s.has_tied_embeddings = false;
	}
	s.n_ffn_down = s.n_ffn_gate = s.n_ffn_up = (int)s.n_layer;

	p->ftype = ftype;
	/* llama.cpp pads to 32 whatever general.alignment says (a file ggml then refuses when
	 * the key says otherwise); tensorfs' writer pads as the key says */
	uint32_t a;
	p->alignment = key_uint(m, "general.alignment", &a) && a && !(a & (a - 1)) ? a : ALIGN;
	p->t = calloc(n ? n : 1, sizeof(*p->t));
	if (!p->t) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		goto fail;
	}
	p->n_t = n;

	/* the preliminary loop: every target type, and the imatrix a type requires */
	needs = calloc(n ? n : 1, sizeof(*needs));
	if (!needs) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		goto fail;
	}
	for (size_t k = 0; k < n; k++) {
		const tfs_tensor *t = tfs_model_tensor(m, keys[k].i);
		tfs_qtensor *q = &p->t[k];
		q->tensor = keys[k].i;
		q->name = t->name;
		q->src_dtype = t->dtype;
		q->n_dims = ggml_dims(t);
		for (uint32_t d = 0; d < 4; d++)
			q->ne[d] = d < t->n_dims ? t->ne[d] : 1;
		bool allows = t->dtype < TFS_DT_GGML_COUNT &&
			      allows_quantization(&s, t->name, q->n_dims);
		q->dtype = allows ? get_type(&s, t, cats[k], default_type, &q->fallback)
				  : t->dtype;
		if (q->dtype < 0) {
			rc = s.rc;
			goto fail;
		}
		needs[k] = requires_imatrix(t->name, q->dtype, ftype);
		if (allows && needs[k] && !s.has_imatrix) {
			rc = tfs_error_set(err, TFS_E_INVALID, "%s needs an importance matrix: "
					   "tensor '%s' would be %s (llama-quantize --imatrix; "
					   "tensorfs -o imatrix=FILE)", tfs_ftype_name(ftype),
					   t->name, dname(q->dtype));
			goto fail;
		}
	}
	/* the main loop: sizes and offsets, and what would make llama.cpp fail */
	for (size_t k = 0; k < n; k++) {
		tfs_qtensor *q = &p->t[k];
		const tfs_tensor *t = tfs_model_tensor(m, q->tensor);
		const tfs_dtype_info *d = q->dtype < TFS_DT_GGML_COUNT ? tfs_dtype(q->dtype) : NULL;
		q->convert = q->dtype != q->src_dtype;
		if (!d || !d->block_elems) {
			rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor '%s': its type cannot be "
					   "stored in GGUF", q->name);
			break;
		}
		if (q->convert && (rc = check_convert(&s, q, t, needs[k])))
			break;
		uint64_t nel = 1;
		for (uint32_t dd = 0; dd < 4; dd++)
			nel *= (uint64_t)q->ne[dd];
		if ((rc = tfs_dtype_nbytes(&q->nbytes, q->dtype, nel, err)))
			break;
		q->offset = off;
		off += (q->nbytes + p->alignment - 1) / p->alignment * p->alignment;
	}
	if (rc)
		goto fail;
	p->data_size = off;
	if ((rc = plan_keys(p, m, s.o, ftype, err)))
		goto fail;
	free(keys);
	free(cats);
	free(needs);
	*out = p;
	return 0;
fail:
	free(keys);
	free(cats);
	free(needs);
	tfs_qplan_free(p);
	return rc;
}
