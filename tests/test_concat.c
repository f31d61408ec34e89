/*
 * test_concat.c - a concatenation source (codec/model/concat.h), as a stacked expert tensor
 * uses it: the pieces' bytes read in odd chunks and at random ranges; splice_fd giving each
 * piece's own file at the piece's offset (memory: read instead); a computed concatenation
 * (read callback) with and without splicing; the owner's references (a held copy outlives
 * the model); index.json's "pieces"; pieces outside their source; a shard that shrank.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensorfs.h"
#include "concat.h"
#include "format.h"

#define A_SIZE 100000
#define B_SIZE 20000
#define C_SIZE 300

static uint8_t a_bytes[A_SIZE], b_bytes[B_SIZE], c_bytes[C_SIZE];
static char dir[64];
static int owner_refs;

static void ref(void *o) { (void)o; __atomic_add_fetch(&owner_refs, 1, __ATOMIC_SEQ_CST); }
static void unref(void *o) { (void)o; __atomic_sub_fetch(&owner_refs, 1, __ATOMIC_SEQ_CST); }

static void write_file(const char *name, const uint8_t *p, size_t n)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	cr_assert(f);
	cr_assert_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_concat.XXXXXX");
	cr_assert(mkdtemp(dir));
	srand(7);
	for (size_t i = 0; i < A_SIZE; i++)
		a_bytes[i] = (uint8_t)rand();
	for (size_t i = 0; i < B_SIZE; i++)
		b_bytes[i] = (uint8_t)rand();
	for (size_t i = 0; i < C_SIZE; i++)
		c_bytes[i] = (uint8_t)rand();
	write_file("a.safetensors", a_bytes, A_SIZE);
	write_file("b.safetensors", b_bytes, B_SIZE);
	owner_refs = 0;
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(concat, .init = setup, .fini = teardown);

/* The pieces of every test: two shards (files), one in memory, an empty one. */
static size_t make_model(tfs_model **m, tfs_concat_piece *p, uint8_t *want, uint64_t *total)
{
	tfs_error err;
	char path[128];
	int32_t ia, ib, ic;
	cr_assert_eq(tfs_model_new(m, &tfs_gguf_format, dir, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/a.safetensors", dir);
	cr_assert_eq(tfs_model_add_source(*m, path, "a.safetensors", &ia, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/b.safetensors", dir);
	cr_assert_eq(tfs_model_add_source(*m, path, "b.safetensors", &ib, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_add_mem_source(*m, "c", c_bytes, C_SIZE, &ic, &err), 0, "%s",
		     err.msg);
	const tfs_source *a = tfs_model_source(*m, (size_t)ia), *b = tfs_model_source(*m, (size_t)ib);
	const tfs_source *c = tfs_model_source(*m, (size_t)ic);
	/* (the model's source array may grow: the pointers are taken after the last add, and
	 * the concatenation is added to a second model below) */
	const struct { const tfs_source *s; const uint8_t *bytes; uint64_t off, len; } spec[] = {
		{ a, a_bytes, 10, 5000 }, { b, b_bytes, 0, 7000 }, { a, a_bytes, 5010, 0 },
		{ c, c_bytes, 3, 100 }, { a, a_bytes, 60000, 30000 }, { b, b_bytes, 19000, 1000 },
	};
	size_t n = sizeof(spec) / sizeof(spec[0]);
	uint64_t at = 0;
	for (size_t k = 0; k < n; k++) {
		p[k] = (tfs_concat_piece){ spec[k].s, spec[k].off, spec[k].len };
		memcpy(want + at, spec[k].bytes + spec[k].off, spec[k].len);
		at += spec[k].len;
	}
	*total = at;
	return n;
}

/* A second model holding the concatenation (the sources above stay where they are). */
static const tfs_source *add_concat(tfs_model *cm, const tfs_concat_piece *p, size_t n,
				    uint64_t size, const tfs_concat_ops *ops, const void *arg)
{
	tfs_error err;
	int32_t idx = -1;
	ref(NULL);
	cr_assert_eq(tfs_model_add_concat_source(cm, "blk.0.ffn_up_exps.weight", p, n, size, ops,
						 NULL, arg, &idx, &err), 0, "%s", err.msg);
	return tfs_model_source(cm, (size_t)idx);
}

static void expect_reads(const tfs_source *s, const uint8_t *want, uint64_t total)
{
	tfs_error err;
	uint8_t *got = malloc(total);
	cr_assert(got);
	/* in odd chunks, in order */
	for (uint64_t off = 0; off < total;) {
		uint64_t n = total - off < 777 ? total - off : 777;
		cr_assert_eq(tfs_source_pread(s, got + off, n, off, &err), 0, "%s", err.msg);
		off += n;
	}
	cr_assert(memcmp(got, want, total) == 0, "chunked read differs");
	/* random ranges, some across pieces */
	for (int i = 0; i < 300; i++) {
		uint64_t off = (uint64_t)rand() % total, n = 1 + (uint64_t)rand() % 9000;
		if (n > total - off)
			n = total - off;
		memset(got, 0, n);
		cr_assert_eq(tfs_source_pread(s, got, n, off, &err), 0, "%s", err.msg);
		cr_assert(memcmp(got, want + off, n) == 0, "[%llu, +%llu) differs",
			  (unsigned long long)off, (unsigned long long)n);
	}
	/* the whole at once */
	cr_assert_eq(tfs_source_pread(s, got, total, 0, &err), 0, "%s", err.msg);
	cr_assert(memcmp(got, want, total) == 0);
	free(got);
}

static const tfs_concat_ops plain_ops = { .ref = ref, .unref = unref };

Test(concat, reads_the_pieces_in_order)
{
	tfs_model *m, *cm;
	tfs_concat_piece p[8];
	uint8_t want[A_SIZE + B_SIZE + C_SIZE];
	uint64_t total;
	tfs_error err;
	size_t n = make_model(&m, p, want, &total);
	cr_assert_eq(tfs_model_new(&cm, &tfs_gguf_format, dir, &err), 0);
	const tfs_source *s = add_concat(cm, p, n, total, &plain_ops, NULL);
	cr_assert_eq(tfs_source_size(s), total);
	expect_reads(s, want, total);
	size_t np;
	cr_assert_eq(tfs_concat_pieces(s, &np), tfs_concat_pieces(s, &np));
	cr_assert_eq(np, n);
	cr_assert_null(tfs_concat_pieces(tfs_model_source(m, 0), &np));
	cr_assert_eq(np, 0);
	tfs_model_free(cm);
	cr_assert_eq(owner_refs, 0, "the owner's reference was not given back");
	tfs_model_free(m);
}

/* A splice of the whole range goes piece by piece: each file piece's own descriptor at the
 * piece's offset, at most the rest of the piece; the memory piece is read instead. */
Test(concat, splices_each_piece_from_its_file)
{
	tfs_model *m, *cm;
	tfs_concat_piece p[8];
	uint8_t want[A_SIZE + B_SIZE + C_SIZE], buf[A_SIZE];
	uint64_t total;
	tfs_error err;
	size_t n = make_model(&m, p, want, &total);
	cr_assert_eq(tfs_model_new(&cm, &tfs_gguf_format, dir, &err), 0);
	const tfs_source *s = add_concat(cm, p, n, total, &plain_ops, NULL);
	int spliced = 0, read = 0;
	for (uint64_t off = 0; off < total;) {
		tfs_source_fd f = { .fd = -1, .at = off, .len = total - off };
		int rc = tfs_source_splice_fd(&f, s, off, total - off, 0, total, &err);
		uint64_t got;
		if (rc == TFS_PASSTHROUGH) {
			cr_assert_eq(off, 12000, "only the memory piece (at 12000) is read, not %llu",
				     (unsigned long long)off);
			got = 100;
			cr_assert_eq(tfs_source_pread(s, buf, got, off, &err), 0, "%s", err.msg);
			read++;
		} else {
			cr_assert_eq(rc, 0, "%s", err.msg);
			cr_assert(f.len >= 1 && f.len <= total - off);
			/* never past the piece: the pieces are 5000, 7000, 100, 30000, 1000 */
			static const uint64_t ends[] = { 5000, 12000, 12100, 42100, 43100 };
			size_t k = 0;
			while (ends[k] <= off)
				k++;
			cr_assert_eq(f.len, ends[k] - off, "splice at %llu: %llu bytes",
				     (unsigned long long)off, (unsigned long long)f.len);
			cr_assert_eq(pread(f.fd, buf, f.len, (off_t)f.at), (ssize_t)f.len);
			got = f.len;
			tfs_source_fd_done(&f);
			spliced++;
		}
		cr_assert(memcmp(buf, want + off, got) == 0, "bytes at %llu differ",
			  (unsigned long long)off);
		off += got;
	}
	cr_assert_eq(spliced, 4);
	cr_assert_eq(read, 1);
	/* from inside a piece: the rest of that piece, at the shard's offset */
	tfs_source_fd f = { .fd = -1, .at = 13000, .len = 50 };
	cr_assert_eq(tfs_source_splice_fd(&f, s, 13000, 50, 0, total, &err), 0, "%s", err.msg);
	cr_assert_eq(f.at, 60000 + 900);
	cr_assert_eq(f.len, 50);
	tfs_source_fd_done(&f);
	tfs_model_free(cm);
	tfs_model_free(m);
	cr_assert_eq(owner_refs, 0);
}

/* A computed concatenation: bytes from the callback (here the pieces' bytes + 1, the size
 * halved as a conversion would), splice only when the ops allow it. */
static int64_t plus_one(void *owner, const void *arg, void *buf, uint64_t len, uint64_t off,
			tfs_error *err)
{
	(void)owner, (void)err;
	const uint8_t *want = arg;
	for (uint64_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = (uint8_t)(want[off + i] + 1);
	return (int64_t)len;
}

Test(concat, computed_by_its_callback)
{
	tfs_model *m, *cm;
	tfs_concat_piece p[8];
	uint8_t want[A_SIZE + B_SIZE + C_SIZE], out[A_SIZE + B_SIZE + C_SIZE];
	uint64_t total;
	tfs_error err;
	size_t n = make_model(&m, p, want, &total);
	for (uint64_t i = 0; i < total; i++)
		out[i] = (uint8_t)(want[i] + 1);
	cr_assert_eq(tfs_model_new(&cm, &tfs_gguf_format, dir, &err), 0);
	static const tfs_concat_ops conv = { .read = plus_one, .ref = ref, .unref = unref };
	static const tfs_concat_ops conv_splice = { .read = plus_one, .splice = true, .ref = ref,
						    .unref = unref };
	const tfs_source *s = add_concat(cm, p, n, total / 2, &conv, want);
	cr_assert_eq(tfs_source_size(s), total / 2);
	expect_reads(s, out, total / 2);
	tfs_source_fd f = { .fd = -1, .at = 0, .len = 10 };
	cr_assert_eq(tfs_source_splice_fd(&f, s, 0, 10, 0, total / 2, &err), TFS_PASSTHROUGH);
	const tfs_source *s2 = add_concat(cm, p, n, total, &conv_splice, want);
	expect_reads(s2, out, total);
	f = (tfs_source_fd){ .fd = -1, .at = 0, .len = 10 };
	cr_assert_eq(tfs_source_splice_fd(&f, s2, 0, 10, 0, total, &err), 0, "%s", err.msg);
	cr_assert_eq(f.at, 10);
	tfs_source_fd_done(&f);
	cr_assert_eq(owner_refs, 2);
	tfs_model_free(cm);
	cr_assert_eq(owner_refs, 0);
	tfs_model_free(m);
}

/* A held copy (an image being read) keeps the concatenation and the owner alive after its
 * model is freed. */
Test(concat, held_copy_outlives_the_model)
{
	tfs_model *m, *cm;
	tfs_concat_piece p[8];
	uint8_t want[A_SIZE + B_SIZE + C_SIZE];
	uint64_t total;
	tfs_error err;
	size_t n = make_model(&m, p, want, &total);
	cr_assert_eq(tfs_model_new(&cm, &tfs_gguf_format, dir, &err), 0);
	const tfs_source *s = add_concat(cm, p, n, total, &plain_ops, NULL);
	tfs_source *held;
	cr_assert_eq(tfs_source_held_new(&held, s, &err), 0, "%s", err.msg);
	tfs_model_free(cm);
	cr_assert_eq(owner_refs, 1, "the held copy lost the owner");
	size_t np;
	cr_assert_not_null(tfs_concat_pieces(held, &np));
	cr_assert_eq(np, n);
	expect_reads(held, want, total);
	tfs_source_held_free(held);
	cr_assert_eq(owner_refs, 0);
	tfs_model_free(m);
}

/* index.json names each piece's source, offset and bytes. */
Test(concat, index_json_lists_the_pieces)
{
	tfs_model *m, *cm;
	tfs_concat_piece p[8];
	uint8_t want[A_SIZE + B_SIZE + C_SIZE];
	uint64_t total;
	tfs_error err;
	size_t n = make_model(&m, p, want, &total);
	cr_assert_eq(tfs_model_new(&cm, &tfs_gguf_format, dir, &err), 0);
	int32_t idx;
	ref(NULL);
	cr_assert_eq(tfs_model_add_concat_source(cm, "blk.0.ffn_up_exps.weight", p, n, total,
						 &plain_ops, NULL, NULL, &idx, &err), 0, "%s", err.msg);
	tfs_tensor *t;
	const char *name = "blk.0.ffn_up_exps.weight";
	cr_assert_eq(tfs_model_push_tensor(cm, name, strlen(name), &t, &err), 0);
	t->dtype = TFS_DT_I8;
	t->n_dims = 1;
	t->ne[0] = (int64_t)total;
	t->nbytes = total;
	t->src = idx;
	tfs_buf b = { 0 };
	cr_assert_eq(tfs_model_index_json(&b, cm, &err), 0, "%s", err.msg);
	json_error_t je;
	json_t *j = json_loadb(b.data, b.len, 0, &je);
	cr_assert(j, "%s", je.text);
	json_t *pj = json_object_get(json_array_get(json_object_get(j, "tensors"), 0), "pieces");
	cr_assert(json_is_array(pj), "no pieces in %s", b.data);
	cr_assert_eq(json_array_size(pj), n);
	for (size_t k = 0; k < n; k++) {
		json_t *o = json_array_get(pj, k);
		cr_assert_str_eq(json_string_value(json_object_get(o, "source")),
				 tfs_source_label(p[k].src));
		cr_assert_eq(json_integer_value(json_object_get(o, "offset")), (json_int_t)p[k].off);
		cr_assert_eq(json_integer_value(json_object_get(o, "nbytes")), (json_int_t)p[k].len);
	}
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pj, 1), "source")),
			 "b.safetensors");
	json_decref(j);
	tfs_buf_free(&b);
	tfs_model_free(cm);
	tfs_model_free(m);
	cr_assert_eq(owner_refs, 0);
}

Test(concat, refuses_a_piece_outside_its_source)
{
	tfs_model *m, *cm;
	tfs_concat_piece p[8];
	uint8_t want[A_SIZE + B_SIZE + C_SIZE];
	uint64_t total;
	tfs_error err;
	int32_t idx;
	size_t n = make_model(&m, p, want, &total);
	cr_assert_eq(tfs_model_new(&cm, &tfs_gguf_format, dir, &err), 0);
	p[1].off = B_SIZE - 10; /* 7000 bytes from 10 before b's end */
	ref(NULL);
	cr_assert_eq(tfs_model_add_concat_source(cm, "x", p, n, total, &plain_ops, NULL, NULL, &idx,
						 &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "piece 1") && strstr(err.msg, "b.safetensors"), "%s", err.msg);
	p[1].off = 0;
	ref(NULL);
	cr_assert_eq(tfs_model_add_concat_source(cm, "x", p, n, total + 1, &plain_ops, NULL, NULL,
						 &idx, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "its pieces hold"), "%s", err.msg);
	cr_assert_eq(owner_refs, 0, "a failed add must give the owner's reference back");
	cr_assert_eq(tfs_model_n_sources(cm), 0);
	tfs_model_free(cm);
	tfs_model_free(m);
}

/* A shard truncated under the concatenation: reads of the bytes it lost fail with EIO (a
 * short read would be the end of the file to a reader), splices too; the rest still reads. */
Test(concat, a_shard_that_shrank_fails_with_eio)
{
	tfs_model *m, *cm;
	tfs_concat_piece p[8];
	uint8_t want[A_SIZE + B_SIZE + C_SIZE], buf[8000];
	uint64_t total;
	tfs_error err;
	size_t n = make_model(&m, p, want, &total);
	cr_assert_eq(tfs_model_new(&cm, &tfs_gguf_format, dir, &err), 0);
	const tfs_source *s = add_concat(cm, p, n, total, &plain_ops, NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/b.safetensors", dir);
	cr_assert_eq(truncate(path, 3000), 0);
	cr_assert_eq(tfs_source_pread(s, buf, 5000, 0, &err), 0, "%s", err.msg);
	cr_assert(memcmp(buf, want, 5000) == 0);
	int rc = tfs_source_pread(s, buf, 6000, 4000, &err);
	cr_assert_eq(rc, TFS_E_IO, "rc %d", rc);
	cr_assert(strstr(err.msg, "b.safetensors"), "%s", err.msg);
	tfs_source_fd f = { .fd = -1, .at = 9000, .len = 100 };
	cr_assert_neq(tfs_source_splice_fd(&f, s, 9000, 100, 0, total, &err), 0);
	cr_assert_eq(tfs_source_pread(s, buf, 100, 12000, &err), 0, "%s", err.msg);
	cr_assert(memcmp(buf, want + 12000, 100) == 0);
	tfs_model_free(cm);
	tfs_model_free(m);
}
