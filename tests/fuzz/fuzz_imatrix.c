/*
 * fuzz_imatrix.c - libFuzzer harness: the input is an importance matrix (-o imatrix=FILE),
 * llama.cpp's GGUF format or its legacy .dat, told apart by the magic as at a mount.
 *
 * An input that opens has every entry's weights read as one row (n_mat 1) and, when its
 * values split evenly, as two experts' rows; each read must succeed or fail with a message,
 * and a name it lists must be found; the dataset it names (llama-quantize's key) comes from
 * the input, so it is shorter than the input.
 */
#include "fuzz.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_rows(const tfs_imatrix *im, const char *name, uint64_t n_per_row, uint64_t n_mat)
{
	float *w = malloc((n_per_row ? n_per_row : 1) * sizeof(float));
	tfs_error e = { 0 };

	if (!w)
		fz_fail("out of memory for %llu weights", (unsigned long long)n_per_row);
	for (uint64_t mat = 0; mat < n_mat; mat++)
		if (tfs_imatrix_weights(im, name, n_per_row, n_mat, mat, w, &e) != 0 && !e.msg[0])
			fz_fail("'%s': weights failed without a message", name);
	free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fz_memfd_path("input.imatrix", data, size);
	tfs_imatrix *im = NULL;
	tfs_error e = { 0 };

	if (tfs_imatrix_open(&im, path, &e) != 0) {
		if (!e.msg[0] || im)
			fz_fail("a failed open without a message");
		return 0;
	}
	const char *ds = tfs_imatrix_dataset(im);

	if (ds && strlen(ds) >= size)
		fz_fail("a dataset name of %zu bytes in %zu", strlen(ds), size);
	for (size_t k = 0; k < tfs_imatrix_n_entries(im); k++) {
		uint64_t nval = 0;
		const char *name = tfs_imatrix_entry(im, k, &nval);

		if (!name || !tfs_imatrix_has(im, name))
			fz_fail("entry %zu is listed but not found", k);
		/* values are bounded by the input's size: a row of them fits in memory */
		if (nval > size)
			fz_fail("entry '%s' says %llu values in %zu bytes", name,
				(unsigned long long)nval, size);
		read_rows(im, name, nval, 1);
		if (nval % 2 == 0)
			read_rows(im, name, nval / 2, 2);
	}
	tfs_imatrix_free(im);
	return 0;
}
