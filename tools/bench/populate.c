// SPDX-License-Identifier: Apache-2.0
/*
 * populate.c - `faultline bench populate` (cf. CRIU's copy cost,
 * "mm: introduce MADV_CLR_HUGEPAGE"): how fast can memory be
 * filled from a snapshot?  memcpy with THP on and off, UFFDIO_COPY at 4 KiB,
 * 64 KiB and 2 MiB into a MISSING-registered range (2 MiB also from two
 * threads, each copying its half), pread into THP memory
 * (one copy into huge pages: the single-copy limit and the reference), and
 * pread into a reused 2 MiB THP staging buffer followed by UFFDIO_MOVE of the
 * whole PMD (one copy, and the result is THP-backed).  Then the engine's
 * background restore with nothing touched: in-process (COPY and MOVE, 1 ms
 * quiet period) and through a `faultline serve` daemon with default flags,
 * its client Firecracker's (timed from connect until mincore() shows every
 * page resident; a client that never faults is restored at once, on one
 * filler per CPU).
 *
 * Decisions: the source is a real memory file in /tmp, written, synced and
 * read once so the page cache is warm and clean; memcpy and COPY read it
 * through a read-only mapping (no second copy).  Candidates run round-robin
 * within each run so drift on a shared machine hits them all alike, and each
 * destination is checksummed against the file after every run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "fc_client.h"
#include "source/source.h"
#include "kernel/uffd.h"
#include "util/io.h"

enum pop_case {
	P_MEMCPY_THP,
	P_MEMCPY_NOTHP,
	P_COPY_4K,
	P_COPY_64K,
	P_COPY_2M,
	P_COPY_2M_2T,
	P_PREAD_THP,
	P_PREAD_MOVE,
	P_ENGINE_COPY,
	P_ENGINE_MOVE,
	P_DAEMON_COPY,
	P_NCASES,
};

static const struct {
	const char *key, *label;
	double cited;		/* s per GiB, the cited thread */
} cases[P_NCASES] = {
	[P_MEMCPY_THP]   = { "memcpy_thp", "memcpy 4K, THP on", 0.3278 },
	[P_MEMCPY_NOTHP] = { "memcpy_nothp", "memcpy 4K, THP off", 0.5295 },
	[P_COPY_4K]      = { "copy_4k", "UFFDIO_COPY 4 KiB", 0.44 },
	[P_COPY_64K]     = { "copy_64k", "UFFDIO_COPY 64 KiB", -1 },
	[P_COPY_2M]      = { "copy_2m", "UFFDIO_COPY 2 MiB", -1 },
	[P_COPY_2M_2T]   = { "copy_2m_2threads",
			     "UFFDIO_COPY 2 MiB, two threads (halves)", -1 },
	[P_PREAD_THP]    = { "pread_thp", "pread 2M into THP memory", -1 },
	[P_PREAD_MOVE]   = { "pread_move", "pread 2M staging + UFFDIO_MOVE 2M",
			     -1 },
	[P_ENGINE_COPY]  = { "engine_copy", "engine background restore, COPY",
			     -1 },
	[P_ENGINE_MOVE]  = { "engine_move", "engine background restore, MOVE",
			     -1 },
	[P_DAEMON_COPY]  = { "daemon_copy", "daemon background restore, default",
			     -1 },
};

struct pop_ctx {
	int fd;			/* the memory file */
	char path[64];		/* its path, for the daemon */
	struct bench_daemon daemon;	/* faultline serve, default flags */
	const uint8_t *src;	/* read-only mapping of it */
	uint64_t len;
	uint64_t want;		/* checksum of the file */
	uint8_t *staging;	/* 2 MiB THP staging buffer for pread+MOVE */
};

static int make_source(struct pop_ctx *c)
{
	c->fd = bench_memfile(c->len, c->path, false);
	if (c->fd < 0)
		return c->fd;
	c->src = mmap(NULL, c->len, PROT_READ, MAP_SHARED | MAP_POPULATE,
		      c->fd, 0);
	if (c->src == MAP_FAILED) {
		c->src = NULL;
		return -errno;
	}
	c->want = bench_sum(c->src, c->len);
	return c->want == bench_pattern_sum(c->len) ? 0 : -EIO;
}

/*
 * The library engine restoring all of dst in the background (no faults):
 * what a lazily restored client gets once it goes quiet.
 */
static int engine_restore(struct pop_ctx *c, uint8_t *dst, bool move)
{
	char path[64];
	struct fl_source *src;
	struct fl_engine *e;
	struct fl_engine_opts o = {
		.uffd = -1, .chunk_size = 2 * MIB, .quiet_ms = 1,
		.flags = FL_ENGINE_NO_PREFETCH | (move ? FL_ENGINE_MOVE : 0),
	};
	struct fl_region_desc d = { .addr = (uintptr_t)dst, .len = c->len,
				    .page_size = 4096,
				    .flags = FL_REGION_REGISTER };
	struct fl_stats st;
	int ret;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", c->fd);
	ret = fl_source_open(path, &src);
	if (ret < 0)
		return ret;
	ret = fl_engine_create(&o, &e);
	if (ret == 0) {
		ret = fl_engine_add_region(e, &d, src);
		if (ret == 0)
			ret = fl_engine_start(e, 1);
		do {
			fl_engine_stats(e, &st);
			if (!st.restore_complete)
				usleep(200);
		} while (ret == 0 && !st.restore_complete);
		fl_engine_destroy(e);	/* the memory stays, now filled */
	}
	fl_source_put(src);
	return ret;
}

/* After a run: the destination's THP fraction and whether it holds the file. */
static void check_dst(const struct pop_ctx *c, const uint8_t *dst, bool *ok,
		      double *thp)
{
	int64_t h = bench_thp_bytes(dst, c->len);

	*thp = h < 0 ? -1 : (double)h / (double)c->len;
	*ok = bench_sum(dst, c->len) == c->want;
}

/*
 * A Firecracker client of the daemon touching nothing: seconds from just
 * before connect until the background restore has filled all its memory,
 * or -errno.
 */
static double daemon_restore(struct pop_ctx *c, bool *ok, double *thp)
{
	struct fc_client fc;
	double t0, t1;
	int ret;

	ret = fc_client_map(&fc, 1, &c->len, 4096);
	if (ret < 0)
		return ret;
	t0 = bench_now();
	ret = bench_daemon_connect(&fc, c->daemon.sock);
	if (ret == 0)
		ret = bench_wait_resident(fc.regions[0].addr, c->len);
	t1 = bench_now();
	if (ret == 0) {
		close(fc.sock);	/* end the session; the memory stays */
		fc.sock = -1;
		check_dst(c, fc.regions[0].addr, ok, thp);
	}
	fc_client_close(&fc);
	return ret < 0 ? ret : t1 - t0;
}

/* UFFDIO_COPY of [off, end) of the file into dst, chunk at a time. */
struct copy_job {
	int uffd;
	uint8_t *dst;
	const uint8_t *src;
	uint64_t off, end, chunk;
	int ret;
};

static void *copy_job_run(void *arg)
{
	struct copy_job *j = arg;
	uint64_t done;

	for (uint64_t off = j->off; off < j->end && !j->ret; off += j->chunk)
		j->ret = uffd_copy(j->uffd, (uintptr_t)j->dst + off,
				   j->src + off, j->chunk, 0, &done);
	return NULL;
}

/*
 * COPY all of dst in chunks: on this thread, or with halves the first
 * half on a second thread (started inside the timed part: a restore would
 * start it too).  0 or -errno.
 */
static int copy_all(struct pop_ctx *c, int uffd, uint8_t *dst,
		    uint64_t chunk, bool halves)
{
	uint64_t half = halves ? c->len / 2 / chunk * chunk : 0;
	struct copy_job j[2] = {
		{ uffd, dst, c->src, 0, half, chunk, 0 },
		{ uffd, dst, c->src, half, c->len, chunk, 0 },
	};
	pthread_t th;
	int ret = halves ? -pthread_create(&th, NULL, copy_job_run, &j[0]) : 0;

	if (ret < 0)
		return ret;
	copy_job_run(&j[1]);
	if (halves)
		pthread_join(th, NULL);
	return j[0].ret < 0 ? j[0].ret : j[1].ret;
}

/* One run of one case: returns seconds (> 0) or -errno. */
static double run_case(struct pop_ctx *c, enum pop_case k, bool *ok,
		       double *thp)
{
	uint64_t len = c->len, chunk = 0, done;
	uint8_t *dst;
	int uffd = -1, ret = 0;
	double t0 = 0, t1 = 0;

	if (k == P_DAEMON_COPY)
		return daemon_restore(c, ok, thp);
	dst = bench_map(len);
	if (!dst)
		return -ENOMEM;
	switch (k) {
	case P_MEMCPY_NOTHP:
		ret = madvise(dst, len, MADV_NOHUGEPAGE);
		break;
	case P_MEMCPY_THP:
	case P_PREAD_THP:
	case P_PREAD_MOVE:
	case P_ENGINE_MOVE:
		ret = madvise(dst, len, MADV_HUGEPAGE);
		break;
	default:
		break;
	}
	if (ret < 0) {
		ret = -errno;
		goto out;
	}
	if (k == P_COPY_4K || k == P_COPY_64K || k == P_COPY_2M ||
	    k == P_COPY_2M_2T || k == P_PREAD_MOVE) {
		uffd = bench_uffd_range(dst, len, k == P_PREAD_MOVE);
		if (uffd < 0) {
			ret = uffd;
			goto out;
		}
	}
	chunk = k == P_COPY_4K ? 4 * KIB : k == P_COPY_64K ? 64 * KIB :
		2 * MIB;

	t0 = bench_now();
	switch (k) {
	case P_MEMCPY_THP:
	case P_MEMCPY_NOTHP:
		for (uint64_t off = 0; off < len; off += 4096)
			memcpy(dst + off, c->src + off, 4096);
		break;
	case P_COPY_4K:
	case P_COPY_64K:
	case P_COPY_2M:
	case P_COPY_2M_2T:
		ret = copy_all(c, uffd, dst, chunk, k == P_COPY_2M_2T);
		break;
	case P_PREAD_THP:
		for (uint64_t off = 0; off < len && !ret; off += 2 * MIB)
			ret = pread_full(c->fd, dst + off, 2 * MIB, off);
		break;
	case P_PREAD_MOVE:
		for (uint64_t off = 0; off < len && !ret; off += 2 * MIB) {
			ret = pread_full(c->fd, c->staging, 2 * MIB, off);
			if (!ret)
				ret = uffd_move(uffd, (uintptr_t)dst + off,
						(uintptr_t)c->staging, 2 * MIB,
						0, &done);
		}
		break;
	case P_ENGINE_COPY:
	case P_ENGINE_MOVE:
		ret = engine_restore(c, dst, k == P_ENGINE_MOVE);
		break;
	default:
		ret = -EINVAL;
	}
	t1 = bench_now();
	if (ret >= 0)
		check_dst(c, dst, ok, thp);
out:
	if (uffd >= 0)
		close(uffd);
	bench_unmap(dst, len);
	return ret < 0 ? ret : t1 - t0;
}

static int sample(void *ctx, int r, int k, struct bench_sample *out)
{
	double s = run_case(ctx, k, &out->ok, &out->thp);

	(void)r;
	out->sec = s;
	return s < 0 ? (int)s : 0;
}

static const char *case_label(void *ctx, int k)
{
	(void)ctx;
	return cases[k].label;
}

int bench_populate(const struct bench_opts *o, struct bench_table *t)
{
	struct pop_ctx c = { .fd = -1 };
	const char *args[] = { "--mem-file", c.path, NULL };
	struct bench_loop l = {
		.bench = "populate", .runs = o->runs, .ncases = P_NCASES,
		.ctx = &c, .label = case_label, .sample = sample,
	};
	double sec[P_NCASES], thp_move = -1;
	int ret;

	c.len = o->size ? o->size : o->quick ? 16 * MIB : GIB;
	ret = make_source(&c);
	if (ret < 0) {
		fprintf(stderr, "faultline bench populate: cannot create the "
			"memory file in /tmp: %s\n", strerror(-ret));
		goto out;
	}
	ret = bench_daemon_start(&c.daemon, "populate", 0, args);
	if (ret < 0)
		goto out;
	c.staging = bench_map(2 * MIB);
	if (!c.staging ||
	    madvise(c.staging, 2 * MIB, MADV_HUGEPAGE) < 0 ||
	    madvise(c.staging, 2 * MIB, MADV_DONTFORK) < 0) {
		ret = -errno;
		goto out;
	}

	ret = bench_loop_run(&l);
	if (ret < 0)
		goto out;

	t->title = "fill memory from a warm memory file (UFFDIO_COPY vs "
		   "memcpy vs pread+MOVE)";
	t->cited = "Mike Rapoport, \"mm: introduce MADV_CLR_HUGEPAGE\" "
		   "(kernel mailing list, 2017): CRIU's lazy-restore copy, "
		   "1 GiB, 2x Xeon E5-2680, mean of 100 runs";
	t->cited_unit = "s/GiB";
	t->unit = "s";
	t->per_gib = true;
	t->bytes = c.len;
	t->runs = l.runs;
	for (int k = 0; k < P_NCASES; k++) {
		int i = bench_loop_row(&l, t, k, cases[k].key, cases[k].label,
				       cases[k].cited);

		if (k == P_PREAD_MOVE)
			thp_move = t->rows[i].thp_frac;
		if (k == P_PREAD_THP)
			t->ref = i;
		sec[k] = t->rows[i].sec;
	}
	bench_add_kv(t, "pread_move_thp_fraction", thp_move);
	/* Speed-ups over one thread COPYing 2 MiB at a time: > 1 is faster. */
	bench_add_kv(t, "daemon_vs_copy_2m",
		     sec[P_COPY_2M] / sec[P_DAEMON_COPY]);
	bench_add_kv(t, "copy_2m_2threads_speedup",
		     sec[P_COPY_2M] / sec[P_COPY_2M_2T]);
	snprintf(t->notes, sizeof(t->notes),
		 "reference: pread into THP memory (one copy, the limit).  "
		 "THP = AnonHugePages/size of the destination (smaps).\n"
		 "pread+MOVE destination THP-backed: %.0f%% "
		 "(UFFDIO_COPY can never give anonymous THP).\n"
		 "two threads: each COPYs 2 MiB at a time over its half.\n"
		 "daemon: `faultline serve` with default flags, a Firecracker "
		 "client touching nothing, timed from connect until mincore() "
		 "shows every page resident.\n"
		 "daemon_vs_copy_2m, copy_2m_2threads_speedup: the one-thread "
		 "UFFDIO_COPY 2 MiB time over theirs (> 1: faster).",
		 thp_move * 100);
	ret = 0;
out:
	bench_daemon_stop(&c.daemon);
	if (c.path[0])
		bench_unlink(c.path);
	if (c.staging)
		bench_unmap(c.staging, 2 * MIB);
	if (c.src)
		munmap((void *)c.src, c.len);
	if (c.fd >= 0)
		close(c.fd);
	bench_loop_free(&l);
	return ret;
}
