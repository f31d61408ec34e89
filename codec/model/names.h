/*
 * names.h - file names on the mount: escaping and unescaping (public).
 */
#ifndef TFS_NAMES_H
#define TFS_NAMES_H

#include "../base/base.h"

/*
 * File names on the mount.  A name is used as it is unless it cannot be a file
 * name: '%' and '/' always become %25 and %2F; "." and ".." become %2E and
 * %2E%2E; an encoded name longer than 255 bytes is cut to 200 bytes (never inside
 * an escape) and followed by "%~" and 16 hex digits of a hash of the full name.
 * tfs_name_decode undoes the escapes (not the shortening: those names are found
 * through the mount's table).  Both append to out.
 */
int tfs_name_encode(tfs_buf *out, const char *name);
int tfs_name_decode(tfs_buf *out, const char *file_name);

#endif
