/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serve_util.h - helpers for the `faultline serve` tests: start the daemon
 * as a child with its stderr captured to a file, wait until it listens,
 * stop it; memory files with a pattern that names every word's offset;
 * Firecracker-style clients (src/fc_client.h) that verify what they were
 * served; hugetlb reservation that is always undone.
 *
 * Decisions: the pattern word at file offset o is o ^ seed, so a page served
 * from the wrong place says where it came from.  Readiness is read from
 * /proc/net/unix (a listening socket at our path), never by connecting:
 * a probe connection would be a session, and would end a --once daemon.
 * Clients run in forked children with an alarm, so a daemon that never
 * answers a fault fails a test instead of hanging prove.
 */
#ifndef FAULTLINE_SERVE_UTIL_H
#define FAULTLINE_SERVE_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "fc_client.h"
#include "hugetlb.h"

#define SU_CHILD_TIMEOUT	30	/* seconds a client child may take */

uint64_t su_now_ms(void);

void su_sleep_ms(unsigned int ms);

/* ---- the daemon----------------------------------------------------------- */

struct serve {
	pid_t pid;
	char dir[64];		/* private temp dir: socket and logs */
	char sock[108];		/* socket path (may be preset) */
	char log[128];		/* the daemon's stderr */
	int listen_fd;		/* >= 0: socket activation, as fd 3 */
	int status;		/* wait status once reaped */
	int reaped;
	unsigned long nofile;	/* > 0: the daemon's RLIMIT_NOFILE (both) */
};

void serve_init(struct serve *s);

const char *serve_bin(void);

/* Is a socket listening at path?  (/proc/net/unix: flags __SO_ACCEPTCON) */
int su_listening(const char *path);

/*
 * Wait until the supervisor (s->pid) holds the server's listener (it gets
 * a copy after the server starts listening: a count of its descriptors
 * taken before then is one short).  0, -ETIMEDOUT, or -ENOENT if nothing
 * listens at s->sock.
 */
int serve_wait_supervisor_listens(struct serve *s, unsigned int timeout_ms);

/* Whether the text file at path has a line containing what. */
bool su_file_has(const char *path, const char *what);

/* CPU ticks (user + system) process pid has used; 0 if unknown. */
unsigned long long su_cpu_ticks(pid_t pid);

/*
 * The server process: `faultline serve` runs it as its only child (the
 * supervisor, src/supervise.c, is s->pid).  0 if there is none right now.
 */
pid_t serve_server_pid(const struct serve *s);

/* Signal the server process (never pid 0: our own process group). */
int serve_kill_server(const struct serve *s, int sig);

/* Wait up to timeout_ms for a server other than old to run; its pid or 0. */
pid_t serve_server_wait(const struct serve *s, pid_t old,
				      unsigned int timeout_ms);

int serve_alive(struct serve *s);

int su_names_pid(const char *line, const char *tag);

/*
 * Print the daemon's stderr from byte offset from on as TAP comments; only
 * the lines naming pid when pid > 0, and at most 40 lines.
 */
void serve_log_dump_pid(struct serve *s, long from, int pid);

void serve_log_dump(struct serve *s, long from);

/* Print a whole text file as TAP comments (at most 40 lines). */
void serve_log_dump_file(const char *path);

/* Size of a file in bytes, or -1. */
long su_file_size(const char *path);

long serve_log_mark(struct serve *s);

/*
 * Start `faultline serve --socket SOCK --mem-file MEM EXTRA...` (no --socket
 * with socket activation) and wait until it listens.  0 or -errno.
 */
int serve_start(struct serve *s, const char *mem,
			      const char *const *extra);

/* Wait up to timeout_ms for the daemon to exit; its wait status or -1. */
int serve_wait(struct serve *s, unsigned int timeout_ms);

/* SIGTERM, then SIGKILL after 5 s; returns the wait status. */
int serve_stop(struct serve *s);

/* Remove the temp dir and what is in it (keep it if KEEP_LOGS is set). */
void serve_cleanup(struct serve *s);

int su_strcasestr(const char *hay, const char *needle);

/* Does line name "(pid P)" or "(pid P ...)"?  tag is "(pid P". */
int su_names_pid(const char *line, const char *tag);

/*
 * Wait up to timeout_ms for a daemon stderr line after byte offset from that
 * holds "faultline: ", names "(pid PID)" when pid > 0, and contains
 * one of the keywords (case-insensitive; NULL-terminated list, or none).
 * Copies the line to out.  1 if found, 0 if not.
 */
int serve_log_find(struct serve *s, long from, int pid,
				 const char *const *kw, unsigned int timeout_ms,
				 char *out, size_t outlen);

/* ---- /proc probes--------------------------------------------------------- */

/* Number of open fds of pid; with match, only those whose link has it. */
int proc_fds(pid_t pid, const char *match);

/* Wait up to timeout_ms for the daemon to close sock: 1 if it did. */
int su_closed_by_daemon(int sock, unsigned int timeout_ms);

/* Print every descriptor of pid and what it is (a leak's diagnosis). */
void proc_fds_dump(pid_t pid);

/* A "Key:   N kB" value from /proc/PID/status, in KiB; -1 if absent. */
long proc_status_kb(pid_t pid, const char *key);

/* Poll until proc_fds(pid, match) <= want; the last count seen. */
int proc_fds_settle(pid_t pid, const char *match, int want,
				  unsigned int timeout_ms);

/* ---- memory files--------------------------------------------------------- */

void su_catch_fatal(void);

struct mem_file {
	char path[128];
	int fd;
	uint64_t size;
	uint64_t seed;
	const uint8_t *map;	/* the whole file, read-only: expected */
};

uint64_t su_word(uint64_t off, uint64_t seed);

/* Create a size-byte file in /tmp where each 8-byte word is offset ^ seed. */
int mem_file_create(struct mem_file *m, uint64_t size,
				  uint64_t seed);

void mem_file_destroy(struct mem_file *m);

/* ---- verification--------------------------------------------------------- */

enum su_order { SU_FORWARD, SU_REVERSE, SU_STRIDE };

/* Report where a wrong page at region offset pos came from. */
void su_report_bad(const struct mem_file *m, const void *addr,
				 uint64_t file_off, uint64_t pos,
				 const char *what);

/*
 * Compare len bytes at addr with the file from file_off, one page at a time
 * in the given order (the first touch of each page is the compare).
 * 0 if equal; else -1 and *bad = the first wrong region offset.
 */
int su_verify(const struct mem_file *m, const void *addr,
			    uint64_t file_off, uint64_t len, uint64_t page,
			    enum su_order order, uint64_t *bad);

/* Verify every region of a connected client; 0 or -1 (with a diag). */
int su_verify_client(const struct mem_file *m,
				   const struct fc_client *c,
				   enum su_order order, const char *what);

int su_is_zero(const void *addr, uint64_t len);

/* ---- client children------------------------------------------------------ */

/* Fork; the child runs fn(arg) with an alarm and exits with its result. */
pid_t su_spawn(int (*fn)(void *), void *arg);

#define SU_TIMEOUT	(-1000)

/*
 * Reap a child, killing it after timeout_ms: its exit code, -signal
 * (-SIGALRM means it hung on a fault and its alarm fired), or SU_TIMEOUT.
 */
int su_reap(pid_t pid, unsigned int timeout_ms);

/* What a verifying client child does: one or many sessions. */
struct su_client_args {
	const char *sock;
	const struct mem_file *mem;
	int nregions;
	uint64_t sizes[FC_MAX_REGIONS];
	uint64_t offsets[FC_MAX_REGIONS];	/* all 0: consecutive */
	uint64_t page_size;
	enum su_order order;
	int stop_fd;		/* loop until readable (or -1: one round) */
	int result_fd;		/* write "rounds fails\n" here (or -1) */
};

int su_has_offsets(const struct su_client_args *a);

/* One session: map, connect, verify every byte, close.  0, or 1 on error. */
int su_client_round(const struct su_client_args *a,
				  const char *what);

int su_client_main(void *arg);

/* A background client that keeps verifying sessions until stopped. */
struct su_verifier {
	pid_t pid;
	int stop_w;
	int result_r;
};

int su_verifier_start(struct su_verifier *v,
				    struct su_client_args *a);

/* Stop it; 0 if every round verified (rounds/fails reported). */
int su_verifier_stop(struct su_verifier *v,
				   unsigned long *rounds,
				   unsigned long *fails);

/* ---- hugetlb pool--------------------------------------------------------- */

#define SU_NR_HUGE	"/proc/sys/vm/nr_hugepages"
#define SU_FREE_HUGE	\
	"/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

void su_catch_fatal(void);


#endif
