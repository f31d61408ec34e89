/*
 * qplan_ftype.c - llama.cpp's file types (enum llama_ftype) by llama-quantize's names, and
 * the tensor type each one starts from (qplan.h).
 */
#include "qplan.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
	const char *name;
	int ftype;
} ftype_name;

/* llama-quantize's QUANT_OPTIONS, its order (COPY left out: it is not a quantization). */
static const ftype_name FTYPES[] = {
	{ "Q1_0", TFS_FTYPE_Q1_0 }, { "Q2_0", TFS_FTYPE_Q2_0 },
	{ "Q4_0", TFS_FTYPE_Q4_0 }, { "Q4_1", TFS_FTYPE_Q4_1 },
	{ "MXFP4_MOE", TFS_FTYPE_MXFP4_MOE }, { "Q5_0", TFS_FTYPE_Q5_0 },
	{ "Q5_1", TFS_FTYPE_Q5_1 }, { "IQ2_XXS", TFS_FTYPE_IQ2_XXS },
	{ "IQ2_XS", TFS_FTYPE_IQ2_XS }, { "IQ2_S", TFS_FTYPE_IQ2_S },
	{ "IQ2_M", TFS_FTYPE_IQ2_M }, { "IQ1_S", TFS_FTYPE_IQ1_S },
	{ "IQ1_M", TFS_FTYPE_IQ1_M }, { "TQ1_0", TFS_FTYPE_TQ1_0 },
	{ "TQ2_0", TFS_FTYPE_TQ2_0 }, { "Q2_K", TFS_FTYPE_Q2_K },
	{ "Q2_K_S", TFS_FTYPE_Q2_K_S }, { "IQ3_XXS", TFS_FTYPE_IQ3_XXS },
	{ "IQ3_S", TFS_FTYPE_IQ3_S }, { "IQ3_M", TFS_FTYPE_IQ3_M },
	{ "Q3_K", TFS_FTYPE_Q3_K_M }, { "IQ3_XS", TFS_FTYPE_IQ3_XS },
	{ "Q3_K_S", TFS_FTYPE_Q3_K_S }, { "Q3_K_M", TFS_FTYPE_Q3_K_M },
	{ "Q3_K_L", TFS_FTYPE_Q3_K_L }, { "IQ4_NL", TFS_FTYPE_IQ4_NL },
	{ "IQ4_XS", TFS_FTYPE_IQ4_XS }, { "Q4_K", TFS_FTYPE_Q4_K_M },
	{ "Q4_K_S", TFS_FTYPE_Q4_K_S }, { "Q4_K_M", TFS_FTYPE_Q4_K_M },
	{ "Q5_K", TFS_FTYPE_Q5_K_M }, { "Q5_K_S", TFS_FTYPE_Q5_K_S },
	{ "Q5_K_M", TFS_FTYPE_Q5_K_M }, { "Q6_K", TFS_FTYPE_Q6_K },
	{ "Q8_0", TFS_FTYPE_Q8_0 }, { "F16", TFS_FTYPE_F16 },
	{ "BF16", TFS_FTYPE_BF16 }, { "F32", TFS_FTYPE_ALL_F32 },
};
#define N_FTYPES (sizeof(FTYPES) / sizeof(FTYPES[0]))

int tfs_ftype_parse(const char *name)
{
	if (!name || !*name)
		return -1;
	for (size_t i = 0; i < N_FTYPES; i++)
		if (!strcasecmp(FTYPES[i].name, name))
			return FTYPES[i].ftype;
	/* a number, as std::stoi reads it: leading blanks, a sign, digits, anything after */
	char *end;
	long v = strtol(name, &end, 10);
	if (end == name)
		return -1;
	for (size_t i = 0; i < N_FTYPES; i++)
		if (FTYPES[i].ftype == v)
			return FTYPES[i].ftype;
	return -1;
}

const char *tfs_ftype_name(int ftype)
{
	const char *alias[] = { "Q3_K", "Q4_K", "Q5_K" };
	for (size_t i = 0; i < N_FTYPES; i++) {
		bool is_alias = false;
		for (size_t k = 0; k < 3; k++)
			is_alias |= !strcmp(FTYPES[i].name, alias[k]);
		if (FTYPES[i].ftype == ftype && !is_alias)
			return FTYPES[i].name;
	}
	return NULL;
}

int tfs_ftype_list(tfs_buf *out)
{
	for (size_t i = 0; i < N_FTYPES; i++)
		if (tfs_buf_printf(out, "%s%s", i ? ", " : "", FTYPES[i].name))
			return TFS_E_NOMEM;
	return 0;
}

int tfs_ftype_base_dtype(int ftype)
{
	switch (ftype) {
	case TFS_FTYPE_Q4_0: return TFS_DT_Q4_0;
	case TFS_FTYPE_Q4_1: return TFS_DT_Q4_1;
	case TFS_FTYPE_Q5_0: return TFS_DT_Q5_0;
	case TFS_FTYPE_Q5_1: return TFS_DT_Q5_1;
	case TFS_FTYPE_Q8_0: return TFS_DT_Q8_0;
	case TFS_FTYPE_F16: return TFS_DT_F16;
	case TFS_FTYPE_BF16: return TFS_DT_BF16;
	case TFS_FTYPE_ALL_F32: return TFS_DT_F32;
	case TFS_FTYPE_Q1_0: return TFS_DT_Q1_0;
	case TFS_FTYPE_Q2_0: return TFS_DT_Q2_0;
	case TFS_FTYPE_MXFP4_MOE: return TFS_DT_MXFP4;
	case TFS_FTYPE_Q2_K_S: case TFS_FTYPE_Q2_K: return TFS_DT_Q2_K;
	case TFS_FTYPE_IQ3_XS: return TFS_DT_IQ3_S;
	case TFS_FTYPE_Q3_K_S: case TFS_FTYPE_Q3_K_M: case TFS_FTYPE_Q3_K_L: return TFS_DT_Q3_K;
	case TFS_FTYPE_Q4_K_S: case TFS_FTYPE_Q4_K_M: return TFS_DT_Q4_K;
	case TFS_FTYPE_Q5_K_S: case TFS_FTYPE_Q5_K_M: return TFS_DT_Q5_K;
	case TFS_FTYPE_Q6_K: return TFS_DT_Q6_K;
	case TFS_FTYPE_TQ1_0: return TFS_DT_TQ1_0;
	case TFS_FTYPE_TQ2_0: return TFS_DT_TQ2_0;
	case TFS_FTYPE_IQ2_XXS: return TFS_DT_IQ2_XXS;
	case TFS_FTYPE_IQ2_XS: return TFS_DT_IQ2_XS;
	case TFS_FTYPE_IQ2_S: return TFS_DT_IQ2_XS;
	case TFS_FTYPE_IQ2_M: return TFS_DT_IQ2_S;
	case TFS_FTYPE_IQ3_XXS: return TFS_DT_IQ3_XXS;
	case TFS_FTYPE_IQ1_S: return TFS_DT_IQ1_S;
	case TFS_FTYPE_IQ1_M: return TFS_DT_IQ1_M;
	case TFS_FTYPE_IQ4_NL: return TFS_DT_IQ4_NL;
	case TFS_FTYPE_IQ4_XS: return TFS_DT_IQ4_XS;
	case TFS_FTYPE_IQ3_S: case TFS_FTYPE_IQ3_M: return TFS_DT_IQ3_S;
	default: return -1;
	}
}
