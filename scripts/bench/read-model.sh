#!/bin/sh
# bench/read-model.sh - every tensor of a whole model read through tensorfs vs directly.
#
#   scripts/bench/read-model.sh [DIR] [-- extra mount options]
#
# Writes (once; reused from DIR/model.gguf) a 1.25 GiB GGUF laid out like a real 2.5B
# llama-style model with biases (Qwen-like): 24 layers of Q4_K/Q6_K weights, F32 norms and
# odd-sized F32 biases between them, so tensor offsets fall at many alignments modulo the page,
# an F16 embedding and a Q6_K output.  Then, with the source hot in the page cache unless
# said otherwise, prints throughput summed over all tensors and the ratios mount / direct:
#  (1) numpy.fromfile(tensors/<name>) first read after a fresh mount, and repeated,
#      vs np.fromfile(source, offset=, count=) of the same bytes;
#  (2) np.memmap of tensors/<name> (gguf-py reads this way) vs np.memmap of the source,
#      each copied out once mapped (np.array), first and repeated;
#  (3) np.load(npy/<name>.npy, mmap_mode='r') of the F32 and F16 tensors (their npy holds
#      their own bytes) vs np.memmap of the source, copied out;
#  (4) cold cache (drop_caches before each pass): numpy.fromfile through the mount vs direct;
#  (5) 4 threads reading different tensors at once (first read through a fresh mount, and
#      repeated) vs 4 threads reading the source.
# Each figure is the best of RUNS (default 3) passes, the passes alternating mount and direct
# (the machine is noisy: only ratios from one run mean anything).  Needs root (FUSE,
# drop_caches) and /usr/bin/python3 with numpy.  Environment: TENSORFS, RUNS,
# TFS_BENCH_MOUNT_OPTS (as -o options).
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. scripts/bench/lib.sh
bench_setup bench-read-model "${1:-}"
export TENSORFS DIR ROOT
exec /usr/bin/python3 - "$DIR/model.gguf" <<'EOF'
import json, os, subprocess, sys, tempfile, threading, time
import numpy as np
from ggufgen import GGUFWriter, read_gguf
import benchlib
from benchlib import drop_caches, timed

SRC = sys.argv[1]
RUNS = int(os.environ.get("RUNS", "3"))


def make_model(path):
    rng = np.random.default_rng(7)
    pool = rng.integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()

    def fill(f, n):
        while n:
            k = min(n, len(pool))
            f.write(pool[:k])
            n -= k

    w = GGUFWriter(alignment=32)
    w.add_kv("general.architecture", 8, "llama")
    w.add_kv("general.name", 8, "bench-read-model")
    h, kv, ffn, vocab = 2560, 320, 6912, 32000
    def t(name, dt, ne):
        w.add_tensor(name, dt, None, ne=ne, fill=fill)
    t("token_embd.weight", "F16", [h, vocab])
    for i in range(24):
        p = "blk.%d." % i
        t(p + "attn_norm.weight", "F32", [h])
        t(p + "attn_q.weight", "Q4_K", [h, h]); t(p + "attn_q.bias", "F32", [h])
        t(p + "attn_k.weight", "Q4_K", [h, kv]); t(p + "attn_k.bias", "F32", [kv])
        t(p + "attn_v.weight", "Q6_K", [h, kv]); t(p + "attn_v.bias", "F32", [kv + 8 * i])
        t(p + "attn_output.weight", "Q4_K", [h, h])
        t(p + "ffn_norm.weight", "F32", [h])
        t(p + "ffn_gate.weight", "Q4_K", [h, ffn])
        t(p + "ffn_up.weight", "Q4_K", [h, ffn])
        t(p + "ffn_down.weight", "Q6_K", [ffn, h])
    t("output_norm.weight", "F32", [h])
    t("output.weight", "Q6_K", [h, vocab])
    w.write(path)


if not os.path.exists(SRC):
    print("making %s ..." % SRC, flush=True)
    make_model(SRC)
G = read_gguf(SRC)
TENSORS = [(t["name"].decode(), t["abs_offset"], t["nbytes"], t["type_name"]) for t in G["tensors"]]
TOTAL = sum(n for _, _, n, _ in TENSORS)
NP = {"F32": "<f4", "F16": "<f2"}
NATIVE = [a for a in TENSORS if a[3] in NP]  # npy/ holds their own bytes
phases = sorted({off % 4096 for _, off, _, _ in TENSORS})


def Mounted():  # a fresh mount of the model: hot source, empty FUSE page cache
    return benchlib.Mounted(SRC)


def warm():
    benchlib.warm(SRC, 16 << 20)


def each(fn):
    return sum(timed(lambda a=a: fn(*a)) for a in TENSORS)


def via_mount(m):
    return lambda name, off, n, dt: np.fromfile(m.p("tensors", name), dtype=np.uint8)


def direct(name, off, n, dt):
    np.fromfile(SRC, dtype=np.uint8, offset=off, count=n)


def mm_mount(m):
    return lambda name, off, n, dt: np.array(np.memmap(m.p("tensors", name), dtype=np.uint8, mode="r"))


def mm_direct(name, off, n, dt):
    np.array(np.memmap(SRC, dtype=np.uint8, mode="r", offset=off, shape=(n,)))


def parallel(fn, k=4):
    """k threads, each reading every k-th tensor; seconds for all."""
    def work(j):
        for a in TENSORS[j::k]:
            fn(*a)
    th = [threading.Thread(target=work, args=(j,)) for j in range(k)]
    t = time.perf_counter()
    for x in th:
        x.start()
    for x in th:
        x.join()
    return time.perf_counter() - t


res = {}
def keep(key, s):
    res[key] = min(res.get(key, s), s)


print("model: %s, %d tensors, %.0f MiB of tensor data, %d distinct tensor offsets modulo 4096"
      % (SRC, len(TENSORS), TOTAL / 2**20, len(phases)))
print("kernel %s, %d CPUs, mount options %r; best of %d passes\n" % (os.uname().release,
      os.cpu_count(), benchlib.OPTS, RUNS), flush=True)
warm()
for r in range(RUNS):
    with Mounted() as m:  # hot source, empty FUSE cache
        keep("fromfile first", each(via_mount(m)))
        keep("fromfile repeated", each(via_mount(m)))
        keep("memmap repeated", each(mm_mount(m)))
    keep("direct fromfile", each(direct))
    keep("direct memmap", each(mm_direct))
    with Mounted() as m:
        keep("memmap first", each(mm_mount(m)))
        t = time.perf_counter()
        for name, *_ in NATIVE:
            np.array(np.load(m.p("npy", name + ".npy"), mmap_mode="r"))
        keep("npy mmap", time.perf_counter() - t)
        t = time.perf_counter()
        for name, off, n, dt in NATIVE:
            np.array(np.memmap(SRC, dtype=NP[dt], mode="r", offset=off, shape=(n // np.dtype(NP[dt]).itemsize,)))
        keep("npy direct", time.perf_counter() - t)
    with Mounted() as m:
        keep("4 readers first", parallel(via_mount(m)))
        keep("4 readers repeated", parallel(via_mount(m)))
    keep("4 readers direct", parallel(direct))
    # cold: nothing cached, neither the source nor the mount's pages
    with Mounted() as m:
        drop_caches()
        keep("cold fromfile", each(via_mount(m)))
    drop_caches()
    keep("cold direct", each(direct))
    warm()

gb = lambda s: TOTAL / s / 1e9
def row(label, a, b, target=None):
    print("%-44s %6.2f GB/s  vs %6.2f GB/s  ratio %.2f%s" % (label, gb(res[a]), gb(res[b]),
          res[b] / res[a], "  (target %s)" % target if target else ""))

row("numpy.fromfile tensors/, first read", "fromfile first", "direct fromfile", ">= 0.6")
row("numpy.fromfile tensors/, repeated", "fromfile repeated", "direct fromfile", ">= 0.9")
row("np.memmap tensors/ + copy, first", "memmap first", "direct memmap")
row("np.memmap tensors/ + copy, repeated", "memmap repeated", "direct memmap", ">= 0.9")
f32_total = sum(n for _, _, n, _ in NATIVE)
print("%-44s %6.2f GB/s  vs %6.2f GB/s  ratio %.2f  (F32/F16 tensors, %.1f MiB)" % (
    "np.load(npy/, mmap_mode='r') + copy", f32_total / res["npy mmap"] / 1e9,
    f32_total / res["npy direct"] / 1e9, res["npy direct"] / res["npy mmap"], f32_total / 2**20))
row("4 readers, first read", "4 readers first", "4 readers direct", ">= 0.6")
row("4 readers, repeated", "4 readers repeated", "4 readers direct")
row("cold cache, numpy.fromfile", "cold fromfile", "cold direct")
EOF
