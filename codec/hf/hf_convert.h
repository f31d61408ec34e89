/*
 * hf_convert.h - element conversions as llama.cpp's convert_hf_to_gguf.py computes them.
 *
 * Every conversion goes through float32, as the converter's does: the source to float32
 * exactly (BF16 as torch widens it, F16 as numpy does, NaN payloads kept), then float32 to
 * the output type:
 *   F16   numpy's astype(float16): nearest-even, NaN keeps its top payload bits (never quieted);
 *   BF16  gguf-py's BF16.quantize_blocks: NaN quieted (bit 22 set, low half dropped), else
 *         nearest-even;
 *   Q8_0  gguf-py's Q8_0.quantize_blocks on 32 values: d = max|x| / 127, q = x * (1/d)
 *         rounded half away from zero; d stored as F16 (numpy).
 *   | d: f16 | 32 x int8 q |   (34 bytes per 32 values)
 * Values are bit patterns (uint32_t) so no NaN payload is lost in a float register.
 */
#ifndef TFS_HF_CONVERT_H
#define TFS_HF_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* n source elements of dtype src_dtype (TFS_DT_F32, _F16 or _BF16, little-endian) at src
 * to float32 bit patterns. */
void tfs_hf_to_f32(uint32_t *dst, const uint8_t *src, int src_dtype, size_t n);
/* n float32 bit patterns to out_dtype (TFS_DT_F32, _F16, _BF16; or _Q8_0 with n a multiple
 * of 32) at dst, little-endian. */
void tfs_hf_from_f32(uint8_t *dst, int out_dtype, const uint32_t *src, size_t n);

uint16_t tfs_hf_f32_to_f16(uint32_t f);    /* numpy's npy_floatbits_to_halfbits */
uint32_t tfs_hf_f16_to_f32(uint16_t h);    /* numpy's npy_halfbits_to_floatbits */
uint16_t tfs_hf_f32_to_bf16(uint32_t f);   /* gguf-py's BF16 rounding */

#endif
