#!/usr/bin/python3
"""Real mounts of GGUF files: every view of mixed_flat.gguf against its oracle, every case of
gguf/bad/RESULTS.json, llama.cpp's vocab files (against ggml's reader), `tensorfs info`, and names that need escaping."""
import errno
import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np

import ggufgen as gg
from harness import assert_reject, is_mounted, main, Mount, quick, run, TENSORFS, TestCase, TESTDATA, \
    VOCAB_DIR, SANITIZED, ggml_gguf, vocab_files, vocab_missing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llama"))
import llamacpp  # noqa: E402

GGUF_DIR = os.path.join(TESTDATA, "gguf")
MIXED = os.path.join(GGUF_DIR, "mixed_flat.gguf")
with open(os.path.join(GGUF_DIR, "mixed_flat.expected.json")) as _f:
    EXP = json.load(_f)

# dtypes whose npy/ file holds the raw bytes (everything else is float32)
NPY_NATIVE = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "|i1", "I16": "<i2", "I32": "<i4",
              "I64": "<i8"}
TYPE_XATTR = {"UINT8": "uint8", "INT8": "int8", "UINT16": "uint16", "INT16": "int16",
              "UINT32": "uint32", "INT32": "int32", "FLOAT32": "float32", "BOOL": "bool",
              "STRING": "string", "UINT64": "uint64", "INT64": "int64", "FLOAT64": "float64"}

def xattr(path, name):
    return os.getxattr(path, "user.tensorfs." + name).decode()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def fname(name):
    """Encoded file name (str) of a tensor/key name (str or bytes)."""
    return os.fsdecode(gg.encode_name(name))


def tensor_name(t):
    return bytes.fromhex(t["name_utf8_hex"]).decode()


def expected_f32_file(t):
    return os.path.join(GGUF_DIR, t["expected_f32"])


class MetaCheck:
    """Compares metadata/<key> text with an expected value of a GGUF type name (json's)."""

    def check_scalar(self, tc, key, vtype, text, value, bits=None, raw_bytes=None):
        if vtype in ("UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64"):
            tc.assertRegex(text, rb"^-?[0-9]+$", key)
            tc.assertEqual(int(text), value, key)
        elif vtype == "BOOL":
            tc.assertEqual(text, b"true" if value else b"false", key)
        elif vtype == "FLOAT32":
            want = int(bits, 16) if bits else f32_bits(value)
            tc.assertEqual(f32_bits(float(text)), want, "%s: %r" % (key, text))
        elif vtype == "FLOAT64":
            want = int(bits, 16) if bits else f64_bits(value)
            tc.assertEqual(f64_bits(float(text)), want, "%s: %r" % (key, text))
        elif vtype == "STRING":
            tc.assertEqual(text, raw_bytes if raw_bytes is not None else value.encode(), key)
        else:
            tc.fail("%s: unknown type %s" % (key, vtype))


def check_array(tc, key, elem, got, want, prefix=False):
    """got: parsed JSON from the mount; want: expected list (prefix: only the first len(want))."""
    if prefix:
        got = got[:len(want)]
    tc.assertEqual(len(got), len(want), key)
    if elem == "FLOAT32":
        tc.assertEqual([f32_bits(v) for v in got], [f32_bits(v) for v in want], key)
    elif elem == "FLOAT64":
        tc.assertEqual([f64_bits(v) for v in got], [f64_bits(v) for v in want], key)
    else:
        tc.assertEqual(got, want, key)


class MixedFlat(TestCase):
    """mixed_flat.gguf: every view against mixed_flat.expected.json."""

    @classmethod
    def setUpClass(cls):
        cls.src = read(MIXED)
        cls.st = os.stat(MIXED)
        # one mount for the whole class: every unmount costs about a second here
        cls.mount = Mount(cls("run"), MIXED)
        cls.mount.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.mount.__exit__(None, None, None)

    def mounted(self):
        """The class's mount, as a context manager (the tests keep the `with` shape)."""
        tc = self

        class _M:
            def __enter__(self):
                tc.assertTrue(is_mounted(tc.mount.path), "the class mount is gone")
                return tc.mount

            def __exit__(self, *a):
                return False
        return _M()

    def test_lfs_pointer_named_gguf(self):
        """A repository cloned without git-lfs holds pointer files under the models' names:
        one named model.gguf is called an LFS pointer, not a GGUF with a bad magic."""
        d = self.tmpdir()
        path = os.path.join(d, "model.gguf")
        with open(path, "w") as f:
            f.write("version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 +
                    "\nsize 12345\n")
        assert_reject(self, path, pattern="Git LFS pointer.*git lfs pull")

    def test_metadata_values_and_types(self):
        with self.mounted() as m:
            files = sorted(os.listdir(m.p("metadata")))
            self.assertEqual(files, sorted(fname(k["key"]) for k in EXP["kv"]))
            self.assertEqual(len(files), EXP["n_kv"])
            mc = MetaCheck()
            for k in EXP["kv"]:
                p = m.p("metadata", fname(k["key"]))
                data = read(p)
                self.assertTrue(data.endswith(b"\n"), k["key"])
                text = data[:-1]
                if k["type"] == "ARRAY":
                    want_type = "array[%s]" % TYPE_XATTR[k["elem_type"]]
                    got = json.loads(text)
                    check_array(self, k["key"], k["elem_type"], got, k["value"])
                else:
                    want_type = TYPE_XATTR[k["type"]]
                    raw = bytes.fromhex(k["utf8_hex"]) if "utf8_hex" in k else None
                    mc.check_scalar(self, k["key"], k["type"], text, k["value"], k.get("bits"), raw)
                self.assertEqual(xattr(p, "type"), want_type, k["key"])
                self.assertEqual(os.stat(p).st_size, len(data), k["key"])
            # the NUL and the unicode string byte for byte
            self.assertEqual(read(m.p("metadata", "test.str_nul")), b"a\0b\n")
            self.assertEqual(read(m.p("metadata", "test.str_unicode")),
                             "héllo wörld — 日本語 🦙\n".encode())

    @quick
    def test_tensor_bytes_and_xattrs(self):
        with self.mounted() as m:
            names = [fname(tensor_name(t)) for t in EXP["tensors"]]
            self.assertEqual(sorted(os.listdir(m.p("tensors"))), sorted(names))
            for t, fn in zip(EXP["tensors"], names):
                p = m.p("tensors", fn)
                want = self.src[t["absolute_offset"]:t["absolute_offset"] + t["nbytes"]]
                got = read(p)
                self.assertEqual(len(got), t["nbytes"], fn)
                self.assertEqual(got, want, fn)
                self.assertEqual(hashlib.sha256(got).hexdigest(), t["raw_sha256"], fn)
                self.assertEqual(xattr(p, "dtype"), t["ggml_type"], fn)
                self.assertEqual(xattr(p, "shape"), ",".join(str(v) for v in reversed(t["ne"])), fn)
                self.assertEqual(int(xattr(p, "offset")), t["absolute_offset"], fn)
                # the same xattrs on the f32/ and npy/ entries
                for q in (m.p("f32", fn), m.p("npy", fn + ".npy")):
                    self.assertEqual(xattr(q, "dtype"), t["ggml_type"], q)
                    self.assertEqual(xattr(q, "shape"), xattr(p, "shape"), q)

    def test_f32_bit_exact(self):
        with self.mounted() as m:
            self.assertEqual(len(os.listdir(m.p("f32"))), len(EXP["tensors"]))
            for t in EXP["tensors"]:
                fn = fname(tensor_name(t))
                want = read(expected_f32_file(t))
                got = read(m.p("f32", fn))
                n = 1
                for v in t["ne"]:
                    n *= v
                self.assertEqual(len(want), 4 * n, fn)
                self.assertEqual(os.stat(m.p("f32", fn)).st_size, 4 * n, fn)
                if got != want:
                    g = np.frombuffer(got, "<u4")
                    w = np.frombuffer(want, "<u4")
                    bad = np.nonzero(g[:len(w)] != w[:len(g)])[0]
                    self.fail("%s: %d bytes vs %d, first differing value %s" % (
                        fn, len(got), len(want), bad[:5]))
                # numpy reads it the same way
                a = np.fromfile(m.p("f32", fn), dtype="<f4")
                self.assertEqual(a.tobytes(), want, fn)

    def test_npy_mmap(self):
        with self.mounted() as m:
            self.assertEqual(len(os.listdir(m.p("npy"))), len(EXP["tensors"]))
            for t in EXP["tensors"]:
                fn = fname(tensor_name(t)) + ".npy"
                a = np.load(m.p("npy", fn), mmap_mode="r")
                self.assertIsInstance(a, np.memmap, fn)
                self.assertEqual(a.shape, tuple(reversed(t["ne"])), fn)
                raw = self.src[t["absolute_offset"]:t["absolute_offset"] + t["nbytes"]]
                native = NPY_NATIVE.get(t["ggml_type"])
                if native:
                    self.assertEqual(a.dtype, np.dtype(native), fn)
                    self.assertEqual(np.ascontiguousarray(a).tobytes(), raw, fn)
                else:
                    self.assertEqual(a.dtype, np.dtype("<f4"), fn)
                    self.assertEqual(np.ascontiguousarray(a).tobytes(), read(expected_f32_file(t)), fn)
                hlen = os.stat(m.p("npy", fn)).st_size - a.nbytes
                self.assertEqual(hlen % 64, 0, fn)
                del a
                # np.load without mmap too
                b = np.load(m.p("npy", fn))
                self.assertEqual(b.shape, tuple(reversed(t["ne"])), fn)

    def test_index_json(self):
        with self.mounted() as m:
            data = read(m.p("index.json"))
            self.assertEqual(os.stat(m.p("index.json")).st_size, len(data))
            ix = json.loads(data)
            self.assertEqual(ix["format"], "gguf")
            self.assertEqual(ix["version"], EXP["version"])
            self.assertEqual(ix["alignment"], EXP["alignment"])
            self.assertEqual(ix["data_offset"], EXP["data_offset"])
            self.assertEqual(os.path.realpath(ix["source"]), os.path.realpath(MIXED))
            self.assertEqual([s["size"] for s in ix["sources"]], [EXP["file_size"]])
            self.assertEqual([k["name"] for k in ix["keys"]], [k["key"] for k in EXP["kv"]])
            for k, e in zip(ix["keys"], EXP["kv"]):
                want = ("array[%s]" % TYPE_XATTR[e["elem_type"]]) if e["type"] == "ARRAY" \
                    else TYPE_XATTR[e["type"]]
                self.assertEqual(k["type"], want, e["key"])
                self.assertEqual(k["file"], fname(e["key"]))
            self.assertEqual(len(ix["tensors"]), EXP["n_tensors"])
            for t, e in zip(ix["tensors"], EXP["tensors"]):
                name = tensor_name(e)
                self.assertEqual(t["name"], name)
                self.assertEqual(t["file"], fname(name))
                self.assertEqual(t["dtype"], e["ggml_type"], name)
                self.assertEqual(t["ne"], e["ne"], name)
                self.assertEqual(t["shape"], list(reversed(e["ne"])), name)
                self.assertEqual(t["offset"], e["absolute_offset"], name)
                self.assertEqual(t["nbytes"], e["nbytes"], name)
                self.assertEqual(t["f32_shape"], list(reversed(e["ne"])), name)
            self.assertEqual(ix["layers"], [])

    def test_ls_sizes_modes_times(self):
        with self.mounted() as m:
            mt = self.st.st_mtime_ns
            want = {}
            for k in EXP["kv"]:
                want["metadata/" + fname(k["key"])] = len(read(m.p("metadata", fname(k["key"]))))
            for t in EXP["tensors"]:
                fn = fname(tensor_name(t))
                n = os.stat(expected_f32_file(t)).st_size
                want["tensors/" + fn] = t["nbytes"]
                want["f32/" + fn] = n
                native = t["ggml_type"] in NPY_NATIVE
                with open(m.p("npy", fn + ".npy"), "rb") as f:
                    head = f.read(10)
                self.assertEqual(head[:8], b"\x93NUMPY\x01\x00")
                hl = 10 + struct.unpack("<H", head[8:10])[0]
                want["npy/" + fn + ".npy"] = hl + (t["nbytes"] if native else n)
            want["index.json"] = len(read(m.p("index.json")))
            want["model.gguf"] = json.loads(read(m.p("index.json")))["model_file"]["size"]
            # sizes as `ls -l` shows them
            got = {}
            for d in ("", "metadata", "tensors", "f32", "npy"):
                r = run(["ls", "-ln", "--quoting-style=literal", "--time-style=+%s", m.p(d)],
                        check=True)
                for line in r.stdout.splitlines()[1:]:
                    parts = line.split(None, 6)
                    mode, size, name = parts[0], int(parts[4]), parts[6]
                    rel = (d + "/" + name) if d else name
                    if mode.startswith("d"):
                        self.assertEqual(mode, "dr-xr-xr-x", rel)
                        continue
                    self.assertEqual(mode, "-r--r--r--", rel)
                    self.assertEqual(int(parts[5]), int(self.st.st_mtime), rel)
                    got[rel] = size
            self.assertEqual(got, want)
            # stat: modes, times, owners
            for root, dirs, files in os.walk(m.path):
                for x in dirs + [""]:
                    st = os.stat(os.path.join(root, x))
                    self.assertEqual(st.st_mode & 0o7777, 0o555, root + "/" + x)
                    self.assertEqual(st.st_mtime_ns, mt, root + "/" + x)
                for x in files:
                    st = os.stat(os.path.join(root, x))
                    self.assertEqual(st.st_mode & 0o7777, 0o444, x)
                    self.assertEqual(st.st_mtime_ns, mt, x)
                    self.assertEqual(st.st_atime_ns, mt, x)
                    self.assertEqual(st.st_ctime_ns, mt, x)
                    self.assertEqual(st.st_uid, os.getuid(), x)

    def test_odd_offsets(self):
        with self.mounted() as m:
            rng = np.random.default_rng(7)
            for t in EXP["tensors"]:
                fn = fname(tensor_name(t))
                for p in (m.p("f32", fn), m.p("npy", fn + ".npy"), m.p("tensors", fn)):
                    whole = read(p)
                    size = len(whole)
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        cases = [(0, 1), (1, 1), (1, 3), (3, 5), (5, 13), (7, 4097), (size - 1, 10),
                                 (size, 5), (size + 100, 5), (2, size), (0, size + 7)]
                        cases += [(int(rng.integers(0, size + 1)), int(rng.integers(1, 5000)))
                                  for _ in range(12)]
                        for off, n in cases:
                            got = os.pread(fd, n, max(off, 0))
                            self.assertEqual(got, whole[max(off, 0):max(off, 0) + n],
                                             "%s off %d len %d" % (p, off, n))
                    finally:
                        os.close(fd)

    def test_generated_files_past_eof(self):
        """metadata/ and index.json read at and past their end give nothing, also with
        O_DIRECT.  (This kernel clips such reads at st_size before they reach the daemon,
        so the daemon's own past-EOF handling in op_read is not exercised here.)"""
        with self.mounted() as m:
            for p in (m.p("metadata", "general.architecture"), m.p("index.json"),
                      m.p("metadata", "test.arr_str")):
                whole = read(p)
                for flags in (os.O_RDONLY, os.O_RDONLY | os.O_DIRECT):
                    try:
                        fd = os.open(p, flags)
                    except OSError:
                        continue  # O_DIRECT refused: nothing to check
                    try:
                        for off in (len(whole), len(whole) + 1, len(whole) + 4096, 1 << 20):
                            try:
                                self.assertEqual(os.pread(fd, 4096, off), b"", "%s off %d" % (p, off))
                            except OSError as e:  # O_DIRECT alignment rules may refuse it
                                self.assertIn(e.errno, (22,), "%s off %d: %s" % (p, off, e))
                        self.assertEqual(os.pread(fd, len(whole) + 10, 0)[:len(whole)], whole)
                    finally:
                        os.close(fd)

    def test_read_only(self):
        with self.mounted() as m:
            t = m.p("tensors", "t.f32")
            k = m.p("metadata", "test.u8")
            for p in (t, k, m.p("f32", "t.f32"), m.p("npy", "t.f32.npy"), m.p("index.json")):
                for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_RDONLY | os.O_TRUNC):
                    with self.assertRaises(OSError) as cm:
                        os.close(os.open(p, flags))
                    self.assertEqual(cm.exception.errno, errno.EROFS, (p, flags))
            cases = [
                lambda: os.close(os.open(m.p("metadata", "new.key"), os.O_WRONLY | os.O_CREAT, 0o644)),
                lambda: os.close(os.open(m.p("tensors", "new"), os.O_WRONLY | os.O_CREAT, 0o644)),
                lambda: os.unlink(k),
                lambda: os.unlink(t),
                lambda: os.rename(k, m.p("metadata", "renamed")),
                lambda: os.mkdir(m.p("tensors", "d")),
                lambda: os.rmdir(m.p("npy")),
                lambda: os.truncate(t, 0),
                lambda: os.chmod(t, 0o644),
                lambda: os.utime(t, (0, 0)),
                lambda: os.setxattr(t, "user.tensorfs.dtype", b"F16"),
                lambda: os.symlink("x", m.p("tensors", "link")),
            ]
            for i, fn in enumerate(cases):
                with self.assertRaises(OSError, msg="case %d" % i) as cm:
                    fn()
                self.assertEqual(cm.exception.errno, errno.EROFS, "case %d" % i)
            # nothing changed
            self.assertEqual(read(m.p("metadata", "test.u8")), b"255\n")
            self.assertEqual(len(read(t)), 8192)

    def test_root_xattrs(self):
        with self.mounted() as m:
            self.assertEqual(xattr(m.path, "format"), "gguf")
            self.assertEqual(os.path.realpath(xattr(m.path, "source")), os.path.realpath(MIXED))
            pid = int(xattr(m.path, "pid"))
            with open("/proc/%d/comm" % pid) as f:
                self.assertIn("tensorfs", f.read())
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["f32", "index.json", "metadata", "model.gguf", "npy", "tensors"])
            with self.assertRaises(OSError) as cm:
                os.stat(m.p("tensors", "no-such-tensor"))
            self.assertEqual(cm.exception.errno, errno.ENOENT)


# ==== gguf/bad ====

REJECT_PATTERNS = {
    "bad_magic_lower": r"(?i)magic|not a gguf",
    "bad_version1": r"(?i)v1|version",
    "bad_n_tensors_negative": r"(?i)tensor count|-1",
    "bad_n_kv_too_many": r"(?i)length|limit|end of|past|truncat",
    "bad_empty_key": r"(?i)empty",
    "bad_array_len_past_eof": r"(?i)array",
    "bad_ne_overflow": r"(?i)overflow",
    "bad_ne_overflow_wrap_2_64": r"(?i)overflow",
    "bad_type_43": r"(?i)type 43",
    "bad_type_31_removed": r"(?i)type 31",
    "bad_row_not_block_multiple": r"(?i)block",
    "bad_offset_overlap": r"(?i)overlap",
    "bad_data_truncated": r"(?i)end of the file|past the end|truncat",
}


def check_tensors_read_back(tc, m, path, oracle_tensors=None):
    """Every tensor of path (per the Python reader) reads back through tensors/ with the
    right bytes, dtype, shape and offset; the listing holds exactly those tensors."""
    r = gg.read_gguf(path)
    src = read(path)
    names = sorted(fname(t["name"]) for t in r["tensors"])
    tc.assertEqual(sorted(os.listdir(m.p("tensors"))), names, path)
    for t in r["tensors"]:
        p = m.p("tensors", fname(t["name"]))
        tc.assertEqual(read(p), src[t["abs_offset"]:t["abs_offset"] + t["nbytes"]], p)
        tc.assertEqual(xattr(p, "dtype"), t["type_name"], p)
        tc.assertEqual(xattr(p, "shape"), ",".join(str(v) for v in reversed(t["ne"])), p)
        tc.assertEqual(int(xattr(p, "offset")), t["abs_offset"], p)
        if t["type_name"] in ("F32", "F16"):
            want = np.frombuffer(read(p), "<f4" if t["type_name"] == "F32" else "<f2").astype("<f4")
            tc.assertEqual(read(m.p("f32", fname(t["name"]))), want.tobytes(), p)
    if oracle_tensors is not None:
        # (RESULTS.json shortens names to 20 bytes)
        got = [(t["name"].decode()[:20], t["dtype"], t["ne"] + [1] * (4 - len(t["ne"])), t["offset"], t["nbytes"])
               for t in r["tensors"]]
        tc.assertEqual(got, [(x[0][:20],) + tuple(x[1:]) for x in oracle_tensors], path)
    return r


def _bad_case_test(c):
    def test(self):
        path = os.path.join(GGUF_DIR, "bad", c["case"] + ".gguf")
        verdict = c["tensorfs"]
        if verdict == "reject":
            assert_reject(self, path, pattern=REJECT_PATTERNS.get(c["case"]))
            return
        mp = self.tmpdir()
        r = run([TENSORFS, "mount", path, mp], timeout=30)
        if r.returncode != 0:
            self.assertFalse(is_mounted(mp))
            self.assertNotEqual(verdict, "accept", r.stderr)
            # a refusal must still be one clear line naming the file
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(os.path.basename(path), r.stderr)
            return
        m = Mount(self, path, mountpoint=mp)
        try:
            self.assertEqual(r.stderr, "")
            self.assertTrue(is_mounted(mp))
            load = c["ggml_load"]
            rd = check_tensors_read_back(self, m, path, load["tensors"] if load.get("ok") else None)
            # metadata: every key, and its value
            self.assertEqual(sorted(os.listdir(m.p("metadata"))), sorted(fname(k) for k, _, _ in rd["kv"]))
            for k, vt, v in rd["kv"]:
                p = m.p("metadata", fname(k))
                text = read(p)[:-1]
                self.assertEqual(xattr(p, "type"), gg.type_name(vt, v), k)
                if vt == gg.BOOL:
                    self.assertEqual(text, b"true" if v else b"false", k)
                elif vt == gg.STRING:
                    self.assertEqual(text, v, k)
                elif vt == gg.ARRAY and v[0] == gg.ARRAY:
                    self.assertEqual(json.loads(text), [x[1] for x in v[1]], k)
                elif vt == gg.ARRAY:
                    self.assertEqual(json.loads(text), v[1], k)
                else:
                    self.assertEqual(int(text), v, k)
            if c["case"] == "ok_bool_2":
                self.assertEqual(read(m.p("metadata", "b")), b"true\n")
        finally:
            m.unmount()
            if is_mounted(mp):
                subprocess.run(["umount", "-l", mp])
    test.__doc__ = "%s (%s): %s" % (c["case"], c["tensorfs"], c["note"])
    return test


# IndexStream's reads a document: under the sanitizers (harness.SANITIZED) 50, which take the
# lines and branches of the daemon that 200 take (gcov of a coverage build's daemon); 200
# were 12.5 of this module's 24 CPU-s there (test_index's unit test takes 50 there too)
SLICES = 50 if SANITIZED else 200


class IndexStream(TestCase):
    """index.json is generated piece by piece on each read (codec/model/index.c): 200 reads at
    random offsets and lengths (SLICES), each after the page cache of the file is dropped so
    that the daemon serves it, are slices of the document read whole; after an edit on a rw
    mount, the new document likewise."""

    def make(self):
        src = os.path.join(self.tmpdir(), "many.gguf")
        w = gg.GGUFWriter()
        for i in range(5000):
            kind = i % 4
            name = ("k.%04d" % i) if i % 9 else ("k\u00e9/%04d" % i)
            if kind == 0:
                w.add_kv(name, gg.UINT8, i & 255)
            elif kind == 1:
                w.add_kv(name, gg.STRING, "v%d" % i)
            elif kind == 2:
                w.add_kv(name, gg.FLOAT32, i / 3)
            else:
                w.add_kv(name, gg.ARRAY, (gg.INT32, [i, -i]))
        for i in range(300):
            w.add_tensor("t.%03d" % i, "F32", np.full(4, i, np.float32))
        w.write(src)
        return src

    def check_slices(self, path, rng):
        whole = read(path)
        self.assertEqual(os.stat(path).st_size, len(whole))
        fd = os.open(path, os.O_RDONLY)
        try:
            for k in range(SLICES):
                off = int(rng.integers(0, len(whole) + 16))
                n = int(rng.integers(0, 64 if k % 4 == 0 else 200000))
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                self.assertEqual(os.pread(fd, n, off), whole[off:off + n], "%d at %d" % (n, off))
        finally:
            os.close(fd)
        return json.loads(whole)

    def test_random_reads_are_slices_of_the_whole(self):
        src = self.make()
        rng = np.random.default_rng(7)
        with Mount(self, src) as m:
            ix = self.check_slices(m.p("index.json"), rng)
        self.assertEqual(len(ix["keys"]), 5000)
        self.assertEqual(len(ix["tensors"]), 300)
        self.assertEqual(ix["keys"][9]["name"], "k\u00e9/0009")
        self.assertEqual(ix["keys"][9]["file"], "k\u00e9%2F0009")
        with Mount(self, src, ["rw"]) as m:
            self.check_slices(m.p("index.json"), rng)
            os.unlink(m.p("metadata", "k.0001"))
            os.unlink(m.p("tensors", "t.000"))
            ix = self.check_slices(m.p("index.json"), rng)
            self.assertEqual(len(ix["keys"]), 4999)
            self.assertEqual(ix["keys"][1]["name"], "k.0002")
            self.assertEqual(ix["tensors"][0]["name"], "t.001")


class BadFiles(TestCase):
    """One test per case of gguf/bad/RESULTS.json."""


with open(os.path.join(GGUF_DIR, "bad", "RESULTS.json")) as _f:
    for _c in json.load(_f):
        setattr(BadFiles, "test_%s_%s" % (_c["tensorfs"], _c["case"]), _bad_case_test(_c))


# ==== llama.cpp's vocab files (the reference clone's models/) against ggml's reader ====

def _vocab_test(f):
    def test(self):
        path = os.path.join(VOCAB_DIR, f)
        if llamacpp.lib_dir() is None:
            self.skipTest("ggml's reader: %s" % llamacpp.missing_reason())
        exp = ggml_gguf(path)
        if isinstance(exp, str):
            self.fail(exp)
        rd = gg.read_gguf(path)
        full = {k.decode(): (vt, v) for k, vt, v in rd["kv"]}
        self.assertEqual(list(full), [k["key"] for k in exp["kv"]])
        with Mount(self, path) as m:
            self.assertEqual(sorted(os.listdir(m.p("metadata"))), sorted(fname(k["key"]) for k in exp["kv"]))
            self.assertEqual(os.listdir(m.p("tensors")), [])
            self.assertEqual(exp["tensors"], [])
            ix = json.loads(read(m.p("index.json")))
            # ggml reports the unpadded header size of a tensor-less file; tensorfs the
            # aligned start of the data section, as gguf-py and @huggingface/gguf do
            self.assertEqual((ix["version"], ix["alignment"], ix["data_offset"]),
                             (exp["version"], exp["alignment"],
                              gg.pad(exp["data_offset"], exp["alignment"])))
            for k in exp["kv"]:
                key = k["key"]
                p = m.p("metadata", fname(key))
                data = read(p)
                self.assertTrue(data.endswith(b"\n"), key)
                text = data[:-1]
                # ggml_gguf.py's type names are tensorfs's: uint32, string, array[int32], ...
                self.assertEqual(xattr(p, "type"), k["type"], key)
                if k["type"].startswith("array["):
                    et = k["type"][len("array["):-1].upper()
                    got = json.loads(text)
                    # ggml's values, and the Python reader's (ggml cuts a string at a NUL)
                    check_array(self, key, et, got, k["value"])
                    want = full[key][1][1]
                    if et == "STRING":
                        want = [s.decode("utf-8", "surrogateescape") for s in want]
                    check_array(self, key, et, got, want)
                else:
                    # floats bit for bit: ggml's raw bytes
                    bits = "%x" % int.from_bytes(bytes.fromhex(k["raw"]), "little") \
                        if k["type"] in ("float32", "float64") else None
                    MetaCheck().check_scalar(self, key, k["type"].upper(), text, k["value"], bits)
    return test


class Vocab(TestCase):
    """Every key of llama.cpp's vocab-only GGUFs (the reference clone's models/, set up by
    scripts/setup.sh) through the mount, against what ggml's own reader makes of them."""


if vocab_files():
    for _f in vocab_files():
        setattr(Vocab, "test_" + _f[:-5].replace("-", "_"), _vocab_test(_f))
else:
    def _skip(self):
        self.skipTest(vocab_missing())
    Vocab.test_vocab_files = _skip


# ==== tensorfs info ====

class Info(TestCase):
    # the text and JSON forms of `tensorfs info` are tested in test_info.py
    def test_info_bad_file(self):
        for case, pat in (("bad_version1", r"(?i)v1|version"), ("bad_type_43", r"type 43")):
            path = os.path.join(GGUF_DIR, "bad", case + ".gguf")
            r = run([TENSORFS, "info", path])
            self.assertNotEqual(r.returncode, 0)
            self.assertEqual(r.stdout, "")
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(case + ".gguf", lines[0])
            self.assertRegex(lines[0], pat)
        r = run([TENSORFS, "info", "/nonexistent/model.gguf"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("/nonexistent/model.gguf", r.stderr)


# ==== names that need escaping (a file written here) ====

LONG = "blk." + "x" * 290 + ".w%/"   # 300 bytes, an escape near the end
ESCAPE_NAMES = ["a/b", "100%", "..", ".", "x%2Fy", "%", "/lead", LONG, "n" * 255, "m" * 252]


class Escaping(TestCase):
    def make(self):
        d = self.tmpdir()
        path = os.path.join(d, "names.gguf")
        rng = np.random.default_rng(3)
        w = gg.GGUFWriter(alignment=64)
        w.add_kv("general.architecture", gg.STRING, "test")
        w.add_kv("general.alignment", gg.UINT32, 64)
        w.add_kv("key/with/slash", gg.UINT16, 7)
        w.add_kv("50%", gg.STRING, b"raw\xffbytes")
        w.add_kv("..", gg.INT64, -5)
        w.add_kv("k.f64", gg.FLOAT64, 0.1)
        w.add_kv("k.f32", gg.FLOAT32, 1e-5)
        w.add_kv("k.bool", gg.BOOL, True)
        w.add_kv("k.i8", gg.INT8, -3)
        w.add_kv("k.arr_str", gg.ARRAY, (gg.STRING, ["x", "y\"z", b"\xc3"]))
        w.add_kv("k.nested", gg.ARRAY, (gg.ARRAY, [(gg.INT8, [1, -2]), (gg.INT8, [])]))
        w.add_kv("x" * 300, gg.UINT8, 9)
        want = {}
        for i, name in enumerate(ESCAPE_NAMES):
            kind = ("F32", "F16", "Q8_0")[i % 3]
            x = rng.standard_normal((4, 64)).astype(np.float32)
            if kind == "F32":
                data, f32 = x, x
            elif kind == "F16":
                data = x.astype("<f2")
                f32 = data.astype(np.float32)
            else:
                data = gg.quantize_q8_0(x)
                f32 = gg.dequantize_q8_0(data).reshape(4, 64)
            w.add_tensor(name, kind, data, ne=[64, 4])
            want[name] = (kind, f32)
        # a bigger Q8_0 tensor: f32 reads across 128 KiB / 1 MiB request boundaries
        big = rng.standard_normal((40, 4096)).astype(np.float32)
        bq = gg.quantize_q8_0(big)
        w.add_tensor("big.q8", "Q8_0", bq, ne=[4096, 40])
        want["big.q8"] = ("Q8_0", gg.dequantize_q8_0(bq).reshape(40, 4096))
        w.write(path)
        return path, w, want

    def test_escaped_names(self):
        path, w, want = self.make()
        src = read(path)
        with Mount(self, path) as m:
            tens = set(os.listdir(m.p("tensors")))
            expect_files = {fname(n): n for n in want}
            self.assertEqual(tens, set(expect_files))
            # documented spellings
            for n, f in (("a/b", "a%2Fb"), ("100%", "100%25"), ("..", "%2E%2E"), (".", "%2E"),
                         ("x%2Fy", "x%252Fy"), ("%", "%25"), ("/lead", "%2Flead"), ("n" * 255, "n" * 255)):
                self.assertIn(f, tens, n)
            long_f = fname(LONG)
            self.assertEqual(len(os.fsencode(long_f)), 200 + 2 + 16)
            self.assertTrue(long_f.startswith("blk.xxx") and "%~" in long_f, long_f)
            self.assertEqual(set(os.listdir(m.p("f32"))), set(expect_files))
            self.assertEqual(set(os.listdir(m.p("npy"))), {os.fsdecode(gg.npy_name(n)) for n in want})
            ix = json.loads(read(m.p("index.json")))
            self.assertEqual({t["name"]: t["file"] for t in ix["tensors"]}, {n: fname(n) for n in want})
            for t in w.tensors:
                n = t["name"]
                kind, f32 = want[n]
                fn = fname(n)
                raw = src[t["abs_offset"]:t["abs_offset"] + t["nbytes"]]
                self.assertEqual(read(m.p("tensors", fn)), raw, n)
                self.assertEqual(int(xattr(m.p("tensors", fn), "offset")), t["abs_offset"], n)
                self.assertEqual(xattr(m.p("tensors", fn), "dtype"), kind, n)
                self.assertEqual(read(m.p("f32", fn)), f32.astype("<f4").tobytes(), n)
                a = np.load(m.p("npy", os.fsdecode(gg.npy_name(n))), mmap_mode="r")
                self.assertEqual(a.shape, f32.shape, n)
                if kind == "Q8_0":
                    self.assertEqual(a.dtype, np.dtype("<f4"))
                    self.assertEqual(np.asarray(a).tobytes(), f32.astype("<f4").tobytes(), n)
                else:
                    self.assertEqual(np.asarray(a).tobytes(), raw, n)
            # odd reads of the big dequantized tensor across request boundaries
            p = m.p("f32", "big.q8")
            whole = want["big.q8"][1].astype("<f4").tobytes()
            fd = os.open(p, os.O_RDONLY)
            try:
                for off, n in ((131071, 3), (131069, 131077), (1048575, 2), (1048573, 1048583),
                               (3, len(whole)), (len(whole) - 5, 9), (655361, 262147)):
                    self.assertEqual(os.pread(fd, n, off), whole[off:off + n], (off, n))
            finally:
                os.close(fd)
            # metadata keys needing escapes, and values of every type
            meta = set(os.listdir(m.p("metadata")))
            self.assertEqual(meta, {fname(k) for k, _, _ in w.kv})
            self.assertEqual(read(m.p("metadata", "key%2Fwith%2Fslash")), b"7\n")
            self.assertEqual(read(m.p("metadata", "50%25")), b"raw\xffbytes\n")
            self.assertEqual(read(m.p("metadata", "%2E%2E")), b"-5\n")
            self.assertEqual(f64_bits(read(m.p("metadata", "k.f64"))), f64_bits(0.1))
            self.assertEqual(f32_bits(read(m.p("metadata", "k.f32"))), f32_bits(1e-5))
            self.assertEqual(read(m.p("metadata", "k.bool")), b"true\n")
            self.assertEqual(read(m.p("metadata", "k.i8")), b"-3\n")
            self.assertEqual(json.loads(read(m.p("metadata", "k.arr_str"))), ["x", "y\"z", "\udcc3"])
            self.assertEqual(json.loads(read(m.p("metadata", "k.nested"))), [[1, -2], []])
            self.assertEqual(xattr(m.p("metadata", "k.nested"), "type"), "array[array[int8]]")
            self.assertEqual(read(m.p("metadata", fname("x" * 300))), b"9\n")


if __name__ == "__main__":
    main()
