// SPDX-License-Identifier: Apache-2.0
/*
 * remote.c - `faultline bench remote`: the time for the
 * kvm-restore guest (one touch per 4 KiB page, linear, 128 MiB) to run over
 * memory restored by the default in-process engine from each kind of
 * source: the local raw file (the reference), a local image of it, the
 * image over HTTP with a cold and with a warm block cache, the raw file over
 * HTTP without a cache, and live post-copy from `faultline send` (tcp://).
 *
 * Decisions: the HTTP server is a real nginx on loopback, started and
 * configured as tests/http.c does (http_util.h), so the numbers
 * include real HTTP range requests; without nginx the HTTP rows are left
 * out with a note.  The sender is a forked child running send_run(), the
 * code of `faultline send`.  Each restore opens its source, creates an
 * engine (uffd -1, FL_REGION_REGISTER, default options) over fresh memory
 * and runs the guest; the timer covers all of that up to the last touch,
 * since opening a remote source (size probe, image index, cache scan) is
 * part of a remote restore.  Every restore is checksummed against the
 * file.  Cases run round-robin within each run; run r's cold restore fills
 * a new cache directory and its warm restore reuses it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "author/create.h"
#include "format/image.h"
#include "send/send.h"
#include "http_util.h"

enum rm_src { S_RAW, S_IMAGE, S_HTTP_COLD, S_HTTP_WARM, S_HTTP_RAW, S_TCP };

static const struct rm_case {
	const char *key, *label;
	enum rm_src src;
} cases[] = {
	{ "local_raw", "local raw file", S_RAW },
	{ "local_image", "local image", S_IMAGE },
	{ "http_image_cold", "image over HTTP, cold cache", S_HTTP_COLD },
	{ "http_image_warm", "image over HTTP, warm cache", S_HTTP_WARM },
	{ "http_raw", "raw file over HTTP, no cache", S_HTTP_RAW },
	{ "postcopy", "post-copy (faultline send, tcp://)", S_TCP },
};

#define NCASES ((int)(sizeof(cases) / sizeof(*cases)))

struct rm_ctx {
	uint64_t len;
	uint64_t want;		/* checksum of the whole file */
	uint32_t *pages;	/* 0, 1, 2, ...: the linear touch */
	char raw[64];		/* the memory file */
	char image[200];
	char raw_url[128], image_url[128], tcp[64];
	char cache[200];	/* the current run's cache directory */
	struct nginx ng;	/* its directory holds everything but raw */
	bool http, send;	/* nginx / the sender are up */
	pid_t sender;
	long warm_requests;	/* nginx requests during warm restores */
};

static const char *spec_of(const struct rm_ctx *c, enum rm_src s)
{
	switch (s) {
	case S_RAW:
		return c->raw;
	case S_IMAGE:
		return c->image;
	case S_HTTP_COLD:
	case S_HTTP_WARM:
		return c->image_url;
	case S_HTTP_RAW:
		return c->raw_url;
	case S_TCP:
		return c->tcp;
	}
	return NULL;
}

static bool runnable(const struct rm_ctx *c, enum rm_src s)
{
	if (s == S_TCP)
		return c->send;
	if (s == S_HTTP_COLD || s == S_HTTP_WARM || s == S_HTTP_RAW)
		return c->http;
	return true;
}

/* One restore: open, engine, guest, checksum; 0 or -errno. */

/* The guest: one thread touching pages[0..n) of mem in that order. */
struct guest {
	uint8_t *mem;
	const uint32_t *pages;
	uint64_t n;
	double t1;
	uint8_t acc;
};

static void *guest_main(void *arg)
{
	struct guest *g = arg;
	uint8_t acc = 0;

	/* One write per page that keeps the data: exactly one fault. */
	for (uint64_t i = 0; i < g->n; i++)
		acc += __atomic_fetch_add(g->mem + (uint64_t)g->pages[i] * 4096,
					  (uint8_t)0, __ATOMIC_RELAXED);
	g->t1 = bench_now();
	g->acc = acc;
	return NULL;
}

static int guest_run(uint8_t *mem, const uint32_t *pages, uint64_t n,
		     double *t1)
{
	struct guest g = { .mem = mem, .pages = pages, .n = n };
	pthread_t th;
	int ret = -pthread_create(&th, NULL, guest_main, &g);

	if (ret < 0)
		return ret;
	pthread_join(th, NULL);
	*t1 = g.t1;
	return 0;
}

static int restore_once(struct rm_ctx *c, const struct rm_case *k,
			double *sec, bool *ok)
{
	struct fl_source_opts so = { 0 };
	struct fl_engine_opts eo = { .uffd = -1 };
	struct fl_region_desc rd = {
		.len = c->len, .page_size = 4096, .flags = FL_REGION_REGISTER,
	};
	struct fl_source *src = NULL;
	struct fl_engine *e = NULL;
	uint8_t *p = bench_map(c->len);
	double t0, t1 = 0;
	int ret;

	if (!p)
		return -ENOMEM;
	if (k->src == S_HTTP_COLD || k->src == S_HTTP_WARM)
		so.cache_dir = c->cache;
	rd.addr = (uintptr_t)p;
	t0 = bench_now();
	if ((ret = fl_source_open_ex(spec_of(c, k->src), &so, &src)) < 0 ||
	    (ret = fl_engine_create(&eo, &e)) < 0 ||
	    (ret = fl_engine_add_region(e, &rd, src)) < 0 ||
	    (ret = fl_engine_start(e, 1)) < 0) {
		fprintf(stderr, "faultline bench remote: %s: %s\n", k->label,
			fl_last_error());
		goto out;
	}
	ret = guest_run(p, c->pages, c->len / 4096, &t1);
	if (ret < 0)
		goto out;
	*sec = t1 - t0;
	*ok = bench_sum(p, c->len) == c->want;
out:
	if (e) {
		fl_engine_stop(e);
		fl_engine_destroy(e);
	}
	if (src)
		fl_source_put(src);
	bench_unmap(p, c->len);
	return ret;
}

/* ---- the servers ---------------------------------------------------------- */

/* nginx serving the raw file and the image; false (with a note) if not. */
static bool start_http(struct rm_ctx *c, char *note, size_t n)
{
	char path[200];

	if (!nginx_binary()) {
		snprintf(note, n, "nginx is not installed: no HTTP rows.  ");
		return false;
	}
	snprintf(path, sizeof(path), "%s/raw.mem", c->ng.www);
	if ((link(c->raw, path) < 0 && symlink(c->raw, path) < 0) ||
	    nginx_start(&c->ng) < 0) {
		snprintf(note, n, "nginx did not start: no HTTP rows.  ");
		return false;
	}
	snprintf(c->raw_url, sizeof(c->raw_url),
		 "http://127.0.0.1:%d/raw.mem", c->ng.port);
	snprintf(c->image_url, sizeof(c->image_url),
		 "http://127.0.0.1:%d/image.fli", c->ng.port);
	return true;
}

/* A child running `faultline send` on a free port; false if it fails. */
static bool start_sender(struct rm_ctx *c, char *note, size_t n)
{
	struct send_config sc = { .mem_file = c->raw };
	char listen[32];
	int port = free_port();

	if (port < 0)
		goto fail;
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	sc.listen = listen;
	fflush(NULL);
	c->sender = fork();
	if (c->sender < 0)
		goto fail;
	if (c->sender == 0) {
		int null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (null >= 0)
			dup2(null, STDERR_FILENO);
		_exit(send_run(&sc) < 0);
	}
	for (int i = 0; i < 500; i++) {
		if (port_open(port)) {
			snprintf(c->tcp, sizeof(c->tcp), "tcp://%s", listen);
			return true;
		}
		if (waitpid(c->sender, NULL, WNOHANG) == c->sender) {
			c->sender = 0;
			break;
		}
		usleep(10000);
	}
fail:
	snprintf(note + strlen(note), n - strlen(note),
		 "faultline send did not start: no post-copy row.  ");
	return false;
}

static void stop_sender(struct rm_ctx *c)
{
	if (c->sender > 0) {
		kill(c->sender, SIGTERM);
		waitpid(c->sender, NULL, 0);
	}
	c->sender = 0;
}

/* ---- the benchmark ------------------------------------------------------- */

/* A new cache directory for run r. */
static int start_run(void *ctx, int r)
{
	struct rm_ctx *c = ctx;

	snprintf(c->cache, sizeof(c->cache), "%s/cache-%d", c->ng.dir, r);
	if (c->http && mkdir(c->cache, 0700) < 0)
		return -errno;
	return 0;
}

static bool wanted(void *ctx, int i)
{
	return runnable(ctx, cases[i].src);
}

static const char *case_label(void *ctx, int i)
{
	(void)ctx;
	return cases[i].label;
}

static int sample(void *ctx, int r, int i, struct bench_sample *s)
{
	struct rm_ctx *c = ctx;
	const struct rm_case *k = &cases[i];
	long before = 0;
	int ret;

	(void)r;
	if (k->src == S_HTTP_WARM)
		before = nginx_requests(&c->ng);
	ret = restore_once(c, k, &s->sec, &s->ok);
	if (ret == 0 && k->src == S_HTTP_WARM)
		c->warm_requests += nginx_requests(&c->ng) - before;
	return ret;
}

int bench_remote(const struct bench_opts *o, struct bench_table *t)
{
	struct rm_ctx c = { 0 };
	struct image_info info;
	struct bench_loop l = {
		.bench = "remote", .runs = o->runs, .ncases = NCASES,
		.ctx = &c, .label = case_label, .sample = sample,
		.start = start_run, .wanted = wanted,
	};
	int runs = o->runs, fd = -1, ret;
	char note[256] = "";

	c.len = o->size ? o->size : o->quick ? 8 * MIB : 128 * MIB;
	c.ng.pid = -1;
	c.pages = malloc(c.len / 4096 * sizeof(*c.pages));
	if (!c.pages) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < c.len / 4096; i++)
		c.pages[i] = (uint32_t)i;

	/* The raw file in /tmp, everything else in nginx's directory. */
	fd = bench_memfile(c.len, c.raw, false);
	if (fd < 0) {
		ret = fd;
		fprintf(stderr, "faultline bench remote: cannot create the "
			"memory file in /tmp: %s\n", strerror(-ret));
		goto out;
	}
	c.want = bench_pattern_sum(c.len);
	if (nginx_setup(&c.ng) < 0) {
		ret = -EIO;
		fprintf(stderr, "faultline bench remote: cannot set up %s\n",
			c.ng.dir);
		goto out;
	}
	snprintf(c.image, sizeof(c.image), "%s/image.fli", c.ng.www);
	ret = image_create(c.raw, c.image, NULL, &info);
	if (ret < 0) {
		fprintf(stderr, "faultline bench remote: image: %s\n",
			fl_last_error());
		goto out;
	}
	c.http = start_http(&c, note, sizeof(note));
	c.send = start_sender(&c, note, sizeof(note));

	ret = bench_loop_run(&l);
	if (ret < 0)
		goto out;

	t->title = "guest touches its memory restored from local, HTTP and "
		   "post-copy sources (in-process engine)";
	t->unit = "ms";
	t->per_gib = false;
	t->bytes = c.len;
	t->runs = runs;
	t->ref = 0;
	for (int i = 0; i < NCASES; i++) {
		if (!bench_loop_wanted(&l, i))
			continue;
		int row = bench_loop_row(&l, t, i, cases[i].key,
					 cases[i].label, -1);

		t->rows[row].cmp = row == 0 ? -1 : 0;
	}
	bench_add_kv(t, "image_bytes", (double)info.file_size);
	if (c.http)
		bench_add_kv(t, "http_warm_requests_per_restore",
			     (double)c.warm_requests / runs);
	snprintf(t->notes, sizeof(t->notes),
		 "%sEach row: open the source, start a default engine (%u KiB "
		 "chunks + prefetch + background) and touch every page once, "
		 "linear; vs the local raw file.  HTTP: nginx on loopback, "
		 "512 KiB range requests; cold = empty cache dir, warm = the "
		 "same dir again.  The bench data barely compresses.", note,
		 (unsigned int)(FL_DEFAULT_CHUNK >> 10));
out:
	stop_sender(&c);
	if (c.ng.dir[0])
		nginx_cleanup(&c.ng);
	if (fd >= 0) {
		close(fd);
		bench_unlink(c.raw);
	}
	free(c.pages);
	bench_loop_free(&l);
	return ret;
}
