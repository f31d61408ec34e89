/*
 * session.h - a model and its staging directory, from crash recovery to repack (public).
 *
 * What a writable mount, `tensorfs repack` and the tests do, in this order:
 *   tfs_session_new      a session; a writable one first finishes or undoes a repack that a
 *                        crash interrupted in the staging directory it names (if any)
 *   tfs_session_open     opens the model
 *   tfs_session_stage    the staging directory (the one named, or the model's default,
 *                        recovered and the model opened again when it exists), locked and
 *                        bound to the model's source; the changes it holds replayed
 *   ...                  changes: tfs_staging_* on tfs_session_staging, tfs_session_model
 *   tfs_session_repack   writes the changes (crash-safe: journal/recovery.c)
 *   tfs_session_release  unlocks the staging directory; one the session chose itself is
 *                        removed when it holds nothing
 *   tfs_session_close    frees the model and the staging handle (a directory not released
 *                        stays as it is)
 * A read-only session is tfs_session_new, tfs_session_open and tfs_session_close.
 */
#ifndef TFS_SESSION_H
#define TFS_SESSION_H

#include "staging.h"

typedef struct tfs_session tfs_session;

typedef struct {
	const char *source;    /* what tfs_model_open opens */
	bool writable;         /* changes are staged (tfs_session_stage) */
	const char *staging;   /* the staging directory; NULL: the model's default */
	const char *output;    /* where a repack writes; NULL: what the journal says, else the
				* source */
	bool view_from_journal; /* `tensorfs repack`: the view options (tfs_open_opts' quantize,
				 * imatrix, outtype, gguf_model) not given are those the journal
				 * records its changes were made with */
} tfs_session_opts;

/* A session for o (its strings are copied).  Writable with o->staging: the crash recovery
 * of that directory (tfs_staging_recover), before any model is read. */
int tfs_session_new(tfs_session **out, const tfs_session_opts *o, tfs_error *err);
/* Opens the model with oo (NULL: the defaults); oo stays borrowed until tfs_session_stage
 * returns, which may open the model again. */
int tfs_session_open(tfs_session *s, const tfs_open_opts *oo, tfs_error *err);
/* The staging directory: opened (created if needed), locked, bound to the model's source,
 * and its changes replayed onto the model.  A journal records the view its changes were made
 * to (-o quantize=, imatrix=, outtype=, a repo's GGUF view: journal/view_record.c): a model
 * opened as another view is refused, naming both (TFS_E_INVALID, nothing changed), unless
 * o->view_from_journal and the options were not given: then the model is opened again as the
 * journal's view.  Without o->staging, the model's default one
 * (beside the output; an Ollama store model's under <root>/.tensorfs-staging/), recovered
 * first when it exists, and then the model is opened again. */
int tfs_session_stage(tfs_session *s, tfs_error *err);

/* Borrowed until tfs_session_close; NULL before tfs_session_open / _stage succeeded. */
tfs_model *tfs_session_model(const tfs_session *s);
tfs_staging *tfs_session_staging(const tfs_session *s);

/* Repacks the staged changes (tfs_staging_repack): 0 when nothing was staged. */
int tfs_session_repack(tfs_session *s, const tfs_write_opts *o, tfs_error *err);
/* Unlocks the staging directory; the default one is removed when it holds nothing
 * (repacked, or never changed).  One named by o->staging stays. */
void tfs_session_release(tfs_session *s);
void tfs_session_close(tfs_session *s);

#endif
