/* The glue tests/llama/mtmd_embed.py builds into its libmtmd (llama.cpp's tools/mtmd, the
 * reference clone's source, linked against the npm runtime's libraries): one call that
 * encodes an image with a projector, so that Python (ctypes) need not pass
 * mtmd_context_params by value, a struct of the experimental API whose layout changes. */
#include <stdint.h>
#include <string.h>

#include "mtmd.h"

/* Loads the projector mmproj for model (libllama's, loaded by the caller), encodes the
 * nx x ny RGB image rgb (nx * ny * 3 bytes) with n_threads threads and copies its
 * embeddings (n_tokens rows of llama_model_n_embd_inp(model) floats) to out, when they fit
 * in cap floats.  0 on success, else the step that failed: -1 loading the projector, -2
 * the bitmap, -3 tokenizing (no image chunk either), -4 encoding, -5 out too small. */
int tfs_mtmd_embed(const struct llama_model *model, const char *mmproj, uint32_t nx,
		   uint32_t ny, const unsigned char *rgb, int n_threads, float *out, size_t cap,
		   size_t *n_tokens, int32_t *n_embd)
{
	struct mtmd_context_params p = mtmd_context_params_default();
	p.use_gpu = false;
	p.print_timings = false;
	p.n_threads = n_threads;
	p.warmup = false; /* (a second encode of a dummy image: time, and nothing to compare) */
	mtmd_context *ctx = mtmd_init_from_file(mmproj, model, p);
	if (!ctx)
		return -1;
	int rc = 0;
	mtmd_bitmap *bm = mtmd_bitmap_init(nx, ny, rgb);
	mtmd_input_chunks *chunks = mtmd_input_chunks_init();
	if (!bm || !chunks) {
		rc = -2;
		goto out;
	}
	/* the marker alone: the text chunks around it are the model's image delimiters */
	const char *marker = mtmd_default_marker();
	mtmd_input_text text = {marker, strlen(marker), false, true};
	const mtmd_bitmap *bms[1] = {bm};
	const mtmd_input_chunk *img = NULL;
	if (mtmd_tokenize(ctx, chunks, &text, bms, 1) == 0) {
		for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
			const mtmd_input_chunk *c = mtmd_input_chunks_get(chunks, i);
			if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE)
				img = c;
		}
	}
	if (!img) {
		rc = -3;
		goto out;
	}
	if (mtmd_encode_chunk(ctx, img) != 0) {
		rc = -4;
		goto out;
	}
	*n_tokens = mtmd_input_chunk_get_n_tokens(img);
	*n_embd = llama_model_n_embd_inp(model);
	size_t n = *n_tokens * (size_t)*n_embd;
	if (n > cap) {
		rc = -5;
		goto out;
	}
	memcpy(out, mtmd_get_output_embd(ctx), n * sizeof(float));
out:
	if (chunks)
		mtmd_input_chunks_free(chunks);
	if (bm)
		mtmd_bitmap_free(bm);
	mtmd_free(ctx);
	return rc;
}
