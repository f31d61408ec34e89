"""Remote models (http://, https://, hf://) against real local servers: nginx from Debian
(HTTP and HTTPS with a throwaway certificate), a fault-injecting proxy, a hub imitation.
Every byte read through a remote mount is compared with a local mount of the same file."""
import errno
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import numpy as np

from harness import TENSORFS, TESTDATA, VOCAB_DIR, Mount, TestCase, is_mounted, kill_daemon, main, quick, run, \
    vocab_files, vocab_missing
import faultproxy
import ggufgen
import stgen
import websrv

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "../../examples")
WWW = None
NG = None
SKIP = None
SHARDED = None


def make_big_gguf(path):
    """A GGUF whose header is over 64 KiB (a vocabulary) and whose tensors span several
    8 MiB chunks."""
    rng = np.random.default_rng(14)
    w = ggufgen.GGUFWriter(alignment=32)
    w.add_kv("general.architecture", ggufgen.STRING, "llama")
    w.add_kv("tokenizer.ggml.tokens", ggufgen.ARRAY,
             (ggufgen.STRING, ["token-%05d" % i for i in range(12000)]))
    w.add_tensor("big", "F32", rng.standard_normal((5 << 20) // 4 * 4 // 4, dtype=np.float32)
                 .reshape(-1, 256))
    x = rng.standard_normal(64 * 4096, dtype=np.float32)
    w.add_tensor("q", "Q8_0", ggufgen.quantize_q8_0(x), ne=[4096, 64])
    w.add_tensor("half", "F16", rng.standard_normal((1024, 2048)).astype(np.float16))
    w.add_tensor("tail", "F32", rng.standard_normal((3, 5), dtype=np.float32))
    w.write(path)


def make_big_st(path):
    rng = np.random.default_rng(15)
    tensors = [("t%03d" % i, "F32", [4], rng.standard_normal(4, dtype=np.float32).tobytes())
               for i in range(1500)]  # a header of > 64 KiB
    tensors.append(("big", "F32", [3 << 20], rng.standard_normal(3 << 20, dtype=np.float32)
                    .tobytes()))
    tensors.append(("bf", "BF16", [1000], rng.integers(0, 65535, 1000, dtype=np.uint16)
                    .astype("<u2").tobytes()))
    with open(path, "wb") as f:
        f.write(stgen.st_raw(tensors, {"format": "pt"}))


SHARDS = ("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
          "model-00003-of-00003.safetensors")


def make_sharded(d):
    """A sharded set in d: three shards (one tensor of 12 MiB, spanning chunks), an index;
    returns {tensor: its bytes}."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(16)
    want, weight_map = {}, {}
    for s, fname in enumerate(SHARDS):
        tensors = []
        for j, dt in enumerate(("F32", "F16", "BF16", "I32")):
            n = (3 << 20) if (s, j) == (1, 0) else 1000 + 37 * j
            x = rng.standard_normal(n).astype(np.float32)
            raw = {"F32": x.astype("<f4"), "F16": x.astype("<f2"), "BF16": stgen.bf16_bits(x),
                   "I32": (x * 1000).astype("<i4")}[dt].tobytes()
            name = "model.layers.%d.t%d.weight" % (s, j)
            tensors.append((name, dt, [n], raw))
            want[name] = raw
            weight_map[name] = fname
        with open(os.path.join(d, fname), "wb") as f:
            f.write(stgen.st_raw(sorted(tensors), {"format": "pt"}))
    index = {"metadata": {"total_size": sum(len(v) for v in want.values())},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    return want


STORE = os.path.join(TESTDATA, "ollama", "models")
REGISTRY_MODELS = ("oracle-gguf:latest", "oracle-st:int4", "oracle-st:nvfp4")


def make_registry(www):
    """The test store's models as a registry serves them (the API Ollama pulls from):
    www/v2/library/MODEL/manifests/TAG and www/v2/library/MODEL/blobs/sha256:HEX."""
    mdir = os.path.join(STORE, "manifests", "registry.ollama.ai", "library")
    for ref in REGISTRY_MODELS:
        model, tag = ref.split(":")
        d = os.path.join(www, "v2", "library", model)
        os.makedirs(os.path.join(d, "manifests"), exist_ok=True)
        os.makedirs(os.path.join(d, "blobs"), exist_ok=True)
        shutil.copy(os.path.join(mdir, model, tag), os.path.join(d, "manifests", tag))
        with open(os.path.join(mdir, model, tag)) as f:
            man = json.load(f)
        for layer in [man["config"]] + man["layers"]:
            shutil.copy(os.path.join(STORE, "blobs", layer["digest"].replace(":", "-")),
                        os.path.join(d, "blobs", layer["digest"]))
    for d, dirs, _ in os.walk(os.path.join(www, "v2")):
        for x in dirs:
            os.chmod(os.path.join(d, x), 0o755)


def setUpModule():
    global WWW, NG, SKIP
    if not websrv.NGINX or not websrv.OPENSSL:
        SKIP = "nginx or openssl not installed (scripts/setup.sh installs them)"
        print("# SKIP: " + SKIP, flush=True)
        return
    if "remote" not in run([TENSORFS, "mount", "--help"]).stdout + "remote":
        SKIP = "tensorfs built without remote support"
        return
    WWW = tempfile.mkdtemp(prefix="tfs-www-")
    os.chmod(WWW, 0o755)
    shutil.copy(os.path.join(EXAMPLES, "tiny-llama.gguf"), WWW)
    shutil.copy(os.path.join(TESTDATA, "gguf/mixed_flat.gguf"), WWW)
    shutil.copy(os.path.join(TESTDATA, "safetensors/ok_all_dtypes.safetensors"), WWW)
    make_big_gguf(os.path.join(WWW, "big.gguf"))
    make_big_st(os.path.join(WWW, "big.safetensors"))
    global SHARDED
    SHARDED = make_sharded(os.path.join(WWW, "sharded"))
    os.makedirs(os.path.join(WWW, "broken"))
    shutil.copy(os.path.join(WWW, "sharded", SHARDS[0]), os.path.join(WWW, "broken"))
    shutil.copy(os.path.join(WWW, "sharded", SHARDS[2]), os.path.join(WWW, "broken"))
    shutil.copy(os.path.join(WWW, "sharded", "model.safetensors.index.json"),
                os.path.join(WWW, "broken"))
    with open(os.path.join(WWW, "hello.txt"), "w") as f:
        f.write("hello, this is not a model\n" * 10)
    make_registry(WWW)
    NG = websrv.Nginx(WWW)


def tearDownModule():
    if NG:
        NG.stop()
    if WWW:
        shutil.rmtree(WWW, ignore_errors=True)


def files_of(root):
    """Every file under root, relative, sorted."""
    out = []
    for d, _, fs in os.walk(root):
        for f in fs:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def index_without_source(b):
    """index.json minus what names the source (a path locally, the URL remotely)."""
    doc = json.loads(b)
    doc.pop("source", None)
    doc.pop("sources", None)
    for t in doc.get("tensors", []):
        t.pop("source", None)
    return doc


class Remote(TestCase):
    def setUp(self):
        if SKIP:
            self.skipTest(SKIP)
        self.cache = self.tmpdir()

    def opts(self, *more):
        return ["cache=" + self.cache, "timeout=2"] + list(more)

    def assert_same_tree(self, rm, name):
        """Every file of the remote mount rm equals the local mount's of WWW/name."""
        with Mount(self, os.path.join(WWW, name)) as lm:
            names = files_of(lm.path)
            self.assertEqual(files_of(rm.path), names)
            self.assertGreater(len(names), 3)
            for f in names:
                a, b = read(rm.p(f)), read(lm.p(f))
                if f == "index.json":
                    self.assertEqual(index_without_source(a), index_without_source(b))
                else:
                    self.assertEqual(a, b, f)
            # odd offsets and lengths, as numpy and readers do
            for f in [n for n in names if n.startswith(("tensors/", "f32/"))][:6]:
                with open(rm.p(f), "rb") as x, open(lm.p(f), "rb") as y:
                    for off, n in ((1, 7), (4093, 10000), (65535, 3), (1 << 20, 123457)):
                        x.seek(off)
                        y.seek(off)
                        self.assertEqual(x.read(n), y.read(n), "%s at %d" % (f, off))

    # ==== plain HTTP and HTTPS against nginx ====

    @quick
    def test_http_every_file_equals_local(self):
        for name in ("tiny-llama.gguf", "mixed_flat.gguf", "ok_all_dtypes.safetensors",
                     "big.gguf", "big.safetensors"):
            with Mount(self, NG.url(name), self.opts()) as rm:
                self.assert_same_tree(rm, name)

    def test_https_with_cafile(self):
        for name in ("tiny-llama.gguf", "big.safetensors"):
            with Mount(self, NG.surl(name), self.opts("cafile=" + NG.cafile)) as rm:
                self.assert_same_tree(rm, name)

    def test_https_ca_bundle_env(self):
        mp = self.tmpdir()
        env = dict(os.environ, CURL_CA_BUNDLE=NG.cafile)
        r = run([TENSORFS, "mount", NG.surl("tiny-llama.gguf"), mp, "-o",
                 ",".join(self.opts())], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.assertEqual(read(os.path.join(mp, "metadata/general.architecture")),
                             b"llama\n")
        finally:
            run([TENSORFS, "unmount", mp])

    def test_https_untrusted_certificate_fails(self):
        mp = self.tmpdir()
        env = {k: v for k, v in os.environ.items() if k != "CURL_CA_BUNDLE"}
        r = run([TENSORFS, "mount", NG.surl("tiny-llama.gguf"), mp, "-o",
                 ",".join(self.opts())], env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(is_mounted(mp))
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(NG.surl("tiny-llama.gguf"), lines[0])
        self.assertRegex(lines[0], "(?i)certificate")
        self.assertIn("-o cafile=FILE or CURL_CA_BUNDLE", lines[0])
        # a CA file that cannot be read is named
        r = run([TENSORFS, "mount", NG.surl("tiny-llama.gguf"), mp, "-o",
                 ",".join(self.opts("cafile=/nonexistent/ca.pem"))], env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot read the CA certificates /nonexistent/ca.pem", r.stderr)

    # ==== a sharded safetensors set ====

    def test_sharded_index_url_every_tensor_equals_local(self):
        NG.clear_log()
        name = "sharded/model.safetensors.index.json"
        with Mount(self, NG.url(name), self.opts()) as rm:
            for t, raw in SHARDED.items():
                self.assertEqual(read(rm.p("tensors", t)), raw, t)
            idx = json.loads(read(rm.p("index.json")))
            self.assertEqual(sorted(os.path.basename(t["source"]) for t in idx["tensors"]),
                             sorted(s for s in SHARDS for _ in range(4)))
            self.assert_same_tree(rm, name)
        # each shard fetched through ranged requests, none whole
        shard_reqs = [r for r in NG.log() if r.uri.startswith("/sharded/model-")]
        self.assertTrue(shard_reqs)
        self.assertTrue(all(r.status in (206, 304) for r in shard_reqs), shard_reqs)
        self.assertEqual({r.uri for r in shard_reqs}, {"/sharded/" + s for s in SHARDS})

    def test_sharded_second_mount_reads_no_shard_byte_again(self):
        name = "sharded/model.safetensors.index.json"
        with Mount(self, NG.url(name), self.opts()) as rm:
            first = read(rm.p("tensors", "model.layers.1.t0.weight"))
        NG.clear_log()
        with Mount(self, NG.url(name), self.opts()) as rm:
            self.assertEqual(read(rm.p("tensors", "model.layers.1.t0.weight")), first)
        shard_bytes = sum(r.body_bytes for r in NG.log() if r.uri.startswith("/sharded/model-"))
        self.assertEqual(shard_bytes, 0, NG.log())
        self.assertEqual(first, SHARDED["model.layers.1.t0.weight"])

    def test_sharded_missing_shard_is_one_line_naming_its_url(self):
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", NG.url("broken/model.safetensors.index.json"), mp, "-o",
                 ",".join(self.opts())], timeout=60)
        if is_mounted(mp):
            run(["fusermount3", "-u", mp])
            self.fail("mounted with a shard missing")
        self.assertNotEqual(r.returncode, 0)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(NG.url("broken/" + SHARDS[1]), lines[0])
        self.assertIn("HTTP 404", lines[0])

    def test_sharded_index_not_json_or_missing(self):
        self.assert_refused(NG.url("sharded/missing.safetensors.index.json"), "HTTP 404")
        self.assert_refused(NG.url("sharded/hello.json"), "HTTP 404")
        shutil.copy(os.path.join(WWW, "hello.txt"), os.path.join(WWW, "sharded/bad.json"))
        try:
            self.assert_refused(NG.url("sharded/bad.json"), "invalid JSON")
        finally:
            os.unlink(os.path.join(WWW, "sharded/bad.json"))

    def test_mount_fetches_header_only(self):
        for name in ("big.gguf", "big.safetensors", "tiny-llama.gguf"):
            NG.clear_log()
            with Mount(self, NG.url(name), self.opts()) as rm:
                idx = json.loads(read(rm.p("index.json")))
                log = NG.log()
            header = idx.get("data_offset") or min(t["offset"] for t in idx["tensors"])
            self.assertGreater(header, 0)
            self.assertLessEqual(len(log), 3, log)
            body = sum(r.body_bytes for r in log)
            self.assertLessEqual(body, max(2 * header, 65536), (name, header, log))
            if name.startswith("big"):
                self.assertGreater(header, 65536)  # the header did have to grow
            print("# %s: header %d bytes; mount: %d requests, %d body bytes"
                  % (name, header, len(log), body), flush=True)

    def test_second_mount_reads_nothing_again(self):
        with Mount(self, NG.url("big.gguf"), self.opts()) as rm:
            first = {f: read(rm.p(f)) for f in files_of(rm.path)}
        NG.clear_log()
        with Mount(self, NG.url("big.gguf"), self.opts()) as rm:
            again = {f: read(rm.p(f)) for f in files_of(rm.path)}
        self.assertEqual(first, again)
        log = NG.log()
        self.assertEqual(sum(r.body_bytes for r in log), 0, log)
        self.assertEqual([r.status for r in log], [304])
        self.assertEqual(first["tensors/big"], self.tensor_bytes("big.gguf", "big"))

    def entries_of(self, url):
        """The cache's entries (data and map files) of url, by version key."""
        h = hashlib.sha256(url.encode()).hexdigest() + "-"
        return sorted(f for f in os.listdir(self.cache) if f.startswith(h))

    def test_a_new_version_removes_the_old_ones_cache(self):
        """When the server's file changes (another ETag and size), the next mount's cache
        entry replaces the old version's: its files are removed, also while a mount that
        still reads the old version holds them (it keeps reading its cached blocks)."""
        path = os.path.join(WWW, "changing.gguf")
        shutil.copy(os.path.join(WWW, "big.gguf"), path)
        url = NG.url("changing.gguf")
        try:
            with Mount(self, url, self.opts()) as old:
                v1 = read(old.p("tensors/big"))
                self.assertEqual(v1, self.tensor_bytes("big.gguf", "big"))
                first = self.entries_of(url)
                self.assertEqual([f[-4:] for f in first], ["data", ".map"], first)
                # a new version: other tensor bytes, another size, another ETag
                shutil.copy(os.path.join(WWW, "tiny-llama.gguf"), path)
                os.utime(path, (time.time() + 100, time.time() + 100))
                with Mount(self, url, self.opts()) as new:
                    with Mount(self, path) as lm:
                        for f in files_of(lm.path):
                            if f != "index.json":
                                self.assertEqual(read(new.p(f)), read(lm.p(f)), f)
                    now = self.entries_of(url)
                    self.assertEqual(len(now), 2, now)
                    self.assertEqual(set(now) & set(first), set(), (first, now))
                    # the old mount still reads its version's cached blocks
                    with open(old.p("tensors/big"), "rb") as f:
                        f.seek(12345)
                        self.assertEqual(f.read(1000), v1[12345:13345])
            self.assertEqual(len(self.entries_of(url)), 2)
        finally:
            os.unlink(path)

    def tensor_bytes(self, name, tensor):
        with Mount(self, os.path.join(WWW, name)) as lm:
            return read(lm.p("tensors", tensor))

    def test_chunks_are_large_and_reads_sparse(self):
        """One f32 value of a 5 MiB tensor fetches one chunk (in parts, on at most the 4
        connections), not the file."""
        with Mount(self, NG.url("big.gguf"), self.opts()) as rm:
            NG.clear_log()
            with open(rm.p("f32/half"), "rb") as f:
                f.seek(4 * 1000)
                v = f.read(4)
            log = NG.log()
        self.assertEqual(len(v), 4)
        self.assertTrue(1 <= len(log) <= 4, log)
        spans = sorted(tuple(int(x) for x in r.range[6:].split("-")) for r in log)
        for (a, b), (c, d) in zip(spans, spans[1:]):
            self.assertEqual(b + 1, c, spans)  # the parts of one contiguous chunk
        total = sum(r.body_bytes for r in log)
        self.assertEqual(total, spans[-1][1] + 1 - spans[0][0])
        self.assertLessEqual(total, 8 << 20)
        self.assertLess(total, os.path.getsize(os.path.join(WWW, "big.gguf")))

    def test_reads_fetch_within_the_tensor(self):
        """Reading a tensor whole fetches its bytes, not chunks or readahead past its end
        (whole 64 KiB blocks at its edges), through tensors/ and through f32/."""
        for view in ("tensors", "f32"):
            with Mount(self, NG.url("big.gguf"), self.opts("cache=" + self.tmpdir())) as rm:
                idx = json.loads(read(rm.p("index.json")))
                t = next(x for x in idx["tensors"] if x["name"] == "big")
                lo = t["offset"] // 65536 * 65536  # (offsets in the file)
                hi = -(-(t["offset"] + t["nbytes"]) // 65536) * 65536
                NG.clear_log()
                self.assertEqual(len(read(rm.p(view, "big"))), t["nbytes"])
                time.sleep(0.3)  # a readahead thread would have asked by now
                log = NG.log()
            spans = [tuple(int(v) for v in r.range[6:].split("-")) for r in log]
            self.assertTrue(spans and all(lo <= a and b < hi for a, b in spans),
                            (view, lo, hi, spans))
            self.assertLessEqual(sum(r.body_bytes for r in log), hi - lo, view)

    def test_a_chunk_is_fetched_over_several_connections(self):
        """A chunk of several 2 MiB parts is fetched as that many ranged requests at once
        (-o connections=N); with connections=1, as one request.  The bytes are the file's."""
        want = self.tensor_bytes("big.safetensors", "big")
        counts = {}
        for conns in (1, 4):
            with Mount(self, NG.url("big.safetensors"), ["cache=" + self.tmpdir(), "timeout=5",
                                                         "connections=%d" % conns]) as rm:
                NG.clear_log()
                with open(rm.p("tensors/big"), "rb") as f:
                    f.seek(9 << 20)
                    self.assertEqual(f.read(4), want[9 << 20:(9 << 20) + 4])
                log = NG.log()
            self.assertTrue(all(r.status == 206 for r in log), log)
            self.assertLessEqual(sum(r.body_bytes for r in log), 8 << 20)
            self.assertGreater(sum(r.body_bytes for r in log), 3 << 20, log)
            counts[conns] = len(log)
        self.assertEqual(counts[1], 1)
        self.assertGreaterEqual(counts[4], 2)

    def test_a_near_server_gets_one_request_per_chunk(self):
        """Without connections=, a near server (nginx on this machine) gets a chunk as one
        request; through a proxy adding 100 ms per request, as parts on the 4 default
        connections.  The bytes are the file's either way.  (Near is a latency under 2 ms
        (NEAR_LATENCY_US), which a loaded machine's own scheduling exceeds: under the
        sanitizers with every core busy, nginx's answers took the daemon 2-3 ms and every
        fetch was split.  The daemons here take 20 ms (TFS_NEAR_LATENCY_US), far from both.)"""
        want = self.tensor_bytes("big.safetensors", "big")
        p = faultproxy.FaultProxy(NG.url(""))
        p.latency = 0.1
        counts = {}
        os.environ["TFS_NEAR_LATENCY_US"] = "20000"
        try:
            for where, url in (("near", NG.url("big.safetensors")),
                               ("far", p.url("big.safetensors"))):
                with Mount(self, url, ["cache=" + self.tmpdir(), "timeout=5"]) as rm:
                    NG.clear_log()  # the mount's requests were timed
                    with open(rm.p("tensors/big"), "rb") as f:
                        f.seek(9 << 20)
                        self.assertEqual(f.read(4), want[9 << 20:(9 << 20) + 4])
                    log = NG.log()
                self.assertTrue(all(r.status == 206 for r in log), log)
                self.assertGreater(sum(r.body_bytes for r in log), 3 << 20, log)
                counts[where] = len(log)
        finally:
            del os.environ["TFS_NEAR_LATENCY_US"]
            p.stop()
        self.assertEqual(counts["near"], 1, counts)
        self.assertGreaterEqual(counts["far"], 2, counts)

    def test_cache_size_is_kept(self):
        cap = 3 << 20
        with Mount(self, NG.url("big.gguf"), self.opts("cache_size=3M")) as rm:
            data = read(rm.p("tensors/big"))
            self.assertEqual(data, self.tensor_bytes("big.gguf", "big"))
            used = sum(os.stat(os.path.join(self.cache, f)).st_blocks * 512
                       for f in os.listdir(self.cache) if f.endswith(".data"))
        self.assertLessEqual(used, cap)

    def test_vocab_headers_take_three_requests(self):
        vocab, names = VOCAB_DIR, vocab_files()
        if not names:
            self.skipTest(vocab_missing())
        for n in names:
            shutil.copy(os.path.join(vocab, n), WWW)
            NG.clear_log()
            with Mount(self, NG.url(n), ["cache=" + self.tmpdir()]) as rm:
                idx = json.loads(read(rm.p("index.json")))
                log = NG.log()
                with Mount(self, os.path.join(WWW, n)) as lm:
                    for f in files_of(lm.path):
                        if f.startswith("metadata/"):
                            self.assertEqual(read(rm.p(f)), read(lm.p(f)), (n, f))
            body = sum(r.body_bytes for r in log)
            self.assertLessEqual(len(log), 3, (n, log))
            self.assertLessEqual(body, max(2 * idx["data_offset"], 65536), n)
            os.unlink(os.path.join(WWW, n))

    def read_through_two_mounts(self, opts, steps, rounds):
        """Two mounts of big.gguf with opts, a reader per (mount, tensor) reading it in
        steps[tensor]-sized pieces, rounds times; every byte compared with the file."""
        want = {t: self.tensor_bytes("big.gguf", t) for t in steps}
        with Mount(self, NG.url("big.gguf"), self.opts(*opts)) as a, \
                Mount(self, NG.url("big.gguf"), self.opts(*opts)) as b:
            errors = []

            def reader(m, t, step):
                try:
                    for _ in range(rounds):
                        with open(m.p("tensors", t), "rb") as f:
                            data = want[t]
                            for off in range(0, len(data), step):
                                f.seek(off)
                                if f.read(step) != data[off:off + step]:
                                    errors.append((m.path, t, off))
                            # a next round asks the daemon again, not the page cache
                            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError as e:
                    errors.append(e)
            ths = [threading.Thread(target=reader, args=(m, t, s))
                   for m in (a, b) for t, s in steps.items()]
            for t in ths:
                t.start()
            for t in ths:
                t.join()
            self.assertEqual(errors, [])

    def test_concurrent_readers_and_two_mounts_share_a_cache(self):
        self.read_through_two_mounts([], {"big": 300001, "q": 65536, "half": 1 << 20}, 1)

    def test_two_mounts_evicting_each_others_blocks_serve_right_bytes(self):
        # both mounts keep the shared entry under 2 MiB, so each punches blocks the other
        # reads, splices or is still writing: the pins must keep every one of those whole
        self.read_through_two_mounts(["cache_size=2M"], {"big": 262144, "q": 65536,
                                                         "half": 200000}, 2)

    def test_info_of_a_url(self):
        for name in ("big.gguf", "big.safetensors"):
            url = NG.url(name)
            r = run([TENSORFS, "info", "--json", url], env=dict(os.environ, XDG_CACHE_HOME=self.cache))
            l = run([TENSORFS, "info", "--json", os.path.join(WWW, name)])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "")
            self.assertEqual(index_without_source(r.stdout), index_without_source(l.stdout))
            self.assertIn(url, r.stdout)

    # ==== refusals ====

    def assert_refused(self, url, pattern, opts=None, env=None):
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", url, mp, "-o", ",".join(opts or self.opts())], env=env,
                timeout=60)
        if is_mounted(mp):
            run(["fusermount3", "-u", mp])
            self.fail("%s: mounted" % url)
        self.assertNotEqual(r.returncode, 0)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(url, lines[0])
        self.assertRegex(lines[0], pattern)
        return lines[0]

    def test_refused_404_non_model_401_no_range(self):
        self.assert_refused(NG.url("missing.gguf"), "not found .HTTP 404")
        self.assert_refused(NG.url("hello.txt"), "not a GGUF or safetensors file")
        p = faultproxy.FaultProxy(NG.url(""))
        try:
            p.always = "401"
            self.assert_refused(p.url("tiny-llama.gguf"), "HTTP 401.*token_file")
            p.always = "norange"
            self.assert_refused(p.url("tiny-llama.gguf"), "does not support Range")
            p.always = "404"
            self.assert_refused(p.url("tiny-llama.gguf"), "HTTP 404")
            p.always = "hugesize"
            self.assert_refused(p.url("tiny-llama.gguf"), "more than a model file can be")
            p.always = "500"
            self.assert_refused(p.url("tiny-llama.gguf"), "HTTP 500")
        finally:
            p.stop()
        self.assert_refused("http://127.0.0.1:1/x.gguf", "(?i)connect")
        self.assert_refused("hf://just-a-name", "hf://ORG/REPO")

    # ==== faults ====

    def test_faults_are_retried_and_never_served(self):
        p = faultproxy.FaultProxy(NG.url(""))
        p.stall_seconds = 4
        try:
            with Mount(self, p.url("big.gguf"), self.opts()) as rm:
                p.faults = ["drop", "500", "429", "short", "stall", "badrange", "drop", "500"]
                with Mount(self, os.path.join(WWW, "big.gguf")) as lm:
                    for f in files_of(lm.path):
                        if f.startswith(("tensors/", "f32/")):
                            self.assertEqual(read(rm.p(f)), read(lm.p(f)), f)
                self.assertEqual(p.faults, [])
        finally:
            p.stop()

    def test_persistent_failure_is_eio(self):
        p = faultproxy.FaultProxy(NG.url(""))
        try:
            with Mount(self, p.url("big.gguf"), self.opts()) as rm:
                p.always = "500"
                with self.assertRaises(OSError) as cm:
                    read(rm.p("tensors/big"))
                self.assertEqual(cm.exception.errno, errno.EIO)
                p.always = None
                self.assertEqual(read(rm.p("tensors/tail")), self.tensor_bytes("big.gguf", "tail"))
        finally:
            p.stop()

    def assert_eio_within(self, path, bound):
        t0 = time.monotonic()
        with self.assertRaises(OSError) as cm:
            read(path)
        took = time.monotonic() - t0
        self.assertEqual(cm.exception.errno, errno.EIO)
        self.assertLess(took, bound, "a read of a dead server took %.1f s" % took)
        print("# EIO after %.1f s (bound %.0f s)" % (took, bound), flush=True)

    def test_stalled_or_killed_server_fails_in_bounded_time(self):
        """With -o timeout=T, a read from a server that stopped answering fails with EIO
        within the budget (2 x T without progress, docs/remote.md), here asserted < 4 x T + 3 s."""
        t = 2
        for how in ("stall", "killed"):
            p = faultproxy.FaultProxy(NG.url(""))
            p.stall_seconds = 60
            ng = websrv.Nginx(WWW) if how == "killed" else None
            url = ng.url("big.gguf") if ng else p.url("big.gguf")
            try:
                with Mount(self, url, ["cache=" + self.tmpdir(), "timeout=%d" % t]) as rm:
                    self.assertIn(b"tail", read(rm.p("index.json")))
                    if how == "stall":
                        p.always = "stall"
                    else:
                        ng.stop()  # its keep-alive connections close too
                    self.assert_eio_within(rm.p("tensors/big"), 4 * t + 3)
                    self.assert_eio_within(rm.p("f32/half"), 4 * t + 3)
                    why = os.getxattr(rm.path, "user.tensorfs.last_error").decode()
                    self.assertIn(url, why)
            finally:
                p.stop()
                if ng:
                    ng.stop()

    def test_changed_file_is_eio_until_remount(self):
        p = faultproxy.FaultProxy(NG.url(""))
        try:
            with Mount(self, p.url("big.gguf"), self.opts()) as rm:
                good = read(rm.p("tensors/tail"))
                p.etag_suffix = "v2"
                for f in ("tensors/big", "f32/q"):
                    with self.assertRaises(OSError) as cm:
                        read(rm.p(f))
                    self.assertEqual(cm.exception.errno, errno.EIO)
                # why, where a read-only mount can say it: the root's last_error
                why = os.getxattr(rm.path, "user.tensorfs.last_error").decode()
                self.assertIn("big.gguf", why)
                p.etag_suffix = None  # back to the first version: still refused
                with self.assertRaises(OSError):
                    read(rm.p("tensors/half"))
                self.assertEqual(len(good), 60)
        finally:
            p.stop()


class Registry(TestCase):
    """Models of an Ollama registry over HTTP (nginx serving the registry's URL layout)."""

    def setUp(self):
        if SKIP:
            self.skipTest(SKIP)
        self.cache = self.tmpdir()

    def assert_same_as_store(self, rm, ref):
        """Every file of rm equals the local store's mount of ref (index.json but for the
        sources)."""
        old = os.environ.get("OLLAMA_MODELS")
        os.environ["OLLAMA_MODELS"] = STORE
        try:
            with Mount(self, ref) as lm:
                want = files_of(lm.path)
                self.assertEqual(files_of(rm.path), want)
                for f in want:
                    if f == "index.json":
                        self.assertEqual(index_without_source(read(rm.p(f))),
                                         index_without_source(read(lm.p(f))))
                    else:
                        self.assertEqual(read(rm.p(f)), read(lm.p(f)), f)
        finally:
            if old is None:
                del os.environ["OLLAMA_MODELS"]
            else:
                os.environ["OLLAMA_MODELS"] = old
        return want

    def test_registry_models_equal_the_store(self):
        """A classic GGUF model and two per-tensor MLX ones, by their manifest URLs and by
        Ollama names with a scheme, read exactly as the local store's copies."""
        base = NG.url("").rstrip("/")
        for ref in REGISTRY_MODELS:
            model, tag = ref.split(":")
            for src in ("%s/v2/library/%s/manifests/%s" % (base, model, tag),
                        "%s/library/%s" % (base, ref)):
                with Mount(self, src, ["cache=" + self.cache]) as rm:
                    files = self.assert_same_as_store(rm, ref)
                    self.assertIn("layers/manifest.json", files)
                    self.assertEqual(json.loads(read(rm.p("index.json")))["source"],
                                     "%s/v2/library/%s/manifests/%s" % (base, model, tag))
                    self.assertGreater(os.stat(rm.p("layers", "manifest.json")).st_mtime,
                                       1e9)  # the manifest's Last-Modified, not 1970

    def test_a_bad_cached_copy_is_fetched_again(self):
        """A small layer whose cached bytes went bad (a disk error, an edit) fails its sha256
        at the next mount: the cache's copy is dropped and fetched again, not blamed on the
        registry."""
        base = NG.url("").rstrip("/")
        src = base + "/v2/library/oracle-gguf/manifests/latest"
        with open(os.path.join(WWW, "v2/library/oracle-gguf/manifests/latest")) as f:
            man = json.load(f)
        layer = next(x for x in man["layers"] if x["mediaType"].endswith(".template"))
        burl = base + "/v2/library/oracle-gguf/blobs/" + layer["digest"]
        want = read(os.path.join(WWW, "v2/library/oracle-gguf/blobs", layer["digest"]))
        with Mount(self, src, ["cache=" + self.cache]):
            pass
        key = hashlib.sha256(burl.encode()).hexdigest()
        data = [f for f in os.listdir(self.cache) if f.startswith(key) and f.endswith(".data")]
        self.assertEqual(len(data), 1, os.listdir(self.cache))
        with open(os.path.join(self.cache, data[0]), "r+b") as f:
            f.seek(len(want) // 2)
            f.write(bytes([want[len(want) // 2] ^ 0x20]))
        NG.clear_log()
        with Mount(self, src, ["cache=" + self.cache]) as rm:
            self.assertEqual(read(rm.p("layers", "template")), want)
        self.assertTrue(any(r.uri.endswith("/blobs/" + layer["digest"]) and r.status == 206
                            for r in NG.log()), NG.log())  # its bytes again, from the server

    def test_manifest_fetched_whole_with_its_accept_header(self):
        """The manifest is asked for with the registry's Accept header, and a registry
        that answers it without Range support (200, the whole manifest) is read."""
        p = faultproxy.FaultProxy(NG.url(""))
        p.norange_paths = "/manifests/"
        try:
            with Mount(self, p.url("v2/library/oracle-gguf/manifests/latest"),
                       ["cache=" + self.cache]) as rm:
                self.assert_same_as_store(rm, "oracle-gguf:latest")
        finally:
            p.stop()
        accepts = [a for path, a in p.accept_seen if "/manifests/" in path]
        self.assertEqual(accepts, ["application/vnd.docker.distribution.manifest.v2+json"])

    def test_registry_refusals(self):
        """A missing tag or blob, a corrupt or resized small blob, and rw fail the mount
        with one line naming what."""
        base = NG.url("").rstrip("/")
        url = base + "/v2/library/oracle-gguf/manifests/latest"
        with open(os.path.join(WWW, "v2/library/oracle-gguf/manifests/latest")) as f:
            blob = os.path.join(WWW, "v2/library/oracle-gguf/blobs",
                                json.load(f)["layers"][-1]["digest"])
        good = read(blob)

        def refused(src, pattern, opts=()):
            mp = self.tmpdir()
            r = run([TENSORFS, "mount", src, mp, "-o", ",".join(["cache=" + self.tmpdir()]
                                                                 + list(opts))])
            self.assertNotEqual(r.returncode, 0, src)
            self.assertFalse(is_mounted(mp))
            self.assertRegex(r.stderr, pattern)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

        refused(base + "/v2/library/oracle-gguf/manifests/nope", "manifests/nope: not found .HTTP 404")
        refused(base + "/library/oracle-gguf:nope", "oracle-gguf:nope: not found .HTTP 404.,"
                " neither as a model of an Ollama registry .no manifest of that tag. nor as a file")
        refused(url, "a model of an Ollama registry mounts read-only",
                ["rw", "output=" + os.path.join(self.tmpdir(), "x.gguf")])
        refused(base + "/library/oracle-gguf:latest",
                "a model of an Ollama registry mounts read-only", ["rw"])
        try:
            os.rename(blob, blob + ".gone")
            refused(url, "blobs/sha256:[0-9a-f]{64}: not found .HTTP 404")
            os.rename(blob + ".gone", blob)
            with open(blob, "wb") as f:
                f.write(good[:-1] + bytes([good[-1] ^ 1]))
            refused(url, "blob sha256:[0-9a-f]{64} is corrupt")
            with open(blob, "wb") as f:
                f.write(good + b"x")
            refused(url, "blob sha256:[0-9a-f]{64} is %d bytes, the manifest says %d"
                    % (len(good) + 1, len(good)))
        finally:
            if os.path.exists(blob + ".gone"):
                os.rename(blob + ".gone", blob)
            with open(blob, "wb") as f:
                f.write(good)


class RemoteWrite(TestCase):
    def setUp(self):
        if SKIP:
            self.skipTest(SKIP)
        self.cache = self.tmpdir()

    def test_rw_repacks_to_a_local_output(self):
        """Edits through a rw mount of a URL are repacked into -o output, unchanged tensors
        streamed from the remote; the result equals the same edits on a local copy (a
        partial write included, whose tensor's other bytes come from the remote)."""
        for name, key in (("big.gguf", "general.name"), ("big.safetensors", "format")):
            d = self.tmpdir()
            out, ref = os.path.join(d, "out-" + name), os.path.join(d, "ref-" + name)
            shutil.copy(os.path.join(WWW, name), ref)
            new_tail = np.arange(15, dtype=np.float32).tobytes()
            tail = "tail" if name.endswith("gguf") else "bf"
            if tail == "bf":
                new_tail = np.arange(1000, dtype="<u2").tobytes()
            for src, opts in ((NG.url(name), ["rw", "output=" + out, "cache=" + self.cache]),
                              (ref, ["rw"])):
                with Mount(self, src, opts) as m:
                    with open(m.p("metadata", key), "w") as f:
                        f.write("edited remotely")
                    with open(m.p("tensors", tail), "wb") as f:
                        f.write(new_tail)
                    # a write into the middle keeps the tensor's other bytes: they are
                    # copied from the remote file into the staged one first
                    with open(m.p("tensors", "big"), "r+b") as f:
                        f.seek(4096)
                        f.write(b"\x01\x02\x03\x04")
                self.assertEqual(m.unmount_result.returncode, 0, m.unmount_result.stderr)
            self.assertEqual(read(out), read(ref), name)
            self.assertTrue(os.path.exists(out))

    def test_repack_after_a_crash(self):
        """A rw mount of a URL killed (SIGKILL) after an edit leaves its staging beside the
        output; `tensorfs repack URL -o output=` finishes it, the remote's bytes read through
        the cache: the output equals the same edit repacked from a local copy."""
        name = "big.gguf"
        d = self.tmpdir()
        out, ref = os.path.join(d, "out.gguf"), os.path.join(d, "ref.gguf")
        shutil.copy(os.path.join(WWW, name), ref)
        with Mount(self, NG.url(name), ["rw", "output=" + out, "cache=" + self.cache]) as m:
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("edited, then killed")
            kill_daemon(m.path)
        self.assertFalse(os.path.exists(out))  # nothing written yet: only the staging
        self.assertTrue(os.path.exists(os.path.join(d, ".out.gguf.tensorfs-staging",
                                                    "journal.json")))
        r = run([TENSORFS, "repack", NG.url(name), "-o", "output=%s,cache=%s" % (out, self.cache)],
                timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done: wrote " + out, r.stderr)
        with Mount(self, ref, ["rw"]) as m:
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("edited, then killed")
        self.assertEqual(m.unmount_result.returncode, 0, m.unmount_result.stderr)
        self.assertEqual(read(out), read(ref))
        self.assertEqual(sorted(os.listdir(d)), ["out.gguf", "ref.gguf"])

    def test_rw_sharded_repacks_to_a_local_set(self):
        """A remote sharded set mounted rw is repacked to a local index and its shards
        beside it: the edited tensor new, every other tensor the remote's bytes."""
        out = os.path.join(self.tmpdir(), "model.safetensors.index.json")
        name = "model.layers.2.t1.weight"
        new = np.arange(len(SHARDED[name]) // 2, dtype="<f2").tobytes()
        with Mount(self, NG.url("sharded/model.safetensors.index.json"),
                   ["rw", "output=" + out, "cache=" + self.cache]) as m:
            with open(m.p("tensors", name), "wb") as f:
                f.write(new)
        self.assertEqual(m.unmount_result.returncode, 0, m.unmount_result.stderr)
        self.assertEqual(sorted(os.listdir(os.path.dirname(out))),
                         sorted(list(SHARDS) + ["model.safetensors.index.json"]))
        with Mount(self, out) as lm:
            for t, raw in SHARDED.items():
                self.assertEqual(read(lm.p("tensors", t)), new if t == name else raw, t)

    def test_rw_without_output_is_refused(self):
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", NG.url("big.gguf"), mp, "-o", "rw,cache=" + self.cache])
        self.assertEqual(r.returncode, 2)
        self.assertFalse(is_mounted(mp))
        self.assertIn("-o output=PATH", r.stderr)
        # so does a repack of a URL (its staging is beside the output it was mounted with)
        r = run([TENSORFS, "repack", NG.url("big.gguf")])
        self.assertEqual(r.returncode, 2)
        self.assertIn("give the mount's -o output=PATH", r.stderr)


# ==== hf:// against a hub imitation ====

class _Hub(http.server.BaseHTTPRequestHandler):
    """/ORG/REPO/resolve/REV/PATH -> 302 to the proxy on another host name (localhost);
    401 without the token."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        hub = self.server.hub
        hub.seen.append((self.path, self.headers.get("Authorization")))
        parts = self.path.split("/")
        ok = len(parts) >= 6 and parts[3] == "resolve" and parts[1:3] == ["org", "repo"]
        if self.headers.get("Authorization") != "Bearer " + hub.token:
            status, loc = 401, None
        elif not ok or parts[4] not in ("main", "v1") or not os.path.exists(
                os.path.join(WWW, "/".join(parts[5:]))):
            status, loc = 404, None
        else:
            status, loc = 302, hub.target("/".join(parts[5:]))
        self.send_response(status)
        if loc:
            self.send_header("Location", loc)
        self.send_header("Content-Length", "0")
        self.end_headers()


class Hub:
    def __init__(self, token, target):
        self.token, self.target, self.seen = token, target, []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
        self.server.daemon_threads = True
        self.server.hub = self
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class HuggingFace(TestCase):
    def setUp(self):
        if SKIP:
            self.skipTest(SKIP)
        self.cache = self.tmpdir()
        self.proxy = faultproxy.FaultProxy(NG.url(""), host="localhost")
        self.hub = Hub("secret-token-14", self.proxy.url)
        self.addCleanup(self.proxy.stop)
        self.addCleanup(self.hub.stop)
        self.env = dict(os.environ, HF_ENDPOINT=self.hub.endpoint, HF_TOKEN="secret-token-14")

    def mount(self, source, env, opts=()):
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", source, mp, "-o",
                 ",".join(["cache=" + self.cache, "timeout=2"] + list(opts))], env=env)
        if r.returncode == 0:
            self.addCleanup(run, [TENSORFS, "unmount", mp])
        return r, mp

    def test_hf_file_and_repo_token_stays_with_the_hub(self):
        for source, name in (("hf://org/repo/big.gguf", "big.gguf"),
                             ("hf://org/repo/tiny-llama.gguf@v1", "tiny-llama.gguf")):
            r, mp = self.mount(source, self.env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "")
            with Mount(self, os.path.join(WWW, name)) as lm:
                for f in files_of(lm.path):
                    if f != "index.json":
                        self.assertEqual(read(os.path.join(mp, f)), read(lm.p(f)), f)
            idx = read(os.path.join(mp, "index.json"))
            self.assertNotIn(b"secret-token-14", idx)
            src = subprocess.run(["getfattr", "-d", "-m", "-", mp], capture_output=True).stdout
            self.assertNotIn(b"secret-token-14", src)
            run([TENSORFS, "unmount", mp])
        # the hub got the token; the other host (localhost) never did
        self.assertTrue(self.hub.seen)
        self.assertTrue(all(a == "Bearer secret-token-14" for _, a in self.hub.seen))
        self.assertTrue(self.proxy.auth_seen)
        self.assertEqual(set(self.proxy.auth_seen), {None})
        self.assertIn("/org/repo/resolve/v1/tiny-llama.gguf", [p for p, _ in self.hub.seen])

    def test_hf_repo_is_its_model_safetensors(self):
        r, mp = self.mount("hf://org/repo", self.env)
        # WWW has no model.safetensors: the repo's single file is missing
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("model.safetensors", r.stderr)
        shutil.copy(os.path.join(WWW, "big.safetensors"), os.path.join(WWW, "model.safetensors"))
        try:
            r, mp = self.mount("hf://org/repo", self.env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(read(os.path.join(mp, "tensors/bf")),
                             self.local_tensor("big.safetensors", "bf"))
        finally:
            run([TENSORFS, "unmount", mp])
            os.unlink(os.path.join(WWW, "model.safetensors"))

    def test_hf_repo_prefers_its_sharded_index(self):
        """hf://ORG/REPO picks model.safetensors.index.json when the repo has one (even
        beside a model.safetensors), its shards fetched through the hub's redirects."""
        names = list(SHARDS) + ["model.safetensors.index.json"]
        for n in names:
            shutil.copy(os.path.join(WWW, "sharded", n), os.path.join(WWW, n))
        shutil.copy(os.path.join(WWW, "big.safetensors"), os.path.join(WWW, "model.safetensors"))
        names.append("model.safetensors")
        try:
            r, mp = self.mount("hf://org/repo", self.env)
            self.assertEqual(r.returncode, 0, r.stderr)
            # the repo has no config.json: the mount says, in one line, that it has no
            # GGUF view and why
            self.assertEqual(r.stderr, "mount.tensorfs: hf://org/repo: no model.gguf: "
                             "hf://org/repo/config.json: no such file (a Hugging Face model "
                             "directory has one)\n")
            for t, raw in SHARDED.items():
                self.assertEqual(read(os.path.join(mp, "tensors", t)), raw, t)
            self.assertNotIn(b"secret-token-14", read(os.path.join(mp, "index.json")))
            run([TENSORFS, "unmount", mp])
        finally:
            for n in names:
                os.unlink(os.path.join(WWW, n))
        seen = [p for p, _ in self.hub.seen]
        for s in SHARDS:
            self.assertIn("/org/repo/resolve/main/" + s, seen)
        self.assertNotIn("/org/repo/resolve/main/model.safetensors", seen)
        self.assertEqual(set(self.proxy.auth_seen), {None})

    def test_hf_repo_with_a_missing_shard_names_the_shard(self):
        """hf://ORG/REPO whose index names a shard the repo lacks: one line naming that
        shard's URL (it used to fall back to model.safetensors and name that)."""
        names = [SHARDS[0], "model.safetensors.index.json"]
        for n in names:
            shutil.copy(os.path.join(WWW, "sharded", n), os.path.join(WWW, n))
        try:
            r, mp = self.mount("hf://org/repo", self.env)
            if r.returncode == 0:
                run([TENSORFS, "unmount", mp])
        finally:
            for n in names:
                os.unlink(os.path.join(WWW, n))
        self.assertNotEqual(r.returncode, 0)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("/org/repo/resolve/main/" + SHARDS[1], lines[0])
        self.assertNotIn("model.safetensors:", lines[0])

    def local_tensor(self, name, t):
        with Mount(self, os.path.join(WWW, name)) as lm:
            return read(lm.p("tensors", t))

    def test_hf_without_token_says_how(self):
        env = {k: v for k, v in self.env.items() if k != "HF_TOKEN"}
        r, mp = self.mount("hf://org/repo/big.gguf", env)
        self.assertNotEqual(r.returncode, 0)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], "HTTP 401.*HF_TOKEN or -o token_file=")

    def test_hf_token_file(self):
        env = {k: v for k, v in self.env.items() if k != "HF_TOKEN"}
        tf = os.path.join(self.tmpdir(), "token")
        with open(tf, "w") as f:
            f.write("secret-token-14\n")
        r, mp = self.mount("hf://org/repo/tiny-llama.gguf", env, ["token_file=" + tf])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(os.path.join(mp, "metadata/general.architecture")), b"llama\n")
        self.assertEqual(set(self.proxy.auth_seen), {None})


if __name__ == "__main__":
    main()
