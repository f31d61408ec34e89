/*
 * hf_plan_impl.h - the plan's insides (codec-private), shared by hf_plan.c (the tensors and
 * the plan), hf_params.c (config.json and the hyperparameter keys) and hf_read.c (the header
 * and the tensors' bytes).
 */
#ifndef TFS_HF_PLAN_IMPL_H
#define TFS_HF_PLAN_IMPL_H

#include "hf_plan.h"

#include <jansson.h>

#define GGUF_ALIGN 32
#define GGML_QUANT_VERSION 2

/* llama_ftype numbers (general.file_type) */
enum { FTYPE_ALL_F32 = 0, FTYPE_MOSTLY_F16 = 1, FTYPE_MOSTLY_Q8_0 = 7, FTYPE_MOSTLY_BF16 = 32 };

enum arch_family { FAM_LLAMA, FAM_QWEN2, FAM_QWEN3 };

struct tfs_hf_plan {
	const tfs_model *st;
	const char *arch;          /* static */
	enum arch_family fam;
	uint32_t ftype;
	tfs_hf_kvs kvs;
	tfs_hf_tensor *t;
	size_t nt;
	uint8_t **gen;             /* per tensor: the bytes of a generated tensor, else NULL */
	uint64_t header_size, file_size;
};

/* What config.json says, as the checks and keys use it. */
typedef struct {
	const char *where;         /* "dir/config.json" for messages */
	json_t *root;
	int64_t n_layer, n_head, n_kv, hidden, ff, vocab, head_dim;   /* -1: not given */
	bool has_head_dim;
} hparams;

/* hf_params.c: config.json's sizes into h (h->root and h->where set), checked. */
int tfs_hf_read_hparams(hparams *h, tfs_error *err);
/* hf_params.c: the hyperparameter keys (Model.set_gguf_parameters, then LlamaModel's or
 * Qwen2Model's), general.file_type among them. */
int tfs_hf_param_keys(tfs_hf_kvs *l, const tfs_hf_plan *p, const hparams *h, tfs_error *err);

static inline uint64_t tfs_hf_pad(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

#endif
