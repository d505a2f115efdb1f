// SPDX-License-Identifier: Apache-2.0
/*
 * log.c - the server's log lines on stderr, and the progress bar that a
 * log line replaces on a terminal; teardown threads log too, so one lock
 * keeps each line and the bar whole.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "daemon/daemon.h"
#include "daemon/log.h"

/*
 * The progress bar is on stderr's last line (a terminal): a log line
 * clears it first.  Teardown threads log too: out_lock keeps each line and
 * the bar whole.
 */
static bool bar_on_line;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

void slog(const struct session *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&out_lock);
	if (bar_on_line) {	/* a log line replaces the progress bar */
		fputs("\r\033[K", stderr);
		bar_on_line = false;
	}
	if (s && s->sock < 0 && s->client_pid)	/* a CRIU task: its pid */
		fprintf(stderr, "faultline: session %d (task %d of the "
			"images): %s\n", s->id, (int)s->client_pid, msg);
	else if (s && s->sock < 0)	/* a forked child: pid unknown */
		fprintf(stderr, "faultline: session %d (a child of session "
			"%d): %s\n", s->id, s->parent, msg);
	else if (s)
		fprintf(stderr, "faultline: session %d (pid %d uid %u): %s\n",
			s->id, (int)s->pid, (unsigned int)s->uid, msg);
	else
		fprintf(stderr, "faultline: %s\n", msg);
	pthread_mutex_unlock(&out_lock);
}

/* Redraw the terminal's bar line (out_lock serialises it with slog). */
void put_bar(const char *line)
{
	pthread_mutex_lock(&out_lock);
	fprintf(stderr, "\r\033[K%s", line);
	bar_on_line = *line != 0;
	pthread_mutex_unlock(&out_lock);
}

bool log_bar_shown(void)
{
	return bar_on_line;
}
