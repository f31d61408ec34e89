"""A fault-injecting proxy in front of an S3 store, for the s3:// fault tests (stdlib only).

Unlike tests/mount/faultproxy.py (http), it forwards every request header as it came, Host
included: a SigV4 signature covers the Host header, so the store checks the signature the
client made for the proxy's address.

    p = S3Proxy("http://127.0.0.1:PORT")     # the store (radosgw)
    p.faults = ["drop", "slowdown"]           # one fault per request that follows, in order
    p.always = "slowdown"                     # or one fault on every request
    p.endpoint ... p.stop()

Faults: drop (headers and half the body, then the connection is closed), slowdown (503 with
S3's SlowDown error document), internal (500 InternalError), region (what AWS answers a
request signed for the wrong region: 301 PermanentRedirect with x-amz-bucket-region: REGION;
radosgw itself accepts any region in a signature).  Every request's headers are recorded in
p.seen as (method, path, {lower-case name: value}).
"""
import http.client
import http.server
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mount"))
from faultproxy import Proxy  # noqa: E402  (the server, its fault queue, start and stop)

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>'
            b'Please reduce your request rate.</Message></Error>')
INTERNAL = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
            b'<Message>We encountered an internal error. Please try again.</Message></Error>')
REDIRECT = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PermanentRedirect</Code>'
            b'<Message>The bucket you are attempting to access must be addressed using the '
            b'specified endpoint.</Message></Error>')


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, status, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self, method):
        p = self.server.proxy
        hdrs = {k.lower(): v for k, v in self.headers.items()}
        with p.lock:
            p.seen.append((method, self.path, hdrs))
        fault = p.next_fault()
        if fault == "slowdown":
            return self._send(503, SLOWDOWN)
        if fault == "internal":
            return self._send(500, INTERNAL)
        if fault == "region":
            return self._send(301, REDIRECT, [("x-amz-bucket-region", p.region)])
        c = http.client.HTTPConnection(p.upstream.hostname, p.upstream.port, timeout=60)
        c.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        c.close()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if fault == "drop":
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def do_GET(self):
        self._forward("GET")

    def do_HEAD(self):
        self._forward("HEAD")


class S3Proxy(Proxy):
    def __init__(self, upstream, region="eu-north-1"):
        self.region = region
        self.seen = []
        super().__init__(upstream, _Handler)

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port
