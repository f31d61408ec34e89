/*
 * hf_arch.h - the architectures of the GGUF view: tfs_hf_archs[] (hf_registry.c), one const
 * row per model class of llama.cpp's converter, is the only list of them.
 *
 * A row (tfs_hf_arch) is what the converter holds in one registered model class:
 *  1. the Hugging Face class names (config.json architectures[0]) and the GGUF architecture;
 *  2. the tensor-name map (HF name after "model.layers.N." or whole -> GGUF name), each entry
 *     with the axes its shape is checked against and its transform (Q/K row permutation,
 *     Gemma's norm + 1);
 *  3. the hyperparameter keys: TextModel.set_gguf_parameters (hf_params.c), then the class's
 *     own (a hook), or the class's own alone; generated tensors (generate_extra_tensors);
 *  4. its transformers config classes (by model_type): the defaults AutoConfig's to_dict()
 *     fills in for keys config.json leaves out, and a post-init hook for what the class's
 *     __init__ derives (the converter reads them as if config.json had them);
 *  5. its vocabulary kind (set_vocab: hf_vocab.c), or its own set_vocab hook;
 *  6. optionally its experts (struct tfs_hf_moe, hf_moe.h: how per-expert tensors are
 *     stacked) and its plan hooks (struct tfs_hf_hooks, hf_plan_impl.h: prepare, rename, fix,
 *     tensors written first, its own axis kinds);
 *  7. flags (lm_head dropped, token_embd trimmed to the vocab, ...).
 * Adding an architecture: its own file hf_NAME.c defining `const tfs_hf_arch tfs_hf_arch_NAME`
 * (and listed in meson.build), one row in tfs_hf_archs[] (hf_registry.c), a variant in
 * tests/hf/make_model.py (or make_moe.py) that compares it with the converter, and its docs.
 * The files of codec/hf call each other without a circle (scripts/check-structure.sh): a row
 * file uses the helpers below it (hf_params.c, hf_moe.c, hf_arch_gen.c, hf_keys.c, ...);
 * only hf_registry.c names the rows; the plan reaches a row through its members.
 */
#ifndef TFS_HF_ARCH_H
#define TFS_HF_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base.h"
#include "hf_keys.h"

/* The size a tensor axis is checked against. */
enum tfs_hf_dim {
	TFS_HF_D_NONE, TFS_HF_D_HIDDEN, TFS_HF_D_Q, TFS_HF_D_KV, TFS_HF_D_FF, TFS_HF_D_HEAD,
	TFS_HF_D_VOCAB,
	TFS_HF_D_QKV,            /* (num_attention_heads + 2 x num_key_value_heads) x head_dim */
	TFS_HF_D_FF2,            /* 2 x intermediate_size (gate and up fused) */
	/* MoE (hf_moe.c): the experts' count, an expert's and the shared expert's
	 * intermediate size, 1 (the shared expert's gate) */
	TFS_HF_D_EXPERTS, TFS_HF_D_FF_EXP, TFS_HF_D_FF_SHEXP, TFS_HF_D_ONE,
	TFS_HF_D_LAYER,          /* not checked: it differs per layer (Gemma 4, hf_gemma4.c) */
	TFS_HF_D_HOOK,           /* checked by the row's fix hook (hf_plan_impl.h) */
	/* from here on: a row's own axis kinds, sized by its hooks' dim (hf_plan_impl.h) */
	TFS_HF_D_ROW = 64,
};

/* What the converter does to a tensor's values besides converting them. */
enum tfs_hf_xform {
	TFS_HF_XF_NONE,
	TFS_HF_XF_PERMUTE_Q,     /* LlamaModel.permute with num_attention_heads */
	TFS_HF_XF_PERMUTE_K,     /* ... with num_key_value_heads */
	TFS_HF_XF_PLUS_ONE,      /* Gemma: norm.weight + 1 (in the source's torch dtype) */
};

typedef struct {
	const char *hf;          /* after "model.layers.N." (block) or whole (global), no suffix */
	const char *gguf;        /* after "blk.N." or whole, no suffix */
	uint8_t rows, cols;      /* enum tfs_hf_dim: the .weight's shape; a .bias is [rows] */
	uint8_t xform;           /* enum tfs_hf_xform */
	bool required;
} tfs_hf_name;

/* model.embed_tokens, model.norm and lm_head as most rows map them (hf_arch.c) */
enum { TFS_HF_N_GLOBALS = 3 };
extern const tfs_hf_name tfs_hf_globals[TFS_HF_N_GLOBALS];
/* LlamaModel's blocks: attn_norm, q/k (permuted)/v/o, ffn_norm, gate/up/down (hf_arch.c) */
enum { TFS_HF_N_LLAMA_BLOCKS = 9 };
extern const tfs_hf_name tfs_hf_llama_blocks[TFS_HF_N_LLAMA_BLOCKS];
/* Olmo2Model's blocks (q/k norms over all heads, post-attention and post-MLP norms) and its
 * keys (a sliding window and its per-layer pattern, when the config has sliding_window):
 * OLMo 2's and OLMo 3's rows (hf_arch.c, hf_olmo3.c) */
enum { TFS_HF_N_OLMO2_BLOCKS = 11 };
extern const tfs_hf_name tfs_hf_olmo2_blocks[TFS_HF_N_OLMO2_BLOCKS];
struct tfs_hf_params;
int tfs_hf_olmo2_keys(tfs_hf_kvs *l, const struct tfs_hf_params *h, tfs_error *err);

/* DeepSeek's MLA (hf_deepseek.c): kv_b_proj split per head.  The source's rows are `heads`
 * groups of `group` rows; the output is rows [off, off + n) of each group, transposed per
 * head (attn_k_b: [heads][cols][n]) or not (attn_v_b).  heads 0: no slice. */
typedef struct {
	uint32_t heads, group, off, n;
	bool transpose;
} tfs_hf_slice;

/* GPT-OSS (hf_gptoss.c): a tensor computed its own way, by tfs_hf_own_read; kind 0: none. */
enum tfs_hf_own_kind {
	TFS_HF_OWN_NONE,
	TFS_HF_OWN_MXFP4,     /* *_blocks (src) + *_scales (src2) repacked to ggml's MXFP4 */
	TFS_HF_OWN_COLS,      /* a [n, k * stride] tensor's columns first, first + stride, ... */
	/* [E, A, B] -> [E, C, A]: transposed, columns taken so (C = B / stride, or the output's
	 * rows when width says B: Llama 4's gate_up halves, first C or C after it) */
	TFS_HF_OWN_T,
	/* NVFP4 weights (hf_nvfp4.c) repacked to ggml's NVFP4: src (a stack: parts[0..n)) the
	 * weights, src2 (a stack: parts[n..2n)) the block scales, width the heads of a q/k row
	 * permutation (0: none), v a value-head reorder (v.dim 0: none) */
	TFS_HF_OWN_NVFP4,
};
typedef struct {
	uint8_t kind;            /* enum tfs_hf_own_kind */
	uint8_t stride;          /* the rows (MXFP4) or columns taken: first, first + stride, ... */
	uint32_t first;
	long src2;               /* MXFP4, NVFP4: the scales' tensor index */
	uint32_t width;          /* TFS_HF_OWN_T: the source's B when not C x stride; 0: it is */
	/* NVFP4, Qwen3.5's _reorder_v_heads (hf_nvfp4.c): rows from off (or, cols, the row's
	 * blocks of 16 columns) in [k heads][per][dim] taken as [per][k][dim]; dim 0: none */
	struct { uint32_t off, k, per, dim; bool cols; } v;
} tfs_hf_own;

/* A config class default: set when config.json lacks the key (or, for the computed kinds,
 * has it null, as the class's `x if x is not None else ...`). */
enum tfs_hf_def_kind {
	TFS_HF_DEF_INT,          /* v */
	TFS_HF_DEF_REAL,         /* v */
	TFS_HF_DEF_NULL,         /* None: present, null */
	TFS_HF_DEF_BOOL,         /* v != 0 */
	TFS_HF_DEF_HEAD_DIM,     /* hidden_size // num_attention_heads */
	/* num_key_value_heads: absent, v (0: num_attention_heads); null, num_attention_heads */
	TFS_HF_DEF_KV_HEADS,
};

typedef struct {
	const char *key;
	uint8_t kind;            /* enum tfs_hf_def_kind */
	double v;
} tfs_hf_default;

/* A transformers config class (AutoConfig picks it by config.json's model_type): its
 * defaults, the model_type of its text_config when it has one (Gemma3Config), and what its
 * __init__ derives (post_init, on the config object after the defaults: Phi3Config's
 * longrope, Gemma4TextConfig's layer_types; NULL: nothing). */
typedef struct {
	const char *model_type;            /* NULL: the end of a row's list */
	const tfs_hf_default *defaults;    /* ends with a NULL key */
	const char *text_type;             /* NULL: no sub-config */
	int (*post_init)(json_t *obj, const char *where, tfs_error *err);
	/* text_config's own model_type picks its class, text_type when it has none
	 * (Mistral3Config's CONFIG_MAPPING[...]); a type no row knows fails AutoConfig, and
	 * config.json is then read as written.  false: always text_type (Gemma3Config). */
	bool text_own_type;
} tfs_hf_config_class;

/* Flags of a row. */
enum {
	TFS_HF_ARCH_BASE_PARAMS = 1 << 0,  /* TextModel.set_gguf_parameters before the hook */
	TFS_HF_ARCH_NO_LM_HEAD = 1 << 1,   /* lm_head.weight dropped (Gemma, Gemma 2) */
	TFS_HF_ARCH_TRIM_EMBD = 1 << 2,    /* token_embd cut to the tokenizer's size (Gemma 3) */
	TFS_HF_ARCH_LLAMA_PARAMS = 1 << 3, /* LlamaModel's vocab_size and rope dimensions */
	TFS_HF_ARCH_DROP_HEAD_DIM = 1 << 4, /* head_dim ignored for the keys (Granite pops it) */
	/* Gemma 4: "layer_scalar" and the experts get ".weight", names without a suffix map */
	TFS_HF_ARCH_SCALAR_WEIGHT = 1 << 5,
	/* GLM-4.5: the num_nextn_predict_layers MTP layers after the others are layers too */
	TFS_HF_ARCH_NEXTN_LAYERS = 1 << 6,
	/* not shown by the reverse view (hf_export.h): its config.json would lack what the class
	 * needs beyond TextModel's keys (none now: the flag for a row not yet round-tripped) */
	TFS_HF_ARCH_NO_EXPORT = 1 << 7,
	/* its moe->tensor hook passes experts saved one by one (EXPERTS.E.PROJ.weight) through
	 * to the ordinary stacking: the reverse view's unstacked experts convert back as they
	 * are, so the row is offered there despite its own expert handling (Qwen3-VL-MoE) */
	TFS_HF_ARCH_PASSES_EXPERTS = 1 << 8,
};

/* The converter class's set_vocab (hf_vocab.c says what each does); 0: none known. */
enum tfs_hf_vocab_kind {
	TFS_HF_VOCAB_NONE,
	TFS_HF_VOCAB_LLAMA,      /* LlamaModel */
	TFS_HF_VOCAB_SPM_GPT2,   /* Qwen2Model: tokenizer.model -> sentencepiece, else gpt2 */
	TFS_HF_VOCAB_GPT2,       /* TextModel's own */
	TFS_HF_VOCAB_GEMMA2,
	TFS_HF_VOCAB_GEMMA3,
	TFS_HF_VOCAB_PHI3,
	TFS_HF_VOCAB_GLM,        /* _set_vocab_glm: gpt2 and GLM's special tokens */
	TFS_HF_VOCAB_BERT,       /* BertModel: WordPiece (get_vocab_base), phantom-space form */
	TFS_HF_VOCAB_XLMR,       /* XLMRobertaModel: sentencepiece.bpe.model (hf_vocab_xlmr.c) */
	TFS_HF_VOCAB_GLM4,       /* Glm4Model: gpt2 and GLM-4-0414's special tokens */
	TFS_HF_VOCAB_ERNIE,      /* Ernie4_5Model: sentencepiece, then add_prefix_space */
	TFS_HF_VOCAB_HUNYUAN,    /* HunYuanModel: tokenizer.json's gpt2, eos from eod_token_id */
	TFS_HF_VOCAB_MODERN_BERT, /* ModernBertModel: add_bos/add_eos/add_sep true, then gpt2 */
	/* NomicBertModel's MoE variant: _xlmroberta_set_vocab over tokenizer.json (a Unigram
	 * model read through transformers; hf_vocab_xlmr.c) */
	TFS_HF_VOCAB_XLMR_JSON,
	TFS_HF_VOCAB_OWN,        /* the row's vocab hook */
};

struct tfs_hf_params;
struct tfs_hf_moe;           /* hf_moe.h */
struct tfs_hf_hooks;         /* hf_plan_impl.h */
struct tfs_hf_tok;           /* hf_vocab.h */
struct tfs_hf_export;        /* hf_export.h */

/* A tensor a row generates (generate_extra_tensors): float32, 1-D, v malloc'd. */
typedef struct {
	const char *name;        /* static: "rope_freqs.weight" */
	float *v;
	size_t n;
} tfs_hf_gen;
#define TFS_HF_MAX_GEN 4

/* A class's key of hparams that must be there, written as ARCH.suffix: float32 when f32,
 * else uint32; kind says how (the reverse view, hf_export_json.c, undoes it). */
enum tfs_hf_need_kind {
	TFS_HF_NEED_AS_IS,
	/* times hidden_size // num_attention_heads, truncated: Cohere's rotary_pct as the
	 * rope dimensions */
	TFS_HF_NEED_HEAD_RATIO,
};
typedef struct {
	const char *key, *suffix;
	bool f32;
	uint8_t kind;            /* enum tfs_hf_need_kind */
} tfs_hf_needed;

typedef struct tfs_hf_arch {
	const char *const *classes;        /* NULL-terminated */
	const char *gguf;                  /* general.architecture */
	const tfs_hf_name *globals;
	size_t n_globals;
	const tfs_hf_name *blocks;
	size_t n_blocks;
	unsigned flags;
	/* The class's own hyperparameter keys (after TextModel's with BASE_PARAMS); NULL: none. */
	int (*params)(tfs_hf_kvs *l, const struct tfs_hf_params *h, tfs_error *err);
	/* generate_extra_tensors: up to TFS_HF_MAX_GEN tensors into gen (*ngen of them; on an
	 * error, those set are freed by the caller), and the keys it writes (into early: they
	 * come right after general.architecture).  NULL: none. */
	int (*extra)(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early,
		     const struct tfs_hf_params *h, tfs_error *err);
	/* Its transformers config classes, ending with a NULL model_type; NULL: none (a
	 * model_type transformers does not know: config.json is read as written). */
	const tfs_hf_config_class *configs;
	uint8_t vocab;                     /* enum tfs_hf_vocab_kind */
	/* TFS_HF_VOCAB_OWN: the class's set_vocab (tok, cfg: tokenizer.json and
	 * tokenizer_config.json, either may be NULL). */
	int (*own_vocab)(tfs_hf_kvs *out, const tfs_hf_files *files, const struct tfs_hf_tok *tok,
			 const json_t *cfg, tfs_error *err);
	const struct tfs_hf_moe *moe;      /* its experts stacked (hf_moe.h); NULL: none */
	const struct tfs_hf_hooks *hooks;  /* its own steps of the plan; NULL: none */
	/* The hparams its params hook writes by tfs_hf_add_needed (the reverse view writes
	 * config.json's keys back from them); NULL: none. */
	const tfs_hf_needed *needed;
	size_t n_needed;
	/* The reverse view's (hf_export.h) undoing of what its hooks computed from config.json
	 * or generation_config.json: members set or deleted in the export's config and
	 * generation (either may be NULL); 0, or TFS_E_NOMEM; NULL: none. */
	int (*xconfig)(json_t *config, json_t *generation, const struct tfs_hf_export *x);
	/* The reverse view's tensors that its hooks turned into keys (tfs_hf_export_add_kv);
	 * NULL: none. */
	int (*xtensors)(struct tfs_hf_export *x, tfs_error *err);
	/* The reverse view's undoing of what its hooks did to tensors (they renamed, split or
	 * computed them: GPT-OSS's experts, DeepSeek's kv_b_proj): the model's tensor i as the
	 * class's checkpoint holds it (tfs_hf_export_push, tfs_hf_export_add_mix), before the
	 * maps are read backwards: 1 when taken (tensors added, or none: a tensor taken with
	 * another), 0 when the maps name it, or an error.  With it the row is shown whatever
	 * its plan hooks; NULL: none. */
	int (*xtensor)(struct tfs_hf_export *x, size_t i, tfs_error *err);
	/* A class the converter writes as one of two architectures by config.json
	 * (NomicBertModel: nomic-bert, or nomic-bert-moe with moe_every_n_layers): whether
	 * this row is the one for config (tfs_hf_arch_find_for); NULL: every config. */
	bool (*takes)(const json_t *config);
} tfs_hf_arch;

/* Shorthands for a row's designated initializer: its class names; its name tables (arrays);
 * one config class of model_type with its defaults and nothing derived. */
#define TFS_HF_CLASSES(...) .classes = (const char *const[]){ __VA_ARGS__, NULL }
#define TFS_HF_NAMES(g, b) .globals = (g), .n_globals = sizeof(g) / sizeof((g)[0]), \
	.blocks = (b), .n_blocks = sizeof(b) / sizeof((b)[0])
#define TFS_HF_CONFIG(type, defaults) .configs = (const tfs_hf_config_class[]){ \
	{ type, defaults, NULL, NULL, false }, { NULL, NULL, NULL, NULL, false } }

/* What config.json says, as the checks, the keys and the rows' hooks use it (hf_config.c). */
struct tfs_hf_params {
	const char *where;         /* "dir/config.json" for messages */
	const tfs_hf_files *files; /* the repo (modules.json for the pooling of encoders) */
	json_t *file;              /* config.json as written */
	/* the converter's hparams: AutoConfig's to_dict() (config.json and the class defaults),
	 * text_config merged to the top */
	json_t *root;
	/* TextModel.rope_parameters: rope_parameters or rope_scaling, with rope_theta and the
	 * rest mirrored into it (owned) */
	json_t *rope;
	const tfs_hf_arch *arch;
	uint32_t ftype;            /* general.file_type */
	int64_t n_layer, n_head, n_kv, hidden, ff, vocab, head_dim;   /* -1: not given */
};
typedef struct tfs_hf_params hparams;

/* hf_params.c, for the rows' hooks: Python's find_hparam (the value of the first key the
 * config has, JSON null included; *which the key), and keys from values. */
json_t *tfs_hf_find(const json_t *c, const char *const *keys, const char **which);
int tfs_hf_add_u32(tfs_hf_kvs *l, const hparams *h, const char *suffix, const json_t *v,
		   const char *key, tfs_error *err);
int tfs_hf_add_f32(tfs_hf_kvs *l, const hparams *h, const char *suffix, const json_t *v,
		   const char *key, tfs_error *err);
/* TextModel.set_gguf_parameters' keys (what TFS_HF_ARCH_BASE_PARAMS writes). */
int tfs_hf_text_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err);
/* Gemma3Model.set_gguf_parameters' keys (hf_arch.c); _try_set_pooling_type's pooling_type
 * from sentence-transformers' modules.json (hf_bert.c). */
int tfs_hf_gemma3_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err);
int tfs_hf_pooling_key(tfs_hf_kvs *l, const hparams *h, tfs_error *err);
/* hparams[key] that must be there (Python's KeyError otherwise). */
int tfs_hf_need(json_t **v, const hparams *h, const char *key, tfs_error *err);
/* A class's keys of hparams that must be there (its needed member, or its own list). */
int tfs_hf_add_needed(tfs_hf_kvs *l, const hparams *h, const tfs_hf_needed *k, size_t n,
		      tfs_error *err);

/* hf_qwen3vl.c: Qwen3-VL's n_deepstack_layers, the count of vision_config's
 * deepstack_visual_indexes (Qwen3VLVisionConfig's 3 when absent): its dense and MoE rows. */
int tfs_hf_qwen3vl_keys(tfs_hf_kvs *l, const hparams *h, tfs_error *err);
/* hf_gemma4_x.c: Gemma 4's row's xconfig hook (the reverse view's config.json keys). */
int tfs_hf_gemma4_xconfig(json_t *config, json_t *gen, const struct tfs_hf_export *x);
/* and the reverse view's: the count back as vision_config's deepstack_visual_indexes */
int tfs_hf_qwen3vl_xconfig(json_t *config, json_t *gen, const struct tfs_hf_export *x);

/* hf_arch_gen.c: the rows' extra hooks. */
int tfs_hf_llama3_freqs(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early,
			const struct tfs_hf_params *h, tfs_error *err);
/* The same with factor when the llama3 rope scaling names none (LlamaModel's 8; EXAONE 4's
 * 16). */
int tfs_hf_llama3_freqs_factor(tfs_hf_gen *gen, size_t *ngen, const struct tfs_hf_params *h,
			       double factor, tfs_error *err);
/* Phi-3's rotary dimensions: int(partial_rotary_factor * hidden_size) // heads. */
int64_t tfs_hf_phi3_rope_dims(const struct tfs_hf_params *h);
int tfs_hf_phi3_factors(tfs_hf_gen *gen, size_t *ngen, tfs_hf_kvs *early,
			const struct tfs_hf_params *h, tfs_error *err);

/* hf_registry.c: the rows, NULL-terminated, in the order tfs_hf_class_name (hf_plan.h)
 * lists their classes. */
extern const tfs_hf_arch *const tfs_hf_archs[];
/* The row of HF class name cls, or NULL. */
const tfs_hf_arch *tfs_hf_arch_find(const char *cls);
/* The row of HF class name cls that takes config (its takes hook), or NULL. */
const tfs_hf_arch *tfs_hf_arch_find_for(const char *cls, const json_t *config);
/* The first row after `after` (NULL: from the start) whose GGUF architecture is gguf and
 * that the reverse view (hf_export.h) can show (the converter registers a GGUF architecture's
 * classes in that order: the first whose maps name every tensor is the class named), or
 * NULL. */
const tfs_hf_arch *tfs_hf_arch_of_gguf(const char *gguf, const tfs_hf_arch *after);
/* The first row of GGUF architecture gguf (*row; NULL: the table has none) and what of it
 * the reverse view does not undo yet, in a few words (NULL: nothing, or no row). */
const char *tfs_hf_arch_not_shown(const char *gguf, const tfs_hf_arch **row);
/* The config class of model_type among the rows' (the first), or NULL (real AutoConfig
 * fails on a model_type it does not know, and the converter then reads config.json as
 * written). */
const tfs_hf_config_class *tfs_hf_config_class_find(const char *model_type);

#endif
