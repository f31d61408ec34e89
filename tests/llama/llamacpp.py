"""Where llama.cpp's prebuilt libraries are, and loading them with ctypes.

The libraries come from the npm package @node-llama-cpp/linux-x64 (scripts/setup.sh
installs it under build/npm): libggml-base.so (GGUF parser, type traits),
libggml.v*.so (backend registry), libggml-cpu-*.so (CPU backends, one per ISA level,
loaded at run time) and libllama.v*.so.  Their RUNPATH is $ORIGIN, so loading one by
its full path finds the others.  TFS_LLAMA_LIB names the directory (meson sets it);
otherwise the default install place in this checkout is used.
"""
import ctypes
import glob
import os

PACKAGE = "@node-llama-cpp/linux-x64"
VERSION = "3.22.1"  # the version the struct layouts in generate.py were checked against
_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_DIR = os.path.join(_REPO, "build", "npm", "node_modules", PACKAGE, "bins", "linux-x64")

# void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data)
LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
LOG_WARN, LOG_ERROR, LOG_CONT = 3, 4, 5  # enum ggml_log_level
warnings = []  # what ggml and llama.cpp logged at WARN or ERROR level: shown when a helper fails
_last_level = [0]


def _log(level, text, user):
    if level != LOG_CONT:
        _last_level[0] = level
    if _last_level[0] in (LOG_WARN, LOG_ERROR) and text:
        warnings.append(text.decode("utf-8", "replace"))


_quiet = LOG_CALLBACK(_log)


def logged():
    """The warnings and errors logged so far, as one string."""
    return "".join(warnings).strip()


def lib_dir():
    """The directory holding libggml-base.so and libllama.v*.so, or None."""
    d = os.environ.get("TFS_LLAMA_LIB") or DEFAULT_DIR
    if os.path.exists(os.path.join(d, "libggml-base.so")) and _one(d, "libllama.v*.so"):
        return d
    return None


def missing_reason():
    return ("llama.cpp libraries not found in %s (scripts/setup.sh installs %s@%s)"
            % (os.environ.get("TFS_LLAMA_LIB") or DEFAULT_DIR, PACKAGE, VERSION))


def _one(d, pattern):
    found = sorted(glob.glob(os.path.join(d, pattern)))
    return found[0] if found else None


def load_ggml_base():
    """libggml-base.so, its log output kept in `warnings` instead of printed."""
    d = lib_dir()
    if d is None:
        raise OSError(missing_reason())
    base = ctypes.CDLL(os.path.join(d, "libggml-base.so"))
    base.ggml_log_set.argtypes = [LOG_CALLBACK, ctypes.c_void_p]
    base.ggml_log_set.restype = None
    base.ggml_log_set(_quiet, None)
    return base


def quantize_chunk_cached(g, type_id, x, nrows, n_per_row, weights=None):
    """ggml_quantize_chunk(type_id, x, dst, 0, nrows, n_per_row, weights) of libggml-base.so
    g (its argtypes set: int, void*, void*, int64 x3, void*): the bytes, kept in
    $TFS_GGML_CACHE (meson: build/refquant-cache/ggml, as tests/test_quant_ggml.c's) by the
    SHA-256 of the library, the arguments and the input.  ggml builds an IQ type's grid
    tables the first time it quantizes to it (iq2xs_init_impl, a qsort of every grid point's
    neighbours): IQ1_S's took 12 s of CPU, for a few blocks, in the normal and again in the
    sanitizer run.  x, weights: float32 numpy arrays (weights: n_per_row values or None)."""
    import hashlib
    import numpy as np
    g.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    g.ggml_row_size.restype = ctypes.c_size_t
    x = np.ascontiguousarray(x, np.float32)
    w = None if weights is None else np.ascontiguousarray(weights, np.float32)
    nbytes = g.ggml_row_size(type_id, n_per_row) * nrows
    path = None
    d = os.environ.get("TFS_GGML_CACHE")
    if d:
        h = hashlib.sha256(_lib_id(g, hashlib))
        h.update(np.array([type_id, nrows, n_per_row, w is not None], np.int64).tobytes())
        h.update(x.tobytes())
        if w is not None:
            h.update(w.tobytes())
        path = os.path.join(d, "py-" + h.hexdigest())
        try:
            with open(path, "rb") as f:
                b = f.read()
            if len(b) == nbytes:
                return b
        except OSError:
            pass
    out = ctypes.create_string_buffer(nbytes)
    n = g.ggml_quantize_chunk(type_id, x.ctypes.data, out, 0, nrows, n_per_row,
                              None if w is None else w.ctypes.data)
    if n != nbytes:
        raise RuntimeError("ggml_quantize_chunk wrote %d bytes of %d" % (n, nbytes))
    if path:   # a temporary file renamed: a reader sees all of it or nothing
        try:
            os.makedirs(d, exist_ok=True)
            tmp = "%s.%d.tmp" % (path, os.getpid())
            with open(tmp, "wb") as f:
                f.write(out.raw)
            os.rename(tmp, path)
        except OSError:
            pass
    return out.raw


_lib_ids = {}


def _lib_id(g, hashlib):
    """The SHA-256 of the library file g was loaded from."""
    if g._name not in _lib_ids:
        with open(g._name, "rb") as f:
            _lib_ids[g._name] = hashlib.sha256(f.read()).digest()
    return _lib_ids[g._name]


# CPU variants whose extra buffer type (AMX tiles) llama.cpp's scheduler trips over: on a
# Sapphire Rapids machine the sapphirerapids variant aborts the decode of a DeepSeek-V3 MoE at
# q8_0 ("ggml-backend.cpp:1294: GGML_ASSERT(*cur_backend_id != -1)"), the converter's own file
# as well as the mount's; on the machines without AMX, ggml picks another variant anyway.
AVOID = ("sapphirerapids",)


def cpu_backend(d):
    """The CPU backend library ggml_backend_load_all_from_path would pick (the highest
    ggml_backend_score: the variant for this CPU's ISA), but for the AVOID variants;
    TFS_LLAMA_CPU=NAME (haswell, x64, ...) names one."""
    want = os.environ.get("TFS_LLAMA_CPU")
    if want:
        return os.path.join(d, "libggml-cpu-%s.so" % want)
    best, best_score = None, 0
    for path in sorted(glob.glob(os.path.join(d, "libggml-cpu-*.so"))):
        if any(a in os.path.basename(path) for a in AVOID):
            continue
        lib = ctypes.CDLL(path)
        lib.ggml_backend_score.restype = ctypes.c_int
        score = lib.ggml_backend_score()   # 0: this CPU lacks an instruction it needs
        if score > best_score:
            best, best_score = path, score
    return best


def load_llama():
    """(libggml, libllama) with the CPU backends of the package loaded and logs silenced."""
    base = load_ggml_base()
    d = lib_dir()
    ggml = ctypes.CDLL(_one(d, "libggml.v*.so"))
    llama = ctypes.CDLL(_one(d, "libllama.v*.so"))
    llama.llama_log_set.argtypes = [LOG_CALLBACK, ctypes.c_void_p]
    llama.llama_log_set.restype = None
    llama.llama_log_set(_quiet, None)
    ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_load.restype = ctypes.c_void_p
    cpu = cpu_backend(d)
    if cpu:
        ggml.ggml_backend_load(os.fsencode(cpu))
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    if ggml.ggml_backend_reg_count() == 0:
        raise OSError("no ggml backend could be loaded from " + d)
    base.ggml_log_set(_quiet, None)
    return ggml, llama
