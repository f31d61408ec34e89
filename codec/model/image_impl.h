/*
 * image_impl.h - an image's layout: the head and the source extents (codec-private).
 */
#ifndef TFS_IMAGE_IMPL_H
#define TFS_IMAGE_IMPL_H

#include "image.h"

/* ==== images: a file laid out in memory (image.c) ==== */

typedef struct {
	uint64_t pos;      /* where in the file */
	uint64_t len;
	int32_t src;       /* the source holding the bytes */
	uint64_t src_off;
} tfs_extent;

struct tfs_image {
	tfs_buf head;          /* bytes [0, head.len) */
	tfs_extent *ext;       /* source ranges, in file order, after the head */
	size_t n_ext, cap_ext;
	uint64_t size;         /* zeros between and after extents up to size */
	tfs_source *held;      /* with tfs_image_own_fds: per source the extents name, a copy
	                        * of it that outlives changes to the model (tfs_source_hold) */
	size_t n_held;
	uint32_t clone_blk;    /* tfs_image_write clones whole blocks of this size (0: copies) */
};

int tfs_image_new(tfs_image **out, tfs_error *err);
/* Appends an extent (after every earlier one); 0 or TFS_E_NOMEM. */
int tfs_image_add(tfs_image *im, uint64_t pos, int32_t src, uint64_t src_off, uint64_t len);
/* Holds the sources the extents name (tfs_source_hold: a local file's descriptor
 * duplicated), for tfs_image_read. */
int tfs_image_own_fds(tfs_image *im, const tfs_model *m, tfs_error *err);
/* For writing im to fd (a new empty file): whether fd can share extents with the source
 * holding most of im's bytes (the block size, else 0), and the shift, a multiple of step
 * below the block size, that moving the data section by would align the most extent bytes
 * with their source's blocks (*shift).  See tfs_source_copy. */
uint32_t tfs_image_clone_plan(const tfs_image *im, const tfs_model *m, int fd, uint64_t step,
			      uint64_t *shift);
/* Writes the image to fd (reserved, header, zeros, sources copied with tfs_source_copy). */
int tfs_image_write(const tfs_image *im, const tfs_model *m, int fd, const char *path,
		    const tfs_write_opts *o, tfs_error *err);

#endif
