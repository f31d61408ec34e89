/*
 * test_write.c - the write path: changing a model, writing it back, staging and crashes.
 *
 * Every test works on copies in a fresh temporary directory.  A model's state is
 * summarized by digest(): live keys (name, type, payload hash) and live tensors (name,
 * dtype, shape without trailing 1s, size, bytes hash) in slot order, so "same state" is
 * one string comparison and covers "untouched tensors are byte-for-byte equal".
 */
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#endif
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tensorfs.h"
#include "model/source_impl.h" /* struct tfs_source: the tests read its fields */

#define GGUF_SRC TFS_TESTDATA "/gguf/mixed_flat.gguf"

/* ==== helpers ==== */

static char tmpdir[256];

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tfs_write_XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_rf(const char *path)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	cr_assert_eq(system(cmd), 0);
}

static void cleanup_tmpdir(void)
{
	if (tmpdir[0])
		rm_rf(tmpdir);
}

static char *tpath(const char *name)
{
	char *p;
	cr_assert(asprintf(&p, "%s/%s", tmpdir, name) > 0);
	return p;
}

static void spit(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(p, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
	size_t n;
	void *p = test_slurp(from, &n);
	spit(to, p, n);
	free(p);
}

static bool same_file_bytes(const char *a, const char *b)
{
	size_t na, nb;
	void *pa = test_slurp(a, &na), *pb = test_slurp(b, &nb);
	bool same = na == nb && memcmp(pa, pb, na) == 0;
	free(pa);
	free(pb);
	return same;
}

static tfs_model *open_ok(const char *path)
{
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	int rc = tfs_model_open(&m, path, NULL, &err);
	cr_assert_eq(rc, 0, "open %s: %s", path, err.msg);
	return m;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One line per live key and tensor. */
static char *digest(const tfs_model *m)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	for (size_t i = 0; i < tfs_model_n_kv(m); i++) {
		const tfs_kv *kv = tfs_model_kv(m, i);
		if (!kv->deleted)
			fprintf(f, "kv %s type %u len %llu %016llx\n", kv->name, kv->type,
				(unsigned long long)kv->len,
				(unsigned long long)fnv(1469598103934665603ull, kv->data, kv->len));
	}
	static uint8_t buf[1 << 16];
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (t->deleted)
			continue;
		uint32_t nd = 0;
		for (uint32_t k = 0; k < t->n_dims; k++)
			if (t->ne[k] != 1)
				nd = k + 1;
		uint64_t h = 1469598103934665603ull;
		for (uint64_t off = 0; off < t->nbytes; off += sizeof(buf)) {
			tfs_error err = { 0 };
			int64_t r = tfs_tensor_read_raw(m, i, off, sizeof(buf), buf, &err);
			cr_assert_geq(r, 0, "%s", err.msg);
			h = fnv(h, buf, (size_t)r);
		}
		fprintf(f, "t %s dtype %d shape", t->name, t->dtype);
		for (uint32_t k = 0; k < nd; k++)
			fprintf(f, " %lld", (long long)t->ne[k]);
		fprintf(f, " nbytes %llu %016llx\n", (unsigned long long)t->nbytes,
			(unsigned long long)h);
	}
	fclose(f);
	/* sorted: key order may differ between formats' readers (index.json keys are sorted) */
	char **lines = NULL;
	size_t n = 0;
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		lines = realloc(lines, (n + 1) * sizeof(*lines));
		lines[n++] = l;
	}
	qsort(lines, n, sizeof(*lines), line_cmp);
	char *sorted = malloc(len + 2);
	size_t pos = 0;
	for (size_t i = 0; i < n; i++)
		pos += (size_t)sprintf(sorted + pos, "%s\n", lines[i]);
	sorted[pos] = '\0';
	free(lines);
	free(out);
	return sorted;
}

static void assert_digest(const tfs_model *m, const char *want)
{
	char *got = digest(m);
	cr_assert_str_eq(got, want);
	free(got);
}

/* GGUF payloads */
static uint8_t *payload(const void *p, size_t n)
{
	uint8_t *d = malloc(n);
	memcpy(d, p, n);
	return d;
}

static uint8_t *str_payload(const char *s, uint64_t *len)
{
	uint64_t n = strlen(s);
	uint8_t *d = malloc(8 + n);
	memcpy(d, &n, 8);
	memcpy(d + 8, s, n);
	*len = 8 + n;
	return d;
}

static void set_kv_ok(tfs_model *m, const char *key, uint32_t type, uint8_t *d, uint64_t len)
{
	tfs_error err = { 0 };
	int rc = tfs_model_set_kv(m, key, type, d, len, &err);
	cr_assert_eq(rc, 0, "set %s: %s", key, err.msg);
}

static void set_str_ok(tfs_model *m, const char *key, const char *v)
{
	uint64_t len;
	uint8_t *p = str_payload(v, &len);
	set_kv_ok(m, key, TFS_GGUF_STRING, p, len);
}

static void write_ok(tfs_model *m, const char *output)
{
	tfs_error err = { 0 };
	tfs_write_opts o = { .output = output };
	int rc = tfs_model_write(m, &o, &err);
	cr_assert_eq(rc, 0, "write: %s", err.msg);
}

/* No temporaries (".*.tensorfs-tmp.*") are left in dir. */
static void assert_no_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		cr_assert_null(strstr(e->d_name, ".tensorfs-tmp."), "left behind: %s", e->d_name);
	closedir(d);
}

/* The layout rules of GGUF_CHECKLIST.md, read from the bytes. */
static void check_gguf_layout(const char *path, uint32_t want_align)
{
	size_t n;
	uint8_t *b = test_slurp(path, &n);
	uint32_t version;
	memcpy(&version, b + 4, 4);
	cr_assert_eq(memcmp(b, "GGUF", 4), 0);
	cr_assert_eq(version, 3);
	tfs_model *m = open_ok(path);
	const tfs_source *s = tfs_model_source(m, 0);
	uint64_t a = want_align, data_off = UINT64_MAX, expect = 0;
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (i == 0)
			data_off = t->offset;
		cr_assert_eq(data_off % a, 0, "data section at %llu", (unsigned long long)data_off);
		cr_assert_eq(t->offset, data_off + expect, "tensor %s at %llu, expected %llu",
			     t->name, (unsigned long long)t->offset,
			     (unsigned long long)(data_off + expect));
		cr_assert_eq((t->offset - data_off) % a, 0);
		uint64_t padded = (t->nbytes + a - 1) / a * a;
		for (uint64_t k = t->offset + t->nbytes; k < t->offset + padded; k++)
			cr_assert_eq(b[k], 0, "padding byte at %llu", (unsigned long long)k);
		expect += padded;
	}
	if (tfs_model_n_tensors(m))
		cr_assert_eq(s->size, data_off + expect, "file size %llu, expected %llu",
			     (unsigned long long)s->size, (unsigned long long)(data_off + expect));
	else
		cr_assert_eq(s->size % a, 0);
	tfs_model_free(m);
	free(b);
}

static tfs_model *gguf_copy(char **path)
{
	*path = tpath("model.gguf");
	copy_file(GGUF_SRC, *path);
	return open_ok(*path);
}

/* A file holding n bytes derived from seed. */
static char *bytes_file(const char *name, size_t n, uint8_t seed)
{
	char *p = tpath(name);
	uint8_t *d = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		d[i] = (uint8_t)(seed + i * 7);
	spit(p, d, n);
	free(d);
	return p;
}

/* The first live tensor of dtype F32 (mixed_flat has several). */
static const tfs_tensor *first_of_dtype(const tfs_model *m, int dtype)
{
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (!t->deleted && t->dtype == dtype)
			return t;
	}
	return NULL;
}

TestSuite(write, .init = make_tmpdir, .fini = cleanup_tmpdir);

/* ==== GGUF ==== */

Test(write, gguf_no_change_writes_nothing)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	struct stat a, b;
	cr_assert_eq(stat(path, &a), 0);
	usleep(10000);
	write_ok(m, NULL);
	cr_assert_eq(stat(path, &b), 0);
	cr_assert_eq(a.st_ino, b.st_ino);
	cr_assert_eq(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
	cr_assert(same_file_bytes(path, GGUF_SRC));
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(path);
}

Test(write, gguf_set_every_type)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	uint8_t u8 = 7;
	int8_t i8 = -7;
	uint16_t u16 = 700;
	int16_t i16 = -700;
	uint32_t u32 = 70000;
	int32_t i32 = -70000;
	float f32 = 1.5f;
	uint8_t bl = 1;
	uint64_t u64 = 1ull << 40, len;
	int64_t i64 = -(1ll << 40);
	double f64 = -2.25;
	set_kv_ok(m, "test.u8", TFS_GGUF_UINT8, payload(&u8, 1), 1);
	set_kv_ok(m, "test.i8", TFS_GGUF_INT8, payload(&i8, 1), 1);
	set_kv_ok(m, "test.u16", TFS_GGUF_UINT16, payload(&u16, 2), 2);
	set_kv_ok(m, "test.i16", TFS_GGUF_INT16, payload(&i16, 2), 2);
	set_kv_ok(m, "test.u32", TFS_GGUF_UINT32, payload(&u32, 4), 4);
	set_kv_ok(m, "test.i32", TFS_GGUF_INT32, payload(&i32, 4), 4);
	set_kv_ok(m, "test.f32", TFS_GGUF_FLOAT32, payload(&f32, 4), 4);
	set_kv_ok(m, "test.bool_false", TFS_GGUF_BOOL, payload(&bl, 1), 1);
	set_kv_ok(m, "test.u64", TFS_GGUF_UINT64, payload(&u64, 8), 8);
	set_kv_ok(m, "test.i64", TFS_GGUF_INT64, payload(&i64, 8), 8);
	set_kv_ok(m, "test.f64", TFS_GGUF_FLOAT64, payload(&f64, 8), 8);
	uint8_t *s = str_payload("a much longer string than before \xe2\x80\x94 with UTF-8", &len);
	set_kv_ok(m, "test.str", TFS_GGUF_STRING, s, len);
	/* array[uint32] of 3, and a key of a new type for an old name */
	uint8_t arr[4 + 8 + 12];
	uint32_t et = TFS_GGUF_UINT32, v[3] = { 1, 2, 3 };
	uint64_t cnt = 3;
	memcpy(arr, &et, 4), memcpy(arr + 4, &cnt, 8), memcpy(arr + 12, v, 12);
	set_kv_ok(m, "test.arr_u8", TFS_GGUF_ARRAY, payload(arr, sizeof(arr)), sizeof(arr));
	set_str_ok(m, "test.i32", "now a string");

	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	check_gguf_layout(path, 64);
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(want);
	free(path);
}

Test(write, gguf_add_delete_rename_keys)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	set_str_ok(m, "new.key", "fresh");
	cr_assert_eq(tfs_model_del_kv(m, "test.u8", &err), 0);
	cr_assert_eq(tfs_model_del_kv(m, "test.u8", &err), TFS_E_NOTFOUND);
	cr_assert_eq(tfs_model_rename_kv(m, "test.i8", "renamed.i8", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_rename_kv(m, "test.u16", "test.i16", &err), TFS_E_EXISTS);
	cr_assert_eq(tfs_model_rename_kv(m, "nope", "x", &err), TFS_E_NOTFOUND);
	/* a deleted name can be used again */
	cr_assert_eq(tfs_model_rename_kv(m, "test.i16", "test.u8", &err), 0, "%s", err.msg);
	cr_assert_lt(tfs_model_find_kv(m, "test.i16"), 0);
	cr_assert_geq(tfs_model_find_kv(m, "test.u8"), 0);
	cr_assert(tfs_model_kv(m, 0) != NULL);

	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	cr_assert_lt(tfs_model_find_kv(m, "test.i8"), 0);
	cr_assert_geq(tfs_model_find_kv(m, "renamed.i8"), 0);
	check_gguf_layout(path, 64);
	tfs_model_free(m);
	free(want);
	free(path);
}

Test(write, gguf_tensor_changes)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	const tfs_tensor *t = first_of_dtype(m, TFS_DT_F32);
	cr_assert_not_null(t);
	char *tname = strdup(t->name);
	int64_t ne[TFS_MAX_DIMS];
	uint32_t nd = t->n_dims;
	memcpy(ne, t->ne, sizeof(ne));
	/* replace bytes (same type and shape) */
	char *f1 = bytes_file("t1.bin", t->nbytes, 3);
	cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, f1, &err), 0, "%s",
		     err.msg);
	/* wrong size */
	char *bad = bytes_file("bad.bin", 5, 1);
	cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, bad, &err),
		     TFS_E_INVALID);
	/* add a tensor: F16 [6, 5] (odd size: padding follows it) */
	int64_t ne2[2] = { 6, 5 };
	char *f2 = bytes_file("t2.bin", 60, 9);
	cr_assert_eq(tfs_model_set_tensor_file(m, "added.weight", TFS_DT_F16, 2, ne2, f2, &err), 0,
		     "%s", err.msg);
	/* rename and delete others */
	const tfs_tensor *t1 = tfs_model_tensor(m, 1), *t2 = tfs_model_tensor(m, 2);
	char *n1 = strdup(t1->name), *n2 = strdup(t2->name);
	cr_assert_eq(tfs_model_rename_tensor(m, n1, "renamed.tensor", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_rename_tensor(m, "renamed.tensor", "added.weight", &err),
		     TFS_E_EXISTS);
	cr_assert_eq(tfs_model_del_tensor(m, n2, &err), 0);
	cr_assert_eq(tfs_model_del_tensor(m, n2, &err), TFS_E_NOTFOUND);
	/* a name ggml cannot read */
	char longname[80];
	memset(longname, 'x', 70);
	longname[70] = '\0';
	cr_assert_eq(tfs_model_rename_tensor(m, "renamed.tensor", longname, &err), TFS_E_INVALID);

	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	check_gguf_layout(path, 64);
	cr_assert_lt(tfs_model_find_tensor(m, n1), 0);
	cr_assert_lt(tfs_model_find_tensor(m, n2), 0);
	long ai = tfs_model_find_tensor(m, "added.weight");
	cr_assert_geq(ai, 0);
	uint8_t got[60];
	cr_assert_eq(tfs_tensor_read_raw(m, (size_t)ai, 0, 60, got, &err), 60);
	cr_assert_eq(got[59], (uint8_t)(9 + 59 * 7));
	tfs_model_free(m);
	free(want);
	free(tname);
	free(n1);
	free(n2);
	free(f1);
	free(f2);
	free(bad);
	free(path);
}

/* Open fds of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A long-running rw mount replaces a tensor's bytes many times: each superseded staged
 * file, and each one the model refuses, is closed and unmapped (its slot stays). */
Test(write, superseded_staged_sources_are_closed)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	const tfs_tensor *t = first_of_dtype(m, TFS_DT_F32);
	cr_assert_not_null(t);
	char *tname = strdup(t->name), *f = NULL;
	int64_t ne[TFS_MAX_DIMS];
	uint32_t nd = t->n_dims;
	uint64_t nbytes = t->nbytes;
	memcpy(ne, t->ne, sizeof(ne));
	char *bad = bytes_file("bad.bin", 5, 1);
	int fds0 = count_fds();
	for (int i = 0; i < 200; i++) {
		char name[32];
		snprintf(name, sizeof(name), "v%d.bin", i);
		free(f);
		f = bytes_file(name, nbytes, (uint8_t)i);
		cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, f, &err), 0,
			     "%s", err.msg);
		cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, bad, &err),
			     TFS_E_INVALID);
	}
	cr_assert_leq(count_fds(), fds0 + 1, "%d fds open, %d before", count_fds(), fds0);
	/* the last version is what is written */
	long ti = tfs_model_find_tensor(m, tname);
	uint8_t b0;
	cr_assert_eq(tfs_tensor_read_raw(m, (size_t)ti, 0, 1, &b0, &err), 1);
	cr_assert_eq(b0, (uint8_t)199);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(tname);
	free(f);
	free(bad);
	free(path);
}

Test(write, gguf_alignment)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	uint32_t a = 48;
	cr_assert_eq(tfs_model_set_kv(m, "general.alignment", TFS_GGUF_UINT32, payload(&a, 4), 4,
				      &err), TFS_E_INVALID);
	uint64_t a64 = 128;
	cr_assert_eq(tfs_model_set_kv(m, "general.alignment", TFS_GGUF_UINT64, payload(&a64, 8), 8,
				      &err), TFS_E_INVALID);
	a = 128;
	set_kv_ok(m, "general.alignment", TFS_GGUF_UINT32, payload(&a, 4), 4);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	check_gguf_layout(path, 128);
	m = open_ok(path);
	assert_digest(m, want);
	free(want);
	/* deleting the key: the default, 32 */
	cr_assert_eq(tfs_model_del_kv(m, "general.alignment", &err), 0);
	want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	check_gguf_layout(path, 32);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(path);
}

Test(write, gguf_to_other_output)
{
	char *path, *out = tpath("out.gguf");
	tfs_model *m = gguf_copy(&path);
	set_str_ok(m, "x", "y");
	char *want = digest(m);
	write_ok(m, out);
	tfs_model_free(m);
	cr_assert(same_file_bytes(path, GGUF_SRC), "the source was touched");
	m = open_ok(out);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(out);
	free(path);
}

/* A write that fails midway (the file size limit stands in for a full disk): the
 * temporary is removed, the output untouched, the error says why. */
Test(write, gguf_failed_write_leaves_output)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	set_str_ok(m, "x", "y");
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 4096, 4096 };
		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		tfs_error err = { 0 };
		int rc = tfs_model_write(m, NULL, &err);
		_exit(rc == TFS_E_IO && err.sys_errno == EFBIG && strstr(err.msg, "nothing") ? 0 : 1);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert(same_file_bytes(path, GGUF_SRC));
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(path);
}

/* ==== staging ==== */

static tfs_staging *staging_ok(const char *dir, const tfs_model *m)
{
	tfs_staging *s = NULL;
	tfs_error err = { 0 };
	int rc = tfs_staging_open(&s, dir, m, NULL, &err);
	cr_assert_eq(rc, 0, "staging open: %s", err.msg);
	return s;
}

/* Records a set of changes of every kind through s. */
static void stage_changes(tfs_staging *s, tfs_model *m)
{
	tfs_error err = { 0 };
	uint64_t len;
	uint8_t *p = str_payload("staged", &len);
	cr_assert_eq(tfs_staging_set_kv(s, m, "staged.key", TFS_GGUF_STRING, p, len, &err), 0,
		     "%s", err.msg);
	free(p);
	uint32_t v = 42;
	cr_assert_eq(tfs_staging_set_kv(s, m, "test.u32", TFS_GGUF_UINT32, (uint8_t *)&v, 4, &err),
		     0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_kv(s, m, "test.u8", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_rename_kv(s, m, "test.i8", "staged.i8", false, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_rename_kv(s, m, "test.u16", "test.i16", false, &err), TFS_E_EXISTS);
	/* a rename onto an existing key replaces it, as one journal op */
	cr_assert_eq(tfs_staging_rename_kv(s, m, "test.u16", "test.i16", true, &err), 0, "%s", err.msg);
	cr_assert_lt(tfs_model_find_kv(m, "test.u16"), 0);
	cr_assert_eq(tfs_model_kv(m, (size_t)tfs_model_find_kv(m, "test.i16"))->type, TFS_GGUF_UINT16);

	const tfs_tensor *t = first_of_dtype(m, TFS_DT_F32);
	char *name = strdup(t->name), *dp;
	int64_t ne[TFS_MAX_DIMS];
	memcpy(ne, t->ne, sizeof(ne));
	uint32_t nd = t->n_dims;
	size_t nb = t->nbytes;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0, "%s", err.msg);
	uint8_t *d = malloc(nb);
	for (size_t i = 0; i < nb; i++)
		d[i] = (uint8_t)(i * 13 + 1);
	spit(dp, d, nb);
	cr_assert_eq(tfs_staging_set_tensor(s, m, name, TFS_DT_F32, nd, ne, dp, &err), 0, "%s",
		     err.msg);
	free(dp);
	/* a bad size is refused and not recorded */
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0);
	spit(dp, d, 3);
	cr_assert_eq(tfs_staging_set_tensor(s, m, name, TFS_DT_F32, nd, ne, dp, &err),
		     TFS_E_INVALID);
	free(dp);
	free(d);
	const tfs_tensor *t3 = tfs_model_tensor(m, 3), *t4 = tfs_model_tensor(m, 4);
	char *n3 = strdup(t3->name), *n4 = strdup(t4->name);
	cr_assert_eq(tfs_staging_rename_tensor(s, m, n3, "staged.tensor", false, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_tensor(s, m, n4, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_tensor(s, m, n4, &err), TFS_E_NOTFOUND);
	/* and onto an existing tensor */
	char *n5 = strdup(tfs_model_tensor(m, 5)->name);
	int dt5 = tfs_model_tensor(m, 5)->dtype;
	cr_assert_eq(tfs_staging_rename_tensor(s, m, n5, "staged.tensor", false, &err), TFS_E_EXISTS);
	cr_assert_eq(tfs_staging_rename_tensor(s, m, n5, "staged.tensor", true, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, "staged.tensor"))->dtype, dt5);
	free(n5);
	free(name);
	free(n3);
	free(n4);
	cr_assert(tfs_staging_dirty(s));
}

Test(write, staging_replay_and_repack)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	stage_changes(s, m);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	cr_assert(same_file_bytes(path, GGUF_SRC));

	/* as after a crash of the daemon: open again, replay */
	m = open_ok(path);
	s = staging_ok(dir, m);
	cr_assert(tfs_staging_dirty(s));
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);

	/* a second user of the directory is refused */
	tfs_staging *s2 = NULL;
	cr_assert_eq(tfs_staging_open(&s2, dir, m, NULL, &err), TFS_E_EXISTS);
	cr_assert_not_null(strstr(err.msg, "in use by another tensorfs process"));

	cr_assert_eq(tfs_staging_repack(s, m, NULL, &err), 0, "%s", err.msg);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_staging_free(s);
	tfs_model_free(m);
	check_gguf_layout(path, 64);
	m = open_ok(path);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);

	/* the directory is empty again: nothing to replay, nothing to write */
	struct stat a, b;
	stat(path, &a);
	s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	cr_assert_eq(tfs_staging_repack(s, m, NULL, &err), 0);
	stat(path, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(write, staging_refuses_another_source)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	stage_changes(s, m);
	tfs_staging_free(s);
	tfs_model_free(m);
	/* the source changes behind our back */
	usleep(10000);
	int fd = open(path, O_WRONLY | O_APPEND);
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
	m = open_ok(path);
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_open(&s, dir, m, NULL, &err), TFS_E_INVALID);
	tfs_model_free(m);
	free(dir);
	free(path);
}

/* `tensorfs repack`: the changes staged in dir for the model at source, written through a
 * session as the command does (recover, open, stage and replay, repack, release). */
static int session_repack(const char *source, const char *dir, const char *crash_at,
			  tfs_error *err)
{
	tfs_session_opts o = { .source = source, .writable = true, .staging = dir };
	tfs_session *s = NULL;
	int rc = tfs_session_new(&s, &o, err);
	if (!rc)
		rc = tfs_session_open(s, NULL, err);
	if (!rc)
		rc = tfs_session_stage(s, err);
	if (!rc && crash_at)
		setenv("TFS_TEST_CRASH_AT", crash_at, 1);
	if (!rc)
		rc = tfs_session_repack(s, NULL, err);
	tfs_session_release(s);
	tfs_session_close(s);
	return rc;
}

/* Stages changes, then repacks in a child that dies at `where`. Returns the expected digest. */
static char *crash_repack(const char *path, const char *dir, const char *where)
{
	tfs_model *m = open_ok(path);
	tfs_staging *s = staging_ok(dir, m);
	stage_changes(s, m);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		tfs_error err = { 0 };
		session_repack(path, dir, where, &err);
		_exit(3); /* should not get here */
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 9, "child status %d", st);
	return want;
}

Test(write, crash_before_rename)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "before_rename");
	/* the source is whole, the staging directory intact */
	cr_assert(same_file_bytes(path, GGUF_SRC));
	tfs_error err = { 0 };
	/* `tensorfs repack` finishes the job */
	cr_assert_eq(session_repack(path, dir, NULL, &err), 0, "%s", err.msg);
	m = open_ok(path);
	assert_digest(m, want);
	check_gguf_layout(path, 64);
	assert_no_temporaries(tmpdir);
	tfs_staging *s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(write, crash_before_rename_then_mount)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "before_rename");
	cr_assert(same_file_bytes(path, GGUF_SRC));
	/* the next mount: open, replay (shows the staged state), unmount repacks */
	m = open_ok(path);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	cr_assert(tfs_staging_dirty(s));
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);
	cr_assert_eq(tfs_staging_repack(s, m, NULL, &err), 0, "%s", err.msg);
	tfs_staging_free(s);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(write, crash_after_rename)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "after_rename");
	/* the new file is in place already */
	m = open_ok(path);
	assert_digest(m, want);
	/* the next mount recognizes the finished repack: nothing is applied again */
	tfs_staging *s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	tfs_staging_free(s);
	struct stat a, b;
	stat(path, &a);
	cr_assert_eq(session_repack(path, dir, NULL, &err), 0, "%s", err.msg);
	stat(path, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(write, crash_after_rename_then_repack)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "after_rename");
	tfs_error err = { 0 };
	struct stat a, b;
	stat(path, &a);
	cr_assert_eq(session_repack(path, dir, NULL, &err), 0, "%s", err.msg);
	stat(path, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

/* A session without a staging directory takes the default one beside the file: a killed
 * session leaves it, the next one replays it, and it goes once repacked and released. */
Test(write, session_default_staging)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *dir = tfs_staging_default_dir(path);
	tfs_session_opts o = { .source = path, .writable = true };
	tfs_error err = { 0 };
	tfs_session *s;
	struct stat st;
	cr_assert_eq(tfs_session_new(&s, &o, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_open(s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_stage(s, &err), 0, "%s", err.msg);
	cr_assert_str_eq(tfs_staging_dir(tfs_session_staging(s)), dir);
	stage_changes(tfs_session_staging(s), tfs_session_model(s));
	char *want = digest(tfs_session_model(s));
	tfs_session_close(s); /* as a daemon killed before its repack */
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert(same_file_bytes(path, GGUF_SRC));

	cr_assert_eq(tfs_session_new(&s, &o, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_open(s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_stage(s, &err), 0, "%s", err.msg);
	assert_digest(tfs_session_model(s), want);
	cr_assert_eq(tfs_session_repack(s, NULL, &err), 0, "%s", err.msg);
	tfs_session_release(s);
	tfs_session_close(s);
	cr_assert_neq(stat(dir, &st), 0, "the default staging directory stayed");
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(write, staging_default_dir)
{
	char *d = tfs_staging_default_dir("/a/b/model.gguf");
	cr_assert_str_eq(d, "/a/b/.model.gguf.tensorfs-staging");
	free(d);
	d = tfs_staging_default_dir("model.gguf");
	cr_assert_str_eq(d, ".model.gguf.tensorfs-staging");
	free(d);
}

/* ==== safetensors ==== */

/* The file's header: N % 8 == 0, padded with spaces, offsets contiguous (checked by the
 * reader on open). */
static void check_st_layout(const char *path)
{
	size_t n;
	uint8_t *b = test_slurp(path, &n);
	uint64_t hl;
	memcpy(&hl, b, 8);
	cr_assert_eq(hl % 8, 0, "header length %llu", (unsigned long long)hl);
	cr_assert_eq(b[8], '{');
	size_t end = 8 + hl;
	while (end > 8 && b[end - 1] == ' ')
		end--;
	cr_assert_eq(b[end - 1], '}');
	free(b);
}

Test(write, st_single_changes)
{
	char *path = tpath("m.safetensors");
	copy_file(TFS_TESTDATA "/safetensors/ok_all_dtypes.safetensors", path);
	tfs_model *m = open_ok(path);
	tfs_error err = { 0 };
	cr_assert_geq(tfs_model_find_kv(m, "format"), 0);
	set_str_ok(m, "format", "np");
	set_str_ok(m, "added", "v\"\n\x01");
	cr_assert_eq(tfs_model_del_kv(m, "empty", &err), 0);
	cr_assert_eq(tfs_model_rename_kv(m, "unicode", "uni", &err), 0, "%s", err.msg);
	uint32_t v = 3;
	cr_assert_eq(tfs_model_set_kv(m, "num", TFS_GGUF_UINT32, payload(&v, 4), 4, &err),
		     TFS_E_INVALID);
	const tfs_tensor *t0 = tfs_model_tensor(m, 0);
	char *n0 = strdup(t0->name), *n1 = strdup(tfs_model_tensor(m, 1)->name),
	     *n2 = strdup(tfs_model_tensor(m, 2)->name);
	int64_t ne[TFS_MAX_DIMS];
	memcpy(ne, t0->ne, sizeof(ne));
	char *f = bytes_file("t0.bin", t0->nbytes, 5);
	cr_assert_eq(tfs_model_set_tensor_file(m, n0, t0->dtype, t0->n_dims, ne, f, &err), 0, "%s",
		     err.msg);
	int64_t ne2[2] = { 3, 2 };
	char *f2 = bytes_file("t2.bin", 12, 1);
	cr_assert_eq(tfs_model_set_tensor_file(m, "new.bf16", TFS_DT_BF16, 2, ne2, f2, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(tfs_model_set_tensor_file(m, "new.q4", TFS_DT_Q4_K, 2, ne2, f2, &err),
		     TFS_E_INVALID);
	cr_assert_eq(tfs_model_rename_tensor(m, n1, "renamed", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_del_tensor(m, n2, &err), 0, "%s", err.msg);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	check_st_layout(path);
	m = open_ok(path);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(want);
	free(n0);
	free(n1);
	free(n2);
	free(f);
	free(f2);
	free(path);
}

Test(write, st_single_others)
{
	static const char *const files[] = { "ok_no_metadata", "ok_zero_size_middle",
					     "ok_json_order_differs", "ok_unpadded_header",
					     "ok_leading_whitespace", "ok_metadata_only" };
	for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
		char src[512], *path = tpath("x.safetensors");
		snprintf(src, sizeof(src), TFS_TESTDATA "/safetensors/%s.safetensors", files[k]);
		copy_file(src, path);
		tfs_model *m = open_ok(path);
		struct stat a, b;
		stat(path, &a);
		write_ok(m, NULL); /* unchanged: not written */
		stat(path, &b);
		cr_assert_eq(a.st_ino, b.st_ino);
		set_str_ok(m, "k2", "v2");
		char *want = digest(m);
		write_ok(m, NULL);
		tfs_model_free(m);
		check_st_layout(path);
		m = open_ok(path);
		assert_digest(m, want);
		tfs_model_free(m);
		free(want);
		free(path);
	}
}

/* A safetensors file with F32 tensors names[i] of n[i] elements, values from seed. */
static void make_st(const char *path, const char *meta, const char *const *names,
		    const int *n, size_t count, int seed)
{
	char hdr[4096];
	size_t h = 0, off = 0;
	h += (size_t)snprintf(hdr + h, sizeof(hdr) - h, "{");
	if (meta)
		h += (size_t)snprintf(hdr + h, sizeof(hdr) - h, "\"__metadata__\":%s%s", meta,
				      count ? "," : "");
	for (size_t i = 0; i < count; i++) {
		h += (size_t)snprintf(hdr + h, sizeof(hdr) - h,
				      "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
				      i ? "," : "", names[i], n[i], off, off + 4 * (size_t)n[i]);
		off += 4 * (size_t)n[i];
	}
	h += (size_t)snprintf(hdr + h, sizeof(hdr) - h, "}");
	while (h % 8)
		hdr[h++] = ' ';
	FILE *f = fopen(path, "wb");
	uint64_t hl = h;
	fwrite(&hl, 8, 1, f);
	fwrite(hdr, 1, h, f);
	for (size_t i = 0; i < off / 4; i++) {
		float v = (float)(seed + (int)i);
		fwrite(&v, 4, 1, f);
	}
	fclose(f);
}

static void make_sharded(void)
{
	static const char *const a[] = { "a.0", "a.1" }, *const b[] = { "b.0", "b.1", "b.2" };
	static const int na[] = { 4, 8 }, nb[] = { 2, 3, 5 };
	char *s1 = tpath("model-00001-of-00002.safetensors");
	char *s2 = tpath("model-00002-of-00002.safetensors");
	char *ix = tpath("model.safetensors.index.json");
	make_st(s1, "{\"format\":\"pt\"}", a, na, 2, 0);
	make_st(s2, "{\"format\":\"pt\"}", b, nb, 3, 100);
	const char *index =
		"{\"metadata\":{\"total_size\":88},\"weight_map\":{"
		"\"a.0\":\"model-00001-of-00002.safetensors\","
		"\"a.1\":\"model-00001-of-00002.safetensors\","
		"\"b.0\":\"model-00002-of-00002.safetensors\","
		"\"b.1\":\"model-00002-of-00002.safetensors\","
		"\"b.2\":\"model-00002-of-00002.safetensors\"}}";
	spit(ix, index, strlen(index));
	free(s1);
	free(s2);
	free(ix);
}

Test(write, st_sharded_rewrites_only_changed_shards)
{
	make_sharded();
	char *ix = tpath("model.safetensors.index.json");
	char *s1 = tpath("model-00001-of-00002.safetensors");
	char *s2 = tpath("model-00002-of-00002.safetensors");
	tfs_model *m = open_ok(ix);
	tfs_error err = { 0 };
	struct stat a1, a2, b1, b2;
	stat(s1, &a1);
	stat(s2, &a2);
	cr_assert_eq(tfs_model_rename_tensor(m, "b.1", "b.renamed", &err), 0, "%s", err.msg);
	int64_t ne[1] = { 3 };
	char *f = bytes_file("new.bin", 12, 2);
	cr_assert_eq(tfs_model_set_tensor_file(m, "c.new", TFS_DT_F32, 1, ne, f, &err), 0, "%s",
		     err.msg);
	set_str_ok(m, "note", "index key");
	write_ok(m, NULL);
	char *want = digest(m); /* after: the writer updated total_size */
	stat(s1, &b1);
	stat(s2, &b2);
	cr_assert_eq(a1.st_ino, b1.st_ino, "shard 1 was rewritten");
	cr_assert_neq(a2.st_ino, b2.st_ino, "shard 2 was not rewritten");
	tfs_model_free(m);
	m = open_ok(ix);
	assert_digest(m, want);
	check_st_layout(s2);
	long ts = tfs_model_find_kv(m, "total_size");
	cr_assert_geq(ts, 0);
	uint64_t total;
	memcpy(&total, tfs_model_kv(m, (size_t)ts)->data, 8);
	cr_assert_eq(total, 88 + 12);
	assert_no_temporaries(tmpdir);

	/* a change in shard 1 only: shard 2 stays */
	cr_assert_eq(tfs_model_del_tensor(m, "a.0", &err), 0);
	free(want);
	stat(s2, &a2);
	write_ok(m, NULL);
	want = digest(m);
	stat(s2, &b2);
	cr_assert_eq(a2.st_ino, b2.st_ino);
	tfs_model_free(m);
	m = open_ok(ix);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(f);
	free(ix);
	free(s1);
	free(s2);
}

/* ==== Ollama ==== */

#define OL_MAN "models/manifests/registry.ollama.ai/library/"

static void copy_store(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "cp -r '" TFS_TESTDATA "/ollama/models' '%s/models'", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

static tfs_model *open_ref(const char *ref)
{
	char *root = tpath("models");
	tfs_open_opts oo = { .ollama_models = root };
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	int rc = tfs_model_open(&m, ref, &oo, &err);
	cr_assert_eq(rc, 0, "open %s: %s", ref, err.msg);
	free(root);
	return m;
}

static char *extra_text(const tfs_model *m, const char *name)
{
	long i = tfs_model_find_extra(m, name);
	cr_assert_geq(i, 0, "no extra %s", name);
	const tfs_extra *x = tfs_model_extra(m, (size_t)i);
	const tfs_source *s = tfs_model_source(m, (size_t)x->src);
	return strndup((const char *)s->map + x->offset, (size_t)x->size);
}

Test(write, ollama_gguf_key_change)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	size_t n;
	char *before = test_slurp(man, &n);
	before[n] = '\0';
	tfs_model *m = open_ref(man);
	struct stat a, b;
	stat(man, &a);
	write_ok(m, NULL); /* no change: nothing */
	stat(man, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	set_str_ok(m, "general.architecture", "edited");
	char *want = digest(m), *tmpl = extra_text(m, "template");
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ref(man);
	assert_digest(m, want);
	char *t2 = extra_text(m, "template");
	cr_assert_str_eq(t2, tmpl);
	char *after = test_slurp(man, &n);
	after[n] = '\0';
	/* the template layer's blob is reused, the model layer's is new */
	cr_assert_not_null(strstr(after, "b52d02fdf256212b389da91993a066a005d7540ab33124008908a26fda541a12"));
	cr_assert_null(strstr(after, "9038dd7de1600ce68b5f2e8a981f40f485dfd315c397f1129681b52c490d6590"));
	cr_assert_eq(after[n - 1], '\n');
	/* the old blob is still there (other models may use it) */
	char *old = tpath("models/blobs/sha256-9038dd7de1600ce68b5f2e8a981f40f485dfd315c397f1129681b52c490d6590");
	cr_assert(same_file_bytes(old, GGUF_SRC));
	tfs_model_free(m);
	free(want);
	free(tmpl);
	free(t2);
	free(before);
	free(after);
	free(old);
	free(man);
}

Test(write, ollama_extra_change_keeps_model_blob)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	tfs_model *m = open_ref(man);
	tfs_error err = { 0 };
	char *f = tpath("tmpl.txt");
	spit(f, "{{ .Prompt }} edited", 20);
	cr_assert_eq(tfs_model_set_extra_file(m, "template", f, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_del_extra(m, "license", &err), 0, "%s", err.msg);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ref(man);
	assert_digest(m, want);
	char *t = extra_text(m, "template");
	cr_assert_str_eq(t, "{{ .Prompt }} edited");
	cr_assert_lt(tfs_model_find_extra(m, "license"), 0);
	size_t n;
	char *after = test_slurp(man, &n);
	after[n] = '\0';
	cr_assert_not_null(strstr(after, "9038dd7de1600ce68b5f2e8a981f40f485dfd315c397f1129681b52c490d6590"));
	tfs_model_free(m);
	free(after);
	free(t);
	free(want);
	free(f);
	free(man);
}

Test(write, ollama_new_tag)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	char *src_copy = tpath("manifest.orig");
	copy_file(man, src_copy);
	tfs_model *m = open_ref(man);
	set_str_ok(m, "test.str", "tagged");
	char *want = digest(m);
	write_ok(m, "oracle-gguf:edited");
	tfs_model_free(m);
	cr_assert(same_file_bytes(man, src_copy), "the source manifest changed");
	m = open_ref("oracle-gguf:edited");
	assert_digest(m, want);
	tfs_model_free(m);
	m = open_ref("oracle-gguf:latest");
	long i = tfs_model_find_kv(m, "test.str");
	cr_assert_eq(memcmp(tfs_model_kv(m, (size_t)i)->data + 8, "hello", 5), 0);
	tfs_model_free(m);
	free(want);
	free(src_copy);
	free(man);
}

Test(write, ollama_per_tensor_changes)
{
	static const char *const tags[] = { "int4", "nvfp4" };
	for (size_t k = 0; k < 2; k++) {
		copy_store();
		char ref[64];
		snprintf(ref, sizeof(ref), "oracle-st:%s", tags[k]);
		tfs_model *m = open_ref(ref);
		tfs_error err = { 0 };
		long ni = tfs_model_find_tensor(m, "model.norm.weight");
		cr_assert_geq(ni, 0);
		const tfs_tensor *t = tfs_model_tensor(m, (size_t)ni);
		int64_t ne[TFS_MAX_DIMS];
		memcpy(ne, t->ne, sizeof(ne));
		char *f = bytes_file("norm.bin", t->nbytes, 4);
		cr_assert_eq(tfs_model_set_tensor_file(m, "model.norm.weight", t->dtype, t->n_dims, ne,
						       f, &err), 0, "%s", err.msg);
		cr_assert_eq(tfs_model_rename_tensor(m, "model.norm.weight", "model.norm2.weight",
						     &err), 0, "%s", err.msg);
		int64_t ne2[1] = { 4 };
		char *f2 = bytes_file("new.bin", 16, 8);
		cr_assert_eq(tfs_model_set_tensor_file(m, "extra.bias", TFS_DT_F32, 1, ne2, f2, &err),
			     0, "%s", err.msg);
		uint64_t len = 0;
		uint8_t *p = str_payload("x", &len);
		cr_assert_eq(tfs_model_set_kv(m, "k", TFS_GGUF_UINT32, p, len, &err) == 0, 0);
		char *want = digest(m);
		write_ok(m, NULL);
		tfs_model_free(m);
		m = open_ref(ref);
		assert_digest(m, want);
		/* the quantized tensor is untouched and still reads as floats */
		long qi = tfs_model_find_tensor(m, "model.layers.0.mlp.down_proj.weight");
		cr_assert_geq(qi, 0);
		cr_assert_gt(tfs_tensor_f32_count(m, (size_t)qi, NULL), 0);
		tfs_model_free(m);
		free(want);
		free(f);
		free(f2);
		char *models = tpath("models");
		rm_rf(models);
		free(models);
	}
}

Test(write, ollama_staged_repack)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest"), *dir = tpath("stage");
	tfs_model *m = open_ref(man);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	char *dp;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0);
	spit(dp, "SYSTEM", 6);
	cr_assert_eq(tfs_staging_set_extra(s, m, "system", dp, &err), 0, "%s", err.msg);
	free(dp);
	uint32_t v = 9;
	cr_assert_eq(tfs_staging_set_kv(s, m, "test.u32", TFS_GGUF_UINT32, (uint8_t *)&v, 4, &err),
		     0, "%s", err.msg);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	cr_assert_eq(session_repack(man, dir, NULL, &err), 0, "%s", err.msg);
	m = open_ref(man);
	assert_digest(m, want);
	char *sys = extra_text(m, "system");
	cr_assert_str_eq(sys, "SYSTEM");
	tfs_model_free(m);
	free(sys);
	free(want);
	free(dir);
	free(man);
}

/* Stages a file of n bytes of value v; its path (allocated). */
static char *stage_bytes(tfs_staging *s, uint8_t v, size_t n)
{
	tfs_error err = { 0 };
	char *dp;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0, "%s", err.msg);
	uint8_t *d = malloc(n ? n : 1);
	memset(d, v, n);
	spit(dp, d, n);
	free(d);
	return dp;
}

/* The ops the other tests do not replay (replace_kv, replace_tensor, set_tensors; set_extra,
 * replace_extra, del_extra): each row of the journal's op table, recorded, then replayed
 * onto the source opened again, gives the same model. */
Test(write, staging_replays_every_op)
{
	char *path, *dir = tpath("stage-ops");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	uint64_t len;
	uint8_t *p = str_payload("replaced", &len);
	cr_assert_eq(tfs_staging_replace_kv(s, m, "test.str", "test.str_empty", TFS_GGUF_STRING, p,
					    len, &err), 0, "%s", err.msg);
	free(p);
	const tfs_tensor *t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, "t.f32"));
	cr_assert_eq(tfs_staging_replace_tensor(s, m, "t.f32", "t.f16", t->dtype, t->n_dims, t->ne,
						&err), 0, "%s", err.msg);
	tfs_tensor_file f[2];
	char *dp[2];
	const char *names[2] = { "t.i8", "t.i16" };
	for (int k = 0; k < 2; k++) {
		t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, names[k]));
		dp[k] = stage_bytes(s, (uint8_t)(7 + k), t->nbytes);
		f[k] = (tfs_tensor_file){ names[k], t->dtype, t->n_dims, t->ne, dp[k] };
	}
	cr_assert_eq(tfs_staging_set_tensors(s, m, f, 2, &err), 0, "%s", err.msg);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	m = open_ok(path);
	s = staging_ok(dir, m);
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	cr_assert_lt(tfs_model_find_kv(m, "test.str"), 0);
	cr_assert_lt(tfs_model_find_tensor(m, "t.f32"), 0);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(dp[0]);
	free(dp[1]);
	free(dir);
	free(path);

	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	dir = tpath("stage-ops-ollama");
	m = open_ref(man);
	char *license = extra_text(m, "license");
	s = staging_ok(dir, m);
	char *sys = stage_bytes(s, 'S', 6);
	cr_assert_eq(tfs_staging_set_extra(s, m, "system", sys, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_replace_extra(s, m, "license", "template", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_extra(s, m, "params", &err), 0, "%s", err.msg);
	tfs_staging_free(s);
	tfs_model_free(m);
	m = open_ref(man);
	s = staging_ok(dir, m);
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	char *got_sys = extra_text(m, "system"), *got_tmpl = extra_text(m, "template");
	cr_assert_str_eq(got_sys, "SSSSSS");
	cr_assert_str_eq(got_tmpl, license);
	cr_assert_lt(tfs_model_find_extra(m, "license"), 0);
	cr_assert_lt(tfs_model_find_extra(m, "params"), 0);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(got_sys);
	free(got_tmpl);
	free(license);
	free(sys);
	free(dir);
	free(man);
}

/* A crash between the renames of a sharded set (shard renamed, index not): the next
 * `tensorfs repack` rolls the validated rest forward. */
Test(write, st_sharded_crash_mid_rename)
{
	make_sharded();
	char *ix = tpath("model.safetensors.index.json"), *dir = tpath("stage");
	tfs_model *m = open_ok(ix);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_rename_tensor(s, m, "b.1", "b.moved", false, &err), 0, "%s", err.msg);
	uint64_t len;
	uint8_t *p = str_payload("v", &len);
	cr_assert_eq(tfs_staging_set_kv(s, m, "format", TFS_GGUF_STRING, p, len, &err), 0, "%s",
		     err.msg);
	free(p);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		session_repack(ix, dir, "mid_rename", &err);
		_exit(3);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 9, "child status %d", st);
	/* as a mount does: recover before opening the model, then open, bind, replay */
	cr_assert_eq(tfs_staging_recover(dir, &err), 0, "%s", err.msg);
	m = open_ok(ix);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);
	s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_staging_free(s);
	cr_assert_eq(session_repack(ix, dir, NULL, &err), 0, "%s", err.msg);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(ix);
}

/* Stages nb bytes of value v as tensor name (F32, its current shape). */
static void stage_fill(tfs_staging *s, tfs_model *m, const char *name, uint8_t v, char **path_out)
{
	tfs_error err = { 0 };
	const tfs_tensor *t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, name));
	int64_t ne[TFS_MAX_DIMS];
	memcpy(ne, t->ne, sizeof(ne));
	uint32_t nd = t->n_dims;
	size_t nb = t->nbytes;
	int dt = t->dtype;
	char *dp;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0, "%s", err.msg);
	uint8_t *d = malloc(nb);
	memset(d, v, nb);
	spit(dp, d, nb);
	free(d);
	cr_assert_eq(tfs_staging_set_tensor(s, m, name, dt, nd, ne, dp, &err), 0, "%s", err.msg);
	*path_out = dp;
}

/* A rewrite supersedes the earlier one (its op and data file go), unless a rename in
 * between gave the earlier bytes another name; replay shows the same state. */
Test(write, superseded_sets_are_dropped)
{
	char *path, *dir = tpath("stage-compact");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	char *f1, *f2, *f3, *f4;
	stage_fill(s, m, "t.f32", 1, &f1);
	stage_fill(s, m, "t.f32", 2, &f2);
	cr_assert_eq(access(f1, F_OK), -1, "the superseded data file is gone");
	cr_assert_eq(access(f2, F_OK), 0);
	/* set, rename away, set again: the first bytes live on under the new name */
	stage_fill(s, m, "t.f16", 3, &f3);
	cr_assert_eq(tfs_staging_rename_tensor(s, m, "t.f16", "t.f16.old", false, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_new_data(s, &f4, &err), 0);
	spit(f4, "\x07\x07\x07\x07", 4);
	cr_assert_eq(tfs_staging_set_tensor(s, m, "t.f16", TFS_DT_F32, 1, (int64_t[]){ 1 }, f4, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(access(f3, F_OK), 0, "data behind a rename must stay");
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);

	m = open_ok(path);
	s = staging_ok(dir, m);
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(f1);
	free(f2);
	free(f3);
	free(f4);
	free(dir);
	free(path);
}

/* ==== GGUF tensor shapes and tensor-less files ==== */

/* A GGUF header being built: little-endian fields appended to a buffer. */
typedef struct {
	uint8_t b[4096];
	size_t n;
} gbuf;

static void g_put(gbuf *g, const void *p, size_t n)
{
	cr_assert_leq(g->n + n, sizeof(g->b));
	memcpy(g->b + g->n, p, n);
	g->n += n;
}
static void g_u32(gbuf *g, uint32_t v) { g_put(g, &v, 4); }
static void g_u64(gbuf *g, uint64_t v) { g_put(g, &v, 8); }
static void g_str(gbuf *g, const char *s) { g_u64(g, strlen(s)); g_put(g, s, strlen(s)); }

typedef struct {
	const char *name;
	uint32_t n_dims;
	uint64_t ne[4];
} dims_case;

/* F32 tensors stored with these n_dims / ne (nothing else in them matters). */
static const dims_case dims_cases[] = {
	{ "row", 2, { 8, 1 } },          /* numpy shape (1, 8) */
	{ "col4", 4, { 8, 1, 1, 1 } },   /* (1, 1, 1, 8) */
	{ "mid", 3, { 4, 1, 2 } },       /* (2, 1, 4) */
	{ "flat", 1, { 8 } },
	{ "scalar", 0, { 0 } },
};
#define N_DIMS_CASES (sizeof(dims_cases) / sizeof(dims_cases[0]))

static uint64_t dims_case_elems(const dims_case *c)
{
	uint64_t n = 1;
	for (uint32_t k = 0; k < c->n_dims; k++)
		n *= c->ne[k];
	return n;
}

/* Writes a GGUF v3 with one key and the dims_cases tensors (aligned 32, padded). */
static void make_dims_gguf(const char *path)
{
	static gbuf g;
	g.n = 0;
	g_put(&g, "GGUF", 4);
	g_u32(&g, 3);
	g_u64(&g, N_DIMS_CASES);
	g_u64(&g, 1);
	g_str(&g, "general.name");
	g_u32(&g, 8);
	g_str(&g, "dims");
	uint64_t off = 0;
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		g_str(&g, dims_cases[i].name);
		g_u32(&g, dims_cases[i].n_dims);
		for (uint32_t k = 0; k < dims_cases[i].n_dims; k++)
			g_u64(&g, dims_cases[i].ne[k]);
		g_u32(&g, 0); /* F32 */
		g_u64(&g, off);
		off += (dims_case_elems(&dims_cases[i]) * 4 + 31) / 32 * 32;
	}
	while (g.n % 32)
		g.b[g.n++] = 0;
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		uint64_t nb = dims_case_elems(&dims_cases[i]) * 4;
		for (uint64_t k = 0; k < nb; k++)
			g.b[g.n++] = (uint8_t)(i * 16 + k);
		while (g.n % 32)
			g.b[g.n++] = 0;
	}
	spit(path, g.b, g.n);
}

/* Reads the tensor infos of a GGUF file straight from its bytes: n_dims and ne of the
 * tensor named name (not through the reader under test). */
static void raw_tensor_dims(const char *path, const char *name, uint32_t *n_dims, uint64_t ne[8])
{
	size_t len, p = 24;
	uint8_t *b = test_slurp(path, &len);
	uint64_t n_t, n_kv;
	memcpy(&n_t, b + 8, 8);
	memcpy(&n_kv, b + 16, 8);
	for (uint64_t i = 0; i < n_kv; i++) {
		uint64_t kl, sl;
		uint32_t type;
		memcpy(&kl, b + p, 8);
		p += 8 + kl;
		memcpy(&type, b + p, 4);
		p += 4;
		cr_assert_eq(type, 8, "make_dims_gguf writes string keys only");
		memcpy(&sl, b + p, 8);
		p += 8 + sl;
	}
	bool found = false;
	for (uint64_t i = 0; i < n_t; i++) {
		uint64_t nl;
		uint32_t nd;
		memcpy(&nl, b + p, 8);
		bool match = nl == strlen(name) && !memcmp(b + p + 8, name, nl);
		p += 8 + nl;
		memcpy(&nd, b + p, 4);
		p += 4;
		cr_assert_leq(nd, 8);
		if (match) {
			*n_dims = nd;
			memcpy(ne, b + p, 8 * nd);
			found = true;
		}
		p += 8 * nd + 12;
		cr_assert_leq(p, len);
	}
	cr_assert(found, "%s: no tensor %s", path, name);
	free(b);
}

/* An untouched tensor comes back with the n_dims and ne it was stored with (ggml's writer
 * would drop trailing dims of 1: (1, 8) stored as ne [8, 1] must not become (8,)). */
Test(write, gguf_keeps_stored_n_dims)
{
	char *path = tpath("dims.gguf"), *out = tpath("dims.out.gguf");
	make_dims_gguf(path);
	tfs_model *m = open_ok(path);
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		const tfs_tensor *t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, dims_cases[i].name));
		cr_assert_eq(t->n_dims, dims_cases[i].n_dims, "%s read", dims_cases[i].name);
	}
	set_str_ok(m, "general.name", "changed");
	/* a new tensor keeps the shape it is given, trailing 1 included */
	char *f = bytes_file("new.bin", 16, 3);
	int64_t ne[2] = { 4, 1 };
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_set_tensor_file(m, "new", TFS_DT_F32, 2, ne, f, &err), 0, "%s",
		     err.msg);
	write_ok(m, out);
	tfs_model_free(m);

	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		uint32_t nd;
		uint64_t got[8];
		raw_tensor_dims(out, dims_cases[i].name, &nd, got);
		cr_assert_eq(nd, dims_cases[i].n_dims, "%s: n_dims %u, stored %u", dims_cases[i].name,
			     nd, dims_cases[i].n_dims);
		for (uint32_t k = 0; k < nd; k++)
			cr_assert_eq(got[k], dims_cases[i].ne[k], "%s: ne[%u]", dims_cases[i].name, k);
	}
	uint32_t nd;
	uint64_t got[8];
	raw_tensor_dims(out, "new", &nd, got);
	cr_assert_eq(nd, 2);
	cr_assert(got[0] == 4 && got[1] == 1);

	/* and the bytes and the npy/ shape of the untouched ones */
	tfs_model *a = open_ok(path), *b = open_ok(out);
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		long ia = tfs_model_find_tensor(a, dims_cases[i].name);
		long ib = tfs_model_find_tensor(b, dims_cases[i].name);
		const tfs_tensor *ta = tfs_model_tensor(a, (size_t)ia), *tb = tfs_model_tensor(b, (size_t)ib);
		cr_assert_eq(ta->nbytes, tb->nbytes);
		cr_assert_eq(memcmp(tfs_model_source(a, (size_t)ta->src)->map + ta->offset,
				    tfs_model_source(b, (size_t)tb->src)->map + tb->offset, ta->nbytes), 0);
		tfs_buf ha = { 0 }, hb = { 0 };
		bool raw;
		cr_assert_eq(tfs_npy_header(&ha, &raw, a, (size_t)ia, &err), 0);
		cr_assert_eq(tfs_npy_header(&hb, &raw, b, (size_t)ib, &err), 0);
		cr_assert_str_eq(ha.data + 10, hb.data + 10, "%s: npy header", dims_cases[i].name);
		tfs_buf_free(&ha);
		tfs_buf_free(&hb);
	}
	tfs_buf h = { 0 };
	bool raw;
	cr_assert_eq(tfs_npy_header(&h, &raw, b, (size_t)tfs_model_find_tensor(b, "row"), &err), 0);
	cr_assert(strstr(h.data + 10, "'shape': (1, 8)"), "%s", h.data + 10);
	tfs_buf_free(&h);
	tfs_model_free(a);
	tfs_model_free(b);
	free(f);
	free(path);
	free(out);
}

/* A GGUF without tensors whose header does not end on the alignment (as llama.cpp's vocab
 * files) repacks, and its data section is then at the aligned offset. */
Test(write, gguf_without_tensors_repacks)
{
	static gbuf g;
	g.n = 0;
	g_put(&g, "GGUF", 4);
	g_u32(&g, 3);
	g_u64(&g, 0);
	g_u64(&g, 1);
	g_str(&g, "general.name");
	g_u32(&g, 8);
	g_str(&g, "abc"); /* 24 + 20 + 4 + 11 = 59 bytes, unpadded */
	cr_assert_neq(g.n % 32, 0);
	char *path = tpath("vocab.gguf");
	spit(path, g.b, g.n);
	tfs_model *m = open_ok(path);
	set_str_ok(m, "general.name", "abcd");
	write_ok(m, NULL);
	tfs_model_free(m);
	check_gguf_layout(path, 32);
	m = open_ok(path);
	tfs_buf b = { 0 };
	tfs_error err;
	cr_assert_eq(tfs_model_index_json(&b, m, &err), 0);
	cr_assert(strstr(b.data, "\"data_offset\": 64"), "%s", b.data);
	tfs_buf_free(&b);
	tfs_model_free(m);
	free(path);
}

/* A journal's "pending" names (a repack's temporaries, recorded before they are named) are
 * removed by the next open when they are temporaries, and only then: a damaged or crafted
 * journal cannot make recovery delete the model or anything else. */
Test(write, pending_temporaries_only_are_removed, .init = make_tmpdir, .fini = cleanup_tmpdir)
{
	tfs_error err;
	char *dir = tpath("staging"), *model = tpath("model.gguf"), *tmp = tpath(".model.gguf.tensorfs-tmp.AbC123");
	char *other = tpath("notes.txt"), *journal, *data;
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert(asprintf(&data, "%s/data", dir) > 0);
	cr_assert_eq(mkdir(data, 0755), 0);
	for (int i = 0; i < 3; i++) {
		const char *p = i == 0 ? model : i == 1 ? tmp : other;
		FILE *f = fopen(p, "w");
		cr_assert_not_null(f);
		fputs("x", f);
		fclose(f);
	}
	cr_assert(asprintf(&journal, "%s/journal.json", dir) > 0);
	FILE *f = fopen(journal, "w");
	cr_assert_not_null(f);
	fprintf(f, "{\"tensorfs_staging\": 1, \"ops\": [], \"pending\": [\"%s\", \"%s\", \"%s\"]}\n",
		model, tmp, other);
	fclose(f);
	cr_assert_eq(tfs_staging_recover(dir, &err), 0, "%s", err.msg);
	cr_assert_eq(access(model, F_OK), 0, "the model was removed");
	cr_assert_eq(access(other, F_OK), 0, "a file that is no temporary was removed");
	cr_assert_neq(access(tmp, F_OK), 0, "the temporary is still there");
	free(dir);
	free(model);
	free(tmp);
	free(other);
	free(journal);
	free(data);
}
