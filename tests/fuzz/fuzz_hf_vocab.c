/*
 * fuzz_hf_vocab.c - libFuzzer harness: the input is a Hugging Face repo's tokenizer file, read
 * by tfs_hf_vocab_keys: a tokenizer.model (SentencePiece protobuf) when the first byte is even,
 * else a tokenizer.json (the rest of the input either way), for LlamaForCausalLM,
 * Qwen2ForCausalLM or NomicBertModel's MoE variant (its bits 1-2).
 *
 * Each run must succeed or fail with a message.  A tokenizer.model that parses must hold
 * what SentencePiece's loader checks (non-empty pieces inside the input, known types, one
 * unknown piece), and then give one token per piece.  A tokenizer.json that parses
 * (hf_tokjson.c) must have ordered offsets inside its buffers, every vocabulary entry found
 * by its text, and nothing left when it fails.
 */
#include "fuzz.h"

#include <string.h>

#include "hf_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
	const char *name;
	const uint8_t *data;
	size_t size;
	const char *config;   /* tokenizer_config.json's text, or NULL: none */
} one_file;

static int read_one(void *ctx, const char *name, uint8_t **data, uint64_t *len, tfs_error *err)
{
	const one_file *f = ctx;
	bool cfg = f->config && strcmp(name, "tokenizer_config.json") == 0;
	if (!cfg && strcmp(name, f->name) != 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no such file", name);
	const uint8_t *src = cfg ? (const uint8_t *)f->config : f->data;
	size_t size = cfg ? strlen(f->config) : f->size;
	*data = malloc(size + 1);
	if (!*data)
		fz_fail("out of memory");
	memcpy(*data, src, size);
	(*data)[size] = 0;
	*len = size;
	return 0;
}

static void check_spm(const uint8_t *data, size_t size)
{
	tfs_spm_model m;
	tfs_error e = { 0 };
	if (tfs_spm_parse(&m, data, size, "tokenizer.model", &e) != 0) {
		if (!e.msg[0] || m.pieces)
			fz_fail("a failed parse without a message, or with pieces left");
		return;
	}
	size_t unk = 0;
	for (size_t i = 0; i < m.n; i++) {
		const tfs_spm_piece *p = &m.pieces[i];
		if (!p->len || (const uint8_t *)p->piece < data ||
		    (const uint8_t *)p->piece + p->len > data + size)
			fz_fail("piece %zu is empty or outside the input", i);
		if (p->type < TFS_TOK_NORMAL || p->type > TFS_TOK_BYTE)
			fz_fail("piece %zu has type %d", i, p->type);
		unk += p->type == TFS_TOK_UNKNOWN;
	}
	if (unk != 1)
		fz_fail("%zu unknown pieces", unk);
	tfs_spm_free(&m);
}

static void check_tokjson(const uint8_t *data, size_t size)
{
	tfs_hf_tok t;
	tfs_error e = { 0 };
	if (tfs_hf_tok_parse(&t, (const char *)data, size, "tokenizer.json", &e) != 0) {
		if (!e.msg[0] || t.root || t.text || t.off || t.moff)
			fz_fail("a failed parse without a message, or with something left");
		return;
	}
	for (size_t k = 0; k < t.n; k++) {
		uint32_t id;
		if (t.off[k] > t.off[k + 1])
			fz_fail("vocabulary offsets out of order at %zu", k);
		if (!tfs_hf_tok_id(&t, t.text + t.off[k], t.off[k + 1] - t.off[k], &id) ||
		    id != t.id[k])
			fz_fail("vocabulary entry %zu not found by its text", k);
	}
	for (size_t k = 0; k < 2 * t.n_merges; k++)
		if (t.moff[k] > t.moff[k + 1])
			fz_fail("merge offsets out of order at %zu", k);
	tfs_hf_tok_clear(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	one_file f = { (data[0] & 1) ? "tokenizer.json" : "tokenizer.model", data + 1, size - 1,
		       NULL };
	if (!(data[0] & 1))
		check_spm(f.data, f.size);
	else
		check_tokjson(f.data, f.size);
	tfs_hf_files files = { .read = read_one, .ctx = &f, .where = "repo" };
	/* the class by the first byte's next bits: Llama's and Qwen2's vocabularies, and
	 * nomic-bert-moe's (a Unigram tokenizer.json read as transformers does) */
	static const char *const classes[] = { "LlamaForCausalLM", "Qwen2ForCausalLM",
					       "NomicBertModel", "NomicBertModel" };
	const char *cls = classes[(data[0] >> 1) & 3];
	json_t *config = json_pack("{s:i}", "vocab_size", 512);
	if (strcmp(cls, "NomicBertModel") == 0) {   /* (its tokenizer class: the one it reads) */
		json_object_set_new(config, "moe_every_n_layers", json_integer(1));
		f.config = "{\"tokenizer_class\": \"XLMRobertaTokenizer\"}";
	}
	tfs_hf_kvs out = { 0 };
	tfs_error e = { 0 };
	int rc = tfs_hf_vocab_keys(&out, &files, cls, config, &e);
	if (rc != 0 && !e.msg[0])
		fz_fail("tfs_hf_vocab_keys failed (%d) without a message", rc);
	if (rc == 0 && tfs_hf_kvs_find(&out, "tokenizer.ggml.model") < 0)
		fz_fail("keys without tokenizer.ggml.model");
	tfs_hf_kvs_free(&out);
	json_decref(config);
	return 0;
}
