/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3.h - s3://BUCKET/KEY sources: the URL an http source reads and how it
 * signs its requests (s3.c), and the <Code> of an S3 error body.
 */
#ifndef FAULTLINE_SOURCE_S3_H
#define FAULTLINE_SOURCE_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

/* The empty payload's SHA-256: the x-amz-content-sha256 of every GET. */
#define S3_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* How an s3:// source's requests are made and signed. */
struct s3_target {
	char *url;		/* path-style at AWS_ENDPOINT_URL, or AWS's */
	char *key_id;		/* AWS_ACCESS_KEY_ID */
	char *secret;		/* AWS_SECRET_ACCESS_KEY: never printed */
	char sigv4[80];		/* CURLOPT_AWS_SIGV4: "aws:amz:REGION:s3" */
	struct curl_slist *headers; /* x-amz-content-sha256, -security-token */
};

/* Is spec an s3:// spec (by its scheme alone)? */
bool s3_is_spec(const char *spec);

/* Is spec a well-formed s3://BUCKET/KEY?  0, or -EINVAL saying why. */
int s3_check_spec(const char *spec);

/*
 * The URL and signing of spec, from the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION or
 * AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL): 0, or
 * -EINVAL naming the variable that is missing or wrong, -ENOMEM.
 */
int s3_target_get(const char *spec, struct s3_target *t);

/*
 * The root of a store, s3://BUCKET or s3://BUCKET/PREFIX with any number
 * of trailing '/', as "s3://BUCKET/" or "s3://BUCKET/PREFIX/" into out.
 * 0, or -EINVAL / -ENAMETOOLONG with a message.
 */
int s3_root_spec(const char *spec, char *out, size_t n);

/*
 * s3_target_get() for such a root ("s3://BUCKET/PREFIX/"): t->url is the
 * prefix's URL, ending in '/', to which an object's name is appended.
 */
int s3_target_root(const char *root, struct s3_target *t);

/* Free t's parts, the secret wiped first. */
void s3_target_free(struct s3_target *t);

/*
 * The <Code> of an S3 error body (<Error>...<Code>C</Code>...), which
 * need not be NUL-terminated: true with code holding C (letters, digits
 * and '.' only, at most n - 1 of them), else false and code "".
 */
bool s3_error_code(const char *body, size_t len, char *code, size_t n);

/* What an error code usually means here, or NULL. */
const char *s3_error_hint(const char *code);

/* One page of a ListObjectsV2 answer: more to ask for, and how. */
#define S3_KEY_MAX	1024		/* bytes in a key, S3's own limit */
struct s3_list_page {
	bool more;			/* IsTruncated */
	char token[1024];		/* NextContinuationToken, decoded */
};
/*
 * Parse one ListObjectsV2 answer (not NUL-terminated): key() called with
 * each <Contents>' Key (XML entities decoded) and Size, in order; a
 * negative return stops it and is returned.  0, or -EPROTO with the
 * error saying what is missing (a Key, a Size, the token of a truncated
 * answer).  A bounded, tolerant scan, not an XML parser: only the
 * elements it needs, which S3 writes without attributes.
 */
int s3_list_parse(const char *body, size_t len, struct s3_list_page *pg,
		  int (*key)(void *arg, const char *name, uint64_t size),
		  void *arg);

#endif
