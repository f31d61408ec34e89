/*
 * write.c - writing a model back in its own format: through its format's writer
 * (m->ops->write: gguf_write.c, safetensors_write.c, ollama_write.c), which lays files out as
 * images (image.c) and writes them through a commit (commit.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "write.h"
#include "write_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ==== writing a model ==== */

/*
 * Writes every file of m's new state to temporaries registered in c, fsyncs and validates
 * them; renames nothing.  On failure the caller aborts c (removing the temporaries).
 */
int tfs_model_write_prepare(tfs_model *m, const tfs_write_opts *o, tfs_commit *c,
			    tfs_error *err)
{
	static const tfs_write_opts none;
	if (!o)
		o = &none;
	return m->ops->write(m, o, c, err);
}

int tfs_model_write(tfs_model *m, const tfs_write_opts *o, tfs_error *err)
{
	tfs_commit *c;
	int rc;
	if (!m->changed && !(o && o->unchanged_too))
		return 0; /* nothing changed: nothing is written */
	if ((rc = tfs_commit_new(&c, err)))
		return rc;
	rc = tfs_model_write_prepare(m, o, c, err);
	if (!rc)
		rc = tfs_commit_apply(c, err);
	if (rc)
		tfs_commit_abort(c);
	tfs_commit_free(c);
	return rc;
}
