/*
 * test_hf.c - the GGUF view's engine (hf_plan.c): bad input gets one message naming the file
 * and the problem; tensor reads at any offset equal the whole tensor's bytes; the Q/K
 * permutation is llama.cpp's; the header and layout agree.  Models are written here, tiny
 * (byte equality with llama.cpp's converter is tests/hf/compare.py's job).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensorfs.h"
#include "hf_plan.h"
#include "hf_sleef.h"
#include "hf_qwen35_x.h"

/* ==== writing a tiny model ==== */

typedef struct {
	const char *name;
	const char *dtype;     /* "BF16", "F16", "F32", "I32" */
	int64_t shape[2];      /* numpy order; shape[1] 0 for 1-D */
} tspec;

static char dir[] = "/tmp/tfs-test-hf-XXXXXXXX";
static bool made;

static void setup_dir(void)
{
	if (!made) {
		strcpy(dir, "/tmp/tfs-test-hf-XXXXXXXX");
		cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
		made = true;
	}
}

static void rm_dir(void)
{
	char cmd[256];
	if (!made)
		return;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert(system(cmd) == 0);
	made = false;
}

static void write_text(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static size_t dtype_size(const char *dt)
{
	return !strcmp(dt, "F32") || !strcmp(dt, "I32") ? 4 : 2;
}

static uint64_t rng_state;

static uint32_t rng(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

/* A value of dtype dt with no NaN or infinity (random mantissa, modest exponent). */
static void put_value(uint8_t *p, const char *dt)
{
	uint32_t r = rng();
	if (!strcmp(dt, "F32") || !strcmp(dt, "I32")) {
		uint32_t v = (r & 0x807fffffu) | ((uint32_t)(118 + r % 16) << 23);
		memcpy(p, &v, 4);
	} else if (!strcmp(dt, "F16")) {
		uint16_t v = (uint16_t)((r & 0x83ffu) | ((10 + r % 8) << 10));
		memcpy(p, &v, 2);
	} else {
		uint16_t v = (uint16_t)((r & 0x807fu) | ((118 + r % 16) << 7));
		memcpy(p, &v, 2);
	}
}

/* Writes file (a .safetensors) holding the n tensors, their bytes random (seeded). */
static void write_st(const char *file, const tspec *t, size_t n, uint64_t seed)
{
	char path[512];
	tfs_buf h = { 0 };
	uint64_t off = 0;
	rng_state = seed;
	tfs_buf_printf(&h, "{");
	for (size_t i = 0; i < n; i++) {
		uint64_t nel = (uint64_t)t[i].shape[0] * (uint64_t)(t[i].shape[1] ? t[i].shape[1] : 1);
		uint64_t nb = nel * dtype_size(t[i].dtype);
		if (t[i].shape[1])
			tfs_buf_printf(&h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],"
				       "\"data_offsets\":[%llu,%llu]}", i ? "," : "", t[i].name,
				       t[i].dtype, (long long)t[i].shape[0], (long long)t[i].shape[1],
				       (unsigned long long)off, (unsigned long long)(off + nb));
		else
			tfs_buf_printf(&h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],"
				       "\"data_offsets\":[%llu,%llu]}", i ? "," : "", t[i].name,
				       t[i].dtype, (long long)t[i].shape[0], (unsigned long long)off,
				       (unsigned long long)(off + nb));
		off += nb;
	}
	tfs_buf_printf(&h, "}");
	while (h.len % 8)
		tfs_buf_append(&h, " ", 1);
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "wb");
	cr_assert(f);
	uint64_t hl = h.len;
	fwrite(&hl, 8, 1, f);
	fwrite(h.data, 1, h.len, f);
	for (size_t i = 0; i < n; i++) {
		uint64_t nel = (uint64_t)t[i].shape[0] * (uint64_t)(t[i].shape[1] ? t[i].shape[1] : 1);
		size_t es = dtype_size(t[i].dtype);
		uint8_t v[4];
		for (uint64_t k = 0; k < nel; k++) {
			put_value(v, t[i].dtype);
			fwrite(v, 1, es, f);
		}
	}
	fclose(f);
	tfs_buf_free(&h);
}

/* A llama config: hidden 64, 4 heads, 2 KV heads, 2 layers, ff 96, vocab 32; extra JSON members
 * (",\"k\":v") appended; arch the class. */
static void write_config(const char *arch, const char *extra)
{
	char text[2048];
	snprintf(text, sizeof text, "{\"architectures\":[\"%s\"],\"hidden_size\":64,"
		 "\"intermediate_size\":96,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
		 "\"num_hidden_layers\":2,\"max_position_embeddings\":128,\"rms_norm_eps\":1e-05,"
		 "\"rope_theta\":10000.0,\"vocab_size\":32%s}", arch, extra ? extra : "");
	write_text("config.json", text);
}

/* The tensors of that config (dtype dt); drop: a name left out; qk_norm: Qwen3's norms. */
static size_t llama_tensors(tspec *t, const char *dt, const char *drop, bool tied, bool qk_norm)
{
	static char names[64][96];
	size_t n = 0;
#define ADD(nm, d0, d1) do { \
		snprintf(names[n], sizeof names[n], "%s", nm); \
		if (!drop || strcmp(names[n], drop)) \
			t[n] = (tspec){ names[n], d1 ? dt : "F32", { d0, d1 } }, n++; \
	} while (0)
	ADD("model.embed_tokens.weight", 32, 64);
	ADD("model.norm.weight", 64, 0);
	if (!tied)
		ADD("lm_head.weight", 32, 64);
	for (int l = 0; l < 2; l++) {
		char p[64];
		struct { const char *s; int64_t a, b; } w[] = {
			{ "input_layernorm.weight", 64, 0 },
			{ "self_attn.q_proj.weight", 64, 64 }, { "self_attn.k_proj.weight", 32, 64 },
			{ "self_attn.v_proj.weight", 32, 64 }, { "self_attn.o_proj.weight", 64, 64 },
			{ "post_attention_layernorm.weight", 64, 0 },
			{ "mlp.gate_proj.weight", 96, 64 }, { "mlp.up_proj.weight", 96, 64 },
			{ "mlp.down_proj.weight", 64, 96 },
			{ "self_attn.q_norm.weight", 16, 0 }, { "self_attn.k_norm.weight", 16, 0 },
		};
		for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
			if (k >= 9 && !qk_norm)
				continue;
			snprintf(p, sizeof p, "model.layers.%d.%s", l, w[k].s);
			ADD(p, w[k].a, w[k].b);
		}
	}
#undef ADD
	return n;
}

/* Opens the model in dir and its plan (outtype ot, no tokenizer); the plan's error code. */
static int open_plan(tfs_model **st, tfs_hf_plan **p, tfs_hf_outtype ot, tfs_error *err)
{
	tfs_hf_files files;
	tfs_hf_opts o = { .outtype = ot, .no_vocab = true, .dir_name = "test" };
	tfs_hf_files_dir(&files, dir);
	*p = NULL;
	int rc = tfs_model_open(st, dir, NULL, err);
	cr_assert_eq(rc, 0, "tfs_model_open: %s", err->msg);
	return tfs_hf_plan_open(p, &files, *st, &o, err);
}

/* A model whose plan must fail with code and a message containing want (and want2). */
static void expect_fail(int code, const char *want, const char *want2)
{
	tfs_model *st = NULL;
	tfs_hf_plan *p = NULL;
	tfs_error err = { 0 };
	int rc = open_plan(&st, &p, TFS_HF_OUT_AUTO, &err);
	cr_expect_eq(rc, code, "code %d (want %d): %s", rc, code, err.msg);
	cr_expect_null(p);
	cr_expect(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
	if (want2)
		cr_expect(strstr(err.msg, want2), "message '%s' lacks '%s'", err.msg, want2);
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

static void good_model(const char *dt, const char *arch, const char *extra)
{
	tspec t[64];
	size_t n = llama_tensors(t, dt, NULL, false, !strcmp(arch, "Qwen3ForCausalLM"));
	write_config(arch, extra);
	write_st("model.safetensors", t, n, 42);
}

TestSuite(hf, .init = setup_dir, .fini = rm_dir);

/* ==== bad input ==== */

Test(hf, no_config)
{
	tspec t[64];
	size_t n = llama_tensors(t, "BF16", NULL, false, false);
	write_st("model.safetensors", t, n, 1);
	expect_fail(TFS_E_NOTFOUND, "/config.json: no such file", dir);
}

Test(hf, config_not_json)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\": [\"LlamaForCausalLM\"],");
	expect_fail(TFS_E_FORMAT, "/config.json: not JSON", "line 1");
}

Test(hf, config_not_object)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "[1, 2]");
	expect_fail(TFS_E_FORMAT, "config.json: not a JSON object", NULL);
}

Test(hf, no_architectures)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"hidden_size\": 64}");
	expect_fail(TFS_E_FORMAT, "config.json: no \"architectures\"", NULL);
}

Test(hf, unknown_architecture)
{
	good_model("BF16", "GPT2LMHeadModel", NULL);
	char want[128];
	size_t n = 0;
	while (tfs_hf_class_name(n))
		n++;
	cr_assert_geq(n, 30);
	cr_assert_eq(n, tfs_hf_n_classes());
	cr_assert_str_eq(tfs_hf_class_name(0), "LlamaForCausalLM");
	snprintf(want, sizeof want, "(%zu model classes are: tensorfs(1) and docs/hf-view.md list "
		 "them)", n);
	expect_fail(TFS_E_UNSUPPORTED, "architecture GPT2LMHeadModel is not supported for the "
		    "GGUF view", want);
}

Test(hf, missing_hidden_size)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],"
		   "\"num_attention_heads\":4,\"num_hidden_layers\":2,\"vocab_size\":32}");
	expect_fail(TFS_E_FORMAT, "config.json: no \"hidden_size\"", NULL);
}

Test(hf, heads_not_a_multiple)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_config("LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
		   "\"num_attention_heads\":4,\"num_key_value_heads\":3,\"num_hidden_layers\":2,"
		   "\"vocab_size\":32}");
	expect_fail(TFS_E_FORMAT, "num_attention_heads 4 is not a multiple of "
		    "num_key_value_heads 3", NULL);
}

Test(hf, rope_theta_not_a_number)
{
	good_model("BF16", "LlamaForCausalLM", ",\"rope_theta\":\"big\"");
	/* a repeated key: jansson keeps the last */
	expect_fail(TFS_E_FORMAT, "\"rope_theta\" is not a number", NULL);
}

Test(hf, llama_without_vocab_size)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
		   "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"num_hidden_layers\":2,"
		   "\"intermediate_size\":96}");
	expect_fail(TFS_E_FORMAT, "no \"vocab_size\"", NULL);
}

/* Every size config.json must give is named by its own key when it is missing
 * (num_hidden_layers is looked up as n_layers first, as find_hparam does). */
Test(hf, missing_sizes_named)
{
	static const struct { const char *json, *key; } c[] = {
		{ "\"hidden_size\":64,\"num_attention_heads\":4,\"vocab_size\":32",
		  "num_hidden_layers" },
		{ "\"hidden_size\":64,\"num_hidden_layers\":2,\"vocab_size\":32",
		  "num_attention_heads" },
		{ "\"num_attention_heads\":4,\"num_hidden_layers\":2,\"vocab_size\":32",
		  "hidden_size" },
	};
	good_model("BF16", "LlamaForCausalLM", NULL);
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		char text[512], want[64];
		snprintf(text, sizeof text, "{\"architectures\":[\"LlamaForCausalLM\"],"
			 "\"model_type\":\"llama\",%s}", c[k].json);
		write_text("config.json", text);
		snprintf(want, sizeof want, "config.json: no \"%s\"", c[k].key);
		expect_fail(TFS_E_FORMAT, want, NULL);
	}
}

/* The key named name in the plan's keys, or NULL. */
static const tfs_hf_kv *plan_key(const tfs_hf_plan *p, const char *name)
{
	const tfs_hf_kvs *l = tfs_hf_plan_kvs(p);
	long i = tfs_hf_kvs_find(l, name);
	return i < 0 ? NULL : &l->kv[i];
}

static uint32_t kv_u32(const tfs_hf_kv *kv)
{
	uint32_t v = 0;
	cr_assert(kv && kv->len == 4);
	memcpy(&v, kv->data, 4);
	return v;
}

/* AutoConfig's class defaults (by model_type): LlamaConfig fills in head_dim, so the converter
 * writes key_length/value_length a config.json without head_dim does not give; without a
 * model_type transformers knows, config.json is read as written. */
Test(hf, config_class_defaults)
{
	static const struct { const char *extra; bool head_dim; uint32_t ctx; } c[] = {
		{ ",\"model_type\":\"llama\"", true, 128 },
		{ "", false, 128 },
		{ ",\"model_type\":\"mistral\"", true, 128 },
	};
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		tfs_model *st;
		tfs_hf_plan *p;
		tfs_error err = { 0 };
		good_model("BF16", "LlamaForCausalLM", c[k].extra);
		cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_AUTO, &err), 0, "%s", err.msg);
		const tfs_hf_kv *kl = plan_key(p, "llama.attention.key_length");
		cr_expect_eq(kl != NULL, c[k].head_dim, "%zu", k);
		if (kl)
			cr_expect_eq(kv_u32(kl), 16);
		cr_expect_eq(kv_u32(plan_key(p, "llama.context_length")), c[k].ctx);
		tfs_hf_plan_free(p);
		tfs_model_free(st);
	}
	/* leaving out max_position_embeddings and rms_norm_eps: LlamaConfig's 2048 and 1e-6 */
	tfs_model *st;
	tfs_hf_plan *p;
	tfs_error err = { 0 };
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":"
		   "\"llama\",\"hidden_size\":64,\"num_attention_heads\":4,"
		   "\"num_key_value_heads\":2,\"num_hidden_layers\":2,\"intermediate_size\":96,"
		   "\"vocab_size\":32}");
	cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_AUTO, &err), 0, "%s", err.msg);
	cr_expect_eq(kv_u32(plan_key(p, "llama.context_length")), 2048);
	const tfs_hf_kv *eps = plan_key(p, "llama.attention.layer_norm_rms_epsilon");
	float f = 0;
	cr_assert(eps);
	memcpy(&f, eps->data, 4);
	cr_expect_eq(f, 1e-6f);
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

/* gguf-py keeps a key written twice where it was first written, with the last value. */
Test(hf, key_written_twice_keeps_place)
{
	tfs_hf_kvs l = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(tfs_hf_kvs_add_u32(&l, "a", 1, &err), 0);
	cr_assert_eq(tfs_hf_kvs_add_u32(&l, "b", 2, &err), 0);
	cr_assert_eq(tfs_hf_kvs_add_str(&l, "a", "x", &err), 0);
	cr_expect_eq(l.n, 2);
	cr_expect_str_eq(l.kv[0].name, "a");
	cr_expect_eq(l.kv[0].len, 9);
	cr_expect_eq(memcmp(l.kv[0].data + 8, "x", 1), 0);
	tfs_hf_kvs_free(&l);
}

Test(hf, implausible_sizes)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
		   "\"num_attention_heads\":4,\"num_hidden_layers\":4000000000,\"vocab_size\":32}");
	expect_fail(TFS_E_FORMAT, "\"num_hidden_layers\" is 4000000000, more than any model has",
		    NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
		   "\"num_attention_heads\":4,\"num_hidden_layers\":60000,\"vocab_size\":32}");
	expect_fail(TFS_E_FORMAT, "says num_hidden_layers 60000, but the weights hold 21 tensors",
		    NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
		   "\"num_attention_heads\":4,\"num_hidden_layers\":2,\"vocab_size\":32,"
		   "\"head_dim\":1000000,\"rope_scaling\":{\"rope_type\":\"llama3\"}}");
	expect_fail(TFS_E_FORMAT, "\"head_dim\" is 1000000", NULL);
}

Test(hf, tensor_missing)
{
	tspec t[64];
	size_t n = llama_tensors(t, "BF16", "model.layers.1.mlp.up_proj.weight", false, false);
	write_config("LlamaForCausalLM", NULL);
	write_st("model.safetensors", t, n, 3);
	expect_fail(TFS_E_FORMAT, "no tensor 'model.layers.1.mlp.up_proj.weight'",
		    "num_hidden_layers 2");
}

Test(hf, layer_beyond_config)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
		   "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"num_hidden_layers\":1,"
		   "\"intermediate_size\":96,\"vocab_size\":32}");
	expect_fail(TFS_E_FORMAT, "/model.safetensors: tensor 'model.layers.1.", "has no GGUF name");
}

Test(hf, unknown_tensor)
{
	tspec t[65];
	size_t n = llama_tensors(t, "BF16", NULL, false, false);
	t[n++] = (tspec){ "model.layers.0.mlp.extra.weight", "BF16", { 4, 4 } };
	write_config("LlamaForCausalLM", NULL);
	write_st("model.safetensors", t, n, 4);
	expect_fail(TFS_E_FORMAT, "tensor 'model.layers.0.mlp.extra.weight' has no GGUF name",
		    "llama");
}

Test(hf, qk_norm_not_qwen3)
{
	tspec t[64];
	size_t n = llama_tensors(t, "BF16", NULL, false, true);
	write_config("Qwen2ForCausalLM", NULL);
	write_st("model.safetensors", t, n, 5);
	/* k_norm sorts first */
	expect_fail(TFS_E_FORMAT, "self_attn.k_norm.weight' has no GGUF name", "qwen2");
}

Test(hf, qwen3_without_qk_norm)
{
	tspec t[64];
	size_t n = llama_tensors(t, "BF16", NULL, false, false);
	write_config("Qwen3ForCausalLM", NULL);
	write_st("model.safetensors", t, n, 6);
	expect_fail(TFS_E_FORMAT, "no tensor 'model.layers.0.self_attn.q_norm.weight'", NULL);
}

Test(hf, shape_disagrees)
{
	tspec t[64];
	size_t n = llama_tensors(t, "BF16", NULL, false, false);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].name, "model.layers.0.self_attn.k_proj.weight"))
			t[i].shape[0] = 64;   /* 4 KV heads' worth, config says 2 */
	write_config("LlamaForCausalLM", NULL);
	write_st("model.safetensors", t, n, 7);
	expect_fail(TFS_E_FORMAT, "tensor 'model.layers.0.self_attn.k_proj.weight' has shape "
		    "[64, 64], but", "says [32, 64] (num_key_value_heads x head_dim, hidden_size)");
}

Test(hf, vocab_disagrees)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
		   "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"num_hidden_layers\":2,"
		   "\"intermediate_size\":96,\"vocab_size\":33}");
	expect_fail(TFS_E_FORMAT, "has shape [32, 64]", "vocab_size");
}

Test(hf, dtype_not_float)
{
	tspec t[64];
	size_t n = llama_tensors(t, "BF16", NULL, false, false);
	t[0].dtype = "I32";
	write_config("LlamaForCausalLM", NULL);
	write_st("model.safetensors", t, n, 8);
	expect_fail(TFS_E_UNSUPPORTED, "tensor 'model.embed_tokens.weight' is I32", NULL);
}

/* ==== the plan ==== */

Test(hf, auto_outtype)
{
	static const struct { const char *dt; uint32_t ftype; int wdt; } c[] = {
		/* all F32: the converter's heuristic finds no 16-bit tensor and picks f16 */
		{ "F16", 1, TFS_DT_F16 }, { "BF16", 32, TFS_DT_BF16 }, { "F32", 1, TFS_DT_F16 },
	};
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		tfs_model *st;
		tfs_hf_plan *p;
		tfs_error err = { 0 };
		good_model(c[k].dt, "LlamaForCausalLM", NULL);
		cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_AUTO, &err), 0, "%s", err.msg);
		cr_expect_eq(tfs_hf_plan_file_type(p), c[k].ftype, "%s", c[k].dt);
		for (size_t i = 0; i < tfs_hf_plan_n_tensors(p); i++) {
			const tfs_hf_tensor *t = tfs_hf_plan_tensor(p, i);
			bool f32 = t->n_dims == 1;
			cr_expect_eq(t->dtype, f32 ? TFS_DT_F32 : c[k].wdt, "%s %s", c[k].dt, t->name);
			cr_expect_eq(t->raw, t->recipe == TFS_HF_COPY && !t->perm_heads, "%s", t->name);
			cr_expect_eq(t->perm_heads, strstr(t->name, "attn_q.") ? 4u
				     : strstr(t->name, "attn_k.") ? 2u : 0u, "%s", t->name);
		}
		tfs_hf_plan_free(p);
		tfs_model_free(st);
	}
}

Test(hf, names_order_and_layout)
{
	tfs_model *st;
	tfs_hf_plan *p;
	tfs_error err = { 0 };
	good_model("BF16", "LlamaForCausalLM", NULL);
	cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_Q8_0, &err), 0, "%s", err.msg);
	/* sorted HF names: lm_head < model.embed_tokens < model.layers.0.input_layernorm ... */
	static const char *const first[] = { "output.weight", "token_embd.weight",
		"blk.0.attn_norm.weight", "blk.0.ffn_down.weight", "blk.0.ffn_gate.weight",
		"blk.0.ffn_up.weight", "blk.0.ffn_norm.weight", "blk.0.attn_k.weight",
		"blk.0.attn_output.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight" };
	cr_assert_eq(tfs_hf_plan_n_tensors(p), 21);
	for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
		cr_expect_str_eq(tfs_hf_plan_tensor(p, i)->name, first[i]);
	cr_expect_str_eq(tfs_hf_plan_tensor(p, 20)->name, "output_norm.weight");
	/* q8_0: ffn_down is 96 wide (3 blocks), the rest 64; norms F32 */
	cr_expect_eq(tfs_hf_plan_tensor(p, 3)->dtype, TFS_DT_Q8_0);
	cr_expect_eq(tfs_hf_plan_tensor(p, 3)->nbytes, 64 * 3 * 34);
	cr_expect_eq(tfs_hf_plan_tensor(p, 2)->dtype, TFS_DT_F32);
	tfs_buf h = { 0 };
	cr_assert_eq(tfs_hf_plan_header(&h, p, &err), 0);
	cr_expect_eq(h.len, tfs_hf_plan_header_size(p));
	cr_expect_eq(h.len % 32, 0);
	cr_expect_eq(memcmp(h.data, "GGUF\3\0\0\0", 8), 0);
	uint64_t pos = h.len;
	for (size_t i = 0; i < tfs_hf_plan_n_tensors(p); i++) {
		const tfs_hf_tensor *t = tfs_hf_plan_tensor(p, i);
		cr_expect_eq(t->offset, pos, "%s", t->name);
		pos += (t->nbytes + 31) / 32 * 32;
	}
	cr_expect_eq(pos, tfs_hf_plan_file_size(p));
	tfs_buf_free(&h);
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

Test(hf, unsorted_header_and_shards)
{
	/* tensors are read in shard file order, then name order, whatever the headers say */
	tspec t[64];
	size_t n = llama_tensors(t, "F16", NULL, true, false);
	for (size_t i = 0; i < n / 2; i++) {   /* reverse: the header lists them backwards */
		tspec x = t[i];
		t[i] = t[n - 1 - i];
		t[n - 1 - i] = x;
	}
	write_config("LlamaForCausalLM", NULL);
	size_t half = n / 2;
	write_st("model-00002-of-00002.safetensors", t, half, 9);
	write_st("model-00001-of-00002.safetensors", t + half, n - half, 10);
	tfs_buf idx = { 0 };
	tfs_buf_printf(&idx, "{\"metadata\":{},\"weight_map\":{");
	for (size_t i = 0; i < n; i++)
		tfs_buf_printf(&idx, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "",
			       t[i].name, i < half ? 2 : 1);
	tfs_buf_printf(&idx, "}}");
	write_text("model.safetensors.index.json", idx.data);
	tfs_buf_free(&idx);
	tfs_model *st;
	tfs_hf_plan *p;
	tfs_error err = { 0 };
	cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_AUTO, &err), 0, "%s", err.msg);
	const char *prev_shard = "", *prev = "";
	for (size_t i = 0; i < tfs_hf_plan_n_tensors(p); i++) {
		const tfs_tensor *s = tfs_model_tensor(st, (size_t)tfs_hf_plan_tensor(p, i)->src);
		const char *shard = tfs_source_label(tfs_model_source(st, (size_t)s->src));
		int c = strcmp(shard, prev_shard);
		cr_expect(c > 0 || (c == 0 && strcmp(s->name, prev) > 0), "%s after %s", s->name, prev);
		prev_shard = shard;
		prev = s->name;
	}
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

/* ==== reading ==== */

/* Every tensor of every outtype: reads of random ranges equal the whole read's bytes. */
Test(hf, reads_at_any_offset)
{
	static const char *const dts[] = { "BF16", "F16", "F32" };
	for (size_t d = 0; d < 3; d++) {
		good_model(dts[d], "LlamaForCausalLM", NULL);
		for (int ot = TFS_HF_OUT_AUTO; ot <= TFS_HF_OUT_Q8_0; ot++) {
			tfs_model *st;
			tfs_hf_plan *p;
			tfs_error err = { 0 };
			cr_assert_eq(open_plan(&st, &p, (tfs_hf_outtype)ot, &err), 0, "%s", err.msg);
			rng_state = 77 + (uint64_t)ot;
			for (size_t i = 0; i < tfs_hf_plan_n_tensors(p); i++) {
				const tfs_hf_tensor *t = tfs_hf_plan_tensor(p, i);
				uint8_t *whole = malloc(t->nbytes), *part = malloc(t->nbytes + 8);
				cr_assert(whole && part);
				cr_assert_eq(tfs_hf_tensor_read(p, i, 0, t->nbytes + 100, whole, &err),
					     (int64_t)t->nbytes, "%s: %s", t->name, err.msg);
				for (int k = 0; k < 40; k++) {
					uint64_t off = rng() % t->nbytes, len = 1 + rng() % 300;
					if (k % 4 == 0)
						len = t->nbytes;   /* to the end */
					uint64_t want = len < t->nbytes - off ? len : t->nbytes - off;
					int64_t got = tfs_hf_tensor_read(p, i, off, len, part, &err);
					cr_assert_eq(got, (int64_t)want, "%s [%llu, +%llu): %s", t->name,
						     (unsigned long long)off, (unsigned long long)len,
						     err.msg);
					cr_assert_eq(memcmp(part, whole + off, want), 0, "%s %s/%d [%llu, "
						     "+%llu)", t->name, dts[d], ot,
						     (unsigned long long)off, (unsigned long long)want);
				}
				cr_expect_eq(tfs_hf_tensor_read(p, i, t->nbytes, 10, part, &err), 0);
				free(whole);
				free(part);
			}
			tfs_hf_plan_free(p);
			tfs_model_free(st);
		}
	}
}

/* attn_q's rows are LlamaModel.permute's: reshape(heads, 2, rows/heads/2, cols).swapaxes(1, 2) */
Test(hf, qk_permutation)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	tfs_model *st;
	tfs_hf_plan *p;
	tfs_error err = { 0 };
	cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_BF16, &err), 0, "%s", err.msg);
	for (size_t i = 0; i < tfs_hf_plan_n_tensors(p); i++) {
		const tfs_hf_tensor *t = tfs_hf_plan_tensor(p, i);
		if (!t->perm_heads)
			continue;
		int64_t rows = t->ne[1], cols = t->ne[0], heads = t->perm_heads;
		int64_t half = rows / heads / 2;
		uint8_t *src = malloc(t->nbytes), *out = malloc(t->nbytes);
		cr_assert_eq(tfs_tensor_read_raw(st, (size_t)t->src, 0, t->nbytes, src, &err),
			     (int64_t)t->nbytes);
		cr_assert_eq(tfs_hf_tensor_read(p, i, 0, t->nbytes, out, &err), (int64_t)t->nbytes);
		/* out[h][a][b] = src[h][b][a] with a < half, b < 2 */
		for (int64_t h = 0; h < heads; h++)
			for (int64_t a = 0; a < half; a++)
				for (int64_t b = 0; b < 2; b++) {
					int64_t ro = h * 2 * half + a * 2 + b, rs = h * 2 * half + b * half + a;
					cr_assert_eq(memcmp(out + ro * cols * 2, src + rs * cols * 2,
							    (size_t)cols * 2), 0, "%s row %lld", t->name,
						     (long long)ro);
				}
		free(src);
		free(out);
	}
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

/* BF16 to BF16 is the source's bytes, signalling NaNs quieted (gguf-py's bf16 rounding). */
Test(hf, bf16_quiets_nans)
{
	good_model("BF16", "LlamaForCausalLM", NULL);
	char path[512];
	tfs_model *st;
	tfs_hf_plan *p;
	tfs_error err = { 0 };
	cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_AUTO, &err), 0, "%s", err.msg);
	/* token_embd.weight (index 1): put a signalling NaN at element 5 of its source */
	const tfs_hf_tensor *t = tfs_hf_plan_tensor(p, 1);
	cr_assert_str_eq(t->name, "token_embd.weight");
	cr_assert(t->raw && t->quiet_nans);
	const tfs_tensor *s = tfs_model_tensor(st, (size_t)t->src);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	FILE *f = fopen(path, "r+b");
	cr_assert(f);
	uint8_t nan[2] = { 0x81, 0x7f };   /* 0x7f81 */
	cr_assert_eq(fseek(f, (long)(s->offset + 10), SEEK_SET), 0);
	fwrite(nan, 1, 2, f);
	fclose(f);
	uint8_t b[16];
	cr_assert_eq(tfs_hf_tensor_read(p, 1, 4, 16, b, &err), 16);
	cr_expect_eq(b[6], 0xc1, "low byte %02x", b[6]);
	cr_expect_eq(b[7], 0x7f);
	/* a read that starts or ends inside the value */
	cr_assert_eq(tfs_hf_tensor_read(p, 1, 11, 1, b, &err), 1);
	cr_expect_eq(b[0], 0x7f);
	cr_assert_eq(tfs_hf_tensor_read(p, 1, 9, 2, b, &err), 2);
	cr_expect_eq(b[1], 0xc1);
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

/* ==== Gemma 4 (hf_gemma4.c) ==== */

/* A Gemma 4 text config (layer 1 full, global head 32) with extra members; without is a
 * member left out (its JSON text, up to the next comma). */
static void gemma4_config(const char *extra, const char *without)
{
	static const char *const member[] = {
		"\"model_type\":\"gemma4_text\"", "\"head_dim\":16", "\"global_head_dim\":32",
		"\"num_kv_shared_layers\":0", "\"sliding_window\":64",
		"\"layer_types\":[\"sliding_attention\",\"full_attention\"]",
		"\"moe_intermediate_size\":null",
		"\"rope_parameters\":{\"full_attention\":{\"partial_rotary_factor\":0.25,"
		"\"rope_theta\":1000000.0,\"rope_type\":\"proportional\"},\"sliding_attention\":"
		"{\"rope_theta\":10000.0,\"rope_type\":\"default\"}}",
	};
	char text[1536] = "";
	size_t k = 0;
	for (size_t i = 0; i < sizeof member / sizeof member[0]; i++)
		if (!without || strncmp(member[i], without, strlen(without)))
			k += (size_t)snprintf(text + k, sizeof text - k, ",%s", member[i]);
	snprintf(text + k, sizeof text - k, "%s", extra ? extra : "");
	write_config("Gemma4ForCausalLM", text);
}

/* Gemma 4's tensors on the llama ones (tied, q/k norms): the feed-forward norms and the
 * layer_scalar buffer (no ".weight") of each layer. */
static void gemma4_model(const char *dt)
{
	static char names[8][96];
	tspec t[80];
	size_t n = llama_tensors(t, dt, NULL, true, true), m = 0;
	for (int l = 0; l < 2; l++) {
		static const char *const w[] = { "pre_feedforward_layernorm.weight",
			"post_feedforward_layernorm.weight", "layer_scalar" };
		for (size_t k = 0; k < 3; k++, m++) {
			snprintf(names[m], sizeof names[m], "model.layers.%d.%s", l, w[k]);
			t[n++] = (tspec){ names[m], "F32", { k < 2 ? 64 : 1, 0 } };
		}
	}
	write_st("model.safetensors", t, n, 29);
}

/* What the converter needs for Gemma 4, named: without a model_type transformers knows,
 * config.json is read as written (no Gemma4TextConfig to fill in the rest) */
Test(hf, gemma4_refusals)
{
	static const struct { const char *extra, *without; const char *want; } c[] = {
		{ ",\"attn_logit_softcapping\":50.0", NULL, "attn_logit_softcapping is set" },
		{ ",\"global_head_dim\":null", "\"global_head_dim\"", "no global_head_dim" },
		{ ",\"num_kv_shared_layers\":1.5", "\"num_kv_shared_layers\"",
		  "\"num_kv_shared_layers\" is not a 32-bit unsigned integer" },
	};
	gemma4_model("BF16");
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		gemma4_config(c[k].extra, c[k].without);
		expect_fail(TFS_E_FORMAT, c[k].want, "config.json");
	}
	/* no model_type: as written (the rope given: rope_freqs is planned first) */
#define G4_ROPE ",\"rope_parameters\":{\"full_attention\":{\"partial_rotary_factor\":0.25," \
		"\"rope_type\":\"proportional\"}},\"head_dim\":16,\"global_head_dim\":32," \
		"\"sliding_window\":64"
	write_config("Gemma4ForCausalLM", G4_ROPE);
	expect_fail(TFS_E_FORMAT, "config.json: no \"num_kv_shared_layers\"", NULL);
	write_config("Gemma4ForCausalLM", G4_ROPE ",\"num_kv_shared_layers\":0");
	expect_fail(TFS_E_FORMAT, "config.json: no \"layer_types\"", NULL);
#undef G4_ROPE
	/* a full layer's rope that is not proportional: the converter asserts it */
	write_config("Gemma4ForCausalLM", ",\"model_type\":\"gemma4_text\",\"head_dim\":16,"
		     "\"global_head_dim\":32,\"num_kv_shared_layers\":0,\"sliding_window\":64,"
		     "\"layer_types\":[\"sliding_attention\",\"full_attention\"],"
		     "\"moe_intermediate_size\":null,\"rope_parameters\":{\"full_attention\":"
		     "{\"rope_theta\":1000000.0,\"rope_type\":\"default\"}}");
	expect_fail(TFS_E_FORMAT, "is not \"proportional\"", NULL);
}

Test(hf, gemma4_plan)
{
	tfs_model *st;
	tfs_hf_plan *p;
	tfs_error err = { 0 };
	gemma4_model("BF16");
	gemma4_config(",\"num_global_key_value_heads\":1,\"use_double_wide_mlp\":true", NULL);
	cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_AUTO, &err), 0, "%s", err.msg);
	cr_expect_str_eq(tfs_hf_plan_arch(p), "gemma4");
	/* rope_freqs first: 32 x 0.25 / 2 = 4 rotated pairs of 16 */
	const tfs_hf_tensor *rf = tfs_hf_plan_tensor(p, 0);
	cr_assert_str_eq(rf->name, "rope_freqs.weight");
	cr_assert_eq(rf->ne[0], 16);
	float f[16];
	cr_assert_eq(tfs_hf_tensor_read(p, 0, 0, sizeof f, f, &err), (int64_t)sizeof f);
	for (int i = 0; i < 16; i++)
		cr_expect_eq(f[i], i < 4 ? 1.0f : 1e30f, "rope_freqs[%d]", i);
	bool scalar = false;
	for (size_t i = 0; i < tfs_hf_plan_n_tensors(p); i++) {
		const tfs_hf_tensor *t = tfs_hf_plan_tensor(p, i);
		if (!strcmp(t->name, "blk.1.layer_output_scale.weight"))
			scalar = t->dtype == TFS_DT_F32 && t->ne[0] == 1;
		cr_expect(!t->plus_one, "%s: Gemma 4's norms are not shifted", t->name);
	}
	cr_expect(scalar, "layer_scalar as blk.1.layer_output_scale.weight, F32 [1]");
	/* per-layer arrays: KV heads (sliding 2, full 1), feed-forward (no shared layer) */
	const tfs_hf_kv *kv = plan_key(p, "gemma4.attention.head_count_kv");
	cr_assert(kv && kv->type == TFS_GGUF_ARRAY && kv->len == 12 + 8);
	int32_t h[2];
	memcpy(h, kv->data + 12, 8);
	cr_expect(h[0] == 2 && h[1] == 1, "head_count_kv [%d, %d]", h[0], h[1]);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.attention.key_length")), 32);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.attention.key_length_swa")), 16);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.rope.dimension_count_swa")), 16);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.attention.shared_kv_layers")), 0);
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

/* transformers 5's Gemma4TextConfig fills in what config.json leaves out: the full layers'
 * head size 512, no shared KV layers, layer_types (the last layer full), the rope */
Test(hf, gemma4_config_defaults)
{
	tfs_model *st;
	tfs_hf_plan *p;
	tfs_error err = { 0 };
	gemma4_model("BF16");
	write_config("Gemma4ForCausalLM", ",\"model_type\":\"gemma4_text\",\"head_dim\":16,"
		     "\"hidden_size_per_layer_input\":0");
	cr_assert_eq(open_plan(&st, &p, TFS_HF_OUT_AUTO, &err), 0, "%s", err.msg);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.attention.key_length")), 512);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.attention.shared_kv_layers")), 0);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.attention.sliding_window")), 512);
	cr_expect_eq(kv_u32(plan_key(p, "gemma4.attention.head_count_kv")), 2);
	const tfs_hf_kv *pat = plan_key(p, "gemma4.attention.sliding_window_pattern");
	cr_assert(pat && pat->len == 12 + 2);
	cr_expect(pat->data[12] == 1 && pat->data[13] == 0, "pattern [swa, full]");
	cr_expect_eq(tfs_hf_plan_tensor(p, 0)->ne[0], 256, "rope_freqs of a 512 head");
	tfs_hf_plan_free(p);
	tfs_model_free(st);
}

/* Qwen3.5's A_log -> ssm_a: -exp(x) bit for bit as torch 1.13 computes it on float32 (SLEEF's
 * expf_u10): values where glibc's expf differs from it, zeros, +-1, the ends of the range
 * (overflow, subnormal results, below -104, above 100); a NaN stays a NaN, sign flipped. */
Test(hf, qwen35_neg_exp_as_torch)
{
	static const uint32_t cases[][2] = {
		{ 0xc19efd33, 0xb120b86a }, { 0xbf5ece31, 0xbed66e7e }, { 0xc1151738, 0xb8bc474a },
		{ 0x406f0af4, 0xc2278f34 }, { 0xc16d524b, 0xb4c228b2 }, { 0xbda17e76, 0xbf6c96b2 },
		{ 0xc1832962, 0xb3a2c5de }, { 0xc09604c5, 0xbc16cdb8 }, { 0xc0782b31, 0xbca9926a },
		{ 0xc0d7d032, 0xba9a5e24 }, { 0xc0f60364, 0xb9f04c74 }, { 0xc13d69f3, 0xb6f25542 },
		{ 0xc1155204, 0xb8b99858 }, { 0xc0c20f00, 0xbb18537e }, { 0xc16e3e46, 0xb4b74a04 },
		{ 0xc0cc804a, 0xbadbd3c4 }, { 0xc1986155, 0xb1b79352 }, { 0xbf4292eb, 0xbeef6ea6 },
		{ 0xc180fd59, 0xb3d58c12 }, { 0xc1865356, 0xb35b351a }, { 0x00000000, 0xbf800000 },
		{ 0x80000000, 0xbf800000 }, { 0x3f800000, 0xc02df854 }, { 0xbf800000, 0xbebc5ab2 },
		{ 0x42b16666, 0xff7a37fc }, { 0x42b1999a, 0xff800000 }, { 0xc2af0000, 0x806cb2bc },
		{ 0xc2cfcccd, 0x80000001 }, { 0xc2d10000, 0x80000000 }, { 0x42c90000, 0xff800000 },
		{ 0x40317218, 0xc1800000 }, { 0x7fc00000, 0xffc00000 }, { 0x7f800001, 0xffc00001 },
		{ 0xffc00000, 0x7fc00000 },
	};
	uint32_t f[sizeof cases / sizeof cases[0]];
	size_t n = sizeof cases / sizeof cases[0];
	for (size_t i = 0; i < n; i++)
		f[i] = cases[i][0];
	tfs_hf_neg_exp(f, n);
	for (size_t i = 0; i < n; i++)
		cr_expect_eq(f[i], cases[i][1], "-exp(0x%08x): 0x%08x, torch 0x%08x", cases[i][0],
			     f[i], cases[i][1]);
}

/* Gemma 4's per_dim_scale -> softplus(x) bit for bit as torch 1.13 computes it on a float32
 * tensor of 20 elements: the first 16 by SLEEF's log1pf_u10(expf_u10(x)), the last 4 by
 * glibc's log1pf(expf(x)) (the same three values give other bits there), x itself above 20;
 * zeros, -104.5, infinities, a NaN.  Expected values: torch's. */
Test(hf, gemma4_softplus_as_torch)
{
	static const uint32_t cases[][2] = {
		{ 0x3f12b914, 0x3f8296c5 }, { 0x3fbd413f, 0x3fd78a7d }, { 0x3fe217a5, 0x3ff64b1e },
		{ 0x80000000, 0x3f317218 }, { 0x00000000, 0x3f317218 }, { 0x41a00000, 0x41a00000 },
		{ 0x41c80000, 0x41c80000 }, { 0xc2d10000, 0x00000000 }, { 0xc0400000, 0x3d470388 },
		{ 0x3f800000, 0x3fa818f5 }, { 0x7f800000, 0x7f800000 }, { 0xff800000, 0x00000000 },
		{ 0x7fc00000, 0x7fc00000 }, { 0x3e800000, 0x3f5370c4 }, { 0xbfc00000, 0x3e4e3f49 },
		{ 0x40e00000, 0x40e00778 }, { 0x3f12b914, 0x3f8296c6 }, { 0x3fbd413f, 0x3fd78a7c },
		{ 0x3fe217a5, 0x3ff64b1f }, { 0x41a80000, 0x41a80000 },
	};
	enum { N = sizeof cases / sizeof cases[0] };
	uint32_t f[N];
	for (size_t i = 0; i < N; i++)
		f[i] = cases[i][0];
	tfs_hf_softplus(f, 10, 0, N);   /* in two reads, as the reader's chunks */
	tfs_hf_softplus(f + 10, N - 10, 10, N);
	for (size_t i = 0; i < N; i++)
		cr_expect_eq(f[i], cases[i][1], "softplus(0x%08x) at %zu: 0x%08x, torch 0x%08x",
			     cases[i][0], i, f[i], cases[i][1]);
}

/* Its inverse (the reverse view's A_log): each value above's -exp back to an x whose -exp is
 * it bit for bit; a BF16 x back as it was (the one of fewest significant bits of those that
 * give its value); values no x gives (positive, a signalling NaN, between two neighbours'
 * values where exp's steps are wider than an ulp) refused. */
Test(hf, qwen35_neg_exp_inverse)
{
	static const uint32_t a[] = {
		0xb120b86a, 0xbed66e7e, 0xc2278f34, 0xbf800000, 0xbebc5ab2, 0xff7a37fc, 0xff800000,
		0x806cb2bc, 0x80000001, 0x80000000, 0xc1800000, 0xffc00000, 0x7fc00000,
	};
	for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
		float v, x;
		memcpy(&v, &a[i], 4);
		cr_assert(tfs_hf_neg_exp_inverse(v, &x), "0x%08x", a[i]);
		uint32_t b;
		memcpy(&b, &x, 4);
		tfs_hf_neg_exp(&b, 1);
		cr_expect_eq(b, a[i], "-exp(inverse(0x%08x)): 0x%08x", a[i], b);
	}
	static const uint16_t bf16[] = { 0x3f80, 0xbf31, 0x4005, 0xc0a3, 0x3e9a, 0xbc23, 0x4120 };
	for (size_t i = 0; i < sizeof bf16 / sizeof bf16[0]; i++) {
		uint32_t b = (uint32_t)bf16[i] << 16, back;
		float v, x;
		tfs_hf_neg_exp(&b, 1);
		memcpy(&v, &b, 4);
		cr_assert(tfs_hf_neg_exp_inverse(v, &x));
		memcpy(&back, &x, 4);
		cr_expect_eq(back, (uint32_t)bf16[i] << 16, "bf16 0x%04x back as 0x%08x", bf16[i],
			     back);
	}
	/* exp's values at 80 and its next float are about 80 ulps apart: the ulp after the
	 * first is no float's -exp */
	uint32_t b = 0x42a00000;
	tfs_hf_neg_exp(&b, 1);
	b += 1;
	float v, x;
	memcpy(&v, &b, 4);
	cr_expect(!tfs_hf_neg_exp_inverse(v, &x), "0x%08x has no preimage", b);
	static const uint32_t none[] = { 0x3f800000, 0x00000000, 0xff800001 };
	for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
		memcpy(&v, &none[i], 4);
		cr_expect(!tfs_hf_neg_exp_inverse(v, &x), "0x%08x has no preimage", none[i]);
	}
}

/* A Qwen3.5 config (write_config's sizes and the linear attention's: 2 key, 4 value heads of
 * 16) plus extra, its embeddings and final norm, and the tensors more. */
static void qwen35_model(const char *extra, const tspec *more, size_t nmore)
{
	tspec t[8] = { { "model.embed_tokens.weight", "BF16", { 32, 64 } },
		       { "model.norm.weight", "F32", { 64, 0 } } };
	char cfg[512];
	size_t n = 2;
	for (size_t i = 0; i < nmore && n < 8; i++)
		t[n++] = more[i];
	snprintf(cfg, sizeof cfg, ",\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,"
		 "\"linear_key_head_dim\":16,\"linear_value_head_dim\":16,"
		 "\"linear_conv_kernel_dim\":4%s", extra);
	write_config("Qwen3_5ForCausalLM", cfg);
	write_st("model.safetensors", t, n, 11);
}

/* refused where the converter fails: no MTP layer at all (its assertion) */
Test(hf, qwen35_without_mtp)
{
	qwen35_model("", NULL, 0);
	expect_fail(TFS_E_UNSUPPORTED, "no MTP layer", "--no-mtp");
}

/* an F16 A_log: the reference's torch has no exp in F16 */
Test(hf, qwen35_f16_a_log)
{
	tspec a = { "model.layers.0.linear_attn.A_log", "F16", { 4, 0 } };
	qwen35_model(",\"mtp_num_hidden_layers\":1", &a, 1);
	expect_fail(TFS_E_UNSUPPORTED, "tensor 'model.layers.0.linear_attn.A_log' is F16", NULL);
}

/* a linear attention tensor of another shape than the config's */
Test(hf, qwen35_linear_shape)
{
	tspec a = { "model.layers.0.linear_attn.in_proj_qkv.weight", "BF16", { 96, 64 } };
	qwen35_model(",\"mtp_num_hidden_layers\":1", &a, 1);
	expect_fail(TFS_E_FORMAT, "in_proj_qkv.weight' has shape [96, 64], but",
		    "says [128, 64]");
}
