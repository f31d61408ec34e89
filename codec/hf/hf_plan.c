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
#include "hf_plan_impl.h"

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

/* ==== the plan's tensors ==== */

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

/* The source tensors in the converter's reading order (shards by file name, then names):
 * *out (allocated), *ns of them. */
static int read_order(src_ref **out, size_t *ns, const tfs_model *st, tfs_error *err)
{
	size_t n = tfs_model_n_tensors(st);
	src_ref *refs = calloc(n ? n : 1, sizeof *refs);
	if (!refs)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	*ns = 0;
	for (size_t i = 0; i < n; i++) {
		const tfs_tensor *t = tfs_model_tensor(st, i);
		if (t->deleted)
			continue;
		const tfs_source *so = tfs_model_source(st, (size_t)t->src);
		refs[(*ns)++] = (src_ref){ tfs_source_label(so), tfs_source_path(so), t->name, i };
	}
	qsort(refs, *ns, sizeof *refs, cmp_src);
	*out = refs;
	if (*ns == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no tensors", tfs_model_path(st));
	return 0;
}

/* rope_freqs.weight (llama3 rope scaling), generated: the first tensor. */
static int add_rope_freqs(tfs_hf_plan *p, size_t *cap, const hparams *h, tfs_error *err)
{
	float *rf;
	size_t nrf;
	tfs_hf_tensor *o;
	int rc = rope_freqs(&rf, &nrf, h, err);
	if (rc || !rf)
		return rc;
	if ((rc = add_tensor(p, cap, &o, err))) {
		free(rf);
		return rc;
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
	return o->name ? 0 : tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
}

/* A source tensor the converter maps: its GGUF name, its row in the name tables, its slot
 * among the required tensors (*slot; *bias: a .bias, not counted), its dtype and shape
 * checked, no second tensor of that name.  TFS_PASSTHROUGH: a tensor the converter skips. */
static int map_source(char gname[256], const name_map **m, size_t *slot, bool *bias,
		      const tfs_hf_plan *p, const hparams *h, const tfs_tensor *t,
		      const char *shard, tfs_error *err)
{
	long bid;
	if (ends_with(t->name, ".attention.masked_bias") ||
	    ends_with(t->name, ".attention.bias") || ends_with(t->name, ".rotary_emb.inv_freq"))
		return TFS_PASSTHROUGH;
	if (!map_name(gname, 256, t->name, p->fam, h->n_layer, m, &bid))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has no GGUF name for "
				     "architecture %s (the converter cannot map it)", shard,
				     t->name, p->arch);
	if (t->dtype != TFS_DT_F32 && t->dtype != TFS_DT_F16 && t->dtype != TFS_DT_BF16) {
		const tfs_dtype_info *di = tfs_dtype(t->dtype);
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' is %s; the GGUF view "
				     "converts F32, F16 and BF16 weights only", shard, t->name,
				     di ? di->name : "of an unknown type");
	}
	*bias = ends_with(t->name, ".bias");
	int rc = check_shape(t, shard, *m, *bias, h, err);
	if (rc)
		return rc;
	*slot = bid < 0 ? (size_t)(*m - global_names)
			: 3 + (size_t)bid * N_BLOCK_NAMES + (size_t)(*m - block_names);
	for (size_t j = 0; j < p->nt; j++)
		if (strcmp(p->t[j].name, gname) == 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second '%s'",
					     shard, t->name, gname);
	return 0;
}

/* Output tensor o of source tensor t: dtype, permutation (llama's q_proj with n_head,
 * k_proj with num_key_value_heads), recipe, size. */
static int fill_tensor(tfs_hf_tensor *o, const tfs_hf_plan *p, const hparams *h,
		       const tfs_tensor *t, const name_map *m, const char *shard, tfs_error *err)
{
	o->n_dims = t->n_dims;
	memcpy(o->ne, t->ne, sizeof o->ne);
	o->src_dtype = t->dtype;
	o->dtype = tensor_dtype(o->name, t->n_dims, t->ne[0], p->ftype);
	if (p->fam == FAM_LLAMA && (m == &block_names[1] || m == &block_names[2])) {
		o->perm_heads = (uint32_t)(m == &block_names[1] ? h->n_head : h->n_kv);
		int64_t rows = t->ne[t->n_dims - 1];
		if (rows % (2 * (int64_t)o->perm_heads))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %lld rows cannot "
					     "be permuted in %u heads of pairs", shard, t->name,
					     (long long)rows, o->perm_heads);
	}
	o->recipe = o->dtype == o->src_dtype ? TFS_HF_COPY : TFS_HF_CONVERT;
	o->quiet_nans = o->recipe == TFS_HF_COPY && o->dtype == TFS_DT_BF16;
	o->raw = o->recipe == TFS_HF_COPY && o->perm_heads == 0;
	uint64_t nel = 1;
	for (uint32_t d = 0; d < o->n_dims; d++)
		nel *= (uint64_t)o->ne[d];
	return tfs_dtype_nbytes(&o->nbytes, o->dtype, nel, err);
}

/* Source tensor r as the converter writes it; seen: the required tensors met so far. */
static int add_source_tensor(tfs_hf_plan *p, size_t *cap, const hparams *h, const src_ref *r,
			     bool *seen, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(p->st, r->idx);
	char gname[256];
	const name_map *m = NULL;
	size_t slot = 0;
	bool bias = false;
	tfs_hf_tensor *o;
	int rc = map_source(gname, &m, &slot, &bias, p, h, t, r->path, err);
	if (rc)
		return rc == TFS_PASSTHROUGH ? 0 : rc;
	if (!bias && seen[slot])
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second '%s'",
				     r->path, t->name, gname);
	seen[slot] |= !bias;
	if ((rc = add_tensor(p, cap, &o, err)))
		return rc;
	if (!(o->name = strdup(gname)))
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	o->src = (long)r->idx;
	return fill_tensor(o, p, h, t, m, r->path, err);
}

/* The first tensor the architecture needs that was not seen, as an error; 0 when none. */
static int check_required(const tfs_hf_plan *p, const hparams *h, const bool *seen,
			  size_t nseen, tfs_error *err)
{
	for (size_t s = 0; s < nseen; s++) {
		const name_map *m = s < 3 ? &global_names[s] : &block_names[(s - 3) % N_BLOCK_NAMES];
		if (seen[s] || !m->required || (m->qwen3_only && p->fam != FAM_QWEN3))
			continue;
		if (s < 3)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no tensor '%s.weight'",
					     tfs_model_path(p->st), m->hf);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no tensor 'model.layers.%zu.%s."
				     "weight' (%s says num_hidden_layers %lld)",
				     tfs_model_path(p->st), (s - 3) / N_BLOCK_NAMES, m->hf, h->where,
				     (long long)h->n_layer);
	}
	return 0;
}

static int plan_tensors(tfs_hf_plan *p, const hparams *h, tfs_error *err)
{
	size_t ns = 0, cap = 0, nseen = 0;
	src_ref *refs = NULL;
	bool *seen = NULL;
	int rc = read_order(&refs, &ns, p->st, err);
	/* --outtype auto: the first tensor read */
	if (!rc && p->ftype == UINT32_MAX)
		p->ftype = tfs_model_tensor(p->st, refs[0].idx)->dtype == TFS_DT_F16
			   ? FTYPE_MOSTLY_F16 : FTYPE_MOSTLY_BF16;
	if (!rc)
		rc = add_rope_freqs(p, &cap, h, err);
	if (!rc && (uint64_t)h->n_layer > ns)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: %s says num_hidden_layers %lld, but the "
				   "weights hold %zu tensors", tfs_model_path(p->st), h->where,
				   (long long)h->n_layer, ns);
	/* which required tensors were seen: globals, then blocks x names */
	nseen = rc ? 0 : 3 + (size_t)h->n_layer * N_BLOCK_NAMES;
	if (!rc && !(seen = calloc(nseen, 1)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	for (size_t k = 0; !rc && k < ns; k++)
		rc = add_source_tensor(p, &cap, h, &refs[k], seen, err);
	if (!rc)
		rc = check_required(p, h, seen, nseen, err);
	free(seen);
	free(refs);
	return rc;
}

/* Header bytes: what tfs_hf_plan_header writes, without writing it. */
static uint64_t header_bytes(const tfs_hf_plan *p)
{
	uint64_t n = 4 + 4 + 8 + 8;
	for (size_t i = 0; i < p->kvs.n; i++)
		n += 8 + strlen(p->kvs.kv[i].name) + 4 + p->kvs.kv[i].len;
	for (size_t i = 0; i < p->nt; i++)
		n += 8 + strlen(p->t[i].name) + 4 + 8 * (uint64_t)p->t[i].n_dims + 4 + 8;
	return tfs_hf_pad(n, GGUF_ALIGN);
}

static int layout(tfs_hf_plan *p)
{
	p->header_size = header_bytes(p);
	uint64_t off = p->header_size;
	for (size_t i = 0; i < p->nt; i++) {
		p->t[i].offset = off;
		off += tfs_hf_pad(p->t[i].nbytes, GGUF_ALIGN);
	}
	p->file_size = off;
	return 0;
}

/* config.json read (h->root), its architecture found in archs (*ai, *hf_arch) and its sizes
 * checked (h); h->where names it. */
static int load_config(hparams *h, size_t *ai, const char **hf_arch, const tfs_hf_files *files,
		       tfs_error *err)
{
	uint8_t *text = NULL;
	uint64_t len = 0;
	int rc = files->read(files->ctx, "config.json", &text, &len, err);
	if (rc) {
		if (rc == TFS_E_NOTFOUND)
			tfs_error_set(err, rc, "%s: no such file (a Hugging Face model directory has "
				      "one)", h->where);
		return rc;
	}
	json_error_t je;
	h->root = json_loadb((const char *)text, (size_t)len, JSON_DECODE_ANY, &je);
	free(text);
	if (!h->root)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not JSON: %s (line %d, column %d)",
				     h->where, je.text, je.line, je.column);
	if (!json_is_object(h->root))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not a JSON object", h->where);
	json_t *av = json_object_get(h->root, "architectures");
	*hf_arch = json_string_value(json_array_get(av, 0));
	if (!*hf_arch)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"architectures\" (a list naming "
				     "the model's class)", h->where);
	for (*ai = 0; *ai < sizeof archs / sizeof archs[0]; (*ai)++)
		if (strcmp(archs[*ai].hf, *hf_arch) == 0)
			break;
	if (*ai == sizeof archs / sizeof archs[0])
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: architecture %s is not supported "
				     "for the GGUF view", h->where, *hf_arch);
	return tfs_hf_read_hparams(h, err);
}

/* The keys in the converter's order: general.architecture, general.type, general.* of the
 * model card, the hyperparameters, the vocab (set_vocab), general.quantization_version. */
static int plan_keys(tfs_hf_plan *p, const tfs_hf_files *files, const hparams *h,
		     const char *hf_arch, const tfs_hf_opts *o, tfs_error *err)
{
	uint64_t total = 0;
	for (size_t i = 0; i < p->nt; i++) {
		uint64_t nel = 1;
		for (uint32_t d = 0; d < p->t[i].n_dims; d++)
			nel *= (uint64_t)p->t[i].ne[d];
		total += nel;
	}
	tfs_hf_kvs *l = &p->kvs;
	int rc;
	if ((rc = tfs_hf_kvs_add_str(l, "general.architecture", p->arch, err)) ||
	    (rc = tfs_hf_kvs_add_str(l, "general.type", "model", err)) ||
	    (rc = tfs_hf_meta_keys(l, files, h->root, o->dir_name ? o->dir_name : "model",
				   (int64_t)total, err)) ||
	    (rc = tfs_hf_param_keys(l, p, h, err)))
		return rc;
	/* set_vocab(): the tokenizer's keys (hf_vocab.c) */
	if (!o->no_vocab && (rc = tfs_hf_vocab_keys(l, files, hf_arch, h->root, err)))
		return rc;
	return tfs_hf_kvs_add_u32(l, "general.quantization_version", GGML_QUANT_VERSION, err);
}

int tfs_hf_plan_open(tfs_hf_plan **out, const tfs_hf_files *files, const tfs_model *st,
		     const tfs_hf_opts *o, tfs_error *err)
{
	static const tfs_hf_opts defaults = { 0 };
	char where[1024];
	hparams h = { .where = where };
	tfs_hf_plan *p = NULL;
	const char *hf_arch = NULL;
	size_t ai = 0;

	*out = NULL;
	if (!o)
		o = &defaults;
	snprintf(where, sizeof where, "%s%sconfig.json", files->where ? files->where : "",
		 files->where ? "/" : "");
	int rc = load_config(&h, &ai, &hf_arch, files, err);
	if (!rc && !(p = calloc(1, sizeof *p)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	if (!rc) {
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
		rc = plan_tensors(p, &h, err);
	}
	if (!rc && !(rc = plan_keys(p, files, &h, hf_arch, o, err)))
		layout(p);
	json_decref(h.root);
	if (rc) {
		tfs_hf_plan_free(p);
		return rc;
	}
	*out = p;
	return 0;
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
