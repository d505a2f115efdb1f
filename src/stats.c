/*
 * stats.c - engine counters and the fault-latency histogram (fault read to
 * wake, log2 buckets of nanoseconds), exported as a struct or JSON.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

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

int fl_engine_stats(const struct fl_engine *e, struct fl_stats *o)
{
	const struct engine_stats *s = &e->st;

	memset(o, 0, sizeof(*o));
	o->faults = atomic_load(&s->faults);
	o->events = atomic_load(&s->events);
	o->pages_copied = atomic_load(&s->pages_copied);
	o->pages_zeroed = atomic_load(&s->pages_zeroed);
	o->pages_poisoned = atomic_load(&s->pages_poisoned);
	o->pages_prefetched = atomic_load(&s->pages_prefetched);
	o->pages_background = atomic_load(&s->pages_background);
	o->pages_replayed = atomic_load(&s->pages_replayed);
	o->pages_moved = atomic_load(&s->pages_moved);
	o->restore_complete = atomic_load(&e->restored);
	uint64_t done_ns = atomic_load(&e->restored_ns);

	/* Restored before the threads started (fl_engine_process): 0. */
	if (o->restore_complete && e->start_ns)
		o->restore_ms = done_ns > e->start_ns ?
				(done_ns - e->start_ns) / 1000000 : 0;
	o->bytes_copied = atomic_load(&s->bytes_copied);
	o->eexist = atomic_load(&s->eexist);
	o->eagain = atomic_load(&s->eagain);
	o->source_errors = atomic_load(&s->source_errors);
	o->lat_ns_sum = atomic_load(&s->lat_ns_sum);
	o->lat_ns_max = atomic_load(&s->lat_ns_max);
	for (int i = 0; i < FL_LAT_BUCKETS; i++)
		o->lat_hist[i] = atomic_load(&s->lat_hist[i]);
	return 0;
}

int fl_engine_progress(struct fl_engine *e, uint64_t *missing,
		       uint64_t *total)
{
	uint64_t m = 0, t = 0;

	if (pthread_rwlock_tryrdlock(&e->lock))
		return -EBUSY;
	for (int i = 0; i < e->nregions; i++) {
		const struct region *r = e->regions[i];
		uint64_t c[PG_NSTATES];

		region_count(r, c);
		m += (c[PG_MISSING] + c[PG_BUSY]) << r->page_shift;
		t += r->len;
	}
	/*
	 * Nothing missing, although background restore never said so (faults
	 * and readahead filled it all, or it had no quiet moment): restored
	 * when the last run was filled.  Under the lock: a region added
	 * afterwards (write lock) clears it again.
	 */
	if (t && !m && !atomic_load(&e->restored)) {
		uint64_t at = atomic_load(&e->last_fill_ns);

		atomic_store(&e->restored_ns, at ? at : now_ns());
		atomic_store(&e->restored, true);
	}
	pthread_rwlock_unlock(&e->lock);
	*missing = m;
	*total = t;
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
		if (seen >= want)
			return (2ull << i) - 1;
	}
	return s->lat_ns_max;
}

static void put_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

char *fl_stats_json(const struct fl_stats *s)
{
	json_object *o = json_object_new_object();
	json_object *h = json_object_new_array();
	uint64_t served = 0;

	for (int i = 0; i < FL_LAT_BUCKETS; i++) {
		json_object_array_add(h, json_object_new_uint64(s->lat_hist[i]));
		served += s->lat_hist[i];
	}
	put_u64(o, "faults", s->faults);
	put_u64(o, "events", s->events);
	put_u64(o, "pages_copied", s->pages_copied);
	put_u64(o, "pages_zeroed", s->pages_zeroed);
	put_u64(o, "pages_poisoned", s->pages_poisoned);
	put_u64(o, "pages_prefetched", s->pages_prefetched);
	put_u64(o, "pages_background", s->pages_background);
	put_u64(o, "pages_replayed", s->pages_replayed);
	put_u64(o, "pages_moved", s->pages_moved);
	put_u64(o, "restore_complete", s->restore_complete);
	put_u64(o, "restore_ms", s->restore_ms);
	put_u64(o, "bytes_copied", s->bytes_copied);
	put_u64(o, "eexist", s->eexist);
	put_u64(o, "eagain", s->eagain);
	put_u64(o, "source_errors", s->source_errors);
	put_u64(o, "latency_ns_mean", served ? s->lat_ns_sum / served : 0);
	put_u64(o, "latency_ns_p50", fl_stats_percentile(s, 50));
	put_u64(o, "latency_ns_p99", fl_stats_percentile(s, 99));
	put_u64(o, "latency_ns_max", s->lat_ns_max);
	json_object_object_add(o, "latency_log2_ns_hist", h);

	char *out = strdup(json_object_to_json_string_ext(o,
						JSON_C_TO_STRING_PLAIN));

	json_object_put(o);
	return out;
}
