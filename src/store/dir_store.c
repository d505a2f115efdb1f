// SPDX-License-Identifier: Apache-2.0
/*
 * dir_store.c - a store in a directory (docs/image-format.md, "Chunk
 * store"): the store ops (store_ops.h) over DIR's files, DIR/chunks/HH/HASH,
 * DIR/registry/ID, DIR/.lock.
 *
 * Decisions: the store's root is opened as given, links and all; every
 * path beneath it is opened with io_open_beneath (no symbolic link
 * followed, nothing outside), and every create, rename and unlink is
 * relative to a directory so opened: a link planted in a shared store is
 * refused or, by list(), reported and skipped, never followed.  An object
 * is written to a temporary name beside its final one and moved into
 * place with renameat2(RENAME_NOREPLACE), so a reader never sees half an
 * object and one in place is never replaced; chunks are synced once, with
 * syncfs() (sync()), before the index naming them is put; a durable put
 * (a registry entry) syncs itself and its directory.  The lock is flock()
 * on DIR/.lock: a create shares it, gc owns it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/chunk_store.h"
#include "store/dir_store.h"
#include "store/store_ops.h"
#include "util/error.h"
#include "util/io.h"

struct dir_store {
	struct store base;
	int dfd;		/* the root, opened as given */
	int lock;		/* DIR/.lock while held, else -1 */
};

#define to_dir(s) ((struct dir_store *)(s))

static atomic_uint tmp_seq;

static int dir_read(struct store *s, const char *name, void *buf, size_t len)
{
	struct stat st;
	int fd = io_open_beneath(to_dir(s)->dfd, name, O_RDONLY, 0), ret;

	if (fd < 0)
		return fl_err(fd, "%s/%s: %s", s->name, name,
			      fd == -ENOENT ? "no such chunk in the store" :
			      io_beneath_strerror(fd));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != len) {
		ret = fl_err(-EBADMSG, "%s/%s: %lld bytes, the index says %zu",
			     s->name, name, (long long)st.st_size, len);
		close(fd);
		return ret;
	}
	ret = pread_full(fd, buf, len, 0);
	close(fd);
	if (ret < 0)
		return fl_err(ret, "%s/%s: read: %s", s->name, name,
			      ret == -EIO ? "short read" : strerror(-ret));
	return 0;
}

/* The whole of fd (what: for messages) into *buf, fd closed: 0 or -errno. */
static int read_fd(int fd, const char *what, size_t max, void **buf,
		   size_t *len)
{
	struct stat st;
	void *p = NULL;
	int ret = 0;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		ret = fl_err(-EINVAL, "%s: not a regular file", what);
	else if ((uint64_t)st.st_size > max)
		ret = fl_err(-EFBIG, "%s: %lld bytes, more than an index's %zu",
			     what, (long long)st.st_size, max);
	else if (!(p = malloc(st.st_size ? (size_t)st.st_size : 1)))
		ret = fl_err(-ENOMEM, "%s: no memory", what);
	else if ((ret = pread_full(fd, p, (size_t)st.st_size, 0)) < 0)
		fl_err(ret, "%s: read: %s", what, strerror(-ret));
	close(fd);
	if (ret < 0) {
		free(p);
		return ret;
	}
	*buf = p;
	*len = (size_t)st.st_size;
	return 0;
}

static int dir_get(struct store *s, const char *name, size_t max, void **buf,
		   size_t *len)
{
	char what[4200];
	int fd = io_open_beneath(to_dir(s)->dfd, name, O_RDONLY, 0);

	snprintf(what, sizeof(what), "%s/%s", s->name, name);
	if (fd < 0)
		return fl_err(fd, "%s: %s", what, fd == -ENOENT ? "none" :
			      io_beneath_strerror(fd));
	return read_fd(fd, what, max, buf, len);
}

/*
 * A regular file: its size; -ENOENT if there is none (or something
 * else by that name); a link on the way or a path out is an error.
 */
static int dir_head(struct store *s, const char *name, uint64_t *size)
{
	int fd = io_open_beneath(to_dir(s)->dfd, name, O_PATH, 0), ret;
	struct stat st;

	if (fd == -ENOENT || fd == -ENOTDIR)
		return -ENOENT;
	if (fd < 0)
		return fl_err(fd, "%s/%s: %s", s->name, name,
			      io_beneath_strerror(fd));
	ret = fstat(fd, &st);
	close(fd);
	if (ret < 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	*size = (uint64_t)st.st_size;
	return 0;
}

/*
 * The directory name is in (made if need be, its entry synced if
 * durable), opened: a descriptor, or -errno with a message.  *base: the
 * file's name in it.
 */
static int parent_of(struct store *s, const char *name, bool make,
		     bool durable, const char **base)
{
	const char *slash = strrchr(name, '/');
	char dir[256];
	int ret = 0, fd;

	*base = slash ? slash + 1 : name;
	if (!slash)
		return fcntl(to_dir(s)->dfd, F_DUPFD_CLOEXEC, 0);
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - name), name);
	if (make)
		ret = io_mkdir_beneath(to_dir(s)->dfd, dir, 0755);
	if (!ret && durable && fsync(to_dir(s)->dfd) < 0)
		return fl_err(-errno, "%s: sync: %m", s->name);
	fd = ret < 0 && ret != -EEXIST ? ret :
	     io_open_beneath(to_dir(s)->dfd, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fl_err(fd, "%s/%s: %s", s->name, dir,
			      io_beneath_strerror(fd));
	return fd;
}

/* buf as tmp in dir (synced if durable): 0 or -errno (tmp gone). */
static int write_tmp(int dir, const char *tmp, const void *buf, size_t len,
		     bool durable)
{
	int fd = io_open_beneath(dir, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	int ret = fd < 0 ? fd : pwrite_full(fd, buf, len, 0);

	if (fd >= 0 && !ret && durable && fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0 && close(fd) < 0 && !ret)
		ret = -errno;
	if (fd >= 0 && ret)
		unlinkat(dir, tmp, 0);
	return ret;
}

static int dir_put(struct store *s, const char *name, const void *buf,
		   size_t len, unsigned int flags, uint64_t *size, bool *wrote)
{
	bool durable = flags & STORE_DURABLE;
	const char *base;
	char tmp[64];
	int dir, ret;

	*wrote = false;
	dir = parent_of(s, name, true, durable, &base);
	if (dir < 0)
		return dir;
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%u", (int)getpid(),
		 atomic_fetch_add(&tmp_seq, 1));
	ret = write_tmp(dir, tmp, buf, len, durable);
	if (ret < 0) {
		close(dir);
		return fl_err(ret, "%s/%.*s%s: cannot write: %s", s->name,
			      (int)(base - name), name, tmp,
			      io_beneath_strerror(ret));
	}
	ret = renameat2(dir, tmp, dir, base, RENAME_NOREPLACE) ? -errno : 0;
	if (ret < 0)
		unlinkat(dir, tmp, 0);
	if (!ret && durable && fsync(dir) < 0)
		ret = -errno;
	close(dir);
	if (ret == 0) {
		*size = len;
		*wrote = true;
		return 0;
	}
	if (ret == -EEXIST && dir_head(s, name, size) == 0)
		return 0;	/* written beside us meanwhile: use that one */
	return fl_err(ret, "%s/%s: cannot rename into place: %s", s->name,
		      name, strerror(-ret));
}

static int list_dir(struct store *s, int fd, const char *sub, int depth,
		    store_list_fn fn, void *arg);

/* One entry of the directory dfd (its path sub): reported or walked. */
static int list_one(struct store *s, int dfd, const char *sub,
		    const char *d_name, int depth, store_list_fn fn, void *arg)
{
	struct store_entry e = { 0 };
	char name[512];
	struct stat st;
	int fd;

	if (fstatat(dfd, d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	snprintf(name, sizeof(name), "%s/%s", sub, d_name);
	e.name = name;
	e.size = (uint64_t)st.st_size;
	e.mtime = st.st_mtime;
	if (S_ISDIR(st.st_mode) && depth < 3) {
		fd = io_open_beneath(dfd, d_name, O_RDONLY | O_DIRECTORY, 0);
		if (fd == -ELOOP) {		/* replaced since the stat */
			e.type = STORE_LINK;
			return fn(arg, &e);
		}
		return fd < 0 ? 0 : list_dir(s, fd, name, depth + 1, fn, arg);
	}
	if (S_ISLNK(st.st_mode))
		e.type = STORE_LINK;
	else if (!S_ISREG(st.st_mode))
		return 0;
	else if (!strncmp(d_name, ".tmp-", 5))
		e.type = STORE_TEMP;
	else
		e.type = STORE_OBJECT;
	return fn(arg, &e);
}

/* Every entry of the directory fd (its path sub), fd closed. */
static int list_dir(struct store *s, int fd, const char *sub, int depth,
		    store_list_fn fn, void *arg)
{
	struct dirent *de;
	DIR *d = fdopendir(fd);
	int ret = 0;

	if (!d) {
		close(fd);
		return fl_err(-errno, "%s/%s: %m", s->name, sub);
	}
	while (!ret && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ret = list_one(s, dirfd(d), sub, de->d_name, depth, fn,
				       arg);
	closedir(d);
	return ret;
}

static int dir_list(struct store *s, const char *sub, store_list_fn fn,
		    void *arg)
{
	char dir[256];
	size_t n = strlen(sub);
	int fd;

	/* "chunks/": the directory chunks */
	snprintf(dir, sizeof(dir), "%.*s", (int)(n && sub[n - 1] == '/' ?
						 n - 1 : n), sub);
	fd = io_open_beneath(to_dir(s)->dfd, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd == -ENOENT)
		return 0;	/* nothing there yet */
	if (fd < 0)
		return fl_err(fd, "%s/%s: %s", s->name, dir,
			      io_beneath_strerror(fd));
	return list_dir(s, fd, dir, 0, fn, arg);
}

static int dir_del(struct store *s, const char *name, unsigned int flags)
{
	const char *base;
	int dir = parent_of(s, name, false, false, &base), ret = 0;

	if (dir < 0)
		return dir;
	if (unlinkat(dir, base, 0) < 0 ||
	    (flags & STORE_DURABLE && fsync(dir) < 0))
		ret = fl_err(-errno, "%s/%s: cannot remove: %m", s->name, name);
	close(dir);
	return ret;
}

static int dir_lock(struct store *s, bool exclusive)
{
	struct dir_store *d = to_dir(s);
	int ret;

	if (d->lock < 0)
		d->lock = io_open_beneath(d->dfd, STORE_LOCK, O_RDWR | O_CREAT,
					  0644);
	ret = d->lock < 0 ? d->lock :
	      flock(d->lock, exclusive ? LOCK_EX : LOCK_SH) < 0 ? -errno : 0;
	if (ret < 0)
		return fl_err(ret, "--store %s: lock %s: %s", s->name,
			      STORE_LOCK, io_beneath_strerror(ret));
	return 0;
}

static void dir_unlock(struct store *s)
{
	struct dir_store *d = to_dir(s);

	if (d->lock >= 0)
		close(d->lock);		/* and the lock with it */
	d->lock = -1;
}

static int dir_sync(struct store *s)
{
	if (syncfs(to_dir(s)->dfd) < 0)
		return fl_err(-errno, "--store %s: sync: %m", s->name);
	return 0;
}

static int dir_get_index(struct store *s, const char *spec, size_t max,
			 void **buf, size_t *len)
{
	int fd;

	(void)s;
	if (!store_spec_local(spec))
		return fl_err(-EINVAL, "%s: an image in a bucket has its store "
			      "there (--store s3://BUCKET/PREFIX)", spec);
	fd = open_regular(spec, NULL, false);
	return fd < 0 ? fd : read_fd(fd, spec, max, buf, len);
}

static int dir_put_index(struct store *s, const char *tmp, const char *spec,
			 const void *buf, size_t len)
{
	(void)s;
	(void)buf;
	(void)len;
	if (rename(tmp, spec) < 0)
		return fl_err(-errno, "%s: cannot rename to %s: %m", tmp, spec);
	return 0;
}

static int dir_relative(struct store *s, const char *image, char *out,
			size_t n)
{
	return store_relative(image, s->name, out, n);
}

static bool dir_is(struct store *s, const char *where)
{
	struct stat a, b;

	return store_spec_local(where) && fstat(to_dir(s)->dfd, &a) == 0 &&
	       stat(where, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static void dir_close(struct store *s)
{
	dir_unlock(s);
	close(to_dir(s)->dfd);
	free(s);
}

static const struct store_ops dir_ops = {
	.kind = "directory",
	.read = dir_read,
	.get = dir_get,
	.head = dir_head,
	.put = dir_put,
	.list = dir_list,
	.del = dir_del,
	.lock = dir_lock,
	.unlock = dir_unlock,
	.sync = dir_sync,
	.get_index = dir_get_index,
	.put_index = dir_put_index,
	.relative = dir_relative,
	.is = dir_is,
	.close = dir_close,
};

/* STORE_CREATE: DIR and DIR/chunks made; STORE_EXISTING: chunks/ there. */
static int dir_prepare(struct dir_store *d, const char *dir,
		       unsigned int flags)
{
	int ret = 0, fd;

	if (flags & STORE_CREATE) {
		ret = io_mkdir_beneath(d->dfd, STORE_CHUNKS, 0755);
		if (ret < 0 && ret != -EEXIST)
			return fl_err(ret, "--store %s: cannot create %s: %s",
				      dir, STORE_CHUNKS,
				      io_beneath_strerror(ret));
	}
	if (!(flags & STORE_EXISTING))
		return 0;
	fd = io_open_beneath(d->dfd, STORE_CHUNKS, O_RDONLY | O_DIRECTORY, 0);
	if (fd == -ENOENT)
		return fl_err(fd, "--store %s: not a chunk store (no %s/)", dir,
			      STORE_CHUNKS);
	if (fd < 0)
		return fl_err(fd, "--store %s: %s: %s", dir, STORE_CHUNKS,
			      io_beneath_strerror(fd));
	close(fd);
	return 0;
}

int dir_store_open(const char *dir, unsigned int flags, struct store **out)
{
	struct dir_store *d;
	int ret;

	if ((flags & STORE_CREATE) && mkdir(dir, 0755) < 0 && errno != EEXIST)
		return fl_err(-errno, "--store %s: cannot create: %m", dir);
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->base.ops = &dir_ops;
	d->lock = -1;
	snprintf(d->base.name, sizeof(d->base.name), "%s", dir);
	d->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dfd < 0) {
		ret = fl_err(-errno, flags ? "--store %s: %m" :
			     "chunk store %s: %m", dir);
		free(d);
		return ret;
	}
	ret = dir_prepare(d, dir, flags);
	if (ret < 0) {
		dir_close(&d->base);
		return ret;
	}
	*out = &d->base;
	return 0;
}
