/*
 * hex.h - bytes as hex digits, and the SHA-256 of bytes as hex digits (codec-private): the
 * one encoder of S3's signatures, the block cache's file names, Ollama's blob digests, the
 * tokenizer check's hash, the quantize cache's keys and the journal's non-UTF-8 names.
 */
#ifndef TFS_HEX_H
#define TFS_HEX_H

#include <stddef.h>

/* The n bytes at p as 2n lowercase hex digits and a NUL: out holds 2n + 1 bytes. */
void tfs_hex(char *out, const void *p, size_t n);
/* The SHA-256 of the n bytes at p as 64 lowercase hex digits and a NUL.  0, or -1 when
 * libcrypto fails (out is then ""). */
int tfs_sha256_hex(char out[65], const void *p, size_t n);

#endif
