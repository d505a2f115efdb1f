// SPDX-License-Identifier: Apache-2.0
/*
 * criu_table.c - `faultline bench criu`'s table: a row per metric and
 * candidate (its paired ratio to criu lazy-pages in the same run), the
 * cited figures of an earlier run, the facts and the targets.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
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
#include "cli.h"
#include "faultline.h"
#include "http_util.h"
#include "criu_bench.h"
/* ---- the table ----------------------------------------------------------- */

/* An earlier run's figures: a 256 MiB process, CRIU 4.2, a 2-vCPU machine
 * without /dev/kvm (the cited column). */
static const struct {
	int m, k;
	double sec;
	const char *note;
} cited_figs[] = {
	{ M_RUN, 0, 0.76, "to 0.93" },
	{ M_ALL, 0, 0.76, "to 0.93 (restore end)" },
	{ M_RUN, REF, 0.06, "to 0.07" },
	{ M_PASS, REF, 0.47, NULL },
	{ M_ALL, REF, 0.20, "(2,017-2,370 faults)" },
};

static char keys[NMETRIC * NCAND][32], labels[NMETRIC * NCAND][48];

static void set_cited(struct bench_row *row, int m, int k)
{
	for (size_t i = 0; i < sizeof(cited_figs) / sizeof(*cited_figs); i++)
		if (cited_figs[i].m == m && cited_figs[i].k == k) {
			row->cited = cited_figs[i].sec;
			row->cited_note = cited_figs[i].note;
		}
}

/* Median of one sample field over the runs where it was measured. */
static double median_of(const struct run *runs, int n, int k,
			size_t off)
{
	double v[n > 0 ? n : 1];
	int got = 0;

	for (int r = 0; r < n; r++) {
		double x = *(const double *)((const char *)&runs[r].s[k] + off);

		if (x >= 0)
			v[got++] = x;
	}
	return got ? bench_median(v, got) : -1;
}

/* Row of metric m for candidate k, its ratio to criu lazy-pages' row. */
static int add_row(struct bench_table *t, const struct run *runs, int n,
		   int m, int k, int ref_row)
{
	double v[n], ref[n];
	bool ok = true;
	int i = m * NCAND + k, row;

	for (int r = 0; r < n; r++) {
		v[r] = runs[r].s[k].t[m];
		ref[r] = runs[r].s[REF].t[m];
		ok &= runs[r].s[k].ok;
	}
	snprintf(keys[i], sizeof(keys[i]), "%s_%s", criu_metrics[m].key,
		 criu_cands[k].key);
	snprintf(labels[i], sizeof(labels[i]), "%s: %s", criu_metrics[m].label,
		 criu_cands[k].label);
	double ratio = bench_paired_ratio(v, ref, n);

	row = bench_add_row(t, keys[i], labels[i], v, n, ok, -1);
	if (row < 0)
		return row;
	t->rows[row].cmp = ref_row;
	t->rows[row].ratio = ratio;
	set_cited(&t->rows[row], m, k);
	if (m == M_ALL) {
		t->rows[row].faults = median_of(runs, n, k,
					offsetof(struct sample, faults));
		t->rows[row].copied = median_of(runs, n, k,
					offsetof(struct sample, copied));
	}
	return row;
}

static void add_facts(struct bench_table *t, const struct run *runs, int n)
{
	static char fk[NCAND][2][32];
	double d[n > 0 ? n : 1];

	for (int r = 0; r < n; r++)
		d[r] = runs[r].dump;
	bench_add_kv(t, "dump_s", bench_median(d, n));
	for (int k = 0; k < NCAND; k++) {
		snprintf(fk[k][0], sizeof(fk[k][0]), "%s_restore_cmd_s",
			 criu_cands[k].key);
		bench_add_kv(t, fk[k][0], median_of(runs, n, k,
			     offsetof(struct sample, cmd)));
		if (criu_cands[k].kind == EAGER)
			continue;
		snprintf(fk[k][1], sizeof(fk[k][1]), "%s_listen_s",
			 criu_cands[k].key);
		bench_add_kv(t, fk[k][1], median_of(runs, n, k,
			     offsetof(struct sample, listen)));
	}
	bench_add_kv(t, "faultline_fault_p50_le_us", median_of(runs, n,
		     FAULTLINE, offsetof(struct sample, p50_us)));
	bench_add_kv(t, "faultline_fault_p99_le_us", median_of(runs, n,
		     FAULTLINE, offsetof(struct sample, p99_us)));
	bench_add_kv(t, "faultline_restore_ms", median_of(runs, n,
		     FAULTLINE, offsetof(struct sample, restore_ms)));
}

/* The targets (faultline against criu lazy-pages) and how they were met. */
static void add_notes(struct bench_table *t)
{
	size_t len = 0, cap = sizeof(t->notes);

	len += snprintf(t->notes + len, cap - len, "targets, faultline "
			"lazy-pages / criu lazy-pages (median of paired "
			"ratios):");
	for (int m = 0; m < NMETRIC && len < cap; m++) {
		double r = t->rows[m * NCAND + FAULTLINE].ratio;

		len += snprintf(t->notes + len, cap - len, "%s %s <= %.2fx: "
				"%.2fx, %s", m ? ";" : "", criu_metrics[m].label,
				criu_metrics[m].target, r,
				r <= criu_metrics[m].target ? "met" : "NOT met");
	}
	if (len < cap)
		snprintf(t->notes + len, cap - len, "\n"
			 "clock from the fork of `criu restore` (the daemons "
			 "listen before it); runs: the restored process's "
			 "first clock reading (its go file made before the "
			 "restore); first pass: it has read every byte "
			 "(XXH3 checked); all in: the lazy daemon exited, "
			 "which it does once every page is in (eager: = "
			 "runs).\nfaults: what each daemon says it read: "
			 "faultline's --stats-json, criu's \"#PF at\" lines "
			 "at -v4 (none at its default level: -); fault "
			 "latency (read to wake, log2 bounds) from faultline "
			 "only, criu lazy-pages does not measure it.");
}

void criu_fill_table(struct bench_table *t, const struct run *runs, int n,
		       uint64_t size)
{
	t->title = "a process dumped by CRIU, restored eagerly, through "
		   "criu lazy-pages and faultline lazy-pages";
	t->cited = "an earlier run of CRIU 4.2 with its own 256 MiB "
		   "workload on a 2-vCPU machine without /dev/kvm "
		   "(2026-12-03), not this bench's workload";
	t->cited_unit = "s, 256 MiB";
	t->unit = "s";
	t->bytes = size;
	t->runs = n;
	for (int m = 0; m < NMETRIC; m++)
		for (int k = 0; k < NCAND; k++)
			add_row(t, runs, n, m, k, m * NCAND + REF);
	t->ref = M_ALL * NCAND + REF;
	add_facts(t, runs, n);
	add_notes(t);
}

