// SPDX-License-Identifier: Apache-2.0
/*
 * restore.c - `faultline bench kvm-restore` (cf. the TDP MMU
 * prefault thread's UFFD chunk sweep): how long a guest
 * takes to touch its memory right after a snapshot restore, for each way
 * of restoring it, as a ratio to the same guest on prepopulated memory
 * measured in the same round.
 *
 * Every row is one run of `faultline vmm`'s code (vmm/) in a forked child,
 * a fresh address space as a restored VMM has: a real KVM guest where
 * /dev/kvm works, else the VMM's process guest (threads doing the same
 * touches), and the table's first line says which.  Backends: prepopulated
 * (the reference), the File backend, the library engine in-process (the
 * cited chunk sweep without prefetch, and the default engine), and
 * `faultline serve` through Firecracker's handshake: with default flags,
 * with a fixed `--chunk` of 64K and 2M (every workload but hugetlb, whose
 * chunk is its 2 MiB page), and replaying a working-set trace recorded by
 * `serve --record` before the rounds, as recorded (first-touch order) and
 * sorted by offset (random: the two orders differ).  "COPY beside" is
 * prepopulated memory while another thread copies the file once: what a
 * restore's copy costs a guest that never waits for it.  A "copy floor" row
 * times one thread UFFDIO_COPYing just the pages the guest touches, with
 * no guest at all: what the copy alone costs (a handler copying on more
 * threads, or a File backend copying nothing, can be faster).  Cases
 * run round-robin within a round; each daemon configuration is one
 * `faultline serve` for all rounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "format/trace.h"
#include "hugetlb.h"
#include "kernel/uffd.h"
#include "kvm.h"
#include "vmm.h"
#include "restore_bench.h"

#define NO_PF (FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND)
#define PATCHED "(2M handler + KVM prefault patch)"

const struct rs_group_def rs_groups[G_N] = {
	[G_LINEAR] = { "linear", "linear", false, 1, false },
	[G_RANDOM] = { "random", "random", false, 1, false },
	[G_HUGE] = { "huge", "linear", true, 1, false },
	[G_VCPUS] = { "vcpus4", "random", false, 4, false },
	[G_COMPUTE] = { "compute", "compute:8", false, 1, false },
	[G_SPARSE] = { "sparse", "sparse", false, 1, true },
	[G_SPARSE_RND] = { "sparse_random", "sparse-random", false, 1, true },
};

static const enum rs_group trace_group[T_N] = {
	[T_RANDOM] = G_RANDOM, [T_SPARSE] = G_SPARSE,
	[T_SPARSE_RND] = G_SPARSE_RND,
};

const struct rs_daemon_def rs_daemons[D_N] = {
	[D_DEFAULT] = { .big = false },
	[D_64K] = { .chunk = "64K" },
	[D_2M] = { .chunk = "2M" },
	[D_SPARSE] = { .big = true },
	[D_SPARSE_64K] = { .big = true, .chunk = "64K" },
	[D_SPARSE_2M] = { .big = true, .chunk = "2M" },
	[D_RANDOM_TRACE] = { .trace = T_RANDOM },
	[D_RANDOM_SORTED] = { .trace = T_RANDOM, .sorted = true },
	[D_RANDOM_RECORD] = { .trace = T_RANDOM, .record = true },
	[D_TRACE] = { .big = true, .trace = T_SPARSE },
	[D_SORTED] = { .big = true, .trace = T_SPARSE, .sorted = true },
	[D_RECORD] = { .big = true, .trace = T_SPARSE, .record = true },
	[D_SRND_TRACE] = { .big = true, .trace = T_SPARSE_RND },
	[D_SRND_SORTED] = { .big = true, .trace = T_SPARSE_RND,
			    .sorted = true },
	[D_SRND_RECORD] = { .big = true, .trace = T_SPARSE_RND,
			    .record = true },
};

const struct rs_case rs_cases[] = {
#define SWEEP(k, c, s) { "linear_inproc_" k, "linear: in-proc " k ", no prefetch", \
			 G_LINEAR, R_INPROC, c, NO_PF, D_NONE, s, NULL }
#define DAEMON(k, l, g, d, s) { k, l, g, R_DAEMON, 0, 0, d, s, NULL }
/* A workload's daemons with a fixed chunk (p: key prefix, l: label's). */
#define CHUNKS(p, l, g, d64k, d2m, s64k, s2m) \
	DAEMON(p "_daemon_64k", l " --chunk 64K", g, d64k, s64k), \
	DAEMON(p "_daemon_2m", l " --chunk 2M", g, d2m, s2m)
/* Its trace replays: as recorded (first-touch order), sorted by offset. */
#define TRACES(p, g, dt, ds) \
	DAEMON(p "_daemon_trace", p ": faultline serve --prefetch TRACE", g, \
	       dt, -1), \
	DAEMON(p "_daemon_trace_sorted", \
	       p ": serve --prefetch TRACE (sorted)", g, ds, -1)
	{ "linear_prepopulated", "linear: prepopulated (read before)",
	  G_LINEAR, R_PREPOP, 0, 0, D_NONE, -1, NULL },
	{ "linear_copy_beside", "linear: prepopulated + COPY beside",
	  G_LINEAR, R_BESIDE, 0, 0, D_NONE, -1, NULL },
	{ "linear_copy_floor", "linear: copy floor (COPY, no guest)",
	  G_LINEAR, R_FLOOR, 0, 0, D_NONE, -1, NULL },
	{ "linear_file", "linear: File backend (mmap of file)",
	  G_LINEAR, R_FILE, 0, 0, D_NONE, -1, NULL },
	{ "linear_uffd_naive_4k", "linear: naive 4K handler (in-proc)",
	  G_LINEAR, R_INPROC, 4 * KIB, NO_PF, D_NONE, 2228, NULL },
	SWEEP("8k", 8 * KIB, 1435), SWEEP("16k", 16 * KIB, 1036),
	SWEEP("32k", 32 * KIB, 743), SWEEP("64k", 64 * KIB, 645),
	SWEEP("128k", 128 * KIB, 587), SWEEP("256k", 256 * KIB, 561),
	SWEEP("512k", 512 * KIB, 543), SWEEP("1m", 1 * MIB, 534),
	SWEEP("2m", 2 * MIB, 523),
	{ "linear_inproc_default", "linear: in-proc default engine",
	  G_LINEAR, R_INPROC, 0, 0, D_NONE, 151, PATCHED },
	{ "linear_daemon", "linear: faultline serve (default)",
	  G_LINEAR, R_DAEMON, 0, 0, D_DEFAULT, 151, PATCHED },
	CHUNKS("linear", "linear: faultline serve", G_LINEAR, D_64K, D_2M,
	       645, 513),
	{ "random_prepopulated", "random: prepopulated",
	  G_RANDOM, R_PREPOP, 0, 0, D_NONE, -1, NULL },
	{ "random_copy_beside", "random: prepopulated + COPY beside",
	  G_RANDOM, R_BESIDE, 0, 0, D_NONE, -1, NULL },
	{ "random_file", "random: File backend",
	  G_RANDOM, R_FILE, 0, 0, D_NONE, -1, NULL },
	{ "random_inproc_default", "random: in-proc default engine",
	  G_RANDOM, R_INPROC, 0, 0, D_NONE, -1, NULL },
	{ "random_daemon", "random: faultline serve (default)",
	  G_RANDOM, R_DAEMON, 0, 0, D_DEFAULT, -1, NULL },
	CHUNKS("random", "random: faultline serve", G_RANDOM, D_64K, D_2M,
	       -1, -1),
	TRACES("random", G_RANDOM, D_RANDOM_TRACE, D_RANDOM_SORTED),
	{ "huge_prepopulated", "linear, 2M hugetlb: prepopulated",
	  G_HUGE, R_PREPOP, 0, 0, D_NONE, -1, NULL },
	{ "huge_daemon", "linear, 2M hugetlb: faultline serve",
	  G_HUGE, R_DAEMON, 0, 0, D_DEFAULT, -1, NULL },
	/* no fixed chunk: a hugetlb page is always filled whole, 2M */
	{ "vcpus4_prepopulated", "random, 4 vCPUs: prepopulated",
	  G_VCPUS, R_PREPOP, 0, 0, D_NONE, -1, NULL },
	{ "vcpus4_daemon", "random, 4 vCPUs: faultline serve",
	  G_VCPUS, R_DAEMON, 0, 0, D_DEFAULT, -1, NULL },
	CHUNKS("vcpus4", "random, 4 vCPUs: serve", G_VCPUS, D_64K, D_2M,
	       -1, -1),
	{ "compute_prepopulated", "compute:8: prepopulated",
	  G_COMPUTE, R_PREPOP, 0, 0, D_NONE, -1, NULL },
	{ "compute_daemon", "compute:8: faultline serve",
	  G_COMPUTE, R_DAEMON, 0, 0, D_DEFAULT, -1, NULL },
	CHUNKS("compute", "compute:8: faultline serve", G_COMPUTE, D_64K,
	       D_2M, -1, -1),
	{ "sparse_prepopulated", "sparse: prepopulated",
	  G_SPARSE, R_PREPOP, 0, 0, D_NONE, -1, NULL },
	{ "sparse_copy_floor", "sparse: copy floor (touched bytes)",
	  G_SPARSE, R_FLOOR, 0, 0, D_NONE, -1, NULL },
	{ "sparse_file", "sparse: File backend",
	  G_SPARSE, R_FILE, 0, 0, D_NONE, -1, NULL },
	{ "sparse_daemon", "sparse: faultline serve (default)",
	  G_SPARSE, R_DAEMON, 0, 0, D_SPARSE, -1, NULL },
	CHUNKS("sparse", "sparse: faultline serve", G_SPARSE, D_SPARSE_64K,
	       D_SPARSE_2M, -1, -1),
	TRACES("sparse", G_SPARSE, D_TRACE, D_SORTED),
	/* sparse's runs in random order: first-touch order is not offsets' */
	{ "sparse_random_prepopulated", "sparse-random: prepopulated",
	  G_SPARSE_RND, R_PREPOP, 0, 0, D_NONE, -1, NULL },
	{ "sparse_random_copy_floor", "sparse-random: copy floor",
	  G_SPARSE_RND, R_FLOOR, 0, 0, D_NONE, -1, NULL },
	{ "sparse_random_file", "sparse-random: File backend",
	  G_SPARSE_RND, R_FILE, 0, 0, D_NONE, -1, NULL },
	{ "sparse_random_daemon", "sparse-random: faultline serve",
	  G_SPARSE_RND, R_DAEMON, 0, 0, D_SPARSE, -1, NULL },
	CHUNKS("sparse_random", "sparse-random: serve", G_SPARSE_RND,
	       D_SPARSE_64K, D_SPARSE_2M, -1, -1),
	{ "sparse_random_daemon_trace", "sparse-random: serve --prefetch TRACE",
	  G_SPARSE_RND, R_DAEMON, 0, 0, D_SRND_TRACE, -1, NULL },
	{ "sparse_random_daemon_trace_sorted",
	  "sparse-random: TRACE sorted", G_SPARSE_RND, R_DAEMON, 0, 0,
	  D_SRND_SORTED, -1, NULL },
#undef TRACES
#undef CHUNKS
#undef DAEMON
#undef SWEEP
};

_Static_assert(sizeof(rs_cases) / sizeof(*rs_cases) == NCASES,
	       "NCASES is the number of rs_cases");

static struct rs_mem *mem_of(struct rs_ctx *c, enum rs_group g)
{
	return rs_groups[g].big ? &c->big : &c->small;
}

static void make_config(struct rs_ctx *c, const struct rs_case *k,
			struct vmm_config *vc)
{
	const struct rs_group_def *g = &rs_groups[k->g];
	static const enum vmm_backend backend[] = {
		[R_PREPOP] = VMM_PREPOPULATED, [R_BESIDE] = VMM_PREPOPULATED,
		[R_FLOOR] = VMM_PREPOPULATED,
		[R_FILE] = VMM_FILE, [R_INPROC] = VMM_INPROC,
		[R_DAEMON] = VMM_UFFD,
	};

	memset(vc, 0, sizeof(*vc));
	vc->mem_file = mem_of(c, k->g)->path;
	vc->backend = backend[k->kind];
	vc->socket = c->daemon[k->daemon].sock;
	vc->huge = g->huge;
	vc->vcpus = g->vcpus;
	vc->guest = c->guest;
	vc->chunk = k->chunk;
	vc->engine_flags = k->flags;
	vc->copy_beside = k->kind == R_BESIDE;
	vmm_workload_parse(g->workload, &vc->wl);
}

/* ---- the copy floor --------------------------------------------------- */

struct floor_ctx {
	uint8_t *touched;	/* a byte per page */
};

static void mark_touched(void *arg, uint32_t j)
{
	struct floor_ctx *f = arg;

	f->touched[j] = 1;
}

/* The next run of touched pages at or after *p, up to 2 MiB: its length. */
static uint64_t next_run(const struct floor_ctx *f, uint64_t npages,
			 uint64_t *p)
{
	uint64_t n = 0;

	while (*p < npages && !f->touched[*p])
		(*p)++;
	while (*p + n < npages && f->touched[*p + n] && n < 512)
		n++;
	return n;
}

/*
 * One thread UFFDIO_COPYing the pages the workload touches (runs of up to
 * 2 MiB) from the page cache into registered memory: the copy every
 * restore does, without a guest or a fault.  Only copied pages are
 * compared: reading any other would wait on the uffd forever.
 */
static int copy_floor(const struct vmm_config *vc, uint64_t len,
		      struct rs_result *res)
{
	struct vmm_slice s;
	struct floor_ctx f;
	uint64_t npages = len / 4096, copied = 0, p, n;
	int fd = open(vc->mem_file, O_RDONLY), uffd;
	const uint8_t *src;
	uint8_t *dst;
	double t0;

	if (fd < 0)
		return -errno;
	src = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	dst = bench_map(len);
	f.touched = calloc(npages, 1);
	if (src == MAP_FAILED || !dst || !f.touched)
		return -ENOMEM;
	vmm_slices(&vc->wl, (uint32_t)npages, 1, &s);
	vmm_walk(&s, mark_touched, &f);
	uffd = bench_uffd_range(dst, len, false);
	if (uffd < 0)
		return uffd;
	t0 = bench_now();
	for (p = 0; (n = next_run(&f, npages, &p)); p += n) {
		if (uffd_copy(uffd, (uintptr_t)dst + p * 4096,
			      src + p * 4096, n * 4096, 0, NULL) < 0)
			return -EIO;
		copied += n * 4096;
	}
	res->ms = (bench_now() - t0) * 1e3;
	res->ok = true;
	for (p = 0; (n = next_run(&f, npages, &p)); p += n)
		res->ok &= !memcmp(dst + p * 4096, src + p * 4096, n * 4096);
	res->copied = (double)copied;
	return 0;
}

/* ---- one run of one case -------------------------------------------------- */

static int child_run(struct rs_ctx *c, const struct rs_case *k,
		     struct rs_result *res)
{
	struct vmm_config vc;
	struct vmm_result r;
	int ret;

	make_config(c, k, &vc);
	if (k->kind == R_FLOOR)
		return copy_floor(&vc, mem_of(c, k->g)->len, res);
	ret = vmm_run(&vc, &r);
	if (ret < 0) {
		fprintf(stderr, "faultline bench kvm-restore: %s: %s\n",
			k->label, vmm_error());
		return ret;
	}
	res->ok = r.checksum_ok;
	res->ms = r.elapsed_ms;
	res->faults = (double)r.faults;
	res->copied = (double)r.bytes_copied;
	return 0;
}

/* Fork a child for one run of one case: a fresh address space each. */
static int run_case(struct rs_ctx *c, const struct rs_case *k,
		    struct rs_result *res)
{
	int pfd[2], st;
	pid_t pid;
	ssize_t n;

	memset(res, 0, sizeof(*res));
	if (pipe(pfd) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (pid == 0) {
		struct rs_result r = { 0 };

		close(pfd[0]);
		huge_forget();
		alarm(300);	/* a lost fault must not hang the bench */
		r.err = child_run(c, k, &r);
		if (write(pfd[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	do
		n = read(pfd[0], res, sizeof(*res));
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (n != (ssize_t)sizeof(*res)) {
		fprintf(stderr, "faultline bench kvm-restore: %s: the run "
			"died (status 0x%x)\n", k->label, st);
		return -ECHILD;
	}
	return res->err;
}

/* ---- the daemons ---------------------------------------------------------- */

static int start_daemon(struct rs_ctx *c, enum rs_daemon d)
{
	const struct rs_daemon_def *dd = &rs_daemons[d];
	const char *args[8] = { "--mem-file", dd->big ? c->big.path :
				c->small.path, "--stats-json", c->stats[d] };
	int argc = 4;

	snprintf(c->stats[d], sizeof(c->stats[d]), "/tmp/flb-%d-%d.json",
		 (int)getpid(), d);
	if (dd->chunk) {
		args[argc++] = "--chunk";
		args[argc++] = dd->chunk;
	}
	if (dd->trace) {
		args[argc++] = dd->record ? "--record" : "--prefetch";
		args[argc++] = dd->sorted ? c->sorted[dd->trace] :
			       c->trace[dd->trace];
	}
	unlink(c->stats[d]);
	bench_path_add(c->stats[d]);
	return bench_daemon_start(&c->daemon[d], "kvm-restore", d, args);
}

static int cmp_run(const void *a, const void *b)
{
	const struct trace_run *x = a, *y = b;

	return (x->off > y->off) - (x->off < y->off);
}

/*
 * Write the trace at in sorted by offset to out: the runs trace_load()
 * makes of it (entries that touch the one before merged, as a replay
 * would), sorted.
 */
static int sort_trace(const char *in, const char *out)
{
	struct trace t;
	int ret = trace_init(&t);

	if (ret < 0)
		return ret;
	ret = trace_load(&t, in);
	if (ret == 0) {
		qsort(t.runs, t.n, sizeof(*t.runs), cmp_run);
		ret = trace_save(&t, out);
	}
	trace_free(&t);
	return ret;
}

/*
 * Record trace tr: one run of its group's workload through a recording
 * daemon (the trace is written when the session ends), then its sorted
 * copy.
 */
static int record_trace(struct rs_ctx *c, enum rs_trace tr)
{
	enum rs_daemon d = D_NONE;
	struct rs_case k = { .key = "record", .label = "recording a trace",
			     .g = trace_group[tr], .kind = R_DAEMON,
			     .cited = -1 };
	struct rs_result r;
	int ret;

	while (!rs_daemons[d].record || rs_daemons[d].trace != tr)
		d++;
	k.daemon = d;
	ret = start_daemon(c, d);
	if (ret == 0)
		ret = run_case(c, &k, &r);
	bench_daemon_stop(&c->daemon[d]);
	if (ret == 0 && access(c->trace[tr], R_OK) < 0)
		ret = -ENOENT;
	if (ret == 0)
		ret = sort_trace(c->trace[tr], c->sorted[tr]);
	if (ret < 0)
		fprintf(stderr, "faultline bench kvm-restore: cannot record "
			"the %s trace: %s\n", rs_groups[k.g].name,
			strerror(-ret));
	return ret;
}

/* The daemons the selected cases need, after the traces they replay. */
static int start_daemons(struct rs_ctx *c, const bool *sel)
{
	bool need[D_N] = { false }, trace[T_N] = { false };
	int ret = 0;

	for (int i = 0; i < NCASES; i++)
		if (sel[i]) {
			need[rs_cases[i].daemon] = true;
			trace[rs_daemons[rs_cases[i].daemon].trace] = true;
		}
	for (int tr = T_NONE + 1; tr < T_N && ret == 0; tr++)
		if (trace[tr])
			ret = record_trace(c, tr);
	for (int d = D_NONE + 1; d < D_N && ret == 0; d++)
		if (need[d])
			ret = start_daemon(c, d);
	return ret;
}

/* ---- the benchmark ------------------------------------------------------- */

static int open_mem(struct rs_mem *m, uint64_t len)
{
	m->len = len;
	m->fd = bench_memfile(len, m->path, false);
	if (m->fd >= 0)
		return 0;
	fprintf(stderr, "faultline bench kvm-restore: cannot create the "
		"memory file in /tmp: %s\n", strerror(-m->fd));
	return m->fd;
}

static void close_mem(struct rs_mem *m)
{
	if (m->fd >= 0) {
		close(m->fd);
		unlink(m->path);
	}
	m->fd = -1;
}

/* The cases --only selects, and the references of their groups. */
static void select_cases(const struct bench_opts *o, bool *sel)
{
	bool group[G_N] = { false };

	for (int i = 0; i < NCASES; i++)
		if ((sel[i] = bench_selected(o, rs_cases[i].key)))
			group[rs_cases[i].g] = true;
	for (int i = 0; i < NCASES; i++)
		sel[i] |= rs_cases[i].kind == R_PREPOP && group[rs_cases[i].g];
}

static bool any_in(const bool *sel, bool (*pred)(const struct rs_case *))
{
	for (int i = 0; i < NCASES; i++)
		if (sel[i] && pred(&rs_cases[i]))
			return true;
	return false;
}

static bool is_huge(const struct rs_case *k)
{
	return rs_groups[k->g].huge;
}

static bool is_big(const struct rs_case *k)
{
	return rs_groups[k->g].big;
}

static const char *case_label(void *ctx, int i)
{
	(void)ctx;
	return rs_cases[i].label;
}

static bool case_wanted(void *ctx, int i)
{
	return ((struct rs_results *)ctx)->sel[i];
}

static int sample(void *ctx, int r, int i, struct bench_sample *s)
{
	struct rs_results *res = ctx;
	struct rs_result one = { 0 };
	int ret = run_case(res->c, &rs_cases[i], &one);

	(void)r;
	s->sec = one.ms * 1e-3;
	s->faults = one.faults;
	s->copied = one.copied;
	s->ok = one.ok;
	return ret;
}

static uint64_t touched_bytes(struct rs_ctx *c, enum rs_group g)
{
	struct vmm_workload w;
	struct vmm_slice s;

	vmm_workload_parse(rs_groups[g].workload, &w);
	vmm_slices(&w, (uint32_t)(mem_of(c, g)->len / 4096), 1, &s);
	return vmm_slice_touches(&s) * 4096;
}

static int measure(struct rs_ctx *c, const struct bench_opts *o,
		   struct rs_results *res)
{
	int ret;

	select_cases(o, res->sel);
	ret = open_mem(&c->small, o->size ? o->size : o->quick ? 8 * MIB :
		       128 * MIB);
	if (ret == 0 && any_in(res->sel, is_big))
		ret = open_mem(&c->big, o->quick ? 64 * MIB : GIB);
	if (ret < 0)
		return ret;
	for (int g = 0; g < G_N; g++)
		res->touched[g] = mem_of(c, g)->fd >= 0 ? touched_bytes(c, g) : 0;
	if (any_in(res->sel, is_huge)) {
		ret = huge_reserve((long)(c->small.len >> 21) + 2);
		if (ret < 0) {
			fprintf(stderr, "faultline bench kvm-restore: cannot "
				"reserve 2 MiB hugetlb pages "
				"(/proc/sys/vm/nr_hugepages): %s\n",
				strerror(-ret));
			return ret;
		}
	}
	ret = start_daemons(c, res->sel);
	if (ret == 0)
		ret = bench_loop_run(&res->l);
	huge_restore();
	return ret;
}

static void rs_free(struct rs_ctx *c, struct rs_results *res)
{
	huge_restore();
	for (int d = 0; d < D_N; d++) {
		bench_daemon_stop(&c->daemon[d]);
		if (c->stats[d][0])
			bench_unlink(c->stats[d]);
	}
	close_mem(&c->small);
	close_mem(&c->big);
	for (int tr = T_NONE + 1; tr < T_N; tr++) {
		bench_unlink(c->trace[tr]);
		bench_unlink(c->sorted[tr]);
	}
	bench_loop_free(&res->l);
}

int bench_restore(const struct bench_opts *o, struct bench_table *t)
{
	struct rs_ctx c = { .small = { .fd = -1 }, .big = { .fd = -1 } };
	struct rs_results res = {
		.c = &c,
		.l = { .bench = "kvm-restore", .runs = o->runs,
		       .ncases = NCASES, .label = case_label,
		       .sample = sample, .wanted = case_wanted },
	};
	int ret;

	c.guest = kvm_probe() == 0 ? VMM_GUEST_KVM : VMM_GUEST_PROCESS;
	/* What a machine without KVM runs, anywhere (tests/bench_quick.c). */
	if (getenv("FAULTLINE_GUEST") &&
	    !strcmp(getenv("FAULTLINE_GUEST"), "process"))
		c.guest = VMM_GUEST_PROCESS;
	for (int tr = T_NONE + 1; tr < T_N; tr++) {
		const char *g = rs_groups[trace_group[tr]].name;

		snprintf(c.trace[tr], sizeof(c.trace[tr]),
			 "/tmp/flb-%d-%s.trace", (int)getpid(), g);
		snprintf(c.sorted[tr], sizeof(c.sorted[tr]),
			 "/tmp/flb-%d-%s-sorted.trace", (int)getpid(), g);
		bench_path_add(c.trace[tr]);
		bench_path_add(c.sorted[tr]);
	}
	res.l.ctx = &res;
	ret = measure(&c, o, &res);
	if (!ret) {
		restore_table_head(t, &c, o->runs);
		restore_table_rows(t, &res, c.guest == VMM_GUEST_KVM);
	}
	rs_free(&c, &res);
	return ret;
}

