#!/usr/bin/python3
"""Loads a GGUF embedding model with llama.cpp (libllama, through ctypes) and embeds texts.

Usage: embed.py MODEL TEXT...
Prints one JSON object: per text its tokens (llama_tokenize with the model's special tokens
added, as llama.cpp's embedding example does) and its embedding: the sequence's pooled vector
(llama_get_embeddings_seq) under the pooling the model's GGUF says (the context's pooling
left unspecified), or, for a model without pooling, every token's vector
(llama_get_embeddings_ith); the pooling type llama.cpp used; what it logged as warnings or
errors.  Exits 2 with a message on stderr when llama.cpp cannot load the model.  Run it as
its own process (ggml aborts the process on a broken model).  The context is made as in
generate.py (llama_context_params opaque, n_ctx written), embeddings switched on with
llama_set_embeddings.
"""
import ctypes as C
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402
import llamacpp  # noqa: E402


def bind(llama):
    generate.bind(llama)
    P = C.c_void_p
    sigs = {
        "llama_set_embeddings": (None, [P, C.c_bool]),
        "llama_pooling_type": (C.c_int, [P]),
        "llama_model_n_embd": (C.c_int32, [P]),
        "llama_get_embeddings_seq": (C.POINTER(C.c_float), [P, C.c_int32]),
        "llama_get_embeddings_ith": (C.POINTER(C.c_float), [P, C.c_int32]),
        "llama_batch_init": (generate.Batch, [C.c_int32, C.c_int32, C.c_int32]),
        "llama_batch_free": (None, [generate.Batch]),
        "llama_get_memory": (P, [P]),
        "llama_memory_clear": (None, [P, C.c_bool]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(llama, name)
        f.restype, f.argtypes = res, args


def embed_one(llama, ctx, vocab, n_embd, pooling, text):
    raw = text.encode()
    toks = (C.c_int32 * 512)()
    n = llama.llama_tokenize(vocab, raw, len(raw), toks, len(toks), True, False)
    if n <= 0:
        generate.die("tokenize failed (%d)" % n)
    batch = llama.llama_batch_init(n, 0, 1)
    for i in range(n):   # every token an output, all in sequence 0
        batch.token[i] = toks[i]
        batch.pos[i] = i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1
    batch.n_tokens = n
    mem = llama.llama_get_memory(ctx)
    if mem:
        llama.llama_memory_clear(mem, True)
    if llama.llama_decode(ctx, batch) != 0:
        generate.die("llama_decode failed")
    if pooling != 0:   # LLAMA_POOLING_TYPE_NONE: per token
        v = llama.llama_get_embeddings_seq(ctx, 0)
        if not v:
            generate.die("no pooled embedding")
        vec = [v[k] for k in range(n_embd)]
    else:
        vec = []
        for i in range(n):
            v = llama.llama_get_embeddings_ith(ctx, i)
            if not v:
                generate.die("no embedding of token %d" % i)
            vec.append([v[k] for k in range(n_embd)])
    llama.llama_batch_free(batch)
    return list(toks[:n]), vec


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    path, texts = sys.argv[1], sys.argv[2:]
    try:
        _, llama = llamacpp.load_llama()
    except OSError as e:
        generate.die(str(e))
    bind(llama)
    llama.llama_backend_init()
    model = llama.llama_model_load_from_file(os.fsencode(path),
                                             llama.llama_model_default_params())
    if not model:
        generate.die("%s: llama.cpp could not load the model" % path)
    vocab = llama.llama_model_get_vocab(model)
    cparams = llama.llama_context_default_params()
    w = cparams.words
    if (w[1], w[2]) != (2048, 512):
        generate.die("llama_context_params does not start as expected (n_batch %d, n_ubatch "
                     "%d)" % (w[1], w[2]))
    w[0] = 0  # n_ctx: the model's own
    ctx = llama.llama_init_from_model(model, cparams)
    if not ctx:
        generate.die("%s: llama.cpp could not create a context" % path)
    llama.llama_set_n_threads(ctx, 1, 1)
    llama.llama_set_embeddings(ctx, True)
    pooling = llama.llama_pooling_type(ctx)
    n_embd = llama.llama_model_n_embd(model)
    out = []
    for t in texts:
        toks, vec = embed_one(llama, ctx, vocab, n_embd, pooling, t)
        out.append({"text": t, "tokens": toks, "embedding": vec})
    result = {"pooling": pooling, "n_embd": n_embd, "texts": out,
              "warnings": llamacpp.logged()}
    llama.llama_free(ctx)
    llama.llama_model_free(model)
    llama.llama_backend_free()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
