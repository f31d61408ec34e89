/*
 * validate.c - a written file read back with the reader and compared with the model
 * that was written: every key in full, every tensor's type, shape and (sampled) bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ==== validation: the new file read back with the reader ==== */

/* ne with the dims past n_dims as 1, trailing 1s ignored (ggml drops them when writing). */
static uint32_t eff_dims(const tfs_tensor *t, int64_t ne[TFS_MAX_DIMS])
{
	uint32_t n = 0;
	for (uint32_t k = 0; k < TFS_MAX_DIMS; k++) {
		ne[k] = k < t->n_dims ? t->ne[k] : 1;
		if (ne[k] != 1)
			n = k + 1;
	}
	return n;
}

static bool same_range(const uint8_t *a, const uint8_t *b, uint64_t n)
{
	while (n) {
		size_t k = n > (1u << 30) ? (1u << 30) : (size_t)n;
		if (memcmp(a, b, k))
			return false;
		a += k;
		b += k;
		n -= k;
	}
	return true;
}

#define SAMPLE 4096

/* tfs_source_samples_differ for tfs_write_validate: 0, or an error naming the tensor. */
static int same_remote(const tfs_source *sa, uint64_t off, const uint8_t *pb, uint64_t n,
		       const char *wpath, const char *name, tfs_error *err)
{
	bool differ;
	int rc = tfs_source_samples_differ(&differ, sa, off, pb, n, err);
	return !rc && differ ? tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': bytes differ",
					     wpath, name) : rc;
}

/*
 * Checks that w (the written file, as read back) holds exactly m's live keys with the same
 * payloads and m's live tensors with the same dtype, shape and size.  Tensor bytes are
 * compared in full for new bytes (a staged file: offset 0, the whole source) and small
 * tensors; for the others a sample at the start, middle and end: their bytes were copied by
 * the kernel from a file that is not modified, and a 40 GB re-read would double the repack.
 */
/* Asks for every page the comparison will read at once: read one after the other, the
 * samples of a file whose extents were cloned (nothing of it in the page cache) cost a
 * disk round trip each, 12 ms for a 23-tensor model on a loop-mounted XFS. */
static void prefetch_samples(const tfs_model *m)
{
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		uint64_t n = t->nbytes;
		if (t->deleted || n == 0)
			continue;
		if (n <= 4 * SAMPLE) {
			tfs_source_advise(m, t->src, t->offset, n, MADV_WILLNEED);
			continue;
		}
		tfs_source_advise(m, t->src, t->offset, SAMPLE, MADV_WILLNEED);
		tfs_source_advise(m, t->src, t->offset + n / 2, SAMPLE, MADV_WILLNEED);
		tfs_source_advise(m, t->src, t->offset + n - SAMPLE, SAMPLE, MADV_WILLNEED);
	}
}

int tfs_write_validate(const tfs_model *m, const tfs_model *w, tfs_error *err)
{
	size_t n_kv = 0, n_t = 0, w_kv = 0, w_t = 0;
	prefetch_samples(w);
	for (size_t i = 0; i < m->n_kv; i++) {
		const tfs_kv *a = &m->kv[i];
		if (a->deleted)
			continue;
		n_kv++;
		long j = tfs_model_find_kv(w, a->name);
		if (j < 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: key '%s' is missing", w->path,
					     a->name);
		const tfs_kv *b = &w->kv[j];
		if (a->type != b->type || a->len != b->len || !same_range(a->data, b->data, a->len))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: key '%s' reads back differently",
					     w->path, a->name);
	}
	for (size_t i = 0; i < w->n_kv; i++)
		w_kv += !w->kv[i].deleted;
	if (w_kv != n_kv)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %zu keys read back, %zu expected",
				     w->path, w_kv, n_kv);

	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *a = &m->t[i];
		if (a->deleted)
			continue;
		n_t++;
		long j = tfs_model_find_tensor(w, a->name);
		if (j < 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is missing", w->path,
					     a->name);
		const tfs_tensor *b = &w->t[j];
		int64_t na[TFS_MAX_DIMS], nb[TFS_MAX_DIMS];
		uint32_t da = eff_dims(a, na), db = eff_dims(b, nb);
		if (a->dtype != b->dtype || a->nbytes != b->nbytes || da != db ||
		    memcmp(na, nb, sizeof(na)))
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: tensor '%s' reads back with another type or shape",
					     w->path, a->name);
		const tfs_source *sa = &m->src[a->src], *sb = &w->src[b->src];
		if (a->offset + a->nbytes > sa->size || b->offset + b->nbytes > sb->size)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' lies past the end",
					     w->path, a->name);
		uint64_t n = a->nbytes;
		if (!tfs_source_data(sa)) { /* no mapping of its data: samples read through it */
			int rc = same_remote(sa, a->offset, sb->map + b->offset, n, w->path, a->name, err);
			if (rc)
				return rc;
			continue;
		}
		const uint8_t *pa = sa->map + a->offset, *pb = sb->map + b->offset;
		bool staged = a->offset == 0 && sa->size == n;
		bool ok;
		if (n == 0)
			ok = true;
		else if (staged || n <= 4 * SAMPLE)
			ok = same_range(pa, pb, n);
		else
			ok = same_range(pa, pb, SAMPLE) &&
			     same_range(pa + n / 2, pb + n / 2, SAMPLE) &&
			     same_range(pa + n - SAMPLE, pb + n - SAMPLE, SAMPLE);
		if (!ok)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': bytes differ",
					     w->path, a->name);
	}
	for (size_t i = 0; i < w->n_t; i++)
		w_t += !w->t[i].deleted;
	if (w_t != n_t)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %zu tensors read back, %zu expected",
				     w->path, w_t, n_t);
	return 0;
}
