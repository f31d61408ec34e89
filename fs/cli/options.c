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
/* the key of row i of the option table when opt_proc reads its value itself (a view's
 * option, a number): KEY_ROW + i */
#define KEY_ROW 0x10000
#define MAX_OPTIONS 64
static struct fuse_opt opt_spec[MAX_OPTIONS + N_EXTRA];
static char opt_templates[MAX_OPTIONS][40];
static pthread_once_t opt_spec_once = PTHREAD_ONCE_INIT;

/*
 * The options libfuse 3 takes itself (lib/mount.c's fuse_mount_opts and mount flags,
 * lib/fuse_lowlevel.c's session options): kept for it.  Any other word is refused here with
 * tensorfs's own line, not libfuse's "unknown option(s)" after the model was opened.  A name
 * ending in '=' takes a value.
 */
static const char *const fuse_options[] = {
	"allow_other", "allow_root", "auto_unmount", "default_permissions", "blkdev",
	"blksize=", "fsname=", "subtype=", "max_read=", "context=", "fscontext=", "defcontext=",
	"rootcontext=", "user=", "dirsync", "sync", "async", "nodiratime", "diratime",
};

static bool fuse_takes(const char *arg)
{
	for (size_t i = 0; i < sizeof(fuse_options) / sizeof(fuse_options[0]); i++) {
		const char *f = fuse_options[i];
		size_t n = strlen(f);
		if (f[n - 1] == '=' ? strncmp(arg, f, n) == 0 : strcmp(arg, f) == 0)
			return true;
	}
	return false;
}

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
		/* a view's option or a number: a key, opt_proc reads its value */
		opt_spec[n] = o->commands & TFSD_VIEW_OPTION || o->kind == TFSD_OPT_INT
			      ? (struct fuse_opt)FUSE_OPT_KEY(opt_templates[n], KEY_ROW + (int)i)
			      : (struct fuse_opt){ opt_templates[n], (unsigned long)o->offset,
						   o->kind == TFSD_OPT_FLAG ? o->value : 0 };
	}
	memcpy(&opt_spec[n], extra_spec, sizeof(extra_spec));
}

/* The command whose options are parsed, as its messages begin. */
static const char *prog_of(void)
{
	return usage_text->command == TFSD_FOR_REPACK ? "tensorfs repack"
	       : usage_text->command == TFSD_FOR_CONVERT ? "tensorfs convert" : "mount.tensorfs";
}

/* A number of 0 or more, digits only, at most INT_MAX.  false when s is none. */
static bool parse_count(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno || v > INT_MAX)
		return false;
	*out = (int)v;
	return true;
}

/* An option of the table whose value opt_proc reads (arg: "name=value"): a number into its
 * field, a view's value into o->views (a number kept as digits).  0, or -1 after saying why:
 * a usage error. */
static int row_value(tfsd_opts *o, const tfsd_option *row, const char *arg)
{
	const char *v = arg + strlen(row->name) + 1;
	int n = 0;
	if (row->kind == TFSD_OPT_FLAG)   /* a view's flag (VFLAG): "1" */
		return tfsd_view_value_set(o, row->name, "1");
	if (row->commands & TFSD_VIEW_OPTION)   /* (its view's row checks it: values_check) */
		return tfsd_view_value_set(o, row->name, v);
	if (row->kind == TFSD_OPT_INT && !parse_count(v, &n)) {
		fprintf(stderr, "%s: -o %s: takes a number (%s, 0 or more)\n", prog_of(), arg,
			row->arg);
		return -1;
	}
	memcpy((char *)o + row->offset, &n, sizeof(n));
	return 0;
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	tfsd_opts *o = data;
	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (!o->source)
			return (o->source = strdup(arg)) ? 0 : -1;
		if (!o->mountpoint)
			return (o->mountpoint = strdup(arg)) ? 0 : -1;
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog_of(), arg);
		tfsd_usage_print(stderr, usage_text);
		return -1;
	}
	if (key >= KEY_ROW && key < KEY_ROW + (int)tfsd_n_options)
		return row_value(o, &tfsd_option_table[key - KEY_ROW], arg);
	if (key == 'h') {
		tfsd_usage_print(stdout, usage_text);
		exit(0);
	}
	if (key == FUSE_OPT_KEY_OPT && !fuse_takes(arg)) {
		fprintf(stderr, "%s: -o %s: no such option (tensorfs help %s lists them)\n",
			prog_of(), arg, usage_text->command == TFSD_FOR_REPACK ? "repack"
			: usage_text->command == TFSD_FOR_CONVERT ? "convert" : "mount");
		return -1;
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
		if (!*v->value || !view_takes_file(v->name))   /* (given empty: refused already) */
			continue;
		char *a = tfsd_absolute(v->value);
		if (!a)
			return -1;
		free(v->value);
		v->value = a;
	}
	return 0;
}

int tfsd_view_opts(const tfsd_opts *o, tfs_open_opts *oo, const char *prog)
{
	tfs_error err;
	tfs_error_clear(&err);
	for (size_t i = 0; i < o->n_views; i++) {
		const tfsd_view_optval *v = &o->views[i];
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
	/* a scheme's options, by name: its row reads them (values checked by tfsd_opts_parse) */
	if (tfs_open_opt_set(oo, "endpoint", o->endpoint) ||
	    tfs_open_opt_set(oo, "s3_addressing", o->s3_addressing))
		return -1;
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


/* A string option's value (not a view's; a remote scheme's as its row checks it,
 * tfs_remote_option_check): 0, or -1 after saying why it is none. */
static int value_check(const tfsd_option *row, const char *v)
{
	uint64_t size;
	const char *why = NULL;
	tfs_error err = { 0 };
	if (*v && tfs_remote_option_check(row->name, v, &err) == TFS_E_INVALID) {
		fprintf(stderr, "%s: -o %s\n", prog_of(), err.msg);
		return -1;
	}
	if (!*v)
		why = "needs a value";
	else if (!strcmp(row->name, "cache_size") && !tfsd_parse_size(v, &size))
		why = "not a size (bytes, or with K, M, G, T)";
	if (!why)
		return 0;
	if (*v)
		fprintf(stderr, "%s: -o %s=%s: %s\n", prog_of(), row->name, v, why);
	else
		fprintf(stderr, "%s: -o %s=: %s (%s=%s)\n", prog_of(), row->name, why, row->name,
			row->arg);
	return -1;
}

/*
 * Every value given, checked before anything is opened: a value that is not of its option's
 * kind is a usage error (exit status 2) like an unknown option, in one line, whatever the
 * command; a view's option as its view's row checks it (codec: tfs_view_option_check).  A
 * file or directory that cannot be used is found when it is opened (exit status 1, as a
 * SOURCE that is not there).  -1 after saying why.
 */
static int values_check(const tfsd_opts *o)
{
	for (size_t i = 0; i < tfsd_n_options; i++) {
		const tfsd_option *row = &tfsd_option_table[i];
		char *v;
		if (row->kind != TFSD_OPT_STR || row->commands & TFSD_VIEW_OPTION)
			continue;
		memcpy(&v, (const char *)o + row->offset, sizeof(v));
		if (v && value_check(row, v))
			return -1;
	}
	return tfsd_view_values_check(o, prog_of());
}

int tfsd_view_values_check(const tfsd_opts *o, const char *prog)
{
	tfs_error err;
	for (size_t i = 0; i < o->n_views; i++) {
		const tfsd_view_optval *v = &o->views[i];
		tfs_error_clear(&err);
		if (!*v->value) {
			fprintf(stderr, "%s: -o %s=: needs a value\n", prog, v->name);
			return -1;
		}
		if (tfs_view_option_check(v->name, v->value, &err)) {
			fprintf(stderr, "%s: -o %s\n", prog, err.msg);
			return -1;
		}
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
