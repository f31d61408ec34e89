/*
 * fuzz_hf_meta.c - libFuzzer harness: the general.* keys of the GGUF view of a Hugging Face
 * model (tfs_hf_meta_keys).  The input is a README.md (its YAML front matter is the model card),
 * optionally followed by a NUL and a model id used as both config.json's _name_or_path and the
 * directory's name.
 *
 * Each run must succeed (or fail with a message); on success every key is general.*, unique,
 * general.name (when there: an empty _name_or_path gives an empty name, which the converter
 * leaves out) comes first, no string is empty, and every payload is a well-formed GGUF value.
 */
#include "fuzz.h"

#include <string.h>

#include <jansson.h>

#include "hf_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	fz_one_file card = { "README.md", data, nul ? (size_t)(nul - data) : size };
	char *id = NULL;
	if (nul) {
		size_t n = size - card.size - 1;
		if (!(id = malloc(n + 1)))
			fz_fail("out of memory");
		memcpy(id, nul + 1, n);
		id[n] = 0;
	}
	const char *dir = id && *id && !strchr(id, 0x7f) ? id : "model";
	json_t *config = json_object();
	if (id)
		json_object_set_new(config, "_name_or_path", json_stringn(id, strlen(id)));
	tfs_hf_files files = { .read = fz_read_one_file, .ctx = &card, .where = "fuzz" };
	tfs_hf_kvs kvs = { 0 };
	tfs_error err = { 0 };
	int64_t params = (int64_t)(size * 1000003u % 9000000000ull);
	if (tfs_hf_meta_keys(&kvs, &files, config, dir, params, &err) != 0) {
		if (!err.msg[0])
			fz_fail("failed without a message");
	} else {
		long at = tfs_hf_kvs_find(&kvs, "general.name");
		if (at > 0)
			fz_fail("general.name is key %ld, not the first", at);
		for (size_t i = 0; i < kvs.n; i++) {
			if (strncmp(kvs.kv[i].name, "general.", 8))
				fz_fail("key %s is not general.*", kvs.kv[i].name);
			if (tfs_hf_kvs_find(&kvs, kvs.kv[i].name) != (long)i)
				fz_fail("key %s twice", kvs.kv[i].name);
			if (kvs.kv[i].type == TFS_GGUF_STRING && kvs.kv[i].len <= 8)
				fz_fail("key %s is an empty string", kvs.kv[i].name);
			if (tfs_value_check(kvs.kv[i].type, kvs.kv[i].data, kvs.kv[i].len, &err))
				fz_fail("key %s: %s", kvs.kv[i].name, err.msg);
		}
	}
	tfs_hf_kvs_free(&kvs);
	json_decref(config);
	free(id);
	return 0;
}
