/* test_remote.c - what a remote source is, without a server: hf:// URLs, URL detection,
 * refusals before any request, the block cache's versions.  The real transfers are tested in
 * tests/mount/test_remote.py. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "cache.h"
#include "remote.h"
#include "tensorfs.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

static void check_hf(const char *src, const char *dflt, const char *want)
{
	char *got = tfs_hf_url(src, dflt);
	if (!want) {
		cr_expect_null(got, "%s: %s", src, got);
	} else {
		cr_assert_not_null(got, "%s", src);
		cr_expect_str_eq(got, want, "%s", src);
	}
	free(got);
}

Test(remote, hf_urls)
{
	unsetenv("HF_ENDPOINT");
	check_hf("hf://org/repo/model.gguf", "x", "https://huggingface.co/org/repo/resolve/main/model.gguf");
	check_hf("hf://org/repo/sub/dir/m.gguf@v1.0", "x",
		 "https://huggingface.co/org/repo/resolve/v1.0/sub/dir/m.gguf");
	check_hf("hf://org/repo", "model.safetensors",
		 "https://huggingface.co/org/repo/resolve/main/model.safetensors");
	check_hf("hf://org/repo@abc123", "model.safetensors",
		 "https://huggingface.co/org/repo/resolve/abc123/model.safetensors");
	setenv("HF_ENDPOINT", "http://127.0.0.1:8080/", 1);
	check_hf("hf://o/r/f.gguf", "x", "http://127.0.0.1:8080/o/r/resolve/main/f.gguf");
	unsetenv("HF_ENDPOINT");
}

Test(remote, hf_bad_forms)
{
	check_hf("hf://", "x", NULL);
	check_hf("hf://org", "x", NULL);
	check_hf("hf:///repo/x", "x", NULL);
	check_hf("hf://org//x", "x", NULL);
	check_hf("hf://org/repo/x@", "x", NULL);
	check_hf("hf://org/repo/x@a/b", "x", NULL);
	check_hf("hf://org/repo/", "x", NULL);
}

Test(remote, url_forms)
{
	cr_expect(tfs_is_url("http://h/x.gguf"));
	cr_expect(tfs_is_url("HTTPS://h/x.gguf"));
	cr_expect(!tfs_is_url("ftp://h/x.gguf"));
	cr_expect(!tfs_is_url("model.gguf"));
	cr_expect(tfs_is_hf("hf://a/b"));
	cr_expect(!tfs_is_hf("https://huggingface.co/a/b"));
}

Test(remote, unreachable_and_bad_options_fail_cleanly)
{
	tfs_model *m = NULL;
	tfs_error err = { 0 };
	tfs_open_opts o = { .cache_dir = "/tmp/tfs-test-remote-cache", .timeout = 2 };
	cr_expect_neq(tfs_model_open(&m, "http://127.0.0.1:1/x.gguf", &o, &err), 0);
	cr_expect_null(m);
	cr_expect(strstr(err.msg, "http://127.0.0.1:1/x.gguf") != NULL, "%s", err.msg);
	cr_expect_eq(tfs_model_open(&m, "hf://nope", &o, &err), TFS_E_INVALID);
	cr_expect(strstr(err.msg, "hf://ORG/REPO") != NULL, "%s", err.msg);
}

/* Entries of the cache directory whose names start with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

Test(remote, cache_new_version_removes_only_that_urls_old_entries)
{
	char dir[] = "/tmp/tfs-test-cache-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	tfs_validator v1 = { .etag = "\"v1\"", .size = 3 * TFS_CACHE_BLOCK, .known = true };
	tfs_validator v2 = { .etag = "\"v2\"", .size = 2 * TFS_CACHE_BLOCK, .known = true };
	tfs_cache *a = NULL, *other = NULL, *b = NULL;
	tfs_error err = { 0 };
	static uint8_t block[TFS_CACHE_BLOCK];
	cr_assert_eq(tfs_cache_open(&a, dir, "http://h/m.gguf", &v1, 0, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_cache_open(&other, dir, "http://h/n.gguf", &v1, 0, &err), 0, "%s", err.msg);
	cr_assert_eq(tfs_cache_write(a, 0, block, sizeof(block)), 0);
	tfs_cache_mark(a, 0, 1);
	cr_expect(tfs_cache_has(a, 0));
	/* sha256("http://h/m.gguf") names the URL's entries: two files per version */
	int all = count_prefixed(dir, "");
	cr_assert_eq(tfs_cache_open(&b, dir, "http://h/m.gguf", &v2, 0, &err), 0, "%s", err.msg);
	cr_expect_eq(count_prefixed(dir, ""), all, "v1's two files replaced by v2's two");
	cr_expect(!tfs_cache_has(b, 0), "a new version starts empty");
	/* the old entry, unlinked, still reads through its open files */
	uint8_t got[16];
	cr_expect(tfs_cache_has(a, 0));
	cr_expect_eq(tfs_cache_read(a, got, 0, sizeof(got), &err), 0, "%s", err.msg);
	tfs_cache_free(a);
	tfs_cache_free(b);
	tfs_cache_free(other);
	/* the other URL's entry is still there: opening it finds its files (2 + 2 left) */
	cr_expect_eq(count_prefixed(dir, ""), 4 + 2 /* . and .. */);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}
