// SPDX-License-Identifier: Apache-2.0
/*
 * metrics.c - the server's metrics in Prometheus' text exposition format
 * (version 0.0.4): totals since the server started, then the same
 * counters per live session, labelled with its id and client pid.
 *
 * Decisions: a total and its per-session series are two families
 * (faultline_faults_total, faultline_session_faults_total), so that sum()
 * over one never counts a fault twice, and a session's end never makes a
 * total go down (its counters are added to the server's, status.c).  The
 * fault latency histogram keeps the engine's own buckets: bucket i holds
 * [2^i, 2^(i+1)) ns of whole nanoseconds, i.e. at most 2^(i+1) - 1 ns, so
 * le is that bound in seconds, exact, not a bucket re-cut.  A server taken
 * over starts its counters at zero: Prometheus' rate() takes that as a
 * counter reset.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/status.h"
#include "source/source.h"
#include "util/clock.h"

/* Every engine counter, with its HELP; the assert keeps it complete. */
static const struct counter {
	const char *name;
	size_t off;
	const char *help;
} counters[] = {
#define C(n, h)	{ #n, offsetof(struct fl_stats, n), h }
	C(faults, "Page-fault messages read."),
	C(events, "Non-cooperative events applied (remove, unmap, remap)."),
	C(pages_copied, "Pages filled with data from the snapshot."),
	C(pages_zeroed, "Pages served as zero pages."),
	C(pages_poisoned, "Pages the source could not produce, poisoned."),
	C(pages_prefetched, "Pages filled ahead of sequential faults."),
	C(pages_background, "Pages filled by background restore."),
	C(pages_replayed, "Pages filled from a working-set trace."),
	C(pages_moved, "Pages moved instead of copied."),
	C(bytes_copied, "Bytes copied into clients."),
	C(eexist, "Fills that found the page already present."),
	C(eagain, "Fills retried after pending events."),
	C(source_errors, "Reads the source failed."),
	C(pages_gone, "Pages not mapped in the client when filled."),
#undef C
};
/*
 * The counters a daemon's sessions never move, left out: write_tracking,
 * wp_faults and the six of reset to the snapshot, which is in-process
 * only (include/faultline.h).
 */
#define NOT_SERVED	8
#define ONE(n)	+ 1
_Static_assert(sizeof(counters) / sizeof(counters[0]) + NOT_SERVED ==
	       0 FL_STATS_COUNTERS(ONE), "a counter without its metric");
#undef ONE

static uint64_t counter_of(const struct fl_stats *st, const struct counter *c)
{
	return *(const uint64_t *)((const char *)st + c->off);
}

static void family(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample: faultline_NAME{LABELS} V ("" labels: none). */
static void sample(FILE *f, const char *name, const char *labels, uint64_t v)
{
	fprintf(f, "%s%s%s%s %llu\n", name, *labels ? "{" : "", labels,
		*labels ? "}" : "", (unsigned long long)v);
}

/* A family of one sample without labels. */
static void scalar(FILE *f, const char *name, const char *type,
		   const char *help, uint64_t v)
{
	family(f, name, type, help);
	sample(f, name, "", v);
}

/* A session's labels: session, pid (when the host knows it), task. */
static void sess_labels(const struct session *s, char *buf, size_t len)
{
	int n = snprintf(buf, len, "session=\"%d\"", s->id);

	if (s->sock >= 0)
		n += snprintf(buf + n, len - (size_t)n, ",pid=\"%d\"", (int)s->pid);
	if (s->sock < 0 && s->client_pid)
		snprintf(buf + n, len - (size_t)n, ",task=\"%d\"",
			 (int)s->client_pid);
}

/* The samples of one histogram: cumulative buckets, +Inf, sum, count. */
static void histogram(FILE *f, const char *name, const char *labels,
		      const struct fl_stats *st)
{
	uint64_t cum = 0;
	const char *sep = *labels ? "," : "";

	for (int i = 0; i < FL_LAT_BUCKETS; i++) {
		cum += st->lat_hist[i];
		fprintf(f, "%s_bucket{%s%sle=\"%.9f\"} %llu\n", name, labels,
			sep, (double)((2ull << i) - 1) * 1e-9,
			(unsigned long long)cum);
	}
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
		(unsigned long long)cum);
	fprintf(f, "%s_sum%s%s%s %.9f\n", name, *labels ? "{" : "", labels,
		*labels ? "}" : "", (double)st->lat_ns_sum * 1e-9);
	fprintf(f, "%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels,
		*labels ? "}" : "", (unsigned long long)cum);
}

static void server_metrics(FILE *f, struct daemon *d)
{
	struct daemon_totals t;
	struct fl_stats all;
	uint64_t fetched, cached;
	char name[96];

	daemon_totals(d, &t, &all);
	scalar(f, "faultline_sessions_active", "gauge",
	       "Sessions alive (handshake or serving).", (uint64_t)d->nsessions);
	scalar(f, "faultline_sessions_served_total", "counter",
	       "Sessions that began serving.", t.served);
	scalar(f, "faultline_sessions_refused_total", "counter",
	       "Clients refused (uid, limits, bad handshake, timeout).",
	       t.refused);
	scalar(f, "faultline_clients_killed_total", "counter",
	       "Clients killed: refused after sending a uffd, or a page failed.",
	       t.killed);
	scalar(f, "faultline_restores_complete_total", "counter",
	       "Sessions whose restore completed.", t.restored);
	family(f, "faultline_server_uptime_seconds", "gauge",
	       "Seconds since this server process started (a restart resets counters).");
	fprintf(f, "faultline_server_uptime_seconds %.3f\n",
		(double)(now_ms() - d->t_up) / 1000.0);
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		snprintf(name, sizeof(name), "faultline_%s_total",
			 counters[i].name);
		scalar(f, name, "counter", counters[i].help,
		       counter_of(&all, &counters[i]));
	}
	if (fl_source_remote_bytes(d->src, &fetched, &cached) == 0) {
		scalar(f, "faultline_source_bytes_fetched_total", "counter",
		       "Bytes the remote source fetched from its origin.",
		       fetched);
		scalar(f, "faultline_source_bytes_cached_total", "counter",
		       "Bytes the remote source read from its local cache.",
		       cached);
	}
	family(f, "faultline_fault_latency_seconds", "histogram",
	       "Fault latency, read to wake, every session of this server.");
	histogram(f, "faultline_fault_latency_seconds", "", &all);
}

/* The serving sessions, sampled once for every family below. */
struct live {
	struct session *s;
	struct sess_sample ss;
	char labels[96];
};

static void session_metrics(FILE *f, struct live *l, int n)
{
	char name[96];

	family(f, "faultline_session_bytes", "gauge",
	       "Bytes of memory the session serves.");
	for (int i = 0; i < n; i++)
		sample(f, "faultline_session_bytes", l[i].labels, l[i].s->bytes);
	family(f, "faultline_session_bytes_restored", "gauge",
	       "Bytes of the session's memory in place (scanned at most once a second).");
	for (int i = 0; i < n; i++)
		sample(f, "faultline_session_bytes_restored", l[i].labels,
		       l[i].ss.total - l[i].ss.missing);
	family(f, "faultline_session_restore_complete", "gauge",
	       "1 once the session's restore is complete.");
	for (int i = 0; i < n; i++)
		sample(f, "faultline_session_restore_complete", l[i].labels,
		       l[i].s->restored || l[i].ss.st.restore_complete);
	for (size_t c = 0; c < sizeof(counters) / sizeof(counters[0]); c++) {
		snprintf(name, sizeof(name), "faultline_session_%s_total",
			 counters[c].name);
		family(f, name, "counter", counters[c].help);
		for (int i = 0; i < n; i++)
			sample(f, name, l[i].labels,
			       counter_of(&l[i].ss.st, &counters[c]));
	}
	family(f, "faultline_session_fault_latency_seconds", "histogram",
	       "Fault latency, read to wake, of one session.");
	for (int i = 0; i < n; i++)
		histogram(f, "faultline_session_fault_latency_seconds",
			  l[i].labels, &l[i].ss.st);
}

char *metrics_text(struct daemon *d, size_t *len)
{
	struct live *l = calloc((size_t)d->nsessions + 1, sizeof(*l));
	uint64_t now = now_ms();
	char *buf = NULL;
	FILE *f;
	int n = 0;

	if (!l)
		return NULL;
	for (struct session *s = d->sessions; s && n < d->nsessions; s = s->next) {
		sess_sample(s, now, &l[n].ss);
		if (!l[n].ss.serving)
			continue;
		l[n].s = s;
		sess_labels(s, l[n].labels, sizeof(l[n].labels));
		n++;
	}
	f = open_memstream(&buf, len);
	if (f) {
		server_metrics(f, d);
		session_metrics(f, l, n);
		if (fclose(f) != 0) {
			free(buf);
			buf = NULL;
		}
	}
	free(l);
	return buf;
}
