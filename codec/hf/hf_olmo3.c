/*
 * hf_olmo3.c - OLMo 3 (Olmo3ForCausalLM), as llama.cpp de3ff81's converter writes it
 * (conversion/olmo.py: the class registers it to Olmo2Model, GGUF architecture olmo2):
 * OLMo 2's tensors and keys (tfs_hf_olmo2_blocks, tfs_hf_olmo2_keys: q/k norms over all heads,
 * post-attention and post-MLP norms; the sliding window and its per-layer pattern from
 * layer_types), TextModel's tokenizer (gpt2).  Olmo3Config (transformers 4.57) fills in a
 * sliding window of 4096 and layer_types (every fourth layer full attention), so a config.json
 * without them still gets both keys.
 */
#include "hf_arch.h"

/* Olmo3Config: the keys the converter reads */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 50304 }, { "num_key_value_heads", TFS_HF_DEF_KV_HEADS, 0 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 2048 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 500000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ "sliding_window", TFS_HF_DEF_INT, 4096 }, { NULL, 0, 0 },
};

/* Olmo3Config.__init__: layer_types, sliding_attention but every fourth layer */
static int post_init(json_t *c, const char *where, tfs_error *err)
{
	json_t *nl = json_object_get(c, "num_hidden_layers"), *lt = json_object_get(c, "layer_types");
	json_int_t n = json_integer_value(nl);
	if ((lt && !json_is_null(lt)) || !json_is_integer(nl) || n < 0 || n > 65536)
		return 0;   /* the size checks name a bad layer count */
	int bad = !(lt = json_array());
	for (json_int_t i = 0; !bad && i < n; i++)
		bad |= json_array_append_new(lt, json_string((i + 1) % 4 ? "sliding_attention"
								      : "full_attention"));
	bad |= !lt || json_object_set_new(c, "layer_types", lt);
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where) : 0;
}

const tfs_hf_arch tfs_hf_arch_olmo3 = {
	TFS_HF_CLASSES("Olmo3ForCausalLM"), .gguf = "olmo2",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_olmo2_blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = tfs_hf_olmo2_keys,
	.configs = (const tfs_hf_config_class[]){ { "olmo3", defaults, NULL, post_init, false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_GPT2,
};
