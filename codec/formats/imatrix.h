/*
 * imatrix.h - importance matrices (llama.cpp's imatrix) for the IQ quantizers (public).
 */
#ifndef TFS_IMATRIX_H
#define TFS_IMATRIX_H

#include "../base/base.h"

/*
 * An importance matrix (llama.cpp's imatrix: its GGUF format, or the legacy .dat), for the
 * IQ1/IQ2/IQ3 types' quantizers.  Open indexes its entries (TFS_E_FORMAT names the file and
 * what is wrong with it); values are read when asked for.  tfs_imatrix_weights fills out with
 * the n_per_row column weights of expert mat (of n_mat: a tensor's ne[2], 1 for a matrix) of
 * tensor `name`, computed as llama-quantize does (sums / counts): TFS_E_NOTFOUND when the file
 * has no entry for it, TFS_E_INVALID when the entry's size is not n_per_row * n_mat.
 */
typedef struct tfs_imatrix tfs_imatrix;
int tfs_imatrix_open(tfs_imatrix **out, const char *path, tfs_error *err);
void tfs_imatrix_free(tfs_imatrix *im);
const char *tfs_imatrix_path(const tfs_imatrix *im);
size_t tfs_imatrix_n_entries(const tfs_imatrix *im);
/* Entry k's tensor name (sorted by name) and its count of values (*nval may be NULL). */
const char *tfs_imatrix_entry(const tfs_imatrix *im, size_t k, uint64_t *nval);
bool tfs_imatrix_has(const tfs_imatrix *im, const char *name);   /* im may be NULL */
int tfs_imatrix_weights(const tfs_imatrix *im, const char *name, uint64_t n_per_row,
			uint64_t n_mat, uint64_t mat, float *out, tfs_error *err);

#endif
