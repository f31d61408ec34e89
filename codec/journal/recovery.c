/*
 * recovery.c - the crash protocol of a staging directory: how a repack replaces the
 * source, and how the next run finds out where a crash stopped it.
 *
 * Invariant: at every instant, the output (the source, or o->output) plus the staging
 * directory hold either the old model and every staged change, or the new model; and the
 * journal says which.  Nothing outside the staging directory is ever removed except a
 * file whose name is a commit's temporary (".<name>.tensorfs-tmp.XXXXXX").
 *
 * The steps of a repack (tfs_staging_repack), what is on disk after each, what a crash
 * there leaves and what the next run does about it:
 *
 *  0. Before: journal.json lists the ops; data/ holds their bytes; the output is old.
 *     A crash leaves that: the next mount replays the ops; `tensorfs repack` writes them.
 *  1. Writing (tfs_model_write_prepare into a commit, commit.c): each new file is a
 *     temporary beside its final name.  It is an unnamed O_TMPFILE while it is written;
 *     before it gets a name, its name is added to the journal's "pending" list
 *     (note_pending, the commit's name hook).  Without O_TMPFILE the temporary is named
 *     at once and listed right after it is created.
 *     Crash: "pending" names temporaries that may exist.  Next run: drop_pending removes
 *     them (only names of temporaries), and the list; the ops stay (as 0).
 *  2. Sealing (tfs_commit_seal): every temporary fsynced, named, its directory fsynced,
 *     its identity (size, mtime, inode) taken.  Crash: as 1.
 *  3. The repack record: one journal write replaces "pending" with "repack": {"files":
 *     [{tmp, final, size, mtime, ino}, ...]}, in the order the renames will happen (the
 *     file that commits the set - GGUF file, index.json, manifest - last).
 *     Crash before the write: as 1.  After it: as 4.
 *  4. Renaming (tfs_commit_apply): each temporary renamed over its final name, the
 *     directory fsynced after each ("before_rename", "mid_rename": test crash points).
 *     Crash: recover() compares each final name, then each temporary, with the recorded
 *     identity:
 *       - none renamed: the output is whole and old; the temporaries are removed,
 *         "repack" deleted, the ops kept: as 0 (the next repack redoes the work);
 *       - all renamed: the repack is done: as 5;
 *       - some renamed (several files: safetensors shards, Ollama blobs): the remaining
 *         temporaries, validated in 1, are renamed too (roll forward), then as 5; a
 *         model opened before this is stale (*rolled): whoever opened it opens it again;
 *       - some renamed and the others' temporaries gone: an error; the directory is left
 *         as it is for a person to look at.
 *  5. Done ("after_rename"): journal.json is unlinked and the directory fsynced (the
 *     commit of "done"), then data/ is emptied.  Crash before the unlink: as 4, all
 *     renamed.  After it: a directory without a journal; the next lock empties data/.
 *
 * When recovery runs: tfs_staging_recover before the model is opened (a sharded set or
 * an Ollama model reads back consistently only after a roll forward); for a staging
 * directory that depends on the opened model (the default one), tfs_recovery_reopen
 * recovers it and opens the model again.  tfs_staging_open, tfs_staging_replay and
 * tfs_staging_repack recover again, and refuse a model opened before a roll forward.
 * A repack whose renames fail recovers at once (whatever was renamed or not).
 */
#include "staging_impl.h"
#include "write_impl.h"
#include "open.h"
#include "view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== "pending": temporaries that may exist (steps 1-2) ==== */

/* Whether path names one of a commit's temporaries (".<name>.tensorfs-tmp.XXXXXX"): the
 * only files a journal's records may make recovery remove, whatever the journal says. */
static bool is_temporary(const char *path)
{
	const char *b = tfs_basename(path), *t = strstr(b, ".tensorfs-tmp.");
	return b[0] == '.' && t && t > b && strlen(t) == strlen(".tensorfs-tmp.XXXXXX") &&
	       !strchr(t + 14, '/');
}

/* Removes the temporaries "pending" names, then the list. */
static int drop_pending(tfs_staging *s, tfs_error *err)
{
	json_t *p = json_object_get(s->j, "pending");
	if (!p)
		return 0;
	for (size_t i = 0; i < json_array_size(p); i++) {
		const char *tmp = json_string_value(json_array_get(p, i));
		if (tmp && is_temporary(tmp) && unlink(tmp) < 0 && errno != ENOENT)
			return tfs_error_sys(err, errno, "%s: removing an interrupted repack's "
					     "temporary", tmp);
	}
	json_object_del(s->j, "pending");
	return tfs_journal_write(s, err);
}

/* The commit's name hook: a temporary is about to get this name; the journal says so first. */
static int note_pending(void *ctx, const char *tmp, tfs_error *err)
{
	tfs_staging *s = ctx;
	json_t *p = json_object_get(s->j, "pending");
	if (!p && json_object_set_new(s->j, "pending", p = json_array()))
		return tfs_nomem(err);
	if (json_array_append_new(p, json_string(tmp)))
		return tfs_nomem(err);
	return tfs_journal_write(s, err);
}

/* ==== recovery (after a crash in step 4 or 5) ==== */

static bool same_identity(const struct stat *st, const json_t *f)
{
	const json_t *mt = json_object_get(f, "mtime");
	return (uint64_t)st->st_size == tfs_journal_num(f, "size") &&
	       (uint64_t)st->st_ino == tfs_journal_num(f, "ino") &&
	       st->st_mtim.tv_sec == json_integer_value(json_array_get(mt, 0)) &&
	       st->st_mtim.tv_nsec == json_integer_value(json_array_get(mt, 1));
}

static const char *file_member(const json_t *files, size_t i, const char *k)
{
	return json_string_value(json_object_get(json_array_get(files, i), k));
}

/* Counts the recorded files whose final name has the new file (*renamed) and those whose
 * temporary is still there (*pending). */
static int count_renamed(const tfs_staging *s, const json_t *files, size_t *renamed,
			 size_t *pending, tfs_error *err)
{
	*renamed = *pending = 0;
	for (size_t i = 0; i < json_array_size(files); i++) {
		const json_t *f = json_array_get(files, i);
		const char *tmp = file_member(files, i, "tmp"), *final = file_member(files, i, "final");
		struct stat st;
		if (!tmp || !final)
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s/" TFS_JOURNAL ": damaged repack record", s->dir);
		if (stat(final, &st) == 0 && same_identity(&st, f))
			(*renamed)++;
		else if (stat(tmp, &st) == 0 && same_identity(&st, f))
			(*pending)++;
	}
	return 0;
}

/* None renamed: the output is whole; the temporaries go, the ops stay (back to step 0). */
static int undo_repack(tfs_staging *s, const json_t *files, tfs_error *err)
{
	for (size_t i = 0; i < json_array_size(files); i++) {
		const char *tmp = file_member(files, i, "tmp");
		if (is_temporary(tmp) && unlink(tmp) < 0 && errno != ENOENT)
			return tfs_error_sys(err, errno, "%s", tmp);
	}
	json_object_del(s->j, "repack");
	return tfs_journal_write(s, err);
}

/* Some renamed: the remaining temporaries were validated before the first rename; they
 * are renamed too. */
static int roll_forward(const json_t *files, bool *rolled, tfs_error *err)
{
	for (size_t i = 0; i < json_array_size(files); i++) {
		const json_t *f = json_array_get(files, i);
		const char *tmp = file_member(files, i, "tmp"), *final = file_member(files, i, "final");
		struct stat st;
		int rc;
		if (stat(tmp, &st) < 0 || !same_identity(&st, f))
			continue;
		if (rename(tmp, final) < 0)
			return tfs_error_sys(err, errno, "finishing the repack: renaming %s to %s",
					     tmp, final);
		if ((rc = tfs_io_fsync_dir(final, err)))
			return rc;
		*rolled = true;
	}
	return 0;
}

int tfs_recover(tfs_staging *s, bool *rolled, tfs_error *err)
{
	json_t *rp = json_object_get(s->j, "repack");
	json_t *files = json_object_get(rp, "files");
	size_t n = json_array_size(files), renamed, pending;
	int rc;
	*rolled = false;
	if ((rc = drop_pending(s, err)))
		return rc;
	if (!rp)
		return 0;
	if ((rc = count_renamed(s, files, &renamed, &pending, err)))
		return rc;
	if (renamed == n)
		return tfs_journal_clear(s, err);
	if (renamed == 0)
		return undo_repack(s, files, err);
	if (renamed + pending != n)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: an interrupted repack renamed %zu of %zu files and the "
				     "others' temporaries are gone; the output is incomplete and "
				     "this directory is left as it is", s->dir, renamed, n);
	if ((rc = roll_forward(files, rolled, err)))
		return rc;
	return tfs_journal_clear(s, err);
}

int tfs_staging_recover(const char *staging_dir, tfs_error *err)
{
	tfs_staging *s;
	bool rolled;
	struct stat st;
	if (stat(staging_dir, &st) < 0 && errno == ENOENT)
		return 0;
	int rc = tfs_journal_lock(&s, staging_dir, err);
	if (rc)
		return rc;
	rc = tfs_recover(s, &rolled, err);
	tfs_staging_free(s);
	return rc;
}

int tfs_recovery_reopen(tfs_model **m, const char *dir, const char *source,
			const tfs_open_opts *oo, tfs_error *err)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return 0; /* nothing to recover from */
	int rc = tfs_staging_recover(dir, err);
	if (rc)
		return rc;
	tfs_model_free(*m);
	*m = NULL;
	return tfs_view_open(m, source, oo, err);
}

/* ==== the repack (steps 1-5) ==== */

/* Step 3: the repack record names the sealed temporaries with their identities, and
 * replaces "pending", in one journal write. */
static int record_repack(tfs_staging *s, const tfs_commit *c, tfs_error *err)
{
	json_t *files = json_array();
	int rc;
	for (size_t i = 0; files && i < tfs_commit_count(c); i++) {
		const char *tmp, *final;
		struct stat st;
		tfs_commit_get(c, i, &tmp, &final, &st);
		if (json_array_append_new(files,
					  json_pack("{s:s, s:s, s:I, s:[I, I], s:I}", "tmp", tmp,
						    "final", final, "size", (json_int_t)st.st_size,
						    "mtime", (json_int_t)st.st_mtim.tv_sec,
						    (json_int_t)st.st_mtim.tv_nsec, "ino",
						    (json_int_t)st.st_ino))) {
			json_decref(files);
			files = NULL;
		}
	}
	if (!files || json_object_set_new(s->j, "repack", json_pack("{s:o}", "files", files)))
		return tfs_nomem(err);
	json_t *pend = json_incref(json_object_get(s->j, "pending"));
	json_object_del(s->j, "pending");
	if ((rc = tfs_journal_write(s, err))) {
		json_object_del(s->j, "repack");
		if (pend)
			json_object_set_new(s->j, "pending", pend);
		return rc;
	}
	json_decref(pend);
	return 0;
}

/* Step 4 failed: whatever was or was not renamed, recovery knows what to do with it. */
static int renames_failed(tfs_staging *s, int rc, tfs_error *err)
{
	tfs_error e2 = { 0 };
	bool rolled;
	if (tfs_recover(s, &rolled, &e2)) {
		char first[TFS_ERRMSG_MAX];
		snprintf(first, sizeof(first), "%s", err ? err->msg : "");
		tfs_error_set(err, rc, "%s; %s", first, e2.msg);
	}
	return rc;
}

int tfs_staging_repack(tfs_staging *s, tfs_model *m, const tfs_write_opts *o, tfs_error *err)
{
	tfs_write_opts wo = { 0 };
	tfs_commit *c = NULL;
	bool rolled;
	int rc;
	if (o)
		wo = *o;
	if (!wo.output)
		wo.output = s->output;
	if (json_object_get(s->j, "repack") && (rc = tfs_recover(s, &rolled, err)))
		return rc;
	if (json_array_size(tfs_journal_ops(s)) == 0)
		return 0; /* nothing staged: nothing is written */
	if ((rc = tfs_commit_new(&c, err)))
		return rc;
	tfs_commit_set_name_hook(c, note_pending, s);
	if ((rc = tfs_model_write_prepare(m, &wo, c, err)) || (rc = tfs_commit_seal(c, err)) ||
	    (rc = record_repack(s, c, err))) {
		tfs_error e2 = { 0 };
		tfs_commit_abort(c);
		tfs_commit_free(c);
		drop_pending(s, &e2); /* best effort: the next open tries again */
		return rc;
	}
	rc = tfs_commit_apply(c, err);
	tfs_commit_free(c);
	if (rc)
		return renames_failed(s, rc, err);
	tfs_test_crash_point("after_rename");
	return tfs_journal_clear(s, err);
}
