// SPDX-License-Identifier: Apache-2.0
/*
 * policy.c - `faultline bench policy`: what the engine's prefetch policy
 * did for a client, in-process, on this machine under its present load:
 * per access pattern, the faults the client took and the pages readahead
 * and background restore filled instead of them.
 *
 * Decision: these figures were test points (tests/engine_prefetch.c,
 * tests/engine_adaptive.c) until a busy machine failed them: how much a
 * filler does before the client gets there is the scheduler's to decide,
 * so it is measured here, as medians, and never asserted.  Every run
 * still compares each page it touched with the memory file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"

#define PG	4096ull
#define NOFILL	(FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND)

enum pol_case { C_LINEAR, C_STRIDED, C_DENSE, C_QUEUED, C_IDLE, C_N };

static const struct {
	const char *key, *label;
	unsigned int flags;
	const char *fact;	/* facts key: pages the fillers did */
} cases[C_N] = {
	[C_LINEAR] = { "linear_readahead", "linear, readahead, no background",
		       FL_ENGINE_NO_BACKGROUND, "linear_pages_prefetched" },
	[C_STRIDED] = { "strided_readahead", "64K every 256K, readahead, no bg",
			FL_ENGINE_NO_BACKGROUND, "strided_pages_prefetched" },
	[C_DENSE] = { "dense_random", "all pages at random, defaults", 0,
		      "dense_random_pages_background" },
	[C_QUEUED] = { "queued4", "4 threads at random, no fillers", NOFILL,
		       NULL },
	[C_IDLE] = { "idle_background", "idle: background (ms: restore_ms)", 0,
		     "idle_pages_background" },
};

struct pol_run {
	double sec;
	struct fl_stats st;
	bool ok;
};

/* Does the page at mem + off hold the file's bytes? */
static bool page_right(const uint8_t *mem, uint64_t off)
{
	uint8_t want[PG];

	bench_pattern(want, PG, off);
	return !memcmp(mem + off, want, PG);
}

static uint64_t by_faults(const struct fl_stats *st)
{
	return st->pages_copied + st->pages_zeroed - st->pages_prefetched -
	       st->pages_background - st->pages_replayed;
}

struct toucher {
	const uint8_t *mem;
	uint64_t len;
	unsigned int seed;
	bool ok;
};

static void *touch_random(void *arg)
{
	struct toucher *t = arg;
	uint64_t n = t->len / PG;

	t->ok = true;
	for (uint64_t i = 0; i < n / 8; i++)
		t->ok &= page_right(t->mem, (rand_r(&t->seed) % n) * PG);
	return NULL;
}

/* The touches of one case; false if a page was wrong. */
static bool touch(enum pol_case c, uint8_t *mem, uint64_t len,
		  struct fl_engine *e, unsigned int seed)
{
	uint64_t n = len / PG;
	bool good = true;

	switch (c) {
	case C_LINEAR:
		for (uint64_t off = 0; off < len; off += PG)
			good &= page_right(mem, off);
		break;
	case C_STRIDED:
		for (uint64_t off = 0; off < len; off += 256 * KIB)
			for (uint64_t p = 0; p < 64 * KIB; p += PG)
				good &= page_right(mem, off + p);
		break;
	case C_DENSE: {
		uint64_t *o = malloc(n * sizeof(*o));

		if (!o)
			return false;
		for (uint64_t i = 0; i < n; i++)
			o[i] = i;
		for (uint64_t i = n - 1; i > 0; i--) {
			uint64_t j = rand_r(&seed) % (i + 1), t = o[i];

			o[i] = o[j];
			o[j] = t;
		}
		for (uint64_t i = 0; i < n; i++)
			good &= page_right(mem, o[i] * PG);
		free(o);
		break;
	}
	case C_QUEUED: {
		struct toucher t[4];
		pthread_t th[4];

		for (int i = 0; i < 4; i++) {
			t[i] = (struct toucher){ mem, len, seed + i, false };
			pthread_create(&th[i], NULL, touch_random, &t[i]);
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			good &= t[i].ok;
		}
		break;
	}
	case C_IDLE: {
		struct fl_stats st;

		good = page_right(mem, 0);
		/* a minute at most: the figure, not a wait for ever */
		for (int i = 0; i < 60000; i++) {
			fl_engine_stats(e, &st);
			if (st.restore_complete)
				break;
			usleep(1000);
		}
		good &= st.restore_complete && page_right(mem, len - PG);
		break;
	}
	default:
		break;
	}
	return good;
}

static int run_case(enum pol_case c, struct fl_source *src, uint64_t len,
		    unsigned int seed, struct pol_run *r)
{
	struct fl_engine_opts o = { .uffd = -1, .flags = cases[c].flags };
	uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len,
				    .page_size = PG,
				    .flags = FL_REGION_REGISTER };
	struct fl_engine *e = NULL;
	int ret;
	double t0;

	if (mem == MAP_FAILED)
		return -errno;
	madvise(mem, len, MADV_NOHUGEPAGE);
	ret = fl_engine_create(&o, &e);
	ret = ret ? ret : fl_engine_add_region(e, &d, src);
	t0 = bench_now();
	ret = ret ? ret : fl_engine_start(e, 1);
	if (!ret) {
		r->ok = touch(c, mem, len, e, seed);
		r->sec = bench_now() - t0;
		fl_engine_stop(e);
		fl_engine_stats(e, &r->st);
		if (c == C_IDLE)
			r->sec = (double)r->st.restore_ms / 1e3;
	} else {
		fprintf(stderr, "faultline bench policy: %s\n",
			fl_last_error());
	}
	fl_engine_destroy(e);
	munmap(mem, len);
	return ret;
}

static double median_of(double *v, int n)
{
	return bench_median(v, n);
}

struct pol_ctx {
	struct fl_source *src;
	uint64_t len;
	struct pol_run *res;	/* [run * C_N + case] */
};

static const char *case_label(void *ctx, int c)
{
	(void)ctx;
	return cases[c].label;
}

static int sample(void *ctx, int r, int c, struct bench_sample *s)
{
	struct pol_ctx *p = ctx;
	struct pol_run *x = &p->res[r * C_N + c];
	int ret = run_case(c, p->src, p->len, 0x9011 + (unsigned int)r, x);

	s->sec = x->sec > 0 ? x->sec : 1e-9;
	s->faults = (double)x->st.faults;
	s->copied = (double)(by_faults(&x->st) * PG);
	s->ok = x->ok;
	return ret;
}

int bench_policy(const struct bench_opts *o, struct bench_table *t)
{
	uint64_t len = o->size ? o->size & ~(256 * KIB - 1) :
		       o->quick ? 16 * MIB : 64 * MIB;
	int runs = o->runs, ret = 0;
	struct pol_run *res = calloc((size_t)runs * C_N, sizeof(*res));
	struct fl_source *src = NULL;
	struct pol_ctx pc = { .res = res };
	struct bench_loop l = {
		.bench = "policy", .runs = runs, .ncases = C_N, .ctx = &pc,
		.label = case_label, .sample = sample,
	};
	char path[64];
	int fd;

	if (!res)
		return -ENOMEM;
	if (len < 256 * KIB)
		len = 256 * KIB;
	fd = bench_memfile(len, path, false);
	if (fd < 0) {
		free(res);
		return fd;
	}
	close(fd);
	ret = fl_source_open(path, &src);
	pc.src = src;
	pc.len = len;
	/* round-robin within a round: each case sees the same machine */
	if (!ret)
		ret = bench_loop_run(&l);
	if (ret)
		goto out;

	t->title = "what the prefetch policy did, in-process, on this "
		   "machine now: faults, and pages the fillers filled";
	t->unit = "ms";
	t->bytes = len;
	t->runs = runs;
	t->ref = C_LINEAR;
	for (int c = 0; c < C_N; c++) {
		double fill[runs], per[runs];

		for (int r = 0; r < runs; r++) {
			const struct pol_run *x = &res[r * C_N + c];

			fill[r] = (double)(c == C_DENSE || c == C_IDLE ?
					   x->st.pages_background :
					   x->st.pages_prefetched);
			per[r] = x->st.faults ? (double)by_faults(&x->st) /
						(double)x->st.faults : 0;
		}
		int i = bench_loop_row(&l, t, c, cases[c].key, cases[c].label,
				       -1);

		if (i < 0) {
			ret = i;
			goto out;
		}
		if (cases[c].fact)
			bench_add_kv(t, cases[c].fact, median_of(fill, runs));
		if (c == C_DENSE)
			bench_add_kv(t, "dense_random_pages_per_fault",
				     median_of(per, runs));
		if (c == C_QUEUED)
			bench_add_kv(t, "queued4_pages_per_fault",
				     median_of(per, runs));
		if (c == C_LINEAR)
			bench_add_kv(t, "linear_pages", (double)(len / PG));
	}
	snprintf(t->notes, sizeof(t->notes),
		 "faults: the client's; MiB cp: what its faults filled (the "
		 "rest is the fillers', in the facts).\n"
		 "idle_background's time is restore_ms: engine start to "
		 "the last page filled.  Medians of %d run%s, cases "
		 "round-robin.", runs, runs > 1 ? "s" : "");
out:
	if (src)
		fl_source_put(src);
	bench_unlink(path);
	bench_loop_free(&l);
	free(res);
	return ret;
}
