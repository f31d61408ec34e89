/*
 * hf_vocab.h - the tokenizer keys of the GGUF view of a Hugging Face model, as llama.cpp's
 * convert_hf_to_gguf.py (and gguf-py's SpecialVocab) writes them.
 *
 * Files read (through tfs_hf_files; each optional unless said):
 *   1. tokenizer.model         SentencePiece's ModelProto (hf_spm.c): when present the
 *                              "llama" vocabulary (tokens, scores, token types).
 *   2. tokenizer.json          Hugging Face tokenizers' file (hf_bpe.c): without
 *                              tokenizer.model, a byte-level BPE gives the "gpt2" vocabulary
 *                              (tokens, types, merges, the pre-tokenizer's name); it also
 *                              lists the added tokens special ids are looked up in.
 *   3. added_tokens.json       SentencePiece vocabularies: extra pieces (user-defined).
 *   4. tokenizer_config.json   added_tokens_decoder, {bos,eos,...}_token, add_bos_token /
 *                              add_eos_token, chat_template (a string or named templates),
 *                              add_prefix_space.
 *   5. config.json             (given parsed) vocab_size, {bos,eos,...}_token_id.
 *   6. merges.txt              merges when tokenizer.json has none.
 * special_tokens_map.json, generation_config.json and chat_template.jinja are not read: the
 * reference converter (llama.cpp c392e50) does not read them for these architectures.
 * Qwen3ForCausalLM postdates that converter: it is treated as llama.cpp later added it, a
 * Qwen2Model subclass (the same set_vocab).
 */
#ifndef TFS_HF_VOCAB_H
#define TFS_HF_VOCAB_H

#include <jansson.h>

#include "hf_keys.h"
#include "cursor.h"

/* Appends to out the tokenizer keys the converter writes for architecture arch (a class
 * name of tfs_hf_archs[]: its row's vocab kind, hf_arch.h) in its order: tokenizer.ggml.model, .pre, .tokens, [.scores], .token_type, [.merges], the special
 * token ids, add_bos/add_eos, tokenizer.chat_template[s], and the llama family's extras
 * (add_space_prefix, CodeLlama's infill ids).  config is config.json (borrowed).
 * 0, or an error naming the file and the problem: TFS_E_FORMAT for a malformed or
 * unsupported tokenizer (an unknown BPE pre-tokenizer included), TFS_E_NOTFOUND when the
 * repo has no tokenizer the converter could use, TFS_E_UNSUPPORTED for an architecture
 * this file does not know.  On error, keys already appended stay in out. */
int tfs_hf_vocab_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const char *arch,
		      const json_t *config, tfs_error *err);

/* ==== SentencePiece model (hf_spm.c) ==== */

enum {   /* SentencePiece's piece types, which are also GGUF's token types */
	TFS_TOK_NORMAL = 1, TFS_TOK_UNKNOWN = 2, TFS_TOK_CONTROL = 3, TFS_TOK_USER_DEFINED = 4,
	TFS_TOK_UNUSED = 5, TFS_TOK_BYTE = 6,
};

typedef struct {
	const char *piece;   /* borrowed from the parsed bytes; not NUL-terminated */
	size_t len;
	float score;
	int type;            /* TFS_TOK_* */
} tfs_spm_piece;

typedef struct {
	tfs_spm_piece *pieces;   /* owned array */
	size_t n;
	int model_type;          /* trainer_spec.model_type: 1 unigram, 2 bpe, 3 word, 4 char */
	bool byte_fallback;      /* trainer_spec.byte_fallback */
	bool add_dummy_prefix;   /* normalizer_spec.add_dummy_prefix (default true) */
	bool remove_extra_whitespaces;
	const uint8_t *charsmap; /* normalizer_spec.precompiled_charsmap (borrowed), or NULL */
	size_t charsmap_len;
} tfs_spm_model;

/* Parses len bytes of a tokenizer.model (file: its name for messages) and checks them as
 * SentencePiece's loader does (non-empty unique pieces, one unknown piece, byte pieces only
 * with byte_fallback and then all 256, valid UTF-8).  Pieces borrow data: it must outlive m.
 * 0 or TFS_E_FORMAT naming the file, the offset or piece, and the problem. */
int tfs_spm_parse(tfs_spm_model *m, const uint8_t *data, uint64_t len, const char *file,
		  tfs_error *err);
void tfs_spm_free(tfs_spm_model *m);

/* ==== tokenizer.json, read compactly (hf_tokjson.c) ==== */

/* model.vocab and model.merges packed (the bulk of a BPE tokenizer.json), the rest as JSON. */
typedef struct tfs_hf_tok {
	json_t *root;        /* the file without model.vocab (when an object) and model.merges
			      * (when a list): "added_tokens", "normalizer", "model"."type"... */
	bool has_vocab;      /* model.vocab was an object: its entries, in file order (a key
			      * given twice once, at its first place, with its last id): */
	char *text;          /* entry k's text: text + off[k], off[k + 1] - off[k] bytes */
	uint32_t *off, *id;
	size_t n;
	uint32_t *slot;      /* text -> k + 1 (0: empty); mask + 1 slots */
	size_t mask;
	bool has_merges;     /* model.merges was a list: */
	bool merge_pairs;    /* of ["a", "b"] (else of "a b") */
	size_t n_merges;     /* merge k: part a mtext[moff[2k] .. moff[2k+1]), b up to moff[2k+2] */
	char *mtext;
	uint32_t *moff;
	uint8_t *mbad;       /* NULL, or per merge 1: a string without exactly one space (whole
			      * in part a) */
	size_t cap_merges;
} tfs_hf_tok;

/* Parses len bytes of a tokenizer.json (file: its name for messages) into t.  0, or
 * TFS_E_FORMAT naming file, the byte offset and the problem (t is then empty), or
 * TFS_E_NOMEM. */
int tfs_hf_tok_parse(tfs_hf_tok *t, const char *data, size_t len, const char *file,
		     tfs_error *err);
void tfs_hf_tok_clear(tfs_hf_tok *t);
/* The repo's tokenizer.json parsed into *out (NULL, and 0, when the repo has none);
 * tfs_hf_tok_close frees it. */
int tfs_hf_tok_read(tfs_hf_tok **out, const tfs_hf_files *f, tfs_error *err);
void tfs_hf_tok_close(tfs_hf_tok *t);
/* model.vocab's id of the n bytes at s. */
bool tfs_hf_tok_id(const tfs_hf_tok *t, const char *s, size_t n, uint32_t *id);
/* The same for up to TFS_HF_TOK_BATCH texts at once (s[i], len[i] -> ids[i] when found[i]):
 * the table's memory is fetched for all before any is compared, so the cache misses of a
 * batch overlap (the merges' lookups, three per merge, are most of a BPE repo's mount). */
#define TFS_HF_TOK_BATCH 48
void tfs_hf_tok_ids(const tfs_hf_tok *t, const char *const *s, const size_t *len, size_t n,
		    uint32_t *ids, bool *found);

/* ==== byte-level BPE: the pre-tokenizer's name (hf_bpe.c) ==== */

/* The check text of the converter's get_vocab_base_pre (chktxt), UTF-8. */
extern const char tfs_hf_chktxt[];

/* The name llama.cpp's converter gives tokenizer (tokenizer.json) in tokenizer.ggml.pre,
 * with tokenizer_config.json (may be NULL) for what transformers' classes change.  The rule:
 *   1. When the normalizer and pre-tokenizer are a configuration whose split of the check
 *      text is known (hf_pre_table.h, made with Hugging Face tokenizers), the check text is
 *      tokenized with the file's own vocabulary, merges, added tokens and post-processor,
 *      and the sha256 of the ids' Python list text (the converter's chkhsh) looked up in the
 *      converter's table: the same answer as the converter.
 *   2. When that hash is not in the table (a changed vocabulary) or cannot be computed, a
 *      configuration that only one of llama.cpp's pre-tokenizers has gives that name
 *      (llama3's regex: llama-bpe with a BOS template, else smaug-bpe; Qwen2's: qwen2;
 *      DeepSeek-V3's; tekken's; ...).
 *   3. Anything else is refused (TFS_E_FORMAT, the reason in err, naming file).
 * *name is a static string.  *chkhsh (may be NULL) gets the hash's 64 hex digits + NUL when
 * it could be computed, else "".  */
int tfs_hf_bpe_pre(const char **name, char *chkhsh, const tfs_hf_tok *tokenizer,
		   const json_t *tokenizer_config, const char *file, tfs_error *err);
/* The normalizer and pre-tokenizer (JSON texts, static) of the byte-level configuration
 * whose pre-tokenizer is ggml_pre (a tokenizer.ggml.pre), for the reverse view's
 * tokenizer.json (hf_export_json.c); false when the table has none. */
bool tfs_hf_pre_json(const char *ggml_pre, const char **normalizer, const char **pre);

/* hf_wordpiece.c: the n words at text (lens[k] bytes each, back to back) through
 * tokenizer's WordPiece model: *ids (malloc'd), *nids of them.  0; 1 when the vocabulary
 * has no unk_token (tokenizers fails); TFS_E_NOMEM. */
int tfs_hf_wordpiece_words(const tfs_hf_tok *tokenizer, const char *text,
			   const uint16_t *lens, size_t n, uint32_t **ids, size_t *nids);

#endif
