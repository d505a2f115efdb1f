/*
 * http.c - a raw memory file or an image behind an http:// or
 * https:// URL, read with HTTP range requests through libcurl.
 *
 * Decisions: the object is read in fixed 512 KiB aligned blocks (as AWS
 * Lambda's snapshot loader does), so the local cache (http_cache.c) and a
 * small in-memory cache of recent blocks (for reads of part of a block:
 * the engine's 64 KiB chunks, an image's compressed chunks) both work per
 * block.  A read needing several blocks requests them concurrently on one
 * curl multi handle per thread (up to HTTP_PAR at once), so prefetch gets
 * bandwidth; the handles are thread-local and reused, so connections stay
 * open across reads (engine threads read concurrently, each on its own).
 * Connection errors, stalls, 5xx and 429 are retried with exponential
 * backoff (5 tries, 50 ms doubling); anything else, or the last try, fails
 * the read with -EIO and one line naming the URL, and the engine applies
 * its failure policy - a block is used only if it arrived whole with 206
 * (or 200 for a one-block object).  Deadlines: one try of a block may take
 * 30 s (CURLOPT_TIMEOUT_MS; stalls are cut sooner by the low-speed limit)
 * and one read 120 s in all, retries included, so a dead or crawling
 * server ends in the failure policy, not in a stall of the faulting thread.
 *
 * The object must not change under a restore.  Its validator is learnt at
 * open: a strong ETag is sent as If-Match with every block GET, else its
 * Last-Modified as If-Unmodified-Since (one-second resolution: a same-size
 * replacement within the second of the original is not seen - use a
 * server with ETags).  A 412, a 200 to a request for part of the object
 * (a one-block object may come whole, if its validator matches), a 206 whose
 * Content-Range is not exactly the range asked for (start, end, and total
 * when given), or a response whose ETag (else Last-Modified) differs from
 * the one at open fails the read at once with -EIO and "object changed"
 * naming the URL, no retry; such bytes are never served nor cached.  The
 * local cache is keyed by the validator, so a new open of a changed
 * object never sees the old object's blocks.  A server that gives no
 * validator usable as a precondition (no strong ETag, no Last-Modified)
 * gets no local cache: the cache directory is ignored for that URL,
 * silently (reads are still checked as above where possible).
 * The URL is passed to libcurl untouched
 * (presigned S3 URLs work as they are, no auth of our own), but messages
 * name it without its query string and user info, which carry secrets.
 * The size is learnt with a ranged GET of the first 4 KiB (a presigned GET
 * URL refuses HEAD), whose bytes also tell an image by its magic: an image
 * is then read through image.c layered over this source.
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
#include "source/http_cache.h"
#include "format/image.h"
#include "source/impl.h"
#include "util/clock.h"

#define HTTP_BLOCK	(512u << 10)
#define HTTP_PAR	8		/* concurrent requests per read */
#define HTTP_TRIES	5
#define HTTP_BACKOFF_MS	50		/* doubling after each failed try */
#define HTTP_PROBE	4096		/* bytes read at open */
#define HTTP_SLOTS	16		/* in-memory blocks for partial reads */
#define HTTP_BATCH	32		/* blocks handled per round of a read */
#define HTTP_TRY_MS	30000L		/* one try of one block, in all */
#define HTTP_READ_MS	120000ull	/* one read (or the open), in all */

enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

struct xfer_slot {
	void *buf;		/* HTTP_BLOCK bytes, allocated on first use */
	uint64_t block;
	uint64_t used;		/* LRU clock */
	unsigned int pins;
	int state;
};

struct source_http {
	struct fl_source base;
	char *url;		/* as given: passed to libcurl untouched */
	char name[192];		/* for messages: no query string, no user */
	uint64_t key;		/* the object's name in the local cache */
	char etag[128];		/* the object's ETag at open, "" none */
	char lm[64];		/* its Last-Modified at open, "" none */
	struct curl_slist *cond; /* If-Match or If-Unmodified-Since; NULL none */
	struct http_cache *cache;
	pthread_mutex_t mu;	/* guards the slots' bookkeeping */
	uint64_t clock;
	struct xfer_slot slots[HTTP_SLOTS];
};

#define to_http(s) ((struct source_http *)(s))

/* One ranged GET in flight or waiting for its retry. */
struct xfer {
	struct source_http *h;
	uint64_t off;		/* object offset */
	char *dst;
	size_t len, got;
	bool whole;		/* the range is the whole object (200 is fine) */
	bool probe;		/* open: keep headers, stop after len bytes */
	bool overflow;
	bool checked;		/* the response's headers were checked */
	bool changed;		/* ... and tell of a changed object (err) */
	int tries;
	uint64_t not_before;	/* ns, monotonic: backoff */
	int state;		/* X_WAIT, X_RUN, X_DONE, X_FAIL */
	CURL *easy;
	long status;
	char range[48];
	char err[CURL_ERROR_SIZE];
	char why[CURL_ERROR_SIZE]; /* changed(): curl may yet write err */
	/* the last response's headers (a redirect's are forgotten) */
	long hstatus;		/* from its status line */
	uint64_t start, end;	/* from Content-Range, UINT64_MAX unknown */
	uint64_t total;		/* from Content-Range, UINT64_MAX unknown */
	curl_off_t clen;	/* Content-Length, -1 unknown */
	char etag[128];		/* "" none */
	char lm[64];		/* "" none */
};

/* X_GONE: cancelled because another transfer of the read failed */
enum { X_WAIT, X_RUN, X_DONE, X_FAIL, X_GONE };

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
	global_ret = curl_global_init(CURL_GLOBAL_DEFAULT) ? -ENOMEM : 0;
	pthread_key_create(&conn_key, conn_free);
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
	const struct source_http *h = x->h;
	uint64_t last = x->off + x->len - 1;

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
	     (x->total != UINT64_MAX && x->total != h->base.size))) {
		if (x->start == UINT64_MAX)
			return changed(x, "object changed since it was opened, or the server is broken: HTTP 206 without a Content-Range");
		return changed(x, "object changed since it was opened: HTTP 206 for bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 ", asked for %" PRIu64 "-%" PRIu64 "/%" PRIu64,
			       x->start, x->end, x->total, x->off, last,
			       h->base.size);
	}
	return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t bytes = size * n, room = x->len - x->got;

	if (!x->probe) {
		if (x->hstatus != 200 && x->hstatus != 206)
			return bytes;	/* an error page: not our bytes */
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
	snprintf(x->range, sizeof(x->range), "%" PRIu64 "-%" PRIu64, x->off,
		 x->off + x->len - 1);
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, x->h->url);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
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
	if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
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
		snprintf(x->err, sizeof(x->err), "HTTP status %ld", x->status);
		retry = x->status >= 500 || x->status == 429;
	}
	if (retry && ++x->tries < HTTP_TRIES) {
		x->state = X_WAIT;
		x->not_before = now_ns() +
			((uint64_t)HTTP_BACKOFF_MS * 1000000ull <<
			 (x->tries - 1));
	} else {
		if (!retry)
			x->tries++;	/* count this try in the message */
		x->state = X_FAIL;
	}
}

static void xfer_stop(struct conn *c, struct xfer *x)
{
	curl_multi_remove_handle(c->multi, x->easy);
	c->free_easy[c->nfree++] = x->easy;
	x->easy = NULL;
}

/*
 * Run the n transfers to completion, up to HTTP_PAR at a time on this
 * thread's multi handle, by deadline (ns, monotonic).  0, or -EIO naming
 * the first failure; once one has failed for good the others are dropped
 * (X_GONE), since the read fails anyway.
 */
static int fetch_blocks(struct source_http *h, struct xfer *xs, int n,
		 uint64_t deadline)
{
	struct conn *c = conn_get();
	int left = n, running = 0;
	bool failed = false;
	struct xfer *bad = NULL;

	if (!c)
		return fl_err(-ENOMEM, "%s: cannot set up libcurl", h->name);
	for (int i = 0; i < n; i++) {
		xs[i].h = h;
		xs[i].tries = 0;
		xs[i].not_before = 0;
		xs[i].state = X_WAIT;
	}
	while (left && !failed) {
		uint64_t now = now_ns(), wake;
		struct CURLMsg *m;
		int still, q, timeout;
		bool startable = false;

		if (now >= deadline) {
			for (int i = 0; i < n; i++) {
				struct xfer *x = &xs[i];

				if (x->state != X_WAIT && x->state != X_RUN)
					continue;
				if (x->state == X_RUN) {
					xfer_stop(c, x);
					x->tries++;
				}
				snprintf(x->err, sizeof(x->err),
					 "not read within %llu s",
					 HTTP_READ_MS / 1000);
				x->state = X_FAIL;
			}
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
	return fl_err(-EIO, "%s: bytes %" PRIu64 "-%" PRIu64 ": %s (%d %s)",
		      h->name, bad->off, bad->off + bad->len - 1, bad->err,
		      bad->tries, bad->tries == 1 ? "try" : "tries");
}

/* ---- reads ---------------------------------------------------------------- */

/* What one block of a read needs. */
struct piece {
	uint64_t block;
	size_t blen;		/* the block's length (the last may be short) */
	size_t from, n;		/* the part of the block the read wants */
	char *out;		/* where that part goes */
	char *dst;		/* where the whole block is fetched to */
	struct xfer_slot *slot;	/* dst is this slot's buffer */
	bool tmp;		/* dst is a private buffer */
	bool have;
};

static size_t block_len(const struct source_http *h, uint64_t b)
{
	uint64_t start = b * HTTP_BLOCK, left = h->base.size - start;

	return left < HTTP_BLOCK ? (size_t)left : HTTP_BLOCK;
}

/* Serve p from memory, or claim a slot for it (mu held). */
static void plan_piece(struct source_http *h, struct piece *p)
{
	struct xfer_slot *victim = NULL;

	for (int k = 0; k < HTTP_SLOTS; k++) {
		struct xfer_slot *sl = &h->slots[k];

		if (sl->state == SLOT_READY && sl->block == p->block) {
			sl->pins++;
			sl->used = ++h->clock;
			p->slot = sl;
			p->have = true;
			return;
		}
		if (!sl->pins && sl->state != SLOT_FILLING &&
		    (!victim || sl->state == SLOT_EMPTY ||
		     (victim->state == SLOT_READY && sl->used < victim->used)))
			victim = sl;
	}
	if (p->n == p->blen)
		return;		/* fetched straight into the caller's buffer */
	if (victim && (victim->buf || (victim->buf = malloc(HTTP_BLOCK)))) {
		victim->state = SLOT_FILLING;
		victim->block = p->block;
		victim->pins = 1;
		p->slot = victim;
		p->dst = victim->buf;
	}
}

static int read_pieces(struct source_http *h, struct piece *ps, int np,
		      uint64_t deadline)
{
	struct xfer xs[HTTP_BATCH];
	int nx = 0, ret = 0;

	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < np; i++)
		plan_piece(h, &ps[i]);
	pthread_mutex_unlock(&h->mu);

	for (int i = 0; i < np; i++) {
		struct piece *p = &ps[i];

		if (p->have) {
			memcpy(p->out, (char *)p->slot->buf + p->from, p->n);
			continue;
		}
		if (!p->dst && p->n == p->blen) {
			p->dst = p->out;
		} else if (!p->dst) {
			p->dst = malloc(p->blen);
			p->tmp = true;
			if (!p->dst) {
				ret = -ENOMEM;
				goto out;
			}
		}
		if (h->cache && http_cache_get(h->cache, h->key, p->block,
					       p->dst, p->blen)) {
			p->have = true;
			continue;
		}
		xs[nx] = (struct xfer){
			.off = p->block * HTTP_BLOCK, .dst = p->dst,
			.len = p->blen, .whole = p->blen == h->base.size,
		};
		nx++;
	}
	if (nx)
		ret = fetch_blocks(h, xs, nx, deadline);
	for (int i = 0, k = 0; i < np; i++) {
		struct piece *p = &ps[i];

		if (p->have)
			continue;
		if (xs[k++].state != X_DONE)
			continue;
		p->have = true;
		if (h->cache)
			http_cache_put(h->cache, h->key, p->block, p->dst,
				       p->blen);
	}
	for (int i = 0; i < np; i++) {
		struct piece *p = &ps[i];

		if (p->have && p->dst && p->dst != p->out)
			memcpy(p->out, p->dst + p->from, p->n);
	}
out:
	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < np; i++) {
		struct xfer_slot *sl = ps[i].slot;

		if (!sl)
			continue;
		if (sl->state == SLOT_FILLING) {
			sl->state = ps[i].have ? SLOT_READY : SLOT_EMPTY;
			sl->used = ++h->clock;
		}
		sl->pins--;
	}
	pthread_mutex_unlock(&h->mu);
	for (int i = 0; i < np; i++)
		if (ps[i].tmp)
			free(ps[i].dst);
	return ret;
}

static int http_read(struct fl_source *s, void *buf, size_t len, uint64_t off)
{
	struct source_http *h = to_http(s);
	struct piece ps[HTTP_BATCH];
	uint64_t deadline = now_ns() + HTTP_READ_MS * 1000000ull;
	char *out = buf;

	if (off > s->size || len > s->size - off)
		return -ERANGE;
	while (len) {
		int np = 0, ret;

		while (len && np < HTTP_BATCH) {
			struct piece *p = &ps[np++];
			uint64_t b = off / HTTP_BLOCK;

			*p = (struct piece){ .block = b, .blen = block_len(h, b),
					     .from = off - b * HTTP_BLOCK,
					     .out = out };
			p->n = p->blen - p->from < len ? p->blen - p->from :
							 len;
			out += p->n;
			off += p->n;
			len -= p->n;
		}
		ret = read_pieces(h, ps, np, deadline);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static void http_destroy(struct fl_source *s)
{
	struct source_http *h = to_http(s);

	for (int k = 0; k < HTTP_SLOTS; k++)
		free(h->slots[k].buf);
	http_cache_close(h->cache);
	curl_slist_free_all(h->cond);
	pthread_mutex_destroy(&h->mu);
	free(h->url);
	free(h);
}

static const struct fl_source_ops http_ops = {
	.name = "http",
	.read = http_read,
	.destroy = http_destroy,
};

/* ---- open ----------------------------------------------------------------- */

/* The URL for messages: no user info, no query string, no fragment. */
static void url_name(const char *url, char *buf, size_t n)
{
	const char *host = strstr(url, "://");
	const char *at, *path;
	size_t keep;

	host = host ? host + 3 : url;
	path = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t)(path - host));
	keep = strcspn(url, "?#");
	if (at)
		snprintf(buf, n, "%.*s%.*s", (int)(host - url), url,
			 (int)(url + keep - (at + 1)), at + 1);
	else
		snprintf(buf, n, "%.*s", (int)keep, url);
	if (url[keep] == '?')
		snprintf(buf + strlen(buf), n - strlen(buf), "?...");
}

/* Query parameters that sign a URL rather than name the object. */
static bool signing_param(const char *p, size_t len)
{
	static const char *const prefixes[] = {
		"X-Amz-", "X-Goog-", "AWSAccessKeyId=", "Signature=",
		"Expires=", "Policy=", "Key-Pair-Id=", "GoogleAccessId=",
	};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++) {
		size_t pl = strlen(prefixes[i]);

		if (len >= pl && !strncasecmp(p, prefixes[i], pl))
			return true;
	}
	return false;
}

/*
 * The object's cache key: its URL without signing parameters (a presigned
 * URL is re-signed for every restore), its size, and its validator.
 */
static uint64_t cache_key(const char *url, uint64_t size,
			  const char *validator)
{
	XXH64_state_t *st = XXH64_createState();
	size_t q = strcspn(url, "?#");
	const char *p = url + q;
	uint64_t key;

	XXH64_reset(st, 0);
	XXH64_update(st, url, q);
	if (*p == '?') {
		p++;
		while (*p && *p != '#') {
			size_t n = strcspn(p, "&#");

			if (!signing_param(p, n)) {
				XXH64_update(st, "&", 1);
				XXH64_update(st, p, n);
			}
			p += n;
			if (*p == '&')
				p++;
		}
	}
	XXH64_update(st, &size, sizeof(size));
	XXH64_update(st, validator, strlen(validator));
	key = XXH64_digest(st);
	XXH64_freeState(st);
	return key;
}

/*
 * Keep the probe's ETag and Last-Modified, make the precondition header
 * every block GET carries, and the cache key.
 */
static int set_validator(struct source_http *h, const struct xfer *x)
{
	char line[sizeof(h->etag) + 32], validator[sizeof(h->etag) + 8];

	memcpy(h->etag, x->etag, sizeof(h->etag));
	memcpy(h->lm, x->lm, sizeof(h->lm));
	line[0] = 0;
	if (h->etag[0] && strncmp(h->etag, "W/", 2))
		snprintf(line, sizeof(line), "If-Match: %s", h->etag);
	else if (h->lm[0])	/* If-Match compares strongly: never a weak tag */
		snprintf(line, sizeof(line), "If-Unmodified-Since: %s", h->lm);
	if (line[0] && !(h->cond = curl_slist_append(NULL, line)))
		return -ENOMEM;
	/* as before these checks, so existing caches stay valid */
	if (h->etag[0])
		snprintf(validator, sizeof(validator), "etag %s", h->etag);
	else if (h->lm[0])
		snprintf(validator, sizeof(validator), "lm %s", h->lm);
	else
		validator[0] = 0;
	h->key = cache_key(h->url, h->base.size, validator);
	return 0;
}

int source_http_open(const char *url, const struct fl_source_opts *o,
		     struct fl_source **out)
{
	struct source_http *h;
	char first[HTTP_PROBE];
	struct xfer x;
	uint64_t size;
	int ret;

	pthread_once(&http_once, http_global_init);
	if (global_ret < 0)
		return fl_err(global_ret, "%s: cannot initialise libcurl",
			      url);
	h = calloc(1, sizeof(*h));
	if (!h || !(h->url = strdup(url))) {
		free(h);
		return -ENOMEM;
	}
	url_name(url, h->name, sizeof(h->name));
	pthread_mutex_init(&h->mu, NULL);
	source_init(&h->base, &http_ops, 0, h->name);

	x = (struct xfer){ .off = 0, .dst = first, .len = sizeof(first),
			   .probe = true };
	ret = fetch_blocks(h, &x, 1, now_ns() + HTTP_READ_MS * 1000000ull);
	if (ret < 0) {
		if (x.status >= 400)
			fl_err(-EIO, "%s: HTTP status %ld at open (expected 206, or 200 with a length)",
			       h->name, x.status);
		goto fail;
	}
	if (x.status == 206 && x.total != UINT64_MAX) {
		size = x.total;
	} else if (x.status == 200) {
		if (x.clen < 0) {
			ret = fl_err(-EIO, "%s: HTTP 200 without a length at open",
				     h->name);
			goto fail;
		}
		size = (uint64_t)x.clen;
	} else if (x.status == 416 && x.total != UINT64_MAX) {
		size = x.total;	/* shorter than the probe */
	} else {
		ret = fl_err(-EIO, "%s: HTTP status %ld at open (expected 206, or 200 with a length)",
			     h->name, x.status);
		goto fail;
	}
	h->base.size = size;
	ret = set_validator(h, &x);
	if (ret < 0)
		goto fail;
	if (o->cache_dir && h->cond) {
		ret = http_cache_open(o->cache_dir, o->cache_max_bytes ?
				      o->cache_max_bytes : FL_DEFAULT_CACHE_MAX,
				      &h->cache);
		if (ret < 0)
			goto fail;
	}
	if (size >= IMAGE_MAGIC_LEN && x.got >= IMAGE_MAGIC_LEN &&
	    !memcmp(first, IMAGE_MAGIC, IMAGE_MAGIC_LEN))
		return source_image_over(&h->base, h->name, out);
	*out = &h->base;
	return 0;
fail:
	http_destroy(&h->base);
	return ret;
}
