#!/usr/bin/python3
"""Runs llama.cpp's convert_hf_to_gguf.py many times from one process that imported it once.

    /usr/bin/python3 server.py LLAMA_CPP_DIR NPM_DIR

Importing torch, gguf-py and the converter (with run.py's stand-ins) takes seconds of CPU; a
run of the converter on a tiny model takes a fraction of that.  This process imports them
once, says "ready" on stdout, then reads requests on stdin, one JSON object a line:

    {"id": N, "argv": [CONVERTER-ARGUMENTS...], "out": PATH, "err": PATH, "timeout": S}

and for each forks a child that runs the converter's main() with those arguments, as
`run.py` would, its stdout and stderr going to the files "out" and "err".  The fork makes
each run start from the same freshly imported state (the converter changes class attributes
and logging on the way) and keeps a crash of one run to itself.  When the run ends, one line
goes to stdout: {"id": N, "status": EXIT-STATUS, "cpu": SECONDS} (status negative: killed by
that signal; "timeout": killed after S seconds; cpu: the run's CPU time, its children's too).  Runs may overlap: each has a waiting process of its own.  The
server ends at the end of its input.  reference.py starts it and speaks this protocol.
"""
import json
import os
import runpy
import signal
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


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


def child(script, main, req):
    """The converter's run (in the forked child): never returns."""
    code = 1
    try:
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        nul = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nul, 0)
        os.close(nul)
        sys.argv = [script] + req["argv"]
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def waiter(script, main, req):
    """Forks the run, waits for it (killing it after req["timeout"] s), reports: in a
    process of its own, so that the server reads on."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        child(script, main, req)
    timed_out = []

    def expire(signum, frame):
        timed_out.append(1)
        os.kill(pid, signal.SIGKILL)
    signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, int(req.get("timeout") or 900)))
    _, status, ru = os.wait4(pid, 0)
    signal.alarm(0)
    st = "timeout" if timed_out else os.waitstatus_to_exitcode(status)
    os.write(1, (json.dumps({"id": req["id"], "status": st,
                             "cpu": round(ru.ru_utime + ru.ru_stime, 3)}) + "\n").encode())
    os._exit(0)


def serve():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, npm = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    script, main = load(src, npm)
    sys.stdout.flush()
    os.write(1, b"ready\n")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters: reaped by the kernel
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if os.fork() == 0:
            waiter(script, main, req)


if __name__ == "__main__":
    serve()
