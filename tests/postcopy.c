// SPDX-License-Identifier: Apache-2.0
/*
 * postcopy.c - live post-copy over real TCP between two network namespaces:
 * `faultline send` in one, tcp:// sources (library, engine, daemon) in the
 * other; random reads, an idle receiver fed by the stream alone, a sender
 * restarted mid-transfer (resume without resending), a sender gone for good
 * (-EIO, never wrong data), a sender restarted on another file of the same
 * size or whose file is rewritten (never two snapshots mixed), a sender
 * alive but stopped (reads fail within the retry window, no hang).
 *
 * Decisions: the test process moves itself into the destination namespace
 * (before any thread exists), senders are forked into the source one with
 * setns; the link is shaped with netem delay when the kernel has it, else
 * with a tbf rate limit (so "mid-transfer" lasts long enough to catch).
 * Namespaces and senders are removed at exit and on fatal signals.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include "faultline.h"
#include "source/peer_proto.h"
#include "serve_util.h"
#include "source/source.h"

#define SEED	0x5a5a000000000000ull
#define PORT	"7431"

static char ns_src[32], ns_dst[32], veth_s[16], veth_d[16];
static char addr_s[32], spec[96];
static int net_made;
static pid_t senders[16];
static char logs[16][128];
static int nsenders;
static rlim_t sender_nofile;	/* RLIMIT_NOFILE of the next sender; 0: as is */
static struct mem_file mem, mem2;	/* mem2: same size, other bytes */
static uint64_t size;

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cleanup(void)
{
	for (int i = 0; i < nsenders; i++)
		if (senders[i] > 0) {
			kill(senders[i], SIGKILL);
			waitpid(senders[i], NULL, 0);
			senders[i] = 0;
		}
	if (net_made) {
		run("ip netns del %s 2>/dev/null", ns_src);
		run("ip netns del %s 2>/dev/null", ns_dst);
		net_made = 0;
	}
	for (int i = 0; i < nsenders; i++)
		if (logs[i][0] && !getenv("KEEP_LOGS"))
			unlink(logs[i]);
	if (mem.path[0])
		unlink(mem.path);
	if (mem2.path[0])
		unlink(mem2.path);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_signals(void)
{
	static const int sigs[] = { SIGALRM, SIGTERM, SIGINT, SIGHUP,
				    SIGSEGV, SIGBUS, SIGABRT };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
		signal(sigs[i], on_signal);
}

static int enter_ns(const char *ns)
{
	char p[64];

	snprintf(p, sizeof(p), "/run/netns/%s", ns);
	int fd = open(p, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	int ret = setns(fd, CLONE_NEWNET) ? -errno : 0;

	close(fd);
	return ret;
}

static const char *shaping = "none";

/*
 * Namespaces left by an earlier run that died without its cleanup
 * (SIGKILL): the pid in their name is gone.  Removed, so that they do not
 * pile up on a machine that runs the tests often.
 */
static void sweep_stale_namespaces(void)
{
	DIR *d = opendir("/run/netns");
	struct dirent *de;
	int pid;
	char side[4];

	while (d && (de = readdir(d)))
		if (sscanf(de->d_name, "fl-%3[a-z]-%d", side, &pid) == 2 &&
		    pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
			run("ip netns delete %s 2>/dev/null", de->d_name);
	if (d)
		closedir(d);
}

static int net_setup(void)
{
	int x = getpid() % 250;

	sweep_stale_namespaces();

	snprintf(ns_src, sizeof(ns_src), "fl-src-%d", getpid());
	snprintf(ns_dst, sizeof(ns_dst), "fl-dst-%d", getpid());
	snprintf(veth_s, sizeof(veth_s), "fls%d", getpid());
	snprintf(veth_d, sizeof(veth_d), "fld%d", getpid());
	snprintf(addr_s, sizeof(addr_s), "10.231.%d.1", x);
	if (run("ip netns add %s", ns_src))
		return -1;
	net_made = 1;
	if (run("ip netns add %s", ns_dst) ||
	    run("ip link add %s type veth peer name %s", veth_s, veth_d) ||
	    run("ip link set %s netns %s", veth_s, ns_src) ||
	    run("ip link set %s netns %s", veth_d, ns_dst) ||
	    run("ip -n %s addr add %s/30 dev %s", ns_src, addr_s, veth_s) ||
	    run("ip -n %s addr add 10.231.%d.2/30 dev %s", ns_dst, x,
		veth_d) ||
	    run("ip -n %s link set lo up", ns_src) ||
	    run("ip -n %s link set lo up", ns_dst) ||
	    run("ip -n %s link set %s up", ns_src, veth_s) ||
	    run("ip -n %s link set %s up", ns_dst, veth_d))
		return -1;
	if (getenv("FL_POSTCOPY_NOSHAPE"))	/* for measurements */
		return 0;
	if (!run("tc -n %s qdisc add dev %s root netem delay 2ms "
		 "limit 100000 2>/dev/null", ns_src, veth_s) &&
	    !run("tc -n %s qdisc add dev %s root netem delay 2ms "
		 "limit 100000 2>/dev/null", ns_dst, veth_d)) {
		shaping = "netem delay 2ms each way";
	} else if (!run("tc -n %s qdisc add dev %s root tbf rate 400mbit "
			"burst 256kb latency 20ms", ns_src, veth_s)) {
		shaping = "tbf rate 400mbit (no netem in this kernel)";
	}
	return 0;
}

/* Start `faultline send` on path in the source namespace; its index. */
static int sender_start_file(const char *path)
{
	int i = nsenders++;

	snprintf(logs[i], sizeof(logs[i]), "/tmp/fl-send-%d-%d.log",
		 getpid(), i);
	fflush(stdout);
	pid_t pid = fork();

	if (pid == 0) {
		char listen[64];
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (int s = 1; s < 32; s++)
			signal(s, SIG_DFL);
		if (enter_ns(ns_src))
			_exit(126);
		fd = open(logs[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			  0644);
		if (fd >= 0)
			dup2(fd, 2);
		snprintf(listen, sizeof(listen), "%s:%s", addr_s, PORT);
		if (sender_nofile) {
			struct rlimit rl = { sender_nofile, sender_nofile };

			setrlimit(RLIMIT_NOFILE, &rl);
		}
		/* FL_POSTCOPY_BLOCK: the sender's block size, to measure */
		const char *bs = getenv("FL_POSTCOPY_BLOCK");

		execl(serve_bin(), serve_bin(), "send", "--listen", listen,
		      "--mem-file", path, "--block-size", bs ? bs : "64K",
		      (char *)NULL);
		_exit(127);
	}
	senders[i] = pid;
	return i;
}

static int sender_start(void)
{
	return sender_start_file(mem.path);
}

static void sender_stop(int i, int sig)
{
	if (senders[i] <= 0)
		return;
	kill(senders[i], sig);
	waitpid(senders[i], NULL, 0);
	senders[i] = 0;
}

/* Sum of "sent N bytes" over a sender's session lines. */
static uint64_t sender_bytes(int i, int *sessions)
{
	FILE *f = fopen(logs[i], "r");
	char line[1024];
	uint64_t sum = 0;

	*sessions = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, " sent ");
		unsigned long long n;

		if (p && sscanf(p, " sent %llu bytes", &n) == 1) {
			sum += n;
			(*sessions)++;
		}
	}
	fclose(f);
	return sum;
}

static void dump_log(int i)
{
	FILE *f = fopen(logs[i], "r");
	char line[1024];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		diag("sender %d: %s", i, line);
	}
	fclose(f);
}

static int src_read(struct fl_source *s, void *buf, size_t len, uint64_t off)
{
	return s->ops->read(s, buf, len, off);
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static struct peer_stats pstats(struct fl_source *s)
{
	struct peer_stats st = { 0 };

	source_peer_stats(s, &st);
	return st;
}

/* Wait until the source holds at least want blocks; 0 or -1. */
static int wait_have(struct fl_source *s, uint64_t want, unsigned int ms)
{
	uint64_t t0 = su_now_ms();

	while (pstats(s).blocks_have < want) {
		if (su_now_ms() - t0 > ms || pstats(s).dead)
			return -1;
		su_sleep_ms(1);
	}
	return 0;
}

/* Read the whole source in 1 MiB pieces and compare; 0 if equal. */
static int read_all_equal(struct fl_source *s)
{
	char *buf = malloc(1 << 20);
	int ret = 0;

	for (uint64_t off = 0; off < size && !ret; off += 1 << 20) {
		size_t n = size - off < (1 << 20) ? size - off : (1 << 20);

		if (src_read(s, buf, n, off) ||
		    memcmp(buf, mem.map + off, n))
			ret = -1;
	}
	free(buf);
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* (1) the library source: random reads, demand latency under the stream. */
static void library_reads(void)
{
	struct fl_source *s = NULL;
	uint64_t t0 = now_us();
	int ret = fl_source_open(spec, &s);

	ok(ret == 0 && fl_source_size(s) == size,
	   "fl_source_open(%s): %llu bytes (%s)", spec,
	   (unsigned long long)(s ? fl_source_size(s) : 0),
	   ret ? fl_last_error() : "ok");
	if (ret)
		return;

	uint64_t lat[64];
	int nlat = 0, bad = 0, errs = 0;
	unsigned int seed = 42;
	char *buf = malloc(300 << 10);

	for (int i = 0; i < 2000; i++) {
		uint64_t len = 1 + (uint64_t)rand_r(&seed) % (300 << 10);
		uint64_t off = (((uint64_t)rand_r(&seed) << 16) ^
				(uint64_t)rand_r(&seed)) % (size - len);
		uint64_t req = pstats(s).requests, t = now_us();

		if (i < 64)
			len = 4096, off &= ~4095ull;
		ret = src_read(s, buf, len, off);
		t = now_us() - t;
		if (ret)
			errs++;
		else if (memcmp(buf, mem.map + off, len))
			bad++;
		if (i < 64 && pstats(s).requests > req)
			lat[nlat++] = t;
	}
	free(buf);
	ok(!bad && !errs, "2000 random reads (64 of 4 KiB first, then up to "
	   "300 KiB) equal the file: %d wrong, %d errors", bad, errs);
	qsort(lat, (size_t)nlat, sizeof(*lat), cmp_u64);
	if (nlat)
		diag("demand read latency while the stream runs (%d misses): "
		     "median %llu us, max %llu us", nlat,
		     (unsigned long long)lat[nlat / 2],
		     (unsigned long long)lat[nlat - 1]);
	ret = wait_have(s, pstats(s).nblocks, 20000);
	struct peer_stats st = pstats(s);

	ok(ret == 0, "the rest arrives by the stream: %llu of %llu blocks "
	   "(%llu on demand, %llu streamed, %llu duplicate copies)",
	   (unsigned long long)st.blocks_have,
	   (unsigned long long)st.nblocks,
	   (unsigned long long)st.blocks_demand,
	   (unsigned long long)st.blocks_stream,
	   (unsigned long long)st.dups);
	fl_source_put(s);
	(void)t0;
}

/* (3) an idle receiver gets everything from the stream alone. */
static void idle_receiver(void)
{
	struct fl_source *s = NULL;
	uint64_t t0 = now_us();

	if (fl_source_open(spec, &s)) {
		ok(0, "idle receiver: open: %s", fl_last_error());
		ok(0, "idle receiver: reads after the stream");
		return;
	}
	int ret = wait_have(s, pstats(s).nblocks, 20000);
	struct peer_stats st = pstats(s);
	double sec = (double)(st.complete_ns / 1000 - t0) / 1e6;

	ok(ret == 0 && st.requests == 0 && st.blocks_stream == st.nblocks,
	   "idle receiver: whole file by the stream, %llu requests",
	   (unsigned long long)st.requests);
	if (!ret)
		diag("received %llu MiB in %.3f s (%.0f MiB/s) over %s",
		     (unsigned long long)(size >> 20), sec,
		     (double)(size >> 20) / sec, shaping);
	ret = read_all_equal(s);
	ok(ret == 0 && pstats(s).requests == 0,
	   "reads after the stream completed equal the file, no request "
	   "(%llu)", (unsigned long long)pstats(s).requests);
	fl_source_put(s);
}

struct toucher {
	uint8_t *mem;
	unsigned int seed;
	int bad;
};

static void *touch_random(void *arg)
{
	struct toucher *t = arg;
	uint64_t npages = size / 4096;

	for (uint64_t i = 0; i < npages / 2; i++) {
		uint64_t pg = (uint64_t)rand_r(&t->seed) % npages;

		if (memcmp(t->mem + pg * 4096, mem.map + pg * 4096, 4096))
			t->bad++;
	}
	return NULL;
}

/* (2) an engine serving a registered region from the tcp:// source. */
static void engine_random(void)
{
	struct fl_source *s = NULL;
	struct fl_engine *e = NULL;
	struct fl_engine_opts o = { .uffd = -1 };
	uint8_t *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct toucher t[4];
	pthread_t th[4];
	int bad = 0, ret;

	ret = fl_source_open(spec, &s);
	if (!ret)
		ret = fl_engine_create(&o, &e);
	struct fl_region_desc d = { .addr = (uintptr_t)m, .len = size, .page_size = 4096, .src_offset = 0, .flags = FL_REGION_REGISTER };

	if (!ret)
		ret = fl_engine_add_region(e, &d, s);
	if (!ret)
		ret = fl_engine_start(e, 2);
	if (ret) {
		ok(0, "engine from tcp://: %s", fl_last_error());
		goto out;
	}
	uint64_t t0 = now_us();

	for (int i = 0; i < 4; i++) {
		t[i] = (struct toucher){ m, 31u * i + 7, 0 };
		pthread_create(&th[i], NULL, touch_random, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		bad += t[i].bad;
	}
	uint64_t t1 = now_us();
	int all = !memcmp(m, mem.map, size);
	struct fl_stats st;

	fl_engine_stats(e, &st);
	ok(!bad && all, "engine, 4 threads touching random pages: %d wrong "
	   "pages, full compare %s (%.3f s, %llu faults, p50 %llu us, "
	   "p99 %llu us)", bad, all ? "equal" : "DIFFERS",
	   (double)(t1 - t0) / 1e6, (unsigned long long)st.faults,
	   (unsigned long long)fl_stats_percentile(&st, 50) / 1000,
	   (unsigned long long)fl_stats_percentile(&st, 99) / 1000);
	fl_engine_stop(e);
out:
	if (e)
		fl_engine_destroy(e);
	if (s)
		fl_source_put(s);
	munmap(m, size);
}

/* (4) the sender restarted mid-transfer: resume, nothing sent twice. */
static void resume(void)
{
	struct fl_source *s = NULL;
	char sp[128];
	int a = sender_start(), b, na, nb;

	snprintf(sp, sizeof(sp), "%s?retry_ms=8000", spec);
	if (fl_source_open(sp, &s)) {
		ok(0, "resume: open: %s", fl_last_error());
		skip(2, "no source");
		return;
	}
	struct peer_stats st = pstats(s);
	int ret = wait_have(s, st.nblocks / 4, 10000);
	uint64_t at = pstats(s).blocks_have;

	sender_stop(a, SIGTERM);
	su_sleep_ms(300);
	b = sender_start();
	if (!ret)
		ret = wait_have(s, st.nblocks, 20000);
	st = pstats(s);
	ok(ret == 0 && st.connects >= 2 && read_all_equal(s) == 0,
	   "sender stopped at %llu of %llu blocks and restarted: receiver "
	   "reconnected (%llu sessions) and has the whole file, equal",
	   (unsigned long long)at, (unsigned long long)st.nblocks,
	   (unsigned long long)st.connects);
	sender_stop(b, SIGTERM);

	uint64_t sa = sender_bytes(a, &na), sb = sender_bytes(b, &nb);
	uint64_t slack = 8ull << 20;

	ok(na == 1 && nb == 1 && sa + sb <= size + slack,
	   "bytes sent over both sessions %llu + %llu = %llu <= file %llu "
	   "+ %llu MiB slack", (unsigned long long)sa, (unsigned long long)sb,
	   (unsigned long long)(sa + sb), (unsigned long long)size,
	   (unsigned long long)(slack >> 20));
	ok(st.bytes_received <= size + slack,
	   "receiver got %llu payload bytes (%llu duplicate blocks)",
	   (unsigned long long)st.bytes_received, (unsigned long long)st.dups);
	if (sa + sb > size + slack || nb != 1) {
		dump_log(a);
		dump_log(b);
	}
	fl_source_put(s);
}

/* (4b) the link down for longer than the TCP timeouts, then up again. */
static void link_flap(void)
{
	struct fl_source *s = NULL;
	char sp[128];
	int a = sender_start();

	snprintf(sp, sizeof(sp), "%s?retry_ms=10000", spec);
	if (fl_source_open(sp, &s)) {
		ok(0, "link flap: open: %s", fl_last_error());
		return;
	}
	uint64_t nb = pstats(s).nblocks;
	int ret = wait_have(s, nb / 4, 10000);
	uint64_t at = pstats(s).blocks_have;

	run("ip -n %s link set %s down", ns_dst, veth_d);
	su_sleep_ms(4500);
	run("ip -n %s link set %s up", ns_dst, veth_d);
	if (!ret)
		ret = wait_have(s, nb, 15000);
	struct peer_stats st = pstats(s);

	ok(ret == 0 && read_all_equal(s) == 0,
	   "link down 4.5 s at %llu of %llu blocks, then up: whole file, "
	   "equal (%llu sessions, %llu payload bytes received)",
	   (unsigned long long)at, (unsigned long long)nb,
	   (unsigned long long)st.connects,
	   (unsigned long long)st.bytes_received);
	fl_source_put(s);
	sender_stop(a, SIGTERM);
}

/* (5) the sender gone for good: -EIO after the retry window, never wrong. */
static void sender_gone(void)
{
	struct fl_source *s = NULL;
	char sp[128];
	int a = sender_start();

	snprintf(sp, sizeof(sp), "%s?retry_ms=1500", spec);
	if (fl_source_open(sp, &s)) {
		ok(0, "gone: open: %s", fl_last_error());
		skip(1, "no source");
		return;
	}
	uint64_t nb = pstats(s).nblocks;

	wait_have(s, nb / 8, 10000);
	sender_stop(a, SIGKILL);
	uint64_t held = pstats(s).blocks_have;
	char *buf = malloc(64 << 10);
	int good = 0, eio = 0, other = 0, wrong = 0;
	uint64_t t0 = now_us(), first_fail = 0;
	char msg[256] = "";

	for (uint64_t off = 0; off < size; off += 64 << 10) {
		size_t n = size - off < (64 << 10) ? size - off : (64 << 10);
		int ret = src_read(s, buf, n, off);

		if (ret == -EIO) {
			if (!eio++) {
				first_fail = now_us() - t0;
				snprintf(msg, sizeof(msg), "%s",
					 fl_last_error());
			}
		} else if (ret) {
			other++;
		} else if (memcmp(buf, mem.map + off, n)) {
			wrong++;
		} else {
			good++;
		}
	}
	free(buf);
	ok(held < nb && eio > 0 && !other && !wrong &&
	   first_fail < 8000000 && strstr(msg, "unreachable"),
	   "sender killed at %llu of %llu blocks: %d reads -EIO (first after "
	   "%.2f s: \"%s\"), %d good, %d wrong, %d other errors",
	   (unsigned long long)held, (unsigned long long)nb, eio,
	   (double)first_fail / 1e6, msg, good, wrong, other);
	ok(pstats(s).dead && good > 0,
	   "received blocks still read correctly after giving up");
	fl_source_put(s);
}

/*
 * Read every 64 KiB block of s: held blocks must equal want, the others
 * fail with -EIO and a message containing msg_has; nothing may equal other.
 */
struct scan {
	int good, eio, wrong, other_file, other_err;
	char msg[256];
};

static struct scan scan_blocks(struct fl_source *s, const struct mem_file *want,
			       const struct mem_file *other,
			       const char *msg_has)
{
	struct scan r = { 0 };
	char *buf = malloc(64 << 10);

	for (uint64_t off = 0; off < size; off += 64 << 10) {
		size_t n = size - off < (64 << 10) ? size - off : (64 << 10);
		int ret = src_read(s, buf, n, off);

		if (ret == -EIO) {
			if (!r.eio++ || !strstr(r.msg, msg_has))
				snprintf(r.msg, sizeof(r.msg), "%s",
					 fl_last_error());
		} else if (ret) {
			r.other_err++;
		} else if (!memcmp(buf, other->map + off, n)) {
			r.other_file++;
		} else if (memcmp(buf, want->map + off, n)) {
			r.wrong++;
		} else {
			r.good++;
		}
	}
	free(buf);
	return r;
}

/* (5b) the sender restarted on another file of the same size. */
static void file_swapped(void)
{
	struct fl_source *s = NULL;
	char sp[128];
	int a = sender_start(), b;

	snprintf(sp, sizeof(sp), "%s?retry_ms=3000", spec);
	if (fl_source_open(sp, &s)) {
		ok(0, "swap: open: %s", fl_last_error());
		skip(2, "no source");
		sender_stop(a, SIGKILL);
		return;
	}
	uint64_t nb = pstats(s).nblocks;

	wait_have(s, nb / 8, 10000);
	sender_stop(a, SIGKILL);
	b = sender_start_file(mem2.path);
	uint64_t held = pstats(s).blocks_have;
	struct scan r = scan_blocks(s, &mem, &mem2, "the sender's file "
				    "changed");
	struct peer_stats st = pstats(s);

	ok(held < nb && r.eio > 0 && (uint64_t)r.good >= held &&
	   !r.wrong && !r.other_file && !r.other_err && st.changed &&
	   strstr(r.msg, "the sender's file changed"),
	   "sender restarted on another file of the same size at %llu of "
	   "%llu blocks: %d reads -EIO (\"%s\"), %d good, %d from the other "
	   "file, %d wrong, %d other errors", (unsigned long long)held,
	   (unsigned long long)nb, r.eio, r.msg, r.good, r.other_file,
	   r.wrong, r.other_err);
	fl_source_put(s);

	/* The file rewritten under a running sender (mtime moves). */
	if (fl_source_open(sp, &s)) {
		ok(0, "rewrite: open: %s", fl_last_error());
		skip(1, "no source");
		sender_stop(b, SIGKILL);
		return;
	}
	wait_have(s, nb / 8, 10000);
	if (futimens(mem2.fd, NULL))
		diag("futimens: %s", strerror(errno));
	wait_have(s, nb, 5000);		/* ends when it gives up */
	held = pstats(s).blocks_have;
	r = scan_blocks(s, &mem2, &mem, "the sender's file changed");
	st = pstats(s);

	struct fl_source *s2 = NULL;
	int ret = fl_source_open(sp, &s2);
	char msg2[256];

	snprintf(msg2, sizeof(msg2), "%s", ret ? fl_last_error() : "opened");
	ok(held < nb && r.eio > 0 && r.good > 0 && !r.wrong &&
	   !r.other_file && !r.other_err && st.changed && ret == -ESTALE &&
	   strstr(msg2, "changed"),
	   "file rewritten under a running sender: receiver stopped at %llu "
	   "of %llu blocks, %d reads -EIO, %d good, %d wrong; a new receiver "
	   "is refused (%d: \"%s\")", (unsigned long long)held,
	   (unsigned long long)nb, r.eio, r.good, r.wrong, ret, msg2);
	if (!ret)
		fl_source_put(s2);
	fl_source_put(s);
	sender_stop(b, SIGKILL);
}

/* (5c) a sender alive but stopped: a read fails within the retry window. */
static void sender_stopped(void)
{
	struct fl_source *s = NULL;
	char sp[128], buf[4096];
	int a = sender_start();

	snprintf(sp, sizeof(sp), "%s?retry_ms=1500", spec);
	if (fl_source_open(sp, &s)) {
		ok(0, "stopped: open: %s", fl_last_error());
		sender_stop(a, SIGKILL);
		return;
	}
	while (!pstats(s).connects)	/* both links up, the stream running */
		su_sleep_ms(1);
	kill(senders[a], SIGSTOP);
	waitpid(senders[a], NULL, WUNTRACED);	/* really stopped now */
	uint64_t t = now_us();
	int ret = src_read(s, buf, sizeof(buf), size - sizeof(buf));
	char msg[256];

	t = now_us() - t;
	snprintf(msg, sizeof(msg), "%s", ret ? fl_last_error() : "read");
	/*
	 * Not before the window (time only grows under load); how soon
	 * after it is the scheduler's: the bound past it is a hang bound.
	 */
	ok(ret == -EIO && t >= 1400000 && t < 30000000 &&
	   strstr(msg, "1500 ms"),
	   "sender stopped (SIGSTOP): a read of a missing block fails, not "
	   "before its 1.5 s window, after %.2f s: %d \"%s\"",
	   (double)t / 1e6, ret, msg);
	kill(senders[a], SIGCONT);
	sender_stop(a, SIGKILL);
	fl_source_put(s);
}

/* (5d) a last block shorter than 8 bytes' multiple, zero but its tail. */
static void short_tail(void)
{
	static const uint8_t tail[13] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5 };
	char path[64], *buf = calloc(1, 65536 + sizeof(tail));
	struct fl_source *s = NULL;
	int fd, a, ret;

	snprintf(path, sizeof(path), "/tmp/fl-tail-%d", getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || !buf || pwrite(fd, tail, sizeof(tail), 65536) !=
	    (ssize_t)sizeof(tail)) {
		ok(0, "short tail: cannot write %s", path);
		goto out;
	}
	a = sender_start_file(path);
	ret = fl_source_open(spec, &s);
	if (!ret)
		ret = src_read(s, buf, 65536 + sizeof(tail), 0);
	ok(!ret && !memcmp(buf + 65536, tail, sizeof(tail)),
	   "a 13-byte last block, zero but for its last 5 bytes, arrives "
	   "as data (%s)", ret ? fl_last_error() : "ok");
	if (s)
		fl_source_put(s);
	sender_stop(a, SIGTERM);
out:
	if (fd >= 0)
		close(fd);
	unlink(path);
	free(buf);
}

/*
 * A connection that says DEMAND HELLO with token (a receiver's own: the
 * same token again would replace that session); the answer's type, or -1.
 */
static int demand_hello(int *fdp, uint64_t token)
{
	struct {
		struct peer_hdr h;
		struct peer_hello hi;
	} __attribute__((packed)) m = {
		.h = { .type = htole16(PEER_HELLO),
		       .len = htole32(sizeof(struct peer_hello)) },
		.hi = { .magic = htole32(PEER_MAGIC),
			.version = htole16(PEER_VERSION),
			.role = htole16(PEER_ROLE_DEMAND),
			.token = htole64(token) },
	};
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(atoi(PORT)) };
	struct timeval tv = { 30, 0 };	/* a hang bound: load may slow a reply */
	struct peer_hdr h;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*fdp = fd;
	if (fd < 0 || inet_pton(AF_INET, addr_s, &sa.sin_addr) != 1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, &m, sizeof(m)) != (ssize_t)sizeof(m) ||
	    recv(fd, &h, sizeof(h), MSG_WAITALL) != (ssize_t)sizeof(h))
		return -1;
	return le16toh(h.type);
}

/*
 * (5e) anyone who can connect holds a connection open for ever (a demand
 * connection may be idle for a whole migration): with 64 descriptors, 80
 * such connections are refused past the limit, the sender does not spin
 * on a full descriptor table, and a receiver is served once they leave.
 */
static void conn_flood(void)
{
	int fds[80], welcome = 0, refused = 0, a;
	unsigned long long t0, used;
	struct fl_source *s = NULL;

	sender_nofile = 64;
	a = sender_start();
	sender_nofile = 0;
	for (int i = 0; i < 100 && demand_hello(&fds[0], 1) < 0; i++) {
		close(fds[0]);
		su_sleep_ms(20);	/* not listening yet */
	}
	close(fds[0]);
	su_sleep_ms(50);	/* that one's thread ends */
	for (int i = 0; i < 80; i++) {
		int t = demand_hello(&fds[i], 100 + i);

		welcome += t == PEER_WELCOME;
		refused += t == PEER_ERROR;
	}
	t0 = su_cpu_ticks(senders[a]);
	su_sleep_ms(500);
	used = su_cpu_ticks(senders[a]) - t0;
	ok(welcome > 0 && welcome < 64 && welcome + refused == 80 &&
	   used < 10, "80 idle demand connections to a sender with 64 "
	   "descriptors: %d served, %d refused, %llu CPU ticks in 500 ms",
	   welcome, refused, used);
	for (int i = 0; i < 80; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	su_sleep_ms(100);	/* their threads see the end and leave */
	int ret = fl_source_open(spec, &s);

	ok(ret == 0 && read_all_equal(s) == 0 &&
	   su_file_has(logs[a], "too many connections"),
	   "after they leave, a receiver reads every byte; the refusals are "
	   "logged (%s)", ret ? fl_last_error() : "ok");
	if (!ret)
		fl_source_put(s);
	sender_stop(a, SIGTERM);
}

/* (6) the daemon end to end: serve --mem-file tcp://, a Firecracker client. */
static void daemon_e2e(void)
{
	struct serve sv;
	int a = sender_start();

	serve_init(&sv);
	int ret = serve_start(&sv, spec, NULL);

	if (ret) {
		ok(0, "faultline serve --mem-file %s: %s", spec, strerror(-ret));
		sender_stop(a, SIGTERM);
		serve_cleanup(&sv);
		return;
	}
	struct su_client_args ca = {
		.sock = sv.sock, .mem = &mem, .nregions = 2,
		.sizes = { size / 2, size / 2 }, .page_size = 4096,
		.order = SU_STRIDE, .stop_fd = -1, .result_fd = -1,
	};
	pid_t c = su_spawn(su_client_main, &ca);
	int rc = su_reap(c, 30000);
	int st = serve_stop(&sv);

	ok(rc == 0, "faultline serve --mem-file %s: a Firecracker-style "
	   "client (2 regions, strided) reads every byte right", spec);
	ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "... and on SIGTERM the daemon drains and exits 0 (status 0x%x)",
	   st);
	serve_cleanup(&sv);

	/*
	 * SIGTERM while the source still receives: its receiver thread
	 * must not take the signal (the default action: the daemon killed
	 * instead of draining).
	 */
	serve_init(&sv);
	ret = serve_start(&sv, spec, NULL);
	st = ret ? -1 : serve_stop(&sv);
	ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "SIGTERM while the tcp:// source is still receiving: the daemon "
	   "exits 0 (status 0x%x)", st);
	if (rc)
		serve_log_dump(&sv, 0);
	serve_cleanup(&sv);
	sender_stop(a, SIGTERM);
}

int main(void)
{
	const char *mb = getenv("FL_POSTCOPY_MB");

	if (geteuid() != 0)
		skip_all_missing("root", "network namespaces need it");
	if (run("ip -V >/dev/null 2>&1") || run("tc -V >/dev/null 2>&1"))
		skip_all_missing("iproute2 (ip, tc)", "not on PATH "
				 "(apt-get install iproute2)");
	size = (mb ? strtoull(mb, NULL, 0) : 64) << 20;
	alarm(120);
	if (mem_file_create(&mem, size, SEED) ||
	    mem_file_create(&mem2, size, SEED ^ 0xa5a5))
		BAIL("cannot create the memory files");
	/* 1 MiB of zeros: blocks that travel as a header only. */
	char *z = calloc(1, 1 << 20);

	if (pwrite(mem.fd, z, 1 << 20, (off_t)(size / 2)) != 1 << 20)
		BAIL("pwrite");
	free(z);
	atexit(cleanup);
	catch_signals();

	int ret = net_setup();

	ok(ret == 0, "namespaces %s and %s joined by a veth, shaped: %s",
	   ns_src, ns_dst, shaping);
	if (ret || enter_ns(ns_dst))
		BAIL("cannot set up the network namespaces");
	snprintf(spec, sizeof(spec), "tcp://%s:%s", addr_s, PORT);

	int a = sender_start();

	library_reads();
	idle_receiver();
	engine_random();
	sender_stop(a, SIGTERM);
	int n;
	uint64_t sent = sender_bytes(a, &n);

	ok(n == 3, "first sender logged one line per session (%d, %llu "
	   "bytes in all)", n, (unsigned long long)sent);
	if (n != 3)
		dump_log(a);
	resume();
	link_flap();
	sender_gone();
	file_swapped();
	sender_stopped();
	short_tail();
	conn_flood();
	daemon_e2e();
	return done_testing();
}
