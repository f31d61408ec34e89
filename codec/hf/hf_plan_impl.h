/*
 * hf_plan_impl.h - the plan's insides (codec-private), shared by hf_plan.c (the tensors and
 * the plan), hf_config.c (config.json), hf_params.c (the hyperparameter keys), hf_read.c (the
 * header and the tensors' bytes) and the rows' plan hooks (struct tfs_hf_hooks).
 */
#ifndef TFS_HF_PLAN_IMPL_H
#define TFS_HF_PLAN_IMPL_H

#include "hf_plan.h"
#include "hf_arch.h"
#include "hf_dequant.h"

#include <jansson.h>

#define GGUF_ALIGN 32
#define GGML_QUANT_VERSION 2

/* llama_ftype numbers (general.file_type) */
enum { FTYPE_ALL_F32 = 0, FTYPE_MOSTLY_F16 = 1, FTYPE_MOSTLY_Q8_0 = 7, FTYPE_MOSTLY_BF16 = 32,
       FTYPE_MOSTLY_MXFP4_MOE = 38, FTYPE_MOSTLY_NVFP4 = 39 };

struct tfs_hf_plan {
	const tfs_model *st;       /* the weights the converter's classes see: base's, or
				    * their dequantized model (deq) */
	const tfs_model *base;     /* the repo's safetensors */
	tfs_hf_deq *deq;           /* quantization_config's method (hf_dequant.c), or NULL */
	bool fp8_as_q8;            /* --fp8-as-q8: the FP8 weights (2+ dims) as Q8_0 */
	const char *arch;          /* static: the row's GGUF name */
	const tfs_hf_arch *row;
	uint32_t ftype;
	tfs_hf_kvs kvs;
	tfs_hf_kvs early;          /* keys the row's extra hook wrote (before general.type) */
	tfs_hf_tensor *t;
	size_t nt;
	uint8_t **gen;             /* per tensor: the bytes of a generated tensor, else NULL */
	uint64_t header_size, file_size;
	struct tfs_hf_moe_state *moe; /* MoE (hf_moe.c): experts kept until their layer is whole */
	bool mxfp4;                /* MXFP4 experts (GPT-OSS): general.file_type MXFP4_MOE */
};

struct tfs_hf_stack;   /* hf_moe.h */

/* A row's own steps of the plan (its `hooks` member; NULL members: none). */
struct tfs_hf_hooks {
	/* After the hparams are read, before any tensor: may change h (Qwen3.5's MTP layers
	 * counted as blocks); st: the weights. */
	int (*prepare)(hparams *h, const tfs_model *st, tfs_error *err);
	/* The class's filter_tensors after TextModel's: name (without "language_model.")
	 * renamed in place (cap bytes); false when the converter skips the tensor. */
	bool (*rename)(char *name, size_t cap, const hparams *h);
	/* A mapped tensor o of source tensor t (name table entry m): its own checks and
	 * transform (shape, dtype, gather, neg_exp); the recipe is chosen after it.  It may
	 * make *parts outputs of t (1 unless it says; parts NULL: one only), each its own call
	 * (part 0, 1, ...). */
	int (*fix)(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m, const hparams *h,
		   const char *shard, unsigned part, unsigned *parts, tfs_error *err);
	/* The tensors written before any other, found in the converter's reading order
	 * (generate_extra_tensors: GPT-OSS's MXFP4 experts): *out malloc'd, *nout of them;
	 * *mxfp4 set when general.file_type becomes MOSTLY_MXFP4_MOE. */
	int (*first)(const hparams *h, const tfs_model *st, struct tfs_hf_stack **out,
		     size_t *nout, bool *mxfp4, tfs_error *err);
	/* The size of the row's own axis kind d (>= TFS_HF_D_ROW; -1: the config does not say)
	 * and its name for messages. */
	int64_t (*dim)(int d, const hparams *h);
	const char *(*dim_text)(int d);
	/* The hooks above touch the hyperparameters only: they check tensors, or skip ones a
	 * GGUF never holds (a tied lm_head), but rename, split or compute none the maps name;
	 * so the row's maps read backwards are the checkpoint's, and the reverse view
	 * (hf_export.h) shows the row. */
	bool keys_only;
	/* keys_only but for the rename hook, which gives a tensor the maps do not name its
	 * mapped name ("x_bias" as "x.bias"): the reverse view names the tensor by the name
	 * that renames to the mapped one (hf_export.c: it, or "x.bias" as "x_bias"). */
	bool renames_back;
};

/* The hooks called, where a row has them (else: nothing changed, 0 / true). */
static inline int tfs_hf_hook_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	const struct tfs_hf_hooks *hk = h->arch->hooks;
	return hk && hk->prepare ? hk->prepare(h, st, err) : 0;
}

static inline bool tfs_hf_hook_rename(const tfs_hf_arch *row, char *name, size_t cap,
				      const hparams *h)
{
	const struct tfs_hf_hooks *hk = row->hooks;
	return !hk || !hk->rename || hk->rename(name, cap, h);
}

static inline int tfs_hf_hook_fix(const tfs_hf_arch *row, tfs_hf_tensor *o, const tfs_tensor *t,
				  const tfs_hf_name *m, const hparams *h, const char *shard,
				  unsigned part, unsigned *parts, tfs_error *err)
{
	const struct tfs_hf_hooks *hk = row->hooks;
	return hk && hk->fix ? hk->fix(o, t, m, h, shard, part, parts, err) : 0;
}

/* hf_plan_keys.c: the plan's keys in the converter's order (set_vocab first: Gemma 3's
 * token_embd cut to the tokenizer's rows; cls: the class the row was found by). */
int tfs_hf_plan_keys(tfs_hf_plan *p, const tfs_hf_files *files, const hparams *h,
		     const char *cls, const tfs_hf_opts *o, tfs_error *err);

/* A source tensor in the converter's reading order. */
typedef struct {
	const char *shard;         /* the file's name: the converter reads shards in its order */
	const char *path;          /* for messages */
	const char *name;
	size_t idx;
	bool late;                 /* a new tensor of dequant_model's (after all the others) */
} tfs_hf_src_ref;

/* hf_plan.c, also for hf_mmproj.c: the source tensors in the converter's reading order
 * (shards by file name, then names, deq's new tensors last; deq may be NULL; *out allocated,
 * *ns of them); general.file_type of an outtype (UINT32_MAX: auto, chosen by the tensors). */
int tfs_hf_read_order(tfs_hf_src_ref **out, size_t *ns, const tfs_model *st,
		      const tfs_hf_deq *deq, tfs_error *err);
uint32_t tfs_hf_outtype_ftype(tfs_hf_outtype t);
/* hf_plan_keys.c: the element count of the plan's tensors (general.size_label's). */
uint64_t tfs_hf_plan_n_params(const tfs_hf_plan *p);

/* hf_plan.c: the header's size and each tensor's offset (after the keys and tensors are
 * set; hf_mmproj.c's plan too). */
int tfs_hf_plan_layout(tfs_hf_plan *p);

/* hf_config.c: h->file (read, h->where set) as the converter's hparams for row h->arch:
 * h->root and h->rope built, the sizes read and checked. */
int tfs_hf_read_hparams(hparams *h, tfs_error *err);
void tfs_hf_hparams_free(hparams *h);
/* hf_params.c: the hyperparameter keys (TextModel.set_gguf_parameters, then the row's),
 * general.file_type among them. */
int tfs_hf_param_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err);

/* hf_deepseek.c: a sliced tensor's (t->slice) source elements [e0, e0 + cnt) in output
 * order into buf, in the source's dtype. */
int tfs_hf_slice_read(const tfs_model *st, const tfs_hf_tensor *t, uint64_t e0, uint64_t cnt,
		      uint8_t *buf, tfs_error *err);

/* hf_bert.c: BertModel's keys (causal false, pooling type, classifier labels), its
 * filter_tensors (then BERT's encoder.layer.N. as model.layers.N.) and its check of
 * position_embd / token_types; NomicBertModel and ModernBertModel subclass it. */
int tfs_hf_bert_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err);
bool tfs_hf_bert_rename(char *name, size_t cap, const hparams *h);
int tfs_hf_bert_fix(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m,
		    const hparams *h, const char *shard, unsigned part, unsigned *parts,
		    tfs_error *err);

static inline uint64_t tfs_hf_pad(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

#endif
