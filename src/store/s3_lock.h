/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_lock.h - the lock of a chunk store in a bucket, with an owner and a
 * lease by the store's clock (s3_lock.c), above the bucket's requests
 * (s3_store.c), which ask it before each write through s3_store_hold().
 */
#ifndef FAULTLINE_STORE_S3_LOCK_H
#define FAULTLINE_STORE_S3_LOCK_H

#include <stdbool.h>

struct s3_store;
struct s3_lock;

#define S3_LOCKS	"locks/"
#define S3_LOCK_WAIT_MS	(5 * 60 * 1000)

/* The lease of the locks this process takes, in seconds (environment). */
#define S3_LEASE_ENV		"FAULTLINE_S3_LOCK_LEASE"
#define S3_LEASE_DEFAULT	180

/*
 * Take s's lock, shared (a create) or exclusive (a gc), taking over
 * those in the way whose lease has run out; renewed from a thread of its
 * own until s3_lock_drop().  0 with *out, or -errno with one line.
 */
int s3_lock_take(struct s3_store *s, bool exclusive, struct s3_lock **out);

/*
 * Is l still ours?  0, or -ESTALE with one line saying why not: once it
 * is known lost, and with strict also once its lease may have run out
 * since it was last renewed (elapsed time, counted short).
 */
int s3_lock_check(struct s3_lock *l, bool strict);

/* Renew l now and check it strictly: the store confirms it is ours. */
int s3_lock_confirm(struct s3_lock *l);

/* l's object, relative to the store's prefix ("locks/create-ID"). */
const char *s3_lock_name(const struct s3_lock *l);

/* Stop renewing l and delete its object (best effort); l may be NULL. */
void s3_lock_drop(struct s3_store *s, struct s3_lock *l);

/*
 * Locks, so that gc never deletes an object a create is about to name:
 * PREFIX/locks/create-ID (shared) and PREFIX/locks/gc-ID (exclusive),
 * each with an owner and a lease timed by the store's clock, renewed
 * while held (s3_lock.c, which says how).  A create that meets a live
 * gc's lock tries again for up to S3_LOCK_WAIT_MS; a gc that meets any
 * live lock gives up (-EBUSY, the line naming the lock), deleting
 * nothing; a lock whose lease ran out is taken over, said in one line.
 * While held, a chunk's PUT fails once the lock is known lost, a DELETE
 * unless the lock is surely still ours, and an index's PUT unless the
 * store confirms it right then.  0 or -errno with one line.
 */
int s3_store_lock(struct s3_store *s, bool exclusive);
/* Take ours away (best effort: a lock left behind is taken over later). */
void s3_store_unlock(struct s3_store *s);

#endif
