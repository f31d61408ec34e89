/*
 * ollama_quant.c - the MLX-quantized tensors of a per-tensor Ollama model: a packed U32
 * weight with its .scale (and .bias / .global_scale) companions in the same blob, told by
 * the blob's metadata or, as Ollama does, by their shapes.
 */
#include "ollama_impl.h"
#include "dtype.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ==== MLX-quantized tensors ==== */

/* x/quant QuantizationParams: quant type -> mode, bits, default group. */
static void quant_params(const char *qt, tfs_qmode *mode, uint32_t *bits, uint32_t *group)
{
	if (!strcasecmp(qt, "nvfp4"))
		*mode = TFS_QMODE_NVFP4, *bits = 4, *group = 16;
	else if (!strcasecmp(qt, "mxfp4"))
		*mode = TFS_QMODE_MXFP4, *bits = 4, *group = 32;
	else if (!strcasecmp(qt, "mxfp8"))
		*mode = TFS_QMODE_MXFP8, *bits = 8, *group = 32;
	else if (!strcasecmp(qt, "int4") || !strcasecmp(qt, "fp4") || !strcasecmp(qt, "q4"))
		*mode = TFS_QMODE_AFFINE, *bits = 4, *group = 64;
	else if (!strcasecmp(qt, "int8") || !strcasecmp(qt, "fp8") || !strcasecmp(qt, "q8"))
		*mode = TFS_QMODE_AFFINE, *bits = 8, *group = 64;
	else
		*mode = TFS_QMODE_AFFINE, *bits = 8, *group = 32;
}

static bool common_group(int64_t g)
{
	return g == 16 || g == 32 || g == 64 || g == 128;
}

/* x/mlxrunner inferQuantTypeFromShapes: "int4"/"int8" and a group from the ratio of the
 * packed words to the scales per row; NULL when nothing fits. */
static const char *infer_quant(int64_t wcols, int64_t scols, const char *hint, int64_t *group)
{
	*group = 0;
	if (wcols <= 0 || scols <= 0 || wcols > INT64_MAX / 8)
		return NULL;
	int64_t g4 = wcols * 8 / scols, g8 = wcols * 4 / scols;
	bool h8 = hint && strchr(hint, '8'), h4 = hint && strchr(hint, '4');
	if (g4 == 32)
		return *group = 32, "int4";
	if (g8 == 64)
		return *group = 64, "int8";
	if (g4 == 64 && g8 == 32) {
		if (h8)
			return *group = 32, "int8";
		if (h4)
			return *group = 64, "int4";
	}
	if (common_group(g4) && !common_group(g8))
		return *group = g4, "int4";
	if (common_group(g8) && !common_group(g4))
		return *group = g8, "int8";
	return NULL;
}

/* Go strconv.Atoi as Ollama uses it: a bad or missing number is 0. */
static int64_t atoi_go(const json_t *v)
{
	if (!json_is_string(v))
		return 0;
	const char *s = json_string_value(v);
	int64_t x = 0;
	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (INT64_MAX - 9) / 10)
			return 0;
		x = x * 10 + (*s - '0');
	}
	return x;
}

static const char *meta_str(const json_t *meta, const char *key)
{
	const json_t *v = meta ? json_object_get(meta, key) : NULL;
	return json_is_string(v) && json_string_length(v) ? json_string_value(v) : NULL;
}

/* Index of tensor base+suffix if it came from the same blob ([first, end)), else -1. */
static long companion(const tfs_model *m, const char *base, const char *suffix, size_t first,
		      size_t end)
{
	char *n = malloc(strlen(base) + strlen(suffix) + 1);
	if (!n)
		return -1;
	strcpy(n, base);
	strcat(n, suffix);
	long j = tfs_model_find_tensor(m, n);
	free(n);
	return j >= 0 && (size_t)j >= first && (size_t)j < end ? j : -1;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_param_dtype(int dt)
{
	return dt == TFS_DT_BF16 || dt == TFS_DT_F16 || dt == TFS_DT_F32;
}

static uint64_t rows_of(const tfs_tensor *t)
{
	uint64_t r = 1;
	for (uint32_t d = 1; d < t->n_dims; d++)
		r *= (uint64_t)t->ne[d];
	return r;
}

/* Same rank and the same leading (row) dims as the packed tensor. */
static bool same_rows(const tfs_tensor *a, const tfs_tensor *b)
{
	if (a->n_dims != b->n_dims)
		return false;
	for (uint32_t d = 1; d < a->n_dims; d++)
		if (a->ne[d] != b->ne[d])
			return false;
	return true;
}

/*
 * Marks the packed tensors among [first, end) (pushed from one blob, whose
 * __metadata__ is meta) as MLX-quantized, after checking their companions'
 * shapes so that every later read stays in bounds.
 */
/* The quantization type and group of packed tensor t (its .scale sc): the blob metadata's
 * per-tensor keys, else its uniform ones, else inferred from the shapes as Ollama does.
 * NULL: not quantized. */
static const char *quant_of(const tfs_tensor *t, const tfs_tensor *sc, const json_t *meta,
			    int64_t *gs)
{
	size_t nl = strlen(t->name);
	char *key = malloc(nl + 16);
	const char *qt = NULL;
	*gs = 0;
	if (key) {
		sprintf(key, "%s.quant_type", t->name);
		qt = meta_str(meta, key);
		sprintf(key, "%s.group_size", t->name);
		*gs = atoi_go(meta ? json_object_get(meta, key) : NULL);
		free(key);
	}
	if (!qt)
		qt = meta_str(meta, "quant_type");
	if (!*gs)
		*gs = atoi_go(meta ? json_object_get(meta, "group_size") : NULL);
	int64_t inferred_gs = 0;
	const char *inferred = NULL;
	if (t->n_dims > 0 && sc->n_dims > 0)
		inferred = infer_quant(t->ne[0], sc->ne[0], qt, &inferred_gs);
	if (!*gs)
		*gs = inferred_gs;
	return qt ? qt : inferred;
}

/* The packed words and the scales' shape fit the quantization q: K values per row in whole
 * groups, scales [rows..., K / group]. */
static int check_packing(const tfs_tensor *t, const tfs_tensor *sc, const tfs_mlx_desc *q,
			 const char *qt, const char *blob, tfs_error *err)
{
	const char *name = t->name;
	if (t->dtype != TFS_DT_U32 || t->n_dims == 0 || t->ne[0] <= 0)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: quantized tensor '%s' must be U32 with at least one word "
				     "per row", blob, name);
	if (q->group == 0 || ((uint64_t)t->ne[0] * 32) % q->bits)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': %s with group %u does not fit %lld words per "
				     "row", blob, name, qt, q->group, (long long)t->ne[0]);
	uint64_t k = (uint64_t)t->ne[0] * 32 / q->bits;
	if (k % q->group)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': %llu values per row are not a whole number of "
				     "groups of %u", blob, name, (unsigned long long)k, q->group);
	if (!same_rows(t, sc) || (uint64_t)sc->ne[0] != k / q->group)
		return tfs_error_set(err, TFS_E_FORMAT,
				     "%s: tensor '%s': its .scale shape does not match %llu rows of "
				     "%llu groups", blob, name, (unsigned long long)rows_of(t),
				     (unsigned long long)(k / q->group));
	return 0;
}

/* The companions of packed tensor i besides its .scale: affine's .bias (its scale and bias
 * dtypes), the fp modes' one-byte scales, nvfp4's optional .global_scale. */
static int link_companions(tfs_model *m, size_t i, const tfs_tensor *sc, tfs_mlx_desc *q,
			   const char *qt, size_t first, size_t end, const char *blob,
			   tfs_error *err)
{
	tfs_tensor *t = &m->t[i];
	const char *name = t->name;
	const tfs_dtype_info *sdi = tfs_dtype(sc->dtype);
	if (q->mode == TFS_QMODE_AFFINE) {
		if (!is_param_dtype(sc->dtype))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': affine scales must "
					     "be BF16, F16 or F32", blob, name);
		q->scale_dtype = sc->dtype;
		long bi = companion(m, name, ".bias", first, end);
		if (bi < 0)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': affine "
					     "quantization without its .bias", blob, name);
		const tfs_tensor *bt = &m->t[bi];
		if (!same_rows(t, bt) || bt->ne[0] != sc->ne[0] || !is_param_dtype(bt->dtype))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': its .bias does "
					     "not match its .scale (shape, or dtype not BF16/F16/F32)",
					     blob, name);
		q->bias_dtype = bt->dtype;
		t->q_bias = (int32_t)bi;
	} else {
		if (!sdi || sdi->block_elems != 1 || sdi->block_bytes != 1)
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': %s scales must be "
					     "one byte each", blob, name, qt);
		q->scale_dtype = TFS_DT_U8;
	}
	long gi = q->mode == TFS_QMODE_NVFP4 ? companion(m, name, ".global_scale", first, end) : -1;
	if (gi >= 0) {
		const tfs_tensor *g = &m->t[gi];
		uint64_t gn = 1;
		for (uint32_t d = 0; d < g->n_dims; d++)
			gn *= (uint64_t)g->ne[d];
		if (!is_param_dtype(g->dtype) || (gn != 1 && gn != rows_of(t)))
			return tfs_error_set(err, TFS_E_FORMAT, "%s: tensor '%s': .global_scale "
					     "must be F32/BF16/F16, one value or one per row", blob,
					     name);
		q->gscale_dtype = g->dtype;
		t->q_gscale = (int32_t)gi;
	}
	return 0;
}

int tfs_ollama_setup_quant(tfs_model *m, size_t first, size_t end, const json_t *meta,
			   const char *blob, tfs_error *err)
{
	for (size_t i = first; i < end; i++) {
		const char *name = m->t[i].name;
		if (ends_with(name, ".scale") || ends_with(name, ".bias") ||
		    ends_with(name, ".global_scale"))
			continue;
		long si = companion(m, name, ".scale", first, end);
		if (si < 0)
			continue;
		const tfs_tensor *sc = &m->t[si];
		int64_t gs;
		const char *qt = quant_of(&m->t[i], sc, meta, &gs);
		if (!qt)
			continue; /* Ollama does not treat it as quantized either */
		tfs_mlx_desc q = { 0 };
		uint32_t defgroup;
		int rc;
		quant_params(qt, &q.mode, &q.bits, &defgroup);
		q.group = gs ? (gs > (1 << 24) ? 0 : (uint32_t)gs) : defgroup;
		if ((rc = check_packing(&m->t[i], sc, &q, qt, blob, err)) ||
		    (rc = link_companions(m, i, sc, &q, qt, first, end, blob, err)))
			return rc;
		m->t[i].q = q;
		m->t[i].q_scale = (int32_t)si;
	}
	return 0;
}
