/*
 * data.c - the files of a staging directory: data/<n>, each the bytes of one staged
 * change (a value's payload, a tensor's or a file's new bytes), fsynced before the op
 * naming it is recorded; and an editor's scratch files there, which are not changes yet.
 */
#include "staging_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ==== small helpers ==== */

char *tfs_path_join(const char *a, const char *b)
{
	char *s;
	return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

int tfs_nomem(tfs_error *err) { return tfs_error_set(err, TFS_E_NOMEM, "out of memory"); }

int tfs_write_whole_file(const char *path, const void *p, size_t n, tfs_error *err)
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

/* ==== data/ ==== */

int tfs_data_scan(tfs_staging *s, tfs_error *err)
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

int tfs_data_clear(tfs_staging *s, tfs_error *err)
{
	DIR *d = opendir(s->data_dir);
	struct dirent *e;
	int rc = 0;
	if (!d)
		return tfs_error_sys(err, errno, "%s", s->data_dir);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *p = tfs_path_join(s->data_dir, e->d_name);
		if (!p) {
			rc = tfs_nomem(err);
			break;
		}
		if (unlink(p) < 0 && errno != ENOENT)
			rc = tfs_error_sys(err, errno, "%s", p);
		free(p);
	}
	closedir(d);
	return rc;
}

char *tfs_data_path(const tfs_staging *s, const json_t *op)
{
	const char *rel = json_string_value(json_object_get(op, "data"));
	if (!rel || strncmp(rel, "data/", 5) != 0 || strchr(rel + 5, '/') || !rel[5] ||
	    rel[5] == '.')
		return NULL;
	return tfs_path_join(s->dir, rel);
}

const char *tfs_data_rel(const tfs_staging *s, const char *path)
{
	size_t n = strlen(s->data_dir);
	if (strncmp(path, s->data_dir, n) != 0 || path[n] != '/' || !path[n + 1] ||
	    strchr(path + n + 1, '/'))
		return NULL;
	return path + n - 4; /* "data/<n>" */
}

int tfs_data_sync(tfs_staging *s, const char *path, tfs_error *err)
{
	int rc = fsync_path(path, err);
	return rc ? rc : fsync_path(s->data_dir, err);
}

int tfs_staging_new_data(tfs_staging *s, char **path, tfs_error *err)
{
	char name[32];
	*path = NULL;
	for (;;) {
		snprintf(name, sizeof(name), "%llu", (unsigned long long)s->next_data++);
		char *p = tfs_path_join(s->data_dir, name);
		if (!p)
			return tfs_nomem(err);
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

/* ==== scratch files: bytes that are not a change yet ==== */

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
		return (*path = strdup(named)) ? 0 : tfs_nomem(err);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	for (;;) {
		char name[32];
		snprintf(name, sizeof(name), "%llu", (unsigned long long)s->next_data++);
		char *p = tfs_path_join(s->data_dir, name);
		if (!p)
			return tfs_nomem(err);
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
