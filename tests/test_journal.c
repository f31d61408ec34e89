/*
 * test_journal.c - staging and recovery (codec/journal/): changes recorded in a staging
 * directory, replayed onto the source opened again, repacked into it; a repack killed
 * before or after its rename (TFS_TEST_CRASH_AT) and finished by the next mount or
 * `tensorfs repack`; the journal's "pending" temporaries.
 *
 * Every test works on copies in a fresh temporary directory (writeutil.h); "same state" is
 * one comparison of digest()s.  The format writers themselves: test_write.c.
 */
#include "writeutil.h"

TestSuite(journal, .init = make_tmpdir, .fini = cleanup_tmpdir);

/* ==== staging ==== */

static tfs_staging *staging_ok(const char *dir, const tfs_model *m)
{
	tfs_staging *s = NULL;
	tfs_error err = { 0 };
	int rc = tfs_staging_open(&s, dir, m, NULL, &err);
	cr_assert_eq(rc, 0, "staging open: %s", err.msg);
	return s;
}

/* Records a set of changes of every kind through s. */
static void stage_changes(tfs_staging *s, tfs_model *m)
{
	tfs_error err = { 0 };
	uint64_t len;
	uint8_t *p = str_payload("staged", &len);
	cr_assert_eq(tfs_staging_set_kv(s, m, "staged.key", TFS_GGUF_STRING, p, len, &err), 0,
		     "%s", err.msg);
	free(p);
	uint32_t v = 42;
	cr_assert_eq(tfs_staging_set_kv(s, m, "test.u32", TFS_GGUF_UINT32, (uint8_t *)&v, 4, &err),
		     0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_kv(s, m, "test.u8", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_rename_kv(s, m, "test.i8", "staged.i8", false, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_rename_kv(s, m, "test.u16", "test.i16", false, &err), TFS_E_EXISTS);
	/* a rename onto an existing key replaces it, as one journal op */
	cr_assert_eq(tfs_staging_rename_kv(s, m, "test.u16", "test.i16", true, &err), 0, "%s", err.msg);
	cr_assert_lt(tfs_model_find_kv(m, "test.u16"), 0);
	cr_assert_eq(tfs_model_kv(m, (size_t)tfs_model_find_kv(m, "test.i16"))->type, TFS_GGUF_UINT16);

	const tfs_tensor *t = first_of_dtype(m, TFS_DT_F32);
	char *name = strdup(t->name), *dp;
	int64_t ne[TFS_MAX_DIMS];
	memcpy(ne, t->ne, sizeof(ne));
	uint32_t nd = t->n_dims;
	size_t nb = t->nbytes;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0, "%s", err.msg);
	uint8_t *d = malloc(nb);
	for (size_t i = 0; i < nb; i++)
		d[i] = (uint8_t)(i * 13 + 1);
	spit(dp, d, nb);
	cr_assert_eq(tfs_staging_set_tensor(s, m, name, TFS_DT_F32, nd, ne, dp, &err), 0, "%s",
		     err.msg);
	free(dp);
	/* a bad size is refused and not recorded */
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0);
	spit(dp, d, 3);
	cr_assert_eq(tfs_staging_set_tensor(s, m, name, TFS_DT_F32, nd, ne, dp, &err),
		     TFS_E_INVALID);
	free(dp);
	free(d);
	const tfs_tensor *t3 = tfs_model_tensor(m, 3), *t4 = tfs_model_tensor(m, 4);
	char *n3 = strdup(t3->name), *n4 = strdup(t4->name);
	cr_assert_eq(tfs_staging_rename_tensor(s, m, n3, "staged.tensor", false, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_tensor(s, m, n4, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_tensor(s, m, n4, &err), TFS_E_NOTFOUND);
	/* and onto an existing tensor */
	char *n5 = strdup(tfs_model_tensor(m, 5)->name);
	int dt5 = tfs_model_tensor(m, 5)->dtype;
	cr_assert_eq(tfs_staging_rename_tensor(s, m, n5, "staged.tensor", false, &err), TFS_E_EXISTS);
	cr_assert_eq(tfs_staging_rename_tensor(s, m, n5, "staged.tensor", true, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, "staged.tensor"))->dtype, dt5);
	free(n5);
	free(name);
	free(n3);
	free(n4);
	cr_assert(tfs_staging_dirty(s));
}

Test(journal, staging_replay_and_repack)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	stage_changes(s, m);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	cr_assert(same_file_bytes(path, GGUF_SRC));

	/* as after a crash of the daemon: open again, replay */
	m = open_ok(path);
	s = staging_ok(dir, m);
	cr_assert(tfs_staging_dirty(s));
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);

	/* a second user of the directory is refused */
	tfs_staging *s2 = NULL;
	cr_assert_eq(tfs_staging_open(&s2, dir, m, NULL, &err), TFS_E_EXISTS);
	cr_assert_not_null(strstr(err.msg, "in use by another tensorfs process"));

	cr_assert_eq(tfs_staging_repack(s, m, NULL, &err), 0, "%s", err.msg);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_staging_free(s);
	tfs_model_free(m);
	check_gguf_layout(path, 64);
	m = open_ok(path);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);

	/* the directory is empty again: nothing to replay, nothing to write */
	struct stat a, b;
	stat(path, &a);
	s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	cr_assert_eq(tfs_staging_repack(s, m, NULL, &err), 0);
	stat(path, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(journal, staging_refuses_another_source)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	stage_changes(s, m);
	tfs_staging_free(s);
	tfs_model_free(m);
	/* the source changes behind our back */
	usleep(10000);
	int fd = open(path, O_WRONLY | O_APPEND);
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
	m = open_ok(path);
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_open(&s, dir, m, NULL, &err), TFS_E_INVALID);
	tfs_model_free(m);
	free(dir);
	free(path);
}

/* `tensorfs repack`: the changes staged in dir for the model at source, written through a
 * session as the command does (recover, open, stage and replay, repack, release). */
static int session_repack(const char *source, const char *dir, const char *crash_at,
			  tfs_error *err)
{
	tfs_session_opts o = { .source = source, .writable = true, .staging = dir };
	tfs_session *s = NULL;
	int rc = tfs_session_new(&s, &o, err);
	if (!rc)
		rc = tfs_session_open(s, NULL, err);
	if (!rc)
		rc = tfs_session_stage(s, err);
	if (!rc && crash_at)
		setenv("TFS_TEST_CRASH_AT", crash_at, 1);
	if (!rc)
		rc = tfs_session_repack(s, NULL, err);
	tfs_session_release(s);
	tfs_session_close(s);
	return rc;
}

/* Stages changes, then repacks in a child that dies at `where`. Returns the expected digest. */
static char *crash_repack(const char *path, const char *dir, const char *where)
{
	tfs_model *m = open_ok(path);
	tfs_staging *s = staging_ok(dir, m);
	stage_changes(s, m);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		tfs_error err = { 0 };
		session_repack(path, dir, where, &err);
		_exit(3); /* should not get here */
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 9, "child status %d", st);
	return want;
}

Test(journal, crash_before_rename)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "before_rename");
	/* the source is whole, the staging directory intact */
	cr_assert(same_file_bytes(path, GGUF_SRC));
	tfs_error err = { 0 };
	/* `tensorfs repack` finishes the job */
	cr_assert_eq(session_repack(path, dir, NULL, &err), 0, "%s", err.msg);
	m = open_ok(path);
	assert_digest(m, want);
	check_gguf_layout(path, 64);
	assert_no_temporaries(tmpdir);
	tfs_staging *s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(journal, crash_before_rename_then_mount)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "before_rename");
	cr_assert(same_file_bytes(path, GGUF_SRC));
	/* the next mount: open, replay (shows the staged state), unmount repacks */
	m = open_ok(path);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	cr_assert(tfs_staging_dirty(s));
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);
	cr_assert_eq(tfs_staging_repack(s, m, NULL, &err), 0, "%s", err.msg);
	tfs_staging_free(s);
	tfs_model_free(m);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(journal, crash_after_rename)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "after_rename");
	/* the new file is in place already */
	m = open_ok(path);
	assert_digest(m, want);
	/* the next mount recognizes the finished repack: nothing is applied again */
	tfs_staging *s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	tfs_staging_free(s);
	struct stat a, b;
	stat(path, &a);
	cr_assert_eq(session_repack(path, dir, NULL, &err), 0, "%s", err.msg);
	stat(path, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(journal, crash_after_rename_then_repack)
{
	char *path, *dir = tpath("stage");
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *want = crash_repack(path, dir, "after_rename");
	tfs_error err = { 0 };
	struct stat a, b;
	stat(path, &a);
	cr_assert_eq(session_repack(path, dir, NULL, &err), 0, "%s", err.msg);
	stat(path, &b);
	cr_assert_eq(a.st_ino, b.st_ino);
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

/* A session without a staging directory takes the default one beside the file: a killed
 * session leaves it, the next one replays it, and it goes once repacked and released. */
Test(journal, session_default_staging)
{
	char *path;
	tfs_model *m = gguf_copy(&path);
	tfs_model_free(m);
	char *dir = tfs_staging_default_dir(path);
	tfs_session_opts o = { .source = path, .writable = true };
	tfs_error err = { 0 };
	tfs_session *s;
	struct stat st;
	cr_assert_eq(tfs_session_new(&s, &o, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_open(s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_stage(s, &err), 0, "%s", err.msg);
	cr_assert_str_eq(tfs_staging_dir(tfs_session_staging(s)), dir);
	stage_changes(tfs_session_staging(s), tfs_session_model(s));
	char *want = digest(tfs_session_model(s));
	tfs_session_close(s); /* as a daemon killed before its repack */
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert(same_file_bytes(path, GGUF_SRC));

	cr_assert_eq(tfs_session_new(&s, &o, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_open(s, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_session_stage(s, &err), 0, "%s", err.msg);
	assert_digest(tfs_session_model(s), want);
	cr_assert_eq(tfs_session_repack(s, NULL, &err), 0, "%s", err.msg);
	tfs_session_release(s);
	tfs_session_close(s);
	cr_assert_neq(stat(dir, &st), 0, "the default staging directory stayed");
	m = open_ok(path);
	assert_digest(m, want);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(path);
}

Test(journal, staging_default_dir)
{
	char *d = tfs_staging_default_dir("/a/b/model.gguf");
	cr_assert_str_eq(d, "/a/b/.model.gguf.tensorfs-staging");
	free(d);
	d = tfs_staging_default_dir("model.gguf");
	cr_assert_str_eq(d, ".model.gguf.tensorfs-staging");
	free(d);
}

/* ==== Ollama and safetensors ==== */

Test(journal, ollama_staged_repack)
{
	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest"), *dir = tpath("stage");
	tfs_model *m = open_ref(man);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	char *dp;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0);
	spit(dp, "SYSTEM", 6);
	cr_assert_eq(tfs_staging_set_extra(s, m, "system", dp, &err), 0, "%s", err.msg);
	free(dp);
	uint32_t v = 9;
	cr_assert_eq(tfs_staging_set_kv(s, m, "test.u32", TFS_GGUF_UINT32, (uint8_t *)&v, 4, &err),
		     0, "%s", err.msg);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	cr_assert_eq(session_repack(man, dir, NULL, &err), 0, "%s", err.msg);
	m = open_ref(man);
	assert_digest(m, want);
	char *sys = extra_text(m, "system");
	cr_assert_str_eq(sys, "SYSTEM");
	tfs_model_free(m);
	free(sys);
	free(want);
	free(dir);
	free(man);
}

/* Stages a file of n bytes of value v; its path (allocated). */
static char *stage_bytes(tfs_staging *s, uint8_t v, size_t n)
{
	tfs_error err = { 0 };
	char *dp;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0, "%s", err.msg);
	uint8_t *d = malloc(n ? n : 1);
	memset(d, v, n);
	spit(dp, d, n);
	free(d);
	return dp;
}

/* The ops the other tests do not replay (replace_kv, replace_tensor, set_tensors; set_extra,
 * replace_extra, del_extra): each row of the journal's op table, recorded, then replayed
 * onto the source opened again, gives the same model. */
Test(journal, staging_replays_every_op)
{
	char *path, *dir = tpath("stage-ops");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	uint64_t len;
	uint8_t *p = str_payload("replaced", &len);
	cr_assert_eq(tfs_staging_replace_kv(s, m, "test.str", "test.str_empty", TFS_GGUF_STRING, p,
					    len, &err), 0, "%s", err.msg);
	free(p);
	const tfs_tensor *t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, "t.f32"));
	cr_assert_eq(tfs_staging_replace_tensor(s, m, "t.f32", "t.f16", t->dtype, t->n_dims, t->ne,
						&err), 0, "%s", err.msg);
	tfs_tensor_file f[2];
	char *dp[2];
	const char *names[2] = { "t.i8", "t.i16" };
	for (int k = 0; k < 2; k++) {
		t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, names[k]));
		dp[k] = stage_bytes(s, (uint8_t)(7 + k), t->nbytes);
		f[k] = (tfs_tensor_file){ names[k], t->dtype, t->n_dims, t->ne, dp[k] };
	}
	cr_assert_eq(tfs_staging_set_tensors(s, m, f, 2, &err), 0, "%s", err.msg);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	m = open_ok(path);
	s = staging_ok(dir, m);
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	cr_assert_lt(tfs_model_find_kv(m, "test.str"), 0);
	cr_assert_lt(tfs_model_find_tensor(m, "t.f32"), 0);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(dp[0]);
	free(dp[1]);
	free(dir);
	free(path);

	copy_store();
	char *man = tpath(OL_MAN "oracle-gguf/latest");
	dir = tpath("stage-ops-ollama");
	m = open_ref(man);
	char *license = extra_text(m, "license");
	s = staging_ok(dir, m);
	char *sys = stage_bytes(s, 'S', 6);
	cr_assert_eq(tfs_staging_set_extra(s, m, "system", sys, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_replace_extra(s, m, "license", "template", &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_del_extra(s, m, "params", &err), 0, "%s", err.msg);
	tfs_staging_free(s);
	tfs_model_free(m);
	m = open_ref(man);
	s = staging_ok(dir, m);
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	char *got_sys = extra_text(m, "system"), *got_tmpl = extra_text(m, "template");
	cr_assert_str_eq(got_sys, "SSSSSS");
	cr_assert_str_eq(got_tmpl, license);
	cr_assert_lt(tfs_model_find_extra(m, "license"), 0);
	cr_assert_lt(tfs_model_find_extra(m, "params"), 0);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(got_sys);
	free(got_tmpl);
	free(license);
	free(sys);
	free(dir);
	free(man);
}

/* A crash between the renames of a sharded set (shard renamed, index not): the next
 * `tensorfs repack` rolls the validated rest forward. */
Test(journal, st_sharded_crash_mid_rename)
{
	make_sharded();
	char *ix = tpath("model.safetensors.index.json"), *dir = tpath("stage");
	tfs_model *m = open_ok(ix);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	cr_assert_eq(tfs_staging_rename_tensor(s, m, "b.1", "b.moved", false, &err), 0, "%s", err.msg);
	uint64_t len;
	uint8_t *p = str_payload("v", &len);
	cr_assert_eq(tfs_staging_set_kv(s, m, "format", TFS_GGUF_STRING, p, len, &err), 0, "%s",
		     err.msg);
	free(p);
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		session_repack(ix, dir, "mid_rename", &err);
		_exit(3);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 9, "child status %d", st);
	/* as a mount does: recover before opening the model, then open, bind, replay */
	cr_assert_eq(tfs_staging_recover(dir, &err), 0, "%s", err.msg);
	m = open_ok(ix);
	assert_digest(m, want);
	assert_no_temporaries(tmpdir);
	s = staging_ok(dir, m);
	cr_assert_not(tfs_staging_dirty(s));
	tfs_staging_free(s);
	cr_assert_eq(session_repack(ix, dir, NULL, &err), 0, "%s", err.msg);
	tfs_model_free(m);
	free(want);
	free(dir);
	free(ix);
}

/* Stages nb bytes of value v as tensor name (F32, its current shape). */
static void stage_fill(tfs_staging *s, tfs_model *m, const char *name, uint8_t v, char **path_out)
{
	tfs_error err = { 0 };
	const tfs_tensor *t = tfs_model_tensor(m, (size_t)tfs_model_find_tensor(m, name));
	int64_t ne[TFS_MAX_DIMS];
	memcpy(ne, t->ne, sizeof(ne));
	uint32_t nd = t->n_dims;
	size_t nb = t->nbytes;
	int dt = t->dtype;
	char *dp;
	cr_assert_eq(tfs_staging_new_data(s, &dp, &err), 0, "%s", err.msg);
	uint8_t *d = malloc(nb);
	memset(d, v, nb);
	spit(dp, d, nb);
	free(d);
	cr_assert_eq(tfs_staging_set_tensor(s, m, name, dt, nd, ne, dp, &err), 0, "%s", err.msg);
	*path_out = dp;
}

/* A rewrite supersedes the earlier one (its op and data file go), unless a rename in
 * between gave the earlier bytes another name; replay shows the same state. */
Test(journal, superseded_sets_are_dropped)
{
	char *path, *dir = tpath("stage-compact");
	tfs_model *m = gguf_copy(&path);
	tfs_staging *s = staging_ok(dir, m);
	tfs_error err = { 0 };
	char *f1, *f2, *f3, *f4;
	stage_fill(s, m, "t.f32", 1, &f1);
	stage_fill(s, m, "t.f32", 2, &f2);
	cr_assert_eq(access(f1, F_OK), -1, "the superseded data file is gone");
	cr_assert_eq(access(f2, F_OK), 0);
	/* set, rename away, set again: the first bytes live on under the new name */
	stage_fill(s, m, "t.f16", 3, &f3);
	cr_assert_eq(tfs_staging_rename_tensor(s, m, "t.f16", "t.f16.old", false, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_staging_new_data(s, &f4, &err), 0);
	spit(f4, "\x07\x07\x07\x07", 4);
	cr_assert_eq(tfs_staging_set_tensor(s, m, "t.f16", TFS_DT_F32, 1, (int64_t[]){ 1 }, f4, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(access(f3, F_OK), 0, "data behind a rename must stay");
	char *want = digest(m);
	tfs_staging_free(s);
	tfs_model_free(m);

	m = open_ok(path);
	s = staging_ok(dir, m);
	cr_assert_eq(tfs_staging_replay(s, m, &err), 0, "%s", err.msg);
	assert_digest(m, want);
	tfs_staging_free(s);
	tfs_model_free(m);
	free(want);
	free(f1);
	free(f2);
	free(f3);
	free(f4);
	free(dir);
	free(path);
}

/* A journal's "pending" names (a repack's temporaries, recorded before they are named) are
 * removed by the next open when they are temporaries, and only then: a damaged or crafted
 * journal cannot make recovery delete the model or anything else. */
Test(journal, pending_temporaries_only_are_removed, .init = make_tmpdir, .fini = cleanup_tmpdir)
{
	tfs_error err;
	char *dir = tpath("staging"), *model = tpath("model.gguf"), *tmp = tpath(".model.gguf.tensorfs-tmp.AbC123");
	char *other = tpath("notes.txt"), *journal, *data;
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert(asprintf(&data, "%s/data", dir) > 0);
	cr_assert_eq(mkdir(data, 0755), 0);
	for (int i = 0; i < 3; i++) {
		const char *p = i == 0 ? model : i == 1 ? tmp : other;
		FILE *f = fopen(p, "w");
		cr_assert_not_null(f);
		fputs("x", f);
		fclose(f);
	}
	cr_assert(asprintf(&journal, "%s/journal.json", dir) > 0);
	FILE *f = fopen(journal, "w");
	cr_assert_not_null(f);
	fprintf(f, "{\"tensorfs_staging\": 1, \"ops\": [], \"pending\": [\"%s\", \"%s\", \"%s\"]}\n",
		model, tmp, other);
	fclose(f);
	cr_assert_eq(tfs_staging_recover(dir, &err), 0, "%s", err.msg);
	cr_assert_eq(access(model, F_OK), 0, "the model was removed");
	cr_assert_eq(access(other, F_OK), 0, "a file that is no temporary was removed");
	cr_assert_neq(access(tmp, F_OK), 0, "the temporary is still there");
	free(dir);
	free(model);
	free(tmp);
	free(other);
	free(journal);
	free(data);
}
