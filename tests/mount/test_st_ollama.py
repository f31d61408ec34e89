#!/usr/bin/python3
"""Real mounts of safetensors files (every case of safetensors/RESULTS.json), a sharded set built
here, and the Ollama store of tests/data/ollama (by manifest path and by model name), with a
corrupted copy of that store."""
import hashlib
import json
import os
import shutil
import struct

import numpy as np

from stgen import bf16_bits, st_raw
from harness import assert_reject, main, quick, Mount, TestCase, TESTDATA

ST_DIR = os.path.join(TESTDATA, "safetensors")
OLLAMA = os.path.join(TESTDATA, "ollama")
STORE = os.path.join(OLLAMA, "models")
with open(os.path.join(ST_DIR, "RESULTS.json")) as _f:
    ST_CASES = json.load(_f)
with open(os.path.join(OLLAMA, "EXPECTED.json")) as _f:
    OL = json.load(_f)
with open(os.path.join(TESTDATA, "gguf", "mixed_flat.expected.json")) as _f:
    MIXED_EXP = json.load(_f)

# safetensors dtype -> numpy dtype of the raw bytes (numpy's own conversion is the oracle)
NUMPY_DT = {"F16": "<f2", "F32": "<f4", "F64": "<f8", "I8": "|i1", "I16": "<i2", "I32": "<i4",
            "I64": "<i8", "U8": "|u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "|b1",
            "C64": "<c8"}
ELEM_BYTES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8, "I8": 1, "I16": 2, "I32": 4, "I64": 8,
              "U8": 1, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1, "C64": 8, "F8_E4M3": 1,
              "F8_E5M2": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1}
REJECT_PATTERNS = {
    "bad_too_small": r"(?i)small|short",
    "bad_header_too_large": r"(?i)header",
    "bad_header_len_u64_max": r"(?i)header",
    "bad_invalid_json": r"(?i)json",
    "bad_trailing_bytes": r"(?i)trailing|end",
    "bad_gap": r"(?i)gap",
    "bad_first_not_zero": r"(?i)start at 0|first|offset",
    "bad_shape_overflow": r"(?i)overflow",
    "bad_f4_odd": r"(?i)F4|bits|byte",
    "bad_unknown_dtype": r"Q4_0",
    "bad_f8_e4m3fn_name": r"F8_E4M3FN",
    "bad_float_shape": r"(?i)shape",
    "bad_three_offsets": r"(?i)data_offsets",
    "bad_metadata_non_string": r"(?i)metadata|string",
    "dup_tensor_key_diff": r"(?i)duplicate",
}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def xattr(path, name):
    return os.getxattr(path, "user.tensorfs." + name).decode()


def st_header(path):
    """(data_start, header dict) of a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return 8 + n, json.loads(f.read(n))


def f32_oracle(dtype, raw):
    """float32 bytes numpy makes of raw bytes of dtype, or None where numpy has no such type."""
    if dtype == "BF16":  # exact: bf16 is the high half of a float32
        return (np.frombuffer(raw, "<u2").astype("<u4") << 16).tobytes()
    if dtype == "C64":
        return np.frombuffer(raw, "<c8").view("<f4").tobytes()
    if dtype in NUMPY_DT:
        return np.frombuffer(raw, NUMPY_DT[dtype]).astype("<f4").tobytes()
    return None


def check_st_tensors(tc, m, tensors, src_of):
    """tensors: list of dict(name, dtype, shape, data_offsets, file); src_of(file) -> (bytes,
    data_start).  Checks tensors/, f32/, npy/ and the xattrs of every tensor."""
    tc.assertEqual(sorted(os.listdir(m.p("tensors"))), sorted(t["name"] for t in tensors))
    for t in tensors:
        name, dt, shape = t["name"], t["dtype"], list(t["shape"])
        buf, start = src_of(t.get("file"))
        a, b = t["data_offsets"]
        raw = buf[start + a:start + b]
        p = m.p("tensors", name)
        tc.assertEqual(read(p), raw, name)
        tc.assertEqual(os.stat(p).st_size, len(raw), name)
        tc.assertEqual(xattr(p, "dtype"), dt, name)
        tc.assertEqual(xattr(p, "shape"), ",".join(str(v) for v in shape), name)
        tc.assertEqual(int(xattr(p, "offset")), start + a, name)
        n = int(np.prod(shape)) if shape else 1
        want = f32_oracle(dt, raw)
        f = m.p("f32", name)
        if n == 0:
            # an empty tensor has an empty float view
            tc.assertEqual(read(f), b"", name)
        else:
            got = read(f)
            tc.assertEqual(len(got), 4 * n * (2 if dt == "C64" else 1), name)
            # the view's own shape: C64 gains its (re, im) axis
            vshape = list(shape) + ([2] if dt == "C64" else [])
            tc.assertEqual(xattr(f, "shape"), ",".join(str(v) for v in vshape), name)
            if want is not None:
                tc.assertEqual(got, want, name)
        arr = np.load(m.p("npy", name + ".npy"), mmap_mode="r")
        tc.assertEqual(arr.shape, tuple(shape) + ((2,) if dt == "C64" and dt not in NUMPY_DT else ()), name)
        if dt in NUMPY_DT:
            tc.assertEqual(arr.dtype, np.dtype(NUMPY_DT[dt]), name)
            tc.assertEqual(np.ascontiguousarray(arr).tobytes(), raw, name)
        else:
            tc.assertEqual(arr.dtype, np.dtype("<f4"), name)
            if n:
                tc.assertEqual(np.ascontiguousarray(arr).tobytes(), read(f), name)
        del arr


# ==== single safetensors files ====

def _st_case_test(c):
    def test(self):
        path = os.path.join(ST_DIR, c["file"])
        if c["tensorfs"] == "reject":
            assert_reject(self, path, REJECT_PATTERNS.get(c["file"][:-len(".safetensors")]))
            return
        rust = c["rust"]
        buf = read(path)
        with Mount(self, path) as m:
            check_st_tensors(self, m, rust["tensors"], lambda _f: (buf, rust["data_start"]))
            meta = rust["metadata"] or {}
            self.assertEqual(sorted(os.listdir(m.p("metadata"))), sorted(meta))
            for k, v in meta.items():
                self.assertEqual(read(m.p("metadata", k)), v.encode() + b"\n", k)
                self.assertEqual(xattr(m.p("metadata", k), "type"), "string", k)
            ix = json.loads(read(m.p("index.json")))
            self.assertEqual(ix["format"], "safetensors")
            self.assertEqual(sorted(t["name"] for t in ix["tensors"]), sorted(t["name"] for t in rust["tensors"]))
            self.assertEqual([s["size"] for s in ix["sources"]], [len(buf)])
            self.assertFalse(os.path.exists(m.p("layers")))
    test.__doc__ = "%s (%s)" % (c["file"], c["tensorfs"])
    return test


class Safetensors(TestCase):
    """One test per case of safetensors/RESULTS.json."""


for _c in ST_CASES:
    setattr(Safetensors, "test_%s_%s" % (_c["tensorfs"], _c["file"][:-len(".safetensors")]), _st_case_test(_c))


# ==== a sharded set built here ====

class Sharded(TestCase):
    def build(self):
        d = self.tmpdir()
        rng = np.random.default_rng(11)
        shards = {}
        expect = []
        weight_map = {}
        for s in range(3):
            fname = "model-%05d-of-00003.safetensors" % (s + 1)
            tensors = []
            for j, dt in enumerate(("F32", "F16", "BF16", "I32")):
                name = "model.layers.%d.t%d.weight" % (s, j)
                x = rng.standard_normal((s + 3, 40 + j)).astype(np.float32)
                raw = {"F32": lambda: x.astype("<f4").tobytes(),
                       "F16": lambda: x.astype("<f2").tobytes(),
                       "BF16": lambda: bf16_bits(x).tobytes(),
                       "I32": lambda: (x * 1000).astype("<i4").tobytes()}[dt]()
                tensors.append((name, dt, x.shape, raw))
                weight_map[name] = fname
            tensors.sort()
            data = st_raw(tensors, {"format": "pt"})
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)
            shards[fname] = data
            off = 0
            for name, dt, shape, raw in tensors:
                expect.append(dict(name=name, dtype=dt, shape=shape, file=fname,
                                   data_offsets=[off, off + len(raw)]))
                off += len(raw)
        index = {"metadata": {"total_size": sum(len(e) for e in shards.values())},
                 "weight_map": dict(sorted(weight_map.items()))}
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
        return d, shards, expect

    def check(self, source, d, shards, expect):
        def src_of(fname):
            data = shards[fname]
            return data, 8 + struct.unpack("<Q", data[:8])[0]
        with Mount(self, source) as m:
            check_st_tensors(self, m, expect, src_of)
            ix = json.loads(read(m.p("index.json")))
            self.assertEqual(ix["format"], "safetensors")
            files = {s["file"]: s["size"] for s in ix["sources"]}
            for fname, data in shards.items():
                self.assertEqual(files.get(fname), len(data), fname)
            by_name = {t["name"]: t for t in ix["tensors"]}
            for e in expect:
                self.assertEqual(by_name[e["name"]]["source"], e["file"], e["name"])

    @quick
    def test_sharded_via_index_and_directory(self):
        d, shards, expect = self.build()
        self.check(os.path.join(d, "model.safetensors.index.json"), d, shards, expect)
        self.check(d, d, shards, expect)

    def test_sharded_missing_shard(self):
        d, shards, expect = self.build()
        os.unlink(os.path.join(d, "model-00002-of-00003.safetensors"))
        assert_reject(self, os.path.join(d, "model.safetensors.index.json"),
                      name_in_msg="model-00002-of-00003.safetensors")


# ==== the Ollama store ====

def blob_path(store, digest):
    return os.path.join(store, "blobs", digest.replace(":", "-"))


class Ollama(TestCase):
    def check_model(self, m, man, store=STORE):
        mf_path = os.path.join(OLLAMA, man["path"])
        manifest = json.loads(read(mf_path))
        ix = json.loads(read(m.p("index.json")))
        self.assertEqual(ix["format"], "ollama")
        # layers/: the manifest, the config blob and every layer that is not a tensor
        files = {l["name"]: l for l in ix["layers"]}
        self.assertEqual(sorted(os.listdir(m.p("layers"))), sorted(files))
        self.assertEqual(read(m.p("layers", "manifest.json")), read(mf_path))
        want_layers = [manifest["config"]] + [l for l in manifest["layers"]
                                              if l["mediaType"] != "application/vnd.ollama.image.tensor"
                                              and l["mediaType"] != "application/vnd.ollama.image.model"]
        self.assertEqual(len(files), len(want_layers) + 1)
        for l in want_layers:
            hits = [f for f, x in files.items() if x["source"] == l["digest"] and x["media_type"] == l["mediaType"]]
            self.assertEqual(len(hits), 1, l)
            p = m.p("layers", hits[0])
            data = read(p)
            self.assertEqual(data, read(blob_path(store, l["digest"])), hits[0])
            self.assertEqual(len(data), l["size"])
            self.assertEqual("sha256:" + hashlib.sha256(data).hexdigest(), l["digest"])
            self.assertEqual(xattr(p, "media_type"), l["mediaType"])
            self.assertEqual(os.stat(p).st_mode & 0o777, 0o444)
        if "tensor_blobs" in man:
            names = set()
            for tname, tb in man["tensor_blobs"].items():
                blob = read(os.path.join(OLLAMA, tb["blob"]))
                start, hdr = st_header(os.path.join(OLLAMA, tb["blob"]))
                for n, h in hdr.items():
                    if n == "__metadata__":
                        continue
                    names.add(n)
                    a, b = h["data_offsets"]
                    p = m.p("tensors", n)
                    self.assertEqual(read(p), blob[start + a:start + b], n)
                    self.assertEqual(xattr(p, "dtype"), h["dtype"], n)
                    self.assertEqual(xattr(p, "shape"), ",".join(map(str, h["shape"])), n)
                want = read(os.path.join(OLLAMA, tb["expected_f32"]))
                got = read(m.p("f32", tname))
                self.assertEqual(got, want, tname)
                shape = tuple(tb.get("logical_shape") or tb["shape"])
                self.assertEqual(len(want), 4 * int(np.prod(shape)))
                self.assertEqual(xattr(m.p("f32", tname), "shape"), ",".join(map(str, shape)), tname)
                a = np.load(m.p("npy", tname + ".npy"), mmap_mode="r")
                self.assertEqual(a.shape, shape, tname)
                self.assertEqual(xattr(m.p("npy", tname + ".npy"), "shape"), ",".join(map(str, shape)), tname)
                self.assertEqual(a.dtype, np.dtype("<f4"), tname)
                self.assertEqual(np.ascontiguousarray(a).tobytes(), want, tname)
                del a
                tix = [t for t in ix["tensors"] if t["name"] == tname][0]
                self.assertEqual(tix["f32_shape"], list(shape))
                if "mode" in tb:
                    self.assertEqual(tix["quantization"]["mode"], tb["mode"])
                    self.assertEqual(tix["quantization"]["bits"], tb["bits"])
                    self.assertEqual(tix["quantization"]["group_size"], tb["group_size"])
            self.assertEqual(set(os.listdir(m.p("tensors"))), names)
        else:
            # classic: a GGUF model layer (mixed_flat)
            mdl = [l for l in manifest["layers"] if l["mediaType"] == "application/vnd.ollama.image.model"][0]
            blob = read(blob_path(store, mdl["digest"]))
            self.assertEqual(len(os.listdir(m.p("tensors"))), len(MIXED_EXP["tensors"]))
            for t in MIXED_EXP["tensors"]:
                name = bytes.fromhex(t["name_utf8_hex"]).decode()
                o = t["absolute_offset"]
                self.assertEqual(read(m.p("tensors", name)), blob[o:o + t["nbytes"]], name)
                want = read(os.path.join(TESTDATA, "gguf", t["expected_f32"]))
                self.assertEqual(read(m.p("f32", name)), want, name)
                a = np.load(m.p("npy", name + ".npy"), mmap_mode="r")
                self.assertEqual(a.shape, tuple(reversed(t["ne"])), name)
                del a
            self.assertEqual(read(m.p("metadata", "general.architecture")), b"oracle-test\n")

    def test_by_manifest_path(self):
        for man in OL["manifests"]:
            with Mount(self, os.path.join(OLLAMA, man["path"])) as m:
                self.check_model(m, man)

    @quick
    def test_by_model_name(self):
        old = os.environ.get("OLLAMA_MODELS")
        os.environ["OLLAMA_MODELS"] = STORE
        try:
            for man in OL["manifests"]:
                with Mount(self, man["name"]) as m:
                    self.check_model(m, man)
                    self.assertEqual(os.path.realpath(xattr(m.path, "source")),
                                     os.path.realpath(os.path.join(OLLAMA, man["path"])))
            # a name without a tag means :latest
            with Mount(self, "oracle-gguf") as m:
                self.check_model(m, OL["manifests"][0])
        finally:
            if old is None:
                del os.environ["OLLAMA_MODELS"]
            else:
                os.environ["OLLAMA_MODELS"] = old

    def test_unknown_model_name(self):
        env = dict(os.environ, OLLAMA_MODELS=STORE)
        assert_reject(self, "no-such-model:7b", env=env, name_in_msg="no-such-model")

    def test_corrupted_blob(self):
        store = os.path.join(self.tmpdir(), "models")
        shutil.copytree(STORE, store)
        env = dict(os.environ, OLLAMA_MODELS=store)
        # the template of oracle-gguf (27 bytes): small layers are hashed at every mount;
        # the norm weight blob of oracle-st: weights are hashed with -o verify
        for model, digest, opts in (
                ("oracle-gguf:latest", "b52d02fdf256212b389da91993a066a005d7540ab33124008908a26fda541a12", None),
                ("oracle-st:int4", "90a7c2da916473054736a3e55bb0900ec9a47399f61cd3937bb5a603b447e92f", "verify")):
            p = os.path.join(store, "blobs", "sha256-" + digest)
            data = bytearray(read(p))
            data[len(data) // 2] ^= 0x01
            os.chmod(p, 0o644)
            with open(p, "wb") as f:
                f.write(data)
            assert_reject(self, model, env=env, name_in_msg=digest, options=opts)
            man = os.path.join(store, "manifests/registry.ollama.ai/library", *model.split(":"))
            assert_reject(self, man, name_in_msg=digest, options=opts)
            if opts:  # without verify a weight blob is not read at mount: it mounts
                with Mount(self, man) as m:
                    self.assertTrue(os.path.exists(m.p("tensors", "model.norm.weight")))


if __name__ == "__main__":
    main()
