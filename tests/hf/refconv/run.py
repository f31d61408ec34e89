#!/usr/bin/python3
"""Runs llama.cpp's convert_hf_to_gguf.py, unmodified, with this folder's stand-ins.

    /usr/bin/python3 run.py LLAMA_CPP_DIR NPM_DIR CONVERTER-ARGUMENTS...

This folder goes first on sys.path, so the converter's `import transformers` finds
./transformers (see README.md). Debian 12's torch 1.13 has no float8 dtypes, which the
converter's tables name: each missing one becomes a distinct placeholder object, so the tables
build, and a safetensors tensor stored as F8_E4M3 or F8_E5M2 is decoded to float32 when it is
loaded (float8.py: exact; README.md says why). NPM_DIR is where @anush008/tokenizers is (the
tokenizer stand-in's engine).
"""
import os
import runpy
import sys

import torch


class Float8Placeholder:
    """Stands for a torch dtype this torch lacks: usable as a dict key, equal only to itself."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<torch.%s: not in torch %s>" % (self.name, torch.__version__)


def setup(src, npm):
    """torch's missing float8 dtypes as placeholders, this folder and the clone first on
    sys.path, NPM_DIR for the tokenizer stand-in; returns the converter's path (server.py
    uses this too)."""
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, Float8Placeholder(name))
    os.environ["TFS_REFCONV_NPM"] = npm
    sys.path[0:0] = [os.path.dirname(os.path.abspath(__file__)), src]
    import float8
    float8.install()
    import intquant
    intquant.install()
    # gguf-py from the clone, where the converter imports it from (its sys.path line)
    if "NO_LOCAL_GGUF" not in os.environ:
        sys.path.insert(2, os.path.join(src, "gguf-py"))
    import vocabmemo
    vocabmemo.install()
    return os.path.join(src, "convert_hf_to_gguf.py")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    script = setup(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
    sys.argv = [script] + sys.argv[3:]
    runpy.run_path(script, run_name="__main__")
