// SPDX-License-Identifier: Apache-2.0
/*
 * bench.c - `faultline bench`: one table of benchmarks ({name, fn}, so a
 * new one is one line here plus its file), `bench list`, `bench all`.
 * Times are medians of N runs, always shown as ratios to a reference
 * measured in the same run (table.c renders them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "fc_client.h"
#include "kernel/uffd.h"
#include "cli.h"
#include "util/clock.h"

struct bench_def {
	const char *name;
	int (*fn)(const struct bench_opts *o, struct bench_table *t);
	const char *help;
};

static const struct bench_def benches[] = {
	{ "populate", bench_populate,
	  "fill memory: memcpy, UFFDIO_COPY, pread, pread+MOVE, engine, daemon" },
	{ "move", bench_move,
	  "UFFDIO_MOVE per page vs contiguous runs, +busy thread (TLB flush)" },
	{ "drop", bench_drop,
	  "discard a populated range: one madvise vs per 2M/4K (TLB flush)" },
	{ "fault-latency", bench_fault_latency,
	  "4 KiB random fault round trip: library and daemon (p50..max)" },
	{ "kvm-restore", bench_restore,
	  "touch 128 MiB after a restore, per backend and chunk" },
	{ "remote", bench_remote,
	  "touch 128 MiB restored from file, image, HTTP (cache), post-copy" },
	{ "policy", bench_policy,
	  "faults vs readahead/background pages per access pattern, in-proc" },
	{ "criu", bench_criu,
	  "1 GiB process: criu restore, criu lazy-pages, faultline lazy-pages" },
	{ "reset", bench_reset,
	  "1 GiB back to its snapshot: fl_engine_reset vs per-page drops, +busy" },
	{ "storage", bench_storage,
	  "10 daily snapshots: whole/diffs/chunk store bytes, cache, 16 sessions" },
};

#define NBENCH (sizeof(benches) / sizeof(*benches))

/* Run one benchmark; *out gets its JSON.  Returns 0, 1 on a bad checksum,
 * or -errno. */
static int run_one(const struct bench_def *d, const struct bench_opts *o,
		   json_object **out)
{
	struct bench_table *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return -ENOMEM;
	t->name = d->name;
	t->unit = "s";
	ret = d->fn(o, t);
	if (ret < 0) {
		fprintf(stderr, "faultline bench %s: %s\n", d->name,
			strerror(-ret));
		free(t);
		return ret;
	}
	if (t->skipped) {
		fprintf(stderr, "faultline bench %s: skipped: %s\n", d->name,
			t->skipped);
		*out = json_object_new_object();
		json_object_object_add(*out, "bench",
				       json_object_new_string(d->name));
		json_object_object_add(*out, "skipped",
				       json_object_new_string(t->skipped));
		free(t);
		return 0;
	}
	if (!o->json) {
		bench_print_table(t, stdout);
		fflush(stdout);
	}
	ret = 0;
	for (int i = 0; i < t->nrows; i++) {
		if (!t->rows[i].checksum_ok) {
			fprintf(stderr,
				"faultline bench %s: %s restored wrong bytes\n",
				d->name, t->rows[i].label);
			ret = 1;
		}
	}
	*out = bench_table_json(t, o);
	free(t);
	return ret;
}

/* ---- the command -------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: faultline bench NAME [--json] [--quick] [--runs N] "
		"[--size SIZE]\n"
		"       [--only PREFIX,...]  (kvm-restore: only the rows whose "
		"key starts so,\n"
		"        e.g. random,sparse; each workload's reference is kept)\n"
		"       [--criu PATH]  (criu: the criu binary, >= 4.1)\n"
		"       faultline bench all [--json] [--quick] [-o FILE]  "
		"(default bench-results.json)\n"
		"       faultline bench plot FILE [-o DIR]  "
		"(PNG charts with gnuplot)\n"
		"       faultline bench list\n");
}

bool bench_selected(const struct bench_opts *o, const char *key)
{
	const char *p = o->only;

	while (p && *p) {
		size_t n = strcspn(p, ",");

		if (n && !strncmp(key, p, n))
			return true;
		p += n + (p[n] == ',');
	}
	return !o->only;
}

static void list(void)
{
	for (size_t i = 0; i < NBENCH; i++)
		printf("%-14s %s\n", benches[i].name, benches[i].help);
}

static const struct bench_def *find(const char *name)
{
	for (size_t i = 0; i < NBENCH; i++)
		if (!strcmp(benches[i].name, name))
			return &benches[i];
	return NULL;
}

/* The command line of `faultline bench`. */
struct bench_args {
	struct bench_opts o;
	const char *name, *arg, *out;
};

/* The value v of option a (--runs, --size, -o/--out): 0 or 2. */
static int option_value(struct bench_args *b, const char *a, const char *v)
{
	if (!strcmp(a, "--runs")) {
		char *end;
		long n = strtol(v, &end, 10);

		if (*end || n < 1 || n > 1000) {
			fprintf(stderr, "faultline bench: --runs '%s': want "
				"1..1000\n", v);
			return 2;
		}
		b->o.runs = (int)n;
		b->o.runs_set = true;
	} else if (!strcmp(a, "--size")) {
		if (parse_size(v, &b->o.size) < 0 || b->o.size < 2 * MIB ||
		    b->o.size % (2 * MIB)) {
			fprintf(stderr, "faultline bench: --size '%s': want a "
				"multiple of 2M\n", v);
			return 2;
		}
	} else {
		b->out = v;
	}
	return 0;
}

/* An option that takes a value (given last, without it). */
static bool is_valued(const char *a)
{
	static const char *const valued[] = { "--only", "--criu", "--runs",
					      "--size", "-o", "--out" };

	for (size_t i = 0; i < sizeof(valued) / sizeof(*valued); i++)
		if (!strcmp(a, valued[i]))
			return true;
	return false;
}

/* 0, 1 (--help printed) or 2 (a bad argument, said on stderr). */
static int parse_args(struct bench_args *b, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int ret;

		if (!strcmp(a, "--json")) {
			b->o.json = true;
		} else if (!strcmp(a, "--quick")) {
			b->o.quick = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 1;
		} else if (!strcmp(a, "--only") && i + 1 < argc) {
			b->o.only = argv[++i];
		} else if (!strcmp(a, "--criu") && i + 1 < argc) {
			b->o.criu = argv[++i];
		} else if ((!strcmp(a, "--runs") || !strcmp(a, "--size") ||
			    !strcmp(a, "-o") || !strcmp(a, "--out")) &&
			   i + 1 < argc) {
			ret = option_value(b, a, argv[++i]);
			if (ret)
				return ret;
		} else if (a[0] == '-') {
			fprintf(stderr, "faultline bench: %s '%s'; see "
				"`faultline help bench`\n", is_valued(a) ?
				"a value missing after option" :
				"unknown option", a);
			return 2;
		} else if (!b->name) {
			b->name = a;
		} else if (!b->arg) {
			b->arg = a;
		} else {
			fprintf(stderr, "faultline bench: unexpected '%s'\n", a);
			return 2;
		}
	}
	if (!b->name)
		return cli_missing("bench", "a benchmark NAME is required "
				   "(`faultline bench list`)");
	if (!b->o.runs)
		b->o.runs = b->o.quick ? 1 : 5;
	return 0;
}

/* `bench all`: every benchmark, one JSON file (*j: the whole object). */
static int run_all(const struct bench_opts *o, const char *out,
		   json_object **j)
{
	json_object *bs = json_object_new_object();
	int ret = 0;

	*j = json_object_new_object();
	for (size_t i = 0; i < NBENCH; i++) {
		json_object *b = NULL;

		if (run_one(&benches[i], o, &b))
			ret = 1;
		if (b)
			json_object_object_add(bs, benches[i].name, b);
	}
	json_object_object_add(*j, "benchmarks", bs);
	json_object_object_add(*j, "quick", json_object_new_boolean(o->quick));
	json_object_object_add(*j, "runs", json_object_new_int(o->runs));
	json_object_object_add(*j, "machine", bench_machine_json());
	out = out ? out : "bench-results.json";
	if (json_object_to_file_ext(out, *j, JSON_C_TO_STRING_PRETTY) < 0) {
		fprintf(stderr, "faultline bench all: cannot write %s: %s\n",
			out, strerror(errno));
		return 1;
	}
	if (!o->json)
		printf("results written to %s\n", out);
	return ret;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_args b = { .o = { .runs = 0 } };
	json_object *j = NULL;
	int ret;

	if (argc > 1 && !strcmp(argv[1], "--criu-workload"))
		return bench_criu_workload(argc - 1, argv + 1);
	bench_cleanup_install();
	ret = parse_args(&b, argc, argv);
	if (ret)
		return ret == 1 ? 0 : ret;
	if (!strcmp(b.name, "list")) {
		list();
		return 0;
	}
	if (!strcmp(b.name, "plot")) {
		if (!b.arg) {
			fprintf(stderr, "faultline bench plot: which JSON "
				"file? (from `faultline bench all`)\n");
			return 2;
		}
		return bench_plot(b.arg, b.out);
	}
	if (b.arg) {
		fprintf(stderr, "faultline bench: unexpected '%s'\n", b.arg);
		return 2;
	}
	if (!strcmp(b.name, "all")) {
		ret = run_all(&b.o, b.out, &j);
	} else {
		const struct bench_def *d = find(b.name);

		if (!d) {
			fprintf(stderr, "faultline bench: unknown benchmark "
				"'%s' (see `faultline bench list`)\n", b.name);
			return 2;
		}
		ret = run_one(d, &b.o, &j);
		if (ret < 0)
			return 1;
	}
	if (b.o.json && j)
		printf("%s\n", json_object_to_json_string_ext(j,
			JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	if (j)
		json_object_put(j);
	return ret;
}
