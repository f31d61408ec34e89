/*
 * reply.c - replying with a source's bytes (tensors/, layers/): a thin layer over codec's
 * source API (model/source.h).  It asks the source what it can give (bytes in memory, a
 * mapping, a descriptor to splice from, or a read) and never looks inside it.
 */
#include "fs.h"
#include "reply.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * How raw bytes (tensors/, layers/) are replied; $TFS_READ_MODE picks one way, for
 * measuring (scripts/bench/read-model.sh):
 *   auto    (default) splice when the request fits the pipe, else pread;
 *   splice  fuse_reply_data from the source fd (FUSE_BUF_IS_FD): the source's page-cache
 *           pages go into a pipe by reference and from it into the FUSE page cache, one
 *           copy; libfuse splices only when its pipe holds the whole reply, otherwise it
 *           mmaps a buffer per request, preads and writes (6x slower);
 *   pread   pread into a per-thread scratch buffer, fuse_reply_buf: two copies, and the
 *           kernel pins the buffer one page at a time (get_user_pages) to copy from it;
 *   mmap    fuse_reply_buf straight from the source's mapping (populated first), then
 *           MADV_DONTNEED so the daemon's RSS stays flat.
 * The daemon may not grow a pipe past /proc/sys/fs/pipe-max-size (1 MiB by default; no
 * CAP_SYS_RESOURCE in containers), so 1 MiB requests cannot be spliced and the default
 * request size is 512 KiB (-o readahead_kb).  Measured, first read of all 291 tensors of
 * a 1.2 GiB model through a fresh mount, source hot, best of 6 rounds on a busy 2-core
 * machine (GB/s): pread + 1 MiB requests 2.40, mmap + 1 MiB 2.62, splice + 256 KiB 2.88,
 * splice + 512 KiB 3.16.
 * Bytes in memory (a manifest fetched whole) are replied from memory in every mode; a
 * remote file has no mapping (mmap mode reads it) and is spliced out of its block cache.
 */
typedef enum { READ_AUTO, READ_SPLICE, READ_PREAD, READ_MMAP } read_mode;
static read_mode raw_read_mode = READ_AUTO;
static size_t splice_max; /* the largest reply a pipe can hold */
static pthread_once_t read_mode_once = PTHREAD_ONCE_INIT;

static void read_mode_init(void)
{
	const char *e = getenv("TFS_READ_MODE");
	if (e && strcmp(e, "splice") == 0)
		raw_read_mode = READ_SPLICE;
	else if (e && strcmp(e, "mmap") == 0)
		raw_read_mode = READ_MMAP;
	else if (e && strcmp(e, "pread") == 0)
		raw_read_mode = READ_PREAD;
	unsigned long max = 1u << 20;
	FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");
	if (f) {
		if (fscanf(f, "%lu", &max) != 1)
			max = 1u << 20;
		fclose(f);
	}
	/* room for the reply's header; F_SETPIPE_SZ rounds up to a power of two pages */
	splice_max = max > 8192 ? (size_t)max - 4096 : 0;
}

/* ==== a pipe per thread, for bytes the daemon moves itself ==== */

typedef struct {
	int fd[2];
	size_t cap;
} reply_pipe;

static pthread_key_t pipe_key;
static pthread_once_t pipe_once = PTHREAD_ONCE_INIT;

static void pipe_drop(void *p)
{
	reply_pipe *t = p;
	if (t) {
		close(t->fd[0]);
		close(t->fd[1]);
		free(t);
	}
}

static void pipe_key_init(void) { pthread_key_create(&pipe_key, pipe_drop); }

/* This thread's pipe, holding at least `need` bytes of pages, or NULL. */
static reply_pipe *thread_pipe(size_t need)
{
	pthread_once(&pipe_once, pipe_key_init);
	reply_pipe *t = pthread_getspecific(pipe_key);
	if (!t) {
		if (!(t = calloc(1, sizeof(*t))))
			return NULL;
		if (pipe2(t->fd, O_CLOEXEC | O_NONBLOCK) < 0) {
			free(t);
			return NULL;
		}
		pthread_setspecific(pipe_key, t);
	}
	if (t->cap < need) {
		int got = fcntl(t->fd[0], F_SETPIPE_SZ, (int)need);
		if (got < 0)
			return NULL;
		t->cap = (size_t)got;
	}
	return t;
}

/* A pipe that may still hold bytes is closed (the next request makes another). */
static void pipe_discard(reply_pipe *t)
{
	pthread_setspecific(pipe_key, NULL);
	pipe_drop(t);
}

/* ==== the ways of replying ==== */

/*
 * Bytes spliced out of a pinned descriptor (a remote file's block cache: no mount may
 * punch the range's blocks while this thread holds the pin, as a punch zeroes the pages of
 * a large folio in place, pages the pipe still holds): into a pipe of this thread, then
 * from the pipe into the reply, so the daemon copies no byte.  The pin is given back.
 * False when the reply is still to be made (no pipe could be had, or it could not be
 * filled): the caller reads the bytes instead.
 */
static bool reply_pinned(fuse_req_t req, tfs_source_fd *f, uint64_t pos, size_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = ((size_t)(pos % pg) + size + pg - 1) / pg;
	reply_pipe *t = size <= splice_max ? thread_pipe(pages * pg) : NULL;
	size_t got = 0;
	while (t && got < size) {
		loff_t p = (loff_t)(pos + got);
		ssize_t n = splice(f->fd, &p, t->fd[1], NULL, size - got,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (t && got == size) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
		bv.buf[0].flags = FUSE_BUF_IS_FD;
		bv.buf[0].fd = t->fd[0];
		/* a reply that was sent took every byte out of the pipe */
		if (fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE) != 0)
			pipe_discard(t);
		tfs_source_fd_done(f); /* the pin, once the bytes are in the reply */
		return true;
	}
	tfs_source_fd_done(f);
	if (t)
		pipe_discard(t);
	return false;
}

/* ==== a reply of several pieces: the header, zeros, ranges of files ==== */

/*
 * A model file image (model.gguf of a view) is the header in memory, then tensors whose
 * bytes are ranges of files (a shard's tensor, a permuted tensor's rows one by one: a
 * computed source gives the file holding each run), with zeros between.  Its reply is one
 * fuse_buf per piece.  libfuse splices a bufvec itself when its pipe can hold it (its
 * estimate counts a page per piece): a few pieces go to it as they are; more (the rows of
 * a permuted tensor), or pinned ones, are spliced into this thread's pipe first, and the
 * pipe is the reply (reply_pinned's way).  Anything that cannot be spliced (a converted
 * tensor's bytes are computed on each read): the whole request is read instead.
 */
typedef struct {
	struct fuse_bufvec *bv;
	size_t cap;
	tfs_source_fd *pins;     /* pinned and owned descriptors, given back once the reply is
				  * made */
	size_t n_pins, cap_pins;
	bool pinned;             /* a pinned one among them: the reply goes through the pipe */
	bool owned;              /* an owned one: its pages are copied, not moved (below) */
	size_t pages;            /* pipe pages the pieces take */
} pieces;

#define FEW_PIECES 8

static int piece_add(pieces *p, struct fuse_buf b)
{
	size_t n = p->bv ? p->bv->count : 0;
	if (n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 32;
		struct fuse_bufvec *bv = realloc(p->bv, sizeof(*bv) + cap * sizeof(bv->buf[0]));
		if (!bv)
			return -ENOMEM;
		if (!p->bv)
			*bv = (struct fuse_bufvec){ .count = 0 };
		p->bv = bv;
		p->cap = cap;
	}
	p->bv->buf[n] = b;
	p->bv->count = n + 1;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t at = b.flags & FUSE_BUF_IS_FD ? (size_t)b.pos % pg : pg - 1;
	p->pages += (at + b.size + pg - 1) / pg;
	return 0;
}

static void pieces_free(pieces *p)
{
	for (size_t i = 0; i < p->n_pins; i++)
		tfs_source_fd_done(&p->pins[i]);
	free(p->pins);
	free(p->bv);
}

static const char zero_page[4096];

/* n bytes at mem, or n zeros (mem NULL); 0 or TFS_E_NOMEM. */
static int piece_mem(pieces *p, const void *mem, uint64_t n, tfs_error *err)
{
	if (mem && piece_add(p, (struct fuse_buf){ .size = (size_t)n,
						    .mem = (void *)(uintptr_t)mem }))
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	for (uint64_t k = 0; !mem && k < n; k += sizeof(zero_page)) {
		size_t m = n - k < sizeof(zero_page) ? (size_t)(n - k) : sizeof(zero_page);
		if (piece_add(p, (struct fuse_buf){ .size = m,
						     .mem = (void *)(uintptr_t)zero_page }))
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	return 0;
}

/* [off, off+n) of source s (of an item at [lo, hi)): the files holding it, piece by piece.
 * TFS_PASSTHROUGH when some of it has no file. */
static int piece_source(pieces *p, const tfs_source *s, uint64_t off, uint64_t n, uint64_t lo,
			uint64_t hi, tfs_error *err)
{
	for (uint64_t k = 0; k < n;) {
		tfs_source_fd f;
		int rc = tfs_source_splice_fd(&f, s, off + k, n - k, lo, hi, err);
		if (rc)
			return rc;
		if (f.pinned || f.owned) {
			if (p->n_pins == p->cap_pins) {
				size_t cap = p->cap_pins ? 2 * p->cap_pins : 16;
				tfs_source_fd *np = realloc(p->pins, cap * sizeof(*np));
				if (!np) {
					tfs_source_fd_done(&f);
					return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
				}
				p->pins = np;
				p->cap_pins = cap;
			}
			p->pins[p->n_pins++] = f;
			p->pinned |= f.pinned;
			p->owned |= f.owned;
		}
		if (piece_add(p, (struct fuse_buf){ .size = (size_t)f.len, .fd = f.fd,
						     .pos = (off_t)f.at,
						     .flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK }))
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		k += f.len;
	}
	return 0;
}

/* The pieces into this thread's pipe, then the pipe as the reply.  False when they could
 * not all go in: nothing was replied. */
static bool reply_through_pipe(fuse_req_t req, pieces *p, size_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	reply_pipe *t = p->pages * pg <= splice_max ? thread_pipe(p->pages * pg) : NULL;
	bool ok = t != NULL;
	for (size_t i = 0; ok && i < p->bv->count; i++) {
		const struct fuse_buf *b = &p->bv->buf[i];
		size_t got = 0;
		while (ok && got < b->size) {
			loff_t at = (loff_t)b->pos + (loff_t)got;
			ssize_t n = b->flags & FUSE_BUF_IS_FD
				    ? splice(b->fd, &at, t->fd[1], NULL, b->size - got,
					     SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
				    : write(t->fd[1], (const char *)b->mem + got, b->size - got);
			if (n < 0 && errno == EINTR)
				continue;
			ok = n > 0;
			got += ok ? (size_t)n : 0;
		}
	}
	if (!ok) {
		if (t)
			pipe_discard(t);
		return false;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].flags = FUSE_BUF_IS_FD;
	bv.buf[0].fd = t->fd[0];
	if (fuse_reply_data(req, &bv, p->owned ? 0 : FUSE_BUF_SPLICE_MOVE) != 0)
		pipe_discard(t);
	return true;
}

/* Replies with the pieces: a few of no pin, by libfuse; else through this thread's pipe.
 * False when nothing was replied (read the bytes instead). */
static bool reply_pieces(fuse_req_t req, pieces *p, size_t size)
{
	if (p->bv->count <= FEW_PIECES && !p->pinned) {
		fuse_reply_data(req, p->bv, p->owned ? 0 : FUSE_BUF_SPLICE_MOVE);
		return true;
	}
	return reply_through_pipe(req, p, size);
}

/* Spliced from the descriptor the source gives: a local file's own, by libfuse (its
 * pages go into the reply by reference), or a pinned one (reply_pinned).  False when the
 * source has none: the caller reads the bytes. */
static bool reply_splice(fuse_req_t req, tfsd_fs *fs, const tfs_source *s, uint64_t pos,
			 size_t size, uint64_t lo, uint64_t hi)
{
	tfs_source_fd f;
	tfs_error err;
	int rc = tfs_source_splice_fd(&f, s, pos, size, lo, hi, &err);
	if (rc == TFS_PASSTHROUGH)
		return false;
	if (rc < 0) {
		fuse_reply_err(req, -tfsd_fail(fs, &err));
		return true;
	}
	if (f.len < size) { /* a prefix only (a computed source's row run): piece by piece */
		tfs_source_fd_done(&f);
		pieces p = { 0 };
		bool done = false;
		if (!(rc = piece_source(&p, s, pos, size, lo, hi, &err)))
			done = reply_pieces(req, &p, size);
		else if (rc < 0)
			done = (fuse_reply_err(req, -tfsd_fail(fs, &err)), true);
		pieces_free(&p);
		return done;
	}
	if (f.pinned)
		return reply_pinned(req, &f, f.at, size);
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = f.fd;
	bv.buf[0].pos = (off_t)f.at;
	/* An owned file's pages are copied into the reply: moved, the kernel would take them
	 * out of the cache file's page cache into the mount's (a quantized view's cache files
	 * then leave memory as they are read, and the next mount reads them from disk) */
	fuse_reply_data(req, &bv, f.owned ? 0 : FUSE_BUF_SPLICE_MOVE);
	tfs_source_fd_done(&f);   /* (an owned copy: closed; the source's own: kept) */
	return true;
}

/* Straight from a local file's mapping, its pages populated first and dropped after.
 * False when the source has no mapping. */
static bool reply_mapped(fuse_req_t req, const tfs_source *s, uint64_t pos, size_t size)
{
	const uint8_t *map = tfs_source_mapping(s);
	tfs_error err;
	if (!map)
		return false;
	if (tfs_source_present(s, pos, size, &err)) {
		fuse_reply_err(req, EIO);
		return true;
	}
	tfs_source_madvise(s, pos, size, MADV_POPULATE_READ);
	fuse_reply_buf(req, (const char *)map + pos, size);
	tfs_source_madvise(s, pos, size, MADV_DONTNEED);
	return true;
}

/* Read into this thread's buffer, then replied (short where a file ends early). */
static void reply_read(fuse_req_t req, tfsd_fs *fs, const tfs_source *s, uint64_t pos,
		       size_t size, uint64_t lo, uint64_t hi)
{
	tfs_error err;
	char *buf = tfsd_thread_buf(1, size);
	int64_t got = buf ? tfs_source_read(s, buf, size, pos, lo, hi, &err) : 0;
	if (!buf)
		fuse_reply_err(req, ENOMEM);
	else if (got < 0) /* why, in last_error and syslog: a read-only mount has no other place */
		fuse_reply_err(req, -tfsd_fail(fs, &err));
	else
		fuse_reply_buf(req, buf, (size_t)got);
}

void tfsd_reply_source(fuse_req_t req, tfsd_fs *fs, int32_t src, uint64_t base, uint64_t avail,
		       off_t off, size_t size)
{
	const tfs_source *s = tfs_model_source(fs->model, (size_t)src);
	if ((uint64_t)off >= avail) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > avail - (uint64_t)off)
		size = (size_t)(avail - (uint64_t)off);
	pthread_once(&read_mode_once, read_mode_init);
	uint64_t pos = base + (uint64_t)off, hi = base + avail;
	const uint8_t *mem = tfs_source_memory(s);
	if (mem) {
		fuse_reply_buf(req, (const char *)mem + pos, size);
		return;
	}
	if (raw_read_mode == READ_MMAP && reply_mapped(req, s, pos, size))
		return;
	bool splice = raw_read_mode == READ_SPLICE ||
		      (raw_read_mode == READ_AUTO && size <= splice_max);
	if (splice && size > 0 && reply_splice(req, fs, s, pos, size, base, hi))
		return;
	reply_read(req, fs, s, pos, size, base, hi);
}

/* Read into this thread's buffer, then replied. */
static void reply_image_read(fuse_req_t req, const tfs_image *im, uint64_t off, size_t size)
{
	tfs_error err;
	char *buf = tfsd_thread_buf(1, size);
	int64_t r = buf ? tfs_image_read(im, off, size, buf, &err) : -1;
	if (r < 0)
		fuse_reply_err(req, buf ? -tfsd_errno(&err) : ENOMEM);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}

/* The pieces of [off, off+size) of an image; TFS_PASSTHROUGH when some have no file. */
static int image_pieces(pieces *p, const tfs_image *im, uint64_t off, size_t size,
			tfs_error *err)
{
	for (uint64_t pos = off, end = off + size; pos < end;) {
		tfs_image_piece q;
		tfs_image_piece_at(&q, im, pos, end - pos);
		int rc = q.src ? piece_source(p, q.src, q.src_off, q.n, q.lo, q.hi, err)
			       : piece_mem(p, q.mem, q.n, err);
		if (rc)
			return rc;
		pos += q.n;
	}
	return 0;
}

void tfsd_reply_image(fuse_req_t req, tfsd_fs *fs, const tfs_image *im, off_t off, size_t size)
{
	uint64_t total = tfs_image_size(im);
	if ((uint64_t)off >= total) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > total - (uint64_t)off)
		size = (size_t)(total - (uint64_t)off);
	pthread_once(&read_mode_once, read_mode_init);
	bool splice = raw_read_mode == READ_SPLICE ||
		      (raw_read_mode == READ_AUTO && size <= splice_max);
	if (splice && size > 0) {
		pieces p = { 0 };
		tfs_error err;
		int rc = image_pieces(&p, im, (uint64_t)off, size, &err);
		bool done = !rc && reply_pieces(req, &p, size);
		if (rc < 0) {
			fuse_reply_err(req, -tfsd_fail(fs, &err));
			done = true;
		}
		pieces_free(&p);
		if (done)
			return;
	}
	reply_image_read(req, im, (uint64_t)off, size);
}
