// SPDX-License-Identifier: Apache-2.0
/*
 * soak.c - `make soak`: `faultline serve` through many Firecracker-style
 * sessions (SOAK_SESSIONS, 10,000 by default under make soak; 200 when
 * run alone) beside malformed clients, most of them handing over a real
 * uffd (testlib/bad_client.h: a bad region table, gone at once, its
 * memory unmapped, a second descriptor, a file for a uffd): every byte
 * right, no client hung, each malformed client ended as it should and
 * logged in one line saying what was wrong, the daemon's descriptors
 * back to their start and its RSS not growing over the second half of
 * the run.
 *
 * Decisions: not in make check's list (make soak runs it, under
 * tests/loaded.sh); sessions run in batches of two worker processes, and
 * the daemon is sampled between batches; RSS is judged robustly: the
 * largest sample of the last quarter against the largest of the second
 * quarter plus 4 MiB, never one sample against another.
 */
#define _GNU_SOURCE
#include "bad_client.h"
#include "serve_util.h"

#define MIB		(1ULL << 20)
#define FILE_SIZE	(32 * MIB)
#define BATCHES		40
#define WORKERS		2

static struct mem_file mem;
static struct serve srv;

struct work {
	int n;		/* sessions */
	int seed;
};

/* n sessions of 1..3 regions at random offsets: exit 0 if all right. */
static int worker(void *arg)
{
	const struct work *w = arg;
	unsigned int seed = (unsigned int)w->seed;
	int fails = 0;

	for (int i = 0; i < w->n; i++) {
		struct su_client_args a = {
			.sock = srv.sock, .mem = &mem, .page_size = FC_PAGE_4K,
			.order = (enum su_order)(i % 3), .stop_fd = -1,
			.result_fd = -1,
		};

		a.nregions = 1 + rand_r(&seed) % 3;
		for (int r = 0; r < a.nregions; r++) {
			a.sizes[r] = (uint64_t)(1 + rand_r(&seed) % 64) * 16384;
			a.offsets[r] = (uint64_t)(rand_r(&seed) %
				((FILE_SIZE - a.sizes[r]) / 4096)) * 4096;
		}
		alarm(SU_CHILD_TIMEOUT);	/* per session: a hang */
		fails += su_client_round(&a, "soak");
	}
	return fails ? 1 : 0;
}

/*
 * The malformed clients, in turn, each in a child of its own (its log
 * lines name its pid); what each may end as: its exit code, or killed
 * (-SIGKILL) by the daemon, which will not leave a client that handed
 * over its uffd unserved.
 */
static const struct bad_kind {
	const char *name;
	struct bad_client bc;
	int end;		/* what it ends as */
	const char *says;	/* its session's last line says so */
} bad_kinds[] = {
	{ "not JSON, no descriptor",
	  { .json = "hello, faultline", .fds = BC_NONE }, 0,
	  "expected a JSON array" },
	{ "truncated, then EOF",
	  { .json = "[{\"base_host_virt_addr\":", .fds = BC_NONE,
	    .then = BC_EOF }, 0, "truncated" },
	{ "a region outside the file, with its uffd",
	  { .json = "[" BC_REG("{A}", "{S}", "{F}") "]" }, -SIGKILL,
	  "beyond the memory file" },
	{ "its uffd handed over, then gone at once",
	  { .json = "[" BC_GOOD "]", .then = BC_GONE }, 0,
	  "ended (client" /* closed the socket, or gone: which first */ },
	/* served, as what it has not unmapped yet would be */
	{ "its uffd handed over, its memory then unmapped",
	  { .json = "[" BC_GOOD "]", .then = BC_UNMAP }, 0, "ended (client" },
	{ "its uffd and /dev/null",
	  { .json = "[" BC_GOOD "]", .fds = BC_TWO }, -SIGKILL,
	  "2 fds in SCM_RIGHTS" },
	/* its memory registered on a uffd it kept: nobody would serve it */
	{ "/dev/null for a uffd",
	  { .json = "[" BC_GOOD "]", .fds = BC_OTHER }, -SIGKILL,
	  "not a userfaultfd" },
};

#define NKINDS	(sizeof(bad_kinds) / sizeof(*bad_kinds))

/*
 * Malformed clients until stop_fd is readable, one at a time, and a bare
 * connection that goes between them; each one's pid, kind and end as a
 * line of the file at path.  Exit 0 if each ended as its kind may.
 */
struct bad_run {
	int stop_fd;
	const char *path;
};

static int malformed(void *arg)
{
	const struct bad_run *br = arg;
	FILE *out = fopen(br->path, "we");
	unsigned long n = 0;
	int fails = 0;

	if (!out)
		return 10;
	setvbuf(out, NULL, _IOLBF, 0);
	while (poll(&(struct pollfd){ .fd = br->stop_fd, .events = POLLIN },
		    1, 0) == 0) {
		const struct bad_kind *k = &bad_kinds[n++ % NKINDS];
		struct bad_client bc = k->bc;
		int s = fc_connect_unix(srv.sock);

		alarm(SU_CHILD_TIMEOUT + 10);	/* past su_reap()'s bound */
		if (s >= 0)	/* connects and goes */
			close(s);
		bc.sock = srv.sock;
		bc.file_size = FILE_SIZE;
		bc.wait_ms = 10000;
		pid_t pid = su_spawn(bad_client_main, &bc);
		int r = su_reap(pid, (SU_CHILD_TIMEOUT + 5) * 1000);

		fprintf(out, "%d %d %d\n", (int)pid, (int)(k - bad_kinds), r);
		if (r != k->end) {
			diag("malformed client %d (%s): ended %d", (int)pid,
			     k->name, r);
			fails++;
		}
	}
	fclose(out);
	return fails ? 1 : 0;
}

struct bad_rec {
	int pid, kind, lines;
	size_t seq;		/* its place in the run: 0 first */
	bool right;		/* its line says what its kind should */
};

static int by_pid(const void *a, const void *b)
{
	return ((const struct bad_rec *)a)->pid -
	       ((const struct bad_rec *)b)->pid;
}

/* The malformed clients the file at path lists: *n of them (malloc'd). */
static struct bad_rec *bad_read(const char *path, size_t *n)
{
	FILE *f = fopen(path, "re");
	struct bad_rec *v = NULL;
	size_t cap = 0;
	int pid, kind, end;

	*n = 0;
	while (f && fscanf(f, "%d %d %d", &pid, &kind, &end) == 3) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 1024;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				BAIL("out of memory");
		}
		v[*n] = (struct bad_rec){ .pid = pid, .kind = kind,
					  .seq = *n };
		(*n)++;
	}
	if (f)
		fclose(f);
	if (*n)
		qsort(v, *n, sizeof(*v), by_pid);
	return v;
}

/*
 * Count, in v (n, sorted by pid), each malformed client's lines in the
 * daemon's log that end its session, and whether they say what its kind
 * should; shown: how many wrong lines were printed so far.  The number
 * of clients with no line yet.
 */
static size_t bad_scan(struct bad_rec *v, size_t n, int *shown)
{
	struct bad_rec key;
	char line[2048];
	FILE *f = fopen(srv.log, "re");
	size_t missing = 0;

	for (size_t i = 0; i < n; i++)
		v[i].lines = 0;
	while (f && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "(pid ");
		struct bad_rec *r;

		if (!p || (!strstr(line, "): closed: ") &&
			   !strstr(line, "): ended (")))
			continue;
		line[strcspn(line, "\n")] = 0;
		key.pid = atoi(p + 5);
		r = n ? bsearch(&key, v, n, sizeof(*v), by_pid) : NULL;
		if (!r)
			continue;
		r->lines++;
		r->right = strstr(line, bad_kinds[r->kind].says) &&
			   (bad_kinds[r->kind].end != -SIGKILL ||
			    strstr(line, "client killed"));
		if (!r->right && ++*shown <= 5)
			diag("%s: %s", bad_kinds[r->kind].name, line);
	}
	if (f)
		fclose(f);
	for (size_t i = 0; i < n; i++)
		missing += !v[i].lines;
	return missing;
}

/*
 * Each malformed client's session ends in one line of the daemon's log
 * ("closed: ..." or "ended ..."), which says what its kind should: the
 * clients; in *wrong how many do not, in *uffds how many handed over a
 * uffd.  The last client may be reaped before the daemon has seen it go
 * (it hands over its uffd and exits): its line is waited for, 30 s at
 * most.
 */
static size_t bad_logged(const char *path, size_t *wrong, size_t *uffds)
{
	uint64_t t0 = su_now_ms();
	int shown = 0;
	size_t n;
	struct bad_rec *v = bad_read(path, &n);

	while (bad_scan(v, n, &shown) && su_now_ms() - t0 < 30000)
		su_sleep_ms(100);
	*wrong = *uffds = 0;
	for (size_t i = 0; i < n; i++) {
		enum bc_fds fds = bad_kinds[v[i].kind].bc.fds;

		*uffds += fds == BC_UFFD || fds == BC_TWO;
		if (v[i].lines != 1 || !v[i].right) {
			if (++*wrong <= 5)
				diag("malformed client %d (%s, %zu of %zu): "
				     "%d lines, %s", v[i].pid,
				     bad_kinds[v[i].kind].name, v[i].seq + 1,
				     n, v[i].lines, v[i].right ? "right" :
				     "not what it should say");
		}
	}
	free(v);
	return n;
}

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? atol(v) : dflt;
}

int main(void)
{
	long sessions = env_long("SOAK_SESSIONS", 200);
	long rss[BATCHES], fd0, fd1, sfd0, sfd1, max2 = 0, max4 = 0;
	int stop[2], hung = 0, wrong = 0, r;
	char path[200];
	struct bad_run br = { .path = path };
	pid_t bad, server;

	r = mem_file_create(&mem, FILE_SIZE, 0x50a4ULL << 40 ^ getpid());
	if (r)
		BAIL("memory file: %s", strerror(-r));
	serve_init(&srv);
	if (serve_start(&srv, mem.path, NULL))
		BAIL("cannot start %s serve", serve_bin());
	/* warm-up: one session over the whole file */
	struct su_client_args all = {
		.sock = srv.sock, .mem = &mem, .nregions = 1,
		.sizes = { FILE_SIZE }, .page_size = FC_PAGE_4K,
		.stop_fd = -1, .result_fd = -1,
	};
	/* Before any session: a warm-up's may not have closed yet. */
	server = serve_server_pid(&srv);
	r = serve_wait_supervisor_listens(&srv, 30000);
	if (r)
		BAIL("the supervisor never held the listener: %s",
		     strerror(-r));
	fd0 = proc_fds(server, NULL);
	sfd0 = proc_fds(srv.pid, NULL);
	is_int(su_reap(su_spawn(su_client_main, &all), 60000), 0,
	       "warm-up: the whole file, every byte");
	diag("start: server %ld fds, supervisor %ld fds, VmRSS %ld KiB", fd0,
	     sfd0, proc_status_kb(server, "VmRSS"));
	if (pipe2(stop, O_CLOEXEC))
		BAIL("pipe");
	br.stop_fd = stop[0];
	snprintf(path, sizeof(path), "%s/bad-clients", srv.dir);
	bad = su_spawn(malformed, &br);
	for (int b = 0; b < BATCHES; b++) {
		pid_t p[WORKERS];

		for (int k = 0; k < WORKERS; k++) {
			struct work w = { (int)(sessions / BATCHES / WORKERS),
					  b * WORKERS + k + 7 };

			p[k] = su_spawn(worker, &w);
		}
		for (int k = 0; k < WORKERS; k++) {
			r = su_reap(p[k], 600000);
			hung += r == -SIGALRM || r == SU_TIMEOUT;
			wrong += r == 1;
		}
		rss[b] = proc_status_kb(server, "VmRSS");
	}
	if (write(stop[1], "x", 1) != 1)
		diag("cannot stop the malformed clients");
	r = su_reap(bad, (SU_CHILD_TIMEOUT + 15) * 1000);
	is_int(r, 0, "malformed clients: each ended as it should (killed if "
	       "its uffd was handed over and refused), none hung");
	size_t badlines, uffds, nb = bad_logged(path, &badlines, &uffds);

	ok(nb >= NKINDS && badlines == 0, "%zu malformed clients (%zu kinds, "
	   "%zu handing over a real uffd): each logged in one line saying "
	   "what was wrong (%zu not)", nb, NKINDS, uffds, badlines);
	is_int(wrong, 0, "every session's bytes right");
	is_int(hung, 0, "no client hung");
	ok(serve_alive(&srv) && serve_server_pid(&srv) == server,
	   "the daemon and its server still running");
	fd1 = proc_fds_settle(server, NULL, (int)fd0, 10000);
	sfd1 = proc_fds_settle(srv.pid, NULL, (int)sfd0, 10000);
	if (!ok(fd1 <= fd0 && sfd1 <= sfd0, "descriptors back to their start "
		"(server %ld -> %ld, supervisor %ld -> %ld)", fd0, fd1, sfd0,
		sfd1)) {
		proc_fds_dump(server);
		proc_fds_dump(srv.pid);
	}
	for (int b = 0; b < BATCHES; b++) {
		if (b >= BATCHES / 4 && b < BATCHES / 2 && rss[b] > max2)
			max2 = rss[b];
		if (b >= BATCHES * 3 / 4 && rss[b] > max4)
			max4 = rss[b];
	}
	for (int b = 0; b < BATCHES; b += 8)
		diag("VmRSS after batch %d..: %ld %ld %ld %ld %ld KiB", b,
		     rss[b], rss[b + 1], rss[b + 2], rss[b + 3], rss[b + 4]);
	ok(max4 <= max2 + 4096, "%ld sessions: RSS not growing over the "
	   "second half (max of the last quarter %ld KiB, of the second "
	   "%ld KiB)", sessions / BATCHES / WORKERS * BATCHES * WORKERS,
	   max4, max2);
	r = serve_stop(&srv);
	ok(r >= 0 && WIFEXITED(r) && !WEXITSTATUS(r), "daemon exits 0");
	if (tap_failures())
		serve_log_dump(&srv, 0);
	serve_cleanup(&srv);
	mem_file_destroy(&mem);
	return done_testing();
}
