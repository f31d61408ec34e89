/*
 * fuzz_journal.c - libFuzzer harness: the input is the journal.json of a staging directory,
 * replayed onto a small GGUF (tests/data/gguf/bad/ok_base.gguf: F32 [8,2] 'a', F16 [32] 'b').
 *
 * The staging directory holds data/0..3 (a uint32 payload, a string payload, 64 bytes for 'a',
 * 7 bytes), restored when a replay removed them.  A journal that is a JSON object without a
 * "source" gets the source's real identity, so its ops are applied (with one, the identity
 * check is what is fuzzed).  An interrupted-repack record renames and unlinks the files it
 * names: plain names in it are made paths inside the staging directory, and a journal naming
 * anything else is skipped.
 */
#include "fuzz.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *g_src, *g_real, *g_dir, *g_journal, *g_data[4];
static struct stat g_src_st;

static const uint8_t data0[4] = { 7, 0, 0, 0 };
static const uint8_t data1[13] = { 5, 0, 0, 0, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o' };
static uint8_t data2[64];
static const uint8_t data3[7] = { 1, 2, 3, 4, 5, 6, 7 };

static void setup(void)
{
	g_src = fz_path("model.gguf");
	fz_copy_testdata("gguf/bad/ok_base.gguf", g_src);
	if (stat(g_src, &g_src_st) < 0 || !(g_real = realpath(g_src, NULL)))
		fz_fail("%s: cannot stat", g_src);
	g_dir = fz_path("staging");
	g_journal = fz_path("staging/journal.json");
	for (int i = 0; i < 4; i++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "staging/data/%d", i);
		g_data[i] = fz_path(rel);
	}
	for (size_t i = 0; i < sizeof(data2); i++)
		data2[i] = (uint8_t)(i * 37);
	char *d = fz_path("staging/data");
	fz_mkdirs(d);
	free(d);
}

static void restore_data(void)
{
	static const uint8_t *const content[4] = { data0, data1, data2, data3 };
	static const size_t len[4] = { sizeof(data0), sizeof(data1), sizeof(data2), sizeof(data3) };
	struct stat st;
	char *d = fz_path("staging/data");
	fz_mkdirs(d);
	free(d);
	for (int i = 0; i < 4; i++)
		if (stat(g_data[i], &st) < 0 || (size_t)st.st_size != len[i])
			fz_write_file(g_data[i], content[i], len[i]);
}

/* Makes the plain names of a repack record paths in the staging directory; false when it
 * names a path (which could be anywhere). */
static bool repack_confine(json_t *j)
{
	json_t *files = json_object_get(json_object_get(j, "repack"), "files");
	static const char *const fields[2] = { "tmp", "final" };
	for (size_t i = 0; i < json_array_size(files); i++) {
		json_t *f = json_array_get(files, i);
		for (int k = 0; k < 2; k++) {
			const char *name = json_string_value(json_object_get(f, fields[k]));
			if (!name)
				continue;
			if (strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))
				return false;
			char *p;
			if (asprintf(&p, "%s/%s", g_dir, name) < 0)
				fz_fail("out of memory");
			json_object_set_new(f, fields[k], json_string(p));
			free(p);
		}
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!g_src)
		setup();
	restore_data();

	/* a JSON object gets the source's identity (unless it has one) and a confined repack
	 * record; anything else is written as it is */
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	char *text = NULL;
	if (json_is_object(j)) {
		if (!repack_confine(j)) {
			json_decref(j);
			return 0;
		}
		if (!json_object_get(j, "source"))
			json_object_set_new(j, "source",
					    json_pack("{s:s, s:I, s:[I, I]}", "path", g_real, "size",
						      (json_int_t)g_src_st.st_size, "mtime",
						      (json_int_t)g_src_st.st_mtim.tv_sec,
						      (json_int_t)g_src_st.st_mtim.tv_nsec));
		text = json_dumps(j, JSON_COMPACT);
	}
	json_decref(j);
	if (text) {
		fz_write_file(g_journal, text, strlen(text));
		free(text);
	} else {
		fz_write_file(g_journal, data, size);
	}

	tfs_model *m = NULL;
	tfs_staging *s = NULL;
	tfs_error e = { 0 };
	if (tfs_model_open(&m, g_src, NULL, &e))
		fz_fail("the fixed source does not open: %s", e.msg);
	if (tfs_staging_open(&s, g_dir, m, NULL, &e) == 0) {
		if (tfs_staging_replay(s, m, &e) == 0)
			fz_exercise(m);
		else if (!e.msg[0])
			fz_fail("a failed replay without a message");
		tfs_staging_free(s);
	} else if (!e.msg[0] || s) {
		fz_fail("a failed staging open without a message");
	}
	tfs_model_free(m);
	return 0;
}
