/*
 * hf_qwen35_x.h - the reverse view's hooks of the rows of Qwen3.5, Qwen3.5-MoE (hf_qwen35.c)
 * and Qwen3-Next (hf_qwen3next.c), and the inverse of their A_log's -exp (hf_sleef.h's
 * tfs_hf_neg_exp): hf_qwen35_x.c.
 */
#ifndef TFS_HF_QWEN35_X_H
#define TFS_HF_QWEN35_X_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_arch.h"

/* The inverse of tfs_hf_neg_exp (hf_sleef.h): an x (*out) whose -exp is a's bits exactly, of
 * those the one of fewest significant bits; false when no float32 gives a. */
bool tfs_hf_neg_exp_inverse(float a, float *out);

/* The rows' xtensor hooks (hf_arch.h): Qwen3.5's and Qwen3.5-MoE's (the value heads grouped
 * again, the experts stacked), Qwen3-Next's (in_proj_qkvz made again); and their xconfig
 * hook. */
int tfs_hf_qwen35_xtensor(struct tfs_hf_export *x, size_t i, tfs_error *err);
int tfs_hf_qwen3next_xtensor(struct tfs_hf_export *x, size_t i, tfs_error *err);
int tfs_hf_qnext_xconfig(json_t *config, json_t *gen, const struct tfs_hf_export *x);

#endif
