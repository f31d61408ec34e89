"""What the Python benchmarks (scripts/bench-read*.sh) share: a mount of a source through
the real daemon, page-cache control and timing.  TENSORFS names the binary;
TFS_BENCH_MOUNT_OPTS adds -o options to every mount and TFS_BENCH_ENV (VAR=value ...)
variables to the daemon's environment."""
import os
import subprocess
import tempfile
import time

TENSORFS = os.environ["TENSORFS"]
OPTS = os.environ.get("TFS_BENCH_MOUNT_OPTS", "")
DENV = dict(os.environ)
for _kv in os.environ.get("TFS_BENCH_ENV", "").split():
    _k, _, _v = _kv.partition("=")
    DENV[_k] = _v


class Mounted:
    """with Mounted(src) as m: a read-only mount of src (m.p(...) for paths in it),
    m.mount_s the seconds `tensorfs mount` took, m.pid the daemon."""

    def __init__(self, src):
        self.src = src

    def __enter__(self):
        self.mp = tempfile.mkdtemp(prefix="tfs-bench-mnt-")
        args = [TENSORFS, "mount", self.src, self.mp] + (["-o", OPTS] if OPTS else [])
        t = time.perf_counter()
        subprocess.run(args, check=True, env=DENV)
        self.mount_s = time.perf_counter() - t
        self.pid = int(os.getxattr(self.mp, "user.tensorfs.pid"))
        return self

    def p(self, *a):
        return os.path.join(self.mp, *a)

    def io(self):
        with open("/proc/%d/io" % self.pid) as f:
            return {l.split(":")[0]: int(l.split(":")[1]) for l in f}

    def hwm_kib(self):
        return proc_status_kib(self.pid, "VmHWM")

    def __exit__(self, *a):
        subprocess.run([TENSORFS, "unmount", self.mp], check=False)
        os.rmdir(self.mp)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def warm(path, chunk=8 << 20):
    """Reads path once, so its pages are in the page cache."""
    with open(path, "rb") as f:
        while f.read(chunk):
            pass


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def say(*a):
    print(*a, flush=True)


def warm_dir(path):
    """Reads every file of directory path once (page cache)."""
    for f in sorted(os.listdir(path)):
        warm(os.path.join(path, f))


def cat(paths):
    """Seconds `cat paths... > /dev/null` takes."""
    t = time.perf_counter()
    subprocess.run(["sh", "-c", 'cat "$@" > /dev/null', "cat"] + list(paths), check=True)
    return time.perf_counter() - t


def proc_status_kib(pid, key):
    """A /proc/PID/status figure in KiB (VmHWM, VmRSS), 0 when absent."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0
