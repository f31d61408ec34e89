/*
 * mounts.c - the mount table (/proc/self/mountinfo), the checks of a mount point, and
 * the processes using a mount.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Undoes mountinfo's escapes (space, tab, newline and backslash as \ooo), in place. */
static void unescape_octal(char *s)
{
	char *d = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* Whether path (absolute, resolved) is a mount point; out gets the newest mount there.
 * Read from mountinfo: a stat() of a mount point can hang on, or fail for, its daemon. */
bool tfsd_find_mount(const char *path, tfsd_mount_entry *out)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	if (!mi)
		return false;
	while (getline(&line, &cap, mi) > 0) {
		/* id parent maj:min root mountpoint options [optional...] - fstype source ... */
		unsigned a, b;
		int p0 = 0, p1 = 0, f0 = 0, f1 = 0, s0 = 0, s1 = 0;
		if (sscanf(line, "%*d %*d %u:%u %*s %n%*s%n", &a, &b, &p0, &p1) != 2 || !p1)
			continue;
		line[p1] = '\0';
		bool rw = strncmp(line + p1 + 1, "rw", 2) == 0;
		char *dash = strstr(line + p1 + 1, " - ");
		unescape_octal(line + p0);
		if (!dash || strcmp(line + p0, path) != 0)
			continue;
		dash += 3;
		sscanf(dash, "%n%*s%n %n%*s%n", &f0, &f1, &s0, &s1);
		if (!f1)
			continue;
		found = true;
		out->maj = a;
		out->min = b;
		out->rw = rw;
		snprintf(out->fstype, sizeof(out->fstype), "%.*s", f1 - f0, dash + f0);
		if (s1 > s0) {
			dash[s1] = '\0';
			unescape_octal(dash + s0);
			snprintf(out->source, sizeof(out->source), "%s", dash + s0);
		} else {
			out->source[0] = '\0';
		}
	}
	free(line);
	fclose(mi);
	return found;
}

/* The mount's request size: the kernel sends reads as large as the backing device's
 * readahead (default 128 KiB); 1 MiB doubles throughput (PERF_NOTES.md).  The device
 * number comes from mountinfo: a stat() of the mount point would wait for this very
 * daemon, which is not serving requests yet. */
void tfsd_set_readahead(const char *mountpoint, int kb)
{
	char path[128];
	tfsd_mount_entry me;
	if (kb <= 0 || !tfsd_find_mount(mountpoint, &me) || strcmp(me.fstype, "fuse.tensorfs") != 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", me.maj, me.min);
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", kb);
		fclose(f);
	}
}

/* Whether err is what a FUSE mount without its daemon answers: ENOTCONN once the kernel has
 * seen the daemon's /dev/fuse closed, ECONNABORTED for a request that was under way when it
 * was (seen in CI right after a SIGKILL). */
bool tfsd_dead_errno(int err)
{
	return err == ENOTCONN || err == ECONNABORTED;
}

/* Whether the FUSE mount at mp has lost its daemon.  statfs always asks the daemon (a
 * stat() may be answered from the kernel's cache). */
bool tfsd_dead_mount(const char *mp)
{
	struct statvfs sv;
	return statvfs(mp, &sv) < 0 && tfsd_dead_errno(errno);
}

/* Refuses a mount point that is not an empty directory of its own (a mount there would
 * hide what it holds), unless -o nonempty.  Prints why. */
int tfsd_check_mountpoint(const tfsd_opts *o, const char *prog)
{
	const char *mp = o->mountpoint;
	struct stat st;
	tfsd_mount_entry me;
	if (stat(mp, &st) < 0 || tfsd_dead_mount(mp)) {
		if (tfsd_dead_errno(errno))
			fprintf(stderr, "%s: %s: a dead mount is in the way (its daemon is gone); "
				"`tensorfs unmount %s` clears it\n", prog, mp, mp);
		else if (errno == ENOENT)
			fprintf(stderr, "%s: %s: mount point does not exist\n", prog, mp);
		else
			fprintf(stderr, "%s: %s: cannot use it as the mount point: %s\n", prog, mp,
				strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: %s: mount point is not a directory\n", prog, mp);
		return -1;
	}
	if (o->nonempty)
		return 0;
	if (tfsd_find_mount(mp, &me)) {
		fprintf(stderr, "%s: %s: already a mount point (%s %s): unmount it first, or add "
			"-o nonempty to mount over it\n", prog, mp, me.fstype, me.source);
		return -1;
	}
	DIR *d = opendir(mp);
	bool empty = true;
	if (d) {
		struct dirent *de;
		while (empty && (de = readdir(d)))
			empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
		closedir(d);
	}
	if (!empty) {
		fprintf(stderr, "%s: %s: mount point is not empty: use an empty directory, or add "
			"-o nonempty to mount over what it holds\n", prog, mp);
		return -1;
	}
	return 0;
}

/* The absolute path of a mount point, resolved without a stat() of the mount point
 * itself, which fails on a dead mount (its parent is resolved).  Allocated. */
char *tfsd_mount_path(const char *arg)
{
	char buf[PATH_MAX], *p = strdup(arg), *r = NULL;
	if (!p)
		return NULL;
	if (realpath(p, buf)) {
		free(p);
		return strdup(buf);
	}
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	char *slash = strrchr(p, '/');
	const char *dir = slash ? (slash == p ? "/" : p) : ".", *base = slash ? slash + 1 : p;
	if (slash && slash != p)
		*slash = '\0';
	if (realpath(dir, buf) && asprintf(&r, "%s%s%s", buf, strcmp(buf, "/") ? "/" : "", base) < 0)
		r = NULL;
	free(p);
	return r;
}

/* Whether path (a /proc link or a mapping's file) lies in dir. */
static bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1)
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool link_under(const char *link, const char *dir)
{
	char target[PATH_MAX];
	ssize_t k = readlink(link, target, sizeof(target) - 1);
	if (k <= 0)
		return false;
	target[k] = '\0';
	return path_under(target, dir);
}

/* Whether process pid (a /proc entry) uses something in dir: its working or root
 * directory, its executable, an open file or a mapped one (as fuser -m looks). */
static bool process_uses(const char *pid, const char *dir)
{
	static const char *const links[] = { "cwd", "root", "exe" };
	char p[PATH_MAX];
	bool used = false;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]) && !used; i++) {
		snprintf(p, sizeof(p), "/proc/%s/%s", pid, links[i]);
		used = link_under(p, dir);
	}
	snprintf(p, sizeof(p), "/proc/%s/fd", pid);
	DIR *d = used ? NULL : opendir(p);
	struct dirent *de;
	while (d && !used && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/fd/%s", pid, de->d_name);
		used = link_under(p, dir);
	}
	if (d)
		closedir(d);
	snprintf(p, sizeof(p), "/proc/%s/maps", pid);
	FILE *f = used ? NULL : fopen(p, "r");
	char *line = NULL;
	size_t cap = 0;
	while (f && !used && getline(&line, &cap, f) > 0) {
		char *file = strchr(line, '/'); /* the fields before the path hold no '/' */
		if (!file)
			continue;
		file[strcspn(file, "\n")] = '\0';
		used = path_under(file, dir);
	}
	free(line);
	if (f)
		fclose(f);
	return used;
}

/* "pid 123 (bash), pid 456 (sleep)": the processes using dir, as far as we can see
 * them; "" when none is seen. */
void tfsd_list_users(const char *dir, char *buf, size_t cap)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t len = 0;
	int n = 0, more = 0;
	buf[0] = '\0';
	while (d && (de = readdir(d))) {
		if (!de->d_name[0] || strspn(de->d_name, "0123456789") != strlen(de->d_name))
			continue;
		if (atoi(de->d_name) == (int)getpid() ||
		    !process_uses(de->d_name, dir))
			continue;
		if (n == 8) {
			more++;
			continue;
		}
		/* (d_name's size: gcc at -O1 sees no bound on its digits) */
		char path[sizeof("/proc//comm") + sizeof(de->d_name)], comm[64] = "?";
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		int k = snprintf(buf + len, cap - len, "%spid %s (%s)", n ? ", " : "", de->d_name,
				 comm);
		if (k > 0 && (size_t)k < cap - len)
			len += (size_t)k;
		n++;
	}
	if (d)
		closedir(d);
	if (more)
		snprintf(buf + len, cap - len, " and %d more", more);
}


