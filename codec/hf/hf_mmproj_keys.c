/*
 * hf_mmproj_keys.c - the projector's keys from its configs, as gguf-py's writer types them:
 * the vision and audio configs' sizes (add_uint32: struct.pack("I")), the preprocessor's
 * numbers (add_array: float32 elements, int32 when all are integers).
 */
#include "hf_mmproj.h"

#include <stdio.h>
#include <stdlib.h>

/* the rows' keys are "clip.*": tfs_hf_add_u32 names them after the row's gguf */
static const tfs_hf_arch clip_arch = { .gguf = "clip" };

static int param(tfs_hf_kvs *l, const tfs_hf_mm *mm, json_t *cfg, const char *what,
		 const char *key, const char *const *keys, tfs_error *err)
{
	hparams h = { .where = mm->where, .arch = &clip_arch, .root = cfg };
	const char *which = keys[0];
	json_t *v = tfs_hf_find(cfg, keys, &which);
	if (!v)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: %s has no \"%s\" (the converter "
				     "needs it for the projector)", mm->where, what, keys[0]);
	return tfs_hf_add_u32(l, &h, key, v, which, err);
}

int tfs_hf_mm_vparam(tfs_hf_kvs *l, const tfs_hf_mm *mm, const char *key,
		     const char *const *keys, tfs_error *err)
{
	return param(l, mm, mm->vision, "vision_config", key, keys, err);
}

int tfs_hf_mm_aparam(tfs_hf_kvs *l, const tfs_hf_mm *mm, const char *key,
		     const char *const *keys, tfs_error *err)
{
	return param(l, mm, mm->audio, "audio_config", key, keys, err);
}

int tfs_hf_mm_numbers(tfs_hf_kvs *l, const tfs_hf_mm *mm, const char *key, const json_t *v,
		      const char *what, tfs_error *err)
{
	size_t n = json_array_size(v);
	if (!v)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: no \"%s\" (the converter needs it for "
				     "the projector)", mm->pre_where, what);
	bool ints = n && json_is_integer(json_array_get(v, 0));
	for (size_t i = 0; i < n; i++) {
		const json_t *x = json_array_get(v, i);
		if (ints ? !json_is_integer(x) : !json_is_real(x))
			n = 0;
	}
	if (!n)
		return tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" is not a list of numbers of one "
				     "type", mm->pre_where, what);
	float *f = malloc(n * sizeof *f);
	int32_t *k = malloc(n * sizeof *k);
	int rc = 0;
	if (!f || !k)
		rc = tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", mm->pre_where);
	for (size_t i = 0; !rc && i < n; i++) {
		const json_t *x = json_array_get(v, i);
		json_int_t iv = ints ? json_integer_value(x) : 0;
		if (ints && (iv < INT32_MIN || iv > INT32_MAX))
			rc = tfs_error_set(err, TFS_E_FORMAT, "%s: \"%s\" holds %lld, not a 32-bit "
					   "integer", mm->pre_where, what, (long long)iv);
		k[i] = (int32_t)iv;
		f[i] = ints ? 0.0f : (float)json_real_value(x);
	}
	if (!rc)
		rc = ints ? tfs_hf_kvs_add_arr_i32(l, key, k, n, err)
			  : tfs_hf_kvs_add_arr_f32(l, key, f, n, err);
	free(f);
	free(k);
	return rc;
}
