/* reply.h - replying with a source's bytes (fs/reply.c). */
#ifndef TFSD_REPLY_H
#define TFSD_REPLY_H

#include "fs.h"

/* Replies to req with [off, +size) of the item at [base, base + avail) of source src of the
 * model (a tensor's or a layer's bytes), clipped to the item; see reply.c for the ways. */
void tfsd_reply_source(fuse_req_t req, tfsd_fs *fs, int32_t src, uint64_t base, uint64_t avail,
		       off_t off, size_t size);

/* Replies to req with [off, +size) of a model file image (model.gguf, model.safetensors):
 * the header from memory, tensors spliced from their files where they have one. */
void tfsd_reply_image(fuse_req_t req, tfsd_fs *fs, const tfs_image *im, off_t off, size_t size);

#endif
