/*
 * view.h - opening a model with its views: models computed from other models (public).
 *
 * A view is an ordinary GGUF model built in memory: its keys are owned payloads, its tensors'
 * bytes come from the source model's files or from computed sources (model/source_impl.h:
 * converted, permuted, quantized).  Everything that reads a model reads a view unchanged.
 *   - a Hugging Face repo (config.json + safetensors, a directory or hf://ORG/REPO) carries
 *     its GGUF view, as llama.cpp's convert_hf_to_gguf.py writes it (hf.c):
 *     tfs_model_gguf_view(m); when it cannot be made, tfs_model_gguf_view_why(m) says why
 *     and the model opens all the same; a multimodal repo its projector too,
 *     tfs_model_mmproj(m);
 *   - a GGUF model carries its Hugging Face form, hf/ (hf_export.c): tfs_hf_repo_model(m);
 *   - -o quantize=TYPE: the model opened IS the quantized view (quantize.h).
 * The views are the rows of one table (registry.h, registry.c): their options, how each
 * opens on the model, what it attaches to it, and what a staging journal records of them.
 * What a view attaches the model keeps without naming it (model_impl.h: tfs_model_attach,
 * by the view's kinds); the functions below read it.
 */
#ifndef TFS_VIEW_H
#define TFS_VIEW_H

#include "../model/model.h"

/*
 * tfs_model_open, then the views opts asks for (its options by name, tfs_open_opt).  A
 * Hugging Face repo's GGUF view is attached (outtype=), or the reason it cannot be made: that
 * alone never fails the open; with gguf_model the view is the model opened (an error when
 * there is none).  Then quantize=: the model opened is the quantized view.  Errors: the open's, a bad option
 * (an outtype that is none, or given for a source that is no repo), the quantized view's.
 * opts may be NULL.
 */
int tfs_view_open(tfs_model **out, const char *source, const tfs_open_opts *opts,
		  tfs_error *err);

/* The view (its row's name: "gguf", "quantize") that takes the -o option name, or NULL when
 * no view takes it (registry.c). */
const char *tfs_view_of_option(const char *name);
/* The n-th -o option a view takes, in the table's order; NULL after the last. */
const char *tfs_view_option_name(size_t n);
/* Sets the -o option name of a view (outtype=, quantize=, imatrix=, quantize_threads=) in o
 * to value as its row of the table takes it: a name or a file is kept as given (the pointer:
 * value must live as long as o; nothing is normalised, "auto" stays "auto"), a number
 * (quantize_threads=) is parsed.  TFS_E_NOTFOUND: no view takes name; TFS_E_INVALID: value
 * is not a number.  Every view option of tfs_open_opts is set through it (fs/cli). */
int tfs_open_opts_set_view(tfs_open_opts *o, const char *name, const char *value,
			   tfs_error *err);
/* Whether value is one the view option name takes, as its row checks it (a number parsed,
 * a type or an output type known), before anything is opened: 0, TFS_E_NOTFOUND (no view
 * takes name) or TFS_E_INVALID with "name=value: why (valid: ...)".  fs/cli makes either a
 * usage error; tfs_open_opts_set_view asks it too. */
int tfs_view_option_check(const char *name, const char *value, tfs_error *err);

/* Whether source is a Hugging Face repo: hf://ORG/REPO[@REV] (no path in it), or a directory
 * holding a config.json (views/hf.c).  Its GGUF view is attached when tfs_view_open opens it. */
bool tfs_hf_is_repo(const char *source);

/* hf.c: the GGUF a Hugging Face repo's model shows as too (model.gguf, as llama.cpp's
 * converter writes it), owned by m, or NULL; then _why says why there is none (NULL: none
 * was asked for: no repo). */
tfs_model *tfs_model_gguf_view(const tfs_model *m);
const char *tfs_model_gguf_view_why(const tfs_model *m);
/* The projector a multimodal repo shows as mmproj.gguf (the converter's --mmproj), owned by
 * m, or NULL; then _why says why there is none (NULL: the repo has none to show). */
tfs_model *tfs_model_mmproj(const tfs_model *m);
const char *tfs_model_mmproj_why(const tfs_model *m);

/* Drops m's GGUF view and its projector (images of them being read keep what they read),
 * saying why. */
void tfs_model_drop_gguf_view(tfs_model *m, const char *why);

/* views/hf_export.c: a GGUF model (a GGUF file, a classic Ollama model, the quantized view)
 * as a Hugging Face repo, the mount's hf/: the safetensors model of its tensors
 * (model.safetensors; NULL when there is none: then _why says why in one line, NULL when
 * the model is no GGUF), and its small files (config.json, tokenizer.json, ...): their
 * count, names and text (appended to out). */
const tfs_model *tfs_hf_repo_model(const tfs_model *m);
const char *tfs_hf_repo_why(const tfs_model *m);
/* Why hf/ has no tokenizer files (one line), or NULL when it has them. */
const char *tfs_hf_repo_tok_why(const tfs_model *m);
size_t tfs_hf_repo_n_files(const tfs_model *m);
const char *tfs_hf_repo_file_name(const tfs_model *m, size_t i);
int tfs_hf_repo_file(tfs_buf *out, const tfs_model *m, size_t i, tfs_error *err);

/* The i-th model class the Hugging Face GGUF view converts (config.json's architectures[0]),
 * NULL past the last (`tensorfs __hf_classes`, for the tests). */
const char *tfs_hf_view_class(size_t i);

/* Whether name is an outtype the GGUF view takes ("auto", "f32", "f16", "bf16", "q8_0"). */
bool tfs_outtype_valid(const char *name);

#endif
