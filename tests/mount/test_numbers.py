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

NumbersMLX: the same through an Ollama store of MLX-quantized weights built here (int4 and
int8 affine with BF16, F16 and F32 companions, mxfp4, mxfp8, nvfp4 with and without a
per-row global scale): after the edits and the repack every weight blob must hold exactly
what mlxquant.py (mx.quantize's formulas in numpy) makes of the edited groups, every other
group its old bytes, every blob its sha256 and the manifest its layers.
"""
import ctypes
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from harness import SANITIZED, Mount, TestCase, kill_daemon, main, quick
import ggufgen
import mlxquant as mq
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

    @quick
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
        the daemon's peak RSS stays under 64 MiB.  (Under the sanitizers, harness.SANITIZED,
        16 MiB: the same staging and chunks, a quarter of the Q4_K fits, 10 CPU-s there at 64;
        ASan's RSS says little of tensorfs' own.)"""
        rows = 1024 if SANITIZED else 4096
        rng = np.random.default_rng(9)
        path = os.path.join(self.tmpdir(), "big.gguf")
        w = ggufgen.GGUFWriter(alignment=32)
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        w.add_tensor("big", "Q4_K", ggml_quantize(self.g, "Q4_K", rng.standard_normal(rows * 4096)),
                     ne=[4096, rows])
        w.write(path)
        new = rng.standard_normal((rows, 4096)).astype(np.float32)
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


    def test_narrow_float_types(self):
        """F8_E4M3FNUZ, F8_E5M2FNUZ, F8_E8M0, F6_E2M3, F6_E3M2, F4 and C64 tensors written
        as numbers: every value becomes the code torch and ml_dtypes give it (worked out by hand
        below: ties to even, FNUZ overflow to NaN, F6/F4 saturating), sub-byte codes packed
        low bits first; a value a type cannot hold (a negative E8M0, an F4 NaN) is refused
        with EINVAL naming the element, and stages nothing."""
        cases = {   # name: (dtype, values written, codes expected)
            "fnuz43": ("F8_E4M3FNUZ", [1.0, -1.0, 240.0, 248.0, -1e-9, 0.5],
                       [0x40, 0xc0, 0x7f, 0x80, 0x00, 0x38]),
            "fnuz52": ("F8_E5M2FNUZ", [1.0, 57344.0, 61440.0, -2.0], [0x40, 0x7f, 0x80, 0xc4]),
            "e8m0": ("F8_E8M0", [1.0, 1.5, 0.25, 2.0 ** -127], [0x7f, 0x80, 0x7d, 0x00]),
            "f6a": ("F6_E2M3", [1.0, -2.0, 0.5, 7.5, 8.0, 0.0625, -0.0, 3.0],
                    [0x08, 0x30, 0x04, 0x1f, 0x1f, 0x00, 0x20, 0x14]),
            "f6b": ("F6_E3M2", [28.0, 0.09375, 1.0, -0.25], [0x1f, 0x02, 0x0c, 0x24]),
            "f4": ("F4", [0.25, 0.75, 5.0, 7.0, -6.0, 1.5], [0x0, 0x2, 0x6, 0x7, 0xf, 0x3]),
        }
        width = {"F6_E2M3": 6, "F6_E3M2": 6, "F4": 4}

        def pack(dtype, codes):
            w = width.get(dtype, 8)
            bits = sum(c << (w * k) for k, c in enumerate(codes))
            return bits.to_bytes(len(codes) * w // 8, "little")

        path = os.path.join(self.tmpdir(), "narrow.safetensors")
        start = {n: pack(dt, [0x7f if dt == "F8_E8M0" else 0] * len(codes))
                 for n, (dt, _, codes) in cases.items()}
        c64 = np.array([1.5, -2.0, 0.1, 3e38], "<f4")   # C64's f32/: (re, im) pairs, as stored
        with open(path, "wb") as f:
            f.write(stgen.st_raw([(n, dt, [len(codes)], start[n])
                                  for n, (dt, _, codes) in cases.items()] +
                                 [("c64", "C64", [2], bytes(16))]))
        with Mount(self, path, ["rw"]) as m:
            for name, vals in (("e8m0", [1.0, -1.0, 1.0, 1.0]), ("f4", [1.0] * 5 + [np.nan])):
                with self.assertRaises(OSError) as cm:
                    with open(m.p("f32", name), "wb") as f:
                        f.write(np.array(vals, "<f4").tobytes())
                self.assertEqual(cm.exception.errno, errno.EINVAL, name)
                err = os.getxattr(m.path, "user.tensorfs.last_error")
                self.assertIn(b"element %d" % (len(vals) - 1 if name == "f4" else 1), err)
                still = np.fromfile(m.p("f32", name), "<f4")   # the refused values are not there
                self.assertEqual(still.tolist(), [1.0 if name == "e8m0" else 0.0] * len(vals))
            for name, (dt, vals, _) in cases.items():
                with open(m.p("f32", name), "wb") as f:
                    f.write(np.array(vals, "<f4").tobytes())
            with open(m.p("f32", "c64"), "wb") as f:
                f.write(c64.tobytes())
            self.assertEqual(np.load(m.p("npy", "c64.npy")).tobytes(), c64.tobytes())   # complex64
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(path, "rb") as f:
            tensors, _ = st_read(f.read())
        for name, (dt, _, codes) in cases.items():
            self.assertEqual(tensors[name][0], dt)
            self.assertEqual(tensors[name][2].hex(), pack(dt, codes).hex(), name)
        self.assertEqual(tensors["c64"][2], c64.tobytes())

# ==== MLX-quantized weights of an Ollama store ====

ROWS, COLS = 8, 256
# name: (quant type, mode, bits, group, scale dtype, global scale)
MLX_CASES = {
    "w.int4": ("int4", "affine", 4, 64, "BF16", None),
    "w.int8": ("int8", "affine", 8, 64, "BF16", None),
    "w.int4f16": ("int4", "affine", 4, 64, "F16", None),
    "w.int8f32": ("int8", "affine", 8, 64, "F32", None),
    "w.mxfp4": ("mxfp4", "mxfp4", 4, 32, None, None),
    "w.mxfp8": ("mxfp8", "mxfp8", 8, 32, None, None),
    "w.nvfp4": ("nvfp4", "nvfp4", 4, 16, None, None),
    "w.nvfp4gs": ("nvfp4", "nvfp4", 4, 16, None, "rows"),
}


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def st_read(data):
    """{name: (dtype, shape, bytes)} and the metadata of a safetensors blob."""
    n = int.from_bytes(data[:8], "little")
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in hdr.items()}, meta


class MLXWeight:
    """One quantized weight: its parts' bytes, and what its groups dequantize to."""

    def __init__(self, name, case, rng):
        self.name = name
        self.qt, self.mode, self.bits, self.group, sdt, gs = case
        self.sdt = sdt or "U8"
        self.gs = (rng.uniform(0.5, 2, ROWS).astype(np.float32) if gs else None)
        w = (rng.standard_normal((ROWS, COLS)) * rng.uniform(0.01, 3, (ROWS, 1))).astype(np.float32)
        self.words, self.s, self.b = mq.quantize(self.mode, self.bits, self.group, w, self.sdt, self.gs)

    def values(self, words=None, s=None, b=None):
        return mq.dequantize(self.mode, self.bits, self.group, self.words if words is None else words,
                             s or self.s, b or self.b, self.sdt, self.gs)

    def blob(self):
        t = [(self.name, "U32", list(self.words.shape), self.words.tobytes()),
             (self.name + ".scale", self.sdt, [ROWS, COLS // self.group], self.s)]
        if self.b is not None:
            t.append((self.name + ".bias", self.sdt, [ROWS, COLS // self.group], self.b))
        if self.gs is not None:
            t.append((self.name + ".global_scale", "F32", [ROWS], self.gs.tobytes()))
        return stgen.st_raw(sorted(t), {"quant_type": self.qt, "group_size": str(self.group)})

    def expected(self, new):
        """The parts after writing values new: edited groups quantized, the others kept;
        and the number of groups edited."""
        old = self.values()
        rows, cols = new.shape
        codes = mq.unpack(self.words, self.bits, cols)
        npg = cols // self.group
        pb = 1 if self.sdt == "U8" else 4 if self.sdt == "F32" else 2
        s, b = bytearray(self.s), bytearray(self.b) if self.b is not None else None
        n = 0
        for r in range(rows):
            for g in range(npg):
                sl = slice(g * self.group, (g + 1) * self.group)
                if np.array_equal(old[r, sl].view(np.uint32), new[r, sl].view(np.uint32)):
                    continue
                n += 1
                gsr = None if self.gs is None else self.gs[r]
                c, sc, bi = mq.quantize_group(self.mode, self.bits, new[r, sl], gsr)
                codes[r, sl] = c
                at = (r * npg + g) * pb
                if self.mode == "affine":
                    s[at:at + pb] = mq.param_encode([sc], self.sdt)
                    b[at:at + pb] = mq.param_encode([bi], self.sdt)
                else:
                    s[at] = int(sc)
        return mq.pack(codes, self.bits), bytes(s), None if b is None else bytes(b), n


class NumbersMLX(TestCase):
    def setUp(self):
        rng = np.random.default_rng(34)
        self.store = os.path.join(self.tmpdir(), "models")
        os.makedirs(os.path.join(self.store, "blobs"))
        self.w = {n: MLXWeight(n, c, rng) for n, c in MLX_CASES.items()}
        self.norm = stgen.bf16_bits(rng.standard_normal(COLS)).tobytes()
        layers = [self.blob(w.blob(), "application/vnd.ollama.image.tensor", n) for n, w in self.w.items()]
        layers.append(self.blob(stgen.st_raw([("norm", "BF16", [COLS], self.norm)]),
                                "application/vnd.ollama.image.tensor", "norm"))
        layers.append(self.blob(b'{"architectures":["X"]}', "application/vnd.ollama.image.json", "config.json"))
        config = self.blob(b'{"model_format":"safetensors","file_type":"mixed"}',
                           "application/vnd.docker.container.image.v1+json")
        man = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
               "config": config, "layers": layers}
        self.manifest = os.path.join(self.store, "manifests", "registry.ollama.ai", "library", "mlxw", "latest")
        os.makedirs(os.path.dirname(self.manifest))
        with open(self.manifest, "w") as f:
            f.write(json.dumps(man, separators=(",", ":")) + "\n")

    def blob(self, data, media, name=None):
        d = sha(data)
        with open(os.path.join(self.store, "blobs", d.replace(":", "-")), "wb") as f:
            f.write(data)
        layer = {"mediaType": media, "digest": d, "size": len(data)}
        if name:
            layer["name"] = name
        return layer

    def store_tensors(self):
        """{tensor name: bytes} of the store as its manifest says, every digest checked."""
        with open(self.manifest, "rb") as f:
            man = json.loads(f.read())
        out = {}
        for l in [man["config"]] + man["layers"]:
            with open(os.path.join(self.store, "blobs", l["digest"].replace(":", "-")), "rb") as f:
                data = f.read()
            self.assertEqual(sha(data), l["digest"])
            self.assertEqual(len(data), l["size"])
            if l["mediaType"].endswith(".tensor"):
                ts, meta = st_read(data)
                out.update({k: v[2] for k, v in ts.items()})
        return out

    def edit(self, m, rng):
        """Edits every weight one way or another; returns {name: new float32 values}."""
        new = {}
        for k, (name, w) in enumerate(self.w.items()):
            v = w.values().copy()
            how = k % 4
            if how == 0:     # np.save of the whole array, two columns changed
                a = np.load(m.p("npy", name + ".npy"))
                self.assertTrue(np.array_equal(a, v))
                a[:, 17] = 0
                a[:, 200] *= np.float32(1.5)
                np.save(m.p("npy", name + ".npy"), a)
                v = a
            elif how == 1:   # a partial write of row 3 into f32/
                row = rng.standard_normal(COLS).astype(np.float32)
                with open(m.p("f32", name), "r+b") as f:
                    f.seek(3 * COLS * 4)
                    f.write(row.tobytes())
                v[3] = row
            elif how == 2:   # a shared writable memmap, a block of it scaled
                mm = np.load(m.p("npy", name + ".npy"), mmap_mode="r+")
                mm[5:7, 40:90] *= np.float32(-2)
                mm.flush()
                del mm
                v[5:7, 40:90] *= np.float32(-2)
            else:            # one value
                with open(m.p("f32", name), "r+b") as f:
                    f.seek((6 * COLS + 100) * 4)
                    f.write(np.float32(0.125).tobytes())
                v[6, 100] = 0.125
            # and row 7 of every weight: groups of zeros, of one repeated value, heavy-tailed,
            # tiny and huge values (E4M3 scales saturate, nvfp4 scales underflow to 0)
            row = np.concatenate([np.zeros(64), np.full(64, 0.3), rng.standard_cauchy(64),
                                  rng.standard_normal(32) * 1e-30, rng.standard_normal(32) * 1e4])
            row = row.astype(np.float32)
            with open(m.p("f32", name), "r+b") as f:
                f.seek(7 * COLS * 4)
                f.write(row.tobytes())
            v[7] = row
            new[name] = v
        return new

    def test_edits_are_requantized_as_mlx_does(self):
        rng = np.random.default_rng(7)
        with Mount(self, self.manifest, ["rw"]) as m:
            new = self.edit(m, rng)
            exp = {n: w.expected(new[n]) for n, w in self.w.items()}
            for n, w in self.w.items():
                # reads after close: the requantized values, and the companions' new bytes
                got = np.fromfile(m.p("f32", n), dtype="<f4").reshape(ROWS, COLS)
                want = w.values(*exp[n][:3])
                self.assertTrue(np.array_equal(got.view(np.uint32), want.view(np.uint32)), n)
                with open(m.p("tensors", n + ".scale"), "rb") as f:
                    self.assertEqual(f.read(), exp[n][1], n)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got = self.store_tensors()
        changed = 0
        for n, w in self.w.items():
            words, s, b, k = exp[n]
            changed += k
            self.assertGreater(k, 0, n)
            self.assertLess(k, ROWS * COLS // w.group, n)
            self.assertEqual(got[n], words.tobytes(), n)
            self.assertEqual(got[n + ".scale"], s, n)
            if b is not None:
                self.assertEqual(got[n + ".bias"], b, n)
            if w.gs is not None:
                self.assertEqual(got[n + ".global_scale"], w.gs.tobytes(), n)
            # the groups not edited kept their bytes
            old_codes, new_codes = mq.unpack(w.words, w.bits, COLS), mq.unpack(words, w.bits, COLS)
            oldv, newv = w.values(), new[n]
            for r_ in range(ROWS):
                for g in range(COLS // w.group):
                    sl = slice(g * w.group, (g + 1) * w.group)
                    if np.array_equal(oldv[r_, sl], newv[r_, sl]):
                        self.assertTrue(np.array_equal(old_codes[r_, sl], new_codes[r_, sl]), n)
        self.assertEqual(got["norm"], self.norm)
        with Mount(self, self.manifest) as m:
            for n, w in self.w.items():
                a = np.load(m.p("npy", n + ".npy"))
                self.assertTrue(np.array_equal(a, w.values(*exp[n][:3])), n)
                # the edited values came back within MLX's error of what was written (row 7
                # aside: nvfp4 saturates its huge values at 6 x 448, as MLX does)
                err = np.abs(a[:7] - new[n][:7]).max()
                self.assertLess(err, 0.35 * np.abs(new[n][:7]).max(), n)
        print("# %d groups requantized, the others kept" % changed)

    def test_refusals_keep_the_tensor(self):
        with Mount(self, self.manifest, ["rw"]) as m:
            for name, bad in (("w.int4", np.nan), ("w.mxfp4", np.inf), ("w.int4f16", 1e6),
                              ("w.mxfp8", 1e-40)):
                before = [open(m.p("tensors", name + x), "rb").read() for x in ("", ".scale")]
                v = np.fromfile(m.p("f32", name), dtype="<f4")
                v[70] = bad
                if bad == 1e-40:
                    v[64:96] = 0
                    v[70] = bad
                with self.assertRaises(OSError) as cm:
                    with open(m.p("f32", name), "wb") as f:
                        f.write(v.tobytes())
                self.assertEqual(cm.exception.errno, errno.EINVAL, name)
                why = os.getxattr(m.path, "user.tensorfs.last_error").decode()
                self.assertIn("'%s'" % name, why)
                self.assertIn("row 0, elements", why)
                after = [open(m.p("tensors", name + x), "rb").read() for x in ("", ".scale")]
                self.assertEqual(before, after, name)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got = self.store_tensors()
        for n, w in self.w.items():
            self.assertEqual(got[n], w.words.tobytes(), n)
            self.assertEqual(got[n + ".scale"], w.s, n)

    def test_weight_and_companions_are_one_journal_op(self):
        """A kill -9 after close(): the next mount with the same staging directory shows the
        weight and its scales as one change (set_tensors), never one without the other."""
        staging = os.path.join(self.tmpdir(), "staging")
        m = Mount(self, self.manifest, ["rw", "staging=" + staging])
        with m:
            # written twice: the second change supersedes the first (one op, three files left)
            for top in (2, 1):
                v = np.linspace(-1, top, 64, dtype=np.float32)
                with open(m.p("f32", "w.int8"), "r+b") as f:
                    f.write(v.tobytes())
            want = [open(m.p("tensors", "w.int8" + x), "rb").read() for x in ("", ".scale", ".bias")]
            with open(os.path.join(staging, "journal.json")) as f:
                ops = json.load(f)["ops"]
            self.assertEqual([o["op"] for o in ops], ["set_tensors"])
            self.assertEqual([i["name"] for i in ops[0]["items"]], ["w.int8", "w.int8.scale", "w.int8.bias"])
            self.assertEqual(sorted(os.listdir(os.path.join(staging, "data"))),
                             sorted(i["data"][5:] for i in ops[0]["items"]))
            self.assertTrue(np.array_equal(np.fromfile(m.p("f32", "w.int8"), dtype="<f4")[:64],
                                           self.w["w.int8"].values(*self.w["w.int8"].expected(
                                               np.concatenate([v, self.w["w.int8"].values().ravel()[64:]]).reshape(ROWS, COLS))[:3]).ravel()[:64]))
            kill_daemon(m.path)
        with Mount(self, self.manifest, ["rw", "staging=" + staging]) as m:
            got = [open(m.p("tensors", "w.int8" + x), "rb").read() for x in ("", ".scale", ".bias")]
            self.assertEqual(got, want)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        t = self.store_tensors()
        self.assertEqual([t["w.int8"], t["w.int8.scale"], t["w.int8.bias"]], want)

    def test_oracle_store_written_by_mlx(self):
        """The store of tests/data/ollama (blobs written by MLX's save_safetensors): row 2 of
        each quantized weight rewritten through f32/, repacked; the blobs hold what
        mlxquant.py makes of it and are valid."""
        store = os.path.join(self.tmpdir(), "oracle")
        shutil.copytree(os.path.join(os.environ["TFS_TESTDATA"], "ollama", "models"), store)
        rng = np.random.default_rng(3)
        name = "model.layers.0.mlp.down_proj.weight"
        for tag, (mode, bits, group) in (("int4", ("affine", 4, 64)), ("int8", ("affine", 8, 64)),
                                         ("nvfp4", ("nvfp4", 4, 16)), ("mxfp8", ("mxfp8", 8, 32))):
            self.store = store
            self.manifest = os.path.join(store, "manifests", "registry.ollama.ai", "library", "oracle-st", tag)
            before = self.store_tensors()
            w = MLXWeight.__new__(MLXWeight)
            w.name, w.mode, w.bits, w.group, w.gs = name, mode, bits, group, None
            w.sdt = "BF16" if mode == "affine" else "U8"
            w.words = np.frombuffer(before[name], "<u4").reshape(8, -1)
            w.s, w.b = before[name + ".scale"], before.get(name + ".bias")
            cols = w.words.shape[1] * 32 // bits
            new = w.values().copy()
            new[2] = rng.standard_normal(cols).astype(np.float32)
            with Mount(self, self.manifest, ["rw"]) as m:
                with open(m.p("f32", name), "r+b") as f:
                    f.seek(2 * cols * 4)
                    f.write(new[2].tobytes())
                r = m.unmount()
                self.assertEqual(r.returncode, 0, r.stderr)
            words, s, b, k = w.expected(new)
            self.assertEqual(k, cols // group, tag)
            got = self.store_tensors()
            self.assertEqual(got[name], words.tobytes(), tag)
            self.assertEqual(got[name + ".scale"], s, tag)
            if b is not None:
                self.assertEqual(got[name + ".bias"], b, tag)
            self.assertEqual(got["model.norm.weight"], before["model.norm.weight"], tag)


class ImatrixTypes(TestCase):
    def test_refused_at_open_and_at_close(self):
        """IQ2_XXS, IQ2_XS and IQ1_S need an importance matrix (test_imatrix.py gives one):
        without, their views refuse to open for writing, and a view opened while the tensor
        was another type (then retyped by user.tensorfs.dtype to the same bytes as IQ2_XXS)
        refuses its values at close, saying why, naming the tensor and its type; the tensor
        keeps its bytes."""
        path = os.path.join(self.tmpdir(), "iq.gguf")
        w = ggufgen.GGUFWriter(alignment=32)
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        w.add_tensor("q", "TQ2_0", bytes(66 * 2), ne=[256, 2])
        w.add_tensor("iq1", "IQ1_S", bytes(50), ne=[256, 1])
        w.write(path)
        with Mount(self, path, ["rw"]) as m:
            with self.assertRaises(OSError) as cm:
                open(m.p("npy", "iq1.npy"), "r+b")
            self.assertEqual(cm.exception.errno, errno.EOPNOTSUPP)
            why = os.getxattr(m.path, "user.tensorfs.last_error").decode()
            self.assertIn("npy/iq1.npy", why)
            self.assertIn("importance matrix", why)
            f = open(m.p("f32", "q"), "r+b")
            f.write(np.ones(16, np.float32).tobytes())
            f.flush()
            os.setxattr(m.p("tensors", "q"), "user.tensorfs.dtype", b"IQ2_XXS")
            with self.assertRaises(OSError) as cm:
                f.close()
            self.assertEqual(cm.exception.errno, errno.EOPNOTSUPP)
            why = os.getxattr(m.path, "user.tensorfs.last_error").decode()
            self.assertIn("tensor 'q' is IQ2_XXS, which needs an importance matrix", why)
            self.assertIn("the values were not written", why)
            with open(m.p("tensors", "q"), "rb") as t:
                self.assertEqual(t.read(), bytes(132))
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        out = ggufgen.read_gguf(path)
        self.assertEqual([t["name"].decode() for t in out["tensors"]], ["q", "iq1"])


if __name__ == "__main__":
    main()
