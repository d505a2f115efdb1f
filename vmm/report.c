// SPDX-License-Identifier: Apache-2.0
/*
 * report.c - a run of the test VMM as one JSON object (`faultline vmm
 * --json`, and the kvm-restore benchmark's raw data), --reset's runs
 * included.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

static void add_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_int64((int64_t)v));
}

static const char *const tracking_names[] = {
	[0] = "none", [FL_TRACK_WP_ASYNC] = "wp_async",
	[FL_TRACK_WP_SYNC] = "wp_sync",
};

const char *vmm_tracking_name(int tracking)
{
	return tracking >= 0 && tracking <= FL_TRACK_WP_SYNC ?
	       tracking_names[tracking] : "?";
}

static json_object *reset_runs(const struct vmm_reset_run *v, unsigned int n,
			       const char *before)
{
	json_object *a = json_object_new_array();

	for (unsigned int i = 0; i < n; i++) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, before,
				       json_object_new_double(v[i].before_ms));
		json_object_object_add(o, "run_ms",
				       json_object_new_double(v[i].run_ms));
		if (!strcmp(before, "reset_ms")) {
			add_u64(o, "pages_reset", v[i].pages_reset);
			add_u64(o, "reset_runs", v[i].reset_runs);
		}
		add_u64(o, "faults", v[i].faults);
		json_object_object_add(o, "checksum_ok",
				       json_object_new_boolean(v[i].checksum_ok));
		json_object_array_add(a, o);
	}
	return a;
}

static json_object *reset_json(const struct vmm_config *c,
			       const struct vmm_reset_result *rs)
{
	json_object *o = json_object_new_object();

	add_u64(o, "runs", rs->runs);
	add_u64(o, "dirty_bytes", rs->dirty_bytes);
	json_object_object_add(o, "dirty_pattern", json_object_new_string(
				       vmm_dirty_name(c->dirty_pattern)));
	json_object_object_add(o, "eager",
			       json_object_new_boolean(c->reset_eager));
	json_object_object_add(o, "write_tracking", json_object_new_string(
				       vmm_tracking_name(rs->tracking)));
	if (!rs->tracking)
		json_object_object_add(o, "write_tracking_note",
				       json_object_new_string(rs->tracking_note));
	add_u64(o, "reset_scan_ns", rs->scan_ns);
	add_u64(o, "reset_drop_ns", rs->drop_ns);
	add_u64(o, "reset_refill_ns", rs->refill_ns);
	if (rs->reset)
		json_object_object_add(o, "reset_loop", reset_runs(rs->reset,
				       rs->runs, "reset_ms"));
	if (rs->fresh)
		json_object_object_add(o, "fresh_loop", reset_runs(rs->fresh,
				       rs->runs, "restore_ms"));
	return o;
}

char *vmm_result_json(const struct vmm_config *c, const struct vmm_result *r)
{
	json_object *o = json_object_new_object();
	char wl[32], *s;

	json_object_object_add(o, "elapsed_ms",
			       json_object_new_double(r->elapsed_ms));
	add_u64(o, "vcpus", r->vcpus);
	add_u64(o, "faults", r->faults);
	add_u64(o, "bytes_copied", r->bytes_copied);
	json_object_object_add(o, "checksum_ok",
			       json_object_new_boolean(r->checksum_ok));
	json_object_object_add(o, "kvm", json_object_new_string(r->kvm));
	json_object_object_add(o, "guest", json_object_new_string(
				       r->kvm_guest ? "kvm" : "process"));
	json_object_object_add(o, "backend", json_object_new_string(
				       vmm_backend_name(c->backend)));
	json_object_object_add(o, "workload", json_object_new_string(
				       vmm_workload_name(&c->wl, wl, sizeof(wl))));
	json_object_object_add(o, "write", json_object_new_boolean(c->wl.write));
	json_object_object_add(o, "huge", json_object_new_boolean(c->huge));
	add_u64(o, "mem_bytes", r->mem_bytes);
	add_u64(o, "touches", r->touches);
	if (c->resets)
		json_object_object_add(o, "reset", reset_json(c, &r->reset));
	if (r->have_engine) {
		char *es = fl_stats_json(&r->engine);

		json_object_object_add(o, "engine", json_tokener_parse(es));
		free(es);
	}
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}
