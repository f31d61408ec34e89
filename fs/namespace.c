/*
 * namespace.c - create, unlink and rename on a writable mount.
 *
 * A create makes a new key (an empty string until written), tensor or layer (in the model
 * once its bytes are closed), or a scratch file (an editor's temporary, scratch.c).  A
 * rename moves an item to a new name, onto another item (one journal op: the value read
 * again as the target's type), to a scratch name (the item kept, unlisted), or makes a
 * scratch file's bytes an item: how editors save.  Every change is journaled at once.
 */
#include "fs.h"
#include "ops.h"
#include "tree.h"
#include "write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The parent directory node of a change, checked writable. */
static int change_dir(tfsd_fs *fs, fuse_ino_t parent, tfsd_node **out)
{
	tfsd_node *p = tfsd_live_node(fs, parent);
	if (!p)
		return -ENOENT;
	if (p->kind != N_DIR)
		return -ENOTDIR;
	if (!fs->opts.rw)
		return -EROFS;
	if (!tfsd_writable_dir(fs, p->dir))
		return -EACCES;
	*out = p;
	return 0;
}

/* The node a create makes for name in directory d (fs->lock held for writing): the item of
 * that name when the model still has it unlisted (renamed to a scratch name by an editor:
 * it is written again, keeping its type); a scratch file; a new key (an empty string until
 * written); or a new tensor or layer (in the model once its bytes are closed). */
static int create_node(tfsd_fs *fs, tfsd_dir d, const char *name, tfsd_node **out)
{
	static const tfsd_node_kind kinds[D_COUNT] = {
		[D_METADATA] = N_KEY, [D_TENSORS] = N_RAW, [D_LAYERS] = N_EXTRA,
	};
	tfs_error err;
	tfs_buf key = { 0 };
	long item = tfsd_dir_item(fs, d, name);
	bool scratch = item < 0 && tfsd_scratch_name(fs, d, name);
	int rc = 0;
	if (tfs_name_decode(&key, name) || strlen(name) > 255)
		rc = -EINVAL;
	if (!rc && item < 0 && !scratch && d == D_METADATA) {
		uint8_t *empty = calloc(1, 8);
		rc = empty ? tfs_staging_set_kv(fs->staging, fs->model, key.data, TFS_GGUF_STRING,
						empty, 8, &err) : 0;
		rc = !empty ? -ENOMEM : rc ? tfsd_fail(fs, &err) : 0;
		free(empty);
		item = rc ? -1 : tfs_model_find_kv(fs->model, key.data);
	}
	tfs_buf_free(&key);
	if (rc)
		return rc;
	fuse_ino_t ino = tfsd_tree_add(fs, kinds[d], d, item, name);
	tfsd_node *n = ino ? tfsd_tree_get(fs, ino) : NULL;
	if (!n)
		return -ENOMEM;
	if (scratch && (rc = tfsd_scratch_make(fs, n, false))) {
		tfsd_tree_unlink(fs, n);
		return rc;
	}
	*out = n;
	return 0;
}

void tfsd_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		    struct fuse_file_info *fi)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_node *p, *n = NULL;
	int rc;

	pthread_rwlock_wrlock(&fs->lock);
	rc = change_dir(fs, parent, &p);
	if (!rc && tfsd_tree_find(fs, p->dir, name))
		rc = -EEXIST;
	if (!rc)
		rc = create_node(fs, p->dir, name, &n);
	if (!rc)
		fs->gen++;
	pthread_rwlock_unlock(&fs->lock);

	tfsd_handle *h = NULL;
	if (!rc && !(h = calloc(1, sizeof(*h))))
		rc = -ENOMEM;
	if (!rc) {
		h->node = n;
		h->data_fd = -1;
		rc = tfsd_start_write(fs, h, true);
		h->dirty = false; /* an empty new tensor is only recorded once written */
	}
	if (rc) {
		tfsd_handle_free(h);
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = tfsd_node_ino(n);
	e.attr.st_ino = e.ino;
	e.attr.st_mode = S_IFREG | 0644;
	e.attr.st_nlink = 1;
	e.attr.st_uid = fs->uid;
	e.attr.st_gid = fs->gid;
	e.attr_timeout = e.entry_timeout = fs->timeout;
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 0;
	__atomic_add_fetch(&n->nlookup, 1, __ATOMIC_RELAXED);
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		tfsd_handle_free(h);
}

/* Takes tensor item's f32/ and npy/ entries out of the tree. */
static void unlink_views(tfsd_fs *fs, long item)
{
	for (size_t k = 0; item >= 0 && k < fs->n_nodes; k++) {
		tfsd_node *v = fs->nodes[k];
		if (v && !v->deleted && v->item == item && (v->kind == N_F32 || v->kind == N_NPY))
			tfsd_tree_unlink(fs, v);
	}
}

/* Renames tensor item's f32/ and npy/ entries after its tensors/ entry's new name. */
static void rename_views(tfsd_fs *fs, long item, const char *newname)
{
	for (size_t k = 0; item >= 0 && k < fs->n_nodes; k++) {
		tfsd_node *v = fs->nodes[k];
		if (!v || v->deleted || v->item != item)
			continue;
		if (v->kind == N_F32) {
			tfsd_tree_rename(fs, v, newname);
		} else if (v->kind == N_NPY) {
			tfs_buf npy = { 0 };
			if (tfs_buf_printf(&npy, "%s.npy", newname) == 0)
				tfsd_tree_rename(fs, v, npy.data);
			tfs_buf_free(&npy);
		}
	}
}

/* The model name of item in directory d (borrowed). */
static const char *item_name(tfsd_fs *fs, tfsd_dir d, long item)
{
	return d == D_METADATA  ? tfs_model_kv(fs->model, (size_t)item)->name
	       : d == D_TENSORS ? tfs_model_tensor(fs->model, (size_t)item)->name
				: tfs_model_extra(fs->model, (size_t)item)->name;
}

/* Deletes item of directory d from the model (journaled). */
static int delete_item(tfsd_fs *fs, tfsd_dir d, long item, tfs_error *err)
{
	const char *name = item_name(fs, d, item);
	return d == D_METADATA  ? tfs_staging_del_kv(fs->staging, fs->model, name, err)
	       : d == D_TENSORS ? tfs_staging_del_tensor(fs->staging, fs->model, name, err)
				: tfs_staging_del_extra(fs->staging, fs->model, name, err);
}

/*
 * Removes node n.  A scratch file made by renaming an item away (`mv x x~`) takes the
 * item with it when nothing was written under the item's name since (`rm x~`); an
 * editor that saved a new x in between keeps it.
 */
static int remove_node(tfsd_fs *fs, tfsd_node *n, tfs_error *err)
{
	long item = n->kind == N_SCRATCH ? n->origin : n->item;
	bool del = item >= 0 && (n->kind != N_SCRATCH || !tfsd_item_node(fs, n->dir, item));
	int rc = del ? delete_item(fs, n->dir, item, err) : 0;
	if (rc)
		return rc;
	if (del && n->dir == D_TENSORS)
		unlink_views(fs, item);
	tfsd_tree_unlink(fs, n);
	fs->gen++;
	return 0;
}

void tfsd_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_node *p, *n = NULL;
	tfs_error err;
	pthread_rwlock_wrlock(&fs->lock);
	int rc = change_dir(fs, parent, &p);
	if (!rc && !(n = tfsd_tree_find(fs, p->dir, name)))
		rc = -ENOENT;
	if (!rc && remove_node(fs, n, &err))
		rc = tfsd_fail(fs, &err);
	pthread_rwlock_unlock(&fs->lock);
	fuse_reply_err(req, -rc);
}

/* ==== rename: a new name, a scratch name, or onto an existing item ==== */

/* "<dir>/<file>: <msg>" into err as code. */
static int fail_at(tfs_error *err, int code, const tfsd_node *n, const char *fname, const char *msg)
{
	static const char *const dn[D_COUNT] = { [D_METADATA] = "metadata", [D_TENSORS] = "tensors",
						 [D_LAYERS] = "layers" };
	char m[TFS_ERRMSG_MAX];
	snprintf(m, sizeof(m), "%s", msg);
	return tfs_error_set(err, code, "%s/%.200s: %.700s", dn[n->dir] ? dn[n->dir] : "?", fname, m);
}

/*
 * The payload of key text parsed as type_name, journaled as the new value of key `to`
 * (set, or with from: replacing to and deleting from in one op).  A value equal to to's
 * current one is no change (with no from).
 */
static int stage_key_text(tfsd_fs *fs, const tfsd_node *n, const char *from, const char *to,
			  const char *fname, const char *type_name, const char *text, size_t len,
			  tfs_error *err)
{
	uint8_t *data = NULL;
	uint64_t dlen;
	uint32_t type;
	int rc = tfs_value_parse(&data, &dlen, &type, type_name, text, len, err);
	if (rc)
		return fail_at(err, rc, n, fname, err->msg);
	long cur = tfs_model_find_kv(fs->model, to);
	const tfs_kv *kv = cur >= 0 ? tfs_model_kv(fs->model, (size_t)cur) : NULL;
	if (!from && kv && kv->type == type && kv->len == dlen && !memcmp(kv->data, data, dlen))
		rc = 0;
	else if (from)
		rc = tfs_staging_replace_kv(fs->staging, fs->model, from, to, type, data, dlen, err);
	else
		rc = tfs_staging_set_kv(fs->staging, fs->model, to, type, data, dlen, err);
	free(data);
	return rc;
}

/* The type name of key item (into b). */
static const char *kv_type_name(tfsd_fs *fs, long item, tfs_buf *b)
{
	const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)item);
	return tfs_value_type_name(b, kv->type, kv->data, kv->len) ? NULL : b->data;
}

/*
 * Scratch file n, renamed to newname, becomes item `target` (-1: a new item named `name`):
 * its bytes are parsed or checked as the target's type (as declared on n with setxattr, else
 * the target's own, else a new item's default) and journaled; n is then the item's node.
 */
static int adopt_scratch(tfsd_fs *fs, tfsd_node *n, long target, const char *name,
			 const char *newname, tfs_error *err)
{
	char fname[600];   /* errors name the file the user renamed onto, then the scratch file */
	snprintf(fname, sizeof(fname), "%.255s (renamed from %.255s)", newname, n->fname);
	tfs_buf text = { 0 }, tn = { 0 };
	char *path = NULL;
	long item = -1;
	int rc;
	if (n->dir == D_METADATA) {
		const char *type = n->pend_type ? n->pend_type
				   : target >= 0 ? kv_type_name(fs, target, &tn) : "string";
		if ((rc = tfsd_scratch_read_all(n, &text, 256u << 20)))
			return tfs_error_sys(err, -rc, "%s: reading the new value", fname);
		rc = type ? stage_key_text(fs, n, NULL, name, fname, type, text.data, text.len, err)
			  : tfs_error_set(err, TFS_E_IO, "%s: unknown type", fname);
		tfs_buf_free(&text);
		tfs_buf_free(&tn);
		if (rc)
			return rc;
		item = tfs_model_find_kv(fs->model, name);
		tfsd_scratch_drop(n);
	} else {
		struct stat st;
		if (fsync(n->scratch_fd) < 0 || fstat(n->scratch_fd, &st) < 0)
			return tfs_error_sys(err, errno, "%s", fname);
		if ((rc = tfs_staging_scratch_link(fs->staging, n->scratch_fd, n->scratch_path, &path, err)))
			return rc;
		if (n->dir == D_TENSORS) {
			int dtype;
			uint32_t nd;
			int64_t ne[TFS_MAX_DIMS];
			tfsd_tensor_spec(fs, n, target, (uint64_t)st.st_size, &dtype, &nd, ne);
			rc = tfs_staging_set_tensor(fs->staging, fs->model, name, dtype, nd, ne, path, err);
			item = rc ? -1 : tfs_model_find_tensor(fs->model, name);
		} else {
			rc = tfs_staging_set_extra(fs->staging, fs->model, name, path, err);
			item = rc ? -1 : tfs_model_find_extra(fs->model, name);
		}
		if (rc) {
			/* refused: the file stays a scratch file, now by the name it was given (an
			 * unnamed file cannot be linked again once its link is gone) */
			if (!n->scratch_path)
				n->scratch_path = path;
			else
				free(path);
			return rc;
		}
		free(path);
		/* the bytes are the journal's now: the file is closed, never removed */
		close(n->scratch_fd);
		n->scratch_fd = -1;
		free(n->scratch_path);
		n->scratch_path = NULL;
		if (target < 0 && n->dir == D_TENSORS && tfsd_tree_add_tensor(fs, item, false))
			return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	tfsd_tree_unindex(fs, n);
	n->kind = n->dir == D_METADATA ? N_KEY : n->dir == D_TENSORS ? N_RAW : N_EXTRA;
	n->item = item;
	n->origin = -1;
	tfsd_tree_index(fs, n);
	n->pend_dtype = -1;
	n->pend_shape = false;
	return 0;
}

/* Item n (a listed key, tensor or layer) replaces item target: one journal op. */
static int replace_with_item(tfsd_fs *fs, tfsd_node *n, long target, tfs_error *err)
{
	const char *from = item_name(fs, n->dir, n->item), *to = item_name(fs, n->dir, target);
	int rc;
	if (n->dir == D_METADATA) {
		/* the value as text, read again as the target's type (unless n's was declared) */
		const tfs_kv *kv = tfs_model_kv(fs->model, (size_t)n->item);
		if (n->typed)
			return tfs_staging_replace_kv(fs->staging, fs->model, from, to, kv->type,
						      kv->data, kv->len, err);
		tfs_buf text = { 0 }, tn = { 0 };
		const char *type = kv_type_name(fs, target, &tn);
		rc = tfs_value_format(&text, kv->type, kv->data, kv->len, err);
		if (!rc && !type)
			rc = tfs_error_set(err, TFS_E_IO, "unknown type");
		if (!rc)
			rc = stage_key_text(fs, n, from, to, n->fname, type, text.data ? text.data : "",
					    text.len, err);
		tfs_buf_free(&text);
		tfs_buf_free(&tn);
		return rc;
	}
	if (n->dir == D_LAYERS)
		return tfs_staging_replace_extra(fs->staging, fs->model, from, to, err);
	int dtype;
	uint32_t nd;
	int64_t ne[TFS_MAX_DIMS];
	const tfs_tensor *t = tfs_model_tensor(fs->model, (size_t)n->item);
	tfsd_tensor_spec(fs, n, n->typed ? n->item : target, t->nbytes, &dtype, &nd, ne);
	if ((rc = tfs_staging_replace_tensor(fs->staging, fs->model, from, to, dtype, nd, ne, err)))
		return rc;
	unlink_views(fs, n->item);
	return 0;
}

/* rename(n, newname) onto the model's item target (listed as victim, or unlisted). */
static int rename_onto_item(tfsd_fs *fs, tfsd_node *n, tfsd_node *victim, long target,
			    const char *newname, tfs_error *err)
{
	int rc;
	if (n->kind == N_SCRATCH)
		rc = adopt_scratch(fs, n, target, item_name(fs, n->dir, target), newname, err);
	else if (n->item < 0)
		rc = fail_at(err, TFS_E_INVALID, n, n->fname, "nothing was written to it yet");
	else if (n->item == target)
		return 0;
	else if (!(rc = replace_with_item(fs, n, target, err))) {
		tfsd_tree_unindex(fs, n);
		n->item = target;
		tfsd_tree_index(fs, n);
	}
	if (rc)
		return rc;
	if (victim && victim != n)
		tfsd_tree_unlink(fs, victim); /* its views show the new bytes: they stay */
	return tfsd_tree_rename(fs, n, newname) ? tfs_error_set(err, TFS_E_NOMEM, "out of memory")
					       : 0;
}

/* rename(n, newname) to a scratch name: an item stays in the model, unlisted, and the
 * scratch file holds a copy of its bytes (an editor's backup, `vim` with backupcopy=no). */
static int rename_to_scratch(tfsd_fs *fs, tfsd_node *n, tfsd_node *victim, const char *newname,
			     tfs_error *err)
{
	int rc;
	if (n->kind != N_SCRATCH && (rc = tfsd_scratch_make(fs, n, n->item >= 0)))
		return tfs_error_sys(err, -rc, "%s: copying it to %s", n->fname, newname);
	if (victim)
		tfsd_tree_unlink(fs, victim);
	return tfsd_tree_rename(fs, n, newname) ? tfs_error_set(err, TFS_E_NOMEM, "out of memory")
					       : 0;
}

/* rename(n, newname) to a name the model does not have. */
static int rename_to_new(tfsd_fs *fs, tfsd_node *n, tfsd_node *victim, const char *to,
			 const char *newname, tfs_error *err)
{
	int rc = 0;
	if (victim && (rc = remove_node(fs, victim, err)))  /* a new tensor not written yet */
		return rc;
	if (n->kind == N_SCRATCH) {
		rc = adopt_scratch(fs, n, -1, to, newname, err);
	} else if (n->item >= 0 && n->dir == D_LAYERS) {
		rc = fail_at(err, TFS_E_UNSUPPORTED, n, n->fname,
			     "a layer's name is its kind and cannot be changed");
	} else if (n->item >= 0) {
		const char *from = item_name(fs, n->dir, n->item);
		rc = n->dir == D_METADATA
			? tfs_staging_rename_kv(fs->staging, fs->model, from, to, false, err)
			: tfs_staging_rename_tensor(fs->staging, fs->model, from, to, false, err);
		if (!rc && n->dir == D_TENSORS)
			rename_views(fs, n->item, newname);
	}
	if (rc)
		return rc;
	return tfsd_tree_rename(fs, n, newname) ? tfs_error_set(err, TFS_E_NOMEM, "out of memory")
					       : 0;
}

void tfsd_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		    const char *newname, unsigned int flags)
{
	tfsd_fs *fs = fuse_req_userdata(req);
	tfsd_node *p, *np, *n = NULL, *victim = NULL;
	tfs_error err;
	tfs_buf to = { 0 };
	int rc;

	pthread_rwlock_wrlock(&fs->lock);
	rc = change_dir(fs, parent, &p);
	if (!rc)
		rc = change_dir(fs, newparent, &np);
	if (!rc && p != np)
		rc = -EXDEV;  /* a key cannot become a tensor */
	if (!rc && (flags & ~(unsigned)RENAME_NOREPLACE))
		rc = -EINVAL;
	if (!rc && !(n = tfsd_tree_find(fs, p->dir, name)))
		rc = -ENOENT;
	if (!rc && (tfs_name_decode(&to, newname) || strlen(newname) > 255))
		rc = -EINVAL;
	long target = rc ? -1 : tfsd_dir_item(fs, p->dir, newname);
	if (!rc)
		victim = tfsd_tree_find(fs, p->dir, newname);
	if (!rc && victim == n)
		goto out;
	if (!rc && (victim || target >= 0) && (flags & RENAME_NOREPLACE))
		rc = -EEXIST;
	if (!rc) {
		int r = target >= 0 ? rename_onto_item(fs, n, victim, target, newname, &err)
			: tfsd_scratch_name(fs, p->dir, newname)
				? rename_to_scratch(fs, n, victim, newname, &err)
				: rename_to_new(fs, n, victim, to.data, newname, &err);
		rc = r ? tfsd_fail(fs, &err) : 0;
		fs->gen++;
	}
out:
	pthread_rwlock_unlock(&fs->lock);
	tfs_buf_free(&to);
	fuse_reply_err(req, -rc);
}
