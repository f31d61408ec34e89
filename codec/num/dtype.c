/*
 * dtype.c - the traits of every element type tensorfs knows.
 *
 * One const table indexed by tfs_dtype_id: GGML's ids 0..42 first (removed
 * ids keep an empty slot), then the safetensors-only types from 64.  The
 * public view (tfs_dtype) is a copy of it whose to_f32 field is switched, once
 * and thread-safely, to the fastest kernel this CPU runs.
 */
#include "dtype.h"
#include "dequant.h"

#include <inttypes.h>
#include <pthread.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define GG(id, nm, elems, bytes, npy, fn)                                              \
	[id] = { .name = nm, .block_elems = elems, .block_bytes = bytes, .f32_per_elem = 1, \
		 .npy_descr = npy, .to_f32 = tfs_deq_##fn##_ref, .to_f32_ref = tfs_deq_##fn##_ref }

static const tfs_dtype_info k_dtypes[] = {
	GG(TFS_DT_F32, "F32", 1, 4, "<f4", f32),
	GG(TFS_DT_F16, "F16", 1, 2, "<f2", f16),
	GG(TFS_DT_Q4_0, "Q4_0", 32, 18, NULL, q4_0),
	GG(TFS_DT_Q4_1, "Q4_1", 32, 20, NULL, q4_1),
	GG(TFS_DT_Q5_0, "Q5_0", 32, 22, NULL, q5_0),
	GG(TFS_DT_Q5_1, "Q5_1", 32, 24, NULL, q5_1),
	GG(TFS_DT_Q8_0, "Q8_0", 32, 34, NULL, q8_0),
	GG(TFS_DT_Q8_1, "Q8_1", 32, 36, NULL, q8_1),   /* ggml: 36 (gguf-py's 40 is wrong) */
	GG(TFS_DT_Q2_K, "Q2_K", 256, 84, NULL, q2_k),
	GG(TFS_DT_Q3_K, "Q3_K", 256, 110, NULL, q3_k),
	GG(TFS_DT_Q4_K, "Q4_K", 256, 144, NULL, q4_k),
	GG(TFS_DT_Q5_K, "Q5_K", 256, 176, NULL, q5_k),
	GG(TFS_DT_Q6_K, "Q6_K", 256, 210, NULL, q6_k),
	GG(TFS_DT_Q8_K, "Q8_K", 256, 292, NULL, q8_k),
	GG(TFS_DT_IQ2_XXS, "IQ2_XXS", 256, 66, NULL, iq2_xxs),
	GG(TFS_DT_IQ2_XS, "IQ2_XS", 256, 74, NULL, iq2_xs),
	GG(TFS_DT_IQ3_XXS, "IQ3_XXS", 256, 98, NULL, iq3_xxs),
	GG(TFS_DT_IQ1_S, "IQ1_S", 256, 50, NULL, iq1_s),
	GG(TFS_DT_IQ4_NL, "IQ4_NL", 32, 18, NULL, iq4_nl),
	GG(TFS_DT_IQ3_S, "IQ3_S", 256, 110, NULL, iq3_s),
	GG(TFS_DT_IQ2_S, "IQ2_S", 256, 82, NULL, iq2_s),
	GG(TFS_DT_IQ4_XS, "IQ4_XS", 256, 136, NULL, iq4_xs),
	GG(TFS_DT_I8, "I8", 1, 1, "|i1", i8),
	GG(TFS_DT_I16, "I16", 1, 2, "<i2", i16),
	GG(TFS_DT_I32, "I32", 1, 4, "<i4", i32),
	GG(TFS_DT_I64, "I64", 1, 8, "<i8", i64),
	GG(TFS_DT_F64, "F64", 1, 8, "<f8", f64),
	GG(TFS_DT_IQ1_M, "IQ1_M", 256, 56, NULL, iq1_m),
	GG(TFS_DT_BF16, "BF16", 1, 2, NULL, bf16),
	GG(TFS_DT_TQ1_0, "TQ1_0", 256, 54, NULL, tq1_0),
	GG(TFS_DT_TQ2_0, "TQ2_0", 256, 66, NULL, tq2_0),
	GG(TFS_DT_MXFP4, "MXFP4", 32, 17, NULL, mxfp4),
	GG(TFS_DT_NVFP4, "NVFP4", 64, 36, NULL, nvfp4),
	GG(TFS_DT_Q1_0, "Q1_0", 128, 18, NULL, q1_0),
	GG(TFS_DT_Q2_0, "Q2_0", 64, 18, NULL, q2_0),

	GG(TFS_DT_BOOL, "BOOL", 1, 1, "|b1", bool),
	GG(TFS_DT_U8, "U8", 1, 1, "|u1", u8),
	GG(TFS_DT_U16, "U16", 1, 2, "<u2", u16),
	GG(TFS_DT_U32, "U32", 1, 4, "<u4", u32),
	GG(TFS_DT_U64, "U64", 1, 8, "<u8", u64),
	[TFS_DT_C64] = { .name = "C64", .block_elems = 1, .block_bytes = 8, .f32_per_elem = 2,
			 .npy_descr = "<c8", .to_f32 = tfs_deq_c64_ref, .to_f32_ref = tfs_deq_c64_ref },
	GG(TFS_DT_F8_E4M3, "F8_E4M3", 1, 1, NULL, f8_e4m3),
	GG(TFS_DT_F8_E5M2, "F8_E5M2", 1, 1, NULL, f8_e5m2),
	GG(TFS_DT_F8_E8M0, "F8_E8M0", 1, 1, NULL, f8_e8m0),
	GG(TFS_DT_F8_E4M3FNUZ, "F8_E4M3FNUZ", 1, 1, NULL, f8_e4m3fnuz),
	GG(TFS_DT_F8_E5M2FNUZ, "F8_E5M2FNUZ", 1, 1, NULL, f8_e5m2fnuz),
	GG(TFS_DT_F6_E2M3, "F6_E2M3", 4, 3, NULL, f6_e2m3),   /* 4 elements in 3 bytes */
	GG(TFS_DT_F6_E3M2, "F6_E3M2", 4, 3, NULL, f6_e3m2),
	GG(TFS_DT_F4, "F4", 2, 1, NULL, f4),                  /* 2 elements per byte */
};

_Static_assert(sizeof(k_dtypes) / sizeof(k_dtypes[0]) == TFS_DT_END,
	       "k_dtypes must have one slot per tfs_dtype_id");

/* ==== run-time kernel choice ==== */

static tfs_dtype_info g_dtypes[TFS_DT_END];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* F16C is CPUID leaf 1, ECX bit 29.  Asked of cpuid directly: clang (14) does not know
 * __builtin_cpu_supports("f16c"); the avx2 test before it covers the OS's AVX state. */
static bool cpu_has_f16c(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

bool tfs_cpu_has_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}
#endif

static void choose_kernels(void)
{
	memcpy(g_dtypes, k_dtypes, sizeof(g_dtypes));
#if defined(__x86_64__)
	if (tfs_cpu_has_avx2()) {
		for (int id = 0; id < TFS_DT_END; id++) {
			tfs_to_f32_fn fn = g_dtypes[id].block_elems ? tfs_deq_avx2_kernel(id) : NULL;

			if (fn)
				g_dtypes[id].to_f32 = fn;
		}
	}
#endif
	/* tables beat any per-byte decoding, SIMD included (measured) */
	for (int id = 0; id < TFS_DT_END; id++) {
		tfs_to_f32_fn fn = g_dtypes[id].block_elems ? tfs_deq_lut_kernel(id) : NULL;

		if (fn)
			g_dtypes[id].to_f32 = fn;
	}
}

const tfs_dtype_info *tfs_dtype(int id)
{
	if (id < 0 || id >= TFS_DT_END || k_dtypes[id].block_elems == 0)
		return NULL;
	pthread_once(&g_once, choose_kernels);
	return &g_dtypes[id];
}

int tfs_dtype_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int id = 0; id < TFS_DT_END; id++)
		if (k_dtypes[id].block_elems && strcmp(k_dtypes[id].name, name) == 0)
			return id;
	return -1;
}

int tfs_dtype_nbytes(uint64_t *out, int id, uint64_t nelems, tfs_error *err)
{
	const tfs_dtype_info *t = tfs_dtype(id);
	uint64_t bytes;

	*out = 0;
	if (!t)
		return tfs_error_set(err, TFS_E_FORMAT, "unknown tensor type %d", id);
	if (nelems % t->block_elems)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%" PRIu64 " elements of type %s are not a whole number of "
				     "%" PRIu32 "-element blocks", nelems, t->name, t->block_elems);
	if (tfs_mul_overflow(nelems / t->block_elems, (uint64_t)t->block_bytes, &bytes))
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%" PRIu64 " elements of type %s overflow 64-bit byte size",
				     nelems, t->name);
	*out = bytes;
	return 0;
}
