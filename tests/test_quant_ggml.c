/*
 * test_quant_ggml.c - tfs_quantize against ggml's own quantizers, bit for bit.
 *
 * libggml-base.so (from the npm package @node-llama-cpp/linux-x64, the directory in
 * $TFS_LLAMA_LIB) is loaded with dlopen; every case compares tfs_quantize with
 * ggml_quantize_chunk(type, ..., imatrix = NULL) (Q8_K and Q8_1, which ggml_quantize_chunk
 * does not take: quantize_row_q8_K_ref and quantize_row_q8_1_ref) on the same
 * floats, and the IQ types' tfs_quantize_weighted with ggml_quantize_chunk(type, ..., imatrix)
 * for several kinds of importance weights (and none, where ggml takes none).  Without the
 * library every case says SKIP.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensorfs.h"
#include "base/hex.h"
#include "num/testing.h"

typedef size_t (*chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
			   int64_t n_per_row, const float *imatrix);
typedef void (*row_fn)(const float *src, void *dst, int64_t k);
typedef uint16_t (*half_fn)(float f);
typedef bool (*needs_imatrix_fn)(int type);

static struct {
	void *lib;
	chunk_fn chunk;
	row_fn q8_k, q8_1;
	half_fn fp16;
	needs_imatrix_fn needs_imatrix;
	char why[2304];
	char lib_id[65];   /* SHA-256 of libggml-base.so: part of every cache key */
} g;

static bool load_ggml(void)
{
	const char *dir = getenv("TFS_LLAMA_LIB");
	char path[1024];

	if (g.lib)
		return true;
	snprintf(path, sizeof(path), "%s/libggml-base.so", dir ? dir : "(TFS_LLAMA_LIB unset)");
	g.lib = dir ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!g.lib) {
		snprintf(g.why, sizeof(g.why), "SKIP: libggml-base.so not loadable (%s): %s", path,
			 dir ? dlerror() : "TFS_LLAMA_LIB is not set");
		return false;
	}
	*(void **)&g.chunk = dlsym(g.lib, "ggml_quantize_chunk");
	*(void **)&g.q8_k = dlsym(g.lib, "quantize_row_q8_K_ref");
	*(void **)&g.q8_1 = dlsym(g.lib, "quantize_row_q8_1_ref");
	*(void **)&g.fp16 = dlsym(g.lib, "ggml_fp32_to_fp16");
	*(void **)&g.needs_imatrix = dlsym(g.lib, "ggml_quantize_requires_imatrix");
	cr_assert(g.chunk && g.q8_k && g.q8_1 && g.fp16 && g.needs_imatrix, "%s lacks a symbol", path);
	FILE *f = fopen(path, "rb");
	long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
	uint8_t *lib = n > 0 ? malloc((size_t)n) : NULL;

	if (lib && fseek(f, 0, SEEK_SET) == 0 && fread(lib, 1, (size_t)n, f) == (size_t)n)
		tfs_sha256_hex(g.lib_id, lib, (size_t)n);
	free(lib);
	if (f)
		fclose(f);
	return true;
}

#define NEED_GGML()                                   \
	do {                                          \
		if (!load_ggml())                     \
			cr_skip_test("%s", g.why);    \
	} while (0)

/* ==== inputs ==== */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void)
{
	uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform(void) { return ((double)(next_u64() >> 11) + 0.5) / 9007199254740992.0; }

static float normal(void)
{
	return (float)(sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

enum { D_NORMAL, D_CAUCHY, D_STUDENT3, D_ZERO, D_SUBNORMAL, D_HUGE, D_REPEAT, D_WIDE,
       D_TINY, D_SPARSE, D_HALVES, D_POSITIVE, D_NEGATIVE, D_MIXED_BLOCKS, D_COUNT };

static const char *const k_dist_names[D_COUNT] = {
	"normal", "cauchy", "student-t3", "zero", "subnormal", "huge", "repeated", "wide",
	"tiny", "sparse", "halves", "positive", "negative", "mixed-blocks",
};

static float sample(int dist, size_t i, float rep)
{
	switch (dist) {
	case D_NORMAL: return normal();
	case D_CAUCHY: return (float)tan(3.141592653589793 * (uniform() - 0.5));
	case D_STUDENT3: {
		float z = normal(), c = normal() * normal() + normal() * normal() + normal() * normal();
		return z / sqrtf(c / 3 + 1e-30f);
	}
	case D_ZERO: return (i & 1) ? 0.0f : -0.0f;
	case D_SUBNORMAL: return normal() * 1e-40f;
	case D_HUGE: return (next_u64() & 1 ? 1e30f : -1e30f) * (float)uniform();
	case D_REPEAT: return rep;
	case D_WIDE: return normal() * (float)pow(10.0, uniform() * 40 - 20);
	case D_TINY: return normal() * 1e-15f;
	case D_SPARSE: return uniform() < 0.9 ? 0.0f : normal();
	case D_HALVES: return (float)((int)(uniform() * 33) - 16) * 0.5f;
	case D_POSITIVE: return 3.0f + (float)uniform();
	case D_NEGATIVE: return -2.0f - normal() * normal();
	default:   /* each 32 values a different kind */
		return sample((int)((i / 32) % D_MIXED_BLOCKS), i, rep);
	}
}

static float *make_input(int dist, size_t n)
{
	float *x = malloc(n * sizeof(float));
	float rep = (float)((next_u64() & 1) ? 0.7 : -3.1e-3);

	cr_assert(x);
	for (size_t i = 0; i < n; i++)
		x[i] = sample(dist, i, rep);
	return x;
}

/* ==== the comparison ==== */

/* Under ASan (gcc's __SANITIZE_ADDRESS__, build-asan) bit_exact takes one input of each
 * kind and length, not three (and the weighted and IQ cases fewer kinds of weights:
 * KIND_COMPARED): gcov of a coverage build says the library's lines and branches these
 * cases take are the same either way.  The normal and clang builds compare them all. */
#ifdef __SANITIZE_ADDRESS__
enum { N_REPS = 1 };
#else
enum { N_REPS = 3 };
#endif

/* names by value: Criterion runs each case in a new process, where pointers would not hold */
typedef struct {
	char name[16];
} type_param;

static type_param k_types[] = {
	{ "F32" }, { "F16" }, { "BF16" }, { "Q4_0" }, { "Q4_1" }, { "Q5_0" }, { "Q5_1" }, { "Q8_0" },
	{ "Q8_1" }, { "Q2_K" }, { "Q3_K" }, { "Q4_K" }, { "Q5_K" }, { "Q6_K" }, { "Q8_K" }, { "IQ4_NL" },
	{ "IQ4_XS" }, { "TQ1_0" }, { "TQ2_0" }, { "MXFP4" }, { "NVFP4" }, { "Q1_0" }, { "Q2_0" },
};

static void ggml_quantize(int id, const float *x, void *dst, int64_t nrows, int64_t n_per_row)
{
	if (id == TFS_DT_Q8_K)
		g.q8_k(x, dst, nrows * n_per_row);
	else if (id == TFS_DT_Q8_1)
		g.q8_1(x, dst, nrows * n_per_row);
	else
		cr_assert_eq(g.chunk(id, x, dst, 0, nrows, n_per_row, NULL),
			     (size_t)nrows * (size_t)n_per_row / tfs_dtype(id)->block_elems *
				     tfs_dtype(id)->block_bytes);
}

static void compare_bytes(const tfs_dtype_info *t, const uint8_t *ours, const uint8_t *theirs,
			  size_t nbytes, const float *x, int dist, int64_t nrows, int64_t n_per_row,
			  int scalar);

/* Compares one input, quantized by each of tensorfs's code paths; returns the blocks
 * compared. */
static size_t compare_one(int id, int dist, int64_t nrows, int64_t n_per_row)
{
	const tfs_dtype_info *t = tfs_dtype(id);
	size_t n = (size_t)(nrows * n_per_row), nbytes = n / t->block_elems * t->block_bytes;
	float *x = make_input(dist, n);
	uint8_t *ours = malloc(nbytes), *theirs = calloc(1, nbytes);   /* ggml leaves a zero Q8_K
	                                                                 * block's sums unwritten */
	tfs_error err = { 0 };

	cr_assert(ours && theirs);
	ggml_quantize(id, x, theirs, nrows, n_per_row);
	for (int scalar = 0; scalar < 2; scalar++) {   /* the SIMD kernels (if any), the reference */
		memset(ours, 0xa5, nbytes);
		tfs_quantize_set_scalar(scalar);
		cr_assert_eq(tfs_quantize(ours, id, x, n, &err), 0, "%s: %s", t->name, err.msg);
		compare_bytes(t, ours, theirs, nbytes, x, dist, nrows, n_per_row, scalar);
	}
	tfs_quantize_set_scalar(false);
	free(x);
	free(ours);
	free(theirs);
	return nbytes / t->block_bytes;
}

static void compare_bytes(const tfs_dtype_info *t, const uint8_t *ours, const uint8_t *theirs,
			  size_t nbytes, const float *x, int dist, int64_t nrows, int64_t n_per_row,
			  int scalar)
{
	for (size_t off = 0; off < nbytes; off += t->block_bytes)
		if (memcmp(ours + off, theirs + off, t->block_bytes) != 0) {
			size_t blk = off / t->block_bytes, k = 0;

			while (ours[off + k] == theirs[off + k])
				k++;
			cr_assert_fail("%s (%s code), %s input, %lld x %lld: block %zu differs at byte "
				       "%zu (ours %02x, ggml %02x); its first value %a", t->name,
				       scalar ? "scalar" : "SIMD", k_dist_names[dist],
				       (long long)nrows, (long long)n_per_row, blk, k, ours[off + k],
				       theirs[off + k], (double)x[blk * t->block_elems]);
		}
}

ParameterizedTestParameters(quant_ggml, bit_exact)
{
	return cr_make_param_array(type_param, k_types, sizeof(k_types) / sizeof(k_types[0]));
}

ParameterizedTest(type_param *param, quant_ggml, bit_exact, .timeout = 120)
{
	const char *name = param->name;
	const int id = tfs_dtype_from_name(name);
	const int64_t be = tfs_dtype(id)->block_elems;
	const int64_t lens[] = { be, 256 > be ? 256 : 2 * be, 4096 };
	size_t blocks = 0;

	NEED_GGML();
	cr_assert(tfs_quantize_supported(id));
	cr_assert(!g.needs_imatrix(id), "ggml needs an imatrix for %s", name);
	for (int dist = 0; dist < D_COUNT; dist++)
		for (int l = 0; l < 3; l++)
			for (int rep = 0; rep < N_REPS; rep++)
				blocks += compare_one(id, dist, l == 2 ? 2 : 3, lens[l]);
	cr_log_info("%s: %zu blocks bit-identical", name, blocks);
}

/* The half-precision rounding every scale goes through, over a sweep of all float bits. */
Test(quant_ggml, half_rounding_matches)
{
	NEED_GGML();
	for (uint64_t u = 0; u <= 0xffffffffull; u += 251) {
		uint32_t bits = (uint32_t)u;
		float f;

		memcpy(&f, &bits, 4);
		if (f != f)
			continue;   /* ggml's F16C and portable paths differ on NaN payloads */
		uint16_t ours = tfs_f32_to_f16(f), theirs = g.fp16(f);

		if (ours != theirs)   /* (an assertion per value: Criterion's count, 17M times) */
			cr_assert_fail("%08x: ours %04x, ggml %04x", bits, ours, theirs);
	}
}

/* The same through tfs_quantize (F16C where the CPU has it), NaNs included, 2^20 at a time. */
Test(quant_ggml, half_rows_match)
{
	enum { N = 1 << 20 };
	float *x = malloc(N * sizeof(float));
	uint16_t *ours = malloc(N * 2), *theirs = malloc(N * 2);
	tfs_error err = { 0 };

	NEED_GGML();
	cr_assert(x && ours && theirs);
	for (uint64_t base = 0; base <= 0xffffffffull; base += (uint64_t)N * 61) {
		for (uint32_t i = 0; i < N; i++) {
			uint32_t bits = (uint32_t)(base + (uint64_t)i * 61);

			memcpy(&x[i], &bits, 4);
		}
		cr_assert_eq(g.chunk(TFS_DT_F16, x, theirs, 0, 1, N, NULL), (size_t)N * 2);
		cr_assert_eq(tfs_quantize(ours, TFS_DT_F16, x, N, &err), 0, "%s", err.msg);
		for (uint32_t i = 0; i < N; i++)   /* NaN: any quiet half */
			if (ours[i] != theirs[i] && (x[i] == x[i] || (ours[i] & 0x7fff) != 0x7e00))
				cr_assert_fail("%a: ours %04x, ggml %04x", (double)x[i], ours[i],
					       theirs[i]);
	}
	free(x);
	free(ours);
	free(theirs);
}

/* ggml refuses these without an imatrix; so does tensorfs, saying why.  The other IQ types
 * ggml quantizes without one (iq_bit_exact checks them). */
Test(quant_ggml, imatrix_types_refused)
{
	static const int ids[] = { TFS_DT_IQ2_XXS, TFS_DT_IQ2_XS, TFS_DT_IQ1_S };
	float x[256] = { 1.0f };
	uint8_t out[256];

	NEED_GGML();
	for (int id = 0; id < TFS_DT_GGML_COUNT; id++)
		if (tfs_dtype(id))
			cr_assert_eq(g.needs_imatrix(id), tfs_quantize_needs_imatrix(id),
				     "ggml and tensorfs disagree on whether %s needs an imatrix",
				     tfs_dtype(id)->name);
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		tfs_error err = { 0 };

		cr_assert(g.needs_imatrix(ids[i]));
		cr_assert_eq(tfs_quantize(out, ids[i], x, 256, &err), TFS_E_UNSUPPORTED);
		cr_assert(strstr(err.msg, "importance matrix"), "%s", err.msg);
	}
}

/* ==== the types that take importance weights (IQ1-IQ4), with and without them ==== */

/* IQ1_M with IQ1_S: ggml builds a grid's tables (iq2xs_init_impl) once per process, and
 * Criterion runs each case in a process of its own; IQ1_S's grid, which IQ1_M shares, took
 * 18 s of CPU in each of the two (with ggml's bytes not yet cached) */
typedef struct {
	char name[16];
	char also[16];   /* a type sharing name's grid tables, compared in the same process */
} iq_param;

static iq_param k_iq_types[] = {
	{ "IQ2_XXS", "" }, { "IQ2_XS", "" }, { "IQ2_S", "" }, { "IQ3_XXS", "" }, { "IQ3_S", "" },
	{ "IQ1_S", "IQ1_M" }, { "IQ4_NL", "" }, { "IQ4_XS", "" },
};

enum { W_UNIFORM, W_SQUARES, W_WIDE, W_SOME_ZERO, W_ONES, W_COUNT };

/* The kinds of weights the weighted and IQ cases compare: under ASan not uniform and squares
 * of normal (the IQ searches, 3-5 times slower there, were half of the test's CPU), whose
 * inputs are drawn all the same, so that the others' (and ggml's bytes of them, cached by
 * input) are the normal build's. */
#ifdef __SANITIZE_ADDRESS__
#define KIND_COMPARED(kind) ((kind) != W_UNIFORM && (kind) != W_SQUARES)
#else
#define KIND_COMPARED(kind) true
#endif

static const char *const k_weight_names[W_COUNT] = {
	"uniform", "squares of normal", "wide range", "some zero", "all one",
};

/* n_per_row importance weights of kind `kind` (an imatrix holds means of squares: >= 0). */
static float *make_weights(int kind, size_t n)
{
	float *w = malloc(n * sizeof(float));

	cr_assert(w);
	for (size_t i = 0; i < n; i++) {
		float z = normal();

		switch (kind) {
		case W_UNIFORM: w[i] = (float)uniform(); break;
		case W_SQUARES: w[i] = z * z; break;
		case W_WIDE: w[i] = (float)pow(10.0, uniform() * 12 - 6); break;
		case W_SOME_ZERO: w[i] = uniform() < 0.3 ? 0.0f : z * z; break;
		default: w[i] = 1.0f; break;
		}
	}
	return w;
}

/*
 * Inputs on which ggml's own quantizer aborts, which would kill the test: a NaN (student-t3's
 * sqrtf of a negative sum), or squares beyond FLT_MAX (huge, wide up to 1e20, mixed-blocks
 * holding both), turn its weights or errors into NaN or infinity, and its grid search then
 * hits GGML_ASSERT(grid_index >= 0), GGML_ASSERT(scale >= 0) or "Oops: found point ... not on
 * grid".  Not compared: tensorfs runs alone on them, and must answer with bytes or
 * TFS_E_INVALID (its encoders return -1 on exactly the blocks where ggml aborts: the helpers
 * who wrote them checked that block by block, ggml in a child process).  IQ2_XXS on
 * student-t3's NaNs writes zero blocks without aborting, and is compared.
 * without_weights_only: ggml aborts there only when given no importance weights.
 */
static const struct {
	const char *type;
	int dist;
	bool without_weights_only;
} k_ggml_aborts[] = {
	{ "IQ1_S", D_MIXED_BLOCKS, false }, { "IQ1_M", D_MIXED_BLOCKS, false },
	{ "IQ1_M", D_WIDE, true },
	{ "IQ2_XXS", D_HUGE, false }, { "IQ2_XXS", D_WIDE, false },
	{ "IQ2_XXS", D_MIXED_BLOCKS, false },
	{ "IQ2_XS", D_STUDENT3, false }, { "IQ2_XS", D_HUGE, false }, { "IQ2_XS", D_WIDE, false },
	{ "IQ2_XS", D_MIXED_BLOCKS, false },
	{ "IQ2_S", D_STUDENT3, false }, { "IQ2_S", D_HUGE, false }, { "IQ2_S", D_WIDE, false },
	{ "IQ2_S", D_MIXED_BLOCKS, false },
	{ "IQ3_XXS", D_STUDENT3, false }, { "IQ3_XXS", D_HUGE, false },
	{ "IQ3_XXS", D_WIDE, false }, { "IQ3_XXS", D_MIXED_BLOCKS, false },
	{ "IQ3_S", D_STUDENT3, false }, { "IQ3_S", D_HUGE, false }, { "IQ3_S", D_WIDE, false },
	{ "IQ3_S", D_MIXED_BLOCKS, false },
};

static bool ggml_aborts_on(const char *type, int dist, bool weighted)
{
	for (size_t i = 0; i < sizeof(k_ggml_aborts) / sizeof(k_ggml_aborts[0]); i++)
		if (strcmp(k_ggml_aborts[i].type, type) == 0 && k_ggml_aborts[i].dist == dist &&
		    !(weighted && k_ggml_aborts[i].without_weights_only))
			return true;
	return false;
}

/*
 * ggml_quantize_chunk(id, x, dst, 0, nrows, n_per_row, qw) through a cache of its bytes in
 * $TFS_GGML_CACHE (meson: build/refquant-cache/ggml, shared by the normal, sanitizer and
 * clang builds), keyed by the SHA-256 of the library, the arguments and the input.  ggml
 * builds an IQ type's grid tables the first time it quantizes to it (iq2xs_init_impl: a
 * qsort of every grid point's neighbours), 85% of this test's 45 s of CPU; each build ran it
 * again for the same bytes.  Without the variable (or the library's hash), no cache.
 */
static void ggml_chunk_cached(int id, const float *x, void *dst, int64_t nrows, int64_t n_per_row,
			      const float *qw, size_t nbytes)
{
	const char *dir = getenv("TFS_GGML_CACHE");
	size_t n = (size_t)(nrows * n_per_row), nw = qw ? (size_t)n_per_row : 0;
	char key[65], path[4096];

	if (dir && *dir && g.lib_id[0]) {
		int64_t head[4] = { id, nrows, n_per_row, qw != NULL };
		size_t kn = 64 + sizeof(head) + (n + nw) * sizeof(float);
		uint8_t *k = malloc(kn);

		cr_assert(k);
		memcpy(k, g.lib_id, 64);
		memcpy(k + 64, head, sizeof(head));
		memcpy(k + 64 + sizeof(head), x, n * sizeof(float));
		if (nw)
			memcpy(k + 64 + sizeof(head) + n * sizeof(float), qw, nw * sizeof(float));
		int hr = tfs_sha256_hex(key, k, kn);
		free(k);
		snprintf(path, sizeof(path), "%s/%s", dir, key);
		int fd = hr == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		if (fd >= 0) {
			ssize_t got = read(fd, dst, nbytes);
			char extra;
			bool whole = got == (ssize_t)nbytes && read(fd, &extra, 1) == 0;

			close(fd);
			if (whole)
				return;
		}
		cr_assert_eq(g.chunk(id, x, dst, 0, nrows, n_per_row, qw), nbytes);
		if (hr == 0) {   /* a temporary file renamed: a reader sees all of it or nothing */
			char tmp[4200];

			mkdir(dir, 0755);
			snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
			fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd >= 0) {
				bool ok = write(fd, dst, nbytes) == (ssize_t)nbytes;

				ok = close(fd) == 0 && ok;
				if (!ok || rename(tmp, path) != 0)
					unlink(tmp);
			}
		}
		return;
	}
	cr_assert_eq(g.chunk(id, x, dst, 0, nrows, n_per_row, qw), nbytes);
}

/* One input through ggml_quantize_chunk(id, ..., qw) and tfs_quantize_weighted, whole and
 * (with weights) from its second row on, as a part of a tensor is redone; returns the
 * blocks compared. */
static size_t compare_iq(int id, int dist, int64_t nrows, int64_t n_per_row, const float *qw,
			 const char *wname)
{
	const tfs_dtype_info *t = tfs_dtype(id);
	const size_t be = t->block_elems;
	size_t n = (size_t)(nrows * n_per_row), nb = n / be, nbytes = nb * t->block_bytes;
	float *x = make_input(dist, n);
	uint8_t *ours = malloc(nbytes), *theirs = calloc(1, nbytes);
	tfs_error err = { 0 };

	cr_assert(ours && theirs);
	if (ggml_aborts_on(t->name, dist, qw != NULL)) {   /* tensorfs alone: bytes or a refusal */
		int r = tfs_quantize_weighted(ours, id, x, n, 0, (uint64_t)n_per_row, qw, &err);

		cr_assert(r == 0 || (r == TFS_E_INVALID && strstr(err.msg, t->name)),
			  "%s, %s input, weights %s: %d %s", t->name, k_dist_names[dist], wname, r,
			  err.msg);
		free(x);
		free(ours);
		free(theirs);
		return 0;
	}
	ggml_chunk_cached(id, x, theirs, nrows, n_per_row, qw, nbytes);
	/* the SIMD kernels (IQ4, the K-quants), then the reference; a type without kernels
	 * (IQ1-IQ3) once: its second pass ran the same code, 45% of this test's CPU under ASan */
	const int passes = tfs_quantize_has_simd(id) ? 2 : 1;

	for (int scalar = 0; scalar < passes; scalar++) {
		memset(ours, 0xa5, nbytes);
		tfs_quantize_set_scalar(scalar);
		int rc = tfs_quantize_weighted(ours, id, x, n, 0, (uint64_t)n_per_row, qw, &err);

		tfs_quantize_set_scalar(false);
		cr_assert_eq(rc, 0, "%s, %s input, weights %s: %s", t->name, k_dist_names[dist],
			     wname, err.msg);
		for (size_t b = 0; b < nb; b++)
			if (memcmp(ours + b * t->block_bytes, theirs + b * t->block_bytes,
				   t->block_bytes) != 0) {
				size_t k = 0;

				while (ours[b * t->block_bytes + k] == theirs[b * t->block_bytes + k])
					k++;
				cr_assert_fail("%s (%s code), %s input, weights %s, %lld x %lld: block "
					       "%zu differs at byte %zu (ours %02x, ggml %02x)", t->name,
					       scalar ? "scalar" : "SIMD", k_dist_names[dist], wname,
					       (long long)nrows, (long long)n_per_row, b, k,
					       ours[b * t->block_bytes + k],
					       theirs[b * t->block_bytes + k]);
			}
	}
	if (qw && nrows > 1) {   /* rows 1.. alone, as requant redoes a run of blocks */
		size_t skip = (size_t)n_per_row / be + 1 < nb ? (size_t)n_per_row / be + 1 : 1;

		if (tfs_quantize_weighs_rows(id)) {   /* whole rows only: and a part of one */
			const float s2 = tfs_quantize_row_sigma2(x + n_per_row, (uint64_t)n_per_row);

			skip = (size_t)n_per_row / be;
			cr_assert_eq(tfs_quantize_weighted(ours, id, x + be, n - be, be,
							   (uint64_t)n_per_row, qw, &err), TFS_E_INVALID);
			cr_assert(strstr(err.msg, "whole rows"), "%s", err.msg);
			memset(ours, 0x5a, nbytes);
			cr_assert_eq(tfs_quantize_weighted_part(ours, id, x + n_per_row + be,
								(size_t)n_per_row - be,
								(uint64_t)n_per_row + be,
								(uint64_t)n_per_row, qw, s2, &err), 0,
				     "%s", err.msg);
			cr_assert(memcmp(ours, theirs + (skip + 1) * t->block_bytes,
					 (skip - 1) * t->block_bytes) == 0,
				  "%s, weights %s: a part of row 1 differs from the whole", t->name,
				  wname);
		}

		memset(ours, 0x5a, nbytes);
		cr_assert_eq(tfs_quantize_weighted(ours, id, x + be * skip, n - be * skip,
						   be * skip, (uint64_t)n_per_row, qw, &err), 0,
			     "%s", err.msg);
		cr_assert(memcmp(ours, theirs + skip * t->block_bytes,
				 nbytes - skip * t->block_bytes) == 0,
			  "%s, weights %s: a part from block %zu differs from the whole", t->name,
			  wname, skip);
	}
	free(x);
	free(ours);
	free(theirs);
	return nb;
}


/* ==== the types ggml fits otherwise with importance weights (Q4_0..Q5_1, Q2_K..Q6_K) ==== */

static type_param k_weighted_types[] = {
	{ "Q4_0" }, { "Q4_1" }, { "Q5_0" }, { "Q5_1" }, { "Q2_K" }, { "Q3_K" }, { "Q4_K" },
	{ "Q5_K" }, { "Q6_K" },
};

ParameterizedTestParameters(quant_ggml, weighted_bit_exact)
{
	return cr_make_param_array(type_param, k_weighted_types,
				   sizeof(k_weighted_types) / sizeof(k_weighted_types[0]));
}

ParameterizedTest(type_param *param, quant_ggml, weighted_bit_exact, .timeout = 300)
{
	const int id = tfs_dtype_from_name(param->name);
	const bool rows = tfs_quantize_weighs_rows(id);
	const int64_t lens[] = { rows ? 96 : 256, 512, 2048 };
	size_t blocks = 0;

	NEED_GGML();
	cr_assert(tfs_quantize_takes_imatrix(id) && tfs_quantize_supported(id));
	cr_assert(rows != tfs_quantize_weighs_blocks(id));
	for (int dist = 0; dist < D_COUNT; dist++)
		for (int l = 0; l < 3; l++)
			for (int kind = 0; kind < W_COUNT; kind++) {
				float *qw = make_weights(kind, (size_t)lens[l]);

				if (KIND_COMPARED(kind))
					blocks += compare_iq(id, dist, l == 2 ? 2 : 3, lens[l], qw,
							    k_weight_names[kind]);
				else   /* (its input drawn, as compare_iq draws it) */
					free(make_input(dist, (size_t)((l == 2 ? 2 : 3) * lens[l])));
				free(qw);
			}
	cr_log_info("%s: %zu blocks bit-identical with weights", param->name, blocks);
}

ParameterizedTestParameters(quant_ggml, iq_bit_exact)
{
	return cr_make_param_array(iq_param, k_iq_types, sizeof(k_iq_types) / sizeof(k_iq_types[0]));
}

/* The blocks of type `name` bit-identical with ggml's, with and without weights. */
static size_t iq_compare_all(const char *name)
{
	const int id = tfs_dtype_from_name(name);
	const int64_t lens[] = { 256, 512, 2048 };
	size_t blocks = 0;

	cr_assert(tfs_quantize_takes_imatrix(id) && tfs_quantize_supported(id));
	for (int dist = 0; dist < D_COUNT; dist++)
		for (int l = 0; l < 3; l++) {
			const int64_t nrows = l == 2 ? 2 : 3;

			for (int kind = 0; kind < W_COUNT; kind++) {
				float *qw = make_weights(kind, (size_t)lens[l]);

				if (KIND_COMPARED(kind))
					blocks += compare_iq(id, dist, nrows, lens[l], qw,
							    k_weight_names[kind]);
				else   /* (its input drawn, as compare_iq draws it) */
					free(make_input(dist, (size_t)(nrows * lens[l])));
				free(qw);
			}
			if (!g.needs_imatrix(id))
				blocks += compare_iq(id, dist, nrows, lens[l], NULL, "none");
		}
	return blocks;
}

ParameterizedTest(iq_param *param, quant_ggml, iq_bit_exact, .timeout = 300)
{
	NEED_GGML();
	cr_log_info("%s: %zu blocks bit-identical", param->name, iq_compare_all(param->name));
	if (param->also[0])
		cr_log_info("%s: %zu blocks bit-identical", param->also, iq_compare_all(param->also));
}
