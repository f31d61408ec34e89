#!/usr/bin/python3
"""Tiny quantized Hugging Face repos (issue 38), made from seeds: a make_model.py / make_moe.py
repo whose linear weights are then stored as the published quantized repos store theirs,
with their quantization_config.

    make_quant.py OUTDIR [VARIANT...]

- deepseek3-fp8: DeepSeek-V3's FP8 (deepseek-ai/DeepSeek-V3): every linear weight but the
  router, the embeddings and lm_head as F8_E4M3 with an F32 `weight_scale_inv` per
  128 x 128 block (quant_method fp8, weight_block_size [128, 128]); hidden 128, and sizes
  that are no whole block (kv_a_proj_with_mqa's 160 rows, the experts' 96 columns, q_b's
  192 rows), so a scale's last block covers fewer rows or columns.
- qwen3-fp8: a Qwen3-FP8 dense (Qwen/Qwen3-*-FP8): F8_E4M3, BF16 `weight_scale_inv` per
  128 x 128 block; intermediate 320 (2.5 blocks), k/v projections of 64 rows (less than one).
- qwen3-fp8-e5m2: the same with F8_E5M2 weights and F32 scales ("fmt": "e5m2").
- qwen3-ct-fp8, qwen3-ct-int8: compressed-tensors float-quantized (F8_E4M3, BF16 scales)
  and int-quantized (I8, F32 scales), per channel (`weight_scale` [rows, 1]), as RedHatAI's
  FP8-dynamic and W8A8 releases.
- qwen3-ct-w4a16, qwen3-ct-w8-asym: compressed-tensors pack-quantized in groups of 128
  (hidden 256, intermediate 384): int4 symmetric with BF16 scales, as RedHatAI's
  Qwen3-*-quantized.w4a16 (weight_packed, weight_scale, weight_shape); int8 asymmetric with
  F16 scales and weight_zero_point (packed along the rows).
- qwen3-gptq-int4, -int8, -int2: quant_method gptq in groups of 128 (qweight, qzeros,
  scales, g_idx): 4-bit symmetric with desc_act (g_idx: the groups of a permutation of the
  input columns), 8-bit asymmetric and 2-bit symmetric in order.
- qwen3-modelopt-fp8: quant_method modelopt, quant_algo FP8 (NVIDIA's ModelOpt FP8
  releases): F8_E4M3 weights with one F32 weight_scale each, input_scale, k/v scales.
- qwen3moe-nvfp4: quant_method modelopt, quant_algo NVFP4, a Qwen3-MoE (NVIDIA's
  Qwen3-30B-A3B-NVFP4): U8 weights of two E2M1 values a byte, an F8_E4M3 weight_scale per
  16 values, F32 weight_scale_2 and input_scale (not 1: the converter writes them). The
  converter repacks them to ggml's NVFP4 (its file checked: type 40, ~10% of max|w| from
  the unquantized weights).
- llama-modelopt-nvfp4: ModelOpt NVFP4 as its earlier exports (nvidia/Llama-3.3-70B-
  Instruct-FP4) store it in a Llama: no quantization_config in config.json, the method in
  hf_quant_config.json (its producer's name, quant_algo NVFP4), which the converter reads.
- llama-ct-nvfp4: compressed-tensors nvfp4-pack-quantized (RedHatAI's *-NVFP4 releases) in
  a Llama class (LlamaModel permutes the q/k rows of NVFP4 weights and their block
  scales): weight_packed (U8), an F8_E4M3 weight_scale per 16 values, F32
  weight_global_scale and input_global_scale ([1], the reciprocals of ModelOpt's scales).
- qwen35-nvfp4: ModelOpt NVFP4 in a Qwen3.5 dense (Qwen3_5ForCausalLM, 2 key / 4 value
  heads of 16) with its linear-attention projections NVFP4 too (in_proj_qkv, in_proj_z,
  in_proj_a, in_proj_b, out_proj): the converter's _transform_nvfp4_weight reorders their
  value heads (rows, with their block scales; out_proj's columns in blocks of 16).
- gemma4-nvfp4: ModelOpt NVFP4 in a dense Gemma 4 (gemma4-bf16's shape): the converter's
  Gemma4Model._generate_nvfp4_tensors has no expert to fold router.per_expert_scale into,
  the generic path's tensors.
- gemma4moe-nvfp4: ModelOpt NVFP4 in a Gemma 4 MoE (gemma4-moe-bf16's shape, experts of 64
  values: one NVFP4 super-block): the checkpoint's stacked experts stored one by one
  (experts.E.gate_proj / up_proj / down_proj, the fused gate_up split in halves), each
  NVFP4; Gemma4Model._generate_nvfp4_tensors folds router.per_expert_scale into the
  down_proj experts' weight_scale_2 (ffn_down_exps.scale: s * r[e], float32) and drops it.
- qwen3-bitnet: quant_method bitnet (BitNet b1.58's packing: U8 weights, four ternary
  values a byte along the rows, one BF16 weight_scale) in a Qwen3 class (the view has no
  BitnetForCausalLM row).

Each weight is quantized as FP8 checkpoints are made: per block, scale = max|w| / the
format's largest value, the code nearest to w / scale (the scale rounded to its dtype first).
"""
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_model  # noqa: E402
import make_moe  # noqa: E402

FP8 = {"fp8": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
               "weight_block_size": [128, 128]}}



def compressed(fmt, typ):
    """compressed-tensors' quantization_config of RedHatAI's FP8-dynamic / W8A8 releases:
    one config group, weights per channel, activations per token (dynamic)."""
    act = {"actorder": None, "block_structure": None, "dynamic": True, "group_size": None,
           "num_bits": 8, "observer": None, "observer_kwargs": {}, "strategy": "token",
           "symmetric": True, "type": typ}
    w = dict(act, dynamic=False, observer="minmax", strategy="channel")
    return {"config_groups": {"group_0": {"input_activations": act,
                                          "output_activations": None,
                                          "targets": ["Linear"], "weights": w}},
            "format": fmt, "global_compression_ratio": None, "ignore": ["lm_head"],
            "kv_cache_scheme": None, "quant_method": "compressed-tensors",
            "quantization_status": "compressed"}


def packed(bits, symmetric, actorder=None):
    """compressed-tensors pack-quantized (RedHatAI's Qwen3-*-quantized.w4a16): one config
    group, int weights in groups of 128 along the columns, no activation quantization."""
    w = {"actorder": actorder, "block_structure": None, "dynamic": False, "group_size": 128,
         "num_bits": bits, "observer": "minmax", "observer_kwargs": {}, "strategy": "group",
         "symmetric": symmetric, "type": "int"}
    return {"config_groups": {"group_0": {"input_activations": None,
                                          "output_activations": None,
                                          "targets": ["Linear"], "weights": w}},
            "format": "pack-quantized", "global_compression_ratio": None,
            "ignore": ["lm_head"], "kv_cache_scheme": None,
            "quant_method": "compressed-tensors", "quantization_status": "compressed"}


def gptq(bits, desc_act, sym):
    """quant_method gptq as AutoGPTQ / GPTQModel write it (Qwen/Qwen2.5-*-GPTQ-Int4,
    TheBloke's desc_act releases): groups of 128, v1 checkpoints (zeros stored minus 1)."""
    return {"bits": bits, "checkpoint_format": "gptq", "damp_percent": 0.01,
            "desc_act": desc_act, "group_size": 128, "is_marlin_format": False,
            "model_file_base_name": "model", "model_name_or_path": None,
            "quant_method": "gptq", "static_groups": False, "sym": sym,
            "true_sequential": True}


def nvfp4_modelopt(version):
    """ModelOpt's NVFP4 quantization_config (nvidia's *-NVFP4 exports): FP4 weights and
    activations in groups of 16, lm_head left out; version: the producer's."""
    fp4 = {"dynamic": False, "group_size": 16, "num_bits": 4, "type": "float"}
    return {"config_groups": {"group_0": {"input_activations": dict(fp4), "targets": ["Linear"],
                                          "weights": dict(fp4)}},
            "ignore": ["lm_head"], "producer": {"name": "modelopt", "version": version},
            "quant_algo": "NVFP4", "quant_method": "modelopt"}


def nvfp4_ct():
    """compressed-tensors nvfp4-pack-quantized (RedHatAI's *-NVFP4 releases): one config group,
    FP4 weights and activations in groups of 16 (tensor_group), a global scale each."""
    w = {"actorder": None, "block_structure": None, "dynamic": False, "group_size": 16,
         "num_bits": 4, "observer": "minmax", "observer_kwargs": {},
         "strategy": "tensor_group", "symmetric": True, "type": "float"}
    return {"config_groups": {"group_0": {
        "format": "nvfp4-pack-quantized", "input_activations": dict(w, dynamic="local"),
        "output_activations": None, "targets": ["Linear"], "weights": w}},
        "format": "nvfp4-pack-quantized", "global_compression_ratio": None,
        "ignore": ["lm_head"], "kv_cache_scheme": None, "quant_method": "compressed-tensors",
        "quantization_status": "compressed", "sparsity_config": {}, "transform_config": {},
        "version": "0.10.3.a20250731"}


QWEN3 = dict(arch="Qwen3ForCausalLM", dtype="BF16", shards=1, tied=True, hidden=128, heads=4,
             kv_heads=2, head_dim=32, ff=320, qk_norm=True)

# hidden and intermediate sizes that are whole groups of 128 (the converter reshapes so)
QWEN3_G = dict(QWEN3, hidden=256, ff=384, heads=4, head_dim=64)

# name -> (maker, its spec, how the weights are stored)
VARIANTS = {
    "deepseek3-fp8": (make_moe, dict(
        arch="DeepseekV3ForCausalLM", dtype="BF16", shards=2, tied=True, hidden=128, heads=2,
        layers=2, dense=1, mtp=0, q_lora=192, kv_lora=128, nope=64, rope=32, v=64, ff=256,
        moe_ff=96, shared=1, experts=4, groups=2, bpe="deepseek_v3", vocab=129280,
        name_or_path="deepseek-ai/DeepSeek-V3"),
        dict(fmt="F8_E4M3", scale="F32", config=FP8["fp8"])),
    "qwen3-fp8": (make_model, dict(
        arch="Qwen3ForCausalLM", dtype="BF16", shards=1, tied=True, hidden=128, heads=4,
        kv_heads=2, head_dim=32, ff=320, qk_norm=True, name_or_path="Qwen/Qwen3-0.6B-FP8"),
        dict(fmt="F8_E4M3", scale="BF16", config=FP8["fp8"])),
    "qwen3-fp8-e5m2": (make_model, dict(
        arch="Qwen3ForCausalLM", dtype="BF16", shards=1, tied=False, hidden=128, heads=4,
        kv_heads=2, head_dim=32, ff=320, qk_norm=True),
        dict(fmt="F8_E5M2", scale="F32", config=dict(FP8["fp8"], fmt="e5m2"))),
    # compressed-tensors (RedHatAI's Qwen3-*-FP8-dynamic, *-quantized.w8a8): weights per
    # channel, a [rows, 1] weight_scale
    "qwen3-ct-fp8": (make_model, QWEN3, dict(fmt="F8_E4M3", scale="BF16", channel=True,
                                             config=compressed("float-quantized", "float"))),
    "qwen3-ct-int8": (make_model, QWEN3, dict(fmt="I8", scale="F32", channel=True,
                                              config=compressed("int-quantized", "int"))),
    # compressed-tensors pack-quantized: int4 symmetric (weight_packed, weight_scale,
    # weight_shape), int8 asymmetric (and weight_zero_point, packed along the rows)
    "qwen3-ct-w4a16": (make_model, QWEN3_G, dict(pack=4, symmetric=True, scale="BF16",
                                                 config=packed(4, True))),
    "qwen3-ct-w8-asym": (make_model, QWEN3_G, dict(pack=8, symmetric=False, scale="F16",
                                                   config=packed(8, False))),
    # GPTQ (qweight, qzeros, scales F16, g_idx): 4-bit symmetric with desc_act (g_idx a
    # permutation's groups), 8-bit asymmetric and 2-bit in order
    "qwen3-gptq-int4": (make_model, QWEN3_G, dict(gptq=4, desc_act=True, symmetric=True,
                                                  config=gptq(4, True, True))),
    "qwen3-gptq-int8": (make_model, QWEN3_G, dict(gptq=8, desc_act=False, symmetric=False,
                                                  config=gptq(8, False, False))),
    "qwen3-gptq-int2": (make_model, QWEN3_G, dict(gptq=2, desc_act=False, symmetric=True,
                                                  config=gptq(2, False, True))),
    # ModelOpt FP8 (nvidia/*-FP8): F8_E4M3 weights, one F32 weight_scale and input_scale per
    # tensor (0-d), k_scale / v_scale on k_proj / v_proj
    "qwen3-modelopt-fp8": (make_model, QWEN3, dict(fmt="F8_E4M3", scale="F32", tensor=True,
                                                   config={
        "exclude_modules": ["lm_head"], "kv_cache_quant_algo": "FP8", "quant_algo": "FP8",
        "quant_method": "modelopt", "producer": {"name": "modelopt", "version": "0.27.1"}})),
    # ModelOpt NVFP4 MoE (nvidia/Qwen3-30B-A3B-NVFP4): U8 weights of two E2M1 values a byte,
    # an F8_E4M3 weight_scale per 16 values, F32 weight_scale_2 and input_scale per tensor
    "qwen3moe-nvfp4": (make_moe, dict(
        arch="Qwen3MoeForCausalLM", dtype="BF16", shards=2, tied=True, hidden=128,
        head_dim=32, moe_ff=64, layers=2, experts=4, bpe="qwen3", vocab=151936,
        name_or_path="nvidia/Qwen3-30B-A3B-NVFP4"),
        dict(nvfp4=True, config=nvfp4_modelopt("0.29.0"))),
    # ModelOpt NVFP4 described by hf_quant_config.json alone (nvidia/Llama-3.3-70B-Instruct-FP4)
    "llama-modelopt-nvfp4": (make_model, dict(
        arch="LlamaForCausalLM", dtype="BF16", shards=1, tied=False, tokens=True,
        name_or_path="nvidia/Llama-3.3-70B-Instruct-FP4"),
        dict(nvfp4=True, config=None, hf_quant_config={
            "producer": {"name": "modelopt", "version": "0.23.0"},
            "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                             "group_size": 16, "exclude_modules": ["lm_head"]}})),
    # compressed-tensors NVFP4 (RedHatAI/Llama-3.1-8B-Instruct-NVFP4's quantization_config):
    # weight_packed, weight_scale (F8_E4M3), weight_global_scale and input_global_scale
    "llama-ct-nvfp4": (make_model, dict(
        arch="LlamaForCausalLM", dtype="BF16", shards=1, tied=False, tokens=True,
        name_or_path="RedHatAI/Llama-3.1-8B-Instruct-NVFP4"),
        dict(nvfp4="ct", config=nvfp4_ct())),
    # ModelOpt NVFP4 in a Qwen3.5 (nvidia's Qwen3.5 NVFP4 exports' quantization_config), the
    # linear attention's projections NVFP4 as well (their value heads reordered)
    "qwen35-nvfp4": (make_model, dict(
        arch="Qwen3_5ForCausalLM", dtype="BF16", shards=1, tied=True, layers=4, head_dim=32,
        npm_tokenizer="qwen3", vocab=151936, mtp=0, name_or_path="Qwen/Qwen3.5-0.8B"),
        dict(nvfp4=True, linear=True, config=nvfp4_modelopt("0.37.0"))),
    # ModelOpt NVFP4 in a dense Gemma 4 (no experts: Gemma4Model's fold of
    # router.per_expert_scale into the experts' weight_scale_2 has nothing to fold)
    "gemma4-nvfp4": (make_model, dict(
        arch="Gemma4ForCausalLM", dtype="BF16", shards=1, tied=True, layers=4, head_dim=16,
        global_head=32, sliding_window=64, ple=8, kv_shared=2, double_wide=True,
        gemma4_tok="v5", name_or_path="nvidia/Gemma-4-31B-IT-NVFP4"),
        dict(nvfp4=True, config=nvfp4_modelopt("0.37.0"))),
    # ModelOpt NVFP4 in a Gemma 4 MoE, its experts stored one by one (as ModelOpt exports
    # them), NVFP4 too: router.per_expert_scale folded into the down_proj experts' scales
    "gemma4moe-nvfp4": (make_model, dict(
        arch="Gemma4ForCausalLM", dtype="BF16", shards=2, tied=True, layers=2, head_dim=16,
        global_head=32, global_kv=1, k_eq_v=True, sliding_window=64, gemma4_tok="v5",
        experts=4, top_k=2, ff_exp=64),
        dict(nvfp4=True, split_experts=True, config=nvfp4_modelopt("0.37.0"))),
    # bitnet (microsoft/bitnet-b1.58-2B-4T's quantization_config and storage: U8 weights of
    # four ternary values a byte along the rows, one BF16 weight_scale), in a Qwen3 class
    "qwen3-bitnet": (make_model, QWEN3, dict(bitnet=True, config={
        "linear_class": "autobitlinear", "quant_method": "bitnet",
        "quantization_mode": "offline"})),
}


def fp8_values(fmt):
    """The float values of the format's 256 codes (NaN and inf where the format has them)."""
    eb, mb, bias = {"F8_E4M3": (4, 3, 7), "F8_E5M2": (5, 2, 15)}[fmt]
    out = np.zeros(256)
    for c in range(256):
        e, m = (c >> mb) & ((1 << eb) - 1), c & ((1 << mb) - 1)
        if (fmt == "F8_E4M3" and e == 15 and m == 7) or (fmt == "F8_E5M2" and e == 31):
            v = np.nan
        else:
            v = (m / (1 << mb)) * 2.0 ** (1 - bias) if e == 0 else \
                (1 + m / (1 << mb)) * 2.0 ** (e - bias)
        out[c] = -v if c & 0x80 else v
    return out


def encode(x, fmt):
    """The nearest finite code of each value (float64 array) -> uint8 array."""
    vals = fp8_values(fmt)[:128]
    last = int(np.nanargmax(np.where(np.isfinite(vals), vals, -1)))
    pos = vals[:last + 1]                          # ascending, finite
    a = np.minimum(np.abs(x), pos[-1])
    i = np.clip(np.searchsorted(pos, a), 1, last)
    lo, hi = pos[i - 1], pos[i]
    code = np.where(a - lo <= hi - a, i - 1, i).astype(np.uint8)
    return code | np.where(x < 0, 0x80, 0).astype(np.uint8)


def to_dtype(x, dt):
    """float32 array -> (bytes, the float32 values stored)."""
    x = x.astype(np.float32)
    if dt == "F32":
        return x.tobytes(), x
    if dt == "F16":
        return x.astype(np.float16).tobytes(), x.astype(np.float16).astype(np.float32)
    b = (x.view(np.uint32) + 0x7fff + ((x.view(np.uint32) >> 16) & 1)) >> 16   # nearest even
    b = b.astype(np.uint16)
    return b.tobytes(), (b.astype(np.uint32) << 16).view(np.float32)


def quantize_channel(w, q):
    """A [rows, cols] float32 weight -> (codes, scale bytes, scale shape [rows, 1])."""
    amax = np.abs(w).max(axis=1, keepdims=True)
    fmax = {"F8_E4M3": 448.0, "F8_E5M2": 57344.0, "I8": 127.0}[q["fmt"]]
    data, scale = to_dtype(np.where(amax > 0, amax / fmax, 1.0), q["scale"])
    x = w.astype(np.float64) / scale.astype(np.float64)
    if q["fmt"] == "I8":
        return np.clip(np.rint(x), -127, 127).astype(np.int8), data, scale.shape
    return encode(x, q["fmt"]), data, scale.shape


def quantize_tensor(w, q):
    """A float32 weight -> (codes, scale bytes, scale shape ()): one scale for the tensor."""
    amax = float(np.abs(w).max())
    data, scale = to_dtype(np.array(amax / 448.0 if amax > 0 else 1.0), q["scale"])
    return encode(w.astype(np.float64) / float(scale), q["fmt"]), data, ()


def quantize_block(w, q, block=128):
    """A [rows, cols] float32 weight -> (codes, scale bytes, scale shape)."""
    fmt, fmax = q["fmt"], {"F8_E4M3": 448.0, "F8_E5M2": 57344.0}[q["fmt"]]
    r, c = w.shape
    sr, sc = -(-r // block), -(-c // block)
    padded = np.zeros((sr * block, sc * block), dtype=np.float32)
    padded[:r, :c] = np.abs(w)
    amax = padded.reshape(sr, block, sc, block).max(axis=(1, 3))
    data, scale = to_dtype(np.where(amax > 0, amax / fmax, 1.0), q["scale"])
    full = np.repeat(np.repeat(scale, block, 0), block, 1)[:r, :c].astype(np.float64)
    return encode(w.astype(np.float64) / full, fmt), data, (sr, sc)


def pack_rows(q, bits):
    """[rows, cols] ints in [0, 2^bits) -> int32 [rows, ceil(cols * bits / 32)], value j of a
    word at bits j * bits (compressed-tensors' pack_to_int32, along the columns)."""
    per = 32 // bits
    r, c = q.shape
    padded = np.zeros((r, -(-c // per) * per), dtype=np.uint64)
    padded[:, :c] = q
    words = np.zeros((r, padded.shape[1] // per), dtype=np.uint64)
    for j in range(per):
        words |= padded[:, j::per] << np.uint64(j * bits)
    return words.astype(np.uint32).view(np.int32)


def quantize_packed(w, q, group=128):
    """A [rows, cols] float32 weight -> [(suffix, dtype, shape, bytes)] as compressed-tensors
    stores a pack-quantized group-wise int weight."""
    bits, r, c = q["pack"], *w.shape
    g = w.reshape(r, c // group, group).astype(np.float64)
    if q["symmetric"]:
        qmax = (1 << (bits - 1)) - 1
        amax = np.abs(g).max(axis=2)
        scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
        sdata, scale = to_dtype(scale, q["scale"])
        x = np.clip(np.rint(g / scale[..., None]), -qmax - 1, qmax)
        codes = (x + (1 << (bits - 1))).astype(np.uint64).reshape(r, c)
        zp = None
    else:
        lo, hi = np.minimum(g.min(axis=2), 0), np.maximum(g.max(axis=2), 0)
        top = (1 << bits) - 1
        scale = np.where(hi > lo, (hi - lo) / top, 1.0).astype(np.float32)
        sdata, scale = to_dtype(scale, q["scale"])
        zp = np.clip(np.rint(-lo / scale), 0, top).astype(np.uint64)
        x = np.clip(np.rint(g / scale[..., None]) + zp[..., None], 0, top)
        codes = x.astype(np.uint64).reshape(r, c)
    out = [("_packed", "I32", None, pack_rows(codes, bits)),
           ("_scale", q["scale"], scale.shape, sdata),
           ("_shape", "I64", (2,), np.array([r, c], dtype=np.int64).tobytes())]
    if zp is not None:   # packed along the rows: [ceil(rows * bits / 32), groups]
        out.append(("_zero_point", "I32", None, pack_rows(zp.T.copy(), bits).T.copy()))
    return [(s, dt, shp if shp is not None else data.shape,
             data if isinstance(data, bytes) else data.tobytes()) for s, dt, shp, data in out]


def quantize_gptq(w, q, name, group=128):
    """A [out, in] float32 weight -> [(suffix, dtype, shape, bytes)] as GPTQ stores it:
    qweight int32 [in / per, out] (input rows packed), qzeros int32 [groups, out / per]
    (zero - 1: v1), scales F16 [groups, out], g_idx int32 [in] (desc_act: the groups of a
    permutation of the input columns)."""
    bits, (o, n) = q["gptq"], w.shape
    top, ng = (1 << bits) - 1, n // group
    if q["desc_act"]:
        perm = np.random.default_rng(len(name)).permutation(n)
        g_idx = np.empty(n, dtype=np.int32)
        g_idx[perm] = np.arange(n) // group
    else:
        g_idx = (np.arange(n) // group).astype(np.int32)
    scale = np.zeros((ng, o), dtype=np.float32)
    zero = np.zeros((ng, o), dtype=np.int64)
    codes = np.zeros((n, o), dtype=np.int64)
    wt = w.T.astype(np.float64)                  # [in, out]
    for g in range(ng):
        cols = wt[g_idx == g]
        if q["symmetric"]:
            amax = np.abs(cols).max(axis=0)
            sc = np.where(amax > 0, 2 * amax / top, 1.0)
            z = np.full(o, (top + 1) // 2)
        else:
            lo, hi = np.minimum(cols.min(axis=0), 0), np.maximum(cols.max(axis=0), 0)
            sc = np.where(hi > lo, (hi - lo) / top, 1.0)
            z = np.clip(np.rint(-lo / sc), 1, top).astype(np.int64)   # v1: zero - 1 >= 0
        sc = sc.astype(np.float16).astype(np.float64)
        scale[g], zero[g] = sc, z
        codes[g_idx == g] = np.clip(np.rint(cols / sc) + z, 0, top)
    qweight = pack_rows(codes.T.astype(np.uint64), bits).T.copy()     # along the input rows
    qzeros = pack_rows((zero - 1).astype(np.uint64), bits)
    return [(".qweight", "I32", qweight.shape, qweight.tobytes()),
            (".qzeros", "I32", qzeros.shape, qzeros.tobytes()),
            (".scales", "F16", scale.shape, scale.astype(np.float16).tobytes()),
            (".g_idx", "I32", g_idx.shape, g_idx.tobytes())]


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def quantize_nvfp4(w):
    """A [rows, cols] float32 weight -> [(suffix, dtype, shape, bytes)] as ModelOpt stores
    NVFP4: scale2 = max|w| / (6 * 448) (F32), an E4M3 scale per 16 columns (the block's
    max|w| / 6 / scale2), E2M1 codes of w / (scale * scale2), two a byte (the even column in
    the low nibble)."""
    r, c = w.shape
    wb = w.reshape(r, c // 16, 16).astype(np.float64)
    s2 = np.float32(max(float(np.abs(w).max()), 1e-30) / (6 * 448))
    sc = encode(np.abs(wb).max(axis=2) / 6 / float(s2), "F8_E4M3")
    scv = fp8_values("F8_E4M3")[sc]
    x = wb / np.where(scv > 0, scv * float(s2), 1.0)[..., None]
    code = np.abs(np.abs(x)[..., None] - E2M1).argmin(axis=-1) | np.where(x < 0, 8, 0)
    code = code.reshape(r, c).astype(np.uint8)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    act = np.float32(float(np.abs(w).max()) / 448)   # an activation scale of its own
    return [("", "U8", packed.shape, packed.tobytes()),
            ("_scale", "F8_E4M3", sc.shape, sc.astype(np.uint8).tobytes()),
            ("_scale_2", "F32", (), s2.tobytes()), ("input_scale", "F32", (), act.tobytes())]


def quantize_nvfp4_ct(w):
    """quantize_nvfp4 as compressed-tensors stores it: weight_packed, weight_scale, and the
    reciprocals of scale2 and the activation scale as weight_global_scale and
    input_global_scale (F32 [1])."""
    (_, _, ps, pk), (_, _, ss, sc), (_, _, _, s2), (_, _, _, act) = quantize_nvfp4(w)
    inv = [np.float32(1 / np.frombuffer(x, dtype=np.float32)[0]).reshape(1).tobytes()
           for x in (s2, act)]
    return [("_packed", "U8", ps, pk), ("_scale", "F8_E4M3", ss, sc),
            ("_global_scale", "F32", (1,), inv[0]), ("input_global_scale", "F32", (1,), inv[1])]


def quantize_bitnet(w):
    """A [rows, cols] float32 weight -> [(suffix, dtype, shape, bytes)] as BitNet b1.58
    stores it: ternary t = clip(round(w * s), -1, 1), s = 1 / mean|w| (BF16: the weight is
    t / s), bytes [rows / 4, cols] holding t + 1 of rows k * rows / 4 + r at bits 2k."""
    r, c = w.shape
    sdata, s = to_dtype(np.array([1 / np.abs(w).mean()], dtype=np.float32), "BF16")
    t = np.clip(np.rint(w.astype(np.float64) * s[0]), -1, 1).astype(np.int64) + 1
    b = np.zeros((r // 4, c), dtype=np.int64)
    for k in range(4):
        b |= t[k * (r // 4):(k + 1) * (r // 4)] << (2 * k)
    return [("", "U8", b.shape, b.astype(np.uint8).tobytes()),
            ("_scale", "BF16", (1,), sdata)]


def quantized(name, shape):
    """Whether the published FP8 repos store this tensor in FP8: 2-D linear weights, not the
    embeddings, lm_head, norms or the MoE router."""
    return len(shape) == 2 and name.endswith(("_proj.weight", "_proj_with_mqa.weight"))


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        hdr = json.loads(f.read(n))
        base = 8 + n
        out = []
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            f.seek(base + v["data_offsets"][0])
            out.append((k, v["dtype"], tuple(v["shape"]), f.read(v["data_offsets"][1] -
                                                                 v["data_offsets"][0])))
    return out


def bf16_values(data, shape):
    return (np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16).view(
        np.float32).reshape(shape)


def quantize_repo(d, q):
    """The repo's shards rewritten with its linear weights quantized (q), config.json's
    quantization_config set, index.json's weight_map completed."""
    def quantize(name, dt, shape, data):
        if q.get("split_experts") and name.endswith((".experts.gate_up_proj",
                                                     ".experts.down_proj")):
            return [x for t in split_experts(name, dt, shape, data) for x in quantize(*t)]
        linear = q.get("linear") and len(shape) == 2 and ".linear_attn.in_proj_" in name
        if dt != "BF16" or not (quantized(name, shape) or linear):
            return [(name, dt, shape, data)]
        if q.get("nvfp4"):
            fn = quantize_nvfp4_ct if q["nvfp4"] == "ct" else quantize_nvfp4
            return [((name[:-len("weight")] + sfx) if sfx.startswith("input_") else name + sfx,
                     dt, shp, data) for sfx, dt, shp, data in fn(bf16_values(data, shape))]
        if q.get("bitnet"):
            return [(name + sfx, dt, shp, data) for sfx, dt, shp, data in
                    quantize_bitnet(bf16_values(data, shape))]
        if q.get("gptq"):
            base = name[:-len(".weight")]
            return [(base + sfx, dt, shp, data) for sfx, dt, shp, data in
                    quantize_gptq(bf16_values(data, shape), q, name)]
        if q.get("pack"):
            return [(name + sfx, dt, shp, data) for sfx, dt, shp, data in
                    quantize_packed(bf16_values(data, shape), q)]
        quant = quantize_tensor if q.get("tensor") else \
            quantize_channel if q.get("channel") else quantize_block
        codes, sdata, sshape = quant(bf16_values(data, shape), q)
        if q.get("tensor"):   # ModelOpt: weight_scale, input_scale, k/v scales
            one = np.array(1.0 + len(name) / 64, dtype=np.float32).tobytes()
            kv = [(name[:-len("weight")] + n, "F32", (), one) for n in ("k_scale", "v_scale")
                  if name.endswith(n[0] + "_proj.weight")]
            return [(name, q["fmt"], shape, codes.tobytes()),
                    (name + "_scale", "F32", (), sdata),
                    (name[:-len("weight")] + "input_scale", "F32", (), one)] + kv
        return [(name, q["fmt"], shape, codes.tobytes()),
                (name + ("_scale" if q.get("channel") else "_scale_inv"), q["scale"], sshape,
                 sdata)]
    rewrite_repo(d, quantize, q["config"])
    if q.get("hf_quant_config"):
        with open(os.path.join(d, "hf_quant_config.json"), "w") as f:
            json.dump(q["hf_quant_config"], f, indent=4)


def split_experts(name, dt, shape, data):
    """Gemma 4's stacked experts (experts.gate_up_proj [E, 2 x ff, hidden], experts.down_proj
    [E, hidden, ff]) as ModelOpt exports them: experts.E.gate_proj.weight (the first ff rows),
    experts.E.up_proj.weight, experts.E.down_proj.weight, 2-D each."""
    base = name[:name.rindex(".experts.") + len(".experts.")]
    w = np.frombuffer(data, dtype=np.uint16).reshape(shape)
    out = []
    for e in range(shape[0]):
        if name.endswith("gate_up_proj"):
            ff = shape[1] // 2
            out += [(base + "%d.%s.weight" % (e, p), dt, (ff, shape[2]), x.tobytes())
                    for p, x in (("gate_proj", w[e, :ff]), ("up_proj", w[e, ff:]))]
        else:
            out.append((base + "%d.down_proj.weight" % e, dt, shape[1:], w[e].tobytes()))
    return out


def rewrite_repo(d, tensor, config):
    """Each shard's tensors replaced by tensor(name, dtype, shape, bytes)'s list of them,
    index.json's weight_map made again, config.json's quantization_config set (config not
    None)."""
    wmap = {}
    for fn in sorted(f for f in os.listdir(d) if f.endswith(".safetensors")):
        items = [x for t in read_safetensors(os.path.join(d, fn)) for x in tensor(*t)]
        make_model.write_safetensors(os.path.join(d, fn), items)
        wmap.update({t[0]: fn for t in items})
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            j = json.load(f)
        j["weight_map"] = dict(sorted(wmap.items()))
        with open(idx, "w") as f:
            json.dump(j, f, indent=2)
    cfg = os.path.join(d, "config.json")
    with open(cfg) as f:
        c = json.load(f)
    if config is not None:
        c["quantization_config"] = config
    with open(cfg, "w") as f:
        json.dump(c, f, indent=2)


def make(outdir, name):
    maker, spec, q = VARIANTS[name]
    maker.VARIANTS[name] = spec
    d = maker.make(outdir, name)
    quantize_repo(d, q)
    return d


def main(argv):
    if not argv:
        sys.exit(__doc__)
    for v in argv[1:] or VARIANTS:
        print(make(argv[0], v))


if __name__ == "__main__":
    main(sys.argv[1:])
