/*
 * s3.h - s3://BUCKET/KEY (codec/net/s3.c, a row of the scheme table): credentials, region
 * and endpoint found as the AWS SDKs and CLI find them, requests signed with SigV4,
 * ListObjectsV2 for a prefix.  Codec-private; the tests call it too.
 *
 * Where each setting comes from, the first found winning:
 *   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); the
 *                profile AWS_PROFILE (else "default") in AWS_SHARED_CREDENTIALS_FILE (else
 *                ~/.aws/credentials), then in AWS_CONFIG_FILE (else ~/.aws/config, as
 *                [profile NAME] or [default]); none: anonymous (unsigned) requests
 *   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1
 *   endpoint     -o endpoint=URL (the row's options, by name: tfs_open_opt), AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 *                endpoint_url; none: AWS (https://s3.REGION.amazonaws.com)
 *   addressing   -o s3_addressing=path|virtual; else path-style for a custom endpoint,
 *                virtual-hosted for AWS (path-style for a bucket name DNS cannot carry)
 */
#ifndef TFS_S3_H
#define TFS_S3_H

#include "scheme_impl.h"

#include <time.h>

struct curl_slist;

/* The settings of s3:// requests (the credentials wiped by tfs_s3_auth_free): a target's
 * auth (scheme_impl.h). */
typedef struct tfs_s3_auth tfs_s3_auth;
struct tfs_s3_auth {
	char *key_id, *secret, *session_token; /* all NULL: anonymous */
	char *region;
	char *endpoint;           /* a custom endpoint (no trailing '/'), or NULL: AWS */
	bool path_style;
	char creds_from[160];     /* where the credentials came from, for messages */
};

/* The settings from the environment, the AWS files and o (-o endpoint=, s3_addressing=).
 * 0; TFS_E_INVALID with a line naming the setting (a profile not found, half a key pair,
 * an endpoint that is not an http(s) URL, an addressing style not known); TFS_E_NOMEM. */
int tfs_s3_auth_load(tfs_s3_auth **out, const tfs_open_opts *o, tfs_error *err);
void tfs_s3_auth_free(tfs_s3_auth *a);

/* Splits s3://BUCKET[/KEY] into the bucket and key (allocated; key "" for none).  0, or
 * TFS_E_INVALID (no bucket), TFS_E_NOMEM. */
int tfs_s3_parse(const char *source, char **bucket, char **key, tfs_error *err);

/* The URL of key in bucket (key URI-encoded as SigV4 wants it: every byte but the
 * unreserved ones and '/'), and its host (the Host header signed); query, when not NULL,
 * is appended as it is (already canonical: sorted, encoded).  Allocated; -1 out of memory. */
int tfs_s3_url(const tfs_s3_auth *a, const char *bucket, const char *key, const char *query,
	       char **url, char **host);

/*
 * The SigV4 Authorization header's value (without "Authorization: ") into out: the
 * canonical request of method, uri (the encoded path), query (canonical), the headers
 * (lines "name:value", names lower case, values trimmed, sorted by name) and the payload's
 * SHA-256 in hex, signed for amz_date (YYYYMMDD'T'HHMMSS'Z'), a's region, service.
 * -1 when out is too small (or out of memory).
 */
int tfs_sigv4(const tfs_s3_auth *a, char *out, size_t cap, const char *service, const char *amz_date,
	      const char *method, const char *uri, const char *query,
	      const char *const *headers, size_t n_headers, const char *payload_sha256);

/* Appends a signed request's headers to *hdrs (Host, x-amz-date, x-amz-content-sha256,
 * x-amz-security-token, Authorization) for method at url (made by tfs_s3_url) at time now.
 * Nothing for anonymous requests.  0, or -1 when out of memory. */
int tfs_s3_sign_request(const tfs_s3_auth *a, const char *method, const char *url, const char *host,
			time_t now, struct curl_slist **hdrs);

/* A ListObjectsV2 page (XML): the keys (and, with a delimiter, the common prefixes, each
 * ending in it) appended to *names (*n of them, allocated), and the continuation token
 * (allocated) when the page says it is truncated, else NULL.  0, or TFS_E_FORMAT. */
int tfs_s3_parse_list(const char *xml, char ***names, size_t *n, char **next, tfs_error *err);

/* The keys directly under the prefix of source (s3://BUCKET/PREFIX/), relative to it (a
 * common prefix, a "subdirectory", ends in '/').  Allocated array of allocated strings. */
int tfs_s3_list(const char *source, const tfs_open_opts *o, char ***names, size_t *n,
		tfs_error *err);

#endif
