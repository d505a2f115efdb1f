/* SPDX-License-Identifier: Apache-2.0 */
/*
 * registry.h - the images a chunk store keeps (registry.c,
 * docs/image-format.md "Registry"): DIR/registry/ID, or
 * PREFIX/registry/ID in a bucket, a copy of the index whose content id
 * is ID; gc keeps the chunks of these and of nothing else.
 */
#ifndef FAULTLINE_AUTHOR_REGISTRY_H
#define FAULTLINE_AUTHOR_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/image.h"

#define STORE_REGISTRY		"registry"	   /* DIR/registry/ID */
/* It exists: every image the store keeps is registered (gc may run). */
#define STORE_REGISTRY_ON	"registry/.active"
#define STORE_INDEX_MAX		(1u << 30)	   /* an index's bytes */

struct store;

/*
 * A store just opened for writing (its lock held): a store with no chunk
 * yet starts its registry (the marker).  0 or -errno with a message.
 */
int registry_start(struct store *s);
/*
 * How an author opens a store: store_open(STORE_CREATE), its lock taken
 * shared (so no gc runs until store_close), then registry_start().  0
 * with *s, or -errno with a message (*s, if not NULL, to store_close).
 */
int registry_open_write(const char *dir, struct store **s);

/*
 * The end of `image create --store`: the index hb (hlen bytes) + ib
 * (ilen) registered, the parent's chain's layers in this store first;
 * then the index put in place by the store (put_index: tmp renamed to
 * image in a directory, put at image in a bucket).  0 or -errno with a
 * message (the new entry taken back if the index could not be put).
 */
int store_publish(struct store *s, const char *tmp, const char *image,
		  const char *parent, const void *hb, size_t hlen,
		  const void *ib, size_t ilen);

/* What register and delete did, one call each (for the CLI's lines). */
typedef void (*registry_said)(void *arg, const char *image,
			      const char *id, bool already, bool parent);

/*
 * `image register`: each of the n images (its index, a path or an
 * s3:// spec) and its parents in the same store registered, after
 * checking that the store holds every chunk they name; the registry
 * marked on.  Holds the store as a create does.  0 or -errno with a
 * message (images before the failing one stay registered).
 */
int store_register(const char *store, const char *const *images, int n,
		   registry_said said, void *arg);

/*
 * `image delete`: the entry of what (an index's path or spec, or a
 * content id in hex) removed; refused while a registered diff names it as
 * its parent.  id gets the content id.  0 or -errno with a message.
 */
int store_unregister(const char *store, const char *what,
		     char id[IMAGE_ID_HEX]);

/* Is the registry of store on?  1, 0, or -errno with a message. */
int store_registry_on(const char *store);

/*
 * For gc, under the store's exclusive lock: keep() called with every
 * registered index; *n counts them; sweep: a writer's temporaries older
 * than STORE_STALE_TMP_S (a register that died) removed.  Refuses with
 * one line (-EPERM) a store whose registry is not on, and (-EBADMSG) an
 * entry that is not the index its name says.
 */
int registry_each(struct store *s, bool sweep,
		  int (*keep)(void *arg, const struct image *img), void *arg,
		  uint64_t *n);

#endif
