/*
 * hf_nvfp4.h - NVFP4 checkpoints (ModelOpt quant_algo NVFP4 / W4A16_NVFP4, compressed-tensors
 * nvfp4-pack-quantized) as llama.cpp de3ff81's converter writes them
 * (ModelBase._generate_nvfp4_tensors, conversion/base.py): repacked, not dequantized, into
 * ggml's NVFP4 (type 40), before any other tensor.
 *
 * In the converter's reading order, each NVFP4 weight (hf_dequant.h, tfs_hf_nvfp4_src):
 *  - Gemma 4 first (Gemma4Model._generate_nvfp4_tensors): a layer's router.per_expert_scale
 *    r, when all num_experts experts' down_proj have a weight_scale_2 s, is folded into
 *    them (expert e's: s * r[e], float32) and popped (no ffn_down_exps.scale of its own);
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
 * (and their scales' rows) as for BF16.  Qwen3.5 (dense and MoE, _LinearAttentionVReorderBase.
 * _transform_nvfp4_weight) reorders the value heads of linear_attn's in_proj_qkv (its V
 * rows), in_proj_z, in_proj_a, in_proj_b (rows, with their scales' rows) and out_proj (its
 * columns, in blocks of 16 with their scales: linear_value_head_dim a multiple of 16, else
 * the converter's assert and a refusal here).
 */
#ifndef TFS_HF_NVFP4_H
#define TFS_HF_NVFP4_H

#include "hf_dequant.h"
#include "hf_moe.h"

/* One tensor the converter writes for NVFP4, and its scale tensors. */
typedef struct {
	/* the NVFP4 tensor: its GGUF name, its shape (ne [cols, rows] or [cols, rows, E]),
	 * own TFS_HF_OWN_NVFP4; a stack's parts: its E weights, then their E block scales */
	tfs_hf_stack s;
	long slot;              /* the required tensor it is (the plan's seen[]), or -1 */
	float *scale, *input;   /* the .scale / .input_scale values, or NULL: not written */
	size_t n_scale, n_input;
} tfs_hf_nvfp4_item;

/* Whether source tensor `name` (after filter_tensors) is one the NVFP4 path may take: Gemma
 * 4's router.per_expert_scale (Gemma4Model._generate_nvfp4_tensors folds it into its
 * layer's down_proj experts' weight_scale_2 and pops it). */
bool tfs_hf_nvfp4_fold_source(const hparams *h, const char *name);

/*
 * The NVFP4 tensors of the weights w[0..nw) (st's indices, in the converter's reading order;
 * names[k]: w[k]'s name after filter_tensors, X.weight), in the order the converter writes
 * them, named for h's row: *out (allocated, *n of them).  o[0..no) (onames: their names) are
 * the other tensors tfs_hf_nvfp4_fold_source takes, in reading order; popped[j] is set for
 * each one the converter pops (its values folded into the experts' scales, not written).
 * The scales' values are read here (a few bytes a weight).  An error where the converter
 * fails (a name it cannot map, experts of different shapes, a partial fold).
 */
int tfs_hf_nvfp4_items(tfs_hf_nvfp4_item **out, size_t *n, const tfs_model *st,
		       const tfs_hf_deq *deq, const hparams *h, const size_t *w,
		       char *const *names, size_t nw, const size_t *o, char *const *onames,
		       size_t no, bool *popped, tfs_error *err);
void tfs_hf_nvfp4_items_free(tfs_hf_nvfp4_item *it, size_t n);

/* Bytes [off, end) of an NVFP4 tensor of ne [cols, rows, experts] (ne[2] 0: one) into o,
 * from st's weights w[e] and block scales s[e], q/k rows permuted in own->width heads (0: not),
 * value heads reordered as own->v says, in bounded steps of whole rows. */
int tfs_hf_nvfp4_read(const tfs_model *st, const long *w, const long *s, const tfs_hf_own *own,
		      const int64_t *ne, uint64_t off, uint64_t end, uint8_t *o, tfs_error *err);

#endif
