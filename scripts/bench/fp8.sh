#!/bin/sh
# bench/fp8.sh - an FP8 Hugging Face repo as GGUF (issue 38): first-read throughput of the
# mount's model.gguf (every weight dequantized on read) next to cat of the repo's safetensors.
#
#   scripts/bench/fp8.sh [DIR] [GIB]
#
# Makes (once; reused from DIR/bench-llama-fp8) a llama-shaped repo of about GIB GiB of BF16
# (default 1: TinyLlama's shapes, tests/hf/make_model.py's bench repo) whose linear weights are
# then stored as DeepSeek-V3's are (F8_E4M3 codes, an F32 weight_scale_inv per 128 x 128
# block, quant_method fp8; the codes are the BF16 values' top bytes, NaN codes moved: any
# finite code does for speed), then, with the repo hot in the page cache, in one
# run (each figure the best of RUNS, default 3, passes; a fresh mount each pass):
#  (1) cat of the repo's safetensors > /dev/null;
#  (2) mount + cat model.gguf (-o outtype=auto: BF16, every FP8 weight dequantized on read),
#      the daemon's peak RSS (VmHWM);
#  (3) the same with -o fp8_as_q8 (the FP8 weights as Q8_0);
# and prints each one's seconds, GiB/s of its output, and its ratio to (1), side by side.
# Needs root (FUSE) and /usr/bin/python3 with numpy.  Environment: TENSORFS, RUNS.
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. scripts/bench/lib.sh
bench_setup bench-fp8 "${1:-}"
export TENSORFS DIR ROOT GIB="${2:-1}"
exec /usr/bin/python3 - <<'EOF'
import os
import shutil
import sys

import numpy as np

ROOT, DIR = os.environ["ROOT"], os.environ["DIR"]
RUNS = int(os.environ.get("RUNS", "3"))
sys.path.insert(0, os.path.join(ROOT, "tests", "hf"))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))
import benchlib  # noqa: E402
import make_model  # noqa: E402
import make_quant  # noqa: E402
from benchlib import Mounted, cat, say, warm_dir  # noqa: E402


def repo():
    d = os.path.join(DIR, "bench-llama-fp8")
    if os.path.exists(os.path.join(d, "config.json")):
        return d
    say("making a %s GiB llama-shaped FP8 repo in %s" % (os.environ["GIB"], d))
    src = make_model.make_bench(DIR, float(os.environ["GIB"]))
    shutil.rmtree(d, ignore_errors=True)
    os.rename(src, d)
    def fp8(name, dt, shape, data):
        if dt != "BF16" or not make_quant.quantized(name, shape):
            return [(name, dt, shape, data)]
        codes = (np.frombuffer(data, dtype=np.uint16) >> 8).astype(np.uint8)
        codes[(codes & 0x7f) == 0x7f] ^= 1
        sshape = (-(-shape[0] // 128), -(-shape[1] // 128))
        return [(name, "F8_E4M3", shape, codes.tobytes()),
                (name + "_scale_inv", "F32", sshape,
                 np.full(sshape, 2.0 ** -8, dtype=np.float32).tobytes())]
    make_quant.rewrite_repo(d, fp8, make_quant.FP8["fp8"])
    return d


def mounted_cat(d, opts):
    benchlib.OPTS = opts
    rows = []
    for _ in range(RUNS):
        with Mounted(d) as m:
            path = m.p("model.gguf")
            rows.append((cat([path]), os.path.getsize(path), m.hwm_kib()))
    return min(rows)


def main():
    d = repo()
    shards = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".safetensors"))
    size = sum(os.path.getsize(f) for f in shards)
    warm_dir(d)
    base = min(cat(shards) for _ in range(RUNS))
    rows = [("cat *.safetensors", base, size, None),
            ("mount + cat model.gguf (auto: BF16)",) + mounted_cat(d, "outtype=auto"),
            ("mount + cat model.gguf (fp8_as_q8)",) + mounted_cat(d, "fp8_as_q8")]
    say("repo: %s, %.2f GiB of safetensors (FP8 weights, block scales)" % (d, size / (1 << 30)))
    say("%-38s %8s %10s %9s %12s %14s" % ("", "seconds", "out GiB", "GiB/s", "time ratio",
                                          "daemon RSS"))
    for what, s, n, hwm in rows:
        say("%-38s %8.2f %10.2f %9.2f %11.1fx %14s" % (
            what, s, n / (1 << 30), n / (1 << 30) / s, s / base,
            "-" if hwm is None else "%.0f MB" % (hwm / 1024)))


main()
EOF
