/* test_s3.c - s3:// without a store: SigV4 against AWS's published examples, where the
 * credentials, region and endpoint come from (environment, profiles, options), the URLs of
 * both addressing styles, ListObjectsV2 pages, the scheme table's joins.  The requests
 * themselves are tested against a real radosgw in tests/mount/test_s3.py. */
#include <criterion/criterion.h>

#include "s3.h"
#include "scheme_impl.h"
#include "tensorfs.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S(x) ((char *)(x)) /* a literal in a field the library frees */
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const char *const aws_vars[] = {
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
	"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION", "AWS_DEFAULT_REGION",
	"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
};
static char home[64];

/* No AWS variable set, HOME an empty directory: every test sets what it means. */
static void clean_env(void)
{
	for (size_t i = 0; i < sizeof(aws_vars) / sizeof(aws_vars[0]); i++)
		unsetenv(aws_vars[i]);
	snprintf(home, sizeof(home), "/tmp/tfs-s3-home-XXXXXX");
	cr_assert_not_null(mkdtemp(home));
	setenv("HOME", home, 1);
}

static void drop_home(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", home);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(s3, .init = clean_env, .fini = drop_home);

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* The settings with the given options (NULL: none), asserting success. */
static tfs_s3_auth *load(const tfs_open_opts *o)
{
	tfs_s3_auth *a = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_s3_auth_load(&a, o, &err), 0, "%s", err.msg);
	return a;
}

/* The error line of a load that must fail. */
static void load_fails(const tfs_open_opts *o, const char *want)
{
	tfs_s3_auth *a = NULL;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_s3_auth_load(&a, o, &err), TFS_E_INVALID, "%s", want);
	cr_expect_null(a);
	cr_expect(strstr(err.msg, want) != NULL, "%s (wanted %s)", err.msg, want);
}

/* ==== SigV4: AWS's examples (sig-v4-header-based-auth), key AKIAIOSFODNN7EXAMPLE ==== */

static const tfs_s3_auth example = {
	.key_id = S("AKIAIOSFODNN7EXAMPLE"),
	.secret = S("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
	.region = S("us-east-1"),
};

Test(s3, sigv4_get_object_example)
{
	const char *h[] = { "host:examplebucket.s3.amazonaws.com", "range:bytes=0-9",
			    ("x-amz-content-sha256:" EMPTY), "x-amz-date:20130524T000000Z" };
	char out[512];
	cr_assert_eq(tfs_sigv4(&example, out, sizeof(out), "s3", "20130524T000000Z", "GET",
			       "/test.txt", "", h, 4, EMPTY), 0);
	cr_expect_str_eq(out, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/"
			 "us-east-1/s3/aws4_request, SignedHeaders=host;range;"
			 "x-amz-content-sha256;x-amz-date, Signature="
			 "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

Test(s3, sigv4_list_objects_example)
{
	const char *h[] = { "host:examplebucket.s3.amazonaws.com", ("x-amz-content-sha256:" EMPTY),
			    "x-amz-date:20130524T000000Z" };
	char out[512];
	cr_assert_eq(tfs_sigv4(&example, out, sizeof(out), "s3", "20130524T000000Z", "GET", "/",
			       "max-keys=2&prefix=J", h, 3, EMPTY), 0);
	cr_expect(strstr(out, "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711"
			      "ef69dc6f7") != NULL, "%s", out);
	cr_expect_eq(tfs_sigv4(&example, out, 40, "s3", "20130524T000000Z", "GET", "/", "", h, 3,
			       EMPTY), -1, "too small a buffer");
}

/* A signed request's headers, as libcurl would send them. */
static char *signed_headers(const tfs_s3_auth *a, const char *url, const char *host)
{
	struct curl_slist *l = NULL;
	cr_assert_eq(tfs_s3_sign_request(a, "GET", url, host, 1369353600 /* 2013-05-24 */, &l), 0);
	size_t n = 1;
	for (struct curl_slist *p = l; p; p = p->next)
		n += strlen(p->data) + 1;
	char *s = calloc(1, n);
	for (struct curl_slist *p = l; p; p = p->next)
		strcat(strcat(s, p->data), "\n");
	curl_slist_free_all(l);
	return s;
}

Test(s3, signed_request_headers)
{
	char *s = signed_headers(&example, "https://examplebucket.s3.amazonaws.com/?max-keys=2&"
				 "prefix=J", "examplebucket.s3.amazonaws.com");
	cr_expect(strstr(s, "Host: examplebucket.s3.amazonaws.com\n"), "%s", s);
	cr_expect(strstr(s, "x-amz-date: 20130524T000000Z\n"), "%s", s);
	cr_expect(strstr(s, "x-amz-content-sha256: " EMPTY "\n"), "%s", s);
	/* the same signature as AWS's example: the URL's path and query are what is signed */
	cr_expect(strstr(s, "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711"
			    "ef69dc6f7\n"), "%s", s);
	cr_expect_null(strstr(s, "security-token"));
	free(s);
	tfs_s3_auth with_token = example;
	with_token.session_token = S("TOKEN/1+2=");
	s = signed_headers(&with_token, "https://h/b/k", "h");
	cr_expect(strstr(s, "x-amz-security-token: TOKEN/1+2=\n"), "%s", s);
	cr_expect(strstr(s, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
			    "x-amz-security-token,"), "%s", s);
	free(s);
	tfs_s3_auth anonymous = { .region = S("us-east-1") };
	s = signed_headers(&anonymous, "https://h/b/k", "h");
	cr_expect_str_eq(s, "", "anonymous requests carry no header");
	free(s);
}

/* ==== where the settings come from ==== */

Test(s3, credentials_from_the_environment)
{
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SKENV", 1);
	setenv("AWS_SESSION_TOKEN", "TKENV", 1);
	char path[128];
	snprintf(path, sizeof(path), "%s/.aws", home);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/.aws/credentials", home);
	write_file(path, "[default]\naws_access_key_id = AKFILE\naws_secret_access_key = SKFILE\n");
	tfs_s3_auth *a = load(NULL);
	cr_expect_str_eq(a->key_id, "AKENV", "the environment before the files");
	cr_expect_str_eq(a->secret, "SKENV");
	cr_expect_str_eq(a->session_token, "TKENV");
	cr_expect_str_eq(a->region, "us-east-1");
	cr_expect_null(a->endpoint);
	cr_expect(strstr(a->creds_from, "AWS_SESSION_TOKEN"));
	cr_expect_null(strstr(a->creds_from, "SKENV"), "no secret in a message");
	tfs_s3_auth_free(a);
	unsetenv("AWS_SECRET_ACCESS_KEY");
	load_fails(NULL, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
}

Test(s3, credentials_from_the_default_profile)
{
	char dir[128], cred[160], conf[160];
	snprintf(dir, sizeof(dir), "%s/.aws", home);
	mkdir(dir, 0700);
	snprintf(cred, sizeof(cred), "%s/credentials", dir);
	snprintf(conf, sizeof(conf), "%s/config", dir);
	write_file(cred, "[other]\naws_access_key_id=AKOTHER\naws_secret_access_key=SKOTHER\n\n"
			 "[default]\n# a comment\naws_access_key_id = AKDEF  \n"
			 "aws_secret_access_key=SK/DEF+x\naws_session_token = TKDEF\n");
	write_file(conf, "[default]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:9/\n"
			 "[profile other]\nregion = ap-south-1\n");
	tfs_s3_auth *a = load(NULL);
	cr_expect_str_eq(a->key_id, "AKDEF");
	cr_expect_str_eq(a->secret, "SK/DEF+x");
	cr_expect_str_eq(a->session_token, "TKDEF");
	cr_expect_str_eq(a->region, "eu-west-3", "the config file's region");
	cr_expect_str_eq(a->endpoint, "http://127.0.0.1:9", "the profile's endpoint_url");
	cr_expect(a->path_style, "a custom endpoint: path-style");
	cr_expect_str_eq(a->creds_from, "AWS profile default");
	tfs_s3_auth_free(a);
	/* AWS_PROFILE picks another section of both files */
	setenv("AWS_PROFILE", "other", 1);
	a = load(NULL);
	cr_expect_str_eq(a->key_id, "AKOTHER");
	cr_expect_null(a->session_token);
	cr_expect_str_eq(a->region, "ap-south-1");
	cr_expect_null(a->endpoint);
	cr_expect_not(a->path_style, "AWS: virtual-hosted");
	tfs_s3_auth_free(a);
	/* AWS_REGION and AWS_DEFAULT_REGION before the profile's, in that order */
	setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
	a = load(NULL);
	cr_expect_str_eq(a->region, "us-west-1");
	tfs_s3_auth_free(a);
	setenv("AWS_REGION", "us-west-2", 1);
	a = load(NULL);
	cr_expect_str_eq(a->region, "us-west-2");
	tfs_s3_auth_free(a);
	setenv("AWS_PROFILE", "missing", 1);
	load_fails(NULL, "AWS_PROFILE=missing: no such profile in");
}

Test(s3, credentials_from_files_named_by_variables)
{
	char cred[160], conf[160];
	snprintf(cred, sizeof(cred), "%s/creds.ini", home);
	snprintf(conf, sizeof(conf), "%s/conf.ini", home);
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	setenv("AWS_CONFIG_FILE", conf, 1);
	setenv("AWS_PROFILE", "team", 1);
	/* a profile whose keys are in the config file only (the CLI reads them there too) */
	write_file(cred, "[default]\naws_access_key_id=AKNO\naws_secret_access_key=SKNO\n");
	write_file(conf, "[profile team]\naws_access_key_id=AKTEAM\naws_secret_access_key=SKTEAM\n"
			 "region=eu-central-1\n");
	tfs_s3_auth *a = load(NULL);
	cr_expect_str_eq(a->key_id, "AKTEAM");
	cr_expect_str_eq(a->region, "eu-central-1");
	tfs_s3_auth_free(a);
	/* half a pair is an error naming the profile and the key missing */
	write_file(conf, "[profile team]\naws_access_key_id=AKTEAM\n");
	load_fails(NULL, "has aws_access_key_id but not aws_secret_access_key");
}

Test(s3, no_credentials_is_anonymous)
{
	tfs_s3_auth *a = load(NULL);
	cr_expect_null(a->key_id);
	cr_expect_null(a->secret);
	cr_expect(strstr(a->creds_from, "anonymous"));
	tfs_s3_auth_free(a);
}

Test(s3, endpoint_and_addressing)
{
	tfs_open_opts o = { 0 };
	tfs_open_opt_set(&o, "endpoint", "http://127.0.0.1:7480/");
	setenv("AWS_ENDPOINT_URL", "http://env:1", 1);
	setenv("AWS_ENDPOINT_URL_S3", "http://env-s3:2", 1);
	tfs_s3_auth *a = load(&o);
	cr_expect_str_eq(a->endpoint, "http://127.0.0.1:7480", "-o endpoint= first");
	tfs_s3_auth_free(a);
	a = load(NULL);
	cr_expect_str_eq(a->endpoint, "http://env-s3:2", "then AWS_ENDPOINT_URL_S3");
	tfs_s3_auth_free(a);
	unsetenv("AWS_ENDPOINT_URL_S3");
	a = load(NULL);
	cr_expect_str_eq(a->endpoint, "http://env:1", "then AWS_ENDPOINT_URL");
	tfs_s3_auth_free(a);
	o = (tfs_open_opts){ 0 };
	tfs_open_opt_set(&o, "endpoint", "ftp://x");
	load_fails(&o, "endpoint=ftp://x: not an http:// or https:// URL");
	o = (tfs_open_opts){ 0 };
	tfs_open_opt_set(&o, "endpoint", "http://user:pw@h");
	load_fails(&o, "no user, query or fragment");
	o = (tfs_open_opts){ 0 };
	tfs_open_opt_set(&o, "s3_addressing", "sideways");
	load_fails(&o, "s3_addressing=sideways: not path or virtual");
	setenv("AWS_REGION", "us east", 1);
	load_fails(NULL, "region us east: not a region name");
}

static void check_url(const tfs_s3_auth *a, const char *bucket, const char *key,
		      const char *query, const char *want, const char *want_host)
{
	char *url = NULL, *host = NULL;
	cr_assert_eq(tfs_s3_url(a, bucket, key, query, &url, &host), 0);
	cr_expect_str_eq(url, want);
	cr_expect_str_eq(host, want_host);
	free(url);
	free(host);
}

Test(s3, urls_of_both_styles)
{
	tfs_s3_auth aws = { .region = S("eu-west-1") };
	check_url(&aws, "models", "qwen/model.safetensors", NULL,
		  "https://models.s3.eu-west-1.amazonaws.com/qwen/model.safetensors",
		  "models.s3.eu-west-1.amazonaws.com");
	/* a key's bytes URI-encoded once, '/' kept; the query as given */
	check_url(&aws, "models", "a b/ü+=.gguf", "list-type=2",
		  "https://models.s3.eu-west-1.amazonaws.com/a%20b/%C3%BC%2B%3D.gguf?list-type=2",
		  "models.s3.eu-west-1.amazonaws.com");
	/* a bucket DNS cannot carry (dots: TLS names) goes path-style even on AWS */
	check_url(&aws, "my.models", "k", NULL, "https://s3.eu-west-1.amazonaws.com/my.models/k",
		  "s3.eu-west-1.amazonaws.com");
	aws.path_style = true;
	check_url(&aws, "models", "k", NULL, "https://s3.eu-west-1.amazonaws.com/models/k",
		  "s3.eu-west-1.amazonaws.com");
	tfs_s3_auth ceph = { .region = S("us-east-1"), .endpoint = S("http://127.0.0.1:7480"),
			     .path_style = true };
	check_url(&ceph, "b", "m/x.gguf", NULL, "http://127.0.0.1:7480/b/m/x.gguf",
		  "127.0.0.1:7480");
	check_url(&ceph, "b", "", "delimiter=%2F&list-type=2&prefix=m%2F",
		  "http://127.0.0.1:7480/b/?delimiter=%2F&list-type=2&prefix=m%2F",
		  "127.0.0.1:7480");
	ceph.path_style = false;
	check_url(&ceph, "b", "m/x.gguf", NULL, "http://b.127.0.0.1:7480/m/x.gguf",
		  "b.127.0.0.1:7480");
}

Test(s3, parse_names)
{
	char *b, *k;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_s3_parse("s3://bucket/dir/m.gguf", &b, &k, &err), 0);
	cr_expect_str_eq(b, "bucket");
	cr_expect_str_eq(k, "dir/m.gguf");
	free(b);
	free(k);
	cr_assert_eq(tfs_s3_parse("s3://bucket", &b, &k, &err), 0);
	cr_expect_str_eq(k, "");
	free(b);
	free(k);
	cr_expect_eq(tfs_s3_parse("s3:///k", &b, &k, &err), TFS_E_INVALID);
	cr_expect(strstr(err.msg, "not of the form s3://BUCKET/KEY"), "%s", err.msg);
	/* a string shorter than the scheme is refused without reading past its end (fuzz_s3:
	 * the ASan build reports the read of a 3-byte allocation's 6th byte) */
	char *shorter = strdup("S\xcd");
	cr_assert_not_null(shorter);
	cr_expect_eq(tfs_s3_parse(shorter, &b, &k, &err), TFS_E_INVALID);
	cr_expect(b == NULL && k == NULL);
	free(shorter);
}

/* ==== ListObjectsV2 ==== */

Test(s3, list_pages)
{
	char **names = NULL, *next = NULL;
	size_t n = 0;
	tfs_error err = { 0 };
	const char *page1 =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult xmlns=\"http://s3."
		"amazonaws.com/doc/2006-03-01/\"><Name>b</Name><Prefix>r/</Prefix><KeyCount>3"
		"</KeyCount><IsTruncated>true</IsTruncated><NextContinuationToken>tok/1=="
		"</NextContinuationToken><Contents><Key>r/config.json</Key><ETag>&quot;x&quot;"
		"</ETag></Contents><Contents><Key>r/a&amp;b.safetensors</Key></Contents>"
		"<CommonPrefixes><Prefix>r/sub/</Prefix></CommonPrefixes></ListBucketResult>";
	cr_assert_eq(tfs_s3_parse_list(page1, &names, &n, &next, &err), 0, "%s", err.msg);
	cr_assert_eq(n, 3);
	cr_expect_str_eq(names[0], "r/config.json");
	cr_expect_str_eq(names[1], "r/a&b.safetensors", "entities decoded");
	cr_expect_str_eq(names[2], "r/sub/");
	cr_expect_str_eq(next, "tok/1==");
	free(next);
	const char *page2 = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>"
			    "r/z.gguf</Key></Contents></ListBucketResult>";
	cr_assert_eq(tfs_s3_parse_list(page2, &names, &n, &next, &err), 0);
	cr_expect_eq(n, 4);
	cr_expect_null(next);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	names = NULL;
	n = 0;
	cr_expect_eq(tfs_s3_parse_list("<Error><Code>AccessDenied</Code></Error>", &names, &n,
				       &next, &err), TFS_E_FORMAT);
	cr_expect_eq(tfs_s3_parse_list("<ListBucketResult><IsTruncated>true</IsTruncated>"
				       "</ListBucketResult>", &names, &n, &next, &err),
		     TFS_E_FORMAT, "truncated without a token: not followed forever");
}

/* ==== the scheme table ==== */

static void check_join(const char *source, const char *name, const char *want)
{
	char *got = tfs_remote_join(source, name);
	cr_expect_str_eq(got, want, "%s + %s", source, name);
	free(got);
}

Test(s3, scheme_table)
{
	cr_expect(tfs_is_remote("s3://b/k"));
	cr_expect(tfs_is_remote("S3://b/k"));
	cr_expect(tfs_is_remote("hf://o/r"));
	cr_expect(tfs_is_remote("HTTPS://h/x"));
	cr_expect_not(tfs_is_remote("s3:/b/k"));
	cr_expect_not(tfs_is_remote("./s3://b"));
	cr_expect_not(tfs_is_remote("llama3:8b"));
	cr_expect_not(tfs_is_remote(NULL));
	cr_expect(tfs_remote_is_dir("s3://b/models/qwen/"));
	cr_expect(tfs_remote_is_dir("s3://b"));
	cr_expect(tfs_remote_is_dir("s3://b/"));
	cr_expect_not(tfs_remote_is_dir("s3://b/models/qwen"));
	cr_expect(tfs_remote_is_dir("hf://o/r@v1"));
	cr_expect_not(tfs_remote_is_dir("hf://o/r/x.gguf"));
	cr_expect_not(tfs_remote_is_dir("https://h/o/"));
	/* a shard beside its index; a repo's file */
	check_join("s3://b/m/model.safetensors.index.json", "model-00001 of 2.safetensors",
		   "s3://b/m/model-00001 of 2.safetensors");
	check_join("s3://b/m/q/", "config.json", "s3://b/m/q/config.json");
	check_join("s3://b", "config.json", "s3://b/config.json");
	check_join("https://h/a/idx.json?x=1", "s 1.safetensors", "https://h/a/s%201.safetensors");
	check_join("hf://o/r@v1", "config.json", "hf://o/r/config.json@v1");
	check_join("hf://o/r/sub/idx.json", "a.safetensors", "hf://o/r/sub/a.safetensors");
	check_join("hf://o/r/idx.json@main", "a.safetensors", "hf://o/r/a.safetensors@main");
}

Test(s3, resolve_names_no_secret)
{
	tfs_target t;
	tfs_error err = { 0 };
	setenv("AWS_ACCESS_KEY_ID", "AKRES", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SKRES-secret", 1);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:7480", 1);
	cr_assert_eq(tfs_target_resolve(&t, "s3://bkt/dir/m.gguf", NULL, &err), 0, "%s", err.msg);
	cr_expect_str_eq(t.url, "http://127.0.0.1:7480/bkt/dir/m.gguf");
	cr_expect_not(t.follow, "a signed request follows no redirect");
	cr_expect_null(strstr(t.url, "SKRES"));
	tfs_target_free(&t);
	cr_expect_eq(tfs_target_resolve(&t, "s3://bkt/dir/", NULL, &err), TFS_E_INVALID);
	cr_expect(strstr(err.msg, "names a prefix, not an object"), "%s", err.msg);
	cr_expect_eq(tfs_target_resolve(&t, "/local/path", NULL, &err), TFS_E_INVALID);
}

/* A refusal as the S3 row words it. */
static void check_refusal(long status, const char *body, const char *region, int code,
			  const char *want)
{
	tfs_target t;
	tfs_error err = { 0 };
	cr_assert_eq(tfs_target_resolve(&t, "s3://bkt/m.gguf", NULL, &err), 0, "%s", err.msg);
	tfs_refusal r = { status, body, region, 1 };
	cr_expect_eq(t.scheme->refused(&t, "s3://bkt/m.gguf", &r, &err), code, "%s", want);
	cr_expect(strstr(err.msg, want) != NULL, "%s (wanted %s)", err.msg, want);
	cr_expect_null(strstr(err.msg, "SKREF"), "%s", err.msg);
	tfs_target_free(&t);
}

Test(s3, refusals)
{
	setenv("AWS_ACCESS_KEY_ID", "AKREF", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SKREF", 1);
	setenv("AWS_REGION", "us-east-1", 1);
	check_refusal(404, "<Error><Code>NoSuchKey</Code></Error>", "", TFS_E_NOTFOUND,
		      "s3://bkt/m.gguf: no such key in bucket bkt (HTTP 404 NoSuchKey)");
	check_refusal(404, "<Error><Code>NoSuchBucket</Code></Error>", "", TFS_E_NOTFOUND,
		      "no bucket bkt at AWS");
	check_refusal(403, "<Error><Code>SignatureDoesNotMatch</Code></Error>", "", TFS_E_IO,
		      "refused the request's signature (HTTP 403 SignatureDoesNotMatch): is the "
		      "secret key right? (credentials from AWS_ACCESS_KEY_ID and "
		      "AWS_SECRET_ACCESS_KEY)");
	check_refusal(403, "<Error><Code>InvalidAccessKeyId</Code></Error>", "", TFS_E_IO,
		      "refused the access key ID");
	check_refusal(403, "<Error><Code>AccessDenied</Code></Error>", "", TFS_E_IO,
		      "the key has no read access");
	/* AWS's answers for another region: a 301 with the header, a 400 naming it */
	check_refusal(301, "<Error><Code>PermanentRedirect</Code></Error>", "eu-north-1",
		      TFS_E_IO, "bucket bkt is in region eu-north-1, not us-east-1");
	check_refusal(400, "<Error><Code>AuthorizationHeaderMalformed</Code><Region>ap-east-1"
		      "</Region></Error>", "", TFS_E_IO, "set AWS_REGION=ap-east-1");
	check_refusal(503, "<Error><Code>SlowDown</Code><Message>Please reduce your request rate."
		      "</Message></Error>", "", TFS_E_IO,
		      "HTTP 503 SlowDown: Please reduce your request rate. (after 1 tries)");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	check_refusal(403, "<Error><Code>AccessDenied</Code></Error>", "", TFS_E_IO,
		      "no credentials were found (requests are anonymous)");
}

Test(s3, missing_key_is_not_found)
{
	/* (a prefix typed without its '/' is listed by formats/open.c: tests/mount/test_s3.py) */
	tfs_target t;
	tfs_error err = { 0 };
	tfs_refusal r = { 404, "<Error><Code>NoSuchKey</Code></Error>", "", 1 };
	cr_assert_eq(tfs_target_resolve(&t, "s3://bkt/models/qwen", NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(t.scheme->refused(&t, "s3://bkt/models/qwen", &r, &err), TFS_E_NOTFOUND);
	cr_expect_str_eq(err.msg, "s3://bkt/models/qwen: no such key in bucket bkt (HTTP 404 "
			 "NoSuchKey)");
	tfs_target_free(&t);
}

Test(s3, options_by_name)
{
	tfs_open_opts o = { 0 };
	tfs_error err = { 0 };
	cr_expect_eq(tfs_open_opt_set(&o, "endpoint", "http://a"), 0);
	cr_expect_eq(tfs_open_opt_set(&o, "endpoint", "http://b"), 0);
	cr_expect_eq(o.n_named, 1, "a name set twice: the last value");
	cr_expect_str_eq(tfs_open_opt(&o, "endpoint"), "http://b");
	cr_expect_null(tfs_open_opt(&o, "s3_addressing"));
	cr_expect_null(tfs_open_opt(NULL, "endpoint"));
	cr_expect_eq(tfs_open_opt_set(&o, "endpoint", NULL), 0);
	cr_expect_eq(o.n_named, 0);
	static char names[TFS_NAMED_OPTS_MAX + 1][16];   /* (room for any int: gcc -O1 checks) */
	for (int i = 0; i <= TFS_NAMED_OPTS_MAX; i++)
		snprintf(names[i], sizeof(names[i]), "n%d", i);
	o = (tfs_open_opts){ 0 };
	for (int i = 0; i < TFS_NAMED_OPTS_MAX; i++)
		cr_expect_eq(tfs_open_opt_set(&o, names[i], "v"), 0);
	cr_expect_eq(tfs_open_opt_set(&o, names[TFS_NAMED_OPTS_MAX], "v"), TFS_E_INVALID,
		     "no room: refused, not dropped");
	/* the scheme rows check their own options */
	cr_expect_eq(tfs_remote_option_check("s3_addressing", "path", &err), 0);
	cr_expect_eq(tfs_remote_option_check("s3_addressing", "up", &err), TFS_E_INVALID);
	cr_expect_str_eq(err.msg, "s3_addressing=up: not path or virtual");
	cr_expect_eq(tfs_remote_option_check("endpoint", "ftp://x", &err), TFS_E_INVALID);
	cr_expect_str_eq(err.msg, "endpoint=ftp://x: not an http:// or https:// URL");
	cr_expect_eq(tfs_remote_option_check("endpoint", "http://127.0.0.1:7480", &err), 0);
	cr_expect_eq(tfs_remote_option_check("outtype", "f16", &err), TFS_E_NOTFOUND);
}
