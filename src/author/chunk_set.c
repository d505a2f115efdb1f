// SPDX-License-Identifier: Apache-2.0
/*
 * chunk_set.c - the chunks images name, as a sorted set of SHA-256
 * names: what gc keeps, and the registry's check that a store holds
 * every chunk of an image it registers.
 *
 * Decision: one sorted array searched with bsearch; a store's object
 * names are parsed back to hashes strictly (64 lowercase hex digits), so
 * a file that is not an object is never taken for one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "author/chunk_set.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "store/store.h"
#include "util/error.h"

int chunk_hash_cmp(const void *a, const void *b)
{
	return memcmp(a, b, IMAGE_HASH_LEN);
}

int chunk_set_add_image(void *s_, const struct image *img)
{
	struct chunk_set *s = s_;

	for (uint64_t i = 0; i < img->hdr.chunk_count; i++) {
		if (img->index[i].kind == IMAGE_ZERO)
			continue;
		if (s->n == s->cap) {
			size_t c = s->cap ? 2 * s->cap : 1024;
			void *p = realloc(s->h, c * IMAGE_HASH_LEN);

			if (!p)
				return -ENOMEM;
			s->h = p;
			s->cap = c;
		}
		memcpy(s->h[s->n++], img->index[i].sha, IMAGE_HASH_LEN);
	}
	return 0;
}

bool chunk_hash_parse(const char *s, uint8_t *hash)
{
	for (int i = 0; i < IMAGE_HASH_LEN; i++) {
		unsigned int v;

		if (!strchr("0123456789abcdef", s[2 * i]) || !s[2 * i] ||
		    !strchr("0123456789abcdef", s[2 * i + 1]) ||
		    !s[2 * i + 1] || sscanf(s + 2 * i, "%2x", &v) != 1)
			return false;
		hash[i] = (uint8_t)v;
	}
	return !s[2 * IMAGE_HASH_LEN];
}

/* ---- a new registry entry's chunks: all there? -------------------------- */

struct have {
	struct chunk_set want;
	bool *found;
};

static int have_seen(void *arg, const struct store_entry *e)
{
	struct have *h = arg;
	const char *base = strrchr(e->name, '/');
	uint8_t x[IMAGE_HASH_LEN], (*at)[IMAGE_HASH_LEN];

	if (e->type == STORE_OBJECT && base && chunk_hash_parse(base + 1, x) &&
	    (at = bsearch(x, h->want.h, h->want.n, IMAGE_HASH_LEN,
			  chunk_hash_cmp)))
		h->found[at - h->want.h] = true;
	return 0;
}

int store_check_chunks(struct store *s, const struct image *img,
		       const char *what)
{
	struct have h = { 0 };
	uint64_t missing = 0;
	size_t first = 0, n = 0;
	char name[128];
	int ret = chunk_set_add_image(&h.want, img);

	if (!ret && !(h.found = calloc(h.want.n + 1, 1)))
		ret = -ENOMEM;
	if (ret)
		return fl_err(ret, "%s: no memory", what);
	qsort(h.want.h, h.want.n, IMAGE_HASH_LEN, chunk_hash_cmp);
	for (size_t i = 0; i < h.want.n; i++)	/* each hash once */
		if (!n || memcmp(h.want.h[n - 1], h.want.h[i], IMAGE_HASH_LEN))
			memmove(h.want.h[n++], h.want.h[i], IMAGE_HASH_LEN);
	h.want.n = n;
	/* one listing, not a HEAD per chunk (a bucket's round trips) */
	ret = s->ops->list(s, STORE_CHUNKS "/", have_seen, &h);
	for (size_t i = 0; !ret && i < h.want.n; i++)
		if (!h.found[i] && !missing++)
			first = i;
	if (!ret && missing) {
		store_chunk_name(h.want.h[first], name, sizeof(name));
		ret = fl_err(-ENOENT, "%s: %llu of its chunks are not in the "
			     "store (%s/%s the first): not registered (a gc "
			     "before the registry deleted them? create it "
			     "again)", what, (unsigned long long)missing,
			     s->name, name);
	}
	free(h.want.h);
	free(h.found);
	return ret;
}
