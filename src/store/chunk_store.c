// SPDX-License-Identifier: Apache-2.0
/*
 * chunk_store.c - a chunk store in a directory (docs/image-format.md, "Chunk
 * store"): reading objects for version 3 images, writing them for
 * image_create, and gc.
 *
 * Decisions: an object is written to a temporary name beside its final
 * one and moved into place with renameat2(RENAME_NOREPLACE), so a reader
 * never sees half an object and an object once in place is never
 * replaced (an index written beside ours may record its exact size).
 * Objects are synced once, with syncfs(), before the index naming them
 * is renamed into place.  A create holds DIR/.lock shared from its first
 * look at the store to its index's rename; gc holds it exclusively while
 * it reads the indexes it keeps and deletes, so it never deletes an object
 * a create has found there and is about to reference.
 * Paths: the store's root is opened as given, links and all; every path
 * beneath it (chunks/, chunks/HH/, objects, .lock) is opened with
 * io_open_beneath (no symbolic link followed, nothing outside), and every
 * create, rename and unlink is relative to a directory so opened: a link
 * planted in a shared store is refused or skipped, never followed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "faultline.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "author/registry.h"
#include "store/s3.h"
#include "store/s3_store.h"
#include "util/error.h"
#include "util/io.h"

void store_chunk_name(const uint8_t *hash, char *buf, size_t n)
{
	char hex[IMAGE_HASH_HEX];

	image_hash_hex(hash, hex);
	snprintf(buf, n, STORE_CHUNKS "/%.2s/%s", hex, hex);
}

/* A URL, or s3://BUCKET/KEY (its bucket as a URL's host) */
static bool is_url(const char *s)
{
	return !strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8) ||
	       s3_is_spec(s);
}

bool store_is_s3(const char *dir)
{
	return s3_is_spec(dir);
}

/* Remove "." and ".." segments from the path that starts at p (in place). */
static void remove_dots(char *p)
{
	char *out = p, *in = p;

	while (*in) {
		size_t k = strcspn(in + 1, "/") + 1;	/* "/seg" */

		if (k == 2 && in[1] == '.') {
			/* "/." */
		} else if (k == 3 && in[1] == '.' && in[2] == '.') {
			while (out > p && *--out != '/')
				;
		} else {
			memmove(out, in, k);
			out += k;
		}
		in += k;
	}
	*out = 0;
}

int store_resolve(const char *spec, const char *rel, char *out, size_t n)
{
	size_t base;

	if (is_url(spec)) {
		const char *host = strstr(spec, "://") + 3;
		size_t h = (size_t)(host - spec), path;

		base = strcspn(spec, "?#");
		path = h + strcspn(host, "/?#");
		while (base > path && spec[base - 1] != '/')
			base--;
		if (base <= path) {	/* http://host: the root */
			if ((size_t)snprintf(out, n, "%.*s/%s", (int)path, spec,
					     rel) >= n)
				return -ENAMETOOLONG;
		} else if ((size_t)snprintf(out, n, "%.*s%s", (int)base, spec,
					    rel) >= n) {
			return -ENAMETOOLONG;
		}
		remove_dots(out + path);
		if (!out[path])
			snprintf(out + path, n - path, "/");
		return 0;
	}
	base = strrchr(spec, '/') ? (size_t)(strrchr(spec, '/') - spec) + 1 : 0;
	if (!base && !strcmp(rel, "."))
		return (size_t)snprintf(out, n, ".") < n ? 0 : -ENAMETOOLONG;
	return (size_t)snprintf(out, n, "%.*s%s", (int)base, spec, rel) < n ?
	       0 : -ENAMETOOLONG;
}

int store_relative(const char *image_path, const char *dir, char *out,
		   size_t n)
{
	char *img_dir = strdup(image_path), *slash, *a = NULL, *b = NULL;
	size_t i = 0, common = 0, at = 0;
	int ret = 0;

	if (!img_dir)
		return -ENOMEM;
	slash = strrchr(img_dir, '/');
	if (slash)
		slash == img_dir ? (void)(slash[1] = 0) : (void)(*slash = 0);
	a = realpath(slash ? img_dir : ".", NULL);
	b = realpath(dir, NULL);
	if (!a || !b) {
		ret = fl_err(-errno, "%s: %m", !a ? (slash ? img_dir : ".") :
			     dir);
		goto out;
	}
	if (!strcmp(a, "/") || !strcmp(b, "/")) {	/* the root: absolute */
		ret = fl_err(-EINVAL, "--store %s: the store and the image's "
			     "directory must both be below /", dir);
		goto out;
	}
	/* the longest common prefix of whole components */
	for (i = 0; a[i] && a[i] == b[i]; i++)
		if (a[i] == '/')
			common = i;
	if ((!a[i] || a[i] == '/') && (!b[i] || b[i] == '/'))
		common = i;
	out[0] = 0;
	for (const char *c = a + common; *c; c++)	/* up from a */
		if (*c == '/')
			at += (size_t)snprintf(out + at, n > at ? n - at : 0,
					       "%s..", at ? "/" : "");
	if (b[common])			/* down to b */
		at += (size_t)snprintf(out + at, n > at ? n - at : 0, "%s%s",
				       at ? "/" : "", b + common + 1);
	if (!at)
		at = (size_t)snprintf(out, n, ".");
	if (at >= n || !image_store_path_ok(out))
		ret = fl_err(-ENAMETOOLONG, "--store %s: its path from the "
			     "image's directory cannot be recorded (at most "
			     "%d bytes, no control characters)", dir,
			     IMAGE_STORE_PATH_MAX);
out:
	free(img_dir);
	free(a);
	free(b);
	return ret;
}

int store_relative_s3(const char *image, const char *store, char *out,
		      size_t n)
{
	char root[1024];
	const char *ib = image + 5, *ik = strchr(ib, '/'), *sk, *c;
	size_t common = 0, at = 0, dir;
	int ret = s3_root_spec(store, root, sizeof(root));

	if (ret < 0)
		return ret;
	sk = strchr(root + 5, '/') + 1;		/* "PREFIX/" or "" */
	if (!ik || (size_t)(ik - ib) != (size_t)(sk - 1 - (root + 5)) ||
	    strncmp(ib, root + 5, (size_t)(ik - ib)))
		return fl_err(-EINVAL, "%s: the image must be in the bucket of "
			      "its store %s", image, store);
	ik++;
	if (strstr(ik, "//") || strstr(sk, "//"))
		return fl_err(-EINVAL, "%s: an empty path segment ('//') in "
			      "the image's or the store's key", image);
	dir = strrchr(ik, '/') ? (size_t)(strrchr(ik, '/') - ik) + 1 : 0;
	/* the longest common prefix of whole segments of "DIR/", "PREFIX/" */
	for (size_t i = 0; i < dir && ik[i] == sk[i]; i++)
		if (ik[i] == '/')
			common = i + 1;
	out[0] = 0;
	for (c = ik + common; c < ik + dir; c++)	/* up from the image */
		if (*c == '/')
			at += (size_t)snprintf(out + at, n > at ? n - at : 0,
					       "%s..", at ? "/" : "");
	if (sk[common])				/* down to the store */
		at += (size_t)snprintf(out + at, n > at ? n - at : 0, "%s%.*s",
				       at ? "/" : "",
				       (int)strlen(sk + common) - 1,
				       sk + common);
	if (!at)
		at = (size_t)snprintf(out, n, ".");
	if (at >= n || !image_store_path_ok(out))
		return fl_err(-ENAMETOOLONG, "--store %s: its path from the "
			      "image's prefix cannot be recorded (at most %d "
			      "bytes, no control characters)", store,
			      IMAGE_STORE_PATH_MAX);
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

struct dir_store {
	struct image_store base;
	char dir[4096];
	int dfd;
};

static int dir_get(struct image_store *s, const uint8_t *hash, void *buf,
		   size_t len)
{
	struct dir_store *d = (struct dir_store *)s;
	char name[128];
	struct stat st;
	int fd, ret;

	store_chunk_name(hash, name, sizeof(name));
	fd = io_open_beneath(d->dfd, name, O_RDONLY, 0);
	if (fd < 0)
		return fl_err(fd, "%s/%s: %s", d->dir, name,
			      fd == -ENOENT ? "no such chunk in the store" :
			      io_beneath_strerror(fd));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != len) {
		ret = fl_err(-EBADMSG, "%s/%s: %lld bytes, the index says %zu",
			     d->dir, name, (long long)st.st_size, len);
		close(fd);
		return ret;
	}
	ret = pread_full(fd, buf, len, 0);
	close(fd);
	if (ret < 0)
		return fl_err(ret, "%s/%s: read: %s", d->dir, name,
			      ret == -EIO ? "short read" : strerror(-ret));
	return 0;
}

static void dir_close(struct image_store *s)
{
	struct dir_store *d = (struct dir_store *)s;

	close(d->dfd);
	free(d);
}

static const struct image_store_ops dir_ops = {
	.get = dir_get,
	.close = dir_close,
};

int store_dir_open(const char *dir, struct image_store **out)
{
	struct dir_store *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->base.ops = &dir_ops;
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	d->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dfd < 0) {
		int ret = fl_err(-errno, "chunk store %s: %m", dir);

		free(d);
		return ret;
	}
	*out = &d->base;
	return 0;
}

int store_attach_dir(struct image *img, const char *path)
{
	char dir[4096];

	if (!image_in_store(&img->hdr) || img->store)
		return 0;
	if (store_resolve(path, img->hdr.store_path, dir, sizeof(dir)) < 0)
		return fl_err(-ENAMETOOLONG, "%s: the path of its store %s is "
			      "too long", path, img->hdr.store_path);
	return store_dir_open(dir, &img->store);
}

/* ---- writing ------------------------------------------------------------ */

int store_open_write(const char *dir, struct store_writer *w)
{
	int ret;

	memset(w, 0, sizeof(*w));
	w->dfd = w->lock = -1;
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	if (store_is_s3(dir)) {
		ret = s3_store_open(dir, &w->s3);

		if (!ret)	/* "s3://BUCKET/PREFIX/" in messages: + name */
			snprintf(w->dir, sizeof(w->dir), "%.*s",
				 (int)strlen(s3_store_spec(w->s3)) - 1,
				 s3_store_spec(w->s3));
		/* held until store_close, after the index is put */
		ret = ret ? ret : s3_store_lock(w->s3, false);
		return ret ? ret : registry_start(w);
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return fl_err(-errno, "--store %s: cannot create: %m", dir);
	w->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dfd < 0)
		return fl_err(-errno, "--store %s: %m", dir);
	ret = io_mkdir_beneath(w->dfd, STORE_CHUNKS, 0755);
	if (ret < 0 && ret != -EEXIST)
		return fl_err(ret, "--store %s: cannot create %s: %s", dir,
			      STORE_CHUNKS, io_beneath_strerror(ret));
	w->lock = io_open_beneath(w->dfd, STORE_LOCK, O_RDWR | O_CREAT, 0644);
	if (w->lock < 0)
		return fl_err(w->lock, "--store %s: %s: %s", dir, STORE_LOCK,
			      io_beneath_strerror(w->lock));
	if (flock(w->lock, LOCK_SH) < 0)
		return fl_err(-errno, "--store %s: lock %s: %m", dir,
			      STORE_LOCK);
	return registry_start(w);
}

int store_has(struct store_writer *w, const uint8_t *hash, uint64_t *size)
{
	char name[128];
	struct stat st;
	int fd, ret;

	store_chunk_name(hash, name, sizeof(name));
	if (w->s3)
		return s3_store_head(w->s3, name, size);
	fd = io_open_beneath(w->dfd, name, O_PATH, 0);
	if (fd < 0)
		return -ENOENT;
	ret = fstat(fd, &st);
	close(fd);
	if (ret < 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	*size = (uint64_t)st.st_size;
	return 0;
}

int store_put(struct store_writer *w, const uint8_t *hash, const void *buf,
	      size_t len, uint64_t *size, bool *wrote)
{
	char name[128], tmp[64], *base;
	int fd, hh, ret;

	*wrote = false;
	store_chunk_name(hash, name, sizeof(name));
	if (w->s3) {
		ret = s3_store_put(w->s3, name, buf, len, size);
		*wrote = !ret && *size == len;
		return ret;
	}
	name[sizeof(STORE_CHUNKS) + 2] = 0;		/* chunks/HH */
	ret = io_mkdir_beneath(w->dfd, name, 0755);
	hh = ret < 0 && ret != -EEXIST ? ret :
	     io_open_beneath(w->dfd, name, O_PATH | O_DIRECTORY, 0);
	if (hh < 0)
		return fl_err(hh, "%s/%s: cannot create: %s", w->dir, name,
			      io_beneath_strerror(hh));
	name[sizeof(STORE_CHUNKS) + 2] = '/';
	base = name + sizeof(STORE_CHUNKS) + 3;		/* HASH */
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%u", (int)getpid(), w->seq++);
	fd = io_open_beneath(hh, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0) {
		close(hh);
		return fl_err(fd, "%s/%.*s/%s: cannot create: %s", w->dir,
			      (int)(base - 1 - name), name, tmp,
			      io_beneath_strerror(fd));
	}
	ret = pwrite_full(fd, buf, len, 0);
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (ret < 0) {
		unlinkat(hh, tmp, 0);
		close(hh);
		return fl_err(ret, "%s/%.*s/%s: write: %s", w->dir,
			      (int)(base - 1 - name), name, tmp,
			      strerror(-ret));
	}
	ret = renameat2(hh, tmp, hh, base, RENAME_NOREPLACE) ? -errno : 0;
	if (ret < 0)
		unlinkat(hh, tmp, 0);
	close(hh);
	if (ret == 0) {
		*size = len;
		*wrote = true;
		return 0;
	}
	if (ret == -EEXIST && store_has(w, hash, size) == 0)
		return 0;	/* written beside us meanwhile: use that one */
	return fl_err(ret, "%s/%s: cannot rename into place: %s", w->dir, name,
		      strerror(-ret));
}

int store_sync(struct store_writer *w)
{
	if (w->s3)
		return 0;	/* a PUT answered 200 is stored */
	if (syncfs(w->dfd) < 0)
		return fl_err(-errno, "--store %s: sync: %m", w->dir);
	return 0;
}

void store_close(struct store_writer *w)
{
	s3_store_close(w->s3);
	w->s3 = NULL;
	if (w->lock >= 0)
		close(w->lock);		/* and the lock with it */
	if (w->dfd >= 0)
		close(w->dfd);
	w->lock = w->dfd = -1;
}

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
