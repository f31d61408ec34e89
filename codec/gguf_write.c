/*
 * gguf_write.c - GGUF v3 writer (ggml's layout, GGUF_CHECKLIST.md "Write path").
 *
 * On-disk layout written (all little-endian):
 *  1. magic "GGUF", u32 version 3, i64 n_tensors, i64 n_kv (live slots only)
 *  2. the keys in slot order: u64 length + name, u32 type, payload copied verbatim
 *     (it is already in GGUF encoding, whatever the source)
 *  3. the tensor infos in slot order: u64 length + name, u32 n_dims, i64 ne[n_dims],
 *     u32 type, u64 offset; n_dims as the tensor has it: a tensor read from a GGUF keeps
 *     the n_dims it was stored with (ggml's writer drops trailing dims of 1, gguf-py keeps
 *     len(shape): both are valid, and an untouched tensor must come back as it was);
 *     offsets are the running sum of PAD(nbytes, alignment)
 *  4. zero padding to the alignment (always, even with no tensors)
 *  5. each tensor's bytes followed by zero padding to the alignment, the last included
 *
 * The alignment is general.alignment when that key is live (a u32 power of two, else the
 * write fails), 32 otherwise: the value every reader will use.  Tensor bytes are copied
 * by the kernel (copy_file_range); memory use does not depend on the model's size.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <stdlib.h>
#include <sys/stat.h>



#define GGUF_BUF (1u << 20)

/* Header bytes are gathered in a fixed buffer and written out when it fills. */
typedef struct {
	int fd;
	const char *path;
	uint64_t pos;   /* file offset of buf[0] */
	uint8_t *buf;
	size_t len;
	tfs_error *err;
} bwriter;

static int bw_flush(bwriter *w)
{
	int rc = tfs_io_pwrite(w->fd, w->path, w->pos, w->buf, w->len, w->err);
	if (rc)
		return rc;
	w->pos += w->len;
	w->len = 0;
	return 0;
}

static int bw_put(bwriter *w, const void *p, uint64_t n)
{
	if (w->len + n > GGUF_BUF) {
		int rc = bw_flush(w);
		if (rc)
			return rc;
	}
	if (n >= GGUF_BUF) {
		/* a big payload (a vocabulary array) goes straight from its mapping */
		int rc = tfs_io_pwrite(w->fd, w->path, w->pos, p, (size_t)n, w->err);
		if (!rc)
			w->pos += n;
		return rc;
	}
	memcpy(w->buf + w->len, p, (size_t)n);
	w->len += (size_t)n;
	return 0;
}

static int bw_u32(bwriter *w, uint32_t v) { return bw_put(w, &v, 4); }
static int bw_u64(bwriter *w, uint64_t v) { return bw_put(w, &v, 8); }

static int bw_str(bwriter *w, const char *s)
{
	size_t n = strlen(s);
	int rc = bw_u64(w, n);
	return rc ? rc : bw_put(w, s, n);
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* The alignment the written file will declare (and so must use). */
static int write_alignment(const tfs_model *m, uint64_t *a, tfs_error *err)
{
	long i = tfs_model_find_kv(m, "general.alignment");
	*a = 32;
	if (i < 0)
		return 0;
	const tfs_kv *kv = &m->kv[i];
	uint32_t v = kv->type == TFS_GGUF_UINT32 && kv->len == 4 ? tfs_le32(kv->data) : 0;
	if (v == 0 || (v & (v - 1)))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: general.alignment must be a uint32 power of two", m->path);
	*a = v;
	return 0;
}

int tfs_gguf_write(const tfs_model *m, int fd, const char *path, const tfs_write_opts *o,
		   tfs_error *err)
{
	uint64_t a, n_kv = 0, n_t = 0, head = 24, data = 0;
	int rc;
	if ((rc = write_alignment(m, &a, err)))
		return rc;

	/* sizes first: the whole file is reserved before anything is copied */
	for (size_t i = 0; i < m->n_kv; i++) {
		const tfs_kv *kv = &m->kv[i];
		if (kv->deleted)
			continue;
		n_kv++;
		if (tfs_add_overflow(head, 12 + strlen(kv->name) + kv->len, &head))
			goto too_big;
	}
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted)
			continue;
		n_t++;
		const tfs_dtype_info *d = t->dtype < TFS_DT_GGML_COUNT ? tfs_dtype(t->dtype) : NULL;
		if (!d || !d->block_elems)
			return tfs_error_set(err, TFS_E_INVALID,
					     "%s: tensor '%s' has a dtype GGUF cannot store",
					     m->path, t->name);
		if (t->src < 0 || (size_t)t->src >= m->n_src ||
		    t->offset + t->nbytes > m->src[t->src].size || t->offset + t->nbytes < t->offset)
			return tfs_error_set(err, TFS_E_FORMAT,
					     "%s: tensor '%s' lies outside its source file",
					     m->path, t->name);
		if (tfs_add_overflow(head, 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 12,
				     &head) ||
		    t->nbytes > UINT64_MAX - a || tfs_add_overflow(data, pad_to(t->nbytes, a), &data))
			goto too_big;
	}
	uint64_t data_off = pad_to(head, a), total;
	if (head > UINT64_MAX - a || tfs_add_overflow(data_off, data, &total))
		goto too_big;
	if ((rc = tfs_io_reserve(fd, path, total, err)))
		return rc;

	bwriter w = { .fd = fd, .path = path, .err = err, .buf = malloc(GGUF_BUF) };
	if (!w.buf)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if ((rc = bw_put(&w, "GGUF", 4)) || (rc = bw_u32(&w, 3)) || (rc = bw_u64(&w, n_t)) ||
	    (rc = bw_u64(&w, n_kv)))
		goto out;
	for (size_t i = 0; i < m->n_kv; i++) {
		const tfs_kv *kv = &m->kv[i];
		if (kv->deleted)
			continue;
		if ((rc = bw_str(&w, kv->name)) || (rc = bw_u32(&w, kv->type)) ||
		    (rc = bw_put(&w, kv->data, kv->len)))
			goto out;
	}
	uint64_t off = 0;
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted)
			continue;
		if ((rc = bw_str(&w, t->name)) || (rc = bw_u32(&w, t->n_dims)))
			goto out;
		for (uint32_t k = 0; k < t->n_dims; k++)
			if ((rc = bw_u64(&w, (uint64_t)t->ne[k])))
				goto out;
		if ((rc = bw_u32(&w, (uint32_t)t->dtype)) || (rc = bw_u64(&w, off)))
			goto out;
		off += pad_to(t->nbytes, a);
	}
	if ((rc = bw_flush(&w)))
		goto out;
	if (w.pos != head) {
		rc = tfs_error_set(err, TFS_E_INVALID, "%s: header size mismatch (internal error)",
				   path);
		goto out;
	}
	if ((rc = tfs_io_zeros(fd, path, head, data_off - head, err)))
		goto out;

	uint64_t pos = data_off, done = 0;
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted)
			continue;
		if ((rc = tfs_io_copy(fd, path, pos, m, t->src, t->offset, t->nbytes, o, &done, data,
				      err)))
			goto out;
		pos += t->nbytes;
		uint64_t pad = pad_to(t->nbytes, a) - t->nbytes;
		if ((rc = tfs_io_zeros(fd, path, pos, pad, err)))
			goto out;
		pos += pad;
	}
	rc = 0;
out:
	free(w.buf);
	return rc;
too_big:
	return tfs_error_set(err, TFS_E_INVALID, "%s: the new file would be too large", m->path);
}
