#!/usr/bin/python3
"""Repacks that share extents (issue 11): on XFS (mkfs.xfs -m reflink=1) and btrfs, each
made by this test in a loop-mounted image file, a repack after a metadata edit clones every
unchanged tensor's whole blocks from the source instead of copying them.

Checked on each file system, through real mounts:
- the output parses (tensorfs' own reader, this test's GGUF reader and ggml's
  gguf_init_from_file), holds the edit, and every tensor has the source's bytes;
- FIEMAP (filefrag -v) marks nearly all of the output's data blocks "shared", and `df`
  grows by a few MiB at most for an in-place repack of a 96 MiB model;
- the padding key that moves the data section (tensorfs.padding) is hidden when the
  output is mounted again, is written once however often the file is repacked, and is
  refused as a new key;
- llama.cpp (libllama) runs the repacked sample model to the same tokens as the source.
Needs root, loop devices, mkfs.xfs and mkfs.btrfs (scripts/setup.sh installs xfsprogs and
btrfs-progs): says SKIP with the reason otherwise.
"""
import errno
import json
import os
import re
import shutil
import struct
import tempfile

import numpy as np

from ggufgen import GGUFWriter, read_gguf
from harness import Mount, TestCase, main, quick, run
from stgen import st_raw

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA_DIR = os.path.join(HERE, "..", "llama")
SAMPLE = os.path.join(HERE, "..", "..", "examples", "tiny-llama.gguf")
FILESYSTEMS = {"xfs": ["mkfs.xfs", "-q", "-m", "reflink=1"], "btrfs": ["mkfs.btrfs", "-q"]}
MIB = 1 << 20


class Image:
    """A file system of kind fs in a sparse image file, loop-mounted; .path is its root."""

    def __init__(self, fs):
        self.fs = fs
        self.dir = tempfile.mkdtemp(prefix="tfs-%s-" % fs, dir="/var/tmp")
        self.img = os.path.join(self.dir, "fs.img")
        self.path = os.path.join(self.dir, "root")
        self.error = None
        os.mkdir(self.path)
        with open(self.img, "wb") as f:
            f.truncate(1024 * MIB)
        mk = FILESYSTEMS[fs]
        if not shutil.which(mk[0]):
            self.error = "%s is not installed (xfsprogs/btrfs-progs)" % mk[0]
            return
        r = run(mk + [self.img], timeout=120)
        if r.returncode != 0:
            self.error = "%s failed: %s" % (mk[0], r.stderr.strip()[-200:])
            return
        r = run(["mount", "-o", "loop", self.img, self.path], timeout=60)
        if r.returncode != 0:
            self.error = "cannot loop-mount a %s image: %s" % (fs, r.stderr.strip()[-200:])

    def used_kib(self):
        os.sync()
        if self.fs == "btrfs":
            run(["btrfs", "filesystem", "sync", self.path])
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024

    def close(self):
        if os.path.ismount(self.path):
            r = run(["umount", self.path], timeout=60)
            if r.returncode != 0:
                run(["umount", "-l", self.path])
        shutil.rmtree(self.dir, True)


IMAGES = {}


def image(tc, fs):
    if os.geteuid() != 0:
        tc.skipTest("needs root to loop-mount %s" % fs)
    if fs not in IMAGES:
        IMAGES[fs] = Image(fs)
    im = IMAGES[fs]
    if im.error:
        tc.skipTest(im.error)
    return im


def shared_bytes(path):
    """Bytes of path in extents FIEMAP flags as shared."""
    r = run(["filefrag", "-v", path], check=True)
    bs = int(re.search(r"blocks of (\d+) bytes", r.stdout).group(1))
    n = 0
    for line in r.stdout.splitlines():
        m = re.match(r"\s*\d+:\s+\d+\.\.\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+):.*", line)
        if m and "shared" in line.split(":")[-1]:
            n += int(m.group(1)) * bs
    return n


def make_gguf(path, seed=1, mib=96):
    """F32 and F16 tensors of odd sizes, so their offsets fall at many alignments."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(alignment=32)
    w.add_kv("general.architecture", 8, "llama")
    w.add_kv("general.name", 8, "reflink test")
    w.add_kv("tokenizer.chat_template", 8, "{{ messages }}")
    left, i = mib * MIB, 0
    while left > 0:
        cols = 1000 + 37 * i
        rows = min(max(1, left // (cols * 4)), 2048 + 11 * i)
        dt = np.float32 if i % 2 == 0 else np.float16
        w.add_tensor("blk.%d.w" % i, "F32" if dt is np.float32 else "F16",
                     rng.standard_normal((rows, cols)).astype(dt))
        left -= rows * cols * np.dtype(dt).itemsize
        i += 1
    w.write(path)
    return read_gguf(path)


def tensor_bytes(path, info):
    with open(path, "rb") as f:
        out = {}
        for t in info["tensors"]:
            f.seek(t["abs_offset"])
            out[t["name"]] = f.read(t["nbytes"])
        return out


def ggml_view(tc, path):
    r = run(["/usr/bin/python3", os.path.join(LLAMA_DIR, "ggml_gguf.py"), path], timeout=120)
    if r.returncode != 0 and "libraries not found" in r.stderr:
        return None  # said once by test_llama_runs_the_repacked_sample
    tc.assertEqual(r.returncode, 0, "ggml refuses %s: %s" % (path, r.stderr.strip()))
    return json.loads(r.stdout)


class T(TestCase):
    def edit_and_repack(self, src, options=(), edit=None):
        with Mount(self, src, ["rw"] + list(options)) as m:
            if edit:
                edit(m)
            else:
                with open(m.p("metadata", "general.name"), "w") as f:
                    f.write("edited " * 173)  # an odd length: the header grows by 1211 bytes
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)

    def check_gguf_output(self, fs, src_info, src_bytes, out, changed=()):
        info = read_gguf(out)
        blk = os.statvfs(out).f_bsize
        got = tensor_bytes(out, info)
        self.assertEqual(sorted(got), sorted(src_bytes))
        for name, b in src_bytes.items():
            if name not in changed:
                self.assertTrue(got[name] == b, "%s: tensor %s differs" % (fs, name))
        # the data section moved by whole blocks: each tensor at its source offset mod blk
        self.assertEqual(info["data_offset"] % blk, src_info["data_offset"] % blk)
        keys = [k for k, _, _ in info["kv"]]
        self.assertLessEqual(keys.count(b"tensorfs.padding"), 1)
        data = sum(t["nbytes"] for t in info["tensors"] if t["name"] not in changed)
        return info, data

    def gguf_case(self, fs):
        im = image(self, fs)
        src = os.path.join(im.path, "model.gguf")
        out = os.path.join(im.path, "out.gguf")
        src_info = make_gguf(src)
        src_bytes = tensor_bytes(src, src_info)
        self.addCleanup(lambda: [os.unlink(p) for p in (src, out) if os.path.exists(p)])
        self.edit_and_repack(src, ["output=" + out])
        info, data = self.check_gguf_output(fs, src_info, src_bytes, out)
        self.assertIn((b"general.name", 8, ("edited " * 173).encode()), info["kv"])
        # the header grew by 1211 bytes: only padding can put the data a block further
        self.assertEqual(info["data_offset"], src_info["data_offset"] + 4096)
        self.assertEqual([k for k, _, _ in info["kv"]][-1], b"tensorfs.padding")
        shared = shared_bytes(out)
        self.assertGreaterEqual(shared, data - 2 * 4096 * len(info["tensors"]),
                                "%s: only %d of %d data bytes shared" % (fs, shared, data))
        view = ggml_view(self, out)
        if view is not None:
            self.assertEqual(view["data_offset"], info["data_offset"])
            self.assertEqual(len(view["tensors"]), len(src_info["tensors"]))
        # mounted again: the padding is not a key; the name is the new one
        with Mount(self, out) as m:
            names = os.listdir(m.p("metadata"))
            self.assertNotIn("tensorfs.padding", names)
            self.assertIn("general.name", names)
            idx = json.load(open(m.p("index.json")))
            self.assertNotIn("tensorfs.padding", json.dumps(idx))

    @quick
    def test_gguf_metadata_edit_xfs(self):
        self.gguf_case("xfs")

    def test_gguf_metadata_edit_btrfs(self):
        self.gguf_case("btrfs")

    def in_place_case(self, fs):
        im = image(self, fs)
        src = os.path.join(im.path, "inplace.gguf")
        self.addCleanup(lambda: os.path.exists(src) and os.unlink(src))
        src_info = make_gguf(src, seed=2)
        src_bytes = tensor_bytes(src, src_info)
        before = im.used_kib()
        self.edit_and_repack(src)
        after = im.used_kib()
        self.check_gguf_output(fs, src_info, src_bytes, src)
        # the old file's blocks now belong to the new one: a few MiB of metadata at most
        self.assertLess(after - before, 8 * 1024, "%s: %d KiB more used" % (fs, after - before))

    def test_in_place_xfs(self):
        self.in_place_case("xfs")

    def test_in_place_btrfs(self):
        self.in_place_case("btrfs")

    def test_tensor_edit_keeps_the_rest_shared(self):
        im = image(self, "xfs")
        src = os.path.join(im.path, "t.gguf")
        out = os.path.join(im.path, "t-out.gguf")
        self.addCleanup(lambda: [os.unlink(p) for p in (src, out) if os.path.exists(p)])
        src_info = make_gguf(src, seed=3)
        src_bytes = tensor_bytes(src, src_info)
        victim = src_info["tensors"][2]
        new = bytes(reversed(src_bytes[victim["name"]]))

        def edit(m):
            with open(m.p("tensors", victim["name"].decode()), "r+b") as f:
                f.write(new)

        self.edit_and_repack(src, ["output=" + out], edit)
        info, data = self.check_gguf_output("xfs", src_info, src_bytes, out,
                                            changed=(victim["name"],))
        self.assertEqual(tensor_bytes(out, info)[victim["name"]], new)
        self.assertGreaterEqual(shared_bytes(out), data - 2 * 4096 * len(info["tensors"]))

    def test_repacked_twice_one_padding_key(self):
        im = image(self, "xfs")
        src = os.path.join(im.path, "twice.gguf")
        self.addCleanup(lambda: os.path.exists(src) and os.unlink(src))
        src_info = make_gguf(src, seed=4, mib=24)
        src_bytes = tensor_bytes(src, src_info)
        for text in ("a" * 3001, "b", "c" * 9000):
            def edit(m, text=text):
                with open(m.p("metadata", "tokenizer.chat_template"), "w") as f:
                    f.write(text)
            self.edit_and_repack(src, edit=edit)
            info, _ = self.check_gguf_output("xfs", src_info, src_bytes, src)
            kv = {k: v for k, _, v in info["kv"]}
            self.assertEqual(kv[b"tokenizer.chat_template"], text.encode())
            self.assertEqual(len(info["kv"]), len(src_info["kv"]) +
                             (b"tensorfs.padding" in kv))
        # a user cannot add the reserved key
        with Mount(self, src, ["rw"]) as m:
            with self.assertRaises(OSError) as cm:
                with open(m.p("metadata", "tensorfs.padding"), "w") as f:
                    f.write("1")
            self.assertIn(cm.exception.errno, (errno.EINVAL, errno.EPERM, errno.EACCES))
            err = os.getxattr(m.path, "user.tensorfs.last_error").decode()
            self.assertIn("reserved", err)

    def test_safetensors_metadata_edit(self):
        for fs in ("xfs", "btrfs"):
            im = image(self, fs)
            src = os.path.join(im.path, "m.safetensors")
            out = os.path.join(im.path, "out.safetensors")
            self.addCleanup(lambda s=src, o=out: [os.unlink(p) for p in (s, o) if os.path.exists(p)])
            rng = np.random.default_rng(5)
            tensors = []
            for i in range(6):
                a = rng.standard_normal((1500 + 7 * i, 2000 + 3 * i)).astype(np.float32)
                tensors.append(("layer.%d.weight" % i, "F32", list(a.shape), a.tobytes()))
            with open(src, "wb") as f:
                f.write(st_raw(tensors, {"format": "pt", "note": "x"}))

            def edit(m):
                with open(m.p("metadata", "note"), "w") as f:
                    f.write("a longer note " * 77)

            self.edit_and_repack(src, ["output=" + out], edit)
            with open(out, "rb") as f:
                raw = f.read()
            (n,) = struct.unpack("<Q", raw[:8])
            header = json.loads(raw[8:8 + n])  # trailing spaces are valid JSON padding
            self.assertTrue(raw[8:8 + n].rstrip(b" ").endswith(b"}"))
            self.assertEqual(header["__metadata__"]["note"], "a longer note " * 77)
            (n0,) = struct.unpack("<Q", open(src, "rb").read(8))
            self.assertEqual((8 + n) % 4096, (8 + n0) % 4096, fs)
            data = 0
            for name, dt, shape, b in tensors:
                lo, hi = header[name]["data_offsets"]
                self.assertEqual(header[name]["shape"], shape)
                self.assertTrue(raw[8 + n + lo:8 + n + hi] == b, "%s: %s differs" % (fs, name))
                data += len(b)
            self.assertEqual(len(raw), 8 + n + data)
            shared = shared_bytes(out)
            self.assertGreaterEqual(shared, data - 2 * 4096 * len(tensors), fs)

    def test_llama_runs_the_repacked_sample(self):
        im = image(self, "xfs")
        src = os.path.join(im.path, "tiny.gguf")
        self.addCleanup(lambda: os.path.exists(src) and os.unlink(src))
        shutil.copyfile(SAMPLE, src)
        gen = ["/usr/bin/python3", os.path.join(LLAMA_DIR, "generate.py")]
        r = run(gen + [SAMPLE], timeout=300)
        if r.returncode != 0 and "libraries not found" in r.stderr:
            self.skipTest("llama.cpp's libraries are not installed: %s" % r.stderr.strip())
        self.assertEqual(r.returncode, 0, r.stderr)
        before = json.loads(r.stdout)
        self.edit_and_repack(src)
        r = run(gen + [src, "--key", "general.name"], timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        after = json.loads(r.stdout)
        self.assertEqual(after["tokens"], before["tokens"])
        self.assertEqual(after["meta"]["general.name"], "edited " * 173)


def close_images():
    for im in IMAGES.values():
        im.close()


if __name__ == "__main__":
    try:
        main()
    finally:
        close_images()
