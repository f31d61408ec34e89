/*
 * hf_registry.c - tfs_hf_archs[], the architectures of the GGUF view (hf_arch.h): one row per
 * model class of llama.cpp de3ff81's converter, each defined in its own file.  Its order is
 * the order tfs_hf_class_name lists them in (tensorfs __hf_classes); a class name or a config
 * class's model_type is looked up here only.
 */
#include "hf_arch.h"
#include "hf_moe.h"
#include "hf_plan.h"
#include "hf_plan_impl.h"

#include <stdio.h>
#include <string.h>

extern const tfs_hf_arch tfs_hf_arch_llama, tfs_hf_arch_mistral, tfs_hf_arch_qwen2,
	tfs_hf_arch_gemma2, tfs_hf_arch_gemma3, tfs_hf_arch_phi3,
	tfs_hf_arch_smollm3, tfs_hf_arch_granite, tfs_hf_arch_olmo2;          /* hf_arch.c */
extern const tfs_hf_arch tfs_hf_arch_qwen3, tfs_hf_arch_qwen3_base;     /* hf_qwen3.c */
extern const tfs_hf_arch tfs_hf_arch_gemma4;                              /* hf_gemma4.c */
extern const tfs_hf_arch tfs_hf_arch_mixtral, tfs_hf_arch_qwen2moe,
	tfs_hf_arch_qwen3moe;                                                 /* hf_moe.c */
extern const tfs_hf_arch tfs_hf_arch_deepseek2, tfs_hf_arch_glm4moe;     /* hf_deepseek.c */
extern const tfs_hf_arch tfs_hf_arch_gptoss;                              /* hf_gptoss.c */
extern const tfs_hf_arch tfs_hf_arch_qwen35, tfs_hf_arch_qwen35moe;      /* hf_qwen35.c */
extern const tfs_hf_arch tfs_hf_arch_bert, tfs_hf_arch_xlmr;             /* hf_bert.c */
extern const tfs_hf_arch tfs_hf_arch_mistral3;                            /* hf_mistral3.c */
extern const tfs_hf_arch tfs_hf_arch_vllama3;                             /* hf_smolvlm.c */
extern const tfs_hf_arch tfs_hf_arch_minimax_m2;                          /* hf_minimax.c */
extern const tfs_hf_arch tfs_hf_arch_glm4moe_lite;                        /* hf_deepseek.c */
extern const tfs_hf_arch tfs_hf_arch_llama4;                              /* hf_llama4.c */
extern const tfs_hf_arch tfs_hf_arch_olmo3;                               /* hf_olmo3.c */
extern const tfs_hf_arch tfs_hf_arch_seed_oss;                            /* hf_seed_oss.c */
extern const tfs_hf_arch tfs_hf_arch_exaone4;                             /* hf_exaone4.c */
extern const tfs_hf_arch tfs_hf_arch_cohere2;                             /* hf_cohere2.c */
extern const tfs_hf_arch tfs_hf_arch_glm4;                                /* hf_glm4.c */
extern const tfs_hf_arch tfs_hf_arch_ernie4_5;                            /* hf_ernie.c */
extern const tfs_hf_arch tfs_hf_arch_apertus;                             /* hf_apertus.c */
extern const tfs_hf_arch tfs_hf_arch_arcee;                               /* hf_arcee.c */
extern const tfs_hf_arch tfs_hf_arch_hunyuan_dense;                       /* hf_hunyuan.c */
extern const tfs_hf_arch tfs_hf_arch_qwen3next;                           /* hf_qwen3next.c */
extern const tfs_hf_arch tfs_hf_arch_gemma_embedding;                    /* hf_egemma.c */
extern const tfs_hf_arch tfs_hf_arch_nomic_bert, tfs_hf_arch_nomic_bert_moe; /* hf_nomic.c */
extern const tfs_hf_arch tfs_hf_arch_modern_bert;                       /* hf_modernbert.c */
extern const tfs_hf_arch tfs_hf_arch_qwen2vl;                            /* hf_qwen2vl.c */
extern const tfs_hf_arch tfs_hf_arch_qwen3vl;                            /* hf_qwen3vl.c */
extern const tfs_hf_arch tfs_hf_arch_qwen3vlmoe;                      /* hf_qwen3vlmoe.c */

const tfs_hf_arch *const tfs_hf_archs[] = {
	&tfs_hf_arch_llama,
	&tfs_hf_arch_mistral,
	&tfs_hf_arch_qwen2,
	&tfs_hf_arch_qwen3,
	&tfs_hf_arch_qwen3_base,
	&tfs_hf_arch_gemma2,
	&tfs_hf_arch_gemma3,
	&tfs_hf_arch_phi3,
	&tfs_hf_arch_smollm3,
	&tfs_hf_arch_granite,
	&tfs_hf_arch_olmo2,
	&tfs_hf_arch_gemma4,
	&tfs_hf_arch_mixtral,
	&tfs_hf_arch_qwen2moe,
	&tfs_hf_arch_qwen3moe,
	&tfs_hf_arch_deepseek2,
	&tfs_hf_arch_glm4moe,
	&tfs_hf_arch_gptoss,
	&tfs_hf_arch_qwen35,
	&tfs_hf_arch_qwen35moe,
	&tfs_hf_arch_bert,
	&tfs_hf_arch_xlmr,
	&tfs_hf_arch_mistral3,
	&tfs_hf_arch_glm4moe_lite,
	&tfs_hf_arch_minimax_m2,
	&tfs_hf_arch_llama4,
	&tfs_hf_arch_olmo3,
	&tfs_hf_arch_seed_oss,
	&tfs_hf_arch_exaone4,
	&tfs_hf_arch_cohere2,
	&tfs_hf_arch_glm4,
	&tfs_hf_arch_ernie4_5,
	&tfs_hf_arch_apertus,
	&tfs_hf_arch_arcee,
	&tfs_hf_arch_hunyuan_dense,
	&tfs_hf_arch_qwen3next,
	&tfs_hf_arch_gemma_embedding,
	&tfs_hf_arch_nomic_bert,
	&tfs_hf_arch_nomic_bert_moe,
	&tfs_hf_arch_modern_bert,
	&tfs_hf_arch_qwen2vl,
	&tfs_hf_arch_qwen3vl,
	&tfs_hf_arch_qwen3vlmoe,
	&tfs_hf_arch_vllama3,
	NULL,
};

const tfs_hf_arch *tfs_hf_arch_find(const char *cls)
{
	for (const tfs_hf_arch *const *r = tfs_hf_archs; cls && *r; r++)
		for (const char *const *c = (*r)->classes; *c; c++)
			if (strcmp(*c, cls) == 0)
				return *r;
	return NULL;
}

const tfs_hf_arch *tfs_hf_arch_find_for(const char *cls, const json_t *config)
{
	for (const tfs_hf_arch *const *r = tfs_hf_archs; cls && *r; r++)
		for (const char *const *c = (*r)->classes; *c; c++)
			if (strcmp(*c, cls) == 0 && (!(*r)->takes || (*r)->takes(config)))
				return *r;
	return NULL;
}

/* (a class of two rows, by config.json: NomicBertModel's, listed once, by its first) */
const char *tfs_hf_class_name(size_t i)
{
	for (const tfs_hf_arch *const *r = tfs_hf_archs; *r; r++)
		for (const char *const *c = (*r)->classes; *c; c++)
			if (tfs_hf_arch_find(*c) == *r && i-- == 0)
				return *c;
	return NULL;
}

size_t tfs_hf_n_classes(void)
{
	size_t n = 0;
	while (tfs_hf_class_name(n))
		n++;
	return n;
}

const tfs_hf_config_class *tfs_hf_config_class_find(const char *model_type)
{
	for (const tfs_hf_arch *const *r = tfs_hf_archs; model_type && *r; r++)
		for (const tfs_hf_config_class *cc = (*r)->configs; cc && cc->model_type; cc++)
			if (strcmp(cc->model_type, model_type) == 0)
				return cc;
	return NULL;
}

/* Why the reverse view does not show row r (NULL: it does). */
static const char *not_shown(const tfs_hf_arch *r)
{
	if (!r->xtensor && r->moe && r->moe->tensor && !(r->flags & TFS_HF_ARCH_PASSES_EXPERTS))
		return "its own handling of the experts";
	if (!r->xtensor && r->hooks && !r->hooks->keys_only && !r->hooks->renames_back)
		return "its plan hooks, which rename, split or compute tensors";
	/* (an own vocabulary with a reverse: hf_export_json.c's by tokenizer.ggml.model, the
	 * row's xconfig for the rest: Gemma 4) */
	if (r->vocab == TFS_HF_VOCAB_OWN && !r->xconfig)
		return "its own tokenizer (its set_vocab hook)";
	if (r->flags & TFS_HF_ARCH_NO_EXPORT)
		return "what its config.json needs beyond TextModel's keys";
	return NULL;
}

/* The reverse view (hf_export.c) maps names one to one, undoes the permutations and
 * Gemma's norm shift, and unstacks a row's experts (its moe member's names); a row's plan
 * hooks that rename or compute tensors (hooks not keys_only: renames, slices) or its own
 * expert handling (moe->tensor, but for one that passes experts saved one by one through:
 * TFS_HF_ARCH_PASSES_EXPERTS) are undone only by the row's xtensor hook, so rows with
 * either and without it are not offered.  The row after `after` (NULL: the first). */
const tfs_hf_arch *tfs_hf_arch_of_gguf(const char *gguf, const tfs_hf_arch *after)
{
	const tfs_hf_arch *const *r = tfs_hf_archs;
	if (after)
		while (*r && *r != after)
			r++;
	for (r += after && *r ? 1 : 0; gguf && *r; r++)
		if (!not_shown(*r) && strcmp((*r)->gguf, gguf) == 0)
			return *r;
	return NULL;
}

const char *tfs_hf_arch_not_shown(const char *gguf, const tfs_hf_arch **row)
{
	for (const tfs_hf_arch *const *r = tfs_hf_archs; gguf && *r; r++)
		if (strcmp((*r)->gguf, gguf) == 0) {
			*row = *r;
			return not_shown(*r);
		}
	*row = NULL;
	return NULL;
}
