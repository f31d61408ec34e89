/*
 * test_quant.c - tfs_quantize on its own (no ggml): round trips through tensorfs's own
 * dequantizers within each type's error bound, exact values for the small float formats,
 * integer range checks, and refusals.  test_quant_ggml.c compares the bytes with ggml's.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensorfs.h"
#include "testutil.h"

static uint64_t g_rng = 12345;

static double uniform(void)
{
	g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
	return ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
}

static float normal(void)
{
	return (float)(sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

/* ==== round trips ==== */

typedef struct {
	char name[16];
	double max_rel_rmse;   /* sqrt(mean (y - x)^2) / sqrt(mean x^2) on normal data */
} bound_param;

/* Bounds about 1.25 times what each type gives on these N(0, 1) values (measured): a
 * quantizer that lost its scale search would exceed them. */
static bound_param k_bounds[] = {
	{ "F32", 0.0 }, { "F64", 0.0 }, { "F16", 0.0003 }, { "BF16", 0.0025 },
	{ "F8_E4M3", 0.035 }, { "F8_E5M2", 0.07 },
	{ "Q8_0", 0.007 }, { "Q8_K", 0.009 }, { "Q6_K", 0.022 }, { "Q5_0", 0.055 }, { "Q5_1", 0.05 },
	{ "Q5_K", 0.047 }, { "Q4_0", 0.11 }, { "Q4_1", 0.1 }, { "Q4_K", 0.09 }, { "IQ4_NL", 0.1 },
	{ "IQ4_XS", 0.1 }, { "Q3_K", 0.19 }, { "Q2_K", 0.37 }, { "MXFP4", 0.15 }, { "NVFP4", 0.12 },
	{ "TQ1_0", 0.9 }, { "TQ2_0", 0.9 }, { "Q1_0", 0.7 }, { "Q2_0", 0.8 },
};

ParameterizedTestParameters(quant, round_trip)
{
	return cr_make_param_array(bound_param, k_bounds, sizeof(k_bounds) / sizeof(k_bounds[0]));
}

ParameterizedTest(bound_param *p, quant, round_trip)
{
	const int id = tfs_dtype_from_name(p->name);
	const tfs_dtype_info *t = tfs_dtype(id);
	const size_t n = 4096, nbytes = n / t->block_elems * t->block_bytes;
	float *x = malloc(n * 4), *y = malloc(n * 4);
	uint8_t *q = malloc(nbytes);
	tfs_error err = { 0 };
	double se = 0, sx = 0;

	cr_assert(x && y && q && t);
	for (size_t i = 0; i < n; i++)
		x[i] = normal();
	cr_assert_eq(tfs_quantize(q, id, x, n, &err), 0, "%s: %s", p->name, err.msg);
	t->to_f32_ref(q, y, n / t->block_elems);
	for (size_t i = 0; i < n; i++) {
		se += (double)(y[i] - x[i]) * (y[i] - x[i]);
		sx += (double)x[i] * x[i];
	}
	cr_assert_leq(sqrt(se / sx), p->max_rel_rmse, "%s: relative RMS error %g", p->name,
		      sqrt(se / sx));
	free(x);
	free(y);
	free(q);
}

/* Values a type holds exactly come back exactly (ternary, sign and 2-bit types included). */
Test(quant, representable_values_survive)
{
	static const struct { const char *name; float v[4]; } cases[] = {
		{ "TQ1_0", { -0.5f, 0.0f, 0.5f, 0.5f } }, { "TQ2_0", { -0.5f, 0.0f, 0.5f, 0.5f } },
		{ "Q1_0", { -0.25f, 0.25f, 0.25f, -0.25f } }, { "Q2_0", { -1.0f, 0.0f, 1.0f, 1.0f } },
		{ "Q8_0", { -127.0f, 3.0f, 0.0f, 64.0f } }, { "MXFP4", { 6.0f, -3.0f, 0.5f, 0.0f } },
	};
	float x[256], y[256];
	uint8_t q[512];
	tfs_error err = { 0 };

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const int id = tfs_dtype_from_name(cases[c].name);
		const tfs_dtype_info *t = tfs_dtype(id);

		for (int i = 0; i < 256; i++)
			x[i] = cases[c].v[i % 4];
		cr_assert_eq(tfs_quantize(q, id, x, 256, &err), 0, "%s", err.msg);
		t->to_f32_ref(q, y, 256 / t->block_elems);
		for (int i = 0; i < 256; i++)
			cr_assert_eq(y[i], x[i], "%s: element %d: %g became %g", cases[c].name, i,
				     (double)x[i], (double)y[i]);
	}
}

/* Quantizing a tensor whole or block by block gives the same bytes. */
Test(quant, blocks_are_independent)
{
	static const int ids[] = { TFS_DT_Q4_K, TFS_DT_IQ4_XS, TFS_DT_Q5_0, TFS_DT_NVFP4 };
	float x[1024];
	uint8_t whole[1024], part[1024];
	tfs_error err = { 0 };

	for (int i = 0; i < 1024; i++)
		x[i] = normal() * (i < 512 ? 1.0f : 100.0f);
	for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
		const tfs_dtype_info *t = tfs_dtype(ids[k]);
		const size_t nb = 1024 / t->block_elems;

		cr_assert_eq(tfs_quantize(whole, ids[k], x, 1024, &err), 0, "%s", err.msg);
		for (size_t b = 0; b < nb; b++)
			cr_assert_eq(tfs_quantize(part + b * t->block_bytes, ids[k],
						  x + b * t->block_elems, t->block_elems, &err), 0);
		cr_assert_arr_eq(whole, part, nb * t->block_bytes, "%s", t->name);
	}
}

/* ==== the small float formats, value by value ==== */

static uint8_t one_byte(int id, float v)
{
	uint8_t out = 0xee;
	tfs_error err = { 0 };

	cr_assert_eq(tfs_quantize(&out, id, &v, 1, &err), 0, "%s", err.msg);
	return out;
}

Test(quant, half_and_bfloat16_round_to_nearest_even)
{
	static const struct { float v; uint16_t f16, bf16; } cases[] = {
		{ 1.0f, 0x3c00, 0x3f80 }, { -2.0f, 0xc000, 0xc000 }, { 65504.0f, 0x7bff, 0x4780 },
		{ 65519.0f, 0x7bff, 0x4780 }, { 65520.0f, 0x7c00, 0x4780 },
		{ 0x1p-24f, 0x0001, 0x3380 }, { 0x1p-25f, 0x0000, 0x3300 },   /* tie: to even */
		{ 0x1.8p-24f, 0x0002, 0x33c0 }, { 0x1p-14f, 0x0400, 0x3880 },
		{ 1.0f + 0x1p-11f, 0x3c00, 0x3f80 }, { 1.0f + 0x3p-11f, 0x3c02, 0x3f80 },
		{ 1.0f + 0x1p-8f, 0x3c04, 0x3f80 }, { 1.0f + 0x3p-8f, 0x3c0c, 0x3f82 },
		{ INFINITY, 0x7c00, 0x7f80 }, { -0.0f, 0x8000, 0x8000 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_expect_eq(tfs_f32_to_f16(cases[i].v), cases[i].f16, "f16(%a) = %04x", (double)cases[i].v,
			     tfs_f32_to_f16(cases[i].v));
		cr_expect_eq(tfs_f32_to_bf16(cases[i].v), cases[i].bf16, "bf16(%a) = %04x",
			     (double)cases[i].v, tfs_f32_to_bf16(cases[i].v));
	}
	cr_expect_eq(tfs_f32_to_f16(NAN) & 0x7fff, 0x7e00);
	cr_expect_eq(tfs_f32_to_bf16(NAN) & 0x7fc0, 0x7fc0);
}

/* As torch's and ml_dtypes' float8_e4m3fn / float8_e5m2 conversions give. */
Test(quant, float8_round_to_nearest_even)
{
	static const struct { float v; uint8_t e4m3, e5m2; } cases[] = {
		{ 1.0f, 0x38, 0x3c }, { -1.0f, 0xb8, 0xbc }, { 0.0f, 0x00, 0x00 }, { -0.0f, 0x80, 0x80 },
		{ 448.0f, 0x7e, 0x5f }, { 464.0f, 0x7e, 0x5f }, { 465.0f, 0x7f, 0x5f },
		{ 480.0f, 0x7f, 0x60 }, { 57344.0f, 0x7f, 0x7b }, { 61440.0f, 0x7f, 0x7c },
		{ 61439.0f, 0x7f, 0x7b }, { 0x1p-9f, 0x01, 0x18 }, { 0x1p-10f, 0x00, 0x14 },
		{ 0x1.8p-10f, 0x01, 0x16 }, { 0x1p-16f, 0x00, 0x01 }, { 0x1p-17f, 0x00, 0x00 },
		{ 1.0625f, 0x38, 0x3c }, { 1.1875f, 0x3a, 0x3d }, { 1.125f, 0x39, 0x3c },
		{ INFINITY, 0x7f, 0x7c }, { -INFINITY, 0xff, 0xfc }, { NAN, 0x7f, 0x7f },
		{ 1e-45f, 0x00, 0x00 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t a = one_byte(TFS_DT_F8_E4M3, cases[i].v), b = one_byte(TFS_DT_F8_E5M2, cases[i].v);

		cr_expect_eq(a, cases[i].e4m3, "e4m3(%a) = %02x", (double)cases[i].v, a);
		cr_expect_eq(b, cases[i].e5m2, "e5m2(%a) = %02x", (double)cases[i].v, b);
	}
}

/* ==== the narrow float types: every code, and the nearest value found by brute force ==== */

typedef struct {
	int id;
	int bits;       /* code width */
	int nan_code;   /* -1: none */
	bool signed_zero, ties_up;
} narrow_type;

static const narrow_type k_narrow[] = {
	{ TFS_DT_F8_E4M3FNUZ, 8, 0x80, false, false }, { TFS_DT_F8_E5M2FNUZ, 8, 0x80, false, false },
	{ TFS_DT_F8_E8M0, 8, 0xff, false, true }, { TFS_DT_F6_E2M3, 6, -1, true, false },
	{ TFS_DT_F6_E3M2, 6, -1, true, false }, { TFS_DT_F4, 4, -1, true, false },
};

/* Element 0 of one block holding code c (the low bits of the first byte for every type). */
static float narrow_decode(const narrow_type *n, int c)
{
	uint8_t blk[3] = { (uint8_t)c, 0, 0 };
	float out[4];

	tfs_dtype(n->id)->to_f32_ref(blk, out, 1);
	return out[0];
}

/* The code tensorfs writes for x, or -1 when it refuses x. */
static int narrow_encode(const narrow_type *n, float x)
{
	float in[4] = { x, 0, 0, 0 };
	uint8_t out[3] = { 0 };
	tfs_error err = { 0 };

	if (tfs_quantize(out, n->id, in, tfs_dtype(n->id)->block_elems, &err))
		return -1;
	return out[0] & ((1 << n->bits) - 1);
}

/* What the code for x must be: the nearest finite value of the sign of x (ties to the even
 * code, or up for E8M0); past the largest, NaN where the type has one and the largest
 * otherwise, where a tie goes up as well (the largest code is odd). */
static int narrow_oracle(const narrow_type *n, const float *v, float x)
{
	const int ncodes = 1 << n->bits, sign = n->id == TFS_DT_F8_E8M0 ? 0 : ncodes >> 1;
	const bool neg = signbit(x);
	int best = -1;
	double bd = 0;

	for (int c = 0; c < ncodes; c++) {
		bool cneg = sign && (c & sign);

		if (c == n->nan_code || isnan(v[c]))
			continue;
		if (cneg != neg && !(v[c] == 0 && !n->signed_zero))
			continue;
		double d = fabs((double)v[c] - (double)x);

		if (best < 0 || d < bd || (d == bd && (n->ties_up ? fabs(v[c]) > fabs(v[best])
								 : (c & 1) == 0))) {
			best = c;
			bd = d;
		}
	}
	/* past the largest magnitude: the tie with the value beyond goes up */
	int maxc = sign ? sign - 1 : ncodes - 2, below = maxc - 1;
	double top = v[maxc], beyond = n->ties_up ? 2.0 * top : top + (top - v[below]);

	if (fabs((double)x) >= (top + beyond) / 2)
		return n->nan_code >= 0 ? n->nan_code : (neg ? sign : 0) | maxc;
	return best;
}

Test(quant, narrow_floats_round_to_the_nearest_value)
{
	for (size_t k = 0; k < sizeof(k_narrow) / sizeof(k_narrow[0]); k++) {
		const narrow_type *n = &k_narrow[k];
		const int ncodes = 1 << n->bits;
		float v[256];
		size_t checked = 0;

		for (int c = 0; c < ncodes; c++)
			v[c] = narrow_decode(n, c);
		/* every finite code comes back as itself (FNUZ has no -0: 0x80 is its NaN) */
		for (int c = 0; c < ncodes; c++) {
			if (c == n->nan_code)
				continue;
			cr_expect_eq(narrow_encode(n, v[c]), c, "%s: code 0x%02x (%g) came back as 0x%02x",
				     tfs_dtype(n->id)->name, c, (double)v[c], narrow_encode(n, v[c]));
		}
		/* every midpoint between two codes, a float either side of it, and random values */
		float xs[4096];
		size_t nx = 0;

		for (int a = 0; a < ncodes; a++)
			for (int b = 0; b < ncodes; b++) {
				if (a == n->nan_code || b == n->nan_code || nx + 3 > 4096)
					continue;
				float m = (float)(((double)v[a] + (double)v[b]) / 2);

				if (!isfinite(m) || (n->id == TFS_DT_F8_E8M0 ? b != a + 1 : abs(a - b) != 1))
					continue;
				xs[nx++] = m;
				xs[nx++] = nextafterf(m, INFINITY);
				xs[nx++] = nextafterf(m, -INFINITY);
			}
		while (nx < 4096) {
			double mag = exp2((uniform() * 2 - 1) * (n->id == TFS_DT_F8_E8M0 ? 130 : 20));

			xs[nx++] = (float)(uniform() < 0.5 && n->id != TFS_DT_F8_E8M0 ? -mag : mag);
		}
		for (size_t i = 0; i < nx; i++) {
			int want = narrow_oracle(n, v, xs[i]), got = narrow_encode(n, xs[i]);

			cr_expect_eq(got, want, "%s: %a became 0x%02x, not 0x%02x", tfs_dtype(n->id)->name,
				     (double)xs[i], got, want);
			checked++;
		}
		cr_assert_gt(checked, 500);
	}
}

/* Values the narrow types cannot hold are refused with the element's index; what torch and
 * ml_dtypes agree on is written as they write it. */
Test(quant, narrow_floats_by_hand)
{
	static const struct { int id; float v; int code; } cases[] = {
		{ TFS_DT_F8_E4M3FNUZ, 1.0f, 0x40 }, { TFS_DT_F8_E4M3FNUZ, -1.0f, 0xc0 },
		{ TFS_DT_F8_E4M3FNUZ, 240.0f, 0x7f }, { TFS_DT_F8_E4M3FNUZ, 247.9f, 0x7f },
		{ TFS_DT_F8_E4M3FNUZ, 248.0f, 0x80 }, { TFS_DT_F8_E4M3FNUZ, -0.0f, 0x00 },
		{ TFS_DT_F8_E4M3FNUZ, -1e-9f, 0x00 }, { TFS_DT_F8_E4M3FNUZ, INFINITY, 0x80 },
		{ TFS_DT_F8_E4M3FNUZ, NAN, 0x80 }, { TFS_DT_F8_E5M2FNUZ, 1.0f, 0x40 },
		{ TFS_DT_F8_E5M2FNUZ, 57344.0f, 0x7f }, { TFS_DT_F8_E5M2FNUZ, 61440.0f, 0x80 },
		{ TFS_DT_F8_E8M0, 1.0f, 0x7f }, { TFS_DT_F8_E8M0, 1.49f, 0x7f },
		{ TFS_DT_F8_E8M0, 1.5f, 0x80 }, { TFS_DT_F8_E8M0, 3.0f, 0x81 },
		{ TFS_DT_F8_E8M0, 0x1p-127f, 0x00 }, { TFS_DT_F8_E8M0, 1e-45f, 0x00 },
		{ TFS_DT_F8_E8M0, 0x1p127f, 0xfe }, { TFS_DT_F8_E8M0, 0x1.8p127f, 0xff },
		{ TFS_DT_F8_E8M0, INFINITY, 0xff }, { TFS_DT_F8_E8M0, NAN, 0xff },
		{ TFS_DT_F8_E8M0, 0.0f, -1 }, { TFS_DT_F8_E8M0, -0.0f, -1 },
		{ TFS_DT_F8_E8M0, -2.0f, -1 }, { TFS_DT_F4, 0.25f, 0x0 }, { TFS_DT_F4, 0.75f, 0x2 },
		{ TFS_DT_F4, 5.0f, 0x6 }, { TFS_DT_F4, 7.0f, 0x7 }, { TFS_DT_F4, 1e30f, 0x7 },
		{ TFS_DT_F4, -6.0f, 0xf }, { TFS_DT_F4, -0.0f, 0x8 }, { TFS_DT_F4, INFINITY, -1 },
		{ TFS_DT_F4, NAN, -1 }, { TFS_DT_F6_E2M3, 7.5f, 0x1f }, { TFS_DT_F6_E2M3, 8.0f, 0x1f },
		{ TFS_DT_F6_E2M3, 0.0625f, 0x00 }, { TFS_DT_F6_E2M3, -7.75f, 0x3f },
		{ TFS_DT_F6_E3M2, 28.0f, 0x1f }, { TFS_DT_F6_E3M2, 0.03125f, 0x00 },
		{ TFS_DT_F6_E3M2, 0.09375f, 0x02 }, { TFS_DT_F6_E3M2, -INFINITY, -1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const narrow_type *n = NULL;

		for (size_t k = 0; k < sizeof(k_narrow) / sizeof(k_narrow[0]); k++)
			if (k_narrow[k].id == cases[i].id)
				n = &k_narrow[k];
		cr_assert(n);
		cr_expect_eq(narrow_encode(n, cases[i].v), cases[i].code, "%s(%a): 0x%02x, not 0x%02x",
			     tfs_dtype(n->id)->name, (double)cases[i].v, narrow_encode(n, cases[i].v),
			     cases[i].code);
	}
	/* four F6 values pack into three bytes, low bits first; refusals name the element */
	const float f6[4] = { 1.0f, -2.0f, 0.5f, 7.5f };
	uint8_t out[3];
	tfs_error err = { 0 };

	cr_assert_eq(tfs_quantize(out, TFS_DT_F6_E2M3, f6, 4, &err), 0, "%s", err.msg);
	uint32_t w = out[0] | (uint32_t)out[1] << 8 | (uint32_t)out[2] << 16;

	cr_assert_eq(w, 0x08u | 0x30u << 6 | 0x04u << 12 | 0x1fu << 18, "0x%06x", w);
	const float e8[3] = { 1.0f, 2.0f, -4.0f };

	cr_assert_eq(tfs_quantize(out, TFS_DT_F8_E8M0, e8, 3, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "element 2") && strstr(err.msg, "only positive"), "%s", err.msg);
}

/* ==== integers ==== */

Test(quant, integers_take_integral_values_in_range)
{
	uint8_t out[16];
	tfs_error err = { 0 };
	const float ok_i8[] = { -128.0f, 127.0f, 0.0f, -0.0f };
	const float ok_u64 = 18446742974197923840.0f;   /* the largest float below 2^64 */
	uint64_t u;

	cr_assert_eq(tfs_quantize(out, TFS_DT_I8, ok_i8, 4, &err), 0, "%s", err.msg);
	cr_assert_arr_eq(out, ((uint8_t[]){ 0x80, 0x7f, 0, 0 }), 4);
	cr_assert_eq(tfs_quantize(out, TFS_DT_U64, &ok_u64, 1, &err), 0, "%s", err.msg);
	memcpy(&u, out, 8);
	cr_assert_eq(u, 18446742974197923840ull);

	static const struct { int id; float v; const char *why; } bad[] = {
		{ TFS_DT_I8, 127.5f, "not an integer" }, { TFS_DT_I8, 128.0f, "out of the range" },
		{ TFS_DT_I8, NAN, "not an integer" }, { TFS_DT_I32, INFINITY, "out of the range" },
		{ TFS_DT_U8, -1.0f, "out of the range" }, { TFS_DT_BOOL, 2.0f, "out of the range" },
		{ TFS_DT_I64, 9223372036854775808.0f, "out of the range" },
		{ TFS_DT_U64, 18446744073709551616.0f, "out of the range" },
		{ TFS_DT_U16, 0.5f, "not an integer" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		float v[2] = { 1.0f, bad[i].v };

		cr_assert_eq(tfs_quantize(out, bad[i].id, v, 2, &err), TFS_E_INVALID, "case %zu", i);
		cr_assert(strstr(err.msg, bad[i].why) && strstr(err.msg, "element 1"), "%s", err.msg);
	}
}

/* ==== refusals ==== */

Test(quant, refuses_what_it_cannot_write)
{
	float x[256] = { 0 };
	uint8_t out[512];
	tfs_error err = { 0 };

	cr_assert_eq(tfs_quantize(out, TFS_DT_IQ2_XS, x, 256, &err), TFS_E_UNSUPPORTED);
	cr_assert(strstr(err.msg, "IQ2_XS needs an importance matrix"), "%s", err.msg);
	cr_assert(strstr(err.msg, "-o imatrix=FILE"), "%s", err.msg);
	cr_assert(tfs_quantize_needs_imatrix(TFS_DT_IQ1_S));
	cr_assert(!tfs_quantize_needs_imatrix(TFS_DT_IQ1_M));   /* ggml takes none for IQ1_M */
	cr_assert(tfs_quantize_takes_imatrix(TFS_DT_IQ1_M));
	cr_assert(!tfs_quantize_needs_imatrix(TFS_DT_IQ4_XS));
	cr_assert(tfs_quantize_takes_imatrix(TFS_DT_IQ4_XS));   /* ggml weighs IQ4 too */
	cr_assert(tfs_quantize_takes_imatrix(TFS_DT_Q4_K));    /* and the K-quants, */
	cr_assert(tfs_quantize_weighs_blocks(TFS_DT_Q4_K));     /* super-block by super-block */
	cr_assert(tfs_quantize_takes_imatrix(TFS_DT_Q5_1));    /* and the 32-value types, */
	cr_assert(tfs_quantize_weighs_rows(TFS_DT_Q5_1));       /* by their rows */
	cr_assert(!tfs_quantize_takes_imatrix(TFS_DT_Q8_0));   /* ggml ignores it there */
	cr_assert(!tfs_quantize_takes_imatrix(TFS_DT_TQ2_0));
	cr_assert(!tfs_quantize_supported(TFS_DT_C64));
	cr_assert_eq(tfs_quantize(out, TFS_DT_Q4_K, x, 128, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "256-element Q4_K blocks"), "%s", err.msg);
	cr_assert_eq(tfs_quantize(out, 99, x, 1, &err), TFS_E_UNSUPPORTED);
}

/* ==== MLX quantization (mx.quantize's formulas, OLLAMA_FORMATS.md) ==== */

static uint32_t word_at(const uint8_t *w, size_t i)
{
	return (uint32_t)w[4 * i] | (uint32_t)w[4 * i + 1] << 8 | (uint32_t)w[4 * i + 2] << 16 |
	       (uint32_t)w[4 * i + 3] << 24;
}

Test(quant, mlx_e4m3_encoder_is_mlx_s)
{
	/* nearest-even, subnormals in steps of 2^-9, 448 and up saturate to 0x7E: 0x7F (480 to
	 * MLX's decoder) never comes out */
	const struct { float v; uint8_t b; } cases[] = {
		{ 0.0f, 0x00 }, { -0.0f, 0x80 }, { 1.0f, 0x38 }, { -2.0f, 0xC0 }, { 0.5f, 0x30 },
		{ 0x1p-9f, 0x01 }, { 0x1p-10f, 0x00 }, { 3 * 0x1p-10f, 0x02 }, { 448.0f, 0x7E },
		{ 464.0f, 0x7E }, { 470.0f, 0x7E }, { 430.0f, 0x7D }, { 480.0f, 0x7E }, { 1e30f, 0x7E },
		{ -1e30f, 0xFE }, { 1.0625f, 0x38 }, { 1.1875f, 0x3A }, { 0.0139f, 0x07 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_assert_eq(tfs_mlx_e4m3_encode(cases[i].v), cases[i].b, "%g: 0x%02x, not 0x%02x",
			     (double)cases[i].v, tfs_mlx_e4m3_encode(cases[i].v), cases[i].b);
}

Test(quant, mlx_affine_by_hand)
{
	tfs_mlx_desc d = { TFS_QMODE_AFFINE, 4, 32, TFS_DT_F32, TFS_DT_F32, 0 };
	float x[32] = { -1.5f };
	uint8_t w[32], s[8], b[8];
	tfs_error err = { 0 };

	/* min -1.5 has the larger magnitude: scale = 1.5/15, q0 = -15, bias = -1.5; the zeros
	 * are (0 + 1.5) / 0.1f = 14.99999978 -> 15 */
	cr_assert_eq(tfs_mlx_quantize_group(&d, x, NULL, 0, w, s, b, &err), 0, "%s", err.msg);
	float sc, bi;
	memcpy(&sc, s, 4);
	memcpy(&bi, b, 4);
	cr_assert(sc == -1.5f / -15.0f && bi == -1.5f, "scale %g bias %g", (double)sc, (double)bi);
	cr_assert_eq(word_at(w, 0), 0xFFFFFFF0u);
	for (size_t i = 1; i < 4; i++)
		cr_assert_eq(word_at(w, i), 0xFFFFFFFFu);

	/* all zeros: scale -1e-7 (max - min below eps, max's side), bias 0, codes 0; BF16 */
	d.scale_dtype = d.bias_dtype = TFS_DT_BF16;
	memset(x, 0, sizeof(x));
	memset(w, 0xAA, sizeof(w));
	cr_assert_eq(tfs_mlx_quantize_group(&d, x, NULL, 1, w, s, b, &err), 0, "%s", err.msg);
	cr_assert(s[2] == 0xD7 && s[3] == 0xB3 && b[2] == 0 && b[3] == 0,
		  "scale %02x%02x bias %02x%02x", s[3], s[2], b[3], b[2]);
	/* group 1 of a 4-bit row is bytes 16..31: group 0's bytes stay */
	cr_assert(word_at(w, 0) == 0xAAAAAAAAu && word_at(w, 4) == 0);

	/* positive values only: max's side, scale negative, bias = max */
	d.scale_dtype = d.bias_dtype = TFS_DT_F32;
	for (int j = 0; j < 32; j++)
		x[j] = (float)j;
	cr_assert_eq(tfs_mlx_quantize_group(&d, x, NULL, 0, w, s, b, &err), 0, "%s", err.msg);
	memcpy(&sc, s, 4);
	memcpy(&bi, b, 4);
	cr_assert(sc == 31.0f / -15.0f && bi == 31.0f, "scale %g bias %g", (double)sc, (double)bi);
	for (int j = 0; j < 32; j++) {
		uint32_t want = (uint32_t)rint((31.0 - j) * 15.0 / 31.0);
		cr_assert_eq((w[j / 2] >> (4 * (j & 1))) & 15u, want, "element %d", j);
	}
}

Test(quant, mlx_affine_rounds_halves_to_even)
{
	tfs_mlx_desc d = { TFS_QMODE_AFFINE, 4, 32, TFS_DT_F32, TFS_DT_F32, 0 };
	float x[32] = { 0.0f, 15.0f, 2.5f, 3.5f };
	uint8_t w[16], s[4], b[4];
	tfs_error err = { 0 };

	/* scale 15 / -15 = -1, bias 15: codes rint(15 - x), 12.5 and 11.5 both to 12 (MLX's CPU
	 * kernel uses rint; roundf would give 13) */
	cr_assert_eq(tfs_mlx_quantize_group(&d, x, NULL, 0, w, s, b, &err), 0, "%s", err.msg);
	cr_assert_eq(word_at(w, 0), 0xFFFFCC0Fu, "0x%08x", word_at(w, 0));
}

Test(quant, mlx_affine_odd_bits_pack_across_bytes)
{
	tfs_mlx_desc d = { TFS_QMODE_AFFINE, 3, 32, TFS_DT_F32, TFS_DT_F32, 0 };
	float x[32], out[32];
	uint8_t w[12] = { 0 }, s[4], b[4];
	tfs_error err = { 0 };

	for (int j = 0; j < 32; j++)
		x[j] = (float)(j % 8);    /* codes 0..7 exactly: scale -1, bias 7 */
	cr_assert_eq(tfs_mlx_quantize_group(&d, x, NULL, 0, w, s, b, &err), 0, "%s", err.msg);
	tfs_mlx_dequant_row(&d, w, s, b, NULL, 0, 32, out);
	cr_assert_arr_eq(out, x, sizeof(x));
}

Test(quant, mlx_mxfp4_mxfp8_nvfp4_by_hand)
{
	tfs_mlx_desc d4 = { TFS_QMODE_MXFP4, 4, 32, TFS_DT_U8, 0, 0 };
	float x[32] = { 6.0f, 3.0f, -0.75f, 0.25f, -0.1f };
	uint8_t w[32], s[2];
	tfs_error err = { 0 };

	/* amax 6: e = 0; ties go to the first in FP4_LUT order (the smaller magnitude) */
	cr_assert_eq(tfs_mlx_quantize_group(&d4, x, NULL, 0, w, s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(s[0], 127);
	cr_assert_eq(word_at(w, 0), 0x00000957u, "0x%08x", word_at(w, 0));
	/* amax 8.4: log2(1.4) = 0.49 rounds to 0, so 8.4 saturates at 6 */
	x[0] = 8.4f;
	cr_assert_eq(tfs_mlx_quantize_group(&d4, x, NULL, 0, w, s, NULL, &err), 0, "%s", err.msg);
	cr_assert(s[0] == 127 && (w[0] & 15) == 7);

	tfs_mlx_desc d8 = { TFS_QMODE_MXFP8, 8, 32, TFS_DT_U8, 0, 0 };
	float y[32] = { 896.0f, 1.0f, -2.0f };
	cr_assert_eq(tfs_mlx_quantize_group(&d8, y, NULL, 0, w, s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(s[0], 128);
	cr_assert(w[0] == 0x7E && w[1] == 0x30 && w[2] == 0xB8 && w[3] == 0, "%02x %02x %02x",
		  w[0], w[1], w[2]);

	tfs_mlx_desc dn = { TFS_QMODE_NVFP4, 4, 16, TFS_DT_U8, 0, 0 };
	float z[16] = { 12.0f, 1.0f, -3.0f };
	float g = 0.5f;
	cr_assert_eq(tfs_mlx_quantize_group(&dn, z, NULL, 0, w, s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(s[0], 0x40);   /* E4M3(12 / 6) = 2 */
	cr_assert_eq(word_at(w, 0), 0x00000B17u, "0x%08x", word_at(w, 0));
	/* with a global scale 0.5: the values over it, 24 / 6 = 4 */
	cr_assert_eq(tfs_mlx_quantize_group(&dn, z, &g, 0, w, s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(s[0], 0x48);
	cr_assert_eq(word_at(w, 0), 0x00000B17u, "0x%08x", word_at(w, 0));
	memset(z, 0, sizeof(z));
	cr_assert_eq(tfs_mlx_quantize_group(&dn, z, NULL, 0, w, s, NULL, &err), 0, "%s", err.msg);
	cr_assert(s[0] == 0 && word_at(w, 0) == 0 && word_at(w, 1) == 0);
}

Test(quant, mlx_refuses_what_it_cannot_represent)
{
	tfs_mlx_desc d = { TFS_QMODE_AFFINE, 4, 32, TFS_DT_F16, TFS_DT_F16, 0 };
	tfs_mlx_desc dx = { TFS_QMODE_MXFP4, 4, 32, TFS_DT_U8, 0, 0 };
	float x[32] = { 0 };
	uint8_t w[16], s[64], b[64];
	tfs_error err = { 0 };

	x[3] = NAN;
	cr_assert_eq(tfs_mlx_quantize_group(&d, x, NULL, 0, w, s, b, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "value 3") && strstr(err.msg, "nan"), "%s", err.msg);
	x[3] = INFINITY;
	cr_assert_eq(tfs_mlx_quantize_group(&dx, x, NULL, 0, w, s, b, &err), TFS_E_INVALID);
	x[3] = 2e6f;    /* a scale of 2e6/15 overflows F16 */
	cr_assert_eq(tfs_mlx_quantize_group(&d, x, NULL, 0, w, s, b, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "overflows F16"), "%s", err.msg);
	x[3] = 1e-40f;  /* 2^-134: below the smallest E8M0 scale */
	cr_assert_eq(tfs_mlx_quantize_group(&dx, x, NULL, 0, w, s, b, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "E8M0"), "%s", err.msg);
}

/* The MLX vectors of tests/data/vectors/mlx: quantizing what they dequantize to gives their
 * bytes back where MLX's quantizer is idempotent (mxfp8, nvfp4: the largest code of a
 * group sits at the top of its scale), and values within one step elsewhere (affine: its
 * scale and bias are recomputed and rounded to the dtype again; mxfp4: a group whose
 * largest code is not 6 gets a smaller scale by round(log2)). */
typedef struct {
	char name[32];
	tfs_mlx_desc d;
	int rows, cols;
	bool gscale, exact;
} mlx_vec;

ParameterizedTestParameters(quant, mlx_vectors_requantize)
{
	static mlx_vec v[] = {
		{ "mlx_affine_b4_g128_f32", { TFS_QMODE_AFFINE, 4, 128, TFS_DT_F32, TFS_DT_F32, 0 }, 4, 256, false, false },
		{ "mlx_affine_b4_g32_bf16", { TFS_QMODE_AFFINE, 4, 32, TFS_DT_BF16, TFS_DT_BF16, 0 }, 4, 256, false, false },
		{ "mlx_affine_b8_g32_f16", { TFS_QMODE_AFFINE, 8, 32, TFS_DT_F16, TFS_DT_F16, 0 }, 4, 256, false, false },
		{ "mlx_affine_b8_g64_bf16", { TFS_QMODE_AFFINE, 8, 64, TFS_DT_BF16, TFS_DT_BF16, 0 }, 4, 256, false, false },
		{ "mlx_int4", { TFS_QMODE_AFFINE, 4, 64, TFS_DT_BF16, TFS_DT_BF16, 0 }, 8, 128, false, false },
		{ "mlx_int8", { TFS_QMODE_AFFINE, 8, 64, TFS_DT_BF16, TFS_DT_BF16, 0 }, 8, 128, false, false },
		{ "mlx_mxfp4", { TFS_QMODE_MXFP4, 4, 32, TFS_DT_U8, 0, 0 }, 8, 128, false, false },
		{ "mlx_mxfp8", { TFS_QMODE_MXFP8, 8, 32, TFS_DT_U8, 0, 0 }, 8, 128, false, true },
		{ "mlx_nvfp4", { TFS_QMODE_NVFP4, 4, 16, TFS_DT_U8, 0, 0 }, 8, 128, false, true },
		{ "mlx_nvfp4-gs", { TFS_QMODE_NVFP4, 4, 16, TFS_DT_U8, 0, TFS_DT_F32 }, 8, 128, true, true },
	};
	return cr_make_param_array(mlx_vec, v, sizeof(v) / sizeof(v[0]));
}

static void *mlx_file(const char *name, const char *part, size_t *len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/vectors/mlx/%s.%s", TFS_TESTDATA, name, part);
	return test_slurp_exact(path, len);
}

ParameterizedTest(mlx_vec *v, quant, mlx_vectors_requantize)
{
	const tfs_mlx_desc *d = &v->d;
	const size_t groups = (size_t)v->cols / d->group, pb = d->scale_dtype == TFS_DT_F32 ? 4
							     : d->scale_dtype == TFS_DT_U8 ? 1 : 2;
	size_t wl, sl, bl = 0, fl, gl;
	uint8_t *w = mlx_file(v->name, "weight.bin", &wl), *s = mlx_file(v->name, "scale.bin", &sl);
	uint8_t *b = d->mode == TFS_QMODE_AFFINE ? mlx_file(v->name, "bias.bin", &bl) : NULL;
	float *want = mlx_file(v->name, "f32", &fl), *gs = v->gscale ? mlx_file(v->name,
						      "global_scale.bin", &gl) : NULL;
	uint8_t *w2 = calloc(wl, 1), *s2 = calloc(sl, 1), *b2 = calloc(bl + 1, 1);
	float *got = calloc(fl / 4, sizeof(float));
	const size_t wr = wl / (size_t)v->rows;
	tfs_error err = { 0 };

	cr_assert(fl == (size_t)v->rows * (size_t)v->cols * 4 && sl == v->rows * groups * pb);
	for (int r = 0; r < v->rows; r++) {
		for (size_t g = 0; g < groups; g++)
			cr_assert_eq(tfs_mlx_quantize_group(d, want + (size_t)r * v->cols + g * d->group,
							    gs, g, w2 + r * wr, s2 + r * groups * pb,
							    b ? b2 + r * groups * pb : NULL, &err), 0,
				     "%s", err.msg);
		tfs_mlx_dequant_row(d, w2 + r * wr, s2 + r * groups * pb,
				    b ? b2 + r * groups * pb : NULL, gs, 0, (uint64_t)v->cols,
				    got + (size_t)r * v->cols);
	}
	if (v->exact) {
		cr_assert(!memcmp(w, w2, wl) && !memcmp(s, s2, sl), "%s: bytes differ", v->name);
	}
	for (size_t i = 0; i < fl / 4; i++) {
		/* affine: one step of the group (MLX moves the scale so that 0 is a level, which
		 * can clip the far edge by up to a step) plus the rounding of the scale (times
		 * the largest code) and of the bias (the edge) to their dtype; mxfp4: a third of
		 * the group's largest magnitude (FP4's top step, or saturation) */
		const float *grp = want + i / d->group * d->group;
		float lo = grp[0], hi = grp[0], amax = 0;

		for (uint32_t j = 0; j < d->group; j++) {
			lo = fminf(lo, grp[j]);
			hi = fmaxf(hi, grp[j]);
			amax = fmaxf(amax, fabsf(grp[j]));
		}
		const float n_bins = (float)((1u << d->bits) - 1), step = (hi - lo) / n_bins;
		const float u = d->scale_dtype == TFS_DT_BF16 ? 0x1p-8f
				: d->scale_dtype == TFS_DT_F16 ? 0x1p-11f : 0x1p-24f;
		float tol = d->mode == TFS_QMODE_AFFINE ? step * (1 + n_bins * u) + amax * u
							: amax / 3;
		cr_assert(fabsf(got[i] - want[i]) <= tol + 1e-6f * amax, "%s: element %zu: %g vs %g",
			  v->name, i, (double)got[i], (double)want[i]);
	}
	free(w), free(s), free(b), free(want), free(gs), free(w2), free(s2), free(b2), free(got);
}
