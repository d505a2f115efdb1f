/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - one line per event, prefixed with the session (log.c).
 */
#ifndef FAULTLINE_DAEMON_LOG_H
#define FAULTLINE_DAEMON_LOG_H

#include <stdbool.h>

struct session;

/* "faultline: session N (pid P uid U): ..." (s may be NULL). */
__attribute__((format(printf, 2, 3)))
void slog(const struct session *s, const char *fmt, ...);
/* Redraw the terminal's bar line ("" clears it). */
void put_bar(const char *line);
/* Is the bar on stderr's last line? */
bool log_bar_shown(void);

#endif
