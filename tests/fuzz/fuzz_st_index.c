/* fuzz_st_index.c - libFuzzer harness: the input is the model.safetensors.index.json of a
 * sharded set whose two shards (from tests/data) sit beside it. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	if (!ready) {
		char *p = fz_path("model-00001-of-00002.safetensors");
		fz_copy_testdata("safetensors/ok_all_dtypes.safetensors", p);
		free(p);
		p = fz_path("model-00002-of-00002.safetensors");
		fz_copy_testdata("safetensors/ok_no_metadata.safetensors", p);
		free(p);
		ready = true;
	}
	const char *path = fz_memfd_path("model.safetensors.index.json", data, size);
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	if (tfs_model_open(&m, path, NULL, &e) == 0) {
		fz_exercise(m);
		tfs_model_free(m);
	} else if (!e.msg[0] || m) {
		fz_fail("a failed open without a message");
	}
	return 0;
}
