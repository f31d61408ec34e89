/*
 * image.h - the whole model as one file (public; image_impl.h holds the layout).
 */
#ifndef TFS_IMAGE_H
#define TFS_IMAGE_H

#include "model.h"

/* ==== the whole model as one file ==== */

/*
 * An image is the file a repack would write now, laid out in memory: the header bytes
 * built, the tensors' bytes named as ranges of their sources (original or staged), the
 * padding as zeros.  It does not change when the model does: an image taken with own_fds
 * keeps its own descriptors of every source it reads from.
 */
typedef struct tfs_image tfs_image;
/* "model.gguf" (GGUF files, classic Ollama models), "model.safetensors" (one file or a
 * sharded set, merged; a per-tensor Ollama model in mlx-lm's layout), or NULL when the
 * model has no single-file form. */
const char *tfs_image_name(const tfs_model *m);
/* "config.json" when the model file needs one beside it (a per-tensor Ollama model: its
 * config.json layer with mlx-lm's "quantization" set), else NULL; its text. */
const char *tfs_config_name(const tfs_model *m);
int tfs_model_config_json(tfs_buf *out, const tfs_model *m, tfs_error *err);
int tfs_model_image(tfs_image **out, const tfs_model *m, bool own_fds, tfs_error *err);
uint64_t tfs_image_size(const tfs_image *im);
/* tfs_image_size of the image tfs_model_image would build (a GGUF file's without building
 * its header: index.json's "model_file" of a large header costs no memory). */
int tfs_model_image_size(uint64_t *size, const tfs_model *m, tfs_error *err);
/* Reads up to len bytes at off (clipped at the end); the count or a negative tfs_code.
 * Needs an image taken with own_fds. */
int64_t tfs_image_read(const tfs_image *im, uint64_t off, uint64_t len, void *out,
		       tfs_error *err);
void tfs_image_free(tfs_image *im);

/* For a reader that moves an image's bytes itself (splices them): the piece of the image
 * that byte off is in, at most len bytes of it (n: 0 at or past the end): bytes in memory
 * (mem: the header), zeros (mem and src NULL), or bytes [src_off, src_off + n) of src, one
 * of the image's own copies of the sources (tfs_source_splice_fd, tfs_source_read), of an
 * item at [lo, hi) of it.  Needs an image taken with own_fds. */
typedef struct {
	const uint8_t *mem;
	const tfs_source *src;
	uint64_t src_off, lo, hi;
	uint64_t n;
} tfs_image_piece;
void tfs_image_piece_at(tfs_image_piece *out, const tfs_image *im, uint64_t off, uint64_t len);

#endif
