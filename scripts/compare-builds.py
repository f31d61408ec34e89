#!/usr/bin/python3
"""compare-builds.py - do two tensorfs binaries show and write the same bytes?

    scripts/compare-builds.py OLD_TENSORFS NEW_TENSORFS [WORKDIR]

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


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old, new = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="tfs-cmp-")
    bad = 0
    for name, src, extra in models(work, new):
        env = dict(os.environ, **extra)
        a = collect(old, name, src, os.path.join(work, "run"), env)
        b = collect(new, name, src, os.path.join(work, "run"), env)
        for k in a:
            same = a[k] == b.get(k)
            if isinstance(a[k], dict):
                what = "%d files" % len(a[k])
            else:
                what = str(a[k])[:60]
            print("%-34s %-10s %s  (%s)" % (name, k, "same" if same else "DIFFERENT", what))
            if not same:
                bad += 1
                if isinstance(a[k], dict) and isinstance(b.get(k), dict):
                    for p in sorted(set(a[k]) | set(b[k])):
                        if a[k].get(p) != b[k].get(p):
                            print("    %s: %s -> %s" % (p, a[k].get(p), b[k].get(p)))
                else:
                    print("    old: %s\n    new: %s" % (a[k], b.get(k)))
    print("%d differences" % bad)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
