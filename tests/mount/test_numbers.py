#!/usr/bin/python3
"""Tensors edited as numbers through f32/ and npy/ of a rw mount (issue 12, phase 2).

numpy edits through the views of F32, F16, Q8_0 and Q4_K tensors of a generated GGUF
(np.save onto npy/, a partial write into f32/ at an offset, a whole rewrite, a shared
writable memmap flushed), then unmount: every edited block of the repacked file must be
ggml_quantize_chunk() of the edited floats (libggml-base.so of the npm package, through
ctypes), every block not edited keep its bytes, the untouched tensors stay byte-identical,
and ggml's gguf_init_from_file reads the result.  Refusals: a .npy of another dtype or shape,
a short f32/ file, a tensor whose type needs an imatrix (EOPNOTSUPP at open), NaN and non-integral values into an
integer safetensors tensor (EINVAL at close).
"""
import ctypes
import errno
import os
import subprocess
import sys

import numpy as np

from harness import Mount, TestCase, main
import ggufgen
import stgen

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import llamacpp  # noqa: E402

TYPE_ID = {"F32": 0, "F16": 1, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14}
BLOCK = {"F32": (1, 4), "F16": (1, 2), "Q8_0": (32, 34), "Q4_K": (256, 144), "Q6_K": (256, 210)}


def ggml_lib():
    g = llamacpp.load_ggml_base()
    g.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    g.ggml_quantize_chunk.restype = ctypes.c_size_t
    return g


def ggml_quantize(g, dtype, values):
    """ggml_quantize_chunk of float32 values as one row."""
    x = np.ascontiguousarray(values, dtype=np.float32).ravel()
    be, bb = BLOCK[dtype]
    out = ctypes.create_string_buffer(x.size // be * bb)
    n = g.ggml_quantize_chunk(TYPE_ID[dtype], x.ctypes.data, out, 0, 1, x.size, None)
    assert n == len(out.raw)
    return out.raw


def expected_bytes(g, dtype, orig_raw, orig_f32, new_f32):
    """The stored bytes after an edit: each block whose floats changed quantized by ggml,
    the others as they were."""
    be, bb = BLOCK[dtype]
    a, b = orig_f32.ravel().view(np.uint32), np.ascontiguousarray(new_f32, np.float32).ravel()
    out = bytearray(orig_raw)
    for k in range(a.size // be):
        blk = b[k * be:(k + 1) * be]
        if not np.array_equal(a[k * be:(k + 1) * be], blk.view(np.uint32)):
            out[k * bb:(k + 1) * bb] = ggml_quantize(g, dtype, blk)
    return bytes(out)


class Numbers(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())
        self.g = ggml_lib()
        rng = np.random.default_rng(12)
        d = self.tmpdir()
        self.path = os.path.join(d, "m.gguf")
        w = ggufgen.GGUFWriter(alignment=32)
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        self.src = {
            "w.f32": ("F32", rng.standard_normal((64, 256)).astype(np.float32)),
            "w.f16": ("F16", rng.standard_normal((32, 256)).astype(np.float16)),
            "w.q8": ("Q8_0", ggml_quantize(self.g, "Q8_0", rng.standard_normal(16 * 256))),
            "w.q4k": ("Q4_K", ggml_quantize(self.g, "Q4_K", rng.standard_normal(16 * 512))),
            "keep": ("Q4_K", ggml_quantize(self.g, "Q4_K", rng.standard_normal(8 * 256))),
            "w.q6k": ("Q6_K", ggml_quantize(self.g, "Q6_K", rng.standard_normal(8 * 512))),
            "iq2": ("IQ2_XXS", rng.integers(0, 256, 66, dtype=np.uint8).tobytes()),
            "norm": ("F32", rng.standard_normal(100).astype(np.float32)),
        }
        ne = {"w.q8": [256, 16], "w.q4k": [512, 16], "keep": [256, 8], "iq2": [256, 1],
              "w.q6k": [512, 8]}
        for name, (dt, data) in self.src.items():
            w.add_tensor(name, dt, data, ne=ne.get(name))
        w.write(self.path)

    def raw(self, name):
        dt, data = self.src[name]
        return data.tobytes() if isinstance(data, np.ndarray) else data

    def test_edits_are_requantized_on_repack(self):
        rng = np.random.default_rng(5)
        with Mount(self, self.path, ["rw"]) as m:
            orig = {n: np.fromfile(m.p("f32", n), dtype="<f4")
                    for n in ("w.q8", "w.q4k", "w.f32", "w.q6k")}
            # np.save onto npy/ (truncate + whole write) of a Q4_K tensor
            w = np.load(m.p("npy", "w.q4k.npy"))
            self.assertEqual(w.shape, (16, 512))
            w[:, 17] = 0
            np.save(m.p("npy", "w.q4k.npy"), w)
            new_q4k = w.copy()
            # a partial write into f32/ of a Q8_0 tensor: row 3 only
            row = rng.standard_normal(256).astype(np.float32)
            with open(m.p("f32", "w.q8"), "r+b") as f:
                f.seek(3 * 256 * 4)
                f.write(row.tobytes())
            new_q8 = orig["w.q8"].copy().reshape(16, 256)
            new_q8[3] = row
            view = np.fromfile(m.p("f32", "w.q8"), dtype="<f4").reshape(16, 256)
            self.assertTrue(np.array_equal(view[[0, 1, 2, 4]], orig["w.q8"].reshape(16, 256)[[0, 1, 2, 4]]))
            self.assertLess(float(np.abs(view[3] - row).max()), float(np.abs(row).max()) / 100)
            # one value of a Q6_K tensor (whose quantizer does not give back the bytes of
            # every dequantized block: the other blocks must keep theirs)
            with open(m.p("f32", "w.q6k"), "r+b") as f:
                f.seek((2 * 512 + 5) * 4)
                f.write(np.float32(3.5).tobytes())
            new_q6k = orig["w.q6k"].copy()
            new_q6k[2 * 512 + 5] = 3.5
            # a shared writable memmap of an F32 tensor's npy/ file
            mm = np.load(m.p("npy", "w.f32.npy"), mmap_mode="r+")
            mm *= np.float32(1.01)
            mm.flush()
            del mm
            # a whole rewrite of an F16 tensor's f32/ file
            new_f16 = rng.standard_normal((32, 256)).astype(np.float32)
            with open(m.p("f32", "w.f16"), "wb") as f:
                f.write(new_f16.tobytes())
            self.assertTrue(np.array_equal(np.fromfile(m.p("f32", "w.f16"), dtype="<f4"),
                                           new_f16.astype(np.float16).astype(np.float32).ravel()))
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        out = ggufgen.read_gguf(self.path)
        with open(self.path, "rb") as f:
            data = f.read()
        got = {t["name"].decode(): data[t["abs_offset"]:t["abs_offset"] + t["nbytes"]]
               for t in out["tensors"]}
        self.assertEqual(got["w.q4k"], expected_bytes(self.g, "Q4_K", self.raw("w.q4k"), orig["w.q4k"], new_q4k))
        self.assertNotEqual(got["w.q4k"], self.raw("w.q4k"))
        self.assertEqual(got["w.q8"], expected_bytes(self.g, "Q8_0", self.raw("w.q8"), orig["w.q8"], new_q8))
        self.assertEqual(got["w.q8"][:3 * 8 * 34], self.raw("w.q8")[:3 * 8 * 34])
        self.assertEqual(got["w.f32"], (self.src["w.f32"][1] * np.float32(1.01)).astype("<f4").tobytes())
        self.assertEqual(got["w.f16"], new_f16.astype("<f2").tobytes())
        self.assertEqual(got["w.q6k"], expected_bytes(self.g, "Q6_K", self.raw("w.q6k"), orig["w.q6k"], new_q6k))
        self.assertNotEqual(ggml_quantize(self.g, "Q6_K", orig["w.q6k"]), self.raw("w.q6k"))
        self.assertEqual(got["keep"], self.raw("keep"))
        self.assertEqual(got["iq2"], self.raw("iq2"))
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "llama", "ggml_gguf.py"), self.path],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_convert(self):
        """user.tensorfs.convert: dequantized, quantized as the new dtype (same shape)."""
        with Mount(self, self.path, ["rw"]) as m:
            t = m.p("tensors", "w.f16")
            os.setxattr(t, "user.tensorfs.convert", b"Q8_0")
            self.assertEqual(os.getxattr(t, "user.tensorfs.dtype"), b"Q8_0")
            self.assertEqual(os.path.getsize(t), 32 * 256 // 32 * 34)
            self.assertEqual(np.load(m.p("npy", "w.f16.npy")).shape, (32, 256))
            q4k = np.fromfile(m.p("f32", "w.q4k"), dtype="<f4")   # the values Q6_K gets
            os.setxattr(m.p("tensors", "w.q4k"), "user.tensorfs.convert", b"Q6_K")
            for name, dt, e in (("norm", b"Q8_0", errno.EINVAL), ("w.q8", b"IQ2_XXS", errno.EOPNOTSUPP),
                                ("w.q8", b"NOPE", errno.EINVAL)):
                with self.assertRaises(OSError) as cm:
                    os.setxattr(m.p("tensors", name), "user.tensorfs.convert", dt)
                self.assertEqual(cm.exception.errno, e, (name, dt))
            self.assertIn(b"NOPE", os.getxattr(m.path, "user.tensorfs.last_error"))
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        out = ggufgen.read_gguf(self.path)
        with open(self.path, "rb") as f:
            data = f.read()
        got = {t["name"].decode(): t for t in out["tensors"]}
        f16 = got["w.f16"]
        self.assertEqual(ggufgen.GGML_NAME[f16["dtype"]], "Q8_0")
        self.assertEqual(f16["ne"][:2], [256, 32])
        self.assertEqual(data[f16["abs_offset"]:f16["abs_offset"] + f16["nbytes"]],
                         ggml_quantize(self.g, "Q8_0", self.src["w.f16"][1].astype(np.float32)))
        q6 = got["w.q4k"]
        self.assertEqual(ggufgen.GGML_NAME[q6["dtype"]], "Q6_K")
        self.assertEqual(data[q6["abs_offset"]:q6["abs_offset"] + q6["nbytes"]],
                         ggml_quantize(self.g, "Q6_K", q4k))

    def test_large_tensor_stays_out_of_memory(self):
        """64 MiB of values through np.save: staged in a file, requantized 1 MiB at a time;
        the daemon's peak RSS stays under 64 MiB."""
        rng = np.random.default_rng(9)
        path = os.path.join(self.tmpdir(), "big.gguf")
        w = ggufgen.GGUFWriter(alignment=32)
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        w.add_tensor("big", "Q4_K", ggml_quantize(self.g, "Q4_K", rng.standard_normal(4096 * 4096)),
                     ne=[4096, 4096])
        w.write(path)
        new = rng.standard_normal((4096, 4096)).astype(np.float32)
        with Mount(self, path, ["rw"]) as m:
            np.save(m.p("npy", "big.npy"), new)
            pid = int(os.getxattr(m.path, "user.tensorfs.pid"))
            with open("/proc/%d/status" % pid) as f:
                hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0]
            self.assertLess(hwm, 64 * 1024, "daemon peak RSS %d KiB" % hwm)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        out = ggufgen.read_gguf(path)
        t = out["tensors"][0]
        with open(path, "rb") as f:
            f.seek(t["abs_offset"])
            self.assertEqual(f.read(t["nbytes"]), ggml_quantize(self.g, "Q4_K", new))

    def test_refusals(self):
        with Mount(self, self.path, ["rw"]) as m:
            w = np.load(m.p("npy", "w.q4k.npy"))
            for bad in (w.astype(np.float64), w[:8], np.asfortranarray(w)):
                with self.assertRaises(OSError) as cm:
                    np.save(m.p("npy", "w.q4k.npy"), bad)
                self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertIn(b"npy/w.q4k.npy", os.getxattr(m.path, "user.tensorfs.last_error"))
            with self.assertRaises(OSError) as cm:
                with open(m.p("f32", "w.q8"), "wb") as f:
                    f.write(b"\0" * 100)
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            with self.assertRaises(OSError) as cm:
                open(m.p("f32", "iq2"), "r+b")
            self.assertEqual(cm.exception.errno, errno.EOPNOTSUPP)
            self.assertIn(b"importance matrix", os.getxattr(m.path, "user.tensorfs.last_error"))
            self.assertTrue(np.array_equal(np.load(m.p("npy", "w.q4k.npy")), w))
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path, "rb") as f:   # nothing changed: nothing written
            self.assertIn(self.raw("w.q4k"), f.read())

    def test_integers_refuse_what_they_cannot_hold(self):
        path = os.path.join(self.tmpdir(), "i.safetensors")
        ints = np.arange(-8, 8, dtype="<i4")
        with open(path, "wb") as f:
            f.write(stgen.st_raw([("n", "I32", [16], ints.tobytes()),
                                  ("b", "BF16", [4], stgen.bf16_bits(np.ones(4)).tobytes())]))
        with Mount(self, path, ["rw"]) as m:
            for bad in (np.nan, np.inf, 1.5, 3e9):
                v = ints.astype(np.float32)
                v[5] = bad
                with self.assertRaises(OSError) as cm:
                    with open(m.p("f32", "n"), "wb") as f:
                        f.write(v.tobytes())
                self.assertEqual(cm.exception.errno, errno.EINVAL, bad)
            self.assertIn(b"element 5", os.getxattr(m.path, "user.tensorfs.last_error"))
            with open(m.p("f32", "n"), "r+b") as f:
                f.seek(4)
                f.write(np.float32(70000).tobytes())
            with open(m.p("f32", "b"), "wb") as f:
                f.write(np.array([1.0, 1.00390625, 3.0, -2.5], "<f4").tobytes())
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(path, "rb") as f:
            data = f.read()
        want = ints.copy()
        want[1] = 70000
        self.assertIn(want.tobytes(), data)
        self.assertIn(stgen.bf16_bits(np.array([1.0, 1.00390625, 3.0, -2.5])).tobytes(), data)


if __name__ == "__main__":
    main()
