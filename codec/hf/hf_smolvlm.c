/*
 * hf_smolvlm.c - the text model of SmolVLMForConditionalGeneration and
 * Idefics3ForConditionalGeneration (SmolVLM, SmolVLM2, Idefics3), as llama.cpp de3ff81's
 * converter writes it: text_config names the class VLlama3ForCausalLM, a LlamaModel
 * (conversion/llama.py) of GGUF architecture llama:
 *  - LlamaModel's tensors (Q/K rows permuted) under model.text_model.: filter_tensors drops
 *    "text_model." (a rename hook here); the vision tower and the connector left out as
 *    TextModel leaves them (its projector: hf_mmproj_smolvlm.c);
 *  - LlamaModel's keys after TextModel's, text_config merged to the top; LlamaModel's
 *    tokenizer;
 *  - SmolVLMConfig and Idefics3Config complete text_config by its own model_type (llama when
 *    it has none).
 * A config.json whose text_config names no class is the converter's failure too (the top
 * class has no text model there): no row knows SmolVLMForConditionalGeneration itself.
 */
#include "hf_arch.h"
#include "hf_plan_impl.h"

#include <string.h>

/* LlamaModel.filter_tensors: name.replace("text_model.", "") */
static bool smolvlm_rename(char *name, size_t cap, const hparams *h)
{
	static const char drop[] = "text_model.";
	(void)cap, (void)h;
	char *at;
	while ((at = strstr(name, drop)))
		memmove(at, at + sizeof drop - 1, strlen(at + sizeof drop - 1) + 1);
	return true;
}

static const struct tfs_hf_hooks hooks = { .rename = smolvlm_rename };

/* LlamaConfig's num_attention_heads (32) in a llama text_config without one, which the
 * llama config class here leaves to config.json (SmolVLM2's config.json may lack it, and
 * the converter's LlamaConfig then has 32: its VLlama3 fix of that is the same 32) */
static int text_heads(json_t *obj, const char *where, tfs_error *err)
{
	json_t *tc = json_object_get(obj, "text_config");
	const char *mt = json_string_value(json_object_get(tc, "model_type"));
	if (!json_is_object(tc) || (mt && strcmp(mt, "llama")) ||
	    json_object_get(tc, "num_attention_heads"))
		return 0;
	if (json_object_set_new(tc, "num_attention_heads", json_integer(32)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where);
	return 0;
}

/* SmolVLMConfig and Idefics3Config (their own keys: none the text model reads) */
static const tfs_hf_default no_defaults[] = { { NULL, 0, 0 } };
static const tfs_hf_config_class configs[] = {
	{ "smolvlm", no_defaults, "llama", text_heads, true },
	{ "idefics3", no_defaults, "llama", text_heads, true },
	{ NULL, NULL, NULL, NULL, false },
};

const tfs_hf_arch tfs_hf_arch_vllama3 = {
	TFS_HF_CLASSES("VLlama3ForCausalLM"), .gguf = "llama",
	TFS_HF_NAMES(tfs_hf_globals, tfs_hf_llama_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_LLAMA_PARAMS,
	.extra = tfs_hf_llama3_freqs, .configs = configs, .vocab = TFS_HF_VOCAB_LLAMA,
	.hooks = &hooks,
};
