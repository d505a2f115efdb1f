// SPDX-License-Identifier: Apache-2.0
/*
 * log.c - the server's log lines on stderr, and the progress bar that a
 * log line replaces on a terminal; teardown threads log too, so one lock
 * keeps each line and the bar whole.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "faultline.h"

#include "daemon/daemon.h"
#include "daemon/log.h"

/*
 * The progress bar is on stderr's last line (a terminal): a log line
 * clears it first.  Teardown threads log too: out_lock keeps each line and
 * the bar whole.
 */
static bool bar_on_line;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

void sess_client(const struct session *s, char *buf, size_t len)
{
	if (s->sock < 0 && s->client_pid)	/* a CRIU task: its pid */
		snprintf(buf, len, "task %d of the images", (int)s->client_pid);
	else if (s->sock < 0)		/* a forked child: pid unknown */
		snprintf(buf, len, "a child of session %d", s->parent);
	else
		snprintf(buf, len, "pid %d uid %u", (int)s->pid,
			 (unsigned int)s->uid);
}

void fmt_ns(char *buf, size_t len, uint64_t ns)
{
	static const char *const unit[] = { "ns", "µs", "ms", "s" };
	double v = (double)ns;
	int u = 0;

	while (v >= 1000.0 && u < 3) {
		v /= 1000.0;
		u++;
	}
	if (u == 0 || v >= 100.0)
		snprintf(buf, len, "%.0f %s", v, unit[u]);
	else if (v >= 10.0)
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	else
		snprintf(buf, len, "%.2f %s", v, unit[u]);
}

uint64_t lat_count(const struct fl_stats *st)
{
	uint64_t n = 0;

	for (int i = 0; i < FL_LAT_BUCKETS; i++)
		n += st->lat_hist[i];
	return n;
}

void fmt_latency(char *buf, size_t len, const struct fl_stats *st)
{
	char p50[24], p99[24], mean[24], max[24];
	uint64_t n = lat_count(st);

	if (!n) {
		snprintf(buf, len, "no faults");
		return;
	}
	fmt_ns(p50, sizeof(p50), fl_stats_percentile(st, 50));
	fmt_ns(p99, sizeof(p99), fl_stats_percentile(st, 99));
	fmt_ns(mean, sizeof(mean), st->lat_ns_sum / n);
	fmt_ns(max, sizeof(max), st->lat_ns_max);
	snprintf(buf, len, "p50 ≤ %s, p99 ≤ %s (bucket bounds), mean %s, "
		 "max %s", p50, p99, mean, max);
}

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
	if (s) {
		char who[64];

		sess_client(s, who, sizeof(who));
		fprintf(stderr, "faultline: session %d (%s): %s\n", s->id, who,
			msg);
	} else {
		fprintf(stderr, "faultline: %s\n", msg);
	}
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
