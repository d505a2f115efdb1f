/*
 * restore.c - `faultline bench kvm-restore` (seed 003, issue 4): the time for
 * a "guest" to touch all of its memory one byte per 4 KiB page right after a
 * snapshot restore, for each way of restoring it: prepopulated anonymous
 * memory (the reference), a private mapping of the memory file (the kernel's
 * demand paging, Firecracker's File backend), the library engine in-process
 * (a naive 4 KiB handler, a chunk sweep without prefetch, the default
 * engine) and the real daemon (`faultline serve`) with a Firecracker-style
 * client.  Workloads: linear, random (a fixed permutation), strided (a
 * 64 KiB record every 256 KiB) and sparse (1 MiB runs every 16 MiB of a
 * larger memory).
 *
 * Decisions: this machine has no /dev/kvm (it is itself a PVM guest), so the
 * issue's fallback applies: the guest is a thread of a forked child process
 * (a fresh mm per run, like a restored VMM) and each touch is one atomic
 * write that keeps the data, so it takes exactly one fault.  The timer covers
 * only the guest's touches (for the daemon, from connect to the last touch);
 * the touched pages are then checksummed against the file so no number comes
 * from a broken path.  Cases run round-robin within each run, and each daemon
 * configuration is one `faultline serve` process for all runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "faultline.h"
#include "fc_client.h"
#include "kernel/uffd.h"
#include "hugetlb.h"

enum rs_wl { W_LINEAR, W_RANDOM, W_STRIDED, W_SPARSE, W_N };
/*
 * B_BESIDE: prepopulated, and while the guest runs another thread of its
 * process COPYs the whole memory file into a scratch region, once: the
 * work any copying restore does, without the guest ever waiting for it.
 * What that row costs over the reference is this machine's price for the
 * copy beside the guest (caches, memory bandwidth, a nested host); a
 * restore cannot do better than it.
 */
enum rs_backend { B_PREPOP, B_FILE, B_LIB, B_DAEMON, B_BESIDE };
/* D_RECORD records the sparse working set that D_SPARSE_TRACE replays. */
enum rs_daemon { D_DEFAULT, D_2M, D_SPARSE, D_SPARSE_TRACE, D_RECORD, D_N };

#define NO_PF (FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND)
#define PATCHED "(2M handler + KVM prefault patch)"

static const struct rs_case {
	const char *key, *label;
	enum rs_wl wl;
	enum rs_backend b;
	uint64_t chunk;		/* engine chunk; 0: default */
	unsigned int flags;	/* FL_ENGINE_* */
	int daemon;		/* enum rs_daemon for B_DAEMON */
	double seed;		/* ms, seed 003; < 0: none */
	const char *seed_note;
	uint64_t page_size;	/* 0: 4 KiB; 2 MiB: hugetlb memory */
} cases[] = {
	{ "linear_prepopulated", "linear: prepopulated (pread before)",
	  W_LINEAR, B_PREPOP, 0, 0, 0, -1, NULL, 0 },
	{ "linear_copy_beside", "linear: prepopulated + COPY beside",
	  W_LINEAR, B_BESIDE, 0, 0, 0, -1, NULL, 0 },
	{ "linear_file", "linear: mmap of file (File backend)",
	  W_LINEAR, B_FILE, 0, 0, 0, -1, NULL, 0 },
	{ "linear_uffd_naive_4k", "linear: uffd naive 4K (in-proc)",
	  W_LINEAR, B_LIB, 4 * KIB, NO_PF, 0, 2228, NULL, 0 },
	{ "linear_inproc_64k", "linear: in-proc 64K, no prefetch",
	  W_LINEAR, B_LIB, 64 * KIB, NO_PF, 0, 645, "(chunk list)", 0 },
	{ "linear_inproc_512k", "linear: in-proc 512K, no prefetch",
	  W_LINEAR, B_LIB, 512 * KIB, NO_PF, 0, 543, NULL, 0 },
	{ "linear_inproc_2m", "linear: in-proc 2M, no prefetch",
	  W_LINEAR, B_LIB, 2 * MIB, NO_PF, 0, 513, NULL, 0 },
	{ "linear_inproc_default", "linear: in-proc default engine",
	  W_LINEAR, B_LIB, 0, 0, 0, 151, PATCHED, 0 },
	{ "linear_daemon", "linear: daemon (serve, default)",
	  W_LINEAR, B_DAEMON, 0, 0, D_DEFAULT, 151, PATCHED, 0 },
	{ "linear_daemon_2m", "linear: daemon --chunk 2M",
	  W_LINEAR, B_DAEMON, 0, 0, D_2M, 513, NULL, 0 },
	{ "huge_prepopulated", "linear, 2M hugetlb: prepopulated",
	  W_LINEAR, B_PREPOP, 0, 0, 0, -1, NULL, 2 * MIB },
	{ "huge_daemon", "linear, 2M hugetlb: daemon (default)",
	  W_LINEAR, B_DAEMON, 0, 0, D_DEFAULT, -1, NULL, 2 * MIB },
	{ "random_prepopulated", "random: prepopulated (pread before)",
	  W_RANDOM, B_PREPOP, 0, 0, 0, -1, NULL, 0 },
	{ "random_copy_beside", "random: prepopulated + COPY beside",
	  W_RANDOM, B_BESIDE, 0, 0, 0, -1, NULL, 0 },
	{ "random_file", "random: mmap of file (File backend)",
	  W_RANDOM, B_FILE, 0, 0, 0, -1, NULL, 0 },
	{ "random_inproc_default", "random: in-proc default engine",
	  W_RANDOM, B_LIB, 0, 0, 0, -1, NULL, 0 },
	{ "random_daemon", "random: daemon (serve, default)",
	  W_RANDOM, B_DAEMON, 0, 0, D_DEFAULT, -1, NULL, 0 },
	{ "strided_prepopulated", "strided: prepopulated (pread before)",
	  W_STRIDED, B_PREPOP, 0, 0, 0, -1, NULL, 0 },
	{ "strided_inproc_64k", "strided: in-proc 64K, no prefetch",
	  W_STRIDED, B_LIB, 64 * KIB, NO_PF, 0, -1, NULL, 0 },
	{ "strided_inproc_default", "strided: in-proc default engine",
	  W_STRIDED, B_LIB, 0, 0, 0, -1, NULL, 0 },
	{ "strided_daemon", "strided: daemon (serve, default)",
	  W_STRIDED, B_DAEMON, 0, 0, D_DEFAULT, -1, NULL, 0 },
	{ "sparse_prepopulated", "sparse: prepopulated (pread before)",
	  W_SPARSE, B_PREPOP, 0, 0, 0, -1, NULL, 0 },
	{ "sparse_inproc_default", "sparse: in-proc default engine",
	  W_SPARSE, B_LIB, 0, 0, 0, -1, NULL, 0 },
	{ "sparse_daemon", "sparse: daemon (serve, default)",
	  W_SPARSE, B_DAEMON, 0, 0, D_SPARSE, -1, NULL, 0 },
	{ "sparse_daemon_trace", "sparse: daemon --prefetch TRACE",
	  W_SPARSE, B_DAEMON, 0, 0, D_SPARSE_TRACE, -1, NULL, 0 },
	/* Last: reported as a fact if the table has no row left for it. */
	{ "sparse_file", "sparse: mmap of file (File backend)",
	  W_SPARSE, B_FILE, 0, 0, 0, -1, NULL, 0 },
};

#define NCASES ((int)(sizeof(cases) / sizeof(*cases)))

struct rs_mem {			/* one memory file */
	char path[64];
	int fd;
	uint64_t len;
	const uint8_t *src;	/* read-only mapping, for the checksums */
};

struct rs_ctx {
	struct rs_mem small;	/* linear, random, strided */
	struct rs_mem big;	/* sparse */
	uint32_t *pages[W_N];	/* touch order, page indices */
	uint64_t npages[W_N];
	uint64_t want[W_N];	/* checksum of the touched pages */
	struct bench_daemon daemon[D_N];
	char stats[D_N][64];
	char trace[64];		/* the recorded sparse working set */
};

/* What a child reports through its pipe. */
struct rs_result {
	int err;		/* 0 or -errno */
	int ok;			/* checksum matched */
	double sec;
	double aux;		/* library: bytes copied at the last touch;
				 * prepopulated: seconds of a second pass */
	double wait;		/* library: seconds the guest's faults waited */
};

static struct rs_mem *mem_of(struct rs_ctx *c, enum rs_wl w)
{
	return w == W_SPARSE ? &c->big : &c->small;
}

/* ---- workloads and checksums --------------------------------------------- */

#define SPARSE_RUN	(1 * MIB)
#define SPARSE_STRIDE	(16 * MIB)
#define STRIDED_RUN	(64 * KIB)
#define STRIDED_STRIDE	(256 * KIB)

/* Sparse and strided touch runs of run bytes every stride bytes. */
static bool in_runs(enum rs_wl w, uint64_t *run, uint64_t *stride)
{
	*run = w == W_SPARSE ? SPARSE_RUN : STRIDED_RUN;
	*stride = w == W_SPARSE ? SPARSE_STRIDE : STRIDED_STRIDE;
	return w == W_SPARSE || w == W_STRIDED;
}

static int make_order(struct rs_ctx *c, enum rs_wl w)
{
	uint64_t len = mem_of(c, w)->len, n = len / 4096, k = 0, run, stride;
	bool runs = in_runs(w, &run, &stride);
	uint32_t *p;

	if (runs)
		n = (len + stride - 1) / stride * (run / 4096);
	p = malloc(n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (runs) {
		for (uint64_t s = 0; s < len; s += stride)
			for (uint64_t o = 0; o < run && s + o < len; o += 4096)
				p[k++] = (uint32_t)((s + o) / 4096);
		n = k;
	} else {
		for (k = 0; k < n; k++)
			p[k] = (uint32_t)k;
	}
	if (w == W_RANDOM) {
		uint64_t x = 0x2545f4914f6cdd1dULL;	/* fixed seed */

		for (uint64_t i = n - 1; i > 0; i--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			uint64_t j = x % (i + 1);
			uint32_t t = p[i];

			p[i] = p[j];
			p[j] = t;
		}
	}
	c->pages[w] = p;
	c->npages[w] = n;
	return 0;
}

/* Checksum of the pages a workload touches (whole pages, ascending). */
static uint64_t touched_sum(const struct rs_ctx *c, enum rs_wl w,
			    const uint8_t *m, uint64_t len)
{
	uint64_t h = 0, run, stride;

	if (!in_runs(w, &run, &stride))
		return bench_sum(m, len);
	for (uint64_t s = 0; s < len; s += stride) {
		uint64_t n = len - s < run ? len - s : run;

		h = h * 0x9e3779b97f4a7c15ULL + bench_sum(m + s, n);
	}
	(void)c;
	return h;
}

/* ---- the guest ---------------------------------------------------------- */

struct guest {
	uint8_t *mem;
	const uint32_t *pages;
	uint64_t n;
	double t1;
	uint8_t acc;
};

static void *guest_main(void *arg)
{
	struct guest *g = arg;
	uint8_t acc = 0;

	/* One write per page that keeps the data: exactly one fault. */
	for (uint64_t i = 0; i < g->n; i++)
		acc += __atomic_fetch_add(g->mem + (uint64_t)g->pages[i] * 4096,
					  (uint8_t)0, __ATOMIC_RELAXED);
	g->t1 = bench_now();
	g->acc = acc;
	return NULL;
}

int bench_guest_run(uint8_t *mem, const uint32_t *pages, uint64_t n,
		    double *t1)
{
	struct guest g = { .mem = mem, .pages = pages, .n = n };
	pthread_t th;
	int ret = -pthread_create(&th, NULL, guest_main, &g);

	if (ret < 0)
		return ret;
	pthread_join(th, NULL);
	*t1 = g.t1;
	return 0;
}

static int pread_full(int fd, uint8_t *buf, uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		size_t want = len - done < 2 * MIB ? len - done : 2 * MIB;
		ssize_t n = pread(fd, buf + done, want, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

/* Private anonymous 2 MiB hugetlb memory, as Firecracker maps it. */
static uint8_t *map_huge(uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
		       MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* B_BESIDE's copier: the memory file COPYed into a scratch region. */
struct beside {
	int uffd;
	uint8_t *dst;
	const uint8_t *src;
	uint64_t len;
	pthread_t th;
};

static void *beside_main(void *arg)
{
	struct beside *b = arg;

	for (uint64_t off = 0; off < b->len; off += 2 * MIB) {
		uint64_t n = b->len - off < 2 * MIB ? b->len - off : 2 * MIB;

		if (uffd_copy(b->uffd, (uintptr_t)b->dst + off, b->src + off,
			      n, 0, NULL) < 0)
			break;
	}
	return NULL;
}

/* Set up as the engine would: registered scratch memory, source mapped. */
static int beside_setup(struct beside *b, const struct rs_mem *m)
{
	b->len = m->len;
	b->src = m->src;
	b->dst = bench_map(m->len);
	if (!b->dst)
		return -ENOMEM;
	b->uffd = uffd_create(0, NULL);
	if (b->uffd < 0)
		return b->uffd;
	madvise((void *)m->src, m->len, MADV_POPULATE_READ);
	return uffd_register(b->uffd, (uintptr_t)b->dst, b->len,
			     UFFDIO_REGISTER_MODE_MISSING, NULL);
}

static void beside_teardown(struct beside *b)
{
	if (b->uffd >= 0)
		close(b->uffd);
	bench_unmap(b->dst, b->len);
}

/* The child: restore with one backend, run the guest, check the pages. */
static int child_run(struct rs_ctx *c, const struct rs_case *k,
		     struct rs_result *res)
{
	struct rs_mem *m = mem_of(c, k->wl);
	struct guest g = { .pages = c->pages[k->wl], .n = c->npages[k->wl] };
	struct fl_source *src = NULL;
	struct fl_engine *e = NULL;
	struct fc_client fc;
	struct beside bs = { .uffd = -1 };
	uint8_t *p = NULL;
	pthread_t th;
	double t0;
	int ret = 0;

	fc_client_init(&fc);
	switch (k->b) {
	case B_BESIDE:
		ret = beside_setup(&bs, m);
		if (ret < 0)
			goto out;
		/* fall through */
	case B_PREPOP:
		p = k->page_size ? map_huge(m->len) : bench_map(m->len);
		if (!p)
			return -ENOMEM;
		ret = pread_full(m->fd, p, m->len);
		break;
	case B_FILE:
		p = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE,
			 m->fd, 0);
		if (p == MAP_FAILED)
			return -errno;
		break;
	case B_LIB: {
		struct fl_engine_opts eo = {
			.uffd = -1, .chunk_size = k->chunk, .flags = k->flags,
		};
		struct fl_region_desc rd = {
			.len = m->len, .page_size = 4096,
			.flags = FL_REGION_REGISTER,
		};

		p = bench_map(m->len);
		if (!p)
			return -ENOMEM;
		rd.addr = (uintptr_t)p;
		if ((ret = fl_source_open(m->path, &src)) < 0 ||
		    (ret = fl_engine_create(&eo, &e)) < 0 ||
		    (ret = fl_engine_add_region(e, &rd, src)) < 0 ||
		    (ret = fl_engine_start(e, 1)) < 0)
			fprintf(stderr, "faultline bench kvm-restore: %s: %s\n",
				k->label, fl_last_error());
		break;
	}
	case B_DAEMON:
		ret = fc_client_map(&fc, 1, &m->len,
				    k->page_size ? k->page_size : 4096);
		if (!ret)
			p = fc.regions[0].addr;
		break;
	}
	if (ret < 0)
		goto out;

	g.mem = p;
	t0 = bench_now();
	if (k->b == B_DAEMON) {
		ret = bench_daemon_connect(&fc, c->daemon[k->daemon].sock);
		if (ret < 0)
			goto out;
	}
	if (k->b == B_BESIDE) {
		ret = -pthread_create(&bs.th, NULL, beside_main, &bs);
		if (ret < 0)
			goto out;
	}
	ret = -pthread_create(&th, NULL, guest_main, &g);
	if (ret == 0)
		pthread_join(th, NULL);
	if (k->b == B_BESIDE)
		pthread_join(bs.th, NULL);
	if (ret < 0)
		goto out;
	res->sec = g.t1 - t0;
	if (e) {
		struct fl_stats st;

		if (fl_engine_stats(e, &st) == 0) {
			res->aux = (double)st.bytes_copied;
			res->wait = (double)st.lat_ns_sum * 1e-9;
		}
	}
	if (k->b == B_PREPOP) {	/* the same touches again: no faults */
		double t2 = bench_now();

		if (pthread_create(&th, NULL, guest_main, &g) == 0) {
			pthread_join(th, NULL);
			res->aux = g.t1 - t2;
		}
	}
	if (fc.sock >= 0) {	/* end the session now: its stats stop here */
		close(fc.sock);
		fc.sock = -1;
	}
	res->ok = touched_sum(c, k->wl, p, m->len) == c->want[k->wl];
out:
	if (e) {
		fl_engine_stop(e);
		fl_engine_destroy(e);
	}
	if (src)
		fl_source_put(src);
	if (k->b == B_BESIDE)
		beside_teardown(&bs);
	if (k->b == B_DAEMON)
		fc_client_close(&fc);
	else if (k->b == B_FILE)
		munmap(p, m->len);
	else
		bench_unmap(p, m->len);
	return ret;
}

/* Fork a child for one run of one case. */
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
		alarm(120);	/* a lost fault must not hang the bench */
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
	if (n != (ssize_t)sizeof(*res))
		return -ECHILD;
	if (res->err < 0)
		fprintf(stderr, "faultline bench kvm-restore: %s: %s\n",
			k->label, strerror(-res->err));
	return res->err;
}

/* ---- the daemons ---------------------------------------------------------- */

static int start_daemon(struct rs_ctx *c, int d)
{
	struct rs_mem *m = d == D_DEFAULT || d == D_2M ? &c->small : &c->big;
	const char *args[8] = { "--mem-file", m->path, "--stats-json",
				c->stats[d] };
	int argc = 4;

	snprintf(c->stats[d], sizeof(c->stats[d]), "/tmp/flb-%d-%d.json",
		 (int)getpid(), d);
	snprintf(c->trace, sizeof(c->trace), "/tmp/flb-%d.trace",
		 (int)getpid());
	if (d == D_2M) {
		args[argc++] = "--chunk";
		args[argc++] = "2M";
	} else if (d == D_RECORD || d == D_SPARSE_TRACE) {
		args[argc++] = d == D_RECORD ? "--record" : "--prefetch";
		args[argc++] = c->trace;
	}
	unlink(c->stats[d]);
	return bench_daemon_start(&c->daemon[d], "kvm-restore", d, args);
}

/* Median bytes_copied of the daemon's sessions of len bytes. */
static double daemon_copied(struct rs_ctx *c, int d, uint64_t len)
{
	FILE *f = fopen(c->stats[d], "re");
	char *line = NULL;
	size_t cap = 0;
	double v[64];
	int n = 0;

	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0 && n < 64) {
		json_object *j = json_tokener_parse(line), *b, *s, *bc;

		if (j && json_object_object_get_ex(j, "bytes", &b) &&
		    (uint64_t)json_object_get_int64(b) == len &&
		    json_object_object_get_ex(j, "stats", &s) &&
		    json_object_object_get_ex(s, "bytes_copied", &bc))
			v[n++] = (double)json_object_get_uint64(bc);
		if (j)
			json_object_put(j);
	}
	free(line);
	fclose(f);
	return n ? bench_median(v, n) : -1;
}

/* ---- the benchmark ------------------------------------------------------- */

static int open_mem(struct rs_mem *m, uint64_t len)
{
	m->len = len;
	m->fd = bench_memfile(len, m->path, false);
	if (m->fd < 0)
		return m->fd;
	m->src = mmap(NULL, len, PROT_READ, MAP_SHARED, m->fd, 0);
	if (m->src == MAP_FAILED) {
		m->src = NULL;
		return -errno;
	}
	return 0;
}

static void close_mem(struct rs_mem *m)
{
	if (m->src)
		munmap((void *)m->src, m->len);
	m->src = NULL;
	if (m->fd >= 0) {
		close(m->fd);
		unlink(m->path);
	}
	m->fd = -1;
}

/*
 * The cases --only selects, and the prepopulated reference of every
 * workload (and page size) one of them belongs to.  Returns how many of
 * [from, to) are selected.
 */
static int select_cases(const struct bench_opts *o, bool *sel, int from,
			int to)
{
	int n = 0;

	for (int i = 0; i < NCASES; i++)
		sel[i] = bench_selected(o, cases[i].key);
	for (int i = 0; i < NCASES; i++)
		for (int j = 0; j < NCASES && cases[i].b == B_PREPOP; j++)
			sel[i] |= sel[j] && cases[j].wl == cases[i].wl &&
				  cases[j].page_size == cases[i].page_size;
	for (int i = from; i < to; i++)
		n += sel[i];
	return n;
}

static bool any_huge(const bool *sel)
{
	for (int i = 0; i < NCASES; i++)
		if (sel[i] && cases[i].page_size)
			return true;
	return false;
}

/*
 * Run the selected cases of [from, to) round-robin, runs times, into
 * samples[run][case].
 */
static int run_group(struct rs_ctx *c, int from, int to, int runs,
		     const bool *sel, double *samples, bool *ok,
		     double *copied, double *waited)
{
	for (int r = 0; r < runs; r++) {
		for (int i = from; i < to; i++) {
			struct rs_result res;

			if (!sel[i])
				continue;
			int ret = run_case(c, &cases[i], &res);

			if (ret < 0)
				return ret;
			samples[r * NCASES + i] = res.sec;
			ok[i] &= res.ok != 0;
			copied[r * NCASES + i] = res.aux;
			waited[r * NCASES + i] = res.wait;
		}
	}
	return 0;
}

/*
 * "KEY_fault_wait_ms": how long the guest of a default in-process engine
 * waited in faults, of its time.  What it did not wait is the copy slowing
 * it down beside it (or the machine's noise).
 */
static const char *wait_key(int i)
{
	static char keys[NCASES][48];

	if (!keys[i][0])
		snprintf(keys[i], sizeof(keys[i]), "%s_fault_wait_ms",
			 cases[i].key);
	return keys[i];
}

/*
 * One untimed sparse session through a daemon with --record: its working
 * set, replayed by D_SPARSE_TRACE.
 */
static int record_sparse(struct rs_ctx *c)
{
	struct rs_case k = { "sparse_record", "sparse: recording",
			     W_SPARSE, B_DAEMON, 0, 0, D_RECORD, -1, NULL, 0 };
	struct rs_result res;
	int ret = start_daemon(c, D_RECORD);

	if (ret == 0)
		ret = run_case(c, &k, &res);
	bench_daemon_stop(&c->daemon[D_RECORD]);	/* the trace is written at session end */
	if (ret == 0 && access(c->trace, R_OK) < 0)
		ret = -ENOENT;
	return ret;
}

/* What a kvm-restore run measured, per run and case (run * NCASES + i). */
struct rs_results {
	int runs, first_sparse;
	double *samples, *copied, *waited;
	bool ok[NCASES], sel[NCASES];
	double dcopied, tcopied;	/* sparse: bytes the daemons copied */
};

/* open_mem(), saying why it failed. */
static int open_mem_said(struct rs_mem *m, uint64_t len)
{
	int ret = open_mem(m, len);

	if (ret < 0)
		fprintf(stderr, "faultline bench kvm-restore: cannot create "
			"the memory file in /tmp: %s\n", strerror(-ret));
	return ret;
}

/* Linear, random, strided: one 128 MiB memory file, two daemons. */
static int run_small(struct rs_ctx *c, const struct bench_opts *o,
		     struct rs_results *res)
{
	int ret = open_mem_said(&c->small, o->size ? o->size : o->quick ?
				8 * MIB : 128 * MIB);

	if (ret < 0)
		return ret;
	if ((ret = make_order(c, W_LINEAR)) < 0 ||
	    (ret = make_order(c, W_RANDOM)) < 0 ||
	    (ret = make_order(c, W_STRIDED)) < 0)
		return ret;
	c->want[W_LINEAR] = touched_sum(c, W_LINEAR, c->small.src,
					c->small.len);
	c->want[W_RANDOM] = c->want[W_LINEAR];
	c->want[W_STRIDED] = touched_sum(c, W_STRIDED, c->small.src,
					 c->small.len);
	if ((ret = start_daemon(c, D_DEFAULT)) < 0 ||
	    (ret = start_daemon(c, D_2M)) < 0)
		return ret;
	select_cases(o, res->sel, 0, NCASES);
	ret = any_huge(res->sel) ?
	      huge_reserve((long)(c->small.len >> 21) + 2) : 0;
	if (ret < 0) {
		fprintf(stderr, "faultline bench kvm-restore: cannot reserve "
			"2 MiB hugetlb pages (/proc/sys/vm/nr_hugepages): %s\n",
			strerror(-ret));
		return ret;
	}
	ret = run_group(c, 0, res->first_sparse, res->runs, res->sel,
			res->samples, res->ok, res->copied, res->waited);
	huge_restore();
	bench_daemon_stop(&c->daemon[D_DEFAULT]);
	bench_daemon_stop(&c->daemon[D_2M]);
	close_mem(&c->small);
	return ret;
}

/* Sparse: a 1 GiB memory file, a daemon with and one without a trace. */
static int run_sparse(struct rs_ctx *c, const struct bench_opts *o,
		      struct rs_results *res)
{
	int ret;

	if (!select_cases(o, res->sel, res->first_sparse, NCASES))
		return 0;
	ret = open_mem_said(&c->big, o->quick ? 64 * MIB : GIB);
	if (ret < 0)
		return ret;
	if ((ret = make_order(c, W_SPARSE)) < 0)
		return ret;
	c->want[W_SPARSE] = touched_sum(c, W_SPARSE, c->big.src, c->big.len);
	if ((ret = record_sparse(c)) < 0 ||
	    (ret = start_daemon(c, D_SPARSE)) < 0 ||
	    (ret = start_daemon(c, D_SPARSE_TRACE)) < 0)
		return ret;
	ret = run_group(c, res->first_sparse, NCASES, res->runs, res->sel,
			res->samples, res->ok, res->copied, res->waited);
	bench_daemon_stop(&c->daemon[D_SPARSE]);
	bench_daemon_stop(&c->daemon[D_SPARSE_TRACE]);
	if (ret < 0)
		return ret;
	res->dcopied = daemon_copied(c, D_SPARSE, c->big.len);
	res->tcopied = daemon_copied(c, D_SPARSE_TRACE, c->big.len);
	return 0;
}

/* One row (or, past the table's room, facts) per selected case. */
static void table_rows(struct bench_table *t, const struct rs_ctx *c,
		       const struct rs_results *res)
{
	int runs = res->runs, refrow = 0, refcase = 0;
	uint64_t touched = c->npages[W_SPARSE] * 4096;

	for (int i = 0; i < NCASES; i++) {
		const struct rs_case *k = &cases[i];
		double v[runs], cp[runs], rv[runs], wt[runs], ratio;

		if (!res->sel[i])
			continue;
		if (k->b == B_PREPOP)
			refcase = i;
		for (int r = 0; r < runs; r++) {
			v[r] = res->samples[r * NCASES + i];
			cp[r] = res->copied[r * NCASES + i];
			rv[r] = res->samples[r * NCASES + refcase];
			wt[r] = res->waited[r * NCASES + i];
		}
		ratio = bench_paired_ratio(v, rv, runs);
		if (k->wl == W_SPARSE && k->b == B_LIB)
			bench_add_kv(t, "sparse_inproc_copied_per_touched",
				     bench_median(cp, runs) / (double)touched);
		if (k->b == B_LIB && !k->chunk && !k->flags)
			bench_add_kv(t, wait_key(i),
				     bench_median(wt, runs) * 1e3);
		if (k->wl == W_LINEAR && k->b == B_PREPOP && !k->page_size)
			bench_add_kv(t, "linear_prepopulated_second_pass_ms",
				     bench_median(cp, runs) * 1e3);
		if (t->nrows >= BENCH_MAX_ROWS) {
			/* No row left: report it as facts. */
			double m = bench_median(v, runs);

			bench_add_kv(t, k->key, m * 1e3);
			bench_add_kv(t, k->b == B_FILE && k->wl == W_SPARSE ?
				     "sparse_file_vs_ref" : "ratio", ratio);
			if (!res->ok[i])
				t->rows[refrow].checksum_ok = false;
			continue;
		}
		int row = bench_add_row(t, k->key, k->label, v, runs,
					res->ok[i], k->seed);

		t->rows[row].seed_note = k->seed_note;
		if (k->b == B_PREPOP)
			refrow = row;
		t->rows[row].cmp = row == 0 ? -1 : refrow;
		t->rows[row].ratio = ratio;
	}
	if (c->big.len) {
		bench_add_kv(t, "sparse_memory_bytes", (double)c->big.len);
		bench_add_kv(t, "sparse_touched_bytes", (double)touched);
		bench_add_kv(t, "sparse_daemon_copied_per_touched",
			     res->dcopied >= 0 ?
			     res->dcopied / (double)touched : -1);
		bench_add_kv(t, "sparse_trace_copied_per_touched",
			     res->tcopied >= 0 ?
			     res->tcopied / (double)touched : -1);
	}
}

/* The table's title, seed and notes. */
static void table_head(struct bench_table *t, const struct rs_ctx *c,
		       int runs)
{
	char sparse[64] = "";

	t->title = "guest touches all its memory after a restore (kvm-restore,"
		   " process-thread guest)";
	t->seed = "003 (Firecracker UFFD handler, nested KVM guest, 128 MiB "
		  "linear, medians of 60 restores)";
	t->seed_unit = "ms";
	t->unit = "ms";
	t->per_gib = false;
	t->bytes = c->small.len;
	t->runs = runs;
	t->ref = 0;
	if (c->big.len)
		snprintf(sparse, sizeof(sparse), "  Sparse: 1 MiB every 16 MiB "
			 "of %llu MiB.", (unsigned long long)(c->big.len >> 20));
	snprintf(t->notes, sizeof(t->notes),
		 "No /dev/kvm here (a PVM guest): the guest is a thread of a "
		 "child process.  Even so, its first user-mode touch of a page "
		 "the kernel filled (by pread) costs a PVM shadow fault, so "
		 "the reference is slow (see the second pass) and the ratios "
		 "are far smaller than a VM's would be.  Rows vs their "
		 "workload's prepopulated row (median of the runs' ratios to "
		 "the reference run beside them).%s  Daemon: connect to last "
		 "touch.  Default engine: %u KiB chunks + prefetch + "
		 "background.", sparse,
		 (unsigned int)(FL_DEFAULT_CHUNK >> 10));
}

static void rs_free(struct rs_ctx *c, struct rs_results *res)
{
	huge_restore();
	for (int d = 0; d < D_N; d++) {
		bench_daemon_stop(&c->daemon[d]);
		if (c->stats[d][0])
			unlink(c->stats[d]);
	}
	close_mem(&c->small);
	close_mem(&c->big);
	if (c->trace[0])
		unlink(c->trace);
	for (int w = 0; w < W_N; w++)
		free(c->pages[w]);
	free(res->samples);
	free(res->copied);
	free(res->waited);
}

int bench_restore(const struct bench_opts *o, struct bench_table *t)
{
	struct rs_ctx c = { .small = { .fd = -1 }, .big = { .fd = -1 } };
	struct rs_results res = { .runs = o->runs, .first_sparse = NCASES,
				  .dcopied = -1, .tcopied = -1 };
	size_t n = (size_t)o->runs * NCASES;
	int ret;

	for (int i = 0; i < NCASES; i++) {
		res.ok[i] = true;
		if (cases[i].wl == W_SPARSE && res.first_sparse == NCASES)
			res.first_sparse = i;
	}
	res.samples = calloc(n, sizeof(double));
	res.copied = calloc(n, sizeof(double));
	res.waited = calloc(n, sizeof(double));
	ret = res.samples && res.copied && res.waited ? 0 : -ENOMEM;
	if (!ret)
		ret = run_small(&c, o, &res);
	if (!ret)
		ret = run_sparse(&c, o, &res);
	if (!ret) {
		table_head(t, &c, o->runs);
		table_rows(t, &c, &res);
	}
	rs_free(&c, &res);
	return ret;
}
