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
#include "format.h"
#include "commit.h"
#include "value.h"
#include "dtype.h"

#include <stdlib.h>
#include <sys/stat.h>



static int put(tfs_buf *b, const void *p, uint64_t n)
{
	return tfs_buf_append(b, p, (size_t)n);
}

static int put_u32(tfs_buf *b, uint32_t v) { return put(b, &v, 4); }
static int put_u64(tfs_buf *b, uint64_t v) { return put(b, &v, 8); }

static int put_str(tfs_buf *b, const char *s)
{
	size_t n = strlen(s);
	return put_u64(b, n) || put(b, s, n) ? TFS_E_NOMEM : 0;
}

/* tensorfs' padding key with no bytes: name, type, element type, count */
#define PAD_KEY_SIZE (8 + sizeof(TFS_GGUF_PADDING_KEY) - 1 + 4 + 4 + 8)
#define NO_PAD UINT64_MAX

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

/* The header's size (head) and the data section's (data, padded), checking every tensor
 * can be stored and lies in its source; n_kv / n_t live keys and tensors. */
static int gguf_sizes(const tfs_model *m, uint64_t a, uint64_t *head, uint64_t *data,
		      uint64_t *n_kv, uint64_t *n_t, tfs_error *err)
{
	*head = 24, *data = 0, *n_kv = 0, *n_t = 0;
	for (size_t i = 0; i < m->n_kv; i++) {
		const tfs_kv *kv = &m->kv[i];
		if (kv->deleted)
			continue;
		(*n_kv)++;
		if (tfs_add_overflow(*head, 12 + strlen(kv->name) + kv->len, head))
			goto too_big;
	}
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted)
			continue;
		(*n_t)++;
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
		if (tfs_add_overflow(*head, 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 12,
				     head) ||
		    t->nbytes > UINT64_MAX - a || tfs_add_overflow(*data, pad_to(t->nbytes, a), data))
			goto too_big;
	}
	return 0;
too_big:
	return tfs_error_set(err, TFS_E_INVALID, "%s: the new file would be too large", m->path);
}

/* Where the data section of a header of head bytes starts (aligned to a) and the file's
 * size with data bytes of tensors after it. */
static int gguf_total(const tfs_model *m, uint64_t a, uint64_t head, uint64_t data,
		      uint64_t *data_off, uint64_t *total, tfs_error *err)
{
	if (head > UINT64_MAX - a)
		goto too_big;
	*data_off = pad_to(head, a);
	if (tfs_add_overflow(*data_off, data, total) || *data_off > SIZE_MAX / 2)
		goto too_big;
	return 0;
too_big:
	return tfs_error_set(err, TFS_E_INVALID, "%s: the new file would be too large", m->path);
}

/* The header bytes into b (reserved): keys, then tensor infos, each tensor's extent added
 * to im at data_off + its offset. */
static int gguf_header(tfs_image *im, const tfs_model *m, uint64_t a, uint64_t data_off,
		       uint64_t n_kv, uint64_t n_t, uint64_t pad)
{
	tfs_buf *b = &im->head;
	if (put(b, "GGUF", 4) || put_u32(b, 3) || put_u64(b, n_t) ||
	    put_u64(b, n_kv + (pad != NO_PAD)))
		return TFS_E_NOMEM;
	for (size_t i = 0; i < m->n_kv; i++) {
		const tfs_kv *kv = &m->kv[i];
		if (!kv->deleted &&
		    (put_str(b, kv->name) || put_u32(b, kv->type) || put(b, kv->data, kv->len)))
			return TFS_E_NOMEM;
	}
	if (pad != NO_PAD) {
		if (put_str(b, TFS_GGUF_PADDING_KEY) || put_u32(b, TFS_GGUF_ARRAY) ||
		    put_u32(b, TFS_GGUF_UINT8) || put_u64(b, pad) || tfs_buf_reserve(b, pad))
			return TFS_E_NOMEM;
		memset(b->data + b->len, 0, (size_t)pad);
		b->len += (size_t)pad;
	}
	uint64_t off = 0;
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted)
			continue;
		if (put_str(b, t->name) || put_u32(b, t->n_dims))
			return TFS_E_NOMEM;
		for (uint32_t k = 0; k < t->n_dims; k++)
			if (put_u64(b, (uint64_t)t->ne[k]))
				return TFS_E_NOMEM;
		if (put_u32(b, (uint32_t)t->dtype) || put_u64(b, off) ||
		    tfs_image_add(im, data_off + off, t->src, t->offset, t->nbytes))
			return TFS_E_NOMEM;
		off += pad_to(t->nbytes, a);
	}
	return 0;
}

/*
 * The image of m's GGUF file.  With data_off 0 the data section starts where the header
 * ends (aligned); else exactly at data_off (a multiple of the alignment, with room for the
 * padding key), the header padded up to it with TFS_GGUF_PADDING_KEY: GGUF
 * readers (ggml, gguf-py) take the data section to start at the first aligned offset after
 * the header, so a gap is only possible inside the header.  *head0 gets the header's size
 * without the padding key.
 */
static int gguf_image(tfs_image **out, const tfs_model *m, uint64_t a, uint64_t data_off,
		      uint64_t *head0, tfs_error *err)
{
	uint64_t n_kv, n_t, head, data, total = 0, pad = NO_PAD;
	tfs_image *im;
	int rc;
	*out = NULL;
	if ((rc = gguf_sizes(m, a, &head, &data, &n_kv, &n_t, err)))
		return rc;
	*head0 = head;
	if (data_off) {
		if (data_off < head || data_off - head < PAD_KEY_SIZE || data_off % a)
			return tfs_error_set(err, TFS_E_INVALID, "%s: no room for padding at %llu "
					     "(internal error)", m->path,
					     (unsigned long long)data_off);
		pad = data_off - head - PAD_KEY_SIZE;
		head = data_off;
	}
	if ((rc = gguf_total(m, a, head, data, &data_off, &total, err)))
		return rc;
	if ((rc = tfs_image_new(&im, err)))
		return rc;
	if (tfs_buf_reserve(&im->head, (size_t)data_off) ||
	    gguf_header(im, m, a, data_off, n_kv, n_t, pad)) {
		tfs_image_free(im);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory laying out %s", m->path);
	}
	tfs_buf *b = &im->head;
	if (b->len != head) {
		tfs_image_free(im);
		return tfs_error_set(err, TFS_E_INVALID, "%s: header size mismatch (internal error)",
				     m->path);
	}
	memset(b->data + b->len, 0, (size_t)(data_off - head)); /* reserved above */
	b->len = (size_t)data_off;
	b->data[b->len] = '\0';
	im->size = total;
	*out = im;
	return 0;
}

int tfs_gguf_image(tfs_image **out, const tfs_model *m, tfs_error *err)
{
	uint64_t a, head0;
	int rc = write_alignment(m, &a, err);
	return rc ? rc : gguf_image(out, m, a, 0, &head0, err);
}

int tfs_gguf_image_size(const tfs_model *m, uint64_t *size, tfs_error *err)
{
	uint64_t a, head, data, n_kv, n_t, data_off;
	int rc = write_alignment(m, &a, err);
	if (!rc)
		rc = gguf_sizes(m, a, &head, &data, &n_kv, &n_t, err);
	return rc ? rc : gguf_total(m, a, head, data, &data_off, size, err);
}

/*
 * The image to write to fd.  Where fd's file system can share extents with the source
 * (XFS with reflink, btrfs), the data section is moved so that most unchanged tensors keep
 * their offset modulo the block size, and tfs_image_write clones their blocks instead of
 * copying them: a metadata edit then writes the header and a few partial blocks.
 */
static int gguf_write_image(tfs_image **out, const tfs_model *m, int fd, tfs_error *err)
{
	uint64_t a, head0, shift;
	int rc = write_alignment(m, &a, err);
	if (rc || (rc = gguf_image(out, m, a, 0, &head0, err)))
		return rc;
	uint32_t blk = tfs_image_clone_plan(*out, m, fd, a, &shift);
	if (blk && shift) {
		uint64_t want = (*out)->head.len + shift, least = pad_to(head0 + PAD_KEY_SIZE, a);
		while (want < least)
			want += blk;
		tfs_image_free(*out);
		if ((rc = gguf_image(out, m, a, want, &head0, err)))
			return rc;
	}
	(*out)->clone_blk = blk;
	return 0;
}

int tfs_gguf_write(const tfs_model *m, int fd, const char *path, const tfs_write_opts *o,
		   tfs_error *err)
{
	tfs_image *im;
	int rc = gguf_write_image(&im, m, fd, err);
	if (rc)
		return rc;
	rc = tfs_image_write(im, m, fd, path, o, err);
	tfs_image_free(im);
	return rc;
}

/* The writer of the format (tfs_format_ops.write): the new file a temporary of c, written,
 * fsynced and read back. */
static int write_commit(tfs_model *m, const tfs_write_opts *o, tfs_commit *c,
			tfs_error *err)
{
	char *final = tfs_output_path(m, o);
	const char *tmp;
	int fd, rc;
	if (!final)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	rc = tfs_commit_add(c, final, &fd, &tmp, err);
	free(final);
	if (rc)
		return rc;
	if ((rc = tfs_gguf_write(m, fd, tmp, o, err)) || (rc = tfs_commit_seal(c, err)))
		return rc;
	tfs_error e2 = { 0 };
	if ((rc = tfs_gguf_validate(m, tmp, &e2)))
		return tfs_error_set(err, rc,
				     "the new file does not read back as written (%s); "
				     "nothing was replaced", e2.msg);
	return 0;
}

/* ==== reading back ==== */

/* Reads back a GGUF file just written and checks it against m and the layout rules
 * (GGUF_CHECKLIST.md: version 3, contiguous aligned offsets, padded data section). */
int tfs_gguf_validate(const tfs_model *m, const char *tmp, tfs_error *err)
{
	tfs_model *w = NULL;
	int32_t si;
	int rc = tfs_model_new(&w, &tfs_gguf_format, tmp, err);
	if (rc)
		return rc;
	if ((rc = tfs_model_add_source(w, tmp, NULL, &si, err)) ||
	    (rc = tfs_gguf_read(w, si, err)))
		goto out;
	uint64_t a = w->alignment, expect = 0;
	if (w->gguf_version != 3 || w->data_offset % a) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: bad version or data section alignment",
				   tmp);
		goto out;
	}
	for (size_t i = 0; i < w->n_t; i++) {
		const tfs_tensor *t = &w->t[i];
		if (t->offset != w->data_offset + expect) {
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s' is not where expected",
					   tmp, t->name);
			goto out;
		}
		expect += (t->nbytes + a - 1) / a * a;
	}
	if (w->n_t && w->src[si].size != w->data_offset + expect) {
		rc = tfs_error_set(err, TFS_E_FORMAT, "%s: file size %llu, expected %llu", tmp,
				   (unsigned long long)w->src[si].size,
				   (unsigned long long)(w->data_offset + expect));
		goto out;
	}
	rc = tfs_write_validate(m, w, err);
out:
	tfs_model_free(w);
	return rc;
}

/* ==== the format ==== */

static const char *gguf_image_name(const tfs_model *m)
{
	(void)m;
	return "model.gguf";
}

static bool gguf_encoded(const tfs_model *m)
{
	(void)m;
	return true;
}

/* The table sits with the writer: it names the reader's operations (gguf.c) and the
 * writer's, and the writer reads its file back through it. */
const tfs_format_ops tfs_gguf_format = {
	.name = "gguf",
	.id = TFS_FMT_GGUF,
	.probe = tfs_gguf_probe,
	.open = tfs_gguf_open_probed,
	.image_name = gguf_image_name,
	.image = tfs_gguf_image,
	.image_size = tfs_gguf_image_size,
	.write = write_commit,
	.gguf_encoded = gguf_encoded,
	.check_kv = tfs_gguf_check_kv,
	.bytes_dtype = TFS_DT_I8,
	.header_facts = true,
	.remote_writable = true,
};
