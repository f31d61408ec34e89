/*
 * registry.c - the computed views, one row each (registry.h), in the order tfs_view_open
 * stacks them: a Hugging Face repo's GGUF view first (the model the others see, when there is
 * one), then the quantized view of whatever model that is.
 */
#include "registry.h"
#include "view.h"

#include <string.h>

const tfs_view_kind tfs_view_table[] = {
	/* a Hugging Face repo's GGUF view: views/hf.c (-o outtype=; rw,output=X.gguf) */
	{ .name = "gguf", .what = "the GGUF view", .opts = tfs_hf_view_opts,
	  .open = tfs_hf_view_open, .applies = tfs_hf_is_repo, .under_later = true },
	/* the model quantized as llama-quantize writes it: views/quantize.c (-o quantize=) */
	{ .name = "quantize", .what = "the quantized view", .opts = tfs_quant_view_opts,
	  .open = tfs_quant_view_open },
};

const size_t tfs_n_views = sizeof(tfs_view_table) / sizeof(tfs_view_table[0]);

const char *tfs_view_of_option(const char *name)
{
	for (size_t i = 0; name && i < tfs_n_views; i++)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++)
			if (p->option && !strcmp(p->name, name))
				return tfs_view_table[i].name;
	return NULL;
}

const char *tfs_view_option_name(size_t n)
{
	for (size_t i = 0; i < tfs_n_views; i++)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++)
			if (p->option && n-- == 0)
				return p->name;
	return NULL;
}
