/*
 * dtype.h - every element type tensorfs knows and its traits (public).
 */
#ifndef TFS_DTYPE_H
#define TFS_DTYPE_H

#include "../base/base.h"
#include "dtype_id.h"

/* ==== data types ==== */

typedef struct {
	const char *name;         /* "Q4_K", "F16", "BOOL", "F8_E4M3" ... (GGML / safetensors spelling) */
	uint32_t block_elems;     /* elements per block; 0 for a removed/unknown id */
	uint32_t block_bytes;     /* bytes per block (sub-byte types: F4 is 2 elems/1 byte, F6 4/3) */
	uint32_t f32_per_elem;    /* float32 values per element in the f32 view: 1, or 2 for C64 (re, im) */
	const char *npy_descr;    /* numpy descr of the raw bytes ("<f4", "|i1", "|b1", "<c8"...), or NULL
	                             when numpy has no such dtype (then npy/ serves float32) */
	tfs_to_f32_fn to_f32;     /* the fastest kernel this CPU runs; NULL: no float view */
	tfs_to_f32_fn to_f32_ref; /* the portable scalar reference kernel (tests compare the two) */
} tfs_dtype_info;

/* The traits of dtype id, or NULL for an id that is not a known type. */
const tfs_dtype_info *tfs_dtype(int id);
/* The id for a name as spelled in tfs_dtype_info.name (case-sensitive), or -1. */
int tfs_dtype_from_name(const char *name);
/* Bytes needed by nelems elements of dtype id; fails (TFS_E_FORMAT) when nelems is not a
 * whole number of blocks, or on overflow. */
int tfs_dtype_nbytes(uint64_t *out, int id, uint64_t nelems, tfs_error *err);

#endif
