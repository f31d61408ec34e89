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
#include "tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const dir_names[D_COUNT] = {
	[D_ROOT] = "", [D_METADATA] = "metadata", [D_TENSORS] = "tensors",
	[D_F32] = "f32", [D_NPY] = "npy", [D_LAYERS] = "layers", [D_HF] = "hf",
	[D_HFSUB] = "", /* (named by the hf/ files in it: tfsd_tree_build) */
};

tfsd_dir tfsd_dir_parent(tfsd_dir d)
{
	return d == D_HFSUB ? D_HF : D_ROOT;
}

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

/* The listed node of item in directory d (not a view), or NULL. */
tfsd_node *tfsd_item_node(tfsd_fs *fs, tfsd_dir d, long item)
{
	tfsd_node *v = item >= 0 ? tfsd_tree_owner(fs, d, item, NULL) : NULL;
	return v && (v->kind == N_KEY || v->kind == N_RAW || v->kind == N_EXTRA) ? v : NULL;
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
	/* directories are looked up in their parent (the first nodes: slot d is directory d) */
	for (int d = 1; d < D_COUNT; d++)
		if (tfsd_dir_parent((tfsd_dir)d) == dir && fs->nodes[d]->dir == (tfsd_dir)d &&
		    strcmp(fs->nodes[d]->fname, fname) == 0)
			return fs->nodes[d]->deleted ? NULL : fs->nodes[d];
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

fuse_ino_t tfsd_tree_add(tfsd_fs *fs, tfsd_node_kind kind, tfsd_dir dir, long item,
			 const char *fname)
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

static const tfsd_node_kind dir_kinds[D_COUNT] = {
	[D_METADATA] = N_KEY, [D_TENSORS] = N_RAW, [D_F32] = N_F32, [D_NPY] = N_NPY,
	[D_LAYERS] = N_EXTRA,
};

/* (names.c gives the default names; a node, or a scratch file hiding the item, wins) */
long tfsd_tree_unmade_item(tfsd_fs *fs, tfsd_dir dir, const char *fname)
{
	if (dir == D_ROOT || dir == D_HF || dir == D_HFSUB || dir >= D_COUNT)
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

/* hf/'s file i, in hf/ or (a name "DIR/file") in its folder DIR, D_HFSUB: named by the
 * first such file (the export lists those of one folder only). */
static int add_hf_file(tfsd_fs *fs, size_t i)
{
	const char *name = tfs_hf_repo_file_name(fs->model, i), *slash = strchr(name, '/');
	tfsd_node *sub = fs->nodes[D_HFSUB];
	if (!slash)
		return tfsd_tree_add(fs, N_HFFILE, D_HF, (long)i, name) ? 0 : -ENOMEM;
	if (sub->deleted) {
		char *dn = strndup(name, (size_t)(slash - name));
		if (!dn)
			return -ENOMEM;
		free(sub->fname);
		sub->fname = dn;
		sub->deleted = false;
	}
	return tfsd_tree_add(fs, N_HFFILE, D_HFSUB, (long)i, slash + 1) ? 0 : -ENOMEM;
}

int tfsd_tree_build(tfsd_fs *fs, tfs_error *err)
{
	tfs_model *m = fs->model;
	if (hash_grow(fs))
		goto nomem;
	for (int d = 0; d < D_COUNT; d++)
		if (!tfsd_tree_add(fs, N_DIR, (tfsd_dir)d, -1, dir_names[d]))
			goto nomem;
	if (!tfs_model_has_layers(m))
		fs->nodes[D_LAYERS]->deleted = true;
	if (!tfsd_tree_add(fs, N_INDEX, D_ROOT, -1, "index.json"))
		goto nomem;
	if (tfs_image_name(m) && !tfsd_tree_add(fs, N_MODEL, D_ROOT, -1, tfs_image_name(m)))
		goto nomem;
	/* a Hugging Face repo's GGUF view: its model.gguf beside model.safetensors */
	if (tfs_model_gguf_view(m) &&
	    !tfsd_tree_add(fs, N_MODEL, D_ROOT, TFSD_VIEW_IMAGE,
			   tfs_image_name(tfs_model_gguf_view(m))))
		goto nomem;
	/* ... and a multimodal repo's projector: mmproj.gguf */
	if (tfs_model_mmproj(m) &&
	    !tfsd_tree_add(fs, N_MODEL, D_ROOT, TFSD_MMPROJ_IMAGE, TFSD_MMPROJ_NAME))
		goto nomem;
	if (tfs_config_name(m) && !tfsd_tree_add(fs, N_CONFIG, D_ROOT, -1, tfs_config_name(m)))
		goto nomem;
	/* a GGUF model's Hugging Face form (read-only mounts: it is computed from the model as
	 * opened): its small files and model.safetensors */
	bool hf = !fs->opts.rw && tfs_hf_repo_model(m);
	fs->nodes[D_HF]->deleted = !hf;
	fs->nodes[D_HFSUB]->deleted = true;
	for (size_t i = 0; hf && i < tfs_hf_repo_n_files(m); i++)
		if (add_hf_file(fs, i))
			goto nomem;
	if (hf && !tfsd_tree_add(fs, N_MODEL, D_HF, TFSD_HF_IMAGE, "model.safetensors"))
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
	if (fs->view_image)
		tfsd_image_release(fs, fs->view_image);
	if (fs->hf_image)
		tfsd_image_release(fs, fs->hf_image);
	if (fs->mmproj_image)
		tfsd_image_release(fs, fs->mmproj_image);
	fs->image = fs->view_image = fs->hf_image = fs->mmproj_image = NULL;
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

