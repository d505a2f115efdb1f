// SPDX-License-Identifier: Apache-2.0
/*
 * serve_basic.c - `faultline serve` against Firecracker-style clients: one
 * and several regions, 4 KiB and real 2 MiB hugetlb pages, 8 concurrent
 * clients, writes, two threads faulting the same pages, balloon-style
 * MADV_DONTNEED (REMOVE events), holes in the memory file, accepted handshake
 * shapes, no leaked uffd, --once, socket activation, draining on SIGTERM.
 *
 * Every client is a forked process that verifies each byte it was served
 * against the memory file, so a hung fault fails one test, not the run.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <json-c/json.h>
#include <linux/falloc.h>
#include <pthread.h>

#include "huge_lock.h"
#include "serve_util.h"

#define MIB		(1ULL << 20)
#define FILE_SIZE	(32 * MIB)

static struct mem_file mem;
static struct serve srv;

static struct su_client_args args1(uint64_t size, uint64_t page,
				   enum su_order order)
{
	struct su_client_args a = {
		.sock = srv.sock, .mem = &mem, .nregions = 1,
		.sizes = { size }, .page_size = page, .order = order,
		.stop_fd = -1, .result_fd = -1,
	};

	return a;
}

static int run_one(struct su_client_args *a)
{
	return su_reap(su_spawn(su_client_main, a), SU_CHILD_TIMEOUT * 1000);
}

/* ---- writes and concurrent faults on the same pages----------------------- */

struct touch_arg {
	const struct fc_client *c;
	int bad;
};

static void *touch_all(void *p)
{
	struct touch_arg *t = p;

	t->bad = su_verify_client(&mem, t->c, SU_FORWARD, "thread") != 0;
	return NULL;
}

static int write_and_threads(void *unused)
{
	uint64_t size = 8 * MIB;
	struct fc_client c;
	struct touch_arg t[2];
	pthread_t th[2];
	volatile uint8_t *a;
	int bad = 0;

	(void)unused;
	if (fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_connect(&c, srv.sock))
		return 10;
	a = c.regions[0].addr;
	/* A write to a missing page: the data must arrive, then the write. */
	a[5 * 4096 + 100] = 0xa5;
	if (a[5 * 4096 + 100] != 0xa5)
		bad |= 1;
	if (memcmp((void *)a + 5 * 4096, mem.map + 5 * 4096, 100) ||
	    memcmp((void *)a + 5 * 4096 + 101, mem.map + 5 * 4096 + 101,
		   4096 - 101)) {
		diag("write fault: rest of the page is not the file's data");
		bad |= 2;
	}
	a[5 * 4096 + 100] = mem.map[5 * 4096 + 100];
	/* Two threads fault the same pages at the same time (EEXIST+WAKE). */
	for (int i = 0; i < 2; i++) {
		t[i].c = &c;
		t[i].bad = 0;
		pthread_create(&th[i], NULL, touch_all, &t[i]);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		if (t[i].bad)
			bad |= 4;
	}
	fc_client_close(&c);
	return bad;
}

/* ---- balloon: MADV_DONTNEED of a touched and an untouched range----------- */

static int balloon(void *unused)
{
	uint64_t size = 16 * MIB;
	struct fc_client c;
	uint8_t *a;
	int bad = 0;

	(void)unused;
	if (fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_connect(&c, srv.sock))
		return 10;
	a = c.regions[0].addr;
	if (su_verify(&mem, a, 0, 4 * MIB, 4096, SU_FORWARD, NULL)) {
		diag("balloon: first 4 MiB wrong before the balloon");
		bad |= 1;
	}
	/* Inflate: give back [1, 3) MiB (touched) and [8, 10) MiB (not). */
	if (madvise(a + 1 * MIB, 2 * MIB, MADV_DONTNEED) ||
	    madvise(a + 8 * MIB, 2 * MIB, MADV_DONTNEED)) {
		diag("madvise: %s", strerror(errno));
		bad |= 2;
	}
	if (!su_is_zero(a + 1 * MIB, 2 * MIB)) {
		diag("balloon: touched range removed, reads non-zero");
		bad |= 4;
	}
	if (!su_is_zero(a + 8 * MIB, 2 * MIB)) {
		diag("balloon: untouched range removed, reads non-zero");
		bad |= 8;
	}
	/* Everything else still the snapshot's. */
	if (su_verify(&mem, a, 0, 1 * MIB, 4096, SU_FORWARD, NULL) ||
	    su_verify(&mem, a + 3 * MIB, 3 * MIB, 5 * MIB, 4096, SU_REVERSE,
		      NULL) ||
	    su_verify(&mem, a + 10 * MIB, 10 * MIB, 6 * MIB, 4096, SU_STRIDE,
		      NULL)) {
		diag("balloon: data outside the removed ranges is wrong");
		bad |= 16;
	}
	/* Deflate: the guest writes the returned pages again. */
	memset(a + 8 * MIB, 0x3c, 4096);
	if (a[8 * MIB + 4095] != 0x3c)
		bad |= 32;
	fc_client_close(&c);
	return bad;
}

/* ---- hugetlb-------------------------------------------------------------- */

/* KiB of hugetlb memory mapped in the VMA at addr (smaps Private_Hugetlb). */
static long hugetlb_kb(void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	int in = 0;
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && !strncmp(line, "Private_Hugetlb:", 16)) {
			kb = strtol(line + 16, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

static int huge_client(void *arg)
{
	const struct su_client_args *a = arg;
	struct fc_client c;
	int bad = 0;

	if (fc_client_map(&c, a->nregions, a->sizes, FC_PAGE_2M))
		return 10;
	if (fc_client_connect(&c, a->sock))
		return 11;
	if (su_verify_client(&mem, &c, a->order, "hugetlb client"))
		bad |= 1;
	for (int i = 0; i < c.nregions; i++) {
		long kb = hugetlb_kb(c.regions[i].addr);

		if (kb != (long)(c.regions[i].size >> 10)) {
			diag("region %d: %ld KiB of hugetlb mapped, want %llu",
			     i, kb,
			     (unsigned long long)c.regions[i].size >> 10);
			bad |= 2;
		}
	}
	fc_client_close(&c);
	return bad;
}

/* ---- handshakes in other accepted shapes---------------------------------- */

/* {A} = the region's address, {S} = its size (4 MiB, at offset 0). */
static const struct {
	const char *name;
	const char *json;
} shapes[] = {
	{ "no page_size, no page_size_kib (before v1.7): 4 KiB",
	  "[{\"base_host_virt_addr\":{A},\"size\":{S},\"offset\":0}]" },
	{ "page_size_kib only (v1.7 to v1.11)",
	  "[{\"base_host_virt_addr\":{A},\"size\":{S},\"offset\":0,"
	  "\"page_size_kib\":4096}]" },
	{ "fields in another order, and an unknown field (forks add some)",
	  "[{\"page_size\":4096,\"offset\":0,\"gpa_start\":0,"
	  "\"size\":{S},\"base_host_virt_addr\":{A}}]" },
	{ "pretty-printed, with whitespace and newlines",
	  "[\n  {\n    \"base_host_virt_addr\": {A},\n    \"size\": {S},\n"
	  "    \"offset\": 0,\n    \"page_size\": 4096,\n"
	  "    \"page_size_kib\": 4096\n  }\n]\n" },
};

static void expand(const char *t, char *out, size_t len, uint64_t a,
		   uint64_t sz)
{
	size_t n = 0;

	while (*t && n + 24 < len) {
		if (!strncmp(t, "{A}", 3) || !strncmp(t, "{S}", 3)) {
			n += (size_t)snprintf(out + n, len - n, "%llu",
					      (unsigned long long)
					      (t[1] == 'A' ? a : sz));
			t += 3;
		} else {
			out[n++] = *t++;
		}
	}
	out[n] = 0;
}

static int shape_client(void *arg)
{
	const char *tmpl = arg;
	uint64_t size = 4 * MIB;
	struct fc_client c;
	char json[512];
	int sock, ret;

	if (fc_client_map(&c, 1, &size, FC_PAGE_4K))
		return 10;
	expand(tmpl, json, sizeof(json), (uintptr_t)c.regions[0].addr, size);
	sock = fc_connect_unix(srv.sock);
	if (sock < 0)
		return 11;
	if (fc_send_handshake(sock, json, &c.uffd, 1) < 0)
		return 12;
	c.sock = sock;
	/* a refused handshake closes the socket: do not wait on a fault */
	if (poll(&(struct pollfd){ .fd = sock, .events = POLLIN }, 1, 200)) {
		diag("handshake refused");
		return 13;
	}
	ret = su_verify_client(&mem, &c, SU_FORWARD, "shape client");
	fc_client_close(&c);
	return ret ? 1 : 0;
}

/* The JSON in two writes 50 ms apart (the fd with the first): a stream. */
static int split_client(void *unused)
{
	uint64_t size = 4 * MIB;
	struct fc_client c;
	char json[512];
	size_t half;
	int sock, ret;

	(void)unused;
	if (fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_json(&c, json, sizeof(json)) < 0)
		return 10;
	sock = fc_connect_unix(srv.sock);
	if (sock < 0)
		return 11;
	half = strlen(json) / 2;
	char first[512];

	memcpy(first, json, half);
	first[half] = 0;
	if (fc_send_handshake(sock, first, &c.uffd, 1) < 0)
		return 12;
	su_sleep_ms(50);
	if (send(sock, json + half, strlen(json + half), MSG_NOSIGNAL) < 0)
		return 12;
	c.sock = sock;
	ret = su_verify_client(&mem, &c, SU_STRIDE, "split client");
	fc_client_close(&c);
	return ret ? 1 : 0;
}

/*
 * SIGTERM while a client restores: it must still get every byte.  The
 * client restores 4 MiB, the daemon gets SIGTERM and stops listening, and
 * only then does the client fault in the rest, from the far end.
 */
struct drain_arg {
	const char *sock;
	int half_w;	/* written when the first 4 MiB are verified */
	int go_r;	/* readable once the daemon is draining */
};

static int drain_client(void *arg)
{
	const struct drain_arg *d = arg;
	uint64_t size = 32 * MIB;
	struct fc_client c;
	char ch;
	int ret;

	if (fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_connect(&c, d->sock))
		return 10;
	if (su_verify(&mem, c.regions[0].addr, 0, 4 * MIB, 4096, SU_FORWARD,
		      NULL))
		return 1;
	if (write(d->half_w, "h", 1) != 1 || read(d->go_r, &ch, 1) != 1)
		return 11;
	ret = su_verify_client(&mem, &c, SU_REVERSE, "draining client");
	fc_client_close(&c);
	return ret ? 1 : 0;
}

static void test_drain(void)
{
	struct serve s;
	struct drain_arg d;
	int half[2], go[2], r, st;
	uint64_t t0;
	pid_t pid;
	char ch;

	serve_init(&s);
	if (serve_start(&s, mem.path, NULL) || pipe2(half, O_CLOEXEC) ||
	    pipe2(go, O_CLOEXEC)) {
		ok(0, "daemon for the SIGTERM test");
		serve_cleanup(&s);
		return;
	}
	d.sock = s.sock;
	d.half_w = half[1];
	d.go_r = go[0];
	pid = su_spawn(drain_client, &d);
	close(half[1]);
	close(go[0]);
	if (read(half[0], &ch, 1) == 1) {
		kill(s.pid, SIGTERM);
		t0 = su_now_ms();
		while (su_listening(s.sock) && su_now_ms() - t0 < 2000)
			su_sleep_ms(1);
		ok(!su_listening(s.sock), "SIGTERM: the daemon stops listening");
		if (write(go[1], "g", 1) != 1)
			diag("cannot release the client");
	}
	close(half[0]);
	close(go[1]);
	r = su_reap(pid, SU_CHILD_TIMEOUT * 1000);
	is_int(r, 0, "... but the running client still gets every byte");
	st = serve_wait(&s, 5000);
	ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "... and the daemon exits 0 once it has gone (status 0x%x)", st);
	if (st < 0)
		serve_stop(&s);
	serve_cleanup(&s);
}

/* Balloon on hugetlb: ZEROPAGE does not work there, zeros are copied. */
static int huge_balloon(void *unused)
{
	uint64_t size = 8 * MIB;
	struct fc_client c;
	uint8_t *a;
	int bad = 0;

	(void)unused;
	if (fc_client_map(&c, 1, &size, FC_PAGE_2M) ||
	    fc_client_connect(&c, srv.sock))
		return 10;
	a = c.regions[0].addr;
	if (su_verify(&mem, a, 0, 2 * MIB, 4096, SU_FORWARD, NULL))
		bad |= 1;
	if (madvise(a, 2 * MIB, MADV_DONTNEED) ||
	    madvise(a + 4 * MIB, 2 * MIB, MADV_DONTNEED)) {
		diag("madvise on hugetlb: %s", strerror(errno));
		bad |= 2;
	}
	if (!su_is_zero(a, 2 * MIB) || !su_is_zero(a + 4 * MIB, 2 * MIB)) {
		diag("hugetlb balloon: removed huge page reads non-zero");
		bad |= 4;
	}
	if (su_verify(&mem, a + 2 * MIB, 2 * MIB, 2 * MIB, 4096, SU_REVERSE,
		      NULL) ||
	    su_verify(&mem, a + 6 * MIB, 6 * MIB, 2 * MIB, 4096, SU_FORWARD,
		      NULL))
		bad |= 8;
	fc_client_close(&c);
	return bad;
}

/* ---- tests---------------------------------------------------------------- */

static void test_regions(void)
{
	struct su_client_args a;
	int r;

	a = args1(16 * MIB, FC_PAGE_4K, SU_FORWARD);
	is_int(run_one(&a), 0, "one 16 MiB region, 4 KiB pages, every byte");

	a = args1(FILE_SIZE, FC_PAGE_4K, SU_REVERSE);
	is_int(run_one(&a), 0, "one region = whole file, touched backwards");

	a = args1(0, FC_PAGE_4K, SU_STRIDE);
	a.nregions = 4;
	a.sizes[0] = 4 * MIB;
	a.sizes[1] = 8 * MIB;
	a.sizes[2] = 4096;
	a.sizes[3] = 12 * MIB - 4096;
	is_int(run_one(&a), 0,
	       "4 consecutive regions (one of a single page), strided");

	/* Regions whose data is not laid out in order, with gaps. */
	a = args1(0, FC_PAGE_4K, SU_FORWARD);
	a.nregions = 3;
	a.sizes[0] = 2 * MIB;
	a.offsets[0] = 20 * MIB;
	a.sizes[1] = 6 * MIB;
	a.offsets[1] = 4096;
	a.sizes[2] = 1 * MIB;
	a.offsets[2] = FILE_SIZE - 1 * MIB;
	r = run_one(&a);
	is_int(r, 0, "3 regions at out-of-order offsets with gaps");

	r = su_reap(su_spawn(split_client, NULL), SU_CHILD_TIMEOUT * 1000);
	is_int(r, 0, "handshake JSON split over two writes 50 ms apart");
	for (size_t i = 0; i < sizeof(shapes) / sizeof(*shapes); i++) {
		r = su_reap(su_spawn(shape_client, (void *)shapes[i].json),
			    SU_CHILD_TIMEOUT * 1000);
		is_int(r, 0, shapes[i].name);
	}
}

static void test_concurrent(void)
{
	struct su_client_args a[8];
	pid_t pid[8];
	uint64_t t0 = su_now_ms();
	int fails = 0;

	for (int i = 0; i < 8; i++) {
		a[i] = args1(0, FC_PAGE_4K, (enum su_order)(i % 3));
		a[i].nregions = 2;
		a[i].sizes[0] = 16 * MIB;
		a[i].sizes[1] = 16 * MIB;
		pid[i] = su_spawn(su_client_main, &a[i]);
	}
	for (int i = 0; i < 8; i++) {
		int r = su_reap(pid[i], SU_CHILD_TIMEOUT * 1000);

		if (r) {
			diag("client %d (pid %d): result %d", i, (int)pid[i],
			     r);
			fails++;
		}
	}
	is_int(fails, 0, "8 concurrent clients, 32 MiB each, every byte");
	diag("8 x 32 MiB served in %llu ms",
	     (unsigned long long)(su_now_ms() - t0));
}

static void test_hugetlb(void)
{
	struct su_client_args a[2];
	pid_t pid[2];
	int r, fails = 0;
	long before;

	/*
	 * 2 clients x (8 + 16 MiB) = 24 pages, plus slack for the daemon.
	 * The pool is the host's: reserved, used, counted and given back
	 * under its lock, so the count below is this test's pages alone.
	 */
	r = huge_lock();
	if (r == 0)
		r = huge_reserve(32);
	if (r < 0) {
		diag("cannot reserve 2 MiB pages: %s", strerror(-r));
		ok(0, "reserve 32 huge pages");
		skip(3, "no huge pages");
		huge_unlock();
		return;
	}
	before = sys_read_long(SU_FREE_HUGE);
	ok(before >= 24, "reserve 32 huge pages: %ld free, the clients need "
	   "24 (nr_hugepages %ld)", before, sys_read_long(SU_NR_HUGE));
	for (int i = 0; i < 2; i++) {
		a[i] = args1(0, FC_PAGE_2M, i ? SU_REVERSE : SU_FORWARD);
		a[i].nregions = 2;
		a[i].sizes[0] = 8 * MIB;
		a[i].sizes[1] = 16 * MIB;
		pid[i] = su_spawn(huge_client, &a[i]);
	}
	for (int i = 0; i < 2; i++) {
		r = su_reap(pid[i], SU_CHILD_TIMEOUT * 1000);
		if (r) {
			diag("hugetlb client %d: result %d", i, r);
			fails++;
		}
	}
	is_int(fails, 0,
	       "2 concurrent hugetlb clients (8 + 16 MiB of 2 MiB pages)");
	is_int(su_reap(su_spawn(huge_balloon, NULL), SU_CHILD_TIMEOUT * 1000),
	       0, "balloon on hugetlb: removed 2 MiB pages read as zeros");
	r = (int)sys_read_long(SU_FREE_HUGE);
	ok(r >= before, "every huge page back in the pool after the clients "
	   "exit (%d free, %ld before)", r, before);
	huge_unlock();
}

/* Other --chunk and --threads values: same bytes, whatever the policy. */
static void test_options(void)
{
	static const char *const opts[][5] = {
		{ "--chunk", "4K", "--threads", "1", NULL },
		{ "--chunk", "2M", "--threads", "2", NULL },
		{ "--chunk", "256K", "--threads", "4", NULL },
	};

	for (size_t k = 0; k < sizeof(opts) / sizeof(*opts); k++) {
		struct su_client_args a[3];
		struct serve s;
		pid_t pid[3];
		int fails = 0;

		serve_init(&s);
		if (serve_start(&s, mem.path, opts[k])) {
			ok(0, "daemon with %s %s %s %s", opts[k][0],
			   opts[k][1], opts[k][2], opts[k][3]);
			serve_cleanup(&s);
			continue;
		}
		for (int i = 0; i < 3; i++) {
			a[i] = args1(0, FC_PAGE_4K, (enum su_order)i);
			a[i].sock = s.sock;
			a[i].nregions = 3;
			a[i].sizes[0] = 2 * MIB + 4096;	/* not chunk sized */
			a[i].offsets[0] = 20 * MIB - 4096;
			a[i].sizes[1] = 6 * MIB;
			a[i].offsets[1] = 4096;
			a[i].sizes[2] = 4 * MIB;
			a[i].offsets[2] = FILE_SIZE - 4 * MIB;
			pid[i] = su_spawn(su_client_main, &a[i]);
		}
		for (int i = 0; i < 3; i++)
			fails += su_reap(pid[i], SU_CHILD_TIMEOUT * 1000) != 0;
		ok(!fails, "%s %s %s %s: 3 concurrent clients, unaligned "
		   "regions, every byte", opts[k][0], opts[k][1], opts[k][2],
		   opts[k][3]);
		serve_stop(&s);
		serve_cleanup(&s);
	}
}

static void test_no_leak(int base_fds)
{
	int n = proc_fds_settle(serve_server_pid(&srv), "userfaultfd", 0, 3000);

	is_int(n, 0, "daemon holds no uffd once every client has gone");
	n = proc_fds_settle(serve_server_pid(&srv), NULL, base_fds, 3000);
	ok(n <= base_fds, "daemon fd count back to %d (now %d)", base_fds, n);
}

static void test_once(void)
{
	static const char *const once[] = { "--once", NULL };
	struct serve s1;
	struct su_client_args a = args1(4 * MIB, FC_PAGE_4K, SU_FORWARD);
	int st;

	serve_init(&s1);
	if (serve_start(&s1, mem.path, once)) {
		ok(0, "--once daemon starts");
		skip(1, "no daemon");
		return;
	}
	a.sock = s1.sock;
	is_int(run_one(&a), 0, "--once: the session is served");
	st = serve_wait(&s1, 20000);
	ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "--once: daemon exits 0 after the first session (status 0x%x)",
	   st);
	if (st < 0)
		serve_stop(&s1);
	serve_cleanup(&s1);
}

/* ---- restore progress ---------------------------------------------------- */

static struct serve psrv;

/* Touch nothing: the background restore fills it all, and says so. */
static int progress_client(void *unused)
{
	static const char *const kw[] = { "restore complete", NULL };
	uint64_t size = FILE_SIZE, t0 = su_now_ms();
	unsigned char *vec = malloc(FILE_SIZE / 4096);
	struct fc_client c;
	char line[512];
	int bad = 0;

	(void)unused;
	if (!vec || fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_connect(&c, psrv.sock))
		return 10;
	for (;;) {
		size_t in = 0;

		if (mincore(c.regions[0].addr, size, vec))
			return 11;
		for (uint64_t i = 0; i < size / 4096; i++)
			in += vec[i] & 1;
		if (in == size / 4096)
			break;
		if (su_now_ms() - t0 > 10000) {
			diag("progress: %zu of %llu pages resident after 10 s",
			     in, (unsigned long long)(size / 4096));
			return 12;
		}
		su_sleep_ms(5);
	}
	if (!serve_log_find(&psrv, 0, getpid(), kw, 5000, line, sizeof(line)))
		bad |= 1;
	else if (!strstr(line, "32 MiB"))
		bad |= 2;
	if (su_verify(&mem, c.regions[0].addr, 0, size, 4096, SU_FORWARD,
		      NULL))
		bad |= 4;
	fc_client_close(&c);
	free(vec);
	return bad;
}

/* restore_ms of the first --stats-json line, or -1. */
static long stats_restore_ms(const char *path)
{
	char line[8192];
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f && fgets(line, sizeof(line), f)) {
		json_object *o = json_tokener_parse(line), *r;

		if (o && json_object_object_get_ex(o, "restore_ms", &r) &&
		    json_object_is_type(r, json_type_int))
			v = (long)json_object_get_int64(r);
		json_object_put(o);
	}
	if (f)
		fclose(f);
	return v;
}

/*
 * Unmap the upper half of the memory (less 12 KiB) right after the
 * handshake: without UNMAP events (Firecracker does not ask for them) the
 * daemon's COPYs there fail with ENOENT, and so do whole runs across the
 * new end; the restore of the rest must still complete, every byte right,
 * not retry forever.
 */
#define KEEP	(FILE_SIZE / 2 + 12 * 1024)

static int unmap_client(void *unused)
{
	static const char *const kw[] = { "restore complete", NULL };
	uint64_t size = FILE_SIZE;
	struct fc_client c;
	int bad = 0;

	(void)unused;
	if (fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_connect(&c, psrv.sock))
		return 10;
	/* Not at a run's boundary: runs across it fail whole (ENOENT). */
	if (munmap(c.regions[0].addr + KEEP, FILE_SIZE - KEEP))
		return 11;
	if (!serve_log_find(&psrv, 0, getpid(), kw, 5000, NULL, 0))
		bad |= 1;
	if (su_verify(&mem, c.regions[0].addr, 0, KEEP, 4096, SU_FORWARD,
		      NULL))
		bad |= 2;
	fc_client_close(&c);
	return bad;
}

static void test_progress(void)
{
	static const char *opts[] = { "--progress", "--stats-json", NULL, NULL };
	char stats[160];
	long ms;

	serve_init(&psrv);
	snprintf(stats, sizeof(stats), "%s/stats.json", psrv.dir);
	opts[2] = stats;
	if (serve_start(&psrv, mem.path, opts)) {
		ok(0, "--progress daemon starts");
		return;
	}
	is_int(su_reap(su_spawn(progress_client, NULL),
		       SU_CHILD_TIMEOUT * 1000), 0,
	       "an idle client is restored in the background, every byte "
	       "right, and the daemon says \"restore complete: 32 MiB\"");
	is_int(su_reap(su_spawn(unmap_client, NULL), SU_CHILD_TIMEOUT * 1000),
	       0, "memory unmapped without an UNMAP event: the rest is "
	       "restored, every byte right, and the daemon says so");
	serve_stop(&psrv);
	ms = stats_restore_ms(stats);
	ok(ms >= 0 && ms < 10000, "--stats-json: restore_ms %ld (an idle "
	   "client's restore starts at once)", ms);
	if (tap_failures())
		serve_log_dump(&psrv, 0);
	serve_cleanup(&psrv);
}

static void test_socket_activation(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct serve s2;
	struct su_client_args a = args1(4 * MIB, FC_PAGE_4K, SU_STRIDE);
	int fd, st;

	serve_init(&s2);
	strcpy(sa.sun_path, s2.sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/*
	 * As systemd's PassCredentials=yes: every message then carries
	 * SCM_CREDENTIALS too, which must not crowd out the uffd.
	 */
	setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fd, 16)) {
		ok(0, "socket activation: listening socket");
		return;
	}
	s2.listen_fd = fd;
	if (serve_start(&s2, mem.path, NULL)) {
		ok(0, "socket activation (LISTEN_FDS=1, no --socket)");
		close(fd);
		return;
	}
	close(fd);	/* the daemon has its own copy now */
	a.sock = s2.sock;
	is_int(run_one(&a), 0,
	       "socket activation (LISTEN_FDS=1, no --socket, SO_PASSCRED): "
	       "served");
	st = serve_stop(&s2);
	ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "socket-activated daemon exits 0 on SIGTERM (status 0x%x)", st);
	serve_cleanup(&s2);
}

/*
 * A second daemon on a socket in use: it refuses to start, and the first
 * one's log does not show its check as a client.
 */
static void test_second_daemon(void)
{
	char cmd[512], out[160];
	long mark = serve_log_mark(&srv);
	int st;

	snprintf(out, sizeof(out), "%s/second.out", srv.dir);
	snprintf(cmd, sizeof(cmd), "timeout 10 %s serve --socket %s "
		 "--mem-file %s --no-progress >%s 2>&1", serve_bin(), srv.sock,
		 mem.path, out);
	st = system(cmd);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
	   su_file_has(out, "another server is listening"),
	   "a second daemon on the same socket refuses to start (0x%x)", st);
	su_sleep_ms(200);
	ok(!serve_log_find(&srv, mark, 0, (const char *[]){ "connected",
							   "closed", NULL },
			   0, NULL, 0),
	   "and the first daemon's log shows no client for its check");
}

int main(void)
{
	static const char *stats_arg[] = { "--stats-json", NULL, NULL };
	char stats[160];
	struct stat st;
	long mark;
	int base_fds, ret, status;

	alarm(120);
	ret = mem_file_create(&mem, FILE_SIZE, 0x5eed000000000000ULL ^
			      ((uint64_t)getpid() << 32));
	if (ret)
		BAIL("memory file: %s", strerror(-ret));
	/* Holes, as in a sparse snapshot: 2 MiB aligned, and one page. */
	if (fallocate(mem.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      20 * MIB, 2 * MIB) ||
	    fallocate(mem.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      30 * MIB + 4096, 4096))
		diag("cannot punch holes: %s", strerror(errno));

	serve_init(&srv);
	snprintf(stats, sizeof(stats), "%s/stats.json", srv.dir);
	stats_arg[1] = stats;
	if (serve_start(&srv, mem.path, stats_arg)) {
		mem_file_destroy(&mem);
		BAIL("cannot start %s serve", serve_bin());
	}
	mark = serve_log_mark(&srv);
	if (stat(srv.sock, &st))
		memset(&st, 0, sizeof(st));
	ok(S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0600,
	   "socket is mode 0600 (%o)", st.st_mode & 07777);
	base_fds = proc_fds(serve_server_pid(&srv), NULL);
	diag("daemon pid %d, %d fds before any session", (int)srv.pid,
	     base_fds);

	test_second_daemon();
	test_regions();
	is_int(su_reap(su_spawn(write_and_threads, NULL),
		       SU_CHILD_TIMEOUT * 1000), 0,
	       "write fault fills then writes; 2 threads fault the same pages");
	is_int(su_reap(su_spawn(balloon, NULL), SU_CHILD_TIMEOUT * 1000), 0,
	       "balloon: removed touched and untouched ranges read as zeros");
	test_concurrent();
	test_hugetlb();
	test_no_leak(base_fds);
	ok(serve_alive(&srv), "daemon still running");

	status = serve_stop(&srv);
	ok(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "daemon exits 0 on SIGTERM (status 0x%x)", status);
	ok(!stat(stats, &st) && st.st_size > 0,
	   "--stats-json file written (%lld bytes)",
	   (long long)(stat(stats, &st) ? -1 : st.st_size));
	if (tap_failures())
		serve_log_dump(&srv, mark);
	serve_cleanup(&srv);

	test_options();
	test_once();
	test_progress();
	test_socket_activation();
	test_drain();

	huge_restore();
	mem_file_destroy(&mem);
	return done_testing();
}
