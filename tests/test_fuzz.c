/*
 * test_fuzz.c - what the fuzz harnesses (tests/fuzz/) found, each input kept in
 * tests/data/fuzz/<harness>/ with the exact result expected now, and tfs_model_open_mem (the
 * harnesses' in-memory open) against tfs_model_open of the same files.
 */
#include <criterion/criterion.h>

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tensorfs.h"
#include "model/source_impl.h" /* struct tfs_source: the tests read its fields */

#define FUZZ_DIR TFS_TESTDATA "/fuzz"

/* ==== findings ==== */

/* A GGUF without tensors (94 bytes): the tensor spans were sorted with qsort(NULL, 0, ...),
 * undefined behaviour that UBSan reports ("null pointer passed as argument 1"); the build-asan
 * run of this test fails on it. */
Test(fuzz_regress, gguf_without_tensors_opens)
{
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	cr_assert_eq(tfs_model_open(&m, TFS_TESTDATA "/gguf/bad/ok_no_tensors_unpadded.gguf", NULL,
				    &e), 0, "%s", e.msg);
	cr_expect_eq(tfs_model_n_tensors(m), 0);
	cr_expect_eq(tfs_model_source(m, 0)->size, 94);
	tfs_model_free(m);
}

/* A key name that is not UTF-8 ("tes\xf2.u32") made index.json fail as a whole (EIO on the
 * mount, `tensorfs info --json` failed); such bytes are now \udcXX. */
Test(fuzz_regress, index_json_non_utf8_key_name)
{
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	tfs_buf b = { 0 };
	cr_assert_eq(tfs_model_open(&m, FUZZ_DIR "/gguf/index_non_utf8_key_name.gguf", NULL, &e),
		     0, "%s", e.msg);
	cr_assert_geq(tfs_model_find_kv(m, "tes\xf2.u32"), 0);
	cr_assert_eq(tfs_model_index_json(&b, m, &e), 0, "%s", e.msg);
	cr_expect(strstr(b.data, "\"name\": \"tes\\udcf2.u32\","), "%s", b.data);
	cr_expect(strstr(b.data, "\"file\": \"tes\\udcf2.u32\"\n"), "%s", b.data);
	tfs_buf_free(&b);
	tfs_model_free(m);
}

/* How names with 0x01 bytes, backslashes and broken sequences come out in index.json. */
Test(fuzz_regress, index_json_name_escapes)
{
	/* a GGUF v3 with one string key named by each case, no tensors */
	static const char *const names[] = { ("a\x01" "f2"), "b\\u0001f2", "c\xe5\x90", "d\xc3\xa9" };
	static const char *const want[] = { "\"a\\u0001f2\"", "\"b\\\\u0001f2\"",
					    "\"c\\udce5\\udc90\"", "\"d\xc3\xa9\"" };
	uint8_t buf[512];
	size_t n = 0;
	uint32_t v3 = 3;
	uint64_t nt = 0, nkv = 4;
	memcpy(buf, "GGUF", 4), n = 4;
	memcpy(buf + n, &v3, 4), n += 4;
	memcpy(buf + n, &nt, 8), n += 8;
	memcpy(buf + n, &nkv, 8), n += 8;
	for (int i = 0; i < 4; i++) {
		uint64_t len = strlen(names[i]), vlen = 1;
		uint32_t type = 8;
		memcpy(buf + n, &len, 8), n += 8;
		memcpy(buf + n, names[i], len), n += len;
		memcpy(buf + n, &type, 4), n += 4;
		memcpy(buf + n, &vlen, 8), n += 8;
		buf[n++] = 'x';
	}
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	tfs_buf b = { 0 };
	cr_assert_eq(tfs_model_open_mem(&m, "names.gguf", buf, n, &e), 0, "%s", e.msg);
	cr_assert_eq(tfs_model_index_json(&b, m, &e), 0, "%s", e.msg);
	for (int i = 0; i < 4; i++)
		cr_expect(strstr(b.data, want[i]), "%s not in %s", want[i], b.data);
	tfs_buf_free(&b);
	tfs_model_free(m);
}

/* A store in a new directory under /tmp: tests/data's blobs, and the manifest
 * tests/data/fuzz/ollama_manifest/<name> as library/fuzz:latest.  *manifest gets its path. */
static void make_store(char dir[static 32], char manifest[static 512], const char *name)
{
	char p[256], blobs[512], src[512];
	strcpy(dir, "/tmp/tfs-fuzz-regress-XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/manifests/registry.ollama.ai/library/fuzz", dir);
	char *q = p + strlen(dir);
	while ((q = strchr(q + 1, '/'))) {
		*q = '\0';
		mkdir(p, 0755);
		*q = '/';
	}
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(blobs, sizeof(blobs), "%s/blobs", dir);
	cr_assert_eq(symlink(TFS_TESTDATA "/ollama/models/blobs", blobs), 0);
	snprintf(manifest, 512, "%s/latest", p);
	snprintf(src, sizeof(src), "%s/ollama_manifest/%s", FUZZ_DIR, name);
	size_t len;
	uint8_t *text = test_slurp_exact(src, &len);
	FILE *f = fopen(manifest, "wb");
	cr_assert(f);
	cr_assert_eq(fwrite(text, 1, len, f), len);
	fclose(f);
	free(text);
}

static void remove_store(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

/* An Ollama layer's media type holding a 0x01 byte followed by two letters: the first fix of
 * the above turned every dumped "\u0001XX" into "\udcXX", also in strings it had not marked,
 * and index.json was not JSON ("\udcco"); now every string from the model is marked. */
Test(fuzz_regress, index_json_media_type_with_0x01)
{
	char dir[32], manifest[512];
	make_store(dir, manifest, "media_type_with_0x01");
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	tfs_buf b = { 0 };
	cr_assert_eq(tfs_model_open(&m, manifest, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(tfs_model_index_json(&b, m, &e), 0, "%s", e.msg);
	cr_expect(strstr(b.data, "\"media_type\": \"application/vnd.d\\u0001container.image.v1+json\""),
		  "%s", b.data);
	cr_expect(!strstr(b.data, "\\udc"), "%s", b.data);
	json_error_t je;
	json_t *j = json_loadb(b.data, b.len, 0, &je);
	cr_expect(j, "index.json is not JSON: %s", je.text);
	json_decref(j);
	tfs_buf_free(&b);
	tfs_model_free(m);
	remove_store(dir);
}

/* Two layers naming the same blob (model.norm.weight's, 344 bytes) with different sizes, the
 * second a json layer of 388: the blob was opened once and the second size never checked, so
 * layers/layer.2 said 388 bytes of a 344-byte blob (reads past its end). */
Test(fuzz_regress, ollama_same_blob_two_sizes)
{
	char dir[32], manifest[512], want[1024];
	make_store(dir, manifest, "same_blob_two_sizes");
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	cr_expect_eq(tfs_model_open(&m, manifest, NULL, &e), TFS_E_DIGEST);
	cr_expect_null(m);
	char *real = realpath(manifest, NULL);
	snprintf(want, sizeof(want), "%s: blob sha256-90a7c2da916473054736a3e55bb0900ec9a47399f61cd3"
		 "937bb5a603b447e92f is 344 bytes, the manifest says 388; refusing to open it", real);
	cr_expect_str_eq(e.msg, want);
	free(real);
	remove_store(dir);
}

/* Value text of an array of floats that ends in 'N' (or a prefix of "Infinity"): the check
 * for NaN/Infinity compared past the end of the text (not NUL-terminated). */
Test(fuzz_regress, value_text_ending_in_n)
{
	size_t len;
	uint8_t *in = test_slurp_exact(FUZZ_DIR "/value/array_float32_text_ends_in_N", &len);
	cr_assert_eq(in[0], 18); /* the harness's type 18: array[float32] */
	char *text = malloc(len - 1); /* exactly the text: ASan sees any read past it */
	memcpy(text, in + 1, len - 1);
	uint8_t *data = NULL;
	uint64_t dlen = 0;
	uint32_t type = 0;
	tfs_error e = { 0 };
	cr_expect_eq(tfs_value_parse(&data, &dlen, &type, "array[float32]", text, len - 1, &e),
		     TFS_E_INVALID);
	cr_expect_str_eq(e.msg, "not a JSON array: invalid token near '\x01' (line 1, column 1)");
	/* and the short tails on their own */
	static const char *const tails[] = { "[N", "[I", "[Infinit", "[Na" };
	for (size_t i = 0; i < 4; i++) {
		size_t tl = strlen(tails[i]);
		char *t = malloc(tl);
		memcpy(t, tails[i], tl);
		cr_expect_eq(tfs_value_parse(&data, &dlen, &type, "array[float32]", t, tl, &e),
			     TFS_E_INVALID, "%s", tails[i]);
		free(t);
	}
	free(text);
	free(in);
}

/* ==== tfs_model_open_mem ==== */

static void same_model(const char *path)
{
	tfs_model *f = NULL, *m = NULL;
	tfs_error e = { 0 };
	size_t len;
	uint8_t *bytes = test_slurp_exact(path, &len);
	cr_assert_eq(tfs_model_open(&f, path, NULL, &e), 0, "%s: %s", path, e.msg);
	cr_assert_eq(tfs_model_open_mem(&m, path, bytes, len, &e), 0, "%s: %s", path, e.msg);
	cr_expect_eq(tfs_model_format(m), tfs_model_format(f));
	cr_assert_eq(tfs_model_n_kv(m), tfs_model_n_kv(f));
	cr_assert_eq(tfs_model_n_tensors(m), tfs_model_n_tensors(f));
	for (size_t i = 0; i < tfs_model_n_kv(m); i++) {
		tfs_buf a = { 0 }, b = { 0 };
		cr_expect_str_eq(tfs_model_kv(m, i)->name, tfs_model_kv(f, i)->name);
		tfs_value_format(&a, tfs_model_kv(m, i)->type, tfs_model_kv(m, i)->data,
				 tfs_model_kv(m, i)->len, &e);
		tfs_value_format(&b, tfs_model_kv(f, i)->type, tfs_model_kv(f, i)->data,
				 tfs_model_kv(f, i)->len, &e);
		cr_expect(a.len == b.len && !memcmp(a.data, b.data, a.len));
		tfs_buf_free(&a);
		tfs_buf_free(&b);
	}
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		cr_expect_str_eq(t->name, tfs_model_tensor(f, i)->name);
		cr_assert_eq(t->nbytes, tfs_model_tensor(f, i)->nbytes);
		uint8_t *x = malloc(t->nbytes + 1), *y = malloc(t->nbytes + 1);
		cr_expect_eq(tfs_tensor_read_raw(m, i, 0, t->nbytes, x, &e), (int64_t)t->nbytes);
		cr_expect_eq(tfs_tensor_read_raw(f, i, 0, t->nbytes, y, &e), (int64_t)t->nbytes);
		cr_expect(!memcmp(x, y, t->nbytes), "%s: tensor %s", path, t->name);
		uint64_t n = tfs_tensor_f32_count(m, i, NULL);
		if (n && tfs_tensor_has_f32(m, i, NULL)) {
			float *p = malloc(n * 4), *q = malloc(n * 4);
			cr_expect_eq(tfs_tensor_read_f32(m, i, 0, n, p, &e), 0, "%s", e.msg);
			cr_expect_eq(tfs_tensor_read_f32(f, i, 0, n, q, &e), 0, "%s", e.msg);
			cr_expect(!memcmp(p, q, n * 4), "%s: f32 of %s", path, t->name);
			free(p);
			free(q);
		}
		free(x);
		free(y);
	}
	tfs_model_free(m);
	tfs_model_free(f);
	free(bytes);
}

Test(open_mem, reads_as_the_file_does)
{
	same_model(TFS_TESTDATA "/gguf/mixed_flat.gguf");
	same_model(TFS_TESTDATA "/safetensors/ok_all_dtypes.safetensors");
	same_model(TFS_TESTDATA "/safetensors/ok_zero_size_middle.safetensors");
}

/* Every bad file fails with the message tfs_model_open gives for it. */
Test(open_mem, refuses_what_the_file_reader_refuses)
{
	static const char *const bad[] = {
		"/gguf/bad/bad_offset_overlap.gguf", "/gguf/bad/bad_data_truncated.gguf",
		"/gguf/bad/bad_n_kv_too_many.gguf", "/gguf/bad/bad_version1.gguf",
		"/safetensors/bad_gap.safetensors", "/safetensors/bad_header_too_large.safetensors",
		"/safetensors/bad_too_small.safetensors", "/safetensors/bad_invalid_json.safetensors",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s%s", TFS_TESTDATA, bad[i]);
		size_t len;
		uint8_t *bytes = test_slurp_exact(path, &len);
		tfs_model *m = NULL;
		tfs_error ef = { 0 }, em = { 0 };
		int rf = tfs_model_open(&m, path, NULL, &ef);
		cr_assert(rf != 0 && !m, "%s opened", path);
		int rm = tfs_model_open_mem(&m, path, bytes, len, &em);
		cr_expect(rm == rf && !m, "%s: %d vs %d", path, rm, rf);
		cr_expect_str_eq(em.msg, ef.msg);
		free(bytes);
	}
}

/* The bytes stay the caller's: reads come from them, freeing the model leaves them alone. */
Test(open_mem, borrows_the_bytes)
{
	size_t len;
	uint8_t *bytes = test_slurp_exact(TFS_TESTDATA "/gguf/bad/ok_base.gguf", &len);
	uint8_t *copy = malloc(len);
	memcpy(copy, bytes, len);
	tfs_model *m = NULL;
	tfs_error e = { 0 };
	cr_assert_eq(tfs_model_open_mem(&m, "ok_base.gguf", bytes, len, &e), 0, "%s", e.msg);
	cr_expect_eq(tfs_model_source(m, 0)->fd, -1);
	cr_expect_eq(tfs_model_source(m, 0)->map, bytes);
	float v[16];
	cr_expect_eq(tfs_tensor_read_f32(m, 0, 0, 16, v, &e), 0, "%s", e.msg);
	tfs_model_free(m);
	cr_expect(!memcmp(bytes, copy, len));
	cr_expect_eq(tfs_model_open_mem(&m, "lfs", "version https://git-lfs.github.com/spec/v1\n",
					44, &e), TFS_E_FORMAT);
	cr_expect_str_eq(e.msg, "lfs: is a Git LFS pointer file, not the model itself (run 'git lfs "
				"pull' to fetch it)");
	free(copy);
	free(bytes);
}
