/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - one line per event, with its level, prefixed with the session
 * (log.c): journald's priority prefix under systemd, an RFC 3339
 * timestamp and the level's name elsewhere.
 */
#ifndef FAULTLINE_DAEMON_LOG_H
#define FAULTLINE_DAEMON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h>	/* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */

struct session;
struct fl_stats;

/*
 * Lines above level (LOG_ERR .. LOG_DEBUG) are dropped (LOG_INFO until
 * called); journald's prefixes while stderr is $JOURNAL_STREAM's stream.
 */
void log_init(int level);
/* "error", "warning", "info", "debug": its LOG_*, or -EINVAL. */
int log_level_parse(const char *name);

/* "... faultline: session N (pid P uid U): ..." (s may be NULL). */
__attribute__((format(printf, 3, 4)))
void slog_at(int prio, const struct session *s, const char *fmt, ...);
/* A line after "faultline: " and a tag ("send", "supervisor"). */
__attribute__((format(printf, 3, 4)))
void log_line(int prio, const char *tag, const char *fmt, ...);

#define slog(s, ...)	slog_at(LOG_INFO, s, __VA_ARGS__)
#define swarn(s, ...)	slog_at(LOG_WARNING, s, __VA_ARGS__)
#define serr(s, ...)	slog_at(LOG_ERR, s, __VA_ARGS__)
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
