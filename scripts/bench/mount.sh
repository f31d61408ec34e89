#!/bin/sh
# bench/mount.sh - mount time and bytes read while mounting, for many small tensors.
#
#   scripts/bench/mount.sh [DIR]
#
# Builds if needed, writes (scripts/bench/make-sharded.py) a 1,000-tensor sharded safetensors set and
# a 1,000-blob Ollama store into DIR (default: a temporary directory, removed afterwards; an
# existing DIR/sharded is reused), then mounts each (the set through its index.json, the store
# by model name with OLLAMA_MODELS) in the foreground so that the process that parses the
# model is the one measured, and prints, cold (after drop_caches) and warm, best of 3: the time
# until the mount appears, and read_bytes / rchar from /proc/PID/io at that moment.
# Environment: TENSORFS (binary; unset: build), TFS_BENCH_MOUNT_OPTS (extra -o options).
# Needs root (drop_caches, FUSE) and /usr/bin/python3 with numpy.
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
bench_setup bench-mount "${1:-}"
if [ ! -f "$DIR/sharded/model.safetensors.index.json" ]; then
	/usr/bin/python3 scripts/bench/make-sharded.py "$DIR" >/dev/null
fi
export TENSORFS
/usr/bin/python3 - "$DIR" <<'EOF'
import os, subprocess, sys, tempfile, time

TENSORFS = os.environ["TENSORFS"]
OPTS = os.environ.get("TFS_BENCH_MOUNT_OPTS", "")
DIR = sys.argv[1]
RUNS = 3


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    # the binary and its libraries back in: read_bytes should count the model only
    subprocess.run([TENSORFS, "--help"], capture_output=True)


def mount_once(src, env):
    mp = tempfile.mkdtemp(prefix="tfs-bench-mnt-")
    t = time.perf_counter()
    p = subprocess.Popen([TENSORFS, "mount", "-f", src, mp] + (["-o", OPTS] if OPTS else []), env=env)
    try:
        while True:
            with open("/proc/self/mountinfo") as f:
                if any(l.split()[4] == mp for l in f):
                    break
            if p.poll() is not None or time.perf_counter() - t > 120:
                raise SystemExit("mount of %s failed" % src)
            time.sleep(0.0005)
        s = time.perf_counter() - t
        with open("/proc/%d/io" % p.pid) as f:
            io = {l.split(":")[0]: int(l.split(":")[1]) for l in f}
        n = len(os.listdir(os.path.join(mp, "tensors")))
    finally:
        subprocess.run([TENSORFS, "unmount", mp], check=False)
        p.wait()
        os.rmdir(mp)
    return s, io, n


def du(path):
    tot = 0
    for root, _, files in os.walk(path):
        for f in files:
            tot += os.path.getsize(os.path.join(root, f))
    return tot


cases = [
    ("sharded safetensors (index.json)", os.path.join(DIR, "sharded", "model.safetensors.index.json"),
     dict(os.environ), os.path.join(DIR, "sharded")),
    ("Ollama store (bench/many:int4)", "bench/many:int4",
     dict(os.environ, OLLAMA_MODELS=os.path.join(DIR, "ollama")), os.path.join(DIR, "ollama")),
]
print("tensorfs mount benchmark: %s, %d CPUs, kernel %s; best of %d" % (
    DIR, os.cpu_count(), os.uname().release, RUNS))
for label, src, env, data in cases:
    nfiles = sum(len(f) for _, _, f in os.walk(data))
    print("%s: %d files, %.1f MiB" % (label, nfiles, du(data) / 2**20))
    for state in ("cold", "warm"):
        res = []
        for _ in range(RUNS):
            if state == "cold":
                drop_caches()
            res.append(mount_once(src, env))
        s, io, n = min(res, key=lambda r: r[0])
        print("    %-4s  %3d tensors  mount %8.1f ms   read_bytes %10d   rchar %10d" % (
            state, n, s * 1e3, io["read_bytes"], io["rchar"]))
EOF
