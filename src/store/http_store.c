// SPDX-License-Identifier: Apache-2.0
/*
 * http_store.c - the chunk store of a version 3 image read by URL
 * (docs/image-format.md, "Chunk store"): URL/chunks/HH/HASH (or
 * s3://BUCKET/PREFIX/chunks/HH/HASH, each GET signed), one GET per
 * object through http_xfer.c, kept in the local cache (`--cache`) by its
 * hash, so one fetched for one image serves every image that holds it.
 *
 * Decisions: single flight - the first reader that misses the cache
 * fetches an object, and every other reader of the same object in this
 * process waits for that fetch and copies its bytes instead of asking
 * the origin again (50 VMs restoring from one snapshot on one daemon
 * share one source, so one store: each object is fetched once).  The
 * fetcher puts the object in the cache before it lets the waiters go, so
 * a reader that comes later hits the cache (unless the cache's size
 * limit evicted it meanwhile: then it is fetched again, and the limit
 * holds).  Objects are immutable (named by their hash), so there is no
 * validator and no If-Match; what a GET returns is checked by the image
 * reader (SHA-256 of the decoded chunk), and a cached copy that fails it
 * is dropped (bad()).  With the origin down, every object the cache
 * holds is served from it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "store/chunk_store.h"
#include "format/image.h"
#include "store/http_cache.h"
#include "store/http_state.h"
#include "util/note.h"
#include "util/clock.h"
#include "util/error.h"

/* One object being fetched, and the readers waiting for it. */
struct flight {
	struct flight *next;
	uint8_t hash[IMAGE_HASH_LEN];
	void *buf;		/* the fetcher's: valid once done */
	size_t len;
	unsigned int refs;	/* the fetcher and the waiters */
	bool done;
	int ret;
	char err[1024];		/* the fetch's message, if it failed */
};

struct http_store {
	struct image_store base;
	struct http_origin h;	/* the transfers: url is the store's root */
	struct note note;	/* fl_source_opts' note callback */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct flight *flights;
	_Atomic uint64_t fetches;	/* objects asked of the origin */
};

#define to_store(s) ((struct http_store *)(s))

/*
 * A waiter: copy a finished flight's result to buf and drop its reference
 * (mu held); the fetcher frees the flight once every waiter has.
 */
static int flight_take(struct http_store *st, struct flight *f, void *buf,
		       size_t len)
{
	int ret = f->ret;

	if (!ret && f->len != len)
		ret = -EBADMSG;
	if (!ret)
		memcpy(buf, f->buf, len);
	else
		fl_err(ret, "%s", f->err[0] ? f->err :
		       "object of another size than the index says");
	f->refs--;
	pthread_cond_broadcast(&st->cv);	/* the fetcher waits for this */
	return ret;
}

/* The fetch itself: one GET of the whole object into buf. */
static int fetch(struct http_store *st, const uint8_t *hash, void *buf,
		 size_t len)
{
	char name[128], *url;
	struct xfer x;
	int ret;

	store_chunk_name(hash, name, sizeof(name));
	if (asprintf(&url, "%s%s%s", st->h.url,
		     st->h.url[strlen(st->h.url) - 1] == '/' ? "" : "/",
		     name) < 0)
		return -ENOMEM;
	x = (struct xfer){ .url = url, .size = len, .off = 0, .dst = buf,
			   .len = len, .whole = true };
	atomic_fetch_add(&st->fetches, 1);
	ret = http_fetch(&st->h, &x, 1, http_deadline());
	if (ret < 0) {
		const char *why = fl_last_error();
		size_t n = strlen(st->h.name);

		/* "STORE: bytes 0-N: " again says nothing: the cause alone */
		if (!strncmp(why, st->h.name, n) && !strncmp(why + n, ": bytes ",
							    8) &&
		    strstr(why + n + 8, ": "))
			why = strstr(why + n + 8, ": ") + 2;
		fl_err(ret, "chunk store %s: %s: %s", st->h.name, name, why);
	}
	free(url);
	return ret;
}

static int hs_get(struct image_store *s, const uint8_t *hash, void *buf,
		     size_t len)
{
	struct http_store *st = to_store(s);
	struct flight *f;
	int ret;

	if (st->h.cache && http_cache_get_chunk(st->h.cache, hash, buf, len)) {
		atomic_fetch_add(&s->bytes_cached, len);
		return 0;
	}
	pthread_mutex_lock(&st->mu);
	for (f = st->flights; f; f = f->next)
		if (!memcmp(f->hash, hash, IMAGE_HASH_LEN))
			break;
	if (f) {		/* someone is fetching it: wait, and copy */
		f->refs++;
		while (!f->done)
			pthread_cond_wait(&st->cv, &st->mu);
		ret = flight_take(st, f, buf, len);
		pthread_mutex_unlock(&st->mu);
		return ret;
	}
	/*
	 * No fetch in flight: but one may have ended since the cache was
	 * asked (its fetcher puts the object in the cache first, then ends
	 * the flight), so ask again, now that no flight can end unseen.
	 */
	if (st->h.cache && http_cache_get_chunk(st->h.cache, hash, buf, len)) {
		pthread_mutex_unlock(&st->mu);
		atomic_fetch_add(&s->bytes_cached, len);
		return 0;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&st->mu);
		return -ENOMEM;
	}
	memcpy(f->hash, hash, IMAGE_HASH_LEN);
	f->refs = 1;
	f->buf = buf;
	f->len = len;
	f->next = st->flights;
	st->flights = f;
	pthread_mutex_unlock(&st->mu);

	ret = fetch(st, hash, buf, len);
	if (ret == 0) {
		atomic_fetch_add(&s->bytes_fetched, len);
		if (st->h.cache)	/* before the waiters go: later readers hit */
			http_cache_put_chunk(st->h.cache, hash, buf, len);
	}
	pthread_mutex_lock(&st->mu);
	f->ret = ret;
	if (ret < 0)
		snprintf(f->err, sizeof(f->err), "%s", fl_last_error());
	f->done = true;
	pthread_cond_broadcast(&st->cv);
	/* the waiters copy out of buf: wait for them before returning it */
	while (f->refs > 1)
		pthread_cond_wait(&st->cv, &st->mu);
	for (struct flight **p = &st->flights; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	pthread_mutex_unlock(&st->mu);
	free(f);
	return ret;
}

static void hs_bad(struct image_store *s, const uint8_t *hash)
{
	struct http_store *st = to_store(s);

	if (st->h.cache)
		http_cache_drop_chunk(st->h.cache, hash);
}

static void hs_close(struct image_store *s)
{
	struct http_store *st = to_store(s);

	http_cache_close(st->h.cache);
	if (st->h.s3) {
		s3_target_free(st->h.s3);
		free(st->h.s3);
	}
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->cv);
	free(st->h.url);
	free(st);
}

static const struct image_store_ops http_store_ops = {
	.get = hs_get,
	.bad = hs_bad,
	.close = hs_close,
};

/*
 * An s3://BUCKET/PREFIX store: h.url the prefix's URL (a '/' at its end),
 * h.s3 how each GET is signed, h.name the spec.  0 or -errno.
 */
static int s3_open(struct http_store *st, const char *spec)
{
	char root[1024];
	int ret = s3_root_spec(spec, root, sizeof(root));

	if (ret < 0)
		return ret;
	st->h.s3 = malloc(sizeof(*st->h.s3));
	if (!st->h.s3)
		return -ENOMEM;
	ret = s3_target_root(root, st->h.s3);
	if (ret < 0) {
		free(st->h.s3);
		st->h.s3 = NULL;
		return ret;
	}
	st->h.url = strdup(st->h.s3->url);
	if (!st->h.url) {
		s3_target_free(st->h.s3);
		free(st->h.s3);
		st->h.s3 = NULL;
		return -ENOMEM;
	}
	snprintf(st->h.name, sizeof(st->h.name), "%.*s",
		 (int)strlen(root) - 1, root);
	return 0;
}

int http_store_open(const char *url, const struct fl_source_opts *o,
		    struct image_store **out)
{
	struct http_store *st;
	int ret = http_init(url);

	if (ret < 0)
		return ret;
	st = calloc(1, sizeof(*st));
	if (st && s3_is_spec(url)) {
		ret = s3_open(st, url);
		if (ret < 0) {
			free(st);
			return ret;
		}
	} else if (!st || !(st->h.url = strdup(url))) {
		free(st);
		return -ENOMEM;
	} else {
		snprintf(st->h.name, sizeof(st->h.name), "%.*s",
			 (int)strcspn(url, "?#"), url);
	}
	st->base.ops = &http_store_ops;
	st->base.remote = true;
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cv, NULL);
	note_set(&st->note, o ? o->note : NULL, o ? o->note_arg : NULL);
	st->h.note = &st->note;
	if (o && o->cache_dir) {
		ret = http_cache_open(o->cache_dir, o->cache_max_bytes ?
				      o->cache_max_bytes : FL_DEFAULT_CACHE_MAX,
				      &st->note, &st->h.cache);
		if (ret < 0) {
			hs_close(&st->base);
			return ret;
		}
	}
	*out = &st->base;
	return 0;
}
