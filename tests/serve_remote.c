// SPDX-License-Identifier: Apache-2.0
/*
 * serve_remote.c - `faultline serve` with default flags reading from a
 * faultline image, from that image over HTTP (a real nginx on loopback),
 * and from it over HTTP with a block cache: a Firecracker-style client gets
 * every byte right each time, and a second restore with a warm cache
 * fetches no block from nginx.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "faultline.h"
#include "author/create.h"
#include "format/image.h"
#include "tap.h"
#include "serve_util.h"
#include "http_util.h"

#define SIZE (32ull << 20)

static struct nginx ngx;
static struct mem_file mem;

/* Serve spec with extra flags; one Firecracker-style client verifies it. */
static void restore(const char *what, const char *spec,
		    const char *const *extra)
{
	struct su_client_args a = {
		.mem = &mem, .nregions = 2, .sizes = { SIZE / 2, SIZE / 2 },
		.page_size = 4096, .order = SU_FORWARD, .stop_fd = -1,
		.result_fd = -1,
	};
	struct serve s;

	serve_init(&s);
	if (serve_start(&s, spec, extra)) {
		ok(0, "%s: daemon started", what);
		serve_log_dump(&s, 0);
		serve_cleanup(&s);
		return;
	}
	a.sock = s.sock;
	int r = su_reap(su_spawn(su_client_main, &a), 30000);

	ok(r == 0, "%s: every byte right (client result %d)", what, r);
	if (r)
		serve_log_dump(&s, 0);
	serve_stop(&s);
	serve_cleanup(&s);
}

int main(void)
{
	char img[256], url[256], cache[64];
	const char *const cached[] = { "--cache", cache, NULL };

	if (!nginx_binary())
		skip_all_missing("nginx", "not installed (apt-get install "
				 "nginx-light)");
	if (mem_file_create(&mem, SIZE, 0x5e7e) || nginx_setup(&ngx))
		BAIL("setup: %s", strerror(errno));
	snprintf(img, sizeof(img), "%s/snap.img", ngx.www);
	int ret = image_create(mem.path, img, NULL, NULL);

	ok(ret == 0, "image created%s%s", ret ? ": " : "",
	   ret ? fl_last_error() : "");
	restore("local image", img, NULL);

	ok(nginx_start(&ngx) == 0, "nginx on 127.0.0.1:%d", ngx.port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/snap.img", ngx.port);
	restore("image over HTTP", url, NULL);

	snprintf(cache, sizeof(cache), "/tmp/fl-cache-%d", (int)getpid());
	restore("image over HTTP, cold cache", url, cached);
	long before = nginx_requests(&ngx);

	restore("image over HTTP, warm cache", url, cached);
	long fetched = nginx_requests(&ngx) - before;

	ok(fetched <= 2, "warm cache: at most the open's check reached nginx (%ld requests)",
	   fetched);
	nginx_kill(&ngx);
	nginx_cleanup(&ngx);
	mem_file_destroy(&mem);
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", cache);
	if (system(cmd) != 0)
		diag("could not remove %s", cache);
	return done_testing();
}
