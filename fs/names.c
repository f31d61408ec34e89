/*
 * names.c - the file names of the model's items: a key's, tensor's or layer's name encoded as
 * a file name (tfs_name_encode; npy/ adds .npy), and back, which item a file name lists.
 */
#include "fs.h"
#include "tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* name encoded as a file name, then suffix (the whole encoded when that is too long) */
static int encode_name(tfs_buf *b, const char *name, const char *suffix)
{
	b->len = 0;
	int rc = tfs_name_encode(b, name);
	if (!rc && suffix) {
		if (b->len + strlen(suffix) > 255) {
			tfs_buf full = { 0 };
			b->len = 0;
			rc = tfs_buf_printf(&full, "%s%s", name, suffix) ||
			     tfs_name_encode(b, full.data);
			tfs_buf_free(&full);
		} else {
			rc = tfs_buf_append(b, suffix, strlen(suffix));
		}
	}
	return rc ? -ENOMEM : 0;
}

size_t tfsd_tree_n_items(tfsd_fs *fs, tfsd_dir d)
{
	switch (d) {
	case D_METADATA:
		return tfs_model_n_kv(fs->model);
	case D_TENSORS:
	case D_F32:
	case D_NPY:
		return tfs_model_n_tensors(fs->model);
	case D_LAYERS:
		return tfs_model_n_extras(fs->model);
	default:
		return 0;
	}
}

int tfsd_tree_default_name(tfsd_fs *fs, tfsd_dir d, long i, tfs_buf *out)
{
	const tfs_model *m = fs->model;
	if (i < 0 || (size_t)i >= tfsd_tree_n_items(fs, d))
		return -ENOENT;
	if (d == D_METADATA) {
		const tfs_kv *kv = tfs_model_kv(m, (size_t)i);
		return kv->deleted ? -ENOENT : encode_name(out, kv->name, NULL);
	}
	if (d == D_LAYERS) {
		const tfs_extra *x = tfs_model_extra(m, (size_t)i);
		return x->deleted ? -ENOENT : encode_name(out, x->name, NULL);
	}
	const tfs_tensor *t = tfs_model_tensor(m, (size_t)i);
	if (t->deleted || (d == D_F32 && !tfs_tensor_has_f32(m, (size_t)i, NULL)) ||
	    (d == D_NPY && !tfs_npy_available(m, (size_t)i)))
		return -ENOENT;
	return encode_name(out, t->name, d == D_NPY ? ".npy" : NULL);
}

long tfsd_dir_item(tfsd_fs *fs, tfsd_dir d, const char *fname)
{
	tfs_buf name = { 0 };
	long i = -1;
	if (tfs_name_decode(&name, fname) == 0) {
		if (d == D_METADATA)
			i = tfs_model_find_kv(fs->model, name.data);
		else if (d == D_TENSORS)
			i = tfs_model_find_tensor(fs->model, name.data);
		else if (d == D_LAYERS)
			i = tfs_model_find_extra(fs->model, name.data);
	}
	tfs_buf_free(&name);
	return i;
}
