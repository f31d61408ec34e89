"""Where the tests' reference llama.cpp is, and how to run its converter.

The reference is the llama.cpp source that the tests' runtime (npm @node-llama-cpp/linux-x64
3.22.1) was built from: commit de3ff81, cloned by scripts/setup.sh from node-llama-cpp 3.22.1's
git bundle into build/llama.cpp (TFS_LLAMA_CPP names another clone). Its convert_hf_to_gguf.py
runs unmodified with the stand-ins of tests/hf/refconv/ (see its README) on Debian's
/usr/bin/python3.

    import reference
    why = reference.missing_reason()          # None, or why the converter cannot run
    reference.convert(hfdir, out, "--outtype", "f16")   # None, or what went wrong
    r = reference.run_converter(hfdir, out, "--vocab-only")   # a CompletedProcess
    subprocess.run(reference.converter_argv(hfdir, out, "--outtype", "f16"))   # by hand
    reference.vocab_dir()                     # models/ with ggml-vocab-*.gguf, .inp, .out

Speed (the tests run the converter a few hundred times): run_converter() and convert() ask
refconv/server.py, a fork server (forkserver.py) that every test process shares, which
imported torch, gguf-py and the converter once and forks a fresh copy of itself for each run
(a run of a tiny model then takes a fraction of a second instead of the seconds of imports;
TFS_REFCONV_SERVER=0 runs a process per run instead).  convert() also keeps what the
converter wrote in a cache keyed by the reference, the options and the bytes of every file of
the model (cache_dir(): build/refconv-cache, TFS_REFCONV_CACHE; =0: none), so that two tests
converting the same model (hf_convert and mount_hf, hf_moe and mount_hf_moe, the normal and
the sanitizer build) run the converter once.
"""
import fcntl
import hashlib
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forkserver  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
COMMIT = "de3ff815ea7d559ee917f063901b8986f038abc6"
PYTHON = "/usr/bin/python3"   # Debian's python3-torch & co. are installed for it
RUNNER = os.path.join(HERE, "refconv", "run.py")
SERVER = os.path.join(HERE, "refconv", "server.py")
FORKSERVER = os.path.join(HERE, "forkserver.py")
# Debian packages the converter imports (python3-torch, -numpy, -sentencepiece, -yaml, -tqdm,
# -protobuf: XLM-RoBERTa's sentencepiece_model_pb2) and the tokenizer stand-in's regex
# (python3-regex)
MODULES = ("torch", "numpy", "sentencepiece", "yaml", "tqdm", "regex", "google.protobuf")


def llama_cpp_dir():
    """The reference clone (TFS_LLAMA_CPP, else build/llama.cpp), or None when it is absent."""
    d = os.environ.get("TFS_LLAMA_CPP") or os.path.join(REPO, "build", "llama.cpp")
    return d if os.path.isfile(os.path.join(d, "convert_hf_to_gguf.py")) else None


def npm_dir():
    """scripts/setup.sh's npm packages (TFS_NPM_DIR, else build/npm)."""
    return os.environ.get("TFS_NPM_DIR") or os.path.join(REPO, "build", "npm")


def gguf_py_dir():
    """The clone's gguf-py (gguf 0.19.0), or None."""
    d = llama_cpp_dir()
    return os.path.join(d, "gguf-py") if d else None


def vocab_dir():
    """The clone's models/ (ggml-vocab-*.gguf with their .inp/.out texts), or None."""
    d = llama_cpp_dir()
    m = os.path.join(d, "models") if d else None
    return m if m and os.path.isdir(m) else None


def _lacks(m):
    """Whether module m (dotted: its parent package too) cannot be imported."""
    try:
        return importlib.util.find_spec(m) is None
    except ModuleNotFoundError:
        return True


def _python_has(modules):
    """Which of modules /usr/bin/python3 cannot import (checked in this process when it is
    /usr/bin/python3, else by asking it)."""
    if os.path.realpath(PYTHON) == os.path.realpath(os.sys.executable):
        return [m for m in modules if _lacks(m)]
    code = ("import importlib.util as u\n"
            "def lacks(m):\n"
            "    try:\n"
            "        return u.find_spec(m) is None\n"
            "    except ModuleNotFoundError:\n"
            "        return True\n"
            "print(' '.join(m for m in %r if lacks(m)))" % (tuple(modules),))
    r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 else list(modules)


def missing_reason(bpe=False):
    """None when the converter can run, else a short reason (for a SKIP line). bpe=True also
    needs what the tokenizer stand-in uses for tokenizer.json-only (BPE) tokenizers: node and
    npm's @anush008/tokenizers (Hugging Face's Rust tokenizers) in npm_dir()."""
    if not os.path.exists(PYTHON):
        return "no %s" % PYTHON
    d = llama_cpp_dir()
    if d is None:
        where = os.environ.get("TFS_LLAMA_CPP") or os.path.join(REPO, "build", "llama.cpp")
        return "no reference llama.cpp at %s (bash scripts/setup.sh makes it)" % where
    if os.path.isdir(os.path.join(d, ".git")):
        head = subprocess.run(["git", "-C", d, "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        if head != COMMIT:
            return "%s is at %s, not the reference %s" % (d, head or "?", COMMIT[:7])
        dirty = subprocess.run(["git", "-C", d, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True).stdout
        if dirty.strip():
            return "%s has local changes (the reference must be unmodified)" % d
    missing = _python_has(MODULES)
    if missing:
        return "python module(s) %s missing for the converter (bash scripts/setup.sh)" % \
            ", ".join(missing)
    if bpe:
        if shutil.which("node") is None:
            return "no node (the tokenizer stand-in runs Hugging Face's tokenizers with it)"
        if not os.path.isdir(os.path.join(npm_dir(), "node_modules", "@anush008", "tokenizers")):
            return "no npm @anush008/tokenizers in %s (bash scripts/setup.sh)" % npm_dir()
    return None


def converter_argv(hfdir, outfile, *extra):
    """The command running the reference convert_hf_to_gguf.py on hfdir into outfile, with
    extra converter options (e.g. "--outtype", "q8_0")."""
    d = llama_cpp_dir()
    if d is None:
        raise RuntimeError(missing_reason() or "no reference llama.cpp")
    return [PYTHON, RUNNER, d, npm_dir(), str(hfdir), "--outfile", str(outfile)] + \
        [str(x) for x in extra]


def _server_name():
    """The converter's fork server's socket name: it changes with the reference, the
    stand-ins, the server's code and the npm folder."""
    h = hashlib.sha256(stamp().encode())
    for f in (SERVER, FORKSERVER):
        with open(f, "rb") as fp:
            h.update(fp.read())
    h.update(npm_dir().encode() + b"\0" + (llama_cpp_dir() or "").encode())
    return "tfs-refconv-%d-%s" % (os.getuid(), h.hexdigest()[:16])


def _server_run(argv, timeout):
    """(status, stdout, stderr, CPU seconds) of a run by the converter's fork server
    (refconv/server.py, one for every test process, started when none answers); status None
    when there is none (TFS_REFCONV_SERVER=0, or it did not start)."""
    if os.environ.get("TFS_REFCONV_SERVER", "1") == "0":
        return None, "", "", None
    fd_o, out = tempfile.mkstemp(prefix="refconv-", suffix=".out")
    fd_e, err = tempfile.mkstemp(prefix="refconv-", suffix=".err")
    os.close(fd_o)
    os.close(fd_e)
    try:
        name = _server_name()
        r = forkserver.call(name, [PYTHON, SERVER, name, llama_cpp_dir(), npm_dir()],
                            {"argv": argv, "out": out, "err": err}, timeout)
        if r is None:
            return None, "", "", None
        with open(out, errors="replace") as fo, open(err, errors="replace") as fe:
            return r["status"], fo.read(), fe.read(), r.get("cpu")
    finally:
        os.unlink(out)
        os.unlink(err)


def run_converter(hfdir, outfile, *extra, timeout=900):
    """Runs the converter on hfdir into outfile with extra options: a CompletedProcess with
    its returncode, stdout and stderr (raises subprocess.TimeoutExpired after timeout s)."""
    argv = converter_argv(hfdir, outfile, *extra)
    cache = cache_dir()
    if cache and "TFS_REFCONV_TOKCACHE" not in os.environ:
        # the tokenizer stand-in's answers (refconv/transformers: node's, kept by the
        # tokenizer.json's bytes), for the server and the runs it forks
        try:
            _make_cache(cache)
            os.environ["TFS_REFCONV_TOKCACHE"] = os.path.join(cache, "tokenizer")
        except OSError:
            pass
    t0 = time.time()
    status, out, err, cpu = _server_run(argv[4:], timeout)
    if status is not None:
        if status == "timeout":
            raise subprocess.TimeoutExpired(argv, timeout)
        log_run("convert", hfdir, extra, cpu, time.time() - t0)
        return subprocess.CompletedProcess(argv, status, out, err)
    c0 = _children_cpu()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    log_run("convert", hfdir, extra, _children_cpu() - c0, time.time() - t0)
    return r


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def log_run(tool, what, args, cpu, wall):
    """TFS_REF_LOG=FILE: a JSON line per run of a reference tool (the converter, llamaq.py)
    appended to FILE: which, on what, its CPU and wall seconds, the test and chain asking
    (scripts/bench/ref-runs.py sums them)."""
    path = os.environ.get("TFS_REF_LOG")
    if not path:
        return
    rec = {"tool": tool, "what": os.path.basename(os.path.normpath(str(what))),
           "args": [str(a) for a in args], "cpu": round(cpu or 0, 3), "wall": round(wall, 3),
           "test": os.path.basename(sys.argv[0]), "chain": os.environ.get("TFS_CPU_TAG", "")}
    with open(path, "a") as f:   # (one write of a short line: appends do not interleave)
        f.write(json.dumps(rec) + "\n")


_stamp = []


def stamp():
    """Changes when the reference or its stand-ins do: the clone's commit, refconv/'s
    sources."""
    if not _stamp:
        h = hashlib.sha256()
        d = llama_cpp_dir() or ""
        head = subprocess.run(["git", "-C", d, "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip() if d else ""
        h.update(head.encode())
        rc = os.path.join(HERE, "refconv")
        for root, dirs, files in sorted(os.walk(rc)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith((".py", ".js")):
                    h.update(f.encode())
                    h.update(open(os.path.join(root, f), "rb").read())
        _stamp.append(h.hexdigest()[:16])
    return _stamp[0]


def cache_dir():
    """Where convert() keeps the converter's files (None: no cache): one folder per
    stamp(), the older ones removed."""
    d = os.environ.get("TFS_REFCONV_CACHE", os.path.join(REPO, "build", "refconv-cache"))
    return None if d in ("", "0") else os.path.join(d, stamp())


def _make_cache(cache):
    """Makes cache_dir() when it is not there, removing the other stamps' folders (of an
    older reference or older stand-ins)."""
    if not os.path.isdir(cache):
        parent = os.path.dirname(cache)
        if os.path.isdir(parent):
            for old in os.listdir(parent):
                if old != os.path.basename(cache):
                    shutil.rmtree(os.path.join(parent, old), ignore_errors=True)
        os.makedirs(cache, exist_ok=True)


_digests = {}   # a file's identity (device, inode, size, mtime, ctime) -> SHA-256 of its bytes


def _file_digest(p):
    """The SHA-256 of p's bytes, hashed once per process and file: a test converts a model
    at several outtypes, and V+omit's files but config.json are V's hard links (a MoE
    repo's 30-90 MB were hashed again each time)."""
    st = os.stat(p)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    d = _digests.get(key)
    if d is None:
        with open(p, "rb") as fp:
            d = hashlib.sha256(fp.read()).digest()
        _digests[key] = d
    return d


def _cache_key(hfdir, extra):
    # (the converter names the model after its directory: general.name and the like)
    h = hashlib.sha256(repr([os.path.basename(os.path.normpath(str(hfdir)))] +
                            [str(x) for x in extra]).encode())
    for root, dirs, files in os.walk(hfdir):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            h.update(os.path.relpath(p, hfdir).encode() + b"\0")
            h.update(_file_digest(p))
    return h.hexdigest()


def key_lock(path):
    """An exclusive lock (flock) on path + ".lock", held until the returned file is closed.
    scripts/test.sh runs several chains of tests side by side (the normal build's mount
    tests, its reference comparisons, the sanitizer build's): two of them asking for the same
    input (hf_moe and mount_hf_moe convert the same repos) then wait for one run instead of
    making it twice.  None when the lock cannot be made (the cache only saves time)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        f = open(path + ".lock", "a")
    except OSError:
        return None
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def convert(hfdir, outfile, *extra, timeout=900):
    """Runs the converter (or takes its file from the cache, see cache_dir()); None on
    success, else the last line it printed on stderr. The file is written under a temporary
    name and renamed, so a failed run leaves none."""
    cache = cache_dir()
    hit = os.path.join(cache, _cache_key(hfdir, extra) + ".gguf") if cache else None
    if hit:
        _make_cache(cache)
        lock = key_lock(hit)
        try:
            return _convert(hfdir, outfile, extra, timeout, hit)
        finally:
            if lock:
                lock.close()
    return _convert(hfdir, outfile, extra, timeout, None)


def _place(src, dst):
    """dst made src's bytes by a hard link (a copy where the file system has none, or
    across file systems), under a temporary name and renamed.  The cache's files are never
    written in place (replaced by rename), nor are the tests' copies of them: a link costs
    no space where a copy cost the cache's size again (a fresh-clone run kept 9.8 GB of
    copies in the work folders' ref/)."""
    if os.path.exists(dst) and os.path.samefile(src, dst):
        return   # (rename() of two links of one file does nothing: the temporary would stay)
    tmp = "%s.%d.%d.link" % (dst, os.getpid(), threading.get_ident())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _store(tmp, hit):
    """The converter's file tmp kept in the cache as hit, by its content: files of 1 MiB
    and more are hard links of blobs/SHA256.gguf, so that two keys with the same bytes
    (the round trips of mount_hf_export give back the GGUF they began with, at each
    outtype; a model and its +omit variant) keep one copy: 3.2 of 8.2 GB in a fresh-clone
    run.  (Hashing them costs about 1 s of CPU per GB converted.)  Returns the file that
    hit is a link of."""
    src = tmp
    if os.path.getsize(tmp) >= 1 << 20:
        blob = os.path.join(os.path.dirname(hit), "blobs", _file_digest(tmp).hex() + ".gguf")
        if not os.path.exists(blob):
            os.makedirs(os.path.dirname(blob), exist_ok=True)
            _place(tmp, blob)
        src = blob
    _place(src, hit)
    return src


def _convert(hfdir, outfile, extra, timeout, hit):
    if hit and os.path.exists(hit):
        _place(hit, outfile)
        return None
    tmp = "%s.%d.tmp" % (outfile, os.getpid())   # (two runs of one outfile: two names)
    r = run_converter(hfdir, tmp, *extra, timeout=timeout)
    if r.returncode:
        lines = r.stderr.strip().splitlines() or ["exit %d" % r.returncode]
        return "converter failed: " + lines[-1]
    if hit:
        try:
            _place(_store(tmp, hit), tmp)   # (the bytes were there: the test's is a link)
        except OSError:
            pass   # (the cache only saves time)
    _place(tmp, outfile)   # (not a rename: outfile may be a link of those bytes already)
    os.unlink(tmp)
    return None
