/*
 * hf_pre.c - the pre-tokenizer table (hf_pre_table.h, made by tests/hf/gen_pre_table.js with
 * Hugging Face tokenizers): a tokenizer.json's configuration, its split at added tokens, the
 * converter's names of check hashes, and the reverse view's pre-tokenizer JSON.
 */
#include "hf_pre.h"

#include <stdlib.h>
#include <string.h>

#include "hf_pre_table.h"

/* ==== configurations ==== */

/* A deep copy of j without the "trim_offsets" members (they change offsets only). */
static json_t *without_offsets(const json_t *j)
{
	json_t *c = json_deep_copy(j ? j : json_null());
	json_t *stack[64];
	size_t n = 0;
	if (c)
		stack[n++] = c;
	while (n) {
		json_t *x = stack[--n];
		if (json_is_object(x)) {
			json_object_del(x, "trim_offsets");
			const char *k;
			json_t *v;
			json_object_foreach(x, k, v)
				if ((json_is_object(v) || json_is_array(v)) && n < 64)
					stack[n++] = v;
		} else if (json_is_array(x)) {
			size_t i;
			json_t *v;
			json_array_foreach(x, i, v)
				if ((json_is_object(v) || json_is_array(v)) && n < 64)
					stack[n++] = v;
		}
	}
	return c;
}

const struct hf_pre_config *tfs_hf_pre_find(const tfs_hf_tok *tok)
{
	json_t *nz = without_offsets(json_object_get(tok->root, "normalizer"));
	json_t *pre = without_offsets(json_object_get(tok->root, "pre_tokenizer"));
	const struct hf_pre_config *found = NULL;
	for (size_t i = 0; nz && pre && !found && i < sizeof hf_pre_configs / sizeof *hf_pre_configs;
	     i++) {
		const struct hf_pre_config *c = &hf_pre_configs[i];
		if (c->added)
			continue;   /* found by tfs_hf_pre_added */
		json_t *cn = json_loads(c->normalizer, JSON_DECODE_ANY, NULL);
		json_t *cp = json_loads(c->pre, 0, NULL);
		json_t *cn2 = without_offsets(cn), *cp2 = without_offsets(cp);
		if (cn2 && cp2 && json_equal(cn2, nz) && json_equal(cp2, pre))
			found = c;
		json_decref(cn);
		json_decref(cp);
		json_decref(cn2);
		json_decref(cp2);
	}
	json_decref(nz);
	json_decref(pre);
	return found;
}

/* Whether added token content s is in the NULL-terminated list l. */
static bool listed(const char *const *l, const char *s)
{
	for (; *l; l++)
		if (strcmp(*l, s) == 0)
			return true;
	return false;
}

const struct hf_pre_config *tfs_hf_pre_added(const struct hf_pre_config *c,
					     const tfs_hf_tok *tok)
{
	const char *text = c->text ? c->text : tfs_hf_chktxt;
	const json_t *added = json_object_get(tok->root, "added_tokens");
	size_t n = 0, i;
	json_t *a;
	bool odd = false;
	json_array_foreach(added, i, a) {
		const char *content = json_string_value(json_object_get(a, "content"));
		if (!content || !*content || (!strstr(text, content) &&
					      !strstr(tfs_hf_chktxt, content)))
			continue;
		n++;
		odd |= json_is_true(json_object_get(a, "lstrip")) ||
		       json_is_true(json_object_get(a, "rstrip")) ||
		       json_is_true(json_object_get(a, "single_word")) ||
		       (c->text && !json_is_true(json_object_get(a, "normalized")));
	}
	if (!n)
		return c;
	for (size_t k = 0; !odd && k < sizeof hf_pre_configs / sizeof *hf_pre_configs; k++) {
		const struct hf_pre_config *e = &hf_pre_configs[k];
		if (!e->added || strcmp(e->name, c->name) != 0 || e->byte_level != c->byte_level ||
		    strcmp(e->normalizer, c->normalizer) != 0 || strcmp(e->pre, c->pre) != 0)
			continue;
		size_t m = 0, hit = 0;   /* the same set: each occurring one listed, as many */
		while (e->added[m])
			m++;
		json_array_foreach(added, i, a) {
			const char *content = json_string_value(json_object_get(a, "content"));
			if (content && *content && (strstr(text, content) ||
						    strstr(tfs_hf_chktxt, content)))
				hit += listed(e->added, content);
		}
		if (hit == n && n == m)
			return e;
	}
	return NULL;
}

const char *tfs_hf_pre_known(const char *hex)
{
	const char *name = NULL;
	for (size_t i = 0; i < sizeof known_pre / sizeof *known_pre; i++)
		if (strcmp(known_pre[i].hash, hex) == 0)
			name = known_pre[i].name;   /* no break: the last match wins */
	return name;
}

/* The reverse view's tokenizer.json (hf_export_json.c): the normalizer and pre-tokenizer of
 * the configuration whose splits give tokenizer.ggml.pre (llama-bpe is Llama 3's). */
bool tfs_hf_pre_json(const char *ggml_pre, const char **normalizer, const char **pre)
{
	/* (ModernBERT's: GPT-NeoX's configuration, its added runs of spaces split first: the
	 * added tokens tokenizer.json lists) */
	const char *name = !strcmp(ggml_pre, "llama-bpe") ? "llama3"
			   : !strcmp(ggml_pre, "modern-bert") ? "gpt-neox" : ggml_pre;
	for (size_t i = 0; i < sizeof hf_pre_configs / sizeof *hf_pre_configs; i++)
		if (!strcmp(hf_pre_configs[i].name, name) && hf_pre_configs[i].byte_level) {
			*normalizer = hf_pre_configs[i].normalizer;
			*pre = hf_pre_configs[i].pre;
			return true;
		}
	return false;
}
