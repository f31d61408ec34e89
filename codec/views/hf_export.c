/*
 * hf_export.c - a GGUF model as a Hugging Face repo (the mount's hf/): the GGUF view's
 * direction reversed, from the same rows (hf/hf_export.h).
 *
 * The repo is attached to the model opened (a GGUF file, a classic Ollama model, the
 * quantized view: any model whose tensors are GGUF-encoded) as its "hf repo": a safetensors
 * model in memory (model.safetensors) whose tensors are computed sources, each reading its
 * GGUF tensor's f32 view a few thousand elements at a time (tfs_hf_export_read), and the
 * small files (config.json, tokenizer.json, ...) made on request.  When the model has no
 * Hugging Face form, the reason is kept instead (tfs_hf_repo_why), in one line; the model
 * opens all the same and nothing else of it changes.
 *
 * -o hf_dtype=bf16|f16|f32 picks the tensors' dtype (bf16 by default, as most checkpoints
 * are); it says how the repo shows, not what a staging journal's edits apply to, so it is
 * never recorded.
 */
#include "view.h"
#include "registry.h"
#include "model_impl.h"
#include "hf_export.h"
#include "format.h"
#include "dtype.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The repo: the export, the safetensors model of its tensors, shared by reference (the
 * model it is attached to, the safetensors model, every computed source and its holds). */
typedef struct {
	pthread_mutex_t mu;
	unsigned refs;
	tfs_hf_export *x;
	tfs_model *st;
	struct hf_repo_tensor *t; /* each computed source's ctx */
} hf_repo;

static void repo_unref(void *p)
{
	hf_repo *r = p;
	pthread_mutex_lock(&r->mu);
	bool last = --r->refs == 0;
	pthread_mutex_unlock(&r->mu);
	if (!last)
		return;
	tfs_hf_export_free(r->x);
	free(r->t);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static hf_repo *repo_ref(hf_repo *r)
{
	pthread_mutex_lock(&r->mu);
	r->refs++;
	pthread_mutex_unlock(&r->mu);
	return r;
}

/* the attachment's free: the safetensors model (its sources give back their references),
 * then the model's own reference */
static void repo_detach(void *p)
{
	hf_repo *r = p;
	tfs_model *st = r->st;
	r->st = NULL;
	tfs_model_free(st);
	repo_unref(r);
}

/* ==== the computed tensors ==== */

typedef struct hf_repo_tensor repo_tensor;
struct hf_repo_tensor {
	hf_repo *r;
	size_t i;
};

static int64_t tensor_read(void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	repo_tensor *t = ctx;
	return tfs_hf_export_read(t->r->x, t->i, off, len, buf, err);
}

static void *tensor_hold(void *ctx)
{
	repo_ref(((repo_tensor *)ctx)->r);
	return ctx;
}

static void tensor_release(void *ctx) { repo_unref(((repo_tensor *)ctx)->r); }

static const tfs_computed_ops tensor_ops = {
	.read = tensor_read, .hold = tensor_hold, .release = tensor_release,
};

/* "safetensors" metadata transformers checks: {"format": "pt"} */
static const uint8_t format_pt[] = { 2, 0, 0, 0, 0, 0, 0, 0, 'p', 't' };

static int build(hf_repo *r, const tfs_model *m, tfs_error *err)
{
	int rc = tfs_model_new(&r->st, &tfs_safetensors_format, tfs_model_path(m), err);
	if (!rc)
		rc = tfs_model_push_kv(r->st, "format", 6, TFS_GGUF_STRING, format_pt,
				       sizeof format_pt, err);
	size_t n = tfs_hf_export_n_tensors(r->x);
	int dt = tfs_hf_export_dtype(r->x);
	if (!rc && !(r->t = calloc(n ? n : 1, sizeof *r->t)))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	for (size_t i = 0; !rc && i < n; i++) {
		const tfs_hf_xtensor *t = tfs_hf_export_tensor(r->x, i);
		repo_tensor *c = &r->t[i];
		*c = (repo_tensor){ repo_ref(r), i }; /* the source's, given back by its release */
		tfs_view_tensor vt = { .name = t->name, .dtype = dt, .n_dims = t->n_dims,
				       .ne = t->ne, .nbytes = t->rows * t->cols *
						tfs_dtype(dt)->block_bytes,
				       .src = -1, .ops = &tensor_ops, .ctx = c,
				       .label = tfs_dtype(dt)->name };
		rc = tfs_model_add_view_tensor(r->st, &vt, err); /* (c released on failure) */
	}
	return rc;
}

static int parse_dtype(int *out, const char *v, tfs_error *err)
{
	if (!v || !strcasecmp(v, "bf16"))
		*out = TFS_DT_BF16;
	else if (!strcasecmp(v, "f16"))
		*out = TFS_DT_F16;
	else if (!strcasecmp(v, "f32"))
		*out = TFS_DT_F32;
	else
		return tfs_error_set(err, TFS_E_INVALID, "hf_dtype=%s: not a dtype of the hf/ "
				     "view (valid: bf16, f16, f32)", v);
	return 0;
}

/* ==== the view's row (registry.c) ==== */

/* what the row attaches to the model: the repo (index.json does not list it: hf/ does) */
const tfs_attach_kind tfs_hf_repo_attach = { .name = "the hf/ view", .free = repo_detach };

int tfs_hf_repo_view_open(tfs_model **m, const char *source, const tfs_open_opts *o,
			  tfs_error *err)
{
	int dtype = TFS_DT_BF16;
	(void)source;
	int rc = parse_dtype(&dtype, tfs_open_opt(o, "hf_dtype"), err);
	if (rc || !tfs_model_gguf_encoded(*m))
		return rc;
	hf_repo *r = calloc(1, sizeof *r);
	if (!r)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	pthread_mutex_init(&r->mu, NULL);
	r->refs = 1;
	tfs_error why;
	if ((rc = tfs_hf_export_open(&r->x, *m, dtype, &why)) || (rc = build(r, *m, &why))) {
		repo_detach(r);
		if (rc == TFS_E_NOMEM)
			return tfs_error_set(err, rc, "%s", why.msg);
		return tfs_model_attach(*m, &tfs_hf_repo_attach, NULL, why.msg, err);
	}
	return tfs_model_attach(*m, &tfs_hf_repo_attach, r, NULL, err);
}

/* hf_dtype=: bf16, f16 or f32 (the row's check: a usage error before anything opens) */
static int dtype_check(const char *v, tfs_error *err)
{
	int dtype;
	return parse_dtype(&dtype, v, err);
}

const tfs_view_opt tfs_hf_repo_view_opts[] = {
	{ .name = "hf_dtype", .kind = TFS_VOPT_STRING, .option = true, .none = "bf16",
	  .shown = "bf16", .check = dtype_check },
	{ 0 },
};

/* hf_dtype= decides how hf/ shows, never the model a journal's edits apply to */
bool tfs_hf_repo_applies(const char *source)
{
	(void)source;
	return false;
}

/* ==== what fs/ reads ==== */

static const hf_repo *repo_of(const tfs_model *m)
{
	return tfs_model_attached(m, &tfs_hf_repo_attach);
}

const tfs_model *tfs_hf_repo_model(const tfs_model *m)
{
	const hf_repo *r = repo_of(m);
	return r ? r->st : NULL;
}

const char *tfs_hf_repo_why(const tfs_model *m)
{
	return tfs_model_attached_why(m, &tfs_hf_repo_attach);
}

const char *tfs_hf_repo_tok_why(const tfs_model *m)
{
	const hf_repo *r = repo_of(m);
	return r && r->x->tok_why[0] ? r->x->tok_why : NULL;
}

size_t tfs_hf_repo_n_files(const tfs_model *m)
{
	const hf_repo *r = repo_of(m);
	return r ? tfs_hf_export_n_files(r->x) : 0;
}

const char *tfs_hf_repo_file_name(const tfs_model *m, size_t i)
{
	const hf_repo *r = repo_of(m);
	return r ? tfs_hf_export_file_name(r->x, i) : NULL;
}

int tfs_hf_repo_file(tfs_buf *out, const tfs_model *m, size_t i, tfs_error *err)
{
	const hf_repo *r = repo_of(m);
	if (!r)
		return tfs_error_set(err, TFS_E_NOTFOUND, "no hf/ view");
	return tfs_hf_export_file(out, r->x, i, err);
}
