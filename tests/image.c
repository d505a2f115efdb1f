// SPDX-License-Identifier: Apache-2.0
/*
 * tests/image.c - the compressed chunked image: create from random, zero,
 * sparse and mixed files at several chunk sizes, read back through
 * fl_source_open() at random offsets and lengths (also from several threads),
 * inspect, verify, and reject corrupt, truncated and foreign images.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faultline.h"
#include "author/create.h"
#include "format/image.h"
#include "source/source.h"
#include "tap.h"
#include "util.h"
#include <xxhash.h>

static char dir[64];

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static char *path_of(const char *name)
{
	return path_in(dir, name);
}

static void write_at(const char *path, const void *buf, size_t len,
		     off_t off, bool trunc)
{
	int fd = open(path, O_WRONLY | O_CREAT | (trunc ? O_TRUNC : 0), 0644);

	if (fd < 0 || pwrite(fd, buf, len, off) != (ssize_t)len)
		BAIL("cannot write %s: %s", path, strerror(errno));
	close(fd);
}

static unsigned char *slurp(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) < 0)
		BAIL("cannot open %s", path);
	buf = malloc(st.st_size + 1);
	if (!buf || (st.st_size &&
		     pread(fd, buf, st.st_size, 0) != st.st_size))
		BAIL("cannot read %s", path);
	close(fd);
	*len = st.st_size;
	return buf;
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

/* ---- generators --------------------------------------------------------- */

static void gen_random(const char *path, size_t len)
{
	unsigned char *b = malloc(len);

	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(rnd() >> 24);
	write_at(path, b, len, 0, true);
	free(b);
}

static void gen_zero(const char *path, size_t len)
{
	unsigned char *b = calloc(1, len);

	write_at(path, b, len, 0, true);	/* written zeros, not holes */
	free(b);
}

/* Holes with a few data islands, some not page aligned. */
static void gen_sparse(const char *path, uint64_t len)
{
	static const uint64_t at[] = { 0, 5 << 20, (9 << 20) + 123,
				       (33 << 20) - 7 };
	unsigned char b[20000];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		BAIL("cannot create %s", path);
	close(fd);
	for (size_t k = 0; k < sizeof(at) / sizeof(*at); k++) {
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)(rnd() | 1);
		write_at(path, b, sizeof(b), (off_t)at[k], false);
	}
}

/* Text, random runs and zero runs, like real memory. */
static void gen_mixed(const char *path, size_t len)
{
	unsigned char *b = malloc(len);
	size_t i = 0;

	while (i < len) {
		size_t run = 1000 + rnd() % 300000;
		int what = (int)(rnd() % 4);

		if (run > len - i)
			run = len - i;
		for (size_t k = 0; k < run; k++) {
			if (what == 0)
				b[i + k] = (unsigned char)(rnd() >> 24);
			else if (what == 1)
				b[i + k] = 0;
			else
				b[i + k] = "the quick brown fox jumps over "
					   "the lazy dog 0123456789\n"
					   [(i + k) % 55];
		}
		i += run;
	}
	write_at(path, b, len, 0, true);
	free(b);
}

/* ---- checks ------------------------------------------------------------- */

/* Compare reads through the source with the raw file; 0 if all equal. */
static int compare_reads(struct fl_source *s, const unsigned char *raw,
			 size_t len, uint32_t cs, int nreads)
{
	unsigned char *buf = malloc(len + 1);
	int ret;

	if (fl_source_size(s) != len)
		return -1;
	ret = s->ops->read(s, buf, len, 0);
	if (ret < 0 || memcmp(buf, raw, len)) {
		diag("whole read: %d %s", ret, fl_last_error());
		free(buf);
		return -1;
	}
	for (int r = 0; r < nreads && len; r++) {
		uint64_t off, n;

		switch (r % 3) {
		case 0:		/* anywhere */
			off = rnd() % len;
			n = 1 + rnd() % (len - off);
			if (n > 3 * (uint64_t)cs)
				n = 1 + rnd() % (3 * (uint64_t)cs);
			break;
		case 1:		/* across a chunk boundary */
			off = (rnd() % (len / cs + 1)) * cs;
			off = off > 100 ? off - 1 - rnd() % 100 : 0;
			n = 1 + rnd() % (cs + 200);
			break;
		default:	/* small, inside one chunk */
			off = rnd() % len;
			n = 1 + rnd() % 64;
			break;
		}
		if (off + n > len)
			n = len - off;
		if (off >= len || !n)
			continue;
		memset(buf, 0xa5, n);
		ret = s->ops->read(s, buf, n, off);
		if (ret < 0 || memcmp(buf, raw + off, n)) {
			diag("read %llu+%llu: %d %s", (unsigned long long)off,
			     (unsigned long long)n, ret, fl_last_error());
			free(buf);
			return -1;
		}
	}
	free(buf);
	return 0;
}

struct thr {
	struct fl_source *s;
	const unsigned char *raw;
	size_t len;
	uint32_t cs;
	uint64_t seed;
	int bad;
};

static void *reader(void *arg)
{
	struct thr *t = arg;
	unsigned char *buf = malloc(3 * (size_t)t->cs);
	uint64_t x = t->seed;

	for (int r = 0; r < 3000; r++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint64_t off = x % t->len;
		uint64_t n = 1 + (x >> 32) % (r % 2 ? 512 : 2 * t->cs);

		if (off + n > t->len)
			n = t->len - off;
		if (t->s->ops->read(t->s, buf, n, off) < 0 ||
		    memcmp(buf, t->raw + off, n)) {
			t->bad++;
			break;
		}
	}
	free(buf);
	return NULL;
}

static int run_cli(const char *args)
{
	return run_image_cli(dir, args);
}

static bool cli_output_has(const char *needle)
{
	size_t len;
	unsigned char *b = slurp(path_of("cli.out"), &len);
	bool yes;

	b[len] = 0;
	yes = strstr((char *)b, needle) != NULL;
	free(b);
	return yes;
}

static void copy_file(const char *from, const char *to)
{
	size_t len;
	unsigned char *b = slurp(from, &len);

	write_at(to, b, len, 0, true);
	free(b);
}

/* Flip one byte in the stored data of the last chunk of kind. */
static int corrupt_chunk(const char *img_path, int kind, uint64_t *idx,
			 uint64_t *off)
{
	struct image *img;
	uint64_t at = 0;
	bool found = false;
	unsigned char c;
	int fd;

	if (image_open(img_path, &img) < 0)
		return -1;
	for (uint64_t i = 0; i < img->hdr.chunk_count; i++) {
		if (img->index[i].kind != kind)
			continue;
		*idx = i;
		*off = img->index[i].offset;
		at = *off + img->index[i].stored_len / 2;
		found = true;
	}
	image_close(img);
	if (!found)
		return -1;
	fd = open(img_path, O_RDWR);
	if (fd < 0 || pread(fd, &c, 1, (off_t)at) != 1)
		return -1;
	c ^= 0x10;
	if (pwrite(fd, &c, 1, (off_t)at) != 1)
		return -1;
	close(fd);
	return 0;
}

static void patch_byte(const char *path, off_t at, unsigned char xor)
{
	unsigned char c;
	int fd = open(path, O_RDWR);

	if (fd < 0 || pread(fd, &c, 1, at) != 1)
		BAIL("patch %s", path);
	c ^= xor;
	if (pwrite(fd, &c, 1, at) != 1)
		BAIL("patch %s", path);
	close(fd);
}

static void report_count(void *arg, const char *msg)
{
	diag("verify: %s", msg);
	++*(int *)arg;
}

/* Read chunk idx through the source: expect failure naming the chunk. */
static void expect_bad_read(const char *img_path, uint64_t idx, uint64_t off,
			    const char *what)
{
	struct fl_source *s;
	char want_chunk[64], want_off[64];
	unsigned char buf[100];
	int ret;

	if (fl_source_open(img_path, &s) < 0) {
		ok(0, "%s: open for read: %s", what, fl_last_error());
		return;
	}
	struct image *img = NULL;
	uint32_t cs;

	image_open(img_path, &img);
	cs = img ? img->hdr.chunk_size : 4096;
	image_close(img);
	ret = s->ops->read(s, buf, sizeof(buf), idx * cs + 10);
	snprintf(want_chunk, sizeof(want_chunk), "chunk %llu ",
		 (unsigned long long)idx);
	snprintf(want_off, sizeof(want_off), "offset %llu",
		 (unsigned long long)off);
	ok((ret == -EBADMSG || ret == -EIO) &&
	   strstr(fl_last_error(), want_chunk) &&
	   strstr(fl_last_error(), want_off),
	   "%s: read fails (%d) naming chunk and offset: %s", what, ret,
	   fl_last_error());
	/* Twice: a bad chunk is never cached as good. */
	ret = s->ops->read(s, buf, sizeof(buf), idx * cs + 20);
	ok(ret == -EBADMSG || ret == -EIO, "%s: second read fails too", what);
	fl_source_put(s);
}

/* ---- cases ------------------------------------------------------------- */

static const uint32_t chunks[] = { 4 << 10, 64 << 10, 2 << 20 };

static struct {
	const char *name;
	size_t len;
	void (*gen)(const char *, size_t);
} files[] = {
	{ "random", (5 << 20) + 1234, gen_random },
	{ "zero", (3 << 20) + 100, gen_zero },
	{ "sparse", (40 << 20) + 4095, NULL },
	{ "mixed", (7 << 20) + 333, gen_mixed },
};

/* Every kind of file at every chunk size: create, open, read back. */
static int case_create_read(void)
{
	struct image_create_opts o = { 0 };
	struct image_info info;
	struct fl_source *s;
	char img[256];
	int ret;

	for (size_t f = 0; f < sizeof(files) / sizeof(*files); f++) {
		const char *raw_path = path_of(files[f].name);
		unsigned char *raw;
		size_t len;

		if (files[f].gen)
			files[f].gen(raw_path, files[f].len);
		else
			gen_sparse(raw_path, files[f].len);
		raw = slurp(raw_path, &len);
		for (size_t c = 0; c < sizeof(chunks) / sizeof(*chunks); c++) {
			snprintf(img, sizeof(img), "%s/%s-%u.fli", dir,
				 files[f].name, chunks[c] >> 10);
			o.chunk_size = chunks[c];
			ret = image_create(raw_path, img, &o, &info);
			if (ret < 0) {
				ok(0, "create %s: %s", img, fl_last_error());
				continue;
			}
			ret = fl_source_open(img, &s);
			if (ret < 0) {
				ok(0, "open %s: %s", img, fl_last_error());
				continue;
			}
			ok(!strcmp(s->ops->name, "image") &&
			   !compare_reads(s, raw, len, chunks[c], 600),
			   "%s, chunk %uK: %llu bytes in %llu (zero %llu raw %llu zstd %llu), reads match",
			   files[f].name, chunks[c] >> 10,
			   (unsigned long long)len,
			   (unsigned long long)info.file_size,
			   (unsigned long long)info.count[IMAGE_ZERO],
			   (unsigned long long)info.count[IMAGE_RAW],
			   (unsigned long long)info.count[IMAGE_ZSTD]);
			if (!strcmp(files[f].name, "zero"))
				ok(info.count[IMAGE_ZERO] ==
				   info.hdr.chunk_count &&
				   info.file_size <
				   100 + 24 * info.hdr.chunk_count &&
				   s->ops->hole(s, 0, len),
				   "zero, chunk %uK: all chunks zero, nothing stored, hole() true",
				   chunks[c] >> 10);
			if (!strcmp(files[f].name, "random"))
				ok(info.count[IMAGE_RAW] ==
				   info.hdr.chunk_count,
				   "random, chunk %uK: every chunk stored raw",
				   chunks[c] >> 10);
			if (!strcmp(files[f].name, "mixed"))
				ok(info.count[IMAGE_ZSTD] > 0 &&
				   info.file_size < len * 3 / 4,
				   "mixed, chunk %uK: zstd chunks, ratio %.2f",
				   chunks[c] >> 10,
				   (double)len / info.file_size);
			if (!strcmp(files[f].name, "sparse"))
				ok(s->ops->hole(s, 20 << 20, chunks[c]) &&
				   !s->ops->hole(s, 5 << 20, 1) &&
				   !s->ops->hole(s, 0, len) &&
				   info.file_size < (2u << 20) * 4 + 100000,
				   "sparse, chunk %uK: hole() right, image %llu bytes",
				   chunks[c] >> 10,
				   (unsigned long long)info.file_size);
			fl_source_put(s);
		}
		free(raw);
	}
	return 0;
}

/* Concurrent readers on one source, partial reads through the cache. */
static int case_threads(void)
{
	struct fl_source *s;
	char img[256];
	const char *raw_path = path_of("mixed");
	unsigned char *raw;
	size_t len;
	struct thr t[4];
	pthread_t tid[4];
	int bad = 0;

	raw = slurp(raw_path, &len);
	snprintf(img, sizeof(img), "%s/mixed-64.fli", dir);
	if (fl_source_open(img, &s) < 0)
		BAIL("open %s: %s", img, fl_last_error());
	for (int k = 0; k < 4; k++) {
		t[k] = (struct thr){ s, raw, len, 64 << 10,
				     0x1234567ull * (k + 1), 0 };
		pthread_create(&tid[k], NULL, reader, &t[k]);
	}
	for (int k = 0; k < 4; k++) {
		pthread_join(tid[k], NULL);
		bad += t[k].bad;
	}
	ok(!bad, "4 threads x 3000 random reads match");
	fl_source_put(s);
	free(raw);
	return 0;
}

/* Empty raw file. */
static int case_empty(void)
{
	struct image_info info;
	struct fl_source *s;
	char img[256];
	int ret;

	write_at(path_of("empty"), "", 0, 0, true);
	ret = image_create(path_of("empty"), path_of("empty.fli"), NULL, &info);
	ok(!ret && fl_source_open(path_of("empty.fli"), &s) == 0 &&
	   fl_source_size(s) == 0 && s->ops->read(s, img, 0, 0) == 0,
	   "empty file: image of size 0 opens and reads");
	if (!ret)
		fl_source_put(s);
	return 0;
}

/* inspect / verify */
static int case_inspect_verify(void)
{
	struct image_info info;
	char img[256];
	int ret;

	snprintf(img, sizeof(img), "%s/mixed-64.fli", dir);
	ret = image_inspect(img, &info);
	ok(!ret && info.hdr.version == IMAGE_VERSION &&
	   info.hdr.chunk_size == 64 << 10 &&
	   info.hdr.total_size == (7 << 20) + 333 &&
	   info.count[0] + info.count[1] + info.count[2] ==
	   info.hdr.chunk_count && info.file_size == file_size(img),
	   "inspect: header and counts");
	{
		int nrep = 0;
		uint64_t nbad = 99;

		ret = image_verify(img, report_count, &nrep, &nbad);
		ok(!ret && !nbad && !nrep, "verify: good image passes");
	}
	return 0;
}

/* Default chunk is 512K; no temporary files left behind. */
static int case_default_chunk(void)
{
	struct image_info info;
	int ret;

	ret = image_create(path_of("mixed"), path_of("default.fli"), NULL,
			   &info);
	ok(!ret && info.hdr.chunk_size == 512 << 10 &&
	   info.hdr.level == IMAGE_DEFAULT_LEVEL,
	   "default chunk 512K, level %d", IMAGE_DEFAULT_LEVEL);

	/* No temporary files left behind. */
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "ls %s | grep -q '\\.tmp\\.'", dir);
		ok(system(cmd) != 0, "no temporary files left");
	}
	return 0;
}

/* Corruption: a flipped byte in a zstd chunk and in a raw chunk. */
static int case_corrupt(void)
{
	int ret;

	static const struct {
		const char *src;
		int kind;
	} cases[] = { { "mixed-64.fli", IMAGE_ZSTD },
		      { "random-4.fli", IMAGE_RAW } };

	for (int k = 0; k < 2; k++) {
		const char *bad = path_of("bad.fli");
		uint64_t idx = 0, off = 0, nbad = 0;
		int nrep = 0;
		char want[64];

		copy_file(path_of(cases[k].src), bad);
		if (corrupt_chunk(bad, cases[k].kind, &idx, &off) < 0)
			BAIL("cannot corrupt %s", bad);
		ret = image_verify(bad, report_count, &nrep, &nbad);
		snprintf(want, sizeof(want), "%llu bad chunk",
			 (unsigned long long)1);
		ok(ret == -EBADMSG && nbad == 1 && nrep == 1,
		   "verify finds the flipped byte in a %s chunk (%s)",
		   cases[k].kind == IMAGE_ZSTD ? "zstd" : "raw",
		   fl_last_error());
		expect_bad_read(bad, idx, off,
				cases[k].kind == IMAGE_ZSTD ?
				"flipped zstd chunk" : "flipped raw chunk");
	}
	return 0;
}

/* Truncated image: rejected at open, naming the chunk. */
static int case_truncated(void)
{
	struct fl_source *s;
	int ret;

	const char *bad = path_of("trunc.fli");

	copy_file(path_of("mixed-64.fli"), bad);
	if (truncate(bad, (off_t)(file_size(bad) - 5000)) < 0)
		BAIL("truncate");
	ret = fl_source_open(bad, &s);
	ok(ret == -EBADMSG && strstr(fl_last_error(), "chunk ") &&
	   strstr(fl_last_error(), "truncated"),
	   "truncated image rejected at open: %s", fl_last_error());
	if (!ret)
		fl_source_put(s);

	/* Truncated underneath an open source: reads fail. */
	copy_file(path_of("random-64.fli"), bad);
	ret = fl_source_open(bad, &s);
	if (ret < 0)
		BAIL("open %s", bad);
	if (truncate(bad, 100000) < 0)
		BAIL("truncate");
	{
		unsigned char *buf = malloc(1 << 20);

		ret = s->ops->read(s, buf, 1 << 20, 4 << 20);
		ok(ret == -EIO && strstr(fl_last_error(), "chunk 64 "),
		   "image truncated after open: read fails: %s",
		   fl_last_error());
		free(buf);
	}
	fl_source_put(s);
	return 0;
}

/* Header and index damage, foreign files, future versions. */
static int case_header_damage(void)
{
	struct fl_source *s;
	int ret;

	const char *bad = path_of("hdr.fli");
	struct image *im;
	unsigned char v4[4] = { 4, 0, 0, 0 };

	copy_file(path_of("mixed-64.fli"), bad);
	write_at(bad, v4, 4, 8, false);
	ret = fl_source_open(bad, &s);
	ok(ret == -EPROTONOSUPPORT &&
	   strstr(fl_last_error(), "version 4 not supported (this "
		  "build reads versions 1 to 3)"),
	   "unknown version rejected: %s", fl_last_error());

	copy_file(path_of("mixed-64.fli"), bad);
	patch_byte(bad, 0, 0x20);
	ret = image_open(bad, &im);
	ok(ret == -EINVAL && strstr(fl_last_error(), "magic"),
	   "bad magic rejected by image_open: %s", fl_last_error());
	ret = fl_source_open(bad, &s);
	ok(!ret && !strcmp(s->ops->name, "file"),
	   "without the magic, fl_source_open treats it as a raw file");
	if (!ret)
		fl_source_put(s);

	copy_file(path_of("mixed-64.fli"), bad);
	patch_byte(bad, 24, 0x01);	/* total size */
	ret = fl_source_open(bad, &s);
	ok(ret == -EBADMSG && strstr(fl_last_error(), "header checksum"),
	   "header damage rejected: %s", fl_last_error());

	copy_file(path_of("mixed-64.fli"), bad);
	patch_byte(bad, IMAGE_HEADER_SIZE + 24 * 5 + 8, 0x01);
	ret = fl_source_open(bad, &s);
	ok(ret == -EBADMSG && strstr(fl_last_error(), "index checksum"),
	   "index damage rejected: %s", fl_last_error());

	write_at(bad, "FLTIMAGE", 8, 0, true);
	ret = fl_source_open(bad, &s);
	ok(ret == -EBADMSG && strstr(fl_last_error(), "too short"),
	   "magic alone rejected: %s", fl_last_error());

	/*
	 * A crafted header with valid checksums whose total size wraps
	 * the chunk count around to 0: an empty index that reads
	 * would run past.
	 */
	size_t hl;
	unsigned char *h = slurp(path_of("mixed-64.fli"), &hl);
	uint64_t v;

	v = ~0ull - 100;
	memcpy(h + 24, &v, 8);			/* total size */
	v = 0;
	memcpy(h + 32, &v, 8);			/* chunk count */
	v = IMAGE_HEADER_SIZE;
	memcpy(h + 48, &v, 8);			/* data end */
	v = XXH64(h, 0, 0);
	memcpy(h + 56, &v, 8);			/* index hash */
	v = XXH64(h, 72, 0);
	memcpy(h + 72, &v, 8);			/* header hash */
	write_at(bad, h, IMAGE_HEADER_SIZE, 0, true);
	free(h);
	ret = fl_source_open(bad, &s);
	ok(ret == -EBADMSG && strstr(fl_last_error(), "chunk count"),
	   "crafted header whose size wraps around rejected: %s",
	   fl_last_error());
	if (!ret)
		fl_source_put(s);
	return 0;
}

/* Bad chunk sizes and levels. */
static int case_bad_sizes(void)
{
	struct image_create_opts o = { 0 };

	static const uint32_t bad_cs[] = { 3000, 2048, 32 << 20,
					   (64 << 10) + 4096 };
	int rejected = 0;

	for (size_t k = 0; k < sizeof(bad_cs) / sizeof(*bad_cs); k++) {
		o.chunk_size = bad_cs[k];
		o.level = 0;
		if (image_create(path_of("mixed"), path_of("x.fli"), &o,
				 NULL) == -EINVAL &&
		    strstr(fl_last_error(), "chunk size"))
			rejected++;
	}
	ok(rejected == 4 && file_size(path_of("x.fli")) == 0,
	   "bad chunk sizes rejected: %s", fl_last_error());
	o.chunk_size = 0;
	o.level = 99;
	ok(image_create(path_of("mixed"), path_of("x.fli"), &o,
			NULL) == -EINVAL,
	   "bad level rejected: %s", fl_last_error());
	o.level = 0;
	return 0;
}

/* The command line, when build/faultline is built. */
static int case_cli(void)
{
	if (access(cli_bin(), X_OK) == 0) {
		char args[768];

		snprintf(args, sizeof(args), "create %s %s --chunk 3000",
			 path_of("mixed"), path_of("cli.fli"));
		ok(run_cli(args) == 2 && cli_output_has("--chunk 3000"),
		   "cli: --chunk 3000 rejected");
		snprintf(args, sizeof(args), "create %s %s --chunk 64K --level 5",
			 path_of("mixed"), path_of("cli.fli"));
		ok(run_cli(args) == 0 && cli_output_has("ratio"),
		   "cli: create --chunk 64K --level 5");
		snprintf(args, sizeof(args), "inspect %s", path_of("cli.fli"));
		ok(run_cli(args) == 0 && cli_output_has("chunk size:  65536"),
		   "cli: inspect");
		snprintf(args, sizeof(args), "verify %s", path_of("cli.fli"));
		ok(run_cli(args) == 0, "cli: verify good image exits 0");
		snprintf(args, sizeof(args), "verify %s", path_of("bad.fli"));
		ok(run_cli(args) == 1 && cli_output_has("checksum mismatch"),
		   "cli: verify corrupt image exits 1");
	} else {
		skip_missing(5, "build/faultline", "not built (make all)");
	}
	return 0;
}

/* Measure: a 256 MiB mostly-zero sparse file and read throughput. */
static int case_big_sparse(void)
{
	struct image_info info;
	struct fl_source *s;
	int ret;

	const char *raw_path = path_of("big");
	uint64_t big = 256ull << 20;
	unsigned char *buf = malloc(512 << 10);
	double t0, t1;
	int fd;

	fd = open(raw_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)big) < 0)
		BAIL("create big");
	close(fd);
	gen_mixed(path_of("island"), 8 << 20);
	{
		size_t ilen;
		unsigned char *isl = slurp(path_of("island"), &ilen);

		write_at(raw_path, isl, ilen, 100 << 20, false);
		free(isl);
	}
	t0 = now_s();
	ret = image_create(raw_path, path_of("big.fli"), NULL, &info);
	t1 = now_s();
	ok(!ret && info.file_size < (8u << 20),
	   "256 MiB sparse (8 MiB data): created in %.3f s, image %llu bytes",
	   t1 - t0, (unsigned long long)info.file_size);
	if (!ret && fl_source_open(path_of("big.fli"), &s) == 0) {
		t0 = now_s();
		for (uint64_t off = 0; off < big; off += 512 << 10)
			if (s->ops->read(s, buf, 512 << 10, off) < 0)
				break;
		t1 = now_s();
		diag("read 256 MiB through the image source: %.3f s (%.0f MiB/s)",
		     t1 - t0, 256 / (t1 - t0));
		t0 = now_s();
		for (uint64_t off = 100 << 20; off < (108 << 20);
		     off += 512 << 10)
			s->ops->read(s, buf, 512 << 10, off);
		t1 = now_s();
		diag("read the 8 MiB of data chunks: %.4f s (%.0f MiB/s)",
		     t1 - t0, 8 / (t1 - t0));
		fl_source_put(s);
	}
	free(buf);
	return 0;
}

/* Read throughput, beside the raw file read through the file source. */
static int case_throughput(void)
{
	static const char *const which[][2] = {
		{ "mixed", "default.fli" }, { "random", "random-2048.fli" },
	};
	unsigned char *buf = malloc(512 << 10);

	for (int k = 0; k < 2; k++) {
		struct fl_source *src[2];
		double mibs[2];

		if (fl_source_open(path_of(which[k][0]), &src[0]) < 0 ||
		    fl_source_open(path_of(which[k][1]), &src[1]) < 0)
			BAIL("open %s", which[k][1]);
		for (int v = 0; v < 2; v++) {
			struct fl_source *x = src[v];
			uint64_t sz = fl_source_size(x), done = 0;
			double t0 = now_s();

			for (int rep = 0; rep < 8; rep++)
				for (uint64_t off = 0; off < sz;
				     off += 512 << 10) {
					size_t n = 512 << 10;

					if (sz - off < n)
						n = sz - off;

					x->ops->read(x, buf, n, off);
					done += n;
				}
			mibs[v] = done / (now_s() - t0) / (1 << 20);
			fl_source_put(x);
		}
		diag("%s, 512K reads: image %.0f MiB/s, raw file %.0f MiB/s (ratio %.2f)",
		     which[k][0], mibs[1], mibs[0], mibs[1] / mibs[0]);
	}
	free(buf);
	return 0;
}

static const struct tap_case cases[] = {
	{ "create and read back", case_create_read },
	{ "concurrent readers", case_threads },
	{ "empty file", case_empty },
	{ "inspect and verify", case_inspect_verify },
	{ "default chunk size", case_default_chunk },
	{ "corrupt chunks", case_corrupt },
	{ "truncated images", case_truncated },
	{ "header and index damage", case_header_damage },
	{ "bad chunk sizes and levels", case_bad_sizes },
	{ "command line", case_cli },
	{ "big sparse file", case_big_sparse },
	{ "read throughput", case_throughput },
};

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/fl-image-test.%d", getpid());
	if (mkdir(dir, 0700) < 0)
		BAIL("mkdir %s", dir);
	TAP_RUN(cases);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("cannot remove %s", dir);
	return done_testing();
}
