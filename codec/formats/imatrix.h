/*
 * imatrix.h - importance matrices (llama.cpp's imatrix) for the IQ quantizers (public).
 */
#ifndef TFS_IMATRIX_H
#define TFS_IMATRIX_H

#include "../base/base.h"

/*
 * An importance matrix (llama.cpp's imatrix: its GGUF format, or the legacy .dat), for the
 * IQ1/IQ2/IQ3 types' quantizers.  Open indexes its entries (TFS_E_FORMAT names the file and
 * what is wrong with it); values are read when asked for (tfs_imatrix_has and
 * tfs_imatrix_weights: model/requant.h, which uses them).
 */
typedef struct tfs_imatrix tfs_imatrix;
int tfs_imatrix_open(tfs_imatrix **out, const char *path, tfs_error *err);
void tfs_imatrix_free(tfs_imatrix *im);
const char *tfs_imatrix_path(const tfs_imatrix *im);
size_t tfs_imatrix_n_entries(const tfs_imatrix *im);
/* What it says it was computed from, as llama-quantize reads it: the dataset's name (the
 * legacy file's trailer, or the first of a GGUF file's imatrix.datasets; NULL when it does
 * not say) and the number of chunks (0 when it does not say). */
const char *tfs_imatrix_dataset(const tfs_imatrix *im);
int64_t tfs_imatrix_chunks(const tfs_imatrix *im);
/* The count of values of tensor name's entry, or -1 when it has none. */
int64_t tfs_imatrix_values(const tfs_imatrix *im, const char *name);
/* Entry k's tensor name (sorted by name) and its count of values (*nval may be NULL). */
const char *tfs_imatrix_entry(const tfs_imatrix *im, size_t k, uint64_t *nval);

#endif
