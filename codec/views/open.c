/*
 * open.c - tfs_view_open: a model with its views (view.h).
 */
#include "view.h"
#include "open.h"
#include "hf_view.h"
#include "quantize.h"

#include <string.h>

bool tfs_outtype_valid(const char *name)
{
	static const char *const names[] = { "auto", "f32", "f16", "bf16", "q8_0" };
	for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

int tfs_view_open(tfs_model **out, const char *source, const tfs_open_opts *opts,
		  tfs_error *err)
{
	tfs_model *m = NULL;
	*out = NULL;
	int rc = tfs_model_open(&m, source, opts, err);
	if (rc)
		return rc;
	tfs_hf_view_attach(m, source, opts); /* the view, or the reason there is none */
	if (!opts || !opts->quantize) {
		*out = m;
		return 0;
	}
	/* -o quantize: the model opened is its quantized view (of a repo's GGUF view) */
	const tfs_model *base = tfs_model_gguf_view(m) ? tfs_model_gguf_view(m) : m;
	tfs_quant_opts qo = { .quantize = opts->quantize, .imatrix = opts->imatrix,
			      .cache_dir = opts->cache_dir, .salt = opts->outtype,
			      .threads = opts->quantize_threads };
	return tfs_quant_view(out, m, base, &qo, err);
}
