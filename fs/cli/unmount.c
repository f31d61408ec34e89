/*
 * unmount.c - `tensorfs unmount [-l] MOUNTPOINT`: unmounts, then follows the daemon (its
 * status file) until it exits, showing a rw mount's repack; cleans up a dead mount.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static const char unmount_usage[] =
	"usage: tensorfs unmount [-l] MOUNTPOINT\n"
	"Unmounts a tensorfs mount and waits for its daemon: a rw mount's changes are\n"
	"repacked, with progress on stderr; exits 1 if that failed.  A dead mount (its\n"
	"daemon killed) is cleaned up.\n"
	"  -l  lazy: detach the mount now, even while it is in use; the daemon (and its\n"
	"      repack) finishes once the last process using it lets go\n";

static int get_xattr(const char *path, const char *name, char *buf, size_t cap)
{
	ssize_t n = getxattr(path, name, buf, cap - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* Unmounts mp (detached at once when lazy): 0 or -errno; *said: fusermount3 failed and
 * said why (-EIO).  Root unmounts directly, others through fusermount3. */
static int unmount_fs(const char *mp, bool lazy, bool *said)
{
	*said = false;
	if (geteuid() == 0)
		return umount2(mp, lazy ? MNT_DETACH : 0) == 0 ? 0 : -errno;
	int pfd[2];
	char msg[1024];
	size_t len = 0;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
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
		return -ECHILD;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return 0;
	if (strstr(msg, "busy"))
		return -EBUSY;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
		fprintf(stderr, "tensorfs: cannot run fusermount3 (is the fuse3 package installed?)\n");
	else
		fputs(msg, stderr);
	*said = true;
	return -EIO;
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
static int unmount_dead(const char *mp, const char *arg, const tfsd_mount_entry *me)
{
	bool said;
	int e = unmount_fs(mp, true, &said);
	if (e == 0) {
		fprintf(stderr, "tensorfs: %s: the mount was dead (its daemon had exited); "
			"removed it%s%s%s\n", arg,
			me->rw ? "; changes it staged but did not repack are kept: "
				 "`tensorfs repack " : "", me->rw ? me->source : "",
			me->rw ? "` writes them (with the -o staging= and output= the mount had, "
				 "if it had any)" : "");
		tfsd_sweep_status_files();
		return 0;
	}
	if (!said)
		fprintf(stderr, "tensorfs: %s: the mount is dead (its daemon has exited), and "
			"removing it failed: %s\n", arg, strerror(-e));
	return 1;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Waits for the daemon pid to exit (for at most limit seconds; < 0: no limit), showing its
 * progress (the status file, rs may be NULL) every 50 ms.  A pidfd wakes us the moment it
 * exits (a repack that shares extents takes tens of ms); where there is none (kernel <
 * 5.3), polls. */
static void wait_daemon(tfsd_status_reader *rs, pid_t pid, double limit)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	double end = now_s() + limit;
#ifdef SYS_pidfd_open
	int pfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
#else
	int pfd = -1;
#endif
	while (pid > 0 && tfsd_daemon_alive(pid) && (limit < 0 || now_s() < end)) {
		if (rs && rs->fd >= 0)
			tfsd_status_read(rs, false);
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
static int follow_daemon(tfsd_status_reader *rs, pid_t pid, const char *status, bool rw)
{
	int ret = 0;
	wait_daemon(rs, pid, -1);
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
	tfsd_status_read(rs, true);
	tfsd_view_break(&rs->view);
	/* the daemon left a child closing the model (and the replaced file: that can take as
	 * long as the copy did on a file system that discards): done is said once it is gone,
	 * or with a word that it is still finishing */
	if (rs->finisher > 0)
		wait_daemon(NULL, rs->finisher, 2.0);
	if (rs->done_line[0])
		fprintf(stderr, "%s\n", rs->done_line);
	if (rs->finisher > 0 && tfsd_daemon_alive(rs->finisher))
		fprintf(stderr, "tensorfs: the daemon's last process (pid %d) is still releasing the "
			"replaced file's blocks; it ends by itself\n", (int)rs->finisher);
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
	if (tfsd_is_status_file_of(status, pid))
		unlink(status);
	return ret;
}

/* Unmounts mp (lazily: detaches it); 0, or 1 after saying why not (users: who holds it,
 * filled in for EBUSY). */
static int unmount_now(const char *mp, const char *arg, bool lazy, char *users, size_t cap)
{
	bool said;
	int e = unmount_fs(mp, lazy, &said);
	if (e == -EBUSY) {
		tfsd_list_users(mp, users, cap);
		fprintf(stderr, "tensorfs: cannot unmount %s: it is in use%s%s; end those, or "
			"detach it now with `tensorfs unmount -l %s`\n", arg,
			users[0] ? " by " : " (by processes not visible here)", users, arg);
		return 1;
	}
	if (e == -EPERM) {
		fprintf(stderr, "tensorfs: cannot unmount %s: only root or the user who mounted "
			"it can\n", arg);
		return 1;
	}
	if (e && !said)
		fprintf(stderr, "tensorfs: cannot unmount %s: %s\n", arg, strerror(-e));
	return e ? 1 : 0;
}

int tfsd_unmount_main(int argc, char **argv)
{
	bool lazy = false;
	const char *arg = NULL;
	int usage_rc = unmount_args(argc, argv, &lazy, &arg);
	if (usage_rc >= 0)
		return usage_rc;
	char *mp = tfsd_mount_path(arg);
	if (!mp) {
		fprintf(stderr, "tensorfs: %s: no such directory\n", arg);
		return 1;
	}
	int ret = 1;
	tfsd_mount_entry me;
	struct stat st;
	int stat_errno = stat(mp, &st) < 0 ? errno : 0;
	if (!tfsd_find_mount(mp, &me)) {
		fprintf(stderr, "tensorfs: %s: %s\n", arg,
			stat_errno == ENOENT ? "no such directory" : "not mounted (not a mount point)");
		goto out;
	}
	if (strcmp(me.fstype, "fuse.tensorfs") != 0) {
		fprintf(stderr, "tensorfs: %s: not a tensorfs mount (it is a %s mount of %s)\n", arg,
			me.fstype, me.source);
		goto out;
	}
	if (tfsd_dead_errno(stat_errno) || tfsd_dead_mount(mp)) {
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
	tfsd_status_reader *rs = calloc(1, sizeof(*rs));
	if (!rs) {
		fprintf(stderr, "tensorfs: out of memory\n");
		goto out;
	}
	rs->fd = status[0] && tfsd_is_status_file_of(status, pid)
			 ? open(status, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
	tfsd_view_init(&rs->view, stderr);

	char users[1024] = "";
	if (lazy)
		tfsd_list_users(mp, users, sizeof(users));
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
