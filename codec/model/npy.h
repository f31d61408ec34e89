/*
 * npy.h - the npy/ view of a tensor (public).
 */
#ifndef TFS_NPY_H
#define TFS_NPY_H

#include "model.h"

/*
 * The npy/ view: a .npy file (format 1.0, header padded to 64 bytes) holding
 * the raw bytes when the dtype has a native numpy dtype (and is not
 * MLX-quantized), float32 otherwise.  tfs_npy_header writes the header into out
 * and says whether the payload is raw bytes (*raw true) or the f32 view.
 * Fails when the tensor has neither.
 */
int tfs_npy_header(tfs_buf *out, bool *raw, const tfs_model *m, size_t i, tfs_error *err);
/* Whether tensor i has an npy/ view (a native numpy dtype or an f32 view). */
bool tfs_npy_available(const tfs_model *m, size_t i);
/* Checks the first n bytes of a .npy file written for tensor i: a whole header (versions
 * 1-3) whose dict says what tfs_npy_header says (descr, fortran_order False, shape; spaces
 * aside).  Sets *data_off to where the data start.  TFS_E_INVALID names the difference. */
int tfs_npy_check(uint64_t *data_off, const tfs_model *m, size_t i, const uint8_t *p, size_t n,
		  tfs_error *err);

#endif
