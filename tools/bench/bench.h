/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.h - shared plumbing for `faultline bench`: options, timing, the
 * result table every benchmark fills, test data, checksums, the busy
 * second thread and a `faultline serve` daemon to restore through.
 *
 * A benchmark fills one struct bench_table (rows of medians, one row marked
 * as the reference measured in the same run) and bench.c prints it as a
 * table or turns it into JSON; benchmarks never print themselves.
 */
#ifndef FAULTLINE_BENCH_H
#define FAULTLINE_BENCH_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define KIB (1ULL << 10)
#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define PMD_SIZE_BYTES (2ULL << 20)

#define BENCH_MAX_ROWS 64
#define BENCH_MAX_KV 32
#define BENCH_MAX_COLS 8

struct bench_opts {
	bool json;		/* print one JSON object instead of a table */
	bool quick;		/* tiny sizes, one run (make check) */
	int runs;		/* medians of this many runs */
	bool runs_set;		/* --runs given (else a bench may pick) */
	uint64_t size;		/* bytes per benchmark (0: default) */
	const char *only;	/* comma-separated key prefixes, or NULL */
	const char *criu;	/* --criu PATH (bench criu), or NULL */
};

/* Is a row with this key selected by --only (always, without it)? */
bool bench_selected(const struct bench_opts *o, const char *key);

struct bench_row {
	const char *key;	/* JSON key, e.g. "copy_4k" */
	const char *label;	/* table label */
	double sec;		/* median seconds over the runs */
	double samples_min;	/* fastest run */
	double samples_max;	/* slowest run */
	double cited;		/* the cited figure for this row, < 0: none */
	const char *cited_note;	/* what the cited figure is, or NULL */
	bool checksum_ok;	/* every run restored the expected bytes */
	double thp_frac;	/* fraction THP-backed, < 0: not measured */
	int cmp;		/* row its ratio is to; -1: the reference */
	double ratio;		/* median of per-run ratios to cmp's runs
				 * (paired); 0: the ratio of the medians */
	double faults;		/* median faults per run, < 0: not counted */
	double copied;		/* median bytes copied per run, < 0: not */
	double col[BENCH_MAX_COLS];	/* the table's own columns; NAN: - */
};

/*
 * A column of a benchmark's own (bench_table.cols): its JSON key in each
 * row, its heading, and how a value prints (printf with the width, e.g.
 * "%*.1f").  Rows without a value (NAN) print "-" and omit the key.
 */
struct bench_col {
	const char *key;
	const char *label;
	const char *fmt;
	int width;
};

/* Extra scalar facts a benchmark reports (JSON and a line under the table). */
struct bench_kv {
	const char *key;
	double val;
};

struct bench_table {
	const char *name;	/* benchmark name */
	const char *title;	/* one line heading */
	char title_buf[224];	/* where a title made at run time lives */
	const char *guest;	/* kvm-restore: "kvm" or "process" */
	const char *cited;	/* where the cited figures come from, or NULL */
	const char *cited_unit;	/* unit of the cited column, e.g. "s/GiB" */
	const char *unit;	/* "s", "ms" or "us": how times are printed */
	bool per_gib;		/* also print time per GiB */
	int ratio_prec;		/* decimals of "vs ref"; 0: 2 */
	uint64_t bytes;		/* bytes per run */
	int runs;
	int ref;		/* index of the reference row */
	int nrows;
	struct bench_row rows[BENCH_MAX_ROWS];
	int nkv;
	struct bench_kv kv[BENCH_MAX_KV];
	int ncols;		/* columns of its own, after "vs ref" */
	struct bench_col cols[BENCH_MAX_COLS];
	char notes[3072];	/* printed under the table */
	const char *skipped;	/* why it did not run (no rows), or NULL */
};

/* ---- timing ------------------------------------------------------------- */

double bench_now(void);			/* CLOCK_MONOTONIC, seconds */
double bench_median(double *v, int n);	/* sorts v */

/* Add a row from n samples (sorted in place); returns its index. */
int bench_add_row(struct bench_table *t, const char *key, const char *label,
		  double *samples, int n, bool checksum_ok, double cited);
void bench_add_kv(struct bench_table *t, const char *key, double val);
/* Ratio of row r to the row it compares with (see bench_row.ratio). */
double bench_row_ratio(const struct bench_table *t, const struct bench_row *r);
/* Median of v[i] / ref[i], i < n (runs measured side by side). */
double bench_paired_ratio(const double *v, const double *ref, int n);

/* ---- data ---------------------------------------------------------------- */

/* Fill buf (a multiple of 4 KiB) with the non-zero pattern for offset off. */
void bench_pattern(void *buf, size_t len, uint64_t off);
/* Checksum of len bytes (xxhash). */
uint64_t bench_sum(const void *buf, size_t len);
/* Checksum the pattern for [0, len) would have, without keeping it. */
uint64_t bench_pattern_sum(uint64_t len);

/* mmap len bytes of private anonymous memory aligned to 2 MiB; NULL on error. */
void *bench_map(size_t len);
/*
 * A uffd (with UFFD_FEATURE_MOVE if move) with [dst, dst+len) registered
 * MISSING: the fd, or -errno (-EOPNOTSUPP if MOVE is wanted but missing).
 */
int bench_uffd_range(void *dst, size_t len, bool move);
void bench_unmap(void *p, size_t len);
/* Populate [p, p+len) for writing in one call (faster than touching it
 * page by page under shadow paging); 0 or -errno. */
int bench_prefault(void *p, size_t len);
/*
 * Wait until every page of [p, p+len) is resident (mincore, every 1 ms):
 * 0, -ETIMEDOUT after 120 s, or -errno.
 */
int bench_wait_resident(const void *p, uint64_t len);
/* Create an unlinked-on-exit memory file in /tmp holding the pattern for
 * [0, len), synced and read back (warm, clean page cache).  Returns the fd
 * and its path in path (a buffer of 64 bytes), or -errno.  With unlink_it,
 * the path is removed at once. */
int bench_memfile(uint64_t len, char *path, bool unlink_it);
/*
 * fs.pipe-max-size set to v (bytes).  CRIU's page server sizes its pipe
 * to 4 MiB (F_SETPIPE_SZ), which needs CAP_SYS_RESOURCE or a limit that
 * large: without, any request past 64 KiB into one of its buffers fails
 * and it hangs up.  bench_pipe_max_raise() sets at least want and
 * returns the value to put back with bench_pipe_max_put() (-1: nothing).
 */
#define BENCH_CRIU_PIPE	(4L << 20)
long bench_pipe_max_raise(long want);
void bench_pipe_max_put(long old);
/* Bytes of AnonHugePages of the mappings inside [addr, addr+len), or -errno. */
int64_t bench_thp_bytes(const void *addr, size_t len);

/* ---- a second thread of this process, busy on the other CPU ------------- */

struct bench_busy {
	pthread_t thread;
	atomic_bool stop;
	bool running;
	void *mem;
	size_t len;
	uint64_t touches;
	int cpu;
	bool pinned;
	cpu_set_t saved;	/* the caller's affinity before pinning */
};

/* Pin the caller to one CPU and start a thread on another touching its own
 * memory in a loop.  Returns 0 or -errno. */
int bench_busy_start(struct bench_busy *b);
void bench_busy_stop(struct bench_busy *b);

/* table.c: the table on stdout, or as JSON objects. */
void bench_print_table(const struct bench_table *t, FILE *f);
struct json_object;
struct json_object *bench_machine_json(void);
struct json_object *bench_table_json(const struct bench_table *t,
				     const struct bench_opts *o);
/* Seconds to unit: 1e3 for "ms", 1e6 for "us", else 1. */
double bench_unit_scale(const char *unit);
/* plot.c: `bench plot FILE DIR`. */
int bench_plot(const char *file, const char *dir);

/* ---- a `faultline serve` daemon (restore.c, populate.c, fault_latency.c) */

struct fc_client;

struct bench_daemon {
	pid_t pid;		/* 0: not running */
	char sock[108];		/* its socket, "" before the first start */
};

/*
 * Start `faultline serve --socket /tmp/flb-PID-ID.sock ARGS...` (args: NULL
 * terminated) with its output to /dev/null, and wait until it accepts
 * connections (up to 5 s: a connection of its own, so not for --once
 * daemons).  The binary is $FAULTLINE_BIN, this program if it
 * is faultline, else build/faultline.  bench names the benchmark in the
 * error message.  0 or -errno.
 */
int bench_daemon_start(struct bench_daemon *d, const char *bench, int id,
		       const char *const *args);
/* The faultline binary: $FAULTLINE_BIN, this program if it is faultline,
 * else build/faultline. */
const char *bench_faultline_exe(void);
/* SIGTERM (SIGKILL after 3 s), reap it and remove its socket. */
void bench_daemon_stop(struct bench_daemon *d);
/* fc_client_connect(), retried while the socket is not there yet (5 s). */
int bench_daemon_connect(struct fc_client *fc, const char *sock);

/* ---- cleanup.c: a bench stopped by SIGINT, SIGTERM or SIGHUP ------------ */

/*
 * Install the handler (`faultline bench` does, first): on the signal it
 * stops and reaps every child of this process (SIGTERM, SIGKILL after
 * 2 s), removes every registered path (rm -r, no link followed), puts
 * fs.pipe-max-size back, then dies of the signal.
 */
void bench_cleanup_install(void);
/* A temporary file or directory the bench made (at most 64, < 256 bytes). */
void bench_path_add(const char *path);
/* ... removed (or kept) by the bench itself: no longer the handler's. */
void bench_path_forget(const char *path);
/* unlink(path) and bench_path_forget(path). */
void bench_unlink(const char *path);
/* fs.pipe-max-size's value to put back (-1: none). */
void bench_pipe_max_note(long old);

/* ---- the benchmarks ------------------------------------------------------ */

int bench_populate(const struct bench_opts *o, struct bench_table *t);
int bench_move(const struct bench_opts *o, struct bench_table *t);
int bench_drop(const struct bench_opts *o, struct bench_table *t);
int bench_fault_latency(const struct bench_opts *o, struct bench_table *t);
int bench_restore(const struct bench_opts *o, struct bench_table *t);
int bench_remote(const struct bench_opts *o, struct bench_table *t);
int bench_policy(const struct bench_opts *o, struct bench_table *t);
int bench_criu(const struct bench_opts *o, struct bench_table *t);
int bench_reset(const struct bench_opts *o, struct bench_table *t);
int bench_storage(const struct bench_opts *o, struct bench_table *t);
/* criu.c: the process `bench criu` dumps (argv: --criu-workload DIR SIZE). */
int bench_criu_workload(int argc, char **argv);

#endif
