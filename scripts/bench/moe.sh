#!/bin/sh
# bench/moe.sh - a mixture-of-experts Hugging Face repo's model.gguf against its own tensors,
# through the same mount (issue 30).
#
#   scripts/bench/moe.sh [DIR] [GIB]
#
# Makes (once; reused from DIR/bench-mixtral-bf16) a Mixtral-shaped BF16 repo of about GIB GiB
# (default 1: hidden 1024, 8 experts of ff 2816 per layer, 4 shards, each expert's projections
# separate tensors; tests/hf/make_moe.py --bench), then, with the repo hot in the page cache,
# in ONE mount, alternating RUNS (default 3) times:
#  (a) cat model.gguf > /dev/null   (outtype auto = bf16: every stacked expert tensor served
#      from its experts' bytes in the shards, spliced piece by piece);
#  (b) cat tensors/* > /dev/null    (the repo's own tensors, the same bytes as they lie);
#  (c) cat of the repo's safetensors as the mount serves them (model.safetensors: the shards);
# and prints the best of each, the ratios (a's throughput over b's: goal >= 0.8; over c's) and
# the daemon's peak RSS (VmHWM) after all of it.  With CONVERT=1, also cmp of model.gguf with
# convert_hf_to_gguf.py's file (tests/hf/reference.py; slow, needs ~2x the repo in RAM).
# Needs root (FUSE).  Environment: TENSORFS, RUNS, CONVERT.
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. scripts/bench/lib.sh
bench_setup bench-moe "${1:-}"
export TENSORFS DIR ROOT GIB="${2:-1}"
exec /usr/bin/python3 - <<'EOF'
import os
import subprocess
import sys

ROOT, DIR, TENSORFS = os.environ["ROOT"], os.environ["DIR"], os.environ["TENSORFS"]
RUNS = int(os.environ.get("RUNS", "3"))
sys.path.insert(0, os.path.join(ROOT, "tests", "hf"))
import make_moe  # noqa: E402
from benchlib import Mounted, cat, proc_status_kib, say, warm_dir  # noqa: E402


def main():
    repo = os.path.join(DIR, "bench-mixtral-bf16")
    if not os.path.exists(os.path.join(repo, "config.json")):
        say("making a %s GiB Mixtral-shaped BF16 repo in %s" % (os.environ["GIB"], repo))
        make_moe.make_bench(DIR, float(os.environ["GIB"]))
    size = sum(os.path.getsize(os.path.join(repo, f)) for f in os.listdir(repo))
    say("repo: %s, %.2f GiB" % (repo, size / (1 << 30)))
    warm_dir(repo)
    with Mounted(repo) as m:
        pid, mp = m.pid, m.mp
        gguf = os.path.join(mp, "model.gguf")
        tdir = os.path.join(mp, "tensors")
        tensors = [os.path.join(tdir, n) for n in sorted(os.listdir(tdir))]
        gsize = os.path.getsize(gguf)
        tsize = sum(os.path.getsize(p) for p in tensors)
        shards = [os.path.join(mp, n) for n in sorted(os.listdir(mp))
                  if n.endswith(".safetensors")]
        ssize = sum(os.path.getsize(p) for p in shards)
        g, t, s = [], [], []
        for _ in range(RUNS):
            g.append(cat([gguf]))
            t.append(cat(tensors))
            s.append(cat(shards))
        gr, tr = gsize / min(g) / (1 << 30), tsize / min(t) / (1 << 30)
        sr = ssize / min(s) / (1 << 30)
        say("cat model.gguf:  %.2f GiB in %.3f s: %.2f GiB/s" % (gsize / (1 << 30), min(g), gr))
        say("cat tensors/*:   %.2f GiB in %.3f s: %.2f GiB/s  (%d files)"
            % (tsize / (1 << 30), min(t), tr, len(tensors)))
        say("cat %s: %.2f GiB in %.3f s: %.2f GiB/s  (the shards as the mount serves them)"
            % (" ".join(os.path.basename(p) for p in shards), ssize / (1 << 30), min(s), sr,))
        say("ratio model.gguf / tensors: %.2fx (goal >= 0.8x); model.gguf / safetensors: %.2fx"
            % (gr / tr, gr / sr))
        say("daemon RSS: peak %.1f MiB, now %.1f MiB"
            % (proc_status_kib(pid, "VmHWM") / 1024, proc_status_kib(pid, "VmRSS") / 1024))
        if os.environ.get("CONVERT") == "1":
            import reference
            why = reference.missing_reason()
            if why:
                say("converter: SKIP (%s)" % why)
            else:
                out = os.path.join(DIR, "converted.gguf")
                e = reference.convert(repo, out, "--outtype", "auto")
                if e:
                    say("converter: " + e)
                else:
                    same = subprocess.run(["cmp", out, gguf]).returncode == 0
                    say("model.gguf %s the converter's file" % ("equals" if same else
                                                                "DIFFERS from"))


main()
EOF
