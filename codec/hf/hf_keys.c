/*
 * hf_keys.c - the ordered GGUF key list of the Hugging Face view, and the repo's file reader.
 *
 * Payloads are written little-endian byte by byte (memcpy of a host value would be wrong on
 * a big-endian host; tensorfs only runs little-endian, but the encoding costs nothing).
 */
#include "hf_keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A repo file read whole: tokenizer.json of large vocabularies is ~30 MB; 1 GiB is plenty. */
#define HF_MAX_FILE (1ull << 30)

/* ==== key list ==== */

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int nomem(tfs_error *err, const char *name)
{
	return tfs_error_set(err, TFS_E_NOMEM, "key '%s': out of memory", name);
}

/* Appends a key whose payload (len bytes) the list takes over (data may be NULL if len 0).
 * A name already in the list keeps its place and gets the new value, as gguf-py's
 * add_key_value does (it warns "Duplicated key name"). */
static int add_owned(tfs_hf_kvs *l, const char *name, uint32_t type, uint8_t *data,
		     uint64_t len, tfs_error *err)
{
	long at = tfs_hf_kvs_find(l, name);
	if (at >= 0) {
		free(l->kv[at].data);
		l->kv[at].type = type;
		l->kv[at].data = data;
		l->kv[at].len = len;
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		tfs_hf_kv *kv = realloc(l->kv, cap * sizeof *kv);
		if (!kv) {
			free(data);
			return nomem(err, name);
		}
		l->kv = kv;
		l->cap = cap;
	}
	char *n = strdup(name);
	if (!n) {
		free(data);
		return nomem(err, name);
	}
	l->kv[l->n++] = (tfs_hf_kv){ .name = n, .type = type, .data = data, .len = len };
	return 0;
}

int tfs_hf_kvs_add(tfs_hf_kvs *l, const char *name, uint32_t type, const void *payload,
		   uint64_t len, tfs_error *err)
{
	uint8_t *d = NULL;
	if (len) {
		if (len > SIZE_MAX || !(d = malloc((size_t)len)))
			return nomem(err, name);
		memcpy(d, payload, (size_t)len);
	}
	return add_owned(l, name, type, d, len, err);
}

int tfs_hf_kvs_add_strn(tfs_hf_kvs *l, const char *name, const char *s, size_t n,
			tfs_error *err)
{
	if (n > SIZE_MAX - 8)
		return nomem(err, name);
	uint8_t *d = malloc(8 + n);
	if (!d)
		return nomem(err, name);
	put_le(d, n, 8);
	if (n)
		memcpy(d + 8, s, n);
	return add_owned(l, name, TFS_GGUF_STRING, d, 8 + n, err);
}

int tfs_hf_kvs_add_str(tfs_hf_kvs *l, const char *name, const char *s, tfs_error *err)
{
	return tfs_hf_kvs_add_strn(l, name, s, strlen(s), err);
}

static int add_scalar(tfs_hf_kvs *l, const char *name, uint32_t type, uint64_t bits,
		      unsigned n, tfs_error *err)
{
	uint8_t d[8];
	put_le(d, bits, n);
	return tfs_hf_kvs_add(l, name, type, d, n, err);
}

int tfs_hf_kvs_add_u32(tfs_hf_kvs *l, const char *name, uint32_t v, tfs_error *err)
{
	return add_scalar(l, name, TFS_GGUF_UINT32, v, 4, err);
}

int tfs_hf_kvs_add_i32(tfs_hf_kvs *l, const char *name, int32_t v, tfs_error *err)
{
	return add_scalar(l, name, TFS_GGUF_INT32, (uint32_t)v, 4, err);
}

int tfs_hf_kvs_add_f32(tfs_hf_kvs *l, const char *name, float v, tfs_error *err)
{
	uint32_t bits;
	memcpy(&bits, &v, 4);
	return add_scalar(l, name, TFS_GGUF_FLOAT32, bits, 4, err);
}

int tfs_hf_kvs_add_bool(tfs_hf_kvs *l, const char *name, bool v, tfs_error *err)
{
	return add_scalar(l, name, TFS_GGUF_BOOL, v ? 1 : 0, 1, err);
}

/* An array payload of n fixed-size elements of type et, each `size` bytes taken from v. */
static int add_arr_fixed(tfs_hf_kvs *l, const char *name, uint32_t et, const void *v,
			 size_t n, unsigned size, tfs_error *err)
{
	if (n > (SIZE_MAX - 12) / size)
		return nomem(err, name);
	uint8_t *d = malloc(12 + n * size);
	if (!d)
		return nomem(err, name);
	put_le(d, et, 4);
	put_le(d + 4, n, 8);
	const uint8_t *src = v;
	for (size_t k = 0; k < n; k++) {
		uint32_t x;
		memcpy(&x, src + k * size, 4);
		put_le(d + 12 + k * size, x, size);
	}
	return add_owned(l, name, TFS_GGUF_ARRAY, d, 12 + n * size, err);
}

int tfs_hf_kvs_add_arr_f32(tfs_hf_kvs *l, const char *name, const float *v, size_t n,
			   tfs_error *err)
{
	return add_arr_fixed(l, name, TFS_GGUF_FLOAT32, v, n, 4, err);
}

int tfs_hf_kvs_add_arr_i32(tfs_hf_kvs *l, const char *name, const int32_t *v, size_t n,
			   tfs_error *err)
{
	return add_arr_fixed(l, name, TFS_GGUF_INT32, v, n, 4, err);
}

/* (one byte an element: add_arr_fixed reads 4 from each) */
int tfs_hf_kvs_add_arr_bool(tfs_hf_kvs *l, const char *name, const bool *v, size_t n,
			    tfs_error *err)
{
	if (n > SIZE_MAX - 12)
		return nomem(err, name);
	uint8_t *d = malloc(12 + n);
	if (!d)
		return nomem(err, name);
	put_le(d, TFS_GGUF_BOOL, 4);
	put_le(d + 4, n, 8);
	for (size_t k = 0; k < n; k++)
		d[12 + k] = v[k] ? 1 : 0;
	return add_owned(l, name, TFS_GGUF_ARRAY, d, 12 + n, err);
}

int tfs_hf_kvs_add_arr_str(tfs_hf_kvs *l, const char *name, const char *const *s,
			   const size_t *lens, size_t n, tfs_error *err)
{
	uint64_t total = 12;
	for (size_t k = 0; k < n; k++) {
		size_t len = lens ? lens[k] : strlen(s[k]);
		if (__builtin_add_overflow(total, 8 + (uint64_t)len, &total))
			return nomem(err, name);
	}
	if (total > SIZE_MAX)
		return nomem(err, name);
	uint8_t *d = malloc((size_t)total);
	if (!d)
		return nomem(err, name);
	put_le(d, TFS_GGUF_STRING, 4);
	put_le(d + 4, n, 8);
	uint8_t *p = d + 12;
	for (size_t k = 0; k < n; k++) {
		size_t len = lens ? lens[k] : strlen(s[k]);
		put_le(p, len, 8);
		if (len)
			memcpy(p + 8, s[k], len);
		p += 8 + len;
	}
	return add_owned(l, name, TFS_GGUF_ARRAY, d, total, err);
}

long tfs_hf_kvs_find(const tfs_hf_kvs *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->kv[i].name, name) == 0)
			return (long)i;
	return -1;
}

void tfs_hf_kvs_free(tfs_hf_kvs *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->kv[i].name);
		free(l->kv[i].data);
	}
	free(l->kv);
	*l = (tfs_hf_kvs){ 0 };
}

/* ==== a local directory as the repo ==== */

/* A file name in the repo: NAME, or DIR/NAME one folder down (sentence-transformers'
 * 1_Pooling/config.json); no component empty, "." or "..". */
static bool repo_file_name(const char *name)
{
	const char *slash = strchr(name, '/');
	size_t n = slash ? (size_t)(slash - name) : strlen(name);
	if (n == 0 || (n == 1 && name[0] == '.') || (n == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return !slash || (!strchr(slash + 1, '/') && repo_file_name(slash + 1));
}

static int dir_read(void *ctx, const char *name, uint8_t **data, uint64_t *len, tfs_error *err)
{
	const char *dir = ctx;
	*data = NULL;
	*len = 0;
	if (!repo_file_name(name))
		return tfs_error_set(err, TFS_E_INVALID, "%s: '%s' is not a file name", dir, name);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return tfs_error_sys(err, errno, "%s", dir);
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	int e = errno;
	close(dfd);
	if (fd < 0) {
		if (e == ENOENT)
			return tfs_error_set(err, TFS_E_NOTFOUND, "%s/%s: no such file", dir, name);
		return tfs_error_sys(err, e, "%s/%s", dir, name);
	}
	struct stat st;
	int rc = 0;
	uint8_t *buf = NULL;
	if (fstat(fd, &st) != 0) {
		rc = tfs_error_sys(err, errno, "%s/%s", dir, name);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s/%s: not a regular file", dir, name);
		goto out;
	}
	if ((uint64_t)st.st_size > HF_MAX_FILE) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s/%s: %lld bytes, more than a repo file "
				   "read whole may have (%llu)", dir, name, (long long)st.st_size,
				   (unsigned long long)HF_MAX_FILE);
		goto out;
	}
	size_t size = (size_t)st.st_size;
	if (!(buf = malloc(size + 1))) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s/%s: out of memory", dir, name);
		goto out;
	}
	size_t got = 0;
	while (got < size) {
		ssize_t r = read(fd, buf + got, size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = tfs_error_sys(err, errno, "%s/%s", dir, name);
			goto out;
		}
		if (r == 0)
			break;   /* shrank meanwhile: what was there */
		got += (size_t)r;
	}
	buf[got] = 0;
	*data = buf;
	*len = got;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

int tfs_hf_read_file(const tfs_hf_files *f, const char *name, uint8_t **data, uint64_t *len,
		     tfs_error *err)
{
	*data = NULL;
	*len = 0;
	return f->read(f->ctx, name, data, len, err);
}

int tfs_hf_read_optional(const tfs_hf_files *f, const char *name, uint8_t **data,
			 uint64_t *len, tfs_error *err)
{
	int rc = tfs_hf_read_file(f, name, data, len, err);
	if (rc != TFS_E_NOTFOUND)
		return rc;
	tfs_error_clear(err);
	return 0;
}

void tfs_hf_files_dir(tfs_hf_files *f, const char *dir)
{
	f->read = dir_read;
	f->ctx = (void *)dir;
	f->where = dir;
}
