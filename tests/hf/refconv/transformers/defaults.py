"""What transformers 4.57's AutoConfig.from_pretrained(d).to_dict() adds to config.json for the
config classes of the tests' architectures: each class's __init__ defaults (facts read from
transformers' src/transformers/models/*/configuration_*.py, v4.57) and the values it derives
(head_dim, num_key_value_heads, ...). Keys present in config.json win, as in transformers. A
model_type 4.57 does not know (gemma4, qwen3_5, ...) makes real AutoConfig fail, and the
converter then reads config.json as it is: the same here (no entry).

Only the class's own parameters are listed, not PretrainedConfig's generic ones (return_dict,
id2label, ...), which the converter does not read for these architectures.
"""

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


# model_type -> (defaults, derivations in the order the class's __init__ makes them)
CLASSES = {
    "llama": (_LLAMA, (_kv_heads, _head_dim, _rope_type)),
    "mistral": (_MISTRAL, (_kv_heads, _head_dim)),
    "qwen2": (_QWEN2, (_kv_heads, _qwen_layers, _rope_type)),
    "qwen3": (_QWEN3, (_kv_heads, _qwen_layers, _rope_type)),
}


def complete(config, path=""):
    """config.json's dict with its class's defaults and derived values, as to_dict() has it."""
    c = dict(config)
    entry = CLASSES.get(c.get("model_type"))
    if entry is not None:
        defaults, derive = entry
        for k, v in defaults.items():
            if k not in c:
                c[k] = v
        for f in derive:
            f(c)
    return c
