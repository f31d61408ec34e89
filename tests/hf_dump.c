/*
 * hf_dump - writes the GGUF view of a Hugging Face model directory to a file, as the mount
 * would serve it: the plan's header, then every tensor through tfs_hf_tensor_read (in odd-sized
 * pieces, so reads that start and end inside blocks and rows are exercised).  The tests
 * compare its output with llama.cpp's convert_hf_to_gguf.py (tests/hf/compare.py).
 *
 *   hf_dump [--outtype auto|f32|f16|bf16|q8_0] [--fp8-as-q8] [--no-vocab] [--piece N] [--keys]
 *           [--mmproj] DIR OUT.gguf
 *
 * --mmproj writes the projector instead (mmproj.gguf: the converter's --mmproj;
 * hf/compare_mmproj.py).
 * --keys prints the plan's keys and tensors instead of writing a file (OUT may be -).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensorfs.h"
#include "hf_plan.h"
#include "hf_mmproj.h"

static int usage(void)
{
	fprintf(stderr, "usage: hf_dump [--outtype auto|f32|f16|bf16|q8_0] [--fp8-as-q8] [--no-vocab] "
		"[--piece N] [--keys] [--mmproj] DIR OUT.gguf\n");
	return 2;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The directory's name as Python's Path(dir).name sees it. */
static char *dir_name(const char *dir)
{
	char *d = strdup(dir);
	size_t n = strlen(d);
	while (n > 1 && d[n - 1] == '/')
		d[--n] = 0;
	char *s = strrchr(d, '/');
	char *name = strdup(s ? s + 1 : d);
	free(d);
	return name;
}

int main(int argc, char **argv)
{
	tfs_hf_opts o = { 0 };
	uint64_t piece = 4099;
	bool keys = false, mmproj = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
		if (!strcmp(argv[i], "--outtype") && i + 1 < argc) {
			const char *t = argv[++i];
			o.outtype = !strcmp(t, "f32") ? TFS_HF_OUT_F32 : !strcmp(t, "f16") ? TFS_HF_OUT_F16
				  : !strcmp(t, "bf16") ? TFS_HF_OUT_BF16
				  : !strcmp(t, "q8_0") ? TFS_HF_OUT_Q8_0 : TFS_HF_OUT_AUTO;
			if (o.outtype == TFS_HF_OUT_AUTO && strcmp(t, "auto"))
				return usage();
		} else if (!strcmp(argv[i], "--fp8-as-q8")) {
			o.fp8_as_q8 = true;
		} else if (!strcmp(argv[i], "--no-vocab")) {
			o.no_vocab = true;
		} else if (!strcmp(argv[i], "--mmproj")) {
			mmproj = true;
		} else if (!strcmp(argv[i], "--keys")) {
			keys = true;
		} else if (!strcmp(argv[i], "--piece") && i + 1 < argc) {
			piece = strtoull(argv[++i], NULL, 10);
			if (!piece)
				return usage();
		} else {
			return usage();
		}
	}
	if (argc - i != 2)
		return usage();
	const char *dir = argv[i], *out = argv[i + 1];
	tfs_error err = { 0 };
	tfs_model *st = NULL;
	tfs_hf_plan *p = NULL;
	tfs_hf_files files;
	tfs_buf hdr = { 0 };
	char *name = dir_name(dir);
	uint8_t *buf = NULL;
	int fd = -1, rc = 1;
	o.dir_name = name;
	tfs_hf_files_dir(&files, dir);
	if (tfs_model_open(&st, dir, NULL, &err) ||
	    (mmproj ? tfs_hf_mmproj_open : tfs_hf_plan_open)(&p, &files, st, &o, &err)) {
		fprintf(stderr, "hf_dump: %s\n", err.msg);
		goto out;
	}
	if (keys) {
		const tfs_hf_kvs *l = tfs_hf_plan_kvs(p);
		for (size_t k = 0; k < l->n; k++) {
			tfs_buf v = { 0 };
			if (tfs_value_format(&v, l->kv[k].type, l->kv[k].data, l->kv[k].len, &err))
				tfs_buf_printf(&v, "(%s)", err.msg);
			printf("%s = %.200s\n", l->kv[k].name, v.data ? v.data : "");
			tfs_buf_free(&v);
		}
		for (size_t t = 0; t < tfs_hf_plan_n_tensors(p); t++) {
			const tfs_hf_tensor *x = tfs_hf_plan_tensor(p, t);
			printf("%-28s %-5s [%lld, %lld] src %ld %s%s perm %u\n", x->name,
			       tfs_dtype(x->dtype)->name, (long long)x->ne[0],
			       (long long)(x->n_dims > 1 ? x->ne[1] : 1), x->src,
			       x->recipe == TFS_HF_COPY ? "copy" : x->recipe == TFS_HF_CONVERT
			       ? "convert" : "generated", x->raw ? " raw" : "", x->perm_heads);
		}
		rc = 0;
		goto out;
	}
	if (tfs_hf_plan_header(&hdr, p, &err)) {
		fprintf(stderr, "hf_dump: %s\n", err.msg);
		goto out;
	}
	if (hdr.len != tfs_hf_plan_header_size(p)) {
		fprintf(stderr, "hf_dump: header is %zu bytes, the plan says %llu\n", hdr.len,
			(unsigned long long)tfs_hf_plan_header_size(p));
		goto out;
	}
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write_all(fd, hdr.data, hdr.len)) {
		perror(out);
		goto out;
	}
	uint64_t pos = hdr.len;
	if (!(buf = malloc(piece)))
		goto out;
	static const uint8_t zeros[32];
	for (size_t t = 0; t < tfs_hf_plan_n_tensors(p); t++) {
		const tfs_hf_tensor *x = tfs_hf_plan_tensor(p, t);
		if (x->offset != pos) {
			fprintf(stderr, "hf_dump: %s at %llu, the plan says %llu\n", x->name,
				(unsigned long long)pos, (unsigned long long)x->offset);
			goto out;
		}
		for (uint64_t off = 0; off < x->nbytes; off += piece) {
			int64_t got = tfs_hf_tensor_read(p, t, off, piece, buf, &err);
			uint64_t want = x->nbytes - off < piece ? x->nbytes - off : piece;
			if (got < 0 || (uint64_t)got != want) {
				fprintf(stderr, "hf_dump: %s: %s\n", x->name,
					got < 0 ? err.msg : "short read");
				goto out;
			}
			if (write_all(fd, buf, (size_t)got))
				goto out;
		}
		pos += x->nbytes;
		uint64_t pad = (32 - pos % 32) % 32;
		if (pad && write_all(fd, zeros, (size_t)pad))
			goto out;
		pos += pad;
	}
	if (pos != tfs_hf_plan_file_size(p)) {
		fprintf(stderr, "hf_dump: wrote %llu bytes, the plan says %llu\n",
			(unsigned long long)pos, (unsigned long long)tfs_hf_plan_file_size(p));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0 && close(fd) && !rc) {
		perror(out);
		rc = 1;
	}
	free(buf);
	free(name);
	tfs_buf_free(&hdr);
	tfs_hf_plan_free(p);
	tfs_model_free(st);
	return rc;
}
