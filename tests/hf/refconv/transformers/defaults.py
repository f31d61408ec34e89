"""What transformers 4.57's AutoConfig.from_pretrained(d).to_dict() adds to config.json for the
config classes of the tests' architectures: each class's __init__ defaults (facts read from
transformers' src/transformers/models/*/configuration_*.py, v4.57) and the values it derives
(head_dim, num_key_value_heads, ...). Keys present in config.json win, as in transformers. A
model_type 4.57 does not know (qwen3_5, ...) makes real AutoConfig fail, and the converter
then reads config.json as it is: the same here (no entry).  Gemma 4 (gemma4, gemma4_text, and
its towers' gemma4_vision, gemma4_audio) is transformers 5's Gemma4TextConfig/Gemma4Config
(Gemma4VisionConfig, Gemma4AudioConfig): 4.57 cannot load a Gemma 4 repo's
tokenizer_config.json, so the converter runs on Gemma 4 only with transformers 5.

Only the class's own parameters are listed, not PretrainedConfig's generic ones (return_dict,
id2label, ...), which the converter does not read for these architectures.
"""

import copy

# the parameters shared by transformers' Llama-like classes, Llama's values
_LLAMA = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
              num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
              max_position_embeddings=2048, initializer_range=0.02, rms_norm_eps=1e-6,
              use_cache=True, pad_token_id=None, bos_token_id=1, eos_token_id=2,
              pretraining_tp=1, tie_word_embeddings=False, rope_theta=10000.0,
              rope_scaling=None, attention_bias=False, attention_dropout=0.0, mlp_bias=False,
              head_dim=None)

_MISTRAL = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                head_dim=None, hidden_act="silu", max_position_embeddings=4096 * 32,
                initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True, pad_token_id=None,
                bos_token_id=1, eos_token_id=2, tie_word_embeddings=False, rope_theta=10000.0,
                sliding_window=4096, attention_dropout=0.0)

_QWEN2 = dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
              num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
              max_position_embeddings=32768, initializer_range=0.02, rms_norm_eps=1e-6,
              use_cache=True, tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
              use_sliding_window=False, sliding_window=4096, max_window_layers=28,
              layer_types=None, attention_dropout=0.0)

_QWEN3 = dict(_QWEN2, head_dim=128, attention_bias=False)

_GEMMA2 = dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
               num_attention_heads=8, num_key_value_heads=4, head_dim=256,
               hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192,
               initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True, pad_token_id=0,
               eos_token_id=1, bos_token_id=2, tie_word_embeddings=True, rope_theta=10000.0,
               attention_bias=False, attention_dropout=0.0, query_pre_attn_scalar=256,
               sliding_window=4096, layer_types=None, final_logit_softcapping=30.0,
               attn_logit_softcapping=50.0)

_GEMMA3_TEXT = dict(vocab_size=262208, hidden_size=2304, intermediate_size=9216,
                    num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                    head_dim=256, hidden_activation="gelu_pytorch_tanh",
                    max_position_embeddings=131072, initializer_range=0.02, rms_norm_eps=1e-6,
                    use_cache=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
                    tie_word_embeddings=True, rope_theta=1000000.0, attention_bias=False,
                    attention_dropout=0.0, query_pre_attn_scalar=256, sliding_window=4096,
                    layer_types=None, final_logit_softcapping=None, attn_logit_softcapping=None,
                    rope_scaling=None, rope_local_base_freq=10000.0,
                    use_bidirectional_attention=False)

# Gemma3ForConditionalGeneration's Gemma3Config: text_config is a Gemma3TextConfig
_GEMMA3 = dict(mm_tokens_per_image=256, boi_token_index=255999, eoi_token_index=256000,
               image_token_index=262144, initializer_range=0.02)

_PHI3 = dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
             num_attention_heads=32, num_key_value_heads=None, resid_pdrop=0.0, embd_pdrop=0.0,
             attention_dropout=0.0, hidden_act="silu", max_position_embeddings=4096,
             original_max_position_embeddings=4096, initializer_range=0.02, rms_norm_eps=1e-5,
             use_cache=True, tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
             partial_rotary_factor=1.0, bos_token_id=1, eos_token_id=32000, pad_token_id=32000,
             sliding_window=None)

_SMOLLM3 = dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008,
                num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=4,
                hidden_act="silu", max_position_embeddings=32768, initializer_range=0.02,
                rms_norm_eps=1e-6, use_cache=True, pad_token_id=128004, bos_token_id=128000,
                eos_token_id=128001, rope_theta=2000000.0, rope_scaling=None,
                use_sliding_window=False, sliding_window=None, no_rope_layers=None,
                no_rope_layer_interval=4, layer_types=None, attention_bias=False,
                attention_dropout=0.0, mlp_bias=False, tie_word_embeddings=True)

_GRANITE = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
                max_position_embeddings=2048, initializer_range=0.02, rms_norm_eps=1e-6,
                use_cache=True, pad_token_id=None, bos_token_id=1, eos_token_id=2,
                tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
                attention_bias=False, attention_dropout=0.0, mlp_bias=False,
                embedding_multiplier=1.0, logits_scaling=1.0, residual_multiplier=1.0,
                attention_multiplier=1.0)

_OLMO2 = dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
              num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
              max_position_embeddings=2048, initializer_range=0.02, use_cache=True,
              pad_token_id=1, bos_token_id=None, eos_token_id=50279, tie_word_embeddings=False,
              rope_theta=10000.0, rope_scaling=None, attention_bias=False, attention_dropout=0.0,
              rms_norm_eps=1e-5)

_MIXTRAL = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, head_dim=None, hidden_act="silu",
                max_position_embeddings=4096 * 32, initializer_range=0.02, rms_norm_eps=1e-5,
                use_cache=True, pad_token_id=None, bos_token_id=1, eos_token_id=2,
                tie_word_embeddings=False, rope_theta=1e6, sliding_window=None,
                attention_dropout=0.0, num_experts_per_tok=2, num_local_experts=8,
                output_router_logits=False, router_aux_loss_coef=0.001, router_jitter_noise=0.0)

# The mixture-of-experts classes (the next issue's): parameters read from transformers' source
# as stored (v5 layout: rope_parameters), put back into 4.57's rope_theta / rope_scaling
_QWEN2_MOE = dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632,
                  num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
                  hidden_act="silu", max_position_embeddings=32768, initializer_range=0.02,
                  rms_norm_eps=1e-6, use_cache=True, tie_word_embeddings=False,
                  rope_theta=10000.0, rope_scaling=None, use_sliding_window=False,
                  sliding_window=4096, max_window_layers=28, attention_dropout=0.0,
                  decoder_sparse_step=1, moe_intermediate_size=1408,
                  shared_expert_intermediate_size=5632, num_experts_per_tok=4, num_experts=60,
                  norm_topk_prob=False, output_router_logits=False, router_aux_loss_coef=0.001,
                  mlp_only_layers=None, qkv_bias=True)

_QWEN3_MOE = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                  num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=4,
                  hidden_act="silu", max_position_embeddings=32768, initializer_range=0.02,
                  rms_norm_eps=1e-6, use_cache=True, tie_word_embeddings=False,
                  rope_theta=10000.0, rope_scaling=None, attention_bias=False,
                  use_sliding_window=False, sliding_window=4096, attention_dropout=0.0,
                  decoder_sparse_step=1, moe_intermediate_size=768, num_experts_per_tok=8,
                  num_experts=128, norm_topk_prob=False, output_router_logits=False,
                  router_aux_loss_coef=0.001, mlp_only_layers=None)

_QWEN3_NEXT = dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632,
                   num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=2,
                   hidden_act="silu", max_position_embeddings=32768, initializer_range=0.02,
                   rms_norm_eps=1e-6, use_cache=True, tie_word_embeddings=False,
                   rope_theta=10000.0, rope_scaling=None, partial_rotary_factor=0.25,
                   attention_bias=False, attention_dropout=0.0, head_dim=256,
                   linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                   linear_num_key_heads=16, linear_num_value_heads=32, decoder_sparse_step=1,
                   moe_intermediate_size=512, shared_expert_intermediate_size=512,
                   num_experts_per_tok=10, num_experts=512, norm_topk_prob=True,
                   output_router_logits=False, router_aux_loss_coef=0.001, mlp_only_layers=[],
                   layer_types=None)

_GPT_OSS = dict(num_hidden_layers=36, num_local_experts=128, vocab_size=201088,
                hidden_size=2880, intermediate_size=2880, head_dim=64, num_attention_heads=64,
                num_key_value_heads=8, sliding_window=128, rope_theta=150000.0,
                tie_word_embeddings=False, hidden_act="silu", initializer_range=0.02,
                max_position_embeddings=131072, rms_norm_eps=1e-5,
                rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                              "beta_slow": 1.0, "truncate": False,
                              "original_max_position_embeddings": 4096},
                attention_dropout=0.0, num_experts_per_tok=4, router_aux_loss_coef=0.001,
                output_router_logits=False, use_cache=True, layer_types=None,
                attention_bias=True)

_DEEPSEEK_V2 = dict(_LLAMA, first_k_dense_replace=0, kv_lora_rank=512, q_lora_rank=1536,
                    n_group=None, n_routed_experts=64, n_shared_experts=2,
                    qk_nope_head_dim=128, qk_rope_head_dim=64, routed_scaling_factor=1.0,
                    topk_group=None, topk_method="greedy", norm_topk_prob=False,
                    v_head_dim=128, num_experts_per_tok=None, moe_intermediate_size=1407)

_DEEPSEEK_V3 = dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432,
                    moe_intermediate_size=2048, num_hidden_layers=61, num_attention_heads=128,
                    num_key_value_heads=128, n_shared_experts=1, n_routed_experts=256,
                    routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536,
                    qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, n_group=8,
                    topk_group=4, num_experts_per_tok=8, first_k_dense_replace=3,
                    norm_topk_prob=True, hidden_act="silu", max_position_embeddings=4096,
                    initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True,
                    pad_token_id=None, bos_token_id=0, eos_token_id=1, pretraining_tp=1,
                    tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
                    rope_interleave=True, attention_bias=False, attention_dropout=0.0)


# transformers 5's Gemma4TextConfig (global_head_dim and num_global_key_value_heads as the
# converter reads them: the full layers' head size and KV heads)
_GEMMA4_TEXT = dict(vocab_size=262144, hidden_size=2304, intermediate_size=9216,
                    num_hidden_layers=30, num_attention_heads=8, num_key_value_heads=4,
                    head_dim=256, hidden_activation="gelu_pytorch_tanh",
                    max_position_embeddings=131072, initializer_range=0.02, rms_norm_eps=1e-6,
                    use_cache=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
                    tie_word_embeddings=True, rope_parameters=None, attention_bias=False,
                    attention_dropout=0.0, sliding_window=512, layer_types=None,
                    final_logit_softcapping=None, use_bidirectional_attention=None,
                    vocab_size_per_layer_input=262144, hidden_size_per_layer_input=256,
                    attention_k_eq_v=False, num_kv_shared_layers=0, enable_moe_block=False,
                    use_double_wide_mlp=False, num_experts=None, top_k_experts=None,
                    moe_intermediate_size=None, global_head_dim=512,
                    num_global_key_value_heads=None)

# transformers 5's Gemma4VisionConfig and Gemma4AudioConfig: Gemma4Config makes one of a
# vision_config / audio_config dict (absent or null: none), and to_dict() has all their fields
_GEMMA4_VISION = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=16,
                      num_attention_heads=12, num_key_value_heads=12, head_dim=64,
                      hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                      max_position_embeddings=131072, attention_bias=False,
                      attention_dropout=0.0, rope_parameters=None, pooling_kernel_size=3,
                      patch_size=16, position_embedding_size=10240, use_clipped_linears=False,
                      standardize=False, initializer_range=0.02)

_GEMMA4_AUDIO = dict(hidden_size=1024, num_hidden_layers=12, num_attention_heads=8,
                     hidden_act="silu", subsampling_conv_channels=[128, 32], conv_kernel_size=5,
                     residual_weight=0.5, attention_chunk_size=12, attention_context_left=13,
                     attention_context_right=0, attention_logit_cap=50.0,
                     attention_invalid_logits_value=-1.0e9, use_clipped_linears=True,
                     rms_norm_eps=1e-6, gradient_clipping=1e10, output_proj_dims=1536,
                     initializer_range=0.02)

_GEMMA4 = dict(boi_token_id=255999, eoi_token_id=258882, image_token_id=258880,
               video_token_id=258884, boa_token_id=256000, eoa_token_index=258883,
               audio_token_id=258881, initializer_range=0.02, tie_word_embeddings=True)


def _head_dim(c):
    if c.get("head_dim") is None:
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]


def _kv_heads(c):
    if c.get("num_key_value_heads") is None:
        c["num_key_value_heads"] = c["num_attention_heads"]


def _rope_type(c):
    # "BC: if there is a 'type' field, copy it to 'rope_type'"
    rs = c.get("rope_scaling")
    if isinstance(rs, dict) and "type" in rs:
        rs["rope_type"] = rs["type"]


def _qwen_layers(c):
    # sliding_window only when use_sliding_window; layer_types from max_window_layers
    if not c.get("use_sliding_window"):
        c["sliding_window"] = None
    if c.get("layer_types") is None:
        c["layer_types"] = ["sliding_attention" if c["sliding_window"] is not None and
                            i >= c["max_window_layers"] else "full_attention"
                            for i in range(c["num_hidden_layers"])]


def _gemma_layers(every):
    def f(c):
        if c.get("layer_types") is None:
            c["layer_types"] = ["sliding_attention" if (i + 1) % every else "full_attention"
                                for i in range(c["num_hidden_layers"])]
    return f


def _gemma3_layers(c):
    # the sliding_window_pattern of older configs (default 6) gives layer_types
    _gemma_layers(c.get("sliding_window_pattern", 6))(c)


def _gemma3_text_config(c):
    c["text_config"] = complete(dict(c.get("text_config") or {}, model_type="gemma3_text"))


def _gemma4_text(c):
    # a bidirectional model's window; every 6th layer full, the last always; the rope
    if c.get("use_bidirectional_attention") == "all":
        c["sliding_window"] = c["sliding_window"] // 2 + 1
    _gemma_layers(6)(c)
    if c["layer_types"] and c["layer_types"][-1] != "full_attention":
        c["layer_types"] = c["layer_types"][:-1] + ["full_attention"]
    if c.get("rope_parameters") is None:
        c["rope_parameters"] = {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                               "rope_theta": 1000000.0}}


def _gemma4_sub_configs(c):
    c["text_config"] = complete(dict(c.get("text_config") or {}, model_type="gemma4_text"))
    for k, model_type in (("vision_config", "gemma4_vision"), ("audio_config", "gemma4_audio")):
        if isinstance(c.get(k), dict):
            c[k] = complete(dict(c[k], model_type=model_type))


def _gemma4_vision(c):
    if c.get("rope_parameters") is None:
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": 100.0}


def _phi3_rope(c):
    # "su" and "yarn" rope scaling of older Phi-3 configs is longrope
    rs = c.get("rope_scaling")
    if isinstance(rs, dict) and rs.get("type") in ("su", "yarn"):
        rs["type"] = "longrope"


def _smollm3_layers(c):
    if c.get("no_rope_layers") is None:
        c["no_rope_layers"] = [int((i + 1) % c["no_rope_layer_interval"] != 0)
                               for i in range(c["num_hidden_layers"])]
    if c.get("layer_types") is None:
        c["layer_types"] = ["sliding_attention" if c.get("use_sliding_window") and
                            c.get("sliding_window") is not None and not c["no_rope_layers"][i]
                            else "full_attention" for i in range(c["num_hidden_layers"])]


def _moe_lists(c):
    if c.get("mlp_only_layers") is None:
        c["mlp_only_layers"] = []
    if not c.get("use_sliding_window"):
        c["sliding_window"] = None


def _qwen3_next_layers(c):
    # every full_attention_interval-th layer full (a kwarg: 4 when absent)
    if c.get("layer_types") is None:
        k = c.get("full_attention_interval", 4)
        c["layer_types"] = ["linear_attention" if (i + 1) % k else "full_attention"
                            for i in range(c["num_hidden_layers"])]


def _gpt_oss_layers(c):
    _head_dim(c)
    _gemma_layers(2)(c)


def _deepseek_heads(c):
    # head_dim is the rope part of a head; qk_head_dim the whole (V3)
    c["head_dim"] = c["qk_rope_head_dim"]
    if c["model_type"] == "deepseek_v3":
        c["qk_head_dim"] = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]


# BertConfig (BertModel: all-MiniLM, BGE)
_BERT = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
             intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
             attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
             initializer_range=0.02, layer_norm_eps=1e-12, pad_token_id=0,
             position_embedding_type="absolute", use_cache=True, classifier_dropout=None)

# Mistral3Config: its own parameters; text_config a CONFIG_MAPPING class by its model_type
# (mistral when it has none); a model_type 4.57 does not know (Ministral 3's ministral3) is a
# KeyError, AutoConfig fails and the converter reads config.json as written
_MISTRAL3 = dict(image_token_index=10, projector_hidden_act="gelu", vision_feature_layer=-1,
                 multimodal_projector_bias=False, spatial_merge_size=2)


# PixtralVisionConfig (Mistral3Config's vision_config when it names no other model_type):
# head_dim always hidden_size // num_attention_heads
_PIXTRAL_VISION = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                       num_attention_heads=16, num_channels=3, image_size=1024, patch_size=16,
                       hidden_act="gelu", attention_dropout=0.0, rope_theta=10000.0,
                       initializer_range=0.02)


def _mistral3_text_config(c):
    vc = c.get("vision_config")
    if isinstance(vc, dict) and vc.get("model_type", "pixtral") == "pixtral":
        _vision_config(c, _PIXTRAL_VISION, "pixtral")
        c["vision_config"]["head_dim"] = (c["vision_config"]["hidden_size"] //
                                          c["vision_config"]["num_attention_heads"])
    tc = dict(c.get("text_config") or {})
    tc.setdefault("model_type", "mistral")
    if tc["model_type"] not in CLASSES:
        raise KeyError(tc["model_type"])
    c["text_config"] = complete(tc)


# Llama4TextConfig (4.57's parameters; the stored v5 source's rope_parameters put back as
# rope_theta / rope_scaling) and Llama4Config (text_config always a Llama4TextConfig)
_LLAMA4_TEXT = dict(vocab_size=202048, hidden_size=5120, intermediate_size=8192,
                    intermediate_size_mlp=16384, num_hidden_layers=48, num_attention_heads=40,
                    num_key_value_heads=8, head_dim=128, hidden_act="silu",
                    max_position_embeddings=4096 * 32, initializer_range=0.02,
                    rms_norm_eps=1e-5, use_cache=True, pad_token_id=None, bos_token_id=1,
                    eos_token_id=2, tie_word_embeddings=False, attention_dropout=0.0,
                    num_experts_per_tok=1, num_local_experts=16, moe_layers=None,
                    interleave_moe_layer_step=1, use_qk_norm=True, output_router_logits=False,
                    router_aux_loss_coef=0.001, router_jitter_noise=0.0, rope_theta=500000.0,
                    rope_scaling=None, no_rope_layers=None, no_rope_layer_interval=4,
                    attention_chunk_size=8192, layer_types=None, attn_temperature_tuning=True,
                    floor_scale=8192, attn_scale=0.1, attention_bias=False)

_LLAMA4 = dict(boi_token_index=200080, eoi_token_index=200081, image_token_index=200092,
               tie_word_embeddings=False)


def _llama4_text(c):
    n = c["num_hidden_layers"]
    if not c.get("no_rope_layers"):
        c["no_rope_layers"] = [int((i + 1) % c["no_rope_layer_interval"] != 0) for i in range(n)]
    step = c["interleave_moe_layer_step"]
    if c.get("moe_layers") is None:
        c["moe_layers"] = list(range(step - 1, n, step))
    if c.get("layer_types") is None:
        c["layer_types"] = ["chunked_attention" if r else "full_attention"
                            for r in c["no_rope_layers"]]


# Llama4VisionConfig (Llama4Config's vision_config)
_LLAMA4_VISION = dict(hidden_size=768, hidden_act="gelu", num_hidden_layers=34,
                      num_attention_heads=16, num_channels=3, intermediate_size=5632,
                      vision_output_dim=7680, image_size=448, patch_size=14, norm_eps=1e-5,
                      vision_feature_layer=-1, vision_feature_select_strategy="default",
                      initializer_range=0.02, pixel_shuffle_ratio=0.5,
                      projector_input_dim=4096, projector_output_dim=4096,
                      multi_modal_projector_bias=False, projector_dropout=0.0,
                      attention_dropout=0.0, rope_theta=10000)


def _llama4_text_config(c):
    _vision_config(c, _LLAMA4_VISION, "llama4_vision_model")
    c["text_config"] = complete(dict(c.get("text_config") or {}, model_type="llama4_text"))


# Olmo3Config (the stored v5 source's default_theta put back as rope_theta)
_OLMO3 = dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
              num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
              max_position_embeddings=2048, initializer_range=0.02, use_cache=True,
              pad_token_id=1, bos_token_id=None, eos_token_id=50279, tie_word_embeddings=False,
              rope_theta=500000.0, rope_scaling=None, attention_bias=False,
              attention_dropout=0.0, rms_norm_eps=1e-5, sliding_window=4096, layer_types=None)


def _olmo3_layers(c):
    if c.get("layer_types") is None:
        c["layer_types"] = ["sliding_attention" if (i + 1) % 4 != 0 else "full_attention"
                            for i in range(c["num_hidden_layers"])]


# SeedOssConfig (the stored v5 source's rope_parameters put back as 4.57's rope_theta /
# rope_scaling, 10000.0 / None)
_SEED_OSS = dict(vocab_size=155136, hidden_size=4096, intermediate_size=27648,
                 num_hidden_layers=64, num_attention_heads=80, num_key_value_heads=8,
                 hidden_act="silu", max_position_embeddings=524288, initializer_range=0.02,
                 rms_norm_eps=1e-6, use_cache=True, pad_token_id=1, bos_token_id=0,
                 eos_token_id=2, pretraining_tp=1, tie_word_embeddings=False,
                 rope_theta=10000.0, rope_scaling=None, attention_bias=True,
                 attention_out_bias=False, attention_dropout=0.1, residual_dropout=0.1,
                 mlp_bias=False, head_dim=128)


# Exaone4Config (the stored v5 source's rope_parameters put back as 4.57's rope_theta /
# rope_scaling, 10000.0 / None); no head_dim attribute
_EXAONE4 = dict(vocab_size=102400, hidden_size=4096, intermediate_size=16384,
                num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                hidden_act="silu", max_position_embeddings=2048, initializer_range=0.02,
                rms_norm_eps=1e-5, use_cache=True, bos_token_id=0, eos_token_id=2,
                tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
                attention_dropout=0.0, sliding_window=4096, sliding_window_pattern=4,
                layer_types=None)


def _exaone4_layers(c):
    # sliding but every sliding_window_pattern-th layer; the pattern is 0 without a window
    # (ZeroDivisionError), a str pattern a TypeError: AutoConfig fails on both
    p = c["sliding_window_pattern"] if c.get("sliding_window") is not None else 0
    if c.get("layer_types") is None:
        c["layer_types"] = ["sliding_attention" if (i + 1) % p != 0 else "full_attention"
                            for i in range(c["num_hidden_layers"])]


# Cohere2Config (v5's rope_parameters put back as 4.57's rope_theta / rope_scaling)
_COHERE2 = dict(vocab_size=256000, hidden_size=8192, intermediate_size=22528, logit_scale=0.0625,
                num_hidden_layers=40, num_attention_heads=64, num_key_value_heads=None,
                hidden_act="silu", max_position_embeddings=8192, initializer_range=0.02,
                layer_norm_eps=1e-5, use_cache=True, pad_token_id=0, bos_token_id=5,
                eos_token_id=255001, tie_word_embeddings=True, rope_theta=10000.0,
                rope_scaling=None, attention_bias=False, attention_dropout=0.0,
                sliding_window=4096, layer_types=None)


def _cohere2(c):
    # head_dim = hidden_size // heads (config.json's own wins); layer_types from the pattern
    if "head_dim" not in c:
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    if c.get("layer_types") is None:
        p = c.get("sliding_window_pattern", 4)
        c["layer_types"] = ["sliding_attention" if bool((i + 1) % p) else "full_attention"
                            for i in range(c["num_hidden_layers"])]


# Glm4Config (v5's rope_parameters put back as 4.57's rope_theta / rope_scaling)
_GLM4 = dict(vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40,
             num_attention_heads=32, num_key_value_heads=2, partial_rotary_factor=0.5,
             head_dim=128, hidden_act="silu", attention_dropout=0.0,
             max_position_embeddings=131072, initializer_range=0.02, rms_norm_eps=0.00000015625,
             use_cache=True, tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
             pad_token_id=151329, eos_token_id=[151329, 151336, 151338], bos_token_id=None,
             attention_bias=True)


# Ernie4_5Config (v5's default_theta put back as 4.57's rope_theta)
_ERNIE4_5 = dict(vocab_size=103424, hidden_size=1024, intermediate_size=3072,
                 num_hidden_layers=18, num_attention_heads=16, num_key_value_heads=2,
                 hidden_act="silu", max_position_embeddings=131072, initializer_range=0.02,
                 rms_norm_eps=1e-05, use_cache=True, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2, tie_word_embeddings=True, rope_theta=500000.0,
                 rope_scaling=None, use_bias=False, head_dim=128)


# ApertusConfig (v5's rope_parameters put back as 4.57's rope_theta / rope_scaling)
_APERTUS = dict(vocab_size=131072, hidden_size=4096, intermediate_size=14336,
                num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=None,
                hidden_act="xielu", max_position_embeddings=65536, initializer_range=0.02,
                rms_norm_eps=1e-5, use_cache=True, pad_token_id=3, bos_token_id=1,
                eos_token_id=2, tie_word_embeddings=False, rope_theta=12000000.0,
                rope_scaling={"rope_type": "llama3", "factor": 8.0,
                              "original_max_position_embeddings": 8192,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0},
                attention_bias=False, attention_dropout=0.0)


# HunYuanDenseV1Config (a 4.x source: rope_theta / rope_scaling; head_dim None)
_HUNYUAN_V1_DENSE = dict(vocab_size=290943, hidden_size=4096, intermediate_size=11008,
                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=None,
                         hidden_act="silu", max_position_embeddings=2048,
                         initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2, eod_token_id=3,
                         pretraining_tp=1, tie_word_embeddings=False, rope_theta=10000.0,
                         rope_scaling=None, attention_bias=False, attention_dropout=0.0,
                         use_qk_norm=False, use_rotary_pos_emb=True, norm_type="hf_rms",
                         pad_id=-1, head_dim=None, sliding_window=None)


def _hunyuan_head(c):
    if c.get("attention_head_dim") is None:
        c["attention_head_dim"] = c["hidden_size"] // c["num_attention_heads"]


# XLMRobertaConfig (XLMRobertaModel: BGE-M3, multilingual-e5): BertConfig's but the ids
_XLM_ROBERTA = dict(_BERT, pad_token_id=1, bos_token_id=0, eos_token_id=2)


# ModernBertConfig (ModernBertModel: ModernBERT and the embedding models on it), 4.57's
# signature (global/local rope thetas and the pattern as parameters; to_dict drops
# reference_compile)
_MODERNBERT = dict(vocab_size=50368, hidden_size=768, intermediate_size=1152,
                   num_hidden_layers=22, num_attention_heads=12, hidden_activation="gelu",
                   max_position_embeddings=8192, initializer_range=0.02,
                   initializer_cutoff_factor=2.0, norm_eps=1e-5, norm_bias=False,
                   pad_token_id=50283, eos_token_id=50282, bos_token_id=50281,
                   cls_token_id=50281, sep_token_id=50282, global_rope_theta=160000.0,
                   attention_bias=False, attention_dropout=0.0, global_attn_every_n_layers=3,
                   local_attention=128, local_rope_theta=10000.0, embedding_dropout=0.0,
                   mlp_bias=False, mlp_dropout=0.0, decoder_bias=True, classifier_pooling="cls",
                   classifier_dropout=0.0, classifier_bias=False, classifier_activation="gelu",
                   deterministic_flash_attn=False, sparse_prediction=False,
                   sparse_pred_ignore_index=-100, repad_logits_with_grad=False)



# Qwen2_5_VLConfig (Qwen2.5-VL): its own token ids; vision_config a Qwen2_5_VLVisionConfig;
# text_config a Qwen2_5_VLTextConfig, made of all of config.json's other keys when config.json
# has none (the published repos' flat config.json: to_dict() then has them both at the top,
# as written, and in text_config, completed)
_QWEN2_5_VL = dict(image_token_id=151655, video_token_id=151656)

_QWEN2_5_VL_TEXT = dict(vocab_size=152064, hidden_size=8192, intermediate_size=29568,
                        num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                        hidden_act="silu", max_position_embeddings=32768,
                        initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True,
                        tie_word_embeddings=False, rope_theta=1000000.0,
                        use_sliding_window=False, sliding_window=4096, max_window_layers=80,
                        layer_types=None, attention_dropout=0.0, rope_scaling=None)

_QWEN2_5_VL_VISION = dict(depth=32, hidden_size=3584, hidden_act="silu", intermediate_size=3420,
                          num_heads=16, in_channels=3, patch_size=14, spatial_merge_size=2,
                          temporal_patch_size=2, tokens_per_second=4, window_size=112,
                          out_hidden_size=3584, fullatt_block_indexes=[7, 15, 23, 31],
                          initializer_range=0.02)


def _mrope(c):
    # "BC: if there is a 'type' field, move it to 'rope_type'", mrope being default rope
    rs = c.get("rope_scaling")
    if isinstance(rs, dict) and "type" in rs:
        if rs["type"] == "mrope":
            rs["type"] = "default"
        rs["rope_type"] = rs["type"]


def _vision_config(c, defaults, model_type):
    vc = dict(c.get("vision_config") or {})
    for k, v in defaults.items():
        vc.setdefault(k, copy.deepcopy(v))
    vc["model_type"] = model_type
    c["vision_config"] = vc


def _qwen2_5_vl_configs(c):
    _vision_config(c, _QWEN2_5_VL_VISION, "qwen2_5_vl")
    tc = c.get("text_config")
    if tc is None:
        tc = {k: copy.deepcopy(v) for k, v in c.items()
              if k not in ("text_config", "vision_config", "image_token_id", "video_token_id")}
    c["text_config"] = complete(dict(tc, model_type="qwen2_5_vl_text"))


# Qwen3VLConfig (Qwen3-VL): text_config a Qwen3VLTextConfig (all defaults when absent),
# vision_config a Qwen3VLVisionConfig
_QWEN3_VL = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
                 vision_end_token_id=151653)

_QWEN3_VL_TEXT = dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016,
                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                      head_dim=128, hidden_act="silu", max_position_embeddings=128000,
                      initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True,
                      tie_word_embeddings=False, rope_theta=5000000.0, rope_scaling=None,
                      attention_bias=False, attention_dropout=0.0)

_QWEN3_VL_VISION = dict(depth=27, hidden_size=1152, hidden_act="gelu_pytorch_tanh",
                        intermediate_size=4304, num_heads=16, in_channels=3, patch_size=16,
                        spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=3584,
                        num_position_embeddings=2304, deepstack_visual_indexes=[8, 16, 24],
                        initializer_range=0.02)


def _qwen3_vl_configs(c):
    _vision_config(c, _QWEN3_VL_VISION, "qwen3_vl")
    c["text_config"] = complete(dict(c.get("text_config") or {}, model_type="qwen3_vl_text"))


# Qwen3VLMoeConfig (Qwen3-VL-MoE): Qwen3VLConfig's, text_config a Qwen3VLMoeTextConfig,
# vision_config a Qwen3VLMoeVisionConfig (Qwen3VLVisionConfig's defaults)
_QWEN3_VL_MOE_TEXT = dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632,
                          num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
                          hidden_act="silu", max_position_embeddings=128000,
                          initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True,
                          tie_word_embeddings=False, rope_theta=5000000.0, attention_bias=False,
                          attention_dropout=0.0, decoder_sparse_step=1,
                          moe_intermediate_size=1408, num_experts_per_tok=4, num_experts=60,
                          norm_topk_prob=True, mlp_only_layers=None, rope_scaling=None,
                          head_dim=None)


def _vl_moe_text(c):
    if not c.get("head_dim"):   # head_dim or hidden_size // num_attention_heads
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    if c.get("mlp_only_layers") is None:
        c["mlp_only_layers"] = []


def _qwen3_vl_moe_configs(c):
    _vision_config(c, _QWEN3_VL_VISION, "qwen3_vl_moe")
    c["text_config"] = complete(dict(c.get("text_config") or {},
                                     model_type="qwen3_vl_moe_text"))


# SmolVLMConfig and Idefics3Config (SmolVLM, SmolVLM2, Idefics3): text_config a CONFIG_MAPPING
# class by its model_type (llama when it has none), vision_config a SmolVLMVisionConfig
# (Idefics3VisionConfig: the same defaults)
_SMOLVLM = dict(use_cache=True, image_token_id=128257, tie_word_embeddings=False,
                scale_factor=2, pad_token_id=128002)

_SMOLVLM_VISION = dict(hidden_size=1152, intermediate_size=3072, num_hidden_layers=12,
                       num_attention_heads=16, num_channels=3, image_size=224, patch_size=32,
                       hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6,
                       attention_dropout=0.0, initializer_range=0.02)


def _smolvlm_configs(vision_type):
    def f(c):
        _vision_config(c, _SMOLVLM_VISION, vision_type)
        tc = dict(c.get("text_config") or {"rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                                            "pad_token_id": c["pad_token_id"]})
        tc.setdefault("model_type", "llama")
        if tc["model_type"] not in CLASSES:
            raise KeyError(tc["model_type"])
        c["text_config"] = complete(tc)
    return f


# Lfm2VlConfig (LFM2-VL): vision_config a Siglip2VisionConfig (its model_type given, as
# published); text_config an Lfm2Config, not mirrored (the projector reads its hidden_size
# only, which config.json has)
_LFM2_VL = dict(image_token_id=396, projector_hidden_act="gelu", projector_hidden_size=2560,
                projector_bias=True, downsample_factor=2, vision_feature_layer=-1,
                min_image_tokens=64, max_image_tokens=256, encoder_patch_size=16,
                use_image_special_tokens=True, do_image_splitting=True, min_tiles=2,
                max_tiles=10, tile_size=512, max_pixels_tolerance=2.0, use_thumbnail=True)

_SIGLIP2_VISION = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                       num_attention_heads=12, num_channels=3, num_patches=256, patch_size=16,
                       hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6,
                       attention_dropout=0.0)


def _lfm2_vl_configs(c):
    vc = c.get("vision_config")
    if not isinstance(vc, dict) or vc.get("model_type") != "siglip2_vision_model":
        raise KeyError("lfm2-vl's vision_config: only siglip2_vision_model is mirrored")
    _vision_config(c, _SIGLIP2_VISION, "siglip2_vision_model")


# what a flat config.json of these classes holds of its text_config's class (compare.py's
# omit_defaults leaves those keys out too), and the defaults of their vision_config
FLAT_TEXT = {"qwen2_5_vl": "qwen2_5_vl_text"}
VISION = {"qwen2_5_vl": _QWEN2_5_VL_VISION, "gemma4": _GEMMA4_VISION,
          "qwen3_vl": _QWEN3_VL_VISION, "qwen3_vl_moe": _QWEN3_VL_VISION,
          "mistral3": _PIXTRAL_VISION, "llama4": _LLAMA4_VISION,
          "smolvlm": _SMOLVLM_VISION, "idefics3": _SMOLVLM_VISION,
          "lfm2-vl": _SIGLIP2_VISION}

# model_type -> (defaults, derivations in the order the class's __init__ makes them)
CLASSES = {
    "llama": (_LLAMA, (_kv_heads, _head_dim, _rope_type)),
    "mistral": (_MISTRAL, (_kv_heads, _head_dim)),
    "qwen2": (_QWEN2, (_kv_heads, _qwen_layers, _rope_type)),
    "qwen3": (_QWEN3, (_kv_heads, _qwen_layers, _rope_type)),
    "gemma2": (_GEMMA2, (_gemma_layers(2),)),
    "gemma3_text": (_GEMMA3_TEXT, (_gemma3_layers, _rope_type)),
    "gemma3": (_GEMMA3, (_gemma3_text_config,)),
    "gemma4_text": (_GEMMA4_TEXT, (_gemma4_text,)),
    "gemma4": (_GEMMA4, (_gemma4_sub_configs,)),
    "gemma4_vision": (_GEMMA4_VISION, (_gemma4_vision,)),
    "gemma4_audio": (_GEMMA4_AUDIO, ()),
    "phi3": (_PHI3, (_kv_heads, _phi3_rope)),
    "smollm3": (_SMOLLM3, (_kv_heads, _smollm3_layers, _rope_type)),
    "granite": (_GRANITE, (_kv_heads, _rope_type)),
    "olmo2": (_OLMO2, (_kv_heads, _rope_type)),
    "mixtral": (_MIXTRAL, (_kv_heads, _head_dim)),
    "qwen2_moe": (_QWEN2_MOE, (_kv_heads, _moe_lists, _rope_type)),
    "qwen3_moe": (_QWEN3_MOE, (_kv_heads, _moe_lists, _rope_type)),
    "qwen3_next": (_QWEN3_NEXT, (_rope_type, _qwen3_next_layers)),
    "gpt_oss": (_GPT_OSS, (_kv_heads, _gpt_oss_layers)),
    "deepseek_v2": (_DEEPSEEK_V2, (_kv_heads, _deepseek_heads, _rope_type)),
    "deepseek_v3": (_DEEPSEEK_V3, (_kv_heads, _deepseek_heads, _rope_type)),
    "bert": (_BERT, ()),
    "xlm-roberta": (_XLM_ROBERTA, ()),
    "modernbert": (_MODERNBERT, ()),
    "mistral3": (_MISTRAL3, (_mistral3_text_config,)),
    "llama4_text": (_LLAMA4_TEXT, (_kv_heads, _head_dim, _rope_type, _llama4_text)),
    "llama4": (_LLAMA4, (_llama4_text_config,)),
    "olmo3": (_OLMO3, (_kv_heads, _rope_type, _olmo3_layers)),
    "seed_oss": (_SEED_OSS, (_kv_heads, _head_dim, _rope_type)),
    "exaone4": (_EXAONE4, (_rope_type, _exaone4_layers)),
    "cohere2": (_COHERE2, (_kv_heads, _rope_type, _cohere2)),
    "glm4": (_GLM4, (_rope_type,)),
    "ernie4_5": (_ERNIE4_5, (_kv_heads, _head_dim, _rope_type)),
    "apertus": (_APERTUS, (_kv_heads, _rope_type)),
    "hunyuan_v1_dense": (_HUNYUAN_V1_DENSE, (_kv_heads, _hunyuan_head)),
    "qwen2_5_vl_text": (_QWEN2_5_VL_TEXT, (_kv_heads, _qwen_layers, _mrope)),
    "qwen2_5_vl": (_QWEN2_5_VL, (_qwen2_5_vl_configs,)),
    "qwen3_vl_text": (_QWEN3_VL_TEXT, (_kv_heads, _rope_type)),
    "qwen3_vl": (_QWEN3_VL, (_qwen3_vl_configs,)),
    "qwen3_vl_moe_text": (_QWEN3_VL_MOE_TEXT, (_kv_heads, _vl_moe_text, _rope_type)),
    "qwen3_vl_moe": (_QWEN3_VL, (_qwen3_vl_moe_configs,)),
    "smolvlm": (_SMOLVLM, (_smolvlm_configs("smolvlm_vision"),)),
    "idefics3": (_SMOLVLM, (_smolvlm_configs("idefics3_vision"),)),
    "lfm2-vl": (_LFM2_VL, (_lfm2_vl_configs,)),

}


def complete(config, path=""):
    """config.json's dict with its class's defaults and derived values, as to_dict() has it."""
    c = dict(config)
    entry = CLASSES.get(c.get("model_type"))
    if entry is not None:
        defaults, derive = entry
        for k, v in defaults.items():
            if k not in c:
                c[k] = copy.deepcopy(v)   # a dict default (Apertus' rope_scaling) is its own
        for f in derive:
            f(c)
    return c
