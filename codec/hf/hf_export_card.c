/*
 * hf_export_card.c - README.md of a GGUF model's Hugging Face form (hf_export.h): a model
 * card whose front matter gives the converter's Metadata back the general.* keys.
 */
#include "hf_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hf_export_kv.c's JSON text, by short names */
static int jstr(tfs_buf *b, const char *s, size_t n) { return tfs_hf_xjstr(b, s, n); }

/* ==== README.md: the model card, whose front matter holds the general.* keys ==== */

/* The converter's Metadata reads these model card keys (gguf-py metadata.py) into the
 * general.* keys of the same name. */
static const char *const card_keys[] = {
	"name", "author", "version", "organization", "description", "finetune", "basename",
	"size_label", "license", "license_name", "license_link",
};

/* a general.* array of strings as a YAML flow list (JSON strings) */
static int card_list(tfs_buf *b, const tfs_hf_export *x, const char *key, const char *card)
{
	uint32_t t;
	uint64_t n, len;
	const uint8_t *p;
	if (!tfs_hf_xkv_arr(x, key, &t, &n, &p, &len) || t != TFS_GGUF_STRING)
		return 0;
	int rc = tfs_buf_printf(b, "%s: [", card);
	for (uint64_t i = 0; !rc && i < n; i++) {
		size_t k;
		const char *s = tfs_hf_xnext_str(&p, &len, &k);
		if (!s)
			break;
		rc = tfs_buf_printf(b, "%s", i ? ", " : "") || jstr(b, s, k);
	}
	return rc ? rc : tfs_buf_append(b, "]\n", 2);
}

/* general.base_model.N.* / general.dataset.N.* as a YAML flow list of maps: gguf-py's
 * Metadata takes a map entry as it is (a repo id it would split into name and organization
 * by its own rules), and writes its members in its own order. */
static int card_entries(tfs_buf *b, const tfs_hf_export *x, const char *key, const char *card)
{
	static const char *const fields[] = { "name", "author", "version", "organization",
		"description", "url", "doi", "uuid", "repo_url" };
	char name[128];
	double count;
	snprintf(name, sizeof name, "%s.count", key);
	if (!tfs_hf_xkv_num(x, name, &count) || count < 1 || count > 1024)
		return 0;
	int rc = tfs_buf_printf(b, "%s: [", card);
	for (unsigned i = 0; !rc && i < (unsigned)count; i++) {
		bool first = true;
		rc = tfs_buf_printf(b, "%s{", i ? ", " : "");
		for (size_t f = 0; !rc && f < sizeof fields / sizeof *fields; f++) {
			size_t n;
			snprintf(name, sizeof name, "%s.%u.%s", key, i, fields[f]);
			const char *v = tfs_hf_xkv_str(x, name, &n);
			if (!v)
				continue;
			rc = tfs_buf_printf(b, "%s\"%s\": ", first ? "" : ", ", fields[f]) ||
			     jstr(b, v, n);
			first = false;
		}
		rc = rc || tfs_buf_append(b, "}", 1);
	}
	return rc ? rc : tfs_buf_append(b, "]\n", 2);
}

int tfs_hf_export_make_readme(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	int rc = tfs_buf_append(b, "---\n", 4);
	for (size_t i = 0; !rc && i < sizeof card_keys / sizeof *card_keys; i++) {
		char key[64];
		size_t n;
		snprintf(key, sizeof key, "general.%s", card_keys[i]);
		const char *s = tfs_hf_xkv_str(x, key, &n);
		if (s)
			rc = tfs_buf_printf(b, "%s: ", card_keys[i]) || jstr(b, s, n) ||
			     tfs_buf_append(b, "\n", 1);
	}
	rc = rc || card_list(b, x, "general.tags", "tags") ||
	     card_list(b, x, "general.languages", "language") ||
	     card_entries(b, x, "general.base_model", "base_model") ||
	     card_entries(b, x, "general.dataset", "datasets") ||
	     tfs_buf_printf(b, "library_name: transformers\n---\n\nThe Hugging Face form of a "
			    "GGUF model (%s), as tensorfs shows it: each tensor dequantized as ggml "
			    "dequantizes it.\n", x->row->classes[0]);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* ==== the list ==== */
