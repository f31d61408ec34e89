/*
 * source.h - the files a model's bytes live in, and reading them (public).
 */
#ifndef TFS_SOURCE_H
#define TFS_SOURCE_H

#include "../base/base.h"

typedef struct {
	char *path;            /* as opened */
	char *label;           /* what index.json calls it: shard file name, blob digest, ... */
	int fd;
	uint64_t size;
	const uint8_t *map;    /* read-only mapping of the whole file (NULL when size is 0); with
	                        * fd -1, the caller's bytes (tfs_model_open_mem), borrowed */
	int64_t mtime_sec, mtime_nsec;
	bool staged;           /* added by tfs_model_set_*_file; closed (fd -1, size 0, map NULL)
	                        * once no tensor or file refers to it any more */
	struct tfs_remote *remote; /* an http(s) source (fd -1; map holds its header only), or NULL */
} tfs_source;

/*
 * Reads [off, off+len) of a source into buf, whatever it is: a local file (pread), bytes in
 * memory, or a remote file (through its block cache).  0, or an error naming the source
 * (TFS_E_IO with EIO when a remote file cannot be read or changed on the server).
 */
int tfs_source_pread(const tfs_source *s, void *buf, uint64_t len, uint64_t off, tfs_error *err);
/* The same, for bytes of an item at [lo, hi) of the source (a tensor, a layer): a remote
 * source fetches and reads ahead within the item only. */
int tfs_source_pread_in(const tfs_source *s, void *buf, uint64_t len, uint64_t off,
			uint64_t lo, uint64_t hi, tfs_error *err);

/*
 * For a reader of a remote source that moves bytes out of its block cache's data file
 * (of an item at [lo, hi), as tfs_source_pread_in)
 * itself (splice, no copy): makes [off, off+len) present in the cache and gives *fd, a
 * descriptor of that file of the caller's own (the bytes sit at their offsets in the source)
 * that pins them: no mount sharing the cache punches their blocks until the caller closes
 * it.  0; 1 when no such descriptor can be had (read with tfs_source_pread instead); or an
 * error.  Local sources answer TFS_E_INVALID.
 */
int tfs_source_cache_ready(const tfs_source *s, uint64_t off, uint64_t len, uint64_t lo,
			   uint64_t hi, int *fd, tfs_error *err);

#endif
