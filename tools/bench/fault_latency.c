// SPDX-License-Identifier: Apache-2.0
/*
 * fault_latency.c - `faultline bench fault-latency`: the round trip of one
 * 4 KiB fault at a random address (fault, read, COPY, wake), p50/p90/p99/max,
 * served by the library in this process (fl_engine, chunk 4096) and by the
 * daemon (`faultline serve`, a Firecracker-style client over its socket),
 * beside the kernel's own first-touch faults on anonymous memory (the
 * reference) and on a private mapping of the memory file (Firecracker's File
 * backend), and a minimal handler (one thread: read the message,
 * UFFDIO_COPY 4 KiB, which wakes; no engine): the kernel's floor for a
 * userfaultfd round trip.  Last, a fault during a default restore: a second
 * daemon with its default flags (64 KiB chunks, prefetch and background
 * restore on), whose client starts touching as soon as it has connected,
 * while the daemon fills the region beside it.
 *
 * Decisions: every touch is one write access that keeps the data (an atomic
 * add of 0) to a distinct random page, the value read back verifies it, and
 * the library and the first daemon run with prefetch and background restore
 * off, so that a touch is a fault.  Each touch's fault is counted (the
 * thread's page faults before and after it, outside the timing): percentiles
 * are taken over touches that faulted only, and only when at least
 * MIN_FAULTED did; each mode's faulted fraction is reported.  Percentiles
 * are sample values (nearest rank), pooled over runs.
 *
 * During a restore, a page the daemon filled first does not fault, so the
 * faulted touches are the ones that met the restore still running.  When the
 * restore ended is measured beside the touches: a thread polls mincore()
 * every millisecond from the handshake until every page is resident (as
 * bench_wait_resident() does; a short wakeup each millisecond beside
 * the touches), which dates the end to within about a millisecond; the
 * client joins it after its touches, then checks the whole region.
 * restore_touches_during_restore_fraction is the share of all touches
 * started before that date (over the faulted touches alone it would be 1 by
 * construction).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "fc_client.h"
#include "kernel/uffd.h"

enum lat_mode { L_ANON, L_FILE, L_MIN, L_LIB, L_DAEMON, L_RESTORE, L_NMODES };

static const struct {
	const char *key, *label;
} modes[L_NMODES] = {
	[L_ANON]    = { "anon", "anon first touch (kernel)" },
	[L_FILE]    = { "file", "mmap of memory file (File backend)" },
	[L_MIN]     = { "minimal", "minimal handler (read, COPY 4K)" },
	[L_LIB]     = { "lib", "library in-process, chunk 4K" },
	[L_DAEMON]  = { "daemon", "faultline serve, FC client, 4K" },
	[L_RESTORE] = { "restore", "serve default, touch during restore" },
};

static const double pcts[] = { 50, 90, 99, 100 };
static const char *const pct_names[] = { "p50", "p90", "p99", "max" };

#define NPCT 4
/* Fewer faulted touches than this: no percentiles (they would say little). */
#define MIN_FAULTED 50

struct lat_ctx {
	uint64_t len;		/* region size */
	int nfaults;		/* per run */
	uint64_t *order;	/* page indices, shuffled */
	char path[64];		/* the memory file */
	int fd;
	double *samples[L_NMODES];
	int nsamples[L_NMODES];		/* touches that faulted */
	int ntouches[L_NMODES];
	bool ok[L_NMODES];
	const char *why[L_NMODES];	/* why a mode was left out */
	double *when;		/* each touch's start, of the last touch() */
	uint64_t want;		/* checksum of the whole memory file */
	double *restore_ms;	/* per run: handshake to all pages resident */
	int nrestores;		/* runs that measured it */
	int ntouched_during;	/* touches started before the restore ended */
	char stats_path[64];	/* the restore daemon's --stats-json */
	struct fl_stats served;	/* its fault latency, read to wake, pooled */
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static void shuffle(struct lat_ctx *c)
{
	uint64_t n = c->len / 4096;

	for (uint64_t i = 0; i < n; i++)
		c->order[i] = i;
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = rng() % (i + 1), t = c->order[i];

		c->order[i] = c->order[j];
		c->order[j] = t;
	}
}

/* Page faults this thread has taken so far. */
static uint64_t thread_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt + ru.ru_majflt;
}

/*
 * Touch the first nfaults pages of the permutation, timing each one; data:
 * the pages must hold the memory file's pattern (else zeros).
 */
static void touch(struct lat_ctx *c, enum lat_mode m, uint8_t *p, bool data)
{
	double *s = c->samples[m] + c->nsamples[m];
	bool ok = true;
	int n = 0;

	for (int i = 0; i < c->nfaults; i++) {
		uint64_t pg = c->order[i];
		uint64_t *w = (uint64_t *)(p + pg * 4096);
		uint64_t f0 = thread_faults();
		double t0 = bench_now();
		uint64_t v = __atomic_fetch_add(w, 0, __ATOMIC_RELAXED);
		double t1 = bench_now();

		c->when[i] = t0;
		if (thread_faults() != f0)	/* a touch that did not fault
						 * says nothing of a fault */
			s[n++] = t1 - t0;
		ok &= v == (data ? ~pg : 0);
	}
	/* The whole page, not just the word the touch read. */
	if (data) {
		uint8_t tmp[4096];

		for (int i = 0; i < c->nfaults && ok; i++) {
			uint64_t pg = c->order[i];

			bench_pattern(tmp, 4096, pg * 4096);
			ok = !memcmp(tmp, p + pg * 4096, 4096);
		}
	}
	c->nsamples[m] += n;
	c->ntouches[m] += c->nfaults;
	c->ok[m] &= ok;
}

static int run_anon(struct lat_ctx *c)
{
	uint8_t *p = bench_map(c->len);

	if (!p)
		return -ENOMEM;
	madvise(p, c->len, MADV_NOHUGEPAGE);
	touch(c, L_ANON, p, false);
	bench_unmap(p, c->len);
	return 0;
}

static int run_file(struct lat_ctx *c)
{
	uint8_t *p = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_PRIVATE,
			  c->fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	madvise(p, c->len, MADV_RANDOM);	/* no fault-around */
	touch(c, L_FILE, p, true);
	munmap(p, c->len);
	return 0;
}

static int run_lib(struct lat_ctx *c)
{
	struct fl_engine_opts eo = { .chunk_size = 4096, .flags =
		FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	struct fl_source *src = NULL;
	struct fl_engine *e = NULL;
	uint8_t *p = bench_map(c->len);
	int ret;

	if (!p)
		return -ENOMEM;
	madvise(p, c->len, MADV_NOHUGEPAGE);
	ret = fl_source_open(c->path, &src);
	if (ret < 0)
		goto out;
	ret = fl_engine_create(&eo, &e);
	if (ret < 0)
		goto out;

	struct fl_region_desc rd = {
		.addr = (uintptr_t)p, .len = c->len, .page_size = 4096,
		.src_offset = 0, .flags = FL_REGION_REGISTER,
	};

	ret = fl_engine_add_region(e, &rd, src);
	if (ret < 0)
		goto out;
	ret = fl_engine_start(e, 1);
	if (ret < 0)
		goto out;
	touch(c, L_LIB, p, true);
	fl_engine_stop(e);
out:
	if (ret < 0)
		fprintf(stderr, "faultline bench fault-latency: library: %s\n",
			fl_last_error());
	if (e)
		fl_engine_destroy(e);
	if (src)
		fl_source_put(src);
	bench_unmap(p, c->len);
	return ret;
}

struct minimal {
	int uffd, stop;
	const uint8_t *src;	/* the memory file, mapped */
	uint64_t base;
};

/* The minimal handler: one message at a time, COPY its page (wakes it). */
static void *minimal_main(void *arg)
{
	struct minimal *h = arg;
	struct pollfd pf[2] = { { .fd = h->uffd, .events = POLLIN },
				{ .fd = h->stop, .events = POLLIN } };
	struct uffd_msg msg;

	while (poll(pf, 2, -1) > 0 && !(pf[1].revents & POLLIN)) {
		if (read(h->uffd, &msg, sizeof(msg)) != sizeof(msg) ||
		    msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		uint64_t pg = msg.arg.pagefault.address & ~4095ull;

		uffd_copy(h->uffd, pg, h->src + (pg - h->base), 4096, 0, NULL);
	}
	return NULL;
}

static int run_minimal(struct lat_ctx *c)
{
	struct minimal h = { .stop = eventfd(0, EFD_CLOEXEC) };
	uint8_t *p = bench_map(c->len);
	uint64_t one = 1;
	pthread_t th;
	int ret = -ENOMEM;

	h.src = mmap(NULL, c->len, PROT_READ, MAP_SHARED | MAP_POPULATE,
		     c->fd, 0);
	if (!p || h.src == MAP_FAILED || h.stop < 0)
		goto out;
	madvise(p, c->len, MADV_NOHUGEPAGE);
	h.base = (uintptr_t)p;
	h.uffd = bench_uffd_range(p, c->len, false);
	ret = h.uffd < 0 ? h.uffd :
	      -pthread_create(&th, NULL, minimal_main, &h);
	if (ret == 0) {
		touch(c, L_MIN, p, true);
		if (write(h.stop, &one, sizeof(one)) != sizeof(one))
			ret = -EIO;
		pthread_join(th, NULL);
	}
	if (h.uffd >= 0)
		close(h.uffd);
out:
	if (h.src != MAP_FAILED && h.src)
		munmap((void *)h.src, c->len);
	if (h.stop >= 0)
		close(h.stop);
	bench_unmap(p, c->len);
	return ret;
}

/*
 * Start a daemon for mode m with args (NULL terminated) and hand it a
 * Firecracker-style client of one 4 KiB-page region over the memory file.
 * 0 or -errno (said on stderr); either way the caller closes fc and stops d.
 */
static int daemon_client(const struct lat_ctx *c, enum lat_mode m,
			 const char *const *args, struct bench_daemon *d,
			 struct fc_client *fc)
{
	uint64_t size = c->len;
	int ret;

	fc_client_init(fc);
	ret = bench_daemon_start(d, "fault-latency", m, args);
	if (ret < 0)
		return ret;	/* it said why */
	ret = fc_client_map(fc, 1, &size, 4096);
	if (ret == 0) {
		madvise(fc->regions[0].addr, size, MADV_NOHUGEPAGE);
		ret = bench_daemon_connect(fc, d->sock);
	}
	if (ret < 0)
		fprintf(stderr, "faultline bench fault-latency: %s: %s\n",
			modes[m].key, strerror(-ret));
	return ret;
}

static int run_daemon(struct lat_ctx *c)
{
	/* Not --once: bench_daemon_start()'s readiness probe is a session. */
	const char *args[] = { "--mem-file", c->path, "--chunk", "4K",
			       "--no-prefetch", "--no-background", NULL };
	struct bench_daemon d = { 0 };
	struct fc_client fc;
	int ret = daemon_client(c, L_DAEMON, args, &d, &fc);

	if (ret == 0)
		touch(c, L_DAEMON, fc.regions[0].addr, true);
	fc_client_close(&fc);
	bench_daemon_stop(&d);
	return ret;
}

/* A thread waiting beside the touches for the restore to end. */
struct restore_watch {
	const uint8_t *p;
	uint64_t len;
	pthread_t thread;
	int ret;		/* bench_wait_resident()'s */
	double start, end;	/* bench_now(): started; all pages resident */
};

static void *watch_main(void *arg)
{
	struct restore_watch *w = arg;

	w->ret = bench_wait_resident(w->p, w->len);
	w->end = bench_now();
	return NULL;
}

static int watch_start(struct restore_watch *w, const uint8_t *p,
		       uint64_t len)
{
	*w = (struct restore_watch){ .p = p, .len = len, .start = bench_now() };
	return -pthread_create(&w->thread, NULL, watch_main, w);
}

/* Wait for the restore to end; 0 or -errno. */
static int watch_join(struct restore_watch *w)
{
	pthread_join(w->thread, NULL);
	return w->ret;
}

/* The touches just made by touch(): how many started before t. */
static int touches_before(const struct lat_ctx *c, double t)
{
	int n = 0;

	for (int i = 0; i < c->nfaults; i++)
		n += c->when[i] < t;
	return n;
}

/*
 * Add the fault latency histogram (read to wake, inside the daemon) of
 * the session the restore daemon wrote to its --stats-json file.
 */
static void add_served(struct lat_ctx *c)
{
	char line[4096];
	FILE *f = fopen(c->stats_path, "r");
	struct json_object *j = NULL, *st, *h, *v;

	if (!f)
		return;
	if (fgets(line, sizeof(line), f))
		j = json_tokener_parse(line);
	fclose(f);
	unlink(c->stats_path);
	if (!j || !json_object_object_get_ex(j, "stats", &st) ||
	    !json_object_object_get_ex(st, "latency_log2_ns_hist", &h)) {
		json_object_put(j);
		return;
	}
	for (size_t i = 0; i < FL_LAT_BUCKETS &&
	     i < json_object_array_length(h); i++)
		c->served.lat_hist[i] += (uint64_t)json_object_get_int64(
			json_object_array_get_idx(h, i));
	if (json_object_object_get_ex(st, "latency_ns_max", &v) &&
	    (uint64_t)json_object_get_int64(v) > c->served.lat_ns_max)
		c->served.lat_ns_max = (uint64_t)json_object_get_int64(v);
	json_object_put(j);
}

/*
 * A daemon with its default flags: touch at once, while it restores the
 * region in the background, then wait for the restore to end and check
 * the whole region.  Its own account of each fault (read to wake) is
 * kept beside the client's.
 */
static int run_restore(struct lat_ctx *c)
{
	const char *args[] = { "--mem-file", c->path, "--stats-json",
			       c->stats_path, NULL };
	struct bench_daemon d = { 0 };
	struct restore_watch w;
	struct fc_client fc;
	uint8_t *p;
	int ret = daemon_client(c, L_RESTORE, args, &d, &fc);

	if (ret < 0)
		goto out;
	p = fc.regions[0].addr;
	ret = watch_start(&w, p, c->len);
	if (ret < 0)
		goto out;
	touch(c, L_RESTORE, p, true);
	ret = watch_join(&w);
	if (ret < 0) {
		fprintf(stderr, "faultline bench fault-latency: restore: "
			"waiting for every page: %s\n", strerror(-ret));
		goto out;
	}
	c->restore_ms[c->nrestores++] = (w.end - w.start) * 1e3;
	c->ntouched_during += touches_before(c, w.end);
	c->ok[L_RESTORE] &= bench_sum(p, c->len) == c->want;
out:
	fc_client_close(&fc);
	bench_daemon_stop(&d);	/* the session's stats are written by then */
	add_served(c);
	return ret;
}

/* Percentile of sorted v (nearest rank). */
static double pct(const double *v, int n, double p)
{
	int i = (int)(p / 100 * n + 0.5) - 1;

	if (i < 0)
		i = 0;
	if (i >= n)
		i = n - 1;
	return n ? v[i] : 0;
}

/* Did enough of mode m's touches fault for percentiles? */
static bool enough(const struct lat_ctx *c, enum lat_mode m)
{
	return c->nsamples[m] >= MIN_FAULTED;
}

/* Append a line to the notes printed under the table. */
static void __attribute__((format(printf, 2, 3)))
add_note(struct bench_table *t, const char *fmt, ...)
{
	size_t len = strlen(t->notes);
	va_list ap;

	if (len && len + 1 < sizeof(t->notes))
		t->notes[len++] = '\n';
	va_start(ap, fmt);
	vsnprintf(t->notes + len, sizeof(t->notes) - len, fmt, ap);
	va_end(ap);
}

/* Mode m's p50/p90/p99/max rows; sorts its samples. */
static void add_rows(struct bench_table *t, struct lat_ctx *c,
		     enum lat_mode m)
{
	static char keys[L_NMODES][NPCT][32], labels[L_NMODES][NPCT][64];
	int n = c->nsamples[m];

	bench_median(c->samples[m], n);	/* sorts */
	for (int k = 0; k < NPCT; k++) {
		double v = pct(c->samples[m], n, pcts[k]);

		snprintf(keys[m][k], sizeof(keys[m][k]), "%s_%s",
			 modes[m].key, pct_names[k]);
		snprintf(labels[m][k], sizeof(labels[m][k]), "%s %s",
			 modes[m].label, pct_names[k]);
		int i = bench_add_row(t, keys[m][k], labels[m][k], &v, 1,
				      c->ok[m], -1);

		/* Compare each percentile with the kernel's own. */
		t->rows[i].cmp = m == L_ANON ? -1 : k;
		if (m == L_ANON && k == 0)
			t->ref = i;
		if ((m == L_LIB || m == L_DAEMON) && k == 0) {
			t->rows[i].cited = 2228e3 / 32768;
			t->rows[i].cited_note = "(mean, in-guest)";
		}
	}
}

/* Fact M_PCT_vs_minimal: mode m's percentile k over the minimal handler's. */
static void add_vs_minimal(struct bench_table *t, const struct lat_ctx *c,
			   enum lat_mode m, int k)
{
	static char keys[L_NMODES][NPCT][40];

	if (!enough(c, m) || !enough(c, L_MIN))
		return;
	snprintf(keys[m][k], sizeof(keys[m][k]), "%s_%s_vs_minimal",
		 modes[m].key, pct_names[k]);
	bench_add_kv(t, keys[m][k],
		     pct(c->samples[m], c->nsamples[m], pcts[k]) /
		     pct(c->samples[L_MIN], c->nsamples[L_MIN], pcts[k]));
}

/* The facts under the table (after add_rows(): samples sorted). */
static void add_facts(struct bench_table *t, struct lat_ctx *c)
{
	static char fk[L_NMODES][32];

	bench_add_kv(t, "faults_per_run", c->nfaults);
	/* The floor for a userfaultfd round trip: how far above it each is. */
	add_vs_minimal(t, c, L_LIB, 0);
	add_vs_minimal(t, c, L_DAEMON, 0);
	add_vs_minimal(t, c, L_RESTORE, 0);
	add_vs_minimal(t, c, L_RESTORE, 2);
	for (int m = 0; m < L_NMODES; m++) {
		snprintf(fk[m], sizeof(fk[m]), "%s_faulted_fraction",
			 modes[m].key);
		if (c->ntouches[m])
			bench_add_kv(t, fk[m], (double)c->nsamples[m] /
				     c->ntouches[m]);
	}
	/* Inside the daemon: log2 buckets, so upper bounds (..._le_us). */
	if (c->served.lat_ns_max) {
		bench_add_kv(t, "restore_served_p50_le_us",
			     fl_stats_percentile(&c->served, 50) / 1e3);
		bench_add_kv(t, "restore_served_p99_le_us",
			     fl_stats_percentile(&c->served, 99) / 1e3);
	}
	if (c->nrestores) {
		bench_add_kv(t, "restore_complete_ms",
			     bench_median(c->restore_ms, c->nrestores));
		bench_add_kv(t, "restore_touches_during_restore_fraction",
			     (double)c->ntouched_during /
			     ((double)c->nrestores * c->nfaults));
	}
}

static void add_notes(struct bench_table *t, const struct lat_ctx *c,
		      int runs)
{
	add_note(t, "reference: first write to fresh anonymous memory (each "
		 "percentile vs the same percentile of it).");
	add_note(t, "Every touch is one write to a distinct random page, %d "
		 "per run, pooled over %d run%s; percentiles are over the "
		 "touches that faulted (*_faulted_fraction); lib and daemon: "
		 "prefetch and background restore off.",
		 c->nfaults, runs, runs == 1 ? "" : "s");
	add_note(t, "restore: a second daemon, default flags (adaptive "
		 "chunk, prefetch and background on), touched from the "
		 "handshake on; only touches meeting the restore running "
		 "fault.  restore_complete_ms: handshake to all pages resident "
		 "(mincore); restore_touches_during_restore_fraction: touches "
		 "started before then; restore_served_*_le_us: the daemon's "
		 "own read-to-wake, bucket upper bounds (the rest of a touch "
		 "is waking its handler and the engine lock).");
	for (int m = 0; m < L_NMODES; m++) {
		if (c->why[m])
			add_note(t, "%s mode left out: %s", modes[m].key,
				 c->why[m]);
		else if (c->ntouches[m] && !enough(c, m))
			add_note(t, "%s: %d of %d touches faulted, fewer than "
				 "%d: no percentiles", modes[m].key,
				 c->nsamples[m], c->ntouches[m], MIN_FAULTED);
	}
}

/* The loop's cases are the modes, each run over a new permutation. */
static int start_run(void *ctx, int r)
{
	(void)r;
	shuffle(ctx);
	return 0;
}

/* A daemon mode that failed once is left out. */
static bool mode_wanted(void *ctx, int m)
{
	return !((struct lat_ctx *)ctx)->why[m];
}

static const char *mode_label(void *ctx, int m)
{
	(void)ctx;
	return modes[m].label;
}

/* Mode m's touches, pooled in c->samples[m] (the percentiles' input). */
static int run_mode(void *ctx, int r, int m, struct bench_sample *s)
{
	static int (*const run[L_NMODES])(struct lat_ctx *) = {
		[L_ANON] = run_anon, [L_FILE] = run_file,
		[L_MIN] = run_minimal, [L_LIB] = run_lib,
		[L_DAEMON] = run_daemon, [L_RESTORE] = run_restore,
	};
	struct lat_ctx *c = ctx;
	int ret = run[m](c);

	(void)r;
	s->ok = c->ok[m];
	if (ret < 0 && (m == L_DAEMON || m == L_RESTORE)) {
		c->why[m] = "faultline serve did not serve the client "
			    "(see above)";
		return 0;
	}
	return ret;
}

int bench_fault_latency(const struct bench_opts *o, struct bench_table *t)
{
	struct lat_ctx c = { .fd = -1 };
	int runs = o->runs, ret = 0;
	struct bench_loop l = {
		.bench = "fault-latency", .runs = runs, .ncases = L_NMODES,
		.ctx = &c, .label = mode_label, .sample = run_mode,
		.start = start_run, .wanted = mode_wanted,
	};

	c.len = o->size ? o->size : o->quick ? 16 * MIB : 256 * MIB;
	c.nfaults = o->quick ? 500 : 10000;
	if ((uint64_t)c.nfaults > c.len / 4096)
		c.nfaults = (int)(c.len / 4096);
	rng_state = 0x2545f4914f6cdd1dULL;
	c.order = malloc(c.len / 4096 * sizeof(*c.order));
	c.when = malloc((size_t)c.nfaults * sizeof(*c.when));
	c.restore_ms = malloc((size_t)runs * sizeof(*c.restore_ms));
	for (int m = 0; m < L_NMODES; m++) {
		c.samples[m] = malloc((size_t)runs * (size_t)c.nfaults *
				      sizeof(double));
		c.ok[m] = true;
		if (!c.samples[m])
			ret = -ENOMEM;
	}
	if (!c.order || !c.when || !c.restore_ms || ret < 0) {
		ret = -ENOMEM;
		goto out;
	}
	c.fd = bench_memfile(c.len, c.path, false);
	if (c.fd < 0) {
		ret = c.fd;
		goto out;
	}
	c.want = bench_pattern_sum(c.len);
	snprintf(c.stats_path, sizeof(c.stats_path), "/tmp/flb-lat-%d.json",
		 (int)getpid());
	unlink(c.stats_path);
	bench_path_add(c.stats_path);

	ret = bench_loop_run(&l);
	if (ret < 0)
		goto out;

	t->title = "one 4 KiB fault at a random address: round trip, "
		   "library and daemon";
	t->cited = "Marco Marangoni on \"KVM: x86/mmu: Add automatic "
		   "prefaulting/prefetching for TDP MMU faults\" (kernel "
		   "mailing list): a UFFD handler serving 4 KiB chunks took "
		   "2228 ms to fault 128 MiB in a nested guest, 68 us a fault";
	t->cited_unit = "us";
	t->unit = "us";
	t->per_gib = false;
	t->bytes = c.len;
	t->runs = runs;
	t->ref = 0;
	for (int m = 0; m < L_NMODES; m++) {
		if (enough(&c, m)) {
			add_rows(t, &c, m);
		} else if (!c.ok[m]) {	/* no row to say so */
			fprintf(stderr, "faultline bench fault-latency: %s "
				"read wrong bytes\n", modes[m].label);
			ret = -EIO;
			goto out;
		}
	}
	add_facts(t, &c);
	add_notes(t, &c, runs);
	ret = 0;
out:
	if (c.fd >= 0) {
		close(c.fd);
		bench_unlink(c.path);
	}
	if (c.stats_path[0])
		bench_unlink(c.stats_path);
	for (int m = 0; m < L_NMODES; m++)
		free(c.samples[m]);
	free(c.restore_ms);
	free(c.when);
	free(c.order);
	bench_loop_free(&l);
	return ret;
}
