// SPDX-License-Identifier: Apache-2.0
/*
 * http_req.c - parse the head of an HTTP/1.x request: the request line and
 * the header lines up to the empty one, every byte checked (RFC 9112).
 *
 * Decision: a parser of the head alone, without a body or any header's
 * value: the metrics responder answers GET and HEAD of one path and closes
 * the connection, so nothing a client sends decides more than which
 * answer it gets.  It is a pure function of the bytes (no socket, no
 * allocation), so that libFuzzer (fuzz/fuzz_http_req.c) drives it whole.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "daemon/http_req.h"

/* RFC 9110 tchar: what a method and a header name are made of. */
static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Visible ASCII, what a request target may hold. */
static bool is_vchar(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

/*
 * The end of the line starting at p (the index of its '\n'), or -1 if none
 * is in [p, len).  A bare CR inside a line is malformed: -2.
 */
static long line_end(const char *buf, size_t len, size_t p)
{
	for (size_t i = p; i < len; i++) {
		if (buf[i] == '\n')
			return (long)i;
		if (buf[i] == '\r' && i + 1 < len && buf[i + 1] != '\n')
			return -2;
	}
	return -1;
}

/* The line [p, e) without its CR. */
static size_t line_len(const char *buf, size_t p, size_t e)
{
	return e > p && buf[e - 1] == '\r' ? e - p - 1 : e - p;
}

/* "METHOD SP TARGET SP HTTP/1.x": 0 or -errno. */
static int parse_request_line(const char *l, size_t n, struct http_req *r)
{
	size_t i = 0, m = 0, t = 0;

	while (i < n && is_tchar((unsigned char)l[i])) {
		if (m + 1 >= sizeof(r->method))
			return -EINVAL;
		r->method[m++] = l[i++];
	}
	r->method[m] = 0;
	if (!m || i >= n || l[i++] != ' ')
		return -EINVAL;
	bool query = false;

	while (i < n && is_vchar((unsigned char)l[i])) {
		if (l[i] == '?' || l[i] == '#')
			query = true;
		if (!query && t + 1 >= sizeof(r->path))
			return -ENAMETOOLONG;
		if (!query)
			r->path[t++] = l[i];
		i++;
	}
	r->path[t] = 0;
	if (!t || i >= n || l[i++] != ' ')
		return -EINVAL;
	if (n - i != 8 || memcmp(l + i, "HTTP/", 5) || l[i + 6] != '.' ||
	    l[i + 5] < '0' || l[i + 5] > '9' || l[i + 7] < '0' || l[i + 7] > '9')
		return -EINVAL;
	if (l[i + 5] != '1')
		return -EPROTONOSUPPORT;
	r->minor = l[i + 7] - '0';
	return 0;
}

/* "name: value": a token, a colon, then visible bytes, blanks, obs-text. */
static int check_header(const char *l, size_t n)
{
	size_t i = 0;

	while (i < n && is_tchar((unsigned char)l[i]))
		i++;
	if (!i || i >= n || l[i] != ':')
		return -EINVAL;
	for (i++; i < n; i++) {
		unsigned char c = (unsigned char)l[i];

		if (c < 0x20 && c != '\t')
			return -EINVAL;
		if (c == 0x7f)
			return -EINVAL;
	}
	return 0;
}

int http_req_parse(const char *buf, size_t len, struct http_req *r)
{
	size_t p = 0;
	int ret;

	memset(r, 0, sizeof(*r));
	for (int lineno = 0;; lineno++) {
		long e = line_end(buf, len, p);

		if (e == -2)
			return -EINVAL;
		if (e < 0)
			return len >= HTTP_HEAD_MAX ? -E2BIG : 0;
		if ((size_t)e + 1 > HTTP_HEAD_MAX)
			return -E2BIG;
		size_t n = line_len(buf, p, (size_t)e);

		if (lineno == 0)
			ret = parse_request_line(buf + p, n, r);
		else if (!n)
			return e + 1;	/* the empty line: the head is whole */
		else
			ret = check_header(buf + p, n);
		if (ret < 0)
			return ret;
		p = (size_t)e + 1;
	}
}

int http_req_error_status(int err)
{
	switch (err) {
	case -E2BIG:
		return 431;
	case -ENAMETOOLONG:
		return 414;
	case -EPROTONOSUPPORT:
		return 505;
	default:
		return 400;
	}
}
