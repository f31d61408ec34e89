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
}

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


_text_shapes = make_model.tensor_shapes
_text_config = make_model.write_config


def tensor_shapes(s):
    t = _text_shapes(s)
    if "vision" not in s:
        return t
    for k in [k for k in t if not k.startswith("language_model.") and k != "lm_head.weight"]:
        del t[k]   # make_model.py's few stand-ins of the tower
    t.update(siglip_shapes(s))
    return t


def write_config(d, s):
    _text_config(d, s)
    if "vision" not in s:
        return
    p = os.path.join(d, "config.json")
    c = json.load(open(p))
    c["vision_config"] = dict(s["vision"], model_type="siglip_vision_model")
    with open(p, "w") as f:
        json.dump(c, f, indent=2)
    pre = dict(GEMMA3_PREPROCESSOR)
    pre.update(s.get("pre", {}))
    size = s["vision"]["image_size"]
    pre["size"] = {"height": size, "width": size}
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=2)
    if "proc" in s:
        with open(os.path.join(d, "processor_config.json"), "w") as f:
            json.dump(s["proc"], f, indent=2)


make_model.tensor_shapes = tensor_shapes
make_model.write_config = write_config
make_model.VARIANTS.update(VARIANTS)
make_model.VARIANTS.update(BIG)


def make(outdir, name):
    return make_model.make(outdir, name)


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
