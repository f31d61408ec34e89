#!/usr/bin/python3
"""Stress: 16 threads read random ranges of every file of several mounts at once (tensors/,
f32/, npy/, metadata/, index.json) and compare every byte with an oracle; then the same on a
rw mount while a writer thread rewrites keys, and while one rewrites a tensor (readers must
see an old or a new value, whole).

Duration: TFS_STRESS_SECONDS (default 12) for the read-only run, half of it for the rw run;
`--long` makes the default 60.  (16 readers keep both cores busy: each second is two seconds
of the test command's CPU; 30 s was 64 CPU-seconds of a 15-minute budget.)  The random seed is printed (TFS_STRESS_SEED replays it).

Oracles ("what the codec says"), computed without the mount where we can:
  tensors/<t>   the source file's bytes at the offset/nbytes `tensorfs info --json` gives;
  f32/<t>       F32/F16/BF16: numpy's conversion of those bytes; other types (quantized,
                integers, F64): one single-threaded whole-file read taken before the threads
                start (the dequantizers themselves are checked bit-exactly by test_gguf.py and
                the unit tests; here we check that concurrency changes nothing);
  npy/<t>.npy   the header of a first read, parsed with numpy.lib.format and checked against
                the tensor's shape and dtype, followed by the payload: the raw tensor bytes
                for numpy-native dtypes, else the f32/ oracle;
  metadata/<k>  strings, integers and bools from an independent GGUF reader (ggufgen);
                floats and arrays: a first single-threaded read;
  index.json    a first single-threaded read (which must parse as JSON).
"""
import io
import json
import os
import random
import shutil
import sys
import threading
import time

import numpy as np

import ggufgen as gg
from harness import TENSORFS, TESTDATA, VOCAB_DIR, Mount, TestCase, main, quick, run, vocab_files, vocab_missing

LONG = "--long" in sys.argv
if LONG:
    sys.argv.remove("--long")
SECONDS = float(os.environ.get("TFS_STRESS_SECONDS", "60" if LONG else "12"))
SEED = int(os.environ.get("TFS_STRESS_SEED", str(int(time.time()) % 100000)))
THREADS = 16
MIN_READS = 100     # per reader thread, however long it takes (at most OVERTIME s more)
MIN_WRITES = 21
OVERTIME = 60

MIXED = os.path.join(TESTDATA, "gguf", "mixed_flat.gguf")
TINY = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tiny-llama.gguf")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def info_json(source):
    r = run([TENSORFS, "info", "--json", source])
    if r.returncode != 0:
        raise AssertionError("tensorfs info failed: " + r.stderr)
    return json.loads(r.stdout)


def f32_of(dtype, raw):
    """The float32 bytes of a tensor computed with numpy, or None for other dtypes."""
    if dtype == "F32":
        return raw
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype("<f4").tobytes()
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype("<u4") << 16).tobytes()
    return None


def value_text(vtype, value):
    """A metadata file's bytes for the types whose text has one spelling, else None."""
    if vtype == gg.STRING:
        return value + b"\n"
    if vtype == gg.BOOL:
        return b"true\n" if value else b"false\n"
    if vtype in (gg.UINT8, gg.INT8, gg.UINT16, gg.INT16, gg.UINT32, gg.INT32, gg.UINT64, gg.INT64):
        return b"%d\n" % value
    return None


def build_oracle(tc, m, source):
    """{path on the mount: expected bytes} for every file of a mounted GGUF."""
    info = info_json(source)
    raw = read(source)
    rd = gg.read_gguf(source)
    kv = {k: (vt, v) for k, vt, v in rd["kv"]}
    oracle = {}
    index = read(m.p("index.json"))
    json.loads(index)
    oracle[m.p("index.json")] = index
    # metadata/
    for k in info["keys"]:
        name = bytes.fromhex(k["name_utf8_hex"]) if "name_utf8_hex" in k else k["name"].encode()
        path = m.p("metadata", k["file"])
        first = read(path)
        want = value_text(*kv[name])
        if want is not None:
            tc.assertEqual(first, want, path)
        oracle[path] = first
    tc.assertEqual(sorted(os.listdir(m.p("metadata"))), sorted(k["file"] for k in info["keys"]))
    # tensors/, f32/, npy/
    npy_files = set(os.listdir(m.p("npy")))
    for t in info["tensors"]:
        tb = raw[t["offset"]:t["offset"] + t["nbytes"]]
        tc.assertEqual(len(tb), t["nbytes"])
        oracle[m.p("tensors", t["file"])] = tb
        f32 = None
        if "f32_shape" in t:
            p = m.p("f32", t["file"])
            first = read(p)
            f32 = f32_of(t["dtype"], tb)
            if f32 is None:
                f32 = first   # quantized/integer types: the first single-threaded read
            else:
                tc.assertEqual(first, f32, p)
            tc.assertEqual(len(f32), 4 * int(np.prod(t["f32_shape"], dtype=np.int64)), p)
            oracle[p] = f32
        npy = t["file"] + ".npy"
        if npy not in npy_files:
            continue
        p = m.p("npy", npy)
        first = read(p)
        fp = io.BytesIO(first)
        tc.assertEqual(np.lib.format.read_magic(fp), (1, 0), p)
        shape, fortran, dt = np.lib.format.read_array_header_1_0(fp)
        tc.assertFalse(fortran, p)
        tc.assertEqual(fp.tell() % 64, 0, p)
        if dt == np.dtype("<f4") and t["dtype"] != "F32":
            tc.assertIsNotNone(f32, p)
            tc.assertEqual(list(shape), t["f32_shape"], p)
            payload = f32
        else:
            tc.assertEqual(list(shape), t["shape"], p)
            payload = tb
        tc.assertEqual(dt.itemsize * int(np.prod(shape, dtype=np.int64)), len(payload), p)
        want = first[:fp.tell()] + payload
        tc.assertEqual(first, want, p)
        oracle[p] = want
    tc.assertEqual(sorted(os.listdir(m.p("tensors"))), sorted(t["file"] for t in info["tensors"]))
    return oracle


class Reader(threading.Thread):
    """Reads random ranges of random files until the deadline; every byte is compared with
    oracle (or, for files in `choices`, with any of the allowed whole values)."""

    def __init__(self, seed, files, oracle, deadline, choices=None):
        super().__init__(daemon=True)
        self.rng = random.Random(seed)
        self.files = files
        self.oracle = oracle
        self.deadline = deadline
        self.min_reads = MIN_READS
        self.choices = choices or {}
        self.reads = 0
        self.bytes = 0
        self.mismatches = []
        self.errors = []

    def one_range(self, fd, want):
        rng = self.rng
        size = len(want)
        off = rng.randrange(0, size + 2)
        r = rng.random()
        n = (rng.randrange(0, 64) if r < 0.4 else rng.randrange(0, 1 << 16) if r < 0.8
             else rng.randrange(0, size + 4096))
        got = os.pread(fd, n, off)
        self.bytes += len(got)
        return got, want[off:off + n], off, n

    def check_whole(self, path):
        """A value that may change, read with one read() call: it must be one of the values
        ever written, whole (never empty by a pending O_TRUNC, a prefix, or a mix).  Only a
        single read() is atomic: a value read in several calls may straddle a commit, as on
        any file system, so the readers ask for the whole file at once."""
        fd = os.open(path, os.O_RDONLY)
        try:
            got = os.pread(fd, 1 << 20, 0) if self.rng.random() < 0.5 else os.read(fd, 1 << 20)
        finally:
            os.close(fd)
        if got not in self.choices[path]:
            self.mismatches.append("%s: %r is none of the values written" % (path, got[:200]))

    def run(self):
        fds = {}
        try:
            while keep_going(self.deadline, self.reads, self.min_reads):
                path = self.rng.choice(self.files)
                try:
                    if path in self.choices:
                        self.check_whole(path)
                        self.reads += 1
                        continue
                    want = self.oracle[path]
                    fresh = self.rng.random() < 0.3 or path not in fds
                    fd = os.open(path, os.O_RDONLY) if fresh else fds[path]
                    if fresh and path not in fds and len(fds) < 64:
                        fds[path] = fd
                        fresh = False
                    try:
                        for _ in range(self.rng.randrange(1, 4)):
                            got, exp, off, n = self.one_range(fd, want)
                            self.reads += 1
                            if got != exp:
                                i = next((i for i in range(min(len(got), len(exp)))
                                          if got[i] != exp[i]), min(len(got), len(exp)))
                                self.mismatches.append(
                                    "%s: pread(%d, %d) returned %d bytes, expected %d; first "
                                    "difference at +%d" % (path, n, off, len(got), len(exp), i))
                        if self.rng.random() < 0.05:
                            # drop the kernel's cached pages so the daemon serves the next reads
                            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        if self.rng.random() < 0.02 and os.fstat(fd).st_size != len(want):
                            self.mismatches.append("%s: st_size %d, expected %d"
                                                   % (path, os.fstat(fd).st_size, len(want)))
                    finally:
                        if fresh:
                            os.close(fd)
                except OSError as e:
                    self.errors.append("%s: %s" % (path, e))
                if len(self.mismatches) + len(self.errors) > 20:
                    break
        finally:
            for fd in fds.values():
                os.close(fd)


def keep_going(deadline, done, floor):
    """Whether a thread of a timed run goes on: until the deadline, and past it (by at most
    OVERTIME s) until it has done `floor` operations.  A loaded machine or a sanitizer build
    can be ten times slower than an idle one; the count, not the clock, says whether the run
    meant anything (a fixed 1.5 s under ASan once ended with too few reads)."""
    now = time.time()
    return now < deadline or (done < floor and now < deadline + OVERTIME)


def run_readers(tc, files, oracle, seconds, seed, nthreads, choices=None, writers=()):
    """nthreads Readers until `seconds` have passed and each has done MIN_READS reads;
    `writers` are functions called in threads with a `running()` that is true as long as a
    reader runs, so that every read may race a write."""
    deadline = time.time() + seconds
    readers = [Reader(seed * 1000 + i, files, oracle, deadline, choices) for i in range(nthreads)]

    def running():
        return time.time() < deadline or any(r.is_alive() for r in readers)

    threads = list(readers) + [threading.Thread(target=w, args=(running,), daemon=True)
                               for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + OVERTIME + 120)
        tc.assertFalse(t.is_alive(), "a thread still runs 120 s after the deadline (hung mount?)")
    mism = [x for r in readers for x in r.mismatches]
    errs = [x for r in readers for x in r.errors]
    reads = sum(r.reads for r in readers)
    print("# %d threads, %.0f s: %d reads, %.1f MiB, %d mismatches, %d errors (seed %d)"
          % (nthreads, seconds, reads, sum(r.bytes for r in readers) / 2**20, len(mism), len(errs),
             seed), flush=True)
    for x in sorted(set(x.split(": ", 1)[1][:90] for x in mism))[:12]:
        print("#   " + x, flush=True)
    tc.assertEqual(mism, [], "mismatches (replay with TFS_STRESS_SEED=%d)" % seed)
    tc.assertEqual(errs, [], "errors (replay with TFS_STRESS_SEED=%d)" % seed)
    tc.assertGreaterEqual(reads, MIN_READS * nthreads, "too few reads to mean anything")
    return reads


class Stress(TestCase):
    def mixed_copy(self):
        """A copy of mixed_flat.gguf in a new directory, and the options of a rw mount that
        stages beside it."""
        d = self.tmpdir()
        src = os.path.join(d, "model.gguf")
        shutil.copy(MIXED, src)
        return src, ["rw", "staging=" + os.path.join(d, "staging")]

    @quick
    def test_read_only_16_threads(self):
        """16 threads over mixed_flat.gguf, tiny-llama.gguf and the vocab GGUFs, mounted at
        once; every byte compared; 0 mismatches, 0 errors."""
        print("# seed %d (TFS_STRESS_SEED=%d replays it), %.0f s" % (SEED, SEED, SECONDS), flush=True)
        sources = [MIXED, TINY]
        if vocab_files():
            sources += [os.path.join(VOCAB_DIR, f) for f in vocab_files()]
        else:
            print("# SKIP the vocab GGUFs: %s" % vocab_missing(), flush=True)
        mounts = []
        try:
            oracle = {}
            for s in sources:
                m = Mount(self, s)
                m.__enter__()
                mounts.append(m)
                oracle.update(build_oracle(self, m, s))
            files = sorted(oracle)
            print("# %d mounts, %d files, %.1f MiB of oracle" % (len(mounts), len(files),
                  sum(len(v) for v in oracle.values()) / 2**20), flush=True)
            run_readers(self, files, oracle, SECONDS, SEED, THREADS)
            for m in mounts:
                pid = int(os.getxattr(m.path, "user.tensorfs.pid"))
                self.assertTrue(os.path.exists("/proc/%d" % pid), "daemon of %s died" % m.source)
        finally:
            for m in mounts:
                m.__exit__(None, None, None)
        for m in mounts:
            self.assertEqual(m.unmount_result.returncode, 0, m.unmount_result.stderr)

    def test_rw_readers_see_old_or_new(self):
        """A rw mount: one writer rewrites string and integer keys (open O_TRUNC, the value in
        two write() calls, close) with values of different lengths while 15 readers read those
        keys whole and random ranges of everything else.  The README: a value is parsed and
        committed at close(), so a reader sees the old value until close() returns and the new
        one after: never an empty file, a prefix or a mix."""
        seed = SEED + 1
        print("# seed %d, %.0f s" % (seed, SECONDS / 2), flush=True)
        src, rw = self.mixed_copy()
        rng = random.Random(seed)
        values = {
            "general.architecture": [b"llama", b"a-much-longer-architecture-name-" * 8, b"x",
                                     "ünïcödé".encode()],
            "test.str": [b"hello", b"", b"0123456789" * 300, b"short"],
            "test.u32": [b"7", b"4294967295", b"123456"],
            "test.i64": [b"-1", b"-9223372036854775808", b"42"],
        }
        strings = {"general.architecture", "test.str"}
        with Mount(self, src, rw) as m:
            oracle = build_oracle(self, m, src)
            choices = {}
            for k, vals in values.items():
                p = m.p("metadata", k)
                choices[p] = {oracle.pop(p)} | {v + b"\n" for v in vals}
            # index.json lists no values, but a rw mount may rebuild it: read it whole only
            oracle.pop(m.p("index.json"))
            writes = []
            werrors = []

            def writer(running):
                while running() or (len(writes) < MIN_WRITES and len(werrors) < 5):
                    k = rng.choice(sorted(values))
                    v = rng.choice(values[k])
                    try:
                        fd = os.open(m.p("metadata", k), os.O_WRONLY | os.O_TRUNC)
                        try:
                            # numbers are parsed at each write() (docs/editing-and-recovery.md): one write;
                            # strings in two, so that a reader may catch the half
                            cut = len(v) // 2 if k in strings else 0
                            if cut:
                                os.write(fd, v[:cut])
                                time.sleep(0.001)
                            os.write(fd, v[cut:])
                        finally:
                            os.close(fd)
                        writes.append(k)
                    except OSError as e:
                        werrors.append("%s <- %r: %s" % (k, v[:40], e))
                    time.sleep(0.005)

            files = sorted(oracle) + sorted(choices) * 8
            run_readers(self, files, oracle, SECONDS / 2, seed, THREADS - 1, choices, [writer])
            self.assertEqual(werrors, [])
            self.assertGreaterEqual(len(writes), MIN_WRITES)
            print("# %d values written" % len(writes), flush=True)
            last = {}
            for k in values:
                last[k] = read(m.p("metadata", k))
                self.assertIn(last[k], choices[m.p("metadata", k)])
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        with Mount(self, src) as m:
            for k, v in last.items():
                self.assertEqual(read(m.p("metadata", k)), v, k)

    def test_rw_tensor_readers_see_old_or_new(self):
        """One writer rewrites a tensor (open O_TRUNC, two write() calls, close) while 15
        readers read it with one pread(): old or new bytes, whole."""
        seed = SEED + 2
        src, rw = self.mixed_copy()
        with Mount(self, src, rw) as m:
            p = m.p("tensors", "t.f32")
            old = read(p)
            vals = [np.full(len(old) // 4, v, np.float32).tobytes() for v in (1.0, 2.0, 3.0)]
            choices = {p: set(vals) | {old}}

            def writer(running):
                i = 0
                while running() or i < MIN_WRITES:
                    v = vals[i % 3]
                    i += 1
                    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
                    try:
                        os.write(fd, v[:len(v) // 2])
                        time.sleep(0.001)
                        os.write(fd, v[len(v) // 2:])
                    finally:
                        os.close(fd)

            run_readers(self, [p], {}, min(SECONDS / 4, 8), seed, THREADS - 1, choices, [writer])

    def test_rw_tensor_readers_never_see_uncommitted(self):
        """One writer rewrites a tensor (open O_TRUNC, a poison value written whole, then the
        new value over it, close) while 15 readers read it with one pread(): a committed
        value, whole; never a short or empty file (a pending O_TRUNC), never a page of the
        poison (bytes never committed), never pages of two values."""
        seed = SEED + 3
        src, rw = self.mixed_copy()
        with Mount(self, src, rw) as m:
            p = m.p("tensors", "t.f32")
            old = read(p)
            n = len(old) // 4
            self.assertGreater(len(old), 4096, "one page would hide a torn read")
            vals = [np.full(n, v, np.float32).tobytes() for v in (1.0, 2.0, 3.0)]
            poison = np.full(n, -7.0, np.float32).tobytes()
            committed = [old] + vals
            stop = time.time() + min(SECONDS / 4, 8)
            rng = random.Random(seed)
            bad, reads, writes = [], [0], [0]

            def writer():
                while (keep_going(stop, writes[0], MIN_WRITES)
                       or any(t.is_alive() for t in threads[1:])):
                    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
                    try:
                        os.write(fd, poison)
                        time.sleep(0.001)
                        os.pwrite(fd, vals[writes[0] % 3], 0)
                    finally:
                        os.close(fd)
                    writes[0] += 1

            def reader():
                done = 0
                while keep_going(stop, done, MIN_READS) and len(bad) < 20:
                    done += 1
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        got = os.pread(fd, 1 << 20, 0)
                    finally:
                        os.close(fd)
                    reads[0] += 1
                    if got in committed:
                        continue
                    pages = [next((i for i, c in enumerate(committed)
                                   if got[k:k + 4096] == c[k:k + 4096]), "poison"
                                  if got[k:k + 4096] == poison[k:k + 4096] else "?")
                             for k in range(0, len(got), 4096)]
                    bad.append("%d bytes (expected %d), pages of values %s (0: the old "
                               "one)" % (len(got), len(old), pages))
                    if rng.random() < 0.05:
                        time.sleep(0.001)

            threads = [threading.Thread(target=writer, daemon=True)]
            threads += [threading.Thread(target=reader, daemon=True) for _ in range(THREADS - 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(stop - time.time() + OVERTIME + 120)
                self.assertFalse(t.is_alive(), "a thread still runs 120 s after the deadline")
            print("# %d reads, %d values written, %d bad (seed %d)"
                  % (reads[0], writes[0], len(bad), seed), flush=True)
            self.assertEqual(bad[:5], [])
            self.assertGreaterEqual(writes[0], MIN_WRITES)
            self.assertGreaterEqual(reads[0], MIN_READS * (THREADS - 1))
            # after the last close, a new reader sees the last value whole
            self.assertEqual(read(p), vals[(writes[0] - 1) % 3])

    def test_rw_tensor_reader_keeps_what_it_opened(self):
        """A reader (read() and a shared mapping) that opened a tensor before another handle
        rewrote it keeps reading the bytes it opened, whole, after the writer's close(); an
        open after that close reads the new bytes, and so does the old reader's next open."""
        src, rw = self.mixed_copy()
        with Mount(self, src, rw) as m:
            p = m.p("tensors", "t.f32")
            old = read(p)
            new = np.full(len(old) // 4, 5.0, np.float32).tobytes()
            with open(p, "rb") as r:
                self.assertEqual(os.pread(r.fileno(), 4096, 0), old[:4096])
                mm = np.memmap(p, dtype=np.uint8, mode="r")
                with open(p, "wb") as w:
                    w.write(new[:len(new) // 2])
                    w.flush()
                    self.assertEqual(os.pread(r.fileno(), 1 << 20, 0), old)
                    w.write(new[len(new) // 2:])
                self.assertEqual(read(p), new)
                self.assertEqual(os.pread(r.fileno(), 1 << 20, 0), old)
                self.assertEqual(mm.tobytes(), old)
                del mm
            self.assertEqual(read(p), new)
            self.assertEqual(np.load(m.p("npy", "t.f32.npy")).tobytes(), new)


if __name__ == "__main__":
    main()
