/*
 * hf_names.h - a Hugging Face tensor name mapped to its GGUF name by a row's name tables
 * (the converter's map_tensor_name, gguf-py's TensorNameMap for the row's architecture):
 * the plan's (hf_plan.c) and NVFP4's (hf_nvfp4.c).
 */
#ifndef TFS_HF_NAMES_H
#define TFS_HF_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hf_arch.h"

/* name as PREFIX, a decimal index (no sign, no leading zero) and '.': the index in *n and
 * what follows the dot in *rest; false for another name.  The one parse of a block's
 * "model.layers.B.", a GGUF block's "blk.B." and an expert's "E.". */
bool tfs_hf_index_of(const char *name, const char *prefix, unsigned long *n, const char **rest);

/* Name's GGUF name (gguf_out, cap bytes) for row: a global's, or a block's below n_layer; *m
 * gets the table entry, *bid the block (-1 for a global tensor).  false when the converter
 * has no name for it. */
bool tfs_hf_map_name(char *gguf_out, size_t cap, const char *name, const tfs_hf_arch *row,
		     int64_t n_layer, const tfs_hf_name **m, long *bid);

/* s.replace(from, to), Python's: every from in s as to, into out (cap bytes, cut short
 * where it does not fit).  The converters' renames of tensor names. */
void tfs_hf_replace(char *out, size_t cap, const char *s, const char *from, const char *to);

/* name (cap bytes) with prefix put in front of it, in place; false, name unchanged, when it
 * does not fit.  The converters' "model." of a base model's names. */
bool tfs_hf_prepend(char *name, size_t cap, const char *prefix);

/* Whether the converter names checkpoint parameter name (no ".weight") as a weight, adding
 * ".weight" to it: a TFS_HF_ARCH_SCALAR_WEIGHT row's layer_scalar buffer and stacked experts
 * (Gemma4Model.filter_tensors).  The plan's rule, and the reverse view's (hf_export.c). */
bool tfs_hf_named_as_weight(const tfs_hf_arch *row, const char *name);

#endif
