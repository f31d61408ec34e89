/*
 * hf_export.c - a GGUF model's tensors as a Hugging Face checkpoint holds them (hf_export.h):
 * the row of the model's architecture read backwards.
 *
 * A GGUF tensor of ne [a, b] is torch's [b, a] with the same bytes in the same order, so a
 * tensor keeps its layout; what the converter did to its values is undone on read:
 *   - Q/K rows: LlamaModel.permute put row h*d + j*(d/2) + i of head h at h*d + 2i + j;
 *     the export reads HF row h*d + j*(d/2) + i from GGUF row h*d + 2i + j;
 *   - Gemma's norms: GGUF holds w + 1; the export shows (w + 1) - 1 in float32;
 *   - XLM-R's position embeddings: the rows before pad_token_id + 1, which the converter
 *     cuts (their values are not in the GGUF), as zeros (tfs_hf_xtensor's zero_rows).
 * The values are ggml's dequantization (the model's f32 view, tfs_tensor_read_f32, bit-exact
 * with ggml for every GGML type), rounded to the export's dtype as torch rounds a float32
 * tensor: nearest even (a NaN becomes torch's 0x7FC0 in bfloat16).  Tensors the converter
 * generates (rope_freqs, Phi-3's rope factors) come back from config.json and are not
 * shown.
 */
#include "hf_export.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "hf_moe.h"
#include "hf_names.h"
#include "hf_plan_impl.h"
#include "quant.h"

/* ==== the tensor map, backwards (hf_export_kv.c: each tensor's name) ==== */

/* Tensors the converter generates from config.json: not the checkpoint's. */
static bool generated(const char *name)
{
	return !strcmp(name, "rope_freqs.weight") || !strcmp(name, "rope_factors_long.weight") ||
	       !strcmp(name, "rope_factors_short.weight");
}

/* A stacked expert tensor of the row's moe (blk.N.<moe->gguf[k]>.weight, ne [cols, rows,
 * n_expert]) as the class's checkpoints hold it: one 2-D tensor per expert,
 * model.layers.N.<moe->experts>.E.<moe->proj[k]>.weight, the expert's slice of the same
 * bytes.  1 when it is one (added), 0 when not, or an error. */
static int add_experts(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	const tfs_hf_moe *moe = x->row->moe;
	unsigned long blk;
	const char *base;
	if (!moe || !tfs_hf_index_of(t->name, "blk.", &blk, &base))
		return 0;
	int k = -1;
	for (int j = 0; j < 3; j++) {
		size_t n = moe->gguf[j] ? strlen(moe->gguf[j]) : 0;
		if (n && !strncmp(base, moe->gguf[j], n) && !strcmp(base + n, ".weight"))
			k = j;
	}
	if (k < 0)
		return 0;
	if (t->n_dims != 3 || !tfs_tensor_has_f32(x->m, i, NULL))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s: not 3-D experts of a "
				     "float form", t->name);
	uint64_t per = (uint64_t)t->ne[0] * (uint64_t)t->ne[1];
	for (int64_t e = 0; e < t->ne[2]; e++) {
		char buf[512];
		tfs_hf_xtensor *o = tfs_hf_export_push(x);
		snprintf(buf, sizeof buf, "model.layers.%lu.%s.%lld.%s.weight", blk, moe->experts,
			 (long long)e, moe->proj[k]);
		char *name = o ? strdup(buf) : NULL;
		if (!name)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		*o = (tfs_hf_xtensor){ .name = name, .src = i, .n_dims = 2,
				       .ne = { t->ne[0], t->ne[1] }, .cols = (uint64_t)t->ne[0],
				       .rows = (uint64_t)t->ne[1], .base = (uint64_t)e * per };
		x->n_t++;
	}
	return 1;
}

static int add_tensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	const tfs_hf_name *e = NULL;
	if (t->deleted || generated(t->name))
		return 0;
	int own = x->row->xtensor ? x->row->xtensor(x, i, err) : 0;
	if (own)
		return own < 0 ? own : 0;
	char *name = tfs_hf_export_mapped_name(x, i, &e);
	if (!name) {
		int rc = add_experts(x, i, err);
		return rc < 0 ? rc : rc ? 0 : tfs_error_set(err, TFS_E_UNSUPPORTED, "tensor %s has "
							     "no Hugging Face name in the %s row",
							     t->name, x->row->classes[0]);
	}
	return tfs_hf_export_add_as(x, i, name, e, err);
}

/* The first row whose GGUF architecture is arch (the converter's registry: the first class
 * registered for it), among the rows of hf_arch.c. */
int tfs_hf_export_open(tfs_hf_export **out, const tfs_model *m, int dtype, tfs_error *err)
{
	size_t alen;
	tfs_hf_export probe = { .m = m, .arch = "" };
	const char *a = tfs_hf_xkv_str(&probe, "general.architecture", &alen);
	char arch[64];
	if (!a || alen == 0 || alen >= sizeof arch)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "no general.architecture");
	memcpy(arch, a, alen);
	arch[alen] = 0;
	const tfs_hf_arch *row = tfs_hf_arch_of_gguf(arch, NULL), *first_row;
	const char *why = row ? NULL : tfs_hf_arch_not_shown(arch, &first_row);
	if (why)   /* (the table has the class: say what is missing, not that it is absent) */
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "architecture %s (%s): the Hugging "
				     "Face view does not yet undo %s", arch,
				     first_row->classes[0], why);
	if (!row)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "architecture %s has no Hugging Face "
				     "class in the table", arch);
	/* the first row of the architecture whose maps name every tensor (llama: Llama's,
	 * else Mixtral's when there are experts); the first row's refusal when none does */
	tfs_error first;
	int rc0 = 0;
	for (; row; row = tfs_hf_arch_of_gguf(arch, row)) {
		tfs_hf_export *x = calloc(1, sizeof *x);
		size_t n = tfs_model_n_tensors(m);
		if (!x)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		*x = (tfs_hf_export){ .m = m, .row = row, .arch = row->gguf, .dtype = dtype,
				      .tied = true };
		int rc = 0;
		for (size_t i = 0; !rc && i < n; i++)
			rc = add_tensor(x, i, err);
		if (!rc && row->xtensors)
			rc = row->xtensors(x, err);
		if (!rc)
			rc = tfs_hf_export_list_files(x, err);
		if (!rc) {
			*out = x;
			return 0;
		}
		tfs_hf_export_free(x);
		if (rc != TFS_E_UNSUPPORTED)
			return rc;
		if (!rc0) {
			rc0 = rc;
			first = *err;
		}
	}
	*err = first;
	return rc0;
}

void tfs_hf_export_free(tfs_hf_export *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n_t; i++) {
		free(x->t[i].name);
		free(x->t[i].vals);
	}
	free(x->t);
	free(x);
}

int tfs_hf_export_dtype(const tfs_hf_export *x) { return x->dtype; }
size_t tfs_hf_export_n_tensors(const tfs_hf_export *x) { return x->n_t; }
const tfs_hf_xtensor *tfs_hf_export_tensor(const tfs_hf_export *x, size_t i)
{
	return &x->t[i];
}

/* ==== reading ==== */

/* The source's index of HF index k (a row, or a column of a tensor tiled by columns) of a
 * tiled tensor; *run: how many indices from k on follow it there (within its unit). */
static uint64_t untile(const tfs_hf_xtensor *t, uint64_t k, uint64_t *run)
{
	uint64_t u = t->tile_unit, span = t->tile_groups * t->tile_per * u;
	if (k < t->tile_skip || k - t->tile_skip >= span) {
		*run = k < t->tile_skip ? t->tile_skip - k : UINT64_MAX;
		return k;
	}
	uint64_t j = (k - t->tile_skip) / u, o = (k - t->tile_skip) % u;
	uint64_t g = j / t->tile_per, p = j % t->tile_per;
	*run = u - o;
	return t->tile_skip + (p * t->tile_groups + g) * u + o;
}

/* The GGUF tensor (*src) and row holding HF row r: of a permuted tensor of `heads` heads,
 * of a tiled one, of a part of a tensor made of parts. */
static uint64_t gguf_row(const tfs_hf_xtensor *t, uint64_t r, size_t *src)
{
	uint64_t run;
	*src = t->src;
	if (t->n_part) {
		uint64_t group = 0;
		for (unsigned k = 0; k < t->n_part; k++)
			group += t->part_len[k];
		uint64_t g = r / group, j = r % group;
		unsigned k = 0;
		while (j >= t->part_len[k])
			j -= t->part_len[k++];
		*src = t->part_src[k];
		return t->part_base[k] + g * t->part_len[k] + j;
	}
	if (t->tile_unit && !t->tile_cols)
		return untile(t, r, &run);
	if (t->xform != TFS_HF_XF_PERMUTE_Q && t->xform != TFS_HF_XF_PERMUTE_K)
		return r;
	uint64_t d = t->rows / t->heads, half = d / 2, h = r / d, k = r % d;
	return h * d + 2 * (k % half) + k / half;
}

#define CHUNK 4096

/* Elements v[0..n) (element e of tensor t onwards) at the export's dtype, the part of them
 * inside bytes [off, off + len) copied into buf (which holds those bytes).  F16 and BF16 by
 * tfs_quantize (vector code where the CPU has it: a scalar conversion per element made
 * reading hf/ 130 MB/s); BF16 as torch rounds (c10::BFloat16's round_to_nearest_even, a NaN
 * as 0x7FC0). */
static void emit(const tfs_hf_export *x, const tfs_hf_xtensor *t, const float *v, uint64_t e,
		 uint64_t n, uint64_t off, uint64_t len, void *buf)
{
	uint64_t es = tfs_dtype(x->dtype)->block_bytes;
	float f[CHUNK];
	uint8_t o[CHUNK * 4];
	for (uint64_t done = 0; done < n;) {
		uint64_t m = n - done < CHUNK ? n - done : CHUNK;
		/* the part of elements [e + done, e + done + m) inside [off, off + len) */
		uint64_t s = (e + done) * es, a = s > off ? s : off, b = s + m * es;
		if (b > off + len)
			b = off + len;
		if (a >= b) {
			done += m;
			continue;
		}
		const float *src = v + done;
		if (t->xform == TFS_HF_XF_PLUS_ONE) {
			for (uint64_t k = 0; k < m; k++)
				f[k] = src[k] - 1.0f;
			src = f;
		}
		if (x->dtype == TFS_DT_F32) {
			memcpy(o, src, m * 4);
		} else {
			tfs_error qe = { 0 };
			(void)tfs_quantize(o, x->dtype, src, m, &qe);   /* (F16, BF16: no error) */
			for (uint64_t k = 0; x->dtype == TFS_DT_BF16 && k < m; k++)
				if (isnan(src[k]))
					memcpy(o + 2 * k, &(uint16_t){ 0x7fc0 }, 2);
		}
		memcpy((uint8_t *)buf + (a - off), o + (a - s), b - a);
		done += m;
	}
}

/* Whole rows [r0, r0 + nr) of a mixed tensor (tfs_hf_xtensor's n_src) into v, from its
 * sources: per row, n_src reads of a row's columns; transposed (rows of one outer index),
 * per source row, n_src reads of nr elements; grouped (rows of one segment), src2's rows
 * read as they are, or src's transposed segment as a transposed tensor's rows.  tmp holds
 * cols (or nr) floats. */
static int mix_rows(const tfs_hf_export *x, const tfs_hf_xtensor *t, uint64_t r0, uint64_t nr,
		    float *v, float *tmp, tfs_error *err)
{
	uint64_t s = t->n_src, per = t->cols / s;
	size_t src[2] = { t->src, t->src2 };
	int rc = 0;
	uint64_t inner = t->inner ? t->inner : 1, outer = r0 / inner, a0 = r0 % inner;
	if (t->seg_t + t->seg_n) {   /* (rows of one segment: mix_read) */
		uint64_t g = r0 / (t->seg_t + t->seg_n), j = r0 % (t->seg_t + t->seg_n);
		if (j >= t->seg_t) {
			uint64_t at = (g * t->seg_n + j - t->seg_t) * t->cols;
			return tfs_tensor_read_f32(x->m, t->src2, at, nr * t->cols, v, err);
		}
		s = 1, per = t->cols, outer = g, a0 = j, inner = t->seg_t;
	} else if (!t->transposed) {
		for (uint64_t r = r0; !rc && r < r0 + nr; r++)
			for (uint64_t k = 0; !rc && k < s; k++) {
				rc = tfs_tensor_read_f32(x->m, src[k], r * per, per, tmp, err);
				float *row = v + (r - r0) * t->cols;
				for (uint64_t w = 0; !rc && w < per; w++)
					row[t->halves ? k * per + w : w * s + k] = tmp[w];
			}
		return rc;
	}
	for (uint64_t j = 0; !rc && j < per; j++)
		for (uint64_t k = 0; !rc && k < s; k++) {
			rc = tfs_tensor_read_f32(x->m, src[k], (outer * per + j) * inner + a0, nr,
						 tmp, err);
			uint64_t col = t->halves ? k * per + j : j * s + k;
			for (uint64_t i = 0; !rc && i < nr; i++)
				v[i * t->cols + col] = tmp[i];
		}
	return rc;
}

/* Bytes [off, off + len) of a mixed tensor: whole rows computed, a bounded block at a time
 * (of one outer index when transposed). */
#define MIX_FLOATS 65536

static int64_t mix_read(const tfs_hf_export *x, const tfs_hf_xtensor *t, uint64_t off,
			uint64_t len, void *buf, tfs_error *err)
{
	uint64_t es = tfs_dtype(x->dtype)->block_bytes;
	uint64_t e = off / es, end = (off + len + es - 1) / es;
	uint64_t rows = MIX_FLOATS / t->cols ? MIX_FLOATS / t->cols : 1;
	uint64_t tmpn = t->transposed || t->seg_t ? rows : t->cols / t->n_src;
	float *v = malloc((rows * t->cols + tmpn) * sizeof *v);
	if (!v)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	int rc = 0;
	for (uint64_t r = e / t->cols; !rc && r * t->cols < end;) {
		uint64_t nr = (end - r * t->cols + t->cols - 1) / t->cols;
		if (nr > rows)
			nr = rows;
		if (t->transposed && nr > t->inner - r % t->inner)
			nr = t->inner - r % t->inner;
		uint64_t grp = t->seg_t + t->seg_n, j = grp ? r % grp : 0;
		uint64_t seg = j < t->seg_t ? t->seg_t - j : grp - j;
		if (grp && nr > seg)
			nr = seg;
		rc = mix_rows(x, t, r, nr, v, v + rows * t->cols, err);
		if (!rc)
			emit(x, t, v, r * t->cols, nr * t->cols, off, len, buf);
		r += nr;
	}
	free(v);
	return rc ? rc : (int64_t)len;
}

/* Values read from the GGUF at a time (64 KiB on the stack): each read of a source checks it
 * and advises the kernel, three system calls, which cost more than converting 16 KiB. */
#define READ_FLOATS 16384

int64_t tfs_hf_export_read(const tfs_hf_export *x, size_t i, uint64_t off, uint64_t len,
			   void *buf, tfs_error *err)
{
	const tfs_hf_xtensor *t = &x->t[i];
	uint64_t es = tfs_dtype(x->dtype)->block_bytes, total = t->rows * t->cols * es;
	if (off >= total)
		return 0;
	if (len > total - off)
		len = total - off;
	if (t->n_src)
		return mix_read(x, t, off, len, buf, err);
	float v[READ_FLOATS];
	uint64_t e = off / es, end = (off + len + es - 1) / es;
	while (e < end) {
		uint64_t r = e / t->cols, c = e % t->cols, n = t->cols - c;
		if (n > end - e)
			n = end - e;
		if (n > READ_FLOATS)
			n = READ_FLOATS;
		int rc = 0;
		size_t src;
		if (r < t->zero_rows) {   /* (zeros up to the source's first row) */
			uint64_t z = (t->zero_rows - r) * t->cols - c;
			n = n > z ? z : n;
			memset(v, 0, 4 * n);
			emit(x, t, v, e, n, off, len, buf);
			e += n;
			continue;
		}
		r -= t->zero_rows;
		uint64_t row = gguf_row(t, r, &src), run, col = c;
		if (t->tile_unit && t->tile_cols) {   /* (a run within one unit) */
			col = untile(t, c, &run);
			n = n > run ? run : n;
		} else if (!t->vals && !t->from_kv) {
			/* the next rows too while the GGUF holds them next (one read of the
			 * source for many narrow rows: a read's checks and advice cost more
			 * than a row of 64 values) */
			size_t src2;
			for (uint64_t k = 1; c + n == t->cols * k && n + t->cols <= READ_FLOATS &&
					     e + n < end && gguf_row(t, r + k, &src2) == row + k &&
					     src2 == src; k++)
				n += end - e - n < t->cols ? end - e - n : t->cols;
		}
		if (t->vals)
			memcpy(v, t->vals + e, 4 * n);
		else if (t->from_kv)   /* (add_kv checked the array holds these) */
			memcpy(v, tfs_model_kv(x->m, t->kv)->data + 12 + 4 * (t->base + e), 4 * n);
		else
			rc = tfs_tensor_read_f32(x->m, src, t->base + row * t->cols + col, n, v,
						 err);
		if (rc)
			return rc;
		emit(x, t, v, e, n, off, len, buf);
		e += n;
	}
	return (int64_t)len;
}
