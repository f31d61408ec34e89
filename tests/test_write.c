/*
 * test_write.c - the format writers: changing a model and writing it back (GGUF,
 * safetensors single and sharded, Ollama), in place or to another output.
 *
 * Every test works on copies in a fresh temporary directory (writeutil.h); "same state" is
 * one comparison of digest()s.  Staging, the journal and crash recovery: test_journal.c.
 */
#include "writeutil.h"

TestSuite(write, .init = make_tmpdir, .fini = cleanup_tmpdir);


/* ==== GGUF ==== */

Test(write, gguf_no_change_writes_nothing)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	struct stat a, b;
	cr_assert_eq(stat(path, &a), 0);
	usleep(10000);
	write_ok(m, NULL);
	cr_assert_eq(stat(path, &b), 0);
	cr_assert_eq(a.st_ino, b.st_ino);
	cr_assert_eq(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
	cr_assert(same_file_bytes(path, GGUF_SRC));
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(path);
}

Test(write, gguf_set_every_type)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	uint8_t u8 = 7;
	int8_t i8 = -7;
	uint16_t u16 = 700;
	int16_t i16 = -700;
	uint32_t u32 = 70000;
	int32_t i32 = -70000;
	float f32 = 1.5f;
	uint8_t bl = 1;
	uint64_t u64 = 1ull << 40, len;
	int64_t i64 = -(1ll << 40);
	double f64 = -2.25;
	set_kv_ok(m, "test.u8", TFS_GGUF_UINT8, payload(&u8, 1), 1);
	set_kv_ok(m, "test.i8", TFS_GGUF_INT8, payload(&i8, 1), 1);
	set_kv_ok(m, "test.u16", TFS_GGUF_UINT16, payload(&u16, 2), 2);
	set_kv_ok(m, "test.i16", TFS_GGUF_INT16, payload(&i16, 2), 2);
	set_kv_ok(m, "test.u32", TFS_GGUF_UINT32, payload(&u32, 4), 4);
	set_kv_ok(m, "test.i32", TFS_GGUF_INT32, payload(&i32, 4), 4);
	set_kv_ok(m, "test.f32", TFS_GGUF_FLOAT32, payload(&f32, 4), 4);
	set_kv_ok(m, "test.bool_false", TFS_GGUF_BOOL, payload(&bl, 1), 1);
	set_kv_ok(m, "test.u64", TFS_GGUF_UINT64, payload(&u64, 8), 8);
	set_kv_ok(m, "test.i64", TFS_GGUF_INT64, payload(&i64, 8), 8);
	set_kv_ok(m, "test.f64", TFS_GGUF_FLOAT64, payload(&f64, 8), 8);
	uint8_t *s = str_payload("a much longer string than before \xe2\x80\x94 with UTF-8", &len);
	set_kv_ok(m, "test.str", TFS_GGUF_STRING, s, len);
	/* array[uint32] of 3, and a key of a new type for an old name */
	uint8_t arr[4 + 8 + 12];
	uint32_t et = TFS_GGUF_UINT32, v[3] = { 1, 2, 3 };
	uint64_t cnt = 3;
	memcpy(arr, &et, 4), memcpy(arr + 4, &cnt, 8), memcpy(arr + 12, v, 12);
	set_kv_ok(m, "test.arr_u8", TFS_GGUF_ARRAY, payload(arr, sizeof(arr)), sizeof(arr));
	set_str_ok(m, "test.i32", "now a string");

	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	check_gguf_layout(path, 64);
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(want);
	free(path);
}

Test(write, gguf_add_delete_rename_keys)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	set_str_ok(m, "new.key", "fresh");
	cr_assert_eq(tfs_model_del_kv(m, "test.u8", &err), 0);
	cr_assert_eq(tfs_model_del_kv(m, "test.u8", &err), TFS_E_NOTFOUND);
	cr_assert_eq(tfs_model_rename_kv(m, "test.i8", "renamed.i8", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_rename_kv(m, "test.u16", "test.i16", &err), TFS_E_EXISTS);
	cr_assert_eq(tfs_model_rename_kv(m, "nope", "x", &err), TFS_E_NOTFOUND);
	/* a deleted name can be used again */
	cr_assert_eq(tfs_model_rename_kv(m, "test.i16", "test.u8", &err), 0, "%s", err.msg);
	cr_assert_lt(tfs_model_find_kv(m, "test.i16"), 0);
	cr_assert_geq(tfs_model_find_kv(m, "test.u8"), 0);
	cr_assert(tfs_model_kv(m, 0) != NULL);

	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	cr_assert_lt(tfs_model_find_kv(m, "test.i8"), 0);
	cr_assert_geq(tfs_model_find_kv(m, "renamed.i8"), 0);
	check_gguf_layout(path, 64);
	tfs_model_free(m);
	free(want);
	free(path);
}

Test(write, gguf_tensor_changes)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	const tfs_tensor *t = first_of_dtype(m, TFS_DT_F32);
	cr_assert_not_null(t);
	char *tname = strdup(t->name);
	int64_t ne[TFS_MAX_DIMS];
	uint32_t nd = t->n_dims;
	memcpy(ne, t->ne, sizeof(ne));
	/* replace bytes (same type and shape) */
	char *f1 = bytes_file("t1.bin", t->nbytes, 3);
	cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, f1, &err), 0, "%s",
		     err.msg);
	/* wrong size */
	char *bad = bytes_file("bad.bin", 5, 1);
	cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, bad, &err),
		     TFS_E_INVALID);
	/* add a tensor: F16 [6, 5] (odd size: padding follows it) */
	int64_t ne2[2] = { 6, 5 };
	char *f2 = bytes_file("t2.bin", 60, 9);
	cr_assert_eq(tfs_model_set_tensor_file(m, "added.weight", TFS_DT_F16, 2, ne2, f2, &err), 0,
		     "%s", err.msg);
	/* rename and delete others */
	const tfs_tensor *t1 = tfs_model_tensor(m, 1), *t2 = tfs_model_tensor(m, 2);
	char *n1 = strdup(t1->name), *n2 = strdup(t2->name);
	cr_assert_eq(tfs_model_rename_tensor(m, n1, "renamed.tensor", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_rename_tensor(m, "renamed.tensor", "added.weight", &err),
		     TFS_E_EXISTS);
	cr_assert_eq(tfs_model_del_tensor(m, n2, &err), 0);
	cr_assert_eq(tfs_model_del_tensor(m, n2, &err), TFS_E_NOTFOUND);
	/* a name ggml cannot read */
	char longname[80];
	memset(longname, 'x', 70);
	longname[70] = '\0';
	cr_assert_eq(tfs_model_rename_tensor(m, "renamed.tensor", longname, &err), TFS_E_INVALID);

	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	check_gguf_layout(path, 64);
	cr_assert_lt(tfs_model_find_tensor(m, n1), 0);
	cr_assert_lt(tfs_model_find_tensor(m, n2), 0);
	long ai = tfs_model_find_tensor(m, "added.weight");
	cr_assert_geq(ai, 0);
	uint8_t got[60];
	cr_assert_eq(tfs_tensor_read_raw(m, (size_t)ai, 0, 60, got, &err), 60);
	cr_assert_eq(got[59], (uint8_t)(9 + 59 * 7));
	tfs_model_free(m);
	free(want);
	free(tname);
	free(n1);
	free(n2);
	free(f1);
	free(f2);
	free(bad);
	free(path);
}

/* Open fds of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A long-running rw mount replaces a tensor's bytes many times: each superseded staged
 * file, and each one the model refuses, is closed and unmapped (its slot stays). */
Test(write, superseded_staged_sources_are_closed)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	const tfs_tensor *t = first_of_dtype(m, TFS_DT_F32);
	cr_assert_not_null(t);
	char *tname = strdup(t->name), *f = NULL;
	int64_t ne[TFS_MAX_DIMS];
	uint32_t nd = t->n_dims;
	uint64_t nbytes = t->nbytes;
	memcpy(ne, t->ne, sizeof(ne));
	char *bad = bytes_file("bad.bin", 5, 1);
	int fds0 = count_fds();
	for (int i = 0; i < 200; i++) {
		char name[32];
		snprintf(name, sizeof(name), "v%d.bin", i);
		free(f);
		f = bytes_file(name, nbytes, (uint8_t)i);
		cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, f, &err), 0,
			     "%s", err.msg);
		cr_assert_eq(tfs_model_set_tensor_file(m, tname, TFS_DT_F32, nd, ne, bad, &err),
			     TFS_E_INVALID);
	}
	cr_assert_leq(count_fds(), fds0 + 1, "%d fds open, %d before", count_fds(), fds0);
	/* the last version is what is written */
	long ti = tfs_model_find_tensor(m, tname);
	uint8_t b0;
	cr_assert_eq(tfs_tensor_read_raw(m, (size_t)ti, 0, 1, &b0, &err), 1);
	cr_assert_eq(b0, (uint8_t)199);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(tname);
	free(f);
	free(bad);
	free(path);
}

Test(write, gguf_alignment)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_error err = { 0 };
	uint32_t a = 48;
	cr_assert_eq(tfs_model_set_kv(m, "general.alignment", TFS_GGUF_UINT32, payload(&a, 4), 4,
				      &err), TFS_E_INVALID);
	uint64_t a64 = 128;
	cr_assert_eq(tfs_model_set_kv(m, "general.alignment", TFS_GGUF_UINT64, payload(&a64, 8), 8,
				      &err), TFS_E_INVALID);
	a = 128;
	set_kv_ok(m, "general.alignment", TFS_GGUF_UINT32, payload(&a, 4), 4);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	check_gguf_layout(path, 128);
	m = open_ok(path);
	assert_digest(m, want);
	free(want);
	/* deleting the key: the default, 32 */
	cr_assert_eq(tfs_model_del_kv(m, "general.alignment", &err), 0);
	want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	check_gguf_layout(path, 32);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(path);
}

Test(write, gguf_to_other_output)
{
	char *path, *out = tpath("out.gguf");
	tfs_model *m = gguf_copy(&path);
	set_str_ok(m, "x", "y");
	char *want = digest(m);
	write_ok(m, out);
	tfs_model_free(m);
	cr_assert(same_file_bytes(path, GGUF_SRC), "the source was touched");
	m = open_ok(out);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(out);
	free(path);
}

/* A write that fails midway (the file size limit stands in for a full disk): the
 * temporary is removed, the output untouched, the error says why. */
Test(write, gguf_failed_write_leaves_output)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	set_str_ok(m, "x", "y");
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 4096, 4096 };
		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		tfs_error err = { 0 };
		int rc = tfs_model_write(m, NULL, &err);
		_exit(rc == TFS_E_IO && err.sys_errno == EFBIG && strstr(err.msg, "nothing") ? 0 : 1);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert(same_file_bytes(path, GGUF_SRC));
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(path);
}


/* ==== safetensors ==== */

/* The file's header: N % 8 == 0, padded with spaces, offsets contiguous (checked by the
 * reader on open). */
static void check_st_layout(const char *path)
{
	size_t n;
	uint8_t *b = test_slurp(path, &n);
	uint64_t hl;
	memcpy(&hl, b, 8);
	cr_assert_eq(hl % 8, 0, "header length %llu", (unsigned long long)hl);
	cr_assert_eq(b[8], '{');
	size_t end = 8 + hl;
	while (end > 8 && b[end - 1] == ' ')
		end--;
	cr_assert_eq(b[end - 1], '}');
	free(b);
}

Test(write, st_single_changes)
{
	char *path = tpath("m.safetensors");
	copy_file(TFS_TESTDATA "/safetensors/ok_all_dtypes.safetensors", path);
	tfs_model *m = open_ok(path);
	tfs_error err = { 0 };
	cr_assert_geq(tfs_model_find_kv(m, "format"), 0);
	set_str_ok(m, "format", "np");
	set_str_ok(m, "added", "v\"\n\x01");
	cr_assert_eq(tfs_model_del_kv(m, "empty", &err), 0);
	cr_assert_eq(tfs_model_rename_kv(m, "unicode", "uni", &err), 0, "%s", err.msg);
	uint32_t v = 3;
	cr_assert_eq(tfs_model_set_kv(m, "num", TFS_GGUF_UINT32, payload(&v, 4), 4, &err),
		     TFS_E_INVALID);
	const tfs_tensor *t0 = tfs_model_tensor(m, 0);
	char *n0 = strdup(t0->name), *n1 = strdup(tfs_model_tensor(m, 1)->name),
	     *n2 = strdup(tfs_model_tensor(m, 2)->name);
	int64_t ne[TFS_MAX_DIMS];
	memcpy(ne, t0->ne, sizeof(ne));
	char *f = bytes_file("t0.bin", t0->nbytes, 5);
	cr_assert_eq(tfs_model_set_tensor_file(m, n0, t0->dtype, t0->n_dims, ne, f, &err), 0, "%s",
		     err.msg);
	int64_t ne2[2] = { 3, 2 };
	char *f2 = bytes_file("t2.bin", 12, 1);
	cr_assert_eq(tfs_model_set_tensor_file(m, "new.bf16", TFS_DT_BF16, 2, ne2, f2, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(tfs_model_set_tensor_file(m, "new.q4", TFS_DT_Q4_K, 2, ne2, f2, &err),
		     TFS_E_INVALID);
	cr_assert_eq(tfs_model_rename_tensor(m, n1, "renamed", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_del_tensor(m, n2, &err), 0, "%s", err.msg);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	check_st_layout(path);
	m = open_ok(path);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);
	tfs_model_free(m);
	free(want);
	free(n0);
	free(n1);
	free(n2);
	free(f);
	free(f2);
	free(path);
}

Test(write, st_single_others)
{
	static const char *const files[] = { "ok_no_metadata", "ok_zero_size_middle",
					     "ok_json_order_differs", "ok_unpadded_header",
					     "ok_leading_whitespace", "ok_metadata_only" };
	for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
		char src[512], *path = tpath("x.safetensors");
		snprintf(src, sizeof(src), TFS_TESTDATA "/safetensors/%s.safetensors", files[k]);
		copy_file(src, path);
		tfs_model *m = open_ok(path);
		struct stat a, b;
		stat(path, &a);
		write_ok(m, NULL); /* unchanged: not written */
		stat(path, &b);
		cr_assert_eq(a.st_ino, b.st_ino);
		set_str_ok(m, "k2", "v2");
		char *want = digest(m);
		write_ok(m, NULL);
		tfs_model_free(m);
		check_st_layout(path);
		m = open_ok(path);
		assert_digest(m, want);
		tfs_model_free(m);
		free(want);
		free(path);
	}
}


Test(write, st_sharded_rewrites_only_changed_shards)
{
	make_sharded();
	char *ix = tpath("model.safetensors.index.json");
	char *s1 = tpath("model-00001-of-00002.safetensors");
	char *s2 = tpath("model-00002-of-00002.safetensors");
	tfs_model *m = open_ok(ix);
	tfs_error err = { 0 };
	struct stat a1, a2, b1, b2;
	stat(s1, &a1);
	stat(s2, &a2);
	cr_assert_eq(tfs_model_rename_tensor(m, "b.1", "b.renamed", &err), 0, "%s", err.msg);
	int64_t ne[1] = { 3 };
	char *f = bytes_file("new.bin", 12, 2);
	cr_assert_eq(tfs_model_set_tensor_file(m, "c.new", TFS_DT_F32, 1, ne, f, &err), 0, "%s",
		     err.msg);
	set_str_ok(m, "note", "index key");
	write_ok(m, NULL);
	char *want = digest(m); /* after: the writer updated total_size */
	stat(s1, &b1);
	stat(s2, &b2);
	cr_assert_eq(a1.st_ino, b1.st_ino, "shard 1 was rewritten");
	cr_assert_neq(a2.st_ino, b2.st_ino, "shard 2 was not rewritten");
	tfs_model_free(m);
	m = open_ok(ix);
	assert_digest(m, want);
	check_st_layout(s2);
	long ts = tfs_model_find_kv(m, "total_size");
	cr_assert_geq(ts, 0);
	uint64_t total;
	memcpy(&total, tfs_model_kv(m, (size_t)ts)->data, 8);
	cr_assert_eq(total, 88 + 12);
	assert_no_temporaries(tmpdir);

	/* a change in shard 1 only: shard 2 stays */
	cr_assert_eq(tfs_model_del_tensor(m, "a.0", &err), 0);
	free(want);
	stat(s2, &a2);
	write_ok(m, NULL);
	want = digest(m);
	stat(s2, &b2);
	cr_assert_eq(a2.st_ino, b2.st_ino);
	tfs_model_free(m);
	m = open_ok(ix);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(f);
	free(ix);
	free(s1);
	free(s2);
}

/* ==== Ollama ==== */

Test(write, ollama_gguf_key_change)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	size_t n;
	char *before = test_slurp(man, &n);
	before[n] = '\0';
	tfs_model *m = open_ref(man);
	struct stat a, b;
	stat(man, &a);
	write_ok(m, NULL); /* no change: nothing */
	stat(man, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	set_str_ok(m, "general.architecture", "edited");
	char *want = digest(m), *tmpl = extra_text(m, "template");
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ref(man);
	assert_digest(m, want);
	char *t2 = extra_text(m, "template");
	cr_assert_str_eq(t2, tmpl);
	char *after = test_slurp(man, &n);
	after[n] = '\0';
	/* the template layer's blob is reused, the model layer's is new */
	cr_assert_not_null(strstr(after, "b52d02fdf256212b389da91993a066a005d7540ab33124008908a26fda541a12"));
	cr_assert_null(strstr(after, "9038dd7de1600ce68b5f2e8a981f40f485dfd315c397f1129681b52c490d6590"));
	cr_assert_eq(after[n - 1], '\n');
	/* the old blob is still there (other models may use it) */
	char *old = tpath("models/blobs/sha256-9038dd7de1600ce68b5f2e8a981f40f485dfd315c397f1129681b52c490d6590");
	cr_assert(same_file_bytes(old, GGUF_SRC));
	tfs_model_free(m);
	free(want);
	free(tmpl);
	free(t2);
	free(before);
	free(after);
	free(old);
	free(man);
}

Test(write, ollama_extra_change_keeps_model_blob)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	tfs_model *m = open_ref(man);
	tfs_error err = { 0 };
	char *f = tpath("tmpl.txt");
	spit(f, "{{ .Prompt }} edited", 20);
	cr_assert_eq(tfs_model_set_extra_file(m, "template", f, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_del_extra(m, "license", &err), 0, "%s", err.msg);
	char *want = digest(m);
	write_ok(m, NULL);
	tfs_model_free(m);
	m = open_ref(man);
	assert_digest(m, want);
	char *t = extra_text(m, "template");
	cr_assert_str_eq(t, "{{ .Prompt }} edited");
	cr_assert_lt(tfs_model_find_extra(m, "license"), 0);
	size_t n;
	char *after = test_slurp(man, &n);
	after[n] = '\0';
	cr_assert_not_null(strstr(after, "9038dd7de1600ce68b5f2e8a981f40f485dfd315c397f1129681b52c490d6590"));
	tfs_model_free(m);
	free(after);
	free(t);
	free(want);
	free(f);
	free(man);
}

Test(write, ollama_new_tag)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	char *src_copy = tpath("manifest.orig");
	copy_file(man, src_copy);
	tfs_model *m = open_ref(man);
	set_str_ok(m, "test.str", "tagged");
	char *want = digest(m);
	write_ok(m, "oracle-gguf:edited");
	tfs_model_free(m);
	cr_assert(same_file_bytes(man, src_copy), "the source manifest changed");
	m = open_ref("oracle-gguf:edited");
	assert_digest(m, want);
	tfs_model_free(m);
	m = open_ref("oracle-gguf:latest");
	long i = tfs_model_find_kv(m, "test.str");
	cr_assert_eq(memcmp(tfs_model_kv(m, (size_t)i)->data + 8, "hello", 5), 0);
	tfs_model_free(m);
	free(want);
	free(src_copy);
	free(man);
}

Test(write, ollama_per_tensor_changes)
{
	static const char *const tags[] = { "int4", "nvfp4" };
	for (size_t k = 0; k < 2; k++) {
		copy_store();
		char ref[64];
		snprintf(ref, sizeof(ref), "oracle-st:%s", tags[k]);
		tfs_model *m = open_ref(ref);
		tfs_error err = { 0 };
		long ni = tfs_model_find_tensor(m, "model.norm.weight");
		cr_assert_geq(ni, 0);
		const tfs_tensor *t = tfs_model_tensor(m, (size_t)ni);
		int64_t ne[TFS_MAX_DIMS];
		memcpy(ne, t->ne, sizeof(ne));
		char *f = bytes_file("norm.bin", t->nbytes, 4);
		cr_assert_eq(tfs_model_set_tensor_file(m, "model.norm.weight", t->dtype, t->n_dims, ne,
						       f, &err), 0, "%s", err.msg);
		cr_assert_eq(tfs_model_rename_tensor(m, "model.norm.weight", "model.norm2.weight",
						     &err), 0, "%s", err.msg);
		int64_t ne2[1] = { 4 };
		char *f2 = bytes_file("new.bin", 16, 8);
		cr_assert_eq(tfs_model_set_tensor_file(m, "extra.bias", TFS_DT_F32, 1, ne2, f2, &err),
			     0, "%s", err.msg);
		uint64_t len = 0;
		uint8_t *p = str_payload("x", &len);
		cr_assert_eq(tfs_model_set_kv(m, "k", TFS_GGUF_UINT32, p, len, &err) == 0, 0);
		char *want = digest(m);
		write_ok(m, NULL);
		tfs_model_free(m);
		m = open_ref(ref);
		assert_digest(m, want);
		/* the quantized tensor is untouched and still reads as floats */
		long qi = tfs_model_find_tensor(m, "model.layers.0.mlp.down_proj.weight");
		cr_assert_geq(qi, 0);
		cr_assert_gt(tfs_tensor_f32_count(m, (size_t)qi, NULL), 0);
		tfs_model_free(m);
		free(want);
		free(f);
		free(f2);
		char *models = tpath("models");
		rm_rf(models);
		free(models);
	}
}

/* ==== GGUF tensor shapes and tensor-less files ==== */

/* A GGUF header being built: little-endian fields appended to a buffer. */
typedef struct {
	uint8_t b[4096];
	size_t n;
} gbuf;

static void g_put(gbuf *g, const void *p, size_t n)
{
	cr_assert_leq(g->n + n, sizeof(g->b));
	memcpy(g->b + g->n, p, n);
	g->n += n;
}
static void g_u32(gbuf *g, uint32_t v) { g_put(g, &v, 4); }
static void g_u64(gbuf *g, uint64_t v) { g_put(g, &v, 8); }
static void g_str(gbuf *g, const char *s) { g_u64(g, strlen(s)); g_put(g, s, strlen(s)); }

typedef struct {
	const char *name;
	uint32_t n_dims;
	uint64_t ne[4];
} dims_case;

/* F32 tensors stored with these n_dims / ne (nothing else in them matters). */
static const dims_case dims_cases[] = {
	{ "row", 2, { 8, 1 } },          /* numpy shape (1, 8) */
	{ "col4", 4, { 8, 1, 1, 1 } },   /* (1, 1, 1, 8) */
	{ "mid", 3, { 4, 1, 2 } },       /* (2, 1, 4) */
	{ "flat", 1, { 8 } },
	{ "scalar", 0, { 0 } },
};
#define N_DIMS_CASES (sizeof(dims_cases) / sizeof(dims_cases[0]))

static uint64_t dims_case_elems(const dims_case *c)
{
	uint64_t n = 1;
	for (uint32_t k = 0; k < c->n_dims; k++)
		n *= c->ne[k];
	return n;
}

/* Writes a GGUF v3 with one key and the dims_cases tensors (aligned 32, padded). */
static void make_dims_gguf(const char *path)
{
	static gbuf g;
	g.n = 0;
	g_put(&g, "GGUF", 4);
	g_u32(&g, 3);
	g_u64(&g, N_DIMS_CASES);
	g_u64(&g, 1);
	g_str(&g, "general.name");
	g_u32(&g, 8);
	g_str(&g, "dims");
	uint64_t off = 0;
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		g_str(&g, dims_cases[i].name);
		g_u32(&g, dims_cases[i].n_dims);
		for (uint32_t k = 0; k < dims_cases[i].n_dims; k++)
			g_u64(&g, dims_cases[i].ne[k]);
		g_u32(&g, 0); /* F32 */
		g_u64(&g, off);
		off += (dims_case_elems(&dims_cases[i]) * 4 + 31) / 32 * 32;
	}
	while (g.n % 32)
		g.b[g.n++] = 0;
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		uint64_t nb = dims_case_elems(&dims_cases[i]) * 4;
		for (uint64_t k = 0; k < nb; k++)
			g.b[g.n++] = (uint8_t)(i * 16 + k);
		while (g.n % 32)
			g.b[g.n++] = 0;
	}
	spit(path, g.b, g.n);
}

/* Reads the tensor infos of a GGUF file straight from its bytes: n_dims and ne of the
 * tensor named name (not through the reader under test). */
static void raw_tensor_dims(const char *path, const char *name, uint32_t *n_dims, uint64_t ne[8])
{
	size_t len, p = 24;
	uint8_t *b = test_slurp(path, &len);
	uint64_t n_t, n_kv;
	memcpy(&n_t, b + 8, 8);
	memcpy(&n_kv, b + 16, 8);
	for (uint64_t i = 0; i < n_kv; i++) {
		uint64_t kl, sl;
		uint32_t type;
		memcpy(&kl, b + p, 8);
		p += 8 + kl;
		memcpy(&type, b + p, 4);
		p += 4;
		cr_assert_eq(type, 8, "make_dims_gguf writes string keys only");
		memcpy(&sl, b + p, 8);
		p += 8 + sl;
	}
	bool found = false;
	for (uint64_t i = 0; i < n_t; i++) {
		uint64_t nl;
		uint32_t nd;
		memcpy(&nl, b + p, 8);
		bool match = nl == strlen(name) && !memcmp(b + p + 8, name, nl);
		p += 8 + nl;
		memcpy(&nd, b + p, 4);
		p += 4;
		cr_assert_leq(nd, 8);
		if (match) {
			*n_dims = nd;
			memcpy(ne, b + p, 8 * nd);
			found = true;
		}
		p += 8 * nd + 12;
		cr_assert_leq(p, len);
	}
	cr_assert(found, "%s: no tensor %s", path, name);
	free(b);
}

/* An untouched tensor comes back with the n_dims and ne it was stored with (ggml's writer
 * would drop trailing dims of 1: (1, 8) stored as ne [8, 1] must not become (8,)). */
Test(write, gguf_keeps_stored_n_dims)
{
	char *path = tpath("dims.gguf"), *out = tpath("dims.out.gguf");
	make_dims_gguf(path);
	tfs_model *m = open_ok(path);
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		const tfs_tensor *t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, dims_cases[i].name));
		cr_assert_eq(t->n_dims, dims_cases[i].n_dims, "%s read", dims_cases[i].name);
	}
	set_str_ok(m, "general.name", "changed");
	/* a new tensor keeps the shape it is given, trailing 1 included */
	char *f = bytes_file("new.bin", 16, 3);
	int64_t ne[2] = { 4, 1 };
	tfs_error err = { 0 };
	cr_assert_eq(tfs_model_set_tensor_file(m, "new", TFS_DT_F32, 2, ne, f, &err), 0, "%s",
		     err.msg);
	write_ok(m, out);
	tfs_model_free(m);

	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		uint32_t nd;
		uint64_t got[8];
		raw_tensor_dims(out, dims_cases[i].name, &nd, got);
		cr_assert_eq(nd, dims_cases[i].n_dims, "%s: n_dims %u, stored %u", dims_cases[i].name,
			     nd, dims_cases[i].n_dims);
		for (uint32_t k = 0; k < nd; k++)
			cr_assert_eq(got[k], dims_cases[i].ne[k], "%s: ne[%u]", dims_cases[i].name, k);
	}
	uint32_t nd;
	uint64_t got[8];
	raw_tensor_dims(out, "new", &nd, got);
	cr_assert_eq(nd, 2);
	cr_assert(got[0] == 4 && got[1] == 1);

	/* and the bytes and the npy/ shape of the untouched ones */
	tfs_model *a = open_ok(path), *b = open_ok(out);
	for (size_t i = 0; i < N_DIMS_CASES; i++) {
		long ia = tfs_model_find_tensor(a, dims_cases[i].name);
		long ib = tfs_model_find_tensor(b, dims_cases[i].name);
		const tfs_tensor *ta = tfs_model_tensor(a, (size_t)ia), *tb = tfs_model_tensor(b, (size_t)ib);
		cr_assert_eq(ta->nbytes, tb->nbytes);
		cr_assert_eq(memcmp(tfs_model_source(a, (size_t)ta->src)->map + ta->offset,
				    tfs_model_source(b, (size_t)tb->src)->map + tb->offset, ta->nbytes), 0);
		tfs_buf ha = { 0 }, hb = { 0 };
		bool raw;
		cr_assert_eq(tfs_npy_header(&ha, &raw, a, (size_t)ia, &err), 0);
		cr_assert_eq(tfs_npy_header(&hb, &raw, b, (size_t)ib, &err), 0);
		cr_assert_str_eq(ha.data + 10, hb.data + 10, "%s: npy header", dims_cases[i].name);
		tfs_buf_free(&ha);
		tfs_buf_free(&hb);
	}
	tfs_buf h = { 0 };
	bool raw;
	cr_assert_eq(tfs_npy_header(&h, &raw, b, (size_t)tfs_model_find_tensor(b, "row"), &err), 0);
	cr_assert(strstr(h.data + 10, "'shape': (1, 8)"), "%s", h.data + 10);
	tfs_buf_free(&h);
	tfs_model_free(a);
	tfs_model_free(b);
	free(f);
	free(path);
	free(out);
}

/* A GGUF without tensors whose header does not end on the alignment (as llama.cpp's vocab
 * files) repacks, and its data section is then at the aligned offset. */
Test(write, gguf_without_tensors_repacks)
{
	static gbuf g;
	g.n = 0;
	g_put(&g, "GGUF", 4);
	g_u32(&g, 3);
	g_u64(&g, 0);
	g_u64(&g, 1);
	g_str(&g, "general.name");
	g_u32(&g, 8);
	g_str(&g, "abc"); /* 24 + 20 + 4 + 11 = 59 bytes, unpadded */
	cr_assert_neq(g.n % 32, 0);
	char *path = tpath("vocab.gguf");
	spit(path, g.b, g.n);
	tfs_model *m = open_ok(path);
	set_str_ok(m, "general.name", "abcd");
	write_ok(m, NULL);
	tfs_model_free(m);
	check_gguf_layout(path, 32);
	m = open_ok(path);
	tfs_buf b = { 0 };
	tfs_error err;
	cr_assert_eq(tfs_model_index_json(&b, m, &err), 0);
	cr_assert(strstr(b.data, "\"data_offset\": 64"), "%s", b.data);
	tfs_buf_free(&b);
	tfs_model_free(m);
	free(path);
}
