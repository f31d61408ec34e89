/* fs.h - the FUSE driver's shared state (fs/ only). */
#ifndef TFSD_FS_H
#define TFSD_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>

#include "tensorfs.h"

/* Directories of the mount, in the order they are listed. */
typedef enum {
	D_ROOT = 0, D_METADATA, D_TENSORS, D_F32, D_NPY, D_LAYERS, D_COUNT
} tfsd_dir;

typedef enum {
	N_DIR,     /* root or one of the directories */
	N_KEY,     /* metadata/<key>        -> kv index */
	N_RAW,     /* tensors/<name>        -> tensor index */
	N_F32,     /* f32/<name>            -> tensor index */
	N_NPY,     /* npy/<name>.npy        -> tensor index */
	N_EXTRA,   /* layers/<name>         -> extra index */
	N_INDEX,   /* index.json */
	N_CONFIG,  /* config.json beside an mlx-lm model.safetensors */
	N_SCRATCH, /* an editor's temporary in metadata/, tensors/ or layers/ (scratch.c) */
	N_MODEL,   /* model.gguf / model.safetensors: the whole model as one file */
} tfsd_node_kind;

typedef struct tfsd_node {
	tfsd_node_kind kind;
	fuse_ino_t ino;
	tfsd_dir dir;            /* the directory holding it (for N_DIR: which directory it is) */
	long item;              /* kv / tensor / extra index, -1 for none */
	char *fname;            /* encoded file name */
	bool deleted;
	uint64_t nlookup;       /* kernel references (forget) */
	/* cached content: value text, npy header, index.json; valid while cache_gen matches */
	tfs_buf cache;
	uint64_t cache_gen;
	bool raw_npy;           /* npy payload is the raw bytes */
	/* a write in progress (rw mounts) */
	int pend_dtype;          /* a new tensor not yet written: its declared dtype (-1: none) */
	uint32_t pend_ndims;     /* and shape (pend_shape: whether declared) */
	int64_t pend_ne[TFS_MAX_DIMS];
	bool pend_shape;
	char *pend_type;         /* a key's type declared with user.tensorfs.type (scratch files) */
	bool typed;              /* its type, dtype or shape was set explicitly (setxattr) */
	/* N_SCRATCH: the bytes, in an unjournaled file of the staging directory's data/;
	 * origin: the item it was renamed from (kept in the model, unlisted), or -1 */
	int scratch_fd;
	char *scratch_path;
	long origin;
	/* the last handle opened for writing, and the thread that opened it: without
	 * FUSE_CAP_ATOMIC_O_TRUNC the kernel sends an open's O_TRUNC as a setattr(size 0)
	 * without the handle, from the same thread (fs->cache_lock guards both) */
	struct tfsd_handle *opener;
	pid_t opener_tid;
	/* tensors/ and layers/ of a rw mount: bumped at each commit of new bytes, and part of
	 * the inode number (tfsd_node_ino), so that the kernel gives the new bytes a new inode
	 * and a new page cache, and never mixes pages of the old bytes with the new */
	uint32_t ver;
	struct tfsd_node *hnext; /* hash chain by (dir, fname) */
	struct tfsd_node *inext; /* hash chain by (dir, item it claims), while indexed */
	bool indexed;
} tfsd_node;

typedef struct {
	char *source;
	char *mountpoint;
	char *staging;          /* -o staging= */
	char *output;           /* -o output= */
	int rw;                 /* -o rw (or writable) */
	int writable;           /* -o writable: rw also under mount(8) */
	int verify;             /* -o verify */
	int foreground;         /* -f */
	int debug;              /* -d */
	int single;             /* -s */
	int threads;            /* -o threads=N */
	int readahead_kb;       /* -o readahead_kb=N (0: leave the kernel's) */
	int nonempty;           /* -o nonempty: mount over a non-empty directory or a mount */
	/* remote sources (http://, https://, hf://) */
	int connections;        /* -o connections=N */
	char *cache;            /* -o cache=DIR */
	char *cache_size;       /* -o cache_size=SIZE (bytes, or with K, M, G, T) */
	char *token_file;       /* -o token_file=FILE */
	char *cafile;           /* -o cafile=FILE */
	int timeout;            /* -o timeout=SECS */
	char *imatrix;          /* -o imatrix=FILE: llama.cpp's importance matrix (IQ types) */
} tfsd_opts;

/* The model as one file, as it was at one generation; shared by the handles that read it. */
typedef struct {
	tfs_image *im;
	uint64_t gen;
	int refs;
} tfsd_shared_image;

typedef struct tfsd_fs {
	tfsd_opts opts;
	tfs_model *model;
	tfs_imatrix *imatrix;   /* -o imatrix=FILE, or NULL */
	tfs_staging *staging;
	pthread_rwlock_t lock;  /* model + tree: read for lookups/reads, write for changes */
	pthread_mutex_t cache_lock;
	uint64_t gen;           /* bumped on every change: invalidates node caches */

	/* Nodes are made when first looked up (or created): a model of 10^6 keys has no node
	 * per key until something asks for it.  An item without a node is listed by its
	 * default name (tfsd_tree_default_name); one with a node, as its node says. */
	tfsd_node **nodes;       /* ino - 1 -> node (ino 1 = root); NULL: forgotten */
	size_t n_nodes, cap_nodes;
	size_t *free_slots;     /* slots of forgotten nodes, for new ones */
	size_t n_free, cap_free;
	tfsd_node **hash;        /* (dir, fname) -> node */
	tfsd_node **ihash;       /* (dir, claimed item) -> live node (tfsd_tree_owner) */
	size_t hash_cap;        /* of both */

	double timeout;         /* entry/attr timeout */
	struct timespec mtime;  /* the source's */
	uid_t uid;
	gid_t gid;
	tfsd_shared_image *image; /* the latest model file image (fs->image->gen), or NULL */
	tfs_index *index;       /* index.json as a stream, while index_gen == gen + 1 (cache_lock) */
	uint64_t index_gen;
	char *status_path;      /* where the daemon reports the repack at unmount */
	int repack_rc;          /* result of the repack at unmount */
	tfs_error repack_err;
	struct fuse_session *se;
} tfsd_fs;

/* tree.c */
int tfsd_tree_build(tfsd_fs *fs, tfs_error *err);
void tfsd_tree_free(tfsd_fs *fs);
/* The node of inode number ino, whatever its version. */
tfsd_node *tfsd_tree_get(tfsd_fs *fs, fuse_ino_t ino);
/* The inode number the kernel knows n by now: its slot, and its version (n->ver). */
fuse_ino_t tfsd_node_ino(const tfsd_node *n);
/* The node of ino unless it was deleted. */
tfsd_node *tfsd_live_node(tfsd_fs *fs, fuse_ino_t ino);
/* The node named fname in dir, if it has one (no node is made). */
tfsd_node *tfsd_tree_lookup(tfsd_fs *fs, tfsd_dir dir, const char *fname);
/* The item of dir listed by its default name fname without a node yet, or -1. */
long tfsd_tree_unmade_item(tfsd_fs *fs, tfsd_dir dir, const char *fname);
/* The node named fname in dir, made now if an item is listed by that name without one
 * (fs->lock held for writing); NULL: none. */
tfsd_node *tfsd_tree_find(tfsd_fs *fs, tfsd_dir dir, const char *fname);
/* The live node that lists item of directory d (a view's node for D_F32/D_NPY), or NULL;
 * *hidden (may be NULL) tells whether a scratch file took the item's place (mv x x~). */
tfsd_node *tfsd_tree_owner(tfsd_fs *fs, tfsd_dir d, long item, bool *hidden);
/* Item i of directory d's file name when it has no node: its model name, encoded (+ .npy
 * in npy/); -ENOENT when the model lists no such file (deleted, no f32 view). */
int tfsd_tree_default_name(tfsd_fs *fs, tfsd_dir d, long i, tfs_buf *out);
/* The number of item slots of directory d (deleted ones included). */
size_t tfsd_tree_n_items(tfsd_fs *fs, tfsd_dir d);
/* Before changing a node's kind, item or origin: take it out of the item index; after:
 * put it back. */
void tfsd_tree_unindex(tfsd_fs *fs, tfsd_node *n);
void tfsd_tree_index(tfsd_fs *fs, tfsd_node *n);
/* The kernel forgot n references to ino: a node it no longer knows that the model can
 * make again as it is (an item's, by its default name, with no state of its own) is
 * freed.  fs->lock held for writing. */
void tfsd_tree_forget(tfsd_fs *fs, fuse_ino_t ino, uint64_t n);
/* Adds a node for an item; returns its ino (0 on allocation failure). */
fuse_ino_t tfsd_tree_add(tfsd_fs *fs, tfsd_node_kind kind, tfsd_dir dir, long item, const char *fname);
void tfsd_tree_unlink(tfsd_fs *fs, tfsd_node *n);
/* Closes and removes n's scratch file, if it has one (n stays as it is otherwise). */
void tfsd_scratch_drop(tfsd_node *n);
int tfsd_tree_rename(tfsd_fs *fs, tfsd_node *n, const char *fname);
/* Adds the tensors/, f32/, npy/ entries of tensor i. */
int tfsd_tree_add_tensor(tfsd_fs *fs, long i, bool with_raw);
/* The node's attributes: mode, size, times, owner; -errno on failure. */
int tfsd_node_attr(tfsd_fs *fs, tfsd_node *n, struct stat *st);
/* The node's file size (computing and caching content where needed); -errno on failure. */
int tfsd_node_size(tfsd_fs *fs, tfsd_node *n, uint64_t *size);
/* The node's cached content (value text, npy header, config.json); call with cache_lock held. */
int tfsd_node_content(tfsd_fs *fs, tfsd_node *n, const tfs_buf **out);
/* index.json of the model as it is now, as a stream (opened again after a change: its
 * sizing pass is the first stat's cost); call with cache_lock held.  -errno. */
int tfsd_fs_index(tfsd_fs *fs, tfs_index **out);
/* Appends key node n's value text as it reads now; -errno. */
int tfsd_node_text(tfsd_fs *fs, tfsd_node *n, tfs_buf *out);
/* Where tensor or layer node n's bytes are: [*off, +*len) of the returned source. */
int32_t tfsd_node_bytes(tfsd_fs *fs, const tfsd_node *n, uint64_t *off, uint64_t *len);
/* The model file as it is now (a reference; built when the model changed since the last
 * one); fs->lock held for reading.  -errno. */
int tfsd_image_acquire(tfsd_fs *fs, tfsd_shared_image **out);
void tfsd_image_release(tfsd_fs *fs, tfsd_shared_image *si);

/* What an open file handle carries (fi->fh). */
typedef struct tfsd_handle {
	tfsd_node *node;
	bool writing;
	bool direct;         /* its writes bypass the kernel's page cache (direct_io): other
			      * readers keep the committed bytes and size until the commit */
	bool dirty;
	bool wrote;          /* a write() arrived (not only an O_TRUNC) */
	bool failed;         /* a write() was refused: nothing of this handle is committed */
	bool scratch;        /* opened on a scratch file: reads and writes go to its file */
	tfsd_shared_image *image; /* N_MODEL: the model file as it was when opened */
	int error;           /* tensors/layers: errno of a failed write(), reported at close */
	tfs_buf text;        /* keys: the value text being written */
	/* tensors/layers: the staged bytes, created at the first write (or at an O_TRUNC open)
	 * from the current bytes; owned by the handle (removed when it ends) until a commit
	 * hands the file to the journal, after which the handle never writes it again
	 * (data_fd -1: the next write stages a new copy) */
	int data_fd;
	char *data_path;
	uint64_t data_size;
	/* a reader of tensors/ or layers/ on a rw mount: the bytes as they were when it
	 * opened ([snap_off, +snap_len) of snap_fd, a copy of the source's fd), which it reads
	 * once a commit made them old (node->ver != ver): its inode's pages stay of one value */
	bool snap;
	int snap_fd;
	uint64_t snap_off, snap_len;
	uint32_t ver;
} tfsd_handle;

/* util.c: shared by ops.c, tree.c, write.c and scratch.c (and calling none of them) */
/* The one place a codec error becomes an errno: a negative one (-EIO), as every function of
 * fs/ returns them (handlers reply fuse_reply_err(req, -rc)); 0 for TFS_OK. */
int tfsd_errno(const tfs_error *err);
/* Logs a refused change (stderr with -f, else syslog; user.tensorfs.last_error) and returns
 * its -errno. */
int tfsd_fail(tfsd_fs *fs, const tfs_error *err);
/* The last refused change's message (-ENODATA: none yet). */
int tfsd_last_error(tfs_buf *out);
bool tfsd_writable_dir(const tfsd_fs *fs, tfsd_dir d);
/* Whether file node n can be opened for writing (a rw mount: files of the writable
 * directories, and the f32/ and npy/ views). */
bool tfsd_writable_node(const tfsd_fs *fs, const tfsd_node *n);

/* ==== f32/ and npy/ of a rw mount (numbers.c) ==== */
/* Opening a view for writing: refused (logged, -errno) when its tensor cannot be written as
 * numbers. */
int tfsd_numbers_start(tfsd_fs *fs, tfsd_handle *h);
/* Fills the handle's new staged file with the view's current bytes (sets data_size). */
int tfsd_numbers_copy(tfsd_fs *fs, tfsd_handle *h);
/* Checks the staged view and journals the tensor's new stored bytes; 0 or -errno. */
int tfsd_numbers_commit(tfsd_fs *fs, tfsd_handle *h);
/* Per-thread scratch buffer slot 0 or 1 of at least n bytes (NULL: out of memory). */
void *tfsd_thread_buf(int slot, size_t n);
/* Whether the first size bytes of file fd are [off, off+len) of local source s (a rewrite
 * of the same bytes is no change); false for a remote source. */
bool tfsd_same_bytes(int fd, uint64_t size, const tfs_source *s, uint64_t off, uint64_t len);
/* Copies [off, off+len) of file src to the start of dst (copy_file_range, else through
 * memory); 0 or -errno. */
int tfsd_copy_range(int dst, int src, uint64_t off, uint64_t len);

/* ops.c */
void tfsd_reply_entry(fuse_req_t req, tfsd_fs *fs, tfsd_node *n);

/* scratch.c: editors' temporary files (sedXXXXXX, .x.swp, x~, tmpXXXXXXXX, ...) */
/* Whether fname in directory d names a scratch file: an editor's temporary that names no
 * item of the model. */
bool tfsd_scratch_name(tfsd_fs *fs, tfsd_dir d, const char *fname);
/* Makes n a scratch file: empty, or (from_item) holding its item's current bytes, the
 * item staying in the model unlisted (n->origin).  Call with fs->lock held for writing. */
int tfsd_scratch_make(tfsd_fs *fs, tfsd_node *n, bool from_item);
/* Reads all of n's scratch bytes (at most max) into out; -errno. */
int tfsd_scratch_read_all(tfsd_node *n, tfs_buf *out, uint64_t max);
/* The live model item of the decoded file name in directory d, or -1. */
long tfsd_dir_item(tfsd_fs *fs, tfsd_dir d, const char *fname);
/* The listed node of item in directory d (not a view), or NULL. */
tfsd_node *tfsd_item_node(tfsd_fs *fs, tfsd_dir d, long item);

/* write.c: the handlers of a writable mount */
void tfsd_handle_free(tfsd_handle *h);
int tfsd_start_write(tfsd_fs *fs, tfsd_handle *h, bool trunc);
/* Closes the handle's staged file and removes it unless a commit handed it to the journal. */
void tfsd_handle_drop_data(tfsd_handle *h);
/* Parses/journals what the handle wrote (at flush, fsync and release); -errno. */
int tfsd_handle_commit(tfsd_fs *fs, tfsd_handle *h);
void tfsd_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		    struct fuse_file_info *fi);
void tfsd_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi);
void tfsd_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfsd_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void tfsd_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		   struct fuse_file_info *fi);
void tfsd_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfsd_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		   const char *newname, unsigned int flags);
void tfsd_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		     size_t size, int flags);

extern const struct fuse_lowlevel_ops tfsd_ops;

/* mount.c */
/* by_mount8: called by mount(8), which passes "rw" unless told "ro": then only
 * -o writable makes the mount writable. */
int tfsd_mount_main(int argc, char **argv, bool by_mount8);
int tfsd_unmount_main(int argc, char **argv);
int tfsd_repack_main(int argc, char **argv);
int tfsd_info_main(int argc, char **argv);

#endif
