/*
 * staging.c - the crash-safe journal of a writable mount.
 *
 * Layout of a staging directory:
 *  1. journal.json  {"tensorfs_staging": 1,
 *                    "source": {"path", "size", "mtime": [sec, nsec]},
 *                    "output": "<path or model:tag>",
 *                    "ops": [ {"op": "set_kv", "key", "type", "data": "data/3"}, ... ],
 *                    "repack": {"files": [{"tmp", "final", "size", "mtime", "ino"}, ...]}}
 *     replaced atomically (temporary, fsync, rename, fsync of the directory).  A name
 *     that is not valid UTF-8 is stored as "<field>_hex".
 *  2. data/<n>      staged bytes (a value's payload, a tensor's or a file's new bytes),
 *     fsynced before the op naming them is recorded.
 *  3. lock          flock()ed (LOCK_EX) while a mount or a repack uses the directory.
 *
 * Every tfs_staging_<op> records the op durably, then applies it to the model; an op the
 * model refuses is taken out of the journal again.
 *
 * A repack writes and validates every new file under a temporary name, records the
 * temporaries and their identities (size, mtime, inode) in "repack", and only then
 * renames them over their final names (the file committing the set last).  After a
 * crash, the next open compares the final names with the recorded identities:
 *  - none renamed: the source is whole; the temporaries are removed, the ops kept, and
 *    the next repack redoes the work;
 *  - all renamed: the repack is done; the staging directory is emptied, nothing is
 *    applied again;
 *  - some renamed (several files: safetensors shards, Ollama): the validated remaining
 *    temporaries are renamed too (roll forward), then as above.
 */
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#endif
#include "staging.h"
#include "open.h"
#include "commit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>



#define JOURNAL "journal.json"
#define JOURNAL_TMP "journal.json.tmp"
#define JOURNAL_VERSION 1
#define MAX_KV_PAYLOAD (1ull << 32)

struct tfs_staging {
	char *dir;
	char *data_dir;
	int lock_fd;
	json_t *j;            /* the journal document */
	uint64_t next_data;   /* next data/<n> */
	/* the source the journal applies to */
	char *src_path;
	uint64_t src_size;
	int64_t src_mtime_sec, src_mtime_nsec;
	char *output;
};

/* ==== small helpers ==== */

static char *join(const char *a, const char *b)
{
	char *s;
	return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

static int nomem(tfs_error *err) { return tfs_error_set(err, TFS_E_NOMEM, "out of memory"); }

/* A name as a JSON member: "<field>" when it is UTF-8, "<field>_hex" otherwise. */
static int put_name(json_t *o, const char *field, const char *name)
{
	size_t n = strlen(name);
	if (tfs_utf8_valid(name, n))
		return json_object_set_new(o, field, json_string(name));
	char *hex = malloc(2 * n + 1), key[64];
	if (!hex)
		return -1;
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", (uint8_t)name[i]);
	snprintf(key, sizeof(key), "%s_hex", field);
	int rc = json_object_set_new(o, key, json_string(hex));
	free(hex);
	return rc;
}

/* The name put_name stored (allocated), or NULL. */
static char *get_name(const json_t *o, const char *field)
{
	const char *s = json_string_value(json_object_get(o, field));
	if (s)
		return strdup(s);
	char key[64];
	snprintf(key, sizeof(key), "%s_hex", field);
	const char *h = json_string_value(json_object_get(o, key));
	size_t n = h ? strlen(h) : 1;
	if (!h || n % 2)
		return NULL;
	char *out = malloc(n / 2 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1 || v == 0) {
			free(out);
			return NULL;
		}
		out[i] = (char)v;
	}
	out[n / 2] = '\0';
	return out;
}

static uint64_t jnum(const json_t *o, const char *k)
{
	return (uint64_t)json_integer_value(json_object_get(o, k));
}

/* Writes the whole file at path (created or truncated) and fsyncs it. */
static int write_file(const char *path, const void *p, size_t n, tfs_error *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return tfs_error_sys(err, errno, "%s", path);
	int rc = tfs_io_pwrite(fd, path, 0, p, n, err);
	if (!rc && fsync(fd) < 0)
		rc = tfs_error_sys(err, errno, "%s: fsync", path);
	if (close(fd) < 0 && !rc && errno != EINTR)
		rc = tfs_error_sys(err, errno, "%s: close", path);
	return rc;
}

static int fsync_path(const char *path, tfs_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tfs_error_sys(err, errno, "%s", path);
	int rc = 0;
	if (fsync(fd) < 0)
		rc = tfs_error_sys(err, errno, "%s: fsync", path);
	close(fd);
	return rc;
}

/* ==== the journal file ==== */

static int journal_write(tfs_staging *s, tfs_error *err)
{
	char *text = json_dumps(s->j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	char *tmp = join(s->dir, JOURNAL_TMP), *path = join(s->dir, JOURNAL);
	int rc;
	if (!text || !tmp || !path) {
		rc = nomem(err);
		goto out;
	}
	size_t n = strlen(text);
	text[n] = '\n'; /* json_dumps' NUL becomes the final newline */
	if ((rc = write_file(tmp, text, n + 1, err)))
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

static json_t *ops(const tfs_staging *s) { return json_object_get(s->j, "ops"); }

/* A rename op applied to the model: with replace, the target goes first. */
static int rename_apply(tfs_model *m, bool kv, const char *from, const char *to, bool replace,
			tfs_error *err)
{
	int rc = 0;
	if (replace && (kv ? tfs_model_find_kv(m, to) : tfs_model_find_tensor(m, to)) >= 0)
		rc = kv ? tfs_model_del_kv(m, to, err) : tfs_model_del_tensor(m, to, err);
	if (!rc)
		rc = kv ? tfs_model_rename_kv(m, from, to, err) : tfs_model_rename_tensor(m, from, to, err);
	return rc;
}

/* set_kv (from NULL) or replace_kv: key takes the value, from (if any) goes. */
static int kv_apply(tfs_model *m, const char *from, const char *key, uint32_t type, uint8_t *data,
		    uint64_t len, tfs_error *err)
{
	if (from && (tfs_model_find_kv(m, from) < 0 || tfs_model_find_kv(m, key) < 0)) {
		free(data);
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no key '%s'", m->path,
				     tfs_model_find_kv(m, from) < 0 ? from : key);
	}
	int rc = tfs_model_set_kv(m, key, type, data, len, err);
	if (!rc && from && strcmp(from, key))
		rc = tfs_model_del_kv(m, from, err); /* cannot fail: from exists */
	return rc;
}

static int journal_reset(tfs_staging *s)
{
	json_decref(s->j);
	s->j = json_pack("{s:i, s:[]}", "tensorfs_staging", JOURNAL_VERSION, "ops");
	return s->j ? 0 : TFS_E_NOMEM;
}

/* Removes every file under data/ (after the journal no longer names them). */
static int clear_data(tfs_staging *s, tfs_error *err)
{
	DIR *d = opendir(s->data_dir);
	struct dirent *e;
	int rc = 0;
	if (!d)
		return tfs_error_sys(err, errno, "%s", s->data_dir);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *p = join(s->data_dir, e->d_name);
		if (!p) {
			rc = nomem(err);
			break;
		}
		if (unlink(p) < 0 && errno != ENOENT)
			rc = tfs_error_sys(err, errno, "%s", p);
		free(p);
	}
	closedir(d);
	return rc;
}

/* Empties the staging directory: the journal goes first (that is the commit), then the data. */
static int staging_clear(tfs_staging *s, tfs_error *err)
{
	char *path = join(s->dir, JOURNAL);
	int rc;
	if (!path)
		return nomem(err);
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
		return nomem(err);
	s->next_data = 0;
	return clear_data(s, err);
}

/* ==== recovering an interrupted repack ==== */

static bool same_identity(const struct stat *st, const json_t *f)
{
	const json_t *mt = json_object_get(f, "mtime");
	return (uint64_t)st->st_size == jnum(f, "size") && (uint64_t)st->st_ino == jnum(f, "ino") &&
	       st->st_mtim.tv_sec == json_integer_value(json_array_get(mt, 0)) &&
	       st->st_mtim.tv_nsec == json_integer_value(json_array_get(mt, 1));
}

/*
 * "pending": the names of a repack's temporaries, recorded before each is created and
 * until the repack record ("repack") names them with their identities.  A repack that died
 * in between left them: they are removed.
 */
/* Whether path names one of a commit's temporaries (".<name>.tensorfs-tmp.XXXXXX"): the
 * only files a journal's records may make recovery remove, whatever the journal says. */
static bool is_temporary(const char *path)
{
	const char *b = tfs_basename(path), *t = strstr(b, ".tensorfs-tmp.");
	return b[0] == '.' && t && t > b && strlen(t) == strlen(".tensorfs-tmp.XXXXXX") &&
	       !strchr(t + 14, '/');
}

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
	return journal_write(s, err);
}

/* A repack's temporary is about to be created under this name: the journal says so first. */
static int note_pending(void *ctx, const char *tmp, tfs_error *err)
{
	tfs_staging *s = ctx;
	json_t *p = json_object_get(s->j, "pending");
	if (!p && json_object_set_new(s->j, "pending", p = json_array()))
		return nomem(err);
	if (json_array_append_new(p, json_string(tmp)))
		return nomem(err);
	return journal_write(s, err);
}

/*
 * Finishes or undoes a repack recorded in the journal (see the top of this file).
 * *rolled says whether files were renamed here (a model opened before is stale then).
 */
static int recover(tfs_staging *s, bool *rolled, tfs_error *err)
{
	json_t *rp = json_object_get(s->j, "repack");
	json_t *files = json_object_get(rp, "files");
	size_t n = json_array_size(files), renamed = 0, pending = 0;
	int rc;
	*rolled = false;
	if ((rc = drop_pending(s, err)))
		return rc;
	if (!rp)
		return 0;
	for (size_t i = 0; i < n; i++) {
		json_t *f = json_array_get(files, i);
		const char *tmp = json_string_value(json_object_get(f, "tmp"));
		const char *final = json_string_value(json_object_get(f, "final"));
		struct stat st;
		if (!tmp || !final)
			return tfs_error_set(err, TFS_E_FORMAT, "%s/" JOURNAL ": damaged repack record",
					     s->dir);
		if (stat(final, &st) == 0 && same_identity(&st, f))
			renamed++;
		else if (stat(tmp, &st) == 0 && same_identity(&st, f))
			pending++;
	}
	if (renamed == n)
		return staging_clear(s, err);
	if (renamed == 0) {
		/* the rename never happened: the source is whole; redo the repack later */
		for (size_t i = 0; i < n; i++) {
			const char *tmp = json_string_value(json_object_get(json_array_get(files, i),
									     "tmp"));
			if (is_temporary(tmp) && unlink(tmp) < 0 && errno != ENOENT)
				return tfs_error_sys(err, errno, "%s", tmp);
		}
		json_object_del(s->j, "repack");
		return journal_write(s, err);
	}
	if (renamed + pending != n)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: an interrupted repack renamed %zu of %zu files and the "
				     "others' temporaries are gone; the output is incomplete and "
				     "this directory is left as it is", s->dir, renamed, n);
	/* roll forward: the remaining temporaries were validated before the first rename */
	for (size_t i = 0; i < n; i++) {
		json_t *f = json_array_get(files, i);
		const char *tmp = json_string_value(json_object_get(f, "tmp"));
		const char *final = json_string_value(json_object_get(f, "final"));
		struct stat st;
		if (stat(tmp, &st) < 0 || !same_identity(&st, f))
			continue;
		if (rename(tmp, final) < 0)
			return tfs_error_sys(err, errno, "finishing the repack: renaming %s to %s",
					     tmp, final);
		if ((rc = tfs_io_fsync_dir(final, err)))
			return rc;
		*rolled = true;
	}
	return staging_clear(s, err);
}

/* ==== opening ==== */

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

/* Highest n of data/<n> + 1. */
static int scan_data(tfs_staging *s, tfs_error *err)
{
	DIR *d = opendir(s->data_dir);
	struct dirent *e;
	if (!d)
		return tfs_error_sys(err, errno, "%s", s->data_dir);
	s->next_data = 0;
	while ((e = readdir(d))) {
		char *end;
		unsigned long long v = strtoull(e->d_name, &end, 10);
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && !*end && v + 1 > s->next_data)
			s->next_data = v + 1;
	}
	closedir(d);
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
	free(s);
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
			return nomem(err);
		return clear_data(s, err);
	}
	s->j = json_load_file(jpath, JSON_REJECT_DUPLICATES, &je);
	if (!s->j || !json_is_object(s->j) || !json_is_array(ops(s)) ||
	    json_integer_value(json_object_get(s->j, "tensorfs_staging")) != JOURNAL_VERSION)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: damaged or unknown journal%s%s; nothing was changed", jpath,
				     s->j ? "" : ": ", s->j ? "" : je.text);
	json_t *src = json_object_get(s->j, "source");
	const json_t *mt = json_object_get(src, "mtime");
	const char *p = json_string_value(json_object_get(src, "path"));
	if (p && !(s->src_path = strdup(p)))
		return nomem(err);
	s->src_size = jnum(src, "size");
	s->src_mtime_sec = json_integer_value(json_array_get(mt, 0));
	s->src_mtime_nsec = json_integer_value(json_array_get(mt, 1));
	p = json_string_value(json_object_get(s->j, "output"));
	if (p && !(s->output = strdup(p)))
		return nomem(err);
	if (json_array_size(ops(s)) && !s->src_path)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: journal names no source", jpath);
	return 0;
}

/* Creates/locks the directory and loads its journal (without looking at any source). */
static int staging_lock(tfs_staging **out, const char *dir, tfs_error *err)
{
	tfs_staging *s = calloc(1, sizeof(*s));
	char *lock = NULL, *jpath = NULL, *tmp = NULL;
	int rc;
	*out = NULL;
	if (!s)
		return nomem(err);
	s->lock_fd = -1;
	if (!(s->dir = strdup(dir)) || !(s->data_dir = join(dir, "data")) ||
	    !(lock = join(dir, "lock")) || !(jpath = join(dir, JOURNAL)) ||
	    !(tmp = join(dir, JOURNAL_TMP))) {
		rc = nomem(err);
		goto fail;
	}
	if ((rc = make_dir(dir, err)) || (rc = make_dir(s->data_dir, err)))
		goto fail;
	s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (s->lock_fd < 0) {
		rc = tfs_error_sys(err, errno, "%s", lock);
		goto fail;
	}
	while (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK)
			rc = tfs_error_set(err, TFS_E_EXISTS,
					   "staging directory %s is in use by another tensorfs "
					   "process", dir);
		else
			rc = tfs_error_sys(err, errno, "%s: flock", lock);
		goto fail;
	}
	unlink(tmp); /* a journal update interrupted before its rename */

	if ((rc = journal_load(s, jpath, err)))
		goto fail;
	if ((rc = scan_data(s, err)))
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

/* The identity of the file a model was opened from. */
static int source_identity(const tfs_model *m, char **real, struct stat *st, tfs_error *err)
{
	const char *path = m->path;
	if (m->n_src && m->src[0].remote) { /* a URL: its size and Last-Modified */
		memset(st, 0, sizeof(*st));
		st->st_size = (off_t)m->src[0].size;
		st->st_mtim.tv_sec = (time_t)m->src[0].mtime_sec;
		return (*real = strdup(path)) ? 0 : nomem(err);
	}
	if (stat(path, st) < 0)
		return tfs_error_sys(err, errno, "%s", path);
	*real = realpath(path, NULL);
	if (!*real && !(*real = strdup(path)))
		return nomem(err);
	return 0;
}

/* Ties s to the model opened from m_path: the journal's source must be that file, unchanged,
 * when it holds changes. */
static int staging_bind(tfs_staging *s, const tfs_model *m, const char *output, tfs_error *err)
{
	const char *m_path = m->path;
	char *real;
	struct stat st;
	int rc = source_identity(m, &real, &st, err);
	if (rc)
		return rc;
	if (json_array_size(ops(s))) {
		if (!s->src_path || strcmp(real, s->src_path) != 0 ||
		    (uint64_t)st.st_size != s->src_size || st.st_mtim.tv_sec != s->src_mtime_sec ||
		    st.st_mtim.tv_nsec != s->src_mtime_nsec) {
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
	}
	free(s->src_path);
	s->src_path = real;
	s->src_size = (uint64_t)st.st_size;
	s->src_mtime_sec = st.st_mtim.tv_sec;
	s->src_mtime_nsec = st.st_mtim.tv_nsec;
	if (output || !s->output || !json_array_size(ops(s))) {
		free(s->output);
		if (!(s->output = strdup(output ? output : m_path)))
			return nomem(err);
	}
	return 0;
}

int tfs_staging_open(tfs_staging **out, const char *dir, const tfs_model *m, const char *output,
		     tfs_error *err)
{
	tfs_staging *s;
	bool rolled;
	int rc = staging_lock(&s, dir, err);
	*out = NULL;
	if (rc)
		return rc;
	if ((rc = recover(s, &rolled, err)))
		goto fail;
	if (rolled) {
		rc = tfs_error_set(err, TFS_E_INVALID,
				   "%s: an interrupted repack was finished; open the model again",
				   dir);
		goto fail;
	}
	if ((rc = staging_bind(s, m, output, err)))
		goto fail;
	*out = s;
	return 0;
fail:
	tfs_staging_free(s);
	return rc;
}

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
	if (!s || json_array_size(ops(s)) || json_object_get(s->j, "repack"))
		return -1;
	char *journal = join(s->dir, JOURNAL), *lock = join(s->dir, "lock");
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

bool tfs_staging_dirty(const tfs_staging *s)
{
	return json_array_size(ops(s)) > 0 || json_object_get(s->j, "repack") != NULL;
}

/* ==== replay ==== */

/* The absolute path of a journal "data" member, which must name a file under data/. */
static char *data_path(const tfs_staging *s, const json_t *op)
{
	const char *rel = json_string_value(json_object_get(op, "data"));
	if (!rel || strncmp(rel, "data/", 5) != 0 || strchr(rel + 5, '/') || !rel[5] ||
	    rel[5] == '.')
		return NULL;
	return join(s->dir, rel);
}

/* A set_tensors op: the tensors of one change (an MLX weight and its companions), applied
 * all at once. */
static int apply_set_tensors(tfs_staging *s, tfs_model *m, const json_t *op, tfs_error *err)
{
	const json_t *items = json_object_get(op, "items");
	const size_t n = json_array_size(items);
	tfs_tensor_file f[TFS_MAX_TENSOR_FILES];
	char *names[TFS_MAX_TENSOR_FILES] = { 0 }, *paths[TFS_MAX_TENSOR_FILES] = { 0 };
	int64_t ne[TFS_MAX_TENSOR_FILES][TFS_MAX_DIMS];
	int rc = n && n <= TFS_MAX_TENSOR_FILES ? 0 : -1;

	for (size_t k = 0; !rc && k < n; k++) {
		const json_t *it = json_array_get(items, k), *jne = json_object_get(it, "ne");
		const size_t nd = json_array_size(jne);

		names[k] = get_name(it, "name");
		paths[k] = data_path(s, it);
		if (!names[k] || !paths[k] || nd > TFS_MAX_DIMS) {
			rc = -1;
			break;
		}
		for (size_t d = 0; d < nd; d++)
			ne[k][d] = json_integer_value(json_array_get(jne, d));
		f[k] = (tfs_tensor_file){ names[k], (int)json_integer_value(json_object_get(it, "dtype")),
					  (uint32_t)nd, ne[k], paths[k] };
	}
	rc = rc ? tfs_error_set(err, TFS_E_FORMAT, "damaged set_tensors op")
		: tfs_model_set_tensor_files(m, f, n, err);
	for (size_t k = 0; k < TFS_MAX_TENSOR_FILES; k++) {
		free(names[k]);
		free(paths[k]);
	}
	return rc;
}

static int apply_op(tfs_staging *s, tfs_model *m, const json_t *op, tfs_error *err)
{
	const char *kind = json_string_value(json_object_get(op, "op"));
	char *a = NULL, *b = NULL, *path = NULL;
	int rc;
	if (!kind)
		return tfs_error_set(err, TFS_E_FORMAT, "op without a kind");
	if (!strcmp(kind, "set_kv") || !strcmp(kind, "replace_kv")) {
		bool repl = kind[0] == 'r';
		uint8_t *buf = NULL;
		uint64_t len = 0;
		if (!(a = get_name(op, repl ? "to" : "key")) || (repl && !(b = get_name(op, "from"))) ||
		    !(path = data_path(s, op))) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "damaged %s op", kind);
			goto out;
		}
		if ((rc = tfs_read_small_file(path, MAX_KV_PAYLOAD, &buf, &len, err)))
			goto out;
		rc = kv_apply(m, b, a, (uint32_t)jnum(op, "type"), buf, len, err);
	} else if (!strcmp(kind, "replace_tensor") || !strcmp(kind, "replace_extra")) {
		const json_t *jne = json_object_get(op, "ne");
		int64_t ne[TFS_MAX_DIMS] = { 0 };
		size_t nd = json_array_size(jne);
		if (!(a = get_name(op, "from")) || !(b = get_name(op, "to")) || nd > TFS_MAX_DIMS) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "damaged %s op", kind);
			goto out;
		}
		for (size_t k = 0; k < nd; k++)
			ne[k] = json_integer_value(json_array_get(jne, k));
		rc = kind[8] == 'e' ? tfs_model_replace_extra(m, a, b, err)
				    : tfs_model_replace_tensor(m, a, b,
							       (int)json_integer_value(json_object_get(op, "dtype")),
							       (uint32_t)nd, ne, err);
	} else if (!strcmp(kind, "del_kv") || !strcmp(kind, "del_tensor") ||
		   !strcmp(kind, "del_extra")) {
		if (!(a = get_name(op, "name"))) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "damaged %s op", kind);
			goto out;
		}
		rc = kind[4] == 'k'   ? tfs_model_del_kv(m, a, err)
		     : kind[4] == 't' ? tfs_model_del_tensor(m, a, err)
				      : tfs_model_del_extra(m, a, err);
	} else if (!strcmp(kind, "rename_kv") || !strcmp(kind, "rename_tensor")) {
		if (!(a = get_name(op, "from")) || !(b = get_name(op, "to"))) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "damaged %s op", kind);
			goto out;
		}
		rc = rename_apply(m, kind[7] == 'k', a, b, json_is_true(json_object_get(op, "replace")),
				  err);
	} else if (!strcmp(kind, "set_tensor")) {
		const json_t *jne = json_object_get(op, "ne");
		int64_t ne[TFS_MAX_DIMS] = { 0 };
		size_t nd = json_array_size(jne);
		if (!(a = get_name(op, "name")) || !(path = data_path(s, op)) || nd > TFS_MAX_DIMS) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "damaged set_tensor op");
			goto out;
		}
		for (size_t k = 0; k < nd; k++)
			ne[k] = json_integer_value(json_array_get(jne, k));
		rc = tfs_model_set_tensor_file(m, a, (int)json_integer_value(json_object_get(op, "dtype")),
					       (uint32_t)nd, ne, path, err);
	} else if (!strcmp(kind, "set_tensors")) {
		rc = apply_set_tensors(s, m, op, err);
	} else if (!strcmp(kind, "set_extra")) {
		if (!(a = get_name(op, "name")) || !(path = data_path(s, op))) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "damaged set_extra op");
			goto out;
		}
		rc = tfs_model_set_extra_file(m, a, path, err);
	} else {
		rc = tfs_error_set(err, TFS_E_FORMAT, "unknown op '%s'", kind);
	}
out:
	free(a);
	free(b);
	free(path);
	return rc;
}

int tfs_staging_replay(tfs_staging *s, tfs_model *m, tfs_error *err)
{
	bool rolled;
	int rc = recover(s, &rolled, err);
	if (rc)
		return rc;
	if (rolled)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: an interrupted repack was finished; open the model again",
				     s->dir);
	json_t *o = ops(s);
	for (size_t i = 0; i < json_array_size(o); i++) {
		tfs_error e = { 0 };
		if ((rc = apply_op(s, m, json_array_get(o, i), &e)))
			return tfs_error_set(err, rc, "%s: replaying staged change %zu: %s", s->dir,
					     i + 1, e.msg);
	}
	return 0;
}

/* ==== recording changes ==== */

int tfs_staging_new_data(tfs_staging *s, char **path, tfs_error *err)
{
	char name[32];
	*path = NULL;
	for (;;) {
		snprintf(name, sizeof(name), "%llu", (unsigned long long)s->next_data++);
		char *p = join(s->data_dir, name);
		if (!p)
			return nomem(err);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0) {
			close(fd);
			*path = p;
			return 0;
		}
		int e = errno;
		free(p);
		if (e != EEXIST)
			return tfs_error_sys(err, e, "%s/%s", s->data_dir, name);
	}
}

int tfs_staging_scratch_open(tfs_staging *s, int *fd, char **path, tfs_error *err)
{
	*path = NULL;
	*fd = tfs_io_tmpfile_open(s->data_dir, 0644);
	if (*fd >= 0)
		return 0;
	/* no O_TMPFILE here: a named file, removed by tfs_staging_new_data's caller */
	int rc = tfs_staging_new_data(s, path, err);
	if (rc)
		return rc;
	if ((*fd = open(*path, O_RDWR | O_CLOEXEC)) < 0) {
		rc = tfs_error_sys(err, errno, "%s", *path);
		unlink(*path);
		free(*path);
		*path = NULL;
	}
	return rc;
}

int tfs_staging_scratch_link(tfs_staging *s, int fd, const char *named, char **path,
			     tfs_error *err)
{
	char proc[64];
	if (named)
		return (*path = strdup(named)) ? 0 : nomem(err);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	for (;;) {
		char name[32];
		snprintf(name, sizeof(name), "%llu", (unsigned long long)s->next_data++);
		char *p = join(s->data_dir, name);
		if (!p)
			return nomem(err);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, p, AT_SYMLINK_FOLLOW) == 0) {
			*path = p;
			return 0;
		}
		int e = errno;
		free(p);
		if (e != EEXIST)
			return tfs_error_sys(err, e, "%s/%s", s->data_dir, name);
	}
}

/* "data/<n>" for a path tfs_staging_new_data returned (borrowed from path), or NULL. */
static const char *data_rel(const tfs_staging *s, const char *path)
{
	size_t n = strlen(s->data_dir);
	if (strncmp(path, s->data_dir, n) != 0 || path[n] != '/' || !path[n + 1] ||
	    strchr(path + n + 1, '/'))
		return NULL;
	return path + n - 4; /* "data/<n>" */
}

/* Makes a staged data file durable: its bytes and its directory entry. */
static int data_sync(tfs_staging *s, const char *path, tfs_error *err)
{
	int rc = fsync_path(path, err);
	return rc ? rc : fsync_path(s->data_dir, err);
}

/* Appends op (stolen) to the journal and writes it out. */
static int record(tfs_staging *s, json_t *op, tfs_error *err)
{
	int rc;
	if (!op)
		return nomem(err);
	if (json_array_size(ops(s)) == 0) {
		/* the first change: the journal names its source */
		json_t *src = json_pack("{s:s, s:I, s:[I, I]}", "path", s->src_path, "size",
					(json_int_t)s->src_size, "mtime",
					(json_int_t)s->src_mtime_sec, (json_int_t)s->src_mtime_nsec);
		if (!src || json_object_set_new(s->j, "source", src) ||
		    json_object_set_new(s->j, "output", json_string(s->output))) {
			json_decref(op);
			return nomem(err);
		}
	}
	if (json_array_append_new(ops(s), op))
		return nomem(err);
	if ((rc = journal_write(s, err)))
		json_array_remove(ops(s), json_array_size(ops(s)) - 1);
	return rc;
}

/* After the model refused an op already recorded: take it out of the journal again. */
static int unrecord(tfs_staging *s, int rc, tfs_error *err)
{
	tfs_error e2 = { 0 };
	json_array_remove(ops(s), json_array_size(ops(s)) - 1);
	if (journal_write(s, &e2)) {
		char first[TFS_ERRMSG_MAX];
		snprintf(first, sizeof(first), "%s", err ? err->msg : "");
		return tfs_error_set(err, rc, "%s (and the journal could not be restored: %s)",
				     first, e2.msg);
	}
	return rc;
}

/* Whether name is one of names[0..n). */
static bool name_in(const char *name, const char *const *names, size_t n)
{
	for (size_t k = 0; name && k < n; k++)
		if (!strcmp(name, names[k]))
			return true;
	return false;
}

/* Whether op, an earlier op than a set of names (of kind), can no longer be seen: a set of
 * one of them, or (tensors) a set_tensors all of whose tensors are among them. */
static bool op_superseded(const json_t *op, const char *k, const char *kind, const char *field,
			  const char *const *names, size_t n_names)
{
	bool hit = false;

	if (!strcmp(k, kind)) {
		char *nm = get_name(op, field);
		hit = name_in(nm, names, n_names);
		free(nm);
	} else if (!strcmp(k, "set_tensors") && !strcmp(kind, "set_tensor")) {
		const json_t *items = json_object_get(op, "items");
		hit = json_array_size(items) > 0;
		for (size_t j = 0; hit && j < json_array_size(items); j++) {
			char *nm = get_name(json_array_get(items, j), "name");
			hit = name_in(nm, names, n_names);
			free(nm);
		}
	}
	return hit;
}

/* Removes the data files of a dead op (every item's, for set_tensors). */
static void unlink_data(tfs_staging *s, const json_t *op)
{
	const json_t *items = json_object_get(op, "items");
	char *path = data_path(s, op);

	if (path)
		unlink(path);
	free(path);
	for (size_t j = 0; j < json_array_size(items); j++) {
		path = data_path(s, json_array_get(items, j));
		if (path)
			unlink(path);
		free(path);
	}
}

/*
 * After a set of names (the op just recorded and applied): earlier sets of the same
 * names with no rename or delete in between are dead (their bytes can no longer be
 * seen).  They leave the journal, durably, and then their data files are removed, so
 * rewriting a big tensor again and again does not pile copies up in the staging
 * directory.  Best effort: on any failure the journal stays as it was, still valid.
 */
static void drop_superseded(tfs_staging *s, const char *kind, const char *field,
			    const char *const *names, size_t n_names)
{
	json_t *all = ops(s);
	size_t n = json_array_size(all), n_dead = 0;
	bool *dead = n > 1 ? calloc(n, sizeof(bool)) : NULL;
	if (!dead)
		return;
	for (size_t i = n - 1; i-- > 0;) {
		const json_t *op = json_array_get(all, i);
		const char *k = json_string_value(json_object_get(op, "op"));
		if (!k || !strncmp(k, "rename", 6) || !strncmp(k, "del", 3) ||
		    !strncmp(k, "replace", 7))
			break;
		if (op_superseded(op, k, kind, field, names, n_names)) {
			dead[i] = true;
			n_dead++;
		}
	}
	json_t *keep = n_dead ? json_array() : NULL;
	for (size_t i = 0; keep && i < n; i++)
		if (!dead[i] && json_array_append(keep, json_array_get(all, i))) {
			json_decref(keep);
			keep = NULL;
		}
	if (!keep) {
		free(dead);
		return;
	}
	json_incref(all);
	tfs_error e;
	if (json_object_set_new(s->j, "ops", keep) || journal_write(s, &e)) {
		json_object_set_new(s->j, "ops", all); /* as it was (the file never changed) */
		free(dead);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (dead[i])
			unlink_data(s, json_array_get(all, i));
	json_decref(all);
	free(dead);
}

/* Records op durably, then applies it with fn. */
#define RECORD_AND_APPLY(s, op, call)                   \
	do {                                            \
		int rc_ = record((s), (op), err);       \
		if (rc_)                                \
			return rc_;                     \
		if ((rc_ = (call)))                     \
			return unrecord((s), rc_, err); \
		return 0;                               \
	} while (0)

static json_t *op_new(const char *kind) { return json_pack("{s:s}", "op", kind); }

static int stage_kv(tfs_staging *s, tfs_model *m, const char *from, const char *key, uint32_t type,
		    const uint8_t *data, uint64_t len, tfs_error *err)
{
	char *path = NULL;
	uint8_t *copy = malloc(len ? (size_t)len : 1);
	int rc;
	if (!copy || len > MAX_KV_PAYLOAD) {
		free(copy);
		return len > MAX_KV_PAYLOAD ? tfs_error_set(err, TFS_E_INVALID, "value too large")
					    : nomem(err);
	}
	memcpy(copy, data, (size_t)len);
	if ((rc = tfs_staging_new_data(s, &path, err)) ||
	    (rc = write_file(path, data, (size_t)len, err)) || (rc = data_sync(s, path, err))) {
		free(copy);
		if (path)
			unlink(path);
		free(path);
		return rc;
	}
	json_t *op = op_new(from ? "replace_kv" : "set_kv");
	if (!op || (from && put_name(op, "from", from)) || put_name(op, from ? "to" : "key", key) ||
	    json_object_set_new(op, "type", json_integer(type)) ||
	    json_object_set_new(op, "data", json_string(data_rel(s, path)))) {
		json_decref(op);
		op = NULL;
	}
	free(path);
	if ((rc = record(s, op, err))) {
		free(copy);
		return rc;
	}
	if ((rc = kv_apply(m, from, key, type, copy, len, err)))
		return unrecord(s, rc, err);
	if (!from)
		drop_superseded(s, "set_kv", "key", &key, 1);
	return 0;
}

int tfs_staging_set_kv(tfs_staging *s, tfs_model *m, const char *key, uint32_t type,
		       const uint8_t *data, uint64_t len, tfs_error *err)
{
	return stage_kv(s, m, NULL, key, type, data, len, err);
}

int tfs_staging_replace_kv(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			   uint32_t type, const uint8_t *data, uint64_t len, tfs_error *err)
{
	if (tfs_model_find_kv(m, from) < 0 || tfs_model_find_kv(m, to) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no key '%s'", m->path,
				     tfs_model_find_kv(m, from) < 0 ? from : to);
	return stage_kv(s, m, from, to, type, data, len, err);
}

static json_t *op_name(const char *kind, const char *field, const char *name)
{
	json_t *op = op_new(kind);
	if (op && put_name(op, field, name)) {
		json_decref(op);
		op = NULL;
	}
	return op;
}

static json_t *op_rename(const char *kind, const char *from, const char *to, bool replace)
{
	json_t *op = op_new(kind);
	if (op && (put_name(op, "from", from) || put_name(op, "to", to) ||
		   (replace && json_object_set_new(op, "replace", json_true())))) {
		json_decref(op);
		op = NULL;
	}
	return op;
}

/* Keys and tensors are deleted and renamed alike: what differs between the two. */
typedef struct {
	const char *what, *del_op, *rename_op;
	bool is_kv;
	long (*find)(const tfs_model *m, const char *name);
	int (*del)(tfs_model *m, const char *name, tfs_error *err);
} item_kind;

static const item_kind kv_kind = { "key", "del_kv", "rename_kv", true, tfs_model_find_kv,
				   tfs_model_del_kv };
static const item_kind tensor_kind = { "tensor", "del_tensor", "rename_tensor", false,
				       tfs_model_find_tensor, tfs_model_del_tensor };

static int del_item(tfs_staging *s, tfs_model *m, const item_kind *k, const char *name,
		    tfs_error *err)
{
	if (k->find(m, name) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no %s '%s'", m->path, k->what, name);
	RECORD_AND_APPLY(s, op_name(k->del_op, "name", name), k->del(m, name, err));
}

static int rename_item(tfs_staging *s, tfs_model *m, const item_kind *k, const char *from,
		       const char *to, bool replace, tfs_error *err)
{
	if (k->find(m, from) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no %s '%s'", m->path, k->what, from);
	if (!strcmp(from, to))
		return 0;
	replace = replace && k->find(m, to) >= 0;
	if (!replace && k->find(m, to) >= 0)
		return tfs_error_set(err, TFS_E_EXISTS, "%s: %s '%s' already exists", m->path,
				     k->what, to);
	RECORD_AND_APPLY(s, op_rename(k->rename_op, from, to, replace),
			 rename_apply(m, k->is_kv, from, to, replace, err));
}

int tfs_staging_del_kv(tfs_staging *s, tfs_model *m, const char *key, tfs_error *err)
{
	return del_item(s, m, &kv_kind, key, err);
}

int tfs_staging_rename_kv(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			  bool replace, tfs_error *err)
{
	return rename_item(s, m, &kv_kind, from, to, replace, err);
}

int tfs_staging_del_tensor(tfs_staging *s, tfs_model *m, const char *name, tfs_error *err)
{
	return del_item(s, m, &tensor_kind, name, err);
}

int tfs_staging_rename_tensor(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			      bool replace, tfs_error *err)
{
	return rename_item(s, m, &tensor_kind, from, to, replace, err);
}

int tfs_staging_del_extra(tfs_staging *s, tfs_model *m, const char *name, tfs_error *err)
{
	if (tfs_model_find_extra(m, name) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no file '%s'", m->path, name);
	RECORD_AND_APPLY(s, op_name("del_extra", "name", name), tfs_model_del_extra(m, name, err));
}

int tfs_staging_set_tensor(tfs_staging *s, tfs_model *m, const char *name, int dtype,
			   uint32_t n_dims, const int64_t *ne, const char *data_path_,
			   tfs_error *err)
{
	const char *rel = data_rel(s, data_path_);
	int rc;
	if (!rel)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: not a file from tfs_staging_new_data", data_path_);
	if (n_dims > TFS_MAX_DIMS)
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': too many dimensions", name);
	if ((rc = data_sync(s, data_path_, err)))
		return rc;
	json_t *op = op_name("set_tensor", "name", name), *jne = json_array();
	for (uint32_t k = 0; jne && k < n_dims; k++)
		if (json_array_append_new(jne, json_integer(ne[k])))
			break;
	if (!op || !jne || json_array_size(jne) != n_dims) {
		json_decref(jne);
		json_decref(op);
		op = NULL;
	} else if (json_object_set_new(op, "dtype", json_integer(dtype)) ||
		   json_object_set_new(op, "ne", jne) || /* steals jne, also on failure */
		   json_object_set_new(op, "data", json_string(rel))) {
		json_decref(op);
		op = NULL;
	}
	if ((rc = record(s, op, err)))
		return rc;
	if ((rc = tfs_model_set_tensor_file(m, name, dtype, n_dims, ne, data_path_, err)))
		return unrecord(s, rc, err);
	drop_superseded(s, "set_tensor", "name", &name, 1);
	return 0;
}

/* A JSON array of the first n_dims of ne, or NULL. */
static json_t *ne_array(uint32_t n_dims, const int64_t *ne)
{
	json_t *jne = json_array();
	for (uint32_t k = 0; jne && k < n_dims; k++)
		if (json_array_append_new(jne, json_integer(ne[k]))) {
			json_decref(jne);
			return NULL;
		}
	return jne;
}

int tfs_staging_set_tensors(tfs_staging *s, tfs_model *m, const tfs_tensor_file *f, size_t n,
			    tfs_error *err)
{
	if (n == 0 || n > TFS_MAX_TENSOR_FILES)
		return tfs_error_set(err, TFS_E_INVALID, "%zu tensors in one change", n);
	json_t *op = op_new("set_tensors"), *items = json_array();
	int rc = 0;

	if (!op || !items || json_object_set(op, "items", items)) {
		json_decref(items);
		json_decref(op);
		return nomem(err);
	}
	json_decref(items);  /* op holds it */
	for (size_t k = 0; k < n && !rc; k++) {
		const char *rel = data_rel(s, f[k].path);
		json_t *it = json_object(), *jne = ne_array(f[k].n_dims, f[k].ne);

		if (!rel || f[k].n_dims > TFS_MAX_DIMS)
			rc = tfs_error_set(err, TFS_E_INVALID, "tensor '%s': not a staged file or too "
					   "many dimensions", f[k].name);
		else if ((rc = data_sync(s, f[k].path, err)) == 0 &&
			 (!it || !jne || put_name(it, "name", f[k].name) ||
			  json_object_set_new(it, "dtype", json_integer(f[k].dtype)) ||
			  json_object_set(it, "ne", jne) ||
			  json_object_set_new(it, "data", json_string(rel)) ||
			  json_array_append(items, it)))
			rc = nomem(err);
		json_decref(jne);
		json_decref(it);
	}
	if (rc) {
		json_decref(op);
		return rc;
	}
	/* one op, written in one journal replace: all of them are staged, or none */
	if ((rc = record(s, op, err)))
		return rc;
	if ((rc = tfs_model_set_tensor_files(m, f, n, err)))
		return unrecord(s, rc, err);
	const char *names[TFS_MAX_TENSOR_FILES];
	for (size_t k = 0; k < n; k++)
		names[k] = f[k].name;
	drop_superseded(s, "set_tensor", "name", names, n);
	return 0;
}

int tfs_staging_replace_tensor(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			       int dtype, uint32_t n_dims, const int64_t *ne, tfs_error *err)
{
	if (tfs_model_find_tensor(m, from) < 0 || tfs_model_find_tensor(m, to) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no tensor '%s'", m->path,
				     tfs_model_find_tensor(m, from) < 0 ? from : to);
	if (n_dims > TFS_MAX_DIMS)
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': too many dimensions", to);
	json_t *op = op_rename("replace_tensor", from, to, false), *jne = ne_array(n_dims, ne);
	if (!op || !jne) {
		json_decref(jne);
		json_decref(op);
		op = NULL;
	} else if (json_object_set_new(op, "ne", jne) || /* steals jne, also on failure */
		   json_object_set_new(op, "dtype", json_integer(dtype))) {
		json_decref(op);
		op = NULL;
	}
	RECORD_AND_APPLY(s, op, tfs_model_replace_tensor(m, from, to, dtype, n_dims, ne, err));
}

int tfs_staging_replace_extra(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			      tfs_error *err)
{
	if (tfs_model_find_extra(m, from) < 0 || tfs_model_find_extra(m, to) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no file '%s'", m->path,
				     tfs_model_find_extra(m, from) < 0 ? from : to);
	RECORD_AND_APPLY(s, op_rename("replace_extra", from, to, false),
			 tfs_model_replace_extra(m, from, to, err));
}

int tfs_staging_set_extra(tfs_staging *s, tfs_model *m, const char *name, const char *data_path_,
			  tfs_error *err)
{
	const char *rel = data_rel(s, data_path_);
	int rc;
	if (!rel)
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: not a file from tfs_staging_new_data", data_path_);
	if ((rc = data_sync(s, data_path_, err)))
		return rc;
	json_t *op = op_name("set_extra", "name", name);
	if (op && json_object_set_new(op, "data", json_string(rel))) {
		json_decref(op);
		op = NULL;
	}
	if ((rc = record(s, op, err)))
		return rc;
	if ((rc = tfs_model_set_extra_file(m, name, data_path_, err)))
		return unrecord(s, rc, err);
	drop_superseded(s, "set_extra", "name", &name, 1);
	return 0;
}

/* ==== repack ==== */

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
	if (json_object_get(s->j, "repack") && (rc = recover(s, &rolled, err)))
		return rc;
	if (json_array_size(ops(s)) == 0)
		return 0; /* nothing staged: nothing is written */
	if ((rc = tfs_commit_new(&c, err)))
		return rc;
	tfs_commit_set_name_hook(c, note_pending, s);
	if ((rc = tfs_model_write_prepare(m, &wo, c, err)) || (rc = tfs_commit_seal(c, err)))
		goto abort;

	/* record what is about to be renamed, so that a crash from here on is recognized */
	json_t *files = json_array();
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
	if (!files || json_object_set_new(s->j, "repack", json_pack("{s:o}", "files", files))) {
		rc = nomem(err);
		goto abort;
	}
	/* the repack record names them now, with their identities */
	json_t *pend = json_incref(json_object_get(s->j, "pending"));
	json_object_del(s->j, "pending");
	if ((rc = journal_write(s, err))) {
		json_object_del(s->j, "repack");
		if (pend)
			json_object_set_new(s->j, "pending", pend);
		goto abort;
	}
	json_decref(pend);

	if ((rc = tfs_commit_apply(c, err))) {
		/* whatever was or was not renamed, recovery knows what to do with it */
		tfs_error e2 = { 0 };
		if (recover(s, &rolled, &e2)) {
			char first[TFS_ERRMSG_MAX];
			snprintf(first, sizeof(first), "%s", err ? err->msg : "");
			tfs_error_set(err, rc, "%s; %s", first, e2.msg);
		}
		tfs_commit_free(c);
		return rc;
	}
	tfs_commit_free(c);
	tfs_test_crash_point("after_rename");
	return staging_clear(s, err);
abort:
	tfs_commit_abort(c);
	tfs_commit_free(c);
	{
		tfs_error e2 = { 0 };
		drop_pending(s, &e2); /* best effort: the next open tries again */
	}
	return rc;
}

/* Repacks a staging directory on its own: `tensorfs repack DIR`. */
int tfs_repack_dir(const char *staging_dir, const tfs_write_opts *o, tfs_error *err)
{
	tfs_staging *s;
	tfs_model *m = NULL;
	bool rolled;
	int rc = staging_lock(&s, staging_dir, err);
	if (rc)
		return rc;
	if ((rc = recover(s, &rolled, err)) || json_array_size(ops(s)) == 0)
		goto out;
	char *src = strdup(s->src_path);
	if (!src) {
		rc = nomem(err);
		goto out;
	}
	rc = tfs_model_open(&m, src, NULL, err);
	if (!rc)
		rc = staging_bind(s, m, NULL, err);
	free(src);
	if (!rc)
		rc = tfs_staging_replay(s, m, err);
	if (!rc)
		rc = tfs_staging_repack(s, m, o, err);
out:
	tfs_model_free(m);
	tfs_staging_free(s);
	return rc;
}

int tfs_staging_recover(const char *staging_dir, tfs_error *err)
{
	tfs_staging *s;
	bool rolled;
	struct stat st;
	if (stat(staging_dir, &st) < 0 && errno == ENOENT)
		return 0;
	int rc = staging_lock(&s, staging_dir, err);
	if (rc)
		return rc;
	rc = recover(s, &rolled, err);
	tfs_staging_free(s);
	return rc;
}
