// SPDX-License-Identifier: Apache-2.0
/*
 * layers.c - a base with diffs over it (fl_source_opts.layers): reads
 * of every size and alignment give the topmost layer's bytes (a hole of
 * a raw diff falls through, a page it wrote as zeros is zeros), map()
 * only inside one layer and of that layer's bytes, hole() only where
 * the layer serving it is zeros, an image layer holds everything, URLs
 * (nginx) mix with files as base or layer and their bytes are counted, a
 * raw layer cut short fails its reads instead of showing the base; a
 * chain of images (a base image, diff images of diff1 and diff2 over it,
 * `image create --parent`) reads as the raw stack does, opened by its top
 * alone, given as layers, or by URL (parents under its prefix), and its
 * content ids are what docs/image-format.md says; and every open that
 * cannot be a stack is refused with one line saying why (a wrong,
 * missing or looping parent, a chain too deep).
 */
#include <linux/falloc.h>

#include "serve_util.h"
#include "diff.h"
#include "faultline.h"
#include "author/create.h"
#include "format/image.h"
#include "http_util.h"
#include "source/layers.h"
#include "source/source.h"

#include <xxhash.h>

#define KIB		1024ull
#define MIB		(1024 * KIB)
#define SIZE		(4 * MIB)
#define BASE_HOLE	(3 * MIB)	/* [3M, 3M+256K) punched in the base */
#define SEED1		0x1100000000000000ull
#define SEED2		0x2200000000000000ull
#define SEED_FULL	0x4400000000000000ull

static char dir[64];
static struct mem_file base;

static const char *path_of(const char *name)
{
	return diff_path(dir, name);
}

/* diff1 over the base, diff2 over diff1: every case of a stack. */
static const struct diff_run diff1[] = {
	DIFF_RUN(64 * KIB, 128 * KIB, SEED1),		/* data over base */
	DIFF_RUN(512 * KIB, 4 * KIB, 0),		/* zeros over data */
	DIFF_RUN(1 * MIB, 4 * KIB, SEED1),
	DIFF_PAGES(2 * MIB, 256 * KIB, SEED1, 3),	/* every third page */
	DIFF_RUN(3 * MIB + 64 * KIB, 64 * KIB, SEED1),	/* over a hole */
};
static const struct diff_run diff2[] = {
	DIFF_RUN(128 * KIB, 128 * KIB, SEED2),		/* half over diff1 */
	DIFF_RUN(1 * MIB, 4 * KIB, 0),			/* zeros over diff1 */
	DIFF_PAGES(2 * MIB, 256 * KIB, SEED2, 5),	/* every fifth */
};
#define N(a)	((int)(sizeof(a) / sizeof((a)[0])))

static int write_diff(const char *name, const struct diff_run *r, int n,
		      uint8_t *mem)
{
	return diff_write(path_of(name), SIZE, r, n, mem);
}

/* spec (NULL: the base) under layers[0..n). */
static struct fl_source *open_stack(const char *spec,
				    const char *const *layers, unsigned int n)
{
	struct fl_source_opts o = { .layers = layers, .nlayers = n };
	struct fl_source *s = NULL;
	int ret = fl_source_open_ex(spec ? spec : base.path, &o, &s);

	if (ret < 0)
		diag("open: %s", fl_last_error());
	return s;
}

/* Read all of s in len-byte pieces (the last shorter): same as want? */
static bool reads_as(struct fl_source *s, const uint8_t *want, uint64_t len)
{
	uint8_t *buf = malloc(len);
	bool same = buf != NULL;

	for (uint64_t off = 0; same && off < SIZE; off += len) {
		uint64_t n = SIZE - off < len ? SIZE - off : len;

		int ret = s->ops->read(s, buf, n, off);
		uint64_t i = 0;

		while (!ret && i < n && buf[i] == want[off + i])
			i++;
		same = !ret && i == n;
		if (!same)
			diag("read of %llu bytes at %llu: %s at offset %llu",
			     (unsigned long long)n, (unsigned long long)off,
			     ret ? fl_last_error() : "not the stack's byte",
			     (unsigned long long)(off + i));
	}
	free(buf);
	return same;
}

static void check_reads(struct fl_source *s, const uint8_t *want,
			const char *what)
{
	ok(reads_as(s, want, SIZE), "%s: one read of everything", what);
	ok(reads_as(s, want, 64 * KIB), "%s: 64 KiB reads", what);
	ok(reads_as(s, want, 3000), "%s: 3000-byte reads, every layer "
	   "boundary inside one", what);
}

static void test_stacks(uint8_t *mem1, uint8_t *mem2)
{
	const char *one[] = { path_of("diff1") };
	const char *two[] = { path_of("diff1"), path_of("diff2") };
	struct fl_source *s = open_stack(NULL, one, 1);
	const uint8_t *m;

	if (!s)
		BAIL("cannot open base + diff1");
	ok(strstr(s->desc, base.path) && strstr(s->desc, one[0]) &&
	   fl_source_size(s) == SIZE, "base + diff1: one source, the base's "
	   "size, named \"%s\"", s->desc);
	check_reads(s, mem1, "base + diff1");
	fl_source_put(s);

	s = open_stack(NULL, two, 2);
	if (!s)
		BAIL("cannot open base + diff1 + diff2");
	check_reads(s, mem2, "base + diff1 + diff2");

	/* map(): one layer's bytes, never two layers' in one range. */
	m = s->ops->map(s, 64 * KIB, 64 * KIB);
	ok(m && !memcmp(m, mem2 + 64 * KIB, 64 * KIB),
	   "map() of a range diff1 holds: diff1's mapping");
	m = s->ops->map(s, 1536 * KIB, 64 * KIB);
	ok(m && !memcmp(m, mem2 + 1536 * KIB, 64 * KIB),
	   "map() of a range no diff holds: the base's mapping");
	ok(!s->ops->map(s, 124 * KIB, 8 * KIB) &&
	   !s->ops->map(s, 60 * KIB, 8 * KIB),
	   "map() of a range across two layers: NULL (read instead)");

	/* hole(): zeros only where the layer serving it says so. */
	ok(s->ops->hole(s, BASE_HOLE, 64 * KIB) &&
	   s->ops->hole(s, BASE_HOLE + 128 * KIB, 128 * KIB),
	   "hole(): the base's hole where no diff holds anything");
	ok(!s->ops->hole(s, BASE_HOLE + 64 * KIB, 4 * KIB) &&
	   !s->ops->hole(s, BASE_HOLE, 68 * KIB),
	   "hole(): not where a diff holds data over the base's hole");
	ok(!s->ops->hole(s, 512 * KIB, 4 * KIB) &&
	   !s->ops->hole(s, 1 * MIB, 4 * KIB),
	   "hole(): not for pages a diff wrote as zeros (data, read)");
	fl_source_put(s);
}

/*
 * An image holds everything: base < image < diff2 is image + diff2 (the
 * memory it makes, returned).
 */
static uint8_t *test_image(void)
{
	static const struct diff_run full[] = {
		DIFF_RUN(0, 1 * MIB, SEED_FULL),
		DIFF_RUN(2 * MIB, 2 * MIB, SEED_FULL),
	};
	const char *layers[] = { path_of("img"), path_of("diff2") };
	uint8_t *mem = calloc(1, SIZE);
	struct fl_source *s;

	if (!mem || diff_write(path_of("full"), SIZE, full, N(full), mem) ||
	    image_create(path_of("full"), path_of("img"), NULL, NULL) < 0 ||
	    write_diff("diff2", diff2, N(diff2), mem))
		BAIL("cannot make the image layer: %s", fl_last_error());
	s = open_stack(NULL, layers, 2);
	if (!s)
		BAIL("cannot open base + image + diff2");
	check_reads(s, mem, "base + image + diff2");
	ok(s->ops->hole(s, 1 * MIB + 4 * KIB, 1 * MIB - 4 * KIB) &&
	   !s->ops->map(s, 3 * MIB, 64 * KIB),
	   "hole() where the image is zero chunks and diff2 holds nothing; "
	   "no map() of the image");
	fl_source_put(s);
	return mem;
}

/* What s fetched from origins, if any remote source is in it. */
static long long fetched(const struct fl_source *s)
{
	uint64_t f, c;

	return fl_source_remote_bytes(s, &f, &c) == 0 ? (long long)f : -1;
}

/* spec under layers reads as want, and counts what its origin sent. */
static void reads_remote(const char *spec, const char *const *layers,
			 const uint8_t *want, const char *what)
{
	struct fl_source *s = open_stack(spec, layers, 2);
	long long got;
	bool same;

	if (!s)
		BAIL("cannot open %s", what);
	same = reads_as(s, want, 64 * KIB);
	got = fetched(s);
	ok(same && got > 0, "%s: every byte the stack's, the origin's bytes "
	   "counted (%lld fetched)", what, got);
	fl_source_put(s);
}

/*
 * URLs mix with files: a base by URL under raw diffs, an image by URL;
 * and a chain of images by URL, its parents found under its prefix.
 */
static void test_urls(const uint8_t *mem2, const uint8_t *mem_img)
{
	static const char *const names[] = { "base.mem", "img.fli",
					     "base.fli", "c1.fli", "c2.fli" };
	const char *files[] = { base.path, path_of("img"), path_of("base.fli"),
				path_of("c1.fli"), path_of("c2.fli") };
	const char *diffs[] = { path_of("diff1"), path_of("diff2") };
	char url[5][96], path[256];
	struct fl_source *s;
	struct nginx ng;

	if (!nginx_binary()) {
		skip_missing(4, "nginx", "not installed (apt-get install "
			     "nginx-light)");
		return;
	}
	if (nginx_setup(&ng) < 0)
		BAIL("cannot set up nginx in /tmp");
	for (int i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", ng.www, names[i]);
		if (link(files[i], path) < 0 || chmod(path, 0644) < 0)
			BAIL("link %s: %s", path, strerror(errno));
		snprintf(url[i], sizeof(url[i]), "http://127.0.0.1:%d/%s",
			 ng.port, names[i]);
	}
	if (nginx_start(&ng) < 0)
		BAIL("nginx does not start");
	reads_remote(url[0], diffs, mem2, "a base by URL under two raw diffs");
	reads_remote(NULL, (const char *[]){ url[1], diffs[1] }, mem_img,
		     "an image by URL over a raw base, under a raw diff");
	s = open_stack(NULL, diffs, 2);
	ok(s && fetched(s) == -1, "a stack of files alone: nothing remote "
	   "to count");
	fl_source_put(s);
	s = open_stack(url[4], NULL, 0);
	ok(s && source_layers_count(s) == 3 &&
	   !strcmp(source_layers_at(s, 1)->desc, url[3]) &&
	   reads_as(s, mem2, 64 * KIB) && fetched(s) > 0,
	   "a diff image by URL: its parents found under its prefix (%s), "
	   "every byte the chain's", s ? s->desc : fl_last_error());
	fl_source_put(s);
	nginx_kill(&ng);
	nginx_cleanup(&ng);
}

/* A raw layer cut short under a reader: its reads fail, never the base. */
static void test_cut(uint8_t *mem1)
{
	const char *one[] = { path_of("cut") };
	struct fl_source *s;
	uint8_t buf[4096];
	int fd;

	if (write_diff("cut", diff1, N(diff1), NULL))
		BAIL("cannot write %s", one[0]);
	s = open_stack(NULL, one, 1);
	fd = open(one[0], O_WRONLY | O_CLOEXEC);
	if (!s || fd < 0 || ftruncate(fd, 1 * MIB) < 0)
		BAIL("cannot cut %s", one[0]);
	close(fd);
	ok(s->ops->read(s, buf, 4096, 64 * KIB) == 0 &&
	   !memcmp(buf, mem1 + 64 * KIB, 4096),
	   "a layer cut short: what is left reads as before");
	ok(s->ops->read(s, buf, 4096, 2 * MIB) < 0 &&
	   s->ops->read(s, buf, 4096, 2 * MIB + 4096) < 0 &&
	   s->ops->read(s, buf, 4096, 3 * MIB + 64 * KIB) < 0,
	   "... past the cut, its data and its holes alike fail to read, "
	   "never the base's bytes (%s)", fl_last_error());
	fl_source_put(s);
}

/* ---- chains of images ------------------------------------------------- */

/* The content id of the image at path, as a hex string (static buffer). */
static const char *id_of(const char *path)
{
	static char hex[4][IMAGE_ID_HEX];
	static int k;
	struct image_info info;
	char *h = hex[k++ % 4];

	if (image_inspect(path, &info) < 0)
		BAIL("inspect %s: %s", path, fl_last_error());
	image_id_hex(info.hdr.id, h);
	return h;
}

/* The file's bytes [off, off+len) appended to buf at *at. */
static void file_bytes(const char *path, uint64_t off, size_t len,
		       uint8_t *buf, size_t *at)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || pread(fd, buf + *at, len, (off_t)off) != (ssize_t)len)
		BAIL("read %s", path);
	close(fd);
	*at += len;
}

/*
 * The id as docs/image-format.md defines it, computed here with
 * libxxhash alone: XXH3-128 of the header before the id (version 1:
 * before header_hash) and the index region, canonical, as hex.
 */
static bool id_as_documented(const char *path, const char *want)
{
	struct image_info in;
	size_t at = 0, hlen, ilen;
	XXH128_canonical_t c;
	char hex[IMAGE_ID_HEX];
	uint8_t *buf;

	if (image_inspect(path, &in) < 0)
		return false;
	hlen = in.hdr.version == 1 ? 72 : 352;
	ilen = in.hdr.chunk_count * 24 + in.hdr.map_len;
	buf = malloc(hlen + ilen);
	file_bytes(path, 0, hlen, buf, &at);
	file_bytes(path, in.hdr.index_offset, ilen, buf, &at);
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, at));
	free(buf);
	image_id_hex(c.digest, hex);
	if (in.hdr.version == 2) {	/* stored at 352 too */
		uint8_t stored[16];

		at = 0;
		file_bytes(path, 352, 16, stored, &at);
		if (memcmp(stored, c.digest, 16))
			return false;
	}
	return !strcmp(hex, want);
}

static void make_image(const char *raw, const char *img, const char *parent)
{
	struct image_create_opts o = { .parent = parent, .chunk_size = 64 * KIB };

	if (image_create(raw, img, &o, NULL) < 0)
		BAIL("image create %s: %s", img, fl_last_error());
}

/* base.fli < c1.fli (diff1) < c2.fli (diff2): the raw stack's bytes. */
static void test_chain(const uint8_t *mem1, const uint8_t *mem2)
{
	char c1[128], c2[128];
	const char *both[] = { c1, c2 };
	struct image_info in;
	struct fl_source *s;
	char want[512];

	snprintf(c1, sizeof(c1), "%s", path_of("c1.fli"));
	snprintf(c2, sizeof(c2), "%s", path_of("c2.fli"));
	make_image(base.path, path_of("base.fli"), NULL);
	make_image(path_of("diff1"), both[0], path_of("base.fli"));
	make_image(path_of("diff2"), both[1], path_of("c1.fli"));

	s = open_stack(both[1], NULL, 0);
	if (!s)
		BAIL("cannot open the chain by its top");
	snprintf(want, sizeof(want), "%s + %s + %s", path_of("base.fli"),
		 both[0], both[1]);
	ok(!strcmp(s->desc, want) && source_layers_count(s) == 3,
	   "c2.fli alone opens its chain, parents found beside it: \"%s\"",
	   s->desc);
	check_reads(s, mem2, "chain base.fli < c1.fli < c2.fli");
	ok(s->ops->hole(s, BASE_HOLE, 64 * KIB) &&
	   !s->ops->hole(s, BASE_HOLE + 64 * KIB, 4 * KIB),
	   "hole(): the base image's zero chunk where no diff holds a page, "
	   "not where c1 holds data over it");
	fl_source_put(s);

	s = open_stack(path_of("base.fli"), both, 2);
	ok(s && reads_as(s, mem2, 64 * KIB), "the same chain given as "
	   "layers over base.fli: every byte the same");
	fl_source_put(s);
	s = open_stack(both[0], both + 1, 1);
	ok(s && source_layers_count(s) == 2 && reads_as(s, mem2, 64 * KIB),
	   "c1.fli as the base (its chain resolved) under c2.fli as a "
	   "layer: every byte the same");
	fl_source_put(s);
	s = open_stack(both[0], NULL, 0);
	ok(s && reads_as(s, mem1, 3000), "c1.fli alone: base + diff1");
	fl_source_put(s);

	if (image_inspect(both[0], &in) < 0)
		BAIL("inspect %s: %s", both[0], fl_last_error());
	ok(in.hdr.version == 2 &&
	   image_is_diff(&in.hdr) && !strcmp(in.hdr.parent_name, "base.fli") &&
	   in.pages == SIZE / 4096 && in.pages_held == 32 + 1 + 1 + 22 + 16,
	   "c1.fli: version 2, parent base.fli, %llu of %llu pages held "
	   "(diff1's data and its page of zeros)",
	   (unsigned long long)in.pages_held, (unsigned long long)in.pages);
	ok(in.count[IMAGE_ZERO] + in.count[IMAGE_RAW] + in.count[IMAGE_ZSTD] ==
	   SIZE / (64 * KIB) && in.stored[IMAGE_RAW] + in.stored[IMAGE_ZSTD] <
	   1 * MIB, "c1.fli stores only the chunks diff1 holds (%llu bytes)",
	   (unsigned long long)(in.stored[IMAGE_RAW] + in.stored[IMAGE_ZSTD]));
	ok(image_inspect(path_of("base.fli"), &in) == 0 &&
	   in.hdr.version == 1 && in.pages_held == in.pages,
	   "an image with no parent is still version 1, every page held");
	ok(id_as_documented(path_of("base.fli"), id_of(path_of("base.fli"))) &&
	   id_as_documented(both[0], id_of(both[0])) &&
	   id_as_documented(both[1], id_of(both[1])),
	   "content ids as documented (version 1 derived, version 2 stored)");
}

/* dir/sub/name; sub made. */
static const char *sub_path(const char *sub, const char *name)
{
	static char bufs[4][160];
	static int k;
	char *p = bufs[k++ % 4];

	snprintf(p, sizeof(bufs[0]), "%s/%s", dir, sub);
	mkdir(p, 0700);
	snprintf(p, sizeof(bufs[0]), "%s/%s/%s", dir, sub, name);
	return p;
}

static void copy_to(const char *from, const char *to)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "cp %s %s", from, to);
	if (system(cmd) != 0)
		BAIL("%s failed", cmd);
}

static void refused(int ret, int err, const char *what, const char *text);

static void test_chain_refused(void)
{
	char c2_path[128];
	const char *c2[] = { c2_path };
	char want[1024];
	struct fl_source *s = NULL;

	snprintf(c2_path, sizeof(c2_path), "%s", path_of("c2.fli"));
	/* given as layers: c2 straight over base.fli, not over c1 */
	snprintf(want, sizeof(want), "layer %s is a diff of image %s "
		 "(c1.fli), but %s below it is image %s: not its parent",
		 c2[0], id_of(path_of("c1.fli")), path_of("base.fli"),
		 id_of(path_of("base.fli")));
	refused(fl_source_open_ex(path_of("base.fli"),
				  &(struct fl_source_opts){ .layers = c2,
				  .nlayers = 1 }, &s), -EINVAL,
		"a diff image over an image not its parent (as layers)", want);
	/* found beside it: a "c1.fli" that is another image */
	copy_to(c2[0], sub_path("wrong", "c2.fli"));
	make_image(base.path, sub_path("wrong", "c1.fli"), NULL);
	snprintf(want, sizeof(want), "layer %s is a diff of image %s "
		 "(c1.fli), but %s below it is image %s: not its parent",
		 sub_path("wrong", "c2.fli"), id_of(path_of("c1.fli")),
		 sub_path("wrong", "c1.fli"),
		 id_of(sub_path("wrong", "c1.fli")));
	refused(fl_source_open(sub_path("wrong", "c2.fli"), &s), -EINVAL,
		"a parent found by name whose content id is another", want);
	/* a diff image over a raw file */
	snprintf(want, sizeof(want), "layer %s is a diff of image %s "
		 "(base.fli), and %s below it is not a faultline image",
		 path_of("c1.fli"), id_of(path_of("base.fli")), base.path);
	refused(fl_source_open_ex(base.path, &(struct fl_source_opts){
				  .layers = (const char *[]){ path_of("c1.fli") },
				  .nlayers = 1 }, &s), -EINVAL,
		"a diff image over a raw file", want);
	/* missing */
	copy_to(c2[0], sub_path("missing", "c2.fli"));
	snprintf(want, sizeof(want), "%s: its parent %s (image %s): ",
		 sub_path("missing", "c2.fli"), sub_path("missing", "c1.fli"),
		 id_of(path_of("c1.fli")));
	refused(fl_source_open(sub_path("missing", "c2.fli"), &s), -ENOENT,
		"a missing parent", want);
	/* a loop: base.fli replaced by a diff over c1.fli */
	copy_to(path_of("base.fli"), sub_path("loop", "base.fli"));
	copy_to(path_of("c1.fli"), sub_path("loop", "c1.fli"));
	make_image(path_of("diff2"), sub_path("loop", "z.fli"),
		   sub_path("loop", "c1.fli"));
	if (rename(sub_path("loop", "z.fli"), sub_path("loop", "base.fli")))
		BAIL("rename: %s", strerror(errno));
	snprintf(want, sizeof(want), "%s: its chain of parents loops: %s -> "
		 "%s -> %s", sub_path("loop", "c1.fli"),
		 sub_path("loop", "c1.fli"), sub_path("loop", "base.fli"),
		 sub_path("loop", "c1.fli"));
	refused(fl_source_open(sub_path("loop", "c1.fli"), &s), -ELOOP,
		"a chain that loops", want);
	ok(s == NULL, "nothing opened by any of them");
}

/* FL_MAX_LAYERS diff images over a base open; one more is refused. */
static void test_chain_deep(void)
{
	static const struct diff_run page[] = { DIFF_RUN(0, 4 * KIB, SEED1) };
	char name[32], parent[32], want[128];
	struct fl_source *s = NULL;
	int ret;

	if (diff_write(sub_path("deep", "small"), 64 * KIB, NULL, 0, NULL) ||
	    diff_write(sub_path("deep", "page"), 64 * KIB, page, 1, NULL))
		BAIL("cannot write the deep chain's files");
	make_image(sub_path("deep", "small"), sub_path("deep", "0.fli"), NULL);
	for (int i = 1; i <= FL_MAX_LAYERS + 1; i++) {
		snprintf(name, sizeof(name), "%d.fli", i);
		snprintf(parent, sizeof(parent), "%d.fli", i - 1);
		make_image(sub_path("deep", "page"), sub_path("deep", name),
			   sub_path("deep", parent));
	}
	snprintf(name, sizeof(name), "%d.fli", FL_MAX_LAYERS);
	ret = fl_source_open(sub_path("deep", name), &s);
	ok(ret == 0 && source_layers_count(s) == FL_MAX_LAYERS + 1,
	   "a chain of %d diff images opens (%s)", FL_MAX_LAYERS,
	   ret ? fl_last_error() : "ok");
	if (s)
		fl_source_put(s);
	s = NULL;
	snprintf(name, sizeof(name), "%d.fli", FL_MAX_LAYERS + 1);
	snprintf(want, sizeof(want), "a chain of more than %d diff images",
		 FL_MAX_LAYERS);
	refused(fl_source_open(sub_path("deep", name), &s), -ELOOP,
		"one diff image more", want);
}

static void refused(int ret, int err, const char *what, const char *text)
{
	ok(ret == err && strstr(fl_last_error(), text),
	   "%s: %d (want %d), \"%s\" says \"%s\"", what, ret, err,
	   fl_last_error(), text);
}

static void test_refused(void)
{
	const char *small[] = { path_of("small") };
	const char *missing[] = { path_of("diff1"), path_of("nosuch") };
	const char *scheme[] = { "ftp://host/diff" };
	const char *many[FL_MAX_LAYERS + 1];
	struct fl_source_opts o = { .layers = small, .nlayers = 1 };
	struct fl_source *s = NULL;
	char want[256];

	if (diff_write(small[0], SIZE / 2, NULL, 0, NULL))
		BAIL("cannot write %s", small[0]);
	snprintf(want, sizeof(want), "layer %s is 2 MiB (2097152 bytes), its "
		 "base %s is 4 MiB (4194304 bytes): not a diff of that base",
		 small[0], base.path);
	refused(fl_source_open_ex(base.path, &o, &s), -EINVAL,
		"a layer of half the base's size", want);
	o.layers = missing;
	o.nlayers = 2;
	refused(fl_source_open_ex(base.path, &o, &s), -ENOENT,
		"a missing second layer", "layer 2 of 2: ");
	o.layers = scheme;
	o.nlayers = 1;
	refused(fl_source_open_ex(base.path, &o, &s), -EINVAL,
		"a layer of a scheme faultline does not read",
		"unsupported scheme ftp://");
	for (int i = 0; i <= FL_MAX_LAYERS; i++)
		many[i] = missing[0];
	o.layers = many;
	o.nlayers = FL_MAX_LAYERS + 1;
	refused(fl_source_open_ex(base.path, &o, &s), -EINVAL,
		"one layer more than FL_MAX_LAYERS", "at most 64");
	o.layers = NULL;
	o.nlayers = 1;
	refused(fl_source_open_ex(base.path, &o, &s), -EINVAL,
		"nlayers 1, layers NULL", "layers is NULL");
	o.nlayers = 0;
	o.reserved32 = 1;
	refused(fl_source_open_ex(base.path, &o, &s), -EINVAL,
		"reserved32 not zero", "reserved");
	ok(s == NULL, "nothing opened by any of them");
}

int main(void)
{
	uint8_t *mem1, *mem2, *mem_img;
	char cmd[96];
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/fl-layers-XXXXXX");
	if (!mkdtemp(dir))
		BAIL("mkdtemp: %s", strerror(errno));
	if (mem_file_create(&base, SIZE, 0x0b00000000000000ull) < 0)
		BAIL("cannot create the base");
	fd = open(base.path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				BASE_HOLE, 256 * KIB) < 0)
		skip_all("cannot punch holes in /tmp");
	close(fd);
	mem1 = malloc(SIZE);
	mem2 = malloc(SIZE);
	if (!mem1 || !mem2)
		BAIL("out of memory");
	memcpy(mem1, base.map, SIZE);
	if (write_diff("diff1", diff1, N(diff1), mem1))
		BAIL("cannot write diff1");
	memcpy(mem2, mem1, SIZE);
	if (write_diff("diff2", diff2, N(diff2), mem2))
		BAIL("cannot write diff2");
	if (!diff_holes_seen(path_of("diff1"), 64 * KIB))
		skip_all("the filesystem of /tmp does not report holes page "
			 "by page (SEEK_DATA)");
	test_stacks(mem1, mem2);
	mem_img = test_image();
	test_chain(mem1, mem2);
	test_urls(mem2, mem_img);
	test_cut(mem1);
	test_chain_refused();
	test_chain_deep();
	test_refused();
	free(mem1);
	free(mem2);
	free(mem_img);
	mem_file_destroy(&base);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
