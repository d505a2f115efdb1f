// SPDX-License-Identifier: Apache-2.0
/*
 * storage_build.c - the data and the images of `faultline bench storage`:
 * a base like a guest's memory (per 64 KiB zeros, text-like or random),
 * ten days each writing runs of pages no earlier day wrote, and from
 * them ten whole images, the base and a chain of diffs, two chunk stores
 * (512 KiB and 64 KiB chunks), with the bytes each takes on disk and the
 * bytes a snapshot stores.
 *
 * Decision: the data is generated from the page number and the day, so
 * what a restore must read back is known page by page (XXH3).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "fc_client.h"
#include "author/create.h"
#include "format/image.h"
#include "http_util.h"
#include "storage_bench.h"

/* ---- the data ------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

enum kind { K_ZERO, K_TEXT, K_RANDOM };

static enum kind page_kind(uint64_t p, int day)
{
	uint64_t h;

	if (!day) {
		h = mix64(p / BLOCK_PAGES) % 100;
		return h < 25 ? K_ZERO : h < 70 ? K_TEXT : K_RANDOM;
	}
	return mix64(p ^ (uint64_t)day << 40) & 1 ? K_TEXT : K_RANDOM;
}

static const char *const words[32] = {
	"the ", "page ", "memory ", "of ", "a ", "snapshot ", "guest ",
	"kernel ", "and ", "to ", "request ", "user ", "cache ", "file ",
	"struct ", "{\"id\": ", "null, ", "error ", "0x0000 ", "in ",
	"session ", "buffer ", "http/1.1 ", "200 ", "GET /api/v1/ ", "is ",
	"value ", "for ", "\n", "    ", "time=", "ok ",
};

/* Page p as day wrote it (day 0: the base). */
static void gen_page(uint8_t *buf, uint64_t p, int day)
{
	uint64_t s = mix64(p * 0x100000001b3ULL + (uint64_t)day) | 1;
	size_t off = 0;

	switch (page_kind(p, day)) {
	case K_ZERO:
		memset(buf, 0, PG);
		return;
	case K_RANDOM:
		for (size_t i = 0; i < PG / 8; i++) {
			uint64_t v = xorshift(&s);

			memcpy(buf + i * 8, &v, 8);
		}
		return;
	case K_TEXT:
		break;
	}
	while (off < PG) {
		uint64_t v = xorshift(&s);
		char tmp[24];
		const char *w = words[v & 31];
		size_t n;

		if (!(v >> 5 & 7)) {	/* a number now and then */
			snprintf(tmp, sizeof(tmp), "%08x ",
				 (unsigned int)(v >> 32));
			w = tmp;
		}
		n = strlen(w);
		if (n > PG - off)
			n = PG - off;
		memcpy(buf + off, w, n);
		off += n;
	}
}

/* Pages [p, p + n) as of day into fd (and into fd2 if >= 0). */
static int write_pages(int fd, int fd2, uint64_t p, uint64_t n, int day,
		       uint8_t *buf)
{
	for (uint64_t i = 0; i < n; i++)
		gen_page(buf + i * PG, p + i, day);
	if (pwrite(fd, buf, n * PG, (off_t)(p * PG)) != (ssize_t)(n * PG) ||
	    (fd2 >= 0 &&
	     pwrite(fd2, buf, n * PG, (off_t)(p * PG)) != (ssize_t)(n * PG)))
		return errno ? -errno : -EIO;
	return 0;
}

/*
 * Day k's runs: 2 % of the pages in runs of RUN_MIN to RUN_MAX pages at
 * random offsets, none over a page written before (day[] says which).
 */
static int pick_runs(struct st_ctx *c, int k)
{
	uint64_t budget = c->npages * DIRTY_PCT / 100;
	uint64_t s = mix64(0xda7 + (uint64_t)k) | 1;
	long tries = 0;

	while (budget) {
		uint64_t start = xorshift(&s) % c->npages;
		uint64_t n = RUN_MIN + xorshift(&s) % (RUN_MAX - RUN_MIN + 1);
		bool free_run = true;

		if (n > budget)
			n = budget;
		if (++tries > 10000000)
			return -EDEADLK;
		if (start + n > c->npages)
			continue;
		for (uint64_t p = start; p < start + n && free_run; p++)
			free_run = !c->day[p];
		if (!free_run)
			continue;
		memset(c->day + start, k, n);
		budget -= n;
	}
	return 0;
}

/* XXH3 of every page of the file at fd into want. */
static int hash_pages(struct st_ctx *c, int fd, uint64_t *want)
{
	size_t bs = 2 * MIB;
	uint8_t *buf = malloc(bs);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; off < c->len && !ret; off += bs) {
		size_t n = c->len - off < bs ? c->len - off : bs;

		if (pread(fd, buf, n, (off_t)off) != (ssize_t)n)
			ret = -EIO;
		for (size_t i = 0; i < n / PG && !ret; i++)
			want[off / PG + i] = XXH3_64bits(buf + i * PG, PG);
	}
	free(buf);
	return ret;
}

/* ---- bytes --------------------------------------------------------------- */

static uint64_t disk_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (uint64_t)st.st_blocks * 512;
}

static uint64_t tree_sum;

static int tree_add(const char *path, const struct stat *st, int flag,
		    struct FTW *f)
{
	(void)path;
	(void)flag;
	(void)f;
	tree_sum += (uint64_t)st->st_blocks * 512;
	return 0;
}

/* Bytes on disk of a directory tree: its files and directories. */
static uint64_t tree_bytes(const char *dir)
{
	tree_sum = 0;
	nftw(dir, tree_add, 16, FTW_PHYS);
	return tree_sum;
}

static int tree_rm(const char *path, const struct stat *st, int flag,
		   struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

void storage_rm_tree(const char *dir)
{
	nftw(dir, tree_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Bytes nginx sent for the requests logged after its first from lines. */
uint64_t storage_origin_bytes(const struct nginx *n, long from)
{
	FILE *f = fopen(n->log, "r");
	unsigned long long b;
	uint64_t sum = 0;
	char line[1024];
	long i = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (i++ >= from &&
		    sscanf(line, "%*s %*s %*s %llu", &b) == 1)
			sum += b;
	fclose(f);
	return sum;
}

/* What a store image's restore must fetch: its index and its objects. */
static uint64_t stored_bytes(const struct image_info *in)
{
	return in->file_size + in->stored[IMAGE_RAW] + in->stored[IMAGE_ZSTD];
}

static int cmp_sha(const void *a, const void *b)
{
	return memcmp(a, b, IMAGE_HASH_LEN);
}

/*
 * The least a restore of day 10 must fetch with day 1's objects cached:
 * its index and the objects day 1 does not name.
 */
static int floor_bytes(struct st_ctx *c, const char *img1, const char *img10)
{
	struct image *a = NULL, *b = NULL;
	uint8_t *shas = NULL;
	uint64_t n = 0;
	int ret;

	if ((ret = image_open(img1, &a)) < 0 ||
	    (ret = image_open(img10, &b)) < 0)
		goto out;
	shas = malloc(a->hdr.chunk_count * IMAGE_HASH_LEN + 1);
	if (!shas) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < a->hdr.chunk_count; i++)
		if (a->index[i].kind != IMAGE_ZERO)
			memcpy(shas + n++ * IMAGE_HASH_LEN, a->index[i].sha,
			       IMAGE_HASH_LEN);
	qsort(shas, n, IMAGE_HASH_LEN, cmp_sha);
	c->floor10 = b->file_size;
	for (uint64_t i = 0; i < b->hdr.chunk_count; i++)
		if (b->index[i].kind != IMAGE_ZERO &&
		    !bsearch(b->index[i].sha, shas, n, IMAGE_HASH_LEN, cmp_sha))
			c->floor10 += b->index[i].stored_len;
out:
	free(shas);
	if (a)
		image_close(a);
	if (b)
		image_close(b);
	return ret;
}

/* ---- building the images ------------------------------------------------- */

static int create(const char *raw, const char *img, const char *parent,
		  const char *store, uint32_t chunk, double *t,
		  struct image_info *in)
{
	struct image_create_opts o = { .parent = parent, .store = store,
				       .chunk_size = chunk };
	double t0 = bench_now();
	int ret = image_create(raw, img, &o, in);

	*t += bench_now() - t0;
	if (ret < 0)
		fprintf(stderr, "faultline bench storage: image create %s: "
			"%s\n", img, fl_last_error());
	return ret;
}

/* Day k: its runs into the raw file and a sparse diff, then the images. */
static int build_day(struct st_ctx *c, int fd, int k, uint8_t *buf)
{
	char diff[256], img[256], parent[256];
	struct image_info in;
	int dfd, ret;

	ret = pick_runs(c, k);
	if (ret < 0)
		return ret;
	snprintf(diff, sizeof(diff), "%s/day%d.raw", c->ng.dir, k);
	dfd = open(diff, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (dfd < 0)
		return -errno;
	if (ftruncate(dfd, (off_t)c->len) < 0)
		ret = -errno;
	for (uint64_t p = 0, n; p < c->npages && !ret; p += n ? n : 1) {
		n = 0;
		while (p + n < c->npages && c->day[p + n] == k &&
		       n < 2 * MIB / PG)
			n++;
		if (n)
			ret = write_pages(fd, dfd, p, n, k, buf);
	}
	close(dfd);
	if (ret < 0)
		goto out;
	if (c->want[k]) {
		ret = hash_pages(c, fd, c->want[k]);
		if (ret < 0)
			goto out;
	}

	/* A whole image of the day (kept for day 2: the merged restore). */
	snprintf(img, sizeof(img), "%s/whole%d.fli", c->local, k);
	ret = create(c->raw, img, NULL, NULL, 0, &c->t_build[0], &in);
	if (ret < 0)
		goto out;
	c->disk[0] += disk_bytes(img);
	if (k != 2)
		unlink(img);

	/* A diff image over yesterday's (day 1: over the base's). */
	if (k == 1)
		snprintf(parent, sizeof(parent), "%s/base.fli", c->local);
	else
		snprintf(parent, sizeof(parent), "%s/d%d.fli", c->local, k - 1);
	snprintf(img, sizeof(img), "%s/d%d.fli", c->local, k);
	ret = create(diff, img, parent, NULL, 0, &c->t_build[1], &in);
	if (ret < 0)
		goto out;
	c->disk[1] += disk_bytes(img);

	/* The day into the chunk store. */
	snprintf(img, sizeof(img), "%s/snap%d.fli", c->images, k);
	ret = create(c->raw, img, NULL, c->store, 0, &c->t_build[2], &in);
	if (ret < 0)
		goto out;
	if (k == 1)
		c->stored1 = stored_bytes(&in);
	if (k == DAYS)
		c->stored10 = stored_bytes(&in);

	/* And into a store of 64 KiB chunks (its images beside it). */
	snprintf(img, sizeof(img), "%s/snap%d.fli", c->store64, k);
	ret = create(c->raw, img, NULL, c->store64, 64 * KIB, &c->t_build[3],
		     &in);
out:
	unlink(diff);
	return ret;
}

/* The first sess_len bytes of day 10 as an image in the store. */
static int build_sess(struct st_ctx *c, int fd, uint8_t *buf)
{
	char raw[256], img[256];
	struct image_info in;
	double t = 0;
	int sfd, ret = 0;

	snprintf(raw, sizeof(raw), "%s/sess.raw", c->ng.dir);
	snprintf(img, sizeof(img), "%s/sess.fli", c->images);
	sfd = open(raw, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (sfd < 0)
		return -errno;
	for (uint64_t off = 0; off < c->sess_len && !ret; off += 2 * MIB) {
		size_t n = c->sess_len - off < 2 * MIB ? c->sess_len - off :
			   2 * MIB;

		if (pread(fd, buf, n, (off_t)off) != (ssize_t)n ||
		    pwrite(sfd, buf, n, (off_t)off) != (ssize_t)n)
			ret = -EIO;
	}
	close(sfd);
	if (!ret)
		ret = create(raw, img, NULL, c->store, 0, &t, &in);
	if (!ret)
		c->stored_sess = stored_bytes(&in);
	unlink(raw);
	return ret;
}

int storage_build(struct st_ctx *c)
{
	uint8_t *buf = malloc(2 * MIB);
	char img[256];
	struct image_info in;
	uint64_t nchunks = c->len / IMAGE_DEFAULT_CHUNK, touched = 0;
	int fd, ret = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(c->raw, sizeof(c->raw), "%s/memory.raw", c->ng.dir);
	fd = open(c->raw, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	/* The base: written where not zero (zeros stay holes). */
	if (ftruncate(fd, (off_t)c->len) < 0)
		ret = -errno;
	for (uint64_t p = 0; p < c->npages && !ret; p += BLOCK_PAGES) {
		if (page_kind(p, 0) == K_ZERO)
			continue;
		c->raw_nonzero += BLOCK_PAGES * PG;
		ret = write_pages(fd, -1, p, BLOCK_PAGES, 0, buf);
	}
	snprintf(img, sizeof(img), "%s/base.fli", c->local);
	if (!ret)
		ret = create(c->raw, img, NULL, NULL, 0, &c->t_build[1],
			     &in);
	c->disk[1] += disk_bytes(img);
	for (int k = 1; k <= DAYS && !ret; k++)
		ret = build_day(c, fd, k, buf);
	if (!ret)
		ret = build_sess(c, fd, buf);
	close(fd);
	unlink(c->raw);
	free(buf);
	if (ret < 0)
		return ret;
	c->one_image = c->disk[0] / DAYS;
	c->disk[2] = tree_bytes(c->store);
	c->disk[3] = tree_bytes(c->store64);	/* its images are in it */
	for (int k = 1; k <= DAYS; k++) {
		snprintf(img, sizeof(img), "%s/snap%d.fli", c->images, k);
		c->disk[2] += disk_bytes(img);
	}
	/* The 512 KiB chunks each day wrote into, on average. */
	for (int k = 1; k <= DAYS; k++)
		for (uint64_t i = 0; i < nchunks; i++)
			for (uint64_t p = 0; p < IMAGE_DEFAULT_CHUNK / PG; p++)
				if (c->day[i * IMAGE_DEFAULT_CHUNK / PG + p] ==
				    k) {
					touched++;
					break;
				}
	c->touched = (double)touched / DAYS / (double)nchunks;
	snprintf(img, sizeof(img), "%s/snap%d.fli", c->images, DAYS);
	{
		char img1[256];

		snprintf(img1, sizeof(img1), "%s/snap1.fli", c->images);
		ret = floor_bytes(c, img1, img);
	}
	return ret;
}

