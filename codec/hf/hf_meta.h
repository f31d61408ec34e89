/*
 * hf_meta.h - the general.* keys convert_hf_to_gguf.py derives for a model (gguf-py's
 * Metadata.load and set_gguf_meta_model, no --metadata override, no --model-name): from the
 * model card's YAML front matter (README.md), config.json's _name_or_path, and the
 * directory's name, in that order of precedence.
 */
#ifndef TFS_HF_META_H
#define TFS_HF_META_H

#include <stdint.h>

#include <jansson.h>

#include "hf_keys.h"

/*
 * Appends general.name, general.author ... general.languages as the converter writes them
 * (only those it has a value for; general.name always).  config is config.json (borrowed);
 * dir_name the directory's name (Path.name); total_params the element count of the tensors
 * written (for general.size_label, and to tell a size in a name from a context length).
 * README.md is read through files when present.  0, or an error (TFS_E_NOMEM, or a README.md
 * that cannot be read).  A model card whose front matter is not the YAML this file reads
 * (see hf_meta.c) is used for what it could read.
 */
int tfs_hf_meta_keys(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *config,
		     const char *dir_name, int64_t total_params, tfs_error *err);
/* The same, with general.size_label (when neither the card nor the names give one) size_label
 * instead of the one total_params makes (tfs_hf_size_label): a mixture of experts' "8x1.2M"
 * (hf_moe.c). */
int tfs_hf_meta_keys_label(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *config,
			   const char *dir_name, int64_t total_params, const char *size_label,
			   tfs_error *err);

/* gguf-py's size_label(total, shared, expert, expert_count) without experts: "1.2M", "7.2B". */
void tfs_hf_size_label(char out[32], uint64_t total_params);

#endif
