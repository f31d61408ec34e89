/*
 * hf_special_tokens.c - transformers' all_special_tokens of a fast tokenizer, the set some
 * vocabularies type their tokens by (CONTROL): XLM-R's Unigram tokenizer.json read through
 * XLMRobertaTokenizerFast (hf_vocab_xlmr.c: nomic-bert-moe), Gemma 4's (hf_gemma4.c), each
 * with its tokenizer class's defaults.
 */
#include "hf_vocab_impl.h"

#include <stdbool.h>
#include <string.h>

/* transformers' named special-token attributes, in TFS_HF_SPECIAL_ATTRS' order */
static const char *const special_attrs[TFS_HF_SPECIAL_ATTRS] = { "bos_token", "eos_token",
	"unk_token", "sep_token", "pad_token", "cls_token", "mask_token" };

/* t's text into the set (an added token's object: its content; nothing for an empty one) */
static int add_special(json_t *set, const json_t *t, tfs_error *err)
{
	if (json_is_object(t))
		t = json_object_get(t, "content");
	if (!json_is_string(t) || !json_string_length(t))
		return 0;
	if (json_object_setn_new(set, json_string_value(t), json_string_length(t), json_true()))
		return tfs_error_set(err, TFS_E_NOMEM, "tokenizer_config.json: out of memory");
	return 0;
}

int tfs_hf_all_special(json_t **out, const tfs_hf_files *files, const json_t *cfg,
		       const char *const *defaults, tfs_error *err)
{
	json_t *stm = NULL, *set = json_object();
	int rc = set ? tfs_hf_read_json(files, "special_tokens_map.json", &stm, err)
		     : tfs_error_set(err, TFS_E_NOMEM, "tokenizer_config.json: out of memory");
	for (size_t i = 0; !rc && i < TFS_HF_SPECIAL_ATTRS; i++) {
		const json_t *v = json_object_get(stm, special_attrs[i]);
		if (!v)
			v = json_object_get(cfg, special_attrs[i]);
		rc = v ? add_special(set, v, err) : 0;
		if (!rc && !v && defaults[i] && json_object_set_new(set, defaults[i], json_true()))
			rc = tfs_error_set(err, TFS_E_NOMEM, "tokenizer_config.json: out of memory");
	}
	const char *k;
	json_t *tv;
	json_object_foreach((json_t *)cfg, k, tv) {   /* every other top-level "*_token" */
		size_t n = strlen(k);
		bool named = false;
		for (size_t j = 0; j < TFS_HF_SPECIAL_ATTRS; j++)
			named |= strcmp(k, special_attrs[j]) == 0;
		if (!rc && !named && n > 6 && strcmp(k + n - 6, "_token") == 0 &&
		    json_is_string(tv))
			rc = add_special(set, tv, err);
	}
	const json_t *add = json_object_get(stm, "additional_special_tokens"), *t;
	if (!json_array_size(add))   /* (0 for a non-array too) */
		add = json_object_get(cfg, "additional_special_tokens");
	size_t i;
	json_array_foreach(add, i, t)
		if (!rc)
			rc = add_special(set, t, err);
	const json_t *e = json_object_get(cfg, "extra_special_tokens");
	json_array_foreach(e, i, t)
		if (!rc)
			rc = add_special(set, t, err);
	json_object_foreach((json_t *)e, k, tv)
		if (!rc)
			rc = add_special(set, tv, err);
	json_decref(stm);
	if (rc)
		json_decref(set);
	else
		*out = set;
	return rc;
}
