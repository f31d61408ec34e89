/*
 * status.c - the status file of a rw mount's daemon: where it is, who may read or remove
 * it, and reading it (`tensorfs unmount` shows it as the daemon writes it).
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== where status files are ==== */

/*
 * A rw mount's daemon reports its repack in <dir>/<pid>.status, which `tensorfs unmount`
 * follows; the daemon removes it when it exits, the next mount those of killed daemons.
 * <dir> is $XDG_RUNTIME_DIR/tensorfs, else /run/tensorfs for root, else (or when that
 * cannot be made) /tmp/tensorfs-<uid>: a directory of the user's own, mode 0700.
 */
static int runtime_dirs(char *dirs[3])
{
	int n = 0;
	const char *x = getenv("XDG_RUNTIME_DIR");
	if (x && x[0] == '/' && asprintf(&dirs[n], "%s/tensorfs", x) >= 0)
		n++;
	if (geteuid() == 0 && (dirs[n] = strdup("/run/tensorfs")))
		n++;
	if (asprintf(&dirs[n], "/tmp/tensorfs-%u", (unsigned)geteuid()) >= 0)
		n++;
	return n;
}

/* Whether dir is a directory of this user's, mode 0700 (made so when create). */
static bool private_dir(const char *dir, bool create)
{
	struct stat st;
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
		return false;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return false;
	if ((st.st_mode & 07777) != 0700 && (!create || chmod(dir, 0700) < 0))
		return false;
	return !create || access(dir, W_OK | X_OK) == 0;
}

/* Whether a process still runs (an exited zombie counts as gone: a daemonized process's
 * parent is init, or a subreaper, that may be slow to reap it). */
bool tfsd_daemon_alive(pid_t pid)
{
	char path[64], buf[512];
	if (kill(pid, 0) < 0 && errno != EPERM)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* Whether pid is a running tensorfs (the pid of a status file may have been reused). */
static bool tensorfs_alive(pid_t pid)
{
	char path[64], comm[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return errno != ENOENT;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	if (!strstr(comm, "tensorfs") && strncmp(comm, "mount.fuse", 10) != 0)
		return false;
	return tfsd_daemon_alive(pid);
}

/* The pid of a status file's name ("<pid>.status"), or 0. */
static pid_t status_file_pid(const char *name)
{
	char *end;
	long pid = strtol(name, &end, 10);
	if (end == name || strcmp(end, ".status") != 0 || pid <= 0 || pid > INT_MAX)
		return 0;
	return (pid_t)pid;
}

/* Removes the status files of daemons that are gone (killed before they could). */
void tfsd_sweep_status_files(void)
{
	char *dirs[3];
	int n = runtime_dirs(dirs);
	for (int i = 0; i < n; i++) {
		DIR *d = private_dir(dirs[i], false) ? opendir(dirs[i]) : NULL;
		struct dirent *de;
		while (d && (de = readdir(d))) {
			pid_t pid = status_file_pid(de->d_name);
			if (pid && !tensorfs_alive(pid))
				unlinkat(dirfd(d), de->d_name, 0);
		}
		if (d)
			closedir(d);
		free(dirs[i]);
	}
}

/* Creates this process's status file; its path (allocated), or NULL. */
char *tfsd_create_status_file(void)
{
	char *dirs[3], *path = NULL;
	int n = runtime_dirs(dirs);
	for (int i = 0; i < n; i++) {
		if (!path && private_dir(dirs[i], true) &&
		    asprintf(&path, "%s/%d.status", dirs[i], (int)getpid()) >= 0) {
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (fd >= 0) {
				close(fd);
			} else {
				free(path);
				path = NULL;
			}
		}
		free(dirs[i]);
	}
	return path;
}

/* Whether path is daemon pid's status file, in a private directory of ours: only then is
 * it read (a FUSE daemon names it, and a FIFO would block) or removed. */
bool tfsd_is_status_file_of(const char *path, pid_t pid)
{
	char want[32];
	struct stat st;
	snprintf(want, sizeof(want), "/%d.status", (int)pid);
	size_t n = strlen(path), k = strlen(want);
	if (path[0] != '/' || n <= k || strcmp(path + n - k, want) != 0)
		return false;
	char *dir = strndup(path, n - k);
	bool ok = dir && dir[0] && private_dir(dir, false);
	free(dir);
	return ok && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

/* ==== reading one ==== */

/* One line of a status file, shown; the result remembered. */
static void status_line(tfsd_status_reader *r, char *line)
{
	if (strncmp(line, "progress: ", 10) == 0) {
		/* "progress: WHAT: DONE TOTAL SECONDS" */
		char *colon = strrchr(line + 10, ':');
		unsigned long long done, total;
		double el;
		if (colon && sscanf(colon + 1, "%llu %llu %lf", &done, &total, &el) == 3) {
			*colon = '\0';
			tfsd_view_show(&r->view, line + 10, done, total, el);
			return;
		}
	}
	int pid;
	if (sscanf(line, "finishing: %d", &pid) == 1 && pid > 0) {
		r->finisher = (pid_t)pid;
		return;
	}
	tfsd_view_break(&r->view);
	if (strncmp(line, "done:", 5) == 0) {
		/* (shown by `tensorfs unmount` once the daemon has exited) */
		r->done = true;
		snprintf(r->done_line, sizeof(r->done_line), "%s", line);
		return;
	}
	fprintf(stderr, "%s\n", line);
	if (strncmp(line, "error:", 6) == 0)
		r->failed = true;
	else if (strncmp(line, "tensorfs: repacking", 19) == 0)
		r->started = true;
}

/* Shows the complete lines the file gained (at the end: what is left too). */
void tfsd_status_read(tfsd_status_reader *r, bool final)
{
	ssize_t k;
	do {
		k = read(r->fd, r->buf + r->len, sizeof(r->buf) - 1 - r->len);
		if (k > 0)
			r->len += (size_t)k;
		char *s = r->buf, *nl;
		while ((nl = memchr(s, '\n', (size_t)(r->buf + r->len - s)))) {
			*nl = '\0';
			status_line(r, s);
			s = nl + 1;
		}
		r->len -= (size_t)(s - r->buf);
		memmove(r->buf, s, r->len);
		if (r->len == sizeof(r->buf) - 1 || (final && k <= 0 && r->len)) {
			r->buf[r->len] = '\0';
			status_line(r, r->buf);
			r->len = 0;
		}
	} while (k > 0);
	fflush(stderr);
}

