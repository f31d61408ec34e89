#!/usr/bin/env python3
"""Quantized Hugging Face repos through a mount (issue 38): tests/hf/make_quant.py's tiny FP8
repos (DeepSeek-V3's block-wise FP8 MoE, a Qwen3-FP8 dense) and NVFP4 MoEs (ModelOpt: Qwen3-MoE,
Gemma 4 with its router.per_expert_scale folded), their
model.gguf against
llama.cpp's converter (tests/hf/reference.py, float8 decoded by refconv/float8.py):

- model.gguf is cmp-equal to the converter's file, and random preads of it too (the
  dequantized weights are computed on read from the FP8 bytes and their block scales; reads
  that cross blocks, rows of blocks and tensors);
- -o fp8_as_q8 is the converter's --fp8-as-q8 (the FP8 weights as Q8_0), with an outtype
  and under -o quantize= (llama_model_quantize of the converter's file, tests/quant/llamaq.py);
- llama.cpp (tests/llama) decodes the same greedy tokens from the mount's model.gguf as from
  the converter's file;
- what the converter cannot read is refused in one line naming the method and the tensor.

Without the converter's packages, llama.cpp's library or npm's DeepSeek tokenizer, the tests
that need them SKIP.
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
import compare  # noqa: E402
import compare_quant  # noqa: E402
import hfutil  # noqa: E402
import llamacpp  # noqa: E402
import make_quant  # noqa: E402

WORK = os.environ.get("TFS_HF_QUANT_WORK") or os.path.join(tempfile.gettempdir(),
                                                            "tfs-hf-quant-mount")
REPOS = hfutil.Repos(WORK, make_quant)
model = REPOS.model


def read(path):
    with open(path, "rb") as f:
        return f.read()


def converted(tc, name, t):
    """The converter's file of the variant at outtype column t ("auto", "f16+q8")."""
    if REPOS.why:
        tc.skipTest(REPOS.why)
    out = os.path.join(WORK, "ref", "%s.%s.gguf" % (name, t))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    err = compare_quant.converted(model(name), t, out)
    if err and err.startswith("SKIP "):
        tc.skipTest(err[5:])
    if err:
        tc.fail("%s %s: %s" % (name, t, err))
    return out


def mount_options(t):
    base, _, q8 = t.partition("+")
    return ["outtype=" + base] + (["fp8_as_q8"] if q8 else [])


class Equal(TestCase):
    def test_model_gguf_equals_the_converter(self):
        """cmp-equal, whole: DeepSeek-V3 FP8 (auto, q8_0), Qwen3-FP8 (f16)."""
        for name, t in (("deepseek3-fp8", "auto"), ("deepseek3-fp8", "q8_0"),
                        ("qwen3-fp8", "f16")):
            ref = read(converted(self, name, t))
            with Mount(self, model(name), mount_options(t)) as m:
                ours = read(m.p("model.gguf"))
            self.assertTrue(ours == ref, "%s %s: %s" % (name, t,
                            compare.first_difference(ref, ours)))

    def test_packed_int_weights_equal_the_converter(self):
        """compressed-tensors pack-quantized, cmp-equal, whole: int4 symmetric (auto), int8
        with zero points (f16); GPTQ 4-bit with desc_act (auto), 8-bit (bf16): the new
        weights come after all the other tensors; bitnet (f16, in place)."""
        for name, t in (("qwen3-ct-w4a16", "auto"), ("qwen3-ct-w8-asym", "f16"),
                        ("qwen3-gptq-int4", "auto"), ("qwen3-gptq-int8", "bf16"),
                        ("qwen3-bitnet", "f16")):
            ref = read(converted(self, name, t))
            with Mount(self, model(name), mount_options(t)) as m:
                ours = read(m.p("model.gguf"))
            self.assertTrue(ours == ref, "%s %s: %s" % (name, t,
                            compare.first_difference(ref, ours)))
            names = [n for n, _, _, _ in compare.Gguf(ours).tensors]
            self.assertEqual(names[-1] == "blk.1.attn_v.weight", "bitnet" not in name, name)

    def test_reads_at_any_offset(self):
        """pread of random ranges equals the converter's bytes, half of them inside the
        dequantized tensors (across blocks, rows of blocks and tensor ends)."""
        rng = random.Random(38)
        for name, t in (("deepseek3-fp8", "f32"), ("qwen3-fp8", "bf16"),
                        ("qwen3-ct-w4a16", "f32"), ("qwen3-gptq-int4", "f32"),
                        ("qwen3-bitnet", "f32")):
            ref = read(converted(self, name, t))
            g = compare.Gguf(ref)
            deq = [(g.data_start + o, len(compare.tensor_bytes(g, i)))
                   for i, (n, _, _, o) in enumerate(g.tensors)
                   if n.endswith(("attn_kv_a_mqa.weight", "ffn_down_exps.weight",
                                  "attn_k_b.weight", "ffn_up.weight", "attn_k.weight"))]
            self.assertTrue(deq, name)
            with Mount(self, model(name), ["outtype=" + t]) as m:
                fd = os.open(m.p("model.gguf"), os.O_RDONLY)
                try:
                    for k in range(300):
                        if k % 2:
                            start, size = deq[rng.randrange(len(deq))]
                            off = start + rng.randrange(size)
                        else:
                            off = rng.randrange(len(ref))
                        n = rng.choice([1, 3, 4, 130, 4096, 33000, 70001])
                        self.assertEqual(os.pread(fd, n, off), ref[off:off + n],
                                         (name, t, off, n))
                finally:
                    os.close(fd)


class Fp8AsQ8(TestCase):
    def test_fp8_as_q8_is_the_converters(self):
        """-o fp8_as_q8: the FP8 weights Q8_0 (the others as the outtype says), the
        converter's --fp8-as-q8 file; without it they are not Q8_0."""
        for name, t in (("deepseek3-fp8", "auto+q8"), ("qwen3-fp8", "f16+q8"),
                        ("qwen3-modelopt-fp8", "auto+q8")):
            ref = read(converted(self, name, t))
            with Mount(self, model(name), mount_options(t)) as m:
                ours = read(m.p("model.gguf"))
            self.assertTrue(ours == ref, "%s %s: %s" % (name, t,
                            compare.first_difference(ref, ours)))
            types = {n: ty for n, _, ty, _ in compare.Gguf(ours).tensors}
            self.assertEqual(types["blk.0.attn_output.weight"], 8, name)   # Q8_0
            self.assertEqual(types["token_embd.weight"], 1 if t.startswith("f16") else 30)

    def test_fp8_as_q8_under_quantize(self):
        """-o fp8_as_q8,quantize=Q8_0 is llama_model_quantize's Q8_0 of the converter's
        --fp8-as-q8 file (its Q8_0 tensors copied); quantize=Q4_K_M is refused as
        llama-quantize refuses it (requantizing Q8_0 tensors)."""
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())
        name = "qwen3-fp8"
        src = converted(self, name, "auto+q8")
        ref = os.path.join(WORK, "ref", "%s.auto+q8.Q8_0.gguf" % name)
        llamaq = os.path.join(HERE, "..", "quant", "llamaq.py")
        if not os.path.exists(ref) or os.path.getmtime(ref) < os.path.getmtime(src):
            r = run(["/usr/bin/python3", llamaq, src, ref, "7", "--threads", "2"], timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        with Mount(self, model(name), ["fp8_as_q8", "quantize=Q8_0",
                                        "cache=" + self.tmpdir()]) as m:
            got = read(m.p("model.gguf"))
        want = read(ref)
        self.assertTrue(got == want, compare.first_difference(want, got))
        r = run(["/usr/bin/python3", llamaq, src, os.path.join(self.tmpdir(), "q4.gguf"), "15"],
                timeout=300)
        self.assertIn("requantizing from type q8_0 is disabled", r.stderr)
        r = run([TENSORFS, "info", "--gguf", "--fp8_as_q8", "--quantize=Q4_K_M", model(name)])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is already quantized (Q8_0): requantizing it to", r.stderr)


class Refused(TestCase):
    def variant(self, edit_config, base="qwen3-fp8"):
        src = model(base)
        d = os.path.join(self.tmpdir(), "repo")
        os.makedirs(d)
        for f in os.listdir(src):
            if f != "config.json":
                os.link(os.path.join(src, f), os.path.join(d, f))
        cfg = json.loads(read(os.path.join(src, "config.json")))
        edit_config(cfg)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        return d

    def refused(self, d, want):
        r = run([TENSORFS, "info", "--gguf", d])
        self.assertNotEqual(r.returncode, 0, r.stdout[-500:])
        self.assertIn(want, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        with Mount(self, d, allow_stderr=True) as m:
            self.assertNotIn("model.gguf", os.listdir(m.path))
            why = json.loads(read(m.p("index.json")))["gguf_view"]["unavailable"]
            self.assertIn(want, why)

    def test_an_unknown_method(self):
        d = self.variant(lambda c: c["quantization_config"].update(quant_method="awq"))
        self.refused(d, "quant method awq (tensor 'model.layers.0.mlp.down_proj.weight') is "
                        "not one the converter reads")

    def test_a_scale_that_does_not_cover_its_weight(self):
        d = self.variant(lambda c: c["quantization_config"].update(weight_block_size=[64, 64]))
        self.refused(d, "quant method fp8: tensor 'model.layers.0.mlp.down_proj.weight' "
                        "(2 axes) and its scale")

    def test_several_config_groups(self):
        """compressed-tensors with two config groups: the converter reads one."""
        def two(c):
            q = make_quant.compressed("float-quantized", "float")
            q["config_groups"]["group_1"] = q["config_groups"]["group_0"]
            c["quantization_config"] = q
        self.refused(self.variant(two), "quant method compressed-tensors (tensor "
                     "'model.layers.0.mlp.down_proj.weight'): several config groups")

    def test_packed_by_channel(self):
        """pack-quantized by channel: the converter asserts the group strategy."""
        def channel(c):
            q = make_quant.packed(4, True)
            q["config_groups"]["group_0"]["weights"]["strategy"] = "channel"
            c["quantization_config"] = q
        self.refused(self.variant(channel), "quant method compressed-tensors (tensor "
                     "'model.layers.0.mlp.down_proj.weight'): pack-quantized with a strategy "
                     "other than group")

    def test_nvfp4_mixed_with_another_group(self):
        """compressed-tensors mixed-precision whose groups are not all nvfp4-pack-quantized:
        not NVFP4 to the converter, whose one-group rule then refuses it."""
        def mixed(c):
            q = c["quantization_config"]
            q["format"] = "mixed-precision"
            q["config_groups"]["group_1"] = dict(q["config_groups"]["group_0"],
                                                 format="float-quantized")
        self.refused(self.variant(mixed, "llama-ct-nvfp4"), "quant method compressed-tensors "
                     "(tensor 'model.layers.0.mlp.down_proj.weight_packed'): several config "
                     "groups")

    def test_gemma4_nvfp4_experts_partly_scaled(self):
        """Gemma 4 with one expert more than its NVFP4 down_proj experts: the converter's
        fold of router.per_expert_scale asserts that all experts have a weight_scale_2."""
        d = self.variant(lambda c: c.update(num_experts=5), "gemma4moe-nvfp4")
        self.refused(d, "'model.layers.0.router.per_expert_scale': 4 of 5 experts' down_proj "
                        "have a weight_scale_2 (the converter's assert: partial NVFP4 "
                        "quantization across experts)")

    def test_3_bit_gptq(self):
        """GPTQ's 3 bits: the converter raises NotImplementedError."""
        d = self.variant(lambda c: c["quantization_config"].update(bits=3), "qwen3-gptq-int4")
        self.refused(d, "quant method gptq (tensor 'model.layers.0.mlp.down_proj.qweight'): "
                        "3-bit GPTQ is not implemented by the converter")

    def test_fp8_as_q8_needs_a_repo(self):
        """-o fp8_as_q8 on a file that is no repo: refused as outtype= is."""
        r = run([TENSORFS, "info", "--gguf", "--fp8_as_q8",
                 os.path.join(model("qwen3-fp8"), "model.safetensors")])
        self.assertNotEqual(r.returncode, 0)


class Llama(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())

    def generate(self, *args):
        r = run(["/usr/bin/python3", os.path.join(HERE, "..", "llama", "generate.py")] +
                list(args), timeout=120)
        if r.returncode:
            self.fail("generate.py failed (%d): %s" % (r.returncode, r.stderr.strip()))
        return json.loads(r.stdout)

    def test_same_tokens_as_from_the_converter(self):
        """DeepSeek-V3 FP8 (auto) and Qwen3-FP8 (-o fp8_as_q8): the converter's file and the
        mount's decode alike."""
        for name, t in (("deepseek3-fp8", "auto"), ("qwen3-fp8", "auto+q8")):
            want = self.generate(converted(self, name, t), "--n", "12")
            with Mount(self, model(name), mount_options(t)) as m:
                got = self.generate(m.p("model.gguf"), "--n", "12")
            self.assertEqual(got["tokens"], want["tokens"], name)
            self.assertEqual(got["prompt_tokens"], want["prompt_tokens"], name)
            self.assertEqual(len(got["tokens"]), 12)

    def test_nvfp4_same_tokens_as_from_the_converter(self):
        """ModelOpt NVFP4 MoE (auto): the mount's model.gguf (NVFP4 experts and projections
        repacked on read) is the converter's file, decodes alike, and random reads inside
        its NVFP4 tensors are the converter's bytes."""
        name = "qwen3moe-nvfp4"
        ref = converted(self, name, "auto")
        want = read(ref)
        g = compare.Gguf(want)
        spans = [(g.data_start + o, len(compare.tensor_bytes(g, i)))
                 for i, (_, _, ty, o) in enumerate(g.tensors) if ty == 40]   # NVFP4
        self.assertEqual(len(spans), 14)
        rng = random.Random(40)
        with Mount(self, model(name), mount_options("auto")) as m:
            same = hfutil.same_tokens(self, name, ref, m.p("model.gguf"),
                                      lambda p: self.generate(p, "--n", "12"))
            self.assertTrue(same, name)
            fd = os.open(m.p("model.gguf"), os.O_RDONLY)
            try:
                for _ in range(100):
                    start, size = spans[rng.randrange(len(spans))]
                    off = start + rng.randrange(size)
                    n = rng.choice([1, 35, 36, 37, 4096, 20000])
                    self.assertEqual(os.pread(fd, n, off), want[off:off + n], (off, n))
            finally:
                os.close(fd)

    def test_gemma4_moe_nvfp4_same_tokens_as_from_the_converter(self):
        """ModelOpt NVFP4 Gemma 4 MoE (auto): router.per_expert_scale folded into the down_proj
        experts' scales, the mount's file is the converter's and decodes alike."""
        name = "gemma4moe-nvfp4"
        ref = converted(self, name, "auto")
        with Mount(self, model(name), mount_options("auto")) as m:
            same = hfutil.same_tokens(self, name, ref, m.p("model.gguf"),
                                      lambda p: self.generate(p, "--n", "12"))
        self.assertTrue(same, name)


if __name__ == "__main__":
    main(work=WORK)
