/*
 * fs.h - the FUSE driver's shared state (fs/ only): the mount (tfsd_fs), its nodes and open
 * handles, and what every file of fs/ uses (util.c: the one errno mapping, the log of
 * refused changes, per-thread buffers).
 *
 * Errors: every function of fs/ returns 0 or a negative errno (-EIO); a codec error
 * becomes one in tfsd_errno (or tfsd_fail, which also logs it), and a handler replies
 * fuse_reply_err(req, -rc).  The one exception speaks codec's convention on purpose: a
 * function that takes a tfs_error *err to fill (tfsd_tree_build, namespace.c's rename and
 * unlink steps, numbers.c's stage_parts) returns a tfs_code and fills err with the message
 * the log will show, as the codec calls it makes do; its caller hands err to tfsd_fail (or
 * prints it) once.
 *
 * The other headers of fs/: tree.h (nodes, names, content), write.h (a writable mount's
 * handles, commits, scratch files, f32/ and npy/), ops.h (the handlers that ops.c's table
 * takes from other files), reply.h (a source's bytes as a reply).
 */
#ifndef TFSD_FS_H
#define TFSD_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>

#include "tensorfs.h"

/* Directories of the mount, in the order they are listed; D_HFSUB is a folder of hf/ (its
 * name the hf/ files': sentence-transformers' 1_Pooling), the others are the root's. */
typedef enum {
	D_ROOT = 0, D_METADATA, D_TENSORS, D_F32, D_NPY, D_LAYERS, D_HF, D_HFSUB, D_COUNT
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
	N_HFFILE,  /* hf/<file>: a small file of a GGUF model's Hugging Face form -> its index */
} tfsd_node_kind;

typedef struct tfsd_node {
	tfsd_node_kind kind;
	fuse_ino_t ino;
	tfsd_dir dir;           /* the directory holding it (for N_DIR: which directory it is) */
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

/* A computed view's -o option given: its name (the option table's row's) and value. */
typedef struct {
	const char *name;
	char *value;            /* allocated; a number (INT row) as %d prints it */
} tfsd_view_optval;

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
	int mmproj;             /* -o mmproj (convert): the repo's projector, mmproj.gguf */
	/* remote sources (http://, https://, hf://, s3://) */
	int connections;        /* -o connections=N */
	char *cache;            /* -o cache=DIR */
	char *cache_size;       /* -o cache_size=SIZE (bytes, or with K, M, G, T) */
	char *token_file;       /* -o token_file=FILE */
	char *cafile;           /* -o cafile=FILE */
	int timeout;            /* -o timeout=SECS */
	char *endpoint;         /* -o endpoint=URL: an S3 store's (s3://) */
	char *s3_addressing;    /* -o s3_addressing=path|virtual */
	/* the options of the computed views (the option table's V rows: outtype=, quantize=,
	 * imatrix=, quantize_threads=...), as given, in the order first given (a later value
	 * replaces an earlier one): cli.h's tfsd_view_value reads one, and tfsd_view_opts
	 * passes them all to codec (tfs_open_opts_set_view: codec/views/registry.c) */
	tfsd_view_optval *views;
	size_t n_views;
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
	bool view_from_journal; /* tensorfs repack: view options not given are the journal's */
	pthread_rwlock_t lock;  /* model + tree: read for lookups/reads, write for changes */
	pthread_mutex_t cache_lock;
	uint64_t gen;           /* bumped on every change: invalidates node caches */

	/* Nodes are made when first looked up (or created): a model of 10^6 keys has no node
	 * per key until something asks for it.  An item without a node is listed by its
	 * default name (tfsd_tree_default_name); one with a node, as its node says. */
	tfsd_node **nodes;      /* ino - 1 -> node (ino 1 = root); NULL: forgotten */
	size_t n_nodes, cap_nodes;
	size_t *free_slots;     /* slots of forgotten nodes, for new ones */
	size_t n_free, cap_free;
	tfsd_node **hash;       /* (dir, fname) -> node */
	tfsd_node **ihash;      /* (dir, claimed item) -> live node (tfsd_tree_owner) */
	size_t hash_cap;        /* of both */

	double timeout;         /* entry/attr timeout */
	struct timespec mtime;  /* the source's */
	uid_t uid;
	gid_t gid;
	tfsd_shared_image *image; /* the latest model file image (fs->image->gen), or NULL */
	tfsd_shared_image *view_image; /* the same of the model's GGUF view (model.gguf of a
	                                * Hugging Face repo) */
	tfsd_shared_image *hf_image; /* and of its Hugging Face form (hf/model.safetensors) */
	tfsd_shared_image *mmproj_image; /* ... of its projector (mmproj.gguf) */
	tfs_index *index;       /* index.json as a stream, while index_gen == gen + 1 (cache_lock) */
	uint64_t index_gen;
	char *status_path;      /* where the daemon reports the repack at unmount */
	int repack_rc;          /* result of the repack at unmount */
	tfs_error repack_err;
	struct fuse_session *se;
} tfsd_fs;

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
	int error;           /* tensors/layers: -errno of a failed write(), reported at close */
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

/* ==== util.c: shared by every file of fs/ (and calling none of them) ==== */
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
/* Per-thread buffer slot 0 or 1 of at least n bytes (NULL: out of memory). */
void *tfsd_thread_buf(int slot, size_t n);
/* Whether the first size bytes of file fd are [off, off+len) of local source s (a rewrite
 * of the same bytes is no change); false for a remote source. */
bool tfsd_same_bytes(int fd, uint64_t size, const tfs_source *s, uint64_t off, uint64_t len);
/* Copies [off, off+len) of file src to the start of dst (tfs_io_copy: copy_file_range, else
 * through memory); 0 or -errno. */
int tfsd_copy_range(int dst, int src, uint64_t off, uint64_t len);
/* Writes n bytes of buf at off of fd (tfs_io_pwrite; path for messages); 0 or -errno (a short
 * write is a full disk, -ENOSPC). */
int tfsd_pwrite(int fd, const char *path, uint64_t off, const void *buf, size_t n);
/* Frees a handle (NULL: nothing): its text, staged file (tfsd_handle_drop_data) and
 * snapshot fd. */
void tfsd_handle_free(tfsd_handle *h);
/* Closes the handle's staged file and removes it unless a commit handed it to the journal. */
void tfsd_handle_drop_data(tfsd_handle *h);

/* ==== what the commands (fs/cli/) use ==== */
/* tree.c: the mount's nodes, made from fs->model; freed (with the model file image and
 * index.json stream) by tfsd_tree_free. */
int tfsd_tree_build(tfsd_fs *fs, tfs_error *err);
void tfsd_tree_free(tfsd_fs *fs);
/* ops.c: the handlers */
extern const struct fuse_lowlevel_ops tfsd_ops;

#endif
