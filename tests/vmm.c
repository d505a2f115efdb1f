// SPDX-License-Identifier: Apache-2.0
/*
 * vmm.c - the test VMM with a real KVM guest over every way of restoring
 * its memory: each backend and workload, reads and writes, gets every word
 * right (the guest's checksums against the memory file); 4 vCPUs fault at
 * once through `faultline serve`; hugetlb; a balloon's discard mid-run
 * reads zeros; a VMM killed mid-restore leaves the daemon serving the
 * others; a wrong byte makes `faultline vmm` fail; and `faultline vmm
 * --reset` runs the guest again and again from one snapshot, each run
 * reading the snapshot (a run after a reset skipped does not).
 *
 * Decision: one table of runs, as the kernel's uffd-unit-tests has, each
 * in a forked child (a fresh address space, as a restored VMM has, and an
 * alarm so that a lost fault fails instead of hanging).  Guests are small
 * (8 MiB): where there is no /dev/kvm this program runs itself inside
 * QEMU's TCG (testlib/tcg.c), where a guest is a hundred times slower;
 * `make check` runs it there on every machine too (FL_FORCE_TCG=1), for
 * the 6.1 kernel's missing MOVE and POISON.
 */
#include <json-c/json.h>

#include "huge_lock.h"
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

/*
 * Run c in a child; 1: checksums right, 0: wrong, -errno: did not run.
 * err: a file for its stderr (NULL: ours).  out gets no --reset runs.
 */
static int run_child(const struct vmm_config *c, struct vmm_result *out,
		     const char *err)
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
		if (err) {
			int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			if (fd >= 0)
				dup2(fd, 2);
		}
		alarm(getenv("FL_IN_TCG") ? TCG_RUN_S : SU_CHILD_TIMEOUT * 4);
		ret = vmm_run(c, &r);
		if (ret < 0)
			diag("vmm: %s", vmm_error());
		else
			ret = r.checksum_ok;
		vmm_result_free(&r);	/* its pointers mean nothing there */
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
	int ret = run_child(c, &r, NULL);

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
	/* the host's pool: under its lock, reserved and given back there */
	int ret = huge_lock();

	if (ret == 0)
		ret = huge_reserve((long)(MEM_SIZE >> 21) + 1);
	if (ret < 0)
		BAIL("cannot reserve hugetlb pages: %s", strerror(-ret));
	for (int b = VMM_PREPOPULATED; b <= VMM_INPROC; b++) {
		if (b == VMM_FILE)
			continue;
		config(&c, b, "random", b == VMM_UFFD, 2);
		c.huge = true;
		check(&c, "random");
	}
	huge_unlock();
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
	ret = run_child(&c, &r, NULL);
	fn = daemon_faults(&naive, mark);
	c.socket = srv.sock;
	markd = serve_log_mark(&srv);
	retd = run_child(&c, &rd, NULL);
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

/* ---- --reset ------------------------------------------------------------ */

/*
 * The write tracking the engine must take on this kernel: WP_ASYNC where
 * it has it (6.7 and later, with PAGEMAP_SCAN), else write-protect faults
 * (6.1, the TCG VM's kernel; or asked for), else none.
 */
static const char *want_tracking(bool sync)
{
	struct uffd_caps caps = { 0 };

	uffd_query(&caps);
	if (!(caps.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP))
		return "none";
	if (sync || !(caps.features & UFFD_FEATURE_WP_ASYNC))
		return "wp_sync";
	return "wp_async";
}

/* The JSON object in a `faultline vmm --json` output file, or NULL. */
static json_object *read_json(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	char *brace;

	if (f)
		fclose(f);
	buf[n] = 0;
	brace = strchr(buf, '{');	/* after any line on stderr */
	return brace ? json_tokener_parse(brace) : NULL;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	if (o)
		json_object_object_get_ex(o, key, &v);
	return v;
}

struct reset_case {
	const char *what;
	const char *args[16];	/* besides --mem-file, --backend, --json */
	unsigned int runs;	/* --reset */
	bool sync;		/* --track-sync */
	uint64_t pages, runs_dropped;	/* each reset's, tracking writes */
};

/*
 * Every run of both loops read the snapshot; the tracking is this
 * kernel's; each reset dropped the pages written (with tracking exactly
 * those, in the runs they make; without, every page filled).
 */
static void check_reset_json(const struct reset_case *t)
{
	const char *argv[20] = { "--mem-file", mem.path, "--backend", "inproc",
				 "--json" };
	const char *want = want_tracking(t->sync);
	json_object *o, *rs, *loop, *fresh;
	const char *tracking = "?";
	bool runs_ok, pages_ok = true;
	char out[160];
	int n = 5, st;

	for (int i = 0; t->args[i]; i++)
		argv[n++] = t->args[i];
	snprintf(out, sizeof(out), "%s/reset.out", srv.dir);
	st = wait_exit(spawn_vmm(argv, out));
	o = read_json(out);
	rs = get(o, "reset");
	loop = get(rs, "reset_loop");
	fresh = get(rs, "fresh_loop");
	if (get(rs, "write_tracking"))
		tracking = json_object_get_string(get(rs, "write_tracking"));
	ok(st == 0 && json_object_get_boolean(get(o, "checksum_ok")) &&
	   !strcmp(json_object_get_string(get(o, "guest")), "kvm"),
	   "vmm --reset %u, %s: every run read the snapshot (exit %d)",
	   t->runs, t->what, st);
	runs_ok = loop && fresh &&
		  json_object_array_length(loop) == t->runs &&
		  json_object_array_length(fresh) == t->runs;
	for (unsigned int i = 0; runs_ok && i < t->runs; i++)
		runs_ok = json_object_get_boolean(get(json_object_array_get_idx(
				loop, i), "checksum_ok")) &&
			  json_object_get_boolean(get(json_object_array_get_idx(
				fresh, i), "checksum_ok"));
	ok(runs_ok, "%s: %u runs after resets, %u after fresh restores, "
	   "each checked", t->what, t->runs, t->runs);
	ok(!strcmp(tracking, want), "%s: write tracking %s (this kernel's: %s)",
	   t->what, tracking, want);
	for (unsigned int i = 1; loop && i < t->runs; i++) {
		json_object *it = json_object_array_get_idx(loop, i);
		uint64_t pages = json_object_get_int64(get(it, "pages_reset"));
		uint64_t runs = json_object_get_int64(get(it, "reset_runs"));

		if (strcmp(want, "none") ? pages == t->pages &&
					   runs == t->runs_dropped :
					   pages >= t->pages)
			continue;
		diag("the reset before run %u: %llu pages in %llu runs", i + 1,
		     (unsigned long long)pages, (unsigned long long)runs);
		pages_ok = false;
	}
	ok(loop && pages_ok, "%s: each reset dropped the %llu pages written "
	   "(%s: in %llu runs)", t->what, (unsigned long long)t->pages,
	   strcmp(want, "none") ? "tracked" : "at least, untracked",
	   (unsigned long long)t->runs_dropped);
	if (!runs_ok || st != 0)
		serve_log_dump_file(out);
	json_object_put(o);
}

/* Its "write tracking: " line, as a diag: which one this kernel took. */
static void diag_tracking(const char *path)
{
	char line[256];
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "write tracking: ", 16)) {
			line[strcspn(line, "\n")] = 0;
			diag("%s", line);
			break;
		}
	if (f)
		fclose(f);
}

/*
 * A text run: exit 0, and each of the lines it must print (the guest, the
 * write tracking this kernel has, every run's check).
 */
static void check_reset_text(const char *what, const char *const *args,
			     const char *const *lines, const char *tracking)
{
	const char *argv[20] = { "--mem-file", mem.path, "--backend",
				 "inproc" };
	bool all = true;
	char out[160];
	int n = 4, st;

	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	snprintf(out, sizeof(out), "%s/reset.txt", srv.dir);
	st = wait_exit(spawn_vmm(argv, out));
	for (int i = 0; lines[i]; i++)
		if (!su_file_has(out, lines[i])) {
			diag("no \"%s\" in its output", lines[i]);
			all = false;
		}
	ok(st == 0 && all, "vmm --reset, %s: exit 0, says which guest, its "
	   "write tracking (%s) and that every run read the snapshot (%d)",
	   what, tracking, st);
	diag_tracking(out);
	if (st != 0 || !all)
		serve_log_dump_file(out);
}

static void test_reset(void)
{
	/* 8 MiB: 1M scattered is every 8th page, 256 runs of one. */
	static const struct reset_case cases[] = {
		{ "linear, 1M scattered", { "--guest", "kvm", "--workload",
		  "linear", "--reset", "4", "--dirty", "1M" }, 4, false,
		  256, 256 },
		{ "random on 2 vCPUs, 3M contiguous", { "--guest", "kvm",
		  "--workload", "random", "--vcpus", "2", "--reset", "3",
		  "--dirty", "3M", "--dirty-pattern", "contiguous" }, 3, false,
		  768, 1 },
		{ "--track-sync, sparse, 64K scattered", { "--guest", "kvm",
		  "--workload", "sparse", "--reset", "3", "--dirty", "64K",
		  "--track-sync" }, 3, true, 16, 16 },
	};
	static const char *const kvm_args[] = { "--guest", "kvm", "--workload",
		"linear", "--reset", "3", "--reset-eager", NULL };
	static const char *const proc_args[] = { "--guest", "process",
		"--workload", "random", "--vcpus", "2", "--reset", "3",
		"--dirty-pattern", "contiguous", NULL };
	const char *want = want_tracking(false);
	const char *line = !strcmp(want, "wp_async") ?
		"write tracking: WP_ASYNC" : !strcmp(want, "wp_sync") ?
		"write tracking: WP_SYNC (a write-protect fault the engine "
		"resolves at each page's first write; the fallback" :
		"write tracking: none (";
	const char *kvm_lines[] = { "KVM guest", line,
		"checksum ok: every run read the snapshot", "median of runs 2-3",
		NULL };
	const char *proc_lines[] = { "process guest", line,
		"checksum ok: every run read the snapshot", NULL };

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		check_reset_json(&cases[i]);
	check_reset_text("KVM guest, eager resets", kvm_args, kvm_lines, want);
	check_reset_text("process guest", proc_args, proc_lines, want);
}

/*
 * The check can fail: runs with no reset between them find the dirty set
 * written (its words one more than the snapshot's), so every run after
 * the first of the reset loop fails its check, and no run else does.
 */
static void test_reset_skipped(void)
{
	static const enum vmm_guest guests[] = { VMM_GUEST_KVM,
						 VMM_GUEST_PROCESS };
	struct vmm_config c;
	struct vmm_result r;
	char err[160];

	snprintf(err, sizeof(err), "%s/skipped.err", srv.dir);
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "process guest" : "KVM guest";
		int ret;

		config(&c, VMM_INPROC, "linear", false, 1);
		c.guest = guests[i];
		c.resets = 3;
		c.dirty = 1 << 20;
		c.skip_reset = true;
		ret = run_child(&c, &r, err);
		ok(ret == 0, "%s, no reset between runs: the check fails (%d)",
		   name, ret);
		ok(su_file_has(err, "reset run 2: vCPU 0 pass 1 (the dirty set") &&
		   su_file_has(err, "reset run 3: vCPU 0 pass 1 (the dirty set") &&
		   !su_file_has(err, "reset run 1:") &&
		   !su_file_has(err, "fresh run"),
		   "%s: in runs 2 and 3 of the reset loop, the dirty set's words "
		   "were written, and no run else failed", name);
		if (ret != 0)
			serve_log_dump_file(err);
	}
}

static void test_bad_options(void)
{
	static const char *const bad[][8] = {
		{ "--vcpus", "9", NULL },
		{ "--workload", "zigzag", NULL },
		{ "--backend", "floppy", NULL },
		{ "--mem-size", "16M", NULL },
		{ "--chunk", "4K", NULL },	/* the inproc engine's only */
		{ "--no-prefetch", NULL },
		{ "--reset", "3", NULL },	/* the inproc engine's only */
		{ "--reset", "0", NULL },
		{ "--dirty", "1M", NULL },	/* --reset's only */
		{ "--dirty-pattern", "zigzag", NULL },
		{ "--backend", "inproc", "--reset", "2", "--write", NULL },
		{ "--backend", "inproc", "--reset", "2", "--dirty", "5000",
		  NULL },
		{ "--backend", "inproc", "--reset", "2", "--dirty", "16M",
		  NULL },
	};
	char out[160];

	snprintf(out, sizeof(out), "%s/bad.out", srv.dir);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		const char *args[16] = { "--mem-file", mem.path, "--backend",
					 "prepopulated", "--workload", "linear" };
		char what[128] = "";
		int n = 6, st;

		for (int j = 0; bad[i][j]; j++) {
			args[n++] = bad[i][j];
			snprintf(what + strlen(what), sizeof(what) - strlen(what),
				 " %s", bad[i][j]);
		}
		st = wait_exit(spawn_vmm(args, out));
		ok(st == 1 || st == 2, "faultline vmm%s: refused (%d)", what,
		   st);
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
	test_reset();
	test_reset_skipped();
	test_bad_options();
	serve_stop(&srv);
	serve_cleanup(&srv);
	mem_file_destroy(&mem);
	mem_file_destroy(&other);
	return done_testing();
}
