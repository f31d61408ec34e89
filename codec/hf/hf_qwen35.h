/*
 * hf_qwen35.h - Qwen3.5 in the GGUF view (hf_qwen35.c): the one value transform of its own,
 * A_log's -exp(A_log), which the reader (hf_read.c) applies.
 */
#ifndef TFS_HF_QWEN35_H
#define TFS_HF_QWEN35_H

#include <stddef.h>
#include <stdint.h>

/*
 * n float32 bit patterns f replaced by -exp(f) as torch (1.13, x86-64 with AVX2) computes
 * -torch.exp(x) on a float32 tensor: every element through SLEEF's expf_u10 with FMA (also
 * the tail of a tensor shorter than a vector), then the sign flipped.  A NaN stays a NaN
 * (quieted), as torch's exp passes it through; the sign of any result is flipped.
 */
void tfs_hf_neg_exp(uint32_t *f, size_t n);

#endif
