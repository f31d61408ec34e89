#!/usr/bin/python3
"""check.py - tensorfs' quantization plan (codec/views/qplan.c) against llama.cpp's own
quantizer, llama_model_quantize of npm @node-llama-cpp/linux-x64 (llama.cpp 0.5.0).

For each model of qgen.py and each file type: llama_model_quantize writes REF (llamaq.py, its
own process); qplan_write prints tensorfs' plan and writes OUT with tensorfs' writer
(tfs_model_write, every tensor's bytes from tfs_tensor_convert: tfs_quantize on the
dequantized source).  Then, as ggml's own GGUF reader sees the files:
  (a) every tensor's name, place and type in REF equal the plan's;
  (b) REF's keys are the source's with the changes the plan lists (and, independently, with
      general.quantization_version and general.file_type moved to the end, split.* dropped),
      names, types and values, in order;
  (c) every tensor's bytes in OUT equal REF's;
  (d) OUT and REF are the same file, byte for byte.
A file type llama.cpp refuses for a model (an importance matrix needed, rows no fallback type
fits) must be refused by the plan too.  Variants of a type (NAME+VARIANT):
  +iq    with an importance matrix (a legacy .dat written here, ncall 1, so both sides read
         the same numbers; llama.cpp gets it through ctypes as llama_model_imatrix_data)
         holding entries for the tensors the plan makes IQ types (and Q2_K_S's Q2_K
         tensors, which need one), plus one no tensor uses: a partial imatrix, the other
         tensors quantized without weights;
  +all   entries for every weight: every Q4_0..Q6_K and IQ tensor weighted;
  +keys  +iq and the quantize.imatrix.* keys llama-quantize passes as kv_overrides;
  +pure, +leave, +types   --pure, --leave-output-tensor, --output-tensor-type q8_0 with
         --token-embedding-type q4_0.
Results: equal; refused (both refuse); header
(align64: the one legitimate header difference, see ALIGN64_WHY); differ / error: a failure.

usage: check.py [--quick | --full] [--keep DIR] [--only MODEL | CASE] [--markdown]
                [--via mount | convert]
  --quick (the meson test, about 30 s): a subset of models x types;
  --full: every model x every type and variant (500 cases: half an hour on 2 cores);
  --markdown: the matrix as a Markdown table at the end;
  --via mount: OUT is model.gguf of a real mount with -o quantize=TYPE[,imatrix=FILE] (the
  lazy, cached view of codec/views/quantize*.c; each case with its own empty cache), the
  plan still from qplan_write; --via convert: OUT is written by tensorfs convert.  The
  variants a mount has no option for (+keys, +pure, +leave, +types) are left out; a case
  the plan refuses must be refused by the mount too.  TENSORFS names the binary.
TAP on stdout; SKIP when the npm library or the qplan_write tool is missing.
QPLAN_WRITE names the tool (meson sets it); TFS_LLAMA_LIB the library directory.
"""
import concurrent.futures as cf
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggml_gguf  # noqa: E402
import ggufgen as G  # noqa: E402
import llamacpp  # noqa: E402
import qgen  # noqa: E402

PY = sys.executable
FTYPES = {  # llama-quantize's names -> llama_ftype
    "F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10,
    "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16,
    "Q5_K_M": 17, "Q6_K": 18, "IQ2_XXS": 19, "IQ2_XS": 20, "Q2_K_S": 21, "IQ3_XS": 22,
    "IQ3_XXS": 23, "IQ1_S": 24, "IQ4_NL": 25, "IQ3_S": 26, "IQ3_M": 27, "IQ2_S": 28,
    "IQ2_M": 29, "IQ4_XS": 30, "IQ1_M": 31, "BF16": 32, "TQ1_0": 36, "TQ2_0": 37,
    "MXFP4_MOE": 38, "Q1_0": 40, "Q2_0": 41,
}
# the types that need an importance matrix for some tensor of every model here
NEED_IMATRIX = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "IQ3_XXS", "IQ3_XS",
                "Q2_K_S"}
IQ_TYPES = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_NL",
            "IQ4_XS"}

QUICK = {
    "l1-e64": ["Q4_K_M", "Q3_K_S", "Q6_K", "IQ4_XS", "TQ1_0", "Q4_0"],
    "l2-e96-gqa": ["Q2_K", "Q4_K_S", "IQ4_NL", "IQ3_S", "Q8_0", "IQ2_XS+iq", "Q6_K+all",
                   "Q5_0+all"],
    "l8-e256": ["Q4_K_M", "Q3_K_M", "Q5_K_M", "IQ3_M", "BF16", "Q2_K_S", "Q2_K_S+iq",
                "Q4_0+iq", "IQ3_S+keys", "Q3_K_M+pure", "Q4_K_M+leave", "Q4_K_M+all",
                "Q5_1+all", "Q2_K_S+all"],
    "l12-tied": ["Q4_K_M", "Q3_K_L", "IQ2_M+iq", "Q4_K_M+types"],
    "l2-f32": ["F16", "Q4_0", "Q5_K_S", "Q1_0"],
    "moe8": ["Q4_K_M", "MXFP4_MOE", "IQ3_XXS+iq", "Q3_K_M+all", "Q4_1+all"],
    "odd": ["Q4_K_M", "F32", "Q2_0"],
    "l80-70b": ["Q3_K_S"],
    "falcon16": ["Q4_K_M", "Q3_K_L"],
    "align64": ["Q4_K_M"],
}


def tool():
    t = os.environ.get("QPLAN_WRITE")
    if t and os.access(t, os.X_OK):
        return t
    for b in ("build-E", "build"):
        p = os.path.join(HERE, "..", "..", b, "tests", "qplan_write")
        if os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


# ==== importance matrices (llama.cpp's legacy .dat) ====

def write_imatrix(path, entries):
    """entries: {name: float32 array}; ncall 1 (the weights are the sums as they are)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for name, a in sorted(entries.items()):
            b = name.encode()
            f.write(struct.pack("<i", len(b)) + b + struct.pack("<ii", 1, a.size))
            f.write(a.astype("<f4").tobytes())
        ds = b"qgen"
        f.write(struct.pack("<i", 1) + struct.pack("<i", len(ds)) + ds)


def imatrix_for(src, names=None):
    """An importance matrix for the 2-D+ weights of src (or those named), as npz + .dat."""
    import numpy as np
    view = ggml_gguf.read(src, with_bytes=False)
    rng = np.random.default_rng(7)
    entries = {}
    for t in view["tensors"]:
        ne = t["ne"]
        if not t["name"].endswith("weight") or ne[1] == 1 or "_norm" in t["name"]:
            continue
        if names is not None and t["name"] not in names:
            continue
        entries[t["name"]] = rng.uniform(0.1, 2.0, ne[0] * ne[2]).astype(np.float32)
    return entries


# ==== one case ====

# options of llama-quantize: (qplan_write's arguments, llamaq.py's)
OPTIONS = {
    "pure": (["--pure"], ["--pure"]),
    "leave": (["--leave-output"], ["--leave-output"]),
    "types": (["--output-type", "Q8_0", "--token-type", "Q4_0"],
              ["--output-type", "8", "--token-type", "2"]),
}


class Case:
    def __init__(self, model, ftype, work, imatrix=None):
        # imatrix: None, "iq", "all", "keys", or an OPTIONS name
        self.model, self.ftype, self.imatrix = model, ftype, imatrix
        self.src = os.path.join(work, model + ".gguf")
        tag = "%s-%s%s" % (model, ftype, "+" + imatrix if imatrix else "")
        self.name = tag
        self.dir = os.path.join(work, tag)
        self.result, self.why = None, ""
        self.prepared = None   # prepare()'s answer, when main() asked for it

    def label(self):
        return self.name

    def prepare(self, qw):
        """The importance matrix the case needs, written; (qplan_write's extra arguments,
        llamaq.py's, the .dat or None)."""
        import numpy as np
        os.makedirs(self.dir, exist_ok=True)
        dat = npz = None
        extra_tfs, extra_ref = [], []
        if self.imatrix in OPTIONS:
            extra_tfs, extra_ref = OPTIONS[self.imatrix]
        elif self.imatrix:
            dat, npz = os.path.join(self.dir, "im.dat"), os.path.join(self.dir, "im.npz")
            entries = imatrix_for(self.src)
            write_imatrix(dat, entries)
            if self.imatrix in ("iq", "keys"):
                # the plan with an imatrix, then only the entries of its IQ tensors
                p = run([qw, self.src, self.ftype, "--imatrix", dat])
                if p.returncode == 0:
                    plan = json.loads(p.stdout)
                    keep = {t["name"] for t in plan["tensors"] if t["type"] in IQ_TYPES or
                            (self.ftype == "Q2_K_S" and t["type"] == "Q2_K")}
                    entries = {k: v for k, v in entries.items() if k in keep}
                # an entry no tensor uses: the imatrix is there (it changes some mixes'
                # rules) even when no tensor of the plan takes weights
                entries["qgen.unused.weight"] = np.ones(32, dtype=np.float32)
                write_imatrix(dat, entries)
            np.savez(npz, **entries)
            extra_tfs = ["--imatrix", dat]
            extra_ref = ["--imatrix", npz]
            if self.imatrix == "keys" or VIA:
                # the keys llama-quantize adds through kv_overrides when given an imatrix (a
                # mount adds them as it does: the file as given, the .dat's trailer).  The
                # file's name as a path relative to the case's directory: the output holds it,
                # and a temporary directory's name in it made llamaq.py's cache key differ in
                # each run (the sanitizer run quantized again what the normal run had); a
                # mount gives the absolute path, which it then must have
                shown = dat if VIA else os.path.basename(dat)
                extra_tfs += ["--imatrix-keys", shown, "qgen", "1"]
                extra_ref += ["--kv", "quantize.imatrix.file=str:" + shown,
                              "--kv", "quantize.imatrix.dataset=str:qgen",
                              "--kv", "quantize.imatrix.entries_count=int:%d" % len(entries),
                              "--kv", "quantize.imatrix.chunks_count=int:1"]
        return extra_tfs, extra_ref, dat

    def ref_args(self, extra_ref):
        return [self.src, os.path.join(self.dir, "ref.gguf"), str(FTYPES[self.ftype])] + \
            extra_ref

    def run(self, qw, batch=None):
        """batch: the process of llamaq.py making this case's reference with others (its
        file then in llamaq.py's cache)."""
        out = os.path.join(self.dir, "tfs.gguf")
        extra_tfs, extra_ref, dat = self.prepared or self.prepare(qw)
        if not VIA:   # (while the batch runs)
            t = run([qw, self.src, self.ftype, out] + extra_tfs)
        ref = self.ref_args(extra_ref)[1]
        if batch and batch.made(self):   # (its file written; else the case's own run says why)
            r = subprocess.CompletedProcess([], 0, b"", b"")
        else:
            r = run([PY, os.path.join(HERE, "llamaq.py")] + self.ref_args(extra_ref))
        if r.returncode == 2:
            raise RuntimeError("llamaq.py: " + r.stderr.decode())
        if VIA:
            t = run([qw, self.src, self.ftype] + extra_tfs)
            v = through_tensorfs(self, out, dat)
            if (v.returncode == 0) != (t.returncode == 0):
                self.result = "differ"
                self.why = "the plan %s but %s %s: %s" % (
                    "refuses" if t.returncode else "is made", VIA,
                    "works" if v.returncode == 0 else "fails", v.stderr.decode().strip())
                return False
        ref_ok, tfs_ok = r.returncode == 0, t.returncode == 0
        ref_err = _llama_error(r.stderr.decode())
        tfs_err = t.stderr.decode().strip().split("\n")[0]
        if not ref_ok and not tfs_ok:
            self.result, self.why = "refused", "both refuse: llama.cpp: %s; tensorfs: %s" % (
                ref_err, tfs_err)
            return True
        if not ref_ok or not tfs_ok:
            self.result = "differ"
            self.why = ("llama.cpp refuses (%s) but tensorfs plans it" % ref_err if not ref_ok
                        else "tensorfs refuses (%s) but llama.cpp writes it" % tfs_err)
            return False
        plan = json.loads(t.stdout)
        if self.model == "align64":
            probs = compare_align64(ref, out, plan)
            self.result = "differ" if probs else "header"
            self.why = "; ".join(probs) if probs else ALIGN64_WHY
            return not probs
        probs, differ = compare(self.src, ref, out, plan, FTYPES[self.ftype],
                                self.imatrix == "keys" or (VIA and dat is not None))
        if probs:
            self.result, self.why = "differ", "; ".join(probs[:6]) + (
                " (+%d more)" % (len(probs) - 6) if len(probs) > 6 else "")
            return False
        self.result = "equal"
        shutil.rmtree(self.dir, ignore_errors=True)
        return True


VIA = None  # --via mount | convert


def through_tensorfs(case, out, dat):
    """OUT written through a real mount's model.gguf (or tensorfs convert), quantized as the
    case says with an empty cache of its own; the CompletedProcess of the mount (convert)."""
    tfs = os.environ.get("TENSORFS") or os.path.join(HERE, "..", "..", "build", "fs", "tensorfs")
    opts = "quantize=%s,cache=%s" % (case.ftype, os.path.join(case.dir, "cache"))
    if dat:
        opts += ",imatrix=" + dat
    if VIA == "convert":
        return run([tfs, "convert", case.src, out, "-o", opts])
    mp = tempfile.mkdtemp(prefix="tfs-qmnt-")
    try:
        m = run([tfs, "mount", case.src, mp, "-o", opts])
        if m.returncode == 0:
            try:
                shutil.copyfile(os.path.join(mp, "model.gguf"), out)
            finally:
                run([tfs, "unmount", mp])
        return m
    finally:
        os.rmdir(mp)


def _llama_error(log):
    for line in log.splitlines():
        if "failed to quantize" in line:
            return line.split("failed to quantize:", 1)[-1].strip()
    lines = [l for l in log.splitlines() if l.strip()]
    return lines[-1] if lines else "?"


def expected_keys(src_kv, ftype):
    """The keys llama_model_quantize writes, from the source's, by llama-quant.cpp's rules."""
    drop = {"general.quantization_version", "general.file_type", "split.no", "split.count",
            "split.tensors.count"}
    out = [(k["key"], k["type"], k["value"]) for k in src_kv if k["key"] not in drop]
    out.append(("general.quantization_version", "uint32", 2))
    out.append(("general.file_type", "uint32", ftype))
    return out


def planned_keys(src_kv, plan):
    """The source's keys with the plan's changes applied (as tfs_qplan_apply_kv does)."""
    keys = [(k["key"], k["type"], k["value"]) for k in src_kv]
    for c in plan["kv"]:
        keys = [k for k in keys if k[0] != c["key"]]
        if c["op"] == "append":
            raw = bytes.fromhex(c["hex"])
            if c["type"] == 4:
                keys.append((c["key"], "uint32", struct.unpack("<I", raw)[0]))
            elif c["type"] == 8:
                keys.append((c["key"], "string", raw[8:].decode("utf-8", "surrogateescape")))
            else:
                keys.append((c["key"], "type%d" % c["type"], c["hex"]))
    return keys


def compare(src, ref, out, plan, ftype, imatrix_keys=False):
    probs = []
    s, r, o = (ggml_gguf.read(p) for p in (src, ref, out))
    # (a) tensors: order, names, types, shapes
    rt, pt = r["tensors"], plan["tensors"]
    if [t["name"] for t in rt] != [t["name"] for t in pt]:
        probs.append("(a) tensor order: llama %s... plan %s..." % (
            [t["name"] for t in rt][:3], [t["name"] for t in pt][:3]))
    for a, b in zip(rt, pt):
        if a["name"] == b["name"] and a["type"] != b["type_id"]:
            probs.append("(a) %s: llama %s, plan %s" % (a["name"], a["type_name"], b["type"]))
        if a["name"] == b["name"] and (a["offset"] != b["offset"] or a["size"] != b["nbytes"]):
            probs.append("(a) %s: llama at %d (%d bytes), plan at %d (%d)" % (
                a["name"], a["offset"], a["size"], b["offset"], b["nbytes"]))
    # (b) keys
    ref_keys = [(k["key"], k["type"], k["value"]) for k in r["kv"]]
    if not imatrix_keys and ref_keys != expected_keys(s["kv"], ftype):
        probs.append("(b) llama's keys are not the source's + file_type/quantization_version")
    pk = planned_keys(s["kv"], plan)
    if ref_keys != pk:
        diff = [x for x in zip(ref_keys, pk) if x[0] != x[1]][:2]
        probs.append("(b) keys: llama vs plan %s (%d vs %d keys)" % (diff, len(ref_keys), len(pk)))
    # (c) tensor bytes
    ot = {t["name"]: t for t in o["tensors"]}
    bad = [t["name"] for t in rt if t["name"] not in ot or ot[t["name"]]["sha256"] != t["sha256"]]
    if bad:
        probs.append("(c) bytes differ in %d tensors: %s" % (len(bad), ", ".join(bad[:4])))
    differ = set(bad)
    # (d) the whole file
    with open(ref, "rb") as f1, open(out, "rb") as f2:
        a, b = f1.read(), f2.read()
    if a != b:
        at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        probs.append("(d) files differ from byte %d (sizes %d, %d; data at %d, %d)" % (
            at, len(a), len(b), r["data_offset"], o["data_offset"]))
    return probs, differ


ALIGN64_WHY = ("the one legitimate header difference: the source says general.alignment = "
               "64; llama.cpp copies the key but pads the data section and every tensor to 32, "
               "a file ggml's own reader then refuses; tensorfs pads to 64 as the key says. "
               "Keys, tensor names, types, shapes and bytes are the same")


def _header_end(path):
    """The byte where a GGUF's tensor infos end (before the padding to the data)."""
    with open(path, "rb") as f:
        buf = f.read()
    c = G._Cur(buf)
    c.p = 8
    n_t, n_kv = c.un("qq")
    for _ in range(n_kv):
        c.string()
        (vt,) = c.un("I")
        c.value(vt)
    for _ in range(n_t):
        c.string()
        (nd,) = c.un("I")
        c.un("%dq" % nd)
        c.un("IQ")
    return buf, c.p


def compare_align64(ref, out, plan):
    """llama.cpp's file, which ggml refuses, read with the padding it really used (32)."""
    probs = []
    try:
        ggml_gguf.read(ref, with_bytes=False)
        probs.append("ggml reads llama.cpp's file: the alignment difference is gone?")
    except OSError:
        pass
    o = ggml_gguf.read(out)
    if o["alignment"] != 64:
        probs.append("tensorfs' file does not declare alignment 64")
    rbuf, rend = _header_end(ref)
    obuf, oend = _header_end(out)
    r, q = G.read_gguf(ref), G.read_gguf(out)
    if r["kv"] != q["kv"]:
        probs.append("keys differ")
    rdata = G.pad(rend, 32)
    off = 0
    for a, b, p in zip(r["tensors"], q["tensors"], plan["tensors"]):
        if (a["name"], a["dtype"], a["ne"]) != (b["name"], b["dtype"], b["ne"]):
            probs.append("tensor %s differs in name, type or shape" % a["name"])
        if a["offset"] != off or b["offset"] != p["offset"]:
            probs.append("tensor %s: offsets %d (llama) %d (tensorfs), want %d / %d" % (
                a["name"], a["offset"], b["offset"], off, p["offset"]))
        ra = rbuf[rdata + a["offset"]:rdata + a["offset"] + a["nbytes"]]
        ob = obuf[b["abs_offset"]:b["abs_offset"] + b["nbytes"]]
        if ra != ob:
            probs.append("tensor %s: bytes differ" % a["name"])
        off += G.pad(a["nbytes"], 32)
    if len(rbuf) != rdata + off:
        probs.append("llama.cpp's file is not its data padded to 32")
    return probs


# ==== the matrix ====

# --quick under the sanitizers (scripts/test.sh sets TFS_SANITIZER_REPORTS): not these, the
# IQ searches that were 30 of its 75 s (ASan makes tensorfs' IQ quantizers 3-5 times slower;
# they are compared with ggml's under ASan in quant_ggml, and these plans in the normal run)
SANITIZED_LEAVE_OUT = {"l12-tied-IQ2_M+iq", "l8-e256-IQ3_M", "moe8-IQ3_XXS+iq"}


def cases(mode, work, only):
    if mode == "quick":
        plan = {m: list(v) for m, v in QUICK.items()}
        if os.environ.get("TFS_SANITIZER_REPORTS"):
            plan = {m: [f for f in v if "%s-%s" % (m, f) not in SANITIZED_LEAVE_OUT]
                    for m, v in plan.items()}
    else:
        plan = {}
        for m in qgen.MODELS:
            fts = []
            for f in FTYPES:
                fts.append(f)
                if f in NEED_IMATRIX or f in ("IQ3_S", "IQ3_M", "IQ4_NL", "IQ4_XS", "Q4_0",
                                              "Q5_0"):
                    fts.append(f + "+iq")   # the imatrix changes these mixes' rules
            plan[m] = fts
        weighted = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q2_K_S", "Q3_K_S", "Q3_K_M",
                    "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ2_M", "IQ3_M"]
        for m in ("l2-e96-gqa", "moe8", "odd", "l12-tied"):
            plan[m] += [f + "+all" for f in weighted]
        plan["l8-e256"] += ["Q4_K_M+all", "IQ2_XS+all", "IQ3_S+keys", "IQ2_M+keys",
                            "Q3_K_M+pure", "Q4_K_M+leave", "Q4_K_M+types", "IQ4_XS+pure"]
        plan["l12-tied"] += ["Q4_K_M+types", "Q5_K_S+leave", "Q2_K+pure"]
        plan["l2-e96-gqa"] += ["Q4_K_M+types", "Q6_K+pure"]
        plan["align64"] = ["Q4_K_M", "Q8_0"]
    out = []
    for m, fts in plan.items():
        for f in fts:
            im = None
            if f.endswith("+iq"):
                f, im = f[:-3], "iq"
            elif f.endswith("+all"):
                f, im = f[:-4], "all"
            elif "+" in f:
                f, im = f.split("+")
            c = Case(m, f, work, im)
            if only and only not in (m, c.name):
                continue
            if VIA and im not in (None, "iq", "all"):
                continue  # (no mount option for it)
            out.append(c)
    return out


# Cases whose llama_model_quantize runs build one IQ grid in ggml (iq2xs_init_impl, once per
# process): IQ2_M and IQ3_XXS both make tensors IQ2_S here, a grid of 8 CPU-s
GRID_BATCH = {"l12-tied-IQ2_M+iq", "moe8-IQ3_XXS+iq"}


class Batch:
    """A llamaq.py process making the references of cases one after the other."""

    def __init__(self, cases, qw):
        import threading
        self.cases, self.lock, self.status = cases, threading.Lock(), None
        argv = []
        for c in cases:
            c.prepared = c.prepare(qw)
            argv += (["---"] if argv else []) + c.ref_args(c.prepared[1])
        self.p = subprocess.Popen([PY, os.path.join(HERE, "llamaq.py")] + argv,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def made(self, case):
        """Whether the batch wrote case's reference (it waits for the batch to end)."""
        with self.lock:
            if self.status is None:
                out = self.p.communicate()[0].decode()
                self.status = {}
                for line in out.splitlines():
                    n, st = line.split()[1].rstrip(":"), line.split()[2]
                    self.status[self.cases[int(n)]] = int(st)
        return self.status.get(case) == 0


def batch_refs(todo, qw):
    """{case: the Batch making its reference}: two processes (one per core) make all the
    references one after the other (one process per case cost 0.1-0.2 CPU-s of Python and
    libllama's loading each, and built each IQ grid again), GRID_BATCH's in the first, into
    llamaq.py's cache too.  {} when llamaq.py keeps no cache (the cases run it, as with
    --only).  A job that kills its process leaves the rest of its batch to the cases' own
    runs."""
    import llamaq
    if llamaq.cache_dir() is None or len(todo) < 2:
        return {}
    parts = [[c for c in todo if c.name in GRID_BATCH], []]
    for c in todo:   # (a grid's case weighs as ten others)
        if c.name not in GRID_BATCH:
            min(parts, key=lambda p: sum(10 if x.name in GRID_BATCH else 1 for x in p)).append(c)
    out = {}
    for part in parts:
        if part:
            b = Batch(part, qw)
            out.update({c: b for c in part})
    return out


def main():
    args = sys.argv[1:]
    mode = "full" if "--full" in args else "quick"
    keep = args[args.index("--keep") + 1] if "--keep" in args else None
    only = args[args.index("--only") + 1] if "--only" in args else None
    global VIA
    VIA = args[args.index("--via") + 1] if "--via" in args else None
    if VIA not in (None, "mount", "convert"):
        print("check.py: --via mount or --via convert", file=sys.stderr)
        return 2
    if llamacpp.lib_dir() is None:
        print("1..0 # SKIP " + llamacpp.missing_reason())
        return 0
    qw = tool()
    if qw is None:
        print("1..0 # SKIP the qplan_write tool is not built (QPLAN_WRITE)")
        return 0
    work = keep or tempfile.mkdtemp(prefix="tfs-qplan-")
    os.makedirs(work, exist_ok=True)
    try:
        todo = cases(mode, work, only)
        for m in sorted({c.model for c in todo}):
            qgen.write(os.path.join(work, m + ".gguf"), qgen.spec(m))
        print("1..%d" % len(todo), flush=True)
        failed = 0
        batch = batch_refs(todo, qw)
        with cf.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
            futs = [ex.submit(c.run, qw, batch.get(c)) for c in todo]
            for n, (c, fu) in enumerate(zip(todo, futs), 1):
                try:
                    ok = fu.result()
                except Exception as e:  # a crash of a tool, a broken file
                    ok, c.result, c.why = False, "error", "%s: %s" % (type(e).__name__, e)
                failed += not ok
                note = "" if c.result == "equal" else " # " + c.why
                print("%s %d - %s: %s%s" % ("ok" if ok else "not ok", n, c.label(), c.result,
                                           note), flush=True)
        for b in set(batch.values()):
            b.made(None)
        if "--markdown" in args:
            print_matrix(todo)
        return 1 if failed else 0
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def print_matrix(todo):
    models = sorted({c.model for c in todo}, key=list(qgen.MODELS).index)
    cols = []
    for c in todo:
        k = c.name[len(c.model) + 1:]
        if k not in cols:
            cols.append(k)
    sym = {"equal": "=", "refused": "R", "header": "H", "differ": "X",
           "error": "E"}
    print("\n| type | " + " | ".join(models) + " |")
    print("|---|" + "---|" * len(models))
    by = {(c.model, c.name[len(c.model) + 1:]): c for c in todo}
    for k in cols:
        row = [sym.get(by[(m, k)].result, "?") if (m, k) in by else "" for m in models]
        print("| %s | %s |" % (k, " | ".join(row)))


if __name__ == "__main__":
    sys.exit(main())
