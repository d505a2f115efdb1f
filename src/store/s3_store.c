// SPDX-License-Identifier: Apache-2.0
/*
 * s3_store.c - a chunk store in a bucket, written by `image create --store
 * s3://BUCKET/PREFIX` (docs/object-storage.md, "Uploading"): a signed HEAD
 * asks whether an object is there, a signed PUT uploads one.
 *
 * Decisions: requests are signed as reads are (libcurl's SigV4, s3.c), a
 * PUT's x-amz-content-sha256 the body's real SHA-256 (never
 * UNSIGNED-PAYLOAD), so S3 rejects a body damaged on the way.  A chunk's
 * PUT carries If-None-Match: * - objects are named by the hash of what
 * they hold and never replaced, so two creates racing for one object
 * both end with it in place, and with a store that honours the condition
 * (AWS since 2024) the loser's 412 makes it take the winner's object (its
 * size) as a directory store's RENAME_NOREPLACE does.  A HEAD's error has
 * no body, so on a status other than 200 or 404 the object is asked once
 * more with a GET of one byte, whose body holds S3's <Code> for the line.
 * Network errors, 5xx and 429 are retried with backoff, as reads are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "faultline.h"
#include "format/image.h"
#include "store/http_state.h"
#include "store/s3.h"
#include "store/s3_store.h"
#include "util/error.h"

#define S3S_IDLE	8	/* curl handles kept for reuse */

struct s3_store {
	char spec[1024];	/* "s3://BUCKET/PREFIX/" */
	struct s3_lock *lk;	/* the lock we hold (s3_lock.c), or NULL */
	const struct s3_held_ops *held;	/* how to ask lk */
	struct s3_target t;	/* t.url: the prefix's URL, ending in '/' */
	pthread_mutex_t mu;
	CURL *idle[S3S_IDLE];
	int nidle;
};

enum req { REQ_HEAD, REQ_PUT, REQ_GET1, REQ_LIST, REQ_DELETE, REQ_GET };

static const char *const req_name[] = { "HEAD", "PUT", "GET", "LIST",
					"DELETE", "GET" };

#define LIST_MAX	(16u << 20)	/* bytes of one page of keys, at most */

struct resp {
	long status;
	curl_off_t clen;
	char body[512];		/* the start of an error's body */
	size_t blen;
	char *all;		/* REQ_LIST, _GET: the whole body (malloc'd) */
	size_t alen;
	size_t cap;		/* its bytes at most; 0: LIST_MAX */
	time_t date;		/* the store's clock: Date, 0 if none */
	time_t lm;		/* Last-Modified, 0 if none */
};

/* A response header's date (HTTP-date), 0 if none or unparsable. */
static time_t header_time(CURL *e, const char *name)
{
	struct curl_header *h;
	time_t t;

	if (curl_easy_header(e, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return 0;
	t = curl_getdate(h->value, NULL);
	return t > 0 ? t : 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct resp *r = arg;
	size_t len = size * n, keep = sizeof(r->body) - 1 - r->blen;
	char *all;

	keep = len < keep ? len : keep;
	memcpy(r->body + r->blen, p, keep);
	r->blen += keep;
	if (!r->all)
		return len;
	if (r->alen + len > (r->cap ? r->cap : LIST_MAX) ||
	    !(all = realloc(r->all, r->alen + len + 1)))
		return 0;	/* too much: the transfer fails */
	r->all = all;
	memcpy(r->all + r->alen, p, len);
	r->alen += len;
	return len;
}

static CURL *easy_get(struct s3_store *s)
{
	CURL *e = NULL;

	pthread_mutex_lock(&s->mu);
	if (s->nidle)
		e = s->idle[--s->nidle];
	pthread_mutex_unlock(&s->mu);
	return e ? e : curl_easy_init();
}

static void easy_put(struct s3_store *s, CURL *e)
{
	pthread_mutex_lock(&s->mu);
	if (s->nidle < S3S_IDLE) {
		s->idle[s->nidle++] = e;
		e = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	if (e)
		curl_easy_cleanup(e);
}

static bool retryable(CURLcode cc, long status)
{
	if (cc == CURLE_OK)
		return status >= 500 || status == 429;
	return cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_CONNECT ||
	       cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_SEND_ERROR ||
	       cc == CURLE_RECV_ERROR || cc == CURLE_GOT_NOTHING ||
	       cc == CURLE_PARTIAL_FILE || cc == CURLE_SSL_CONNECT_ERROR;
}

/* The request's headers: t's, the payload's hash, the method's own. */
static struct curl_slist *headers(const struct s3_target *t, enum req q,
				  const void *buf, size_t len, bool cond)
{
	struct curl_slist *h = NULL, *l;
	uint8_t sha[IMAGE_HASH_LEN];
	char line[128], hex[IMAGE_HASH_HEX];

	for (l = t->headers; l; l = l->next) {
		if (q == REQ_PUT &&
		    !strncasecmp(l->data, "x-amz-content-sha256:", 21))
			continue;
		if (!(h = curl_slist_append(h, l->data)))
			return NULL;
	}
	if (q == REQ_PUT) {
		if (image_sha256(buf, len, sha) < 0)
			goto fail;
		image_hash_hex(sha, hex);
		snprintf(line, sizeof(line), "x-amz-content-sha256: %s", hex);
		/*
		 * libcurl 7.88 signs a header it is told to remove (as
		 * "name:"), so none is: the Content-Type is set, not the
		 * form's, and Expect: 100-continue (unsigned) stays.
		 */
		if (!(h = curl_slist_append(h, line)) ||
		    !(h = curl_slist_append(h, "Content-Type: "
					    "application/octet-stream")) ||
		    (cond && !(h = curl_slist_append(h, "If-None-Match: *"))))
			goto fail;
	} else if (q == REQ_GET1 &&
		   !(h = curl_slist_append(h, "Range: bytes=0-0"))) {
		goto fail;
	}
	return h;
fail:
	curl_slist_free_all(h);
	return NULL;
}

/*
 * One request of url (what: its spec, for messages), signed with t, tried
 * up to HTTP_TRIES times: 0 with r filled in, or -errno with a message
 * (the transfer itself failed, no status).
 */
static int request(struct s3_store *s, const struct s3_target *t,
		   const char *url, const char *what, enum req q,
		   const void *buf, size_t len, bool cond, struct resp *r)
{
	char err[CURL_ERROR_SIZE];
	struct curl_slist *h;
	CURLcode cc = CURLE_OK;
	CURL *e = easy_get(s);
	int tries = 0;

	h = headers(t, q, buf, len, cond);
	if (!e || !h) {
		curl_slist_free_all(h);
		if (e)
			curl_easy_cleanup(e);
		return fl_err(-ENOMEM, "%s: cannot set up libcurl", what);
	}
	for (;;) {
		char *all = r->all;
		size_t cap = r->cap;

		memset(r, 0, sizeof(*r));
		r->all = all;	/* the caller's buffer, for REQ_LIST, _GET */
		r->cap = cap;
		r->clen = -1;
		err[0] = 0;
		curl_easy_reset(e);
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_AWS_SIGV4, t->sigv4);
		curl_easy_setopt(e, CURLOPT_USERNAME, t->key_id);
		curl_easy_setopt(e, CURLOPT_PASSWORD, t->secret);
		curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
		curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, HTTP_TRY_MS);
		curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(e, CURLOPT_USERAGENT, "faultline/" "0.1");
		if (q == REQ_HEAD) {
			curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		} else if (q == REQ_DELETE) {
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
		} else if (q == REQ_PUT) {
			/* POSTFIELDS: what libcurl's SigV4 hashes, sent as PUT */
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)len);
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, buf);
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
		}
		cc = curl_easy_perform(e);
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
		curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
				  &r->clen);
		r->date = header_time(e, "Date");
		r->lm = header_time(e, "Last-Modified");
		if (!retryable(cc, r->status) || ++tries >= HTTP_TRIES)
			break;
		nanosleep(&(struct timespec){ 0, (long)HTTP_BACKOFF_MS *
			  1000000L << (tries - 1) }, NULL);
	}
	curl_slist_free_all(h);		/* a session token's copy too */
	easy_put(s, e);
	if (cc != CURLE_OK)
		return fl_err(-EIO, "%s: %s: %s (%d %s)", what, req_name[q],
			      err[0] ? err : curl_easy_strerror(cc), tries,
			      tries == 1 ? "try" : "tries");
	return 0;
}

/* One line for r's status: "SPEC: PUT: HTTP status 403, Code (hint)". */
static int status_err(const char *what, enum req q, const struct resp *r)
{
	char code[64];
	const char *hint;

	if (!s3_error_code(r->body, r->blen, code, sizeof(code)))
		return fl_err(-EIO, "%s: %s: HTTP status %ld", what,
			      req_name[q], r->status);
	hint = s3_error_hint(code);
	return fl_err(-EIO, "%s: %s: HTTP status %ld, %s%s%s%s", what,
		      req_name[q], r->status, code, hint ? " (" : "",
		      hint ? hint : "", hint ? ")" : "");
}

int s3_store_open(const char *spec, struct s3_store **out)
{
	struct s3_store *s;
	int ret = http_init(spec);

	if (ret < 0)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	ret = s3_root_spec(spec, s->spec, sizeof(s->spec));
	if (!ret)
		ret = s3_target_root(s->spec, &s->t);
	if (ret < 0) {
		free(s);
		return ret;
	}
	pthread_mutex_init(&s->mu, NULL);
	*out = s;
	return 0;
}

struct s3_target *s3_store_target(struct s3_store *s)
{
	return &s->t;
}

const char *s3_store_spec(const struct s3_store *s)
{
	return s->spec;
}

/* The URL and the spec of the object name: 0 or -ENOMEM. */
static int object(const struct s3_store *s, const char *name, char **url,
		  char *what, size_t n)
{
	snprintf(what, n, "%s%s", s->spec, name);
	if (asprintf(url, "%s%s", s->t.url, name) < 0)
		return -ENOMEM;
	return 0;
}

int s3_store_head(struct s3_store *s, const char *name, uint64_t *size)
{
	char what[1200], *url;
	struct resp r = { 0 };
	int ret = object(s, name, &url, what, sizeof(what));

	if (ret < 0)
		return ret;
	ret = request(s, &s->t, url, what, REQ_HEAD, NULL, 0, false, &r);
	if (!ret && r.status == 200 && r.clen >= 0) {
		*size = (uint64_t)r.clen;
	} else if (!ret && r.status == 404) {
		ret = -ENOENT;
	} else if (!ret && r.status == 200) {
		ret = fl_err(-EIO, "%s: HEAD: HTTP status 200 without a "
			     "Content-Length", what);
	} else if (!ret) {
		/* a HEAD's error has no body: its <Code> from a GET's */
		long st = r.status;

		ret = request(s, &s->t, url, what, REQ_GET1, NULL, 0, false,
			      &r);
		if (!ret && r.status == st)
			ret = status_err(what, REQ_HEAD, &r);
		else if (!ret)
			ret = fl_err(-EIO, "%s: HEAD: HTTP status %ld", what,
				     st);
	}
	free(url);
	return ret;
}

int s3_store_put(struct s3_store *s, const char *name, const void *buf,
		 size_t len, uint64_t *size)
{
	char what[1200], *url = NULL;
	struct resp r = { 0 };
	int ret = object(s, name, &url, what, sizeof(what));

	if (!ret && s->lk)	/* never more work under a lock lost */
		ret = s->held->check(s->lk, false);
	if (ret < 0) {
		free(url);
		return ret;
	}
	ret = request(s, &s->t, url, what, REQ_PUT, buf, len, true, &r);
	free(url);
	if (ret < 0)
		return ret;
	if (r.status == 200) {
		*size = len;
		return 0;
	}
	/* put beside us meanwhile (the condition held): use that one */
	if ((r.status == 412 || r.status == 409) &&
	    s3_store_head(s, name, size) == 0)
		return 0;
	return status_err(what, REQ_PUT, &r);
}

int s3_store_put_spec(struct s3_store *s, const char *spec, const void *buf,
		      size_t len)
{
	struct s3_target t;
	struct resp r = { 0 };
	int ret = s3_target_get(spec, &t);

	if (ret < 0)
		return ret;
	/* an index only while the lock is ours, asked of the store now */
	if (s->lk && (ret = s->held->confirm(s->lk)) < 0) {
		char why[1600];

		snprintf(why, sizeof(why), "%s", fl_last_error());
		s3_target_free(&t);
		return fl_err(ret, "%s: not written: %s", spec, why);
	}
	ret = request(s, &t, t.url, spec, REQ_PUT, buf, len, false, &r);
	s3_target_free(&t);
	if (!ret && r.status != 200)
		ret = status_err(spec, REQ_PUT, &r);
	return ret;
}

int s3_store_get_spec(struct s3_store *s, const char *spec, size_t max,
		      void **buf, size_t *len)
{
	struct s3_target t;
	struct resp r = { .cap = max };
	int ret = s3_target_get(spec, &t);

	if (ret < 0)
		return ret;
	r.all = malloc(1);
	ret = r.all ? request(s, &t, t.url, spec, REQ_GET, NULL, 0, false, &r) :
		      fl_err(-ENOMEM, "%s: GET: no memory", spec);
	s3_target_free(&t);
	if (!ret && r.status == 404)
		ret = fl_err(-ENOENT, "%s: GET: no such object", spec);
	else if (!ret && r.status != 200)
		ret = status_err(spec, REQ_GET, &r);
	if (ret < 0) {
		free(r.all);
		return ret;
	}
	*buf = r.all;
	*len = r.alen;
	return 0;
}

void s3_store_close(struct s3_store *s)
{
	if (!s)
		return;
	if (s->lk)	/* the lock taken away with it */
		s->held->drop(s, s->lk);
	for (int i = 0; i < s->nidle; i++)
		curl_easy_cleanup(s->idle[i]);
	pthread_mutex_destroy(&s->mu);
	s3_target_free(&s->t);
	free(s);
}

/* ---- listing and deleting: gc ---------------------------------------------- */

/* The key prefix of the store ("PREFIX/", or "" for a whole bucket). */
static const char *key_prefix(const struct s3_store *s)
{
	const char *p = strchr(s->spec + 5, '/');	/* after s3://BUCKET */

	return p ? p + 1 : "";
}

/*
 * The bucket's URL for a request on the bucket itself: path-style
 * "ENDPOINT/BUCKET", virtual-hosted "https://BUCKET.s3.../" (malloc'd).
 */
static char *bucket_url(const struct s3_store *s)
{
	const char *kp = key_prefix(s);
	char root[1024], *u = NULL;
	struct s3_target t;

	snprintf(root, sizeof(root), "%.*s", (int)(kp - s->spec), s->spec);
	if (s3_target_root(root, &t) < 0)
		return NULL;
	const char *host = strstr(t.url, "://");
	const char *path = host ? strchr(host + 3, '/') : NULL;

	if (path && (u = strdup(t.url)) && strlen(path) > 1 &&
	    u[strlen(u) - 1] == '/')
		u[strlen(u) - 1] = 0;	/* "/BUCKET/" is "/BUCKET" */
	s3_target_free(&t);
	return u;
}

/* The names in a list are the store's: its key prefix taken off. */
struct list_arg {
	const char *kp;
	size_t kl;
	int (*key)(void *arg, const char *name, uint64_t size);
	void *arg;
};

static int list_key(void *arg, const char *name, uint64_t size)
{
	struct list_arg *l = arg;

	if (strncmp(name, l->kp, l->kl))
		return 0;	/* not under the prefix: not asked for */
	return l->key(l->arg, name + l->kl, size);
}

int s3_store_list(struct s3_store *s, const char *sub,
		  int (*key)(void *arg, const char *name, uint64_t size),
		  void *arg)
{
	struct list_arg la = { key_prefix(s), strlen(key_prefix(s)), key,
			       arg };
	struct s3_list_page pg = { 0 };
	char what[1200], prev[sizeof(pg.token)], *base = bucket_url(s);
	char *pfx = NULL;
	CURL *esc = curl_easy_init();
	int ret = base && esc ? 0 : -ENOMEM;

	snprintf(what, sizeof(what), "%s%s", s->spec, sub);
	if (!ret && asprintf(&pfx, "%s%s", key_prefix(s), sub) < 0)
		ret = -ENOMEM;
	if (ret)
		ret = fl_err(ret, "%s: LIST: %s", what, base ? "no memory" :
			     "no URL for the bucket");
	do {
		struct resp r = { 0 };
		char *ep = NULL, *et = NULL, *url = NULL;

		if (ret)
			break;
		ep = curl_easy_escape(esc, pfx, 0);
		et = pg.more ? curl_easy_escape(esc, pg.token, 0) : NULL;
		r.all = malloc(1);
		/* parameters in their canonical (sorted) order for SigV4 */
		if (!ep || (pg.more && !et) || !r.all ||
		    asprintf(&url, "%s?%s%s%slist-type=2&prefix=%s", base,
			     et ? "continuation-token=" : "", et ? et : "",
			     et ? "&" : "", ep) < 0)
			url = NULL;
		ret = url ? request(s, &s->t, url, what, REQ_LIST, NULL, 0,
				    false, &r) :
			    fl_err(-ENOMEM, "%s: LIST: no memory", what);
		if (!ret && r.status != 200)
			ret = status_err(what, REQ_LIST, &r);
		if (!ret)
			strcpy(prev, pg.token);
		if (!ret && (ret = s3_list_parse(r.all, r.alen, &pg, list_key,
						 &la)) == -EPROTO) {
			char why[256];

			snprintf(why, sizeof(why), "%s", fl_last_error());
			ret = fl_err(ret, "%s: LIST: %s", what, why);
		}
		/* a server that hands the same token back: never loop */
		if (!ret && pg.more && !strcmp(prev, pg.token))
			ret = fl_err(-EPROTO, "%s: LIST: the same continuation "
				     "token twice", what);
		curl_free(ep);
		curl_free(et);
		free(url);
		free(r.all);
	} while (!ret && pg.more);
	if (esc)
		curl_easy_cleanup(esc);
	free(base);
	free(pfx);
	return ret;
}

int s3_store_delete(struct s3_store *s, const char *name)
{
	char what[1200], *url = NULL;
	struct resp r = { 0 };
	int ret = object(s, name, &url, what, sizeof(what));

	if (ret < 0)
		return fl_err(ret, "%s: DELETE: no memory", what);
	/* gc deletes only while its lock is surely its own */
	if (s->lk && strcmp(name, s->held->name(s->lk)) &&
	    (ret = s->held->check(s->lk, true)) < 0) {
		free(url);
		return ret;
	}
	ret = request(s, &s->t, url, what, REQ_DELETE, NULL, 0, false, &r);
	free(url);
	if (!ret && r.status != 204 && r.status != 200)
		ret = status_err(what, REQ_DELETE, &r);
	return ret;
}

/* ---- what the locks (s3_lock.c) need ------------------------------------ */

int s3_store_stat(struct s3_store *s, const char *name, char *body, size_t n,
		  struct s3_stat *st)
{
	char what[1200], *url;
	struct resp r = { 0 };
	enum req q = body ? REQ_GET : REQ_HEAD;
	int ret = object(s, name, &url, what, sizeof(what));

	if (ret < 0)
		return fl_err(ret, "%s: %s: no memory", what, req_name[q]);
	ret = request(s, &s->t, url, what, q, NULL, 0, false, &r);
	free(url);
	if (ret < 0)
		return ret;
	if (r.status == 404)
		return -ENOENT;
	if (r.status != 200)
		return status_err(what, q, &r);
	st->size = r.clen >= 0 ? (uint64_t)r.clen : 0;
	st->date = r.date;
	st->lm = r.lm;
	if (body && n) {
		size_t k = r.blen < n - 1 ? r.blen : n - 1;

		memcpy(body, r.body, k);
		body[k] = 0;
	}
	return 0;
}

int s3_store_replace(struct s3_store *s, const char *name, const void *buf,
		     size_t len)
{
	char what[1200], *url;
	struct resp r = { 0 };
	int ret = object(s, name, &url, what, sizeof(what));

	if (ret < 0)
		return fl_err(ret, "%s: PUT: no memory", what);
	ret = request(s, &s->t, url, what, REQ_PUT, buf, len, false, &r);
	free(url);
	if (!ret && r.status != 200)
		ret = status_err(what, REQ_PUT, &r);
	return ret;
}

void s3_store_hold(struct s3_store *s, struct s3_lock *l,
		   const struct s3_held_ops *ops)
{
	s->lk = l;
	s->held = ops;
}

struct s3_lock *s3_store_held(const struct s3_store *s)
{
	return s->lk;
}
