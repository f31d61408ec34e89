#!/usr/bin/env python3
"""The GGUF view of mixture-of-experts models against llama.cpp's converter: each variant of
make_moe.py at each outtype, converted by the reference converter (reference.py) and written
by hf_dump, must be the same bytes.  compare.py's reading of GGUF and its runs of the
converter are used as they are; its table format too (--status).

  compare_moe.py --hf-dump PATH [--work DIR] [--tap] [--outtypes auto,f32,...] [--status F]
                 [--quick] [--omit-defaults] [VARIANT...]

--omit-defaults adds VARIANT+omit: config.json without the keys transformers' config class
would fill in (compare.py's), so that the view's mirror of those defaults is compared too.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import make_moe  # noqa: E402
import reference  # noqa: E402

OUTTYPES = ("auto", "f32", "f16", "bf16", "q8_0")
QUICK = ("mixtral-bf16", "qwen3moe-bf16")
# --quick: the outtype these are compared at instead of auto.  mount_hf_moe
# (tests/mount/test_hf_moe.py) mounts them at that outtype, so that one converter run of a
# real tokenizer's vocabulary (2-10 s of CPU each: 8-10 s for GPT-OSS's 200K tokens) serves
# both tests through reference.py's cache keyed by content.  A +omit twin takes it where its
# base is compared at auto (the class-defaulted keys are the same at every outtype); of
# qwen35moe-f16, auto's F16 experts kept as they are is qwen2moe-f16's path, and q8_0 adds
# the quantization of the stacked per-expert tensors
QUICK_AT = {"gptoss-mxfp4+omit": "q8_0", "gptoss-bf16+omit": "q8_0",
            "deepseek2-lite-f16+omit": "f32", "llama4-bf16+omit": "q8_0",
            "llama4-text-f16+omit": "q8_0", "qwen35moe-f16": "q8_0"}
# what +omit keeps besides compare.py's shaping keys: the keys that size the experts (left
# out, the class's default would disagree with the weights, and the converter would stop)
compare.SHAPING |= {"num_local_experts", "num_experts", "moe_intermediate_size",
                    "shared_expert_intermediate_size"}
# DeepSeek's: the MLA sizes, the routed and shared experts' counts
compare.SHAPING |= {"kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                    "v_head_dim", "n_routed_experts", "n_shared_experts"}
# Qwen3-Next's linear attention sizes
compare.SHAPING |= {"linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
                    "linear_num_key_heads", "linear_num_value_heads"}
# Llama 4's: the dense layers' size and which layers are MoE
compare.SHAPING |= {"intermediate_size_mlp", "interleave_moe_layer_step"}


def main(maker=make_moe, quick=QUICK, quick_at=None):
    """maker: the generator of the variants (make_moe, or another with VARIANTS and make);
    quick: the variants --quick runs at every outtype; quick_at: variant -> the outtype
    --quick runs it at instead of auto (make_moe's: QUICK_AT)."""
    if quick_at is None:
        quick_at = QUICK_AT if maker is make_moe else {}
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf-dump", required=True)
    ap.add_argument("--work", default="/tmp/tfs-hf-moe")
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--outtypes", default=",".join(OUTTYPES))
    ap.add_argument("--status", help="also write the table to this file")
    ap.add_argument("--quick", action="store_true",
                    help="every outtype for QUICK's variants, auto (QUICK_AT's outtype for "
                    "some) for the others and the +omit ones; not the -q variants (made for "
                    "the quantized view)")
    ap.add_argument("--omit-defaults", action="store_true",
                    help="also VARIANT+omit: config.json without the class-defaulted keys")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args()
    why = reference.missing_reason()
    if why:
        print("1..0 # SKIP %s" % why if a.tap else "SKIP: %s" % why)
        return 0 if a.tap else 77
    variants = a.variants or [v for v in maker.VARIANTS if not (a.quick and "-q-" in v)]
    if a.omit_defaults:
        variants = [x for v in variants for x in (v, v + compare.OMIT)]
    outtypes = a.outtypes.split(",")
    models, refdir, outdir = compare.work_dirs(a.work)
    for v in list(variants):
        base = v[:-len(compare.OMIT)] if v.endswith(compare.OMIT) else v
        if not os.path.isdir(os.path.join(models, base)):
            # (made once for mount_hf_moe too: compare.cached_repo)
            compare.make_variants(models, [base], maker)
        if v != base and v not in a.variants and compare.omit_adds_nothing(models, base):
            variants.remove(v)   # (the same config as base's: nothing more to compare)
            if a.tap:
                print("# %s left out: its config.json has no class-defaulted key" % v)
        elif v != base:
            compare.make_omit_variant(models, base)
    pairs = [(v, t) for v in variants for t in outtypes
             if not a.quick or t == quick_at.get(v, "auto")
             or (v in quick and compare.in_quick(maker, v, t))]
    refs = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        for v, t in pairs:
            refs[v, t] = pool.submit(compare.run_converter, os.path.join(models, v), t,
                                     os.path.join(refdir, "%s.%s.gguf" % (v, t)))
    if a.tap:
        print("1..%d" % len(pairs))
    results = {}
    for n, (v, t) in enumerate(pairs, 1):
        model = os.path.join(models, v)
        ref = os.path.join(refdir, "%s.%s.gguf" % (v, t))
        ours = os.path.join(outdir, "%s.%s.gguf" % (v, t))
        err = refs[v, t].result()
        if err is None:
            r = subprocess.run([a.hf_dump, "--outtype", t, model, ours], capture_output=True,
                               text=True)
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
    lines = ["%-*s  %s" % (width, "", "  ".join("%-6s" % t for t in outtypes))]
    for v in variants:
        lines.append("%-*s  %s" % (width, v, "  ".join(
            "%-6s" % ("-" if (v, t) not in results else "equal" if results[v, t] is None
                      else "skip" if results[v, t].startswith("SKIP ") else "DIFF")
            for t in outtypes)))
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
