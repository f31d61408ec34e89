/* test_remote.c - what a remote source is, without a server: hf:// URLs, URL detection,
 * refusals before any request.  The real transfers are tested in tests/mount/test_remote.py. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "remote.h"

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
