/*
 * qplan_impl.h - what the plan (qplan.c) asks of llama.cpp's rules (qplan_rules.c): the
 * state of one plan being made, llama-quant.cpp's quantize_state_impl (codec-private).
 */
#ifndef TFS_QPLAN_IMPL_H
#define TFS_QPLAN_IMPL_H

#include "qplan.h"
#include "dtype.h"

#define TFS_QPLAN_ALIGN 32     /* GGUF_DEFAULT_ALIGNMENT: llama.cpp pads with it */

/* tensor_category of llama-quant.cpp: broad roles told by name */
typedef enum {
	TFS_QCAT_TOKEN_EMBD, TFS_QCAT_ATTN_Q, TFS_QCAT_ATTN_V, TFS_QCAT_ATTN_K,
	TFS_QCAT_ATTN_QKV, TFS_QCAT_ATTN_KV_B, TFS_QCAT_ATTN_OUTPUT, TFS_QCAT_FFN_UP,
	TFS_QCAT_FFN_GATE, TFS_QCAT_FFN_DOWN, TFS_QCAT_OUTPUT, TFS_QCAT_OTHER
} tfs_qcat;

typedef struct {
	const tfs_model *m;
	const tfs_qplan_opts *o;
	int ftype;
	char arch[64];
	bool falcon, bailingmoe3, is_70b;
	uint32_t n_layer, n_expert, n_head, n_head_kv;
	/* quantize_state_impl's counters */
	int n_attention_wv, i_attention_wv;
	int n_ffn_down, n_ffn_gate, n_ffn_up, i_ffn_down, i_ffn_gate, i_ffn_up;
	bool has_imatrix, has_tied_embeddings;
	tfs_error *err;
	int rc;                 /* the first failure (llama.cpp throws) */
} tfs_qstate;

static inline int tfs_qblck(int dtype) { return (int)tfs_dtype(dtype)->block_elems; }
static inline bool tfs_qis_quantized(int dtype) { return tfs_qblck(dtype) > 1; }
static inline const char *tfs_qdname(int dtype) { return tfs_dtype(dtype)->name; }

/* The tensor's role, by name (tensor_category). */
tfs_qcat tfs_qrule_category(const char *name);
/* attn_v and the tensors llama.cpp counts with it (attn_qkv, attn_kv_b). */
bool tfs_qrule_is_attn_v(tfs_qcat c);
bool tfs_qrule_is_token_embd(const char *name);
/* A key's value as an unsigned integer (any integer type; an array: its first element, as
 * llama.cpp's per-layer keys give layer 0).  false when absent or not an integer. */
bool tfs_qrule_key_uint(const tfs_model *m, const char *key, uint32_t *v);
/* The hyper-parameters the rules read (general.architecture, <arch>.block_count, ...). */
int tfs_qrule_read_hparams(tfs_qstate *s);
/* ggml_n_dims: dimensions up to the last that is not 1, at least 1 */
uint32_t tfs_qrule_ggml_dims(const tfs_tensor *t);
/* tensor_allows_quantization, of a tensor of dims ggml dimensions. */
bool tfs_qrule_allows_quantization(const tfs_qstate *s, const char *name, uint32_t dims);
/* llama_tensor_get_type for a tensor that allows quantization (visited in llama.cpp's
 * order: the counters advance); *fell: the mix's type did not fit the rows.  -1 after a
 * failure (s->rc, s->err). */
int tfs_qrule_get_type(tfs_qstate *s, const tfs_tensor *t, tfs_qcat cat, int default_type,
		       bool *fell);
/* tensor_requires_imatrix */
bool tfs_qrule_requires_imatrix(const char *name, int dtype, int ftype);

#endif
