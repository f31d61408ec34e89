"""Local web servers for the remote-model tests: nginx from Debian on 127.0.0.1, over HTTP
and HTTPS (a throwaway self-signed certificate made with openssl), every request logged
with its Range header and the bytes sent.

    with Nginx(root_dir) as ng:
        ng.url("model.gguf"), ng.surl("model.gguf"), ng.cafile, ng.log() -> [Request]
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections import namedtuple

Request = namedtuple("Request", "method uri status range bytes_sent body_bytes")

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
OPENSSL = shutil.which("openssl")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def make_cert(dirname):
    """A self-signed certificate for 127.0.0.1 and localhost: (cert, key) paths."""
    cert, key = os.path.join(dirname, "cert.pem"), os.path.join(dirname, "key.pem")
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


CONF = """
worker_processes 1;
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 256; }}
http {{
    log_format tfs '$request_method $uri $status "$http_range" $bytes_sent $body_bytes_sent';
    access_log {dir}/access.log tfs;
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp;
    scgi_temp_path {dir}/tmp;
    default_type application/octet-stream;
    keepalive_requests 10000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
    server {{
        listen 127.0.0.1:{sport} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root};
    }}
}}
"""


class Nginx:
    def __init__(self, root):
        self.root = root
        self.dir = tempfile.mkdtemp(prefix="tfs-nginx-")
        os.mkdir(os.path.join(self.dir, "tmp"))
        self.port, self.sport = free_port(), free_port()
        self.cafile, key = make_cert(self.dir)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(CONF.format(dir=self.dir, root=root, port=self.port, sport=self.sport,
                                cert=self.cafile, key=key,
                                user="user root;" if os.geteuid() == 0 else ""))
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-c", conf, "-e",
                                      os.path.join(self.dir, "error.log"), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not (wait_port(self.port) and wait_port(self.sport)):
            self.stop()
            raise RuntimeError("nginx did not start: " + self.errors())

    def errors(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def url(self, name, host="127.0.0.1"):
        return "http://%s:%d/%s" % (host, self.port, name)

    def surl(self, name):
        return "https://127.0.0.1:%d/%s" % (self.sport, name)

    def log(self):
        """The requests logged so far."""
        out = []
        try:
            with open(os.path.join(self.dir, "access.log")) as f:
                for line in f:
                    method, uri, status, rest = line.split(" ", 3)
                    rng, sent, body = rest.rsplit(" ", 2)
                    out.append(Request(method, uri, int(status), rng.strip('"'),
                                       int(sent), int(body)))
        except OSError:
            pass
        return out

    def clear_log(self):
        open(os.path.join(self.dir, "access.log"), "w").close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop()
        return False
