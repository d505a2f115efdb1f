/* SPDX-License-Identifier: Apache-2.0 */
/*
 * criu_util.h - helpers for the tests that run the real CRIU: its binary
 * (tests/criu/get-criu.sh), criu runs with CRIU_FAULT=130, and the
 * processes they dump: the test program itself re-executed as a workload
 * that fills its memory with a pattern, waits, and after a restore checks
 * every byte and writes what it found to a file.
 *
 * Decisions: CRIU_FAULT=130 on every run (hardware breakpoints never fire
 * in these VMs, and dump and restore hang without it); the test is a child
 * subreaper, so that the tasks criu kills or restores are its own to reap
 * and a pid is known free before the next dump; nothing waits for a time
 * to pass, only for a file or a pid (a bound only stops a hang).
 */
#ifndef FAULTLINE_CRIU_UTIL_H
#define FAULTLINE_CRIU_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CU_WAIT_S	180	/* at most, for anything (a hang, not a time) */

/*
 * The workload: argv "--criu-workload DIR KIND MIB THREADS".  Kinds:
 * "plain" (THREADS threads, each checks its slice), "thp" (the same,
 * its memory 2 MiB aligned and MADV_HUGEPAGE), "tree" (the process
 * and THREADS - 1 children, two if THREADS < 2, each its own memory and
 * role 0, 1, ...), "fork" (after the restore the
 * process forks and the child checks the inherited memory too), "madv"
 * (MADV_DONTNEED, mremap and munmap on the memory after the restore).
 * Each process writes DIR/ready.ROLE ("pid address length") once filled, waits for
 * DIR/go, then writes DIR/result.ROLE: "ok" or what was wrong.
 * Returns only if argv is not a workload's.
 */
void cu_workload_main(int argc, char **argv);

/* The workload's word at offset off of its memory (seed: its role). */
uint64_t cu_pattern(uint64_t off, uint64_t seed);

/* The criu binary (built once by tests/criu/get-criu.sh), or NULL. */
const char *cu_criu(void);

/*
 * What the test needs, or it ends here (skip_all_missing(): a skip that
 * names it, a failure when FL_REQUIRE_ALL=1): root, criu and, with
 * faultline, build/faultline.
 */
void cu_require(bool faultline);

/* Run criu with args (NULL-terminated), its output to log: exit status. */
int cu_run_criu(const char *log, const char *const *args);

/* Start the workload in its own session: its pid (a child of ours). */
pid_t cu_start(const char *dir, const char *kind, int mib, int threads);

/* Wait for dir/name to exist: true, or false after CU_WAIT_S. */
bool cu_wait_file(const char *dir, const char *name);

/* Read dir/name into buf (at most len - 1 bytes): bytes read, or -1. */
int cu_read_file(const char *dir, const char *name, char *buf, int len);

/* Reap children until pid is gone: true, or false after CU_WAIT_S. */
bool cu_reap(pid_t pid);

/* The wait status of pid if this process reaped it, else -1. */
int cu_status(pid_t pid);

/*
 * The peak RSS in KiB of a child this process reaped (wait4's ru_maxrss:
 * the larger of its own and of the children it reaped), else -1.
 */
long cu_maxrss_kb(pid_t pid);

/* A new private directory under /tmp (name: its prefix). */
char *cu_tmpdir(const char *name);

/* rm -rf dir (best effort). */
void cu_rmdir(const char *dir);

/* The faultline binary: $FAULTLINE_BIN, or build/faultline. */
const char *cu_faultline_bin(void);

/*
 * faultline lazy-pages -D img and the options in args (NULL-terminated,
 * at most 11), its log in dir/lazy-pages.log: its pid once listening
 * (its --status-fd said so), or -1.
 */
pid_t cu_lazy_pages(const char *dir, const char *img, const char *const *args);

/*
 * The daemon's exit status once it is done (or -1, killed after the
 * bound): reaped here, or already by cu_reap()'s wait (cu_status()).
 */
int cu_daemon_exit(pid_t pid);

/* Each line of dir/name (its first 4 KiB) as a TAP comment. */
void cu_show_log(const char *dir, const char *name);

#endif
