/*
 * session.c - the model a command works on: codec's session (journal/session.h: crash
 * recovery, the model, the staging directory and its replay), with the open's progress
 * on stderr and every error printed after the command's name.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What a mount checks once the model is open: the imatrix file, and whether a rw model
 * can be written at all.  Prints why not; -1. */
static int check_opened(tfsd_fs *fs, const char *prog)
{
	tfs_error err;
	tfs_error_clear(&err);
	const char *imatrix = tfsd_view_value(&fs->opts, "imatrix");
	if (imatrix && tfs_imatrix_open(&fs->imatrix, imatrix, &err)) {
		fprintf(stderr, "%s: -o imatrix: %s\n", prog, err.msg);
		return -1;
	}
	if (!fs->opts.rw)
		return 0;
	/* (an Ollama name with a scheme may be a model of the store) */
	if (tfs_model_remote_read_only(fs->model)) {
		fprintf(stderr, "%s: %s: a model of an Ollama registry mounts read-only (tensorfs "
			"writes Ollama models into a local store): pull it with ollama and mount "
			"its name with -o rw\n", prog, fs->opts.source);
		return -1;
	}
	return 0;
}

/* Whether a repack writes a GGUF file (output=X.gguf): a Hugging Face repo's GGUF view is
 * then the model edited and written. */
bool tfsd_gguf_output(const tfsd_opts *o)
{
	size_t n = o->output ? strlen(o->output) : 0;
	return o->rw && n > 5 && strcasecmp(o->output + n - 5, ".gguf") == 0;
}

/* Opens the model (and for rw the staging directory) of session s; -1 after saying why. */
static int open_and_stage(tfsd_fs *fs, tfs_session *s, const char *prog)
{
	tfsd_progress_view view;
	tfsd_progress_sink sink;
	tfsd_view_init(&view, stderr);
	tfsd_sink_init(&sink, &view, NULL);
	tfs_open_opts oo = { .verify = fs->opts.verify, .progress = tfsd_progress_report,
			     .progress_ctx = &sink };
	if (tfsd_gguf_output(&fs->opts)) /* (a view's flag output= decides, by its name) */
		tfs_open_opt_set(&oo, "gguf_model", "1");
	char *token = NULL;
	tfs_error err;
	/* every view option given, by name */
	int rc = tfsd_view_opts(&fs->opts, &oo, prog);
	if (!rc)
		rc = tfsd_remote_opts(&fs->opts, &oo, &token, prog);
	tfs_error_clear(&err);
	if (!rc && tfs_session_open(s, &oo, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		rc = -1;
	}
	fs->model = tfs_session_model(s);
	if (!rc && tfs_quant_view_note(fs->model)) /* the cache cannot be written */
		fprintf(stderr, "%s: %s\n", prog, tfs_quant_view_note(fs->model));
	if (!rc)
		rc = check_opened(fs, prog);
	/* a Hugging Face repo whose GGUF view cannot be made mounts all the same (its
	 * safetensors and tensors): the user is told why there is no model.gguf */
	if (!rc && !tfs_model_gguf_view(fs->model) && tfs_model_gguf_view_why(fs->model))
		fprintf(stderr, "%s: %s: no model.gguf: %s\n", prog, fs->opts.source,
			tfs_model_gguf_view_why(fs->model));
	/* the same of a multimodal repo's projector */
	if (!rc && !tfs_model_mmproj(fs->model) && tfs_model_mmproj_why(fs->model))
		fprintf(stderr, "%s: %s: no mmproj.gguf: %s\n", prog, fs->opts.source,
			tfs_model_mmproj_why(fs->model));
	/* the staging directory's recovery may open the model again */
	if (!rc && fs->opts.rw && tfs_session_stage(s, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		rc = -1;
	}
	fs->model = tfs_session_model(s);
	fs->staging = tfs_session_staging(s);
	/* a rw mount edits the safetensors: the GGUF view, computed from the files as they
	 * were, would not follow (rw,output=X.gguf makes the view the model edited instead) */
	if (!rc && fs->opts.rw && (tfs_model_gguf_view(fs->model) || tfs_model_mmproj(fs->model)))
		tfs_model_drop_gguf_view(fs->model, "a rw mount edits the safetensors, which the "
					 "GGUF view does not follow: mount with -o rw,output=X.gguf "
					 "to edit the GGUF view instead");
	if (token) { /* libcurl has its copy; none is kept here */
		explicit_bzero(token, strlen(token));
		free(token);
	}
	return rc;
}

int tfsd_session_open(tfsd_fs *fs, tfs_session **out, const char *prog)
{
	tfs_session_opts so = { .source = fs->opts.source, .writable = fs->opts.rw,
				.staging = fs->opts.staging, .output = fs->opts.output,
				.view_from_journal = fs->view_from_journal };
	tfs_session *s;
	tfs_error err;
	tfs_error_clear(&err);
	*out = NULL;
	if (tfs_session_new(&s, &so, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return -1;
	}
	if (open_and_stage(fs, s, prog)) {
		/* what it opened before failing goes, the staging directory stays as it is */
		tfs_session_close(s);
		tfs_imatrix_free(fs->imatrix);
		fs->model = NULL;
		fs->staging = NULL;
		fs->imatrix = NULL;
		return -1;
	}
	*out = s;
	return 0;
}

void tfsd_session_release(tfsd_fs *fs, tfs_session *s)
{
	tfs_session_release(s);
	fs->staging = NULL;
}

void tfsd_session_close(tfsd_fs *fs, tfs_session *s)
{
	tfsd_session_release(fs, s);
	tfs_session_close(s);
	fs->model = NULL;
	tfs_imatrix_free(fs->imatrix);
	fs->imatrix = NULL;
}
