/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - where objects live, opened by spec (store.c): store_open()
 * is the only place that picks a directory (dir_store.c), a URL prefix
 * read over HTTP(S) (http_store.c) or a bucket, s3://BUCKET[/PREFIX]
 * (bucket.c over s3_store.c and s3_lock.c); authoring (create, the
 * registry, gc) and the image source use nothing else, and reach every
 * kind through one ops table (store_ops.h).
 *
 * Decision: the object cache (`--cache`) and the single flight sit here,
 * above every kind (store.c), so a chunk read by hash is cached and
 * fetched once whatever the store is; a kind only moves bytes.
 */
#ifndef FAULTLINE_STORE_STORE_H
#define FAULTLINE_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/chunk_store.h"
#include "store/store_ops.h"

struct fl_source_opts;

/*
 * May an image written at image keep its chunks in the store at store
 * (NULL: none)?  An image in a bucket is an index of a store there, a
 * bucket's store wants its images in the bucket, a store read by URL
 * takes none.  0 or -errno with one line.
 */
int store_image_place(const char *image, const char *store);

/*
 * The store at spec: a directory, an http(s) URL prefix, or
 * s3://BUCKET[/PREFIX] (credentials from the environment); flags
 * STORE_*; o (may be NULL) gives the cache and the note callback.  0
 * with *out, or -errno with one line.
 */
int store_open(const char *spec, unsigned int flags,
	       const struct fl_source_opts *o, struct store **out);
void store_close(struct store *s);

/* Where store_read_chunk() found a chunk's bytes. */
enum store_from {
	STORE_FROM_STORE,	/* asked of the store by this reader */
	STORE_FROM_CACHE,	/* the local cache */
	STORE_FROM_FLIGHT,	/* another reader's fetch, copied */
};

/*
 * The chunk named hash (len bytes) through the cache and the single
 * flight: 0 (*from: where it came from) or -errno with one line.
 */
int store_read_chunk(struct store *s, const uint8_t *hash, void *buf,
		     size_t len, enum store_from *from);
/* What store_read_chunk gave for hash did not decode: drop the copy. */
void store_bad_chunk(struct store *s, const uint8_t *hash);

/*
 * A version 3 image's chunks from s (closed with the image): the
 * format's image_store over this table.  0 or -errno (s closed then).
 */
struct image;
int store_attach(struct image *img, struct store *s);
/*
 * The store of the version 3 image img at spec (a path or a URL), found
 * from spec's directory or prefix and opened; nothing for another
 * version.  0 or -errno with one line.
 */
int store_attach_at(struct image *img, const char *spec,
		    const struct fl_source_opts *o);

#endif
