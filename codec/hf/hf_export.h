/*
 * hf_export.h - a GGUF model as a Hugging Face repo: the GGUF view's direction reversed
 * (hf_export.c: tensors; hf_export_json.c: config.json, generation_config.json,
 * tokenizer.json, tokenizer_config.json).
 *
 * Everything comes from the rows the GGUF view converts with (hf_arch.h): the row whose GGUF
 * architecture is the model's (the first, as the converter's class registry has it) gives
 * the class name, each tensor's HF name (its globals and blocks maps, read backwards) and
 * the transform to undo (Q/K row permutation, Gemma's norm + 1); its moe member unstacks
 * the experts (one tensor per expert and projection).  A model whose
 * architecture no row has, a tensor no row maps, or a vocabulary with no tokenizer.json form
 * is refused with one line saying so.
 */
#ifndef TFS_HF_EXPORT_H
#define TFS_HF_EXPORT_H

#include "base.h"
#include "model.h"
#include "hf_arch.h"

typedef struct tfs_hf_export tfs_hf_export;

/* One tensor of the export: its HF name, shape (torch order reversed, as tfs_tensor's ne)
 * and where its values come from. */
typedef struct {
	char *name;
	size_t src;             /* the GGUF model's tensor */
	uint32_t n_dims;
	int64_t ne[TFS_MAX_DIMS];
	uint64_t cols, rows;    /* ne[0] (1 for a 1-D tensor) and the rest */
	uint8_t xform;          /* enum tfs_hf_xform, undone on read */
	uint32_t heads;         /* the permutation's heads (XF_PERMUTE_Q/K) */
	uint64_t base;          /* its first element in src (an expert of a stacked tensor) */
	/* from_kv: its values are elements base... of the float32 array key kv, not a
	 * tensor's (a row's xtensors hook: Apertus's xIELU parameters) */
	bool from_kv;
	size_t kv;
	/* mixed (n_src > 0: a row's xtensor hook, tfs_hf_export_add_mix): its values are
	 * n_src GGUF tensors' (src, src2) interleaved by columns, column w of a row being
	 * column w / n_src of source w % n_src (GPT-OSS's gate_up_proj: even columns gate, odd
	 * up); transposed: each source is [outer][cols / n_src][inner] and row r of the
	 * export's [outer][inner][cols] is (r / inner, r % inner) (GGUF's [E, out, in] experts
	 * as a checkpoint's [E, in, out]) */
	uint8_t n_src;
	bool transposed;
	/* halves: column w is column w % (cols / n_src) of source w / (cols / n_src) instead
	 * (Llama 4's gate_up_proj: gate the first half of the columns, up the second) */
	bool halves;
	size_t src2;
	uint64_t inner;
	/* grouped (seg_t + seg_n > 0, n_src 2: tfs_hf_export_add_groups): rows in groups of
	 * seg_t + seg_n, the first seg_t of group g the columns of src's [g][cols][seg_t]
	 * (transposed), the next seg_n src2's [g][seg_n][cols] (DeepSeek's kv_b_proj: per head
	 * attn_k_b transposed, then attn_v_b) */
	uint32_t seg_t, seg_n;
	/* parts (n_part > 0: tfs_hf_export_add_parts): the rows are groups of part_len[0] +
	 * ... + part_len[n_part - 1] rows, part k of group g being rows part_base[k] + g x
	 * part_len[k] onwards of GGUF tensor part_src[k], each of cols columns (Qwen3-Next's
	 * in_proj_qkvz: per key head its q, k and v rows of attn_qkv, then its z of attn_gate;
	 * Qwen3.5-MoE's gate_up_proj: per expert its gate rows, then its up rows) */
	uint8_t n_part;
	size_t part_src[4];
	uint64_t part_len[4], part_base[4];
	/* tiled (tile_unit > 0): from row (tile_cols: column) tile_skip on, tile_groups x
	 * tile_per units of tile_unit rows (columns), unit g x tile_per + p of the export being
	 * unit p x tile_groups + g of the source (Qwen3.5's value heads: the GGUF's tiled order
	 * back to grouped by key head) */
	bool tile_cols;
	uint64_t tile_skip, tile_groups, tile_per, tile_unit;
	/* vals (owned, rows x cols floats): its values, computed when the export was made
	 * (Qwen3.5's A_log, whose -exp the GGUF holds) */
	float *vals;
	/* zero_rows: its first rows are zeros, row zero_rows + r the source's row r (XLM-R's
	 * position embeddings: the rows before pad_token_id + 1, which the converter cuts) */
	uint64_t zero_rows;
} tfs_hf_xtensor;

/* The export of GGUF model m (borrowed: it must outlive the export) at dtype (TFS_DT_F32,
 * TFS_DT_F16 or TFS_DT_BF16).  TFS_E_UNSUPPORTED with a one-line reason when m has no HF
 * form. */
int tfs_hf_export_open(tfs_hf_export **out, const tfs_model *m, int dtype, tfs_error *err);
void tfs_hf_export_free(tfs_hf_export *x);
int tfs_hf_export_dtype(const tfs_hf_export *x);
size_t tfs_hf_export_n_tensors(const tfs_hf_export *x);
const tfs_hf_xtensor *tfs_hf_export_tensor(const tfs_hf_export *x, size_t i);
/* Bytes [off, off + len) of tensor i at the export's dtype: each element ggml's dequantized
 * float (the model's f32 view) with the transform undone, rounded to nearest even.  Reads
 * at most a few thousand elements at a time.  The count, or a negative tfs_code. */
int64_t tfs_hf_export_read(const tfs_hf_export *x, size_t i, uint64_t off, uint64_t len,
			   void *buf, tfs_error *err);

/* The repo's small files (hf_export_json.c), in the order listed: their names, and each
 * file's text (appended to out).  A file the model has nothing for is not listed. */
size_t tfs_hf_export_n_files(const tfs_hf_export *x);
const char *tfs_hf_export_file_name(const tfs_hf_export *x, size_t i);
int tfs_hf_export_file(tfs_buf *out, const tfs_hf_export *x, size_t i, tfs_error *err);

/* ==== shared by hf_export.c and hf_export_json.c ==== */
struct tfs_hf_export {
	const tfs_model *m;
	const tfs_hf_arch *row;
	const char *arch;        /* general.architecture */
	int dtype;
	tfs_hf_xtensor *t;
	size_t n_t, cap_t;
	bool tied;               /* no output.weight: tie_word_embeddings */
	char tok_why[192];       /* why there is no tokenizer.json ("": there is one) */
	const char *files[12];   /* the small files listed ("DIR/name": in folder DIR of hf/) */
	size_t n_files;
	int (*make[12])(tfs_buf *out, const tfs_hf_export *x, tfs_error *err);
};

/* The model's key name (or "ARCH.name" when name starts with '.') as a number, string or
 * array; false/NULL when absent or of another type. */
bool tfs_hf_xkv_num(const tfs_hf_export *x, const char *name, double *v);
bool tfs_hf_xkv_f32(const tfs_hf_export *x, const char *name, float *v);
const char *tfs_hf_xkv_str(const tfs_hf_export *x, const char *name, size_t *len);
/* An array key: its element type, count and first element's bytes. */
bool tfs_hf_xkv_arr(const tfs_hf_export *x, const char *name, uint32_t *type, uint64_t *n,
		    const uint8_t **data, uint64_t *len);
/* hf_export_kv.c: a free entry at the end of x->t (grown as mapped), or NULL; for a row's
 * xtensors hook, a tensor of one value (shape [1]), name, that
 * is element elem of the model's float32 array key `key` (TFS_E_UNSUPPORTED when it has
 * no such element). */
tfs_hf_xtensor *tfs_hf_export_push(tfs_hf_export *x);
int tfs_hf_export_add_kv(tfs_hf_export *x, const char *name, const char *key, uint64_t elem,
			 tfs_error *err);
/* For a row's xtensor hook: tensor name made of the model's tensors src[0..n_src) (1 or 2,
 * of one shape, with a float form) as tfs_hf_xtensor's n_src, transposed and halves say: without
 * transposed, the sources' shape with ne[0] x n_src; transposed (3-D sources [E, J, A] in
 * torch's order), [E, A, J x n_src].  TFS_E_UNSUPPORTED when the sources do not fit. */
int tfs_hf_export_add_mix(tfs_hf_export *x, const char *name, const size_t *src, unsigned n_src,
			  bool transposed, bool halves, tfs_error *err);
/* For a row's xtensor hook: tensor name [groups x (seg_t + seg_n), cols] (torch's order)
 * made of src_t ([groups, cols, seg_t]) transposed and src_n ([groups, seg_n, cols]) as
 * tfs_hf_xtensor's seg_t and seg_n say.  TFS_E_UNSUPPORTED when they do not fit. */
int tfs_hf_export_add_groups(tfs_hf_export *x, const char *name, size_t src_t, size_t src_n,
			     tfs_error *err);
/* hf_export_kv.c, for hf_export.c and a row's xtensor hook: the HF name the row's maps give the model's tensor
 * i (allocated; NULL: none) and its map entry; tensor i shown as name (taken over: freed
 * here, the export keeps a copy) with e's transform, as a tensor the maps name is. */
char *tfs_hf_export_mapped_name(const tfs_hf_export *x, size_t i, const tfs_hf_name **e);
int tfs_hf_export_add_as(tfs_hf_export *x, size_t i, char *name, const tfs_hf_name *e,
			 tfs_error *err);
/* An xtensor hook (hf_export_kv.c) for a row whose rename hook puts "model." in front of
 * its checkpoints' names (EmbeddingGemma's, ModernBERT's): tensor i under the maps' name
 * less "model.".  1 when taken, 0 when the maps have no name for it, or an error. */
int tfs_hf_export_xtensor_unprefixed(tfs_hf_export *x, size_t i, tfs_error *err);
/* For a row's xconfig hook (hf_export_kv.c): each key moved[k][0] of config c renamed
 * moved[k][1] (the class's own names, where TextModel's common ones would lose to its
 * defaults); absent ones left out.  0, or TFS_E_NOMEM. */
int tfs_hf_xconfig_move_keys(json_t *c, const char *const (*moved)[2], size_t n);
/* For a row's xtensor hook: tensor name, the model's tensor src as it is (its shape), xform
 * undone on read: the entry added, for the hook to give it another shape of the same
 * element count or a reorder (tiled, vals), or NULL (err set: TFS_E_UNSUPPORTED when src
 * has no float form). */
tfs_hf_xtensor *tfs_hf_export_add_src(tfs_hf_export *x, const char *name, size_t src,
				      uint8_t xform, tfs_error *err);
/* For a row's xtensor hook: tensor name of n_dims dims ne (the export's order) made of
 * n_part (1 to 4) parts as tfs_hf_xtensor's part_* say, in groups of the parts' rows: the
 * sources of one row width with a float form, each holding the rows its part reads.
 * TFS_E_UNSUPPORTED when they do not fit. */
int tfs_hf_export_add_parts(tfs_hf_export *x, const char *name, uint32_t n_dims,
			    const int64_t *ne, unsigned n_part, const size_t *src,
			    const uint64_t *len, const uint64_t *base, tfs_error *err);
/* hf_export_card.c: README.md. */
int tfs_hf_export_make_readme(tfs_buf *b, const tfs_hf_export *x, tfs_error *err);
/* Lists the small files (hf_export_json.c). */
int tfs_hf_export_list_files(tfs_hf_export *x, tfs_error *err);
/* hf_export_st.c: sentence-transformers' form of a model with ARCH.pooling_type, listed:
 * modules.json and TFS_HF_ST_POOLING/config.json (TFS_E_UNSUPPORTED: a pooling type the
 * converter does not write).  A classifier's labels (ARCH.classifier.output_labels): whether
 * config.json's id2label gives them back (TFS_E_UNSUPPORTED: not), and that id2label and
 * label2id set in config c (0, or TFS_E_NOMEM). */
#define TFS_HF_ST_POOLING "1_Pooling"
int tfs_hf_export_list_st(tfs_hf_export *x, tfs_error *err);
int tfs_hf_xlabels_check(const tfs_hf_export *x, tfs_error *err);
int tfs_hf_xlabels(json_t *c, const tfs_hf_export *x);
/* hf_export_config.c: config.json; whether generation_config.json has anything, and it. */
int tfs_hf_export_make_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err);
bool tfs_hf_export_has_generation(const tfs_hf_export *x);
int tfs_hf_export_make_generation(tfs_buf *b, const tfs_hf_export *x, tfs_error *err);

/* hf_export_kv.c: gguf-py SpecialVocab's special token types in its order (bos, eos, unk,
 * sep, pad, cls, mask) and the GGUF key of each id. */
#define TFS_HF_N_SPECIAL 7
extern const char *const tfs_hf_xspecial_types[TFS_HF_N_SPECIAL];
extern const char *const tfs_hf_xspecial_keys[TFS_HF_N_SPECIAL];
/* Where each special token id is written, so that the converter sets them in the GGUF's
 * order: SpecialVocab sets those tokenizer_config.json names (tokenizer.json's added tokens)
 * in its types' order, then config.json's *_token_id of the others in that order, then the
 * class's set_vocab its own (Glm4Model: eos, eot, unk, bos, each unless set).  So the GGUF's
 * special ids are up to two runs in that order and then the class's: the first run goes to
 * both files (BOTH), the second to config.json alone (CONFIG), the rest to neither (NONE:
 * the class finds them in the vocabulary again). */
enum { TFS_HF_SP_NONE, TFS_HF_SP_BOTH, TFS_HF_SP_CONFIG };
void tfs_hf_xspecial_places(const tfs_hf_export *x, uint8_t place[TFS_HF_N_SPECIAL]);
/* hf_export_kv.c: the vocabulary's arrays (tokenizer.ggml.tokens, token_type, merges), each
 * string checked to lie inside its key (false: no tokens, or malformed); token i's type
 * (SentencePiece's numbers; NORMAL without types); token id's text (NULL: none). */
typedef struct {
	const uint8_t *tok, *type, *merges;   /* the arrays' elements */
	uint64_t n, n_type, n_merges, tok_len, type_len, merges_len;
	uint32_t type_t;
} tfs_hf_xvocab;
bool tfs_hf_xvocab_get(tfs_hf_xvocab *v, const tfs_hf_export *x);
int32_t tfs_hf_xvocab_type(const tfs_hf_xvocab *v, uint64_t i);
const char *tfs_hf_xvocab_text(const tfs_hf_xvocab *v, uint64_t id, size_t *n);
/* tokenizer.json's "added_tokens" list of the vocabulary's tokens below end:
 * the CONTROL ones (special) and USER_DEFINED ones (not), with unknown the UNKNOWN one too
 * (special).  0, TFS_E_FORMAT or the buffer's error. */
int tfs_hf_xadded_tokens(tfs_buf *b, const tfs_hf_xvocab *v, uint64_t end, bool unknown);
/* hf_export_spm.c: a SentencePiece vocabulary's files.  Its kind: Llama's (tokenizer.ggml.model
 * "llama": tokenizer.model) or XLM-R's ("t5" of the XLMRobertaModel row, in the converter's
 * fairseq order: sentencepiece.bpe.model), or 0 (neither).  The ModelProto of either
 * (tokenizer.model or sentencepiece.bpe.model), whether there are USER_DEFINED tokens and
 * added_tokens.json of them (Llama's), and XLM-R's tokenizer_config.json. */
enum { TFS_HF_XSPM_LLAMA = 1, TFS_HF_XSPM_XLMR = 2 };
int tfs_hf_xspm_kind(const tfs_hf_export *x);
int tfs_hf_export_make_spm(tfs_buf *b, const tfs_hf_export *x, tfs_error *err);
bool tfs_hf_xspm_has_user_tokens(const tfs_hf_export *x);
int tfs_hf_export_make_added_tokens(tfs_buf *b, const tfs_hf_export *x, tfs_error *err);
int tfs_hf_export_make_xlmr_tokenizer_config(tfs_buf *b, const tfs_hf_export *x,
					     tfs_error *err);
/* hf_export_unigram.c: a "t5" vocabulary read from a Unigram tokenizer.json through
 * transformers (the TFS_HF_VOCAB_XLMR_JSON row's: nomic-bert-moe): whether it has that form
 * back (false: why says why not, cap bytes), and its tokenizer.json and
 * tokenizer_config.json. */
bool tfs_hf_xunigram_form(const tfs_hf_export *x, char *why, size_t cap);
int tfs_hf_export_make_unigram(tfs_buf *b, const tfs_hf_export *x, tfs_error *err);
int tfs_hf_export_make_unigram_config(tfs_buf *b, const tfs_hf_export *x, tfs_error *err);
/* The next string of an array key's strings at *p (*left bytes left: tfs_hf_xkv_arr's
 * data and len), its length in *n; NULL at one that overruns. */
const char *tfs_hf_xnext_str(const uint8_t **p, uint64_t *left, size_t *n);
/* JSON text: s[0..n) (or NUL-terminated) as a string; the shortest decimal that reads back
 * as float32 f, with a '.' or an exponent; ",\n  \"key\": " (no comma after '{'). */
int tfs_hf_xjstr(tfs_buf *b, const char *s, size_t n);
int tfs_hf_xjcstr(tfs_buf *b, const char *s);
int tfs_hf_xjf32(tfs_buf *b, float f);
int tfs_hf_xmember(tfs_buf *b, const char *key);
/* tokenizer_config.json's add_bos_token, add_eos_token, ...: a member each of the GGUF's
 * tokenizer.ggml.add_X_token keys (true or false), into the object b holds open. */
int tfs_hf_xadd_token_flags(tfs_buf *b, const tfs_hf_export *x);

#endif
