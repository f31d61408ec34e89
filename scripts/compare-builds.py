#!/usr/bin/python3
"""compare-builds.py - do two tensorfs binaries show and write the same bytes?

    scripts/compare-builds.py OLD_TENSORFS NEW_TENSORFS [WORKDIR]
    scripts/compare-builds.py --commits OLD_REV NEW_REV [WORKDIR]

With --commits, each revision is taken out of the repository (git archive) into
WORKDIR/build-REV and its tensorfs built there (meson setup, ninja fs/tensorfs), then the two
binaries are compared.

For a restructuring that must change no behaviour.  For each model of the test data
(examples/, tests/data: GGUF, safetensors files, the Ollama store's classic and per-tensor
models, a generated sharded set, the vocab GGUFs of ../shared/testdata when present), with
each binary in turn:
  - `tensorfs info --json` and `tensorfs info` (text);
  - a read-only mount: the sha256 of every file it shows (model.gguf / model.safetensors,
    index.json, metadata/, tensors/, f32/, npy/, layers/) and its size and mode;
  - a rw mount of a copy with the same edits (a metadata key set, another deleted where one
    exists, a tensor's float32 values rewritten through f32/, a tensor renamed), unmounted:
    the sha256 of every file of the repacked output (for Ollama: the store's new blobs and
    manifest).
Then the computed views (codec/views/) with their options: a GGUF of BF16 weights (the
llama-bf16 repo's GGUF view, written by `tensorfs convert`) with quantize=Q4_K_M, Q8_0 and
IQ4_NL with an importance matrix written here, tiny-llama.gguf with quantize=Q8_0 (refused: it
is quantized already; the message compared); Hugging Face repos
made by tests/hf/make_model.py (llama-bf16, llama-f16-sharded: Q/K permuted, two shards) and
tests/hf/make_moe.py (mixtral-bf16: stacked experts) with outtype=f16, q8_0, f32 and
quantize=Q4_K_M (with outtype=f32 too).  For each: `tensorfs info` with the same options (and
--gguf for a repo), every file of a ro mount with them, a rw mount with output= (a repo's:
output=X.gguf, its GGUF view) edited and unmounted (the output's sha256), and a rw mount
edited, killed with -9, then `tensorfs repack` with another quantize= (refused: its message,
the journal kept), a mount asking for another quantize= and for a repo a repack with another
outtype= (refused likewise), and `tensorfs repack` without the view options (the journal's record: journal.json's sha256
and the repacked output's).
Prints one line per model and check ("same" or what differs) and exits 1 when anything
differs.  Needs root (FUSE) and numpy.
"""
import hashlib
import re
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
# the shared test data (not in the repository): TFS_SHARED, as for the tests; unset, ../shared/testdata
SHARED = os.environ.get("TFS_SHARED", os.path.join(ROOT, "..", "shared", "testdata"))


def run(args, **kw):
    return subprocess.run(args, capture_output=True, timeout=300, **kw)


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def tree(top):
    """{relative path: (mode, size, sha256)} of every regular file below top."""
    out = {}
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(d, n)
            st = os.lstat(p)
            if os.path.islink(p):
                out[os.path.relpath(p, top)] = ("link", os.readlink(p))
                continue
            out[os.path.relpath(p, top)] = (oct(st.st_mode), st.st_size, sha(p))
    return out


class Mount:
    def __init__(self, exe, source, options=None, env=None):
        self.exe, self.path = exe, tempfile.mkdtemp(prefix="tfs-cmp-mnt-")
        args = [exe, "mount", source, self.path] + (["-o", options] if options else [])
        r = run(args, env=env)
        if r.returncode:
            os.rmdir(self.path)
            raise RuntimeError("mount %s: %s" % (source, r.stderr.decode().strip()))

    def close(self):
        r = run([self.exe, "unmount", self.path])
        os.rmdir(self.path)
        if r.returncode:
            raise RuntimeError("unmount: %s" % r.stderr.decode().strip())


def edit(mp):
    """The same edits through any rw mount; returns what it did (for the report)."""
    did = []
    md = os.path.join(mp, "metadata")
    keys = sorted(os.listdir(md))
    if keys:  # (a per-tensor Ollama model has no metadata/ keys to set)
        with open(os.path.join(md, "general.name" if "general.name" in keys or
                               any(k.startswith("general.") for k in keys) else "comment"),
                  "w") as f:
            f.write("compare-builds\n")
        did.append("set key")
    strings = [k for k in keys if k not in ("general.name", "general.architecture")
               and not k.startswith("tokenizer.") and k != "general.alignment"]
    if strings:
        os.unlink(os.path.join(md, strings[-1]))
        did.append("del key")
    f32 = os.path.join(mp, "f32")
    for n in sorted(os.listdir(f32)):
        p = os.path.join(f32, n)
        if not os.access(p, os.W_OK) or os.path.getsize(p) == 0:
            continue
        a = np.fromfile(p, dtype="<f4")
        a = a * np.float32(0.5) + np.float32(0.25)
        with open(p, "r+b") as f:
            f.write(a.astype("<f4").tobytes())
        did.append("f32 " + n)
        break
    ts = sorted(os.listdir(os.path.join(mp, "tensors")))
    if len(ts) > 1:
        a, b = os.path.join(mp, "tensors", ts[-1]), os.path.join(mp, "tensors", ts[-1] + ".renamed")
        try:
            os.rename(a, b)
            did.append("rename tensor")
        except OSError as e:
            did.append("rename refused (%s)" % e.strerror)
    return did


def collect(exe, name, src, work, env):
    """Everything one binary shows and writes for one model."""
    res = {}
    for flag in ("--json", None):
        r = run([exe, "info"] + ([flag] if flag else []) + [src], env=env)
        res["info" + (flag or "")] = (r.returncode, hashlib.sha256(r.stdout).hexdigest())
    try:
        m = Mount(exe, src, env=env)
        try:
            res["mount"] = tree(m.path)
        finally:
            m.close()
    except RuntimeError as e:
        res["mount"] = str(e)
    # rw: on a copy (a file, a directory, or the whole Ollama store)
    copy = os.path.join(work, "rw")
    shutil.rmtree(copy, ignore_errors=True)
    os.makedirs(copy)
    if env.get("OLLAMA_MODELS"):
        store = os.path.join(copy, "store")
        shutil.copytree(env["OLLAMA_MODELS"], store, symlinks=True)
        env = dict(env, OLLAMA_MODELS=store)
        target, out = src, store
    elif os.path.isdir(src):
        target = out = os.path.join(copy, "model")
        shutil.copytree(src, target)
    else:
        target = out = os.path.join(copy, os.path.basename(src))
        shutil.copyfile(src, target)
    try:
        m = Mount(exe, target, "rw", env=env)
        try:
            res["edits"] = edit(m.path)
        finally:
            m.close()
        res["repack"] = tree(out) if os.path.isdir(out) else {os.path.basename(out): sha(out)}
    except (RuntimeError, OSError) as e:  # the same failure: the same words, but for paths
        res["repack"] = "failed: %s" % re.sub(r"tensorfs-tmp\.\w+", "tensorfs-tmp.X",
                                              str(e).replace(work, "WORK"))
    return res


# ==== the computed views ====

def write_imatrix(path, entries):
    """llama.cpp's legacy imatrix (.dat): an entry of n values for each (name, n)."""
    import struct
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for k, (name, n) in enumerate(entries):
            b = name.encode()
            f.write(struct.pack("<i", len(b)) + b + struct.pack("<ii", 1, n))
            f.write(struct.pack("<%df" % n, *[0.5 + ((i * 7 + k) % 13) / 8 for i in range(n)]))
        f.write(struct.pack("<ii", 1, 4) + b"test")


def view_models(work, exe):
    """[(name, source, [view options...], is a repo)]"""
    import json
    hf = os.path.join(work, "hf")
    py = "/usr/bin/python3"
    for script, variants in (("make_model.py", ["llama-bf16", "llama-f16-sharded"]),
                             ("make_moe.py", ["mixtral-bf16"])):
        if all(os.path.isdir(os.path.join(hf, v)) for v in variants):
            continue
        r = run([py, os.path.join(ROOT, "tests", "hf", script), hf] + variants)
        if r.returncode:
            sys.exit("%s: %s" % (script, r.stderr.decode()))
    # a GGUF of BF16 weights to quantize: the llama-bf16 repo's GGUF view, written once
    gguf, im = os.path.join(work, "llama-bf16.gguf"), os.path.join(work, "llama-bf16.imatrix.dat")
    if not os.path.exists(gguf):
        r = run([exe, "convert", os.path.join(hf, "llama-bf16"), gguf])
        if r.returncode:
            sys.exit("convert: %s" % r.stderr.decode())
    if not os.path.exists(im):
        r = run([exe, "info", "--json", gguf])
        ts = [t for t in json.loads(r.stdout)["tensors"] if len(t["shape"]) == 2]
        write_imatrix(im, [(t["name"], t["shape"][-1]) for t in ts])
    tiny = os.path.join(ROOT, "examples", "tiny-llama.gguf")
    out = [("tiny-llama.gguf", tiny, ["quantize=Q8_0"], False),  # (refused: Q4_0 in it)
           ("llama-bf16.gguf", gguf, ["quantize=Q4_K_M", "quantize=Q8_0",
                                      "quantize=IQ4_NL,imatrix=" + im], False)]
    for v in ("llama-bf16", "llama-f16-sharded", "mixtral-bf16"):
        out.append((v, os.path.join(hf, v), ["", "outtype=f16", "outtype=q8_0", "outtype=f32",
                                             "quantize=Q4_K_M",
                                             "quantize=Q4_K_M,outtype=f32"], True))
    return out


def info_args(opts, repo):
    args = ["--" + o for o in opts.split(",") if o]
    return args + (["--gguf"] if repo and not any(a.startswith("--quantize") for a in args)
                   else [])


def kill_daemon(mp):
    import signal
    import time
    pid = int(os.getxattr(mp, "user.tensorfs.pid"))
    os.kill(pid, signal.SIGKILL)
    for _ in range(500):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    subprocess.run(["umount", "-l", mp], capture_output=True)
    os.rmdir(mp)


def norm(text, work):
    """A message with the run's own paths taken out (they are the same for both binaries
    but for the temporary names)."""
    text = text.replace(work, "WORK")
    text = re.sub(r"tfs-cmp-mnt-\w+", "MNT", text)
    return re.sub(r"tensorfs-tmp\.\w+", "tensorfs-tmp.X", text)


def collect_view(exe, src, opts, repo, work, cache):
    """What one binary shows and writes for source with view options opts."""
    res = {}
    o = ",".join(x for x in (opts, "cache=" + cache) if x)
    for flag in ("--json", None):
        r = run([exe, "info"] + ([flag] if flag else []) + info_args(opts, repo) + [src])
        res["info" + (flag or "")] = (r.returncode, hashlib.sha256(r.stdout).hexdigest(),
                                      norm(r.stderr.decode(), work))
    try:
        m = Mount(exe, src, o)
        try:
            res["mount"] = tree(m.path)
        finally:
            m.close()
    except RuntimeError as e:
        res["mount"] = norm(str(e), work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = os.path.join(work, "out.gguf")
    # rw, edited, unmounted: the output
    try:
        m = Mount(exe, src, "rw,output=%s,%s" % (out, o))
        try:
            res["rw edits"] = edit(m.path)
        finally:
            m.close()
        res["rw output"] = {"out.gguf": (os.path.getsize(out), sha(out))}
    except (RuntimeError, OSError) as e:
        res["rw output"] = "failed: %s" % norm(str(e), work)
    # rw, edited, killed: the journal's record; `tensorfs repack` without the view options
    out2, staging = os.path.join(work, "out2.gguf"), os.path.join(work, "staging")
    try:
        m = Mount(exe, src, "rw,output=%s,staging=%s,%s" % (out2, staging, o))
        edit(m.path)
        kill_daemon(m.path)
        j = os.path.join(staging, "journal.json")
        res["journal"] = {"journal.json": (os.path.getsize(j), sha(j))}
        # another view than the record's: refused, the journal kept (the message compared)
        other = "Q6_K" if "Q8_0" in opts else "Q8_0"
        r = run([exe, "repack", src, "-o", "output=%s,staging=%s,cache=%s,quantize=%s" % (
            out2, staging, cache, other)])
        res["refusal"] = (r.returncode, norm(r.stderr.decode(), work), sha(j))
        # a mount asking for another quantize=; for a repo, a repack with another outtype=
        mp = tempfile.mkdtemp(prefix="tfs-cmp-mnt-")
        r = run([exe, "mount", src, mp, "-o", "rw,output=%s,staging=%s,%s,quantize=%s" % (
            out2, staging, o, other)])
        if r.returncode == 0:  # (not expected: the same for both, then unmounted)
            run([exe, "unmount", mp])
        os.rmdir(mp)
        res["mount refusal"] = (r.returncode, norm(r.stderr.decode(), work), sha(j))
        if repo:
            r = run([exe, "repack", src, "-o", "staging=%s,cache=%s,outtype=%s" % (
                staging, cache, "f16" if "outtype=bf16" in opts else "bf16")])
            res["outtype refusal"] = (r.returncode, norm(r.stderr.decode(), work), sha(j))
        r = run([exe, "repack", src, "-o", "output=%s,staging=%s,cache=%s" % (out2, staging,
                                                                                 cache)])
        res["repack"] = (r.returncode, norm(r.stderr.decode(), work),
                         sha(out2) if os.path.exists(out2) else None,
                         os.path.getsize(out2) if os.path.exists(out2) else None)
    except (RuntimeError, OSError) as e:
        res["repack"] = "failed: %s" % norm(str(e), work)
    return res


def models(work, exe):
    out = [("tiny-llama.gguf", os.path.join(ROOT, "examples", "tiny-llama.gguf"), {})]
    out.append(("mixed_flat.gguf", os.path.join(DATA, "gguf", "mixed_flat.gguf"), {}))
    for n in sorted(os.listdir(os.path.join(DATA, "safetensors"))):
        if n.startswith("ok_"):
            out.append((n, os.path.join(DATA, "safetensors", n), {}))
    store = os.path.join(DATA, "ollama", "models")
    for ref in ("oracle-gguf:latest", "oracle-st:int4", "oracle-st:int8", "oracle-st:mxfp8",
                "oracle-st:nvfp4"):
        out.append((ref, ref, {"OLLAMA_MODELS": store}))
    sharded = os.path.join(work, "gen")
    if not os.path.isdir(os.path.join(sharded, "sharded")):
        r = run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "bench", "make-sharded.py"),
                 sharded, "--tensors", "40", "--shards", "3", "--blobs", "4"],
                env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tests", "mount")))
        if r.returncode:
            sys.exit("make-sharded: %s" % r.stderr.decode())
    out.append(("sharded", os.path.join(sharded, "sharded"), {}))
    vocab = os.path.join(SHARED, "gguf", "vocab")
    if os.path.isdir(vocab):
        for n in sorted(os.listdir(vocab))[:4]:
            if n.endswith(".gguf"):
                out.append((n, os.path.join(vocab, n), {}))
    else:
        print("SKIP: %s absent (the vocab GGUFs are not compared)" % vocab)
    return out


def build(rev, work):
    """The tensorfs of revision rev, built in work/build-REV (kept: built once)."""
    sha1 = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", rev + "^{commit}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    top = os.path.join(work, "build-" + sha1)
    exe = os.path.join(top, "b", "fs", "tensorfs")
    if os.path.exists(exe):
        return exe
    os.makedirs(top, exist_ok=True)
    subprocess.run("git -C %s archive %s | tar -x -C %s" % (ROOT, sha1, top), shell=True,
                   check=True)
    for args in (["meson", "setup", "b"], ["ninja", "-C", "b", "fs/tensorfs"]):
        r = subprocess.run(args, cwd=top, capture_output=True, text=True)
        if r.returncode:
            sys.exit("%s at %s: %s" % (" ".join(args), rev, r.stdout[-2000:] + r.stderr[-2000:]))
    return exe


class Tally:
    def __init__(self):
        self.bad = self.checks = self.files = self.bytes = 0

    def compare(self, name, a, b):
        for k in a:
            same = a[k] == b.get(k)
            self.checks += 1
            if isinstance(a[k], dict):
                what = "%d files" % len(a[k])
                for v in a[k].values():
                    self.files += 1
                    self.bytes += v[1] if isinstance(v, tuple) and len(v) == 3 else (
                        v[0] if isinstance(v, tuple) and isinstance(v[0], int) else 0)
            else:
                what = str(a[k])[:60]
                if isinstance(a[k], tuple) and len(a[k]) == 4 and a[k][3]:
                    self.files += 1
                    self.bytes += a[k][3]
            print("%-44s %-10s %s  (%s)" % (name, k, "same" if same else "DIFFERENT", what))
            if not same:
                self.bad += 1
                if isinstance(a[k], dict) and isinstance(b.get(k), dict):
                    for p in sorted(set(a[k]) | set(b[k])):
                        if a[k].get(p) != b[k].get(p):
                            print("    %s: %s -> %s" % (p, a[k].get(p), b[k].get(p)))
                else:
                    print("    old: %s\n    new: %s" % (a[k], b.get(k)))
        sys.stdout.flush()


def main():
    argv = sys.argv[1:]
    commits = argv[:1] == ["--commits"]
    if commits:
        argv = argv[1:]
    if len(argv) < 2:
        sys.exit(__doc__)
    work = os.path.abspath(argv[2]) if len(argv) > 2 else tempfile.mkdtemp(prefix="tfs-cmp-")
    if commits:
        old, new = build(argv[0], work), build(argv[1], work)
    else:
        old, new = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    t = Tally()
    for name, src, extra in models(work, new):
        env = dict(os.environ, **extra)
        a = collect(old, name, src, os.path.join(work, "run"), env)
        b = collect(new, name, src, os.path.join(work, "run"), env)
        t.compare(name, a, b)
    for name, src, optsets, repo in view_models(work, new):
        for opts in optsets:
            a = collect_view(old, src, opts, repo, os.path.join(work, "run"),
                             os.path.join(work, "cache-old"))
            b = collect_view(new, src, opts, repo, os.path.join(work, "run"),
                             os.path.join(work, "cache-new"))
            t.compare("%s %s" % (name, opts.replace(work, "WORK") or "(no option)"), a, b)
    print("%d checks, %d files (%d bytes) compared, %d differences" % (t.checks, t.files,
                                                                      t.bytes, t.bad))
    sys.exit(1 if t.bad else 0)


if __name__ == "__main__":
    main()
