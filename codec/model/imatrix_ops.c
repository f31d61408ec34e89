/*
 * imatrix_ops.c - tfs_imatrix_has and tfs_imatrix_weights (requant.h) through the table of
 * the importance matrix's reader (imatrix_ops.h).
 */
#include "imatrix_ops.h"
#include "requant.h"

static const tfs_imatrix_ops *ops_of(const tfs_imatrix *im)
{
	return ((const tfs_imatrix_head *)(const void *)im)->ops;
}

bool tfs_imatrix_has(const tfs_imatrix *im, const char *name)
{
	return im && ops_of(im)->has(im, name);
}

int tfs_imatrix_weights(const tfs_imatrix *im, const char *name, uint64_t n_per_row,
			uint64_t n_mat, uint64_t mat, float *out, tfs_error *err)
{
	if (!im) /* said as the reader says it of a matrix without the entry */
		return tfs_error_set(err, TFS_E_NOTFOUND, "the importance matrix %s has no entry "
				     "for tensor '%s'", "(none)", name);
	return ops_of(im)->weights(im, name, n_per_row, n_mat, mat, out, err);
}
