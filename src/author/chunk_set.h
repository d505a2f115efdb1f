/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chunk_set.h - a set of chunk names (SHA-256) that images name
 * (author/chunk_set.c), for gc and the registry.
 */
#ifndef FAULTLINE_AUTHOR_CHUNK_SET_H
#define FAULTLINE_AUTHOR_CHUNK_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/image.h"

struct store;

struct chunk_set {
	uint8_t (*h)[IMAGE_HASH_LEN];
	size_t n, cap;
};

/* memcmp of two names: qsort's and bsearch's order. */
int chunk_hash_cmp(const void *a, const void *b);
/*
 * registry_each()'s keep: the chunks img names (zero chunks have none)
 * added to the set s_ (unsorted).  0 or -ENOMEM.
 */
int chunk_set_add_image(void *s_, const struct image *img);
/* An object's file name back to its hash: false if it is none. */
bool chunk_hash_parse(const char *s, uint8_t *hash);

/*
 * Does the store s hold every chunk img names?  0, or -ENOENT with one
 * line (what: the image) naming the first missing; the store's chunks
 * are listed once.
 */
int store_check_chunks(struct store *s, const struct image *img,
		       const char *what);

#endif
