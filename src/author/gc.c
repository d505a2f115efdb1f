// SPDX-License-Identifier: Apache-2.0
/*
 * gc.c - gc of a chunk store (docs/image-format.md, "Chunk store"), in a
 * directory or a bucket: delete every object no registered image names.
 *
 * Decisions: gc holds the store's lock exclusively while it reads the
 * indexes it keeps and deletes, so it never deletes an object a create
 * has found there and is about to reference (a create holds it shared).
 * The store is reached only through its ops (store/store.h), whatever
 * its kind: a symbolic link a directory's listing reports is skipped and
 * counted, never followed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "author/chunk_set.h"
#include "author/gc.h"
#include "author/registry.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "store/store.h"
#include "util/error.h"

struct sweep {
	struct store *s;
	const struct chunk_set *keep;
	bool dry_run;
	time_t now;
	struct store_gc_info *info;
};

/* A symbolic link where gc looked: skipped, never followed; the first named. */
static void gc_link(struct store_gc_info *info, const char *name)
{
	if (!info->links++)
		snprintf(info->link, sizeof(info->link), "%s", name);
}

/* Is name chunks/HH/HASH, HH the hash's first two digits?  Its hash. */
static bool object_name(const char *name, uint8_t *h)
{
	const char *base = strrchr(name, '/');

	return base && base - name == (ptrdiff_t)strlen(STORE_CHUNKS "/HH") &&
	       !strncmp(name, STORE_CHUNKS "/", sizeof(STORE_CHUNKS)) &&
	       chunk_hash_parse(base + 1, h) && !memcmp(base - 2, base + 1, 2);
}

/* One entry under chunks/: kept, deleted, or skipped. */
static int sweep_one(void *arg, const struct store_entry *e)
{
	struct sweep *w = arg;
	uint8_t h[IMAGE_HASH_LEN];
	int ret;

	if (e->type == STORE_LINK) {
		gc_link(w->info, e->name);
		return 0;
	}
	if (e->type == STORE_TEMP) {
		/* a create's object in flight, or one that died */
		if (!w->dry_run && e->mtime &&
		    w->now - e->mtime > STORE_STALE_TMP_S)
			w->s->ops->del(w->s, e->name, 0);
		return 0;
	}
	if (!object_name(e->name, h))
		return 0;	/* not an object: not ours to delete */
	if (bsearch(h, w->keep->h, w->keep->n, IMAGE_HASH_LEN,
		    chunk_hash_cmp)) {
		w->info->kept++;
		w->info->kept_bytes += e->size;
		return 0;
	}
	ret = w->dry_run ? 0 : w->s->ops->del(w->s, e->name, 0);
	if (!ret) {
		w->info->deleted++;
		w->info->deleted_bytes += e->size;
	}
	return ret;
}

int store_gc(const char *dir, bool dry_run, struct store_gc_info *info)
{
	struct chunk_set keep = { 0 };
	struct store *s;
	int ret;

	memset(info, 0, sizeof(*info));
	ret = store_open(dir, STORE_EXISTING, NULL, &s);
	if (ret < 0)
		return ret;
	ret = s->ops->lock(s, true);
	/* Under the lock: every index a create finished is registered. */
	if (!ret)
		ret = registry_each(s, !dry_run, chunk_set_add_image, &keep,
				    &info->images);
	if (!ret) {
		struct sweep w = { s, &keep, dry_run, time(NULL), info };

		qsort(keep.h, keep.n, IMAGE_HASH_LEN, chunk_hash_cmp);
		ret = s->ops->list(s, STORE_CHUNKS "/", sweep_one, &w);
	}
	free(keep.h);
	store_close(s);		/* the lock taken away with it */
	return ret;
}
