// SPDX-License-Identifier: Apache-2.0
/*
 * serve_keep.c - what `faultline serve`'s supervisor keeps, it keeps for
 * every client: a server killed right after it took a client's socket
 * loses no client (the supervisor accepts); a session the supervisor
 * cannot keep is never served as if kept; and thousands of sessions
 * survive a takeover with every client's memory right.
 *
 * Decision: the server is stopped where a test needs it through a
 * test-only variable of the daemon's (FAULTLINE_TEST_PAUSE_AFTER_ACCEPT),
 * and keeping is made to fail for real, by lowering the supervisor's own
 * descriptor limit with prlimit(2): no part is mocked.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/resource.h>

#include "load.h"
#include "serve_util.h"

#define MIB	(1ull << 20)

static struct mem_file mem;

/* Is pid stopped (state T)?  Polls up to ms. */
static bool stopped_within(pid_t pid, int ms)
{
	char path[40], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < ms / 5; i++) {
		FILE *f = fopen(path, "re");
		char *p = NULL;

		if (f && fgets(buf, sizeof(buf), f))
			p = strrchr(buf, ')');
		if (f)
			fclose(f);
		if (p && p[1] == ' ' && p[2] == 'T')
			return true;
		su_sleep_ms(5);
	}
	return false;
}

/*
 * The server stops itself the moment it holds its first client's socket
 * and is killed there: the client, its uffd sent, must be served by the
 * next server (or refused with a line), never left waiting on a fault.
 */
static void killed_after_accept(void)
{
	struct su_client_args a = {
		.mem = &mem, .nregions = 1, .sizes = { 8 * MIB },
		.page_size = FC_PAGE_4K, .stop_fd = -1, .result_fd = -1,
	};
	const char *kw[] = { "taken over", NULL };
	struct serve s;
	pid_t server, client;
	bool stopped;
	long mark;
	int st;

	setenv("FAULTLINE_TEST_PAUSE_AFTER_ACCEPT", "1", 1);
	serve_init(&s);
	st = serve_start(&s, mem.path, NULL);
	unsetenv("FAULTLINE_TEST_PAUSE_AFTER_ACCEPT");
	if (st) {
		ok(0, "daemon for the killed-after-accept test");
		serve_cleanup(&s);
		return;
	}
	mark = serve_log_mark(&s);
	server = serve_server_pid(&s);
	a.sock = s.sock;
	client = su_spawn(su_client_main, &a);
	stopped = stopped_within(server, 20000);
	kill(server, SIGKILL);
	st = su_reap(client, (SU_CHILD_TIMEOUT + 10) * 1000);
	ok(stopped, "the server stopped right after taking the client's "
	   "socket, and was killed there");
	ok(st == 0 && serve_log_find(&s, mark, client, kw, 2000, NULL, 0),
	   "a server killed right after accept: the next server serves that "
	   "client, every byte right (status %d%s)", st,
	   st == -SIGALRM ? ": it hung on a fault" : "");
	if (tap_failures())
		serve_log_dump(&s, mark);
	is_int(serve_stop(&s), 0, "killed after accept: the daemon stops "
	       "cleanly");
	serve_cleanup(&s);
}

/*
 * The supervisor left two descriptors to spare (prlimit(2) on it): it
 * takes the client's socket, but not the three a serving session hands
 * it.  The session must not be served as if kept: refused with a line,
 * its client killed (its uffd had been handed over); then, the limit
 * raised again, the next client is served.
 */
static void keep_fails(void)
{
	struct su_client_args a = {
		.mem = &mem, .nregions = 1, .sizes = { 8 * MIB },
		.page_size = FC_PAGE_4K, .stop_fd = -1, .result_fd = -1,
	};
	const char *kw[] = { "could not keep it", NULL };
	struct rlimit old, low;
	struct serve s;
	pid_t client;
	long mark;
	int st, st2, n;

	serve_init(&s);
	if (serve_start(&s, mem.path, NULL)) {
		ok(0, "daemon for the keep-fails test");
		serve_cleanup(&s);
		return;
	}
	mark = serve_log_mark(&s);
	if (serve_wait_supervisor_listens(&s, 30000))
		diag("the supervisor never held the listener");
	n = proc_fds(s.pid, NULL);
	if (prlimit(s.pid, RLIMIT_NOFILE, NULL, &old) < 0)
		BAIL("prlimit: %s", strerror(errno));
	low = (struct rlimit){ (rlim_t)n + 2, old.rlim_max };
	if (prlimit(s.pid, RLIMIT_NOFILE, &low, NULL) < 0)
		BAIL("prlimit: %s", strerror(errno));
	a.sock = s.sock;
	client = su_spawn(su_client_main, &a);
	st = su_reap(client, (SU_CHILD_TIMEOUT + 10) * 1000);
	ok(st == -SIGKILL && serve_log_find(&s, mark, client, kw, 5000, NULL,
					    0),
	   "a session the supervisor could not keep is not served: refused "
	   "with a line, its client killed (status %d, supervisor at %d fds "
	   "of %d)", st, n, n + 2);
	prlimit(s.pid, RLIMIT_NOFILE, &old, NULL);
	st2 = su_reap(su_spawn(su_client_main, &a), SU_CHILD_TIMEOUT * 1000);
	is_int(st2, 0, "the limit raised again, the next client is served");
	if (tap_failures())
		serve_log_dump(&s, mark);
	is_int(serve_stop(&s), 0, "keep fails: the daemon stops cleanly");
	serve_cleanup(&s);
}

/* Sessions kept across a takeover: fewer under the sanitizers. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MANY_PROCS	10
#define MANY_EACH	20
#else
#define MANY_PROCS	50
#define MANY_EACH	100
#endif
#define MANY_PAGES	4

struct many_args {
	const char *sock;
	int ready_w, go_r;
};

/*
 * MANY_EACH sessions of one process, each a region of MANY_PAGES pages
 * at its own offset: half of each verified before the takeover, the rest
 * (never touched yet: served by the new server) after go_r.
 */
static int many_client(void *arg)
{
	const struct many_args *m = arg;
	uint64_t size = MANY_PAGES * 4096, half = size / 2, bad;
	struct fc_client *c = calloc(MANY_EACH, sizeof(*c));
	char ch;
	int wrong = 0;

	if (!c)
		return 10;
	alarm(120);
	for (int i = 0; i < MANY_EACH; i++) {
		uint64_t off = (uint64_t)(getpid() % 64 + i) * size;

		if (fc_client_map_at(&c[i], 1, &size, &off, FC_PAGE_4K) ||
		    fc_client_connect(&c[i], m->sock))
			return 11;
		wrong += su_verify(&mem, c[i].regions[0].addr, off, half, 4096,
				   SU_FORWARD, &bad) != 0;
	}
	if (write(m->ready_w, "r", 1) != 1 || read(m->go_r, &ch, 1) != 1)
		return 12;
	alarm(120);
	for (int i = 0; i < MANY_EACH; i++)
		wrong += su_verify(&mem, (char *)c[i].regions[0].addr + half,
				   c[i].regions[0].offset + half, half, 4096,
				   SU_FORWARD, &bad) != 0;
	return wrong ? 1 : 0;
}

static void many_sessions(void)
{
	const char *extra[] = { "--no-prefetch", "--no-background", NULL };
	int procs = MANY_PROCS, total, bad = 0, ready = 0;
	pid_t pid[MANY_PROCS], old;
	struct many_args m;
	int rp[2], gp[2];
	struct serve s;
	struct rlimit rl;
	char ch;

	/*
	 * The server holds 6 descriptors a session: as many sessions as the
	 * hard limit leaves room for (20,000 here, without CAP_SYS_RESOURCE
	 * to raise it: 3,100), 5,000 where it allows.
	 */
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max < 6 * (rlim_t)(procs * MANY_EACH) + 1024)
		procs = (int)((rl.rlim_max - 1024) / 6 / MANY_EACH);
	total = procs * MANY_EACH;
	if (total < MANY_PROCS * MANY_EACH)
		diag("%d sessions, not %d: the descriptor limit is %llu", total,
		     MANY_PROCS * MANY_EACH, (unsigned long long)rl.rlim_max);
	serve_init(&s);
	s.nofile = rl.rlim_max == RLIM_INFINITY ? 65536 : rl.rlim_max;
	if (serve_start(&s, mem.path, extra)) {
		ok(0, "daemon for %d sessions", total);
		serve_cleanup(&s);
		return;
	}
	if (pipe2(rp, O_CLOEXEC) || pipe2(gp, O_CLOEXEC))
		BAIL("pipe: %s", strerror(errno));
	m = (struct many_args){ .sock = s.sock, .ready_w = rp[1],
				.go_r = gp[0] };
	for (int i = 0; i < procs; i++)
		pid[i] = su_spawn(many_client, &m);
	close(rp[1]);
	close(gp[0]);
	while (ready < procs && read(rp[0], &ch, 1) == 1)
		ready++;
	old = serve_server_pid(&s);
	kill(old, SIGKILL);
	ok(ready == procs && serve_server_wait(&s, old, 60000) > 0,
	   "%d sessions served (%d processes), then the server killed and "
	   "started again", total, ready);
	for (int i = 0; i < procs; i++)
		if (write(gp[1], "g", 1) != 1)
			break;
	close(gp[1]);
	close(rp[0]);
	for (int i = 0; i < procs; i++) {
		int st = su_reap(pid[i], 180000);

		if (st)
			diag("client process %d: status %d", i, st);
		bad += st != 0;
	}
	ok(!bad, "%d sessions kept across the takeover: every client's "
	   "memory right after it (%d of %d processes wrong or hung)",
	   total, bad, procs);
	if (bad)
		serve_log_dump(&s, 0);
	/* Every session ended before the stop (tearing down takes a while). */
	proc_fds_settle(serve_server_pid(&s), "userfaultfd", 0, 180000);
	int st = serve_stop(&s);

	ok(st == 0, "%d sessions: the daemon stops cleanly (0x%x)", total, st);
	serve_cleanup(&s);
}

int main(void)
{
	load_start();
	signal(SIGPIPE, SIG_IGN);
	if (mem_file_create(&mem, 256 * MIB, 0x5e55) < 0)
		BAIL("cannot create the memory file");
	killed_after_accept();
	keep_fails();
	many_sessions();
	mem_file_destroy(&mem);
	return done_testing();
}
