/*
 * hf_moe.h - mixtures of experts in the GGUF view: how a row's experts are stacked (its
 * `moe` member, struct tfs_hf_moe) and the stacking itself (hf_moe.c).
 *
 * The converter keeps each layer's expert tensors (model.layers.N.<experts>.E.<proj>.weight)
 * until it has all n_experts x 3 of them, then writes, at that point of its reading order,
 * one 3-D tensor per projection (torch.stack in expert order: ne = [cols, rows, n_expert]),
 * in the class's projection order (Mixtral w1, w2, w3; Qwen down, gate, up).  The view
 * serves such a tensor from the experts' own bytes (views/hf.c: a concatenation source,
 * codec/model/concat.h), converted on read where the output type differs.
 */
#ifndef TFS_HF_MOE_H
#define TFS_HF_MOE_H

#include "hf_arch.h"
#include "model.h"
#include "dtype.h"

struct tfs_hf_moe_state;

/* The expert tensors of a class. */
typedef struct tfs_hf_stack tfs_hf_stack;

typedef struct tfs_hf_moe {
	const char *experts;       /* after "model.layers.N.": "block_sparse_moe.experts" */
	const char *proj[3];       /* HF projections, in the order the stacked tensors are written */
	const char *gguf[3];       /* their GGUF names (after "blk.N.") */
	uint8_t rows[3], cols[3];  /* enum tfs_hf_dim: each expert's weight shape */
	const char *const *n_keys; /* the expert count's keys (find_hparam) */
	/* The class's own handling of source tensor idx, before the experts' (NULL: none):
	 * TFS_PASSTHROUGH for the ordinary path; else 0 with *n tensors (at most 3) in out
	 * (none: the converter skips it), or an error. */
	int (*tensor)(const hparams *h, const tfs_model *st, size_t idx, const char *where,
		      tfs_hf_stack *out, size_t *n, tfs_error *err);
} tfs_hf_moe;

/* A stacked tensor to add: its name, its experts' source tensors (tfs_model indices, owned:
 * the plan takes them), and its shape as one 3-D source tensor (ne, n_dims, dtype). */
struct tfs_hf_stack {
	char name[128];
	long *parts;
	uint32_t n_parts;
	tfs_tensor shape;
	long src;                  /* without parts: the one source tensor */
	tfs_hf_slice slice;        /* a per-head slice of src (hf_plan.h), or heads 0 */
	tfs_hf_own own;            /* computed by hf_gptoss.c's reader, or kind 0 */
};

/* The size of an axis kind of the MoE rows (TFS_HF_D_EXPERTS, _FF_EXP, _FF_SHEXP, _ONE); 0
 * for any other (-1: the config does not say). */
int64_t tfs_hf_moe_dim(int d, const hparams *h);

/*
 * A checkpoint's stacked, transposed experts of layer b (Llama 4's and Qwen3-VL-MoE's
 * modify_tensors): source tensor idx is gate_up_proj ([E, hidden, 2 ff]: gate the first half
 * of its columns, up the second) or, when down, down_proj ([E, ff, hidden]); each becomes a
 * blk.b.ffn_*_exps.weight transposed on read, in out (*n: 1 or 2).  ff: the experts'
 * intermediate size (-1: the config does not say), ff_keys its keys for the shape error;
 * arch names the GGUF architecture there.  An error for a shape the config contradicts, odd
 * gate/up columns or a dtype the view does not convert.
 */
int tfs_hf_moe_transposed(const hparams *h, const tfs_model *st, size_t idx, unsigned long b,
			  bool down, int64_t ff, const char *ff_keys, const char *where,
			  tfs_hf_stack *out, size_t *n, tfs_error *err);

/*
 * Source tensor idx (HF name `name` after the class's filter_tensors, of shard `where`) of a
 * MoE row: when it is an expert's
 * tensor, it is kept (the state made on first use, in *state) and, once its layer has all
 * its experts, the layer's stacked tensors are put in out (*n of them, at most 3): 0.
 * TFS_PASSTHROUGH when it is no expert's tensor; an error for an expert the converter would
 * refuse (an index past the count, a projection it does not stack, a second copy, shapes or
 * dtypes that differ).
 */
int tfs_hf_moe_take(struct tfs_hf_moe_state **state, const tfs_hf_moe *moe, const hparams *h,
		    const tfs_model *st, size_t idx, const char *name, const char *where,
		    tfs_hf_stack *out, size_t *n, tfs_error *err);
/* After the last source tensor: an error naming an expert tensor still kept (a layer with
 * experts missing: the converter's "Unprocessed experts"); frees the state. */
int tfs_hf_moe_finish(struct tfs_hf_moe_state **state, const tfs_model *st, tfs_error *err);
void tfs_hf_moe_state_free(struct tfs_hf_moe_state *state);

#endif
