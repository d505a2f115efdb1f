// SPDX-License-Identifier: Apache-2.0
/*
 * http_xfer.c - the transfers from an HTTP(S) origin (http_state.h), for
 * the http source (source/http.c) and the URL chunk store: one reused
 * curl handle per thread, blocks fetched in parallel on a multi handle,
 * every response checked (status, Content-Range, the validator taken at
 * open) before a byte is used, retried with backoff within a deadline.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <xxhash.h>

#include "faultline.h"
#include "util/error.h"
#include "store/http_cache.h"
#include "format/image.h"
#include "store/http_state.h"
#include "util/clock.h"

/* ---- per-thread curl handles -------------------------------------------- */

struct conn {
	CURLM *multi;
	CURL *easy[HTTP_PAR];
	int nfree;
	CURL *free_easy[HTTP_PAR];
};

static pthread_once_t http_once = PTHREAD_ONCE_INIT;
static pthread_key_t conn_key;
static int global_ret;
static uint64_t read_ms = HTTP_READ_MS;
static const char *bad_deadline;	/* HTTP_DEADLINE_ENV's bad value */
static __thread struct conn *tconn;

static void conn_free(void *p)
{
	struct conn *c = p;

	for (int i = 0; i < HTTP_PAR; i++)
		if (c->easy[i])
			curl_easy_cleanup(c->easy[i]);
	curl_multi_cleanup(c->multi);
	free(c);
}

static void http_global_init(void)
{
	const char *v = getenv(HTTP_DEADLINE_ENV);
	unsigned long s;
	char *end;

	global_ret = curl_global_init(CURL_GLOBAL_DEFAULT) ? -ENOMEM : 0;
	pthread_key_create(&conn_key, conn_free);
	if (!v || !*v)
		return;
	errno = 0;
	s = strtoul(v, &end, 10);
	if (errno || *end || !isdigit((unsigned char)*v) || s < 1 || s > 3600)
		bad_deadline = v;
	else
		read_ms = s * 1000ull;
}

int http_init(const char *name)
{
	pthread_once(&http_once, http_global_init);
	if (global_ret < 0)
		return fl_err(global_ret, "%s: cannot initialise libcurl", name);
	if (bad_deadline)
		return fl_err(-EINVAL, "%s=%s: not a number of seconds from 1 "
			      "to 3600", HTTP_DEADLINE_ENV, bad_deadline);
	return 0;
}

uint64_t http_deadline(void)
{
	return now_ns() + read_ms * 1000000ull;
}

static struct conn *conn_get(void)
{
	struct conn *c = tconn;

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->multi = curl_multi_init())) {
		free(c);
		return NULL;
	}
	for (int i = 0; i < HTTP_PAR; i++) {
		c->easy[i] = curl_easy_init();
		if (!c->easy[i]) {
			conn_free(c);
			return NULL;
		}
		c->free_easy[c->nfree++] = c->easy[i];
	}
	pthread_setspecific(conn_key, c);
	tconn = c;
	return c;
}

/* ---- one transfer --------------------------------------------------------- */

static bool changed(struct xfer *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Record why the object is taken to have changed; false, for returning. */
static bool changed(struct xfer *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
	x->changed = true;
	return false;
}

/*
 * Do a block response's headers (200 or 206) describe the object as opened
 * and the range asked for?  If not, x->changed with the reason in x->err.
 */
static bool response_ok(struct xfer *x)
{
	const struct http_origin *h = x->h;
	uint64_t last = x->off + x->len - 1;
	uint64_t size = x->url ? x->size : h->size;

	x->checked = true;
	if (h->etag[0] && x->etag[0] && strcmp(h->etag, x->etag))
		return changed(x, "object changed since it was opened: ETag %s, was %s",
			       x->etag, h->etag);
	if (!h->etag[0] && h->lm[0] && x->lm[0] && strcmp(h->lm, x->lm))
		return changed(x, "object changed since it was opened: Last-Modified %s, was %s",
			       x->lm, h->lm);
	if (x->hstatus == 200 && !x->whole)
		return changed(x, "object changed since it was opened, or the server ignores ranges: HTTP 200 (the whole object) to a range request");
	if (x->hstatus == 206 &&
	    (x->start != x->off || x->end != last ||
	     (x->total != UINT64_MAX && x->total != size))) {
		if (x->start == UINT64_MAX)
			return changed(x, "object changed since it was opened, or the server is broken: HTTP 206 without a Content-Range");
		return changed(x, "object changed since it was opened: HTTP 206 for bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 ", asked for %" PRIu64 "-%" PRIu64 "/%" PRIu64,
			       x->start, x->end, x->total, x->off, last, size);
	}
	return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t bytes = size * n, room = x->len - x->got;

	if (x->hstatus >= 300 ||
	    (!x->probe && x->hstatus != 200 && x->hstatus != 206)) {
		/* an error page: not our bytes; its start for the message */
		size_t keep = sizeof(x->ebody) - 1 - x->elen;

		keep = bytes < keep ? bytes : keep;
		memcpy(x->ebody + x->elen, p, keep);
		x->elen += keep;
		return bytes;
	}
	if (!x->probe) {
		if (!x->checked && !response_ok(x))
			return 0;	/* stop before a byte is kept */
	}
	if (bytes > room) {
		if (!x->probe)
			x->overflow = true;
		memcpy(x->dst + x->got, p, room);
		x->got += room;
		return 0;	/* stop: more than the range asked for */
	}
	memcpy(x->dst + x->got, p, bytes);
	x->got += bytes;
	return bytes;
}

/*
 * Content-Range: "bytes A-B/T", or with T "*" (unknown), or A-B "*" (a
 * 416's).
 */
static void parse_content_range(struct xfer *x, const char *v)
{
	unsigned long long a, b, t;
	int n = 0;

	if (strncasecmp(v, "bytes", 5))
		return;
	v += 5;
	v += strspn(v, " \t");
	if (*v == '*') {
		if (sscanf(v, "*/%llu%n", &t, &n) == 1 && !v[n])
			x->total = t;
		return;
	}
	if (!isdigit((unsigned char)*v) ||
	    sscanf(v, "%llu-%llu/%n", &a, &b, &n) != 2 || !n || a > b)
		return;
	x->start = a;
	x->end = b;
	v += n;
	n = 0;
	if (isdigit((unsigned char)*v) && sscanf(v, "%llu%n", &t, &n) == 1 &&
	    !v[n])
		x->total = t;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n, vlen;
	char line[256];
	char *v;

	if (len >= sizeof(line))
		return len;
	memcpy(line, p, len);
	line[len] = 0;
	line[strcspn(line, "\r\n")] = 0;
	if (!strncasecmp(line, "HTTP/", 5)) {
		/* a new response (redirect): forget the last one's headers */
		v = strchr(line, ' ');
		x->hstatus = v ? strtol(v + 1, NULL, 10) : 0;
		x->start = x->end = x->total = UINT64_MAX;
		x->etag[0] = 0;
		x->lm[0] = 0;
		return len;
	}
	v = strchr(line, ':');
	if (!v)
		return len;
	*v++ = 0;
	v += strspn(v, " \t");
	vlen = strlen(v);
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		v[--vlen] = 0;
	if (!strcasecmp(line, "Content-Range")) {
		parse_content_range(x, v);
	} else if (!strcasecmp(line, "ETag")) {
		if (vlen < sizeof(x->etag))
			memcpy(x->etag, v, vlen + 1);
	} else if (!strcasecmp(line, "Last-Modified")) {
		if (vlen < sizeof(x->lm))
			memcpy(x->lm, v, vlen + 1);
	}
	return len;
}

/*
 * An s3:// source's request: signed by libcurl (AWS Signature V4) over
 * its headers, Range among them (set as a header, not CURLOPT_RANGE,
 * so that it is signed), and the precondition.  0 or -ENOMEM.
 */
static int sign_s3(CURL *e, struct xfer *x)
{
	const struct s3_target *t = x->h->s3;
	struct curl_slist *l;
	char line[64];

	for (l = t->headers; l; l = l->next)
		if (!(x->hdrs = curl_slist_append(x->hdrs, l->data)))
			return -ENOMEM;
	if (!x->probe && x->h->cond &&
	    !(x->hdrs = curl_slist_append(x->hdrs, x->h->cond->data)))
		return -ENOMEM;
	snprintf(line, sizeof(line), "Range: bytes=%s", x->range);
	if (!(x->hdrs = curl_slist_append(x->hdrs, line)))
		return -ENOMEM;
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(e, CURLOPT_AWS_SIGV4, t->sigv4);
	curl_easy_setopt(e, CURLOPT_USERNAME, t->key_id);
	curl_easy_setopt(e, CURLOPT_PASSWORD, t->secret);
	/* a redirect (another region) is an error to show, not to follow */
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	return 0;
}

static void free_hdrs(struct xfer *x)
{
	curl_slist_free_all(x->hdrs);	/* a session token's copy too */
	x->hdrs = NULL;
}

static int xfer_start(struct conn *c, struct xfer *x)
{
	CURL *e = c->free_easy[--c->nfree];

	x->easy = e;
	x->got = 0;
	x->overflow = false;
	x->checked = false;
	x->changed = false;
	x->status = 0;
	x->err[0] = 0;
	x->hstatus = 0;
	x->start = x->end = x->total = UINT64_MAX;
	x->etag[0] = 0;
	x->lm[0] = 0;
	x->elen = 0;
	snprintf(x->range, sizeof(x->range), "%" PRIu64 "-%" PRIu64, x->off,
		 x->off + x->len - 1);
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, x->url ? x->url : x->h->url);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	if (!x->h->s3)
		curl_easy_setopt(e, CURLOPT_RANGE, x->range);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->err);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, HTTP_TRY_MS);
	if (!x->probe && x->h->cond)
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->h->cond);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 10L);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L << 10);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "faultline/" "0.1");
	if ((x->h->s3 && sign_s3(e, x) < 0) ||
	    curl_multi_add_handle(c->multi, e) != CURLM_OK) {
		free_hdrs(x);
		c->free_easy[c->nfree++] = e;
		x->easy = NULL;
		return -ENOMEM;
	}
	x->state = X_RUN;
	return 0;
}

static bool retryable_curl(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

/* A finished transfer: done, to be retried, or failed (message in err). */
static void xfer_done(struct xfer *x, CURLcode cc)
{
	bool retry;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
	x->clen = -1;
	curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &x->clen);
	if (x->probe && cc == CURLE_WRITE_ERROR && !x->overflow)
		cc = CURLE_OK;	/* we stopped it: the first bytes are in */
	if (!x->probe && !x->changed && x->status == 412)
		changed(x, "object changed since it was opened: HTTP 412 to %s",
			x->h->cond ? x->h->cond->data : "no precondition");
	else if (!x->probe && !x->changed && !x->checked && cc == CURLE_OK &&
		 (x->status == 200 || x->status == 206))
		response_ok(x);
	if (x->changed) {
		memcpy(x->err, x->why, sizeof(x->err));
		x->tries++;	/* count this try in the message */
		x->state = X_FAIL;
		return;
	}
	if (cc != CURLE_OK) {
		if (x->overflow) {
			snprintf(x->err, sizeof(x->err),
				 "HTTP %ld: the server ignored the range request",
				 x->status);
			retry = false;
		} else {
			if (!x->err[0])
				snprintf(x->err, sizeof(x->err), "%s",
					 curl_easy_strerror(cc));
			retry = retryable_curl(cc);
		}
	} else if ((x->probe && x->status < 500 && x->status != 429) ||
		   (x->status == 206 && x->got == x->len) ||
		   (x->status == 200 && x->whole && x->got == x->len)) {
		x->state = X_DONE;
		return;
	} else if (x->status == 206 || x->status == 200) {
		snprintf(x->err, sizeof(x->err),
			 "HTTP %ld with %zu bytes, expected %zu", x->status,
			 x->got, x->len);
		retry = x->status == 206;
	} else {
		http_status_text(x, x->err, sizeof(x->err));
		retry = x->status >= 500 || x->status == 429;
	}
	if (retry && ++x->tries < HTTP_TRIES) {
		x->state = X_WAIT;
		x->not_before = now_ns() +
			((uint64_t)HTTP_BACKOFF_MS * 1000000ull <<
			 (x->tries - 1));
		note_rate(x->h->note, "%s: bytes %llu-%llu: %s; try %d of "
			  "%d in %u ms", x->h->name,
			  (unsigned long long)x->off,
			  (unsigned long long)(x->off + x->len - 1), x->err,
			  x->tries + 1, HTTP_TRIES,
			  HTTP_BACKOFF_MS << (x->tries - 1));
	} else {
		if (!retry)
			x->tries++;	/* count this try in the message */
		x->state = X_FAIL;
	}
}

bool http_status_text(const struct xfer *x, char *buf, size_t n)
{
	char code[64];
	const char *hint;

	if (!s3_error_code(x->ebody, x->elen, code, sizeof(code))) {
		snprintf(buf, n, "HTTP status %ld", x->status);
		return false;
	}
	hint = s3_error_hint(code);
	snprintf(buf, n, "HTTP status %ld, %s%s%s%s", x->status, code,
		 hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
	return true;
}

static void xfer_stop(struct conn *c, struct xfer *x)
{
	curl_multi_remove_handle(c->multi, x->easy);
	free_hdrs(x);
	c->free_easy[c->nfree++] = x->easy;
	x->easy = NULL;
}

/* The deadline passed: every transfer not done fails, late. */
static void fail_late(struct conn *c, struct xfer *xs, int n)
{
	for (int i = 0; i < n; i++) {
		struct xfer *x = &xs[i];

		if (x->state != X_WAIT && x->state != X_RUN)
			continue;
		if (x->state == X_RUN) {
			xfer_stop(c, x);
			x->tries++;
		}
		snprintf(x->err, sizeof(x->err), "not read within %llu s",
			 (unsigned long long)(read_ms / 1000));
		x->late = true;
		x->state = X_FAIL;
	}
}

/*
 * The fetch is over: transfers still running stopped, and its result:
 * 0, or the first failure by offset (one whose object changed first).
 */
static int fetch_end(struct http_origin *h, struct conn *c, struct xfer *xs,
		     int n)
{
	struct xfer *bad = NULL;

	for (int i = 0; i < n; i++) {
		struct xfer *x = &xs[i];

		if (x->state == X_RUN) {
			xfer_stop(c, x);
			x->state = X_GONE;
		} else if (x->state == X_WAIT) {
			x->state = X_GONE;
		}
		if (x->state == X_FAIL && (!bad || x->off < bad->off ||
		    (x->changed && !bad->changed)))
			bad = x;
	}
	if (!bad)
		return 0;
	if (bad->changed)
		return fl_err(-EIO, "%s: bytes %" PRIu64 "-%" PRIu64 " not used: %s",
			      h->name, bad->off, bad->off + bad->len - 1,
			      bad->err);
	return fl_err(bad->late ? -ETIMEDOUT : -EIO,
		      "%s: bytes %" PRIu64 "-%" PRIu64 ": %s (%d %s)", h->name,
		      bad->off, bad->off + bad->len - 1, bad->err, bad->tries,
		      bad->tries == 1 ? "try" : "tries");
}

/*
 * Run the n transfers to completion, up to HTTP_PAR at a time on this
 * thread's multi handle, by deadline (ns, monotonic).  0, or -EIO naming
 * the first failure; once one has failed for good the others are dropped
 * (X_GONE), since the read fails anyway.
 */
int http_fetch(struct http_origin *h, struct xfer *xs, int n,
		 uint64_t deadline)
{
	struct conn *c = conn_get();
	int left = n, running = 0;
	bool failed = false;

	if (!c)
		return fl_err(-ENOMEM, "%s: cannot set up libcurl", h->name);
	for (int i = 0; i < n; i++) {
		xs[i].h = h;
		xs[i].tries = 0;
		xs[i].late = false;
		xs[i].not_before = 0;
		xs[i].state = X_WAIT;
	}
	while (left && !failed) {
		uint64_t now = now_ns(), wake;
		struct CURLMsg *m;
		int still, q, timeout;
		bool startable = false;

		if (now >= deadline) {
			fail_late(c, xs, n);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct xfer *x = &xs[i];

			if (x->state != X_WAIT || x->not_before > now ||
			    running >= HTTP_PAR || !c->nfree)
				continue;
			if (xfer_start(c, x) == 0) {
				running++;
			} else {
				snprintf(x->err, sizeof(x->err),
					 "cannot start a transfer");
				x->state = X_FAIL;
				failed = true;
				left--;
			}
		}
		curl_multi_perform(c->multi, &still);
		while ((m = curl_multi_info_read(c->multi, &q))) {
			struct xfer *x;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  (char **)&x);
			xfer_done(x, m->data.result);
			xfer_stop(c, x);
			running--;
			if (x->state == X_DONE || x->state == X_FAIL)
				left--;
			if (x->state == X_FAIL)
				failed = true;
		}
		if (!left || failed)
			break;
		/*
		 * Sleep until a socket is ready, curl's own timers, the next
		 * retry or the deadline - but not at all if a transfer is due
		 * and a handle is free.  A due transfer waiting for a handle
		 * must not count: its wake time is past, and would spin.
		 */
		now = now_ns();
		wake = deadline < now + 1000000000ull ? deadline :
			now + 1000000000ull;
		for (int i = 0; i < n; i++) {
			struct xfer *x = &xs[i];

			if (x->state != X_WAIT)
				continue;
			if (x->not_before > now) {
				if (x->not_before < wake)
					wake = x->not_before;
			} else if (running < HTTP_PAR && c->nfree) {
				startable = true;
			}
		}
		if (startable || wake <= now)
			continue;
		timeout = (int)((wake - now) / 1000000) + 1;
		if (running && timeout > 100)
			timeout = 100;
		curl_multi_poll(c->multi, NULL, 0, timeout, NULL);
	}
	return fetch_end(h, c, xs, n);
}

