/*
 * hf_export_unigram.c - the tokenizer files of a vocabulary the converter read from a
 * Unigram tokenizer.json through transformers (hf_export.h): NomicBertModel's MoE variant
 * (nomic-bert-moe: "t5" from _xlmroberta_set_vocab without sentencepiece.bpe.model,
 * hf_vocab_xlmr.c's tokenizer.json reading), so that the converter reads them back into the
 * same keys:
 *  - tokenizer.json: a Unigram model.vocab of the tokens and scores before the trailing
 *    "[PADi]" fillers (the converter makes those again from config.json's vocab_size), unk_id
 *    the UNKNOWN token's; added tokens the CONTROL (special), UNKNOWN (special) and
 *    USER_DEFINED (not special) ones; the charsmap as the Precompiled normalizer's base64;
 *    no post-processor (tokenizer_config.json's add_*_token flags say it to SpecialVocab);
 *  - tokenizer_config.json: XLMRobertaTokenizer, each named special token (bos, eos, unk,
 *    sep, pad, cls, mask) the GGUF's where gguf-py's SpecialVocab reads it from there
 *    (tfs_hf_xspecial_places), else null (no class default then: the tokens typed CONTROL
 *    are all_special_tokens), the other CONTROL tokens as additional_special_tokens,
 *    add_prefix_space and clean_up_tokenization_spaces from add_space_prefix and
 *    remove_extra_whitespaces.
 * A vocabulary these cannot give back (another token type, a special token's text given
 * twice, a named token that is not CONTROL, ...) has no tokenizer files (tok_why says why).
 */
#include "hf_export.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };

typedef struct {
	tfs_hf_xvocab v;
	const uint8_t *score;      /* float32 per token */
	uint64_t end;              /* the tokens before the trailing [PADi] fillers */
	int64_t unk;               /* the UNKNOWN token, -1: none */
	int64_t named[TFS_HF_N_SPECIAL];   /* tokenizer_config.json's named tokens, -1: null */
	bool prefix, remove_ws;
} uform;

static float score_of(const uform *f, uint64_t i)
{
	float s;
	memcpy(&s, f->score + 4 * i, 4);
	return s;
}

static bool is_filler(const char *s, size_t n, uint64_t id)
{
	char pad[32];
	int k = snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)id);
	return (size_t)k == n && !memcmp(s, pad, n);
}

static bool is_added(int32_t t)
{
	return t == TOK_CONTROL || t == TOK_UNKNOWN || t == TOK_USER;
}

/* Whether each added token's text is no other token's (tokenizers' text -> id is then its
 * id, as the converter's reading assumes): the texts counted through a JSON object. */
static bool added_texts_unique(const uform *f)
{
	json_t *seen = json_object();
	const uint8_t *p = f->v.tok;
	uint64_t left = f->v.tok_len;
	size_t n;
	bool ok = seen != NULL;
	for (uint64_t i = 0; ok && i < f->end; i++) {
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		if (is_added(tfs_hf_xvocab_type(&f->v, i)))
			ok = !json_object_setn_new(seen, s, n, json_integer(0));
	}
	p = f->v.tok, left = f->v.tok_len;
	for (uint64_t i = 0; ok && i < f->end; i++) {
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		json_t *c = json_object_getn(seen, s, n);
		ok = !c || !json_integer_value(c);
		if (c)
			json_integer_set(c, 1);
	}
	json_decref(seen);
	return ok;
}

/* The vocabulary's form (false: why says why it has none). */
static bool get_form(uform *f, const tfs_hf_export *x, char *why, size_t cap)
{
	size_t n;
	uint32_t t;
	uint64_t ns, sl;
	double v;
	const char *m = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	memset(f, 0, sizeof *f);
	f->unk = -1;
	if (!m || n != 2 || memcmp(m, "t5", 2) || !tfs_hf_xvocab_get(&f->v, x) ||
	    !tfs_hf_xkv_arr(x, "tokenizer.ggml.scores", &t, &ns, &f->score, &sl) ||
	    t != TFS_GGUF_FLOAT32 || ns != f->v.n || sl < 4 * ns)
		return snprintf(why, cap, "no tokenizer files: not a \"t5\" vocabulary with scores"),
		       false;
	double ws;
	if (!tfs_hf_xkv_num(x, "tokenizer.ggml.add_space_prefix", &v) ||
	    !tfs_hf_xkv_num(x, "tokenizer.ggml.remove_extra_whitespaces", &ws))
		return snprintf(why, cap, "no tokenizer files: no tokenizer.ggml.add_space_prefix "
				"or remove_extra_whitespaces (the converter writes both)"), false;
	f->prefix = v != 0;
	f->remove_ws = ws != 0;
	const uint8_t *p = f->v.tok;
	uint64_t left = f->v.tok_len;
	for (uint64_t i = 0; i < f->v.n; i++) {
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		int32_t ty = tfs_hf_xvocab_type(&f->v, i);
		if (ty != TOK_UNUSED || score_of(f, i) != -10000.0f || !is_filler(s, n, i))
			f->end = i + 1;
	}
	for (uint64_t i = 0; i < f->end; i++) {
		int32_t ty = tfs_hf_xvocab_type(&f->v, i);
		if (ty != TOK_NORMAL && !is_added(ty))
			return snprintf(why, cap, "no tokenizer files: token %llu is of type %d (a "
					"Unigram tokenizer.json read through transformers gives "
					"normal, unknown, control and user-defined ones)",
					(unsigned long long)i, (int)ty), false;
		if (ty == TOK_UNKNOWN && f->unk >= 0)
			return snprintf(why, cap, "no tokenizer files: two unknown tokens"), false;
		if (ty == TOK_UNKNOWN)
			f->unk = (int64_t)i;
	}
	uint8_t place[TFS_HF_N_SPECIAL];
	tfs_hf_xspecial_places(x, place);
	for (size_t k = 0; k < TFS_HF_N_SPECIAL; k++) {
		bool unk = !strcmp(tfs_hf_xspecial_types[k], "unk");
		f->named[k] = -1;
		if (place[k] != TFS_HF_SP_BOTH || !tfs_hf_xkv_num(x, tfs_hf_xspecial_keys[k], &v))
			continue;
		int32_t ty = v >= 0 && v < (double)f->end ? tfs_hf_xvocab_type(&f->v, (uint64_t)v) : 0;
		if (unk ? ty != TOK_UNKNOWN : ty != TOK_CONTROL && ty != TOK_UNKNOWN)
			return snprintf(why, cap, "no tokenizer files: %s token %.0f is not %s",
					tfs_hf_xspecial_types[k], v, unk ? "the unknown token" :
					"a control token"), false;
		f->named[k] = (int64_t)v;
	}
	if (!added_texts_unique(f))
		return snprintf(why, cap, "no tokenizer files: a special or added token's text is "
				"another token's too"), false;
	return true;
}

bool tfs_hf_xunigram_form(const tfs_hf_export *x, char *why, size_t cap)
{
	uform f;
	return get_form(&f, x, why, cap);
}

/* Python's base64.b64encode of n bytes (OpenSSL's EVP_EncodeBlock: the same alphabet and
 * '=' padding, no newlines), in pieces of whole triples */
static int b64(tfs_buf *b, const uint8_t *s, uint64_t n)
{
	enum { IN = 3 * 1024 };
	unsigned char q[IN / 3 * 4 + 1];
	int rc = 0;
	for (uint64_t i = 0; !rc && i < n; i += IN) {
		int k = (int)(n - i < IN ? n - i : IN);
		rc = tfs_buf_append(b, q, (size_t)EVP_EncodeBlock(q, s + i, k));
	}
	return rc;
}

int tfs_hf_export_make_unigram(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	uform f;
	char why[192];
	uint32_t t;
	uint64_t cn = 0, cl = 0;
	const uint8_t *map = NULL;
	if (!get_form(&f, x, why, sizeof why))
		return tfs_error_set(err, TFS_E_FORMAT, "%s", why);
	if (tfs_hf_xkv_arr(x, "tokenizer.ggml.precompiled_charsmap", &t, &cn, &map, &cl) &&
	    (t != TFS_GGUF_UINT8 || cl < cn))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.precompiled_charsmap: not "
				     "an array of bytes");
	const char *ms = f.prefix ? "always" : "never";
	int rc = tfs_buf_printf(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  "
				"\"padding\": null,\n  \"added_tokens\": ") ||
		 tfs_hf_xadded_tokens(b, &f.v, f.end, true) ||
		 tfs_buf_printf(b, ",\n  \"normalizer\": {\"type\": \"Precompiled\", "
				"\"precompiled_charsmap\": \"") ||
		 b64(b, map, map ? cn : 0) ||
		 tfs_buf_printf(b, "\"},\n  \"pre_tokenizer\": {\"type\": \"Metaspace\", "
				"\"replacement\": \"\xe2\x96\x81\", \"prepend_scheme\": \"%s\", "
				"\"split\": true},\n  \"post_processor\": null,\n  \"decoder\": "
				"{\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\", "
				"\"prepend_scheme\": \"%s\", \"split\": true},\n  \"model\": {\"type\": "
				"\"Unigram\", \"unk_id\": ", ms, ms);
	rc = rc || (f.unk < 0 ? tfs_buf_printf(b, "null")
			      : tfs_buf_printf(b, "%lld", (long long)f.unk)) ||
	     tfs_buf_printf(b, ", \"vocab\": [");
	const uint8_t *p = f.v.tok;
	uint64_t left = f.v.tok_len;
	size_t n;
	for (uint64_t i = 0; !rc && i < f.end; i++) {
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		float sc = score_of(&f, i);
		/* (a finite score as its double's 17 digits: Python reads that double, and packs
		 * it as this float32 exactly; a shortest float32 text could round twice.  Always
		 * a float's text: an int among the scores fails gguf-py's array of one type) */
		char num[48];
		snprintf(num, sizeof num, "%.17g", (double)sc);
		if (!strpbrk(num, ".en"))
			strcat(num, ".0");
		rc = tfs_buf_append(b, i ? ",\n    [" : "\n    [", i ? 7 : 6) ||
		     tfs_hf_xjstr(b, s, n) || tfs_buf_append(b, ", ", 2) ||
		     (sc == sc && sc - sc == 0 ? tfs_buf_printf(b, "%s", num)
					       : tfs_hf_xjf32(b, sc)) ||
		     tfs_buf_append(b, "]", 1);
	}
	rc = rc || tfs_buf_printf(b, "\n  ], \"byte_fallback\": false}\n}\n");
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

int tfs_hf_export_make_unigram_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	uform f;
	char why[192];
	double ctx;
	size_t n;
	if (!get_form(&f, x, why, sizeof why))
		return tfs_error_set(err, TFS_E_FORMAT, "%s", why);
	int rc = tfs_buf_append(b, "{", 1) || tfs_hf_xadd_token_flags(b, x);
	for (size_t k = 0; !rc && k < TFS_HF_N_SPECIAL; k++) {
		char name[64];
		snprintf(name, sizeof name, "%s_token", tfs_hf_xspecial_types[k]);
		const char *s = f.named[k] < 0 ? NULL
				: tfs_hf_xvocab_text(&f.v, (uint64_t)f.named[k], &n);
		rc = tfs_hf_xmember(b, name) || (s ? tfs_hf_xjstr(b, s, n) :
						 tfs_buf_printf(b, "null"));
	}
	/* the other control tokens: all_special_tokens too */
	rc = rc || tfs_hf_xmember(b, "additional_special_tokens") || tfs_buf_append(b, "[", 1);
	const uint8_t *p = f.v.tok;
	uint64_t left = f.v.tok_len;
	bool first = true;
	for (uint64_t i = 0; !rc && i < f.end; i++) {
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		bool named = false;
		for (size_t k = 0; k < TFS_HF_N_SPECIAL; k++)
			named |= f.named[k] == (int64_t)i;
		if (tfs_hf_xvocab_type(&f.v, i) != TOK_CONTROL || named)
			continue;
		rc = tfs_buf_append(b, first ? "" : ", ", first ? 0 : 2) || tfs_hf_xjstr(b, s, n);
		first = false;
	}
	rc = rc || tfs_buf_append(b, "]", 1) ||
	     tfs_hf_xmember(b, "add_prefix_space") ||
	     tfs_buf_printf(b, "%s", f.prefix ? "true" : "false") ||
	     tfs_hf_xmember(b, "clean_up_tokenization_spaces") ||
	     tfs_buf_printf(b, "%s", f.remove_ws ? "true" : "false");
	if (!rc && tfs_hf_xkv_num(x, ".context_length", &ctx))
		rc = tfs_hf_xmember(b, "model_max_length") || tfs_buf_printf(b, "%.0f", ctx);
	rc = rc || tfs_hf_xmember(b, "tokenizer_class") ||
	     tfs_hf_xjcstr(b, "XLMRobertaTokenizer") || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}
