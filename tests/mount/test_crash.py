#!/usr/bin/python3
"""Crash trials: kill -9 of the daemon at random moments of a repack, for a GGUF file, a
safetensors file, a sharded safetensors set and an Ollama store; and repacks that run out of
space (ENOSPC) at random points on a small tmpfs.

Every kill is followed by checks: the model's files are byte for byte the old model or the
new one (the new one is what a clean repack of the same edits writes, measured first); when
they are the old one, a new rw mount with the same staging directory shows the staged edits
and its unmount writes the new model.  A sharded set or an Ollama store killed between the
renames of its files is rolled forward by the next mount (codec/journal/recovery.c): that state must
turn into the new model too.  The seed is printed; TFS_CRASH_SEED replays it.
"""
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time

import numpy as np

import ggufgen as gg
from stgen import st_header
from harness import TENSORFS, Mount, TestCase, env_set, is_mounted, main, quick, run

SEED = int(os.environ.get("TFS_CRASH_SEED", str(int(time.time()) % 100000)))
KILLS_PER_FORMAT = int(os.environ.get("TFS_CRASH_KILLS", "8"))
MiB = 1 << 20


# ==== helpers ====

_sha_cache = {}


def sha256(path):
    """sha256 of a file, cached by identity (a repack never writes a file in place: a
    changed file is a new inode, and a write in place would change mtime/ctime)."""
    st = os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _sha_cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(4 * MiB), b""):
                h.update(chunk)
        _sha_cache[key] = h.hexdigest()
    return _sha_cache[key]


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def rv(path):
    text = read(path)
    assert text.endswith("\n"), path
    return text[:-1]


def tree(d):
    """{relative path: sha256} of every file under d but a repack's temporaries."""
    out = {}
    for dp, dn, fn in os.walk(d):
        for f in fn:
            if "tensorfs" in f:
                continue
            p = os.path.join(dp, f)
            out[os.path.relpath(p, d)] = sha256(p)
    return out


def temporaries(d):
    return sorted(os.path.relpath(os.path.join(dp, f), d) for dp, dn, fn in os.walk(d)
                  for f in fn if "tensorfs-tmp" in f or "tensorfs" in f)


def big_gguf(path, name, n, rows, seed):
    """A GGUF of n F32 tensors of rows x 4096 (16 KiB per row) plus small ones."""
    w = gg.GGUFWriter(alignment=32)
    w.add_kv("general.architecture", gg.STRING, "llama")
    w.add_kv("general.name", gg.STRING, name)
    w.add_kv("general.url", gg.STRING, "https://example.invalid/" + name)
    for i in range(n):
        def fill(f, nbytes, i=i):
            row = np.arange(4096, dtype=np.float32) + i * 1000 + seed
            for _ in range(rows):
                f.write(row.tobytes())
        w.add_tensor("blk.%d.weight" % i, "F32", None, ne=[4096, rows], fill=fill)
    w.add_tensor("small.weight", "F32", np.ones(1024, np.float32))
    w.add_tensor("norm.weight", "F16", np.full(512, 0.5, np.float16))
    w.write(path)


ST_DT = {"float32": "F32", "float16": "F16"}


def st_file(path, tensors, metadata):
    """A safetensors file written as the reference writer lays it out: tensors
    [(name, dtype, shape, nbytes, fill)]; fill(f, nbytes) streams the bytes."""
    with open(path, "wb") as f:
        f.write(st_header([t[:4] for t in tensors], metadata))
        for _, _, _, nbytes, fill in tensors:
            fill(f, nbytes)


def rows_fill(value, rows, width=4096):
    def fill(f, nbytes):
        row = np.full(width, value, np.float32).tobytes()
        for _ in range(rows):
            f.write(row)
        assert rows * len(row) == nbytes
    return fill


def bytes_fill(b):
    return lambda f, nbytes: f.write(b)


# ==== the formats ====

def start_repack(tc, fmt, staging):
    """Mounts fmt's source rw with its own staging directory, makes fmt's edits and starts
    `tensorfs unmount` (which repacks them) without waiting for it.  Returns the mount (the
    caller ends it with m.__exit__), the daemon's pid, its status file and the unmount
    process."""
    m = Mount(tc, fmt.source(), ["rw", "staging=" + staging])
    m.__enter__()
    try:
        fmt.edit(m)
        pid = int(os.getxattr(m.path, "user.tensorfs.pid"))
        status = os.getxattr(m.path, "user.tensorfs.status").decode()
        um = subprocess.Popen([TENSORFS, "unmount", m.path], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    except BaseException:
        m.__exit__(None, None, None)
        raise
    return m, pid, status, um


class Format:
    """One model on disk: build() it under work/, snapshot() it, edit() it through a rw
    mount, check_edits() through a mount, restore() the pristine copy."""

    def __init__(self, root):
        self.root = root
        self.work = os.path.join(root, "work")
        self.pristine = os.path.join(root, "pristine")

    def setup(self):
        os.makedirs(self.work)
        self.build()
        shutil.copytree(self.work, self.pristine)

    def restore(self):
        shutil.rmtree(self.work)
        subprocess.run(["cp", "-a", "--reflink=auto", self.pristine, self.work], check=True)

    def snapshot(self):
        return tree(self.work)


class GGUF(Format):
    name = "gguf"

    def build(self):
        big_gguf(os.path.join(self.work, "model.gguf"), "old", 4, 768, 1)   # 48 MiB

    def source(self):
        return os.path.join(self.work, "model.gguf")

    def edit(self, m):
        write(m.p("metadata", "general.name"), "new name")
        os.unlink(m.p("metadata", "general.url"))
        write(m.p("tensors", "small.weight"), np.full(1024, 2.5, np.float32).tobytes())

    def check_edits(self, tc, m):
        tc.assertEqual(rv(m.p("metadata", "general.name")), "new name")
        tc.assertFalse(os.path.exists(m.p("metadata", "general.url")))
        tc.assertEqual(read(m.p("tensors", "small.weight"), "rb"),
                       np.full(1024, 2.5, np.float32).tobytes())


class Safetensors(Format):
    name = "safetensors"

    def build(self):
        st_file(os.path.join(self.work, "model.safetensors"),
                [("a.weight", "F32", [1024, 4096], 16 * MiB, rows_fill(1.0, 1024)),
                 ("b.weight", "F32", [1024, 4096], 16 * MiB, rows_fill(2.0, 1024)),
                 ("small", "F16", [256], 512, bytes_fill(np.ones(256, np.float16).tobytes()))],
                {"format": "pt", "note": "old"})

    def source(self):
        return os.path.join(self.work, "model.safetensors")

    def edit(self, m):
        write(m.p("metadata", "note"), "a new note, longer than the old one")
        write(m.p("tensors", "small"), np.full(256, 3, np.float16).tobytes())

    def check_edits(self, tc, m):
        tc.assertEqual(rv(m.p("metadata", "note")), "a new note, longer than the old one")
        tc.assertEqual(read(m.p("tensors", "small"), "rb"), np.full(256, 3, np.float16).tobytes())


class Sharded(Format):
    """Three shards; the edits touch the first and the last."""
    name = "sharded"

    def build(self):
        wm = {}
        for s in range(3):
            fn = "model-%05d-of-00003.safetensors" % (s + 1)
            big, small = "layers.%d.weight" % s, "layers.%d.bias" % s
            st_file(os.path.join(self.work, fn),
                    [(big, "F32", [768, 4096], 12 * MiB, rows_fill(s + 0.25, 768)),
                     (small, "F32", [64], 256, bytes_fill(np.zeros(64, np.float32).tobytes()))],
                    {"format": "pt"})
            wm[big] = wm[small] = fn
        write(os.path.join(self.work, "model.safetensors.index.json"),
              json.dumps({"metadata": {"total_size": 3 * (12 * MiB + 256)}, "weight_map": wm},
                         indent=2))

    def source(self):
        return self.work

    def edit(self, m):
        write(m.p("tensors", "layers.0.bias"), np.full(64, 7, np.float32).tobytes())
        os.rename(m.p("tensors", "layers.2.bias"), m.p("tensors", "layers.2.b"))

    def check_edits(self, tc, m):
        tc.assertEqual(read(m.p("tensors", "layers.0.bias"), "rb"), np.full(64, 7, np.float32).tobytes())
        tc.assertFalse(os.path.exists(m.p("tensors", "layers.2.bias")))
        tc.assertEqual(read(m.p("tensors", "layers.2.b"), "rb"), np.zeros(64, np.float32).tobytes())


class Ollama(Format):
    """A store with one classic (GGUF) model: a 32 MiB model blob, a template, a config."""
    name = "ollama"
    MANIFEST = "manifests/registry.ollama.ai/library/crash/latest"

    def blob(self, data=None, path=None):
        d = os.path.join(self.work, "blobs")
        os.makedirs(d, exist_ok=True)
        if path is None:
            path = os.path.join(d, "incoming")
            write(path, data)
        digest = "sha256:" + sha256(path)
        os.rename(path, os.path.join(d, digest.replace(":", "-")))
        return digest, os.path.getsize(os.path.join(d, digest.replace(":", "-")))

    def build(self):
        os.makedirs(os.path.join(self.work, "blobs"))
        tmp = os.path.join(self.work, "blobs", "incoming")
        big_gguf(tmp, "old", 2, 1024, 3)   # 32 MiB
        model = self.blob(path=tmp)
        tpl = self.blob(b"{{ .Prompt }}")
        cfg = self.blob(json.dumps({"model_format": "gguf", "model_family": "llama",
                                    "model_families": ["llama"], "model_type": "1B",
                                    "file_type": "F32", "architecture": "amd64",
                                    "os": "linux"}).encode())
        man = {"schemaVersion": 2,
               "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
               "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                          "digest": cfg[0], "size": cfg[1]},
               "layers": [{"mediaType": "application/vnd.ollama.image.model",
                           "digest": model[0], "size": model[1]},
                          {"mediaType": "application/vnd.ollama.image.template",
                           "digest": tpl[0], "size": tpl[1]}]}
        p = os.path.join(self.work, self.MANIFEST)
        os.makedirs(os.path.dirname(p))
        write(p, json.dumps(man))

    def source(self):
        return os.path.join(self.work, self.MANIFEST)

    def snapshot(self):
        """The manifest's bytes and every blob it names; every blob in the store must be
        whole (named by the sha256 of its bytes): left-over new blobs of a killed repack are
        harmless, a torn blob under a final name is not."""
        blobs = os.path.join(self.work, "blobs")
        for f in os.listdir(blobs):
            if "tensorfs" in f:
                continue   # a killed repack's temporary: the next mount removes it
            assert f.startswith("sha256-") and sha256(os.path.join(blobs, f)) == f[7:], \
                "blob %s is not whole" % f
        man = json.loads(read(self.source()))
        snap = {"manifest": sha256(self.source())}
        for l in [man["config"]] + man["layers"]:
            snap[l["digest"]] = sha256(os.path.join(blobs, l["digest"].replace(":", "-")))
        return snap

    def edit(self, m):
        write(m.p("metadata", "general.name"), "new name")
        write(m.p("layers", "template"), "{{ .System }} {{ .Prompt }}")

    def check_edits(self, tc, m):
        tc.assertEqual(rv(m.p("metadata", "general.name")), "new name")
        tc.assertEqual(read(m.p("layers", "template")), "{{ .System }} {{ .Prompt }}")


# ==== the trials ====

class Crash(TestCase):
    def kill_trials(self, fmt_cls, rng):
        root = self.tmpdir()
        fmt = fmt_cls(root)
        fmt.setup()
        old = fmt.snapshot()
        # the new model: a clean repack of the same edits (and how long a repack takes)
        staging = os.path.join(root, "staging-clean")
        with Mount(self, fmt.source(), ["rw", "staging=" + staging]) as m:
            fmt.edit(m)
            t0 = time.time()
            r = m.unmount()
            took = time.time() - t0
        self.assertEqual(r.returncode, 0, r.stderr)
        new = fmt.snapshot()
        self.assertNotEqual(new, old)
        outcomes = []
        for trial in range(KILLS_PER_FORMAT):
            fmt.restore()
            self.assertEqual(fmt.snapshot(), old)
            delay = rng.uniform(0, took * 1.25)
            outcomes.append(self.one_kill(fmt, os.path.join(root, "staging-%d" % trial), delay,
                                          old, new))
        print("# %s: repack %.2f s; kills at random delays: %s" % (fmt.name, took, ", ".join(outcomes)),
              flush=True)
        return outcomes

    def one_kill(self, fmt, staging, delay, old, new):
        m, pid, _, um = start_repack(self, fmt, staging)
        try:
            time.sleep(delay)
            try:
                os.kill(pid, signal.SIGKILL)
                killed = True
            except ProcessLookupError:
                killed = False
            out, err = um.communicate(timeout=120)
        finally:
            m.__exit__(None, None, None)
        what = "%s at %.3f s" % (fmt.name, delay)
        self.assertFalse(is_mounted(m.path), what)
        after = fmt.snapshot()
        left = temporaries(fmt.work)
        if left:
            what += " (left %s)" % ",".join(left)
        if "the mount was dead" in err:
            # killed before tensorfs unmount could even ask the daemon: a dead mount, removed
            what += " (killed while mounted)"
        elif um.returncode == 0:
            # "tensorfs unmount" says the repack is done: it must be
            self.assertEqual(after, new, what + ": unmount exited 0 but the model is not the "
                             "new one: " + err)
        elif "not a tensorfs mount" in err or "could not unmount" in err:
            # killed before tensorfs unmount could even ask the daemon: a dead mount
            what += " (killed while mounted)"
        else:
            self.assertRegex(err, "exited before (the repack finished|it repacked the changes)"
                             "|could not be followed", what)
        if after == new:
            outcome = "new"
        elif after == old:
            outcome = "old"
            self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")), what)
        else:
            outcome = "mixed"
            journal = json.loads(read(os.path.join(staging, "journal.json")))
            self.assertIn("repack", journal, what + ": neither old nor new, and no repack "
                          "recorded in the journal")
        # a new mount with the same staging directory shows the edits and finishes the job
        with Mount(self, fmt.source(), ["rw", "staging=" + staging]) as m:
            fmt.check_edits(self, m)
            r = m.unmount()
        self.assertEqual(r.returncode, 0, what + ": " + r.stderr)
        if outcome != "old":
            self.assertNotIn("repacking", r.stderr, what + ": applied twice")
        self.assertEqual(fmt.snapshot(), new, what + " (%s): the next mount did not give the "
                         "new model" % outcome)
        self.assertFalse(os.path.exists(os.path.join(staging, "journal.json")), what)
        # no temporary is left behind, wherever the kill landed
        self.assertEqual(temporaries(fmt.work), [], what)
        if "while mounted" in what:
            outcome += "(mounted)"
        if left:
            outcome += "(+tmp)"
        return outcome + ("" if killed else "(exited)")

    def test_kill9_during_repacks(self):
        """>= 30 kill -9 at random moments of a repack across GGUF, safetensors, a sharded
        set and an Ollama store."""
        print("# seed %d (TFS_CRASH_SEED=%d replays it)" % (SEED, SEED), flush=True)
        rng = random.Random(SEED)
        outcomes = []
        for cls in (GGUF, Safetensors, Sharded, Ollama):
            outcomes += self.kill_trials(cls, rng)
        self.assertGreaterEqual(len(outcomes), 30 if KILLS_PER_FORMAT >= 8 else 1)
        # the delays are spread over the repack: some kills must land before the rename
        self.assertIn("old", [o.split("(")[0] for o in outcomes],
                      "no kill landed inside a repack (seed %d)" % SEED)


    @quick
    def test_unmount_reports_kill_before_repack(self):
        """The daemon dead after the FUSE unmount and before it starts the repack (as a kill
        -9 there: TFS_TEST_CRASH_AT=before_repack; killing it at random landed there in few
        runs): the changes are staged, not written; `tensorfs unmount` must not exit 0 (it
        did: tfsd_unmount_main reported a dead daemon only when the status file said the
        repack started, and the daemon writes nothing to it before then)."""
        root = self.tmpdir()
        fmt = GGUF(root)
        fmt.setup()
        old = fmt.snapshot()
        staging = os.path.join(root, "staging")
        with env_set(TFS_TEST_CRASH_AT="before_repack"):
            m, _, _, um = start_repack(self, fmt, staging)
        try:
            err = um.communicate(timeout=60)[1]
        finally:
            m.__exit__(None, None, None)
        self.assertEqual(fmt.snapshot(), old)
        self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")))
        self.assertNotEqual(um.returncode, 0, "tensorfs unmount exited 0 (stderr %r) but the "
                            "changes were not written" % err)
        self.assertIn("exited before it repacked the changes", err)


    def test_kill_after_temporaries_named(self):
        """kill -9 as soon as a named temporary appears beside the output (the journal does
        not name it yet): the next mount and repack must not leave it there."""
        root = self.tmpdir()
        fmt = Safetensors(root)
        fmt.setup()
        for attempt in range(10):
            staging = os.path.join(root, "staging-%d" % attempt)
            m, pid, _, um = start_repack(self, fmt, staging)
            try:
                while not temporaries(fmt.work) and um.poll() is None:
                    pass
                os.kill(pid, signal.SIGKILL)
                um.communicate(timeout=60)
            finally:
                m.__exit__(None, None, None)
            left = temporaries(fmt.work)
            jpath = os.path.join(staging, "journal.json")
            if left and "repack" not in json.loads(read(jpath)):
                break
            fmt.restore()
        else:
            self.skipTest("could not kill the daemon between the link and the journal")
        with Mount(self, fmt.source(), ["rw", "staging=" + staging]) as m:
            fmt.check_edits(self, m)
            r = m.unmount()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(temporaries(fmt.work), [], "left beside the output for good")
        r = run([TENSORFS, "repack", fmt.source(), "-o", "staging=" + staging])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(temporaries(fmt.work), [], "left beside the output for good")


# ==== ENOSPC ====

class FullDisk(TestCase):
    """A repack that runs out of space at a random point: a clean error, the source intact,
    the staging directory intact (a later mount shows the edits)."""

    def setUp(self):
        self.dir = self.tmpdir()
        r = run(["mount", "-t", "tmpfs", "-o", "size=40m", "tfs-test-enospc", self.dir])
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
        self.addCleanup(lambda: run(["umount", "-l", self.dir]))

    def free(self):
        st = os.statvfs(self.dir)
        return st.f_bavail * st.f_frsize

    def test_enospc_at_random_points(self):
        rng = random.Random(SEED + 7)
        print("# seed %d" % (SEED + 7), flush=True)
        src = os.path.join(self.dir, "model.gguf")
        big_gguf(src, "old", 2, 256, 5)   # 8 MiB
        size = os.path.getsize(src)
        sha0 = sha256(src)
        staging = os.path.join(self.dir, "staging")
        ballast = os.path.join(self.dir, "ballast")
        results = []
        for trial in range(8):
            with Mount(self, src, ["rw", "staging=" + staging]) as m:
                write(m.p("metadata", "general.name"), "edit %d" % trial)
                write(m.p("tensors", "small.weight"), np.full(1024, trial, np.float32).tobytes())
                # leave between 0 and the size of the new file free: the repack stops there
                room = rng.randrange(0, size + 64 * 1024)
                fill = max(0, self.free() - room)
                with open(ballast, "wb") as f:
                    chunk = b"\xaa" * MiB
                    while fill > 0:
                        try:
                            f.write(chunk[:min(fill, MiB)])
                            f.flush()
                        except OSError:
                            break
                        fill -= MiB
                free = self.free()
                r = m.unmount()
            what = "trial %d, %d bytes free" % (trial, free)
            if r.returncode == 0:
                # it fitted: then it is the new file
                results.append("fit")
                with Mount(self, src) as m:
                    self.assertEqual(rv(m.p("metadata", "general.name")), "edit %d" % trial, what)
                sha0 = sha256(src)
                os.unlink(ballast)
                continue
            results.append("ENOSPC@%dK" % (free // 1024))
            if trial == 0:
                print("# tensorfs unmount said: " + " | ".join(r.stderr.splitlines()), flush=True)
            errs = [l for l in r.stderr.splitlines() if l.startswith("error:")]
            self.assertEqual(len(errs), 1, what + ": " + r.stderr)
            self.assertRegex(errs[0], "No space left|cannot reserve", what)
            self.assertIn("source is untouched", errs[0], what)
            self.assertNotRegex(r.stderr, "(?i)segfault|abort|core dumped|assert", what)
            self.assertEqual(sha256(src), sha0, what + ": the source changed")
            self.assertEqual([f for f in os.listdir(self.dir) if "tensorfs-tmp" in f], [], what)
            self.assertTrue(os.path.exists(os.path.join(staging, "journal.json")), what)
            # the staging directory still holds the edits: a later (read-write) mount shows
            # them; with the ballast gone its unmount writes them
            os.unlink(ballast)
            with Mount(self, src, ["rw", "staging=" + staging]) as m:
                self.assertEqual(rv(m.p("metadata", "general.name")), "edit %d" % trial, what)
                self.assertEqual(read(m.p("tensors", "small.weight"), "rb"),
                                 np.full(1024, trial, np.float32).tobytes(), what)
                r = m.unmount()
            self.assertEqual(r.returncode, 0, what + ": " + r.stderr)
            sha0 = sha256(src)
            with Mount(self, src) as m:
                self.assertEqual(rv(m.p("metadata", "general.name")), "edit %d" % trial, what)
        print("# " + ", ".join(results), flush=True)
        self.assertTrue(any(x.startswith("ENOSPC") for x in results),
                        "no trial ran out of space (seed %d)" % (SEED + 7))


if __name__ == "__main__":
    main()
