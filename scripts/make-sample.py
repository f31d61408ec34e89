#!/usr/bin/env python3
"""Writes examples/tiny-llama.gguf: the small sample model the README's demo mounts.

A llama model that llama.cpp loads and runs (GGUF v3): 2 layers, hidden size 64,
4 attention heads sharing 2 KV heads, feed-forward size 256, a SentencePiece-style
vocab of 384 tokens (<unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, letters
and word pieces with scores and token types), a Jinja chat template, and random
weights in F32 (norms), F16 (attention), Q4_0 (ffn_gate, ffn_up) and Q8_0 (embeddings,
ffn_down, output), quantized by the rules of ggml's reference quantizers.  It says
nothing sensible, but deterministically: the same bytes every run (fixed seed).
Shapes are given in GGUF `ne` order (fastest dimension first): a matrix of n_out rows
of n_in is [n_in, n_out].  Run it with a python3 that has numpy (/usr/bin/python3).

Usage: make-sample.py [OUT]
"""
import struct
import sys

import numpy as np

ALIGN = 32
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
F32, F16, Q4_0, Q8_0 = 0, 1, 2, 8

N_EMBD, N_FF, N_LAYER, N_HEAD, N_HEAD_KV, N_VOCAB = 64, 256, 2, 4, 2, 384
HEAD_DIM = N_EMBD // N_HEAD

# SentencePiece token types as llama.cpp reads tokenizer.ggml.token_type
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_BYTE = 1, 2, 3, 6

WORDS = ("the a of to and in is it you that he was for on are with as his they be at one name "
         "model file mount tensor llama hello "
         "have this from or had by hot word but what some we can out other were all there "
         "when up use your how said an each she which do their time if will way about many "
         "then them write would like so these her long make thing see him two has look more "
         "day could go come did number sound no most people my over know water than call "
         "first who may down side been now find any new work part take get place made live "
         "where after back little only round man year came show every good me give our under "
         "name very through just form sentence great think say help low line differ turn "
         "cause much mean before move right boy old too same tell does set three want air "
         "well also play small end put home read hand port large spell add even land here "
         "must big high such follow act why ask men change went light kind off need house "
         "picture try us again animal point mother world near build self earth father").split()

TEMPLATE = ("{%- for message in messages %}\n"
            "<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
            "{%- endfor %}\n"
            "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}")


# ==== GGUF encoding ====

def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


SCALAR = {T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?"}


def kv(key, typ, val, elem=None):
    """One key/value pair; typ T_ARRAY takes elem (the element type) and a list."""
    out = gstr(key) + struct.pack("<I", typ)
    if typ == T_STRING:
        return out + gstr(val)
    if typ in SCALAR:
        return out + struct.pack(SCALAR[typ], val)
    if typ == T_ARRAY:
        out += struct.pack("<IQ", elem, len(val))
        if elem == T_STRING:
            return out + b"".join(gstr(s) for s in val)
        return out + b"".join(struct.pack(SCALAR[elem], v) for v in val)
    raise ValueError(typ)


# ==== quantization (the block layouts of ggml's Q8_0 and Q4_0) ====

def q8_0(x):
    """|fp16 d|32 x int8 q|, x = d * q, d = amax / 127."""
    x = x.reshape(-1, 32).astype(np.float32)
    d = np.abs(x).max(axis=1) / 127
    inv = np.where(d == 0, 0, 1 / np.where(d == 0, 1, d))
    v = x * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # C's roundf
    blocks = np.empty(len(x), dtype=[("d", "<f2"), ("q", "i1", 32)])
    blocks["d"], blocks["q"] = d.astype(np.float16), q
    return blocks.tobytes()


def q4_0(x):
    """|fp16 d|16 bytes: element j in the low nibble, j + 16 in the high one|,
    x = d * (q - 8), d = (the value of largest magnitude) / -8."""
    x = x.reshape(-1, 32).astype(np.float32)
    amax = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]
    d = amax / -8
    inv = np.where(d == 0, 0, 1 / np.where(d == 0, 1, d))
    q = np.minimum(15, np.trunc(x * inv[:, None] + 8.5)).astype(np.uint8)
    blocks = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "u1", 16)])
    blocks["d"], blocks["qs"] = d.astype(np.float16), q[:, :16] | (q[:, 16:] << 4)
    return blocks.tobytes()


# ==== the model ====

def vocab():
    """(tokens, scores, token types): SentencePiece style, as llama.cpp's SPM tokenizer expects."""
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [TT_UNKNOWN, TT_CONTROL, TT_CONTROL] + [TT_BYTE] * 256
    scores = [0.0] * len(tokens)
    pieces = ["\u2581"] + list("etaoinshrdlcumwfgypbvkjxqz")
    # every prefix of "▁word", so the merges of the SPM tokenizer can reach the whole word
    for w in WORDS:
        for n in range(2, len(w) + 2):
            pieces.append("\u2581" + w[:n - 1])
    seen = set(tokens)
    for p in pieces:
        if p in seen or len(tokens) == N_VOCAB:
            continue
        seen.add(p)
        tokens.append(p)
        types.append(TT_NORMAL)
        scores.append(-float(len(tokens)) / 100)  # earlier (shorter, commoner) pieces score higher
    if len(tokens) != N_VOCAB:
        raise SystemExit("make-sample: only %d tokens for a vocab of %d" % (len(tokens), N_VOCAB))
    return tokens, scores, types


def model(rng):
    """The tensors: (name, type, ne, bytes)."""
    def weights(n_in, n_out, scale=1.0):  # numpy shape (n_out, n_in): ne [n_in, n_out]
        return rng.standard_normal((n_out, n_in)).astype(np.float32) * (scale / np.sqrt(n_in))

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype("<f4").tobytes()

    n_kv = N_HEAD_KV * HEAD_DIM
    ts = [("token_embd.weight", Q8_0, [N_EMBD, N_VOCAB], q8_0(weights(N_EMBD, N_VOCAB, 8)))]
    for b in range(N_LAYER):
        p = "blk.%d." % b
        ts.append((p + "attn_norm.weight", F32, [N_EMBD], norm(N_EMBD)))
        for w, n_out in (("attn_q", N_EMBD), ("attn_k", n_kv), ("attn_v", n_kv),
                         ("attn_output", N_EMBD)):
            ts.append((p + w + ".weight", F16, [N_EMBD, n_out],
                       weights(N_EMBD, n_out).astype("<f2").tobytes()))
        ts.append((p + "ffn_norm.weight", F32, [N_EMBD], norm(N_EMBD)))
        ts.append((p + "ffn_gate.weight", Q4_0, [N_EMBD, N_FF], q4_0(weights(N_EMBD, N_FF))))
        ts.append((p + "ffn_up.weight", Q4_0, [N_EMBD, N_FF], q4_0(weights(N_EMBD, N_FF))))
        ts.append((p + "ffn_down.weight", Q8_0, [N_FF, N_EMBD], q8_0(weights(N_FF, N_EMBD))))
    ts.append(("output_norm.weight", F32, [N_EMBD], norm(N_EMBD)))
    ts.append(("output.weight", Q8_0, [N_EMBD, N_VOCAB], q8_0(weights(N_EMBD, N_VOCAB, 4))))
    return ts


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "examples/tiny-llama.gguf"
    rng = np.random.default_rng(7)
    tokens, scores, types = vocab()
    kvs = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, "tiny-llama (tensorfs sample)"),
        kv("general.url", T_STRING, "https://example.invalid/tiny-llama"),
        kv("general.alignment", T_UINT32, ALIGN),
        kv("llama.vocab_size", T_UINT32, N_VOCAB),
        kv("llama.context_length", T_UINT32, 2048),
        kv("llama.embedding_length", T_UINT32, N_EMBD),
        kv("llama.block_count", T_UINT32, N_LAYER),
        kv("llama.feed_forward_length", T_UINT32, N_FF),
        kv("llama.attention.head_count", T_UINT32, N_HEAD),
        kv("llama.attention.head_count_kv", T_UINT32, N_HEAD_KV),
        kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5),
        kv("llama.rope.dimension_count", T_UINT32, HEAD_DIM),
        kv("llama.rope.freq_base", T_FLOAT32, 10000.0),
        kv("tokenizer.ggml.model", T_STRING, "llama"),
        kv("tokenizer.ggml.tokens", T_ARRAY, tokens, T_STRING),
        kv("tokenizer.ggml.scores", T_ARRAY, scores, T_FLOAT32),
        kv("tokenizer.ggml.token_type", T_ARRAY, types, T_INT32),
        kv("tokenizer.ggml.unknown_token_id", T_UINT32, 0),
        kv("tokenizer.ggml.bos_token_id", T_UINT32, 1),
        kv("tokenizer.ggml.eos_token_id", T_UINT32, 2),
        kv("tokenizer.ggml.add_bos_token", T_BOOL, True),
        kv("tokenizer.ggml.add_eos_token", T_BOOL, False),
        kv("tokenizer.chat_template", T_STRING, TEMPLATE),
    ]
    tensors = model(rng)

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
