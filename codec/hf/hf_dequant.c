/*
 * hf_dequant.c - config.json's quantization_config as llama.cpp de3ff81's converter reads it
 * (ModelBase.dequant_model, conversion/base.py), one row per quant method; the dequantized
 * weights computed on read (hf_dequant.h).
 *
 * What the converter computes for the methods here (dequant_simple):
 *     scale = scale.float(); repeated block_size[i] times along each of the scale's last
 *     len(block_size) axes and cut to the weight's shape (a weight whose size is not a
 *     multiple of the block); trailing axes of size 1 added up to the weight's rank;
 *     weight.float() * scale, broadcast: one float32 multiplication per element.
 * The weight's elements (F8_E4M3, F8_E5M2, I8, F16, BF16, F32) and the scales (F32, F16,
 * BF16) are all exact in float32, so the product is the converter's bit for bit.  A read
 * takes the weight's bytes of the range asked, STEP elements at a time, and the run of
 * scales those use (for a 2-D block-wise scale: its rows of the blocks of rows touched),
 * nothing else: never a whole tensor.
 * Integer-packed weights (compressed-tensors pack-quantized, GPTQ): hf_dequant_packed.c.
 */
#include "hf_dequant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "hf_convert.h"
#include "hf_dequant_impl.h"

/* A quant method of quantization_config: its row. */
typedef struct {
	const char *name;       /* quant_method */
	/* Marks st's tensors (roles, scales); NULL: a class reads the method itself */
	int (*mark)(tfs_hf_deq *d, json_t *qc, tfs_error *err);
} quant_method;


/* ==== the geometry of dequant_simple ==== */


/* Weight w scaled by s, blocks of block[0..nb) along the scale's last axes, as dequant_simple
 * broadcasts them; an error where torch's indexing or broadcast would fail. */
static int simple_geometry(deq_simple *g, const tfs_tensor *w, const tfs_tensor *s,
			   const uint64_t *block, uint32_t nb, const char *method, tfs_error *err)
{
	uint64_t sd[TFS_MAX_DIMS], cut[TFS_MAX_DIMS], rep[TFS_MAX_DIMS];
	uint32_t n = w->n_dims, m = s->n_dims;
	shape_of(w, g->dim);
	shape_of(s, sd);
	g->nd = n;
	bool bad = nb > m || m > n;
	for (uint32_t k = 0; k < m && !bad; k++) {
		rep[k] = k + nb >= m ? block[k + nb - m] : 1;
		cut[k] = nb && sd[k] * rep[k] > g->dim[k] ? g->dim[k] : sd[k] * rep[k];
		bad = cut[k] != g->dim[k] && cut[k] != 1;
	}
	if (bad) {
		return tfs_error_set(err, TFS_E_FORMAT, "quant method %s: tensor '%s' (%u axes) and "
				     "its scale '%s' (%u axes) do not broadcast%s", method, w->name,
				     n, s->name, m, nb ? " in its blocks" : "");
	}
	uint64_t st = 1;
	for (uint32_t k = n; k-- > 0;) {
		bool on = k < m && cut[k] != 1;
		g->div[k] = k < m ? rep[k] : 1;
		g->stride[k] = on ? st : 0;
		if (k < m)
			st *= sd[k];
	}
	return 0;
}

/* The scale's element of weight element e (numpy order, row-major). */
static uint64_t scale_index(const deq_simple *g, uint64_t e)
{
	uint64_t idx = 0;
	for (uint32_t k = g->nd; k-- > 0;) {
		uint64_t x = e % g->dim[k];
		e /= g->dim[k];
		idx += x / g->div[k] * g->stride[k];
	}
	return idx;
}

/* ==== reading a dequantized weight ==== */



/* n elements of st's tensor i from element e0, as float32 bit patterns. */
static int read_f32(const tfs_model *st, size_t i, uint64_t e0, uint64_t n, uint32_t *f,
		    uint8_t *raw, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(st, i);
	const tfs_dtype_info *di = tfs_dtype(t->dtype);
	uint64_t es = di->block_bytes;
	int rc = tfs_tensor_read_exact(st, i, e0 * es, n * es, raw, err);
	if (rc)
		return rc;
	if (float_dtype(t->dtype))
		tfs_hf_to_f32(f, raw, t->dtype, (size_t)n);
	else
		di->to_f32(raw, (float *)f, (size_t)n);
	return 0;
}

/* The run of a row's elements [e, e + left) (rows: the innermost axis): its first column c,
 * its end cend, the scale index of its column 0 (*base). */
static uint64_t row_run(const deq_simple *g, uint64_t e, uint64_t left, uint64_t *c,
			uint64_t *base)
{
	uint64_t cols = g->nd ? g->dim[g->nd - 1] : 1;
	*c = e % cols;
	*base = scale_index(g, e - *c);
	return *c + left < cols ? *c + left : cols;
}

/* Elements [e0, e0 + n) of a dequantized weight into out (float32); wf and raw hold STEP
 * elements of 4 bytes.  Their scales are a run [s0, s1] of the scale tensor (for a 2-D
 * block-wise scale, its rows of the blocks of rows touched), found row by row; the products
 * are made block by block of each row.  scratch: the weights' 4 * STEP bytes, then their raw
 * bytes' 4 * STEP. */
static int simple_step(const void *ctx, uint64_t e0, uint64_t n, float *out, uint8_t *scratch,
		       tfs_error *err)
{
	const deq_simple *g = ctx;
	uint32_t *wf = (uint32_t *)scratch;
	uint8_t *raw = scratch + 4 * (size_t)STEP;
	const tfs_model *st = g->d->st;
	uint32_t last = g->nd ? g->nd - 1 : 0;
	uint64_t div = g->nd ? g->div[last] : 1, stride = g->nd ? g->stride[last] : 0;
	int rc = read_f32(st, g->i, e0, n, wf, raw, err);
	uint64_t s0 = UINT64_MAX, s1 = 0, c, base;
	for (uint64_t e = e0; e < e0 + n;) {
		uint64_t cend = row_run(g, e, e0 + n - e, &c, &base);
		uint64_t lo = base + c / div * stride, hi = base + (cend - 1) / div * stride;
		s0 = lo < s0 ? lo : s0;
		s1 = hi > s1 ? hi : s1;
		e += cend - c;
	}
	uint64_t ns = s1 - s0 + 1;
	uint32_t *sf = rc ? NULL : malloc((size_t)ns * 8);
	if (!rc && !sf)
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	if (!rc)
		rc = read_f32(st, (size_t)g->scale, s0, ns, sf, (uint8_t *)(sf + ns), err);
	for (uint64_t e = e0; !rc && e < e0 + n;) {
		uint64_t cend = row_run(g, e, e0 + n - e, &c, &base);
		while (c < cend) {   /* a block of the row: one scale */
			uint64_t j = c / div, bend = stride && (j + 1) * div < cend ? (j + 1) * div
										: cend;
			float sc, w;
			memcpy(&sc, &sf[base + j * stride - s0], 4);
			for (; c < bend; c++, e++) {
				memcpy(&w, &wf[e - e0], 4);
				out[e - e0] = w * sc;
			}
		}
	}
	free(sf);
	return rc;
}

static int64_t simple_read(void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	const deq_simple *g = ctx;
	uint8_t *scratch = malloc(3 * 4 * (size_t)STEP);   /* weights, raw bytes, products */
	if (!scratch)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	float *f = (float *)(scratch + 8 * (size_t)STEP);
	int rc = deq_read_steps(buf, len, off, simple_step, g, f, scratch, err);
	free(scratch);
	return rc ? rc : (int64_t)len;
}

static const tfs_computed_ops simple_ops = { .read = simple_read };


/* ==== the methods ==== */

/* Weight name (st's tensor) of scale tensor `name` minus `suffix` plus `add`; its index or
 * an error naming both. */
static int weight_of(long *w, const tfs_hf_deq *d, const char *name, const char *suffix,
		     const char *add, tfs_error *err)
{
	char wname[1024];
	size_t n = strlen(name) - strlen(suffix);
	snprintf(wname, sizeof wname, "%.*s%s", (int)n, name, add);
	*w = tfs_model_find_tensor(d->st, wname);
	if (*w < 0 || tfs_model_tensor(d->st, (size_t)*w)->deleted)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: quant method %s: scale '%s' has no "
				     "weight '%s'", tfs_model_path(d->st), d->method, name, wname);
	return 0;
}

/* Weight w dequantized with scale s (dequant_simple), blocks of block[0..nb). */
static int mark_simple(tfs_hf_deq *d, long w, long s, const uint64_t *block, uint32_t nb,
		       bool fp8, tfs_error *err)
{
	const tfs_tensor *wt = tfs_model_tensor(d->st, (size_t)w);
	const tfs_tensor *sc = tfs_model_tensor(d->st, (size_t)s);
	const tfs_dtype_info *wi = tfs_dtype(wt->dtype), *si = tfs_dtype(sc->dtype);
	if (!wi || !wi->to_f32 || wi->block_elems != 1 || wt->dtype == TFS_DT_F64 ||
	    wt->dtype == TFS_DT_I32 || wt->dtype == TFS_DT_I64 || wt->dtype == TFS_DT_U32)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quant method %s: tensor '%s' is "
				     "%s, which the GGUF view does not dequantize",
				     tfs_model_path(d->st), d->method, wt->name,
				     wi ? wi->name : "of an unknown type");
	if (!si || !float_dtype(sc->dtype))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quant method %s: scale '%s' is "
				     "%s (F32, F16 or BF16 expected)", tfs_model_path(d->st),
				     d->method, sc->name, si ? si->name : "of an unknown type");
	deq_simple *g = &d->w[w];
	*g = (deq_simple){ .d = d, .i = (size_t)w, .scale = s };
	int rc = simple_geometry(g, wt, sc, block, nb, d->method, err);
	if (rc)
		return rc;
	d->role[w] = ROLE_DEQ;
	d->role[s] = ROLE_DROP;
	d->fp8[w] = fp8;
	return 0;
}

/* weight_block_size: absent or null (none), else a list of positive sizes. */
static int block_size(uint64_t *block, uint32_t *nb, json_t *v, const tfs_hf_deq *d,
		      tfs_error *err)
{
	*nb = 0;
	if (!v || json_is_null(v))
		return 0;
	size_t k;
	json_t *x;
	if (!json_is_array(v) || json_array_size(v) > TFS_MAX_DIMS)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: quantization_config."
				     "weight_block_size: not a list of at most %d sizes", d->where,
				     TFS_MAX_DIMS);
	json_array_foreach(v, k, x) {
		if (!json_is_integer(x) || json_integer_value(x) <= 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: quantization_config."
					     "weight_block_size: not a positive size", d->where);
		block[(*nb)++] = (uint64_t)json_integer_value(x);
	}
	return 0;
}

/* quant_method "fp8": X_scale_inv scales X (DeepSeek-V3, Qwen3-FP8 ...; weight_block_size),
 * Mistral's X.qscale_weight scales X.weight; activation scales dropped. */
static int mark_fp8(tfs_hf_deq *d, json_t *qc, tfs_error *err)
{
	uint64_t block[TFS_MAX_DIMS];
	uint32_t nb;
	int rc = block_size(block, &nb, json_object_get(qc, "weight_block_size"), d, err);
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		long w;
		if (t->deleted)
			continue;
		if (ends_with(t->name, "_scale_inv")) {
			if (!(rc = weight_of(&w, d, t->name, "_scale_inv", "", err)))
				rc = mark_simple(d, w, (long)i, block, nb, true, err);
		} else if (ends_with(t->name, ".qscale_weight")) {
			if (!(rc = weight_of(&w, d, t->name, "qscale_weight", "weight", err)))
				rc = mark_simple(d, w, (long)i, block, nb, true, err);
		} else if (ends_with(t->name, ".activation_scale") ||
			   ends_with(t->name, "_activation_scale") ||
			   ends_with(t->name, ".qscale_act")) {
			d->role[i] = ROLE_DROP;
		}
	}
	return rc;
}



/* ==== NVFP4 (prepare_tensors, _generate_nvfp4_tensors) ==== */

/* st's tensor named base + add (base's first n bytes), or -1 (absent or deleted). */
static long find_named(const tfs_hf_deq *d, const char *base, size_t n, const char *add)
{
	char name[1024];
	snprintf(name, sizeof name, "%.*s%s", (int)n, base, add);
	long i = tfs_model_find_tensor(d->st, name);
	return i < 0 || tfs_model_tensor(d->st, (size_t)i)->deleted ? -1 : i;
}

/* A refusal naming the NVFP4 weight. */
static int refuse_nvfp4(const tfs_hf_deq *d, const tfs_tensor *w, const char *what,
			tfs_error *err)
{
	return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quant method %s (tensor '%s'): NVFP4 "
			     "%s", d->where, d->method, w->name, what);
}

/* Weight w with block scale s as _nvfp4_pack reads them: U8 [rows, 8 x blocks], an E4M3
 * (or U8) scale [rows, blocks], whole super-blocks of 4 blocks (64 values). */
static int check_nvfp4(const tfs_hf_deq *d, const tfs_tensor *w, const tfs_tensor *s,
		       tfs_error *err)
{
	if (w->dtype != TFS_DT_U8)
		return refuse_nvfp4(d, w, "weights that are not U8 (two E2M1 values a byte)", err);
	if (s->dtype != TFS_DT_F8_E4M3 && s->dtype != TFS_DT_U8)
		return refuse_nvfp4(d, w, "block scales that are not F8_E4M3", err);
	if (w->n_dims != 2 || s->n_dims != 2 || w->ne[1] != s->ne[1] || w->ne[0] != 8 * s->ne[0])
		return refuse_nvfp4(d, w, "weight and block scale shapes that do not agree "
				    "([rows, 8 x blocks], [rows, blocks])", err);
	if (s->ne[0] % 4)
		return refuse_nvfp4(d, w, "rows that are not whole super-blocks of 64 values "
				    "(the converter's reshape fails)", err);
	return 0;
}

/* compressed-tensors NVFP4 (prepare_tensors): format nvfp4-pack-quantized, or mixed-precision
 * whose config groups all are. */
static bool ct_nvfp4(const char *format, json_t *groups)
{
	if (!format)
		return false;
	if (!strcmp(format, "nvfp4-pack-quantized"))
		return true;
	if (strcmp(format, "mixed-precision") || !json_object_size(groups))
		return false;
	const char *k;
	json_t *g;
	json_object_foreach(groups, k, g) {
		const char *f = json_string_value(json_object_get(g, "format"));
		if (json_is_object(g) && (!f || strcmp(f, "nvfp4-pack-quantized")))
			return false;
	}
	return true;
}

/* _generate_nvfp4_tensors: each X.weight (compressed-tensors: X.weight_packed, renamed so
 * where no X.weight is) whose X.weight_scale has two axes, with X.weight_scale_2 and
 * X.input_scale (compressed-tensors: the reciprocals of X.weight_global_scale and
 * X.input_global_scale); all deleted here, k and v scales dropped. */
static int mark_nvfp4(tfs_hf_deq *d, bool ct, tfs_error *err)
{
	d->nvfp4 = true;
	const char *wsfx = ct ? ".weight_packed" : ".weight";
	int rc = 0;
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		if (t->deleted || !ends_with(t->name, wsfx))
			continue;
		size_t n = strlen(t->name) - strlen(wsfx);
		if (ct && find_named(d, t->name, n, ".weight") >= 0)
			continue;   /* not renamed: the converter cannot map it */
		long s = find_named(d, t->name, n, ".weight_scale");
		if (s < 0 || tfs_model_tensor(d->st, (size_t)s)->n_dims < 2)
			continue;   /* not NVFP4 (ModelOpt's FP8 of a 1-D scale) */
		if ((rc = check_nvfp4(d, t, tfs_model_tensor(d->st, (size_t)s), err)))
			break;
		tfs_hf_nvfp4_src *v = &d->nv[i];
		*v = (tfs_hf_nvfp4_src){ s, find_named(d, t->name, n, ct ? ".weight_global_scale"
						      : ".weight_scale_2"),
					 find_named(d, t->name, n, ct ? ".input_global_scale"
						    : ".input_scale"), ct };
		d->role[i] = d->role[s] = ROLE_DROP;
		if (v->scale2 >= 0)
			d->role[v->scale2] = ROLE_DROP;
		if (v->input >= 0)
			d->role[v->input] = ROLE_DROP;
	}
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		if (ends_with(t->name, ".k_scale") || ends_with(t->name, ".v_scale"))
			d->role[i] = ROLE_DROP;
	}
	return rc;
}

/* dequant_model's first test: with NVFP4, nothing more to do unless an X.weight_scale or
 * X.weight_scale_inv is left. */
static bool scales_left(const tfs_hf_deq *d)
{
	for (size_t i = 0; i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		if (!t->deleted && d->role[i] != ROLE_DROP &&
		    (ends_with(t->name, ".weight_scale") || ends_with(t->name, ".weight_scale_inv")))
			return true;
	}
	return false;
}


/* quant_method "compressed-tensors", formats float-quantized, int-quantized and
 * naive-quantized (one config group; channel or block strategy): X_scale scales X as fp8's
 * do (dequant_simple, block_structure); FP8 weights (float, 8 bits) are --fp8-as-q8's. */
static int mark_compressed(tfs_hf_deq *d, json_t *qc, tfs_error *err)
{
	const char *format = json_string_value(json_object_get(qc, "format"));
	json_t *groups = json_object_get(qc, "config_groups");
	if (!format || !json_is_object(groups) || !json_object_size(groups))
		return refuse(d, "no format or config_groups", err);
	if (ct_nvfp4(format, groups))
		return 0;   /* NVFP4: tfs_hf_deq_open marked its weights (mark_nvfp4) */
	if (json_object_size(groups) > 1)
		return refuse(d, "several config groups (the converter reads one)", err);
	json_t *w = json_object_get(json_object_iter_value(json_object_iter(groups)), "weights");
	const char *strategy = json_string_value(json_object_get(w, "strategy"));
	if (!strcmp(format, "pack-quantized"))
		return tfs_hf_deq_mark_ct_packed(d, w, err);
	if (strcmp(format, "float-quantized") && strcmp(format, "int-quantized") &&
	    strcmp(format, "naive-quantized"))
		return refuse(d, "this format is not read by the GGUF view yet", err);
	json_t *gs = json_object_get(w, "group_size");
	if (!strategy || (strcmp(strategy, "channel") && strcmp(strategy, "block")) ||
	    (gs && !json_is_null(gs)))
		return refuse(d, "a strategy other than channel or block", err);
	const char *type = json_string_value(json_object_get(w, "type"));
	bool fp8 = !strcmp(format, "float-quantized") && type && !strcmp(type, "float") &&
		   json_integer_value(json_object_get(w, "num_bits")) == 8;
	uint64_t block[TFS_MAX_DIMS];
	uint32_t nb;
	int rc = block_size(block, &nb, json_object_get(w, "block_structure"), d, err);
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		long wi;
		if (!t->deleted && ends_with(t->name, ".weight_scale") &&
		    !(rc = weight_of(&wi, d, t->name, "_scale", "", err)))
			rc = mark_simple(d, wi, (long)i, block, nb, fp8, err);
	}
	return rc;
}


/* quant_method "modelopt" (NVIDIA's ModelOpt FP8 releases): X.weight_scale (one value, or
 * per channel) scales X (dequant_simple, no blocks), FP8 weights are --fp8-as-q8's; a scale
 * without its weight, input, k and v scales dropped (NVFP4's weights and scales are marked
 * before: those of a mixed repo's FP8 weights are left). */
static int mark_modelopt(tfs_hf_deq *d, json_t *qc, tfs_error *err)
{
	(void)qc;
	int rc = 0;
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		if (t->deleted || d->role[i] == ROLE_DROP)
			continue;
		if (ends_with(t->name, ".weight_scale")) {
			char wname[1024];
			snprintf(wname, sizeof wname, "%.*s", (int)(strlen(t->name) - 6), t->name);
			long w = tfs_model_find_tensor(d->st, wname);
			if (w < 0 || tfs_model_tensor(d->st, (size_t)w)->deleted) {
				d->role[i] = ROLE_DROP;
				continue;
			}
			int dt = tfs_model_tensor(d->st, (size_t)w)->dtype;
			rc = mark_simple(d, w, (long)i, NULL, 0,
					 dt == TFS_DT_F8_E4M3 || dt == TFS_DT_F8_E5M2, err);
		} else if (ends_with(t->name, ".input_scale") || ends_with(t->name, ".k_scale") ||
			   ends_with(t->name, ".v_scale")) {
			d->role[i] = ROLE_DROP;
		}
	}
	return rc;
}

static const quant_method methods[] = {
	{ "fp8", mark_fp8 },
	{ "gptq", tfs_hf_deq_mark_gptq },
	{ "bitnet", tfs_hf_deq_mark_bitnet },
	{ "modelopt", mark_modelopt },
	{ "compressed-tensors", mark_compressed },
	{ "mxfp4", NULL },   /* GPT-OSS: hf_gptoss.c repacks its experts */
};

/* ==== the dequantized model ==== */

static int build(tfs_hf_deq *d, tfs_error *err)
{
	const tfs_model *st = d->st;
	size_t ns = tfs_model_n_sources(st);
	int rc = tfs_model_new(&d->m, &tfs_gguf_format, tfs_model_path(st), err);
	if (rc)
		return rc;
	tfs_model *m = d->m;
	if (!(m->src = calloc(ns + 1, sizeof *m->src)))
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	m->cap_src = ns + 1;
	for (; !rc && m->n_src < ns; m->n_src += !rc)
		rc = tfs_source_hold(&m->src[m->n_src], tfs_model_source(st, m->n_src), err);
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(st, i);
		tfs_tensor *o;
		int32_t src = t->src;
		uint64_t nel = 1;
		for (uint32_t k = 0; k < t->n_dims; k++)
			nel *= (uint64_t)t->ne[k];
		const deq_packed *pk = d->pk[i].kind ? &d->pk[i] : NULL;
		const char *tname = d->rename[i] ? d->rename[i] : t->name;
		if (pk)
			nel = pk->rows * pk->cols;
		if (d->role[i] == ROLE_DEQ)
			rc = tfs_model_add_computed_source(m, tfs_source_label(tfs_model_source(st,
							  (size_t)t->src)), pk ? &tfs_hf_deq_packed_ops
							  : &simple_ops, pk ? (void *)pk
							  : (void *)&d->w[i], 4 * nel, &src, err);
		if (rc || (rc = tfs_model_push_tensor(m, tname, strlen(tname), &o, err)))
			break;
		char *name = o->name;
		*o = *t;
		o->name = name;
		o->deleted = t->deleted || d->role[i] == ROLE_DROP;
		if (d->role[i] == ROLE_DEQ) {
			o->dtype = TFS_DT_F32;
			o->src = src;
			o->offset = 0;
			o->nbytes = 4 * nel;
		}
		if (pk && pk->kind == PK_BITNET) {   /* 4 times the rows */
			o->ne[o->n_dims - 1] *= 4;
		} else if (pk) {   /* [rows, cols], numpy order */
			o->n_dims = 2;
			o->ne[0] = (int64_t)pk->cols;
			o->ne[1] = (int64_t)pk->rows;
		}
	}
	return rc;
}

/* What prepare_tensors reads of quantization_config, completed by hf_quant_config.json
 * (ModelOpt's) when it has no quant_algo or no quantized_layers. */
typedef struct {
	const char *method;     /* hparams' quant_method (the producer's name where none) */
	bool nvfp4, ct;         /* _is_nvfp4; compressed-tensors' (nvfp4_compressed_tensors) */
	json_t *hf;             /* hf_quant_config.json (owned), or NULL */
	char producer[64];
} prepared;

/* A non-empty JSON object or array (Python's truth of a dict or list). */
static bool nonempty(json_t *v)
{
	return (json_is_object(v) && json_object_size(v)) || (json_is_array(v) && json_array_size(v));
}

static int prepare(prepared *q, json_t *qc, const tfs_hf_files *files, const char *where,
		   tfs_error *err)
{
	const char *algo = json_string_value(json_object_get(qc, "quant_algo"));
	const char *method = json_string_value(json_object_get(qc, "quant_method"));
	const char *format = json_string_value(json_object_get(qc, "format"));
	json_t *groups = json_object_get(qc, "config_groups");
	json_t *layers = json_object_get(qc, "quantized_layers"), *v;
	uint8_t *text = NULL;
	uint64_t len = 0;
	q->method = method;
	int rc = (!algo || !*algo || !nonempty(layers)) && files
		 ? tfs_hf_read_optional(files, "hf_quant_config.json", &text, &len, err) : 0;
	if (!rc && text) {
		json_error_t je;
		q->hf = json_loadb((const char *)text, (size_t)len, 0, &je);
		free(text);
		if (!json_is_object(q->hf))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: hf_quant_config.json: not a JSON "
					     "object", where);
		json_t *c = json_object_get(q->hf, "quantization");
		const char *pn = json_string_value(json_object_get(json_object_get(q->hf,
										"producer"), "name"));
		size_t k = 0;
		for (; pn && pn[k] && k + 1 < sizeof q->producer; k++)
			q->producer[k] = (char)(pn[k] >= 'A' && pn[k] <= 'Z' ? pn[k] + 32 : pn[k]);
		q->producer[k] = 0;
		if (!method)
			q->method = method = q->producer;
		if ((v = json_object_get(c, "quant_algo")))
			algo = json_string_value(v);
		if ((v = json_object_get(c, "quant_method")))
			method = json_string_value(v);
		if ((v = json_object_get(c, "format")))
			format = json_string_value(v);
		if ((v = json_object_get(c, "config_groups")))
			groups = v;
		if ((v = json_object_get(c, "quantized_layers")))
			layers = v;
	}
	q->ct = method && !strcmp(method, "compressed-tensors") && ct_nvfp4(format, groups);
	q->nvfp4 = q->ct || (algo && (!strcmp(algo, "NVFP4") || !strcmp(algo, "W4A16_NVFP4")));
	const char *k;
	json_object_foreach(layers, k, v) {
		const char *a = json_string_value(json_object_get(v, "quant_algo"));
		q->nvfp4 |= a && ends_with(a, "NVFP4");
	}
	return rc;
}

int tfs_hf_deq_open(tfs_hf_deq **out, const tfs_model *st, json_t *config,
		    const tfs_hf_files *files, const char *where, tfs_error *err)
{
	*out = NULL;
	json_t *qc = json_object_get(config, "quantization_config");
	if (!json_is_object(qc))
		qc = NULL;
	prepared pq = { 0 };
	int rc = prepare(&pq, qc, files, where, err);
	const char *name = pq.method;
	const quant_method *q = NULL;
	for (size_t k = 0; name && k < sizeof methods / sizeof methods[0]; k++)
		if (strcmp(methods[k].name, name) == 0)
			q = &methods[k];
	if (!rc && name && !q && !pq.nvfp4)
		rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quant method %s (tensor '%s') is "
				   "not one the converter reads", where, name, first_quantized(st));
	json_decref(pq.hf);
	if (rc || (!pq.nvfp4 && (!q || !q->mark)))
		return rc;   /* none, or a method a class reads itself (GPT-OSS's mxfp4) */
	tfs_hf_deq *d = calloc(1, sizeof *d);
	size_t n = tfs_model_n_tensors(st);
	if (d) {
		*d = (tfs_hf_deq){ .st = st, .n = n, .method = q ? q->name : "(none)",
				   .where = where };
		d->role = calloc(n ? n : 1, 1);
		d->fp8 = calloc(n ? n : 1, sizeof *d->fp8);
		d->w = calloc(n ? n : 1, sizeof *d->w);
		d->pk = calloc(n ? n : 1, sizeof *d->pk);
		d->rename = calloc(n ? n : 1, sizeof *d->rename);
		d->nv = malloc((n ? n : 1) * sizeof *d->nv);
		for (size_t i = 0; d->nv && i < n; i++)
			d->nv[i] = (tfs_hf_nvfp4_src){ -1, -1, -1, false };
	}
	rc = !d || !d->role || !d->fp8 || !d->w || !d->pk || !d->rename || !d->nv
	     ? tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory") : 0;
	if (!rc && pq.nvfp4)   /* prepare_tensors: _generate_nvfp4_tensors first */
		rc = mark_nvfp4(d, pq.ct, err);
	/* dequant_model: nothing left to do after NVFP4 unless a weight scale is left */
	if (!rc && (!pq.nvfp4 || scales_left(d)))
		rc = !q ? (name ? refuse(d, "not one the converter reads", err) : 0)
			: q->mark ? q->mark(d, qc, err) : 0;
	if (!rc)
		rc = build(d, err);
	if (d)
		d->where = NULL;   /* the caller's, for mark's messages */
	if (rc) {
		tfs_hf_deq_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void tfs_hf_deq_free(tfs_hf_deq *d)
{
	if (!d)
		return;
	if (d->m)
		tfs_model_free(d->m);
	free(d->role);
	free(d->fp8);
	free(d->w);
	for (size_t i = 0; d->rename && i < d->n; i++)
		free(d->rename[i]);
	free(d->rename);
	free(d->pk);
	free(d->nv);
	free(d);
}

const tfs_model *tfs_hf_deq_model(const tfs_hf_deq *d) { return d->m; }

bool tfs_hf_deq_computed(const tfs_hf_deq *d, size_t i)
{
	return d && i < d->n && d->role[i] == ROLE_DEQ;
}

bool tfs_hf_deq_late(const tfs_hf_deq *d, size_t i)
{
	return d && i < d->n && (d->pk[i].kind == PK_CT || d->pk[i].kind == PK_GPTQ);
}

bool tfs_hf_deq_fp8(const tfs_hf_deq *d, size_t i)
{
	return d && i < d->n && d->fp8[i];
}

bool tfs_hf_deq_is_nvfp4(const tfs_hf_deq *d)
{
	return d && d->nvfp4;
}

const tfs_hf_nvfp4_src *tfs_hf_deq_nvfp4(const tfs_hf_deq *d, size_t i)
{
	return d && i < d->n && d->nv[i].scale >= 0 ? &d->nv[i] : NULL;
}
