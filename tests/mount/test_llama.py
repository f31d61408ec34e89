#!/usr/bin/python3
"""llama.cpp as the client of tensorfs, through its own prebuilt libraries (npm package
@node-llama-cpp/linux-x64, installed by scripts/setup.sh; see tests/llama/).

- ggml's GGUF parser (gguf_init_from_file) reads every GGUF that a `rw` mount repacks,
  after every kind of edit: keys, types, values (bit for bit), tensors (names, types, ne,
  offsets, bytes) are exactly as expected, and agree with the index.json of a mount.
- libllama loads and runs the sample model examples/tiny-llama.gguf, and after a `rw`
  mount changed its name and chat template, runs it to the same tokens and sees the new
  metadata; after a tensor change it does not.

The helpers run as their own processes (ggml aborts on what it cannot handle) and their
stderr is shown only when they fail.
"""
import ctypes
import errno
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

from harness import TENSORFS, TESTDATA, VOCAB_DIR, Mount, TestCase, main, quick, run, vocab_files, vocab_missing

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA_DIR = os.path.join(HERE, "..", "llama")
sys.path.insert(0, LLAMA_DIR)
import llamacpp  # noqa: E402

SAMPLE = os.path.join(HERE, "..", "..", "examples", "tiny-llama.gguf")
MIXED = os.path.join(TESTDATA, "gguf", "mixed_flat.gguf")

SCALAR_FMT = {"uint8": "<B", "int8": "<b", "uint16": "<H", "int16": "<h", "uint32": "<I",
              "int32": "<i", "uint64": "<Q", "int64": "<q", "float32": "<f", "float64": "<d",
              "bool": "<?"}
INT_TYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64")
# keys whose change would change the layout or what a reader expects of the whole file
KEEP = ("general.alignment", "general.architecture")

TEMPLATE = ("{%- for message in messages %}\n"
            "<|start|>{{ message['role'] }}: {{ message['content'] }}<|end|>\n"
            "{%- endfor %}\n"
            "{%- if add_generation_prompt %}<|start|>assistant: {% endif %}")


# ==== helpers ====

def helper(tc, script, *args):
    """Runs tests/llama/<script> in its own process; its JSON output, or the test fails."""
    r = run(["/usr/bin/python3", os.path.join(LLAMA_DIR, script)] + list(args), timeout=120)
    if r.returncode != 0:
        tc.fail("%s %s failed (%d): %s" % (script, " ".join(args), r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def ggml_view(tc, path):
    return helper(tc, "ggml_gguf.py", path)


def generate(tc, path, keys=()):
    args = [path]
    for k in keys:
        args += ["--key", k]
    return helper(tc, "generate.py", *args)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def write(path, data, mode="w"):
    with open(path, mode) as f:
        f.write(data)


def info_json(tc, path):
    r = run([TENSORFS, "info", "--json", path])
    tc.assertEqual(r.returncode, 0, r.stderr)
    return json.loads(r.stdout)


def unmount_ok(tc, m):
    r = m.unmount()
    tc.assertIsNotNone(r, "the mount was gone before tensorfs unmount")
    tc.assertEqual(r.returncode, 0, "tensorfs unmount failed: " + r.stderr)


def renamed(d, old, new):
    """d (in file order) after a rename: new takes old's value and place; a key that had
    the name new is gone."""
    items = [(new if k == old else k, v) for k, v in d.items() if k != new]
    d.clear()
    d.update(items)


def replaced(d, old, new):
    """d (in file order) after a rename onto an existing item (README, "Editors and atomic
    saves"): new keeps its place and takes old's content (here: with old's type declared)."""
    d[new] = d.pop(old)


def pad4(ne):
    return list(ne) + [1] * (4 - len(ne))


class LlamaCase(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())


# ==== ggml's parser reads what tensorfs repacks ====

class GgmlReadsRepacks(LlamaCase):
    """Edits through a rw mount; the repacked file as ggml's gguf_init_from_file sees it."""

    def edit_and_check(self, src):
        path = os.path.join(self.tmpdir(), os.path.basename(src))
        shutil.copyfile(src, path)
        before = ggml_view(self, path)
        self.assert_same_as_info(before, info_json(self, path), path)
        rng = np.random.default_rng(1)
        kv = {k["key"]: k for k in before["kv"]}
        exp_kv = {k["key"]: (k["type"], k["value"], k["raw"]) for k in before["kv"]}
        exp_t = {t["name"]: (t["type_name"], t["ne"], t["sha256"]) for t in before["tensors"]}
        kv_order = [k["key"] for k in before["kv"]]

        strings = [k for k in kv if kv[k]["type"] == "string" and k not in KEEP]
        ints = [k for k in kv if kv[k]["type"] in INT_TYPES and k not in KEEP]
        int_arrays = [k for k in kv if kv[k]["type"] in ["array[%s]" % t for t in INT_TYPES]
                      and kv[k]["value"]]
        str_arrays = [k for k in kv if kv[k]["type"] == "array[string]" and kv[k]["value"]]
        self.assertTrue(strings and ints, "%s: no string or integer key to edit" % src)

        with Mount(self, path, ["rw"]) as m:
            md = lambda k: m.p("metadata", k)  # noqa: E731 (names here need no escaping)
            # a string key
            s_key = "general.name" if "general.name" in strings else strings[0]
            new_s = "edited through tensorfs \u2713"
            write(md(s_key), new_s)
            exp_kv[s_key] = ("string", new_s, None)
            # an integer key, by printf from a shell
            i_key = ints[0]
            i_type = kv[i_key]["type"]
            new_i = 7 if kv[i_key]["value"] != 7 else 8
            if i_type.startswith("int"):
                new_i = -new_i
            r = subprocess.run(["sh", "-c", 'printf %s "$1" > "$2"', "sh", str(new_i), md(i_key)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            exp_kv[i_key] = (i_type, new_i, struct.pack(SCALAR_FMT[i_type], new_i).hex())
            # a float32 / float64 / bool key of each kind there is: the value rounded as a C
            # parser rounds it, bit for bit
            others = []
            for typ, text, val in (("float32", "0.1", 0.1), ("float64", "-2.5e-7", -2.5e-7),
                                   ("bool", None, None)):
                ks = [k for k in kv if kv[k]["type"] == typ and k not in KEEP]
                if not ks:
                    continue
                others.append(ks[0])
                if typ == "bool":
                    val = not kv[ks[0]]["value"]
                    text = "true" if val else "false"
                write(md(ks[0]), text + "\n")
                raw = struct.pack(SCALAR_FMT[typ], val)
                exp_kv[ks[0]] = (typ, struct.unpack(SCALAR_FMT[typ], raw)[0], raw.hex())
            # an array of integers: reversed, and one more element
            if int_arrays:
                a_key = int_arrays[0]
                a_type = kv[a_key]["type"][6:-1]
                vals = kv[a_key]["value"][::-1] + [1]
                write(md(a_key), json.dumps(vals))
                raw = b"".join(struct.pack(SCALAR_FMT[a_type], v) for v in vals)
                exp_kv[a_key] = (kv[a_key]["type"], vals, raw.hex())
            # an array of strings, read through the mount, its first element changed
            if str_arrays:
                sa_key = str_arrays[0]
                with open(md(sa_key), "rb") as f:
                    vals = json.loads(f.read().decode("utf-8", "surrogateescape"))
                self.assertEqual(vals, kv[sa_key]["value"], "%s as the mount shows it" % sa_key)
                vals[0] = "first \u2192 changed"
                write(md(sa_key), json.dumps(vals))
                exp_kv[sa_key] = ("array[string]", vals, None)
            # new keys: a string, and a uint64 typed with the xattr
            write(md("tensorfs.added"), "a new key")
            exp_kv["tensorfs.added"] = ("string", "a new key", None)
            write(md("tensorfs.added_u64"), "")
            os.setxattr(md("tensorfs.added_u64"), "user.tensorfs.type", b"uint64")
            write(md("tensorfs.added_u64"), "18446744073709551615\n")
            exp_kv["tensorfs.added_u64"] = ("uint64", 2**64 - 1, "ff" * 8)
            # a deleted key, and a renamed one
            free = [k for k in kv_order if k not in KEEP and k not in
                    [s_key, i_key] + others + int_arrays[:1] + str_arrays[:1]]
            os.unlink(md(free[-1]))
            del exp_kv[free[-1]]
            if len(free) > 1:
                os.rename(md(free[-2]), md("renamed." + free[-2]))
                renamed(exp_kv, free[-2], "renamed." + free[-2])
            if len(free) > 3:
                # onto a key that exists: it keeps its place; with the moved key's type
                # declared (setfattr), it takes that type and the value
                t = os.getxattr(md(free[-3]), "user.tensorfs.type")
                os.setxattr(md(free[-3]), "user.tensorfs.type", t)
                os.rename(md(free[-3]), md(free[-4]))
                replaced(exp_kv, free[-3], free[-4])

            names = [t["name"] for t in before["tensors"]]
            if names:
                # a tensor's bytes replaced
                t0 = before["tensors"][0]
                data = rng.integers(0, 256, t0["size"], dtype=np.uint8).tobytes()
                write(m.p("tensors", t0["name"]), data, "wb")
                exp_t[t0["name"]] = (t0["type_name"], t0["ne"], sha256(data))
            if len(names) > 1:
                # a tensor renamed
                old = names[1]
                os.rename(m.p("tensors", old), m.p("tensors", "renamed." + old))
                renamed(exp_t, old, "renamed." + old)
            if len(names) > 2:
                os.unlink(m.p("tensors", names[2]))
                del exp_t[names[2]]
            if len(names) > 4:  # onto a tensor that exists, its own dtype declared: it wins
                t = os.getxattr(m.p("tensors", names[3]), "user.tensorfs.dtype")
                os.setxattr(m.p("tensors", names[3]), "user.tensorfs.dtype", t)
                os.rename(m.p("tensors", names[3]), m.p("tensors", names[4]))
                replaced(exp_t, names[3], names[4])
            # new tensors: F32 by default, and Q8_0 [2, 32] (numpy order) by xattrs
            data = np.arange(64, dtype="<f4").tobytes()
            write(m.p("tensors", "added.f32"), data, "wb")
            exp_t["added.f32"] = ("f32", [64, 1, 1, 1], sha256(data))
            q = m.p("tensors", "added.q8_0")
            write(q, b"", "wb")
            os.setxattr(q, "user.tensorfs.dtype", b"Q8_0")
            os.setxattr(q, "user.tensorfs.shape", b"2,32")
            block = np.float16(0.5).tobytes() + np.arange(-16, 16, dtype=np.int8).tobytes()
            write(q, block * 2, "wb")
            exp_t["added.q8_0"] = ("q8_0", [32, 2, 1, 1], sha256(block * 2))
            unmount_ok(self, m)

        after = ggml_view(self, path)
        self.assertEqual(after["version"], 3)
        self.assertEqual(after["alignment"], before["alignment"])
        got_kv = {k["key"]: (k["type"], k["value"], k["raw"]) for k in after["kv"]}
        self.assertEqual(sorted(got_kv), sorted(exp_kv), "key names")
        for k in exp_kv:
            self.assertEqual(got_kv[k], exp_kv[k], "key %s" % k)
        # in file order: a changed or renamed key where it was, new ones at the end
        self.assertEqual(list(got_kv), list(exp_kv), "key order")
        got_t = {t["name"]: (t["type_name"], t["ne"], t["sha256"]) for t in after["tensors"]}
        self.assertEqual(sorted(got_t), sorted(exp_t), "tensor names")
        for t in exp_t:
            self.assertEqual(got_t[t], exp_t[t], "tensor %s" % t)
        self.assertEqual(list(got_t), list(exp_t), "tensor order")
        self.assert_layout(after, path)
        with Mount(self, path) as m:
            with open(m.p("index.json")) as f:
                self.assert_same_as_info(after, json.load(f), path)

    def assert_layout(self, view, path):
        """Every offset aligned, tensors in the file, none overlapping."""
        al = view["alignment"]
        self.assertEqual(view["data_offset"] % al, 0)
        end = 0
        for t in sorted(view["tensors"], key=lambda t: t["offset"]):
            self.assertEqual(t["offset"] % al, 0, t["name"])
            self.assertGreaterEqual(t["offset"], end, "%s overlaps the tensor before" % t["name"])
            end = t["offset"] + t["size"]
        self.assertLessEqual(view["data_offset"] + end, os.path.getsize(path))

    def assert_same_as_info(self, view, info, path):
        """ggml's view and tensorfs' index.json (or `tensorfs info --json`) say the same."""
        self.assertEqual(info["version"], view["version"], path)
        self.assertEqual(info["alignment"], view["alignment"], path)
        # with no tensors ggml reports the unpadded end of the keys; tensorfs (as gguf-py
        # and @huggingface/gguf) the aligned start of the (empty) data section
        al = view["alignment"]
        want = view["data_offset"] if view["tensors"] else -(-view["data_offset"] // al) * al
        self.assertEqual(info["data_offset"], want, path)
        self.assertEqual([(k["name"], k["type"]) for k in info["keys"]],
                         [(k["key"], k["type"]) for k in view["kv"]], path)
        self.assertEqual(
            [(t["name"], t["dtype"].lower(), pad4(t["ne"]), t["offset"], t["nbytes"])
             for t in info["tensors"]],
            [(t["name"], t["type_name"].lower(), t["ne"], view["data_offset"] + t["offset"], t["size"])
             for t in view["tensors"]], path)

    def test_alignment_changes(self):
        """general.alignment set to 64 (from 32), and deleted (64 -> ggml's default 32): the
        repack lays the file out for the new value, as ggml reads it, with the same bytes."""
        for src, edit, align in ((SAMPLE, "64", 64), (MIXED, None, 32)):
            path = os.path.join(self.tmpdir(), os.path.basename(src))
            shutil.copyfile(src, path)
            before = ggml_view(self, path)
            self.assertNotEqual(before["alignment"], align)
            with Mount(self, path, ["rw"]) as m:
                if edit is None:
                    os.unlink(m.p("metadata", "general.alignment"))
                else:
                    write(m.p("metadata", "general.alignment"), edit)
                unmount_ok(self, m)
            after = ggml_view(self, path)
            self.assertEqual(after["alignment"], align, src)
            self.assertEqual([k["key"] for k in after["kv"]],
                             [k["key"] for k in before["kv"]
                              if edit is not None or k["key"] != "general.alignment"])
            self.assertEqual([(t["name"], t["ne"], t["sha256"]) for t in after["tensors"]],
                             [(t["name"], t["ne"], t["sha256"]) for t in before["tensors"]])
            self.assert_layout(after, path)
            self.assert_same_as_info(after, info_json(self, path), path)

    def test_tensor_name_limit(self):
        """ggml reads tensor names of up to 63 bytes (GGML_MAX_NAME - 1): a rename or a new
        tensor at 63 bytes reaches ggml; at 64 bytes the mount refuses it (EINVAL)."""
        path = os.path.join(self.tmpdir(), "tiny-llama.gguf")
        shutil.copyfile(SAMPLE, path)
        before = {t["name"]: t for t in ggml_view(self, path)["tensors"]}
        data = np.ones(16, "<f4").tobytes()
        with Mount(self, path, ["rw"]) as m:
            for n in (64, 100):
                with self.assertRaises(OSError) as cm:
                    os.rename(m.p("tensors", "output_norm.weight"), m.p("tensors", "r" * n))
                self.assertEqual(cm.exception.errno, errno.EINVAL)
                with self.assertRaises(OSError) as cm:
                    write(m.p("tensors", "n" * n), data, "wb")
                self.assertEqual(cm.exception.errno, errno.EINVAL)
            os.rename(m.p("tensors", "output_norm.weight"), m.p("tensors", "r" * 63))
            write(m.p("tensors", "n" * 63), data, "wb")
            unmount_ok(self, m)
        after = {t["name"]: t for t in ggml_view(self, path)["tensors"]}
        self.assertEqual(sorted(after), sorted(set(before) - {"output_norm.weight"} |
                                               {"r" * 63, "n" * 63}))
        self.assertEqual(after["r" * 63]["sha256"], before["output_norm.weight"]["sha256"])
        self.assertEqual((after["n" * 63]["type_name"], after["n" * 63]["ne"],
                          after["n" * 63]["sha256"]), ("f32", [16, 1, 1, 1], sha256(data)))

    def test_no_tensors_metadata_only(self):
        """A GGUF without tensors (vocab-only style: the file ends right after its keys), only
        its metadata changed: a chat template added, as ggml reads it."""
        srcs = [os.path.join(TESTDATA, "gguf", "bad", "ok_no_tensors_unpadded.gguf")]
        if os.path.exists(os.path.join(VOCAB_DIR, "ggml-vocab-llama-spm.gguf")):
            srcs.append(os.path.join(VOCAB_DIR, "ggml-vocab-llama-spm.gguf"))
        else:
            print("# SKIP ggml-vocab-llama-spm.gguf: not in %s (the reference llama.cpp: setup.sh)"
                  % VOCAB_DIR, flush=True)
        for src in srcs:
            path = os.path.join(self.tmpdir(), os.path.basename(src))
            shutil.copyfile(src, path)
            before = ggml_view(self, path)
            self.assertEqual(before["tensors"], [])
            self.assertNotEqual(before["data_offset"] % before["alignment"], 0)
            with Mount(self, path, ["rw"]) as m:
                write(m.p("metadata", "tokenizer.chat_template"), TEMPLATE)
                r = m.unmount()
            self.assertEqual(r.returncode, 0, "%s: tensorfs unmount failed: %s" % (src, r.stderr))
            after = ggml_view(self, path)
            self.assertEqual([(k["key"], k["type"], k["value"]) for k in after["kv"]],
                             [(k["key"], k["type"], k["value"]) for k in before["kv"]] +
                             [("tokenizer.chat_template", "string", TEMPLATE)])
            self.assertEqual(after["tensors"], [])

    def test_edge_files_repacked(self):
        """Every file of tests/data/gguf/bad that tensorfs mounts, with one key added: where
        ggml read the source, it reads the repack as the source plus that key, with the same
        tensor bytes; a gap between tensors (which ggml refuses) is closed by the repack."""
        bad = os.path.join(TESTDATA, "gguf", "bad")
        with open(os.path.join(bad, "RESULTS.json")) as f:
            cases = json.load(f)
        done = []
        for case in cases:
            src = os.path.join(bad, case["case"] + ".gguf")
            if case["tensorfs"] == "reject" or run([TENSORFS, "info", src]).returncode != 0:
                continue
            path = os.path.join(self.tmpdir(), os.path.basename(src))
            shutil.copyfile(src, path)
            with Mount(self, path, ["rw"]) as m:
                write(m.p("metadata", "tensorfs.added"), "x")
                r = m.unmount()
            self.assertEqual(r.returncode, 0, "%s: %s" % (case["case"], r.stderr))
            done.append(case["case"])
            if case["ggml_meta"]["ok"]:
                before = helper(self, "ggml_gguf.py", src)
            elif case["case"] == "bad_offset_gap":
                before = None
            else:
                continue  # ggml refuses what is in the file itself (nested array, long name...)
            after = ggml_view(self, path)
            tensors = lambda v: [(t["name"], t["type"], t["ne"], t["sha256"])  # noqa: E731
                                 for t in v["tensors"]]
            if before is None:  # the gap: ggml reads the repack; the bytes are tensorfs' own
                info = info_json(self, src)
                with open(src, "rb") as f:
                    blob = f.read()
                self.assertEqual([(t[0], t[3]) for t in tensors(after)],
                                 [(t["name"], sha256(blob[t["offset"]:t["offset"] + t["nbytes"]]))
                                  for t in info["tensors"]], case["case"])
                continue
            self.assertEqual(after["kv"], before["kv"] + [
                {"key": "tensorfs.added", "type": "string", "value": "x", "raw": None}],
                case["case"])
            self.assertEqual(tensors(after), tensors(before), case["case"])
        self.assertIn("ok_base", done)
        self.assertIn("bad_offset_gap", done)

    def test_mixed_flat(self):
        """Every value type, 31 tensors of 20 types, alignment 64."""
        self.edit_and_check(MIXED)

    def test_tiny_llama(self):
        self.edit_and_check(SAMPLE)



def _vocab_tests():
    """One test per vocab-only GGUF of llama.cpp (no tensors; arrays of 30K-100K strings)."""
    files = vocab_files()
    if not files:
        GgmlReadsRepacks.test_vocab_files = lambda self: self.skipTest(vocab_missing())
    for f in files:
        name = "test_vocab_" + f[len("ggml-vocab-"):-len(".gguf")].replace("-", "_")
        setattr(GgmlReadsRepacks, name,
                lambda self, f=f: self.edit_and_check(os.path.join(VOCAB_DIR, f)))


_vocab_tests()


# ==== the sample model and its generator ====

MAKE_SAMPLE = os.path.join(HERE, "..", "..", "scripts", "make-sample.py")


class Sample(TestCase):
    def test_generator_writes_the_sample(self):
        """examples/tiny-llama.gguf is what scripts/make-sample.py writes (deterministic)."""
        out = os.path.join(self.tmpdir(), "s.gguf")
        r = run(["/usr/bin/python3", MAKE_SAMPLE, out])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, "rb") as a, open(SAMPLE, "rb") as b:
            self.assertTrue(a.read() == b.read(), "examples/tiny-llama.gguf is stale: run "
                            "scripts/make-sample.py")
        self.assertLess(os.path.getsize(SAMPLE), 2 << 20)

    def test_quantizers_are_ggml_s(self):
        """The generator's Q8_0 and Q4_0 blocks are byte for byte ggml_quantize_chunk's."""
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())
        ns = {"__name__": "make_sample"}
        with open(MAKE_SAMPLE) as f:
            exec(compile(f.read(), MAKE_SAMPLE, "exec"), ns)
        g = llamacpp.load_ggml_base()
        g.ggml_quantize_chunk.restype = ctypes.c_size_t
        g.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                          ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                          ctypes.c_void_p]
        rng = np.random.default_rng(3)
        x = (rng.standard_normal((16, 64)) * 0.3).astype(np.float32)
        x[0, :32] = 0          # an all-zero block
        x[1, :32] = np.arange(32) - 15.5    # halves: Q8_0 rounds them away from zero...
        x[1, 0] = 127                       # ...as its scale is 127 / 127 = 1 here
        for type_id, name, block in ((8, "q8_0", 34), (2, "q4_0", 18)):
            out = ctypes.create_string_buffer(16 * 2 * block)
            n = g.ggml_quantize_chunk(type_id, x.ctypes.data, out, 0, 16, 64, None)
            self.assertEqual(n, 16 * 2 * block)
            self.assertEqual(ns[name](x).hex(), out.raw[:n].hex(), name)


# ==== libllama runs the sample model ====

PROMPT_KEYS = ("general.name", "tokenizer.chat_template")


class LlamaRuns(LlamaCase):
    @quick
    def test_sample_generates(self):
        """libllama loads examples/tiny-llama.gguf and decodes 16 tokens greedily, the same twice."""
        g = generate(self, SAMPLE, PROMPT_KEYS)
        self.assertEqual(g["warnings"], "", "llama.cpp complained about the sample")
        self.assertEqual(g["n_vocab"], 384)
        self.assertEqual(g["prompt_tokens"][0], 1, "the tokenizer adds <s>")
        self.assertEqual(len(g["tokens"]), 16)
        # NaN or zero logits would make every argmax the same token
        self.assertGreater(len(set(g["tokens"])), 1, g["tokens"])
        self.assertEqual(g["meta"]["general.name"], "tiny-llama (tensorfs sample)")
        self.assertIn("add_generation_prompt", g["chat_template"])
        self.assertEqual(generate(self, SAMPLE)["tokens"], g["tokens"])

    def test_new_name_and_template_same_tokens(self):
        """A rw mount changes general.name (printf) and tokenizer.chat_template (cp); after
        tensorfs unmount, libllama runs the repacked model to the same tokens and reads the
        new metadata."""
        path = os.path.join(self.tmpdir(), "tiny-llama.gguf")
        shutil.copyfile(SAMPLE, path)
        before = generate(self, path, PROMPT_KEYS)
        tmpl = os.path.join(self.tmpdir(), "template.jinja")
        write(tmpl, TEMPLATE)
        with Mount(self, path, ["rw"]) as m:
            r = subprocess.run(["sh", "-c", "printf 'Tiny Llama, renamed' > \"$1\"", "sh",
                                m.p("metadata", "general.name")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run(["cp", tmpl, m.p("metadata", "tokenizer.chat_template")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            unmount_ok(self, m)
        with open(SAMPLE, "rb") as a, open(path, "rb") as b:
            self.assertNotEqual(a.read(), b.read(), "the repack changed nothing")
        after = generate(self, path, PROMPT_KEYS)
        self.assertEqual(after["meta"]["general.name"], "Tiny Llama, renamed")
        self.assertEqual(after["chat_template"], TEMPLATE)
        self.assertEqual(after["meta"]["tokenizer.chat_template"], TEMPLATE)
        self.assertNotEqual(before["chat_template"], TEMPLATE)
        self.assertEqual(after["prompt_tokens"], before["prompt_tokens"])
        self.assertEqual(after["tokens"], before["tokens"])

    def test_realigned_same_tokens(self):
        """general.alignment 32 -> 128: every tensor moves; libllama finds them all."""
        path = os.path.join(self.tmpdir(), "tiny-llama.gguf")
        shutil.copyfile(SAMPLE, path)
        before = generate(self, path)
        with Mount(self, path, ["rw"]) as m:
            write(m.p("metadata", "general.alignment"), "128")
            unmount_ok(self, m)
        self.assertEqual(ggml_view(self, path)["alignment"], 128)
        self.assertEqual(generate(self, path)["tokens"], before["tokens"])

    def test_runs_from_the_mounted_model_file(self):
        """libllama loads model.gguf straight from a mount (mmap through FUSE): from a
        read-only mount it gives the source's tokens; from a rw mount, the edited model
        before any repack (a new name, the output norm negated: other tokens), and ggml's
        parser reads that file as the repack then writes it."""
        path = os.path.join(self.tmpdir(), "tiny-llama.gguf")
        shutil.copyfile(SAMPLE, path)
        before = generate(self, path, PROMPT_KEYS)
        with Mount(self, path) as m:
            g = generate(self, m.p("model.gguf"), PROMPT_KEYS)
            self.assertEqual(g["warnings"], "")
            self.assertEqual(g["tokens"], before["tokens"])
            self.assertEqual(g["meta"], before["meta"])
        with Mount(self, path, ["rw"]) as m:
            write(m.p("metadata", "general.name"), "live")
            norm = np.fromfile(m.p("tensors", "output_norm.weight"), dtype="<f4")
            write(m.p("tensors", "output_norm.weight"), (-norm).tobytes(), "wb")
            live = generate(self, m.p("model.gguf"), PROMPT_KEYS)
            view = ggml_view(self, m.p("model.gguf"))
            unmount_ok(self, m)
        self.assertEqual(live["meta"]["general.name"], "live")
        self.assertNotEqual(live["tokens"], before["tokens"])
        self.assertEqual(generate(self, path, PROMPT_KEYS)["tokens"], live["tokens"])
        self.assertEqual(ggml_view(self, path), view)

    def test_tensor_edit_changes_tokens(self):
        """The token comparison can fail: output_norm.weight negated through a rw mount (so
        every logit is negated) gives libllama other tokens."""
        path = os.path.join(self.tmpdir(), "tiny-llama.gguf")
        shutil.copyfile(SAMPLE, path)
        before = generate(self, path)
        with Mount(self, path, ["rw"]) as m:
            norm = np.fromfile(m.p("tensors", "output_norm.weight"), dtype="<f4")
            write(m.p("tensors", "output_norm.weight"), (-norm).tobytes(), "wb")
            unmount_ok(self, m)
        after = generate(self, path)
        self.assertEqual(after["prompt_tokens"], before["prompt_tokens"])
        self.assertNotEqual(after["tokens"][0], before["tokens"][0])

    def test_iq_converted_model_runs(self):
        """blk.0.ffn_down converted to IQ2_XXS with an importance matrix (-o imatrix) and
        blk.1.ffn_down to IQ3_S without one, through user.tensorfs.convert: ggml reads the
        new types, and libllama loads the model and generates from it."""
        from test_imatrix import make_imatrix_gguf
        d = self.tmpdir()
        path, imat = os.path.join(d, "tiny-llama.gguf"), os.path.join(d, "imatrix.gguf")
        shutil.copyfile(SAMPLE, path)
        before = generate(self, path)
        sums = (np.random.default_rng(3).standard_normal((1, 256)) ** 2).astype(np.float32)
        make_imatrix_gguf(imat, {"blk.0.ffn_down.weight": (sums, [5.0])})
        with Mount(self, path, ["rw", "imatrix=" + imat]) as m:
            for name, dt in (("blk.0.ffn_down.weight", b"IQ2_XXS"), ("blk.1.ffn_down.weight", b"IQ3_S")):
                os.setxattr(m.p("tensors", name), "user.tensorfs.convert", dt)
            unmount_ok(self, m)
        types = {t["name"]: t["type_name"] for t in ggml_view(self, path)["tensors"]}
        self.assertEqual(types["blk.0.ffn_down.weight"], "iq2_xxs")
        self.assertEqual(types["blk.1.ffn_down.weight"], "iq3_s")
        after = generate(self, path)
        self.assertEqual(after["prompt_tokens"], before["prompt_tokens"])
        self.assertEqual(len(after["tokens"]), len(before["tokens"]))


if __name__ == "__main__":
    main()
