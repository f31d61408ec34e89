/*
 * test_hf_vocab.c - the tokenizer keys of the Hugging Face GGUF view (codec/hf/hf_vocab.c,
 * hf_spm.c, hf_bpe.c): a SentencePiece model built byte by byte here, small tokenizer.json
 * files, and broken inputs each refused with one message naming the file and the problem.
 * The comparisons with the reference converter and llama.cpp are the scripts in tests/hf/.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "hf_vocab.h"

/* ==== an in-memory repo ==== */

#define MAX_FILES 8

typedef struct {
	const char *name[MAX_FILES];
	const uint8_t *data[MAX_FILES];
	size_t len[MAX_FILES];
	size_t n;
} mem_repo;

static int mem_read(void *ctx, const char *name, uint8_t **data, uint64_t *len, tfs_error *err)
{
	mem_repo *r = ctx;
	for (size_t i = 0; i < r->n; i++) {
		if (strcmp(r->name[i], name) != 0)
			continue;
		*data = malloc(r->len[i] + 1);
		cr_assert(*data);
		memcpy(*data, r->data[i], r->len[i]);
		(*data)[r->len[i]] = 0;
		*len = r->len[i];
		return 0;
	}
	return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no such file", name);
}

static void repo_add(mem_repo *r, const char *name, const void *data, size_t len)
{
	cr_assert(r->n < MAX_FILES);
	r->name[r->n] = name;
	r->data[r->n] = data;
	r->len[r->n++] = len;
}

static void repo_add_str(mem_repo *r, const char *name, const char *text)
{
	repo_add(r, name, text, strlen(text));
}

/* Runs tfs_hf_vocab_keys on the repo with config (JSON text, also the repo's config.json
 * unless it has one); the keys go to out. */
static int run(mem_repo *r, const char *arch, const char *config, tfs_hf_kvs *out,
	       tfs_error *err)
{
	tfs_hf_files f = { .read = mem_read, .ctx = r, .where = "repo" };
	json_t *cfg = json_loads(config, 0, NULL);
	mem_repo with = *r;
	bool have = false;
	for (size_t i = 0; i < r->n; i++)
		have |= strcmp(r->name[i], "config.json") == 0;
	if (!have) {
		repo_add_str(&with, "config.json", config);
		f.ctx = &with;
	}
	cr_assert(cfg, "bad test config %s", config);
	int rc = tfs_hf_vocab_keys(out, &f, arch, cfg, err);
	json_decref(cfg);
	return rc;
}

/* ==== protobuf writing (the test's own, to build tokenizer.model files) ==== */

typedef struct {
	uint8_t b[4096];
	size_t n;
} pb;

static void pb_varint(pb *p, uint64_t v)
{
	do {
		cr_assert(p->n < sizeof p->b);
		p->b[p->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void pb_bytes(pb *p, uint32_t field, const void *d, size_t n)
{
	pb_varint(p, (uint64_t)field << 3 | 2);
	pb_varint(p, n);
	cr_assert(p->n + n <= sizeof p->b);
	memcpy(p->b + p->n, d, n);
	p->n += n;
}

/* A SentencePiece message: 1 piece, 2 score, 3 type (type 0: field left out). */
static void pb_piece(pb *model, const char *text, float score, int type)
{
	pb m = { .n = 0 };
	uint32_t bits;
	pb_bytes(&m, 1, text, strlen(text));
	memcpy(&bits, &score, 4);
	pb_varint(&m, 2 << 3 | 5);
	for (int i = 0; i < 4; i++)
		m.b[m.n++] = (uint8_t)(bits >> (8 * i));
	if (type) {
		pb_varint(&m, 3 << 3 | 0);
		pb_varint(&m, (uint64_t)type);
	}
	pb_bytes(model, 1, m.b, m.n);
}

/* trainer_spec { model_type, byte_fallback } */
static void pb_trainer(pb *model, int model_type, bool byte_fallback)
{
	pb t = { .n = 0 };
	pb_varint(&t, 3 << 3 | 0);
	pb_varint(&t, (uint64_t)model_type);
	pb_varint(&t, 35 << 3 | 0);
	pb_varint(&t, byte_fallback);
	pb_bytes(model, 2, t.b, t.n);
}

/* A small valid model: <unk> <s> </s> ▁a b(user-defined) c(unused), BPE. */
static void small_model(pb *m)
{
	m->n = 0;
	pb_trainer(m, 2, false);
	pb_piece(m, "<unk>", 0.0f, TFS_TOK_UNKNOWN);
	pb_piece(m, "<s>", 0.0f, TFS_TOK_CONTROL);
	pb_piece(m, "</s>", 0.0f, TFS_TOK_CONTROL);
	pb_piece(m, "\xe2\x96\x81" "a", -1.5f, 0);
	pb_piece(m, "b", -2.25f, TFS_TOK_USER_DEFINED);
	pb_piece(m, "c", -3.0f, TFS_TOK_UNUSED);
}

/* ==== reading keys back ==== */

static const tfs_hf_kv *key(const tfs_hf_kvs *l, const char *name)
{
	long i = tfs_hf_kvs_find(l, name);
	cr_assert(i >= 0, "key %s missing", name);
	return &l->kv[i];
}

static uint64_t le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Element k of a string array key, as a NUL-terminated copy in buf. */
static const char *arr_str(const tfs_hf_kv *kv, uint64_t k, char *buf, size_t cap)
{
	cr_assert_eq(kv->type, TFS_GGUF_ARRAY);
	cr_assert_eq(le(kv->data, 4), TFS_GGUF_STRING);
	const uint8_t *p = kv->data + 12;
	for (uint64_t i = 0; i < k; i++)
		p += 8 + le(p, 8);
	uint64_t n = le(p, 8);
	cr_assert(n < cap);
	memcpy(buf, p + 8, n);
	buf[n] = 0;
	return buf;
}

static int32_t arr_i32(const tfs_hf_kv *kv, uint64_t k)
{
	return (int32_t)le(kv->data + 12 + 4 * k, 4);
}

static float arr_f32(const tfs_hf_kv *kv, uint64_t k)
{
	uint32_t b = (uint32_t)le(kv->data + 12 + 4 * k, 4);
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static void assert_str(const tfs_hf_kv *kv, const char *want)
{
	cr_assert_eq(kv->type, TFS_GGUF_STRING);
	cr_assert_eq(le(kv->data, 8), strlen(want), "%s", kv->name);
	cr_assert(memcmp(kv->data + 8, want, strlen(want)) == 0, "%s", kv->name);
}

/* ==== SentencePiece ==== */

Test(hf_vocab, sentencepiece_keys_in_converter_order)
{
	pb m;
	small_model(&m);
	mem_repo r = { .n = 0 };
	repo_add(&r, "tokenizer.model", m.b, m.n);
	repo_add_str(&r, "tokenizer_config.json",
		     "{\"add_bos_token\": true, \"chat_template\": \"T\", \"add_prefix_space\": false,"
		     " \"added_tokens_decoder\": {\"6\": {\"content\": \"\xe2\x96\x81x\xe2\x96\x81\"}}}");
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, "LlamaForCausalLM", "{\"vocab_size\": 8, \"bos_token_id\": 1}", &out,
			 &err), 0, "%s", err.msg);
	/* LlamaModel.set_vocab writes add_prefix_space before the vocabulary */
	static const char *const order[] = { "tokenizer.ggml.add_space_prefix",
		"tokenizer.ggml.model", "tokenizer.ggml.pre",
		"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token",
		"tokenizer.chat_template" };
	cr_assert_eq(out.n, sizeof order / sizeof *order);
	for (size_t i = 0; i < out.n; i++)
		cr_assert_str_eq(out.kv[i].name, order[i]);
	assert_str(key(&out, "tokenizer.ggml.model"), "llama");
	assert_str(key(&out, "tokenizer.ggml.pre"), "default");
	char buf[64];
	const tfs_hf_kv *tok = key(&out, "tokenizer.ggml.tokens");
	const tfs_hf_kv *ty = key(&out, "tokenizer.ggml.token_type");
	const tfs_hf_kv *sc = key(&out, "tokenizer.ggml.scores");
	cr_assert_eq(le(tok->data + 4, 8), 8);
	cr_assert_str_eq(arr_str(tok, 3, buf, sizeof buf), "\xe2\x96\x81" "a");
	cr_assert_str_eq(arr_str(tok, 6, buf, sizeof buf), " x ");   /* user-defined: spaces */
	cr_assert_str_eq(arr_str(tok, 7, buf, sizeof buf), "[PAD7]");
	static const int32_t types[] = { 2, 3, 3, 1, 1, 5, 4, 5 };
	static const float scores[] = { 0, 0, 0, -1.5f, -2.25f, -3.0f, -1000.0f, -10000.0f };
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(arr_i32(ty, i), types[i], "type of %d", i);
		cr_assert_eq(arr_f32(sc, i), scores[i], "score of %d", i);
	}
	cr_assert_eq(le(key(&out, "tokenizer.ggml.bos_token_id")->data, 4), 1);
	tfs_hf_kvs_free(&out);
}

/* One broken tokenizer.model: the message must hold each of `want`. */
static void spm_refused(const pb *m, const char *want)
{
	mem_repo r = { .n = 0 };
	repo_add(&r, "tokenizer.model", m->b, m->n);
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, "LlamaForCausalLM", "{}", &out, &err), TFS_E_FORMAT, "%s", want);
	cr_assert(strncmp(err.msg, "repo/tokenizer.model: ", 22) == 0, "%s", err.msg);
	cr_assert(strstr(err.msg, want), "'%s' not in: %s", want, err.msg);
	tfs_hf_kvs_free(&out);
}

Test(hf_vocab, spm_truncated)
{
	pb m;
	small_model(&m);
	m.n -= 3;
	spm_refused(&m, "truncated at offset");
}

Test(hf_vocab, spm_group_wire_type)
{
	pb m;
	small_model(&m);
	pb_varint(&m, 7 << 3 | 3);
	spm_refused(&m, "wire type 3");
}

Test(hf_vocab, spm_long_varint)
{
	pb m;
	small_model(&m);
	pb_varint(&m, 9 << 3 | 0);
	for (int i = 0; i < 10; i++)
		m.b[m.n++] = 0xff;
	m.b[m.n++] = 0x01;
	spm_refused(&m, "varint longer than 64 bits");
}

Test(hf_vocab, spm_empty_piece)
{
	pb m;
	small_model(&m);
	pb_piece(&m, "", 0.0f, 0);
	spm_refused(&m, "piece 6 is empty");
}

Test(hf_vocab, spm_duplicate_piece)
{
	pb m;
	small_model(&m);
	pb_piece(&m, "\xe2\x96\x81" "a", 0.0f, 0);
	spm_refused(&m, "is already piece 3");
}

Test(hf_vocab, spm_no_unknown)
{
	pb m = { .n = 0 };
	pb_piece(&m, "a", 0.0f, 0);
	spm_refused(&m, "no unknown piece");
}

Test(hf_vocab, spm_two_unknown)
{
	pb m;
	small_model(&m);
	pb_piece(&m, "<unk2>", 0.0f, TFS_TOK_UNKNOWN);
	spm_refused(&m, "both the unknown piece");
}

Test(hf_vocab, spm_byte_without_fallback)
{
	pb m;
	small_model(&m);
	pb_piece(&m, "<0x41>", 0.0f, TFS_TOK_BYTE);
	spm_refused(&m, "although byte_fallback is false");
}

Test(hf_vocab, spm_fallback_missing_bytes)
{
	pb m = { .n = 0 };
	pb_trainer(&m, 2, true);
	pb_piece(&m, "<unk>", 0.0f, TFS_TOK_UNKNOWN);
	pb_piece(&m, "<0x00>", 0.0f, TFS_TOK_BYTE);
	spm_refused(&m, "byte piece <0x01> is missing");
}

Test(hf_vocab, spm_invalid_utf8)
{
	pb m;
	small_model(&m);
	pb_piece(&m, "\xc3\x28", 0.0f, 0);
	spm_refused(&m, "not valid UTF-8");
}

/* A vocab_size below the pieces of tokenizer.model: the converter keeps the first ones
 * ("ignore tokens from 4: id is out of range"); Phi-3's converter fails (IndexError). */
Test(hf_vocab, spm_vocab_size_too_small)
{
	pb m;
	small_model(&m);
	mem_repo r = { .n = 0 };
	repo_add(&r, "tokenizer.model", m.b, m.n);
	repo_add_str(&r, "tokenizer_config.json", "{\"tokenizer_class\": \"LlamaTokenizer\"}");
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, "Qwen2ForCausalLM", "{\"vocab_size\": 4}", &out, &err), 0, "%s",
		     err.msg);
	const tfs_hf_kv *tok = key(&out, "tokenizer.ggml.tokens");
	uint64_t n;
	memcpy(&n, tok->data + 4, 8);
	cr_assert_eq(n, 4);
	tfs_hf_kvs_free(&out);
	cr_assert_eq(run(&r, "Phi3ForCausalLM", "{\"vocab_size\": 4}", &out, &err), TFS_E_FORMAT);
	cr_assert(strstr(err.msg, "config.json: vocab_size 4 is less than the 6 pieces"), "%s",
		  err.msg);
	tfs_hf_kvs_free(&out);
}

/* ==== tokenizer.json ==== */

/* A byte-level BPE over the bytes 'a' 'b' 'Ġ' (space) with merges a b -> ab, in the llama3
 * pre-tokenizer configuration. */
#define LLAMA3_PRE "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", " \
	"\"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?" \
	"\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|" \
	"\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": " \
	"\"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]}"

static char *bpe_json(const char *pre, const char *merges, const char *model_type)
{
	char *s = NULL;
	int n = asprintf(&s, "{\"version\": \"1.0\", \"normalizer\": null, \"pre_tokenizer\": %s,"
			 " \"added_tokens\": [{\"id\": 4, \"content\": \"<|end|>\", \"special\": true},"
			 " {\"id\": 5, \"content\": \"\xe2\x96\x81note\", \"special\": false}],"
			 " \"decoder\": {\"type\": \"ByteLevel\"},"
			 " \"model\": {\"type\": \"%s\", \"ignore_merges\": true, \"byte_fallback\": false,"
			 " \"vocab\": {\"a\": 0, \"b\": 1, \"\xc4\xa0\": 2, \"ab\": 3},"
			 " \"merges\": %s}}", pre, model_type, merges);
	cr_assert(n > 0);
	return s;
}

Test(hf_vocab, bpe_keys_both_merge_forms)
{
	static const char *const forms[] = { "[\"a b\"]", "[[\"a\", \"b\"]]" };
	for (int f = 0; f < 2; f++) {
		char *tj = bpe_json(LLAMA3_PRE, forms[f], "BPE");
		mem_repo r = { .n = 0 };
		repo_add_str(&r, "tokenizer.json", tj);
		repo_add_str(&r, "tokenizer_config.json", "{\"eos_token\": \"<|end|>\","
			     " \"chat_template\": [{\"name\": \"default\", \"template\": \"D\"},"
			     " {\"name\": \"tool-use\", \"template\": \"U\"}]}");
		tfs_hf_kvs out = { 0 };
		tfs_error err = { 0 };
		cr_assert_eq(run(&r, "LlamaForCausalLM", "{\"vocab_size\": 7}", &out, &err), 0, "%s",
			     err.msg);
		static const char *const order[] = { "tokenizer.ggml.model", "tokenizer.ggml.pre",
			"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
			"tokenizer.ggml.eos_token_id", "tokenizer.chat_template.tool_use",
			"tokenizer.chat_templates", "tokenizer.chat_template" };
		cr_assert_eq(out.n, sizeof order / sizeof *order);
		for (size_t i = 0; i < out.n; i++)
			cr_assert_str_eq(out.kv[i].name, order[i]);
		assert_str(key(&out, "tokenizer.ggml.model"), "gpt2");
		/* no BOS template, and not Meta's vocabulary: the llama3 configuration's rule */
		assert_str(key(&out, "tokenizer.ggml.pre"), "smaug-bpe");
		char buf[64];
		const tfs_hf_kv *tok = key(&out, "tokenizer.ggml.tokens");
		const tfs_hf_kv *ty = key(&out, "tokenizer.ggml.token_type");
		cr_assert_str_eq(arr_str(tok, 5, buf, sizeof buf), " note");
		cr_assert_str_eq(arr_str(tok, 6, buf, sizeof buf), "[PAD6]");
		static const int32_t types[] = { 1, 1, 1, 1, 3, 4, 5 };
		for (int i = 0; i < 7; i++)
			cr_assert_eq(arr_i32(ty, i), types[i], "type of %d", i);
		cr_assert_str_eq(arr_str(key(&out, "tokenizer.ggml.merges"), 0, buf, sizeof buf),
				 "a b");
		cr_assert_eq(le(key(&out, "tokenizer.ggml.eos_token_id")->data, 4), 4);
		assert_str(key(&out, "tokenizer.chat_template"), "D");
		tfs_hf_kvs_free(&out);
		free(tj);
	}
}

/* One broken tokenizer.json: code and each of `want` in the message. */
static void bpe_refused(const char *tj, const char *arch, int code, const char *want)
{
	mem_repo r = { .n = 0 };
	repo_add_str(&r, "tokenizer.json", tj);
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, arch, "{}", &out, &err), code, "%s: %s", want, err.msg);
	cr_assert(strncmp(err.msg, "repo/tokenizer.json: ", 21) == 0, "%s", err.msg);
	cr_assert(strstr(err.msg, want), "'%s' not in: %s", want, err.msg);
	tfs_hf_kvs_free(&out);
}

Test(hf_vocab, bpe_not_json)
{
	bpe_refused("{\"model\": ", "Qwen3ForCausalLM", TFS_E_FORMAT,
		    "tokenizer.json: not JSON: it ends at byte 10");
}

Test(hf_vocab, bpe_not_bpe)
{
	char *tj = bpe_json(LLAMA3_PRE, "[]", "WordPiece");
	bpe_refused(tj, "Qwen2ForCausalLM", TFS_E_FORMAT, "model type WordPiece");
	free(tj);
}

Test(hf_vocab, bpe_unknown_pre_tokenizer)
{
	char *tj = bpe_json("{\"type\": \"Whitespace\"}", "[\"a b\"]", "BPE");
	bpe_refused(tj, "Qwen2ForCausalLM", TFS_E_FORMAT,
		    "BPE pre-tokenizer not recognized: normalizer null with pre_tokenizer "
		    "{\"type\":\"Whitespace\"}");
	free(tj);
}

Test(hf_vocab, bpe_ambiguous_pre_tokenizer)
{
	char *tj = bpe_json("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
			    "\"trim_offsets\": true, \"use_regex\": true}", "[\"a b\"]", "BPE");
	bpe_refused(tj, "Qwen2ForCausalLM", TFS_E_FORMAT, "cannot be computed here, and its "
		    "pre-tokenizer (gpt2");
	free(tj);
}

Test(hf_vocab, bpe_merge_out_of_vocab)
{
	char *tj = bpe_json(LLAMA3_PRE, "[\"a x\"]", "BPE");
	bpe_refused(tj, "LlamaForCausalLM", TFS_E_FORMAT, "merge 0 'a' 'x'");
	free(tj);
}

/* Found by fuzz_hf_vocab: an empty first merge ("") made the reader take an offset of a NULL
 * buffer (UBSan: "applying zero offset to null pointer"); it is refused as a merge that is
 * not two parts. */
Test(hf_vocab, bpe_empty_merge)
{
	char *tj = bpe_json(LLAMA3_PRE, "[\"\"]", "BPE");
	bpe_refused(tj, "LlamaForCausalLM", TFS_E_FORMAT, "merge 0 is neither");
	free(tj);
}

/* Found by fuzz_hf_vocab too: an empty first vocabulary key without an id ({"": ,...}) made
 * the error message take an offset of a NULL buffer. */
Test(hf_vocab, bpe_empty_key_without_id)
{
	bpe_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\": , \"a\": 1}}}",
		    "LlamaForCausalLM", TFS_E_FORMAT, "vocab '' has no id");
}

Test(hf_vocab, bpe_bad_merges_format)
{
	char *tj = bpe_json(LLAMA3_PRE, "[7]", "BPE");
	bpe_refused(tj, "LlamaForCausalLM", TFS_E_FORMAT, "merge 0 is neither");
	free(tj);
}

Test(hf_vocab, llama_hf_style_refused)
{
	bpe_refused("{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {},"
		    " \"merges\": []}, \"decoder\": {\"type\": \"Sequence\"}}", "MistralForCausalLM",
		    TFS_E_UNSUPPORTED, "SentencePiece-style BPE");
}

Test(hf_vocab, no_tokenizer)
{
	mem_repo r = { .n = 0 };
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, "LlamaForCausalLM", "{}", &out, &err), TFS_E_NOTFOUND);
	cr_assert(strstr(err.msg, "neither tokenizer.model nor tokenizer.json"), "%s", err.msg);
}

Test(hf_vocab, unknown_architecture)
{
	mem_repo r = { .n = 0 };
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, "GPTNeoXForCausalLM", "{}", &out, &err), TFS_E_UNSUPPORTED);
	cr_assert(strstr(err.msg, "GPTNeoXForCausalLM"), "%s", err.msg);
}

Test(hf_vocab, big_integers_in_config)
{
	/* Python reads model_max_length = 10^30 written out; so must this */
	pb m;
	small_model(&m);
	mem_repo r = { .n = 0 };
	repo_add(&r, "tokenizer.model", m.b, m.n);
	repo_add_str(&r, "tokenizer_config.json",
		     "{\"model_max_length\": 1000000000000000019884624838656, \"add_eos_token\": true}");
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, "LlamaForCausalLM", "{}", &out, &err), 0, "%s", err.msg);
	cr_assert_eq(key(&out, "tokenizer.ggml.add_eos_token")->data[0], 1);
	tfs_hf_kvs_free(&out);
}

/* ==== tokenizer.json read compactly (hf_tokjson.c) ==== */

static int tok_parse(tfs_hf_tok *t, const char *text, tfs_error *err)
{
	return tfs_hf_tok_parse(t, text, strlen(text), "tokenizer.json", err);
}

static void assert_id(const tfs_hf_tok *t, const char *s, size_t n, uint32_t want)
{
	uint32_t id = 0;
	cr_assert(tfs_hf_tok_id(t, s, n, &id), "no id for '%.*s'", (int)n, s);
	cr_assert_eq(id, want, "'%.*s': %u, want %u", (int)n, s, id, want);
}

/* The vocabulary packed: escapes (a surrogate pair, \u0000, \/), a key given twice (its first
 * place, its last id, as Python's dict), the rest of the file as JSON with Python's big
 * integers; merges in both forms. */
Test(hf_tokjson, vocab_merges_and_the_rest)
{
	tfs_hf_tok t;
	tfs_error err = { 0 };
	const char *j = "{\"added_tokens\": [{\"id\": 9, \"content\": \"<x>\"}], \"model\": {"
		"\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"\\ud83e\\udd99\": 1, \"n\\u0000l\": 2, "
		"\"a\": 3, \"\\/\\\"\": 4}, \"merges\": [[\"a b\", \"c\"], [\"\\u0120\", \"x\"]], "
		"\"big\": 100000000000000000000}, \"model_max_length\": 1e30}";
	cr_assert_eq(tok_parse(&t, j, &err), 0, "%s", err.msg);
	cr_assert(t.has_vocab && t.has_merges && t.merge_pairs);
	cr_assert_eq(t.n, 4);   /* "a" once */
	assert_id(&t, "a", 1, 3);
	assert_id(&t, "\xf0\x9f\xa6\x99", 4, 1);
	assert_id(&t, "n\0l", 3, 2);
	assert_id(&t, "/\"", 2, 4);
	cr_assert_eq(t.off[1] - t.off[0], 1);   /* entry 0 is still "a" */
	cr_assert_eq(t.n_merges, 2);
	cr_assert_eq(t.moff[1] - t.moff[0], 3);   /* "a b": a part with a space */
	cr_assert_eq(memcmp(t.mtext + t.moff[2], "\xc4\xa0", 2), 0);
	const json_t *model = json_object_get(t.root, "model");
	cr_assert(!json_object_get(model, "vocab") && !json_object_get(model, "merges"));
	cr_assert(json_is_real(json_object_get(model, "big")));
	cr_assert_eq(json_array_size(json_object_get(t.root, "added_tokens")), 1);
	tfs_hf_tok_clear(&t);

	cr_assert_eq(tok_parse(&t, "{\"model\": {\"merges\": [\"a b\", \"a  b\"], \"vocab\": {}}}",
			       &err), 0, "%s", err.msg);
	cr_assert(!t.merge_pairs && t.n_merges == 2 && t.n == 0);
	cr_assert(t.mbad && !t.mbad[0] && t.mbad[1]);   /* two spaces: not "a b" */
	tfs_hf_tok_clear(&t);
}

/* Broken files: each a clear error naming the file and the byte, never a crash. */
Test(hf_tokjson, broken)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "[]", "tokenizer.json: not a JSON object" },
		{ "{\"model\": {\"vocab\": {\"a\": -1}}}", "vocab 'a' has no id" },
		{ "{\"model\": {\"vocab\": {\"a\": 2147483648}}}", "vocab 'a' has no id" },
		{ "{\"model\": {\"vocab\": {\"a\": 1.5}}}", "vocab 'a' has no id" },
		{ "{\"model\": {\"vocab\": {\"\\ud800\": 1}}}", "a lone UTF-16 surrogate" },
		{ "{\"model\": {\"vocab\": {\"\\udc00x\": 1}}}", "a lone UTF-16 surrogate" },
		{ "{\"model\": {\"vocab\": {\"\xc3\x28\": 1}}}", "not UTF-8" },
		{ "{\"model\": {\"vocab\": {\"a\": 1", "it ends at byte 27, inside a value (cut short?)" },
		{ "{\"model\": {\"vocab\": {\"a\x01\": 1}}}", "a control character" },
		{ "{\"model\": {\"vocab\": {\"\\q\": 1}}}", "an invalid escape" },
		{ "{\"model\": {\"merges\": [\"a b\", [\"a\", \"b\"]]}}", "merge 1 is neither" },
		{ "{\"model\": {\"merges\": [[\"a\"]]}}", "merge 0 is not a list of two strings" },
		{ "{\"model\": {\"merges\": [1]}}", "merge 0 is neither" },
		{ "{\"added_tokens\": [1, }", "not JSON at byte 22" },
		{ "{\"a\": 1} x", "more after the object" },
		{ "{\"a\": 1,}", "a string expected" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tfs_hf_tok t;
		tfs_error err = { 0 };
		cr_assert_eq(tok_parse(&t, cases[i].text, &err), TFS_E_FORMAT, "case %zu", i);
		cr_assert(strstr(err.msg, cases[i].want), "case %zu: '%s' not in: %s", i,
			  cases[i].want, err.msg);
		cr_assert(!t.root && !t.text && !t.moff, "case %zu: not cleared", i);
	}
}

/* The set_vocab rows that read only some files say which one they need. */
Test(hf_vocab, class_needs)
{
	mem_repo r = { .n = 0 };
	char *tj = bpe_json(LLAMA3_PRE, "[\"a b\"]", "BPE");
	repo_add_str(&r, "tokenizer.json", tj);
	repo_add_str(&r, "tokenizer_config.json", "{\"bos_token\": \"a\"}");
	tfs_hf_kvs out = { 0 };
	tfs_error err = { 0 };
	cr_assert_eq(run(&r, "Gemma2ForCausalLM", "{}", &out, &err), TFS_E_NOTFOUND);
	cr_assert(strstr(err.msg, "no tokenizer.model (Gemma 2"), "%s", err.msg);
	tfs_hf_kvs_free(&out);
	cr_assert_eq(run(&r, "Phi3ForCausalLM", "{}", &out, &err), TFS_E_FORMAT);
	cr_assert(strstr(err.msg, "repo/tokenizer_config.json: no tokenizer_class"), "%s", err.msg);
	tfs_hf_kvs_free(&out);
	/* Gemma 3 without tokenizer.model: the tokenizer.json vocabulary, no add_space_prefix */
	cr_assert_eq(run(&r, "Gemma3ForCausalLM", "{}", &out, &err), 0, "%s", err.msg);
	assert_str(key(&out, "tokenizer.ggml.model"), "gpt2");
	cr_assert_lt(tfs_hf_kvs_find(&out, "tokenizer.ggml.add_space_prefix"), 0);
	tfs_hf_kvs_free(&out);
	free(tj);
}
