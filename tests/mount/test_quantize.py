#!/usr/bin/python3
"""-o quantize=TYPE and tensorfs convert (codec/views/quantize*.c) against llama.cpp's own
quantizer, llama_model_quantize of the npm @node-llama-cpp/linux-x64 libllama (driven through
ctypes by tests/quant/llamaq.py, each run its own process).

Models (tests/quant/qgen.py, F16 weights): l1-e64 (rows of 64: every K-quant falls back),
l2-e96-gqa (rows of 96, GQA 4), l8-e256 (8 layers, ffn_down rows of 320, untied output),
l12-tied (tied embeddings), l80-70b (80 layers: 562 quantized tensors, as Q3_K_S); and "chat", a llama.cpp-loadable llama (the sample's tokenizer,
rows of 256 and 512, GQA 2).  Types: Q4_K_M, Q8_0, Q4_0, Q6_K, IQ4_NL, Q3_K_M (every type,
with and without an importance matrix: tests/quant/check.py --full [--via mount]).

Checked: model.gguf of a fresh mount is byte for byte llama_model_quantize's file; again
after a remount, read from the cache (a byte changed in a cache file shows through: the
second mount computes nothing); through tensorfs convert; tensors/, f32/, npy/, index.json
and tensorfs info show the quantized model (as a mount of the reference file shows it);
libllama loads the mount's model.gguf and decodes greedily the same tokens as from the
reference; bad input; a cache that cannot be written (one line, every read computed); a rw
mount with quantize= and a metadata edit (replayed after a kill -9 and a remount, repacked
into output= byte-identical with llama_model_quantize of the source so edited); after a
kill -9, `tensorfs repack` without the view options takes those the journal recorded
(quantize=, imatrix=, output=) and writes what a clean unmount writes, while another view
(a repack's option, a mount's options, an imatrix touched since) is refused, keeping the
journal, and so is a record naming an option no view takes.  No source file is ever written.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import ggufgen as G  # noqa: E402
import llamacpp  # noqa: E402
from llamaq import cache_dir as llamaq_cache  # noqa: E402
import qgen  # noqa: E402
from harness import SANITIZED, TENSORFS, Mount, TestCase, is_mounted, kill_daemon, main, quick, run, sha256  # noqa: E402

PY = sys.executable
LLAMAQ = os.path.join(HERE, "..", "quant", "llamaq.py")
GENERATE = os.path.join(HERE, "..", "llama", "generate.py")
SAMPLE = os.path.join(HERE, "..", "..", "examples", "tiny-llama.gguf")
FTYPES = {"Q4_K_M": 15, "Q8_0": 7, "Q4_0": 2, "Q6_K": 18, "IQ4_NL": 25, "Q3_K_M": 12}
QGEN = ["l1-e64", "l2-e96-gqa", "l8-e256", "l12-tied", "l80-70b"]
MODELS = ["l1-e64", "l2-e96-gqa", "l8-e256", "l12-tied", "chat"]
# every model x type, and l80-70b (80 layers: 562 quantized tensors, more cache files than
# a view keeps open) as Q3_K_S
PAIRS = [(m, t) for m in MODELS for t in FTYPES] + [("l80-70b", "Q3_K_S")]
# the pairs test_fresh_mount_is_llama_quantize mounts: all of them; under the sanitizers
# (harness.SANITIZED) each type's quantizer and each model's plan once
FRESH = PAIRS if not SANITIZED else \
    [(MODELS[i % len(MODELS)], t) for i, t in enumerate(FTYPES)] + [("l80-70b", "Q3_K_S")]
CODES = dict(FTYPES, Q3_K_S=11)

ROOT = None     # the module's directory: models, references, the shared cache
SOURCES = {}    # model -> its path
REFS = {}       # (model, type) -> llama_model_quantize's file
FAILED = None   # why the fixtures could not be made
HASHES = {}     # source -> (sha256, mtime): never written


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def write_chat(path):
    """A llama llama.cpp loads: the sample's tokenizer (384 tokens), 2 layers of 256, F16."""
    import numpy as np
    sample = G.read_gguf(SAMPLE)
    rng = np.random.default_rng(25)
    e, ff, nv, kv = 256, 512, 384, 128
    hp = {b"llama.embedding_length": e, b"llama.feed_forward_length": ff,
          b"llama.attention.head_count": 4, b"llama.attention.head_count_kv": 2,
          b"llama.rope.dimension_count": 64, b"llama.block_count": 2}
    w = G.GGUFWriter()
    for key, vt, v in sample["kv"]:
        if key == b"general.name":
            v = b"quantize test chat"
        w.add_kv(key.decode(), vt, hp.get(key, v))

    def add(name, ne, dtype="F16"):
        a = (rng.standard_normal(int(np.prod(ne))) * 0.05).astype("<f4")
        w.add_tensor(name, dtype, a.astype("<f2" if dtype == "F16" else "<f4").tobytes(), ne=ne)
    add("token_embd.weight", [e, nv])
    for il in range(2):
        p = "blk.%d." % il
        w.add_tensor(p + "attn_norm.weight", "F32", np.ones(e, "<f4").tobytes(), ne=[e])
        add(p + "attn_q.weight", [e, e])
        add(p + "attn_k.weight", [e, kv])
        add(p + "attn_v.weight", [e, kv])
        add(p + "attn_output.weight", [e, e])
        w.add_tensor(p + "ffn_norm.weight", "F32", np.ones(e, "<f4").tobytes(), ne=[e])
        add(p + "ffn_gate.weight", [e, ff])
        add(p + "ffn_down.weight", [ff, e])
        add(p + "ffn_up.weight", [e, ff])
    w.add_tensor("output_norm.weight", "F32", np.ones(e, "<f4").tobytes(), ne=[e])
    add("output.weight", [e, nv])
    w.write(path)


def rewrite_with(src, dst, key, value):
    """src's GGUF again with one string key's value changed (keys, tensors, order kept)."""
    g = G.read_gguf(src)
    w = G.GGUFWriter(alignment=g["alignment"])
    for k, vt, v in g["kv"]:
        w.add_kv(k.decode(), vt, value if k == key else v)
    with open(src, "rb") as f:
        for t in g["tensors"]:
            f.seek(t["abs_offset"])
            w.add_tensor(t["name"].decode(), t["type_name"], f.read(t["nbytes"]), ne=t["ne"])
    w.write(dst)


def write_imatrix(path, names, n):
    """llama.cpp's legacy imatrix (.dat): an entry of n values for each tensor named."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(names)))
        for k, name in enumerate(names):
            b = name.encode()
            f.write(struct.pack("<i", len(b)) + b + struct.pack("<ii", 1, n))
            f.write(struct.pack("<%df" % n, *[0.5 + ((i * 7 + k) % 13) / 8 for i in range(n)]))
        f.write(struct.pack("<ii", 1, 4) + b"test")


def stable_path(body, d, name):
    """A file holding body, where the normal and the sanitizer runs both find it: in
    llamaq.py's cache, named by its content (else d/name).  Its path is in the output
    (quantize.imatrix.file), and so in llamaq.py's cache key: in a temporary directory, each
    run quantized again what the other had."""
    cache = llamaq_cache()
    if cache is None:
        path = os.path.join(d, name)
    else:
        path = os.path.join(cache, "imatrix", hashlib.sha256(body).hexdigest() + ".dat")
        if os.path.exists(path):
            return path
        os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(body)
    os.replace(tmp, path)
    return path


def llamaq(src, dst, ftype):
    r = run([PY, LLAMAQ, src, dst, str(ftype), "--threads", "1"], timeout=120)
    if r.returncode != 0:
        raise RuntimeError("llamaq %s %s: %s" % (src, ftype, r.stderr[-2000:]))
    return dst


def setUpModule():
    global ROOT, FAILED
    if llamacpp.lib_dir() is None:
        FAILED = llamacpp.missing_reason()
        return
    ROOT = tempfile.mkdtemp(prefix="tfs-quantize-")
    for name in QGEN:
        SOURCES[name] = qgen.write(os.path.join(ROOT, name + ".gguf"), qgen.spec(name))
    SOURCES["chat"] = os.path.join(ROOT, "chat.gguf")
    write_chat(SOURCES["chat"])
    jobs = {(m, t): os.path.join(ROOT, "%s.%s.gguf" % (m, t)) for m, t in PAIRS}
    # two llamaq.py processes, each making its half of the references one after the other
    # (a process each cost 0.1-0.2 CPU-s of Python and libllama's loading, 31 times)
    argv = [[SOURCES[m], p, str(CODES[t]), "--threads", "1"] for (m, t), p in jobs.items()]
    n = max(1, min(os.cpu_count() or 2, 2))
    procs = []
    for k in range(n):
        part = [x for i, job in enumerate(argv) if i % n == k for x in ["---"] + job][1:]
        procs.append(subprocess.Popen([PY, LLAMAQ] + part, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        err = p.communicate(timeout=600)[1]
        if p.returncode != 0:
            raise RuntimeError("llamaq: %s" % err[-2000:])
    REFS.update(jobs)
    HASHES.update({p: (sha256(p), os.stat(p).st_mtime_ns) for p in SOURCES.values()})


def tearDownModule():
    if ROOT:
        subprocess.run(["rm", "-rf", ROOT])


class Quantize(TestCase):
    def setUp(self):
        if FAILED:
            self.skipTest(FAILED)
        self.cache = os.path.join(ROOT, "cache")

    def tearDown(self):
        if not FAILED:  # nothing is ever written to a source
            for p, (h, mt) in HASHES.items():
                self.assertEqual((sha256(p), os.stat(p).st_mtime_ns), (h, mt), p)

    def opts(self, t, *more, cache=None):
        return ["quantize=" + t, "cache=" + (cache or self.cache)] + list(more)

    def cache_files(self, cache=None):
        d = os.path.join(cache or self.cache, "quantized")
        return set(os.listdir(d)) if os.path.isdir(d) else set()

    def assertSameFile(self, got, ref, what):
        a, b = read(got), read(ref)
        if a != b:
            at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            self.fail("%s: %d bytes, reference %d; first difference at %d" % (what, len(a), len(b), at))

    # ---- model.gguf byte for byte ----

    @quick
    def test_fresh_mount_is_llama_quantize(self):
        """Every model x type (FRESH): model.gguf of a mount with an empty cache for it."""
        for m, t in FRESH:
            with Mount(self, SOURCES[m], self.opts(t)) as mnt:
                self.assertEqual(os.path.getsize(mnt.p("model.gguf")),
                                 os.path.getsize(REFS[m, t]))
                self.assertSameFile(mnt.p("model.gguf"), REFS[m, t], "%s %s" % (m, t))
        # (a tensor of the same source and type is one file: l1-e64's Q6_K is its Q8_0)
        self.assertGreater(len(self.cache_files()), 100)

    def test_remount_reads_the_cache(self):
        pairs = [("l8-e256", t) for t in FTYPES] + [(m, "Q4_K_M") for m in MODELS] + \
            [("l80-70b", "Q3_K_S")]
        if SANITIZED:   # (each type and each model once: FRESH's; the cache is type-blind)
            pairs = FRESH
        for m, t in pairs:
            with Mount(self, SOURCES[m], self.opts(t)) as mnt:
                read(mnt.p("model.gguf"))
        files = self.cache_files()
        for m, t in pairs:
            with Mount(self, SOURCES[m], self.opts(t)) as mnt:
                self.assertSameFile(mnt.p("model.gguf"), REFS[m, t], "%s %s again" % (m, t))
        self.assertEqual(self.cache_files(), files, "the second mounts computed tensors")
        # the proof: a byte changed in a cached tensor is what the next mount shows
        cache = os.path.join(ROOT, "cache-proof")
        with Mount(self, SOURCES["l8-e256"], self.opts("Q6_K", cache=cache)) as mnt:
            read(mnt.p("model.gguf"))
        qdir = os.path.join(cache, "quantized")
        victim = max(os.listdir(qdir), key=lambda f: os.path.getsize(os.path.join(qdir, f)))
        path = os.path.join(qdir, victim)
        data = bytearray(read(path))
        data[100] ^= 0xFF
        with open(path, "r+b") as f:
            f.write(data)
        with Mount(self, SOURCES["l8-e256"], self.opts("Q6_K", cache=cache)) as mnt:
            got, ref = read(mnt.p("model.gguf")), read(REFS["l8-e256", "Q6_K"])
        diff = [i for i in range(len(ref)) if got[i] != ref[i]]
        self.assertEqual(len(diff), 1, "the cached byte was not read")

    def test_convert(self):
        out = os.path.join(self.tmpdir(), "out.gguf")
        cache = os.path.join(ROOT, "cache-convert")
        for round_ in ("fresh", "cached"):
            r = run([TENSORFS, "convert", SOURCES["l12-tied"], out, "-o", ",".join(
                self.opts("q4_k_m", cache=cache))], timeout=120)
            self.assertEqual((r.returncode, r.stderr), (0, ""), round_)
            self.assertSameFile(out, REFS["l12-tied", "Q4_K_M"], "convert " + round_)
        # the default cache: $XDG_CACHE_HOME/tensorfs
        xdg = self.tmpdir()
        env = dict(os.environ, XDG_CACHE_HOME=xdg)
        r = run([TENSORFS, "convert", SOURCES["chat"], out, "-o", "quantize=IQ4_NL"],
                env=env, timeout=120)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertSameFile(out, REFS["chat", "IQ4_NL"], "convert IQ4_NL")
        self.assertTrue(os.listdir(os.path.join(xdg, "tensorfs", "quantized")))
        self.assertEqual([f for f in os.listdir(os.path.dirname(out)) if f != "out.gguf"], [])

    def test_hugging_face_repo(self):
        """A HF repo's GGUF view quantized: what llama_model_quantize makes of the view's
        model.gguf (itself the converter's file: tests/mount/test_hf.py)."""
        try:
            sys.path.insert(0, os.path.join(HERE, "..", "hf"))
            import make_model
        except ImportError as e:
            self.skipTest("tests/hf/make_model.py: %s" % e)
        d = self.tmpdir()
        try:
            make_model.make(d, "llama3-f32")
        except Exception as e:  # (python3-sentencepiece missing)
            self.skipTest("make_model: %s" % e)
        repo, view = os.path.join(d, "llama3-f32"), os.path.join(d, "view.gguf")
        for ot in ("auto", "f16"):
            r = run([TENSORFS, "convert", repo, view, "-o", "outtype=" + ot], timeout=120)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            ref = llamaq(view, os.path.join(d, "ref.gguf"), FTYPES["Q4_K_M"])
            with Mount(self, repo, self.opts("Q4_K_M", "outtype=" + ot)) as mnt:
                self.assertSameFile(mnt.p("model.gguf"), ref, "repo, outtype " + ot)
                self.assertNotIn("model.safetensors", os.listdir(mnt.path))

    def test_remote_source(self):
        """A GGUF over HTTP (nginx): quantized as the local file is; its cache files are not
        the local file's (the URL, its size, Last-Modified and ETag name them)."""
        try:
            import websrv
        except ImportError as e:
            self.skipTest(str(e))
        if not websrv.NGINX:
            self.skipTest("nginx not installed")
        cache = os.path.join(self.tmpdir(), "cache")
        with websrv.Nginx(ROOT) as ng:
            url = ng.url("l8-e256.gguf")
            with Mount(self, url, self.opts("Q4_K_M", cache=cache)) as mnt:
                self.assertSameFile(mnt.p("model.gguf"), REFS["l8-e256", "Q4_K_M"], "remote")
            files = self.cache_files(cache)
            with Mount(self, url, self.opts("Q4_K_M", cache=cache)) as mnt:
                self.assertSameFile(mnt.p("model.gguf"), REFS["l8-e256", "Q4_K_M"], "again")
            self.assertEqual(self.cache_files(cache), files)
            self.assertFalse(files & self.cache_files())

    # ---- what the mount shows ----

    def test_views_show_the_quantized_model(self):
        m, t = "l8-e256", "Q4_K_M"
        ref = REFS[m, t]
        with Mount(self, SOURCES[m], self.opts(t)) as q, Mount(self, ref) as r:
            names = sorted(os.listdir(r.p("tensors")))
            self.assertEqual(sorted(os.listdir(q.p("tensors"))), names)
            for d in ("tensors", "f32", "npy"):
                for n in sorted(os.listdir(r.p(d))):
                    self.assertEqual(read(q.p(d, n)), read(r.p(d, n)), "%s/%s" % (d, n))
            for n in names:
                for x in ("user.tensorfs.dtype", "user.tensorfs.shape"):
                    self.assertEqual(os.getxattr(q.p("tensors", n), x),
                                     os.getxattr(r.p("tensors", n), x))
            jq, jr = (json.loads(read(p.p("index.json"))) for p in (q, r))
            for k in ("version", "alignment", "data_offset", "model_file"):
                self.assertEqual(jq[k], jr[k], k)
            self.assertEqual(jq["keys"], jr["keys"])
            strip = ("offset", "source")
            self.assertEqual([{k: v for k, v in x.items() if k not in strip} for x in jq["tensors"]],
                             [{k: v for k, v in x.items() if k not in strip} for x in jr["tensors"]])
            iq = run([TENSORFS, "info", q.p("model.gguf")]).stdout.splitlines()[1:]
            ir = run([TENSORFS, "info", ref]).stdout.splitlines()[1:]
            self.assertEqual(iq, ir)
        # tensorfs info --quantize: the same without a mount
        i2 = run([TENSORFS, "info", "--quantize=" + t, SOURCES[m]]).stdout.splitlines()[1:]
        self.assertEqual(i2, ir)

    def test_llama_decodes_the_mount(self):
        for t in ("Q4_K_M", "IQ4_NL"):
            with Mount(self, SOURCES["chat"], self.opts(t)) as mnt:
                a = run([PY, GENERATE, mnt.p("model.gguf"), "--n", "8"], timeout=120)
            b = run([PY, GENERATE, REFS["chat", t], "--n", "8"], timeout=120)
            self.assertEqual((a.returncode, b.returncode), (0, 0), a.stderr + b.stderr)
            ja, jb = json.loads(a.stdout), json.loads(b.stdout)
            self.assertEqual(len(ja["tokens"]), 8)
            self.assertEqual(ja["tokens"], jb["tokens"], t)

    def test_imatrix_weighs_every_type(self):
        """With an importance matrix for every weight, ggml weighs Q4_0..Q5_1 and Q2_K..Q6_K
        too: model.gguf of the mount (and of tensorfs convert) is llama_model_quantize's
        file given the same matrix, for plain types and mixes, rows of 64, 96 and 256 (the
        32-value types' blocks weighed by their whole row), tied and untied; llama.cpp
        decodes the same tokens from it."""
        import numpy as np
        d = self.tmpdir()
        cases = [("l2-e96-gqa", "Q4_K_M", 15), ("l2-e96-gqa", "Q5_1", 9),
                 ("l8-e256", "Q2_K_S", 21), ("l8-e256", "Q4_0", 2), ("l8-e256", "Q3_K_L", 13),
                 ("l12-tied", "Q5_K_M", 17), ("l12-tied", "Q6_K", 18), ("chat", "Q4_1", 3),
                 ("chat", "Q5_0", 8)]
        if SANITIZED:   # the weighted legacy, K and mixed paths, tied, the decode: once each
            cases = [c for c in cases if c[:2] in (("l2-e96-gqa", "Q5_1"), ("l8-e256", "Q2_K_S"),
                                                  ("l12-tied", "Q5_K_M"), ("chat", "Q4_1"))]
        # each case's matrix (for every weight the source holds), then llama_model_quantize
        # of all of them in one llamaq.py process (a process each: 0.1-0.2 CPU-s more each)
        jobs, made = [], {}
        for m, t, code in cases:
            names, n = [], {}
            for x in G.read_gguf(SOURCES[m])["tensors"]:
                name = x["name"].decode()
                if len(x["ne"]) >= 2 and name.endswith(".weight") and "norm" not in name:
                    names.append(name)
                    n[name] = x["ne"][0]
            rng = np.random.default_rng(len(names))
            vals = {k: rng.uniform(0.05, 3.0, n[k]).astype(np.float32) for k in names}
            body = struct.pack("<i", len(names))
            for k in names:
                body += struct.pack("<i", len(k)) + k.encode() + struct.pack("<ii", 1, n[k])
                body += vals[k].tobytes()
            dat, npz = stable_path(body, d, m + ".dat"), os.path.join(d, m + ".npz")
            np.savez(npz, **vals)
            ref = os.path.join(d, "%s.%s.ref.gguf" % (m, t))
            made[m, t] = dat, ref
            # (and the keys the llama-quantize program adds: no dataset or chunks in this .dat)
            jobs += (["---"] if jobs else []) + [
                SOURCES[m], ref, str(code), "--threads", "2", "--imatrix", npz,
                "--kv", "quantize.imatrix.file=str:" + dat,
                "--kv", "quantize.imatrix.entries_count=int:%d" % len(names)]
        r = run([PY, LLAMAQ] + jobs, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        for m, t, code in cases:
            dat, ref = made[m, t]
            if (m, t) in REFS:   # (the matrix is used: the file is not the unweighted one)
                self.assertNotEqual(read(ref), read(REFS[m, t]), "%s %s" % (m, t))
            cache = os.path.join(d, "cache-" + m)
            with Mount(self, SOURCES[m], self.opts(t, "imatrix=" + dat, cache=cache)) as mnt:
                self.assertSameFile(mnt.p("model.gguf"), ref, "%s %s with an imatrix" % (m, t))
                if (m, t) == ("chat", "Q4_1"):
                    a = run([PY, GENERATE, mnt.p("model.gguf"), "--n", "8"], timeout=120)
                    b = run([PY, GENERATE, ref, "--n", "8"], timeout=120)
                    self.assertEqual((a.returncode, b.returncode), (0, 0), a.stderr + b.stderr)
                    self.assertEqual(json.loads(a.stdout)["tokens"],
                                     json.loads(b.stdout)["tokens"])
            out = os.path.join(d, "%s.%s.conv.gguf" % (m, t))
            c = run([TENSORFS, "convert", SOURCES[m], out, "-o",
                     "quantize=%s,imatrix=%s,cache=%s" % (t, dat, os.path.join(d, "none"))])
            self.assertEqual(c.returncode, 0, c.stderr)
            self.assertSameFile(out, ref, "convert %s %s with an imatrix" % (m, t))

    def test_imatrix_keys_as_llama_quantize_adds_them(self):
        """Given an imatrix, the llama-quantize program adds quantize.imatrix.file (the path
        it was given; tensorfs gives it absolute), .dataset and .chunks_count (what the file
        says it was computed on: a GGUF imatrix's first imatrix.datasets and
        imatrix.chunk_count, the legacy .dat's trailer; left out when it does not say) and
        .entries_count (its entries).  (Their place among the keys: the comparisons with
        llama_model_quantize given them as overrides, above and in tests/quant/check.py.)"""
        import numpy as np
        d = self.tmpdir()
        names = ["blk.0.attn_q.weight", "blk.0.ffn_up.weight"]
        g = G.GGUFWriter(alignment=32)
        g.add_kv("general.type", G.STRING, "imatrix")
        g.add_kv("imatrix.datasets", G.ARRAY, (G.STRING, ["wiki.train.raw", "other"]))
        g.add_kv("imatrix.chunk_count", G.UINT32, 125)
        g.add_kv("imatrix.chunk_size", G.UINT32, 512)
        for k in names:
            g.add_tensor(k + ".in_sum2", "F32", np.ones(64, np.float32), ne=[64, 1])
            g.add_tensor(k + ".counts", "F32", np.ones(1, np.float32), ne=[1, 1])
        files = {"gguf": os.path.join(d, "im.gguf"), "dat": os.path.join(d, "im.dat"),
                 "bare": os.path.join(d, "bare.dat")}
        g.write(files["gguf"])
        write_imatrix(files["dat"], names, 64)   # (its trailer: 1 chunk, "test")
        with open(files["dat"], "rb") as f:
            body = f.read()
        with open(files["bare"], "wb") as f:
            f.write(body[:-12])
        want = {"gguf": ("wiki.train.raw", "125"), "dat": ("test", "1"), "bare": (None, None)}
        for kind, path in files.items():
            with Mount(self, SOURCES["l1-e64"], self.opts("Q4_K_M", "imatrix=" + path)) as mnt:
                meta = os.listdir(mnt.p("metadata"))

                def val(k):
                    return read(mnt.p("metadata", k), "r").rstrip("\n") if k in meta else None
                self.assertEqual(val("quantize.imatrix.file"), path, kind)
                self.assertEqual(val("quantize.imatrix.entries_count"), "2", kind)
                self.assertEqual((val("quantize.imatrix.dataset"),
                                  val("quantize.imatrix.chunks_count")), want[kind], kind)
        # a relative imatrix= is made absolute by convert and info too, as by a mount
        out = os.path.join(d, "conv.gguf")
        r = run([TENSORFS, "convert", SOURCES["l1-e64"], out, "-o",
                 "quantize=Q4_K_M,imatrix=im.dat,cache=" + self.cache], cwd=d)
        self.assertEqual(r.returncode, 0, r.stderr)
        for args in (["info", out], ["info", "--quantize=Q4_K_M", "--imatrix=im.dat",
                                     SOURCES["l1-e64"]]):
            r = run([TENSORFS] + args, cwd=d)
            line = [x for x in r.stdout.splitlines() if "quantize.imatrix.file" in x]
            self.assertEqual(len(line), 1, r.stdout + r.stderr)
            self.assertTrue(line[0].rstrip().endswith(" " + files["dat"]), line[0])

    # ---- refusals ----

    def refused(self, args, code, pattern):
        mp = self.tmpdir()
        r = run([TENSORFS] + [a.replace("MP", mp) for a in args], timeout=60)
        self.assertFalse(is_mounted(mp))
        self.assertEqual(r.returncode, code, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], pattern)
        return lines[0]

    def test_bad_input(self):
        src = SOURCES["l8-e256"]
        line = self.refused(["mount", src, "MP", "-o", "quantize=Q4_K_Z"], 2,
                            r"quantize=Q4_K_Z: not a type llama-quantize knows \(valid: ")
        for t in FTYPES:
            self.assertIn(t, line)
        self.refused(["convert", src, "MP/x.gguf", "-o", "quantize=Q9"], 2, "not a type")
        self.refused(["info", "--quantize=Q9", src], 2, "not a type")
        self.refused(["mount", src, "MP", "-o", "quantize=IQ2_XXS"], 1,
                     "IQ2_XXS needs an importance matrix: tensor '.*' would be IQ2_XXS.*"
                     "-o imatrix=FILE")
        self.refused(["mount", REFS["l8-e256", "Q4_K_M"], "MP", "-o", "quantize=Q8_0"],
                     1, r"tensor 'output.weight' is already quantized \(Q6_K\): requantizing "
                     "it to Q8_0 is not allowed")
        self.refused(["mount", src, "MP", "-o", "quantize=Q4_K_M,rw"], 2,
                     "needs -o output=PATH")
        st = os.path.join(self.tmpdir(), "one.safetensors")
        head = json.dumps({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]}})
        with open(st, "wb") as f:
            f.write(len(head).to_bytes(8, "little") + head.encode() + bytes(32))
        self.refused(["mount", st, "MP", "-o", "quantize=Q8_0"], 1,
                     "quantize= needs a GGUF model .* this is a safetensors model")
        self.refused(["convert", src, src, "-o", "quantize=Q8_0"], 2, "OUTPUT is SOURCE")
        self.refused(["convert", src, "MP/x.gguf", "-o", "quantize=Q8_0,rw"], 2,
                     "-o rw does not apply")
        for bad in ("-1", "257"):
            self.refused(["mount", src, "MP", "-o", "quantize=Q8_0,quantize_threads=" + bad], 2,
                         "quantize_threads=%s: takes 1 to 256" % bad)
        for cmd in (["mount", src, "MP"], ["convert", src, "MP/x.gguf"]):
            self.refused(cmd + ["-o", "quantize=Q8_0,cache_size=1MiB"], 2,
                         "cache_size=1MiB: not a size")

    def test_quantize_threads(self):
        """-o quantize_threads=N: the pool has N threads (named tfs-quantize), and the bytes
        are the same."""
        m, t = "l8-e256", "Q4_K_M"
        counts = {}
        for n in (1, 4):
            cache = os.path.join(self.tmpdir(), "cache")
            with Mount(self, SOURCES[m], self.opts(t, "quantize_threads=%d" % n,
                                                   cache=cache)) as mnt:
                self.assertSameFile(mnt.p("model.gguf"), REFS[m, t], "%d threads" % n)
                pid = int(os.getxattr(mnt.path, "user.tensorfs.pid"))
                tasks = "/proc/%d/task" % pid
                counts[n] = sum(read(os.path.join(tasks, k, "comm"), "r") == "tfs-quantize\n"
                                for k in os.listdir(tasks))
        self.assertEqual(counts, {1: 1, 4: 4})

    def test_cache_that_cannot_be_written(self):
        """A read-only cache directory: one line, every read computes, the same bytes."""
        d = self.tmpdir()
        ro = os.path.join(d, "ro")
        os.mkdir(ro)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro],
                          capture_output=True).returncode == 0:
            self.addCleanup(subprocess.run, ["umount", "-l", ro], capture_output=True)
            cache, why = ro, "Read-only file system"
        else:  # no tmpfs mount here: a file where the directory would be
            cache, why = os.path.join(d, "file"), "Not a directory"
            open(cache, "w").close()
        for m, t in (("l8-e256", "Q4_K_M"), ("l2-e96-gqa", "IQ4_NL")):
            with Mount(self, SOURCES[m], self.opts(t, cache=cache), allow_stderr=True) as mnt:
                lines = mnt.mount_stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, mnt.mount_stderr)
                self.assertRegex(lines[0], "cache .*: %s: quantized tensors are computed on "
                                 "each read" % why)
                self.assertSameFile(mnt.p("model.gguf"), REFS[m, t], "%s %s uncached" % (m, t))
                ref = G.read_gguf(REFS[m, t])
                with open(REFS[m, t], "rb") as f:
                    for tt in ref["tensors"][::7]:
                        f.seek(tt["abs_offset"])
                        want = f.read(tt["nbytes"])
                        with open(mnt.p("tensors", tt["name"].decode()), "rb") as g:
                            g.seek(5)
                            self.assertEqual(g.read(1000), want[5:1005])
        if cache == ro:
            self.assertEqual(os.listdir(ro), [])

    # ---- rw ----

    def edit_and_kill(self, src, opts, name, check=None):
        """A rw mount of src with opts: general.name set to name, check(mount), then its
        daemon killed with -9 (the edit stays staged)."""
        with Mount(self, src, opts) as mnt:
            with open(mnt.p("metadata", "general.name"), "w") as f:
                f.write(name)
            if check:
                check(mnt)
            kill_daemon(mnt.path)

    def clean_unmount(self, src, opts, name):
        """What the unmount of a rw mount of src with opts writes after the same edit."""
        with Mount(self, src, opts) as mnt:
            with open(mnt.p("metadata", "general.name"), "w") as f:
                f.write(name)
            r = mnt.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)

    def refused_keeping(self, args, journal, *want):
        """tensorfs ARGS fails with one line holding each of want; the journal is as it was."""
        before = read(journal)
        r = run([TENSORFS] + args)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        for w in want:
            self.assertIn(w, r.stderr)
        self.assertEqual(read(journal), before, "the journal changed")
        return r.stderr

    def test_rw_edit_is_repacked_quantized(self):
        m, t = "l8-e256", "Q4_K_M"
        d = self.tmpdir()
        edited = os.path.join(d, "edited.gguf")
        rewrite_with(SOURCES[m], edited, b"general.name", b"renamed by tensorfs")
        ref = llamaq(edited, os.path.join(d, "ref.gguf"), FTYPES[t])
        out, staging = os.path.join(d, "out.gguf"), os.path.join(d, "staging")
        opts = self.opts(t, "rw", "output=" + out, "staging=" + staging)
        self.edit_and_kill(SOURCES[m], opts, "renamed by tensorfs", lambda mnt: self.assertSameFile(
            mnt.p("model.gguf"), ref, "the view with the edit"))
        self.assertFalse(os.path.exists(out))
        # mounted again: the journal's edit replayed onto a new quantized view
        with Mount(self, SOURCES[m], opts) as mnt:
            self.assertEqual(read(mnt.p("metadata", "general.name"), "r"), "renamed by tensorfs\n")
            self.assertSameFile(mnt.p("model.gguf"), ref, "the view replayed")
            r = mnt.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertSameFile(out, ref, "the repacked output")
        self.assertFalse(os.path.exists(os.path.join(staging, "journal.json")))

    def test_rw_without_edits_still_writes_the_output(self):
        """-o rw,quantize=,output=OUT is for OUT: unmounted unedited, the mount writes the
        quantized model there all the same (as tensorfs convert would), and says so."""
        m, t = "l12-tied", "Q4_K_M"
        out = os.path.join(self.tmpdir(), "out.gguf")
        with Mount(self, SOURCES[m], self.opts(t, "rw", "output=" + out)) as mnt:
            r = mnt.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertSameFile(out, REFS[m, t], "the unedited output")
        # (a model's own rw,output= mount left unedited still writes nothing)
        copy = os.path.join(self.tmpdir(), "copy.gguf")
        with Mount(self, SOURCES[m], ["rw", "output=" + copy]) as mnt:
            r = mnt.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(copy))

    def test_repack_after_kill_takes_the_recorded_view(self):
        """kill -9 of a rw,quantize= mount: the journal records quantize=; `tensorfs repack
        SOURCE -o output=OUT` (no quantize=) writes what a clean unmount writes; a repack with
        another quantize=, and a mount with another view or none, are refused with one line
        naming both, and keep the journal."""
        m, t = "l8-e256", "Q4_K_M"
        src, d = SOURCES[m], self.tmpdir()
        edited = os.path.join(d, "edited.gguf")
        rewrite_with(src, edited, b"general.name", b"renamed")
        ref = llamaq(edited, os.path.join(d, "ref.gguf"), FTYPES[t])
        clean, out = os.path.join(d, "clean.gguf"), os.path.join(d, "out.gguf")
        self.clean_unmount(src, self.opts(t, "rw", "output=" + clean), "renamed")
        self.assertSameFile(clean, ref, "the clean unmount")
        self.edit_and_kill(src, self.opts(t, "rw", "output=" + out), "renamed")
        journal = os.path.join(d, ".out.gguf.tensorfs-staging", "journal.json")
        self.assertEqual(json.loads(read(journal))["view"], {"quantize": t})
        self.refused_keeping(["repack", src, "-o", "output=%s,quantize=Q8_0" % out], journal,
                             "quantize=Q4_K_M", "quantize=Q8_0",
                             "leave the view options out")
        mp = self.tmpdir()
        how = ("to go on editing, mount with -o rw,quantize=Q4_K_M,output=%s; or write them "
               "with `tensorfs repack %s -o output=%s`" % (out, src, out))
        self.refused_keeping(["mount", src, mp, "-o", ",".join(self.opts("Q8_0", "rw",
                              "output=" + out))], journal, "quantize=Q8_0", how)
        self.refused_keeping(["mount", src, mp, "-o", "rw,output=" + out], journal,
                             "no view option", how)
        self.assertFalse(is_mounted(mp))
        self.assertFalse(os.path.exists(out))
        r = run([TENSORFS, "repack", src, "-o", "output=" + out, "-o", "cache=" + self.cache],
                timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done: wrote " + out, r.stderr)
        self.assertSameFile(out, clean, "the repack after the kill")
        self.assertFalse(os.path.exists(os.path.dirname(journal)))

    def test_repack_after_kill_takes_the_recorded_imatrix(self):
        """The same with imatrix= and staging=: `tensorfs repack SOURCE -o staging=DIR` (no
        output=, quantize= or imatrix=) writes the recorded output, and says so; another
        imatrix given, or the recorded one touched since, is refused, naming it."""
        m, t = "l8-e256", "IQ4_NL"
        src, d = SOURCES[m], self.tmpdir()
        im, other = os.path.join(d, "imatrix.dat"), os.path.join(d, "other.dat")
        write_imatrix(im, ["blk.%d.attn_q.weight" % i for i in range(8)], 256)
        write_imatrix(other, ["blk.0.attn_q.weight"], 256)
        clean, out = os.path.join(d, "clean.gguf"), os.path.join(d, "out.gguf")
        staging = os.path.join(d, "staging")
        self.clean_unmount(src, self.opts(t, "rw", "imatrix=" + im, "output=" + clean), "x")
        self.edit_and_kill(src, self.opts(t, "rw", "imatrix=" + im, "output=" + out,
                                          "staging=" + staging), "x")
        journal = os.path.join(staging, "journal.json")
        view = json.loads(read(journal))["view"]
        self.assertEqual((view["quantize"], view["imatrix"]["path"]), (t, im))
        self.refused_keeping(["repack", src, "-o", "staging=%s,imatrix=%s" % (staging, other)],
                             journal, "imatrix=" + im, "imatrix=" + other)
        st = os.stat(im)
        os.utime(im, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        self.refused_keeping(["repack", src, "-o", "staging=" + staging], journal,
                             "imatrix %s changed since" % im)
        os.utime(im, ns=(st.st_atime_ns, st.st_mtime_ns))
        r = run([TENSORFS, "repack", src, "-o", "staging=" + staging], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done: wrote " + out, r.stderr)
        self.assertSameFile(out, clean, "the repack after the kill")
        self.assertFalse(os.path.exists(journal))
    def test_unknown_view_record_is_refused(self):
        """A journal whose view record names an option no view of this tensorfs takes (as
        another version could write): a repack and a mount are refused with one line naming
        the staging directory and the member, and keep the journal."""
        m, t = "l12-tied", "Q8_0"
        src, d = SOURCES[m], self.tmpdir()
        out, staging = os.path.join(d, "out.gguf"), os.path.join(d, "staging")
        opts = self.opts(t, "rw", "output=" + out, "staging=" + staging)
        self.edit_and_kill(src, opts, "x")
        journal = os.path.join(staging, "journal.json")
        j = json.loads(read(journal))
        j["view"]["sharpen"] = "x"
        with open(journal, "w") as f:
            json.dump(j, f)
        why = "%s: the view record names \"sharpen\"" % journal
        self.refused_keeping(["repack", src, "-o", "staging=" + staging], journal, why)
        mp = self.tmpdir()
        self.refused_keeping(["mount", src, mp, "-o", ",".join(opts)], journal, why)
        self.assertFalse(is_mounted(mp))
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    main()
