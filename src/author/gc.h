/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gc.h - gc of a chunk store (author/gc.c).
 */
#ifndef FAULTLINE_AUTHOR_GC_H
#define FAULTLINE_AUTHOR_GC_H

#include <stdbool.h>
#include <stdint.h>

#include "format/image.h"

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

#endif
