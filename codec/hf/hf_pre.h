/*
 * hf_pre.h - the pre-tokenizer table of hf_bpe.c (hf_pre_table.h, made by
 * tests/hf/gen_pre_table.js) and its lookups, in hf_pre.c (codec-private).
 */
#ifndef TFS_HF_PRE_H
#define TFS_HF_PRE_H

#include "hf_vocab.h"

/* A normalizer + pre-tokenizer configuration: how Hugging Face tokenizers splits the check
 * text under it. */
struct hf_pre_config {
	const char *name;        /* for messages; also step 3's key */
	const char *where;       /* the tokenizer.json it was taken from */
	const char *normalizer;  /* JSON ("null": none) */
	const char *pre;         /* JSON */
	const char *text;        /* the check text normalized; NULL: unchanged */
	const uint16_t *lens;    /* byte length of each piece */
	size_t n;
	bool byte_level;         /* pieces in GPT-2's byte characters (else raw UTF-8) */
	/* the added tokens the text was split at first (NULL-terminated; NULL: none): the
	 * pieces of a tokenizer.json whose added tokens in the check text are these */
	const char *const *added;
};

/* a piece that is one of the added tokens (its length's top bit) */
#define TFS_HF_ADDED_PIECE 0x8000u

/* The configuration of tokenizer.json's normalizer and pre-tokenizer ("trim_offsets"
 * aside), or NULL. */
const struct hf_pre_config *tfs_hf_pre_find(const tfs_hf_tok *tok);
/* c's configuration split first at the added tokens of tok that occur in the check text (c
 * itself when none does), or NULL when the table has no such split: tokenizers splits the
 * text at them (leftmost-longest) before pre-tokenizing, and the table holds the splits of
 * known sets only.  Each must be a plain match (no lstrip, rstrip, single_word) and matched
 * on the text the table's pieces are of (normalized, or the text unchanged by it). */
const struct hf_pre_config *tfs_hf_pre_added(const struct hf_pre_config *c,
					     const tfs_hf_tok *tok);
/* The converter's name for check hash hex (the last match of its table), or NULL. */
const char *tfs_hf_pre_known(const char *hex);

#endif
