/*
 * hf_read.c - the bytes of the file a plan describes: its header, and any range of a tensor
 * computed from the source tensor's bytes (rows permuted by offset arithmetic, conversions
 * on bounded chunks).
 */
#include "hf_plan_impl.h"
#include "hf_convert.h"
#include "hf_gptoss.h"
#include "hf_nvfp4.h"
#include "hf_sleef.h"

#include <stdlib.h>
#include <string.h>

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
		rel += tfs_hf_pad(t->nbytes, GGUF_ALIGN);
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

/* Rows per source row of t and its element count per row (the outermost axis is rows). */
static void row_shape(const tfs_hf_tensor *t, uint64_t *rows, uint64_t *inner)
{
	*rows = (uint64_t)t->ne[t->n_dims - 1];
	*inner = 1;
	for (uint32_t d = 0; d + 1 < t->n_dims; d++)
		*inner *= (uint64_t)t->ne[d];
}

/* Unit u of a gather's output is the source's unit (u mod groups) x per + u / groups. */
static uint64_t gather_unit(const tfs_hf_gather *g, uint64_t x, uint64_t *left)
{
	uint64_t u = x / g->unit, j = x % g->unit;
	*left = g->unit - j;
	return ((u % g->groups) * g->per + u / g->groups) * g->unit + j;
}

/* Where element e of output tensor t (counted in its source's elements) is among its source
 * tensor's elements; *run: how many elements from there are the output's next ones in order
 * (at least 1: the rest of a permuted row, of a gathered unit, or of the tensor). */
static uint64_t src_elem(const tfs_hf_tensor *t, uint64_t e, uint64_t *run)
{
	uint64_t rows, inner, left;
	const tfs_hf_gather *g = &t->gather;
	row_shape(t, &rows, &inner);
	if (g->kind == TFS_HF_GATHER_SPLIT && g->unit)
		inner = g->unit;   /* rows of its own size (hf_plan.h) */
	uint64_t r = e / inner, col = e % inner;
	uint64_t span = g->groups * g->per * g->unit;
	if (t->perm_heads || g->kind == TFS_HF_GATHER_SPLIT) {
		*run = inner - col;
		return t->perm_heads ? perm_row(r, rows, t->perm_heads) * inner + col
				     : (r * g->groups + g->skip) * inner + col;
	}
	if (g->kind == TFS_HF_GATHER_SEGS) {
		uint64_t at = g->skip, rr = r;
		for (int s = 0; s < 3 && g->len[s]; s++) {
			if (rr < g->groups * g->len[s] || s == 2 || !g->len[s + 1]) {
				uint64_t grp = rr / g->len[s], j = rr % g->len[s];
				*run = (g->len[s] - j) * inner - col;
				return (grp * g->per + at + j) * inner + col;
			}
			rr -= g->groups * g->len[s];
			at += g->len[s];
		}
	}
	if (g->kind == TFS_HF_GATHER_ROWS && r >= g->skip && r - g->skip < span) {
		uint64_t from = g->skip + gather_unit(g, r - g->skip, &left);
		*run = left * inner - col;
		return from * inner + col;
	}
	if (g->kind == TFS_HF_GATHER_COLS && col >= g->skip && col - g->skip < span) {
		uint64_t from = g->skip + gather_unit(g, col - g->skip, &left);
		*run = left;
		return r * inner + from;
	}
	if (g->kind == TFS_HF_GATHER_ROWS)   /* rows before the reordered ones */
		*run = (r < g->skip ? g->skip : rows) * inner - e;
	else if (g->kind == TFS_HF_GATHER_COLS)
		*run = col < g->skip ? g->skip - col : inner - col;
	else
		*run = rows * inner - e;
	return e;
}

int tfs_hf_tensor_locate(const tfs_hf_plan *p, size_t i, uint64_t off, uint64_t *src_off,
			 uint64_t *run)
{
	if (i >= p->nt || p->t[i].recipe != TFS_HF_COPY || off >= p->t[i].nbytes)
		return TFS_PASSTHROUGH;
	const tfs_hf_tensor *t = &p->t[i];
	uint64_t es = tfs_dtype(t->src_dtype)->block_bytes, n;
	*src_off = src_elem(t, off / es, &n) * es + off % es;
	*run = n * es - off % es;
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

/* Bytes [off, off+len) of t's source bytes; a stacked expert tensor's (MoE) are its parts'
 * one after another, read part by part. */
static int read_src(const tfs_hf_plan *p, const tfs_hf_tensor *t, uint64_t off, uint64_t len,
		    void *buf, tfs_error *err)
{
	if (!t->n_parts)
		return tfs_tensor_read_exact(p->st, (size_t)t->src, off, len, buf, err);
	uint64_t part = tfs_model_tensor(p->st, (size_t)t->parts[0])->nbytes;
	for (uint64_t done = 0; done < len;) {
		uint64_t k = (off + done) / part, in = (off + done) % part;
		uint64_t n = part - in < len - done ? part - in : len - done;
		if (k >= t->n_parts)
			return tfs_error_set(err, TFS_E_IO, "GGUF view: tensor '%s': read past its "
					     "experts", t->name);
		int rc = tfs_tensor_read_exact(p->st, (size_t)t->parts[k], in, n, (uint8_t *)buf + done,
					       err);
		if (rc)
			return rc;
		done += n;
	}
	return 0;
}

/* The BF16 values of [off, end) of a copied tensor read into o quieted as the converter
 * does; a value cut by either end is read whole from the source. */
static int quiet_range(const tfs_hf_plan *p, const tfs_hf_tensor *t, uint64_t off, uint64_t end,
		       uint8_t *o, tfs_error *err)
{
	uint64_t a = (off + 1) / 2 * 2, b = end / 2 * 2;
	if (b > a)
		quiet_bf16(o + (a - off), (size_t)((b - a) / 2));
	uint64_t cut[2] = { off % 2 ? off - 1 : UINT64_MAX, end % 2 ? end - 1 : UINT64_MAX };
	for (int k = 0; k < 2; k++) {
		if (cut[k] == UINT64_MAX || (k == 1 && cut[1] == cut[0]))
			continue;
		uint8_t v[2];
		uint64_t run, src = src_elem(t, cut[k] / 2, &run) * 2;
		int rc = read_src(p, t, src, 2, v, err);
		if (rc)
			return rc;
		quiet_bf16(v, 1);
		for (uint64_t x = cut[k]; x < cut[k] + 2; x++)
			if (x >= off && x < end)
				o[x - off] = v[x - cut[k]];
	}
	return 0;
}

/* A copied tensor: bytes map 1:1 within a run (src_elem), read straight into o. */
static int read_copy(const tfs_hf_plan *p, const tfs_hf_tensor *t, uint64_t off, uint64_t end,
		     uint8_t *o, tfs_error *err)
{
	uint64_t es = tfs_dtype(t->src_dtype)->block_bytes;
	for (uint64_t pos = off; pos < end;) {
		uint64_t run, src = src_elem(t, pos / es, &run) * es + pos % es;
		uint64_t n = run * es - pos % es;
		if (n > end - pos)
			n = end - pos;
		int rc = read_src(p, t, src, n, o + (pos - off), err);
		if (rc)
			return rc;
		pos += n;
	}
	return t->quiet_nans ? quiet_range(p, t, off, end, o, err) : 0;
}

/* Gemma's norm + 1 on n float32 values widened from src_dtype, as torch adds in the
 * tensor's dtype: float32 for F32 and BF16 (widened before), F16 for F16 (the float32 sum
 * rounded to F16, as torch's CPU half add does). */
static void plus_one(uint32_t *f, int src_dtype, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x;
		memcpy(&x, &f[i], 4);
		x += 1.0f;
		memcpy(&f[i], &x, 4);
		if (src_dtype == TFS_DT_F16)
			f[i] = tfs_hf_f16_to_f32(tfs_hf_f32_to_f16(f[i]));
	}
}

static uint64_t tensor_elems(const tfs_hf_tensor *t)
{
	uint64_t n = 1;
	for (uint32_t d = 0; d < t->n_dims; d++)
		n *= (uint64_t)t->ne[d];
	return n;
}

/* A converted tensor: whole output blocks, never across a permuted row, CHUNK_ELEMS at a
 * time through float32. */
static int read_convert(const tfs_hf_plan *p, const tfs_hf_tensor *t, uint64_t off,
			uint64_t end, uint8_t *o, tfs_error *err)
{
	const tfs_dtype_info *od = tfs_dtype(t->dtype), *sd = tfs_dtype(t->src_dtype);
	uint64_t ob = od->block_elems, obb = od->block_bytes, ses = sd->block_bytes;
	uint8_t *sbuf = malloc(CHUNK_ELEMS * 4 + CHUNK_ELEMS * 4 + CHUNK_ELEMS * 4);
	if (!sbuf)
		return tfs_error_set(err, TFS_E_NOMEM, "GGUF view: out of memory");
	uint32_t *fbuf = (uint32_t *)(sbuf + CHUNK_ELEMS * 4);
	uint8_t *obuf = sbuf + 2 * CHUNK_ELEMS * 4;
	uint64_t u = off / obb, u_end = (end + obb - 1) / obb;
	const uint64_t chunk_units = CHUNK_ELEMS / ob;
	int rc = 0;
	while (u < u_end && !rc) {
		uint64_t e = u * ob, n = u_end - u;
		if (n > chunk_units)
			n = chunk_units;
		if (t->slice.heads)   /* DeepSeek's per-head slices (hf_deepseek.c) */
			rc = tfs_hf_slice_read(p->st, t, e, n * ob, sbuf, err);
		for (uint64_t k = 0; k < n * ob && !rc && !t->slice.heads;) {   /* run by run */
			uint64_t run, src = src_elem(t, e + k, &run);
			if (run > n * ob - k)
				run = n * ob - k;
			rc = read_src(p, t, src * ses, run * ses, sbuf + k * ses, err);
			k += run;
		}
		if (rc)
			break;
		tfs_hf_to_f32(fbuf, sbuf, t->src_dtype, (size_t)(n * ob));
		if (t->neg_exp)
			tfs_hf_neg_exp(fbuf, (size_t)(n * ob));
		if (t->softplus)   /* which values SLEEF computes: their place in the tensor */
			tfs_hf_softplus(fbuf, (size_t)(n * ob), e, tensor_elems(t));
		if (t->plus_one)
			plus_one(fbuf, t->src_dtype, (size_t)(n * ob));
		tfs_hf_from_f32(obuf, t->dtype, fbuf, (size_t)(n * ob));
		uint64_t lo = u * obb, hi = (u + n) * obb;
		uint64_t a = lo > off ? lo : off, b = hi < end ? hi : end;
		memcpy(o + (a - off), obuf + (a - lo), (size_t)(b - a));
		u += n;
	}
	free(sbuf);
	return rc;
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
	int rc = t->own.kind == TFS_HF_OWN_NVFP4
		 ? tfs_hf_nvfp4_read(p->base, t->n_parts ? t->parts : &t->src, t->n_parts ?
				     t->parts + t->n_parts : &t->own.src2, &t->own, t->ne, off,
				     off + len, out, err)
		 : t->own.kind ? tfs_hf_own_read(p->st, t, off, off + len, out, err)
		 : t->recipe == TFS_HF_COPY ? read_copy(p, t, off, off + len, out, err)
					    : read_convert(p, t, off, off + len, out, err);
	return rc ? rc : (int64_t)len;
}
