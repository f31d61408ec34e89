/*
 * hf_plan.c - what convert_hf_to_gguf.py (llama.cpp de3ff81) writes for a Hugging Face model,
 * and its tensors' bytes.  What differs between architectures is in their rows
 * (tfs_hf_archs[], hf_arch.h).
 *
 * The converter (ModelBase.__init__, prepare_tensors, prepare_metadata, TextModel):
 *  1. hparams = AutoConfig's to_dict() of config.json (hf_params.c); the class by
 *     architectures[0] (text_config's when it names one);
 *  2. --outtype auto: MOSTLY_BF16 or MOSTLY_F16 as the first tensor of 2+ dims is BF16 or
 *     F16 (F32 ones passed over), MOSTLY_F16 when none is;
 *  3. tensors: a generated rope_freqs (llama3 rope scaling, LlamaModel), then per shard file
 *     (sorted) its tensors in safetensors' keys() order (sorted); multimodal tensors skipped
 *     and "language_model." removed (filter_tensors); names ending .rotary_emb.inv_freq,
 *     .attention.bias, .attention.masked_bias dropped; BF16 (any dtype but F16/F32) widened
 *     to F32; the row's transforms (llama's q_proj/k_proj rows permuted, Gemma's norms + 1);
 *     the name mapped (gguf-py TensorNameMap, the row's table);
 *  4. type: 1-D tensors, *_norm.weight and anything not .weight F32; else the file type's;
 *     Q8_0 rows that are not whole blocks fall back to F16;
 *  5. keys: general.architecture, general.type, general.* (hf_meta.c), the hyperparameters
 *     (TextModel.set_gguf_parameters, then the class's), general.quantization_version, the
 *     vocab (hf_vocab.h).
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
#include "hf_moe.h"
#include "hf_names.h"
#include "hf_nvfp4.h"
#include "hf_vocab.h"

/* ==== the plan's tensors ==== */

typedef tfs_hf_src_ref src_ref;

static int cmp_src(const void *a, const void *b)
{
	const src_ref *x = a, *y = b;
	if (x->late != y->late)
		return x->late ? 1 : -1;
	int c = strcmp(x->shard, y->shard);
	return c ? c : strcmp(x->name, y->name);
}

/* ==== tensors ==== */

static int64_t dim_size(int d, const hparams *h)
{
	const struct tfs_hf_hooks *hk = h->arch->hooks;
	if (d >= TFS_HF_D_ROW)   /* the row's own kind */
		return hk && hk->dim ? hk->dim(d, h) : 0;
	switch (d) {
	case TFS_HF_D_HIDDEN: return h->hidden;
	case TFS_HF_D_Q: return h->n_head * h->head_dim;
	case TFS_HF_D_KV: return h->n_kv * h->head_dim;
	case TFS_HF_D_FF: return h->ff;
	case TFS_HF_D_HEAD: return h->head_dim;
	case TFS_HF_D_VOCAB: return h->vocab;
	case TFS_HF_D_QKV: return (h->n_head + 2 * h->n_kv) * h->head_dim;
	case TFS_HF_D_FF2: return h->ff > 0 ? 2 * h->ff : -1;
	default: return tfs_hf_moe_dim(d, h);   /* MoE (hf_moe.c) */
	}
}

static const char *dim_text(int d, const hparams *h)
{
	const struct tfs_hf_hooks *hk = h->arch->hooks;
	if (d >= TFS_HF_D_ROW)   /* the row's own kind */
		return hk && hk->dim_text ? hk->dim_text(d) : "";
	switch (d) {
	case TFS_HF_D_HIDDEN: return "hidden_size";
	case TFS_HF_D_Q: return "num_attention_heads x head_dim";
	case TFS_HF_D_KV: return "num_key_value_heads x head_dim";
	case TFS_HF_D_FF: return "intermediate_size";
	case TFS_HF_D_HEAD: return "head_dim";
	case TFS_HF_D_VOCAB: return "vocab_size";
	case TFS_HF_D_QKV: return "(num_attention_heads + 2 x num_key_value_heads) x head_dim";
	case TFS_HF_D_FF2: return "2 x intermediate_size";
	case TFS_HF_D_EXPERTS: return "num_local_experts";
	case TFS_HF_D_FF_EXP: return "moe_intermediate_size";
	case TFS_HF_D_FF_SHEXP: return "shared_expert_intermediate_size";
	case TFS_HF_D_ONE: return "1";
	default: return "";
	}
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
static int check_shape(const tfs_tensor *t, const char *shard, const tfs_hf_name *m, bool bias,
		       const hparams *h, tfs_error *err)
{
	int64_t shape[TFS_MAX_DIMS], want[2];
	uint32_t nd = t->n_dims, wn = 0;
	if (m->rows == TFS_HF_D_LAYER && m->cols == TFS_HF_D_LAYER)
		return 0;   /* any shape: a row whose sizes differ per layer (Gemma 4) */
	if (m->rows == TFS_HF_D_HOOK)
		return 0;   /* the row's fix hook checks it */
	for (uint32_t i = 0; i < nd; i++)
		shape[i] = t->ne[nd - 1 - i];
	int dims[2] = { m->rows, bias ? TFS_HF_D_NONE : m->cols };
	for (int i = 0; i < 2; i++)
		if (dims[i] != TFS_HF_D_NONE)
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
	snprintf(what, sizeof what, "%s%s%s", dim_text(dims[0], h), wn > 1 ? ", " : "",
		 wn > 1 ? dim_text(dims[1], h) : "");
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

/* The converter's choice of type for tensor gguf_name of n_dims (numpy) dims, ne0 wide;
 * q8: tensor_force_quant's Q8_0 (--fp8-as-q8), which only 1-D and norms override. */
static int tensor_dtype(const char *gguf_name, uint32_t n_dims, int64_t ne0, uint32_t ftype,
			bool q8)
{
	if (n_dims <= 1 || ends_with(gguf_name, "_norm.weight"))
		return TFS_DT_F32;
	if (!q8 && !ends_with(gguf_name, ".weight"))
		return TFS_DT_F32;
	/* POS_EMBD, TOKEN_TYPES (BERT) stay F32 */
	if (!strcmp(gguf_name, "position_embd.weight") || !strcmp(gguf_name, "token_types.weight"))
		return TFS_DT_F32;
	/* MoE: the routers (FFN_GATE_INP, FFN_GATE_INP_SHEXP) stay F32 */
	if (!q8 && (ends_with(gguf_name, ".ffn_gate_inp.weight") ||
		    ends_with(gguf_name, ".ffn_gate_inp_shexp.weight")))
		return TFS_DT_F32;
	int dt = q8 ? TFS_DT_Q8_0 : out_dtype(ftype);
	if (dt == TFS_DT_Q8_0 && ne0 % 32)
		return TFS_DT_F16;   /* QuantError: "falling back to F16" */
	return dt;
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
int tfs_hf_read_order(src_ref **out, size_t *ns, const tfs_model *st, const tfs_hf_deq *deq,
		      tfs_error *err)
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
		refs[(*ns)++] = (src_ref){ tfs_source_label(so), tfs_source_path(so), t->name, i,
					   tfs_hf_deq_late(deq, i) };
	}
	qsort(refs, *ns, sizeof *refs, cmp_src);
	*out = refs;
	if (*ns == 0)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no tensors", tfs_model_path(st));
	return 0;
}

/* The row's generated tensors (generate_extra_tensors: llama3's rope_freqs, Phi-3's rope
 * factors), F32 and 1-D, the first tensors; the keys the hook writes then go into p->early. */
static int add_generated(tfs_hf_plan *p, size_t *cap, const hparams *h, tfs_error *err)
{
	tfs_hf_gen g[TFS_HF_MAX_GEN] = { { NULL, NULL, 0 } };
	size_t ng = 0;
	int rc = p->row->extra ? p->row->extra(g, &ng, &p->early, h, err) : 0;
	for (size_t k = 0; k < ng; k++) {
		tfs_hf_tensor *o;
		if (!rc && !(rc = add_tensor(p, cap, &o, err))) {
			o->name = strdup(g[k].name);
			o->dtype = TFS_DT_F32;
			o->n_dims = 1;
			o->ne[0] = (int64_t)g[k].n;
			o->nbytes = 4 * g[k].n;
			o->recipe = TFS_HF_GENERATED;
			o->src = -1;
			o->src_dtype = TFS_DT_F32;
			p->gen[p->nt - 1] = (uint8_t *)g[k].v;
			g[k].v = NULL;
			if (!o->name)
				rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		}
		free(g[k].v);
	}
	return rc;
}

/* The name the converter maps for source tensor name (out), after the class's
 * filter_tensors (TextModel's: multimodal tensors skipped; ModelBase's: "language_model."
 * removed); false when it skips the tensor. */
static bool filter_name(char *out, size_t cap, const char *name, const tfs_hf_arch *row,
			const hparams *h)
{
	static const char *const prefixes[] = { "mlp", "vit.", "vpm.", "siglip2.", "conformer.",
		"merger.", "resampler.", "sound_encoder.", "sound_projection.",
		"speech_embeddings." };
	static const char *const parts[] = { "visual.", "vision.", "audio.", "talker.",
		"vision_", "audio_", "token2wav.", "code2wav.", "projector.",
		"pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed",
		"patch_embedding", "patch_merger.", "patch_merge_mlp.", "model.connector." };
	if ((row->flags & TFS_HF_ARCH_NO_LM_HEAD) && strcmp(name, "lm_head.weight") == 0)
		return false;
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
		if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
			return false;
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
		if (strstr(name, parts[i]))
			return false;
	static const char lm[] = "language_model.";
	size_t k = 0;
	for (const char *s = name; *s && k + 1 < cap;) {
		if (strncmp(s, lm, sizeof lm - 1) == 0) {
			s += sizeof lm - 1;
			continue;
		}
		out[k++] = *s++;
	}
	out[k] = 0;
	/* Gemma4Model.filter_tensors: the buffer and the experts named as weights */
	if (tfs_hf_named_as_weight(row, out) && k + 8 <= cap)
		memcpy(out + k, ".weight", 8);
	return tfs_hf_hook_rename(row, out, cap, h);
}

/* --outtype auto: bf16 or f16 as the first tensor of two or more dimensions the converter
 * reads is BF16 or F16 (F32 ones are passed over); f16 when none is. */
static uint32_t auto_ftype(const tfs_hf_plan *p, const hparams *h, const src_ref *refs,
			   size_t ns)
{
	char name[512];
	for (size_t k = 0; k < ns; k++) {
		const tfs_tensor *t = tfs_model_tensor(p->base, refs[k].idx);
		if (t->n_dims < 2 || !filter_name(name, sizeof name, t->name, p->row, h))
			continue;
		if (t->dtype == TFS_DT_BF16)
			return FTYPE_MOSTLY_BF16;
		if (t->dtype == TFS_DT_F16)
			return FTYPE_MOSTLY_F16;
	}
	return FTYPE_MOSTLY_F16;
}

/* A source tensor the converter maps: its GGUF name, its row in the name tables, its slot
 * among the required tensors (*slot; *bias: a .bias, not counted), its dtype and shape
 * checked, no second tensor of that name.  TFS_PASSTHROUGH: a tensor the converter skips. */
static int map_source(char gname[256], const tfs_hf_name **m, size_t *slot, bool *bias,
		      const tfs_hf_plan *p, const hparams *h, const tfs_tensor *t,
		      const char *shard, tfs_error *err)
{
	long bid;
	char name[512];
	if (!filter_name(name, sizeof name, t->name, p->row, h))
		return TFS_PASSTHROUGH;
	if (ends_with(name, ".attention.masked_bias") || ends_with(name, ".attention.bias") ||
	    ends_with(name, ".rotary_emb.inv_freq"))
		return TFS_PASSTHROUGH;
	if (!tfs_hf_map_name(gname, 256, name, p->row, h->n_layer, m, &bid))
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
	*slot = bid < 0 ? (size_t)(*m - p->row->globals)
			: p->row->n_globals + (size_t)bid * p->row->n_blocks +
			  (size_t)(*m - p->row->blocks);
	for (size_t j = 0; j < p->nt; j++)
		if (strcmp(p->t[j].name, gname) == 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second '%s'",
					     shard, t->name, gname);
	return 0;
}

/* Output tensor o of source tensor t: dtype, transform (llama's q_proj permuted with
 * n_head, k_proj with num_key_value_heads; Gemma's norms + 1), recipe, size. */
static int fill_tensor(tfs_hf_tensor *o, const tfs_hf_plan *p, const hparams *h,
		       const tfs_tensor *t, const tfs_hf_name *m, const char *shard, unsigned part,
		       unsigned *parts, tfs_error *err)
{
	o->n_dims = t->n_dims;
	memcpy(o->ne, t->ne, sizeof o->ne);
	o->src_dtype = t->dtype;
	bool deq = false, fp8 = false;   /* dequantized (hf_dequant.c); from FP8 */
	for (uint32_t k = 0; k < (o->n_parts ? o->n_parts : 1); k++) {
		long s = o->n_parts ? o->parts[k] : o->src;
		deq |= s >= 0 && tfs_hf_deq_computed(p->deq, (size_t)s);
		fp8 |= s >= 0 && tfs_hf_deq_fp8(p->deq, (size_t)s);
	}
	o->dtype = o->own.kind == TFS_HF_OWN_MXFP4 ? TFS_DT_MXFP4
			: o->own.kind == TFS_HF_OWN_NVFP4 ? TFS_DT_NVFP4
			: tensor_dtype(o->name, t->n_dims, t->ne[0], p->ftype,
				       fp8 && p->fp8_as_q8);
	o->plus_one = m->xform == TFS_HF_XF_PLUS_ONE && ends_with(o->name, ".weight");
	if (m->xform == TFS_HF_XF_PERMUTE_Q || m->xform == TFS_HF_XF_PERMUTE_K) {
		o->perm_heads = (uint32_t)(m->xform == TFS_HF_XF_PERMUTE_Q ? h->n_head : h->n_kv);
		int64_t rows = t->ne[t->n_dims - 1];
		if (rows % (2 * (int64_t)o->perm_heads))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %lld rows cannot "
					     "be permuted in %u heads of pairs", shard, t->name,
					     (long long)rows, o->perm_heads);
	}
	int rc = tfs_hf_hook_fix(p->row, o, t, m, h, shard, part, parts, err);
	if (rc)
		return rc;
	/* a per-head slice (DeepSeek's kv_b_proj), a class's own tensor (GPT-OSS), A_log's -exp
	 * (Qwen3.5): computed */
	bool computed = o->plus_one || o->own.kind || o->slice.heads ||
			o->neg_exp || deq;
	o->recipe = o->dtype == o->src_dtype && !computed ? TFS_HF_COPY : TFS_HF_CONVERT;
	o->quiet_nans = o->recipe == TFS_HF_COPY && o->dtype == TFS_DT_BF16;
	o->raw = o->recipe == TFS_HF_COPY && o->perm_heads == 0 && !o->gather.kind;
	uint64_t nel = 1;
	for (uint32_t d = 0; d < o->n_dims; d++)
		nel *= (uint64_t)o->ne[d];
	return tfs_dtype_nbytes(&o->nbytes, o->dtype, nel, err);
}

/* MoE: the n tensors s (stacked experts, a class's own) added; s's parts freed. */
static int add_stacks(tfs_hf_plan *p, size_t *cap, const hparams *h, tfs_hf_stack *s,
		      size_t n, const char *where, int rc, tfs_error *err)
{
	static const tfs_hf_name plain = { "", "", 0, 0, TFS_HF_XF_NONE, false };
	for (size_t k = 0; k < n; k++) {
		tfs_hf_tensor *o;
		if (!rc && !(rc = add_tensor(p, cap, &o, err))) {
			o->parts = s[k].parts;
			o->n_parts = s[k].n_parts;
			s[k].parts = NULL;
			o->src = o->parts ? o->parts[0] : s[k].src;
			o->own = s[k].own, o->slice = s[k].slice;   /* computed on read */
			if (!(o->name = strdup(s[k].name)))
				rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
			else
				rc = fill_tensor(o, p, h, &s[k].shape, &plain, where, 0, NULL,
						 err);
		}
		free(s[k].parts);
	}
	return rc;
}

/* MoE (hf_moe.c): an expert's tensor r kept, and its layer's stacked tensors added once the
 * layer has all its experts; TFS_PASSTHROUGH for any other tensor. */
static int add_experts(tfs_hf_plan *p, size_t *cap, const hparams *h, const src_ref *r,
		       tfs_error *err)
{
	tfs_hf_stack s[3];
	size_t n = 0;
	const tfs_hf_moe *moe = p->row->moe;
	char name[512];   /* as the class's modify_tensors sees it */
	if (!filter_name(name, sizeof name, tfs_model_tensor(p->st, r->idx)->name, p->row, h))
		return TFS_PASSTHROUGH;
	int rc = moe->tensor ? moe->tensor(h, p->st, r->idx, r->path, s, &n, err)
			     : TFS_PASSTHROUGH;
	if (rc == TFS_PASSTHROUGH)
		rc = tfs_hf_moe_take(&p->moe, moe, h, p->st, r->idx, name, r->path, s, &n, err);
	return rc == TFS_PASSTHROUGH ? rc : add_stacks(p, cap, h, s, n, r->path, rc, err);
}

/* Source tensor r as the converter writes it; seen: the required tensors met so far. */
static int add_source_tensor(tfs_hf_plan *p, size_t *cap, const hparams *h, const src_ref *r,
			     bool *seen, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(p->st, r->idx);
	char gname[256];
	const tfs_hf_name *m = NULL;
	size_t slot = 0;
	bool bias = false;
	tfs_hf_tensor *o;
	int rc = p->row->moe ? add_experts(p, cap, h, r, err) : TFS_PASSTHROUGH;
	if (rc != TFS_PASSTHROUGH)
		return rc;
	rc = map_source(gname, &m, &slot, &bias, p, h, t, r->path, err);
	if (rc)
		return rc == TFS_PASSTHROUGH ? 0 : rc;
	if (!bias && seen[slot])
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is a second '%s'",
				     r->path, t->name, gname);
	seen[slot] |= !bias;
	unsigned parts = 1;   /* a row's fix hook may make two of one (Qwen3.5's gate_up) */
	for (unsigned k = 0; !rc && k < parts; k++) {
		if ((rc = add_tensor(p, cap, &o, err)))
			return rc;
		if (!(o->name = strdup(gname)))
			return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
		o->src = (long)r->idx;
		rc = fill_tensor(o, p, h, t, m, r->path, k, &parts, err);
	}
	return rc;
}

/* The first tensor the architecture needs that was not seen, as an error; 0 when none. */
static int check_required(const tfs_hf_plan *p, const hparams *h, const bool *seen,
			  size_t nseen, tfs_error *err)
{
	const tfs_hf_arch *row = p->row;
	for (size_t s = 0; s < nseen; s++) {
		size_t ng = row->n_globals, b = s < ng ? 0 : (s - ng) / row->n_blocks;
		const tfs_hf_name *m = s < ng ? &row->globals[s]
					      : &row->blocks[(s - ng) % row->n_blocks];
		if (seen[s] || !m->required)
			continue;
		if (s < ng)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: no tensor '%s.weight'",
					     tfs_model_path(p->st), m->hf);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no tensor 'model.layers.%zu.%s."
				     "weight' (%s says num_hidden_layers %lld)",
				     tfs_model_path(p->st), b, m->hf, h->where,
				     (long long)h->n_layer);
	}
	return 0;
}

/* A generated F32 vector named weight's name with ".weight" made `sfx` (n values v, taken). */
static int add_vector(tfs_hf_plan *p, size_t *cap, const char *weight, const char *sfx,
		      float **v, size_t n, tfs_error *err)
{
	tfs_hf_tensor *o;
	char name[256];
	const char *w = strstr(weight, ".weight");
	snprintf(name, sizeof name, "%.*s%s%s", (int)(w ? w - weight : (long)strlen(weight)),
		 weight, sfx, w ? w + 7 : "");
	int rc = add_tensor(p, cap, &o, err);
	if (rc)
		return rc;
	o->name = strdup(name);
	o->dtype = o->src_dtype = TFS_DT_F32;
	o->n_dims = 1;
	o->ne[0] = (int64_t)n;
	o->nbytes = 4 * (uint64_t)n;
	o->recipe = TFS_HF_GENERATED;
	o->src = -1;
	p->gen[p->nt - 1] = (uint8_t *)*v;
	*v = NULL;
	if (!o->name)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	return 0;
}

/* NVFP4 (hf_nvfp4.h): _generate_nvfp4_tensors' tensors, before any other; refs: the repo's
 * tensors in reading order; *drop (allocated, *ndrop of them): the source tensors it pops
 * (Gemma 4's folded router.per_expert_scale), which the plan then passes over. */
static int add_nvfp4(tfs_hf_plan *p, size_t *cap, const hparams *h, const src_ref *refs,
		     size_t ns, bool *seen, size_t **drop, size_t *ndrop, tfs_error *err)
{
	size_t *w = malloc((ns ? ns : 1) * sizeof *w), nw = 0, nit = 0, no = 0;
	size_t *o = malloc((ns ? ns : 1) * sizeof *o);
	char **names = calloc(ns ? ns : 1, sizeof *names), name[512];
	char **onames = calloc(ns ? ns : 1, sizeof *onames);
	bool *popped = calloc(ns ? ns : 1, sizeof *popped);
	tfs_hf_nvfp4_item *it = NULL;
	int rc = !w || !o || !names || !onames || !popped ?
		 tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory") : 0;
	for (size_t k = 0; !rc && k < ns; k++) {
		if (!filter_name(name, sizeof name, refs[k].name, p->row, h))
			continue;
		if (!tfs_hf_deq_nvfp4(p->deq, refs[k].idx)) {
			if (tfs_hf_nvfp4_fold_source(h, name) &&
			    !(onames[no] = strdup(name)))
				rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
			if (onames[no])
				o[no++] = refs[k].idx;
			continue;
		}
		if (ends_with(name, ".weight_packed"))   /* compressed-tensors: renamed */
			name[strlen(name) - 7] = 0;
		w[nw] = refs[k].idx;
		if (!(names[nw++] = strdup(name)))
			rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	}
	if (!rc)
		rc = tfs_hf_nvfp4_items(&it, &nit, p->base, p->deq, h, w, names, nw, o, onames,
					no, popped, err);
	for (size_t k = 0; !rc && k < nit; k++) {
		for (size_t j = 0; j < p->nt && !rc; j++)
			if (strcmp(p->t[j].name, it[k].s.name) == 0)
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: NVFP4 tensor '%s' is a "
						   "second one", tfs_model_path(p->base),
						   it[k].s.name);
		if (it[k].slot >= 0)
			seen[it[k].slot] = true;
		rc = add_stacks(p, cap, h, &it[k].s, 1, tfs_model_path(p->base), rc, err);
		it[k].s.parts = NULL;   /* the plan's now, or freed */
		if (!rc && it[k].scale)
			rc = add_vector(p, cap, it[k].s.name, ".scale", &it[k].scale, it[k].n_scale,
					err);
		if (!rc && it[k].input)
			rc = add_vector(p, cap, it[k].s.name, ".input_scale", &it[k].input,
					it[k].n_input, err);
	}
	for (size_t k = 0; !rc && k < no; k++)
		if (popped[k])
			o[(*ndrop)++] = o[k];
	tfs_hf_nvfp4_items_free(it, nit);
	for (size_t k = 0; k < nw; k++)
		free(names[k]);
	for (size_t k = 0; k < no; k++)
		free(onames[k]);
	free(names);
	free(onames);
	free(popped);
	free(w);
	if (rc)
		free(o);
	else
		*drop = o;
	return rc;
}

static int plan_tensors(tfs_hf_plan *p, const hparams *h, tfs_error *err)
{
	size_t ns = 0, cap = 0, nseen = 0;
	src_ref *refs = NULL;
	bool *seen = NULL;
	int rc = tfs_hf_read_order(&refs, &ns, p->base, NULL, err);
	if (!rc && p->ftype == UINT32_MAX)   /* by the repo's dtypes, before dequant_model */
		p->ftype = auto_ftype(p, h, refs, ns);
	/* which required tensors were seen: globals, then blocks x names */
	nseen = rc ? 0 : p->row->n_globals + (size_t)(h->n_layer > 0 ? h->n_layer : 0) *
				    p->row->n_blocks;
	if (!rc && !(seen = calloc(nseen ? nseen : 1, 1)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	size_t *drop = NULL, ndrop = 0;
	if (!rc && tfs_hf_deq_is_nvfp4(p->deq))   /* NVFP4: its tensors before any other */
		rc = add_nvfp4(p, &cap, h, refs, ns, seen, &drop, &ndrop, err);
	if (!rc && p->deq) {
		free(refs);
		refs = NULL;
		rc = tfs_hf_read_order(&refs, &ns, p->st, p->deq, err);
	}
	if (!rc)
		rc = add_generated(p, &cap, h, err);
	const struct tfs_hf_hooks *hk = p->row->hooks;
	if (!rc && hk && hk->first) {   /* GPT-OSS: its MXFP4 experts first */
		tfs_hf_stack *s = NULL;
		size_t n = 0;
		rc = hk->first(h, p->st, &s, &n, &p->mxfp4, err);
		rc = add_stacks(p, &cap, h, s, n, tfs_model_path(p->st), rc, err);
		free(s);
	}
	if (!rc && (uint64_t)h->n_layer > ns)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: %s says num_hidden_layers %lld, but the "
				   "weights hold %zu tensors", tfs_model_path(p->st), h->where,
				   (long long)h->n_layer, ns);
	for (size_t k = 0; !rc && k < ns; k++) {
		size_t j = 0;
		while (j < ndrop && drop[j] != refs[k].idx)
			j++;
		if (j == ndrop)
			rc = add_source_tensor(p, &cap, h, &refs[k], seen, err);
	}
	free(drop);
	if (!rc)
		rc = tfs_hf_moe_finish(&p->moe, p->st, err);
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

int tfs_hf_plan_layout(tfs_hf_plan *p)
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

/* config.json read (h->file), its row found (h->arch; *cls the class name it was found
 * by: architectures[0], or text_config's when it names one) and the converter's hparams
 * built and checked (h); h->where names it. */
static int load_config(hparams *h, const char **cls, const tfs_hf_files *files, tfs_error *err)
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
	h->file = json_loadb((const char *)text, (size_t)len, JSON_DECODE_ANY, &je);
	free(text);
	if (!h->file)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not JSON: %s (line %d, column %d)",
				     h->where, je.text, je.line, je.column);
	if (!json_is_object(h->file))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: not a JSON object", h->where);
	json_t *tc = json_object_get(h->file, "text_config");
	json_t *av = json_object_get(tc, "architectures");
	if (!json_is_array(av) || json_is_null(av))
		av = json_object_get(h->file, "architectures");
	*cls = json_string_value(json_array_get(av, 0));
	if (!*cls)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"architectures\" (a list naming "
				     "the model's class)", h->where);
	/* the classes are too many for a message (TFS_ERRMSG_MAX): their count, and where
	 * they are listed */
	if (!(h->arch = tfs_hf_arch_find_for(*cls, h->file)))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: architecture %s is not supported "
				     "for the GGUF view (%zu model classes are: tensorfs(1) and "
				     "docs/hf-view.md list them)", h->where, *cls,
				     tfs_hf_n_classes());
	return tfs_hf_read_hparams(h, err);
}

uint32_t tfs_hf_outtype_ftype(tfs_hf_outtype t)
{
	switch (t) {
	case TFS_HF_OUT_F32: return FTYPE_ALL_F32;
	case TFS_HF_OUT_F16: return FTYPE_MOSTLY_F16;
	case TFS_HF_OUT_BF16: return FTYPE_MOSTLY_BF16;
	case TFS_HF_OUT_Q8_0: return FTYPE_MOSTLY_Q8_0;
	default: return UINT32_MAX;   /* auto: chosen by the tensors */
	}
}

int tfs_hf_plan_open(tfs_hf_plan **out, const tfs_hf_files *files, const tfs_model *st,
		     const tfs_hf_opts *o, tfs_error *err)
{
	static const tfs_hf_opts defaults = { 0 };
	char where[1024];
	hparams h = { .where = where, .files = files };
	tfs_hf_plan *p = NULL;
	const char *cls = NULL;

	*out = NULL;
	if (!o)
		o = &defaults;
	snprintf(where, sizeof where, "%s%sconfig.json", files->where ? files->where : "",
		 files->where ? "/" : "");
	int rc = load_config(&h, &cls, files, err);
	if (!rc && !(p = calloc(1, sizeof *p)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	if (!rc) {
		p->st = p->base = st;
		p->row = h.arch;
		p->arch = h.arch->gguf;
		p->ftype = tfs_hf_outtype_ftype(o->outtype);
		p->fp8_as_q8 = o->fp8_as_q8;
		rc = tfs_hf_deq_open(&p->deq, st, h.file, files, h.where, err);
		if (p->deq)
			p->st = tfs_hf_deq_model(p->deq);
		if (!rc && !(rc = tfs_hf_hook_prepare(&h, p->st, err)))
			rc = plan_tensors(p, &h, err);
		/* prepare_metadata: F32/F16/BF16 become NVFP4's, or GPT-OSS's MXFP4 */
		bool plain = p->ftype == FTYPE_ALL_F32 || p->ftype == FTYPE_MOSTLY_F16 ||
			     p->ftype == FTYPE_MOSTLY_BF16;
		if (plain && tfs_hf_deq_is_nvfp4(p->deq))
			p->ftype = FTYPE_MOSTLY_NVFP4;
		else if (p->mxfp4 && p->ftype != FTYPE_MOSTLY_Q8_0)
			p->ftype = FTYPE_MOSTLY_MXFP4_MOE;
		h.ftype = p->ftype;
	}
	if (!rc && !(rc = tfs_hf_plan_keys(p, files, &h, cls, o, err)))
		tfs_hf_plan_layout(p);
	tfs_hf_hparams_free(&h);
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
		free(p->t[i].parts);
		free(p->gen[i]);
	}
	free(p->t);
	free(p->gen);
	tfs_hf_kvs_free(&p->kvs);
	tfs_hf_kvs_free(&p->early);
	tfs_hf_moe_state_free(p->moe);
	tfs_hf_deq_free(p->deq);
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
