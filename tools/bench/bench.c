/*
 * bench.c - `faultline bench`: the dispatcher, timing and data helpers, the
 * table and JSON output, `bench all` and `bench plot`.
 *
 * Decisions: benchmarks are entries of one table ({name, fn}), so a new one
 * is one line here plus its file; every benchmark only fills a struct
 * bench_table and this file renders it, so the text table, the JSON object
 * (json-c) and the gnuplot charts cannot drift apart.  Times are medians of
 * N runs, always shown as ratios to a reference measured in the same run.
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
	  "fill memory: memcpy, UFFDIO_COPY, pread, pread+MOVE (seed 002)" },
	{ "move", bench_move,
	  "UFFDIO_MOVE per page vs contiguous runs, +busy thread (seed 000)" },
	{ "drop", bench_drop,
	  "discard a populated range: one madvise vs per 2M/4K (seed 004)" },
	{ "fault-latency", bench_fault_latency,
	  "4 KiB random fault round trip: library and daemon (p50..max)" },
	{ "kvm-restore", bench_restore,
	  "touch 128 MiB after a restore, per backend and chunk (seed 003)" },
	{ "remote", bench_remote,
	  "touch 128 MiB restored from file, image, HTTP (cache), post-copy" },
};

#define NBENCH (sizeof(benches) / sizeof(*benches))

/* ---- timing ------------------------------------------------------------- */

double bench_now(void)
{
	return now_s();
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_add_row(struct bench_table *t, const char *key, const char *label,
		  double *samples, int n, bool checksum_ok, double seed)
{
	if (t->nrows >= BENCH_MAX_ROWS)
		return -ENOSPC;

	struct bench_row *r = &t->rows[t->nrows];

	memset(r, 0, sizeof(*r));
	r->key = key;
	r->label = label;
	r->sec = bench_median(samples, n);
	r->samples_min = n ? samples[0] : 0;
	r->samples_max = n ? samples[n - 1] : 0;
	r->seed = seed;
	r->checksum_ok = checksum_ok;
	r->thp_frac = -1;
	r->cmp = -1;
	return t->nrows++;
}

double bench_row_ratio(const struct bench_table *t, const struct bench_row *r)
{
	double ref = t->rows[r->cmp >= 0 ? r->cmp : t->ref].sec;

	if (r->ratio > 0)
		return r->ratio;
	return ref > 0 ? r->sec / ref : 0;
}

double bench_paired_ratio(const double *v, const double *ref, int n)
{
	double q[n > 0 ? n : 1];
	int k = 0;

	for (int i = 0; i < n; i++)
		if (ref[i] > 0)
			q[k++] = v[i] / ref[i];
	return bench_median(q, k);
}

void bench_add_kv(struct bench_table *t, const char *key, double val)
{
	if (t->nkv < BENCH_MAX_KV)
		t->kv[t->nkv++] = (struct bench_kv){ key, val };
}

/* ---- data --------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t block[PMD_SIZE_BYTES / 8];
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void block_init(void)
{
	for (size_t i = 0; i < PMD_SIZE_BYTES / 8; i++)
		block[i] = splitmix64(i) | 1;	/* never a zero word */
}

/*
 * Page p of the pattern is page (p % 512) of a fixed random 2 MiB block with
 * its first word replaced by the page number: every page is distinct, so a
 * page landing at the wrong address changes the checksum.
 */
void bench_pattern(void *buf, size_t len, uint64_t off)
{
	uint8_t *b = buf;

	pthread_once(&block_once, block_init);
	for (size_t o = 0; o < len; o += 4096) {
		uint64_t pg = (off + o) >> 12;

		memcpy(b + o, (uint8_t *)block + (pg % 512) * 4096, 4096);
		*(uint64_t *)(b + o) = ~pg;
	}
}

uint64_t bench_sum(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

uint64_t bench_pattern_sum(uint64_t len)
{
	static uint8_t tmp[PMD_SIZE_BYTES];
	XXH3_state_t *st = XXH3_createState();
	uint64_t h;

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	for (uint64_t off = 0; off < len; off += sizeof(tmp)) {
		size_t n = len - off < sizeof(tmp) ? len - off : sizeof(tmp);

		bench_pattern(tmp, n, off);
		XXH3_64bits_update(st, tmp, n);
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

int bench_memfile(uint64_t len, char *path, bool unlink_it)
{
	size_t bs = 2 * MIB;
	uint8_t *buf = malloc(bs);
	int fd, ret = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(path, 64, "/tmp/faultline-bench-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	if (unlink_it)
		unlink(path);
	for (uint64_t off = 0; off < len && !ret; off += bs) {
		size_t n = len - off < bs ? len - off : bs;

		bench_pattern(buf, n, off);
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			ret = errno ? -errno : -EIO;
	}
	/* Clean pages: no writeback while we measure; then warm them. */
	if (!ret)
		fdatasync(fd);
	for (uint64_t off = 0; off < len && !ret; off += bs) {
		size_t n = len - off < bs ? len - off : bs;

		if (pread(fd, buf, n, (off_t)off) != (ssize_t)n)
			ret = -EIO;
	}
	if (ret) {
		close(fd);
		if (!unlink_it)
			unlink(path);
	}
out:
	free(buf);
	return ret ? ret : fd;
}

int bench_uffd_range(void *dst, size_t len, bool move)
{
	uint64_t feat = 0;
	int uffd = uffd_create(move ? UFFD_FEATURE_MOVE : 0, &feat);
	int ret;

	if (uffd < 0)
		return uffd;
	ret = move && !(feat & UFFD_FEATURE_MOVE) ? -EOPNOTSUPP :
	      uffd_register(uffd, (uintptr_t)dst, len,
			    UFFDIO_REGISTER_MODE_MISSING, NULL);
	if (ret < 0) {
		close(uffd);
		return ret;
	}
	return uffd;
}

void *bench_map(size_t len)
{
	size_t slop = PMD_SIZE_BYTES;
	uint8_t *p = mmap(NULL, len + slop, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;

	uintptr_t a = ((uintptr_t)p + slop - 1) & ~(uintptr_t)(slop - 1);
	size_t head = a - (uintptr_t)p;

	if (head)
		munmap(p, head);
	if (slop - head)
		munmap((uint8_t *)a + len, slop - head);
	return (void *)a;
}

void bench_unmap(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int bench_prefault(void *p, size_t len)
{
	return madvise(p, len, MADV_POPULATE_WRITE) < 0 ? -errno : 0;
}

int64_t bench_thp_bytes(const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	FILE *f = fopen("/proc/self/smaps", "re");
	char *line = NULL;
	size_t cap = 0;
	int64_t sum = 0;
	bool in = false;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned long s, e;
		unsigned long long kb;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = s < hi && e > lo;
		else if (in && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
			sum += (int64_t)kb << 10;
	}
	free(line);
	fclose(f);
	return sum > (int64_t)len ? (int64_t)len : sum;
}

/* ---- the busy thread ---------------------------------------------------- */

static void *busy_main(void *arg)
{
	struct bench_busy *b = arg;
	volatile uint8_t *m = b->mem;
	uint64_t n = 0;

	while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
		for (size_t o = 0; o < b->len; o += 4096)
			m[o]++;
		n++;
		__atomic_store_n(&b->touches, n, __ATOMIC_RELAXED);
	}
	return NULL;
}

int bench_busy_start(struct bench_busy *b)
{
	cpu_set_t me, other;
	int cur = sched_getcpu(), ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	int ret;

	memset(b, 0, sizeof(*b));
	atomic_init(&b->stop, false);
	if (cur < 0)
		cur = 0;
	b->cpu = ncpu > 1 ? (cur + 1) % ncpu : cur;
	b->len = 4 * MIB;
	b->mem = bench_map(b->len);
	if (!b->mem)
		return -ENOMEM;
	madvise(b->mem, b->len, MADV_HUGEPAGE);
	memset(b->mem, 1, b->len);

	/* Pin the caller where it is, the busy thread on the other CPU. */
	if (sched_getaffinity(0, sizeof(b->saved), &b->saved) == 0) {
		CPU_ZERO(&me);
		CPU_SET(cur, &me);
		b->pinned = sched_setaffinity(0, sizeof(me), &me) == 0;
	}

	pthread_attr_t attr;

	pthread_attr_init(&attr);
	CPU_ZERO(&other);
	CPU_SET(b->cpu, &other);
	pthread_attr_setaffinity_np(&attr, sizeof(other), &other);
	ret = pthread_create(&b->thread, &attr, busy_main, b);
	pthread_attr_destroy(&attr);
	if (ret) {
		bench_busy_stop(b);
		return -ret;
	}
	b->running = true;
	/* Measure only once it is really running on its CPU. */
	while (!__atomic_load_n(&b->touches, __ATOMIC_RELAXED))
		sched_yield();
	return 0;
}

void bench_busy_stop(struct bench_busy *b)
{
	if (b->running) {
		atomic_store(&b->stop, true);
		pthread_join(b->thread, NULL);
		b->running = false;
	}
	if (b->pinned) {
		sched_setaffinity(0, sizeof(b->saved), &b->saved);
		b->pinned = false;
	}
	if (b->mem) {
		bench_unmap(b->mem, b->len);
		b->mem = NULL;
	}
}

/* ---- a faultline serve daemon ------------------------------------------ */

static const char *find_exe(void)
{
	static char buf[PATH_MAX];
	const char *env = getenv("FAULTLINE_BIN");
	ssize_t n;

	if (env && *env)
		return env;
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		const char *b = strrchr(buf, '/');

		if (b && !strcmp(b + 1, "faultline"))
			return buf;
	}
	return "build/faultline";
}

int bench_daemon_start(struct bench_daemon *d, const char *bench, int id,
		       const char *const *args)
{
	const char *exe = find_exe();
	const char *argv[24] = { "faultline", "serve", "--socket", d->sock };
	int argc = 4;
	pid_t pid;

	while (*args && argc < 23)
		argv[argc++] = *args++;
	snprintf(d->sock, sizeof(d->sock), "/tmp/flb-%d-%d.sock",
		 (int)getpid(), id);
	unlink(d->sock);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0) {
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
		}
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	/* Wait until it accepts connections (up to 5 s). */
	for (int i = 0; i < 500; i++) {
		int fd = fc_connect_unix(d->sock);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			d->pid = 0;
			break;
		}
		usleep(10000);
	}
	fprintf(stderr, "faultline bench %s: %s serve --socket %s "
		"did not start\n", bench, exe, d->sock);
	return -ECHILD;
}

void bench_daemon_stop(struct bench_daemon *d)
{
	int st;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		for (int i = 0; i < 300; i++) {
			if (waitpid(d->pid, &st, WNOHANG) == d->pid)
				goto done;
			usleep(10000);
		}
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
	}
done:
	d->pid = 0;
	if (d->sock[0])
		unlink(d->sock);
}

int bench_daemon_connect(struct fc_client *fc, const char *sock)
{
	int ret = -ECONNREFUSED;

	for (int i = 0; i < 500; i++) {
		ret = fc_client_connect(fc, sock);
		if (ret != -ENOENT && ret != -ECONNREFUSED)
			break;
		usleep(10000);
	}
	return ret;
}

/* ---- output ------------------------------------------------------------- */

static double unit_scale(const char *unit)
{
	if (!strcmp(unit, "ms"))
		return 1e3;
	if (!strcmp(unit, "us"))
		return 1e6;
	return 1;
}

static void fmt_size(char *buf, size_t n, uint64_t bytes)
{
	if (bytes >= GIB && !(bytes % (GIB / 100)))
		snprintf(buf, n, "%.2f GiB", (double)bytes / GIB);
	else if (bytes >= MIB)
		snprintf(buf, n, "%.0f MiB", (double)bytes / MIB);
	else
		snprintf(buf, n, "%llu KiB", (unsigned long long)(bytes >> 10));
}

static void print_table(const struct bench_table *t, FILE *f)
{
	double sc = unit_scale(t->unit);
	bool thp = false, seed = false;
	char sz[32];

	for (int i = 0; i < t->nrows; i++) {
		thp |= t->rows[i].thp_frac >= 0;
		seed |= t->rows[i].seed >= 0;
	}
	fmt_size(sz, sizeof(sz), t->bytes);
	fprintf(f, "%s: %s\n", t->name, t->title);
	fprintf(f, "%s per run, median of %d run%s; seed %s\n\n", sz, t->runs,
		t->runs == 1 ? "" : "s", t->seed);
	fprintf(f, "%-40s %10s", "case", t->unit);
	if (t->per_gib)
		fprintf(f, " %10s", strcmp(t->unit, "s") ? "ms/GiB" : "s/GiB");
	fprintf(f, " %7s", "vs ref");
	if (thp)
		fprintf(f, " %5s", "THP");
	fprintf(f, " %4s", "ok");
	if (seed)
		fprintf(f, "  seed %s", t->seed_unit);
	fprintf(f, "\n");
	for (int i = 0; i < t->nrows; i++) {
		const struct bench_row *r = &t->rows[i];
		double gsc = strcmp(t->unit, "s") ? 1e3 : 1;

		fprintf(f, "%-40s %10.4f", r->label, r->sec * sc);
		if (t->per_gib)
			fprintf(f, " %10.4f",
				r->sec * gsc * (double)GIB / (double)t->bytes);
		fprintf(f, " %6.2fx", bench_row_ratio(t, r));
		if (thp) {
			if (r->thp_frac >= 0)
				fprintf(f, " %4.0f%%", r->thp_frac * 100);
			else
				fprintf(f, " %5s", "-");
		}
		fprintf(f, " %4s", r->checksum_ok ? "yes" : "NO");
		if (r->seed >= 0)
			fprintf(f, "  %g%s%s", r->seed,
				r->seed_note ? " " : "",
				r->seed_note ? r->seed_note : "");
		fprintf(f, "%s\n", i == t->ref ? "   <- reference" : "");
	}
	for (int i = 0; i < t->nkv; i++)
		fprintf(f, "%s: %g\n", t->kv[i].key, t->kv[i].val);
	if (t->notes[0])
		fprintf(f, "%s\n", t->notes);
	fprintf(f, "\n");
}

static json_object *machine_json(void)
{
	json_object *m = json_object_new_object();
	struct utsname u;
	char buf[256];
	FILE *f;

	if (uname(&u) == 0) {
		json_object_object_add(m, "kernel",
				       json_object_new_string(u.release));
		json_object_object_add(m, "arch",
				       json_object_new_string(u.machine));
	}
	f = fopen("/proc/cpuinfo", "re");
	while (f && fgets(buf, sizeof(buf), f)) {
		char *c = strchr(buf, ':');

		if (!strncmp(buf, "model name", 10) && c) {
			c[strcspn(c, "\n")] = 0;
			json_object_object_add(m, "cpu",
					       json_object_new_string(c + 2));
			break;
		}
	}
	if (f)
		fclose(f);
	json_object_object_add(m, "cpus",
		json_object_new_int((int)sysconf(_SC_NPROCESSORS_ONLN)));
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (f && fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = 0;
		json_object_object_add(m, "thp", json_object_new_string(buf));
	}
	if (f)
		fclose(f);
	json_object_object_add(m, "kvm",
			       json_object_new_boolean(!access("/dev/kvm", F_OK)));
	return m;
}

static json_object *table_json(const struct bench_table *t,
			       const struct bench_opts *o)
{
	json_object *j = json_object_new_object();
	json_object *res = json_object_new_object();
	json_object *facts = json_object_new_object();
	bool all_ok = true;

	json_object_object_add(j, "bench", json_object_new_string(t->name));
	json_object_object_add(j, "title", json_object_new_string(t->title));
	json_object_object_add(j, "seed", json_object_new_string(t->seed));
	json_object_object_add(j, "seed_unit",
			       json_object_new_string(t->seed_unit));
	json_object_object_add(j, "unit", json_object_new_string(t->unit));
	json_object_object_add(j, "per_gib", json_object_new_boolean(t->per_gib));
	json_object_object_add(j, "bytes", json_object_new_int64((int64_t)t->bytes));
	json_object_object_add(j, "runs", json_object_new_int(t->runs));
	json_object_object_add(j, "quick", json_object_new_boolean(o->quick));
	json_object_object_add(j, "reference",
			       json_object_new_string(t->rows[t->ref].key));
	for (int i = 0; i < t->nrows; i++) {
		const struct bench_row *r = &t->rows[i];
		json_object *row = json_object_new_object();

		json_object_object_add(row, "label",
				       json_object_new_string(r->label));
		json_object_object_add(row, "seconds",
				       json_object_new_double(r->sec));
		json_object_object_add(row, "min",
				       json_object_new_double(r->samples_min));
		json_object_object_add(row, "max",
				       json_object_new_double(r->samples_max));
		if (t->per_gib)
			json_object_object_add(row, "sec_per_gib",
				json_object_new_double(r->sec * (double)GIB /
						       (double)t->bytes));
		json_object_object_add(row, "ratio",
			json_object_new_double(bench_row_ratio(t, r)));
		json_object_object_add(row, "ratio_to",
			json_object_new_string(t->rows[r->cmp >= 0 ? r->cmp :
						      t->ref].key));
		json_object_object_add(row, "checksum_ok",
				       json_object_new_boolean(r->checksum_ok));
		if (r->thp_frac >= 0)
			json_object_object_add(row, "thp_fraction",
				json_object_new_double(r->thp_frac));
		json_object_object_add(row, "seed", r->seed >= 0 ?
				       json_object_new_double(r->seed) : NULL);
		if (r->seed_note)
			json_object_object_add(row, "seed_note",
				json_object_new_string(r->seed_note));
		json_object_object_add(res, r->key, row);
		all_ok &= r->checksum_ok;
	}
	json_object_object_add(j, "results", res);
	for (int i = 0; i < t->nkv; i++)
		json_object_object_add(facts, t->kv[i].key,
				       json_object_new_double(t->kv[i].val));
	json_object_object_add(j, "facts", facts);
	if (t->notes[0])
		json_object_object_add(j, "notes",
				       json_object_new_string(t->notes));
	json_object_object_add(j, "all_ok", json_object_new_boolean(all_ok));
	json_object_object_add(j, "machine", machine_json());
	return j;
}

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
	if (!o->json) {
		print_table(t, stdout);
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
	*out = table_json(t, o);
	free(t);
	return ret;
}

/* ---- plot --------------------------------------------------------------- */

static void plot_label(FILE *g, const char *s)
{
	fputc('"', g);
	for (; *s; s++)
		if (*s != '"' && *s != '\\')
			fputc(*s, g);
	fputc('"', g);
}

static int plot_one(json_object *b, const char *dir, const char *name)
{
	json_object *res, *v;
	const char *unit = "s", *seed_unit = "", *title = name;
	bool per_gib = false;
	uint64_t bytes = GIB;
	char path[4096];
	int status;

	if (!json_object_object_get_ex(b, "results", &res))
		return -EINVAL;
	if (json_object_object_get_ex(b, "unit", &v))
		unit = json_object_get_string(v);
	if (json_object_object_get_ex(b, "seed_unit", &v))
		seed_unit = json_object_get_string(v);
	if (json_object_object_get_ex(b, "title", &v))
		title = json_object_get_string(v);
	if (json_object_object_get_ex(b, "per_gib", &v))
		per_gib = json_object_get_boolean(v);
	if (json_object_object_get_ex(b, "bytes", &v))
		bytes = (uint64_t)json_object_get_int64(v);
	if (strchr(dir, '\'') || strchr(name, '\''))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/bench-%s.png", dir, name);

	/* Plot per-GiB values when the table has them: the seeds' unit. */
	double sc = unit_scale(unit);
	const char *yl = unit;

	if (per_gib) {
		sc = strcmp(unit, "s") ? 1e3 : 1;
		yl = strcmp(unit, "s") ? "ms per GiB" : "s per GiB";
		sc *= (double)GIB / (double)bytes;
	}
	const char *cmp = per_gib ? (strcmp(unit, "s") ? "ms/GiB" : "s/GiB") :
			  unit;
	bool seed_same = !strcmp(seed_unit, cmp);

	FILE *g = popen("gnuplot", "w");

	if (!g)
		return -errno;
	fprintf(g, "set terminal pngcairo size 1100,600 noenhanced "
		   "font 'sans,10'\n");
	fprintf(g, "set output '%s'\n", path);
	fprintf(g, "set title ");
	plot_label(g, title);
	fprintf(g, "\nset ylabel '%s (log scale)'\n", yl);
	fprintf(g, "set logscale y\nset grid ytics\n"
		   "set style data histograms\n"
		   "set style histogram clustered gap 1\n"
		   "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
		   "set xtics rotate by -25 left\nset key top left\n"
		   "set datafile missing '-'\nset bmargin 8\nset rmargin 14\n");
	fprintf(g, "$data << EOD\n");
	json_object_object_foreach(res, key, row) {
		json_object *lab, *sec, *seed;
		double s;

		(void)key;
		if (!json_object_object_get_ex(row, "seconds", &sec))
			continue;
		s = json_object_get_double(sec) * sc;
		if (!json_object_object_get_ex(row, "label", &lab))
			lab = NULL;
		plot_label(g, lab ? json_object_get_string(lab) : key);
		fprintf(g, " %.9g", s > 0 ? s : 1e-9);
		if (seed_same && json_object_object_get_ex(row, "seed", &seed) &&
		    seed && json_object_get_double(seed) > 0)
			fprintf(g, " %.9g\n", json_object_get_double(seed));
		else
			fprintf(g, " -\n");
	}
	fprintf(g, "EOD\n");
	fprintf(g, "plot $data using 2:xtic(1) title 'this machine'");
	if (seed_same)
		fprintf(g, ", '' using 3 title 'seed (published)'");
	fprintf(g, "\n");
	status = pclose(g);
	if (status == -1)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "faultline bench plot: gnuplot failed for %s "
			"(is gnuplot installed? apt-get install gnuplot-nox)\n",
			name);
		return -EIO;
	}
	printf("%s\n", path);
	return 0;
}

static int cmd_plot(const char *file, const char *dir)
{
	json_object *j = json_object_from_file(file), *bs;
	char dbuf[4096];
	int ret = 0, n = 0;

	if (!j) {
		fprintf(stderr, "faultline bench plot: %s: not a JSON file "
			"(from `faultline bench all`)\n", file);
		return 1;
	}
	if (!dir) {
		const char *sl = strrchr(file, '/');

		snprintf(dbuf, sizeof(dbuf), "%.*s",
			 sl ? (int)(sl - file) : 1, sl ? file : ".");
		dir = dbuf[0] ? dbuf : "/";
	}
	if (json_object_object_get_ex(j, "benchmarks", &bs)) {
		json_object_object_foreach(bs, name, b) {
			int r = plot_one(b, dir, name);

			if (r < 0 && !ret)
				ret = r;
			n += r == 0;
		}
	} else if (json_object_object_get_ex(j, "bench", &bs)) {
		ret = plot_one(j, dir, json_object_get_string(bs));
		n += ret == 0;
	} else {
		ret = -EINVAL;
	}
	json_object_put(j);
	if (ret < 0 || !n) {
		fprintf(stderr, "faultline bench plot: %s: %s\n", file,
			ret == -EINVAL ? "no benchmark results in it" :
			strerror(-ret));
		return 1;
	}
	return 0;
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

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = { .runs = 0 };
	const char *name = NULL, *arg = NULL, *out = NULL;
	json_object *j = NULL;
	int ret = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			o.json = true;
		} else if (!strcmp(a, "--quick")) {
			o.quick = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--only") && i + 1 < argc) {
			o.only = argv[++i];
		} else if ((!strcmp(a, "--runs") || !strcmp(a, "--size") ||
			    !strcmp(a, "-o") || !strcmp(a, "--out")) &&
			   i + 1 < argc) {
			const char *v = argv[++i];

			if (!strcmp(a, "--runs")) {
				char *end;
				long n = strtol(v, &end, 10);

				if (*end || n < 1 || n > 1000) {
					fprintf(stderr, "faultline bench: "
						"--runs '%s': want 1..1000\n", v);
					return 2;
				}
				o.runs = (int)n;
			} else if (!strcmp(a, "--size")) {
				if (parse_size(v, &o.size) < 0 ||
				    o.size < 2 * MIB || o.size % (2 * MIB)) {
					fprintf(stderr, "faultline bench: "
						"--size '%s': want a multiple "
						"of 2M\n", v);
					return 2;
				}
			} else {
				out = v;
			}
		} else if (a[0] == '-') {
			fprintf(stderr, "faultline bench: unknown option "
				"'%s'\n", a);
			usage(stderr);
			return 2;
		} else if (!name) {
			name = a;
		} else if (!arg) {
			arg = a;
		} else {
			fprintf(stderr, "faultline bench: unexpected '%s'\n", a);
			return 2;
		}
	}
	if (!name) {
		usage(stderr);
		return 2;
	}
	if (!o.runs)
		o.runs = o.quick ? 1 : 5;

	if (!strcmp(name, "list")) {
		list();
		return 0;
	}
	if (!strcmp(name, "plot")) {
		if (!arg) {
			fprintf(stderr, "faultline bench plot: which JSON "
				"file? (from `faultline bench all`)\n");
			return 2;
		}
		return cmd_plot(arg, out);
	}
	if (arg) {
		fprintf(stderr, "faultline bench: unexpected '%s'\n", arg);
		return 2;
	}
	if (!strcmp(name, "all")) {
		json_object *bs = json_object_new_object();

		j = json_object_new_object();
		for (size_t i = 0; i < NBENCH; i++) {
			json_object *b = NULL;
			int r = run_one(&benches[i], &o, &b);

			if (r)
				ret = 1;
			if (b)
				json_object_object_add(bs, benches[i].name, b);
		}
		json_object_object_add(j, "benchmarks", bs);
		json_object_object_add(j, "quick", json_object_new_boolean(o.quick));
		json_object_object_add(j, "runs", json_object_new_int(o.runs));
		json_object_object_add(j, "machine", machine_json());
		out = out ? out : "bench-results.json";
		if (json_object_to_file_ext(out, j, JSON_C_TO_STRING_PRETTY) < 0) {
			fprintf(stderr, "faultline bench all: cannot write "
				"%s: %s\n", out, strerror(errno));
			ret = 1;
		} else if (!o.json) {
			printf("results written to %s\n", out);
		}
	} else {
		const struct bench_def *d = find(name);

		if (!d) {
			fprintf(stderr, "faultline bench: unknown benchmark "
				"'%s' (see `faultline bench list`)\n", name);
			return 2;
		}
		ret = run_one(d, &o, &j);
		if (ret < 0)
			return 1;
	}
	if (o.json && j)
		printf("%s\n", json_object_to_json_string_ext(j,
			JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	if (j)
		json_object_put(j);
	return ret;
}
