/*
 * fuzz_hf_plan.c - libFuzzer harness: the GGUF view's plan of a Hugging Face model
 * (tfs_hf_plan_open, tfs_hf_tensor_read).  The input is config.json; the weights are a fixed
 * tiny llama-shaped safetensors file held in memory (hidden 64, 4 heads, 2 KV heads, 2
 * layers, ff 96, vocab 32, BF16 and one F32 tensor per layer, q/k biases), with Qwen3's q/k
 * norms when the input names Qwen3.  The input's last byte picks the outtype (seeds end in
 * white space for that: "\n" auto, " " f16, "\r" bf16, "\t" q8_0).
 *
 * Each run must succeed or fail with a message; on success the header is as long as the plan
 * says, tensors are laid out in order at aligned offsets, and every tensor reads whole, and
 * at an odd offset equal to the whole read.
 */
#include "fuzz.h"

#include <string.h>

#include "hf_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tfs_model *models[2];   /* without and with q/k norms */

static void add(tfs_buf *h, tfs_buf *body, const char *name, const char *dt, int64_t a,
		int64_t b)
{
	uint64_t n = (uint64_t)a * (uint64_t)(b ? b : 1), es = strcmp(dt, "F32") ? 2 : 4;
	uint64_t off = body->len;
	if (b)
		tfs_buf_printf(h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":"
			       "[%llu,%llu]}", h->len > 1 ? "," : "", name, dt, (long long)a,
			       (long long)b, (unsigned long long)off, (unsigned long long)(off + n * es));
	else
		tfs_buf_printf(h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":"
			       "[%llu,%llu]}", h->len > 1 ? "," : "", name, dt, (long long)a,
			       (unsigned long long)off, (unsigned long long)(off + n * es));
	for (uint64_t i = 0; i < n * es; i++) {
		uint8_t v = (uint8_t)(i * 131 + off * 7);
		if (es == 2 && i % 2)
			v = (uint8_t)(0x3c + (v & 0x83));   /* finite, including a few NaN-free patterns */
		tfs_buf_append(body, &v, 1);
	}
}

static tfs_model *make_model(bool norms)
{
	tfs_buf h = { 0 }, body = { 0 };
	tfs_buf_printf(&h, "{");
	add(&h, &body, "lm_head.weight", "BF16", 32, 64);
	add(&h, &body, "model.embed_tokens.weight", "BF16", 32, 64);
	for (int l = 0; l < 2; l++) {
		char n[96];
#define L(s, dt, a, b) (snprintf(n, sizeof n, "model.layers.%d.%s", l, s), add(&h, &body, n, dt, a, b))
		L("input_layernorm.weight", "BF16", 64, 0);
		L("mlp.down_proj.weight", "BF16", 64, 96);
		L("mlp.gate_proj.weight", "BF16", 96, 64);
		L("mlp.up_proj.weight", "BF16", 96, 64);
		L("post_attention_layernorm.weight", "BF16", 64, 0);
		if (norms)
			L("self_attn.k_norm.weight", "BF16", 16, 0);
		L("self_attn.k_proj.bias", "BF16", 32, 0);
		L("self_attn.k_proj.weight", "BF16", 32, 64);
		L("self_attn.o_proj.weight", "BF16", 64, 64);
		if (norms)
			L("self_attn.q_norm.weight", "BF16", 16, 0);
		L("self_attn.q_proj.bias", "BF16", 64, 0);
		L("self_attn.q_proj.weight", "BF16", 64, 64);
		L("self_attn.v_proj.weight", "F32", 32, 64);
#undef L
	}
	add(&h, &body, "model.norm.weight", "BF16", 64, 0);
	tfs_buf_printf(&h, "}");
	while (h.len % 8)
		tfs_buf_append(&h, " ", 1);
	size_t st_size = 8 + h.len + body.len;
	uint8_t *st_bytes = malloc(st_size);   /* the model borrows it for the process's life */
	uint64_t hl = h.len;
	memcpy(st_bytes, &hl, 8);
	memcpy(st_bytes + 8, h.data, h.len);
	memcpy(st_bytes + 8 + h.len, body.data, body.len);
	tfs_buf_free(&h);
	tfs_buf_free(&body);
	tfs_error err = { 0 };
	tfs_model *m;
	if (tfs_model_open_mem(&m, "model.safetensors", st_bytes, st_size, &err))
		fz_fail("the harness's model does not open: %s", err.msg);
	return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!models[0]) {
		models[0] = make_model(false);
		models[1] = make_model(true);
	}
	const tfs_model *st = models[memmem(data, size, "Qwen3", 5) != NULL];
	fz_one_file cfg = { "config.json", data, size };
	tfs_hf_files files = { .read = fz_read_one_file, .ctx = &cfg, .where = "fuzz" };
	tfs_hf_opts o = { .outtype = size ? (tfs_hf_outtype)(data[size - 1] % 5) : TFS_HF_OUT_AUTO,
			  .no_vocab = true, .dir_name = "fuzz" };
	tfs_hf_plan *p = NULL;
	tfs_error err = { 0 };
	if (tfs_hf_plan_open(&p, &files, st, &o, &err) != 0) {
		if (!err.msg[0] || p)
			fz_fail("a failed plan without a message, or with a plan");
		return 0;
	}
	tfs_buf h = { 0 };
	if (tfs_hf_plan_header(&h, p, &err) || h.len != tfs_hf_plan_header_size(p))
		fz_fail("header of %zu bytes, the plan says %llu", h.len,
			(unsigned long long)tfs_hf_plan_header_size(p));
	tfs_buf_free(&h);
	uint64_t pos = tfs_hf_plan_header_size(p);
	for (size_t i = 0; i < tfs_hf_plan_n_tensors(p); i++) {
		const tfs_hf_tensor *t = tfs_hf_plan_tensor(p, i);
		if (t->offset != pos || t->offset % 32)
			fz_fail("%s at %llu, expected %llu", t->name, (unsigned long long)t->offset,
				(unsigned long long)pos);
		pos += (t->nbytes + 31) / 32 * 32;
		if (t->nbytes > (64u << 20))
			fz_fail("%s: %llu bytes", t->name, (unsigned long long)t->nbytes);
		uint8_t *whole = malloc(t->nbytes + 1), *part = malloc(t->nbytes + 1);
		if (!whole || !part)
			fz_fail("out of memory");
		if (tfs_hf_tensor_read(p, i, 0, t->nbytes, whole, &err) != (int64_t)t->nbytes)
			fz_fail("%s: %s", t->name, err.msg);
		uint64_t off = t->nbytes / 3 | 1;
		if (off < t->nbytes) {
			int64_t got = tfs_hf_tensor_read(p, i, off, t->nbytes, part, &err);
			if (got != (int64_t)(t->nbytes - off) || memcmp(part, whole + off, (size_t)got))
				fz_fail("%s: a read at %llu differs", t->name, (unsigned long long)off);
		}
		free(whole);
		free(part);
	}
	if (pos != tfs_hf_plan_file_size(p))
		fz_fail("file of %llu bytes, the plan says %llu", (unsigned long long)pos,
			(unsigned long long)tfs_hf_plan_file_size(p));
	tfs_hf_plan_free(p);
	return 0;
}
