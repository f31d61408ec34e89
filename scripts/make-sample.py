#!/usr/bin/env python3
"""Writes examples/tiny-llama.gguf: the small sample model the README's demo mounts.

A llama-shaped GGUF v3 (2 layers, hidden size 64, vocab 32) with real-looking
metadata (a chat template, a tokenizer) and tensors in F32, F16, Q8_0 and Q4_K.
Deterministic: the same bytes every run.  Usage: make-sample.py [OUT]
"""
import struct
import sys

import numpy as np

ALIGN = 32
T_UINT32, T_FLOAT32, T_STRING, T_ARRAY = 4, 6, 8, 9
F32, F16, Q8_0, Q4_K = 0, 1, 8, 12


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = gstr(key) + struct.pack("<I", typ)
    if typ == T_STRING:
        return out + gstr(val)
    if typ == T_UINT32:
        return out + struct.pack("<I", val)
    if typ == T_FLOAT32:
        return out + struct.pack("<f", val)
    if typ == T_ARRAY:  # of strings
        return out + struct.pack("<IQ", T_STRING, len(val)) + b"".join(gstr(s) for s in val)
    raise ValueError(typ)


def q8_0(x):
    x = x.reshape(-1, 32)
    d = np.abs(x).max(axis=1) / 127
    q = np.round(x / np.where(d == 0, 1, d)[:, None]).astype(np.int8)
    out = bytearray()
    for i in range(len(x)):
        out += np.float16(d[i]).tobytes() + q[i].tobytes()
    return bytes(out)


def q4_k(rng, nblocks):
    out = bytearray()
    for _ in range(nblocks):
        out += np.float16(0.01).tobytes() + np.float16(0.02).tobytes()
        out += rng.integers(0, 64, 12, dtype=np.uint8).tobytes()
        out += rng.integers(0, 256, 128, dtype=np.uint8).tobytes()
    return bytes(out)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "examples/tiny-llama.gguf"
    rng = np.random.default_rng(7)
    n_embd, n_vocab, n_ff = 64, 32, 256
    vocab = ["<unk>", "<s>", "</s>"] + ["▁" + w for w in
             "the a of to and in is it you that he was for on are with as I his they be at one have this from".split()]
    vocab = vocab[:n_vocab]
    template = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n"
                "{% endfor %}<|assistant|>\n")
    kvs = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, "tiny-llama (tensorfs sample)"),
        kv("general.url", T_STRING, "https://example.invalid/tiny-llama"),
        kv("general.alignment", T_UINT32, ALIGN),
        kv("llama.context_length", T_UINT32, 2048),
        kv("llama.embedding_length", T_UINT32, n_embd),
        kv("llama.block_count", T_UINT32, 2),
        kv("llama.feed_forward_length", T_UINT32, n_ff),
        kv("llama.attention.head_count", T_UINT32, 4),
        kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5),
        kv("tokenizer.ggml.model", T_STRING, "llama"),
        kv("tokenizer.ggml.tokens", T_ARRAY, vocab),
        kv("tokenizer.chat_template", T_STRING, template),
    ]
    tensors = []  # (name, type, ne, bytes)
    f32 = lambda *shape: rng.standard_normal(shape).astype("<f4")
    tensors.append(("token_embd.weight", Q8_0, [n_embd, n_vocab], q8_0(f32(n_vocab, n_embd))))
    for b in range(2):
        p = "blk.%d." % b
        tensors.append((p + "attn_norm.weight", F32, [n_embd], np.ones(n_embd, "<f4").tobytes()))
        for w in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensors.append((p + w + ".weight", F16, [n_embd, n_embd],
                            (f32(n_embd, n_embd) * 0.1).astype("<f2").tobytes()))
        tensors.append((p + "ffn_norm.weight", F32, [n_embd], np.ones(n_embd, "<f4").tobytes()))
        tensors.append((p + "ffn_gate.weight", Q4_K, [n_ff, n_embd], q4_k(rng, n_embd)))
        tensors.append((p + "ffn_up.weight", Q4_K, [n_ff, n_embd], q4_k(rng, n_embd)))
        tensors.append((p + "ffn_down.weight", Q8_0, [n_embd, n_ff], q8_0(f32(n_ff, n_embd) * 0.1)))
    tensors.append(("output_norm.weight", F32, [n_embd], f32(n_embd).tobytes()))
    tensors.append(("output.weight", Q8_0, [n_embd, n_vocab], q8_0(f32(n_vocab, n_embd))))

    pad = lambda n: (n + ALIGN - 1) // ALIGN * ALIGN
    infos, off = b"", 0
    for name, typ, ne, data in tensors:
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", n) for n in ne)
        infos += struct.pack("<IQ", typ, off)
        off = pad(off + len(data))
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    blob = bytearray(head + b"\0" * (pad(len(head)) - len(head)))
    for _, _, _, data in tensors:
        blob += data + b"\0" * (pad(len(data)) - len(data))
    with open(out, "wb") as f:
        f.write(blob)
    print("wrote %s (%d bytes, %d tensors)" % (out, len(blob), len(tensors)))


if __name__ == "__main__":
    main()
