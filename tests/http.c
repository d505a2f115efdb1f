// SPDX-License-Identifier: Apache-2.0
/*
 * http.c - the HTTP source against a real nginx: every byte of a raw memory
 * file and of its image read by URL (random ranges across blocks), an
 * engine serving a region from the URL, presigned-style query strings, the
 * local block cache (a second restore fetches no block, a corrupt block is
 * refetched), nginx killed mid-restore (-EIO naming the URL after the
 * retries, poisoned pages, success if it comes back in time), a 404, the
 * object replaced at the URL by one of the same size (with ETag, and with
 * Last-Modified only: -EIO "changed", never the new bytes mixed in, nor
 * the old bytes from the cache after a new open), and a read of many
 * blocks from a slow server not burning CPU while it waits.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>

#include "faultline.h"
#include "author/create.h"
#include "format/image.h"
#include "source/source.h"
#include "tap.h"
#include "util.h"
#include "http_util.h"

#define SEED	0x4e77
#define BLK	(512u << 10)
#define FSIZE	((8ull << 20) + 3 * PAGE + 123)

static struct nginx ng;
static uint8_t *want;		/* the raw file's bytes */
static char raw_url[256], img_url[256];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Random ranges (some across blocks, some whole blocks) read right? */
static int random_reads(struct fl_source *s, int n, unsigned int seed)
{
	uint8_t *buf = malloc(3 * BLK);
	int bad = 0;

	for (int i = 0; i < n; i++) {
		uint64_t len = 1 + (uint64_t)rand_r(&seed) % (3 * BLK / 2);
		uint64_t off;

		if (i % 5 == 0) {	/* straddle a block boundary */
			uint64_t b = 1 + (uint64_t)rand_r(&seed) %
					 (FSIZE / BLK - 1);

			off = b * BLK - 1 - (uint64_t)rand_r(&seed) % 4096;
		} else {
			off = (uint64_t)rand_r(&seed) % FSIZE;
		}
		if (i % 7 == 0)
			off = off / BLK * BLK, len = BLK;	/* whole block */
		if (off + len > FSIZE)
			len = FSIZE - off;
		memset(buf, 0xa5, len);
		int ret = s->ops->read(s, buf, len, off);

		if (ret || memcmp(buf, want + off, len)) {
			if (bad++ < 3)
				diag("read %llu@%llu: %d %s",
				     (unsigned long long)len,
				     (unsigned long long)off, ret,
				     fl_last_error());
		}
	}
	free(buf);
	return bad;
}

static int read_all(struct fl_source *s)
{
	uint8_t *buf = malloc(FSIZE);
	int ret = s->ops->read(s, buf, FSIZE, 0);

	if (!ret && memcmp(buf, want, FSIZE))
		ret = -EBADMSG;
	free(buf);
	return ret;
}

/* ---- an engine serving the URL ------------------------------------------ */

struct toucher {
	uint8_t *mem;
	uint64_t len;
	unsigned int seed;
	int bad;
};

static void *touch_random(void *arg)
{
	struct toucher *t = arg;
	uint64_t npages = t->len / PAGE;

	for (uint64_t i = 0; i < npages / 2; i++) {
		uint64_t pg = (uint64_t)rand_r(&t->seed) % npages;

		if (memcmp(t->mem + pg * PAGE, want + pg * PAGE, PAGE))
			t->bad++;
	}
	return NULL;
}

static void engine_serves(const char *url, const char *what)
{
	uint64_t len = FSIZE / PAGE * PAGE;
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 64 << 10 };
	struct fl_source *src = NULL;
	struct fl_engine *e = NULL;
	uint8_t *mem = map_anon(len, 0);
	struct toucher t[2];
	pthread_t th[2];
	int ret, bad = 0, all;

	ret = fl_source_open(url, &src);
	if (!ret)
		ret = fl_engine_create(&o, &e);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };
	if (!ret)
		ret = fl_engine_add_region(e, &d, src);
	if (!ret)
		ret = fl_engine_start(e, 2);
	if (ret) {
		ok(0, "%s: engine set up: %s", what, fl_last_error());
		return;
	}
	for (int i = 0; i < 2; i++) {
		t[i] = (struct toucher){ mem, len, 31u * i + 7, 0 };
		pthread_create(&th[i], NULL, touch_random, &t[i]);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		bad += t[i].bad;
	}
	all = !memcmp(mem, want, len);
	ok(!bad && all, "%s: engine serving the URL: %d wrong pages, full compare %s",
	   what, bad, all ? "equal" : "DIFFERS");
	fl_engine_destroy(e);
	fl_source_put(src);
	munmap(mem, len);
}

/* ---- SIGBUS from a poisoned page ---------------------------------------- */

static __thread sigjmp_buf *volatile bus_jmp;

static void on_bus(int sig)
{
	(void)sig;
	if (bus_jmp)
		siglongjmp(*bus_jmp, 1);
	abort();
}

static int touch_gets_sigbus(volatile uint8_t *p)
{
	sigjmp_buf jb;
	int got = 0;

	if (sigsetjmp(jb, 1) == 0) {
		bus_jmp = &jb;
		(void)*p;
	} else {
		got = 1;
	}
	bus_jmp = NULL;
	return got;
}

/* ---- cache helpers -------------------------------------------------------- */

/* Requests for block ranges (not the 4 KiB probe at open) since from. */
static long block_requests(long from)
{
	return nginx_requests(&ng) - from -
	       nginx_requests_matching(&ng, from, "bytes=0-4095");
}

static int corrupt_block_file(const char *dir, uint64_t block)
{
	char suffix[32], path[512];
	struct dirent *de;
	DIR *d = opendir(dir);
	int done = -1;

	snprintf(suffix, sizeof(suffix), "-%08llx.blk",
		 (unsigned long long)block);
	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (n < strlen(suffix) ||
		    strcmp(de->d_name + n - strlen(suffix), suffix))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		int fd = open(path, O_RDWR);
		uint8_t b;

		if (fd >= 0 && pread(fd, &b, 1, 40 + 1000) == 1) {
			b ^= 0x40;
			if (pwrite(fd, &b, 1, 40 + 1000) == 1)
				done = 0;
		}
		if (fd >= 0)
			close(fd);
	}
	if (d)
		closedir(d);
	return done;
}

static void cache_tests(void)
{
	char dir[256];
	struct fl_source_opts o = { .cache_max_bytes = 64 << 20 };
	struct fl_source *s = NULL;
	char signed_url[512];
	long mark;
	int ret;

	snprintf(dir, sizeof(dir), "%s/cache", ng.dir);
	o.cache_dir = dir;

	mark = nginx_requests(&ng);
	ret = fl_source_open_ex(raw_url, &o, &s);
	ret = ret ? ret : read_all(s);
	fl_source_put(s);
	long cold = block_requests(mark);

	ok(ret == 0 && cold >= (long)(FSIZE / BLK),
	   "cold cache: whole file right, %ld block requests", cold);

	mark = nginx_requests(&ng);
	ret = fl_source_open_ex(raw_url, &o, &s);
	ret = ret ? ret : read_all(s);
	ret = ret ? ret : random_reads(s, 40, 5);
	fl_source_put(s);
	ok(ret == 0 && block_requests(mark) == 0,
	   "warm cache: second open reads no block remotely (%ld requests, %ld of them the open's 4 KiB probe)",
	   nginx_requests(&ng) - mark,
	   nginx_requests_matching(&ng, mark, "bytes=0-4095"));

	/* A presigned URL re-signed for this restore still hits. */
	snprintf(signed_url, sizeof(signed_url),
		 "%s?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=300&X-Amz-Signature=0123abcd%%2Fef",
		 raw_url);
	mark = nginx_requests(&ng);
	ret = fl_source_open_ex(signed_url, &o, &s);
	ret = ret ? ret : read_all(s);
	fl_source_put(s);
	ok(ret == 0 && block_requests(mark) == 0 &&
	   nginx_requests_matching(&ng, mark, "X-Amz-Signature=0123abcd%2Fef") >= 1,
	   "presigned-style URL passed through untouched, served from the cache");

	ok(corrupt_block_file(dir, 3) == 0, "corrupted cached block 3");
	mark = nginx_requests(&ng);
	ret = fl_source_open_ex(raw_url, &o, &s);
	ret = ret ? ret : read_all(s);
	fl_source_put(s);
	ok(ret == 0 && block_requests(mark) == 1 &&
	   nginx_requests_matching(&ng, mark, "bytes=1572864-2097151") == 1,
	   "corrupt block detected and refetched (%ld block requests)",
	   block_requests(mark));
	mark = nginx_requests(&ng);
	ret = fl_source_open_ex(raw_url, &o, &s);
	ret = ret ? ret : read_all(s);
	fl_source_put(s);
	ok(ret == 0 && block_requests(mark) == 0,
	   "refetched block was cached again");

	/* The image through the cache too. */
	fl_source_open_ex(img_url, &o, &s);
	ret = s ? read_all(s) : -1;
	fl_source_put(s);
	mark = nginx_requests(&ng);
	s = NULL;
	ret = ret ? ret : fl_source_open_ex(img_url, &o, &s);
	ret = ret ? ret : read_all(s);
	fl_source_put(s);
	ok(ret == 0 && block_requests(mark) == 0,
	   "image: second open reads no block remotely");

	/* A small bound evicts. */
	struct fl_source_opts small = { .cache_dir = dir,
					.cache_max_bytes = 2 << 20 };
	uint64_t used = 0;
	DIR *d;
	struct dirent *de;

	fl_source_open_ex(raw_url, &small, &s);
	fl_source_put(s);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		struct stat st;
		char p[512];

		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (strstr(de->d_name, ".blk") && !stat(p, &st))
			used += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	ok(used > 0 && used <= (2 << 20),
	   "cache bound 2 MiB: %llu bytes left after eviction",
	   (unsigned long long)used);
}

/* ---- the object changing under a restore ------------------------------- */

#define SWSIZE	((4u << 20) + 5000)	/* 9 blocks, the last short */

static uint8_t *pattern(size_t len, unsigned int seed)
{
	uint8_t *p = malloc(len);

	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
	return p;
}

/* Replace path by data as a publisher would (rename), with this mtime. */
static int publish(const char *path, const uint8_t *data, size_t len,
		   time_t mtime)
{
	struct timeval tv[2] = { { mtime, 0 }, { mtime, 0 } };
	char tmp[512];
	int fd, good;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	good = fd >= 0 && write(fd, data, len) == (ssize_t)len;
	if (fd >= 0 && close(fd) < 0)
		good = 0;
	good = good && utimes(tmp, tv) == 0 && rename(tmp, path) == 0;
	return good ? 0 : -1;
}

/* Open url (with o), read all len bytes: 0 if they equal data. */
static int open_read_equals(const char *url, const struct fl_source_opts *o,
			    const uint8_t *data, size_t len)
{
	uint8_t *buf = malloc(len);
	struct fl_source *s = NULL;
	int ret = fl_source_open_ex(url, o, &s);

	ret = ret ? ret : s->ops->read(s, buf, len, 0);
	if (!ret && memcmp(buf, data, len))
		ret = -EBADMSG;
	if (s)
		fl_source_put(s);
	free(buf);
	return ret;
}

/* sub: "" (nginx's ETag) or "noetag/" (Last-Modified only). */
static void changed_tests(const char *sub, const char *what)
{
	uint8_t *a = pattern(SWSIZE, 11), *b = pattern(SWSIZE, 22);
	uint8_t *buf = calloc(1, BLK);
	char path[300], url[300], warm[300], cold[300];
	struct fl_source_opts ow = { .cache_dir = warm,
				     .cache_max_bytes = 64 << 20 };
	struct fl_source_opts oc = { .cache_dir = cold,
				     .cache_max_bytes = 64 << 20 };
	struct fl_source *s = NULL;
	time_t t0 = time(NULL) - 1000;
	int ret, r2;

	snprintf(path, sizeof(path), "%s/%sswap.mem", ng.www, sub);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/%sswap.mem", ng.port,
		 sub);
	snprintf(warm, sizeof(warm), "%s/cache-warm-%s", ng.dir, what);
	snprintf(cold, sizeof(cold), "%s/cache-cold-%s", ng.dir, what);

	/* A published; a cache warmed with all of A; a restore started */
	ret = publish(path, a, SWSIZE, t0);
	ret = ret ? ret : open_read_equals(url, &ow, a, SWSIZE);
	ret = ret ? ret : fl_source_open_ex(url, &oc, &s);
	ret = ret ? ret : s->ops->read(s, buf, BLK, 0);
	ok(ret == 0 && !memcmp(buf, a, BLK),
	   "%s: object A published, a cache warmed with it, a restore started",
	   what);

	/* replaced by B, same size, newer mtime: the restore must stop */
	ret = publish(path, b, SWSIZE, t0 + 100);
	memset(buf, 0, BLK);
	r2 = ret || !s ? -1 : s->ops->read(s, buf, BLK, 2 * BLK);
	ok(!ret && r2 == -EIO && strstr(fl_last_error(), url) &&
	   strstr(fl_last_error(), "changed") &&
	   memcmp(buf, b + 2 * BLK, 4096),
	   "%s: replaced by a same-size object: next uncached read -EIO, \"%s\"",
	   what, fl_last_error());
	r2 = s ? s->ops->read(s, buf, 100, 5 * BLK + 7) : -1;
	ok(r2 == -EIO && strstr(fl_last_error(), "changed"),
	   "%s: ... and so is the next (partial-block) read", what);
	if (s)
		fl_source_put(s);

	/* a new restore with the cache warm from A: B or nothing, never A */
	ret = open_read_equals(url, &ow, b, SWSIZE);
	ok(ret == 0,
	   "%s: new open, cache warm from the old object: serves the new object (%d %s)",
	   what, ret, ret ? fl_last_error() : "");

	/* A back as it was (same validator): nothing of B cached under it */
	ret = publish(path, a, SWSIZE, t0);
	ret = ret ? ret : open_read_equals(url, &oc, a, SWSIZE);
	ok(ret == 0,
	   "%s: old object re-published: the interrupted restore's cache holds none of the new one's bytes (%d %s)",
	   what, ret, ret ? fl_last_error() : "");
	free(a);
	free(b);
	free(buf);
}

/* A read of many blocks from a slow server sleeps while it waits. */
static void many_blocks_cpu(void)
{
	size_t len = 12u << 20;
	uint8_t *data = pattern(len, 33), *buf = malloc(len);
	char path[300], url[300];
	struct fl_source *s = NULL;
	struct rusage r0, r1;
	double t0, wall, cpu;
	int ret;

	snprintf(path, sizeof(path), "%s/slow/big.mem", ng.www);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/slow/big.mem",
		 ng.port);
	ret = publish(path, data, len, time(NULL) - 10);
	ret = ret ? ret : fl_source_open(url, &s);
	getrusage(RUSAGE_SELF, &r0);
	t0 = now_s();
	ret = ret ? ret : s->ops->read(s, buf, len, 0);
	wall = now_s() - t0;
	getrusage(RUSAGE_SELF, &r1);
	cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
	      (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6 +
	      (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
	      (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	ok(ret == 0 && !memcmp(buf, data, len) && cpu < wall / 2,
	   "12 MiB read from a slow server, 24 blocks 8 at a time: %.2f s wall, %.2f s CPU (no busy wait)",
	   wall, cpu);
	if (s)
		fl_source_put(s);
	free(data);
	free(buf);
}

/* ---- failures ------------------------------------------------------------- */

struct bg_read {
	struct fl_source *s;
	uint64_t off;
	size_t len;
	int ret;
	uint8_t *buf;
};

static void *bg_read_main(void *arg)
{
	struct bg_read *r = arg;

	r->ret = r->s->ops->read(r->s, r->buf, r->len, r->off);
	return NULL;
}

static void failure_tests(void)
{
	struct fl_source *s = NULL;
	uint8_t *buf = malloc(BLK);
	char missing[300];
	double t0, dt;
	int ret;

	snprintf(missing, sizeof(missing), "http://127.0.0.1:%d/missing.mem",
		 ng.port);
	ret = fl_source_open(missing, &s);
	ok(ret == -EIO && strstr(fl_last_error(), missing) &&
	   strstr(fl_last_error(), "404"),
	   "404 fails at open: %d, \"%s\"", ret, fl_last_error());

	/* nginx killed mid-restore */
	ret = fl_source_open(raw_url, &s);
	ret = ret ? ret : s->ops->read(s, buf, BLK, 0);
	nginx_kill(&ng);
	t0 = now_s();
	int r2 = ret ? ret : s->ops->read(s, buf, BLK, 5 * BLK);
	dt = now_s() - t0;
	ok(ret == 0 && r2 == -EIO && strstr(fl_last_error(), raw_url) &&
	   dt > 0.5,
	   "nginx killed: read fails with -EIO after %.2f s of retries: \"%s\"",
	   dt, fl_last_error());

	/*
	 * ... and back: a read under way succeeds if nginx listens again
	 * within its retries (50+100+200+400 ms of backoff), which is how
	 * soon nginx is scheduled to start; whether or not, it never returns
	 * wrong bytes, and a read once nginx is back returns every byte.
	 */
	struct bg_read r = { s, 6 * BLK + 100, BLK, -1, buf };
	pthread_t th;

	t0 = now_s();
	pthread_create(&th, NULL, bg_read_main, &r);
	usleep(150 * 1000);
	int started = nginx_start(&ng);

	dt = now_s() - t0;
	pthread_join(th, NULL);
	if (r.ret)
		diag("nginx listened again %.2f s after the read began: the "
		     "read ran out of tries (%d)", dt, r.ret);
	ok(started == 0 && (r.ret == 0 ? !memcmp(buf, want + r.off, BLK) :
			    r.ret == -EIO),
	   "nginx restarted during a read: its bytes right, or -EIO (never "
	   "wrong bytes: %d, nginx back after %.2f s)", r.ret, dt);
	r.ret = started ? -1 : s->ops->read(s, buf, BLK, r.off);
	ok(r.ret == 0 && !memcmp(buf, want + r.off, BLK),
	   "nginx restarted: a read returns every byte (%d)", r.ret);
	fl_source_put(s);

	/* An engine whose source fails poisons the page (never wrong data). */
	uint64_t len = 4 << 20;
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 64 << 10,
				    .flags = FL_ENGINE_NO_PREFETCH |
					     FL_ENGINE_NO_BACKGROUND };
	struct fl_engine *e = NULL;
	uint8_t *mem = map_anon(len, 0);
	struct fl_stats st = { 0 };
	struct sigaction sa = { .sa_handler = on_bus }, old;
	int bus1, bus0;

	s = NULL;
	ret = fl_source_open(raw_url, &s);
	ret = ret ? ret : fl_engine_create(&o, &e);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };
	ret = ret ? ret : fl_engine_add_region(e, &d, s);
	ret = ret ? ret : fl_engine_start(e, 1);
	sigaction(SIGBUS, &sa, &old);
	bus0 = ret ? 1 : touch_gets_sigbus(mem);
	bus0 = bus0 || memcmp(mem, want, PAGE);
	nginx_kill(&ng);
	bus1 = ret ? 0 : touch_gets_sigbus(mem + (3 << 20));
	sigaction(SIGBUS, &old, NULL);
	if (e) {
		fl_engine_stop(e);
		fl_engine_stats(e, &st);
	}
	/*
	 * The failed 64 KiB chunk is retried page by page only until one
	 * page fails too (each try spends the whole retry window): at most
	 * two failures, not one per page.
	 */
	ok(!ret && !bus0 && bus1 && st.source_errors >= 1 &&
	   st.source_errors <= 2 && st.pages_poisoned >= 1,
	   "engine: page right while nginx ran; SIGBUS (poisoned) after it "
	   "died (%llu source errors, at most 2)",
	   (unsigned long long)st.source_errors);
	fl_engine_destroy(e);
	fl_source_put(s);
	munmap(mem, len);
	free(buf);
}

int main(void)
{
	uint64_t zeros[] = { 2 << 20, 1 << 20 };
	struct image_create_opts io = { .chunk_size = 64 << 10 };
	char raw_path[256], img_path[256];
	struct fl_source *s;
	double t0 = now_s();
	char *tmp;
	int ret;

	if (!nginx_binary())
		skip_all_missing("nginx", "not installed (apt-get install "
				 "nginx-light)");
	if (nginx_setup(&ng) < 0)
		BAIL("cannot set up nginx in /tmp");
	snprintf(raw_path, sizeof(raw_path), "%s/slow", ng.www);
	mkdir(raw_path, 0755);
	snprintf(raw_path, sizeof(raw_path), "%s/noetag", ng.www);
	mkdir(raw_path, 0755);
	signal(SIGPIPE, SIG_IGN);
	tmp = make_snapshot(FSIZE, SEED, zeros, 1);
	snprintf(raw_path, sizeof(raw_path), "%s/raw.mem", ng.www);
	snprintf(img_path, sizeof(img_path), "%s/snap.fli", ng.www);
	if (rename(tmp, raw_path) < 0)
		BAIL("cannot move %s", tmp);
	free(tmp);
	chmod(raw_path, 0644);
	if (image_create(raw_path, img_path, &io, NULL) < 0)
		BAIL("image_create: %s", fl_last_error());
	want = malloc(FSIZE);
	int fd = open(raw_path, O_RDONLY);

	if (fd < 0 || pread(fd, want, FSIZE, 0) != (ssize_t)FSIZE)
		BAIL("cannot read back %s", raw_path);
	close(fd);
	snprintf(raw_url, sizeof(raw_url), "http://127.0.0.1:%d/raw.mem",
		 ng.port);
	snprintf(img_url, sizeof(img_url), "http://127.0.0.1:%d/snap.fli",
		 ng.port);
	ok(nginx_start(&ng) == 0, "nginx listening on 127.0.0.1:%d", ng.port);

	ret = fl_source_open(raw_url, &s);
	ok(ret == 0 && fl_source_size(s) == FSIZE,
	   "raw file by URL: size %llu", ret ? 0ull :
	   (unsigned long long)fl_source_size(s));
	if (ret)
		BAIL("%s", fl_last_error());
	ok(random_reads(s, 150, 1) == 0 && read_all(s) == 0,
	   "raw: random ranges and the whole file equal the file");
	fl_source_put(s);

	ret = fl_source_open(img_url, &s);
	ok(ret == 0 && fl_source_size(s) == FSIZE &&
	   !strcmp(s->ops->name, "image"),
	   "image by URL recognised by its magic: size %llu",
	   ret ? 0ull : (unsigned long long)fl_source_size(s));
	if (ret)
		BAIL("%s", fl_last_error());
	ok(random_reads(s, 150, 2) == 0 && read_all(s) == 0,
	   "image: random ranges and the whole file equal the file");
	fl_source_put(s);

	engine_serves(raw_url, "raw");
	engine_serves(img_url, "image");
	cache_tests();
	changed_tests("", "ETag");
	changed_tests("noetag/", "Last-Modified");
	many_blocks_cpu();
	/* Warm a cache, then stop the origin: the cache alone restores. */
	char odir[256];
	struct fl_source_opts oo = { .cache_max_bytes = 64 << 20 };

	snprintf(odir, sizeof(odir), "%s/offline-cache", ng.dir);
	oo.cache_dir = odir;
	ret = fl_source_open_ex(raw_url, &oo, &s);
	ret = ret ? ret : read_all(s);
	if (ret == 0)
		fl_source_put(s);
	ok(ret == 0, "a cache warmed with the whole object (%d %s)", ret,
	   ret ? fl_last_error() : "");

	failure_tests();	/* nginx is killed there */
	ret = fl_source_open_ex(raw_url, &oo, &s);
	ok(ret == 0 && strstr(s->desc, "origin unreachable") &&
	   read_all(s) == 0,
	   "origin down: a warm cache restores the whole object, and the "
	   "source says so (%s)", ret ? fl_last_error() : s->desc);
	if (ret == 0)
		fl_source_put(s);
	snprintf(odir, sizeof(odir), "%s/cold-cache", ng.dir);
	ret = fl_source_open_ex(raw_url, &oo, &s);
	ok(ret < 0, "origin down, cold cache: the open fails (%s)",
	   fl_last_error());
	if (ret == 0)
		fl_source_put(s);

	nginx_cleanup(&ng);
	ok(!port_open(ng.port), "nginx stopped");
	diag("%.1f s", now_s() - t0);
	free(want);
	/* A password holding '@': messages never show any part of it. */
	{
		struct fl_source *bad;
		int r = fl_source_open("http://user:p@ss@127.0.0.1:1/x.mem", &bad);

		ok(r < 0 && !strstr(fl_last_error(), "ss@") &&
		   !strstr(fl_last_error(), "user") &&
		   strstr(fl_last_error(), "127.0.0.1:1/x.mem"),
		   "user info with an '@' in the password is left out of "
		   "messages (%s)", fl_last_error());
		if (r == 0)
			fl_source_put(bad);
	}
	return done_testing();
}
