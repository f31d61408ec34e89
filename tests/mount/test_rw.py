#!/usr/bin/python3
"""Writable mounts (-o rw): every kind of change, read back through the mount at once,
then after `tensorfs unmount` through a fresh read-only mount and `tensorfs info --json`;
the staging journal across kill -9 of the daemon and of the repack; a repack onto a full
file system; a GGUF written by tensorfs read by an independent reader (@huggingface/gguf).

Formats: a GGUF file (tests/data/gguf/mixed_flat.gguf), a single safetensors file and a
sharded set built here with numpy, and an Ollama store (tests/data/ollama/models).
"""
import errno
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import numpy as np

from stgen import st_raw
from harness import (TENSORFS, TESTDATA, Mount, TestCase, env_set, is_mounted, kill_daemon, main,
                     quick, run, sha256)

GGUF_SRC = os.path.join(TESTDATA, "gguf", "mixed_flat.gguf")
OLLAMA_SRC = os.path.join(TESTDATA, "ollama", "models")
MANIFEST = "manifests/registry.ollama.ai/library/oracle-gguf/latest"

TEMPLATE = ("{%- for message in messages %}\n"
            "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
            "{%- endfor %}\n"
            "{%- if add_generation_prompt %}<|assistant|>{% endif %}\n")


# ==== helpers ====

def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def rv(path):
    """A metadata value as the mount shows it: the text and one newline."""
    text = read(path)
    assert text.endswith("\n"), "%s: %r does not end with a newline" % (path, text)
    return text[:-1]


def write(path, data, mode="w"):
    """Writes a whole file through the mount; errors of close() propagate."""
    with open(path, mode) as f:
        f.write(data)


HF_READ_JS = """
import { gguf } from "@huggingface/gguf";
const r = await gguf(process.argv[2], { allowLocalFile: true, typedMetadata: true });
const enc = (v) => typeof v === "bigint" ? {big: v.toString()}
  : typeof v === "number" && !Number.isFinite(v) ? {nonfinite: String(v)}
  : typeof v === "number" && Object.is(v, -0) ? {nonfinite: "-0"}
  : Array.isArray(v) ? v.map(enc) : v;
const meta = {};
for (const [k, e] of Object.entries(r.typedMetadata)) {
  if (k === "version" || k === "tensor_count" || k === "kv_count") continue;
  meta[k] = { type: e.type, subType: e.subType, value: enc(e.value) };
}
const tensors = r.tensorInfos.map((t) => ({ name: t.name, dtype: t.dtype,
  shape: t.shape.map(String), offset: String(t.offset) }));
console.log(JSON.stringify({ meta, tensors, tensorDataOffset: String(r.tensorDataOffset) }));
"""


def hf_gguf(tc, path):
    """The GGUF at path as @huggingface/gguf (npm) reads it: {meta: {key: {type, subType,
    value}}, tensors: [{name, dtype, shape, offset}], tensorDataOffset}.  Installs the
    package into $TFS_NPM_CACHE when missing; skips the test without npm."""
    if not shutil.which("npm") or not shutil.which("node"):
        tc.skipTest("npm/node not installed")
    cache = os.environ.get("TFS_NPM_CACHE") or os.path.join(tempfile.gettempdir(),
                                                             "tfs-npm-gguf")
    mod = os.path.join(cache, "node_modules", "@huggingface", "gguf")
    if not os.path.isdir(mod):
        try:
            r = run(["npm", "install", "--no-audit", "--no-fund", "--prefix", cache,
                     "@huggingface/gguf"], timeout=180)
        except subprocess.TimeoutExpired:
            tc.skipTest("npm install @huggingface/gguf timed out")
        if r.returncode != 0 or not os.path.isdir(mod):
            tc.skipTest("npm install @huggingface/gguf failed: " +
                        (r.stderr.strip().splitlines() or ["?"])[-1])
    script = os.path.join(cache, "tfs-read-gguf.mjs")  # beside node_modules: resolvable
    with open(script, "w") as f:
        f.write(HF_READ_JS)
    r = run(["node", script, path], cwd=cache, timeout=60)
    tc.assertEqual(r.returncode, 0, "@huggingface/gguf on %s: %s" % (path, r.stderr))
    return json.loads(r.stdout)


def info_json(source, env=None):
    r = run([TENSORFS, "info", "--json", source], env=env)
    if r.returncode != 0:
        raise AssertionError("tensorfs info failed: " + r.stderr)
    return json.loads(r.stdout)


def unmount_ok(tc, m):
    """tensorfs unmount; asserts it succeeded and returns its stderr."""
    r = m.unmount()
    tc.assertIsNotNone(r, "the mount was gone before tensorfs unmount")
    tc.assertEqual(r.returncode, 0, "tensorfs unmount failed: " + r.stderr)
    return r.stderr


def tensor_bytes_by_info(path, info):
    """{name: raw bytes} of every tensor of a single-file model, read from the file itself."""
    out = {}
    with open(path, "rb") as f:
        for t in info["tensors"]:
            f.seek(t["offset"])
            out[t["name"]] = f.read(t["nbytes"])
    return out


def kill9_daemon(tc, m):
    """kill -9 of the daemon behind mount m, then the dead mount is taken down."""
    status = os.getxattr(m.path, "user.tensorfs.status").decode()
    kill_daemon(m.path)
    tc.assertFalse(is_mounted(m.path))
    try:
        os.unlink(status)
    except OSError:
        pass


# ---- writing test models ----

GGUF_STR, GGUF_U32, GGUF_F32 = 8, 4, 6


def gguf_header(kvs, tensors, alignment=32):
    """The header (padded) of the file gguf_bytes makes; the tensor data follows."""
    return gguf_bytes(kvs, tensors, alignment, header_only=True)


def gguf_bytes(kvs, tensors, alignment=32, header_only=False):
    """A GGUF v3 file: kvs [(key, type, value)] (string/uint32/float32), tensors
    [(name, ggml type, numpy array)] (shape in numpy order)."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs) + 1))
    out += s("general.alignment") + struct.pack("<II", GGUF_U32, alignment)
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t)
        out += s(v) if t == GGUF_STR else struct.pack("<I" if t == GGUF_U32 else "<f", v)
    off = 0
    datas = []
    for name, gtype, arr in tensors:
        out += s(name) + struct.pack("<I", arr.ndim)
        for d in reversed(arr.shape):
            out += struct.pack("<Q", d)
        out += struct.pack("<IQ", gtype, off)
        n = arr.nbytes
        datas.append(None if header_only else arr.tobytes())
        off += n + (-n % alignment)
    out += b"\0" * (-len(out) % alignment)
    if header_only:
        return bytes(out)
    for raw in datas:
        out += raw + b"\0" * (-len(raw) % alignment)
    return bytes(out)


ST_DTYPES = {"float32": "F32", "float16": "F16", "int32": "I32", "uint8": "U8", "int8": "I8"}


def st_bytes(tensors, metadata=None):
    """A safetensors file: tensors [(name, numpy array)] (the header with json's default
    separators: readers take any JSON)."""
    return st_raw([(n, ST_DTYPES[str(a.dtype)], a.shape, a.tobytes()) for n, a in tensors],
                  metadata, compact=False)


def st_parse(path):
    """An independent safetensors reader: (metadata, {name: (dtype, shape, bytes)})."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None)
    body = data[8 + n:]
    out = {}
    end = 0
    for name, t in header.items():
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], body[a:b])
        end = max(end, b)
    assert end == len(body), "trailing bytes in %s" % path
    return meta, out


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


# ==== GGUF ====

class GGUF(TestCase):
    def setUp(self):
        self.dir = self.tmpdir()
        self.src = os.path.join(self.dir, "model.gguf")
        shutil.copyfile(GGUF_SRC, self.src)
        self.before = info_json(self.src)
        self.before_bytes = tensor_bytes_by_info(self.src, self.before)

    def check_untouched(self, path, names):
        """The named tensors of the file at path hold the original bytes exactly."""
        after = info_json(path)
        now = tensor_bytes_by_info(path, after)
        for name in names:
            self.assertEqual(now[name], self.before_bytes[name], "tensor %s changed" % name)

    def test_every_change(self):
        new_norm = np.arange(7, dtype=np.float32) * np.float32(-0.5)
        raw5 = b"\x01\x02\x03\x04\x05"
        f16 = (np.arange(32, dtype=np.float16) / 8).astype(np.float16).reshape(4, 8)
        tpl = os.path.join(self.dir, "template.jinja")
        write(tpl, TEMPLATE)
        with Mount(self, self.src, ["rw"]) as m:
            md, tn = m.p("metadata"), m.p("tensors")
            # a value of an existing key, parsed with its type; a new key, a string
            write(os.path.join(md, "test.u32"), "7\n")
            self.assertEqual(rv(os.path.join(md, "test.u32")), "7")
            self.assertEqual(os.getxattr(os.path.join(md, "test.u32"), "user.tensorfs.type"),
                             b"uint32")
            subprocess.run("printf 'My model' > %s/general.name" % md, shell=True, check=True)
            self.assertEqual(rv(os.path.join(md, "general.name")), "My model")
            self.assertEqual(os.getxattr(os.path.join(md, "general.name"), "user.tensorfs.type"),
                             b"string")
            write(os.path.join(md, "test.arr_i32"), "[1, -2, 3]")
            self.assertEqual(rv(os.path.join(md, "test.arr_i32")), "[1, -2, 3]")
            # cp of a file: the template (only one trailing newline is dropped)
            self.assertEqual(run(["cp", tpl, os.path.join(md, "tokenizer.chat_template")]).returncode, 0)
            self.assertEqual(rv(os.path.join(md, "tokenizer.chat_template")), TEMPLATE[:-1])
            # a typed new key
            k = os.path.join(md, "my.key")
            subprocess.run(["touch", k], check=True)
            subprocess.run(["setfattr", "-n", "user.tensorfs.type", "-v", "uint32", k], check=True)
            self.assertEqual(rv(k), "0")
            subprocess.run("echo 7 > %s" % k, shell=True, check=True)
            self.assertEqual(rv(k), "7")
            self.assertEqual(os.getxattr(k, "user.tensorfs.type"), b"uint32")
            # rm of a key
            os.unlink(os.path.join(md, "test.str"))
            self.assertNotIn("test.str", os.listdir(md))
            self.assertFalse(os.path.exists(os.path.join(md, "test.str")))
            # invalid values: close fails with EINVAL, the old value stays
            for key, text, old in (("test.u8", "300", "255"), ("test.bool_true", "maybe", "true"),
                                   ("test.arr_u8", "[1, 2", "[0, 1, 255]")):
                with self.assertRaises(OSError) as cm:
                    write(os.path.join(md, key), text)
                self.assertEqual(cm.exception.errno, errno.EINVAL, key)
                self.assertEqual(rv(os.path.join(md, key)), old)
            # new bytes for a tensor (a vector may change length: 7 -> 7 floats, new values)
            nb = os.path.join(self.dir, "new_norm.bin")
            write_file(nb, new_norm.tobytes())
            self.assertEqual(run(["cp", nb, os.path.join(tn, "t.vec7_f32")]).returncode, 0)
            self.assertEqual(read(os.path.join(tn, "t.vec7_f32"), "rb"), new_norm.tobytes())
            self.assertEqual(np.frombuffer(read(m.p("f32", "t.vec7_f32"), "rb"), "<f4").tolist(),
                             new_norm.tolist())
            # mv of a tensor: all its views follow
            os.rename(os.path.join(tn, "t.f32"), os.path.join(tn, "t.moved"))
            self.assertFalse(os.path.exists(os.path.join(tn, "t.f32")))
            self.assertEqual(read(os.path.join(tn, "t.moved"), "rb"), self.before_bytes["t.f32"])
            self.assertTrue(os.path.exists(m.p("f32", "t.moved")))
            self.assertTrue(os.path.exists(m.p("npy", "t.moved.npy")))
            # rm of a tensor
            os.unlink(os.path.join(tn, "t.q4_0"))
            self.assertFalse(os.path.exists(m.p("f32", "t.q4_0")))
            self.assertNotIn("t.q4_0", os.listdir(tn))
            # new tensors: typed by xattrs, or F32 / I8 by default
            t = os.path.join(tn, "new.f16")
            subprocess.run(["touch", t], check=True)
            os.setxattr(t, "user.tensorfs.dtype", b"F16")
            os.setxattr(t, "user.tensorfs.shape", b"4,8")
            write(t, f16.tobytes(), "wb")
            self.assertEqual(os.getxattr(t, "user.tensorfs.dtype"), b"F16")
            self.assertEqual(os.getxattr(t, "user.tensorfs.shape"), b"4,8")
            self.assertEqual(np.frombuffer(read(m.p("f32", "new.f16"), "rb"), "<f4").tolist(),
                             f16.astype(np.float32).ravel().tolist())
            write(os.path.join(tn, "new.f32"), np.ones(3, np.float32).tobytes(), "wb")
            self.assertEqual(os.getxattr(os.path.join(tn, "new.f32"), "user.tensorfs.dtype"), b"F32")
            self.assertEqual(os.getxattr(os.path.join(tn, "new.f32"), "user.tensorfs.shape"), b"3")
            write(os.path.join(tn, "new.i8"), raw5, "wb")
            self.assertEqual(os.getxattr(os.path.join(tn, "new.i8"), "user.tensorfs.dtype"), b"I8")
            self.assertEqual(os.path.getsize(os.path.join(tn, "new.i8")), 5)
            # the wrong number of bytes for a typed tensor fails at close
            bad = os.path.join(tn, "bad.f16")
            subprocess.run(["touch", bad], check=True)
            os.setxattr(bad, "user.tensorfs.dtype", b"F16")
            os.setxattr(bad, "user.tensorfs.shape", b"4,8")
            with self.assertRaises(OSError) as cm:
                write(bad, b"\0" * 10, "wb")
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            # nothing has touched the source yet
            self.assertEqual(sha256(self.src), sha256(GGUF_SRC))
            log = unmount_ok(self, m)
            self.assertIn("done:", log)

        self.assertNotEqual(sha256(self.src), sha256(GGUF_SRC))
        self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-tmp" in f], [])
        staging = os.path.join(self.dir, ".model.gguf.tensorfs-staging")
        # the default staging directory goes away once repacked
        self.assertFalse(os.path.exists(staging))
        # the repacked file: through tensorfs info --json ...
        after = info_json(self.src)
        keys = {k["name"]: k["type"] for k in after["keys"]}
        self.assertEqual(keys["general.name"], "string")
        self.assertEqual(keys["my.key"], "uint32")
        self.assertEqual(keys["tokenizer.chat_template"], "string")
        self.assertNotIn("test.str", keys)
        tensors = {t["name"]: t for t in after["tensors"]}
        self.assertNotIn("t.f32", tensors)
        self.assertNotIn("t.q4_0", tensors)
        self.assertNotIn("bad.f16", tensors)
        self.assertEqual(tensors["t.moved"]["dtype"], "F32")
        self.assertEqual(tensors["t.moved"]["shape"], [32, 64])
        self.assertEqual((tensors["new.f16"]["dtype"], tensors["new.f16"]["shape"]), ("F16", [4, 8]))
        self.assertEqual((tensors["new.f32"]["dtype"], tensors["new.f32"]["shape"]), ("F32", [3]))
        self.assertEqual((tensors["new.i8"]["dtype"], tensors["new.i8"]["shape"]), ("I8", [5]))
        self.assertEqual(len(after["tensors"]), len(self.before["tensors"]) - 1 + 3)
        now = tensor_bytes_by_info(self.src, after)
        self.assertEqual(now["t.moved"], self.before_bytes["t.f32"])
        self.assertEqual(now["t.vec7_f32"], new_norm.tobytes())
        self.assertEqual(now["new.f16"], f16.tobytes())
        self.assertEqual(now["new.i8"], raw5)
        untouched = [t["name"] for t in self.before["tensors"]
                     if t["name"] not in ("t.f32", "t.q4_0", "t.vec7_f32")]
        for name in untouched:
            self.assertEqual(now[name], self.before_bytes[name], name)
        # ... and through a fresh read-only mount
        with Mount(self, self.src) as m:
            md = m.p("metadata")
            self.assertEqual(rv(os.path.join(md, "general.name")), "My model")
            self.assertEqual(rv(os.path.join(md, "test.u32")), "7")
            self.assertEqual(rv(os.path.join(md, "my.key")), "7")
            self.assertEqual(rv(os.path.join(md, "test.arr_i32")), "[1, -2, 3]")
            self.assertEqual(rv(os.path.join(md, "test.u8")), "255")
            self.assertEqual(rv(os.path.join(md, "test.bool_true")), "true")
            self.assertEqual(rv(os.path.join(md, "tokenizer.chat_template")), TEMPLATE[:-1])
            self.assertEqual(rv(os.path.join(md, "test.str_unicode")),
                             "héllo wörld — 日本語 🦙")
            self.assertFalse(os.path.exists(os.path.join(md, "test.str")))
            for name in untouched:
                self.assertEqual(read(m.p("tensors", name), "rb"), self.before_bytes[name], name)
            self.assertEqual(read(m.p("tensors", "t.vec7_f32"), "rb"), new_norm.tobytes())
            self.assertEqual(np.frombuffer(read(m.p("f32", "new.f16"), "rb"), "<f4").tolist(),
                             f16.astype(np.float32).ravel().tolist())

    def test_read_only_mount_is_erofs(self):
        with Mount(self, self.src) as m:
            md = m.p("metadata")
            cases = [
                ("write", lambda: write(os.path.join(md, "test.u32"), "1")),
                ("create", lambda: write(os.path.join(md, "new.key"), "1")),
                ("unlink", lambda: os.unlink(os.path.join(md, "test.str"))),
                ("rename", lambda: os.rename(m.p("tensors", "t.f32"), m.p("tensors", "t.x"))),
                ("setxattr", lambda: os.setxattr(os.path.join(md, "test.u32"),
                                                 "user.tensorfs.type", b"uint8")),
                ("truncate", lambda: os.truncate(m.p("tensors", "t.f32"), 0)),
            ]
            for what, fn in cases:
                with self.assertRaises(OSError, msg=what) as cm:
                    fn()
                self.assertEqual(cm.exception.errno, errno.EROFS, what)
            self.assertEqual(rv(os.path.join(md, "test.u32")), "4294967295")
        self.assertEqual(sha256(self.src), sha256(GGUF_SRC))

    def test_no_change_writes_nothing(self):
        st0 = os.stat(self.src)
        with Mount(self, self.src, ["rw"]) as m:
            md = m.p("metadata")
            self.assertEqual(rv(os.path.join(md, "test.u32")), "4294967295")
            read(m.p("tensors", "t.f32"), "rb")
            # the same value written again is no change
            write(os.path.join(md, "test.u32"), "4294967295\n")
            write(os.path.join(md, "general.architecture"), "oracle-test")
            # nor are a tensor's own bytes written back (cp onto itself, through a copy),
            # or its values (np.save of what np.load gave: requantized to the same blocks)
            for t in ("t.f32", "t.q4_0", "t.q8_0"):
                raw = read(m.p("tensors", t), "rb")
                write(m.p("tensors", t), raw, "wb")
                self.assertEqual(read(m.p("tensors", t), "rb"), raw)
                npy = m.p("npy", t + ".npy")
                np.save(npy, np.load(npy))
                self.assertEqual(read(m.p("tensors", t), "rb"), raw)
            log = unmount_ok(self, m)
            self.assertNotIn("repacking", log)
        st1 = os.stat(self.src)
        self.assertEqual((st0.st_ino, st0.st_mtime_ns, st0.st_size),
                         (st1.st_ino, st1.st_mtime_ns, st1.st_size))
        self.assertEqual(sha256(self.src), sha256(GGUF_SRC))
        self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-tmp" in f], [])
        self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-staging" in f], [])

    def test_kill9_after_close_keeps_changes(self):
        staging = os.path.join(self.dir, "staging")
        new_norm = np.full(7, 2.5, np.float32).tobytes()
        m = Mount(self, self.src, ["rw", "staging=" + staging])
        with m:
            write(m.p("metadata", "general.name"), "Survivor")
            write(m.p("metadata", "test.i32"), "-5")
            os.unlink(m.p("metadata", "test.str"))
            write(m.p("tensors", "t.vec7_f32"), new_norm, "wb")
            os.rename(m.p("tensors", "t.f16"), m.p("tensors", "t.half"))
            self.assertEqual(os.getxattr(m.path, "user.tensorfs.staging").decode(), staging)
            kill9_daemon(self, m)
        self.assertEqual(sha256(self.src), sha256(GGUF_SRC))
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        # mounted again with the same staging directory: the changes are there
        with Mount(self, self.src, ["rw", "staging=" + staging]) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "Survivor")
            self.assertEqual(rv(m.p("metadata", "test.i32")), "-5")
            self.assertFalse(os.path.exists(m.p("metadata", "test.str")))
            self.assertEqual(read(m.p("tensors", "t.vec7_f32"), "rb"), new_norm)
            self.assertEqual(read(m.p("tensors", "t.half"), "rb"), self.before_bytes["t.f16"])
            self.assertFalse(os.path.exists(m.p("tensors", "t.f16")))
            # one more change on top
            write(m.p("metadata", "general.url"), "https://example.com")
            self.assertIn("done:", unmount_ok(self, m))
        self.assertFalse(os.path.exists(os.path.join(staging, "journal.json")))
        with Mount(self, self.src) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "Survivor")
            self.assertEqual(rv(m.p("metadata", "general.url")), "https://example.com")
            self.assertEqual(rv(m.p("metadata", "test.i32")), "-5")
            self.assertFalse(os.path.exists(m.p("metadata", "test.str")))
            self.assertEqual(read(m.p("tensors", "t.vec7_f32"), "rb"), new_norm)
            self.assertEqual(read(m.p("tensors", "t.half"), "rb"), self.before_bytes["t.f16"])
        self.check_untouched(self.src, ["t.q8_0", "t.q6_k", "t.f32", "t.f16_3d"])

    # ---- the write path under stress (each test a few seconds at most) ----

    def _daemon(self, m):
        return int(os.getxattr(m.path, "user.tensorfs.pid"))

    def test_write_after_commit_never_touches_the_committed_file(self):
        """fsync commits a handle's bytes; writing on through it (here: ftruncate to 0)
        must not change what was journaled: that file is mapped by the daemon (SIGBUS)
        and named by the journal (replay after kill -9 would fail on its size)."""
        staging = os.path.join(self.dir, "staging")
        ones = b"\x01" * 8192
        m = Mount(self, self.src, ["rw", "staging=" + staging])
        with m:
            fd = os.open(m.p("tensors", "t.f32"), os.O_RDWR)
            try:
                os.pwrite(fd, ones, 0)
                os.fsync(fd)
                os.ftruncate(fd, 0)
                os.pwrite(fd, b"\x02" * 100, 0)
                # the mount shows the committed bytes; the f32 view reads the mapping
                self.assertEqual(read(m.p("tensors", "t.f32"), "rb"), ones)
                self.assertEqual(len(read(m.p("f32", "t.f32"), "rb")), 8192)
                kill9_daemon(self, m)
            finally:
                try:
                    os.close(fd)
                except OSError:
                    pass
        with Mount(self, self.src, ["rw", "staging=" + staging]) as m:
            self.assertEqual(read(m.p("tensors", "t.f32"), "rb"), ones)
            self.assertIn("done:", unmount_ok(self, m))
        with Mount(self, self.src) as m:
            self.assertEqual(read(m.p("tensors", "t.f32"), "rb"), ones)

    def test_rewrites_keep_fds_and_staging_bounded(self):
        """300 rewrites of a tensor, 100 refused ones, 100 opens O_RDWR that only read: the
        daemon's fds and mappings do not grow, and no orphan data file stays behind."""
        staging = os.path.join(self.dir, "staging")
        with Mount(self, self.src, ["rw", "staging=" + staging]) as m:
            pid = self._daemon(m)
            p = m.p("tensors", "t.vec7_f32")
            write(p, b"\0" * 28, "wb")
            fds0 = len(os.listdir("/proc/%d/fd" % pid))
            for i in range(300):
                write(p, bytes([i % 256]) * 28, "wb")
            for i in range(100):
                with self.assertRaises(OSError) as cm:
                    write(m.p("tensors", "t.f32"), b"x" * 10, "wb")
                self.assertEqual(cm.exception.errno, errno.EINVAL)
            for i in range(100):
                with open(m.p("tensors", "t.f16"), "r+b") as f:
                    f.read(16)
            links = [os.readlink("/proc/%d/fd/%s" % (pid, x)) for x in os.listdir("/proc/%d/fd" % pid)]
            staged = [l for l in links if l.startswith(os.path.join(staging, "data"))]
            self.assertLessEqual(len(staged), 1, "%d staged files open" % len(staged))
            # (the rest: splice pipes of worker threads, bounded by their number)
            self.assertLessEqual(len(links), fds0 + 8, "fds grew from %d to %d" % (fds0, len(links)))
            with open("/proc/%d/maps" % pid) as f:
                maps = sum(1 for l in f if os.path.join(staging, "data") in l)
            self.assertLessEqual(maps, 2)
            self.assertEqual(read(p, "rb"), bytes([299 % 256]) * 28)
            with open(os.path.join(staging, "journal.json")) as f:
                named = {op["data"] for op in json.load(f)["ops"] if "data" in op}
            on_disk = {"data/" + n for n in os.listdir(os.path.join(staging, "data"))}
            self.assertEqual(on_disk, named)  # refused writes and read-only opens left nothing
            # superseded rewrites left the journal with their data: one set of the tensor
            with open(os.path.join(staging, "journal.json")) as f:
                sets = [op for op in json.load(f)["ops"]
                        if op["op"] == "set_tensor" and op.get("name") == "t.vec7_f32"]
            self.assertEqual(len(sets), 1)
            self.assertIn("done:", unmount_ok(self, m))
        with Mount(self, self.src) as m:
            self.assertEqual(read(m.p("tensors", "t.vec7_f32"), "rb"), bytes([299 % 256]) * 28)

    def test_full_staging_write_fails_cleanly(self):
        """A write that fills the staging file system fails, close() says so, the old bytes
        stay (a 1-D tensor must not become the part that fit), the space is given back and
        the journal stays valid."""
        st = os.path.join(self.dir, "small")
        os.mkdir(st)
        r = run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", st])
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
        self.addCleanup(lambda: run(["umount", "-l", st]))
        staging = os.path.join(st, "s")
        m = Mount(self, self.src, ["rw", "staging=" + staging])
        with m:
            p = m.p("tensors", "t.vec7_f32")
            fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
            with self.assertRaises(OSError) as cm:
                for i in range(128):
                    os.write(fd, b"\x07" * 4096)
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
            with self.assertRaises(OSError) as cm:
                os.close(fd)
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
            self.assertEqual(read(p, "rb"), self.before_bytes["t.vec7_f32"])
            # the failed file is gone: there is room for the next change
            write(m.p("metadata", "general.name"), "after ENOSPC")
            # a change that does not fit says ENOSPC (a new key said EPERM)
            filler = os.path.join(st, "filler")
            with self.assertRaises(OSError):
                write_file(filler, b"\xff" * (256 << 10))
            with self.assertRaises(OSError) as cm:
                write(m.p("metadata", "new.key"), "x")
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
            os.unlink(filler)
            kill9_daemon(self, m)
        with Mount(self, self.src, ["rw", "staging=" + staging]) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "after ENOSPC")
            self.assertEqual(read(m.p("tensors", "t.vec7_f32"), "rb"),
                             self.before_bytes["t.vec7_f32"])
            self.assertIn("done:", unmount_ok(self, m))

    def test_rename_chains_replay_as_shown(self):
        """create a, write, mv a b, create a, write, rm b; keys likewise; a tensor renamed
        over an existing one: after kill -9 the replayed mount shows what the mount showed."""
        staging = os.path.join(self.dir, "staging")
        one, two = np.full(4, 1, np.float32).tobytes(), np.full(5, 2, np.float32).tobytes()
        m = Mount(self, self.src, ["rw", "staging=" + staging])

        def snapshot(m):
            tn, md = m.p("tensors"), m.p("metadata")
            return ({n: read(os.path.join(tn, n), "rb") for n in sorted(os.listdir(tn))},
                    {n: read(os.path.join(md, n), "rb") for n in sorted(os.listdir(md))})
        with m:
            tn, md = m.p("tensors"), m.p("metadata")
            write(os.path.join(tn, "a"), one, "wb")
            os.rename(os.path.join(tn, "a"), os.path.join(tn, "b"))
            write(os.path.join(tn, "a"), two, "wb")
            os.unlink(os.path.join(tn, "b"))
            # onto an existing tensor: its bytes are replaced; with a dtype declared on the
            # one renamed, that dtype (and shape) wins
            os.setxattr(os.path.join(tn, "t.f16"), "user.tensorfs.dtype", b"F16")
            os.rename(os.path.join(tn, "t.f16"), os.path.join(tn, "t.f32"))
            write(os.path.join(md, "k.a"), "first")
            os.rename(os.path.join(md, "k.a"), os.path.join(md, "k.b"))
            write(os.path.join(md, "k.a"), "second")
            os.unlink(os.path.join(md, "k.b"))
            os.rename(os.path.join(md, "test.str"), os.path.join(md, "general.name"))
            shown = snapshot(m)
            self.assertEqual(shown[0]["a"], two)
            self.assertNotIn("b", shown[0])
            self.assertEqual(shown[0]["t.f32"], self.before_bytes["t.f16"])
            kill9_daemon(self, m)
        with Mount(self, self.src, ["rw", "staging=" + staging]) as m:
            self.assertEqual(snapshot(m), shown)
            self.assertIn("done:", unmount_ok(self, m))
        with Mount(self, self.src) as m:
            self.assertEqual(snapshot(m), shown)

    def test_partial_overwrites(self):
        """A tensor written, closed, reopened without O_TRUNC and partly overwritten; and two
        handles open at once, each writing its own range and closing in turn."""
        with Mount(self, self.src, ["rw"]) as m:
            p = m.p("tensors", "t.f32")
            want = bytearray(self.before_bytes["t.f32"])
            write(p, b"\x11" * 8192, "wb")
            want[:] = b"\x11" * 8192
            with open(p, "r+b") as f:
                f.seek(100)
                f.write(b"\x22" * 50)
            want[100:150] = b"\x22" * 50
            self.assertEqual(read(p, "rb"), bytes(want))
            # two handles: the second writes after the first closed
            a, b = open(p, "r+b"), open(p, "r+b")
            a.seek(0)
            a.write(b"\x33" * 10)
            a.close()
            want[0:10] = b"\x33" * 10
            b.seek(8000)
            b.write(b"\x44" * 10)
            b.close()
            want[8000:8010] = b"\x44" * 10
            self.assertEqual(read(p, "rb"), bytes(want))
            self.assertIn("done:", unmount_ok(self, m))
        with Mount(self, self.src) as m:
            self.assertEqual(read(m.p("tensors", "t.f32"), "rb"), bytes(want))

    def _crash_repack(self, where):
        """A repack that dies (as by kill -9) at `where`; returns the staging directory."""
        staging = os.path.join(self.dir, "staging")
        with env_set(TFS_TEST_CRASH_AT=where):
            m = Mount(self, self.src, ["rw", "staging=" + staging])
            m.__enter__()
        try:
            write(m.p("metadata", "general.name"), "Crashed " + where)
            os.unlink(m.p("tensors", "t.q5_0"))
            r = m.unmount()
        finally:
            m.__exit__(None, None, None)
        self.assertNotEqual(r.returncode, 0, "tensorfs unmount must report the dead repack")
        self.assertIn("exited before the repack finished", r.stderr)
        return staging

    def test_kill9_before_rename_then_repack(self):
        sha0 = sha256(self.src)
        st0 = os.stat(self.src)
        staging = self._crash_repack("before_rename")
        # the source is whole, the changes are still staged
        self.assertEqual(sha256(self.src), sha0)
        self.assertEqual(os.stat(self.src).st_ino, st0.st_ino)
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        r = run([TENSORFS, "repack", self.src, "-o", "staging=" + staging], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done:", r.stderr)
        self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-tmp" in f], [])
        self.assertFalse(os.path.exists(os.path.join(staging, "journal.json")))
        with Mount(self, self.src) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "Crashed before_rename")
            self.assertFalse(os.path.exists(m.p("tensors", "t.q5_0")))
        self.check_untouched(self.src, ["t.f32", "t.q8_0", "t.iq4_xs"])
        # nothing left to do
        r = run([TENSORFS, "repack", self.src, "-o", "staging=" + staging])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("nothing staged", r.stderr)

    def test_kill9_after_rename_then_mount(self):
        staging = self._crash_repack("after_rename")
        # the new file is in place; the journal still records the repack
        self.assertNotEqual(sha256(self.src), sha256(GGUF_SRC))
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        st = os.stat(self.src)
        # the next mount finishes the job (nothing is applied twice) and shows the new state
        with Mount(self, self.src, ["rw", "staging=" + staging]) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "Crashed after_rename")
            self.assertFalse(os.path.exists(m.p("tensors", "t.q5_0")))
            self.assertNotIn("repacking", unmount_ok(self, m))
        self.assertEqual(os.stat(self.src).st_ino, st.st_ino)  # nothing left to write
        self.assertFalse(os.path.exists(os.path.join(staging, "journal.json")))
        self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-tmp" in f], [])
        self.check_untouched(self.src, ["t.f32", "t.q8_0"])

    def test_kill9_during_real_repack(self):
        """kill -9 of the daemon while it copies a 300 MB model: the source stays whole,
        nothing is left beside it, `tensorfs repack` finishes the job."""
        src = os.path.join(self.dir, "big.gguf")
        tensors = [("blk.%d.weight" % i, 0, np.full((2400, 8192), i + 0.5, np.float32))
                   for i in range(4)]  # 4 x 75 MiB
        head = gguf_header([("general.name", GGUF_STR, "big")], tensors)
        with open(src, "wb") as f:
            f.write(head)
            for _, _, a in tensors:
                a.tofile(f)
        sha0 = sha256(src)
        staging = os.path.join(self.dir, "big-staging")
        with Mount(self, src, ["rw", "staging=" + staging]) as m:
            write(m.p("metadata", "general.name"), "bigger")
            pid = int(os.getxattr(m.path, "user.tensorfs.pid"))
            status = os.getxattr(m.path, "user.tensorfs.status").decode()
            um = subprocess.Popen([TENSORFS, "unmount", m.path], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
            killed = False
            deadline = time.time() + 60
            while time.time() < deadline and um.poll() is None:
                try:
                    text = read(status)
                except OSError:
                    text = ""
                if "writing:" in text and "done:" not in text:
                    os.kill(pid, signal.SIGKILL)
                    killed = True
                    break
                time.sleep(0.002)
            out, err = um.communicate(timeout=60)
        if not killed:
            self.skipTest("the repack finished before it could be killed")
        self.assertNotEqual(um.returncode, 0, err)
        self.assertIn("exited before the repack finished", err)
        self.assertEqual(sha256(src), sha0)
        self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-tmp" in f], [])
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        r = run([TENSORFS, "repack", src, "-o", "staging=" + staging], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done:", r.stderr)
        with Mount(self, src) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "bigger")
            with open(m.p("tensors", "blk.3.weight"), "rb") as f:
                f.seek((75 << 20) - 8)
                self.assertEqual(f.read(8), np.full(2, 3.5, np.float32).tobytes())

    def test_independent_reader(self):
        """A GGUF repacked by tensorfs, read by @huggingface/gguf (npm)."""
        with Mount(self, self.src, ["rw"]) as m:
            write(m.p("metadata", "general.name"), "Read by someone else")
            write(m.p("metadata", "test.u16"), "12345")
            os.unlink(m.p("metadata", "test.str_nul"))
            os.unlink(m.p("tensors", "t.iq2_xxs"))
            os.rename(m.p("tensors", "t.bf16"), m.p("tensors", "t.bfloat"))
            write(m.p("tensors", "extra.f32"), np.arange(64, dtype=np.float32).tobytes(), "wb")
            unmount_ok(self, m)
        theirs = hf_gguf(self, self.src)
        ours = info_json(self.src)
        # keys: the same names, types, values (ours as the mount shows them)
        type_names = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32",
                      6: "float32", 7: "bool", 8: "string", 10: "uint64", 11: "int64",
                      12: "float64"}
        self.assertEqual(sorted(k["name"] for k in ours["keys"]), sorted(theirs["meta"]))
        with Mount(self, self.src) as m:
            for k in ours["keys"]:
                t = theirs["meta"][k["name"]]
                tn = type_names.get(t["type"])
                if t["type"] == 9:
                    tn = "array[%s]" % type_names[t["subType"]]
                self.assertEqual(tn, k["type"], k["name"])
                text = read(m.p("metadata", k["file"]), "rb").decode("utf-8", "surrogateescape")
                self.assertTrue(text.endswith("\n"))
                text = text[:-1]
                self.assertValueEqual(k["type"], text, t["value"], k["name"])
            self.assertEqual(rv(m.p("metadata", "general.name")), "Read by someone else")
        # tensor infos: names, types, shapes, offsets within the data section
        self.assertEqual(len(ours["tensors"]), len(theirs["tensors"]))
        base = ours["data_offset"]
        self.assertEqual(int(theirs["tensorDataOffset"]), base)
        for a, b in zip(ours["tensors"], theirs["tensors"]):
            self.assertEqual(a["name"], b["name"])
            self.assertEqual(a["ne"], [int(x) for x in b["shape"]], a["name"])
            self.assertEqual(a["offset"] - base, int(b["offset"]), a["name"])
        dt = {t["name"]: t["dtype"] for t in theirs["tensors"]}
        self.assertEqual(dt["extra.f32"], 0)
        self.assertEqual(dt["t.bfloat"], 30)
        self.assertNotIn("t.iq2_xxs", dt)
        self.assertNotIn("t.bf16", dt)

    def assertValueEqual(self, type_name, text, theirs, what):
        def scalar(t, s, v):
            if isinstance(v, dict) and "big" in v:
                v = int(v["big"])
            if isinstance(v, dict) and "nonfinite" in v:
                v = float(v["nonfinite"].replace("Infinity", "inf"))
            if t == "bool":
                self.assertEqual(s, v, what)
            elif t == "string":
                self.assertEqual(s, v, what)
            elif t.startswith("float"):
                a = float(s)
                if t == "float32":
                    a = struct.unpack("<f", struct.pack("<f", a))[0]
                    v = struct.unpack("<f", struct.pack("<f", float(v)))[0]
                self.assertEqual(struct.pack("<d", a), struct.pack("<d", float(v)), what)
            else:
                self.assertEqual(int(s), int(v), what)
        if type_name.startswith("array["):
            sub = type_name[6:-1]
            ours = json.loads(text)
            self.assertEqual(len(ours), len(theirs), what)
            for a, b in zip(ours, theirs):
                if sub == "bool":
                    self.assertEqual(a, b, what)
                else:
                    scalar(sub, a if sub == "string" else json.dumps(a), b)
        elif type_name == "bool":
            self.assertEqual(text == "true", theirs, what)
        else:
            scalar(type_name, text, theirs)


# ==== a repack onto a full file system ====

class FullDisk(TestCase):
    def setUp(self):
        self.dir = self.tmpdir()
        r = run(["mount", "-t", "tmpfs", "-o", "size=8m", "tfs-test-full", self.dir])
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
        self.addCleanup(lambda: run(["umount", "-l", self.dir]))

    def test_full_disk_repack_fails_cleanly(self):
        rng = np.random.default_rng(7)
        big = rng.standard_normal((768, 1024), dtype=np.float32)  # 3 MiB
        src = os.path.join(self.dir, "model.gguf")
        write_file(src, gguf_bytes([("general.architecture", GGUF_STR, "llama"),
                                    ("general.name", GGUF_STR, "small")],
                                   [("big.weight", 0, big),
                                    ("norm.weight", 0, np.ones(1024, np.float32))]))
        filler = os.path.join(self.dir, "filler")
        write_file(filler, b"\xff" * (int(3.5 * 2**20)))
        sha0 = sha256(src)
        with Mount(self, src, ["rw"]) as m:
            write(m.p("metadata", "general.name"), "does not fit")
            r = m.unmount()
        self.assertIsNotNone(r)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("error:", r.stderr)
        self.assertRegex(r.stderr, "No space left|cannot reserve")
        self.assertIn("source is untouched", r.stderr)
        self.assertEqual(sha256(src), sha0)
        self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-tmp" in f], [])
        staging = os.path.join(self.dir, ".model.gguf.tensorfs-staging")
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        # once there is room, tensorfs repack finishes the job
        os.unlink(filler)
        r = run([TENSORFS, "repack", src], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done:", r.stderr)
        with Mount(self, src) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "does not fit")
            self.assertEqual(read(m.p("tensors", "big.weight"), "rb"), big.tobytes())


# ==== safetensors ====

class Safetensors(TestCase):
    def setUp(self):
        self.dir = self.tmpdir()
        rng = np.random.default_rng(1)
        self.t = {
            "a.weight": rng.standard_normal((4, 8), dtype=np.float32),
            "b.bias": rng.standard_normal(8, dtype=np.float32).astype(np.float16),
            "output_norm.weight": np.ones(16, np.float32),
            "ids": np.arange(6, dtype=np.int32).reshape(2, 3),
        }

    @quick
    def test_single_file(self):
        src = os.path.join(self.dir, "model.safetensors")
        write_file(src, st_bytes(list(self.t.items()), {"format": "pt", "note": "old"}))
        new_norm = np.linspace(0, 1, 16, dtype=np.float32)
        with Mount(self, src, ["rw"]) as m:
            md, tn = m.p("metadata"), m.p("tensors")
            write(os.path.join(md, "note"), "new note\n")
            self.assertEqual(rv(os.path.join(md, "note")), "new note")
            write(os.path.join(md, "added"), "x y z")
            os.unlink(os.path.join(md, "format"))
            # safetensors metadata holds strings only
            k = os.path.join(md, "note")
            with self.assertRaises(OSError) as cm:
                os.setxattr(k, "user.tensorfs.type", b"uint32")
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertEqual(rv(k), "new note")
            nb = os.path.join(self.dir, "new_norm.bin")
            write_file(nb, new_norm.tobytes())
            self.assertEqual(run(["cp", nb, os.path.join(tn, "output_norm.weight")]).returncode, 0)
            self.assertEqual(read(os.path.join(tn, "output_norm.weight"), "rb"), new_norm.tobytes())
            os.rename(os.path.join(tn, "a.weight"), os.path.join(tn, "c.weight"))
            os.unlink(os.path.join(tn, "ids"))
            write(os.path.join(tn, "bytes5"), b"abcde", "wb")
            self.assertEqual(os.getxattr(os.path.join(tn, "bytes5"), "user.tensorfs.dtype"), b"U8")
            t = os.path.join(tn, "typed")
            subprocess.run(["touch", t], check=True)
            os.setxattr(t, "user.tensorfs.dtype", b"I32")
            os.setxattr(t, "user.tensorfs.shape", b"2,2")
            write(t, np.array([[1, 2], [3, 4]], np.int32).tobytes(), "wb")
            self.assertIn("done:", unmount_ok(self, m))
        meta, tensors = st_parse(src)
        self.assertEqual(meta, {"note": "new note", "added": "x y z"})
        self.assertEqual(sorted(tensors), ["b.bias", "bytes5", "c.weight", "output_norm.weight",
                                           "typed"])
        self.assertEqual(tensors["c.weight"], ("F32", [4, 8], self.t["a.weight"].tobytes()))
        self.assertEqual(tensors["b.bias"], ("F16", [8], self.t["b.bias"].tobytes()))
        self.assertEqual(tensors["output_norm.weight"], ("F32", [16], new_norm.tobytes()))
        self.assertEqual(tensors["bytes5"], ("U8", [5], b"abcde"))
        self.assertEqual(tensors["typed"][:2], ("I32", [2, 2]))
        info = info_json(src)
        self.assertEqual(sorted(t["name"] for t in info["tensors"]), sorted(tensors))
        with Mount(self, src) as m:
            self.assertEqual(rv(m.p("metadata", "note")), "new note")
            self.assertEqual(read(m.p("tensors", "c.weight"), "rb"), self.t["a.weight"].tobytes())
            self.assertEqual(np.frombuffer(read(m.p("f32", "b.bias"), "rb"), "<f4").tolist(),
                             self.t["b.bias"].astype(np.float32).tolist())

    def make_sharded(self):
        d = os.path.join(self.dir, "sharded")
        os.mkdir(d)
        shards = {"model-00001-of-00002.safetensors": ["a.weight", "b.bias"],
                  "model-00002-of-00002.safetensors": ["output_norm.weight", "ids"]}
        wm = {}
        for fn, names in shards.items():
            write_file(os.path.join(d, fn), st_bytes([(n, self.t[n]) for n in names],
                                                     {"format": "pt"}))
            wm.update({n: fn for n in names})
        idx = os.path.join(d, "model.safetensors.index.json")
        write(idx, json.dumps({"metadata": {"total_size": 336}, "weight_map": wm}, indent=2))
        return d, idx

    def read_sharded(self, d):
        idx = json.loads(read(os.path.join(d, "model.safetensors.index.json")))
        out = {}
        for fn in sorted(set(idx["weight_map"].values())):
            _, ts = st_parse(os.path.join(d, fn))
            for n, v in ts.items():
                self.assertEqual(idx["weight_map"][n], fn)
                out[n] = v
        self.assertEqual(sorted(out), sorted(idx["weight_map"]))
        return idx, out

    def test_sharded_set(self):
        d, idx = self.make_sharded()
        sha_shard2 = sha256(os.path.join(d, "model-00002-of-00002.safetensors"))
        new_bias = np.full(8, 0.25, np.float16)
        with Mount(self, d, ["rw"]) as m:
            tn = m.p("tensors")
            write(os.path.join(tn, "b.bias"), new_bias.tobytes(), "wb")
            os.rename(os.path.join(tn, "a.weight"), os.path.join(tn, "a.renamed"))
            self.assertEqual(read(os.path.join(tn, "a.renamed"), "rb"), self.t["a.weight"].tobytes())
            self.assertEqual(read(os.path.join(tn, "b.bias"), "rb"), new_bias.tobytes())
            self.assertIn("done:", unmount_ok(self, m))
        index, ts = self.read_sharded(d)
        self.assertEqual(ts["a.renamed"], ("F32", [4, 8], self.t["a.weight"].tobytes()))
        self.assertEqual(ts["b.bias"], ("F16", [8], new_bias.tobytes()))
        self.assertEqual(ts["ids"], ("I32", [2, 3], self.t["ids"].tobytes()))
        self.assertNotIn("a.weight", ts)
        info = {t["name"]: t for t in info_json(d)["tensors"]}
        self.assertEqual(sorted(info), ["a.renamed", "b.bias", "ids", "output_norm.weight"])
        self.assertEqual((info["b.bias"]["dtype"], info["b.bias"]["shape"]), ("F16", [8]))
        # the shard nothing touched stays as it was
        self.assertEqual(sha256(os.path.join(d, "model-00002-of-00002.safetensors")), sha_shard2)
        with Mount(self, d) as m:
            self.assertEqual(read(m.p("tensors", "b.bias"), "rb"), new_bias.tobytes())
            self.assertEqual(read(m.p("tensors", "output_norm.weight"), "rb"),
                             self.t["output_norm.weight"].tobytes())

    def test_sharded_key_in_index_and_shards(self):
        """A key both the index's metadata and the shards' __metadata__ hold ("format", as
        transformers writes it) stays in both after a repack of another change."""
        d = os.path.join(self.dir, "both")
        os.mkdir(d)
        t = {"a": np.arange(4, dtype=np.float32), "b": np.arange(4, dtype=np.float32) + 1}
        wm = {}
        for i, name in enumerate(t):
            fn = "m-%d.safetensors" % (i + 1)
            write_file(os.path.join(d, fn), st_raw([(name, "F32", [4], t[name].tobytes())],
                                                   {"format": "pt"}))
            wm[name] = fn
        write(os.path.join(d, "model.safetensors.index.json"), json.dumps(
            {"metadata": {"total_size": 32, "format": "pt", "foo": "bar"}, "weight_map": wm}))
        with Mount(self, d, ["rw"]) as m:
            write(m.p("metadata", "foo"), "baz")
            unmount_ok(self, m)
        index = json.loads(read(os.path.join(d, "model.safetensors.index.json")))
        self.assertEqual(index["metadata"], {"total_size": 32, "format": "pt", "foo": "baz"})
        for fn in wm.values():
            meta, _ = st_parse(os.path.join(d, fn))
            self.assertEqual(meta, {"format": "pt"})

    def test_sharded_crash_between_renames(self):
        """kill -9 between the renames of a sharded set: the next mount rolls forward."""
        d, idx = self.make_sharded()
        staging = os.path.join(self.dir, "staging")
        before = {n: sha256(os.path.join(d, n)) for n in os.listdir(d)}
        with env_set(TFS_TEST_CRASH_AT="mid_rename"):
            m = Mount(self, d, ["rw", "staging=" + staging])
            m.__enter__()
        try:
            os.unlink(m.p("tensors", "ids"))                      # shard 2
            os.rename(m.p("tensors", "a.weight"), m.p("tensors", "a.x"))  # shard 1
            r = m.unmount()
        finally:
            m.__exit__(None, None, None)
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        after = {n: sha256(os.path.join(d, n)) for n in before}
        self.assertNotEqual(after, before, "the crash point was not between two renames")
        with Mount(self, d, ["rw", "staging=" + staging]) as m:
            self.assertEqual(sorted(os.listdir(m.p("tensors"))),
                             ["a.x", "b.bias", "output_norm.weight"])
            self.assertNotIn("repacking", unmount_ok(self, m))
        index, ts = self.read_sharded(d)
        self.assertEqual(sorted(ts), ["a.x", "b.bias", "output_norm.weight"])
        self.assertEqual(ts["a.x"][2], self.t["a.weight"].tobytes())
        self.assertEqual([f for f in os.listdir(d) if "tensorfs-tmp" in f], [])


# ==== Ollama ====

class OllamaStore:
    """A copy of tests/data's Ollama store as $OLLAMA_MODELS for the test (a mixin)."""

    def setUp(self):
        self.dir = self.tmpdir()
        self.root = os.path.join(self.dir, "models")
        shutil.copytree(OLLAMA_SRC, self.root)
        self.manifest = os.path.join(self.root, MANIFEST)
        self.env = env_set(OLLAMA_MODELS=self.root)
        self.env.__enter__()
        self.addCleanup(self.env.__exit__)


class Ollama(OllamaStore, TestCase):

    def test_classic_model(self):
        before = info_json(self.manifest)
        with Mount(self, "oracle-gguf", ["rw"]) as m:
            self.assertEqual(os.getxattr(m.path, "user.tensorfs.staging").decode(),
                             os.path.join(self.root, ".tensorfs-staging/registry.ollama.ai/"
                                          "library/oracle-gguf/latest"))
            write(m.p("metadata", "general.name"), "Ollama edit")
            os.unlink(m.p("metadata", "test.str"))
            tpl = os.path.join(self.dir, "template.jinja")
            write(tpl, "{{ .Prompt }} edited\n")
            self.assertEqual(run(["cp", tpl, m.p("layers", "template")]).returncode, 0)
            self.assertEqual(read(m.p("layers", "template")), "{{ .Prompt }} edited\n")
            os.unlink(m.p("layers", "license"))
            os.rename(m.p("tensors", "t.q8_0"), m.p("tensors", "t.q8"))
            self.assertIn("done:", unmount_ok(self, m))
        # the staging directory under the store root is gone again
        self.assertFalse(os.path.exists(os.path.join(self.root, ".tensorfs-staging")))
        # nothing was put into manifests/ but the manifest
        for dp, dn, fn in os.walk(os.path.join(self.root, "manifests")):
            for f in fn + dn:
                self.assertNotIn("tensorfs", f)
        man = json.loads(read(self.manifest))
        kinds = [l["mediaType"].rsplit(".", 1)[-1] for l in man["layers"]]
        self.assertNotIn("license", kinds)
        for l in man["layers"]:
            blob = os.path.join(self.root, "blobs", l["digest"].replace(":", "-"))
            self.assertEqual(os.path.getsize(blob), l["size"])
            self.assertEqual("sha256:" + sha256(blob), l["digest"])
        after = info_json("oracle-gguf")
        self.assertEqual(len(after["tensors"]), len(before["tensors"]))
        self.assertIn("t.q8", [t["name"] for t in after["tensors"]])
        with Mount(self, self.manifest) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "Ollama edit")
            self.assertFalse(os.path.exists(m.p("metadata", "test.str")))
            self.assertEqual(read(m.p("layers", "template")), "{{ .Prompt }} edited\n")
            self.assertFalse(os.path.exists(m.p("layers", "license")))
            raw = read(m.p("tensors", "t.q8"), "rb")
        blob0 = os.path.join(OLLAMA_SRC, "blobs",
                             "sha256-9038dd7de1600ce68b5f2e8a981f40f485dfd315c397f1129681b52c490d6590")
        q8 = [t for t in before["tensors"] if t["name"] == "t.q8_0"][0]
        with open(blob0, "rb") as f:
            f.seek(q8["offset"])
            self.assertEqual(raw, f.read(q8["nbytes"]))

    def test_truncate_by_path(self):
        """truncate(1) is a whole change: a key's empty value is parsed (refused for a
        number: EINVAL, the old value stays), a layer is emptied, a tensor's size checked."""
        with Mount(self, "oracle-gguf", ["rw"]) as m:
            key = "test.f32"
            old = read(m.p("metadata", key))
            r = run(["truncate", "-s", "0", m.p("metadata", key)])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("Invalid argument", r.stderr)
            self.assertIn(key, os.getxattr(m.path, "user.tensorfs.last_error").decode())
            self.assertEqual(read(m.p("metadata", key)), old)
            self.assertEqual(run(["truncate", "-s", "0", m.p("layers", "system")]).returncode, 0)
            self.assertEqual(read(m.p("layers", "system")), "")
            t = sorted(os.listdir(m.p("tensors")))[0]
            size = os.path.getsize(m.p("tensors", t))
            self.assertNotEqual(run(["truncate", "-s", str(size + 1), m.p("tensors", t)]).returncode, 0)
            self.assertEqual(os.path.getsize(m.p("tensors", t)), size)
            unmount_ok(self, m)
        with Mount(self, "oracle-gguf") as m:
            self.assertEqual(read(m.p("layers", "system")), "")
            self.assertEqual(read(m.p("metadata", key)), old)

    def test_refused_layer_write_keeps_the_layer(self):
        """A shell redirect truncates at open and flushes (dup2) before it writes: bytes that
        are then refused (not UTF-8 for a text layer) leave the layer as it was, in the mount
        and in the repacked store; an empty redirect empties it."""
        with Mount(self, "oracle-gguf", ["rw"]) as m:
            tpl = read(m.p("layers", "template"))
            system = read(m.p("layers", "system"))
            self.assertTrue(tpl and system)
            for layer in ("template", "system"):
                subprocess.run(["sh", "-c", "printf '\\377\\376 bad' > '%s'" % m.p("layers", layer)])
                self.assertIn("UTF-8", os.getxattr(m.path, "user.tensorfs.last_error").decode())
            self.assertEqual(read(m.p("layers", "template")), tpl)
            self.assertEqual(read(m.p("layers", "system")), system)
            self.assertEqual(subprocess.run(["sh", "-c", ": > '%s'" % m.p("layers", "system")]).returncode, 0)
            # a truncation with nothing written is committed at the last close (FUSE's
            # release, which the kernel sends after close() returned): soon, not at once
            until = time.monotonic() + 10
            while read(m.p("layers", "system")) != "" and time.monotonic() < until:
                time.sleep(0.05)
            self.assertEqual(read(m.p("layers", "system")), "")
            unmount_ok(self, m)
        with Mount(self, "oracle-gguf") as m:
            self.assertEqual(read(m.p("layers", "template")), tpl)
            self.assertEqual(read(m.p("layers", "system")), "")

    def test_per_tensor_model(self):
        """A per-tensor (MLX int4) model: replace the norm's bytes; only its blob is new,
        the quantized weight's blob and its dequantized values stay as they were."""
        man_path = os.path.join(self.root, "manifests/registry.ollama.ai/library/oracle-st/int4")
        man0 = json.loads(read(man_path))
        with Mount(self, "oracle-st:int4") as m:
            norm0 = read(m.p("tensors", "model.norm.weight"), "rb")
            dtype = os.getxattr(m.p("tensors", "model.norm.weight"), "user.tensorfs.dtype").decode()
            deq0 = read(m.p("f32", "model.layers.0.mlp.down_proj.weight"), "rb")
        new = bytes(reversed(norm0))  # same size and dtype, other values
        self.assertNotEqual(new, norm0)
        with Mount(self, "oracle-st:int4", ["rw"]) as m:
            src = os.path.join(self.dir, "norm.bin")
            with open(src, "wb") as f:
                f.write(new)
            self.assertEqual(run(["cp", src, m.p("tensors", "model.norm.weight")]).returncode, 0)
            self.assertEqual(read(m.p("tensors", "model.norm.weight"), "rb"), new)
            # a metadata key would have no place in the model: refused when written (it
            # used to be taken, and then failed the repack's read-back)
            r = run(["sh", "-c", "echo x > '%s'" % m.p("metadata", "comment")])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("holds no metadata keys",
                          os.getxattr(m.path, "user.tensorfs.last_error").decode())
            self.assertEqual(os.listdir(m.p("metadata")), [])
            self.assertIn("done:", unmount_ok(self, m))
        man1 = json.loads(read(man_path))
        d0 = {l.get("name"): l["digest"] for l in man0["layers"]}
        d1 = {l.get("name"): l["digest"] for l in man1["layers"]}
        self.assertNotEqual(d1["model.norm.weight"], d0["model.norm.weight"])
        self.assertEqual(d1["model.layers.0.mlp.down_proj.weight"], d0["model.layers.0.mlp.down_proj.weight"])
        for l in man1["layers"]:
            blob = os.path.join(self.root, "blobs", l["digest"].replace(":", "-"))
            self.assertEqual("sha256:" + sha256(blob), l["digest"])
        with Mount(self, "oracle-st:int4") as m:
            self.assertEqual(read(m.p("tensors", "model.norm.weight"), "rb"), new)
            self.assertEqual(os.getxattr(m.p("tensors", "model.norm.weight"), "user.tensorfs.dtype").decode(), dtype)
            self.assertEqual(read(m.p("f32", "model.layers.0.mlp.down_proj.weight"), "rb"), deq0)

    def test_output_to_new_tag(self):
        sha0 = sha256(self.manifest)
        with Mount(self, self.manifest, ["rw", "output=oracle-gguf:edited"]) as m:
            write(m.p("metadata", "test.u8"), "7")
            self.assertIn("done:", unmount_ok(self, m))
        self.assertEqual(sha256(self.manifest), sha0)
        new = os.path.join(self.root, "manifests/registry.ollama.ai/library/oracle-gguf/edited")
        self.assertTrue(os.path.exists(new))
        with Mount(self, "oracle-gguf:edited") as m:
            self.assertEqual(rv(m.p("metadata", "test.u8")), "7")
        with Mount(self, "oracle-gguf") as m:
            self.assertEqual(rv(m.p("metadata", "test.u8")), "255")

    def test_kill9_after_close(self):
        with Mount(self, "oracle-gguf", ["rw"]) as m:
            write(m.p("metadata", "general.name"), "kept")
            write(m.p("layers", "system"), "You are terse.")
            kill9_daemon(self, m)
        with Mount(self, "oracle-gguf", ["rw"]) as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "kept")
            self.assertEqual(read(m.p("layers", "system")), "You are terse.")
            self.assertIn("done:", unmount_ok(self, m))
        with Mount(self, "oracle-gguf") as m:
            self.assertEqual(rv(m.p("metadata", "general.name")), "kept")
            self.assertEqual(read(m.p("layers", "system")), "You are terse.")


if __name__ == "__main__":
    main()
