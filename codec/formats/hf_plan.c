/*
 * hf_plan.c - what convert_hf_to_gguf.py (llama.cpp c392e50, Feb 2025; Qwen3 as the
 * converter adds it in April 2025) writes for a Hugging Face model, and its tensors' bytes.
 *
 * The converter (Model.__init__, prepare_tensors, prepare_metadata, LlamaModel/Qwen2Model):
 *  1. hparams = config.json; the class by architectures[0];
 *  2. --outtype auto: MOSTLY_F16 when the first tensor it reads is F16, else MOSTLY_BF16;
 *  3. tensors: a generated rope_freqs (llama3 rope scaling), then per shard file (sorted) its
 *     tensors in safetensors' keys() order (sorted); names ending .rotary_emb.inv_freq,
 *     .attention.bias, .attention.masked_bias dropped; BF16 (any dtype but F16/F32) widened
 *     to F32; llama's q_proj/k_proj rows permuted; the name mapped (gguf-py TensorNameMap);
 *  4. type: 1-D tensors, *_norm.weight and anything not .weight F32; else the file type's;
 *     Q8_0 rows that are not whole blocks fall back to F16;
 *  5. keys: general.architecture, general.type, general.* (hf_meta.c), the hyperparameters
 *     (Model.set_gguf_parameters, then the class's), the vocab (hf_vocab.h),
 *     general.quantization_version.
 */
#include "hf_plan.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hf_convert.h"
#include "hf_meta.h"
#include "hf_rope.h"
#include "hf_vocab.h"

#define GGUF_ALIGN 32
#define GGML_QUANT_VERSION 2

/* llama_ftype numbers (general.file_type) */
enum { FTYPE_ALL_F32 = 0, FTYPE_MOSTLY_F16 = 1, FTYPE_MOSTLY_Q8_0 = 7, FTYPE_MOSTLY_BF16 = 32 };

enum arch_family { FAM_LLAMA, FAM_QWEN2, FAM_QWEN3 };

static const struct {
	const char *hf;         /* config.json architectures[0] */
	const char *gguf;       /* general.architecture */
	enum arch_family fam;
} archs[] = {
	{ "LlamaForCausalLM", "llama", FAM_LLAMA },
	{ "LLaMAForCausalLM", "llama", FAM_LLAMA },
	{ "MistralForCausalLM", "llama", FAM_LLAMA },
	{ "Qwen2ForCausalLM", "qwen2", FAM_QWEN2 },
	{ "Qwen3ForCausalLM", "qwen3", FAM_QWEN3 },
};

/* ==== tensor names ==== */

/* Sizes a tensor's axes are checked against (numpy order, outermost first). */
enum dim { D_NONE, D_HIDDEN, D_Q, D_KV, D_FF, D_HEAD, D_VOCAB };

typedef struct {
	const char *hf;          /* after "model.layers.N." (block) or whole (global), no suffix */
	const char *gguf;        /* after "blk.N." or whole, no suffix */
	enum dim rows, cols;     /* the .weight's shape; a .bias is [rows] */
	bool qwen3_only;
	bool required;
} name_map;

static const name_map global_names[] = {
	{ "model.embed_tokens", "token_embd", D_VOCAB, D_HIDDEN, false, true },
	{ "model.norm", "output_norm", D_HIDDEN, D_NONE, false, true },
	{ "lm_head", "output", D_VOCAB, D_HIDDEN, false, false },
};

static const name_map block_names[] = {
	{ "input_layernorm", "attn_norm", D_HIDDEN, D_NONE, false, true },
	{ "self_attn.q_proj", "attn_q", D_Q, D_HIDDEN, false, true },
	{ "self_attn.k_proj", "attn_k", D_KV, D_HIDDEN, false, true },
	{ "self_attn.v_proj", "attn_v", D_KV, D_HIDDEN, false, true },
	{ "self_attn.o_proj", "attn_output", D_HIDDEN, D_Q, false, true },
	{ "self_attn.q_norm", "attn_q_norm", D_HEAD, D_NONE, true, true },
	{ "self_attn.k_norm", "attn_k_norm", D_HEAD, D_NONE, true, true },
	{ "post_attention_layernorm", "ffn_norm", D_HIDDEN, D_NONE, false, true },
	{ "mlp.gate_proj", "ffn_gate", D_FF, D_HIDDEN, false, true },
	{ "mlp.up_proj", "ffn_up", D_FF, D_HIDDEN, false, true },
	{ "mlp.down_proj", "ffn_down", D_HIDDEN, D_FF, false, true },
};
#define N_BLOCK_NAMES (sizeof block_names / sizeof block_names[0])

/* ==== the plan ==== */

struct tfs_hf_plan {
	const tfs_model *st;
	const char *arch;          /* static */
	enum arch_family fam;
	uint32_t ftype;
	tfs_hf_kvs kvs;
	tfs_hf_tensor *t;
	size_t nt;
	uint8_t **gen;             /* per tensor: the bytes of a generated tensor, else NULL */
	uint64_t header_size, file_size;
};

/* What config.json says, as the checks and keys use it. */
typedef struct {
	const char *where;         /* "dir/config.json" for messages */
	json_t *root;
	int64_t n_layer, n_head, n_kv, hidden, ff, vocab, head_dim;   /* -1: not given */
	bool has_head_dim;
} hparams;

/* A source tensor in the converter's reading order. */
typedef struct {
	const char *shard;         /* the file's name: the converter reads shards in its order */
	const char *path;          /* for messages */
	const char *name;
	size_t idx;
} src_ref;

static int cmp_src(const void *a, const void *b)
{
	const src_ref *x = a, *y = b;
	int c = strcmp(x->shard, y->shard);
	return c ? c : strcmp(x->name, y->name);
}

/* ==== config.json ==== */

/* Python's find_hparam: the value of the first of keys config has (JSON null included), or
 * NULL; *which gets that key. */
static json_t *find_hparam(const json_t *c, const char *const *keys, const char **which)
{
	for (; *keys; keys++) {
		json_t *v = json_object_get(c, *keys);
		if (v) {
			if (which)
				*which = *keys;
			return v;
		}
	}
	return NULL;
}

/* An integer hyperparameter as struct.pack('I') takes it (a bool is 0 or 1). */
static int get_u32(uint32_t *out, const json_t *v, const char *key, const hparams *h,
		   tfs_error *err)
{
	json_int_t i;
	if (json_is_integer(v))
		i = json_integer_value(v);
	else if (json_is_boolean(v))
		i = json_is_true(v);
	else
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not an integer", h->where,
				     key);
	if (i < 0 || i > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is %lld, not a 32-bit unsigned "
				     "integer", h->where, key, (long long)i);
	*out = (uint32_t)i;
	return 0;
}

/* A float hyperparameter as struct.pack('f') takes it. */
static int get_f32(float *out, const json_t *v, const char *key, const hparams *h,
		   tfs_error *err)
{
	double d;
	if (json_is_number(v))
		d = json_number_value(v);
	else if (json_is_boolean(v))
		d = json_is_true(v);
	else
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a number", h->where, key);
	if (isinf((float)d) && !isinf(d))   /* PyFloat_Pack4's OverflowError */
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is %g, too large for float32",
				     h->where, key, d);
	*out = (float)d;
	return 0;
}

static int add_u32_hp(tfs_hf_kvs *l, const char *arch, const char *suffix, const json_t *v,
		      const char *key, const hparams *h, tfs_error *err)
{
	uint32_t x = 0;
	char name[128];
	int rc = get_u32(&x, v, key, h, err);
	if (rc)
		return rc;
	snprintf(name, sizeof name, "%s.%s", arch, suffix);
	return tfs_hf_kvs_add_u32(l, name, x, err);
}

static int add_f32_hp(tfs_hf_kvs *l, const char *arch, const char *suffix, const json_t *v,
		      const char *key, const hparams *h, tfs_error *err)
{
	float x = 0;
	char name[128];
	int rc = get_f32(&x, v, key, h, err);
	if (rc)
		return rc;
	snprintf(name, sizeof name, "%s.%s", arch, suffix);
	return tfs_hf_kvs_add_f32(l, name, x, err);
}

/* An optional size (-1 when absent or null); present, it must be a positive integer. */
static int get_size(int64_t *out, const json_t *c, const char *const *keys, const hparams *h,
		    bool required, tfs_error *err)
{
	const char *which = keys[0];
	json_t *v = find_hparam(c, keys, &which);
	*out = -1;
	if (!v || json_is_null(v)) {
		if (required)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\"", h->where, keys[0]);
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    json_integer_value(v) > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a positive 32-bit "
				     "integer", h->where, which);
	*out = json_integer_value(v);
	return 0;
}

static int read_hparams(hparams *h, tfs_error *err)
{
	static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer",
					       "num_layers", NULL };
	static const char *const k_head[] = { "num_attention_heads", "n_head", NULL };
	static const char *const k_kv[] = { "num_key_value_heads", NULL };
	static const char *const k_hidden[] = { "hidden_size", "n_embd", NULL };
	static const char *const k_ff[] = { "intermediate_size", "n_inner", NULL };
	static const char *const k_vocab[] = { "vocab_size", NULL };
	static const char *const k_hd[] = { "head_dim", NULL };
	int rc;
	if ((rc = get_size(&h->n_layer, h->root, k_layer, h, true, err)) ||
	    (rc = get_size(&h->n_head, h->root, k_head, h, true, err)) ||
	    (rc = get_size(&h->hidden, h->root, k_hidden, h, true, err)) ||
	    (rc = get_size(&h->n_kv, h->root, k_kv, h, false, err)) ||
	    (rc = get_size(&h->ff, h->root, k_ff, h, false, err)) ||
	    (rc = get_size(&h->vocab, h->root, k_vocab, h, false, err)) ||
	    (rc = get_size(&h->head_dim, h->root, k_hd, h, false, err)))
		return rc;
	/* no model has 65536 layers or heads or a head that size; bounds keep the arithmetic
	 * (and what is allocated per layer or head) small */
	static const struct { const char *key; size_t off; } capped[] = {
		{ "num_hidden_layers", offsetof(hparams, n_layer) },
		{ "num_attention_heads", offsetof(hparams, n_head) },
		{ "num_key_value_heads", offsetof(hparams, n_kv) },
		{ "head_dim", offsetof(hparams, head_dim) },
	};
	for (size_t i = 0; i < sizeof capped / sizeof capped[0]; i++) {
		int64_t v = *(const int64_t *)((const char *)h + capped[i].off);
		if (v > 65536)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is %lld, more than any "
					     "model has (65536)", h->where, capped[i].key, (long long)v);
	}
	h->has_head_dim = h->head_dim > 0;
	if (h->n_kv < 0)
		h->n_kv = h->n_head;
	if (!h->has_head_dim) {
		if (h->hidden % h->n_head)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: hidden_size %lld is not a "
					     "multiple of num_attention_heads %lld", h->where,
					     (long long)h->hidden, (long long)h->n_head);
		h->head_dim = h->hidden / h->n_head;
	}
	if (h->n_head % h->n_kv)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: num_attention_heads %lld is not a "
				     "multiple of num_key_value_heads %lld", h->where,
				     (long long)h->n_head, (long long)h->n_kv);
	return 0;
}

/* ==== keys ==== */

/* Model.set_gguf_parameters, then LlamaModel's or Qwen2Model's. */
static int param_keys(tfs_hf_kvs *l, const tfs_hf_plan *p, const hparams *h, tfs_error *err)
{
	static const char *const k_layer[] = { "n_layers", "num_hidden_layers", "n_layer",
					       "num_layers", NULL };
	static const char *const k_ctx[] = { "max_position_embeddings", "n_ctx", NULL };
	static const char *const k_embd[] = { "hidden_size", "n_embd", NULL };
	static const char *const k_ff[] = { "intermediate_size", "n_inner", NULL };
	static const char *const k_head[] = { "num_attention_heads", "n_head", NULL };
	static const char *const k_norm[] = { "layer_norm_eps", "layer_norm_epsilon",
					      "norm_epsilon", NULL };
	static const struct { const char *const *keys; const char *suffix; bool f; } opt[] = {
		{ k_ctx, "context_length", false },
		{ k_embd, "embedding_length", false },
		{ k_ff, "feed_forward_length", false },
		{ k_head, "attention.head_count", false },
	};
	const char *a = p->arch, *which = NULL;
	const json_t *c = h->root;
	json_t *v;
	int rc;

	v = find_hparam(c, k_layer, &which);
	if ((rc = add_u32_hp(l, a, "block_count", v, which, h, err)))
		return rc;
	for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
		v = find_hparam(c, opt[i].keys, &which);
		if (v && !json_is_null(v) &&
		    (rc = add_u32_hp(l, a, opt[i].suffix, v, which, h, err)))
			return rc;
	}
	/* hparams.get(): a key with null is absent */
	static const struct { const char *key, *suffix; bool f; } get[] = {
		{ "num_key_value_heads", "attention.head_count_kv", false },
		{ "rope_theta", "rope.freq_base", true },
		{ "rms_norm_eps", "attention.layer_norm_rms_epsilon", true },
	};
	for (size_t i = 0; i < sizeof get / sizeof get[0]; i++) {
		v = json_object_get(c, get[i].key);
		if (!v || json_is_null(v))
			continue;
		rc = get[i].f ? add_f32_hp(l, a, get[i].suffix, v, get[i].key, h, err)
			      : add_u32_hp(l, a, get[i].suffix, v, get[i].key, h, err);
		if (rc)
			return rc;
	}
	v = find_hparam(c, k_norm, &which);
	if (v && !json_is_null(v) &&
	    (rc = add_f32_hp(l, a, "attention.layer_norm_epsilon", v, which, h, err)))
		return rc;
	if ((v = json_object_get(c, "num_local_experts")) && !json_is_null(v) &&
	    (rc = add_u32_hp(l, a, "expert_count", v, "num_local_experts", h, err)))
		return rc;
	if ((v = json_object_get(c, "num_experts_per_tok")) && !json_is_null(v) &&
	    (rc = add_u32_hp(l, a, "expert_used_count", v, "num_experts_per_tok", h, err)))
		return rc;
	if ((v = json_object_get(c, "head_dim")) && !json_is_null(v) &&
	    ((rc = add_u32_hp(l, a, "attention.key_length", v, "head_dim", h, err)) ||
	     (rc = add_u32_hp(l, a, "attention.value_length", v, "head_dim", h, err))))
		return rc;
	if ((rc = tfs_hf_kvs_add_u32(l, "general.file_type", p->ftype, err)))
		return rc;

	json_t *rs = json_object_get(c, "rope_scaling");
	json_t *factor = json_is_object(rs) ? json_object_get(rs, "factor") : NULL;
	const char *type = factor ? json_string_value(json_object_get(rs, "type")) : NULL;
	char name[128];
	if (p->fam == FAM_LLAMA) {
		if (!json_object_get(c, "vocab_size"))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"vocab_size\"", h->where);
		if ((rc = add_u32_hp(l, a, "vocab_size", json_object_get(c, "vocab_size"),
				     "vocab_size", h, err)))
			return rc;
		/* head_dim when the key is there, else hidden_size // num_attention_heads */
		if (json_object_get(c, "head_dim"))
			rc = add_u32_hp(l, a, "rope.dimension_count", json_object_get(c, "head_dim"),
					"head_dim", h, err);
		else
			rc = (snprintf(name, sizeof name, "%s.rope.dimension_count", a),
			      tfs_hf_kvs_add_u32(l, name, (uint32_t)h->head_dim, err));
		if (rc)
			return rc;
		if (type && strcmp(type, "linear") == 0) {
			snprintf(name, sizeof name, "%s.rope.scaling.type", a);
			if ((rc = tfs_hf_kvs_add_str(l, name, "linear", err)) ||
			    (rc = add_f32_hp(l, a, "rope.scaling.factor", factor,
					     "rope_scaling.factor", h, err)))
				return rc;
		}
	} else if (type && strcmp(type, "yarn") == 0) {
		json_t *orig = json_object_get(rs, "original_max_position_embeddings");
		if (!orig)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: yarn rope_scaling without "
					     "\"original_max_position_embeddings\"", h->where);
		snprintf(name, sizeof name, "%s.rope.scaling.type", a);
		if ((rc = tfs_hf_kvs_add_str(l, name, "yarn", err)) ||
		    (rc = add_f32_hp(l, a, "rope.scaling.factor", factor, "rope_scaling.factor", h,
				     err)) ||
		    (rc = add_u32_hp(l, a, "rope.scaling.original_context_length", orig,
				     "rope_scaling.original_max_position_embeddings", h, err)))
			return rc;
	}
	return 0;
}

/* ==== tensors ==== */

static int64_t dim_size(enum dim d, const hparams *h)
{
	switch (d) {
	case D_HIDDEN: return h->hidden;
	case D_Q: return h->n_head * h->head_dim;
	case D_KV: return h->n_kv * h->head_dim;
	case D_FF: return h->ff;
	case D_HEAD: return h->head_dim;
	case D_VOCAB: return h->vocab;
	default: return 0;
	}
}

static const char *dim_text(enum dim d)
{
	switch (d) {
	case D_HIDDEN: return "hidden_size";
	case D_Q: return "num_attention_heads x head_dim";
	case D_KV: return "num_key_value_heads x head_dim";
	case D_FF: return "intermediate_size";
	case D_HEAD: return "head_dim";
	case D_VOCAB: return "vocab_size";
	default: return "";
	}
}

/* Maps a HF tensor name to its GGUF name (gguf_out) as TensorNameMap does for these
 * architectures; *m gets the table entry, *bid the block (-1 for a global tensor).
 * false when the converter has no name for it. */
static bool map_name(char *gguf_out, size_t cap, const char *name, enum arch_family fam,
		     int64_t n_layer, const name_map **m, long *bid)
{
	const char *suffix = NULL;
	size_t n = strlen(name);
	if (n > 7 && strcmp(name + n - 7, ".weight") == 0)
		suffix = ".weight";
	else if (n > 5 && strcmp(name + n - 5, ".bias") == 0)
		suffix = ".bias";
	if (!suffix)
		return false;
	size_t base = n - strlen(suffix);
	*bid = -1;
	for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++) {
		if (strlen(global_names[i].hf) == base && !strncmp(name, global_names[i].hf, base)) {
			*m = &global_names[i];
			snprintf(gguf_out, cap, "%s%s", global_names[i].gguf, suffix);
			return true;
		}
	}
	static const char prefix[] = "model.layers.";
	if (strncmp(name, prefix, sizeof prefix - 1))
		return false;
	const char *p = name + sizeof prefix - 1;
	char *end;
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
		return false;
	errno = 0;
	unsigned long b = strtoul(p, &end, 10);
	if (errno || *end != '.' || (int64_t)b >= n_layer)
		return false;
	const char *rest = end + 1;
	size_t rlen = (size_t)(name + base - rest);
	for (size_t i = 0; i < N_BLOCK_NAMES; i++) {
		if (block_names[i].qwen3_only && fam != FAM_QWEN3)
			continue;
		if (strlen(block_names[i].hf) == rlen && !strncmp(rest, block_names[i].hf, rlen)) {
			*m = &block_names[i];
			*bid = (long)b;
			snprintf(gguf_out, cap, "blk.%lu.%s%s", b, block_names[i].gguf, suffix);
			return true;
		}
	}
	return false;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void shape_text(char *out, size_t cap, const int64_t *shape, uint32_t n)
{
	size_t k = 0;
	k += (size_t)snprintf(out + k, cap - k, "[");
	for (uint32_t i = 0; i < n && k < cap; i++)
		k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (k < cap)
		snprintf(out + k, cap - k, "]");
}

/* Checks a source tensor's shape (numpy order) against what config.json says. */
static int check_shape(const tfs_tensor *t, const char *shard, const name_map *m, bool bias,
		       const hparams *h, tfs_error *err)
{
	int64_t shape[TFS_MAX_DIMS], want[2];
	uint32_t nd = t->n_dims, wn = 0;
	for (uint32_t i = 0; i < nd; i++)
		shape[i] = t->ne[nd - 1 - i];
	enum dim dims[2] = { m->rows, bias ? D_NONE : m->cols };
	for (int i = 0; i < 2; i++)
		if (dims[i] != D_NONE)
			want[wn++] = dim_size(dims[i], h);
	bool ok = nd == wn;
	for (uint32_t i = 0; ok && i < wn; i++)
		ok = want[i] <= 0 || shape[i] == want[i];   /* <= 0: the config does not say */
	if (ok)
		return 0;
	char got[96], exp[96], what[160] = "";
	shape_text(got, sizeof got, shape, nd);
	for (uint32_t i = 0; i < wn; i++)
		if (want[i] <= 0)
			want[i] = shape[i < nd ? i : 0];
	shape_text(exp, sizeof exp, want, wn);
	snprintf(what, sizeof what, "%s%s%s", dim_text(dims[0]), wn > 1 ? ", " : "",
		 wn > 1 ? dim_text(dims[1]) : "");
	return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has shape %s, but %s says %s "
			     "(%s)", shard, t->name, got, h->where, exp, what);
}

static int out_dtype(uint32_t ftype)
{
	switch (ftype) {
	case FTYPE_ALL_F32: return TFS_DT_F32;
	case FTYPE_MOSTLY_F16: return TFS_DT_F16;
	case FTYPE_MOSTLY_Q8_0: return TFS_DT_Q8_0;
	default: return TFS_DT_BF16;
	}
}

/* The converter's choice of type for tensor gguf_name of n_dims (numpy) dims, ne0 wide. */
static int tensor_dtype(const char *gguf_name, uint32_t n_dims, int64_t ne0, uint32_t ftype)
{
	if (n_dims <= 1 || ends_with(gguf_name, "_norm.weight") || !ends_with(gguf_name, ".weight"))
		return TFS_DT_F32;
	int dt = out_dtype(ftype);
	if (dt == TFS_DT_Q8_0 && ne0 % 32)
		return TFS_DT_F16;   /* QuantError: "falling back to F16" */
	return dt;
}

/* LlamaModel.generate_extra_tensors: the llama3 rope scaling's factors (float32, dim/2). */
static int rope_freqs(float **out, size_t *n, const hparams *h, tfs_error *err)
{
	json_t *rs = json_object_get(h->root, "rope_scaling");
	*out = NULL;
	*n = 0;
	/* find_hparam(["rope_scaling"]) and a truthy value; rope_type compared lowercased */
	if (!json_is_object(rs) || json_object_size(rs) == 0)
		return 0;
	const char *rt = json_string_value(json_object_get(rs, "rope_type"));
	if (!rt || strcasecmp(rt, "llama3") != 0)
		return 0;
	double base = 10000.0, factor = 8.0, lo = 1.0, hi = 4.0, old_ctx = 8192;
	json_t *v;
	if ((v = json_object_get(h->root, "rope_theta")) && json_is_number(v))
		base = json_number_value(v);
	if ((v = json_object_get(rs, "factor")) && json_is_number(v))
		factor = json_number_value(v);
	if ((v = json_object_get(rs, "low_freq_factor")) && json_is_number(v))
		lo = json_number_value(v);
	if ((v = json_object_get(rs, "high_freq_factor")) && json_is_number(v))
		hi = json_number_value(v);
	if ((v = json_object_get(h->root, "original_max_position_embeddings")) &&
	    json_is_number(v))
		old_ctx = json_number_value(v);
	if (!(base > 0))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: llama3 rope_scaling with rope_theta %g",
				     h->where, base);
	if (old_ctx / lo == old_ctx / hi)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: llama3 rope_scaling with equal low and "
				     "high frequency factors", h->where);
	size_t m = (size_t)(h->head_dim + 1) / 2;
	float *f = malloc(m * sizeof *f);
	if (!f)
		return tfs_error_set(err, TFS_E_NOMEM, "rope_freqs: out of memory");
	tfs_hf_llama3_rope(f, h->head_dim, base, factor, lo, hi, old_ctx);
	*out = f;
	*n = m;
	return 0;
}

/* ==== building the plan ==== */

static int add_tensor(tfs_hf_plan *p, size_t *cap, tfs_hf_tensor **t, tfs_error *err)
{
	if (p->nt == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		tfs_hf_tensor *nt = realloc(p->t, c * sizeof *nt);
		uint8_t **ng = realloc(p->gen, c * sizeof *ng);
		if (nt)
			p->t = nt;
		if (ng)
			p->gen = ng;
		if (!nt || !ng)
			return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		*cap = c;
	}
	*t = &p->t[p->nt];
	memset(*t, 0, sizeof **t);
	p->gen[p->nt] = NULL;
	p->nt++;
	return 0;
}

static int plan_tensors(tfs_hf_plan *p, const hparams *h, tfs_error *err)
{
	const tfs_model *st = p->st;
	size_t n = tfs_model_n_tensors(st), ns = 0, cap = 0;
	src_ref *refs = calloc(n ? n : 1, sizeof *refs);
	bool *seen = NULL;
	int rc = 0;
	if (!refs)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	for (size_t i = 0; i < n; i++) {
		const tfs_tensor *t = tfs_model_tensor(st, i);
		if (t->deleted)
			continue;
		const tfs_source *so = tfs_model_source(st, (size_t)t->src);
		refs[ns++] = (src_ref){ tfs_source_label(so), tfs_source_path(so), t->name, i };
	}
	qsort(refs, ns, sizeof *refs, cmp_src);
	if (ns == 0) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: no tensors", tfs_model_path(st));
		goto out;
	}

	/* --outtype auto: the first tensor read */
	if (p->ftype == UINT32_MAX)
		p->ftype = tfs_model_tensor(st, refs[0].idx)->dtype == TFS_DT_F16
			   ? FTYPE_MOSTLY_F16 : FTYPE_MOSTLY_BF16;

	/* generated first */
	float *rf;
	size_t nrf;
	tfs_hf_tensor *o;
	if ((rc = rope_freqs(&rf, &nrf, h, err)))
		goto out;
	if (rf) {
		if ((rc = add_tensor(p, &cap, &o, err))) {
			free(rf);
			goto out;
		}
		o->name = strdup("rope_freqs.weight");
		o->dtype = TFS_DT_F32;
		o->n_dims = 1;
		o->ne[0] = (int64_t)nrf;
		o->nbytes = 4 * nrf;
		o->recipe = TFS_HF_GENERATED;
		o->src = -1;
		o->src_dtype = TFS_DT_F32;
		p->gen[p->nt - 1] = (uint8_t *)rf;
		if (!o->name) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
			goto out;
		}
	}

	if ((uint64_t)h->n_layer > ns) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: %s says num_hidden_layers %lld, but the "
				   "weights hold %zu tensors", tfs_model_path(st), h->where,
				   (long long)h->n_layer, ns);
		goto out;
	}
	/* which required tensors were seen: globals, then blocks x names */
	size_t nseen = 3 + (size_t)h->n_layer * N_BLOCK_NAMES;
	if (!(seen = calloc(nseen, 1))) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		goto out;
	}
	for (size_t k = 0; k < ns; k++) {
		const tfs_tensor *t = tfs_model_tensor(st, refs[k].idx);
		const char *shard = refs[k].path;
		if (ends_with(t->name, ".attention.masked_bias") ||
		    ends_with(t->name, ".attention.bias") || ends_with(t->name, ".rotary_emb.inv_freq"))
			continue;
		char gname[256];
		const name_map *m;
		long bid;
		if (!map_name(gname, sizeof gname, t->name, p->fam, h->n_layer, &m, &bid)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name for "
					   "architecture %s (the converter cannot map it)", shard,
					   t->name, p->arch);
			goto out;
		}
		if (t->dtype != TFS_DT_F32 && t->dtype != TFS_DT_F16 && t->dtype != TFS_DT_BF16) {
			const tfs_dtype_info *di = tfs_dtype(t->dtype);
			rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is %s; the GGUF view "
					   "converts F32, F16 and BF16 weights only", shard, t->name,
					   di ? di->name : "of an unknown type");
			goto out;
		}
		bool bias = ends_with(t->name, ".bias");
		if ((rc = check_shape(t, shard, m, bias, h, err)))
			goto out;
		size_t slot = bid < 0 ? (size_t)(m - global_names)
				      : 3 + (size_t)bid * N_BLOCK_NAMES + (size_t)(m - block_names);
		if (!bias) {
			if (seen[slot]) {
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second '%s'",
						   shard, t->name, gname);
				goto out;
			}
			seen[slot] = 1;
		}
		for (size_t j = 0; j < p->nt; j++)
			if (strcmp(p->t[j].name, gname) == 0) {
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second "
						   "'%s'", shard, t->name, gname);
				goto out;
			}
		if ((rc = add_tensor(p, &cap, &o, err)))
			goto out;
		if (!(o->name = strdup(gname))) {
			rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
			goto out;
		}
		o->n_dims = t->n_dims;
		memcpy(o->ne, t->ne, sizeof o->ne);
		o->src = (long)refs[k].idx;
		o->src_dtype = t->dtype;
		o->dtype = tensor_dtype(gname, t->n_dims, t->ne[0], p->ftype);
		if (p->fam == FAM_LLAMA && (m == &block_names[1] || m == &block_names[2])) {
			/* q_proj with n_head, k_proj with num_key_value_heads */
			o->perm_heads = (uint32_t)(m == &block_names[1] ? h->n_head : h->n_kv);
			int64_t rows = t->ne[t->n_dims - 1];
			if (rows % (2 * (int64_t)o->perm_heads)) {
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %lld rows cannot "
						   "be permuted in %u heads of pairs", shard, t->name,
						   (long long)rows, o->perm_heads);
				goto out;
			}
		}
		o->recipe = o->dtype == o->src_dtype ? TFS_HF_COPY : TFS_HF_CONVERT;
		o->quiet_nans = o->recipe == TFS_HF_COPY && o->dtype == TFS_DT_BF16;
		o->raw = o->recipe == TFS_HF_COPY && o->perm_heads == 0;
		uint64_t nel = 1;
		for (uint32_t d = 0; d < o->n_dims; d++)
			nel *= (uint64_t)o->ne[d];
		if ((rc = tfs_dtype_nbytes(&o->nbytes, o->dtype, nel, err)))
			goto out;
	}

	/* what the architecture needs */
	for (size_t s = 0; s < nseen; s++) {
		const name_map *m = s < 3 ? &global_names[s] : &block_names[(s - 3) % N_BLOCK_NAMES];
		if (seen[s] || !m->required || (m->qwen3_only && p->fam != FAM_QWEN3))
			continue;
		if (s < 3)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: no tensor '%s.weight'",
					   tfs_model_path(st), m->hf);
		else
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: no tensor 'model.layers.%zu.%s."
					   "weight' (%s says num_hidden_layers %lld)",
					   tfs_model_path(st), (s - 3) / N_BLOCK_NAMES, m->hf, h->where,
					   (long long)h->n_layer);
		goto out;
	}
out:
	free(seen);
	free(refs);
	return rc;
}

static uint64_t pad_to(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* Header bytes: what tfs_hf_plan_header writes, without writing it. */
static uint64_t header_bytes(const tfs_hf_plan *p)
{
	uint64_t n = 4 + 4 + 8 + 8;
	for (size_t i = 0; i < p->kvs.n; i++)
		n += 8 + strlen(p->kvs.kv[i].name) + 4 + p->kvs.kv[i].len;
	for (size_t i = 0; i < p->nt; i++)
		n += 8 + strlen(p->t[i].name) + 4 + 8 * (uint64_t)p->t[i].n_dims + 4 + 8;
	return pad_to(n, GGUF_ALIGN);
}

static int layout(tfs_hf_plan *p)
{
	p->header_size = header_bytes(p);
	uint64_t off = p->header_size;
	for (size_t i = 0; i < p->nt; i++) {
		p->t[i].offset = off;
		off += pad_to(p->t[i].nbytes, GGUF_ALIGN);
	}
	p->file_size = off;
	return 0;
}

int tfs_hf_plan_open(tfs_hf_plan **out, const tfs_hf_files *files, const tfs_model *st,
		     const tfs_hf_opts *o, tfs_error *err)
{
	static const tfs_hf_opts defaults = { 0 };
	char where[1024];
	uint8_t *text = NULL;
	uint64_t len = 0;
	hparams h = { 0 };
	tfs_hf_plan *p = NULL;
	int rc;

	*out = NULL;
	if (!o)
		o = &defaults;
	snprintf(where, sizeof where, "%s%sconfig.json", files->where ? files->where : "",
		 files->where ? "/" : "");
	h.where = where;
	if ((rc = files->read(files->ctx, "config.json", &text, &len, err))) {
		if (rc == TFS_E_NOTFOUND)
			tfs_error_set(err, rc, "%s: no such file (a Hugging Face model directory has "
				      "one)", where);
		return rc;
	}
	json_error_t je;
	h.root = json_loadb((const char *)text, (size_t)len, JSON_DECODE_ANY, &je);
	free(text);
	if (!h.root)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not JSON: %s (line %d, column %d)",
				     where, je.text, je.line, je.column);
	if (!json_is_object(h.root)) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: not a JSON object", where);
		goto fail;
	}
	json_t *av = json_object_get(h.root, "architectures");
	const char *hf_arch = json_string_value(json_array_get(av, 0));
	if (!hf_arch) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: no \"architectures\" (a list naming the "
				   "model's class)", where);
		goto fail;
	}
	size_t ai;
	for (ai = 0; ai < sizeof archs / sizeof archs[0]; ai++)
		if (strcmp(archs[ai].hf, hf_arch) == 0)
			break;
	if (ai == sizeof archs / sizeof archs[0]) {
		rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: architecture %s is not supported "
				   "for the GGUF view", where, hf_arch);
		goto fail;
	}
	if ((rc = read_hparams(&h, err)))
		goto fail;

	if (!(p = calloc(1, sizeof *p))) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		goto fail;
	}
	p->st = st;
	p->arch = archs[ai].gguf;
	p->fam = archs[ai].fam;
	switch (o->outtype) {
	case TFS_HF_OUT_F32: p->ftype = FTYPE_ALL_F32; break;
	case TFS_HF_OUT_F16: p->ftype = FTYPE_MOSTLY_F16; break;
	case TFS_HF_OUT_BF16: p->ftype = FTYPE_MOSTLY_BF16; break;
	case TFS_HF_OUT_Q8_0: p->ftype = FTYPE_MOSTLY_Q8_0; break;
	default: p->ftype = UINT32_MAX; break;   /* auto: chosen by the first tensor */
	}
	if ((rc = plan_tensors(p, &h, err)))
		goto fail;

	uint64_t total = 0;
	for (size_t i = 0; i < p->nt; i++) {
		uint64_t nel = 1;
		for (uint32_t d = 0; d < p->t[i].n_dims; d++)
			nel *= (uint64_t)p->t[i].ne[d];
		total += nel;
	}
	tfs_hf_kvs *l = &p->kvs;
	if ((rc = tfs_hf_kvs_add_str(l, "general.architecture", p->arch, err)) ||
	    (rc = tfs_hf_kvs_add_str(l, "general.type", "model", err)) ||
	    (rc = tfs_hf_meta_keys(l, files, h.root, o->dir_name ? o->dir_name : "model",
				   (int64_t)total, err)) ||
	    (rc = param_keys(l, p, &h, err)))
		goto fail;
	/* set_vocab(): the tokenizer's keys (hf_vocab.c) */
	if (!o->no_vocab && (rc = tfs_hf_vocab_keys(l, files, hf_arch, h.root, err)))
		goto fail;
	if ((rc = tfs_hf_kvs_add_u32(l, "general.quantization_version", GGML_QUANT_VERSION, err)))
		goto fail;
	layout(p);
	json_decref(h.root);
	*out = p;
	return 0;
fail:
	json_decref(h.root);
	tfs_hf_plan_free(p);
	return rc;
}

void tfs_hf_plan_free(tfs_hf_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nt; i++) {
		free(p->t[i].name);
		free(p->gen[i]);
	}
	free(p->t);
	free(p->gen);
	tfs_hf_kvs_free(&p->kvs);
	free(p);
}

const char *tfs_hf_plan_arch(const tfs_hf_plan *p) { return p->arch; }
uint32_t tfs_hf_plan_file_type(const tfs_hf_plan *p) { return p->ftype; }
const tfs_hf_kvs *tfs_hf_plan_kvs(const tfs_hf_plan *p) { return &p->kvs; }
size_t tfs_hf_plan_n_tensors(const tfs_hf_plan *p) { return p->nt; }
uint64_t tfs_hf_plan_header_size(const tfs_hf_plan *p) { return p->header_size; }
uint64_t tfs_hf_plan_file_size(const tfs_hf_plan *p) { return p->file_size; }

const tfs_hf_tensor *tfs_hf_plan_tensor(const tfs_hf_plan *p, size_t i)
{
	return i < p->nt ? &p->t[i] : NULL;
}

/* ==== the header ==== */

static int put(tfs_buf *b, uint64_t v, unsigned n)
{
	uint8_t x[8];
	for (unsigned i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	return tfs_buf_append(b, x, n);
}

static int put_str(tfs_buf *b, const char *s)
{
	size_t n = strlen(s);
	return put(b, n, 8) || tfs_buf_append(b, s, n);
}

int tfs_hf_plan_header(tfs_buf *out, const tfs_hf_plan *p, tfs_error *err)
{
	size_t start = out->len;
	int bad = put(out, 0x46554747u, 4) || put(out, 3, 4) || put(out, p->nt, 8) ||
		  put(out, p->kvs.n, 8);
	for (size_t i = 0; !bad && i < p->kvs.n; i++) {
		const tfs_hf_kv *kv = &p->kvs.kv[i];
		bad = put_str(out, kv->name) || put(out, kv->type, 4) ||
		      tfs_buf_append(out, kv->data, (size_t)kv->len);
	}
	uint64_t rel = 0;
	for (size_t i = 0; !bad && i < p->nt; i++) {
		const tfs_hf_tensor *t = &p->t[i];
		bad = put_str(out, t->name) || put(out, t->n_dims, 4);
		for (uint32_t d = 0; !bad && d < t->n_dims; d++)
			bad = put(out, (uint64_t)t->ne[d], 8);
		bad = bad || put(out, (uint32_t)t->dtype, 4) || put(out, rel, 8);
		rel += pad_to(t->nbytes, GGUF_ALIGN);
	}
	while (!bad && (out->len - start) % GGUF_ALIGN)
		bad = put(out, 0, 1);
	if (bad)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: header: out of memory");
	return 0;
}

/* ==== reading a tensor ==== */

/* Elements converted per step: bounds the scratch memory of one read (~160 KiB). */
#define CHUNK_ELEMS 8192

/* The source row output row r of a permuted tensor comes from (LlamaModel.permute:
 * reshape(heads, 2, rows/heads/2, ...).swapaxes(1, 2)). */
static uint64_t perm_row(uint64_t r, uint64_t rows, uint32_t heads)
{
	if (!heads)
		return r;
	uint64_t hd = rows / heads, h = r / hd, j = r % hd;
	return h * hd + (j & 1) * (hd / 2) + j / 2;
}

int tfs_hf_tensor_locate(const tfs_hf_plan *p, size_t i, uint64_t off, uint64_t *src_off,
			 uint64_t *run)
{
	if (i >= p->nt || p->t[i].recipe != TFS_HF_COPY || off >= p->t[i].nbytes)
		return TFS_PASSTHROUGH;
	const tfs_hf_tensor *t = &p->t[i];
	if (!t->perm_heads) {
		*src_off = off;
		*run = t->nbytes - off;
		return 0;
	}
	uint64_t rows = (uint64_t)t->ne[t->n_dims - 1];
	uint64_t row_bytes = t->nbytes / rows, in_row = off % row_bytes;
	*src_off = perm_row(off / row_bytes, rows, t->perm_heads) * row_bytes + in_row;
	*run = row_bytes - in_row;
	return 0;
}

/* Quiets the signalling NaNs among n whole bf16 values at p (gguf-py sets bit 6).  Weights
 * hold no NaN: 4 values at a time are checked for an all-ones exponent first. */
static void quiet_bf16(uint8_t *p, size_t n)
{
	const uint64_t exp = 0x7f807f807f807f80ull, low = 0x0001000100010001ull;
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		uint64_t w;
		memcpy(&w, p + 2 * i, 8);
		uint64_t y = (w & exp) ^ exp;   /* a lane is 0 where the exponent is all ones */
		if (!((y - low) & ~y & 0x8000800080008000ull))
			continue;
		break;
	}
	for (; i < n; i++) {
		uint16_t v = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
		if ((v & 0x7fffu) > 0x7f80u)
			p[2 * i] |= 0x40;   /* bit 6 is in the low byte */
	}
}

static int read_src(const tfs_hf_plan *p, const tfs_hf_tensor *t, uint64_t off, uint64_t len,
		    void *buf, tfs_error *err)
{
	int64_t got = tfs_tensor_read_raw(p->st, (size_t)t->src, off, len, buf, err);
	if (got < 0)
		return (int)got;
	if ((uint64_t)got != len)
		return tfs_error_set(err, TFS_E_IO, "%s: tensor '%s': short read at %llu",
				     tfs_model_path(p->st), tfs_model_tensor(p->st, (size_t)t->src)->name,
				     (unsigned long long)(off + (uint64_t)got));
	return 0;
}

int64_t tfs_hf_tensor_read(const tfs_hf_plan *p, size_t i, uint64_t off, uint64_t len,
			   void *out, tfs_error *err)
{
	if (i >= p->nt)
		return tfs_error_set(err, TFS_E_NOTFOUND, "GGUF view: no tensor %zu", i);
	const tfs_hf_tensor *t = &p->t[i];
	if (off >= t->nbytes)
		return 0;
	if (len > t->nbytes - off)
		len = t->nbytes - off;
	if (t->recipe == TFS_HF_GENERATED) {
		memcpy(out, p->gen[i] + off, (size_t)len);
		return (int64_t)len;
	}
	uint8_t *o = out;
	uint64_t rows = (uint64_t)t->ne[t->n_dims - 1];
	uint64_t inner = 1;   /* elements per source row (the outermost axis) */
	for (uint32_t d = 0; d + 1 < t->n_dims; d++)
		inner *= (uint64_t)t->ne[d];
	const tfs_dtype_info *od = tfs_dtype(t->dtype), *sd = tfs_dtype(t->src_dtype);
	uint64_t ob = od->block_elems, obb = od->block_bytes, ses = sd->block_bytes;
	uint64_t end = off + len;

	if (t->recipe == TFS_HF_COPY) {
		/* bytes map 1:1 within a row: read straight into out */
		uint64_t row_bytes = inner * ses;
		uint64_t pos = off;
		while (pos < end) {
			uint64_t r = pos / row_bytes, in_row = pos % row_bytes;
			uint64_t n = t->perm_heads ? row_bytes - in_row : end - pos;
			if (n > end - pos)
				n = end - pos;
			uint64_t src = perm_row(r, rows, t->perm_heads) * row_bytes + in_row;
			int rc = read_src(p, t, src, n, o + (pos - off), err);
			if (rc)
				return rc;
			pos += n;
		}
		if (t->quiet_nans) {
			/* whole values inside [off, end); a value cut by either end is read whole */
			uint64_t a = (off + 1) / 2 * 2, b = end / 2 * 2;
			if (b > a)
				quiet_bf16(o + (a - off), (size_t)((b - a) / 2));
			uint64_t cut[2] = { off % 2 ? off - 1 : UINT64_MAX,
					    end % 2 ? end - 1 : UINT64_MAX };
			for (int k = 0; k < 2; k++) {
				if (cut[k] == UINT64_MAX || (k == 1 && cut[1] == cut[0]))
					continue;
				uint8_t v[2];
				uint64_t r = cut[k] / row_bytes, in_row = cut[k] % row_bytes;
				uint64_t src = perm_row(r, rows, t->perm_heads) * row_bytes + in_row;
				int rc = read_src(p, t, src, 2, v, err);
				if (rc)
					return rc;
				quiet_bf16(v, 1);
				for (uint64_t x = cut[k]; x < cut[k] + 2; x++)
					if (x >= off && x < end)
						o[x - off] = v[x - cut[k]];
			}
		}
		return (int64_t)len;
	}

	/* convert: whole output blocks, never across a permuted row */
	uint8_t *sbuf = malloc(CHUNK_ELEMS * 4 + CHUNK_ELEMS * 4 + CHUNK_ELEMS * 4);
	if (!sbuf)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	uint32_t *fbuf = (uint32_t *)(sbuf + CHUNK_ELEMS * 4);
	uint8_t *obuf = sbuf + 2 * CHUNK_ELEMS * 4;
	uint64_t u = off / obb, u_end = (end + obb - 1) / obb;
	const uint64_t chunk_units = CHUNK_ELEMS / ob;
	int rc = 0;
	while (u < u_end) {
		uint64_t e = u * ob, r = e / inner, col = e % inner;
		uint64_t n = u_end - u;
		if (n > chunk_units)
			n = chunk_units;
		if (t->perm_heads && n > (inner - col) / ob)
			n = (inner - col) / ob;
		uint64_t src_e = perm_row(r, rows, t->perm_heads) * inner + col;
		if ((rc = read_src(p, t, src_e * ses, n * ob * ses, sbuf, err)))
			break;
		tfs_hf_to_f32(fbuf, sbuf, t->src_dtype, (size_t)(n * ob));
		tfs_hf_from_f32(obuf, t->dtype, fbuf, (size_t)(n * ob));
		uint64_t lo = u * obb, hi = (u + n) * obb;
		uint64_t a = lo > off ? lo : off, b = hi < end ? hi : end;
		memcpy(o + (a - off), obuf + (a - lo), (size_t)(b - a));
		u += n;
	}
	free(sbuf);
	return rc ? rc : (int64_t)len;
}
