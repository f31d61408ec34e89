/*
 * test_qplan.c - llama-quantize's plan (codec/views/qplan.c) on small GGUF headers written
 * here: file type names, the tensor order, the key changes, the types of a mix, and the
 * refusals llama_model_quantize makes.  The comparison with llama.cpp itself, byte for byte,
 * is tests/quant/check.py (meson test quant_llama).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensorfs.h"
#include "qplan.h"

/* ==== a GGUF v3 file of keys and zero-filled tensors ==== */

typedef struct {
	const char *name;
	int dtype;
	uint32_t n_dims;
	int64_t ne[4];
} tspec;

typedef struct {
	tfs_buf kv;
	uint64_t n_kv;
} keys;

static void put(tfs_buf *b, const void *p, size_t n) { cr_assert_eq(tfs_buf_append(b, p, n), 0); }
static void put_u32(tfs_buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(tfs_buf *b, uint64_t v) { put(b, &v, 8); }

static void put_str(tfs_buf *b, const char *s)
{
	put_u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void key_str(keys *k, const char *key, const char *v)
{
	put_str(&k->kv, key);
	put_u32(&k->kv, TFS_GGUF_STRING);
	put_str(&k->kv, v);
	k->n_kv++;
}

static void key_u32(keys *k, const char *key, uint32_t v)
{
	put_str(&k->kv, key);
	put_u32(&k->kv, TFS_GGUF_UINT32);
	put_u32(&k->kv, v);
	k->n_kv++;
}

/* llama keys of a model of n_layer layers, width n_embd, heads / KV heads */
static void llama_keys(keys *k, uint32_t n_layer, uint32_t n_embd, uint32_t n_head,
		       uint32_t n_head_kv)
{
	key_str(k, "general.architecture", "llama");
	key_u32(k, "llama.block_count", n_layer);
	key_u32(k, "llama.embedding_length", n_embd);
	key_u32(k, "llama.attention.head_count", n_head);
	key_u32(k, "llama.attention.head_count_kv", n_head_kv);
}

static char tmpdir[64];

static void setup(void)
{
	strcpy(tmpdir, "/tmp/test_qplan.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

/* writes the GGUF and opens it */
static tfs_model *model(keys *k, const tspec *t, size_t nt)
{
	tfs_buf b = { 0 };
	uint64_t off = 0;
	put(&b, "GGUF", 4);
	put_u32(&b, 3);
	put_u64(&b, nt);
	put_u64(&b, k->n_kv);
	put(&b, k->kv.data, k->kv.len);
	for (size_t i = 0; i < nt; i++) {
		uint64_t nel = 1, nbytes;
		put_str(&b, t[i].name);
		put_u32(&b, t[i].n_dims);
		for (uint32_t d = 0; d < t[i].n_dims; d++) {
			put_u64(&b, (uint64_t)t[i].ne[d]);
			nel *= (uint64_t)t[i].ne[d];
		}
		put_u32(&b, (uint32_t)t[i].dtype);
		put_u64(&b, off);
		cr_assert_eq(tfs_dtype_nbytes(&nbytes, t[i].dtype, nel, NULL), 0);
		off += (nbytes + 31) / 32 * 32;
	}
	size_t head = (b.len + 31) / 32 * 32;
	char *zeros = calloc(1, head - b.len + off + 1);
	put(&b, zeros, head - b.len + off);
	free(zeros);

	char path[128];
	snprintf(path, sizeof(path), "%s/m.gguf", tmpdir);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(b.data, 1, b.len, f), b.len);
	fclose(f);
	tfs_buf_free(&b);
	tfs_buf_free(&k->kv);

	tfs_model *m = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&m, path, NULL, &err), 0, "%s", err.msg);
	return m;
}

/* A llama model of 2 layers of 256 (F16 weights, F32 norms), tied or not. */
static tfs_model *llama2(bool tied)
{
	keys k = { 0 };
	llama_keys(&k, 2, 256, 4, 4);
	static const tspec t[] = {
		{ "token_embd.weight", TFS_DT_F16, 2, { 256, 32 } },
		{ "blk.0.attn_norm.weight", TFS_DT_F32, 1, { 256 } },
		{ "blk.0.attn_q.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "blk.0.attn_v.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "blk.0.ffn_down.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "blk.1.attn_norm.weight", TFS_DT_F32, 1, { 256 } },
		{ "blk.1.attn_q.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "blk.1.attn_v.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "blk.1.ffn_down.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "output_norm.weight", TFS_DT_F32, 1, { 256 } },
		{ "output.weight", TFS_DT_F16, 2, { 256, 32 } },
	};
	return model(&k, t, tied ? 10 : 11);
}

static const tfs_qtensor *find(const tfs_qplan *p, const char *name)
{
	for (size_t i = 0; i < tfs_qplan_n_tensors(p); i++)
		if (!strcmp(tfs_qplan_tensor(p, i)->name, name))
			return tfs_qplan_tensor(p, i);
	cr_assert_fail("no tensor %s in the plan", name);
	return NULL;
}

static const char *type_of(const tfs_qplan *p, const char *name)
{
	return tfs_dtype(find(p, name)->dtype)->name;
}

/* ==== file types ==== */

Test(qplan, ftype_names)
{
	cr_assert_eq(tfs_ftype_parse("Q4_K_M"), TFS_FTYPE_Q4_K_M);
	cr_assert_eq(tfs_ftype_parse("q4_k_m"), TFS_FTYPE_Q4_K_M);
	cr_assert_eq(tfs_ftype_parse("Q4_K"), TFS_FTYPE_Q4_K_M);
	cr_assert_eq(tfs_ftype_parse("Q3_K"), TFS_FTYPE_Q3_K_M);
	cr_assert_eq(tfs_ftype_parse("F32"), TFS_FTYPE_ALL_F32);
	cr_assert_eq(tfs_ftype_parse("bf16"), TFS_FTYPE_BF16);
	cr_assert_eq(tfs_ftype_parse("IQ2_M"), TFS_FTYPE_IQ2_M);
	cr_assert_eq(tfs_ftype_parse("15"), TFS_FTYPE_Q4_K_M);
	cr_assert_eq(tfs_ftype_parse("COPY"), -1);
	cr_assert_eq(tfs_ftype_parse("Q4_K_X"), -1);
	cr_assert_eq(tfs_ftype_parse("39"), -1, "NVFP4: 0.5.0 has no default type for it");
	cr_assert_eq(tfs_ftype_parse(""), -1);
	cr_assert_str_eq(tfs_ftype_name(TFS_FTYPE_Q4_K_M), "Q4_K_M");
	cr_assert_str_eq(tfs_ftype_name(TFS_FTYPE_Q3_K_M), "Q3_K_M");
	cr_assert_str_eq(tfs_ftype_name(TFS_FTYPE_ALL_F32), "F32");
	cr_assert_null(tfs_ftype_name(4));
	cr_assert_eq(tfs_ftype_base_dtype(TFS_FTYPE_IQ2_S), TFS_DT_IQ2_XS);
	cr_assert_eq(tfs_ftype_base_dtype(TFS_FTYPE_IQ3_XS), TFS_DT_IQ3_S);
	cr_assert_eq(tfs_ftype_base_dtype(TFS_FTYPE_Q5_K_S), TFS_DT_Q5_K);

	tfs_buf b = { 0 };
	cr_assert_eq(tfs_ftype_list(&b), 0);
	cr_assert(strstr(b.data, "Q4_0, Q4_1, ") != NULL, "%s", b.data);
	cr_assert(strstr(b.data, ", Q4_K_M, ") != NULL, "%s", b.data);
	cr_assert(strstr(b.data, ", F32") != NULL, "%s", b.data);
	tfs_buf_free(&b);
}

/* ==== the plan ==== */

Test(qplan, order_by_layer_then_name, .init = setup, .fini = teardown)
{
	keys k = { 0 };
	llama_keys(&k, 12, 256, 4, 4);
	static const tspec t[] = {
		{ "token_embd.weight", TFS_DT_F16, 2, { 256, 16 } },
		{ "blk.10.attn_q.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "blk.2.attn_v.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "output_norm.weight", TFS_DT_F32, 1, { 256 } },
		{ "blk.2.attn_k.weight", TFS_DT_F16, 2, { 256, 256 } },
		{ "output.weight", TFS_DT_F16, 2, { 256, 16 } },
	};
	static const char *const want[] = {
		"output.weight", "output_norm.weight", "token_embd.weight", "blk.2.attn_k.weight",
		"blk.2.attn_v.weight", "blk.10.attn_q.weight",
	};
	tfs_model *m = model(&k, t, 6);
	tfs_qplan *p = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q8_0, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_qplan_n_tensors(p), 6);
	uint64_t off = 0;
	for (size_t i = 0; i < 6; i++) {
		const tfs_qtensor *q = tfs_qplan_tensor(p, i);
		cr_assert_str_eq(q->name, want[i]);
		cr_assert_eq(q->offset, off, "%s", q->name);
		off += (q->nbytes + 31) / 32 * 32;
	}
	cr_assert_eq(tfs_qplan_data_size(p), off);
	tfs_qplan_free(p);
	tfs_model_free(m);
}

Test(qplan, q4_k_m_mix, .init = setup, .fini = teardown)
{
	tfs_model *m = llama2(false);
	tfs_qplan *p = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, NULL, &err), 0, "%s", err.msg);
	cr_assert_str_eq(type_of(p, "output.weight"), "Q6_K");
	cr_assert_str_eq(type_of(p, "token_embd.weight"), "Q4_K");
	cr_assert_str_eq(type_of(p, "output_norm.weight"), "F32");
	cr_assert_not(find(p, "output_norm.weight")->convert);
	/* use_more_bits(i, 2): the last layer of two */
	cr_assert_str_eq(type_of(p, "blk.0.attn_v.weight"), "Q4_K");
	cr_assert_str_eq(type_of(p, "blk.1.attn_v.weight"), "Q6_K");
	cr_assert_str_eq(type_of(p, "blk.0.ffn_down.weight"), "Q4_K");
	cr_assert_str_eq(type_of(p, "blk.1.ffn_down.weight"), "Q6_K");
	cr_assert_str_eq(type_of(p, "blk.1.attn_q.weight"), "Q4_K");
	tfs_qplan_free(p);

	/* tied: token_embd takes output's type */
	tfs_model_free(m);
	m = llama2(true);
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, NULL, &err), 0, "%s", err.msg);
	cr_assert_str_eq(type_of(p, "token_embd.weight"), "Q6_K");
	tfs_qplan_free(p);

	/* --leave-output-tensor, --pure */
	tfs_model_free(m);
	m = llama2(false);
	tfs_qplan_opts o = { .leave_output = true };
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, &o, &err), 0, "%s", err.msg);
	cr_assert_str_eq(type_of(p, "output.weight"), "F16");
	tfs_qplan_free(p);
	o = (tfs_qplan_opts){ .pure = true };
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, &o, &err), 0, "%s", err.msg);
	cr_assert_str_eq(type_of(p, "output.weight"), "Q4_K");
	cr_assert_str_eq(type_of(p, "blk.1.attn_v.weight"), "Q4_K");
	tfs_qplan_free(p);
	tfs_model_free(m);
}

Test(qplan, fallback_and_dims, .init = setup, .fini = teardown)
{
	keys k = { 0 };
	llama_keys(&k, 1, 64, 2, 2);
	static const tspec t[] = {
		{ "blk.0.attn_q.weight", TFS_DT_F16, 2, { 64, 64 } },      /* Q4_K -> Q5_0 */
		{ "blk.0.ffn_down.weight", TFS_DT_F16, 2, { 80, 64 } },    /* -> F16 */
		{ "blk.0.extra.weight", TFS_DT_F16, 2, { 256, 1 } },       /* 1-D for ggml */
		{ "blk.0.extra.bias", TFS_DT_F16, 2, { 256, 4 } },         /* not a weight */
	};
	tfs_model *m = model(&k, t, 4);
	tfs_qplan *p = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_S, NULL, &err), 0, "%s", err.msg);
	const tfs_qtensor *q = find(p, "blk.0.attn_q.weight");
	cr_assert_str_eq(tfs_dtype(q->dtype)->name, "Q5_0");
	cr_assert(q->fallback && q->convert);
	q = find(p, "blk.0.ffn_down.weight");
	cr_assert_str_eq(tfs_dtype(q->dtype)->name, "F16");
	cr_assert(q->fallback && !q->convert);
	q = find(p, "blk.0.extra.weight");
	cr_assert_eq(q->n_dims, 1);
	cr_assert_not(q->convert);
	cr_assert_not(find(p, "blk.0.extra.bias")->convert);
	tfs_qplan_free(p);

	/* Q1_0 (blocks of 128) has no fallback: llama.cpp fails */
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q1_0, NULL, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "no fallback") != NULL, "%s", err.msg);
	tfs_model_free(m);
}

Test(qplan, keys, .init = setup, .fini = teardown)
{
	keys k = { 0 };
	key_str(&k, "general.architecture", "llama");
	key_u32(&k, "general.file_type", 1);
	key_u32(&k, "llama.block_count", 1);
	key_u32(&k, "split.count", 1);
	key_str(&k, "general.name", "x");
	static const tspec t[] = { { "blk.0.attn_q.weight", TFS_DT_F16, 2, { 256, 256 } } };
	tfs_model *m = model(&k, t, 1);
	tfs_qplan *p = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q6_K, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_qplan_n_kv(p), 3);
	cr_assert_str_eq(tfs_qplan_kv(p, 0)->key, "general.quantization_version");
	cr_assert_str_eq(tfs_qplan_kv(p, 1)->key, "general.file_type");
	cr_assert_eq(tfs_qplan_kv(p, 1)->type, TFS_GGUF_UINT32);
	cr_assert_eq(tfs_qplan_kv(p, 1)->data[0], TFS_FTYPE_Q6_K);
	cr_assert_eq(tfs_qplan_kv(p, 2)->op, TFS_QPLAN_KV_REMOVE);
	cr_assert_str_eq(tfs_qplan_kv(p, 2)->key, "split.count");

	cr_assert_eq(tfs_qplan_apply_kv(p, m, &err), 0, "%s", err.msg);
	static const char *const want[] = {
		"general.architecture", "llama.block_count", "general.name",
		"general.quantization_version", "general.file_type",
	};
	size_t n = 0;
	for (size_t i = 0; i < tfs_model_n_kv(m); i++) {
		const tfs_kv *kv = tfs_model_kv(m, i);
		if (kv->deleted)
			continue;
		cr_assert_lt(n, 5);
		cr_assert_str_eq(kv->name, want[n]);
		n++;
	}
	cr_assert_eq(n, 5);
	tfs_qplan_free(p);
	tfs_model_free(m);
}

Test(qplan, refusals, .init = setup, .fini = teardown)
{
	tfs_model *m = llama2(false);
	tfs_qplan *p = NULL;
	tfs_error err = { 0 };

	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_IQ2_XS, NULL, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "importance matrix") != NULL, "%s", err.msg);
	cr_assert_null(p);
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q2_K_S, NULL, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "importance matrix") != NULL, "%s", err.msg);
	cr_assert_eq(tfs_qplan_new(&p, m, 39, NULL, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "Q4_K_M") != NULL, "the valid types are listed: %s", err.msg);
	/* the mixes that need no imatrix */
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_IQ3_M, NULL, &err), 0, "%s", err.msg);
	tfs_qplan_free(p);
	tfs_model_free(m);

	/* an already quantized tensor */
	keys k = { 0 };
	llama_keys(&k, 1, 256, 4, 4);
	static const tspec t[] = { { "blk.0.attn_q.weight", TFS_DT_Q8_0, 2, { 256, 256 } } };
	m = model(&k, t, 1);
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, NULL, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "requantiz") != NULL, "%s", err.msg);
	tfs_qplan_opts o = { .allow_requantize = true };
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, &o, &err), 0, "%s", err.msg);
	tfs_qplan_free(p);
	/* the same type: copied, no requantizing */
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q8_0, NULL, &err), 0, "%s", err.msg);
	cr_assert_not(tfs_qplan_tensor(p, 0)->convert);
	tfs_qplan_free(p);
	tfs_model_free(m);
}

Test(qplan, bad_models, .init = setup, .fini = teardown)
{
	tfs_qplan *p = NULL;
	tfs_error err = { 0 };
	keys k = { 0 };
	key_u32(&k, "llama.block_count", 1);
	static const tspec t[] = { { "blk.0.attn_q.weight", TFS_DT_F16, 2, { 256, 256 } } };
	tfs_model *m = model(&k, t, 1);
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, NULL, &err), TFS_E_FORMAT);
	cr_assert(strstr(err.msg, "general.architecture") != NULL, "%s", err.msg);
	tfs_model_free(m);

	/* experts: the layer comes from the name, which must have one */
	k = (keys){ 0 };
	llama_keys(&k, 1, 256, 4, 4);
	key_u32(&k, "llama.expert_count", 4);
	static const tspec e[] = { { "ffn_down_exps.weight", TFS_DT_F16, 3, { 256, 256, 4 } } };
	m = model(&k, e, 1);
	cr_assert_eq(tfs_qplan_new(&p, m, TFS_FTYPE_Q4_K_M, NULL, &err), TFS_E_FORMAT);
	cr_assert(strstr(err.msg, "ffn_down_exps.weight") != NULL, "%s", err.msg);
	tfs_model_free(m);
}
