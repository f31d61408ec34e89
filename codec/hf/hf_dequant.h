/*
 * hf_dequant.h - quantized checkpoints as llama.cpp de3ff81's converter reads them
 * (ModelBase.dequant_model, conversion/base.py): config.json's quantization_config names a
 * method, and the method's weights are dequantized to float32 before any class sees them.
 *
 * Here that is a model in front of the repo's safetensors model, with the same tensors at the
 * same indices: a quantized weight is an F32 tensor of the shape the converter computes,
 * whose bytes a computed source makes on read (in bounded steps, never a whole tensor); the
 * method's other tensors (scales, activation scales) are deleted.  The plan (hf_plan.c)
 * reads that model instead of the repo's: every class (dense, MoE, DeepSeek's slices,
 * GPT-OSS) sees float32 weights, as the converter's classes do.  The methods are the rows of
 * one table in hf_dequant.c.
 */
#ifndef TFS_HF_DEQUANT_H
#define TFS_HF_DEQUANT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "hf_keys.h"
#include "model.h"

typedef struct tfs_hf_deq tfs_hf_deq;

/*
 * The dequantized model of st for config (config.json's root; where names it; files: the
 * repo's, for ModelOpt's hf_quant_config.json, which prepare_tensors reads where
 * quantization_config has no quant_algo or quantized_layers; may be NULL), or *out NULL
 * when the converter dequantizes nothing (no quantization_config, or a method a class reads
 * itself: GPT-OSS's mxfp4).  st is borrowed and must outlive *out.  An error (one line
 * naming the method and the tensor) for what the converter refuses or cannot read.
 */
int tfs_hf_deq_open(tfs_hf_deq **out, const tfs_model *st, json_t *config,
		    const tfs_hf_files *files, const char *where, tfs_error *err);
void tfs_hf_deq_free(tfs_hf_deq *d);

/* The model the plan reads: tensor i is st's tensor i, dequantized (or deleted). */
const tfs_model *tfs_hf_deq_model(const tfs_hf_deq *d);
/* Whether tensor i is computed (dequantized): never a splice of the repo's bytes. */
bool tfs_hf_deq_computed(const tfs_hf_deq *d, size_t i);
/* Whether tensor i is a new tensor of the converter (new_tensors: GPTQ's and
 * pack-quantized weights, renamed X.weight), which comes after all the repo's tensors. */
bool tfs_hf_deq_late(const tfs_hf_deq *d, size_t i);
/* Whether tensor i was an FP8 weight (the converter's _fp8_dequantized: --fp8-as-q8). */
bool tfs_hf_deq_fp8(const tfs_hf_deq *d, size_t i);

/*
 * NVFP4 (prepare_tensors' _is_nvfp4: ModelOpt quant_algo NVFP4 / W4A16_NVFP4, or
 * compressed-tensors nvfp4-pack-quantized): each weight whose X.weight_scale has two axes
 * is no tensor of the dequantized model (deleted there with its scales); the plan writes it
 * first, repacked to ggml's NVFP4 (_generate_nvfp4_tensors: hf_nvfp4.h).  Its tensors in st:
 */
typedef struct {
	long scale;      /* X.weight_scale: F8_E4M3 (or U8) [rows, cols / 16]; -1: not NVFP4 */
	long scale2;     /* X.weight_scale_2 (compressed-tensors: X.weight_global_scale), or -1 */
	long input;      /* X.input_scale (compressed-tensors: X.input_global_scale), or -1 */
	bool inverse;    /* compressed-tensors: scale2 and input are 1 / the tensor's values */
} tfs_hf_nvfp4_src;
/* Whether the repo is NVFP4 (general.file_type MOSTLY_NVFP4 at f32/f16/bf16). */
bool tfs_hf_deq_is_nvfp4(const tfs_hf_deq *d);
/* Tensor i's NVFP4 sources (i the weight: X.weight, compressed-tensors' X.weight_packed), or
 * NULL when it is no NVFP4 weight. */
const tfs_hf_nvfp4_src *tfs_hf_deq_nvfp4(const tfs_hf_deq *d, size_t i);

#endif
