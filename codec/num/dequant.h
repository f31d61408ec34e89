/*
 * dequant.h - the float32 conversion kernels behind tfs_dtype_info (codec-private).
 *
 * Every kernel has the tfs_to_f32_fn shape: it converts nblocks whole blocks
 * (block_bytes each, any alignment) at src into nblocks * block_elems *
 * f32_per_elem floats at dst.  It reads exactly nblocks * block_bytes bytes and
 * writes exactly that many floats; no input byte pattern makes it read or write
 * anything else.
 *
 * The *_ref kernels (dequant.c) are portable scalar C and define the results;
 * the SIMD kernels (dequant_avx2.c) must match them bit for bit.
 */
#ifndef TFS_DEQUANT_H
#define TFS_DEQUANT_H

#include "dtype_id.h"
#include "cursor.h"

#include <string.h>

/* ==== half / bfloat16 / fp8 scalar conversions (exact, shared by kernels) ==== */
float tfs_f16_to_f32(uint16_t h);      /* quiets signalling NaNs as ggml does */
float tfs_bf16_to_f32(uint16_t h);

#define TFS_DEQ_LIST(X) \
	X(f32) X(f16) X(bf16) X(f64) X(i8) X(i16) X(i32) X(i64) \
	X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q8_1) \
	X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k) X(q8_k) \
	X(iq1_s) X(iq1_m) X(iq2_xxs) X(iq2_xs) X(iq2_s) X(iq3_xxs) X(iq3_s) \
	X(iq4_nl) X(iq4_xs) X(tq1_0) X(tq2_0) X(mxfp4) X(nvfp4) X(q1_0) X(q2_0) \
	X(bool) X(u8) X(u16) X(u32) X(u64) X(c64) \
	X(f8_e4m3) X(f8_e5m2) X(f8_e8m0) X(f8_e4m3fnuz) X(f8_e5m2fnuz) \
	X(f6_e2m3) X(f6_e3m2) X(f4)

#define TFS_DEQ_DECLARE_REF(t) void tfs_deq_##t##_ref(const void *src, float *dst, size_t nblocks);
TFS_DEQ_LIST(TFS_DEQ_DECLARE_REF)
#undef TFS_DEQ_DECLARE_REF

/* ==== shared lookup tables (dequant.c) ==== */

/* The importance-quant grids: entry i holds 8 (4 for iq3) unsigned magnitudes, one per byte,
 * element 0 in the least significant byte; iq1s holds signed bytes -1/0/+1. */
extern const uint64_t tfs_grid_iq2xxs[256];
extern const uint64_t tfs_grid_iq2xs[512];
extern const uint64_t tfs_grid_iq2s[1024];
extern const uint32_t tfs_grid_iq3xxs[256];
extern const uint32_t tfs_grid_iq3s[512];
extern const uint64_t tfs_grid_iq1s[2048];
/* IQ4_NL / IQ4_XS non-linear 4-bit code book. */
extern const int8_t tfs_kvalues_iq4nl[16];
/* E2M1 values times two (ggml's convention; the block scales are halved to match). */
extern const int8_t tfs_kvalues_fp4x2[16];
/* E2M1 values (MLX's FP4_LUT, safetensors F4). */
extern const float tfs_fp4_values[16];

/* ==== MLX scale decoders (mlx.c, mlx_quant.c) ==== */

/* E4M3 as MLX decodes it: sign honoured, exponent bias 7, subnormals m * 2^-9,
 * and no NaN: 0x7F / 0xFF are +-480 (MLX's encoder saturates at 0x7E). */
static inline float tfs_e4m3_mlx(uint8_t b)
{
	uint32_t exp = (b >> 3) & 0xfu, man = b & 7u, bits;
	float f;

	if (exp == 0) {
		f = (float)man * 0x1p-9f;
		memcpy(&bits, &f, 4);
	} else {
		bits = ((exp + 120) << 23) | (man << 20);
	}
	bits |= (uint32_t)(b & 0x80) << 24;
	memcpy(&f, &bits, 4);
	return f;
}

/* E8M0 as MLX decodes it: 2^(s-127); 0 is 2^-127 and 255 is +inf. */
static inline float tfs_e8m0_mlx(uint8_t s)
{
	uint32_t bits = s ? (uint32_t)s << 23 : 0x00400000u;
	float f;

	memcpy(&f, &bits, 4);
	return f;
}


/* ==== scalar helpers shared with the SIMD kernels ==== */

/* ggml's UE4M3 NVFP4 sub-block scale, already halved to pair with tfs_kvalues_fp4x2
 * (sign bit ignored, 0x7F -> 0). */
float tfs_ue4m3_half_to_f32(uint8_t b);
/* ggml's E8M0 MXFP4 block scale, already halved: 2^(e-128) (e = 255 gives 2^127, no NaN). */
float tfs_e8m0_half_to_f32(uint8_t e);

/* ==== SIMD kernels ==== */

#if defined(__x86_64__)
/* Whether this CPU (and OS) runs the AVX2 + FMA + F16C kernels. */
bool tfs_cpu_has_avx2(void);
/* The AVX2+F16C+FMA kernel for dtype id, or NULL when there is none.  Only call it after
 * checking that the CPU has those features. */
tfs_to_f32_fn tfs_deq_avx2_kernel(int id);
/* Lookup-table kernels for the 8- and 6-bit float types (any CPU), or NULL. */
tfs_to_f32_fn tfs_deq_lut_kernel(int id);
#endif

#endif
