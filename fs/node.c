/*
 * node.c - what a node reads as: its attributes (mode, size), its generated content (a
 * value's text, an npy header, config.json, index.json as a stream), where a tensor's or
 * layer's bytes are.
 */
#include "fs.h"
#include "tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tfsd_fs_index(tfsd_fs *fs, tfs_index **out)
{
	if (!fs->index || fs->index_gen != fs->gen + 1) {
		tfs_index *s;
		tfs_error err;
		tfs_index_free(fs->index);
		fs->index = NULL;
		if (tfs_index_open(&s, fs->model, false, true, &err))
			return tfsd_errno(&err);
		fs->index = s;
		fs->index_gen = fs->gen + 1;
	}
	*out = fs->index;
	return 0;
}

/* Fills n->cache for the kinds whose content is generated. cache_lock held. */
int tfsd_node_content(tfsd_fs *fs, tfsd_node *n, const tfs_buf **out)
{
	tfs_error err;
	int rc = 0;
	if (n->cache.data && n->cache_gen == fs->gen + 1) {
		*out = &n->cache;
		return 0;
	}
	n->cache.len = 0;
	switch (n->kind) {
	case N_KEY: {
		const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)n->item);
		rc = tfs_value_format(&n->cache, kv->type, kv->data, kv->len, &err);
		if (!rc)
			rc = tfs_buf_append(&n->cache, "\n", 1);
		break;
	}
	case N_NPY:
		rc = tfs_npy_header(&n->cache, &n->raw_npy, fs->model, (size_t)n->item, &err);
		break;
	case N_CONFIG:
		rc = tfs_model_config_json(&n->cache, fs->model, &err);
		break;
	case N_HFFILE:
		rc = tfs_hf_repo_file(&n->cache, fs->model, (size_t)n->item, &err);
		break;
	default:
		return -EINVAL;
	}
	if (rc)
		return tfsd_errno(&err);
	if (!n->cache.data && tfs_buf_reserve(&n->cache, 0))
		return -ENOMEM;
	n->cache_gen = fs->gen + 1;
	*out = &n->cache;
	return 0;
}

/* The node's file size (computing and caching content where needed). */
static int node_size(tfsd_fs *fs, tfsd_node *n, uint64_t *size)
{
	const tfs_buf *c;
	int rc = 0;
	switch (n->kind) {
	case N_DIR:
		*size = 0;
		return 0;
	case N_RAW:
		*size = tfs_model_tensor(fs->model, (size_t)n->item)->nbytes;
		return 0;
	case N_F32:
		*size = tfs_tensor_f32_count(fs->model, (size_t)n->item, NULL) * 4;
		return 0;
	case N_EXTRA:
		*size = tfs_model_extra(fs->model, (size_t)n->item)->size;
		return 0;
	case N_MODEL: {
		tfsd_shared_image *si;
		if ((rc = tfsd_image_acquire(fs, n, &si)))
			return rc;
		*size = tfs_image_size(si->im);
		tfsd_image_release(fs, si);
		return 0;
	}
	case N_SCRATCH: {
		struct stat st;
		if (fstat(n->scratch_fd, &st) < 0)
			return -errno;
		*size = (uint64_t)st.st_size;
		return 0;
	}
	case N_INDEX: {
		tfs_index *s;
		pthread_mutex_lock(&fs->cache_lock);
		rc = tfsd_fs_index(fs, &s);
		if (!rc)
			*size = tfs_index_size(s);
		pthread_mutex_unlock(&fs->cache_lock);
		return rc;
	}
	case N_KEY:
	case N_CONFIG:
	case N_HFFILE:
	case N_NPY:
		pthread_mutex_lock(&fs->cache_lock);
		rc = tfsd_node_content(fs, n, &c);
		if (!rc) {
			*size = c->len;
			if (n->kind == N_NPY)
				*size += n->raw_npy
					 ? tfs_model_tensor(fs->model, (size_t)n->item)->nbytes
					 : tfs_tensor_f32_count(fs->model, (size_t)n->item, NULL) * 4;
		}
		pthread_mutex_unlock(&fs->cache_lock);
		return rc;
	}
	return -EINVAL;
}

int tfsd_node_attr(tfsd_fs *fs, tfsd_node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = tfsd_node_ino(n);
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	st->st_blksize = 1 << 20;
	if (n->kind == N_DIR) {
		st->st_mode = S_IFDIR | (tfsd_writable_dir(fs, n->dir) ? 0755 : 0555);
		st->st_nlink = 2;
		return 0;
	}
	uint64_t size = 0;
	int rc = n->item >= 0 || n->kind == N_INDEX || n->kind == N_CONFIG ||
			 n->kind == N_SCRATCH || n->kind == N_MODEL
		 ? node_size(fs, n, &size) : 0;
	if (rc)
		return rc;
	/* a view whose tensor cannot take numbers (an IQ2_XXS one without an imatrix, a type
	 * tensorfs cannot quantize) shows 0444; opening it for writing still says why */
	bool w = tfsd_writable_node(fs, n) &&
		 (tfsd_writable_dir(fs, n->dir) || (n->kind != N_F32 && n->kind != N_NPY) ||
		  tfs_tensor_numbers_writable(fs->model, (size_t)n->item, fs->imatrix, NULL));
	st->st_mode = S_IFREG | (w ? 0644 : 0444);
	st->st_nlink = 1;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	return 0;
}

/* The value text of key node n as it reads now. */
int tfsd_node_text(tfsd_fs *fs, tfsd_node *n, tfs_buf *out)
{
	const tfs_buf *c;
	pthread_mutex_lock(&fs->cache_lock);
	int rc = tfsd_node_content(fs, n, &c);
	if (!rc && tfs_buf_append(out, c->data, c->len))
		rc = -ENOMEM;
	pthread_mutex_unlock(&fs->cache_lock);
	return rc;
}

int32_t tfsd_node_bytes(tfsd_fs *fs, const tfsd_node *n, uint64_t *off, uint64_t *len)
{
	if (n->kind == N_RAW) {
		const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);
		*off = t->offset, *len = t->nbytes;
		return t->src;
	}
	const tfs_extra *x = tfs_model_extra(fs->model, (size_t)n->item);
	*off = x->offset, *len = x->size;
	return x->src;
}
