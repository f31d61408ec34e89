/*
 * test_view_registry.c - the view table (codec/views/registry.c) against the option table
 * (fs/cli/optable.c): every option of a view is an -o option of the commands that open
 * models, marked as a view's there, and every option marked so is a registered view's; the
 * rows themselves are whole (a name, an open function, options with distinct fields and
 * names).  (An unknown view in a staging journal: test_journal_view.c.)
 */
#include <criterion/criterion.h>

#include <string.h>

#include "cli.h"
#include "registry.h"

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
	cr_assert_geq(tfs_n_views, 2);
	for (size_t i = 0; i < tfs_n_views; i++) {
		const tfs_view_kind *k = &tfs_view_table[i];
		cr_assert(k->name && *k->name && k->what && k->open && k->opts, "row %zu", i);
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(k->name, tfs_view_table[j].name);
		for (const tfs_view_opt *p = k->opts; p->name; p++) {
			cr_assert(p->field + (p->kind == TFS_VOPT_OUTPUT ? sizeof(bool)
					      : sizeof(char *)) <= sizeof(tfs_open_opts),
				  "%s: its field is outside tfs_open_opts", p->name);
			cr_assert(p->kind != TFS_VOPT_OUTPUT || (!p->option && p->shown),
				  "%s: a flag output= decides is no -o option, and says what it "
				  "is", p->name);
			/* no other option of any view has its name or its field */
			for (size_t m = 0; m <= i; m++)
				for (const tfs_view_opt *q = tfs_view_table[m].opts;
				     q->name && q != p; q++)
					cr_assert(strcmp(p->name, q->name) && p->field != q->field,
						  "%s and %s", p->name, q->name);
		}
	}
}
