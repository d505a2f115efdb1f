// SPDX-License-Identifier: Apache-2.0
/*
 * s3.c - s3://BUCKET/KEY: the URL an http source (source/http.c) reads and how
 * libcurl signs its requests (AWS Signature V4, CURLOPT_AWS_SIGV4), taken
 * from the standard environment; and the <Code> of an S3 error body.
 *
 * Decisions: with AWS_ENDPOINT_URL (an S3-compatible store) requests are
 * path-style (ENDPOINT/BUCKET/KEY), else virtual-hosted at AWS
 * (https://BUCKET.s3.REGION.amazonaws.com/KEY; path-style there too for a
 * bucket with a dot, which no wildcard certificate covers).  The key is
 * taken literally and percent-encoded once, as SigV4's canonical URI
 * wants.  The secret goes to libcurl and nowhere else: no message, name or
 * cache key holds it, and it is wiped when the source is freed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/s3.h"
#include "util/error.h"

bool s3_is_spec(const char *spec)
{
	return !strncasecmp(spec, "s3://", 5);
}

static bool bucket_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* s3://BUCKET/KEY, or for a root s3://BUCKET[/PREFIX] (the key may be empty) */
static int check_spec(const char *spec, bool root)
{
	const char *b = spec + 5, *slash = strchr(b, '/');
	size_t blen = slash ? (size_t)(slash - b) : strlen(b);

	if (!blen || (!root && (!slash || !slash[1])))
		return fl_err(-EINVAL, "%s: not s3://BUCKET/%s", spec,
			      root ? "PREFIX" : "KEY");
	if (!slash)
		slash = b + blen;	/* a root: the bucket alone */
	if (blen > 255)
		return fl_err(-EINVAL, "%s: bucket name longer than 255", spec);
	for (size_t i = 0; i < blen; i++)
		if (!bucket_char(b[i]))
			return fl_err(-EINVAL, "%s: bucket name with '%c' "
				      "(letters, digits, '.', '-', '_')", spec,
				      b[i]);
	for (const char *k = slash; *k; k++)
		if ((unsigned char)*k < 0x20 || *k == 0x7f)
			return fl_err(-EINVAL, "%s: a control character in "
				      "the key", spec);
	return 0;
}

int s3_check_spec(const char *spec)
{
	return check_spec(spec, false);
}

int s3_root_spec(const char *spec, char *out, size_t n)
{
	size_t len = strlen(spec);
	int ret;

	while (len > 5 && spec[len - 1] == '/')
		len--;
	if ((size_t)snprintf(out, n, "%.*s/", (int)len, spec) >= n)
		return fl_err(-ENAMETOOLONG, "%s: too long", spec);
	ret = check_spec(out, true);
	return ret < 0 ? ret : 0;
}

/* The variable's value, or NULL if unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* Does v hold only what may go in a header line (no CR, LF, NUL...)? */
static bool header_safe(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return false;
	return true;
}

/* s with every byte but unreserved ones and '/' as %XX: malloc'd. */
static char *encode_key(const char *s)
{
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("-._~/", c))
			*o++ = (char)c;
		else
			o += sprintf(o, "%%%02X", c);
	}
	*o = 0;
	return out;
}

/* t->url for bucket b (blen bytes) and key k in region. */
static int make_url(const char *spec, struct s3_target *t, const char *b,
		    int blen, const char *k, const char *region)
{
	const char *ep = env("AWS_ENDPOINT_URL_S3");
	const char *var = "AWS_ENDPOINT_URL_S3";
	char *key = encode_key(k);
	int n;

	if (!ep) {
		ep = env("AWS_ENDPOINT_URL");
		var = "AWS_ENDPOINT_URL";
	}
	if (!key)
		return -ENOMEM;
	if (ep) {
		size_t elen = strlen(ep);

		if ((strncasecmp(ep, "http://", 7) &&
		     strncasecmp(ep, "https://", 8)) || strpbrk(ep, "?#@") ||
		    !header_safe(ep)) {
			free(key);
			return fl_err(-EINVAL, "%s: %s is not an http:// or "
				      "https:// URL without query or user "
				      "info", spec, var);
		}
		while (elen && ep[elen - 1] == '/')
			elen--;
		n = asprintf(&t->url, "%.*s/%.*s/%s", (int)elen, ep, blen, b,
			     key);
	} else if (memchr(b, '.', (size_t)blen)) {
		n = asprintf(&t->url, "https://s3.%s.amazonaws.com/%.*s/%s",
			     region, blen, b, key);
	} else {
		n = asprintf(&t->url, "https://%.*s.s3.%s.amazonaws.com/%s",
			     blen, b, region, key);
	}
	free(key);
	if (n < 0) {
		t->url = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int add_header(struct s3_target *t, const char *name, const char *v)
{
	char *line;
	struct curl_slist *l;

	if (asprintf(&line, "%s: %s", name, v) < 0)
		return -ENOMEM;
	l = curl_slist_append(t->headers, line);
	explicit_bzero(line, strlen(line));	/* a session token */
	free(line);
	if (!l)
		return -ENOMEM;
	t->headers = l;
	return 0;
}

static int target_get(const char *spec, bool root, struct s3_target *t)
{
	const char *id = env("AWS_ACCESS_KEY_ID");
	const char *secret = env("AWS_SECRET_ACCESS_KEY");
	const char *token = env("AWS_SESSION_TOKEN");
	const char *region = env("AWS_REGION"), *b = spec + 5, *slash;
	int ret = check_spec(spec, root);

	memset(t, 0, sizeof(*t));
	if (ret < 0)
		return ret;
	if (curl_version_info(CURLVERSION_NOW)->version_num < 0x074b00)
		return fl_err(-ENOTSUP, "%s: libcurl %s has no AWS Signature "
			      "V4 (7.75 or later has)", spec,
			      curl_version_info(CURLVERSION_NOW)->version);
	if (!region)
		region = env("AWS_DEFAULT_REGION");
	if (!id)
		return fl_err(-EINVAL, "%s: AWS_ACCESS_KEY_ID is not set",
			      spec);
	if (!secret)
		return fl_err(-EINVAL, "%s: AWS_SECRET_ACCESS_KEY is not set",
			      spec);
	if (!region)
		return fl_err(-EINVAL, "%s: AWS_REGION is not set (the "
			      "bucket's region, e.g. us-east-1)", spec);
	if (strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
	    strlen(region))
		return fl_err(-EINVAL, "%s: AWS_REGION is not a region name "
			      "(lower-case letters, digits, '-')", spec);
	if (!header_safe(id) || strchr(id, ':'))
		return fl_err(-EINVAL, "%s: AWS_ACCESS_KEY_ID holds a ':' or "
			      "a control character", spec);
	if (token && !header_safe(token))
		return fl_err(-EINVAL, "%s: AWS_SESSION_TOKEN holds a control "
			      "character", spec);
	slash = strchr(b, '/');
	/* a root without '/': the bucket alone, the key "" */
	ret = make_url(spec, t, b, slash ? (int)(slash - b) : (int)strlen(b),
		       slash ? slash + 1 : "", region);
	if (ret < 0)
		goto fail;
	snprintf(t->sigv4, sizeof(t->sigv4), "aws:amz:%s:s3", region);
	ret = -ENOMEM;
	t->key_id = strdup(id);
	t->secret = strdup(secret);
	if (!t->key_id || !t->secret ||
	    add_header(t, "x-amz-content-sha256", S3_EMPTY_SHA256) < 0 ||
	    (token && add_header(t, "x-amz-security-token", token) < 0))
		goto fail;
	return 0;
fail:
	s3_target_free(t);
	return ret;
}

int s3_target_get(const char *spec, struct s3_target *t)
{
	return target_get(spec, false, t);
}

int s3_target_root(const char *root, struct s3_target *t)
{
	return target_get(root, true, t);
}

void s3_target_free(struct s3_target *t)
{
	struct curl_slist *l;

	if (t->secret)
		explicit_bzero(t->secret, strlen(t->secret));
	for (l = t->headers; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(t->headers);
	free(t->secret);
	free(t->key_id);
	free(t->url);
	memset(t, 0, sizeof(*t));
}

/* ---- error bodies ---------------------------------------------------------- */

bool s3_error_code(const char *body, size_t len, char *code, size_t n)
{
	const char *end = body + len, *e, *c, *p;
	size_t k = 0;

	if (!n)
		return false;
	code[0] = 0;
	e = memmem(body, len, "<Error>", 7);
	if (!e)
		return false;
	c = memmem(e + 7, (size_t)(end - (e + 7)), "<Code>", 6);
	if (!c)
		return false;
	p = c + 6;
	while (p + k < end && bucket_char(p[k]) && p[k] != '-' && p[k] != '_')
		k++;
	if (!k || k >= n || (size_t)(end - (p + k)) < 7 ||
	    memcmp(p + k, "</Code>", 7))
		return false;
	memcpy(code, p, k);
	code[k] = 0;
	return true;
}

const char *s3_error_hint(const char *code)
{
	static const char *const hints[][2] = {
		{ "SignatureDoesNotMatch", "the secret key is not the key "
		  "id's: for s3://, AWS_SECRET_ACCESS_KEY and "
		  "AWS_ACCESS_KEY_ID" },
		{ "InvalidAccessKeyId", "the store knows no AWS_ACCESS_KEY_ID "
		  "of that name" },
		{ "AccessDenied", "the credentials may not read this object, "
		  "or a presigned URL expired" },
		{ "ExpiredToken", "AWS_SESSION_TOKEN has expired" },
		{ "InvalidToken", "AWS_SESSION_TOKEN is not valid" },
		{ "RequestTimeTooSkewed", "this machine's clock is off" },
		{ "AuthorizationHeaderMalformed", "AWS_REGION may not be the "
		  "bucket's region" },
		{ "PermanentRedirect", "the bucket is in another region than "
		  "AWS_REGION" },
		{ "NoSuchBucket", NULL },
		{ "NoSuchKey", NULL },
	};

	for (size_t i = 0; i < sizeof(hints) / sizeof(*hints); i++)
		if (!strcmp(code, hints[i][0]))
			return hints[i][1];
	return NULL;
}

/* ---- ListObjectsV2 answers ------------------------------------------------- */

/* The text of <tag>...</tag> within [p, end), or NULL; its length in *n. */
static const char *xml_text(const char *p, const char *end, const char *tag,
			    size_t *n)
{
	char open[40], close[40];
	const char *a, *b;
	int ol = snprintf(open, sizeof(open), "<%s>", tag);
	int cl = snprintf(close, sizeof(close), "</%s>", tag);

	a = memmem(p, (size_t)(end - p), open, (size_t)ol);
	if (!a)
		return NULL;
	a += ol;
	b = memmem(a, (size_t)(end - a), close, (size_t)cl);
	if (!b)
		return NULL;
	*n = (size_t)(b - a);
	return a;
}

/*
 * XML text into out (n bytes, NUL-terminated): the five named entities
 * decoded; anything else after '&', a control character or no room is
 * refused (false): an S3 key faultline writes has none of them.
 */
static bool xml_unescape(const char *s, size_t len, char *out, size_t n)
{
	static const char *const ent[][2] = {
		{ "&amp;", "&" }, { "&lt;", "<" }, { "&gt;", ">" },
		{ "&quot;", "\"" }, { "&apos;", "'" },
	};
	size_t k = 0;

	for (size_t i = 0; i < len; k++) {
		size_t e = 0;

		if (k + 1 >= n || (unsigned char)s[i] < 0x20)
			return false;
		if (s[i] != '&') {
			out[k] = s[i++];
			continue;
		}
		while (e < 5 && (len - i < strlen(ent[e][0]) ||
				 memcmp(s + i, ent[e][0], strlen(ent[e][0]))))
			e++;
		if (e == 5)
			return false;
		out[k] = ent[e][1][0];
		i += strlen(ent[e][0]);
	}
	if (k >= n)
		return false;
	out[k] = 0;
	return true;
}

int s3_list_parse(const char *body, size_t len, struct s3_list_page *pg,
		  int (*key)(void *arg, const char *name, uint64_t size),
		  void *arg)
{
	const char *end = body + len, *p = body, *c, *t;
	char name[S3_KEY_MAX + 1];
	size_t n;

	pg->more = false;
	pg->token[0] = 0;
	if (!memmem(body, len, "<ListBucketResult", 17))
		return fl_err(-EPROTO, "not a ListBucketResult");
	while ((c = xml_text(p, end, "Contents", &n))) {
		const char *ce = c + n;
		char num[24];
		uint64_t size = 0;
		int ret;

		t = xml_text(c, ce, "Key", &n);
		if (!t || !xml_unescape(t, n, name, sizeof(name)))
			return fl_err(-EPROTO, "a <Contents> without a Key "
				      "faultline can read");
		t = xml_text(c, ce, "Size", &n);
		if (!t || !n || n >= sizeof(num) ||
		    strspn(t, "0123456789") < n)
			return fl_err(-EPROTO, "%s: no <Size>", name);
		memcpy(num, t, n);
		num[n] = 0;
		errno = 0;
		size = strtoull(num, NULL, 10);
		if (errno)
			return fl_err(-EPROTO, "%s: <Size> %s", name, num);
		if ((ret = key(arg, name, size)) < 0)
			return ret;
		p = ce;
	}
	t = xml_text(body, end, "IsTruncated", &n);
	pg->more = t && n == 4 && !memcmp(t, "true", 4);
	t = xml_text(body, end, "NextContinuationToken", &n);
	if (pg->more && (!t || !n ||
			 !xml_unescape(t, n, pg->token, sizeof(pg->token))))
		return fl_err(-EPROTO, "truncated, without a "
			      "NextContinuationToken");
	return 0;
}
