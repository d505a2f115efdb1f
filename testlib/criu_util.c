// SPDX-License-Identifier: Apache-2.0
/*
 * criu_util.c - the real CRIU for tests, and the workload it dumps
 * (criu_util.h says what each does and why).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criu_util.h"
#include "tap.h"

/* ---- the workload ------------------------------------------------------- */

static const char *w_dir;

uint64_t cu_pattern(uint64_t off, uint64_t seed)
{
	return (off * 0x9E3779B97F4A7C15ull) ^ (seed << 48) ^ (off >> 3) ^ 1;
}

static void w_write(const char *name, const char *text)
{
	char path[512], tmp[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", w_dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d", w_dir, name, getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		_exit(3);
	if (write(fd, text, strlen(text)) < 0)
		_exit(3);
	close(fd);
	rename(tmp, path);
}

static void w_wait_go(void)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/go", w_dir);
	while (access(path, F_OK) < 0)
		usleep(2000);
}

static bool w_thp;	/* 2 MiB aligned, MADV_HUGEPAGE */

static uint64_t *w_fill(size_t len, uint64_t seed)
{
	size_t huge = 2u << 20, map = w_thp ? len + huge : len;
	uint64_t *p = mmap(NULL, map, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(2);
	if (w_thp) {	/* THP-backed: whole 2 MiB pages of it */
		p = (uint64_t *)(((uintptr_t)p + huge - 1) & ~(huge - 1));
		madvise(p, len, MADV_HUGEPAGE);
	}
	for (size_t i = 0; i < len / 8; i++)
		p[i] = cu_pattern(i * 8, seed);
	return p;
}

/* The words [from, to) of p as filled at offset base: "" or what was wrong. */
static void w_check(const uint64_t *p, uint64_t base, size_t from, size_t to,
		    uint64_t seed, char *why, size_t wl)
{
	for (size_t i = from; i < to; i++) {
		uint64_t want = cu_pattern(base + i * 8, seed);

		if (p[i] != want) {
			snprintf(why, wl, "bad word at offset %zu: 0x%llx, "
				 "expected 0x%llx", i * 8,
				 (unsigned long long)p[i],
				 (unsigned long long)want);
			return;
		}
	}
}

struct w_slice {
	const uint64_t *p;
	size_t from, to;
	char why[160];
};

static void *w_thread(void *arg)
{
	struct w_slice *s = arg;

	w_wait_go();
	w_check(s->p, 0, s->from, s->to, 0, s->why, sizeof(s->why));
	return NULL;
}

static void w_ready(const char *role, const void *p, size_t len)
{
	char name[64], text[80];

	snprintf(name, sizeof(name), "ready.%s", role);
	snprintf(text, sizeof(text), "%d %p %zu\n", getpid(), p, len);
	w_write(name, text);
}

static void w_result(const char *role, const char *why)
{
	char name[64];

	snprintf(name, sizeof(name), "result.%s", role);
	w_write(name, why[0] ? why : "ok");
}

static void w_plain(size_t len, int threads)
{
	uint64_t *p = w_fill(len, 0);
	struct w_slice s[16] = { 0 };
	pthread_t th[16];
	char why[200] = "";

	if (threads < 1 || threads > 16)
		threads = 1;
	for (int i = 0; i < threads; i++) {
		s[i] = (struct w_slice){ .p = p, .from = len / 8 * i / threads,
					 .to = len / 8 * (i + 1) / threads };
		if (i && pthread_create(&th[i], NULL, w_thread, &s[i]))
			_exit(2);
	}
	w_ready("0", p, len);
	w_thread(&s[0]);
	for (int i = 1; i < threads; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < threads && !why[0]; i++)
		if (s[i].why[0])
			snprintf(why, sizeof(why), "thread %d: %s", i, s[i].why);
	w_result("0", why);
}

static void w_tree(size_t len, int tasks)
{
	char role[8] = "0", why[200] = "";
	pid_t kids[16] = { 0 };

	if (tasks < 2 || tasks > 16)
		tasks = 3;
	for (int i = 1; i < tasks; i++) {
		pid_t c = fork();

		if (c < 0)
			_exit(2);
		if (c == 0) {
			snprintf(role, sizeof(role), "%d", i);
			break;
		}
		kids[i - 1] = c;
	}
	uint64_t seed = (uint64_t)atoi(role);
	uint64_t *p = w_fill(len, seed);

	w_ready(role, p, len);
	w_wait_go();
	w_check(p, 0, 0, len / 8, seed, why, sizeof(why));
	w_result(role, why);
	for (int i = 0; i < tasks - 1; i++)
		if (kids[i])
			waitpid(kids[i], NULL, 0);
}

/*
 * Forks while its memory is still lazy, depth deep (a child, then its
 * child): each process reads the inherited memory after its fork.
 */
static void w_fork(size_t len, int depth)
{
	static const char *const role[] = { "0", "child", "grandchild" };
	uint64_t *p = w_fill(len, 0);
	char why[200] = "";
	int level = 0;
	pid_t c = 0;

	w_ready("0", p, len);
	w_wait_go();
	while (level < depth && level < 2) {
		c = fork();
		if (c != 0)
			break;		/* the parent (or an error) stays */
		level++;
	}
	w_check(p, 0, 0, len / 8, 0, why, sizeof(why));
	if (c < 0)
		snprintf(why, sizeof(why), "fork: %s", strerror(errno));
	w_result(role[level], why);
	if (c > 0)
		waitpid(c, NULL, 0);
}

/* Quarters: dropped (zeros), moved (the data, elsewhere), unmapped, kept. */
static void w_madv(size_t len)
{
	uint64_t *p = w_fill(len, 0);
	size_t q = len / 4;
	char why[200] = "";

	w_ready("0", p, len);
	w_wait_go();
	if (madvise(p, q, MADV_DONTNEED) < 0)
		snprintf(why, sizeof(why), "madvise: %s", strerror(errno));
	for (size_t i = 0; i < q / 8 && !why[0]; i++)
		if (p[i])
			snprintf(why, sizeof(why), "dropped word %zu: 0x%llx, "
				 "expected 0", i, (unsigned long long)p[i]);
	uint64_t *to = mmap(NULL, q, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	uint64_t *m = to == MAP_FAILED ? MAP_FAILED :
		      mremap((char *)p + q, q, q, MREMAP_MAYMOVE | MREMAP_FIXED,
			     to);

	if (!why[0] && m == MAP_FAILED)
		snprintf(why, sizeof(why), "mremap: %s", strerror(errno));
	if (!why[0])
		w_check(m, q, 0, q / 8, 0, why, sizeof(why));
	if (!why[0] && munmap((char *)p + 2 * q, q) < 0)
		snprintf(why, sizeof(why), "munmap: %s", strerror(errno));
	if (!why[0])
		w_check(p, 0, 3 * q / 8, len / 8, 0, why, sizeof(why));
	w_result("0", why);
}

void cu_workload_main(int argc, char **argv)
{
	if (argc != 6 || strcmp(argv[1], "--criu-workload"))
		return;
	w_dir = argv[2];
	size_t len = (size_t)atoi(argv[4]) << 20;

	if (!strcmp(argv[3], "tree"))
		w_tree(len, atoi(argv[5]));
	else if (!strcmp(argv[3], "fork"))
		w_fork(len, 1);
	else if (!strcmp(argv[3], "fork2"))
		w_fork(len, 2);
	else if (!strcmp(argv[3], "madv"))
		w_madv(len);
	else {
		w_thp = !strcmp(argv[3], "thp");
		w_plain(len, atoi(argv[5]));
	}
	exit(0);
}

/* ---- criu and the tasks it dumps ---------------------------------------- */

/* What wait4() reaped here, for cu_status() and cu_maxrss_kb(). */
static struct { pid_t pid; int st; long maxrss; } reaped[64];
static int nreaped;

static void record(pid_t pid, int st, const struct rusage *ru)
{
	reaped[nreaped % 64].pid = pid;
	reaped[nreaped % 64].st = st;
	reaped[nreaped % 64].maxrss = ru->ru_maxrss;
	nreaped++;
}

static void reap_all(void)
{
	struct rusage ru;
	pid_t p;
	int st;

	while ((p = wait4(-1, &st, WNOHANG, &ru)) > 0)
		record(p, st, &ru);
}

/* The newest record of pid (pids come back: a restore reuses them). */
static int find_reaped(pid_t pid)
{
	for (int i = nreaped - 1; i >= 0 && i >= nreaped - 64; i--)
		if (reaped[i % 64].pid == pid)
			return i % 64;
	return -1;
}

int cu_status(pid_t pid)
{
	int i = find_reaped(pid);

	return i < 0 ? -1 : reaped[i].st;
}

long cu_maxrss_kb(pid_t pid)
{
	int i = find_reaped(pid);

	return i < 0 ? -1 : reaped[i].maxrss;
}

const char *cu_criu(void)
{
	static char path[512];
	const char *dir = getenv("CRIU_DIR");
	char cmd[600];
	FILE *f;

	if (path[0])
		return path;
	snprintf(cmd, sizeof(cmd), "CRIU_DIR=%s sh tests/criu/get-criu.sh",
		 dir ? dir : "build/criu");
	f = popen(cmd, "r");
	if (!f)
		return NULL;
	if (!fgets(path, sizeof(path), f))
		path[0] = 0;
	if (pclose(f) != 0)
		path[0] = 0;
	path[strcspn(path, "\n")] = 0;
	return path[0] ? path : NULL;
}

void cu_require(bool faultline)
{
	if (geteuid() != 0)
		skip_all_missing("root", "criu needs root");
	if (!cu_criu())
		skip_all_missing("criu >= 4.1", "tests/criu/get-criu.sh "
				 "found or built none (make criu)");
	if (faultline && access(cu_faultline_bin(), X_OK) < 0)
		skip_all_missing("build/faultline", "not built (make all)");
}

static bool timed_out(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec - t0->tv_sec > CU_WAIT_S;
}

int cu_run_criu(const char *log, const char *const *args)
{
	const char *argv[32] = { "criu" };
	struct timespec t0;
	int n = 1, st;
	pid_t pid;

	for (; args[n - 1] && n < 31; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("CRIU_FAULT", "130", 1);	/* no hardware breakpoints */
		execv(cu_criu(), (char *const *)argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (timed_out(&t0)) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(5000);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

pid_t cu_start(const char *dir, const char *kind, int mib, int threads)
{
	char m[16], t[16];
	pid_t pid;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	snprintf(m, sizeof(m), "%d", mib);
	snprintf(t, sizeof(t), "%d", threads);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		setsid();
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		closefrom(3);
		execl("/proc/self/exe", "criu-workload", "--criu-workload", dir,
		      kind, m, t, (char *)NULL);
		_exit(127);
	}
	return pid;
}

bool cu_wait_file(const char *dir, const char *name)
{
	char path[512];
	struct timespec t0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (access(path, F_OK) < 0) {
		if (timed_out(&t0))
			return false;
		reap_all();	/* restored tasks that ended: ours to reap */
		usleep(5000);
	}
	return true;
}

int cu_read_file(const char *dir, const char *name, char *buf, int len)
{
	char path[512];
	int fd, n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = (int)read(fd, buf, (size_t)len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

bool cu_reap(pid_t pid)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		reap_all();
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		if (timed_out(&t0))
			return false;
		usleep(5000);
	}
}

char *cu_tmpdir(const char *name)
{
	char *d = malloc(128);

	snprintf(d, 128, "/tmp/fl-%s-XXXXXX", name);
	if (!mkdtemp(d)) {
		free(d);
		return NULL;
	}
	return d;
}

void cu_rmdir(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {
		/* best effort */
	}
}

/* ---- faultline lazy-pages ----------------------------------------------- */

const char *cu_faultline_bin(void)
{
	const char *b = getenv("FAULTLINE_BIN");

	return b ? b : "build/faultline";
}

pid_t cu_lazy_pages(const char *dir, const char *img, const char *const *args)
{
	char log[300], st[8];
	struct pollfd p;
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	snprintf(log, sizeof(log), "%s/lazy-pages.log", dir);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(fd, 2);
		dup2(fds[1], 3);	/* not close-on-exec: dup2 clears it */
		snprintf(st, sizeof(st), "%d", 3);
		const char *argv[20] = { "faultline", "lazy-pages", "-D", img,
					 "--status-fd", st };
		for (int i = 0; args[i] && i < 12; i++)
			argv[6 + i] = args[i];
		execv(cu_faultline_bin(), (char **)argv);
		_exit(127);
	}
	close(fds[1]);
	p = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	char c = 1;

	if (pid < 0 || poll(&p, 1, CU_WAIT_S * 1000) != 1 ||
	    read(fds[0], &c, 1) != 1 || c != 0) {
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		pid = -1;
	}
	close(fds[0]);
	return pid;
}

int cu_daemon_exit(pid_t pid)
{
	struct rusage ru;
	int st;

	for (int i = 0; i < CU_WAIT_S * 100; i++) {
		if (wait4(pid, &st, WNOHANG, &ru) == pid)
			record(pid, st, &ru);
		st = cu_status(pid);
		if (st != -1)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	if (wait4(pid, &st, 0, &ru) == pid)
		record(pid, st, &ru);
	return -1;
}

void cu_show_log(const char *dir, const char *name)
{
	char buf[4096];

	if (cu_read_file(dir, name, buf, sizeof(buf)) > 0)
		for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
			diag("%s: %s", name, l);
}
