#!/usr/bin/python3
"""The command line around mounting: missing sources and Ollama tags named, mount points
that are not empty or already mounted, the model as the mount's source (findmnt), Ctrl-C
on a foreground rw mount (repack, progress on a terminal and off one), the status files'
runtime directory and its cleanup, `tensorfs unmount` of dead, busy and foreign mounts
(-l), --help and the exit codes (2 for usage, 1 for failures).
"""
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import threading
import time

from harness import TENSORFS, TESTDATA, Mount, TestCase, fuse_abort_all_for, is_mounted, main, pid_gone, quick, run

GGUF_SRC = os.path.join(TESTDATA, "gguf", "mixed_flat.gguf")
# a value that is not of its kind, for each -o option of the option table (fs/cli/optable.c);
# a flag given a value is no option at all
BAD_VALUES = {
    "ro": "ro=1", "rw": "rw=yes", "writable": "writable=1", "verify": "verify=on",
    "nonempty": "nonempty=1", "staging": "staging=", "output": "output=",
    "threads": "threads=four", "readahead_kb": "readahead_kb=-512", "outtype": "outtype=f64",
    "quantize": "quantize=Q4_K_Z", "quantize_threads": "quantize_threads=999",
    "imatrix": "imatrix=", "cache": "cache=", "cache_size": "cache_size=12Q",
    "connections": "connections=4x", "token_file": "token_file=", "cafile": "cafile=",
    "timeout": "timeout=1.5", "endpoint": "endpoint=rgw.local:7480",
    "s3_addressing": "s3_addressing=host", "hf_dtype": "hf_dtype=f64",
    "fp8_as_q8": "fp8_as_q8=1", "mmproj": "mmproj=1",
}
STORE = os.path.join(TESTDATA, "ollama", "models")


# ==== helpers ====

def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def write(path, data):
    with open(path, "w") as f:
        f.write(data)


def mountinfo_entry(mountpoint):
    """(fstype, source) of the newest mount at mountpoint, unescaped, or None."""
    mp = os.path.realpath(mountpoint)
    found = None
    unesc = lambda s: s.encode().decode("unicode_escape").encode("latin-1").decode()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            if unesc(left.split()[4]) == mp:
                fstype, source = right.split()[:2]
                found = (fstype, unesc(source))
    return found


def wait_for(cond, timeout=30, what="condition"):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)



def opens_under(pid, directory):
    """Whether process pid has a file in directory open."""
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith(directory + "/"):
                return True
        except OSError:
            pass
    return False


def default_signals():
    """In the child: SIGINT as a terminal would deliver it (not ignored, as a test runner
    might have left it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def big_safetensors(path, mib=80):
    """A safetensors file with one F32 tensor of `mib` MiB (sparse zeros): big enough that
    a repack shows progress."""
    n = (mib << 20) // 4
    header = {"__metadata__": {"note": "big"},
              "t": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + 4 * n)


class PtyReader:
    """The master side of a pseudo-terminal, drained in a thread (so the writer never
    blocks); .text() is everything read."""

    def __init__(self):
        self.master, self.slave = os.openpty()
        self.buf = bytearray()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                b = os.read(self.master, 4096)
            except OSError:
                return
            if not b:
                return
            self.buf += b

    def close_slave(self):
        os.close(self.slave)

    def text(self):
        self.t.join(5)
        os.close(self.master)
        return self.buf.decode(errors="replace")


class CliTest(TestCase):
    def mountpoint(self):
        """An empty directory that is unmounted again whatever happens."""
        d = self.tmpdir()
        mp = os.path.join(d, "mnt")
        os.mkdir(mp)
        self.addCleanup(self._force_unmount, mp)
        return mp

    def _force_unmount(self, mp):
        for _ in range(3):
            if not is_mounted(mp) and mountinfo_entry(mp) is None:
                return
            fuse_abort_all_for(mp)

    def copy_model(self, src=GGUF_SRC, name="model.gguf"):
        d = self.tmpdir()
        p = os.path.join(d, name)
        shutil.copyfile(src, p)
        return p

    def start_foreground(self, args, env=None, **kw):
        """tensorfs mount -f ... in a child; returns it once the mount is there."""
        p = subprocess.Popen([TENSORFS, "mount", "-f"] + args, preexec_fn=default_signals,
                             env=env, **kw)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def wait_mounted(self, p, mp):
        deadline = time.time() + 30
        while not is_mounted(mp):
            if p.poll() is not None:
                self.fail("the foreground mount exited (%d)" % p.returncode)
            if time.time() > deadline:
                self.fail("mount did not appear")
            time.sleep(0.02)

    # ==== 1. sources that do not exist ====

    def test_missing_file_is_named(self):
        d = self.tmpdir()
        os.mkdir(os.path.join(d, "models"))
        env = dict(os.environ, OLLAMA_MODELS=STORE)
        for src in ("nosuch.gguf", "nosuch.safetensors", "models/nosuch.gguf", "models/nosuch",
                    "v1.0/nosuch", "./nosuch", "nosuch.index.json"):
            mp = self.mountpoint()
            r = run([TENSORFS, "mount", src, mp], cwd=d, env=env)
            self.assertEqual(r.returncode, 1, "%s: %r" % (src, r.stderr))
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(src, lines[0])
            self.assertRegex(lines[0], "[Nn]o such file")
            self.assertNotIn("Ollama store", lines[0], "a path taken for an Ollama name")
            self.assertFalse(is_mounted(mp))
        # mount.tensorfs, as the brief's example has it
        link = os.path.join(d, "mount.tensorfs")
        os.symlink(os.path.abspath(TENSORFS), link)
        r = run([link, "nosuch.gguf", self.mountpoint()], cwd=d)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "mount.tensorfs: nosuch.gguf: No such file or directory\n")

    def test_missing_ollama_tag_lists_tags(self):
        env = dict(os.environ, OLLAMA_MODELS=STORE)
        for name in ("oracle-st:nosuchtag", "library/oracle-st:nosuchtag", "oracle-st"):
            mp = self.mountpoint()
            r = run([TENSORFS, "mount", name, mp], env=env)
            self.assertEqual(r.returncode, 1, r.stderr)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(name, lines[0])
            self.assertIn("not found", lines[0])
            self.assertTrue(lines[0].endswith("its tags are: int4, int8, mxfp8, nvfp4"), lines[0])
        # a model that is not there at all (a bare name too, maybe a file mistyped): both
        # said in one line, no tags to list
        for name in ("no-such-model:7b", "does-not-exist"):
            r = run([TENSORFS, "mount", name, self.mountpoint()], env=env)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr, "mount.tensorfs: %s: no such file, and no Ollama model "
                             "registry.ollama.ai/library/%s%s in the store %s\n"
                             % (name, name, "" if ":" in name else ":latest", STORE))

    # ==== 2. mount points ====

    def test_nonempty_mountpoint_refused(self):
        mp = self.mountpoint()
        write(os.path.join(mp, "mine.txt"), "keep me\n")
        r = run([TENSORFS, "mount", GGUF_SRC, mp])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(mp, r.stderr)
        self.assertIn("not empty", r.stderr)
        self.assertIn("-o nonempty", r.stderr)
        self.assertFalse(is_mounted(mp))
        # -o nonempty mounts over it (libfuse 3 itself would reject the word)
        with Mount(self, GGUF_SRC, ["nonempty"], mountpoint=mp) as m:
            self.assertIn("metadata", os.listdir(m.path))
            self.assertNotIn("mine.txt", os.listdir(m.path))
        self.assertEqual(read(os.path.join(mp, "mine.txt")), "keep me\n")

    def test_mountpoint_already_mounted_refused(self):
        mp = self.mountpoint()
        with Mount(self, GGUF_SRC, mountpoint=mp):
            r = run([TENSORFS, "mount", GGUF_SRC, mp])
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("already a mount point", r.stderr)
            self.assertIn(os.path.realpath(GGUF_SRC), r.stderr)  # says what is mounted there
            entries = [l for l in read("/proc/self/mountinfo").splitlines() if " %s " % mp in l]
            self.assertEqual(len(entries), 1)
            # -o nonempty stacks a second mount on it
            r = run([TENSORFS, "mount", GGUF_SRC, mp, "-o", "nonempty"])
            self.assertEqual(r.returncode, 0, r.stderr)
            entries = [l for l in read("/proc/self/mountinfo").splitlines() if " %s " % mp in l]
            self.assertEqual(len(entries), 2)
            r = run([TENSORFS, "unmount", mp])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(is_mounted(mp))  # the first one is still there

    # ==== 3. the source shown by findmnt and mountinfo ====

    @quick
    def test_fsname_is_the_model(self):
        d = os.path.join(self.tmpdir(), "odd dir, with\\comma")
        os.mkdir(d)
        src = os.path.join(d, "my model,v2.gguf")
        shutil.copyfile(GGUF_SRC, src)
        mp = self.mountpoint()
        # a relative source is shown absolute
        r = run([TENSORFS, "mount", "my model,v2.gguf", mp], cwd=d)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.assertEqual(mountinfo_entry(mp), ("fuse.tensorfs", src))
            r = run(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "--raw", mp])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip().replace("\\x20", " ").replace("\\x5c", "\\"),
                             src + " fuse.tensorfs")
            self.assertIn("general.alignment", os.listdir(os.path.join(mp, "metadata")))
        finally:
            run([TENSORFS, "unmount", mp])
        self.assertFalse(is_mounted(mp))
        # an Ollama model name is shown as it was given
        env = dict(os.environ, OLLAMA_MODELS=STORE)
        r = run([TENSORFS, "mount", "oracle-st:int4", mp], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.assertEqual(mountinfo_entry(mp), ("fuse.tensorfs", "oracle-st:int4"))
        finally:
            run([TENSORFS, "unmount", mp])

    # ==== 4. Ctrl-C on a foreground rw mount ====

    def test_sigint_foreground_repacks(self):
        src = self.copy_model()
        mp = self.mountpoint()
        p = self.start_foreground([src, mp, "-o", "rw"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.wait_mounted(p, mp)
        write(os.path.join(mp, "metadata", "general.name"), "Stopped by Ctrl-C")
        status = os.getxattr(mp, "user.tensorfs.status").decode()
        self.assertTrue(os.path.exists(status))
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("tensorfs: repacking %s" % src, err)
        self.assertIn("done: wrote %s" % src, err)
        self.assertFalse(is_mounted(mp))
        self.assertFalse(os.path.exists(status), "status file left behind")
        with Mount(self, src) as m:
            self.assertEqual(read(m.p("metadata", "general.name")), "Stopped by Ctrl-C\n")
        # without changes: Ctrl-C just unmounts, exit 0, nothing said
        p = self.start_foreground([src, mp, "-o", "rw"], stderr=subprocess.PIPE, text=True)
        self.wait_mounted(p, mp)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        self.assertEqual((p.returncode, err), (0, ""))
        self.assertFalse(is_mounted(mp))

    def test_sigterm_failed_repack_exits_1(self):
        src = self.copy_model()
        with open(src, "rb") as f:
            before = f.read()
        d = self.tmpdir()
        out_dir = os.path.join(d, "out")
        os.mkdir(out_dir)
        staging = os.path.join(d, "staging")
        mp = self.mountpoint()
        p = self.start_foreground(
            [src, mp, "-o", "rw,staging=%s,output=%s/new.gguf" % (staging, out_dir)],
            stderr=subprocess.PIPE, text=True)
        self.wait_mounted(p, mp)
        write(os.path.join(mp, "metadata", "general.name"), "never written")
        status = os.getxattr(mp, "user.tensorfs.status").decode()
        os.rmdir(out_dir)  # the repack cannot write its output
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("error:", err)
        self.assertIn("source is untouched", err)
        self.assertFalse(is_mounted(mp))
        self.assertFalse(os.path.exists(status), "status file left behind after a failure")
        self.assertEqual(read(src, "rb"), before)

    def test_second_sigint_stops_the_repack(self):
        """Ctrl-C during the repack that a first Ctrl-C started: the process dies as by a
        kill, the source stays whole, `tensorfs repack` writes the staged change."""
        d = self.tmpdir()
        src = os.path.join(d, "real.safetensors")
        n = (192 << 20) // 4  # real (not sparse) bytes: the copy and fsync take a while
        h = json.dumps({"__metadata__": {"note": "real"},
                        "t": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
        h += b" " * (-len(h) % 8)
        with open(src, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            block = struct.pack("<f", 1.5) * (1 << 18)
            for _ in range(4 * n // len(block)):
                f.write(block)
        before = os.stat(src)
        staging = os.path.join(d, "staging")
        mp = self.mountpoint()
        p = self.start_foreground([src, mp, "-o", "rw,staging=" + staging],
                                  stderr=subprocess.PIPE, text=True)
        self.wait_mounted(p, mp)
        write(os.path.join(mp, "metadata", "note"), "second")
        p.send_signal(signal.SIGINT)
        first = p.stderr.readline()
        self.assertEqual(first, "tensorfs: repacking %s\n" % src)
        p.send_signal(signal.SIGINT)
        rest = p.stderr.read()
        p.wait(timeout=60)
        if p.returncode == 0:
            self.skipTest("the repack finished before the second Ctrl-C")
        self.assertEqual(p.returncode, -signal.SIGINT, rest)
        self.assertNotIn("done:", rest)
        self.assertFalse(is_mounted(mp))
        after = os.stat(src)
        self.assertEqual((after.st_ino, after.st_size, after.st_mtime_ns),
                         (before.st_ino, before.st_size, before.st_mtime_ns))
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        r = run([TENSORFS, "repack", src, "-o", "staging=" + staging], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done:", r.stderr)
        self.assertEqual([f for f in os.listdir(d) if "tensorfs-tmp" in f], [])
        with Mount(self, src) as m:
            self.assertEqual(read(m.p("metadata", "note")), "second\n")

    def test_progress_on_a_terminal(self):
        """A repack of 80 MiB after Ctrl-C, stderr a terminal: one line rewritten with \\r,
        with the percentage, MB/s and the time left or taken."""
        src = os.path.join(self.tmpdir(), "big.safetensors")
        big_safetensors(src)
        mp = self.mountpoint()
        tty = PtyReader()
        p = self.start_foreground([src, mp, "-o", "rw"], stdin=subprocess.DEVNULL,
                                  stdout=tty.slave, stderr=tty.slave)
        tty.close_slave()
        self.wait_mounted(p, mp)
        write(os.path.join(mp, "metadata", "note"), "bigger")
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)
        text = tty.text()
        self.assertEqual(p.returncode, 0, text)
        self.assertRegex(text, r"\rtensorfs: writing: 100% of 80 MiB in [0-9.]+ (s|min)"
                               r"[^\n]*, [0-9]+ MB/s\x1b\[K\r?\n")
        # every progress update rewrites the line: none ends with a newline of its own
        updates = text.split("\rtensorfs: writing:")[1:]
        self.assertTrue(updates)
        for u in updates[:-1]:
            self.assertNotIn("\n", u, text)
            self.assertRegex(u, r"^ [0-9]+% of 80 MiB, [0-9]+ MB/s, [0-9. mins]+ left\x1b\[K$")
        self.assertIn("done: wrote " + src, text)
        with Mount(self, src) as m:
            self.assertEqual(read(m.p("metadata", "note")), "bigger\n")

    def test_progress_off_a_terminal(self):
        """`tensorfs unmount` with stderr a pipe shows the repack as plain lines (no \\r,
        no raw status records); with stderr a terminal as one rewritten line."""
        src = os.path.join(self.tmpdir(), "big.safetensors")
        big_safetensors(src)
        for on_tty in (False, True):
            with Mount(self, src, ["rw"]) as m:
                write(m.p("metadata", "note"), "pass %d" % on_tty)
                if on_tty:
                    tty = PtyReader()
                    u = subprocess.Popen([TENSORFS, "unmount", m.path], stdin=subprocess.DEVNULL,
                                         stdout=tty.slave, stderr=tty.slave)
                    tty.close_slave()
                    u.wait(timeout=120)
                    err = tty.text()
                    self.assertEqual(u.returncode, 0, err)
                    self.assertIn("\rtensorfs: writing: 100% of 80 MiB in", err)
                else:
                    r = m.unmount()
                    self.assertEqual(r.returncode, 0, r.stderr)
                    err = r.stderr
                    self.assertNotIn("\r", err)
                    lines = [l for l in err.splitlines() if l.startswith("tensorfs: writing:")]
                    self.assertTrue(1 <= len(lines) <= 11, err)
                    self.assertRegex(lines[-1], r"^tensorfs: writing: 100% of 80 MiB in [0-9.]+ "
                                                r"(s|min)[^,]*, [0-9]+ MB/s$")
                self.assertNotIn("progress:", err)
                self.assertIn("done: wrote " + src, err)
            with Mount(self, src) as m:
                self.assertEqual(read(m.p("metadata", "note")), "pass %d\n" % on_tty)

    # ==== 5. runtime files ====

    def test_status_file_in_runtime_dir(self):
        src = self.copy_model()
        xdg = self.tmpdir()
        env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
        mp = self.mountpoint()
        r = run([TENSORFS, "mount", src, mp, "-o", "rw"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(os.getxattr(mp, "user.tensorfs.pid"))
        status = os.getxattr(mp, "user.tensorfs.status").decode()
        self.assertEqual(status, os.path.join(xdg, "tensorfs", "%d.status" % pid))
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(xdg, "tensorfs")).st_mode), 0o700)
        write(os.path.join(mp, "metadata", "general.name"), "xdg")
        r = run([TENSORFS, "unmount", mp])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done:", r.stderr)
        self.assertEqual(os.listdir(os.path.join(xdg, "tensorfs")), [])
        # without XDG_RUNTIME_DIR, root's go to /run/tensorfs
        env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
        r = run([TENSORFS, "mount", src, mp, "-o", "rw"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(os.getxattr(mp, "user.tensorfs.pid"))
        status = os.getxattr(mp, "user.tensorfs.status").decode()
        if os.geteuid() == 0 and os.access("/run", os.W_OK):
            self.assertEqual(status, "/run/tensorfs/%d.status" % pid)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(status)).st_mode), 0o700)
        # fusermount3 -u (nobody reads the status): the daemon removes it as it exits
        r = run(["fusermount3", "-u", mp])
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_for(lambda: pid_gone(pid), what="the daemon to exit")
        self.assertFalse(os.path.exists(status))

    def test_stale_status_files_cleaned(self):
        src = self.copy_model()
        xdg = self.tmpdir()
        env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
        rt = os.path.join(xdg, "tensorfs")
        os.mkdir(rt, 0o700)
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = os.path.join(rt, "%d.status" % dead.pid)
        live = os.path.join(rt, "%d.status" % os.getpid())  # a live process, not a tensorfs
        other = os.path.join(rt, "notes.txt")
        for p in (stale, live, other):
            write(p, "tensorfs: repacking x\n")
        # a rw daemon killed with -9 leaves its status file ...
        mp = self.mountpoint()
        r = run([TENSORFS, "mount", src, mp, "-o", "rw"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(stale))
        self.assertFalse(os.path.exists(live))
        self.assertTrue(os.path.exists(other))
        pid = int(os.getxattr(mp, "user.tensorfs.pid"))
        status = os.getxattr(mp, "user.tensorfs.status").decode()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: pid_gone(pid), what="the daemon to die")
        self.assertTrue(os.path.exists(status))
        # ... which `tensorfs unmount` of the dead mount (or the next mount) removes
        r = run([TENSORFS, "unmount", mp], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(status))
        self.assertEqual(os.listdir(rt), ["notes.txt"])

    # ==== 6. unmount: dead, busy, not mounted ====

    def test_unmount_dead_mount(self):
        mp = self.mountpoint()
        for opts in ([], ["-o", "rw"]):
            src = self.copy_model()
            r = run([TENSORFS, "mount", src, mp] + opts)
            self.assertEqual(r.returncode, 0, r.stderr)
            pid = int(os.getxattr(mp, "user.tensorfs.pid"))
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: pid_gone(pid), what="the daemon to die")
            # the dead mount is in the way of a new one
            r = run([TENSORFS, "mount", src, mp])
            self.assertEqual(r.returncode, 1)
            self.assertIn("dead mount", r.stderr)
            self.assertIn("tensorfs unmount", r.stderr)
            r = run([TENSORFS, "unmount", mp])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("dead", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            if opts:  # rw: what to do about the staged changes
                self.assertIn("`tensorfs repack %s`" % src, r.stderr)
            else:
                self.assertNotIn("repack", r.stderr)
            self.assertIsNone(mountinfo_entry(mp))
            os.listdir(mp)  # usable again

    def test_unmount_busy_mount(self):
        mp = self.mountpoint()
        with Mount(self, GGUF_SRC, mountpoint=mp) as m:
            pid = int(os.getxattr(mp, "user.tensorfs.pid"))
            holder = subprocess.Popen(["sleep", "60"], cwd=m.p("metadata"))
            self.addCleanup(lambda: holder.poll() is None and holder.kill())
            reader = subprocess.Popen(["tail", "-f", m.p("metadata", "general.architecture")],
                                      stdout=subprocess.DEVNULL)
            self.addCleanup(lambda: reader.poll() is None and reader.kill())
            wait_for(lambda: opens_under(reader.pid, mp), what="tail to open the file")
            r = run([TENSORFS, "unmount", mp])
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("in use", r.stderr)
            self.assertIn("pid %d (sleep)" % holder.pid, r.stderr)
            self.assertIn("pid %d (tail)" % reader.pid, r.stderr)
            self.assertIn("tensorfs unmount -l %s" % mp, r.stderr)
            self.assertTrue(is_mounted(mp))
            # -l detaches it at once; the daemon goes when they let go
            r = run([TENSORFS, "unmount", "-l", mp])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("detached", r.stderr)
            self.assertIsNone(mountinfo_entry(mp))
            self.assertFalse(pid_gone(pid))
            holder.kill()
            reader.kill()
            holder.wait()
            reader.wait()
            wait_for(lambda: pid_gone(pid), what="the daemon to exit")

    def test_unmount_lazy_idle_waits_for_repack(self):
        src = self.copy_model()
        with Mount(self, src, ["rw"]) as m:
            write(m.p("metadata", "general.name"), "lazily")
            r = run([TENSORFS, "unmount", "-l", m.path])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("done: wrote", r.stderr)  # nobody held it: followed to the end
        with Mount(self, src) as m:
            self.assertEqual(read(m.p("metadata", "general.name")), "lazily\n")

    def test_unmount_not_a_tensorfs_mount(self):
        d = self.tmpdir()
        cases = [(d, "not mounted"), ("/proc", "not a tensorfs mount"),
                 (os.path.join(d, "nonexistent"), "no such directory")]
        for path, msg in cases:
            r = run([TENSORFS, "unmount", path])
            self.assertEqual(r.returncode, 1, r.stderr)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(path, lines[0])
            self.assertIn(msg, lines[0])
            self.assertNotIn("No data available", lines[0])
        self.assertTrue(os.path.ismount("/proc"))

    # ==== help and exit codes ====

    def test_help(self):
        link = os.path.join(self.tmpdir(), "mount.tensorfs")
        os.symlink(os.path.abspath(TENSORFS), link)
        for args, head in (([TENSORFS, "mount"], "usage: tensorfs mount"),
                           ([TENSORFS, "unmount"], "usage: tensorfs unmount [-l]"),
                           ([TENSORFS, "repack"], "usage: tensorfs repack"),
                           ([link], "usage: tensorfs mount")):
            for h in ("-h", "--help"):
                r = run(args + [h])
                self.assertEqual((r.returncode, r.stderr), (0, ""), args + [h])
                self.assertTrue(r.stdout.startswith(head), r.stdout)
        r = run([TENSORFS, "mount", "--help"])
        self.assertIn("nonempty", r.stdout)
        r = run([TENSORFS, "unmount", "--help"])
        self.assertIn("-l", r.stdout)

    def test_every_option_bad_value_exits_2(self):
        """Every -o option of the option table (tensorfs __options COMMAND), and every
        --NAME= of info, given a value that is not of its kind: exit status 2 and one line
        naming the option, before anything is opened (the mount point stays empty)."""
        mp = self.mountpoint()
        out = os.path.join(self.tmpdir(), "out.gguf")
        for cmd in ("mount", "convert", "repack"):
            names = run([TENSORFS, "__options", cmd]).stdout.split()
            self.assertIn("cache_size=", names)
            for name in names:
                name = name.rstrip("=")
                self.assertIn(name, BAD_VALUES, "no bad value for -o %s: add one" % name)
                opt = BAD_VALUES[name]
                args = {"mount": ["mount", GGUF_SRC, mp], "convert": ["convert", GGUF_SRC, out],
                        "repack": ["repack", GGUF_SRC]}[cmd]
                r = run([TENSORFS] + args + ["-o", opt])
                what = "%s -o %s" % (cmd, opt)
                self.assertEqual(r.returncode, 2, "%s: %r" % (what, r.stderr))
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, "%s: %r" % (what, r.stderr))
                self.assertIn("-o " + opt.split("=")[0] if "=" in opt else opt, lines[0], what)
                self.assertFalse(is_mounted(mp))
                self.assertFalse(os.path.exists(out))
        # info takes a view's options as --NAME=VALUE
        helptext = run([TENSORFS, "info", "--help"]).stdout
        flags = sorted(set(re.findall(r"--(\w+)=[A-Z]", helptext)))
        self.assertEqual(flags, ["imatrix", "outtype", "quantize"])
        for name in flags:
            r = run([TENSORFS, "info", GGUF_SRC, "--" + BAD_VALUES[name]])
            self.assertEqual(r.returncode, 2, "info --%s: %r" % (BAD_VALUES[name], r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(name + "=", r.stderr)
        # an option neither tensorfs nor libfuse knows: tensorfs's own line, pointing to help
        r = run([TENSORFS, "mount", GGUF_SRC, mp, "-o", "bogus"])
        self.assertEqual((r.returncode, r.stderr),
                         (2, "mount.tensorfs: -o bogus: no such option (tensorfs help mount "
                             "lists them)\n"))
        # libfuse's own options are still passed to it
        with Mount(self, GGUF_SRC, ["default_permissions"]) as m:
            self.assertTrue(os.path.exists(os.path.join(m.path, "model.gguf")))

    def test_usage_errors_exit_2(self):
        mp = self.mountpoint()
        for args in (["mount"], ["mount", GGUF_SRC], ["mount", GGUF_SRC, mp, "extra"],
                     ["mount", GGUF_SRC, mp, "-o", "no_such_option"],
                     ["mount", GGUF_SRC, mp, "-o", "threads=-1"],
                     ["mount", GGUF_SRC, mp, "-o", "readahead_kb=-5"],
                     ["mount", GGUF_SRC, mp, "-o", "output=/tmp/never-written.gguf"],
                     ["unmount"], ["unmount", "-x", mp], ["unmount", mp, mp],
                     ["repack"], ["repack", GGUF_SRC, "extra"]):
            r = run([TENSORFS] + args)
            self.assertEqual(r.returncode, 2, "%s: %r" % (args, r.stderr))
            self.assertTrue(r.stderr.strip(), args)
            self.assertFalse(is_mounted(mp))
        # runtime failures are 1
        for args in (["mount", GGUF_SRC, os.path.join(mp, "nonexistent")],
                     ["mount", "/nonexistent.gguf", mp], ["unmount", mp]):
            r = run([TENSORFS] + args)
            self.assertEqual(r.returncode, 1, "%s: %r" % (args, r.stderr))


if __name__ == "__main__":
    main()
