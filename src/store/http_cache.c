// SPDX-License-Identifier: Apache-2.0
/*
 * http_cache.c - a size-bounded local cache of remote blocks, so a second
 * restore on the same host reads nothing remote (`--cache DIR`).
 *
 * Layout: one file per block, DIR/KKKKKKKKKKKKKKKK-BBBBBBBB.blk, K the
 * object's key (XXH64 of its URL without signing parameters, its size and
 * its ETag or Last-Modified, computed by http.c: a re-signed
 * presigned URL hits, a changed object does not) and B the block index,
 * both hex.  A file is a 40-byte header (magic, key, block, XXH64 of the
 * data, data length; host byte order: the cache is local) and the data.
 * Decisions: a file per block rather than a sparse file plus bitmap, so a
 * block is written whole to a temporary name and renamed into place (no
 * reader ever sees it half-written), eviction is an unlink, and several
 * processes can share a directory without locking.  Every hit is hashed
 * anyway: a torn or corrupted file is removed and refetched, never served.
 * Chunks of a chunk store (store.c, by hash) are kept so too, keyed by
 * their name instead, DIR/HHHH...HHHH.chk (the chunk's SHA-256, 64 hex
 * digits), so one fetched for one image serves every image that holds
 * it; in the index such an entry's key and block are the hash's first
 * 16 bytes, the block's top bit set (no block of an object has it).
 * LRU: the in-memory index is built from the directory at open, ordered by
 * file mtime; a hit updates the mtime, so recency survives restarts.  The
 * bound is kept per process (another process's writes are counted when
 * seen), which is approximate when several share one directory.
 * Paths: DIR is opened as given, once; every file in it is reached from
 * that descriptor with io_open_beneath or an *at call on its own name, so
 * a symbolic link planted in the cache is never followed (a read skips
 * it, a write replaces the link itself).  A write that fails (the disk
 * full) costs only the caching: the first is said in one line, once per
 * directory and process, and the origin serves what the cache lacks.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "util/error.h"
#include "util/io.h"
#include "store/http_cache.h"
#include "util/note.h"
#include "util/clock.h"

#define HC_MAGIC	"FLHCBLK1"
#define HC_NAME_LEN	(16 + 1 + 8 + 4)	/* key-block.blk */
#define HC_CHUNK_LEN	(64 + 4)		/* hash.chk */
#define HC_CHUNK_BIT	(1ull << 63)
#define HC_STALE_TMP_S	3600

struct hc_header {
	char magic[8];
	uint64_t key;
	uint64_t block;
	uint64_t hash;
	uint32_t len;
	uint32_t reserved;
};

_Static_assert(sizeof(struct hc_header) == 40, "cache header layout");

struct hc_entry {
	uint64_t key, block;
	uint64_t bytes;		/* file size; 0: not present */
	uint64_t used;		/* ns, CLOCK_REALTIME (comparable to mtimes) */
	uint8_t sha[32];	/* a chunk's (block has HC_CHUNK_BIT) */
};

struct http_cache {
	char *dir;
	int dfd;		/* DIR, opened as given */
	struct note *note;	/* for its notes; may be NULL */
	uint64_t max_bytes;
	uint64_t total;		/* bytes of present entries */
	pthread_mutex_t mu;
	struct hc_entry *ents;	/* entries are never removed, only emptied */
	size_t nents, cap;
	uint32_t *table;	/* open addressing: index + 1 into ents; 0 free */
	size_t tsize;		/* power of two, > 2 * nents */
	unsigned int tmp_seq;
};

static size_t slot_of(uint64_t key, uint64_t block, size_t tsize)
{
	return (size_t)((key ^ (block * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull
			>> 17) & (tsize - 1);
}

static int table_grow(struct http_cache *c)
{
	size_t n = c->tsize ? c->tsize * 2 : 1024;
	uint32_t *t = calloc(n, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < c->nents; i++) {
		size_t s = slot_of(c->ents[i].key, c->ents[i].block, n);

		while (t[s])
			s = (s + 1) & (n - 1);
		t[s] = (uint32_t)i + 1;
	}
	free(c->table);
	c->table = t;
	c->tsize = n;
	return 0;
}

/* The entry for (key, block), created empty if create; NULL otherwise. */
static struct hc_entry *lookup(struct http_cache *c, uint64_t key,
			       uint64_t block, bool create)
{
	size_t s;

	if (c->tsize) {
		s = slot_of(key, block, c->tsize);
		for (; c->table[s]; s = (s + 1) & (c->tsize - 1)) {
			struct hc_entry *e = &c->ents[c->table[s] - 1];

			if (e->key == key && e->block == block)
				return e;
		}
	}
	if (!create)
		return NULL;
	if ((c->nents + 1) * 2 > c->tsize && table_grow(c) < 0)
		return NULL;
	if (c->nents == c->cap) {
		size_t n = c->cap ? c->cap * 2 : 256;
		struct hc_entry *p = realloc(c->ents, n * sizeof(*p));

		if (!p)
			return NULL;
		c->ents = p;
		c->cap = n;
	}
	s = slot_of(key, block, c->tsize);
	while (c->table[s])
		s = (s + 1) & (c->tsize - 1);
	c->table[s] = (uint32_t)c->nents + 1;
	c->ents[c->nents] = (struct hc_entry){ .key = key, .block = block };
	return &c->ents[c->nents++];
}

/* File names, relative to DIR: */
static void block_path(char *buf, size_t n, uint64_t key, uint64_t block)
{
	snprintf(buf, n, "%016" PRIx64 "-%08" PRIx64 ".blk", key, block);
}

static void chunk_path(char *buf, size_t n, const uint8_t *sha)
{
	int at = 0;

	for (int i = 0; i < 32 && (size_t)at + 3 < n; i++)
		at += snprintf(buf + at, n - (size_t)at, "%02x", sha[i]);
	snprintf(buf + at, n - (size_t)at, ".chk");
}

static void entry_path(char *buf, size_t n, const struct hc_entry *e)
{
	if (e->block & HC_CHUNK_BIT)
		chunk_path(buf, n, e->sha);
	else
		block_path(buf, n, e->key, e->block);
}

/* A chunk's key and block in the index (the top bit marks a chunk). */
static void chunk_key(const uint8_t *sha, uint64_t *key, uint64_t *block)
{
	memcpy(key, sha, 8);
	memcpy(block, sha + 8, 8);
	*block |= HC_CHUNK_BIT;
}

static void set_present(struct http_cache *c, struct hc_entry *e,
			uint64_t bytes, uint64_t used)
{
	c->total -= e->bytes;
	e->bytes = bytes;
	c->total += bytes;
	e->used = used;
}

/* Remove least recently used blocks until within the bound (mu held). */
static void evict(struct http_cache *c, const struct hc_entry *keep)
{
	char path[128];

	while (c->total > c->max_bytes) {
		struct hc_entry *v = NULL;

		for (size_t i = 0; i < c->nents; i++) {
			struct hc_entry *e = &c->ents[i];

			if (e->bytes && e != keep && (!v || e->used < v->used))
				v = e;
		}
		if (!v)
			return;
		entry_path(path, sizeof(path), v);
		unlinkat(c->dfd, path, 0);
		set_present(c, v, 0, 0);
	}
}

static void scan(struct http_cache *c)
{
	int dfd = io_open_beneath(c->dfd, ".", O_RDONLY | O_DIRECTORY, 0);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	struct dirent *de;
	time_t now = time(NULL);

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		uint64_t key, block;
		struct stat st;
		int n = -1;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISLNK(st.st_mode))
			note_rate(c->note, "--cache %s/%s: a symbolic link: "
				  "skipped, not followed", c->dir,
				  de->d_name);
		if (!S_ISREG(st.st_mode))
			continue;
		if (!strncmp(de->d_name, ".tmp-", 5)) {
			if (now - st.st_mtime > HC_STALE_TMP_S)
				unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		uint8_t sha[32];

		if (strlen(de->d_name) == HC_CHUNK_LEN &&
		    !strcmp(de->d_name + 64, ".chk")) {
			int i;

			for (i = 0; i < 32; i++) {
				unsigned int v;

				if (!isxdigit((unsigned char)de->d_name[2 * i]) ||
				    !isxdigit((unsigned char)de->d_name[2 * i + 1]) ||
				    sscanf(de->d_name + 2 * i, "%2x", &v) != 1)
					break;
				sha[i] = (uint8_t)v;
			}
			if (i < 32)
				continue;
			chunk_key(sha, &key, &block);
		} else if (strlen(de->d_name) != HC_NAME_LEN ||
			   sscanf(de->d_name, "%16" SCNx64 "-%8" SCNx64 ".blk%n",
				  &key, &block, &n) != 2 || n != HC_NAME_LEN) {
			continue;
		}
		struct hc_entry *e = lookup(c, key, block, true);

		if (e && (block & HC_CHUNK_BIT))
			memcpy(e->sha, sha, 32);
		if (e)
			set_present(c, e, (uint64_t)st.st_size,
				    (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
				    (uint64_t)st.st_mtim.tv_nsec);
	}
	closedir(d);
}

int http_cache_open(const char *dir, uint64_t max_bytes,
		    struct note *note, struct http_cache **out)
{
	struct http_cache *c;
	int dfd;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return fl_err(-errno, "%s: cannot create cache directory: %m",
			      dir);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fl_err(-errno, "%s: cannot open cache directory: %m",
			      dir);
	if (faccessat(dfd, ".", W_OK, AT_EACCESS) < 0) {
		int ret = fl_err(-errno, "%s: cache directory not writable: %m",
				 dir);

		close(dfd);
		return ret;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->dir = strdup(dir))) {
		free(c);
		close(dfd);
		return -ENOMEM;
	}
	c->dfd = dfd;
	c->note = note;
	c->max_bytes = max_bytes;
	pthread_mutex_init(&c->mu, NULL);
	scan(c);
	evict(c, NULL);
	*out = c;
	return 0;
}

void http_cache_close(struct http_cache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->mu);
	close(c->dfd);
	free(c->ents);
	free(c->table);
	free(c->dir);
	free(c);
}

/* get and put of a block at path, or of a chunk (sha not NULL). */
static bool cache_get(struct http_cache *c, uint64_t key, uint64_t block,
		      const uint8_t *sha, const char *path, void *dst,
		      size_t len);
static void cache_put(struct http_cache *c, uint64_t key, uint64_t block,
		      const uint8_t *sha, const char *path, const void *src,
		      size_t len);

bool http_cache_get(struct http_cache *c, uint64_t key, uint64_t block,
		    void *dst, size_t len)
{
	char path[128];

	block_path(path, sizeof(path), key, block);
	return cache_get(c, key, block, NULL, path, dst, len);
}

void http_cache_put(struct http_cache *c, uint64_t key, uint64_t block,
		    const void *src, size_t len)
{
	char path[128];

	block_path(path, sizeof(path), key, block);
	cache_put(c, key, block, NULL, path, src, len);
}

bool http_cache_get_chunk(struct http_cache *c, const uint8_t *sha,
			  void *dst, size_t len)
{
	char path[128];
	uint64_t key, block;

	chunk_key(sha, &key, &block);
	chunk_path(path, sizeof(path), sha);
	return cache_get(c, key, block, sha, path, dst, len);
}

void http_cache_put_chunk(struct http_cache *c, const uint8_t *sha,
			  const void *src, size_t len)
{
	char path[128];
	uint64_t key, block;

	chunk_key(sha, &key, &block);
	chunk_path(path, sizeof(path), sha);
	cache_put(c, key, block, sha, path, src, len);
}

void http_cache_drop_chunk(struct http_cache *c, const uint8_t *sha)
{
	char path[128];
	uint64_t key, block;
	struct hc_entry *e;

	chunk_key(sha, &key, &block);
	chunk_path(path, sizeof(path), sha);
	unlinkat(c->dfd, path, 0);
	pthread_mutex_lock(&c->mu);
	e = lookup(c, key, block, false);
	if (e)
		set_present(c, e, 0, 0);
	pthread_mutex_unlock(&c->mu);
}

/*
 * A cache file could not be written (err): said once per directory and
 * process (a full disk fails every write after it; a server opens a
 * cache per source), in one line; what the cache lacks is read from the
 * origin.
 */
static void write_failed(struct http_cache *c, int err)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct { dev_t dev; ino_t ino; } said[16];
	static unsigned int nsaid;
	struct stat st;
	bool first = true;

	if (fstat(c->dfd, &st) < 0)
		return;
	pthread_mutex_lock(&mu);
	for (unsigned int i = 0; i < nsaid && first; i++)
		first = said[i].dev != st.st_dev || said[i].ino != st.st_ino;
	if (first && nsaid < sizeof(said) / sizeof(said[0])) {
		said[nsaid].dev = st.st_dev;
		said[nsaid++].ino = st.st_ino;
	}
	pthread_mutex_unlock(&mu);
	if (first)
		note_say(c->note, "--cache %s: %s (%s): what the cache lacks "
			 "is read from the origin, and not kept", c->dir,
			 err == -ENOSPC || err == -EDQUOT ? "its disk is full" :
			 "a block cannot be written", io_beneath_strerror(err));
}

static bool cache_get(struct http_cache *c, uint64_t key, uint64_t block,
		      const uint8_t *sha, const char *path, void *dst,
		      size_t len)
{
	struct hc_header h;
	struct iovec iov[2] = { { &h, sizeof(h) }, { dst, len } };
	struct hc_entry *e;
	bool good;
	ssize_t n;
	int fd;

	fd = io_open_beneath(c->dfd, path, O_RDONLY, 0);
	if (fd == -ELOOP)
		note_rate(c->note, "--cache %s/%s: a symbolic link: not "
			  "followed, read from the origin", c->dir, path);
	if (fd < 0)
		return false;
	n = preadv(fd, iov, 2, 0);
	good = n == (ssize_t)(sizeof(h) + len) &&
	       !memcmp(h.magic, HC_MAGIC, sizeof(h.magic)) && h.key == key &&
	       h.block == block && h.len == len &&
	       XXH64(dst, len, 0) == h.hash;
	if (good)
		futimens(fd, NULL);	/* recency for the next process */
	close(fd);
	pthread_mutex_lock(&c->mu);
	e = lookup(c, key, block, good);
	if (good && e) {
		if (sha)
			memcpy(e->sha, sha, 32);
		set_present(c, e, sizeof(h) + len, wall_ns());
	} else if (!good) {
		unlinkat(c->dfd, path, 0);	/* torn or corrupt: never served */
		if (e)
			set_present(c, e, 0, 0);
	}
	pthread_mutex_unlock(&c->mu);
	return good;
}

static void cache_put(struct http_cache *c, uint64_t key, uint64_t block,
		      const uint8_t *sha, const char *path, const void *src,
		      size_t len)
{
	char tmp[64];
	struct hc_header h = {
		.key = key, .block = block, .len = (uint32_t)len,
		.hash = XXH64(src, len, 0),
	};
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)src, len } };
	struct hc_entry *e;
	unsigned int seq;
	ssize_t n;
	int fd, err;

	memcpy(h.magic, HC_MAGIC, sizeof(h.magic));
	pthread_mutex_lock(&c->mu);
	seq = c->tmp_seq++;
	pthread_mutex_unlock(&c->mu);
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%d-%u", getpid(), gettid(), seq);
	fd = io_open_beneath(c->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		write_failed(c, fd);
		return;
	}
	n = pwritev(fd, iov, 2, 0);
	err = n < 0 ? -errno : n != (ssize_t)(sizeof(h) + len) ? -ENOSPC : 0;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && renameat(c->dfd, tmp, c->dfd, path) < 0)
		err = -errno;
	if (err) {
		unlinkat(c->dfd, tmp, 0);
		write_failed(c, err);
		return;
	}
	pthread_mutex_lock(&c->mu);
	e = lookup(c, key, block, true);
	if (e) {
		if (sha)
			memcpy(e->sha, sha, 32);
		set_present(c, e, sizeof(h) + len, wall_ns());
		evict(c, e);
	}
	pthread_mutex_unlock(&c->mu);
}

uint64_t http_cache_bytes(struct http_cache *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->mu);
	n = c->total;
	pthread_mutex_unlock(&c->mu);
	return n;
}
