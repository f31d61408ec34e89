#!/usr/bin/python3
"""Compares the GGUF view of tiny Hugging Face models (hf_dump) with what llama.cpp's
convert_hf_to_gguf.py writes for them, byte for byte, for each outtype.

    compare.py --hf-dump build/tests/hf_dump [--work DIR] [--no-vocab] [--tap] [--quick]
               [--outtypes auto,f32,...] [VARIANT...]

Qwen3: the reference (llama.cpp c392e50, Feb 2025) predates Qwen3ForCausalLM; its converter
and gguf-py are copied into WORK/ref-qwen3 with Qwen3 added as llama.cpp added it in April 2025
(Qwen3Model(Qwen2Model) with MODEL_ARCH.QWEN3: Qwen2's tensors plus attn_q_norm/attn_k_norm),
and that copy converts the qwen3 variants.

Models come from make_model.py (into WORK/models), the converter's files are kept in
WORK/ref (made again when the model is newer).  --no-vocab compares without the tokenizer's
keys: hf_dump leaves them out, and they are cut from the converter's file (its other bytes,
tensor offsets included, do not depend on them).  Prints a table (variant x outtype: equal,
or the first difference) and exits 1 when any differs.  Needs python3-torch, python3-numpy,
python3-sentencepiece, python3-yaml, python3-tqdm (Debian) for the converter; SKIPs (exit 77)
without them.
"""
import argparse
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REF = os.environ.get("TFS_LLAMA_REF", os.path.join(REPO, "..", "shared", "reference", "llama.cpp"))
OUTTYPES = ["auto", "f32", "f16", "bf16", "q8_0"]
# --quick (the meson test): every variant at auto, every outtype of these (sharded F16 with
# linear rope, permuted biases, Qwen3, special values in F32 and BF16)
QUICK = ("llama-f16-sharded", "llama-bias-f16", "qwen3-bf16", "edge-f32", "edge-bf16")

sys.path.insert(0, HERE)
import make_model  # noqa: E402


def have_converter():
    try:
        import importlib.util
        for m in ("torch", "numpy", "sentencepiece", "yaml", "tqdm"):
            if importlib.util.find_spec(m) is None:
                return "python module %s missing" % m
    except Exception as e:  # pragma: no cover
        return str(e)
    if not os.path.exists(os.path.join(REF, "convert_hf_to_gguf.py")):
        return "no reference converter at %s" % REF
    return None


# Qwen3 as llama.cpp added it (convert_hf_to_gguf.py, gguf-py/gguf/constants.py, April 2025)
QWEN3_PATCH = [
    ("gguf-py/gguf/constants.py", "    QWEN2MOE         = auto()\n",
     "    QWEN2MOE         = auto()\n    QWEN3            = auto()\n"),
    ("gguf-py/gguf/constants.py", '    MODEL_ARCH.QWEN2MOE:         "qwen2moe",\n',
     '    MODEL_ARCH.QWEN2MOE:         "qwen2moe",\n    MODEL_ARCH.QWEN3:            "qwen3",\n'),
    ("gguf-py/gguf/constants.py", "    MODEL_ARCH.QWEN2MOE: [\n",
     "    MODEL_ARCH.QWEN3: [\n" + "".join("        MODEL_TENSOR.%s,\n" % t for t in (
         "TOKEN_EMBD", "OUTPUT_NORM", "OUTPUT", "ROPE_FREQS", "ATTN_NORM", "ATTN_Q",
         "ATTN_Q_NORM", "ATTN_K", "ATTN_K_NORM", "ATTN_V", "ATTN_OUT", "FFN_NORM", "FFN_GATE",
         "FFN_DOWN", "FFN_UP")) + "    ],\n    MODEL_ARCH.QWEN2MOE: [\n"),
    ("convert_hf_to_gguf.py", '@Model.register("Qwen2VLForConditionalGeneration")\n',
     '@Model.register("Qwen3ForCausalLM")\nclass Qwen3Model(Qwen2Model):\n'
     '    model_arch = gguf.MODEL_ARCH.QWEN3\n\n\n'
     '@Model.register("Qwen2VLForConditionalGeneration")\n'),
]


def qwen3_reference(work):
    """A copy of the reference with Qwen3 added; its directory."""
    import shutil
    d = os.path.join(work, "ref-qwen3")
    if os.path.exists(os.path.join(d, "done")):
        return d
    if os.path.isdir(d):
        shutil.rmtree(d)
    shutil.copytree(REF, d, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, old, new in QWEN3_PATCH:
        p = os.path.join(d, rel)
        text = open(p, encoding="utf-8").read()
        if text.count(old) != 1:
            raise SystemExit("compare.py: cannot patch %s for Qwen3 (%r)" % (rel, old[:40]))
        open(p, "w", encoding="utf-8").write(text.replace(old, new))
    open(os.path.join(d, "done"), "w").close()
    return d


def newest_mtime(d):
    return max(os.path.getmtime(os.path.join(d, f)) for f in os.listdir(d))


def run_converter(model, outtype, out, ref=REF):
    if os.path.exists(out) and os.path.getmtime(out) > newest_mtime(model):
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ref, "gguf-py") + ":" + os.path.join(ref, "shim")
    env["NO_LOCAL_GGUF"] = "1"
    r = subprocess.run(["/usr/bin/python3", os.path.join(ref, "convert_hf_to_gguf.py"), model,
                        "--outfile", out + ".tmp", "--outtype", outtype],
                       env=env, capture_output=True, text=True)
    if r.returncode:
        return "converter failed: " + r.stderr.strip().splitlines()[-1]
    os.replace(out + ".tmp", out)
    return None


# ==== reading GGUF (enough to cut keys and to say where two files differ) ====

class Gguf:
    def __init__(self, data):
        self.data = data
        magic, ver, nt, nkv = struct.unpack_from("<IIQQ", data, 0)
        assert magic == 0x46554747 and ver == 3
        pos = 24
        self.kvs = []   # (name, type, start, end) of the whole entry
        for _ in range(nkv):
            start = pos
            name, pos = self._str(pos)
            (t,), pos = struct.unpack_from("<I", data, pos), pos + 4
            vstart = pos
            pos = self._skip(t, pos)
            self.kvs.append((name, t, start, vstart, pos))
        self.ti_start = pos
        self.tensors = []   # (name, dims, type, offset)
        for _ in range(nt):
            name, pos = self._str(pos)
            (nd,) = struct.unpack_from("<I", data, pos)
            dims = struct.unpack_from("<%dQ" % nd, data, pos + 4)
            t, off = struct.unpack_from("<IQ", data, pos + 4 + 8 * nd)
            pos += 4 + 8 * nd + 12
            self.tensors.append((name, dims, t, off))
        self.ti_end = pos
        self.data_start = (pos + 31) // 32 * 32

    def _str(self, pos):
        (n,) = struct.unpack_from("<Q", self.data, pos)
        return self.data[pos + 8:pos + 8 + n].decode("utf-8", "replace"), pos + 8 + n

    SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def _skip(self, t, pos):
        if t in self.SIZES:
            return pos + self.SIZES[t]
        if t == 8:
            return self._str(pos)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", self.data, pos)
            pos += 12
            if et in self.SIZES:
                return pos + n * self.SIZES[et]
            for _ in range(n):
                pos = self._skip(et, pos)
            return pos
        raise ValueError("bad GGUF type %d" % t)

    def value(self, i):
        _, _, _, vs, ve = self.kvs[i]
        return self.data[vs:ve]

    def without_keys(self, prefix):
        """The same file without the keys whose name starts with prefix."""
        keep = [k for k in self.kvs if not k[0].startswith(prefix)]
        out = bytearray(self.data[:8])
        out += struct.pack("<QQ", len(self.tensors), len(keep))
        for _, _, s, _, e in keep:
            out += self.data[s:e]
        out += self.data[self.ti_start:self.ti_end]
        out += b"\0" * (-len(out) % 32)
        out += self.data[self.data_start:]
        return bytes(out)


def tensor_bytes(g, i):
    name, dims, t, off = g.tensors[i]
    nxt = [o for _, _, _, o in g.tensors if o > off]
    end = g.data_start + (min(nxt) if nxt else len(g.data) - g.data_start)
    return g.data[g.data_start + off:end]


def first_difference(ref, ours):
    """A short text saying where two GGUF files differ."""
    try:
        a, b = Gguf(ref), Gguf(ours)
    except Exception as e:
        return "unreadable: %s" % e
    ka = [k[0] for k in a.kvs]
    kb = [k[0] for k in b.kvs]
    if ka != kb:
        extra = [k for k in kb if k not in ka]
        missing = [k for k in ka if k not in kb]
        if extra or missing:
            return "keys: missing %s, extra %s" % (missing[:4], extra[:4])
        return "key order: %s" % next("%s vs %s" % (x, y) for x, y in zip(ka, kb) if x != y)
    for i, k in enumerate(ka):
        if a.kvs[i][1] != b.kvs[i][1] or a.value(i) != b.value(i):
            return "key %s: %r vs %r" % (k, a.value(i)[:48], b.value(i)[:48])
    if [t[:3] for t in a.tensors] != [t[:3] for t in b.tensors]:
        for x, y in zip(a.tensors, b.tensors):
            if x[:3] != y[:3]:
                return "tensor info: %s vs %s" % (x[:3], y[:3])
        return "tensor count %d vs %d" % (len(a.tensors), len(b.tensors))
    for i, t in enumerate(a.tensors):
        x, y = tensor_bytes(a, i), tensor_bytes(b, i)
        if x != y:
            j = next((j for j in range(min(len(x), len(y))) if x[j] != y[j]), min(len(x), len(y)))
            return "tensor %s (type %d): byte %d of %d: %s vs %s" % (
                t[0], t[2], j, len(x), x[j:j + 4].hex(), y[j:j + 4].hex())
    return "sizes %d vs %d" % (len(ref), len(ours))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf-dump", required=True)
    ap.add_argument("--work", default="/tmp/tfs-hf-compare")
    ap.add_argument("--no-vocab", action="store_true")
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--outtypes", default=",".join(OUTTYPES))
    ap.add_argument("--quick", action="store_true",
                    help="every variant at auto, the other outtypes on QUICK's variants only")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args()
    why = have_converter()
    if why:
        print("1..0 # SKIP %s" % why if a.tap else "SKIP: %s" % why)
        return 0 if a.tap else 77  # (meson's TAP protocol: a plan of 0 with SKIP)
    variants = a.variants or list(make_model.VARIANTS)
    outtypes = a.outtypes.split(",")
    pairs = [(v, t) for v in variants for t in outtypes
             if not a.quick or t == "auto" or v in QUICK]
    models = os.path.join(a.work, "models")
    refdir = os.path.join(a.work, "ref")
    outdir = os.path.join(a.work, "out")
    for d in (models, refdir, outdir):
        os.makedirs(d, exist_ok=True)
    for v in variants:
        if not os.path.isdir(os.path.join(models, v)):
            make_model.make(models, v)
    results = {}
    n = 0
    if a.tap:
        print("1..%d" % len(pairs))
    for v in variants:
        for t in outtypes:
            if (v, t) not in pairs:
                continue
            n += 1
            model = os.path.join(models, v)
            ref = os.path.join(refdir, "%s.%s.gguf" % (v, t))
            ours = os.path.join(outdir, "%s.%s.gguf" % (v, t))
            conv = qwen3_reference(a.work) if make_model.spec(v)["arch"] == "Qwen3ForCausalLM" \
                else REF
            err = run_converter(model, t, ref, conv)
            if err is None:
                cmd = [a.hf_dump, "--outtype", t] + (["--no-vocab"] if a.no_vocab else [])
                r = subprocess.run(cmd + [model, ours], capture_output=True, text=True)
                if r.returncode:
                    err = "hf_dump failed: " + r.stderr.strip()
            if err is None:
                rb = open(ref, "rb").read()
                if a.no_vocab:
                    rb = Gguf(rb).without_keys("tokenizer.")
                ob = open(ours, "rb").read()
                err = None if rb == ob else first_difference(rb, ob)
            results[v, t] = err
            if a.tap:
                print("%s %d - %s %s%s" % ("ok" if err is None else "not ok", n, v, t,
                                           "" if err is None else " # " + err))
    width = max(len(v) for v in variants)
    lines = ["%-*s  %s" % (width, "", "  ".join("%-6s" % t for t in outtypes))]
    for v in variants:
        lines.append("%-*s  %s" % (width, v, "  ".join(
            "%-6s" % ("-" if (v, t) not in results else "equal" if results[v, t] is None
                      else "DIFF") for t in outtypes)))
    for (v, t), e in results.items():
        if e is not None:
            lines.append("%s %s: %s" % (v, t, e))
    print("\n".join(("# " + x if a.tap else x) for x in lines))
    return 0 if all(e is None for e in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
