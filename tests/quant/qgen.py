"""qgen.py - small llama-shaped GGUF models whose shapes exercise llama.cpp's quantization rules.

A model is a dict of hyper-parameters (MODELS below names the test set); write(path, spec)
writes it as a GGUF v3 file (tests/mount/ggufgen.py), tensors in the order convert_hf_to_gguf
writes them, weights random (normal, sigma 0.02, a fixed seed per model), F16 or F32 as
`dtype` says (norms always F32, as the converter writes them).  What each model exercises:

  l1-e64    1 layer, rows of 64: every K-quant falls back (Q4_K -> Q5_0 ...), output Q8_0
  l2-e96-gqa  rows of 96 (not of 256, of 32), GQA 4 (attn_v rules that need n_gqa >= 4)
  l8-e256   8 layers, rows of 256 but ffn_down rows of 320 (fallback on ffn_down only),
            untied output, general.file_type / quantization_version already present
  l12-tied  12 layers, tied embeddings (no output.weight: token_embd takes output's type)
  l32-e256  32 layers: use_more_bits and n_layer/8, /16 promotions by layer index, GQA 2
  l2-f32    an F32 source, ffn rows of 80 (not a multiple of 32: F16 fallback)
  moe8      2 layers of 8 experts (3-D ffn_*_exps, n_expert == 8 rules, ffn_gate_inp kept)
  odd       split.* keys (removed), a [256, 1] weight (1-D for ggml: kept), a 2-D non-weight
  l80-70b   80 layers with GQA: llama.cpp's LLM_TYPE_70B attn_v rule (tiny rows)
  align64   l2-e96-gqa's shapes in a file that says general.alignment = 64 (padded so)
  falcon16  architecture falcon (its own ffn_down / attn_output / output rules), 16 layers,
            a fused attn_qkv (attn_v-like), no ffn_gate

Usage: qgen.py DIR [NAME ...]   writes DIR/NAME.gguf for the models named (default: all).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mount"))
import ggufgen as G  # noqa: E402

BASE = dict(n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=4, n_vocab=64, tied=False,
            dtype="F16", n_expert=0, n_expert_used=0, file_type=None, qversion=False,
            split_keys=False, oddities=False, arch="llama", alignment=32)

MODELS = {
    "l1-e64": dict(n_layer=1, n_embd=64, n_ff=128, n_head=2, n_head_kv=2),
    "l2-e96-gqa": dict(n_layer=2, n_embd=96, n_ff=192, n_head=8, n_head_kv=2),
    "l8-e256": dict(n_layer=8, n_embd=256, n_ff=320, n_head=4, n_head_kv=4, file_type=1,
                    qversion=True),
    "l12-tied": dict(n_layer=12, n_embd=256, n_ff=256, n_head=4, n_head_kv=4, tied=True),
    "l32-e256": dict(n_layer=32, n_embd=256, n_ff=256, n_head=4, n_head_kv=2, n_vocab=32),
    "l2-f32": dict(n_layer=2, n_embd=256, n_ff=80, n_head=4, n_head_kv=4, dtype="F32",
                   file_type=0),
    "moe8": dict(n_layer=2, n_embd=256, n_ff=96, n_head=4, n_head_kv=4, n_expert=8,
                 n_expert_used=2),
    "odd": dict(n_layer=1, n_embd=256, n_ff=256, n_head=4, n_head_kv=1, split_keys=True,
                oddities=True, tied=True),
    "l80-70b": dict(n_layer=80, n_embd=64, n_ff=64, n_head=8, n_head_kv=2, n_vocab=16),
    "align64": dict(n_layer=2, n_embd=96, n_ff=192, n_head=8, n_head_kv=2, alignment=64),
    "falcon16": dict(n_layer=16, n_embd=256, n_ff=256, n_head=4, n_head_kv=1, n_vocab=16,
                     arch="falcon"),
}


def spec(name):
    s = dict(BASE)
    s.update(MODELS[name])
    s["name"] = name
    return s


def _weights(rng, ne, dtype):
    a = (rng.standard_normal(int(np.prod(ne))) * 0.02).astype(np.float32)
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    return a.astype("<f4").tobytes()


def write(path, s):
    rng = np.random.default_rng(sum(map(ord, s["name"])))
    w = G.GGUFWriter(alignment=s["alignment"])
    arch = s["arch"]
    if s["alignment"] != 32:
        w.add_kv("general.alignment", G.UINT32, s["alignment"])
    w.add_kv("general.architecture", G.STRING, arch)
    w.add_kv("general.name", G.STRING, "qgen " + s["name"])
    if s["file_type"] is not None:
        w.add_kv("general.file_type", G.UINT32, s["file_type"])
    w.add_kv(arch + ".context_length", G.UINT32, 256)
    w.add_kv(arch + ".embedding_length", G.UINT32, s["n_embd"])
    w.add_kv(arch + ".block_count", G.UINT32, s["n_layer"])
    w.add_kv(arch + ".feed_forward_length", G.UINT32, s["n_ff"])
    w.add_kv(arch + ".attention.head_count", G.UINT32, s["n_head"])
    w.add_kv(arch + ".attention.head_count_kv", G.UINT32, s["n_head_kv"])
    w.add_kv(arch + ".rope.dimension_count", G.UINT32, s["n_embd"] // s["n_head"])
    if arch == "falcon":
        w.add_kv(arch + ".attention.layer_norm_epsilon", G.FLOAT32, 1e-5)
    else:
        w.add_kv(arch + ".attention.layer_norm_rms_epsilon", G.FLOAT32, 1e-5)
    if s["n_expert"]:
        w.add_kv(arch + ".expert_count", G.UINT32, s["n_expert"])
        w.add_kv(arch + ".expert_used_count", G.UINT32, s["n_expert_used"])
    w.add_kv(arch + ".vocab_size", G.UINT32, s["n_vocab"])
    if s["split_keys"]:
        w.add_kv("split.no", G.UINT16, 0)
        w.add_kv("split.count", G.UINT16, 1)
        w.add_kv("split.tensors.count", G.INT32, 0)  # set below
    w.add_kv("tokenizer.ggml.model", G.STRING, "gpt2")
    if s["qversion"]:
        w.add_kv("general.quantization_version", G.UINT32, 2)

    e, ff, dt = s["n_embd"], s["n_ff"], s["dtype"]
    ekv = e // s["n_head"] * s["n_head_kv"]
    norm = lambda n: np.ones(n, dtype="<f4").tobytes()  # noqa: E731

    def add(name, ne, dtype=dt):
        w.add_tensor(name, dtype, _weights(rng, ne, dtype), ne=ne)

    add("token_embd.weight", [e, s["n_vocab"]])
    for il in range(s["n_layer"]):
        p = "blk.%d." % il
        w.add_tensor(p + "attn_norm.weight", "F32", norm(e), ne=[e])
        if arch == "falcon":
            w.add_tensor(p + "attn_norm.bias", "F32", norm(e), ne=[e])
            add(p + "attn_qkv.weight", [e, e + 2 * ekv])
            add(p + "attn_output.weight", [e, e])
            add(p + "ffn_up.weight", [e, ff])
            add(p + "ffn_down.weight", [ff, e])
            continue
        add(p + "attn_q.weight", [e, e])
        add(p + "attn_k.weight", [e, ekv])
        add(p + "attn_v.weight", [e, ekv])
        add(p + "attn_output.weight", [e, e])
        w.add_tensor(p + "ffn_norm.weight", "F32", norm(e), ne=[e])
        if s["n_expert"]:
            n = s["n_expert"]
            add(p + "ffn_gate_inp.weight", [e, n], "F32")
            add(p + "ffn_gate_exps.weight", [e, ff, n])
            add(p + "ffn_down_exps.weight", [ff, e, n])
            add(p + "ffn_up_exps.weight", [e, ff, n])
        else:
            add(p + "ffn_gate.weight", [e, ff])
            add(p + "ffn_down.weight", [ff, e])
            add(p + "ffn_up.weight", [e, ff])
    w.add_tensor("output_norm.weight", "F32", norm(e), ne=[e])
    if not s["tied"]:
        add("output.weight", [e, s["n_vocab"]])
    if s["oddities"]:
        add("blk.0.extra_col.weight", [256, 1])       # 2-D in the file, 1-D for ggml
        add("blk.0.extra_proj.bias", [e, 32])         # 2-D, not a weight
        w.add_tensor("rope_freqs.weight", "F32", norm(e // s["n_head"] // 2),
                     ne=[e // s["n_head"] // 2])
    if s["split_keys"]:
        w.kv = [(k, t, len(w.tensors) if k == "split.tensors.count" else v) for k, t, v in w.kv]
    w.write(path)
    return path


def main():
    if len(sys.argv) < 2:
        print("usage: qgen.py DIR [NAME ...]", file=sys.stderr)
        sys.exit(2)
    names = sys.argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print("qgen.py: no model %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)),
              file=sys.stderr)
        sys.exit(2)
    os.makedirs(sys.argv[1], exist_ok=True)
    for n in names:
        print(write(os.path.join(sys.argv[1], n + ".gguf"), spec(n)))


if __name__ == "__main__":
    main()
