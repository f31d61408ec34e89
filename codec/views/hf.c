/*
 * hf.c - a Hugging Face repo's GGUF view: the file llama.cpp's convert_hf_to_gguf.py writes,
 * computed from the repo (formats/hf_plan.h) without converting it.
 */
#include "hf_view.h"

void tfs_hf_view_attach(tfs_model *m, const char *source, const tfs_open_opts *opts)
{
	(void)m, (void)source, (void)opts; /* the view comes with the hf engine's merge */
}
