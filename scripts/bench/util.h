/*
 * util.h - what the C benchmarks share (header only).
 */
#ifndef TFS_BENCH_UTIL_H
#define TFS_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n bytes, every page faulted in before timing (non-zero: no calloc folding); exits with a
 * message naming prog when there is no memory. */
static inline void *bench_alloc(const char *prog, size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fprintf(stderr, "%s: out of memory (%zu bytes)\n", prog, n);
		exit(1);
	}
	memset(p, 0x5a, n);
	return p;
}

#endif
