/* fuzz_ollama_manifest.c - libFuzzer harness: the input is an Ollama manifest in a store that
 * holds every blob of tests/data/ollama (GGUF model, per-tensor safetensors, configs, template,
 * params...), so a manifest naming their digests opens them. */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *manifest, *root;
	if (!manifest) {
		root = fz_path("store");
		char *blobs = fz_path("store/blobs");
		char *dir = fz_path("store/manifests/registry.ollama.ai/library/fuzz");
		fz_mkdirs(blobs);
		fz_mkdirs(dir);
		char src[1024];
		snprintf(src, sizeof(src), "%s/ollama/models/blobs", TFS_TESTDATA);
		DIR *d = opendir(src);
		if (!d)
			fz_fail("%s: cannot list", src);
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			char rel[512], dst[1024];
			snprintf(rel, sizeof(rel), "ollama/models/blobs/%s", de->d_name);
			snprintf(dst, sizeof(dst), "%s/%s", blobs, de->d_name);
			fz_copy_testdata(rel, dst);
		}
		closedir(d);
		if (asprintf(&manifest, "%s/latest", dir) < 0)
			fz_fail("out of memory");
		free(blobs);
		free(dir);
	}
	fz_write_file(manifest, data, size);
	tfs_open_opts o = { .ollama_models = root };
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	if (tfs_model_open(&m, manifest, &o, &e) == 0) {
		fz_exercise(m);
		tfs_model_free(m);
	} else if (!e.msg[0] || m) {
		fz_fail("a failed open without a message");
	}
	return 0;
}
