#!/bin/sh
# bench/hf_export.sh - reading hf/model.safetensors (the reverse view: a GGUF as a Hugging Face
# repo) against reading the GGUF itself, side by side, for one or two builds.
#
#   scripts/bench/hf_export.sh [OTHER_TENSORFS] [DIR]
#
# Makes (once; reused from DIR) two BF16 Llama GGUFs of one layer with tests/mount/ggufgen.py:
# "narrow", rows of 64 values and a 151936-token embedding (the shape of the tests' tiny
# models: hidden size 64, a real vocabulary), and "wide", rows of 4096 (a real model's).
# Mounts each with -o hf_dtype=f32, then bf16, and reads hf/model.safetensors whole with
# its source hot in the page cache; prints MB/s of the safetensors and the daemon's CPU per
# MB, and the ratio to a plain read of the GGUF (cat) taken in the same round.  With
# OTHER_TENSORFS (another build's fs/tensorfs), both builds in turn in each round.
# Environment: TENSORFS (binary; unset: build), RUNS (rounds, default 3).  Needs root (FUSE).
set -eu
cd "$(dirname "$0")/../.."
other=""
if [ $# -ge 1 ] && [ -x "$1" ] && [ ! -d "$1" ]; then
	other=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
	shift
fi
. scripts/bench/lib.sh
bench_setup bench-hf-export "${1:-}"
export TENSORFS DIR OTHER="$other"
exec /usr/bin/python3 - <<'EOF'
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

import benchlib  # noqa: E402
import ggufgen  # noqa: E402

DIR, RUNS = os.environ["DIR"], int(os.environ.get("RUNS", "3"))
BUILDS = [("this", os.environ["TENSORFS"])] + \
    ([("other", os.environ["OTHER"])] if os.environ.get("OTHER") else [])


def make(name, hidden, vocab, ff):
    path = os.path.join(DIR, name + ".gguf")
    if os.path.exists(path):
        return path
    rng = np.random.default_rng(7)
    w = ggufgen.GGUFWriter()
    w.add_kv("general.architecture", ggufgen.STRING, "llama")
    for k, v in (("block_count", 1), ("context_length", 64), ("embedding_length", hidden),
                 ("feed_forward_length", ff), ("attention.head_count", hidden // 64),
                 ("attention.head_count_kv", hidden // 64), ("vocab_size", vocab)):
        w.add_kv("llama." + k, ggufgen.UINT32, v)
    w.add_kv("llama.attention.layer_norm_rms_epsilon", ggufgen.FLOAT32, 1e-5)
    shapes = [("token_embd.weight", (vocab, hidden)), ("output_norm.weight", (hidden,)),
              ("blk.0.attn_norm.weight", (hidden,)), ("blk.0.ffn_norm.weight", (hidden,))]
    shapes += [("blk.0.attn_%s.weight" % p, (hidden, hidden)) for p in ("q", "k", "v", "output")]
    shapes += [("blk.0.ffn_gate.weight", (ff, hidden)), ("blk.0.ffn_up.weight", (ff, hidden)),
               ("blk.0.ffn_down.weight", (hidden, ff))]
    for n, shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        if len(shape) == 1:
            w.add_tensor(n, "F32", x)
        else:
            b = (x.view(np.uint32) >> 16).astype(np.uint16)   # (truncated: any BF16 will do)
            w.add_tensor(n, "BF16", b.tobytes(), ne=list(reversed(shape)))
    w.write(path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def daemon_cpu(pid):
    """user + system seconds of process pid."""
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def one(exe, gguf, dtype):
    """(MB/s, daemon CPU ms per MB) of reading hf/model.safetensors once."""
    mnt = tempfile.mkdtemp(prefix="tfs-bench-hfx-")
    subprocess.run([exe, "mount", gguf, mnt, "-o", "hf_dtype=" + dtype], check=True)
    try:
        pid = int(os.getxattr(mnt, "user.tensorfs.pid"))
        st = os.path.join(mnt, "hf", "model.safetensors")
        size = os.path.getsize(st)
        c0 = daemon_cpu(pid)
        t = benchlib.cat([st])
        c1 = daemon_cpu(pid)
    finally:
        subprocess.run([exe, "unmount", mnt])
        os.rmdir(mnt)
    return size / t / 1e6, (c1 - c0) * 1e3 / (size / 1e6)


models = [("narrow", make("narrow", 64, 151936, 256)), ("wide", make("wide", 4096, 8192, 4096))]
for name, g in models:
    benchlib.warm(g)
    for dtype in ("f32", "bf16"):
        res = {b: [] for b, _ in BUILDS}
        plain = []
        for r in range(RUNS):
            plain.append(os.path.getsize(g) / benchlib.cat([g]) / 1e6)
            for b, exe in BUILDS:
                res[b].append(one(exe, g, dtype))
        p = statistics.median(plain)
        line = "%-6s hf_dtype=%-4s  GGUF cat %7.0f MB/s" % (name, dtype, p)
        for b, _ in BUILDS:
            mb = statistics.median(x[0] for x in res[b])
            cpu = statistics.median(x[1] for x in res[b])
            line += " | %s: %6.0f MB/s (%.2f of cat), daemon %.2f ms/MB" % (b, mb, mb / p, cpu)
        benchlib.say(line)
EOF
