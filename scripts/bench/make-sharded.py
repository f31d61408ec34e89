#!/usr/bin/python3
"""make-sharded.py - test sets for the mount-time benchmark.

    scripts/bench/make-sharded.py OUTDIR [--tensors N] [--shards S] [--blobs B] [--rows R] [--cols K]

writes
  OUTDIR/sharded/model-0000i-of-0000S.safetensors + model.safetensors.index.json
      N F16 tensors of [R, K] spread over S shards, written as the safetensors crate
      writes them (header space-padded to 8, tensors sorted by name within a shard);
  OUTDIR/ollama/  an Ollama store (use it as OLLAMA_MODELS) holding bench/many:int4,
      B application/vnd.ollama.image.tensor layers, each a safetensors blob with one
      MLX int4 tensor: <name> U32 [R, K/8], <name>.scale and <name>.bias BF16 [R, K/64],
      __metadata__ {"quant_type": "int4", "group_size": "64"}; plus a config blob and a
      config.json layer.

Needs only Python 3 and numpy (Debian: python3-numpy).  Deterministic (fixed seed).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

# the tests' safetensors writer (tests/mount/stgen.py; scripts/bench/lib.sh puts it on PYTHONPATH)
from stgen import bf16_bits, st_raw

GROUP = 64


def quantize_int4(w):
    """MLX affine 4-bit, group 64: packed U32 words, bf16 scales and biases."""
    rows, k = w.shape
    g = w.reshape(rows, k // GROUP, GROUP)
    lo, hi = g.min(axis=2), g.max(axis=2)
    scale = np.maximum((hi - lo) / 15.0, 1e-7).astype(np.float32)
    q = np.clip(np.rint((g - lo[..., None]) / scale[..., None]), 0, 15).astype(np.uint32)
    q = q.reshape(rows, k // 8, 8)
    words = np.zeros((rows, k // 8), dtype=np.uint32)
    for j in range(8):
        words |= q[:, :, j] << np.uint32(4 * j)
    return words.astype("<u4"), bf16_bits(scale), bf16_bits(lo)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_sharded(out, n, shards, rows, cols, rng):
    d = os.path.join(out, "sharded")
    names = [f"model.layers.{i // 10}.t{i % 10}.weight" for i in range(n)]
    per = -(-n // shards)
    weight_map, total = {}, 0
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = sorted(names[s * per:(s + 1) * per])
        tensors = []
        for name in part:
            raw = rng.standard_normal((rows, cols)).astype("<f2").tobytes()
            tensors.append((name, "F16", (rows, cols), raw))
            weight_map[name] = fname
            total += len(raw)
        write(os.path.join(d, fname), st_raw(tensors, {"format": "pt"}))
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    write(os.path.join(d, "model.safetensors.index.json"),
          (json.dumps(index, indent=2) + "\n").encode())
    return d


def make_ollama(out, n, rows, cols, rng):
    root = os.path.join(out, "ollama")
    blobs = os.path.join(root, "blobs")

    def blob(data):
        h = hashlib.sha256(data).hexdigest()
        write(os.path.join(blobs, "sha256-" + h), data)
        return {"digest": "sha256:" + h, "size": len(data)}

    layers = []
    for i in range(n):
        name = f"model.layers.{i // 10}.t{i % 10}.weight"
        w = rng.standard_normal((rows, cols)).astype(np.float32)
        words, scale, bias = quantize_int4(w)
        data = st_raw([
            (name, "U32", words.shape, words.tobytes()),
            (name + ".bias", "BF16", bias.shape, bias.astype("<u2").tobytes()),
            (name + ".scale", "BF16", scale.shape, scale.astype("<u2").tobytes()),
        ], {"quant_type": "int4", "group_size": str(GROUP)})
        layers.append({"mediaType": "application/vnd.ollama.image.tensor", **blob(data),
                       "name": name})
    cfg_json = json.dumps({"architectures": ["BenchForCausalLM"], "hidden_size": cols},
                          separators=(",", ":")).encode()
    layers.append({"mediaType": "application/vnd.ollama.image.json", **blob(cfg_json),
                   "name": "config.json"})
    config = json.dumps({"model_format": "safetensors", "model_family": "bench",
                         "model_families": None, "model_type": "", "file_type": "int4",
                         "architecture": "amd64", "os": "linux"},
                        separators=(",", ":")).encode()
    manifest = {"schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                           **blob(config)},
                "layers": layers}
    write(os.path.join(root, "manifests", "registry.ollama.ai", "bench", "many", "int4"),
          (json.dumps(manifest, separators=(",", ":")) + "\n").encode())
    return root


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--tensors", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--blobs", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--cols", type=int, default=256)
    a = ap.parse_args()
    if a.cols % GROUP or a.rows < 1 or a.tensors < 1 or a.shards < 1 or a.blobs < 1:
        sys.exit("--cols must be a multiple of 64; counts must be positive")
    rng = np.random.default_rng(1234)
    d = make_sharded(a.outdir, a.tensors, a.shards, a.rows, a.cols, rng)
    r = make_ollama(a.outdir, a.blobs, a.rows, a.cols, rng)
    print(f"sharded set: {d}")
    print(f"ollama store: {r} (model bench/many:int4)")


if __name__ == "__main__":
    main()
