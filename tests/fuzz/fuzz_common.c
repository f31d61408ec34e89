/* fuzz_common.c - scratch files and the read side shared by the harnesses (see fuzz.h). */
#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== scratch files ==== */

static char g_tmpdir[256];

void fz_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FUZZ FINDING: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	abort();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void rm_tmpdir(void)
{
	if (g_tmpdir[0])
		nftw(g_tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fz_tmpdir(void)
{
	if (!g_tmpdir[0]) {
		struct stat st;
		const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
					   access("/dev/shm", W_OK) == 0
				   ? "/dev/shm"
				   : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		snprintf(g_tmpdir, sizeof(g_tmpdir), "%s/tfs-fuzz-XXXXXX", base);
		if (!mkdtemp(g_tmpdir))
			fz_fail("mkdtemp %s: %s", g_tmpdir, strerror(errno));
		atexit(rm_tmpdir);
	}
	return g_tmpdir;
}

char *fz_path(const char *rel)
{
	char *p;
	if (asprintf(&p, "%s/%s", fz_tmpdir(), rel) < 0)
		fz_fail("out of memory");
	return p;
}

void fz_mkdirs(const char *path)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0755);
			*p = '/';
		}
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		fz_fail("mkdir %s: %s", buf, strerror(errno));
}

void fz_write_file(const char *path, const void *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fz_fail("%s: %s", path, strerror(errno));
	const char *p = data;
	while (size > 0) {
		ssize_t w = write(fd, p, size);
		if (w <= 0)
			fz_fail("%s: write: %s", path, strerror(errno));
		p += w;
		size -= (size_t)w;
	}
	close(fd);
}

void fz_copy_testdata(const char *rel, const char *path)
{
	char src[1024];
	snprintf(src, sizeof(src), "%s/%s", TFS_TESTDATA, rel);
	FILE *f = fopen(src, "rb");
	if (!f)
		fz_fail("%s: %s", src, strerror(errno));
	char *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 65536)))
			fz_fail("out of memory");
		size_t r = fread(buf + n, 1, cap - n, f);
		if (r == 0)
			break;
		n += r;
	}
	fclose(f);
	fz_write_file(path, buf, n);
	free(buf);
}

typedef struct {
	char name[256];
	int fd;
	char *path;
} memfd_slot;

const char *fz_memfd_path(const char *name, const uint8_t *data, size_t size)
{
	static memfd_slot slots[8];
	memfd_slot *s = NULL;
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]) && !s; i++) {
		if (!slots[i].path) {
			s = &slots[i];
			snprintf(s->name, sizeof(s->name), "%s", name);
			if ((s->fd = memfd_create("fuzz-input", MFD_CLOEXEC)) < 0)
				fz_fail("memfd_create: %s", strerror(errno));
			char target[64];
			snprintf(target, sizeof(target), "/proc/self/fd/%d", s->fd);
			s->path = fz_path(name);
			if (symlink(target, s->path) < 0)
				fz_fail("symlink %s: %s", s->path, strerror(errno));
		} else if (!strcmp(slots[i].name, name)) {
			s = &slots[i];
		}
	}
	if (!s)
		fz_fail("too many memfds");
	if (ftruncate(s->fd, 0) < 0 || (size && pwrite(s->fd, data, size, 0) != (ssize_t)size))
		fz_fail("memfd %s: %s", name, strerror(errno));
	return s->path;
}

/* ==== the read side ==== */

#define RAW_CHUNK 65536
#define F32_CHUNK 16384
#define F32_CAP (1u << 20)  /* values read per tensor (the f32 view of a tiny input is small) */

static void exercise_raw(const tfs_model *m, size_t i, const tfs_tensor *t)
{
	tfs_error e = { 0 };
	const tfs_source *s = tfs_model_source(m, (size_t)t->src);
	if (t->src < 0 || (size_t)t->src >= tfs_model_n_sources(m) || !s)
		fz_fail("tensor '%s' has source %d of %zu", t->name, t->src, tfs_model_n_sources(m));
	if (t->offset > s->size || t->nbytes > s->size - t->offset)
		fz_fail("tensor '%s' [%llu, +%llu) lies outside its source (%llu bytes)", t->name,
			(unsigned long long)t->offset, (unsigned long long)t->nbytes,
			(unsigned long long)s->size);
	static uint8_t buf[RAW_CHUNK];
	for (uint64_t off = 0; off < t->nbytes; off += RAW_CHUNK) {
		uint64_t want = t->nbytes - off < RAW_CHUNK ? t->nbytes - off : RAW_CHUNK;
		int64_t got = tfs_tensor_read_raw(m, i, off, RAW_CHUNK, buf, &e);
		if (got != (int64_t)want)
			fz_fail("tensor '%s': raw read at %llu gave %lld of %llu: %s", t->name,
				(unsigned long long)off, (long long)got, (unsigned long long)want,
				e.msg);
		if (s->map && memcmp(buf, s->map + t->offset + off, (size_t)want))
			fz_fail("tensor '%s': raw bytes at %llu differ from the source", t->name,
				(unsigned long long)off);
	}
	/* odd offsets, and reads clipped at the end */
	uint64_t offs[] = { 1, t->nbytes / 3 | 1, t->nbytes ? t->nbytes - 1 : 0, t->nbytes,
			    t->nbytes + 7 };
	for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		uint64_t off = offs[k];
		uint64_t want = off >= t->nbytes ? 0 : (t->nbytes - off < 7 ? t->nbytes - off : 7);
		int64_t got = tfs_tensor_read_raw(m, i, off, 7, buf, &e);
		if (got != (int64_t)want)
			fz_fail("tensor '%s': raw read of 7 at %llu gave %lld, not %llu: %s", t->name,
				(unsigned long long)off, (long long)got, (unsigned long long)want,
				e.msg);
		if (want && s->map && memcmp(buf, s->map + t->offset + off, (size_t)want))
			fz_fail("tensor '%s': raw bytes at %llu differ from the source", t->name,
				(unsigned long long)off);
	}
}

static void exercise_f32(const tfs_model *m, size_t i, const tfs_tensor *t)
{
	tfs_error e = { 0 };
	const char *why = NULL;
	if (!tfs_tensor_has_f32(m, i, &why)) {
		if (!why)
			fz_fail("tensor '%s': no f32 view and no reason", t->name);
		return;
	}
	uint64_t count = tfs_tensor_f32_count(m, i, NULL);
	uint32_t nd = 0;
	int64_t ne[TFS_MAX_DIMS + 1];
	if (tfs_tensor_f32_shape(m, i, &nd, ne))
		fz_fail("tensor '%s': no f32 shape", t->name);
	uint64_t prod = 1;
	for (uint32_t d = 0; d < nd; d++)
		prod *= (uint64_t)ne[d];
	if (nd > TFS_MAX_DIMS + 1 || prod != count)
		fz_fail("tensor '%s': f32 shape (%u dims) holds %llu values, the view %llu", t->name,
			nd, (unsigned long long)prod, (unsigned long long)count);
	uint64_t n = count < F32_CAP ? count : F32_CAP;
	float *all = malloc((n ? n : 1) * sizeof(float));
	if (!all)
		fz_fail("out of memory");
	for (uint64_t first = 0; first < n; first += F32_CHUNK) {
		uint64_t k = n - first < F32_CHUNK ? n - first : F32_CHUNK;
		if (tfs_tensor_read_f32(m, i, first, k, all + first, &e))
			fz_fail("tensor '%s': f32 read [%llu, +%llu) failed: %s", t->name,
				(unsigned long long)first, (unsigned long long)k, e.msg);
	}
	/* odd offsets must give the same values as the whole read */
	uint64_t firsts[] = { 1, n / 2 | 1, n ? n - 1 : 0, n > 37 ? n - 37 : 0 };
	for (size_t j = 0; j < sizeof(firsts) / sizeof(firsts[0]); j++) {
		uint64_t first = firsts[j];
		if (first >= n)
			continue;
		uint64_t k = n - first < 37 ? n - first : 37;
		float part[37];
		if (tfs_tensor_read_f32(m, i, first, k, part, &e))
			fz_fail("tensor '%s': f32 read [%llu, +%llu) failed: %s", t->name,
				(unsigned long long)first, (unsigned long long)k, e.msg);
		if (memcmp(part, all + first, k * sizeof(float)))
			fz_fail("tensor '%s': f32 values at %llu differ from the whole read", t->name,
				(unsigned long long)first);
	}
	/* past the end fails cleanly */
	float one;
	if (tfs_tensor_read_f32(m, i, count, 1, &one, &e) == 0)
		fz_fail("tensor '%s': an f32 read past the end succeeded", t->name);
	free(all);
}

static void exercise_npy(const tfs_model *m, size_t i, const tfs_tensor *t)
{
	if (!tfs_npy_available(m, i))
		return;
	tfs_buf b = { 0 };
	tfs_error e = { 0 };
	bool raw = false;
	if (tfs_npy_header(&b, &raw, m, i, &e))
		fz_fail("tensor '%s': npy header failed: %s", t->name, e.msg);
	if (b.len < 10 || b.len % 64 || memcmp(b.data, "\x93NUMPY\x01\x00", 8) ||
	    b.data[b.len - 1] != '\n')
		fz_fail("tensor '%s': malformed npy header of %zu bytes", t->name, b.len);
	tfs_buf_free(&b);
}

static void exercise_name(const char *name)
{
	tfs_buf enc = { 0 }, dec = { 0 };
	if (tfs_name_encode(&enc, name))
		fz_fail("name encoding failed");
	if (enc.len == 0 || enc.len > 255 || memchr(enc.data, '/', enc.len) ||
	    !strcmp(enc.data, ".") || !strcmp(enc.data, ".."))
		fz_fail("'%s' encodes to an impossible file name '%s'", name, enc.data);
	if (!strstr(enc.data, "%~")) {
		if (tfs_name_decode(&dec, enc.data) || strcmp(dec.data ? dec.data : "", name))
			fz_fail("'%s' does not decode back from '%s'", name, enc.data);
	}
	tfs_buf_free(&enc);
	tfs_buf_free(&dec);
}

/* index.json as a stream (what the mount serves): its size and its bytes, in order and at
 * a few offsets, are those of the whole document doc. */
static void exercise_index_stream(const tfs_model *m, const tfs_buf *doc)
{
	tfs_index *s;
	tfs_error e;
	char buf[1000];
	size_t got;
	if (tfs_index_open(&s, m, false, true, &e))
		fz_fail("index.json stream failed: %s", e.msg);
	if (tfs_index_size(s) != doc->len)
		fz_fail("index.json stream: %llu bytes, the document %zu",
			(unsigned long long)tfs_index_size(s), doc->len);
	for (uint64_t off = 0; off <= doc->len; off += sizeof(buf)) {
		if (tfs_index_read(&got, s, buf, off, sizeof(buf), &e))
			fz_fail("index.json stream at %llu: %s", (unsigned long long)off, e.msg);
		if (got != (doc->len - off < sizeof(buf) ? doc->len - off : sizeof(buf)) ||
		    memcmp(buf, doc->data + off, got) != 0)
			fz_fail("index.json stream differs at %llu", (unsigned long long)off);
	}
	for (size_t k = 1; k <= 4 && doc->len; k++) {
		size_t off = doc->len * k / 5, n = sizeof(buf) / k;
		size_t want = doc->len - off < n ? doc->len - off : n;
		if (tfs_index_read(&got, s, buf, off, n, &e) || got != want ||
		    memcmp(buf, doc->data + off, got) != 0)
			fz_fail("index.json stream differs at %zu", off);
	}
	tfs_index_free(s);
}

void fz_exercise(const tfs_model *m)
{
	tfs_error e = { 0 };
	tfs_buf b = { 0 };
	for (size_t i = 0; i < tfs_model_n_kv(m); i++) {
		const tfs_kv *kv = tfs_model_kv(m, i);
		if (kv->deleted)
			continue;
		exercise_name(kv->name);
		b.len = 0;
		if (tfs_value_format(&b, kv->type, kv->data, kv->len, &e) &&
		    e.code != TFS_E_UNSUPPORTED)
			fz_fail("key '%s': its text cannot be formatted: %s", kv->name, e.msg);
		b.len = 0;
		if (tfs_value_type_name(&b, kv->type, kv->data, kv->len))
			fz_fail("key '%s': no type name", kv->name);
	}
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		if (t->deleted)
			continue;
		exercise_name(t->name);
		exercise_raw(m, i, t);
		exercise_f32(m, i, t);
		exercise_npy(m, i, t);
	}
	for (size_t i = 0; i < tfs_model_n_extras(m); i++) {
		const tfs_extra *x = tfs_model_extra(m, i);
		if (x->deleted)
			continue;
		exercise_name(x->name);
		const tfs_source *s = tfs_model_source(m, (size_t)x->src);
		if (x->src < 0 || !s || x->offset > s->size || x->size > s->size - x->offset)
			fz_fail("extra '%s' lies outside its source", x->name);
	}
	b.len = 0;
	if (tfs_model_index_json(&b, m, &e))
		fz_fail("index.json failed: %s", e.msg);
	exercise_index_stream(m, &b);
	/* jansson refuses the lone surrogates (\udcXX) that stand for bytes of names that are
	 * not UTF-8; the document must be JSON otherwise */
	for (char *p = b.data; p && (p = strstr(p, "\\udc")); p += 4)
		memcpy(p + 2, "00", 2);
	json_error_t je;
	json_t *j = json_loadb(b.data, b.len, 0, &je);
	if (!j)
		fz_fail("index.json is not JSON: %s", je.text);
	json_decref(j);
	tfs_buf_free(&b);
}

int fz_read_one_file(void *ctx, const char *name, uint8_t **data, uint64_t *len, tfs_error *err)
{
	const fz_one_file *f = ctx;

	if (strcmp(name, f->name) != 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no such file", name);
	*data = malloc(f->size + 1);
	if (!*data)
		fz_fail("out of memory");
	memcpy(*data, f->data, f->size);
	(*data)[f->size] = 0;
	*len = f->size;
	return 0;
}
