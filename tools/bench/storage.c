// SPDX-License-Identifier: Apache-2.0
/*
 * storage.c - `faultline bench storage`: a fleet's ten daily snapshots of
 * one base, each day writing 2 % of the pages (new pages every day, so
 * they accumulate from the base): the bytes they take as ten whole
 * images, as the base and a chain of diff images, and in a chunk store;
 * the tenth restored over HTTP from a cache the first warmed; a
 * three-layer chain against the same memory in one image; and 16
 * sessions of one daemon restoring one snapshot at once from a cold
 * cache.
 *
 * Decisions (docs/benchmarks.md, "storage"):
 *  - a day writes runs of 64 KiB to 2 MiB at random page offsets, never
 *    a page an earlier day wrote: memory is written in runs (heaps, page
 *    cache, THP), and a chunk store dedups whole chunks, so what it saves
 *    depends on it; the chunks a day touches are a fact, beside what
 *    scattered pages would touch, and the same ten days go into a second
 *    store of 64 KiB chunks (the default is 512 KiB);
 *  - the data is a mix like a guest's memory: per 64 KiB of the base a
 *    quarter zeros, 45 % text-like (about 2.5x with zstd), 30 % random;
 *    a written page is text-like or random, half and half;
 *  - bytes on disk are st_blocks * 512 of every file (and, for the store,
 *    its directories); bytes from the origin are nginx's $body_bytes_sent
 *    of the requests a restore made (its access log, as the tests read
 *    it); a snapshot's stored bytes are its index file and the objects
 *    it names;
 *  - every restore is `faultline serve` (this binary) with
 *    Firecracker-style clients that touch nothing, timed from the first
 *    connect until every client's memory is resident, then each page's
 *    XXH3 compared with the snapshot's;
 *  - 16 sessions of 1 GiB would need 16 GiB of memory: the sessions
 *    restore a snapshot of the first 256 MiB of the tenth (its chunks are
 *    the tenth's, in the same store);
 *  - the images are built once (their times are one sample); restores
 *    run --runs times (3 without it), each with new cache directories.
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
#include "format/image.h"
#include "http_util.h"
#include "storage_bench.h"


static const struct st_row {
	const char *key, *label;
	int cmp;		/* the row its ratio is to */
	bool http;		/* needs nginx */
} rows[R_N] = {
	[R_WHOLE] = { "whole", "10 whole images: write", R_WHOLE, false },
	[R_DIFFS] = { "diffs", "base + 10 diff images: write", R_WHOLE, false },
	[R_STORE] = { "store", "chunk store, 10 images: write", R_WHOLE,
		      false },
	[R_STORE64] = { "store_64k", "chunk store, 64 KiB chunks: write",
			R_WHOLE, false },
	[R_S1] = { "s1_cold", "day 1 over HTTP, cold cache", R_S1, true },
	[R_S10] = { "s10_warm", "day 10 over HTTP, cache warmed by day 1",
		    R_S1, true },
	[R_MERGED] = { "merged", "day 2 as one image (local)", R_MERGED,
		       false },
	[R_CHAIN] = { "chain3", "day 2 as a 3-layer chain (local)", R_MERGED,
		      false },
	[R_SESS1] = { "sess1", "1 session, cold cache", R_SESS1, true },
	[R_SESS16] = { "sess16", "16 sessions at once, cold cache", R_SESS1,
		       true },
};

enum { C_DISK, C_XIMG, C_ORIG, C_XSTORED, C_N };

static const struct bench_col cols[C_N] = {
	[C_DISK] = { "disk_mib", "MiB disk", "%*.1f", 9 },
	[C_XIMG] = { "vs_image", "x image", "%*.2f", 7 },
	[C_ORIG] = { "origin_mib", "MiB origin", "%*.1f", 10 },
	[C_XSTORED] = { "origin_vs_stored", "x stored", "%*.3f", 8 },
};


/* ---- restoring ------------------------------------------------------------ */

/* Does mem hold the pages want names?  Says where not. */
static bool verify(const uint8_t *mem, uint64_t len, const uint64_t *want,
		   const char *what)
{
	for (uint64_t p = 0; p < len / PG; p++) {
		if (XXH3_64bits(mem + p * PG, PG) == want[p])
			continue;
		fprintf(stderr, "faultline bench storage: %s: page %llu is "
			"not the snapshot's\n", what, (unsigned long long)p);
		return false;
	}
	return true;
}

/*
 * `faultline serve ARGS` and n Firecracker clients of mlen bytes at once:
 * seconds from the first connect until all their memory is resident, each
 * client's pages checked against want, and the bytes nginx sent meanwhile
 * (the daemon's start included).  0 or -errno.
 */
static int serve_restore(struct st_ctx *c, int row, const char *const *args,
			 int n, uint64_t mlen, const uint64_t *want,
			 double *sec, uint64_t *orig)
{
	struct bench_daemon d = { 0 };
	struct fc_client *fc = calloc((size_t)n, sizeof(*fc));
	long from = c->http ? nginx_requests(&c->ng) : 0;
	double t0, t1;
	int ret = 0;

	if (!fc)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		fc_client_init(&fc[i]);
	for (int i = 0; i < n && !ret; i++)
		ret = fc_client_map(&fc[i], 1, &mlen, 4096);
	if (!ret)
		ret = bench_daemon_start(&d, "storage", c->daemons++, args);
	if (ret < 0)
		goto out;
	t0 = bench_now();
	for (int i = 0; i < n && !ret; i++)
		ret = bench_daemon_connect(&fc[i], d.sock);
	for (int i = 0; i < n && !ret; i++)
		ret = bench_wait_resident(fc[i].regions[0].addr, mlen);
	t1 = bench_now();
	if (ret < 0) {
		fprintf(stderr, "faultline bench storage: %s: %s\n",
			rows[row].label, strerror(-ret));
		goto out;
	}
	*sec = t1 - t0;
	for (int i = 0; i < n; i++) {
		close(fc[i].sock);	/* end the session; the memory stays */
		fc[i].sock = -1;
		c->ok[row] &= verify(fc[i].regions[0].addr, mlen, want,
				     rows[row].label);
	}
out:
	for (int i = 0; i < n; i++)
		fc_client_close(&fc[i]);
	free(fc);
	bench_daemon_stop(&d);
	*orig = c->http ? storage_origin_bytes(&c->ng, from) : 0;
	return ret;
}

static int restore_row(struct st_ctx *c, int r, int row, const char *spec,
		       const char *cache)
{
	const char *const args[] = { "--mem-file", spec, cache ? "--cache" :
				     NULL, cache, NULL };
	bool sess = row == R_SESS1 || row == R_SESS16;
	uint64_t o = 0;
	int ret;

	ret = serve_restore(c, row, args, row == R_SESS16 ? SESSIONS : 1,
			    sess ? c->sess_len : c->len,
			    c->want[row == R_S1 ? 1 : row == R_MERGED ||
				    row == R_CHAIN ? 2 : DAYS],
			    &c->sec[row][r], &o);
	c->orig[row][r] = (double)o;
	return ret;
}

/*
 * The loop's cases, in each run: the merged image and the chain (in turn
 * first), day 1 then day 10 over HTTP through one new cache, then one and
 * 16 sessions, each through a new cache.
 */
enum { L_LOCAL1, L_LOCAL2, L_S1, L_S10, L_SESS1, L_SESS16, L_N };

static int row_of(const struct st_ctx *c, int i)
{
	static const int http_rows[] = { R_S1, R_S10, R_SESS1, R_SESS16 };

	if (i <= L_LOCAL2)
		return (i ^ c->run) & 1 ? R_CHAIN : R_MERGED;
	return http_rows[i - L_S1];
}

static int start_run(void *ctx, int r)
{
	((struct st_ctx *)ctx)->run = r;
	return 0;
}

static bool wanted(void *ctx, int i)
{
	return !rows[row_of(ctx, i)].http || ((struct st_ctx *)ctx)->http;
}

static const char *case_label(void *ctx, int i)
{
	return rows[row_of(ctx, i)].label;
}

static int restore_case(void *ctx, int r, int i, struct bench_sample *s)
{
	struct st_ctx *c = ctx;
	int row = row_of(c, i), ret = 0;
	char cache[256], spec[256];

	snprintf(cache, sizeof(cache), "%s/cache", c->ng.dir);
	if (row == R_MERGED || row == R_CHAIN)
		snprintf(spec, sizeof(spec), "%s/%s", c->local,
			 row == R_CHAIN ? "d2.fli" : "whole2.fli");
	if (i != L_LOCAL1 && i != L_LOCAL2 && i != L_S10 &&
	    mkdir(cache, 0700) < 0)
		return -errno;
	switch (i) {
	case L_LOCAL1:
	case L_LOCAL2:
		ret = restore_row(c, r, row, spec, NULL);
		break;
	case L_S1:
		ret = restore_row(c, r, row, c->url1, cache);
		break;
	case L_S10:
		ret = restore_row(c, r, row, c->url10, cache);
		break;
	default:
		ret = restore_row(c, r, row, c->url_sess, cache);
	}
	if (i != L_LOCAL1 && i != L_LOCAL2 && (i != L_S1 || ret < 0))
		storage_rm_tree(cache);
	s->sec = c->sec[row][r];
	s->ok = c->ok[row];
	return ret;
}

static int run_restores(struct st_ctx *c)
{
	struct bench_loop l = {
		.bench = "storage", .runs = c->runs, .ncases = L_N, .ctx = c,
		.label = case_label, .sample = restore_case,
		.start = start_run, .wanted = wanted,
	};
	int ret = bench_loop_run(&l);

	bench_loop_free(&l);
	return ret;
}

/* ---- the table ------------------------------------------------------------ */

static double median_of(const double *v, int n)
{
	double w[n > 0 ? n : 1];

	memcpy(w, v, sizeof(*v) * (size_t)n);
	return bench_median(w, n);
}

static double paired(struct st_ctx *c, int a, int b)
{
	return bench_paired_ratio(c->sec[a], c->sec[b], c->runs);
}

static const char *met(bool ok)
{
	return ok ? "met" : "NOT met";
}

static void add_targets(struct st_ctx *c, struct bench_table *t)
{
	size_t len = strlen(t->notes), cap = sizeof(t->notes);
	double xs = (double)c->disk[2] / (double)c->one_image;
	double chain = paired(c, R_CHAIN, R_MERGED);
	char *n = t->notes;

#define NOTE(...)	do { if (len < cap) len += snprintf(n + len, \
				cap - len, __VA_ARGS__); } while (0)
	NOTE("targets: chunk store / one image <= 1.3x: %.2fx, %s;", xs,
	     met(xs <= 1.3));
	if (c->http) {
		double w = median_of(c->orig[R_S10], c->runs) /
			   (double)c->stored10;
		double s = median_of(c->orig[R_SESS16], c->runs) /
			   (double)c->stored_sess;
		double tt = paired(c, R_SESS16, R_SESS1);

		NOTE(" day 10 from the cache day 1 warmed, origin / its "
		     "stored bytes <= 5%%: %.1f%%, %s (its objects day 1 "
		     "lacks and its index: %.1f%%);", w * 100, met(w <= 0.05),
		     100.0 * (double)c->floor10 / (double)c->stored10);
		NOTE(" 3-layer chain / one image, restore <= 1.1x: %.2fx, "
		     "%s;", chain, met(chain <= 1.1));
		NOTE(" 16 sessions, origin / stored bytes <= 1.05x: %.3fx, "
		     "%s; restore / one session's <= 1.5x: %.2fx, %s\n", s,
		     met(s <= 1.05), tt, met(tt <= 1.5));
	} else {
		NOTE(" 3-layer chain / one image, restore <= 1.1x: %.2fx, "
		     "%s; the HTTP targets not measured (no nginx)\n", chain,
		     met(chain <= 1.1));
	}
	NOTE("Ten days, each writing %d%% of the pages in runs of 64 KiB to "
	     "2 MiB, none written before; the base: per 64 KiB zeros, "
	     "text-like or random (25/45/30%%), a written page text-like or "
	     "random.  write: image create, the images built once (64 KiB chunks: "
	     "the same ten into a store of 64 KiB chunks, not served; the "
	     "others 512 KiB).  MiB disk: "
	     "st_blocks*512 of the files (the store: and its directories).  "
	     "MiB origin: nginx's $body_bytes_sent while the daemon ran; x "
	     "stored: over the snapshot's index and objects.  Restores: "
	     "faultline serve, Firecracker-style clients touching nothing, "
	     "from the first connect until all is resident, every page "
	     "checked.  Sessions: a snapshot of the first %llu MiB of day "
	     "10.", DIRTY_PCT, (unsigned long long)(c->sess_len / MIB));
#undef NOTE
}

static void fill_table(struct st_ctx *c, struct bench_table *t)
{
	snprintf(t->title_buf, sizeof(t->title_buf), "ten daily snapshots "
		 "of one base: whole images, base + diffs, a chunk store; "
		 "restores over HTTP with a cache, a chain, 16 sessions");
	t->title = t->title_buf;
	t->unit = "s";
	t->bytes = c->len;
	t->runs = c->runs;
	t->ncols = C_N;
	memcpy(t->cols, cols, sizeof(cols));
	for (int i = 0; i < R_N; i++) {
		bool build = i <= R_STORE64;
		double v[c->runs];
		int row;

		if (rows[i].http && !c->http)
			continue;
		if (build)
			v[0] = c->t_build[i];
		else
			memcpy(v, c->sec[i], sizeof(v));
		row = bench_add_row(t, rows[i].key, rows[i].label, v,
				    build ? 1 : c->runs, c->ok[i], -1);
		for (int j = 0; j < t->nrows; j++)
			if (!strcmp(t->rows[j].key, rows[rows[i].cmp].key))
				t->rows[row].cmp = j == row ? -1 : j;
		if (t->rows[row].cmp >= 0 && !build)
			t->rows[row].ratio = paired(c, i, rows[i].cmp);
		if (build) {
			t->rows[row].col[C_DISK] = (double)c->disk[i] / MIB;
			t->rows[row].col[C_XIMG] = (double)c->disk[i] /
						   (double)c->one_image;
		}
		if (rows[i].http) {
			uint64_t st = i == R_S1 ? c->stored1 : i == R_S10 ?
				      c->stored10 : c->stored_sess;
			double o = median_of(c->orig[i], c->runs);

			t->rows[row].col[C_ORIG] = o / MIB;
			t->rows[row].col[C_XSTORED] = o / (double)st;
		}
	}
	/* The reference row of the ratios that need one: the whole images. */
	t->ref = 0;
	for (int j = 0; j < t->nrows; j++)
		if (t->rows[j].cmp < 0 && j != t->ref)
			t->rows[j].cmp = j;
	bench_add_kv(t, "one_image_bytes", (double)c->one_image);
	bench_add_kv(t, "store_vs_image", (double)c->disk[2] /
		     (double)c->one_image);
	bench_add_kv(t, "store_64k_vs_image", (double)c->disk[3] /
		     (double)c->one_image);
	bench_add_kv(t, "diffs_vs_image", (double)c->disk[1] /
		     (double)c->one_image);
	bench_add_kv(t, "image_compression", (double)c->len /
		     (double)c->one_image);
	bench_add_kv(t, "chunks_written_per_day", c->touched);
	bench_add_kv(t, "chunks_written_per_day_if_scattered",
		     1 - pow(1 - DIRTY_PCT / 100.0,
			     (double)(IMAGE_DEFAULT_CHUNK / PG)));
	bench_add_kv(t, "chain_vs_merged", paired(c, R_CHAIN, R_MERGED));
	if (c->http) {
		bench_add_kv(t, "day10_stored_bytes", (double)c->stored10);
		bench_add_kv(t, "day10_warm_origin_fraction",
			     median_of(c->orig[R_S10], c->runs) /
			     (double)c->stored10);
		bench_add_kv(t, "day10_floor_fraction", (double)c->floor10 /
			     (double)c->stored10);
		bench_add_kv(t, "sessions_stored_bytes",
			     (double)c->stored_sess);
		bench_add_kv(t, "sessions16_origin_vs_stored",
			     median_of(c->orig[R_SESS16], c->runs) /
			     (double)c->stored_sess);
		bench_add_kv(t, "sessions16_vs_one", paired(c, R_SESS16,
							    R_SESS1));
	} else {
		snprintf(t->notes, sizeof(t->notes), "nginx is not installed "
			 "(nginx-light): no HTTP rows.  ");
	}
	add_targets(c, t);
}

/* ---- the benchmark -------------------------------------------------------- */

int bench_storage(const struct bench_opts *o, struct bench_table *t)
{
	struct st_ctx *c = calloc(1, sizeof(*c));
	int ret = -ENOMEM;

	if (!c)
		return -ENOMEM;
	c->len = o->size ? o->size : o->quick ? 64 * MIB : GIB;
	c->npages = c->len / PG;
	c->sess_len = o->quick ? 16 * MIB : 256 * MIB;
	if (c->sess_len > c->len)
		c->sess_len = c->len;
	c->runs = o->runs_set ? o->runs : o->quick ? 1 : 3;
	c->ng.pid = -1;
	c->day = calloc(c->npages, 1);
	c->want[1] = calloc(c->npages, sizeof(uint64_t));
	c->want[2] = calloc(c->npages, sizeof(uint64_t));
	c->want[DAYS] = calloc(c->npages, sizeof(uint64_t));
	if (!c->day || !c->want[1] || !c->want[2] || !c->want[DAYS])
		goto out;
	for (int i = 0; i < R_N; i++) {
		c->ok[i] = true;
		c->sec[i] = calloc((size_t)c->runs, sizeof(double));
		c->orig[i] = calloc((size_t)c->runs, sizeof(double));
		if (!c->sec[i] || !c->orig[i])
			goto out;
	}
	/* Everything lives in nginx's directory, removed at the end. */
	if (nginx_setup(&c->ng) < 0) {
		ret = -EIO;
		fprintf(stderr, "faultline bench storage: cannot set up %s\n",
			c->ng.dir);
		goto out;
	}
	snprintf(c->local, sizeof(c->local), "%s/local", c->ng.dir);
	snprintf(c->images, sizeof(c->images), "%s/images", c->ng.www);
	snprintf(c->store, sizeof(c->store), "%s/store", c->ng.www);
	snprintf(c->store64, sizeof(c->store64), "%s/store64", c->ng.dir);
	if (mkdir(c->local, 0700) < 0 || mkdir(c->images, 0755) < 0 ||
	    mkdir(c->store, 0755) < 0 || mkdir(c->store64, 0700) < 0) {
		ret = -errno;
		goto out;
	}
	ret = storage_build(c);
	if (ret < 0)
		goto out;
	c->http = nginx_binary() && nginx_start(&c->ng) == 0;
	snprintf(c->url1, sizeof(c->url1), "http://127.0.0.1:%d/images/"
		 "snap1.fli", c->ng.port);
	snprintf(c->url10, sizeof(c->url10), "http://127.0.0.1:%d/images/"
		 "snap%d.fli", c->ng.port, DAYS);
	snprintf(c->url_sess, sizeof(c->url_sess), "http://127.0.0.1:%d/"
		 "images/sess.fli", c->ng.port);
	ret = run_restores(c);
	if (ret < 0)
		goto out;
	fill_table(c, t);
out:
	if (c->ng.dir[0])
		nginx_cleanup(&c->ng);
	for (int i = 0; i < R_N; i++) {
		free(c->sec[i]);
		free(c->orig[i]);
	}
	free(c->day);
	for (int k = 0; k <= DAYS; k++)
		free(c->want[k]);
	free(c);
	return ret;
}

