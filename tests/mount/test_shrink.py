#!/usr/bin/python3
"""A source that shrinks under a live mount (a shard truncated, a file rewritten shorter).

Every read of bytes the source no longer has fails with EIO, in every view: the model as one
file (model.gguf / model.safetensors: `cp` exits non-zero instead of copying a short file),
tensors/ (spliced), f32/ and npy/ (dequantized from the mapping: a fault there would kill the
daemon), a Hugging Face repo's GGUF view and the quantized view.  Bytes the file still has
read as before, and the daemon lives on.
"""
import errno
import os
import shutil
import sys

from harness import Mount, TestCase, main, quick, run

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
import qgen  # noqa: E402


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Shrink(TestCase):
    def gguf(self, d):
        src = os.path.join(d, "m.gguf")
        qgen.write(src, qgen.spec("l2-e96-gqa"))
        return src

    def assert_eio(self, path):
        with self.assertRaises(OSError) as cm:
            read(path)
        self.assertEqual(cm.exception.errno, errno.EIO, path)

    def assert_cp_fails(self, path, d):
        r = run(["cp", path, os.path.join(d, "copy")])
        self.assertNotEqual(r.returncode, 0, "cp of %s after the source shrank exited 0" % path)
        self.assertIn("Input/output error", r.stderr)

    @quick
    def test_gguf_every_view_of_its_bytes(self):
        d = self.tmpdir()
        src = self.gguf(d)
        with Mount(self, src) as m:
            names = sorted(os.listdir(m.p("tensors")))
            first = min(names, key=lambda n: int(os.getxattr(m.p("tensors", n),
                                                             "user.tensorfs.offset")))
            last = max(names, key=lambda n: int(os.getxattr(m.p("tensors", n),
                                                            "user.tensorfs.offset")))
            before = read(m.p("tensors", first))
            f32_first = read(m.p("f32", first))
            os.truncate(src, os.path.getsize(src) // 2)
            self.assert_cp_fails(m.p("model.gguf"), d)
            self.assert_eio(m.p("tensors", last))
            self.assert_eio(m.p("f32", last))
            self.assert_eio(m.p("npy", last + ".npy"))
            # what the file still has reads as before; the daemon is alive
            self.assertEqual(read(m.p("tensors", first)), before)
            self.assertEqual(read(m.p("f32", first)), f32_first)
            self.assertIn("index.json", os.listdir(m.path))

    def test_quantized_view(self):
        d = self.tmpdir()
        src = self.gguf(d)
        cache = os.path.join(d, "cache")
        with Mount(self, src, ["quantize=Q8_0", "cache=" + cache]) as m:
            os.truncate(src, os.path.getsize(src) // 2)
            self.assert_cp_fails(m.p("model.gguf"), d)

    def test_hugging_face_repo(self):
        import make_model
        d = self.tmpdir()
        repo = make_model.make(d, "mistral-bf16-sharded")
        shards = sorted(f for f in os.listdir(repo) if f.endswith(".safetensors"))
        self.assertGreater(len(shards), 1)
        with Mount(self, repo) as m:
            last = os.path.join(repo, shards[-1])
            os.truncate(last, os.path.getsize(last) // 2)
            self.assert_cp_fails(m.p("model.gguf"), d)
            self.assert_cp_fails(m.p("model.safetensors"), d)


if __name__ == "__main__":
    if shutil.which("cp") is None:
        print("1..0 # SKIP no cp")
        sys.exit(0)
    main()
