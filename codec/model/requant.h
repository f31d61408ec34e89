/*
 * requant.h - writing a tensor back from its numbers, and converting it to another dtype
 * (public).
 */
#ifndef TFS_REQUANT_H
#define TFS_REQUANT_H

#include "model.h"

typedef struct tfs_imatrix tfs_imatrix;   /* formats/imatrix.h */

/* An importance matrix's entries (im may be NULL: it has none).  tfs_imatrix_weights fills
 * out with the n_per_row column weights of expert mat (of n_mat: a tensor's ne[2], 1 for a
 * matrix) of tensor `name`, computed as llama-quantize does (sums / counts): TFS_E_NOTFOUND
 * when the file has no entry for it, TFS_E_INVALID when the entry's size is not
 * n_per_row * n_mat.  (imatrix_ops.c, through the reader's table.) */
bool tfs_imatrix_has(const tfs_imatrix *im, const char *name);
int tfs_imatrix_weights(const tfs_imatrix *im, const char *name, uint64_t n_per_row,
			uint64_t n_mat, uint64_t mat, float *out, tfs_error *err);

/*
 * Writing tensor i as numbers (f32/ and npy/ of a rw mount).  tfs_tensor_numbers_writable
 * says whether its dtype can be written back from float32 (else *why says why: C64, a type
 * that needs an importance matrix when im (may be NULL) has no entry for the tensor, an MLX
 * weight whose companions are missing...); the IQ1/IQ2/IQ3 types are quantized with im's
 * weights for the tensor when it has them (as llama-quantize does), else without; an
 * MLX-quantized weight is written by tfs_mlx_requantize, every other tensor by
 * tfs_tensor_requantize (which refuses MLX weights).  tfs_tensor_requantize reads the tensor's whole f32 view (tfs_tensor_f32_count values) from
 * in_fd at in_off and writes its new stored bytes at out_fd's offset 0: each block whose values
 * are exactly what its stored block dequantizes to keeps its bytes, every other block is
 * quantized (tfs_quantize).  *changed (may be NULL) gets the blocks requantized.  Works in
 * chunks of 1 MiB of values.  TFS_E_INVALID: a value the dtype cannot hold (NaN into an
 * integer type...), named with its index.
 */
bool tfs_tensor_numbers_writable(const tfs_model *m, size_t i, const tfs_imatrix *im,
				 const char **why);
int tfs_tensor_requantize(const tfs_model *m, size_t i, const tfs_imatrix *im, int in_fd,
			  uint64_t in_off, int out_fd, uint64_t *changed, tfs_error *err);
/*
 * Tensor i, an MLX-quantized weight, written back from its f32 view (the values at in_fd
 * from in_off, as tfs_tensor_requantize): its new packed words go to w_fd, its scales to
 * s_fd and (affine) its biases to b_fd (-1 otherwise), each the whole companion from offset
 * 0.  A group whose values are bit for bit what it dequantizes to keeps its codes, scale
 * and bias; every other group is quantized by tfs_mlx_quantize_group.  The global scale
 * (nvfp4) is kept.  *changed (may be NULL) gets the groups requantized.  TFS_E_INVALID names
 * the tensor and the element of a value that cannot be represented.
 */
int tfs_mlx_requantize(const tfs_model *m, size_t i, int in_fd, uint64_t in_off, int w_fd,
		       int s_fd, int b_fd, uint64_t *changed, tfs_error *err);
/* Converting tensor i to another dtype (its values dequantized, then quantized as dtype;
 * same shape).  _check says whether it can be: TFS_E_UNSUPPORTED (an MLX weight, C64, a
 * dtype tensorfs cannot quantize to), TFS_E_INVALID (rows that are not whole blocks of
 * dtype).  tfs_tensor_convert writes the new bytes at out_fd's offset 0, 1 MiB of values at
 * a time. */
int tfs_tensor_convert_check(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
			     tfs_error *err);
int tfs_tensor_convert(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
		       int out_fd, tfs_error *err);
/* Blocks [b0, b0 + nb) of tensor i converted to dtype, the bytes tfs_tensor_convert writes
 * there, into out (nb blocks of dtype); vals is the caller's room for their nb x block_elems
 * float32 values.  Any run of blocks can be converted alone (in parallel, say); check with
 * tfs_tensor_convert_check first. */
int tfs_tensor_convert_blocks(const tfs_model *m, size_t i, int dtype, const tfs_imatrix *im,
			      uint64_t b0, uint64_t nb, void *out, float *vals, tfs_error *err);

#endif
