#!/usr/bin/python3
"""The GGUF view of quantized Hugging Face repos (issue 38) against llama.cpp's converter:
each variant of make_quant.py at each outtype, and with --fp8-as-q8 ("+q8": the FP8 weights
as Q8_0), converted by the reference converter (reference.py, whose stand-in decodes float8
exactly: refconv/float8.py) and written by hf_dump, must be the same bytes.

  compare_quant.py --hf-dump PATH [--work DIR] [--tap] [--outtypes auto,f32,...,auto+q8]
                   [--quick] [--status F] [VARIANT...]
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import make_quant  # noqa: E402
import reference  # noqa: E402

OUTTYPES = ("auto", "f32", "f16", "bf16", "q8_0", "auto+q8", "f16+q8")
# --quick (the meson test): DeepSeek-V3's (a 129280-token vocabulary: the converter takes
# seconds per file) at these; the others at every outtype (NVFP4's weights are NVFP4 at
# every outtype: the ModelOpt MoE at auto and q8_0, the compressed-tensors Llama at three)
# (the int8, int2 and bitnet ones: the outtypes' conversions of float32 are the int4 ones')
QUICK = {"deepseek3-fp8": ("auto", "f32", "q8_0", "auto+q8"),
         "qwen3-ct-w8-asym": ("auto", "f32", "q8_0"),
         "qwen3-gptq-int8": ("auto", "f32", "q8_0"),
         "qwen3-gptq-int2": ("auto", "f32", "q8_0"),
         "qwen3-bitnet": ("auto", "f32", "q8_0"),
         "qwen3-modelopt-fp8": ("auto", "q8_0", "auto+q8", "f16+q8"),
         "qwen3moe-nvfp4": ("auto", "q8_0"),
         "llama-ct-nvfp4": ("auto", "f16", "q8_0"),
         "llama-modelopt-nvfp4": ("auto",),
         "qwen35-nvfp4": ("auto", "q8_0"),
         "gemma4-nvfp4": ("auto", "q8_0"),
         "gemma4moe-nvfp4": ("auto", "q8_0")}


# The converter's dequant_bitnet shifts a lazy (meta) tensor by a plain CPU one, which its
# lazy mode cannot run (torch 1.13: no meta '>>'; torch 2's device check refuses a CPU
# operand that is not 0-d): bitnet repos are converted --no-lazy, the same arithmetic eagerly
EAGER = ("qwen3-bitnet",)



def options(t):
    """An outtype column ("f16+q8") -> the converter's options."""
    base, _, q8 = t.partition("+")
    return ["--outtype", base] + (["--fp8-as-q8"] if q8 else [])


def ref_options(model, t):
    """The converter's options for the variant in directory model at column t."""
    eager = os.path.basename(os.path.normpath(model)) in EAGER
    return options(t) + (["--no-lazy"] if eager else [])


def converted(model, t, out):
    if os.path.exists(out) and os.path.getmtime(out) > compare.newest_mtime(model):
        return None
    if not os.path.exists(os.path.join(model, "tokenizer.model")):
        why = reference.missing_reason(bpe=True)
        if why:
            return "SKIP " + why
    return reference.convert(model, out, *ref_options(model, t))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf-dump", required=True)
    ap.add_argument("--work", default="/tmp/tfs-hf-quant")
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--outtypes", default=",".join(OUTTYPES))
    ap.add_argument("--status", help="also write the table to this file")
    ap.add_argument("--quick", action="store_true", help="QUICK's variants at its outtypes")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args()
    why = reference.missing_reason()
    if why:
        print("1..0 # SKIP %s" % why if a.tap else "SKIP: %s" % why)
        return 0 if a.tap else 77
    variants = a.variants or list(make_quant.VARIANTS)
    outtypes = a.outtypes.split(",")
    models, refdir, outdir = compare.work_dirs(a.work)
    for v in variants:
        if not os.path.exists(os.path.join(models, v, "config.json")):
            # (through compare.cached_repo: made once for mount_hf_quant too)
            compare.make_variants(models, [v], make_quant)
    pairs = [(v, t) for v in variants for t in outtypes
             if not a.quick or v not in QUICK or t in QUICK[v]]
    refs = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        for v, t in pairs:
            refs[v, t] = pool.submit(converted, os.path.join(models, v), t,
                                     os.path.join(refdir, "%s.%s.gguf" % (v, t)))
    if a.tap:
        print("1..%d" % len(pairs))
    results = {}
    for n, (v, t) in enumerate(pairs, 1):
        ref = os.path.join(refdir, "%s.%s.gguf" % (v, t))
        ours = os.path.join(outdir, "%s.%s.gguf" % (v, t))
        err = refs[v, t].result()
        if err is None:
            r = subprocess.run([a.hf_dump] + options(t) + [os.path.join(models, v), ours],
                               capture_output=True, text=True)
            if r.returncode:
                err = "hf_dump failed: " + r.stderr.strip()
        if err is None:
            rb, ob = open(ref, "rb").read(), open(ours, "rb").read()
            err = None if rb == ob else compare.first_difference(rb, ob)
        results[v, t] = err
        if a.tap and err is not None and err.startswith("SKIP "):
            print("ok %d - %s %s # SKIP %s" % (n, v, t, err[5:]))
        elif a.tap:
            print("%s %d - %s %s%s" % ("ok" if err is None else "not ok", n, v, t,
                                       "" if err is None else " # " + err))
        sys.stdout.flush()
    width = max(len(v) for v in variants)
    lines = ["%-*s  %s" % (width, "", "  ".join("%-7s" % t for t in outtypes))]
    for v in variants:
        lines.append("%-*s  %s" % (width, v, "  ".join(
            "%-7s" % ("-" if (v, t) not in results else "equal" if results[v, t] is None
                      else "skip"
                      if results[v, t].startswith("SKIP ") else "DIFF") for t in outtypes)))
    table = "\n".join(lines)
    print(("# " + table.replace("\n", "\n# ")) if a.tap else table)
    if not a.tap:
        for (v, t), e in sorted(results.items()):
            if e is not None:
                print("%s %s: %s" % (v, t, e))
    if a.status:
        with open(a.status, "w") as f:
            f.write(table + "\n")
    bad = sum(e is not None and not e.startswith("SKIP ") for e in results.values())
    compare.done_with(a.work, not bad)
    return 0 if a.tap or not bad else 1


if __name__ == "__main__":
    sys.exit(main())
