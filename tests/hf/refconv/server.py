#!/usr/bin/python3
"""Runs llama.cpp's convert_hf_to_gguf.py many times from one process that imported it once:
the converter's fork server (../forkserver.py), one for all the test processes.

    /usr/bin/python3 server.py NAME LLAMA_CPP_DIR NPM_DIR

Importing torch, gguf-py and the converter (with run.py's stand-ins) takes 2.5 s of CPU; a
run of the converter on a tiny model takes a fraction of that.  This process imports them
once and serves the abstract socket NAME (../reference.py names it and starts this); each
request {"argv": [CONVERTER-ARGUMENTS...], ...} is a forked child running the converter's
main() with those arguments, as `run.py` would.  The fork makes each run start from the
same freshly imported state (the converter changes class attributes and logging on the
way) and keeps a crash of one run to itself.
"""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import forkserver  # noqa: E402


def load(src, npm):
    """Imports the converter as run.py runs it; returns its path and its main()."""
    import run
    script = run.setup(src, npm)
    ns = runpy.run_path(script, run_name="convert_hf_to_gguf")
    # what the converter imports while it runs (each architecture's module of conversion/,
    # the tokenizer stand-in), imported once here too
    import conversion
    for m in ["conversion." + x for x in sorted(set(conversion.TEXT_MODEL_MAP.values()))] + \
            ["transformers", "sentencepiece"]:
        try:
            __import__(m)
        except Exception:
            pass   # (the run that needs it fails as it would on its own)
    return script, ns["main"]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    name, src, npm = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    loaded = []

    def run(req):
        script, convert_main = loaded[0]
        os.environ["TFS_REFCONV_NPM"] = npm   # (run.setup's, and the client's environment)
        sys.argv = [script] + req["argv"]
        convert_main()
        return 0
    forkserver.serve(name, run, load=lambda: loaded.append(load(src, npm)))


if __name__ == "__main__":
    main()
