/*
 * hf_wordpiece.c - Hugging Face tokenizers' WordPiece model on words already normalized and
 * pre-tokenized (hf_pre_table.h's BERT configurations: the check text's words), for the
 * converter's check hash of a BERT vocabulary (hf_bpe.c, tfs_hf_bpe_pre).
 *
 * tokenizers' WordPiece::tokenize, per word: more than max_input_chars_per_word characters
 * -> [unk]; else greedy longest match from the left, every piece after the first looked up
 * with continuing_subword_prefix ("##") in front; a position where no piece matches makes
 * the whole word [unk].
 */
#include "hf_vocab.h"

#include <stdlib.h>
#include <string.h>

/* The byte length of the UTF-8 character that starts with byte c (1 for a stray byte). */
static size_t char_bytes(unsigned char c)
{
	return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

static size_t count_chars(const char *w, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i += char_bytes((unsigned char)w[i]))
		k++;
	return k;
}

/* The id of piece w[a, b), with the prefix when cont; false when the vocabulary lacks it. */
static bool piece_id(const tfs_hf_tok *tok, const char *prefix, size_t plen, const char *w,
		     size_t a, size_t b, bool cont, char *buf, uint32_t *id)
{
	size_t k = 0;
	if (cont) {
		memcpy(buf, prefix, plen);
		k = plen;
	}
	memcpy(buf + k, w + a, b - a);
	return tfs_hf_tok_id(tok, buf, k + b - a, id);
}

int tfs_hf_wordpiece_words(const tfs_hf_tok *tok, const char *text, const uint16_t *lens,
			   size_t n, uint32_t **ids, size_t *nids)
{
	const json_t *model = json_object_get(tok->root, "model");
	const json_t *unk = json_object_get(model, "unk_token");
	const json_t *pre = json_object_get(model, "continuing_subword_prefix");
	const json_t *mx = json_object_get(model, "max_input_chars_per_word");
	const char *prefix = json_is_string(pre) ? json_string_value(pre) : "##";
	size_t plen = strlen(prefix), total = 0, maxw = 0;
	size_t max_chars = json_is_integer(mx) && json_integer_value(mx) >= 0
				   ? (size_t)json_integer_value(mx) : 100;
	uint32_t unk_id;
	*ids = NULL;
	*nids = 0;
	if (!json_is_string(unk) || !tfs_hf_tok_id(tok, json_string_value(unk),
						  json_string_length(unk), &unk_id))
		return 1;   /* tokenizers fails: "Missing [UNK] token from the vocabulary" */
	for (size_t k = 0; k < n; k++) {
		total += lens[k];
		if (lens[k] > maxw)
			maxw = lens[k];
	}
	uint32_t *out = malloc((total + 1) * sizeof *out);
	char *buf = malloc(plen + maxw + 1);
	if (!out || !buf) {
		free(out);
		free(buf);
		return TFS_E_NOMEM;
	}
	size_t m = 0, pos = 0;
	for (size_t k = 0; k < n; pos += lens[k++]) {
		const char *w = text + pos;
		size_t wn = lens[k], start = 0, m0 = m;
		bool bad = count_chars(w, wn) > max_chars;
		while (!bad && start < wn) {
			size_t end = wn;
			uint32_t id = 0;
			bool found = false;
			while (start < end && !found) {
				found = piece_id(tok, prefix, plen, w, start, end, start > 0, buf, &id);
				if (!found)   /* one character shorter */
					while (--end > start && ((unsigned char)w[end] & 0xc0) == 0x80)
						;
			}
			if (!found) {
				bad = true;
				break;
			}
			out[m++] = id;
			start = end;
		}
		if (bad) {
			m = m0;
			out[m++] = unk_id;
		}
	}
	free(buf);
	*ids = out;
	*nids = m;
	return 0;
}
