"""Where the tests' reference llama.cpp is, and how to run its converter.

The reference is the llama.cpp source that the tests' runtime (npm @node-llama-cpp/linux-x64
3.22.1) was built from: commit de3ff81, cloned by scripts/setup.sh from node-llama-cpp 3.22.1's
git bundle into build/llama.cpp (TFS_LLAMA_CPP names another clone). Its convert_hf_to_gguf.py
runs unmodified with the stand-ins of tests/hf/refconv/ (see its README) on Debian's
/usr/bin/python3.

    import reference
    why = reference.missing_reason()          # None, or why the converter cannot run
    subprocess.run(reference.converter_argv(hfdir, out, "--outtype", "f16"))
    reference.vocab_dir()                     # models/ with ggml-vocab-*.gguf, .inp, .out
"""
import importlib.util
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
COMMIT = "de3ff815ea7d559ee917f063901b8986f038abc6"
PYTHON = "/usr/bin/python3"   # Debian's python3-torch & co. are installed for it
RUNNER = os.path.join(HERE, "refconv", "run.py")
# Debian packages the converter imports (python3-torch, -numpy, -sentencepiece, -yaml, -tqdm)
# and the tokenizer stand-in's regex (python3-regex)
MODULES = ("torch", "numpy", "sentencepiece", "yaml", "tqdm", "regex")


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


def _python_has(modules):
    """Which of modules /usr/bin/python3 cannot import (checked in this process when it is
    /usr/bin/python3, else by asking it)."""
    if os.path.realpath(PYTHON) == os.path.realpath(os.sys.executable):
        return [m for m in modules if importlib.util.find_spec(m) is None]
    code = "import importlib.util as u; print(' '.join(m for m in %r if u.find_spec(m) is None))" \
        % (tuple(modules),)
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


def convert(hfdir, outfile, *extra, timeout=900):
    """Runs the converter; None on success, else the last line it printed on stderr. The file
    is written under a temporary name and renamed, so a failed run leaves none."""
    tmp = str(outfile) + ".tmp"
    r = subprocess.run(converter_argv(hfdir, tmp, *extra), capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode:
        lines = r.stderr.strip().splitlines() or ["exit %d" % r.returncode]
        return "converter failed: " + lines[-1]
    os.replace(tmp, outfile)
    return None
