/*
 * test_ollama.c - the Ollama store reader against tests/data/ollama (EXPECTED.json):
 * manifests by path and by name, layers, the f32 view of MLX-quantized tensors, and
 * corrupted stores.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "formats/layout.h"
#include "tensorfs.h"

#define OL_DIR TFS_TESTDATA "/ollama"
#define OL_MODELS OL_DIR "/models"

static const char *const manifests[] = {
	"oracle-gguf:latest", "oracle-st:int4", "oracle-st:int8", "oracle-st:nvfp4",
	"oracle-st:mxfp8",
};
#define N_MANIFESTS (sizeof(manifests) / sizeof(manifests[0]))

static json_t *load_expected(void)
{
	json_error_t je;
	json_t *r = json_load_file(OL_DIR "/EXPECTED.json", 0, &je);
	cr_assert(r, "EXPECTED.json: %s", je.text);
	return r;
}

static json_t *find_manifest(json_t *exp, const char *name)
{
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(exp, "manifests"), i, m) {
		if (!strcmp(json_string_value(json_object_get(m, "name")), name))
			return m;
	}
	return NULL;
}

/* The f32 view of tensor name equals the file, bit for bit. */
static void check_f32(const tfs_model *m, const char *name, const char *expected_path)
{
	long i = tfs_model_find_tensor(m, name);
	cr_assert_geq(i, 0, "tensor %s missing", name);
	size_t n;
	float *want = test_slurp(expected_path, &n);
	const char *why = NULL;
	uint64_t count = tfs_tensor_f32_count(m, (size_t)i, &why);
	cr_assert_eq(count * 4, n, "%s: f32 view of %llu values, expected %zu (%s)", name,
		     (unsigned long long)count, n / 4, why ? why : "");
	float *got = malloc(n ? n : 4);
	tfs_error err = { 0 };
	cr_assert_eq(tfs_tensor_read_f32(m, (size_t)i, 0, count, got, &err), 0, "%s", err.msg);
	cr_expect(!memcmp(got, want, n), "%s: f32 view differs from %s", name, expected_path);
	/* a read starting mid-row, across rows */
	if (count > 70) {
		cr_assert_eq(tfs_tensor_read_f32(m, (size_t)i, 37, count - 40, got, &err), 0, "%s",
			     err.msg);
		cr_expect(!memcmp(got, want + 37, (count - 40) * 4), "%s: partial read", name);
	}
	free(got);
	free(want);
}

static void check_model(const tfs_model *m, json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	cr_expect_eq(tfs_model_format(m), TFS_FMT_OLLAMA);
	cr_expect_geq(tfs_model_find_extra(m, "manifest.json"), 0, "%s", name);
	long c = tfs_model_find_extra(m, "config.json");
	cr_assert_geq(c, 0, "%s: config.json", name);
	json_t *cfg = json_object_get(e, "config");
	cr_expect_eq(tfs_model_extra(m, (size_t)c)->size,
		     (uint64_t)json_integer_value(json_object_get(cfg, "size")));

	/* every layer that is not the model itself is a file with its media type and size */
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(e, "layers"), i, l) {
		const char *mt = json_string_value(json_object_get(l, "mediaType"));
		uint64_t size = (uint64_t)json_integer_value(json_object_get(l, "size"));
		const char *lname = json_string_value(json_object_get(l, "name"));
		if (!strcmp(mt, "application/vnd.ollama.image.model") ||
		    !strcmp(mt, "application/vnd.ollama.image.tensor"))
			continue;
		const char *kind = strrchr(mt, '.') + 1;
		char fname[256];
		if (!strcmp(kind, "json"))
			snprintf(fname, sizeof(fname), "%s%s",
				 !strcmp(lname, "config.json") ? TFS_OLLAMA_JSON_PREFIX : "",
				 lname);
		else
			snprintf(fname, sizeof(fname), "%s", kind);
		long x = tfs_model_find_extra(m, fname);
		cr_assert_geq(x, 0, "%s: layer file %s missing", name, fname);
		const tfs_extra *ex = tfs_model_extra(m, (size_t)x);
		cr_expect_str_eq(ex->media_type, mt);
		cr_expect_eq(ex->size, size, "%s: %s size", name, fname);
		if (!strcmp(kind, "json")) {
			char *back = tfs_ollama_json_name(fname);
			cr_expect_str_eq(back, lname);
			free(back);
		}
	}

	json_t *tb = json_object_get(e, "tensor_blobs");
	const char *tn;
	json_t *t;
	json_object_foreach(tb, tn, t) {
		char path[4096];
		snprintf(path, sizeof(path), OL_DIR "/%s",
			 json_string_value(json_object_get(t, "expected_f32")));
		json_t *parts = json_object_get(t, "tensors");
		const char *pn;
		json_t *pv;
		json_object_foreach(parts, pn, pv) {
			long j = tfs_model_find_tensor(m, pn);
			cr_assert_geq(j, 0, "%s: tensor %s missing", name, pn);
			const tfs_tensor *mt = tfs_model_tensor(m, (size_t)j);
			cr_expect_str_eq(tfs_dtype(mt->dtype)->name,
					 json_string_value(json_object_get(pv, "dtype")));
			json_t *shape = json_object_get(pv, "shape");
			cr_expect_eq(mt->n_dims, json_array_size(shape));
			for (size_t d = 0; d < json_array_size(shape); d++)
				cr_expect_eq(mt->ne[json_array_size(shape) - 1 - d],
					     json_integer_value(json_array_get(shape, d)));
		}
		const char *mode = json_string_value(json_object_get(t, "mode"));
		long j = tfs_model_find_tensor(m, tn);
		cr_assert_geq(j, 0);
		const tfs_tensor *mt = tfs_model_tensor(m, (size_t)j);
		if (mode) {
			tfs_qmode want = !strcmp(mode, "affine")  ? TFS_QMODE_AFFINE
					 : !strcmp(mode, "nvfp4") ? TFS_QMODE_NVFP4
					 : !strcmp(mode, "mxfp4") ? TFS_QMODE_MXFP4
								  : TFS_QMODE_MXFP8;
			cr_expect_eq(mt->q.mode, want, "%s: %s mode", name, tn);
			cr_expect_eq(mt->q.bits, json_integer_value(json_object_get(t, "bits")));
			cr_expect_eq(mt->q.group, json_integer_value(json_object_get(t, "group_size")));
			cr_expect_geq(mt->q_scale, 0);
			cr_expect_eq(mt->q_bias >= 0, want == TFS_QMODE_AFFINE);
			uint32_t nd;
			int64_t ne[TFS_MAX_DIMS + 1];
			tfs_tensor_f32_shape(m, (size_t)j, &nd, ne);
			json_t *ls = json_object_get(t, "logical_shape");
			cr_expect_eq(nd, json_array_size(ls));
			cr_expect_eq(ne[0], json_integer_value(json_array_get(ls, nd - 1)));
		} else {
			cr_expect_eq(mt->q.mode, TFS_QMODE_NONE);
		}
		check_f32(m, tn, path);
	}

	/* the GGUF model layer: mixed_flat.gguf */
	if (json_object_get(e, "gguf_layer_expected")) {
		json_error_t je;
		json_t *g = json_load_file(TFS_TESTDATA "/gguf/mixed_flat.expected.json",
					   JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
		cr_assert(g, "mixed_flat.expected.json: %s (line %d)", je.text, je.line);
		json_t *ts = json_object_get(g, "tensors");
		cr_expect_eq(tfs_model_n_tensors(m), json_array_size(ts));
		json_array_foreach(ts, i, t) {
			const char *gn = json_string_value(json_object_get(t, "name"));
			cr_expect_geq(tfs_model_find_tensor(m, gn), 0, "%s", gn);
		}
		cr_expect_geq(tfs_model_n_kv(m), 1);
		check_f32(m, "t.f32", TFS_TESTDATA "/gguf/mixed_flat.expected/t.f32.f32");
		json_decref(g);
	}
}

/* Parameters are copied into the test process by value: a name, not a pointer. */
typedef struct {
	char name[64];
} manifest_param;

ParameterizedTestParameters(ollama, manifests)
{
	static manifest_param params[N_MANIFESTS];
	for (size_t i = 0; i < N_MANIFESTS; i++)
		snprintf(params[i].name, sizeof(params[i].name), "%s", manifests[i]);
	return cr_make_param_array(manifest_param, params, N_MANIFESTS);
}

ParameterizedTest(manifest_param *param, ollama, manifests)
{
	const char *const *name = &(const char *){ param->name };
	json_t *exp = load_expected();
	json_t *e = find_manifest(exp, *name);
	cr_assert(e, "%s not in EXPECTED.json", *name);
	char path[4096];
	snprintf(path, sizeof(path), OL_DIR "/%s", json_string_value(json_object_get(e, "path")));

	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&m, path, NULL, &err), 0, "%s: %s", path, err.msg);
	check_model(m, e);
	const tfs_ollama_layout *l = m->priv;
	cr_assert(l && l->model);
	cr_expect(!strncmp(l->model, *name, strlen(l->model)) && (*name)[strlen(l->model)] == ':',
		  "%s: model part %s", *name, l->model);
	tfs_model_free(m);

	/* by reference, with the store given */
	tfs_open_opts o = { .ollama_models = OL_MODELS, .verify = true };
	cr_assert_eq(tfs_model_open(&m, *name, &o, &err), 0, "%s: %s", *name, err.msg);
	check_model(m, e);
	tfs_model_free(m);
	json_decref(exp);
}

Test(ollama, manifests_count)
{
	json_t *exp = load_expected();
	cr_expect_eq(json_array_size(json_object_get(exp, "manifests")), N_MANIFESTS);
	json_decref(exp);
}

Test(ollama, reference_forms)
{
	static const char *const ok[] = {
		"oracle-gguf", "oracle-gguf:latest", "library/oracle-gguf",
		"registry.ollama.ai/library/oracle-gguf:latest",
		"https://registry.ollama.ai/library/oracle-gguf", "ORACLE-GGUF:Latest",
	};
	tfs_open_opts o = { .ollama_models = OL_MODELS };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		tfs_model *m = NULL;
		tfs_error err = { 0 };
		cr_expect_eq(tfs_model_open(&m, ok[i], &o, &err), 0, "%s: %s", ok[i], err.msg);
		tfs_model_free(m);
	}
	static const char *const bad[] = {
		"oracle-gguf:", "-oracle", "lib.rary/oracle-gguf", "a//b", "x:y/z", "m@sha256-00",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tfs_model *m = NULL;
		tfs_error err = { 0 };
		cr_expect_eq(tfs_model_open(&m, bad[i], &o, &err), TFS_E_INVALID, "%s: %s", bad[i],
			     err.msg);
	}
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_expect_eq(tfs_model_open(&m, "no-such-model:7b", &o, &err), TFS_E_NOTFOUND, "%s", err.msg);
	cr_expect(strstr(err.msg, "no such file, and no Ollama model"), "%s", err.msg);
}

Test(ollama, json_names_reversible)
{
	/* layers/ file name -> json layer name (formats.h) */
	static const char *const pairs[][2] = {
		{ "json:config.json", "config.json" }, { "a%2Fb%25c.json", "a/b%c.json" },
		{ "json:json:x", "json:x" },            { "json:template", "template" },
		{ "json:license.3", "license.3" },      { "tokenizer.json", "tokenizer.json" },
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		char *back = tfs_ollama_json_name(pairs[i][0]);
		cr_expect_str_eq(back, pairs[i][1]);
		free(back);
	}
	cr_expect_null(tfs_ollama_json_name("bad%zz"));
}

/* ==== a damaged copy of the store ==== */

static char *copy_store(void)
{
	char *d = strdup("/tmp/tfs-ol-XXXXXX");
	cr_assert(mkdtemp(d));
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s/models'", OL_MODELS, d);
	cr_assert_eq(system(cmd), 0);
	return d;
}

static void rm_rf(const char *d)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	cr_expect_eq(system(cmd), 0);
}

static int open_in(const char *store, const char *ref, tfs_error *err)
{
	char root[4200];
	snprintf(root, sizeof(root), "%s/models", store);
	tfs_open_opts o = { .ollama_models = root };
	tfs_model *m = NULL;
	int rc = tfs_model_open(&m, ref, &o, err);
	tfs_model_free(m);
	return rc;
}

static void flip_byte(const char *store, const char *blob, long at)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/models/blobs/%s", store, blob);
	FILE *f = fopen(p, "r+b");
	cr_assert(f, "%s", p);
	fseek(f, at, SEEK_SET);
	int c = fgetc(f);
	fseek(f, at, SEEK_SET);
	fputc(c ^ 0x01, f);
	fclose(f);
}

#define TEMPLATE_BLOB "sha256-b52d02fdf256212b389da91993a066a005d7540ab33124008908a26fda541a12"
#define NORM_BLOB "sha256-90a7c2da916473054736a3e55bb0900ec9a47399f61cd3937bb5a603b447e92f"

Test(ollama, corrupted_blob)
{
	char *d = copy_store();
	tfs_error err = { 0 };
	flip_byte(d, TEMPLATE_BLOB, 3);
	cr_expect_eq(open_in(d, "oracle-gguf", &err), TFS_E_DIGEST);
	cr_expect(strstr(err.msg, TEMPLATE_BLOB), "%s", err.msg);
	/* a tensor blob, in the data part: weights are hashed only with verify (a mount
	 * reads their headers, not all their bytes) */
	flip_byte(d, NORM_BLOB, 300);
	cr_expect_eq(open_in(d, "oracle-st:int4", &err), 0, "%s", err.msg);
	char root[4200];
	snprintf(root, sizeof(root), "%s/models", d);
	tfs_open_opts vo = { .ollama_models = root, .verify = true };
	tfs_model *m = NULL;
	cr_expect_eq(tfs_model_open(&m, "oracle-st:int4", &vo, &err), TFS_E_DIGEST);
	cr_expect_null(m);
	cr_expect(strstr(err.msg, NORM_BLOB), "%s", err.msg);
	rm_rf(d);
	free(d);
}

Test(ollama, wrong_size_and_missing_blob)
{
	char *d = copy_store();
	tfs_error err = { 0 };
	char p[4200];
	snprintf(p, sizeof(p), "%s/models/blobs/" TEMPLATE_BLOB, d);
	FILE *f = fopen(p, "ab");
	cr_assert(f);
	fputc('x', f);
	fclose(f);
	cr_expect_eq(open_in(d, "oracle-gguf", &err), TFS_E_DIGEST);
	cr_expect(strstr(err.msg, TEMPLATE_BLOB) && strstr(err.msg, "28 bytes"), "%s", err.msg);
	cr_assert_eq(unlink(p), 0);
	cr_expect_eq(open_in(d, "oracle-gguf", &err), TFS_E_NOTFOUND);
	cr_expect(strstr(err.msg, TEMPLATE_BLOB) && strstr(err.msg, "missing"), "%s", err.msg);
	rm_rf(d);
	free(d);
}

static void write_manifest(const char *store, const char *text)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/models/manifests/registry.ollama.ai/library/oracle-gguf/bad",
		 store);
	FILE *f = fopen(p, "wb");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

Test(ollama, malformed_manifest)
{
	char *d = copy_store();
	tfs_error err = { 0 };
	static const struct {
		const char *text, *says;
	} cases[] = {
		{ "{\"schemaVersion\":2,\"layers\":[", "not valid JSON" },
		{ "[1,2]", "no \"schemaVersion\"" },
		{ "{\"schemaVersion\":3,\"layers\":[]}", "schemaVersion 3" },
		{ "{\"schemaVersion\":2}", "no \"layers\" array" },
		{ "{\"schemaVersion\":2,\"layers\":[],\"config\":{\"mediaType\":\"x\","
		  "\"digest\":\"sha256:12\",\"size\":1}}", "digest" },
		{ "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"x\"}],\"config\":{"
		  "\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
		  "\"digest\":\"sha256:cf933c00ecf5266ee15442949d33787899a7d0c21feeab3ee54b0e17982fbac9\","
		  "\"size\":157}}", "layer 0" },
		{ "{\"schemaVersion\":2,\"schemaVersion\":2}", "duplicate" },
		{ "", "empty manifest" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_manifest(d, cases[i].text);
		cr_expect_eq(open_in(d, "oracle-gguf:bad", &err), TFS_E_FORMAT, "case %zu: %s", i,
			     err.msg);
		cr_expect(strstr(err.msg, cases[i].says) && strstr(err.msg, "oracle-gguf/bad"),
			  "case %zu: %s", i, err.msg);
	}
	/* a json layer whose name climbs out */
	write_manifest(d,
		       "{\"schemaVersion\":2,\"config\":{"
		       "\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
		       "\"digest\":\"sha256:cf933c00ecf5266ee15442949d33787899a7d0c21feeab3ee54b0e17982fbac9\","
		       "\"size\":157},\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.json\","
		       "\"digest\":\"sha256:bd241d49b00b69812617c9fe40fe2ea78c5b2b4c48fae5cda41f394993bb2ae4\","
		       "\"size\":79,\"name\":\"../config.json\"}]}");
	cr_expect_eq(open_in(d, "oracle-gguf:bad", &err), TFS_E_FORMAT, "%s", err.msg);
	rm_rf(d);
	free(d);
}

Test(ollama, quantized_companion_shapes_checked)
{
	/* a packed tensor whose scales are too few for its rows is refused at open */
	char *d = copy_store();
	char p[4200];
	const char hdr[] = "{\"__metadata__\":{\"quant_type\":\"int4\",\"group_size\":\"64\"},"
			   "\"w\":{\"dtype\":\"U32\",\"shape\":[2,8],\"data_offsets\":[0,64]},"
			   "\"w.scale\":{\"dtype\":\"BF16\",\"shape\":[1,1],\"data_offsets\":[64,66]},"
			   "\"w.bias\":{\"dtype\":\"BF16\",\"shape\":[1,1],\"data_offsets\":[66,68]}}";
	size_t hl = sizeof(hdr) - 1, total = 8 + hl + 68;
	uint8_t *buf = calloc(1, total);
	uint64_t h = hl;
	memcpy(buf, &h, 8);
	memcpy(buf + 8, hdr, hl);
	/* name the blob by its sha256 */
	snprintf(p, sizeof(p), "%s/blob.tmp", d);
	FILE *f = fopen(p, "wb");
	fwrite(buf, 1, total, f);
	fclose(f);
	free(buf);
	char cmd[8192], hex[65] = { 0 };
	snprintf(cmd, sizeof(cmd), "sha256sum '%s' | cut -c1-64", p);
	FILE *pp = popen(cmd, "r");
	cr_assert(pp && fread(hex, 1, 64, pp) == 64);
	pclose(pp);
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s/models/blobs/sha256-%s'", p, d, hex);
	cr_assert_eq(system(cmd), 0);
	char man[2048];
	snprintf(man, sizeof(man),
		 "{\"schemaVersion\":2,\"config\":{"
		 "\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
		 "\"digest\":\"sha256:cf933c00ecf5266ee15442949d33787899a7d0c21feeab3ee54b0e17982fbac9\","
		 "\"size\":157},\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.tensor\","
		 "\"digest\":\"sha256:%s\",\"size\":%zu,\"name\":\"w\"}]}", hex, total);
	write_manifest(d, man);
	tfs_error err = { 0 };
	cr_expect_eq(open_in(d, "oracle-gguf:bad", &err), TFS_E_FORMAT, "%s", err.msg);
	cr_expect(strstr(err.msg, "'w'") && strstr(err.msg, ".scale"), "%s", err.msg);
	rm_rf(d);
	free(d);
}
