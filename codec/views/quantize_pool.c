/*
 * quantize_pool.c - the quantized tensors of a view (quantize.h): computed when first read, whole,
 * by a pool of threads, into cache files; the computed source's callbacks.
 *
 * A tensor is cut into chunks of at most CHUNK_VALUES values (whole blocks); a worker takes
 * the first chunk of the first tensor of the work queue, converts it (its float32 values
 * read from the base model, quantized as the plan says: tfs_tensor_convert_blocks, the bytes
 * tfs_tensor_convert writes) and writes it at its place in the tensor's file, an unnamed
 * file of the cache directory (O_TMPFILE; a named temporary where the file system has
 * none).  When its last chunk is written the tensor is DONE: readers read the file (and
 * splice from it); the worker then fsyncs it and links it under its cache name, so a cache
 * file is always whole.  A reader of a tensor not DONE puts it at the head of the queue,
 * and the tensors after it at the tail while less than LOOKAHEAD values wait, then waits
 * for it.  Memory: one chunk's values and bytes per worker.  Without a cache directory,
 * every read computes the blocks it needs (TFS_QT_NOCACHE).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "quantize_impl.h"
#include "requant.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK_VALUES (1u << 20)   /* 4 MiB of float32 per chunk */
#define LOOKAHEAD (64ull << 20)   /* values queued ahead of a reader */
#define MAX_OPEN 256u             /* cache files kept open */
#define NONE SIZE_MAX

static size_t index_of(const tfs_qview *v, const tfs_qt *t) { return (size_t)(t - v->t); }

/* ==== references: the view's sources and their holds ==== */

static void *qt_hold(void *ctx)
{
	tfs_qt *t = ctx;
	pthread_mutex_lock(&t->v->mu);
	t->v->refs++;
	pthread_mutex_unlock(&t->v->mu);
	return ctx;
}

static void qt_release(void *ctx)
{
	tfs_qview *v = ((tfs_qt *)ctx)->v;
	pthread_mutex_lock(&v->mu);
	bool last = --v->refs == 0;
	pthread_mutex_unlock(&v->mu);
	if (last)
		tfs_qview_free(v);
}

/* ==== the work queue (v->mu held) ==== */

static void q_unlink(tfs_qview *v, tfs_qt *t)
{
	if (!t->queued)
		return;
	if (t->q_prev != NONE)
		v->t[t->q_prev].q_next = t->q_next;
	else
		v->q_head = t->q_next;
	if (t->q_next != NONE)
		v->t[t->q_next].q_prev = t->q_prev;
	else
		v->q_tail = t->q_prev;
	t->queued = false;
}

static void q_push(tfs_qview *v, tfs_qt *t, bool front)
{
	size_t i = index_of(v, t);
	q_unlink(v, t);
	t->queued = true;
	t->q_prev = front ? NONE : v->q_tail;
	t->q_next = front ? v->q_head : NONE;
	if (t->q_prev != NONE)
		v->t[t->q_prev].q_next = i;
	else
		v->q_head = i;
	if (t->q_next != NONE)
		v->t[t->q_next].q_prev = i;
	else
		v->q_tail = i;
	pthread_cond_broadcast(&v->work);
}

/* ==== a tensor's file ==== */

static void set_failed(tfs_qt *t, int rc, const char *msg)
{
	if (!t->rc) {
		t->rc = rc;
		t->msg = strdup(msg);
	}
}

/* Closes the least recently used cache files beyond MAX_OPEN (v->mu held): they are opened
 * again by name when read. */
static void close_idle(tfs_qview *v)
{
	while (v->open_fds > MAX_OPEN) {
		tfs_qt *old = NULL;
		for (size_t i = 0; i < v->n_t; i++) {
			tfs_qt *t = &v->t[i];
			if (t->state == TFS_QT_DONE && t->named && t->users == 0 &&
			    (!old || t->last_use < old->last_use))
				old = t;
		}
		if (!old)
			return;
		close(old->fd);
		old->fd = -1;
		old->state = TFS_QT_IDLE;
		v->open_fds--;
	}
}

/* The cache file of t, when there is a whole one: t DONE.  (v->mu held) */
static bool open_cached(tfs_qview *v, tfs_qt *t)
{
	char path[PATH_MAX];
	struct stat st;
	if (!v->dir || snprintf(path, sizeof(path), "%s/%s", v->dir, t->key) >= (int)sizeof(path))
		return false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != t->q->nbytes) {
		close(fd); /* another size: not ours (a hash collision, or damaged): made again */
		return false;
	}
	futimens(fd, NULL);  /* used now: the newest for trimming (quantize_trim.c) */
	t->fd = fd;
	t->named = true;
	t->state = TFS_QT_DONE;
	t->last_use = ++v->clock;
	v->open_fds++;  /* (closed beyond MAX_OPEN once a read is done: close_idle) */
	return true;
}

/* A new file for t's bytes, or -1: an unnamed one in the cache directory, else (a file
 * system without O_TMPFILE) a named temporary there, .tmp-PID-XXXXXX, whose name goes to
 * t->tmp (a dead process's are removed by tfs_qview_cache_dir). */
static int new_file(const tfs_qview *v, tfs_qt *t)
{
	int fd = tfs_io_tmpfile_open(v->dir, 0644);
	char tmpl[PATH_MAX];
	if (fd >= 0)
		return fd;
	if (snprintf(tmpl, sizeof(tmpl), "%s/.tmp-%d-XXXXXX", v->dir, (int)getpid()) >=
	    (int)sizeof(tmpl))
		return -1;
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd >= 0 && fchmod(fd, 0644) == 0 && (t->tmp = strdup(tmpl)))
		return fd;
	if (fd >= 0) {
		unlink(tmpl);
		close(fd);
	}
	return -1;
}

static void *worker(void *arg);

/* The pool's threads, started on the first tensor to compute (not at open: a daemon forks
 * after it opened the model), again after tfs_qview_quiesce.  Whether there is one (v->mu
 * held; none while the pool is being stopped). */
static bool start_workers(tfs_qview *v)
{
	if (v->stop)
		return false;
	if (!v->threads && v->want_threads &&
	    !(v->threads = calloc(v->want_threads, sizeof(*v->threads))))
		return false;
	for (; v->n_threads < v->want_threads; v->n_threads++)
		if (pthread_create(&v->threads[v->n_threads], NULL, worker, v))
			break;
	v->want_threads = v->n_threads;  /* (no more attempts after a failure) */
	return v->n_threads > 0;
}

/* Gives t's first read what it needs (v->mu held): its cache file, or a new file and its
 * chunks queued, or (no cache) nothing. */
static void begin(tfs_qview *v, tfs_qt *t, bool front)
{
	if (t->state != TFS_QT_IDLE || open_cached(v, t))
		return;
	/* (a tensor larger than the cache's bound is never kept: quantize_trim.c) */
	bool fits = !v->cap || t->q->nbytes <= v->cap;
	t->fd = v->dir && t->nblocks && fits && start_workers(v) ? new_file(v, t) : -1;
	if (t->fd < 0) {
		t->state = TFS_QT_NOCACHE;
		return;
	}
	v->open_fds++;
	t->named = false;
	t->state = TFS_QT_QUEUED;
	t->next = t->done = 0;
	q_push(v, t, front);
}

/* The tensors after k queued while less than LOOKAHEAD values wait and, with a bound on the
 * cache, while those ahead take less than half of it: more would push each other out of the
 * cache before they are read, to be computed again (v->mu held). */
static void look_ahead(tfs_qview *v, size_t k)
{
	uint64_t waiting = 0, ahead = 0;
	for (size_t j = k; j < v->n_t && waiting < LOOKAHEAD && (!v->cap || ahead < v->cap / 2);
	     j++) {
		tfs_qt *t = &v->t[j];
		if (j > k)
			begin(v, t, false);
		if (t->state == TFS_QT_QUEUED)
			waiting += (t->n_chunks - t->done) * CHUNK_VALUES;
		if (j > k && (t->state == TFS_QT_QUEUED || t->state == TFS_QT_DONE))
			ahead += t->q->nbytes;
	}
}

/* ==== the workers ==== */

/* Chunk c of t into its file. */
static int compute_chunk(tfs_qview *v, tfs_qt *t, uint64_t c, float **vals, uint8_t **out,
			 tfs_error *err)
{
	const uint64_t per = (t->nblocks + t->n_chunks - 1) / t->n_chunks, b0 = c * per;
	const uint64_t nb = t->nblocks - b0 < per ? t->nblocks - b0 : per;
	float *nv = realloc(*vals, nb * t->block_elems * sizeof(float));
	if (nv)
		*vals = nv;
	uint8_t *no = nv ? realloc(*out, nb * t->block_bytes) : NULL;
	if (no)
		*out = no;
	if (!nv || !no)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	int rc = tfs_tensor_convert_blocks(v->base, t->q->tensor, t->q->dtype, v->im, b0, nb,
					   *out, *vals, err);
	return rc ? rc : tfs_io_pwrite(t->fd, t->q->name, b0 * t->block_bytes, *out,
				       nb * t->block_bytes, err);
}

/* t's file complete: fsynced and linked under its cache name, within the cache's bound
 * (quantize_trim.c; another mount may have linked one first: then this one stays unnamed). */
static void publish(tfs_qview *v, tfs_qt *t, int fd)
{
	bool ok = fdatasync(fd) == 0 && tfs_qview_sources_unchanged(v) &&
		  tfs_qview_cache_link(v, t, fd);
	if (t->tmp && !ok)
		unlink(t->tmp);
	free(t->tmp);
	t->tmp = NULL;
	pthread_mutex_lock(&v->mu);
	t->named = ok;
	pthread_mutex_unlock(&v->mu);
}

/* One chunk done (v->mu held); true when it was t's last and its file is to be published. */
static bool chunk_done(tfs_qview *v, tfs_qt *t, int rc, const tfs_error *err)
{
	if (rc)
		set_failed(t, rc, err->msg);
	if (++t->done < t->n_chunks)
		return false;
	if (t->rc) {
		close(t->fd);
		if (t->tmp)
			unlink(t->tmp);
		free(t->tmp);
		t->tmp = NULL;
		t->fd = -1;
		v->open_fds--;
		t->state = TFS_QT_FAILED;
	} else {
		t->state = TFS_QT_DONE;
		t->last_use = ++v->clock;
	}
	pthread_cond_broadcast(&v->done);
	return t->state == TFS_QT_DONE;
}

static void *worker(void *arg)
{
	tfs_qview *v = arg;
	float *vals = NULL;
	uint8_t *out = NULL;
	pthread_setname_np(pthread_self(), "tfs-quantize");   /* (what top -H shows) */
	pthread_mutex_lock(&v->mu);
	while (!v->stop) {
		if (v->q_head == NONE) {
			pthread_cond_wait(&v->work, &v->mu);
			continue;
		}
		tfs_qt *t = &v->t[v->q_head];
		uint64_t c = t->next++;
		if (t->next == t->n_chunks)
			q_unlink(v, t);
		t->users++;
		pthread_mutex_unlock(&v->mu);
		tfs_error err;
		tfs_error_clear(&err);
		int rc = t->rc ? 0 : compute_chunk(v, t, c, &vals, &out, &err);
		pthread_mutex_lock(&v->mu);
		bool last = chunk_done(v, t, rc, &err);
		int fd = t->fd;
		pthread_mutex_unlock(&v->mu);
		if (last)
			publish(v, t, fd);
		pthread_mutex_lock(&v->mu);
		t->users--;
	}
	pthread_mutex_unlock(&v->mu);
	free(vals);
	free(out);
	return NULL;
}

/* ==== reading ==== */

/* t's bytes made available (v->mu held): its state then (DONE with t->fd and a use counted
 * in t->users, NOCACHE, FAILED). */
static int ensure(tfs_qview *v, tfs_qt *t)
{
	size_t k = index_of(v, t);
	if (t->state == TFS_QT_IDLE)
		begin(v, t, true);
	else if (t->state == TFS_QT_QUEUED && t->queued)
		q_push(v, t, true);
	if (k != v->last_demand) {
		v->last_demand = k;
		look_ahead(v, k);
	}
	while (t->state == TFS_QT_QUEUED || t->state == TFS_QT_IDLE) {
		if (t->state == TFS_QT_IDLE)  /* (its file was closed meanwhile) */
			begin(v, t, true);
		else
			pthread_cond_wait(&v->done, &v->mu);
	}
	if (t->state == TFS_QT_DONE) {
		t->users++;
		t->last_use = ++v->clock;
	}
	return t->state;
}

/* [off, off + len) of t computed here, block by block (no cache). */
static int64_t compute_range(tfs_qview *v, tfs_qt *t, void *buf, uint64_t len, uint64_t off,
			     tfs_error *err)
{
	const uint64_t bb = t->block_bytes, per = CHUNK_VALUES / t->block_elems ?
						  CHUNK_VALUES / t->block_elems : 1;
	uint64_t b = off / bb, end = (off + len + bb - 1) / bb, done = 0;
	float *vals = malloc((end - b < per ? end - b : per) * t->block_elems * sizeof(float));
	uint8_t *raw = malloc((end - b < per ? end - b : per) * bb);
	int rc = vals && raw ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	for (; !rc && b < end; b += per) {
		uint64_t nb = end - b < per ? end - b : per, lo = b * bb;
		rc = tfs_tensor_convert_blocks(v->base, t->q->tensor, t->q->dtype, v->im, b, nb,
					       raw, vals, err);
		uint64_t from = off > lo ? off - lo : 0, n = nb * bb - from;
		if (n > len - done)
			n = len - done;
		if (!rc)
			memcpy((uint8_t *)buf + done, raw + from, n);
		done += n;
	}
	free(vals);
	free(raw);
	return rc ? rc : (int64_t)done;
}

static int failed(const tfs_qt *t, tfs_error *err)
{
	return tfs_error_set(err, t->rc ? t->rc : TFS_E_IO, "tensor '%s' could not be "
			     "quantized to %s: %s", t->q->name, tfs_dtype(t->q->dtype)->name,
			     t->msg ? t->msg : "its computation failed");
}

static int64_t qt_read(void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	tfs_qt *t = ctx;
	tfs_qview *v = t->v;
	pthread_mutex_lock(&v->mu);
	int state = ensure(v, t), fd = t->fd;
	pthread_mutex_unlock(&v->mu);
	if (state == TFS_QT_NOCACHE)
		return compute_range(v, t, buf, len, off, err);
	if (state != TFS_QT_DONE)
		return failed(t, err);
	int rc = tfs_io_pread(fd, t->q->name, off, buf, len, err);
	pthread_mutex_lock(&v->mu);
	t->users--;
	close_idle(v);
	pthread_mutex_unlock(&v->mu);
	return rc ? rc : (int64_t)len;
}

static int qt_splice_fd(void *ctx, uint64_t off, uint64_t len, tfs_source_fd *out,
			tfs_error *err)
{
	tfs_qt *t = ctx;
	tfs_qview *v = t->v;
	(void)len;
	pthread_mutex_lock(&v->mu);
	int state = ensure(v, t);
	/* the caller's own descriptor: this one may be closed (close_idle) meanwhile */
	int fd = state == TFS_QT_DONE ? fcntl(t->fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (state == TFS_QT_DONE)
		t->users--;
	close_idle(v);
	pthread_mutex_unlock(&v->mu);
	if (state == TFS_QT_NOCACHE)
		return TFS_PASSTHROUGH;
	if (state != TFS_QT_DONE)
		return failed(t, err);
	if (fd < 0)
		return TFS_PASSTHROUGH;
	out->fd = fd;
	out->owned = true;   /* (cache files are unlinked whole, never punched: no pin needed) */
	out->at = off;
	return 0;
}

const tfs_computed_ops tfs_qt_ops = {
	.read = qt_read, .splice_fd = qt_splice_fd, .hold = qt_hold, .release = qt_release,
};

/* ==== the pool ==== */

static unsigned default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 8 ? 8 : (unsigned)n;
}

int tfs_qview_start(tfs_qview *v, const tfs_quant_opts *o, tfs_error *err)
{
	v->q_head = v->q_tail = v->last_demand = NONE;
	for (size_t i = 0; i < v->n_t; i++) {
		tfs_qt *t = &v->t[i];
		const tfs_dtype_info *d = tfs_dtype(t->q->dtype);
		t->v = v;
		t->fd = -1;
		t->q_prev = t->q_next = NONE;
		t->block_elems = d->block_elems;
		t->block_bytes = d->block_bytes;
		t->nblocks = t->q->nbytes / d->block_bytes;
		uint64_t per = CHUNK_VALUES / d->block_elems ? CHUNK_VALUES / d->block_elems : 1;
		t->n_chunks = t->nblocks ? (t->nblocks + per - 1) / per : 1;
		int rc = tfs_qt_key(t, v, o, err);
		if (rc)
			return rc;
	}
	v->dir = v->n_t ? tfs_qview_cache_dir(v, o) : NULL;
	v->cap = o->cache_size;
	v->want_threads = o->threads ? o->threads : default_threads();
	return 0;
}

/* t, queued and not finished, back to IDLE: its file closed (v->mu held, no worker left). */
static void drop_unfinished(tfs_qview *v, tfs_qt *t)
{
	q_unlink(v, t);
	close(t->fd);
	if (t->tmp)
		unlink(t->tmp);
	free(t->tmp);
	free(t->msg);
	t->tmp = t->msg = NULL;
	t->fd = -1;
	t->rc = 0;
	v->open_fds--;
	t->state = TFS_QT_IDLE;
}

void tfs_qview_quiesce(tfs_qview *v)
{
	if (!v)
		return;
	pthread_mutex_lock(&v->mu);
	v->stop = true;
	unsigned n = v->n_threads;
	pthread_cond_broadcast(&v->work);
	pthread_mutex_unlock(&v->mu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(v->threads[i], NULL);
	pthread_mutex_lock(&v->mu);
	v->n_threads = 0;
	v->stop = false;
	for (size_t i = 0; i < v->n_t; i++)
		if (v->t[i].state == TFS_QT_QUEUED)
			drop_unfinished(v, &v->t[i]);
	v->last_demand = NONE;
	pthread_cond_broadcast(&v->done); /* (a reader waiting for one begins it again) */
	pthread_mutex_unlock(&v->mu);
}

void tfs_qview_free(tfs_qview *v)
{
	if (!v)
		return;
	pthread_mutex_lock(&v->mu);
	v->stop = true;
	pthread_cond_broadcast(&v->work);
	pthread_mutex_unlock(&v->mu);
	for (unsigned i = 0; i < v->n_threads; i++)
		pthread_join(v->threads[i], NULL);
	for (size_t i = 0; i < v->n_t; i++) {
		if (v->t[i].fd >= 0)
			close(v->t[i].fd);
		if (v->t[i].tmp) /* (a tensor never finished) */
			unlink(v->t[i].tmp);
		free(v->t[i].tmp);
		free(v->t[i].msg);
	}
	free(v->threads);
	free(v->t);
	free(v->dir);
	free(v->note);
	tfs_qplan_free(v->plan);
	tfs_imatrix_free(v->im);
	tfs_model_free(v->owner);
	pthread_mutex_destroy(&v->mu);
	pthread_cond_destroy(&v->work);
	pthread_cond_destroy(&v->done);
	free(v);
}
