/*
 * fuzz_s3.c - libFuzzer harness: what an s3:// source reads that it did not write.  The
 * first byte picks which; the rest is the input:
 *   0: a ListObjectsV2 page from the store (tfs_s3_parse_list);
 *   1: the AWS CLI's credentials and config files (the same input for both, read for the
 *      default profile and then for a named one, AWS_PROFILE=team), then a URL and a signed
 *      request made with what they gave (the region and endpoint come from the input);
 *   2: an s3:// source as a user types it (tfs_s3_parse), its URL and signed request.
 * A finding is a sanitizer report, a failure without a message, or a name, token or setting
 * longer than the input it came from.
 */
#include "fuzz.h"
#include "net/s3.h"

#include <curl/curl.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void list_page(const char *xml, size_t size)
{
	char **names = NULL, *next = NULL;
	size_t n = 0;
	tfs_error e = { 0 };

	if (tfs_s3_parse_list(xml, &names, &n, &next, &e) != 0 && !e.msg[0])
		fz_fail("a refused listing without a message");
	for (size_t i = 0; i < n; i++) {
		if (strlen(names[i]) > size)
			fz_fail("a key of %zu bytes from %zu", strlen(names[i]), size);
		free(names[i]);
	}
	if (next && strlen(next) > size)
		fz_fail("a continuation token of %zu bytes from %zu", strlen(next), size);
	free(names);
	free(next);
}

/* A URL of bucket/key and the headers of a request signed with a (a made-up time). */
static void sign(const tfs_s3_auth *a, const char *bucket, const char *key)
{
	char *url = NULL, *host = NULL;
	struct curl_slist *hdrs = NULL;

	if (tfs_s3_url(a, bucket, key, "list-type=2", &url, &host) == 0) {
		if (!url || !host)
			fz_fail("a URL made without a URL or a host");
		if (tfs_s3_sign_request(a, "GET", url, host, 1700000000, &hdrs) != 0 && hdrs)
			fz_fail("a failed signing left headers");
	}
	curl_slist_free_all(hdrs);
	free(url);
	free(host);
}

static void aws_files(const uint8_t *data, size_t size)
{
	const char *path = fz_memfd_path("aws-config", data, size);
	static const char *const profiles[] = { NULL, "team" };

	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_CONFIG_FILE", path, 1);
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
		tfs_s3_auth *a = NULL;
		tfs_error e = { 0 };

		if (profiles[i])
			setenv("AWS_PROFILE", profiles[i], 1);
		else
			unsetenv("AWS_PROFILE");
		if (tfs_s3_auth_load(&a, NULL, &e) != 0) {
			if (!e.msg[0] || a)
				fz_fail("a refused profile without a message");
			continue;
		}
		if (!a->region || (a->key_id && strlen(a->key_id) > size) ||
		    (a->endpoint && strlen(a->endpoint) > size) || strlen(a->region) > size + 16)
			fz_fail("settings longer than the files they came from");
		sign(a, "bucket", "dir/model.gguf");
		tfs_s3_auth_free(a);
	}
}

static void source(const char *s)
{
	char *bucket = NULL, *key = NULL;
	tfs_error e = { 0 };

	if (tfs_s3_parse(s, &bucket, &key, &e) != 0) {
		if (!e.msg[0])
			fz_fail("a refused source without a message");
	} else {
		char region[] = "us-east-1", id[] = "AKIDEXAMPLE",
		     secret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		     endpoint[] = "http://127.0.0.1:7480";
		tfs_s3_auth a = { .region = region, .key_id = id, .secret = secret };

		sign(&a, bucket, key);
		a.endpoint = endpoint;
		a.path_style = true;
		sign(&a, bucket, key);
	}
	free(bucket);
	free(key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool once;

	if (!once) {
		once = true;
		/* no credentials, region or endpoint from the machine running the harness */
		static const char *const vars[] = {
			"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
			"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
		};
		for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
			unsetenv(vars[i]);
	}
	if (size < 1)
		return 0;
	char *text = malloc(size);   /* the input after the selector, NUL-terminated */

	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	switch (data[0] % 3) {
	case 0:
		list_page(text, size - 1);
		break;
	case 1:
		aws_files(data + 1, size - 1);
		break;
	default:
		source(text);
		break;
	}
	free(text);
	return 0;
}
