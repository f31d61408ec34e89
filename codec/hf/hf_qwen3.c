/*
 * hf_qwen3.c - Qwen3 (Qwen3ForCausalLM, and Qwen3Model: Qwen3-Embedding's base-model
 * checkpoints), GGUF architecture qwen3, as llama.cpp de3ff81's converter writes them
 * (conversion/qwen.py: Qwen3Model, one class for both names, a Qwen2Model):
 *
 *  - tensors: Llama's unpermuted with per-head q/k norms; a Qwen3Model checkpoint's names
 *    are the base model's (embed_tokens, layers.N.*, norm: no "model." in front, which
 *    gguf-py's map names too; Qwen2Model adds it for "Qwen2Model" only), and it has no
 *    lm_head (the GGUF has no output.weight: llama.cpp uses token_embd);
 *  - keys: TextModel's, then pooling_type from sentence-transformers' modules.json
 *    (Qwen2Model's _try_set_pooling_type: Qwen3-Embedding's last-token pooling; none for a
 *    causal LM's repo, which has no modules.json);
 *  - a reranker (Qwen3-Reranker) is refused (qwen3_prepare);
 *  - config: Qwen3Config; vocabulary Qwen2Model's (tokenizer.model, else gpt2).
 * The reverse view shows a qwen3 GGUF as Qwen3ForCausalLM (the first row: the converter's
 * same class, the same file back), a pooling type as modules.json (hf_export_st.c).
 */
#include "hf_arch.h"
#include "hf_export.h"
#include "hf_keys.h"
#include "hf_names.h"
#include "hf_plan_impl.h"

#include <stdlib.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };
enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL, DB = TFS_HF_DEF_BOOL,
       DKV = TFS_HF_DEF_KV_HEADS };

static const tfs_hf_name qwen3_blocks[] = {
	{ "input_layernorm", "attn_norm", H, NO, XN, true },
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, XN, true },
	{ "post_attention_layernorm", "ffn_norm", H, NO, XN, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
};

/* Qwen3Config */
static const tfs_hf_default qwen3_defaults[] = {
	{ "vocab_size", DI, 151936 }, { "num_key_value_heads", DKV, 32 },
	{ "head_dim", DI, 128 }, { "max_position_embeddings", DI, 32768 },
	{ "rms_norm_eps", DR, 1e-6 }, { "rope_theta", DR, 10000.0 }, { "rope_scaling", DN, 0 },
	{ "tie_word_embeddings", DB, 0 }, { NULL, 0, 0 },
};

/* Qwen3Model._is_qwen3_reranker: README.md with a "# Qwen3-Reranker" (or
 * "# Qwen3-VL-Reranker") heading, or "qwen3-reranker" / "qwen3-vl-reranker" in the repo
 * folder's name, _name_or_path, model_type or architectures[0]; such a checkpoint becomes a
 * rank model (its lm_head's "yes" and "no" rows as cls.output, pooling type rank, a rerank
 * chat template), which the view does not make: refused. */
static bool has_rerank_hint(const char *s, bool heading)
{
	static const char *const hints[] = { "qwen3-reranker", "qwen3-vl-reranker" };
	for (size_t k = 0; s && k < sizeof hints / sizeof *hints; k++)
		for (const char *p = s; (p = strcasestr(p, hints[k])) != NULL; p++)
			if (!heading || (p >= s + 2 && p[-1] == ' ' && p[-2] == '#'))
				return true;
	return false;
}

static int qwen3_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	(void)st;
	const char *where = h->files && h->files->where ? h->files->where : "";
	const char *base = strrchr(where, '/');
	json_t *archs = json_object_get(h->file, "architectures");
	const char *arch = json_string_value(json_array_get(archs, 0));
	const char *nop = json_string_value(json_object_get(h->root, "_name_or_path"));
	const char *type = json_string_value(json_object_get(h->root, "model_type"));
	bool rerank = has_rerank_hint(base ? base + 1 : where, false) ||
		has_rerank_hint(nop, false) || has_rerank_hint(type, false) ||
		has_rerank_hint(arch, false) ||
		(arch && strcasestr(arch, "sequenceclassification"));
	uint8_t *text = NULL;
	uint64_t len = 0;
	if (!rerank && h->files) {
		int rc = tfs_hf_read_optional(h->files, "README.md", &text, &len, err);
		if (rc)
			return rc;
		rerank = has_rerank_hint((const char *)text, true);
		free(text);
	}
	if (rerank)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: a Qwen3 reranker (the "
				     "converter makes a rank model of its yes/no rows): not "
				     "supported", h->where);
	return 0;
}

static const struct tfs_hf_hooks qwen3_hooks = { .prepare = qwen3_prepare, .keys_only = true };

/* Qwen3Model (Qwen3-Embedding): the base model's names (embed_tokens, layers.N.*, norm: no
 * "model." in front, which gguf-py's map names too) as the causal model's */
static bool qwen3_base_rename(char *name, size_t cap, const hparams *h)
{
	(void)h;
	if (strncmp(name, "model.", 6) != 0 && strncmp(name, "lm_head.", 8) != 0)
		tfs_hf_prepend(name, cap, "model.");   /* (one that does not fit maps to none) */
	return true;
}

static const struct tfs_hf_hooks qwen3_base_hooks = { .prepare = qwen3_prepare,
						       .rename = qwen3_base_rename };

/* Qwen2Model.set_gguf_parameters: pooling_type from modules.json (_try_set_pooling_type),
 * which an embedding repo (Qwen3-Embedding) has */
const tfs_hf_arch tfs_hf_arch_qwen3 = {
	TFS_HF_CLASSES("Qwen3ForCausalLM"), .gguf = "qwen3",
	TFS_HF_NAMES(tfs_hf_globals, qwen3_blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = tfs_hf_pooling_key, TFS_HF_CONFIG("qwen3", qwen3_defaults),
	.vocab = TFS_HF_VOCAB_SPM_GPT2, .hooks = &qwen3_hooks,
};

/* The converter's class of both (the reverse view shows a qwen3 GGUF as Qwen3ForCausalLM,
 * the row above: the same file back; this row's tensors without "model." for its own) */
const tfs_hf_arch tfs_hf_arch_qwen3_base = {
	TFS_HF_CLASSES("Qwen3Model"), .gguf = "qwen3",
	TFS_HF_NAMES(tfs_hf_globals, qwen3_blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = tfs_hf_pooling_key, TFS_HF_CONFIG("qwen3", qwen3_defaults),
	.vocab = TFS_HF_VOCAB_SPM_GPT2, .hooks = &qwen3_base_hooks,
	.xtensor = tfs_hf_export_xtensor_unprefixed,
};
