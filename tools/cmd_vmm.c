// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_vmm.c - `faultline vmm`: option parsing and output for the test VMM
 * (vmm/vmm.c, vmm/reset.c).  Exit status 0 only when the guest ran and
 * every byte it read was right (--reset: in every run).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/size.h"
#include "vmm.h"

static const char usage[] =
	"usage: faultline vmm --mem-file FILE [--mem-size SIZE]\n"
	"       --backend prepopulated|file|uffd|inproc [--socket PATH]\n"
	"       [--huge] [--vcpus N] --workload W [--write] [--json]\n"
	"       [--discard OFFSET:LENGTH] [--guest auto|kvm|process]\n"
	"       [--chunk SIZE] [--no-prefetch] [--no-background] [--no-move]\n"
	"       [--replay TRACE] [--copy-beside]\n"
	"       [--reset N [--dirty SIZE] [--dirty-pattern scattered|contiguous]\n"
	"        [--reset-eager] [--track-sync]]\n"
	"  W: linear, random, stride:N (every Nth page), sparse (1 MiB every\n"
	"  16 MiB), sparse-random (those runs in random order), compute:N\n"
	"  (linear, N steps of work after each touch)\n"
	"  --discard: a second pass after madvise(DONTNEED) of that range\n"
	"  --chunk, --no-*, --replay: the inproc engine's options\n"
	"  --copy-beside: another thread copies the file once meanwhile\n"
	"  --reset N (inproc): the guest runs N times from one snapshot, the\n"
	"  engine's reset in between, then N times each after a fresh restore;\n"
	"  each run checks that its workload (read) is the snapshot's, then\n"
	"  writes the dirty set: SIZE (default 1M) of pages, every\n"
	"  (memory / SIZE)-th page (scattered, the default) or the first SIZE\n"
	"  of memory (contiguous); prints each reset's time and the run's\n"
	"  after it, and the same for the fresh restores.  --reset-eager:\n"
	"  the reset fills the pages again before the run; --track-sync:\n"
	"  write tracking by write-protect faults even where the kernel has\n"
	"  WP_ASYNC\n";

static int bad(const char *opt, const char *val, const char *why)
{
	return cli_bad("vmm", opt, val, why);
}

static int parse_range(const char *s, uint64_t *off, uint64_t *len)
{
	char buf[64], *colon;

	snprintf(buf, sizeof(buf), "%s", s);
	colon = strchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = 0;
	if (parse_size(buf, off) < 0 || parse_size(colon + 1, len) < 0 ||
	    *len == 0)
		return -EINVAL;
	return 0;
}

static int parse_vcpus(const char *s, unsigned int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || end == s || v < 1 || v > VMM_MAX_VCPUS)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static int parse_guest(const char *s, enum vmm_guest *g)
{
	if (!strcmp(s, "auto"))
		*g = VMM_GUEST_AUTO;
	else if (!strcmp(s, "kvm"))
		*g = VMM_GUEST_KVM;
	else if (!strcmp(s, "process"))
		*g = VMM_GUEST_PROCESS;
	else
		return -EINVAL;
	return 0;
}

static int parse_resets(const char *s, unsigned int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || end == s || v < 1 || v > VMM_MAX_RESETS)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static void print_head(const struct vmm_config *c, const struct vmm_result *r)
{
	char wl[32];

	printf("%s guest (%s), %u vCPU%s, %s %s%s, %s %s",
	       r->kvm_guest ? "KVM" : "process", r->kvm, r->vcpus,
	       r->vcpus > 1 ? "s" : "",
	       vmm_workload_name(&c->wl, wl, sizeof(wl)),
	       c->wl.write ? "writes" : "reads", c->huge ? " (hugetlb)" : "",
	       size_str(r->mem_bytes).s, vmm_backend_name(c->backend));
}

static void print_text(const struct vmm_config *c, const struct vmm_result *r)
{
	print_head(c, r);
	printf(": %.1f ms, %llu touches, %llu faults, %s copied, checksum %s\n",
	       r->elapsed_ms, (unsigned long long)r->touches,
	       (unsigned long long)r->faults, size_str(r->bytes_copied).s,
	       r->checksum_ok ? "ok" : "WRONG");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * The median over runs 2..n (n >= 2) of the field at off, plus the field
 * at off2 if off2 is not off (a reset or restore and the run after it).
 */
static double median(const struct vmm_reset_run *v, unsigned int n,
		     size_t off, size_t off2)
{
	unsigned int k = n - 1;
	double *x = malloc(k * sizeof(*x)), m;

	if (!x)
		return 0;
	for (unsigned int i = 0; i < k; i++) {
		const char *r = (const char *)&v[i + 1];

		x[i] = *(const double *)(r + off);
		if (off2 != off)
			x[i] += *(const double *)(r + off2);
	}
	qsort(x, k, sizeof(*x), cmp_double);
	m = k % 2 ? x[k / 2] : (x[k / 2 - 1] + x[k / 2]) / 2;
	free(x);
	return m;
}

/* The last line: reset + run against a fresh restore + run. */
static void print_verdict(const struct vmm_reset_result *rs, unsigned int n)
{
	size_t before = offsetof(struct vmm_reset_run, before_ms);
	size_t run = offsetof(struct vmm_reset_run, run_ms);
	double r, f;

	if (n < 2) {
		printf("reset + run against restore + run: no reset to compare "
		       "(--reset 1 runs once; give 2 or more)\n");
		return;
	}
	r = median(rs->reset, n, before, run);
	f = median(rs->fresh, n, before, run);
	printf("reset + run %.2f ms against restore + run %.2f ms (medians "
	       "of runs 2-%u): reset + run takes %.0f %% of the time\n", r, f,
	       n, f > 0 ? 100.0 * r / f : 0.0);
}

static void print_tracking(const struct vmm_config *c,
			   const struct vmm_reset_result *rs)
{
	printf("write tracking: ");
	if (rs->tracking == FL_TRACK_WP_ASYNC)
		printf("WP_ASYNC (the kernel marks the pages written, "
		       "PAGEMAP_SCAN finds them)\n");
	else if (rs->tracking == FL_TRACK_WP_SYNC)
		printf("WP_SYNC (a write-protect fault the engine resolves at "
		       "each page's first write; %s)\n",
		       c->engine_flags & FL_ENGINE_TRACK_SYNC ? "--track-sync" :
		       "the fallback where the kernel lacks WP_ASYNC or "
		       "PAGEMAP_SCAN");
	else
		printf("none (%s): each reset drops every page filled\n",
		       rs->tracking_note);
}

static void print_reset(const struct vmm_config *c, const struct vmm_result *r)
{
	const struct vmm_reset_result *rs = &r->reset;
	unsigned int n = rs->runs, bad = 0;

	print_head(c, r);
	printf(": %u run%s from one snapshot, each writing %s %s after its "
	       "check%s\n", n, n > 1 ? "s" : "", size_str(rs->dirty_bytes).s,
	       vmm_dirty_name(c->dirty_pattern),
	       c->reset_eager ? ", eager resets" : "");
	print_tracking(c, rs);
	printf("columns: run; reset ms: the engine's reset before it; dropped: "
	       "the pages it dropped; ranges: the contiguous ranges they "
	       "made; run ms and faults: the run after it | the same run "
	       "after a fresh restore in place of the reset\n");
	printf("%4s %9s %7s %6s %8s %7s | %10s %8s %7s\n", "run", "reset ms",
	       "dropped", "ranges", "run ms", "faults", "restore ms", "run ms",
	       "faults");
	for (unsigned int i = 0; i < n; i++) {
		const struct vmm_reset_run *a = &rs->reset[i], *b = &rs->fresh[i];

		if (i == 0)
			printf("%4u %9s %7s %6s", 1, "-", "-", "-");
		else
			printf("%4u %9.3f %7llu %6llu", i + 1, a->before_ms,
			       (unsigned long long)a->pages_reset,
			       (unsigned long long)a->reset_runs);
		printf(" %8.2f %7llu | %10.3f %8.2f %7llu%s\n", a->run_ms,
		       (unsigned long long)a->faults, b->before_ms, b->run_ms,
		       (unsigned long long)b->faults,
		       a->checksum_ok && b->checksum_ok ? "" : "  WRONG");
		bad += !a->checksum_ok + !b->checksum_ok;
	}
	if (n >= 2) {
		size_t before = offsetof(struct vmm_reset_run, before_ms);
		size_t run = offsetof(struct vmm_reset_run, run_ms);

		printf("median of runs 2-%u: reset %.3f ms, the run after it "
		       "%.2f ms; fresh restore %.3f ms, the run after it "
		       "%.2f ms\n", n, median(rs->reset, n, before, before),
		       median(rs->reset, n, run, run),
		       median(rs->fresh, n, before, before),
		       median(rs->fresh, n, run, run));
		printf("in the engine, all %u resets: scan %.3f ms, drop %.3f "
		       "ms, refill %.3f ms\n", n - 1, rs->scan_ns / 1e6,
		       rs->drop_ns / 1e6, rs->refill_ns / 1e6);
	}
	if (!bad)
		printf("checksum ok: every run read the snapshot\n");
	else
		printf("checksum WRONG: %u of %u runs did not read the "
		       "snapshot\n", bad, 2 * n);
	print_verdict(rs, n);
}

static const struct option opts[] = {
	{ "mem-file", required_argument, NULL, 'm' },
	{ "mem-size", required_argument, NULL, OPT_MEM_SIZE },
	{ "backend", required_argument, NULL, OPT_BACKEND },
	{ "socket", required_argument, NULL, 's' },
	{ "huge", no_argument, NULL, OPT_HUGE },
	{ "vcpus", required_argument, NULL, OPT_VCPUS },
	{ "workload", required_argument, NULL, OPT_WORKLOAD },
	{ "write", no_argument, NULL, OPT_WRITE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "discard", required_argument, NULL, OPT_DISCARD },
	{ "guest", required_argument, NULL, OPT_GUEST },
	{ "chunk", required_argument, NULL, 'c' },
	{ "no-prefetch", no_argument, NULL, OPT_NO_PREFETCH },
	{ "no-background", no_argument, NULL, OPT_NO_BACKGROUND },
	{ "no-move", no_argument, NULL, OPT_NO_MOVE },
	{ "replay", required_argument, NULL, OPT_REPLAY },
	{ "copy-beside", no_argument, NULL, OPT_COPY_BESIDE },
	{ "reset", required_argument, NULL, OPT_RESET },
	{ "dirty", required_argument, NULL, OPT_DIRTY },
	{ "dirty-pattern", required_argument, NULL, OPT_DIRTY_PATTERN },
	{ "reset-eager", no_argument, NULL, OPT_RESET_EAGER },
	{ "track-sync", no_argument, NULL, OPT_TRACK_SYNC },
	{ "help", no_argument, NULL, 'h' },
	{ 0 }
};

/* What the command line says beyond the VMM's own config. */
struct vmm_args {
	bool json, have_backend, have_wl, write, help;
};

/* An option that takes a value, into c: 0, the exit status, or -ENOENT. */
static int value_opt(struct vmm_config *c, struct vmm_args *a, int opt,
		     const char *arg)
{
	switch (opt) {
	case 'm': c->mem_file = arg; break;
	case 's': c->socket = arg; break;
	case OPT_REPLAY: c->replay = arg; break;
	case OPT_MEM_SIZE:
		if (parse_size(arg, &c->mem_size) < 0)
			return bad("--mem-size", arg, "not a size");
		break;
	case OPT_BACKEND:
		if (vmm_backend_parse(arg, &c->backend) < 0)
			return bad("--backend", arg, "not one of "
				   "prepopulated, file, uffd, inproc");
		a->have_backend = true;
		break;
	case OPT_VCPUS:
		if (parse_vcpus(arg, &c->vcpus) < 0)
			return bad("--vcpus", arg, "not 1 to 8");
		break;
	case OPT_WORKLOAD:
		if (vmm_workload_parse(arg, &c->wl) < 0)
			return bad("--workload", arg, "not linear, random, "
				   "stride:N, sparse, sparse-random or "
				   "compute:N");
		a->have_wl = true;
		break;
	case OPT_DISCARD:
		if (parse_range(arg, &c->discard_off, &c->discard_len) < 0)
			return bad("--discard", arg, "not OFFSET:LENGTH");
		break;
	case OPT_GUEST:
		if (parse_guest(arg, &c->guest) < 0)
			return bad("--guest", arg, "not auto, kvm or process");
		break;
	case 'c':
		return cli_parse_chunk("vmm", arg, &c->chunk);
	case OPT_RESET:
		if (parse_resets(arg, &c->resets) < 0)
			return bad("--reset", arg, "not 1 to 10000");
		break;
	case OPT_DIRTY:
		if (parse_size(arg, &c->dirty) < 0 || c->dirty == 0)
			return bad("--dirty", arg, "not a size");
		break;
	case OPT_DIRTY_PATTERN:
		if (vmm_dirty_parse(arg, &c->dirty_pattern) < 0)
			return bad("--dirty-pattern", arg, "not scattered or "
				   "contiguous");
		break;
	default:
		return -ENOENT;
	}
	return 0;
}

/* A switch (no value), into c: 0, or -ENOENT if opt is none. */
static int flag_opt(struct vmm_config *c, struct vmm_args *a, int opt)
{
	switch (opt) {
	case OPT_HUGE: c->huge = true; break;
	case OPT_WRITE: a->write = true; break;
	case OPT_JSON: a->json = true; break;
	case OPT_NO_PREFETCH: c->engine_flags |= FL_ENGINE_NO_PREFETCH; break;
	case OPT_NO_BACKGROUND:
		c->engine_flags |= FL_ENGINE_NO_BACKGROUND;
		break;
	case OPT_NO_MOVE: c->engine_flags &= ~FL_ENGINE_MOVE; break;
	case OPT_COPY_BESIDE: c->copy_beside = true; break;
	case OPT_RESET_EAGER: c->reset_eager = true; break;
	case OPT_TRACK_SYNC: c->engine_flags |= FL_ENGINE_TRACK_SYNC; break;
	case 'h': a->help = true; break;
	default:
		return -ENOENT;
	}
	return 0;
}

/* The options into c and a, checked: 0, or the exit status. */
static int parse(int argc, char **argv, struct vmm_config *c,
		 struct vmm_args *a)
{
	int opt, ret;

	opterr = 0;	/* cli_bad_option() says it, in one line */
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		ret = value_opt(c, a, opt, optarg);
		if (ret == -ENOENT)
			ret = flag_opt(c, a, opt);
		if (ret == -ENOENT)
			return cli_bad_option("vmm", argv, "", opts);
		if (ret || a->help)
			return ret;
	}
	if (optind < argc)
		return bad("argument", argv[optind], "unexpected");
	if (!c->mem_file || !a->have_backend || !a->have_wl) {
		return cli_missing("vmm", "--mem-file, --backend and "
				   "--workload are required");
	}
	c->wl.write = a->write;
	if (vmm_check_options(c) < 0) {
		fprintf(stderr, "faultline vmm: %s\n", vmm_error());
		return CLI_USAGE;
	}
	return 0;
}

int cmd_vmm(int argc, char **argv)
{
	struct vmm_config c = { .vcpus = 1, .engine_flags = FL_ENGINE_MOVE };
	struct vmm_args a = { 0 };
	struct vmm_result r;
	int ret;

	if ((ret = parse(argc, argv, &c, &a)))
		return ret;
	if (a.help) {
		fputs(usage, stdout);
		return 0;
	}
	ret = vmm_run(&c, &r);
	if (ret < 0) {
		fprintf(stderr, "faultline vmm: %s\n", vmm_error());
		vmm_result_free(&r);
		return CLI_FAILED;
	}
	if (a.json) {
		char *s = vmm_result_json(&c, &r);

		printf("%s\n", s);
		free(s);
	} else if (c.resets) {
		print_reset(&c, &r);
	} else {
		print_text(&c, &r);
	}
	vmm_result_free(&r);
	return r.checksum_ok ? 0 : CLI_FAILED;
}
