// SPDX-License-Identifier: Apache-2.0
/*
 * move.c - `faultline bench move` (cf. the MOVE TLB-flush batching
 * thread): UFFDIO_MOVE of populated
 * anonymous memory one 4 KiB page per ioctl versus contiguous runs (64 KiB,
 * 2 MiB of 4 KiB pages, and 2 MiB THP moved as a whole PMD), alone and with
 * a second thread of this process busy on the other CPU, so every TLB flush
 * must reach it (the shootdown IPI that thread measured at >40 % of MOVE).
 *
 * Decisions: the reference is that thread's "before": one page per ioctl with
 * nobody else running.  The source is refilled (present, exclusive pages)
 * before every run and the destination checksummed after it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "kernel/uffd.h"

static const struct {
	const char *key, *label;
	uint64_t run;		/* bytes per ioctl */
	bool thp;		/* source and destination THP */
	bool busy;		/* second thread busy on the other CPU */
	double cited;		/* time vs per-page, the cited thread */
} cases[] = {
	{ "move_4k", "MOVE 4 KiB per ioctl", 4 * KIB, false, false, 1.0 },
	{ "move_64k", "MOVE 64 KiB runs", 64 * KIB, false, false, 0.44 },
	{ "move_2m", "MOVE 2 MiB runs (4K pages)", 2 * MIB, false, false, 0.44 },
	{ "move_2m_thp", "MOVE 2 MiB THP (whole PMD)", 2 * MIB, true, false,
	  -1 },
	{ "move_4k_busy", "MOVE 4 KiB per ioctl, busy thread", 4 * KIB, false,
	  true, -1 },
	{ "move_64k_busy", "MOVE 64 KiB runs, busy thread", 64 * KIB, false,
	  true, -1 },
	{ "move_2m_busy", "MOVE 2 MiB runs, busy thread", 2 * MIB, false,
	  true, -1 },
	{ "move_2m_thp_busy", "MOVE 2 MiB THP, busy thread", 2 * MIB, true,
	  true, -1 },
};

#define NCASES (int)(sizeof(cases) / sizeof(*cases))

struct move_ctx {
	uint64_t len, want;
	double src_thp[NCASES];	/* the source's THP fraction, lowest */
};

static int run_case(void *ctx, int r, int k, struct bench_sample *out)
{
	struct move_ctx *c = ctx;
	uint64_t len = c->len;
	int adv = cases[k].thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
	uint8_t *src = bench_map(len), *dst = bench_map(len);
	struct bench_busy busy = { 0 };
	uint64_t done, run = cases[k].run;
	int uffd = -1, ret = 0;
	double t0 = 0, t1 = 0;

	if (!src || !dst) {
		ret = -ENOMEM;
		goto out;
	}
	if (madvise(src, len, adv) < 0 || madvise(dst, len, adv) < 0) {
		ret = -errno;
		goto out;
	}
	/* Present, exclusive source pages. */
	bench_prefault(src, len);
	bench_pattern(src, len, 0);
	int64_t h = bench_thp_bytes(src, len);

	double sth = h < 0 ? -1 : (double)h / (double)len;

	if (!r || c->src_thp[k] < 0 || sth < c->src_thp[k])
		c->src_thp[k] = sth;

	uffd = bench_uffd_range(dst, len, true);
	if (uffd < 0) {
		ret = uffd;
		goto out;
	}
	if (cases[k].busy) {
		ret = bench_busy_start(&busy);
		if (ret < 0)
			goto out;
	}

	t0 = bench_now();
	for (uint64_t off = 0; off < len && !ret; off += run)
		ret = uffd_move(uffd, (uintptr_t)dst + off,
				(uintptr_t)src + off, run, 0, &done);
	t1 = bench_now();

	bench_busy_stop(&busy);
	if (ret < 0)
		goto out;
	h = bench_thp_bytes(dst, len);
	out->thp = h < 0 ? -1 : (double)h / (double)len;
	out->sec = t1 - t0;
	out->ok = bench_sum(dst, len) == c->want;
out:
	bench_busy_stop(&busy);
	if (uffd >= 0)
		close(uffd);
	bench_unmap(src, len);
	bench_unmap(dst, len);
	return ret < 0 ? ret : 0;
}

static const char *case_label(void *ctx, int k)
{
	(void)ctx;
	return cases[k].label;
}

int bench_move(const struct bench_opts *o, struct bench_table *t)
{
	struct move_ctx c = {
		.len = o->size ? o->size : o->quick ? 16 * MIB : GIB,
	};
	struct bench_loop l = {
		.bench = "move", .runs = o->runs, .ncases = NCASES, .ctx = &c,
		.label = case_label, .sample = run_case,
	};
	uint64_t len = c.len;
	int ret;

	c.want = bench_pattern_sum(len);
	ret = bench_loop_run(&l);
	if (ret < 0)
		goto out;

	t->title = "UFFDIO_MOVE of populated anonymous memory: per page vs "
		   "contiguous runs, alone and with a busy thread";
	t->cited = "Lokesh Gidra, \"userfaultfd: opportunistic TLB-flush "
		   "batching for present pages in MOVE\" (kernel mailing "
		   "list, 2025): Android's GC on arm64 and x86 cuttlefish, "
		   "TLB flush >40% of MOVE; batching: GC 45 -> 20 min";
	t->cited_unit = "time vs per-page";
	t->unit = "s";
	t->per_gib = true;
	t->bytes = len;
	t->runs = l.runs;
	t->ref = 0;
	for (int k = 0; k < NCASES; k++) {
		int i = bench_loop_row(&l, t, k, cases[k].key, cases[k].label,
				       cases[k].cited);

		if (cases[k].cited > 0 && cases[k].cited < 1)
			t->rows[i].cited_note = "(GC time, x86)";
	}
	/* What the second CPU costs each ioctl: the shootdown. */
	for (int k = 0; k < NCASES; k++) {
		if (!cases[k].busy)
			continue;
		for (int a = 0; a < NCASES; a++) {
			if (cases[a].busy || cases[a].run != cases[k].run ||
			    cases[a].thp != cases[k].thp)
				continue;
			uint64_t n = len / cases[k].run;
			double d = t->rows[k].sec - t->rows[a].sec;
			static char keys[NCASES][48];

			snprintf(keys[k], sizeof(keys[k]),
				 "busy_extra_ns_per_ioctl_%s", cases[a].key + 5);
			bench_add_kv(t, keys[k], d / (double)n * 1e9);
		}
	}
	bench_add_kv(t, "thp_source_fraction", c.src_thp[3]);
	snprintf(t->notes, sizeof(t->notes),
		 "reference: one 4 KiB page per ioctl, no other thread (the "
		 "cited thread's unbatched case).\n"
		 "busy: a second thread of this process writing its own 4 MiB "
		 "on the other CPU,\nso every TLB flush of a MOVE is an IPI to "
		 "it.  THP column: destination AnonHugePages.");
out:
	bench_loop_free(&l);
	return ret;
}
