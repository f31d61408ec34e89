/*
 * repack.c - writing the staged changes: `tensorfs repack SOURCE` (the changes a killed
 * daemon left staged), and the repack a rw mount's daemon does at unmount.  Both go
 * through the same session and tfs_session_repack.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const tfsd_usage repack_usage = {
	"usage: tensorfs repack SOURCE [-o staging=DIR,output=PATH]\n"
	"Writes the changes a rw mount of SOURCE staged but did not repack (its daemon was\n"
	"killed), as its unmount would have.  output= or staging= finds the staging directory\n"
	"of a mount that had one; the view the changes were made to (quantize=, imatrix=,\n"
	"outtype=) is the one the journal records.  A remote SOURCE takes the mount's output=\n"
	"and its remote options (cache=, cafile=, token_file=, ...).\n",
	TFSD_FOR_REPACK, NULL };

/* A view written to output= with nothing staged (a rw mount of -o quantize= or of a repo's
 * GGUF view that nobody edited): the unmount still writes the view, as `tensorfs convert`
 * would, since that file is what the mount was for.  (A model's own copy to output= is
 * written only when something changed, as before.) */
static bool view_to_write(const tfsd_fs *fs)
{
	return fs->opts.rw && fs->opts.output && !fs->view_from_journal &&
	       (tfsd_view_value(&fs->opts, "quantize") ||
		(tfsd_gguf_output(&fs->opts) && tfs_hf_is_repo(fs->opts.source)));
}

int tfsd_repack_staged(tfsd_fs *fs, tfs_session *s)
{
	const bool dirty = fs->staging && tfs_staging_dirty(fs->staging);

	if (!dirty && !view_to_write(fs)) {
		/* the end, for `tensorfs unmount`: a status file without it means the daemon
		 * died before its repack was done */
		FILE *st = fs->status_path ? fopen(fs->status_path, "a") : NULL;
		if (st) {
			fputs("done: nothing changed\n", st);
			fclose(st);
		}
		return 0;
	}
	/* (the FUSE mount is gone, the status file says nothing yet: mount_crash's case) */
	tfs_test_crash_point("before_repack");
	/* (not given: the journal's output, else the source) */
	const char *out = fs->opts.output ? fs->opts.output : tfs_staging_output(fs->staging);
	FILE *st = fs->status_path ? fopen(fs->status_path, "a") : NULL;
	tfsd_progress_view view;
	tfsd_progress_sink sink;
	tfsd_view_init(&view, stderr);
	tfsd_sink_init(&sink, &view, st);
	tfsd_sink_printf(&sink, "tensorfs: repacking %s\n", out);
	tfs_write_opts wo = { .progress = tfsd_progress_report, .progress_ctx = &sink,
			      .output = fs->opts.output, .unchanged_too = !dirty };
	tfs_error err;
	tfs_error_clear(&err);
	int rc = dirty ? tfs_session_repack(s, &wo, &err)
		       : tfs_model_write(tfs_session_model(s), &wo, &err);
	if (rc && dirty)
		tfsd_sink_printf(&sink, "error: %s (the source is untouched; the changes stay in "
				 "%s)\n", err.msg, tfs_staging_dir(fs->staging));
	else if (rc)
		tfsd_sink_printf(&sink, "error: %s (the source is untouched; nothing was staged)\n",
				 err.msg);
	else
		tfsd_sink_printf(&sink, "done: wrote %s\n", out);
	if (st)
		fclose(st);
	return rc ? 1 : 0;
}

/* Parses `tensorfs repack SOURCE [-o ...]` into fs->opts: 0, or the exit status after
 * saying why not. */
static int repack_args(tfsd_fs *fs, struct fuse_args *args)
{
	if (tfsd_opts_parse(args, &fs->opts, &repack_usage) == -1)
		return 2;
	if (!fs->opts.source || fs->opts.mountpoint) {
		if (fs->opts.mountpoint)
			fprintf(stderr, "tensorfs repack: unexpected argument '%s'\n",
				fs->opts.mountpoint);
		tfsd_usage_print(stderr, &repack_usage);
		return 2;
	}
	fs->opts.rw = 1;
	if (tfsd_is_remote(fs->opts.source) && !fs->opts.output) {
		fprintf(stderr, "tensorfs repack: %s: a remote model was staged for a local file: "
			"give the mount's -o output=PATH\n", fs->opts.source);
		return 2;
	}
	return 0;
}

int tfsd_repack_main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	tfsd_fs fs;
	tfs_session *s;
	memset(&fs, 0, sizeof(fs));
	fs.view_from_journal = true; /* the view the changes were made to, unless given */
	int ret = repack_args(&fs, &args);
	if (ret)
		goto out;
	ret = 1;
	if (tfsd_session_open(&fs, &s, "tensorfs repack"))
		goto out;
	if (!tfs_staging_dirty(fs.staging)) {
		fprintf(stderr, "tensorfs repack: nothing staged in %s (a mount with -o "
			"output=PATH staged its changes beside PATH, one with -o staging=DIR in DIR: "
			"give the same output= or staging=)\n", tfs_staging_dir(fs.staging));
		ret = 0;
	} else {
		ret = tfsd_repack_staged(&fs, s);
	}
	tfsd_session_close(&fs, s);
out:
	tfsd_opts_free(&fs.opts);
	fuse_opt_free_args(&args);
	return ret;
}
