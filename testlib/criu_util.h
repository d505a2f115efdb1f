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
 * and two children, each its own memory), "fork" (after the restore the
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

/* A new private directory under /tmp (name: its prefix). */
char *cu_tmpdir(const char *name);

/* rm -rf dir (best effort). */
void cu_rmdir(const char *dir);

#endif
