/*
 * hf_gptoss.h - GPT-OSS (GptOssForCausalLM) in the GGUF view, as llama.cpp de3ff81's
 * converter writes it (conversion/gpt_oss.py): the row (tfs_hf_arch_gptoss, in
 * tfs_hf_archs[]), and the reader of the tensors it computes its own way (tfs_hf_own,
 * hf_arch.h).
 *
 * The checkpoint's experts are fused per layer: mlp.experts.gate_up_proj and down_proj,
 * either MXFP4 (uint8 *_blocks [E, rows, cols/32, 16], two FP4 codes a byte, element 2i in
 * the low nibble; uint8 e8m0 *_scales [E, rows, cols/32]) or dequantized ([E, in, out]).
 *  - MXFP4: generate_extra_tensors writes them first, before any other tensor, in reading
 *    order (a layer's at its *_scales): ffn_down_exps, then ffn_gate_exps (gate_up's even
 *    rows) and ffn_up_exps (odd rows), ggml MXFP4 whatever the outtype: per 32 values the
 *    scale byte, then 16 bytes, byte j = element j | element j + 16 << 4.  With
 *    quantization_config.quant_method "mxfp4", general.file_type F32/F16/BF16 becomes
 *    MOSTLY_MXFP4_MOE (38).
 *  - dequantized: at their place, transposed to [E, out, in]; gate_up's even columns are
 *    gate, odd ones up; converted to the outtype.
 *  - gate_up_proj_bias [E, 2 ff]: even columns ffn_gate_exps.bias, odd ffn_up_exps.bias;
 *    down_proj_bias: ffn_down_exps.bias; F32 as every bias.
 *  - self_attn.sinks (no suffix): blk.N.attn_sinks.weight, F32.
 * The computed tensors are read in bounded steps of whole output rows (tfs_hf_own_read).
 */
#ifndef TFS_HF_GPTOSS_H
#define TFS_HF_GPTOSS_H

#include "hf_plan.h"


/* Bytes [off, end) of t (own.kind != NONE) computed from st's tensors into o: 0 or an error. */
int tfs_hf_own_read(const tfs_model *st, const tfs_hf_tensor *t, uint64_t off, uint64_t end,
		    uint8_t *o, tfs_error *err);

#endif
