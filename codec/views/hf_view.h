/*
 * hf_view.h - a Hugging Face repo's GGUF view (codec-private; hf.c).
 */
#ifndef TFS_HF_VIEW_H
#define TFS_HF_VIEW_H

#include "model_impl.h"

/* When m is a Hugging Face repo (a safetensors model beside a config.json: a directory, or
 * hf://ORG/REPO), builds its GGUF view as opts->outtype says and attaches it to m
 * (tfs_model_set_gguf_view), or the reason it cannot be made.  Anything else: nothing. */
void tfs_hf_view_attach(tfs_model *m, const char *source, const tfs_open_opts *opts);

#endif
