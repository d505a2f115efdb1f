// SPDX-License-Identifier: Apache-2.0
/*
 * drop.c - `faultline bench drop` (cf. the arm64 KVM thread on flushing
 * unmap_stage2_range by range): discard a large populated
 * range with one madvise(MADV_DONTNEED), one per 2 MiB and one per 4 KiB
 * page, alone and with a second thread of this process busy on the other
 * CPU (so each call's TLB flush is an IPI), reported per GiB.
 *
 * Decisions: the range is populated with 4 KiB pages (THP off) so the
 * per-page cost is the PTE zap plus its flush, as in that thread; one extra
 * row drops THP-backed memory with one call.  After every run the range
 * must be non-resident (mincore) and read as zeros (sampled), so a call
 * that silently did nothing cannot look fast.
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

static const struct {
	const char *key, *label;
	uint64_t step;		/* bytes per madvise; 0: the whole range */
	bool thp;
	bool busy;
	double cited;		/* ms per GiB, the cited thread (192 GiB) */
	const char *cited_note;
} cases[] = {
	{ "drop_one", "one madvise, whole range", 0, false, false,
	  16.0 / 192, "(ranged flush, 16 ms/192 GiB)" },
	{ "drop_2m", "madvise per 2 MiB", 2 * MIB, false, false, -1, NULL },
	{ "drop_4k", "madvise per 4 KiB page", 4 * KIB, false, false,
	  1200.0 / 192, "(per-page flush, 1.2 s/192 GiB)" },
	{ "drop_one_thp", "one madvise, THP-backed range", 0, true, false, -1,
	  NULL },
	{ "drop_one_busy", "one madvise, busy thread", 0, false, true, -1,
	  NULL },
	{ "drop_2m_busy", "madvise per 2 MiB, busy thread", 2 * MIB, false,
	  true, -1, NULL },
	{ "drop_4k_busy", "madvise per 4 KiB, busy thread", 4 * KIB, false,
	  true, -1, NULL },
};

#define NCASES (int)(sizeof(cases) / sizeof(*cases))

/* Nothing resident, and every 64th page reads as zeros. */
static bool dropped(uint8_t *p, uint64_t len)
{
	size_t npages = len / 4096;
	unsigned char *vec = malloc(npages);
	bool ok = vec != NULL;

	if (ok && mincore(p, len, vec) == 0) {
		for (size_t i = 0; i < npages && ok; i++)
			ok = !(vec[i] & 1);
	} else {
		ok = false;
	}
	free(vec);
	for (uint64_t off = 0; off < len && ok; off += 64 * 4096) {
		const uint64_t *w = (const uint64_t *)(p + off);

		for (int i = 0; i < 512 && ok; i++)
			ok = !w[i];
	}
	return ok;
}

struct drop_ctx {
	uint64_t len;
};

static int run_case(void *ctx, int r, int k, struct bench_sample *out)
{
	uint64_t len = ((struct drop_ctx *)ctx)->len;
	uint8_t *p = bench_map(len);
	struct bench_busy busy = { 0 };
	uint64_t step = cases[k].step ? cases[k].step : len;
	int ret = 0;
	double t0 = 0, t1 = 0;

	(void)r;
	if (!p)
		return -ENOMEM;
	if (madvise(p, len, cases[k].thp ? MADV_HUGEPAGE :
		    MADV_NOHUGEPAGE) < 0) {
		ret = -errno;
		goto out;
	}
	bench_prefault(p, len);
	for (uint64_t off = 0; off < len; off += 4096)
		*(uint64_t *)(p + off) = off | 1;
	int64_t h = bench_thp_bytes(p, len);

	out->thp = h < 0 ? -1 : (double)h / (double)len;	/* before */
	if (cases[k].busy) {
		ret = bench_busy_start(&busy);
		if (ret < 0)
			goto out;
	}

	t0 = bench_now();
	for (uint64_t off = 0; off < len; off += step)
		if (madvise(p + off, step, MADV_DONTNEED) < 0) {
			ret = -errno;
			break;
		}
	t1 = bench_now();

	bench_busy_stop(&busy);
	out->sec = t1 - t0;
	out->ok = !ret && dropped(p, len);
out:
	bench_busy_stop(&busy);
	bench_unmap(p, len);
	return ret;
}

static const char *case_label(void *ctx, int k)
{
	(void)ctx;
	return cases[k].label;
}

int bench_drop(const struct bench_opts *o, struct bench_table *t)
{
	struct drop_ctx c = {
		.len = o->size ? o->size : o->quick ? 16 * MIB : GIB,
	};
	struct bench_loop l = {
		.bench = "drop", .runs = o->runs, .ncases = NCASES, .ctx = &c,
		.label = case_label, .sample = run_case,
	};
	int ret = bench_loop_run(&l);

	if (ret < 0)
		goto out;
	t->title = "discard a populated range with MADV_DONTNEED: one call "
		   "vs per 2 MiB vs per 4 KiB";
	t->cited = "Zhenyu Ye, \"arm64: kvm: flush tlbs by range in "
		   "unmap_stage2_range function\" (kernel mailing list, "
		   "2020): stage-2 unmap of 192 GiB on a migration rollback, "
		   "1.2 s flushed per page, 16 ms by range";
	t->cited_unit = "ms/GiB";
	t->unit = "ms";
	t->per_gib = true;
	t->bytes = c.len;
	t->runs = l.runs;
	t->ref = 0;
	for (int k = 0; k < NCASES; k++) {
		int i = bench_loop_row(&l, t, k, cases[k].key, cases[k].label,
				       cases[k].cited);

		t->rows[i].cited_note = cases[k].cited_note;
	}
	snprintf(t->notes, sizeof(t->notes),
		 "reference: one madvise over the whole range, no other "
		 "thread.  THP column: the range before the drop.\n"
		 "busy: a second thread of this process writing its own 4 MiB "
		 "on the other CPU.\nThe cited operation is a KVM stage-2 "
		 "unmap, not madvise: compare the ratios, not the values.");
out:
	bench_loop_free(&l);
	return ret;
}
