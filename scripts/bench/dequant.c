/*
 * bench_dequant.c - single-thread float32 conversion speed, against memcpy.
 *
 * For each type: fill an input with real blocks (the type's test vector,
 * tiled; random bytes for types without one), then convert it into a 64 MiB
 * float32 output, 1 MiB of output per call, as a FUSE read would.  A memcpy
 * of the same 64 MiB output (from another 64 MiB buffer, in 1 MiB calls) is
 * timed right before every kernel run, and each figure is the best of
 * several interleaved rounds, so the ratio compares like with like on a noisy
 * machine.  Prints GB/s of float32 produced (fast kernel and scalar
 * reference) and fast / memcpy.
 *
 * usage: bench_dequant [-r rounds] [-m MiB] [TYPE...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "tensorfs.h"

#ifndef TFS_TESTDATA
#define TFS_TESTDATA "tests/data"
#endif

#define CHUNK (1u << 20) /* output bytes per call */

/* Fills in[0, n) with the type's vector blocks, tiled; false if there is no vector. */
static bool fill_from_vector(const char *name, uint8_t *in, size_t n)
{
	char path[4096];
	FILE *f;
	uint8_t buf[1 << 16];
	size_t len;

	snprintf(path, sizeof(path), "%s/vectors/%s.cquant.bin", TFS_TESTDATA, name);
	f = fopen(path, "rb");
	if (!f) {
		snprintf(path, sizeof(path), "%s/vectors/%s.bin", TFS_TESTDATA, name);
		f = fopen(path, "rb");
	}
	if (!f)
		return false;
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (len == 0)
		return false;
	for (size_t off = 0; off < n; off += len)
		memcpy(in + off, buf, n - off < len ? n - off : len);
	return true;
}

static void fill_random(uint8_t *in, size_t n)
{
	uint64_t s = 0x243f6a8885a308d3ull;

	for (size_t i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		in[i] = (uint8_t)s;
	}
}

static double time_memcpy(float *dst, const float *src, size_t out_bytes)
{
	double t = bench_now();

	for (size_t off = 0; off < out_bytes; off += CHUNK)
		memcpy((char *)dst + off, (const char *)src + off, CHUNK);
	return bench_now() - t;
}

static double time_kernel(tfs_to_f32_fn fn, const tfs_dtype_info *t, float *dst, const uint8_t *in,
			  size_t out_bytes)
{
	const size_t out_per_block = (size_t)t->block_elems * t->f32_per_elem * 4;
	const size_t blocks = CHUNK / out_per_block;
	double tm = bench_now();

	for (size_t off = 0, b = 0; off < out_bytes; off += CHUNK, b += blocks)
		fn(in + b * t->block_bytes, (float *)((char *)dst + off), blocks);
	return bench_now() - tm;
}

static const char *target_of(int id, double *ratio)
{
	switch (id) {
	case TFS_DT_F16: case TFS_DT_BF16: case TFS_DT_Q4_0: case TFS_DT_Q8_0:
	case TFS_DT_Q4_K: case TFS_DT_Q5_K: case TFS_DT_Q6_K:
		*ratio = 1.0;
		return "1.0x";
	case TFS_DT_Q4_1: case TFS_DT_Q5_0: case TFS_DT_Q5_1: case TFS_DT_Q8_1:
	case TFS_DT_Q2_K: case TFS_DT_Q3_K: case TFS_DT_Q8_K:
		*ratio = 0.5;
		return "0.5x";
	case TFS_DT_IQ1_S: case TFS_DT_IQ1_M: case TFS_DT_IQ2_XXS: case TFS_DT_IQ2_XS:
	case TFS_DT_IQ2_S: case TFS_DT_IQ3_XXS: case TFS_DT_IQ3_S: case TFS_DT_IQ4_NL:
	case TFS_DT_IQ4_XS: case TFS_DT_TQ1_0: case TFS_DT_TQ2_0: case TFS_DT_MXFP4:
	case TFS_DT_NVFP4: case TFS_DT_F4:
		*ratio = 0.25;
		return "0.25x";
	default:
		*ratio = 0;
		return "-";
	}
}

int main(int argc, char **argv)
{
	int rounds = 5, opt;
	size_t mib = 64;

	while ((opt = getopt(argc, argv, "r:m:")) != -1) {
		if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'm')
			mib = (size_t)atol(optarg);
		else {
			fprintf(stderr, "usage: %s [-r rounds] [-m MiB] [TYPE...]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || mib < 1) {
		fprintf(stderr, "bench_dequant: bad -r / -m\n");
		return 2;
	}

	const size_t out_bytes = mib << 20;
	float *dst = bench_alloc("bench_dequant", out_bytes), *msrc = bench_alloc("bench_dequant", out_bytes);
	size_t in_cap = 0;
	uint8_t *in = NULL;
	int misses = 0;

	printf("%-12s %9s %9s %9s %8s %7s %s\n", "type", "fast GB/s", "ref GB/s", "memcpy", "x memcpy",
	       "target", "");
	for (int id = 0; id < TFS_DT_END; id++) {
		const tfs_dtype_info *t = tfs_dtype(id);

		if (!t || !t->to_f32)
			continue;
		if (optind < argc) {
			bool wanted = false;

			for (int a = optind; a < argc; a++)
				wanted |= strcmp(argv[a], t->name) == 0;
			if (!wanted)
				continue;
		}

		const size_t nblocks = out_bytes / ((size_t)t->block_elems * t->f32_per_elem * 4);
		const size_t in_bytes = nblocks * t->block_bytes;
		if (in_bytes > in_cap) {
			free(in);
			in = bench_alloc("bench_dequant", in_bytes);
			in_cap = in_bytes;
		}
		if (!fill_from_vector(t->name, in, in_bytes))
			fill_random(in, in_bytes);

		double best_fast = 1e30, best_ref = 1e30, best_copy = 1e30;
		for (int r = 0; r < rounds; r++) {
			double c = time_memcpy(dst, msrc, out_bytes);
			double f = time_kernel(t->to_f32, t, dst, in, out_bytes);

			best_copy = c < best_copy ? c : best_copy;
			best_fast = f < best_fast ? f : best_fast;
			if (t->to_f32 != t->to_f32_ref && r < 2) {
				double s = time_kernel(t->to_f32_ref, t, dst, in, out_bytes);

				best_ref = s < best_ref ? s : best_ref;
			}
		}
		if (t->to_f32 == t->to_f32_ref)
			best_ref = best_fast;

		double want, gb = (double)out_bytes / 1e9;
		const char *target = target_of(id, &want);
		double ratio = best_copy / best_fast;
		bool miss = want > 0 && ratio < want;

		misses += miss;
		printf("%-12s %9.2f %9.2f %9.2f %7.2fx %7s %s\n", t->name, gb / best_fast, gb / best_ref,
		       gb / best_copy, ratio, target, miss ? "MISS" : "");
		fflush(stdout);
	}
	free(in);
	free(dst);
	free(msrc);
	printf("%d type(s) below target\n", misses);
	return 0;
}
