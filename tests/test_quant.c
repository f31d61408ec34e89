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

	cr_assert_eq(tfs_quantize(out, TFS_DT_IQ3_S, x, 256, &err), TFS_E_UNSUPPORTED);
	cr_assert(strstr(err.msg, "IQ3_S needs an importance matrix"), "%s", err.msg);
	cr_assert(tfs_quantize_needs_imatrix(TFS_DT_IQ1_M));
	cr_assert(!tfs_quantize_needs_imatrix(TFS_DT_IQ4_XS));
	cr_assert_eq(tfs_quantize(out, TFS_DT_F8_E8M0, x, 4, &err), TFS_E_UNSUPPORTED);
	cr_assert(strstr(err.msg, "F8_E8M0"), "%s", err.msg);
	cr_assert(!tfs_quantize_supported(TFS_DT_C64));
	cr_assert_eq(tfs_quantize(out, TFS_DT_Q4_K, x, 128, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "256-element Q4_K blocks"), "%s", err.msg);
	cr_assert_eq(tfs_quantize(out, 99, x, 1, &err), TFS_E_UNSUPPORTED);
}
