/*
 * hf_mmproj.h - a multimodal Hugging Face repo's projector: the mmproj GGUF llama.cpp's
 * `convert_hf_to_gguf.py --mmproj` writes for it (arch "clip": the vision and audio towers
 * and the projector into the text model), computed without converting, as a tfs_hf_plan
 * (hf_plan.h: its header, its tensors read with tfs_hf_tensor_read and located with
 * tfs_hf_tensor_locate, freed with tfs_hf_plan_free).
 *
 * The projector classes are one table of their own (tfs_hf_mmprojs[], hf_mmproj_registry.c),
 * one row each in a file of its own (hf_mmproj_gemma3.c, hf_mmproj_gemma4.c,
 * hf_mmproj_qwen25vl.c, hf_mmproj_qwen3vl.c, hf_mmproj_pixtral.c, hf_mmproj_llama4.c,
 * hf_mmproj_smolvlm.c, hf_mmproj_lfm2vl.c, hf_mmproj_internvl.c): the converter's
 * MmprojModel subclass of the HF class.
 */
#ifndef TFS_HF_MMPROJ_H
#define TFS_HF_MMPROJ_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "hf_names.h"
#include "hf_plan.h"

/* A tensor name of a projector class: the HF name after the class's filter, without its
 * .weight/.bias, "{bid}" standing for a block number below the tower's block count. */
typedef struct {
	const char *hf;
	const char *gguf;
} tfs_hf_mm_name;

/* One of the tensors the class's modify_tensors makes of a source tensor: its name (mapped
 * as a source name is, or, with gguf, the GGUF name as it is), its shape (GGUF order) and
 * where its elements are among the source's (hf_plan.h's gathers). */
#define TFS_HF_MM_MAX_PARTS 4
typedef struct {
	char name[256];
	bool gguf;
	uint32_t n_dims;
	int64_t ne[4];
	tfs_hf_gather gather;
	uint32_t perm_heads;       /* LlamaModel.permute's head count of its rows, or 0 */
	bool softplus;             /* its values softplus(x) (float32: hf_plan.h) */
} tfs_hf_mm_part;

/* What the class's keys and choices read: the vision config (AutoConfig's to_dict of it,
 * the vision config class's defaults filled in), the audio config (the same, of a class
 * with an audio encoder whose config.json has one), the preprocessor config (
 * preprocessor_config.json with processor_config.json merged over it), the file type. */
typedef struct {
	const char *where;         /* "dir/config.json" */
	const char *pre_where;     /* "dir/preprocessor_config.json" */
	const json_t *file;        /* config.json as written (global_config's top level) */
	json_t *vision;            /* hparams_vision (owned) */
	json_t *audio;             /* hparams_audio (owned), or NULL: no audio encoder */
	json_t *pre;               /* preprocessor_config (owned; an empty object when none) */
	uint32_t ftype;            /* general.file_type: 0 F32, 1 F16, 7 Q8_0, 32 BF16 */
	const tfs_hf_files *files; /* the repo's files (a class reading its tokenizer's) */
} tfs_hf_mm;

/* A projector class (the converter's MmprojModel subclass). */
typedef struct {
	const char *const *classes;        /* HF class names (architectures[0]), NULL-ended */
	/* the vision config class's defaults for keys vision_config lacks (or, when it is
	 * absent or null, all of them) */
	const tfs_hf_default *vision_defaults;
	/* the audio config class's defaults, likewise; NULL: the class has no audio encoder
	 * (has_audio_encoder), else it has one when config.json's audio_config is an object */
	const tfs_hf_default *audio_defaults;
	const tfs_hf_mm_name *names;
	size_t n_names;
	/* where a SigLIP vision tower's own names begin in the checkpoint's
	 * ("vision_tower.vision_model."), or NULL: none.  Its names (patch and position
	 * embeddings, encoder layers, post_layernorm) are one table (hf_mmproj.c's), tried
	 * after names */
	const char *siglip;
	/* TensorNameMap's block count when the class fixes it (MmprojModel's 128 for a class
	 * with both encoders), else 0: the vision config's */
	int64_t block_count;
	/* map_tensor_name's try_suffixes after ".weight" and ".bias" (NULL-ended), or NULL */
	const char *const *suffixes;
	/* filter_tensors: false when the class skips the tensor; else the name it maps (out,
	 * cap bytes), "language_model." tensors already left out */
	bool (*filter)(char *out, size_t cap, const char *name);
	/* tensor_force_quant: the tfs_dtype_id the class forces on tensor name (filtered) of
	 * GGUF name gguf, or -1 (MmprojModel's own rule is applied after it) */
	int (*force)(const char *name, const char *gguf, uint32_t ftype);
	/* modify_tensors: whether the values get + 1 (Gemma's norms) */
	bool (*plus_one)(const char *name);
	/* set_gguf_parameters' keys after MmprojModel's */
	int (*keys)(tfs_hf_kvs *l, const tfs_hf_mm *mm, tfs_error *err);
	/* __init__'s changes to hparams_vision and hparams_audio (mm->vision, mm->audio), after
	 * the defaults; NULL: none */
	int (*prepare)(tfs_hf_mm *mm, tfs_error *err);
	/* modify_tensors' splits of source tensor t (name filtered): *n parts (at most
	 * TFS_HF_MM_MAX_PARTS) into parts, or *n 0 for the tensor as it is; NULL: none */
	int (*split)(tfs_hf_mm_part *parts, size_t *n, const char *name, const tfs_tensor *t,
		     const tfs_hf_mm *mm, tfs_error *err);
} tfs_hf_mmproj_class;

/* hf_mmproj_registry.c: the rows (one file each), NULL-terminated; the row of HF class cls
 * (NULL: none). */
extern const tfs_hf_mmproj_class *const tfs_hf_mmprojs[];
const tfs_hf_mmproj_class *tfs_hf_mmproj_find(const char *cls);

/*
 * The plan of the mmproj GGUF of the repo files reads, whose weights st holds (borrowed, as
 * tfs_hf_plan_open's).  TFS_PASSTHROUGH when the repo has no projector to show (a class
 * without one and no vision_config or audio_config: a text model; a config.json that
 * cannot be read, which the text model's view reports); else 0, or an error
 * naming the file and the problem (a multimodal class with no row: the class and the
 * classes that have one; a tensor the converter cannot map; a key it needs missing).
 */
int tfs_hf_mmproj_open(tfs_hf_plan **out, const tfs_hf_files *files, const tfs_model *st,
		       const tfs_hf_opts *o, tfs_error *err);

/* hf_mmproj_registry.c: the classes with a projector, comma-separated, into out (for
 * messages). */
void tfs_hf_mmproj_list(char *out, size_t cap);

/* hf_mmproj_keys.c, for the rows: clip.KEY from the vision (audio) config's first key of
 * keys (required: its absence is the converter's KeyError), and a clip.* array of the
 * numbers of preprocessor value v (float32, or int32 when all are integers, as gguf-py types
 * them). */
int tfs_hf_mm_vparam(tfs_hf_kvs *l, const tfs_hf_mm *mm, const char *key,
		     const char *const *keys, tfs_error *err);
int tfs_hf_mm_aparam(tfs_hf_kvs *l, const tfs_hf_mm *mm, const char *key,
		     const char *const *keys, tfs_error *err);
int tfs_hf_mm_numbers(tfs_hf_kvs *l, const tfs_hf_mm *mm, const char *key, const json_t *v,
		      const char *what, tfs_error *err);

/* hf_mmproj_parts.c, for a row's split hook: a fused qkv weight or bias t (1-D or 2-D, its
 * rows 3 x n) as three parts of n rows, named name with `from` replaced by to[0..2] (the
 * converters' modify_tensors: Qwen2.5-VL's, InternVL's); *n = 3.  An error naming the
 * tensor when its rows are not three equal parts (the converters assert it). */
int tfs_hf_mm_split_qkv(tfs_hf_mm_part *parts, size_t *n, const char *name,
			const tfs_tensor *t, const tfs_hf_mm *mm, const char *from,
			const char *const to[3], tfs_error *err);

#endif
