/*
 * cache.h - the on-disk block cache of remote files (codec/cache.c).
 *
 * One entry per version of a remote file, in the cache directory:
 *   1. <key>.data  a sparse file of the remote file's size; present blocks hold its bytes
 *   2. <key>.map   one byte per TFS_CACHE_BLOCK block: 1 = present in .data, 0 = not
 *   3. <hash of the URL>.last  the URL's newest validator (ETag, Last-Modified, size)
 * key is "<sha256 of the URL>-<sha256 of the URL and its validator>", so another version is
 * another entry, and opening one version removes the URL's other versions' entries.
 * A block's bytes are written before its map byte (one-byte pwrites, atomic), and a
 * block is evicted map byte first, then punched.  Readers pin the blocks they read
 * (tfs_cache_pin: an OFD read lock on the data file), check the map, then read; fetches pin
 * what they write until it is marked; eviction punches only blocks it can lock for writing
 * (never blocking on them).  Two mounts can share a directory and never read a hole.
 */
#ifndef TFS_CACHE_H
#define TFS_CACHE_H

#include "http.h"

#define TFS_CACHE_BLOCK (64u << 10)

typedef struct tfs_cache tfs_cache;

/* Opens or creates the entry of (url, v) in dir (created with its parents), and removes
 * the entries of url's other versions (a mount still using one keeps its open files).
 * cap: the directory's size limit in bytes (0: none). */
int tfs_cache_open(tfs_cache **out, const char *dir, const char *url, const tfs_validator *v,
		   uint64_t cap, tfs_error *err);
void tfs_cache_free(tfs_cache *c);
/* The size limit (0: none). */
uint64_t tfs_cache_cap(const tfs_cache *c);

/* Whether block b is present (checks the map file when the memory copy says no). */
bool tfs_cache_has(tfs_cache *c, uint64_t b);
/* Writes data at pos of the entry's data file. 0 or -1 (errno). */
int tfs_cache_write(tfs_cache *c, uint64_t pos, const void *data, size_t n);
/* Marks blocks [b0, b1) present (their bytes are written) and evicts what exceeds the cap. */
void tfs_cache_mark(tfs_cache *c, uint64_t b0, uint64_t b1);
/* Reads [off, off+len) (present blocks, pinned while read) into buf.  0; TFS_PASSTHROUGH
 * when a block is not there any more (another mount evicted it: fetch it again); or
 * TFS_E_IO. */
int tfs_cache_read(tfs_cache *c, void *buf, uint64_t off, uint64_t len, tfs_error *err);

/* Pins the blocks of [off, off+len): a descriptor of the data file of the caller's own
 * (a present block's bytes are at the remote file's offsets) holding a read lock on them
 * that stops every mount from punching them until it is closed.  Readers pin before they
 * check the map and read; fetches pin what they write until it is marked.  -1 (errno) when
 * it cannot be had (the entry's files were removed). */
int tfs_cache_pin(tfs_cache *c, uint64_t off, uint64_t len);
/* Whether every block of [off, off+len) is present, by the map file (another mount may
 * have evicted one since this one's memory copy said so); marks them used. */
bool tfs_cache_holds(tfs_cache *c, uint64_t off, uint64_t len);

/* Reloads the memory map of the blocks of [off, off+len) from the map file (after a read
 * that answered 1). */
void tfs_cache_resync(tfs_cache *c, uint64_t off, uint64_t len);
/* Drops every block of the entry (bytes that proved wrong: fetched again when read).  -1
 * when another mount holds some of them pinned, or the map cannot be emptied (nothing is
 * dropped then). */
int tfs_cache_forget(tfs_cache *c);

/* The newest validator cached for url (0), or -1. */
int tfs_cache_last_get(const char *dir, const char *url, tfs_validator *v);
void tfs_cache_last_put(const char *dir, const char *url, const tfs_validator *v);

/* The default directory: $XDG_CACHE_HOME/tensorfs or ~/.cache/tensorfs.  Allocated. */
char *tfs_cache_default_dir(void);

#endif
