/* The glue tests/llama/mtmd_embed.py builds into its libmtmd (llama.cpp's tools/mtmd, the
 * reference clone's source, linked against the npm runtime's libraries): one call that
 * encodes an image or a sound with a projector, so that Python (ctypes) need not pass
 * mtmd_context_params by value, a struct of the experimental API whose layout changes. */
#include <stdint.h>
#include <string.h>

#include "mtmd.h"

/* Loads the projector mmproj for model (libllama's, loaded by the caller) and encodes with
 * n_threads threads an image, nx x ny RGB pixels (data: nx * ny * 3 bytes), or when audio,
 * nx PCM samples (data: nx floats); min_tokens and max_tokens, when above 0, bound an image's
 * tokens (llama-mtmd-cli's --image-min-tokens and --image-max-tokens).  Copies its
 * embeddings (n_tokens rows of llama_model_n_embd_inp(model) floats) to out, when they fit
 * in cap floats.  0 on success, else the step that failed: -1 loading the projector, -2 the
 * bitmap, -3 tokenizing (no media chunk either), -4 encoding, -5 out too small. */
int tfs_mtmd_embed(const struct llama_model *model, const char *mmproj, int audio, uint32_t nx,
		   uint32_t ny, const void *data, int min_tokens, int max_tokens, int n_threads,
		   float *out, size_t cap, size_t *n_tokens, int32_t *n_embd)
{
	struct mtmd_context_params p = mtmd_context_params_default();
	p.use_gpu = false;
	p.print_timings = false;
	p.n_threads = n_threads;
	p.warmup = false; /* (a second encode of a dummy image: time, and nothing to compare) */
	p.image_min_tokens = min_tokens > 0 ? min_tokens : -1;
	p.image_max_tokens = max_tokens > 0 ? max_tokens : -1;
	mtmd_context *ctx = mtmd_init_from_file(mmproj, model, p);
	if (!ctx)
		return -1;
	int rc = 0;
	mtmd_bitmap *bm = audio ? mtmd_bitmap_init_from_audio(nx, data) :
				  mtmd_bitmap_init(nx, ny, data);
	mtmd_input_chunks *chunks = mtmd_input_chunks_init();
	if (!bm || !chunks) {
		rc = -2;
		goto out;
	}
	/* the marker alone: the text chunks around it are the model's media delimiters */
	const char *marker = mtmd_default_marker();
	mtmd_input_text text = {marker, strlen(marker), false, true};
	const mtmd_bitmap *bms[1] = {bm};
	const mtmd_input_chunk *media = NULL;
	enum mtmd_input_chunk_type want = audio ? MTMD_INPUT_CHUNK_TYPE_AUDIO :
						  MTMD_INPUT_CHUNK_TYPE_IMAGE;
	if (mtmd_tokenize(ctx, chunks, &text, bms, 1) == 0) {
		for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
			const mtmd_input_chunk *c = mtmd_input_chunks_get(chunks, i);
			if (mtmd_input_chunk_get_type(c) == want)
				media = c;
		}
	}
	if (!media) {
		rc = -3;
		goto out;
	}
	if (mtmd_encode_chunk(ctx, media) != 0) {
		rc = -4;
		goto out;
	}
	*n_tokens = mtmd_input_chunk_get_n_tokens(media);
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
