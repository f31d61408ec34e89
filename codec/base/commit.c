/*
 * commit.c - writing files safely: commits (the checked I/O they use is base/io.c).
 *
 * A commit writes every output file to a temporary beside its final name
 * (".<name>.tensorfs-tmp.XXXXXX", unnamed until sealed where the file system has
 * O_TMPFILE), fsyncs it and lets the caller validate it; only then are the temporaries
 * renamed over their final names, in the order they were added (the file that makes the
 * set consistent - the GGUF file, an index.json, a manifest - last), and each directory
 * fsynced.  A failure before the renames removes the temporaries and leaves every output
 * untouched.  The format writers use this; they are called by write.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "commit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Test hook: TFS_TEST_CRASH_AT=<where> makes the process die there, as a kill -9 would. */
void tfs_test_crash_point(const char *where)
{
	const char *at = getenv("TFS_TEST_CRASH_AT");
	if (at && strcmp(at, where) == 0)
		_exit(9);
}

/* ==== commits: temporaries renamed over their final names ==== */

/* (A temporary is first an unnamed O_TMPFILE and gets its name once written and fsynced:
 * tfs_io_tmpfile_open and tfs_io_tmpfile_link, base/io.c.) */

typedef struct {
	char *tmp, *final;
	int fd;           /* open until sealed */
	struct stat st;   /* the sealed temporary's identity */
	bool sealed, renamed;
	bool anon;        /* an O_TMPFILE not linked yet: tmp still ends in XXXXXX */
} commit_file;

struct tfs_commit {
	commit_file *f;
	size_t n, cap;
	tfs_name_hook hook;   /* told every temporary's name before it is created */
	void *hook_ctx;
};

void tfs_commit_set_name_hook(tfs_commit *c, tfs_name_hook hook, void *ctx)
{
	c->hook = hook;
	c->hook_ctx = ctx;
}

int tfs_commit_new(tfs_commit **out, tfs_error *err)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
}

/* Creates the temporary for final: ".<name>.tensorfs-tmp.XXXXXX" in final's directory, with
 * final's mode (0644 for a new file).  *fd stays the commit's until tfs_commit_seal; *tmp is
 * borrowed from the commit. */
int tfs_commit_add(tfs_commit *c, const char *final, int *fd, const char **tmp, tfs_error *err)
{
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 4;
		commit_file *p = realloc(c->f, ncap * sizeof(*p));
		if (!p)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		c->f = p;
		c->cap = ncap;
	}
	const char *base = tfs_basename(final);
	size_t dlen = (size_t)(base - final);
	int blen = (int)strnlen(base, 200); /* keep the temporary's name under NAME_MAX */
	commit_file *f = &c->f[c->n];
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (!(f->final = strdup(final)) ||
	    asprintf(&f->tmp, "%.*s.%.*s.tensorfs-tmp.XXXXXX", (int)dlen, final, blen, base) < 0) {
		free(f->final);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	char *dir = dlen ? strndup(final, dlen - 1) : strdup(".");
	if (!dir) {
		free(f->final);
		free(f->tmp);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	f->fd = tfs_io_tmpfile_open(dir, 0600);
	free(dir);
	f->anon = f->fd >= 0;
	if (!f->anon) {
		/* no O_TMPFILE here: the name exists from now on (told to the hook once known) */
		f->fd = mkostemp(f->tmp, O_CLOEXEC);
		if (f->fd >= 0 && c->hook) {
			int rc = c->hook(c->hook_ctx, f->tmp, err);
			if (rc) {
				close(f->fd);
				unlink(f->tmp);
				free(f->final);
				free(f->tmp);
				return rc;
			}
		}
	}
	if (f->fd < 0) {
		int rc = tfs_error_sys(err, errno, "%s: cannot create a temporary file", f->tmp);
		free(f->final);
		free(f->tmp);
		return rc;
	}
	struct stat st;
	mode_t mode = 0644;
	if (stat(final, &st) == 0) {
		mode = st.st_mode & 07777;
		if (fchown(f->fd, st.st_uid, st.st_gid) < 0) {
			/* not ours to give away: the new file belongs to us */
		}
	}
	if (fchmod(f->fd, mode) < 0) {
		int rc = tfs_error_sys(err, errno, "%s: chmod", f->tmp);
		close(f->fd);
		if (!f->anon)
			unlink(f->tmp);
		free(f->final);
		free(f->tmp);
		return rc;
	}
	c->n++;
	*fd = f->fd;
	*tmp = f->tmp;
	return 0;
}

int tfs_commit_seal(tfs_commit *c, tfs_error *err)
{
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->sealed)
			continue;
		if (fsync(f->fd) < 0)
			return tfs_error_sys(err, errno, "%s: fsync", f->tmp);
		if (f->anon) {
			int rc = tfs_io_tmpfile_link(f->fd, f->tmp, c->hook, c->hook_ctx, err);
			if (rc)
				return rc;
			f->anon = false;
		}
		if (fstat(f->fd, &f->st) < 0)
			return tfs_error_sys(err, errno, "%s: stat", f->tmp);
		int fd = f->fd;
		f->fd = -1;
		if (close(fd) < 0 && errno != EINTR)
			return tfs_error_sys(err, errno, "%s: close", f->tmp);
		int rc = tfs_io_fsync_dir(f->tmp, err);
		if (rc)
			return rc;
		f->sealed = true;
	}
	return 0;
}

size_t tfs_commit_count(const tfs_commit *c) { return c->n; }

int tfs_commit_get(const tfs_commit *c, size_t i, const char **tmp, const char **final,
		   struct stat *st)
{
	if (i >= c->n)
		return TFS_E_NOTFOUND;
	*tmp = c->f[i].tmp;
	*final = c->f[i].final;
	if (st)
		*st = c->f[i].st;
	return 0;
}

int tfs_commit_apply(tfs_commit *c, tfs_error *err)
{
	int rc = tfs_commit_seal(c, err);
	if (rc)
		return rc;
	tfs_test_crash_point("before_rename");
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->renamed)
			continue;
		if (rename(f->tmp, f->final) < 0)
			return tfs_error_sys(err, errno, "renaming %s to %s", f->tmp, f->final);
		f->renamed = true;
		if ((rc = tfs_io_fsync_dir(f->final, err)))
			return rc;
		if (i + 1 < c->n)
			tfs_test_crash_point("mid_rename");
	}
	return 0;
}

void tfs_commit_abort(tfs_commit *c)
{
	for (size_t i = 0; i < c->n; i++) {
		commit_file *f = &c->f[i];
		if (f->fd >= 0) {
			close(f->fd);
			f->fd = -1;
		}
		if (!f->renamed && f->tmp) {
			if (!f->anon)
				unlink(f->tmp);
			f->renamed = true; /* gone: nothing left to do for it */
		}
	}
}

void tfs_commit_free(tfs_commit *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		if (c->f[i].fd >= 0)
			close(c->f[i].fd);
		free(c->f[i].tmp);
		free(c->f[i].final);
	}
	free(c->f);
	free(c);
}
