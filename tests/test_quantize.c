/*
 * test_quantize.c - the quantized view (codec/views/quantize*.c) without a mount: its
 * tensors' bytes are what tfs_tensor_convert makes of the source's (the comparison with
 * llama.cpp itself is tests/mount/test_quantize.py and tests/quant/check.py), read by many
 * threads at once on first read, from the cache by a second view, and computed range by
 * range where no cache can be written; the view's keys and layout are the plan's; with a
 * bound on the cache (cache_size), the least recently used files go first, the bytes read
 * stay right, and a tensor larger than the bound is computed on each read.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tensorfs.h"
#include "qplan.h"

static char tmpdir[64];

static void setup(void)
{
	strcpy(tmpdir, "/tmp/test_quantize.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

static void put(tfs_buf *b, const void *p, size_t n) { cr_assert_eq(tfs_buf_append(b, p, n), 0); }
static void put_u32(tfs_buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(tfs_buf *b, uint64_t v) { put(b, &v, 8); }

static void put_str(tfs_buf *b, const char *s)
{
	put_u64(b, strlen(s));
	put(b, s, strlen(s));
}

typedef struct {
	const char *name;
	int dtype;
	int64_t ne0, ne1;
} tspec;

/* A llama model of 3 layers (F16 weights of rows of 256 and 96, F32 norms), random values
 * (a fixed seed), as a GGUF file under tmpdir; its path into path. */
static void write_model(char *path, size_t cap)
{
	static const tspec t[] = {
		{ "token_embd.weight", TFS_DT_F16, 256, 64 },
		{ "blk.0.attn_norm.weight", TFS_DT_F32, 256, 1 },
		{ "blk.0.attn_q.weight", TFS_DT_F16, 256, 256 },
		{ "blk.0.attn_v.weight", TFS_DT_F16, 256, 128 },
		{ "blk.0.ffn_down.weight", TFS_DT_F16, 96, 256 },
		{ "blk.1.attn_norm.weight", TFS_DT_F32, 256, 1 },
		{ "blk.1.attn_q.weight", TFS_DT_F16, 256, 256 },
		{ "blk.1.attn_v.weight", TFS_DT_F16, 256, 128 },
		{ "blk.1.ffn_down.weight", TFS_DT_F16, 96, 256 },
		{ "blk.2.attn_q.weight", TFS_DT_F16, 256, 1024 },
		{ "blk.2.attn_v.weight", TFS_DT_F16, 256, 128 },
		{ "blk.2.ffn_down.weight", TFS_DT_F16, 96, 256 },
		{ "output_norm.weight", TFS_DT_F32, 256, 1 },
		{ "output.weight", TFS_DT_F16, 256, 64 },
	};
	const size_t nt = sizeof(t) / sizeof(t[0]);
	tfs_buf b = { 0 };
	put(&b, "GGUF", 4);
	put_u32(&b, 3);
	put_u64(&b, nt);
	put_u64(&b, 4);
	const char *ks[] = { "llama.block_count", "llama.attention.head_count",
			     "llama.attention.head_count_kv" };
	const uint32_t vs[] = { 3, 4, 2 };
	put_str(&b, "general.architecture");
	put_u32(&b, TFS_GGUF_STRING);
	put_str(&b, "llama");
	for (int k = 0; k < 3; k++) {
		put_str(&b, ks[k]);
		put_u32(&b, TFS_GGUF_UINT32);
		put_u32(&b, vs[k]);
	}
	uint64_t off = 0, nbytes[sizeof(t) / sizeof(t[0])];
	for (size_t i = 0; i < nt; i++) {
		const bool vec = t[i].ne1 == 1;
		put_str(&b, t[i].name);
		put_u32(&b, vec ? 1 : 2);
		put_u64(&b, (uint64_t)t[i].ne0);
		if (!vec)
			put_u64(&b, (uint64_t)t[i].ne1);
		put_u32(&b, (uint32_t)t[i].dtype);
		put_u64(&b, off);
		nbytes[i] = (uint64_t)(t[i].ne0 * t[i].ne1) * (t[i].dtype == TFS_DT_F32 ? 4 : 2);
		off += (nbytes[i] + 31) / 32 * 32;
	}
	while (b.len % 32)
		put(&b, "", 1);
	uint64_t seed = 25;
	for (size_t i = 0; i < nt; i++) {
		for (uint64_t k = 0; k < nbytes[i]; k += t[i].dtype == TFS_DT_F32 ? 4 : 2) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			float f = ((float)(seed >> 40) / (float)(1u << 24) - 0.5f) * 0.1f;
			if (t[i].dtype == TFS_DT_F32) {
				put(&b, &f, 4);
			} else {
				uint16_t h = tfs_f32_to_f16(f);
				put(&b, &h, 2);
			}
		}
		while (b.len % 32)
			put(&b, "", 1);
	}
	snprintf(path, cap, "%s/m.gguf", tmpdir);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(b.data, 1, b.len, f), b.len);
	fclose(f);
	tfs_buf_free(&b);
}

/* The quantized view of the model at path (cache: a directory, or NULL for none). */
static tfs_model *view(const char *path, const char *type, const char *cache)
{
	tfs_model *base = NULL, *v = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&base, path, NULL, &err), 0, "%s", err.msg);
	tfs_quant_opts o = { .quantize = type, .cache_dir = cache, .threads = 2 };
	cr_assert_eq(tfs_quant_view(&v, base, base, &o, &err), 0, "%s", err.msg);
	return v;
}

/* Tensor i of view v as tfs_tensor_convert makes it from the source (or its bytes). */
static uint8_t *expected(const tfs_model *v, size_t i, const char *path)
{
	const tfs_tensor *t = tfs_model_tensor(v, i);
	tfs_model *base = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&base, path, NULL, &err), 0);
	long bi = tfs_model_find_tensor(base, t->name);
	cr_assert_geq(bi, 0);
	uint8_t *out = malloc(t->nbytes + 1);
	if (tfs_model_tensor(base, (size_t)bi)->dtype == t->dtype) {
		cr_assert_eq(tfs_tensor_read_raw(base, (size_t)bi, 0, t->nbytes, out, &err),
			     (int64_t)t->nbytes);
	} else {
		char tmp[128];
		snprintf(tmp, sizeof(tmp), "%s/expected", tmpdir);
		int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0600);
		cr_assert_eq(tfs_tensor_convert(base, (size_t)bi, t->dtype, NULL, fd, &err), 0,
			     "%s", err.msg);
		cr_assert_eq(pread(fd, out, t->nbytes, 0), (ssize_t)t->nbytes);
		close(fd);
	}
	tfs_model_free(base);
	return out;
}

typedef struct {
	const tfs_model *v;
	uint8_t **want;
	unsigned seed;
	int bad;
} reader;

/* The random ranges a reader reads: under ASan (gcc's __SANITIZE_ADDRESS__, build-asan) 100,
 * which take the lines and branches of the library that 200 take (gcov of a coverage build:
 * but for a race, a tensor's file closed while a reader waits for it, taken or not by either
 * from run to run); with a cache bound below a tensor each read quantizes one again, and
 * the 8 readers' 1600 were 3/5 of the test's CPU there. */
#ifdef __SANITIZE_ADDRESS__
enum { N_READS = 100 };
#else
enum { N_READS = 200 };
#endif

/* Random ranges of random tensors, checked. */
static void *read_some(void *arg)
{
	reader *r = arg;
	uint8_t *buf = malloc(1 << 20);
	for (int k = 0; k < N_READS; k++) {
		size_t i = (size_t)rand_r(&r->seed) % tfs_model_n_tensors(r->v);
		const tfs_tensor *t = tfs_model_tensor(r->v, i);
		uint64_t off = (uint64_t)rand_r(&r->seed) % t->nbytes;
		uint64_t len = 1 + (uint64_t)rand_r(&r->seed) % (t->nbytes - off);
		tfs_error err = { 0 };
		if (tfs_tensor_read_raw(r->v, i, off, len, buf, &err) != (int64_t)len ||
		    memcmp(buf, r->want[i] + off, len) != 0)
			r->bad++;
	}
	free(buf);
	return NULL;
}

static void check_all(const tfs_model *v, uint8_t **want, int threads)
{
	pthread_t th[8];
	reader r[8];
	for (int i = 0; i < threads; i++) {
		r[i] = (reader){ .v = v, .want = want, .seed = 7u + (unsigned)i };
		cr_assert_eq(pthread_create(&th[i], NULL, read_some, &r[i]), 0);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(r[i].bad, 0, "reader %d: %d wrong reads", i, r[i].bad);
	}
}

static size_t count_files(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ls %s 2>/dev/null | wc -l", dir);
	FILE *p = popen(cmd, "r");
	size_t n = 0;
	cr_assert_eq(fscanf(p, "%zu", &n), 1);
	pclose(p);
	return n;
}

Test(quantize, view_reads_what_convert_makes, .init = setup, .fini = teardown)
{
	char path[128], cache[128], qdir[160];
	write_model(path, sizeof(path));
	snprintf(cache, sizeof(cache), "%s/cache", tmpdir);
	snprintf(qdir, sizeof(qdir), "%s/quantized", cache);
	static const char *const types[] = { "Q4_K_M", "q8_0", "IQ4_NL", "Q3_K_S" };
	for (size_t ty = 0; ty < sizeof(types) / sizeof(types[0]); ty++) {
		tfs_model *v = view(path, types[ty], cache);
		cr_assert_null(tfs_quant_view_note(v));
		size_t n = tfs_model_n_tensors(v);
		uint8_t **want = calloc(n, sizeof(*want));
		for (size_t i = 0; i < n; i++)
			want[i] = expected(v, i, path);
		check_all(v, want, 8);  /* the first reads: 8 threads at once */
		tfs_model_free(v);
		size_t files = count_files(qdir);
		cr_assert_gt(files, 0);
		v = view(path, types[ty], cache);  /* a second view: from the cache */
		check_all(v, want, 4);
		tfs_model_free(v);
		cr_assert_eq(count_files(qdir), files, "%s: the second view made files", types[ty]);
		for (size_t i = 0; i < n; i++)
			free(want[i]);
		free(want);
	}
}

Test(quantize, no_cache_computes_each_read, .init = setup, .fini = teardown)
{
	char path[128], file[128];
	write_model(path, sizeof(path));
	snprintf(file, sizeof(file), "%s/not-a-dir", tmpdir);
	close(open(file, O_CREAT | O_WRONLY, 0600));
	tfs_model *v = view(path, "Q5_K_M", file);
	cr_assert_not_null(tfs_quant_view_note(v));
	cr_assert(strstr(tfs_quant_view_note(v), "computed on each read"), "%s",
		  tfs_quant_view_note(v));
	size_t n = tfs_model_n_tensors(v);
	uint8_t **want = calloc(n, sizeof(*want));
	for (size_t i = 0; i < n; i++)
		want[i] = expected(v, i, path);
	check_all(v, want, 4);
	tfs_model_free(v);
	for (size_t i = 0; i < n; i++)
		free(want[i]);
	free(want);
}

Test(quantize, view_is_the_plan, .init = setup, .fini = teardown)
{
	char path[128], cache[128];
	write_model(path, sizeof(path));
	snprintf(cache, sizeof(cache), "%s/cache", tmpdir);
	tfs_model *v = view(path, "Q4_K_M", cache), *base = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&base, path, NULL, &err), 0);
	tfs_qplan *p = NULL;
	cr_assert_eq(tfs_qplan_new(&p, base, tfs_ftype_parse("Q4_K_M"), NULL, &err), 0);
	cr_assert_eq(tfs_model_n_tensors(v), tfs_qplan_n_tensors(p));
	for (size_t i = 0; i < tfs_qplan_n_tensors(p); i++) {
		const tfs_qtensor *q = tfs_qplan_tensor(p, i);
		const tfs_tensor *t = tfs_model_tensor(v, i);
		cr_assert_str_eq(t->name, q->name);
		cr_assert_eq(t->dtype, q->dtype, "%s", t->name);
		cr_assert_eq(t->nbytes, q->nbytes);
	}
	/* the keys: the source's, then general.quantization_version and general.file_type */
	size_t nk = tfs_model_n_kv(v), live = 0;
	const char *last[2] = { NULL, NULL };
	for (size_t i = 0; i < nk; i++)
		if (!tfs_model_kv(v, i)->deleted) {
			last[0] = last[1];
			last[1] = tfs_model_kv(v, i)->name;
			live++;
		}
	cr_assert_eq(live, 6);
	cr_assert_str_eq(last[0], "general.quantization_version");
	cr_assert_str_eq(last[1], "general.file_type");
	/* the image is the size the plan says */
	uint64_t size = 0;
	cr_assert_eq(tfs_model_image_size(&size, v, &err), 0);
	cr_assert_gt(size, tfs_qplan_data_size(p));
	tfs_qplan_free(p);
	tfs_model_free(base);
	tfs_model_free(v);
}

Test(quantize, refusals, .init = setup, .fini = teardown)
{
	char path[128];
	write_model(path, sizeof(path));
	tfs_model *base = NULL, *v = NULL;
	tfs_error err = { 0 };
	tfs_quant_opts o = { .quantize = "Q4_K_Z" };
	cr_assert_eq(tfs_model_open(&base, path, NULL, &err), 0);
	cr_assert_eq(tfs_quant_view(&v, base, base, &o, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "not a type llama-quantize knows (valid: Q1_0, "), "%s", err.msg);
	cr_assert(!tfs_quant_type_valid("Q4_K_Z") && tfs_quant_type_valid("q4_k_m"));
	o.quantize = "IQ2_XXS";
	cr_assert_eq(tfs_model_open(&base, path, NULL, &err), 0);
	cr_assert_eq(tfs_quant_view(&v, base, base, &o, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "IQ2_XXS needs an importance matrix"), "%s", err.msg);
	cr_assert_null(v);
}

/* ==== the cache's bound (-o cache_size=, codec/views/quantize_trim.c) ==== */

typedef struct {
	char name[65];
	struct timespec mtime;
	uint64_t bytes;
} cfile;

/* The cache files of dir (names of 64 characters: no temporaries) into f (up to cap), the
 * bytes they take (st_blocks, as the bound counts them) into *bytes; how many. */
static size_t cache_files(const char *dir, cfile *f, size_t cap, uint64_t *bytes)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;
	*bytes = 0;
	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		struct stat st;
		if (strlen(e->d_name) != 64 || fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		*bytes += (uint64_t)st.st_blocks * 512;
		if (n < cap) {
			memcpy(f[n].name, e->d_name, 65);
			f[n].mtime = st.st_mtim;
			f[n].bytes = (uint64_t)st.st_blocks * 512;
		}
		n++;
	}
	closedir(d);
	return n;
}

static int smaller_first(const void *a, const void *b)
{
	const cfile *x = a, *y = b;
	return x->bytes != y->bytes ? (x->bytes < y->bytes ? -1 : 1) : strcmp(x->name, y->name);
}

static tfs_model *view_capped(const char *path, const char *type, const char *cache,
			      uint64_t cap)
{
	tfs_model *base = NULL, *v = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&base, path, NULL, &err), 0, "%s", err.msg);
	tfs_quant_opts o = { .quantize = type, .cache_dir = cache, .threads = 2,
			     .cache_size = cap };
	cr_assert_eq(tfs_quant_view(&v, base, base, &o, &err), 0, "%s", err.msg);
	return v;
}

/* Every tensor of v read whole, in order (checked against want); after each, the cache's
 * bytes into *peak when more. */
static void read_in_order(const tfs_model *v, uint8_t **want, const char *qdir, uint64_t *peak)
{
	for (size_t i = 0; i < tfs_model_n_tensors(v); i++) {
		const tfs_tensor *t = tfs_model_tensor(v, i);
		uint8_t *buf = malloc(t->nbytes);
		tfs_error err = { 0 };
		cr_assert_eq(tfs_tensor_read_raw(v, i, 0, t->nbytes, buf, &err),
			     (int64_t)t->nbytes, "%s: %s", t->name, err.msg);
		cr_assert_eq(memcmp(buf, want[i], t->nbytes), 0, "%s: other bytes", t->name);
		free(buf);
		uint64_t now;
		cache_files(qdir, NULL, 0, &now);
		if (now > *peak)
			*peak = now;
	}
}

static uint8_t **expect_all(const tfs_model *v, const char *path)
{
	uint8_t **want = calloc(tfs_model_n_tensors(v), sizeof(*want));
	for (size_t i = 0; i < tfs_model_n_tensors(v); i++)
		want[i] = expected(v, i, path);
	return want;
}

static void free_all(uint8_t **want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(want[i]);
	free(want);
}

Test(quantize, cache_size_removes_least_recently_used, .init = setup, .fini = teardown)
{
	char path[128], cache[128], qdir[160];
	write_model(path, sizeof(path));
	snprintf(cache, sizeof(cache), "%s/cache", tmpdir);
	snprintf(qdir, sizeof(qdir), "%s/quantized", cache);
	/* Q8_0's files, unbounded, then stamped used long ago, in a known order */
	tfs_model *v = view(path, "Q8_0", cache);
	uint8_t **want = expect_all(v, path);
	uint64_t old_bytes = 0, peak = 0;
	read_in_order(v, want, qdir, &peak);
	free_all(want, tfs_model_n_tensors(v));
	tfs_model_free(v);
	cfile old[64], now[128];
	size_t n_old = cache_files(qdir, old, 64, &old_bytes);
	cr_assert(n_old > 4 && n_old <= 64, "%zu files", n_old);
	/* stamped by size, the largest the oldest (the last gets the earliest stamp): the
	 * files' names (keys) change from run to run, and stamped in readdir's order, which
	 * of them went first did too, and so how many had to go to make room for Q4_K_M's (1
	 * to 9 of 10 in 25 runs; all 10 once, in a loaded fresh-clone run, which left none
	 * kept to compare below).  So the largest (278528 bytes of 655360) goes first, then
	 * the next largest. */
	qsort(old, n_old, sizeof(old[0]), smaller_first);
	for (size_t i = 0; i < n_old; i++) {
		char p[512];
		struct timespec ts[2] = { { (time_t)(1000000 + 7 * (n_old - i)), 0 } };
		ts[1] = ts[0];
		snprintf(p, sizeof(p), "%.160s/%.64s", qdir, old[i].name);
		cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
		old[i].mtime = ts[0];
	}
	/* Q4_K_M within what Q8_0 takes: its files push the oldest of Q8_0's out */
	v = view_capped(path, "Q4_K_M", cache, old_bytes);
	want = expect_all(v, path);
	uint64_t largest = 0;
	for (size_t i = 0; i < tfs_model_n_tensors(v); i++)
		if (tfs_model_tensor(v, i)->nbytes > largest)
			largest = tfs_model_tensor(v, i)->nbytes;
	read_in_order(v, want, qdir, &peak);
	uint64_t bytes;
	size_t n_now = cache_files(qdir, now, 128, &bytes);
	cr_assert_leq(peak, old_bytes + largest + 4096, "%llu bytes in a cache of %llu",
		      (unsigned long long)peak, (unsigned long long)old_bytes);
	cr_assert_leq(bytes, old_bytes);
	/* what went were Q8_0's oldest: every one left is newer than every one removed.  (A
	 * Q8_0 tensor of Q4_K_M, ffn_down's fallback, is the same file: opened by the view, it
	 * is stamped used now, or it was removed and written again; such are left out.) */
	time_t newest_gone = 0, oldest_kept = INT32_MAX;
	size_t gone = 0, kept = 0;
	for (size_t i = 0; i < n_old; i++) {
		const cfile *left = NULL;
		for (size_t k = 0; k < n_now && k < 128; k++)
			if (strcmp(now[k].name, old[i].name) == 0)
				left = &now[k];
		if (left && (left->mtime.tv_sec != old[i].mtime.tv_sec || left->mtime.tv_nsec))
			continue;
		if (!left && old[i].mtime.tv_sec > newest_gone)
			newest_gone = old[i].mtime.tv_sec;
		if (left && old[i].mtime.tv_sec < oldest_kept)
			oldest_kept = old[i].mtime.tv_sec;
		gone += !left;
		kept += !!left;
	}
	cr_assert(gone > 0 && kept > 0, "%zu removed, %zu kept", gone, kept);
	cr_assert_lt(newest_gone, oldest_kept, "a newer file went before an older one");
	/* the same bytes again, by 4 threads at once (files removed under them, computed again) */
	check_all(v, want, 4);
	free_all(want, tfs_model_n_tensors(v));
	tfs_model_free(v);
}

Test(quantize, cache_size_smaller_than_a_tensor, .init = setup, .fini = teardown)
{
	char path[128], cache[128], qdir[160];
	write_model(path, sizeof(path));
	snprintf(cache, sizeof(cache), "%s/cache", tmpdir);
	snprintf(qdir, sizeof(qdir), "%s/quantized", cache);
	const uint64_t cap = 64 << 10;  /* blk.2.attn_q as Q4_K takes 144 KiB: never kept */
	tfs_model *v = view_capped(path, "Q4_K_M", cache, cap);
	uint8_t **want = expect_all(v, path);
	check_all(v, want, 8);
	uint64_t bytes, peak = 0;
	cfile f[128];
	size_t n = cache_files(qdir, f, 128, &bytes);
	for (size_t i = 0; i < n && i < 128; i++)
		cr_assert_leq(f[i].bytes, cap);
	read_in_order(v, want, qdir, &peak);
	cr_assert_leq(peak, cap + (64 << 10), "%llu bytes", (unsigned long long)peak);
	free_all(want, tfs_model_n_tensors(v));
	tfs_model_free(v);
}
