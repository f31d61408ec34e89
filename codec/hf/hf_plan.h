/*
 * hf_plan.h - a Hugging Face model directory as the GGUF llama.cpp's convert_hf_to_gguf.py
 * writes for it, computed without converting: the plan says what the file holds, and
 * tfs_hf_tensor_read computes any byte range of a tensor from the safetensors bytes.
 *
 * The file the plan describes (as gguf-py's GGUFWriter lays it out):
 *  1. header: "GGUF", version 3, tensor count, key count;
 *  2. the keys, in the converter's order: general.architecture, general.type, the general.*
 *     keys it derives from the model card (README.md), config.json's _name_or_path and the
 *     directory's name, the hyperparameters of the architecture (general.file_type among
 *     them), general.quantization_version, the tokenizer's keys (hf_vocab.h); a key written
 *     twice keeps its first place;
 *  3. the tensor infos, in the converter's order: a generated rope_freqs first (llama3 rope
 *     scaling), then each shard's tensors (shards by file name) by name, as safetensors'
 *     keys() sorts them;
 *  4. zeros to a multiple of 32, then each tensor's bytes, each padded to 32.
 *
 * Supported: the classes of the rows of tfs_hf_archs[] (hf_registry.c, hf_arch.h), as
 * llama.cpp de3ff81's converter writes them.  Weights F32, F16 or BF16.
 */
#ifndef TFS_HF_PLAN_H
#define TFS_HF_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "dtype.h"
#include "source.h"
#include "hf_keys.h"
#include "hf_arch.h"

/* --outtype of the converter (its default is f16; tensorfs' is auto). */
typedef enum {
	TFS_HF_OUT_AUTO = 0,  /* f16 when the first tensor is F16, else bf16 */
	TFS_HF_OUT_F32,
	TFS_HF_OUT_F16,
	TFS_HF_OUT_BF16,
	TFS_HF_OUT_Q8_0,
} tfs_hf_outtype;

typedef struct {
	tfs_hf_outtype outtype;
	/* The directory's name as the converter sees it (Path(dir).name): general.name's last
	 * fallback and a source of general.basename/size_label/finetune/version.  NULL: "model". */
	const char *dir_name;
	/* Leave out the tokenizer's keys (tests of the engine alone). */
	bool no_vocab;
	/* --fp8-as-q8: the weights dequantized from FP8 written as Q8_0 (2+ dims) */
	bool fp8_as_q8;
} tfs_hf_opts;

/* How a tensor's bytes are computed from its source tensor. */
typedef enum {
	TFS_HF_COPY = 0,      /* the same dtype: source bytes (rows reordered when permuted) */
	TFS_HF_CONVERT,       /* element by element (F32/F16/BF16 to F32/F16/BF16), or per Q8_0 block */
	TFS_HF_GENERATED,     /* computed at open (rope_freqs): the plan holds the bytes */
} tfs_hf_recipe;

/* A reordering of a tensor's rows (the outermost axis) or columns (the innermost): from
 * entry `skip` of that axis on, `groups` x `per` units of `unit` entries each, stored group by
 * group, are written the other way round (unit p x groups + g is the source's g x per + p:
 * Qwen3.5's value heads, grouped by key head, tiled).  kind 0: none. */
enum { TFS_HF_GATHER_NONE, TFS_HF_GATHER_ROWS, TFS_HF_GATHER_COLS,
       TFS_HF_GATHER_SPLIT,     /* SPLIT: each source row is `groups` output rows' worth; part
				 * `skip` of it is the output's row (Qwen3.5-MoE's gate_up); a
				 * row is `unit` elements when unit is not 0 (Qwen2.5-VL's
				 * temporal patches: each kernel, then its other half) */
       TFS_HF_GATHER_SEGS };    /* SEGS: the source's rows are `groups` groups of `per` rows;
				 * the output is segment 0 of every group, then segment 1, ...:
				 * segment s is len[s] rows (0: none) from row skip + len[0] +
				 * ... + len[s-1] of its group (Qwen3-Next's in_proj_qkvz) */
typedef struct {
	uint8_t kind;
	uint64_t skip, groups, per, unit;
	uint64_t len[3];
} tfs_hf_gather;

typedef struct {
	char *name;              /* GGUF name: "token_embd.weight", "blk.0.attn_q.weight", ... */
	int dtype;               /* output tfs_dtype_id: TFS_DT_F32, _F16, _BF16 or _Q8_0 */
	uint32_t n_dims;
	int64_t ne[4];           /* GGUF order (ne[0] fastest) */
	uint64_t nbytes;
	uint64_t offset;         /* of its bytes from the start of the file (aligned to 32) */
	tfs_hf_recipe recipe;
	long src;                /* tensor index in the safetensors model, -1 when generated */
	int src_dtype;           /* the source tensor's tfs_dtype_id */
	/* Q/K row permutation of the llama family: 0 for none, else the head count it uses;
	 * rows are the source's outermost axis. */
	uint32_t perm_heads;
	/* The bytes are the source tensor's, in order (COPY, no permutation): a reader may
	 * splice them from the source, at the source's offset of the tensor.  With quiet_nans
	 * (BF16 to BF16: the converter goes through float32 and gguf-py's bf16 rounding) that
	 * holds except for signalling NaNs, which the converter quiets (bit 6 set):
	 * tfs_hf_tensor_read does too; a splice would not (real weights hold no NaN). */
	bool raw;
	bool quiet_nans;
	/* Gemma's norms: each value + 1, in the source's torch dtype (F16 sums rounded to F16;
	 * BF16 widened to float32 first); always CONVERT */
	bool plus_one;
	/* MoE (hf_moe.c): a stacked expert tensor (3-D, ne[2] experts) is its experts' source
	 * tensors one after another: parts[k] is expert k's (src = parts[0]); 0 and NULL for
	 * any other tensor.  Its bytes are read part by part, never gathered. */
	uint32_t n_parts;
	long *parts;
	tfs_hf_slice slice;      /* a per-head slice of src (always CONVERT), or heads 0 */
	tfs_hf_own own;          /* GPT-OSS (hf_gptoss.c): computed by its reader, or kind 0 */
	/* Qwen3.5 (hf_qwen35.c): rows or columns reordered (a COPY then splices run by run);
	 * A_log's -exp(x), in float32 as torch computes it (always CONVERT) */
	tfs_hf_gather gather;
	bool neg_exp;
	/* Gemma 4's per_dim_scale (hf_mmproj_gemma4.c): softplus(x) in float32 as torch's kernel
	 * computes it on the whole tensor (tfs_hf_softplus, hf_sleef.h; always CONVERT) */
	bool softplus;
} tfs_hf_tensor;

typedef struct tfs_hf_plan tfs_hf_plan;

/*
 * Builds the plan of the GGUF the converter writes for the model whose repo files `files`
 * reads (config.json, README.md, the tokenizer's files) and whose weights `st` holds (the
 * safetensors model tensorfs opened from the same directory: borrowed, it must outlive the
 * plan).  Reads config and tokenizer files, never a tensor byte.  0, or an error naming the
 * file and the problem: TFS_E_NOTFOUND (no config.json), TFS_E_FORMAT (malformed config,
 * a tensor the converter has no name for, a shape that disagrees with the config, a tensor
 * missing), TFS_E_UNSUPPORTED ("architecture X is not supported for the GGUF view", weights
 * of a dtype the converter does not handle).  o may be NULL (auto).
 */
int tfs_hf_plan_open(tfs_hf_plan **out, const tfs_hf_files *files, const tfs_model *st,
		     const tfs_hf_opts *o, tfs_error *err);
void tfs_hf_plan_free(tfs_hf_plan *p);

/* GGUF architecture name ("llama", "qwen2", "qwen3"). */
const char *tfs_hf_plan_arch(const tfs_hf_plan *p);
/* The model classes the GGUF view converts (config.json's architectures[0]): the i-th, in
 * tfs_hf_archs[]' order (hf_registry.c), NULL past the last; their count. */
const char *tfs_hf_class_name(size_t i);
size_t tfs_hf_n_classes(void);
/* llama_ftype written as general.file_type (0 F32, 1 F16, 7 Q8_0, 32 BF16). */
uint32_t tfs_hf_plan_file_type(const tfs_hf_plan *p);
/* The keys in file order (borrowed until the plan is freed). */
const tfs_hf_kvs *tfs_hf_plan_kvs(const tfs_hf_plan *p);
size_t tfs_hf_plan_n_tensors(const tfs_hf_plan *p);
const tfs_hf_tensor *tfs_hf_plan_tensor(const tfs_hf_plan *p, size_t i);
/* Bytes of the header (magic to the padding before the first tensor) and of the whole file. */
uint64_t tfs_hf_plan_header_size(const tfs_hf_plan *p);
uint64_t tfs_hf_plan_file_size(const tfs_hf_plan *p);
/* Writes the header's bytes (tfs_hf_plan_header_size of them) into out. */
int tfs_hf_plan_header(tfs_buf *out, const tfs_hf_plan *p, tfs_error *err);

/*
 * Reads bytes [off, off+len) of output tensor i (clipped at its end) into out, computed from
 * the source tensor's bytes: rows permuted by offset arithmetic, conversions done on bounded
 * chunks (never a whole tensor in memory).  Returns the count, or a negative tfs_code (a
 * source that cannot be read).  Thread-safe: any number of reads may run at once.
 */
int64_t tfs_hf_tensor_read(const tfs_hf_plan *p, size_t i, uint64_t off, uint64_t len,
			   void *out, tfs_error *err);

/*
 * For a reader that splices (copies no byte): where byte off of output tensor i is among its
 * source tensor's bytes (*src_off, from the source tensor's start) and how many bytes from
 * there are the output's next bytes in order (*run, at least 1: the rest of a permuted row,
 * or of the whole tensor).  TFS_PASSTHROUGH when its bytes are computed (converted or
 * generated): read them with tfs_hf_tensor_read.  A BF16 tensor with quiet_nans is located
 * too: spliced, a signalling NaN stays as the source has it.
 */
int tfs_hf_tensor_locate(const tfs_hf_plan *p, size_t i, uint64_t off, uint64_t *src_off,
			 uint64_t *run);

#endif
