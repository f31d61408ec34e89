/*
 * view_record.c - which model a staging journal's changes apply to: the view options the
 * session opened its model with (-o quantize=, imatrix=, outtype=, a repo's GGUF view),
 * recorded with the first change, and checked (or, for `tensorfs repack`, taken) when the
 * journal is opened again.  Replayed onto another view, the same changes would make another
 * model.
 *
 * In journal.json, beside "source" and "output" (every member optional; {} is the source's
 * own model):
 *   "view": {"quantize": "Q4_K_M",
 *            "imatrix": {"path": "/abs/imatrix.gguf", "size": N, "mtime": [sec, nsec]},
 *            "outtype": "f16",       (the GGUF view's type; absent: auto)
 *            "gguf_model": true}     (a Hugging Face repo: its GGUF view is the model)
 * imatrix only with quantize, outtype only with quantize or gguf_model: the others make no
 * difference to the model.  A journal without "view" (written before it was recorded) is
 * replayed onto the model the session opened, as it always was.
 */
#include "staging_impl.h"
#include "qplan.h"
#include "view.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* A view, as recorded or as given (strings borrowed). */
typedef struct {
	const char *quantize, *imatrix, *outtype;
	bool gguf_model;
	/* the imatrix file as recorded */
	uint64_t im_size;
	int64_t im_sec, im_nsec;
} view_desc;

/* The view options of o that decide which model tfs_view_open(source, o) opens, into *d:
 * quantize and imatrix; for a Hugging Face repo gguf_model and outtype ("auto" is none).
 * Whether imatrix and outtype matter is decided with the quantize and gguf_model wanted. */
static void desc_of(view_desc *d, const char *source, const tfs_open_opts *o)
{
	bool repo = o && (o->gguf_model || o->outtype) && tfs_hf_is_repo(source);
	memset(d, 0, sizeof(*d));
	if (!o)
		return;
	d->quantize = o->quantize;
	d->imatrix = o->imatrix && *o->imatrix ? o->imatrix : NULL;
	d->gguf_model = repo && o->gguf_model;
	d->outtype = repo && o->outtype && strcasecmp(o->outtype, "auto") ? o->outtype : NULL;
}

/* ==== reading the record ==== */

static bool string_or_absent(const json_t *o, const char *k, const char **out)
{
	const json_t *v = json_object_get(o, k);
	*out = json_string_value(v);
	return !v || *out;
}

/* The journal's "view" into *d; TFS_E_FORMAT when it is damaged. */
static int parse_record(view_desc *d, const tfs_staging *s, const json_t *v, tfs_error *err)
{
	const json_t *im = json_object_get(v, "imatrix"), *g = json_object_get(v, "gguf_model");
	const json_t *mt = json_object_get(im, "mtime");
	memset(d, 0, sizeof(*d));
	if (!json_is_object(v) || !string_or_absent(v, "quantize", &d->quantize) ||
	    !string_or_absent(v, "outtype", &d->outtype) || (g && !json_is_boolean(g)) ||
	    (im && (!string_or_absent(im, "path", &d->imatrix) || !d->imatrix ||
		    !json_is_integer(json_object_get(im, "size")) || json_array_size(mt) != 2)))
		return tfs_error_set(err, TFS_E_FORMAT, "%s/" TFS_JOURNAL ": damaged view record; "
				     "nothing was changed", s->dir);
	d->gguf_model = json_is_true(g);
	d->im_size = tfs_journal_num(im, "size");
	d->im_sec = json_integer_value(json_array_get(mt, 0));
	d->im_nsec = json_integer_value(json_array_get(mt, 1));
	return 0;
}

/* ==== comparing ==== */

static bool same_quantize(const char *a, const char *b)
{
	if (!a || !b)
		return !a && !b;
	int fa = tfs_ftype_parse(a), fb = tfs_ftype_parse(b);
	return fa >= 0 && fb >= 0 ? fa == fb : strcasecmp(a, b) == 0;
}

static bool same_outtype(const char *a, const char *b)
{
	a = a && strcasecmp(a, "auto") ? a : NULL;
	b = b && strcasecmp(b, "auto") ? b : NULL;
	return (!a && !b) || (a && b && strcasecmp(a, b) == 0);
}

static bool same_path(const char *a, const char *b)
{
	if (!a || !b)
		return !a && !b;
	char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
	bool same = strcmp(ra ? ra : a, rb ? rb : b) == 0;
	free(ra);
	free(rb);
	return same;
}

/* ==== messages ==== */

/* Appends "quantize=Q4_K_M,imatrix=/x,outtype=f16" (what d has of them); whether any. */
static bool opt_list(tfs_buf *b, const view_desc *d)
{
	const char *k[] = { "quantize", "imatrix", "outtype" };
	const char *v[] = { d->quantize, d->imatrix,
			    d->outtype ? d->outtype : d->gguf_model ? "auto" : NULL };
	size_t start = b->len;
	for (size_t i = 0; i < 3; i++)
		if (v[i])
			tfs_buf_printf(b, "%s%s=%s", b->len > start ? "," : "", k[i], v[i]);
	return b->len > start;
}

/* "-o quantize=Q4_K_M,imatrix=/x on the repo's GGUF view", or what no option means. */
static void describe(tfs_buf *b, const view_desc *d)
{
	size_t at = b->len;
	tfs_buf_printf(b, "-o ");
	if (!opt_list(b, d)) {
		b->len = at;
		if (b->data)
			b->data[at] = '\0';
	}
	if (d->gguf_model)
		tfs_buf_printf(b, "%sthe repo's GGUF view", b->len > at ? " on " : "");
	if (b->len == at)
		tfs_buf_printf(b, "no view option (the source's own model)");
}

/* The options that find the staging directory: staging=, or output= (unless the source
 * itself); a mount needs output= all the same (-o quantize= with rw asks for it). */
static void where_opts(tfs_buf *b, const tfs_staging *s, const tfs_view_match *q, bool mount)
{
	if ((mount || !q->staging) && s->output && (!s->src_path || strcmp(s->output, s->src_path)))
		tfs_buf_printf(b, "output=%s", s->output);
	if (q->staging)
		tfs_buf_printf(b, "%sstaging=%s", b->len ? "," : "", q->staging);
}

/* The changes were made to view r; the session asks for g: nothing is done, and the
 * message says how to finish. */
static int refuse(const tfs_staging *s, const tfs_view_match *q, const view_desc *r,
		  const view_desc *g, tfs_error *err)
{
	tfs_buf b = { 0 }, opts = { 0 }, where = { 0 }, rwhere = { 0 };
	tfs_buf_printf(&b, "%s holds changes to %s made with ", s->dir, q->source);
	describe(&b, r);
	tfs_buf_printf(&b, ", but %s ", q->adopt ? "the options give" : "this mount asks for");
	describe(&b, g);
	tfs_buf_printf(&b, ": replayed onto another view they would make another model. Nothing "
		       "was changed: ");
	if (q->adopt) {
		tfs_buf_printf(&b, "leave the view options out (the recorded ones are used)");
	} else {
		/* (output=X.gguf says gguf_model) */
		opt_list(&opts, r);
		where_opts(&where, s, q, true);
		where_opts(&rwhere, s, q, false);
		tfs_buf_printf(&b, "to go on editing, mount with -o rw%s%s%s%s; or write them with "
			       "`tensorfs repack %s%s%s` (the recorded options are used)",
			       opts.len ? "," : "", opts.len ? opts.data : "", where.len ? "," : "",
			       where.len ? where.data : "", q->source, rwhere.len ? " -o " : "",
			       rwhere.len ? rwhere.data : "");
	}
	int rc = tfs_error_set(err, TFS_E_INVALID, "%s", b.data ? b.data : "view mismatch");
	tfs_buf_free(&b);
	tfs_buf_free(&opts);
	tfs_buf_free(&where);
	tfs_buf_free(&rwhere);
	return rc;
}

/* The recorded imatrix must be the file it was: the quantized view depends on its bytes. */
static int same_imatrix(const tfs_staging *s, const view_desc *r, tfs_error *err)
{
	struct stat st;
	if (stat(r->imatrix, &st) < 0)
		return tfs_error_sys(err, errno, "imatrix %s, which the quantized view of the changes "
				     "staged in %s was made with; nothing was changed", r->imatrix,
				     s->dir);
	if ((uint64_t)st.st_size == r->im_size && st.st_mtim.tv_sec == r->im_sec &&
	    st.st_mtim.tv_nsec == r->im_nsec)
		return 0;
	return tfs_error_set(err, TFS_E_INVALID,
			     "imatrix %s changed since the changes in %s were staged (%llu bytes, "
			     "mtime %lld.%09lld then; %llu bytes, mtime %lld.%09lld now): the "
			     "quantized view they apply to would not be the same; nothing was "
			     "changed: put that file back to write them", r->imatrix, s->dir,
			     (unsigned long long)r->im_size, (long long)r->im_sec,
			     (long long)r->im_nsec, (unsigned long long)st.st_size,
			     (long long)st.st_mtim.tv_sec, (long long)st.st_mtim.tv_nsec);
}

/* ==== the two calls ==== */

int tfs_view_record_match(tfs_staging *s, const tfs_view_match *q, tfs_open_opts *want,
			  bool *reopen, tfs_error *err)
{
	const json_t *rec = json_array_size(tfs_journal_ops(s)) ? json_object_get(s->j, "view")
								 : NULL;
	view_desc r, g;
	int rc;
	*reopen = false;
	desc_of(&g, q->source, q->oo);
	memset(want, 0, sizeof(*want));
	want->quantize = g.quantize;
	want->imatrix = g.imatrix;
	want->outtype = g.outtype;
	want->gguf_model = g.gguf_model;
	if (!rec)
		return 0; /* nothing staged, or a journal from before the record */
	if ((rc = parse_record(&r, s, rec, err)))
		return rc;
	/* an option the session was not given is the journal's when it takes them (repack);
	 * gguf_model follows output=, which, not given, is the journal's too */
	bool clash = false;
	if (!same_quantize(r.quantize, g.quantize)) {
		clash |= !(q->adopt && !g.quantize);
		want->quantize = r.quantize;
	}
	if (r.gguf_model != g.gguf_model) {
		clash |= !((q->adopt || !q->output_given) && !g.gguf_model);
		want->gguf_model = r.gguf_model;
	}
	if (want->quantize && !same_path(r.imatrix, g.imatrix)) {
		clash |= !(q->adopt && !g.imatrix);
		want->imatrix = r.imatrix;
	}
	if ((want->quantize || want->gguf_model) && !same_outtype(r.outtype, g.outtype)) {
		clash |= !(q->adopt && !g.outtype);
		want->outtype = r.outtype;
	}
	if (clash)
		return refuse(s, q, &r, &g, err);
	if (want->quantize && r.imatrix && (rc = same_imatrix(s, &r, err)))
		return rc;
	*reopen = want->quantize != g.quantize || want->gguf_model != g.gguf_model ||
		  want->imatrix != g.imatrix || want->outtype != g.outtype;
	return 0;
}

/* The imatrix member: the file's real path and identity. */
static json_t *imatrix_member(const char *path, int *rc, tfs_error *err)
{
	struct stat st;
	char *real = realpath(path, NULL);
	json_t *o = NULL;
	if (stat(path, &st) < 0)
		*rc = tfs_error_sys(err, errno, "imatrix %s", path);
	else if (!(o = json_pack("{s:s, s:I, s:[I, I]}", "path", real ? real : path, "size",
				 (json_int_t)st.st_size, "mtime", (json_int_t)st.st_mtim.tv_sec,
				 (json_int_t)st.st_mtim.tv_nsec)))
		*rc = tfs_nomem(err);
	free(real);
	return o;
}

int tfs_view_record_set(tfs_staging *s, const tfs_open_opts *v, tfs_error *err)
{
	json_t *o = json_object();
	int rc = 0;
	if (!o)
		return tfs_nomem(err);
	if (v->quantize) {
		const char *name = tfs_ftype_name(tfs_ftype_parse(v->quantize));
		json_t *im = NULL;
		if (v->imatrix && !(im = imatrix_member(v->imatrix, &rc, err)))
			;
		else if (json_object_set_new(o, "quantize", json_string(name ? name : v->quantize)) ||
			 (im && json_object_set_new(o, "imatrix", im)))
			rc = tfs_nomem(err);
	}
	if (!rc && (v->quantize || v->gguf_model) && !same_outtype(v->outtype, NULL) &&
	    json_object_set_new(o, "outtype", json_string(v->outtype)))
		rc = tfs_nomem(err);
	if (!rc && v->gguf_model && json_object_set_new(o, "gguf_model", json_true()))
		rc = tfs_nomem(err);
	if (rc) {
		json_decref(o);
		return rc;
	}
	json_decref(s->view);
	s->view = o;
	return 0;
}
