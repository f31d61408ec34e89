/*
 * hf_plan_keys.c - the keys of the plan (hf_plan.c makes its tensors): general.architecture,
 * general.type, the general.* keys of the model card with the parameter count and gguf-py's
 * size label (MoE: "8x1.2M"), the hyperparameters (hf_params.c and the row's), the
 * tokenizer's (hf_vocab.h), after set_vocab's cut of Gemma 3's token_embd.
 */
#include "hf_plan_impl.h"

#include <stdio.h>
#include <string.h>

#include "hf_meta.h"
#include "hf_vocab.h"

uint64_t tfs_hf_plan_n_params(const tfs_hf_plan *p)
{
	uint64_t total = 0;
	for (size_t i = 0; i < p->nt; i++) {
		uint64_t nel = 1;
		for (uint32_t d = 0; d < p->t[i].n_dims; d++)
			nel *= (uint64_t)p->t[i].ne[d];
		total += nel;
	}
	return total;
}

/* Gemma3Model.modify_tensors' count of the tokenizer's rows without tokenizer.model:
 * len(tokenizer.json's model.vocab) + len(its added_tokens); 0 when it cannot say. */
static uint64_t tokjson_rows(const tfs_hf_files *files)
{
	tfs_hf_tok *t = NULL;
	tfs_error e = { 0 };
	uint64_t n = 0;
	if (tfs_hf_tok_read(&t, files, &e) == 0 && t && t->has_vocab)
		n = t->n + json_array_size(json_object_get(t->root, "added_tokens"));
	tfs_hf_tok_close(t);
	return n;
}

/* Gemma3Model.modify_tensors: token_embd cut to the tokenizer's rows: after a SentencePiece
 * vocabulary (tokenizer.ggml.model "llama") the count of its tokens, else tokenizer.json's
 * (tokjson_rows).  With no tokenizer keys (opts no_vocab) nothing is cut. */
static int trim_embd(tfs_hf_plan *p, const tfs_hf_files *files, const tfs_hf_kvs *vk,
		     tfs_error *err)
{
	long k = tfs_hf_kvs_find(vk, "tokenizer.ggml.tokens");
	long m = tfs_hf_kvs_find(vk, "tokenizer.ggml.model");
	if (!(p->row->flags & TFS_HF_ARCH_TRIM_EMBD) || k < 0 || m < 0 || vk->kv[k].len < 12)
		return 0;
	uint64_t n = 0;
	const tfs_hf_kv *model = &vk->kv[m];
	if (model->len == 8 + 5 && memcmp(model->data + 8, "llama", 5) == 0) {
		for (int b = 0; b < 8; b++)
			n |= (uint64_t)vk->kv[k].data[4 + b] << (8 * b);
	} else {
		n = tokjson_rows(files);
	}
	for (size_t i = 0; n && i < p->nt; i++) {
		tfs_hf_tensor *t = &p->t[i];
		if (strcmp(t->name, "token_embd.weight") || t->n_dims != 2 || (uint64_t)t->ne[1] <= n)
			continue;
		t->ne[1] = (int64_t)n;
		return tfs_dtype_nbytes(&t->nbytes, t->dtype, (uint64_t)t->ne[0] * n, err);
	}
	return 0;
}

/* gguf-py's size_label(total, shared, expert, expert_count): with stacked experts (MoE)
 * "8x1.2M" (the count: the stacked tensors' mean; the size: the shared parameters and one
 * expert's), else the parameter count's. */
static const char *size_label(char label[32], const tfs_hf_plan *p)
{
	uint64_t shared = 0, expert = 0, sum = 0, nexp = 0;
	for (size_t i = 0; i < p->nt; i++) {
		const tfs_hf_tensor *t = &p->t[i];
		uint64_t size = 1;
		for (uint32_t d = 0; d < t->n_dims; d++)
			size *= (uint64_t)t->ne[d];
		if (strstr(t->name, "_exps.") && t->n_dims >= 3) {
			/* numpy shape[-3] of a weight, shape[-2] of a bias */
			uint64_t count = (uint64_t)t->ne[strstr(t->name, ".bias") ? 1 : 2];
			expert += count ? size / count : 0;
			sum += count;
			nexp++;
		} else {
			shared += size;
		}
	}
	char pretty[32];
	if (!nexp || sum / nexp == 0) {
		tfs_hf_size_label(label, tfs_hf_plan_n_params(p));
		return label;
	}
	tfs_hf_size_label(pretty, shared + expert);
	snprintf(label, 32, "%llux%.12s", (unsigned long long)(sum / nexp), pretty);
	return label;
}

/* The keys in the converter's order: general.architecture, general.type, general.* of the
 * model card, the hyperparameters, general.quantization_version, the vocab (set_vocab). */
int tfs_hf_plan_keys(tfs_hf_plan *p, const tfs_hf_files *files, const hparams *h,
		     const char *cls, const tfs_hf_opts *o, tfs_error *err)
{
	tfs_hf_kvs *l = &p->kvs, vk = { 0 };
	char label[32];
	int rc = 0;
	/* set_vocab() first: Gemma 3 cuts token_embd to its size, which the parameter count
	 * of the general.* keys sees */
	if (!o->no_vocab)
		rc = tfs_hf_vocab_keys(&vk, files, cls, h->root, err);
	if (!rc)
		rc = trim_embd(p, files, &vk, err);
	if (rc || (rc = tfs_hf_kvs_add_str(l, "general.architecture", p->arch, err)))
		goto out;
	/* keys the class writes while it reads the tensors (Phi-3's attn_factor) */
	for (size_t i = 0; i < p->early.n && !rc; i++)
		rc = tfs_hf_kvs_add(l, p->early.kv[i].name, p->early.kv[i].type,
				    p->early.kv[i].data, p->early.kv[i].len, err);
	if (rc || (rc = tfs_hf_kvs_add_str(l, "general.type", "model", err)) ||
	    (rc = tfs_hf_meta_keys_label(l, files, h->file, o->dir_name ? o->dir_name : "model",
					 (int64_t)tfs_hf_plan_n_params(p), size_label(label, p), err)) ||
	    (rc = tfs_hf_param_keys(l, h, err)) ||
	    (rc = tfs_hf_kvs_add_u32(l, "general.quantization_version", GGML_QUANT_VERSION,
				     err)))
		goto out;
	for (size_t i = 0; i < vk.n && !rc; i++)
		rc = tfs_hf_kvs_add(l, vk.kv[i].name, vk.kv[i].type, vk.kv[i].data, vk.kv[i].len,
				    err);
out:
	tfs_hf_kvs_free(&vk);
	return rc;
}
