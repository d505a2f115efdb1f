/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gc.h - gc of a chunk store, and the check that a store holds an image's
 * chunks (author/gc.c).
 */
#ifndef FAULTLINE_AUTHOR_GC_H
#define FAULTLINE_AUTHOR_GC_H

#include <stdbool.h>
#include <stdint.h>

#include "format/image.h"

struct s3_store;

struct store_gc_info {
	uint64_t images;	/* indexes read, parents included */
	uint64_t kept, kept_bytes;
	uint64_t deleted, deleted_bytes;
	/* symbolic links found in the store: skipped, never followed */
	uint64_t links;
	char link[128];		/* the first, relative to the store */
};

/*
 * Delete every object in the store at dir that no image registered in it
 * (author/registry.h) references.  Takes the store's lock exclusively:
 * waits for running creates, and blocks new ones until it is done.
 * Refuses (deleting nothing) a store whose registry is not on, or with
 * an entry it cannot read.  dry_run: count only.
 */
int store_gc(const char *dir, bool dry_run, struct store_gc_info *info);

/*
 * Does the store spec (dfd its root, or s3 a bucket's) hold every chunk
 * img names?  0, or -ENOENT with one line (what: the image) naming the
 * first missing; a bucket's chunks are listed once.
 */
int store_check_chunks(const char *spec, int dfd, struct s3_store *s3,
		       const struct image *img, const char *what);

#endif
