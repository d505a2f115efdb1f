// SPDX-License-Identifier: Apache-2.0
/*
 * stats.c - engine counters and the fault-latency histogram (fault read to
 * wake, log2 buckets of nanoseconds), exported as a struct or JSON.
 *
 * Decision: the struct is copied by the reader's size (fixed fields
 * first, counters appended last), so counters can be added without
 * breaking a reader built against another header.
 */
#include <errno.h>
#include <stddef.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core.h"
#include "engine/stats.h"
#include "util/error.h"

void stats_record_latency(struct engine_stats *st, uint64_t ns)
{
	int b = ns ? 63 - __builtin_clzll(ns) : 0;

	if (b >= FL_LAT_BUCKETS)
		b = FL_LAT_BUCKETS - 1;
	atomic_fetch_add_explicit(&st->lat_hist[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->lat_ns_sum, ns, memory_order_relaxed);
	uint64_t max = atomic_load_explicit(&st->lat_ns_max,
					    memory_order_relaxed);

	while (ns > max &&
	       !atomic_compare_exchange_weak(&st->lat_ns_max, &max, ns))
		;
}

/* The fixed fields, which every reader's struct has. */
#define STATS_FIXED	offsetof(struct fl_stats, faults)

/* The library's own fl_stats into o. */
static void stats_fill(const struct fl_engine *e, struct fl_stats *o)
{
	const struct engine_stats *s = &e->st;

	memset(o, 0, sizeof(*o));
#define COPY_COUNTER(name)	o->name = atomic_load(&s->name);
	FL_STATS_COUNTERS(COPY_COUNTER)
#undef COPY_COUNTER
	o->restore_complete = atomic_load(&e->restored);
	uint64_t done_ns = atomic_load(&e->restored_ns);

	/* Restored before the threads started (fl_engine_process): 0. */
	if (o->restore_complete && e->start_ns)
		o->restore_ms = done_ns > e->start_ns ?
				(done_ns - e->start_ns) / 1000000 : 0;
	o->lat_ns_sum = atomic_load(&s->lat_ns_sum);
	o->lat_ns_max = atomic_load(&s->lat_ns_max);
	for (int i = 0; i < FL_LAT_BUCKETS; i++)
		o->lat_hist[i] = atomic_load(&s->lat_hist[i]);
}

/*
 * A reader's struct may be shorter (an older header: the counters it
 * knows) or longer (a newer one: counters this library lacks read 0).
 */
int fl_engine_stats_sized(const struct fl_engine *e, struct fl_stats *out,
			  size_t size)
{
	struct fl_stats mine;

	if (!e || !out || size < STATS_FIXED)
		return fl_err(-EINVAL, "stats: size %zu: at least %zu bytes",
			      size, (size_t)STATS_FIXED);
	stats_fill(e, &mine);
	memset(out, 0, size);
	memcpy(out, &mine, size < sizeof(mine) ? size : sizeof(mine));
	return 0;
}

uint64_t fl_stats_percentile(const struct fl_stats *s, double pct)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i < FL_LAT_BUCKETS; i++)
		total += s->lat_hist[i];
	if (!total)
		return 0;
	uint64_t want = (uint64_t)(pct / 100.0 * (double)total + 0.5);

	if (want < 1)
		want = 1;
	for (int i = 0; i < FL_LAT_BUCKETS; i++) {
		seen += s->lat_hist[i];
		/* a bound, not a sample: never above the largest seen */
		if (seen >= want)
			return (2ull << i) - 1 < s->lat_ns_max ?
			       (2ull << i) - 1 : s->lat_ns_max;
	}
	return s->lat_ns_max;
}

static void put_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

char *fl_stats_json_sized(const struct fl_stats *in, size_t size)
{
	struct fl_stats copy = { 0 };
	const struct fl_stats *s = &copy;

	if (!in || size < STATS_FIXED)
		return NULL;
	/* Counters past the reader's struct were not there: 0. */
	memcpy(&copy, in, size < sizeof(copy) ? size : sizeof(copy));
	json_object *o = json_object_new_object();
	json_object *h = json_object_new_array();
	uint64_t served = 0;

	for (int i = 0; i < FL_LAT_BUCKETS; i++) {
		json_object_array_add(h, json_object_new_uint64(s->lat_hist[i]));
		served += s->lat_hist[i];
	}
#define PUT_COUNTER(name)	put_u64(o, #name, s->name);
	FL_STATS_COUNTERS(PUT_COUNTER)
#undef PUT_COUNTER
	put_u64(o, "restore_complete", s->restore_complete);
	put_u64(o, "restore_ms", s->restore_ms);
	put_u64(o, "latency_ns_mean", served ? s->lat_ns_sum / served : 0);
	/*
	 * Percentiles are the ends of power-of-two buckets, bounds and not
	 * measurements: named so ("_le"); the old names stay, same values,
	 * for readers written before.
	 */
	put_u64(o, "latency_ns_p50_le", fl_stats_percentile(s, 50));
	put_u64(o, "latency_ns_p99_le", fl_stats_percentile(s, 99));
	put_u64(o, "latency_ns_p50", fl_stats_percentile(s, 50));
	put_u64(o, "latency_ns_p99", fl_stats_percentile(s, 99));
	put_u64(o, "latency_ns_max", s->lat_ns_max);
	json_object_object_add(o, "latency_log2_ns_hist", h);

	char *out = strdup(json_object_to_json_string_ext(o,
						JSON_C_TO_STRING_PLAIN));

	json_object_put(o);
	return out;
}
