/*
 * tree.c - the mount's inode table, made from the model as it is looked up.
 *
 * Inode numbers are node slots + 1 (in their low bits), and a deleted entry keeps its
 * slot (the kernel may still hold references); a slot is reused
 * only after the kernel forgot its node.  A key, tensor, view or layer gets a node when it
 * is first looked up: until then the directory lists it by its default name, from the
 * model (so a model of 10^6 keys costs no memory per key here until they are opened).  A
 * node that exists says how its item is listed: by its name (renamed, replaced), or not
 * at all (deleted, or taken by a scratch file).  On a rw mount the bits above
 * INO_SLOT_BITS count the commits of a tensors/ or layers/ file's bytes (tfsd_node_ino):
 * the kernel sees each version as its own inode with its own pages.
 */
#include "fs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const dir_names[D_COUNT] = {
	[D_ROOT] = "", [D_METADATA] = "metadata", [D_TENSORS] = "tensors",
	[D_F32] = "f32", [D_NPY] = "npy", [D_LAYERS] = "layers",
};

static size_t hash_of(tfsd_dir dir, const char *s)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)dir;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 1099511628211ull;
	}
	return (size_t)h;
}

/* The item a node stands for: a scratch file made from an item (`mv x x~`) claims it
 * too, so that the item is not listed under its own name while the scratch file is. */
static long claimed_item(const tfsd_node *n)
{
	return n->kind == N_SCRATCH ? n->origin : n->item;
}

static size_t ihash_of(tfsd_dir dir, long item)
{
	return (size_t)(((uint64_t)item * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)dir << 56));
}

static int hash_grow(tfsd_fs *fs)
{
	size_t cap = fs->hash_cap ? fs->hash_cap * 2 : 1024;
	tfsd_node **h = calloc(cap, sizeof(*h)), **ih = calloc(cap, sizeof(*ih));
	if (!h || !ih) {
		free(h);
		free(ih);
		return -ENOMEM;
	}
	for (size_t i = 0; i < fs->hash_cap; i++) {
		tfsd_node *n = fs->hash[i], *next;
		for (; n; n = next) {
			next = n->hnext;
			size_t k = hash_of(n->dir, n->fname) & (cap - 1);
			n->hnext = h[k];
			h[k] = n;
		}
		for (n = fs->ihash[i]; n; n = next) {
			next = n->inext;
			size_t k = ihash_of(n->dir, claimed_item(n)) & (cap - 1);
			n->inext = ih[k];
			ih[k] = n;
		}
	}
	free(fs->hash);
	free(fs->ihash);
	fs->hash = h;
	fs->ihash = ih;
	fs->hash_cap = cap;
	return 0;
}

void tfsd_tree_index(tfsd_fs *fs, tfsd_node *n)
{
	if (n->indexed || n->deleted || n->kind == N_DIR || claimed_item(n) < 0)
		return;
	size_t k = ihash_of(n->dir, claimed_item(n)) & (fs->hash_cap - 1);
	n->inext = fs->ihash[k];
	fs->ihash[k] = n;
	n->indexed = true;
}

void tfsd_tree_unindex(tfsd_fs *fs, tfsd_node *n)
{
	if (!n->indexed)
		return;
	size_t k = ihash_of(n->dir, claimed_item(n)) & (fs->hash_cap - 1);
	for (tfsd_node **p = &fs->ihash[k]; *p; p = &(*p)->inext) {
		if (*p == n) {
			*p = n->inext;
			break;
		}
	}
	n->inext = NULL;
	n->indexed = false;
}

tfsd_node *tfsd_tree_owner(tfsd_fs *fs, tfsd_dir d, long item, bool *hidden)
{
	if (hidden)
		*hidden = false;
	size_t k = ihash_of(d, item) & (fs->hash_cap - 1);
	for (tfsd_node *n = fs->ihash[k]; n; n = n->inext) {
		if (n->dir != d || claimed_item(n) != item)
			continue;
		if (n->kind != N_SCRATCH)
			return n;
		if (hidden)
			*hidden = true;
	}
	return NULL;
}

static void hash_insert(tfsd_fs *fs, tfsd_node *n)
{
	size_t k = hash_of(n->dir, n->fname) & (fs->hash_cap - 1);
	n->hnext = fs->hash[k];
	fs->hash[k] = n;
}

static void hash_remove(tfsd_fs *fs, tfsd_node *n)
{
	size_t k = hash_of(n->dir, n->fname) & (fs->hash_cap - 1);
	for (tfsd_node **p = &fs->hash[k]; *p; p = &(*p)->hnext) {
		if (*p == n) {
			*p = n->hnext;
			n->hnext = NULL;
			return;
		}
	}
}

tfsd_node *tfsd_tree_lookup(tfsd_fs *fs, tfsd_dir dir, const char *fname)
{
	size_t k = hash_of(dir, fname) & (fs->hash_cap - 1);
	for (tfsd_node *n = fs->hash[k]; n; n = n->hnext)
		if (n->dir == dir && n->kind != N_DIR && strcmp(n->fname, fname) == 0)
			return n;
	/* directories are looked up in the root */
	if (dir == D_ROOT)
		for (int d = 1; d < D_COUNT; d++)
			if (strcmp(dir_names[d], fname) == 0) {
				tfsd_node *n = fs->nodes[d];
				return n && !n->deleted ? n : NULL;
			}
	return NULL;
}

tfsd_node *tfsd_live_node(tfsd_fs *fs, fuse_ino_t ino)
{
	tfsd_node *n = tfsd_tree_get(fs, ino);
	return n && !n->deleted ? n : NULL;
}

/* An inode number: the node's slot + 1 in the low bits, its version above. */
#define INO_SLOT_BITS 40
#define INO_SLOT_MASK ((UINT64_C(1) << INO_SLOT_BITS) - 1)
#define INO_VER_MASK ((UINT64_C(1) << (64 - INO_SLOT_BITS)) - 1)

fuse_ino_t tfsd_node_ino(const tfsd_node *n)
{
	return n->ino | ((fuse_ino_t)(n->ver & INO_VER_MASK) << INO_SLOT_BITS);
}

tfsd_node *tfsd_tree_get(tfsd_fs *fs, fuse_ino_t ino)
{
	ino &= INO_SLOT_MASK;
	if (ino == 0 || ino > fs->n_nodes)
		return NULL;
	return fs->nodes[ino - 1];
}

fuse_ino_t tfsd_tree_add(tfsd_fs *fs, tfsd_node_kind kind, tfsd_dir dir, long item, const char *fname)
{
	if (!fs->n_free && fs->n_nodes == fs->cap_nodes) {
		size_t cap = fs->cap_nodes ? fs->cap_nodes * 2 : 256;
		tfsd_node **p = realloc(fs->nodes, cap * sizeof(*p));
		if (!p)
			return 0;
		fs->nodes = p;
		fs->cap_nodes = cap;
	}
	if ((fs->n_nodes + 1) * 2 > fs->hash_cap && hash_grow(fs))
		return 0;
	tfsd_node *n = calloc(1, sizeof(*n));
	if (!n || !(n->fname = strdup(fname))) {
		free(n);
		return 0;
	}
	/* a forgotten node's slot: the kernel knows its ino no more */
	size_t slot = fs->n_free ? fs->free_slots[--fs->n_free] : fs->n_nodes++;
	n->kind = kind;
	n->ino = (fuse_ino_t)slot + 1;
	n->dir = dir;
	n->item = item;
	n->pend_dtype = -1;
	n->scratch_fd = -1;
	n->origin = -1;
	fs->nodes[slot] = n;
	if (kind != N_DIR)
		hash_insert(fs, n);
	tfsd_tree_index(fs, n);
	return n->ino;
}

static void node_free(tfsd_node *n)
{
	tfsd_scratch_drop(n);
	free(n->pend_type);
	free(n->fname);
	tfs_buf_free(&n->cache);
	free(n);
}

/* Whether node n holds nothing the model cannot give again: an item's file by its default
 * name, with no declared type or shape, no scratch file. */
static bool remakeable(tfsd_fs *fs, tfsd_node *n)
{
	if (n->kind != N_KEY && n->kind != N_RAW && n->kind != N_F32 && n->kind != N_NPY &&
	    n->kind != N_EXTRA)
		return false;
	if (n->origin >= 0 || n->pend_dtype >= 0 || n->pend_shape || n->pend_type || n->typed ||
	    n->scratch_fd >= 0)
		return false;
	if (n->deleted)
		return true;
	tfs_buf b = { 0 };
	bool same = n->item >= 0 && tfsd_tree_default_name(fs, n->dir, n->item, &b) == 0 &&
		    strcmp(b.data, n->fname) == 0;
	tfs_buf_free(&b);
	return same;
}

void tfsd_tree_forget(tfsd_fs *fs, fuse_ino_t ino, uint64_t count)
{
	tfsd_node *n = tfsd_tree_get(fs, ino);
	if (!n)
		return;
	n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
	if (n->nlookup || !remakeable(fs, n))
		return;
	if (fs->n_free == fs->cap_free) {
		size_t cap = fs->cap_free ? fs->cap_free * 2 : 256;
		size_t *p = realloc(fs->free_slots, cap * sizeof(*p));
		if (!p)
			return; /* kept */
		fs->free_slots = p;
		fs->cap_free = cap;
	}
	if (!n->deleted)
		hash_remove(fs, n);
	tfsd_tree_unindex(fs, n);
	fs->nodes[n->ino - 1] = NULL;
	fs->free_slots[fs->n_free++] = n->ino - 1;
	node_free(n);
}

/* Closes and removes n's scratch file, if it has one (scratch.c makes them). */
void tfsd_scratch_drop(tfsd_node *n)
{
	if (n->scratch_fd >= 0)
		close(n->scratch_fd);
	n->scratch_fd = -1;
	if (n->scratch_path)
		unlink(n->scratch_path);
	free(n->scratch_path);
	n->scratch_path = NULL;
}

void tfsd_tree_unlink(tfsd_fs *fs, tfsd_node *n)
{
	if (n->deleted)
		return;
	hash_remove(fs, n);
	tfsd_tree_unindex(fs, n);
	n->deleted = true;
	tfsd_scratch_drop(n);
}

int tfsd_tree_rename(tfsd_fs *fs, tfsd_node *n, const char *fname)
{
	char *s = strdup(fname);
	if (!s)
		return -ENOMEM;
	hash_remove(fs, n);
	free(n->fname);
	n->fname = s;
	hash_insert(fs, n);
	return 0;
}

/* ==== items without a node ==== */

static const tfsd_node_kind dir_kinds[D_COUNT] = {
	[D_METADATA] = N_KEY, [D_TENSORS] = N_RAW, [D_F32] = N_F32, [D_NPY] = N_NPY,
	[D_LAYERS] = N_EXTRA,
};

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

long tfsd_tree_unmade_item(tfsd_fs *fs, tfsd_dir dir, const char *fname)
{
	if (dir == D_ROOT || dir >= D_COUNT)
		return -1;
	tfs_buf name = { 0 }, b = { 0 };
	long i = -1;
	if (tfs_name_decode(&name, fname) == 0) {
		if (dir == D_NPY) {
			if (name.len > 4 && !strcmp(name.data + name.len - 4, ".npy"))
				name.data[name.len - 4] = '\0';
			else
				name.data[0] = '\0';
		}
		const tfs_model *m = fs->model;
		i = dir == D_METADATA ? tfs_model_find_kv(m, name.data)
		    : dir == D_LAYERS ? tfs_model_find_extra(m, name.data)
				      : tfs_model_find_tensor(m, name.data);
	}
	bool hidden;
	if (i >= 0 && (tfsd_tree_default_name(fs, dir, i, &b) || strcmp(b.data, fname) ||
		       tfsd_tree_owner(fs, dir, i, &hidden) || hidden))
		i = -1;
	tfs_buf_free(&name);
	tfs_buf_free(&b);
	return i;
}

tfsd_node *tfsd_tree_find(tfsd_fs *fs, tfsd_dir dir, const char *fname)
{
	tfsd_node *n = tfsd_tree_lookup(fs, dir, fname);
	long i = n ? -1 : tfsd_tree_unmade_item(fs, dir, fname);
	if (i >= 0) {
		fuse_ino_t ino = tfsd_tree_add(fs, dir_kinds[dir], dir, i, fname);
		n = ino ? tfsd_tree_get(fs, ino) : NULL;
	}
	return n;
}

/* Names of at least this many bytes may encode to over 255 (each byte to at most 3, and
 * npy/ adds 4): their files cannot be found by decoding. */
#define LONG_NAME ((255 - 4) / 3)

/* Makes the node of item i of directory d, by its default name, unless it has one. */
static int add_default(tfsd_fs *fs, tfsd_dir d, long i)
{
	tfs_buf b = { 0 };
	int rc = 0;
	if (!tfsd_tree_owner(fs, d, i, NULL) && !tfsd_tree_default_name(fs, d, i, &b) &&
	    !tfsd_tree_add(fs, dir_kinds[d], d, i, b.data))
		rc = -ENOMEM;
	tfs_buf_free(&b);
	return rc;
}

/* Makes nodes for the views (f32/, npy/) of tensor i, and for its tensors/ entry with_raw. */
int tfsd_tree_add_tensor(tfsd_fs *fs, long i, bool with_raw)
{
	int rc = 0;
	for (int d = with_raw ? D_TENSORS : D_F32; !rc && d <= D_NPY; d++)
		rc = add_default(fs, (tfsd_dir)d, i);
	return rc;
}

int tfsd_tree_build(tfsd_fs *fs, tfs_error *err)
{
	tfs_model *m = fs->model;
	if (hash_grow(fs))
		goto nomem;
	for (int d = 0; d < D_COUNT; d++)
		if (!tfsd_tree_add(fs, N_DIR, (tfsd_dir)d, -1, dir_names[d]))
			goto nomem;
	if (tfs_model_format(m) != TFS_FMT_OLLAMA && tfs_model_n_extras(m) == 0)
		fs->nodes[D_LAYERS]->deleted = true;
	if (!tfsd_tree_add(fs, N_INDEX, D_ROOT, -1, "index.json"))
		goto nomem;
	if (tfs_image_name(m) && !tfsd_tree_add(fs, N_MODEL, D_ROOT, -1, tfs_image_name(m)))
		goto nomem;
	if (tfs_config_name(m) && !tfsd_tree_add(fs, N_CONFIG, D_ROOT, -1, tfs_config_name(m)))
		goto nomem;
	/* The items' nodes are made as they are looked up (tfsd_tree_find), found by decoding
	 * the file name, except those of names too long to decode: a name whose encoding is
	 * over 255 bytes is cut and hashed (tfs_name_encode).  They get their nodes now. */
	for (size_t i = 0; i < tfs_model_n_kv(m); i++)
		if (strlen(tfs_model_kv(m, i)->name) >= LONG_NAME &&
		    add_default(fs, D_METADATA, (long)i))
			goto nomem;
	for (size_t i = 0; i < tfs_model_n_tensors(m); i++)
		if (strlen(tfs_model_tensor(m, i)->name) >= LONG_NAME &&
		    tfsd_tree_add_tensor(fs, (long)i, true))
			goto nomem;
	for (size_t i = 0; i < tfs_model_n_extras(m); i++)
		if (strlen(tfs_model_extra(m, i)->name) >= LONG_NAME &&
		    add_default(fs, D_LAYERS, (long)i))
			goto nomem;
	return 0;
nomem:
	return tfs_error_set(err, TFS_E_NOMEM, "out of memory building the file tree");
}

void tfsd_tree_free(tfsd_fs *fs)
{
	for (size_t i = 0; i < fs->n_nodes; i++)
		if (fs->nodes[i])
			node_free(fs->nodes[i]);
	free(fs->free_slots);
	fs->free_slots = NULL;
	fs->n_free = fs->cap_free = 0;
	if (fs->image)
		tfsd_image_release(fs, fs->image);
	fs->image = NULL;
	tfs_index_free(fs->index);
	fs->index = NULL;
	free(fs->nodes);
	free(fs->hash);
	free(fs->ihash);
	fs->nodes = NULL;
	fs->hash = NULL;
	fs->ihash = NULL;
	fs->n_nodes = fs->hash_cap = 0;
}

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
		 ? tfsd_node_size(fs, n, &size) : 0;
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

int tfsd_node_size(tfsd_fs *fs, tfsd_node *n, uint64_t *size)
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
		if ((rc = tfsd_image_acquire(fs, &si)))
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

/* ==== the model as one file ==== */

static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER;

int tfsd_image_acquire(tfsd_fs *fs, tfsd_shared_image **out)
{
	int rc = 0;
	pthread_mutex_lock(&image_lock);
	if (!fs->image || fs->image->gen != fs->gen) {
		tfsd_shared_image *si = calloc(1, sizeof(*si));
		tfs_error err;
		if (!si) {
			rc = -ENOMEM;
		} else if (tfs_model_image(&si->im, fs->model, true, &err)) {
			free(si);
			rc = tfsd_fail(fs, &err);
		} else {
			si->gen = fs->gen;
			si->refs = 1; /* fs->image's own */
			if (fs->image && --fs->image->refs == 0) {
				tfs_image_free(fs->image->im);
				free(fs->image);
			}
			fs->image = si;
		}
	}
	if (!rc) {
		fs->image->refs++;
		*out = fs->image;
	}
	pthread_mutex_unlock(&image_lock);
	return rc;
}

void tfsd_image_release(tfsd_fs *fs, tfsd_shared_image *si)
{
	pthread_mutex_lock(&image_lock);
	bool last = --si->refs == 0;
	pthread_mutex_unlock(&image_lock);
	if (last) {
		tfs_image_free(si->im);
		free(si);
	}
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
