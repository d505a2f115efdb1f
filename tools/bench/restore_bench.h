/* SPDX-License-Identifier: Apache-2.0 */
/*
 * restore_bench.h - what the files of `faultline bench kvm-restore`
 * share: the workload groups, the daemons, the cases and what a round
 * measured (restore.c runs them, restore_table.c makes the table).
 */
#ifndef FAULTLINE_BENCH_RESTORE_H
#define FAULTLINE_BENCH_RESTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "run.h"
#include "vmm.h"

/* Workload groups: each has its prepopulated reference first. */
enum rs_group { G_LINEAR, G_RANDOM, G_HUGE, G_VCPUS, G_COMPUTE, G_SPARSE,
		G_SPARSE_RND, G_N };

struct rs_group_def {
	const char *name;	/* its keys' prefix, and its facts' */
	const char *workload;
	bool huge;
	unsigned int vcpus;
	bool big;		/* the sparse memory file */
};

/* Working-set traces, each recorded once by a workload of its group. */
enum rs_trace { T_NONE, T_RANDOM, T_SPARSE, T_SPARSE_RND, T_N };

/*
 * The daemons, each one `faultline serve` for all rounds but the recording
 * ones, which serve one run before the rounds to write their trace.
 */
enum rs_daemon { D_NONE, D_DEFAULT, D_64K, D_2M, D_SPARSE, D_SPARSE_64K,
		 D_SPARSE_2M, D_RANDOM_TRACE, D_RANDOM_SORTED,
		 D_RANDOM_RECORD, D_TRACE, D_SORTED, D_RECORD, D_SRND_TRACE,
		 D_SRND_SORTED, D_SRND_RECORD, D_N };

struct rs_daemon_def {
	bool big;		/* serves the sparse memory file */
	const char *chunk;	/* --chunk, or NULL: the default */
	enum rs_trace trace;	/* --prefetch (--record if record) */
	bool sorted;		/* --prefetch the trace sorted by offset */
	bool record;
};

enum rs_kind { R_PREPOP, R_BESIDE, R_FLOOR, R_FILE, R_INPROC, R_DAEMON };

struct rs_case {
	const char *key, *label;
	enum rs_group g;
	enum rs_kind kind;
	uint64_t chunk;		/* R_INPROC: engine chunk, 0: default */
	unsigned int flags;	/* R_INPROC: FL_ENGINE_* */
	enum rs_daemon daemon;	/* R_DAEMON */
	double cited;		/* ms, the cited thread; < 0: none */
	const char *cited_note;
};

#define NCASES	53	/* rs_cases[] */

struct rs_mem {			/* one memory file */
	char path[64];
	int fd;
	uint64_t len;
};

struct rs_ctx {
	struct rs_mem small, big;
	enum vmm_guest guest;	/* the same for every row */
	struct bench_daemon daemon[D_N];
	char stats[D_N][64];
	char trace[T_N][64];	/* as recorded */
	char sorted[T_N][64];	/* its copy sorted by offset */
};

/* What a child reports through its pipe. */
struct rs_result {
	int err;
	bool ok;
	double ms;
	double faults, copied;
};

/* What the benchmark measured: the loop's samples, seconds. */
struct rs_results {
	struct rs_ctx *c;
	struct bench_loop l;
	bool sel[NCASES];
	uint64_t touched[G_N];	/* bytes a pass touches */
};

extern const struct rs_group_def rs_groups[G_N];
extern const struct rs_daemon_def rs_daemons[D_N];
extern const struct rs_case rs_cases[];

/* restore_table.c: the title, the cited source and the notes. */
void restore_table_head(struct bench_table *t, const struct rs_ctx *c,
			int runs);
/* restore_table.c: a row per selected case (its paired ratio to its
 * workload's prepopulated row) and the facts. */
void restore_table_rows(struct bench_table *t, const struct rs_results *res,
			bool kvm);

#endif
