/*
 * test_index.c - index.json as a stream (tfs_index_open/_read) against the whole document
 * (tfs_model_index_json, tfs_model_info_json): the same bytes for every model tests/data
 * holds, read in order, in odd chunks and at 200 random (offset, length) pairs, with deleted
 * keys and tensors, and names that are not UTF-8.
 */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorfs.h"

/* Which document: tfs_model_index_json, or tfs_model_info_json with or without tensors. */
enum { DOC_INDEX, DOC_INFO, DOC_INFO_NO_TENSORS, DOC_COUNT };

static void whole(tfs_buf *b, const tfs_model *m, int doc)
{
	tfs_error err;
	int rc = doc == DOC_INDEX ? tfs_model_index_json(b, m, &err)
				  : tfs_model_info_json(b, m, doc == DOC_INFO, &err);
	cr_assert_eq(rc, 0, "%s", err.msg);
}

/* index.json is what jansson dumps of itself (JSON_INDENT(1), in order): the layout of the
 * pieces is jansson's.  Not for names written \udcXX, which jansson does not load. */
static void expect_jansson_layout(const tfs_buf *doc, const char *what)
{
	json_error_t je;
	json_t *j = json_loadb(doc->data, doc->len, 0, &je);
	if (!j && strstr(doc->data, "\\udc"))
		return;
	cr_assert(j, "%s: index.json is not JSON: %s at %d", what, je.text, je.position);
	char *again = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	cr_assert(again);
	cr_assert_eq(strlen(again) + 1, doc->len, "%s: %zu bytes, jansson dumps %zu", what,
		     doc->len, strlen(again) + 1);
	cr_assert(memcmp(again, doc->data, doc->len - 1) == 0, "%s: not jansson's layout", what);
	free(again);
	json_decref(j);
}

/* Reads [off, off + len) of s and compares it with the same slice of want. */
static void expect_slice(tfs_index *s, const tfs_buf *want, uint64_t off, size_t len,
			 const char *what)
{
	char *buf = malloc(len ? len : 1);
	size_t got = 99;
	tfs_error err;
	cr_assert(buf);
	cr_assert_eq(tfs_index_read(&got, s, buf, off, len, &err), 0, "%s: %s", what, err.msg);
	size_t expect = off >= want->len ? 0 : want->len - off < len ? want->len - off : len;
	cr_assert_eq(got, expect, "%s: %zu bytes at %llu: got %zu, want %zu", what, len,
		     (unsigned long long)off, got, expect);
	cr_assert(got == 0 || memcmp(buf, want->data + off, got) == 0,
		  "%s: bytes differ in [%llu, +%zu)", what, (unsigned long long)off, got);
	free(buf);
}

/* Random slices a document: under ASan (gcc's __SANITIZE_ADDRESS__, build-asan) 50, which
 * take the same lines and branches of the library as 200 (gcov); 200 were 5 of the test's
 * 10.6 CPU-s there, its renderings allocation by allocation. */
#ifdef __SANITIZE_ADDRESS__
enum { N_SLICES = 50 };
#else
enum { N_SLICES = 200 };
#endif

/* The stream of m for doc against the whole document: size, a read in order in chunks of
 * 4093 bytes, N_SLICES random slices, reads at and past the end. */
static void check_doc(const tfs_model *m, int doc, const char *what)
{
	tfs_buf want = { 0 };
	whole(&want, m, doc);
	if (doc == DOC_INDEX)
		expect_jansson_layout(&want, what);
	tfs_index *s;
	tfs_error err;
	cr_assert_eq(tfs_index_open(&s, m, doc != DOC_INDEX, doc != DOC_INFO_NO_TENSORS, &err), 0,
		     "%s: %s", what, err.msg);
	cr_assert_eq(tfs_index_size(s), want.len, "%s (doc %d): size", what, doc);
	for (uint64_t off = 0; off < want.len; off += 4093)
		expect_slice(s, &want, off, 4093, what);
	unsigned seed = 12345u + (unsigned)doc;
	for (int k = 0; k < N_SLICES; k++) {
		uint64_t off = (uint64_t)rand_r(&seed) % (want.len + 16);
		size_t len = (size_t)rand_r(&seed) % (k % 4 == 0 ? 64 : 9000);
		expect_slice(s, &want, off, len, what);
	}
	expect_slice(s, &want, want.len, 10, what);
	expect_slice(s, &want, want.len + 1000, 10, what);
	expect_slice(s, &want, 0, want.len + 10, what);
	tfs_index_free(s);
	tfs_buf_free(&want);
}

/* index.json's "model_file" size, computed without the image, is the image's. */
static void check_image_size(const tfs_model *m, const char *what)
{
	tfs_image *im;
	uint64_t size = 0;
	tfs_error err, err2;
	int rc = tfs_model_image(&im, m, false, &err);
	cr_assert_eq(tfs_model_image_size(&size, m, &err2), rc, "%s: %s / %s", what,
		     rc ? err.msg : "", err2.msg);
	if (!rc)
		cr_assert_eq(size, tfs_image_size(im), "%s: image size", what);
	tfs_image_free(im);
}

static void check_model(const tfs_model *m, const char *what)
{
	for (int doc = 0; doc < DOC_COUNT; doc++)
		check_doc(m, doc, what);
	if (tfs_image_name(m))
		check_image_size(m, what);
}

static tfs_model *open_ok(const char *path)
{
	tfs_model *m = NULL;
	tfs_error err;
	cr_assert_eq(tfs_model_open(&m, path, NULL, &err), 0, "%s", err.msg);
	return m;
}

/* ==== every model of tests/data ==== */

static int n_models;

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)ftw;
	tfs_model *m;
	tfs_error err;
	if (type != FTW_F || tfs_model_open(&m, path, NULL, &err) != 0)
		return 0; /* not a model, or one refused (tests/data holds many) */
	check_model(m, path);
	tfs_model_free(m);
	n_models++;
	return 0;
}

Test(index, stream_is_the_whole_document_for_every_test_model, .timeout = 300)
{
	cr_assert_eq(nftw(TFS_TESTDATA, visit, 16, FTW_PHYS), 0);
	/* GGUF, safetensors (single, sharded), Ollama manifests, the fuzz findings */
	cr_expect_geq(n_models, 10, "only %d models under " TFS_TESTDATA, n_models);
	printf("# %d models compared\n", n_models);
}

/* ==== edits and names ==== */

/* Deleted keys and tensors leave empty pieces: the first live slot takes no comma; with
 * none left the lists are "[]". */
Test(index, stream_skips_deleted_slots)
{
	tfs_model *m = open_ok(TFS_TESTDATA "/gguf/mixed_flat.gguf");
	tfs_error err;
	size_t nk = tfs_model_n_kv(m), nt = tfs_model_n_tensors(m);
	cr_assert(nk >= 3 && nt >= 3, "mixed_flat.gguf: %zu keys, %zu tensors", nk, nt);
	const size_t kdel[] = { 0, nk / 2, nk - 1 }, tdel[] = { 0, nt / 2, nt - 1 };
	for (int k = 0; k < 3; k++) {
		char *key = strdup(tfs_model_kv(m, kdel[k])->name);
		char *t = strdup(tfs_model_tensor(m, tdel[k])->name);
		cr_assert_eq(tfs_model_del_kv(m, key, &err), 0, "%s", err.msg);
		cr_assert_eq(tfs_model_del_tensor(m, t, &err), 0, "%s", err.msg);
		free(key);
		free(t);
		check_model(m, "mixed_flat.gguf, some deleted");
	}
	for (size_t i = 0; i < nk; i++)
		if (!tfs_model_kv(m, i)->deleted)
			cr_assert_eq(tfs_model_del_kv(m, tfs_model_kv(m, i)->name, &err), 0, "%s",
				     err.msg);
	for (size_t i = 0; i < nt; i++)
		if (!tfs_model_tensor(m, i)->deleted)
			cr_assert_eq(tfs_model_del_tensor(m, tfs_model_tensor(m, i)->name, &err), 0,
				     "%s", err.msg);
	check_model(m, "mixed_flat.gguf, all deleted");
	tfs_buf b = { 0 };
	whole(&b, m, DOC_INDEX);
	cr_expect(strstr(b.data, "\"keys\": [],\n \"tensors\": [],\n \"layers\": []\n}\n"), "%s",
		  b.data);
	tfs_buf_free(&b);
	tfs_model_free(m);
}

/* Names with 0x01 bytes, backslashes, broken UTF-8 (written \udcXX), in keys and tensors. */
Test(index, stream_of_names_that_are_not_utf8)
{
	static const char *const names[] = { ("a\x01" "f2"), "b\\u0001f2", "c\xe5\x90",
					      "d\xc3\xa9", "e\xff\x01" "01" };
	uint8_t buf[1024];
	size_t n = 0;
	uint32_t v3 = 3, type_str = 8, f32 = 0, one = 1;
	uint64_t nt = 5, nkv = 5, four = 4;
	memcpy(buf, "GGUF", 4), n = 4;
	memcpy(buf + n, &v3, 4), n += 4;
	memcpy(buf + n, &nt, 8), n += 8;
	memcpy(buf + n, &nkv, 8), n += 8;
	for (int i = 0; i < 5; i++) {
		uint64_t len = strlen(names[i]), vlen = 1;
		memcpy(buf + n, &len, 8), n += 8;
		memcpy(buf + n, names[i], len), n += len;
		memcpy(buf + n, &type_str, 4), n += 4;
		memcpy(buf + n, &vlen, 8), n += 8;
		buf[n++] = 'x';
	}
	for (uint64_t i = 0; i < 5; i++) {
		uint64_t len = strlen(names[i]), off = i * 32;
		memcpy(buf + n, &len, 8), n += 8;
		memcpy(buf + n, names[i], len), n += len;
		memcpy(buf + n, &one, 4), n += 4;
		memcpy(buf + n, &four, 8), n += 8;
		memcpy(buf + n, &f32, 4), n += 4;
		memcpy(buf + n, &off, 8), n += 8;
	}
	n = (n + 31) / 32 * 32;
	memset(buf + n, 0, 5 * 32);
	n += 5 * 32;
	cr_assert_leq(n, sizeof(buf));
	tfs_model *m = NULL;
	tfs_error err;
	cr_assert_eq(tfs_model_open_mem(&m, "names.gguf", buf, n, &err), 0, "%s", err.msg);
	check_model(m, "names.gguf");
	tfs_buf b = { 0 };
	whole(&b, m, DOC_INDEX);
	cr_expect(strstr(b.data, "\"c\\udce5\\udc90\""), "%s", b.data);
	cr_expect(strstr(b.data, "\"e\\udcff\\u000101\""), "%s", b.data);
	tfs_buf_free(&b);
	tfs_model_free(m);
}

/* 3017 keys and 500 tensors (some deleted, the first ones too): reads start at many
 * recorded offsets, not only the first. */
Test(index, stream_of_many_slots)
{
	enum { NK = 3017, NT = 500, TB = 32 }; /* 3520 pieces: 55 recorded offsets, none past the end */
	size_t cap = NK * 32 + NT * 48 + NT * TB + 64, n = 0;
	uint8_t *buf = calloc(1, cap);
	cr_assert(buf);
	uint32_t v3 = 3, u8 = 0, f32 = 0, one = 1;
	uint64_t nt = NT, nkv = NK, four = 4;
	memcpy(buf, "GGUF", 4), n = 4;
	memcpy(buf + n, &v3, 4), n += 4;
	memcpy(buf + n, &nt, 8), n += 8;
	memcpy(buf + n, &nkv, 8), n += 8;
	for (int i = 0; i < NK; i++) {
		char name[16];
		uint64_t len = (uint64_t)snprintf(name, sizeof(name), "k.%04d", i);
		memcpy(buf + n, &len, 8), n += 8;
		memcpy(buf + n, name, len), n += len;
		memcpy(buf + n, &u8, 4), n += 4;
		buf[n++] = (uint8_t)i;
	}
	for (uint64_t i = 0; i < NT; i++) {
		char name[16];
		uint64_t len = (uint64_t)snprintf(name, sizeof(name), "t.%03d", (int)i), off = i * TB;
		memcpy(buf + n, &len, 8), n += 8;
		memcpy(buf + n, name, len), n += len;
		memcpy(buf + n, &one, 4), n += 4;
		memcpy(buf + n, &four, 8), n += 8;
		memcpy(buf + n, &f32, 4), n += 4;
		memcpy(buf + n, &off, 8), n += 8;
	}
	n = (n + 31) / 32 * 32 + NT * TB;
	cr_assert_leq(n, cap);
	tfs_model *m = NULL;
	tfs_error err;
	cr_assert_eq(tfs_model_open_mem(&m, "many.gguf", buf, n, &err), 0, "%s", err.msg);
	check_model(m, "many.gguf");
	for (int i = 0; i < NK; i += 7)
		cr_assert_eq(tfs_model_del_kv(m, tfs_model_kv(m, (size_t)i)->name, &err), 0);
	for (int i = 0; i < NT; i += 3)
		cr_assert_eq(tfs_model_del_tensor(m, tfs_model_tensor(m, (size_t)i)->name, &err), 0);
	check_model(m, "many.gguf, some deleted");
	tfs_model_free(m);
	free(buf);
}
