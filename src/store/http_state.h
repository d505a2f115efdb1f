/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_state.h - an HTTP(S) origin and a transfer from it (http_xfer.c),
 * shared by the http source (source/http.c), the URL chunk store
 * (http_store.c) and the bucket's (s3_store.c).
 */
#ifndef FAULTLINE_STORE_HTTP_STATE_H
#define FAULTLINE_STORE_HTTP_STATE_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/http_cache.h"
#include "store/s3.h"
#include "util/note.h"

#define HTTP_BLOCK	(512u << 10)
#define HTTP_PAR	8		/* concurrent requests per read */
#define HTTP_TRIES	5
#define HTTP_BACKOFF_MS	50		/* doubling after each failed try */
#define HTTP_PROBE	4096		/* bytes read at open */
#define HTTP_BATCH	32		/* blocks handled per round of a read */
#define HTTP_TRY_MS	30000L		/* one try of one block, in all */
#define HTTP_READ_MS	120000ull	/* one read (or the open), in all */
#define HTTP_DEADLINE_ENV "FAULTLINE_HTTP_DEADLINE" /* s: HTTP_READ_MS's */

/*
 * An object (or a prefix of objects) at a URL, and how to reach it: what
 * every transfer of it needs.  The http source (source/http.c) holds one
 * for its object, a URL or bucket store (http_store.c, bucket.c) one for
 * its prefix.
 */
struct http_origin {
	char *url;		/* as given: passed to libcurl untouched */
	char name[192];		/* for messages: no query string, no user;
				 * an s3:// source's spec */
	struct s3_target *s3;	/* s3://: how requests are signed; else NULL */
	uint64_t size;		/* the object's size (a source's) */
	char etag[128];		/* the object's ETag at open, "" none */
	char lm[64];		/* its Last-Modified at open, "" none */
	struct curl_slist *cond; /* If-Match or If-Unmodified-Since; NULL none */
	struct http_cache *cache;
	struct note *note;	/* the owner's notes (a retry), or NULL */
};


/* One ranged GET in flight or waiting for its retry. */
struct xfer {
	struct http_origin *h;
	const char *url;	/* another object than h's (a store's), or NULL */
	uint64_t size;		/* that object's size (url set) */
	uint64_t off;		/* object offset */
	char *dst;
	size_t len, got;
	bool whole;		/* the range is the whole object (200 is fine) */
	bool probe;		/* open: keep headers, stop after len bytes */
	bool overflow;
	bool checked;		/* the response's headers were checked */
	bool changed;		/* ... and tell of a changed object (err) */
	int tries;
	bool late;		/* failed by the deadline, not by an answer */
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
	struct curl_slist *hdrs; /* s3://: this request's headers, Range too */
	char ebody[512];	/* the start of an error response's body */
	size_t elen;
};

/* X_GONE: cancelled because another transfer of the read failed */
enum { X_WAIT, X_RUN, X_DONE, X_FAIL, X_GONE };

/*
 * libcurl's global state and the read deadline, once: 0, -ENOMEM (a line
 * naming name, a source), or -EINVAL (a line naming HTTP_DEADLINE_ENV).
 */
int http_init(const char *name);

/* When a read (or an open) that starts now must be done: ns, monotonic. */
uint64_t http_deadline(void);

/*
 * Fetch the n transfers xs (each one block) until done, failed for good,
 * or the deadline (CLOCK_MONOTONIC ns) passes: 0, -ETIMEDOUT when the
 * deadline failed it (asking again would wait as long), or -errno.
 */
int http_fetch(struct http_origin *h, struct xfer *xs, int n,
		 uint64_t deadline);

/*
 * "HTTP status 403" for x's response, and with an S3 error body its code
 * and what it likely means: "HTTP status 403, SignatureDoesNotMatch (...)";
 * true if it had such a body.
 */
bool http_status_text(const struct xfer *x, char *buf, size_t n);

#endif
