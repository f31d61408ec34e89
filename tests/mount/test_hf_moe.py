#!/usr/bin/env python3
"""Mixtures of experts through a mount (issue 30): tests/hf/make_moe.py's tiny repos (Mixtral,
Qwen3-MoE, Qwen2-MoE with a shared expert, GPT-OSS with MXFP4 or dequantized experts, Qwen3.5-MoE with experts stacked in
the checkpoint, Llama 4's stacked experts transposed and split on read), their model.gguf against llama.cpp's converter (tests/hf/reference.py):

- model.gguf is cmp-equal to the converter's file (outtypes auto, f16, q8_0 for Mixtral; auto
  for the others), and random preads of it too (stacked expert tensors are spliced from the
  experts' bytes piece by piece; reads that cross experts and shards);
- `tensorfs info --gguf --json` lists each stacked tensor's pieces: every expert's shard and
  offset, which hold that expert's tensor in the shard (its safetensors header says so), and
  whose bytes are the stacked tensor's slice in the converter's file (BF16 kept);
- `-o quantize=Q4_K_M` (each MoE family) and `Q8_0` (Mixtral), and tensorfs convert (Mixtral),
  give llama_model_quantize's file of the converter's (tests/quant/llamaq.py), llama-quant's
  MoE rules included;
- llama.cpp (libllama of npm @node-llama-cpp/linux-x64, tests/llama) decodes the same tokens
  from the mount's model.gguf as from the converter's file.

Without the converter's packages, llama.cpp's library or npm's Qwen3 tokenizer, the tests that
need them SKIP.
"""
import json
import os
import random
import struct
import sys
import tempfile

from harness import SANITIZED, TENSORFS, Mount, TestCase, main, quick, run

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import compare  # noqa: E402
import compare_moe  # noqa: E402  (its +omit keeps compare_moe's keys: the same config.json)
import hfutil  # noqa: E402
import llamacpp  # noqa: E402
import make_moe  # noqa: E402

WORK = os.environ.get("TFS_HF_MOE_WORK") or os.path.join(tempfile.gettempdir(), "tfs-hf-moe-mount")
# A name V+omit is V with config.json's class-defaulted keys left out, as hf_moe
# (tests/hf/compare_moe.py --quick) compares it at the outtype here (its QUICK_AT): the
# converter's file, of a real tokenizer's vocabulary (2-10 s of CPU a run), is then made once
# for both tests (reference.py's cache keyed by content), the view's bytes at that outtype
# being the same code whatever the config's defaulted keys.  (Not every one decodes: the
# classes' defaults of Qwen3-MoE and DeepSeek-V3 say 8 experts used of the 4 there, which
# llama.cpp refuses; the tokens cases take V+omit of GPT-OSS and Llama 4 only.)
EQUAL = [("mixtral-bf16", "auto"), ("mixtral-bf16", "f16"), ("mixtral-bf16", "q8_0"),
         ("qwen3moe-bf16", "auto"), ("qwen2moe-f16", "auto")]
TOKENS = [("mixtral-bf16", "auto"), ("mixtral-f16", "q8_0"), ("qwen3moe-bf16", "q8_0"),
          ("qwen2moe-f16", "auto"), ("qwen35moe-bf16", "auto"), ("qwen35moe-f16", "q8_0")]
# DeepSeek (MLA: attn_k_b / attn_v_b computed from kv_b_proj on read)
EQUAL += [("deepseek3-bf16", "auto"), ("deepseek3-bf16", "q8_0"),
          ("deepseek2-lite-f16+omit", "f32")]
TOKENS += [("deepseek3-bf16", "auto"), ("deepseek3-bf16", "q8_0"), ("deepseek2-lite-f16", "auto")]
# GLM-4.5 (its MTP layer kept: nextn.* tensors)
EQUAL += [("glm4moe-bf16", "auto")]
TOKENS += [("glm4moe-bf16", "auto")]
# GPT-OSS (MXFP4 experts repacked on read; dequantized ones transposed on read)
EQUAL += [("gptoss-mxfp4", "auto"), ("gptoss-mxfp4+omit", "q8_0"), ("gptoss-bf16", "f16")]
TOKENS += [("gptoss-mxfp4", "auto"), ("gptoss-bf16+omit", "q8_0")]
# GLM-4.7-Flash (DeepSeek V2's MLA and experts, its MTP layer kept)
EQUAL += [("glm4moelite-bf16", "auto")]
TOKENS += [("glm4moelite-bf16", "auto")]
# MiniMax-M2 (per-expert w1/w2/w3 stacked, the routing bias as exp_probs_b.bias)
EQUAL += [("minimax-m2-bf16", "auto")]
TOKENS += [("minimax-m2-bf16", "auto")]
# Llama 4 (interleaved dense and MoE layers; its stacked gate_up_proj / down_proj
# transposed and split on read)
EQUAL += [("llama4-bf16", "auto"), ("llama4-text-f16+omit", "q8_0")]
# (not llama4-text-f16: all full attention, llama.cpp's llama4 asserts f_attn_temp_scale != 0)
TOKENS += [("llama4-bf16", "auto"), ("llama4-bf16+omit", "q8_0")]
# Qwen3-Next (in_proj_qkvz split into attn_qkv and attn_gate by a gather of row segments on
# read, its MTP layer counted from the tensors); the tokens case reads all of model.gguf
# through the mount and compares its bytes with the converter's
TOKENS += [("qwen3next-bf16", "auto")]


def base(name):
    """The variant whose repo name is (V of V+omit)."""
    return name[:-len(compare.OMIT)] if name.endswith(compare.OMIT) else name


for _name, _t in EQUAL + TOKENS:
    if base(_name) != _name:   # (each one compare_moe.py --quick converts too)
        assert compare_moe.QUICK_AT[_name] == _t, (_name, _t)

if SANITIZED:
    # Under the sanitizers (harness.SANITIZED): each variant's read path once (its first
    # outtype of EQUAL), and llama.cpp's mmap reads through the daemon for two families
    # (dense-and-MoE interleaved, MXFP4 repacked); the bytes of every pair are the normal
    # run's to compare.  (All of them were mount_hf_moe's 158 s there.)
    TOKENS = [("llama4-bf16", "auto"), ("gptoss-mxfp4", "auto")]
    # (TOKENS' pairs read whole through the daemon there, llama.cpp's mmap or read())
    EQUAL = [p for i, p in enumerate(EQUAL) if p not in TOKENS and
             base(p[0]) not in [base(q[0]) for q in EQUAL[:i]]]


def read(path):
    with open(path, "rb") as f:
        return f.read()


REPOS = hfutil.Repos(WORK, make_moe)
model = REPOS.model            # the repo of a variant (made once)
converted = REPOS.converted    # (tc, variant, outtype): the converter's file of it


def safetensors_offsets(path):
    """name -> absolute (offset, nbytes) of each tensor of a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
    return {k: (8 + n + v["data_offsets"][0], v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in h.items() if k != "__metadata__"}


class Equal(TestCase):
    def test_model_gguf_equals_the_converter(self):
        """Each (variant, outtype) of EQUAL: cmp-equal, whole."""
        for name, t in EQUAL:
            ref = read(converted(self, name, t))
            with Mount(self, model(name), ["outtype=" + t]) as m:
                ours = read(m.p("model.gguf"))
                self.assertTrue(ours == ref, "%s %s: %s" % (name, t,
                                compare.first_difference(ref, ours)))

    def test_reads_at_any_offset(self):
        """pread of random ranges equals the converter's bytes (across experts and shards)."""
        rng = random.Random(30)
        for name in ("mixtral-bf16", "qwen3moe-bf16", "gptoss-mxfp4", "gptoss-bf16",
                     "qwen35moe-bf16", "llama4-bf16"):
            ref = read(converted(self, name, "auto"))
            g = compare.Gguf(ref)
            exps = [(g.data_start + o, d) for n, d, _, o in g.tensors if "_exps" in n]
            with Mount(self, model(name)) as m:
                fd = os.open(m.p("model.gguf"), os.O_RDONLY)
                try:
                    for k in range(400):
                        if k % 2:   # inside the stacked tensors
                            start, _ = exps[rng.randrange(len(exps))]
                            off = start + rng.randrange(64 << 10)
                        else:
                            off = rng.randrange(len(ref))
                        n = rng.choice([1, 7, 4096, 5000, 16385, 65536, 200003])
                        self.assertEqual(os.pread(fd, n, off), ref[off:off + n],
                                         (name, off, n))
                finally:
                    os.close(fd)

    @quick
    def test_mla_slices_at_any_offset(self):
        """DeepSeek: pread of random ranges of attn_k_b (each head's rows of kv_b_proj,
        transposed) and attn_v_b equals the converter's bytes, at outtypes that keep, widen
        and quantize them."""
        rng = random.Random(31)
        for name, t in (("deepseek3-bf16", "auto"), ("deepseek3-bf16", "f32"),
                        ("deepseek3-bf16", "q8_0"), ("deepseek2-lite-f16", "auto")):
            ref = read(converted(self, name, t))
            g = compare.Gguf(ref)
            sl = [(g.data_start + o, compare.tensor_bytes(g, i)) for i, (n, _, _, o)
                  in enumerate(g.tensors) if n.endswith(("attn_k_b.weight", "attn_v_b.weight"))]
            self.assertTrue(sl, name)
            with Mount(self, model(name), ["outtype=" + t]) as m:
                fd = os.open(m.p("model.gguf"), os.O_RDONLY)
                try:
                    for k in range(150):
                        start, data = sl[rng.randrange(len(sl))]
                        off = start + rng.randrange(len(data))
                        n = rng.choice([1, 2, 3, 34, 100, 1000, len(data)])
                        self.assertEqual(os.pread(fd, n, off), ref[off:off + n],
                                         (name, t, off, n))
                finally:
                    os.close(fd)

    def test_deepseek_tied_lm_head_is_left_out(self):
        """DeepSeek with tie_word_embeddings and an lm_head.weight all the same: the converter
        skips lm_head (token_embd serves); the mount's model.gguf is its file."""
        if REPOS.why:
            self.skipTest(REPOS.why)
        src = model("deepseek3-bf16")
        d = os.path.join(WORK, "models", "deepseek3-bf16-tied")
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(src):
            if f != "config.json" and not os.path.exists(os.path.join(d, f)):
                os.link(os.path.join(src, f), os.path.join(d, f))
        cfg = json.loads(read(os.path.join(src, "config.json")))
        cfg["tie_word_embeddings"] = True
        text = json.dumps(cfg, indent=2)
        if not os.path.exists(os.path.join(d, "config.json")) or \
                read(os.path.join(d, "config.json")).decode() != text:
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write(text)
        out = os.path.join(WORK, "ref", "deepseek3-bf16-tied.auto.gguf")
        os.makedirs(os.path.dirname(out), exist_ok=True)   # (first in a fresh build: no ref/ yet)
        err = compare.run_converter(d, "auto", out)
        if err and err.startswith("SKIP "):
            self.skipTest(err[5:])
        self.assertIsNone(err)
        ref = read(out)
        self.assertNotIn("output.weight", [t[0] for t in compare.Gguf(ref).tensors])
        with Mount(self, d) as m:
            ours = read(m.p("model.gguf"))
        self.assertTrue(ours == ref, compare.first_difference(ref, ours))

    def test_info_lists_each_experts_shard_and_offset(self):
        """--json: every stacked tensor's pieces are its experts' tensors in their shards, in
        expert order; their bytes are the converter's stacked tensor (BF16 kept as is)."""
        name = "mixtral-bf16"
        ref = read(converted(self, name, "auto"))
        g = compare.Gguf(ref)
        d = model(name)
        r = run([TENSORFS, "info", "--gguf", "--json", d])
        self.assertEqual(r.returncode, 0, r.stderr)
        tensors = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
        where = {}
        for f in os.listdir(d):
            if f.endswith(".safetensors"):
                for k, v in safetensors_offsets(os.path.join(d, f)).items():
                    where[k] = (f, v[0], v[1])
        proj = {"ffn_gate_exps": "w1", "ffn_down_exps": "w2", "ffn_up_exps": "w3"}
        seen = 0
        for i, (tname, dims, _, _) in enumerate(g.tensors):
            if "_exps" not in tname:
                self.assertNotIn("pieces", tensors[tname], tname)
                continue
            seen += 1
            bid, kind = tname.split(".")[1], tname.split(".")[2]
            pieces = tensors[tname]["pieces"]
            self.assertEqual(len(pieces), dims[2], tname)
            data = compare.tensor_bytes(g, i)
            at = 0
            for e, p in enumerate(pieces):
                hf = "model.layers.%s.block_sparse_moe.experts.%d.%s.weight" % (bid, e, proj[kind])
                self.assertEqual((p["source"], p["offset"], p["nbytes"]), where[hf], hf)
                with open(os.path.join(d, p["source"]), "rb") as f:
                    f.seek(p["offset"])
                    self.assertEqual(f.read(p["nbytes"]), data[at:at + p["nbytes"]], hf)
                at += p["nbytes"]
        self.assertEqual(seen, 6)
        r = run([TENSORFS, "info", "--gguf", d])
        self.assertIn("6 stacked tensors", r.stdout)
        self.assertIn("blk.1.ffn_up_exps.weight", r.stdout)
        self.assertIn("0-3 in model-0000", r.stdout)


# ==== bad experts: refused naming the file and the tensor ====

def load_safetensors(path):
    """[(name, dtype, shape, bytes)] of a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
        data = f.read()
    return [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"]


class BadExperts(TestCase):
    def broken(self, change):
        """A copy of mixtral-f16 (one shard) with its tensors changed by change(list)."""
        src = model("mixtral-f16")
        d = os.path.join(self.tmpdir(), "broken")
        os.makedirs(d)
        for f in os.listdir(src):
            if f != "model.safetensors":
                os.link(os.path.join(src, f), os.path.join(d, f))
        items = load_safetensors(os.path.join(src, "model.safetensors"))
        make_moe.make_model.write_safetensors(os.path.join(d, "model.safetensors"),
                                              change(items))
        return d

    def refused(self, d, *want):
        r = run([TENSORFS, "info", "--gguf", d])
        self.assertNotEqual(r.returncode, 0, r.stdout[-500:])
        for w in want:
            self.assertIn(w, r.stderr)
        with Mount(self, d, allow_stderr=True) as m:
            self.assertNotIn("model.gguf", os.listdir(m.path))
            why = json.loads(read(m.p("index.json")))["gguf_view"]["unavailable"]
            self.assertIn(want[-1], why)

    @quick
    def test_an_expert_missing(self):
        gone = "model.layers.1.block_sparse_moe.experts.5.w2.weight"
        d = self.broken(lambda items: [t for t in items if t[0] != gone])
        self.refused(d, "layer 1 has 23 of its 24 expert tensors", "Unprocessed experts")

    def test_an_expert_of_another_shape(self):
        bad = "model.layers.0.block_sparse_moe.experts.2.w3.weight"

        def change(items):
            return [(n, dt, [shp[0], shp[1] - 1], b[:len(b) - 2 * shp[0]]) if n == bad
                    else (n, dt, shp, b) for n, dt, shp, b in items]
        d = self.broken(change)
        self.refused(d, "model.safetensors", "expert tensor '%s' has shape [96, 63]" % bad)

    def test_an_expert_past_the_count(self):
        extra = "model.layers.0.block_sparse_moe.experts.8.w1.weight"

        def change(items):
            w1 = next(t for t in items if t[0].endswith("experts.0.w1.weight"))
            return items + [(extra, w1[1], w1[2], w1[3])]
        d = self.broken(change)
        self.refused(d, "tensor '%s' is no expert tensor the converter stacks" % extra)

    def gptoss_broken(self, change):
        """A copy of gptoss-mxfp4 whose second shard (layer 1's tensors) is changed by
        change(list); the index follows."""
        src = model("gptoss-mxfp4")
        d = os.path.join(self.tmpdir(), "broken")
        os.makedirs(d)
        last = "model-00002-of-00002.safetensors"
        for f in os.listdir(src):
            if f not in (last, "model.safetensors.index.json"):
                os.link(os.path.join(src, f), os.path.join(d, f))
        items = change(load_safetensors(os.path.join(src, last)))
        make_moe.make_model.write_safetensors(os.path.join(d, last), items)
        with open(os.path.join(src, "model.safetensors.index.json")) as f:
            index = json.load(f)
        index["weight_map"] = {k: v for k, v in index["weight_map"].items() if v != last}
        index["weight_map"].update({t[0]: last for t in items})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f)
        return d

    def test_gptoss_scales_without_their_blocks(self):
        gone = "model.layers.1.mlp.experts.down_proj_blocks"
        d = self.gptoss_broken(lambda items: [t for t in items if t[0] != gone])
        self.refused(d, "model.layers.1.mlp.experts.down_proj_scales' is not read right "
                     "after '%s'" % gone)

    def test_gptoss_mxfp4_of_another_shape(self):
        bad = "model.layers.1.mlp.experts.gate_up_proj_scales"

        def change(items):
            return [(n, dt, [shp[0] - 1] + shp[1:], b[:len(b) * (shp[0] - 1) // shp[0]])
                    if n == bad else (n, dt, shp, b) for n, dt, shp, b in items]
        d = self.gptoss_broken(change)
        self.refused(d, "tensor '%s' has shape [3, 128, 2], but" % bad)


class BadDeepseek(TestCase):
    refused = BadExperts.refused

    def broken(self, change):
        """A copy of deepseek2-lite-f16 (one shard) with its tensors changed by change(list)."""
        src = model("deepseek2-lite-f16")
        d = os.path.join(self.tmpdir(), "broken")
        os.makedirs(d)
        for f in os.listdir(src):
            if f != "model.safetensors":
                os.link(os.path.join(src, f), os.path.join(d, f))
        items = load_safetensors(os.path.join(src, "model.safetensors"))
        make_moe.make_model.write_safetensors(os.path.join(d, "model.safetensors"),
                                              change(items))
        return d

    def test_kv_b_proj_of_another_shape(self):
        """kv_b_proj must be heads x (qk_nope_head_dim + v_head_dim) rows of kv_lora_rank
        (the converter asserts the rows), else refused naming it."""
        bad = "model.layers.1.self_attn.kv_b_proj.weight"

        def change(items):
            return [(n, dt, [shp[0] - 2, shp[1]], b[:len(b) - 4 * shp[1]]) if n == bad
                    else (n, dt, shp, b) for n, dt, shp, b in items]
        d = self.broken(change)
        self.refused(d, "model.safetensors", "tensor '%s' has shape [126, 48]" % bad)

    def test_an_mtp_layers_tensor_is_left_out_but_a_layers_is_not_unknown(self):
        """A tensor of a layer past num_hidden_layers (multi-token prediction) is skipped as
        the converter skips it; one the converter cannot map is refused naming it."""
        odd = "model.layers.0.self_attn.rotary_proj.weight"

        def change(items):
            w = next(t for t in items if t[0].endswith("kv_a_layernorm.weight"))
            return items + [("model.layers.30.self_attn.odd.weight", w[1], w[2], w[3]),
                            (odd, w[1], w[2], w[3])]
        d = self.broken(change)
        self.refused(d, "tensor '%s' has no GGUF name" % odd)
        d = self.broken(lambda items: items + [("model.layers.30.eh_proj.weight", items[0][1],
                                                items[0][2], items[0][3])])
        r = run([TENSORFS, "info", "--gguf", d])
        self.assertEqual(r.returncode, 0, r.stderr)


class BadGlm(TestCase):
    refused = BadExperts.refused

    def test_a_special_token_missing(self):
        """GLM's converter looks [gMASK] up among the added tokens: without it, refused
        naming tokenizer.json and the token."""
        src = model("glm4moe-bf16")
        d = os.path.join(self.tmpdir(), "broken")
        os.makedirs(d)
        for f in os.listdir(src):
            if f != "tokenizer.json":
                os.link(os.path.join(src, f), os.path.join(d, f))
        tj = json.loads(read(os.path.join(src, "tokenizer.json")))
        tj["added_tokens"] = [t for t in tj["added_tokens"] if t["content"] != "[gMASK]"]
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(tj, ensure_ascii=False))
        self.refused(d, "tokenizer.json: no added token \"[gMASK]\"")


# ==== the quantized view: llama_model_quantize of the converter's file ====

QUANT = {"Q4_K_M": 15, "Q8_0": 7}
# Q4_K_M for each family (llama-quant's MoE rules pick a K type per tensor; Q5_K_M, which the
# test also ran, takes the same rules and code with other K types), Q8_0 (one type for every
# tensor: the same path for each family) and tensorfs convert (the view's bytes written by
# another command) for Mixtral
QUANT_CASES = [("mixtral-q-bf16", "Q4_K_M"), ("mixtral-q-bf16", "Q8_0"),
               ("qwen3moe-q-bf16", "Q4_K_M"), ("deepseek3-q-bf16", "Q4_K_M")]
if SANITIZED:   # (the K-type rules' path and the one-type path, once each)
    QUANT_CASES = [("mixtral-q-bf16", "Q4_K_M"), ("mixtral-q-bf16", "Q8_0")]
# GPT-OSS (its experts MXFP4 in the converter's file): MXFP4_MOE besides
QUANT_GPTOSS = {"MXFP4_MOE": 38, "Q8_0": 7, "Q4_K_M": 15}
GPTOSS_CASES = [("gptoss-mxfp4", "MXFP4_MOE"), ("gptoss-mxfp4", "Q8_0"),
                ("gptoss-bf16", "MXFP4_MOE"), ("gptoss-bf16", "Q4_K_M")]
if SANITIZED:   # (gptoss-bf16's Q4_K_M: its transposed experts are read as for MXFP4_MOE,
    # and rows of 64 fall back to legacy types as mount_quantize's l1-e64 does there)
    GPTOSS_CASES = GPTOSS_CASES[:3]
LLAMAQ = os.path.join(HERE, "..", "quant", "llamaq.py")


class Quantized(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())

    def test_quantize_is_llama_model_quantize(self):
        """-o quantize=T of a MoE repo (rows of whole K blocks, so that llama-quant's MoE
        rules pick K types for ffn_*_exps and the attention) is llama_model_quantize's file of
        the converter's; tensorfs convert gives the same bytes."""
        for name, t in QUANT_CASES:
            src = converted(self, name, "auto")
            ref = os.path.join(WORK, "ref", "%s.%s.gguf" % (name, t))
            # (llamaq.py keeps its files in a cache keyed by the source's bytes)
            r = run(["/usr/bin/python3", LLAMAQ, src, ref, str(QUANT[t]), "--threads", "2"],
                    timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            want = read(ref)
            with Mount(self, model(name), ["quantize=" + t, "cache=" + self.tmpdir()]) as m:
                got = read(m.p("model.gguf"))
            self.assertTrue(got == want, "%s %s: %s" % (name, t,
                            compare.first_difference(want, got)))
            if t == "Q4_K_M":
                moe = "blk.1." if name.startswith("deepseek") else "blk.0."   # 0: dense
                types = {n.split(".")[2]: ty for n, _, ty, _ in compare.Gguf(got).tensors
                         if n.startswith(moe)}
                self.assertIn(types["ffn_gate_exps"], (12, 13, 14), name)   # Q4_K..Q6_K
            if name.startswith("mixtral") and t == "Q4_K_M":
                out = os.path.join(self.tmpdir(), "out.gguf")
                r = run([TENSORFS, "convert", model(name), out, "-o", "quantize=" + t],
                        timeout=300)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(read(out) == want, "%s convert %s" % (name, t))

    def test_quantize_gptoss_is_llama_model_quantize(self):
        """GPT-OSS: -o quantize=T of the MXFP4 repo (experts MXFP4 in the converter's file:
        MXFP4_MOE keeps them) and of the dequantized one (its BF16 experts quantized to MXFP4
        or K types, with the fallbacks of rows of 64) is llama_model_quantize's file of the
        converter's.  Q8_0 (or any type but MXFP4_MOE) of the MXFP4 one would requantize the
        MXFP4 experts: llama_model_quantize refuses that by default, and so does tensorfs,
        saying why (one refusal: every such type takes the same test)."""
        for name, t in GPTOSS_CASES:
            src = converted(self, name, "auto")
            ftype = QUANT_GPTOSS[t]
            ref = os.path.join(WORK, "ref", "%s.%s.gguf" % (name, t))
            if name == "gptoss-mxfp4" and t != "MXFP4_MOE":
                r = run(["/usr/bin/python3", LLAMAQ, src, ref, str(ftype)], timeout=300)
                self.assertNotEqual(r.returncode, 0, t)
                self.assertIn("requantizing from type mxfp4 is disabled", r.stderr)
                out = os.path.join(self.tmpdir(), "out.gguf")
                r = run([TENSORFS, "convert", model(name), out, "-o", "quantize=" + t],
                        timeout=300)
                self.assertNotEqual(r.returncode, 0, t)
                self.assertIn("_exps.weight' is already quantized (MXFP4): requantizing it "
                              "to", r.stderr)
                continue
            r = run(["/usr/bin/python3", LLAMAQ, src, ref, str(ftype), "--threads", "2"],
                    timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            want = read(ref)
            with Mount(self, model(name), ["quantize=" + t, "cache=" + self.tmpdir()]) as m:
                got = read(m.p("model.gguf"))
            self.assertTrue(got == want, "%s %s: %s" % (name, t,
                            compare.first_difference(want, got)))
            types = {n.split(".", 2)[2]: ty for n, _, ty, _ in compare.Gguf(got).tensors
                     if n.startswith("blk.0.")}
            if t == "MXFP4_MOE":
                self.assertEqual(types["ffn_gate_exps.weight"], 39, name)   # MXFP4
                self.assertEqual(types["attn_q.weight"], 8, name)           # Q8_0


class Llama(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())


def helper(tc, *args):
    r = run(["/usr/bin/python3", os.path.join(HERE, "..", "llama", "generate.py")] + list(args),
            timeout=120)
    if r.returncode:
        tc.fail("generate.py failed (%d): %s" % (r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def _same_tokens(name, t):
    def test(self):
        ref = converted(self, name, t)
        with Mount(self, model(name), ["outtype=" + t]) as m:
            hfutil.same_tokens(self, name, ref, m.p("model.gguf"),
                               lambda p: helper(self, p, "--n", "12"))
    test.__doc__ = "%s -o outtype=%s: the converter's file and the mount's decode alike" % (
        name, t)
    return test


for _name, _t in TOKENS:
    setattr(Llama, "test_same_tokens_as_from_the_converter_%s_%s" % (
        _name.replace("-", "_").replace("+", "_"), _t), _same_tokens(_name, _t))


if __name__ == "__main__":
    main(work=WORK)
