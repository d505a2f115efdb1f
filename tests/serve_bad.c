// SPDX-License-Identifier: Apache-2.0
/*
 * serve_bad.c - `faultline serve` facing bad clients: every malformed
 * Firecracker handshake gets a one-line log naming the field and that
 * session is closed (its client killed if it handed over its uffd: nobody
 * would serve it), while a concurrent good client keeps being served
 * every byte right; a stale socket file is replaced; a uid not allowed is
 * refused; a source that fails under a running client poisons or kills.
 *
 * Decision: each bad handshake carries a real, registered uffd (unless the
 * case is about the fd), so only the field under test is wrong.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <grp.h>
#include <sys/resource.h>
#include <setjmp.h>

#include "bad_client.h"
#include "load.h"
#include "serve_util.h"

#define MIB		(1ULL << 20)
#define FILE_SIZE	(16 * MIB)
#define NOBODY		65534

static struct mem_file mem;
static struct serve srv;

struct bad_case {
	const char *name;
	const char *json;	/* {A} {B} region addresses, {S} size, ... */
	enum bc_fds fds;
	const char *field;	/* the log line must name this, if set */
	const char *kw[6];	/* ... and contain one of these, if any */
	int eof;		/* shutdown(SHUT_WR) right after sending */
	int slow;		/* the daemon may wait for more: check last */
};

/* The tokens in json: bad_client.h. */
#define REG	BC_REG
#define GOOD	BC_GOOD

/* A case whose log line must name field. */
#define FIELD(n, j, f)	{ .name = n, .json = j, .fds = BC_UFFD, \
			  .field = f }
/* A case whose log line must contain one of the keywords. */
#define KW(n, j, ...)	{ .name = n, .json = j, .fds = BC_UFFD, \
			  .kw = { __VA_ARGS__ } }

static const struct bad_case cases[] = {
	KW("not JSON", "hello, faultline", "json"),
	{ .name = "truncated JSON, socket kept open",
	  .json = "[{\"base_host_virt_addr\":{A},\"size\":{S},\"offs",
	  .kw = { "json", "truncat", "incomplete" }, .slow = 1 },
	{ .name = "truncated JSON, then EOF",
	  .json = "[{\"base_host_virt_addr\":{A},\"size\":{S},\"offs",
	  .kw = { "json", "truncat", "incomplete" }, .eof = 1 },
	KW("JSON then garbage", "[" GOOD "]}{", "json", "trailing",
	   "garbage", "after"),
	FIELD("address as a string",
	      "[{\"base_host_virt_addr\":\"{A}\",\"size\":{S},\"offset\":0,"
	      "\"page_size\":4096,\"page_size_kib\":4096}]",
	      "base_host_virt_addr"),
	FIELD("size as a bool", "[" REG("{A}", "true", "0") "]", "size"),
	FIELD("offset as an object", "[" REG("{A}", "{S}", "{}") "]",
	      "offset"),
	FIELD("page_size as a string",
	      "[{\"base_host_virt_addr\":{A},\"size\":{S},\"offset\":0,"
	      "\"page_size\":\"4096\"}]", "page_size"),
	FIELD("size as a float", "[" REG("{A}", "4194304.5", "0") "]",
	      "size"),
	KW("region not an object", "[42]", "object", "region"),
	FIELD("negative size", "[" REG("{A}", "-4194304", "0") "]", "size"),
	FIELD("negative offset", "[" REG("{A}", "{S}", "-4096") "]",
	      "offset"),
	/* Out of range for u64: the value sent, or "range", not a clamp. */
	{ .name = "size 2^64",
	  .json = "[" REG("{A}", "18446744073709551616", "0") "]",
	  .field = "size",
	  .kw = { "18446744073709551616", "range", "too large", "overflow" } },
	{ .name = "address 10^23",
	  .json = "[" REG("99999999999999999999999", "{S}", "0") "]",
	  .field = "base_host_virt_addr",
	  .kw = { "99999999999999999999999", "range", "too large",
		  "overflow" } },
	FIELD("missing base_host_virt_addr",
	      "[{\"size\":{S},\"offset\":0,\"page_size\":4096}]",
	      "base_host_virt_addr"),
	FIELD("missing size",
	      "[{\"base_host_virt_addr\":{A},\"offset\":0,\"page_size\":4096}]",
	      "size"),
	FIELD("missing offset",
	      "[{\"base_host_virt_addr\":{A},\"size\":{S},\"page_size\":4096}]",
	      "offset"),
	{ .name = "no fd", .json = "[" GOOD "]", .fds = BC_NONE,
	  .kw = { "fd", "descriptor" } },
	{ .name = "two fds", .json = "[" GOOD "]", .fds = BC_TWO,
	  .kw = { "fd", "descriptor" } },
	{ .name = "a uffd asking for fork events", .json = "[" GOOD "]",
	  .fds = BC_FORK, .kw = { "fork events" } },
	KW("huge region count", NULL /* built */, "region", "too many",
	   "too long", "too large", "longer"),
	FIELD("offset outside the file", "[" REG("{A}", "{S}", "{F}") "]",
	      "offset"),
	FIELD("size outside the file", "[" REG("{A}", "{F2}", "0") "]",
	      "size"),
	FIELD("offset+size past the end", "[" REG("{A}", "{S}", "{FH}") "]",
	      "size"),
	FIELD("offset+size overflows",
	      "[" REG("{A}", "{S}", "18446744073709547520") "]", "offset"),
	FIELD("unaligned address", "[" REG("{A1}", "{S}", "0") "]",
	      "base_host_virt_addr"),
	FIELD("unaligned size", "[" REG("{A}", "4097", "0") "]", "size"),
	FIELD("zero size", "[" REG("{A}", "0", "0") "]", "size"),
	FIELD("page_size 8192",
	      "[{\"base_host_virt_addr\":{A},\"size\":{S},\"offset\":0,"
	      "\"page_size\":8192,\"page_size_kib\":8192}]", "page_size"),
	FIELD("page_size_kib 8192 (older sender)",
	      "[{\"base_host_virt_addr\":{A},\"size\":{S},\"offset\":0,"
	      "\"page_size_kib\":8192}]", "page_size"),
	KW("overlapping regions", "[" GOOD "," REG("{AH}", "{S}", "{S}") "]",
	   "overlap"),
	KW("same region twice", "[" GOOD "," GOOD "]", "overlap"),
	KW("empty array", "[]", "empty", "region"),
	KW("an object, not an array", GOOD, "array"),
	{ .name = "null", .json = "null", .kw = { "array" }, .slow = 1 },
	{ .name = "a number", .json = "4096", .kw = { "array" }, .slow = 1 },
};

#define NCASES (sizeof(cases) / sizeof(*cases))

/*
 * One bad handshake, sent from its own child process so that its log line
 * is told apart by pid.  The child waits for the daemon to close the
 * session: exit 0 if it did, 1 if not (or it is killed, having handed
 * over its uffd).
 */
static int case_main(void *arg)
{
	const struct bad_case *bc = arg;
	struct bad_client b = {
		.sock = srv.sock, .json = bc->json, .file_size = FILE_SIZE,
		.fds = bc->fds, .then = bc->eof ? BC_EOF : BC_WAIT,
		.wait_ms = bc->slow ? 12000 : 5000,
	};

	return bad_client_main(&b);
}

struct case_run {
	const struct bad_case *bc;
	pid_t pid;
	long mark;
	uint64_t t0;
};

static void start_case(struct case_run *cr, const struct bad_case *bc)
{
	cr->bc = bc;
	cr->t0 = su_now_ms();
	cr->mark = serve_log_mark(&srv);
	cr->pid = su_spawn(case_main, (void *)bc);
}

/* Does line name the case's field and one of its keywords? */
static int line_matches(const struct bad_case *bc, const char *line)
{
	int hit = !bc->kw[0];

	if (bc->field && !strcasestr(line, bc->field))
		return 0;
	for (int i = 0; bc->kw[i] && !hit; i++)
		hit = strcasestr(line, bc->kw[i]) != NULL;
	return hit;
}

/* Expect the log line (within timeout_ms) and the daemon's close. */
static void finish_case(struct case_run *cr, unsigned int timeout_ms)
{
	const struct bad_case *bc = cr->bc;
	char line[1024] = "";
	int found = 0, r;
	uint64_t ms;

	/* the session's verdict: its last line */
	if (serve_log_find(&srv, cr->mark, cr->pid, (const char *[]){
				   "closed", "bad", "refus", "reject",
				   "error", NULL }, timeout_ms, line,
			   sizeof(line)))
		found = line_matches(bc, line);
	r = su_reap(cr->pid, 15000);
	ms = su_now_ms() - cr->t0;
	if (bc->field)
		ok(found, "%s: logged, naming %s%s%s", bc->name, bc->field,
		   bc->kw[0] ? " and " : "", bc->kw[0] ? bc->kw[0] : "");
	else
		ok(found, "%s: logged (%s)", bc->name, bc->kw[0]);
	if (line[0])
		diag("  %s", line);
	else
		serve_log_dump_pid(&srv, cr->mark, cr->pid);
	/*
	 * A client that handed over its uffd and is still there is killed,
	 * even one that has shut its end of the socket: nobody would ever
	 * serve its memory.
	 */
	if (bc->fds != BC_NONE)
		ok(r == -SIGKILL && strstr(line, "client killed"),
		   "... and the client, whose uffd nobody would serve, "
		   "killed (%d)", r);
	else
		is_int(r, 0, "... and the session closed by the daemon");
	if (ms > 1000)
		diag("  (%s: verdict after %llu ms)", bc->name,
		     (unsigned long long)ms);
}

/* 64 connections that never send a handshake must not stall a good one. */
static void test_idle_connections(void)
{
	struct su_client_args a = {
		.sock = srv.sock, .mem = &mem, .nregions = 1,
		.sizes = { 8 * MIB }, .page_size = FC_PAGE_4K,
		.stop_fd = -1, .result_fd = -1,
	};
	int idle[64], n = 0, r;
	uint64_t t0;

	for (int i = 0; i < 64; i++) {
		idle[n] = fc_connect_unix(srv.sock);
		if (idle[n] >= 0)
			n++;
	}
	/*
	 * A daemon that waited on them would serve the client only after
	 * 64 handshake timeouts (5 s each): the reap's bound (30 s) is a
	 * hang bound far under that, and far over any load's delay.
	 */
	t0 = su_now_ms();
	r = su_reap(su_spawn(su_client_main, &a), SU_CHILD_TIMEOUT * 1000);
	ok(r == 0, "with %d silent connections open, a client is served, "
	   "every byte (%d, in %llu ms)", n, r,
	   (unsigned long long)(su_now_ms() - t0));
	for (int i = 0; i < n; i++)
		close(idle[i]);
	ok(serve_alive(&srv), "daemon alive after the silent connections");
}

struct uid_arg {
	const char *sock;
	int expect_served;	/* 1: verify every byte; 0: expect EOF */
	int stay_root;		/* connect as root, not as nobody */
};

static int drop_to_nobody(void)
{
	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)) {
		diag("setuid(%d): %s", NOBODY, strerror(errno));
		return -1;
	}
	return 0;
}

/* Map and register as root (as a jailer would), connect as nobody. */
static int nobody_client(void *p)
{
	const struct uid_arg *u = p;
	uint64_t size = 4 * MIB;
	struct fc_client c;
	int ret;

	if (fc_client_map(&c, 1, &size, FC_PAGE_4K))
		return 10;
	if (!u->stay_root && drop_to_nobody())
		return 11;
	ret = fc_client_connect(&c, u->sock);
	if (ret == -EACCES)
		return 20;	/* the socket's mode kept us out */
	if (!u->expect_served && (ret == -EPIPE || ret == -ECONNRESET))
		return 0;	/* closed on accept, before the handshake */
	if (ret < 0) {
		diag("nobody: connect: %s", strerror(-ret));
		return 12;
	}
	if (!u->expect_served) {
		if (!su_closed_by_daemon(c.sock, 3000))
			return 13;
		/*
		 * Its uffd was handed over before the refusal: the daemon
		 * must kill it, or this touch sleeps for ever (SIGALRM).
		 */
		alarm(5);
		return *(volatile uint8_t *)c.regions[0].addr ? 14 : 15;
	}
	ret = su_verify_client(&mem, &c, SU_FORWARD, "nobody client");
	fc_client_close(&c);
	return ret ? 1 : 0;
}

/*
 * A daemon whose descriptor limit allows two sessions: a third client is
 * refused at once with a line saying why (not left in the backlog, no CPU
 * spent spinning), and served once a session has ended.
 */
static void test_fd_limit(void)
{
	struct su_client_args a = {
		.mem = &mem, .nregions = 1, .sizes = { 8 * MIB },
		.page_size = FC_PAGE_4K, .stop_fd = -1, .result_fd = -1,
	};
	uint64_t sizes[1] = { 8 * MIB };
	struct fc_client held[2];
	struct serve s;
	unsigned long long t0, used;
	int nheld = 0, sock, r;

	serve_init(&s);
	s.nofile = 64 + 2 * 6;	/* FD_RESERVE + 2 x FDS_PER_SESSION */
	if (serve_start(&s, mem.path, NULL)) {
		ok(0, "daemon with 76 descriptors: cannot start");
		serve_cleanup(&s);
		return;
	}
	a.sock = s.sock;
	for (int i = 0; i < 2; i++)
		if (fc_client_map(&held[nheld], 1, sizes, FC_PAGE_4K) == 0 &&
		    fc_client_connect(&held[nheld], s.sock) == 0)
			nheld++;
	/*
	 * Their memory all there: the daemon's restore work is over, so the
	 * CPU it spends from now on is the refusal's.
	 */
	bool held_ok = true;

	for (int i = 0; i < nheld; i++)
		held_ok &= su_verify_client(&mem, &held[i], SU_FORWARD,
					    "held") == 0;
	long mark = serve_log_mark(&s);

	/*
	 * Left in the backlog, the client would never be closed while the
	 * two sessions are held: the wait is a hang bound, not a speed.  A
	 * daemon that spins spends its CPU whatever the load; one that
	 * refuses spends almost none, and load only takes CPU away.
	 */
	sock = fc_connect_unix(s.sock);
	t0 = su_cpu_ticks(serve_server_pid(&s));
	r = sock >= 0 && su_closed_by_daemon(sock, 20000);
	su_sleep_ms(300);
	used = su_cpu_ticks(serve_server_pid(&s)) - t0;
	ok(nheld == 2 && held_ok && r && used < 10 &&
	   serve_log_find(&s, mark, 0, (const char *[]){ "too many sessions",
			  NULL }, 10000, NULL, 0),
	   "descriptors for 2 sessions: a third client is refused at once and "
	   "told why (%d held, %llu CPU ticks)", nheld, used);
	if (sock >= 0)
		close(sock);
	/* One that hands over its uffd is killed, never left asleep. */
	struct uid_arg u = { .sock = s.sock, .stay_root = 1 };
	pid_t pid;
	char line[1024];

	mark = serve_log_mark(&s);
	serve_kill_server(&s, SIGSTOP);	/* its handshake in the backlog first */
	pid = su_spawn(nobody_client, &u);
	su_sleep_ms(300);
	serve_kill_server(&s, SIGCONT);
	r = su_reap(pid, 10000);
	ok(r == -SIGKILL && serve_log_find(&s, mark, pid, (const char *[]){
			"too many sessions", NULL }, 2000, line, sizeof(line)) &&
	   strstr(line, "client killed"),
	   "... a third that handed over its uffd is killed, and the log says "
	   "so (%d)", r);
	for (int i = 0; i < nheld; i++)
		fc_client_close(&held[i]);
	r = su_reap(su_spawn(su_client_main, &a), 10000);
	is_int(r, 0, "... and served once the others have left");
	serve_stop(&s);
	serve_cleanup(&s);
}

/* A --stats-json path that cannot work stops the daemon at start, saying why. */
static void test_stats_path(void)
{
	static const struct { const char *what, *path, *why; } bad[] = {
		{ "in a missing directory", "/nonexistent-dir/stats.json",
		  "No such file" },
		{ "a FIFO (a write would block teardown)", NULL,
		  "not a regular file" },
	};
	char fifo[64];

	snprintf(fifo, sizeof(fifo), "/tmp/fl-stats-fifo-%d", getpid());
	mkfifo(fifo, 0600);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		const char *path = bad[i].path ? bad[i].path : fifo;
		struct serve s;
		int r;

		serve_init(&s);
		r = serve_start(&s, mem.path, (const char *[]){ "--stats-json",
				path, NULL });
		ok(r < 0 && su_file_has(s.log, "--stats-json") &&
		   su_file_has(s.log, bad[i].why),
		   "--stats-json %s: the daemon does not start, and says why",
		   bad[i].what);
		serve_stop(&s);
		serve_cleanup(&s);
	}
	unlink(fifo);
}

/* ---- the stale socket, and uids------------------------------------------- */

static void test_stale_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct serve s;
	struct su_client_args a = {
		.mem = &mem, .nregions = 1, .sizes = { 4 * MIB },
		.page_size = FC_PAGE_4K, .stop_fd = -1, .result_fd = -1,
	};
	int fd, r;

	serve_init(&s);
	strcpy(sa.sun_path, s.sock);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ok(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)),
	   "stale socket file left by a dead daemon");
	close(fd);
	r = serve_start(&s, mem.path, NULL);
	ok(!r, "daemon starts over the stale socket file");
	if (r) {
		serve_cleanup(&s);
		return;
	}
	a.sock = s.sock;
	is_int(su_reap(su_spawn(su_client_main, &a), SU_CHILD_TIMEOUT * 1000),
	       0, "... and serves on it");
	serve_stop(&s);
	serve_cleanup(&s);
}

static void test_uids(void)
{
	static const char *const only_root[] = { "--allow-uid", "0", NULL };
	static const char *const with_nobody[] = {
		"--allow-uid", "0,65534", NULL };
	struct uid_arg u = { 0 };
	struct serve s;
	char line[1024];
	const char *kw[] = { "uid", "allow", "65534", NULL };
	long mark;
	pid_t pid;
	int r;

	/* The socket is 0600: nobody cannot even connect. */
	serve_init(&s);
	chmod(s.dir, 0755);
	if (serve_start(&s, mem.path, NULL)) {
		ok(0, "daemon for the uid tests");
		serve_cleanup(&s);
		return;
	}
	u.sock = s.sock;
	u.expect_served = 0;
	is_int(su_reap(su_spawn(nobody_client, &u), 10000), 20,
	       "uid 65534 cannot connect to the 0600 socket (EACCES)");
	serve_stop(&s);
	serve_cleanup(&s);

	/* Socket opened up by the admin, --allow-uid 0: refused by uid. */
	serve_init(&s);
	chmod(s.dir, 0755);
	if (serve_start(&s, mem.path, only_root)) {
		ok(0, "daemon with --allow-uid 0");
		serve_cleanup(&s);
		return;
	}
	chmod(s.sock, 0666);
	u.sock = s.sock;
	/*
	 * Whether its uffd reaches the daemon before the refusal is a race:
	 * either its send fails (EPIPE) or it is killed, and the log says
	 * which; it never sleeps in a fault nobody serves (SIGALRM).
	 */
	int refused = 0, killed = 0, logged = 0;

	for (int i = 0; i < 6; i++) {
		mark = serve_log_mark(&s);
		/*
		 * The first time with the daemon stopped until the handshake
		 * is in its backlog: the uffd has surely arrived.
		 */
		if (i == 0)
			serve_kill_server(&s, SIGSTOP);
		pid = su_spawn(nobody_client, &u);
		if (i == 0) {
			su_sleep_ms(300);
			serve_kill_server(&s, SIGCONT);
		}
		r = su_reap(pid, 10000);
		int was_killed = r == -SIGKILL;

		refused += r == 0;
		killed += was_killed;
		if (r != 0 && !was_killed)
			diag("connect %d: result %d", i, r);
		r = serve_log_find(&s, mark, pid, kw, 2000, line, sizeof(line));
		logged += r && strstr(line, was_killed ? "client killed" :
				      "no uffd") != NULL;
		if (r && i == 0)
			diag("  %s", line);
		else if (!r)
			serve_log_dump(&s, mark);
	}
	ok(refused + killed == 6, "--allow-uid 0: 6 connects of uid 65534, "
	   "each refused before its uffd arrived or killed (%d, %d)",
	   refused, killed);
	ok(logged == 6, "--allow-uid 0: every refusal logged naming the uid "
	   "and saying whether the client was killed (%d)", logged);
	ok(serve_alive(&s), "daemon still running after the refusal");
	serve_stop(&s);
	serve_cleanup(&s);

	/* --allow-uid 0,65534: served. */
	serve_init(&s);
	chmod(s.dir, 0755);
	if (serve_start(&s, mem.path, with_nobody)) {
		ok(0, "daemon with --allow-uid 0,65534");
		serve_cleanup(&s);
		return;
	}
	chmod(s.sock, 0666);
	u.sock = s.sock;
	u.expect_served = 1;
	is_int(su_reap(su_spawn(nobody_client, &u), SU_CHILD_TIMEOUT * 1000),
	       0, "--allow-uid 0,65534: uid 65534 is served every byte");
	serve_stop(&s);
	serve_cleanup(&s);
}

/* ---- a source that fails under a running client--------------------------- */

static sigjmp_buf bus_jmp;
static volatile void *bus_addr;

static void on_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	bus_addr = si->si_addr;
	siglongjmp(bus_jmp, 1);
}

struct src_arg {
	const char *sock;
	uint64_t seed;
};

/*
 * The daemon's file was cut to 4 MiB after it started; we map 16 MiB.
 * 0: SIGBUS at the page past the end; 3: the handshake was refused instead
 * (also correct); 1: data was served for a page that has none.
 */
static int source_client(void *p)
{
	const struct src_arg *s = p;
	struct sigaction sa = { .sa_sigaction = on_bus,
				.sa_flags = SA_SIGINFO };
	uint64_t size = FILE_SIZE, w;
	struct fc_client c;
	volatile uint8_t *a;

	alarm(8);	/* a fault nobody answers: SIGALRM */
	if (fc_client_map(&c, 1, &size, FC_PAGE_4K))
		return 10;
	if (fc_client_connect(&c, s->sock))
		return 11;
	if (su_closed_by_daemon(c.sock, 300))
		return 3;
	a = c.regions[0].addr;
	memcpy(&w, (void *)a, 8);
	if (w != su_word(0, s->seed)) {
		diag("source client: page 0 is wrong");
		return 2;
	}
	sigaction(SIGBUS, &sa, NULL);
	if (sigsetjmp(bus_jmp, 1) == 0) {
		uint8_t v = a[12 * MIB + 8];

		diag("source client: read 0x%02x where the file has no data",
		     v);
		return 1;
	}
	if ((uintptr_t)bus_addr >> 12 != ((uintptr_t)a + 12 * MIB) >> 12) {
		diag("SIGBUS at %p, want page of %p", (void *)bus_addr,
		     (void *)(a + 12 * MIB));
		return 4;
	}
	fc_client_close(&c);
	return 0;
}

static void test_source_error(const char *policy)
{
	const char *const extra[] = { "--on-source-error", policy, NULL };
	struct mem_file m;
	struct serve s;
	struct src_arg sa;
	pid_t pid;
	int r;

	if (mem_file_create(&m, FILE_SIZE, 0xbadbadULL << 40)) {
		ok(0, "memory file");
		return;
	}
	serve_init(&s);
	if (serve_start(&s, m.path, extra)) {
		ok(0, "daemon --on-source-error %s", policy);
		mem_file_destroy(&m);
		serve_cleanup(&s);
		return;
	}
	/* the snapshot shrinks underneath the daemon */
	munmap((void *)m.map, m.size);
	m.map = NULL;
	if (ftruncate(m.fd, 4 * MIB))
		diag("ftruncate: %s", strerror(errno));
	sa.sock = s.sock;
	sa.seed = m.seed;
	pid = su_spawn(source_client, &sa);
	r = su_reap(pid, 15000);
	if (r == 3) {
		/* closed on us: a refusal only if the daemon said so */
		const char *kw[] = { "file", "size", "offset", NULL };

		ok(serve_alive(&s) &&
		   serve_log_find(&s, 0, pid, kw, 1000, NULL, 0),
		   "--on-source-error %s: handshake past the file refused",
		   policy);
		if (!serve_alive(&s))
			diag("no: the daemon died (status 0x%x), which closed "
			     "the client's socket", s.status);
	} else if (!strcmp(policy, "poison")) {
		is_int(r, 0, "--on-source-error poison: SIGBUS on the page "
		       "the source cannot produce");
	} else {
		ok(r < 0 && r != -SIGALRM && r != SU_TIMEOUT,
		   "--on-source-error kill: client killed (result %d)", r);
		if (r == -SIGALRM)
			diag("the client hung on a fault nobody answered");
		ok(serve_log_find(&s, 0, pid, (const char *[]){
					  "client killed by faultline", NULL },
				  5000, NULL, 0),
		   "--on-source-error kill: the session's end says faultline "
		   "killed the client");
	}
	ok(serve_alive(&s), "--on-source-error %s: daemon still running",
	   policy);
	if (r != 3)	/* served, then failed: the session says why */
		ok(serve_log_find(&s, 0, pid, (const char *[]){
					  "source errors; the first: source", NULL },
				  5000, NULL, 0),
		   "--on-source-error %s: the session's end names the first "
		   "source error", policy);
	if (tap_failures())
		serve_log_dump(&s, 0);
	if (!serve_alive(&s))
		diag("daemon wait status 0x%x", s.status);
	serve_stop(&s);
	serve_cleanup(&s);
	mem_file_destroy(&m);
}

/* The lowest descriptor number pid does not use: a limit there fails the next. */
static int lowest_free_fd(pid_t pid)
{
	char path[64];
	bool used[4096] = { false };
	struct dirent *de;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir))) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] != '.' && fd >= 0 && fd < 4096)
			used[fd] = true;
	}
	closedir(dir);
	while (n < 4096 && used[n])
		n++;
	return n;
}

struct lost_arg {
	const char *sock;
	int ready[2], go[2];
};

/* Connect, say so, wait for the go, then hand over the uffd and touch. */
static int lost_client(void *p)
{
	struct lost_arg *a = p;
	uint64_t size = 4 * MIB;
	char json[256];
	struct fc_client c;
	int sock;

	if (fc_client_map(&c, 1, &size, FC_PAGE_4K))
		return 10;
	sock = fc_connect_unix(a->sock);
	if (sock < 0 || write(a->ready[1], "c", 1) != 1 ||
	    read(a->go[0], json, 1) != 1)
		return 11;
	if (fc_client_json(&c, json, sizeof(json)) < 0 ||
	    fc_send_handshake(sock, json, &c.uffd, 1) < 0)
		return 12;
	if (!su_closed_by_daemon(sock, 10000))
		return 13;
	/* Not killed: this touch sleeps for ever (SIGALRM). */
	alarm(5);
	return *(volatile uint8_t *)c.regions[0].addr ? 14 : 15;
}

/*
 * A uffd the kernel could not install in the daemon (out of descriptors:
 * MSG_CTRUNC, no fd) was still handed over by its client, which nobody
 * will ever serve: the client is killed, and the log says why.  The
 * server's descriptor limit is lowered under it after it accepted.
 */
static void test_uffd_lost(int base_fds)
{
	struct lost_arg a = { .sock = srv.sock };
	pid_t server = serve_server_pid(&srv), pid;
	struct rlimit old, low;
	long mark = serve_log_mark(&srv);
	/* The sessions before this one gone: a count that only this moves. */
	int before = proc_fds_settle(server, NULL, base_fds, 10000), r = -1;
	char c, line[1024];

	if (pipe(a.ready) || pipe(a.go) ||
	    prlimit(server, RLIMIT_NOFILE, NULL, &old)) {
		ok(0, "uffd lost to EMFILE: setup: %s", strerror(errno));
		return;
	}
	pid = su_spawn(lost_client, &a);
	/* Accepted: its socket and pidfd are the server's (a hang bound). */
	if (read(a.ready[0], &c, 1) == 1)
		for (int i = 0; i < 10000 && proc_fds(server, NULL) < before + 2;
		     i += 10)
			su_sleep_ms(10);
	low = old;
	low.rlim_cur = lowest_free_fd(server);
	if (prlimit(server, RLIMIT_NOFILE, &low, NULL) == 0 &&
	    write(a.go[1], "g", 1) == 1)
		r = su_reap(pid, 20000);
	prlimit(server, RLIMIT_NOFILE, &old, NULL);
	ok(r == -SIGKILL && serve_log_find(&srv, mark, pid, (const char *[]){
			"out of file descriptors", NULL }, 5000, line,
			sizeof(line)) && strstr(line, "client killed"),
	   "a uffd lost to the daemon's descriptor limit: its client is "
	   "killed, and the log says so (%d)", r);
	if (r != -SIGKILL)
		su_reap(pid, 1000);
	for (int i = 0; i < 2; i++) {
		close(a.ready[i]);
		close(a.go[i]);
	}
}

/* A client that hands over memory it has already unmapped, then waits. */
static int unmapped_main(void *arg)
{
	uint64_t size = 4 * MIB;
	struct fc_client c;

	(void)arg;
	if (fc_client_map(&c, 1, &size, FC_PAGE_4K))
		return 10;
	munmap(c.regions[0].addr, size);	/* no UNMAP event: not asked */
	if (fc_client_connect(&c, srv.sock) < 0)
		return 11;
	su_sleep_ms(3000);	/* the daemon's background restore finds it */
	return 0;
}

/*
 * "restore complete" for memory that was never there says that nothing
 * was delivered, not just "0 faults".
 */
static void test_unmapped(void)
{
	long mark = serve_log_mark(&srv);
	pid_t pid = su_spawn(unmapped_main, NULL);

	ok(serve_log_find(&srv, mark, pid, (const char *[]){
				  "not mapped in the client", NULL },
			  5000, NULL, 0),
	   "memory unmapped before the handshake: the restore's line says "
	   "nothing was delivered there");
	su_reap(pid, 10000);
}

int main(void)
{
	struct su_client_args good = {
		.mem = &mem, .nregions = 2, .sizes = { 8 * MIB, 8 * MIB },
		.page_size = FC_PAGE_4K, .order = SU_STRIDE,
	};
	struct case_run slow[8];
	int nslow = 0;
	struct su_verifier v;
	unsigned long rounds, fails;
	int base_fds, r;

	load_start();
	alarm(120);
	signal(SIGPIPE, SIG_IGN);
	if (getenv("ONLY") && !strcmp(getenv("ONLY"), "source")) {
		test_source_error("poison");
		test_source_error("kill");
		return done_testing();
	}
	r = mem_file_create(&mem, FILE_SIZE, 0xfeedULL << 48 ^ getpid());
	if (r)
		BAIL("memory file: %s", strerror(-r));
	serve_init(&srv);
	if (serve_start(&srv, mem.path, NULL))
		BAIL("cannot start %s serve", serve_bin());
	base_fds = proc_fds(serve_server_pid(&srv), NULL);

	good.sock = srv.sock;
	if (su_verifier_start(&v, &good))
		BAIL("cannot start the good client");
	/*
	 * Cases the daemon may only settle by its handshake timeout run
	 * beside the others and are checked last.
	 */
	for (size_t i = 0; i < NCASES; i++)
		if (cases[i].slow)
			start_case(&slow[nslow++], &cases[i]);
	for (size_t i = 0; i < NCASES; i++) {
		struct case_run cr;

		if (cases[i].slow)
			continue;
		start_case(&cr, &cases[i]);
		finish_case(&cr, 10000);
	}
	for (int i = 0; i < nslow; i++)
		finish_case(&slow[i], 12000);
	r = su_verifier_stop(&v, &rounds, &fails);
	ok(r == 0 && rounds > 0 && fails == 0,
	   "good client meanwhile: %lu sessions, %lu wrong (result %d)",
	   rounds, fails, r);
	ok(serve_alive(&srv), "daemon survived every bad handshake");
	is_int(proc_fds_settle(serve_server_pid(&srv), "userfaultfd", 0, 3000), 0,
	       "no uffd kept from the bad sessions");
	r = proc_fds_settle(serve_server_pid(&srv), NULL, base_fds, 3000);
	ok(r <= base_fds, "daemon fd count back to %d (now %d)", base_fds, r);
	if (r > base_fds) {
		proc_fds_dump(serve_server_pid(&srv));
		serve_log_dump(&srv, 0);
	}
	test_idle_connections();
	test_unmapped();
	test_uffd_lost(base_fds);
	serve_stop(&srv);
	serve_cleanup(&srv);

	test_fd_limit();
	test_stats_path();
	test_stale_socket();
	test_uids();
	test_source_error("poison");
	test_source_error("kill");

	mem_file_destroy(&mem);
	return done_testing();
}
