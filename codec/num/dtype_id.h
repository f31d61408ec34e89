/*
 * dtype_id.h - the element type ids and the shape of a float32 conversion kernel (public,
 * through dtype.h); what the kernels need of the dtypes, without their table.
 */
#ifndef TFS_DTYPE_ID_H
#define TFS_DTYPE_ID_H

#include <stddef.h>

/*
 * One id space for every element type tensorfs knows.  0..42 are GGML's
 * type ids exactly (so a GGUF type field maps 1:1); the safetensors-only
 * types follow from 64.  safetensors I8..I64, F16, BF16, F32, F64 map to the
 * GGML ids.
 */
typedef enum {
	TFS_DT_F32 = 0, TFS_DT_F16 = 1, TFS_DT_Q4_0 = 2, TFS_DT_Q4_1 = 3,
	/* 4, 5: removed Q4_2, Q4_3 */
	TFS_DT_Q5_0 = 6, TFS_DT_Q5_1 = 7, TFS_DT_Q8_0 = 8, TFS_DT_Q8_1 = 9,
	TFS_DT_Q2_K = 10, TFS_DT_Q3_K = 11, TFS_DT_Q4_K = 12, TFS_DT_Q5_K = 13,
	TFS_DT_Q6_K = 14, TFS_DT_Q8_K = 15, TFS_DT_IQ2_XXS = 16, TFS_DT_IQ2_XS = 17,
	TFS_DT_IQ3_XXS = 18, TFS_DT_IQ1_S = 19, TFS_DT_IQ4_NL = 20, TFS_DT_IQ3_S = 21,
	TFS_DT_IQ2_S = 22, TFS_DT_IQ4_XS = 23, TFS_DT_I8 = 24, TFS_DT_I16 = 25,
	TFS_DT_I32 = 26, TFS_DT_I64 = 27, TFS_DT_F64 = 28, TFS_DT_IQ1_M = 29,
	TFS_DT_BF16 = 30,
	/* 31..33: removed Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 */
	TFS_DT_TQ1_0 = 34, TFS_DT_TQ2_0 = 35,
	/* 36..38: removed IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 */
	TFS_DT_MXFP4 = 39, TFS_DT_NVFP4 = 40, TFS_DT_Q1_0 = 41, TFS_DT_Q2_0 = 42,
	TFS_DT_GGML_COUNT = 43,

	TFS_DT_BOOL = 64, TFS_DT_U8, TFS_DT_U16, TFS_DT_U32, TFS_DT_U64, TFS_DT_C64,
	TFS_DT_F8_E4M3, TFS_DT_F8_E5M2, TFS_DT_F8_E8M0, TFS_DT_F8_E4M3FNUZ,
	TFS_DT_F8_E5M2FNUZ, TFS_DT_F6_E2M3, TFS_DT_F6_E3M2, TFS_DT_F4,
	TFS_DT_END
} tfs_dtype_id;

/* Converts nblocks whole blocks at src (block_bytes each) to float32. */
typedef void (*tfs_to_f32_fn)(const void *src, float *dst, size_t nblocks);

#endif
