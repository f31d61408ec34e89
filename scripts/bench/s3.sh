#!/bin/sh
# bench/s3.sh - s3:// against a real S3 store: a cold read through a mount against curl with a
# SigV4 signature, side by side in one run.
#
#   scripts/bench/s3.sh [DIR]
#
# Starts a single-node Ceph with radosgw on 127.0.0.1 (tests/s3/rgw.py: one mon, one OSD on
# memstore, so the object lives in the OSD's memory), uploads a GGUF holding a 256 MiB F32
# tensor (written into DIR, default a temporary directory) and prints:
#  (a) a cold sequential read of that tensor through a fresh mount of s3://BUCKET/KEY (empty
#      cache, page cache dropped), best of TFS_BENCH_ROUNDS rounds (default 3), taken in turn
#      with curl --aws-sigv4 fetching the same byte range from the same radosgw: MB/s and the
#      ratio (curl's time / the mount's: above 1, the mount is faster), and against curl
#      writing the range into a file beside the cache (keeping the bytes, as the cache does);
#  (b) the daemon's peak RSS (VmHWM) in (a), and the Ceph daemons' RSS after the rounds.
# Needs root (FUSE, drop_caches), Ceph's radosgw, ceph-mon and ceph-osd (scripts/setup.sh),
# curl 7.75 or later (--aws-sigv4) and /usr/bin/python3 with numpy.
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. scripts/bench/lib.sh
bench_setup bench-s3 "${1:-}"
export TENSORFS DIR ROOT
export PYTHONPATH="$ROOT/tests/s3:$PYTHONPATH"
/usr/bin/python3 - <<'EOF'
import json, os, shutil, subprocess, sys, tempfile, time
import numpy as np
import ggufgen
import rgw

TENSORFS, DIR = os.environ["TENSORFS"], os.environ["DIR"]
ROUNDS = int(os.environ.get("TFS_BENCH_ROUNDS", "3"))
BUCKET, KEY = "bench", "models/big.gguf"

why = rgw.available()
if why:
    sys.exit("bench-s3: " + why)
model = os.path.join(DIR, "big.gguf")
if not os.path.exists(model):
    w = ggufgen.GGUFWriter(alignment=32)
    w.add_kv("general.architecture", ggufgen.STRING, "llama")
    w.add_tensor("big.f32", "F32", np.random.default_rng(31).standard_normal(
        64 << 20, dtype=np.float32).reshape(-1, 4096))
    w.write(model)


def mount(src, opts, env):
    mp = tempfile.mkdtemp(prefix="tfs-bench-mnt-")
    r = subprocess.run([TENSORFS, "mount", src, mp, "-o", opts], capture_output=True, text=True,
                       env=env)
    if r.returncode:
        sys.exit("bench-s3: mount %s: %s" % (src, r.stderr.strip()))
    return mp


def unmount(mp):
    subprocess.run([TENSORFS, "unmount", mp], capture_output=True)
    os.rmdir(mp)


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


work = tempfile.mkdtemp(prefix="tfs-bench-ceph-")
g = rgw.Rgw(work, store_bytes=3 << 30)
t0 = time.perf_counter()
g.start()
up = time.perf_counter() - t0
try:
    c = g.client()
    c.create_bucket(BUCKET)
    c.put_file(BUCKET, KEY, model)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=g.key_id, AWS_SECRET_ACCESS_KEY=g.secret,
               AWS_ENDPOINT_URL=g.endpoint)
    src = "s3://%s/%s" % (BUCKET, KEY)
    cache = tempfile.mkdtemp(prefix="tfs-bench-c-")
    mp = mount(src, "cache=" + cache, env)
    idx = json.load(open(os.path.join(mp, "index.json")))
    t = next(t for t in idx["tensors"] if t["name"] == "big.f32")
    unmount(mp)
    shutil.rmtree(cache)
    rng = "%d-%d" % (t["offset"], t["offset"] + t["nbytes"] - 1)
    curl = ["curl", "-sf", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
            "%s:%s" % (g.key_id, g.secret), "-H",
            "x-amz-content-sha256: " + rgw.EMPTY_SHA256, "-r", rng,
            "%s/%s/%s" % (g.endpoint, BUCKET, KEY)]
    best_m = best_c = best_f = 1e9
    hwm = 0
    for _ in range(ROUNDS):
        cache = tempfile.mkdtemp(prefix="tfs-bench-c-")
        mp = mount(src, "cache=" + cache, env)
        drop_caches()
        n, secs = read_all(os.path.join(mp, "tensors", "big.f32"))
        best_m = min(best_m, secs)
        pid = int(os.getxattr(mp, "user.tensorfs.pid"))
        hwm = max(hwm, int([l for l in open("/proc/%d/status" % pid)
                            if l.startswith("VmHWM")][0].split()[1]))
        unmount(mp)
        shutil.rmtree(cache)
        drop_caches()
        c0 = time.perf_counter()
        subprocess.run(curl, check=True)
        best_c = min(best_c, time.perf_counter() - c0)
        drop_caches()
        keep = tempfile.mkdtemp(prefix="tfs-bench-c-")
        c0 = time.perf_counter()
        subprocess.run(curl[:3] + [os.path.join(keep, "range")] + curl[4:], check=True)
        best_f = min(best_f, time.perf_counter() - c0)
        shutil.rmtree(keep)
    print("radosgw (one mon, one memstore OSD) answered in %.1f s from nothing" % up)
    print("(a) cold read of big.f32 (%d MiB) from radosgw, best of %d: mount %.0f MB/s, "
          "curl --aws-sigv4 %.0f MB/s: ratio %.2f" % (n >> 20, ROUNDS, n / best_m / 1e6,
                                                      n / best_c / 1e6, best_c / best_m))
    print("    curl --aws-sigv4 -o FILE (keeping the bytes, as the cache does) %.0f MB/s: "
          "ratio %.2f" % (n / best_f / 1e6, best_f / best_m))
    print("(b) daemon peak RSS in (a): %d MiB; the Ceph daemons' RSS: %d MiB" % (
        hwm >> 10, g.rss_kib() >> 10))
finally:
    g.stop()
    shutil.rmtree(work, ignore_errors=True)
EOF
