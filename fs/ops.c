/*
 * ops.c - the FUSE low-level handlers and their table (tfsd_ops).  They stay thin: find
 * the node, call codec, map the error, reply.  Here: lookups, attributes, directories,
 * open/release and read; a writable mount's handlers are in write.c, commit.c and
 * namespace.c, the extended attributes in xattr.c, a source's bytes as a reply in reply.c.
 */
#include "fs.h"
#include "ops.h"
#include "reply.h"
#include "tree.h"
#include "write.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static tfsd_fs *fs_of(fuse_req_t req) { return fuse_req_userdata(req); }

/* ==== attributes ==== */

static void reply_entry(fuse_req_t req, tfsd_fs *fs, tfsd_node *n)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	int rc = tfsd_node_attr(fs, n, &e.attr);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = tfsd_node_ino(n);
	e.attr_timeout = fs->timeout;
	e.entry_timeout = fs->timeout;
	/* (lookups may run side by side under the read lock) */
	__atomic_add_fetch(&n->nlookup, 1, __ATOMIC_RELAXED);
	if (fuse_reply_entry(req, &e) != 0)
		__atomic_sub_fetch(&n->nlookup, 1, __ATOMIC_RELAXED);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	tfsd_fs *fs = fs_of(req);
	pthread_rwlock_wrlock(&fs->lock);
	tfsd_tree_forget(fs, ino, nlookup);
	pthread_rwlock_unlock(&fs->lock);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	tfsd_fs *fs = fs_of(req);
	pthread_rwlock_wrlock(&fs->lock);
	for (size_t i = 0; i < count; i++)
		tfsd_tree_forget(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_rwlock_unlock(&fs->lock);
	fuse_reply_none(req);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	tfsd_fs *fs = fs_of(req);
	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *p = tfsd_live_node(fs, parent);
	tfsd_node *n = p && p->kind == N_DIR ? tfsd_tree_lookup(fs, p->dir, name) : NULL;
	if (!n && p && p->kind == N_DIR && tfsd_tree_unmade_item(fs, p->dir, name) >= 0) {
		/* an item looked up for the first time: its node is made (a change) */
		pthread_rwlock_unlock(&fs->lock);
		pthread_rwlock_wrlock(&fs->lock);
		p = tfsd_live_node(fs, parent);
		n = p && p->kind == N_DIR ? tfsd_tree_find(fs, p->dir, name) : NULL;
	}
	if (n && !n->deleted) {
		reply_entry(req, fs, n);
	} else {
		/* a negative entry may be cached as long as nothing can appear */
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->opts.rw ? 0 : fs->timeout;
		fuse_reply_entry(req, &e);
	}
	pthread_rwlock_unlock(&fs->lock);
}

/* The node of ino for reading: live, or removed from its directory (rm, or replaced by a
 * rename) but still an item's file, as an unlinked file stays readable on any file system
 * while it is open (fstat, read) or was just looked up (open racing the rename); NULL: none. */
static tfsd_node *readable_node(tfsd_fs *fs, fuse_ino_t ino)
{
	tfsd_node *n = tfsd_tree_get(fs, ino);
	if (n && n->deleted && (n->kind == N_DIR || n->kind == N_SCRATCH || n->item < 0))
		return NULL;
	return n;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tfsd_fs *fs = fs_of(req);
	struct stat st;
	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *n = readable_node(fs, ino);
	int rc = n ? tfsd_node_attr(fs, n, &st) : -ENOENT;
	if (!rc && n->deleted)
		st.st_nlink = 0;
	pthread_rwlock_unlock(&fs->lock);
	st.st_ino = (ino_t)ino; /* the inode asked about, of whichever version */
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, fs->timeout);
}

/* ==== directories ==== */

/* Whether node n is listed in dir by the node list (the second part of a listing): the
 * root's entries, and the files of a directory that stand for no item of the model (new
 * files not written yet, scratch files); the model's items are listed first, by item. */
static bool in_dir(const tfsd_node *n, tfsd_node *dir)
{
	if (n->deleted)
		return false;
	if (n->kind == N_DIR)   /* (hf/'s folder in hf/, the others in the root) */
		return n->dir != D_ROOT && tfsd_dir_parent(n->dir) == dir->dir;
	if (dir->dir == D_ROOT)
		return n->dir == D_ROOT &&
		       (n->kind == N_INDEX || n->kind == N_MODEL || n->kind == N_CONFIG);
	return n->dir == dir->dir && n->kind != N_INDEX &&
	       (n->kind == N_SCRATCH || n->kind == N_HFFILE || n->item < 0);
}

/* Cookies: 1 ".", 2 "..", then 3 + item (the model's items of the directory, in order;
 * an item's node says its name, or that it is not listed), then NODES_COOKIE + node index
 * (the node list).  Each entry's cookie is where the listing goes on after it. */
#define NODES_COOKIE ((off_t)1 << 40)

/* Adds the entries of the directory's items from item `from` on; false when buf is full. */
static bool list_items(fuse_req_t req, tfsd_fs *fs, tfsd_dir d, size_t from, char *buf,
		       size_t size, size_t *used)
{
	tfs_buf b = { 0 };
	struct stat st = { .st_mode = S_IFREG };
	bool fits = true;
	for (size_t i = from, n = tfsd_tree_n_items(fs, d); fits && i < n; i++) {
		bool hidden;
		tfsd_node *o = tfsd_tree_owner(fs, d, (long)i, &hidden);
		if (!o && (hidden || tfsd_tree_default_name(fs, d, (long)i, &b)))
			continue;
		/* (an item without a node has no inode number yet: one that no node has) */
		st.st_ino = o ? tfsd_node_ino(o) : ((fuse_ino_t)1 << 39) + i;
		size_t l = fuse_add_direntry(req, buf + *used, size - *used, o ? o->fname : b.data,
					     &st, (off_t)i + 3);
		fits = l <= size - *used;
		if (fits)
			*used += l;
	}
	tfs_buf_free(&b);
	return fits;
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	tfsd_fs *fs = fs_of(req);
	char *buf = malloc(size);
	size_t used = 0;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *d = tfsd_live_node(fs, ino);
	if (!d || d->kind != N_DIR) {
		pthread_rwlock_unlock(&fs->lock);
		free(buf);
		fuse_reply_err(req, d ? ENOTDIR : ENOENT);
		return;
	}
	struct stat st = { .st_mode = S_IFDIR };
	for (off_t k = off; k < 2; k++) {
		st.st_ino = k == 0 ? ino : FUSE_ROOT_ID;
		size_t l = fuse_add_direntry(req, buf + used, size - used, k == 0 ? "." : "..", &st,
					     k + 1);
		if (l > size - used)
			goto done;
		used += l;
	}
	if (off < NODES_COOKIE && d->dir != D_ROOT &&
	    !list_items(req, fs, d->dir, off > 2 ? (size_t)off - 2 : 0, buf, size, &used))
		goto done;
	for (size_t i = off >= NODES_COOKIE ? (size_t)(off - NODES_COOKIE) : 0; i < fs->n_nodes;
	     i++) {
		tfsd_node *n = fs->nodes[i];
		if (!n || !in_dir(n, d))
			continue;
		st.st_ino = tfsd_node_ino(n);
		st.st_mode = n->kind == N_DIR ? S_IFDIR : S_IFREG;
		size_t l = fuse_add_direntry(req, buf + used, size - used, n->fname, &st,
					     NODES_COOKIE + (off_t)i + 1);
		if (l > size - used)
			break;
		used += l;
	}
done:
	pthread_rwlock_unlock(&fs->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* ==== open files ==== */

/*
 * Whether a handle writing node n with open flags bypasses the page cache.  A rw mount's
 * values change at close(), but the kernel's page cache is the inode's, shared by every
 * handle: a write() through it would show its bytes to other readers before the commit
 * (half old, half new).  So:
 *   metadata/  every handle is direct_io (nobody maps a value);
 *   tensors/, layers/, f32/, npy/: readers keep the page cache (np.memmap, mmap), and so do
 *             writers opened O_RDWR, which may map the file shared (np.memmap mode r+;
 *             libfuse 3.14 cannot ask for FUSE_DIRECT_IO_ALLOW_MMAP, so a direct_io handle
 *             cannot be mapped shared); writers opened O_WRONLY (cp, shell redirections,
 *             np.save, open(..., "wb")) cannot map the file and are direct_io.  O_APPEND
 *             writers keep the page cache: their position is the kernel's file size, which
 *             a direct_io writer leaves at the committed size (tfsd_op_setattr).
 * A commit gives tensors/ and layers/ files a new inode (tfsd_node_ino): readers that
 * opened before it keep the old inode, its pages and its bytes (take_snapshot); an open
 * that looked the old inode up just before the commit is direct_io (op_open).
 */
static bool direct_writer(const tfsd_node *n, int flags)
{
	return (n->kind == N_RAW || n->kind == N_EXTRA || n->kind == N_F32 || n->kind == N_NPY) &&
	       (flags & O_ACCMODE) == O_WRONLY && !(flags & O_APPEND);
}

/* Records h as the handle node n was last opened for writing with, by thread tid (NULL:
 * forgets it). */
static void set_opener(tfsd_fs *fs, tfsd_node *n, tfsd_handle *h, pid_t tid)
{
	pthread_mutex_lock(&fs->cache_lock);
	n->opener = h;
	n->opener_tid = tid;
	pthread_mutex_unlock(&fs->cache_lock);
}

/* A reader of tensors/ or layers/ on a rw mount: where its bytes are now (fs->lock held).
 * Without a copy of the source's fd (out of fds), it reads the current bytes. */
static void take_snapshot(tfsd_fs *fs, const tfsd_node *n, tfsd_handle *h)
{
	uint64_t off, len;
	if (!fs->opts.rw || (n->kind != N_RAW && n->kind != N_EXTRA) || n->item < 0)
		return;
	int32_t src = tfsd_node_bytes(fs, n, &off, &len);
	const tfs_source *s = src >= 0 ? tfs_model_source(fs->model, (size_t)src) : NULL;
	if (!s || (h->snap_fd = tfs_source_dup_fd(s)) < 0)
		return;
	h->snap = true;
	h->snap_off = off;
	h->snap_len = len;
	h->ver = n->ver;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tfsd_fs *fs = fs_of(req);
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;
	pthread_rwlock_rdlock(&fs->lock);
	tfsd_node *n = wr ? tfsd_live_node(fs, ino) : readable_node(fs, ino);
	int rc = 0;
	if (!n)
		rc = -ENOENT;
	else if (n->kind == N_DIR)
		rc = -EISDIR;
	else if (wr && !fs->opts.rw)
		rc = -EROFS;
	else if (wr && !tfsd_writable_node(fs, n))
		rc = -EACCES;
	/* an open racing a commit, of the inode it replaced (looked up just before) */
	bool stale = n && ino != tfsd_node_ino(n);
	tfsd_handle *h = NULL;
	if (!rc && !(h = calloc(1, sizeof(*h))))
		rc = -ENOMEM;
	if (h) {
		h->node = n;
		h->data_fd = -1;
		if (!rc && !wr && !stale)
			take_snapshot(fs, n, h);
	}
	/* the model file: what it is now, for as long as this handle is open */
	if (!rc && n->kind == N_MODEL)
		rc = tfsd_image_acquire(fs, n, &h->image);
	pthread_rwlock_unlock(&fs->lock);
	if (!rc && wr)
		rc = tfsd_start_write(fs, h, (fi->flags & O_TRUNC) != 0);
	if (rc) {
		if (h && h->image)
			tfsd_image_release(fs, h->image);
		tfsd_handle_free(h);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	/* a read-only model never changes: let the kernel keep its pages */
	fi->keep_cache = !fs->opts.rw;
	/* a handle of a replaced inode reads (and writes) the new bytes around that inode's
	 * pages, whose readers read the old ones: it cannot map the file shared (ENODEV) */
	h->direct = wr && (direct_writer(n, fi->flags) || stale);
	fi->direct_io = (fs->opts.rw && n->kind == N_KEY) || h->direct || stale;
	fi->noflush = !wr;
	if (wr && !h->scratch)
		set_opener(fs, n, h, fuse_req_ctx(req)->pid);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		if (wr && !h->scratch)
			set_opener(fs, n, NULL, 0);
		if (h->image)
			tfsd_image_release(fs, h->image);
		tfsd_handle_free(h);
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tfsd_handle *h = (tfsd_handle *)(uintptr_t)fi->fh;
	tfsd_fs *fs = fuse_req_userdata(req);
	if (h && h->writing) {
		pthread_mutex_lock(&fs->cache_lock);
		if (h->node->opener == h)
			h->node->opener = NULL;
		pthread_mutex_unlock(&fs->cache_lock);
	}
	if (h && h->writing && h->dirty) {
		/* a change flush deferred (a truncated typed key never written): last chance */
		h->wrote = true;
		tfsd_handle_commit(fs, h);
	}
	if (h && h->image)
		tfsd_image_release(fs, h->image);
	tfsd_handle_free(h);
	fuse_reply_err(req, 0);
}

/* Reads [off, off+len) of the f32 view of tensor i into out. */
static int read_f32(tfsd_fs *fs, size_t i, uint64_t off, size_t len, char *out)
{
	uint64_t first = off / 4, last = (off + len + 3) / 4;
	bool aligned = off % 4 == 0 && len % 4 == 0;
	float *tmp = aligned ? (float *)(void *)out : tfsd_thread_buf(0, (size_t)(last - first) * 4);
	tfs_error err;
	if (!tmp)
		return -ENOMEM;
	if (tfs_tensor_read_f32(fs->model, i, first, last - first, tmp, &err))
		return tfsd_errno(&err);
	if (!aligned)
		memcpy(out, (char *)tmp + (off - first * 4), len);
	return 0;
}

/* Replies with up to size bytes of fd at off (a staged or scratch file). */
static void reply_pread(fuse_req_t req, int fd, size_t size, off_t off)
{
	char *buf = tfsd_thread_buf(1, size);
	ssize_t r = buf ? pread(fd, buf, size, off) : -1;
	if (r < 0)
		fuse_reply_err(req, buf ? errno : ENOMEM);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}

/* Clips a read of size at off to a file of total bytes; false: nothing to read. */
static bool clip(uint64_t total, off_t off, size_t *size)
{
	if ((uint64_t)off >= total)
		return false;
	if (*size > total - (uint64_t)off)
		*size = (size_t)(total - (uint64_t)off);
	return true;
}

/* f32/<name>: dequantized in the handler. */
static void read_f32_view(fuse_req_t req, tfsd_fs *fs, tfsd_node *n, size_t size, off_t off)
{
	if (!clip(tfs_tensor_f32_count(fs->model, (size_t)n->item, NULL) * 4, off, &size)) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	char *out = tfsd_thread_buf(1, size);
	int rc = out ? read_f32(fs, (size_t)n->item, (uint64_t)off, size, out) : -ENOMEM;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, out, size);
}

/* npy/<name>.npy past its header: header bytes (hlen of head), then the payload, raw
 * (pread from the source, like tensors/) or the f32 view.  cache_lock held; released. */
static void read_npy(fuse_req_t req, tfsd_fs *fs, tfsd_node *n, const char *head, uint64_t hlen,
		     size_t size, off_t off)
{
	const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);
	bool raw = n->raw_npy;
	uint64_t plen = raw ? t->nbytes : tfs_tensor_f32_count(fs->model, (size_t)n->item, NULL) * 4;
	char *out = NULL;
	size_t got = 0;
	if (clip(hlen + plen, off, &size) && (out = tfsd_thread_buf(1, size)) && (uint64_t)off < hlen) {
		got = (size_t)(hlen - (uint64_t)off);
		memcpy(out, head + off, got);
	}
	pthread_mutex_unlock(&fs->cache_lock);
	if ((uint64_t)off >= hlen + plen) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (!out) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	uint64_t poff = (uint64_t)off + got - hlen;
	if (raw) {
		tfs_error err;
		int64_t r = tfs_tensor_read_raw(fs->model, (size_t)n->item, poff, size - got,
						out + got, &err);
		if (r < 0)
			fuse_reply_err(req, -tfsd_errno(&err));
		else
			fuse_reply_buf(req, out, got + (size_t)r);
		return;
	}
	int rc = read_f32(fs, (size_t)n->item, poff, size - got, out + got);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, out, size);
}

/* index.json: the bytes at off, generated from the stream (the kernel bounds size). */
static void read_index(fuse_req_t req, tfsd_fs *fs, size_t size, off_t off)
{
	char *buf = malloc(size ? size : 1);
	size_t got = 0;
	tfs_index *s;
	tfs_error err;
	pthread_mutex_lock(&fs->cache_lock);
	int rc = buf ? tfsd_fs_index(fs, &s) : -ENOMEM;
	if (!rc && tfs_index_read(&got, s, buf, (uint64_t)off, size, &err))
		rc = tfsd_errno(&err);
	pthread_mutex_unlock(&fs->cache_lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, got ? buf : NULL, got);
	free(buf);
}

/* Generated content: a value's text, config.json, an npy header and what follows it. */
static void read_generated(fuse_req_t req, tfsd_fs *fs, tfsd_node *n, size_t size, off_t off)
{
	const tfs_buf *c;
	pthread_mutex_lock(&fs->cache_lock);
	int rc = tfsd_node_content(fs, n, &c);
	if (rc) {
		pthread_mutex_unlock(&fs->cache_lock);
		fuse_reply_err(req, -rc);
		return;
	}
	uint64_t hlen = c->len;
	if (n->kind == N_NPY && !((uint64_t)off < hlen && hlen - (uint64_t)off >= size)) {
		read_npy(req, fs, n, c->data, hlen, size, off);
		return;
	}
	size_t take = clip(hlen, off, &size) ? size : 0;
	fuse_reply_buf(req, take ? c->data + off : NULL, take);
	pthread_mutex_unlock(&fs->cache_lock);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	tfsd_fs *fs = fs_of(req);
	tfsd_handle *h = (tfsd_handle *)(uintptr_t)fi->fh;
	tfsd_node *n = h->node;

	if (h->writing && h->data_fd >= 0) {
		/* reading back a file being written: the staged bytes */
		reply_pread(req, h->data_fd, size, off);
		return;
	}
	if (h->image) { /* model.gguf / model.safetensors: the handle's own, no lock needed */
		tfsd_reply_image(req, fs, h->image->im, off, size);
		return;
	}
	pthread_rwlock_rdlock(&fs->lock);
	if (h->snap && (h->ver != n->ver || n->deleted)) {
		/* a commit (or a rename over it) replaced the bytes it opened: those, so that
		 * its inode's pages (another inode than the new bytes') are all of one value */
		if (clip(h->snap_len, off, &size))
			reply_pread(req, h->snap_fd, size, (off_t)h->snap_off + off);
		else
			fuse_reply_buf(req, NULL, 0);
	} else if ((n->deleted && n->kind == N_SCRATCH) ||
		   (n->item < 0 && n->kind != N_INDEX && n->kind != N_CONFIG && n->kind != N_SCRATCH)) {
		/* (a removed item's file reads its item's bytes, as the model still has them) */
		fuse_reply_buf(req, NULL, 0);
	} else if (n->kind == N_SCRATCH) {
		reply_pread(req, n->scratch_fd, size, off);
	} else if (n->kind == N_RAW) {
		const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);
		tfsd_reply_source(req, fs, t->src, t->offset, t->nbytes, off, size);
	} else if (n->kind == N_EXTRA) {
		const tfs_extra *x = tfs_model_extra(fs->model, (size_t)n->item);
		tfsd_reply_source(req, fs, x->src, x->offset, x->size, off, size);
	} else if (n->kind == N_F32) {
		read_f32_view(req, fs, n, size, off);
	} else if (n->kind == N_INDEX) {
		read_index(req, fs, size, off);
	} else if (n->kind == N_KEY || n->kind == N_CONFIG || n->kind == N_NPY ||
		   n->kind == N_HFFILE) {
		read_generated(req, fs, n, size, off);
	} else {
		fuse_reply_err(req, EISDIR);
	}
	pthread_rwlock_unlock(&fs->lock);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_namemax = 255;
	tfsd_fs *fs = fs_of(req);
	sv.f_files = D_COUNT + 3 + tfs_model_n_kv(fs->model) + 3 * tfs_model_n_tensors(fs->model) +
		     tfs_model_n_extras(fs->model);
	fuse_reply_statfs(req, &sv);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* large requests: the kernel sends reads of up to max_readahead, writes of max_write.
	 * Measured for the first read of a 256 MiB tensor (2 cores, kernel 6.18, hot source;
	 * ratio to the direct read, one run, noise about +-0.05): readahead_kb 1024 / 4096 /
	 * 16384: 0.21 / 0.26 / 0.25 (numpy), 0.20 / 0.22 / 0.22 (dd); threads 2 / 4 / 8: 0.25 /
	 * 0.21 / 0.27; without FUSE_CAP_SPLICE_READ 0.20; TFS_READ_MODE=mmap 0.20, splice 0.18
	 * (the daemon lacks CAP_SYS_RESOURCE, so libfuse cannot grow its pipe past
	 * pipe-max-size and falls back); splice with pipe-max-size raised to 4 MiB 0.27 / 0.32
	 * vs pread 0.25 / 0.27.  None is clearly better: every request costs three copies
	 * (pread, writev into the FUSE page cache, copy to the reader) against one direct. */
	conn->max_readahead = 1u << 20;
	conn->max_write = 1u << 20;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want |= FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	/* no atomic O_TRUNC on a rw mount: with it the kernel sets the file's size to 0 and
	 * drops its pages at the open, and every reader sees an empty file until the commit;
	 * without it the truncation comes as a setattr that the opening handle stages
	 * (tfsd_op_setattr), the size the kernel keeps being the one the reply carries */
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
}

const struct fuse_lowlevel_ops tfsd_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.getxattr = tfsd_op_getxattr,
	.listxattr = tfsd_op_listxattr,
	.statfs = op_statfs,
	.setattr = tfsd_op_setattr,
	.write = tfsd_op_write,
	.flush = tfsd_op_flush,
	.fsync = tfsd_op_fsync,
	.create = tfsd_op_create,
	.unlink = tfsd_op_unlink,
	.rename = tfsd_op_rename,
	.setxattr = tfsd_op_setxattr,
};
