#!/usr/bin/python3
"""Loads a GGUF model with llama.cpp (libllama, through ctypes) and decodes greedily.

Usage: generate.py MODEL [--prompt TEXT] [--n N] [--key KEY ...]
Prints one JSON object: the prompt's tokens, the N generated tokens (argmax of the
logits at every step) and their text, the vocab size, the model's chat template
(llama_model_chat_template), the values of the given metadata keys
(llama_model_meta_val_str), and what llama.cpp logged as warnings or errors.  Exits 2
with a message on stderr when llama.cpp cannot load the model.  Run it as its own
process: ggml aborts the process on a broken model.

Structs passed by value: llama_batch is declared field by field (its layout has not
changed for years); llama_model_params and llama_context_params are taken as opaque
blocks larger than the real structs (x86-64 passes and returns such structs through
memory, so only the size needs to be at least right), and the only field written,
llama_context_params.n_ctx, is the first one, after checking that the two next fields
hold the documented defaults of n_batch and n_ubatch.
"""
import argparse
import ctypes as C
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llamacpp  # noqa: E402


class Batch(C.Structure):
    _fields_ = [("n_tokens", C.c_int32), ("token", C.POINTER(C.c_int32)),
                ("embd", C.POINTER(C.c_float)), ("pos", C.POINTER(C.c_int32)),
                ("n_seq_id", C.POINTER(C.c_int32)), ("seq_id", C.POINTER(C.POINTER(C.c_int32))),
                ("logits", C.POINTER(C.c_int8))]


class Opaque(C.Structure):
    """Room for llama_model_params / llama_context_params (both well under 512 bytes)."""
    _fields_ = [("words", C.c_uint32 * 128)]


def bind(llama):
    P = C.c_void_p
    sigs = {
        "llama_backend_init": (None, []),
        "llama_backend_free": (None, []),
        "llama_model_default_params": (Opaque, []),
        "llama_model_load_from_file": (P, [C.c_char_p, Opaque]),
        "llama_model_free": (None, [P]),
        "llama_model_get_vocab": (P, [P]),
        "llama_model_chat_template": (C.c_char_p, [P, C.c_char_p]),
        "llama_model_meta_val_str": (C.c_int32, [P, C.c_char_p, C.c_char_p, C.c_size_t]),
        "llama_vocab_n_tokens": (C.c_int32, [P]),
        "llama_context_default_params": (Opaque, []),
        "llama_init_from_model": (P, [P, Opaque]),
        "llama_set_n_threads": (None, [P, C.c_int32, C.c_int32]),
        "llama_free": (None, [P]),
        "llama_tokenize": (C.c_int32, [P, C.c_char_p, C.c_int32, C.POINTER(C.c_int32), C.c_int32,
                                       C.c_bool, C.c_bool]),
        "llama_token_to_piece": (C.c_int32, [P, C.c_int32, C.c_char_p, C.c_int32, C.c_int32,
                                             C.c_bool]),
        "llama_batch_get_one": (Batch, [C.POINTER(C.c_int32), C.c_int32]),
        "llama_decode": (C.c_int32, [P, Batch]),
        "llama_get_logits_ith": (C.POINTER(C.c_float), [P, C.c_int32]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(llama, name)
        f.restype, f.argtypes = res, args


def die(msg):
    print("generate: " + msg, file=sys.stderr)
    if llamacpp.logged():
        print("llama.cpp said:\n" + llamacpp.logged(), file=sys.stderr)
    sys.exit(2)


def meta(llama, model, key):
    buf = C.create_string_buffer(1 << 16)
    n = llama.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    if n < 0:
        return None
    if n >= len(buf):
        buf = C.create_string_buffer(n + 1)
        llama.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.raw[:n].decode("utf-8", "surrogateescape")


def piece(llama, vocab, tok):
    buf = C.create_string_buffer(256)
    n = llama.llama_token_to_piece(vocab, tok, buf, len(buf), 0, True)
    return buf.raw[:max(n, 0)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", default="the name of the model")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--key", action="append", default=[])
    a = ap.parse_args()

    try:
        _, llama = llamacpp.load_llama()
    except OSError as e:
        die(str(e))
    bind(llama)
    llama.llama_backend_init()
    model = llama.llama_model_load_from_file(os.fsencode(a.model), llama.llama_model_default_params())
    if not model:
        die("%s: llama.cpp could not load the model" % a.model)
    vocab = llama.llama_model_get_vocab(model)
    n_vocab = llama.llama_vocab_n_tokens(vocab)

    cparams = llama.llama_context_default_params()
    w = cparams.words
    if (w[1], w[2]) != (2048, 512):
        die("llama_context_params does not start as expected (n_batch %d, n_ubatch %d): "
            "not the llama.cpp version of %s@%s?" % (w[1], w[2], llamacpp.PACKAGE, llamacpp.VERSION))
    w[0] = 256  # n_ctx
    ctx = llama.llama_init_from_model(model, cparams)
    if not ctx:
        die("%s: llama.cpp could not create a context" % a.model)
    llama.llama_set_n_threads(ctx, 1, 1)

    text = a.prompt.encode()
    toks = (C.c_int32 * 512)()
    n = llama.llama_tokenize(vocab, text, len(text), toks, len(toks), True, False)
    if n <= 0:
        die("tokenize failed (%d)" % n)
    prompt = list(toks[:n])
    out = []
    batch_toks = (C.c_int32 * n)(*prompt)
    for _ in range(a.n):
        if llama.llama_decode(ctx, llama.llama_batch_get_one(batch_toks, len(batch_toks))) != 0:
            die("llama_decode failed")
        logits = llama.llama_get_logits_ith(ctx, -1)
        row = logits[:n_vocab]
        best = max(range(n_vocab), key=lambda i: row[i])
        out.append(best)
        batch_toks = (C.c_int32 * 1)(best)

    tmpl = llama.llama_model_chat_template(model, None)
    result = {
        "n_vocab": n_vocab,
        "prompt_tokens": prompt,
        "tokens": out,
        "text": b"".join(piece(llama, vocab, t) for t in out).decode("utf-8", "replace"),
        "chat_template": None if tmpl is None else tmpl.decode("utf-8", "surrogateescape"),
        "meta": {k: meta(llama, model, k) for k in a.key},
        "warnings": llamacpp.logged(),
    }
    llama.llama_free(ctx)
    llama.llama_model_free(model)
    llama.llama_backend_free()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
