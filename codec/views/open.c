/*
 * open.c - tfs_view_open: a model with its views (view.h).
 */
#include "view.h"
#include "open.h"
#include "hf_view.h"
#include "quantize.h"

#include <string.h>

int tfs_view_open(tfs_model **out, const char *source, const tfs_open_opts *opts,
		  tfs_error *err)
{
	tfs_model *m = NULL;
	*out = NULL;
	int rc = tfs_model_open(&m, source, opts, err);
	if (rc)
		return rc;
	/* a repo's GGUF view, or the reason there is none */
	if ((rc = tfs_hf_view_attach(m, source, opts, err))) {
		tfs_model_free(m);
		return rc;
	}
	/* rw,output=X.gguf: the model opened is the view */
	if (opts && opts->gguf_model && (tfs_model_gguf_view(m) || tfs_model_gguf_view_why(m)) &&
	    (rc = tfs_hf_view_take(&m, m, err)))
		return rc;
	if (!opts || !opts->quantize) {
		*out = m;
		return 0;
	}
	/* -o quantize: the model opened is its quantized view (of a repo's GGUF view) */
	const tfs_model *base = tfs_model_gguf_view(m) ? tfs_model_gguf_view(m) : m;
	tfs_quant_opts qo = { .quantize = opts->quantize, .imatrix = opts->imatrix,
			      .cache_dir = opts->cache_dir, .salt = opts->outtype,
			      .cache_size = opts->cache_size, .threads = opts->quantize_threads };
	return tfs_quant_view(out, m, base, &qo, err);
}
