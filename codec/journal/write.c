/*
 * write.c - writing a model back in its own format: the dispatcher over the format writers
 * (gguf_write.c, safetensors_write.c, ollama_write.c), which lay files out as images
 * (image.c) and write them through commits (commit.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "write.h"
#include "layout.h"
#include "commit.h"

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
	switch (m->format) {
	case TFS_FMT_GGUF: {
		char *final = tfs_output_path(m, o);
		const char *tmp;
		int fd, rc;
		if (!final)
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		rc = tfs_commit_add(c, final, &fd, &tmp, err);
		free(final);
		if (rc)
			return rc;
		if ((rc = tfs_gguf_write(m, fd, tmp, o, err)) || (rc = tfs_commit_seal(c, err)))
			return rc;
		tfs_error e2 = { 0 };
		if ((rc = tfs_gguf_validate(m, tmp, &e2)))
			return tfs_error_set(err, rc,
					     "the new file does not read back as written (%s); "
					     "nothing was replaced", e2.msg);
		return 0;
	}
	case TFS_FMT_SAFETENSORS:
		return tfs_safetensors_write(m, o, c, err);
	case TFS_FMT_OLLAMA:
		return tfs_ollama_write(m, o, c, err);
	}
	return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: unknown format", m->path);
}

int tfs_model_write(tfs_model *m, const tfs_write_opts *o, tfs_error *err)
{
	tfs_commit *c;
	int rc;
	if (!m->changed)
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

/* ==== the whole model as one file ==== */

const char *tfs_image_name(const tfs_model *m)
{
	if (tfs_model_gguf_encoded(m))
		return "model.gguf";
	if (m->format == TFS_FMT_SAFETENSORS || tfs_mlx_exportable(m))
		return "model.safetensors";
	return NULL;
}

int tfs_model_image_size(const tfs_model *m, uint64_t *size, tfs_error *err)
{
	if (tfs_model_gguf_encoded(m))
		return tfs_gguf_image_size(m, size, err);
	tfs_image *im;
	int rc = tfs_model_image(&im, m, false, err);
	if (!rc)
		*size = tfs_image_size(im);
	tfs_image_free(im);
	return rc;
}

int tfs_model_image(tfs_image **out, const tfs_model *m, bool own_fds, tfs_error *err)
{
	int rc;
	*out = NULL;
	if (tfs_model_gguf_encoded(m))
		rc = tfs_gguf_image(out, m, err);
	else if (m->format == TFS_FMT_SAFETENSORS)
		rc = tfs_st_image_all(out, m, err);
	else if (m->format == TFS_FMT_OLLAMA)
		rc = tfs_mlx_image(out, m, err);
	else
		return tfs_error_set(err, TFS_E_UNSUPPORTED,
				     "%s: this model has no single-file form",
				     m->path);
	if (!rc && own_fds)
		rc = tfs_image_own_fds(*out, m, err);
	if (rc) {
		tfs_image_free(*out);
		*out = NULL;
	}
	return rc;
}
