/*
 * registry.h - the computed views, one table (codec-private; registry.c).
 *
 * A view is a row of tfs_view_table: its name, the options it takes (the -o options of the
 * option table fs/cli/optable.c that are a view's, and the one output= decides), how it opens
 * on top of the model opened so far and what it attaches to it (kinds of the model's generic
 * attachments, model_impl.h: how each is freed, stopped and listed in index.json), and its
 * journal record: which of its options decide the
 * model a staging journal's changes apply to, as journal/view_record.c writes them into
 * journal.json's "view" and checks them when the journal is opened again.  tfs_view_open
 * (open.c) walks the table in order: each view opens on what the rows before it made.
 *
 * A new view is one file (its open function and its option rows) and a row in registry.c;
 * its options need their -o rows in the option table, fs/cli/optable.c
 * (tests/test_view_registry.c checks that the two tables agree), and nothing else: no field
 * anywhere.  An option's value is kept by its name in tfs_open_opts (base.h's named list):
 * fs/ sets it with tfs_open_opts_set_view (view.h; the row's check first), the view reads it
 * with tfs_open_opt(o, "NAME") (a string as given; a flag, OUTPUT, is "1" or absent; a
 * number, HOW, the digits checked, parsed by the view), the journal through the accessors
 * below.
 */
#ifndef TFS_VIEW_REGISTRY_H
#define TFS_VIEW_REGISTRY_H

#include "../model/model.h"

#include <stddef.h>
#include <string.h>

typedef enum {
	TFS_VOPT_STRING,  /* a name (quantize=Q4_K_M, outtype=f16), recorded */
	TFS_VOPT_FILE,    /* a file, recorded with its identity (path, size, mtime: imatrix=),
			   * which must not have changed */
	TFS_VOPT_OUTPUT,  /* a flag that output= decides (gguf_model: output=X.gguf), recorded:
			   * "1" or absent */
	TFS_VOPT_HOW,     /* a number (digits): how the view is made, not what
			   * (quantize_threads=): never recorded */
} tfs_view_opt_kind;

/* An option a view takes. */
typedef struct {
	const char *name;        /* the -o option, its name in tfs_open_opts (tfs_open_opt), and
	                          * its member of the journal's record */
	tfs_view_opt_kind kind;
	bool option;             /* an -o option (gguf_model is none: output= decides it) */
	bool asks;               /* given, it asks for the view (quantize=, gguf_model) */
	const char *none;        /* a value that is no value ("auto", ""), or NULL */
	/* whether a and b (neither NULL) make the same view; NULL: equal but for case (a
	 * file: the same real path) */
	bool (*same)(const char *a, const char *b);
	/* how the journal spells v (quantize=: the type's name); NULL: as given */
	const char *(*spelled)(const char *v);
	/* whether v (not NULL) is a value the option takes: 0, or TFS_E_INVALID saying
	 * "name=v: why (valid: ...)"; NULL: any.  Asked before anything is opened, so that a
	 * wrong word is a usage error (exit status 2), never a failed open */
	int (*check)(const char *v, tfs_error *err);
	/* messages: a string shown when the view is asked and the option not given ("auto");
	 * a flag, the words for it ("the repo's GGUF view") */
	const char *shown;
} tfs_view_opt;

/* A computed view: a row of the table. */
typedef struct {
	const char *name;
	const char *what;        /* messages: "the quantized view" */
	const tfs_view_opt *opts;/* the options it takes, up to a row of name NULL */
	/*
	 * Opens the view on *m (the model opened from source so far, with o) when o asks for it:
	 * attaches it to *m, or replaces *m by it (which takes *m over); nothing when o does
	 * not ask for it.  On failure *m is what the caller still has to free (NULL: nothing).
	 */
	int (*open)(tfs_model **m, const char *source, const tfs_open_opts *o, tfs_error *err);
	/* its journal record: */
	/* whether its options apply to source (NULL: any source); asked only when one of them
	 * is given, and when they do not apply they make no difference */
	bool (*applies)(const char *source);
	/* the views after it are built on what it makes: its recorded options decide their
	 * model too (a repo's GGUF view under the quantized view) */
	bool under_later;
	/* what open attaches to the model (model_impl.h: each a kind, which says how it is
	 * freed and stopped and whether index.json lists it), NULL-terminated; NULL: nothing
	 * (a view that replaces the model) */
	const struct tfs_attach_kind *const *attaches;
} tfs_view_kind;

extern const tfs_view_kind tfs_view_table[];
extern const size_t tfs_n_views;

/* The value of option p in o, kept by its name: a string (STRING, FILE), a flag (OUTPUT);
 * and setting it (NULL, false: none).  (tfs_open_opts holds TFS_NAMED_OPTS_MAX names, more
 * than every view's and scheme's options together: test_view_registry checks it.) */
static inline const char *tfs_view_opt_str(const tfs_open_opts *o, const tfs_view_opt *p)
{
	return tfs_open_opt(o, p->name);
}

static inline void tfs_view_opt_set_str(tfs_open_opts *o, const tfs_view_opt *p, const char *v)
{
	tfs_open_opt_set(o, p->name, v);
}

static inline bool tfs_view_opt_flag(const tfs_open_opts *o, const tfs_view_opt *p)
{
	return tfs_open_opt(o, p->name) != NULL;
}

static inline void tfs_view_opt_set_flag(tfs_open_opts *o, const tfs_view_opt *p, bool v)
{
	tfs_open_opt_set(o, p->name, v ? "1" : NULL);
}

/* Whether the option name is given in o with a value other than "0" (a flag's none). */
static inline bool tfs_view_opt_on(const tfs_open_opts *o, const char *name)
{
	const char *v = tfs_open_opt(o, name);
	return v && strcmp(v, "0") != 0;
}

/* The number an option of HOW has in o (its digits were checked when set), 0 when none. */
unsigned tfs_view_opt_number(const tfs_open_opts *o, const char *name);

/* The rows of hf.c and quantize.c. */
extern const tfs_view_opt tfs_hf_view_opts[];
/* hf.c: what its row attaches (a repo's GGUF view, index.json's "gguf_view"; its projector,
 * "mmproj") */
extern const struct tfs_attach_kind tfs_gguf_view_attach, tfs_mmproj_attach;
int tfs_hf_view_open(tfs_model **m, const char *source, const tfs_open_opts *o,
		     tfs_error *err);
/* views/hf_export.c: a GGUF model as a Hugging Face repo (hf/) */
extern const tfs_view_opt tfs_hf_repo_view_opts[];
extern const struct tfs_attach_kind tfs_hf_repo_attach;
int tfs_hf_repo_view_open(tfs_model **m, const char *source, const tfs_open_opts *o,
			  tfs_error *err);
bool tfs_hf_repo_applies(const char *source);
extern const tfs_view_opt tfs_quant_view_opts[];
int tfs_quant_view_open(tfs_model **m, const char *source, const tfs_open_opts *o,
			tfs_error *err);

#endif
