/*
 * quant.h - float32 to a dtype: the quantizers' public API (public; the kernels' shared
 * internals are in quant_impl.h).
 */
#ifndef TFS_QUANT_H
#define TFS_QUANT_H

#include "../base/base.h"

/* ==== float32 to a dtype (quant.c) ==== */

/*
 * Writes nelems float32 values at src as dtype id into dst (nelems / block_elems *
 * block_bytes bytes; the caller owns both).  For the GGML types the bytes equal ggml's
 * ggml_quantize_chunk() with no importance matrix (Q8_K: quantize_row_q8_K_ref) bit for bit;
 * every block is quantized on its own, so any whole run of blocks can be redone alone.  F16,
 * BF16, F8_E4M3, F8_E5M2 round to nearest-even (as ggml, torch and ml_dtypes do); integer
 * and BOOL types take only integral values in range.  Returns 0; TFS_E_INVALID when nelems
 * is not a whole number of blocks or a value does not fit an integer type (the message
 * names the element, or an IQ block holds values ggml's search aborts on); TFS_E_UNSUPPORTED
 * for a type it cannot write (C64), and for IQ2_XXS, IQ2_XS and IQ1_S, which need importance
 * weights (tfs_quantize_weighted).
 */
int tfs_quantize(void *dst, int id, const float *src, uint64_t nelems, tfs_error *err);
/* Whether tfs_quantize writes dtype id. */
bool tfs_quantize_supported(int id);
/* Whether ggml quantizes dtype id only with an importance matrix (IQ2_XXS, IQ2_XS, IQ1_S,
 * as ggml_quantize_requires_imatrix says). */
bool tfs_quantize_needs_imatrix(int id);
/* Whether dtype id's quantization takes an importance matrix (the IQ types, IQ1_S..IQ4_XS). */
bool tfs_quantize_takes_imatrix(int id);
/*
 * tfs_quantize with importance weights, as ggml_quantize_chunk(id, ..., imatrix): the values
 * are rows of n_per_row, and qw (n_per_row weights, llama.cpp's imatrix of the tensor or of
 * one expert) weighs column c of every row by qw[c].  first is the index of src[0] in the
 * rows (a part of a tensor may start mid-row at a block boundary).  qw NULL: as
 * tfs_quantize.  Only the types tfs_quantize_takes_imatrix names use qw; for the others it
 * is ignored.
 */
int tfs_quantize_weighted(void *dst, int id, const float *src, uint64_t nelems, uint64_t first,
			  uint64_t n_per_row, const float *qw, tfs_error *err);
/* IEEE half and bfloat16 from float32, nearest-even (NaN stays NaN). */
uint16_t tfs_f32_to_f16(float f);
uint16_t tfs_f32_to_bf16(float f);

#endif
