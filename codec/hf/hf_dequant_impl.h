/*
 * hf_dequant_impl.h - what hf_dequant.c (the methods' table, the simple scales, the model)
 * and hf_dequant_packed.c (integer-packed weights: compressed-tensors pack-quantized, GPTQ)
 * share: the dequantized model's state, its per-tensor roles, small helpers.
 */
#ifndef TFS_HF_DEQUANT_IMPL_H
#define TFS_HF_DEQUANT_IMPL_H

#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "hf_dequant.h"
#include "model_impl.h"

enum { ROLE_KEEP, ROLE_DEQ, ROLE_DROP };

/* A weight dequantized as weight.float() * scale (dequant_simple). */
typedef struct {
	struct tfs_hf_deq *d;
	size_t i;               /* the weight's tensor in st */
	long scale;             /* its scale tensor in st */
	uint32_t nd;            /* the weight's axes, numpy order */
	uint64_t dim[TFS_MAX_DIMS];
	uint64_t div[TFS_MAX_DIMS];    /* the block along each axis (1: none) */
	uint64_t stride[TFS_MAX_DIMS]; /* the scale's stride per weight axis (0: broadcast) */
} deq_simple;

/* An integer-packed weight: compressed-tensors' pack-quantized (dequant_packed) or GPTQ's
 * (dequant_gptq); a new tensor of the converter (new_tensors: after all others). */
enum { PK_CT = 1, PK_GPTQ, PK_BITNET };
typedef struct {
	struct tfs_hf_deq *d;
	int kind;
	size_t w;               /* the packed words (I32): its tensor in st */
	long scale, zp, gidx;   /* scales; zero points (-1: none); GPTQ's g_idx */
	unsigned bits, per;     /* bits a value, values a 32-bit word */
	uint64_t rows, cols;    /* the weight's shape, numpy order */
	uint64_t group;         /* compressed-tensors: the group size */
	uint64_t ng;            /* the scales' columns (CT: groups; GPTQ: rows) */
	uint64_t wcols, zcols;  /* words a row of the packed weight, of the zero points */
	bool zp_plus1;          /* GPTQ's checkpoint_format "gptq": zeros + 1 */
	float div;              /* bitnet: the scale the values are divided by */
} deq_packed;

struct tfs_hf_deq {
	const tfs_model *st;
	tfs_model *m;
	size_t n;
	uint8_t *role;          /* per tensor of st */
	bool *fp8;
	deq_simple *w;          /* per tensor: its dequantization (role DEQ) */
	deq_packed *pk;         /* per tensor: its packed dequantization (kind != 0) */
	char **rename;          /* per tensor: its new name (a packed weight's), or NULL */
	tfs_hf_nvfp4_src *nv;   /* per tensor: an NVFP4 weight's sources (scale -1: none) */
	bool nvfp4;             /* prepare_tensors' _is_nvfp4 */
	const char *method;
	const char *where;
};


#define STEP 8192   /* elements per step: ~100 KiB of scratch */

/* A computed float32 tensor's read of bytes [off, off + len): the whole elements they touch,
 * STEP at a time, each step computed by step(g, first element, count, f, scratch) into f
 * (STEP floats) and its bytes copied out.  The step's scratch is the caller's. */
typedef int (*deq_step_fn)(const void *g, uint64_t e0, uint64_t n, float *f, uint8_t *scratch,
			   tfs_error *err);
static inline int deq_read_steps(void *buf, uint64_t len, uint64_t off, deq_step_fn step,
				 const void *g, float *f, uint8_t *scratch, tfs_error *err)
{
	int rc = 0;
	for (uint64_t pos = off; !rc && pos < off + len;) {
		uint64_t e0 = pos / 4, e1 = (off + len + 3) / 4;
		if (e1 - e0 > STEP)
			e1 = e0 + STEP;
		rc = step(g, e0, e1 - e0, f, scratch, err);
		uint64_t end = e1 * 4 < off + len ? e1 * 4 : off + len;
		if (!rc)
			memcpy((uint8_t *)buf + (pos - off), (uint8_t *)f + (pos - e0 * 4),
			       (size_t)(end - pos));
		pos = end;
	}
	return rc;
}

static inline bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static inline void shape_of(const tfs_tensor *t, uint64_t *dim)
{
	for (uint32_t k = 0; k < t->n_dims; k++)
		dim[k] = (uint64_t)t->ne[t->n_dims - 1 - k];
}

static inline bool float_dtype(int dt)
{
	return dt == TFS_DT_F32 || dt == TFS_DT_F16 || dt == TFS_DT_BF16;
}

/* The first tensor of st that is not a plain float, for a refusal's message. */
static inline const char *first_quantized(const tfs_model *st)
{
	for (size_t i = 0; i < tfs_model_n_tensors(st); i++) {
		const tfs_tensor *t = tfs_model_tensor(st, i);
		if (!t->deleted && !float_dtype(t->dtype))
			return t->name;
	}
	return tfs_model_n_tensors(st) ? tfs_model_tensor(st, 0)->name : "(none)";
}

/* A refusal of what the converter does not read (its NotImplementedError or assert), one
 * line naming the method and what. */
static inline int refuse(const tfs_hf_deq *d, const char *what, tfs_error *err)
{
	return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quant method %s (tensor '%s'): %s",
			     d->where, d->method, first_quantized(d->st), what);
}

/* compressed-tensors pack-quantized (w: the config group's "weights"), GPTQ (qc: the
 * quantization_config): the packed weights marked (hf_dequant_packed.c). */
int tfs_hf_deq_mark_ct_packed(tfs_hf_deq *d, json_t *w, tfs_error *err);
int tfs_hf_deq_mark_gptq(tfs_hf_deq *d, json_t *qc, tfs_error *err);
/* quant_method bitnet: X.weight (U8/I8, four 2-bit values a byte along the rows) with its
 * one-value X.weight_scale, in place (dequant_bitnet). */
int tfs_hf_deq_mark_bitnet(tfs_hf_deq *d, json_t *qc, tfs_error *err);
/* Reads a packed weight's float32 bytes (ctx: its deq_packed). */
extern const tfs_computed_ops tfs_hf_deq_packed_ops;

#endif
