/*
 * concat.c - a source that is other sources' byte ranges one after another (concat.h).
 */
#include "concat.h"
#include "sorted.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	pthread_mutex_t mu;
	unsigned refs;
	tfs_concat_piece *p;
	uint64_t *start;        /* start[k]: where piece k begins; start[n]: the pieces' sum */
	size_t n;
	uint64_t size;
	const tfs_concat_ops *ops;
	void *owner;
	const void *arg;
} concat;

static void concat_unref(concat *c)
{
	pthread_mutex_lock(&c->mu);
	bool last = --c->refs == 0;
	pthread_mutex_unlock(&c->mu);
	if (!last)
		return;
	if (c->ops->unref)
		c->ops->unref(c->owner);
	pthread_mutex_destroy(&c->mu);
	free(c->p);
	free(c->start);
	free(c);
}

/* The piece holding byte off (< start[n]): the last k with start[k] <= off. */
static size_t piece_at(const concat *c, uint64_t off)
{
	return tfs_last_at_most(c->start, c->n, off);
}

static int64_t concat_read(void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	concat *c = ctx;
	if (off >= c->size)
		return 0;
	if (len > c->size - off)
		len = c->size - off;
	if (c->ops->read)
		return c->ops->read(c->owner, c->arg, buf, len, off, err);
	uint64_t done = 0;
	for (size_t k = piece_at(c, off); done < len && k < c->n; k++) {
		const tfs_concat_piece *p = &c->p[k];
		uint64_t in = off + done - c->start[k];
		uint64_t n = p->len - in < len - done ? p->len - in : len - done;
		if (!n)
			continue;
		int64_t got = tfs_source_read(p->src, (uint8_t *)buf + done, n, p->off + in, p->off,
					      p->off + p->len, err);
		if (got < 0)
			return got;
		if ((uint64_t)got < n) /* a short read would be the end of the file to a reader */
			return tfs_error_sys(err, EIO, "%s: ends at offset %llu, within the %llu "
					     "bytes at [%llu, +%llu) it holds for piece %zu",
					     tfs_source_path(p->src),
					     (unsigned long long)(p->off + in + (uint64_t)got),
					     (unsigned long long)p->len, (unsigned long long)p->off,
					     (unsigned long long)p->len, k);
		done += n;
	}
	return (int64_t)done;
}

/* The piece's own file at byte off's place: a prefix of the range, at most the rest of the
 * piece (the reader asks again for the next). */
static int concat_splice_fd(void *ctx, uint64_t off, uint64_t len, tfs_source_fd *out,
			    tfs_error *err)
{
	concat *c = ctx;
	if ((c->ops->read && !c->ops->splice) || off >= c->size)
		return TFS_PASSTHROUGH;
	size_t k = piece_at(c, off);
	while (k < c->n && c->p[k].len == 0)
		k++;
	if (k >= c->n)
		return TFS_PASSTHROUGH;
	const tfs_concat_piece *p = &c->p[k];
	uint64_t in = off - c->start[k];
	uint64_t n = p->len - in < len ? p->len - in : len;
	return tfs_source_splice_fd(out, p->src, p->off + in, n, p->off, p->off + p->len, err);
}

static void *concat_hold(void *ctx)
{
	concat *c = ctx;
	pthread_mutex_lock(&c->mu);
	c->refs++;
	pthread_mutex_unlock(&c->mu);
	return c;
}

static void concat_release(void *ctx) { concat_unref(ctx); }

static const tfs_computed_ops concat_ops = {
	.read = concat_read, .splice_fd = concat_splice_fd, .hold = concat_hold,
	.release = concat_release,
};

int tfs_model_add_concat_source(tfs_model *m, const char *label, const tfs_concat_piece *pieces,
				size_t n, uint64_t size, const tfs_concat_ops *ops, void *owner,
				const void *arg, int32_t *idx, tfs_error *err)
{
	concat *c = calloc(1, sizeof(*c));
	int rc = 0;
	if (!c || !(c->p = malloc((n ? n : 1) * sizeof(*c->p))) ||
	    !(c->start = malloc((n + 1) * sizeof(*c->start)))) {
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", label);
		goto fail;
	}
	uint64_t sum = 0;
	for (size_t k = 0; k < n; k++) {
		const tfs_concat_piece *p = &pieces[k];
		uint64_t have = tfs_source_size(p->src);
		if (p->off > have || p->len > have - p->off) {
			rc = tfs_error_set(err, TFS_E_INVALID, "%s: piece %zu [%llu, +%llu) is "
					   "outside %s (%llu bytes)", label, k,
					   (unsigned long long)p->off, (unsigned long long)p->len,
					   tfs_source_label(p->src), (unsigned long long)have);
			goto fail;
		}
		c->p[k] = *p;
		c->start[k] = sum;
		sum += p->len;
	}
	c->start[n] = sum;
	if (!ops->read && size != sum) {
		rc = tfs_error_set(err, TFS_E_INVALID, "%s: %llu bytes, its pieces hold %llu",
				   label, (unsigned long long)size, (unsigned long long)sum);
		goto fail;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->refs = 1;
	c->n = n;
	c->size = size;
	c->ops = ops;
	c->owner = owner;
	c->arg = arg;
	/* tfs_model_add_computed_source releases c (and so the owner) when it fails */
	return tfs_model_add_computed_source(m, label, &concat_ops, c, size, idx, err);
fail:
	if (c) {
		free(c->p);
		free(c->start);
		free(c);
	}
	if (ops->unref)
		ops->unref(owner);
	return rc;
}

const tfs_concat_piece *tfs_concat_pieces(const tfs_source *s, size_t *n)
{
	if (!s || s->computed != &concat_ops || !s->ctx) {
		*n = 0;
		return NULL;
	}
	const concat *c = s->ctx;
	*n = c->n;
	return c->p;
}

size_t tfs_source_n_pieces(const tfs_source *s)
{
	size_t n;
	tfs_concat_pieces(s, &n);
	return n;
}

bool tfs_source_piece(const tfs_source *s, size_t k, const char **label, uint64_t *off,
		      uint64_t *len)
{
	size_t n;
	const tfs_concat_piece *p = tfs_concat_pieces(s, &n);
	if (k >= n)
		return false;
	*label = tfs_source_label(p[k].src);
	*off = p[k].off;
	*len = p[k].len;
	return true;
}
