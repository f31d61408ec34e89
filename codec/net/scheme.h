/*
 * scheme.h - which sources are remote (public: fs/ asks it too).  The schemes themselves,
 * http://, https://, hf:// and s3://, are one table in scheme.c (scheme_impl.h).
 */
#ifndef TFS_SCHEME_H
#define TFS_SCHEME_H

#include <stdbool.h>

/* Whether source names a remote file or directory (a row of the scheme table: http://,
 * https://, hf://, s3://) rather than a local path or an Ollama model name. */
bool tfs_is_remote(const char *source);

#endif
