// SPDX-License-Identifier: Apache-2.0
/*
 * registry.c - the images a chunk store keeps (docs/image-format.md,
 * "Registry"): DIR/registry/ID, or PREFIX/registry/ID in a bucket, holds
 * a copy of the index whose content id is ID.  `image create --store`
 * and `image register` write entries, `image delete` removes one, and gc
 * keeps every chunk a registered index references and nothing else.
 *
 * Decisions: an entry is the index's own bytes, not a path to it, so an
 * index file moved or removed by hand changes nothing (its chunks stay
 * until `image delete`) and gc reads the store alone.  A diff's parents
 * in the same store are registered before it, and an image a registered
 * diff names as its parent is not deleted.  The registry is on once
 * DIR/registry/.active exists: the first create of a store with no chunk
 * yet makes it, and so does `image register`; gc refuses a store without
 * it (chunks from before the registry, of images no one has listed).
 * Entries and the marker are written to a temporary, synced and renamed
 * (the directory synced too); in a bucket a PUT is whole.  Writers hold
 * the store as a create does (DIR/.lock shared, PREFIX/locks/create-*),
 * so a gc, which holds it exclusively, never sees half of a change.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "faultline.h"
#include "store/chunk_store.h"
#include "author/chunk_set.h"
#include "format/image.h"
#include "author/registry.h"
#include "source/layers.h"
#include "store/s3.h"
#include "store/s3_store.h"
#include "source/source.h"
#include "util/error.h"
#include "util/io.h"

#define REG_MARKER_BODY	"faultline chunk store registry 1\n"

struct reg {
	const char *spec;	/* the store, for messages */
	int dfd;		/* a directory store's root, else -1 */
	struct s3_store *s3;	/* a bucket's, else NULL */
	bool sweep;		/* each_id(): stale temporaries removed */
};

/* One layer of a chain: its index's bytes and the image they make. */
struct layer {
	char spec[4096];
	void *buf;
	size_t len;
	struct image *img;
};

static atomic_uint tmp_seq;

static struct reg reg_of(struct store_writer *w)
{
	return (struct reg){ w->dir, w->s3 ? -1 : w->dfd, w->s3, false };
}

static bool id_ok(const char *s)
{
	return strlen(s) == IMAGE_ID_HEX - 1 &&
	       strspn(s, "0123456789abcdef") == IMAGE_ID_HEX - 1;
}

/* ---- the store's objects: a directory's files or a bucket's keys --------- */

/* DIR/registry, made if create and not there: a descriptor or -errno. */
static int reg_dir(const struct reg *r, bool create)
{
	int fd;

	if (create && io_mkdir_beneath(r->dfd, STORE_REGISTRY, 0755) == 0 &&
	    fsync(r->dfd) < 0)
		return fl_err(-errno, "%s: sync: %m", r->spec);
	fd = io_open_beneath(r->dfd, STORE_REGISTRY, O_RDONLY | O_DIRECTORY,
			     0);
	if (fd < 0 && (create || fd != -ENOENT))
		return fl_err(fd, "%s/%s: %s", r->spec, STORE_REGISTRY,
			      io_beneath_strerror(fd));
	return fd;
}

/* The whole of fd (what: for messages) into *buf, fd closed: 0 or -errno. */
static int read_fd(int fd, const char *what, void **buf, size_t *len)
{
	struct stat st;
	void *p = NULL;
	int ret = 0;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		ret = fl_err(-EINVAL, "%s: not a regular file", what);
	else if ((uint64_t)st.st_size > STORE_INDEX_MAX)
		ret = fl_err(-EFBIG, "%s: %lld bytes, more than an index's %u",
			     what, (long long)st.st_size, STORE_INDEX_MAX);
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

/* The object name (relative to the store) read whole: 0 or -errno. */
static int reg_get(const struct reg *r, const char *name, void **buf,
		   size_t *len)
{
	char what[4200];
	int rd, fd;

	snprintf(what, sizeof(what), "%s%s%s", r->s3 ? s3_store_spec(r->s3) :
		 r->spec, r->s3 ? "" : "/", name);
	if (r->s3)
		return s3_store_get_spec(r->s3, what, STORE_INDEX_MAX, buf, len);
	rd = reg_dir(r, false);
	if (rd < 0)
		return rd == -ENOENT ? fl_err(-ENOENT, "%s: none", what) : rd;
	fd = io_open_beneath(rd, name + sizeof(STORE_REGISTRY), O_RDONLY, 0);
	close(rd);
	if (fd < 0)
		return fl_err(fd, "%s: %s", what, io_beneath_strerror(fd));
	return read_fd(fd, what, buf, len);
}

/* Is the object name (relative to the store) there?  1, 0 or -errno. */
static int reg_has(const struct reg *r, const char *name)
{
	uint64_t size;
	struct stat st;
	int ret;

	if (r->s3) {
		ret = s3_store_head(r->s3, name, &size);
		return ret == -ENOENT ? 0 : ret < 0 ? ret : 1;
	}
	if (fstatat(r->dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return S_ISREG(st.st_mode);
	return errno == ENOENT ? 0 : fl_err(-errno, "%s/%s: %m", r->spec, name);
}

/*
 * The object name (relative to the store, under registry/) written
 * whole unless it is there: *created if it was not.  0 or -errno.
 */
static int reg_put(const struct reg *r, const char *name, const void *buf,
		   size_t len, bool *created)
{
	const char *base = name + sizeof(STORE_REGISTRY);
	char tmp[64];
	uint64_t size;
	int rd, fd, ret;

	*created = false;
	if (r->s3) {
		ret = reg_has(r, name);
		if (ret)
			return ret < 0 ? ret : 0;
		ret = s3_store_put(r->s3, name, buf, len, &size);
		*created = !ret;
		return ret;
	}
	rd = reg_dir(r, true);
	if (rd < 0)
		return rd;
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%u", (int)getpid(),
		 atomic_fetch_add(&tmp_seq, 1));
	fd = io_open_beneath(rd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ret = fd < 0 ? fd : pwrite_full(fd, buf, len, 0);
	if (fd >= 0 && !ret && fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0 && close(fd) < 0 && !ret)
		ret = -errno;
	if (!ret && renameat2(rd, tmp, rd, base, RENAME_NOREPLACE) < 0)
		ret = -errno;	/* -EEXIST: the same bytes, by their id */
	*created = !ret;
	if (fd >= 0 && !*created)
		unlinkat(rd, tmp, 0);
	if (ret == -EEXIST)
		ret = 0;
	if (!ret && fsync(rd) < 0)
		ret = -errno;
	close(rd);
	return ret ? fl_err(ret, "%s/%s: cannot write: %s", r->spec, name,
			    io_beneath_strerror(ret)) : 0;
}

/* The object name (relative to the store) removed: 0 or -errno. */
static int reg_remove(const struct reg *r, const char *name)
{
	int rd, ret = 0;

	if (r->s3)
		return s3_store_delete(r->s3, name);
	rd = reg_dir(r, false);
	if (rd < 0)
		return rd;
	if (unlinkat(rd, name + sizeof(STORE_REGISTRY), 0) < 0 ||
	    fsync(rd) < 0)
		ret = fl_err(-errno, "%s/%s: cannot remove: %m", r->spec, name);
	close(rd);
	return ret;
}

struct ids {
	int (*fn)(void *arg, const char *id);
	void *arg;
};

static int id_seen(void *arg, const char *name, uint64_t size)
{
	const struct ids *x = arg;

	(void)size;
	name += sizeof(STORE_REGISTRY);		/* "registry/" */
	return id_ok(name) ? x->fn(x->arg, name) : 0;
}

/* fn() called with each registered content id; stops at its error. */
static int each_id(const struct reg *r, int (*fn)(void *arg, const char *id),
		   void *arg)
{
	struct ids x = { fn, arg };
	struct dirent *de;
	int rd, ret = 0;
	DIR *d;

	if (r->s3)
		return s3_store_list(r->s3, STORE_REGISTRY "/", id_seen, &x);
	rd = reg_dir(r, false);
	if (rd < 0)
		return rd == -ENOENT ? 0 : rd;
	d = fdopendir(rd);
	if (!d) {
		close(rd);
		return fl_err(-errno, "%s/%s: %m", r->spec, STORE_REGISTRY);
	}
	while (!ret && (de = readdir(d))) {
		struct stat st;

		if (id_ok(de->d_name))
			ret = fn(arg, de->d_name);
		else if (r->sweep && !strncmp(de->d_name, ".tmp-", 5) &&
			 !fstatat(rd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
			 S_ISREG(st.st_mode) &&
			 time(NULL) - st.st_mtime > STORE_STALE_TMP_S)
			unlinkat(rd, de->d_name, 0);	/* a writer that died */
	}
	closedir(d);
	return ret;
}

static int chunk_seen(void *arg, const char *name, uint64_t size)
{
	(void)arg;
	(void)name;
	(void)size;
	return -EEXIST;		/* one is enough */
}

/* Does the store hold any object under chunks/?  1, 0 or -errno. */
static int has_chunks(const struct reg *r)
{
	struct dirent *de;
	int fd, ret = 0;
	DIR *d;

	if (r->s3) {
		ret = s3_store_list(r->s3, STORE_CHUNKS "/", chunk_seen, NULL);
		return ret == -EEXIST ? 1 : ret;
	}
	fd = io_open_beneath(r->dfd, STORE_CHUNKS, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ret = fd < 0 ? fd : -errno;
		ret = fl_err(ret, "%s/%s: %s", r->spec, STORE_CHUNKS,
			     io_beneath_strerror(ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	while (!ret && (de = readdir(d)))
		ret = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return ret;
}

static int put_marker(const struct reg *r)
{
	bool created;

	return reg_put(r, STORE_REGISTRY_ON, REG_MARKER_BODY,
		       strlen(REG_MARKER_BODY), &created);
}

int registry_start(struct store_writer *w)
{
	struct reg r = reg_of(w);
	int ret = reg_has(&r, STORE_REGISTRY_ON);

	if (!ret)
		ret = has_chunks(&r);
	if (ret)		/* on already; or chunks from before it */
		return ret < 0 ? ret : 0;
	return put_marker(&r);
}

int registry_open_write(const char *dir, struct store_writer *w)
{
	int ret = store_open_write(dir, w);

	return ret ? ret : registry_start(w);
}

/* ---- indexes ------------------------------------------------------------- */

struct mem {
	const char *name;
	const uint8_t *p;
	size_t n;
};

static int mem_read(void *arg, void *buf, size_t len, uint64_t off)
{
	const struct mem *m = arg;

	if (off > m->n || len > m->n - off)
		return fl_err(-EBADMSG, "%s: %zu bytes, cut short", m->name,
			      m->n);
	memcpy(buf, m->p + off, len);
	return 0;
}

/*
 * The image buf holds, validated as image_open does.  Its reader is
 * gone on return: a store image's chunks are read from its store, never
 * through it, and it is used here only for its header and index.
 */
static int parse_index(const char *name, const void *buf, size_t len,
		       struct image **img)
{
	struct mem m = { name, buf, len };
	int ret = image_open_reader(name, len, mem_read, &m, img);

	if (!ret)
		(*img)->read_arg = NULL;
	return ret;
}

/* An index named spec (a path, or an s3:// key) read whole: 0 or -errno. */
static int read_index(const struct reg *r, const char *spec, void **buf,
		      size_t *len)
{
	int fd;

	if (store_is_s3(spec) != !!r->s3)
		return fl_err(-EINVAL, "%s: %s", spec, r->s3 ?
			      "the images of a store in a bucket are s3:// "
			      "keys in that bucket" : "an image in a bucket "
			      "has its store there (--store s3://BUCKET/PREFIX)");
	if (r->s3)
		return s3_store_get_spec(r->s3, spec, STORE_INDEX_MAX, buf, len);
	fd = open_regular(spec, NULL, false);
	return fd < 0 ? fd : read_fd(fd, spec, buf, len);
}

/* Are the chunks of img (at spec) in this store? */
static bool in_store(const struct reg *r, const char *spec,
		     const struct image *img)
{
	char at[4096], root[1024];
	struct stat a, b;

	if (!image_in_store(&img->hdr) ||
	    store_resolve(spec, img->hdr.store_path, at, sizeof(at)) < 0)
		return false;
	if (r->s3)
		return s3_root_spec(at, root, sizeof(root)) == 0 &&
		       !strcmp(root, s3_store_spec(r->s3));
	return fstat(r->dfd, &a) == 0 && stat(at, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static void free_chain(struct layer *l, int n)
{
	for (int i = 0; l && i < n; i++) {
		free(l[i].buf);
		image_close(l[i].img);
	}
	free(l);
}

/*
 * The layers of the chain from spec down that keep their chunks in this
 * store, spec first, their indexes' bytes read: into *out (malloc'd, *n
 * layers).  The chain is opened as serving opens it (each parent beside
 * its child, the image its child names by content id), so a layer's data
 * is never read, only a store index's bytes.  top: spec itself must be
 * such a layer.  0 or -errno with a message.
 */
static int read_chain(const struct reg *r, const char *spec, bool top,
		      struct layer **out, int *n)
{
	struct fl_source *src;
	unsigned int cnt;
	int ret = fl_source_open(spec, &src);

	*out = NULL;
	*n = 0;
	if (ret < 0)
		return ret;
	cnt = source_layers_count(src);
	*out = calloc(cnt, sizeof(**out));
	if (!*out)
		ret = fl_err(-ENOMEM, "%s: no memory", spec);
	for (unsigned int i = cnt; !ret && i-- > 0;) {
		struct fl_source *x = source_layers_at(src, i);
		const struct image *img = source_image(x);
		struct layer *y = &(*out)[*n];
		char at[4096];

		if (top && i == cnt - 1 && (!img || !image_in_store(&img->hdr)))
			ret = fl_err(-EINVAL, "%s: not a chunk-store image (its "
				     "chunks are in the file): nothing to "
				     "register", spec);
		else if (top && i == cnt - 1 && !in_store(r, x->desc, img))
			ret = fl_err(-EINVAL, "%s: its chunks are in another "
				     "store (%s from its directory: %s)", spec,
				     img->hdr.store_path,
				     store_resolve(x->desc, img->hdr.store_path,
						   at, sizeof(at)) ? "?" : at);
		if (ret || !img || !in_store(r, x->desc, img))
			continue;	/* its chunks are not ours to keep */
		snprintf(y->spec, sizeof(y->spec), "%s", x->desc);
		++*n;
		ret = read_index(r, y->spec, &y->buf, &y->len);
		if (!ret)
			ret = parse_index(y->spec, y->buf, y->len, &y->img);
		if (!ret && memcmp(y->img->hdr.id, img->hdr.id, IMAGE_ID_LEN))
			ret = fl_err(-EAGAIN, "%s: changed while read", y->spec);
	}
	fl_source_put(src);
	return ret;
}

/* ---- registering ---------------------------------------------------------- */

/* l[0..n) (read_chain's) registered, the deepest first. */
static int put_chain(const struct reg *r, struct layer *l, int n, bool check,
		     registry_said said, void *arg)
{
	for (int i = n; i-- > 0;) {
		char id[IMAGE_ID_HEX], name[64];
		bool created;
		int ret;

		if (check && (ret = store_check_chunks(r->spec, r->dfd, r->s3,
						       l[i].img, l[i].spec)) < 0)
			return ret;
		image_id_hex(l[i].img->hdr.id, id);
		snprintf(name, sizeof(name), STORE_REGISTRY "/%s", id);
		ret = reg_put(r, name, l[i].buf, l[i].len, &created);
		if (ret < 0)
			return ret;
		if (said)
			said(arg, l[i].spec, id, !created, i > 0);
	}
	return 0;
}

/*
 * The store at spec held as a create holds it; a directory must be a
 * chunk store already (register and delete make none).
 */
static int open_store(const char *spec, struct store_writer *w)
{
	char path[4200];
	struct stat st;

	memset(w, 0, sizeof(*w));	/* store_close()able whatever happens */
	w->dfd = w->lock = -1;
	snprintf(w->dir, sizeof(w->dir), "%s", spec);
	snprintf(path, sizeof(path), "%s/%s", spec, STORE_CHUNKS);
	if (!store_is_s3(spec) && (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)))
		return fl_err(-ENOENT, "--store %s: not a chunk store (no %s/)",
			      spec, STORE_CHUNKS);
	return registry_open_write(spec, w);
}

int store_publish(struct store_writer *w, const char *tmp, const char *image,
		  const char *parent, const void *hb, size_t hlen,
		  const void *ib, size_t ilen)
{
	struct reg r = reg_of(w);
	struct layer *l = NULL, top = { .len = hlen + ilen };
	char id[IMAGE_ID_HEX], name[64];
	bool created = false;
	int n = 0, ret = 0;

	/* a parent elsewhere (a file beside a bucket's image) is not ours */
	if (parent && store_is_s3(parent) == !!r.s3)
		ret = read_chain(&r, parent, false, &l, &n);
	if (!ret)
		ret = put_chain(&r, l, n, false, NULL, NULL);
	free_chain(l, n);
	snprintf(top.spec, sizeof(top.spec), "%s", image);
	top.buf = malloc(top.len);
	if (!ret && !top.buf)
		ret = fl_err(-ENOMEM, "%s: no memory", image);
	if (!ret) {
		memcpy(top.buf, hb, hlen);
		memcpy((char *)top.buf + hlen, ib, ilen);
		ret = parse_index(image, top.buf, top.len, &top.img);
	}
	if (!ret) {
		image_id_hex(top.img->hdr.id, id);
		snprintf(name, sizeof(name), STORE_REGISTRY "/%s", id);
		ret = reg_put(&r, name, top.buf, top.len, &created);
	}
	if (!ret && r.s3)
		ret = s3_store_put_spec(r.s3, image, top.buf, top.len);
	else if (!ret && rename(tmp, image) < 0)
		ret = fl_err(-errno, "%s: cannot rename to %s: %m", tmp, image);
	if (ret && created)
		reg_remove(&r, name);	/* no index: no entry of ours */
	free(top.buf);
	image_close(top.img);
	return ret;
}

int store_register(const char *store, const char *const *images, int n,
		   registry_said said, void *arg)
{
	struct store_writer w;
	struct reg r;
	int ret = open_store(store, &w);

	r = reg_of(&w);
	for (int i = 0; !ret && i < n; i++) {
		struct layer *l;
		int nl;

		ret = read_chain(&r, images[i], true, &l, &nl);
		if (!ret)
			ret = put_chain(&r, l, nl, true, said, arg);
		free_chain(l, nl);
	}
	if (!ret)
		ret = put_marker(&r);
	store_close(&w);
	return ret;
}

/* ---- deleting ------------------------------------------------------------- */

/* The registered index id: its bytes (*buf, malloc'd) and its image. */
static int get_entry(const struct reg *r, const char *id, void **buf,
		     struct image **img)
{
	char name[64];
	size_t len;
	int ret;

	snprintf(name, sizeof(name), STORE_REGISTRY "/%s", id);
	ret = reg_get(r, name, buf, &len);
	return ret ? ret : parse_index(name, *buf, len, img);
}

struct child_scan {
	const struct reg *r;
	const char *id;
	char child[IMAGE_ID_HEX];
};

/* Does the registered index id name c->id as its parent? */
static int child_seen(void *arg, const char *id)
{
	struct child_scan *c = arg;
	char pid[IMAGE_ID_HEX];
	struct image *img = NULL;
	void *buf = NULL;
	int ret;

	if (!strcmp(id, c->id))
		return 0;
	ret = get_entry(c->r, id, &buf, &img);
	if (!ret && image_is_diff(&img->hdr)) {
		image_id_hex(img->hdr.parent_id, pid);
		if (!strcmp(pid, c->id)) {
			snprintf(c->child, sizeof(c->child), "%s", id);
			ret = -EBUSY;
		}
	}
	image_close(img);
	free(buf);
	return ret;
}

/* The content id what names: itself (hex), or its index's. */
static int what_id(const struct reg *r, const char *what,
		   char id[IMAGE_ID_HEX])
{
	struct image *img = NULL;
	void *buf = NULL;
	size_t len;
	int ret;

	if (id_ok(what)) {
		snprintf(id, IMAGE_ID_HEX, "%s", what);
		return 0;
	}
	ret = read_index(r, what, &buf, &len);
	if (!ret)
		ret = parse_index(what, buf, len, &img);
	if (!ret)
		image_id_hex(img->hdr.id, id);
	image_close(img);
	free(buf);
	return ret;
}

int store_unregister(const char *store, const char *what,
		     char id[IMAGE_ID_HEX])
{
	struct child_scan c = { 0 };
	struct store_writer w;
	char name[64];
	struct reg r;
	int ret = open_store(store, &w);

	r = reg_of(&w);
	c.r = &r;
	c.id = id;
	id[0] = 0;
	if (!ret)
		ret = what_id(&r, what, id);
	snprintf(name, sizeof(name), STORE_REGISTRY "/%s", id);
	if (!ret && (ret = reg_has(&r, name)) == 0)
		ret = fl_err(-ENOENT, "--store %s: no image %s in its registry "
			     "(nothing deleted)", store, id);
	if (ret > 0)
		ret = each_id(&r, child_seen, &c);
	if (ret == -EBUSY && c.child[0])
		ret = fl_err(-EBUSY, "--store %s: %s is the parent of the "
			     "registered image %s: delete that first (nothing "
			     "deleted)", store, id, c.child);
	if (!ret)
		ret = reg_remove(&r, name);
	store_close(&w);
	return ret;
}

int store_registry_on(const char *store)
{
	struct reg r = { store, -1, NULL, false };
	int ret;

	if (store_is_s3(store)) {
		ret = s3_store_open(store, &r.s3);
		if (!ret)
			ret = reg_has(&r, STORE_REGISTRY_ON);
		s3_store_close(r.s3);
		return ret;
	}
	r.dfd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r.dfd < 0)
		return fl_err(-errno, "--store %s: %m", store);
	ret = reg_has(&r, STORE_REGISTRY_ON);
	close(r.dfd);
	return ret;
}

/* ---- gc ------------------------------------------------------------------- */

struct each {
	const struct reg *r;
	int (*keep)(void *arg, const struct image *img);
	void *arg;
	uint64_t *n;
};

/* The registered index id, checked to be what its name says, kept. */
static int keep_one(void *arg, const char *id)
{
	struct each *e = arg;
	char got[IMAGE_ID_HEX];
	struct image *img = NULL;
	void *buf = NULL;
	int ret = get_entry(e->r, id, &buf, &img);

	if (!ret)
		image_id_hex(img->hdr.id, got);
	if (!ret && (strcmp(got, id) || !image_in_store(&img->hdr)))
		ret = fl_err(-EBADMSG, "%s/" STORE_REGISTRY "/%s: not the "
			     "chunk-store index its name says (content id %s, "
			     "version %u): remove it (image delete %s) or put "
			     "the index back", e->r->spec, id, got,
			     img->hdr.version, id);
	if (!ret) {
		ret = e->keep(e->arg, img);
		++*e->n;
	}
	image_close(img);
	free(buf);
	return ret;
}

int registry_each(const char *spec, int dfd, struct s3_store *s3, bool sweep,
		  int (*keep)(void *arg, const struct image *img), void *arg,
		  uint64_t *n)
{
	struct reg r = { spec, s3 ? -1 : dfd, s3, sweep };
	struct each e = { &r, keep, arg, n };
	int ret = reg_has(&r, STORE_REGISTRY_ON);

	if (ret < 0)
		return ret;
	if (!ret)
		return fl_err(-EPERM, "--store %s: it has no registry (%s): "
			      "its chunks are from before it, of images gc "
			      "cannot know; register every image it keeps "
			      "(faultline image register --store %s IMAGE...), "
			      "then gc", spec, STORE_REGISTRY_ON, spec);
	return each_id(&r, keep_one, &e);
}
