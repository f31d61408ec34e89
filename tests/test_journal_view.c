/*
 * test_journal_view.c - the view a staging journal's changes apply to (journal/view_record.c),
 * through sessions as a mount and `tensorfs repack` run them, without a mount: a session
 * opened with -o quantize= records it with its first change; after a "crash" (the session
 * closed without its repack) a repack session given no view option takes the recorded one and
 * writes what the first session's repack would have; a view that contradicts the record is
 * refused (a mount's, and a repack's given option) and the journal is left as it was; an
 * imatrix that changed since is refused, naming it; a journal written without a record (as
 * before it existed) replays onto whatever view the session opens.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tensorfs.h"
#include "testutil.h"

static char tmpdir[64];

static void setup(void)
{
	strcpy(tmpdir, "/tmp/test_journal_view.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

static char *tpath(const char *name)
{
	char *p;
	cr_assert(asprintf(&p, "%s/%s", tmpdir, name) > 0);
	return p;
}

/* ==== a model to quantize, an importance matrix ==== */

static void put(tfs_buf *b, const void *p, size_t n) { cr_assert_eq(tfs_buf_append(b, p, n), 0); }
static void put_u32(tfs_buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(tfs_buf *b, uint64_t v) { put(b, &v, 8); }

static void put_str(tfs_buf *b, const char *s)
{
	put_u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(p, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

/* A one-layer llama of F16 weights (rows of 256), random values, as m.gguf under tmpdir. */
static char *write_model(void)
{
	static const char *const names[] = { "token_embd.weight", "blk.0.attn_q.weight",
					     "blk.0.attn_v.weight", "output.weight" };
	const uint64_t ne0 = 256, ne1 = 32, nbytes = ne0 * ne1 * 2;
	tfs_buf b = { 0 };
	put(&b, "GGUF", 4);
	put_u32(&b, 3);
	put_u64(&b, 4);
	put_u64(&b, 4);
	put_str(&b, "general.architecture");
	put_u32(&b, TFS_GGUF_STRING);
	put_str(&b, "llama");
	const char *ks[] = { "llama.block_count", "llama.attention.head_count",
			     "llama.attention.head_count_kv" };
	for (int k = 0; k < 3; k++) {
		put_str(&b, ks[k]);
		put_u32(&b, TFS_GGUF_UINT32);
		put_u32(&b, k ? 4 : 1);
	}
	for (int i = 0; i < 4; i++) {
		put_str(&b, names[i]);
		put_u32(&b, 2);
		put_u64(&b, ne0);
		put_u64(&b, ne1);
		put_u32(&b, TFS_DT_F16);
		put_u64(&b, (uint64_t)i * nbytes);
	}
	while (b.len % 32)
		put(&b, "", 1);
	uint64_t seed = 24;
	for (uint64_t k = 0; k < 4 * nbytes; k += 2) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint16_t h = tfs_f32_to_f16(((float)(seed >> 40) / (float)(1u << 24) - 0.5f) * 0.1f);
		put(&b, &h, 2);
	}
	char *path = tpath("m.gguf");
	write_file(path, b.data, b.len);
	tfs_buf_free(&b);
	return path;
}

/* llama.cpp's legacy imatrix (.dat) with an entry for every weight of write_model. */
static char *write_imatrix(void)
{
	static const char *const names[] = { "token_embd.weight", "blk.0.attn_q.weight",
					     "blk.0.attn_v.weight", "output.weight" };
	tfs_buf b = { 0 };
	put_u32(&b, 4);
	for (int i = 0; i < 4; i++) {
		put_u32(&b, (uint32_t)strlen(names[i]));
		put(&b, names[i], strlen(names[i]));
		put_u32(&b, 1);   /* ncall */
		put_u32(&b, 256); /* values */
		for (int k = 0; k < 256; k++) {
			float f = 0.5f + (float)((k * 7 + i) % 13) / 8.0f;
			put(&b, &f, 4);
		}
	}
	put_u32(&b, 1); /* the last call */
	put_u32(&b, 4);
	put(&b, "test", 4);
	char *path = tpath("imatrix.dat");
	write_file(path, b.data, b.len);
	tfs_buf_free(&b);
	return path;
}

/* ==== sessions ==== */

typedef struct {
	const char *quantize, *imatrix;
	bool from_journal;   /* `tensorfs repack` */
	const char *output;  /* NULL: the journal's */
} how;

/* A writable session of src staging in dir, opened as h says (the cache under tmpdir):
 * 0 and *out, or the error. */
static int session(tfs_session **out, const char *src, const char *dir, const how *h,
		   tfs_error *err)
{
	char *cache = tpath("cache");
	tfs_session_opts so = { .source = src, .writable = true, .staging = dir,
				.output = h->output, .view_from_journal = h->from_journal };
	tfs_open_opts oo = { .cache_dir = cache };
	tfs_open_opt_set(&oo, "quantize", h->quantize);
	tfs_open_opt_set(&oo, "imatrix", h->imatrix);
	tfs_open_opt_set(&oo, "quantize_threads", "1");
	tfs_session *s = NULL;
	int rc = tfs_session_new(&s, &so, err);
	if (!rc)
		rc = tfs_session_open(s, &oo, err);
	if (!rc)
		rc = tfs_session_stage(s, err);
	free(cache);
	if (rc)
		tfs_session_close(s);
	*out = rc ? NULL : s;
	return rc;
}

/* general.name set to name in staging st of model m (a GGUF string: its length, its bytes). */
static void stage_name(tfs_staging *st, tfs_model *m, const char *name)
{
	tfs_error err = { 0 };
	tfs_buf b = { 0 };
	put_str(&b, name);
	cr_assert_eq(tfs_staging_set_kv(st, m, "general.name", TFS_GGUF_STRING,
					(const uint8_t *)b.data, b.len, &err), 0, "%s", err.msg);
	tfs_buf_free(&b);
}

static void set_name(tfs_session *s, const char *name)
{
	stage_name(tfs_session_staging(s), tfs_session_model(s), name);
}

static void repack(tfs_session *s)
{
	tfs_error err = { 0 };
	cr_assert_eq(tfs_session_repack(s, NULL, &err), 0, "%s", err.msg);
	tfs_session_release(s);
	tfs_session_close(s);
}

/* A session as h says that renames the model, then "crashes" (closes without a repack). */
static void edit_and_crash(const char *src, const char *dir, const how *h)
{
	tfs_session *s;
	tfs_error err = { 0 };
	cr_assert_eq(session(&s, src, dir, h, &err), 0, "%s", err.msg);
	set_name(s, "renamed");
	tfs_session_close(s);
}

/* What a session as h writes to out after the same change, repacked at once. */
static void *clean_output(const char *src, const how *h, const char *out, size_t *len)
{
	char *dir = tpath("clean-staging");
	tfs_session *s;
	tfs_error err = { 0 };
	how o = *h;
	o.output = out;
	cr_assert_eq(session(&s, src, dir, &o, &err), 0, "%s", err.msg);
	set_name(s, "renamed");
	repack(s);
	free(dir);
	return test_slurp(out, len);
}

static char *journal_text(const char *dir)
{
	char path[256];
	size_t n;
	snprintf(path, sizeof(path), "%s/journal.json", dir);
	return test_slurp(path, &n);
}

/* ==== the cases ==== */

Test(journal_view, repack_takes_the_recorded_quantize, .init = setup, .fini = teardown)
{
	char *src = write_model(), *dir = tpath("staging"), *out = tpath("out.gguf");
	char *ref_path = tpath("ref.gguf");
	how mount = { .quantize = "Q8_0", .output = out };
	size_t ref_len, got_len;
	void *ref = clean_output(src, &mount, ref_path, &ref_len);
	edit_and_crash(src, dir, &mount);
	char *j = journal_text(dir);
	cr_assert(strstr(j, "\"view\"") && strstr(j, "\"quantize\": \"Q8_0\""), "%s", j);
	free(j);

	/* tensorfs repack SOURCE -o staging=DIR: no view option, no output */
	tfs_session *s;
	tfs_error err = { 0 };
	how rp = { .from_journal = true };
	cr_assert_eq(session(&s, src, dir, &rp, &err), 0, "%s", err.msg);
	const tfs_model *m = tfs_session_model(s);
	long t = tfs_model_find_tensor(m, "blk.0.attn_q.weight");
	cr_assert_eq(tfs_model_tensor(m, (size_t)t)->dtype, TFS_DT_Q8_0);
	cr_assert_str_eq(tfs_staging_output(tfs_session_staging(s)), out);
	repack(s);
	void *got = test_slurp(out, &got_len);
	cr_assert(got_len == ref_len && memcmp(got, ref, ref_len) == 0,
		  "the repack is not what a clean unmount writes");
	free(got);
	free(ref);
	free(src);
	free(dir);
	free(out);
	free(ref_path);
}

Test(journal_view, another_view_is_refused, .init = setup, .fini = teardown)
{
	char *src = write_model(), *dir = tpath("staging"), *out = tpath("out.gguf");
	how mount = { .quantize = "Q8_0", .output = out };
	edit_and_crash(src, dir, &mount);
	char *before = journal_text(dir);
	tfs_session *s;
	tfs_error err = { 0 };

	/* a repack given another type */
	how rp = { .quantize = "Q4_0", .from_journal = true };
	cr_assert_eq(session(&s, src, dir, &rp, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "quantize=Q8_0") && strstr(err.msg, "quantize=Q4_0") &&
		  strstr(err.msg, "leave the view options out"), "%s", err.msg);
	/* a mount without quantize= (the source's own model), or with another type */
	how plain = { .output = out }, other = { .quantize = "Q4_0", .output = out };
	cr_assert_eq(session(&s, src, dir, &plain, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, "no view option") && strstr(err.msg, "mount with -o "
		  "rw,quantize=Q8_0,output=") && strstr(err.msg, "tensorfs repack"), "%s", err.msg);
	cr_assert_eq(session(&s, src, dir, &other, &err), TFS_E_INVALID);
	/* nothing was lost; the same type, however spelled, goes on */
	char *after = journal_text(dir);
	cr_assert_str_eq(after, before);
	how same = { .quantize = "q8_0", .output = out };
	cr_assert_eq(session(&s, src, dir, &same, &err), 0, "%s", err.msg);
	cr_assert(tfs_staging_dirty(tfs_session_staging(s)));
	tfs_session_close(s);
	free(before);
	free(after);
	free(src);
	free(dir);
	free(out);
}

Test(journal_view, changed_imatrix_is_refused, .init = setup, .fini = teardown)
{
	char *src = write_model(), *im = write_imatrix(), *other = tpath("other.dat");
	char *dir = tpath("staging"), *out = tpath("out.gguf"), *ref_path = tpath("ref.gguf");
	how mount = { .quantize = "IQ4_NL", .imatrix = im, .output = out };
	size_t ref_len, got_len;
	void *ref = clean_output(src, &mount, ref_path, &ref_len);
	edit_and_crash(src, dir, &mount);
	char *j = journal_text(dir);
	cr_assert(strstr(j, "\"imatrix\"") && strstr(j, im), "%s", j);
	free(j);
	tfs_session *s;
	tfs_error err = { 0 };
	how rp = { .from_journal = true };

	/* another imatrix given */
	write_file(other, ref, 16);
	how rp_other = { .imatrix = other, .from_journal = true };
	cr_assert_eq(session(&s, src, dir, &rp_other, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, other) && strstr(err.msg, im), "%s", err.msg);

	/* the imatrix touched since */
	struct stat st;
	cr_assert_eq(stat(im, &st), 0);
	struct timespec ts[2] = { st.st_atim, st.st_mtim };
	ts[1].tv_sec += 5;
	cr_assert_eq(utimensat(AT_FDCWD, im, ts, 0), 0);
	cr_assert_eq(session(&s, src, dir, &rp, &err), TFS_E_INVALID);
	cr_assert(strstr(err.msg, im) && strstr(err.msg, "changed"), "%s", err.msg);

	/* put back: the repack takes quantize= and imatrix= from the journal */
	ts[1] = st.st_mtim;
	cr_assert_eq(utimensat(AT_FDCWD, im, ts, 0), 0);
	cr_assert_eq(session(&s, src, dir, &rp, &err), 0, "%s", err.msg);
	repack(s);
	void *got = test_slurp(out, &got_len);
	cr_assert(got_len == ref_len && memcmp(got, ref, ref_len) == 0,
		  "the repack is not what a clean unmount writes");
	free(got);
	free(ref);
	free(src);
	free(im);
	free(other);
	free(dir);
	free(out);
	free(ref_path);
}

/* A journal written without the record (tfs_staging_open, as every journal was before it
 * existed) replays onto the view the session opens, as it always did. */
Test(journal_view, journal_without_record, .init = setup, .fini = teardown)
{
	char *src = write_model(), *dir = tpath("staging"), *out = tpath("out.gguf");
	tfs_model *m = NULL;
	tfs_staging *st = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_open(&m, src, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_open(&st, dir, m, out, &err), 0, "%s", err.msg);
	stage_name(st, m, "old");
	tfs_staging_free(st);
	tfs_model_free(m);
	char *j = journal_text(dir);
	cr_assert_null(strstr(j, "\"view\""), "%s", j);
	free(j);
	tfs_session *s;
	how q = { .quantize = "Q8_0", .output = out };
	cr_assert_eq(session(&s, src, dir, &q, &err), 0, "%s", err.msg);
	const tfs_model *v = tfs_session_model(s);
	long t = tfs_model_find_tensor(v, "output.weight");
	cr_assert_eq(tfs_model_tensor(v, (size_t)t)->dtype, TFS_DT_Q8_0);
	cr_assert_geq(tfs_model_find_kv(v, "general.name"), 0);
	repack(s);
	free(src);
	free(dir);
	free(out);
}

/* A record naming a view option no row of the view table (views/registry.c) takes, as a
 * journal of another tensorfs could: refused, naming the staging directory and the member,
 * by a mount's session and a repack's alike; the journal is left as it was. */
Test(journal_view, unknown_view_record_is_refused, .init = setup, .fini = teardown)
{
	char *src = write_model(), *dir = tpath("staging"), *out = tpath("out.gguf");
	how mount = { .quantize = "Q8_0", .output = out };
	edit_and_crash(src, dir, &mount);
	char *j = journal_text(dir), path[256], *at = strstr(j, "\"quantize\": \"Q8_0\"");
	cr_assert_not_null(at, "%s", j);
	tfs_buf b = { 0 };
	put(&b, j, (size_t)(at - j));
	tfs_buf_printf(&b, "\"sharpen\": \"x\", %s", at);
	snprintf(path, sizeof(path), "%s/journal.json", dir);
	write_file(path, b.data, b.len);
	tfs_session *s;
	tfs_error err = { 0 };
	how rp = { .from_journal = true };
	const how *tries[] = { &mount, &rp };
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(session(&s, src, dir, tries[i], &err), TFS_E_UNSUPPORTED);
		cr_assert(strstr(err.msg, dir) && strstr(err.msg, "\"sharpen\"") &&
			  strstr(err.msg, "nothing was changed"), "%s", err.msg);
	}
	char *after = journal_text(dir);
	cr_assert_str_eq(after, b.data);
	tfs_buf_free(&b);
	free(after);
	free(j);
	free(src);
	free(dir);
	free(out);
}
