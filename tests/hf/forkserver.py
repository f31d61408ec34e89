"""A fork server shared by every test process of the machine: a reference tool (llama.cpp's
converter: refconv/server.py) loaded once, and a forked copy of it for each run.

    # the server (a script of its own, started by call() when none answers):
    forkserver.serve(name, run, prepare=None)
    # a client (any test process):
    reply = forkserver.call(name, server_argv, request, timeout)

Loading the converter costs 2.5 s of CPU (torch, gguf-py and its imports), and the test
command makes hundreds of runs from some twenty test processes in four chains: one server
per process loaded it twenty times.  Each run is a fork of the loaded server, so it starts
from the same state and a crash or an abort stays in it.

name is an abstract Unix socket (Linux): no file to leave behind, gone with its process, and
a second server's bind fails, so one serves; it should change with the server's code (the
callers hash their sources into it).  The server binds before it loads (a second one started
meanwhile gives up at once) and listens when loaded; it ends when no request came for IDLE
seconds.

A request is a JSON object on one line, with "out" and "err" (the files the run's stdout and
stderr go to), "env" and "cwd" (the client's: the run sees them), "nice" and "cgroups" (the
client's priority and measuring cgroups: the run takes them, _charge), "timeout" (seconds;
then the run is killed), and what the tool needs.  The reply, one line: {"status": EXIT-STATUS,
"cpu": SECONDS} (status negative: killed by that signal; "timeout": killed for it; cpu: the
run's, its children's too).  call() returns None when no server could be had (then the
caller runs the tool as a process of its own, which says what is wrong).
"""
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback

IDLE = 30          # seconds without a request before the server ends
START_WAIT = 180   # seconds a client waits for a server it started to listen


def serve(name, run, prepare=None, load=None):
    """Serves name: load() once (after the bind), then for each request prepare(request) in
    the server (what every later run should inherit) and run(request) in a forked child, its
    return value the exit status.  Returns at once when another server has the name."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("\0" + name)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            return
        raise
    if load:
        load()
    s.listen(128)
    s.settimeout(IDLE)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # the waiters: reaped by the kernel
    while True:
        try:
            conn, _ = s.accept()
        except socket.timeout:
            break
        try:
            conn.settimeout(10)
            line = conn.makefile("r", encoding="utf-8").readline()
            req = json.loads(line) if line.strip() else None
        except (OSError, ValueError):
            req = None
        if req is None:
            conn.close()
            continue
        if prepare:
            try:
                prepare(req)
            except Exception:
                traceback.print_exc()
        if os.fork() == 0:
            s.close()
            _waiter(conn, req, run)
        conn.close()
    s.close()


def _child(req, run):
    """The run (in the forked child): never returns."""
    code = 1
    try:
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        nul = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nul, 0)
        os.close(nul)
        _charge(req)
        os.environ.clear()
        os.environ.update(req.get("env") or {})
        if req.get("cwd"):
            os.chdir(req["cwd"])
        try:
            code = run(req)
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
        os._exit(code if isinstance(code, int) else 1)


def _charge(req):
    """The run as its client's: at the client's CPU priority (a chain of scripts/test.sh runs
    at a lower one), and in the client's measuring cgroups (scripts/bench/cpu-of.sh's
    tfs-test.*: the test's CPU includes its runs).  Best effort: raising a priority needs
    root."""
    if "nice" in req:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, int(req["nice"]))
        except (OSError, ValueError, TypeError):
            pass
    for d in req.get("cgroups") or ():
        if os.path.basename(str(d)).startswith("tfs-test."):
            try:
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass


def _own_cgroups():
    """The directories of this process's scripts/bench/cpu-of.sh cgroups (v1: per
    controller, v2: the unified one), for _charge."""
    found = []
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return found
    for line in lines:
        _, ctl, path = line.split(":", 2)
        if not os.path.basename(path).startswith("tfs-test."):
            continue
        roots = ["/sys/fs/cgroup/" + c for c in ctl.split(",")] if ctl else \
            ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        for r in roots:
            d = r + path
            if os.path.isdir(d) and d not in found:
                found.append(d)
    return found


def _waiter(conn, req, run):
    """Forks the run, waits for it (killing it after req["timeout"] s) and replies: in a
    process of its own, so that the server takes the next request meanwhile."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(req, run)
    timed_out = []

    def expire(signum, frame):
        timed_out.append(1)
        os.kill(pid, signal.SIGKILL)
    signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, int(req.get("timeout") or 900)))
    _, status, ru = os.wait4(pid, 0)
    signal.alarm(0)
    st = "timeout" if timed_out else os.waitstatus_to_exitcode(status)
    try:
        conn.sendall((json.dumps({"status": st, "cpu": round(ru.ru_utime + ru.ru_stime, 3)}) +
                      "\n").encode())
    except OSError:
        pass   # (the client is gone)
    os._exit(0)


def _connect(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + name)
        return s
    except OSError:
        s.close()
        return None


def _start(name, server_argv):
    """A connection to name's server, started (detached: a session of its own, no file of
    the caller's open, so a test runner waiting for its test's output does not wait for it)
    when none listens; None when it does not come up."""
    s = _connect(name)
    if s:
        return s
    subprocess.run(["setsid", "-f"] + list(server_argv), stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
    deadline = time.time() + START_WAIT
    while time.time() < deadline:
        s = _connect(name)
        if s:
            return s
        time.sleep(0.05)
    return None


def call(name, server_argv, req, timeout):
    """Runs req on name's server (started with server_argv when none answers): the reply, or
    None when no server could be had.  Fills in env, cwd, nice and cgroups."""
    req = dict(req, env=dict(os.environ), cwd=os.getcwd(), timeout=timeout,
               nice=os.getpriority(os.PRIO_PROCESS, 0), cgroups=_own_cgroups())
    data = (json.dumps(req) + "\n").encode()
    for _ in range(2):   # (a server ending for idleness may drop a request it had not read)
        s = _start(name, server_argv)
        if s is None:
            return None
        try:
            s.sendall(data)
            s.settimeout(timeout + 120)
            line = s.makefile("r", encoding="utf-8").readline()
        except OSError:
            line = ""
        finally:
            s.close()
        if line.strip():
            return json.loads(line)
    return None
