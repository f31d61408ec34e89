#!/usr/bin/python3
"""-o quantize=TYPE with -o cache_size=SIZE (codec/views/quantize_trim.c): the quantized
tensors' files in CACHE/quantized/ stay within SIZE, least recently used first out.

A llama-shaped F16 model of 4 layers of 512 (tensors of 0.1-0.3 MB once quantized, 4-9 MB a
type) is read through model.gguf as Q4_K, Q5_K_M and Q6_K in turn from one cache of 2 MiB
(less than one type's tensors): while a mount reads, a sampler measures the cache's files
(their st_blocks, as the bound counts them), which may pass SIZE only by the tensor being
read (kept while it is read); the bytes are those of a mount without a bound, read twice;
the files removed when a type follows another are the oldest (their times stamped in a
known order first); two mounts of two types reading at the same time from one bounded cache
read the right bytes; `tensorfs convert` keeps the bound too; without cache_size nothing is
removed.  Nothing here needs llama.cpp (its byte equality is test_quantize.py's).
Under the sanitizers (harness.SANITIZED) the types are Q4_0, Q5_0 and Q8_0 (see TYPES).
"""
import hashlib
import os
import random
import re
import subprocess
import tempfile
import threading
import time

import numpy as np

import ggufgen as G
from harness import SANITIZED, TENSORFS, Mount, TestCase, main, quick, run

TYPES = ["Q4_K", "Q5_K_M", "Q6_K"]
# Under the sanitizers: legacy types, which quantize without a search (mixes too: Q4_0's and
# Q5_0's output.weight is one Q6_K file, as Q5_K_M's Q6_K tensors are Q6_K's), as large as
# these within 2x.  The K types' fits were 3/4 of this module's 28 CPU-s there, the same code
# 4-5 times over; test_quantize.py and the unit tests run it under the sanitizers.  The
# trimming (files, sizes, times) is the same for any type.
if SANITIZED:
    TYPES = ["Q4_0", "Q5_0", "Q8_0"]
CAP = 2 << 20
KEY = re.compile(r"^[0-9a-f]{64}$")

ROOT = None
SOURCE = None
REF = {}        # type -> sha256 of model.gguf of an unbounded mount
LARGEST = {}    # type -> the largest tensor file's bytes (st_blocks) in the unbounded cache
UNBOUNDED = None


def write_model(path):
    rng = np.random.default_rng(2025)
    e, ff, nv, layers = 512, 1024, 256, 4
    w = G.GGUFWriter()
    w.add_kv("general.architecture", G.STRING, "llama")
    w.add_kv("general.name", G.STRING, "quantize cache test")
    for k, v in [("context_length", 256), ("embedding_length", e), ("block_count", layers),
                 ("feed_forward_length", ff), ("attention.head_count", 8),
                 ("attention.head_count_kv", 4), ("rope.dimension_count", e // 8),
                 ("vocab_size", nv)]:
        w.add_kv("llama." + k, G.UINT32, v)
    w.add_kv("llama.attention.layer_norm_rms_epsilon", G.FLOAT32, 1e-5)

    def add(name, ne):
        a = (rng.standard_normal(ne[0] * ne[1]) * 0.02).astype("<f2")
        w.add_tensor(name, "F16", a.tobytes(), ne=ne)

    def norm(name):
        w.add_tensor(name, "F32", np.ones(e, "<f4").tobytes(), ne=[e])
    add("token_embd.weight", [e, nv])
    for il in range(layers):
        p = "blk.%d." % il
        norm(p + "attn_norm.weight")
        for t, rows in [("attn_q", e), ("attn_k", e // 2), ("attn_v", e // 2), ("attn_output", e)]:
            add(p + t + ".weight", [e, rows])
        norm(p + "ffn_norm.weight")
        add(p + "ffn_gate.weight", [e, ff])
        add(p + "ffn_down.weight", [ff, e])
        add(p + "ffn_up.weight", [e, ff])
    norm("output_norm.weight")
    add("output.weight", [e, nv])
    w.write(path)


def files(cache):
    """{name: (bytes on disk, mtime_ns)} of the cache files (no temporaries)."""
    d = os.path.join(cache, "quantized")
    out = {}
    for n in os.listdir(d) if os.path.isdir(d) else []:
        try:
            st = os.stat(os.path.join(d, n))
        except FileNotFoundError:  # (removed meanwhile)
            continue
        if KEY.match(n):
            out[n] = (st.st_blocks * 512, st.st_mtime_ns)
    return out


def usage(cache):
    return sum(b for b, _ in files(cache).values())


def digest(path, chunk=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(chunk), b""):
            h.update(b)
    return h.hexdigest()


class Sampler:
    """The cache's largest use, measured every few ms while `with` lasts."""

    def __init__(self, cache):
        self.cache, self.peak, self.stop = cache, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, usage(self.cache))
            time.sleep(0.002)

    def __enter__(self):
        self.th = threading.Thread(target=self.run)
        self.th.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.th.join()
        self.peak = max(self.peak, usage(self.cache))


def setUpModule():
    global ROOT, SOURCE, UNBOUNDED
    ROOT = tempfile.mkdtemp(prefix="tfs-qcache-")
    SOURCE = os.path.join(ROOT, "m.gguf")
    write_model(SOURCE)


def tearDownModule():
    if ROOT:
        subprocess.run(["rm", "-rf", ROOT])


class QuantizeCache(TestCase):
    def opts(self, t, cache, cap=None):
        return ["quantize=" + t, "cache=" + cache] + (["cache_size=%d" % cap] if cap else [])

    def reference(self):
        """model.gguf of unbounded mounts, each type (once for the module)."""
        global UNBOUNDED
        if UNBOUNDED:
            return
        UNBOUNDED = os.path.join(ROOT, "unbounded")
        for t in TYPES:
            before = set(files(UNBOUNDED))
            with Mount(self, SOURCE, self.opts(t, UNBOUNDED)) as m:
                REF[t] = digest(m.p("model.gguf"))
            mine = {n: v for n, v in files(UNBOUNDED).items() if n not in before}
            LARGEST[t] = max(b for b, _ in mine.values())
            # without cache_size nothing is removed: every type's files stay
            self.assertTrue(before <= set(files(UNBOUNDED)), "%s removed files" % t)
        self.assertGreater(usage(UNBOUNDED), 6 * CAP, "the model is too small for the test")

    def read_bounded(self, t, cache, first=None):
        """model.gguf as t, bounded, read twice (and tensors/ once, backwards); first() called
        after its first MiB is read.  The peak use checked."""
        with Sampler(cache) as s:
            with Mount(self, SOURCE, self.opts(t, cache, CAP)) as m:
                with open(m.p("model.gguf"), "rb") as f:
                    f.read(1 << 20)
                if first:
                    first()
                self.assertEqual(digest(m.p("model.gguf")), REF[t], "%s: other bytes" % t)
                self.assertEqual(digest(m.p("model.gguf"), 12345), REF[t], "%s again" % t)
                for n in sorted(os.listdir(m.p("tensors")))[::-1]:
                    with open(m.p("tensors", n), "rb") as f:
                        f.read()
        # beyond the bound by the tensor being read at most (it is kept while it is read)
        self.assertLessEqual(s.peak, CAP + LARGEST[t], "%s: %d bytes" % (t, s.peak))
        self.assertLessEqual(usage(cache), CAP + LARGEST[t])

    def check_oldest_went(self, t, cache, names, stamps):
        """Some of names (oldest first, stamped so) were removed, and only the oldest.  A
        file the mount opened (a tensor of the same type in both mixes: Q5_K_M's Q6_K
        tensors are Q6_K's) is stamped used now, or was removed and written again: such are
        left out."""
        deadline = time.time() + 20
        while time.time() < deadline:
            left = files(cache)
            gone = [i for i, n in enumerate(names) if n not in left]
            kept = [i for i, n in enumerate(names) if n in left and left[n][1] == stamps[i]]
            if gone:
                break
            time.sleep(0.01)
        self.assertTrue(gone, "%s: nothing of the type before was removed" % t)
        self.assertTrue(kept, "%s: everything of the type before was removed" % t)
        self.assertLess(max(gone), min(kept), "%s: a newer file went before an older one "
                        "(%s gone, %s kept)" % (t, gone, kept))

    @quick
    def test_types_in_turn_stay_within_the_bound(self):
        """Q4_K, Q5_K_M, Q6_K, then Q4_K again, through one 2 MiB cache: the bytes are the
        unbounded mounts', the files removed the least recently used."""
        self.reference()
        cache = self.tmpdir()
        for t in TYPES + TYPES[:1]:
            # the files there, stamped used in a known order, unlike the order written
            names = sorted(files(cache))
            random.Random(len(names)).shuffle(names)
            stamps = [(int(time.time()) - 1000 + i) * 10 ** 9 for i in range(len(names))]
            for n, ns in zip(names, stamps):
                os.utime(os.path.join(cache, "quantized", n), ns=(ns, ns))
            first = (lambda: self.check_oldest_went(t, cache, names, stamps)) if names else None
            self.read_bounded(t, cache, first)
        self.assertEqual([n for n in os.listdir(os.path.join(cache, "quantized"))
                          if not KEY.match(n)], [], "temporaries left")

    def test_two_mounts_share_a_bounded_cache(self):
        """Two mounts (Q4_K and Q6_K: TYPES' first and last) trimming one cache while both
        read."""
        self.reference()
        cache = self.tmpdir()
        errors, peak = [], 0
        with Sampler(cache) as s:
            with Mount(self, SOURCE, self.opts(TYPES[0], cache, CAP)) as a, \
                    Mount(self, SOURCE, self.opts(TYPES[2], cache, CAP)) as b:
                def reader(m, t):
                    for chunk in (1 << 20, 4096 * 3 + 17, 1 << 18):
                        if digest(m.p("model.gguf"), chunk) != REF[t]:
                            errors.append("%s (reads of %d)" % (t, chunk))
                th = [threading.Thread(target=reader, args=(a, TYPES[0])),
                      threading.Thread(target=reader, args=(b, TYPES[2]))]
                for x in th:
                    x.start()
                for x in th:
                    x.join()
        peak = s.peak
        self.assertEqual(errors, [])
        self.assertLessEqual(peak, CAP + LARGEST[TYPES[0]] + LARGEST[TYPES[2]], "%d bytes" % peak)

    def test_convert_keeps_the_bound(self):
        self.reference()
        cache = self.tmpdir()
        out = os.path.join(self.tmpdir(), "q.gguf")
        with Sampler(cache) as s:
            r = run([TENSORFS, "convert", SOURCE, out, "-o",
                     ",".join(self.opts(TYPES[1], cache, CAP))], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(digest(out), REF[TYPES[1]])
        self.assertLessEqual(s.peak, CAP + LARGEST[TYPES[1]], "%d bytes" % s.peak)


if __name__ == "__main__":
    main()
