// SPDX-License-Identifier: Apache-2.0
/*
 * gc.c - gc of a chunk store (docs/image-format.md, "Chunk store"), in a
 * directory or a bucket: delete every object no registered image names;
 * and the registry's check that an image's chunks are all there.
 *
 * Decisions: gc holds the store's lock exclusively while it reads the
 * indexes it keeps and deletes, so it never deletes an object a create
 * has found there and is about to reference (a create holds it shared).
 * Paths beneath a directory store are opened with io_open_beneath: a
 * symbolic link planted in it is skipped and counted, never followed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "author/gc.h"
#include "author/registry.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "store/s3_store.h"
#include "util/error.h"
#include "util/io.h"

/* ---- gc ----------------------------------------------------------------- */

struct hash_set {
	uint8_t (*h)[IMAGE_HASH_LEN];
	size_t n, cap;
};

static int cmp_hash(const void *a, const void *b)
{
	return memcmp(a, b, IMAGE_HASH_LEN);
}

/* registry_each()'s keep: an index's chunks into the set s. */
static int set_add_image(void *s_, const struct image *img)
{
	struct hash_set *s = s_;

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

static bool hex_name(const char *s, uint8_t *hash)
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

/* A symbolic link where gc looked: skipped, never followed; the first named. */
static void gc_link(struct store_gc_info *info, const char *sub,
		    const char *name)
{
	if (!info->links++)
		snprintf(info->link, sizeof(info->link), "%.16s%s%.100s", sub,
			 name ? "/" : "", name ? name : "");
}

/* Sweep one chunks/HH directory. */
static int gc_sweep(int dfd, const char *sub, const struct hash_set *s,
		    bool dry_run, struct store_gc_info *info)
{
	int fd = io_open_beneath(dfd, sub, O_RDONLY | O_DIRECTORY, 0);
	time_t now = time(NULL);
	struct dirent *de;
	DIR *d;

	if (fd == -ELOOP) {
		gc_link(info, sub, NULL);
		return 0;
	}
	if (fd < 0 || !(d = fdopendir(fd))) {
		int ret = fd < 0 ? fd : -errno;

		if (fd >= 0)
			close(fd);
		return fl_err(ret, "%s: %s", sub, strerror(-ret));
	}
	while ((de = readdir(d))) {
		uint8_t h[IMAGE_HASH_LEN];
		struct stat st;
		bool keep;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISLNK(st.st_mode))
			gc_link(info, sub, de->d_name);
		if (!S_ISREG(st.st_mode))
			continue;
		if (!strncmp(de->d_name, ".tmp-", 5)) {
			/* a create's object in flight, or one that died */
			if (!dry_run && now - st.st_mtime > STORE_STALE_TMP_S)
				unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (!hex_name(de->d_name, h) || strncmp(de->d_name, sub + sizeof(STORE_CHUNKS), 2))
			continue;	/* not an object: not ours to delete */
		keep = bsearch(h, s->h, s->n, IMAGE_HASH_LEN, cmp_hash);
		if (keep) {
			info->kept++;
			info->kept_bytes += (uint64_t)st.st_size;
		} else if (dry_run || unlinkat(dirfd(d), de->d_name, 0) == 0) {
			info->deleted++;
			info->deleted_bytes += (uint64_t)st.st_size;
		}
	}
	closedir(d);
	return 0;
}

/* ---- gc of a store in a bucket ------------------------------------------ */

struct sweep_s3 {
	struct s3_store *st;
	const struct hash_set *keep;
	bool dry_run;
	struct store_gc_info *info;
};

/* One object of PREFIX/chunks/: kept, or deleted. */
static int sweep_s3_one(void *arg, const char *name, uint64_t size)
{
	struct sweep_s3 *w = arg;
	const char *base = strrchr(name, '/');
	uint8_t h[IMAGE_HASH_LEN];

	/* chunks/HH/HASH, HH the hash's first two digits */
	if (!base || base - name != (ptrdiff_t)strlen(STORE_CHUNKS "/HH") ||
	    !hex_name(base + 1, h) || memcmp(base - 2, base + 1, 2))
		return 0;
	if (bsearch(h, w->keep->h, w->keep->n, IMAGE_HASH_LEN, cmp_hash)) {
		w->info->kept++;
		w->info->kept_bytes += size;
		return 0;
	}
	int ret = w->dry_run ? 0 : s3_store_delete(w->st, name);

	if (!ret) {
		w->info->deleted++;
		w->info->deleted_bytes += size;
	}
	return ret;
}

/* store_gc() of s3://BUCKET[/PREFIX], under its exclusive lock. */
static int gc_s3(const char *dir, bool dry_run, struct store_gc_info *info)
{
	struct hash_set s = { 0 };
	struct s3_store *st;
	int ret = s3_store_open(dir, &st);

	if (ret < 0)
		return ret;
	ret = s3_store_lock(st, true);
	/* Under the lock: every index a create finished is registered. */
	if (!ret)
		ret = registry_each(dir, -1, st, false, set_add_image, &s,
				    &info->images);
	if (!ret) {
		struct sweep_s3 w = { st, &s, dry_run, info };

		qsort(s.h, s.n, IMAGE_HASH_LEN, cmp_hash);
		ret = s3_store_list(st, STORE_CHUNKS "/", sweep_s3_one, &w);
	}
	free(s.h);
	s3_store_close(st);	/* the lock taken away with it */
	return ret;
}

int store_gc(const char *dir, bool dry_run, struct store_gc_info *info)
{
	struct hash_set s = { 0 };
	struct stat st;
	int dfd, cfd = -1, lock = -1, ret = 0;
	struct dirent *de;
	DIR *d = NULL;

	memset(info, 0, sizeof(*info));
	if (store_is_s3(dir))
		return gc_s3(dir, dry_run, info);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fl_err(-errno, "--store %s: %m", dir);
	cfd = io_open_beneath(dfd, STORE_CHUNKS, O_RDONLY | O_DIRECTORY, 0);
	if (fstat(dfd, &st) < 0 || cfd < 0) {
		ret = cfd == -ENOENT ? fl_err(cfd, "--store %s: not a chunk "
					      "store (no %s/)", dir,
					      STORE_CHUNKS) :
		      fl_err(cfd, "--store %s: %s: %s", dir, STORE_CHUNKS,
			     io_beneath_strerror(cfd));
		goto out;
	}
	lock = io_open_beneath(dfd, STORE_LOCK, O_RDWR | O_CREAT, 0644);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		ret = lock < 0 ? lock : -errno;
		ret = fl_err(ret, "--store %s: lock %s: %s", dir, STORE_LOCK,
			     io_beneath_strerror(ret));
		goto out;
	}
	/* Under the lock: every index a create finished is registered. */
	ret = registry_each(dir, dfd, NULL, !dry_run, set_add_image, &s,
			    &info->images);
	if (ret < 0)
		goto out;
	qsort(s.h, s.n, IMAGE_HASH_LEN, cmp_hash);
	d = fdopendir(cfd);
	if (!d) {
		ret = fl_err(-errno, "%s/%s: %m", dir, STORE_CHUNKS);
		goto out;
	}
	while ((de = readdir(d)) && !ret) {
		char sub[64];

		if (strlen(de->d_name) != 2 ||
		    !strchr("0123456789abcdef", de->d_name[0]) ||
		    !strchr("0123456789abcdef", de->d_name[1]))
			continue;
		snprintf(sub, sizeof(sub), STORE_CHUNKS "/%s", de->d_name);
		ret = gc_sweep(dfd, sub, &s, dry_run, info);
	}
out:
	if (d)
		closedir(d);
	else if (cfd >= 0)
		close(cfd);
	free(s.h);
	if (lock >= 0)
		close(lock);
	close(dfd);
	return ret;
}

/* ---- a new registry entry's chunks: all there? -------------------------- */

struct have {
	struct hash_set want;
	bool *found;
};

static int have_seen(void *arg, const char *name, uint64_t size)
{
	struct have *h = arg;
	const char *base = strrchr(name, '/');
	uint8_t x[IMAGE_HASH_LEN], (*at)[IMAGE_HASH_LEN];

	(void)size;
	if (base && hex_name(base + 1, x) &&
	    (at = bsearch(x, h->want.h, h->want.n, IMAGE_HASH_LEN, cmp_hash)))
		h->found[at - h->want.h] = true;
	return 0;
}

int store_check_chunks(const char *spec, int dfd, struct s3_store *s3,
		       const struct image *img, const char *what)
{
	struct have h = { 0 };
	uint64_t missing = 0;
	size_t first = 0, n = 0;
	char name[128];
	int ret = set_add_image(&h.want, img);

	if (!ret && !(h.found = calloc(h.want.n + 1, 1)))
		ret = -ENOMEM;
	if (ret)
		return fl_err(ret, "%s: no memory", what);
	qsort(h.want.h, h.want.n, IMAGE_HASH_LEN, cmp_hash);
	for (size_t i = 0; i < h.want.n; i++)	/* each hash once */
		if (!n || memcmp(h.want.h[n - 1], h.want.h[i], IMAGE_HASH_LEN))
			memmove(h.want.h[n++], h.want.h[i], IMAGE_HASH_LEN);
	h.want.n = n;
	if (s3)		/* one LIST, not a HEAD per chunk */
		ret = s3_store_list(s3, STORE_CHUNKS "/", have_seen, &h);
	for (size_t i = 0; !ret && i < h.want.n; i++) {
		struct stat st;

		if (!s3) {
			store_chunk_name(h.want.h[i], name, sizeof(name));
			h.found[i] = !fstatat(dfd, name, &st,
					      AT_SYMLINK_NOFOLLOW) &&
				     S_ISREG(st.st_mode);
		}
		if (!h.found[i] && !missing++)
			first = i;
	}
	if (!ret && missing) {
		store_chunk_name(h.want.h[first], name, sizeof(name));
		ret = fl_err(-ENOENT, "%s: %llu of its chunks are not in the "
			     "store (%s/%s the first): not registered (a gc "
			     "before the registry deleted them? create it "
			     "again)", what, (unsigned long long)missing, spec,
			     name);
	}
	free(h.want.h);
	free(h.found);
	return ret;
}
