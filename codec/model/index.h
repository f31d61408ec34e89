/*
 * index.h - index.json and `tensorfs info --json`: whole, or as a stream (public).
 */
#ifndef TFS_INDEX_H
#define TFS_INDEX_H

#include "model.h"

/* The index.json document (pretty-printed JSON) describing the model; appends to out. */
int tfs_model_index_json(tfs_buf *out, const tfs_model *m, tfs_error *err);
/*
 * `tensorfs info --json`: the index.json document plus each key's full "value" (see
 * tfs_value_format_json; null for an array too large to show), the model's "parameters"
 * (tfs_model_param_count) and "tensor_bytes" (stored bytes of all tensors).  with_tensors
 * false leaves out the "tensors" list.  Appends to out.
 */
int tfs_model_info_json(tfs_buf *out, const tfs_model *m, bool with_tensors, tfs_error *err);
/*
 * index.json as a stream, for a document too large to hold: the same bytes as
 * tfs_model_index_json (values false, with_tensors true) or tfs_model_info_json, generated
 * piece by piece on each read.  tfs_index_open makes a sizing pass over the whole document
 * (the time of generating it once) and keeps its size and the offset of every 64th piece
 * (one piece per key and per tensor), so its memory is a small fraction of the document's;
 * tfs_index_read regenerates from the nearest recorded offset before off, or goes on from
 * where the previous read stopped.  The stream borrows m, which must not change while it is
 * open (after a change open a new one).  One reader at a time: the caller serializes
 * tfs_index_read on a stream.  _read copies up to len bytes at off into buf, *got of them
 * (0 at or past the end).  Errors name the model's file.
 */
typedef struct tfs_index tfs_index;
int tfs_index_open(tfs_index **out, const tfs_model *m, bool values, bool with_tensors,
		   tfs_error *err);
uint64_t tfs_index_size(const tfs_index *s);
int tfs_index_read(size_t *got, tfs_index *s, void *buf, uint64_t off, size_t len,
		   tfs_error *err);
void tfs_index_free(tfs_index *s);
/* The parameter count: the elements of every live tensor, an MLX-quantized weight counted
 * in its dequantized shape and its .scale/.bias/.global_scale companions not at all. */
uint64_t tfs_model_param_count(const tfs_model *m);

#endif
