/*
 * hf.c - a Hugging Face repo's GGUF view: the file llama.cpp's convert_hf_to_gguf.py writes,
 * computed from the repo (hf/hf_plan.h) without converting it.
 *
 * The view is a GGUF model whose keys are the plan's (payloads borrowed from the plan) and
 * whose tensors are, in the plan's order:
 *   - the source tensor's bytes as they are (a copy, no permutation): the base's source
 *     and offset, so they are read, spliced and cloned as tensors/ is;
 *   - a Q/K-permuted copy: a computed source whose reads permute rows by offset arithmetic
 *     and whose splice_fd gives the shard's file at the row's offset (a run of one row);
 *   - a converted tensor (another outtype) or a generated one (rope_freqs): a computed
 *     source that computes its bytes on each read (tfs_hf_tensor_read: bounded chunks).
 * The view's first sources are copies of the base's (tfs_source_hold), at the same indices,
 * so src[0] is the first shard; the computed ones follow.  Its state (hf_view: the plan, the
 * copies it splices from, the base when the view is the model) is shared by reference: the
 * view model, each computed source and each held copy of one (an image being read).
 */
#include "view.h"
#include "registry.h"
#include "model_impl.h"
#include "hf_plan.h"
#include "hf_mmproj.h"
#include "format.h"
#include "remote.h"
#include "concat.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* A repo file read whole (tokenizer.json of a large vocabulary: tens of MB). */
#define HF_FILE_CAP ((uint64_t)256 << 20)

typedef struct hf_view hf_view;

/* A tensor of the view made by a computed source. */
typedef struct {
	hf_view *v;
	size_t i;              /* the plan's tensor */
	int32_t src;           /* the source holding its source tensor's bytes (-1: none) */
	uint64_t off, nbytes;  /* where they are in it */
} hf_tensor;

struct hf_view {
	pthread_mutex_t mu;
	unsigned refs;
	tfs_hf_plan *plan;
	tfs_model *base;       /* the safetensors model the plan reads */
	bool owns_base;        /* the view is the model opened (rw,output=X.gguf) */
	tfs_source *src;       /* copies of the base's sources, to splice from */
	size_t n_src;
	hf_tensor *t;
	size_t n_t;
	/* the repo's files, while the plan is made */
	const char *spec;      /* hf://ORG/REPO[@REV], s3://B/PREFIX/, or NULL (a local directory) */
	char *where;           /* spec as messages name the repo (no trailing '/') */
	tfs_open_opts oo;
};

static void view_unref(hf_view *v)
{
	pthread_mutex_lock(&v->mu);
	bool last = --v->refs == 0;
	pthread_mutex_unlock(&v->mu);
	if (!last)
		return;
	tfs_hf_plan_free(v->plan);
	free(v->where);
	for (size_t i = 0; i < v->n_src; i++)
		tfs_source_free(&v->src[i]);
	free(v->src);
	free(v->t);
	if (v->owns_base)
		tfs_model_free(v->base);
	pthread_mutex_destroy(&v->mu);
	free(v);
}

static void *view_ref(hf_view *v)
{
	pthread_mutex_lock(&v->mu);
	v->refs++;
	pthread_mutex_unlock(&v->mu);
	return v;
}

/* ==== the computed sources ==== */

static int64_t tensor_read(void *ctx, void *buf, uint64_t len, uint64_t off, tfs_error *err)
{
	hf_tensor *t = ctx;
	return tfs_hf_tensor_read(t->v->plan, t->i, off, len, buf, err);
}

/* A permuted row's bytes: the shard's file at the row's offset. */
static int tensor_splice_fd(void *ctx, uint64_t off, uint64_t len, tfs_source_fd *out,
			    tfs_error *err)
{
	hf_tensor *t = ctx;
	uint64_t at, run;
	if (t->src < 0 || tfs_hf_tensor_locate(t->v->plan, t->i, off, &at, &run))
		return TFS_PASSTHROUGH;
	return tfs_source_splice_fd(out, &t->v->src[t->src], t->off + at, run < len ? run : len,
				    t->off, t->off + t->nbytes, err);
}

static void *tensor_hold(void *ctx)
{
	view_ref(((hf_tensor *)ctx)->v);
	return ctx;
}

static void tensor_release(void *ctx) { view_unref(((hf_tensor *)ctx)->v); }

static const tfs_computed_ops tensor_ops = {
	.read = tensor_read, .splice_fd = tensor_splice_fd, .hold = tensor_hold,
	.release = tensor_release,
};

/* ==== the repo's files ==== */

static int remote_file(void *ctx, const char *name, uint8_t **data, uint64_t *len,
		       tfs_error *err)
{
	hf_view *v = ctx;
	char *url = tfs_remote_join(v->spec, name);
	if (!url)
		return tfs_error_set(err, TFS_E_NOMEM, "%s: out of memory", v->spec);
	int rc = tfs_remote_fetch_small(url, &v->oo, HF_FILE_CAP, NULL, data, len, NULL, err);
	free(url);
	return rc;
}

bool tfs_hf_is_repo(const char *source)
{
	if (tfs_is_remote(source)) /* hf://ORG/REPO, s3://BUCKET/PREFIX/ */
		return tfs_remote_is_dir(source);
	struct stat st;
	char cfg[PATH_MAX];
	if (stat(source, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	snprintf(cfg, sizeof(cfg), "%s/config.json", source);
	return stat(cfg, &st) == 0;
}

/* The directory's name as the converter sees it (general.name's fallback): a directory's
 * last component, a repo's name. */
static void repo_name(char *out, size_t cap, const char *source)
{
	const tfs_scheme *s = tfs_scheme_of(source);
	if (s) { /* as the scheme's row names a directory */
		s->dir_name(out, cap, source);
		return;
	}
	char *abs = realpath(source, NULL);
	snprintf(out, cap, "%s", tfs_basename(abs ? abs : source));
	free(abs);
}

/* ==== the view model ==== */

static int hold_sources(tfs_model *m, hf_view *v, tfs_error *err)
{
	size_t n = tfs_model_n_sources(v->base);
	if (!(v->src = calloc(n ? n : 1, sizeof(*v->src))) ||
	    !(m->src = calloc(n + v->n_t + 1, sizeof(*m->src))))
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	m->cap_src = n + v->n_t + 1;
	while (v->n_src < n) {
		const tfs_source *s = tfs_model_source(v->base, v->n_src);
		int rc = tfs_source_hold(&v->src[v->n_src], s, err);
		if (rc)
			return rc;
		v->n_src++;
		if ((rc = tfs_source_hold(&m->src[m->n_src], s, err)))
			return rc;
		m->n_src++;
	}
	return 0;
}

/* ==== stacked expert tensors (MoE): their experts' bytes one after another ==== */

static int64_t stack_read(void *owner, const void *arg, void *buf, uint64_t len, uint64_t off,
			  tfs_error *err)
{
	const hf_tensor *t = arg;
	return tfs_hf_tensor_read(((hf_view *)owner)->plan, t->i, off, len, buf, err);
}

static void stack_ref(void *owner) { view_ref(owner); }
static void stack_unref(void *owner) { view_unref(owner); }

/* converted: computed on read; copied: the experts' bytes, spliced from their shards */
static const tfs_concat_ops stack_conv_ops = {
	.read = stack_read, .ref = stack_ref, .unref = stack_unref,
};
static const tfs_concat_ops stack_copy_ops = {
	.read = stack_read, .splice = true, .ref = stack_ref, .unref = stack_unref,
};

/* A stacked tensor's source: a concatenation of its experts' tensors in the view's copies of
 * the shards (index.json lists each expert's shard and offset). */
static int add_stack(tfs_model *m, hf_view *v, size_t i, const tfs_hf_tensor *pt, int32_t *src,
		     tfs_error *err)
{
	tfs_concat_piece *pc = calloc(pt->n_parts, sizeof *pc);
	if (!pc)
		return tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	for (uint32_t k = 0; k < pt->n_parts; k++) {
		const tfs_tensor *bt = tfs_model_tensor(v->base, (size_t)pt->parts[k]);
		pc[k] = (tfs_concat_piece){ &v->src[bt->src], bt->offset, bt->nbytes };
	}
	hf_tensor *t = &v->t[v->n_t++];
	*t = (hf_tensor){ v, i, -1, 0, 0 };
	view_ref(v); /* the source's, given back by its last unref */
	int rc = tfs_model_add_concat_source(m, pt->name, pc, pt->n_parts, pt->nbytes,
					     pt->raw ? &stack_copy_ops : &stack_conv_ops, v, t, src,
					     err);
	free(pc);
	return rc;
}

/* Tensor i of the plan: the base's bytes where they are, else a computed source. */
static int add_tensor(tfs_model *m, hf_view *v, size_t i, tfs_error *err)
{
	const tfs_hf_tensor *pt = tfs_hf_plan_tensor(v->plan, i);
	const tfs_tensor *bt = pt->src >= 0 ? tfs_model_tensor(v->base, (size_t)pt->src) : NULL;
	tfs_view_tensor vt = { .name = pt->name, .dtype = pt->dtype, .n_dims = pt->n_dims,
			       .ne = pt->ne, .nbytes = pt->nbytes, .src = bt ? bt->src : -1,
			       .offset = bt ? bt->offset : 0 };
	int rc;
	if (pt->n_parts) {
		if ((rc = add_stack(m, v, i, pt, &vt.src, err)))
			return rc;
		vt.offset = 0;
	} else if (!bt || !pt->raw) {
		hf_tensor *t = &v->t[v->n_t++];
		*t = (hf_tensor){ v, i, vt.src, vt.offset, bt ? bt->nbytes : 0 };
		vt.ops = &tensor_ops;
		vt.ctx = t;
		vt.label = pt->perm_heads ? "permuted" : bt ? tfs_dtype(pt->dtype)->name
							      : "generated";
		view_ref(v); /* the source's, given back by its release */
	}
	return tfs_model_add_view_tensor(m, &vt, err);
}

static int build(tfs_model **out, hf_view *v, tfs_error *err)
{
	tfs_model *m;
	size_t n = tfs_hf_plan_n_tensors(v->plan), n_t = 0;
	int rc = tfs_model_new(&m, &tfs_gguf_format, tfs_model_path(v->base), err);
	if (rc)
		return rc;
	m->gguf_version = 3;
	m->alignment = 32;
	m->data_offset = tfs_hf_plan_header_size(v->plan);
	for (size_t i = 0; i < n; i++)
		n_t += !tfs_hf_plan_tensor(v->plan, i)->raw || tfs_hf_plan_tensor(v->plan, i)->n_parts;
	if (!(v->t = calloc(n_t ? n_t : 1, sizeof(*v->t))))
		rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	const tfs_hf_kvs *kvs = tfs_hf_plan_kvs(v->plan);
	for (size_t i = 0; !rc && i < kvs->n; i++)
		rc = tfs_model_push_kv(m, kvs->kv[i].name, strlen(kvs->kv[i].name),
				       kvs->kv[i].type, kvs->kv[i].data, kvs->kv[i].len, err);
	if (!rc)
		rc = hold_sources(m, v, err);
	for (size_t i = 0; !rc && i < n; i++)
		rc = add_tensor(m, v, i, err);
	if (rc) {
		tfs_model_free(m);
		return rc;
	}
	m->changed = true; /* not the repo's bytes: a repack writes it */
	m->owner = view_ref(v);
	m->owner_free = (void (*)(void *))view_unref;
	*out = m;
	return 0;
}

static int parse_outtype(tfs_hf_outtype *out, const char *name, tfs_error *err)
{
	static const char *const names[] = { "auto", "f32", "f16", "bf16", "q8_0" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!name || strcasecmp(name, names[i]) == 0) {
			*out = name ? (tfs_hf_outtype)i : TFS_HF_OUT_AUTO;
			return 0;
		}
	return tfs_error_set(err, TFS_E_INVALID, "outtype=%s: not an output type of the GGUF "
			     "view (valid: auto, f32, f16, bf16, q8_0)", name);
}

const char *tfs_hf_view_class(size_t i)
{
	return tfs_hf_class_name(i);
}

bool tfs_outtype_valid(const char *name)
{
	tfs_hf_outtype t;
	tfs_error err;
	return name && parse_outtype(&t, name, &err) == 0;
}

/* The plan of base's repo (plan_open: the text model's or the projector's), then its
 * view model. */
typedef int (*plan_open_fn)(tfs_hf_plan **out, const tfs_hf_files *files, const tfs_model *st,
			    const tfs_hf_opts *o, tfs_error *err);

static int make_view(tfs_model **out, tfs_model *base, const char *source,
		     const tfs_open_opts *o, plan_open_fn plan_open, tfs_error *err)
{
	hf_view *v = calloc(1, sizeof(*v));
	char name[256];
	tfs_hf_opts ho = { .dir_name = name, .fp8_as_q8 = tfs_view_opt_on(o, "fp8_as_q8") };
	tfs_hf_files files;
	int rc = parse_outtype(&ho.outtype, tfs_open_opt(o, "outtype"), err);
	if (!v)
		return rc ? rc : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
	pthread_mutex_init(&v->mu, NULL);
	v->refs = 1; /* this function's */
	v->base = base;
	repo_name(name, sizeof(name), source);
	if (o)
		v->oo = *o;
	const char *tok = getenv("HF_TOKEN");
	if (!v->oo.token && tok && *tok)
		v->oo.token = tok;
	if (tfs_is_remote(source)) {
		size_t n = strlen(source);
		while (n > 5 && source[n - 1] == '/')
			n--;
		v->spec = source;
		v->where = strndup(source, n);
		files = (tfs_hf_files){ .read = remote_file, .ctx = v,
					.where = v->where ? v->where : source };
	} else {
		tfs_hf_files_dir(&files, source);
	}
	if (!rc)
		rc = plan_open(&v->plan, &files, base, &ho, err);
	v->spec = NULL;
	if (!rc)
		rc = build(out, v, err);
	view_unref(v);
	return rc;
}

/* A remote source that names no directory but was opened as the prefix of that name
 * (formats/open.c: s3://BUCKET/NAME with no such key, the model under NAME/): "source/",
 * allocated; else NULL. */
static char *opened_under(const tfs_model *m, const char *source)
{
	const char *path = tfs_model_path(m);
	size_t n = strlen(source);
	char *dir = NULL;
	if (tfs_remote_is_dir(source) || strncmp(path, source, n) != 0 || path[n] != '/' ||
	    asprintf(&dir, "%s/", source) < 0)
		return NULL;
	return dir;
}

/* ==== what the row attaches to the repo's model (model_impl.h: tfs_attach_kind) ==== */

static void model_free(void *m) { tfs_model_free(m); }
static void model_quiesce(void *m) { tfs_model_quiesce(m); }

/* its GGUF view, index.json's "gguf_view" (model.gguf) */
const tfs_attach_kind tfs_gguf_view_attach = {
	.name = "the GGUF view", .free = model_free, .quiesce = model_quiesce,
	.index_member = "gguf_view",
};
/* a multimodal repo's projector, index.json's "mmproj" (mmproj.gguf) */
const tfs_attach_kind tfs_mmproj_attach = {
	.name = "the projector", .free = model_free, .quiesce = model_quiesce,
	.index_member = "mmproj", .index_file = "mmproj.gguf",
};

tfs_model *tfs_model_gguf_view(const tfs_model *m)
{
	return tfs_model_attached(m, &tfs_gguf_view_attach);
}

const char *tfs_model_gguf_view_why(const tfs_model *m)
{
	return tfs_model_attached_why(m, &tfs_gguf_view_attach);
}

tfs_model *tfs_model_mmproj(const tfs_model *m)
{
	return tfs_model_attached(m, &tfs_mmproj_attach);
}

const char *tfs_model_mmproj_why(const tfs_model *m)
{
	return tfs_model_attached_why(m, &tfs_mmproj_attach);
}

/*
 * When m is a Hugging Face repo (a safetensors model opened from a directory holding a
 * config.json, or from a remote directory its scheme's row calls a repo), builds its GGUF
 * view as outtype= says and attaches it to m (tfs_model_gguf_view), or the reason it
 * cannot be made (tfs_model_gguf_view_why): 0 either way.  Anything else: nothing.  An error
 * only for the options: an outtype that is none, or one given for a source that is no repo.
 */
static int attach_at(tfs_model *m, const char *source, const tfs_scheme *s,
		     const tfs_open_opts *o, tfs_error *err)
{
	tfs_hf_outtype t;
	const char *outtype = tfs_open_opt(o, "outtype");
	if (outtype && parse_outtype(&t, outtype, err))
		return TFS_E_INVALID;
	/* the option given for the view, for a source that is no repo: refused */
	const char *given = outtype ? "outtype=" : tfs_view_opt_on(o, "fp8_as_q8") ? "fp8_as_q8"
										   : NULL;
	tfs_error why;
	bool repo = m->ops == &tfs_safetensors_format && tfs_hf_is_repo(source);
	if (repo && s && !s->dir_is_repo) {
		/* a directory of this row (an S3 prefix) is a repo when it holds config.json (a
		 * sharded set's prefix need not): a HEAD request, as a local directory's stat */
		char *cfg = tfs_remote_join(source, "config.json");
		int there = cfg ? tfs_remote_exists(cfg, o, &why)
				: tfs_error_set(&why, TFS_E_NOMEM, "out of memory");
		free(cfg);
		if (there < 0)
			return tfs_model_attach(m, &tfs_gguf_view_attach, NULL, why.msg, err);
		repo = there == 1;
	}
	if (!repo) {
		if (given)
			return tfs_error_set(err, TFS_E_INVALID, "%s%s: %s is not a Hugging "
					     "Face repo (a directory, hf://ORG/REPO or "
					     "s3://BUCKET/PREFIX/ with "
					     "config.json and safetensors weights): %s is "
					     "an option of its GGUF view", given, outtype ? outtype : "",
					     source, given);
		return 0;
	}
	tfs_model *view = NULL;
	int rc = make_view(&view, m, source, o, tfs_hf_plan_open, &why);
	if ((rc = tfs_model_attach(m, &tfs_gguf_view_attach, rc ? NULL : view,
				   rc ? why.msg : NULL, err)))
		return rc;
	/* the projector (mmproj.gguf) of a multimodal repo, whatever became of the text model */
	tfs_model *mm = NULL;
	rc = make_view(&mm, m, source, o, tfs_hf_mmproj_open, &why);
	if (rc == TFS_PASSTHROUGH)
		return 0;
	return tfs_model_attach(m, &tfs_mmproj_attach, rc ? NULL : mm, rc ? why.msg : NULL,
				err);
}

static int view_attach(tfs_model *m, const char *source, const tfs_open_opts *o,
		       tfs_error *err)
{
	const tfs_scheme *s = tfs_scheme_of(source);
	char *as_dir = s ? opened_under(m, source) : NULL;
	int rc = attach_at(m, as_dir ? as_dir : source, s, o, err);
	free(as_dir);
	return rc;
}

void tfs_model_drop_gguf_view(tfs_model *m, const char *why)
{
	tfs_error err; /* (out of memory: dropped all the same, without the reason) */
	tfs_model_attach(m, &tfs_gguf_view_attach, NULL, why, &err);
	if (tfs_model_mmproj(m))
		tfs_model_attach(m, &tfs_mmproj_attach, NULL, why, &err);
}

/* m's GGUF view as the model (it owns m from then on), or, when it has none, the reason
 * as an error (m freed). */
static int view_take(tfs_model **out, tfs_model *m, tfs_error *err)
{
	tfs_model *view = tfs_model_detach(m, &tfs_gguf_view_attach);
	if (!view) {
		const char *why = tfs_model_gguf_view_why(m);
		int rc = tfs_error_set(err, TFS_E_UNSUPPORTED, "%s: its GGUF view cannot be made: "
				       "%s", tfs_model_path(m), why ? why : "not a Hugging Face "
				       "repo");
		tfs_model_free(m);
		return rc;
	}
	hf_view *v = view->owner;
	v->owns_base = true;
	*out = view;
	return 0;
}

/* ==== the view's row (registry.c) ==== */

/* The GGUF view attached to the model opened, or (rw,output=X.gguf) the model opened. */
int tfs_hf_view_open(tfs_model **m, const char *source, const tfs_open_opts *o,
		     tfs_error *err)
{
	int rc = view_attach(*m, source, o, err);
	if (rc || !tfs_open_opt(o, "gguf_model") ||
	    !(tfs_model_gguf_view(*m) || tfs_model_gguf_view_why(*m)))
		return rc;
	tfs_model *base = *m;
	*m = NULL; /* (view_take frees it on failure) */
	return view_take(m, base, err);
}

/* outtype=: one of the converter's --outtype words (the row's check). */
static int outtype_check(const char *v, tfs_error *err)
{
	tfs_hf_outtype t;
	return parse_outtype(&t, v, err);
}

/* fp8_as_q8: a flag, "1" (given) or "0" (the row's check). */
static int flag_check(const char *v, tfs_error *err)
{
	if (!strcmp(v, "1") || !strcmp(v, "0"))
		return 0;
	return tfs_error_set(err, TFS_E_INVALID, "fp8_as_q8=%s: a flag, given without a value",
			     v);
}

const tfs_view_opt tfs_hf_view_opts[] = {
	{ .name = "outtype", .kind = TFS_VOPT_STRING, .option = true, .none = "auto",
	  .shown = "auto", .check = outtype_check },
	{ .name = "fp8_as_q8", .kind = TFS_VOPT_STRING, .option = true, .none = "0",
	  .check = flag_check },
	{ .name = "gguf_model", .kind = TFS_VOPT_OUTPUT, .asks = true,
	  .shown = "the repo's GGUF view" },
	{ 0 },
};
