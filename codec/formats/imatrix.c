/*
 * imatrix.c - llama.cpp's importance matrices (-o imatrix=FILE): the weights the IQ1/IQ2/IQ3
 * quantizers give each column of a tensor.
 *
 * Two file formats, as llama-imatrix writes them and llama-quantize reads them:
 * - GGUF (llama-imatrix's default since 2025): for each weight W, an F32 tensor
 *   "W.in_sum2" of ne0 x n_mat sums of squared activations (n_mat > 1 for the experts of a
 *   MoE tensor) and an F32 tensor "W.counts" of n_mat call counts ("W.in_sum", the plain
 *   sums, is optional and not used here).  Weight (j, i) = in_sum2[j][i] / count[j], with
 *   the count rounded to an integer first; an expert never called weighs every column 1.
 * - the legacy ".dat": int32 entries, then per entry int32 name length, the name, int32
 *   calls, int32 values, that many float sums; (optional trailer: int32 chunks, dataset
 *   name).  Weight i = sums[i] / calls (sums as they are when calls is 0).
 * Like llama-quantize, a tensor of ne0 x ne1 x ne2 takes an entry of ne0 * ne2 values: one
 * row of ne0 weights per expert (ne2).  Entries are indexed at open and their values read
 * when a tensor is quantized, so a MoE model's imatrix (hundreds of MB) is never held.
 */
#include "imatrix.h"
#include "imatrix_ops.h"
#include "value.h"
#include "open.h"
#include "dtype.h"
#include "source_impl.h" /* the GGUF file's descriptor (values_fd) */
#include "model_impl.h" /* tfs_model_gguf_encoded */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAME 4096u   /* a legacy entry's name (GGUF names are bounded by its reader) */

typedef struct {
	char *name;           /* the weight's name (owned) */
	uint64_t nval;        /* values: ne0 * n_mat */
	uint64_t ncounts;     /* n_mat (legacy: 1) */
	long sums, counts;    /* GGUF: the tensors' indices */
	uint64_t off;         /* legacy: the sums' offset in the file */
	int32_t calls;        /* legacy: the call count */
} entry;

struct tfs_imatrix {
	tfs_imatrix_head head; /* first: the table model/ asks through (imatrix_ops.h) */
	char *path;
	tfs_model *gguf;      /* a GGUF imatrix, or NULL */
	int fd;               /* a legacy one: the file (-1 otherwise) */
	entry *e;             /* sorted by name */
	size_t n;
	struct stat st;       /* the file read, as it was when opened */
	char *dataset;        /* what it was computed on, or NULL (llama-quantize's key) */
	int64_t chunks;       /* on how many chunks (0: not said) */
};

static const tfs_imatrix_ops imatrix_ops;

static int by_name(const void *a, const void *b)
{
	return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static const entry *find(const tfs_imatrix *im, const char *name)
{
	entry key = { .name = (char *)name };

	return im->n ? bsearch(&key, im->e, im->n, sizeof(entry), by_name) : NULL;
}

static int add_entry(tfs_imatrix *im, size_t *cap, const char *name, size_t len, tfs_error *err)
{
	if (im->n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 64;
		entry *e = realloc(im->e, ncap * sizeof(entry));

		if (!e)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		im->e = e;
		*cap = ncap;
	}
	entry *x = &im->e[im->n];

	memset(x, 0, sizeof(*x));
	x->sums = x->counts = -1;
	if (!(x->name = strndup(name, len)))
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	im->n++;
	return 0;
}

static uint64_t elems(const tfs_tensor *t)
{
	uint64_t n = 1;

	for (uint32_t d = 0; d < t->n_dims; d++)
		n *= (uint64_t)t->ne[d];   /* the GGUF reader bounds the product */
	return n;
}

static bool has_suffix(const char *s, const char *suf, size_t *stem)
{
	size_t n = strlen(s), k = strlen(suf);

	if (n <= k || strcmp(s + n - k, suf) != 0)
		return false;
	*stem = n - k;
	return true;
}

/* A GGUF imatrix's "imatrix.datasets" (the first: llama-quantize keeps one) and
 * "imatrix.chunk_count", when they are there and well-formed. */
static int gguf_provenance(tfs_imatrix *im, tfs_error *err)
{
	const tfs_model *m = im->gguf;
	long k = tfs_model_find_kv(m, "imatrix.chunk_count");
	const tfs_kv *kv = k >= 0 ? tfs_model_kv(m, (size_t)k) : NULL;

	if (kv && kv->type == TFS_GGUF_UINT32 && kv->len == 4)
		im->chunks = tfs_le32(kv->data);
	k = tfs_model_find_kv(m, "imatrix.datasets");
	kv = k >= 0 ? tfs_model_kv(m, (size_t)k) : NULL;
	/* an array: u32 element type, u64 count, then (strings) u64 length + bytes */
	if (!kv || kv->type != TFS_GGUF_ARRAY || kv->len < 20 ||
	    tfs_le32(kv->data) != TFS_GGUF_STRING || tfs_le64(kv->data + 4) == 0)
		return 0;
	const uint64_t len = tfs_le64(kv->data + 12);

	if (len > kv->len - 20)
		return 0;
	if (!(im->dataset = strndup((const char *)kv->data + 20, (size_t)len)))
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	return 0;
}

static int open_gguf(tfs_imatrix *im, tfs_error *err)
{
	const tfs_model *m = im->gguf;
	size_t cap = 0;
	int rc = 0;

	/* one entry per ".in_sum2" tensor, then its ".counts" found by name */
	for (size_t i = 0; !rc && i < tfs_model_n_tensors(m); i++) {
		const tfs_tensor *t = tfs_model_tensor(m, i);
		size_t stem;

		if (!t->deleted && has_suffix(t->name, ".in_sum2", &stem))
			if (!(rc = add_entry(im, &cap, t->name, stem, err)))
				im->e[im->n - 1].sums = (long)i;
	}
	for (size_t k = 0; !rc && k < im->n; k++) {
		entry *x = &im->e[k];
		const tfs_tensor *s = tfs_model_tensor(m, (size_t)x->sums), *c;
		char cname[MAX_NAME + 16];

		snprintf(cname, sizeof(cname), "%s.counts", x->name);
		x->counts = tfs_model_find_tensor(m, cname);
		c = x->counts >= 0 ? tfs_model_tensor(m, (size_t)x->counts) : NULL;
		if (!c)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: '%s' has sums but no counts "
					   "('%s' is missing)", im->path, x->name, cname);
		else if (s->dtype != TFS_DT_F32 || c->dtype != TFS_DT_F32)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: the sums and counts of '%s' "
					   "must be F32", im->path, x->name);
		else if (!(x->ncounts = elems(c)) || !(x->nval = elems(s)) ||
			 x->nval % x->ncounts)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: '%s' has %" PRIu64 " sums for %"
					   PRIu64 " counts (not a whole row per count)", im->path,
					   x->name, x->nval, x->ncounts);
	}
	if (!rc && im->n == 0)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: a GGUF file without importance-matrix "
				   "tensors ('NAME.in_sum2' and 'NAME.counts'): not an imatrix",
				   im->path);
	return rc ? rc : gguf_provenance(im, err);
}

/* The descriptor the values are read from. */
static int values_fd(const tfs_imatrix *im)
{
	return im->gguf ? tfs_model_source(im->gguf, 0)->fd : im->fd;
}

/* Whether the file read is still as it was opened (size, modification and change times): one
 * rewritten in place since (a new llama-imatrix run onto the same path) would mix two runs'
 * weights, so it is refused.  One replaced by a rename is not seen: the open file is still
 * the old one. */
static int unchanged(const tfs_imatrix *im, tfs_error *err)
{
	struct stat now;

	if (fstat(values_fd(im), &now) != 0)
		return tfs_error_sys(err, errno, "%s: the importance matrix", im->path);
	/* the change time too: a rewrite may keep the size and set the modification time back
	 * (touch -r), never the change time */
	if (now.st_size != im->st.st_size || now.st_mtim.tv_sec != im->st.st_mtim.tv_sec ||
	    now.st_mtim.tv_nsec != im->st.st_mtim.tv_nsec ||
	    now.st_ctim.tv_sec != im->st.st_ctim.tv_sec ||
	    now.st_ctim.tv_nsec != im->st.st_ctim.tv_nsec)
		return tfs_error_sys(err, EIO, "%s: the importance matrix was changed since "
				     "the mount (it is read when a tensor is quantized): remount "
				     "to use the new one", im->path);
	return 0;
}

/* Reads exactly len bytes at off of the legacy file; TFS_E_FORMAT when it ends first. */
static int read_at(const tfs_imatrix *im, void *buf, size_t len, uint64_t off, const char *what,
		   tfs_error *err)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = pread(im->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return tfs_error_sys(err, errno, "%s: reading %s", im->path, what);
		if (r == 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: ends inside %s (at byte %"
					     PRIu64 "): not an imatrix file", im->path, what, off);
		done += (size_t)r;
	}
	return 0;
}

/* The legacy file's optional trailer at off: int32 chunks, int32 length, the dataset's name.
 * One that does not fit the file is ignored (llama-quantize would read past its end). */
static int legacy_trailer(tfs_imatrix *im, uint64_t off, uint64_t size, tfs_error *err)
{
	int32_t t[2];

	if (size - off < 8 || read_at(im, t, 8, off, "the trailer", err) != 0 || t[1] < 0 ||
	    (uint64_t)t[1] > size - off - 8 || t[1] > 65536)
		return 0;
	char *d = malloc((size_t)t[1] + 1);

	if (!d)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if (read_at(im, d, (size_t)t[1], off + 8, "the dataset name", err) != 0) {
		free(d);
		return 0;
	}
	d[t[1]] = 0;
	im->dataset = d;
	im->chunks = t[0];
	return 0;
}

static int open_legacy(tfs_imatrix *im, uint64_t size, tfs_error *err)
{
	int32_t n;
	uint64_t off = 4;
	size_t cap = 0;
	int rc = read_at(im, &n, 4, 0, "the entry count", err);

	if (!rc && n < 1)
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: %" PRId32 " entries: neither a GGUF "
				   "nor a legacy imatrix file", im->path, n);
	for (int32_t k = 0; !rc && k < n; k++) {
		int32_t len, hdr[2];
		char name[MAX_NAME];

		rc = read_at(im, &len, 4, off, "an entry's name length", err);
		if (!rc && (len < 1 || (uint32_t)len >= MAX_NAME))
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: entry %" PRId32 " has a name of %"
					   PRId32 " bytes: not an imatrix file", im->path, k, len);
		if (!rc)
			rc = read_at(im, name, (size_t)len, off + 4, "an entry's name", err);
		if (!rc)
			rc = read_at(im, hdr, 8, off + 4 + (uint64_t)len, "an entry's counts", err);
		if (!rc && (hdr[1] < 1 || off + 12 + (uint64_t)len + 4 * (uint64_t)hdr[1] > size))
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: entry '%.*s' says %" PRId32
					   " values, past the end of the file", im->path, len, name,
					   hdr[1]);
		if (!rc && memchr(name, 0, (size_t)len))
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: entry %" PRId32 "'s name holds a "
					   "NUL byte", im->path, k);
		if (!rc)
			rc = add_entry(im, &cap, name, (size_t)len, err);
		if (!rc) {
			entry *x = &im->e[im->n - 1];

			x->calls = hdr[0];
			x->nval = (uint64_t)hdr[1];
			x->ncounts = 1;
			x->off = off + 12 + (uint64_t)len;
			off = x->off + 4 * x->nval;
		}
	}
	return rc ? rc : legacy_trailer(im, off, size, err);
}

int tfs_imatrix_open(tfs_imatrix **out, const char *path, tfs_error *err)
{
	tfs_imatrix *im = calloc(1, sizeof(*im));
	uint8_t magic[4] = { 0 };
	struct stat st;
	int rc = 0;

	*out = NULL;
	if (!im || !(im->path = strdup(path))) {
		free(im);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	im->head.ops = &imatrix_ops;
	im->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (im->fd < 0 || fstat(im->fd, &st) != 0)
		rc = tfs_error_sys(err, errno, "%s: opening the importance matrix", path);
	else if (!S_ISREG(st.st_mode))
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: not a regular file", path);
	else if (!(rc = read_at(im, magic, 4, 0, "the header", err))) {
		if (memcmp(magic, "GGUF", 4) == 0) {
			close(im->fd);
			im->fd = -1;
			rc = tfs_model_open(&im->gguf, path, NULL, err);
			if (!rc && !tfs_model_gguf_encoded(im->gguf))
				rc = tfs_error_set(err, TFS_E_FORMAT, "%s: not a GGUF file", path);
			if (!rc && fstat(values_fd(im), &st) != 0)
				rc = tfs_error_sys(err, errno, "%s: opening the importance matrix",
						   path);
			if (!rc)
				rc = open_gguf(im, err);
		} else {
			rc = open_legacy(im, (uint64_t)st.st_size, err);
		}
		im->st = st;
	}
	if (!rc)
		qsort(im->e, im->n, sizeof(entry), by_name);
	for (size_t k = 1; !rc && k < im->n; k++)
		if (strcmp(im->e[k - 1].name, im->e[k].name) == 0)
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: two entries for '%s'", path,
					   im->e[k].name);
	if (rc) {
		tfs_imatrix_free(im);
		return rc;
	}
	*out = im;
	return 0;
}

void tfs_imatrix_free(tfs_imatrix *im)
{
	if (!im)
		return;
	for (size_t k = 0; k < im->n; k++)
		free(im->e[k].name);
	free(im->e);
	free(im->dataset);
	if (im->fd >= 0)
		close(im->fd);
	tfs_model_free(im->gguf);
	free(im->path);
	free(im);
}

const char *tfs_imatrix_path(const tfs_imatrix *im)
{
	return im->path;
}

const char *tfs_imatrix_dataset(const tfs_imatrix *im)
{
	return im->dataset;
}

int64_t tfs_imatrix_chunks(const tfs_imatrix *im)
{
	return im->chunks;
}

size_t tfs_imatrix_n_entries(const tfs_imatrix *im)
{
	return im->n;
}

const char *tfs_imatrix_entry(const tfs_imatrix *im, size_t k, uint64_t *nval)
{
	if (k >= im->n)
		return NULL;
	if (nval)
		*nval = im->e[k].nval;
	return im->e[k].name;
}

int64_t tfs_imatrix_values(const tfs_imatrix *im, const char *name)
{
	const entry *x = find(im, name);
	return x ? (int64_t)x->nval : -1;
}

static bool has(const tfs_imatrix *im, const char *name)
{
	return im && find(im, name) != NULL;
}

static int weights(const tfs_imatrix *im, const char *name, uint64_t n_per_row, uint64_t n_mat,
		   uint64_t mat, float *out, tfs_error *err)
{
	const entry *x = im ? find(im, name) : NULL;

	if (!x)
		return tfs_error_set(err, TFS_E_NOTFOUND, "the importance matrix %s has no entry "
				     "for tensor '%s'", im ? im->path : "(none)", name);
	/* llama-quantize's rule: ne0 values per expert, every expert */
	if (n_per_row == 0 || x->nval / n_per_row != n_mat || x->nval % n_per_row || mat >= n_mat)
		return tfs_error_set(err, TFS_E_INVALID, "the importance matrix %s has %" PRIu64
				     " values for tensor '%s', which needs %" PRIu64 " (%" PRIu64
				     " columns x %" PRIu64 " expert%s): made for another model?",
				     im->path, x->nval, name, n_per_row * n_mat, n_per_row, n_mat,
				     n_mat == 1 ? "" : "s");
	int rc = unchanged(im, err);
	if (rc)
		return rc;
	if (im->gguf) {
		const uint64_t row = x->nval / x->ncounts;   /* values per count */
		int64_t got = tfs_tensor_read_raw(im->gguf, (size_t)x->sums, 4 * mat * n_per_row,
						  4 * n_per_row, out, err);

		if (got >= 0 && (uint64_t)got != 4 * n_per_row)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: the sums of '%s' end early",
					     im->path, name);
		if (got < 0)
			return (int)got;
		/* the count of each value's row (a count covers `row` values) */
		for (uint64_t i = 0; i < n_per_row;) {
			const uint64_t v = mat * n_per_row + i, j = v / row;
			const uint64_t end = (j + 1) * row - mat * n_per_row;
			float c;

			got = tfs_tensor_read_raw(im->gguf, (size_t)x->counts, 4 * j, 4, &c, err);
			if (got != 4)
				return got < 0 ? (int)got
					       : tfs_error_set(err, TFS_E_FORMAT, "%s: the counts of "
							       "'%s' end early", im->path, name);
			/* llama.cpp rounds the stored count to an integer, then divides by it */
			const float count = c == c && fabsf(c) < 9.2e18f ? (float)llroundf(c) : 0.0f;

			for (; i < n_per_row && i < end; i++)
				out[i] = count > 0.0f ? out[i] / count : 1.0f;
		}
		return 0;
	}
	rc = read_at(im, out, 4 * n_per_row, x->off + 4 * mat * n_per_row, "an entry's values",
		     err);

	if (!rc && x->calls > 0)
		for (uint64_t i = 0; i < n_per_row; i++)
			out[i] = out[i] / (float)x->calls;
	return rc;
}

static const tfs_imatrix_ops imatrix_ops = { has, weights };
