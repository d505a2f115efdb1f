// SPDX-License-Identifier: Apache-2.0
/*
 * vmm.c - the test VMM with a real KVM guest over every way of restoring
 * its memory: each backend and workload, reads and writes, gets every word
 * right (the guest's checksums against the memory file); 4 vCPUs fault at
 * once through `faultline serve`; hugetlb; a balloon's discard mid-run
 * reads zeros; a VMM killed mid-restore leaves the daemon serving the
 * others; and a wrong byte makes `faultline vmm` fail.
 *
 * Decision: one table of runs, as the kernel's uffd-unit-tests has, each
 * in a forked child (a fresh address space, as a restored VMM has, and an
 * alarm so that a lost fault fails instead of hanging).  Guests are small
 * (8 MiB): where there is no /dev/kvm this program runs itself inside
 * QEMU's TCG (testlib/tcg.c), where a guest is a hundred times slower;
 * `make check` runs it there on every machine too (FL_FORCE_TCG=1), for
 * the 6.1 kernel's missing MOVE and POISON.
 */
#include "kernel/uffd.h"
#include "load.h"
#include "serve_util.h"
#include "tcg.h"
#include "vmm.h"

#define MEM_SIZE	(8ULL << 20)

static struct mem_file mem, other;
static struct serve srv;

/*
 * Under QEMU's TCG with two emulated CPUs the whole VM froze now and then
 * (about 1 run in 4 of this program); with one (testlib/tcg.c) it has
 * not, in 10 runs.  A run is never done twice: one that stalls is killed
 * by its alarm and fails, under TCG too, where the guest is a hundred
 * times slower and the alarm is TCG_RUN_S instead.
 */
#define TCG_RUN_S	90

/* Run c in a child; 1: checksums right, 0: wrong, -errno: did not run. */
static int run_child(const struct vmm_config *c, struct vmm_result *out)
{
	struct vmm_result r = { 0 };
	int pfd[2], st, ret;
	pid_t pid;

	if (pipe(pfd) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		huge_forget();
		alarm(getenv("FL_IN_TCG") ? TCG_RUN_S : SU_CHILD_TIMEOUT * 4);
		ret = vmm_run(c, &r);
		if (ret < 0)
			diag("vmm: %s", vmm_error());
		else
			ret = r.checksum_ok;
		if (write(pfd[1], &r, sizeof(r)) != sizeof(r))
			_exit(100);
		_exit(ret < 0 ? 100 + (-ret & 63) : ret);
	}
	close(pfd[1]);
	if (read(pfd[0], out, sizeof(*out)) != sizeof(*out))
		memset(out, 0, sizeof(*out));
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st)) {
		diag("the VMM run was killed by signal %d%s", WTERMSIG(st),
		     WTERMSIG(st) == SIGALRM ? " (its alarm: it stalled)" : "");
		return -EINTR;
	}
	return WEXITSTATUS(st) >= 100 ? -(WEXITSTATUS(st) - 100) :
	       WEXITSTATUS(st);
}

static void config(struct vmm_config *c, enum vmm_backend b, const char *wl,
		   bool write, unsigned int vcpus)
{
	memset(c, 0, sizeof(*c));
	c->mem_file = mem.path;
	c->backend = b;
	c->socket = srv.sock;
	c->vcpus = vcpus;
	c->guest = VMM_GUEST_KVM;	/* never a silent process guest */
	c->engine_flags = FL_ENGINE_MOVE;
	if (vmm_workload_parse(wl, &c->wl) < 0)
		BAIL("bad workload %s", wl);
	c->wl.write = write;
}

static void check(const struct vmm_config *c, const char *what)
{
	struct vmm_result r;
	int ret = run_child(c, &r);

	ok(ret == 1 && r.touches > 0, "%s: %s %s%s, %u vCPU: every word right "
	   "(%llu touches, %llu faults)", vmm_backend_name(c->backend), what,
	   c->wl.write ? "writes" : "reads", c->huge ? ", hugetlb" : "",
	   r.vcpus, (unsigned long long)r.touches,
	   (unsigned long long)r.faults);
	if (ret != 1)
		diag("run returned %d", ret);
}

static const char *const workloads[] = {
	"linear", "random", "stride:3", "sparse", "compute:2", "sparse-random",
};
#define NWORKLOADS (sizeof(workloads) / sizeof(*workloads))

static void test_matrix(void)
{
	struct vmm_config c;

	for (int b = VMM_PREPOPULATED; b <= VMM_INPROC; b++)
		for (unsigned int w = 0; w < NWORKLOADS; w++)
			for (int write = 0; write < 2; write++) {
				config(&c, b, workloads[w], write, 1);
				check(&c, workloads[w]);
			}
}

static void test_vcpus(void)
{
	struct vmm_config c;

	config(&c, VMM_UFFD, "random", true, 4);
	check(&c, "4 vCPUs at once, random");
	config(&c, VMM_UFFD, "linear", false, 8);
	check(&c, "8 vCPUs at once, linear");
	config(&c, VMM_INPROC, "random", false, 4);
	check(&c, "4 vCPUs at once, random");
}

static void test_huge(void)
{
	struct vmm_config c;
	int ret = huge_reserve((long)(MEM_SIZE >> 21) + 1);

	if (ret < 0)
		BAIL("cannot reserve hugetlb pages: %s", strerror(-ret));
	for (int b = VMM_PREPOPULATED; b <= VMM_INPROC; b++) {
		if (b == VMM_FILE)
			continue;
		config(&c, b, "random", b == VMM_UFFD, 2);
		c.huge = true;
		check(&c, "random");
	}
	huge_restore();
}

/* The second pass must read zeros in the discarded range (file: the file). */
static void test_discard(void)
{
	struct vmm_config c;

	for (int b = VMM_PREPOPULATED; b <= VMM_INPROC; b++) {
		config(&c, b, "linear", b == VMM_UFFD, 2);
		c.discard_off = 1 << 20;
		c.discard_len = 3 << 20;
		check(&c, "balloon discard of 3 MiB, then linear");
	}
}

/* `faultline vmm ...` in a child with its output to out; its pid. */
static pid_t spawn_vmm(const char *const *args, const char *out)
{
	const char *argv[24] = { serve_bin(), "vmm" };
	int n = 2;
	pid_t pid;

	for (; *args && n < 23; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	return pid;
}

static int wait_exit(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Three VMMs at once; one SIGKILLed mid-restore; the others and a new one
 * are served. */
static void test_killed(void)
{
	const char *slow[] = { "--mem-file", mem.path, "--backend", "uffd",
			       "--socket", srv.sock, "--workload",
			       "compute:20000", "--vcpus", "2", NULL };
	const char *quick[] = { "--mem-file", mem.path, "--backend", "uffd",
				"--socket", srv.sock, "--workload", "random",
				"--write", NULL };
	char out[3][160];
	pid_t pid[3];

	for (int i = 0; i < 3; i++) {
		snprintf(out[i], sizeof(out[i]), "%s/vmm%d.out", srv.dir, i);
		pid[i] = spawn_vmm(i == 0 ? slow : quick, out[i]);
	}
	/*
	 * compute:20000 on 2 vCPUs runs for seconds: killed after 300 ms it
	 * is still restoring, and its status says it died of the SIGKILL
	 * (an early exit, even a clean one, fails the point).
	 */
	su_sleep_ms(300);
	kill(pid[0], SIGKILL);
	is_int(wait_exit(pid[0]), 128 + SIGKILL,
	       "the slow VMM, SIGKILLed while restoring, dies of the kill");
	for (int i = 1; i < 3; i++)
		ok(wait_exit(pid[i]) == 0, "VMM %d beside it: served, every "
		   "word right", i);
	pid[1] = spawn_vmm(quick, out[1]);
	is_int(wait_exit(pid[1]), 0, "a VMM after it: served");
	ok(serve_alive(&srv), "the daemon is still serving");
}

/* The daemon serves one file, the VMM checks against another. */
static void test_wrong(void)
{
	const char *args[] = { "--mem-file", other.path, "--backend", "uffd",
			       "--socket", srv.sock, "--workload", "linear",
			       NULL };
	const char *json[] = { "--mem-file", mem.path, "--backend", "inproc",
			       "--workload", "sparse", "--json", NULL };
	char out[160];

	snprintf(out, sizeof(out), "%s/wrong.out", srv.dir);
	is_int(wait_exit(spawn_vmm(args, out)), 1,
	       "faultline vmm fails when a page is served wrong");
	ok(su_file_has(out, "checksum"), "and says which checksum was wrong");
	is_int(wait_exit(spawn_vmm(json, out)), 0, "faultline vmm --json");
	ok(su_file_has(out, "\"checksum_ok\":true") &&
	   su_file_has(out, "\"guest\":\"kvm\"") &&
	   su_file_has(out, "\"elapsed_ms\":") &&
	   su_file_has(out, "\"bytes_copied\":"),
	   "prints one object with checksum_ok, guest, elapsed_ms, "
	   "bytes_copied");
}

/*
 * A corrupt image served: the guest never gets the bad chunk (its vCPU
 * stops on it, faultline vmm fails), and the daemon's log names the chunk
 * and its hashes, as `faultline image verify` does.
 */
static void test_corrupt_image(void)
{
	char img[160], cmd[512], out[160];
	const char *args[] = { "--mem-file", mem.path, "--backend", "uffd",
			       "--socket", NULL, "--workload", "linear",
			       NULL };
	struct uffd_caps caps = { 0 };
	struct serve bad;
	FILE *f;
	int st;

	uffd_query(&caps);
	snprintf(img, sizeof(img), "%s/bad.img", srv.dir);
	snprintf(out, sizeof(out), "%s/corrupt.out", srv.dir);
	snprintf(cmd, sizeof(cmd), "%s image create %s %s --chunk 64K "
		 ">/dev/null", serve_bin(), mem.path, img);
	f = system(cmd) == 0 ? fopen(img, "r+") : NULL;
	/* mid-file: inside some chunk's stored bytes (past header, index) */
	if (!f || fseek(f, su_file_size(img) / 2, SEEK_SET) ||
	    fwrite("corrupt!", 8, 1, f) != 1)
		BAIL("cannot make a corrupt image");
	fclose(f);
	serve_init(&bad);
	if (serve_start(&bad, img, NULL) < 0)
		BAIL("cannot serve the corrupt image");
	args[5] = bad.sock;
	st = wait_exit(spawn_vmm(args, out));
	if (caps.features & UFFD_FEATURE_POISON) {
		is_int(st, 1, "a corrupt image: faultline vmm fails");
		ok(su_file_has(out, "poisoned or never came"),
		   "its vCPU stopped on the poisoned memory");
	} else {	/* 6.1 (the TCG VM): no POISON, so the VMM is killed */
		is_int(st, 128 + SIGKILL, "a corrupt image, no UFFDIO_POISON "
		       "here: faultline kills the VMM");
		ok(serve_log_find(&bad, 0, 0, (const char *[]){
					  "client killed by faultline", NULL },
				  5000, NULL, 0),
		   "and its log says so");
	}
	ok(serve_log_find(&bad, 0, 0, (const char *[]){ "checksum mismatch "
				"(stored", NULL }, 5000, NULL, 0),
	   "the daemon's log names the bad chunk and its hashes");
	serve_stop(&bad);
	serve_cleanup(&bad);
}

/*
 * Faults of the session the daemon's log says ended after byte offset
 * mark (it is logged as the session is torn down, a moment after the VMM
 * exits: waited for, up to 20 s); -1 if no such line came.
 */
static long long daemon_faults(struct serve *d, long mark)
{
	char line[512];
	const char *p;

	if (!serve_log_find(d, mark, 0, (const char *[]){ "ended (", NULL },
			    20000, line, sizeof(line)))
		return -1;
	p = strstr(strstr(line, "ended ("), " ms: ");
	return p ? atoll(p + 5) : -1;
}

/*
 * serve --no-prefetch --no-background --chunk 4K is a naive handler: the
 * guest faults on every page it touches.  How many faults the default
 * daemon saves is the machine's load's to decide (its background restore
 * races the guest): that figure is `faultline bench kvm-restore`'s
 * (linear_daemon's faults against linear_uffd_naive_4k's); here the
 * default daemon serves every word and logs the session's faults.
 */
static void test_naive_daemon(void)
{
	static const char *const naive_args[] = { "--no-prefetch",
		"--no-background", "--chunk", "4K", NULL };
	struct vmm_config c;
	struct vmm_result r, rd;
	struct serve naive;
	long long fn, fd;
	long mark, markd;
	int ret, retd;

	serve_init(&naive);
	if (serve_start(&naive, mem.path, naive_args) < 0)
		BAIL("cannot start a naive faultline serve");
	config(&c, VMM_UFFD, "linear", false, 1);
	c.socket = naive.sock;
	mark = serve_log_mark(&naive);
	ret = run_child(&c, &r);
	fn = daemon_faults(&naive, mark);
	c.socket = srv.sock;
	markd = serve_log_mark(&srv);
	retd = run_child(&c, &rd);
	fd = daemon_faults(&srv, markd);
	/* The daemon's count: the kernel's per-thread one misses KVM's
	 * own faults on some kernels (6.1). */
	ok(ret == 1 && fn >= (long long)r.touches,
	   "serve --no-prefetch --no-background --chunk 4K: a fault per page "
	   "touched (%lld faults, %llu touches)", fn,
	   (unsigned long long)r.touches);
	ok(retd == 1 && fd >= 0,
	   "the default daemon: every word right, its session's end logged "
	   "(%lld faults for %llu touches)", fd,
	   (unsigned long long)rd.touches);
	serve_stop(&naive);
	serve_cleanup(&naive);
}

static void test_bad_options(void)
{
	static const char *const bad[][6] = {
		{ "--vcpus", "9", NULL },
		{ "--workload", "zigzag", NULL },
		{ "--backend", "floppy", NULL },
		{ "--mem-size", "16M", NULL },
		{ "--chunk", "4K", NULL },	/* the inproc engine's only */
		{ "--no-prefetch", NULL },
	};
	char out[160];

	snprintf(out, sizeof(out), "%s/bad.out", srv.dir);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		const char *args[12] = { "--mem-file", mem.path, "--backend",
					 "prepopulated", "--workload", "linear" };
		int n = 6, st;

		for (int j = 0; bad[i][j]; j++)
			args[n++] = bad[i][j];
		st = wait_exit(spawn_vmm(args, out));
		ok(st == 1 || st == 2, "faultline vmm %s %s: refused (%d)",
		   bad[i][0], bad[i][1] ? bad[i][1] : "", st);
		ok(su_file_has(out, "faultline vmm: "), "with one line saying why");
	}
}

int main(int argc, char **argv)
{
	/* The binary the test runs (FAULTLINE_BIN: build-san's under ASan). */
	const char *const files[] = { serve_bin(), NULL };

	tcg_reexec(argc, argv, files);
	load_start();
	su_catch_fatal();
	if (mem_file_create(&mem, MEM_SIZE, 0x5eed) < 0 ||
	    mem_file_create(&other, MEM_SIZE, 0xbad) < 0)
		BAIL("cannot create memory files");
	serve_init(&srv);
	if (serve_start(&srv, mem.path, NULL) < 0)
		BAIL("cannot start faultline serve");
	test_matrix();
	test_vcpus();
	test_huge();
	test_discard();
	test_killed();
	test_wrong();
	test_corrupt_image();
	test_naive_daemon();
	test_bad_options();
	serve_stop(&srv);
	serve_cleanup(&srv);
	mem_file_destroy(&mem);
	mem_file_destroy(&other);
	return done_testing();
}
