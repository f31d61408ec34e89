/*
 * hf_nvfp4.c - NVFP4 weights repacked to ggml's NVFP4 as the converter's
 * _generate_nvfp4_tensors writes them (hf_nvfp4.h): which tensors, in which order, with
 * which scale tensors, and the reader of their bytes.
 */
#include "hf_nvfp4.h"
#include "hf_convert.h"
#include "hf_names.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== the tensors ==== */

/* The float32 values of st's tensor i (*v allocated, *n of them); inverse: 1 / each, as
 * compressed-tensors' global scales are read (float32 division). */
static int read_values(const tfs_model *st, long i, bool inverse, float **v, size_t *n,
		       tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(st, (size_t)i);
	const tfs_dtype_info *di = tfs_dtype(t->dtype);
	uint64_t nel = 1;
	for (uint32_t d = 0; d < t->n_dims; d++)
		nel *= (uint64_t)t->ne[d];
	if (!di || di->block_elems != 1 || !di->to_f32 || nel > (1u << 20))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s': an NVFP4 scale of "
				     "%s, which the GGUF view does not read", tfs_model_path(st),
				     t->name, di ? di->name : "an unknown type");
	uint8_t *raw = malloc((size_t)nel * di->block_bytes + 1);
	*v = malloc((size_t)(nel ? nel : 1) * 4);
	int64_t got = raw && *v ? tfs_tensor_read_raw(st, (size_t)i, 0, nel * di->block_bytes, raw,
						     err) : tfs_error_set(err, TFS_E_NOMEM,
						     "GGUF view: out of memory");
	if (got >= 0 && (uint64_t)got != nel * di->block_bytes)
		got = tfs_error_set(err, TFS_E_IO, "%s: tensor '%s': short read",
				    tfs_model_path(st), t->name);
	if (got >= 0) {
		if (t->dtype == TFS_DT_F32 || t->dtype == TFS_DT_F16 || t->dtype == TFS_DT_BF16)
			tfs_hf_to_f32((uint32_t *)*v, raw, t->dtype, (size_t)nel);
		else
			di->to_f32(raw, *v, (size_t)nel);
		for (uint64_t k = 0; inverse && k < nel; k++)
			(*v)[k] = 1.0f / (*v)[k];
		*n = (size_t)nel;
	}
	free(raw);
	if (got < 0) {
		free(*v);
		*v = NULL;
	}
	return got < 0 ? (int)got : 0;
}

/* float(x.float().sum()) of a tensor (absent: torch.tensor(1.0)); fold: x * factor first
 * (Gemma 4's folded weight_scale_2, float32 products: gemma4_fold). */
static int sum_of(const tfs_model *st, long i, bool inverse, const float *factor, float *s,
		  tfs_error *err)
{
	float *v = NULL;
	size_t n = 0;
	*s = 1.0f;
	if (i < 0)
		return 0;
	int rc = read_values(st, i, inverse, &v, &n, err);
	if (!rc) {
		*s = 0.0f;
		for (size_t k = 0; k < n; k++)
			*s += factor ? v[k] * *factor : v[k];
	}
	free(v);
	return rc;
}

/* _write_scale_tensor: scale's values, or none when it is one value within 1e-6 of 1 (an
 * absent scale is torch.tensor(1.0)). */
static int one_scale(const tfs_model *st, long i, bool inverse, float **v, size_t *n,
		     tfs_error *err)
{
	*v = NULL;
	*n = 0;
	if (i < 0)
		return 0;
	float *x = NULL;
	size_t k = 0;
	int rc = read_values(st, i, inverse, &x, &k, err);
	if (rc)
		return rc;
	double sum = 0;
	for (size_t j = 0; j < k; j++)
		sum += x[j];
	if (k <= 1 && fabs((k ? (double)x[0] : sum) - 1.0) < 1e-6) {
		free(x);
		return 0;
	}
	*v = x;
	*n = k;
	return 0;
}

/* _write_scales_tensor: the experts' values, or none when numpy's allclose(v, 1.0,
 * atol=1e-6) (|v - 1| <= 1e-6 + 1e-5 each; a NaN is not close). */
static void many_scales(float **v, size_t *n)
{
	bool close = true;
	for (size_t k = 0; close && k < *n; k++)
		close = fabs((double)(*v)[k] - 1.0) <= 1e-6 + 1e-5;
	if (close) {
		free(*v);
		*v = NULL;
		*n = 0;
	}
}

/* A (layer, projection)'s experts kept until all are read. */
typedef struct {
	unsigned long bid;
	char proj[16];
	size_t n, cap;
	unsigned long *xid;
	size_t *k;              /* their weights: positions in w[] */
} pending;

typedef struct {
	tfs_hf_nvfp4_item *it;
	size_t n, cap;
	const tfs_model *st;
	const tfs_hf_deq *deq;
	const hparams *h;
	const size_t *w;
	float *factor;          /* per weight (w[]): Gemma 4's folded factor, where fold[k] */
	bool *fold;
} builder;

static int push(builder *b, tfs_hf_nvfp4_item **o, tfs_error *err)
{
	if (b->n == b->cap) {
		size_t c = b->cap ? 2 * b->cap : 32;
		tfs_hf_nvfp4_item *g = realloc(b->it, c * sizeof *g);
		if (!g)
			return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		b->it = g;
		b->cap = c;
	}
	*o = &b->it[b->n++];
	memset(*o, 0, sizeof **o);
	(*o)->slot = -1;
	return 0;
}

/* A GGUF name's buffer: the size of the stack's (a longer name fails to map, instead of
 * being cut when tensor() copies it; gcc's -Wformat-truncation under -fsanitize said so). */
#define GNAME_MAX sizeof(((tfs_hf_stack *)0)->name)

/* o's tensor: GGUF name gname, experts n (0: not stacked), one's [rows, cols] from weight
 * w's shape, sources parts (n weights, n scales) or weight w0 and scale s0. */
static void tensor(tfs_hf_nvfp4_item *o, const tfs_model *st, const char *gname, size_t w,
		   uint32_t n, long *parts, long w0, long s0, uint32_t heads)
{
	tfs_hf_stack *s = &o->s;
	const tfs_tensor *t = tfs_model_tensor(st, w);
	snprintf(s->name, sizeof s->name, "%s", gname);
	s->shape = *t;
	s->shape.name = s->name;
	s->shape.n_dims = n ? 3 : 2;
	memset(s->shape.ne, 0, sizeof s->shape.ne);
	s->shape.ne[0] = t->ne[0] * 2;
	s->shape.ne[1] = t->ne[1];
	s->shape.ne[2] = n;
	s->parts = parts;
	s->n_parts = n;
	s->src = parts ? parts[0] : w0;
	s->own = (tfs_hf_own){ .kind = TFS_HF_OWN_NVFP4, .stride = 1,
				 .src2 = parts ? -1 : s0, .width = heads };
}

/* The refusal of a name the converter's map_tensor_name has none for. */
static int unmapped(const builder *b, const char *name, tfs_error *err)
{
	return tfs_error_set(err, TFS_E_FORMAT, "%s: NVFP4 tensor '%s' has no GGUF name for "
			     "architecture %s (the converter cannot map it)", tfs_model_path(b->st),
			     name, b->h->arch->gguf);
}

/* One expert's or weight's shape, [rows, cols] values. */
static void shape(const tfs_model *st, size_t w, uint64_t *rows, uint64_t *cols)
{
	const tfs_tensor *t = tfs_model_tensor(st, w);
	*rows = (uint64_t)t->ne[1];
	*cols = (uint64_t)t->ne[0] * 2;
}

static bool ends(const char *s, const char *sfx)
{
	size_t a = strlen(s), b = strlen(sfx);
	return a >= b && !strcmp(s + a - b, sfx);
}

/* An integer hparams[key] (KeyError / not an integer: the converter fails). */
static int need_int(const builder *b, const char *key, int64_t *v, tfs_error *err)
{
	json_t *j;
	int rc = tfs_hf_need(&j, b->h, key, err);
	if (!rc && (!json_is_integer(j) || json_integer_value(j) <= 0))
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is no positive integer",
				   b->h->where, key);
	if (!rc)
		*v = json_integer_value(j);
	return rc;
}

/* Qwen3.5's _transform_nvfp4_weight of weight w named name (o->v: the reorder), or an
 * error where the converter's reshape or assert fails. */
static int v_reorder(const builder *b, size_t w, const char *name, tfs_hf_own *o,
		     tfs_error *err)
{
	static const char *const sfx[] = {
		".linear_attn.in_proj_qkv.weight", ".linear_attn.in_proj_z.weight",
		".linear_attn.in_proj_a.weight", ".linear_attn.in_proj_b.weight",
		".linear_attn.out_proj.weight",
	};
	const char *arch = b->h->arch->gguf;
	int which = -1;
	if (strcmp(arch, "qwen35") && strcmp(arch, "qwen35moe"))
		return 0;
	for (int i = 0; i < 5 && which < 0; i++)
		if (ends(name, sfx[i]))
			which = i;
	if (which < 0)
		return 0;
	int64_t nk, nv, dk, dv;
	int rc = need_int(b, "linear_num_key_heads", &nk, err);
	if (!rc)
		rc = need_int(b, "linear_num_value_heads", &nv, err);
	if (!rc)
		rc = need_int(b, "linear_key_head_dim", &dk, err);
	if (!rc)
		rc = need_int(b, "linear_value_head_dim", &dv, err);
	if (rc)
		return rc;
	const tfs_tensor *t = tfs_model_tensor(b->st, w);
	uint64_t rows = (uint64_t)t->ne[1], cols = (uint64_t)t->ne[0] * 2;
	uint64_t per = (uint64_t)(nv / nk), off = which ? 0 : 2 * (uint64_t)(nk * dk);
	uint64_t dim = which <= 1 || which == 4 ? (uint64_t)dv : 1;
	uint64_t have = which == 4 ? cols : rows;
	const char *bad = NULL;
	if (have < off || have - off != (uint64_t)nk * per * dim)
		bad = "the value heads' reshape";   /* reshape(..., k, per, dim) */
	else if (which == 4 && dim % 16)
		bad = "apply_col_perm's assert (value head dim not a multiple of 16)";
	if (bad)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: NVFP4 tensor '%s' (%llu x %llu) of "
				     "class %s: the converter's _transform_nvfp4_weight fails at %s",
				     tfs_model_path(b->st), name, (unsigned long long)rows,
				     (unsigned long long)cols, b->h->arch->classes[0], bad);
	o->v.off = (uint32_t)off;
	o->v.k = (uint32_t)nk;
	o->v.per = (uint32_t)per;
	o->v.dim = (uint32_t)(which == 4 ? dim / 16 : dim);
	o->v.cols = which == 4;
	return 0;
}

/* _repack_nvfp4: weight k written at once under its mapped name (LlamaModel: q/k rows
 * permuted as the row's name table says; Qwen3.5: value heads reordered), with its scale
 * tensors. */
static int single(builder *b, size_t k, const char *name, tfs_error *err)
{
	tfs_hf_nvfp4_item *o;
	const tfs_hf_nvfp4_src *s = tfs_hf_deq_nvfp4(b->deq, b->w[k]);
	const tfs_hf_arch *row = b->h->arch;
	const tfs_hf_name *m = NULL;
	long bid;
	char gname[GNAME_MAX];
	if (!tfs_hf_map_name(gname, sizeof gname, name, row, b->h->n_layer, &m, &bid))
		return unmapped(b, name, err);
	uint32_t heads = m->xform == TFS_HF_XF_PERMUTE_Q ? (uint32_t)b->h->n_head
			 : m->xform == TFS_HF_XF_PERMUTE_K ? (uint32_t)b->h->n_kv : 0;
	uint64_t rows = (uint64_t)tfs_model_tensor(b->st, b->w[k])->ne[1];
	if (heads && rows % (2 * heads))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %llu rows cannot be "
				     "permuted in %u heads of pairs", tfs_model_path(b->st), name,
				     (unsigned long long)rows, heads);
	int rc = push(b, &o, err);
	if (rc)
		return rc;
	tensor(o, b->st, gname, b->w[k], 0, NULL, (long)b->w[k], s->scale, heads);
	if ((rc = v_reorder(b, b->w[k], name, &o->s.own, err)))
		return rc;
	o->slot = bid < 0 ? (long)(m - row->globals)
			  : (long)(row->n_globals + (size_t)bid * row->n_blocks +
				   (size_t)(m - row->blocks));
	rc = one_scale(b->st, s->scale2, s->inverse, &o->scale, &o->n_scale, err);
	if (!rc)
		rc = one_scale(b->st, s->input, s->inverse, &o->input, &o->n_input, err);
	return rc;
}

/* The GGUF name of layer bid's stacked projection proj (map_tensor_name of
 * model.layers.B.mlp.experts.P.weight: the row's experts), or false. */
static bool stack_name(char *out, size_t cap, const tfs_hf_arch *row, unsigned long bid,
		       const char *proj)
{
	static const char *const hf[] = { "gate_proj", "up_proj", "down_proj" };
	static const char *const gguf[] = { "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps" };
	const tfs_hf_moe *moe = row->moe;
	/* Gemma 4 (no stacking row: its checkpoints stack their experts): gguf-py's names of
	 * model.layers.B.mlp.experts.P, which MODEL_ARCH.GEMMA4 has */
	for (int k = 0; !moe && !strcmp(row->gguf, "gemma4") && k < 3; k++)
		if (!strcmp(hf[k], proj)) {
			snprintf(out, cap, "blk.%lu.%s.weight", bid, gguf[k]);
			return true;
		}
	for (int k = 0; moe && !strcmp(moe->experts, "mlp.experts") && k < 3; k++)
		if (!strcmp(moe->proj[k], proj)) {
			snprintf(out, cap, "blk.%lu.%s.weight", bid, moe->gguf[k]);
			return true;
		}
	return false;
}

/* _flush_nvfp4_experts: p's experts stacked in expert order, with their scale tensors. */
static int flush(builder *b, pending *p, tfs_error *err)
{
	tfs_hf_nvfp4_item *o;
	char name[160], gname[GNAME_MAX];
	snprintf(name, sizeof name, "model.layers.%lu.mlp.experts.%s.weight", p->bid, p->proj);
	if (!stack_name(gname, sizeof gname, b->h->arch, p->bid, p->proj) ||
	    (int64_t)p->bid >= b->h->n_layer)
		return unmapped(b, name, err);
	int rc = push(b, &o, err);
	if (rc)
		return rc;
	for (size_t i = 1; i < p->n; i++)   /* stable, as list.sort by expert id */
		for (size_t j = i; j > 0 && p->xid[j - 1] > p->xid[j]; j--) {
			unsigned long x = p->xid[j];
			size_t y = p->k[j];
			p->xid[j] = p->xid[j - 1], p->k[j] = p->k[j - 1];
			p->xid[j - 1] = x, p->k[j - 1] = y;
		}
	long *parts = malloc(2 * p->n * sizeof *parts);
	o->scale = malloc(p->n * sizeof *o->scale);
	o->input = malloc(p->n * sizeof *o->input);
	if (!parts || !o->scale || !o->input) {
		free(parts);
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	}
	o->n_scale = o->n_input = p->n;
	/* the first expert read gives the shape; np.stack refuses another */
	size_t first = p->k[0];
	for (size_t j = 1; j < p->n; j++)
		first = p->k[j] < first ? p->k[j] : first;
	uint64_t rows, cols;
	shape(b->st, b->w[first], &rows, &cols);
	tensor(o, b->st, gname, b->w[first], (uint32_t)p->n, parts, -1, -1, 0);
	for (size_t j = 0; !rc && j < p->n; j++) {
		size_t w = b->w[p->k[j]];
		const tfs_hf_nvfp4_src *s = tfs_hf_deq_nvfp4(b->deq, w);
		uint64_t r, c;
		shape(b->st, w, &r, &c);
		if (r != rows || c != cols)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: NVFP4 expert '%s' has not the "
					     "shape of its layer's other experts (np.stack fails)",
					     tfs_model_path(b->st),
					     tfs_model_tensor(b->st, w)->name);
		parts[j] = (long)w;
		parts[p->n + j] = s->scale;
		const float *f = b->fold && b->fold[p->k[j]] ? &b->factor[p->k[j]] : NULL;
		rc = sum_of(b->st, s->scale2, s->inverse, f, &o->scale[j], err);
		if (!rc)
			rc = sum_of(b->st, s->input, s->inverse, NULL, &o->input[j], err);
	}
	if (!rc) {
		many_scales(&o->scale, &o->n_scale);
		many_scales(&o->input, &o->n_input);
	}
	p->n = 0;
	return rc;
}

static void pending_free(pending *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].xid);
		free(p[i].k);
	}
	free(p);
}

/* The pending experts of (bid, proj) (*pend: the keys in first-seen order, as a dict's; a
 * flushed key's next experts are a new key), room made for one more. */
static int keep(pending **out, pending **pend, size_t *np, size_t *pcap, unsigned long bid,
		const char *proj, tfs_error *err)
{
	pending *p = NULL;
	for (size_t j = 0; j < *np && !p; j++)
		if ((*pend)[j].bid == bid && !strcmp((*pend)[j].proj, proj) && (*pend)[j].n)
			p = &(*pend)[j];
	if (!p) {
		if (*np == *pcap) {
			size_t c = *pcap ? 2 * *pcap : 16;
			pending *g = realloc(*pend, c * sizeof *g);
			if (!g)
				return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
			*pend = g;
			*pcap = c;
		}
		p = &(*pend)[(*np)++];
		memset(p, 0, sizeof *p);
		p->bid = bid;
		snprintf(p->proj, sizeof p->proj, "%s", proj);
	}
	if (p->n == p->cap) {
		size_t c = p->cap ? 2 * p->cap : 16;
		unsigned long *x = realloc(p->xid, c * sizeof *x);
		if (x)
			p->xid = x;
		size_t *y = x ? realloc(p->k, c * sizeof *y) : NULL;
		if (y)
			p->k = y;
		if (!x || !y)
			return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		p->cap = c;
	}
	*out = p;
	return 0;
}

/* ==== Gemma 4's fold ==== */

bool tfs_hf_nvfp4_fold_source(const hparams *h, const char *name)
{
	return !strcmp(h->arch->gguf, "gemma4") && ends(name, ".router.per_expert_scale");
}

/* The length of name's prefix through its first `.layers.B.` (re.search's), or 0. */
static size_t layer_prefix(const char *name)
{
	for (const char *p = strstr(name, ".layers."); p; p = strstr(p + 1, ".layers.")) {
		const char *q = p + 8;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q > p + 8 && *q == '.')
			return (size_t)(q + 1 - name);
	}
	return 0;
}

/* The expert e of name when it is prefix + "experts.{e}.down_proj.weight" (e as Python
 * prints an int), else -1. */
static int64_t down_expert(const char *name, const char *prefix, size_t plen)
{
	static const char sfx[] = ".down_proj.weight";
	if (strncmp(name, prefix, plen) || strncmp(name + plen, "experts.", 8))
		return -1;
	const char *d = name + plen + 8, *q = d;
	while (*q >= '0' && *q <= '9')
		q++;
	if (q == d || q - d > 18 || (*d == '0' && q - d > 1) || strcmp(q, sfx))
		return -1;
	return (int64_t)strtoll(d, NULL, 10);
}

/* Whether torch's s * r[e] is float32 (what the fold is read as here): s float32 (or
 * compressed-tensors' reciprocal, float32), or a 0-d s promoted with r to float32. */
static bool f32_product(const tfs_tensor *s, bool inverse, const tfs_tensor *r)
{
	if (inverse || s->dtype == TFS_DT_F32)
		return true;
	bool half = s->dtype == TFS_DT_BF16 || s->dtype == TFS_DT_F16;
	return half && s->n_dims == 0 && (r->dtype == TFS_DT_F32 || r->dtype != s->dtype);
}

/*
 * Gemma4Model._generate_nvfp4_tensors before the NVFP4 path: each router.per_expert_scale
 * r (others o[j], named onames[j], in reading order) of a layer
 * whose experts 0..n_experts-1 all have a down_proj weight_scale_2 (here: NVFP4 down_proj
 * weights with one) is popped (popped[j]: not written as ffn_down_exps.scale) and expert
 * e's weight_scale_2 becomes s * r[e] (b->fold, b->factor; float32 in the converter's dtypes
 * here, else refused); some experts without: its assert ("partial NVFP4 quantization").
 */
static int gemma4_fold(builder *b, int64_t n_experts, char *const *names, size_t nw,
		       const size_t *o, char *const *onames, size_t no, bool *popped,
		       tfs_error *err)
{
	int rc = 0;
	for (size_t j = 0; !rc && j < no; j++) {
		size_t plen = layer_prefix(onames[j]), have = 0;
		if (!plen || n_experts <= 0)
			continue;
		for (size_t k = 0; k < nw; k++) {
			int64_t e = down_expert(names[k], onames[j], plen);
			have += e >= 0 && e < n_experts &&
				tfs_hf_deq_nvfp4(b->deq, b->w[k])->scale2 >= 0;
		}
		if (!have)
			continue;
		if ((int64_t)have < n_experts)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: '%s': %zu of %lld experts' "
					     "down_proj have a weight_scale_2 (the converter's "
					     "assert: partial NVFP4 quantization across experts)",
					     tfs_model_path(b->st), onames[j], have,
					     (long long)n_experts);
		const tfs_tensor *rt = tfs_model_tensor(b->st, o[j]);
		float *r = NULL;
		size_t rn = 0;
		if (rt->n_dims != 1 || (rt->dtype != TFS_DT_F32 && rt->dtype != TFS_DT_BF16 &&
					rt->dtype != TFS_DT_F16))
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s': a "
					     "router.per_expert_scale that is not one F32, BF16 or "
					     "F16 value an expert is not folded into NVFP4 scales by "
					     "the GGUF view", tfs_model_path(b->st), rt->name);
		if ((rc = read_values(b->st, (long)o[j], false, &r, &rn, err)))
			return rc;
		for (size_t k = 0; !rc && k < nw; k++) {
			int64_t e = down_expert(names[k], onames[j], plen);
			const tfs_hf_nvfp4_src *s = tfs_hf_deq_nvfp4(b->deq, b->w[k]);
			if (e < 0 || e >= n_experts || s->scale2 < 0)
				continue;
			const tfs_tensor *st2 = tfs_model_tensor(b->st, (size_t)s->scale2);
			if ((uint64_t)e >= rn)
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has %zu values, "
						   "not one for expert %lld (the converter's fold "
						   "fails: index out of range)", tfs_model_path(b->st),
						   rt->name, rn, (long long)e);
			else if (!f32_product(st2, s->inverse, rt))
				rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: tensor '%s' (%s) times "
						   "'%s' (%s) is not float32 in torch: the GGUF view "
						   "does not fold it", tfs_model_path(b->st),
						   st2->name, tfs_dtype(st2->dtype)->name, rt->name,
						   tfs_dtype(rt->dtype)->name);
			else {
				b->fold[k] = true;
				b->factor[k] = r[e];
			}
		}
		free(r);
		popped[j] = true;
	}
	return rc;
}

/* _generate_nvfp4_tensors of ModelBase (the items, in b). */
static int items(builder *b, int64_t n_experts, char *const *names, size_t nw, tfs_error *err)
{
	pending *pend = NULL;   /* keys in first-seen order (a dict's) */
	size_t np = 0, pcap = 0;
	regex_t ex, ly;
	if (regcomp(&ex, "\\.experts\\.([0-9]+)\\.(gate_proj|up_proj|down_proj)\\.weight$",
		    REG_EXTENDED))
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	if (regcomp(&ly, "\\.layers\\.([0-9]+)\\.", REG_EXTENDED)) {
		regfree(&ex);
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	}
	int rc = 0;
	for (size_t k = 0; !rc && k < nw; k++) {
		regmatch_t m[3], l[2];
		if (regexec(&ex, names[k], 3, m, 0)) {
			rc = single(b, k, names[k], err);
			continue;
		}
		unsigned long xid = strtoul(names[k] + m[1].rm_so, NULL, 10);
		unsigned long bid = regexec(&ly, names[k], 2, l, 0) ? 0
				    : strtoul(names[k] + l[1].rm_so, NULL, 10);
		char proj[16];
		snprintf(proj, sizeof proj, "%.*s", (int)(m[2].rm_eo - m[2].rm_so),
			 names[k] + m[2].rm_so);
		pending *p = NULL;
		if ((rc = keep(&p, &pend, &np, &pcap, bid, proj, err)))
			break;
		p->xid[p->n] = xid;
		p->k[p->n++] = k;
		if (n_experts > 0 && (int64_t)p->n >= n_experts)
			rc = flush(b, p, err);
	}
	for (size_t j = 0; !rc && j < np; j++)   /* the fallback: what is left, in key order */
		if (pend[j].n)
			rc = flush(b, &pend[j], err);
	pending_free(pend, np);
	regfree(&ex);
	regfree(&ly);
	return rc;
}

int tfs_hf_nvfp4_items(tfs_hf_nvfp4_item **out, size_t *n, const tfs_model *st,
		       const tfs_hf_deq *deq, const hparams *h, const size_t *w,
		       char *const *names, size_t nw, const size_t *o, char *const *onames,
		       size_t no, bool *popped, tfs_error *err)
{
	static const char *const k_experts[] = { "num_local_experts", "num_experts", NULL };
	json_t *ne = tfs_hf_find(h->root, k_experts, NULL);
	int64_t n_experts = json_is_integer(ne) ? json_integer_value(ne) : 0;
	builder b = { .st = st, .deq = deq, .h = h, .w = w };
	*out = NULL;
	*n = 0;
	if (no) {   /* Gemma 4: its own _generate_nvfp4_tensors first */
		b.fold = calloc(nw ? nw : 1, sizeof *b.fold);
		b.factor = calloc(nw ? nw : 1, sizeof *b.factor);
		int rc = !b.fold || !b.factor ? tfs_error_set(err, TFS_E_NOMEM,
							      "GGUF view: out of memory")
		       : gemma4_fold(&b, n_experts, names, nw, o, onames, no, popped, err);
		if (rc) {
			free(b.fold);
			free(b.factor);
			return rc;
		}
	}
	int rc = items(&b, n_experts, names, nw, err);
	free(b.fold);
	free(b.factor);
	if (rc) {
		tfs_hf_nvfp4_items_free(b.it, b.n);
		return rc;
	}
	*out = b.it;
	*n = b.n;
	return 0;
}

void tfs_hf_nvfp4_items_free(tfs_hf_nvfp4_item *it, size_t n)
{
	for (size_t i = 0; it && i < n; i++) {
		free(it[i].s.parts);
		free(it[i].scale);
		free(it[i].input);
	}
	free(it);
}

/* ==== reading ==== */

#define STEP_BYTES (256u << 10)   /* output bytes a step: whole rows, at least one */


/* _reorder_v_heads: the source index of output index r ([k][per][dim] from v.off taken as
 * [per][k][dim]). */
static uint64_t v_src(uint64_t r, const tfs_hf_own *o)
{
	uint64_t k = o->v.k, d = o->v.dim;
	if (!d || r < o->v.off)
		return r;
	r -= o->v.off;
	return o->v.off + (r / d % k) * o->v.per * d + r / (k * d) * d + r % d;
}

/* LlamaModel.permute of R rows in `heads` heads: the source row of output row r. */
static uint64_t src_row(uint64_t r, uint64_t R, uint32_t heads)
{
	if (!heads)
		return r;
	uint64_t per = R / heads, half = per / 2, h = r / per, x = r % per;
	return h * per + (x % 2) * half + x / 2;
}

/* One row: nb blocks of 16 values, w (8 bytes a block) and sc (a code a block), as
 * _nvfp4_pack writes it: per 4 blocks, their scales & 0x7f, then per block byte j = value j
 * | value j + 8 << 4. */
static void pack_row(uint8_t *o, const uint8_t *w, const uint8_t *sc, uint64_t nb)
{
	for (uint64_t s = 0; s < nb / 4; s++, o += 36) {
		for (int b = 0; b < 4; b++) {
			const uint8_t *x = w + (s * 4 + (uint64_t)b) * 8;
			o[b] = sc[s * 4 + (uint64_t)b] & 0x7f;
			for (int j = 0; j < 8; j++) {
				int sh = (j & 1) * 4;
				o[4 + b * 8 + j] = (uint8_t)(((x[j >> 1] >> sh) & 15) |
							     ((x[4 + (j >> 1)] >> sh) & 15) << 4);
			}
		}
	}
}

/* Output rows [g, g + n) (all of one expert) of an NVFP4 tensor ne into o. */
static int rows_nvfp4(const tfs_model *st, const long *wt, const long *st2,
		      const tfs_hf_own *own, const int64_t *ne, uint64_t g, uint64_t n, uint8_t *o,
		      tfs_error *err)
{
	uint64_t cols = (uint64_t)ne[0], R = (uint64_t)ne[1], nb = cols / 16;
	uint64_t e = g / R, r0 = g % R, rb = nb / 4 * 36;
	long w = wt[e], s = st2[e];
	uint32_t heads = own->width;
	bool vrows = own->v.dim && !own->v.cols, vcols = own->v.dim && own->v.cols;
	uint64_t run = heads || vrows ? 1 : n;   /* source rows read at once */
	uint8_t *buf = malloc((size_t)(run * (nb * 8 + nb) + (vcols ? nb * 9 : 0)));
	if (!buf)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	uint8_t *sc = buf + run * nb * 8, *tw = sc + run * nb, *ts = tw + nb * 8;
	int rc = 0;
	for (uint64_t i = 0; !rc && i < n; i += run) {
		uint64_t sr = vrows ? v_src(r0 + i, own) : src_row(r0 + i, R, heads);
		rc = tfs_tensor_read_exact(st, (size_t)w, sr * nb * 8, run * nb * 8, buf, err);
		if (!rc)
			rc = tfs_tensor_read_exact(st, (size_t)s, sr * nb, run * nb, sc, err);
		for (uint64_t k = 0; !rc && k < run; k++) {
			const uint8_t *x = buf + k * nb * 8, *y = sc + k * nb;
			if (vcols) {   /* apply_col_perm: blocks of 16 columns, with their scales */
				for (uint64_t j = 0; j < nb; j++) {
					uint64_t f = v_src(j, own);
					memcpy(tw + j * 8, x + f * 8, 8);
					ts[j] = y[f];
				}
				x = tw, y = ts;
			}
			pack_row(o + (i + k) * rb, x, y, nb);
		}
	}
	free(buf);
	return rc;
}

int tfs_hf_nvfp4_read(const tfs_model *st, const long *w, const long *s, const tfs_hf_own *own,
		      const int64_t *ne, uint64_t off, uint64_t end, uint8_t *o, tfs_error *err)
{
	uint64_t R = (uint64_t)ne[1], rb = (uint64_t)ne[0] / 64 * 36;
	uint64_t per = STEP_BYTES / rb ? STEP_BYTES / rb : 1;
	uint8_t *buf = malloc((size_t)(per * rb));
	if (!buf)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	int rc = 0;
	for (uint64_t g = off / rb; !rc && g * rb < end;) {
		uint64_t n = (end - g * rb + rb - 1) / rb;
		if (n > per)
			n = per;
		if (n > R - g % R)   /* one expert a step */
			n = R - g % R;
		rc = rows_nvfp4(st, w, s, own, ne, g, n, buf, err);
		uint64_t lo = g * rb, hi = (g + n) * rb;
		uint64_t a = lo > off ? lo : off, b = hi < end ? hi : end;
		if (!rc)
			memcpy(o + (a - off), buf + (a - lo), (size_t)(b - a));
		g += n;
	}
	free(buf);
	return rc;
}
