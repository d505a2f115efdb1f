/* SPDX-License-Identifier: Apache-2.0 */
/*
 * criu_bench.h - what the files of `faultline bench criu` share: the
 * candidates, the metrics, what one restore and one run measured
 * (criu.c runs them, criu_workload.c is the process dumped and restored,
 * criu_table.c turns the runs into the table).
 */
#ifndef FAULTLINE_BENCH_CRIU_H
#define FAULTLINE_BENCH_CRIU_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench.h"

#define BOUND_S		120.0	/* at most, for anything: a hang, not a time */
#define PAGE		4096

/* ---- the candidates and what a restore measured -------------------------- */

enum kind { EAGER, CRIU_LAZY, FL_LAZY };

struct cand {
	const char *key;
	const char *label;
	enum kind kind;
	bool verbose;		/* criu -v4: its log has a line per fault */
	bool ps;		/* the pages from `criu page-server` */
};

#define NCAND		6	/* criu_cands[] */
#define REF		1	/* criu lazy-pages: every ratio is to it */
#define FAULTLINE	3

enum { M_RUN, M_PASS, M_ALL, NMETRIC };

struct metric {
	const char *key;
	const char *label;
	double target;		/* faultline's ratio to criu lazy-pages */
};

/* One restore: seconds from the fork of `criu restore`. */
struct sample {
	double t[NMETRIC];	/* runs, first pass done, every page in */
	double cmd;		/* `criu restore` returned */
	double listen;		/* the daemon's start to listening; 0: none */
	double faults;		/* served by the daemon; < 0: not counted */
	double copied;		/* bytes it copied; < 0: not counted */
	double p50_us, p99_us;	/* faultline's read-to-wake bounds; < 0 */
	double restore_ms;	/* faultline's own: uffd in to last page */
	bool ok;		/* the process read every byte right */
};

struct run {
	double dump;		/* criu dump's time */
	struct sample s[NCAND];
};

/* What every restore of one bench shares. */
struct crun {
	char dir[64];		/* /tmp/flb-criu-XXXXXX: the files, logs */
	char img[96];		/* dir/img: this run's dump */
	char criu[PATH_MAX];
	uint64_t size;
	pid_t pid;		/* the process: dumped, then restored */
	int run;		/* the run under way */
	struct run *runs;	/* what each run measured */
};

extern const struct cand criu_cands[NCAND];
extern const struct metric criu_metrics[NMETRIC];

/* criu_workload.c: write dir/name whole (a temporary file renamed). */
int criu_put_file(const char *dir, const char *name, const char *text);
/* criu_table.c: the rows (metric x candidate), facts and notes. */
void criu_fill_table(struct bench_table *t, const struct run *runs, int n,
		     uint64_t size);

#endif
