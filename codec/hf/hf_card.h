/*
 * hf_card.h - a model card's YAML front matter (README.md), as much as gguf-py's Metadata
 * reads of it, and generation_config.json's sampling keys (codec-private; hf_card.c, used by
 * hf_meta.c).
 */
#ifndef TFS_HF_CARD_H
#define TFS_HF_CARD_H

#include "hf_keys.h"

typedef enum { Y_ABSENT = 0, Y_NULL, Y_STR, Y_OTHER, Y_LIST, Y_MAP } ykind;

typedef struct yval {
	ykind kind;
	char *s;               /* Y_STR */
	struct yval *items;    /* Y_LIST */
	size_t n;
} yval;

typedef struct {
	char *key;
	yval v;
} yentry;

typedef struct {
	yentry *e;
	size_t n, cap;
} ycard;

void tfs_hf_card_free(ycard *c);
/* The value of a top-level key, or NULL. */
const yval *tfs_hf_card_get(const ycard *c, const char *key);
/* README.md's front matter into c (empty when the repo has none, or it has none). */
int tfs_hf_card_load(ycard *c, const tfs_hf_files *files, tfs_error *err);
/* n bytes at s as a new NUL-terminated string (malloc'd), or NULL. */
char *tfs_hf_dupn(const char *s, size_t n);
/* general.sampling.* from generation_config.json into out, as gguf-py writes them (none when
 * the repo has no such file, or not a JSON object); an error only when it cannot be read. */
int tfs_hf_sampling_keys(tfs_hf_kvs *out, const tfs_hf_files *files, tfs_error *err);

#endif
