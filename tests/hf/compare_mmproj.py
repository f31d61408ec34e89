#!/usr/bin/python3
"""mmproj.gguf of multimodal models against llama.cpp's converter: each variant of
make_mmproj.py at each outtype, converted by the reference converter with --mmproj
(reference.py) and written by hf_dump --mmproj, must be the same bytes; and so must the text
model of the same repo (the converter without --mmproj, hf_dump without it).

  compare_mmproj.py --hf-dump PATH [--work DIR] [--tap] [--quick] [--outtypes auto,f32,...]
                    [--status F] [--omit-defaults] [VARIANT...]

--quick converts the text model of a variant with a real tokenizer's vocabulary (Qwen2.5-VL's:
2-5 s of CPU a run, gguf-py packing it) at compare.py's BIG_VOCAB_QUICK outtypes only, at auto
only when a small-vocabulary twin of its class (qwen25vl-spm-bf16) or the MoE row whose text
model it is (llama4-vision-bf16: llama4-bf16, hf_moe's and mount_hf_moe's) has the others,
and a lean variant's not at all (make_mmproj.text_in_quick); its projector, which has no
vocabulary, at every outtype; a VARIANT+omit (below) at auto only (without its text model
where the twin's +omit has it).
--omit-defaults adds VARIANT+omit: config.json without the keys transformers' config classes
would fill in (compare.py's omit_defaults), so that the view's mirror of those defaults is
compared too; left out where that is VARIANT's config.json again (a model_type transformers
4.57 does not know, such as Qwen3.5's, whose config.json the converter reads as written).
Prints a table: variant x outtype, "equal" when both files are, else which one
differs (its first difference below).
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import make_mmproj  # noqa: E402
import reference  # noqa: E402

OUTTYPES = ("auto", "f32", "f16", "bf16", "q8_0")
KINDS = (("mmproj", ("--mmproj",)), ("text", ()))
# what +omit keeps besides compare.py's shaping keys (compare_moe.py's): the keys that size
# the experts of a MoE text model (Qwen3-VL-MoE's, Llama 4's: its dense layers' size, which are
# MoE)
compare.SHAPING |= {"num_experts", "moe_intermediate_size", "num_local_experts",
                    "intermediate_size_mlp", "interleave_moe_layer_step"}


def convert(model, outtype, out, extra):
    if os.path.exists(out) and os.path.getmtime(out) > compare.newest_mtime(model):
        return None
    return reference.convert(model, out, "--outtype", outtype, *extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf-dump", required=True)
    ap.add_argument("--work", default="/tmp/tfs-hf-mmproj")
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--outtypes", default=",".join(OUTTYPES))
    ap.add_argument("--status", help="also write the table to this file")
    ap.add_argument("--quick", action="store_true",
                    help="text models of a real tokenizer at BIG_VOCAB_QUICK outtypes only")
    ap.add_argument("--omit-defaults", action="store_true",
                    help="also VARIANT+omit: config.json without the class-defaulted keys")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args()
    why = reference.missing_reason()
    if why:
        print("1..0 # SKIP %s" % why if a.tap else "SKIP: %s" % why)
        return 0 if a.tap else 77
    variants = a.variants or list(make_mmproj.VARIANTS)
    if a.omit_defaults:
        variants = [x for v in variants for x in (v, v + compare.OMIT)]
    outtypes = a.outtypes.split(",")
    models, refdir, outdir = compare.work_dirs(a.work)
    compare.make_variants(models, [v for v in variants if not v.endswith(compare.OMIT)],
                          make_mmproj)
    for v in [v for v in variants if v.endswith(compare.OMIT)]:
        base = v[:-len(compare.OMIT)]
        if v not in a.variants and compare.omit_adds_nothing(models, base):
            variants.remove(v)   # (Qwen3.5's config.json, read as written: base's again)
            if a.tap:
                print("# %s left out: its config.json has no class-defaulted key" % v)
        else:
            compare.make_omit_variant(models, base)
    # (--quick: VARIANT+omit at auto only, its projector too: the keys it leaves out are read
    # by the same code at every outtype, in the view as in the converter; VARIANT's own
    # files at every outtype are the outtypes' paths)
    # (a variant whose text model the view does not show: its projector only)
    cases = [(v, t, k) for v in variants for t in outtypes for k, _ in KINDS
             if not (a.quick and v.endswith(compare.OMIT) and t != "auto") and
             (k == "mmproj" or (not make_mmproj.has_no_text(v.split(compare.OMIT)[0]) and
                                (not a.quick or make_mmproj.text_in_quick(v, t))))]
    refs = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        for v, t, k in cases:
            refs[v, t, k] = pool.submit(convert, os.path.join(models, v), t,
                                        os.path.join(refdir, "%s.%s.%s.gguf" % (v, t, k)),
                                        dict(KINDS)[k])
    if a.tap:
        print("1..%d" % len(cases))
    results = {}
    for n, (v, t, k) in enumerate(cases, 1):
        ref = os.path.join(refdir, "%s.%s.%s.gguf" % (v, t, k))
        ours = os.path.join(outdir, "%s.%s.%s.gguf" % (v, t, k))
        err = refs[v, t, k].result()
        if err is None:
            r = subprocess.run([a.hf_dump, "--outtype", t] + list(dict(KINDS)[k]) +
                               [os.path.join(models, v), ours], capture_output=True, text=True)
            if r.returncode:
                err = "hf_dump failed: " + r.stderr.strip()
        if err is None:
            rb, ob = open(ref, "rb").read(), open(ours, "rb").read()
            err = None if rb == ob else compare.first_difference(rb, ob)
        results[v, t, k] = err
        if a.tap:
            print("%s %d - %s %s %s%s" % ("ok" if err is None else "not ok", n, v, t, k,
                                          "" if err is None else " # " + err))
        sys.stdout.flush()
    width = max(len(v) for v in variants)
    lines = ["%-*s  %s" % (width, "", "  ".join("%-11s" % t for t in outtypes))]
    for v in variants:
        cells = []
        for t in outtypes:
            bad = [k for k, _ in KINDS if results.get((v, t, k)) is not None]
            done = "equal" if (v, t, "text") in results else "equal (mm)" \
                if (v, t, "mmproj") in results else "-"
            cells.append("%-11s" % (done if not bad else "DIFF " + "+".join(bad)))
        lines.append("%-*s  %s" % (width, v, "  ".join(cells)))
    table = "\n".join(lines)
    print(("# " + table.replace("\n", "\n# ")) if a.tap else table)
    if not a.tap:
        for key, e in sorted(results.items()):
            if e is not None:
                print("%s %s %s: %s" % (key + (e,)))
    if a.status:
        with open(a.status, "w") as f:
            f.write(table + "\n")
    bad = sum(e is not None for e in results.values())
    compare.done_with(a.work, not bad)
    return 0 if a.tap or not bad else 1


if __name__ == "__main__":
    sys.exit(main())
