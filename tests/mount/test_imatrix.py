#!/usr/bin/python3
"""Tensors written as numbers with an importance matrix (-o imatrix=FILE, issue 12).

A generated GGUF holds IQ2_XXS (three tensors, one of 3 experts), IQ3_S, IQ3_XXS and IQ4_XS
tensors (not IQ1_S or IQ2_XS, whose grids ggml builds in 18 and 4 CPU-s of each process: they
take IQ2_XXS's way through the view, and their quantizers are compared with ggml's, with these
weights and others, whole and from a row on, in quant_ggml); an imatrix in llama.cpp's GGUF
format (NAME.in_sum2 / NAME.counts, one expert never
called) or in its legacy .dat format gives their column weights.  New values go in through
npy/ and f32/ of a rw mount and user.tensorfs.convert; after the repack every tensor must
hold exactly what ggml_quantize_chunk(type, ..., imatrix) of libggml-base.so (the npm
package, through ctypes) makes of the values with the weights llama-quantize would compute
(sums / counts, per expert), and ggml's gguf_init_from_file must read the file.  Without an
imatrix the types ggml refuses (IQ2_XXS, IQ2_XS, IQ1_S) refuse to open for writing, saying
how to give one, while IQ3_S is quantized as ggml does without one.  A bad imatrix file fails
the mount with one line naming it; an entry of the wrong size fails the close with EINVAL.

The other types ggml weighs with an imatrix, Q4_0, Q4_1, Q5_0, Q5_1 (each 32-value block by
its whole row's mean square) and Q2_K..Q6_K (a 3-expert Q4_K among them), written whole must
hold ggml's weighted bytes too, which differ from its unweighted ones (a Q5_0 without an entry
is quantized unweighted).  Written in part (blocks in the middle of a row, a run across a row
boundary, two runs in one row; part of a Q4_K super-block and a whole one of another expert),
only the edited blocks change, each to the same block of ggml's quantization of the whole
tensor's new values: the row's mean square comes from the row's new values, also those
outside the run.
"""
import ctypes
import errno
import os
import struct
import sys
import time

import numpy as np

from harness import Mount, TestCase, assert_reject, main, quick
import ggufgen

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import ggml_gguf  # noqa: E402
import llamacpp  # noqa: E402

# name, type, ne (GGUF order), counts of the imatrix entry (None: no entry)
TENSORS = [
    ("blk.0.attn_q.weight", "IQ2_XXS", [512, 2], [7.0]),
    ("blk.0.ffn_down_exps.weight", "IQ2_XXS", [256, 2, 3], [5.0, 0.0, 2.0]),
    ("blk.0.attn_k.weight", "IQ3_S", [256, 3], [3.0]),
    ("blk.0.attn_v.weight", "IQ3_XXS", [256, 2], None),
    ("blk.0.ffn_up.weight", "IQ2_XXS", [512, 1], [1.0]),
    ("blk.0.ffn_gate.weight", "IQ4_XS", [256, 2], [2.0]),
]

# the other types ggml_quantize_chunk weighs with an imatrix
Q_TENSORS = [
    ("blk.1.attn_q.weight", "Q4_0", [512, 2], [3.0]),
    ("blk.1.attn_k.weight", "Q4_1", [256, 3], [2.0]),
    ("blk.1.attn_v.weight", "Q5_0", [512, 2], [5.0]),
    ("blk.1.attn_output.weight", "Q5_1", [256, 2], [1.0]),
    ("blk.1.ffn_up.weight", "Q2_K", [512, 2], [4.0]),
    ("blk.1.ffn_gate.weight", "Q3_K", [256, 3], [2.0]),
    ("blk.1.ffn_down_exps.weight", "Q4_K", [256, 2, 3], [6.0, 0.0, 3.0]),
    ("blk.1.ffn_down.weight", "Q5_K", [512, 2], [9.0]),
    ("blk.1.ffn_gate_inp.weight", "Q6_K", [256, 2], [2.0]),
    ("blk.1.attn_qkv.weight", "Q5_0", [256, 2], None),
]

# partial writes: tensors, and the runs of values (first, count) written new
PARTIAL_TENSORS = [
    ("p.q4_0.weight", "Q4_0", [512, 4], [3.0]),
    ("p.q5_1.weight", "Q5_1", [512, 4], [2.0]),
    ("p.q4_k.weight", "Q4_K", [256, 2, 3], [5.0, 0.0, 2.0]),
]
ROW_EDITS = [(2 * 512 + 5 * 32, 4 * 32),   # blocks 5..8 of row 2
             (14 * 32, 4 * 32),            # blocks 14, 15 of row 0 and 0, 1 of row 1
             (512 + 9 * 32, 2 * 32)]       # blocks 9, 10 of row 1 (its second run)
PARTIAL_EDITS = {"Q4_0": ROW_EDITS, "Q5_1": ROW_EDITS,
                 "Q4_K": [(256 + 64, 128),  # the middle half of super-block 1 (expert 0)
                          (4 * 256, 256)]}  # all of super-block 4 (expert 2)


def ggml_lib():
    g = llamacpp.load_ggml_base()
    g.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    g.ggml_quantize_chunk.restype = ctypes.c_size_t
    return g


def nelems(ne):
    n = 1
    for v in ne:
        n *= v
    return n


def make_imatrix_gguf(path, entries):
    """entries: name -> (sums float32 [n_mat, ne0], counts [n_mat]), as llama-imatrix writes."""
    w = ggufgen.GGUFWriter(alignment=32)
    w.add_kv("general.type", ggufgen.STRING, "imatrix")
    w.add_kv("imatrix.datasets", ggufgen.ARRAY, (ggufgen.STRING, ["test.txt"]))
    w.add_kv("imatrix.chunk_count", ggufgen.UINT32, 9)
    w.add_kv("imatrix.chunk_size", ggufgen.UINT32, 512)
    for name, (sums, counts) in entries.items():
        w.add_tensor(name + ".in_sum2", "F32", np.asarray(sums, np.float32),
                     ne=[sums.shape[1], sums.shape[0]])
        w.add_tensor(name + ".counts", "F32", np.asarray(counts, np.float32), ne=[1, len(counts)])
    w.write(path)


def make_imatrix_dat(path, entries):
    """The legacy format: one call count per entry."""
    out = [struct.pack("<i", len(entries))]
    for name, (sums, calls) in entries.items():
        b = name.encode()
        out.append(struct.pack("<i", len(b)) + b + struct.pack("<ii", calls, sums.size))
        out.append(np.asarray(sums, np.float32).tobytes())
    out.append(struct.pack("<ii", 9, 8) + b"test.txt")
    with open(path, "wb") as f:
        f.write(b"".join(out))


def expected_weights(sums, counts):
    """llama-quantize's weights: each expert's sums over its count rounded to an integer, or
    all 1 for an expert never called."""
    w = np.empty_like(sums)
    for j, c in enumerate(counts):
        c = np.float32(round(c))
        w[j] = sums[j] / c if c > 0 else np.float32(1)
    return w


class Imatrix(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())
        self.g = ggml_lib()
        self.rng = np.random.default_rng(12)

    def quantize(self, dtype, values, ne, weights):
        """ggml_quantize_chunk of each expert's rows with its weights (None: no imatrix)."""
        per = ne[0] * (ne[1] if len(ne) > 1 else 1)
        x = np.ascontiguousarray(values, np.float32).ravel()
        out = []
        for e in range(x.size // per):
            b = llamacpp.quantize_chunk_cached(self.g, ggufgen.GGML_TYPES[dtype][0],
                                               x[e * per:(e + 1) * per], per // ne[0], ne[0],
                                               None if weights is None else weights[e])
            self.assertEqual(len(b), ggufgen.type_nbytes(dtype, per))
            out.append(b)
        return b"".join(out)

    def make_model(self, path, tensors=TENSORS, data=None):
        """A GGUF of the tensors, all bytes 0 but those data (name -> bytes) gives."""
        w = ggufgen.GGUFWriter(alignment=32)
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        for name, dtype, ne, _ in tensors:
            raw = (data or {}).get(name, bytes(ggufgen.type_nbytes(dtype, nelems(ne))))
            w.add_tensor(name, dtype, raw, ne=ne)
        w.write(path)

    def entries(self, tensors=TENSORS):
        """name -> (sums [n_mat, ne0], counts) for the tensors that have an entry."""
        out = {}
        for name, _, ne, counts in tensors:
            if counts is not None:
                sums = (self.rng.standard_normal((len(counts), ne[0])) ** 2).astype(np.float32)
                out[name] = (sums, counts)
        return out

    def refused(self, m, code, fn, *args):
        """fn(*args) must fail with errno code; returns the mount's last_error."""
        with self.assertRaises(OSError) as cm:
            fn(*args)
        self.assertEqual(cm.exception.errno, code)
        return os.getxattr(m.path, "user.tensorfs.last_error").decode()

    def write_new_values(self, m, tensors):
        """New random values for every tensor of the list, through npy/ and f32/ in turn;
        returns them by name."""
        values = {}
        for k, (name, _, ne, _) in enumerate(tensors):
            v = self.rng.standard_normal(list(reversed(ne))).astype(np.float32)
            if k % 2:
                np.save(m.p("npy", name + ".npy"), v)
            else:
                with open(m.p("f32", name), "r+b") as f:
                    f.write(v.tobytes())
            values[name] = v
        return values

    def tensor_bytes(self, path):
        info = ggml_gguf.read(path, with_bytes=False)
        got = {}
        with open(path, "rb") as f:
            for t in info["tensors"]:
                f.seek(info["data_offset"] + t["offset"])
                got[t["name"]] = f.read(t["size"])
        return got

    def test_values_quantized_with_the_imatrix(self):
        """npy/ and f32/ writes of every IQ tensor, with a GGUF imatrix: bytes as ggml's."""
        d = self.tmpdir()
        model, imat = os.path.join(d, "m.gguf"), os.path.join(d, "imatrix.gguf")
        self.make_model(model)
        ent = self.entries()
        make_imatrix_gguf(imat, ent)
        with Mount(self, model, ["rw", "imatrix=" + imat]) as m:
            for name, _, _, _ in TENSORS:
                self.assertEqual(os.stat(m.p("f32", name)).st_mode & 0o777, 0o644, name)
            values = self.write_new_values(m, TENSORS)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got = self.tensor_bytes(model)
        for name, dtype, ne, counts in TENSORS:
            wts = None if counts is None else expected_weights(*ent[name])
            self.assertEqual(got[name], self.quantize(dtype, values[name], ne, wts),
                             "%s (%s, weights %s)" % (name, dtype, counts))

    @quick
    def test_q_and_k_types_weighted(self):
        """Q4_0..Q5_1 and Q2_K..Q6_K written whole through npy/ and f32/: bytes as ggml's
        with the imatrix weights, which are not its bytes without them; the 3-expert Q4_K
        takes each expert's own weights; a Q5_0 without an entry is quantized unweighted."""
        d = self.tmpdir()
        model, imat = os.path.join(d, "m.gguf"), os.path.join(d, "imatrix.gguf")
        self.make_model(model, Q_TENSORS)
        ent = self.entries(Q_TENSORS)
        make_imatrix_gguf(imat, ent)
        with Mount(self, model, ["rw", "imatrix=" + imat]) as m:
            values = self.write_new_values(m, Q_TENSORS)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got = self.tensor_bytes(model)
        for name, dtype, ne, counts in Q_TENSORS:
            plain = self.quantize(dtype, values[name], ne, None)
            if counts is None:
                self.assertEqual(got[name], plain, "%s (%s, no entry)" % (name, dtype))
                continue
            wts = expected_weights(*ent[name])
            self.assertEqual(got[name], self.quantize(dtype, values[name], ne, wts),
                             "%s (%s, weights %s)" % (name, dtype, counts))
            self.assertNotEqual(got[name], plain, "%s (%s): as without the imatrix" % (name, dtype))
            if len(counts) > 1:
                self.assertNotEqual(got[name], self.quantize(dtype, values[name], ne,
                                                             [wts[0]] * len(counts)),
                                    "%s: every expert weighted as expert 0" % name)

    def test_partial_writes(self):
        """Values written over some blocks of Q4_0, Q5_1 (in a row's middle, across a row
        boundary, a second run in a row) and Q4_K (part of a super-block, a whole one of
        another expert) through f32/ at offsets: every other block keeps its bytes, every
        edited one is the block ggml makes of the whole tensor's new values with the weights,
        its row's mean square taken over the row's new values (not the old ones)."""
        d = self.tmpdir()
        model, imat = os.path.join(d, "m.gguf"), os.path.join(d, "imatrix.gguf")
        # realistic starting bytes: ggml's unweighted quantization of smaller values
        orig = {name: self.quantize(dtype, 0.3 * self.rng.standard_normal(nelems(ne)), ne, None)
                for name, dtype, ne, _ in PARTIAL_TENSORS}
        self.make_model(model, PARTIAL_TENSORS, orig)
        ent = self.entries(PARTIAL_TENSORS)
        make_imatrix_gguf(imat, ent)
        old, new = {}, {}
        with Mount(self, model, ["rw", "imatrix=" + imat]) as m:
            for name, dtype, ne, _ in PARTIAL_TENSORS:
                with open(m.p("f32", name), "r+b") as f:
                    old[name] = np.frombuffer(f.read(), np.float32)
                    v = old[name].copy()
                    for first, n in PARTIAL_EDITS[dtype]:
                        v[first:first + n] = self.rng.standard_normal(n).astype(np.float32)
                        f.seek(4 * first)
                        f.write(v[first:first + n].tobytes())
                new[name] = v
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got = self.tensor_bytes(model)
        for name, dtype, ne, counts in PARTIAL_TENSORS:
            _, be, bb = ggufgen.GGML_TYPES[dtype]
            wts = expected_weights(*ent[name])
            want = self.quantize(dtype, new[name], ne, wts)
            edited = sorted({b for first, n in PARTIAL_EDITS[dtype]
                             for b in range(first // be, (first + n - 1) // be + 1)})
            for b in range(nelems(ne) // be):
                blk = slice(b * bb, (b + 1) * bb)
                self.assertEqual(got[name][blk], (want if b in edited else orig[name])[blk],
                                 "%s (%s): block %d (%s)" % (name, dtype, b,
                                                            "edited" if b in edited else "kept"))
            # the weights mattered: without them, or with the rows' old mean squares (the
            # edited blocks' values in rows of the old ones), ggml makes other bytes
            plain = self.quantize(dtype, new[name], ne, None)
            self.assertTrue(any(got[name][b * bb:(b + 1) * bb] != plain[b * bb:(b + 1) * bb]
                                for b in edited), "%s: as without the imatrix" % name)
            if ne[0] > be:
                self.assert_rows_mean_square_mattered(name, dtype, ne, wts, old[name], new[name],
                                                      got[name], edited)

    def assert_rows_mean_square_mattered(self, name, dtype, ne, wts, old, new, got, edited):
        """Each edited block quantized in a row that is old values but for the block itself
        (so with the old row's mean square) gives other bytes for some edited block."""
        _, be, bb = ggufgen.GGML_TYPES[dtype]
        differs = False
        for b in edited:
            row = b * be // ne[0]
            x = old[row * ne[0]:(row + 1) * ne[0]].copy()
            j = b * be - row * ne[0]
            x[j:j + be] = new[b * be:(b + 1) * be]
            q = self.quantize(dtype, x, [ne[0], 1], wts[:1])
            differs |= q[j // be * bb:(j // be + 1) * bb] != got[b * bb:(b + 1) * bb]
        self.assertTrue(differs, "%s: the rows' old mean squares give the same bytes" % name)

    def test_legacy_dat_and_convert(self):
        """The legacy .dat format, and user.tensorfs.convert of an F16 tensor to IQ2_XXS (and
        of one whose rows are not whole blocks, refused for that, not for its imatrix)."""
        d = self.tmpdir()
        model, imat = os.path.join(d, "m.gguf"), os.path.join(d, "imatrix.dat")
        v = self.rng.standard_normal((2, 512)).astype(np.float32)
        u = self.rng.standard_normal((2, 256)).astype(np.float32)
        w = ggufgen.GGUFWriter(alignment=32)
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        w.add_tensor("a.weight", "IQ2_XXS", bytes(4 * 66), ne=[512, 2])
        w.add_tensor("b.weight", "F16", u.astype(np.float16), ne=[256, 2])
        w.add_tensor("c.weight", "F16", np.zeros((2, 64), np.float16), ne=[64, 2])
        w.write(model)
        sa = (self.rng.standard_normal(512) ** 2).astype(np.float32)
        sb = (self.rng.standard_normal(256) ** 2).astype(np.float32)
        make_imatrix_dat(imat, {"a.weight": (sa, 6), "b.weight": (sb, 3)})
        with Mount(self, model, ["rw", "imatrix=" + imat]) as m:
            np.save(m.p("npy", "a.weight.npy"), v)
            os.setxattr(m.p("tensors", "b.weight"), "user.tensorfs.convert", b"IQ2_XXS")
            why = self.refused(m, errno.EINVAL, os.setxattr,   # rows of 64: never IQ2_XXS
                               m.p("tensors", "c.weight"), "user.tensorfs.convert", b"IQ2_XXS")
            self.assertIn("rows of 64 values are not whole 256-value IQ2_XXS blocks", why)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got = self.tensor_bytes(model)
        self.assertEqual(got["a.weight"], self.quantize("IQ2_XXS", v, [512, 2], [sa / np.float32(6)]))
        uf = u.astype(np.float16).astype(np.float32)
        self.assertEqual(got["b.weight"], self.quantize("IQ2_XXS", uf, [256, 2], [sb / np.float32(3)]))

    def test_without_imatrix(self):
        """No imatrix: IQ2_XXS refuses to open for writing, saying to give one; IQ3_S (which
        ggml quantizes without one) takes values, quantized as ggml does with none."""
        d = self.tmpdir()
        model = os.path.join(d, "m.gguf")
        self.make_model(model)
        v = self.rng.standard_normal((3, 256)).astype(np.float32)
        with Mount(self, model, ["rw"]) as m:
            # the views say so in their mode too: 0444 where values cannot be written
            for view in ("npy/blk.0.attn_q.weight.npy", "f32/blk.0.attn_q.weight"):
                self.assertEqual(os.stat(m.p(view)).st_mode & 0o777, 0o444, view)
            for view in ("npy/blk.0.attn_k.weight.npy", "f32/blk.0.attn_k.weight",
                         "tensors/blk.0.attn_q.weight"):
                self.assertEqual(os.stat(m.p(view)).st_mode & 0o777, 0o644, view)
            why = self.refused(m, errno.EOPNOTSUPP, open, m.p("npy", "blk.0.attn_q.weight.npy"),
                               "r+b")
            self.assertIn("importance matrix", why)
            self.assertIn("-o imatrix=FILE", why)
            self.refused(m, errno.EOPNOTSUPP, os.setxattr, m.p("tensors", "blk.0.attn_k.weight"),
                         "user.tensorfs.convert", b"IQ1_S")
            np.save(m.p("npy", "blk.0.attn_k.weight.npy"), v)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got = self.tensor_bytes(model)
        self.assertEqual(got["blk.0.attn_k.weight"], self.quantize("IQ3_S", v, [256, 3], None))

    def test_imatrix_rewritten_in_place(self):
        """An imatrix rewritten in place after the mount (a new llama-imatrix run onto the
        same path; here the same size, and its modification time set back) is refused at
        the close that would use it, saying so, rather than mixing two runs' weights; the
        mount's other work goes on."""
        d = self.tmpdir()
        model, imat, other = (os.path.join(d, n) for n in ("m.gguf", "imatrix.gguf", "b.gguf"))
        self.make_model(model)
        make_imatrix_gguf(imat, self.entries())
        make_imatrix_gguf(other, self.entries())  # another run: same entries, other sums
        v = self.rng.standard_normal((2, 512)).astype(np.float32)
        with Mount(self, model, ["rw", "imatrix=" + imat]) as m:
            st = os.stat(imat)
            time.sleep(0.05)
            with open(imat, "r+b") as f:
                f.write(open(other, "rb").read())
            self.assertEqual(os.stat(imat).st_size, st.st_size)
            os.utime(imat, ns=(st.st_atime_ns, st.st_mtime_ns))  # as touch -r does
            why = self.refused(m, errno.EIO, np.save, m.p("npy", "blk.0.attn_q.weight.npy"), v)
            self.assertIn("changed since the mount", why)
            self.assertIn(imat, why)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_entry_of_the_wrong_size(self):
        """An entry of 128 values for a tensor of 512 columns: the close fails with EINVAL saying
        so, and the tensor keeps its bytes; an entry missing for a type that needs one
        refuses the view at open."""
        d = self.tmpdir()
        model, imat = os.path.join(d, "m.gguf"), os.path.join(d, "imatrix.gguf")
        self.make_model(model)
        make_imatrix_gguf(imat, {"blk.0.attn_q.weight": (np.ones((1, 128), np.float32), [2.0])})
        with Mount(self, model, ["rw", "imatrix=" + imat]) as m:
            f = open(m.p("f32", "blk.0.attn_q.weight"), "r+b")
            f.write(np.ones(1024, np.float32).tobytes())
            why = self.refused(m, errno.EINVAL, f.close)
            self.assertIn("has 128 values for tensor 'blk.0.attn_q.weight', which needs 512 (512 columns x 1 expert)", why)
            why = self.refused(m, errno.EOPNOTSUPP, open, m.p("f32", "blk.0.ffn_up.weight"), "r+b")
            self.assertIn("no entry for this tensor", why)
            with open(m.p("tensors", "blk.0.attn_q.weight"), "rb") as t:
                self.assertEqual(t.read(), bytes(4 * 66))
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_weights_ggml_aborts_on(self):
        """A NaN among an entry's sums: ggml's search aborts on such weights, so the close
        fails with EINVAL, blaming the imatrix's column, not the values written."""
        d = self.tmpdir()
        model, imat = os.path.join(d, "m.gguf"), os.path.join(d, "imatrix.gguf")
        self.make_model(model)
        sums = np.ones((1, 256), np.float32)
        sums[0, 7] = np.nan
        make_imatrix_gguf(imat, {"blk.0.attn_k.weight": (sums, [3.0])})
        with Mount(self, model, ["rw", "imatrix=" + imat]) as m:
            f = open(m.p("f32", "blk.0.attn_k.weight"), "r+b")
            f.write(self.rng.standard_normal(768).astype(np.float32).tobytes())
            why = self.refused(m, errno.EINVAL, f.close)
            self.assertIn("the importance matrix weighs column 7 by nan", why)
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_bad_imatrix_files_fail_the_mount(self):
        """A missing file, a GGUF that is no imatrix, a truncated .dat, sums without counts:
        one line naming the imatrix file, exit status 1, nothing mounted."""
        d = self.tmpdir()
        model = os.path.join(d, "m.gguf")
        self.make_model(model)
        bad = {}
        bad["missing.gguf"] = None
        bad["model-as-imatrix.gguf"] = open(model, "rb").read()
        make_imatrix_dat(os.path.join(d, "full.dat"), {"a.weight": (np.ones(512, np.float32), 2)})
        bad["truncated.dat"] = open(os.path.join(d, "full.dat"), "rb").read()[:40]
        w = ggufgen.GGUFWriter(alignment=32)
        w.add_tensor("x.in_sum2", "F32", np.ones(256, np.float32), ne=[256, 1])
        nocounts = os.path.join(d, "nocounts.gguf")
        w.write(nocounts)
        bad["nocounts.gguf"] = open(nocounts, "rb").read()
        bad["empty.dat"] = b""
        patterns = {"missing.gguf": "No such file", "model-as-imatrix.gguf": "not an imatrix",
                    "truncated.dat": "past the end of the file", "nocounts.gguf": "no counts",
                    "empty.dat": "ends inside"}
        for name, data in bad.items():
            p = os.path.join(d, "bad-" + name)
            if data is not None:
                with open(p, "wb") as f:
                    f.write(data)
            line = assert_reject(self, model, patterns[name], options="rw,imatrix=" + p,
                                 name_in_msg="bad-" + name)
            self.assertIn("-o imatrix", line)
        line = assert_reject(self, model, None, options="rw,imatrix=", name_in_msg="-o imatrix")
        self.assertIn("needs a value", line)


if __name__ == "__main__":
    main()
