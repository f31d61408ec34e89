#!/usr/bin/python3
"""make-gguf.py - a GGUF model of a given size for the read benchmarks.

    scripts/bench/make-gguf.py OUT.gguf [--size MiB] [--seed N]

Holds (names are what scripts/bench/read.sh looks for):
  big.f32        F32  [8192, 8192]  the largest tensor (256 MiB)
  ref.f32        F32  [4096, 4096]  same element count as the quantized ones
  q.q4_0 q.q8_0 q.q4_k q.q6_k       [4096, 4096] of valid random blocks (finite f16 scales)
  big.f16        F16  [8192, 8192]
  fill.N.f16     F16  [4096, 4096]  as many as it takes to reach --size (default 1024 MiB)
and a llama-like set of keys with a 100-entry tokenizer (tokens, scores, token types).
Data is pseudo-random (a random block repeated with a varying offset: fast to write, never
all zeros).  Uses tests/mount/ggufgen.py (scripts/bench/lib.sh puts tests/mount on PYTHONPATH;
standalone: PYTHONPATH=tests/mount); needs Python 3 and numpy only.
"""
import argparse
import os

import numpy as np

import ggufgen as gg

CHUNK = 8 << 20


def filler(pool):
    """fill(f, nbytes): writes nbytes taken from pool at varying offsets."""
    def fill(f, nbytes):
        k = 0
        while nbytes > 0:
            start = (k * 4099 * 4) % (len(pool) - CHUNK)
            n = min(nbytes, CHUNK)
            f.write(pool[start:start + n])
            nbytes -= n
            k += 1
    return fill


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=1024, help="MiB (at least 700)")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    f32_pool = rng.standard_normal((2 * CHUNK) // 4).astype("<f4").tobytes()
    f16_pool = rng.standard_normal((2 * CHUNK) // 2).astype("<f2").tobytes()

    w = gg.GGUFWriter(alignment=32)
    w.add_kv("general.architecture", gg.STRING, "llama")
    w.add_kv("general.name", gg.STRING, "tensorfs-bench")
    w.add_kv("llama.context_length", gg.UINT32, 4096)
    w.add_kv("llama.embedding_length", gg.UINT32, 8192)
    w.add_kv("llama.attention.layer_norm_rms_epsilon", gg.FLOAT32, 1e-5)
    w.add_kv("tokenizer.ggml.model", gg.STRING, "llama")
    w.add_kv("tokenizer.ggml.tokens", gg.ARRAY,
             (gg.STRING, ["<unk>", "<s>", "</s>"] + ["tok%d" % i for i in range(97)]))
    w.add_kv("tokenizer.ggml.scores", gg.ARRAY, (gg.FLOAT32, [-float(i) for i in range(100)]))
    w.add_kv("tokenizer.ggml.token_type", gg.ARRAY, (gg.INT32, [2, 3, 3] + [1] * 97))

    w.add_tensor("big.f32", "F32", None, ne=[8192, 8192], fill=filler(f32_pool))
    w.add_tensor("ref.f32", "F32", None, ne=[4096, 4096], fill=filler(f32_pool))
    n_q = 4096 * 4096
    for t in ("Q4_0", "Q8_0", "Q4_K", "Q6_K"):
        _, be, _ = gg.GGML_TYPES[t]
        w.add_tensor("q." + t.lower(), t, gg.random_blocks(t, n_q // be, rng), ne=[4096, 4096])
    w.add_tensor("big.f16", "F16", None, ne=[8192, 8192], fill=filler(f16_pool))
    total = sum(gg.pad(t["nbytes"], 32) for t in w.tensors)
    k = 0
    while total < (a.size << 20) - (16 << 20):
        w.add_tensor("fill.%d.f16" % k, "F16", None, ne=[4096, 4096], fill=filler(f16_pool))
        total += 4096 * 4096 * 2
        k += 1
    w.write(a.out)
    print("%s: %d tensors, %.1f MiB" % (a.out, len(w.tensors), os.path.getsize(a.out) / 2**20))


if __name__ == "__main__":
    main()
