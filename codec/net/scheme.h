/*
 * scheme.h - which sources are remote (public: fs/ asks it too).  The schemes themselves,
 * http://, https://, hf:// and s3://, are one table in scheme.c (scheme_impl.h).
 */
#ifndef TFS_SCHEME_H
#define TFS_SCHEME_H

#include <stdbool.h>

#include "../base/base.h"

/* Whether source names a remote file or directory (a row of the scheme table: http://,
 * https://, hf://, s3://) rather than a local path or an Ollama model name. */
bool tfs_is_remote(const char *source);

/* Checks value for the -o option name of a scheme's row (endpoint=, s3_addressing=: set by
 * name in tfs_open_opts, tfs_open_opt_set).  0; TFS_E_INVALID ("NAME=VALUE: why");
 * TFS_E_NOTFOUND when no scheme takes name. */
int tfs_remote_option_check(const char *name, const char *value, tfs_error *err);

#endif
