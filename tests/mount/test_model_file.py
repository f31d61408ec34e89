#!/usr/bin/python3
"""The whole model as one file at the mount's root (model.gguf / model.safetensors):
byte for byte what a repack writes, for every kind of edit; read sequentially, at random
offsets and through mmap; its size exact in stat and in index.json; an open handle keeps
the model as it was when opened; a sharded set merged into one valid safetensors file;
a classic Ollama model exported as its GGUF.
"""
import json
import mmap
import os
import random
import shutil
import struct
import subprocess

import numpy as np

from harness import TESTDATA, Mount, TestCase, env_set, main, quick
from test_editors import gguf_parse
from test_rw import (MANIFEST, OLLAMA_SRC, hf_gguf, read, st_bytes, st_parse, unmount_ok, write,
                     write_file)

GGUF_SRC = os.path.join(TESTDATA, "gguf", "mixed_flat.gguf")
SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tiny-llama.gguf")


def random_reads(tc, path, expect, n=200, seed=7):
    """n reads at random offsets and lengths (odd ones included) equal expect's bytes."""
    rnd = random.Random(seed)
    with open(path, "rb") as f:
        for _ in range(n):
            off = rnd.randrange(0, len(expect))
            ln = rnd.choice([1, 3, 7, 4096, 65537, rnd.randrange(1, 300000)])
            f.seek(off)
            tc.assertEqual(f.read(ln), expect[off:off + ln], "at %d+%d" % (off, ln))


def mmap_read(path):
    with open(path, "rb") as f:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return bytes(mm[:])



ST_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
           "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16,
           "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64,
           "F64": 64, "I64": 64, "U64": 64}


def st_strict(tc, data, what):
    """The reference crate's read checks (tests/data/SAFETENSORS_CHECKLIST.md) on a
    whole file: header length and UTF-8 JSON object, known dtypes, non-negative integer
    shapes, sizes matching numel x bits, offsets contiguous from 0 once sorted, no trailing
    bytes, __metadata__ a map of strings; and, as the reference writer does, the header
    padded with spaces to a multiple of 8."""
    tc.assertGreaterEqual(len(data), 8, what)
    (n,) = struct.unpack("<Q", data[:8])
    tc.assertLessEqual(n, 100_000_000, what)
    tc.assertLessEqual(8 + n, len(data), what)
    text = data[8:8 + n].decode("utf-8")
    tc.assertEqual(n % 8, 0, what)
    tc.assertTrue(text.rstrip(" ").endswith("}"), what)  # padding: spaces only, no NULs
    header = json.loads(text)
    tc.assertIsInstance(header, dict, what)
    meta = header.pop("__metadata__", None)
    if meta is not None:
        tc.assertTrue(all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()),
                      what)
    spans = []
    for name, e in header.items():
        tc.assertIn(e["dtype"], ST_BITS, "%s: %s" % (what, name))
        tc.assertTrue(all(isinstance(d, int) and d >= 0 for d in e["shape"]), name)
        numel = 1
        for d in e["shape"]:
            numel *= d
        begin, end = e["data_offsets"]
        tc.assertEqual(numel * ST_BITS[e["dtype"]] % 8, 0, name)
        tc.assertEqual(end - begin, numel * ST_BITS[e["dtype"]] // 8, "%s: %s" % (what, name))
        spans.append((begin, end))
    pos = 0
    for begin, end in sorted(spans):
        tc.assertEqual(begin, pos, what)
        pos = end
    tc.assertEqual(8 + n + pos, len(data), what)
    return header, meta

class ModelFile(TestCase):
    def setUp(self):
        self.dir = self.tmpdir()

    def check_file(self, m, name, expect=None):
        """Size in stat and index.json, and whole/random/mmap reads agree; returns the bytes."""
        path = m.p(name)
        data = read(path, "rb")
        self.assertEqual(os.stat(path).st_size, len(data))
        idx = json.loads(read(m.p("index.json")))
        self.assertEqual(idx["model_file"], {"name": name, "size": len(data)})
        if expect is not None:
            self.assertEqual(data, expect)
        random_reads(self, path, data)
        self.assertEqual(mmap_read(path), data)
        return data

    def test_gguf_edits_equal_the_repack(self):
        src = os.path.join(self.dir, "model.gguf")
        shutil.copyfile(GGUF_SRC, src)
        with Mount(self, src) as m:
            self.assertEqual(os.listdir(m.path).count("model.gguf"), 1)
            before = self.check_file(m, "model.gguf")
            # a read-only mount: what a repack would write (the header as tensorfs writes it)
            kvs, tensors = gguf_parse(m.p("model.gguf"))
            self.assertEqual([t[0] for t in tensors], sorted(os.listdir(m.p("tensors")),
                             key=[t[0] for t in tensors].index))
            with self.assertRaises(OSError):
                open(m.p("model.gguf"), "r+b")
        with Mount(self, src, ["rw"]) as m:
            md, tn = m.p("metadata"), m.p("tensors")
            write(os.path.join(md, "general.name"), "live edit")
            subprocess.run("sed -i 's/255/7/' %s/test.u8" % md, shell=True, check=True)
            os.unlink(os.path.join(md, "test.str"))
            write(os.path.join(md, "new.key"), "new value")
            os.rename(os.path.join(md, "test.i8"), os.path.join(md, "test.i8.renamed"))
            write(os.path.join(tn, "t.f32"), np.full(2048, 0.5, np.float32).tobytes(), "wb")
            write(os.path.join(tn, "added"), np.arange(10, dtype=np.float32).tobytes(), "wb")
            os.rename(os.path.join(tn, "t.f16"), os.path.join(tn, "t.half"))
            # an open handle keeps the model as it was when opened
            with open(m.p("model.gguf"), "rb") as held:
                snap = self.check_file(m, "model.gguf")
                write(os.path.join(md, "general.name"), "a later edit, longer than before")
                self.assertEqual(held.read(), snap)
            live = self.check_file(m, "model.gguf")
            self.assertNotEqual(live, snap)
            self.assertNotEqual(live, before)
            kvs = dict((k, v) for k, _, v in gguf_parse(m.p("model.gguf"))[0])
            self.assertEqual(kvs["general.name"], b"a later edit, longer than before")
            self.assertIn("done:", unmount_ok(self, m))
        self.assertEqual(read(src, "rb"), live)

    @quick
    def test_sample_model_file(self):
        src = os.path.join(self.dir, "tiny.gguf")
        shutil.copyfile(SAMPLE, src)
        with Mount(self, src, ["rw"]) as m:
            write(m.p("metadata", "general.name"), "renamed")
            live = self.check_file(m, "model.gguf")
            self.assertIn("done:", unmount_ok(self, m))
        self.assertEqual(read(src, "rb"), live)

    def test_safetensors_single(self):
        src = os.path.join(self.dir, "model.safetensors")
        rng = np.random.default_rng(5)
        t = [("a", rng.standard_normal((3, 5), dtype=np.float32)),
             ("b", np.arange(7, dtype=np.int8)), ("c", np.ones(4, np.float16))]
        write_file(src, st_bytes(t, {"format": "pt"}))
        with Mount(self, src) as m:
            # the same model (the header as tensorfs writes it: compact JSON)
            data = self.check_file(m, "model.safetensors")
            st_strict(self, data, "single")
            out = os.path.join(self.dir, "out.safetensors")
            write_file(out, data)
            self.assertEqual(st_parse(out), st_parse(src))
        with Mount(self, src, ["rw"]) as m:
            write(m.p("metadata", "format"), "np")
            write(m.p("tensors", "b"), np.arange(9, dtype=np.int8).tobytes(), "wb")
            os.unlink(m.p("tensors", "c"))
            live = self.check_file(m, "model.safetensors")
            st_strict(self, live, "single, edited")
            self.assertIn("done:", unmount_ok(self, m))
        self.assertEqual(read(src, "rb"), live)

    def test_sharded_set_merged(self):
        d = os.path.join(self.dir, "sharded")
        os.mkdir(d)
        rng = np.random.default_rng(2)
        t = {"a.weight": rng.standard_normal((4, 8), dtype=np.float32),
             "b.bias": np.arange(8, dtype=np.float16), "c": np.arange(6, dtype=np.int32)}
        shards = {"model-00001-of-00002.safetensors": ["a.weight"],
                  "model-00002-of-00002.safetensors": ["b.bias", "c"]}
        wm = {}
        for fn, names in shards.items():
            write_file(os.path.join(d, fn), st_bytes([(n, t[n]) for n in names]))
            wm.update({n: fn for n in names})
        write(os.path.join(d, "model.safetensors.index.json"),
              json.dumps({"metadata": {"total_size": 164, "format": "pt"}, "weight_map": wm}))
        with Mount(self, d) as m:
            data = self.check_file(m, "model.safetensors")
            merged = os.path.join(self.dir, "merged.safetensors")
            write_file(merged, data)
        # a valid single file (the checklist's rules: header length, spaces to 8,
        # contiguous offsets from 0, nothing after the last tensor)
        st_strict(self, data, "merged shards")
        (n,) = struct.unpack("<Q", data[:8])
        self.assertEqual(n % 8, 0)
        header = json.loads(data[8:8 + n])
        spans = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
        self.assertEqual(spans[0][0], 0)
        for (_, e), (b, _) in zip(spans, spans[1:]):
            self.assertEqual(e, b)
        self.assertEqual(8 + n + spans[-1][1], len(data))
        meta, ts = st_parse(merged)
        self.assertEqual(meta, {"format": "pt"})  # the set's total_size is not the file's
        for name, arr in t.items():
            self.assertEqual(ts[name][2], arr.tobytes())
            self.assertEqual(ts[name][1], list(arr.shape))

    def test_ollama_classic_exports_its_gguf(self):
        root = os.path.join(self.dir, "models")
        shutil.copytree(OLLAMA_SRC, root)
        man = json.loads(read(os.path.join(root, MANIFEST)))
        blob = [l for l in man["layers"] if l["mediaType"].endswith(".model")][0]
        blob = os.path.join(root, "blobs", blob["digest"].replace(":", "-"))
        with env_set(OLLAMA_MODELS=root):
            with Mount(self, "oracle-gguf") as m:
                data = self.check_file(m, "model.gguf")
                out = os.path.join(self.dir, "export.gguf")
                self.assertEqual(subprocess.run(["cp", m.p("model.gguf"), out]).returncode, 0)
            self.assertEqual(read(out, "rb"), data)
            # what the blob holds, as tensorfs writes a GGUF: the same keys and tensors
            self.assertEqual([(k, t, v) for k, t, v in gguf_parse(out)[0]],
                             [(k, t, v) for k, t, v in gguf_parse(blob)[0]])
            self.assertEqual([x[:3] for x in gguf_parse(out)[1]], [x[:3] for x in gguf_parse(blob)[1]])
            with Mount(self, "oracle-st:int4") as m:  # per tensor: mlx-lm's layout, below
                self.assertNotIn("model.gguf", os.listdir(m.path))

    def check_hf(self, m, name=None):
        """@huggingface/gguf reads model.gguf straight from the mount: the keys of metadata/
        with the values gguf_parse sees, every tensor with its shape, in the mount's order,
        at the offsets gguf_parse finds."""
        theirs = hf_gguf(self, m.p("model.gguf"))
        kvs, tensors = gguf_parse(m.p("model.gguf"))
        self.assertEqual(sorted(theirs["meta"]), sorted(k for k, _, _ in kvs))
        if name is not None:
            self.assertEqual(theirs["meta"]["general.name"]["value"], name)
        self.assertEqual([t["name"] for t in theirs["tensors"]], [t[0] for t in tensors])
        self.assertEqual([[int(x) for x in t["shape"]] for t in theirs["tensors"]],
                         [list(t[2]) for t in tensors])
        idx = json.load(open(m.p("index.json")))
        self.assertEqual(sorted(t["name"] for t in theirs["tensors"]),
                         sorted(t["name"] for t in idx["tensors"]))
        return theirs

    def test_huggingface_gguf_reads_model_gguf(self):
        with Mount(self, GGUF_SRC) as m:
            self.check_hf(m)
        src = os.path.join(self.dir, "tiny.gguf")
        shutil.copyfile(SAMPLE, src)
        with Mount(self, src, ["rw"]) as m:  # the edited model, before any repack
            write(m.p("metadata", "general.name"), "seen by huggingface")
            os.unlink(m.p("tensors", sorted(os.listdir(m.p("tensors")))[0]))
            self.check_hf(m, "seen by huggingface")
        root = os.path.join(self.dir, "models")
        shutil.copytree(OLLAMA_SRC, root)
        with env_set(OLLAMA_MODELS=root):
            with Mount(self, "oracle-gguf") as m:
                self.check_hf(m)

    def test_ollama_per_tensor_exports_mlx_lm_layout(self):
        """A per-tensor (MLX-quantized) Ollama model as mlx-lm lays it out: model.safetensors
        with every tensor, each packed weight X's companions X.scale / X.bias renamed
        <module>.scales / <module>.biases (<module> = X without ".weight"), metadata
        {"format": "mlx"}; config.json = the model's config.json layer plus mlx-lm's
        "quantization".  The affine weights, dequantized from the export with mlx-lm's
        formula and the config's parameters, equal the mount's f32/ view bit for bit."""
        root = os.path.join(self.dir, "models")
        shutil.copytree(OLLAMA_SRC, root)
        with env_set(OLLAMA_MODELS=root):
            for tag, mode, bits, group in (("int4", None, 4, 64), ("int8", None, 8, 64),
                                           ("mxfp8", "mxfp8", 8, 32),
                                           ("nvfp4", "nvfp4", 4, 16)):
                with Mount(self, "oracle-st:" + tag) as m:
                    self.check_mlx_export(m, tag, mode, bits, group)

    def check_mlx_export(self, m, tag, mode, bits, group):
        self.assertIn("config.json", os.listdir(m.path), tag)
        data = self.check_file(m, "model.safetensors")
        out = os.path.join(self.dir, tag + ".safetensors")
        write_file(out, data)
        st_strict(self, data, tag)
        meta, ts = st_parse(out)
        self.assertEqual(meta, {"format": "mlx"}, tag)
        ours = sorted(os.listdir(m.p("tensors")))
        expect = {}
        for name in ours:
            new = name
            for comp, to in ((".scale", ".scales"), (".bias", ".biases")):
                if name.endswith(".weight" + comp):
                    new = name[:-len(".weight" + comp)] + to
            expect[new] = name
        self.assertEqual(sorted(ts), sorted(expect), tag)
        for new, name in expect.items():
            self.assertEqual(ts[new][2], read(m.p("tensors", name), "rb"), "%s %s" % (tag, new))
        idx = json.loads(read(m.p("index.json")))
        self.assertEqual(idx["model_file"], {"name": "model.safetensors", "size": len(data)})
        self.assertEqual(idx["config_file"], {"name": "config.json",
                                              "size": os.path.getsize(m.p("config.json"))})
        config = json.loads(read(m.p("config.json")))
        layer = json.loads(read(m.p("layers", "json:config.json")))
        q = {"group_size": group, "bits": bits}
        if mode:
            q["mode"] = mode
        self.assertEqual(config, dict(layer, quantization=q, quantization_config=q), tag)
        if mode:
            return
        # mlx-lm's affine dequantization, w = scales * q + biases (q the bits-wide fields of
        # the little-endian U32 words, LSB first), from the export alone, computed in float32
        # as the f32/ view computes it
        w = np.frombuffer(ts["model.layers.0.mlp.down_proj.weight"][2], "<u4")
        rows = ts["model.layers.0.mlp.down_proj.weight"][1][0]
        per = 32 // bits
        qv = ((w[:, None] >> (np.arange(per, dtype=np.uint32) * bits)) & ((1 << bits) - 1))
        qv = qv.reshape(rows, -1).astype(np.float32)
        def bf16(raw):
            return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        sc = np.repeat(bf16(ts["model.layers.0.mlp.down_proj.scales"][2]).reshape(rows, -1),
                       group, axis=1)
        bi = np.repeat(bf16(ts["model.layers.0.mlp.down_proj.biases"][2]).reshape(rows, -1),
                       group, axis=1)
        deq = sc * qv + bi
        view = np.fromfile(m.p("f32", "model.layers.0.mlp.down_proj.weight"), "<f4")
        self.assertEqual(deq.reshape(-1).tobytes(), view.tobytes(), tag)


if __name__ == "__main__":
    main()
