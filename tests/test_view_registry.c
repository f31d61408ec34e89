/*
 * test_view_registry.c - the view table (codec/views/registry.c) against the option table
 * (fs/cli/optable.c): every option of a view is an -o option of the commands that open
 * models, marked as a view's there, and every option marked so is a registered view's; the
 * rows themselves are whole (a name, an open function, options with distinct fields and
 * names); and the one path of their values, by name: -o into tfsd_opts' list, then each into
 * tfs_open_opts by tfs_open_opts_set_view, unchanged ("auto" stays "auto").  And a new view
 * made of its file and its row alone (adding_a_view_needs_only_its_file_and_row): what it
 * attaches, the model keeps, stops, frees and lists in index.json by its kind, naming it
 * nowhere.  (An unknown view in a staging journal: test_journal_view.c.)
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "registry.h"
#include "model_impl.h"
#include "format.h"
#include "open.h"
#include "image.h"
#include "index.h"

static const tfsd_option *fs_option(const char *name)
{
	for (size_t i = 0; i < tfsd_n_options; i++)
		if (!strcmp(tfsd_option_table[i].name, name))
			return &tfsd_option_table[i];
	return NULL;
}

Test(view_registry, every_view_option_is_an_o_option_marked_as_a_view)
{
	size_t n = 0;
	for (const char *name; (name = tfs_view_option_name(n)); n++) {
		const tfsd_option *o = fs_option(name);
		cr_assert_not_null(o, "view option %s (%s) has no row in fs/cli/optable.c", name,
				   tfs_view_of_option(name));
		cr_assert(o->commands & TFSD_VIEW_OPTION, "-o %s is not marked as a view's", name);
		cr_assert(o->commands & TFSD_FOR_MOUNT, "-o %s: not a mount's option", name);
	}
	cr_assert_geq(n, 4, "only %zu view options", n);
}

Test(view_registry, every_marked_o_option_is_a_registered_view_option)
{
	size_t marked = 0;
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *o = &tfsd_option_table[i];
		if (!(o->commands & TFSD_VIEW_OPTION)) {
			cr_assert_null(tfs_view_of_option(o->name), "-o %s is view %s's but not "
				       "marked so in fs/cli/optable.c", o->name,
				       tfs_view_of_option(o->name));
			continue;
		}
		marked++;
		cr_assert_not_null(tfs_view_of_option(o->name), "-o %s is marked as a view's, and "
				   "no view of codec/views/registry.c takes it", o->name);
	}
	cr_assert_geq(marked, 4);
	cr_assert_null(tfs_view_of_option("output"));
	cr_assert_null(tfs_view_of_option("gguf_model")); /* (output= decides it) */
	cr_assert_str_eq(tfs_view_of_option("quantize"), "quantize");
	cr_assert_str_eq(tfs_view_of_option("outtype"), "gguf");
}

Test(view_registry, rows_are_whole)
{
	size_t n_named = 0;
	cr_assert_geq(tfs_n_views, 2);
	for (size_t i = 0; i < tfs_n_views; i++) {
		const tfs_view_kind *k = &tfs_view_table[i];
		cr_assert(k->name && *k->name && k->what && k->open && k->opts, "row %zu", i);
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(k->name, tfs_view_table[j].name);
		for (const tfs_view_opt *p = k->opts; p->name; p++) {
			cr_assert(p->kind != TFS_VOPT_OUTPUT || (!p->option && p->shown),
				  "%s: a flag output= decides is no -o option, and says what it "
				  "is", p->name);
			/* no other option of any view, nor a remote scheme, has its name */
			for (size_t m = 0; m <= i; m++)
				for (const tfs_view_opt *q = tfs_view_table[m].opts;
				     q->name && q != p; q++)
					cr_assert(strcmp(p->name, q->name), "%s and %s", p->name,
						  q->name);
			tfs_error err;
			cr_assert_eq(tfs_remote_option_check(p->name, "x", &err), TFS_E_NOTFOUND,
				     "%s: a remote scheme's option too", p->name);
			n_named++;
		}
	}
	/* every view's and scheme's option fits in tfs_open_opts' names at once (the schemes':
	 * a few; s3:// has 2) */
	cr_assert_lt(n_named + 8, TFS_NAMED_OPTS_MAX);
	/* what the rows attach: whole kinds, each one row's, listed under distinct members */
	size_t n_kinds = 0;
	for (size_t i = 0; i < tfs_n_views; i++)
		for (const tfs_attach_kind *const *k = tfs_view_table[i].attaches; k && *k; k++) {
			cr_assert((*k)->name && (*k)->free, "row %s: a kind without a name or free",
				  tfs_view_table[i].name);
			for (size_t j = 0; j <= i; j++)
				for (const tfs_attach_kind *const *l = tfs_view_table[j].attaches;
				     l && *l && l != k; l++)
					cr_assert((*l != *k) && (!(*k)->index_member ||
						  !(*l)->index_member ||
						  strcmp((*k)->index_member, (*l)->index_member)),
						  "%s and %s", (*k)->name, (*l)->name);
			n_kinds++;
		}
	cr_assert_geq(n_kinds, 3); /* the GGUF view, the projector, hf/ */
}

/* ==== a new view: its file (below, to the row) and its row, nothing else ====
 * -o card: the model's "card", a GGUF model of its general.architecture key alone, attached
 * to the model (index.json: "card", as card.gguf). */

static unsigned card_frees, card_quiesces;
static void card_free(void *v) { card_frees++; tfs_model_free(v); }
static void card_quiesce(void *v) { card_quiesces++; tfs_model_quiesce(v); }

static const tfs_attach_kind card_attach = {
	.name = "the card", .free = card_free, .quiesce = card_quiesce,
	.index_member = "card", .index_file = "card.gguf",
};

static int card_open(tfs_model **m, const char *source, const tfs_open_opts *o,
		     tfs_error *err)
{
	(void)source;
	if (!tfs_view_opt_on(o, "card"))
		return 0;
	long k = tfs_model_find_kv(*m, "general.architecture");
	if (k < 0)
		return tfs_model_attach(*m, &card_attach, NULL, "no general.architecture", err);
	tfs_model *c;
	int rc = tfs_model_new(&c, &tfs_gguf_format, tfs_model_path(*m), err);
	if (rc)
		return rc;
	c->gguf_version = 3;
	c->changed = true;
	const tfs_kv *kv = &(*m)->kv[k];   /* (its payload borrowed: the card goes first) */
	if ((rc = tfs_model_push_kv(c, kv->name, strlen(kv->name), kv->type, kv->data, kv->len,
				    err))) {
		tfs_model_free(c);
		return rc;
	}
	return tfs_model_attach(*m, &card_attach, c, NULL, err);
}

static const tfs_view_opt card_opts[] = {
	{ .name = "card", .kind = TFS_VOPT_STRING, .option = true, .none = "0" },
	{ 0 },
};

static const tfs_attach_kind *const card_attaches[] = { &card_attach, NULL };

/* its row (in registry.c's table it would be; here alone) */
static const tfs_view_kind card_row = {
	.name = "card", .what = "the card", .opts = card_opts, .open = card_open,
	.attaches = card_attaches,
};

/* index.json of m, parsed */
static json_t *index_of(const tfs_model *m)
{
	tfs_buf b = { 0 };
	tfs_error err;
	cr_assert_eq(tfs_model_index_json(&b, m, &err), 0, "%s", err.msg);
	json_error_t je;
	json_t *j = json_loadb(b.data, b.len, 0, &je);
	cr_assert_not_null(j, "%s", je.text);
	tfs_buf_free(&b);
	return j;
}

Test(view_registry, adding_a_view_needs_only_its_file_and_row)
{
	const char *src = TFS_TESTDATA "/gguf/mixed_flat.gguf";
	tfs_open_opts o = { 0 };
	tfs_error err;
	tfs_model *m = NULL;
	cr_assert_eq(tfs_model_open(&m, src, &o, &err), 0, "%s", err.msg);
	/* not asked for: nothing attached, index.json without it */
	cr_assert_eq(card_row.open(&m, src, &o, &err), 0, "%s", err.msg);
	cr_assert_null(tfs_model_attached(m, &card_attach));
	json_t *j = index_of(m);
	cr_assert_null(json_object_get(j, "card"));
	json_decref(j);

	/* asked for, as tfs_view_open opens a row: attached, listed, stopped with the model */
	cr_assert_eq(tfs_open_opt_set(&o, "card", "1"), 0);
	cr_assert_eq(card_row.open(&m, src, &o, &err), 0, "%s", err.msg);
	const tfs_model *c = tfs_model_attached(m, &card_attach);
	cr_assert_not_null(c);
	cr_assert_null(tfs_model_attached_why(m, &card_attach));
	uint64_t size;
	cr_assert_eq(tfs_model_image_size(&size, c, &err), 0, "%s", err.msg);
	j = index_of(m);
	json_t *e = json_object_get(j, "card");
	cr_assert_not_null(e, "index.json does not list the card");
	cr_assert_str_eq(json_string_value(json_object_get(e, "name")), "card.gguf");
	cr_assert_eq(json_integer_value(json_object_get(e, "size")), (json_int_t)size);
	cr_assert_eq(json_integer_value(json_object_get(e, "keys")), 1);
	cr_assert_eq(json_integer_value(json_object_get(e, "tensors")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(e, "architecture")), "oracle-test");
	json_decref(j);
	card_quiesces = 0;
	tfs_model_quiesce(m);
	cr_assert_eq(card_quiesces, 1);

	/* opened again: the new card replaces the old one (freed) */
	card_frees = 0;
	cr_assert_eq(card_row.open(&m, src, &o, &err), 0, "%s", err.msg);
	cr_assert_eq(card_frees, 1);
	cr_assert_not_null(tfs_model_attached(m, &card_attach));

	/* one that cannot be made: the reason, listed as such */
	cr_assert_eq(tfs_model_attach(m, &card_attach, NULL, "no card today", &err), 0);
	cr_assert_eq(card_frees, 2);
	cr_assert_str_eq(tfs_model_attached_why(m, &card_attach), "no card today");
	j = index_of(m);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "card"),
							   "unavailable")), "no card today");
	json_decref(j);

	/* freed with the model (first: its key's payload is the model's) */
	cr_assert_eq(card_row.open(&m, src, &o, &err), 0, "%s", err.msg);
	tfs_model_free(m);
	cr_assert_eq(card_frees, 3);
}

/* Every view option of the option table goes to codec by name (tfs_open_opts_set_view), and
 * is kept by its name: a name or a file as the very pointer given, a number's digits. */
Test(view_registry, every_view_option_is_set_by_name)
{
	size_t n = 0;
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *o = &tfsd_option_table[i];
		if (!(o->commands & TFSD_VIEW_OPTION))
			continue;
		const tfs_view_opt *p = NULL;
		for (size_t k = 0; !p && k < tfs_n_views; k++)
			for (const tfs_view_opt *q = tfs_view_table[k].opts; !p && q->name; q++)
				if (!strcmp(q->name, o->name))
					p = q;
		cr_assert_not_null(p, "-o %s", o->name);
		tfs_error err;
		tfs_open_opts oo = { 0 };
		/* a value the row's check takes (a name of the view's: quantize= has no "auto"; a
		 * flag, VFLAG, is "1" as fs/cli sets it) */
		static const char *const names[] = { "auto", "Q8_0", "bf16", NULL };
		const char *v = o->kind == TFSD_OPT_INT ? "7" : o->kind == TFSD_OPT_FLAG ? "1" : NULL;
		for (size_t k = 0; !v && names[k]; k++)
			if (!p->check || p->check(names[k], &err) == 0)
				v = names[k];
		cr_assert_not_null(v, "-o %s takes none of auto, Q8_0, bf16", o->name);
		cr_assert_eq(tfs_open_opts_set_view(&oo, o->name, v, &err), 0, "%s", err.msg);
		/* (the pointer given) */
		cr_assert_eq(tfs_view_opt_str(&oo, p), v, "-o %s", o->name);
		if (p->kind == TFS_VOPT_HOW) {
			cr_assert_eq(tfs_view_opt_number(&oo, o->name), 7, "-o %s", o->name);
			cr_assert_eq(tfs_open_opts_set_view(&oo, o->name, "x", &err),
				     TFS_E_INVALID);
			cr_assert_eq(tfs_open_opts_set_view(&oo, o->name, "-1", &err),
				     TFS_E_INVALID);
		}
		if (o->kind == TFSD_OPT_FLAG) {   /* a flag's row refuses any other value */
			cr_assert_not_null(p->check, "-o %s: a flag with no check", o->name);
			cr_assert_eq(tfs_open_opts_set_view(&oo, o->name, "yes", &err),
				     TFS_E_INVALID, "-o %s=yes", o->name);
			cr_assert_eq(tfs_view_opt_str(&oo, p), v, "-o %s", o->name);
		}
		/* nothing else of oo set */
		cr_assert_eq(oo.n_named, 1, "-o %s set another option", o->name);
		n++;
	}
	cr_assert_geq(n, 4);
	tfs_open_opts oo = { 0 };
	tfs_error err;
	cr_assert_eq(tfs_open_opts_set_view(&oo, "output", "x.gguf", &err), TFS_E_NOTFOUND);
	cr_assert_eq(tfs_open_opts_set_view(&oo, "gguf_model", "1", &err), TFS_E_NOTFOUND);
}

/* -o parses a view's options into tfsd_opts' list (the last value of one given twice, a
 * number as %d reads it), and tfsd_view_opts hands them to tfs_open_opts unchanged
 * ("auto" stays "auto": the quantized view's cache key has it). */
Test(view_registry, o_options_reach_the_open_options)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	const char *argv[] = { "tensorfs", "SRC", "-o",
			       "quantize=Q4_K_M,outtype=auto,quantize_threads=3,imatrix=a.dat,threads=2",
			       "-o", "quantize=q8_0,imatrix=b.dat" };
	for (size_t i = 0; i < sizeof(argv) / sizeof(argv[0]); i++)
		cr_assert_eq(fuse_opt_add_arg(&args, argv[i]), 0);
	static const tfsd_usage u = { "usage\n", TFSD_FOR_MOUNT, NULL };
	tfsd_opts o = { 0 };
	cr_assert_eq(tfsd_opts_parse(&args, &o, &u), 0);
	cr_assert_eq(o.n_views, 4);
	cr_assert_eq(o.threads, 2);
	cr_assert_str_eq(tfsd_view_value(&o, "quantize"), "q8_0");
	cr_assert_str_eq(tfsd_view_value(&o, "outtype"), "auto");
	cr_assert_str_eq(tfsd_view_value(&o, "quantize_threads"), "3");
	cr_assert_str_eq(tfsd_view_value(&o, "imatrix"), "b.dat");
	tfs_open_opts oo = { 0 };
	cr_assert_eq(tfsd_view_opts(&o, &oo, "test"), 0);
	cr_assert_str_eq(tfs_open_opt(&oo, "quantize"), "q8_0");
	cr_assert_str_eq(tfs_open_opt(&oo, "outtype"), "auto");
	cr_assert_eq(tfs_view_opt_number(&oo, "quantize_threads"), 3);
	cr_assert_str_eq(tfs_open_opt(&oo, "imatrix"), "b.dat");
	/* a relative file is made absolute, a name is not */
	cr_assert_eq(tfsd_view_value_set(&o, "imatrix", "im.dat"), 0);
	cr_assert_eq(tfsd_view_paths(&o), 0);
	cr_assert_eq(tfsd_view_value(&o, "imatrix")[0], '/');
	cr_assert_str_eq(tfsd_view_value(&o, "quantize"), "q8_0");
	fuse_opt_free_args(&args);
	tfsd_opts_free(&o);

	/* values not of their kind, an option nobody takes, one given empty: usage errors */
	const char *bad[] = { "quantize_threads=many", "quantize=Q9", "outtype=f64", "imatrix=",
			      "threads=-1", "cache_size=1Q", "sharpen" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fuse_args b = FUSE_ARGS_INIT(0, NULL);
		const char *argv_b[] = { "tensorfs", "SRC", "-o", bad[i] };
		for (size_t k = 0; k < sizeof(argv_b) / sizeof(argv_b[0]); k++)
			cr_assert_eq(fuse_opt_add_arg(&b, argv_b[k]), 0);
		tfsd_opts ob = { 0 };
		cr_assert_eq(tfsd_opts_parse(&b, &ob, &u), -1, "-o %s", bad[i]);
		fuse_opt_free_args(&b);
		tfsd_opts_free(&ob);
	}
}
