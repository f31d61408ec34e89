#!/usr/bin/python3
"""llamaq.py - llama.cpp's own quantizer (llama_model_quantize in libllama, through ctypes).

Usage: llamaq.py SRC DST FTYPE [--threads N] [--imatrix FILE.npz] [--leave-output] [--pure]
                 [--output-type T] [--token-type T] [--kv KEY=str:TEXT | KEY=int:N ...]
  FTYPE: a llama_ftype number; T: a ggml_type number.  --imatrix: an .npz of float32 arrays, one per tensor name
  (llama_model_imatrix_data entries).  --kv: kv_overrides, as llama-quantize passes them
  (struct llama_model_kv_override: int32 tag @0, char key[128] @4, the value @136
  (int64, or char[128]); 264 bytes; the list ends with an empty key).
       llamaq.py JOB --- JOB ...   (JOB: SRC DST FTYPE [options]) the jobs one after the other
  in one process: ggml builds an IQ type's grid tables once per process (8 CPU-s for
  IQ2_S's), so jobs that share a grid share its building (tests/quant/check.py GRID_BATCH);
  a line "job N: STATUS" on stdout as each ends.
Exits 0 when DST was written, 1 when llama.cpp refused (its error log on stderr), 2 when the
libraries are missing (of jobs: the largest status).  Run it as its own process: ggml aborts the process on input it does
not expect.

The files it writes are kept in a cache keyed by the bytes of SRC (and of the --imatrix file),
the other arguments but --threads (the output does not depend on them), the library's
package and version and this script (build/refquant-cache, TFS_REFQUANT_CACHE; =0: none):
a reference quantization runs once per input, whichever test (quant_llama, mount_quantize,
mount_hf_moe) or build (the normal and the sanitizer runs) asks for it first.

llama_model_quantize_params of @node-llama-cpp/linux-x64 3.22.1 (llama.cpp 0.5.0), from
llama_model_quantize_default_params's code: 64 bytes; int32 nthread @0, int32 ftype @4,
int32 output_tensor_type @8, int32 token_embedding_type @12, bool allow_requantize @16,
quantize_output_tensor @17, only_copy @18, pure @19, keep_split @20, dry_run @21; pointers
imatrix @24, kv_overrides @32, tt_overrides @40, prune_layers @48; 8 more bytes @56 that
the default fills and this script leaves alone.  The struct is taken from the default
function and only the fields named here are written.
"""
import ctypes as C
import hashlib
import os
import resource
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llama"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf"))
import llamacpp  # noqa: E402
import reference  # noqa: E402  (its key_lock)


class Params(C.Structure):
    _fields_ = [("nthread", C.c_int32), ("ftype", C.c_int32),
                ("output_tensor_type", C.c_int32), ("token_embedding_type", C.c_int32),
                ("allow_requantize", C.c_bool), ("quantize_output_tensor", C.c_bool),
                ("only_copy", C.c_bool), ("pure", C.c_bool), ("keep_split", C.c_bool),
                ("dry_run", C.c_bool), ("imatrix", C.c_void_p), ("kv_overrides", C.c_void_p),
                ("tt_overrides", C.c_void_p), ("prune_layers", C.c_void_p),
                ("tail", C.c_uint8 * 8)]


class KvOverride(C.Structure):
    _fields_ = [("tag", C.c_int32), ("key", C.c_char * 128), ("_pad", C.c_uint32),
                ("val", C.c_uint8 * 128)]


KV_INT, KV_STR = 0, 3


class ImatrixEntry(C.Structure):
    """struct llama_model_imatrix_data { const char * name; const float * data; size_t size; }"""
    _fields_ = [("name", C.c_char_p), ("data", C.POINTER(C.c_float)), ("size", C.c_size_t)]


HERE = os.path.dirname(os.path.abspath(__file__))


def cache_dir():
    """The cache's directory (None: no cache)."""
    d = os.environ.get("TFS_REFQUANT_CACHE",
                       os.path.join(HERE, "..", "..", "build", "refquant-cache"))
    return None if d in ("", "0") else os.path.abspath(d)


def cache_file(src, args):
    """Where the cache keeps the output of `llamaq.py SRC DST ARGS` (None: no cache)."""
    d = cache_dir()
    if d is None:
        return None
    h = hashlib.sha256(("%s@%s\0" % (llamacpp.PACKAGE, llamacpp.VERSION)).encode())
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(hashlib.sha256(f.read()).digest())
    keep, i = [], 0
    while i < len(args):
        if args[i] == "--threads":
            i += 2
            continue
        keep.append(args[i])
        if args[i] == "--imatrix":
            with open(args[i + 1], "rb") as f:
                keep.append(hashlib.sha256(f.read()).hexdigest())
            i += 1
        i += 1
    h.update(repr(keep).encode())
    with open(src, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return os.path.join(d, h.hexdigest() + ".gguf")

HELD = []   # the cache key's lock (reference.key_lock), released when the process ends
LOADED = []   # libllama, loaded and initialized by the first job of the process


def main():
    args = sys.argv[1:]
    if "---" in args:
        # jobs one after the other in this process: ggml builds an IQ grid once
        jobs, rc = [[]], 0
        for a in args:
            if a == "---":
                jobs.append([])
            else:
                jobs[-1].append(a)
        for i, job in enumerate(jobs):
            try:
                one(job)
                st = 0
            except SystemExit as e:
                st = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            print("job %d: %d" % (i, st), flush=True)
            rc = max(rc, st)
        sys.exit(rc)
    one(args)


def one(args):
    """`llamaq.py ARGS`, through the cache; exits (SystemExit) with the status."""
    if len(args) >= 3 and llamacpp.lib_dir() is not None:
        try:
            hit = cache_file(args[0], args[2:])
        except OSError:
            hit = None
        # (held until exit: a side-by-side chain asking for the same file waits for this one)
        HELD.append(reference.key_lock(hit) if hit else None)
        if hit and os.path.exists(hit):
            tmp = "%s.%d.tmp" % (args[1], os.getpid())
            shutil.copyfile(hit, tmp)
            os.replace(tmp, args[1])
            sys.exit(0)
        t0, ru0, first = time.time(), resource.getrusage(resource.RUSAGE_SELF), not LOADED
        quantize(args)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        reference.log_run("llamaq", args[0], args[2:], ru.ru_utime + ru.ru_stime -
                          (0 if first else ru0.ru_utime + ru0.ru_stime), time.time() - t0)
        if hit:
            try:
                os.makedirs(os.path.dirname(hit), exist_ok=True)
                part = "%s.%d.tmp" % (hit, os.getpid())
                shutil.copyfile(args[1], part)
                os.replace(part, hit)
            except OSError:
                pass   # (the cache only saves time)
        sys.exit(0)
    quantize(args)
    sys.exit(0)


def quantize(args):
    """llama_model_quantize of `SRC DST FTYPE [options]`; exits the process unless it wrote
    DST."""
    threads, imatrix, leave_output, kvs = 1, None, False, []
    pure, otype, ttype = False, None, None
    while len(args) > 3:
        if args[-2] == "--output-type":
            otype = int(args[-1])
            args = args[:-2]
        elif args[-2] == "--token-type":
            ttype = int(args[-1])
            args = args[:-2]
        elif args[-1] == "--pure":
            pure = True
            args = args[:-1]
        elif args[-2] == "--kv":
            kvs.insert(0, args[-1])
            args = args[:-2]
        elif args[-2] == "--threads":
            threads = int(args[-1])
            args = args[:-2]
        elif args[-2] == "--imatrix":
            imatrix = args[-1]
            args = args[:-2]
        elif args[-1] == "--leave-output":
            leave_output = True
            args = args[:-1]
        else:
            break
    if len(args) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    src, dst, ftype = args[0], args[1], int(args[2])
    if not LOADED:
        try:
            _, llama = llamacpp.load_llama()
        except OSError as e:
            print("llamaq: %s" % e, file=sys.stderr)
            sys.exit(2)
        llama.llama_backend_init.restype = None
        llama.llama_model_quantize_default_params.restype = Params
        llama.llama_model_quantize.restype = C.c_uint32
        llama.llama_model_quantize.argtypes = [C.c_char_p, C.c_char_p, C.POINTER(Params)]
        llama.llama_backend_init()
        LOADED.append(llama)
    llama = LOADED[0]
    p = llama.llama_model_quantize_default_params()
    if (p.ftype, p.output_tensor_type, p.quantize_output_tensor) != (7, 43, True):
        print("llamaq: llama_model_quantize_params does not look as expected: not the "
              "llama.cpp of %s@%s?" % (llamacpp.PACKAGE, llamacpp.VERSION), file=sys.stderr)
        sys.exit(2)
    p.nthread = threads
    p.ftype = ftype
    p.quantize_output_tensor = not leave_output
    p.pure = pure
    if otype is not None:
        p.output_tensor_type = otype
    if ttype is not None:
        p.token_embedding_type = ttype
    keep = []
    if imatrix:
        import numpy as np
        z = np.load(imatrix)
        entries = (ImatrixEntry * (len(z.files) + 1))()
        for i, k in enumerate(z.files):
            a = np.ascontiguousarray(z[k], dtype=np.float32)
            keep.append(a)
            entries[i].name = k.encode()
            entries[i].data = a.ctypes.data_as(C.POINTER(C.c_float))
            entries[i].size = a.size
        keep.append(entries)
        p.imatrix = C.cast(entries, C.c_void_p)
    if kvs:
        ov = (KvOverride * (len(kvs) + 1))()
        for i, spec in enumerate(kvs):
            key, val = spec.split("=", 1)
            kind, text = val.split(":", 1)
            ov[i].key = key.encode()
            if kind == "int":
                ov[i].tag = KV_INT
                C.memmove(ov[i].val, C.byref(C.c_int64(int(text))), 8)
            else:
                ov[i].tag = KV_STR
                b = text.encode()[:127]
                C.memmove(ov[i].val, b, len(b))
        keep.append(ov)
        p.kv_overrides = C.cast(ov, C.c_void_p)
    rc = llama.llama_model_quantize(os.fsencode(src), os.fsencode(dst), C.byref(p))
    if rc != 0:
        print("llamaq: llama_model_quantize failed (%d)\n%s" % (rc, llamacpp.logged()),
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
