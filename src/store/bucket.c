// SPDX-License-Identifier: Apache-2.0
/*
 * bucket.c - a store in a bucket, s3://BUCKET[/PREFIX]
 * (docs/object-storage.md): the store ops (store_ops.h) over s3_store.c's
 * signed HEAD, PUT, GET, LIST and DELETE and s3_lock.c's lock objects.
 *
 * Decisions: a chunk's read goes through http_xfer.c (http_store_fetch,
 * each GET signed), as any URL's object does, so it gets the same
 * retries, deadline and notes; every other request is s3_store.c's.  A
 * bucket has no temporaries and no links, and a PUT answered 200 is
 * stored: sync() has nothing to do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/bucket.h"
#include "store/chunk_store.h"
#include "store/http_state.h"
#include "store/http_store.h"
#include "store/s3.h"
#include "store/s3_lock.h"
#include "store/s3_store.h"
#include "store/store_ops.h"
#include "util/error.h"

struct bucket {
	struct store base;
	struct s3_store *s3;
	struct http_origin h;	/* chunks' reads: url and s3 are s3's */
};

#define to_bucket(s) ((struct bucket *)(s))

static int b_read(struct store *s, const char *name, void *buf, size_t len)
{
	return http_store_fetch(&to_bucket(s)->h, name, buf, len);
}

static int b_get(struct store *s, const char *name, size_t max, void **buf,
		 size_t *len)
{
	struct s3_store *s3 = to_bucket(s)->s3;
	char spec[2048];

	snprintf(spec, sizeof(spec), "%s%s", s3_store_spec(s3), name);
	return s3_store_get_spec(s3, spec, max, buf, len);
}

static int b_head(struct store *s, const char *name, uint64_t *size)
{
	return s3_store_head(to_bucket(s)->s3, name, size);
}

static int b_put(struct store *s, const char *name, const void *buf,
		 size_t len, unsigned int flags, uint64_t *size, bool *wrote)
{
	int ret = s3_store_put(to_bucket(s)->s3, name, buf, len, size);

	(void)flags;		/* a PUT answered 200 is stored */
	*wrote = !ret && *size == len;
	return ret;
}

struct list_arg {
	store_list_fn fn;
	void *arg;
};

static int b_key(void *arg, const char *name, uint64_t size)
{
	const struct list_arg *a = arg;
	struct store_entry e = { .name = name, .size = size,
				 .type = STORE_OBJECT };

	return a->fn(a->arg, &e);
}

static int b_list(struct store *s, const char *sub, store_list_fn fn,
		  void *arg)
{
	struct list_arg a = { fn, arg };

	return s3_store_list(to_bucket(s)->s3, sub, b_key, &a);
}

static int b_del(struct store *s, const char *name, unsigned int flags)
{
	(void)flags;
	return s3_store_delete(to_bucket(s)->s3, name);
}

static int b_lock(struct store *s, bool exclusive)
{
	return s3_store_lock(to_bucket(s)->s3, exclusive);
}

static void b_unlock(struct store *s)
{
	s3_store_unlock(to_bucket(s)->s3);
}

static int b_sync(struct store *s)
{
	(void)s;
	return 0;
}

static int b_get_index(struct store *s, const char *spec, size_t max,
		       void **buf, size_t *len)
{
	if (!s3_is_spec(spec))
		return fl_err(-EINVAL, "%s: the images of a store in a bucket "
			      "are s3:// keys in that bucket", spec);
	return s3_store_get_spec(to_bucket(s)->s3, spec, max, buf, len);
}

static int b_put_index(struct store *s, const char *tmp, const char *spec,
		       const void *buf, size_t len)
{
	(void)tmp;		/* the index is put from memory */
	return s3_store_put_spec(to_bucket(s)->s3, spec, buf, len);
}

static int b_relative(struct store *s, const char *image, char *out,
		      size_t n)
{
	return store_relative_s3(image, s->name, out, n);
}

static bool b_is(struct store *s, const char *where)
{
	char root[1024];

	return s3_is_spec(where) &&
	       s3_root_spec(where, root, sizeof(root)) == 0 &&
	       !strcmp(root, s3_store_spec(to_bucket(s)->s3));
}

static void b_close(struct store *s)
{
	s3_store_close(to_bucket(s)->s3);	/* the lock taken with it */
	free(s);
}

static const struct store_ops bucket_ops = {
	.kind = "s3",
	.read = b_read,
	.get = b_get,
	.head = b_head,
	.put = b_put,
	.list = b_list,
	.del = b_del,
	.lock = b_lock,
	.unlock = b_unlock,
	.sync = b_sync,
	.get_index = b_get_index,
	.put_index = b_put_index,
	.relative = b_relative,
	.is = b_is,
	.close = b_close,
};

int bucket_open(const char *spec, struct store **out)
{
	struct bucket *b = calloc(1, sizeof(*b));
	const char *root;
	int ret;

	if (!b)
		return -ENOMEM;
	ret = s3_store_open(spec, &b->s3);
	if (ret < 0) {
		free(b);
		return ret;
	}
	root = s3_store_spec(b->s3);	/* "s3://BUCKET/PREFIX/" */
	snprintf(b->base.name, sizeof(b->base.name), "%.*s",
		 (int)strlen(root) - 1, root);
	snprintf(b->h.name, sizeof(b->h.name), "%.*s", (int)strlen(root) - 1,
		 root);
	b->h.s3 = s3_store_target(b->s3);
	b->h.url = b->h.s3->url;
	b->h.note = &b->base.note;	/* filled in by store_open() */
	b->base.ops = &bucket_ops;
	b->base.remote = true;
	*out = &b->base;
	return 0;
}
