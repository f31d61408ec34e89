#!/usr/bin/env python3
"""The GGUF view of embedding models (BERT encoders) against llama.cpp's converter: each
variant of make_embed.py at each outtype, converted by the reference converter (reference.py)
and written by hf_dump, must be the same bytes.  compare_moe.py's run (its options, table and
--omit-defaults) over make_embed.py's variants.

  compare_embed.py --hf-dump PATH [--work DIR] [--tap] [--outtypes auto,f32,...] [--status F]
                   [--quick] [--omit-defaults] [VARIANT...]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_moe  # noqa: E402
import make_embed  # noqa: E402

# --quick: every outtype for these, auto for the others
QUICK = ("bert-f32", "nomic-f32", "nomic-moe-f32", "modernbert-f32")

if __name__ == "__main__":
    sys.exit(compare_moe.main(make_embed, QUICK))
