/*
 * hf_rope.c - the llama3 rope factors as torch computes them for the converter.
 *
 * LlamaModel.generate_extra_tensors (float32 torch tensors, Python scalars):
 *     freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
 *     for freq in freqs:
 *         wavelen = 2 * math.pi / freq
 *         1 if wavelen < old_ctx / high_freq_factor, factor if wavelen > old_ctx / low,
 *         else smooth = (old_ctx / wavelen - low) / (high - low);
 *              1 / ((1 - smooth) / factor + smooth)
 * What torch does with each (checked against torch 1.13 over dims 2..298, many bases):
 *  - tensor / scalar and tensor - scalar: float32, the scalar rounded to float32;
 *  - scalar / tensor: the tensor's reciprocal (float32) times the scalar;
 *  - base ** tensor: ATen's pow kernel: vectorized over runs of 2 x 8 values with SLEEF's
 *    Sleef_powf8_u10 (AVX2: FMA), the remaining values with std::pow(float, float) = powf;
 *  - comparisons: float32 against the scalar rounded to float32.
 * (SLEEF's powf_u10: hf_sleef.c.)
 */
#include "hf_rope.h"
#include "hf_sleef.h"

#include <math.h>

/* ==== the factors ==== */

void tfs_hf_llama3_rope(float *out, int64_t dim, double base, double factor, double low,
			double high, double old_ctx)
{
	size_t n = (size_t)(dim + 1) / 2, vec = n / 16 * 16;
	float fb = (float)base, fdim = (float)dim;
	float hi_wavelen = (float)(old_ctx / high), lo_wavelen = (float)(old_ctx / low);
	float two_pi = (float)(2 * M_PI), fctx = (float)old_ctx, flow = (float)low;
	float span = (float)(high - low), ffactor = (float)factor;
	for (size_t i = 0; i < n; i++) {
		float e = (float)(2 * i) / fdim;
		float p = i < vec ? tfs_hf_sleef_powf(fb, e) : powf(fb, e);
		float freq = 1.0f / p;
		float wavelen = (1.0f / freq) * two_pi;
		if (wavelen < hi_wavelen) {
			out[i] = 1.0f;
		} else if (wavelen > lo_wavelen) {
			out[i] = ffactor;
		} else {
			float smooth = ((1.0f / wavelen) * fctx - flow) / span;
			out[i] = 1.0f / ((1.0f - smooth) / ffactor + smooth);
		}
	}
}
