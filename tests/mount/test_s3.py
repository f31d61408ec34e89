"""s3:// sources against a real S3 store: a single-node Ceph with its S3 gateway (radosgw:
one mon, one OSD on memstore), started once for this file on 127.0.0.1 and stopped by PID
(tests/s3/rgw.py), filled with a signed client of its own (an independent SigV4 in Python).

- A GGUF, a sharded safetensors set (by its index and by its prefix) and a Hugging Face repo
  under a prefix mount and read the same bytes as a mount of their local copies: every file of
  the GGUF, every tensor of the set, the repo's model.gguf view and its -o quantize= view.
- `tensorfs info`, `convert` and `repack` take s3:// sources; a rw mount needs -o output=.
- Every credential source: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN: sent
  and signed, seen through a proxy), AWS_PROFILE in ~/.aws/credentials and ~/.aws/config,
  the default profile, AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE, none (anonymous: a
  public object reads, a private one is refused saying so).  Endpoints from -o endpoint=,
  AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL and a profile's endpoint_url; path-style and
  virtual-hosted requests.
- Bad secrets, key IDs, keys, buckets, regions, endpoints, profiles: one line each, naming the
  source; no secret in any message, index.json or extended attribute.
- Faults through a proxy (tests/s3/s3proxy.py): dropped connections and 503 SlowDown are
  retried and the bytes are right; a store that keeps answering SlowDown fails after a bounded
  number of tries, naming the key; a bucket in another region says which (the proxy answers as
  AWS does: radosgw accepts a signature for any region).

Without Ceph's binaries the tests SKIP (scripts/setup.sh installs them).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))

from harness import TENSORFS, Mount, TestCase, is_mounted, kill_daemon, main, quick, run
import rgw
import s3proxy
from test_remote import SHARDS, files_of, index_without_source, make_big_gguf, make_sharded, read

BUCKET = "tfs-models"
G = None            # the Rgw
SKIP = None
WORK = None         # the local copies
SHARDED = None      # {tensor: bytes} of the sharded set
REPO = None         # the local HF repo (None: make_model.py could not make one)
BASE_ENV = None


def setUpModule():
    global G, SKIP, WORK, SHARDED, REPO, BASE_ENV
    SKIP = rgw.available()
    if SKIP:
        print("# SKIP: " + SKIP, flush=True)
        return
    WORK = tempfile.mkdtemp(prefix="tfs-s3-")
    G = rgw.Rgw(os.path.join(WORK, "ceph"))
    os.makedirs(G.dir)
    t = time.time()
    G.start()
    print("# radosgw up in %.1f s" % (time.time() - t), flush=True)
    c = G.client()
    c.create_bucket(BUCKET)
    make_big_gguf(os.path.join(WORK, "big.gguf"))
    SHARDED = make_sharded(os.path.join(WORK, "sharded"))
    c.put_file(BUCKET, "big.gguf", os.path.join(WORK, "big.gguf"))
    c.put_file(BUCKET, "dir/tiny llama+1.gguf", os.path.join(HERE, "../../examples/tiny-llama.gguf"))
    for n in SHARDS + ("model.safetensors.index.json",):
        c.put_file(BUCKET, "sharded/" + n, os.path.join(WORK, "sharded", n))
    r = subprocess.run([sys.executable, os.path.join(HERE, "../hf/make_model.py"),
                        os.path.join(WORK, "hf"), "llama-bf16"], capture_output=True, text=True)
    if r.returncode == 0:
        REPO = os.path.join(WORK, "hf", "llama-bf16")
        for n in sorted(os.listdir(REPO)):
            c.put_file(BUCKET, "repos/llama-bf16/" + n, os.path.join(REPO, n))
    else:
        print("# no HF repo (make_model.py): %s" % r.stderr.strip()[-300:], flush=True)
    # a public object (anonymous reads) in a bucket of its own
    c.create_bucket("tfs-public")
    st, _, body = c.request("PUT", "/tfs-public/tiny.gguf",
                            read(os.path.join(HERE, "../../examples/tiny-llama.gguf")),
                            extra={"x-amz-acl": "public-read"})
    assert st == 200, body
    BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    BASE_ENV["HOME"] = os.path.join(WORK, "home")   # no ~/.aws of the machine's
    os.makedirs(BASE_ENV["HOME"])
    # what Mount() runs with: the store's user, its endpoint
    os.environ.clear()
    os.environ.update(BASE_ENV, AWS_ACCESS_KEY_ID=G.key_id, AWS_SECRET_ACCESS_KEY=G.secret,
                      AWS_ENDPOINT_URL=G.endpoint)


def tearDownModule():
    if G:
        G.stop()
    if WORK:
        shutil.rmtree(WORK, ignore_errors=True)


def src(key):
    return "s3://%s/%s" % (BUCKET, key)


class S3(TestCase):
    def setUp(self):
        if SKIP:
            self.skipTest(SKIP)
        self.cache = self.tmpdir()

    def opts(self, *more):
        return ["cache=" + self.cache] + list(more)

    def env(self, **kw):
        """The base environment (no AWS_ variable, an empty HOME) plus kw (None: unset)."""
        e = dict(BASE_ENV)
        e.update({k: v for k, v in kw.items() if v is not None})
        return e

    def creds(self, **kw):
        """The store's user and endpoint in the environment, with kw over them."""
        return self.env(**dict(dict(AWS_ACCESS_KEY_ID=G.key_id, AWS_SECRET_ACCESS_KEY=G.secret,
                                    AWS_ENDPOINT_URL=G.endpoint), **kw))

    def refused(self, source, pattern, env, options=()):
        """The mount fails with one line naming source and matching pattern, secret-free."""
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", source, mp, "-o", ",".join(self.opts(*options))],
                env=env, timeout=60)
        if is_mounted(mp):
            run([TENSORFS, "unmount", mp])
            self.fail("%s: mounted" % source)
        self.assertNotEqual(r.returncode, 0)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], pattern)
        self.assertNotIn(G.secret, r.stderr)
        return lines[0]

    def same_files(self, remote_mp, local_mp, skip=("index.json",)):
        names = files_of(local_mp)
        self.assertEqual(files_of(remote_mp), names)
        for f in names:
            if f not in skip:
                self.assertEqual(read(os.path.join(remote_mp, f)),
                                 read(os.path.join(local_mp, f)), f)
        self.assertEqual(index_without_source(read(os.path.join(remote_mp, "index.json"))),
                         index_without_source(read(os.path.join(local_mp, "index.json"))))

    # ==== the models ====

    @quick
    def test_gguf_reads_the_same_bytes(self):
        with Mount(self, src("big.gguf"), self.opts()) as rm, \
                Mount(self, os.path.join(WORK, "big.gguf")) as lm:
            self.same_files(rm.path, lm.path)
            idx = read(rm.p("index.json"))
            self.assertIn(src("big.gguf").encode(), idx)
            self.assertNotIn(G.secret.encode(), idx)
            self.assertNotIn(G.key_id.encode(), idx)
            attrs = subprocess.run(["getfattr", "-d", "-m", "-", rm.path],
                                   capture_output=True).stdout
            self.assertIn(b"s3://", attrs)
            self.assertNotIn(G.secret.encode(), attrs)
        # nor in the cache's names or its small files
        for d, _, fs in os.walk(self.cache):
            for f in fs:
                self.assertNotIn(G.key_id, f)
                if os.path.getsize(os.path.join(d, f)) < 4096:
                    self.assertNotIn(G.secret.encode(), read(os.path.join(d, f)))
        # a key with a space and a '+' (URI-encoded once in the request, signed so)
        with Mount(self, src("dir/tiny llama+1.gguf"), self.opts()) as rm, \
                Mount(self, os.path.join(HERE, "../../examples/tiny-llama.gguf")) as lm:
            self.same_files(rm.path, lm.path)

    def test_sharded_set_by_index_and_by_prefix(self):
        # (s3://B/sharded: no such key, so the prefix sharded/, as `aws s3 ls` finds it)
        for source in (src("sharded/model.safetensors.index.json"), src("sharded/"),
                       src("sharded")):
            with Mount(self, source, self.opts()) as rm:
                for t, raw in SHARDED.items():
                    self.assertEqual(read(rm.p("tensors", t)), raw, (source, t))

    def test_hf_repo_under_a_prefix(self):
        if not REPO:
            self.skipTest("tests/hf/make_model.py made no repo")
        with Mount(self, src("repos/llama-bf16/"), self.opts()) as rm, \
                Mount(self, REPO) as lm:
            self.assertIn("model.gguf", os.listdir(rm.path))
            self.assertEqual(read(rm.p("model.gguf")), read(lm.p("model.gguf")))
        with Mount(self, src("repos/llama-bf16/"), self.opts("quantize=Q8_0")) as rm, \
                Mount(self, REPO, ["quantize=Q8_0", "cache=" + self.tmpdir()]) as lm:
            self.assertEqual(read(rm.p("model.gguf")), read(lm.p("model.gguf")))
        for source in (src("repos/llama-bf16/"), src("repos/llama-bf16")):
            r = run([TENSORFS, "info", source, "--gguf", "--no-tensors"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("general.architecture", r.stdout)
            self.assertIn("llama", r.stdout)
            self.assertIn("general.name", r.stdout)
            self.assertIn("llama-bf16", r.stdout)
        # convert: the same file as from the local repo
        out_r, out_l = os.path.join(self.tmpdir(), "r.gguf"), os.path.join(self.tmpdir(), "l.gguf")
        r = run([TENSORFS, "convert", src("repos/llama-bf16/"), out_r, "-o",
                 "cache=" + self.cache], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run([TENSORFS, "convert", REPO, out_l], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(out_r), read(out_l))

    def test_info(self):
        r = run([TENSORFS, "info", src("sharded/"), "--json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(sorted(t["name"] for t in doc["tensors"]), sorted(SHARDED))
        r = run([TENSORFS, "info", src("missing.gguf")])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no such key in bucket %s" % BUCKET, r.stderr)

    def test_rw_writes_its_output_locally(self):
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", src("big.gguf"), mp, "-o", "rw"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("output=", r.stderr)
        out = os.path.join(self.tmpdir(), "edited.gguf")
        with Mount(self, src("big.gguf"), self.opts("rw", "output=" + out)) as m:
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("from s3\n")
        self.assertTrue(os.path.exists(out))
        with Mount(self, out) as m:
            self.assertEqual(read(m.p("metadata", "general.name")), b"from s3\n")
            with Mount(self, os.path.join(WORK, "big.gguf")) as lm:
                self.assertEqual(read(m.p("tensors", "big")), read(lm.p("tensors", "big")))

    def test_repack_after_a_killed_rw_mount(self):
        out = os.path.join(self.tmpdir(), "out.gguf")
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", src("big.gguf"), mp, "-o",
                 ",".join(self.opts("rw", "output=" + out))])
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            with open(os.path.join(mp, "metadata", "general.name"), "w") as f:
                f.write("repacked\n")
            kill_daemon(mp)
        finally:
            subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)
        r = run([TENSORFS, "repack", src("big.gguf"), "-o", "output=" + out], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with Mount(self, out) as m:
            self.assertEqual(read(m.p("metadata", "general.name")), b"repacked\n")

    # ==== where credentials and the endpoint come from ====

    def mounts(self, source, env, options=()):
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", source, mp, "-o", ",".join(self.opts(*options))], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        try:
            self.assertEqual(read(os.path.join(mp, "metadata", "general.architecture")),
                             b"llama\n")
        finally:
            run([TENSORFS, "unmount", mp])

    def write_aws(self, home, credentials=None, config=None):
        os.makedirs(os.path.join(home, ".aws"), exist_ok=True)
        for name, text in (("credentials", credentials), ("config", config)):
            if text is not None:
                with open(os.path.join(home, ".aws", name), "w") as f:
                    f.write(text)

    def test_credentials_from_profiles(self):
        home = self.tmpdir()
        good = "aws_access_key_id = %s\naws_secret_access_key = %s\n" % (G.key_id, G.secret)
        bad = "aws_access_key_id = %s\naws_secret_access_key = wrong\n" % G.key_id
        self.write_aws(home, "[default]\n" + good + "[broken]\n" + bad,
                       "[default]\nendpoint_url = %s\n[profile team]\n%sendpoint_url = %s\n"
                       "[profile broken]\nendpoint_url = %s\n" % (G.endpoint, good, G.endpoint,
                                                                G.endpoint))
        e = self.env(HOME=home)
        self.mounts(src("big.gguf"), e)                                   # default profile
        self.refused(src("big.gguf"), "refused the request.s signature.*AWS profile broken",
                     dict(e, AWS_PROFILE="broken"))
        self.mounts(src("big.gguf"), dict(e, AWS_PROFILE="team"))          # keys in config
        self.refused(src("big.gguf"), "AWS_PROFILE=nobody: no such profile in " + home,
                     dict(e, AWS_PROFILE="nobody"))
        # files named by the variables, not ~/.aws
        d = self.tmpdir()
        with open(os.path.join(d, "c"), "w") as f:
            f.write("[ci]\n" + good)
        with open(os.path.join(d, "k"), "w") as f:
            f.write("[profile ci]\nendpoint_url = %s\n" % G.endpoint)
        self.mounts(src("big.gguf"), self.env(AWS_PROFILE="ci", AWS_SHARED_CREDENTIALS_FILE=
                                              os.path.join(d, "c"),
                                              AWS_CONFIG_FILE=os.path.join(d, "k")))

    def test_credentials_from_the_environment_and_session_token(self):
        self.mounts(src("big.gguf"), self.creds())
        # a session token is sent and signed (seen at a proxy; radosgw ignores a token that
        # comes with a user's own key, so the mount works)
        p = s3proxy.S3Proxy(G.endpoint)
        self.addCleanup(p.stop)
        self.mounts(src("big.gguf"), self.creds(AWS_SESSION_TOKEN="tok/en+1=",
                                                AWS_ENDPOINT_URL=p.endpoint))
        self.assertTrue(p.seen)
        h = p.seen[0][2]
        self.assertEqual(h["x-amz-security-token"], "tok/en+1=")
        self.assertIn("x-amz-security-token", h["authorization"])
        self.assertEqual(h["x-amz-content-sha256"], rgw.EMPTY_SHA256)
        self.refused(src("big.gguf"), "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not",
                     self.creds(AWS_SECRET_ACCESS_KEY=""))

    def test_anonymous(self):
        e = self.env(AWS_ENDPOINT_URL=G.endpoint)
        self.mounts("s3://tfs-public/tiny.gguf", e)
        self.refused(src("big.gguf"), "access denied.*no credentials were found", e)

    def test_endpoint_sources(self):
        e = self.creds(AWS_ENDPOINT_URL=None)
        self.mounts(src("big.gguf"), e, ["endpoint=" + G.endpoint])
        self.mounts(src("big.gguf"), dict(e, AWS_ENDPOINT_URL_S3=G.endpoint,
                                          AWS_ENDPOINT_URL="http://127.0.0.1:9"))
        # -o endpoint= before both variables
        self.mounts(src("big.gguf"), dict(e, AWS_ENDPOINT_URL_S3="http://127.0.0.1:9"),
                    ["endpoint=" + G.endpoint, "s3_addressing=path"])

    def test_virtual_hosted_addressing(self):
        """s3_addressing=virtual: the bucket in the host name (radosgw's rgw dns name is
        localhost, which libcurl resolves to 127.0.0.1 with any subdomain)."""
        p = s3proxy.S3Proxy(G.endpoint)
        self.addCleanup(p.stop)
        ep = "http://localhost:%d" % p.port
        for options in (["s3_addressing=virtual"], []):
            self.mounts(src("big.gguf"), self.creds(AWS_ENDPOINT_URL=ep), options)
        virtual, path = p.seen[0], p.seen[-1]
        self.assertEqual(virtual[2]["host"], "%s.localhost:%d" % (BUCKET, p.port))
        self.assertEqual(virtual[1], "/big.gguf")
        self.assertEqual(path[2]["host"], "localhost:%d" % p.port)
        self.assertEqual(path[1], "/%s/big.gguf" % BUCKET)

    # ==== one clear line for each mistake ====

    def test_bad_settings_say_which(self):
        cases = [
            (self.creds(AWS_SECRET_ACCESS_KEY="wrong"), src("big.gguf"), (),
             r"^[a-z.]*tensorfs: s3://tfs-models/big.gguf: the store refused the request's "
             r"signature \(HTTP 403 SignatureDoesNotMatch\): is the secret key right\? "
             r"\(credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\)"),
            (self.creds(AWS_ACCESS_KEY_ID="NOSUCHKEY"), src("big.gguf"), (),
             r"refused the access key ID \(HTTP 403 InvalidAccessKeyId\): is it a key of this "
             "store"),
            (self.creds(), src("nothing/here.gguf"), (),
             r"s3://tfs-models/nothing/here.gguf: no such key in bucket tfs-models \(HTTP 404"),
            (self.creds(), "s3://no-such-bucket/m.gguf", (),
             "no bucket no-such-bucket at http://127.0.0.1:[0-9]+ .HTTP 404 NoSuchBucket"),
            (self.creds(), src("nothing/"), (), "no key under the prefix"),
            (self.creds(), src("nothing"), (), r"s3://tfs-models/nothing: no such key in bucket "
             r"tfs-models \(HTTP 404 NoSuchKey\), nor any key under the prefix "
             r"s3://tfs-models/nothing/$"),
            (self.creds(AWS_ENDPOINT_URL="ftp://127.0.0.1"), src("big.gguf"), (),
             "AWS_ENDPOINT_URL=ftp://127.0.0.1: not an http:// or https:// URL"),
            (self.creds(), src("big.gguf"), ("endpoint=http://127.0.0.1:9", "timeout=2"),
             r"s3://tfs-models/big.gguf \(http://127.0.0.1:9/tfs-models/big.gguf\): "
             "Couldn't connect"),
            (self.creds(), src("big.gguf"), ("s3_addressing=sideways",),
             "s3_addressing=sideways: not path or virtual"),
            (self.creds(AWS_REGION="not a region"), src("big.gguf"), (),
             "region not a region: not a region name"),
            (self.creds(), "s3:///key.gguf", (), "not of the form s3://BUCKET/KEY"),
        ]
        for env, source, options, pattern in cases:
            self.refused(source, pattern, env, options)
        # a word that is not path or virtual is a usage error, as any other bad option
        r = run([TENSORFS, "mount", src("big.gguf"), self.tmpdir(), "-o", "s3_addressing=up"])
        self.assertEqual((r.returncode, r.stderr),
                         (2, "mount.tensorfs: -o s3_addressing=up: not path or virtual\n"))

    # ==== faults ====

    def test_dropped_connections_and_slowdown_are_retried(self):
        p = s3proxy.S3Proxy(G.endpoint)
        self.addCleanup(p.stop)
        p.faults = ["slowdown", "drop", "internal", "slowdown", "drop"]
        e = self.creds(AWS_ENDPOINT_URL=p.endpoint)
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", src("big.gguf"), mp, "-o", ",".join(self.opts())], env=e)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            with Mount(self, os.path.join(WORK, "big.gguf")) as lm:
                for t in ("big", "q", "half", "tail"):
                    self.assertEqual(read(os.path.join(mp, "tensors", t)),
                                     read(lm.p("tensors", t)), t)
        finally:
            run([TENSORFS, "unmount", mp])
        self.assertFalse(p.faults, "every fault was met")

    def test_a_store_that_keeps_slowing_down_fails_naming_the_key(self):
        p = s3proxy.S3Proxy(G.endpoint)
        self.addCleanup(p.stop)
        p.always = "slowdown"
        t = time.time()
        # timeout=3: a range gets 6 s without progress (the tries' backoff is what it is)
        self.refused(src("big.gguf"), r"s3://tfs-models/big.gguf: HTTP 503 SlowDown: Please "
                     r"reduce your request rate. \(after [0-9]+ tries\)",
                     self.creds(AWS_ENDPOINT_URL=p.endpoint), ["timeout=3"])
        self.assertLess(time.time() - t, 10)
        self.assertLessEqual(len(p.seen), 8, "a bounded number of tries")
        self.assertGreater(len(p.seen), 2, "retried")

    def test_wrong_region_says_which(self):
        p = s3proxy.S3Proxy(G.endpoint, region="eu-north-1")
        self.addCleanup(p.stop)
        p.always = "region"
        self.refused(src("big.gguf"), "bucket tfs-models is in region eu-north-1, not "
                     "us-west-2 .HTTP 301 PermanentRedirect.: set AWS_REGION=eu-north-1",
                     self.creds(AWS_ENDPOINT_URL=p.endpoint, AWS_REGION="us-west-2"))
        self.assertEqual(len(p.seen), 1, "not retried")
        self.assertIn("/us-west-2/s3/aws4_request", p.seen[0][2]["authorization"])


if __name__ == "__main__":
    main()
