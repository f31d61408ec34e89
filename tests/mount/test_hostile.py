#!/usr/bin/python3
"""Hostile inputs through the mount: key and tensor names with '/', '..', '.', '%', NUL and
1 MiB of bytes; a GGUF with 10^6 keys; an array declared with 2^40 elements; a tensor whose
offset is past the end; a sharded set or an Ollama manifest naming files outside the model.

Each file is refused at mount with one line naming it, or served safely: every entry of the
mount is a proper file name (no '/', not '.' or '..', at most 255 bytes, encoded as the
"Names" section of docs/the-mount.md says), resolves inside the mountpoint, and `ls -R` finds exactly the
expected entries; the daemon's peak RSS stays within 64 MiB plus the header size.
"""
import json
import os
import shutil
import struct
import subprocess
import time
import unittest

import numpy as np

import ggufgen as gg
from harness import TENSORFS, Mount, TestCase, is_mounted, main, quick, run

MiB = 1 << 20


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def name(b):
    """The file name (str) the mount gives a key or tensor name."""
    return os.fsdecode(gg.encode_name(b))


# The sanitizer build's daemon (scripts/test.sh sets ASAN_OPTIONS for it) keeps freed memory
# in ASan's quarantine and adds its shadow: its RSS says nothing about tensorfs' own.
SANITIZED = "ASAN_OPTIONS" in os.environ


def daemon_hwm(m):
    """Peak resident set of the daemon behind m, in bytes (VmHWM)."""
    pid = int(os.getxattr(m.path, "user.tensorfs.pid"))
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM for pid %d" % pid)


def reset_hwm(m):
    """Resets the daemon's peak RSS to its RSS now (/proc/PID/clear_refs, Linux >= 4.0);
    returns that RSS in bytes."""
    pid = int(os.getxattr(m.path, "user.tensorfs.pid"))
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for pid %d" % pid)


def refused_or_served(tc, source, check, options=None):
    """Mounts source.  Refused: one line on stderr naming the file, non-zero exit, nothing
    mounted; returns ("refused", line).  Served: check(m) runs on the mount (which is always
    unmounted afterwards); returns ("served", None)."""
    mp = tc.tmpdir()
    r = run([TENSORFS, "mount", source, mp] + (["-o", options] if options else []), timeout=120)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        tc.assertEqual(len(lines), 1, "%s: stderr %r" % (source, r.stderr))
        tc.assertIn(os.path.basename(source.rstrip("/")), lines[0])
        tc.assertFalse(is_mounted(mp))
        tc.assertEqual(os.listdir(mp), [])
        print("# refused: " + lines[0][:300], flush=True)
        return "refused", lines[0]
    tc.assertTrue(is_mounted(mp), "mount exited 0 but nothing is mounted")
    m = Mount(tc, source, mountpoint=mp)
    try:
        tc.assertEqual(r.stderr.strip(), "", "unexpected stderr from mount")
        check(m)
        r = m.unmount()
        tc.assertEqual(r.returncode, 0, r.stderr)
    finally:
        m.__exit__(None, None, None)
    return "served", None


def check_contained(tc, m, expected):
    """Every entry under m is a proper name resolving inside m, and `ls -R` / os.walk find
    exactly `expected` ({relative path, ...}) below the top-level directories."""
    root = os.path.realpath(m.path)
    found = set()
    for dp, dn, fn in os.walk(m.path):
        for n in dn + fn:
            tc.assertNotIn(n, (".", ".."))
            tc.assertNotIn("/", n)
            tc.assertNotIn("\0", n)
            tc.assertLessEqual(len(os.fsencode(n)), 255, n[:80])
            p = os.path.join(dp, n)
            tc.assertTrue(os.path.realpath(p).startswith(root + "/"), p)
            found.add(os.path.relpath(p, m.path))
    # newer mounts also show the whole model as one root file: allowed, not required
    expected = set(expected) | ({"model.gguf", "model.safetensors"} & found)
    tc.assertEqual(found, expected)
    r = subprocess.run(["ls", "-RAb", m.path], capture_output=True, timeout=120)
    tc.assertEqual(r.returncode, 0, r.stderr)
    # ls -R: a "dir:" line per directory, then its entries; blank lines between (names with
    # a newline are escaped by -b, so one line each)
    listed = [l for l in r.stdout.splitlines() if l and not l.endswith(b":")]
    tc.assertEqual(len(listed), len(expected))


def expected_tree(keys, tensors, has_f32=True, extra=()):
    """The entries of a GGUF mount with keys and tensors (names as bytes)."""
    e = {"index.json", "metadata", "tensors", "f32", "npy"} | set(extra)
    e |= {"metadata/" + name(k) for k in keys}
    e |= {"tensors/" + name(t) for t in tensors}
    if has_f32:
        e |= {"f32/" + name(t) for t in tensors}
    e |= {"npy/" + os.fsdecode(gg.npy_name(t)) for t in tensors}
    return e


HOSTILE = [b"a/b", b"../../../etc/passwd", b"..", b".", b"%2F", b"x/../../y", b"/abs",
           b"%", b"-rf", b"new\nline", b"a" * 255, b"b" * 256,
           b"c/" * 200, b"d" * 60000]


# ==== names ====

class Names(TestCase):
    def test_gguf_names_served_encoded(self):
        """Keys and tensors named '/', '..', '.', '%', a path, 255-60000 bytes: served under
        their encoded names, each readable, nothing outside the mountpoint."""
        d = self.tmpdir()
        src = os.path.join(d, "names.gguf")
        w = gg.GGUFWriter()
        for i, k in enumerate(HOSTILE):
            w.add_kv(k, gg.STRING, b"value %d" % i)
        for i, t in enumerate(HOSTILE):
            w.add_tensor(t, "F32", np.full(8, i, np.float32))
        w.write(src)
        header = w.data_offset

        def check(m):
            # encoded as docs/the-mount.md says
            self.assertEqual(name(b"a/b"), "a%2Fb")
            self.assertEqual(name(b".."), "%2E%2E")
            self.assertEqual(name(b"."), "%2E")
            self.assertEqual(name(b"../../../etc/passwd"), "..%2F..%2F..%2Fetc%2Fpasswd")
            check_contained(self, m, expected_tree(HOSTILE, HOSTILE))
            for i, k in enumerate(HOSTILE):
                self.assertEqual(read(m.p("metadata", name(k))), b"value %d\n" % i, k[:40])
                self.assertEqual(read(m.p("tensors", name(k))), np.full(8, i, np.float32).tobytes())
            ix = json.loads(read(m.p("index.json")))
            files = {(bytes.fromhex(k["name_utf8_hex"]) if "name_utf8_hex" in k
                      else k["name"].encode("utf-8", "surrogateescape")): k["file"]
                     for k in ix["keys"]}
            for k in HOSTILE:
                self.assertEqual(os.fsencode(files[k]), gg.encode_name(k), k[:40])
            # the names that look like paths lead nowhere else
            self.assertFalse(os.path.exists(m.p("metadata", "..", "..", "etc", "passwd")))
            self.assertEqual(os.path.realpath(m.p("metadata", name(b".."))),
                             os.path.join(os.path.realpath(m.path), "metadata", "%2E%2E"))
            hwm = daemon_hwm(m)
            print("# daemon VmHWM %.1f MiB" % (hwm / MiB), flush=True)
            self.assertLessEqual(hwm, 64 * MiB + header)
        how, _ = refused_or_served(self, src, check)
        self.assertEqual(how, "served")

    def test_non_utf8_names(self):
        d = self.tmpdir()
        src = os.path.join(d, "bytes.gguf")
        w = gg.GGUFWriter()
        w.add_kv(b"\xff\xfe key", gg.STRING, "v")
        w.add_tensor(b"\xfe tensor", "F32", np.ones(8, np.float32))
        w.write(src)

        def check(m):
            check_contained(self, m, expected_tree([b"\xff\xfe key"], [b"\xfe tensor"]))
            self.assertEqual(read(m.p("metadata", name(b"\xff\xfe key"))), b"v\n")
            ix = json.loads(read(m.p("index.json")))
            self.assertEqual([k["file"] for k in ix["keys"]], [name(b"\xff\xfe key")])
        self.assertEqual(refused_or_served(self, src, check)[0], "served")
        r = run([TENSORFS, "info", "--json", src])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_safetensors_names_served_encoded(self):
        d = self.tmpdir()
        src = os.path.join(d, "names.safetensors")
        names = ["a/b", "../../x", "..", ".", "/etc/passwd", "%41"]
        header = {"__metadata__": {"../evil": "1", "a/b": "2", "..": "3"}}
        body = b""
        for i, n in enumerate(names):
            header[n] = {"dtype": "F32", "shape": [2], "data_offsets": [len(body), len(body) + 8]}
            body += np.full(2, i, np.float32).tobytes()
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        with open(src, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + body)

        def check(m):
            check_contained(self, m, expected_tree([k.encode() for k in header["__metadata__"]],
                                                   [n.encode() for n in names]))
            for i, n in enumerate(names):
                self.assertEqual(read(m.p("tensors", name(n))), np.full(2, i, np.float32).tobytes())
            self.assertEqual(read(m.p("metadata", "..%2Fevil")), b"1\n")
        self.assertEqual(refused_or_served(self, src, check)[0], "served")

    def test_rw_created_names_stay_inside(self):
        """New keys and tensors created through a rw mount with encoded names that decode
        to paths: they are names in the model, nothing is created outside."""
        d = self.tmpdir()
        src = os.path.join(d, "m.gguf")
        w = gg.GGUFWriter()
        w.add_kv("general.architecture", gg.STRING, "llama")
        w.add_tensor("t", "F32", np.ones(4, np.float32))
        w.write(src)
        outside = set(os.listdir(d))
        with Mount(self, src, ["rw", "staging=" + os.path.join(d, "staging")]) as m:
            # (not "..%2F...": a name starting with "." is an editor's scratch file)
            with open(m.p("metadata", "a%2F..%2F..%2Fevil"), "w") as f:
                f.write("x")
            with open(m.p("tensors", "%2E%2E"), "wb") as f:
                f.write(np.zeros(4, np.float32).tobytes())
            for bad in ("a/b", "..", "."):
                with self.assertRaises(OSError):
                    open(m.p("metadata", bad), "w").close()
            self.assertEqual(m.unmount().returncode, 0)
        self.assertEqual(set(os.listdir(d)) - {"staging"}, outside)
        rd = gg.read_gguf(src)
        self.assertIn(b"a/../../evil", [k for k, _, _ in rd["kv"]])
        self.assertIn(b"..", [t["name"] for t in rd["tensors"]])


# ==== names the reader must refuse (or serve safely) ====

class Refused(TestCase):
    def gguf(self, fn, keys=(), tensors=()):
        d = self.tmpdir()
        src = os.path.join(d, fn)
        w = gg.GGUFWriter()
        for k, t, v in keys:
            w.add_kv(k, t, v)
        for n, a in tensors:
            w.add_tensor(n, "F32", a)
        w.write(src)
        return src, w

    def served_safely(self, keys, tensors):
        def check(m):
            check_contained(self, m, expected_tree(keys, tensors))
        return check

    def test_1mib_key_name(self):
        k = b"k" * MiB
        src, _ = self.gguf("longkey.gguf", [(k, gg.UINT8, 1)])
        how, line = refused_or_served(self, src, self.served_safely([k], []))
        if how == "refused":
            self.assertRegex(line, "key")

    def test_1mib_tensor_name(self):
        t = b"t/" * (MiB // 2)
        src, _ = self.gguf("longtensor.gguf", [], [(t, np.ones(4, np.float32))])
        how, line = refused_or_served(self, src, self.served_safely([], [t]))
        if how == "refused":
            self.assertRegex(line, "tensor name")

    def test_nul_in_key_name(self):
        k = b"general.name\0../../etc/passwd"
        src, _ = self.gguf("nul.gguf", [(k, gg.STRING, "x")])
        how, line = refused_or_served(self, src, self.served_safely([k.split(b"\0")[0]], []))
        if how == "refused":
            self.assertRegex(line, "NUL")

    def test_nul_in_tensor_name(self):
        t = b"a\0b"
        src, _ = self.gguf("nult.gguf", [], [(t, np.ones(4, np.float32))])
        how, line = refused_or_served(self, src, self.served_safely([], [b"a"]))
        if how == "refused":
            self.assertRegex(line, "NUL")

    def test_array_of_2_40_elements(self):
        """An array declared with 2^40 elements in a small file: refused, one line."""
        for et in (gg.UINT8, gg.STRING, gg.ARRAY):
            d = self.tmpdir()
            src = os.path.join(d, "bigarray.gguf")
            with open(src, "wb") as f:
                f.write(b"GGUF" + struct.pack("<IqQ", 3, 0, 1))
                f.write(struct.pack("<Q", 4) + b"arr!" + struct.pack("<IIQ", gg.ARRAY, et, 1 << 40))
                f.write(b"\0" * 4096)
            how, line = refused_or_served(self, src, lambda m: None)
            self.assertEqual(how, "refused")
            self.assertIn("arr!", line)

    def test_tensor_dims_of_2_40_elements(self):
        d = self.tmpdir()
        src = os.path.join(d, "bigtensor.gguf")
        w = gg.GGUFWriter()
        w.add_tensor("huge", "F32", np.ones(4, np.float32))
        head = bytearray(w.layout())
        i = head.index(b"huge") + 4
        struct.pack_into("<Iq", head, i, 1, 1 << 40)   # 1 dim of 2^40 elements
        with open(src, "wb") as f:
            f.write(bytes(head) + b"\0" * 32)
        how, line = refused_or_served(self, src, lambda m: None)
        self.assertEqual(how, "refused")
        self.assertIn("huge", line)

    @quick
    def test_tensor_offset_past_the_end(self):
        for off in (4096, 1 << 62, (1 << 64) - 32):
            d = self.tmpdir()
            src = os.path.join(d, "pastend.gguf")
            w = gg.GGUFWriter()
            w.add_tensor("far", "F32", np.ones(8, np.float32))
            head = bytearray(w.layout())
            i = head.index(b"far") + 3 + 4 + 8 + 4   # n_dims, ne[0], type
            struct.pack_into("<Q", head, i, off)
            with open(src, "wb") as f:
                f.write(bytes(head) + np.ones(8, np.float32).tobytes())
            how, line = refused_or_served(self, src, lambda m: None)
            self.assertEqual(how, "refused", off)
            self.assertIn("far", line)

    def test_sharded_index_naming_files_outside(self):
        """A sharded set's index naming a shard outside its directory ("../x", an absolute
        path): refused, or served without reading or writing outside."""
        d = self.tmpdir()
        outside = os.path.join(d, "outside.safetensors")
        h = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
        h += b" " * (-len(h) % 8)
        blob = struct.pack("<Q", len(h)) + h + np.ones(2, np.float32).tobytes()
        with open(outside, "wb") as f:
            f.write(blob)
        for target in ("../outside.safetensors", outside, "sub/../../outside.safetensors"):
            s = os.path.join(d, "set")
            shutil.rmtree(s, ignore_errors=True)
            os.mkdir(s)
            with open(os.path.join(s, "model-00001-of-00001.safetensors"), "wb") as f:
                f.write(blob.replace(b'"w"', b'"v"'))
            with open(os.path.join(s, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {}, "weight_map": {"v": "model-00001-of-00001.safetensors",
                                                          "w": target}}, f)
            before = read(outside)

            def check(m):
                # served: then a rw repack must not write outside the set's directory
                pass
            how, line = refused_or_served(self, os.path.join(s, "model.safetensors.index.json"), check)
            print("# weight_map -> %s: %s" % (target, how), flush=True)
            if how == "served":
                with Mount(self, s, ["rw", "staging=" + os.path.join(d, "st")]) as m:
                    with open(m.p("tensors", "w"), "wb") as f:
                        f.write(np.zeros(2, np.float32).tobytes())
                    m.unmount()
            self.assertEqual(read(outside), before, "a file outside the set was written")
            self.assertEqual(sorted(os.listdir(d)), sorted({"outside.safetensors", "set"} |
                                                          ({"st"} if os.path.exists(os.path.join(d, "st")) else set())))

    def test_ollama_digest_with_a_path(self):
        """An Ollama manifest whose layer digest is a path: refused with one line."""
        d = self.tmpdir()
        root = os.path.join(d, "models")
        os.makedirs(os.path.join(root, "blobs"))
        with open(os.path.join(d, "secret"), "w") as f:
            f.write("secret")
        man = {"schemaVersion": 2,
               "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
               "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                          "digest": "sha256:../../secret", "size": 6},
               "layers": [{"mediaType": "application/vnd.ollama.image.template",
                           "digest": "sha256:../../../secret", "size": 6}]}
        p = os.path.join(root, "manifests/registry.ollama.ai/library/evil/latest")
        os.makedirs(os.path.dirname(p))
        with open(p, "w") as f:
            json.dump(man, f)
        how, line = refused_or_served(self, p, lambda m: None)
        self.assertEqual(how, "refused")


# ==== 10^6 keys ====

N_KEYS = 10 ** 6


class ManyKeys(TestCase):
    """A GGUF of 10^6 uint8 keys (21 MiB of header, no tensors)."""

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.dir = tempfile.mkdtemp(prefix="tfs-test-")
        cls.src = os.path.join(cls.dir, "keys.gguf")
        rec = struct.Struct("<Q9sIB")
        buf = bytearray(b"GGUF" + struct.pack("<IqQ", 3, 0, N_KEYS))
        for i in range(N_KEYS):
            buf += rec.pack(9, b"k.%07d" % i, gg.UINT8, i & 255)
        with open(cls.src, "wb") as f:
            f.write(buf)
        cls.header = len(buf)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, True)

    def list_and_read(self, m):
        r = run(["sh", "-c", 'ls "$1" | wc -l', "sh", m.p("metadata")], timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(int(r.stdout), N_KEYS)
        for i in (0, 1, 4321, N_KEYS - 1):
            self.assertEqual(read(m.p("metadata", "k.%07d" % i)), b"%d\n" % (i & 255))
        self.assertFalse(os.path.exists(m.p("metadata", "k.%07d" % N_KEYS)))

    def test_a_million_keys_served(self):
        """Refused with one line, or served: `ls metadata | wc -l` is 10^6, values right.
        (The daemon's memory after the mount: the skipped test below; index.json: the one
        after it.)"""
        def check(m):
            self.list_and_read(m)
            print("# 10^6 keys: daemon VmHWM %.0f MiB after ls and reads (header %.0f MiB; "
                  "bound %.0f MiB)" % (daemon_hwm(m) / MiB, self.header / MiB,
                                       (64 * MiB + self.header) / MiB), flush=True)
        how, line = refused_or_served(self, self.src, check)
        print("# 10^6 keys: %s" % how, flush=True)

    @unittest.skipIf(SANITIZED, "RSS bound: checked in the normal build (ASan's quarantine "
                     "and shadow memory count in the sanitized daemon's RSS)")
    def test_a_million_keys_rss_after_mount(self):
        """The daemon's peak RSS after mounting, listing and reading a few keys stays within
        64 MiB + the header: a key has no node until it is looked up (fs/tree.c), and the
        codec keeps a key in 32 bytes plus its name, packed."""
        def check(m):
            self.list_and_read(m)
            self.assertLessEqual(daemon_hwm(m), 64 * MiB + self.header)
        refused_or_served(self, self.src, check)

    @unittest.skipIf(SANITIZED, "RSS bound: checked in the normal build (ASan's quarantine "
                     "and shadow memory count in the sanitized daemon's RSS)")
    def test_a_million_keys_rss_index_json(self):
        """index.json of 10^6 keys (76 MB) read whole: the right document, and the daemon's
        peak RSS stays within 64 MiB + the header (it was ~1.2 GiB: the whole text built as
        one jansson document and cached); serving it adds at most 16 MiB."""
        def check(m):
            self.assertLessEqual(daemon_hwm(m), 64 * MiB + self.header)  # the mount's peak
            base = reset_hwm(m)
            t0 = time.monotonic()
            size = os.stat(m.p("index.json")).st_size
            t1 = time.monotonic()
            ix = json.loads(read(m.p("index.json")))
            t2 = time.monotonic()
            grew = daemon_hwm(m) - base
            print("# 10^6 keys: index.json %.0f MB, first stat %.1f s, read %.1f s, daemon peak "
                  "RSS %.0f MiB over the %.0f MiB after mount (bound %.0f MiB)"
                  % (size / 1e6, t1 - t0, t2 - t1, grew / MiB, base / MiB,
                     (64 * MiB + self.header) / MiB), flush=True)
            self.assertEqual(len(ix["keys"]), N_KEYS)
            self.assertEqual(ix["keys"][N_KEYS - 1]["file"], "k.%07d" % (N_KEYS - 1))
            self.assertEqual(ix["keys"][4321], {"name": "k.0004321", "type": "uint8",
                                                "file": "k.0004321"})
            self.assertLessEqual(grew, 16 * MiB)
            self.assertLessEqual(daemon_hwm(m), 64 * MiB + self.header)
        refused_or_served(self, self.src, check)

if __name__ == "__main__":
    main()
