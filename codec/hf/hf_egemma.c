/*
 * hf_egemma.c - EmbeddingGemma (Gemma3TextModel: google/embeddinggemma-300m, GGUF
 * architecture gemma-embedding) as llama.cpp de3ff81's converter (conversion/gemma.py:
 * EmbeddingGemma, a Gemma3Model) writes it:
 *
 *  - tensors: the base model's names (embed_tokens, layers.N.*, norm: no "model." in front),
 *    named as gemma3's (every norm + 1, token_embd cut to the tokenizer's rows); the
 *    sentence-transformers Dense layers (2_Dense, 3_Dense) are the converter's only with
 *    --sentence-transformers-dense-modules, off by default: not written;
 *  - keys: TextModel's and Gemma3Model's, the sliding window config.json's own (transformers
 *    halves it for a bidirectional model; the converter writes the original back, in place, and
 *    refuses a config.json without it), then pooling_type from modules.json;
 *  - config: Gemma3TextConfig (model_type gemma3_text, hf_arch.c's row); vocabulary gemma3's.
 * The reverse view (hf_export.h): the maps' names without "model." (the base model's, as
 * embeddinggemma's checkpoints hold them), sliding_window, and the pooling module
 * (hf_export_st.c).
 */
#include "hf_plan_impl.h"
#include "hf_export.h"
#include "hf_names.h"

#include <stdlib.h>

#include <stdio.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE };
enum { XN = TFS_HF_XF_NONE, X1 = TFS_HF_XF_PLUS_ONE };

/* gguf-py's TensorNameMap for GEMMA_EMBEDDING, after the rename below */
static const tfs_hf_name globals[] = {
	{ "model.embed_tokens", "token_embd", VOC, H, XN, true },
	{ "model.norm", "output_norm", H, NO, X1, true },
};

static const tfs_hf_name blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, X1, true },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, X1, true },
	{ "pre_feedforward_layernorm", "ffn_norm", H, NO, X1, true },
	{ "post_feedforward_layernorm", "post_ffw_norm", H, NO, X1, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, X1, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, X1, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* Gemma3Model's keys, then EmbeddingGemma's: config.json's sliding_window (required; where
 * Gemma3Model wrote it, or last when sliding_window_pattern is 1), the pooling type. */
static int keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *sw = json_object_get(h->file, "sliding_window");
	if (!sw || json_is_null(sw))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: sliding_window not found in model "
				     "config - this is required for the model", h->where);
	int rc = tfs_hf_gemma3_keys(l, h, err);
	if (!rc)   /* written again in place, or last when Gemma3Model did not write it */
		rc = tfs_hf_add_u32(l, h, "attention.sliding_window", sw, "sliding_window", err);
	return rc ? rc : tfs_hf_pooling_key(l, h, err);
}

/* the base model's names as the causal model's (model. in front) */
static bool egemma_rename(char *name, size_t cap, const hparams *h)
{
	(void)h;
	if (strncmp(name, "model.", 6) != 0)
		tfs_hf_prepend(name, cap, "model.");   /* (one that does not fit maps to none) */
	return true;
}

static const struct tfs_hf_hooks hooks = { .rename = egemma_rename };

/* ==== the reverse view ==== */

/* (its tensors: tfs_hf_export_xtensor_unprefixed, the rename hook undone) */

/* Gemma3TextConfig's model_type (the class name's would be none), the sliding layers' rope
 * base (its default is gemma3_text's: written as the GGUF has it), bidirectional attention
 * (what makes transformers' Gemma3TextModel an encoder; the converter reads the window from
 * config.json itself). */
static int egemma_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	(void)gen;
	float swa;
	if (!c)
		return 0;
	int bad = json_object_set_new(c, "model_type", json_string("gemma3_text")) ||
		  json_object_set_new(c, "use_bidirectional_attention", json_true());
	if (!bad && tfs_hf_xkv_f32(x, ".rope.freq_base_swa", &swa))
		bad = json_object_set_new(c, "rope_local_base_freq", json_real((double)swa));
	return bad ? TFS_E_NOMEM : 0;
}

const tfs_hf_arch tfs_hf_arch_gemma_embedding = {
	TFS_HF_CLASSES("Gemma3TextModel"), .gguf = "gemma-embedding",
	TFS_HF_NAMES(globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS | TFS_HF_ARCH_TRIM_EMBD,
	.params = keys, .vocab = TFS_HF_VOCAB_GEMMA3, .hooks = &hooks, .xtensor = tfs_hf_export_xtensor_unprefixed,
	.xconfig = egemma_xconfig,
};
