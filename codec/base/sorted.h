/*
 * sorted.h - the one search of a sorted array of offsets (codec-private): which piece of a
 * concatenation (model/concat.c) or which recorded mark of index.json's text
 * (model/index.c) holds a byte.
 */
#ifndef TFS_SORTED_H
#define TFS_SORTED_H

#include <stddef.h>
#include <stdint.h>

/* The last k < n with a[k] <= x, a sorted ascending (0 when none is, or n is 0). */
static inline size_t tfs_last_at_most(const uint64_t *a, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (a[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

#endif
