#!/usr/bin/python3
"""llama.cpp's multimodal library (libmtmd) encoding an image or a sound with a projector
(mmproj.gguf).

Usage: mtmd_embed.py MODEL MMPROJ [MMPROJ...] [--size WxH] [--seed N] [--min-tokens N]
                     [--max-tokens N] [--audio SAMPLES]
Loads the text model MODEL with libllama, then each projector with libmtmd, and encodes one
generated image with it (WxH RGB pixels drawn from random.Random(N), in as many tokens as
llama-mtmd-cli's --image-min-tokens and --image-max-tokens allow), and with --audio a sound
too (SAMPLES PCM samples at 16 kHz, uniform in [-0.5, 0.5), from the same seed); prints one
JSON object: per projector and medium the step's status (mtmd_embed.c: 0, or the step that
failed), the tokens, the embedding width, the SHA-256 of the embeddings' float32 bytes, a few
of their values, whether all are finite and how many are not 0, and what llama.cpp logged as
warnings or errors.  Exits 2 with a message on stderr when a library or the model cannot be
loaded.  Run it as its own process: ggml aborts the process on a broken file.

The npm runtime (tests/llama/llamacpp.py) ships no libmtmd; build() compiles it from the
reference clone's source (tools/mtmd of build/llama.cpp: the source the runtime was built
from, so the runtime's libggml and libllama are its ABI) with tests/llama/mtmd_embed.c, into
$TFS_MTMD_CACHE (default build/refmtmd-cache; "0": a temporary folder), keyed
by the bytes of the sources, the compiler and the command.  One translation unit at -O0: the
library's 48 files compiled one by one took 67 s of CPU (gcc -O0), the same in one unit 12 s
(most of it is the headers every file includes again), and -O1 added 6 s (clang's 18) to an
encode of a tiny model that takes milliseconds.
"""
import argparse
import ctypes as C
import glob
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llamacpp  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
GLUE = os.path.join(HERE, "mtmd_embed.c")
# clang's when there is one (scripts/setup.sh installs it for the fuzz harnesses): at -O0 it
# compiled the library in 8.5-9.5 s of CPU where gcc took 12-18 (its code generation, 9 s of
# gcc's 12.7 by -ftime-report; the same code: llama.cpp's, the embeddings ggml's)
CXX, CC = ("clang++", "clang") if shutil.which("clang++") and shutil.which("clang") else \
    ("g++", "gcc")
CXXFLAGS = ["-std=c++17", "-O0", "-fPIC", "-w", "-DLLAMA_SHARED", "-DLLAMA_BUILD"]
CFLAGS = ["-std=c11", "-O0", "-fPIC", "-Wall", "-Werror", "-DLLAMA_SHARED"]
LIB = "libtfs-mtmd.so"


def llama_cpp_dir():
    return os.environ.get("TFS_LLAMA_CPP") or os.path.join(REPO, "build", "llama.cpp")


def source_dir():
    return os.path.join(llama_cpp_dir(), "tools", "mtmd")


def sources():
    """The library's .cpp files, as tools/mtmd/CMakeLists.txt's add_library(mtmd) lists them,
    but the helpers (mtmd-helper*.cpp: files and media decoding, with the vendored
    stb_image and miniaudio; the bitmaps here are made in memory)."""
    with open(os.path.join(source_dir(), "CMakeLists.txt")) as f:
        m = re.search(r"add_library\(mtmd\s([^)]*)\)", f.read())
    names = m.group(1).split() if m else []
    return [n for n in names if n.endswith(".cpp") and not n.startswith("mtmd-helper")]


def includes():
    d = llama_cpp_dir()
    return [source_dir(), os.path.join(d, "include"), os.path.join(d, "ggml", "include")]


def missing_reason():
    """None when build() can build the library and libllama is there, else why not."""
    if llamacpp.lib_dir() is None:
        return llamacpp.missing_reason()
    if not os.path.isfile(os.path.join(source_dir(), "clip.cpp")):
        return ("no %s/clip.cpp (bash scripts/setup.sh: the reference clone's sparse checkout "
                "has tools/mtmd)" % source_dir())
    for tool in (CXX, CC):
        if shutil.which(tool) is None:
            return "no %s (libmtmd is built from the reference's source)" % tool
    return None


def _key(srcs, libs):
    h = hashlib.sha256()
    for tool in (CXX, CC):
        h.update(subprocess.run([tool, "--version"], capture_output=True).stdout)
    h.update(repr((CXXFLAGS, CFLAGS, srcs, libs)).encode())   # (their paths: its RUNPATH)
    files = [os.path.join(source_dir(), s) for s in srcs] + [GLUE]
    for d in includes():
        files += sorted(glob.glob(os.path.join(d, "**", "*.h"), recursive=True))
    for p in files:
        with open(p, "rb") as f:
            h.update(p.encode() + b"\0" + f.read())
    return h.hexdigest()[:32]


def build():
    """The path of the library (built once per key, under a lock: the test chains share it);
    raises RuntimeError with the compiler's last lines when it fails."""
    d = llamacpp.lib_dir()
    libs = [os.path.join(d, "libggml-base.so"), llamacpp._one(d, "libggml.v*.so"),
            llamacpp._one(d, "libllama.v*.so")]
    srcs = sources()
    if "clip.cpp" not in srcs:
        raise RuntimeError("%s/CMakeLists.txt: no add_library(mtmd ... clip.cpp ...)"
                           % source_dir())
    root = os.environ.get("TFS_MTMD_CACHE", os.path.join(REPO, "build", "refmtmd-cache"))
    if root in ("", "0"):
        root = tempfile.mkdtemp(prefix="tfs-mtmd-")
    key = _key(srcs, libs)
    out = os.path.join(root, key, LIB)
    if os.path.exists(out):
        return out
    os.makedirs(root, exist_ok=True)
    import fcntl
    with open(os.path.join(root, key + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(out):
            return out
        for old in os.listdir(root):   # (an older source's or compiler's library)
            if old not in (key, key + ".lock"):
                p = os.path.join(root, old)
                shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.unlink(p)
        work = tempfile.mkdtemp(prefix="build-", dir=root)
        try:
            unity = os.path.join(work, "mtmd-all.cpp")
            with open(unity, "w") as f:
                for s in srcs:
                    f.write('#include "%s"\n' % os.path.join(source_dir(), s))
            inc = ["-I" + i for i in includes()]
            steps = [
                [CC] + CFLAGS + inc + ["-c", GLUE, "-o", os.path.join(work, "glue.o")],
                [CXX] + CXXFLAGS + inc + ["-shared", "-o", os.path.join(work, LIB), unity,
                                          os.path.join(work, "glue.o")] + libs +
                ["-Wl,-z,defs", "-Wl,-rpath," + d]]
            for argv in steps:
                r = subprocess.run(argv, capture_output=True, text=True)
                if r.returncode:
                    raise RuntimeError("building libmtmd failed: %s\n%s" % (
                        " ".join(argv), "\n".join(r.stderr.strip().splitlines()[-20:])))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            os.rename(os.path.join(work, LIB), out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


def image(nx, ny, seed):
    """nx x ny RGB pixels (RGBRGB...), random.Random(seed)'s."""
    return random.Random(seed).randbytes(nx * ny * 3)


def sound(n, seed):
    """n PCM samples (float32), uniform in [-0.5, 0.5), random.Random(seed)'s."""
    rng = random.Random(seed)
    return (C.c_float * n)(*(rng.random() - 0.5 for _ in range(n)))


def die(msg):
    print("mtmd_embed: " + msg, file=sys.stderr)
    if llamacpp.logged():
        print("llama.cpp said:\n" + llamacpp.logged(), file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("mmproj", nargs="+")
    ap.add_argument("--size", default="29x23")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--min-tokens", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=0)
    ap.add_argument("--audio", type=int, default=0)
    a = ap.parse_args()
    nx, ny = (int(x) for x in a.size.split("x"))

    why = missing_reason()
    if why:
        die(why)
    try:
        path = build()
        _, llama = llamacpp.load_llama()
        mtmd = C.CDLL(path)
    except (OSError, RuntimeError) as e:
        die(str(e))
    import generate   # (its libllama signatures)
    generate.bind(llama)
    mtmd.mtmd_log_set.argtypes = [llamacpp.LOG_CALLBACK, C.c_void_p]
    mtmd.mtmd_log_set.restype = None
    mtmd.mtmd_log_set(llamacpp._quiet, None)
    P = C.c_void_p
    mtmd.tfs_mtmd_embed.argtypes = [P, C.c_char_p, C.c_int, C.c_uint32, C.c_uint32, P, C.c_int,
                                    C.c_int, C.c_int, C.POINTER(C.c_float), C.c_size_t,
                                    C.POINTER(C.c_size_t), C.POINTER(C.c_int32)]
    mtmd.tfs_mtmd_embed.restype = C.c_int
    llama.llama_backend_init()
    model = llama.llama_model_load_from_file(os.fsencode(a.model),
                                             llama.llama_model_default_params())
    if not model:
        die("%s: llama.cpp could not load the model" % a.model)
    media = {"image": (0, nx, ny, C.c_char_p(image(nx, ny, a.seed)))}
    if a.audio:
        media["audio"] = (1, a.audio, 0, sound(a.audio, a.seed))
    cap = 1 << 22
    out = (C.c_float * cap)()
    results = []
    for p in a.mmproj:
        r = {"mmproj": p}
        for what, (audio, n1, n2, data) in media.items():
            n_tokens, n_embd = C.c_size_t(0), C.c_int32(0)
            # one thread: the same sums in the same order whatever the machine
            rc = mtmd.tfs_mtmd_embed(model, os.fsencode(p), audio, n1, n2,
                                     C.cast(data, C.c_void_p), a.min_tokens, a.max_tokens, 1, out,
                                     cap,
                                     C.byref(n_tokens), C.byref(n_embd))
            n = n_tokens.value * n_embd.value if rc == 0 else 0
            vals = out[:n]
            r[what] = {"status": rc, "n_tokens": n_tokens.value, "n_embd": n_embd.value,
                       "sha256": hashlib.sha256(C.string_at(out, n * 4)).hexdigest(),
                       "head": vals[:4], "finite": all(math.isfinite(v) for v in vals),
                       "nonzero": sum(1 for v in vals if v != 0)}
        results.append(r)
    llama.llama_model_free(model)
    llama.llama_backend_free()
    print(json.dumps({"image": [nx, ny, a.seed], "audio": a.audio, "results": results,
                      "warnings": llamacpp.logged()}))


if __name__ == "__main__":
    main()
