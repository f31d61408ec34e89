#!/usr/bin/python3
"""Edits made with real tools through a rw mount keep every item's type, dtype, shape and
place: sed -i, vim -es (backupcopy=no and =yes), Python's mkstemp + os.replace, cp + mv.
A rename onto an existing key, tensor or layer replaces its content; the new content is
parsed against the replaced item (EINVAL and nothing changed when it does not fit); an
explicit type set on the temporary wins; editors' temporaries never reach the output.
Every repacked file is read back with a reader written here (not tensorfs'); Ollama
layers are checked as Ollama reads them.
"""
import errno
import json
import os
import shutil
import struct
import subprocess
import tempfile

import numpy as np

from harness import TESTDATA, Mount, TestCase, main, quick, run
from test_rw import (OllamaStore, kill9_daemon, read, rv, st_bytes, st_parse,
                     unmount_ok, write, write_file)

GGUF_SRC = os.path.join(TESTDATA, "gguf", "mixed_flat.gguf")
GGUF_TYPES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32",
              6: "float32", 7: "bool", 8: "string", 9: "array", 10: "uint64", 11: "int64",
              12: "float64"}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
TEMP_NAME_PARTS = ("~", ".swp", ".tmp", "sed", "4913", "tmp")


def gguf_parse(path):
    """An independent GGUF header reader: ([(key, type name, raw payload)], [(name, type, ne,
    offset)]) in file order."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(n):
        nonlocal pos
        b = data[pos:pos + n]
        assert len(b) == n, "truncated GGUF"
        pos += n
        return b

    def u32():
        return struct.unpack("<I", take(4))[0]

    def u64():
        return struct.unpack("<Q", take(8))[0]

    def string():
        return take(u64())

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = u32(), u64()
            return (GGUF_TYPES[et], [value(et) for _ in range(n)])
        return take(SCALAR[t])

    assert take(4) == b"GGUF"
    assert u32() == 3
    nt, nk = u64(), u64()
    kvs = []
    for _ in range(nk):
        k = string().decode()
        t = u32()
        kvs.append((k, GGUF_TYPES[t], value(t)))
    tensors = []
    for _ in range(nt):
        name = string().decode()
        nd = u32()
        ne = [u64() for _ in range(nd)]
        tensors.append((name, u32(), ne, u64()))
    return kvs, tensors


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)


def vim(path, cmd, backupcopy):
    """vim -es: one substitution saved with :wq ('backupskip=' because the tests live in /tmp,
    which vim otherwise writes in place)."""
    r = subprocess.run(["vim", "-N", "-u", "NONE", "-i", "NONE", "-es",
                        "-c", "set backupskip= writebackup backupcopy=" + backupcopy,
                        "-c", cmd, "-c", "wq", path], capture_output=True, text=True, timeout=60)
    return r.returncode


def atomic_replace(path, data, xattrs=()):
    """What Python code that saves safely does: mkstemp beside the file, write, fsync,
    os.replace.  Returns the temporary's path."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    for k, v in xattrs:
        os.setxattr(tmp, k, v)
    os.replace(tmp, path)
    return tmp


def no_temp_names(tc, names):
    for n in names:
        for part in TEMP_NAME_PARTS:
            tc.assertFalse(n.endswith("~") or n.startswith(".") or n.startswith("sed") or
                           n.endswith(".tmp") or n.isdigit() or n.startswith("tmp"),
                           "a temporary reached the model: %r" % n)


class GGUF(TestCase):
    def setUp(self):
        if not shutil.which("vim"):
            self.skipTest("vim is not installed")
        self.dir = self.tmpdir()
        self.src = os.path.join(self.dir, "model.gguf")
        shutil.copyfile(GGUF_SRC, self.src)
        self.kvs, self.tensors = gguf_parse(self.src)

    def test_every_tool_keeps_types_and_places(self):
        f16_new = np.arange(32 * 64, dtype=np.float16).reshape(32, 64)
        f32_new = np.full((32, 64), 0.25, np.float32)
        with Mount(self, self.src, ["rw"]) as m:
            md, tn = m.p("metadata"), m.p("tensors")
            # sed -i: sedXXXXXX written, renamed over the key
            r = sh("sed -i 's/255/254/' %s/test.u8" % md)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(rv(os.path.join(md, "test.u8")), "254")
            self.assertEqual(os.getxattr(os.path.join(md, "test.u8"), "user.tensorfs.type"), b"uint8")
            # vim, renaming the original away to x~ and writing a new x
            self.assertEqual(vim(os.path.join(md, "test.u32"), "s/4294967295/7/", "no"), 0)
            self.assertEqual(rv(os.path.join(md, "test.u32")), "7")
            self.assertEqual(os.getxattr(os.path.join(md, "test.u32"), "user.tensorfs.type"), b"uint32")
            # vim, copying the original to x~ and writing x in place
            self.assertEqual(vim(os.path.join(md, "test.i16"), "s/-32768/-5/", "yes"), 0)
            self.assertEqual(rv(os.path.join(md, "test.i16")), "-5")
            self.assertEqual(os.getxattr(os.path.join(md, "test.i16"), "user.tensorfs.type"), b"int16")
            # vim on an array
            self.assertEqual(vim(os.path.join(md, "test.arr_i32"), "s/42/43/e|s/0, -1/0, 9/", "no"), 0)
            self.assertEqual(rv(os.path.join(md, "test.arr_i32")), "[-2147483648, 2147483647, 0, 9]")
            self.assertEqual(os.getxattr(os.path.join(md, "test.arr_i32"), "user.tensorfs.type"),
                             b"array[int32]")
            # Python's atomic replace
            atomic_replace(os.path.join(md, "test.f32"), b"2.5\n")
            self.assertEqual(rv(os.path.join(md, "test.f32")), "2.5")
            self.assertEqual(os.getxattr(os.path.join(md, "test.f32"), "user.tensorfs.type"), b"float32")
            atomic_replace(os.path.join(tn, "t.f16"), f16_new.tobytes())
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f16"), "user.tensorfs.dtype"), b"F16")
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f16"), "user.tensorfs.shape"), b"32,64")
            # cp + mv of a tensor's bytes
            q = os.path.join(self.dir, "q.bin")
            write_file(q, f32_new.tobytes())
            self.assertEqual(run(["cp", q, os.path.join(tn, ".tmp")]).returncode, 0)
            self.assertEqual(run(["mv", os.path.join(tn, ".tmp"), os.path.join(tn, "t.f32")]).returncode, 0)
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f32"), "user.tensorfs.dtype"), b"F32")
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f32"), "user.tensorfs.shape"), b"32,64")
            self.assertEqual(read(os.path.join(tn, "t.f32"), "rb"), f32_new.tobytes())
            self.assertEqual(np.load(m.p("npy", "t.f16.npy")).tolist(), f16_new.tolist())
            # nothing of the editors is left in the directories
            for d in (md, tn):
                no_temp_names(self, os.listdir(d))
            self.assertIn("done:", unmount_ok(self, m))
        kvs, tensors = gguf_parse(self.src)
        # the same keys, in the same order, with the same types
        self.assertEqual([(k, t) for k, t, _ in kvs], [(k, t) for k, t, _ in self.kvs])
        got = {k: v for k, _, v in kvs}
        self.assertEqual(got["test.u8"], b"\xfe")
        self.assertEqual(got["test.u32"], struct.pack("<I", 7))
        self.assertEqual(got["test.i16"], struct.pack("<h", -5))
        self.assertEqual(got["test.f32"], struct.pack("<f", 2.5))
        self.assertEqual(got["test.arr_i32"][1][-1], struct.pack("<i", 9))
        # the same tensors, in the same order, with the same types and shapes
        self.assertEqual([(n, t, ne) for n, t, ne, _ in tensors],
                         [(n, t, ne) for n, t, ne, _ in self.tensors])

    @quick
    def test_rename_onto_a_key_parses_as_its_type(self):
        with Mount(self, self.src, ["rw"]) as m:
            md = m.p("metadata")
            # a real new key (a string) moved onto a typed one: read again as uint16
            write(os.path.join(md, "new.k"), "17\n")
            os.rename(os.path.join(md, "new.k"), os.path.join(md, "test.u16"))
            self.assertEqual(rv(os.path.join(md, "test.u16")), "17")
            self.assertEqual(os.getxattr(os.path.join(md, "test.u16"), "user.tensorfs.type"), b"uint16")
            self.assertNotIn("new.k", os.listdir(md))
            # a value that does not parse: EINVAL, the old value and the temporary stay
            tmp = os.path.join(md, "tmpabcd1234")
            write(tmp, "abc")
            with self.assertRaises(OSError) as cm:
                os.rename(tmp, os.path.join(md, "test.u8"))
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertEqual(rv(os.path.join(md, "test.u8")), "255")
            self.assertEqual(read(tmp), "abc")
            why = os.getxattr(m.path, "user.tensorfs.last_error").decode()
            self.assertIn("metadata/test.u8 (renamed from tmpabcd1234)", why)   # the target first
            self.assertIn("uint8", why)
            # an explicit type on the temporary wins
            os.setxattr(tmp, "user.tensorfs.type", b"int64")
            write(tmp, "-3")
            os.rename(tmp, os.path.join(md, "test.u8"))
            self.assertEqual(rv(os.path.join(md, "test.u8")), "-3")
            self.assertEqual(os.getxattr(os.path.join(md, "test.u8"), "user.tensorfs.type"), b"int64")
            # a typed real key moved onto another keeps its own type
            k = os.path.join(md, "typed.k")
            write(k, "")
            os.setxattr(k, "user.tensorfs.type", b"float64")
            write(k, "0.5")
            os.rename(k, os.path.join(md, "test.i8"))
            self.assertEqual(os.getxattr(os.path.join(md, "test.i8"), "user.tensorfs.type"), b"float64")
            # mv x x~ then rm x~: x is gone; mv y y~ alone: y stays as it was
            os.rename(os.path.join(md, "test.str"), os.path.join(md, "test.str~"))
            self.assertNotIn("test.str", os.listdir(md))
            self.assertEqual(rv(os.path.join(md, "test.str~")), "hello")
            os.unlink(os.path.join(md, "test.str~"))
            os.rename(os.path.join(md, "test.i32"), os.path.join(md, "test.i32~"))
            # editors' files that are left behind
            write(os.path.join(md, ".general.name.swp"), "\0vim swap")
            write(os.path.join(md, "4913"), "")
            self.assertIn("done:", unmount_ok(self, m))
        kvs, _ = gguf_parse(self.src)
        names = [k for k, _, _ in kvs]
        no_temp_names(self, names)
        self.assertNotIn("test.str", names)
        self.assertNotIn("new.k", names)
        self.assertNotIn("typed.k", names)
        types = {k: t for k, t, _ in kvs}
        self.assertEqual(types["test.u16"], "uint16")
        self.assertEqual(types["test.u8"], "int64")
        self.assertEqual(types["test.i8"], "float64")
        self.assertEqual(types["test.i32"], "int32")  # renamed to a backup name only: kept
        # the replaced keys kept their places
        before = [k for k, _, _ in self.kvs if k not in ("test.str",)]
        self.assertEqual(names, before)

    def test_rename_onto_a_tensor_keeps_dtype_shape_place(self):
        f16 = [t for t in self.tensors if t[0] == "t.f16"][0]
        with Mount(self, self.src, ["rw"]) as m:
            tn = m.p("tensors")
            # a real new tensor (F32 by default) moved onto an F16 one of the same size
            data = np.arange(2048, dtype=np.float16).tobytes()
            write(os.path.join(tn, "newt"), data, "wb")
            self.assertEqual(os.getxattr(os.path.join(tn, "newt"), "user.tensorfs.dtype"), b"F32")
            os.rename(os.path.join(tn, "newt"), os.path.join(tn, "t.f16"))
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f16"), "user.tensorfs.dtype"), b"F16")
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f16"), "user.tensorfs.shape"), b"32,64")
            self.assertNotIn("newt", os.listdir(tn))
            self.assertNotIn("newt", os.listdir(m.p("f32")))
            # bytes of the wrong size: EINVAL, the old bytes and the temporary stay
            write(os.path.join(tn, ".tmp"), b"\0" * 100, "wb")
            with self.assertRaises(OSError) as cm:
                os.rename(os.path.join(tn, ".tmp"), os.path.join(tn, "t.f32"))
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertEqual(os.path.getsize(os.path.join(tn, "t.f32")), 8192)
            self.assertEqual(os.path.getsize(os.path.join(tn, ".tmp")), 100)
            self.assertIn("100 bytes", os.getxattr(m.path, "user.tensorfs.last_error").decode())
            # an explicit dtype and shape on the temporary win
            os.setxattr(os.path.join(tn, ".tmp"), "user.tensorfs.dtype", b"I8")
            os.setxattr(os.path.join(tn, ".tmp"), "user.tensorfs.shape", b"10,10")
            os.rename(os.path.join(tn, ".tmp"), os.path.join(tn, "t.f32"))
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f32"), "user.tensorfs.dtype"), b"I8")
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f32"), "user.tensorfs.shape"), b"10,10")
            # a crash now: the replayed journal shows the same
            shown = {n: read(os.path.join(tn, n), "rb") for n in os.listdir(tn)}
            self.assertIn("done:", unmount_ok(self, m))
        _, tensors = gguf_parse(self.src)
        by = {t[0]: t for t in tensors}
        self.assertEqual([t[0] for t in tensors], [t[0] for t in self.tensors])
        self.assertEqual(by["t.f16"][1:3], f16[1:3])
        self.assertEqual(by["t.f32"][1:3], (24, [10, 10]))
        with Mount(self, self.src) as m:
            self.assertEqual({n: read(m.p("tensors", n), "rb") for n in os.listdir(m.p("tensors"))},
                             shown)

    def test_open_files_outlive_a_rename_over_them(self):
        """A reader's open tensor or key replaced by a rename (what `sed -i`, vim and
        os.replace do) stays readable as on any file system: fstat works (nlink 0) and
        reads give its bytes whole, the old ones for a tensor (the bytes it opened), the old
        or the new value for a key; a new open reads the new bytes.  (It used to be ENOENT
        for fstat and 0 bytes for read.)"""
        with Mount(self, self.src, ["rw"]) as m:
            tn, md = m.p("tensors"), m.p("metadata")
            key = [k for k, t, _ in self.kvs if t == "string"][0]
            old = read(os.path.join(tn, "t.f32"), "rb")
            new = np.full(len(old) // 4, 7.0, np.float32).tobytes()
            fd = os.open(os.path.join(tn, "t.f32"), os.O_RDONLY)
            kfd = os.open(os.path.join(md, key), os.O_RDONLY)
            try:
                oldname = os.pread(kfd, 4096, 0)
                write(os.path.join(tn, ".t.tmp"), new, "wb")
                os.rename(os.path.join(tn, ".t.tmp"), os.path.join(tn, "t.f32"))
                write(os.path.join(md, ".n.tmp"), b"renamed over\n", "wb")
                os.rename(os.path.join(md, ".n.tmp"), os.path.join(md, key))
                st = os.fstat(fd)
                self.assertEqual((st.st_size, st.st_nlink), (len(old), 0))
                self.assertEqual(os.pread(fd, len(old) + 10, 0), old)
                self.assertEqual(os.fstat(kfd).st_nlink, 0)
                for _ in range(2):
                    self.assertIn(os.pread(kfd, 4096, 0), (oldname, b"renamed over\n"))
            finally:
                os.close(fd)
                os.close(kfd)
            self.assertEqual(read(os.path.join(tn, "t.f32"), "rb"), new)
            self.assertEqual(read(os.path.join(md, key), "rb"), b"renamed over\n")
            self.assertIn("done:", unmount_ok(self, m))

    def test_backup_by_rename_of_a_tensor(self):
        """What vim with backupcopy=no does to a tensor: mv x x~, write a new x, rm x~."""
        new = np.arange(2048, dtype=np.float16)
        with Mount(self, self.src, ["rw"]) as m:
            tn = m.p("tensors")
            os.rename(os.path.join(tn, "t.f16"), os.path.join(tn, "t.f16~"))
            self.assertNotIn("t.f16", os.listdir(tn))
            write(os.path.join(tn, "t.f16"), new.tobytes(), "wb")
            os.unlink(os.path.join(tn, "t.f16~"))
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f16"), "user.tensorfs.dtype"), b"F16")
            self.assertEqual(os.getxattr(os.path.join(tn, "t.f16"), "user.tensorfs.shape"), b"32,64")
            self.assertEqual(np.fromfile(m.p("f32", "t.f16"), "<f4").tolist(),
                             new.astype(np.float32).tolist())
            self.assertIn("t.f16.npy", os.listdir(m.p("npy")))
            self.assertIn("done:", unmount_ok(self, m))
        _, tensors = gguf_parse(self.src)
        self.assertEqual([(n, t, ne) for n, t, ne, _ in tensors],
                         [(n, t, ne) for n, t, ne, _ in self.tensors])

    def test_replacements_survive_kill9(self):
        staging = os.path.join(self.dir, "staging")
        m = Mount(self, self.src, ["rw", "staging=" + staging])
        with m:
            md, tn = m.p("metadata"), m.p("tensors")
            self.assertEqual(sh("sed -i 's/65535/3/' %s/test.u16" % md).returncode, 0)
            write(os.path.join(md, "new.k"), "9")
            os.rename(os.path.join(md, "new.k"), os.path.join(md, "test.u8"))
            write(os.path.join(tn, "newt"), np.ones(1024, np.float32).tobytes(), "wb")
            os.rename(os.path.join(tn, "newt"), os.path.join(tn, "t.f16"))
            write(os.path.join(md, ".left.swp"), "swap")  # never journaled
            shown = ({n: read(os.path.join(md, n)) for n in os.listdir(md) if n[0] != "."},
                     {n: read(os.path.join(tn, n), "rb") for n in os.listdir(tn)})
            kill9_daemon(self, m)
        with Mount(self, self.src, ["rw", "staging=" + staging]) as m:
            md, tn = m.p("metadata"), m.p("tensors")
            self.assertNotIn(".left.swp", os.listdir(md))
            self.assertEqual(({n: read(os.path.join(md, n)) for n in os.listdir(md)},
                              {n: read(os.path.join(tn, n), "rb") for n in os.listdir(tn)}), shown)
            self.assertIn("done:", unmount_ok(self, m))
        kvs, _ = gguf_parse(self.src)
        self.assertEqual([(k, t) for k, t, _ in kvs], [(k, t) for k, t, _ in self.kvs])


class Safetensors(TestCase):
    def setUp(self):
        self.dir = self.tmpdir()
        self.src = os.path.join(self.dir, "model.safetensors")
        rng = np.random.default_rng(3)
        self.t = [("a.weight", rng.standard_normal((4, 8), dtype=np.float32).astype(np.float16)),
                  ("b.bias", np.arange(8, dtype=np.int32)),
                  ("c.weight", rng.standard_normal((2, 3), dtype=np.float32))]
        write_file(self.src, st_bytes(self.t, {"format": "pt", "note": "old note"}))

    def test_tools_keep_dtypes_and_shapes(self):
        new_a = np.full((4, 8), 2, np.float16)
        with Mount(self, self.src, ["rw"]) as m:
            md, tn = m.p("metadata"), m.p("tensors")
            self.assertEqual(sh("sed -i 's/old/new/' %s/note" % md).returncode, 0)
            if shutil.which("vim"):
                self.assertEqual(vim(os.path.join(md, "format"), "s/pt/np/", "no"), 0)
                self.assertEqual(vim(os.path.join(md, "note"), "s/new/newer/", "yes"), 0)
                self.assertEqual(vim(os.path.join(md, "note"), "s/newer/new/", "no"), 0)
            else:
                atomic_replace(os.path.join(md, "format"), b"np\n")
            atomic_replace(os.path.join(tn, "a.weight"), new_a.tobytes())
            q = os.path.join(self.dir, "b.bin")
            write_file(q, np.arange(8, 16, dtype=np.int32).tobytes())
            self.assertEqual(run(["cp", q, os.path.join(tn, "b.tmp")]).returncode, 0)
            self.assertEqual(run(["mv", os.path.join(tn, "b.tmp"), os.path.join(tn, "b.bias")]).returncode, 0)
            # the wrong size for c.weight: refused, kept
            write(os.path.join(tn, ".c"), b"\0" * 12, "wb")
            with self.assertRaises(OSError):
                os.rename(os.path.join(tn, ".c"), os.path.join(tn, "c.weight"))
            self.assertIn("done:", unmount_ok(self, m))
        meta, tensors = st_parse(self.src)
        self.assertEqual(meta, {"format": "np", "note": "new note"})
        self.assertEqual(list(tensors), ["a.weight", "b.bias", "c.weight"])
        self.assertEqual(tensors["a.weight"][:2], ("F16", [4, 8]))
        self.assertEqual(tensors["a.weight"][2], new_a.tobytes())
        self.assertEqual(tensors["b.bias"][:2], ("I32", [8]))
        self.assertEqual(tensors["b.bias"][2], np.arange(8, 16, dtype=np.int32).tobytes())
        self.assertEqual(tensors["c.weight"][2], self.t[2][1].tobytes())


class Ollama(OllamaStore, TestCase):

    def layers(self):
        """{kind: bytes} of the manifest's layers, read from the blobs."""
        man = json.loads(read(self.manifest))
        out = {}
        for l in man["layers"]:
            kind = l["mediaType"].rsplit(".", 1)[-1]
            with open(os.path.join(self.root, "blobs", l["digest"].replace(":", "-")), "rb") as f:
                out.setdefault(kind, f.read())
        return out

    def test_layers_edited_with_tools(self):
        before = self.layers()
        with Mount(self, "oracle-gguf", ["rw"]) as m:
            ly, md = m.p("layers"), m.p("metadata")
            tpl = read(os.path.join(ly, "template"))
            r = sh("sed -i 's/Prompt/Prompt }}{{ .System/' %s/template" % ly)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(read(os.path.join(ly, "template")),
                             tpl.replace("Prompt", "Prompt }}{{ .System"))
            self.assertEqual(os.getxattr(os.path.join(ly, "template"), "user.tensorfs.media_type"),
                             b"application/vnd.ollama.image.template")
            write(os.path.join(ly, "system.tmp"), "You are terse.\n")
            r = run(["mv", os.path.join(ly, "system.tmp"), os.path.join(ly, "system")])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(read(os.path.join(ly, "system")), "You are terse.\n")
            # params must be a JSON object of option values
            for bad in ('{bad', '[1, 2]', '{"stop": {"a": 1}}'):
                with self.assertRaises(OSError) as cm:
                    write(os.path.join(ly, "params"), bad)
                self.assertEqual(cm.exception.errno, errno.EINVAL)
                self.assertIn("layers/params", os.getxattr(m.path, "user.tensorfs.last_error").decode())
            left = set(os.listdir(ly))
            with self.assertRaises(OSError):
                atomic_replace(os.path.join(ly, "template"), b"\xff\xfe bad utf-8")
            for tmp in set(os.listdir(ly)) - left:  # the refused temporary stays, as the
                os.unlink(os.path.join(ly, tmp))    # rule says; the caller removes it
            good = '{"temperature": 0.5, "stop": ["</s>", "<|end|>"]}'
            atomic_replace(os.path.join(ly, "params"), good.encode())
            # GGUF keys in the classic model, edited with sed and vim
            self.assertEqual(sh("sed -i 's/255/7/' %s/test.u8" % md).returncode, 0)
            self.assertEqual(os.getxattr(os.path.join(md, "test.u8"), "user.tensorfs.type"), b"uint8")
            if shutil.which("vim"):
                for bc, (a, b) in (("no", ("-32768", "-4")), ("yes", ("-4", "-3"))):
                    self.assertEqual(vim(os.path.join(md, "test.i16"), "s/%s/%s/" % (a, b), bc), 0)
                    self.assertEqual(os.getxattr(os.path.join(md, "test.i16"),
                                                 "user.tensorfs.type"), b"int16")
                self.assertEqual(rv(os.path.join(md, "test.i16")), "-3")
            no_temp_names(self, os.listdir(ly))
            self.assertIn("done:", unmount_ok(self, m))
        after = self.layers()
        self.assertEqual(set(after), set(before))  # no new layer (no template.tmp, no json)
        self.assertEqual(after["template"].decode(), tpl.replace("Prompt", "Prompt }}{{ .System"))
        self.assertEqual(after["system"], b"You are terse.\n")
        self.assertEqual(json.loads(after["params"]), json.loads(good))
        with Mount(self, self.manifest) as m:
            self.assertEqual(rv(m.p("metadata", "test.u8")), "7")
            self.assertEqual(os.getxattr(m.p("metadata", "test.u8"), "user.tensorfs.type"), b"uint8")


if __name__ == "__main__":
    main()
