/*
 * session.c - a model and its staging directory, in the order the crash protocol needs
 * (see session.h for the steps, recovery.c for the protocol).
 */
#include "session.h"
#include "staging_impl.h"
#include "open.h"
#include "view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tfs_session {
	char *source, *staging_opt, *output;
	bool writable;
	bool view_from_journal;
	const tfs_open_opts *oo;  /* borrowed from tfs_session_open to tfs_session_stage */
	tfs_model *model;
	tfs_staging *staging;
};

static char *dup_or_null(const char *s, bool *failed)
{
	char *d = s ? strdup(s) : NULL;
	*failed |= s && !d;
	return d;
}

int tfs_session_new(tfs_session **out, const tfs_session_opts *o, tfs_error *err)
{
	tfs_session *s = calloc(1, sizeof(*s));
	bool failed = !s;
	*out = NULL;
	if (s) {
		s->source = dup_or_null(o->source, &failed);
		s->staging_opt = dup_or_null(o->staging, &failed);
		s->output = dup_or_null(o->output, &failed);
		s->writable = o->writable;
		s->view_from_journal = o->view_from_journal;
	}
	if (failed) {
		tfs_session_close(s);
		return tfs_nomem(err);
	}
	/* a repack cut short by a crash is finished (or undone) before the source is read:
	 * a sharded set or an Ollama model reads back consistently only after that */
	int rc = s->writable && s->staging_opt ? tfs_staging_recover(s->staging_opt, err) : 0;
	if (rc) {
		tfs_session_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

int tfs_session_open(tfs_session *s, const tfs_open_opts *oo, tfs_error *err)
{
	s->oo = oo;
	return tfs_view_open(&s->model, s->source, oo, err);
}

/* ==== the default staging directory ==== */

/* Makes the parents of path (mkdir -p without the last component). */
static int make_parents(const char *path)
{
	char *p = strdup(path);
	if (!p)
		return -1;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			free(p);
			return -1;
		}
		*s = '/';
	}
	free(p);
	return 0;
}

/* The directory the model's format keeps its staging in (an Ollama model under the store
 * root: <root>/.tensorfs-staging/<host>/<ns>/<model>/<tag>, tfs_model_staging_home), parents
 * made; NULL when it has none. */
static char *store_staging(const tfs_model *m)
{
	char *s = tfs_model_staging_home(m);
	if (s) {
		if (make_parents(s) == 0)
			return s;
		free(s);
	}
	return NULL;
}

/* The default staging directory: beside the output file, or the store's (store_staging).
 * Allocated. */
static char *default_staging(const tfs_session *s)
{
	const char *out = s->output && strchr(s->output, '/') ? s->output : tfs_model_path(s->model);
	char *d = store_staging(s->model);
	return d ? d : tfs_staging_default_dir(out);
}

/* Removes the empty <root>/.tensorfs-staging/<host>/<ns>/<model> above a store model's
 * staging directory, once that is gone. */
static void remove_store_parents(const char *dir)
{
	char *d = strdup(dir);
	for (int i = 0; d && i < 4; i++) {
		char *sl = strrchr(d, '/');
		if (!sl)
			break;
		*sl = '\0';
		if (!strstr(d, "/.tensorfs-staging") || rmdir(d) < 0)
			break;
	}
	free(d);
}

/* ==== staging ==== */

/* The view the journal's changes apply to (view_record.c): the one the model was opened
 * with, checked against the journal's record; with view_from_journal the options not given
 * are the journal's, and the model is opened again with them when that changes it. */
static int bind_view(tfs_session *s, tfs_error *err)
{
	tfs_open_opts want;
	bool reopen;
	tfs_view_match q = { .oo = s->oo, .source = s->source, .output_given = s->output != NULL,
			     .adopt = s->view_from_journal, .staging = s->staging_opt };
	int rc = tfs_view_record_match(s->staging, &q, &want, &reopen, err);
	if (!rc && reopen) {
		tfs_open_opts oo = { 0 };
		if (s->oo)
			oo = *s->oo;
		tfs_view_record_apply(&oo, &want);
		tfs_model_free(s->model);
		s->model = NULL;
		rc = tfs_view_open(&s->model, s->source, &oo, err);
	}
	return rc ? rc : tfs_view_record_set(s->staging, &want, err);
}

int tfs_session_stage(tfs_session *s, tfs_error *err)
{
	char *def = NULL;
	const char *dir = s->staging_opt;
	int rc;
	if (!dir) {
		/* the default directory depends on the resolved source: recover, then read it
		 * again if there was anything to recover from */
		if (!(dir = def = default_staging(s)))
			return tfs_nomem(err);
		if ((rc = tfs_recovery_reopen(&s->model, dir, s->source, s->oo, err))) {
			free(def);
			return rc;
		}
	}
	/* the view before the binding: the journal's source is the view's */
	rc = tfs_staging_lock_recovered(&s->staging, dir, err);
	if (!rc && ((rc = bind_view(s, err)) ||
		    (rc = tfs_journal_bind(s->staging, s->model, s->output, err)))) {
		tfs_staging_free(s->staging); /* unlocked, left as it is */
		s->staging = NULL;
	}
	s->oo = NULL;
	if (!rc)
		rc = tfs_staging_replay(s->staging, s->model, err);
	free(def);
	return rc;
}

tfs_model *tfs_session_model(const tfs_session *s) { return s->model; }

tfs_staging *tfs_session_staging(const tfs_session *s) { return s->staging; }

int tfs_session_repack(tfs_session *s, const tfs_write_opts *o, tfs_error *err)
{
	if (!s->staging)
		return 0;
	return tfs_staging_repack(s->staging, s->model, o, err);
}

void tfs_session_release(tfs_session *s)
{
	if (!s)
		return;
	char *home = NULL;
	if (s->staging && !s->staging_opt && tfs_staging_remove(s->staging) == 0 &&
	    (home = tfs_model_staging_home(s->model)))
		remove_store_parents(tfs_staging_dir(s->staging));
	free(home);
	tfs_staging_free(s->staging);
	s->staging = NULL;
}

void tfs_session_close(tfs_session *s)
{
	if (!s)
		return;
	tfs_staging_free(s->staging);
	tfs_model_free(s->model);
	free(s->source);
	free(s->staging_opt);
	free(s->output);
	free(s);
}
