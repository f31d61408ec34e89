/*
 * hf_bpe.c - the name of a byte-level BPE tokenizer's pre-tokenizer (tokenizer.ggml.pre), as
 * llama.cpp's convert_hf_to_gguf.py finds it, without Python.
 *
 * The converter (get_vocab_base_pre) encodes a fixed check text with transformers'
 * AutoTokenizer, takes the sha256 of the ids' Python list text ("[128000, 198, ...]") and
 * looks it up in a table of hashes of known models.  Here:
 *   1. The normalizer + pre-tokenizer of tokenizer.json is looked up in hf_pre_table.h, which
 *      holds, per configuration, how Hugging Face tokenizers splits the check text (made once
 *      by tests/hf/gen_pre_table.js with the real library).
 *   2. Each piece is mapped to GPT-2's byte characters and run through the file's BPE (its
 *      vocab, merges by rank, ignore_merges), the ids go through the post-processor (or the
 *      one transformers' Llama/Gemma fast tokenizers build from add_bos_token/add_eos_token),
 *      and the hash is looked up in the converter's table (last match wins, as its run of
 *      `if`s does).
 *   3. Without an answer there, a configuration only one llama.cpp pre-tokenizer has names it.
 * The check text cannot be computed (and 3 decides) when an added token occurs in it (the
 * library would split there first), or the post-processor is one not handled here.
 */
#include "hf_vocab.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hf_pre_config {
	const char *name;        /* for messages; also step 3's key */
	const char *where;       /* the tokenizer.json it was taken from */
	const char *normalizer;  /* JSON ("null": none) */
	const char *pre;         /* JSON */
	const char *text;        /* the check text normalized; NULL: unchanged */
	const uint16_t *lens;    /* byte length of each piece */
	size_t n;
};

#include "hf_pre_table.h"

/* convert_hf_to_gguf.py get_vocab_base_pre (llama.cpp c392e50), in its order. */
static const struct {
	const char *hash, *name;
} known_pre[] = {
	/* meta-llama/Meta-Llama-3-8B */
	{ "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5", "llama-bpe" },
	/* deepseek-ai/deepseek-llm-7b-base */
	{ "049ecf7629871e3041641907f3de7c733e4dbfdc736f57d882ba0b0845599754", "deepseek-llm" },
	/* deepseek-ai/deepseek-coder-6.7b-base */
	{ "347715f544604f9118bb75ed199f68779f423cabb20db6de6f31b908d04d7821", "deepseek-coder" },
	/* tiiuae/falcon-7b */
	{ "8aeee3860c56296a157a1fe2fad249ec40aa59b1bb5709f4ade11c4e6fe652ed", "falcon" },
	/* tiiuae/Falcon3-7B-Base */
	{ "9d032fcbd5501f4a38150912590928bfb36091efb5df11b8e2124b0390e3fb1e", "falcon3" },
	/* BAAI/bge-small-en-v1.5 */
	{ "0876d13b50744004aa9aeae05e7b0647eac9d801b5ba4668afc01e709c15e19f", "bert-bge" },
	/* BAAI/bge-large-zh-v1.5 */
	{ "8e62295832751ca1e8f92f2226f403dea30dc5165e448b5bfa05af5340c64ec7", "bert-bge-large" },
	/* mosaicml/mpt-7b */
	{ "b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166", "mpt" },
	/* bigcode/starcoder2-3b */
	{ "35d91631860c815f952d711435f48d356ebac988362536bed955d43bfa436e34", "starcoder" },
	/* openai-community/gpt2 */
	{ "3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454", "gpt-2" },
	/* stabilityai/stablelm-2-zephyr-1_6b */
	{ "32d85c31273f8019248f2559fed492d929ea28b17e51d81d3bb36fff23ca72b3", "stablelm2" },
	/* smallcloudai/Refact-1_6-base */
	{ "6221ad2852e85ce96f791f476e0b390cf9b474c9e3d1362f53a24a06dc8220ff", "refact" },
	/* CohereForAI/c4ai-command-r-v01 */
	{ "9c2227e4dd922002fb81bde4fc02b0483ca4f12911410dee2255e4987644e3f8", "command-r" },
	/* Qwen/Qwen1.5-7B */
	{ "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea", "qwen2" },
	/* allenai/OLMo-1.7-7B-hf (the same hash as mpt: the later `if` wins) */
	{ "b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166", "olmo" },
	/* databricks/dbrx-base */
	{ "a8594e3edff7c29c003940395316294b2c623e09894deebbc65f33f1515df79e", "dbrx" },
	/* jinaai/jina-reranker-v1-tiny-en */
	{ "c7699093ba4255a91e702aa38a596aa81669f3525dae06c2953267dde580f448", "jina-v1-en" },
	/* jinaai/jina-embeddings-v2-base-en (the same hash as bert-bge) */
	{ "0876d13b50744004aa9aeae05e7b0647eac9d801b5ba4668afc01e709c15e19f", "jina-v2-en" },
	/* jinaai/jina-embeddings-v2-base-es */
	{ "171aeeedd6fb548d418a7461d053f11b6f1f1fc9b387bd66640d28a4b9f5c643", "jina-v2-es" },
	/* jinaai/jina-embeddings-v2-base-de */
	{ "27949a2493fc4a9f53f5b9b029c82689cfbe5d3a1929bb25e043089e28466de6", "jina-v2-de" },
	/* abacusai/Smaug-Llama-3-70B-Instruct */
	{ "c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d", "smaug-bpe" },
	/* LumiOpen/Poro-34B-chat */
	{ "c7ea5862a53e4272c035c8238367063e2b270d51faa48c0f09e9d5b54746c360", "poro-chat" },
	/* jinaai/jina-embeddings-v2-base-code */
	{ "7967bfa498ade6b757b064f31e964dddbb80f8f9a4d68d4ba7998fcf281c531a", "jina-v2-code" },
	/* THUDM/glm-4-9b-chat */
	{ "b6e8e1518dc4305be2fe39c313ed643381c4da5db34a98f6a04c093f8afbe99b", "chatglm-bpe" },
	/* THUDM/glm-4-9b-chat */
	{ "81d72c7348a9f0ebe86f23298d37debe0a5e71149e29bd283904c02262b27516", "chatglm-bpe" },
	/* LumiOpen/Viking-7B */
	{ "7fc505bd3104ca1083b150b17d088b59534ede9bde81f0dd2090967d7fe52cee", "viking" },
	/* core42/jais-13b */
	{ "b53802fb28e26d645c3a310b34bfe07da813026ec7c7716883404d5e0f8b1901", "jais" },
	/* WisdomShell/CodeShell-7B */
	{ "7b3e7548e4308f52a76e8229e4e6cc831195d0d1df43aed21ac6c93da05fec5f", "codeshell" },
	/* mistralai/Mistral-Nemo-Base-2407 */
	{ "63b97e4253352e6f357cc59ea5b583e3a680eaeaf2632188c2b952de2588485e", "tekken" },
	/* HuggingFaceTB/SmolLM-135M */
	{ "855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249", "smollm" },
	/* bigscience/bloom */
	{ "3c30d3ad1d6b64202cd222813e7736c2db6e1bd6d67197090fc1211fbc612ae7", "bloom" },
	/* TurkuNLP/gpt3-finnish-small */
	{ "bc01ce58980e1db43859146dc51b1758b3b88729b217a74792e9f8d43e479d21", "gpt3-finnish" },
	/* LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct */
	{ "4e2b24cc4770243d65a2c9ec19770a72f08cffc161adbb73fcbb6b7dd45a0aae", "exaone" },
	/* microsoft/phi-2 */
	{ "fcace8b9cac38ce847670c970cd5892031a753a1ef381abd1d9af00f713da085", "phi-2" },
	/* facebook/chameleon-7b */
	{ "60824e3c0d9401f89943cbb2fff727f0e2d4c545ba4df2d6e4f09a6db0f5b450", "chameleon" },
	/* sapienzanlp/Minerva-7B-base-v1.0 */
	{ "1431a23e583c97432bc230bff598d103ddb5a1f89960c8f1d1051aaa944d0b35", "minerva-7b" },
	/* sentence-transformers/stsb-roberta-base */
	{ "8b5a93ed704057481f240da0be7e7dca721d7f8f4755263b6807227a2cbeae65", "roberta-bpe" },
	/* ai-sage/GigaChat-20B-A3B-instruct */
	{ "ad851be1dba641f2e3711822f816db2c265f788b37c63b4e1aeacb9ee92de8eb", "gigachat" },
	/* Infinigence/Megrez-3B-Instruct */
	{ "d4c8f286ea6b520b3d495c4455483cfa2302c0cfcd4be05d781b6a8a0a7cdaf1", "megrez" },
	/* deepseek-ai/DeepSeek-V3 */
	{ "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5", "deepseek-v3" },
	/* deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B */
	{ "b3f499bb4255f8ca19fccd664443283318f2fd2414d5e0b040fbdd0cc195d6c5", "deepseek-r1-qwen" },
};

/* ==== growable id list ==== */

typedef struct {
	uint32_t *v;
	size_t n, cap;
} ids_t;

static int ids_push(ids_t *l, uint32_t id)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		uint32_t *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return TFS_E_NOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = id;
	return 0;
}

/* ==== configurations ==== */

/* A deep copy of j without the "trim_offsets" members (they change offsets only). */
static json_t *without_offsets(const json_t *j)
{
	json_t *c = json_deep_copy(j ? j : json_null());
	json_t *stack[64];
	size_t n = 0;
	if (c)
		stack[n++] = c;
	while (n) {
		json_t *x = stack[--n];
		if (json_is_object(x)) {
			json_object_del(x, "trim_offsets");
			const char *k;
			json_t *v;
			json_object_foreach(x, k, v)
				if ((json_is_object(v) || json_is_array(v)) && n < 64)
					stack[n++] = v;
		} else if (json_is_array(x)) {
			size_t i;
			json_t *v;
			json_array_foreach(x, i, v)
				if ((json_is_object(v) || json_is_array(v)) && n < 64)
					stack[n++] = v;
		}
	}
	return c;
}

static const struct hf_pre_config *find_config(const tfs_hf_tok *tok)
{
	json_t *nz = without_offsets(json_object_get(tok->root, "normalizer"));
	json_t *pre = without_offsets(json_object_get(tok->root, "pre_tokenizer"));
	const struct hf_pre_config *found = NULL;
	for (size_t i = 0; nz && pre && !found && i < sizeof hf_pre_configs / sizeof *hf_pre_configs;
	     i++) {
		const struct hf_pre_config *c = &hf_pre_configs[i];
		json_t *cn = json_loads(c->normalizer, JSON_DECODE_ANY, NULL);
		json_t *cp = json_loads(c->pre, 0, NULL);
		json_t *cn2 = without_offsets(cn), *cp2 = without_offsets(cp);
		if (cn2 && cp2 && json_equal(cn2, nz) && json_equal(cp2, pre))
			found = c;
		json_decref(cn);
		json_decref(cp);
		json_decref(cn2);
		json_decref(cp2);
	}
	json_decref(nz);
	json_decref(pre);
	return found;
}

/* ==== byte-level BPE ==== */

/* GPT-2's bytes_to_unicode: the character each byte is written as. */
static uint32_t byte_char(uint8_t b)
{
	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174))
		return b;
	/* the others, in order, from 256 */
	uint32_t k = 0;
	for (uint32_t x = 0; x < b; x++)
		if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174)))
			k++;
	return 256 + k;
}

/* Appends the UTF-8 of byte b's character (1 or 2 bytes) at out; returns its length. */
static size_t byte_utf8(uint8_t b, char *out)
{
	uint32_t c = byte_char(b);
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	out[0] = (char)(0xc0 | (c >> 6));
	out[1] = (char)(0x80 | (c & 0x3f));
	return 2;
}

typedef struct {
	uint64_t key;          /* (left id << 32 | right id) + 1; 0: empty */
	uint32_t rank, id;     /* the merge's rank and the merged token's id */
} merge_slot;

typedef struct {
	const tfs_hf_tok *tok;
	merge_slot *slots;
	size_t mask;
	bool ignore_merges;
	const char *file;
} bpe_t;

static bool vocab_id(const bpe_t *b, const char *s, size_t n, uint32_t *id)
{
	return tfs_hf_tok_id(b->tok, s, n, id);
}

static merge_slot *merge_find(const bpe_t *b, uint32_t l, uint32_t r)
{
	uint64_t key = (((uint64_t)l << 32) | r) + 1;
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & b->mask;
	while (b->slots[i].key && b->slots[i].key != key)
		i = (i + 1) & b->mask;
	return &b->slots[i];
}

static int bpe_init(bpe_t *b, const tfs_hf_tok *tok, const char *file, tfs_error *err)
{
	const json_t *model = json_object_get(tok->root, "model");
	*b = (bpe_t){ .tok = tok, .file = file,
		      .ignore_merges = json_is_true(json_object_get(model, "ignore_merges")) };
	if (!tok->has_vocab)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: model.vocab is not an object", file);
	if (json_object_get(model, "merges"))
		return tfs_error_set(err, TFS_E_FORMAT, "%s: model.merges is not a list", file);
	size_t n = tok->n_merges, cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	if (!(b->slots = calloc(cap, sizeof *b->slots)))
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	b->mask = cap - 1;
	char *buf = NULL;
	size_t bufcap = 0;
	int rc = 0;
	for (size_t r = 0; r < n && !rc; r++) {
		const char *pa = tok->mtext + tok->moff[2 * r], *pb = tok->mtext + tok->moff[2 * r + 1];
		size_t na = tok->moff[2 * r + 1] - tok->moff[2 * r];
		size_t nb = tok->moff[2 * r + 2] - tok->moff[2 * r + 1];
		uint32_t ia, ib, im;
		if (tok->mbad && tok->mbad[r]) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: merge %zu is neither \"a b\" nor "
					   "[\"a\", \"b\"]", file, r);
			break;
		}
		if (na + nb > bufcap) {
			char *nbuf = realloc(buf, bufcap = 2 * (na + nb) + 64);
			if (!nbuf) {
				rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
				break;
			}
			buf = nbuf;
		}
		memcpy(buf, pa, na);
		memcpy(buf + na, pb, nb);
		if (!vocab_id(b, pa, na, &ia) || !vocab_id(b, pb, nb, &ib) ||
		    !vocab_id(b, buf, na + nb, &im)) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: merge %zu '%.*s' '%.*s': a part or "
					   "their concatenation is not in the vocabulary", file, r,
					   (int)(na > 64 ? 64 : na), pa, (int)(nb > 64 ? 64 : nb), pb);
			break;
		}
		merge_slot *s = merge_find(b, ia, ib);
		/* a repeated merge: the later rank, as tokenizers' HashMap::collect keeps */
		*s = (merge_slot){ .key = (((uint64_t)ia << 32) | ib) + 1, .rank = (uint32_t)r,
				   .id = im };
	}
	free(buf);
	return rc;
}

static void bpe_free(bpe_t *b)
{
	free(b->slots);
	b->slots = NULL;
}

typedef struct {
	uint32_t id, start, len;   /* a symbol of a word: token id, its bytes in the word */
} sym_t;

/* Tokenizes one piece (its byte characters w, n bytes) and appends the ids. */
static int bpe_word(const bpe_t *b, const char *w, size_t n, ids_t *out, bool *unknown)
{
	uint32_t id;
	if (b->ignore_merges && vocab_id(b, w, n, &id))
		return ids_push(out, id);
	sym_t *s = malloc((n ? n : 1) * sizeof *s);
	if (!s)
		return TFS_E_NOMEM;
	size_t ns = 0;
	for (size_t i = 0; i < n;) {
		size_t cl = ((uint8_t)w[i] & 0xe0) == 0xc0 ? 2 : 1;
		if (!vocab_id(b, w + i, cl, &id)) {
			*unknown = true;   /* a byte with no token: tokenizers would need unk */
			free(s);
			return 0;
		}
		s[ns++] = (sym_t){ id, (uint32_t)i, (uint32_t)cl };
		i += cl;
	}
	for (;;) {
		size_t best = ns;
		uint32_t best_rank = UINT32_MAX, best_id = 0;
		for (size_t i = 0; i + 1 < ns; i++) {
			const merge_slot *m = merge_find(b, s[i].id, s[i + 1].id);
			if (m->key && m->rank < best_rank) {
				best_rank = m->rank;
				best_id = m->id;
				best = i;
			}
		}
		if (best == ns)
			break;
		s[best].id = best_id;
		s[best].len += s[best + 1].len;
		memmove(&s[best + 1], &s[best + 2], (ns - best - 2) * sizeof *s);
		ns--;
	}
	int rc = 0;
	for (size_t i = 0; i < ns && !rc; i++)
		rc = ids_push(out, s[i].id);
	free(s);
	return rc;
}

/* ==== post-processing ==== */

/* The id of token text s in the vocabulary or among the added tokens. */
static bool token_id(const bpe_t *b, const tfs_hf_tok *tok, const char *s, uint32_t *id)
{
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(tok->root, "added_tokens"), i, a) {
		const char *c = json_string_value(json_object_get(a, "content"));
		json_t *v = json_object_get(a, "id");
		if (c && strcmp(c, s) == 0 && json_is_integer(v) && json_integer_value(v) >= 0) {
			*id = (uint32_t)json_integer_value(v);
			return true;
		}
	}
	return vocab_id(b, s, strlen(s), id);
}

/* A tokenizer_config.json token entry: "text" or {"content": "text", ...}. */
static const char *config_token(const json_t *cfg, const char *key)
{
	const json_t *e = json_object_get(cfg, key);
	if (json_is_object(e))
		e = json_object_get(e, "content");
	return json_string_value(e);
}

/* seq through post-processor pp into out.  1: a processor not handled here. */
static int post_process(const json_t *pp, const ids_t *seq, ids_t *out)
{
	const char *type = json_string_value(json_object_get(pp, "type"));
	int rc = 0;
	if (!pp || json_is_null(pp) || (type && strcmp(type, "ByteLevel") == 0)) {
		for (size_t i = 0; i < seq->n && !rc; i++)
			rc = ids_push(out, seq->v[i]);
		return rc;
	}
	if (!type)
		return 1;
	if (strcmp(type, "Sequence") == 0) {
		ids_t cur = { 0 }, next = { 0 };
		for (size_t i = 0; i < seq->n && !rc; i++)
			rc = ids_push(&cur, seq->v[i]);
		size_t k;
		json_t *p;
		json_array_foreach(json_object_get(pp, "processors"), k, p) {
			if (rc)
				break;
			next.n = 0;
			if (!(rc = post_process(p, &cur, &next))) {
				ids_t t = cur;
				cur = next;
				next = t;
			}
		}
		for (size_t i = 0; i < cur.n && !rc; i++)
			rc = ids_push(out, cur.v[i]);
		free(cur.v);
		free(next.v);
		return rc;
	}
	if (strcmp(type, "TemplateProcessing") == 0) {
		const json_t *single = json_object_get(pp, "single");
		const json_t *specials = json_object_get(pp, "special_tokens");
		size_t k;
		json_t *item;
		if (!json_is_array(single))
			return 1;
		json_array_foreach(single, k, item) {
			const json_t *sp = json_object_get(item, "SpecialToken");
			const json_t *sq = json_object_get(item, "Sequence");
			if (sq) {
				for (size_t i = 0; i < seq->n && !rc; i++)
					rc = ids_push(out, seq->v[i]);
			} else if (sp) {
				const char *name = json_string_value(json_object_get(sp, "id"));
				const json_t *st = name ? json_object_get(specials, name) : NULL;
				const json_t *sids = json_object_get(st, "ids");
				size_t j;
				json_t *v;
				if (!json_is_array(sids))
					return 1;
				json_array_foreach(sids, j, v) {
					if (!json_is_integer(v) || rc)
						return rc ? rc : 1;
					rc = ids_push(out, (uint32_t)json_integer_value(v));
				}
			} else {
				return 1;
			}
			if (rc)
				return rc;
		}
		return 0;
	}
	if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
		const json_t *cls = json_object_get(pp, "cls"), *sep = json_object_get(pp, "sep");
		if (!json_is_integer(json_array_get(cls, 1)) || !json_is_integer(json_array_get(sep, 1)))
			return 1;
		rc = ids_push(out, (uint32_t)json_integer_value(json_array_get(cls, 1)));
		for (size_t i = 0; i < seq->n && !rc; i++)
			rc = ids_push(out, seq->v[i]);
		return rc ? rc : ids_push(out, (uint32_t)json_integer_value(json_array_get(sep, 1)));
	}
	return 1;
}

/* transformers' Llama/CodeLlama/Gemma fast tokenizers replace the post-processor with
 * [bos] $A [eos] from add_bos_token (default true) and add_eos_token (default false). */
static bool llama_class(const json_t *cfg)
{
	static const char *const names[] = { "LlamaTokenizer", "LlamaTokenizerFast",
		"CodeLlamaTokenizer", "CodeLlamaTokenizerFast", "GemmaTokenizer",
		"GemmaTokenizerFast" };
	const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
	for (size_t i = 0; cls && i < sizeof names / sizeof *names; i++)
		if (strcmp(cls, names[i]) == 0)
			return true;
	return false;
}

/* ids through what the converter's tokenizer.encode adds.  1: not computable here. */
static int add_specials(const bpe_t *b, const tfs_hf_tok *tok, const json_t *cfg,
			const ids_t *seq, ids_t *out)
{
	if (!llama_class(cfg))
		return post_process(json_object_get(tok->root, "post_processor"), seq, out);
	const json_t *ab = json_object_get(cfg, "add_bos_token");
	const json_t *ae = json_object_get(cfg, "add_eos_token");
	bool add_bos = ab ? json_is_true(ab) : true, add_eos = json_is_true(ae);
	uint32_t bos = 0, eos = 0;
	const char *bs = config_token(cfg, "bos_token"), *es = config_token(cfg, "eos_token");
	if ((add_bos && (!bs || !token_id(b, tok, bs, &bos))) ||
	    (add_eos && (!es || !token_id(b, tok, es, &eos))))
		return 1;   /* transformers raises: no BOS/EOS token to add */
	int rc = add_bos ? ids_push(out, bos) : 0;
	for (size_t i = 0; i < seq->n && !rc; i++)
		rc = ids_push(out, seq->v[i]);
	return rc ? rc : add_eos ? ids_push(out, eos) : 0;
}

/* ==== the check text's hash ==== */

/* 0 and hex set, 1 when not computable (hex ""), or an error. */
static int check_hash(const struct hf_pre_config *c, const tfs_hf_tok *tok, const json_t *cfg,
		      char hex[65], const char *file, tfs_error *err)
{
	hex[0] = 0;
	const char *text = c->text ? c->text : tfs_hf_chktxt;
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(tok->root, "added_tokens"), i, a) {
		const char *content = json_string_value(json_object_get(a, "content"));
		if (content && *content && (strstr(text, content) || strstr(tfs_hf_chktxt, content)))
			return 1;   /* tokenizers splits on added tokens before pre-tokenizing */
	}
	const json_t *model = json_object_get(tok->root, "model");
	const char *cp = json_string_value(json_object_get(model, "continuing_subword_prefix"));
	const char *ew = json_string_value(json_object_get(model, "end_of_word_suffix"));
	if ((cp && *cp) || (ew && *ew))
		return 1;
	bpe_t b;
	int rc = bpe_init(&b, tok, file, err);
	ids_t seq = { 0 }, all = { 0 };
	tfs_buf list = { 0 };
	char *w = malloc(2 * 65536);
	bool unknown = false;
	if (!rc && !w)
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	for (size_t k = 0, pos = 0; !rc && k < c->n && !unknown; pos += c->lens[k++]) {
		size_t wn = 0;
		for (size_t j = 0; j < c->lens[k]; j++)
			wn += byte_utf8((uint8_t)text[pos + j], w + wn);
		if (bpe_word(&b, w, wn, &seq, &unknown))
			rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
	}
	if (!rc && !unknown) {
		int pr = add_specials(&b, tok, cfg, &seq, &all);
		if (pr < 0)
			rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
		else if (pr == 0) {
			/* Python's str(list): "[1, 2, 3]" */
			int e = tfs_buf_append(&list, "[", 1);
			for (size_t k = 0; k < all.n && !e; k++)
				e = tfs_buf_printf(&list, k ? ", %u" : "%u", all.v[k]);
			if (!e)
				e = tfs_buf_append(&list, "]", 1);
			unsigned char md[EVP_MAX_MD_SIZE];
			unsigned mdn = 0;
			if (e || EVP_Digest(list.data, list.len, md, &mdn, EVP_sha256(), NULL) != 1)
				rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", file);
			for (unsigned k = 0; !rc && k < 32; k++)
				snprintf(hex + 2 * k, 3, "%02x", md[k]);
		}
	}
	free(w);
	free(seq.v);
	free(all.v);
	tfs_buf_free(&list);
	bpe_free(&b);
	if (rc)
		return rc;
	return hex[0] ? 0 : 1;
}

/* ==== the rule ==== */

/* Step 3: configurations that only one of llama.cpp's pre-tokenizers has. */
static const char *by_structure(const struct hf_pre_config *c, const tfs_hf_tok *tok,
				const json_t *cfg)
{
	if (strcmp(c->name, "llama3") == 0) {
		/* Meta's vocabulary hashes to llama-bpe when encode adds BOS, else smaug-bpe */
		ids_t none = { 0 }, out = { 0 };
		bpe_t b = { .tok = tok };
		int r = add_specials(&b, tok, cfg, &none, &out);
		free(out.v);
		return r == 0 && out.n > 0 ? "llama-bpe" : r == 0 ? "smaug-bpe" : NULL;
	}
	if (strcmp(c->name, "qwen2") == 0 || strcmp(c->name, "deepseek-v3") == 0 ||
	    strcmp(c->name, "tekken") == 0)
		return c->name;
	return NULL;
}

static void json_brief(const json_t *j, char *out, size_t cap)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	snprintf(out, cap, "%s", s ? s : "null");
	if (s && strlen(s) >= cap && cap > 4)
		memcpy(out + cap - 4, "...", 4);
	free(s);
}

int tfs_hf_bpe_pre(const char **name, char *chkhsh, const tfs_hf_tok *tok, const json_t *cfg,
		   const char *file, tfs_error *err)
{
	*name = NULL;
	if (chkhsh)
		chkhsh[0] = 0;
	const struct hf_pre_config *c = find_config(tok);
	if (!c) {
		char pre[200], nz[100];
		json_brief(json_object_get(tok->root, "pre_tokenizer"), pre, sizeof pre);
		json_brief(json_object_get(tok->root, "normalizer"), nz, sizeof nz);
		return tfs_error_set(err, TFS_E_FORMAT, "%s: BPE pre-tokenizer not recognized: "
				     "normalizer %s with pre_tokenizer %s is no configuration "
				     "tensorfs knows the converter's name for", file, nz, pre);
	}
	char hex[65];
	int rc = check_hash(c, tok, cfg, hex, file, err);
	if (rc < 0)
		return rc;
	if (chkhsh)
		memcpy(chkhsh, hex, 65);
	for (size_t i = 0; rc == 0 && i < sizeof known_pre / sizeof *known_pre; i++)
		if (strcmp(known_pre[i].hash, hex) == 0)
			*name = known_pre[i].name;   /* no break: the last match wins */
	if (!*name)
		*name = by_structure(c, tok, cfg);
	if (*name)
		return 0;
	return tfs_error_set(err, TFS_E_FORMAT, "%s: BPE pre-tokenizer not recognized: %s%s%s, "
			     "and its pre-tokenizer (%s: %s) is shared by several of llama.cpp's",
			     file, rc ? "the check text's hash cannot be computed here" :
			     "the check text's hash ", rc ? "" : hex,
			     rc ? "" : " is not in the converter's table", c->name, c->where);
}
