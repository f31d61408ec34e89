/*
 * hf_exaone4.c - EXAONE 4.0 (Exaone4ForCausalLM, GGUF architecture exaone4), as llama.cpp
 * de3ff81's converter writes it (conversion/exaone.py: Exaone4Model, a TextModel): Q/K not
 * permuted, q/k norms per head, no norm before attention or MLP but one after each
 * (post_attention_norm, post_ffw_norm); TextModel's keys, then vocab_size and, when the config
 * has a sliding window, attention.sliding_window and its per-layer pattern (from layer_types,
 * else sliding_window_pattern: "LLLG" or every Nth layer global); llama3 rope scaling's
 * rope_freqs (factor 16 when absent); the tokenizer gpt2's.  Exaone4Config's defaults
 * (transformers 4.57) and its layer_types, derived from sliding_window_pattern.
 */
#include "hf_arch.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

enum { H = TFS_HF_D_HIDDEN, Q = TFS_HF_D_Q, KV = TFS_HF_D_KV, FF = TFS_HF_D_FF,
       HD = TFS_HF_D_HEAD, NO = TFS_HF_D_NONE, XN = TFS_HF_XF_NONE };

static const tfs_hf_name blocks[] = {
	{ "self_attn.q_proj", "attn_q", Q, H, XN, true },
	{ "self_attn.k_proj", "attn_k", KV, H, XN, true },
	{ "self_attn.v_proj", "attn_v", KV, H, XN, true },
	{ "self_attn.o_proj", "attn_output", H, Q, XN, true },
	{ "self_attn.q_norm", "attn_q_norm", HD, NO, XN, true },
	{ "self_attn.k_norm", "attn_k_norm", HD, NO, XN, true },
	{ "post_attention_layernorm", "post_attention_norm", H, NO, XN, true },
	{ "mlp.gate_proj", "ffn_gate", FF, H, XN, true },
	{ "mlp.up_proj", "ffn_up", FF, H, XN, true },
	{ "mlp.down_proj", "ffn_down", H, FF, XN, true },
	{ "post_feedforward_layernorm", "post_ffw_norm", H, NO, XN, true },
};

/* Exaone4Config: the keys the converter reads (no head_dim attribute) */
static const tfs_hf_default defaults[] = {
	{ "vocab_size", TFS_HF_DEF_INT, 102400 }, { "num_key_value_heads", TFS_HF_DEF_INT, 32 },
	{ "max_position_embeddings", TFS_HF_DEF_INT, 2048 },
	{ "rms_norm_eps", TFS_HF_DEF_REAL, 1e-5 }, { "rope_theta", TFS_HF_DEF_REAL, 10000.0 },
	{ "rope_scaling", TFS_HF_DEF_NULL, 0 }, { "tie_word_embeddings", TFS_HF_DEF_BOOL, 0 },
	{ "sliding_window", TFS_HF_DEF_INT, 4096 },
	{ "sliding_window_pattern", TFS_HF_DEF_INT, 4 }, { NULL, 0, 0 },
};

/* Exaone4Config.__init__: layer_types, when None, sliding but every sliding_window_pattern-th
 * layer (its pattern is 0 when sliding_window is None).  A pattern 0 or not an integer fails
 * AutoConfig (ZeroDivisionError, TypeError), and the converter reads config.json as written. */
static int post_init(json_t *c, const char *where, tfs_error *err)
{
	json_t *nl = json_object_get(c, "num_hidden_layers"), *lt = json_object_get(c, "layer_types");
	json_t *pat = json_object_get(c, "sliding_window_pattern");
	json_int_t n = json_integer_value(nl), p = 0;
	if ((lt && !json_is_null(lt)) || !json_is_integer(nl) || n <= 0 || n > 65536)
		return 0;   /* the size checks name a bad layer count */
	if (!json_is_null(json_object_get(c, "sliding_window"))) {
		if (json_is_boolean(pat))
			p = json_is_true(pat);
		else if (json_is_integer(pat))
			p = json_integer_value(pat);
		else
			return TFS_PASSTHROUGH;
	}
	if (p == 0)
		return TFS_PASSTHROUGH;
	int bad = !(lt = json_array());
	for (json_int_t i = 0; !bad && i < n; i++) {
		bad |= json_array_append_new(lt, json_string((i + 1) % p ? "sliding_attention"
									 : "full_attention"));
	}
	bad |= !lt || json_object_set_new(c, "layer_types", lt);
	return bad ? tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", where) : 0;
}

/* Exaone4Model.set_gguf_parameters' own: vocab_size; the sliding window and its pattern. */
static int keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err)
{
	json_t *v, *sw = json_object_get(h->root, "sliding_window");
	int rc = tfs_hf_need(&v, h, "vocab_size", err);
	if (rc || (rc = tfs_hf_add_u32(l, h, "vocab_size", v, "vocab_size", err)))
		return rc;
	if (!sw || json_is_null(sw))
		return 0;
	if ((rc = tfs_hf_add_u32(l, h, "attention.sliding_window", sw, "sliding_window", err)))
		return rc;
	json_t *lt = json_object_get(h->root, "layer_types");
	json_t *pat = json_object_get(h->root, "sliding_window_pattern");
	size_t n;
	if (lt) {
		if (!json_is_array(lt))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: \"layer_types\" is not a list",
					     h->where);
		n = json_array_size(lt);
	} else if (json_is_string(pat) || json_is_integer(pat) || json_is_boolean(pat)) {
		n = (size_t)h->n_layer;
		if (json_is_string(pat) && !json_string_length(pat))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: \"sliding_window_pattern\" is "
					     "empty", h->where);
		if (!json_is_string(pat) && !json_integer_value(pat) && !json_is_true(pat))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: \"sliding_window_pattern\" is "
					     "0", h->where);
	} else {
		return 0;
	}
	uint8_t *d = malloc(12 + n);
	char name[128];
	if (!d)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", h->where);
	uint32_t sub = TFS_GGUF_BOOL;
	uint64_t cnt = n;
	memcpy(d, &sub, 4);   /* little-endian hosts only, as the rest of tensorfs */
	memcpy(d + 4, &cnt, 8);
	for (size_t i = 0; i < n; i++) {
		if (lt) {
			const char *t = json_string_value(json_array_get(lt, i));
			d[12 + i] = t && !strcmp(t, "sliding_attention");
		} else if (json_is_string(pat)) {
			d[12 + i] = json_string_value(pat)[i % json_string_length(pat)] == 'L';
		} else {
			json_int_t p = json_is_boolean(pat) ? json_is_true(pat) : json_integer_value(pat);
			d[12 + i] = (json_int_t)(i + 1) % p != 0;
		}
	}
	snprintf(name, sizeof name, "%s.attention.sliding_window_pattern", h->arch->gguf);
	rc = tfs_hf_kvs_add(l, name, TFS_GGUF_ARRAY, d, 12 + n, err);
	free(d);
	return rc;
}

/* Exaone4Model.generate_extra_tensors: llama3 rope scaling's factors, as LlamaModel's but
 * with a factor of 16 when rope_scaling has none. */
static int freqs(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early, const hparams *h,
		 tfs_error *err)
{
	(void)early;
	return tfs_hf_llama3_freqs_factor(gen, ngen, h, 16.0, err);
}

const tfs_hf_arch tfs_hf_arch_exaone4 = {
	TFS_HF_CLASSES("Exaone4ForCausalLM"), .gguf = "exaone4",
	TFS_HF_NAMES(tfs_hf_globals, blocks), .flags = TFS_HF_ARCH_BASE_PARAMS,
	.params = keys, .extra = freqs,
	.configs = (const tfs_hf_config_class[]){ { "exaone4", defaults, NULL, post_init, false },
						  { NULL, NULL, NULL, NULL, false } },
	.vocab = TFS_HF_VOCAB_GPT2,
};
