/*
 * strmap.h - a string set: name -> index (codec-private).
 */
#ifndef TFS_STRMAP_H
#define TFS_STRMAP_H

#include "base.h"

/* ==== string set: name -> index, for duplicate checks and lookups ==== */
typedef struct {
	uint32_t *slots;  /* index + 1; 0 = empty */
	size_t cap;       /* power of two */
	size_t count;
} tfs_strmap;
/* names(ctx, idx) gives the name stored at idx (with its length). */
typedef const char *(*tfs_strmap_name_fn)(const void *ctx, uint32_t idx, size_t *len);
long tfs_strmap_get(const tfs_strmap *s, const char *name, size_t len, tfs_strmap_name_fn fn,
		    const void *ctx);
int tfs_strmap_put(tfs_strmap *s, const char *name, size_t len, uint32_t idx,
		   tfs_strmap_name_fn fn, const void *ctx);
void tfs_strmap_del(tfs_strmap *s, const char *name, size_t len, tfs_strmap_name_fn fn,
		    const void *ctx);
void tfs_strmap_free(tfs_strmap *s);

#endif
