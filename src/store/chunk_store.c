// SPDX-License-Identifier: Apache-2.0
/*
 * chunk_store.c - a chunk store (docs/image-format.md, "Chunk store"):
 * object names, where an image's store is, reading objects of a directory
 * for version 3 images, and writing them (a directory's, or a bucket's
 * through s3_store.c) for image_create.  Gc is author/gc.c's.
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
#include "store/s3.h"
#include "store/s3_lock.h"
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
		return ret;
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
	return 0;
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
