"""Real-mount test harness: runs tests through /dev/fuse and reports in TAP.

Every test gets the built `tensorfs` binary (env TENSORFS, set by meson) and the
test data directory (env TFS_TESTDATA).  `Mount` starts the real daemon, waits
for the mount with a timeout, and always unmounts, also when a test fails or the
daemon hangs (then the FUSE connection is aborted through fusectl).  Unexpected
stderr of the mount command fails the test, and so does a sanitizer report of a daemon:
each daemon's stderr goes to a file of the module's work directory (TFS_DAEMON_STDERR), and
the case during which a report appears there (or in the sanitizer run's log_path folder,
TFS_SANITIZER_REPORTS) fails with the report printed.

Usage in a test module:
    from harness import Mount, TestCase, main, quick
    class T(TestCase):
        @quick             # one of the quick tier's cases (scripts/test.sh --quick)
        def test_x(self):
            with Mount(self, SOURCE) as m:
                ...
    if __name__ == '__main__': main()
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

TENSORFS = os.environ.get("TENSORFS", os.path.join(os.path.dirname(__file__), "../../build/fs/tensorfs"))
TESTDATA = os.environ.get("TFS_TESTDATA", os.path.join(os.path.dirname(__file__), "../data"))
# The sanitizer run (scripts/test.sh's build-asan chain, which names a folder for the
# reports): it checks the daemon's memory, not the reference's bytes again.  A module whose
# matrix repeats one read path over many models or outtypes (test_hf_moe.py) takes one case
# per path there; the normal run takes them all.
SANITIZED = bool(os.environ.get("TFS_SANITIZER_REPORTS"))
# llama.cpp's vocab-only GGUFs (no tensors; arrays of 30K-100K strings): models/ of the
# reference llama.cpp clone scripts/setup.sh makes in build/llama.cpp (env TFS_LLAMA_CPP, set
# by meson, names it; tests/hf/reference.py uses the same clone).  VOCAB_NAMES: the ones the
# tests use, SPM, BPE and WPM tokenizers.  A test needing them SKIPs with vocab_missing()'s
# reason when they are not there.
LLAMA_CPP = os.environ.get("TFS_LLAMA_CPP") or os.path.join(os.path.dirname(__file__), "../../build/llama.cpp")
VOCAB_DIR = os.path.join(LLAMA_CPP, "models")
VOCAB_NAMES = ("baichuan", "bert-bge", "deepseek-llm", "falcon", "gpt-2", "gpt-neox", "llama-spm",
               "mpt")
LLAMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llama")


def vocab_files():
    """The file names of the VOCAB_NAMES GGUFs in VOCAB_DIR, sorted ([] when one is missing)."""
    names = sorted("ggml-vocab-%s.gguf" % n for n in VOCAB_NAMES)
    return names if all(os.path.isfile(os.path.join(VOCAB_DIR, f)) for f in names) else []


def vocab_missing():
    """None when the vocab GGUFs are in VOCAB_DIR, else the reason to SKIP."""
    if vocab_files():
        return None
    return "no ggml-vocab-{%s}.gguf in %s (the reference llama.cpp: bash scripts/setup.sh)" % (
        ",".join(VOCAB_NAMES), VOCAB_DIR)


def ggml_gguf(path):
    """What ggml's own reader (gguf_init_from_file of llama.cpp's libggml-base.so,
    tests/llama/ggml_gguf.py, in a process of its own) makes of the GGUF at path: a dict, or
    a str saying why there is none (the library missing, or ggml refusing the file)."""
    r = subprocess.run([sys.executable, os.path.join(LLAMA_DIR, "ggml_gguf.py"), path],
                       capture_output=True, text=True, timeout=300)
    if r.returncode:
        return "ggml_gguf.py %s: %s" % (path, (r.stderr.strip() or "exit %d" % r.returncode))
    return json.loads(r.stdout)


def run(args, timeout=60, check=False, **kw):
    """Runs a command, returns CompletedProcess with text output."""
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=check, **kw)


def sha256(path):
    """The sha256 of a file, read in 1 MiB pieces."""
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fuse_abort_all_for(mountpoint):
    """Aborts the FUSE connection behind mountpoint (a hung daemon) and lazily unmounts."""
    try:
        st = os.stat(mountpoint)
        conn = "/sys/fs/fuse/connections/%d" % os.minor(st.st_dev)
    except OSError:
        conn = None
    if not os.path.isdir("/sys/fs/fuse/connections/") or not os.listdir("/sys/fs/fuse/connections/"):
        subprocess.run(["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"],
                       capture_output=True)
    if conn and os.path.exists(conn + "/abort"):
        with open(conn + "/abort", "w") as f:
            f.write("1")
    subprocess.run(["umount", "-l", mountpoint], capture_output=True)


class env_set:
    """with env_set(VAR=value): the daemon started inside inherits VAR."""

    def __init__(self, **kw):
        self.kw = kw

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in self.kw}
        os.environ.update(self.kw)

    def __exit__(self, *a):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def is_mounted(mountpoint):
    mp = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if parts[4].replace("\\040", " ") == mp and " - fuse.tensorfs " in line:
                return True
    return False


def pid_gone(pid):
    """pid has exited (or is a zombie: its files, and so its flocks, are closed)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def kill_daemon(mountpoint, pid=None, timeout=60):
    """kill -9 of the daemon behind mountpoint (its user.tensorfs.pid unless pid is given), as a
    crash would: waits until it has exited (a process dies asynchronously, and a sanitizer
    build's under load can take seconds; until then it holds its staging directory's lock),
    then takes the dead mount down. Returns the pid."""
    if pid is None:
        pid = int(os.getxattr(mountpoint, "user.tensorfs.pid"))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.time() + timeout
    while not pid_gone(pid):
        if time.time() > deadline:
            raise AssertionError("daemon %d still alive %d s after kill -9" % (pid, timeout))
        time.sleep(0.02)
    while is_mounted(mountpoint) and time.time() < deadline:
        if subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True).returncode:
            subprocess.run(["umount", "-l", mountpoint], capture_output=True)
    return pid


def _mount_argv_mountpoint(argv):
    """The mountpoint of a `tensorfs mount [-f] [-o OPTS] SOURCE MOUNTPOINT` argv, or None."""
    if len(argv) < 2 or argv[1] != "mount":
        return None
    pos, i = [], 2
    while i < len(argv):
        a = argv[i]
        if a in ("-o",):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        pos.append(a)
        i += 1
    return os.path.realpath(pos[1]) if len(pos) >= 2 else None


# Each run of a module marks the processes it starts (their environment, which a daemon
# keeps): scripts/test.sh runs two modules of one build side by side (the sanitizer tests in
# two jobs), and one module's end-of-run sweep (outliving) must not take the other's daemon
# for a leftover while it is still mounting.  A daemon without the mark (started through
# mount(8), which may clear the environment) is anyone's, as before.
RUN_MARK = "TFS_HARNESS_RUN"
os.environ[RUN_MARK] = "%d.%d" % (os.getpid(), time.time_ns())
_MARK = ("%s=%s" % (RUN_MARK, os.environ[RUN_MARK])).encode()


def _marked_by_another_run(pid):
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return False
    marks = [e for e in env if e.startswith(RUN_MARK.encode() + b"=")]
    return bool(marks) and _MARK not in marks


def daemons(mountpoint=None):
    """Live processes of this build's tensorfs mount daemons: [(pid, argv)], those of
    mountpoint only when given (zombies are gone: they have exited), but those another run
    of a module started (RUN_MARK)."""
    me = os.path.realpath(TENSORFS)
    want = os.path.realpath(mountpoint) if mountpoint else None
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[:-1]]
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state in ("Z", "X") or not argv or os.path.realpath(argv[0]) != me or \
                _marked_by_another_run(d):
            continue
        mp = _mount_argv_mountpoint(argv)
        if mp and (want is None or mp == want):
            out.append((int(d), argv))
    return out


def outliving(mountpoint=None, wait=5.0):
    """The daemons (of mountpoint, else of any mountpoint no longer mounted) still alive
    after waiting up to `wait` seconds: [(pid, argv)]; they are killed."""
    deadline = time.time() + wait
    while True:
        left = [(p, a) for p, a in daemons(mountpoint)
                if mountpoint or not is_mounted(_mount_argv_mountpoint(a))]
        if not left or time.time() > deadline:
            break
        time.sleep(0.05)
    for p, _ in left:
        try:
            os.kill(p, 9)
        except OSError:
            pass
    return left


def describe(procs):
    return "; ".join("pid %d: %s" % (p, " ".join(a)) for p, a in procs)


class Mount:
    """with Mount(testcase, source, options=[...], expect_fail=False) as m: m.path ..."""

    def __init__(self, tc, source, options=(), mountpoint=None, timeout=30, allow_stderr=False):
        self.tc = tc
        self.source = source
        self.options = list(options)
        self.timeout = timeout
        self.allow_stderr = allow_stderr
        self._own_mp = mountpoint is None
        self.path = mountpoint or tempfile.mkdtemp(prefix="tfs-mnt-")
        self.proc = None
        self.unmount_result = None

    def __enter__(self):
        args = [TENSORFS, "mount", self.source, self.path]
        if self.options:
            args += ["-o", ",".join(self.options)]
        r = run(args, timeout=self.timeout)
        if r.returncode != 0:
            self._cleanup_dir()
            self.tc.fail("mount failed (%d): %s" % (r.returncode, r.stderr.strip()))
        self.mount_stderr = r.stderr
        # (a multimodal repo whose projector cannot be shown says why in one line: a notice,
        # not a failure; tests/mount/test_hf_mmproj.py checks it)
        rest = [x for x in r.stderr.splitlines() if x.strip() and ": no mmproj.gguf: " not in x]
        if rest and not self.allow_stderr:
            self.unmount()
            self.tc.fail("unexpected stderr from mount: %r" % r.stderr)
        deadline = time.time() + self.timeout
        while not is_mounted(self.path):
            if time.time() > deadline:
                self.tc.fail("mount did not appear within %ds" % self.timeout)
            time.sleep(0.05)
        return self

    def unmount(self):
        """tensorfs unmount; returns the CompletedProcess (also kept in unmount_result)."""
        if not is_mounted(self.path):
            return self.unmount_result
        try:
            self.unmount_result = run([TENSORFS, "unmount", self.path], timeout=300)
        except subprocess.TimeoutExpired:
            fuse_abort_all_for(self.path)
            raise
        if is_mounted(self.path):
            fuse_abort_all_for(self.path)
        elif self.unmount_result.returncode == 0:
            # the daemon (and any process it left) ends with its mount: one that outlives
            # it holds the model's files open, and hangs (issue 33)
            left = outliving(self.path)
            if left:
                self.tc.fail("the daemon outlived its unmount by 5 s: %s" % describe(left))
        return self.unmount_result

    def _cleanup_dir(self):
        if self._own_mp:
            try:
                os.rmdir(self.path)
            except OSError:
                pass

    def __exit__(self, et, ev, tb):
        try:
            self.unmount()
        finally:
            if is_mounted(self.path):
                fuse_abort_all_for(self.path)
            self._cleanup_dir()
        return False

    def p(self, *parts):
        return os.path.join(self.path, *parts)


def assert_reject(tc, source, pattern=None, env=None, name_in_msg=None, options=None):
    """tensorfs mount must fail with ONE line on stderr naming the file (name_in_msg, else
    the source's basename) and matching pattern once the path is taken out, leaving nothing
    mounted.  Returns that line."""
    mp = tc.tmpdir()
    try:
        r = run([TENSORFS, "mount", source, mp] + (["-o", options] if options else []),
                timeout=30, env=env)
    finally:
        if is_mounted(mp):
            subprocess.run(["fusermount3", "-u", mp], capture_output=True)
            tc.fail("%s: mounted" % source)
    tc.assertNotEqual(r.returncode, 0, "%s: mount succeeded" % source)
    lines = r.stderr.strip().splitlines()
    tc.assertEqual(len(lines), 1, "%s: stderr %r" % (source, r.stderr))
    tc.assertIn(name_in_msg or os.path.basename(source), lines[0])
    if pattern:
        msg = lines[0].replace(os.path.realpath(source), "").replace(source, "")
        tc.assertRegex(msg, pattern)
    tc.assertFalse(is_mounted(mp))
    tc.assertEqual(os.listdir(mp), [])
    return lines[0]


def quick(case):
    """Marks a case of the quick tier: `bash scripts/test.sh --quick` (TFS_QUICK=1) runs only
    the cases so marked, about one real mount per feature, seconds each; a module with none
    says `1..0 # SKIP`.  Mark the case that mounts the feature's commonest source and checks
    its bytes; leave out kill trials, long timeouts and reference runs that take more."""
    case.tfs_quick = True
    return case


def _cases(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _cases(t)
        else:
            yield t


class TestCase(unittest.TestCase):
    def tmpdir(self):
        d = tempfile.mkdtemp(prefix="tfs-test-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


# ==== sanitizer reports of the daemons ====
# A daemon's stderr is /dev/null once it has daemonized (fuse_daemonize), and gcc's
# ASan+UBSan runtime writes UBSan's reports to stderr whatever log_path says: a finding in a
# daemon showed only as a dead mount.  So every daemon of a module writes its stderr to a
# file of the module's work directory (TFS_DAEMON_STDERR: fs/cli/mount.c), and what appears
# there during a case, or in the folder of the sanitizer run's log_path files
# (TFS_SANITIZER_REPORTS, set by scripts/test.sh: ASan's and LeakSanitizer's reports, those
# of any process), fails that case, printed as its diagnostics.  Report files found are
# moved to the work directory (scripts/test.sh counts those left as failures of their own).
REPORT_MARKERS = ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                  "Sanitizer:DEADLYSIGNAL", "SUMMARY: AddressSanitizer",
                  "SUMMARY: UndefinedBehaviorSanitizer")


class SanitizerReports:
    def __init__(self, module):
        self.work = tempfile.mkdtemp(prefix="tfs-%s-" % module)
        self.stderr = os.path.join(self.work, "daemon-stderr")
        open(self.stderr, "w").close()
        os.environ["TFS_DAEMON_STDERR"] = self.stderr
        self.folder = os.environ.get("TFS_SANITIZER_REPORTS") or None
        self.pos = 0
        self.found = False

    def take(self):
        """The reports written since the last call: a text ("" when none)."""
        out = []
        with open(self.stderr, errors="replace") as f:
            f.seek(self.pos)
            text = f.read()
            self.pos = f.tell()
        if any(m in text for m in REPORT_MARKERS):
            out.append("the daemon's stderr (%s):\n%s" % (self.stderr, text))
        if self.folder and os.path.isdir(self.folder):
            for name in sorted(os.listdir(self.folder)):
                src = os.path.join(self.folder, name)
                dst = os.path.join(self.work, name)
                try:
                    shutil.move(src, dst)
                    with open(dst, errors="replace") as f:
                        out.append("%s (moved to %s):\n%s" % (name, dst, f.read()))
                except OSError:
                    pass
        self.found = self.found or bool(out)
        return "\n".join(out)

    def close(self):
        """Removes the work directory unless it holds a report."""
        if not self.found:
            shutil.rmtree(self.work, True)


def _cgroup_cpu():
    """The CPU-seconds of this process's cgroup v1 cpuacct group so far (its daemons' and
    every other child's too), when scripts/bench/cpu-of.sh made one for the test; else None.
    Each case's TAP line then says its CPU besides its time."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next(l.split(":", 2)[2].strip() for l in f
                        if "cpuacct" in l.split(":", 2)[1].split(","))
        if not path.startswith("/tfs-test."):
            return None
        with open("/sys/fs/cgroup/cpuacct%s/cpuacct.usage" % path) as f:
            return int(f.read()) / 1e9
    except (OSError, StopIteration, ValueError, IndexError):
        return None


class _TapResult(unittest.TestResult):
    def __init__(self, reports=None):
        super().__init__()
        self.n = 0
        self.passed = 0
        self.failed_n = 0
        self.skipped_n = 0
        self.reports = reports

    def startTest(self, test):
        super().startTest(test)
        self.started = time.monotonic()
        self.cpu0 = _cgroup_cpu()
        if self.reports:
            self.reports.take()   # (what came before this case was said then)

    def _report(self, test):
        """A sanitizer report written during the case: it fails, the report printed."""
        text = self.reports.take() if self.reports else ""
        if not text:
            return False
        self.failed_n += 1
        self._line(False, test)
        print("# a sanitizer report during this case:", flush=True)
        for l in text.splitlines()[:200]:
            print("# " + l, flush=True)
        print("FAILED %s: a sanitizer report during this case:\n%s"
              % (test.id().split(".", 1)[-1], "\n".join(text.splitlines()[:200])),
              file=sys.stderr, flush=True)
        return True

    def _line(self, ok, test, extra=""):
        # each case's time in the description, as Criterion's TAP has it: "(2.47s)"
        self.n += 1
        took = time.monotonic() - getattr(self, "started", time.monotonic())
        cpu0, cpu = getattr(self, "cpu0", None), _cgroup_cpu()
        if cpu0 is not None and cpu is not None:
            took = "%.2fs, %.1f CPU-s" % (took, cpu - cpu0)
        else:
            took = "%.2fs" % took
        print("%s %d - %s (%s)%s" % ("ok" if ok else "not ok", self.n,
                                     test.id().split(".", 1)[-1], took, extra), flush=True)

    def addSuccess(self, test):
        if self._report(test):
            return
        self.passed += 1
        self._line(True, test)

    def addFailure(self, test, err):
        if not self._report(test):
            self.failed_n += 1
            self._line(False, test)
        text = self._exc_info_to_string(err, test)
        for l in text.splitlines():
            print("# " + l, flush=True)
        # and on stderr: meson's --print-errorlogs shows a TAP test's stderr, not its
        # comments (CI printed an empty "stderr:" for a failed stress case, no reason)
        print("FAILED %s\n%s" % (test.id().split(".", 1)[-1], text), file=sys.stderr, flush=True)

    addError = addFailure

    def addSkip(self, test, reason):
        if self._report(test):
            return
        self.skipped_n += 1
        self._line(True, test, " # SKIP " + reason)


def main(work=None):
    """Runs the module's cases as TAP; work: the module's folder of repos and converter files
    (tests/hf/compare.py's done_with: removed when every case passed)."""
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("1..0 # SKIP mount tests need root and /dev/fuse")
        return
    # test_x.py [Class.test_name ...]: only those cases (a developer's run)
    loader, here = unittest.defaultTestLoader, sys.modules["__main__"]
    suite = (loader.loadTestsFromNames(sys.argv[1:], here) if sys.argv[1:]
             else loader.loadTestsFromModule(here))
    if os.environ.get("TFS_QUICK") and not sys.argv[1:]:
        suite = unittest.TestSuite(t for t in _cases(suite) if getattr(
            getattr(t, getattr(t, "_testMethodName", ""), None), "tfs_quick", False))
        if not suite.countTestCases():
            print("1..0 # SKIP no case of the quick tier here (harness.quick)")
            return
    print("1..%d" % suite.countTestCases(), flush=True)
    reports = SanitizerReports(os.path.splitext(os.path.basename(sys.argv[0]))[0])
    res = _TapResult(reports)
    suite.run(res)
    # the same for mounts not made by Mount (run() or Popen of `tensorfs mount`): no daemon
    # of this build is left whose mountpoint is gone (one TAP case beyond the plan's count
    # is not allowed, so a failure is reported as a failed exit and a diagnostic)
    left = outliving(None, wait=10.0)
    if left:
        for f in (sys.stdout, sys.stderr):
            print("# FAILED: daemons outlived their mounts: %s" % describe(left), file=f, flush=True)
        res.failed_n += 1
    late = reports.take()   # after the last case (a class's teardown, a late daemon)
    if late:
        for f in (sys.stdout, sys.stderr):
            print("# FAILED: a sanitizer report after the last case:", file=f, flush=True)
            for l in late.splitlines()[:200]:
                print("# " + l, file=f, flush=True)
        res.failed_n += 1
    reports.close()
    if work:
        import compare   # (the modules that have a work folder put tests/hf on the path)
        compare.done_with(work, not res.failed_n)
    sys.exit(1 if res.failed_n else 0)
