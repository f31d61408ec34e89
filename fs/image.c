/*
 * image.c - the model as one file (model.gguf, model.safetensors): an image of the model
 * as it was at one generation, built when first asked after a change and shared by the
 * handles that opened it (each keeps its own until it is closed).
 */
#include "fs.h"
#include "tree.h"

#include <errno.h>
#include <stdlib.h>

/* ==== the model as one file ==== */

static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER;

int tfsd_image_acquire(tfsd_fs *fs, const tfsd_node *n, tfsd_shared_image **out)
{
	int rc = 0;
	/* the model's own image, or its GGUF view's (model.gguf of a Hugging Face repo), or
	 * its projector's (mmproj.gguf), or its Hugging Face form's (hf/model.safetensors of
	 * a GGUF) */
	bool view = n->item == TFSD_VIEW_IMAGE, hf = n->item == TFSD_HF_IMAGE,
	     mmproj = n->item == TFSD_MMPROJ_IMAGE;
	tfsd_shared_image **slot = view ? &fs->view_image : hf ? &fs->hf_image
				   : mmproj ? &fs->mmproj_image : &fs->image;
	const tfs_model *m = view ? tfs_model_gguf_view(fs->model)
			     : hf ? tfs_hf_repo_model(fs->model)
			     : mmproj ? tfs_model_mmproj(fs->model) : fs->model;
	if (!m)
		return -ENOENT;
	pthread_mutex_lock(&image_lock);
	if (!*slot || (*slot)->gen != fs->gen) {
		tfsd_shared_image *si = calloc(1, sizeof(*si));
		tfs_error err;
		if (!si) {
			rc = -ENOMEM;
		} else if (tfs_model_image(&si->im, m, true, &err)) {
			free(si);
			rc = tfsd_fail(fs, &err);
		} else {
			si->gen = fs->gen;
			si->refs = 1; /* the slot's own */
			if (*slot && --(*slot)->refs == 0) {
				tfs_image_free((*slot)->im);
				free(*slot);
			}
			*slot = si;
		}
	}
	if (!rc) {
		(*slot)->refs++;
		*out = *slot;
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
