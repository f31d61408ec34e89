/*
 * bench_quant.c - single-thread quantization speed: tensorfs against ggml, side by side.
 *
 * The same 64 MiB of float32 (normal values, every 97th one scaled by 30 for outliers) are
 * quantized to each type by tfs_quantize and by ggml_quantize_chunk (imatrix NULL; Q8_K and
 * Q8_1: quantize_row_q8_K_ref and quantize_row_q8_1_ref) from libggml-base.so, loaded with dlopen from $TFS_LLAMA_LIB
 * (default: build/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64).  The two are
 * timed alternately, best of -r rounds, and their outputs must be identical (else the type
 * is reported as DIFFERS and the exit status is 1).  Prints MB/s of float32 input and
 * tensorfs / ggml.  The IQ1/IQ2/IQ3 types are quantized with an importance matrix (one
 * weight per column of the ROW-value rows, squares of normal values, as an imatrix holds) on
 * both sides, over the first IQ_MIB MiB only: their grid searches run at a few MB/s (IQ4_NL
 * and IQ4_XS take the weights too, and the same share).  Q4_0..Q5_1 and Q2_K..Q6_K, which
 * ggml fits by another search with an importance matrix, are timed twice: without one, and
 * with the same weights (the line TYPE+im), over the whole input.
 *
 * usage: bench_quant [-r rounds] [-m MiB] [TYPE...]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "tensorfs.h"

#define DEFAULT_LIB_DIR "build/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
#define ROW 4096   /* elements per row handed to ggml (a multiple of every block size) */
#define IQ_MIB 4   /* the IQ types' share of the input */

static float g_qw[ROW];   /* the IQ types' importance weights */

typedef size_t (*chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
			   int64_t n_per_row, const float *imatrix);
typedef void (*row_fn)(const float *src, void *dst, int64_t k);

static chunk_fn g_chunk;
static row_fn g_q8_k, g_q8_1;

static int load_ggml(void)
{
	const char *dir = getenv("TFS_LLAMA_LIB");
	char path[4096];
	void *lib;

	snprintf(path, sizeof(path), "%s/libggml-base.so", dir ? dir : DEFAULT_LIB_DIR);
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "bench_quant: %s\n(install the npm package @node-llama-cpp/linux-x64 "
			"with scripts/setup.sh, or set TFS_LLAMA_LIB)\n", dlerror());
		return -1;
	}
	*(void **)&g_chunk = dlsym(lib, "ggml_quantize_chunk");
	*(void **)&g_q8_k = dlsym(lib, "quantize_row_q8_K_ref");
	*(void **)&g_q8_1 = dlsym(lib, "quantize_row_q8_1_ref");
	if (!g_chunk || !g_q8_k || !g_q8_1) {
		fprintf(stderr, "bench_quant: %s lacks ggml_quantize_chunk\n", path);
		return -1;
	}
	return 0;
}

static void fill(float *x, size_t n)
{
	uint64_t s = 0x243f6a8885a308d3ull;

	for (size_t i = 0; i < n; i += 2) {
		double u1, u2;

		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		u1 = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		u2 = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
		x[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
		x[i + 1] = (float)(sqrt(-2 * log(u1)) * sin(6.283185307179586 * u2));
	}
	for (size_t i = 0; i < n; i += 97)
		x[i] *= 30.0f;
}

static double time_ggml(int id, const float *qw, const float *x, void *out, size_t n)
{
	double t = bench_now();

	if (id == TFS_DT_Q8_K)
		g_q8_k(x, out, (int64_t)n);
	else if (id == TFS_DT_Q8_1)   /* which ggml_quantize_chunk does not take */
		g_q8_1(x, out, (int64_t)n);
	else
		g_chunk(id, x, out, 0, (int64_t)(n / ROW), ROW, qw);
	return bench_now() - t;
}

static double time_ours(int id, const float *qw, const float *x, void *out, size_t n)
{
	tfs_error err = { 0 };
	double t = bench_now();

	if (tfs_quantize_weighted(out, id, x, n, 0, ROW, qw, &err) != 0) {
		fprintf(stderr, "bench_quant: %s\n", err.msg);
		exit(1);
	}
	return bench_now() - t;
}

static bool is_k_quant(int id)
{
	return id >= TFS_DT_Q2_K && id <= TFS_DT_Q8_K;
}

static bool wanted(const char *name, int argc, char **argv)
{
	if (optind >= argc)
		return true;
	for (int a = optind; a < argc; a++)
		if (strcmp(argv[a], name) == 0)
			return true;
	return false;
}

/* One type, with the weights qw (or none), over ni values; false when the bytes differ. */
static bool bench_type(int id, const float *qw, const float *x, uint8_t *ours, uint8_t *theirs,
		       size_t ni, int rounds)
{
	const tfs_dtype_info *t = tfs_dtype(id);
	const size_t nbytes = ni / t->block_elems * t->block_bytes;
	const bool iq = tfs_quantize_takes_imatrix(id) && !tfs_quantize_weighs_blocks(id) &&
			!tfs_quantize_weighs_rows(id);
	double best_g = 1e30, best_t = 1e30;
	char name[32];

	memset(theirs, 0, nbytes);   /* ggml leaves a zero Q8_K block's sums unwritten */
	for (int r = 0; r < rounds; r++) {
		double a = time_ggml(id, qw, x, theirs, ni), b = time_ours(id, qw, x, ours, ni);

		best_g = a < best_g ? a : best_g;
		best_t = b < best_t ? b : best_t;
	}
	const double want = is_k_quant(id) ? 2.0 : 1.0, ratio = best_g / best_t;
	const bool same = memcmp(ours, theirs, nbytes) == 0;

	snprintf(name, sizeof(name), "%s%s", t->name, qw && !iq ? "+im" : "");
	printf("%-8s %11.1f %11.1f %8.2fx %6.1fx %s\n", name, ni * 4 / best_g / 1e6,
	       ni * 4 / best_t / 1e6, ratio, want,
	       !same ? "DIFFERS" : ratio < want ? "below target" : "");
	fflush(stdout);
	return same;
}

int main(int argc, char **argv)
{
	int rounds = 3, opt, status = 0;
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
	if (rounds < 1 || mib < 1 || load_ggml() != 0)
		return 2;

	const size_t n = (mib << 20) / 4 / ROW * ROW;
	float *x = bench_alloc("bench_quant", n * 4);
	uint8_t *ours = bench_alloc("bench_quant", n * 4), *theirs = bench_alloc("bench_quant", n * 4);

	fill(x, n);
	for (size_t i = 0; i < ROW; i++)
		g_qw[i] = x[i] * x[i] + x[ROW + i] * x[ROW + i];
	printf("%zu MiB of float32 (IQ types: %zu MiB, with an imatrix), one thread, best of %d\n",
	       n * 4 >> 20, n * 4 >> 20 < IQ_MIB ? n * 4 >> 20 : IQ_MIB, rounds);
	printf("%-8s %11s %11s %9s %7s %s\n", "type", "ggml MB/s", "tfs MB/s", "tfs/ggml", "target",
	       "");
	for (int id = 0; id < TFS_DT_GGML_COUNT; id++) {
		const tfs_dtype_info *t = tfs_dtype(id);

		if (!t || !tfs_quantize_supported(id) || (id >= TFS_DT_I8 && id <= TFS_DT_F64) ||
		    !wanted(t->name, argc, argv))
			continue;
		const bool refit = tfs_quantize_weighs_blocks(id) || tfs_quantize_weighs_rows(id);
		const bool iq = tfs_quantize_takes_imatrix(id) && !refit;
		const size_t ni = iq && n > ((size_t)IQ_MIB << 18) ? (size_t)IQ_MIB << 18 : n;

		if (!bench_type(id, iq ? g_qw : NULL, x, ours, theirs, ni, rounds))
			status = 1;
		if (refit && !bench_type(id, g_qw, x, ours, theirs, n, rounds))
			status = 1;
	}
	free(x);
	free(ours);
	free(theirs);
	return status;
}
