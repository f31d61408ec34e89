/*
 * convert.c - `tensorfs convert SOURCE OUTPUT [-o quantize=TYPE,...]`: the model.gguf a
 * mount with those options shows (-o mmproj: its mmproj.gguf), written to a file without a mount (as a repack writes:
 * a temporary beside OUTPUT, fsynced, read back, renamed, the directory fsynced); and the
 * checks of -o quantize= that mount and convert share.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tfsd_usage convert_usage = {
	"usage: tensorfs convert SOURCE OUTPUT [-o OPTIONS]\n"
	"Writes the model.gguf a mount of SOURCE with the same options shows to OUTPUT (a new\n"
	"file: written beside it, fsynced, renamed into place), with progress on stderr;\n"
	"-o mmproj: a multimodal repo's mmproj.gguf.\n",
	TFSD_FOR_CONVERT, NULL };

int tfsd_quantize_check(const tfsd_opts *o, const char *prog)
{
	if (tfsd_view_value(o, "quantize") && o->rw && !o->output) {
		fprintf(stderr, "%s: -o quantize with -o rw writes the quantized model to a new "
			"file (never to the source): it needs -o output=PATH\n", prog);
		return 2;
	}
	return 0;
}

/* Parses `tensorfs convert SOURCE OUTPUT [-o ...]` into o: 0, or the exit status after
 * saying why not. */
static int convert_args(tfsd_opts *o, struct fuse_args *args, const char *prog)
{
	if (tfsd_opts_parse(args, o, &convert_usage) == -1)
		return 2;
	if (!o->source || !o->mountpoint) {
		tfsd_usage_print(stderr, &convert_usage);
		return 2;
	}
	const char *bad = o->rw || o->writable ? "rw" : o->output ? "output=" : o->staging
			  ? "staging=" : NULL;
	if (bad) {
		fprintf(stderr, "%s: -o %s does not apply: convert writes OUTPUT and never "
			"changes SOURCE\n", prog, bad);
		return 2;
	}
	int rc = tfsd_quantize_check(o, prog);
	if (rc)
		return rc;
	if (o->mmproj && tfsd_view_value(o, "quantize")) {
		fprintf(stderr, "%s: -o mmproj writes the projector as the converter does; "
			"quantize= does not apply to it\n", prog);
		return 2;
	}
	if (tfsd_view_paths(o)) {   /* (imatrix='s path is a key: as a mount writes it) */
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	char *src = realpath(o->source, NULL), *out = realpath(o->mountpoint, NULL);
	bool same = src && out && strcmp(src, out) == 0;
	free(src);
	free(out);
	if (same) {
		fprintf(stderr, "%s: OUTPUT is SOURCE: convert writes a new file\n", prog);
		return 2;
	}
	return 0;
}

/* The model whose model.gguf is written: the one opened (a GGUF, a quantized view), or a
 * repo's GGUF view.  NULL after saying why there is none. */
static tfs_model *gguf_of(tfs_model *m, const char *prog, const char *source)
{
	const char *name = tfs_image_name(m);
	if (name && strcmp(name, "model.gguf") == 0)
		return m;
	tfs_model *v = tfs_model_gguf_view(m);
	if (v)
		return v;
	/* (a repo whose GGUF view cannot be made: the session said why, "no model.gguf") */
	if (!tfs_model_gguf_view_why(m))
		fprintf(stderr, "%s: %s: no GGUF form (a safetensors model is converted to GGUF "
			"when it is a Hugging Face repo: a config.json beside it)\n", prog, source);
	return NULL;
}

/* -o mmproj: the repo's projector.  NULL after saying why there is none. */
static tfs_model *mmproj_of(tfs_model *m, const tfsd_opts *o, const char *prog)
{
	tfs_model *v = tfs_model_mmproj(m);
	const char *why = tfs_model_mmproj_why(m);
	if (!v)
		fprintf(stderr, "%s: %s: no mmproj.gguf (%s)\n", prog, o->source,
			why ? why : "not a multimodal Hugging Face repo: a class with a projector "
			"and its vision_config");
	return v;
}

int tfsd_convert_main(int argc, char **argv)
{
	const char *prog = "tensorfs convert";
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	tfsd_fs fs;
	tfs_session *s = NULL;
	memset(&fs, 0, sizeof(fs));
	int ret = convert_args(&fs.opts, &args, prog);
	if (ret || (ret = 1, tfsd_session_open(&fs, &s, prog)))
		goto out;
	tfs_model *m = fs.opts.mmproj ? mmproj_of(fs.model, &fs.opts, prog)
				      : gguf_of(fs.model, prog, fs.opts.source);
	if (m) {
		tfsd_progress_view view;
		tfsd_progress_sink sink;
		tfsd_view_init(&view, stderr);
		tfsd_sink_init(&sink, &view, NULL);
		tfs_write_opts wo = { .progress = tfsd_progress_report, .progress_ctx = &sink,
				      .output = fs.opts.mountpoint, .unchanged_too = true };
		tfs_error err;
		tfs_error_clear(&err);
		if (tfs_model_write(m, &wo, &err))
			fprintf(stderr, "%s: %s\n", prog, err.msg);
		else
			ret = 0;
	}
	tfsd_session_close(&fs, s);
out:
	tfsd_opts_free(&fs.opts);
	fuse_opt_free_args(&args);
	return ret;
}
