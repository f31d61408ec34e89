#!/bin/sh
# bench/numbers.sh - editing a quantized tensor as numbers, end to end, against what the
# same work costs without tensorfs.
#
#   scripts/bench/numbers.sh [DIR]
#
# Makes (once; DIR/model.gguf is reused) a 1 GiB GGUF whose tensor "w" holds 256 MiB of
# float32 values quantized to Q4_K (64 Mi elements, 36 MiB stored; made with ggml's own
# quantizer from libggml-base.so), the rest F16.  Then, hot cache, best of RUNS (default 3):
#   plain    mount rw, change general.name, `tensorfs unmount` (a plain repack);
#   numbers  mount rw, w = np.load(npy/w.npy); w[:, 17] = 0; np.save(npy/w.npy, w);
#            `tensorfs unmount` (tensorfs requantizes the edited blocks on close and repacks);
#   ggml     ggml_quantize_chunk(Q4_K) of the 64 Mi values, one thread (what requantizing
#            the whole tensor costs with ggml).
# and prints numbers / (plain + ggml): target <= 1.5.  Needs root, /usr/bin/python3 with
# numpy, and the npm package's libggml-base.so (scripts/setup.sh installs it).
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. scripts/bench/lib.sh
bench_setup bench-numbers "${1:-}"
export TENSORFS DIR ROOT
export TFS_LLAMA_LIB="${TFS_LLAMA_LIB:-$ROOT/build/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}"
exec /usr/bin/python3 - "$DIR" <<'EOF'
import ctypes as C, os, subprocess, sys, tempfile, time
import numpy as np
from ggufgen import GGUFWriter
import llamacpp

TENSORFS = os.environ["TENSORFS"]
DIR = sys.argv[1]
SRC = os.path.join(DIR, "model.gguf")
RUNS = int(os.environ.get("RUNS", "3"))
Q4_K = 12
ROWS, COLS = 16384, 4096

g = llamacpp.load_ggml_base()
g.ggml_quantize_chunk.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64,
                                  C.c_int64, C.c_void_p]
g.ggml_quantize_chunk.restype = C.c_size_t


def ggml_q4k(x):
    out = np.empty(ROWS * COLS // 256 * 144, np.uint8)
    n = g.ggml_quantize_chunk(Q4_K, x.ctypes.data, out.ctypes.data, 0, ROWS, COLS, None)
    assert n == out.nbytes, n
    return out


values = np.random.default_rng(3).standard_normal((ROWS, COLS), dtype=np.float32)
if not os.path.exists(SRC):
    print("making %s ..." % SRC, flush=True)
    w = GGUFWriter()
    w.add_kv("general.architecture", 8, "llama")
    w.add_kv("general.name", 8, "bench-numbers")
    w.add_tensor("w", "Q4_K", ggml_q4k(values).tobytes(), ne=[COLS, ROWS])
    fill = np.ones(4096 * 4096, np.float16)
    for i in range(31):  # 1 GiB in all
        w.add_tensor("fill.%d" % i, "F16", fill, ne=[4096, 4096])
    w.write(SRC)


def run(*a):
    subprocess.run(a, check=True, capture_output=True)


def repack(edit):
    mp = tempfile.mkdtemp(prefix="tfs-bench-mnt-")
    run(TENSORFS, "mount", SRC, mp, "-o", "rw")
    try:
        t = time.perf_counter()
        edit(mp)
        run(TENSORFS, "unmount", mp)
        return time.perf_counter() - t
    finally:
        if os.path.ismount(mp):
            run(TENSORFS, "unmount", mp)
        os.rmdir(mp)


def name(mp):
    with open(os.path.join(mp, "metadata", "general.name"), "w") as f:
        f.write("run %f" % time.time())


def numbers(mp):
    p = os.path.join(mp, "npy", "w.npy")
    w = np.load(p)
    w[:, 17] = 0
    np.save(p, w)


def ggml():
    t = time.perf_counter()
    ggml_q4k(values)
    return time.perf_counter() - t


with open(SRC, "rb") as f:
    while f.read(16 << 20):
        pass
res = {"plain": [], "numbers": [], "ggml": []}
for r in range(RUNS):
    res["plain"].append(repack(name))
    res["numbers"].append(repack(numbers))
    res["ggml"].append(ggml())
b = {k: min(v) for k, v in res.items()}
print("model %s (%.0f MiB); tensor w: Q4_K [%d, %d] (%.0f MiB as float32)" % (
    SRC, os.path.getsize(SRC) / 2**20, ROWS, COLS, ROWS * COLS * 4 / 2**20))
for k, what in (("plain", "plain repack (one key)"),
                ("numbers", "np.load + edit + np.save of npy/w.npy + repack"),
                ("ggml", "ggml_quantize_chunk(Q4_K) of w, one thread")):
    print("%-50s best of %d: %6.2f s  (%s)" % (what, RUNS, b[k],
          " ".join("%.2f" % x for x in res[k])))
print("numbers / (plain + ggml) = %.2f   (target <= 1.5)" % (b["numbers"] / (b["plain"] + b["ggml"])))
EOF
