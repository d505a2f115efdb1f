/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_req.h - the head of one HTTP/1.x request, parsed (http_req.c): what
 * the metrics responder (ctl.c) needs to answer GET /metrics, and nothing
 * a client sends beyond that is trusted.
 */
#ifndef FAULTLINE_DAEMON_HTTP_REQ_H
#define FAULTLINE_DAEMON_HTTP_REQ_H

#include <stdbool.h>
#include <stddef.h>

/* A request head longer than this is refused (431). */
#define HTTP_HEAD_MAX	8192

struct http_req {
	char method[8];		/* "GET", "HEAD", ... as sent (<= 7 chars) */
	char path[256];		/* the target, query string cut off */
	int minor;		/* HTTP/1.minor */
};

/*
 * Parse the request head at the start of buf (len bytes, not terminated).
 * The head's length once its empty line is in; 0 if more bytes are
 * needed; -EINVAL malformed (400), -E2BIG the head too long (431),
 * -ENAMETOOLONG the target too long (414), -EPROTONOSUPPORT not HTTP/1.x
 * (505).
 */
int http_req_parse(const char *buf, size_t len, struct http_req *r);

/* The status line's code for a parse error (400, 414, 431, 505). */
int http_req_error_status(int err);

#endif
