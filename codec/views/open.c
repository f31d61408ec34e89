/*
 * open.c - tfs_view_open: a model with its views (view.h), the rows of the view table
 * (registry.c) in order, each on what the ones before it made.
 */
#include "view.h"
#include "open.h"
#include "registry.h"

int tfs_view_open(tfs_model **out, const char *source, const tfs_open_opts *opts,
		  tfs_error *err)
{
	tfs_model *m = NULL;
	*out = NULL;
	int rc = tfs_model_open(&m, source, opts, err);
	for (size_t i = 0; !rc && i < tfs_n_views; i++)
		rc = tfs_view_table[i].open(&m, source, opts, err);
	if (rc) {
		tfs_model_free(m);
		return rc;
	}
	*out = m;
	return 0;
}
