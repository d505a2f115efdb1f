// SPDX-License-Identifier: Apache-2.0
/*
 * serve_store.c - `faultline serve` of a chunk-store image (version 3)
 * by URL, a real nginx on loopback serving the store's directory:
 * Firecracker-style clients get every byte right over HTTP; 16 of them at
 * once from a cold cache make nginx serve each chunk once (single
 * flight), and 16 more under a cache limit smaller than the image keep
 * the cache within it; a second image holding the same chunks restores
 * from the warm cache with no chunk fetched; and with nginx stopped the
 * warm cache restores every byte.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "faultline.h"
#include "store/chunk_store.h"
#include "author/create.h"
#include "format/image.h"
#include "tap.h"
#include "serve_util.h"
#include "http_util.h"

#define SIZE	(32ull << 20)
#define CLIENTS	16

static struct nginx ngx;
static struct mem_file mem;

/* Serve spec with extra flags; n Firecracker-style clients at once. */
/*
 * A client with a longer bound than su_spawn's: 16 sessions of 32 MiB
 * through one source take ~30 s under ThreadSanitizer on two CPUs, which
 * is slowness, not a hang.  Only a hang guard: nothing asserts a time.
 */
#define SLOW_CLIENT_S	180

static int slow_client(void *arg)
{
	alarm(SLOW_CLIENT_S);
	return su_client_main(arg);
}

static void restore(const char *what, const char *spec,
		    const char *const *extra, int n)
{
	struct su_client_args a = {
		.mem = &mem, .nregions = 2, .sizes = { SIZE / 2, SIZE / 2 },
		.page_size = 4096, .order = SU_FORWARD, .stop_fd = -1,
		.result_fd = -1,
	};
	pid_t pids[CLIENTS];
	struct serve s;
	int bad = 0;

	serve_init(&s);
	if (serve_start(&s, spec, extra)) {
		ok(0, "%s: daemon started", what);
		serve_log_dump(&s, 0);
		serve_cleanup(&s);
		return;
	}
	a.sock = s.sock;
	for (int i = 0; i < n; i++)
		pids[i] = su_spawn(slow_client, &a);
	for (int i = 0; i < n; i++)
		bad += su_reap(pids[i], (SLOW_CLIENT_S + 10) * 1000) != 0;
	ok(bad == 0, "%s: every byte right in %d session%s (%d failed)", what,
	   n, n == 1 ? "" : "s", bad);
	if (bad)
		serve_log_dump(&s, 0);
	serve_stop(&s);
	serve_cleanup(&s);
}

/*
 * Chunk objects requested after log line from: how many, and the most
 * any one object was asked for.
 */
static long chunk_requests(long from, long *max_per_chunk, long *distinct)
{
	FILE *f = fopen(ngx.log, "r");
	static char seen[4096][80];
	static long count[4096];
	long i = 0, total = 0, nseen = 0;
	char line[1024];

	*max_per_chunk = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char uri[80] = "";
		long k;

		if (i++ < from || strncmp(line, "/store/chunks/", 14) ||
		    sscanf(line, "%79s", uri) != 1)
			continue;
		total++;
		for (k = 0; k < nseen && strcmp(seen[k], uri); k++)
			;
		if (k == nseen && nseen < 4096) {
			snprintf(seen[nseen], sizeof(seen[0]), "%s", uri);
			count[nseen++] = 0;
		}
		if (k < 4096 && ++count[k] > *max_per_chunk)
			*max_per_chunk = count[k];
	}
	fclose(f);
	*distinct = nseen;
	return total;
}

/* Bytes of the cache's files. */
static uint64_t dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t sum = 0;

	while (d && (de = readdir(d))) {
		char p[512];
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
		    (strstr(p, ".chk") || strstr(p, ".blk")))
			sum += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	return sum;
}

int main(void)
{
	char img[256], img2[256], store[256], url[256], url2[256];
	char cold[64], small[64], max[32], cmd[256];
	const char *const cached[] = { "--cache", cold, NULL };
	const char *const limited[] = { "--cache", small, "--cache-max", max,
					 NULL };
	struct image_create_opts o = { 0 };
	struct image_info in;
	long from, total, most, distinct;
	uint64_t stored;

	if (!nginx_binary())
		skip_all_missing("nginx", "not installed (apt-get install "
				 "nginx-light)");
	if (mem_file_create(&mem, SIZE, 0x5701e) || nginx_setup(&ngx))
		BAIL("setup: %s", strerror(errno));
	snprintf(img, sizeof(img), "%s/images/snap.fli", ngx.www);
	snprintf(img2, sizeof(img2), "%s/images/again.fli", ngx.www);
	snprintf(store, sizeof(store), "%s/store", ngx.www);
	snprintf(cmd, sizeof(cmd), "%s/images", ngx.www);
	if (mkdir(cmd, 0755) < 0)
		BAIL("mkdir %s: %s", cmd, strerror(errno));
	o.store = store;
	int ret = image_create(mem.path, img, &o, &in);

	ok(ret == 0, "store image created%s%s", ret ? ": " : "",
	   ret ? fl_last_error() : "");
	stored = in.stored[IMAGE_RAW] + in.stored[IMAGE_ZSTD];
	o.level = 5;	/* another image (another id), the same chunks */
	ret = image_create(mem.path, img2, &o, &in);
	ok(ret == 0 && in.new_chunks == 0,
	   "a second image of the same memory writes no chunk (%llu new)",
	   (unsigned long long)in.new_chunks);

	restore("store image from its directory", img, NULL, 1);

	ok(nginx_start(&ngx) == 0, "nginx on 127.0.0.1:%d", ngx.port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/images/snap.fli",
		 ngx.port);
	snprintf(url2, sizeof(url2), "http://127.0.0.1:%d/images/again.fli",
		 ngx.port);
	restore("store image over HTTP", url, NULL, 1);

	/* 16 at once from a cold cache: one fetch per chunk. */
	snprintf(cold, sizeof(cold), "/tmp/fl-scache-%d", (int)getpid());
	from = nginx_requests(&ngx);
	restore("16 sessions, cold cache", url, cached, CLIENTS);
	total = chunk_requests(from, &most, &distinct);
	ok(total > 0 && most == 1 && distinct == (long)in.count[IMAGE_RAW] +
	   (long)in.count[IMAGE_ZSTD],
	   "16 sessions, cold cache: each of the %ld chunks fetched once "
	   "(%ld requests, at most %ld for one)", distinct, total, most);

	/* The same chunks through another image: all from the cache. */
	from = nginx_requests(&ngx);
	restore("another image of the same chunks, warm cache", url2, cached,
		1);
	total = chunk_requests(from, &most, &distinct);
	ok(total == 0, "the chunks fetched for one image serve the other "
	   "(%ld chunk requests)", total);

	/* 16 at once under a limit of half the chunks' bytes. */
	snprintf(small, sizeof(small), "/tmp/fl-scache-small-%d",
		 (int)getpid());
	snprintf(max, sizeof(max), "%llu", (unsigned long long)(stored / 2));
	restore("16 sessions, cache limited to half the chunks", url,
		limited, CLIENTS);
	ok(dir_bytes(small) <= stored / 2,
	   "the cache stayed within its limit (%llu of %llu bytes)",
	   (unsigned long long)dir_bytes(small),
	   (unsigned long long)(stored / 2));

	/* The origin down: the warm cache restores every byte. */
	nginx_kill(&ngx);
	restore("nginx stopped, warm cache", url, cached, 1);
	restore("nginx stopped, warm cache, the other image", url2, cached, 1);

	nginx_cleanup(&ngx);
	mem_file_destroy(&mem);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", cold, small);
	if (system(cmd) != 0)
		diag("could not remove %s", cold);
	return done_testing();
}
