/*
 * mount.c - mounting, unmounting (waiting for the repack), info and repack.
 */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* ==== options ==== */

#define OPT(t, p) { t, offsetof(tfs_opts, p), 1 }
static const struct fuse_opt opt_spec[] = {
	OPT("rw", rw),
	OPT("writable", writable),
	{ "ro", offsetof(tfs_opts, rw), 0 },
	OPT("staging=%s", staging),
	OPT("output=%s", output),
	OPT("verify", verify),
	OPT("threads=%d", threads),
	OPT("readahead_kb=%d", readahead_kb),
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
	tfs_opts *o = data;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (!o->source)
			return (o->source = strdup(arg)) ? 0 : -1;
		if (!o->mountpoint)
			return (o->mountpoint = strdup(arg)) ? 0 : -1;
		fprintf(stderr, "tensorfs: unexpected argument '%s'\n", arg);
		return -1;
	}
	if (key == 'h') {
		printf("usage: mount.tensorfs SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
		       "options: ro (default), rw, staging=DIR, output=PATH, verify, threads=N,\n"
		       "         readahead_kb=N, -f (foreground), -d (debug), -s (single thread)\n");
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

static void free_opts(tfs_opts *o)
{
	free(o->source);
	free(o->mountpoint);
	free(o->staging);
	free(o->output);
}

/* Progress of long operations: at most a line a second, and only for big ones. */
static void progress_stderr(void *ctx, const char *what, uint64_t done, uint64_t total)
{
	static struct timespec last;
	struct timespec now;
	FILE *f = ctx ? ctx : stderr;
	if (total < (64u << 20))
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (done < total && now.tv_sec - last.tv_sec < 1)
		return;
	last = now;
	fprintf(f, "tensorfs: %s: %llu / %llu MiB (%d%%)\n", what,
		(unsigned long long)(done >> 20), (unsigned long long)(total >> 20),
		total ? (int)(done * 100 / total) : 100);
	fflush(f);
}

/* The mount's request size: the kernel sends reads as large as the backing device's
 * readahead (default 128 KiB); 1 MiB doubles throughput (PERF_NOTES.md).  The device
 * number comes from mountinfo: a stat() of the mount point would wait for this very
 * daemon, which is not serving requests yet. */
static void set_readahead(const char *mountpoint, int kb)
{
	char line[8192], path[128];
	unsigned maj = 0, min = 0;
	bool found = false;
	if (kb <= 0)
		return;
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	if (!mi)
		return;
	while (fgets(line, sizeof(line), mi)) {
		/* id parent maj:min root mountpoint options ... - fstype source ... */
		char mp[4096], fstype[64];
		unsigned a, b;
		if (sscanf(line, "%*d %*d %u:%u %*s %4095s", &a, &b, mp) != 3)
			continue;
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(dash + 3, "%63s", fstype) != 1 || strcmp(fstype, "fuse.tensorfs"))
			continue;
		/* mountinfo escapes space, tab, newline and backslash as \ooo */
		char un[4096];
		size_t k = 0;
		for (const char *p = mp; *p && k < sizeof(un) - 1; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
				un[k++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else {
				un[k++] = *p;
			}
		}
		un[k] = '\0';
		if (strcmp(un, mountpoint) == 0) {
			maj = a, min = b, found = true; /* the last one is the newest */
		}
	}
	fclose(mi);
	if (!found)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", kb);
		fclose(f);
	}
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
static char *default_staging(const tfs_fs *fs)
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

/* Opens the model (and, for rw, the staging directory, replaying it). Prints errors. */
static int open_model(tfs_fs *fs, const char *prog)
{
	tfs_error err;
	tfs_open_opts oo = { .verify = fs->opts.verify, .progress = progress_stderr };
	char *def = NULL;
	const char *dir = fs->opts.staging;
	int rc;
	tfs_error_clear(&err);
	/* a repack cut short by a crash is finished (or undone) before the source is read:
	 * a sharded set or an Ollama model reads back consistently only after that */
	if (fs->opts.rw && dir && tfs_staging_recover(dir, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return -1;
	}
	if (tfs_model_open(&fs->model, fs->opts.source, &oo, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return -1;
	}
	if (!fs->opts.rw)
		return 0;
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
static void release_staging(tfs_fs *fs)
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

static void close_model(tfs_fs *fs)
{
	release_staging(fs);
	tfs_model_free(fs->model);
	fs->model = NULL;
}

/* After the loop: repack a writable mount's changes; the result goes to the status file. */
static int repack_at_unmount(tfs_fs *fs)
{
	if (!fs->staging || !tfs_staging_dirty(fs->staging))
		return 0;
	FILE *st = fs->status_path ? fopen(fs->status_path, "a") : NULL;
	FILE *log = st ? st : stderr;
	fprintf(log, "tensorfs: repacking %s\n",
		fs->opts.output ? fs->opts.output : tfs_model_path(fs->model));
	fflush(log);
	tfs_write_opts wo = { .progress = progress_stderr, .progress_ctx = log,
			      .output = fs->opts.output };
	tfs_error err;
	tfs_error_clear(&err);
	int rc = tfs_staging_repack(fs->staging, fs->model, &wo, &err);
	if (rc)
		fprintf(log, "error: %s (the source is untouched; the changes stay in %s)\n", err.msg,
			tfs_staging_dir(fs->staging));
	else
		fprintf(log, "done: wrote %s\n",
			fs->opts.output ? fs->opts.output : tfs_model_path(fs->model));
	if (st)
		fclose(st);
	return rc ? 1 : 0;
}

int tfs_mount_main(int argc, char **argv, bool by_mount8)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	tfs_fs fs;
	tfs_error err;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg = NULL;
	int ret = 1;
	const char *prog = "mount.tensorfs";

	memset(&fs, 0, sizeof(fs));
	fs.opts.readahead_kb = 1024;
	pthread_rwlock_init(&fs.lock, NULL);
	pthread_mutex_init(&fs.cache_lock, NULL);
	if (fuse_opt_parse(&args, &fs.opts, opt_spec, opt_proc) == -1)
		goto out_args;
	if (!fs.opts.source || !fs.opts.mountpoint) {
		fprintf(stderr, "usage: mount.tensorfs SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n");
		goto out_args;
	}
	/* mount(8) says "rw" by default: a model becomes writable only when asked plainly */
	if (by_mount8)
		fs.opts.rw = fs.opts.writable;
	else
		fs.opts.rw |= fs.opts.writable;
	/* the daemon runs from /: make every path absolute first */
	char *src = absolute(fs.opts.source), *mp = absolute(fs.opts.mountpoint);
	struct stat mst;
	if (stat(mp, &mst) < 0 || !S_ISDIR(mst.st_mode)) {
		fprintf(stderr, "%s: %s: mount point is not a directory\n", prog, fs.opts.mountpoint);
		free(src);
		free(mp);
		goto out_args;
	}
	/* an Ollama model name stays as it is */
	if (access(fs.opts.source, F_OK) == 0) {
		free(fs.opts.source);
		fs.opts.source = src;
	} else {
		free(src);
	}
	free(fs.opts.mountpoint);
	fs.opts.mountpoint = mp;
	if (fs.opts.staging) {
		char *s = absolute(fs.opts.staging);
		free(fs.opts.staging);
		fs.opts.staging = s;
	}
	if (fs.opts.output && strchr(fs.opts.output, '/')) {
		char *s = absolute(fs.opts.output);
		free(fs.opts.output);
		fs.opts.output = s;
	}

	if (open_model(&fs, prog))
		goto out_args;
	tfs_error_clear(&err);
	if (tfs_tree_build(&fs, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		goto out_model;
	}
	const tfs_source *s0 = tfs_model_source(fs.model, 0);
	if (s0) {
		fs.mtime.tv_sec = s0->mtime_sec;
		fs.mtime.tv_nsec = s0->mtime_nsec;
	}
	fs.uid = getuid();
	fs.gid = getgid();
	/* a read-only model never changes: the kernel may cache everything for long */
	fs.timeout = fs.opts.rw ? 0.0 : 86400.0;

	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, fs.opts.rw ? "fsname=tensorfs,subtype=tensorfs,rw"
					   : "fsname=tensorfs,subtype=tensorfs,ro");
	se = fuse_session_new(&args, &tfs_ops, sizeof(tfs_ops), &fs);
	if (!se)
		goto out_tree;
	fs.se = se;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, fs.opts.mountpoint) != 0) {
		fprintf(stderr, "%s: cannot mount on %s\n", prog, fs.opts.mountpoint);
		goto out_signals;
	}
	set_readahead(fs.opts.mountpoint, fs.opts.readahead_kb);
	/* returns in the parent once the mount is ready */
	fuse_daemonize(fs.opts.foreground);
	if (fs.opts.rw) {
		char path[64];
		snprintf(path, sizeof(path), "/tmp/tensorfs-%d.status", (int)getpid());
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0) {
			close(fd);
			fs.status_path = strdup(path);
		}
	}

	if (fs.opts.single) {
		ret = fuse_session_loop(se);
	} else {
		cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(cfg, 0);
		fuse_loop_cfg_set_max_threads(cfg, fs.opts.threads > 0 ? (unsigned)fs.opts.threads : 4);
		ret = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	fuse_session_unmount(se);
	bool repacking = fs.staging && tfs_staging_dirty(fs.staging);
	ret = (ret != 0) | repack_at_unmount(&fs);
	if (repacking && ret == 0) {
		/*
		 * The new file is durable and in place.  Freeing the replaced one happens when
		 * our descriptor of it closes, and can take as long as the copy did (ext4 mounted
		 * with discard trims every block synchronously: 0.5-0.7 s for 1.1 GB, measured).
		 * A detached child does that close, so `tensorfs unmount` returns now.
		 */
		release_staging(&fs);
		pid_t c = fork();
		if (c == 0) {
			close_model(&fs);
			_exit(0);
		}
		if (c > 0)
			_exit(0); /* the child holds the model; nothing else is left to do */
	}
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_tree:
	tfs_tree_free(&fs);
out_model:
	close_model(&fs);
out_args:
	free(fs.status_path);
	free_opts(&fs.opts);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
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

/* What the status file said about the repack. */
typedef struct {
	long pos;      /* read up to here */
	bool started;  /* "tensorfs: repacking ..." */
	bool done;     /* "done: ..." */
	bool failed;   /* "error: ..." */
} repack_status;

/* Prints what the status file gained since the last call. */
static void tail(const char *path, repack_status *rs)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	if (!f)
		return;
	fseek(f, rs->pos, SEEK_SET);
	while (fgets(line, sizeof(line), f)) {
		fputs(line, stderr);
		if (strncmp(line, "error:", 6) == 0)
			rs->failed = true;
		else if (strncmp(line, "done:", 5) == 0)
			rs->done = true;
		else if (strncmp(line, "tensorfs: repacking", 19) == 0)
			rs->started = true;
	}
	rs->pos = ftell(f);
	fclose(f);
}

/* Whether the daemon still runs.  It was daemonized: its parent is init (or a subreaper)
 * that may be slow to reap it, so an exited zombie counts as gone. */
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

int tfs_unmount_main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: tensorfs unmount MOUNTPOINT\n");
		return 2;
	}
	const char *mp = argv[1];
	char pid_s[32], status[256] = "";
	if (get_xattr(mp, "user.tensorfs.pid", pid_s, sizeof(pid_s)) < 0) {
		fprintf(stderr, "tensorfs: %s: not a tensorfs mount (%s)\n", mp, strerror(errno));
		return 1;
	}
	get_xattr(mp, "user.tensorfs.status", status, sizeof(status));
	pid_t pid = (pid_t)atoi(pid_s);

	pid_t c = fork();
	if (c == 0) {
		execlp("fusermount3", "fusermount3", "-u", "--", mp, (char *)NULL);
		_exit(127);
	}
	int ws;
	if (c < 0 || waitpid(c, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		fprintf(stderr, "tensorfs: could not unmount %s\n", mp);
		return 1;
	}
	/* the daemon repacks after the unmount: follow it until it exits */
	repack_status rs = { 0 };
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	while (daemon_alive(pid)) {
		if (status[0])
			tail(status, &rs);
		nanosleep(&ts, NULL);
	}
	if (!status[0])
		return 0;
	tail(status, &rs);
	unlink(status);
	if (rs.started && !rs.done && !rs.failed) {
		/* killed, or crashed: the commit protocol left the source whole or replaced */
		fprintf(stderr, "tensorfs: the daemon (pid %d) exited before the repack finished; "
			"the changes stay staged: run `tensorfs repack` on the source, or mount it "
			"again\n", (int)pid);
		return 1;
	}
	return rs.failed ? 1 : 0;
}

/* ==== repack ==== */

int tfs_repack_main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	tfs_fs fs;
	memset(&fs, 0, sizeof(fs));
	int ret = 1;
	if (fuse_opt_parse(&args, &fs.opts, opt_spec, opt_proc) == -1 || !fs.opts.source) {
		fprintf(stderr, "usage: tensorfs repack SOURCE [-o staging=DIR,output=PATH]\n");
		goto out;
	}
	fs.opts.rw = 1;
	if (open_model(&fs, "tensorfs repack"))
		goto out;
	if (!tfs_staging_dirty(fs.staging)) {
		fprintf(stderr, "tensorfs repack: nothing staged in %s\n", tfs_staging_dir(fs.staging));
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
