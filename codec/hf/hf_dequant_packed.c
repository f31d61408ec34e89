/*
 * hf_dequant_packed.c - integer-packed quantized weights as llama.cpp de3ff81's converter
 * dequantizes them (ModelBase.dequant_model, conversion/base.py): compressed-tensors'
 * pack-quantized (dequant_packed) and GPTQ (dequant_gptq), each packed weight the new tensor
 * X.weight, and bitnet (dequant_bitnet: in place, four ternary values a byte along the
 * rows, divided by the scale), computed on read (hf_dequant.h).
 *
 * Each value is an unsigned field of an int32 word (the converter's `>> shift & mask`),
 * minus its zero point (an int), the difference converted to float32 (exact: at most 16
 * bits) and multiplied by its scale as float32: one multiplication, the converter's.  A step
 * of STEP values reads the words, zero points, scales (and GPTQ's g_idx) of the rows and
 * columns it covers, never a whole tensor.
 */
#include <stdlib.h>

#include "hf_convert.h"
#include "hf_dequant_impl.h"
#include "source.h"

/* ==== reading an integer-packed weight ==== */

/* Rows [r0, r1) x columns [c0, c1) of st's 2-D tensor i (cols columns, es bytes an element)
 * into out, row by row. */
static int read_block(const tfs_model *st, size_t i, uint64_t cols, uint64_t es, uint64_t r0,
		      uint64_t r1, uint64_t c0, uint64_t c1, uint8_t *out, tfs_error *err)
{
	uint64_t n = (c1 - c0) * es;
	const tfs_tensor *t = tfs_model_tensor(st, i);
	const uint8_t *map = r1 - r0 > 1 ? tfs_source_mapping(tfs_model_source(st, (size_t)t->src))
					 : NULL;
	uint64_t a = (r0 * cols + c0) * es, b = ((r1 - 1) * cols + c1) * es;
	if (map && b <= t->nbytes) {   /* a local file's rows: through its mapping, advised */
		tfs_source_advise(st, t->src, t->offset + a, b - a, MADV_WILLNEED);
		for (uint64_t r = r0; r < r1; r++, out += n)
			memcpy(out, map + t->offset + (r * cols + c0) * es, (size_t)n);
		tfs_source_advise(st, t->src, t->offset + a, b - a, MADV_DONTNEED);
		return 0;
	}
	for (uint64_t r = r0; r < r1; r++, out += n) {
		int64_t got = tfs_tensor_read_raw(st, i, (r * cols + c0) * es, n, out, err);
		if (got < 0)
			return (int)got;
		if ((uint64_t)got != n)
			return tfs_error_set(err, TFS_E_IO, "%s: tensor '%s': short read",
					     tfs_model_path(st), tfs_model_tensor(st, i)->name);
	}
	return 0;
}

/* Rows [r0, r1) x columns [c0, c1) of a float tensor as float32 (into f; raw: scratch). */
static int read_block_f32(const tfs_model *st, size_t i, uint64_t cols, uint64_t r0, uint64_t r1,
			  uint64_t c0, uint64_t c1, float *f, uint8_t *raw, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(st, i);
	uint64_t es = tfs_dtype(t->dtype)->block_bytes, n = (r1 - r0) * (c1 - c0);
	int rc = read_block(st, i, cols, es, r0, r1, c0, c1, raw, err);
	if (!rc)
		tfs_hf_to_f32((uint32_t *)f, raw, t->dtype, (size_t)n);
	return rc;
}

/* Value j of a packed 32-bit word (the converter: int32 >> shift & mask; the mask keeps the
 * bits an arithmetic or a logical shift give alike). */
static inline uint32_t unpack(uint32_t word, unsigned j, unsigned bits)
{
	return (word >> (j * bits)) & ((1u << bits) - 1);
}

/* compressed-tensors (dequant_packed): element (r, c) is
 * float(q - offset) * float(scale[r, c / group]), q value c % per of word [r, c / per],
 * offset the zero point's value r % per of word [r / per, c / group], or 2^(bits - 1). */
static int ct_row(const deq_packed *g, uint64_t r, uint64_t c0, uint64_t c1, float *out,
		  uint8_t *scratch, tfs_error *err)
{
	const tfs_model *st = g->d->st;
	uint64_t w0 = c0 / g->per, w1 = (c1 - 1) / g->per + 1;
	uint64_t g0 = c0 / g->group, g1 = (c1 - 1) / g->group + 1;
	uint32_t *words = (uint32_t *)scratch, *zw = words + (w1 - w0);
	float *sc = (float *)(zw + (g1 - g0));
	uint8_t *raw = (uint8_t *)(sc + (g1 - g0));
	int rc = read_block(st, g->w, g->wcols, 4, r, r + 1, w0, w1, (uint8_t *)words, err);
	if (!rc && g->zp >= 0)
		rc = read_block(st, (size_t)g->zp, g->zcols, 4, r / g->per, r / g->per + 1, g0, g1,
				(uint8_t *)zw, err);
	if (!rc)
		rc = read_block_f32(st, (size_t)g->scale, g->ng, r, r + 1, g0, g1, sc, raw, err);
	for (uint64_t c = c0; !rc && c < c1; c++) {
		uint64_t k = c / g->group - g0;
		int32_t off = g->zp >= 0 ? (int32_t)unpack(zw[k], (unsigned)(r % g->per), g->bits)
					 : (int32_t)1 << (g->bits - 1);
		int32_t q = (int32_t)unpack(words[c / g->per - w0], (unsigned)(c % g->per),
					    g->bits);
		out[c - c0] = (float)(q - off) * sc[k];
	}
	return rc;
}

/* GPTQ (dequant_gptq), the weight [out, in] = the transpose of [in, out]: element (o, i) is
 * float(scales[g, o]) * float(q - z), g = g_idx[i], q value i % per of qweight's word
 * [i / per, o], z the value o % per of qzeros' word [g, o / per] (+ 1 for "gptq"). */
static int gptq_rows(const deq_packed *g, uint64_t e0, uint64_t n, float *out, tfs_error *err)
{
	const tfs_model *st = g->d->st;
	uint64_t in = g->cols, o0 = e0 / in, o1 = (e0 + n - 1) / in + 1;
	uint64_t i0 = o1 - o0 > 1 ? 0 : e0 % in, i1 = o1 - o0 > 1 ? in : (e0 + n - 1) % in + 1;
	uint64_t k0 = i0 / g->per, k1 = (i1 - 1) / g->per + 1, no = o1 - o0;
	uint64_t z0 = o0 / g->per, z1 = (o1 - 1) / g->per + 1;
	int32_t *gi = malloc((size_t)(i1 - i0) * 4);
	uint32_t *words = malloc((size_t)((k1 - k0) * no) * 4);
	int rc = !gi || !words ? tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory") : 0;
	if (!rc)
		rc = read_block(st, (size_t)g->gidx, in, 4, 0, 1, i0, i1, (uint8_t *)gi, err);
	int64_t gmin = INT64_MAX, gmax = -1;
	for (uint64_t i = 0; !rc && i < i1 - i0; i++) {
		if (gi[i] < 0 || (uint64_t)gi[i] >= g->ng)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: quant method gptq: tensor '%s': "
					   "g_idx %d out of its %llu groups", tfs_model_path(st),
					   tfs_model_tensor(st, g->w)->name, gi[i],
					   (unsigned long long)g->ng);
		gmin = gi[i] < gmin ? gi[i] : gmin;
		gmax = gi[i] > gmax ? gi[i] : gmax;
	}
	uint64_t nr = rc ? 0 : (uint64_t)(gmax - gmin + 1);
	float *sc = rc ? NULL : malloc((size_t)(nr * no) * 4);
	uint8_t *raw = rc ? NULL : malloc((size_t)(nr * no) * 4);
	uint32_t *zw = rc ? NULL : malloc((size_t)(nr * (z1 - z0)) * 4);
	if (!rc && (!sc || !raw || !zw))
		rc = tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	if (!rc)
		rc = read_block(st, g->w, g->rows, 4, k0, k1, o0, o1, (uint8_t *)words, err);
	if (!rc)
		rc = read_block(st, (size_t)g->zp, g->zcols, 4, (uint64_t)gmin, (uint64_t)gmax + 1,
				z0, z1, (uint8_t *)zw, err);
	if (!rc)
		rc = read_block_f32(st, (size_t)g->scale, g->rows, (uint64_t)gmin,
				    (uint64_t)gmax + 1, o0, o1, sc, raw, err);
	for (uint64_t e = e0; !rc && e < e0 + n; e++) {
		uint64_t o = e / in, i = e % in, gr = (uint64_t)(gi[i - i0] - gmin);
		int32_t q = (int32_t)unpack(words[(i / g->per - k0) * no + (o - o0)],
					    (unsigned)(i % g->per), g->bits);
		int32_t z = (int32_t)unpack(zw[gr * (z1 - z0) + (o / g->per - z0)],
					    (unsigned)(o % g->per), g->bits) + g->zp_plus1;
		out[e - e0] = sc[gr * no + (o - o0)] * (float)(q - z);
	}
	free(gi);
	free(words);
	free(sc);
	free(raw);
	free(zw);
	return rc;
}

/* bitnet (dequant_bitnet), the weight [4 * R, ...] of packed [R, ...] bytes: element (r, c)
 * is float(((byte[r % R, c] >> 2 * (r / R)) & 3) - 1) / scale. */
static int bitnet_row(const deq_packed *g, uint64_t r, uint64_t c0, uint64_t c1, float *out,
		      uint8_t *scratch, tfs_error *err)
{
	uint64_t R = g->rows / 4;
	int rc = read_block(g->d->st, g->w, g->cols, 1, r % R, r % R + 1, c0, c1, scratch, err);
	for (uint64_t c = c0; !rc && c < c1; c++)
		out[c - c0] = (float)((int)((scratch[c - c0] >> (2 * (r / R))) & 3) - 1) / g->div;
	return rc;
}

static int packed_step(const void *ctx, uint64_t e0, uint64_t n, float *out, uint8_t *scratch,
		       tfs_error *err)
{
	const deq_packed *g = ctx;
	if (g->kind == PK_GPTQ)
		return gptq_rows(g, e0, n, out, err);
	int rc = 0;
	for (uint64_t e = e0; !rc && e < e0 + n;) {   /* row runs */
		uint64_t r = e / g->cols, c = e % g->cols;
		uint64_t c1 = c + (e0 + n - e) < g->cols ? c + (e0 + n - e) : g->cols;
		rc = g->kind == PK_BITNET ? bitnet_row(g, r, c, c1, out + (e - e0), scratch, err)
					  : ct_row(g, r, c, c1, out + (e - e0), scratch, err);
		e += c1 - c;
	}
	return rc;
}

static int64_t packed_read(void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	const deq_packed *g = ctx;
	/* a row run's words, zero points, scales (and their raw bytes), products */
	uint8_t *scratch = malloc(5 * 4 * ((size_t)STEP + 4));
	if (!scratch)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	float *f = (float *)(scratch + 4 * 4 * ((size_t)STEP + 4));
	int rc = deq_read_steps(buf, len, off, packed_step, g, f, scratch, err);
	free(scratch);
	return rc ? rc : (int64_t)len;
}

const tfs_computed_ops tfs_hf_deq_packed_ops = { .read = packed_read };

/* Companion tensor base + suffix of a packed weight: its index, or an error (required). */
static int companion(long *out, const tfs_hf_deq *d, const char *base, const char *suffix,
		     const char *wname, bool required, tfs_error *err)
{
	char name[1024];
	snprintf(name, sizeof name, "%s%s", base, suffix);
	*out = tfs_model_find_tensor(d->st, name);
	if (*out >= 0 && tfs_model_tensor(d->st, (size_t)*out)->deleted)
		*out = -1;
	if (*out < 0 && required)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: quant method %s (tensor '%s'): no "
				     "tensor '%s'", d->where, d->method, wname, name);
	return 0;
}

/* numpy's shape of tensor i: its axes count and sizes. */
static uint32_t np_shape(const tfs_hf_deq *d, long i, uint64_t *dim)
{
	const tfs_tensor *t = tfs_model_tensor(d->st, (size_t)i);
	shape_of(t, dim);
	return t->n_dims;
}

static int bad_packed(const tfs_hf_deq *d, const char *wname, const char *what, tfs_error *err)
{
	return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quant method %s (tensor '%s'): %s",
			     d->where, d->method, wname, what);
}

/* Packed weight w (its name base + suffix) made the new tensor base (late, renamed). */
static int mark_new(tfs_hf_deq *d, long w, const char *base, tfs_error *err)
{
	if (!(d->rename[w] = strdup(base)))
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	d->role[w] = ROLE_DEQ;
	return 0;
}

/* compressed-tensors pack-quantized, X.weight_packed (I32 [rows, ceil(cols / per)]),
 * X.weight_scale ([rows, cols / group]), X.weight_shape ([rows, cols]), optional
 * X.weight_zero_point (I32 [ceil(rows / per), cols / group]): the new tensor X.weight
 * (dequant_packed). */
int tfs_hf_deq_mark_ct_packed(tfs_hf_deq *d, json_t *w, tfs_error *err)
{
	const char *strategy = json_string_value(json_object_get(w, "strategy"));
	json_t *type = json_object_get(w, "type"), *nb = json_object_get(w, "num_bits");
	json_t *gs = json_object_get(w, "group_size");
	if (!strategy || strcmp(strategy, "group"))
		return refuse(d, "pack-quantized with a strategy other than group (the converter "
			      "reads group)", err);
	if (type && (!json_is_string(type) || strcmp(json_string_value(type), "int")))
		return refuse(d, "pack-quantized of a type other than int", err);
	if (!json_is_integer(nb) || json_integer_value(nb) < 1 || json_integer_value(nb) > 16 ||
	    !json_is_integer(gs) || json_integer_value(gs) < 1)
		return refuse(d, "pack-quantized without num_bits (1 to 16) and group_size", err);
	unsigned bits = (unsigned)json_integer_value(nb);
	uint64_t group = (uint64_t)json_integer_value(gs);
	int rc = 0;
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		if (t->deleted || !ends_with(t->name, ".weight_packed"))
			continue;
		char base[1024];
		snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - 7), t->name);
		long sc, sh, zp;
		if ((rc = companion(&sc, d, base, "_scale", t->name, true, err)) ||
		    (rc = companion(&sh, d, base, "_shape", t->name, true, err)) ||
		    (rc = companion(&zp, d, base, "_zero_point", t->name, false, err)))
			break;
		/* weight_shape: the weight's [rows, cols] */
		const tfs_tensor *st = tfs_model_tensor(d->st, (size_t)sh);
		int64_t shape[2] = { 0, 0 };
		if (st->n_dims != 1 || st->ne[0] != 2 ||
		    (st->dtype != TFS_DT_I64 && st->dtype != TFS_DT_I32))
			return bad_packed(d, t->name, "its weight_shape is not 2 integers", err);
		int32_t s32[2];
		bool wide = st->dtype == TFS_DT_I64;
		int64_t got = tfs_tensor_read_raw(d->st, (size_t)sh, 0, wide ? 16 : 8,
						  wide ? (void *)shape : (void *)s32, err);
		if (got < 0)
			return (int)got;
		if (!wide) {
			shape[0] = s32[0];
			shape[1] = s32[1];
		}
		deq_packed *g = &d->pk[i];
		uint64_t wd[TFS_MAX_DIMS], sd[TFS_MAX_DIMS], zd[TFS_MAX_DIMS];
		*g = (deq_packed){ .d = d, .kind = PK_CT, .w = i, .scale = sc, .zp = zp,
				   .bits = bits, .per = 32 / bits, .group = group };
		if (shape[0] <= 0 || shape[1] <= 0)
			return bad_packed(d, t->name, "its weight_shape is not positive", err);
		g->rows = (uint64_t)shape[0];
		g->cols = (uint64_t)shape[1];
		g->ng = g->cols / group;
		if (t->dtype != TFS_DT_I32 || np_shape(d, (long)i, wd) != 2 || wd[0] != g->rows ||
		    wd[1] != (g->cols + g->per - 1) / g->per)
			return bad_packed(d, t->name, "not I32 words of its weight_shape's rows", err);
		g->wcols = wd[1];
		if (g->cols % group)
			return bad_packed(d, t->name, "its columns are no whole groups (the "
					  "converter cannot reshape them)", err);
		const tfs_tensor *s = tfs_model_tensor(d->st, (size_t)sc);
		if (!float_dtype(s->dtype) || np_shape(d, sc, sd) != 2 || sd[0] != g->rows ||
		    sd[1] != g->ng)
			return bad_packed(d, t->name, "its weight_scale is not F32/F16/BF16 "
					  "[rows, groups]", err);
		if (zp >= 0) {
			const tfs_tensor *z = tfs_model_tensor(d->st, (size_t)zp);
			if (z->dtype != TFS_DT_I32 || np_shape(d, zp, zd) != 2 ||
			    zd[0] * g->per < g->rows || zd[1] != g->ng)
				return bad_packed(d, t->name, "its weight_zero_point is not I32 "
						  "[packed rows, groups]", err);
			g->zcols = zd[1];
			d->role[zp] = ROLE_DROP;
		}
		d->role[sc] = d->role[sh] = ROLE_DROP;
		rc = mark_new(d, (long)i, base, err);
	}
	return rc;
}

/* quant_method "gptq" (bits 2, 4, 8; the converter refuses 3): X.qweight (I32
 * [in / per, out]), X.qzeros (I32 [groups, out / per]), X.scales ([groups, out]), X.g_idx
 * (I32 [in]): the new tensor X.weight [out, in] (dequant_gptq). */
int tfs_hf_deq_mark_gptq(tfs_hf_deq *d, json_t *qc, tfs_error *err)
{
	json_t *b = json_object_get(qc, "bits");
	const char *first = NULL;
	for (size_t i = 0; !first && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		first = !t->deleted && ends_with(t->name, ".qweight") ? t->name : NULL;
	}
	if (!json_is_integer(b) || (json_integer_value(b) != 2 && json_integer_value(b) != 4 &&
				    json_integer_value(b) != 8))
		return bad_packed(d, first ? first : first_quantized(d->st),
				  json_is_integer(b) && json_integer_value(b) == 3
				  ? "3-bit GPTQ is not implemented by the converter"
				  : "bits other than 2, 4 or 8", err);
	unsigned bits = (unsigned)json_integer_value(b);
	const char *fmt = json_string_value(json_object_get(qc, "checkpoint_format"));
	int rc = 0;
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *t = tfs_model_tensor(d->st, i);
		if (t->deleted || !ends_with(t->name, ".qweight"))
			continue;
		char base[1024], wname[1040];
		snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - 8), t->name);
		long gi, qz, sc;
		if ((rc = companion(&gi, d, base, ".g_idx", t->name, true, err)) ||
		    (rc = companion(&qz, d, base, ".qzeros", t->name, true, err)) ||
		    (rc = companion(&sc, d, base, ".scales", t->name, true, err)))
			break;
		deq_packed *g = &d->pk[i];
		uint64_t wd[TFS_MAX_DIMS], zd[TFS_MAX_DIMS], sd[TFS_MAX_DIMS], gd[TFS_MAX_DIMS];
		*g = (deq_packed){ .d = d, .kind = PK_GPTQ, .w = i, .scale = sc, .zp = qz,
				   .gidx = gi, .bits = bits, .per = 32 / bits,
				   .zp_plus1 = !fmt || !strcmp(fmt, "gptq") };
		const tfs_tensor *z = tfs_model_tensor(d->st, (size_t)qz);
		const tfs_tensor *s = tfs_model_tensor(d->st, (size_t)sc);
		const tfs_tensor *x = tfs_model_tensor(d->st, (size_t)gi);
		if (t->dtype != TFS_DT_I32 || z->dtype != TFS_DT_I32 || np_shape(d, (long)i, wd) != 2 ||
		    np_shape(d, qz, zd) != 2)
			return bad_packed(d, t->name, "qweight and qzeros are not 2-D I32", err);
		g->rows = wd[1];
		g->cols = wd[0] * g->per;
		if (!float_dtype(s->dtype) || np_shape(d, sc, sd) != 2 || sd[1] != g->rows ||
		    zd[0] != sd[0] || zd[1] * g->per != g->rows)
			return bad_packed(d, t->name, "scales and qzeros are not [groups, out]", err);
		if (x->dtype != TFS_DT_I32 || np_shape(d, gi, gd) != 1 || gd[0] != g->cols)
			return bad_packed(d, t->name, "g_idx is not I32 [in]", err);
		g->ng = sd[0];
		g->zcols = zd[1];
		d->role[gi] = d->role[qz] = d->role[sc] = ROLE_DROP;
		snprintf(wname, sizeof wname, "%s.weight", base);
		rc = mark_new(d, (long)i, wname, err);
	}
	return rc;
}

int tfs_hf_deq_mark_bitnet(tfs_hf_deq *d, json_t *qc, tfs_error *err)
{
	(void)qc;
	int rc = 0;
	for (size_t i = 0; !rc && i < d->n; i++) {
		const tfs_tensor *s = tfs_model_tensor(d->st, i);
		if (s->deleted || !ends_with(s->name, ".weight_scale"))
			continue;
		char wname[1024];
		snprintf(wname, sizeof wname, "%.*s", (int)(strlen(s->name) - 6), s->name);
		long w = tfs_model_find_tensor(d->st, wname);
		if (w < 0 || tfs_model_tensor(d->st, (size_t)w)->deleted)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: quant method bitnet: scale '%s' "
					     "has no weight '%s'", d->where, s->name, wname);
		const tfs_tensor *t = tfs_model_tensor(d->st, (size_t)w);
		uint64_t nel = 1, wd[TFS_MAX_DIMS];
		for (uint32_t k = 0; k < s->n_dims; k++)
			nel *= (uint64_t)s->ne[k];
		if ((t->dtype != TFS_DT_U8 && t->dtype != TFS_DT_I8) || np_shape(d, w, wd) < 1)
			return bad_packed(d, t->name, "not U8 or I8 bytes of four 2-bit values", err);
		if (!float_dtype(s->dtype) || nel != 1)
			return bad_packed(d, t->name, "its weight_scale is not one F32/F16/BF16 value",
					  err);
		uint8_t raw[4];
		int64_t got = tfs_tensor_read_raw(d->st, i, 0, tfs_dtype(s->dtype)->block_bytes, raw,
						  err);
		if (got < 0)
			return (int)got;
		deq_packed *g = &d->pk[w];
		*g = (deq_packed){ .d = d, .kind = PK_BITNET, .w = (size_t)w, .scale = (long)i,
				   .zp = -1, .bits = 2, .per = 4, .rows = 4 * wd[0], .cols = 1 };
		for (uint32_t k = 1; k < t->n_dims; k++)
			g->cols *= wd[k];
		tfs_hf_to_f32((uint32_t *)&g->div, raw, s->dtype, 1);
		d->role[i] = ROLE_DROP;
		d->role[w] = ROLE_DEQ;
	}
	return rc;
}
