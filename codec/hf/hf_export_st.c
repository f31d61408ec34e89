/*
 * hf_export_st.c - the sentence-transformers form of an embedding GGUF in the reverse view
 * (hf_export.h): modules.json and its pooling module's 1_Pooling/config.json, from
 * ARCH.pooling_type, which the converter (_try_set_pooling_type: tfs_hf_pooling_key in
 * hf_bert.c) reads back from them; and a classifier's labels (ARCH.classifier.output_labels)
 * as config.json's id2label, which BertModel.__init__ reads back.
 *
 * The GGUF keeps the pooling mode only: no Normalize or Dense modules (their layers are not
 * in it), no sentence_bert_config.json (sentence-transformers' Transformer module loads
 * without it, and the converter does not read it).
 */
#include "hf_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* gguf.PoolingType's MEAN, CLS and LAST: the modes the converter reads, each by the flag
 * it looks for first in the pooling module's config.json */
static const char *const pooling_flag[] = {
	NULL, "pooling_mode_mean_tokens", "pooling_mode_cls_token", "pooling_mode_lasttoken",
};

#define N_FLAGS (sizeof pooling_flag / sizeof pooling_flag[0])

/* every flag of sentence-transformers' Pooling module (its config.json's order) */
static const char *const st_flags[] = {
	"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
	"pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
	"pooling_mode_lasttoken",
};

static int dump(tfs_buf *b, json_t *o, tfs_error *err)
{
	char *t = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
	json_decref(o);
	int rc = !t || tfs_buf_printf(b, "%s\n", t);
	free(t);
	return rc ? tfs_error_set(err, TFS_E_NOMEM, "out of memory") : 0;
}

/* modules.json: the Transformer module at the repo's top, the Pooling module's folder */
static int make_modules(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	(void)x;
	json_t *a = json_pack("[{s:i, s:s, s:s, s:s}, {s:i, s:s, s:s, s:s}]",
			      "idx", 0, "name", "0", "path", "",
			      "type", "sentence_transformers.models.Transformer",
			      "idx", 1, "name", "1", "path", TFS_HF_ST_POOLING,
			      "type", "sentence_transformers.models.Pooling");
	return dump(b, a, err);
}

/* 1_Pooling/config.json: the hidden size and the GGUF's mode as its one true flag */
static int make_pooling(tfs_buf *b, const tfs_hf_export *x, tfs_error *err)
{
	double type = 0, h = 0;
	tfs_hf_xkv_num(x, ".pooling_type", &type);
	tfs_hf_xkv_num(x, ".embedding_length", &h);
	json_t *o = json_object();
	int bad = !o || json_object_set_new(o, "word_embedding_dimension",
					   json_integer((json_int_t)h));
	for (size_t k = 0; !bad && k < sizeof st_flags / sizeof st_flags[0]; k++)
		bad = json_object_set_new(o, st_flags[k], json_boolean(
						  !strcmp(st_flags[k], pooling_flag[(size_t)type])));
	if (!bad)
		bad = json_object_set_new(o, "include_prompt", json_true());
	if (bad) {
		json_decref(o);
		o = NULL;
	}
	return dump(b, o, err);
}

int tfs_hf_export_list_st(tfs_hf_export *x, tfs_error *err)
{
	double type;
	if (!tfs_hf_xkv_num(x, ".pooling_type", &type))
		return 0;
	if (type < 0 || type >= N_FLAGS || type != (double)(size_t)type ||
	    !pooling_flag[(size_t)type])
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s.pooling_type %g: the converter "
				     "writes mean (1), cls (2) and last (3) only, from "
				     "sentence-transformers' pooling module", x->arch, type);
	if (x->n_files + 2 > sizeof x->files / sizeof x->files[0])
		return tfs_error_set(err, TFS_E_NOMEM, "too many files");
	x->files[x->n_files] = "modules.json";
	x->make[x->n_files++] = make_modules;
	x->files[x->n_files] = TFS_HF_ST_POOLING "/config.json";
	x->make[x->n_files++] = make_pooling;
	return 0;
}

/* ==== classifier labels ==== */

#define TFS_HF_LABEL_MAX 512

int tfs_hf_xlabels_check(const tfs_hf_export *x, tfs_error *err)
{
	uint32_t type;
	uint64_t n, len, i = 0;
	const uint8_t *p;
	const char *first = NULL;
	size_t first_n = 0;
	if (!tfs_hf_xkv_arr(x, ".classifier.output_labels", &type, &n, &p, &len))
		return 0;
	for (; type == TFS_GGUF_STRING && i < n; i++) {
		size_t sn;
		const char *s = tfs_hf_xnext_str(&p, &len, &sn);
		if (!s || sn >= TFS_HF_LABEL_MAX || memchr(s, 0, sn))
			break;
		if (!i)
			first = s, first_n = sn;
	}
	if (!n || i < n || type != TFS_GGUF_STRING)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s.classifier.output_labels: not a "
				     "list of label texts (each under %d bytes)", x->arch,
				     TFS_HF_LABEL_MAX);
	/* BertModel.__init__ drops a pair whose first is LABEL_0 (AutoConfig's dummy) */
	if (n == 2 && first_n == 7 && !memcmp(first, "LABEL_0", 7))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s.classifier.output_labels: two "
				     "labels, the first LABEL_0: the converter takes such a pair "
				     "for AutoConfig's dummy and drops it", x->arch);
	return 0;
}

int tfs_hf_xlabels(json_t *c, const tfs_hf_export *x)
{
	uint32_t type;
	uint64_t n, len;
	const uint8_t *p;
	if (!tfs_hf_xkv_arr(x, ".classifier.output_labels", &type, &n, &p, &len) ||
	    type != TFS_GGUF_STRING)
		return 0;
	json_t *id2 = json_object(), *l2 = json_object();
	int bad = !id2 || !l2;
	for (uint64_t i = 0; !bad && i < n; i++) {
		size_t sn;
		const char *s = tfs_hf_xnext_str(&p, &len, &sn);
		char id[24], label[TFS_HF_LABEL_MAX];
		if (!s || sn >= sizeof label)
			break;   /* (none: tfs_hf_xlabels_check refused the export) */
		memcpy(label, s, sn);
		label[sn] = 0;
		snprintf(id, sizeof id, "%llu", (unsigned long long)i);
		bad = json_object_set_new(id2, id, json_string(label)) ||
		      json_object_set_new(l2, label, json_integer((json_int_t)i));
	}
	if (bad) {
		json_decref(id2);
		json_decref(l2);
		return TFS_E_NOMEM;
	}
	return json_object_set_new(c, "id2label", id2) || json_object_set_new(c, "label2id", l2)
	       ? TFS_E_NOMEM : 0;
}
