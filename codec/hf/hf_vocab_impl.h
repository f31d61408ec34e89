/*
 * hf_vocab_impl.h - what hf_vocab.c (the vocabularies) and hf_special.c (the repo's files as
 * the converter reads them, gguf-py's SpecialVocab) share (codec-private).
 */
#ifndef TFS_HF_VOCAB_IMPL_H
#define TFS_HF_VOCAB_IMPL_H

#include "hf_vocab.h"

/* A repo file as JSON (*out NULL when the repo has no such file: 0); integers beyond 64
 * bits read as reals, as Python reads them. */
int tfs_hf_read_json(const tfs_hf_files *f, const char *name, json_t **out, tfs_error *err);
/* len bytes of JSON at byte `at` of file (for messages) parsed as tfs_hf_read_json does. */
int tfs_hf_json_loadb(const char *data, size_t len, const char *file, size_t at, json_t **out,
		      tfs_error *err);
/* Python's int(v) for an int (not a bool). */
bool tfs_hf_py_int(const json_t *v, long long *out);
/* Whether out has the key.  The put functions set a key: appended, or (already there) given
 * the new value in place, as gguf-py does; put_str skips an empty string as add_string. */
bool tfs_hf_have_key(const tfs_hf_kvs *out, const char *name);
int tfs_hf_put_str(tfs_hf_kvs *out, const char *name, const char *s, size_t n,
		   tfs_error *err);
int tfs_hf_put_u32(tfs_hf_kvs *out, const char *name, uint32_t v, tfs_error *err);
int tfs_hf_put_bool(tfs_hf_kvs *out, const char *name, bool v, tfs_error *err);
/* gguf-py's SpecialVocab of the repo, loaded and written into out: merges (load_merges),
 * special token ids (n_vocab: their bound, -1 none), add_bos/add_eos/add_sep, chat
 * template(s), normalizer flags.  tok and cfg: tokenizer.json and tokenizer_config.json
 * (either may be NULL); config.json is read from files as it is. */
int tfs_hf_special_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
			 const json_t *cfg, bool load_merges, long long n_vocab, tfs_error *err);
/* The same with ids[k] set for types[k] after loading unless set already
 * (_set_special_token: GLM's bos, eot, unk, eom). */
int tfs_hf_special_vocab_ids(tfs_hf_kvs *out, const tfs_hf_files *files,
			     const tfs_hf_tok *tok, const json_t *cfg, bool load_merges,
			     long long n_vocab, const char *const *types, const long long *ids,
			     size_t n, tfs_error *err);
/* SpecialVocab(load_merges=load_merges, special_token_types=types): n types. */
int tfs_hf_special_vocab_types(tfs_hf_kvs *out, const tfs_hf_files *files,
			       const tfs_hf_tok *tok, const json_t *cfg, bool load_merges,
			       const char *const *types, size_t n, tfs_error *err);
/* HunYuanModel.set_vocab's fixes after SpecialVocab: config's eod_token_id as the eos id,
 * generation_config.json's first eos id as the eot id when it lists two or more. */
int tfs_hf_hunyuan_ids(tfs_hf_kvs *out, const tfs_hf_files *files, const json_t *config,
		       tfs_error *err);
/* SpecialVocab(special_token_types=types) with ids[k] set for types[k] after loading (as
 * CodeLlama's prefix, suffix, middle, eot: 32007..32010), written into out. */
int tfs_hf_fixed_ids(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		     const json_t *cfg, const char *const *types, const long long *ids, size_t n,
		     tfs_error *err);

/* hf_special_tokens.c: all_special_tokens of a fast tokenizer, a set (the keys of *out, a new
 * object): the named tokens (bos, eos, unk, sep, pad, cls, mask: special_tokens_map.json's
 * over tokenizer_config.json's, else defaults[i], the tokenizer class's, NULL for none), every
 * other top-level "*_token" string of tokenizer_config.json, additional_special_tokens
 * (special_tokens_map.json's when it has some), extra_special_tokens (a list's entries or a
 * dict's values); an added token's object by its content. */
enum { TFS_HF_SPECIAL_ATTRS = 7 };
int tfs_hf_all_special(json_t **out, const tfs_hf_files *files, const json_t *cfg,
		       const char *const *defaults, tfs_error *err);

/* hf_vocab_xlmr.c: XLMRobertaModel's _xlmroberta_set_vocab (sentencepiece.bpe.model), or
 * with json NomicBertModel's MoE variant's (a Unigram tokenizer.json read through
 * transformers); config: the hparams. */
int tfs_hf_xlmr_vocab(tfs_hf_kvs *out, const tfs_hf_files *files, const tfs_hf_tok *tok,
		      const json_t *cfg, const json_t *config, bool json, tfs_error *err);

#endif
