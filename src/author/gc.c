// SPDX-License-Identifier: Apache-2.0
/*
 * gc.c - gc of a chunk store (docs/image-format.md, "Chunk store"), in a
 * directory or a bucket: delete every object no registered image names.
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

#include "author/chunk_set.h"
#include "author/gc.h"
#include "author/registry.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "store/s3_lock.h"
#include "store/s3_store.h"
#include "util/error.h"
#include "util/io.h"

/* A symbolic link where gc looked: skipped, never followed; the first named. */
static void gc_link(struct store_gc_info *info, const char *sub,
		    const char *name)
{
	if (!info->links++)
		snprintf(info->link, sizeof(info->link), "%.16s%s%.100s", sub,
			 name ? "/" : "", name ? name : "");
}

/* Sweep one chunks/HH directory. */
static int gc_sweep(int dfd, const char *sub, const struct chunk_set *s,
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
		if (!chunk_hash_parse(de->d_name, h) || strncmp(de->d_name, sub + sizeof(STORE_CHUNKS), 2))
			continue;	/* not an object: not ours to delete */
		keep = bsearch(h, s->h, s->n, IMAGE_HASH_LEN, chunk_hash_cmp);
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
	const struct chunk_set *keep;
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
	    !chunk_hash_parse(base + 1, h) || memcmp(base - 2, base + 1, 2))
		return 0;
	if (bsearch(h, w->keep->h, w->keep->n, IMAGE_HASH_LEN, chunk_hash_cmp)) {
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
	struct chunk_set s = { 0 };
	struct s3_store *st;
	int ret = s3_store_open(dir, &st);

	if (ret < 0)
		return ret;
	ret = s3_store_lock(st, true);
	/* Under the lock: every index a create finished is registered. */
	if (!ret)
		ret = registry_each(dir, -1, st, false, chunk_set_add_image, &s,
				    &info->images);
	if (!ret) {
		struct sweep_s3 w = { st, &s, dry_run, info };

		qsort(s.h, s.n, IMAGE_HASH_LEN, chunk_hash_cmp);
		ret = s3_store_list(st, STORE_CHUNKS "/", sweep_s3_one, &w);
	}
	free(s.h);
	s3_store_close(st);	/* the lock taken away with it */
	return ret;
}

int store_gc(const char *dir, bool dry_run, struct store_gc_info *info)
{
	struct chunk_set s = { 0 };
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
	ret = registry_each(dir, dfd, NULL, !dry_run, chunk_set_add_image, &s,
			    &info->images);
	if (ret < 0)
		goto out;
	qsort(s.h, s.n, IMAGE_HASH_LEN, chunk_hash_cmp);
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
