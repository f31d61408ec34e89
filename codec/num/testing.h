/*
 * testing.h - knobs for tests and benchmarks only (not part of the public API: tensorfs.h
 * does not include it).
 */
#ifndef TFS_TESTING_H
#define TFS_TESTING_H

#include <stdbool.h>

/* Tests and benchmarks: true makes tfs_quantize use only the portable scalar code (the
 * reference the SIMD kernels must match), false lets it choose again.  Not thread-safe. */
void tfs_quantize_set_scalar(bool scalar);

/* Whether tfs_quantize_set_scalar can change what tfs_quantize(_weighted) runs for type id:
 * false for the grid searches of quant_iq1.c, quant_iq2.c and quant_iq3.c, which call no
 * SIMD kernel (a test compares them once, not once per setting). */
bool tfs_quantize_has_simd(int id);

#endif
