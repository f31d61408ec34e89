#!/usr/bin/python3
"""The general.* keys of the GGUF view (hf_dump) against gguf-py's Metadata (what
convert_hf_to_gguf.py writes), for many directory names, _name_or_path values, model cards and
generation_config.json files (general.sampling.*).

    compare_meta.py --hf-dump build/tests/hf_dump [--work DIR] [--tap]

Each case is a tiny model (the same weights) in a directory of the case's name, with its
config.json's _name_or_path, README.md and generation_config.json; hf_dump writes the view
(--no-vocab), and gguf-py (reference.py's, gguf 0.19.0, with python3-yaml) computes Metadata.load + set_gguf_meta_model for the same
directory and parameter count.  Key names, order, types and bytes must be equal.  Needs
python3-numpy and python3-yaml, not torch; SKIPs (77) without them.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference  # noqa: E402

CARD_FULL = """---
license: apache-2.0
language:
- en
- fr # a comment
tags:
- text-generation
- "quoted tag"
base_model: meta-llama/Llama-3.2-1B
pipeline_tag: text-generation
datasets:
- HuggingFaceFW/fineweb
- https://huggingface.co/datasets/foo/bar
library_name: transformers
---
# Card
"""

CARD_NAMES = """---
name: 'My ''special'' model'
author: Jane Doe
version: v2.1-beta
organization: "Example Org"
description: |
  A model.
  Two lines.
finetune: chat
basename: mymodel
size_label: 7B
url: https://example.com/model
doi: 10.1234/abcd
uuid: 1234-5678
repo_url: https://github.com/example/model
license: [mit, apache-2.0]
license_name: custom
license_link: https://example.com/license
language: en
tags: single-tag
---
"""

CARD_MODEL_KEYS = """---
model_name: Model Name From Card
model_creator: TheCreator
model_type: llama
base_model:
- mistralai/Mistral-7B-v0.1
- https://huggingface.co/Qwen/Qwen2.5-7B
- https://example.com/not-hf
- NousResearch/Hermes 2 Pro
- ./local-thing
dataset: [a/b, "c/d"]
model-index:
- name: x
  results:
  - task:
      type: text-generation
inference: false
widget:
  - text: "hello: world"
pipeline_tag: text-generation
languages: [de, it]
extra_gated_prompt: >-
  folded
  text
---
"""

CARD_NULLS = """---
license: other
name:
base_model:
datasets: ~
tags: []
language: no
---
"""

# the converter cannot write a version that YAML reads as a number: gguf-py fails (SKIP)
CARD_NUMBER = """---
version: 1.0
---
"""

CARD_CRLF = "---\r\nlicense: mit\r\ntags:\r\n- crlf\r\n---\r\nbody\r\n"
CARD_NO_FRONT = "# Just a heading\n\nlicense: mit\n"
CARD_UNCLOSED = "---\nlicense: bsd-3-clause\ntags:\n- a\n"

# (directory name, _name_or_path or None, README.md text or None)
# generation_config.json texts: general.sampling.*
GEN_COMMON = '{"bos_token_id": 1, "do_sample": true, "temperature": 0.6, "top_p": 0.95, ' \
    '"top_k": 20, "transformers_version": "4.51.0"}'
GEN_ALL = '{"sequence": "edskypmxt", "top_k": 40, "top_p": 0.9, "min_p": 0.05, ' \
    '"xtc_probability": 0.5, "xtc_threshold": 0.1, "temperature": 0.7, "penalty_last_n": 64, ' \
    '"penalty_repeat": 1.1, "repetition_penalty": 1.3, "mirostat": 2, "mirostat_tau": 5, ' \
    '"mirostat_eta": 0.1}'
GEN_REPETITION = '{"repetition_penalty": 1.05, "temperature": 1, "top_k": true}'
GEN_NULLS = '{"penalty_repeat": null, "repetition_penalty": 1.3, "temperature": null, ' \
    '"sequence": "", "top_p": 1e-50}'
GEN_BAD = '{"temperature": "hot", "top_k": 40.0}'      # the converter stops on these
GEN_BIG = '{"temperature": 1e39, "top_k": 4294967296}'  # (beyond FLOAT32 / INT32)
GEN_NOT_OBJECT = '[{"temperature": 0.5}]'
GEN_NOT_JSON = '{"temperature": 0.5,'
GEN_EMPTY = '{}'

CASES = [
    ("model", None, None),
    ("Meta-Llama-3.1-8B-Instruct", None, None),
    ("TinyLlama-1.1B-Chat-v1.0", None, None),
    ("SmolLM2-135M-Instruct", None, None),
    ("Qwen2.5-0.5B-Instruct", None, None),
    ("Mistral-7B-Instruct-v0.3", None, None),
    ("bloom-7b1", None, None),
    ("Mixtral-8x7B-v0.1", None, None),
    ("my model dir", None, None),
    ("Phi-3-mini-128k-instruct", None, None),
    ("llama-2-7b-chat-hf", None, None),
    ("gemma-2-9b-it-Q4_K_M", None, None),
    ("Llama-3.2-1B-Instruct-bf16", None, None),
    ("c4ai-command-r-v01", None, None),
    ("v1.5-vicuna", None, None),
    ("DeepSeek-R1-Distill-Qwen-1.5B", None, None),
    ("Qwen3-30B-A3B", None, None),
    ("granite-3.1-8b-instruct", None, None),
    ("a-b--c", None, None),
    ("x-large-small-XL", None, None),
    ("OLMo-2-1124-7B", None, None),
    ("tiny-100K", None, None),
    ("tiny-0.1M-iter5", None, None),
    ("model-fp16-lora-vision", None, None),
    ("UPPER-lower-MiXeD-3b", None, None),
    ("snake_case_name-1_5B", None, None),
    ("dir", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", None),
    ("dir", "HuggingFaceTB/SmolLM2-135M-Instruct", None),
    ("dir", "/home/user/models/foo", None),
    ("dir", "./local-7B", None),
    ("dir", "org/name/with/slashes", None),
    ("dir", "Qwen/Qwen2.5-7B-Instruct-128k", None),
    ("dir", "just a sentence", None),
    ("dir", "", None),
    ("Llama-3.2-1B", "meta-llama/Llama-3.2-1B-Instruct", CARD_FULL),
    ("dir", "x/y-1B", CARD_NAMES),
    ("dir", None, CARD_MODEL_KEYS),
    ("dir-2B", None, CARD_NULLS),
    ("dir", None, CARD_NUMBER),
    ("dir", None, CARD_CRLF),
    ("dir", None, CARD_NO_FRONT),
    ("dir", None, CARD_UNCLOSED),
    ("dir", None, None, GEN_COMMON),
    ("dir", None, CARD_FULL, GEN_ALL),
    ("dir", None, None, GEN_REPETITION),
    ("dir", None, None, GEN_NULLS),
    ("dir", None, None, GEN_BAD),
    ("dir", None, None, GEN_BIG),
    ("dir", None, None, GEN_NOT_OBJECT),
    ("dir", None, None, GEN_NOT_JSON),
    ("dir", None, None, GEN_EMPTY),
]


def skip_reason():
    for m in ("numpy", "yaml"):
        if importlib.util.find_spec(m) is None:
            return "python module %s missing" % m
    if reference.gguf_py_dir() is None:
        return reference.missing_reason()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf-dump", required=True)
    ap.add_argument("--work", default="/tmp/tfs-hf-meta")
    ap.add_argument("--tap", action="store_true")
    a = ap.parse_args()
    why = skip_reason()
    if why:
        print("1..0 # SKIP %s" % why if a.tap else "SKIP: %s" % why)
        return 0 if a.tap else 77  # (meson's TAP protocol: a plan of 0 with SKIP)
    sys.path.insert(0, reference.gguf_py_dir())
    import gguf
    import make_model
    from compare import Gguf
    from pathlib import Path
    import logging
    logging.disable(logging.CRITICAL)

    base = os.path.join(a.work, "_base")
    if not os.path.isdir(base):
        s = make_model.spec("llama-bf16")
        os.makedirs(base)
        make_model.write_config(base, s)
        make_model.write_weights(base, s, "meta")
    print("1..%d" % len(CASES) if a.tap else "", end="\n" if a.tap else "")
    failed = 0
    for n, case in enumerate(CASES, 1):
        dirname, nop, card, gen = (case + (None,))[:4]
        d = os.path.join(a.work, "case%02d" % n, dirname)
        if os.path.isdir(os.path.dirname(d)):
            shutil.rmtree(os.path.dirname(d))
        os.makedirs(d)
        cfg = json.load(open(os.path.join(base, "config.json")))
        if nop is not None:
            cfg["_name_or_path"] = nop
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        shutil.copy(os.path.join(base, "model.safetensors"), d)
        if card is not None:
            with open(os.path.join(d, "README.md"), "w", newline="") as f:
                f.write(card)
        if gen is not None:
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                f.write(gen)
        out = d + ".gguf"
        r = subprocess.run([a.hf_dump, "--no-vocab", d, out], capture_output=True, text=True)
        err = skip = None
        if r.returncode:
            err = "hf_dump failed: " + r.stderr.strip()
        else:
            g = Gguf(open(out, "rb").read())
            total = 0
            for _, dims, _, _ in g.tensors:
                p = 1
                for x in dims:
                    p *= x
                total += p
            ours = [(k[0], g.data[k[2]:k[4]]) for k in g.kvs
                    if k[0].startswith("general.") and k[0] not in (
                        "general.architecture", "general.type", "general.file_type",
                        "general.quantization_version")]
            try:
                md = gguf.Metadata.load(None, Path(d), None, total)
                if md.name is None:
                    md.name = Path(d).name
                if md.size_label is None and total > 0:
                    md.size_label = gguf.size_label(total, total, 0, 0)
                w = gguf.GGUFWriter(None, "llama")
                md.set_gguf_meta_model(w)
                want = []
                for k, v in w.kv_data[0].items():
                    if k == "general.architecture":
                        continue
                    want.append((k, w._pack_val(k, gguf.GGUFValueType.STRING, add_vtype=False)
                                 + w._pack_val(v.value, v.type, add_vtype=True)))
            except Exception as e:
                want = None
                skip = "gguf-py fails on this card (%s: %s)" % (type(e).__name__, e)
            if want is not None and ours != want:
                wk, ok_ = [k for k, _ in want], [k for k, _ in ours]
                if wk != ok_:
                    err = "keys differ: gguf-py %s, ours %s" % (wk, ok_)
                else:
                    k = next(k for (k, x), (_, y) in zip(want, ours) if x != y)
                    err = "%s: gguf-py %r, ours %r" % (k, dict(want)[k][-60:], dict(ours)[k][-60:])
        ok = err is None
        failed += not ok
        line = "%s %d - %r nop=%r card=%s%s" % ("ok" if ok else "not ok", n, dirname, nop,
                                               "yes" if card else "no",
                                               " generation_config=" + gen if gen else "")
        if skip:
            line += " # SKIP " + skip
        if a.tap:
            print(line + ("" if ok else " # " + err))
        elif not ok or skip:
            print(line + ("" if ok else ": " + err))
    if not a.tap:
        print("%d cases, %d differ" % (len(CASES), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
