/*
 * journal.c - the journal file of a staging directory, its lock, and the source it is
 * bound to.
 *
 * Layout of a staging directory:
 *  1. journal.json  {"tensorfs_staging": 1,
 *                    "source": {"path", "size", "mtime": [sec, nsec]},
 *                    "output": "<path or model:tag>",
 *                    "view": {"quantize", "imatrix", "outtype", "gguf_model"},
 *                    "ops": [ {"op": "set_kv", "key", "type", "data": "data/3"}, ... ],
 *                    "pending": ["<temporary>", ...],
 *                    "repack": {"files": [{"tmp", "final", "size", "mtime", "ino"}, ...]}}
 *     replaced atomically (temporary, fsync, rename, fsync of the directory).  A name
 *     that is not valid UTF-8 is stored as "<field>_hex".  The ops and their members:
 *     ops.c; "view", the view the ops apply to: view_record.c; "pending" and
 *     "repack", the crash protocol: recovery.c.
 *  2. data/<n>      staged bytes (a value's payload, a tensor's or a file's new bytes),
 *     fsynced before the op naming them is recorded (data.c).
 *  3. lock          flock()ed (LOCK_EX) while a mount or a repack uses the directory.
 */
#include "staging_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

json_t *tfs_journal_ops(const tfs_staging *s) { return json_object_get(s->j, "ops"); }

uint64_t tfs_journal_num(const json_t *o, const char *k)
{
	return (uint64_t)json_integer_value(json_object_get(o, k));
}

/* ==== the journal file ==== */

int tfs_journal_write(tfs_staging *s, tfs_error *err)
{
	char *text = json_dumps(s->j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	char *tmp = tfs_path_join(s->dir, TFS_JOURNAL_TMP);
	char *path = tfs_path_join(s->dir, TFS_JOURNAL);
	int rc;
	if (!text || !tmp || !path) {
		rc = tfs_nomem(err);
		goto out;
	}
	size_t n = strlen(text);
	text[n] = '\n'; /* json_dumps' NUL becomes the final newline */
	if ((rc = tfs_write_whole_file(tmp, text, n + 1, err)))
		goto out;
	if (rename(tmp, path) < 0) {
		rc = tfs_error_sys(err, errno, "%s: rename", tmp);
		goto out;
	}
	rc = tfs_io_fsync_dir(path, err);
out:
	if (rc && tmp)
		unlink(tmp);
	free(text);
	free(tmp);
	free(path);
	return rc;
}

static int journal_reset(tfs_staging *s)
{
	json_decref(s->j);
	s->j = json_pack("{s:i, s:[]}", "tensorfs_staging", TFS_JOURNAL_VERSION, "ops");
	return s->j ? 0 : TFS_E_NOMEM;
}

int tfs_journal_clear(tfs_staging *s, tfs_error *err)
{
	char *path = tfs_path_join(s->dir, TFS_JOURNAL);
	int rc;
	if (!path)
		return tfs_nomem(err);
	if (unlink(path) < 0 && errno != ENOENT) {
		rc = tfs_error_sys(err, errno, "%s", path);
		free(path);
		return rc;
	}
	rc = tfs_io_fsync_dir(path, err);
	free(path);
	if (rc)
		return rc;
	if (journal_reset(s))
		return tfs_nomem(err);
	s->next_data = 0;
	return tfs_data_clear(s, err);
}

/* Loads the journal at jpath into s (an empty one, and data/ emptied, when there is none). */
static int journal_load(tfs_staging *s, const char *jpath, tfs_error *err)
{
	json_error_t je;
	struct stat st;
	if (stat(jpath, &st) < 0) {
		if (errno != ENOENT)
			return tfs_error_sys(err, errno, "%s", jpath);
		/* no journal: whatever data/ holds was never recorded */
		if (journal_reset(s))
			return tfs_nomem(err);
		return tfs_data_clear(s, err);
	}
	s->j = json_load_file(jpath, JSON_REJECT_DUPLICATES, &je);
	if (!s->j || !json_is_object(s->j) || !json_is_array(tfs_journal_ops(s)) ||
	    json_integer_value(json_object_get(s->j, "tensorfs_staging")) != TFS_JOURNAL_VERSION)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: damaged or unknown journal%s%s; nothing was changed", jpath,
				     s->j ? "" : ": ", s->j ? "" : je.text);
	json_t *src = json_object_get(s->j, "source");
	const json_t *mt = json_object_get(src, "mtime");
	const char *p = json_string_value(json_object_get(src, "path"));
	if (p && !(s->src_path = strdup(p)))
		return tfs_nomem(err);
	s->src_size = tfs_journal_num(src, "size");
	s->src_mtime_sec = json_integer_value(json_array_get(mt, 0));
	s->src_mtime_nsec = json_integer_value(json_array_get(mt, 1));
	p = json_string_value(json_object_get(s->j, "output"));
	if (p && !(s->output = strdup(p)))
		return tfs_nomem(err);
	if (json_array_size(tfs_journal_ops(s)) && !s->src_path)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: journal names no source", jpath);
	return 0;
}

/* ==== the directory and its lock ==== */

/* Makes the directory (its parent must exist); an existing one is fine. */
static int make_dir(const char *path, tfs_error *err)
{
	if (mkdir(path, 0755) == 0 || errno == EEXIST) {
		struct stat st;
		if (stat(path, &st) < 0)
			return tfs_error_sys(err, errno, "%s", path);
		if (!S_ISDIR(st.st_mode))
			return tfs_error_set(err, TFS_E_INVALID, "%s: not a directory", path);
		return 0;
	}
	return tfs_error_sys(err, errno, "%s: cannot create the staging directory", path);
}

/* Takes the directory's lock (without waiting): TFS_E_EXISTS while another process has it. */
static int take_lock(tfs_staging *s, const char *lock, tfs_error *err)
{
	s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (s->lock_fd < 0)
		return tfs_error_sys(err, errno, "%s", lock);
	while (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK)
			return tfs_error_set(err, TFS_E_EXISTS,
					     "staging directory %s is in use by another tensorfs "
					     "process", s->dir);
		return tfs_error_sys(err, errno, "%s: flock", lock);
	}
	return 0;
}

void tfs_staging_free(tfs_staging *s)
{
	if (!s)
		return;
	if (s->lock_fd >= 0)
		close(s->lock_fd); /* releases the flock */
	json_decref(s->j);
	free(s->dir);
	free(s->data_dir);
	free(s->src_path);
	free(s->output);
	json_decref(s->view);
	free(s);
}

int tfs_journal_lock(tfs_staging **out, const char *dir, tfs_error *err)
{
	tfs_staging *s = calloc(1, sizeof(*s));
	char *lock = NULL, *jpath = NULL, *tmp = NULL;
	int rc;
	*out = NULL;
	if (!s)
		return tfs_nomem(err);
	s->lock_fd = -1;
	if (!(s->dir = strdup(dir)) || !(s->data_dir = tfs_path_join(dir, "data")) ||
	    !(lock = tfs_path_join(dir, "lock")) || !(jpath = tfs_path_join(dir, TFS_JOURNAL)) ||
	    !(tmp = tfs_path_join(dir, TFS_JOURNAL_TMP))) {
		rc = tfs_nomem(err);
		goto fail;
	}
	if ((rc = make_dir(dir, err)) || (rc = make_dir(s->data_dir, err)) ||
	    (rc = take_lock(s, lock, err)))
		goto fail;
	unlink(tmp); /* a journal update interrupted before its rename */

	if ((rc = journal_load(s, jpath, err)) || (rc = tfs_data_scan(s, err)))
		goto fail;
	free(lock);
	free(jpath);
	free(tmp);
	*out = s;
	return 0;
fail:
	free(lock);
	free(jpath);
	free(tmp);
	tfs_staging_free(s);
	return rc;
}

/* ==== the source ==== */

/* The identity of the file a model was opened from. */
static int source_identity(const tfs_model *m, char **real, struct stat *st, tfs_error *err)
{
	const char *path = m->path;
	if (m->n_src && tfs_source_is_remote(&m->src[0])) { /* a URL: its size and Last-Modified */
		memset(st, 0, sizeof(*st));
		st->st_size = (off_t)m->src[0].size;
		st->st_mtim.tv_sec = (time_t)m->src[0].mtime_sec;
		return (*real = strdup(path)) ? 0 : tfs_nomem(err);
	}
	if (stat(path, st) < 0)
		return tfs_error_sys(err, errno, "%s", path);
	*real = realpath(path, NULL);
	if (!*real && !(*real = strdup(path)))
		return tfs_nomem(err);
	return 0;
}

/* Whether the journal's source is the file real, as st says it is now. */
static bool same_source(const tfs_staging *s, const char *real, const struct stat *st)
{
	return s->src_path && strcmp(real, s->src_path) == 0 &&
	       (uint64_t)st->st_size == s->src_size && st->st_mtim.tv_sec == s->src_mtime_sec &&
	       st->st_mtim.tv_nsec == s->src_mtime_nsec;
}

int tfs_journal_bind(tfs_staging *s, const tfs_model *m, const char *output, tfs_error *err)
{
	const char *m_path = m->path;
	char *real;
	struct stat st;
	int rc = source_identity(m, &real, &st, err);
	if (rc)
		return rc;
	if (json_array_size(tfs_journal_ops(s)) && !same_source(s, real, &st)) {
		rc = tfs_error_set(err, TFS_E_INVALID,
				   "staging directory %s holds changes for %s (%llu bytes, "
				   "mtime %lld.%09lld), but %s is not that file now; "
				   "nothing was changed", s->dir,
				   s->src_path ? s->src_path : "?",
				   (unsigned long long)s->src_size, (long long)s->src_mtime_sec,
				   (long long)s->src_mtime_nsec, m_path);
		free(real);
		return rc;
	}
	free(s->src_path);
	s->src_path = real;
	s->src_size = (uint64_t)st.st_size;
	s->src_mtime_sec = st.st_mtim.tv_sec;
	s->src_mtime_nsec = st.st_mtim.tv_nsec;
	if (output || !s->output || !json_array_size(tfs_journal_ops(s))) {
		free(s->output);
		if (!(s->output = strdup(output ? output : m_path)))
			return tfs_nomem(err);
	}
	return 0;
}

/* ==== appending ops ==== */

int tfs_journal_record(tfs_staging *s, json_t *op, tfs_error *err)
{
	int rc;
	if (!op)
		return tfs_nomem(err);
	if (json_array_size(tfs_journal_ops(s)) == 0) {
		/* the first change: the journal names its source */
		json_t *src = json_pack("{s:s, s:I, s:[I, I]}", "path", s->src_path, "size",
					(json_int_t)s->src_size, "mtime",
					(json_int_t)s->src_mtime_sec, (json_int_t)s->src_mtime_nsec);
		if (!src || json_object_set_new(s->j, "source", src) ||
		    json_object_set_new(s->j, "output", json_string(s->output)) ||
		    (s->view ? json_object_set(s->j, "view", s->view)
			     : (json_object_del(s->j, "view"), 0))) {
			json_decref(op);
			return tfs_nomem(err);
		}
	}
	if (json_array_append_new(tfs_journal_ops(s), op))
		return tfs_nomem(err);
	if ((rc = tfs_journal_write(s, err)))
		json_array_remove(tfs_journal_ops(s), json_array_size(tfs_journal_ops(s)) - 1);
	return rc;
}

int tfs_journal_unrecord(tfs_staging *s, int rc, tfs_error *err)
{
	tfs_error e2 = { 0 };
	json_array_remove(tfs_journal_ops(s), json_array_size(tfs_journal_ops(s)) - 1);
	if (tfs_journal_write(s, &e2)) {
		char first[TFS_ERRMSG_MAX];
		snprintf(first, sizeof(first), "%s", err ? err->msg : "");
		return tfs_error_set(err, rc, "%s (and the journal could not be restored: %s)",
				     first, e2.msg);
	}
	return rc;
}

/* ==== what the directory holds ==== */

char *tfs_staging_default_dir(const char *output)
{
	const char *base = tfs_basename(output);
	char *s;
	if (asprintf(&s, "%.*s.%s.tensorfs-staging", (int)(base - output), output, base) < 0)
		return NULL;
	return s;
}

int tfs_staging_remove(tfs_staging *s)
{
	if (!s || json_array_size(tfs_journal_ops(s)) || json_object_get(s->j, "repack"))
		return -1;
	char *journal = tfs_path_join(s->dir, TFS_JOURNAL), *lock = tfs_path_join(s->dir, "lock");
	if (journal)
		unlink(journal);
	if (lock)
		unlink(lock); /* still flocked through our fd: nobody else can be using it */
	free(journal);
	free(lock);
	if (rmdir(s->data_dir) < 0 || rmdir(s->dir) < 0)
		return -1; /* something else lives there: keep it */
	return 0;
}

const char *tfs_staging_dir(const tfs_staging *s) { return s->dir; }

const char *tfs_staging_output(const tfs_staging *s) { return s->output; }

bool tfs_staging_dirty(const tfs_staging *s)
{
	return json_array_size(tfs_journal_ops(s)) > 0 || json_object_get(s->j, "repack") != NULL;
}
