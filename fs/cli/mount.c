/*
 * mount.c - mounting, unmounting (waiting for the repack), info and repack.
 */
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* ==== options ==== */

static const char mount_usage[] =
	"usage: tensorfs mount SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
	"       mount.tensorfs SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
	"Mounts a model (a .gguf or .safetensors file, a sharded set's index or directory,\n"
	"an Ollama manifest or model name, an http(s):// URL of a GGUF or safetensors file\n"
	"or of an Ollama registry's manifest (or https://HOST/NS/MODEL:TAG), hf://ORG/REPO\n"
	"[/PATH][@REV]) on an empty directory; returns once it is ready.\n"
	"options: ro (default), rw (writable: the changes are repacked at unmount),\n"
	"         staging=DIR, output=PATH, verify, threads=N, readahead_kb=N,\n"
	"         imatrix=FILE (llama.cpp's importance matrix, to write IQ1/IQ2/IQ3 values),\n"
	"         nonempty (mount over a non-empty directory or another mount),\n"
	"         remote: connections=N, cache=DIR, cache_size=SIZE, token_file=FILE,\n"
	"         cafile=FILE, timeout=SECS\n"
	"         FUSE options (allow_other, ...),\n"
	"         -f (foreground: Ctrl-C unmounts), -d (debug), -s (single thread)\n";
static const char unmount_usage[] =
	"usage: tensorfs unmount [-l] MOUNTPOINT\n"
	"Unmounts a tensorfs mount and waits for its daemon: a rw mount's changes are\n"
	"repacked, with progress on stderr; exits 1 if that failed.  A dead mount (its\n"
	"daemon killed) is cleaned up.\n"
	"  -l  lazy: detach the mount now, even while it is in use; the daemon (and its\n"
	"      repack) finishes once the last process using it lets go\n";
static const char repack_usage[] =
	"usage: tensorfs repack SOURCE [-o staging=DIR,output=PATH]\n"
	"Writes the changes a rw mount of SOURCE staged but did not repack (its daemon was\n"
	"killed), as its unmount would have.  A remote SOURCE takes the mount's output= and\n"
	"its remote options (cache=, cafile=, token_file=, ...).\n";

/* What -h/--help prints: the usage of the command being parsed. */
static const char *usage_text = mount_usage;

#define OPT(t, p) { t, offsetof(tfsd_opts, p), 1 }
static const struct fuse_opt opt_spec[] = {
	OPT("rw", rw),
	OPT("writable", writable),
	{ "ro", offsetof(tfsd_opts, rw), 0 },
	OPT("staging=%s", staging),
	OPT("output=%s", output),
	OPT("verify", verify),
	OPT("threads=%d", threads),
	OPT("readahead_kb=%d", readahead_kb),
	OPT("connections=%d", connections),
	OPT("cache=%s", cache),
	OPT("cache_size=%s", cache_size),
	OPT("token_file=%s", token_file),
	OPT("cafile=%s", cafile),
	OPT("timeout=%d", timeout),
	OPT("imatrix=%s", imatrix),
	/* libfuse 2's option: libfuse 3 allows it always and rejects the word; we check */
	OPT("nonempty", nonempty),
	OPT("-f", foreground),
	OPT("-d", debug),
	OPT("debug", debug),
	OPT("-s", single),
	FUSE_OPT_KEY("-h", 'h'),
	FUSE_OPT_KEY("--help", 'h'),
	/* mount(8) passes these; they mean nothing here */
	FUSE_OPT_KEY("dev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nodev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("suid", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nosuid", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("exec", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noexec", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("atime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	tfsd_opts *o = data;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (!o->source)
			return (o->source = strdup(arg)) ? 0 : -1;
		if (!o->mountpoint)
			return (o->mountpoint = strdup(arg)) ? 0 : -1;
		fprintf(stderr, "tensorfs: unexpected argument '%s'\n%s", arg, usage_text);
		return -1;
	}
	if (key == 'h') {
		fputs(usage_text, stdout);
		exit(0);
	}
	return 1; /* keep for FUSE (allow_other, ...) */
}

static char *absolute(const char *p)
{
	char buf[PATH_MAX];
	if (!p)
		return NULL;
	if (realpath(p, buf))
		return strdup(buf);
	if (p[0] == '/' || !getcwd(buf, sizeof(buf)))
		return strdup(p);
	size_t n = strlen(buf);
	char *s = malloc(n + strlen(p) + 2);
	if (s)
		sprintf(s, "%s/%s", buf, p);
	return s;
}

static void free_opts(tfsd_opts *o)
{
	free(o->source);
	free(o->mountpoint);
	free(o->staging);
	free(o->output);
	free(o->cache);
	free(o->cache_size);
	free(o->token_file);
	free(o->cafile);
	free(o->imatrix);
}

/* s with ',' and '\' escaped by a '\', as fuse_opt reads an -o value.  Allocated. */
static char *opt_escape(const char *s)
{
	char *e = malloc(2 * strlen(s) + 1), *d = e;
	if (!e)
		return NULL;
	for (; *s; s++) {
		if (*s == ',' || *s == '\\')
			*d++ = '\\';
		*d++ = *s;
	}
	*d = '\0';
	return e;
}

/* ==== progress ==== */

/* Operations smaller than this are quick: they show no progress. */
#define PROGRESS_ABOVE (64ull << 20)

/*
 * Progress shown on a stream: on a terminal one line rewritten in place (\r) at most five
 * times a second; otherwise a plain line per 10% (at most one a second) or every 5 s.
 * Every line has the percentage, the rate and the time left; the last one the time taken.
 */
typedef struct {
	FILE *out;
	bool tty;
	bool open;           /* tty: a line without its newline is on screen */
	double last;         /* elapsed seconds at the last line */
	uint64_t last_done;
} progress_view;

static void view_init(progress_view *v, FILE *out)
{
	memset(v, 0, sizeof(*v));
	v->out = out;
	v->tty = isatty(fileno(out)) == 1;
}

/* Ends a progress line left open on a terminal, before other output. */
static void view_break(progress_view *v)
{
	if (v->open) {
		fputc('\n', v->out);
		v->open = false;
	}
}

static void format_secs(char *buf, size_t cap, double s)
{
	if (s < 10)
		snprintf(buf, cap, "%.1f s", s);
	else if (s < 100)
		snprintf(buf, cap, "%.0f s", s);
	else
		snprintf(buf, cap, "%d min %02d s", (int)(s / 60), (int)s % 60);
}

static void view_show(progress_view *v, const char *what, uint64_t done, uint64_t total,
		      double elapsed)
{
	bool end = done >= total;
	if (!end) {
		double since = elapsed - v->last;
		if (v->tty ? since < 0.2
			   : !(since >= 5 || (since >= 1 && done - v->last_done >= total / 10)))
			return;
	}
	v->last = elapsed;
	v->last_done = done;
	double rate = elapsed > 0 ? (double)done / 1e6 / elapsed : 0; /* MB/s */
	char line[512], t[32];
	int pct = total ? (int)(done * 100 / total) : 100;
	if (end) {
		format_secs(t, sizeof(t), elapsed);
		snprintf(line, sizeof(line), "tensorfs: %s: 100%% of %llu MiB in %s, %.0f MB/s", what,
			 (unsigned long long)(total >> 20), t, rate);
	} else {
		if (rate > 0)
			format_secs(t, sizeof(t), (double)(total - done) / 1e6 / rate);
		snprintf(line, sizeof(line), "tensorfs: %s: %d%% of %llu MiB, %.0f MB/s, %s left",
			 what, pct, (unsigned long long)(total >> 20), rate, rate > 0 ? t : "?");
	}
	if (v->tty) {
		/* \033[K clears what a longer line before left on the right */
		fprintf(v->out, "\r%s\033[K%s", line, end ? "\n" : "");
		v->open = !end;
	} else {
		fprintf(v->out, "%s\n", line);
	}
	fflush(v->out);
}

/* Where a daemon or a command reports a long operation: the terminal (stderr) and, for
 * a daemon, its status file, which `tensorfs unmount` reads and shows the same way. */
typedef struct {
	progress_view *view;    /* stderr, or NULL */
	FILE *status;           /* the status file, or NULL */
	struct timespec start;
	double last_record;     /* elapsed seconds at the last record in the status file */
	char what[128];         /* the operation being timed (each blob verified is one) */
} progress_sink;

static double seconds_since(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void sink_init(progress_sink *s, progress_view *view, FILE *status)
{
	memset(s, 0, sizeof(*s));
	s->view = view;
	s->status = status;
	clock_gettime(CLOCK_MONOTONIC, &s->start);
}

/* The progress callback of codec (tfs_progress_fn); ctx is a progress_sink. */
static void progress_report(void *ctx, const char *what, uint64_t done, uint64_t total)
{
	progress_sink *s = ctx;
	if (total < PROGRESS_ABOVE)
		return;
	if (strncmp(s->what, what, sizeof(s->what) - 1) != 0) {
		/* another operation: its own clock */
		if (s->what[0])
			clock_gettime(CLOCK_MONOTONIC, &s->start);
		snprintf(s->what, sizeof(s->what), "%s", what);
		s->last_record = 0;
		if (s->view) {
			view_break(s->view);
			s->view->last = 0;
			s->view->last_done = 0;
		}
	}
	double el = seconds_since(&s->start);
	if (s->view)
		view_show(s->view, what, done, total, el);
	/* "progress: WHAT: DONE TOTAL SECONDS" (see status_line) */
	if (s->status && (done >= total || el - s->last_record >= 0.2)) {
		s->last_record = el;
		fprintf(s->status, "progress: %s: %llu %llu %.3f\n", what, (unsigned long long)done,
			(unsigned long long)total, el);
		fflush(s->status);
	}
}

/* A line of the result, to stderr and the status file. */
__attribute__((format(printf, 2, 3)))
static void sink_printf(progress_sink *s, const char *fmt, ...)
{
	va_list ap;
	if (s->view)
		view_break(s->view);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	if (s->status) {
		va_start(ap, fmt);
		vfprintf(s->status, fmt, ap);
		va_end(ap);
		fflush(s->status);
	}
}

/* ==== mount table ==== */

typedef struct {
	unsigned maj, min;
	bool rw;                /* mounted read-write */
	char fstype[64];
	char source[PATH_MAX];
} mount_entry;

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
static bool find_mount(const char *path, mount_entry *out)
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
static void set_readahead(const char *mountpoint, int kb)
{
	char path[128];
	mount_entry me;
	if (kb <= 0 || !find_mount(mountpoint, &me) || strcmp(me.fstype, "fuse.tensorfs") != 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", me.maj, me.min);
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", kb);
		fclose(f);
	}
}

/* Whether the FUSE mount at mp has lost its daemon.  statfs always asks the daemon (a
 * stat() may be answered from the kernel's cache). */
static bool dead_mount(const char *mp)
{
	struct statvfs sv;
	return statvfs(mp, &sv) < 0 && errno == ENOTCONN;
}

/* Refuses a mount point that is not an empty directory of its own (a mount there would
 * hide what it holds), unless -o nonempty.  Prints why. */
static int check_mountpoint(const tfsd_opts *o, const char *prog)
{
	const char *mp = o->mountpoint;
	struct stat st;
	mount_entry me;
	if (stat(mp, &st) < 0 || dead_mount(mp)) {
		if (errno == ENOTCONN)
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
	if (find_mount(mp, &me)) {
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

/* ==== runtime files ==== */

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
static bool daemon_alive(pid_t pid)
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
	return daemon_alive(pid);
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
static void sweep_status_files(void)
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
static char *create_status_file(void)
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
static bool is_status_file_of(const char *path, pid_t pid)
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

/*
 * The default staging directory: beside the output file; for an Ollama model under the
 * store root, <root>/.tensorfs-staging/<host>/<ns>/<model>/<tag> (not inside manifests/,
 * where Ollama would take it for a model).  Allocated; parents created.
 */
static char *default_staging(const tfsd_fs *fs)
{
	const char *out = fs->opts.output && strchr(fs->opts.output, '/') ? fs->opts.output
									 : tfs_model_path(fs->model);
	if (tfs_model_format(fs->model) == TFS_FMT_OLLAMA) {
		const char *mp = tfs_model_path(fs->model), *m = NULL;
		for (const char *p = strstr(mp, "/manifests/"); p; p = strstr(p + 1, "/manifests/"))
			m = p;
		int slashes = 0;
		for (const char *p = m ? m + 11 : ""; *p; p++)
			slashes += *p == '/';
		char *s;
		if (m && slashes == 3 &&
		    asprintf(&s, "%.*s/.tensorfs-staging/%s", (int)(m - mp), mp, m + 11) >= 0) {
			if (make_parents(s) == 0)
				return s;
			free(s);
		}
	}
	return tfs_staging_default_dir(out);
}

/* SIZE with an optional K, M, G or T (powers of 1024); false when it is not one. */
static bool parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (end == s || errno || *end || s[0] == '-' || (shift && v > (UINT64_MAX >> shift)))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* The remote options into oo; the token file's first line into *token (allocated).
 * Prints errors. */
static int remote_opts(const tfsd_opts *o, tfs_open_opts *oo, char **token, const char *prog)
{
	oo->connections = o->connections;
	oo->cache_dir = o->cache;
	oo->cafile = o->cafile;
	oo->timeout = o->timeout;
	if (o->cache_size && !parse_size(o->cache_size, &oo->cache_size)) {
		fprintf(stderr, "%s: cache_size=%s is not a size (bytes, or with K, M, G, T)\n",
			prog, o->cache_size);
		return -1;
	}
	if (!o->token_file)
		return 0;
	FILE *f = fopen(o->token_file, "re");
	char line[4096];
	if (!f || !fgets(line, sizeof(line), f)) {
		fprintf(stderr, "%s: token_file %s: %s\n", prog, o->token_file,
			f ? "empty" : strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	*token = strdup(line);
	explicit_bzero(line, sizeof(line));
	oo->token = *token;
	return *token ? 0 : -1;
}

/* Opens the model (and, for rw, the staging directory, replaying it). Prints errors. */
/* Whether a SOURCE is read over the network (http://, https://, hf://). */
static bool is_remote(const char *source)
{
	return strncasecmp(source, "http://", 7) == 0 || strncasecmp(source, "https://", 8) == 0 ||
	       strncmp(source, "hf://", 5) == 0;
}

static int open_model(tfsd_fs *fs, const char *prog)
{
	tfs_error err;
	progress_view view;
	progress_sink sink;
	view_init(&view, stderr);
	sink_init(&sink, &view, NULL);
	tfs_open_opts oo = { .verify = fs->opts.verify, .progress = progress_report,
			     .progress_ctx = &sink };
	char *def = NULL, *token = NULL;
	const char *dir = fs->opts.staging;
	int rc;
	tfs_error_clear(&err);
	/* a repack cut short by a crash is finished (or undone) before the source is read:
	 * a sharded set or an Ollama model reads back consistently only after that */
	if (fs->opts.rw && dir && tfs_staging_recover(dir, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return -1;
	}
	if (remote_opts(&fs->opts, &oo, &token, prog))
		return -1;
	rc = tfs_model_open(&fs->model, fs->opts.source, &oo, &err);
	if (token) { /* libcurl has its copy; none is kept here */
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (rc) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return -1;
	}
	if (fs->opts.imatrix && !*fs->opts.imatrix) {
		fprintf(stderr, "%s: -o imatrix= needs a file name\n", prog);
		return -1;
	}
	if (fs->opts.imatrix && tfs_imatrix_open(&fs->imatrix, fs->opts.imatrix, &err)) {
		fprintf(stderr, "%s: -o imatrix: %s\n", prog, err.msg);
		return -1;
	}
	if (!fs->opts.rw)
		return 0;
	bool fetched = false; /* (an Ollama name with a scheme may be a model of the store) */
	for (size_t i = 0; i < tfs_model_n_sources(fs->model); i++)
		fetched |= tfs_model_source(fs->model, i)->remote != NULL;
	if (fetched && tfs_model_format(fs->model) == TFS_FMT_OLLAMA) {
		fprintf(stderr, "%s: %s: a model of an Ollama registry mounts read-only (tensorfs "
			"writes Ollama models into a local store): pull it with ollama and mount "
			"its name with -o rw\n", prog, fs->opts.source);
		return -1;
	}
	if (!dir) {
		/* the default directory depends on the resolved source: recover, then read it
		 * again if there was anything to recover from */
		struct stat st;
		if (!(dir = def = default_staging(fs))) {
			fprintf(stderr, "%s: out of memory\n", prog);
			return -1;
		}
		if (stat(dir, &st) == 0) {
			if (tfs_staging_recover(dir, &err)) {
				fprintf(stderr, "%s: %s\n", prog, err.msg);
				free(def);
				return -1;
			}
			tfs_model_free(fs->model);
			fs->model = NULL;
			if (tfs_model_open(&fs->model, fs->opts.source, &oo, &err)) {
				fprintf(stderr, "%s: %s\n", prog, err.msg);
				free(def);
				return -1;
			}
		}
	}
	rc = tfs_staging_open(&fs->staging, dir, fs->model, fs->opts.output, &err);
	if (!rc)
		rc = tfs_staging_replay(fs->staging, fs->model, &err);
	free(def);
	if (rc) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return -1;
	}
	return 0;
}

/* Frees the staging handle; a staging directory tensorfs chose itself goes away once
 * it holds nothing (repacked, or never changed); one the user named stays. */
static void release_staging(tfsd_fs *fs)
{
	if (fs->staging && !fs->opts.staging && tfs_staging_remove(fs->staging) == 0 &&
	    tfs_model_format(fs->model) == TFS_FMT_OLLAMA) {
		/* and the empty <root>/.tensorfs-staging/<host>/<ns>/<model> above it */
		char *d = strdup(tfs_staging_dir(fs->staging));
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
	tfs_staging_free(fs->staging);
	fs->staging = NULL;
}

static void close_model(tfsd_fs *fs)
{
	release_staging(fs);
	tfs_model_free(fs->model);
	fs->model = NULL;
	tfs_imatrix_free(fs->imatrix);
	fs->imatrix = NULL;
}

/* After the loop: repack a writable mount's changes, with progress and the result on
 * stderr and in the status file (which `tensorfs unmount` follows).  0, or 1 when the
 * repack failed. */
static int repack_at_unmount(tfsd_fs *fs)
{
	if (!fs->staging || !tfs_staging_dirty(fs->staging)) {
		/* the end, for `tensorfs unmount`: a status file without it means the daemon
		 * died before its repack was done */
		FILE *st = fs->status_path ? fopen(fs->status_path, "a") : NULL;
		if (st) {
			fputs("done: nothing changed\n", st);
			fclose(st);
		}
		return 0;
	}
	const char *out = fs->opts.output ? fs->opts.output : tfs_model_path(fs->model);
	FILE *st = fs->status_path ? fopen(fs->status_path, "a") : NULL;
	progress_view view;
	progress_sink sink;
	view_init(&view, stderr);
	sink_init(&sink, &view, st);
	sink_printf(&sink, "tensorfs: repacking %s\n", out);
	tfs_write_opts wo = { .progress = progress_report, .progress_ctx = &sink,
			      .output = fs->opts.output };
	tfs_error err;
	tfs_error_clear(&err);
	int rc = tfs_staging_repack(fs->staging, fs->model, &wo, &err);
	if (rc)
		sink_printf(&sink, "error: %s (the source is untouched; the changes stay in %s)\n",
			    err.msg, tfs_staging_dir(fs->staging));
	else
		sink_printf(&sink, "done: wrote %s\n", out);
	if (st)
		fclose(st);
	return rc ? 1 : 0;
}

/* The daemon runs from /: every path is made absolute first; an Ollama model name stays
 * as it is.  -1: out of memory. */
static int absolute_paths(tfsd_opts *o)
{
	char **paths[] = { &o->source, &o->mountpoint, &o->staging, &o->output, &o->cache,
			   &o->token_file, &o->cafile, &o->imatrix };
	bool remote = o->source && is_remote(o->source);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char *p = *paths[i];
		/* output=name is an Ollama tag, unless the source is remote (a local file then) */
		if (!p || (i == 0 && access(p, F_OK) != 0) || (i == 3 && !strchr(p, '/') && !remote) ||
		    (i == 7 && !*p))   /* imatrix=: no file, said so at open */
			continue;
		char *a = absolute(p);
		free(p);
		*paths[i] = a;
		if (!a)
			return -1;
	}
	return 0;
}

/* mount(8), findmnt and df show the model as the mount's source.  -1: out of memory. */
static int add_fsname(const tfsd_opts *o, struct fuse_args *args)
{
	char *fsname = opt_escape(o->source), *mount_opts = NULL;
	int rc = !fsname || asprintf(&mount_opts, "fsname=%s,subtype=tensorfs,%s", fsname,
				     o->rw ? "rw" : "ro") < 0 ? -1 : 0;
	free(fsname);
	if (!rc && (fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, mount_opts)))
		rc = -1;
	free(mount_opts);
	return rc;
}

/* Serves requests until the mount ends; returns what the session loop returned. */
static int serve(tfsd_fs *fs, struct fuse_session *se)
{
	if (fs->opts.single)
		return fuse_session_loop(se);
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	fuse_loop_cfg_set_max_threads(cfg, fs->opts.threads > 0 ? (unsigned)fs->opts.threads : 4);
	int rc = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

/* After the session loop: unmount, repack, and the exit status (0 or 1). */
static int finish(tfsd_fs *fs, struct fuse_session *se, int loop_rc)
{
	/* the loop returns the number of the signal that ended it (Ctrl-C on a foreground
	 * mount, a SIGTERM): that ends the mount as an unmount does */
	bool signalled = loop_rc == SIGINT || loop_rc == SIGTERM || loop_rc == SIGHUP;
	fuse_session_unmount(se);
	/* from here a second Ctrl-C stops the repack as a kill would: the source stays whole
	 * and the changes staged; a terminal that closes does not */
	fuse_remove_signal_handlers(se);
	signal(SIGHUP, SIG_IGN);
	bool repacking = fs->staging && tfs_staging_dirty(fs->staging);
	int ret = (loop_rc != 0 && !signalled) | repack_at_unmount(fs);
	/* `tensorfs unmount` holds the status file open: it reads the rest from there */
	if (fs->status_path)
		unlink(fs->status_path);
	if (repacking && ret == 0) {
		/*
		 * The new file is durable and in place.  Freeing the replaced one happens when
		 * our descriptor of it closes, and can take as long as the copy did (ext4 mounted
		 * with discard trims every block synchronously: 0.5-0.7 s for 1.1 GB, measured).
		 * A detached child does that close, so `tensorfs unmount` returns now.
		 */
		release_staging(fs);
		pid_t c = fork();
		if (c == 0) {
			close_model(fs);
			_exit(0);
		}
		if (c > 0)
			_exit(0); /* the child holds the model; nothing else is left to do */
	}
	return ret;
}

/* Parses the command line into fs->opts and checks it: 0, or the exit status (2 for a
 * usage error) after saying why. */
static int mount_args(tfsd_fs *fs, struct fuse_args *args, bool by_mount8, const char *prog)
{
	if (fuse_opt_parse(args, &fs->opts, opt_spec, opt_proc) == -1)
		return 2;
	if (!fs->opts.source || !fs->opts.mountpoint) {
		fputs(mount_usage, stderr);
		return 2;
	}
	/* mount(8) says "rw" by default: a model becomes writable only when asked plainly */
	if (by_mount8)
		fs->opts.rw = fs->opts.writable;
	else
		fs->opts.rw |= fs->opts.writable;
	if (absolute_paths(&fs->opts)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	const tfsd_opts *o = &fs->opts;
	const char *neg = o->threads < 0 ? "threads" : o->readahead_kb < 0 ? "readahead_kb"
			  : o->connections < 0 ? "connections" : o->timeout < 0 ? "timeout" : NULL;
	if (neg) {
		fprintf(stderr, "%s: -o %s= takes a number of 0 or more\n", prog, neg);
		return 2;
	}
	if (o->output && !o->rw) {
		fprintf(stderr, "%s: -o output=%s is where a repack writes: it needs -o rw%s\n",
			prog, o->output, by_mount8 ? " (under mount(8): -o writable)" : "");
		return 2;
	}
	/* (a registry's Ollama model is refused rw once opened, with its own reason) */
	if (fs->opts.rw && is_remote(fs->opts.source) && !fs->opts.output &&
	    !tfs_is_registry_source(fs->opts.source)) {
		fprintf(stderr, "%s: %s: a remote model is written to a local file: -o rw needs "
			"-o output=PATH\n", prog, fs->opts.source);
		return 2;
	}
	return check_mountpoint(&fs->opts, prog) ? 1 : 0;
}

/* The tree of the opened model, and what every node's attributes share. */
static int build_tree(tfsd_fs *fs, const char *prog)
{
	tfs_error err;
	tfs_error_clear(&err);
	if (tfsd_tree_build(fs, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return 1;
	}
	const tfs_source *s0 = tfs_model_source(fs->model, 0);
	if (s0) {
		fs->mtime.tv_sec = s0->mtime_sec;
		fs->mtime.tv_nsec = s0->mtime_nsec;
	}
	fs->uid = getuid();
	fs->gid = getgid();
	/* a read-only model never changes: the kernel may cache everything for long */
	fs->timeout = fs->opts.rw ? 0.0 : 86400.0;
	return 0;
}

int tfsd_mount_main(int argc, char **argv, bool by_mount8)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	tfsd_fs fs;
	struct fuse_session *se = NULL;
	int ret;
	bool handlers = false;
	const char *prog = "mount.tensorfs";

	memset(&fs, 0, sizeof(fs));
	fs.opts.readahead_kb = 512; /* a request that fits a pipe: see read_mode in ops.c */
	pthread_rwlock_init(&fs.lock, NULL);
	pthread_mutex_init(&fs.cache_lock, NULL);
	usage_text = mount_usage;
	if ((ret = mount_args(&fs, &args, by_mount8, prog)))
		goto out_args;
	ret = 1;
	sweep_status_files();
	if (open_model(&fs, prog)) {
		/* what it opened before failing goes, the staging directory stays as it is */
		tfs_staging_free(fs.staging);
		tfs_model_free(fs.model);
		tfs_imatrix_free(fs.imatrix);
		goto out_args;
	}
	if (build_tree(&fs, prog))
		goto out_model;

	if (add_fsname(&fs.opts, &args)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out_tree;
	}
	se = fuse_session_new(&args, &tfsd_ops, sizeof(tfsd_ops), &fs);
	if (!se) {
		ret = 2; /* libfuse said why: an option it does not know */
		goto out_tree;
	}
	fs.se = se;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	handlers = true;
	if (fuse_session_mount(se, fs.opts.mountpoint) != 0) {
		fprintf(stderr, "%s: cannot mount on %s\n", prog, fs.opts.mountpoint);
		goto out_signals;
	}
	set_readahead(fs.opts.mountpoint, fs.opts.readahead_kb);
	/* returns in the parent once the mount is ready */
	fuse_daemonize(fs.opts.foreground);
	if (fs.opts.rw)
		fs.status_path = create_status_file();

	ret = finish(&fs, se, serve(&fs, se));
	handlers = false;
out_signals:
	if (handlers)
		fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_tree:
	tfsd_tree_free(&fs);
out_model:
	close_model(&fs);
out_args:
	free(fs.status_path);
	free_opts(&fs.opts);
	fuse_opt_free_args(&args);
	return ret;
}

/* ==== unmount: wait for the daemon and its repack ==== */

static int get_xattr(const char *path, const char *name, char *buf, size_t cap)
{
	ssize_t n = getxattr(path, name, buf, cap - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* Follows a daemon's status file: shows what it gains, and remembers the result. */
typedef struct {
	int fd;
	char buf[8192];
	size_t len;
	progress_view view;
	bool started;  /* "tensorfs: repacking ..." */
	bool done;     /* "done: ..." */
	bool failed;   /* "error: ..." */
} status_reader;

static void status_line(status_reader *r, char *line)
{
	if (strncmp(line, "progress: ", 10) == 0) {
		/* "progress: WHAT: DONE TOTAL SECONDS" */
		char *colon = strrchr(line + 10, ':');
		unsigned long long done, total;
		double el;
		if (colon && sscanf(colon + 1, "%llu %llu %lf", &done, &total, &el) == 3) {
			*colon = '\0';
			view_show(&r->view, line + 10, done, total, el);
			return;
		}
	}
	view_break(&r->view);
	fprintf(stderr, "%s\n", line);
	if (strncmp(line, "error:", 6) == 0)
		r->failed = true;
	else if (strncmp(line, "done:", 5) == 0)
		r->done = true;
	else if (strncmp(line, "tensorfs: repacking", 19) == 0)
		r->started = true;
}

/* Shows the complete lines the file gained (at the end: what is left too). */
static void status_read(status_reader *r, bool final)
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

/* The absolute path of a mount point, resolved without a stat() of the mount point
 * itself, which fails on a dead mount (its parent is resolved).  Allocated. */
static char *mount_path(const char *arg)
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
static void list_users(const char *dir, char *buf, size_t cap)
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
		char path[64], comm[64] = "?";
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

/* Unmounts mp (detached at once when lazy): 0, an errno, or -1 when fusermount3 failed
 * and said why.  Root unmounts directly, others through fusermount3. */
static int unmount_fs(const char *mp, bool lazy)
{
	if (geteuid() == 0)
		return umount2(mp, lazy ? MNT_DETACH : 0) == 0 ? 0 : errno;
	int pfd[2];
	char msg[1024];
	size_t len = 0;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return errno;
	pid_t c = fork();
	if (c == 0) {
		dup2(pfd[1], 2);
		execlp("fusermount3", "fusermount3", lazy ? "-uz" : "-u", "--", mp, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	ssize_t k;
	while (c > 0 && (k = read(pfd[0], msg + len, sizeof(msg) - 1 - len)) > 0)
		len += (size_t)k;
	close(pfd[0]);
	msg[len] = '\0';
	int ws;
	if (c < 0 || waitpid(c, &ws, 0) < 0)
		return ECHILD;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return 0;
	if (strstr(msg, "busy"))
		return EBUSY;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
		fprintf(stderr, "tensorfs: cannot run fusermount3 (is the fuse3 package installed?)\n");
	else
		fputs(msg, stderr);
	return -1;
}

/* Parses `tensorfs unmount [-l] MOUNTPOINT`; -1 to go on, else the exit status. */
static int unmount_args(int argc, char **argv, bool *lazy, const char **arg)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(unmount_usage, stdout);
			return 0;
		}
		if (!strcmp(a, "-l") || !strcmp(a, "--lazy")) {
			*lazy = true;
		} else if (!strcmp(a, "--") && i + 1 < argc && !*arg) {
			*arg = argv[++i];
		} else if (a[0] == '-' || *arg) {
			fprintf(stderr, "tensorfs unmount: unexpected argument '%s'\n%s", a,
				unmount_usage);
			return 2;
		} else {
			*arg = a;
		}
	}
	if (!*arg) {
		fputs(unmount_usage, stderr);
		return 2;
	}
	return -1;
}

/* The daemon is gone (killed): only the kernel's mount is left to remove.  Exit status. */
static int unmount_dead(const char *mp, const char *arg, const mount_entry *me)
{
	int e = unmount_fs(mp, true);
	if (e == 0) {
		fprintf(stderr, "tensorfs: %s: the mount was dead (its daemon had exited); "
			"removed it%s%s%s\n", arg,
			me->rw ? "; changes it staged but did not repack are kept: "
				 "`tensorfs repack " : "", me->rw ? me->source : "",
			me->rw ? "` writes them (with the -o staging= and output= the mount had, "
				 "if it had any)" : "");
		sweep_status_files();
		return 0;
	}
	if (e > 0)
		fprintf(stderr, "tensorfs: %s: the mount is dead (its daemon has exited), and "
			"removing it failed: %s\n", arg, strerror(e));
	return 1;
}

/* Waits for the daemon pid to exit, showing its progress (the status file) every 50 ms.
 * A pidfd wakes us the moment it exits (a repack that shares extents takes tens of ms);
 * where there is none (kernel < 5.3), polls. */
static void wait_daemon(status_reader *rs, pid_t pid)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
#ifdef SYS_pidfd_open
	int pfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
#else
	int pfd = -1;
#endif
	while (pid > 0 && daemon_alive(pid)) {
		if (rs->fd >= 0)
			status_read(rs, false);
		if (pfd >= 0) {
			struct pollfd p = { .fd = pfd, .events = POLLIN };
			if (poll(&p, 1, 50) > 0)
				break;
		} else {
			nanosleep(&ts, NULL);
		}
	}
	if (pfd >= 0)
		close(pfd);
}

/* The daemon repacks after the unmount: follows it (its status file) until it exits.
 * Exit status: 1 when the repack failed, the daemon died before it was done, or (rw) it
 * could not be followed at all. */
static int follow_daemon(status_reader *rs, pid_t pid, const char *status, bool rw)
{
	int ret = 0;
	wait_daemon(rs, pid);
	if (rs->fd < 0 && rw) {
		/* a writable mount whose daemon did not answer (it died as it was asked): what
		 * happened to its changes cannot be told from here */
		fprintf(stderr, "tensorfs: the daemon of this writable mount could not be followed "
			"(it exited as it was asked); changes it had not repacked stay staged: "
			"`tensorfs repack` on the source writes them\n");
		return 1;
	}
	if (rs->fd < 0)
		return 0;
	status_read(rs, true);
	view_break(&rs->view);
	if (!rs->done && !rs->failed) {
		/* killed, or crashed, before or during the repack: the commit protocol left the
		 * source whole or replaced, and the changes staged until it is done */
		fprintf(stderr, "tensorfs: the daemon (pid %d) exited before %s; the changes stay "
			"staged: run `tensorfs repack` on the source, or mount it again\n", (int)pid,
			rs->started ? "the repack finished" : "it repacked the changes");
		ret = 1;
	}
	if (rs->failed)
		ret = 1;
	/* a daemon that was killed could not remove it */
	if (is_status_file_of(status, pid))
		unlink(status);
	return ret;
}

/* Unmounts mp (lazily: detaches it); 0, or 1 after saying why not (users: who holds it,
 * filled in for EBUSY). */
static int unmount_now(const char *mp, const char *arg, bool lazy, char *users, size_t cap)
{
	int e = unmount_fs(mp, lazy);
	if (e == EBUSY) {
		list_users(mp, users, cap);
		fprintf(stderr, "tensorfs: cannot unmount %s: it is in use%s%s; end those, or "
			"detach it now with `tensorfs unmount -l %s`\n", arg,
			users[0] ? " by " : " (by processes not visible here)", users, arg);
		return 1;
	}
	if (e == EPERM) {
		fprintf(stderr, "tensorfs: cannot unmount %s: only root or the user who mounted "
			"it can\n", arg);
		return 1;
	}
	if (e > 0)
		fprintf(stderr, "tensorfs: cannot unmount %s: %s\n", arg, strerror(e));
	return e ? 1 : 0;
}

int tfsd_unmount_main(int argc, char **argv)
{
	bool lazy = false;
	const char *arg = NULL;
	int usage_rc = unmount_args(argc, argv, &lazy, &arg);
	if (usage_rc >= 0)
		return usage_rc;
	char *mp = mount_path(arg);
	if (!mp) {
		fprintf(stderr, "tensorfs: %s: no such directory\n", arg);
		return 1;
	}
	int ret = 1;
	mount_entry me;
	struct stat st;
	int stat_errno = stat(mp, &st) < 0 ? errno : 0;
	if (!find_mount(mp, &me)) {
		fprintf(stderr, "tensorfs: %s: %s\n", arg,
			stat_errno == ENOENT ? "no such directory" : "not mounted (not a mount point)");
		goto out;
	}
	if (strcmp(me.fstype, "fuse.tensorfs") != 0) {
		fprintf(stderr, "tensorfs: %s: not a tensorfs mount (it is a %s mount of %s)\n", arg,
			me.fstype, me.source);
		goto out;
	}
	if (stat_errno == ENOTCONN || dead_mount(mp)) {
		ret = unmount_dead(mp, arg, &me);
		goto out;
	}
	char pid_s[32], status[PATH_MAX] = "";
	pid_t pid = 0;
	if (get_xattr(mp, "user.tensorfs.pid", pid_s, sizeof(pid_s)) == 0)
		pid = (pid_t)atoi(pid_s);
	if (pid > 0)
		get_xattr(mp, "user.tensorfs.status", status, sizeof(status));
	/* opened before the unmount: the daemon removes it when it exits */
	status_reader *rs = calloc(1, sizeof(*rs));
	if (!rs) {
		fprintf(stderr, "tensorfs: out of memory\n");
		goto out;
	}
	rs->fd = status[0] && is_status_file_of(status, pid)
			 ? open(status, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
	view_init(&rs->view, stderr);

	char users[1024] = "";
	if (lazy)
		list_users(mp, users, sizeof(users));
	if ((ret = unmount_now(mp, arg, lazy, users, sizeof(users))) != 0)
		goto out_status;
	if (lazy && users[0]) {
		/* the daemon ends when they let go, which may take long: not waited for */
		fprintf(stderr, "tensorfs: detached %s; it stays in use by %s, and its daemon "
			"(pid %d) ends%s once they let go\n", arg, users, (int)pid,
			status[0] ? ", repacking the changes," : "");
		goto out_status;
	}
	ret = follow_daemon(rs, pid, status, me.rw);
out_status:
	if (rs->fd >= 0)
		close(rs->fd);
	free(rs);
out:
	free(mp);
	return ret;
}

/* ==== repack ==== */

int tfsd_repack_main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	tfsd_fs fs;
	memset(&fs, 0, sizeof(fs));
	int ret = 1;
	usage_text = repack_usage;
	if (fuse_opt_parse(&args, &fs.opts, opt_spec, opt_proc) == -1) {
		ret = 2;
		goto out;
	}
	if (!fs.opts.source || fs.opts.mountpoint) {
		if (fs.opts.mountpoint)
			fprintf(stderr, "tensorfs repack: unexpected argument '%s'\n",
				fs.opts.mountpoint);
		fputs(repack_usage, stderr);
		ret = 2;
		goto out;
	}
	fs.opts.rw = 1;
	if (is_remote(fs.opts.source) && !fs.opts.output) {
		fprintf(stderr, "tensorfs repack: %s: a remote model was staged for a local file: "
			"give the mount's -o output=PATH\n", fs.opts.source);
		ret = 2;
		goto out;
	}
	if (open_model(&fs, "tensorfs repack"))
		goto out;
	if (!tfs_staging_dirty(fs.staging)) {
		fprintf(stderr, "tensorfs repack: nothing staged in %s (a mount with -o staging=DIR "
			"staged its changes in DIR: give the same -o staging=)\n",
			tfs_staging_dir(fs.staging));
		ret = 0;
	} else {
		ret = repack_at_unmount(&fs);
	}
	close_model(&fs);
out:
	free_opts(&fs.opts);
	fuse_opt_free_args(&args);
	return ret;
}
