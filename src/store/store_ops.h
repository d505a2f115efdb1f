/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_ops.h - the one ops table of a store (get, put, head, list,
 * delete, the lock, ...) and the state every kind shares, struct store;
 * state only, like engine/core.h: each kind (dir_store.c, http_store.c,
 * bucket.c) fills it in, store.c opens and reads through it, and none of
 * them calls another through this header.  Names are relative to the
 * store's root ("chunks/HH/HASH", "registry/ID").
 */
#ifndef FAULTLINE_STORE_STORE_OPS_H
#define FAULTLINE_STORE_STORE_OPS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/note.h"

#define STORE_CHUNKS	"chunks"	/* DIR/chunks/HH/HASH */
#define STORE_LOCK	".lock"		/* DIR/.lock: create shares, gc owns */
/* DIR/chunks/HH/.tmp-*: an object being written; older ones are swept */
#define STORE_STALE_TMP_S 3600

/* store_open() */
#define STORE_CREATE	1u	/* a directory: make DIR and DIR/chunks */
#define STORE_EXISTING	2u	/* it must be a chunk store (chunks/) */

/* put, del */
#define STORE_DURABLE	1u	/* on stable storage on return */

/* What list() found. */
enum store_entry_type {
	STORE_OBJECT,		/* an object */
	STORE_LINK,		/* a symbolic link: skipped, never followed */
	STORE_TEMP,		/* a writer's temporary (".tmp-*") */
};
struct store_entry {
	const char *name;	/* relative to the store's root */
	uint64_t size;
	time_t mtime;		/* 0: not known */
	enum store_entry_type type;
};
typedef int (*store_list_fn)(void *arg, const struct store_entry *e);

struct store;

/* Every op returns 0 or -errno with one line (fl_err) naming the object. */
struct store_ops {
	const char *kind;	/* "directory", "http", "s3" */
	/* The object name, exactly len bytes, into buf (a chunk's read). */
	int (*read)(struct store *s, const char *name, void *buf, size_t len);
	/* The object name whole, at most max bytes: *buf malloc'd. */
	int (*get)(struct store *s, const char *name, size_t max, void **buf,
		   size_t *len);
	/* Is it there?  0 with its size; -ENOENT if not (said by nobody). */
	int (*head)(struct store *s, const char *name, uint64_t *size);
	/*
	 * Write it unless it is there: *size the size of the one now there
	 * (another encoding, maybe), *wrote if ours went in.
	 */
	int (*put)(struct store *s, const char *name, const void *buf,
		   size_t len, unsigned int flags, uint64_t *size,
		   bool *wrote);
	/* Every entry under sub ("chunks/"), fn's negative return stops it. */
	int (*list)(struct store *s, const char *sub, store_list_fn fn,
		    void *arg);
	int (*del)(struct store *s, const char *name, unsigned int flags);
	/*
	 * The store's lock: shared (a create, a registry change) or
	 * exclusive (gc), held until unlock() or close.
	 */
	int (*lock)(struct store *s, bool exclusive);
	void (*unlock)(struct store *s);
	/* Every object put so far on stable storage. */
	int (*sync)(struct store *s);
	/*
	 * An image's index, which lives beside the store's objects, not
	 * among them: read whole the one at spec; put buf (also written to
	 * the local file tmp) at spec.
	 */
	int (*get_index)(struct store *s, const char *spec, size_t max,
			 void **buf, size_t *len);
	int (*put_index)(struct store *s, const char *tmp, const char *spec,
			 const void *buf, size_t len);
	/* The store path an image at image records for this store. */
	int (*relative)(struct store *s, const char *image, char *out,
			size_t n);
	/* Is the store at where (a path or a spec) this one? */
	bool (*is)(struct store *s, const char *where);
	void (*close)(struct store *s);
};

struct flight;

struct store {
	const struct store_ops *ops;
	char name[4096];	/* for messages: the root, no '/' at its end */
	bool remote;		/* over the network: bytes counted */
	/* chunks by hash (store.c): the object cache, the single flight */
	struct http_cache *cache;
	struct note note;	/* the opener's note callback */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct flight *flights;
	_Atomic uint64_t fetches;	/* objects asked of the kind */
};

#endif
