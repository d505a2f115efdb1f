// SPDX-License-Identifier: Apache-2.0
/*
 * clones.c - clones sharing one snapshot cache: real forked clone
 * processes, each mapping the cache MAP_PRIVATE on its own uffd
 * (fl_clone_map) handed to this process over a socket, served by one
 * engine per clone from one fl_cache.  Four clones of 64 MiB read every
 * byte right, each writes its own pattern into 2 % of the pages (the same
 * pages for all) and never sees another's; the host's memory grows by
 * about one snapshot, not four (the cache's pages plus those the clones
 * wrote, printed, bounded generously); zero pages planted in the cache's
 * holes through an unregistered private mapping are never read by a clone; a
 * source failing half-way poisons the faulting clone's page (SIGBUS) and
 * marks nothing filled that was not, while background restore fails
 * pages of its own beside the clone's faults (a page of a failed run was
 * once left claimed for ever, and good pages were poisoned for another
 * thread's failure).
 *
 * Decision: every wait is bounded (poll timeouts, an alarm in each
 * clone), so a clone left asleep fails the run instead of hanging it;
 * no point asserts a time (it runs under tests/loaded.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faultline.h"
#include "load.h"
#include "tap.h"
#include "util.h"

#define SEED		0xc10e5ull
#define SNAP		(64ull << 20)
#define NCLONES		4
#define WRITE_EVERY	50		/* 2 % of the pages */
#define FAIL_LEN	(8ull << 20)
#define FAIL_END	(FAIL_LEN / 2 + 4 * PAGE)	/* truncated here */
#define WAIT_MS		120000
#define CLONE_SECS	60

enum role {
	ROLE_WRITE,	/* read all, write 2 %, check all again */
	ROLE_READ,	/* read all */
	ROLE_FAIL,	/* read in order: right up to FAIL_END, SIGBUS there */
};

enum clone_exit {
	EXIT_OK = 0, EXIT_SETUP = 2, EXIT_READ, EXIT_VERIFY, EXIT_NOBUS,
	EXIT_PROTO,
};

struct clone {
	pid_t pid;
	int sock;
	struct fl_engine *e;
};

/* ---- the socket between this process and a clone ----------------------- */

static int send_msg(int s, const void *data, size_t len, int fd)
{
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { (void *)data, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);

		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(s, &m, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Receive len bytes (and an fd, -1 if none) within WAIT_MS: 0 or -1. */
static int recv_msg(int s, void *data, size_t len, int *fd)
{
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { data, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct pollfd p = { .fd = s, .events = POLLIN };

	if (fd)
		*fd = -1;
	if (poll(&p, 1, WAIT_MS) != 1 ||
	    recvmsg(s, &m, MSG_CMSG_CLOEXEC) != (ssize_t)len)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	if (fd && c && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}

static int send_byte(int s, char b)
{
	return send_msg(s, &b, 1, -1);
}

/* 0 if the next byte from s is want (within WAIT_MS), else -1. */
static int expect_byte(int s, char want)
{
	char b = 0;

	return recv_msg(s, &b, 1, NULL) == 0 && b == want ? 0 : -1;
}

/* ---- the clones' side --------------------------------------------------- */

static sigjmp_buf bus_jmp;

static void on_bus(int sig)
{
	(void)sig;
	siglongjmp(bus_jmp, 1);
}

/* 1 if reading the page at p raises SIGBUS, else 0 (its word in *w). */
static int read_bus(const volatile uint64_t *p, uint64_t *w)
{
	if (sigsetjmp(bus_jmp, 1))
		return 1;
	*w = *p;
	return 0;
}

static uint64_t clone_seed(int id)
{
	return SEED ^ (0x1111ull * (uint64_t)(id + 1));
}

/* Are the pages of the clone what they must be after its writes? */
static int clone_check(const uint8_t *m, uint64_t len, int id, bool wrote)
{
	for (uint64_t pg = 0; pg < len / PAGE; pg++) {
		bool own = wrote && pg % WRITE_EVERY == 0;

		if (!same_as_file(m + pg * PAGE, PAGE, pg * PAGE,
				  own ? clone_seed(id) : SEED, 0))
			return 0;
	}
	return 1;
}

static int clone_write(int s, uint8_t *m, uint64_t len, int id)
{
	if (!clone_check(m, len, id, false))
		return EXIT_READ;
	if (send_byte(s, 'r') || expect_byte(s, 'w'))
		return EXIT_PROTO;
	for (uint64_t pg = 0; pg < len / PAGE; pg += WRITE_EVERY) {
		uint64_t *w = (uint64_t *)(m + pg * PAGE);

		for (uint64_t i = 0; i < PAGE / 8; i++)
			w[i] = pattern_word(pg * PAGE + i * 8, clone_seed(id));
	}
	if (send_byte(s, 'W') || expect_byte(s, 'v'))
		return EXIT_PROTO;
	return clone_check(m, len, id, true) ? EXIT_OK : EXIT_VERIFY;
}

/* Read in order: the snapshot's bytes up to FAIL_END, SIGBUS at it. */
static int clone_fail(const uint8_t *m)
{
	uint64_t w;

	signal(SIGBUS, on_bus);
	for (uint64_t off = 0; off < FAIL_END; off += PAGE)
		if (read_bus((const uint64_t *)(m + off), &w) ||
		    !same_as_file(m + off, PAGE, off, SEED, 0))
			return EXIT_READ;
	return read_bus((const uint64_t *)(m + FAIL_END), &w) ? EXIT_OK :
	       EXIT_NOBUS;
}

__attribute__((noreturn))
static void clone_main(int s, int fd, uint64_t len, int id, enum role role)
{
	void *m;
	int uffd, ret;

	alarm(CLONE_SECS);
	if (fl_clone_map(fd, 0, len, &m, &uffd) < 0) {
		printf("# clone %d: %s\n", id, fl_last_error());
		_exit(EXIT_SETUP);
	}
	uint64_t addr = (uintptr_t)m;

	if (send_msg(s, &addr, sizeof(addr), uffd) || expect_byte(s, 'g'))
		_exit(EXIT_PROTO);
	if (role == ROLE_WRITE)
		ret = clone_write(s, m, len, id);
	else if (role == ROLE_READ)
		ret = clone_check(m, len, id, false) ? EXIT_OK : EXIT_READ;
	else
		ret = clone_fail(m);
	_exit(ret);
}

/* ---- this process: the server of the clones ----------------------------- */

/* Fork clone id of cache c and serve it: 0, or -1 (said). */
static int clone_start(struct fl_cache *c, int id, enum role role,
		       struct clone *cl)
{
	int sv[2], fd = fl_cache_open_ro(c), uffd;
	uint64_t addr;

	memset(cl, 0, sizeof(*cl));
	cl->sock = -1;
	if (fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return ok(0, "clone %d: setup: %s", id, fl_last_error()) - 1;
	cl->pid = fork();
	if (cl->pid == 0) {
		close(sv[0]);
		clone_main(sv[1], fd, fl_cache_size(c), id, role);
	}
	close(sv[1]);
	close(fd);
	cl->sock = sv[0];
	if (cl->pid < 0 || recv_msg(cl->sock, &addr, sizeof(addr), &uffd) ||
	    uffd < 0)
		return ok(0, "clone %d: its uffd and address", id) - 1;

	struct fl_engine_opts o = {
		.uffd = uffd, .client_pid = cl->pid,
		.on_error = FL_ON_ERROR_POISON,
		.flags = FL_ENGINE_ADOPT | FL_ENGINE_OWN_UFFD,
	};

	if (fl_engine_create(&o, &cl->e) < 0 ||
	    fl_engine_add_clone_region(cl->e, addr, fl_cache_size(c), c, 0,
				       0) < 0 ||
	    fl_engine_start(cl->e, 1) < 0 || send_byte(cl->sock, 'g'))
		return ok(0, "clone %d: served: %s", id, fl_last_error()) - 1;
	return 0;
}

/*
 * Wait for the clone to exit: its exit status, or -1 (killed: signal);
 * the engine's error into why (len bytes) unless NULL.
 */
static int clone_end(struct clone *cl, char *why, size_t len)
{
	int st = 0;

	if (cl->pid > 0 && waitpid(cl->pid, &st, 0) < 0)
		st = -1;
	if (why)
		snprintf(why, len, "%s", cl->e ? fl_engine_error(cl->e) : "");
	if (cl->e)
		fl_engine_destroy(cl->e);
	if (cl->sock >= 0)
		close(cl->sock);
	if (cl->pid > 0 && WIFSIGNALED(st))
		diag("clone %d killed by signal %d", cl->pid, WTERMSIG(st));
	return cl->pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The private bytes of pid's mappings of a cache (smaps). */
static uint64_t proc_anon(pid_t pid)
{
	char path[64], line[512];
	unsigned long long kb, sum = 0;
	unsigned long a, b;
	bool in = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2)
			in = strstr(line, "/memfd:faultline-cache") != NULL;
		else if (in && sscanf(line, "Anonymous: %llu", &kb) == 1)
			sum += kb;
	}
	if (f)
		fclose(f);
	return sum << 10;
}

static char *snap;
static struct fl_source *src;

static struct fl_cache *new_cache(struct fl_source *s)
{
	struct fl_cache *c = NULL;

	if (fl_cache_create(s, NULL, &c) < 0)
		BAIL("cache: %s", fl_last_error());
	return c;
}

/* Every clone told b, then each answers want: 0, or -1. */
static int round_trip(struct clone *cl, int n, char b, char want)
{
	int ret = 0;

	for (int i = 0; i < n && b; i++)
		ret |= send_byte(cl[i].sock, b);
	for (int i = 0; i < n && want; i++)
		ret |= expect_byte(cl[i].sock, want);
	return ret ? -1 : 0;
}

/*
 * What the clones take from the host: the cache's pages (the memfd's
 * allocated blocks) plus the private pages of each clone's mapping of it
 * (what it wrote: smaps' Anonymous of that mapping alone).  Not the
 * host's Shmem or AnonPages, nor a clone's whole anonymous memory: other
 * programs (tests run beside this one, files in a tmpfs /tmp) move the
 * first two, and a sanitizer's shadow is in the third.
 */
static uint64_t clones_mem(const struct fl_cache *c, const struct clone *cl,
			   int n)
{
	struct stat st;
	uint64_t m = fstat(fl_cache_fd(c), &st) == 0 ?
		     (uint64_t)st.st_blocks * 512 : 0;

	for (int i = 0; i < n; i++)
		m += proc_anon(cl[i].pid);
	return m;
}

/* (a) and (b): four writing clones of one cache; memory grows once. */
static int case_clones(void)
{
	struct clone cl[NCLONES];
	struct fl_cache *c = new_cache(src);
	int started = 0, ret = 0;

	for (; started < NCLONES; started++)
		if (clone_start(c, started, ROLE_WRITE, &cl[started]) < 0)
			break;
	ok(started == NCLONES && round_trip(cl, NCLONES, 0, 'r') == 0,
	   "%d clones of one %llu MiB cache read every byte right", NCLONES,
	   (unsigned long long)(SNAP >> 20));
	uint64_t read = clones_mem(c, cl, started);

	is_int(fl_cache_filled(c, 0, SNAP), SNAP / PAGE,
	       "every page in the fill map");
	ret = started == NCLONES ? round_trip(cl, NCLONES, 'w', 'W') : -1;
	uint64_t wrote = clones_mem(c, cl, started);

	diag("the cache + the clones' private pages: %llu MiB after "
	     "reading, %llu MiB after writing, for %d clones of %llu MiB "
	     "(%.2fx one snapshot)", (unsigned long long)(read >> 20),
	     (unsigned long long)(wrote >> 20), NCLONES,
	     (unsigned long long)(SNAP >> 20), (double)wrote / (double)SNAP);
	ok(read < 2 * SNAP && wrote < 2 * SNAP, "memory shared: less than "
	   "two snapshots for %d clones", NCLONES);
	if (ret == 0)
		ret = round_trip(cl, NCLONES, 'v', 0);
	int good = 0;

	for (int i = 0; i < started; i++)
		good += clone_end(&cl[i], NULL, 0) == EXIT_OK;
	ok(ret == 0 && good == NCLONES, "each clone wrote 2 %% of its pages "
	   "and reads its own writes and nobody else's (%d of %d)", good,
	   NCLONES);
	fl_cache_destroy(c);
	return 0;
}

/* (c) zero pages planted in the cache's holes before any fill. */
static int case_planted(void)
{
	struct fl_cache *c = new_cache(src);
	int fd = fl_cache_open_ro(c);
	uint8_t *rogue = mmap(NULL, SNAP, PROT_READ, MAP_PRIVATE, fd, 0);
	struct clone cl[2];
	int zeros = 1, good = 0;

	if (rogue == MAP_FAILED)
		BAIL("rogue mapping: %s", strerror(errno));
	for (uint64_t off = 0; off < SNAP; off += 8 * PAGE)
		zeros &= rogue[off + 8] == 0;
	struct stat st;

	fstat(fd, &st);
	ok(zeros && (uint64_t)st.st_blocks * 512 >= SNAP / 8,
	   "a rogue's unregistered private mapping planted %llu KiB of zero "
	   "pages in the cache", (unsigned long long)st.st_blocks / 2);
	is_int(fl_cache_filled(c, 0, SNAP), 0, "none of them in the fill map");
	for (int i = 0; i < 2; i++)
		if (clone_start(c, i, ROLE_READ, &cl[i]) == 0)
			good += clone_end(&cl[i], NULL, 0) == EXIT_OK;
	is_int(good, 2, "clones read the snapshot's bytes, never the planted "
	       "zeros");
	ok(same_as_file(rogue, SNAP, 0, SEED, 0),
	   "the cache holds the snapshot where zeros were planted");
	munmap(rogue, SNAP);
	close(fd);
	fl_cache_destroy(c);
	return 0;
}

/* (d) a source failing half-way: poisoned, nothing filled wrongly. */
static int case_source_fails(void)
{
	char *path = make_snapshot(FAIL_LEN, SEED, NULL, 0);
	struct fl_source *s;
	struct clone cl;

	if (fl_source_open(path, &s) < 0)
		BAIL("source: %s", fl_last_error());
	struct fl_cache *c = new_cache(s);

	if (truncate(path, FAIL_END) < 0)
		BAIL("truncate: %s", strerror(errno));
	char line[1024] = "";
	int st = clone_start(c, 0, ROLE_FAIL, &cl) == 0 ?
		 clone_end(&cl, line, sizeof(line)) : -1;

	is_int(st, EXIT_OK, "the clone read the snapshot up to where the "
	       "source fails, and SIGBUS there");
	diag("engine: %s", line);
	is_int(fl_cache_filled(c, 0, FAIL_END), FAIL_END / PAGE,
	       "the pages before it are filled");
	is_int(fl_cache_filled(c, FAIL_END, FAIL_LEN - FAIL_END), 0,
	       "no page past it is in the fill map");
	off_t data = lseek(fl_cache_fd(c), (off_t)FAIL_END, SEEK_DATA);

	ok(data < 0 && errno == ENXIO, "no page past it in the cache at all "
	   "(SEEK_DATA: %lld)", (long long)data);
	fl_cache_destroy(c);
	fl_source_put(s);
	drop_snapshot(path);
	return 0;
}

/* A clone in this process (a VMM's few lines), and what is refused. */
static int case_in_process(void)
{
	struct fl_cache *c = new_cache(src);
	struct fl_engine_opts mine = { .uffd = -1 };
	struct fl_engine *e = NULL;
	void *m = NULL;
	int uffd = -1;

	ok(fl_clone_map(fl_cache_fd(c), 0, SNAP, &m, &uffd) == 0,
	   "fl_clone_map: a private mapping and its uffd");
	struct fl_engine_opts o = {
		.uffd = uffd, .flags = FL_ENGINE_ADOPT | FL_ENGINE_OWN_UFFD,
	};

	if (fl_engine_create(&o, &e) < 0)
		BAIL("engine: %s", fl_last_error());
	is_int(fl_engine_add_clone_region(e, (uintptr_t)m, SNAP + PAGE, c, 0,
					  0), -EINVAL,
	       "a clone region beyond the cache is refused");
	is_int(fl_engine_add_clone_region(e, (uintptr_t)m, SNAP, c, 0, 1u << 7),
	       -EINVAL, "an unknown flag is refused");
	ok(fl_engine_add_clone_region(e, (uintptr_t)m, SNAP, c, 0, 0) == 0 &&
	   fl_engine_start(e, 1) == 0, "served in this process");
	ok(same_as_file(m, SNAP, 0, SEED, 0), "it reads the snapshot");
	fl_engine_destroy(e);
	munmap(m, SNAP);

	if (fl_engine_create(&mine, &e) < 0)
		BAIL("engine: %s", fl_last_error());
	is_int(fl_engine_add_clone_region(e, 0x10000000, SNAP, c, 0, 0),
	       -EINVAL, "a uffd that asks for EVENT_REMOVE is refused");
	diag("%s", fl_last_error());
	fl_engine_destroy(e);
	struct fl_cache_opts bad = { .reserved = { 1 } };
	struct fl_cache *c2 = NULL;

	is_int(fl_cache_create(src, &bad, &c2), -EINVAL,
	       "cache options with reserved space not zero are refused");
	fl_cache_destroy(c);
	return 0;
}

static const struct tap_case cases[] = {
	{ "in_process", case_in_process },
	{ "clones", case_clones },
	{ "planted", case_planted },
	{ "source_fails", case_source_fails },
};

int main(void)
{
	load_start();	/* first: FL_LOAD spinners fork from an empty process */
	snap = make_snapshot(SNAP, SEED, NULL, 0);
	if (fl_source_open(snap, &src) < 0)
		BAIL("source: %s", fl_last_error());
	const char *only = getenv("FL_CASE");

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		if (!only || strstr(cases[i].name, only))
			tap_run_cases(&cases[i], 1);
	fl_source_put(src);
	drop_snapshot(snap);
	load_stop();
	return done_testing();
}
