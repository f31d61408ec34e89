/*
 * test_gguf.c - the GGUF reader: llama.cpp's vocab-only GGUFs against what ggml's own reader
 * makes of them (the reference clone's models/ggml-vocab-*.gguf, $TFS_VOCAB_DIR, and
 * gguf_init_from_file of libggml-base.so, $TFS_LLAMA_LIB: both installed by scripts/setup.sh,
 * SKIP without them), mixed_flat.gguf against its expected JSON and float32 files, every case
 * of gguf/bad/RESULTS.json, and truncated / mutated headers that must fail cleanly.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tensorfs.h"

#define GGUF_DIR TFS_TESTDATA "/gguf"

/* The vocab files compared (models/ggml-vocab-NAME.gguf of the clone): SPM, BPE and WPM
 * tokenizers, arrays of 30K-100K strings, no tensors */
static const char *const vocab_names[] = {
	"baichuan", "bert-bge", "deepseek-llm", "falcon", "gpt-2", "gpt-neox", "llama-spm", "mpt",
};
#define N_VOCAB (sizeof(vocab_names) / sizeof(vocab_names[0]))

/* The path of vocab file i, or NULL (and *why) when $TFS_VOCAB_DIR does not have it. */
static const char *vocab_path(size_t i, const char **why)
{
	static char path[1024], reason[1200];
	const char *dir = getenv("TFS_VOCAB_DIR");
	if (!dir || !*dir) {
		*why = "TFS_VOCAB_DIR is not set (meson test sets it to build/llama.cpp/models)";
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", dir, vocab_names[i]);
	if (access(path, R_OK) != 0) {
		snprintf(reason, sizeof(reason), "%s: %s (bash scripts/setup.sh clones the reference "
			 "llama.cpp)", path, strerror(errno));
		*why = reason;
		return NULL;
	}
	return path;
}

/* ggml's GGUF reader (gguf.h of the llama.cpp the npm libraries were built from) */
struct gguf_init_params {
	bool no_alloc;
	void **ctx;
};
static struct {
	void *lib;
	void *(*init)(const char *, struct gguf_init_params);
	void (*free)(void *);
	uint32_t (*version)(const void *);
	size_t (*alignment)(const void *), (*data_offset)(const void *);
	int64_t (*n_kv)(const void *), (*n_tensors)(const void *);
	const char *(*key)(const void *, int64_t), *(*val_str)(const void *, int64_t);
	int (*kv_type)(const void *, int64_t), (*arr_type)(const void *, int64_t);
	size_t (*arr_n)(const void *, int64_t);
	const void *(*arr_data)(const void *, int64_t), *(*val_data)(const void *, int64_t);
	const char *(*arr_str)(const void *, int64_t, size_t);
	char why[1200];
} gg;

static bool load_ggml(void)
{
	static const struct { void *slot; const char *name; } syms[] = {
		{ &gg.init, "gguf_init_from_file" }, { &gg.free, "gguf_free" },
		{ &gg.version, "gguf_get_version" }, { &gg.alignment, "gguf_get_alignment" },
		{ &gg.data_offset, "gguf_get_data_offset" }, { &gg.n_kv, "gguf_get_n_kv" },
		{ &gg.n_tensors, "gguf_get_n_tensors" }, { &gg.key, "gguf_get_key" },
		{ &gg.val_str, "gguf_get_val_str" }, { &gg.kv_type, "gguf_get_kv_type" },
		{ &gg.arr_type, "gguf_get_arr_type" }, { &gg.arr_n, "gguf_get_arr_n" },
		{ &gg.arr_data, "gguf_get_arr_data" }, { &gg.val_data, "gguf_get_val_data" },
		{ &gg.arr_str, "gguf_get_arr_str" },
	};
	const char *dir = getenv("TFS_LLAMA_LIB");
	char path[1024];
	if (gg.lib)
		return true;
	snprintf(path, sizeof(path), "%s/libggml-base.so", dir ? dir : "(TFS_LLAMA_LIB unset)");
	gg.lib = dir ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!gg.lib) {
		snprintf(gg.why, sizeof(gg.why), "%s not loadable (bash scripts/setup.sh installs "
			 "it): %s", path, dir ? dlerror() : "TFS_LLAMA_LIB is not set");
		return false;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(gg.lib, syms[i].name);
		cr_assert(f, "%s lacks %s", path, syms[i].name);
		memcpy(syms[i].slot, &f, sizeof(f));
	}
	return true;
}

/* "u32" / "UINT32" / "str" / "STRING" ... -> GGUF type id */
static int type_id(const char *s)
{
	static const char *const names[][3] = {
		{ "u8", "uint8" }, { "i8", "int8" }, { "u16", "uint16" }, { "i16", "int16" },
		{ "u32", "uint32" }, { "i32", "int32" }, { "f32", "float32" }, { "bool", "bool" },
		{ "str", "string" }, { "arr", "array" }, { "u64", "uint64" }, { "i64", "int64" },
		{ "f64", "float64" },
	};
	char low[32];
	size_t i;
	for (i = 0; s[i] && i < sizeof(low) - 1; i++)
		low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	low[i] = '\0';
	for (int t = 0; t < 13; t++)
		if (!strcmp(low, names[t][0]) || !strcmp(low, names[t][1]))
			return t;
	return -1;
}

/* An integer of an expected file, loaded with or without JSON_DECODE_INT_AS_REAL. */
static int64_t jint(json_t *v)
{
	return json_is_integer(v) ? json_integer_value(v) : (int64_t)json_number_value(v);
}

static const size_t scalar_size[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

/* Compares the scalar of `type` at p with the expected JSON value. */
static void check_scalar(const char *key, int type, const uint8_t *p, json_t *v)
{
	int64_t i = 0;
	uint64_t u = 0;
	switch (type) {
	case 0: u = p[0]; break;
	case 1: i = (int8_t)p[0]; break;
	case 2: { uint16_t x; memcpy(&x, p, 2); u = x; break; }
	case 3: { int16_t x; memcpy(&x, p, 2); i = x; break; }
	case 4: { uint32_t x; memcpy(&x, p, 4); u = x; break; }
	case 5: { int32_t x; memcpy(&x, p, 4); i = x; break; }
	case 10: memcpy(&u, p, 8); break;
	case 11: memcpy(&i, p, 8); break;
	case 7:
		cr_assert(json_is_boolean(v), "%s: expected a bool", key);
		cr_assert_eq(p[0] != 0, json_is_true(v), "%s: bool differs", key);
		return;
	case 6:
	case 12: {
		double got, want;
		if (type == 6) {
			float f;
			memcpy(&f, p, 4);
			got = f;
		} else {
			memcpy(&got, p, 8);
		}
		if (json_is_string(v)) { /* "inf", "-inf", "nan" */
			const char *s = json_string_value(v);
			want = !strcmp(s, "nan") ? NAN : (s[0] == '-' ? -INFINITY : INFINITY);
			cr_assert(isnan(want) ? isnan(got) : got == want, "%s: %g != %s", key, got, s);
			return;
		}
		want = json_number_value(v);
		if (type == 6)
			cr_assert_eq((float)got, (float)want, "%s: %.9g != %.9g", key, got, want);
		else
			cr_assert_eq(got, want, "%s: %.17g != %.17g", key, got, want);
		if (want == 0) /* -0.0 keeps its sign */
			cr_assert_eq(signbit(got), signbit(want), "%s: sign of zero", key);
		return;
	}
	}
	/* jansson holds integers as int64, so expected files with u64 max are loaded with
	 * JSON_DECODE_INT_AS_REAL: every value there is exact as a double */
	bool is_unsigned = type == 0 || type == 2 || type == 4 || type == 10;
	cr_assert(json_is_number(v), "%s: expected a number", key);
	if (json_is_integer(v) && is_unsigned)
		cr_assert_eq(u, (uint64_t)json_integer_value(v), "%s: %llu", key, (unsigned long long)u);
	else if (json_is_integer(v))
		cr_assert_eq(i, json_integer_value(v), "%s: %lld", key, (long long)i);
	else if (is_unsigned)
		cr_assert_eq((double)u, json_real_value(v), "%s: %llu", key, (unsigned long long)u);
	else
		cr_assert_eq((double)i, json_real_value(v), "%s: %lld", key, (long long)i);
}

/* Walks one value (payload at *p), comparing it with v (NULL: skip). */
static void check_value(const char *key, int type, const uint8_t **p, const uint8_t *end,
			json_t *v)
{
	if (type == 8) {
		uint64_t n;
		cr_assert(end - *p >= 8, "%s: short", key);
		memcpy(&n, *p, 8);
		cr_assert((uint64_t)(end - *p - 8) >= n, "%s: short string", key);
		if (v) {
			cr_assert(json_is_string(v), "%s: expected a string", key);
			cr_assert_eq(n, json_string_length(v), "%s: string length", key);
			cr_assert(!memcmp(*p + 8, json_string_value(v), n), "%s: string bytes", key);
		}
		*p += 8 + n;
		return;
	}
	if (type == 9) {
		uint32_t et;
		uint64_t n;
		memcpy(&et, *p, 4);
		memcpy(&n, *p + 4, 8);
		*p += 12;
		size_t shown = v ? json_array_size(v) : 0;
		for (uint64_t k = 0; k < n; k++)
			check_value(key, (int)et, p, end, k < shown ? json_array_get(v, k) : NULL);
		return;
	}
	cr_assert((size_t)(end - *p) >= scalar_size[type], "%s: short", key);
	if (v)
		check_scalar(key, type, *p, v);
	*p += scalar_size[type];
}

/* Every key of json kv[] must be in m with that type and value. */
static void check_kvs(const tfs_model *m, json_t *kvs)
{
	size_t i;
	json_t *e;
	size_t live = 0;
	for (size_t k = 0; k < tfs_model_n_kv(m); k++)
		live += !tfs_model_kv(m, k)->deleted;
	cr_assert_eq(live, json_array_size(kvs), "key count");
	json_array_foreach(kvs, i, e) {
		const char *key = json_string_value(json_object_get(e, "key"));
		long ki = tfs_model_find_kv(m, key);
		cr_assert(ki >= 0, "key %s missing", key);
		const tfs_kv *kv = tfs_model_kv(m, (size_t)ki);
		int type = type_id(json_string_value(json_object_get(e, "type")));
		cr_assert_eq((int)kv->type, type, "%s: type %u, expected %d", key, kv->type, type);
		cr_assert_eq(tfs_value_check(kv->type, kv->data, kv->len, NULL), 0, "%s: payload", key);
		const uint8_t *p = kv->data, *end = kv->data + kv->len;
		if (type == 9) {
			uint32_t et;
			uint64_t n;
			memcpy(&et, p, 4);
			memcpy(&n, p + 4, 8);
			cr_assert_eq((int)et, type_id(json_string_value(json_object_get(e, "elem_type"))),
				     "%s: element type", key);
			cr_assert_eq(n, (uint64_t)jint(json_object_get(e, "n")), "%s: count", key);
		}
		check_value(key, type, &p, end, json_object_get(e, "value"));
		cr_assert_eq(p, end, "%s: payload length", key);
	}
}

/* One string of tensorfs's payload at *p against ggml's C string g (ggml hands strings out
 * as C strings: one with a NUL byte is cut there, and matches up to it). */
static void check_str(const char *key, const uint8_t **p, const uint8_t *end, const char *g)
{
	uint64_t n;
	cr_assert(g && end - *p >= 8, "%s: short", key);
	memcpy(&n, *p, 8);
	cr_assert((uint64_t)(end - *p - 8) >= n, "%s: short string", key);
	size_t gl = strlen(g);
	cr_assert(gl == n || (gl < n && (*p)[8 + gl] == 0), "%s: string length %llu, ggml %zu",
		  key, (unsigned long long)n, gl);
	cr_assert(!memcmp(*p + 8, g, gl), "%s: string bytes", key);
	*p += 8 + n;
}

/* Every key of m, in order, against ggml's context c: name, type, and value byte for byte. */
static void check_against_ggml(const char *path, const tfs_model *m, const void *c)
{
	cr_assert_eq(tfs_model_n_kv(m), (size_t)gg.n_kv(c), "%s: key count", path);
	cr_assert_eq(tfs_model_n_tensors(m), (size_t)gg.n_tensors(c), "%s: tensor count", path);
	for (int64_t i = 0; i < gg.n_kv(c); i++) {
		const tfs_kv *kv = tfs_model_kv(m, (size_t)i);
		const char *key = gg.key(c, i);
		const uint8_t *p = kv->data, *end = kv->data + kv->len;
		int t = gg.kv_type(c, i);
		cr_assert_str_eq(kv->name, key, "%s: key %lld", path, (long long)i);
		cr_assert_eq((int)kv->type, t, "%s: type %u, ggml %d", key, kv->type, t);
		cr_assert_eq(tfs_value_check(kv->type, kv->data, kv->len, NULL), 0, "%s: payload", key);
		if (t == 8) {
			check_str(key, &p, end, gg.val_str(c, i));
		} else if (t == 9) {
			uint32_t et;
			uint64_t n;
			memcpy(&et, p, 4);
			memcpy(&n, p + 4, 8);
			p += 12;
			cr_assert_eq((int)et, gg.arr_type(c, i), "%s: element type", key);
			cr_assert_eq(n, (uint64_t)gg.arr_n(c, i), "%s: count", key);
			if (et == 8) {
				for (uint64_t k = 0; k < n; k++)
					check_str(key, &p, end, gg.arr_str(c, i, (size_t)k));
			} else {
				cr_assert(et < 13 && scalar_size[et], "%s: element type %u", key, et);
				size_t len = (size_t)n * scalar_size[et];
				cr_assert((size_t)(end - p) >= len, "%s: short", key);
				cr_assert(!len || !memcmp(p, gg.arr_data(c, i), len), "%s: values", key);
				p += len;
			}
		} else {
			cr_assert(t < 13 && scalar_size[t] && (size_t)(end - p) >= scalar_size[t],
				  "%s: type %d", key, t);
			cr_assert(!memcmp(p, gg.val_data(c, i), scalar_size[t]), "%s: value", key);
			p += scalar_size[t];
		}
		cr_assert_eq(p, end, "%s: payload length", key);
	}
}

Test(gguf, vocab_files_match_ggml)
{
	const char *why = NULL;
	if (!vocab_path(0, &why))
		cr_skip_test("the llama.cpp vocab files: %s", why);
	if (!load_ggml())
		cr_skip_test("ggml's reader: %s", gg.why);
	for (size_t i = 0; i < N_VOCAB; i++) {
		const char *path = vocab_path(i, &why);
		cr_assert(path, "%s", why);
		void *c = gg.init(path, (struct gguf_init_params){ .no_alloc = true, .ctx = NULL });
		cr_assert(c, "ggml cannot read %s", path);
		tfs_model *m;
		tfs_error err;
		cr_assert_eq(tfs_model_open(&m, path, NULL, &err), 0, "%s: %s", path, err.msg);
		check_against_ggml(path, m, c);
		/* every value formats (the 100K-string arrays included) */
		for (size_t k = 0; k < tfs_model_n_kv(m); k++) {
			tfs_buf b = { 0 };
			const tfs_kv *kv = tfs_model_kv(m, k);
			cr_assert_eq(tfs_value_format(&b, kv->type, kv->data, kv->len, &err), 0, "%s", kv->name);
			tfs_buf_free(&b);
		}
		tfs_model_free(m);
		gg.free(c);
	}
}

Test(gguf, mixed_flat_matches_expected)
{
	json_error_t je;
	json_t *exp = json_load_file(GGUF_DIR "/mixed_flat.expected.json",
				     JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
	cr_assert(exp, "%s", je.text);
	tfs_model *m;
	tfs_error err;
	cr_assert_eq(tfs_model_open(&m, GGUF_DIR "/mixed_flat.gguf", NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_format(m), TFS_FMT_GGUF);
	check_kvs(m, json_object_get(exp, "kv"));

	size_t i;
	json_t *e;
	json_t *ts = json_object_get(exp, "tensors");
	cr_assert_eq(tfs_model_n_tensors(m), json_array_size(ts));
	json_array_foreach(ts, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		long ti = tfs_model_find_tensor(m, name);
		cr_assert(ti >= 0, "tensor %s missing", name);
		const tfs_tensor *t = tfs_model_tensor(m, (size_t)ti);
		cr_assert_eq(t->dtype, jint(json_object_get(e, "ggml_type_id")), "%s", name);
		json_t *ne = json_object_get(e, "ne");
		/* trailing 1s may or may not be written: compare the element layout */
		for (size_t k = 0; k < json_array_size(ne); k++)
			cr_assert_eq(k < t->n_dims ? t->ne[k] : 1, jint(json_array_get(ne, k)),
				     "%s: ne[%zu]", name, k);
		cr_assert_eq(t->offset, (uint64_t)jint(json_object_get(e, "absolute_offset")), "%s", name);
		cr_assert_eq(t->nbytes, (uint64_t)jint(json_object_get(e, "nbytes")), "%s", name);

		char path[512];
		snprintf(path, sizeof(path), GGUF_DIR "/%s",
			 json_string_value(json_object_get(e, "expected_f32")));
		void *want;
		size_t wlen;
		want = test_slurp(path, &wlen);
		uint64_t nf = tfs_tensor_f32_count(m, (size_t)ti, NULL);
		cr_assert_eq(nf * 4, wlen, "%s: f32 size", name);
		float *got = malloc(wlen);
		cr_assert_eq(tfs_tensor_read_f32(m, (size_t)ti, 0, nf, got, &err), 0, "%s", err.msg);
		cr_assert(!memcmp(got, want, wlen), "%s: f32 values differ", name);
		/* an unaligned slice equals the same slice of the whole */
		if (nf > 7) {
			float part[5];
			cr_assert_eq(tfs_tensor_read_f32(m, (size_t)ti, nf - 6, 5, part, &err), 0);
			cr_assert(!memcmp(part, got + nf - 6, sizeof(part)), "%s: slice", name);
		}
		free(got);
		free(want);
	}
	tfs_model_free(m);
	json_decref(exp);
}

static bool any_tensor_unreadable(const tfs_model *m)
{
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		void *buf = malloc(t->nbytes ? t->nbytes : 1);
		tfs_error err;
		int64_t r = tfs_tensor_read_raw(m, i, 0, t->nbytes, buf, &err);
		free(buf);
		if (r != (int64_t)t->nbytes)
			return true;
		uint64_t nf = tfs_tensor_f32_count(m, i, NULL);
		if (nf) {
			float *f = malloc(nf * 4);
			int rc = tfs_tensor_read_f32(m, i, 0, nf, f, &err);
			free(f);
			if (rc)
				return true;
		}
	}
	return false;
}

Test(gguf, bad_cases_get_their_verdict)
{
	json_error_t je;
	json_t *res = json_load_file(GGUF_DIR "/bad/RESULTS.json", 0, &je);
	cr_assert(res, "%s", je.text);
	size_t i;
	json_t *c;
	int n = 0;
	json_array_foreach(res, i, c) {
		const char *name = json_string_value(json_object_get(c, "case"));
		const char *verdict = json_string_value(json_object_get(c, "tensorfs"));
		char path[512];
		snprintf(path, sizeof(path), GGUF_DIR "/bad/%s.gguf", name);
		tfs_model *m = NULL;
		tfs_error err;
		tfs_error_clear(&err);
		int rc = tfs_model_open(&m, path, NULL, &err);
		if (!strcmp(verdict, "accept")) {
			cr_assert_eq(rc, 0, "%s must be accepted: %s", name, err.msg);
			cr_assert(!any_tensor_unreadable(m), "%s: a tensor does not read", name);
			json_t *meta = json_object_get(c, "ggml_meta");
			if (json_is_true(json_object_get(meta, "ok")))
				cr_assert_eq(tfs_model_n_tensors(m),
					     (size_t)jint(json_object_get(meta, "n_tensors")), "%s", name);
		} else if (!strcmp(verdict, "reject")) {
			cr_assert_neq(rc, 0, "%s must be rejected", name);
			cr_assert_eq(rc, TFS_E_FORMAT, "%s: code %d (%s)", name, rc, err.msg);
			cr_assert(strstr(err.msg, path), "%s: the message must name the file: %s", name, err.msg);
			cr_assert_null(m);
		} else {
			cr_assert(rc == 0 || rc == TFS_E_FORMAT, "%s: %d", name, rc);
			if (rc == 0)
				cr_assert(!any_tensor_unreadable(m), "%s accepted but unreadable", name);
		}
		tfs_model_free(m);
		n++;
	}
	cr_assert(n >= 26, "only %d cases", n);
	json_decref(res);
}

/* Writes len bytes to a fresh temp file; returns its path (static buffer). */
static const char *temp_with(const void *data, size_t len)
{
	static char path[64];
	strcpy(path, "/tmp/tfs-gguf-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
	return path;
}

/* Every truncation of the header fails with a format error naming the file. */
Test(gguf, every_truncation_fails_cleanly)
{
	void *data;
	size_t len;
	data = test_slurp_exact(GGUF_DIR "/mixed_flat.gguf", &len);
	for (size_t cut = 0; cut < 2880 + 64; cut += 1) {
		const char *p = temp_with(data, cut);
		tfs_model *m = NULL;
		tfs_error err;
		int rc = tfs_model_open(&m, p, NULL, &err);
		cr_assert_eq(rc, TFS_E_FORMAT, "cut at %zu: rc %d", cut, rc);
		cr_assert(strstr(err.msg, p), "cut at %zu: %s", cut, err.msg);
		unlink(p);
	}
	free(data);
}

/* Random byte flips in the header: open succeeds (then every read works) or fails
 * with TFS_E_FORMAT; never a crash or an out-of-bounds read. */
Test(gguf, mutated_headers_never_crash)
{
	void *data;
	size_t len;
	data = test_slurp_exact(GGUF_DIR "/mixed_flat.gguf", &len);
	uint8_t *buf = malloc(len);
	uint64_t seed = 12345;
	int accepted = 0;
	for (int iter = 0; iter < 1500; iter++) {
		memcpy(buf, data, len);
		for (int k = 0; k < 1 + iter % 4; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			size_t at = (size_t)(seed >> 33) % 2880;
			buf[at] = (uint8_t)(seed >> 17);
		}
		const char *p = temp_with(buf, len);
		tfs_model *m = NULL;
		tfs_error err;
		int rc = tfs_model_open(&m, p, NULL, &err);
		cr_assert(rc == 0 || rc == TFS_E_FORMAT, "iteration %d: rc %d: %s", iter, rc, err.msg);
		if (rc == 0) {
			accepted++;
			cr_assert(!any_tensor_unreadable(m), "iteration %d", iter);
			for (size_t i = 0; i < tfs_model_n_kv(m); i++) {
				tfs_buf b = { 0 };
				const tfs_kv *kv = tfs_model_kv(m, i);
				cr_assert_eq(tfs_value_format(&b, kv->type, kv->data, kv->len, &err), 0);
				tfs_buf_free(&b);
			}
			tfs_model_free(m);
		}
		unlink(p);
	}
	cr_assert(accepted > 0 && accepted < 1500, "accepted %d of 1500", accepted);
	free(buf);
	free(data);
}

/* Names and values round-trip through the text form and the name encoding. */
Test(gguf, value_text_round_trips)
{
	tfs_model *m;
	tfs_error err;
	cr_assert_eq(tfs_model_open(&m, GGUF_DIR "/mixed_flat.gguf", NULL, &err), 0);
	for (size_t i = 0; i < tfs_model_n_kv(m); i++) {
		const tfs_kv *kv = tfs_model_kv(m, i);
		tfs_buf text = { 0 }, tn = { 0 };
		cr_assert_eq(tfs_value_format(&text, kv->type, kv->data, kv->len, &err), 0);
		cr_assert_eq(tfs_value_type_name(&tn, kv->type, kv->data, kv->len), 0);
		uint8_t *back;
		uint64_t blen;
		uint32_t type;
		int rc = tfs_value_parse(&back, &blen, &type, tn.data, text.data ? text.data : "", text.len, &err);
		cr_assert_eq(rc, 0, "%s (%s) '%s': %s", kv->name, tn.data, text.data, err.msg);
		cr_assert_eq(type, kv->type, "%s", kv->name);
		cr_assert_eq(blen, kv->len, "%s: %llu vs %llu", kv->name, (unsigned long long)blen,
			     (unsigned long long)kv->len);
		cr_assert(!memcmp(back, kv->data, blen), "%s: payload differs after a round trip", kv->name);
		free(back);
		tfs_buf_free(&text);
		tfs_buf_free(&tn);
	}
	tfs_model_free(m);

	/* wrong values are refused with TFS_E_INVALID */
	static const struct { const char *type, *text; } bad[] = {
		{ "uint8", "256" }, { "int8", "-129" }, { "uint32", "-1" }, { "uint32", "7x" },
		{ "bool", "yes" }, { "float32", "pi" }, { "array[int32]", "[1, 2" },
		{ "array[int8]", "[1, 300]" }, { "array[string]", "[1]" }, { "nosuch", "1" },
		{ "uint64", "" }, { "array[uint64]", "[18446744073709551616]" },
		{ "array[float32]", "[Infinityx]" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *d;
		uint64_t l;
		uint32_t t;
		cr_assert_eq(tfs_value_parse(&d, &l, &t, bad[i].type, bad[i].text, strlen(bad[i].text), &err),
			     TFS_E_INVALID, "%s '%s' must be refused", bad[i].type, bad[i].text);
	}

	/* what JSON itself cannot hold still round-trips in arrays */
	static const struct { const char *type, *text; } odd[] = {
		{ "array[uint64]", "[18446744073709551615, 1]" },
		{ "array[float32]", "[Infinity, -Infinity, NaN, 1.5]" },
		{ "array[float64]", "[5e-324, -Infinity]" },
	};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		uint8_t *d;
		uint64_t l;
		uint32_t t;
		cr_assert_eq(tfs_value_parse(&d, &l, &t, odd[i].type, odd[i].text, strlen(odd[i].text), &err),
			     0, "%s '%s': %s", odd[i].type, odd[i].text, err.msg);
		tfs_buf text = { 0 };
		cr_assert_eq(tfs_value_format(&text, t, d, l, &err), 0);
		cr_assert_str_eq(text.data, odd[i].text);
		tfs_buf_free(&text);
		free(d);
	}

	/* file names */
	static const char *const names[] = { "a/b", "100%", ".", "..", "plain.name" };
	static const char *const files[] = { "a%2Fb", "100%25", "%2E", "%2E%2E", "plain.name" };
	for (size_t i = 0; i < 5; i++) {
		tfs_buf e = { 0 }, d = { 0 };
		cr_assert_eq(tfs_name_encode(&e, names[i]), 0);
		cr_assert_str_eq(e.data, files[i]);
		cr_assert_eq(tfs_name_decode(&d, e.data), 0);
		cr_assert_str_eq(d.data, names[i]);
		tfs_buf_free(&e);
		tfs_buf_free(&d);
	}
	char longname[400];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	tfs_buf e = { 0 };
	cr_assert_eq(tfs_name_encode(&e, longname), 0);
	cr_assert_leq(e.len, 255);
	cr_assert(strstr(e.data, "%~"), "a shortened name carries its hash");
	tfs_buf_free(&e);
}

/* An array whose text would be over the cap is refused, not formatted into gigabytes. */
Test(gguf, huge_array_text_is_capped)
{
	const uint64_t n = 100u << 20; /* 100 Mi uint8: "0, " x n is 300 MiB of text */
	uint8_t *payload = calloc(1, 12 + n);
	cr_assert(payload);
	uint32_t et = 0; /* uint8 */
	memcpy(payload, &et, 4);
	memcpy(payload + 4, &n, 8);
	tfs_buf b = { 0 };
	tfs_error err;
	cr_assert_eq(tfs_value_format(&b, 9, payload, 12 + n, &err), TFS_E_UNSUPPORTED);
	cr_assert(strstr(err.msg, "too large"), "%s", err.msg);
	tfs_buf_free(&b);
	free(payload);
}

/* index.json's data_offset of the file at path. */
static int64_t index_data_offset(const char *path)
{
	tfs_model *m;
	tfs_error err;
	tfs_buf b = { 0 };
	cr_assert_eq(tfs_model_open(&m, path, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_index_json(&b, m, &err), 0, "%s", err.msg);
	json_error_t je;
	json_t *ix = json_loads(b.data, 0, &je);
	cr_assert(ix, "%s", je.text);
	int64_t off = jint(json_object_get(ix, "data_offset"));
	json_decref(ix);
	tfs_buf_free(&b);
	tfs_model_free(m);
	return off;
}

/*
 * The data section starts at the header's end aligned up, with or without tensors: what
 * gguf-py reports for every accepted case of RESULTS.json (ok_no_tensors_unpadded: 96,
 * in a file of 94 bytes), and the aligned ggml offset for the vocab files.
 */
Test(gguf, data_offset_is_aligned_without_tensors)
{
	json_error_t je;
	json_t *res = json_load_file(GGUF_DIR "/bad/RESULTS.json", 0, &je);
	cr_assert(res, "%s", je.text);
	size_t i;
	json_t *c;
	int n = 0, tensorless = 0;
	json_array_foreach(res, i, c) {
		json_t *py = json_object_get(c, "gguf_py");
		const char *verdict = json_string_value(json_object_get(c, "tensorfs"));
		if (strcmp(verdict, "accept") || !json_is_true(json_object_get(py, "ok")) ||
		    !json_object_get(py, "data_offset"))
			continue;
		char path[512];
		const char *name = json_string_value(json_object_get(c, "case"));
		snprintf(path, sizeof(path), GGUF_DIR "/bad/%s.gguf", name);
		cr_assert_eq(index_data_offset(path), jint(json_object_get(py, "data_offset")),
			     "%s: data_offset", name);
		tensorless += jint(json_object_get(py, "n_tensors")) == 0;
		n++;
	}
	json_decref(res);
	cr_assert(n >= 5 && tensorless >= 1, "%d cases, %d without tensors", n, tensorless);

	/* and the vocab files: ggml's data offset, aligned (it reports the unpadded header size
	 * of a tensor-less file) */
	const char *why = NULL;
	if (!vocab_path(0, &why) || !load_ggml())
		return; /* vocab_files_match_ggml SKIPs, saying why */
	for (size_t v = 0; v < N_VOCAB; v++) {
		const char *path = vocab_path(v, &why);
		cr_assert(path, "%s", why);
		void *gc = gg.init(path, (struct gguf_init_params){ .no_alloc = true, .ctx = NULL });
		cr_assert(gc, "ggml cannot read %s", path);
		int64_t a = (int64_t)gg.alignment(gc), raw = (int64_t)gg.data_offset(gc);
		gg.free(gc);
		cr_assert_eq(index_data_offset(path), (raw + a - 1) / a * a, "%s", path);
	}
}
