/*
 * mount.c - `tensorfs mount SOURCE MOUNTPOINT` (also mount.tensorfs, and mount(8)): the
 * daemon's life.  Parse and check the options, open the session (the model, and for rw
 * the staging directory), build the tree, mount, serve until the unmount, repack.
 */
#include "cli.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const tfsd_usage mount_usage = {
	"usage: tensorfs mount SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
	"       mount.tensorfs SOURCE MOUNTPOINT [-f] [-o OPTIONS]\n"
	"Mounts a model (a .gguf or .safetensors file, a sharded set's index or directory,\n"
	"an Ollama manifest or model name, an http(s):// URL of a GGUF or safetensors file\n"
	"or of an Ollama registry's manifest (or https://HOST/NS/MODEL:TAG),\n"
	"hf://ORG/REPO[/PATH][@REV], s3://BUCKET/KEY) on an empty directory; returns once\n"
	"it is ready.\n",
	TFSD_FOR_MOUNT,
	"  FUSE options (allow_other, ...)\n"
	"flags: -f (foreground: Ctrl-C unmounts), -d (debug), -s (single thread)\n" };

/* Once daemonized: stderr to the file TFS_DAEMON_STDERR names, when set (the tests' harness,
 * tests/mount/harness.py, sets it and fails the case whose daemon wrote a sanitizer report
 * there).  fuse_daemonize pointed stderr at /dev/null, and gcc's ASan+UBSan runtime writes
 * UBSan's reports to stderr whatever log_path says: a finding showed only as a dead mount.
 * TFS_PLANT_MISALIGNED_STORE, set only by tests/mount/test_sanitizer.py, then makes one
 * misaligned store: the finding that check expects to see reported. */
static void daemon_stderr(void)
{
	const char *path = getenv("TFS_DAEMON_STDERR");
	if (!path || !*path)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	dup2(fd, STDERR_FILENO);
	close(fd);
	if (getenv("TFS_PLANT_MISALIGNED_STORE")) {
		static uint32_t words[2];
		volatile size_t off = 1; /* not a constant: the store is made */
		*(uint32_t *)((char *)words + off) = 1;
	}
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

/* Whether this process has one thread: only then may its child after a fork free what the
 * threads shared (a condition variable copied with waiters that the child does not have
 * is never destroyed: pthread_cond_destroy waits for them). */
static bool single_threaded(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	int n = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n == 1;
}

/* The daemon's last words in its status file, for `tensorfs unmount`: the process that
 * finishes after it (status.c). */
static void record_finisher(const char *status_path, pid_t child)
{
	FILE *st = status_path ? fopen(status_path, "a") : NULL;
	if (st) {
		fprintf(st, "finishing: %d\n", (int)child);
		fclose(st);
	}
}

/* After the session loop: unmount, repack, and the exit status (0 or 1). */
static int finish(tfsd_fs *fs, tfs_session *s, struct fuse_session *se, int loop_rc)
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
	int ret = (loop_rc != 0 && !signalled) | tfsd_repack_staged(fs, s);
	/* the look-ahead of a quantized view, a remote file's readahead: stopped, so that
	 * this process is left with one thread (the loop's have ended) */
	tfs_model_quiesce(fs->model);
	if (repacking && ret == 0 && single_threaded()) {
		/*
		 * The new file is durable and in place.  Freeing the replaced one happens when
		 * our descriptor of it closes, and can take as long as the copy did (ext4 mounted
		 * with discard trims every block synchronously: 0.5-0.7 s for 1.1 GB, measured).
		 * A detached child does that close, so `tensorfs unmount` returns now; it is told
		 * the child's pid, waits a moment for it, and says so if it still runs.
		 */
		tfsd_session_release(fs, s);
		pid_t c = fork();
		if (c == 0) {
			tfsd_session_close(fs, s);
			_exit(0);
		}
		if (c > 0) {
			record_finisher(fs->status_path, c);
			if (fs->status_path)
				unlink(fs->status_path);
			_exit(0); /* the child holds the model; nothing else is left to do */
		}
	}
	/* `tensorfs unmount` holds the status file open: it reads the rest from there */
	if (fs->status_path)
		unlink(fs->status_path);
	return ret;
}

/* Parses the command line into fs->opts and checks it: 0, or the exit status (2 for a
 * usage error) after saying why. */
static int mount_args(tfsd_fs *fs, struct fuse_args *args, bool by_mount8, const char *prog)
{
	if (tfsd_opts_parse(args, &fs->opts, &mount_usage) == -1)
		return 2;
	if (!fs->opts.source || !fs->opts.mountpoint) {
		tfsd_usage_print(stderr, &mount_usage);
		return 2;
	}
	/* mount(8) says "rw" by default: a model becomes writable only when asked plainly */
	if (by_mount8)
		fs->opts.rw = fs->opts.writable;
	else
		fs->opts.rw |= fs->opts.writable;
	if (tfsd_absolute_paths(&fs->opts)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	const tfsd_opts *o = &fs->opts;
	if (o->output && !o->rw) {
		fprintf(stderr, "%s: -o output=%s is where a repack writes: it needs -o rw%s\n",
			prog, o->output, by_mount8 ? " (under mount(8): -o writable)" : "");
		return 2;
	}
	int qrc = tfsd_quantize_check(o, prog);
	if (qrc)
		return qrc;
	/* (a registry's Ollama model is refused rw once opened, with its own reason) */
	if (fs->opts.rw && tfsd_is_remote(fs->opts.source) && !fs->opts.output &&
	    !tfs_is_registry_source(fs->opts.source)) {
		fprintf(stderr, "%s: %s: a remote model is written to a local file: -o rw needs "
			"-o output=PATH\n", prog, fs->opts.source);
		return 2;
	}
	return tfsd_check_mountpoint(&fs->opts, prog) ? 1 : 0;
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
	if (s0)
		fs->mtime = tfs_source_mtime(s0);
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
	tfs_session *session = NULL;
	struct fuse_session *se = NULL;
	int ret;
	bool handlers = false;
	const char *prog = "mount.tensorfs";

	memset(&fs, 0, sizeof(fs));
	fs.opts.readahead_kb = 512; /* a request that fits a pipe: see read_mode in ops.c */
	pthread_rwlock_init(&fs.lock, NULL);
	pthread_mutex_init(&fs.cache_lock, NULL);
	if ((ret = mount_args(&fs, &args, by_mount8, prog)))
		goto out_args;
	ret = 1;
	tfsd_sweep_status_files();
	if (tfsd_session_open(&fs, &session, prog))
		goto out_args;
	if (build_tree(&fs, prog))
		goto out_model;

	if (tfsd_add_fsname(&fs.opts, &args)) {
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
	tfsd_set_readahead(fs.opts.mountpoint, fs.opts.readahead_kb);
	/* no thread may run when the daemon forks (opening a rw mount may have read a view
	 * through its pool, replaying edits): the child would inherit their state alone */
	tfs_model_quiesce(fs.model);
	/* returns in the parent once the mount is ready */
	fuse_daemonize(fs.opts.foreground);
	if (!fs.opts.foreground)
		daemon_stderr();
	if (fs.opts.rw)
		fs.status_path = tfsd_create_status_file();

	ret = finish(&fs, session, se, serve(&fs, se));
	handlers = false;
out_signals:
	if (handlers)
		fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_tree:
	tfsd_tree_free(&fs);
out_model:
	tfsd_session_close(&fs, session);
out_args:
	free(fs.status_path);
	tfsd_opts_free(&fs.opts);
	fuse_opt_free_args(&args);
	return ret;
}
