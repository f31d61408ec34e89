/*
 * by_format.c - what a model is asked that its format answers (format_ops.h): its form as
 * one file, and the driver's questions (fs/ never names a format).
 */
#include "model_impl.h"
#include "image_impl.h"

/* ==== the whole model as one file ==== */

const char *tfs_image_name(const tfs_model *m)
{
	return m->ops->image_name ? m->ops->image_name(m) : NULL;
}

const char *tfs_config_name(const tfs_model *m)
{
	return m->ops->config_name ? m->ops->config_name(m) : NULL;
}

int tfs_model_config_json(tfs_buf *out, const tfs_model *m, tfs_error *err)
{
	if (!m->ops->config_json)
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: this model has no config.json",
				     m->path);
	return m->ops->config_json(out, m, err);
}

int tfs_model_image_size(uint64_t *size, const tfs_model *m, tfs_error *err)
{
	int rc = m->ops->image_size ? m->ops->image_size(m, size, err) : TFS_PASSTHROUGH;
	if (rc != TFS_PASSTHROUGH)
		return rc;
	tfs_image *im;
	rc = tfs_model_image(&im, m, false, err);
	if (!rc)
		*size = tfs_image_size(im);
	tfs_image_free(im);
	return rc;
}

int tfs_model_image(tfs_image **out, const tfs_model *m, bool own_fds, tfs_error *err)
{
	int rc;
	*out = NULL;
	if (!m->ops->image)
		return tfs_error_set(err, TFS_E_UNSUPPORTED,
				     "%s: this model has no single-file form",
				     m->path);
	rc = m->ops->image(out, m, err);
	if (!rc && own_fds)
		rc = tfs_image_own_fds(*out, m, err);
	if (rc) {
		tfs_image_free(*out);
		*out = NULL;
	}
	return rc;
}

/* ==== the driver's questions ==== */

bool tfs_model_has_layers(const tfs_model *m)
{
	return m->ops->extras || m->n_x > 0;
}

int tfs_model_bytes_dtype(const tfs_model *m)
{
	return m->ops->bytes_dtype;
}

bool tfs_model_header_facts(const tfs_model *m)
{
	return m->ops->header_facts;
}

char *tfs_model_staging_home(const tfs_model *m)
{
	return m->ops->staging_home ? m->ops->staging_home(m) : NULL;
}

bool tfs_model_remote_read_only(const tfs_model *m)
{
	if (m->ops->remote_writable)
		return false;
	for (size_t i = 0; i < m->n_src; i++)
		if (tfs_source_is_remote(&m->src[i]))
			return true;
	return false;
}
