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
/* Whether dtype id's quantization takes an importance matrix: the IQ types (IQ1_S..IQ4_XS),
 * the K-quants Q2_K..Q6_K and Q4_0, Q4_1, Q5_0, Q5_1, the types ggml_quantize_chunk weighs. */
bool tfs_quantize_takes_imatrix(int id);
/* Whether ggml weighs dtype id's blocks by their whole row (Q4_0, Q4_1, Q5_0, Q5_1: by the
 * row's mean square): tfs_quantize_weighted with weights then takes whole rows only, and a
 * part of a row is quantized with tfs_quantize_weighted_part given its row's
 * tfs_quantize_row_sigma2. */
bool tfs_quantize_weighs_rows(int id);
/* Whether ggml weighs dtype id by 256-value super-blocks (Q2_K..Q6_K): any run of whole
 * super-blocks is quantized alone. */
bool tfs_quantize_weighs_blocks(int id);
/* The mean square of a row of n_per_row values, summed in order as ggml sums it. */
float tfs_quantize_row_sigma2(const float *row, uint64_t n_per_row);
/* tfs_quantize_weighted of whole blocks within one row (first..first + nelems - 1 inside
 * row first / n_per_row) whose row has mean square sigma2.  For the types that do not weigh
 * by rows (or qw NULL), sigma2 is ignored. */
int tfs_quantize_weighted_part(void *dst, int id, const float *src, uint64_t nelems,
			       uint64_t first, uint64_t n_per_row, const float *qw, float sigma2,
			       tfs_error *err);
/*
 * tfs_quantize with importance weights, as ggml_quantize_chunk(id, ..., imatrix): the values
 * are rows of n_per_row, and qw (n_per_row weights, llama.cpp's imatrix of the tensor or of
 * one expert) weighs column c of every row by qw[c].  first is the index of src[0] in the
 * rows (a part of a tensor may start mid-row at a block boundary).  qw NULL: as
 * tfs_quantize.  Only the types tfs_quantize_takes_imatrix names use qw; for the others it
 * is ignored.  Q4_0, Q4_1, Q5_0 and Q5_1 with qw take whole rows only (TFS_E_INVALID
 * otherwise; see tfs_quantize_weighs_rows).
 */
int tfs_quantize_weighted(void *dst, int id, const float *src, uint64_t nelems, uint64_t first,
			  uint64_t n_per_row, const float *qw, tfs_error *err);
/* IEEE half and bfloat16 from float32, nearest-even (NaN stays NaN). */
uint16_t tfs_f32_to_f16(float f);
uint16_t tfs_f32_to_bf16(float f);

#endif
