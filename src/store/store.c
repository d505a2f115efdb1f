// SPDX-License-Identifier: Apache-2.0
/*
 * store.c - a store opened by its spec (the one place that picks a
 * directory, a URL or a bucket: store.h), and the chunks of version 3
 * images read from any store through one object cache (`--cache`, by
 * hash) and one single flight; the format's image_store over it.
 *
 * Decisions: single flight - the first reader that misses the cache
 * fetches an object, and every other reader of the same object in this
 * process waits for that fetch and copies its bytes instead of asking
 * the store again (50 VMs restoring from one snapshot on one daemon
 * share one source, so one store: each object is fetched once).  The
 * fetcher puts the object in the cache before it lets the waiters go, so
 * a reader that comes later hits the cache (unless the cache's size
 * limit evicted it meanwhile: then it is fetched again, and the limit
 * holds).  A cached copy that does not decode to its chunk is dropped
 * (store_bad_chunk).  With the origin down, every object the cache holds
 * is served from it.  A directory store has no cache and no flights: the
 * page cache is its cache.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "format/image.h"
#include "store/bucket.h"
#include "store/chunk_store.h"
#include "store/dir_store.h"
#include "store/http_cache.h"
#include "store/http_store.h"
#include "store/s3.h"
#include "store/store.h"
#include "util/error.h"
#include "util/note.h"

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

int store_image_place(const char *image, const char *store)
{
	bool img = store_is_s3(image), st = store && store_is_s3(store);

	if (img && !st)
		return fl_err(-EINVAL, "%s: an image in a bucket is an index "
			      "of a chunk store there: give --store "
			      "s3://BUCKET/PREFIX", image);
	if (st && !img)
		return fl_err(-EINVAL, "--store %s: the image goes into the "
			      "bucket too, as s3://BUCKET/PREFIX/images/NAME "
			      "(its index, put after its chunks)", store);
	if (store && store_is_http(store))
		return fl_err(-EROFS, "--store %s: a store read by URL is "
			      "read-only: write it where it lives (a "
			      "directory, or s3://BUCKET/PREFIX)", store);
	return img ? s3_check_spec(image) : 0;
}

int store_open(const char *spec, unsigned int flags,
	       const struct fl_source_opts *o, struct store **out)
{
	struct store *s;
	int ret = store_is_s3(spec) ? bucket_open(spec, &s) :
		  store_is_http(spec) ? http_store_open(spec, &s) :
		  dir_store_open(spec, flags, &s);

	if (ret < 0)
		return ret;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	note_set(&s->note, o ? o->note : NULL, o ? o->note_arg : NULL);
	if (s->remote && o && o->cache_dir) {
		ret = http_cache_open(o->cache_dir, o->cache_max_bytes ?
				      o->cache_max_bytes : FL_DEFAULT_CACHE_MAX,
				      &s->note, &s->cache);
		if (ret < 0) {
			store_close(s);
			return ret;
		}
	}
	*out = s;
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	http_cache_close(s->cache);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	s->ops->close(s);
}

/* ---- chunks by hash: the cache and the single flight ------------------- */

/*
 * A waiter: copy a finished flight's result to buf and drop its reference
 * (mu held); the fetcher frees the flight once every waiter has.
 */
static int flight_take(struct store *s, struct flight *f, void *buf,
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
	pthread_cond_broadcast(&s->cv);	/* the fetcher waits for this */
	return ret;
}

/* The fetcher: its flight ended with ret, the waiters gone, f freed. */
static void flight_end(struct store *s, struct flight *f, int ret)
{
	pthread_mutex_lock(&s->mu);
	f->ret = ret;
	if (ret < 0)
		snprintf(f->err, sizeof(f->err), "%s", fl_last_error());
	f->done = true;
	pthread_cond_broadcast(&s->cv);
	/* the waiters copy out of buf: wait for them before returning it */
	while (f->refs > 1)
		pthread_cond_wait(&s->cv, &s->mu);
	for (struct flight **p = &s->flights; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	pthread_mutex_unlock(&s->mu);
	free(f);
}

/*
 * A flight for hash (mu held, released): NULL and *ret once another
 * reader's fetch or the cache gave the bytes, else ours to fetch.
 */
static struct flight *flight_join(struct store *s, const uint8_t *hash,
				  void *buf, size_t len, enum store_from *from,
				  int *ret)
{
	struct flight *f;

	for (f = s->flights; f; f = f->next)
		if (!memcmp(f->hash, hash, IMAGE_HASH_LEN))
			break;
	if (f) {		/* someone is fetching it: wait, and copy */
		f->refs++;
		while (!f->done)
			pthread_cond_wait(&s->cv, &s->mu);
		*ret = flight_take(s, f, buf, len);
		*from = STORE_FROM_FLIGHT;
		pthread_mutex_unlock(&s->mu);
		return NULL;
	}
	/*
	 * No fetch in flight: but one may have ended since the cache was
	 * asked (its fetcher puts the object in the cache first, then ends
	 * the flight), so ask again, now that no flight can end unseen.
	 */
	if (s->cache && http_cache_get_chunk(s->cache, hash, buf, len)) {
		pthread_mutex_unlock(&s->mu);
		*from = STORE_FROM_CACHE;
		*ret = 0;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (f) {
		memcpy(f->hash, hash, IMAGE_HASH_LEN);
		f->refs = 1;
		f->buf = buf;
		f->len = len;
		f->next = s->flights;
		s->flights = f;
	}
	pthread_mutex_unlock(&s->mu);
	*ret = f ? 0 : -ENOMEM;
	return f;
}

int store_read_chunk(struct store *s, const uint8_t *hash, void *buf,
		     size_t len, enum store_from *from)
{
	struct flight *f;
	char name[128];
	int ret;

	*from = STORE_FROM_STORE;
	store_chunk_name(hash, name, sizeof(name));
	if (!s->remote)
		return s->ops->read(s, name, buf, len);
	if (s->cache && http_cache_get_chunk(s->cache, hash, buf, len)) {
		*from = STORE_FROM_CACHE;
		return 0;
	}
	pthread_mutex_lock(&s->mu);
	f = flight_join(s, hash, buf, len, from, &ret);
	if (!f)
		return ret;
	atomic_fetch_add(&s->fetches, 1);
	ret = s->ops->read(s, name, buf, len);
	if (ret == 0 && s->cache)	/* before the waiters go: later hit */
		http_cache_put_chunk(s->cache, hash, buf, len);
	flight_end(s, f, ret);
	return ret;
}

void store_bad_chunk(struct store *s, const uint8_t *hash)
{
	if (s->cache)
		http_cache_drop_chunk(s->cache, hash);
}

/* ---- the format's image_store over a store ------------------------------ */

struct image_source_store {
	struct image_store base;
	struct store *s;
};

#define to_iss(x) ((struct image_source_store *)(x))

static int iss_get(struct image_store *x, const uint8_t *hash, void *buf,
		   size_t len)
{
	enum store_from from;
	int ret = store_read_chunk(to_iss(x)->s, hash, buf, len, &from);

	/* a waiter's copy of another's fetch is counted by that reader */
	if (!ret && x->remote && from == STORE_FROM_CACHE)
		atomic_fetch_add(&x->bytes_cached, len);
	else if (!ret && x->remote && from == STORE_FROM_STORE)
		atomic_fetch_add(&x->bytes_fetched, len);
	return ret;
}

static void iss_bad(struct image_store *x, const uint8_t *hash)
{
	store_bad_chunk(to_iss(x)->s, hash);
}

static void iss_close(struct image_store *x)
{
	store_close(to_iss(x)->s);
	free(x);
}

static const struct image_store_ops iss_ops = {
	.get = iss_get,
	.bad = iss_bad,
	.close = iss_close,
};

int store_attach(struct image *img, struct store *s)
{
	struct image_source_store *x = calloc(1, sizeof(*x));

	if (!x) {
		store_close(s);
		return -ENOMEM;
	}
	x->base.ops = &iss_ops;
	x->base.remote = s->remote;
	x->s = s;
	img->store = &x->base;
	return 0;
}

int store_attach_at(struct image *img, const char *spec,
		    const struct fl_source_opts *o)
{
	struct store *s;
	char where[4096];
	int ret;

	if (!image_in_store(&img->hdr) || img->store)
		return 0;
	if (store_resolve(spec, img->hdr.store_path, where, sizeof(where)) < 0)
		return fl_err(-ENAMETOOLONG, "%s: the path of its store %s is "
			      "too long", spec, img->hdr.store_path);
	ret = store_open(where, 0, o, &s);
	return ret < 0 ? ret : store_attach(img, s);
}
