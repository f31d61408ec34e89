"""A fault-injecting HTTP proxy for the remote-model tests (Python stdlib only).

    p = FaultProxy("http://127.0.0.1:PORT")   # the upstream (nginx)
    p.faults = ["drop", "500"]                # one fault per request that follows, in order
    p.always = "500"                          # or one fault on every request
    p.url("model.gguf") ... p.stop()

Faults: drop (half the body, then the connection is closed), 500, 429 (Retry-After: 1),
short (a body cut in half with a Content-Length saying so, the Content-Range unchanged),
stall (headers, then nothing for `stall_seconds`), etag (another ETag), norange (200 and the
whole file, Range ignored), hugesize (a Content-Range total of 2^60), badrange (the bytes of another range, and a Content-Range saying so), 401, 404.
p.latency adds that many seconds before each request is forwarded (bodies without a fault
are relayed as they arrive). p.norange_paths: requests whose path holds that string are
answered as by norange. Every request's Authorization header is recorded in p.auth_seen,
and its (path, Accept header) in p.accept_seen.
"""
import http.client
import http.server
import threading
import time
import urllib.parse


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _upstream(self, path, headers, stream=False):
        """(status, headers, body); with stream, body is the open response to copy."""
        u = self.server.proxy.upstream
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        if stream:
            return r.status, dict(r.getheaders()), r
        body = r.read()
        c.close()
        return r.status, dict(r.getheaders()), body

    def _relay(self, status, hdrs, resp):
        """A response without a body fault, its body copied as it arrives."""
        self.send_response(status)
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
        self.end_headers()
        while True:
            b = resp.read(1 << 20)
            if not b:
                break
            self.wfile.write(b)
        resp.close()

    def do_GET(self):
        p = self.server.proxy
        p.auth_seen.append(self.headers.get("Authorization"))
        p.accept_seen.append((self.path, self.headers.get("Accept")))
        fault = p.next_fault()
        if fault is None and p.norange_paths and p.norange_paths in self.path:
            fault = "norange"
        fwd = {k: v for k, v in self.headers.items()
               if k.lower() in ("range", "if-none-match", "if-modified-since")}
        if fault == "norange":
            fwd.pop("Range", None)
            fwd.pop("If-None-Match", None)
        if fault == "badrange" and "Range" in fwd:
            a, b = fwd["Range"][6:].split("-")
            a, b = int(a), int(b)
            shift = 1 if a == 0 else -1
            fwd["Range"] = "bytes=%d-%d" % (a + shift, b + shift)
        if fault in ("500", "429", "401", "404"):
            extra = {"Retry-After": "1"} if fault == "429" else {}
            return self._send(int(fault), {}, b"fault\n", extra)
        if p.latency:
            time.sleep(p.latency)
        relay = fault not in ("short", "drop", "stall")
        status, hdrs, body = self._upstream(self.path, fwd, stream=relay)
        out = {k: v for k, v in hdrs.items()
               if k.lower() in ("etag", "last-modified", "content-range", "content-type")}
        if fault == "etag" or p.etag_suffix:
            out["ETag"] = out.get("ETag", '"x"')[:-1] + (p.etag_suffix or "changed") + '"'
        if fault == "hugesize" and "Content-Range" in out:
            cr = out["Content-Range"]
            out["Content-Range"] = cr[:cr.index("/") + 1] + str(1 << 60)
        if relay:
            return self._relay(status, out, body)
        if fault == "short":
            body = body[:len(body) // 2]
        if fault == "drop":
            return self._send(status, out, body, {}, cut=len(body) // 2)
        if fault == "stall":
            self.send_response(status)
            for k, v in out.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:100])
            self.wfile.flush()
            time.sleep(p.stall_seconds)
            self.close_connection = True
            return
        self._send(status, out, body, {})

    def _send(self, status, hdrs, body, extra, cut=None):
        self.send_response(status)
        for k, v in list(hdrs.items()) + list(extra.items()):
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the client hung up on a fault: expected


class Proxy:
    """A proxy on 127.0.0.1 (a port of its own) in front of upstream, its requests answered by
    handler (self.server.proxy is this object); faults are taken in order from self.faults,
    then self.always.  tests/s3/s3proxy.py's S3 proxy is one too."""

    def __init__(self, upstream, handler):
        self.upstream = urllib.parse.urlparse(upstream)
        self.faults = []
        self.always = None
        self.requests = 0
        self.lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), handler)
        self.server.proxy = self
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def next_fault(self):
        with self.lock:
            self.requests += 1
            if self.faults:
                return self.faults.pop(0)
            return self.always

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class FaultProxy(Proxy):
    def __init__(self, upstream, host="127.0.0.1"):
        self.etag_suffix = None
        self.stall_seconds = 6
        self.latency = 0  # seconds added before each request is forwarded
        self.auth_seen = []
        self.accept_seen = []
        self.norange_paths = None
        self.host = host
        super().__init__(upstream, _Handler)

    def url(self, name):
        return "http://%s:%d/%s" % (self.host, self.port, name)
