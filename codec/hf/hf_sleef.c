/*
 * hf_sleef.c - float32 functions bit for bit as torch computes them for the converter (torch
 * 1.13, Debian's, on x86-64 with AVX2: its vector kernels call SLEEF 3.5.1's FMA variants,
 * the scalar tail of a kernel calls glibc's libm).
 *
 * SLEEF (Boost Software License 1.0; version 3.5.1, as Debian's libsleef3 which torch uses):
 * the algorithms of xpowf (expkf(logkf(|x|) * y) in double-float arithmetic), xexpf and
 * xlog1pf, ported with the same operations in the same order (fmaf for its vmla), so that
 * each result is the vector lane's.  Checked against torch over every float32 (softplus:
 * log1pf_u10(expf_u10(x)); exp) and over dims 2..298 and many bases (pow, hf_rope.c).
 */
#include "hf_sleef.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

/* ==== SLEEF's double-float arithmetic (FMA variants) ==== */

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

/* |x| >= |y| (dfadd_vf2_vf_vf) */
static df df_add_ff(float x, float y)
{
	float s = x + y;
	return (df){ s, (x - s) + y };
}

/* |x.x| >= |y| (dfadd_vf2_vf2_vf) */
static df df_add_df_f(df x, float y)
{
	float s = x.x + y;
	return (df){ s, ((x.x - s) + y) + x.y };
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

/* ==== powf_u10, for positive finite x ==== */

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

float tfs_hf_sleef_powf(float x, float y)
{
	if (y == 0 || x == 1)
		return 1.0f;
	float r = expkf(df_mul_df_f(logkf(x), y));
	return isnan(r) ? INFINITY : r;
}

/* ==== expf_u10, log1pf_u10 ==== */

float tfs_hf_sleef_expf(float d)
{
	if (isnan(d))
		return d + d;   /* quieted, as the polynomial's arithmetic passes it on */
	int q = (int)rintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
	float s = fmaf((float)q, -0.693145751953125f, d);
	s = fmaf((float)q, -1.428606765330187045e-06f, s);
	float u = 0.000198527617612853646278381f;
	u = fmaf(u, s, 0.00139304355252534151077271f);
	u = fmaf(u, s, 0.00833336077630519866943359f);
	u = fmaf(u, s, 0.0416664853692054748535156f);
	u = fmaf(u, s, 0.166666671633720397949219f);
	u = fmaf(u, s, 0.5f);
	u = 1.0f + fmaf(s * s, u, s);
	/* scaled by 2^q in two halves, each from its exponent bits */
	u = u * as_f((uint32_t)((q >> 1) + 0x7f) << 23) *
	    as_f((uint32_t)(q - (q >> 1) + 0x7f) << 23);
	if (d < -104.0f)
		u = 0.0f;
	if (d > 100.0f)
		u = INFINITY;
	return u;
}

/* m = (d + 1) / 2^e with e from (d + 1) * 4/3's exponent (m in [0.75, 1.5)), computed from d
 * itself by a fused multiply-add; log1p = e ln2 + 2 atanh(m - 1 / m + 1) in double-float */
float tfs_hf_sleef_log1pf(float d)
{
	if (isnan(d))
		return d + d;
	float dp1 = d + 1.0f;
	bool o = dp1 < FLT_MIN;
	if (o)
		dp1 *= (float)(INT64_C(1) << 32) * (float)(INT64_C(1) << 32);
	int32_t e = (int32_t)((as_u(dp1 * (1.0f / 0.75f)) >> 23) & 0xff) - 0x7f;
	float t = as_f(as_u(1.0f) + ((uint32_t)-e << 23));
	float m = fmaf(d, t, t - 1.0f);
	if (o)
		e -= 64;
	df s = df_mul_df_f((df){ 0.69314718246459960938f, -1.904654323148236017e-09f }, (float)e);
	df x = df_div((df){ m, 0.0f }, df_add_ff(2.0f, m));
	float x2 = x.x * x.x;
	t = 0.3027294874e+0f;
	t = fmaf(t, x2, 0.3996108174e+0f);
	t = fmaf(t, x2, 0.6666694880e+0f);
	s = df_add_df_df(s, df_scale(x, 2.0f));
	s = df_add_df_f(s, x2 * x.x * t);
	float r = s.x + s.y;
	if (d > 1e+38f)
		r = INFINITY;
	if (-1.0f > d)
		r = as_f(0xffffffffu);   /* SLEEF ors all ones in: a NaN */
	if (d == -1.0f)
		r = -INFINITY;
	if (as_u(d) == 0x80000000u)
		r = -0.0f;
	return r;
}

/* ==== torch's ops on float32 tensors ==== */

void tfs_hf_neg_exp(uint32_t *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		f[i] = as_u(tfs_hf_sleef_expf(as_f(f[i])));
		f[i] ^= 0x80000000u;   /* torch's neg flips the sign bit, NaN's too */
	}
}

void tfs_hf_softplus(uint32_t *f, size_t n, uint64_t first, uint64_t total)
{
	uint64_t vec = total / 16 * 16;
	for (size_t i = 0; i < n; i++) {
		float x = as_f(f[i]);
		if (x > 20.0f)
			continue;   /* the threshold: x itself */
		f[i] = as_u(first + i < vec ? tfs_hf_sleef_log1pf(tfs_hf_sleef_expf(x))
					    : log1pf(expf(x)));
	}
}
