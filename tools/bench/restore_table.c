// SPDX-License-Identifier: Apache-2.0
/*
 * restore_table.c - `faultline bench kvm-restore`'s table: a row per case
 * with its median of per-round ratios to its workload's prepopulated row,
 * the facts per workload (the default daemon against the best fixed
 * chunk and the File backend, a trace as recorded against sorted) and
 * the notes on what the guest is here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "format/trace.h"
#include "hugetlb.h"
#include "kernel/uffd.h"
#include "kvm.h"
#include "vmm.h"
#include "restore_bench.h"

/* ---- the table ------------------------------------------------------------ */

/* Case i's median time, ms. */
static double median_ms(const struct rs_results *res, int i)
{
	return bench_loop_median(&res->l, i) * 1e3;
}

/* Case i's median bytes copied. */
static double median_copied(const struct rs_results *res, int i)
{
	return bench_loop_field(&res->l, i,
				offsetof(struct bench_sample, copied));
}

/* Case i's time over case j's: the median of per-round ratios. */
static double paired(const struct rs_results *res, int i, int j)
{
	return bench_loop_paired(&res->l, i, j);
}

static int find_case(const char *key)
{
	for (int i = 0; i < NCASES; i++)
		if (!strcmp(rs_cases[i].key, key))
			return i;
	return -1;
}

/* What a row is to its group's facts. */
enum rs_role { ROLE_OTHER, ROLE_DEFAULT, ROLE_CHUNK, ROLE_FILE, ROLE_FLOOR,
	       ROLE_TRACE, ROLE_SORTED, ROLE_N };

static enum rs_role role_of(const struct rs_case *k)
{
	const struct rs_daemon_def *d = &rs_daemons[k->daemon];

	if (k->kind == R_FILE)
		return ROLE_FILE;
	if (k->kind == R_FLOOR)
		return ROLE_FLOOR;
	if (k->kind != R_DAEMON)
		return ROLE_OTHER;
	if (d->trace)
		return d->sorted ? ROLE_SORTED : ROLE_TRACE;
	return d->chunk ? ROLE_CHUNK : ROLE_DEFAULT;
}

/* Add the fact "GROUP_what" (its key lives as long as the program). */
static void group_fact(struct bench_table *t, enum rs_group g,
		       const char *what, double val)
{
	static char keys[BENCH_MAX_KV][48];

	if (t->nkv >= BENCH_MAX_KV)
		return;
	snprintf(keys[t->nkv], sizeof(keys[0]), "%s_%s", rs_groups[g].name, what);
	bench_add_kv(t, keys[t->nkv], val);
}

/*
 * A workload's facts, for the rows that were run: the default daemon
 * against the best fixed chunk (the one with the lowest median) and the
 * File backend, and the trace replayed as recorded against the trace
 * sorted by offset and the copy floor.
 */
static void add_group_facts(struct bench_table *t,
			    const struct rs_results *res, enum rs_group g)
{
	int at[ROLE_N];

	for (int r = 0; r < ROLE_N; r++)
		at[r] = -1;
	for (int i = 0; i < NCASES; i++) {
		enum rs_role r = role_of(&rs_cases[i]);

		if (!res->sel[i] || rs_cases[i].g != g)
			continue;
		if (r != ROLE_CHUNK || at[r] < 0 ||
		    median_ms(res, i) <
		    median_ms(res, at[r]))
			at[r] = i;
	}
	if (at[ROLE_CHUNK] >= 0)
		group_fact(t, g, "best_chunk_ms",
			   median_ms(res, at[ROLE_CHUNK]));
	if (at[ROLE_DEFAULT] >= 0 && at[ROLE_CHUNK] >= 0)
		group_fact(t, g, "default_vs_best_chunk",
			   paired(res, at[ROLE_DEFAULT], at[ROLE_CHUNK]));
	if (at[ROLE_DEFAULT] >= 0 && at[ROLE_FILE] >= 0)
		group_fact(t, g, "default_vs_file",
			   paired(res, at[ROLE_DEFAULT], at[ROLE_FILE]));
	if (at[ROLE_TRACE] >= 0 && at[ROLE_SORTED] >= 0) {
		group_fact(t, g, "trace_vs_sorted",
			   paired(res, at[ROLE_TRACE], at[ROLE_SORTED]));
		group_fact(t, g, "trace_copied_vs_sorted",
			   median_copied(res, at[ROLE_TRACE]) /
			   median_copied(res, at[ROLE_SORTED]));
	}
	if (at[ROLE_TRACE] >= 0 && at[ROLE_FLOOR] >= 0)
		group_fact(t, g, "trace_vs_copy_floor",
			   paired(res, at[ROLE_TRACE], at[ROLE_FLOOR]));
}

/*
 * What the machine's KVM costs the guest, measured: the compute rows add
 * 8 LCG steps (4 instructions each) per touch to the linear walk.  Only
 * for a KVM guest: a process guest runs them natively, a few ns against
 * run-to-run noise of milliseconds (-13 "ns" came out once).
 */
static void add_facts(struct bench_table *t, const struct rs_results *res,
		      bool kvm)
{
	int lin = find_case("linear_prepopulated");
	int comp = find_case("compute_prepopulated");
	int sp = find_case("sparse_daemon"), tr = find_case("sparse_daemon_trace");
	double pages = (double)res->touched[G_LINEAR] / 4096;

	if (kvm && res->sel[lin] && res->sel[comp])
		bench_add_kv(t, "guest_ns_per_instruction",
			     (median_ms(res, comp) -
			      median_ms(res, lin)) * 1e6 /
			     (pages * 8 * 4));
	if (res->sel[sp])
		bench_add_kv(t, "sparse_daemon_copied_per_touched",
			     median_copied(res, sp) /
			     (double)res->touched[G_SPARSE]);
	if (res->sel[tr])
		bench_add_kv(t, "sparse_trace_copied_per_touched",
			     median_copied(res, tr) /
			     (double)res->touched[G_SPARSE]);
	for (int g = 0; g < G_N; g++)
		add_group_facts(t, res, g);
}

void restore_table_rows(struct bench_table *t, const struct rs_results *res,
			bool kvm)
{
	int refrow = 0, refcase = 0;

	for (int i = 0; i < NCASES; i++) {
		const struct rs_case *k = &rs_cases[i];
		double ratio;
		int row;

		if (!res->sel[i])
			continue;
		if (k->kind == R_PREPOP)
			refcase = i;
		ratio = paired(res, i, refcase);
		row = bench_loop_row(&res->l, t, i, k->key, k->label,
				     k->cited);
		if (row < 0)
			break;
		t->rows[row].cited_note = k->cited_note;
		if (k->kind == R_PREPOP)
			refrow = row;
		t->rows[row].cmp = row == refrow ? -1 : refrow;
		t->rows[row].ratio = ratio;
	}
	add_facts(t, res, kvm);
}

void restore_table_head(struct bench_table *t, const struct rs_ctx *c,
			int runs)
{
	char kvm[96], sparse[64] = "";
	size_t n;

	kvm_describe(kvm, sizeof(kvm));
	if (c->big.len)
		snprintf(sparse, sizeof(sparse), "  Sparse: 1 MiB every 16 MiB "
			 "of %llu MiB.", (unsigned long long)(c->big.len >> 20));
	snprintf(t->title_buf, sizeof(t->title_buf), "a %s guest touches its "
		 "memory after a restore (kvm-restore; KVM here: %s)",
		 c->guest == VMM_GUEST_KVM ? "KVM" : "process", kvm);
	t->title = t->title_buf;
	t->guest = c->guest == VMM_GUEST_KVM ? "kvm" : "process";
	t->cited = "Marco Marangoni on \"KVM: x86/mmu: Add automatic "
		   "prefaulting/prefetching for TDP MMU faults\" (kernel "
		   "mailing list): a UFFD handler serving chunks to a "
		   "restored nested KVM guest, 128 MiB linear, medians of 60";
	t->cited_unit = "ms";
	t->unit = "ms";
	t->bytes = c->small.len;
	t->runs = runs;
	t->ref = 0;
	if (c->guest == VMM_GUEST_KVM)
		snprintf(t->notes, sizeof(t->notes),
			 "Guest: faultline vmm's 32-bit KVM guest reading one "
			 "word per 4 KiB page (%s), 1 vCPU unless the row says "
			 "4.  Each row vs its workload's prepopulated row: the "
			 "median of per-round ratios.  guest_ns_per_instruction "
			 "is this KVM's cost of a guest instruction (measured "
			 "from the compute rows): where it is large, the guest "
			 "is emulated, and page faults weigh less.%s", kvm,
			 sparse);
	else
		snprintf(t->notes, sizeof(t->notes),
			 "No VM can run here (KVM: %s): the guest is threads of "
			 "a child process making the same touches, so a first "
			 "touch costs what this machine's own page faults cost "
			 "(prepopulated against the copy floor says how much; "
			 "under PVM a shadow fault, ~5 us a page).  Where it is "
			 "small, a restore is bound by copying: compare rows "
			 "with the copy floor (one thread COPYing just the "
			 "touched bytes: what the copy alone costs).  The File "
			 "backend rows (and X_default_vs_file) are not "
			 "comparable here: a process reading a cached file "
			 "maps the page cache, in large folios, and copies "
			 "nothing.  Rows vs their workload's prepopulated row "
			 "(median of per-round ratios).", kvm);
	n = strlen(t->notes);
	snprintf(t->notes + n, sizeof(t->notes) - n,
		 "  X_default_vs_best_chunk: the default daemon over the "
		 "faster of `serve --chunk 64K` and `--chunk 2M` (none for "
		 "hugetlb: its pages are filled whole, 2 MiB), "
		 "X_default_vs_file over the File backend "
		 "(medians of per-round ratios).  Trace rows replay what "
		 "`serve --record` wrote before the rounds, in first-touch "
		 "order or sorted by offset: X_trace_vs_sorted (time) and "
		 "X_trace_copied_vs_sorted (bytes copied when the guest "
		 "halted).");
}

