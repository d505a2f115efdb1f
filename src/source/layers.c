// SPDX-License-Identifier: Apache-2.0
/*
 * layers.c - a base snapshot with diffs over it, read as one source
 * (layers.h): a byte comes from the topmost layer that holds it, from the
 * base where none does.  What a layer holds is its extent() (source.h):
 * a raw diff holds its data and not its holes (Firecracker writes a diff
 * snapshot as a sparse file of the pages dirtied since its base), a
 * source that cannot tell (an image, a URL) holds everything.
 *
 * Decision: nothing is merged or indexed at open; each call asks the
 * layers from the top down, run by run (a raw layer's answer is one or
 * two lseeks), so opening costs nothing per layer and the files are
 * never copied.  A read that crosses layers is split; map() answers only
 * for a range one layer serves whole, so the one-copy path of file.c is
 * kept wherever a fill falls within one layer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "format/image.h"
#include "source/layers.h"
#include "util/error.h"
#include "util/size.h"

struct layers {
	struct fl_source s;
	unsigned int n;			/* the base, then the layers upwards */
	struct fl_source *src[];
};

#define to_layers(x) ((struct layers *)(x))

/*
 * The source that serves [off, off+len) from off (off < size, len > 0):
 * the topmost holding off; *run (1..len) how far it serves before
 * another would.
 */
static struct fl_source *serving(const struct layers *l, uint64_t off,
				 uint64_t len, uint64_t *run)
{
	for (unsigned int i = l->n - 1; i > 0; i--) {
		struct fl_source *x = l->src[i];
		bool held = true;
		uint64_t n = len;

		if (x->ops->extent)
			n = x->ops->extent(x, off, len, &held);
		if (!n || n > len)	/* never stuck, never past the range */
			n = len;
		if (held) {
			*run = n;
			return x;
		}
		len = n;	/* a layer below serves at most this far */
	}
	*run = len;
	return l->src[0];
}

static int layers_read(struct fl_source *s, void *buf, size_t len,
		       uint64_t off)
{
	const struct layers *l = to_layers(s);

	if (off > s->size || len > s->size - off)
		return -ERANGE;
	while (len) {
		uint64_t n;
		struct fl_source *x = serving(l, off, len, &n);
		int ret;

		fl_err_clear();	/* what fails says why, or is named below */
		ret = x->ops->read(x, buf, n, off);
		if (ret < 0)
			return *fl_last_error() ? ret :
			       fl_err(ret, "%s: %s", x->desc, strerror(-ret));
		buf = (char *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

static const void *layers_map(struct fl_source *s, uint64_t off, size_t len)
{
	uint64_t n;
	struct fl_source *x;

	if (!len || off >= s->size || len > s->size - off)
		return NULL;
	x = serving(to_layers(s), off, len, &n);
	return n == len && x->ops->map ? x->ops->map(x, off, len) : NULL;
}

/* Zeros where every run is zeros in the layer that serves it. */
static bool layers_hole(struct fl_source *s, uint64_t off, size_t len)
{
	if (!len || off >= s->size || len > s->size - off)
		return false;
	while (len) {
		uint64_t n;
		struct fl_source *x = serving(to_layers(s), off, len, &n);

		if (!x->ops->hole || !x->ops->hole(x, off, n))
			return false;
		off += n;
		len -= n;
	}
	return true;
}

static void layers_hint(struct fl_source *s, uint64_t off, size_t len)
{
	if (!len || off >= s->size || len > s->size - off)
		return;
	while (len) {
		uint64_t n;
		struct fl_source *x = serving(to_layers(s), off, len, &n);

		if (x->ops->hint)
			x->ops->hint(x, off, n);
		off += n;
		len -= n;
	}
}

static int layers_remote_bytes(const struct fl_source *s, uint64_t *fetched,
			       uint64_t *cached)
{
	const struct layers *l = to_layers(s);
	int ret = -ENODATA;

	*fetched = *cached = 0;
	for (unsigned int i = 0; i < l->n; i++) {
		uint64_t f, c;

		if (fl_source_remote_bytes(l->src[i], &f, &c) == 0) {
			*fetched += f;
			*cached += c;
			ret = 0;
		}
	}
	return ret;
}

static void layers_destroy(struct fl_source *s)
{
	struct layers *l = to_layers(s);

	for (unsigned int i = 0; i < l->n; i++)
		fl_source_put(l->src[i]);
	free(l);
}

/* A stack's pages on top are its top layer's. */
static const struct image *layers_image(const struct fl_source *s)
{
	const struct layers *l = to_layers(s);

	return source_image(l->src[l->n - 1]);
}

static const struct fl_source_ops layers_ops = {
	.name = "layers",
	.read = layers_read,
	.map = layers_map,
	.hole = layers_hole,
	.hint = layers_hint,
	.remote_bytes = layers_remote_bytes,
	.image = layers_image,
	.destroy = layers_destroy,
};

/* s at buf + at if it fits before size: the new end, else size. */
static size_t append(char *buf, size_t size, size_t at, const char *s)
{
	size_t n = strlen(s);

	if (at >= size || n >= size - at)
		return size;
	memcpy(buf + at, s, n + 1);
	return at + n;
}

/* "BASE + L1 + L2" for messages, or "BASE + N layers" if that is too long. */
static void describe(const struct layers *l, char *buf, size_t size)
{
	size_t at = append(buf, size, 0, l->src[0]->desc);

	for (unsigned int i = 1; i < l->n; i++)
		at = append(buf, size, append(buf, size, at, " + "),
			    l->src[i]->desc);
	if (at >= size)
		snprintf(buf, size, "%.200s + %u layer%s", l->src[0]->desc,
			 l->n - 1, l->n == 2 ? "" : "s");
}

/* One line refusing layer x of base: not its size. */
static int wrong_size(const struct fl_source *x, const struct fl_source *base)
{
	return fl_err(-EINVAL, "layer %s is %s (%llu bytes), its base %s is "
		      "%s (%llu bytes): not a diff of that base", x->desc,
		      size_str(x->size).s, (unsigned long long)x->size,
		      base->desc, size_str(base->size).s,
		      (unsigned long long)base->size);
}

/*
 * One line refusing layer x, a diff image, over below: not the image it
 * was made over (another content id, or no image at all).  0 if it is,
 * or if x is no diff image.
 */
static int wrong_parent(const struct fl_source *x,
			const struct fl_source *below)
{
	const struct image *xi = source_image(x), *bi = source_image(below);
	char want[IMAGE_ID_HEX], got[IMAGE_ID_HEX];

	if (!xi || !image_is_diff(&xi->hdr))
		return 0;
	image_id_hex(xi->hdr.parent_id, want);
	if (!bi)
		return fl_err(-EINVAL, "layer %s is a diff of image %s (%s), "
			      "and %s below it is not a faultline image: not "
			      "its parent", x->desc, want,
			      xi->hdr.parent_name, below->desc);
	if (!memcmp(bi->hdr.id, xi->hdr.parent_id, IMAGE_ID_LEN))
		return 0;
	image_id_hex(bi->hdr.id, got);
	return fl_err(-EINVAL, "layer %s is a diff of image %s (%s), but %s "
		      "below it is image %s: not its parent", x->desc, want,
		      xi->hdr.parent_name, below->desc, got);
}

int source_layers_open(struct fl_source *base,
		       struct fl_source *const *layers, unsigned int n,
		       struct fl_source **out)
{
	struct layers *l = malloc(sizeof(*l) + sizeof(l->src[0]) * (n + 1));
	char desc[sizeof(l->s.desc)];
	int ret = 0;

	if (!l) {
		fl_source_put(base);
		for (unsigned int i = 0; i < n; i++)
			fl_source_put(layers[i]);
		return -ENOMEM;
	}
	l->n = n + 1;
	l->src[0] = base;
	for (unsigned int i = 0; i < n; i++) {
		l->src[i + 1] = layers[i];
		if (!ret)
			ret = wrong_parent(layers[i], l->src[i]);
		if (!ret && layers[i]->size != base->size)
			ret = wrong_size(layers[i], base);
	}
	if (ret < 0) {
		layers_destroy(&l->s);
		return ret;
	}
	describe(l, desc, sizeof(desc));
	source_init(&l->s, &layers_ops, base->size, desc);
	*out = &l->s;
	return 0;
}

unsigned int source_layers_count(const struct fl_source *s)
{
	return s->ops == &layers_ops ? to_layers(s)->n : 1;
}

struct fl_source *source_layers_at(struct fl_source *s, unsigned int i)
{
	if (s->ops != &layers_ops)
		return i == 0 ? s : NULL;
	return i < to_layers(s)->n ? to_layers(s)->src[i] : NULL;
}
