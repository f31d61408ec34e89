/*
 * qplan.h - llama-quantize's plan for a model: the type of every tensor and the keys it
 * changes, decided from the header alone (no tensor byte is read).
 *
 * The reference is llama_model_quantize of llama.cpp 0.5.0 (libllama of npm
 * @node-llama-cpp/linux-x64 3.22.1), src/llama-quant.cpp: tensor_allows_quantization,
 * llama_tensor_get_type(_impl), tensor_type_fallback, tensor_requires_imatrix and
 * llama_model_quantize_impl.  The file it writes is, in order:
 *  1. GGUF v3; the source's keys in their order, except that general.quantization_version
 *     (u32 2) and general.file_type (u32, the llama_ftype) are removed from where they were
 *     and appended, in that order, and split.no / split.count / split.tensors.count are
 *     removed; then, after these, the keys llama-quantize passes as overrides (the
 *     quantize.imatrix.* keys when it is given an importance matrix), each removed and
 *     appended likewise;
 *  2. the tensor infos sorted by layer (the N of a "blk.N." prefix, -1 without one), then
 *     by name (bytewise); n_dims as ggml counts them (trailing dimensions of 1 dropped, at
 *     least 1);
 *  3. the data section at the next multiple of 32, each tensor's bytes zero-padded to 32
 *     (general.alignment is copied but not followed: with another value than 32 the file is
 *     one ggml refuses to read; the plan, for tensorfs' writer, pads as the key says):
 *     a tensor whose type does not change is copied, every other one is its values as
 *     float32 (F16/BF16/quantized sources dequantized) quantized by ggml_quantize_chunk,
 *     expert by expert (ne[2]) with that expert's row of the importance matrix.
 *
 * A plan is computed once (tfs_qplan_new) and read through borrowed pointers until
 * tfs_qplan_free.  It depends only on the model's accessors (model/), the dtype table and
 * the quantizers' capabilities (num/) and the importance matrix's entries (imatrix.h).
 * The file types' names are qplan_ftype.c, llama.cpp's rules qplan_rules.c, the plan
 * qplan.c.
 */
#ifndef TFS_QPLAN_H
#define TFS_QPLAN_H

#include "model.h"
#include "dtype.h"
#include "imatrix.h"

/* ==== llama.cpp's file types (enum llama_ftype, the value of general.file_type) ==== */

enum {
	TFS_FTYPE_ALL_F32 = 0, TFS_FTYPE_F16 = 1, TFS_FTYPE_Q4_0 = 2, TFS_FTYPE_Q4_1 = 3,
	TFS_FTYPE_Q8_0 = 7, TFS_FTYPE_Q5_0 = 8, TFS_FTYPE_Q5_1 = 9, TFS_FTYPE_Q2_K = 10,
	TFS_FTYPE_Q3_K_S = 11, TFS_FTYPE_Q3_K_M = 12, TFS_FTYPE_Q3_K_L = 13,
	TFS_FTYPE_Q4_K_S = 14, TFS_FTYPE_Q4_K_M = 15, TFS_FTYPE_Q5_K_S = 16,
	TFS_FTYPE_Q5_K_M = 17, TFS_FTYPE_Q6_K = 18, TFS_FTYPE_IQ2_XXS = 19,
	TFS_FTYPE_IQ2_XS = 20, TFS_FTYPE_Q2_K_S = 21, TFS_FTYPE_IQ3_XS = 22,
	TFS_FTYPE_IQ3_XXS = 23, TFS_FTYPE_IQ1_S = 24, TFS_FTYPE_IQ4_NL = 25,
	TFS_FTYPE_IQ3_S = 26, TFS_FTYPE_IQ3_M = 27, TFS_FTYPE_IQ2_S = 28, TFS_FTYPE_IQ2_M = 29,
	TFS_FTYPE_IQ4_XS = 30, TFS_FTYPE_IQ1_M = 31, TFS_FTYPE_BF16 = 32,
	TFS_FTYPE_TQ1_0 = 36, TFS_FTYPE_TQ2_0 = 37, TFS_FTYPE_MXFP4_MOE = 38,
	TFS_FTYPE_Q1_0 = 40, TFS_FTYPE_Q2_0 = 41,
};

/* The file type a name stands for, as llama-quantize reads its type argument: a name of its
 * list in any case ("Q4_K_M", "q4_k_m"; "Q3_K", "Q4_K", "Q5_K" are the _M mixes; "F32" is
 * ALL_F32), or the decimal number of one; -1 when none.  COPY (a copy without quantizing)
 * is not a plan and is refused. */
int tfs_ftype_parse(const char *name);
/* llama-quantize's name of ftype ("Q4_K_M"), or NULL for a number it has no name for. */
const char *tfs_ftype_name(int ftype);
/* Appends the names tfs_ftype_parse takes, llama-quantize's order, ", " between them (for
 * an error message listing the valid types).  0 or TFS_E_NOMEM. */
int tfs_ftype_list(tfs_buf *out);
/* The tensor type of an ftype before its mix's rules (llama_ftype_get_default_type:
 * Q4_K for Q4_K_M, IQ2_XS for IQ2_S...), or -1. */
int tfs_ftype_base_dtype(int ftype);

/* ==== the plan ==== */

typedef struct {
	/* An importance matrix given to the quantizer (llama's params->imatrix), or NULL.  Its
	 * presence changes some types (IQ3_XXS, IQ4_NL/XS and Q4_0/Q5_0 mixes); the IQ1/IQ2/
	 * IQ3_XXS types, and Q2_K in a Q2_K_S file, need an entry for the tensor; an entry of
	 * another size than ne[0] x ne[2] is refused as llama.cpp refuses it. */
	const tfs_imatrix *imatrix;
	bool allow_requantize;     /* --allow-requantize: quantized sources may be converted */
	bool leave_output;         /* --leave-output-tensor: output.weight keeps its type */
	bool pure;                 /* --pure: every quantized tensor the file type's base type */
	bool set_output_type;      /* --output-tensor-type output_type (a dtype id) */
	int output_type;
	bool set_token_embd_type;  /* --token-embedding-type token_embd_type */
	int token_embd_type;
	/* The quantize.imatrix.* keys llama-quantize adds when given an imatrix file: added
	 * only when imatrix_file is not NULL.  Strings are cut to 127 bytes as it cuts them;
	 * imatrix_dataset NULL or imatrix_chunks <= 0 leave their key out. */
	const char *imatrix_file;
	const char *imatrix_dataset;
	int64_t imatrix_entries;
	int64_t imatrix_chunks;
} tfs_qplan_opts;

typedef struct {
	size_t tensor;          /* its index in the model (tfs_model_tensor) */
	const char *name;       /* the model's, borrowed */
	int src_dtype;          /* the type it has in the model */
	int dtype;              /* the type it is written as */
	uint32_t n_dims;        /* as written: ggml_n_dims (trailing 1s dropped, >= 1) */
	int64_t ne[4];
	uint64_t nbytes;        /* bytes written (before padding) */
	uint64_t offset;        /* in the data section (a multiple of the alignment) */
	bool convert;           /* dtype != src_dtype: the bytes are computed */
	bool fallback;          /* the mix's type did not fit the rows and another was used */
} tfs_qtensor;

typedef enum {
	TFS_QPLAN_KV_REMOVE,    /* the key is left out of the output */
	TFS_QPLAN_KV_APPEND,    /* the key (removed from its place if the model has it) is
				 * appended with this value */
} tfs_qkv_op;

typedef struct {
	tfs_qkv_op op;
	const char *key;        /* the plan's */
	uint32_t type;          /* tfs_gguf_type (APPEND) */
	const uint8_t *data;    /* the GGUF payload (APPEND), the plan's */
	uint64_t len;
} tfs_qkv;

typedef struct tfs_qplan tfs_qplan;

/*
 * The plan of quantizing m (a GGUF model: its keys name the architecture and hyper-
 * parameters) to ftype with options o (NULL or all zero: llama-quantize's defaults).  Fails, as
 * llama_model_quantize fails, with err naming the tensor: TFS_E_INVALID for a file type
 * that is not one, a type that needs an importance matrix without one (or without an entry
 * for the tensor, or one of the wrong size), a quantized source tensor to convert without
 * allow_requantize, a row length no fallback type fits; TFS_E_FORMAT for missing keys
 * (general.architecture, <arch>.block_count) or an expert tensor whose layer cannot be
 * told; TFS_E_UNSUPPORTED for what llama.cpp would do but tensorfs cannot (a type it has
 * no quantizer for, a source type with no float32 view, more than 4 dimensions).
 */
int tfs_qplan_new(tfs_qplan **out, const tfs_model *m, int ftype, const tfs_qplan_opts *o,
		  tfs_error *err);
void tfs_qplan_free(tfs_qplan *p);

int tfs_qplan_ftype(const tfs_qplan *p);
/* The tensors in output order. */
size_t tfs_qplan_n_tensors(const tfs_qplan *p);
const tfs_qtensor *tfs_qplan_tensor(const tfs_qplan *p, size_t i);
/* The data section's size (every tensor padded to the alignment). */
uint64_t tfs_qplan_data_size(const tfs_qplan *p);
/* The alignment of the tensors' offsets: general.alignment when the model has a valid one
 * (a power of two), else 32. */
uint32_t tfs_qplan_alignment(const tfs_qplan *p);
/* The key changes, in the order they apply. */
size_t tfs_qplan_n_kv(const tfs_qplan *p);
const tfs_qkv *tfs_qplan_kv(const tfs_qplan *p, size_t i);
/* Applies the key changes to m (tfs_model_del_kv / tfs_model_set_kv: a deleted key's slot
 * stays deleted, a set after a delete appends), so that its keys are the output's. */
int tfs_qplan_apply_kv(const tfs_qplan *p, tfs_model *m, tfs_error *err);

#endif
