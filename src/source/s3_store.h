/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_store.h - writing a chunk store in a bucket (s3_store.c): a signed
 * HEAD to ask whether an object is there, a signed PUT to upload one, a
 * LIST and a DELETE for gc.
 */
#ifndef FAULTLINE_SOURCE_S3_STORE_H
#define FAULTLINE_SOURCE_S3_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct s3_store;

/*
 * The store at s3://BUCKET[/PREFIX] for writing, credentials from the
 * environment as for reading (s3.c).  0, or -errno with a message naming
 * what is missing.
 */
int s3_store_open(const char *spec, struct s3_store **out);

/*
 * Is the object name (relative to the store's prefix) there?  0 with its
 * size (HEAD: 200), -ENOENT if not (404), else -EIO with one line naming
 * the object, the status and S3's <Code>.  Safe from several threads.
 */
int s3_store_head(struct s3_store *s, const char *name, uint64_t *size);

/*
 * Upload buf as the object name unless it is there (If-None-Match: *):
 * 0 and *size len, or the size of the one already there; else -errno
 * with one line naming the object, the status and S3's <Code>.
 */
int s3_store_put(struct s3_store *s, const char *name, const void *buf,
		 size_t len, uint64_t *size);

/*
 * Upload buf as the object spec (s3://BUCKET/KEY, which may replace one):
 * the index of an image.  0 or -errno with one line.
 */
int s3_store_put_spec(struct s3_store *s, const char *spec, const void *buf,
		      size_t len);

/*
 * The object spec (s3://BUCKET/KEY) read whole, at most max bytes (a
 * longer body fails the transfer): 0 with *buf (malloc'd) and *len,
 * -ENOENT if there is none (404), else -errno with one line.
 */
int s3_store_get_spec(struct s3_store *s, const char *spec, size_t max,
		      void **buf, size_t *len);

/*
 * Every object whose name (relative to the store's prefix) starts with
 * sub: key() called with each name and size, in key order, page after
 * page (ListObjectsV2); a negative return stops it and is returned.  0,
 * or -errno with one line.
 */
int s3_store_list(struct s3_store *s, const char *sub,
		  int (*key)(void *arg, const char *name, uint64_t size),
		  void *arg);

/* Delete the object name (relative to the prefix): 0 or -errno, one line. */
int s3_store_delete(struct s3_store *s, const char *name);

/*
 * Locks, so that gc never deletes an object a create is about to name:
 * PREFIX/locks/create-ID (shared) and PREFIX/locks/gc-ID (exclusive).
 * Taking one puts ours, then lists the others: with S3's strong
 * read-after-write and list consistency, of two that race each sees the
 * other's (or one sees both), so no gc and create both go on.  A create
 * that meets a gc's lock takes its own away and tries again, for up to
 * S3_LOCK_WAIT_MS; a gc that meets any other lock gives up (-EBUSY, the
 * line naming the lock), deleting nothing.  0 or -errno with one line.
 */
#define S3_LOCKS	"locks/"
#define S3_LOCK_WAIT_MS	(5 * 60 * 1000)
int s3_store_lock(struct s3_store *s, bool exclusive);
/* Take ours away (best effort: a lock left behind is named by gc). */
void s3_store_unlock(struct s3_store *s);

/* The store's spec, "s3://BUCKET/PREFIX/" (with a '/'). */
const char *s3_store_spec(const struct s3_store *s);

void s3_store_close(struct s3_store *s);

#endif
