#!/bin/sh
# bench/hf.sh - a Hugging Face repo as GGUF: llama.cpp's convert_hf_to_gguf.py vs a mount's
# model.gguf (issue 24).
#
#   scripts/bench/hf.sh [DIR] [GIB]
#
# Makes (once; reused from DIR/bench-llama-bf16) a llama-shaped BF16 repo of about GIB GiB
# (default 1: TinyLlama's shapes, 4 shards, a SentencePiece tokenizer; tests/hf/make_model.py
# --bench), then, with the repo hot in the page cache:
#  (1) convert_hf_to_gguf.py --outtype auto (tests/hf/reference.py): wall time and peak RSS;
#  (2) tensorfs mount + cat model.gguf > /dev/null (fresh mount each pass): wall time, the
#      daemon's peak RSS (VmHWM), and cat of every tensors/ file for comparison; the two
#      files compared (cmp);
#  (3) llama.cpp (libllama of npm @node-llama-cpp/linux-x64, tests/llama) loading each file
#      (llama_model_load_from_file, mmap) and decoding one token: load time, and load plus
#      the first token (which reads every weight), the mount fresh for each pass.
# Each figure is the best of RUNS (default 3) passes.  Needs root (FUSE), /usr/bin/python3
# with the converter's packages (python3-torch, -numpy, -sentencepiece, -yaml, -tqdm).
# Environment: TENSORFS, RUNS, TFS_LLAMA_LIB.
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. scripts/bench/lib.sh
bench_setup bench-hf "${1:-}"
export TENSORFS DIR ROOT GIB="${2:-1}"
exec /usr/bin/python3 - <<'EOF'
import os
import subprocess
import sys
import time

ROOT, DIR, TENSORFS = os.environ["ROOT"], os.environ["DIR"], os.environ["TENSORFS"]
RUNS = int(os.environ.get("RUNS", "3"))
sys.path.insert(0, os.path.join(ROOT, "tests", "hf"))
import make_model  # noqa: E402
import reference  # noqa: E402
from benchlib import Mounted, cat, say, warm_dir  # noqa: E402


def timed(argv, **kw):
    """Wall time and peak RSS (KiB) of a command, through /usr/bin/time if there is one."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", RUSAGE] + argv, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t
    if r.returncode:
        sys.exit("bench-hf: %s failed: %s" % (argv[0], r.stderr.strip()[-400:]))
    return dt, int(r.stdout.strip().splitlines()[-1])


RUSAGE = ("import resource, subprocess, sys\n"
          "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
          "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
          "sys.exit(r.returncode)\n")


LLAMA = r"""
import ctypes as C, os, sys, time
sys.path.insert(0, sys.argv[1])
import llamacpp, generate
ggml, llama = llamacpp.load_llama()
generate.bind(llama)
llama.llama_backend_init()
t = time.perf_counter()
model = llama.llama_model_load_from_file(os.fsencode(sys.argv[2]), llama.llama_model_default_params())
if not model:
    sys.exit("cannot load: " + llamacpp.logged())
load = time.perf_counter() - t
ctx = llama.llama_init_from_model(model, llama.llama_context_default_params())
tok = (C.c_int32 * 1)(1)
if llama.llama_decode(ctx, llama.llama_batch_get_one(tok, 1)) != 0:
    sys.exit("decode failed")
print(load, time.perf_counter() - t)
"""


def llama_load(path):
    r = subprocess.run(["/usr/bin/python3", "-c", LLAMA, os.path.join(ROOT, "tests", "llama"),
                        path], capture_output=True, text=True)
    if r.returncode:
        sys.exit("bench-hf: llama.cpp: " + r.stderr.strip()[-400:])
    return [float(x) for x in r.stdout.split()]


def main():
    why = reference.missing_reason()
    if why:
        sys.exit("bench-hf: " + why)
    repo = os.path.join(DIR, "bench-llama-bf16")
    if not os.path.exists(os.path.join(repo, "config.json")):
        say("making a %s GiB llama-shaped BF16 repo in %s" % (os.environ["GIB"], repo))
        make_model.make_bench(DIR, float(os.environ["GIB"]))
    size = sum(os.path.getsize(os.path.join(repo, f)) for f in os.listdir(repo))
    say("repo: %s, %.2f GiB" % (repo, size / (1 << 30)))
    warm_dir(repo)
    out = os.path.join(DIR, "converted.gguf")
    conv = []
    for _ in range(RUNS):
        conv.append(timed(reference.converter_argv(repo, out, "--outtype", "auto")))
    best = min(conv)
    say("convert_hf_to_gguf.py --outtype auto: %.2f s, peak RSS %.0f MB"
        % (best[0], best[1] / 1024))

    rows = []
    for _ in range(RUNS):
        with Mounted(repo) as m:
            t = cat([os.path.join(m.mp, "model.gguf")])
            rows.append((m.mount_s + t, m.mount_s, t, m.hwm_kib()))
    best = min(rows)
    gib = os.path.getsize(out) / (1 << 30)
    say("mount + cat model.gguf:             %.2f s (mount %.3f s, cat %.2f s: %.2f GiB/s), "
        "daemon peak RSS %.0f MB" % (best[0], best[1], best[2], gib / best[2], best[3] / 1024))
    tens = []
    for _ in range(RUNS):
        with Mounted(repo) as m:
            names = sorted(os.listdir(os.path.join(m.mp, "tensors")))
            tens.append(cat([os.path.join(m.mp, "tensors", n) for n in names]))
    say("mount + cat tensors/*:              cat %.2f s (%.2f GiB/s)"
        % (min(tens), gib / min(tens)))
    with Mounted(repo) as m:
        same = subprocess.run(["cmp", out, os.path.join(m.mp, "model.gguf")]).returncode == 0
    say("model.gguf %s the converter's file" % ("equals" if same else "DIFFERS from"))

    sys.path.insert(0, os.path.join(ROOT, "tests", "llama"))
    import llamacpp
    if llamacpp.lib_dir() is None:
        say("llama.cpp: SKIP (%s)" % llamacpp.missing_reason())
        return
    a = min(llama_load(out) for _ in range(RUNS))
    b = []
    for _ in range(RUNS):
        with Mounted(repo) as m:
            b.append(llama_load(os.path.join(m.mp, "model.gguf")))
    b = min(b)
    say("llama.cpp load (+ first token), converter's file: %.3f s (%.2f s)" % (a[0], a[1]))
    say("llama.cpp load (+ first token), mount's model.gguf: %.3f s (%.2f s)" % (b[0], b[1]))


main()
EOF
