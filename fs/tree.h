/*
 * tree.h - the mount's nodes (tree.c), the file names of the model's items (names.c), what
 * a node reads as (node.c), the model as one file (image.c).  fs->lock guards the tree and the model: held for reading
 * to look up and read, for writing to change them.  Each int function returns 0 or -errno.
 */
#ifndef TFSD_TREE_H
#define TFSD_TREE_H

#include "fs.h"

#include <sys/stat.h>

/* ==== the nodes (tree.c; tfsd_tree_build and tfsd_tree_free are in fs.h) ==== */
/* The node of inode number ino, whatever its version. */
tfsd_node *tfsd_tree_get(tfsd_fs *fs, fuse_ino_t ino);
/* The inode number the kernel knows n by now: its slot, and its version (n->ver). */
fuse_ino_t tfsd_node_ino(const tfsd_node *n);
/* The node of ino unless it was deleted. */
tfsd_node *tfsd_live_node(tfsd_fs *fs, fuse_ino_t ino);
/* The node named fname in dir, if it has one (no node is made). */
tfsd_node *tfsd_tree_lookup(tfsd_fs *fs, tfsd_dir dir, const char *fname);
/* The directory holding directory d (D_ROOT, or hf/ for its folder). */
tfsd_dir tfsd_dir_parent(tfsd_dir d);
/* The item of dir listed by its default name fname without a node yet, or -1. */
long tfsd_tree_unmade_item(tfsd_fs *fs, tfsd_dir dir, const char *fname);
/* The node named fname in dir, made now if an item is listed by that name without one
 * (fs->lock held for writing); NULL: none. */
tfsd_node *tfsd_tree_find(tfsd_fs *fs, tfsd_dir dir, const char *fname);
/* The live node that lists item of directory d (a view's node for D_F32/D_NPY), or NULL;
 * *hidden (may be NULL) tells whether a scratch file took the item's place (mv x x~). */
tfsd_node *tfsd_tree_owner(tfsd_fs *fs, tfsd_dir d, long item, bool *hidden);
/* The listed node of item in directory d (not a view), or NULL. */
tfsd_node *tfsd_item_node(tfsd_fs *fs, tfsd_dir d, long item);
/* Before changing a node's kind, item or origin: take it out of the item index; after:
 * put it back. */
void tfsd_tree_unindex(tfsd_fs *fs, tfsd_node *n);
void tfsd_tree_index(tfsd_fs *fs, tfsd_node *n);
/* The kernel forgot n references to ino: a node it no longer knows that the model can
 * make again as it is (an item's, by its default name, with no state of its own) is
 * freed.  fs->lock held for writing. */
void tfsd_tree_forget(tfsd_fs *fs, fuse_ino_t ino, uint64_t n);
/* Adds a node for an item; returns its ino (0 on allocation failure). */
fuse_ino_t tfsd_tree_add(tfsd_fs *fs, tfsd_node_kind kind, tfsd_dir dir, long item,
			 const char *fname);
/* Takes n out of its directory (deleted; its node stays while the kernel knows it). */
void tfsd_tree_unlink(tfsd_fs *fs, tfsd_node *n);
int tfsd_tree_rename(tfsd_fs *fs, tfsd_node *n, const char *fname);
/* Adds the tensors/ (with_raw), f32/ and npy/ entries of tensor i. */
int tfsd_tree_add_tensor(tfsd_fs *fs, long i, bool with_raw);
/* Closes and removes n's scratch file, if it has one (n stays as it is otherwise). */
void tfsd_scratch_drop(tfsd_node *n);

/* ==== file names (names.c) ==== */
/* The number of item slots of directory d (deleted ones included). */
size_t tfsd_tree_n_items(tfsd_fs *fs, tfsd_dir d);
/* Item i of directory d's file name when it has no node: its model name, encoded (+ .npy
 * in npy/); -ENOENT when the model lists no such file (deleted, no f32 view). */
int tfsd_tree_default_name(tfsd_fs *fs, tfsd_dir d, long i, tfs_buf *out);
/* The live model item of the decoded file name in directory d, or -1. */
long tfsd_dir_item(tfsd_fs *fs, tfsd_dir d, const char *fname);

/* ==== what a node reads as (node.c) ==== */
/* The node's attributes: mode, size, times, owner. */
int tfsd_node_attr(tfsd_fs *fs, tfsd_node *n, struct stat *st);
/* The node's cached content (value text, npy header, config.json); call with cache_lock
 * held. */
int tfsd_node_content(tfsd_fs *fs, tfsd_node *n, const tfs_buf **out);
/* index.json of the model as it is now, as a stream (opened again after a change: its
 * sizing pass is the first stat's cost); call with cache_lock held. */
int tfsd_fs_index(tfsd_fs *fs, tfs_index **out);
/* Appends key node n's value text as it reads now. */
int tfsd_node_text(tfsd_fs *fs, tfsd_node *n, tfs_buf *out);
/* Where tensor or layer node n's bytes are: [*off, +*len) of the returned source. */
int32_t tfsd_node_bytes(tfsd_fs *fs, const tfsd_node *n, uint64_t *off, uint64_t *len);

/* ==== the model as one file (image.c) ==== */
/* The model file as it is now (a reference; built when the model changed since the last
 * one); fs->lock held for reading. */
/* The item of the N_MODEL node of a model's GGUF view (a Hugging Face repo's model.gguf);
 * the model's own image is item -1. */
#define TFSD_VIEW_IMAGE (-2)
/* The item of hf/model.safetensors: a GGUF model's Hugging Face form (tfs_hf_repo_model). */
#define TFSD_HF_IMAGE (-3)
/* ... of a Hugging Face repo's projector (a multimodal repo's mmproj.gguf) */
#define TFSD_MMPROJ_IMAGE (-4)
#define TFSD_MMPROJ_NAME "mmproj.gguf"
int tfsd_image_acquire(tfsd_fs *fs, const tfsd_node *n, tfsd_shared_image **out);
void tfsd_image_release(tfsd_fs *fs, tfsd_shared_image *si);

#endif
