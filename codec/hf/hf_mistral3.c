/*
 * hf_mistral3.c - the text model of Mistral3ForConditionalGeneration (Mistral Small 3.1 and
 * 3.2, Ministral 3), as llama.cpp de3ff81's converter writes it (conversion/mistral3.py:
 * Mistral3Model, whose impl Ministral3Model is a LlamaModel of GGUF architecture mistral3):
 *  - LlamaModel's tensors (Q/K rows permuted) under language_model.; the vision tower and
 *    the projector left out as TextModel leaves them;
 *  - LlamaModel's keys (vocab_size, rope dimensions) after TextModel's, with text_config
 *    merged to the top; when its model_type is ministral3, the yarn log multiplier
 *    (rope_parameters' mscale_all_dim) and the attention temperature scale
 *    (llama_4_scaling_beta);
 *  - LlamaModel's tokenizer.
 * Mistral3Config (transformers 4.57) completes text_config by its model_type (mistral:
 * MistralConfig's defaults); ministral3 is unknown to 4.57, whose AutoConfig then fails, and
 * the converter reads config.json as written.  Mistral 4 (text model_type mistral4, a
 * DeepseekV2Model in the converter) is refused.
 */
#include "hf_arch.h"

#include <stdio.h>
#include <string.h>

/* Ministral3Model.set_gguf_parameters' own, after LlamaModel's */
static int m3_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	const char *mt = json_string_value(json_object_get(h->root, "model_type"));
	if (mt && !strcmp(mt, "mistral4"))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: model_type mistral4 (Mistral 4): "
				     "the converter writes it as DeepSeek V2's mistral4, which the "
				     "GGUF view does not support", h->where);
	if (!mt || strcmp(mt, "ministral3"))
		return 0;
	const char *rt = json_string_value(json_object_get(h->rope, "rope_type"));
	if (!json_object_size(h->rope) || !rt || strcmp(rt, "yarn"))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: ministral3 without yarn "
				     "rope_parameters (the converter asserts them)", h->where);
	static const struct { const char *key, *suffix; } k[] = {
		{ "mscale_all_dim", "rope.scaling.yarn_log_multiplier" },
		{ "llama_4_scaling_beta", "attention.temperature_scale" },
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		json_t *v = json_object_get(h->rope, k[i].key);
		int rc = v ? tfs_hf_add_f32(l, h, k[i].suffix, v, k[i].key, err)
			   : tfs_error_set(err, TFS_E_FORMAT, "%s: rope_parameters has no \"%s\" "
					   "(the converter needs it for ministral3)", h->where,
					   k[i].key);
		if (rc)
			return rc;
	}
	return 0;
}

/* Mistral3Config: text_config by its own model_type, mistral when it has none */
static const tfs_hf_config_class configs[] = {
	{ "mistral3", (const tfs_hf_default[]){ { NULL, 0, 0 } }, "mistral", NULL, true },
	{ NULL, NULL, NULL, NULL, false },
};

const tfs_hf_arch tfs_hf_arch_mistral3 = {
	TFS_HF_CLASSES("Mistral3ForConditionalGeneration"), .gguf = "mistral3",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_llama_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_LLAMA_PARAMS, .params = m3_keys,
	.extra = tfs_hf_llama3_freqs, .configs = configs, .vocab = TFS_HF_VOCAB_LLAMA,
};
