// SPDX-License-Identifier: Apache-2.0
/*
 * layers.c - a base with diffs over it (fl_source_opts.layers): reads
 * of every size and alignment give the topmost layer's bytes (a hole of
 * a raw diff falls through, a page it wrote as zeros is zeros), map()
 * only inside one layer and of that layer's bytes, hole() only where
 * the layer serving it is zeros, an image layer holds everything, URLs
 * (nginx) mix with files as base or layer and their bytes are counted, a
 * raw layer cut short fails its reads instead of showing the base; and
 * every open that cannot be a stack is refused with one line saying why.
 */
#include <linux/falloc.h>

#include "serve_util.h"
#include "diff.h"
#include "faultline.h"
#include "format/image.h"
#include "http_util.h"
#include "source/source.h"

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

	return source_remote_bytes(s, &f, &c) == 0 ? (long long)f : -1;
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

/* URLs mix with files: a base by URL under raw diffs, an image by URL. */
static void test_urls(const uint8_t *mem2, const uint8_t *mem_img)
{
	static const char *const names[] = { "base.mem", "img.fli" };
	const char *files[] = { base.path, path_of("img") };
	const char *diffs[] = { path_of("diff1"), path_of("diff2") };
	char url[2][96], path[256];
	struct fl_source *s;
	struct nginx ng;

	if (!nginx_binary()) {
		skip(3, "nginx not installed (apt-get install nginx-light)");
		return;
	}
	if (nginx_setup(&ng) < 0)
		BAIL("cannot set up nginx in /tmp");
	for (int i = 0; i < 2; i++) {
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
	test_urls(mem2, mem_img);
	test_cut(mem1);
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
