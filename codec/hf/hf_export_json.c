/*
 * hf_export_json.c - the small files of a GGUF model's Hugging Face form (hf_export.h):
 * tokenizer.json and tokenizer_config.json from its keys, and the list of them with the
 * others (config.json and generation_config.json: hf_export_config.c; README.md:
 * hf_export_card.c; a SentencePiece vocabulary's tokenizer.model or sentencepiece.bpe.model
 * and added_tokens.json: hf_export_spm.c).
 *
 * tokenizer.json is written for a byte-level BPE vocabulary (tokenizer.ggml.model
 * "gpt2") whose tokenizer.ggml.pre the pre-tokenizer table (hf_pre_table.h, hf_bpe.c) has: the
 * NORMAL tokens as the BPE vocabulary, CONTROL and USER_DEFINED ones as added tokens (special
 * or not), the merges as they are; tokenizer_config.json names the special tokens and holds
 * the chat template.  Gemma 4's ("gemma4") and WordPiece ("bert") vocabularies have theirs
 * (below).  Another vocabulary has no tokenizer files (tfs_hf_export's tok_why).
 */
#include "hf_export.h"
#include "hf_vocab.h"
#include "dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hf_export_kv.c's JSON text, by short names */
static int jstr(tfs_buf *b, const char *s, size_t n) { return tfs_hf_xjstr(b, s, n); }
static int jcstr(tfs_buf *b, const char *s) { return tfs_hf_xjcstr(b, s); }
static int member(tfs_buf *b, const char *key) { return tfs_hf_xmember(b, key); }

/* ==== the vocabulary ==== */

enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };

typedef tfs_hf_xvocab vocab;

static bool get_vocab(vocab *v, const tfs_hf_export *x) { return tfs_hf_xvocab_get(v, x); }
static int32_t tok_type(const vocab *v, uint64_t i) { return tfs_hf_xvocab_type(v, i); }
static const char *token_text(const vocab *v, uint64_t id, size_t *n)
{
	return tfs_hf_xvocab_text(v, id, n);
}

static bool is_pad_filler(const char *s, size_t n, uint64_t id)
{
	char f[32];
	int k = snprintf(f, sizeof f, "[PAD%llu]", (unsigned long long)id);
	return (size_t)k == n && !memcmp(s, f, n);
}

static int bpe_model(tfs_buf *b, const vocab *v, bool ignore_merges)
{
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	bool first = true;
	int rc = tfs_buf_printf(b, "{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
				"\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
				"\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": "
				"%s, \"vocab\": {", ignore_merges ? "true" : "false");
	for (uint64_t i = 0; !rc && i < v->n; i++) {
		size_t n;
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		int32_t t = tok_type(v, i);
		if (!s)
			return TFS_E_FORMAT;
		if (t == TOK_CONTROL || t == TOK_USER || (t == TOK_UNUSED && is_pad_filler(s, n, i)))
			continue;
		rc = tfs_buf_append(b, first ? "\n    " : ",\n    ", first ? 5 : 6) ||
		     jstr(b, s, n) || tfs_buf_printf(b, ": %llu", (unsigned long long)i);
		first = false;
	}
	rc = rc || tfs_buf_append(b, "}, \"merges\": [", 14);
	p = v->merges;
	left = v->merges_len;
	for (uint64_t i = 0; !rc && i < v->n_merges; i++) {
		size_t n;
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		if (!s)
			return TFS_E_FORMAT;
		rc = tfs_buf_append(b, i ? ",\n    " : "\n    ", i ? 6 : 5) || jstr(b, s, n);
	}
	return rc ? rc : tfs_buf_append(b, "]}", 2);
}

/* The post-processor: the BOS template when the GGUF adds one (as Llama 3's file has it);
 * its pair template with a BOS between A and B only when the GGUF has add_sep_token (false:
 * SpecialVocab reads such a pair as no separator, and writes the key), else A B (no key, as
 * from a tokenizer_config.json's add_bos_token alone: DeepSeek-V3's) */
/* BERT's [CLS] A [SEP] template over bos and eos (ModernBERT's), pair [CLS] A [SEP] B [SEP]:
 * SpecialVocab reads add_bos and add_eos from it, and add_sep false (the pair's separator is
 * the trailing token's). */
static int bos_eos_template(tfs_buf *b, const char *bl, const vocab *v, double bos, double eos)
{
	size_t bn, en;
	const char *bt = token_text(v, (uint64_t)bos, &bn), *et = token_text(v, (uint64_t)eos, &en);
	tfs_buf c = { 0 }, s = { 0 };
	int rc = jstr(&c, bt, bn) || jstr(&s, et, en) ||
		 tfs_buf_printf(b, "{\"type\": \"Sequence\", \"processors\": [%s, {\"type\": "
				"\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": %s, "
				"\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
				"{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}], \"pair\": "
				"[{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, {\"Sequence\": "
				"{\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": %s, "
				"\"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}, "
				"{\"SpecialToken\": {\"id\": %s, \"type_id\": 1}}], \"special_tokens\": "
				"{%s: {\"id\": %s, \"ids\": [%.0f], \"tokens\": [%s]}, %s: {\"id\": %s, "
				"\"ids\": [%.0f], \"tokens\": [%s]}}}]}", bl, c.data, s.data, c.data,
				s.data, s.data, c.data, c.data, bos, c.data, s.data, s.data, eos, s.data);
	tfs_buf_free(&c);
	tfs_buf_free(&s);
	return rc;
}

static int post_processor(tfs_buf *b, const tfs_hf_export *x, const vocab *v)
{
	double add = 0, bos, sep;
	size_t n;
	const char *s;
	const char *bl = "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
			 "false, \"use_regex\": true}";
	if (!tfs_hf_xkv_num(x, "tokenizer.ggml.add_bos_token", &add) || !add ||
	    !tfs_hf_xkv_num(x, "tokenizer.ggml.bos_token_id", &bos) ||
	    !(s = token_text(v, (uint64_t)bos, &n)))
		return tfs_buf_printf(b, "%s", bl);
	tfs_buf q = { 0 }, mid = { 0 };
	bool has_sep = tfs_hf_xkv_num(x, "tokenizer.ggml.add_sep_token", &sep);
	double eos;
	const char *e;
	if (tfs_hf_xkv_num(x, "tokenizer.ggml.add_eos_token", &add) && add &&
	    tfs_hf_xkv_num(x, "tokenizer.ggml.eos_token_id", &eos) &&
	    (e = token_text(v, (uint64_t)eos, &n)))
		return bos_eos_template(b, bl, v, bos, eos);
	int rc = jstr(&q, s, n) ||
		 (has_sep && tfs_buf_printf(&mid, "{\"SpecialToken\": {\"id\": %s, \"type_id\": "
					    "1}}, ", q.data)) ||
		 tfs_buf_printf(b, "{\"type\": \"Sequence\", \"processors\": [%s, {\"type\": "
				"\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": %s, "
				"\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
				"\"pair\": [{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, "
				"{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, %s"
				"{\"Sequence\": {\"id\": \"B\", "
				"\"type_id\": 1}}], \"special_tokens\": {%s: {\"id\": %s, \"ids\": "
				"[%.0f], \"tokens\": [%s]}}}]}", bl, q.data, q.data,
				mid.data ? mid.data : "", q.data, q.data, bos, q.data);
	tfs_buf_free(&mid);
	tfs_buf_free(&q);
	return rc;
}

/* tokenizer.ggml.pre, when the vocabulary has a tokenizer.json form, else NULL */
static const char *bpe_pre(const tfs_hf_export *x, const char **nz, const char **pre)
{
	size_t n;
	static __thread char name[64];
	const char *model = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	if (!model || n != 4 || memcmp(model, "gpt2", 4))
		return NULL;
	const char *p = tfs_hf_xkv_str(x, "tokenizer.ggml.pre", &n);
	if (!p || n >= sizeof name)
		return NULL;
	memcpy(name, p, n);
	name[n] = 0;
	return tfs_hf_pre_json(name, nz, pre) ? name : NULL;
}

static int make_tokenizer(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	const char *nz, *pre, *name = bpe_pre(x, &nz, &pre);
	if (!name || !get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: no tokenizer.json form, "
				     "or a malformed vocabulary");
	bool im = !strcmp(name, "llama-bpe") || !strcmp(name, "tekken");
	int rc = tfs_buf_printf(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  "
				"\"padding\": null,\n  \"added_tokens\": ") ||
		 tfs_hf_xadded_tokens(b, &v, v.n, false);
	rc = rc || tfs_buf_printf(b, ",\n  \"normalizer\": %s,\n  \"pre_tokenizer\": %s,\n  "
				  "\"post_processor\": ", nz, pre) ||
	     post_processor(b, x, &v) ||
	     tfs_buf_printf(b, ",\n  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
			    "true, \"trim_offsets\": true, \"use_regex\": true},\n  \"model\": ") ||
	     bpe_model(b, &v, im) || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== tokenizer.json: Gemma 4's vocabulary (tokenizer.ggml.model "gemma4") ==== */

/* Gemma4Model.set_vocab read back (hf_gemma4.c): gguf-py's LlamaHfVocab over a
 * SentencePiece-style BPE tokenizer.json (byte fallback, spaces as U+2581), every token
 * scored -1000 and typed BYTE (<0xXX>), CONTROL (transformers' all_special_tokens), NORMAL,
 * or USER_DEFINED (its few visible tokens); merges from SpecialVocab.  So: every token in
 * the BPE model's vocabulary at its id, the CONTROL and USER_DEFINED ones as added tokens,
 * and the CONTROL ones special in tokenizer_config.json (the named ones by their ids, the
 * rest extra_special_tokens). */
static bool is_gemma4(const tfs_hf_export *x)
{
	size_t n;
	const char *m = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	return m && n == 6 && !memcmp(m, "gemma4", 6);
}

static int make_g4_tokenizer(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	double id;
	size_t n;
	const char *unk = NULL, *bos = NULL;
	size_t unk_n = 0, bos_n = 0;
	if (!get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: a malformed vocabulary");
	if (tfs_hf_xkv_num(x, "tokenizer.ggml.unknown_token_id", &id))
		unk = token_text(&v, (uint64_t)id, &unk_n);
	double add = 0;
	if (tfs_hf_xkv_num(x, "tokenizer.ggml.add_bos_token", &add) && add &&
	    tfs_hf_xkv_num(x, "tokenizer.ggml.bos_token_id", &id))
		bos = token_text(&v, (uint64_t)id, &bos_n);
	int rc = tfs_buf_printf(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  "
				"\"padding\": null,\n  \"added_tokens\": ") ||
		 tfs_hf_xadded_tokens(b, &v, v.n, false) ||
		 tfs_buf_printf(b, ",\n  \"normalizer\": {\"type\": \"Replace\", \"pattern\": "
				"{\"String\": \" \"}, \"content\": \"\u2581\"},\n  \"pre_tokenizer\": "
				"{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": "
				"\"MergedWithPrevious\", \"invert\": false},\n  \"post_processor\": ");
	if (!rc && bos) {
		tfs_buf q = { 0 };
		rc = jstr(&q, bos, bos_n) ||
		     tfs_buf_printf(b, "{\"type\": \"TemplateProcessing\", \"single\": "
				    "[{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, {\"Sequence\": "
				    "{\"id\": \"A\", \"type_id\": 0}}], \"pair\": [{\"SpecialToken\": "
				    "{\"id\": %s, \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
				    "\"type_id\": 0}}, {\"SpecialToken\": {\"id\": %s, \"type_id\": 1}}, "
				    "{\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}], "
				    "\"special_tokens\": {%s: {\"id\": %s, \"ids\": [%.0f], "
				    "\"tokens\": [%s]}}}", q.data, q.data, q.data, q.data, q.data, id,
				    q.data);
		tfs_buf_free(&q);
	} else if (!rc) {
		rc = tfs_buf_printf(b, "null");
	}
	rc = rc || tfs_buf_printf(b, ",\n  \"decoder\": {\"type\": \"Sequence\", \"decoders\": "
				  "[{\"type\": \"Replace\", \"pattern\": {\"String\": \"\u2581\"}, "
				  "\"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": "
				  "\"Fuse\"}]},\n  \"model\": {\"type\": \"BPE\", \"dropout\": null, "
				  "\"unk_token\": ");
	rc = rc || (unk ? jstr(b, unk, unk_n) : tfs_buf_printf(b, "null")) ||
	     tfs_buf_printf(b, ", \"continuing_subword_prefix\": null, \"end_of_word_suffix\": "
			    "null, \"fuse_unk\": true, \"byte_fallback\": true, \"ignore_merges\": "
			    "false, \"vocab\": {");
	const uint8_t *p = v.tok;
	uint64_t left = v.tok_len;
	for (uint64_t i = 0; !rc && i < v.n; i++) {
		const char *t = tfs_hf_xnext_str(&p, &left, &n);
		rc = !t || tfs_buf_append(b, i ? ",\n    " : "\n    ", i ? 6 : 5) ||
		     jstr(b, t, n) || tfs_buf_printf(b, ": %llu", (unsigned long long)i);
	}
	rc = rc || tfs_buf_append(b, "}, \"merges\": [", 14);
	p = v.merges;
	left = v.merges_len;
	for (uint64_t i = 0; !rc && i < v.n_merges; i++) {
		const char *t = tfs_hf_xnext_str(&p, &left, &n);
		rc = !t || tfs_buf_append(b, i ? ",\n    " : "\n    ", i ? 6 : 5) || jstr(b, t, n);
	}
	rc = rc || tfs_buf_append(b, "]}\n}\n", 5);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

static int make_g4_tokenizer_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	static const char *const named[][2] = {
		{ "bos_token", "tokenizer.ggml.bos_token_id" },
		{ "eos_token", "tokenizer.ggml.eos_token_id" },
		{ "unk_token", "tokenizer.ggml.unknown_token_id" },
		{ "pad_token", "tokenizer.ggml.padding_token_id" },
		{ "mask_token", "tokenizer.ggml.mask_token_id" },
	};
	vocab v;
	double id;
	size_t n;
	int64_t ids[5];
	if (!get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.tokens: none, or malformed");
	int rc = tfs_buf_printf(b, "{\n  \"tokenizer_class\": \"GemmaTokenizer\"");
	for (size_t k = 0; !rc && k < 5; k++) {
		const char *t = NULL;
		ids[k] = -1;
		if (tfs_hf_xkv_num(x, named[k][1], &id) && (t = token_text(&v, (uint64_t)id, &n)))
			ids[k] = (int64_t)id;
		/* (null: none, where GemmaTokenizer's default would name one) */
		rc = member(b, named[k][0]) || (t ? jstr(b, t, n) : tfs_buf_printf(b, "null"));
	}
	/* SpecialVocab's add_*_token but those the post-processor gives (bos, sep) */
	for (size_t i = 0; !rc && i < TFS_HF_N_SPECIAL; i++) {
		char key[64], name[64];
		const char *ty = tfs_hf_xspecial_types[i];
		snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", ty);
		snprintf(name, sizeof name, "add_%s_token", ty);
		if (strcmp(ty, "bos") && strcmp(ty, "sep") && tfs_hf_xkv_num(x, key, &id))
			rc = member(b, name) || tfs_buf_printf(b, "%s", id ? "true" : "false");
	}
	const char *tmpl = tfs_hf_xkv_str(x, "tokenizer.chat_template", &n);
	if (!rc && tmpl)
		rc = member(b, "chat_template") || jstr(b, tmpl, n);
	rc = rc || member(b, "extra_special_tokens") || tfs_buf_append(b, "[", 1);
	const uint8_t *p = v.tok;
	uint64_t left = v.tok_len;
	bool first = true;
	for (uint64_t i = 0; !rc && i < v.n; i++) {
		const char *t = tfs_hf_xnext_str(&p, &left, &n);
		bool is_named = false;
		for (size_t k = 0; k < 5; k++)
			is_named |= ids[k] == (int64_t)i;
		if (!t || tok_type(&v, i) != TOK_CONTROL || is_named)
			continue;
		rc = tfs_buf_append(b, first ? "" : ", ", first ? 0 : 2) || jstr(b, t, n);
		first = false;
	}
	rc = rc || tfs_buf_append(b, "]\n}\n", 4);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== tokenizer.json: a WordPiece vocabulary (tokenizer.ggml.model "bert") ==== */

/* BertModel.set_vocab read back (hf_vocab.c's "bert"): get_vocab_base's tokens in phantom
 * space form, CONTROL ones as they are, "##x" as "x", any other "x" as "\u2581x": so
 * "\u2581x" is "x" again, another "x" "##x"; the [PADn] fillers of its holes left out (it
 * makes them again).  A BERT tokenizer.json (BertNormalizer, lowercase as the GGUF says; its
 * [CLS] A [SEP] template when the GGUF adds both) and BertTokenizer's tokenizer_config.json
 * with the special tokens by the GGUF's ids. */
static bool is_bert(const tfs_hf_export *x)
{
	size_t n;
	const char *m = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	return m && n == 4 && !memcmp(m, "bert", 4);
}

static const char *tok_of(const vocab *v, const tfs_hf_export *x, const char *key, size_t *n)
{
	double id;
	return tfs_hf_xkv_num(x, key, &id) ? token_text(v, (uint64_t)id, n) : NULL;
}

static int make_wpm_tokenizer(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	double lc = 1, ab = 0, ae = 0, id;
	size_t n, cn = 0, sn = 0, un = 0;
	if (!get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: a malformed vocabulary");
	tfs_hf_xkv_num(x, "tokenizer.ggml.normalizer.lowercase", &lc);
	tfs_hf_xkv_num(x, "tokenizer.ggml.add_bos_token", &ab);
	tfs_hf_xkv_num(x, "tokenizer.ggml.add_eos_token", &ae);
	const char *cls = tok_of(&v, x, "tokenizer.ggml.bos_token_id", &cn);
	const char *sep = tok_of(&v, x, "tokenizer.ggml.seperator_token_id", &sn);
	const char *unk = tok_of(&v, x, "tokenizer.ggml.unknown_token_id", &un);
	int rc = tfs_buf_printf(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  "
				"\"padding\": null,\n  \"added_tokens\": ") ||
		 tfs_hf_xadded_tokens(b, &v, v.n, false) ||
		 tfs_buf_printf(b, ",\n  \"normalizer\": {\"type\": \"BertNormalizer\", "
				"\"clean_text\": true, \"handle_chinese_chars\": true, "
				"\"strip_accents\": null, \"lowercase\": %s},\n  \"pre_tokenizer\": "
				"{\"type\": \"BertPreTokenizer\"},\n  \"post_processor\": ",
				lc ? "true" : "false");
	if (!rc && ab && ae && cls && sep) {
		tfs_buf c = { 0 }, s = { 0 };
		double ci = 0, si = 0;
		tfs_hf_xkv_num(x, "tokenizer.ggml.bos_token_id", &ci);
		tfs_hf_xkv_num(x, "tokenizer.ggml.seperator_token_id", &si);
		rc = jstr(&c, cls, cn) || jstr(&s, sep, sn) ||
		     tfs_buf_printf(b, "{\"type\": \"TemplateProcessing\", \"single\": "
				    "[{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, {\"Sequence\": "
				    "{\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": %s, "
				    "\"type_id\": 0}}], \"pair\": [{\"SpecialToken\": {\"id\": %s, "
				    "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
				    "{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, {\"Sequence\": "
				    "{\"id\": \"B\", \"type_id\": 1}}, {\"SpecialToken\": {\"id\": %s, "
				    "\"type_id\": 1}}], \"special_tokens\": {%s: {\"id\": %s, \"ids\": "
				    "[%.0f], \"tokens\": [%s]}, %s: {\"id\": %s, \"ids\": [%.0f], "
				    "\"tokens\": [%s]}}}", c.data, s.data, c.data, s.data, s.data, c.data,
				    c.data, ci, c.data, s.data, s.data, si, s.data);
		tfs_buf_free(&c);
		tfs_buf_free(&s);
	} else if (!rc) {
		rc = tfs_buf_printf(b, "null");
	}
	rc = rc || tfs_buf_printf(b, ",\n  \"decoder\": {\"type\": \"WordPiece\", \"prefix\": "
				  "\"##\", \"cleanup\": true},\n  \"model\": {\"type\": "
				  "\"WordPiece\", \"unk_token\": ");
	rc = rc || (unk ? jstr(b, unk, un) : tfs_buf_printf(b, "\"[UNK]\"")) ||
	     tfs_buf_printf(b, ", \"continuing_subword_prefix\": \"##\", "
			    "\"max_input_chars_per_word\": 100, \"vocab\": {");
	const uint8_t *p = v.tok;
	uint64_t left = v.tok_len;
	bool first = true;
	(void)id;
	for (uint64_t i = 0; !rc && i < v.n; i++) {
		const char *t = tfs_hf_xnext_str(&p, &left, &n);
		int32_t ty = tok_type(&v, i);
		if (!t)
			return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.tokens: malformed");
		/* (a filler in phantom-space form: the converter's BertModel prefixes it too) */
		bool ph = n > 3 && !memcmp(t, "\xe2\x96\x81", 3);
		if (ty == TOK_UNUSED && (is_pad_filler(t, n, i) || (ph && is_pad_filler(t + 3, n - 3,
											  i))))
			continue;
		rc = tfs_buf_append(b, first ? "\n    " : ",\n    ", first ? 5 : 6);
		first = false;
		if (ty == TOK_CONTROL)
			rc = rc || jstr(b, t, n);
		else if (n >= 3 && !memcmp(t, "\xe2\x96\x81", 3))
			rc = rc || jstr(b, t + 3, n - 3);
		else {
			tfs_buf q = { 0 };
			rc = rc || tfs_buf_append(&q, "##", 2) || tfs_buf_append(&q, t, n) ||
			     jstr(b, q.data, q.len);
			tfs_buf_free(&q);
		}
		rc = rc || tfs_buf_printf(b, ": %llu", (unsigned long long)i);
	}
	rc = rc || tfs_buf_append(b, "}}\n}\n", 5);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

static int make_wpm_tokenizer_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	static const char *const named[][2] = {
		{ "cls_token", "tokenizer.ggml.bos_token_id" },
		{ "mask_token", "tokenizer.ggml.mask_token_id" },
		{ "pad_token", "tokenizer.ggml.padding_token_id" },
		{ "sep_token", "tokenizer.ggml.seperator_token_id" },
		{ "unk_token", "tokenizer.ggml.unknown_token_id" },
	};
	vocab v;
	double lc = 1, ctx;
	size_t n;
	if (!get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.tokens: none, or malformed");
	tfs_hf_xkv_num(x, "tokenizer.ggml.normalizer.lowercase", &lc);
	int rc = tfs_buf_printf(b, "{\n  \"tokenizer_class\": \"BertTokenizer\"") ||
		 member(b, "do_lower_case") || tfs_buf_printf(b, "%s", lc ? "true" : "false");
	for (size_t k = 0; !rc && k < 5; k++) {
		const char *t = tok_of(&v, x, named[k][1], &n);
		if (t)
			rc = member(b, named[k][0]) || jstr(b, t, n);
	}
	if (!rc && tfs_hf_xkv_num(x, ".context_length", &ctx))
		rc = member(b, "model_max_length") || tfs_buf_printf(b, "%.0f", ctx);
	rc = rc || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== tokenizer_config.json of a byte-level BPE or Llama's SentencePiece vocabulary ==== */

static int make_tokenizer_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	vocab v;
	double id, ctx;
	size_t n;
	uint8_t place[TFS_HF_N_SPECIAL];
	if (!get_vocab(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.tokens: none, or malformed");
	tfs_hf_xspecial_places(x, place);
	int rc = tfs_buf_append(b, "{", 1) || tfs_hf_xadd_token_flags(b, x);
	for (size_t i = 0; !rc && i < TFS_HF_N_SPECIAL; i++) {
		char name[64];
		const char *s;
		snprintf(name, sizeof name, "%s_token", tfs_hf_xspecial_types[i]);
		if (place[i] == TFS_HF_SP_BOTH && tfs_hf_xkv_num(x, tfs_hf_xspecial_keys[i], &id) &&
		    (s = token_text(&v, (uint64_t)id, &n)))
			rc = member(b, name) || jstr(b, s, n);
	}
	if (!rc && tfs_hf_xkv_num(x, "tokenizer.ggml.add_space_prefix", &id))
		rc = member(b, "add_prefix_space") || tfs_buf_printf(b, "%s", id ? "true" : "false");
	const char *tmpl = tfs_hf_xkv_str(x, "tokenizer.chat_template", &n);
	if (!rc && tmpl)
		rc = member(b, "chat_template") || jstr(b, tmpl, n);
	if (!rc && tfs_hf_xkv_num(x, ".context_length", &ctx))
		rc = member(b, "model_max_length") || tfs_buf_printf(b, "%.0f", ctx);
	rc = rc || member(b, "clean_up_tokenization_spaces") || tfs_buf_printf(b, "false") ||
	     member(b, "tokenizer_class") ||
	     jcstr(b, tfs_hf_xspm_kind(x) == TFS_HF_XSPM_LLAMA ? "LlamaTokenizer"
		   : "PreTrainedTokenizerFast") ||
	     tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}


int tfs_hf_export_list_files(tfs_hf_export *x, tfs_error *err)
{
	const char *nz, *pre;
	int spm;
	x->n_files = 0;
	x->files[x->n_files] = "README.md";
	x->make[x->n_files++] = tfs_hf_export_make_readme;
	x->files[x->n_files] = "config.json";
	x->make[x->n_files++] = tfs_hf_export_make_config;
	if (tfs_hf_export_has_generation(x)) {
		x->files[x->n_files] = "generation_config.json";
		x->make[x->n_files++] = tfs_hf_export_make_generation;
	}
	if (is_bert(x)) {
		x->files[x->n_files] = "tokenizer.json";
		x->make[x->n_files++] = make_wpm_tokenizer;
		x->files[x->n_files] = "tokenizer_config.json";
		x->make[x->n_files++] = make_wpm_tokenizer_config;
	} else if (is_gemma4(x)) {
		x->files[x->n_files] = "tokenizer.json";
		x->make[x->n_files++] = make_g4_tokenizer;
		x->files[x->n_files] = "tokenizer_config.json";
		x->make[x->n_files++] = make_g4_tokenizer_config;
	} else if (bpe_pre(x, &nz, &pre)) {
		x->files[x->n_files] = "tokenizer.json";
		x->make[x->n_files++] = make_tokenizer;
		x->files[x->n_files] = "tokenizer_config.json";
		x->make[x->n_files++] = make_tokenizer_config;
	} else if (x->row->vocab == TFS_HF_VOCAB_XLMR_JSON) {
		/* (nomic-bert-moe's: the converter reads a Unigram tokenizer.json) */
		if (tfs_hf_xunigram_form(x, x->tok_why, sizeof x->tok_why)) {
			x->files[x->n_files] = "tokenizer.json";
			x->make[x->n_files++] = tfs_hf_export_make_unigram;
			x->files[x->n_files] = "tokenizer_config.json";
			x->make[x->n_files++] = tfs_hf_export_make_unigram_config;
		}
	} else if ((spm = tfs_hf_xspm_kind(x))) {
		if (spm == TFS_HF_XSPM_LLAMA && tfs_hf_xspm_has_user_tokens(x)) {
			x->files[x->n_files] = "added_tokens.json";
			x->make[x->n_files++] = tfs_hf_export_make_added_tokens;
		}
		/* (XLMRobertaModel reads sentencepiece.bpe.model, its repos' name) */
		x->files[x->n_files] = spm == TFS_HF_XSPM_LLAMA ? "tokenizer.model"
							     : "sentencepiece.bpe.model";
		x->make[x->n_files++] = tfs_hf_export_make_spm;
		x->files[x->n_files] = "tokenizer_config.json";
		x->make[x->n_files++] = spm == TFS_HF_XSPM_LLAMA ? make_tokenizer_config
					: tfs_hf_export_make_xlmr_tokenizer_config;
	} else {
		size_t n = 0, pn = 0;
		const char *m = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
		const char *p = tfs_hf_xkv_str(x, "tokenizer.ggml.pre", &pn);
		snprintf(x->tok_why, sizeof x->tok_why, "no tokenizer files: tokenizer.ggml.model "
			 "%.*s (pre %.*s) has no tokenizer.json or tokenizer.model form here",
			 m ? (int)n : 4, m ? m : "none", p ? (int)pn : 4, p ? p : "none");
	}
	return tfs_hf_export_list_st(x, err);
}

size_t tfs_hf_export_n_files(const tfs_hf_export *x) { return x->n_files; }

const char *tfs_hf_export_file_name(const tfs_hf_export *x, size_t i)
{
	return i < x->n_files ? x->files[i] : NULL;
}

int tfs_hf_export_file(tfs_buf *out, const tfs_hf_export *x, size_t i, tfs_error *err)
{
	if (i >= x->n_files)
		return tfs_error_set(err, TFS_E_NOTFOUND, "no such file");
	return x->make[i](out, x, err);
}
