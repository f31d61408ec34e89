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
 * SLEEF (Boost Software License 1.0; version 3.5.1, as Debian's libsleef3 which torch uses):
 * xpowf = expkf(logkf(|x|) * y) in double-float arithmetic, ported below for x > 0.
 */
#include "hf_rope.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <string.h>

/* ==== SLEEF's powf_u10 (FMA variant), for positive finite x ==== */

typedef struct {
	float x, y;
} df;

static float as_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t as_u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static df df_add2_ff(float x, float y)
{
	float s = x + y, v = s - x;
	return (df){ s, (x - (s - v)) + (y - v) };
}

static df df_add2_df_f(df x, float y)
{
	float s = x.x + y, v = s - x.x;
	float t = (x.x - (s - v)) + (y - v);
	return (df){ s, t + x.y };
}

static df df_add2_df_df(df x, df y)
{
	float s = x.x + y.x, v = s - x.x;
	float t = (x.x - (s - v)) + (y.x - v);
	return (df){ s, t + (x.y + y.y) };
}

static df df_add_df_df(df x, df y)   /* |x| >= |y| */
{
	float s = x.x + y.x;
	return (df){ s, (((x.x - s) + y.x) + x.y) + y.y };
}

static df df_add_f_df(float x, df y)
{
	float s = x + y.x;
	return (df){ s, ((x - s) + y.x) + y.y };
}

static df df_scale(df d, float s)
{
	return (df){ d.x * s, d.y * s };
}

static df df_normalize(df t)
{
	float s = t.x + t.y;
	return (df){ s, (t.x - s) + t.y };
}

static df df_div(df n, df d)
{
	float t = 1.0f / d.x, s = n.x * t;
	float u = fmaf(t, n.x, -s);
	float v = fmaf(-d.y, t, fmaf(-d.x, t, 1.0f));
	return (df){ s, fmaf(s, v, fmaf(n.y, t, u)) };
}

static df df_squ(df x)
{
	float s = x.x * x.x;
	return (df){ s, fmaf(x.x + x.x, x.y, fmaf(x.x, x.x, -s)) };
}

static df df_mul_df_df(df x, df y)
{
	float s = x.x * y.x;
	return (df){ s, fmaf(x.x, y.y, fmaf(x.y, y.x, fmaf(x.x, y.x, -s))) };
}

static df df_mul_df_f(df x, float y)
{
	float s = x.x * y;
	return (df){ s, fmaf(x.y, y, fmaf(x.x, y, -s)) };
}

static df logkf(float d)
{
	bool o = d < FLT_MIN;
	if (o)
		d *= (float)(INT64_C(1) << 32) * (float)(INT64_C(1) << 32);
	int32_t e = (int32_t)((as_u(d * (1.0f / 0.75f)) >> 23) & 0xff) - 0x7f;
	float m = as_f(as_u(d) + ((uint32_t)-e << 23));
	if (o)
		e -= 64;
	df x = df_div(df_add2_ff(-1.0f, m), df_add2_ff(1.0f, m));
	df x2 = df_squ(x);
	float t = 0.240320354700088500976562f;
	t = fmaf(t, x2.x, 0.285112679004669189453125f);
	t = fmaf(t, x2.x, 0.400007992982864379882812f);
	df c = { 0.66666662693023681640625f, 3.69183861259614332084311e-09f };
	df s = df_mul_df_f((df){ 0.69314718246459960938f, -1.904654323148236017e-09f }, (float)e);
	s = df_add_df_df(s, df_scale(x, 2.0f));
	s = df_add_df_df(s, df_mul_df_df(df_mul_df_df(x2, x), df_add2_df_df(df_mul_df_f(x2, t), c)));
	return s;
}

/* SLEEF's vldexp_vf_vf_vi2 */
static float ldexpk(float x, int32_t q)
{
	int32_t m = q >> 31;
	m = (((m + q) >> 6) - m) << 4;
	q = q - (m << 2);
	m += 0x7f;
	m = m > 0 ? m : 0;
	m = m > 0xff ? 0xff : m;
	float u = as_f((uint32_t)m << 23);
	x = x * u * u * u * u;
	u = as_f((uint32_t)(q + 0x7f) << 23);
	return x * u;
}

static float expkf(df d)
{
	const float L2U = 0.693145751953125f, L2L = 1.428606765330187045e-06f;
	const float R_LN2 = 1.442695040888963407359924681001892137426645954152985934135449406931f;
	float u = (d.x + d.y) * R_LN2;
	int32_t q = (int32_t)nearbyintf(u);
	df s = df_add2_df_f(d, (float)q * -L2U);
	s = df_add2_df_f(s, (float)q * -L2L);
	s = df_normalize(s);
	u = 0.00136324646882712841033936f;
	u = fmaf(u, s.x, 0.00836596917361021041870117f);
	u = fmaf(u, s.x, 0.0416710823774337768554688f);
	u = fmaf(u, s.x, 0.166665524244308471679688f);
	u = fmaf(u, s.x, 0.499999850988388061523438f);
	df t = df_add_df_df(s, df_mul_df_f(df_squ(s), u));
	t = df_add_f_df(1.0f, t);
	u = ldexpk(t.x + t.y, q);
	return d.x < -104 ? 0.0f : u;
}

static float sleef_powf(float x, float y)
{
	if (y == 0 || x == 1)
		return 1.0f;
	float r = expkf(df_mul_df_f(logkf(x), y));
	return isnan(r) ? INFINITY : r;
}

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
		float p = i < vec ? sleef_powf(fb, e) : powf(fb, e);
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
