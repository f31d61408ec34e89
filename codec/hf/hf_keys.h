/*
 * hf_keys.h - building blocks of the GGUF view of a Hugging Face model directory.
 *
 * 1. tfs_hf_kvs: an ordered list of GGUF keys, each value in GGUF payload encoding (as tfs_kv
 *    in tensorfs.h): scalars little-endian; a string is u64 length + bytes; an array is u32
 *    element type + u64 count + the elements (strings as above).  The list owns every name and
 *    payload; the add functions copy what they are given.
 * 2. tfs_hf_files: how the view reads a file of the repo (config.json, tokenizer.json, ...):
 *    whole, into memory the caller frees.  A local directory is one such reader
 *    (tfs_hf_files_dir); an hf:// repo can be another.
 */
#ifndef TFS_HF_KEYS_H
#define TFS_HF_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "base.h"
#include "value.h"

/* ==== Python's reading of a JSON value ==== */

struct json_t;
/* Python's truth value of v (bool(v): false for NULL, null, false, 0, 0.0, "", [] and {}),
 * as the converter's `if hparams.get(...)` tests a key. */
bool tfs_hf_py_true(const struct json_t *v);

/* ==== ordered key list ==== */

typedef struct {
	char *name;       /* owned, NUL-terminated */
	uint32_t type;    /* tfs_gguf_type */
	uint8_t *data;    /* owned payload, len bytes (NULL when len is 0) */
	uint64_t len;
} tfs_hf_kv;

typedef struct {
	tfs_hf_kv *kv;
	size_t n, cap;
} tfs_hf_kvs;   /* zero-initialize; tfs_hf_kvs_free when done */

/* Each appends one key (copying name and payload) and returns 0, or TFS_E_NOMEM (err says
 * which key).  A key already in the list keeps its place and takes the new value (gguf-py's
 * GGUFWriter does the same with a key written twice). */
int tfs_hf_kvs_add(tfs_hf_kvs *l, const char *name, uint32_t type, const void *payload,
		   uint64_t len, tfs_error *err);
int tfs_hf_kvs_add_str(tfs_hf_kvs *l, const char *name, const char *s, tfs_error *err);
/* A string of n bytes (may hold NUL bytes). */
int tfs_hf_kvs_add_strn(tfs_hf_kvs *l, const char *name, const char *s, size_t n,
			tfs_error *err);
int tfs_hf_kvs_add_u32(tfs_hf_kvs *l, const char *name, uint32_t v, tfs_error *err);
int tfs_hf_kvs_add_i32(tfs_hf_kvs *l, const char *name, int32_t v, tfs_error *err);
int tfs_hf_kvs_add_f32(tfs_hf_kvs *l, const char *name, float v, tfs_error *err);
int tfs_hf_kvs_add_bool(tfs_hf_kvs *l, const char *name, bool v, tfs_error *err);
/* An array of n strings: s[k] of lens[k] bytes (lens NULL: each strlen(s[k])). */
int tfs_hf_kvs_add_arr_str(tfs_hf_kvs *l, const char *name, const char *const *s,
			   const size_t *lens, size_t n, tfs_error *err);
int tfs_hf_kvs_add_arr_f32(tfs_hf_kvs *l, const char *name, const float *v, size_t n,
			   tfs_error *err);
int tfs_hf_kvs_add_arr_i32(tfs_hf_kvs *l, const char *name, const int32_t *v, size_t n,
			   tfs_error *err);
int tfs_hf_kvs_add_arr_bool(tfs_hf_kvs *l, const char *name, const bool *v, size_t n,
			    tfs_error *err);
/* Index of the key of that name, or -1. */
long tfs_hf_kvs_find(const tfs_hf_kvs *l, const char *name);
/* Frees every name and payload and the array; leaves *l empty (reusable). */
void tfs_hf_kvs_free(tfs_hf_kvs *l);

/* ==== the repo's files ==== */

typedef struct {
	/* Reads the repo file `name` ("config.json", "tokenizer.json") whole: *data malloc'd
	 * (the caller frees; NUL-terminated one past *len for convenience), *len its size.
	 * 0; TFS_E_NOTFOUND when the repo has no such file (err says so); another error when it
	 * exists but cannot be read. */
	int (*read)(void *ctx, const char *name, uint8_t **data, uint64_t *len, tfs_error *err);
	void *ctx;
	/* For messages about a file's content: where the files are ("/models/Llama-3.2-1B",
	 * "hf://ORG/REPO"); "dir/config.json: ...".  May be NULL. */
	const char *where;
} tfs_hf_files;

/* Reads the repo file `name` as f->read does, *data and *len zeroed first. */
int tfs_hf_read_file(const tfs_hf_files *f, const char *name, uint8_t **data, uint64_t *len,
		     tfs_error *err);
/* The same for a file the repo may lack (README.md, generation_config.json, merges.txt,
 * tokenizer.model, ...): 0 with *data NULL and *len 0 when it has none (err cleared). */
int tfs_hf_read_optional(const tfs_hf_files *f, const char *name, uint8_t **data,
			 uint64_t *len, tfs_error *err);

/* A reader of the local directory dir (borrowed: it must outlive f).  Names with a '/', "." or
 * ".." are refused (TFS_E_INVALID): only files at the top of the directory are read. */
void tfs_hf_files_dir(tfs_hf_files *f, const char *dir);

#endif
