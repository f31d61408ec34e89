/*
 * qplan_write - a model quantized by tensorfs as llama-quantize would write it, for the
 * comparisons of tests/quant/check.py: the plan (tfs_qplan) as JSON on stdout, and, with an
 * output path, the file written by tensorfs' own GGUF writer (tfs_model_write).
 *
 * usage: qplan_write SRC FTYPE [OUT] [--imatrix FILE] [--leave-output] [--pure]
 *                    [--allow-requantize] [--imatrix-keys FILE DATASET CHUNKS]
 *                    [--output-type TYPE] [--token-type TYPE]      (TYPE: "Q8_0", "F16"...)
 *
 * The file: every tensor's new bytes (tfs_tensor_convert: its float32 values quantized as
 * the plan's type, with the imatrix's weights where the type takes them; the stored bytes
 * when the type does not change) go to a temporary file each; the model's tensors are
 * deleted and added again from those files in the plan's order, its keys changed as the
 * plan says (tfs_qplan_apply_kv), and the model written.  Exit 0; 1 with the plan's or the
 * writer's error on stderr (the first line: "qplan_write: " and the message).
 */
#include "tensorfs.h"
#include "qplan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void print_plan(const tfs_qplan *p)
{
	printf("{\"ftype\": %d, \"data_size\": %llu, \"tensors\": [", tfs_qplan_ftype(p),
	       (unsigned long long)tfs_qplan_data_size(p));
	for (size_t i = 0; i < tfs_qplan_n_tensors(p); i++) {
		const tfs_qtensor *q = tfs_qplan_tensor(p, i);
		printf("%s\n {\"name\": ", i ? "," : "");
		json_str(q->name);
		printf(", \"src_type\": \"%s\", \"type\": \"%s\", \"type_id\": %d, \"n_dims\": %u, "
		       "\"ne\": [%lld, %lld, %lld, %lld], \"offset\": %llu, \"nbytes\": %llu, "
		       "\"convert\": %s, \"fallback\": %s}",
		       tfs_dtype(q->src_dtype)->name,
		       tfs_dtype(q->dtype)->name, q->dtype, q->n_dims, (long long)q->ne[0],
		       (long long)q->ne[1], (long long)q->ne[2], (long long)q->ne[3],
		       (unsigned long long)q->offset, (unsigned long long)q->nbytes,
		       q->convert ? "true" : "false", q->fallback ? "true" : "false");
	}
	printf("],\n\"kv\": [");
	for (size_t i = 0; i < tfs_qplan_n_kv(p); i++) {
		const tfs_qkv *kv = tfs_qplan_kv(p, i);
		printf("%s\n {\"op\": \"%s\", \"key\": ", i ? "," : "",
		       kv->op == TFS_QPLAN_KV_REMOVE ? "remove" : "append");
		json_str(kv->key);
		printf(", \"type\": %u, \"hex\": \"", kv->type);
		for (uint64_t k = 0; k < kv->len; k++)
			printf("%02x", kv->data[k]);
		printf("\"}");
	}
	printf("]}\n");
}

/* Writes the plan's bytes of tensor q to a new file under dir; its path into path. */
static int tensor_file(const tfs_model *m, const tfs_qtensor *q, const tfs_imatrix *im,
		       const char *dir, size_t i, char *path, size_t cap, tfs_error *err)
{
	snprintf(path, cap, "%s/t%zu", dir, i);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600), rc = 0;
	if (fd < 0)
		return tfs_error_sys(err, errno, "%s", path);
	if (q->convert) {
		rc = tfs_tensor_convert(m, q->tensor, q->dtype, im, fd, err);
	} else {
		char *buf = malloc(q->nbytes ? q->nbytes : 1);
		int64_t got = buf ? tfs_tensor_read_raw(m, q->tensor, 0, q->nbytes, buf, err) : -1;
		if (!buf)
			rc = tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		else if (got < 0)
			rc = (int)got;
		else if ((uint64_t)got != q->nbytes || write(fd, buf, q->nbytes) != (ssize_t)q->nbytes)
			rc = tfs_error_set(err, TFS_E_IO, "%s: short write", path);
		free(buf);
	}
	close(fd);
	return rc;
}

static int write_model(tfs_model *m, const tfs_qplan *p, const tfs_imatrix *im, const char *out,
		       tfs_error *err)
{
	char dir[] = "/tmp/qplan_write.XXXXXX", path[256];
	size_t n = tfs_qplan_n_tensors(p);
	int rc = 0;
	if (!mkdtemp(dir))
		return tfs_error_sys(err, errno, "mkdtemp");
	for (size_t i = 0; i < n && !rc; i++)
		rc = tensor_file(m, tfs_qplan_tensor(p, i), im, dir, i, path, sizeof(path), err);
	/* every tensor again, in the plan's order: a deleted name added is appended */
	for (size_t i = 0; i < n && !rc; i++)
		rc = tfs_model_del_tensor(m, tfs_qplan_tensor(p, i)->name, err);
	for (size_t i = 0; i < n && !rc; i++) {
		const tfs_qtensor *q = tfs_qplan_tensor(p, i);
		char *name = strdup(q->name);   /* q->name is the model's, freed with the slot */
		snprintf(path, sizeof(path), "%s/t%zu", dir, i);
		rc = name ? tfs_model_set_tensor_file(m, name, q->dtype, q->n_dims, q->ne, path, err)
			  : tfs_error_set(err, TFS_E_NOMEM, "out of memory");
		free(name);
	}
	if (!rc)
		rc = tfs_qplan_apply_kv(p, m, err);
	if (!rc) {
		tfs_write_opts wo = { .output = out };
		rc = tfs_model_write(m, &wo, err);
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/t%zu", dir, i);
		unlink(path);
	}
	rmdir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	tfs_qplan_opts o = { 0 };
	const char *pos[3] = { NULL, NULL, NULL }, *im_path = NULL;
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--imatrix") && i + 1 < argc)
			im_path = argv[++i];
		else if (!strcmp(argv[i], "--leave-output"))
			o.leave_output = true;
		else if (!strcmp(argv[i], "--pure"))
			o.pure = true;
		else if (!strcmp(argv[i], "--allow-requantize"))
			o.allow_requantize = true;
		else if (!strcmp(argv[i], "--output-type") && i + 1 < argc) {
			o.set_output_type = true;
			o.output_type = tfs_dtype_from_name(argv[++i]);
		} else if (!strcmp(argv[i], "--token-type") && i + 1 < argc) {
			o.set_token_embd_type = true;
			o.token_embd_type = tfs_dtype_from_name(argv[++i]);
		}
		else if (!strcmp(argv[i], "--imatrix-keys") && i + 3 < argc) {
			o.imatrix_file = argv[++i];
			o.imatrix_dataset = argv[++i];
			o.imatrix_chunks = atoll(argv[++i]);
		} else if (npos < 3)
			pos[npos++] = argv[i];
		else
			npos = 4;
	}
	if (npos < 2 || npos > 3) {
		fprintf(stderr, "usage: qplan_write SRC FTYPE [OUT] [--imatrix FILE] "
			"[--leave-output] [--pure] [--allow-requantize] "
			"[--imatrix-keys FILE DATASET CHUNKS] [--output-type T] [--token-type T]\n");
		return 2;
	}
	/* a file per tensor, each a source of the model until it is written */
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	tfs_error err = { 0 };
	tfs_model *m = NULL;
	tfs_imatrix *im = NULL;
	tfs_qplan *p = NULL;
	int ftype = tfs_ftype_parse(pos[1]), rc;
	if (ftype < 0) {
		tfs_buf names = { 0 };
		tfs_ftype_list(&names);
		fprintf(stderr, "qplan_write: unknown type '%s' (valid: %s)\n", pos[1], names.data);
		tfs_buf_free(&names);
		return 2;
	}
	rc = tfs_model_open(&m, pos[0], NULL, &err);
	if (!rc && im_path)
		rc = tfs_imatrix_open(&im, im_path, &err);
	o.imatrix = im;
	if (im)
		o.imatrix_entries = (int64_t)tfs_imatrix_n_entries(im);
	if (!rc)
		rc = tfs_qplan_new(&p, m, ftype, &o, &err);
	if (!rc) {
		print_plan(p);
		fflush(stdout);
	}
	if (!rc && pos[2])
		rc = write_model(m, p, im, pos[2], &err);
	if (rc)
		fprintf(stderr, "qplan_write: %s\n", err.msg);
	tfs_qplan_free(p);
	tfs_imatrix_free(im);
	tfs_model_free(m);
	return rc ? 1 : 0;
}
