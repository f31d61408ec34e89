/*
 * registry.c - the computed views, one row each (registry.h), in the order tfs_view_open
 * stacks them: a Hugging Face repo's GGUF view first (the model the others see, when there is
 * one), then the quantized view of whatever model that is.
 */
#include "registry.h"
#include "view.h"
#include "model_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const tfs_attach_kind *const gguf_attaches[] = {
	&tfs_gguf_view_attach, &tfs_mmproj_attach, NULL,
};
static const tfs_attach_kind *const hf_repo_attaches[] = { &tfs_hf_repo_attach, NULL };

const tfs_view_kind tfs_view_table[] = {
	/* a Hugging Face repo's GGUF view: views/hf.c (-o outtype=; rw,output=X.gguf) */
	{ .name = "gguf", .what = "the GGUF view", .opts = tfs_hf_view_opts,
	  .open = tfs_hf_view_open, .applies = tfs_hf_is_repo, .under_later = true,
	  .attaches = gguf_attaches },
	/* the model quantized as llama-quantize writes it: views/quantize.c (-o quantize=) */
	{ .name = "quantize", .what = "the quantized view", .opts = tfs_quant_view_opts,
	  .open = tfs_quant_view_open },
	/* whatever GGUF model the rows before made, as a Hugging Face repo: views/hf_export.c
	 * (hf/; -o hf_dtype=) */
	{ .name = "hf_repo", .what = "the hf/ view", .opts = tfs_hf_repo_view_opts,
	  .open = tfs_hf_repo_view_open, .applies = tfs_hf_repo_applies,
	  .attaches = hf_repo_attaches },
};

const size_t tfs_n_views = sizeof(tfs_view_table) / sizeof(tfs_view_table[0]);

const char *tfs_view_of_option(const char *name)
{
	for (size_t i = 0; name && i < tfs_n_views; i++)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++)
			if (p->option && !strcmp(p->name, name))
				return tfs_view_table[i].name;
	return NULL;
}

const char *tfs_view_option_name(size_t n)
{
	for (size_t i = 0; i < tfs_n_views; i++)
		for (const tfs_view_opt *p = tfs_view_table[i].opts; p->name; p++)
			if (p->option && n-- == 0)
				return p->name;
	return NULL;
}

/* The row of the -o option name, or NULL. */
static const tfs_view_opt *option_row(const char *name)
{
	for (size_t i = 0; name && i < tfs_n_views; i++)
		for (const tfs_view_opt *q = tfs_view_table[i].opts; q->name; q++)
			if (q->option && !strcmp(q->name, name))
				return q;
	return NULL;
}

/* A number of HOW: digits only, at most UINT_MAX.  0, or -1. */
static int parse_how(const char *value, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = value ? strtoul(value, &end, 10) : 0;
	if (!value || !*value || *end || errno || value[0] < '0' || value[0] > '9' ||
	    v > UINT_MAX)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int tfs_view_option_check(const char *name, const char *value, tfs_error *err)
{
	const tfs_view_opt *p = option_row(name);
	unsigned u;
	if (!p)
		return tfs_error_set(err, TFS_E_NOTFOUND, "-o %s: no computed view takes it",
				     name ? name : "(null)");
	/* (a number out of the row's range, "-1" too, is told as its check tells it) */
	if (p->kind == TFS_VOPT_HOW && parse_how(value, &u))
		return p->check && value && p->check(value, err) ? err->code
		       : tfs_error_set(err, TFS_E_INVALID, "%s=%s: not a number", name,
				       value ? value : "");
	return p->check && value ? p->check(value, err) : 0;
}

/* An option's value into o by its name, checked first: as given (the pointer kept: "auto"
 * stays "auto", "" an imatrix= given empty, a number's digits). */
int tfs_open_opts_set_view(tfs_open_opts *o, const char *name, const char *value,
			   tfs_error *err)
{
	int rc = tfs_view_option_check(name, value, err);
	if (rc)
		return rc;
	if (tfs_open_opt_set(o, option_row(name)->name, value))
		return tfs_error_set(err, TFS_E_INVALID, "-o %s: more than %d options by name",
				     name, TFS_NAMED_OPTS_MAX);
	return 0;
}

unsigned tfs_view_opt_number(const tfs_open_opts *o, const char *name)
{
	unsigned u = 0;
	return parse_how(tfs_open_opt(o, name), &u) ? 0 : u;
}
