/*
 * quantize.h - a model shown quantized, as llama-quantize would write it, computed lazily
 * (public).
 *
 * The view is a GGUF model (views/qplan.h: every tensor's type, its place, the keys
 * llama-quantize changes) built from the header alone: its sizes and offsets are known at
 * once and nothing is quantized.  A quantized tensor's bytes come from a computed source:
 * when first read, the whole tensor is quantized, by a small pool of threads working on
 * chunks of its blocks (and on the tensors that follow, so that a reader of the whole file
 * finds them ready), never more than a chunk's float32 values per thread in memory, into a
 * file of the cache directory, named by what makes its bytes (the source file's identity,
 * the tensor, the type, the importance matrix), written unnamed and linked once complete
 * and fsynced: a second view, even in another process, reads the file as it is.  A tensor
 * whose type does not change is the source's bytes, as they are.  Where no cache can be
 * written, every read computes the blocks it needs.  Nothing is written to the source.
 */
#ifndef TFS_QUANT_VIEW_H
#define TFS_QUANT_VIEW_H

#include "../model/model.h"

typedef struct {
	const char *quantize;   /* llama-quantize's type name ("Q4_K_M", any case, or its number) */
	const char *imatrix;    /* llama.cpp's importance matrix file, or NULL */
	const char *cache_dir;  /* NULL: $XDG_CACHE_HOME/tensorfs or ~/.cache/tensorfs; the
				 * tensors go to its quantized/ folder */
	const char *salt;       /* what else decides the base's values (a view's outtype), or
				 * NULL: part of the cache names */
	uint64_t cache_size;    /* the quantized/ folder's bound in bytes (0: none): a tensor's
				 * file is linked after the least recently used files of other
				 * tensors are removed to make room; a larger tensor is computed
				 * on each read */
	unsigned threads;       /* the pool's threads (0: the CPUs online, at most 8) */
} tfs_quant_opts;

/*
 * The view of base quantized as o says, into *out.  owner is the model opened (base is it,
 * or a view it owns): the view takes it over (freed with the view, or here on failure).
 * Fails with the plan's error (an unknown type lists the valid ones; a type that needs an
 * importance matrix without one; a tensor that cannot become the type, and why) or the
 * importance matrix's.
 */
int tfs_quant_view(tfs_model **out, tfs_model *owner, const tfs_model *base,
		   const tfs_quant_opts *o, tfs_error *err);
/* A line for the user about the view (the cache directory cannot be written: every read
 * computes), or NULL. */
const char *tfs_quant_view_note(const tfs_model *m);
/* Whether name is a type tfs_quant_view takes; the list of them into out (", " between). */
bool tfs_quant_type_valid(const char *name);
int tfs_quant_type_list(tfs_buf *out);

#endif
