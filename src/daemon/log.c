// SPDX-License-Identifier: Apache-2.0
/*
 * log.c - the daemon's log lines on stderr, each with its level, and the
 * progress bar that a log line replaces on a terminal; teardown threads
 * log too, so one lock keeps each line and the bar whole.
 *
 * Decision: under systemd (stderr is the stream $JOURNAL_STREAM names)
 * a line starts with journald's priority prefix ("<4>"), as sd-daemon(3)
 * describes, and journald adds the time; anywhere else with an RFC 3339
 * timestamp and the level's name, so that a log file alone says when.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "faultline.h"

#include "daemon/daemon.h"
#include "daemon/log.h"

static int max_level = LOG_INFO;

/*
 * The progress bar is on stderr's last line (a terminal): a log line
 * clears it first.  Teardown threads log too: out_lock keeps each line and
 * the bar whole.
 */
static bool bar_on_line;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {
	[LOG_ERR] = "error", [LOG_WARNING] = "warning",
	[LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

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

/*
 * Is stderr the stream $JOURNAL_STREAM ("DEV:INO") names?  Asked at each
 * line: stderr may have been reopened (lazy-pages -o FILE) since.
 */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	       fstat(2, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

void log_init(int level)
{
	max_level = level;
}

int log_level_parse(const char *name)
{
	for (int i = 0; i < (int)(sizeof(level_names) / sizeof(*level_names));
	     i++)
		if (level_names[i] && !strcmp(name, level_names[i]))
			return i;
	return -EINVAL;
}

/* "2026-12-03T20:19:50.123+00:00": now, local time, in buf. */
static void rfc3339(char *buf, size_t n)
{
	struct timespec ts;
	struct tm tm;
	char zone[8];

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(zone, sizeof(zone), "%z", &tm);	/* +0000 */
	size_t len = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);

	snprintf(buf + len, n - len, ".%03ld%.3s:%s", ts.tv_nsec / 1000000,
		 zone, zone + 3);
}

/* The line's start: journald's priority, or the time and level. */
static void line_head(int prio, char *buf, size_t n)
{
	char ts[40];

	if (stderr_is_journal()) {
		snprintf(buf, n, "<%d>", prio);
		return;
	}
	rfc3339(ts, sizeof(ts));
	snprintf(buf, n, "%s %s ", ts, level_names[prio]);
}

/* A whole line, out_lock held: the bar it replaces cleared first. */
static void put_line(int prio, const char *who, const char *msg)
{
	char head[64];

	line_head(prio, head, sizeof(head));
	if (bar_on_line) {
		fputs("\r\033[K", stderr);
		bar_on_line = false;
	}
	fprintf(stderr, "%sfaultline: %s%s\n", head, who, msg);
}

void log_line(int prio, const char *tag, const char *fmt, ...)
{
	char who[64], msg[2048];
	va_list ap;

	if (prio > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(who, sizeof(who), "%s: ", tag);
	pthread_mutex_lock(&out_lock);
	put_line(prio, who, msg);
	pthread_mutex_unlock(&out_lock);
}

/* "session N (...): " for s, or "" */
static void session_name(const struct session *s, char *buf, size_t n)
{
	char client[64];

	buf[0] = 0;
	if (!s)
		return;
	sess_client(s, client, sizeof(client));
	snprintf(buf, n, "session %d (%s): ", s->id, client);
}

void slog_at(int prio, const struct session *s, const char *fmt, ...)
{
	char msg[2048], who[96];
	va_list ap;

	if (prio > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	session_name(s, who, sizeof(who));
	pthread_mutex_lock(&out_lock);
	put_line(prio, who, msg);
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
