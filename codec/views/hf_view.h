/*
 * hf_view.h - a Hugging Face repo's GGUF view (codec-private; hf.c).
 */
#ifndef TFS_HF_VIEW_H
#define TFS_HF_VIEW_H

#include "model_impl.h"

/*
 * When m is a Hugging Face repo (a safetensors model opened from a directory holding a
 * config.json, or from hf://ORG/REPO[@REV]), builds its GGUF view as o->outtype says and
 * attaches it to m (tfs_model_gguf_view), or the reason it cannot be made
 * (tfs_model_gguf_view_why): 0 either way.  Anything else: nothing.  An error only for the
 * options: an outtype that is none, or one given for a source that is no repo.
 */
int tfs_hf_view_attach(tfs_model *m, const char *source, const tfs_open_opts *o,
		       tfs_error *err);
/* m's GGUF view as the model (it owns m from then on), or, when it has none, the reason
 * as an error (m freed). */
int tfs_hf_view_take(tfs_model **out, tfs_model *m, tfs_error *err);

#endif
