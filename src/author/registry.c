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
#include "author/chunk_set.h"
#include "author/registry.h"
#include "format/image.h"
#include "source/layers.h"
#include "source/source.h"
#include "store/chunk_store.h"
#include "store/store.h"
#include "util/error.h"

#define REG_MARKER_BODY	"faultline chunk store registry 1\n"

/* One layer of a chain: its index's bytes and the image they make. */
struct layer {
	char spec[4096];
	void *buf;
	size_t len;
	struct image *img;
};

static bool id_ok(const char *s)
{
	return strlen(s) == IMAGE_ID_HEX - 1 &&
	       strspn(s, "0123456789abcdef") == IMAGE_ID_HEX - 1;
}

/* ---- the store's objects, through its ops -------------------------------- */

/* The object name (relative to the store) read whole: 0 or -errno. */
static int reg_get(struct store *s, const char *name, void **buf,
		   size_t *len)
{
	return s->ops->get(s, name, STORE_INDEX_MAX, buf, len);
}

/* Is the object name (relative to the store) there?  1, 0 or -errno. */
static int reg_has(struct store *s, const char *name)
{
	uint64_t size;
	int ret = s->ops->head(s, name, &size);

	return ret == -ENOENT ? 0 : ret < 0 ? ret : 1;
}

/*
 * The object name (relative to the store, under registry/) written
 * whole and durably unless it is there: *created if it was not.
 */
static int reg_put(struct store *s, const char *name, const void *buf,
		   size_t len, bool *created)
{
	uint64_t size;
	int ret = reg_has(s, name);

	*created = false;
	if (ret)
		return ret < 0 ? ret : 0;
	return s->ops->put(s, name, buf, len, STORE_DURABLE, &size, created);
}

/* The object name (relative to the store) removed: 0 or -errno. */
static int reg_remove(struct store *s, const char *name)
{
	return s->ops->del(s, name, STORE_DURABLE);
}

struct ids {
	struct store *s;
	bool sweep;
	int (*fn)(void *arg, const char *id);
	void *arg;
};

static int id_seen(void *arg, const struct store_entry *e)
{
	const struct ids *x = arg;
	const char *base = strrchr(e->name, '/');

	base = base ? base + 1 : e->name;
	if (e->type == STORE_OBJECT && id_ok(base))
		return x->fn(x->arg, base);
	if (e->type == STORE_TEMP && x->sweep && e->mtime &&
	    time(NULL) - e->mtime > STORE_STALE_TMP_S)
		x->s->ops->del(x->s, e->name, 0);	/* a writer that died */
	return 0;
}

/*
 * fn() called with each registered content id; stops at its error.
 * sweep: a writer's temporaries older than STORE_STALE_TMP_S removed.
 */
static int each_id(struct store *s, bool sweep,
		   int (*fn)(void *arg, const char *id), void *arg)
{
	struct ids x = { s, sweep, fn, arg };

	return s->ops->list(s, STORE_REGISTRY "/", id_seen, &x);
}

static int chunk_seen(void *arg, const struct store_entry *e)
{
	(void)arg;
	(void)e;
	return -EEXIST;		/* one is enough */
}

/* Does the store hold anything under chunks/?  1, 0 or -errno. */
static int has_chunks(struct store *s)
{
	int ret = s->ops->list(s, STORE_CHUNKS "/", chunk_seen, NULL);

	return ret == -EEXIST ? 1 : ret;
}

static int put_marker(struct store *s)
{
	bool created;

	return reg_put(s, STORE_REGISTRY_ON, REG_MARKER_BODY,
		       strlen(REG_MARKER_BODY), &created);
}

int registry_start(struct store *s)
{
	int ret = reg_has(s, STORE_REGISTRY_ON);

	if (!ret)
		ret = has_chunks(s);
	if (ret)		/* on already; or chunks from before it */
		return ret < 0 ? ret : 0;
	return put_marker(s);
}

/* The store at dir opened with flags, held shared, its registry started. */
static int open_held(const char *dir, unsigned int flags, struct store **s)
{
	int ret = store_open(dir, flags, NULL, s);

	if (ret < 0) {
		*s = NULL;
		return ret;
	}
	ret = (*s)->ops->lock(*s, false);
	return ret ? ret : registry_start(*s);
}

int registry_open_write(const char *dir, struct store **s)
{
	return open_held(dir, STORE_CREATE, s);
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
static int read_index(struct store *s, const char *spec, void **buf,
		      size_t *len)
{
	return s->ops->get_index(s, spec, STORE_INDEX_MAX, buf, len);
}

/* Are the chunks of img (at spec) in this store? */
static bool in_store(struct store *s, const char *spec,
		     const struct image *img)
{
	char at[4096];

	return image_in_store(&img->hdr) &&
	       store_resolve(spec, img->hdr.store_path, at, sizeof(at)) == 0 &&
	       s->ops->is(s, at);
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
static int read_chain(struct store *r, const char *spec, bool top,
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
static int put_chain(struct store *r, struct layer *l, int n, bool check,
		     registry_said said, void *arg)
{
	for (int i = n; i-- > 0;) {
		char id[IMAGE_ID_HEX], name[64];
		bool created;
		int ret;

		if (check && (ret = store_check_chunks(r, l[i].img,
						       l[i].spec)) < 0)
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
static int open_store(const char *spec, struct store **s)
{
	return open_held(spec, STORE_EXISTING, s);
}

int store_publish(struct store *r, const char *tmp, const char *image,
		  const char *parent, const void *hb, size_t hlen,
		  const void *ib, size_t ilen)
{
	struct layer *l = NULL, top = { .len = hlen + ilen };
	char id[IMAGE_ID_HEX], name[64];
	bool created = false;
	int n = 0, ret = 0;

	/* its layers in this store (in_store: not a parent elsewhere) */
	if (parent)
		ret = read_chain(r, parent, false, &l, &n);
	if (!ret)
		ret = put_chain(r, l, n, false, NULL, NULL);
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
		ret = reg_put(r, name, top.buf, top.len, &created);
	}
	if (!ret)	/* renamed into place, or put */
		ret = r->ops->put_index(r, tmp, image, top.buf, top.len);
	if (ret && created)
		reg_remove(r, name);	/* no index: no entry of ours */
	free(top.buf);
	image_close(top.img);
	return ret;
}

int store_register(const char *store, const char *const *images, int n,
		   registry_said said, void *arg)
{
	struct store *r;
	int ret = open_store(store, &r);

	for (int i = 0; !ret && i < n; i++) {
		struct layer *l;
		int nl;

		ret = read_chain(r, images[i], true, &l, &nl);
		if (!ret)
			ret = put_chain(r, l, nl, true, said, arg);
		free_chain(l, nl);
	}
	if (!ret)
		ret = put_marker(r);
	store_close(r);
	return ret;
}

/* ---- deleting ------------------------------------------------------------- */

/* The registered index id: its bytes (*buf, malloc'd) and its image. */
static int get_entry(struct store *r, const char *id, void **buf,
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
	struct store *r;
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
static int what_id(struct store *r, const char *what,
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
	char name[64];
	struct store *r;
	int ret = open_store(store, &r);

	c.r = r;
	c.id = id;
	id[0] = 0;
	if (!ret)
		ret = what_id(r, what, id);
	snprintf(name, sizeof(name), STORE_REGISTRY "/%s", id);
	if (!ret && (ret = reg_has(r, name)) == 0)
		ret = fl_err(-ENOENT, "--store %s: no image %s in its registry "
			     "(nothing deleted)", store, id);
	if (ret > 0)
		ret = each_id(r, false, child_seen, &c);
	if (ret == -EBUSY && c.child[0])
		ret = fl_err(-EBUSY, "--store %s: %s is the parent of the "
			     "registered image %s: delete that first (nothing "
			     "deleted)", store, id, c.child);
	if (!ret)
		ret = reg_remove(r, name);
	store_close(r);
	return ret;
}

int store_registry_on(const char *store)
{
	struct store *s;
	int ret = store_open(store, 0, NULL, &s);

	if (ret < 0)
		return ret;
	ret = reg_has(s, STORE_REGISTRY_ON);
	store_close(s);
	return ret;
}

/* ---- gc ------------------------------------------------------------------- */

struct each {
	struct store *r;
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
			     "the index back", e->r->name, id, got,
			     img->hdr.version, id);
	if (!ret) {
		ret = e->keep(e->arg, img);
		++*e->n;
	}
	image_close(img);
	free(buf);
	return ret;
}

int registry_each(struct store *r, bool sweep,
		  int (*keep)(void *arg, const struct image *img), void *arg,
		  uint64_t *n)
{
	struct each e = { r, keep, arg, n };
	const char *spec = r->name;
	int ret = reg_has(r, STORE_REGISTRY_ON);

	if (ret < 0)
		return ret;
	if (!ret)
		return fl_err(-EPERM, "--store %s: it has no registry (%s): "
			      "its chunks are from before it, of images gc "
			      "cannot know; register every image it keeps "
			      "(faultline image register --store %s IMAGE...), "
			      "then gc", spec, STORE_REGISTRY_ON, spec);
	return each_id(r, sweep, keep_one, &e);
}
