/*
 * mlx_export.c - a per-tensor Ollama (MLX-quantized) model as mlx-lm lays a model out:
 * one safetensors file and a config.json.
 *
 * Ollama keeps each tensor in a blob of its own, a quantized weight X as X (U32 packed),
 * X.scale, X.bias (affine) and, for nvfp4, X.global_scale.  mlx-lm's QuantizedLinear and
 * QuantizedEmbedding modules hold them as <module>.weight, <module>.scales and
 * <module>.biases, where <module> is X without its ".weight", and read the quantization
 * from config.json: {"quantization": {"group_size", "bits", "mode"}, with an entry per
 * module whose parameters differ}.  So the file holds every tensor of the model with the
 * companions renamed, its __metadata__ is {"format": "mlx"} as mlx-lm writes it, and the
 * config is the model's own config.json layer with "quantization" (and its alias
 * "quantization_config") set.
 *
 * A model with an nvfp4 global scale has no such form: MLX's nvfp4 takes one scale per
 * tensor in its own convention, while Ollama multiplies by a stored value, possibly one per
 * row.  tfs_image_name says so by returning NULL for it.
 */
#include "format.h"

#include <stdlib.h>
#include <string.h>

/* The module name of a packed weight: its name without ".weight". */
static char *module_of(const char *name)
{
	size_t n = strlen(name), k = sizeof(".weight") - 1;
	if (n > k && strcmp(name + n - k, ".weight") == 0)
		n -= k;
	return strndup(name, n);
}

bool tfs_mlx_exportable(const tfs_model *m)
{
	if (tfs_model_gguf_encoded(m))
		return false;
	for (size_t i = 0; i < m->n_t; i++)
		if (!m->t[i].deleted && m->t[i].q.mode != TFS_QMODE_NONE && m->t[i].q_gscale >= 0)
			return false;
	return true;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

/* names[i]: the name tensor ts[i] has in the export (allocated). */
static int export_names(const tfs_model *m, const uint32_t *ts, size_t nt, char ***out)
{
	char **names = calloc(nt ? nt : 1, sizeof(*names));
	int32_t *slot = malloc((m->n_t ? m->n_t : 1) * sizeof(*slot));
	int rc = names && slot ? 0 : TFS_E_NOMEM;
	for (size_t i = 0; !rc && i < nt; i++)
		slot[ts[i]] = (int32_t)i;
	for (size_t i = 0; !rc && i < nt; i++) {
		const tfs_tensor *t = &m->t[ts[i]];
		if (t->q.mode == TFS_QMODE_NONE)
			continue;
		char *mod = module_of(t->name);
		const int32_t comp[2] = { t->q_scale, t->q_bias };
		const char *suffix[2] = { ".scales", ".biases" };
		for (int k = 0; mod && k < 2; k++) {
			if (comp[k] < 0 || m->t[comp[k]].deleted)
				continue;
			char *nm = malloc(strlen(mod) + 9);
			if (!nm)
				break;
			strcpy(nm, mod);
			strcat(nm, suffix[k]);
			free(names[slot[comp[k]]]);
			names[slot[comp[k]]] = nm;
		}
		rc = mod ? 0 : TFS_E_NOMEM;
		free(mod);
	}
	for (size_t i = 0; !rc && i < nt; i++)
		if (!names[i] && !(names[i] = strdup(m->t[ts[i]].name)))
			rc = TFS_E_NOMEM;
	free(slot);
	if (rc) {
		free_names(names, nt);
		return rc;
	}
	*out = names;
	return 0;
}

/* Two tensors of the export with the same name (a model holding both X.scale and
 * X.scales, say) would make an invalid file. */
static int check_unique(const tfs_model *m, char **names, size_t nt, tfs_error *err)
{
	json_t *seen = json_object();
	int rc = seen ? 0 : TFS_E_NOMEM;
	for (size_t i = 0; !rc && i < nt; i++) {
		if (json_object_get(seen, names[i]))
			rc = tfs_error_set(err, TFS_E_INVALID,
					   "%s: two tensors would be named '%s' in the mlx-lm layout",
					   m->path, names[i]);
		else if (json_object_set_new(seen, names[i], json_true()))
			rc = TFS_E_NOMEM;
	}
	json_decref(seen);
	return rc;
}

int tfs_mlx_image(tfs_image **out, const tfs_model *m, tfs_error *err)
{
	uint32_t *ts = malloc((m->n_t ? m->n_t : 1) * sizeof(*ts));
	char **names = NULL;
	json_t *meta = json_pack("{s:s}", "format", "mlx");
	size_t nt = 0;
	int rc = ts && meta ? 0 : TFS_E_NOMEM;
	*out = NULL;
	if (!rc && !tfs_mlx_exportable(m))
		rc = tfs_error_set(err, TFS_E_UNSUPPORTED,
				   "%s: an nvfp4 global scale has no mlx-lm form", m->path);
	for (size_t i = 0; !rc && i < m->n_t; i++)
		if (!m->t[i].deleted)
			ts[nt++] = (uint32_t)i;
	if (!rc)
		rc = export_names(m, ts, nt, &names);
	if (!rc)
		rc = check_unique(m, names, nt, err);
	if (!rc)
		rc = tfs_safetensors_image_named(out, m, ts, nt, (const char *const *)names, meta,
						 err);
	if (rc == TFS_E_NOMEM)
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	free_names(names, nt);
	json_decref(meta);
	free(ts);
	return rc;
}

/* ==== config.json ==== */

/* {"group_size", "bits"[, "mode"]} of a packed tensor, as mlx-lm's config says it. */
static json_t *quant_entry(const tfs_mlx_desc *q)
{
	json_t *e = json_pack("{s:I,s:I}", "group_size", (json_int_t)q->group, "bits",
			      (json_int_t)q->bits);
	if (e && q->mode != TFS_QMODE_AFFINE &&
	    json_object_set_new(e, "mode", json_string(tfs_qmode_name(q->mode)))) {
		json_decref(e);
		return NULL;
	}
	return e;
}

/* The parameters most packed tensors have (the default), and one entry per module whose
 * parameters differ. */
static json_t *quantization(const tfs_model *m)
{
	const tfs_mlx_desc *best = NULL;
	size_t best_n = 0;
	for (size_t i = 0; i < m->n_t; i++) {
		const tfs_mlx_desc *q = &m->t[i].q;
		size_t n = 0;
		if (m->t[i].deleted || q->mode == TFS_QMODE_NONE)
			continue;
		for (size_t j = 0; j < m->n_t; j++)
			n += !m->t[j].deleted && m->t[j].q.mode == q->mode &&
			     m->t[j].q.bits == q->bits && m->t[j].q.group == q->group;
		if (n > best_n)
			best = q, best_n = n;
		if (2 * n > m->n_t)
			break; /* a majority: no other can have more */
	}
	if (!best)
		return NULL;
	json_t *root = quant_entry(best);
	for (size_t i = 0; root && i < m->n_t; i++) {
		const tfs_tensor *t = &m->t[i];
		if (t->deleted || t->q.mode == TFS_QMODE_NONE ||
		    (t->q.mode == best->mode && t->q.bits == best->bits &&
		     t->q.group == best->group))
			continue;
		char *mod = module_of(t->name);
		if (!mod || json_object_set_new(root, mod, quant_entry(&t->q))) {
			json_decref(root);
			root = NULL;
		}
		free(mod);
	}
	return root;
}

/* The model's config.json (a json layer of that name), parsed; an empty object when it
 * has none. */
static json_t *config_layer(const tfs_model *m, tfs_error *err)
{
	for (size_t i = 0; i < m->n_x; i++) {
		const tfs_extra *x = &m->x[i];
		/* a json layer named config.json (layers/json:config.json), not the manifest's
		 * config blob (layers/config.json) */
		if (x->deleted || strcmp(x->media_type, "application/vnd.ollama.image.json") != 0 ||
		    strcmp(x->name, "json:config.json") != 0)
			continue;
		json_error_t je;
		const tfs_source *s = &m->src[x->src];
		json_t *c = s->map ? json_loadb((const char *)s->map + x->offset, (size_t)x->size,
						0, &je) : NULL;
		if (!json_is_object(c)) {
			json_decref(c);
			tfs_error_set(err, TFS_E_FORMAT, "%s: layer config.json is not a JSON object",
				      m->path);
			return NULL;
		}
		return c;
	}
	json_t *c = json_object();
	if (!c)
		tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	return c;
}

const char *tfs_mlx_config_name(const tfs_model *m)
{
	return tfs_mlx_exportable(m) ? "config.json" : NULL;
}

int tfs_mlx_config_json(tfs_buf *out, const tfs_model *m, tfs_error *err)
{
	json_t *c = config_layer(m, err);
	if (!c)
		return err->code ? err->code : TFS_E_NOMEM;
	json_t *q = quantization(m);
	int rc = 0;
	if (q && (json_object_set(c, "quantization", q) ||
		  json_object_set(c, "quantization_config", q)))
		rc = TFS_E_NOMEM;
	char *text = rc ? NULL : json_dumps(c, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
	if (!text || tfs_buf_append(out, text, strlen(text)) || tfs_buf_append(out, "\n", 1))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	free(text);
	json_decref(q);
	json_decref(c);
	return rc;
}
