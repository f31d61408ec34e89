/*
 * test_safetensors.c - the safetensors reader against the reference crate's verdicts
 * (tests/data/safetensors/RESULTS.json), Git LFS pointers and sharded sets.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/format.h"
#include "tensorfs.h"
#include "model/source_impl.h" /* struct tfs_source: the tests read its fields */

#define ST_DIR TFS_TESTDATA "/safetensors"

/* Every case of RESULTS.json (test_results_count checks none is missing). */
static const char *const cases[] = {
	"ok_all_dtypes.safetensors", "ok_no_metadata.safetensors",
	"ok_metadata_only.safetensors", "bad_too_small.safetensors",
	"bad_header_too_large.safetensors", "bad_header_len_u64_max.safetensors",
	"bad_invalid_json.safetensors", "ok_leading_whitespace.safetensors",
	"ok_unpadded_header.safetensors", "bad_trailing_bytes.safetensors",
	"bad_gap.safetensors", "bad_first_not_zero.safetensors",
	"ok_json_order_differs.safetensors", "bad_shape_overflow.safetensors",
	"bad_f4_odd.safetensors", "bad_unknown_dtype.safetensors",
	"bad_f8_e4m3fn_name.safetensors", "bad_float_shape.safetensors",
	"bad_three_offsets.safetensors", "bad_metadata_non_string.safetensors",
	"ok_metadata_null.safetensors", "dup_tensor_key_diff.safetensors",
	"ok_zero_size_middle.safetensors",
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static json_t *load_results(void)
{
	json_error_t je;
	json_t *r = json_load_file(ST_DIR "/RESULTS.json", 0, &je);
	cr_assert(r, "RESULTS.json: %s", je.text);
	return r;
}

static json_t *find_case(json_t *results, const char *file)
{
	size_t i;
	json_t *c;
	json_array_foreach(results, i, c) {
		if (!strcmp(json_string_value(json_object_get(c, "file")), file))
			return c;
	}
	return NULL;
}

/* "accept" or "reject": the field tensorfs, else expect == ok. */
static bool must_accept(json_t *c)
{
	const char *v = json_string_value(json_object_get(c, "tensorfs"));
	if (v)
		return !strcmp(v, "accept");
	v = json_string_value(json_object_get(c, "expect"));
	return v && !strcmp(v, "ok");
}

Test(safetensors, results_count)
{
	json_t *r = load_results();
	cr_expect_eq(json_array_size(r), N_CASES, "RESULTS.json has %zu cases, the test knows %zu",
		     json_array_size(r), N_CASES);
	for (size_t i = 0; i < json_array_size(r); i++) {
		const char *f = json_string_value(json_object_get(json_array_get(r, i), "file"));
		bool known = false;
		for (size_t j = 0; j < N_CASES; j++)
			known |= !strcmp(cases[j], f);
		cr_expect(known, "case %s is not tested", f);
	}
	json_decref(r);
}

/* The tensor and metadata of an accepted file equal the crate's parsed header. */
static void check_accepted(const tfs_model *m, json_t *rust, const char *file)
{
	json_t *ts = json_object_get(rust, "tensors");
	uint64_t data_start = (uint64_t)json_integer_value(json_object_get(rust, "data_start"));
	cr_expect_eq(tfs_model_n_tensors(m), json_array_size(ts), "%s: tensor count", file);
	size_t i;
	json_t *t;
	json_array_foreach(ts, i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));
		long j = tfs_model_find_tensor(m, name);
		cr_assert_geq(j, 0, "%s: tensor %s missing", file, name);
		const tfs_tensor *mt = tfs_model_tensor(m, (size_t)j);
		const tfs_dtype_info *di = tfs_dtype(mt->dtype);
		cr_assert(di, "%s: %s: no dtype info", file, name);
		cr_expect_str_eq(di->name, json_string_value(json_object_get(t, "dtype")), "%s: %s",
				 file, name);
		json_t *shape = json_object_get(t, "shape");
		size_t nd = json_array_size(shape);
		cr_expect_eq(mt->n_dims, nd, "%s: %s: n_dims", file, name);
		for (size_t d = 0; d < nd && d < TFS_MAX_DIMS; d++)
			cr_expect_eq(mt->ne[nd - 1 - d], json_integer_value(json_array_get(shape, d)),
				     "%s: %s: dim %zu", file, name, d);
		json_t *off = json_object_get(t, "data_offsets");
		uint64_t b = (uint64_t)json_integer_value(json_array_get(off, 0));
		uint64_t e = (uint64_t)json_integer_value(json_array_get(off, 1));
		cr_expect_eq(mt->offset, data_start + b, "%s: %s: offset", file, name);
		cr_expect_eq(mt->nbytes, e - b, "%s: %s: nbytes", file, name);
	}
	json_t *meta = json_object_get(rust, "metadata");
	size_t nmeta = json_is_object(meta) ? json_object_size(meta) : 0;
	cr_expect_eq(tfs_model_n_kv(m), nmeta, "%s: key count", file);
	if (json_is_object(meta)) {
		const char *k;
		json_t *v;
		json_object_foreach(meta, k, v) {
			long j = tfs_model_find_kv(m, k);
			cr_assert_geq(j, 0, "%s: key %s missing", file, k);
			const tfs_kv *kv = tfs_model_kv(m, (size_t)j);
			cr_expect_eq(kv->type, TFS_GGUF_STRING);
			uint64_t len = json_string_length(v);
			cr_assert_eq(kv->len, 8 + len, "%s: key %s length", file, k);
			uint64_t l;
			memcpy(&l, kv->data, 8);
			cr_expect_eq(l, len);
			cr_expect(!memcmp(kv->data + 8, json_string_value(v), len), "%s: key %s", file, k);
		}
	}
}

/* Parameters are copied into the test process by value: a file name, not a pointer. */
typedef struct {
	char name[64];
} case_param;

ParameterizedTestParameters(safetensors, results)
{
	static case_param params[N_CASES];
	for (size_t i = 0; i < N_CASES; i++)
		snprintf(params[i].name, sizeof(params[i].name), "%s", cases[i]);
	return cr_make_param_array(case_param, params, N_CASES);
}

ParameterizedTest(case_param *param, safetensors, results)
{
	const char *const *file = &(const char *){ param->name };
	json_t *r = load_results();
	json_t *c = find_case(r, *file);
	cr_assert(c, "%s not in RESULTS.json", *file);
	char path[4096];
	snprintf(path, sizeof(path), ST_DIR "/%s", *file);
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	int rc = tfs_model_open(&m, path, NULL, &err);
	if (must_accept(c)) {
		cr_assert_eq(rc, 0, "%s must be accepted: %s", *file, err.msg);
		cr_expect_eq(tfs_model_format(m), TFS_FMT_SAFETENSORS);
		check_accepted(m, json_object_get(c, "rust"), *file);
		tfs_model_free(m);
	} else {
		cr_expect_eq(rc, TFS_E_FORMAT, "%s must be rejected with TFS_E_FORMAT: rc %d (%s)",
			     *file, rc, err.msg);
		cr_expect_null(m);
		cr_expect(strstr(err.msg, *file), "message does not name the file: %s", err.msg);
	}
	json_decref(r);
}

/* ==== helpers ==== */

static char *make_tmpdir(void)
{
	char *d = strdup("/tmp/tfs-st-XXXXXX");
	cr_assert(mkdtemp(d));
	return d;
}

static void rm_rf(const char *d)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	cr_expect_eq(system(cmd), 0);
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert(f, "%s", path);
	cr_assert_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

static void copy_file(const char *from, const char *to)
{
	FILE *f = fopen(from, "rb");
	cr_assert(f, "%s", from);
	char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf), f);
	cr_assert(feof(f), "%s too large for the test", from);
	fclose(f);
	write_file(to, buf, n);
}

/* A safetensors file from its header JSON and data bytes. */
static void write_st(const char *path, const char *header, const void *data, size_t n)
{
	size_t hl = strlen(header);
	uint8_t *buf = malloc(8 + hl + n);
	uint64_t h = hl;
	memcpy(buf, &h, 8);
	memcpy(buf + 8, header, hl);
	if (n)
		memcpy(buf + 8 + hl, data, n);
	write_file(path, buf, 8 + hl + n);
	free(buf);
}

/* ==== Git LFS pointers ==== */

static const char lfs[] = "version https://git-lfs.github.com/spec/v1\n"
			  "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
			  "size 12345\n";

Test(safetensors, lfs_pointer)
{
	char *d = make_tmpdir();
	char path[4200];
	snprintf(path, sizeof(path), "%s/model.safetensors", d);
	write_file(path, lfs, sizeof(lfs) - 1);

	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_expect_eq(tfs_model_open(&m, path, NULL, &err), TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "Git LFS pointer"), "%s", err.msg);

	/* the reader itself says so too (a shard of a set is not sniffed by tfs_model_open) */
	cr_assert_eq(tfs_model_new(&m, &tfs_safetensors_format, path, &err), 0);
	cr_expect_eq(tfs_safetensors_open(m, path, &err), TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "is a Git LFS pointer, not the model: run git lfs pull"), "%s",
		  err.msg);
	cr_expect(strstr(err.msg, "model.safetensors"), "%s", err.msg);
	tfs_model_free(m);
	rm_rf(d);
	free(d);
}

/* ==== a few defects RESULTS.json does not cover ==== */

static int open_header(const char *header, const void *data, size_t n, tfs_error *err)
{
	char *d = make_tmpdir();
	char path[4200];
	snprintf(path, sizeof(path), "%s/x.safetensors", d);
	write_st(path, header, data, n);
	tfs_model *m = NULL;
	int rc = tfs_model_open(&m, path, NULL, err);
	tfs_model_free(m);
	rm_rf(d);
	free(d);
	return rc;
}

Test(safetensors, overlap_names_both)
{
	tfs_error err = { 0 };
	uint8_t data[16] = { 0 };
	int rc = open_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
			     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
			     data, 12, &err);
	cr_expect_eq(rc, TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "x.safetensors: tensor 'b' data_offsets [4, 12) overlap tensor 'a'"),
		  "%s", err.msg);
}

Test(safetensors, duplicate_keys)
{
	tfs_error err = { 0 };
	uint8_t data[8] = { 0 };
	int rc = open_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
			     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
			     data, 4, &err);
	cr_expect_eq(rc, TFS_E_FORMAT, "%s", err.msg);
	cr_expect(strstr(err.msg, "duplicate"), "%s", err.msg);
	rc = open_header("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", NULL, 0, &err);
	cr_expect_eq(rc, TFS_E_FORMAT, "%s", err.msg);
}

Test(safetensors, too_many_dims)
{
	tfs_error err = { 0 };
	int rc = open_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
			     "\"data_offsets\":[0,1]}}", "x", 1, &err);
	cr_expect_eq(rc, TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "9 dimensions"), "%s", err.msg);
	/* 8 are fine */
	rc = open_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1],"
			 "\"data_offsets\":[0,1]}}", "x", 1, &err);
	cr_expect_eq(rc, 0, "%s", err.msg);
}

Test(safetensors, nul_padding_and_trailing_spaces)
{
	tfs_error err = { 0 };
	char h[64] = "{}";
	/* trailing spaces: accepted */
	cr_expect_eq(open_header("{}      ", NULL, 0, &err), 0, "%s", err.msg);
	/* NUL padding: rejected */
	char *d = make_tmpdir();
	char path[4200];
	snprintf(path, sizeof(path), "%s/x.safetensors", d);
	uint8_t buf[8 + 8];
	uint64_t n = 8;
	memcpy(buf, &n, 8);
	memcpy(buf + 8, h, 8); /* "{}" and 6 NULs */
	write_file(path, buf, sizeof(buf));
	tfs_model *m = NULL;
	cr_expect_eq(tfs_model_open(&m, path, NULL, &err), TFS_E_FORMAT);
	rm_rf(d);
	free(d);
}

Test(safetensors, bad_utf8)
{
	tfs_error err = { 0 };
	int rc = open_header("{\"__metadata__\":{\"k\":\"\xc3\x28\"}}", NULL, 0, &err);
	cr_expect_eq(rc, TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "UTF-8"), "%s", err.msg);
}

/* ==== sharded sets ==== */

static const char shard3_header[] =
	"{\"__metadata__\":{\"format\":\"pt\"},"
	"\"c0\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	"\"c1\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[8,11]}}";
static const uint8_t shard3_data[11] = { 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 1, 2, 3 };

/* A 3-shard set in d: ok_all_dtypes, ok_no_metadata, and a written one; extra is spliced
 * into the weight_map. */
static void make_set(const char *d, const char *extra)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/model-00001-of-00003.safetensors", d);
	copy_file(ST_DIR "/ok_all_dtypes.safetensors", p);
	snprintf(p, sizeof(p), "%s/model-00002-of-00003.safetensors", d);
	copy_file(ST_DIR "/ok_no_metadata.safetensors", p);
	snprintf(p, sizeof(p), "%s/model-00003-of-00003.safetensors", d);
	write_st(p, shard3_header, shard3_data, sizeof(shard3_data));

	static const char *const s1[] = { "w_u64", "w_i64", "w_f64", "w_c64", "empty", "scalar",
					  "w_f32", "w_u32", "w_i32", "w_bf16", "w_f16", "w_u16",
					  "w_i16", "w_f8e5m2fnuz", "w_f8e4m3fnuz", "w_f8e8m0",
					  "w_f8e4m3", "w_f8e5m2", "w_i8", "w_u8", "w_bool" };
	char idx[8192];
	int n = snprintf(idx, sizeof(idx),
			 "{\n  \"metadata\": {\"total_size\": 158, \"format\": \"pt\"},\n"
			 "  \"weight_map\": {\n");
	for (size_t i = 0; i < sizeof(s1) / sizeof(s1[0]); i++)
		n += snprintf(idx + n, sizeof(idx) - (size_t)n,
			      "    \"%s\": \"model-00001-of-00003.safetensors\",\n", s1[i]);
	n += snprintf(idx + n, sizeof(idx) - (size_t)n,
		      "    %s\"a\": \"model-00002-of-00003.safetensors\",\n"
		      "    \"c0\": \"model-00003-of-00003.safetensors\",\n"
		      "    \"c1\": \"model-00003-of-00003.safetensors\"\n  }\n}\n",
		      extra ? extra : "");
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	write_file(p, idx, (size_t)n);
}

static void check_set(const tfs_model *m)
{
	cr_expect_eq(tfs_model_n_tensors(m), 24);
	cr_expect_eq(tfs_model_n_sources(m), 3);
	cr_expect_str_eq(tfs_model_source(m, 0)->label, "model-00001-of-00003.safetensors");
	cr_expect_str_eq(tfs_model_source(m, 2)->label, "model-00003-of-00003.safetensors");
	long a = tfs_model_find_tensor(m, "a"), c1 = tfs_model_find_tensor(m, "c1");
	cr_assert(a >= 0 && c1 >= 0);
	cr_expect_str_eq(tfs_model_source(m, (size_t)tfs_model_tensor(m, (size_t)a)->src)->label,
			 "model-00002-of-00003.safetensors");
	uint8_t b[3];
	tfs_error err = { 0 };
	cr_expect_eq(tfs_tensor_read_raw(m, (size_t)c1, 0, 3, b, &err), 3, "%s", err.msg);
	cr_expect(b[0] == 1 && b[1] == 2 && b[2] == 3);
	/* read whole or an error naming the tensor and where its 3 bytes ran out */
	memset(b, 0, sizeof(b));
	cr_expect_eq(tfs_tensor_read_exact(m, (size_t)c1, 1, 2, b, &err), 0, "%s", err.msg);
	cr_expect(b[0] == 2 && b[1] == 3);
	cr_expect_eq(tfs_tensor_read_exact(m, (size_t)c1, 1, 3, b, &err), TFS_E_IO);
	cr_expect(strstr(err.msg, "tensor 'c1': short read at 3"), "%s", err.msg);
	tfs_error_clear(&err);
	/* keys: index metadata (total_size an integer) + shard metadata, "format" once */
	long ts = tfs_model_find_kv(m, "total_size"), fm = tfs_model_find_kv(m, "format");
	cr_assert(ts >= 0 && fm >= 0);
	cr_expect_eq(tfs_model_kv(m, (size_t)ts)->type, TFS_GGUF_UINT64);
	cr_expect_geq(tfs_model_find_kv(m, "unicode"), 0);
	cr_expect_eq(tfs_model_n_kv(m), 4); /* total_size, format, empty, unicode */
	const tfs_safetensors_layout *l = m->priv;
	cr_assert(l && l->n_shards == 3 && l->index_path);
	cr_expect_eq(l->shards[2].n_tensors, 2);
	cr_expect(strstr(l->index_rest, "total_size") && !strstr(l->index_rest, "weight_map"));
}

Test(safetensors, sharded_set)
{
	char *d = make_tmpdir();
	make_set(d, NULL);
	char p[4200];
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&m, p, NULL, &err), 0, "%s", err.msg);
	cr_expect_str_eq(tfs_model_path(m), p);
	check_set(m);
	tfs_model_free(m);

	/* the directory resolves to its index */
	cr_assert_eq(tfs_model_open(&m, d, NULL, &err), 0, "%s", err.msg);
	cr_expect_str_eq(tfs_model_path(m), p);
	check_set(m);
	tfs_model_free(m);
	rm_rf(d);
	free(d);
}

Test(safetensors, sharded_listed_but_missing)
{
	char *d = make_tmpdir();
	make_set(d, "\"ghost\": \"model-00002-of-00003.safetensors\",\n");
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_expect_eq(tfs_model_open(&m, d, NULL, &err), TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "'ghost'") && strstr(err.msg, "model-00002-of-00003"), "%s",
		  err.msg);
	rm_rf(d);
	free(d);
}

Test(safetensors, sharded_tensor_in_two_shards)
{
	char *d = make_tmpdir();
	make_set(d, "\"z\": \"model-00004-of-00003.safetensors\",\n");
	char p[4200];
	/* shard 4 also holds "a" (and its own tensor is not even "z") */
	snprintf(p, sizeof(p), "%s/model-00004-of-00003.safetensors", d);
	copy_file(ST_DIR "/ok_unpadded_header.safetensors", p);
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_expect_eq(tfs_model_open(&m, d, NULL, &err), TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "model-00004-of-00003.safetensors") &&
		  strstr(err.msg, "model-00002-of-00003.safetensors") && strstr(err.msg, "'a'"),
		  "%s", err.msg);
	rm_rf(d);
	free(d);
}

Test(safetensors, sharded_wrong_shard_and_unlisted)
{
	char *d = make_tmpdir();
	char p[4200];
	make_set(d, NULL);
	/* c1 listed in shard 2 */
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
	const char idx[] = "{\"weight_map\":{\"a\":\"model-00002-of-00003.safetensors\","
			   "\"c0\":\"model-00003-of-00003.safetensors\","
			   "\"c1\":\"model-00002-of-00003.safetensors\"}}";
	write_file(p, idx, sizeof(idx) - 1);
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_expect_eq(tfs_model_open(&m, d, NULL, &err), TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "'c1'") && strstr(err.msg, "model-00003-of-00003"), "%s", err.msg);
	/* c1 not listed at all */
	const char idx2[] = "{\"weight_map\":{\"a\":\"model-00002-of-00003.safetensors\","
			    "\"c0\":\"model-00003-of-00003.safetensors\"}}";
	write_file(p, idx2, sizeof(idx2) - 1);
	cr_expect_eq(tfs_model_open(&m, d, NULL, &err), TFS_E_FORMAT);
	cr_expect(strstr(err.msg, "'c1'") && strstr(err.msg, "not in the weight_map"), "%s",
		  err.msg);
	/* path traversal in a shard name */
	const char idx3[] = "{\"weight_map\":{\"a\":\"../model-00002-of-00003.safetensors\"}}";
	write_file(p, idx3, sizeof(idx3) - 1);
	cr_expect_eq(tfs_model_open(&m, d, NULL, &err), TFS_E_FORMAT);
	rm_rf(d);
	free(d);
}
