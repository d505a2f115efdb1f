// SPDX-License-Identifier: Apache-2.0
/*
 * report.c - a run of the test VMM as one JSON object (`faultline vmm
 * --json`, and the kvm-restore benchmark's raw data).
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

static void add_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_int64((int64_t)v));
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
	if (r->have_engine) {
		char *es = fl_stats_json(&r->engine);

		json_object_object_add(o, "engine", json_tokener_parse(es));
		free(es);
	}
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}
