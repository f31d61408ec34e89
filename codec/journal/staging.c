/*
 * staging.c - the public staging API: opening a staging directory for a model, and
 * recording each change.
 *
 * Every tfs_staging_<op> checks the change against the model, records it durably (its
 * data file fsynced first, then the journal replaced: journal.c), then applies it to the
 * model with the op table's apply (ops.c); an op the model refuses is taken out of the
 * journal again.  A set of an item drops the earlier sets it made dead (gc.c).
 */
#include "staging_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tfs_staging_lock_recovered(tfs_staging **out, const char *dir, tfs_error *err)
{
	tfs_staging *s;
	bool rolled;
	int rc = tfs_journal_lock(&s, dir, err);
	*out = NULL;
	if (rc)
		return rc;
	if ((rc = tfs_recover(s, &rolled, err)) == 0 && rolled)
		rc = tfs_error_set(err, TFS_E_INVALID,
				   "%s: an interrupted repack was finished; open the model again",
				   dir);
	if (rc) {
		tfs_staging_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int tfs_staging_open(tfs_staging **out, const char *dir, const tfs_model *m, const char *output,
		     tfs_error *err)
{
	tfs_staging *s;
	int rc = tfs_staging_lock_recovered(&s, dir, err);
	*out = NULL;
	if (rc)
		return rc;
	if ((rc = tfs_journal_bind(s, m, output, err))) {
		tfs_staging_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* ==== recording changes ==== */

/* Records op durably, then applies it to m; the op leaves the journal again when the
 * model refuses it. */
static int record_and_apply(tfs_staging *s, tfs_model *m, tfs_op *op, tfs_error *err)
{
	int rc = tfs_journal_record(s, tfs_op_encode(s, op), err);
	if (rc) {
		free(op->value);
		return rc;
	}
	if ((rc = tfs_op_apply(m, op, err)))
		return tfs_journal_unrecord(s, rc, err);
	return 0;
}

static int stage_kv(tfs_staging *s, tfs_model *m, const char *from, const char *key, uint32_t type,
		    const uint8_t *data, uint64_t len, tfs_error *err)
{
	char *path = NULL;
	uint8_t *copy = malloc(len ? (size_t)len : 1);
	int rc;
	if (!copy || len > TFS_MAX_KV_PAYLOAD) {
		free(copy);
		return len > TFS_MAX_KV_PAYLOAD ? tfs_error_set(err, TFS_E_INVALID, "value too large")
						: tfs_nomem(err);
	}
	memcpy(copy, data, (size_t)len);
	if ((rc = tfs_staging_new_data(s, &path, err)) ||
	    (rc = tfs_write_whole_file(path, data, (size_t)len, err)) ||
	    (rc = tfs_data_sync(s, path, err))) {
		free(copy);
		if (path)
			unlink(path);
		free(path);
		return rc;
	}
	tfs_op op = { .kind = from ? TFS_OP_REPLACE_KV : TFS_OP_SET_KV, .name = key, .from = from,
		      .type = type, .value = copy, .len = len, .data = path };
	rc = record_and_apply(s, m, &op, err);
	free(path);
	if (!rc && !from)
		tfs_journal_drop_superseded(s, TFS_OP_SET_KV, &key, 1);
	return rc;
}

int tfs_staging_set_kv(tfs_staging *s, tfs_model *m, const char *key, uint32_t type,
		       const uint8_t *data, uint64_t len, tfs_error *err)
{
	return stage_kv(s, m, NULL, key, type, data, len, err);
}

int tfs_staging_replace_kv(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			   uint32_t type, const uint8_t *data, uint64_t len, tfs_error *err)
{
	if (tfs_model_find_kv(m, from) < 0 || tfs_model_find_kv(m, to) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no key '%s'", m->path,
				     tfs_model_find_kv(m, from) < 0 ? from : to);
	return stage_kv(s, m, from, to, type, data, len, err);
}

/* Keys and tensors are deleted and renamed alike: what differs between the two. */
typedef struct {
	const char *what;
	tfs_op_kind del_op, rename_op;
	long (*find)(const tfs_model *m, const char *name);
} item_kind;

static const item_kind kv_kind = { "key", TFS_OP_DEL_KV, TFS_OP_RENAME_KV, tfs_model_find_kv };
static const item_kind tensor_kind = { "tensor", TFS_OP_DEL_TENSOR, TFS_OP_RENAME_TENSOR,
				       tfs_model_find_tensor };

static int del_item(tfs_staging *s, tfs_model *m, const item_kind *k, const char *name,
		    tfs_error *err)
{
	if (k->find(m, name) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no %s '%s'", m->path, k->what, name);
	tfs_op op = { .kind = k->del_op, .name = name };
	return record_and_apply(s, m, &op, err);
}

static int rename_item(tfs_staging *s, tfs_model *m, const item_kind *k, const char *from,
		       const char *to, bool replace, tfs_error *err)
{
	if (k->find(m, from) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no %s '%s'", m->path, k->what, from);
	if (!strcmp(from, to))
		return 0;
	replace = replace && k->find(m, to) >= 0;
	if (!replace && k->find(m, to) >= 0)
		return tfs_error_set(err, TFS_E_EXISTS, "%s: %s '%s' already exists", m->path,
				     k->what, to);
	tfs_op op = { .kind = k->rename_op, .name = to, .from = from, .replace = replace };
	return record_and_apply(s, m, &op, err);
}

int tfs_staging_del_kv(tfs_staging *s, tfs_model *m, const char *key, tfs_error *err)
{
	return del_item(s, m, &kv_kind, key, err);
}

int tfs_staging_rename_kv(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			  bool replace, tfs_error *err)
{
	return rename_item(s, m, &kv_kind, from, to, replace, err);
}

int tfs_staging_del_tensor(tfs_staging *s, tfs_model *m, const char *name, tfs_error *err)
{
	return del_item(s, m, &tensor_kind, name, err);
}

int tfs_staging_rename_tensor(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			      bool replace, tfs_error *err)
{
	return rename_item(s, m, &tensor_kind, from, to, replace, err);
}

int tfs_staging_del_extra(tfs_staging *s, tfs_model *m, const char *name, tfs_error *err)
{
	if (tfs_model_find_extra(m, name) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no file '%s'", m->path, name);
	tfs_op op = { .kind = TFS_OP_DEL_EXTRA, .name = name };
	return record_and_apply(s, m, &op, err);
}

/* Checks that path is a file of tfs_staging_new_data. */
static int staged_file(tfs_staging *s, const char *path, tfs_error *err)
{
	if (!tfs_data_rel(s, path))
		return tfs_error_set(err, TFS_E_INVALID,
				     "%s: not a file from tfs_staging_new_data", path);
	return 0;
}

int tfs_staging_set_tensor(tfs_staging *s, tfs_model *m, const char *name, int dtype,
			   uint32_t n_dims, const int64_t *ne, const char *data_path,
			   tfs_error *err)
{
	int rc = staged_file(s, data_path, err);
	if (rc)
		return rc;
	if (n_dims > TFS_MAX_DIMS)
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': too many dimensions", name);
	if ((rc = tfs_data_sync(s, data_path, err)))
		return rc;
	tfs_op op = { .kind = TFS_OP_SET_TENSOR, .name = name, .dtype = dtype, .n_dims = n_dims,
		      .ne = ne, .data = data_path };
	if ((rc = record_and_apply(s, m, &op, err)))
		return rc;
	tfs_journal_drop_superseded(s, TFS_OP_SET_TENSOR, &name, 1);
	return 0;
}

int tfs_staging_set_tensors(tfs_staging *s, tfs_model *m, const tfs_tensor_file *f, size_t n,
			    tfs_error *err)
{
	int rc;
	if (n == 0 || n > TFS_MAX_TENSOR_FILES)
		return tfs_error_set(err, TFS_E_INVALID, "%zu tensors in one change", n);
	for (size_t k = 0; k < n; k++) {
		if (!tfs_data_rel(s, f[k].path) || f[k].n_dims > TFS_MAX_DIMS)
			return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': not a staged file or "
					     "too many dimensions", f[k].name);
		if ((rc = tfs_data_sync(s, f[k].path, err)))
			return rc;
	}
	/* one op, written in one journal replace: all of them are staged, or none */
	tfs_op op = { .kind = TFS_OP_SET_TENSORS, .files = f, .n_files = n };
	if ((rc = record_and_apply(s, m, &op, err)))
		return rc;
	const char *names[TFS_MAX_TENSOR_FILES];
	for (size_t k = 0; k < n; k++)
		names[k] = f[k].name;
	tfs_journal_drop_superseded(s, TFS_OP_SET_TENSOR, names, n);
	return 0;
}

int tfs_staging_replace_tensor(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			       int dtype, uint32_t n_dims, const int64_t *ne, tfs_error *err)
{
	if (tfs_model_find_tensor(m, from) < 0 || tfs_model_find_tensor(m, to) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no tensor '%s'", m->path,
				     tfs_model_find_tensor(m, from) < 0 ? from : to);
	if (n_dims > TFS_MAX_DIMS)
		return tfs_error_set(err, TFS_E_INVALID, "tensor '%s': too many dimensions", to);
	tfs_op op = { .kind = TFS_OP_REPLACE_TENSOR, .name = to, .from = from, .dtype = dtype,
		      .n_dims = n_dims, .ne = ne };
	return record_and_apply(s, m, &op, err);
}

int tfs_staging_replace_extra(tfs_staging *s, tfs_model *m, const char *from, const char *to,
			      tfs_error *err)
{
	if (tfs_model_find_extra(m, from) < 0 || tfs_model_find_extra(m, to) < 0)
		return tfs_error_set(err, TFS_E_NOTFOUND, "%s: no file '%s'", m->path,
				     tfs_model_find_extra(m, from) < 0 ? from : to);
	tfs_op op = { .kind = TFS_OP_REPLACE_EXTRA, .name = to, .from = from };
	return record_and_apply(s, m, &op, err);
}

int tfs_staging_set_extra(tfs_staging *s, tfs_model *m, const char *name, const char *data_path,
			  tfs_error *err)
{
	int rc = staged_file(s, data_path, err);
	if (rc || (rc = tfs_data_sync(s, data_path, err)))
		return rc;
	tfs_op op = { .kind = TFS_OP_SET_EXTRA, .name = name, .data = data_path };
	if ((rc = record_and_apply(s, m, &op, err)))
		return rc;
	tfs_journal_drop_superseded(s, TFS_OP_SET_EXTRA, &name, 1);
	return 0;
}
