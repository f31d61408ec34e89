/*
 * quantize.c - the quantized view of a model (quantize.h): a GGUF model laid out as
 * llama-quantize writes it (qplan.h), built from the header alone.
 *
 * Its keys are the base's (payloads borrowed from it: the base lives as long as the view)
 * with the plan's changes; its tensors come in the plan's order; its first sources are
 * copies of the base's (tfs_source_hold), so a tensor whose type does not change keeps its
 * source and offset (read, spliced and cloned as before), and src[0] stays the file the
 * model was opened from; then one computed source per quantized tensor (quantize_pool.c).
 * The view's state (quantize_impl.h: the owner model, the plan, the pool) is the view
 * model's owner, freed with it once no source (or copy of one) refers to it.
 */
#include "quantize_impl.h"
#include "format.h"
#include "image_impl.h"
#include "registry.h"
#include "view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool tfs_quant_type_valid(const char *name)
{
	return tfs_ftype_parse(name) >= 0;
}

int tfs_quant_type_list(tfs_buf *out)
{
	return tfs_ftype_list(out);
}

/* The plan's inputs: the file type, the importance matrix (opened into v->im). */
static int make_plan(tfs_qview *v, const tfs_quant_opts *o, tfs_error *err)
{
	int ftype = tfs_ftype_parse(o->quantize);
	if (ftype < 0) {
		tfs_buf names = { 0 };
		tfs_ftype_list(&names);
		int rc = tfs_error_set(err, TFS_E_INVALID, "quantize=%s: not a type llama-quantize "
				       "knows (valid: %s)", o->quantize ? o->quantize : "",
				       names.data ? names.data : "");
		tfs_buf_free(&names);
		return rc;
	}
	if (!tfs_model_gguf_encoded(v->base) && tfs_model_gguf_view_why(v->owner))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quantize= needs a GGUF model, "
				     "and this repo's GGUF view cannot be made: %s",
				     tfs_model_path(v->owner), tfs_model_gguf_view_why(v->owner));
	if (!tfs_model_gguf_encoded(v->base))
		return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: quantize= needs a GGUF model (a "
				     "GGUF file, a classic Ollama model, or a Hugging Face repo's "
				     "GGUF view); this is a %s model", tfs_model_path(v->owner),
				     tfs_model_format_name(v->base));
	int rc = o->imatrix ? tfs_imatrix_open(&v->im, o->imatrix, err) : 0;
	tfs_qplan_opts qo = { .imatrix = v->im };
	if (v->im) {   /* the quantize.imatrix.* keys the llama-quantize program adds */
		qo.imatrix_file = tfs_imatrix_path(v->im);
		qo.imatrix_dataset = tfs_imatrix_dataset(v->im);
		qo.imatrix_entries = (int64_t)tfs_imatrix_n_entries(v->im);
		qo.imatrix_chunks = tfs_imatrix_chunks(v->im);
	}
	if (!rc && (rc = tfs_qplan_new(&v->plan, v->base, ftype, &qo, err))) {
		char msg[TFS_ERRMSG_MAX];
		const char *path = tfs_model_path(v->base), *why = err->msg;
		size_t n = strlen(path);
		if (!strncmp(why, path, n) && !strncmp(why + n, ": ", 2))
			why += n + 2;  /* (the plan's messages about the model name it) */
		snprintf(msg, sizeof(msg), "%s", why);
		rc = tfs_error_set(err, rc, "%s: cannot be quantized to %s: %s",
				   tfs_model_path(v->owner), tfs_ftype_name(ftype), msg);
	}
	return rc;
}

/* The base's live keys, then the plan's changes. */
static int copy_keys(tfs_model *m, const tfs_qview *v, tfs_error *err)
{
	for (size_t i = 0; i < tfs_model_n_kv(v->base); i++) {
		const tfs_kv *kv = tfs_model_kv(v->base, i);
		int rc = kv->deleted ? 0 : tfs_model_push_kv(m, kv->name, strlen(kv->name),
							     kv->type, kv->data, kv->len, err);
		if (rc)
			return rc;
	}
	return tfs_qplan_apply_kv(v->plan, m, err);
}

/* Copies of the base's sources, at the same indices. */
static int hold_sources(tfs_model *m, const tfs_qview *v, tfs_error *err)
{
	size_t n = tfs_model_n_sources(v->base);
	if (!(m->src = calloc(n + v->n_t + 1, sizeof(*m->src))))
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	m->cap_src = n + v->n_t + 1;
	for (; m->n_src < n; m->n_src++) {
		int rc = tfs_source_hold(&m->src[m->n_src], tfs_model_source(v->base, m->n_src),
					 err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Tensor q of the plan: the base's source and offset, or a computed source (*t). */
static int add_tensor(tfs_model *m, tfs_qview *v, const tfs_qtensor *q, tfs_qt **t,
		      tfs_error *err)
{
	const tfs_tensor *bt = tfs_model_tensor(v->base, q->tensor);
	tfs_view_tensor vt = { .name = q->name, .dtype = q->dtype, .n_dims = q->n_dims,
			       .ne = q->ne, .nbytes = q->nbytes, .src = bt->src,
			       .offset = bt->offset };
	if (q->convert) {
		(*t)->q = q;
		(*t)->v = v;
		v->refs++;  /* the source's reference, given back by its release */
		vt.ops = &tfs_qt_ops;
		vt.ctx = (*t)++;
		vt.label = tfs_dtype(q->dtype)->name;
	}
	return tfs_model_add_view_tensor(m, &vt, err);
}

/* The view model of v (the plan made). */
static int build(tfs_model **out, tfs_qview *v, tfs_error *err)
{
	tfs_model *m;
	size_t n = tfs_qplan_n_tensors(v->plan);
	int rc = tfs_model_new(&m, &tfs_gguf_format, tfs_model_path(v->owner), err);
	if (rc)
		return rc;
	m->gguf_version = 3;
	m->alignment = tfs_qplan_alignment(v->plan);
	for (size_t i = 0; i < n; i++)
		v->n_t += tfs_qplan_tensor(v->plan, i)->convert;
	tfs_qt *t = v->t = calloc(v->n_t ? v->n_t : 1, sizeof(*v->t));
	rc = t ? 0 : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	if (!rc && !(rc = copy_keys(m, v, err)) && !(rc = hold_sources(m, v, err)))
		for (size_t i = 0; i < n && !rc; i++)
			rc = add_tensor(m, v, tfs_qplan_tensor(v->plan, i), &t, err);
	tfs_image *im = NULL;
	if (!rc && !(rc = tfs_model_image(&im, m, false, err)))
		m->data_offset = im->head.len;  /* index.json's: where model.gguf's data starts */
	tfs_image_free(im);
	if (rc) {
		tfs_model_free(m);
		return rc;
	}
	m->changed = true; /* not the source's bytes: `tensorfs convert` writes it */
	*out = m;
	return 0;
}

static void owner_free(void *p)
{
	tfs_qview *v = p;
	pthread_mutex_lock(&v->mu);
	bool last = --v->refs == 0;
	pthread_mutex_unlock(&v->mu);
	if (last)
		tfs_qview_free(v);
}

static void owner_quiesce(void *p)
{
	tfs_qview *v = p;
	tfs_qview_quiesce(v);
	tfs_model_quiesce(v->owner); /* the model quantized, and what it reads */
}

int tfs_quant_view(tfs_model **out, tfs_model *owner, const tfs_model *base,
		   const tfs_quant_opts *o, tfs_error *err)
{
	tfs_model *m = NULL;
	tfs_qview *v = calloc(1, sizeof(*v));
	*out = NULL;
	if (!v) {
		tfs_model_free(owner);
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	}
	pthread_mutex_init(&v->mu, NULL);
	pthread_cond_init(&v->work, NULL);
	pthread_cond_init(&v->done, NULL);
	v->owner = owner;
	v->base = base;
	v->refs = 1; /* the view model's, until it is made */
	int rc = make_plan(v, o, err);
	if (!rc)
		rc = build(&m, v, err);
	if (!rc)
		rc = tfs_qview_start(v, o, err);
	if (rc) {
		tfs_model_free(m);   /* its sources' references */
		owner_free(v);
		return rc;
	}
	m->owner = v;
	m->owner_free = owner_free;
	m->owner_quiesce = owner_quiesce;
	*out = m;
	return 0;
}

const char *tfs_quant_view_note(const tfs_model *m)
{
	return m && m->owner_free == owner_free ? ((tfs_qview *)m->owner)->note : NULL;
}

/* ==== the view's row (registry.c) ==== */

/* -o quantize: the model opened is its quantized view (of a repo's GGUF view). */
int tfs_quant_view_open(tfs_model **m, const char *source, const tfs_open_opts *o,
			tfs_error *err)
{
	(void)source;
	if (!tfs_open_opt(o, "quantize"))
		return 0;
	tfs_model *owner = *m;
	const tfs_model *base = tfs_model_gguf_view(owner) ? tfs_model_gguf_view(owner) : owner;
	/* the base's values depend on the GGUF view's options: the cache's salt */
	const char *outtype = tfs_open_opt(o, "outtype");
	char salt[64];
	snprintf(salt, sizeof salt, "%s%s", outtype ? outtype : "",
		 tfs_view_opt_on(o, "fp8_as_q8") ? "+fp8_as_q8" : "");
	tfs_quant_opts qo = { .quantize = tfs_open_opt(o, "quantize"),
			      .imatrix = tfs_open_opt(o, "imatrix"), .cache_dir = o->cache_dir,
			      .salt = *salt ? salt : NULL, .cache_size = o->cache_size,
			      .threads = tfs_view_opt_number(o, "quantize_threads") };
	*m = NULL; /* (tfs_quant_view takes it over, freed on failure) */
	return tfs_quant_view(m, owner, base, &qo, err);
}

/* Two types are one when llama-quantize reads them as one ("q4_k_m", "Q4_K_M", "15"). */
static bool same_type(const char *a, const char *b)
{
	int fa = tfs_ftype_parse(a), fb = tfs_ftype_parse(b);
	return fa >= 0 && fb >= 0 ? fa == fb : strcasecmp(a, b) == 0;
}

/* The journal records a type by its name. */
static const char *type_name(const char *v)
{
	const char *name = tfs_ftype_name(tfs_ftype_parse(v));
	return name ? name : v;
}

/* quantize=: a type llama-quantize knows (the row's check). */
static int type_check(const char *v, tfs_error *err)
{
	if (tfs_ftype_parse(v) >= 0)
		return 0;
	tfs_buf names = { 0 };
	tfs_ftype_list(&names);
	int rc = tfs_error_set(err, TFS_E_INVALID, "quantize=%s: not a type llama-quantize "
			       "knows (valid: %s)", v, names.data ? names.data : "");
	tfs_buf_free(&names);
	return rc;
}

/* quantize_threads=: 0 (one per CPU, at most 8) to 256 (its number is parsed already). */
static int threads_check(const char *v, tfs_error *err)
{
	if (strtoul(v, NULL, 10) <= 256)
		return 0;
	return tfs_error_set(err, TFS_E_INVALID, "quantize_threads=%s: takes 1 to 256 (0 or "
			     "none: one per CPU, at most 8)", v);
}

const tfs_view_opt tfs_quant_view_opts[] = {
	{ .name = "quantize", .kind = TFS_VOPT_STRING, .option = true, .asks = true,
	  .same = same_type, .spelled = type_name, .check = type_check },
	{ .name = "imatrix", .kind = TFS_VOPT_FILE, .option = true, .none = "" },
	{ .name = "quantize_threads", .kind = TFS_VOPT_HOW, .option = true,
	  .check = threads_check },
	{ 0 },
};
