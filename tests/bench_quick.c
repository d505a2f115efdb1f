// SPDX-License-Identifier: Apache-2.0
/*
 * bench_quick.c - runs every `faultline bench` once on tiny sizes (--quick
 * --json) so the benchmarks cannot rot: the JSON must have the expected keys,
 * positive times and verified bytes.  Never a pass/fail on speed.
 *
 * Decision: drive the real binary (build/faultline, or $FAULTLINE_BIN) the
 * way a user does, and parse its output with json-c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "huge_lock.h"
#include "kvm.h"
#include "tap.h"

static const char *bin;

/* Run a shell command; its stdout into a malloc'd string; exit status. */
static int run(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	size_t len = 0, cap = 0;
	char *buf = NULL;
	int st;

	if (!p)
		return -errno;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			if (!buf)
				BAIL("out of memory");
		}
		size_t n = fread(buf + len, 1, cap - len - 1, p);

		if (!n)
			break;
		len += n;
	}
	buf[len] = 0;
	st = pclose(p);
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static const char *const populate_keys[] = {
	"memcpy_thp", "memcpy_nothp", "copy_4k", "copy_64k", "copy_2m",
	"copy_2m_2threads", "pread_thp", "pread_move", "daemon_copy", NULL,
};
static const char *const move_keys[] = {
	"move_4k", "move_64k", "move_2m", "move_2m_thp", "move_4k_busy",
	"move_64k_busy", "move_2m_busy", "move_2m_thp_busy", NULL,
};
static const char *const drop_keys[] = {
	"drop_one", "drop_2m", "drop_4k", "drop_one_thp", "drop_one_busy",
	"drop_2m_busy", "drop_4k_busy", NULL,
};

static const char *const latency_keys[] = {
	"anon_p50", "anon_p90", "anon_p99", "anon_max", "file_p50",
	"minimal_p50", "minimal_p99", "lib_p50",
	"lib_p90", "lib_p99", "lib_max", "daemon_p50", "daemon_p99",
	"daemon_max", NULL,
};

static const char *const restore_keys[] = {
	"linear_prepopulated", "linear_file", "linear_uffd_naive_4k",
	"linear_copy_floor", "linear_inproc_2m", "linear_inproc_default",
	"linear_daemon", "random_daemon", "huge_daemon", "vcpus4_daemon",
	"compute_daemon", "sparse_copy_floor", "sparse_daemon",
	"sparse_daemon_trace", "linear_daemon_64k", "random_daemon_2m",
	"sparse_daemon_2m", "random_daemon_trace", "random_daemon_trace_sorted",
	"sparse_daemon_trace_sorted", NULL,
};

static const char *const remote_keys[] = {
	"local_raw", "local_image", "http_image_cold", "http_image_warm",
	"http_raw", "postcopy", NULL,
};

static const char *const policy_keys[] = {
	"linear_readahead", "strided_readahead", "dense_random", "queued4",
	"idle_background", NULL,
};

static const char *const reset_keys[] = {
	"full", "lazy_64p", "eager_64p", "lazy_1pct", "eager_1pct",
	"perpage_1pct", "whole_1pct", "whole_1pct_refill", "lazy_1m_c",
	"lazy_16m_s", "perpage_16m_s", "full_busy", "lazy_1pct_busy",
	"perpage_1pct_busy", "lazy_1pct_1x", "lazy_1pct_4x",
	"plain_perpage_1pct", NULL,
};

static const char *const storage_keys[] = {
	"whole", "diffs", "store", "store_64k", "merged", "chain3", NULL,
};

/* storage's rows over HTTP (with nginx installed). */
static const char *const storage_http_keys[] = {
	"s1_cold", "s10_warm", "sess1", "sess16", NULL,
};

static const struct {
	const char *name;
	const char *const *keys;
	const char *fact;	/* a key expected under "facts", or NULL */
} benches[] = {
	{ "populate", populate_keys, "pread_move_thp_fraction" },
	{ "move", move_keys, "busy_extra_ns_per_ioctl_4k" },
	{ "drop", drop_keys, NULL },
	{ "fault-latency", latency_keys, "lib_faulted_fraction" },
	{ "kvm-restore", restore_keys, "sparse_trace_copied_per_touched" },
	{ "remote", remote_keys, "http_warm_requests_per_restore" },
	{ "policy", policy_keys, "linear_pages_prefetched" },
	{ "reset", reset_keys, "lazy_64p_p50_us" },
	{ "storage", storage_keys, "store_vs_image" },
};

static json_object *get(json_object *o, const char *k)
{
	json_object *v = NULL;

	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/*
 * kvm-restore runs a KVM guest wherever /dev/kvm works, and says so;
 * FAULTLINE_GUEST=process asks for what machines without KVM run.
 */
static const char *want_guest;

static void check_guest(json_object *j)
{
	const char *want = want_guest;
	const char *g = json_object_get_string(get(j, "guest"));
	json_object *r = get(get(j, "results"), "linear_daemon");

	ok(g && !strcmp(g, want), "kvm-restore: \"guest\": \"%s\" (want %s)",
	   g ? g : "?", want);
	/*
	 * How many faults: a background restore may fill everything before
	 * the first touch (0).  That the row counts them is the point.
	 */
	json_object *f = get(r, "faults");

	ok(f && (json_object_is_type(f, json_type_int) ||
		 json_object_is_type(f, json_type_double)) &&
	   json_object_get_double(f) >= 0 &&
	   json_object_get_double(get(r, "bytes_copied")) > 0,
	   "kvm-restore: rows count faults (%g) and bytes copied",
	   f ? json_object_get_double(f) : -1.0);
}

/*
 * storage: bytes on disk for every way of storing, and with nginx the
 * HTTP rows with the bytes the origin sent (each chunk once at least).
 */
static void check_storage(json_object *j)
{
	json_object *res = get(j, "results");
	bool http = !access("/usr/sbin/nginx", X_OK) ||
		    !access("/usr/bin/nginx", X_OK);

	for (int i = 0; i < 4; i++)	/* whole ... store_64k */
		ok(json_object_get_double(get(get(res, storage_keys[i]),
					      "disk_mib")) > 0,
		   "storage: %s has its bytes on disk", storage_keys[i]);
	if (!http) {
		skip_missing(4, "nginx", "not in /usr/sbin or /usr/bin "
			     "(apt-get install nginx-light): no HTTP rows");
		return;
	}
	for (const char *const *k = storage_http_keys; *k; k++) {
		json_object *r = get(res, *k);

		ok(json_object_get_double(get(r, "seconds")) > 0 &&
		   json_object_get_boolean(get(r, "checksum_ok")) &&
		   json_object_get_double(get(r, "origin_vs_stored")) > 0,
		   "storage: %s restored the right bytes, with origin bytes "
		   "counted", *k);
	}
}

/* Check one benchmark's JSON object. */
static void check_bench(json_object *j, int b)
{
	const char *name = benches[b].name;
	json_object *res = get(j, "results"), *ref = get(j, "reference");
	json_object *v;

	ok(j && json_object_is_type(j, json_type_object),
	   "%s: output is a JSON object", name);
	v = get(j, "bench");
	ok(v && !strcmp(json_object_get_string(v), name),
	   "%s: \"bench\" names it", name);
	ok(json_object_get_int64(get(j, "bytes")) > 0, "%s: bytes > 0", name);
	ok(json_object_get_int(get(j, "runs")) == 1, "%s: one run", name);
	ok(json_object_get_boolean(get(j, "quick")), "%s: quick", name);
	ok(res && json_object_is_type(res, json_type_object),
	   "%s: results object", name);
	ok(ref && get(res, json_object_get_string(ref)),
	   "%s: reference \"%s\" is one of the results", name,
	   ref ? json_object_get_string(ref) : "?");
	for (const char *const *k = benches[b].keys; *k; k++) {
		json_object *r = get(res, *k);
		double s = json_object_get_double(get(r, "seconds"));

		ok(r && s > 0 && json_object_get_double(get(r, "ratio")) > 0,
		   "%s: %s has a positive time (%.6f s)", name, *k, s);
		ok(json_object_get_boolean(get(r, "checksum_ok")),
		   "%s: %s restored the right bytes", name, *k);
		ok(get(r, "label") != NULL, "%s: %s has a label", name, *k);
	}
	if (benches[b].fact)
		ok(get(get(j, "facts"), benches[b].fact) != NULL,
		   "%s: facts.%s", name, benches[b].fact);
	ok(json_object_get_boolean(get(j, "all_ok")), "%s: all_ok", name);
	ok(get(j, "machine") != NULL, "%s: machine described", name);
	if (!strcmp(name, "kvm-restore"))
		check_guest(j);
	if (!strcmp(name, "storage"))
		check_storage(j);
}

static bool is_png(const char *path)
{
	unsigned char m[8] = { 0 };
	FILE *f = fopen(path, "rb");
	bool r = f && fread(m, 1, 8, f) == 8 && !memcmp(m, "\x89PNG\r\n\x1a\n", 8);

	if (f)
		fclose(f);
	return r;
}

int main(void)
{
	char cmd[1024], *out = NULL;
	int st;

	bin = getenv("FAULTLINE_BIN");
	if (!bin)
		bin = "build/faultline";
	if (access(bin, X_OK))
		BAIL("%s not built (make)", bin);

	snprintf(cmd, sizeof(cmd), "%s bench list", bin);
	st = run(cmd, &out);
	is_int(st, 0, "bench list exits 0");
	for (size_t b = 0; b < sizeof(benches) / sizeof(*benches); b++)
		ok(out && strstr(out, benches[b].name) != NULL,
		   "bench list names %s", benches[b].name);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s bench no-such-bench 2>/dev/null", bin);
	is_int(run(cmd, NULL), 2, "unknown benchmark exits 2");

	/*
	 * kvm-restore's hugetlb rows (alone and in bench all) reserve and
	 * use the host's pool: under its lock, as the tests that do.
	 */
	st = huge_lock();
	if (st < 0)
		diag("no hugetlb pool lock: %s", strerror(-st));
	want_guest = kvm_probe() == 0 ? "kvm" : "process";
	for (size_t b = 0; b <= sizeof(benches) / sizeof(*benches); b++) {
		bool again = b == sizeof(benches) / sizeof(*benches);

		if (again) {	/* kvm-restore once more, on the process guest */
			for (b = 0; strcmp(benches[b].name, "kvm-restore"); b++)
				;
			want_guest = "process";
		}
		snprintf(cmd, sizeof(cmd), "%s%s bench %s --quick --json",
			 again ? "FAULTLINE_GUEST=process " : "", bin,
			 benches[b].name);
		st = run(cmd, &out);
		is_int(st, 0, benches[b].name);
		json_object *j = json_tokener_parse(out);

		if (!j)
			diag("output: %.200s", out);
		check_bench(j, (int)b);
		json_object_put(j);
		free(out);
		if (again)
			break;
	}

	/* bench all writes one file holding every benchmark; plot draws it. */
	char dir[] = "/tmp/faultline-bench-test-XXXXXX";

	if (!mkdtemp(dir))
		BAIL("mkdtemp: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd), "%s bench all --quick -o %s/res.json "
		 ">/dev/null", bin, dir);
	is_int(run(cmd, NULL), 0, "bench all --quick");
	huge_unlock();
	snprintf(cmd, sizeof(cmd), "%s/res.json", dir);

	json_object *all = json_object_from_file(cmd);
	json_object *bs = get(all, "benchmarks");

	ok(bs != NULL, "bench all wrote %s with \"benchmarks\"", cmd);
	for (size_t b = 0; b < sizeof(benches) / sizeof(*benches); b++)
		ok(get(get(get(bs, benches[b].name), "results"),
		       benches[b].keys[0]) != NULL,
		   "bench all has %s", benches[b].name);
	json_object_put(all);

	if (run("command -v gnuplot >/dev/null", NULL)) {
		skip_missing(1 + (int)(sizeof(benches) / sizeof(*benches)),
			     "gnuplot", "not on PATH (apt-get install "
			     "gnuplot-nox)");
	} else {
		snprintf(cmd, sizeof(cmd), "%s bench plot %s/res.json -o %s "
			 ">/dev/null", bin, dir, dir);
		is_int(run(cmd, NULL), 0, "bench plot");
		for (size_t b = 0; b < sizeof(benches) / sizeof(*benches); b++) {
			char png[256];

			snprintf(png, sizeof(png), "%s/bench-%s.png", dir,
				 benches[b].name);
			ok(is_png(png), "plot drew %s", png);
		}
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	run(cmd, NULL);
	return done_testing();
}
