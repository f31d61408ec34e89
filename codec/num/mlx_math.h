/*
 * mlx_math.h - MLX / Ollama quantized tensors: the modes, their description, the
 * dequantization of a row and the quantization of a group (public).
 */
#ifndef TFS_MLX_MATH_H
#define TFS_MLX_MATH_H

#include "../base/base.h"

/* ==== MLX / Ollama quantized tensors ==== */

typedef enum {
	TFS_QMODE_NONE = 0,
	TFS_QMODE_AFFINE, /* w = scale[g] * q + bias[g], q unsigned `bits` wide */
	TFS_QMODE_NVFP4,  /* w = FP4(q) * E4M3(scale[g]) [* global_scale], group 16 */
	TFS_QMODE_MXFP4,  /* w = FP4(q) * 2^(scale[g]-127), group 32 */
	TFS_QMODE_MXFP8,  /* w = E4M3(byte) * 2^(scale[g]-127), group 32 */
} tfs_qmode;

typedef struct {
	tfs_qmode mode;
	uint32_t bits;        /* 4 or 8 for the fp modes; 2..8 for affine */
	uint32_t group;       /* elements per scale */
	int scale_dtype;      /* TFS_DT_BF16 / F16 / F32 for affine; TFS_DT_U8 for the fp modes */
	int bias_dtype;       /* affine only */
	int gscale_dtype;     /* nvfp4 global scale: TFS_DT_F32 (or BF16/F16) */
} tfs_mlx_desc;

/* "affine", "nvfp4", "mxfp4", "mxfp8" ("none" for TFS_QMODE_NONE). */
const char *tfs_qmode_name(tfs_qmode q);

/*
 * Dequantizes elements [k0, k0 + n) of one row of an MLX-quantized matrix.
 * wrow: the row's packed little-endian uint32 words; srow / brow: the row's
 * scales / biases in their dtypes (brow NULL unless affine); gscale: the
 * row's global scale value already converted to float (1.0f when absent, and
 * then not multiplied in).  Results are bit-exact to MLX/Ollama.
 */
void tfs_mlx_dequant_row(const tfs_mlx_desc *d, const uint8_t *wrow, const uint8_t *srow,
			 const uint8_t *brow, const float *gscale, uint64_t k0, uint64_t n,
			 float *out);

/*
 * Quantizes group g of one row of an MLX-quantized matrix as MLX's mx.quantize does
 * (mlx_quant.c says how, step by step): x holds the group's d->group values; its codes go
 * into wrow (the row's packed words), its scale into srow[g] (and bias into brow[g],
 * affine only) in their dtypes; gscale: the row's nvfp4 global scale, or NULL.  Nothing
 * else of the rows changes.  TFS_E_INVALID when a value cannot be represented (NaN,
 * infinity, a range whose scale or bias overflows its dtype, an mx group too small for
 * an E8M0 scale), saying which.
 */
int tfs_mlx_quantize_group(const tfs_mlx_desc *d, const float *x, const float *gscale,
			   uint64_t g, uint8_t *wrow, uint8_t *srow, uint8_t *brow, tfs_error *err);
/* E4M3 as MLX encodes it: nearest-even (PyTorch's conversion), but 448 and up saturate
 * to 0x7E; finite input. */
uint8_t tfs_mlx_e4m3_encode(float f);

#endif
