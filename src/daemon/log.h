/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - one line per event, prefixed with the session (log.c).
 */
#ifndef FAULTLINE_DAEMON_LOG_H
#define FAULTLINE_DAEMON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct session;
struct fl_stats;

/* "faultline: session N (pid P uid U): ..." (s may be NULL). */
__attribute__((format(printf, 2, 3)))
void slog(const struct session *s, const char *fmt, ...);
/*
 * Who a session's client is, as every log line says it: "pid P uid U",
 * "task N of the images" (a CRIU task: no pid of ours), or "a child of
 * session N" (forked, pid unknown).
 */
void sess_client(const struct session *s, char *buf, size_t len);
/* ns with three significant digits and a unit: "812 ns", "1.05 ms". */
void fmt_ns(char *buf, size_t len, uint64_t ns);
/*
 * Fault latency in words: "p50 ≤ 1.05 ms, p99 ≤ 4.19 ms (bucket bounds),
 * mean 310 µs, max 3.20 ms" (percentiles are the ends of power-of-two
 * buckets, mean and max measured), or "no faults".
 */
void fmt_latency(char *buf, size_t len, const struct fl_stats *st);
/* Faults the latency histogram holds (every fault served). */
uint64_t lat_count(const struct fl_stats *st);

/* Redraw the terminal's bar line ("" clears it). */
void put_bar(const char *line);
/* Is the bar on stderr's last line? */
bool log_bar_shown(void);

#endif
