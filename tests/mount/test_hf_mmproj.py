#!/usr/bin/python3
"""A multimodal Hugging Face repo's projector (mmproj.gguf) through real mounts, against the
real reference (issue 37).

- mmproj.gguf of a mount of tests/hf/make_mmproj.py's repos (Gemma 3 with its SigLIP tower,
  BF16, F16 in two shards, F32; Gemma 4's vision tower, F16 in two shards, and with its audio
  tower, BF16; and the others of its list: Qwen2.5-VL, Qwen3-VL, Mistral 3, Llama 4,
  Qwen3.5, SmolVLM2, LFM2-VL, InternVL 3) is `cmp`-equal to
  what llama.cpp's convert_hf_to_gguf.py --mmproj writes (tests/hf/reference.py), at auto,
  and at every outtype for each source dtype's first repo (compare_mmproj.py compares every
  repo x outtype without a mount); model.gguf beside it is the converter's text model (LFM2-VL's
  LFM2 text model and InternVL's Qwen2 are not shown: the mount says so in one line); both
  read whole and at random offsets; index.json ("mmproj") and
  `tensorfs info` (the summary's projector line, --mmproj) describe it; `tensorfs convert
  REPO OUT -o mmproj` writes the same file.
- A repo whose class has no projector row but a vision_config (LlamaForCausalLM with one)
  shows its text model and no mmproj.gguf, and says why in one line (the class, the classes
  that have one); so does a repo without preprocessor_config.json, with a malformed one, or
  with a tower tensor the converter cannot name, and Gemma 4's F16 audio tower (the
  converter's softplus fails on Half); a text model shows no mmproj.gguf and says nothing.
- llama.cpp decodes the Qwen2.5-VL repo's model.gguf through the mount as the converter's;
  its libmtmd (built from the reference's tools/mtmd: tests/llama/mtmd_embed.py) encodes an
  image through the mount's mmproj.gguf of Gemma 3, Qwen2.5-VL, Qwen3-VL, Gemma 4 and
  SmolVLM2, and a sound through Gemma 4's, into the embeddings it gets from the converter's
  file, bit for bit.
- Memory: the daemon's peak RSS while it reads the projector of a repo of about 100 MiB of
  F32 weights, at q8_0 (computed) and f32 (spliced), stays within 32 MiB (measured: 5-7 MiB).

Without the reference (reference.missing_reason()), the tests needing it SKIP.  The models
and the converter's files are kept in $TFS_HF_MMPROJ_WORK (meson: the build directory).
"""
import json
import os
import random
import sys
import tempfile

from harness import TENSORFS, Mount, TestCase, main, run

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import compare  # noqa: E402  (tests/hf: the converter, GGUF reading)
import hfutil  # noqa: E402
import llamacpp  # noqa: E402
import make_mmproj  # noqa: E402
import mtmd_embed  # noqa: E402  (tests/llama: libmtmd, built from the reference's source)
import reference  # noqa: E402

WORK = os.environ.get("TFS_HF_MMPROJ_WORK") or os.path.join(tempfile.gettempdir(),
                                                            "tfs-hf-mmproj-mount")
OUTTYPES = ("auto", "f32", "f16", "bf16", "q8_0")
MiB = 1 << 20
SANITIZED = "ASAN_OPTIONS" in os.environ   # (RSS then says nothing about tensorfs' own)

REPOS = hfutil.Repos(WORK, make_mmproj)
model = REPOS.model


def read(path):
    with open(path, "rb") as f:
        return f.read()


def converted(tc, name, outtype, mmproj=True):
    """The converter's file (--mmproj, or the text model) of a variant at outtype."""
    if REPOS.why:
        tc.skipTest(REPOS.why)
    out = os.path.join(WORK, "ref", "%s.%s.%s.gguf" % (name, outtype,
                                                       "mmproj" if mmproj else "text"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if not (os.path.exists(out) and
            os.path.getmtime(out) > compare.newest_mtime(model(name))):
        err = reference.convert(model(name), out, "--outtype", outtype,
                                *(["--mmproj"] if mmproj else []))
        if err:
            tc.fail("%s %s: %s" % (name, outtype, err))
    return out


def twinned(name):
    """Whether another variant is name's class and projector with a small vocabulary
    (qwen25vl-bf16: qwen25vl-spm-bf16)."""
    return "moe" not in make_mmproj.make_model.spec(name) and make_mmproj.has_small_twin(name) \
        and not compare.in_quick(make_mmproj.make_model, name, "f32")


def index(m):
    return json.loads(read(m.p("index.json")))


def daemon_hwm(m):
    pid = int(os.getxattr(m.path, "user.tensorfs.pid"))
    with open("/proc/%d/status" % pid) as f:
        return [int(x.split()[1]) * 1024 for x in f if x.startswith("VmHWM:")][0]


class Equal(TestCase):
    def test_mmproj_and_model_gguf_equal_the_converter(self):
        """mmproj.gguf and model.gguf cmp-equal, whole: each variant at auto, and at every
        outtype the first variant of each source dtype (BF16, F16, F32: the daemon's
        conversions from each); every variant x outtype's bytes are compare_mmproj.py's
        (hf_dump: the view's same code, without the mount), where a mount of each ran the
        mount's same path again (57 mounts were 7 CPU-s).  (Under the sanitizers each
        variant at auto and the first at every outtype: the daemon's path of each projector
        and each outtype once; a real tokenizer's repo with a small-vocabulary twin is left
        to the twin, its projector's class and path.  A lean variant at auto only, and not
        under the sanitizers: its bytes at every outtype are compare_mmproj.py's, its row's
        code under the sanitizers too, and its daemon's paths those of a variant before it,
        its real tokenizer's 11 MB the cost of a mount.)"""
        dtypes = set()
        for i, name in enumerate(make_mmproj.VARIANTS):
            if SANITIZED and (make_mmproj.is_lean(name) or twinned(name)):
                continue
            dt = make_mmproj.make_model.spec(name).get("dtype")
            every = i == 0 if SANITIZED else dt is not None and dt not in dtypes and \
                not make_mmproj.is_lean(name)
            dtypes.add(dt)
            for t in OUTTYPES if every else OUTTYPES[:1]:
                files = [("mmproj.gguf", converted(self, name, t))]
                # a real tokenizer's text model (Qwen2.5-VL's) at compare.py's
                # BIG_VOCAB_QUICK outtypes only, or the variant's text_quick ones: its
                # converter runs cost seconds each
                if make_mmproj.text_in_quick(name, t):
                    files.append(("model.gguf", converted(self, name, t, mmproj=False)))
                ref = files[0][1]
                no_text = make_mmproj.has_no_text(name)
                with Mount(self, model(name), ["outtype=" + t], allow_stderr=no_text) as m:
                    self.assertIn("mmproj.gguf", os.listdir(m.path))
                    if no_text:   # (LFM2-VL's, InternVL's: the text view's one line)
                        said = m.mount_stderr.strip().splitlines()
                        self.assertEqual(len(said), 1, m.mount_stderr)
                        self.assertRegex(said[0], r"no model\.gguf: .*architecture "
                                         r"\w+ is not supported for the GGUF view")
                        self.assertNotIn("model.gguf", os.listdir(m.path))
                    for f, want in files:
                        r, o = read(want), read(m.p(f))
                        self.assertTrue(o == r, "%s %s %s: %s" % (
                            name, t, f, compare.first_difference(r, o)))
                    v = index(m)["mmproj"]
                    self.assertEqual((v["name"], v["size"], v["architecture"]),
                                     ("mmproj.gguf", len(read(ref)), "clip"))

    def test_reads_at_any_offset(self):
        rng = random.Random(37)
        # Qwen2.5-VL at auto: its split tensors, BF16 copies gathered and F32 conversions
        for name, t in (("gemma3-vision-f16", "q8_0"), ("gemma3-vision-f16", "f16"),
                        ("qwen25vl-bf16", "auto")):
            ref = read(converted(self, name, t))
            with Mount(self, model(name), ["outtype=" + t]) as m:
                fd = os.open(m.p("mmproj.gguf"), os.O_RDONLY)
                try:
                    for _ in range(200):
                        off = rng.randrange(len(ref))
                        n = rng.choice([1, 7, 33, 4096, 5000, 65536])
                        self.assertEqual(os.pread(fd, n, off), ref[off:off + n], (t, off, n))
                finally:
                    os.close(fd)

    def test_info_and_convert(self):
        name = "gemma3-vision-bf16"
        ref = read(converted(self, name, "q8_0"))
        g = compare.Gguf(ref)
        r = run([TENSORFS, "info", "--mmproj", "--outtype=q8_0", "--json", model(name)])
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual([k["name"] for k in j["keys"]], [k[0] for k in g.kvs])
        self.assertEqual([t["name"] for t in j["tensors"]], [t[0] for t in g.tensors])
        r = run([TENSORFS, "info", model(name), "--no-tensors"])
        self.assertRegex(r.stdout, r"projector +mmproj\.gguf, ")
        self.assertIn("GGUF view    model.gguf", r.stdout)
        r = run([TENSORFS, "info", "--json", model(name)])
        self.assertEqual(json.loads(r.stdout)["mmproj"]["tensors"], len(g.tensors))
        out = os.path.join(self.tmpdir(), "mmproj.gguf")
        r = run([TENSORFS, "convert", model(name), out, "-o", "mmproj,outtype=q8_0"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(read(out) == ref, compare.first_difference(ref, read(out)))
        r = run([TENSORFS, "convert", model(name), out + "2", "-o", "mmproj,quantize=Q4_K_M"])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


class Llama(TestCase):
    """llama.cpp (TFS_LLAMA_LIB's libllama knows qwen2vl) greedy-decodes the mount's
    model.gguf of the Qwen2.5-VL repo as the converter's text file (hfutil.same_tokens).  Not
    Qwen3-VL's: that runtime aborts on the converter's own file of the tiny model
    (GGML_ASSERT(ggml_can_repeat(b, a)))."""
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())

    def test_qwen25vl_text_model_decodes_as_the_converter(self):
        def decode(path):
            r = run(["/usr/bin/python3", os.path.join(HERE, "..", "llama", "generate.py"), path,
                     "--n", "12"], timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)
        name = "qwen25vl-bf16"
        ref = converted(self, name, "auto", mmproj=False)
        with Mount(self, model(name), ["outtype=auto"]) as m:
            hfutil.same_tokens(self, name, ref, m.p("model.gguf"), decode)


class Mtmd(TestCase):
    """llama.cpp's multimodal library (libmtmd: tools/mtmd of the reference clone, built
    against the npm runtime's libggml and libllama by tests/llama/mtmd_embed.py, cached in
    build/refmtmd-cache) loads the mount's model.gguf and mmproj.gguf and encodes one
    generated image (29x23 seeded pixels) with it: its embeddings are, to the bit, those of
    the converter's mmproj.gguf.  Gemma 3's BF16 repo at q8_0 (the daemon's Q8_0 tower, 1
    image token pooled from 4x4 patches) and its F16 one at auto (two shards, F16 kept, 4
    tokens: the scale factor key); Qwen2.5-VL (window attention, the Conv3D patch
    embedding) and Qwen3-VL (deepstack mergers) at auto, BF16, M-RoPE, their
    small-vocabulary twins (libllama loads a 151936-token vocabulary in a second); Gemma 4
    E2B's vision and audio towers at auto, the image in 1-16 tokens (as llama-mtmd-cli's
    --image-min-tokens/--image-max-tokens: the default 70 or more would index past the tiny
    tower's 16 positions) and a sound too (0.5 s of seeded 16 kHz samples: 13 tokens);
    SmolVLM2's F32 repo at auto (idefics3: 4x4 patches pixel-shuffled into 1 token).  Not
    under the sanitizers: llama.cpp's code, unsanitized, on files whose bytes the normal run
    compares.  (Not gemma4-vision-f16's tower: 12 heads of 4 over a width of 32, and
    clip.cpp, without a head_dim key, takes a head as width / heads: a reshape aborts; nor
    Mistral 3's: the converter leaves out v.token_embd.img_break, which clip.cpp requires, so
    that its own file does not load.)"""
    CASES = (("gemma3-vision-bf16", "q8_0", ()), ("gemma3-vision-f16", "auto", ()),
             ("qwen25vl-spm-bf16", "auto", ()), ("qwen3vl-spm-bf16", "auto", ()),
             ("gemma4-audio-bf16", "auto",
              ("--min-tokens", "1", "--max-tokens", "16", "--audio", "8000")),
             ("smolvlm2-vision-f32", "auto", ()))

    def setUp(self):
        if SANITIZED:
            self.skipTest("llama.cpp's library, not tensorfs: the normal run's")
        why = REPOS.why or mtmd_embed.missing_reason()
        if why:
            self.skipTest(why)
        mtmd_embed.build()   # (once, cached: before a mount waits on it)

    def test_embeddings_equal_the_converters_file(self):
        for name, t, args in self.CASES:
            ref = converted(self, name, t)
            with Mount(self, model(name), ["outtype=" + t]) as m:
                r = run(["/usr/bin/python3", mtmd_embed.__file__, m.p("model.gguf"),
                         m.p("mmproj.gguf"), ref, *args], timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            j = json.loads(r.stdout)
            got, want = j["results"]
            media = ["image", "audio"] if j["audio"] else ["image"]
            for x in (got, want):
                self.assertEqual(sorted(x), sorted(media + ["mmproj"]))
                for what in media:
                    e, where = x[what], (name, x["mmproj"], what)
                    self.assertEqual(e["status"], 0, "%s: %s" % (where, j["warnings"]))
                    n = e["n_tokens"] * e["n_embd"]
                    self.assertGreater(n, 0, where)
                    self.assertTrue(e["finite"], where)
                    self.assertGreater(e["nonzero"], n // 2, where)   # (not a zeroed buffer)
            for what in media:
                self.assertEqual(got[what], want[what], (name, what))


class Absent(TestCase):
    def test_unknown_projector_class_shows_the_text_model(self):
        """A class without a projector row (every multimodal class of the text view has one:
        LlamaForCausalLM, for which the converter has no MmprojModel either) and a
        vision_config: the mount shows its model.gguf and no mmproj.gguf, and says why in one
        line."""
        import make_model
        src, d = hfutil.Repos(WORK, make_model).model("llama-bf16"), self.tmpdir()
        for f in os.listdir(src):
            if f != "config.json":
                os.link(os.path.join(src, f), os.path.join(d, f))
        c = json.load(open(os.path.join(src, "config.json")))
        c["vision_config"] = {"hidden_size": 32, "num_hidden_layers": 1}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f)
        with Mount(self, d, allow_stderr=True) as m:
            said = m.mount_stderr.strip().splitlines()
            self.assertEqual(len(said), 1, m.mount_stderr)
            self.assertIn("%s: no mmproj.gguf: " % d, said[0])
            self.assertRegex(said[0], "LlamaForCausalLM has no projector .*"
                             "Gemma3ForConditionalGeneration.*Qwen3_5ForConditionalGeneration")
            names = os.listdir(m.path)
            self.assertIn("model.gguf", names)
            self.assertNotIn("mmproj.gguf", names)
            self.assertIn("LlamaForCausalLM", index(m)["mmproj"]["unavailable"])
        r = run([TENSORFS, "info", "--mmproj", d])
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        r = run([TENSORFS, "convert", d, os.path.join(self.tmpdir(), "x.gguf"), "-o", "mmproj"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no mmproj.gguf", r.stderr)

    def broken(self, how):
        """gemma3-vision-bf16 (hard links) with one thing wrong."""
        src, d = model("gemma3-vision-bf16"), os.path.join(self.tmpdir(), "gemma3-" + how)
        os.makedirs(d)
        for f in os.listdir(src):
            if how == "no preprocessor" and f.endswith("processor_config.json"):
                continue
            if how == "malformed preprocessor" and f == "preprocessor_config.json":
                with open(os.path.join(d, f), "w") as o:
                    o.write("{\"image_mean\": [0.5, ")
                continue
            if how == "unmapped tensor" and f == "config.json":
                c = json.load(open(os.path.join(src, f)))
                c["vision_config"]["num_hidden_layers"] = 1   # layer 1 has no GGUF name
                json.dump(c, open(os.path.join(d, f), "w"))
                continue
            os.link(os.path.join(src, f), os.path.join(d, f))
        return d

    BROKEN = {"no preprocessor": r"preprocessor_config.json: no \"image_mean\"",
              "malformed preprocessor": r"preprocessor_config.json: not JSON",
              "unmapped tensor": r"layers\.1\..*has no GGUF name"}

    def test_bad_input_one_line_text_model_stays(self):
        for how, pattern in self.BROKEN.items():
            d = self.broken(how)
            with Mount(self, d, allow_stderr=True) as m:
                said = m.mount_stderr.strip().splitlines()
                self.assertEqual(len(said), 1, m.mount_stderr)
                self.assertIn("%s: no mmproj.gguf: " % d, said[0])
                self.assertRegex(said[0], pattern, how)
                self.assertNotIn("mmproj.gguf", os.listdir(m.path))
                self.assertIn("model.gguf", os.listdir(m.path))
                self.assertRegex(index(m)["mmproj"]["unavailable"], pattern)
            r = run([TENSORFS, "info", d, "--no-tensors"])
            self.assertRegex(r.stdout, "projector +none: .*" + pattern)

    def test_gemma4_f16_audio_refused_as_the_converter(self):
        """Gemma 4 with its audio tower in F16: the converter fails (torch 1.13 has no
        softplus for Half, which per_dim_scale takes); the mount shows model.gguf and says so
        in one line."""
        d = model("gemma4-audio-f16")
        with Mount(self, d, allow_stderr=True) as m:
            said = m.mount_stderr.strip().splitlines()
            self.assertEqual(len(said), 1, m.mount_stderr)
            self.assertRegex(said[0], r"no mmproj\.gguf: .*per_dim_scale' is F16, whose "
                             r"softplus the converter cannot take")
            self.assertNotIn("mmproj.gguf", os.listdir(m.path))
            self.assertIn("model.gguf", os.listdir(m.path))

    def test_text_model_has_none_and_says_nothing(self):
        import make_model
        d = hfutil.Repos(WORK, make_model).model("llama-bf16")
        with Mount(self, d) as m:   # (Mount fails on any stderr)
            self.assertNotIn("mmproj.gguf", os.listdir(m.path))
            self.assertNotIn("mmproj", index(m))


class Memory(TestCase):
    def test_peak_rss_while_reading_a_large_projector(self):
        d = model("gemma3-vision-big-f32")
        for t in ("q8_0", "f32"):
            with Mount(self, d, ["outtype=" + t]) as m:
                n = 0
                with open(m.p("mmproj.gguf"), "rb") as f:
                    while True:
                        b = f.read(1 << 20)
                        if not b:
                            break
                        n += len(b)
                hwm = daemon_hwm(m)
                print("# %s: mmproj.gguf %.1f MiB read, daemon VmHWM %.1f MiB"
                      % (t, n / MiB, hwm / MiB), flush=True)
                self.assertGreater(n, 24 * MiB)
                if not SANITIZED:
                    self.assertLess(hwm, 32 * MiB)


if __name__ == "__main__":
    main(work=WORK)
