#!/usr/bin/python3
"""tokenizer.ggml.pre from tokenizer.json, checked on llama.cpp's vocab GGUFs.

Usage: vocab_gguf_pre.py HF_VOCAB_DUMP NPM_DIR VOCAB_DIR WORKDIR

llama.cpp's models/ggml-vocab-*.gguf (../shared/testdata/gguf/vocab, not in this repo) hold
the tokens, token types and merges the converter wrote for real tokenizers, and its pre
name.  Their tokenizer.json files are not at hand, so one is rebuilt from the GGUF (vocab
from the tokens, merges, added tokens from the CONTROL / USER_DEFINED types) with the
normalizer, pre-tokenizer and post-processing of the original; then the converter's check
hash is computed twice, by hf_vocab_dump --pre (tensorfs, C) and by Hugging Face tokenizers
(@anush008/tokenizers, as transformers would), and the name must be the GGUF's.  Then the
rebuilt directory goes through tfs_hf_vocab_keys, whose tokens, token types and merges must
equal the GGUF's.  A vocabulary whose added tokens occur in the check text cannot be hashed
here and must be refused (mpt/gpt-neox: whitespace runs as added tokens).  deepseek-llm is
left out: its pre-tokenizer's long letter class was not available byte for byte, so neither
hf_pre_table.h nor a rebuilt file has it (tensorfs refuses that tokenizer).  TAP.
"""
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

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


REFUSED = ("mpt",)


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
        out = []
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


def rebuild(kv, name, d):
    nz, pre, post, cfg = ORIGINALS[name]
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
    json.dump(tj, open(os.path.join(d, "tokenizer.json"), "w"), ensure_ascii=False)
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


def main():
    dump, npm, vdir, work = sys.argv[1:5]
    if not os.path.isfile(os.path.join(vdir, "ggml-vocab-gpt-2.gguf")):
        print("1..0 # SKIP llama.cpp's vocab GGUFs are not in %s" % vdir)
        return 0
    if not os.path.isdir(os.path.join(npm, "node_modules", "@anush008", "tokenizers")):
        print("1..0 # SKIP npm @anush008/tokenizers is not in %s" % npm)
        return 0
    chk = subprocess.run([dump, "--chktxt"], capture_output=True).stdout
    names = list(ORIGINALS)
    print("1..%d" % (2 * len(names)))
    n = failed = 0
    js = node_hash(npm, None)
    for name in names:
        kv = read_gguf(os.path.join(vdir, "ggml-vocab-%s.gguf" % name))
        d = os.path.join(work, "vocab-" + name)
        rebuild(kv, name, d)
        want = kv.get("tokenizer.ggml.pre")
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
        diffs = [k for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                             "tokenizer.ggml.merges", "tokenizer.ggml.pre")
                 if mine_kv.get(k) != kv.get(k)]
        if diffs:
            failed += 1
        print("%s %d - %s: tokens, token_type, merges, pre %s" %
              ("not ok" if diffs else "ok", n, name, "differ: %s" % diffs if diffs else "equal"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
