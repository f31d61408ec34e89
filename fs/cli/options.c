/*
 * options.c - the options of `tensorfs mount` and `tensorfs repack`: one fuse_opt table
 * filling a tfsd_opts, the paths made absolute, the remote options.
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* What -h/--help prints: the usage of the command being parsed. */
static const tfsd_usage *usage_text;

#define OPT(t, p) { t, offsetof(tfsd_opts, p), 1 }
/* What is not an -o option of optable.c: the command line's flags, and the words mount(8)
 * passes, which mean nothing here. */
static const struct fuse_opt extra_spec[] = {
	OPT("-f", foreground),
	OPT("-d", debug),
	OPT("debug", debug),
	OPT("-s", single),
	FUSE_OPT_KEY("-h", 'h'),
	FUSE_OPT_KEY("--help", 'h'),
	/* mount(8) passes these; they mean nothing here */
	FUSE_OPT_KEY("dev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nodev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("suid", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nosuid", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("exec", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noexec", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("atime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

#define N_EXTRA (sizeof(extra_spec) / sizeof(extra_spec[0]))
/* the key of row i of the option table, a view's option: KEY_VIEW + i */
#define KEY_VIEW 0x10000
#define MAX_OPTIONS 64
static struct fuse_opt opt_spec[MAX_OPTIONS + N_EXTRA];
static char opt_templates[MAX_OPTIONS][40];
static pthread_once_t opt_spec_once = PTHREAD_ONCE_INIT;

/* opt_spec: a fuse_opt of each row of the option table ("name", "name=%s", "name=%d"),
 * then the extras (their FUSE_OPT_END last). */
static void opt_spec_make(void)
{
	size_t n = 0;
	if (tfsd_n_options > MAX_OPTIONS) {   /* (a new row needs a larger MAX_OPTIONS) */
		fputs("tensorfs: the option table has more rows than MAX_OPTIONS\n", stderr);
		abort();
	}
	for (size_t i = 0; i < tfsd_n_options && n < MAX_OPTIONS; i++, n++) {
		const tfsd_option *o = &tfsd_option_table[i];
		snprintf(opt_templates[n], sizeof(opt_templates[n]), "%s%s", o->name,
			 o->kind == TFSD_OPT_STR ? "=%s" : o->kind == TFSD_OPT_INT ? "=%d" : "");
		/* a view's option: a key, opt_proc keeps its value in o->views */
		opt_spec[n] = o->commands & TFSD_VIEW_OPTION
			      ? (struct fuse_opt)FUSE_OPT_KEY(opt_templates[n], KEY_VIEW + (int)i)
			      : (struct fuse_opt){ opt_templates[n], (unsigned long)o->offset,
						   o->kind == TFSD_OPT_FLAG ? o->value : 0 };
	}
	memcpy(&opt_spec[n], extra_spec, sizeof(extra_spec));
}

/* A view's -o option name=value (arg) into o->views: a number as fuse_opt reads "%d" (its
 * message when it is none), kept as %d prints it.  0 (taken), or -1. */
static int view_opt(tfsd_opts *o, const tfsd_option *row, const char *arg)
{
	const char *v = arg + strlen(row->name) + 1;
	char num[16];
	if (row->kind == TFSD_OPT_INT) {
		int n;
		if (sscanf(v, "%d", &n) != 1) {
			fprintf(stderr, "fuse: invalid parameter in option `%s'\n", arg);
			return -1;
		}
		snprintf(num, sizeof(num), "%d", n);
		v = num;
	}
	return tfsd_view_value_set(o, row->name, v);
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	tfsd_opts *o = data;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (!o->source)
			return (o->source = strdup(arg)) ? 0 : -1;
		if (!o->mountpoint)
			return (o->mountpoint = strdup(arg)) ? 0 : -1;
		fprintf(stderr, "tensorfs: unexpected argument '%s'\n", arg);
		tfsd_usage_print(stderr, usage_text);
		return -1;
	}
	if (key >= KEY_VIEW && key < KEY_VIEW + (int)tfsd_n_options)
		return view_opt(o, &tfsd_option_table[key - KEY_VIEW], arg);
	if (key == 'h') {
		tfsd_usage_print(stdout, usage_text);
		exit(0);
	}
	return 1; /* keep for FUSE (allow_other, ...) */
}

char *tfsd_absolute(const char *p)
{
	char buf[PATH_MAX];
	if (!p)
		return NULL;
	if (realpath(p, buf))
		return strdup(buf);
	if (p[0] == '/' || !getcwd(buf, sizeof(buf)))
		return strdup(p);
	size_t n = strlen(buf);
	char *s = malloc(n + strlen(p) + 2);
	if (s)
		sprintf(s, "%s/%s", buf, p);
	return s;
}

void tfsd_opts_free(tfsd_opts *o)
{
	free(o->source);
	free(o->mountpoint);
	free(o->staging);
	free(o->output);
	free(o->cache);
	free(o->cache_size);
	free(o->token_file);
	free(o->cafile);
	free(o->endpoint);
	free(o->s3_addressing);
	for (size_t i = 0; i < o->n_views; i++)
		free(o->views[i].value);
	free(o->views);
	o->views = NULL;
	o->n_views = 0;
}

const char *tfsd_view_value(const tfsd_opts *o, const char *name)
{
	for (size_t i = 0; i < o->n_views; i++)
		if (!strcmp(o->views[i].name, name))
			return o->views[i].value;
	return NULL;
}

int tfsd_view_value_set(tfsd_opts *o, const char *name, const char *value)
{
	char *v = strdup(value);
	if (!v)
		return -1;
	for (size_t i = 0; i < o->n_views; i++)
		if (!strcmp(o->views[i].name, name)) {
			free(o->views[i].value);
			o->views[i].value = v;
			return 0;
		}
	const tfsd_option *row = NULL;   /* (the name kept is the table's) */
	for (size_t i = 0; !row && i < tfsd_n_options; i++)
		if (!strcmp(tfsd_option_table[i].name, name))
			row = &tfsd_option_table[i];
	tfsd_view_optval *p = row ? realloc(o->views, (o->n_views + 1) * sizeof(*p)) : NULL;
	if (!p) {
		free(v);
		return -1;
	}
	o->views = p;
	o->views[o->n_views++] = (tfsd_view_optval){ row->name, v };
	return 0;
}

/* Whether the view option name takes a file (its row's ARG is FILE: imatrix=). */
static bool view_takes_file(const char *name)
{
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *o = &tfsd_option_table[i];
		if (!strcmp(o->name, name))
			return o->arg && !strcmp(o->arg, "FILE");
	}
	return false;
}

int tfsd_view_paths(tfsd_opts *o)
{
	for (size_t i = 0; i < o->n_views; i++) {
		tfsd_view_optval *v = &o->views[i];
		if (!*v->value || !view_takes_file(v->name))   /* (given empty: said at open) */
			continue;
		char *a = tfsd_absolute(v->value);
		if (!a)
			return -1;
		free(v->value);
		v->value = a;
	}
	return 0;
}

int tfsd_view_opts(const tfsd_opts *o, tfs_open_opts *oo, bool skip_empty_files,
		   const char *prog)
{
	tfs_error err;
	tfs_error_clear(&err);
	for (size_t i = 0; i < o->n_views; i++) {
		const tfsd_view_optval *v = &o->views[i];
		if (skip_empty_files && !*v->value && view_takes_file(v->name))
			continue;
		if (tfs_open_opts_set_view(oo, v->name, v->value, &err)) {
			fprintf(stderr, "%s: %s\n", prog, err.msg);
			return -1;
		}
	}
	return 0;
}

/* s with ',' and '\' escaped by a '\', as fuse_opt reads an -o value.  Allocated. */
static char *opt_escape(const char *s)
{
	char *e = malloc(2 * strlen(s) + 1), *d = e;
	if (!e)
		return NULL;
	for (; *s; s++) {
		if (*s == ',' || *s == '\\')
			*d++ = '\\';
		*d++ = *s;
	}
	*d = '\0';
	return e;
}


/* SIZE with an optional K, M, G or T (powers of 1024); false when it is not one. */
bool tfsd_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (end == s || errno || *end || s[0] == '-' || (shift && v > (UINT64_MAX >> shift)))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* The remote options into oo; the token file's first line into *token (allocated).
 * Prints errors. */
int tfsd_remote_opts(const tfsd_opts *o, tfs_open_opts *oo, char **token, const char *prog)
{
	oo->connections = o->connections;
	oo->cache_dir = o->cache;
	oo->cafile = o->cafile;
	oo->timeout = o->timeout;
	oo->s3_endpoint = o->endpoint;
	oo->s3_addressing = o->s3_addressing;   /* (its value checked by tfsd_opts_parse) */
	if (o->cache_size && !tfsd_parse_size(o->cache_size, &oo->cache_size)) {
		fprintf(stderr, "%s: cache_size=%s is not a size (bytes, or with K, M, G, T)\n",
			prog, o->cache_size);
		return -1;
	}
	if (!o->token_file)
		return 0;
	FILE *f = fopen(o->token_file, "re");
	char line[4096];
	if (!f || !fgets(line, sizeof(line), f)) {
		fprintf(stderr, "%s: token_file %s: %s\n", prog, o->token_file,
			f ? "empty" : strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	*token = strdup(line);
	explicit_bzero(line, sizeof(line));
	oo->token = *token;
	return *token ? 0 : -1;
}

/* Whether a SOURCE is read over the network: codec's scheme table says (tfs_is_remote). */
bool tfsd_is_remote(const char *source) { return tfs_is_remote(source); }

/* The daemon runs from /: every path is made absolute first; an Ollama model name stays
 * as it is.  -1: out of memory. */
int tfsd_absolute_paths(tfsd_opts *o)
{
	char **paths[] = { &o->source, &o->mountpoint, &o->staging, &o->output, &o->cache,
			   &o->token_file, &o->cafile };
	bool remote = o->source && tfsd_is_remote(o->source);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char *p = *paths[i];
		/* output=name is an Ollama tag, unless the source is remote (a local file then) */
		if (!p || (i == 0 && access(p, F_OK) != 0) ||
		    (i == 3 && !strchr(p, '/') && !remote))
			continue;
		char *a = tfsd_absolute(p);
		free(p);
		*paths[i] = a;
		if (!a)
			return -1;
	}
	return tfsd_view_paths(o);   /* (imatrix=FILE) */
}

/* mount(8), findmnt and df show the model as the mount's source.  -1: out of memory. */
int tfsd_add_fsname(const tfsd_opts *o, struct fuse_args *args)
{
	char *fsname = opt_escape(o->source), *mount_opts = NULL;
	int rc = !fsname || asprintf(&mount_opts, "fsname=%s,subtype=tensorfs,%s", fsname,
				     o->rw ? "rw" : "ro") < 0 ? -1 : 0;
	free(fsname);
	if (!rc && (fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, mount_opts)))
		rc = -1;
	free(mount_opts);
	return rc;
}


/* The values that a wrong word would otherwise only fail at open, with exit status 1:
 * a usage error like any other (-1, said). */
static int values_check(const tfsd_opts *o)
{
	uint64_t size;
	if (o->s3_addressing && strcmp(o->s3_addressing, "path") != 0 &&
	    strcmp(o->s3_addressing, "virtual") != 0) {
		fprintf(stderr, "tensorfs: -o s3_addressing=%s: not path or virtual\n",
			o->s3_addressing);
		return -1;
	}
	if (o->cache_size && !tfsd_parse_size(o->cache_size, &size)) {
		fprintf(stderr, "tensorfs: -o cache_size=%s is not a size (bytes, or with K, M, G, "
			"T)\n", o->cache_size);
		return -1;
	}
	return 0;
}

int tfsd_opts_parse(struct fuse_args *args, tfsd_opts *o, const tfsd_usage *usage)
{
	usage_text = usage;
	pthread_once(&opt_spec_once, opt_spec_make);
	if (fuse_opt_parse(args, o, opt_spec, opt_proc) == -1)
		return -1;
	return values_check(o);
}
