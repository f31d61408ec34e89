/*
 * hf_export_spm.c - a SentencePiece vocabulary of a GGUF model's Hugging Face form
 * (hf_export.h): the ModelProto the converter reads back, for two kinds of GGUF vocabulary.
 *
 *  - Llama's (tokenizer.ggml.model "llama": Llama 1/2, Mistral, Gemma, Phi-3, ...), as
 *    tokenizer.model, with added_tokens.json of its USER_DEFINED tokens;
 *  - XLM-RoBERTa's ("t5" of the XLMRobertaModel row, as hf_vocab_xlmr.c writes it: fairseq's
 *    <s> <pad> </s> <unk> first, then the model's pieces from id 3 on, one place up), as
 *    sentencepiece.bpe.model with the pieces put back where the model had them, and
 *    XLMRobertaTokenizer's tokenizer_config.json.
 *
 * (The listing and the BPE files: hf_export_json.c; the vocabulary's arrays: hf_export_kv.c.)
 */
#include "hf_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5,
       TOK_BYTE = 6 };

typedef struct {
	const uint8_t *score;
	uint64_t n_score, score_len;
} spm_scores;

/* tokenizer.ggml.scores: absent, or one float32 per token */
static bool get_scores(const tfs_hf_export *x, const tfs_hf_xvocab *v, spm_scores *sc)
{
	uint32_t t;
	memset(sc, 0, sizeof *sc);
	return !tfs_hf_xkv_arr(x, "tokenizer.ggml.scores", &t, &sc->n_score, &sc->score,
			       &sc->score_len) ||
	       (t == TFS_GGUF_FLOAT32 && sc->n_score == v->n && sc->score_len >= 4 * v->n);
}

static float score_of(const spm_scores *sc, uint64_t i)
{
	float f = 0;
	if (sc->score)
		memcpy(&f, sc->score + 4 * i, 4);
	return f;
}

/* XLMRobertaModel's form (hf_vocab_xlmr.c): fairseq's four tokens first as the converter
 * puts them (control x3 and unknown, scores 0), then the pieces; *end: the tokens before the
 * last "[PADk]" fillers (token k + 1, unused, score -10000: the ids from the model's pieces to
 * vocab_size, which the converter makes again from config.json's vocab_size). */
static bool xlmr_form(const tfs_hf_export *x, const tfs_hf_xvocab *v, const spm_scores *sc,
		      uint64_t *end)
{
	static const char *const first[4] = { "<s>", "<pad>", "</s>", "<unk>" };
	if (x->row->vocab != TFS_HF_VOCAB_XLMR || v->n < 4 || !sc->score || !v->type)
		return false;
	const uint8_t *p = v->tok;
	uint64_t left = v->tok_len;
	*end = 0;
	for (uint64_t i = 0; i < v->n; i++) {
		size_t n;
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		int32_t t = tfs_hf_xvocab_type(v, i);
		float f = score_of(sc, i);
		if (i < 4 && (strlen(first[i]) != n || memcmp(s, first[i], n) || f != 0 ||
			      t != (i < 3 ? TOK_CONTROL : TOK_UNKNOWN)))
			return false;
		char pad[32];
		int k = snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)i - 1);
		if (i < 4 || t != TOK_UNUSED || f != -10000.0f || (size_t)k != n ||
		    memcmp(s, pad, n))
			*end = i + 1;
	}
	return true;
}

int tfs_hf_xspm_kind(const tfs_hf_export *x)
{
	size_t n;
	tfs_hf_xvocab v;
	spm_scores sc;
	uint64_t end;
	const char *model = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	if (!model || !tfs_hf_xvocab_get(&v, x) || !get_scores(x, &v, &sc))
		return 0;
	if (n == 5 && !memcmp(model, "llama", 5))
		return TFS_HF_XSPM_LLAMA;
	if (n == 2 && !memcmp(model, "t5", 2) && xlmr_form(x, &v, &sc, &end))
		return TFS_HF_XSPM_XLMR;
	return 0;
}

/* ==== the ModelProto ==== */

static int pb_varint(tfs_buf *b, uint64_t v)
{
	uint8_t o[10];
	size_t k = 0;
	do {
		o[k] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			o[k] |= 0x80;
		k++;
	} while (v);
	return tfs_buf_append(b, o, k);
}

static int pb_bytes(tfs_buf *b, unsigned num, const void *p, size_t n)
{
	return pb_varint(b, (uint64_t)num << 3 | 2) || pb_varint(b, n) || tfs_buf_append(b, p, n);
}

/* an int32 field (negative: ten bytes, as protobuf writes it) */
static int pb_int(tfs_buf *b, unsigned num, int64_t v)
{
	return pb_varint(b, (uint64_t)num << 3) || pb_varint(b, (uint64_t)v);
}

/* a piece: its text, score and type (tmp: scratch) */
static int pb_piece(tfs_buf *b, tfs_buf *tmp, const char *s, size_t n, float f, int32_t t)
{
	uint8_t fb[5] = { 2 << 3 | 5 };
	memcpy(fb + 1, &f, 4);
	tmp->len = 0;
	return pb_bytes(tmp, 1, s, n) || tfs_buf_append(tmp, fb, 5) || pb_int(tmp, 3, t) ||
	       pb_bytes(b, 1, tmp->data, tmp->len);
}

/* Llama's trainer_spec: the special pieces' ids from the GGUF's keys */
static int llama_ids(tfs_buf *spec, const tfs_hf_export *x, const tfs_hf_xvocab *v)
{
	static const struct { const char *key; unsigned id, piece; } sp[] = {
		{ "tokenizer.ggml.unknown_token_id", 40, 45 },
		{ "tokenizer.ggml.bos_token_id", 41, 46 },
		{ "tokenizer.ggml.eos_token_id", 42, 47 },
		{ "tokenizer.ggml.padding_token_id", 43, 48 },
	};
	int rc = 0;
	for (size_t i = 0; !rc && i < sizeof sp / sizeof *sp; i++) {
		double id;
		size_t n;
		const char *s;
		if (tfs_hf_xkv_num(x, sp[i].key, &id) && id >= 0 &&
		    (s = tfs_hf_xvocab_text(v, (uint64_t)id, &n)))
			rc = pb_int(spec, sp[i].id, (int64_t)id) ||
			     pb_bytes(spec, sp[i].piece, s, n);
		else
			rc = pb_int(spec, sp[i].id, -1);
	}
	return rc;
}

/* normalizer_spec: Llama's "identity" without whitespace folding (llama.cpp's SPM tokenizer
 * does neither more nor less); XLM-R's the GGUF's precompiled charsmap (SentencePiece's
 * nmt_nfkc, XLM-R's: the name is the trainer's, the map is what normalizes) and folding */
static int normalizer(tfs_buf *b, tfs_buf *spec, const tfs_hf_export *x, bool xlmr)
{
	double dummy = 1, fold = 1;
	uint32_t t;
	uint64_t n = 0, len = 0;
	const uint8_t *map = NULL;
	tfs_hf_xkv_num(x, "tokenizer.ggml.add_space_prefix", &dummy);
	tfs_hf_xkv_num(x, "tokenizer.ggml.remove_extra_whitespaces", &fold);
	if (xlmr && (!tfs_hf_xkv_arr(x, "tokenizer.ggml.precompiled_charsmap", &t, &n, &map,
				     &len) || t != TFS_GGUF_UINT8 || len < n))
		n = 0;
	spec->len = 0;
	int rc = n ? pb_bytes(spec, 1, "nmt_nfkc", 8) || pb_bytes(spec, 2, map, n)
		   : pb_bytes(spec, 1, "identity", 8);
	return rc || pb_int(spec, 3, dummy != 0) || pb_int(spec, 4, xlmr && fold != 0) ||
	       pb_int(spec, 5, 1) || pb_bytes(b, 3, spec->data, spec->len);
}

/* Llama's: every token a piece with its text, score and type (the GGUF's token types are
 * SentencePiece's numbers), trainer_spec a BPE model (llama.cpp's SPM tokenizer merges by
 * score as SentencePiece's BPE does) with byte_fallback when there are BYTE pieces and the
 * special pieces' ids.  XLM-R's: a unigram model (the converter asserts it) whose pieces
 * are <unk> <s> </s> (XLM-R's, which the converter replaces by fairseq's four) and the
 * GGUF's tokens from id 4 to the fillers, pieces 3 on; the last piece's place past them is
 * the one the converter's shift drops (config.json's vocab_size keeps it: a filler). */
int tfs_hf_export_make_spm(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	static const char *const head[3] = { "<unk>", "<s>", "</s>" };
	tfs_hf_xvocab v;
	spm_scores sc;
	uint64_t end = 0, unk_at = 0;
	int kind = tfs_hf_xspm_kind(x);
	bool xlmr = kind == TFS_HF_XSPM_XLMR;
	if (!kind || !tfs_hf_xvocab_get(&v, x) || !get_scores(x, &v, &sc) ||
	    (xlmr && !xlmr_form(x, &v, &sc, &end)))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: malformed vocabulary");
	/* SentencePiece has one UNKNOWN piece: the first; any other (an older converter's
	 * [PADn] fillers) is UNUSED, which neither tokenizer produces.  XLM-R's <unk> is it
	 * unless one of the GGUF's pieces is (a model whose unknown piece is not its first) */
	for (uint64_t i = 4; xlmr && i < end && !unk_at; i++)
		unk_at = tfs_hf_xvocab_type(&v, i) == TOK_UNKNOWN ? i - 1 : 0;
	unsigned unk = xlmr && !unk_at;
	tfs_buf piece = { 0 }, spec = { 0 };
	int rc = 0;
	bool bytes = false;
	for (unsigned j = 0; xlmr && !rc && j < 3; j++)
		rc = pb_piece(b, &piece, head[j], strlen(head[j]), 0,
			      j || unk_at ? TOK_CONTROL : TOK_UNKNOWN);
	const uint8_t *p = v.tok;
	uint64_t left = v.tok_len;
	for (uint64_t i = 0; !rc && i < (xlmr ? end : v.n); i++) {
		size_t n = 0;
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		int32_t t = tfs_hf_xvocab_type(&v, i);
		if (xlmr && i < 4)
			continue;
		if (t < 1 || t > 6)
			t = TOK_NORMAL;
		if (t == TOK_UNKNOWN && unk++)
			t = TOK_UNUSED;
		bytes |= t == TOK_BYTE;
		rc = pb_piece(b, &piece, s, n, score_of(&sc, i), t);
	}
	/* trainer_spec: model_type (BPE 2, unigram 1), vocab_size, byte_fallback, the special
	 * pieces' ids (XLM-R's: <unk>, <s> 1, </s> 2, no pad) */
	uint64_t np = xlmr ? end - 1 : v.n;
	rc = rc || pb_int(&spec, 3, xlmr ? 1 : 2) || pb_int(&spec, 4, (int64_t)np) ||
	     (bytes && pb_int(&spec, 35, 1));
	if (xlmr)
		rc = rc || pb_int(&spec, 40, (int64_t)unk_at) || pb_int(&spec, 41, 1) ||
		     pb_int(&spec, 42, 2) || pb_int(&spec, 43, -1);
	else
		rc = rc || llama_ids(&spec, x, &v);
	rc = rc || pb_bytes(b, 2, spec.data, spec.len) || normalizer(b, &spec, x, xlmr);
	tfs_buf_free(&piece);
	tfs_buf_free(&spec);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== added_tokens.json (Llama's) ==== */

/* the USER_DEFINED tokens, which the converter reads back as such (score -1000, the score
 * its readers give every added token) */
bool tfs_hf_xspm_has_user_tokens(const tfs_hf_export *x)
{
	tfs_hf_xvocab v;
	if (!tfs_hf_xvocab_get(&v, x) || !v.type)
		return false;
	for (uint64_t i = 0; i < v.n; i++)
		if (tfs_hf_xvocab_type(&v, i) == TOK_USER)
			return true;
	return false;
}

int tfs_hf_export_make_added_tokens(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	tfs_hf_xvocab v;
	if (!tfs_hf_xvocab_get(&v, x))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: malformed vocabulary");
	const uint8_t *p = v.tok;
	uint64_t left = v.tok_len;
	bool first = true;
	int rc = tfs_buf_append(b, "{", 1);
	for (uint64_t i = 0; !rc && i < v.n; i++) {
		size_t n = 0;
		const char *s = tfs_hf_xnext_str(&p, &left, &n);
		if (tfs_hf_xvocab_type(&v, i) != TOK_USER)
			continue;
		rc = tfs_buf_append(b, first ? "\n  " : ",\n  ", first ? 3 : 4) ||
		     tfs_hf_xjstr(b, s, n) || tfs_buf_printf(b, ": %llu", (unsigned long long)i);
		first = false;
	}
	rc = rc || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== XLM-R's tokenizer_config.json ==== */

/* XLMRobertaTokenizer's: the add_*_token flags and the special tokens by the GGUF's ids (the
 * converter reads the ids from config.json: without tokenizer.json gguf-py's SpecialVocab
 * finds no token by these names, and only the flags count); a mask id past the pieces, a
 * filler in the GGUF, is XLMRobertaTokenizer's "<mask>" (which it puts there, after the
 * model's pieces). */
int tfs_hf_export_make_xlmr_tokenizer_config(tfs_buf *b, const tfs_hf_export *x,
					     tfs_error *err)
{
	tfs_hf_xvocab v;
	spm_scores sc;
	uint64_t end;
	double id, ctx;
	if (!tfs_hf_xvocab_get(&v, x) || !get_scores(x, &v, &sc) || !xlmr_form(x, &v, &sc, &end))
		return tfs_error_set(err, TFS_E_FORMAT, "tokenizer.ggml.*: malformed vocabulary");
	int rc = tfs_buf_append(b, "{", 1) || tfs_hf_xadd_token_flags(b, x);
	for (size_t i = 0; !rc && i < TFS_HF_N_SPECIAL; i++) {
		char name[64];
		const char *s = NULL;
		size_t n = 0;
		bool mask = !strcmp(tfs_hf_xspecial_types[i], "mask");
		snprintf(name, sizeof name, "%s_token", tfs_hf_xspecial_types[i]);
		if (!tfs_hf_xkv_num(x, tfs_hf_xspecial_keys[i], &id) || id < 0)
			continue;
		if (mask && (uint64_t)id >= end)
			s = "<mask>", n = 6;
		else if ((uint64_t)id < end)
			s = tfs_hf_xvocab_text(&v, (uint64_t)id, &n);
		if (s)
			rc = tfs_hf_xmember(b, name) || tfs_hf_xjstr(b, s, n);
	}
	if (!rc && tfs_hf_xkv_num(x, ".context_length", &ctx))
		rc = tfs_hf_xmember(b, "model_max_length") || tfs_buf_printf(b, "%.0f", ctx);
	rc = rc || tfs_hf_xmember(b, "tokenizer_class") ||
	     tfs_hf_xjcstr(b, "XLMRobertaTokenizer") || tfs_buf_append(b, "\n}\n", 3);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}
