/*
 * hf_nvfp4.h - NVFP4 checkpoints (ModelOpt quant_algo NVFP4 / W4A16_NVFP4, compressed-tensors
 * nvfp4-pack-quantized) as llama.cpp de3ff81's converter writes them
 * (ModelBase._generate_nvfp4_tensors, conversion/base.py): repacked, not dequantized, into
 * ggml's NVFP4 (type 40), before any other tensor.
 *
 * In the converter's reading order, each NVFP4 weight (hf_dequant.h, tfs_hf_nvfp4_src):
 *  - an expert's (its name matches `.experts.E.(gate_proj|up_proj|down_proj).weight`, its
 *    layer `.layers.B.`, else 0) is kept until its (layer, projection) has num_local_experts
 *    (num_experts) of them, then written stacked in expert order as
 *    model.layers.B.mlp.experts.P.weight, followed by `.scale` (each expert's weight_scale_2,
 *    F32 [E]) and `.input_scale` (each one's input_scale), each left out when all its values
 *    are 1 (numpy's allclose); stacks still incomplete at the end are written then;
 *  - any other is written at once under its own name, with `.scale` (weight_scale_2, F32,
 *    all its values) and `.input_scale`, each left out when it is one value within 1e-6 of 1.
 * A row of an NVFP4 tensor is, per 64 values, 4 scale bytes (the E4M3 block scales' codes
 * without the sign bit: UE4M3) then 4 x 8 bytes, byte j of block b = value j | value j + 8
 * << 4 (the checkpoint's: value 2i low nibble, 2i + 1 high).  LlamaModel permutes q/k rows
 * (and their scales' rows) as for BF16.
 */
#ifndef TFS_HF_NVFP4_H
#define TFS_HF_NVFP4_H

#include "hf_dequant.h"
#include "hf_plan.h"

/* One tensor the converter writes for NVFP4, before mapping its name. */
typedef struct {
	char name[256];         /* X.weight, or model.layers.B.mlp.experts.P.weight (a stack) */
	bool stack;
	uint32_t n;             /* experts (stack), else 1 */
	long *w;                /* n weights, then their n block scales (st's indices) */
	uint64_t rows, cols;    /* one expert's values, numpy order */
	float *scale, *input;   /* the .scale / .input_scale values, or NULL: not written */
	size_t n_scale, n_input;
} tfs_hf_nvfp4_item;

/*
 * The NVFP4 tensors of the weights w[0..nw) (st's indices, in the converter's reading order;
 * names[k]: w[k]'s name as the converter sees it, X.weight), in the order the converter
 * writes them: *out (allocated, *n of them).  n_experts: num_local_experts/num_experts (0:
 * none).  The scales' values are read here (a few bytes a weight).
 */
int tfs_hf_nvfp4_items(tfs_hf_nvfp4_item **out, size_t *n, const tfs_model *st,
		       const tfs_hf_deq *deq, const size_t *w, char *const *names, size_t nw,
		       int64_t n_experts, tfs_error *err);
void tfs_hf_nvfp4_items_free(tfs_hf_nvfp4_item *it, size_t n);

/* Bytes [off, end) of t (own.kind TFS_HF_OWN_NVFP4) into o, from st's (the repo's) weights and
 * block scales, in bounded steps of whole rows. */
int tfs_hf_nvfp4_read(const tfs_model *st, const tfs_hf_tensor *t, uint64_t off, uint64_t end,
		      uint8_t *o, tfs_error *err);

#endif
