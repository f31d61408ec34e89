/*
 * hf_qwen3next.h - Qwen3NextModel's hooks (conversion/qwen.py), which Qwen3.5's class inherits:
 * defined in hf_qwen35.c (Qwen3.5's row, the first to need them), used by hf_qwen3next.c.
 */
#ifndef TFS_HF_QWEN3NEXT_H
#define TFS_HF_QWEN3NEXT_H

#include "hf_plan_impl.h"

/* _QwenMtpMixin.__init__: the MTP layers counted into h->n_layer (a prepare hook) */
int tfs_hf_qnext_prepare(hparams *h, const tfs_model *st, tfs_error *err);
/* _QwenMtpMixin.filter_tensors and Qwen3NextModel's dt_bias rename (a rename hook) */
bool tfs_hf_qnext_rename(char *name, size_t cap, const hparams *h);
/* the fix hook: gated q_proj, eh_proj, the linear attention's tensors (value heads reordered
 * when reorder: Qwen3.5's _LinearAttentionVReorderBase), checkpoint-stacked experts */
int tfs_hf_qnext_fix(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m,
		     const hparams *h, const char *shard, unsigned part, unsigned *parts,
		     bool reorder, tfs_error *err);
/* Qwen2MoeModel's, _QwenMtpMixin's and Qwen3NextModel's keys */
int tfs_hf_qnext_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err);

#endif
