"""A single-node Ceph with its S3 gateway (radosgw) on 127.0.0.1, for the s3:// tests and the
benchmark, and a small signed S3 client to fill it (Python stdlib only).

    with Rgw() as g:                 # mon + one OSD on memstore + radosgw; ~3 s from nothing
        g.endpoint                   # http://127.0.0.1:PORT
        g.key_id, g.secret           # the user made by radosgw-admin
        c = g.client()
        c.create_bucket("b"); c.put("b", "m/x.gguf", data)

As a command (scripts/bench/s3.sh): `rgw.py start DIR` prints the endpoint, key ID and secret
(one line, space-separated) and leaves the daemons running; `rgw.py stop DIR` stops them by the
PIDs it wrote to DIR; `rgw.py put DIR BUCKET KEY FILE` uploads a file.

Virtual-hosted requests work at http://BUCKET.localhost:PORT (`rgw dns name = localhost`;
libcurl takes any *.localhost for 127.0.0.1).

Nothing is on disk but configuration and logs: the OSD keeps its objects in memory
(memstore), authentication between the daemons is off.  The settings that matter (found the
hard way, see issue 31): `ms mon client mode = secure crc` with authentication off, or radosgw
retries forever; `paxos propose interval` short, or each map change (the user made, the pools
radosgw creates) waits a second; `mon data avail crit = 0`, or a full /tmp stops the mon.  The
daemons' output goes to files in DIR: never to the caller's pipe (a test runner waiting for
its end would wait for the daemons).  Each is stopped by its PID.
"""
import datetime
import hashlib
import hmac
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")
KEY_ID = "TFSTESTKEY0123456789"
SECRET = "tfs+test/secret0123456789abcdefghijklmn"


def available():
    """None, or why a cluster cannot be started here."""
    missing = [b for b in BINARIES if not shutil.which(b)]
    if missing:
        return "not installed: %s (scripts/setup.sh installs radosgw, ceph-mon, ceph-osd)" % \
            ", ".join(missing)
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def listens(pid, port):
    """Whether process pid has a socket listening on 127.0.0.1:port (/proc/net/tcp's LISTEN
    rows, state 0A, and the process's open sockets)."""
    want = "0100007F:%04X" % port
    try:
        with open("/proc/net/tcp") as f:
            inodes = {l.split()[9] for l in f.readlines()[1:]
                      if l.split()[1] == want and l.split()[3] == "0A"}
        if not inodes:
            return False
        fds = "/proc/%d/fd" % pid
        return any(os.readlink(os.path.join(fds, fd))[8:-1] in inodes
                   for fd in os.listdir(fds))
    except OSError:
        return False


CONF = """[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{mon_port}
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = secure crc
osd objectstore = memstore
memstore device bytes = {store_bytes}
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
mon data avail crit = 0
paxos propose interval = 0.05
run dir = {dir}/run
log file = {dir}/$name.log
admin socket = {dir}/run/$name.asok
pid file = {dir}/run/$name.pid
mon data = {dir}/mon
osd data = {dir}/osd
keyring = /dev/null
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port}
rgw dns name = localhost
rgw data = {dir}/rgw
"""


class Rgw:
    def __init__(self, workdir=None, store_bytes=1 << 30):
        self.dir = workdir or tempfile.mkdtemp(prefix="tfs-ceph-")
        self.own_dir = workdir is None
        self.store_bytes = store_bytes
        self.procs = {}
        self.key_id, self.secret = KEY_ID, SECRET
        self.port = None

    # ---- the daemons ----

    def _run(self, argv, timeout=30):
        with open(os.path.join(self.dir, "commands.log"), "a") as log:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=log, timeout=timeout, text=True)
        if r.returncode != 0:
            raise RuntimeError("%s failed (%d)" % (" ".join(argv[:3]), r.returncode))
        return r.stdout

    def _daemon(self, name, argv):
        out = open(os.path.join(self.dir, name + ".out"), "w")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                             start_new_session=True)
        out.close()
        self.procs[name] = p
        with open(os.path.join(self.dir, name + ".pid"), "w") as f:
            f.write("%d\n" % p.pid)

    def start(self, timeout=60, attempts=3):
        """Starts the cluster; again (new ports, a new cluster) when an attempt fails, up to
        attempts times: a port free_port found may be taken before a daemon binds it (by a
        connection's ephemeral port, on a machine running other tests), and on a loaded one
        the mon can be slow to answer.  The last failure raises with the logs' ends."""
        why = available()
        if why:
            raise RuntimeError(why)
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(timeout)
                return self
            except BaseException as e:
                tail = self._log_tails()
                stop_pids(self.dir, self.procs)
                self.procs = {}
                if attempt == attempts or not isinstance(e, (RuntimeError, OSError,
                                                             subprocess.TimeoutExpired)):
                    if self.own_dir:
                        shutil.rmtree(self.dir, ignore_errors=True)
                    if isinstance(e, (RuntimeError, subprocess.TimeoutExpired)):
                        raise RuntimeError("radosgw: %s (attempt %d of %d)\n%s" %
                                           (e, attempt, attempts, tail)) from e
                    raise
                print("# radosgw: attempt %d failed (%s); again on new ports" % (attempt, e),
                      file=sys.stderr, flush=True)
                for n in os.listdir(self.dir):   # a cluster of its own: a new fsid, a new mon
                    p = os.path.join(self.dir, n)
                    shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)

    def _start_once(self, timeout):
        os.makedirs(os.path.join(self.dir, "run"), exist_ok=True)
        for d in ("mon", "osd", "rgw"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        self.port = free_port()
        conf = os.path.join(self.dir, "ceph.conf")
        fsid = str(uuid.uuid4())
        mon_port = free_port()
        with open(conf, "w") as f:
            f.write(CONF.format(fsid=fsid, mon_port=mon_port, rgw_port=self.port, dir=self.dir,
                                store_bytes=self.store_bytes))
        c = ["-c", conf]
        deadline = time.time() + timeout
        self._run(["monmaptool", "--create", "--add", "a", "v2:127.0.0.1:%d" % mon_port,
                   "--fsid", fsid, os.path.join(self.dir, "monmap")] + c)
        self._run(["ceph-mon", "--mkfs", "-i", "a", "--monmap",
                   os.path.join(self.dir, "monmap")] + c)
        self._daemon("mon", ["ceph-mon", "-f", "-i", "a"] + c)
        self._wait_listening("mon", mon_port, deadline)
        osd_id = self._run(["ceph", "--connect-timeout", str(timeout), "osd", "create"] + c,
                           timeout=timeout + 10).strip()
        self._run(["ceph-osd", "-i", osd_id, "--mkfs"] + c)
        self._daemon("osd", ["ceph-osd", "-f", "-i", osd_id] + c)
        self._daemon("rgw", ["radosgw", "-f", "-n", "client.rgw"] + c)
        # the user: radosgw-admin waits for the OSD (the pools radosgw creates) itself
        self._run(["radosgw-admin", "user", "create", "--uid", "tfs", "--display-name",
                   "tensorfs tests", "--access-key", self.key_id, "--secret-key",
                   self.secret] + c, timeout=timeout)
        cl = self.client()
        while True:  # radosgw answering signed requests
            try:
                if cl.request("GET", "/")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("radosgw did not answer within %d s" % timeout)
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError("%s exited (%d)" % (name, p.returncode))
            time.sleep(0.05)

    def _wait_listening(self, name, port, deadline):
        """Until the daemon name listens on port (its own socket: another process may have
        taken the port); an error when it exits or at the deadline."""
        p = self.procs[name]
        while True:
            if listens(p.pid, port):
                return
            if p.poll() is not None:
                raise RuntimeError("%s exited (%d)" % (name, p.returncode))
            if time.time() > deadline:
                raise RuntimeError("%s did not listen on port %d in time" % (name, port))
            time.sleep(0.05)

    def _log_tails(self, lines=8):
        """The last lines of the commands' and the daemons' logs (for an error: the directory
        may be gone when it is read)."""
        out = []
        for n in ("commands.log", "mon.out", "osd.out", "rgw.out", "mon.a.log", "client.rgw.log"):
            try:
                with open(os.path.join(self.dir, n), errors="replace") as f:
                    t = f.read().splitlines()[-lines:]
            except OSError:
                continue
            if t:
                out.append("--- %s:\n%s" % (n, "\n".join(l[:300] for l in t)))
        return "\n".join(out) or "(no logs in %s)" % self.dir

    def stop(self):
        stop_pids(self.dir, self.procs)
        self.procs = {}
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
        return False

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def client(self, key_id=None, secret=None):
        return S3Client(self.endpoint, key_id or self.key_id, secret or self.secret)

    def rss_kib(self):
        """The daemons' resident memory in all (KiB)."""
        total = 0
        for p in self.procs.values():
            try:
                with open("/proc/%d/status" % p.pid) as f:
                    total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
            except (OSError, StopIteration):
                pass
        return total


def stop_pids(workdir, procs=None):
    """Stops the daemons of workdir by the PIDs written there (rgw, osd, mon: the gateway
    first) with SIGKILL: nothing of theirs is worth keeping, and a memstore OSD told to stop
    cleanly first writes every object it holds to its directory."""
    order = ("rgw", "osd", "mon")
    pids = {}
    for name in order:
        if procs and name in procs:
            pids[name] = procs[name]
            continue
        try:
            with open(os.path.join(workdir, name + ".pid")) as f:
                pids[name] = int(f.read())
        except (OSError, ValueError):
            pass
    for name in order:
        p = pids.get(name)
        if p is None:
            continue
        pid = p.pid if hasattr(p, "pid") else p
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        if hasattr(p, "wait"):
            p.wait(5)
        else:  # not our child: gone when kill(0) fails
            deadline = time.time() + 5
            while time.time() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.02)


# ---- a small S3 client (SigV4, path-style) to fill the store ----

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_headers(method, host, path, query, key_id, secret, region="us-east-1",
                  payload_hash=EMPTY_SHA256, now=None, extra=None):
    """The headers of a SigV4-signed request (path and query already URI-encoded, the query
    canonical); an independent implementation of what codec/net/s3.c does."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    hdrs = {"host": host, "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
    hdrs.update({k.lower(): v for k, v in (extra or {}).items()})
    names = sorted(hdrs)
    canonical = "\n".join([method, path, query] + ["%s:%s" % (n, hdrs[n].strip()) for n in names]
                          + ["", ";".join(names), payload_hash])
    scope = "%s/%s/s3/aws4_request" % (date, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canonical.encode()).hexdigest()])
    k = _sign(("AWS4" + secret).encode(), date)
    for part in (region, "s3", "aws4_request"):
        k = _sign(k, part)
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    hdrs["authorization"] = ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
                             % (key_id, scope, ";".join(names), sig))
    del hdrs["host"]
    return hdrs


class S3Client:
    def __init__(self, endpoint, key_id, secret, region="us-east-1"):
        u = urllib.parse.urlparse(endpoint)
        self.host, self.port = u.hostname, u.port
        self.key_id, self.secret, self.region = key_id, secret, region

    def request(self, method, path, body=b"", query="", extra=None):
        """(status, headers, body) of a signed request; path URI-encoded."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        h = sigv4_headers(method, "%s:%d" % (self.host, self.port), path, query, self.key_id,
                          self.secret, self.region, payload_hash="UNSIGNED-PAYLOAD",
                          extra=extra)
        h["Content-Length"] = str(len(body))
        c.request(method, path + ("?" + query if query else ""), body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def create_bucket(self, bucket):
        st, _, data = self.request("PUT", "/" + urllib.parse.quote(bucket))
        if st != 200:
            raise RuntimeError("create bucket %s: HTTP %d %s" % (bucket, st, data[:200]))

    def put(self, bucket, key, data):
        st, _, resp = self.request("PUT", "/%s/%s" % (urllib.parse.quote(bucket),
                                                       urllib.parse.quote(key, safe="/~")),
                                   body=data)
        if st != 200:
            raise RuntimeError("put %s/%s: HTTP %d %s" % (bucket, key, st, resp[:200]))

    def put_file(self, bucket, key, path):
        with open(path, "rb") as f:
            self.put(bucket, key, f.read())


def main(argv):
    if len(argv) >= 2 and argv[0] == "start":
        g = Rgw(argv[1], store_bytes=int(argv[2]) if len(argv) > 2 else 1 << 30)
        g.start()
        print(g.endpoint, g.key_id, g.secret)
        return 0
    if len(argv) == 2 and argv[0] == "stop":
        stop_pids(argv[1])
        return 0
    if len(argv) == 5 and argv[0] in ("put", "mb"):
        conf = open(os.path.join(argv[1], "ceph.conf")).read()
        port = int(conf.split("endpoint=127.0.0.1:")[1].split()[0])
        c = S3Client("http://127.0.0.1:%d" % port, KEY_ID, SECRET)
        if argv[0] == "mb":
            c.create_bucket(argv[2])
        c.put_file(argv[2], argv[3], argv[4])
        return 0
    print("usage: rgw.py start DIR [STORE_BYTES] | stop DIR | put DIR BUCKET KEY FILE | "
          "mb DIR BUCKET KEY FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
