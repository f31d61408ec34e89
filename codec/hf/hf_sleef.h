/*
 * hf_sleef.h - float32 functions bit for bit as torch 1.13 computes them for the converter on
 * x86-64 with AVX2 (hf_sleef.c): SLEEF 3.5.1's powf_u10, expf_u10 and log1pf_u10 (FMA
 * variants), which its vector kernels call, and the tensor ops the GGUF view repeats.
 */
#ifndef TFS_HF_SLEEF_H
#define TFS_HF_SLEEF_H

#include <stddef.h>
#include <stdint.h>

/* SLEEF's xpowf for x > 0 finite (1 when y is 0 or x is 1; an overflow infinity); xexpf;
 * xlog1pf.  A NaN argument of the last two gives the NaN quieted. */
float tfs_hf_sleef_powf(float x, float y);
float tfs_hf_sleef_expf(float d);
float tfs_hf_sleef_log1pf(float d);

/*
 * n float32 bit patterns f replaced by -exp(f) as torch computes -torch.exp(x) on a float32
 * tensor: every element through SLEEF's expf_u10 (also the tail of a tensor shorter than a
 * vector), then the sign flipped (a NaN's too).  Qwen3.5's A_log -> ssm_a.
 */
void tfs_hf_neg_exp(uint32_t *f, size_t n);

/*
 * n float32 bit patterns f, elements [first, first + n) of a contiguous float32 tensor of
 * total elements, replaced by torch.nn.functional.softplus(x) (beta 1, threshold 20) as its
 * CPU kernel computes it: x itself above 20; else, over whole runs of 2 x 8 values from the
 * tensor's start (the vector loop), SLEEF's log1pf_u10(expf_u10(x)), and for the last
 * total mod 16 values (the scalar loop) glibc's log1pf(expf(x)).  A tensor of at most 32768
 * elements (ATen's grain: one thread); Gemma 4's per_dim_scale.
 */
void tfs_hf_softplus(uint32_t *f, size_t n, uint64_t first, uint64_t total);

#endif
