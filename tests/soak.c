// SPDX-License-Identifier: Apache-2.0
/*
 * soak.c - `make soak`: `faultline serve` through many Firecracker-style
 * sessions (SOAK_SESSIONS, 10,000 by default under make soak; 200 when
 * run alone) beside malformed clients: every byte right, no client hung,
 * the daemon's descriptors back to their start and its RSS not growing
 * over the second half of the run.
 *
 * Decisions: not in make check's list (make soak runs it, under
 * tests/loaded.sh); sessions run in batches of two worker processes, and
 * the daemon is sampled between batches; RSS is judged robustly: the
 * largest sample of the last quarter against the largest of the second
 * quarter plus 4 MiB, never one sample against another.
 */
#define _GNU_SOURCE
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

/* Malformed clients until stop_fd is readable. */
static int malformed(void *arg)
{
	int stop_fd = *(int *)arg;
	unsigned long n = 0;

	while (poll(&(struct pollfd){ .fd = stop_fd, .events = POLLIN }, 1,
		    0) == 0) {
		int s = fc_connect_unix(srv.sock);

		alarm(SU_CHILD_TIMEOUT);
		if (s < 0)
			continue;
		switch (n++ % 3) {
		case 0:		/* not JSON, no descriptor */
			fc_send_handshake(s, "hello, faultline", NULL, 0);
			su_closed_by_daemon(s, 10000);
			break;
		case 1:		/* truncated, then EOF */
			fc_send_handshake(s, "[{\"base_host_virt_addr\":", NULL,
					  0);
			shutdown(s, SHUT_WR);
			su_closed_by_daemon(s, 10000);
			break;
		default:	/* connects and goes */
			break;
		}
		close(s);
	}
	return 0;
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
	is_int(su_reap(su_spawn(su_client_main, &all), 60000), 0,
	       "warm-up: the whole file, every byte");
	server = serve_server_pid(&srv);
	fd0 = proc_fds(server, NULL);
	sfd0 = proc_fds(srv.pid, NULL);
	diag("start: server %ld fds, supervisor %ld fds, VmRSS %ld KiB", fd0,
	     sfd0, proc_status_kb(server, "VmRSS"));
	if (pipe2(stop, O_CLOEXEC))
		BAIL("pipe");
	bad = su_spawn(malformed, &stop[0]);
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
	r = su_reap(bad, (SU_CHILD_TIMEOUT + 5) * 1000);
	is_int(r, 0, "malformed clients: none hung");
	is_int(wrong, 0, "every session's bytes right");
	is_int(hung, 0, "no client hung");
	ok(serve_alive(&srv) && serve_server_pid(&srv) == server,
	   "the daemon and its server still running");
	fd1 = proc_fds_settle(server, NULL, (int)fd0, 10000);
	sfd1 = proc_fds_settle(srv.pid, NULL, (int)sfd0, 10000);
	ok(fd1 <= fd0 && sfd1 <= sfd0, "descriptors back to their start "
	   "(server %ld -> %ld, supervisor %ld -> %ld)", fd0, fd1, sfd0, sfd1);
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
