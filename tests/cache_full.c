// SPDX-License-Identifier: Apache-2.0
/*
 * cache_full.c - `faultline serve` of a 64 MiB memory file over HTTP (a
 * real nginx on loopback) with --cache on a 2 MiB tmpfs that fills long
 * before the image is read: a Firecracker-style client gets every byte
 * right, and the daemon says once, in one line, that the cache's disk is
 * full and what it lacks is read from the origin (never once per block).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "faultline.h"
#include "tap.h"
#include "serve_util.h"
#include "http_util.h"

#define SIZE	(64ull << 20)

static int count_lines(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char line[2048];
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

int main(void)
{
	struct su_client_args a = {
		.nregions = 1, .sizes = { SIZE }, .page_size = 4096,
		.order = SU_FORWARD, .stop_fd = -1, .result_fd = -1,
	};
	char cache[200], url[256], cmd[512];
	const char *const extra[] = { "--cache", cache, NULL };
	static struct nginx ngx;
	struct mem_file mem;
	struct serve s;
	int full, rc;

	if (!nginx_binary())
		skip_all_missing("nginx", "not installed (make deps installs "
				 "nginx-light)");
	if (mem_file_create(&mem, SIZE, 0xcf11) || nginx_setup(&ngx))
		BAIL("setup: %s", strerror(errno));
	snprintf(cache, sizeof(cache), "%s/cache", ngx.dir);
	if (mkdir(cache, 0700) < 0)
		BAIL("mkdir %s: %s", cache, strerror(errno));
	if (mount("tmpfs", cache, "tmpfs", 0, "size=2m,mode=0700") < 0) {
		nginx_cleanup(&ngx);
		mem_file_destroy(&mem);
		skip_all_missing("root", "cannot mount a tmpfs for the cache");
	}
	snprintf(cmd, sizeof(cmd), "cp %s %s/mem.raw && chmod 644 %s/mem.raw",
		 mem.path, ngx.www, ngx.www);
	if (system(cmd) != 0 || nginx_start(&ngx))
		BAIL("nginx: %s", strerror(errno));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mem.raw", ngx.port);

	serve_init(&s);
	if (serve_start(&s, url, extra))
		BAIL("daemon did not start");
	a.sock = s.sock;
	a.mem = &mem;
	rc = su_reap(su_spawn(su_client_main, &a), 120000);
	ok(rc == 0, "64 MiB over HTTP, --cache on a 2 MiB tmpfs: every byte "
	   "right (%d)", rc);
	serve_stop(&s);
	full = count_lines(s.log, "disk is full");
	ok(full == 1 && count_lines(s.log, "read from the origin") == 1,
	   "one line says the cache's disk is full and reads go to the "
	   "origin (%d)", full);
	if (full != 1 || rc)
		serve_log_dump(&s, 0);
	serve_cleanup(&s);
	umount2(cache, MNT_DETACH);
	nginx_cleanup(&ngx);
	mem_file_destroy(&mem);
	return done_testing();
}
