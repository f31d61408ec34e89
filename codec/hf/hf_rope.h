/*
 * hf_rope.h - llama3 rope scaling's factors (the rope_freqs tensor) bit for bit as
 * convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors computes them with torch.
 */
#ifndef TFS_HF_ROPE_H
#define TFS_HF_ROPE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Writes the (dim + 1) / 2 factors into out: for each frequency 1 / base^(2i/dim), 1 when its
 * wavelength is below old_ctx / high, factor when above old_ctx / low, else the smooth blend.
 * base must be positive.  Arithmetic as torch 1.13-2.x on x86-64 with AVX2 does it: float32
 * tensor ops, pow over whole runs of 16 values by SLEEF's powf_u10 (FMA), the rest by powf.
 */
void tfs_hf_llama3_rope(float *out, int64_t dim, double base, double factor, double low,
			double high, double old_ctx);

#endif
