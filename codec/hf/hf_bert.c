/*
 * hf_bert.c - BERT encoders as llama.cpp's converter (de3ff81, conversion/bert.py) writes
 * them: BertModel (all-MiniLM, BGE) and XLMRobertaModel (BGE-M3, multilingual-e5), both
 * architecture "bert".
 *
 *  - tensors (BertModel.filter_tensors): "bert." dropped in front, LayerNorm's old
 *    gamma/beta named weight/bias; embeddings.position_ids, the pooler and the MLM/NSP heads
 *    (cls.predictions, cls.seq_relationship) skipped; encoder.layer.N.* mapped as gguf-py's
 *    TensorNameMap does for MODEL_ARCH.BERT; position_embd and token_types stay F32;
 *  - keys: TextModel's, then attention.causal false, pooling_type from sentence-transformers'
 *    modules.json (_try_set_pooling_type), classifier.output_labels from id2label unless it
 *    is AutoConfig's dummy pair;
 *  - vocabulary: hf_vocab.c's "bert" (get_vocab_base over a WordPiece tokenizer.json,
 *    tokens in phantom-space form); its check hash by WordPiece (hf_wordpiece.c);
 *  - defaults: transformers 4.57's BertConfig.
 * XLMRobertaModel: the same, after "roberta." (and jina's ".parametrizations.") dropped; the
 * position embeddings start after pad_token_id: position_embd is their rows from
 * pad_token_id + 1 on (read as a slice) and the context length max_position_embeddings less
 * that; the vocabulary is sentencepiece.bpe.model's (hf_vocab.c's "xlmr": "t5" tokens in
 * fairseq's order, the precompiled charsmap).  jina-embeddings-v3's LoRA adapters are refused.
 * The reverse view (hf_export.h): each row's names back; BERT's refuses a "t5" vocabulary,
 * XLM-R's takes only that one, puts the position rows the converter cut back as zeros (their
 * values are not in the GGUF) and writes pad_token_id and max_position_embeddings back.
 */
#include "hf_plan_impl.h"
#include "hf_names.h"
#include "hf_export.h"
#include "hf_vocab_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       VOC = TFS_HF_D_VOCAB, NO = TFS_HF_D_NONE, HK = TFS_HF_D_HOOK };
enum { XN = TFS_HF_XF_NONE };

/* gguf-py's TensorNameMap for BERT, after the rename below */
static const tfs_hf_name bert_globals[] = {
	{ "embeddings.word_embeddings", "token_embd", VOC, H, XN, true },
	{ "embeddings.position_embeddings", "position_embd", HK, H, XN, true },
	{ "embeddings.token_type_embeddings", "token_types", HK, H, XN, true },
	{ "embeddings.LayerNorm", "token_embd_norm", H, NO, XN, true },
};

static const tfs_hf_name bert_blocks[] = {
	{ "attention.self.query", "attn_q", Q, H, XN, true },
	{ "attention.self.key", "attn_k", KV, H, XN, true },
	{ "attention.self.value", "attn_v", KV, H, XN, true },
	{ "attention.output.dense", "attn_output", H, Q, XN, true },
	{ "attention.output.LayerNorm", "attn_output_norm", H, NO, XN, true },
	{ "intermediate.dense", "ffn_up", FF, H, XN, true },
	{ "output.dense", "ffn_down", H, FF, XN, true },
	{ "output.LayerNorm", "layer_output_norm", H, NO, XN, true },
};

/* ==== keys ==== */

/* _try_set_pooling_type: modules.json's first *Pooling module, its config.json's mode
 * (EmbeddingGemma's too, hf_egemma.c). */
int tfs_hf_pooling_key(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	static const struct { const char *flag, *mode; uint32_t type; } modes[] = {
		{ "pooling_mode_mean_tokens", "mean", 1 },   /* gguf.PoolingType.MEAN */
		{ "pooling_mode_cls_token", "cls", 2 },      /* CLS */
		{ "pooling_mode_lasttoken", "lasttoken", 3 }, /* LAST */
	};
	json_t *mods = NULL, *pc = NULL, *m;
	const char *path = NULL;
	size_t i;
	int rc = tfs_hf_read_json(h->files, "modules.json", &mods, err);
	json_array_foreach(mods, i, m) {
		const char *type = json_string_value(json_object_get(m, "type"));
		size_t n = type ? strlen(type) : 0;
		if (n >= 7 && strcmp(type + n - 7, "Pooling") == 0) {
			path = json_string_value(json_object_get(m, "path"));
			if (!path)
				rc = tfs_error_set(err, TFS_E_FORMAT, "modules.json: module %zu (%s) "
						   "has no path", i, type);
			break;
		}
	}
	char name[512];
	if (!rc && path) {
		snprintf(name, sizeof name, "%s%sconfig.json", path, *path ? "/" : "");
		rc = tfs_hf_read_json(h->files, name, &pc, err);
		if (!rc && !json_is_object(pc))
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: %s", name, pc ? "not a JSON "
					   "object" : "no such file (modules.json names it)");
	}
	uint32_t type = 0;
	for (size_t k = 0; !rc && pc && !type && k < N(modes); k++)
		if (tfs_hf_py_true(json_object_get(pc, modes[k].flag)))
			type = modes[k].type;
	const char *mode = json_string_value(json_object_get(pc, "pooling_mode"));
	for (size_t k = 0; !rc && pc && !type && mode && k < N(modes); k++)
		if (strcmp(mode, modes[k].mode) == 0)
			type = modes[k].type;
	if (!rc && pc && !type)
		rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: a pooling mode other than mean, "
				   "cls and lasttoken (the converter supports only those)", name);
	if (!rc && type) {
		snprintf(name, sizeof name, "%s.pooling_type", h->arch->gguf);
		rc = tfs_hf_kvs_add_u32(l, name, type, err);
	}
	json_decref(mods);
	json_decref(pc);
	return rc;
}

/* BertModel.__init__'s cls_out_labels: id2label (int keys, as PretrainedConfig keeps them)
 * unless it is AutoConfig's dummy {0: "LABEL_0", 1: ...}; written sorted by id. */
static int labels_key(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	const json_t *labels = json_object_get(h->root, "id2label");
	size_t n = json_is_object(labels) ? json_object_size(labels) : 0;
	if (!n)
		return 0;
	const char **s = calloc(n, sizeof *s);
	long long *id = calloc(n, sizeof *id);
	size_t k = 0;
	int rc = s && id ? 0 : tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)labels, key, v) {
		char *end;
		errno = 0;
		long long x = rc ? 0 : strtoll(key, &end, 10);
		if (rc)
			break;
		if (errno || end == key || *end || !json_is_string(v)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: id2label \"%s\": not an integer id "
					   "with a label text", h->where, key);
			break;
		}
		size_t j = k++;   /* insertion sort by id */
		for (; j > 0 && id[j - 1] > x; j--) {
			id[j] = id[j - 1];
			s[j] = s[j - 1];
		}
		id[j] = x;
		s[j] = json_string_value(v);
	}
	bool dummy = n == 2 && id[0] == 0 && strcmp(s[0], "LABEL_0") == 0;
	if (!rc && !dummy) {
		char name[128];
		snprintf(name, sizeof name, "%s.classifier.output_labels", h->arch->gguf);
		size_t *len = calloc(n, sizeof *len);
		for (size_t j = 0; len && j < n; j++)
			len[j] = strlen(s[j]);
		rc = len ? tfs_hf_kvs_add_arr_str(l, name, s, len, n, err)
			 : tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
		free(len);
	}
	free(s);
	free(id);
	return rc;
}

/* BertModel.set_gguf_parameters after TextModel's (NomicBertModel's and ModernBertModel's
 * too: hf_nomic.c, hf_modernbert.c) */
int tfs_hf_bert_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	char name[128];
	snprintf(name, sizeof name, "%s.attention.causal", h->arch->gguf);
	int rc = tfs_hf_kvs_add_bool(l, name, false, err);
	if (!rc)
		rc = tfs_hf_pooling_key(l, h, err);
	return rc ? rc : labels_key(l, h, err);
}

/* ==== tensors ==== */

static bool starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* Drops n bytes at the front of name (a loop: see hf_qwen35.c's note on memmove). */
static void drop_front(char *name, size_t n)
{
	size_t k = 0;
	for (; name[k + n]; k++)
		name[k] = name[k + n];
	name[k] = 0;
}

/* BertModel.filter_tensors, then encoder.layer.N. as the plan's model.layers.N. (the
 * first part is the subclasses' too) */
bool tfs_hf_bert_rename(char *name, size_t cap, const hparams *h)
{
	(void)h;
	size_t n;
	if (starts(name, "bert."))
		drop_front(name, 5);
	n = strlen(name);
	if (n > 6 && strcmp(name + n - 6, ".gamma") == 0 && n + 2 < cap)
		memcpy(name + n - 6, ".weight", 8);
	else if (n > 5 && strcmp(name + n - 5, ".beta") == 0)
		memcpy(name + n - 5, ".bias", 6);
	if (!strcmp(name, "embeddings.position_ids") || !strcmp(name, "pooler.dense.weight") ||
	    !strcmp(name, "pooler.dense.bias") || starts(name, "cls.predictions") ||
	    starts(name, "cls.seq_relationship"))
		return false;
	if (starts(name, "encoder.layer.")) {   /* 14 bytes -> 13 */
		drop_front(name, 1);
		memcpy(name, "model.layers.", 13);
	}
	return true;
}

/* position_embd (max_position_embeddings rows) and token_types (type_vocab_size rows):
 * 2-D, hidden_size wide. */
int tfs_hf_bert_fix(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m,
		    const hparams *h, const char *shard, unsigned part, unsigned *parts,
		    tfs_error *err)
{
	(void)o, (void)part, (void)parts;
	if (m->rows != TFS_HF_D_HOOK)
		return 0;
	if (t->n_dims != 2 || t->ne[0] != h->hidden)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is not a matrix of "
				     "hidden_size (%lld) columns", shard, t->name,
				     (long long)h->hidden);
	return 0;
}

static const struct tfs_hf_hooks bert_hooks = { .rename = tfs_hf_bert_rename,
						.fix = tfs_hf_bert_fix };

/* ==== XLM-RoBERTa (XLMRobertaModel: BGE-M3, multilingual-e5) ==== */

/* _xlmroberta_tokenizer_init's offset: position embeddings start after pad_token_id; -1: none
 * (no pad_token_id) */
static long long xlmr_offset(const hparams *h)
{
	long long pad;
	const json_t *v = json_object_get(h->root, "pad_token_id");
	if (!v || json_is_null(v) || !tfs_hf_py_int(v, &pad))
		return -1;
	return pad + 1;
}

/* XLMRobertaModel.__init__: jina-embeddings-v3's LoRA adapters (another architecture and
 * files) refused; max_position_embeddings less the offset (TextModel's context length). */
static int xlmr_prepare(hparams *h, const tfs_model *st, tfs_error *err)
{
	(void)st;
	if (json_object_get(h->root, "lora_adaptations"))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: lora_adaptations: jina-embeddings-"
				     "v3's task adapters (architecture jina-bert-v3 and LoRA files) "
				     "are not supported for the GGUF view", h->where);
	long long off = xlmr_offset(h);
	const json_t *mp = json_object_get(h->root, "max_position_embeddings");
	long long n;
	if (off < 0 || !mp)
		return 0;
	if (!tfs_hf_py_int(mp, &n))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: max_position_embeddings is not an "
				     "integer", h->where);
	if (json_object_set_new(h->root, "max_position_embeddings", json_integer(n - off)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	return 0;
}

/* XLMRobertaModel.filter_tensors ("roberta." dropped, jina's .parametrizations.), then
 * BertModel's */
static bool xlmr_rename(char *name, size_t cap, const hparams *h)
{
	char *p;
	if (starts(name, "roberta."))
		drop_front(name, 8);
	if ((p = strstr(name, ".parametrizations."))) {
		drop_front(p + 1, 17);   /* ".parametrizations." -> "." */
		size_t n = strlen(name);
		if (n > 9 && strcmp(name + n - 9, ".original") == 0)
			name[n - 9] = 0;
	}
	return tfs_hf_bert_rename(name, cap, h);
}

/* BERT's checks; position_embd cut to its rows from the offset on (a slice read on the
 * fly: one group of all the rows, rows [offset, rows) of it). */
static int xlmr_fix(tfs_hf_tensor *o, const tfs_tensor *t, const tfs_hf_name *m,
		    const hparams *h, const char *shard, unsigned part, unsigned *parts,
		    tfs_error *err)
{
	int rc = tfs_hf_bert_fix(o, t, m, h, shard, part, parts, err);
	long long off = xlmr_offset(h);
	if (rc || off < 0 || strcmp(o->name, "position_embd.weight") != 0)
		return rc;
	if (off >= t->ne[1] || t->ne[1] > UINT32_MAX)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' has %lld rows: none after "
				     "pad_token_id + 1 (%lld), where the positions start", shard,
				     t->name, (long long)t->ne[1], off);
	o->ne[1] = t->ne[1] - off;
	o->slice = (tfs_hf_slice){ 1, (uint32_t)t->ne[1], (uint32_t)off, (uint32_t)o->ne[1],
				   false };
	return 0;
}

static const struct tfs_hf_hooks xlmr_hooks = { .prepare = xlmr_prepare, .rename = xlmr_rename,
						.fix = xlmr_fix };

/* ==== the reverse view (hf_export.h): BertModel's ==== */

/* A layer's tensor blk.N.X as BertModel's checkpoints name it, encoder.layer.N.<hf> (the
 * rename hook's model.layers.N. undone; the globals' names are the maps'): 1 when taken. */
static int bert_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	const char *sfx = strrchr(t->name, '.');
	unsigned long blk;
	const char *base;
	if (!tfs_hf_index_of(t->name, "blk.", &blk, &base) || !sfx)
		return 0;
	for (size_t k = 0; k < N(bert_blocks); k++) {
		const tfs_hf_name *e = &bert_blocks[k];
		size_t bn = (size_t)(sfx - base);
		if (strlen(e->gguf) != bn || memcmp(e->gguf, base, bn))
			continue;
		char buf[256];
		snprintf(buf, sizeof buf, "encoder.layer.%lu.%s%s", blk, e->hf, sfx);
		return tfs_hf_export_add_src(x, buf, i, XN, err) ? 1 : err->code;
	}
	return 0;
}

static bool is_t5(const tfs_hf_export *x)
{
	size_t n;
	const char *m = tfs_hf_xkv_str(x, "tokenizer.ggml.model", &n);
	return m && n == 2 && !memcmp(m, "t5", 2);
}

/* Classifier labels the converter would drop (hf_export_st.c); the pooling module is the
 * export's (modules.json, 1_Pooling/).  A "t5" vocabulary is XLM-RoBERTa's: its row's. */
static int bert_xtensors(tfs_hf_export *x, tfs_error *err)
{
	if (is_t5(x))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "tokenizer.ggml.model t5: "
				     "XLM-RoBERTa's vocabulary, not BertModel's");
	return tfs_hf_xlabels_check(x, err);
}

/* BertModel's keys back: TextModel's layer norm epsilon, the token type count, the
 * classifier's labels. */
static int bert_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	(void)gen;
	float eps;
	double n;
	if (!c)
		return 0;
	int bad = 0;
	if (tfs_hf_xkv_f32(x, ".attention.layer_norm_epsilon", &eps))
		bad |= json_object_set_new(c, "layer_norm_eps", json_real((double)eps));
	if (tfs_hf_xkv_num(x, "tokenizer.ggml.token_type_count", &n))
		bad |= json_object_set_new(c, "type_vocab_size", json_integer((json_int_t)n));
	return bad ? TFS_E_NOMEM : tfs_hf_xlabels(c, x);
}

/* ==== the reverse view: XLMRobertaModel's ==== */

/* The GGUF's offset of the positions, pad_token_id + 1 (its padding token id: config.json's
 * pad_token_id, which SpecialVocab wrote it from); 0 without one (config.json's pad_token_id
 * null then: no offset).  -1: not a token id. */
static long long xlmr_xoffset(const tfs_hf_export *x)
{
	double pad, n = 0;
	uint32_t type;
	uint64_t ntok = 0, len;
	const uint8_t *data;
	if (!tfs_hf_xkv_num(x, "tokenizer.ggml.padding_token_id", &pad))
		return 0;
	if (tfs_hf_xkv_arr(x, "tokenizer.ggml.tokens", &type, &ntok, &data, &len))
		n = (double)ntok;
	return pad >= 0 && pad < n ? (long long)pad + 1 : -1;
}

/* BertModel's names, without the "roberta." some checkpoints have (the converter drops it:
 * BGE-M3's XLMRobertaModel has none); position_embd with the rows the converter cut before
 * pad_token_id + 1 put back as zeros (the GGUF has not their values; the converter cuts them
 * again). */
static int xlmr_xtensor(tfs_hf_export *x, size_t i, tfs_error *err)
{
	const tfs_tensor *t = tfs_model_tensor(x->m, i);
	if (strcmp(t->name, "position_embd.weight"))
		return bert_xtensor(x, i, err);
	long long off = xlmr_xoffset(x);
	if (off < 0 || t->n_dims != 2)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: %s", t->name, off < 0 ?
				     "tokenizer.ggml.padding_token_id is not a token id, so the "
				     "positions' offset is unknown" : "not a matrix");
	tfs_hf_xtensor *o = tfs_hf_export_add_src(x, "embeddings.position_embeddings.weight", i,
						  XN, err);
	if (!o)
		return err->code;
	o->ne[1] += off;
	o->rows += (uint64_t)off;
	o->zero_rows = (uint64_t)off;
	return 1;
}

/* A "t5" vocabulary only (XLM-RoBERTa's); a classifier's labels as BERT's. */
static int xlmr_xtensors(tfs_hf_export *x, tfs_error *err)
{
	if (!is_t5(x))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "not XLM-RoBERTa's \"t5\" vocabulary");
	return tfs_hf_xlabels_check(x, err);
}

/* BertModel's keys, and the offset of the positions: pad_token_id (the GGUF's padding
 * token, else null: none) and max_position_embeddings the context length plus the offset
 * (the converter subtracts it). */
static int xlmr_xconfig(json_t *c, json_t *gen, const tfs_hf_export *x)
{
	double pad, ctx;
	int rc = bert_xconfig(c, gen, x);
	if (rc || !c)
		return rc;
	if (!tfs_hf_xkv_num(x, "tokenizer.ggml.padding_token_id", &pad))
		return json_object_set_new(c, "pad_token_id", json_null()) ? TFS_E_NOMEM : 0;
	long long off = xlmr_xoffset(x);
	/* (the special ids' pad_token_id, unless the GGUF's order left it to the class: the
	 * offset needs it all the same) */
	if (off > 0 && json_object_set_new(c, "pad_token_id", json_integer(off - 1)))
		return TFS_E_NOMEM;
	if (off > 0 && tfs_hf_xkv_num(x, ".context_length", &ctx) &&
	    json_object_set_new(c, "max_position_embeddings", json_integer((json_int_t)ctx + off)))
		return TFS_E_NOMEM;
	return 0;
}

/* ==== the rows and their config classes ==== */

enum { DI = TFS_HF_DEF_INT, DR = TFS_HF_DEF_REAL, DN = TFS_HF_DEF_NULL };

/* BertConfig (4.57): what the converter reads of it */
static const tfs_hf_default bert_defaults[] = {
	{ "vocab_size", DI, 30522 }, { "max_position_embeddings", DI, 512 },
	{ "type_vocab_size", DI, 2 }, { "layer_norm_eps", DR, 1e-12 }, { "pad_token_id", DI, 0 },
	{ "classifier_dropout", DN, 0 }, { NULL, 0, 0 },
};

/* XLMRobertaConfig (4.57): BertConfig's, with pad_token_id 1 */
static const tfs_hf_default xlmr_defaults[] = {
	{ "vocab_size", DI, 30522 }, { "max_position_embeddings", DI, 512 },
	{ "type_vocab_size", DI, 2 }, { "layer_norm_eps", DR, 1e-12 }, { "pad_token_id", DI, 1 },
	{ "classifier_dropout", DN, 0 }, { NULL, 0, 0 },
};

const tfs_hf_arch tfs_hf_arch_bert = {
	TFS_HF_CLASSES("BertModel"), .gguf = "bert", TFS_HF_NAMES(bert_globals, bert_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS, .params = tfs_hf_bert_keys,
	TFS_HF_CONFIG("bert", bert_defaults), .vocab = TFS_HF_VOCAB_BERT, .hooks = &bert_hooks,
	.xtensor = bert_xtensor, .xtensors = bert_xtensors, .xconfig = bert_xconfig,
};

const tfs_hf_arch tfs_hf_arch_xlmr = {
	TFS_HF_CLASSES("XLMRobertaModel"), .gguf = "bert", TFS_HF_NAMES(bert_globals, bert_blocks),
	.flags = TFS_HF_ARCH_BASE_PARAMS, .params = tfs_hf_bert_keys,
	TFS_HF_CONFIG("xlm-roberta", xlmr_defaults), .vocab = TFS_HF_VOCAB_XLMR,
	.hooks = &xlmr_hooks, .xtensor = xlmr_xtensor, .xtensors = xlmr_xtensors,
	.xconfig = xlmr_xconfig,
};
