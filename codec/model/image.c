/*
 * image.c - a model file laid out in memory before any byte of it is written.
 *
 * An image is what a writer would put in a file, described rather than copied:
 *  1. the header bytes [0, head.len), built in memory (GGUF key/tensor infos and the
 *     padding after them; safetensors' length prefix and JSON header);
 *  2. extents: ranges of the file whose bytes are a range of a source (a tensor's bytes,
 *     unchanged or staged), in file order, none overlapping;
 *  3. zeros everywhere else up to size (GGUF's padding between tensors).
 * The writers lay out a file as an image and then write the image (tfs_image_write), and
 * the mount serves the same image as one virtual file (tfs_image_read), so the two give
 * the same bytes by construction.  The format writers build images; write.c's
 * tfs_model_image picks the one for a model.  An image for reading holds its sources
 * (tfs_source_hold: a local file's descriptor duplicated): it stays readable, unchanged,
 * whatever happens to the model afterwards.
 */
#include "image_impl.h"
#include "model_impl.h"

#include <stdlib.h>

int tfs_image_new(tfs_image **out, tfs_error *err)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
}

void tfs_image_free(tfs_image *im)
{
	if (!im)
		return;
	for (size_t i = 0; i < im->n_held; i++)
		tfs_source_free(&im->held[i]);
	free(im->held);
	free(im->ext);
	tfs_buf_free(&im->head);
	free(im);
}

uint64_t tfs_image_size(const tfs_image *im) { return im->size; }

int tfs_image_add(tfs_image *im, uint64_t pos, int32_t src, uint64_t src_off, uint64_t len)
{
	if (len == 0)
		return 0;
	if (im->n_ext == im->cap_ext) {
		size_t cap = im->cap_ext ? im->cap_ext * 2 : 64;
		tfs_extent *p = realloc(im->ext, cap * sizeof(*p));
		if (!p)
			return TFS_E_NOMEM;
		im->ext = p;
		im->cap_ext = cap;
	}
	im->ext[im->n_ext++] = (tfs_extent){ .pos = pos, .len = len, .src = src, .src_off = src_off };
	return 0;
}

int tfs_image_own_fds(tfs_image *im, const tfs_model *m, tfs_error *err)
{
	im->held = calloc(m->n_src ? m->n_src : 1, sizeof(*im->held));
	if (!im->held)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	im->n_held = m->n_src;
	for (size_t i = 0; i < im->n_ext; i++) {
		int32_t s = im->ext[i].src;
		if (im->held[s].ops)
			continue;
		int rc = tfs_source_hold(&im->held[s], &m->src[s], err);
		if (rc)
			return rc;
	}
	return 0;
}

/* The first extent that ends after pos (binary search; extents are in file order). */
static size_t first_after(const tfs_image *im, uint64_t pos)
{
	size_t lo = 0, hi = im->n_ext;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (im->ext[mid].pos + im->ext[mid].len <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int64_t tfs_image_read(const tfs_image *im, uint64_t off, uint64_t len, void *out, tfs_error *err)
{
	uint8_t *o = out;
	if (off >= im->size)
		return 0;
	if (len > im->size - off)
		len = im->size - off;
	uint64_t pos = off, end = off + len;
	if (pos < im->head.len) {
		uint64_t k = im->head.len - pos < end - pos ? im->head.len - pos : end - pos;
		memcpy(o, im->head.data + pos, (size_t)k);
		pos += k;
	}
	for (size_t i = first_after(im, pos); pos < end; i++) {
		const tfs_extent *e = i < im->n_ext ? &im->ext[i] : NULL;
		uint64_t zero_to = e && e->pos < end ? e->pos : end;
		if (pos < zero_to) {
			memset(o + (pos - off), 0, (size_t)(zero_to - pos));
			pos = zero_to;
		}
		if (!e || pos >= end)
			break;
		uint64_t k = e->pos + e->len - pos < end - pos ? e->pos + e->len - pos : end - pos;
		uint64_t from = e->src_off + (pos - e->pos);
		int rc = tfs_source_pread(&im->held[e->src], o + (pos - off), k, from, err);
		if (rc)
			return rc;
		pos += k;
	}
	return (int64_t)len;
}

void tfs_image_piece_at(tfs_image_piece *out, const tfs_image *im, uint64_t off, uint64_t len)
{
	*out = (tfs_image_piece){ 0 };
	if (off >= im->size)
		return;
	if (len > im->size - off)
		len = im->size - off;
	if (off < im->head.len) {
		out->mem = (const uint8_t *)im->head.data + off;
		out->n = im->head.len - off < len ? im->head.len - off : len;
		return;
	}
	size_t i = first_after(im, off);
	const tfs_extent *e = i < im->n_ext ? &im->ext[i] : NULL;
	if (!e || e->pos > off) { /* zeros up to the next extent */
		out->n = e && e->pos - off < len ? e->pos - off : len;
		return;
	}
	out->src = &im->held[e->src];
	out->src_off = e->src_off + (off - e->pos);
	out->lo = e->src_off;
	out->hi = e->src_off + e->len;
	out->n = e->pos + e->len - off < len ? e->pos + e->len - off : len;
}

/* ==== sharing extents with the sources ==== */

/* The source holding most of the image's extent bytes; -1 when none. */
static int32_t main_source(const tfs_image *im, const tfs_model *m)
{
	uint64_t *bytes = calloc(m->n_src ? m->n_src : 1, sizeof(*bytes));
	int32_t best = -1;
	if (!bytes)
		return -1;
	for (size_t i = 0; i < im->n_ext; i++) {
		const tfs_extent *e = &im->ext[i];
		if (e->src < 0 || (size_t)e->src >= m->n_src)
			continue;
		bytes[e->src] += e->len;
		if (best < 0 || bytes[e->src] > bytes[best])
			best = e->src;
	}
	free(bytes);
	return best;
}

typedef struct {
	uint64_t shift, bytes;
} shift_vote;

static int by_shift(const void *a, const void *b)
{
	uint64_t x = ((const shift_vote *)a)->shift, y = ((const shift_vote *)b)->shift;
	return (x > y) - (x < y);
}

/* Each extent of source src votes, with its whole blocks, for the shift that aligns it. */
static uint64_t best_shift(const tfs_image *im, int32_t src, uint32_t blk, uint64_t step)
{
	shift_vote *v = malloc((im->n_ext ? im->n_ext : 1) * sizeof(*v));
	size_t n = 0;
	uint64_t best = 0, best_bytes = 0;
	if (!v)
		return 0;
	for (size_t i = 0; i < im->n_ext; i++) {
		const tfs_extent *e = &im->ext[i];
		uint64_t s = (e->src_off - e->pos) % blk;
		if (e->src == src && e->len >= 2 * (uint64_t)blk && s % step == 0)
			v[n++] = (shift_vote){ s, e->len / blk * blk };
	}
	qsort(v, n, sizeof(*v), by_shift);
	for (size_t i = 0; i < n;) {
		uint64_t sum = 0, s = v[i].shift;
		for (; i < n && v[i].shift == s; i++)
			sum += v[i].bytes;
		if (sum > best_bytes)
			best = s, best_bytes = sum;
	}
	free(v);
	return best;
}

uint32_t tfs_image_clone_plan(const tfs_image *im, const tfs_model *m, int fd, uint64_t step,
			      uint64_t *shift)
{
	*shift = 0;
	int32_t src = main_source(im, m);
	uint32_t blk = src >= 0 ? tfs_source_clone_block(fd, &m->src[src]) : 0;
	if (blk && step && step <= blk && blk % step == 0)
		*shift = best_shift(im, src, blk, step);
	return blk;
}

int tfs_image_write(const tfs_image *im, const tfs_model *m, int fd, const char *path,
		    const tfs_write_opts *o, tfs_error *err)
{
	uint64_t done = 0, pos;
	tfs_io_progress progress = { o ? o->progress : NULL, o ? o->progress_ctx : NULL, &done, 0 };
	int rc;
	for (size_t i = 0; i < im->n_ext; i++)
		progress.total += im->ext[i].len;
	/* no reservation when extents are shared: the blocks would be allocated for nothing, and
	 * a disk without room for a full copy could not take a file that needs none */
	if ((!im->clone_blk && (rc = tfs_io_reserve(fd, path, im->size, err))) ||
	    (rc = tfs_io_pwrite(fd, path, 0, im->head.data, im->head.len, err)))
		return rc;
	pos = im->head.len;
	for (size_t i = 0; i <= im->n_ext; i++) {
		uint64_t next = i < im->n_ext ? im->ext[i].pos : im->size;
		if ((rc = tfs_io_zeros(fd, path, pos, next - pos, err)))
			return rc;
		if (i == im->n_ext)
			break;
		const tfs_extent *e = &im->ext[i];
		if ((rc = tfs_model_copy(fd, path, e->pos, m, e->src, e->src_off, e->len,
					 im->clone_blk, &progress, err)))
			return rc;
		pos = e->pos + e->len;
	}
	return 0;
}
