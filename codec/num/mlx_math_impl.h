/*
 * mlx_math_impl.h - what the MLX math shares with the MLX tensors of the model
 * (codec-private): a row's scale or bias as a float, and whether a descriptor is valid.
 */
#ifndef TFS_MLX_MATH_IMPL_H
#define TFS_MLX_MATH_IMPL_H

#include "mlx_math.h"
#include "dtype.h"
#include "dequant.h"

/* The i-th scale or bias of a row stored in dtype dt (BF16, F16 or F32). */
static inline float tfs_mlx_param(const uint8_t *row, int dt, uint64_t i)
{
	switch (dt) {
	case TFS_DT_BF16:
		return tfs_bf16_to_f32(tfs_le16(row + 2 * i));
	case TFS_DT_F16:
		return tfs_f16_to_f32(tfs_le16(row + 2 * i));
	default: {
		float f;

		memcpy(&f, row + 4 * i, 4);
		return f;
	}
	}
}

/* Whether an MLX descriptor is one the kernels handle (mode, bits, group, dtypes). */
bool tfs_mlx_desc_ok(const tfs_mlx_desc *d);

#endif
