/* fuzz_gguf.c - libFuzzer harness: the input is a GGUF file (the reader behind .gguf sources and
 * Ollama model layers), opened from memory
 * (tfs_model_open_mem: no file per input, and ASan sees any read past its end). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	if (tfs_model_open_mem(&m, "input.gguf", data, size, &e) == 0) {
		fz_exercise(m);
		tfs_model_free(m);
	} else if (!e.msg[0] || m) {
		fz_fail("a failed open without a message");
	}
	return 0;
}
