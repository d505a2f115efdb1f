// SPDX-License-Identifier: Apache-2.0
/*
 * status.c - the server's live status: each session sampled (its engine's
 * counters, progress, background restore), the server's totals, and the
 * JSON document the control socket answers (`faultline status` renders
 * it; --json prints it as it is).
 *
 * Decision: the daemon sends data, not text: one document, built with
 * json-c, is what both the human view and scripts read, so the two never
 * disagree.  Latency percentiles are the ends of power-of-two buckets
 * (fl_stats_percentile()) and are named *_le_ns, "at most", beside the
 * measured mean and max: a bucket's end is never shown as a measurement.
 */
#include <json-c/json.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/status.h"
#include "source/source.h"
#include "util/clock.h"

#define SCAN_MS	1000	/* a session's page states scanned at most so often */

void stats_add(struct fl_stats *to, const struct fl_stats *from)
{
#define ADD(name)	to->name += from->name;
	FL_STATS_COUNTERS(ADD)
#undef ADD
	for (int i = 0; i < FL_LAT_BUCKETS; i++)
		to->lat_hist[i] += from->lat_hist[i];
	to->lat_ns_sum += from->lat_ns_sum;
	if (from->lat_ns_max > to->lat_ns_max)
		to->lat_ns_max = from->lat_ns_max;
}

static const char *bg_name(const struct session *s)
{
	static const char *const names[] = {
		[FL_BACKGROUND_OFF] = "off", [FL_BACKGROUND_WAITING] = "waiting",
		[FL_BACKGROUND_RUNNING] = "running", [FL_BACKGROUND_STOPPED] = "stopped",
		[FL_BACKGROUND_DONE] = "done",
	};

	if (s->held)
		return "held";
	return names[fl_engine_background(s->engine)];
}

void sess_sample(struct session *s, uint64_t now, struct sess_sample *out)
{
	uint64_t miss, all;

	memset(out, 0, sizeof(*out));
	out->age_ms = now - s->t_start;
	if (s->state != SESS_SERVING || !s->engine)
		return;
	out->serving = fl_engine_stats(s->engine, &out->st) == 0;
	if ((!s->total || now - s->t_scan >= SCAN_MS) &&
	    fl_engine_progress(s->engine, &miss, &all) == 0) {
		s->missing = miss;
		s->total = all;
		s->t_scan = now;
	}
	out->missing = s->missing;
	out->total = s->total;
	out->background = bg_name(s);
}

void daemon_totals(struct daemon *d, struct daemon_totals *t,
		   struct fl_stats *all)
{
	uint64_t now = now_ms();

	pthread_mutex_lock(&d->lock);
	*t = d->tot;
	pthread_mutex_unlock(&d->lock);
	*all = t->ended;
	for (struct session *s = d->sessions; s; s = s->next) {
		struct sess_sample ss;

		sess_sample(s, now, &ss);
		if (ss.serving)
			stats_add(all, &ss.st);
	}
}

static void put_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static void put_str(json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

/* Measured (count, mean, max) and bucket bounds (p50, p99: "at most"). */
static json_object *latency_json(const struct fl_stats *st)
{
	json_object *o = json_object_new_object();
	uint64_t n = lat_count(st);

	put_u64(o, "count", n);
	put_u64(o, "mean_ns", n ? st->lat_ns_sum / n : 0);
	put_u64(o, "max_ns", st->lat_ns_max);
	put_u64(o, "p50_le_ns", fl_stats_percentile(st, 50));
	put_u64(o, "p99_le_ns", fl_stats_percentile(st, 99));
	return o;
}

static json_object *regions_json(const struct session *s)
{
	json_object *a = json_object_new_array();

	for (int i = 0; s->regions && i < s->nregions; i++) {
		json_object *r = json_object_new_object();

		put_u64(r, "addr", s->regions[i].addr);
		put_u64(r, "len", s->regions[i].len);
		put_u64(r, "page_size", s->regions[i].page_size ?
			s->regions[i].page_size : 4096);
		put_u64(r, "src_offset", s->regions[i].src_offset);
		json_object_array_add(a, r);
	}
	return a;
}

static json_object *counters_json(const struct fl_stats *st)
{
	json_object *o = json_object_new_object();

#define PUT(name)	put_u64(o, #name, st->name);
	FL_STATS_COUNTERS(PUT)
#undef PUT
	return o;
}

/* Who the client is: the log's words, and each part for scripts. */
static void client_json(json_object *o, const struct session *s)
{
	char who[64];

	sess_client(s, who, sizeof(who));
	put_str(o, "client", who);
	json_object_object_add(o, "pid", s->sock >= 0 ?
			       json_object_new_int(s->pid) : NULL);
	put_u64(o, "uid", s->uid);
	json_object_object_add(o, "task", s->sock < 0 && s->client_pid ?
			       json_object_new_int(s->client_pid) : NULL);
	json_object_object_add(o, "parent", s->parent ?
			       json_object_new_int(s->parent) : NULL);
}

static json_object *session_json(struct session *s, uint64_t now)
{
	json_object *o = json_object_new_object();
	struct sess_sample ss;

	sess_sample(s, now, &ss);
	json_object_object_add(o, "id", json_object_new_int(s->id));
	client_json(o, s);
	put_str(o, "state", s->state == SESS_SERVING ? "serving" :
		s->state == SESS_KEEPING ? "keeping" : "handshake");
	put_u64(o, "age_ms", ss.age_ms);
	if (!ss.serving)
		return o;
	json_object_object_add(o, "regions", regions_json(s));
	put_u64(o, "bytes", s->bytes);
	json_object_object_add(o, "bytes_restored", ss.total ?
			       json_object_new_uint64(ss.total - ss.missing) :
			       NULL);
	json_object_object_add(o, "restore_complete",
			       json_object_new_boolean(s->restored ||
						       ss.st.restore_complete));
	json_object_object_add(o, "restore_ms", s->restored ?
			       json_object_new_uint64(s->restore_ms) : NULL);
	put_str(o, "background", ss.background);
	put_u64(o, "faults", ss.st.faults);
	json_object_object_add(o, "latency", latency_json(&ss.st));
	put_u64(o, "source_errors", ss.st.source_errors);
	put_u64(o, "pages_poisoned", ss.st.pages_poisoned);
	put_str(o, "error", fl_engine_error(s->engine));
	json_object_object_add(o, "counters", counters_json(&ss.st));
	return o;
}

static json_object *source_json(struct daemon *d)
{
	json_object *o = json_object_new_object();
	uint64_t fetched, cached;

	put_str(o, "name", d->src->desc);
	put_u64(o, "size", fl_source_size(d->src));
	if (fl_source_remote_bytes(d->src, &fetched, &cached) == 0) {
		put_u64(o, "bytes_fetched", fetched);
		put_u64(o, "bytes_cached", cached);
	}
	return o;
}

static json_object *totals_json(struct daemon *d)
{
	json_object *o = json_object_new_object();
	struct daemon_totals t;
	struct fl_stats all;

	daemon_totals(d, &t, &all);
	put_u64(o, "sessions_served", t.served);
	put_u64(o, "sessions_refused", t.refused);
	put_u64(o, "clients_killed", t.killed);
	put_u64(o, "restores_complete", t.restored);
	json_object_object_add(o, "latency", latency_json(&all));
	json_object_object_add(o, "counters", counters_json(&all));
	return o;
}

char *status_json(struct daemon *d)
{
	json_object *o = json_object_new_object(), *a;
	uint64_t now = now_ms();
	char *out;

	if (!o)
		return NULL;
	put_str(o, "version", FL_VERSION);
	json_object_object_add(o, "server_pid", json_object_new_int(getpid()));
	json_object_object_add(o, "supervisor_pid", d->sup_fd >= 0 ?
			       json_object_new_int(getppid()) : NULL);
	put_u64(o, "uptime_ms", now - d->t_up);
	put_str(o, "socket", d->cfg->socket_path);
	put_str(o, "protocol", d->proto->name);
	json_object_object_add(o, "draining",
			       json_object_new_boolean(d->draining));
	json_object_object_add(o, "source", source_json(d));
	json_object_object_add(o, "totals", totals_json(d));
	a = json_object_new_array();
	for (struct session *s = d->sessions; s; s = s->next)
		json_object_array_add(a, session_json(s, now));
	json_object_object_add(o, "sessions", a);
	out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return out;
}
