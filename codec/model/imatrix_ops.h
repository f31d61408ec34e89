/*
 * imatrix_ops.h - what model/ asks of an importance matrix (tfs_imatrix_has and
 * tfs_imatrix_weights, for requant.c), through the table its reader fills
 * (formats/imatrix.c): model/ calls down through it, never up into formats/
 * (codec-private).
 */
#ifndef TFS_IMATRIX_OPS_H
#define TFS_IMATRIX_OPS_H

#include "base.h"

typedef struct tfs_imatrix tfs_imatrix;   /* formats/imatrix.h */

typedef struct {
	bool (*has)(const tfs_imatrix *im, const char *name);
	int (*weights)(const tfs_imatrix *im, const char *name, uint64_t n_per_row,
		       uint64_t n_mat, uint64_t mat, float *out, tfs_error *err);
} tfs_imatrix_ops;

/* The first member of struct tfs_imatrix: its reader's table. */
typedef struct {
	const tfs_imatrix_ops *ops;
} tfs_imatrix_head;

#endif
