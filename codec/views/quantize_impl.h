/*
 * quantize_impl.h - the state of a quantized view (codec-private): the plan, and per quantized
 * tensor where its bytes are (nowhere yet, being computed, a cache file), shared by the
 * view's computed sources (quantize_pool.c computes and caches, quantize.c builds the model).
 */
#ifndef TFS_QUANT_IMPL_H
#define TFS_QUANT_IMPL_H

#include "quantize.h"
#include "qplan.h"
#include "model_impl.h"

#include <pthread.h>

typedef struct tfs_qview tfs_qview;

typedef enum {
	TFS_QT_IDLE,     /* nothing done (a cache file may exist: looked for on first use) */
	TFS_QT_QUEUED,   /* chunks being computed into fd */
	TFS_QT_DONE,     /* fd holds every byte */
	TFS_QT_FAILED,   /* computing failed: msg says why (every read fails with it) */
	TFS_QT_NOCACHE,  /* no file: every read computes the blocks it needs */
} tfs_qt_state;

/* One quantized tensor: the ctx of its computed source. */
typedef struct {
	tfs_qview *v;
	const tfs_qtensor *q;   /* the plan's */
	uint32_t block_elems, block_bytes;
	uint64_t nblocks;
	uint64_t n_chunks, next, done;  /* chunks in all, handed out, finished */
	int state;              /* tfs_qt_state */
	int fd;                 /* its bytes (DONE), being written (QUEUED), or -1 */
	bool named;             /* fd is the cache file (not a temporary) */
	char *tmp;              /* fd's name while written, where there is no O_TMPFILE */
	unsigned users;         /* threads using fd (not closed meanwhile) */
	uint64_t last_use;      /* for closing the least recently used descriptors */
	char key[65];           /* its cache name: sha256 of what makes its bytes */
	int rc;                 /* failure */
	char *msg;
	size_t q_prev, q_next;  /* its place in the work queue (SIZE_MAX: none) */
	bool queued;
} tfs_qt;

struct tfs_qview {
	pthread_mutex_t mu;
	pthread_cond_t work;    /* a chunk to compute, or stop */
	pthread_cond_t done;    /* a tensor finished */
	unsigned refs;          /* the view's sources and their holds */
	tfs_model *owner;       /* the model opened: the view's base is it or a view of it */
	const tfs_model *base;  /* what is quantized */
	tfs_qplan *plan;
	tfs_imatrix *im;
	char *dir;              /* the cache directory (.../quantized), or NULL: none */
	uint64_t cap;           /* its bound in bytes (0: none): quantize_trim.c */
	char *note;             /* said once to the user (the cache cannot be written), or NULL */
	tfs_qt *t;              /* the plan's converted tensors, plan order */
	size_t n_t;
	size_t q_head, q_tail;  /* the work queue: tensors with chunks to hand out */
	size_t last_demand;     /* the tensor last read (SIZE_MAX: none) */
	uint64_t clock;         /* uses, for last_use */
	unsigned open_fds;
	pthread_t *threads;     /* started on first use (quantize_pool.c) */
	unsigned n_threads, want_threads;
	bool stop;
};

/* ==== quantize_pool.c ==== */

/* Readies the tensors and looks at the cache directory (o->cache_dir; v->note says why it
 * cannot be used).  0 or an error. */
int tfs_qview_start(tfs_qview *v, const tfs_quant_opts *o, tfs_error *err);
/* Stops the workers, closes the files, frees everything (the plan, the owner model). */
void tfs_qview_free(tfs_qview *v);
/* Stops the pool: its threads end once their chunk is written, tensors not finished are
 * dropped (their files closed); the next read that needs one starts the pool again. */
void tfs_qview_quiesce(tfs_qview *v);
/* The computed source's callbacks of a tensor (ctx: its tfs_qt). */
extern const tfs_computed_ops tfs_qt_ops;

/* ==== quantize_key.c ==== */

/* t->key: the sha256 of what makes the tensor's bytes: the identity of the owner's sources
 * (path or URL, size, modification time), o->salt, the tensor (name, type, shape, where its
 * bytes are), the type it becomes, and the importance matrix it is weighed with (path, size,
 * modification time; none when it takes no weights). */
int tfs_qt_key(tfs_qt *t, const tfs_qview *v, const tfs_quant_opts *o, tfs_error *err);
/* Whether the owner's local files are still what the keys name (size, modification time):
 * a tensor computed from a file changed since it was opened is not cached under its key. */
bool tfs_qview_sources_unchanged(const tfs_qview *v);
/* The cache directory for o (o->cache_dir or the default, + "/quantized"), made with its
 * parents; NULL and v->note set when it cannot be written. */
char *tfs_qview_cache_dir(tfs_qview *v, const tfs_quant_opts *o);

/* ==== quantize_trim.c ==== */

/* Links t's complete file fd (fsynced) under its cache name, after making room for it within
 * v->cap: the least recently used files of other tensors removed (not one this view is
 * reading).  Whether the name is there now (linked, or another mount's first); false: not
 * linked (no room, an error), fd stays this view's alone.  Called without v->mu. */
bool tfs_qview_cache_link(tfs_qview *v, tfs_qt *t, int fd);

#endif
