#!/bin/sh
# bench/remote.sh - remote models: what a mount fetches, and read speed against curl and a
# local mount, side by side in one run.
#
#   scripts/bench/remote.sh [DIR]
#
# Writes a 1 GiB GGUF (scripts/bench/make-gguf.py) into DIR (default: a temporary directory), serves
# it with nginx on 127.0.0.1 (tests/mount/websrv.py) and prints:
#  (a) requests and body bytes of a header-only mount of it, and of the vocab GGUFs of
#      ../shared/testdata/gguf/vocab when present (nginx's access log);
#  (b) a cold sequential read of its 256 MiB tensor big.f32 through a fresh mount (empty cache)
#      (best of TFS_BENCH_ROUNDS rounds, default 3, taken in turn with curl)
#      vs curl of the same byte range from the same nginx: MB/s and the ratio (mount / curl),
#      and vs curl writing that range into a file beside the cache (what keeping it costs);
#  (c) a warm re-read through a fresh mount whose cache holds it vs a local mount of the file
#      (both hot in the page cache): MB/s and the ratio;
#  (d) the daemon's peak RSS (VmHWM) in (b);
#  (e) the cold read of (b) through tests/mount/faultproxy.py adding 20 ms before each request,
#      a mount with -o connections=4 vs curl --parallel fetching the range in 4 parts over 4
#      connections through the same proxy: MB/s and the ratio.
# Needs root (FUSE, drop_caches), nginx, curl and /usr/bin/python3 with numpy.
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. scripts/bench/lib.sh
bench_setup bench-remote "${1:-}"
if [ ! -f "$DIR/model.gguf" ]; then
	/usr/bin/python3 scripts/bench/make-gguf.py "$DIR/model.gguf" >/dev/null
fi
export TENSORFS DIR ROOT
export TFS_SHARED=${TFS_SHARED:-$ROOT/../shared/testdata}
/usr/bin/python3 - <<'EOF'
import json, os, shutil, subprocess, sys, tempfile, time
import faultproxy
import websrv

TENSORFS, DIR = os.environ["TENSORFS"], os.environ["DIR"]
VOCAB = os.path.join(os.environ["TFS_SHARED"], "gguf", "vocab")
ROUNDS = int(os.environ.get("TFS_BENCH_ROUNDS", "3"))


def mount(src, opts):
    mp = tempfile.mkdtemp(prefix="tfs-bench-mnt-")
    r = subprocess.run([TENSORFS, "mount", src, mp] + (["-o", opts] if opts else []),
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit("bench-remote: mount %s: %s" % (src, r.stderr.strip()))
    return mp


def unmount(mp):
    subprocess.run([TENSORFS, "unmount", mp], capture_output=True)
    os.rmdir(mp)


def daemon_pid(mp):
    return int(os.getxattr(mp, "user.tensorfs.pid"))


def read_all(path):
    t = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            n += len(b)
    return n, time.perf_counter() - t


def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


www = tempfile.mkdtemp(prefix="tfs-bench-www-")
os.chmod(www, 0o755)
os.link(os.path.join(DIR, "model.gguf"), os.path.join(www, "model.gguf")) if os.stat(DIR).st_dev == os.stat(www).st_dev else shutil.copy(os.path.join(DIR, "model.gguf"), www)
vocab = sorted(f for f in os.listdir(VOCAB) if f.endswith(".gguf")) if os.path.isdir(VOCAB) else []
for f in vocab:
    shutil.copy(os.path.join(VOCAB, f), www)
ng = websrv.Nginx(www)
cache = tempfile.mkdtemp(prefix="tfs-bench-cache-")
try:
    # (a) header-only mounts
    print("(a) header-only mount: requests, body bytes fetched, header bytes")
    for name in ["model.gguf"] + vocab:
        c = tempfile.mkdtemp(prefix="tfs-bench-c-")
        ng.clear_log()
        mp = mount(ng.url(name), "cache=" + c)
        idx = json.load(open(os.path.join(mp, "index.json")))
        log = ng.log()
        unmount(mp)
        shutil.rmtree(c)
        print("    %-40s %d requests, %9d bytes (header %d bytes, file %d MiB)" % (
            name, len(log), sum(r.body_bytes for r in log), idx["data_offset"],
            os.path.getsize(os.path.join(www, name)) >> 20))
    # (b) cold sequential read vs curl: rounds taken in turn (this machine is noisy), the
    # best of each compared
    mp = mount(ng.url("model.gguf"), "cache=" + cache)
    idx = json.load(open(os.path.join(mp, "index.json")))
    t = next(t for t in idx["tensors"] if t["name"] == "big.f32")
    unmount(mp)
    rng = "%d-%d" % (t["offset"], t["offset"] + t["nbytes"] - 1)
    best_m = best_c = best_f = 1e9
    hwm = 0
    for _ in range(ROUNDS):
        c = tempfile.mkdtemp(prefix="tfs-bench-c-")
        mp = mount(ng.url("model.gguf"), "cache=" + c)
        drop_caches()
        n, secs = read_all(os.path.join(mp, "tensors", "big.f32"))
        best_m = min(best_m, secs)
        hwm = max(hwm, int([l for l in open("/proc/%d/status" % daemon_pid(mp))
                            if l.startswith("VmHWM")][0].split()[1]))
        unmount(mp)
        shutil.rmtree(c)
        drop_caches()
        c0 = time.perf_counter()
        subprocess.run(["curl", "-s", "-o", "/dev/null", "-r", rng, ng.url("model.gguf")], check=True)
        best_c = min(best_c, time.perf_counter() - c0)
        # curl keeping the bytes, as the cache does: into a file on the same file system
        drop_caches()
        c = tempfile.mkdtemp(prefix="tfs-bench-c-")
        c0 = time.perf_counter()
        subprocess.run(["curl", "-s", "-o", os.path.join(c, "range"), "-r", rng,
                        ng.url("model.gguf")], check=True)
        best_f = min(best_f, time.perf_counter() - c0)
        shutil.rmtree(c)
    print("(b) cold read of big.f32 (%d MiB), best of %d: mount %.0f MB/s, curl %.0f MB/s: ratio %.2f" % (
        n >> 20, ROUNDS, n / best_m / 1e6, n / best_c / 1e6, best_c / best_m))
    print("    curl -o FILE (keeping the bytes, as the cache does) %.0f MB/s: ratio %.2f" % (
        n / best_f / 1e6, best_f / best_m))
    print("(d) daemon peak RSS in (b): %d MiB" % (hwm >> 10))
    # the warm rounds below read through this cache
    mp = mount(ng.url("model.gguf"), "cache=" + cache)
    read_all(os.path.join(mp, "tensors", "big.f32"))
    unmount(mp)
    # (c) warm re-read vs local mount
    best_r = best_l = 1e9
    for _ in range(3):
        mp = mount(ng.url("model.gguf"), "cache=" + cache)
        best_r = min(best_r, read_all(os.path.join(mp, "tensors", "big.f32"))[1])
        unmount(mp)
        mp = mount(os.path.join(www, "model.gguf"), "")
        best_l = min(best_l, read_all(os.path.join(mp, "tensors", "big.f32"))[1])
        unmount(mp)
    print("(c) warm re-read through a fresh mount: cache %.0f MB/s, local mount %.0f MB/s: ratio %.2f" % (
        n / best_r / 1e6, n / best_l / 1e6, best_l / best_r))
    # (e) through a proxy adding 20 ms per request: the mount vs curl --parallel
    conns = 4
    p = faultproxy.FaultProxy(ng.url(""))
    p.latency = 0.02
    try:
        step = (t["nbytes"] + conns - 1) // conns
        args = ["curl", "-s", "--parallel", "--parallel-max", str(conns)]
        for i in range(conns):
            a = t["offset"] + i * step
            b = min(a + step, t["offset"] + t["nbytes"]) - 1
            args += (["--next", "-s"] if i else []) + ["-r", "%d-%d" % (a, b), "-o", "/dev/null",
                                                       p.url("model.gguf")]
        best_m = best_c = 1e9
        for _ in range(ROUNDS):
            c = tempfile.mkdtemp(prefix="tfs-bench-c-")
            mp = mount(p.url("model.gguf"), "cache=%s,connections=%d" % (c, conns))
            drop_caches()
            n, secs = read_all(os.path.join(mp, "tensors", "big.f32"))
            best_m = min(best_m, secs)
            unmount(mp)
            shutil.rmtree(c)
            drop_caches()
            c0 = time.perf_counter()
            subprocess.run(args, check=True, stderr=subprocess.DEVNULL)  # --parallel's meter
            best_c = min(best_c, time.perf_counter() - c0)
        print("(e) cold read through a proxy adding 20 ms, %d connections, best of %d: mount %.0f MB/s, "
              "curl --parallel %.0f MB/s: ratio %.2f" % (conns, ROUNDS, n / best_m / 1e6,
                                                         n / best_c / 1e6, best_c / best_m))
    finally:
        p.stop()
finally:
    ng.stop()
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(www, ignore_errors=True)
EOF
