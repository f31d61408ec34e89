/*
 * test_dequant.c - the float32 kernels against ggml's / MLX's exact outputs.
 *
 * Data: tests/data/vectors/<T>.bin + <T>.f32 (+ <T>.cquant.*) for every GGML
 * type, tests/data/vectors/mlx/<case>.*, tests/data/ollama/expected/.  Every
 * comparison is bit for bit (memcmp), reporting the first differing index.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tensorfs.h"
#include "num/dequant.h"

#ifndef TFS_TESTDATA
#error "TFS_TESTDATA must name tests/data"
#endif

/* ==== helpers ==== */

/* Index of the first float whose bits differ, or -1.  Two NaNs are the same: which NaN
 * operand of d * q + m an x86 instruction passes on depends on the operands' order, and a
 * compiler may swap them (clang does, in the Q4_1 kernel; gcc does not), so a NaN's
 * payload is not part of the result (ggml's is whatever its compiler made it). */
static long first_diff(const float *a, const float *b, size_t n)
{
	if (memcmp(a, b, n * 4) == 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (memcmp(a + i, b + i, 4) != 0 && !(isnan(a[i]) && isnan(b[i])))
			return (long)i;
	return -1;
}

static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

#define assert_same_floats(got, want, n, ...)                                           \
	do {                                                                            \
		const float *g_ = (got), *w_ = (want);                                  \
		long at_ = first_diff(g_, w_, (n));                                     \
		if (at_ >= 0) {                                                         \
			char what_[256];                                                \
			snprintf(what_, sizeof(what_), __VA_ARGS__);                    \
			cr_assert_fail("%s: first difference at index %ld: got %a (0x%08x), " \
				       "want %a (0x%08x)", what_, at_, (double)g_[at_],     \
				       bits_of(g_[at_]), (double)w_[at_], bits_of(w_[at_])); \
		}                                                                       \
	} while (0)

/* Deterministic bytes (xorshift64*). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rng() >> 56);
}

/* ==== the GGML vectors ==== */

/* Checks one <T><variant>.bin/.f32 pair with both kernels; returns false if absent. */
static bool check_vector(int id, const char *variant)
{
	const tfs_dtype_info *t = tfs_dtype(id);
	char path[4096];
	size_t nbin, nf32;
	uint8_t *bin;
	float *want, *got;

	snprintf(path, sizeof(path), "%s/vectors/%s%s.bin", TFS_TESTDATA, t->name, variant);
	bin = test_read_file(path, &nbin);
	if (!bin)
		return false;
	snprintf(path, sizeof(path), "%s/vectors/%s%s.f32", TFS_TESTDATA, t->name, variant);
	want = test_slurp(path, &nf32);

	size_t nblocks = nbin / t->block_bytes;
	cr_assert(nbin % t->block_bytes == 0, "%s%s: %zu bytes is not whole blocks", t->name,
		  variant, nbin);
	cr_assert(nf32 == nblocks * t->block_elems * t->f32_per_elem * 4,
		  "%s%s: %zu float bytes for %zu blocks", t->name, variant, nf32, nblocks);

	got = malloc(nf32 + 4);
	cr_assert(got);
	const tfs_to_f32_fn kernels[2] = { t->to_f32_ref, t->to_f32 };
	for (int k = 0; k < 2; k++) {
		memset(got, 0xa5, nf32 + 4);
		kernels[k](bin, got, nblocks);
		assert_same_floats(got, want, nf32 / 4, "%s%s (%s kernel)", t->name, variant,
				   k ? "fast" : "reference");
		cr_assert(bits_of(got[nf32 / 4]) == 0xa5a5a5a5u, "%s%s: wrote past the end",
			  t->name, variant);
	}

	/* the JSON agrees with the traits table */
	snprintf(path, sizeof(path), "%s/vectors/%s.json", TFS_TESTDATA, t->name);
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	cr_assert(j, "%s: %s", path, jerr.text);
	cr_assert_eq(json_integer_value(json_object_get(j, "type_id")), id, "%s type_id", t->name);
	cr_assert_eq(json_integer_value(json_object_get(j, "block_size")), t->block_elems,
		     "%s block_size", t->name);
	cr_assert_eq(json_integer_value(json_object_get(j, "type_size")), t->block_bytes,
		     "%s type_size", t->name);
	json_decref(j);

	free(bin);
	free(want);
	free(got);
	return true;
}

Test(dequant, ggml_vectors_bit_exact)
{
	int checked = 0, missing = 0;

	for (int id = 0; id < TFS_DT_GGML_COUNT; id++) {
		const tfs_dtype_info *t = tfs_dtype(id);

		if (!t)
			continue;
		cr_assert(t->to_f32 && t->to_f32_ref, "%s has no kernel", t->name);
		if (check_vector(id, ""))
			checked++;
		else if (id != TFS_DT_Q8_1) /* ggml cannot dequantize Q8_1: no vector for it */
			missing++, cr_log_warn("no vector for %s", t->name);
		if (check_vector(id, ".cquant"))
			checked++;
	}
	cr_assert(missing == 0, "%d types without a vector", missing);
	cr_log_info("%d GGML vector files bit-exact with both kernels", checked);
	cr_assert(checked >= 59, "only %d vector files", checked);
}

/* ==== SIMD against scalar on random blocks ==== */

Test(dequant, fast_kernels_match_reference_on_random_blocks)
{
	const size_t nblocks = 4099; /* odd: exercises every tail path */
	int compared = 0;

	for (int id = 0; id < TFS_DT_END; id++) {
		const tfs_dtype_info *t = tfs_dtype(id);

		if (!t)
			continue;
		size_t nin = nblocks * t->block_bytes;
		size_t nout = nblocks * t->block_elems * t->f32_per_elem;
		uint8_t *in = malloc(nin);
		float *a = malloc(nout * 4 + 4), *b = malloc(nout * 4 + 4);

		cr_assert(in && a && b);
		for (int round = 0; round < 2; round++) {
			fill_random(in, nin);
			memset(a, 0x11, nout * 4 + 4);
			memset(b, 0x22, nout * 4 + 4);
			t->to_f32_ref(in, a, nblocks);
			t->to_f32(in, b, nblocks);
			/* bit patterns, so NaNs from random scales compare too */
			assert_same_floats(b, a, nout, "%s random blocks (round %d)", t->name, round);
			cr_assert(bits_of(a[nout]) == 0x11111111u && bits_of(b[nout]) == 0x22222222u,
				  "%s: wrote past the end", t->name);
			/* and every suffix length up to 3 blocks, from an odd address */
			for (size_t nb = 1; nb <= 3; nb++) {
				uint8_t *odd = malloc(nb * t->block_bytes + 1);

				cr_assert(odd);
				memcpy(odd + 1, in, nb * t->block_bytes);
				t->to_f32(odd + 1, b, nb);
				assert_same_floats(b, a, nb * t->block_elems * t->f32_per_elem,
						   "%s %zu unaligned blocks", t->name, nb);
				free(odd);
			}
		}
		if (t->to_f32 != t->to_f32_ref)
			compared++;
		free(in);
		free(a);
		free(b);
	}
	cr_log_info("%d types have a SIMD kernel", compared);
}

/* Halves whose scale fields would be NaN are common in random data: check the quieting. */
Test(dequant, f16_conversion_quiets_snan_like_ggml)
{
	cr_assert_eq(bits_of(tfs_f16_to_f32(0x7c01)), 0x7fc02000u);
	cr_assert_eq(bits_of(tfs_f16_to_f32(0xfdff)), 0xffffe000u);
	cr_assert_eq(bits_of(tfs_f16_to_f32(0x7e00)), 0x7fc00000u);
	cr_assert_eq(bits_of(tfs_f16_to_f32(0x7c00)), 0x7f800000u);
	cr_assert_eq(tfs_f16_to_f32(0x0001), 0x1p-24f);
	cr_assert_eq(tfs_f16_to_f32(0x83ff), -0x3ffp-24f);
	cr_assert_eq(tfs_f16_to_f32(0x3c00), 1.0f);
	cr_assert_eq(tfs_f16_to_f32(0x7bff), 65504.0f);
	cr_assert_eq(bits_of(tfs_f16_to_f32(0x8000)), 0x80000000u);
	cr_assert_eq(tfs_bf16_to_f32(0x3f80), 1.0f);
	/* every half, via the F16 kernels, against the scalar conversion */
	static uint16_t all[65536];
	static float a[65536], b[65536];
	for (uint32_t i = 0; i < 65536; i++)
		all[i] = (uint16_t)i;
	const tfs_dtype_info *t = tfs_dtype(TFS_DT_F16);
	t->to_f32(all, a, 65536);
	for (uint32_t i = 0; i < 65536; i++)
		b[i] = tfs_f16_to_f32((uint16_t)i);
	assert_same_floats(a, b, 65536, "all halves");
	t = tfs_dtype(TFS_DT_BF16);
	t->to_f32(all, a, 65536);
	t->to_f32_ref(all, b, 65536);
	assert_same_floats(a, b, 65536, "all bfloat16s");
}

/* ==== safetensors-only types ==== */

static void convert(int id, const void *src, size_t nblocks, float *out)
{
	const tfs_dtype_info *t = tfs_dtype(id);

	cr_assert(t, "type %d", id);
	t->to_f32_ref(src, out, nblocks);
}

Test(dequant, safetensors_small_types)
{
	float o[8];

	/* values from tests/data/safetensors/ok_all_dtypes.safetensors */
	convert(TFS_DT_F8_E5M2FNUZ, "\x40", 1, o);
	cr_assert_eq(o[0], 1.0f);
	convert(TFS_DT_F8_E4M3FNUZ, "\x40", 1, o);
	cr_assert_eq(o[0], 1.0f);
	convert(TFS_DT_F8_E8M0, "\x7f\x00\xfe", 3, o);
	cr_assert(o[0] == 1.0f && o[1] == 0x1p-127f && o[2] == 0x1p127f);
	convert(TFS_DT_F8_E4M3, "\x00\x38\x7e\xb8", 4, o);
	cr_assert(o[0] == 0.0f && o[1] == 1.0f && o[2] == 448.0f && o[3] == -1.0f);
	convert(TFS_DT_F8_E5M2, "\x00\x3c\x7b\xbc", 4, o);
	cr_assert(o[0] == 0.0f && o[1] == 1.0f && o[2] == 57344.0f && o[3] == -1.0f);
	convert(TFS_DT_BOOL, "\x00\x01\x01\x00", 4, o);
	cr_assert(o[0] == 0.0f && o[1] == 1.0f && o[2] == 1.0f && o[3] == 0.0f);
	convert(TFS_DT_U8, "\x00\x01\xff", 3, o);
	cr_assert(o[0] == 0.0f && o[1] == 1.0f && o[2] == 255.0f);
	convert(TFS_DT_I8, "\x80\x00\x7f", 3, o);
	cr_assert(o[0] == -128.0f && o[1] == 0.0f && o[2] == 127.0f);
	convert(TFS_DT_U16, "\x00\x00\xff\xff", 2, o);
	cr_assert(o[0] == 0.0f && o[1] == 65535.0f);
	convert(TFS_DT_U64, "\xff\xff\xff\xff\xff\xff\xff\xff", 1, o);
	cr_assert(o[0] == 0x1p64f);
	convert(TFS_DT_I64, "\xfb\xff\xff\xff\xff\xff\xff\xff", 1, o);
	cr_assert(o[0] == -5.0f);
	convert(TFS_DT_U32, "\x78\x56\x34\x12", 1, o);
	cr_assert(o[0] == (float)0x12345678u);
	convert(TFS_DT_C64, "\x00\x00\x80\x3f\x00\x00\x00\x40", 1, o);
	cr_assert(o[0] == 1.0f && o[1] == 2.0f);

	/* NaN encodings */
	convert(TFS_DT_F8_E4M3, "\x7f\xff\x80", 3, o);
	cr_assert(isnan(o[0]) && isnan(o[1]) && o[2] == 0.0f && signbit(o[2]));
	convert(TFS_DT_F8_E4M3FNUZ, "\x80\x7f", 2, o);
	cr_assert(isnan(o[0]) && o[1] == 240.0f);
	convert(TFS_DT_F8_E5M2FNUZ, "\x80\x7f", 2, o);
	cr_assert(isnan(o[0]) && o[1] == 57344.0f);
	convert(TFS_DT_F8_E8M0, "\xff", 1, o);
	cr_assert(isnan(o[0]));
	convert(TFS_DT_F8_E5M2, "\x7c\xfc\x7d", 3, o);
	cr_assert(isinf(o[0]) && o[0] > 0 && isinf(o[1]) && o[1] < 0 && isnan(o[2]));
	/* subnormals */
	convert(TFS_DT_F8_E4M3, "\x01\x87", 2, o);
	cr_assert(o[0] == 0x1p-9f && o[1] == -7 * 0x1p-9f);
	convert(TFS_DT_F8_E4M3FNUZ, "\x01", 1, o);
	cr_assert(o[0] == 0x1p-10f);
	convert(TFS_DT_F8_E5M2FNUZ, "\x01", 1, o);
	cr_assert(o[0] == 0x1p-17f);

	/* F4: element 0 in the low nibble; E2M1 */
	convert(TFS_DT_F4, "\x21\xf7", 2, o);
	cr_assert(o[0] == 0.5f && o[1] == 1.0f && o[2] == 6.0f && o[3] == -6.0f);
	/* F6: 4 elements in 3 bytes, element 0 in the low 6 bits */
	{
		/* E2M3: 0x08 = 1.0, 0x3f = -7.5, 0x01 = 0.125, 0x1f = 7.5 */
		uint32_t w = 0x08u | 0x3fu << 6 | 0x01u << 12 | 0x1fu << 18;
		uint8_t p[3] = { (uint8_t)w, (uint8_t)(w >> 8), (uint8_t)(w >> 16) };

		convert(TFS_DT_F6_E2M3, p, 1, o);
		cr_assert(o[0] == 1.0f && o[1] == -7.5f && o[2] == 0.125f && o[3] == 7.5f,
			  "F6_E2M3 %g %g %g %g", o[0], o[1], o[2], o[3]);
		/* E3M2: 0x0c = 1.0, 0x3f = -28, 0x01 = 0.0625, 0x1f = 28 */
		w = 0x0cu | 0x3fu << 6 | 0x01u << 12 | 0x1fu << 18;
		p[0] = (uint8_t)w, p[1] = (uint8_t)(w >> 8), p[2] = (uint8_t)(w >> 16);
		convert(TFS_DT_F6_E3M2, p, 1, o);
		cr_assert(o[0] == 1.0f && o[1] == -28.0f && o[2] == 0.0625f && o[3] == 28.0f,
			  "F6_E3M2 %g %g %g %g", o[0], o[1], o[2], o[3]);
	}
}

/* ==== the traits table ==== */

Test(dtype, table_sanity)
{
	int known = 0;

	for (int id = -3; id < TFS_DT_END + 3; id++) {
		const tfs_dtype_info *t = tfs_dtype(id);

		if (!t)
			continue;
		known++;
		cr_assert(t->name && t->block_elems && t->block_bytes, "id %d", id);
		cr_assert_eq(tfs_dtype_from_name(t->name), id, "%s does not round-trip", t->name);
		cr_assert(t->to_f32 && t->to_f32_ref, "%s has no float view", t->name);
		cr_assert_eq(t->f32_per_elem, id == TFS_DT_C64 ? 2u : 1u, "%s", t->name);
	}
	cr_assert_eq(known, 35 + 14);
	static const int removed[] = { 4, 5, 31, 32, 33, 36, 37, 38, 43, 63 };
	for (size_t i = 0; i < sizeof(removed) / sizeof(removed[0]); i++)
		cr_assert_null(tfs_dtype(removed[i]), "id %d", removed[i]);
	cr_assert_eq(tfs_dtype_from_name("q4_k"), -1);
	cr_assert_eq(tfs_dtype_from_name("Q4_K"), TFS_DT_Q4_K);
	cr_assert_eq(tfs_dtype_from_name(""), -1);
	cr_assert_eq(tfs_dtype_from_name(NULL), -1);
	cr_assert_str_eq(tfs_dtype(TFS_DT_F32)->npy_descr, "<f4");
	cr_assert_str_eq(tfs_dtype(TFS_DT_BOOL)->npy_descr, "|b1");
	cr_assert_str_eq(tfs_dtype(TFS_DT_C64)->npy_descr, "<c8");
	cr_assert_null(tfs_dtype(TFS_DT_BF16)->npy_descr);
	cr_assert_null(tfs_dtype(TFS_DT_Q4_0)->npy_descr);
	cr_assert_null(tfs_dtype(TFS_DT_F8_E4M3)->npy_descr);
	cr_assert_eq(tfs_dtype(TFS_DT_Q8_1)->block_bytes, 36u);
	cr_assert_eq(tfs_dtype(TFS_DT_F4)->block_elems, 2u);
	cr_assert_eq(tfs_dtype(TFS_DT_F6_E2M3)->block_bytes, 3u);
}

Test(dtype, nbytes)
{
	tfs_error err;
	uint64_t n;

	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_Q4_K, 512, &err), 0);
	cr_assert_eq(n, 288u);
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_F4, 6, &err), 0);
	cr_assert_eq(n, 3u);
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_F6_E3M2, 8, &err), 0);
	cr_assert_eq(n, 6u);
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_F32, 0, &err), 0);
	cr_assert_eq(n, 0u);

	memset(&err, 0, sizeof(err));
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_Q4_K, 300, &err), TFS_E_FORMAT);
	cr_assert_eq(err.code, TFS_E_FORMAT);
	cr_assert(strstr(err.msg, "Q4_K"), "message: %s", err.msg);
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_F4, 3, &err), TFS_E_FORMAT);
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_F32, UINT64_MAX / 2, &err), TFS_E_FORMAT);
	cr_assert(strstr(err.msg, "overflow"), "message: %s", err.msg);
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_Q8_K, UINT64_MAX - 255, &err), TFS_E_FORMAT);
	cr_assert_eq(tfs_dtype_nbytes(&n, 4, 32, &err), TFS_E_FORMAT);
	cr_assert_eq(tfs_dtype_nbytes(&n, 99, 32, &err), TFS_E_FORMAT);
	cr_assert_eq(tfs_dtype_nbytes(&n, TFS_DT_F64, UINT64_MAX / 8, &err), 0);
	cr_assert_eq(n, UINT64_MAX / 8 * 8);
}

/* ==== MLX ==== */

static int dtype_by_json_name(const char *s)
{
	if (!strcasecmp(s, "bf16"))
		return TFS_DT_BF16;
	if (!strcasecmp(s, "f16"))
		return TFS_DT_F16;
	if (!strcasecmp(s, "f32"))
		return TFS_DT_F32;
	return -1;
}

static void check_mlx_case(const char *name, const char *ollama_expected)
{
	char path[4096];
	json_error_t jerr;
	size_t nw, ns, nb = 0, ng = 0, ne;

	snprintf(path, sizeof(path), "%s/vectors/mlx/%s.json", TFS_TESTDATA, name);
	json_t *j = json_load_file(path, 0, &jerr);
	cr_assert(j, "%s: %s", path, jerr.text);

	const char *mode = json_string_value(json_object_get(j, "mode"));
	tfs_mlx_desc d = { 0 };
	d.bits = (uint32_t)json_integer_value(json_object_get(j, "bits"));
	d.group = (uint32_t)json_integer_value(json_object_get(j, "group_size"));
	const uint64_t rows = (uint64_t)json_integer_value(json_object_get(j, "rows"));
	const uint64_t cols = (uint64_t)json_integer_value(json_object_get(j, "cols"));
	cr_assert(mode && d.bits && d.group && rows && cols, "%s: incomplete json", name);
	if (!strcmp(mode, "affine")) {
		const char *sd = json_string_value(json_object_get(j, "scale_dtype"));

		if (!sd)
			sd = json_string_value(json_object_get(json_object_get(j, "scale"), "dtype"));
		d.mode = TFS_QMODE_AFFINE;
		d.scale_dtype = d.bias_dtype = dtype_by_json_name(sd);
		cr_assert(d.scale_dtype >= 0, "%s: scale dtype %s", name, sd);
	} else {
		d.mode = !strcmp(mode, "nvfp4") ? TFS_QMODE_NVFP4
		       : !strcmp(mode, "mxfp4") ? TFS_QMODE_MXFP4
		       : !strcmp(mode, "mxfp8") ? TFS_QMODE_MXFP8 : TFS_QMODE_NONE;
		cr_assert(d.mode != TFS_QMODE_NONE, "%s: mode %s", name, mode);
		d.scale_dtype = TFS_DT_U8;
		d.gscale_dtype = TFS_DT_F32;
	}
	const size_t psize = d.scale_dtype == TFS_DT_F32 ? 4 : d.scale_dtype == TFS_DT_U8 ? 1 : 2;
	json_decref(j);

	snprintf(path, sizeof(path), "%s/vectors/mlx/%s.weight.bin", TFS_TESTDATA, name);
	uint8_t *w = test_slurp(path, &nw);
	snprintf(path, sizeof(path), "%s/vectors/mlx/%s.scale.bin", TFS_TESTDATA, name);
	uint8_t *s = test_slurp(path, &ns);
	snprintf(path, sizeof(path), "%s/vectors/mlx/%s.bias.bin", TFS_TESTDATA, name);
	uint8_t *bias = test_read_file(path, &nb);
	snprintf(path, sizeof(path), "%s/vectors/mlx/%s.global_scale.bin", TFS_TESTDATA, name);
	float *gs = test_read_file(path, &ng);
	snprintf(path, sizeof(path), "%s/vectors/mlx/%s.f32", TFS_TESTDATA, name);
	float *want = test_slurp(path, &ne);

	const uint64_t row_bytes = cols * d.bits / 8, groups = cols / d.group;
	cr_assert_eq(nw, rows * row_bytes, "%s weight size", name);
	cr_assert_eq(ns, rows * groups * psize, "%s scale size", name);
	cr_assert_eq(ne, rows * cols * 4, "%s expected size", name);
	cr_assert_eq(d.mode == TFS_QMODE_AFFINE, bias != NULL, "%s bias", name);
	cr_assert(!gs || ng == 4 || ng == rows * 4, "%s global scale size", name);

	float *got = malloc((cols + 1) * 4);
	cr_assert(got);
	for (uint64_t r = 0; r < rows; r++) {
		const uint8_t *wr = w + r * row_bytes, *sr = s + r * groups * psize;
		const uint8_t *br = bias ? bias + r * groups * psize : NULL;
		const float *g = gs ? (ng == 4 ? gs : gs + r) : NULL;

		/* the whole row */
		got[cols] = -1.0f;
		tfs_mlx_dequant_row(&d, wr, sr, br, g, 0, cols, got);
		assert_same_floats(got, want + r * cols, cols, "%s row %llu", name,
				   (unsigned long long)r);
		cr_assert_eq(got[cols], -1.0f, "%s: wrote past n", name);
		/* ranges that start and end inside groups */
		for (int t = 0; t < 40; t++) {
			uint64_t k0 = rng() % cols, n = rng() % (cols - k0) + 1;

			got[n] = -1.0f;
			tfs_mlx_dequant_row(&d, wr, sr, br, g, k0, n, got);
			assert_same_floats(got, want + r * cols + k0, n, "%s row %llu [%llu, +%llu)",
					   name, (unsigned long long)r, (unsigned long long)k0,
					   (unsigned long long)n);
			cr_assert_eq(got[n], -1.0f, "%s: wrote past n", name);
		}
	}

	if (ollama_expected) {
		size_t no;

		snprintf(path, sizeof(path), "%s/ollama/expected/%s", TFS_TESTDATA, ollama_expected);
		float *o = test_slurp(path, &no);
		cr_assert_eq(no, ne, "%s size", ollama_expected);
		assert_same_floats(o, want, no / 4, "%s", ollama_expected);
		free(o);
	}
	free(got);
	free(w);
	free(s);
	free(bias);
	free(gs);
	free(want);
}

Test(mlx, vectors_bit_exact)
{
	static const struct { const char *name, *ollama; } cases[] = {
		{ "mlx_affine_b4_g128_f32", NULL },
		{ "mlx_affine_b4_g32_bf16", NULL },
		{ "mlx_affine_b8_g32_f16", NULL },
		{ "mlx_affine_b8_g64_bf16", NULL },
		{ "mlx_int4", "oracle-st_int4/model.layers.0.mlp.down_proj.weight.f32" },
		{ "mlx_int8", "oracle-st_int8/model.layers.0.mlp.down_proj.weight.f32" },
		{ "mlx_mxfp4", NULL },
		{ "mlx_mxfp8", "oracle-st_mxfp8/model.layers.0.mlp.down_proj.weight.f32" },
		{ "mlx_nvfp4", "oracle-st_nvfp4/model.layers.0.mlp.down_proj.weight.f32" },
		{ "mlx_nvfp4-gs", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_mlx_case(cases[i].name, cases[i].ollama);
}

/* 3-, 5- and 6-bit affine over the continuous bit stream, against a bit-by-bit decoder. */
Test(mlx, affine_odd_widths)
{
	enum { COLS = 320, GROUP = 64 };
	uint8_t w[COLS];   /* >= COLS * 8 / 8 bytes */
	uint8_t s[COLS / GROUP * 4], b[COLS / GROUP * 4];
	float got[COLS], want[COLS];

	for (uint32_t bits = 2; bits <= 8; bits++) {
		const int dts[3] = { TFS_DT_BF16, TFS_DT_F16, TFS_DT_F32 };

		for (int di = 0; di < 3; di++) {
			tfs_mlx_desc d = { .mode = TFS_QMODE_AFFINE, .bits = bits, .group = GROUP,
					   .scale_dtype = dts[di], .bias_dtype = dts[di] };
			fill_random(w, sizeof(w));
			for (int g = 0; g < COLS / GROUP; g++) {
				float sv = (float)(g + 1) * 0.01f, bv = -(float)g * 0.25f;

				if (dts[di] == TFS_DT_F32) {
					memcpy(s + 4 * g, &sv, 4);
					memcpy(b + 4 * g, &bv, 4);
				} else if (dts[di] == TFS_DT_BF16) {
					uint16_t hs = (uint16_t)(bits_of(sv) >> 16), hb = (uint16_t)(bits_of(bv) >> 16);

					memcpy(s + 2 * g, &hs, 2);
					memcpy(b + 2 * g, &hb, 2);
				} else {
					uint16_t hs = (uint16_t)(0x2000 + g), hb = (uint16_t)(0xb800 + g);

					memcpy(s + 2 * g, &hs, 2);
					memcpy(b + 2 * g, &hb, 2);
				}
			}
			const size_t row_bytes = (size_t)COLS * bits / 8;
			for (int k = 0; k < COLS; k++) {
				uint32_t q = 0;

				for (uint32_t i = 0; i < bits; i++) {
					size_t bit = (size_t)k * bits + i;

					q |= (uint32_t)((w[bit / 8] >> (bit % 8)) & 1) << i;
				}
				float sv, bv;
				if (dts[di] == TFS_DT_F32) {
					memcpy(&sv, s + 4 * (k / GROUP), 4);
					memcpy(&bv, b + 4 * (k / GROUP), 4);
				} else if (dts[di] == TFS_DT_BF16) {
					sv = tfs_bf16_to_f32(tfs_le16(s + 2 * (k / GROUP)));
					bv = tfs_bf16_to_f32(tfs_le16(b + 2 * (k / GROUP)));
				} else {
					sv = tfs_f16_to_f32(tfs_le16(s + 2 * (k / GROUP)));
					bv = tfs_f16_to_f32(tfs_le16(b + 2 * (k / GROUP)));
				}
				want[k] = sv * (float)q + bv;
			}
			/* the row's own bytes only: a copy of exactly row_bytes on the heap */
			uint8_t *row = malloc(row_bytes);
			cr_assert(row);
			memcpy(row, w, row_bytes);
			tfs_mlx_dequant_row(&d, row, s, b, NULL, 0, COLS, got);
			assert_same_floats(got, want, COLS, "affine %u-bit dtype %d", bits, dts[di]);
			tfs_mlx_dequant_row(&d, row, s, b, NULL, 37, 200, got);
			assert_same_floats(got, want + 37, 200, "affine %u-bit [37,+200)", bits);
			free(row);
		}
	}
}
