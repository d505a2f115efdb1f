// SPDX-License-Identifier: Apache-2.0
/*
 * http_store.c - a store read by URL (docs/image-format.md, "Chunk
 * store"): the store ops (store_ops.h) over URL/chunks/HH/HASH, one whole
 * GET per object through http_xfer.c (http_store_fetch(), which a
 * bucket's reads use too, signed).
 *
 * Decisions: read-only - put, delete, lock, sync and an index's put
 * return -EROFS with one line saying so, list and get -EOPNOTSUPP: a web
 * server's directory is written by whoever serves it, never through it.
 * Objects are immutable (named by their hash), so there is no validator
 * and no If-Match; what a GET returns is checked by the image reader
 * (SHA-256 of the decoded chunk).  The object cache and the single
 * flight are store.c's, above every kind.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "store/http_state.h"
#include "store/http_store.h"
#include "store/s3.h"
#include "store/store_ops.h"
#include "util/error.h"

struct http_store {
	struct store base;
	struct http_origin h;	/* the transfers: url is the store's root */
};

#define to_http(s) ((struct http_store *)(s))

int http_store_fetch(struct http_origin *h, const char *name, void *buf,
		     size_t len)
{
	struct xfer x;
	char *url;
	int ret;

	if (asprintf(&url, "%s%s%s", h->url,
		     h->url[strlen(h->url) - 1] == '/' ? "" : "/", name) < 0)
		return -ENOMEM;
	x = (struct xfer){ .url = url, .size = len, .off = 0, .dst = buf,
			   .len = len, .whole = true };
	ret = http_fetch(h, &x, 1, http_deadline());
	if (ret < 0) {
		const char *why = fl_last_error();
		size_t n = strlen(h->name);

		/* "STORE: bytes 0-N: " again says nothing: the cause alone */
		if (!strncmp(why, h->name, n) && !strncmp(why + n, ": bytes ",
							  8) &&
		    strstr(why + n + 8, ": "))
			why = strstr(why + n + 8, ": ") + 2;
		fl_err(ret, "chunk store %s: %s: %s", h->name, name, why);
	}
	free(url);
	return ret;
}


static int hs_read(struct store *s, const char *name, void *buf, size_t len)
{
	return http_store_fetch(&to_http(s)->h, name, buf, len);
}

/* What a store read by URL cannot do: one line naming it. */
static int hs_refuse(struct store *s, int err, const char *what)
{
	return fl_err(err, "%s: a store read by URL is read-only: cannot %s "
		      "(write it where it lives: a directory, or "
		      "s3://BUCKET/PREFIX)", s->name, what);
}

static int hs_get(struct store *s, const char *name, size_t max, void **buf,
		  size_t *len)
{
	(void)name, (void)max, (void)buf, (void)len;
	return hs_refuse(s, -EOPNOTSUPP, "get an object of unknown size");
}

static int hs_head(struct store *s, const char *name, uint64_t *size)
{
	(void)name, (void)size;
	return hs_refuse(s, -EOPNOTSUPP, "ask for an object");
}

static int hs_put(struct store *s, const char *name, const void *buf,
		  size_t len, unsigned int flags, uint64_t *size, bool *wrote)
{
	(void)name, (void)buf, (void)len, (void)flags, (void)size;
	*wrote = false;
	return hs_refuse(s, -EROFS, "put an object");
}

static int hs_list(struct store *s, const char *sub, store_list_fn fn,
		   void *arg)
{
	(void)sub, (void)fn, (void)arg;
	return hs_refuse(s, -EOPNOTSUPP, "list objects");
}

static int hs_del(struct store *s, const char *name, unsigned int flags)
{
	(void)name, (void)flags;
	return hs_refuse(s, -EROFS, "delete an object");
}

static int hs_lock(struct store *s, bool exclusive)
{
	(void)exclusive;
	return hs_refuse(s, -EROFS, "lock it");
}

static void hs_unlock(struct store *s)
{
	(void)s;
}

static int hs_sync(struct store *s)
{
	return hs_refuse(s, -EROFS, "sync it");
}

static int hs_get_index(struct store *s, const char *spec, size_t max,
			void **buf, size_t *len)
{
	(void)spec, (void)max, (void)buf, (void)len;
	return hs_refuse(s, -EOPNOTSUPP, "read an index");
}

static int hs_put_index(struct store *s, const char *tmp, const char *spec,
			const void *buf, size_t len)
{
	(void)tmp, (void)spec, (void)buf, (void)len;
	return hs_refuse(s, -EROFS, "put an index");
}

static int hs_relative(struct store *s, const char *image, char *out,
		       size_t n)
{
	(void)image, (void)out, (void)n;
	return hs_refuse(s, -EROFS, "write an image into it");
}

static bool hs_is(struct store *s, const char *where)
{
	return !strcmp(where, to_http(s)->h.url);
}

static void hs_close(struct store *s)
{
	free(to_http(s)->h.url);
	free(s);
}

static const struct store_ops http_store_ops = {
	.kind = "http",
	.read = hs_read,
	.get = hs_get,
	.head = hs_head,
	.put = hs_put,
	.list = hs_list,
	.del = hs_del,
	.lock = hs_lock,
	.unlock = hs_unlock,
	.sync = hs_sync,
	.get_index = hs_get_index,
	.put_index = hs_put_index,
	.relative = hs_relative,
	.is = hs_is,
	.close = hs_close,
};

int http_store_open(const char *url, struct store **out)
{
	struct http_store *st;
	int ret = http_init(url);

	if (ret < 0)
		return ret;
	st = calloc(1, sizeof(*st));
	if (!st || !(st->h.url = strdup(url))) {
		free(st);
		return -ENOMEM;
	}
	snprintf(st->h.name, sizeof(st->h.name), "%.*s",
		 (int)strcspn(url, "?#"), url);
	snprintf(st->base.name, sizeof(st->base.name), "%s", st->h.name);
	st->base.ops = &http_store_ops;
	st->base.remote = true;
	st->h.note = &st->base.note;	/* filled in by store_open() */
	*out = &st->base;
	return 0;
}
