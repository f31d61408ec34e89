/* fuzz_ollama_blob.c - libFuzzer harness: the input is one tensor blob of an Ollama per-tensor
 * model (a safetensors file whose __metadata__ may describe MLX quantization), named by a fixed
 * manifest with the store's config blob. */
#include "fuzz.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BLOB_HEX "00000000000000000000000000000000000000000000000000000000000000f2"
#define CONFIG_HEX "f68a6b88183c649137b93b7748715d723e1e68a6a5ded1a21204a8621277e415"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *manifest;
	if (!manifest) {
		char *blobs = fz_path("store/blobs");
		char *dir = fz_path("store/manifests/registry.ollama.ai/library/fuzz");
		fz_mkdirs(blobs);
		fz_mkdirs(dir);
		char *cfg = fz_path("store/blobs/sha256-" CONFIG_HEX);
		fz_copy_testdata("ollama/models/blobs/sha256-" CONFIG_HEX, cfg);
		free(cfg);
		if (asprintf(&manifest, "%s/latest", dir) < 0)
			fz_fail("out of memory");
		free(blobs);
		free(dir);
	}
	/* the blob is a memfd behind store/blobs/sha256-<hex>; tensor blobs are not hashed */
	fz_memfd_path("store/blobs/sha256-" BLOB_HEX, data, size);
	char text[1024];
	int n = snprintf(text, sizeof(text),
			 "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution."
			 "manifest.v2+json\",\"config\":{\"mediaType\":\"application/vnd.docker."
			 "container.image.v1+json\",\"digest\":\"sha256:" CONFIG_HEX "\",\"size\":191},"
			 "\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.tensor\","
			 "\"digest\":\"sha256:" BLOB_HEX "\",\"size\":%zu,\"name\":\"w\"}]}",
			 size);
	fz_write_file(manifest, text, (size_t)n);
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	if (tfs_model_open(&m, manifest, NULL, &e) == 0) {
		fz_exercise(m);
		tfs_model_free(m);
	} else if (!e.msg[0] || m) {
		fz_fail("a failed open without a message");
	}
	return 0;
}
