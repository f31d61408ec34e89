/*
 * hf_moe.c - mixtures of experts in the GGUF view (hf_moe.h): the MoE rows of Mixtral,
 * Qwen2-MoE and Qwen3-MoE (as llama.cpp de3ff81's converter writes them), and the stacking of
 * experts' tensors every MoE row uses (its `moe` member).
 */
#include "hf_moe.h"
#include "hf_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, HD = TFS_HF_D_HEAD,
       VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE, EX = TFS_HF_D_EXPERTS,
       FE = TFS_HF_D_FF_EXP, FS = TFS_HF_D_FF_SHEXP, ONE = TFS_HF_D_ONE };
enum { XN = TFS_HF_XF_NONE, XQ = TFS_HF_XF_PERMUTE_Q, XK = TFS_HF_XF_PERMUTE_K };

/* ==== the rows ==== */


#define ATTN(xq, xk) \
	{ "self_attn.q_proj", "attn_q", Q, H, xq, true }, \
	{ "self_attn.k_proj", "attn_k", KV, H, xk, true }, \
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true }, \
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true }
#define NORMS \
	{ "input_layernorm", "attn_norm", H, NO, XN, true }, \
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true }

/* Mixtral (LlamaModel): Q/K permuted; the router; experts w1 (gate), w2 (down), w3 (up) */
static const tfs_hf_name mixtral_blocks[] = {
	NORMS,
	ATTN(XQ, XK),
	{ "block_sparse_moe.gate", "ffn_gate_inp", EX, H, XN, true },
};

static const char *const k_local_experts[] = { "num_local_experts", NULL };
static const char *const k_experts[] = { "num_local_experts", "num_experts", NULL };

static const tfs_hf_moe mixtral_moe = {
	"block_sparse_moe.experts", { "w1", "w2", "w3" },
	{ "ffn_gate_exps", "ffn_down_exps", "ffn_up_exps" },
	{ FE, H, FE }, { H, FE, H }, k_local_experts, NULL,
};

/* Qwen2-MoE: biased q/k/v; the router, a shared expert and its gate */
static const tfs_hf_name qwen2moe_blocks[] = {
	NORMS,
	ATTN(XN, XN),
	{ "mlp.gate", "ffn_gate_inp", EX, H, XN, true },
	{ "mlp.shared_expert_gate", "ffn_gate_inp_shexp", ONE, H, XN, false },
	{ "mlp.shared_expert.gate_proj", "ffn_gate_shexp", FS, H, XN, false },
	{ "mlp.shared_expert.up_proj", "ffn_up_shexp", FS, H, XN, false },
	{ "mlp.shared_expert.down_proj", "ffn_down_shexp", H, FS, XN, false },
};

/* Qwen3-MoE: Qwen3's q/k norms, the router, no shared expert */
static const tfs_hf_name qwen3moe_blocks[] = {
	NORMS,
	ATTN(XN, XN),
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, XN, true },
	{ "mlp.gate", "ffn_gate_inp", EX, H, XN, true },
};

static const tfs_hf_moe qwen_moe = {
	"mlp.experts", { "down_proj", "gate_proj", "up_proj" },
	{ "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps" },
	{ H, FE, FE }, { FE, H, H }, k_experts, NULL,
};

/* Qwen2MoeModel.set_gguf_parameters: after TextModel's, the expert and shared expert
 * feed-forward lengths */
static int qwen2moe_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *v;
	int rc = 0;
	if ((v = json_object_get(h->root, "moe_intermediate_size")) && !json_is_null(v))
		rc = tfs_hf_add_u32(l, h, "expert_feed_forward_length", v, "moe_intermediate_size",
				    err);
	if (!rc && (v = json_object_get(h->root, "shared_expert_intermediate_size")) &&
	    !json_is_null(v))
		rc = tfs_hf_add_u32(l, h, "expert_shared_feed_forward_length", v,
				    "shared_expert_intermediate_size", err);
	return rc;
}

/* ==== config class defaults (transformers 4.57) ==== */

enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL, DB = TFS_HF_DEF_BOOL,
       DHD = TFS_HF_DEF_HEAD_DIM, DKV = TFS_HF_DEF_KV_HEADS };

/* MixtralConfig */
static const tfs_hf_default mixtral_defaults[] = {
	{ "vocab_size", DI, 32000 }, { "num_key_value_heads", DKV, 8 },
	{ "max_position_embeddings", DI, 4096 * 32 }, { "rms_norm_eps", DR, 1e-5 },
	{ "rope_theta", DR, 1e6 }, { "head_dim", DHD, 0 }, { "sliding_window", DN, 0 },
	{ "num_experts_per_tok", DI, 2 }, { "num_local_experts", DI, 8 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* Qwen2MoeConfig */
static const tfs_hf_default qwen2moe_defaults[] = {
	{ "vocab_size", DI, 151936 }, { "num_key_value_heads", DKV, 16 },
	{ "max_position_embeddings", DI, 32768 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "moe_intermediate_size", DI, 1408 }, { "shared_expert_intermediate_size", DI, 5632 },
	{ "num_experts_per_tok", DI, 4 }, { "num_experts", DI, 60 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* Qwen3MoeConfig (no head_dim attribute: hidden_size / num_attention_heads) */
static const tfs_hf_default qwen3moe_defaults[] = {
	{ "vocab_size", DI, 151936 }, { "num_key_value_heads", DKV, 4 },
	{ "max_position_embeddings", DI, 32768 }, { "rms_norm_eps", DR, 1e-6 },
	{ "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "moe_intermediate_size", DI, 768 }, { "num_experts_per_tok", DI, 8 },
	{ "num_experts", DI, 128 }, { "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

#define BASE TFS_HF_ARCH_BASE_PARAMS

const tfs_hf_arch tfs_hf_arch_mixtral = {
	TFS_HF_CLASSES("MixtralForCausalLM"), .gguf = "llama",
	TFS_HF_NAMES(tfs_hf_globals, mixtral_blocks), .flags = BASE | TFS_HF_ARCH_LLAMA_PARAMS,
	.extra = tfs_hf_llama3_freqs, TFS_HF_CONFIG("mixtral", mixtral_defaults),
	.vocab = TFS_HF_VOCAB_LLAMA, .moe = &mixtral_moe,
};

const tfs_hf_arch tfs_hf_arch_qwen2moe = {
	TFS_HF_CLASSES("Qwen2MoeForCausalLM"), .gguf = "qwen2moe",
	TFS_HF_NAMES(tfs_hf_globals, qwen2moe_blocks), .flags = BASE, .params = qwen2moe_keys,
	TFS_HF_CONFIG("qwen2_moe", qwen2moe_defaults), .vocab = TFS_HF_VOCAB_GPT2,
	.moe = &qwen_moe,
};

const tfs_hf_arch tfs_hf_arch_qwen3moe = {
	TFS_HF_CLASSES("Qwen3MoeForCausalLM"), .gguf = "qwen3moe",
	TFS_HF_NAMES(tfs_hf_globals, qwen3moe_blocks), .flags = BASE, .params = qwen2moe_keys,
	TFS_HF_CONFIG("qwen3_moe", qwen3moe_defaults), .vocab = TFS_HF_VOCAB_GPT2,
	.moe = &qwen_moe,
};

/* ==== axes ==== */

static int64_t int_of(const hparams *h, const char *const *keys)
{
	json_t *v = tfs_hf_find(h->root, keys, NULL);
	return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : -1;
}

int64_t tfs_hf_moe_dim(int d, const hparams *h)
{
	static const char *const k_ff_exp[] = { "moe_intermediate_size", "intermediate_size",
						NULL };
	static const char *const k_ff_sh[] = { "shared_expert_intermediate_size", NULL };
	switch (d) {
	case TFS_HF_D_EXPERTS: return int_of(h, k_experts);
	case TFS_HF_D_FF_EXP: return int_of(h, k_ff_exp);
	case TFS_HF_D_FF_SHEXP: return int_of(h, k_ff_sh);
	case TFS_HF_D_ONE: return 1;
	default: return 0;
	}
}

/* ==== stacked, transposed experts (Llama 4, Qwen3-VL-MoE) ==== */

/* A stacked expert tensor of source t (index idx): name, GGUF shape {a, c, E}, transposed on
 * read (columns first, first + 1, ... of width-wide rows; width 0: as many as the output's). */
static void put_transposed(tfs_hf_stack *o, const tfs_tensor *t, size_t idx, unsigned long b,
			   const char *proj, int64_t a, int64_t c, uint32_t first, uint32_t width)
{
	memset(o, 0, sizeof *o);
	snprintf(o->name, sizeof o->name, "blk.%lu.ffn_%s_exps.weight", b, proj);
	o->shape = *t;
	o->shape.name = o->name;
	memset(o->shape.ne, 0, sizeof o->shape.ne);
	o->shape.ne[0] = a, o->shape.ne[1] = c, o->shape.ne[2] = t->ne[2];
	o->src = (long)idx;
	o->own = (tfs_hf_own){ .kind = TFS_HF_OWN_T, .stride = 1, .first = first,
				 .src2 = -1, .width = width };
}

int tfs_hf_moe_transposed(const hparams *h, const tfs_model *st, size_t idx, unsigned long b,
			  bool down, int64_t ff, const char *ff_keys, const char *where,
			  tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(st, idx);
	int64_t e = tfs_hf_moe_dim(TFS_HF_D_EXPERTS, h);
	int64_t want[3] = { e, down ? ff : h->hidden, down ? h->hidden : (ff > 0 ? 2 * ff : -1) };
	bool ok = t->n_dims == 3;

	*n = 0;
	for (int i = 0; ok && i < 3; i++)
		ok = want[i] < 0 || t->ne[2 - i] == want[i];
	if (!ok)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has shape [%lld, %lld, "
				     "%lld] (%u dims), but %s says [%lld, %lld, %lld] (experts, %s%s%s)",
				     where, t->name, (long long)t->ne[2], (long long)t->ne[1],
				     (long long)t->ne[0], t->n_dims, h->where, (long long)want[0],
				     (long long)want[1], (long long)want[2], down ? ff_keys : "",
				     down ? ", hidden_size" : "hidden_size, 2 x ", down ? "" : ff_keys);
	if (t->dtype != TFS_DT_F32 && t->dtype != TFS_DT_F16 && t->dtype != TFS_DT_BF16)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is not F32, F16 or "
				     "BF16; the GGUF view converts those only", where, t->name);
	if (down) {   /* [E, ff, hidden] -> [E, hidden, ff] */
		put_transposed(&out[0], t, idx, b, "down", t->ne[1], t->ne[0], 0, 0);
		*n = 1;
		return 0;
	}
	if (t->ne[0] % 2)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': an odd count of gate/up "
				     "columns", where, t->name);
	uint32_t half = (uint32_t)(t->ne[0] / 2);
	put_transposed(&out[0], t, idx, b, "gate", t->ne[1], half, 0, (uint32_t)t->ne[0]);
	put_transposed(&out[1], t, idx, b, "up", t->ne[1], half, half, (uint32_t)t->ne[0]);
	*n = 2;
	return 0;
}

/* ==== stacking ==== */

/* A layer's experts: parts[proj][expert] (source tensor index + 1; 0: not seen yet). */
typedef struct {
	long *parts;
	size_t have;
} layer_experts;

struct tfs_hf_moe_state {
	int64_t n_exp;
	layer_experts *layer;      /* one per layer */
	size_t n_layer;
};

void tfs_hf_moe_state_free(struct tfs_hf_moe_state *s)
{
	if (!s)
		return;
	for (size_t b = 0; b < s->n_layer; b++)
		free(s->layer[b].parts);
	free(s->layer);
	free(s);
}

/* "model.layers.B.<experts>.E.<proj>.weight": B, E and the projection's slot; false when
 * name is not of that form (another tensor). */
static bool parse_expert(const char *name, const tfs_hf_moe *moe, unsigned long *bid,
			 unsigned long *xid, int *proj)
{
	const char *rest, *p;
	size_t el = strlen(moe->experts);
	if (!tfs_hf_index_of(name, "model.layers.", bid, &rest) ||
	    strncmp(rest, moe->experts, el) || rest[el] != '.' ||
	    !tfs_hf_index_of(rest + el + 1, "", xid, &p))
		return false;
	*proj = -1;
	for (int k = 0; k < 3; k++) {
		size_t pl = strlen(moe->proj[k]);
		if (!strncmp(p, moe->proj[k], pl) && !strcmp(p + pl, ".weight"))
			*proj = k;
	}
	return true;
}

static int make_state(struct tfs_hf_moe_state **out, const tfs_hf_moe *moe, const hparams *h,
		      const char *where, const char *name, tfs_error *err)
{
	struct tfs_hf_moe_state *s = calloc(1, sizeof *s);
	if (!s)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	s->n_exp = int_of(h, moe->n_keys);
	s->n_layer = (size_t)h->n_layer;
	if (s->n_exp <= 0 || s->n_exp > 65536) {
		free(s);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is an expert's, but %s "
				     "has no \"%s\" (the experts' count)", where, name, h->where,
				     moe->n_keys[0]);
	}
	if (!(s->layer = calloc(s->n_layer ? s->n_layer : 1, sizeof *s->layer))) {
		free(s);
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	}
	*out = s;
	return 0;
}

/* The shape an expert's tensor must have (numpy order), from the row's axes. */
static int check_expert(const tfs_tensor *t, const tfs_tensor *first, const tfs_hf_moe *moe,
			int proj, const hparams *h, const char *where, tfs_error *err)
{
	if (t->dtype != TFS_DT_F32 && t->dtype != TFS_DT_F16 && t->dtype != TFS_DT_BF16) {
		const tfs_dtype_info *di = tfs_dtype(t->dtype);
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is %s; the GGUF view "
				     "converts F32, F16 and BF16 weights only", where, t->name,
				     di ? di->name : "of an unknown type");
	}
	int64_t nr = tfs_hf_moe_dim(moe->rows[proj], h), cols = tfs_hf_moe_dim(moe->cols[proj], h);
	if (moe->rows[proj] == TFS_HF_D_HIDDEN)
		nr = h->hidden;
	if (moe->cols[proj] == TFS_HF_D_HIDDEN)
		cols = h->hidden;
	if (t->n_dims != 2 || (nr > 0 && t->ne[1] != nr) || (cols > 0 && t->ne[0] != cols))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: expert tensor '%s' has shape [%lld, "
				     "%lld] (%u dims), but %s says [%lld, %lld]", where, t->name,
				     (long long)(t->n_dims > 1 ? t->ne[1] : 0), (long long)t->ne[0],
				     t->n_dims, h->where, (long long)nr, (long long)cols);
	if (first && (first->dtype != t->dtype || first->ne[0] != t->ne[0] ||
		      first->ne[1] != t->ne[1]))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: expert tensor '%s' differs in dtype "
				     "or shape from '%s': they cannot be stacked", where, t->name,
				     first->name);
	return 0;
}

int tfs_hf_moe_take(struct tfs_hf_moe_state **state, const tfs_hf_moe *moe, const hparams *h,
		    const tfs_model *st, size_t idx, const char *name, const char *where,
		    tfs_hf_stack *out, size_t *n, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(st, idx);
	unsigned long bid, xid;
	int proj, rc;
	*n = 0;
	if (!parse_expert(name, moe, &bid, &xid, &proj))
		return TFS_PASSTHROUGH;
	if (!*state && (rc = make_state(state, moe, h, where, t->name, err)))
		return rc;
	struct tfs_hf_moe_state *s = *state;
	if (bid >= s->n_layer || (int64_t)xid >= s->n_exp || proj < 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is no expert tensor the "
				     "converter stacks (%s says %lld layers, %lld experts; "
				     "projections %s, %s, %s)", where, t->name, h->where,
				     (long long)s->n_layer, (long long)s->n_exp, moe->proj[0],
				     moe->proj[1], moe->proj[2]);
	layer_experts *L = &s->layer[bid];
	size_t per = (size_t)s->n_exp;
	if (!L->parts && !(L->parts = calloc(3 * per, sizeof *L->parts)))
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	long *slot = &L->parts[(size_t)proj * per + xid];
	if (*slot)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second copy of "
				     "that expert's", where, t->name);
	const tfs_tensor *first = NULL;
	for (size_t k = 0; k < per && !first; k++)
		if (L->parts[(size_t)proj * per + k])
			first = tfs_model_tensor(st, (size_t)L->parts[(size_t)proj * per + k] - 1);
	if ((rc = check_expert(t, first, moe, proj, h, where, err)))
		return rc;
	*slot = (long)idx + 1;
	if (++L->have < 3 * per)
		return 0;
	/* the layer is complete: its stacked tensors, in the class's order */
	for (int k = 0; k < 3; k++) {
		tfs_hf_stack *o = &out[k];
		memset(o, 0, sizeof *o);
		if (!(o->parts = malloc(per * sizeof *o->parts))) {
			for (int j = 0; j < k; j++)
				free(out[j].parts);
			return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		}
		for (size_t x = 0; x < per; x++)
			o->parts[x] = L->parts[(size_t)k * per + x] - 1;
		o->n_parts = (uint32_t)per;
		const tfs_tensor *e = tfs_model_tensor(st, (size_t)o->parts[0]);
		snprintf(o->name, sizeof o->name, "blk.%lu.%s.weight", bid, moe->gguf[k]);
		o->shape = *e;
		o->shape.name = o->name;
		o->shape.n_dims = 3;
		o->shape.ne[2] = s->n_exp;
	}
	*n = 3;
	free(L->parts);
	L->parts = NULL;
	L->have = 0;
	return 0;
}

int tfs_hf_moe_finish(struct tfs_hf_moe_state **state, const tfs_model *st, tfs_error *err)
{
	struct tfs_hf_moe_state *s = *state;
	int rc = 0;
	for (size_t b = 0; s && !rc && b < s->n_layer; b++) {
		const layer_experts *L = &s->layer[b];
		for (size_t k = 0; L->parts && k < 3 * (size_t)s->n_exp; k++)
			if (L->parts[k]) {
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: layer %zu has %zu of its "
						   "%lld expert tensors (%s is one): the converter "
						   "stops on \"Unprocessed experts\"",
						   tfs_model_path(st), b, L->have,
						   (long long)(3 * s->n_exp),
						   tfs_model_tensor(st, (size_t)L->parts[k] - 1)->name);
				break;
			}
	}
	tfs_hf_moe_state_free(s);
	*state = NULL;
	return rc;
}
