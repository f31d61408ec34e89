/*
 * hf_mmproj_registry.c - tfs_hf_mmprojs[], the projector classes of mmproj.gguf (hf_mmproj.h):
 * one row per MmprojModel subclass of llama.cpp de3ff81's converter, each defined in its own
 * file, as tfs_hf_archs[] (hf_registry.c) is for the text models.  Its order is the order a
 * refusal lists them in; a class name is looked up here only.
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <string.h>

extern const tfs_hf_mmproj_class tfs_hf_mmproj_gemma3;                   /* hf_mmproj_gemma3.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_gemma4;                   /* hf_mmproj_gemma4.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_qwen25vl;               /* hf_mmproj_qwen25vl.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_qwen3vl;                 /* hf_mmproj_qwen3vl.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_qwen35;                  /* hf_mmproj_qwen3vl.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_pixtral;                 /* hf_mmproj_pixtral.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_llama4;                   /* hf_mmproj_llama4.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_smolvlm;                 /* hf_mmproj_smolvlm.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_lfm2vl;                   /* hf_mmproj_lfm2vl.c */
extern const tfs_hf_mmproj_class tfs_hf_mmproj_internvl;               /* hf_mmproj_internvl.c */

const tfs_hf_mmproj_class *const tfs_hf_mmprojs[] = {
	&tfs_hf_mmproj_gemma3,
	&tfs_hf_mmproj_gemma4,
	&tfs_hf_mmproj_qwen25vl,
	&tfs_hf_mmproj_qwen3vl,
	&tfs_hf_mmproj_qwen35,
	&tfs_hf_mmproj_pixtral,
	&tfs_hf_mmproj_llama4,
	&tfs_hf_mmproj_smolvlm,
	&tfs_hf_mmproj_lfm2vl,
	&tfs_hf_mmproj_internvl,
	NULL,
};

const tfs_hf_mmproj_class *tfs_hf_mmproj_find(const char *cls)
{
	for (const tfs_hf_mmproj_class *const *r = tfs_hf_mmprojs; cls && *r; r++)
		for (const char *const *c = (*r)->classes; *c; c++)
			if (!strcmp(*c, cls))
				return *r;
	return NULL;
}

void tfs_hf_mmproj_list(char *out, size_t cap)
{
	size_t k = 0;
	if (cap)
		out[0] = 0;
	for (const tfs_hf_mmproj_class *const *r = tfs_hf_mmprojs; *r && k < cap; r++)
		for (const char *const *c = (*r)->classes; *c && k < cap; c++)
			k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? ", " : "", *c);
}
