/*
 * writeutil.h - what test_write.c (the format writers) and test_journal.c (staging, the
 * journal and crash recovery) share: a fresh temporary directory per test, files in it,
 * models opened and written, and digest(), a model's state as one string.
 *
 * A model's state is summarized by digest(): live keys (name, type, payload hash) and live
 * tensors (name, dtype, shape without trailing 1s, size, bytes hash) in slot order, so
 * "same state" is one string comparison and covers "untouched tensors are byte-for-byte
 * equal".  Header only (static inline), as testutil.h: each test is one file.
 */
#ifndef TFS_WRITEUTIL_H
#define TFS_WRITEUTIL_H

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

static inline void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tfs_write_XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static inline void rm_rf(const char *path)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	cr_assert_eq(system(cmd), 0);
}

static inline void cleanup_tmpdir(void)
{
	if (tmpdir[0])
		rm_rf(tmpdir);
}

static inline char *tpath(const char *name)
{
	char *p;
	cr_assert(asprintf(&p, "%s/%s", tmpdir, name) > 0);
	return p;
}

static inline void spit(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(p, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static inline void copy_file(const char *from, const char *to)
{
	size_t n;
	void *p = test_slurp(from, &n);
	spit(to, p, n);
	free(p);
}

static inline bool same_file_bytes(const char *a, const char *b)
{
	size_t na, nb;
	void *pa = test_slurp(a, &na), *pb = test_slurp(b, &nb);
	bool same = na == nb && memcmp(pa, pb, na) == 0;
	free(pa);
	free(pb);
	return same;
}

static inline tfs_model *open_ok(const char *path)
{
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	int rc = tfs_model_open(&m, path, NULL, &err);
	cr_assert_eq(rc, 0, "open %s: %s", path, err.msg);
	return m;
}

static inline uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static inline int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One line per live key and tensor. */
static inline char *digest(const tfs_model *m)
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

static inline void assert_digest(const tfs_model *m, const char *want)
{
	char *got = digest(m);
	cr_assert_str_eq(got, want);
	free(got);
}

/* GGUF payloads */
static inline uint8_t *payload(const void *p, size_t n)
{
	uint8_t *d = malloc(n);
	memcpy(d, p, n);
	return d;
}

static inline uint8_t *str_payload(const char *s, uint64_t *len)
{
	uint64_t n = strlen(s);
	uint8_t *d = malloc(8 + n);
	memcpy(d, &n, 8);
	memcpy(d + 8, s, n);
	*len = 8 + n;
	return d;
}

static inline void set_kv_ok(tfs_model *m, const char *key, uint32_t type, uint8_t *d, uint64_t len)
{
	tfs_error err = { 0 };
	int rc = tfs_model_set_kv(m, key, type, d, len, &err);
	cr_assert_eq(rc, 0, "set %s: %s", key, err.msg);
}

static inline void set_str_ok(tfs_model *m, const char *key, const char *v)
{
	uint64_t len;
	uint8_t *p = str_payload(v, &len);
	set_kv_ok(m, key, TFS_GGUF_STRING, p, len);
}

static inline void write_ok(tfs_model *m, const char *output)
{
	tfs_error err = { 0 };
	tfs_write_opts o = { .output = output };
	int rc = tfs_model_write(m, &o, &err);
	cr_assert_eq(rc, 0, "write: %s", err.msg);
}

/* No temporaries (".*.tensorfs-tmp.*") are left in dir. */
static inline void assert_no_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		cr_assert_null(strstr(e->d_name, ".tensorfs-tmp."), "left behind: %s", e->d_name);
	closedir(d);
}

/* The layout rules of GGUF_CHECKLIST.md, read from the bytes. */
static inline void check_gguf_layout(const char *path, uint32_t want_align)
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

static inline tfs_model *gguf_copy(char **path)
{
	*path = tpath("model.gguf");
	copy_file(GGUF_SRC, *path);
	return open_ok(*path);
}

/* A file holding n bytes derived from seed. */
static inline char *bytes_file(const char *name, size_t n, uint8_t seed)
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
static inline const tfs_tensor *first_of_dtype(const tfs_model *m, int dtype)
{
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (!t->deleted && t->dtype == dtype)
			return t;
	}
	return NULL;
}

/* A safetensors file with F32 tensors names[i] of n[i] elements, values from seed. */
static inline void make_st(const char *path, const char *meta, const char *const *names,
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

static inline void make_sharded(void)
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

/* ==== Ollama ==== */

#define OL_MAN "models/manifests/registry.ollama.ai/library/"

static inline void copy_store(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "cp -r '" TFS_TESTDATA "/ollama/models' '%s/models'", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

static inline tfs_model *open_ref(const char *ref)
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

static inline char *extra_text(const tfs_model *m, const char *name)
{
	long i = tfs_model_find_extra(m, name);
	cr_assert_geq(i, 0, "no extra %s", name);
	const tfs_extra *x = tfs_model_extra(m, (size_t)i);
	const tfs_source *s = tfs_model_source(m, (size_t)x->src);
	return strndup((const char *)s->map + x->offset, (size_t)x->size);
}

#endif
