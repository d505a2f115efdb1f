// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_http.c - the checks an http(s) source makes of a response before it
 * keeps a byte: store/http_xfer.c's on_header() (status line,
 * Content-Range, ETag, Last-Modified), response_ok() and on_body(), and
 * source/http.c's url_name() and set_validator() (If-Match or
 * If-Unmodified-Since, cache key), called as libcurl and the open would.
 *
 * Input: the URL after "http://" up to the first newline; byte 0 of the
 * rest picks the block asked for; then the open's probe response (header
 * lines up to an empty line), the block's response (the same), and the
 * block's body in two writes.  The object's size is the probe's
 * Content-Range total (206 or 416), else 1 MiB + 1.
 *
 * Decision: those functions are static, so this file includes both .c
 * files (the archive's copies stay out of the link); no transfer is made.
 * What must hold: no byte is kept from a response that fails the checks,
 * never more than asked for, and a name never shows the query string.
 */
#include "store/http_xfer.c"
#include "source/http.c"

/* Feed header lines of [*p, end) to x, up to and with an empty line. */
static void headers(struct xfer *x, const char **p, const char *end)
{
	while (*p < end) {
		const char *nl = memchr(*p, '\n', (size_t)(end - *p));
		size_t len = nl ? (size_t)(nl + 1 - *p) : (size_t)(end - *p);
		char *line = malloc(len);
		bool last = len <= 2 && (**p == '\n' || **p == '\r');

		if (!line)
			return;
		memcpy(line, *p, len);
		on_header(line, 1, len, x);
		free(line);
		*p += len;
		if (last)
			return;
	}
}

/* Deliver [p, p + len) as one body write; false once x stops it. */
static bool body(struct xfer *x, const char *p, size_t len)
{
	char *buf;
	bool more;

	if (!len)
		return true;	/* curl never writes nothing */
	buf = malloc(len);
	if (!buf)
		return false;
	memcpy(buf, p, len);
	more = on_body(buf, 1, len, x) == len;
	free(buf);
	return more;
}

static void reset(struct xfer *x, struct source_http *h)
{
	*x = (struct xfer){ .h = &h->o, .start = UINT64_MAX, .end = UINT64_MAX,
			    .total = UINT64_MAX };
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	const char *nl = memchr(p, '\n', size);
	struct source_http h = { 0 };
	struct xfer probe, x;
	char *q;

	if (!nl || nl + 1 == end)
		return 0;
	h.o.url = malloc((size_t)(nl - p) + 8);
	if (!h.o.url)
		return 0;
	snprintf(h.o.url, (size_t)(nl - p) + 8, "http://%.*s", (int)(nl - p), p);
	url_name(h.o.url, h.o.name, sizeof(h.o.name));
	q = strchr(h.o.name, '?');
	if (q && strncmp(q, "?...", strlen(q)))	/* a query string shown */
		abort();
	unsigned int pick = (unsigned char)nl[1];

	p = nl + 2;
	reset(&probe, &h);
	probe.probe = true;
	probe.len = HTTP_PROBE;
	headers(&probe, &p, end);
	h.base.size = h.o.size = (probe.hstatus == 206 ||
				  probe.hstatus == 416) &&
				 probe.total != UINT64_MAX ? probe.total :
				 (1u << 20) + 1;
	if (!h.base.size || set_validator(&h, &probe) < 0)
		goto out;

	uint64_t nblocks = (h.base.size - 1) / HTTP_BLOCK + 1;

	reset(&x, &h);
	x.off = pick % nblocks * HTTP_BLOCK;
	x.len = block_len(&h, x.off / HTTP_BLOCK);
	x.whole = x.len == h.base.size;
	x.dst = malloc(x.len);
	if (!x.dst)
		goto out;
	headers(&x, &p, end);
	size_t half = (size_t)(end - p) / 2;

	if (body(&x, p, half))
		body(&x, p + half, (size_t)(end - p) - half);
	if (!x.checked && (x.hstatus == 200 || x.hstatus == 206))
		response_ok(&x);	/* xfer_done() on a bodiless reply */
	if (x.got > x.len || (x.got && (!x.checked || x.changed)))
		abort();
	free(x.dst);
out:
	curl_slist_free_all(h.o.cond);
	free(h.o.url);
	return 0;
}
