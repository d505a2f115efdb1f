/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - one line per event, with its level, prefixed with the session
 * (log.c): journald's priority prefix under systemd, an RFC 3339
 * timestamp and the level's name elsewhere.
 */
#ifndef FAULTLINE_DAEMON_LOG_H
#define FAULTLINE_DAEMON_LOG_H

#include <stdbool.h>
#include <syslog.h>	/* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */

struct session;

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

/* Redraw the terminal's bar line ("" clears it). */
void put_bar(const char *line);
/* Is the bar on stderr's last line? */
bool log_bar_shown(void);

#endif
