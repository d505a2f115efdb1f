// SPDX-License-Identifier: Apache-2.0
/*
 * serve_reuse.c - `faultline serve` and a client that restores at the same
 * addresses again and again: 200 sessions back to back from one process,
 * half abandoned after one touch (closed at once and mapped again, as a
 * VMM that crashes or moves on does), half verified to the last page and
 * closed, some of those with fc_client_end().  Meanwhile another child
 * keeps sending malformed handshakes to the same daemon.
 *
 * Decisions: the region's offset in the file changes every fourth round
 * (0, 16, 8 MiB of a 32 MiB file) and the pattern word names its file
 * offset, so a page one session fills into the next session's memory reads
 * wrong and says where it came from.  An abandoned round whose successor
 * maps the same layout closes at once (whatever the old session still
 * fills is then the same data); one whose successor maps another layout
 * ends the session with fc_client_end() first, as docs/firecracker.md
 * asks of a client that reuses its addresses: the kernel lets the old
 * uffd fill the new memory until the daemon's EOF.  Most abandoned rounds close
 * right after their touch; one in eight waits until the daemon's
 * background restore (after FL_DEFAULT_QUIET_MS without a fault) has
 * filled pages nobody touched (mincore), then closes with it under way, so
 * the old session has fills in flight.  The children keep their counters
 * in a shared page, so one killed by its alarm (a hang) still says which
 * round and step it was in.
 */
#define _GNU_SOURCE
#include "load.h"
#include "serve_util.h"

#define MIB		(1ULL << 20)
#define FILE_SIZE	(32 * MIB)
#define REGION		(16 * MIB)
#define ROUNDS		200
#define ROUND_ALARM	10	/* seconds one round may take */
#define END_TIMEOUT	5000	/* ms fc_client_end() waits for EOF */

static struct mem_file mem;
static struct serve srv;

static const uint64_t layouts[] = { 0, 16 * MIB, 8 * MIB };

enum phase { PH_MAP, PH_CONNECT, PH_TOUCH, PH_VERIFY, PH_CLOSE, PH_END,
	     PH_DONE };
static const char *const phase_name[] = { "map", "connect", "touch",
					  "verify", "close", "end", "done" };

/* What the restoring child did, in a page shared with the parent. */
struct reuse_result {
	int round;		/* the round running (or last run) */
	int phase;		/* its step */
	int rounds;		/* rounds finished */
	int completed, abandoned;
	int ended, end_timeouts;	/* fc_client_end() used, no EOF */
	int same_addr;		/* rounds at round 0's address */
	int errors;		/* map or connect failed */
	uint64_t pages, wrong;	/* completed rounds: pages checked, wrong */
	int wrong_rounds, first_wrong;
	int touch_wrong;	/* abandoned rounds: the word touched wrong */
	int bg_waits, bg_mid;	/* waited for the background restore; and
				 * closed with it under way */
	long mark;		/* daemon log offset: the round before the
				 * first wrong one began here */
	uint64_t first_addr;
};

/* What the malformed sender did. */
enum bad_kind { BK_JSON, BK_NOFD, BK_TWOFDS, BK_TRUNC, BK_CONNCLOSE, BK_N };
static const char *const bad_name[] = { "bad JSON", "JSON with no fd",
					"two fds", "truncated then close",
					"connect and close" };

struct bad_result {
	unsigned long connects, per_kind[BK_N];
	unsigned long closed;		/* refused and closed by the daemon */
	unsigned long unanswered;	/* not closed within 5 s */
	unsigned long killed;		/* two fds: client killed */
	unsigned long connect_fail;
	int last_kind;
};

struct bad_args {
	int stop_fd;
	struct bad_result *res;
};

static volatile struct reuse_result *rr;

/* ---- the restoring client ------------------------------------------------ */

/* Pages of a connected region that differ from the file (all compared). */
static uint64_t wrong_pages(const struct fc_region *r, enum su_order order,
			    int round)
{
	const uint8_t *a = r->addr, *e = mem.map + r->offset;
	uint64_t npages = r->size / FC_PAGE_4K, stride = 7919, wrong = 0;
	char what[64];

	snprintf(what, sizeof(what), "round %d (offset %llu MiB)", round,
		 (unsigned long long)(r->offset / MIB));
	for (uint64_t i = 0; i < npages; i++) {
		uint64_t p, o;

		if (order == SU_REVERSE)
			p = npages - 1 - i;
		else if (order == SU_STRIDE)
			p = (i * stride) % npages;	/* npages: 2^n */
		else
			p = i;
		o = p * FC_PAGE_4K;
		if (!memcmp(a + o, e + o, FC_PAGE_4K))
			continue;
		if (++wrong <= 3) {
			while (a[o] == e[o])
				o++;
			su_report_bad(&mem, a, r->offset, o, what);
		}
	}
	if (wrong > 3)
		diag("%s: %llu wrong pages in all", what,
		     (unsigned long long)wrong);
	return wrong;
}

/* Resident pages of a region (mincore). */
static uint64_t resident(const struct fc_region *r)
{
	static unsigned char vec[REGION / FC_PAGE_4K];
	uint64_t n = 0;

	if (mincore(r->addr, r->size, vec))
		return 0;
	for (uint64_t i = 0; i < r->size / FC_PAGE_4K; i++)
		n += vec[i] & 1;
	return n;
}

/*
 * Wait (up to 2 s) until the daemon's background restore has started in
 * r and not finished: pages appear that nobody touched.
 */
static void wait_background(const struct fc_region *r)
{
	uint64_t t0 = su_now_ms(), first = resident(r), n = first;
	uint64_t all = r->size / FC_PAGE_4K;

	rr->bg_waits++;
	while (su_now_ms() - t0 < 2000) {
		n = resident(r);
		if (n > first || n == all)
			break;
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	}
	if (n > first && n < all)
		rr->bg_mid++;
}

static int reuse_round(int round, const char *sock)
{
	uint64_t size = REGION, off = layouts[(round / 4) % 3];
	bool same_next = layouts[((round + 1) / 4) % 3] == off;
	enum su_order order = (enum su_order)((round / 4) % 3);
	int abandon = round & 1, end = !abandon && round % 4 == 2;
	long mark = serve_log_mark(&srv);
	struct fc_client c;
	int ret;

	alarm(ROUND_ALARM);
	rr->round = round;
	rr->phase = PH_MAP;
	ret = fc_client_map_at(&c, 1, &size, &off, FC_PAGE_4K);
	if (ret < 0) {
		diag("round %d: fc_client_map: %s", round, strerror(-ret));
		rr->errors++;
		return -1;
	}
	if (round == 0)
		rr->first_addr = (uintptr_t)c.regions[0].addr;
	else if ((uintptr_t)c.regions[0].addr == rr->first_addr)
		rr->same_addr++;
	else if (round - rr->same_addr <= 3)
		diag("round %d mapped at %p, round 0 at 0x%llx", round,
		     c.regions[0].addr, (unsigned long long)rr->first_addr);
	rr->phase = PH_CONNECT;
	ret = fc_client_connect(&c, sock);
	if (ret < 0) {
		diag("round %d: fc_client_connect: %s", round,
		     strerror(-ret));
		rr->errors++;
		fc_client_close(&c);
		return -1;
	}
	if (abandon) {
		/* one word of one page, then gone */
		uint64_t pg = ((uint64_t)round * 613) % (REGION / FC_PAGE_4K);
		uint64_t o = pg * FC_PAGE_4K + (uint64_t)(round % 512) * 8;
		uint64_t got, want = su_word(off + o, mem.seed);

		rr->phase = PH_TOUCH;
		got = *(volatile uint64_t *)((uint8_t *)c.regions[0].addr + o);
		/* mostly at once; some with the background restore running */
		if ((round / 2) % 8 == 3)
			su_sleep_ms(1 + (unsigned int)round % 3);
		else if ((round / 2) % 8 == 7)
			wait_background(&c.regions[0]);
		rr->phase = PH_CLOSE;
		if (same_next) {
			fc_client_close(&c);
		} else if (fc_client_end(&c, END_TIMEOUT) == -ETIMEDOUT) {
			diag("round %d: fc_client_end: no EOF from the daemon "
			     "in %d ms", round, END_TIMEOUT);
			rr->end_timeouts++;
		}
		rr->ended += !same_next;
		if (got != want) {
			diag("round %d (abandoned, offset %llu MiB): word at "
			     "+0x%llx is 0x%016llx (file offset 0x%llx), want "
			     "0x%016llx", round,
			     (unsigned long long)(off / MIB),
			     (unsigned long long)o, (unsigned long long)got,
			     (unsigned long long)(got ^ mem.seed),
			     (unsigned long long)want);
			rr->touch_wrong++;
		}
		rr->abandoned++;
	} else {
		uint64_t w;

		rr->phase = PH_VERIFY;
		w = wrong_pages(&c.regions[0], order, round);
		rr->pages += REGION / FC_PAGE_4K;
		rr->wrong += w;
		if (w && !rr->wrong_rounds++) {
			rr->first_wrong = round;
			rr->mark = rr->mark ? rr->mark : mark;
		}
		if (end) {
			rr->phase = PH_END;
			rr->ended++;
			if (fc_client_end(&c, END_TIMEOUT) == -ETIMEDOUT) {
				diag("round %d: fc_client_end: no EOF from the "
				     "daemon in %d ms", round, END_TIMEOUT);
				rr->end_timeouts++;
			}
		} else {
			rr->phase = PH_CLOSE;
			fc_client_close(&c);
		}
		rr->completed++;
	}
	rr->phase = PH_DONE;
	rr->rounds++;
	/* the log from here on shows the round a wrong one followed */
	if (!rr->wrong_rounds)
		rr->mark = mark;
	return 0;
}

static int reuse_main(void *arg)
{
	const char *sock = arg;
	int fails = 0;

	for (int round = 0; round < ROUNDS; round++)
		fails += reuse_round(round, sock) < 0;
	alarm(0);
	return fails || rr->wrong || rr->touch_wrong || rr->end_timeouts;
}

/* ---- the malformed sender ------------------------------------------------ */

/* Two fds, its own registered uffd first: the daemon kills it. */
static int two_fds_main(void *unused)
{
	uint64_t size = 4 * MIB;
	struct fc_client c;
	char json[512];
	int fds[2], sock;

	(void)unused;
	if (fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_json(&c, json, sizeof(json)) < 0)
		return 10;
	fds[0] = c.uffd;
	fds[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sock = fc_connect_unix(srv.sock);
	if (sock < 0)
		return 11;
	fc_send_handshake(sock, json, fds, 2);
	return su_closed_by_daemon(sock, 5000) ? 0 : 1;
}

static int bad_main(void *arg)
{
	const struct bad_args *b = arg;
	struct bad_result *res = b->res;
	uint64_t size = 4 * MIB;
	struct fc_client c;
	char good[512], trunc[512];
	int n;

	if (fc_client_map(&c, 1, &size, FC_PAGE_4K))
		return 10;
	n = fc_client_json(&c, good, sizeof(good));
	if (n < 0)
		return 10;
	memcpy(trunc, good, (size_t)n / 2);
	trunc[n / 2] = 0;
	for (int k = 0;
	     poll(&(struct pollfd){ .fd = b->stop_fd, .events = POLLIN },
		  1, 0) == 0; k++) {
		enum bad_kind kind = (enum bad_kind)(k % BK_N);
		int sock, r;

		alarm(15);
		res->last_kind = kind;
		if (kind == BK_TWOFDS) {
			r = su_reap(su_spawn(two_fds_main, NULL), 10000);
			res->connects++;
			res->per_kind[kind]++;
			if (r == -SIGKILL) {
				res->killed++;
			} else if (r == 0) {
				res->closed++;
			} else {
				res->unanswered++;
				diag("malformed sender: two fds: result %d", r);
			}
			continue;
		}
		sock = fc_connect_unix(srv.sock);
		if (sock < 0) {
			if (!res->connect_fail++)
				diag("malformed sender: connect: %s",
				     strerror(-sock));
			su_sleep_ms(5);
			continue;
		}
		res->connects++;
		res->per_kind[kind]++;
		switch (kind) {
		case BK_JSON:
			fc_send_handshake(sock, "hello, faultline", NULL, 0);
			break;
		case BK_NOFD:
			fc_send_handshake(sock, good, NULL, 0);
			break;
		case BK_TRUNC:
			fc_send_handshake(sock, trunc, NULL, 0);
			close(sock);
			sock = -1;
			break;
		default:	/* connect and close */
			close(sock);
			sock = -1;
			break;
		}
		if (sock >= 0) {
			if (su_closed_by_daemon(sock, 5000)) {
				res->closed++;
			} else {
				res->unanswered++;
				diag("malformed sender: %s: not closed by the "
				     "daemon in 5 s", bad_name[kind]);
			}
			close(sock);
		}
		su_sleep_ms(1);
	}
	alarm(0);
	fc_client_close(&c);
	return res->unanswered ? 1 : 0;
}

/* ---- the test ------------------------------------------------------------ */

/*
 * The process that serves: the daemon, or its only child when the daemon
 * is a supervisor running the server (then both may hold uffds).
 */
static pid_t server_pid(void)
{
	char path[64];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children",
		 (int)srv.pid, (int)srv.pid);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return pid > 0 ? (pid_t)pid : srv.pid;
}

/* Does the daemon's log say it crashed or misbehaved? */
static const char *log_crash(void)
{
	static const char *const bad[] = { "Segmentation", "SIGSEGV",
		"SIGBUS", "Aborted", "assert", "AddressSanitizer",
		"double free", "corrupted", "stack smashing", "BUG", "panic",
		"server died", NULL };

	for (int i = 0; bad[i]; i++)
		if (su_file_has(srv.log, bad[i]))
			return bad[i];
	return NULL;
}

static void *shared_page(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		BAIL("mmap: %s", strerror(errno));
	memset(p, 0, len);
	return p;
}

int main(void)
{
	struct bad_result *br;
	struct bad_args ba;
	const char *crash;
	pid_t client, sender, server0, server1;
	int stop[2], rc, rs, r;
	uint64_t t0;

	load_start();
	alarm(150);
	signal(SIGPIPE, SIG_IGN);
	rr = shared_page(sizeof(*rr));
	br = shared_page(sizeof(*br));
	/* words are offset ^ seed, seed above bit 40: no word is zero */
	r = mem_file_create(&mem, FILE_SIZE, 0x5e05eULL << 40 ^ getpid());
	if (r)
		BAIL("memory file: %s", strerror(-r));
	serve_init(&srv);
	r = serve_start(&srv, mem.path, NULL);
	ok(r == 0, "daemon started");
	if (r)
		BAIL("cannot start %s serve", serve_bin());
	server0 = server_pid();

	if (pipe2(stop, O_CLOEXEC))
		BAIL("pipe: %s", strerror(errno));
	ba.stop_fd = stop[0];
	ba.res = br;
	sender = su_spawn(bad_main, &ba);
	close(stop[0]);
	t0 = su_now_ms();
	client = su_spawn(reuse_main, srv.sock);
	rc = su_reap(client, 120000);
	diag("%d rounds in %llu ms (%d completed, %d abandoned, %d ended "
	     "with fc_client_end)", rr->rounds,
	     (unsigned long long)(su_now_ms() - t0), rr->completed,
	     rr->abandoned, rr->ended);
	if (write(stop[1], "x", 1) != 1)
		diag("cannot stop the malformed sender");
	close(stop[1]);
	rs = su_reap(sender, 30000);

	if (rc != 0 && rr->phase != PH_DONE)
		diag("the client stopped in round %d (%s), result %d%s",
		     rr->round, phase_name[rr->phase], rc,
		     rc == -SIGALRM ? ": its alarm fired (a hang)" : "");
	ok(rr->completed == ROUNDS / 2 && rr->wrong == 0 && !rr->errors,
	   "every completed session verified: %d of %d sessions, %llu pages, "
	   "%llu wrong (in %d sessions), %d map/connect errors",
	   rr->completed, ROUNDS / 2, (unsigned long long)rr->pages,
	   (unsigned long long)rr->wrong, rr->wrong_rounds, rr->errors);
	if (rr->wrong_rounds)
		diag("first wrong session: round %d", rr->first_wrong);
	diag("%d abandoned rounds waited for the background restore, %d "
	     "closed with it under way", rr->bg_waits, rr->bg_mid);
	ok(rr->abandoned == ROUNDS / 2,
	   "no abandoned round hung: %d of %d abandoned after one touch%s",
	   rr->abandoned, ROUNDS / 2,
	   rc == -SIGALRM && rr->phase == PH_TOUCH ?
	   " (a touch was never served)" : "");
	is_int(rr->touch_wrong, 0,
	       "... and the word each touched read as the file");
	ok(rr->ended > 0 && rr->end_timeouts == 0,
	   "fc_client_end(): the daemon's EOF came within %d ms in %d of %d "
	   "sessions", END_TIMEOUT, rr->ended - rr->end_timeouts, rr->ended);
	ok(rr->rounds > 1 && rr->same_addr >= (rr->rounds - 1) * 9 / 10,
	   "sessions at the same address as round 1: %d of %d",
	   rr->same_addr + (rr->rounds > 0), rr->rounds);
	is_int(rc, 0, "the restoring client exits 0");
	diag("malformed: %lu bad JSON, %lu no fd, %lu two fds, %lu truncated, "
	     "%lu connect-and-close; %lu closed by the daemon, %lu killed "
	     "(two fds), %lu connect failures",
	     br->per_kind[BK_JSON], br->per_kind[BK_NOFD],
	     br->per_kind[BK_TWOFDS], br->per_kind[BK_TRUNC],
	     br->per_kind[BK_CONNCLOSE], br->closed, br->killed,
	     br->connect_fail);
	ok(rs == 0 && br->connects >= BK_N && br->unanswered == 0,
	   "the malformed sender ran %lu connects, every one answered "
	   "(%lu not, result %d)", br->connects, br->unanswered, rs);
	if (rs != 0 && rs != 1)
		diag("malformed sender stopped at \"%s\" (result %d)",
		     bad_name[br->last_kind], rs);

	crash = log_crash();
	server1 = server_pid();
	ok(serve_alive(&srv) && !crash && server1 == server0,
	   "daemon still running, no crash in its log%s%s",
	   crash ? ": it says " : "", crash ? crash : "");
	if (!serve_alive(&srv))
		diag("daemon wait status 0x%x", srv.status);
	if (server1 != server0)
		diag("the serving process changed: pid %d, now %d",
		     (int)server0, (int)server1);
	r = proc_fds_settle(srv.pid, "userfaultfd", 0, 3000);
	if (server1 != srv.pid)
		r += proc_fds_settle(server1, "userfaultfd", 0, 3000);
	is_int(r, 0, "no uffd left open in the daemon");
	r = serve_stop(&srv);
	ok(r >= 0 && WIFEXITED(r) && WEXITSTATUS(r) == 0,
	   "daemon exits 0 on SIGTERM (status 0x%x)", r);
	if (tap_failures())
		serve_log_dump_pid(&srv, rr->mark, client);
	serve_cleanup(&srv);
	mem_file_destroy(&mem);
	return done_testing();
}
