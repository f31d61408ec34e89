/*
 * view_record.c - which model a staging journal's changes apply to: the view options the
 * session opened its model with (the recorded options of the view table's rows,
 * views/registry.h: -o quantize=, imatrix=, outtype=, a repo's GGUF view), recorded with the
 * first change, and checked (or, for `tensorfs repack`, taken) when the journal is opened
 * again.  Replayed onto another view, the same changes would make another model.
 *
 * In journal.json, beside "source" and "output" (every member optional; {} is the source's
 * own model), one member per recorded option, the views after it (outermost) first:
 *   "view": {"quantize": "Q4_K_M",
 *            "imatrix": {"path": "/abs/imatrix.gguf", "size": N, "mtime": [sec, nsec]},
 *            "outtype": "f16",       (the GGUF view's type; absent: auto)
 *            "gguf_model": true}     (a Hugging Face repo: its GGUF view is the model)
 * A string option is a string, a file an object (its real path and identity), a flag true.
 * A view's options are recorded when it is in play: asked for (quantize=, gguf_model), or
 * under a view asked for (the GGUF view under the quantized view); the others make no
 * difference to the model.  A member no row of the table knows is refused (a journal of
 * another tensorfs).  A journal without "view" (written before it was recorded) is replayed
 * onto the model the session opened, as it always was.
 */
#include "staging_impl.h"
#include "registry.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Each recorded option of the table, flattened: rows in order, their options in order. */
#define MAX_OPTS 16

typedef struct {
	uint64_t size;
	int64_t sec, nsec;
} file_id;

/* A view, as recorded or as given (strings borrowed). */
typedef struct {
	tfs_open_opts o;        /* the options' values (a none value is NULL) */
	file_id id[MAX_OPTS];   /* the FILE options' identities as recorded */
} view_desc;

static bool recorded(const tfs_view_opt *p) { return p->kind != TFS_VOPT_HOW; }

/* Option p's index among all (flattened), for view_desc.id. */
static size_t opt_index(const tfs_view_opt *p)
{
	size_t n = 0;
	for (size_t i = 0; i < tfs_n_views; i++)
		for (const tfs_view_opt *q = tfs_view_table[i].opts; q->name; q++, n++)
			if (q == p)
				return n < MAX_OPTS ? n : MAX_OPTS - 1;
	return MAX_OPTS - 1;
}

/* v, or NULL when it is p's none value. */
static const char *value(const tfs_view_opt *p, const char *v)
{
	return v && p->none && !strcasecmp(v, p->none) ? NULL : v;
}

/* Whether the row's options are set in d (a string, a flag). */
static bool any_set(const tfs_view_kind *k, const tfs_open_opts *o, bool asks_only)
{
	for (const tfs_view_opt *p = k->opts; p->name; p++)
		if (recorded(p) && (!asks_only || p->asks) &&
		    (p->kind == TFS_VOPT_OUTPUT ? tfs_view_opt_flag(o, p)
						: tfs_view_opt_str(o, p) != NULL))
			return true;
	return false;
}

/* Whether row i decides the model o opens: asked for, or under a view asked for. */
static bool in_play(size_t i, const tfs_open_opts *o)
{
	if (any_set(&tfs_view_table[i], o, true))
		return true;
	for (size_t j = i + 1; tfs_view_table[i].under_later && j < tfs_n_views; j++)
		if (any_set(&tfs_view_table[j], o, true))
			return true;
	return false;
}

/* The recorded options of o that decide which model tfs_view_open(source, o) opens, into
 * *d: none values dropped, and a row's options only when they apply to the source (asked
 * only when one is given).  Whether they matter is decided with the views wanted. */
static void desc_of(view_desc *d, const char *source, const tfs_open_opts *o)
{
	memset(d, 0, sizeof(*d));
	if (!o)
		return;
	for (size_t i = 0; i < tfs_n_views; i++) {
		const tfs_view_kind *k = &tfs_view_table[i];
		tfs_open_opts row = { 0 };
		for (const tfs_view_opt *p = k->opts; p->name; p++) {
			if (p->kind == TFS_VOPT_OUTPUT)
				tfs_view_opt_set_flag(&row, p, tfs_view_opt_flag(o, p));
			else if (recorded(p))
				tfs_view_opt_set_str(&row, p, value(p, tfs_view_opt_str(o, p)));
		}
		if (!any_set(k, &row, false) || (k->applies && !k->applies(source)))
			continue;
		for (const tfs_view_opt *p = k->opts; p->name; p++) {
			if (p->kind == TFS_VOPT_OUTPUT)
				tfs_view_opt_set_flag(&d->o, p, tfs_view_opt_flag(&row, p));
			else if (recorded(p))
				tfs_view_opt_set_str(&d->o, p, tfs_view_opt_str(&row, p));
		}
	}
}

/* ==== reading the record ==== */

/* The recorded option named k, or NULL. */
static const tfs_view_opt *find_opt(const char *k)
{
	for (size_t i = 0; i < tfs_n_views; i++)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++)
			if (recorded(p) && !strcmp(p->name, k))
				return p;
	return NULL;
}

/* Member v of the record as option p into *d; false when it is damaged. */
static bool parse_member(view_desc *d, const tfs_view_opt *p, const json_t *v)
{
	const json_t *mt = json_object_get(v, "mtime");
	const char *s;
	file_id *id = &d->id[opt_index(p)];
	switch (p->kind) {
	case TFS_VOPT_OUTPUT:
		if (!json_is_boolean(v))
			return false;
		tfs_view_opt_set_flag(&d->o, p, json_is_true(v));
		return true;
	case TFS_VOPT_FILE:
		if (!(s = json_string_value(json_object_get(v, "path"))) ||
		    !json_is_integer(json_object_get(v, "size")) || json_array_size(mt) != 2)
			return false;
		id->size = tfs_journal_num(v, "size");
		id->sec = json_integer_value(json_array_get(mt, 0));
		id->nsec = json_integer_value(json_array_get(mt, 1));
		tfs_view_opt_set_str(&d->o, p, s);
		return true;
	default:
		if (!(s = json_string_value(v)))
			return false;
		tfs_view_opt_set_str(&d->o, p, value(p, s));
		return true;
	}
}

/* The journal's "view" into *d; TFS_E_FORMAT when it is damaged, TFS_E_UNSUPPORTED when it
 * records an option no view of the table takes. */
static int parse_record(view_desc *d, const tfs_staging *s, const json_t *v, tfs_error *err)
{
	const char *k;
	const json_t *m;
	memset(d, 0, sizeof(*d));
	if (!json_is_object(v))
		goto damaged;
	json_object_foreach((json_t *)v, k, m) {
		const tfs_view_opt *p = find_opt(k);
		if (!p)
			return tfs_error_set(err, TFS_E_UNSUPPORTED, "%s/" TFS_JOURNAL ": the view "
					     "record names \"%s\", which is no view option this "
					     "tensorfs knows (a journal of another version?): the "
					     "model the changes apply to cannot be made; nothing was "
					     "changed", s->dir, k);
		if (!parse_member(d, p, m))
			goto damaged;
	}
	return 0;
damaged:
	return tfs_error_set(err, TFS_E_FORMAT, "%s/" TFS_JOURNAL ": damaged view record; "
			     "nothing was changed", s->dir);
}

/* ==== comparing ==== */

static bool same_path(const char *a, const char *b)
{
	char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
	bool same = strcmp(ra ? ra : a, rb ? rb : b) == 0;
	free(ra);
	free(rb);
	return same;
}

/* Whether values a and b of option p (none values NULL) make the same view. */
static bool same(const tfs_view_opt *p, const tfs_open_opts *a, const tfs_open_opts *b)
{
	if (p->kind == TFS_VOPT_OUTPUT)
		return tfs_view_opt_flag(a, p) == tfs_view_opt_flag(b, p);
	const char *x = tfs_view_opt_str(a, p), *y = tfs_view_opt_str(b, p);
	if (!x || !y)
		return !x && !y;
	return p->same ? p->same(x, y) : p->kind == TFS_VOPT_FILE ? same_path(x, y)
								   : !strcasecmp(x, y);
}

/* Whether o's value of p and the other's are the same pointer (or flag). */
static bool identical(const tfs_view_opt *p, const tfs_open_opts *a, const tfs_open_opts *b)
{
	return p->kind == TFS_VOPT_OUTPUT ? tfs_view_opt_flag(a, p) == tfs_view_opt_flag(b, p)
					  : tfs_view_opt_str(a, p) == tfs_view_opt_str(b, p);
}

/* ==== messages ==== */

/* Appends "quantize=Q4_K_M,imatrix=/x,outtype=f16" (what d has of the -o options, the
 * outermost view's first; a string not given but shown when its view is asked); whether
 * any. */
static bool opt_list(tfs_buf *b, const view_desc *d)
{
	size_t start = b->len;
	for (size_t i = tfs_n_views; i-- > 0;) {
		const tfs_view_kind *k = &tfs_view_table[i];
		bool asked = any_set(k, &d->o, true);
		for (const tfs_view_opt *p = k->opts; p->name; p++) {
			if (p->kind != TFS_VOPT_STRING && p->kind != TFS_VOPT_FILE)
				continue;
			const char *v = tfs_view_opt_str(&d->o, p);
			if (!v && asked)
				v = p->shown;
			if (v)
				tfs_buf_printf(b, "%s%s=%s", b->len > start ? "," : "", p->name, v);
		}
	}
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
	for (size_t i = tfs_n_views; i-- > 0;)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++)
			if (p->kind == TFS_VOPT_OUTPUT && tfs_view_opt_flag(&d->o, p))
				tfs_buf_printf(b, "%s%s", b->len > at ? " on " : "", p->shown);
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

/* A recorded file option must be the file it was: the view depends on its bytes. */
static int same_file(const tfs_staging *s, const tfs_view_kind *k, const tfs_view_opt *p,
		     const view_desc *r, tfs_error *err)
{
	const char *path = tfs_view_opt_str(&r->o, p);
	const file_id *id = &r->id[opt_index(p)];
	struct stat st;
	if (stat(path, &st) < 0)
		return tfs_error_sys(err, errno, "%s %s, which %s of the changes staged in %s was "
				     "made with; nothing was changed", p->name, path, k->what,
				     s->dir);
	if ((uint64_t)st.st_size == id->size && st.st_mtim.tv_sec == id->sec &&
	    st.st_mtim.tv_nsec == id->nsec)
		return 0;
	return tfs_error_set(err, TFS_E_INVALID,
			     "%s %s changed since the changes in %s were staged (%llu bytes, "
			     "mtime %lld.%09lld then; %llu bytes, mtime %lld.%09lld now): %s "
			     "they apply to would not be the same; nothing was changed: put that "
			     "file back to write them", p->name, path, s->dir,
			     (unsigned long long)id->size, (long long)id->sec, (long long)id->nsec,
			     (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
			     (long long)st.st_mtim.tv_nsec, k->what);
}

/* ==== the two calls ==== */

/* Whether the session may take the record's value of p where they differ: a repack takes an
 * option it was not given; a flag output= decides, also a session not given output=. */
static bool takes_record(const tfs_view_opt *p, const tfs_view_match *q, const view_desc *g)
{
	if (p->kind == TFS_VOPT_OUTPUT)
		return !tfs_view_opt_flag(&g->o, p) && (q->adopt || !q->output_given);
	return q->adopt && !tfs_view_opt_str(&g->o, p);
}

/* want's value of p: the record's. */
static void take(const tfs_view_opt *p, tfs_open_opts *want, const view_desc *r)
{
	if (p->kind == TFS_VOPT_OUTPUT)
		tfs_view_opt_set_flag(want, p, tfs_view_opt_flag(&r->o, p));
	else
		tfs_view_opt_set_str(want, p, tfs_view_opt_str(&r->o, p));
}

int tfs_view_record_match(tfs_staging *s, const tfs_view_match *q, tfs_open_opts *want,
			  bool *reopen, tfs_error *err)
{
	const json_t *rec = json_array_size(tfs_journal_ops(s)) ? json_object_get(s->j, "view")
								 : NULL;
	view_desc r, g;
	int rc;
	*reopen = false;
	desc_of(&g, q->source, q->oo);
	*want = g.o;
	if (!rec)
		return 0; /* nothing staged, or a journal from before the record */
	if ((rc = parse_record(&r, s, rec, err)))
		return rc;
	/* the options that ask for a view first, then the others of the views in play */
	bool clash = false;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < tfs_n_views; i++) {
			if (pass && !in_play(i, want))
				continue;
			for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++) {
				if (!recorded(p) || p->asks != !pass || same(p, &r.o, &g.o))
					continue;
				clash |= !takes_record(p, q, &g);
				take(p, want, &r);
			}
		}
	if (clash)
		return refuse(s, q, &r, &g, err);
	for (size_t i = 0; i < tfs_n_views; i++)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++) {
			if (p->kind == TFS_VOPT_FILE && in_play(i, want) &&
			    tfs_view_opt_str(&r.o, p) &&
			    (rc = same_file(s, &tfs_view_table[i], p, &r, err)))
				return rc;
			*reopen |= recorded(p) && !identical(p, want, &g.o);
		}
	return 0;
}

void tfs_view_record_apply(tfs_open_opts *o, const tfs_open_opts *want)
{
	for (size_t i = 0; i < tfs_n_views; i++)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++)
			if (p->kind == TFS_VOPT_OUTPUT)
				tfs_view_opt_set_flag(o, p, tfs_view_opt_flag(want, p));
			else if (recorded(p))
				tfs_view_opt_set_str(o, p, tfs_view_opt_str(want, p));
}

/* A file option's member: the file's real path and identity. */
static json_t *file_member(const char *name, const char *path, int *rc, tfs_error *err)
{
	struct stat st;
	char *real = realpath(path, NULL);
	json_t *o = NULL;
	if (stat(path, &st) < 0)
		*rc = tfs_error_sys(err, errno, "%s %s", name, path);
	else if (!(o = json_pack("{s:s, s:I, s:[I, I]}", "path", real ? real : path, "size",
				 (json_int_t)st.st_size, "mtime", (json_int_t)st.st_mtim.tv_sec,
				 (json_int_t)st.st_mtim.tv_nsec)))
		*rc = tfs_nomem(err);
	free(real);
	return o;
}

/* Option p of v as its member of the record (NULL: none, or an error in *rc). */
static json_t *member(const tfs_view_opt *p, const tfs_open_opts *v, int *rc, tfs_error *err)
{
	const char *x = p->kind == TFS_VOPT_OUTPUT ? NULL : value(p, tfs_view_opt_str(v, p));
	json_t *m = NULL;
	if (p->kind == TFS_VOPT_OUTPUT)
		return tfs_view_opt_flag(v, p) ? json_true() : NULL;
	if (!x)
		return NULL;
	if (p->kind == TFS_VOPT_FILE)
		return file_member(p->name, x, rc, err);
	if (!(m = json_string(p->spelled ? p->spelled(x) : x)))
		*rc = tfs_nomem(err);
	return m;
}

int tfs_view_record_set(tfs_staging *s, const tfs_open_opts *v, tfs_error *err)
{
	json_t *o = json_object();
	int rc = 0;
	if (!o)
		return tfs_nomem(err);
	/* the outermost view's options first */
	for (size_t i = tfs_n_views; !rc && i-- > 0;) {
		if (!in_play(i, v))
			continue;
		for (const tfs_view_opt *p = tfs_view_table[i].opts; !rc && p->name; p++) {
			json_t *m = recorded(p) ? member(p, v, &rc, err) : NULL;
			if (m && json_object_set_new(o, p->name, m))
				rc = tfs_nomem(err);
		}
	}
	if (rc) {
		json_decref(o);
		return rc;
	}
	json_decref(s->view);
	s->view = o;
	return 0;
}
