// SPDX-License-Identifier: Apache-2.0
/*
 * cleanup.c - what a benchmark leaves behind when it is stopped by
 * SIGINT, SIGTERM or SIGHUP: every process it started (daemons, nginx,
 * criu, forked runs) is stopped and reaped, every temporary path it
 * registered is removed, fs.pipe-max-size is put back, and the bench then
 * dies of the signal, as it would have without the handler.
 *
 * Decisions: the work is done in the signal handler itself, with system
 * calls only (kill, waitpid, openat, getdents64, unlinkat, write), so it
 * holds whatever the interrupted code was doing (inside malloc, a printf);
 * a flag checked by the benchmarks would need a check in every wait loop
 * of every benchmark.  The processes are found, not registered: every
 * child of this process (/proc/self/task/T/children) is a process the
 * bench started, and a bench that is a child subreaper (criu) has the
 * processes criu restored and daemonized there too; so no fork site can
 * be missed.  A daemon's own children go with it (`faultline serve`'s
 * server dies with its supervisor).  Paths are registered
 * (bench_path_add), as nothing else tells a bench's temporary files from
 * the rest of /tmp.  A forked child that inherited the handler and has not
 * exec'd yet does none of this: it only dies of the signal.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define NPATHS		64
#define PATH_LEN	256
#define GRACE_MS	2000	/* SIGTERM to SIGKILL */

static char paths[NPATHS][PATH_LEN];
static atomic_bool path_used[NPATHS];
static atomic_long pipe_max_old = -1;
static pid_t owner;		/* the bench process; 0: not installed */

void bench_path_add(const char *path)
{
	if (strlen(path) >= PATH_LEN)
		return;
	for (int i = 0; i < NPATHS; i++)
		if (atomic_load(&path_used[i]) && !strcmp(paths[i], path))
			return;
	for (int i = 0; i < NPATHS; i++) {
		if (atomic_load(&path_used[i]))
			continue;
		memcpy(paths[i], path, strlen(path) + 1);
		atomic_store(&path_used[i], true);
		return;
	}
}

void bench_path_forget(const char *path)
{
	for (int i = 0; i < NPATHS; i++)
		if (atomic_load(&path_used[i]) && !strcmp(paths[i], path))
			atomic_store(&path_used[i], false);
}

void bench_unlink(const char *path)
{
	unlink(path);
	bench_path_forget(path);
}

void bench_pipe_max_note(long old)
{
	atomic_store(&pipe_max_old, old);
}

/* ---- async-signal-safe helpers -------------------------------------------- */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Decimal digits of v into buf (at least 24 bytes): its length. */
static int fmt_long(char *buf, long v)
{
	char tmp[24];
	int n = 0, len = 0;
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;

	do
		tmp[n++] = (char)('0' + u % 10);
	while ((u /= 10) && n < 22);
	if (v < 0)
		buf[len++] = '-';
	while (n)
		buf[len++] = tmp[--n];
	return len;
}

/* Send sig to every child of every thread of ours: how many were found. */
static int signal_children(int sig)
{
	char buf[4096], path[64] = "/proc/self/task/", *p;
	int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int found = 0;
	long n;

	if (dfd < 0)
		return 0;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			char kids[1024];
			int fd, len;
			long r;

			off += e->d_reclen;
			if (e->d_name[0] == '.')
				continue;
			len = (int)strlen("/proc/self/task/");
			for (int k = 0; e->d_name[k] && k < 16; k++)
				path[len++] = e->d_name[k];
			memcpy(path + len, "/children", sizeof("/children"));
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			r = read(fd, kids, sizeof(kids) - 1);
			close(fd);
			kids[r > 0 ? r : 0] = 0;
			for (p = kids; *p;) {
				long pid = 0;

				while (*p >= '0' && *p <= '9')
					pid = pid * 10 + (*p++ - '0');
				while (*p && (*p < '0' || *p > '9'))
					p++;
				if (pid > 0 && kill((pid_t)pid, sig) == 0)
					found++;
			}
		}
	}
	close(dfd);
	return found;
}

/* Reap what has ended; true once no child is left. */
static bool reap_children(void)
{
	pid_t r;

	while ((r = waitpid(-1, NULL, WNOHANG | __WALL)) > 0)
		;
	return r < 0 && errno == ECHILD;
}

/* rm -r of name in dirfd, no link followed: 0 once it is gone. */
static int remove_at(int dirfd, const char *name, int depth)
{
	char buf[2048];
	int fd, removed;
	long n;

	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
	if (fd < 0)
		return -1;
	do {	/* entries go as we read: again until a pass removes none */
		removed = 0;
		lseek(fd, 0, SEEK_SET);
		while (depth > 0 &&
		       (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
			for (long off = 0; off < n;) {
				struct dirent64 *e =
					(struct dirent64 *)(buf + off);

				off += e->d_reclen;
				if (strcmp(e->d_name, ".") &&
				    strcmp(e->d_name, "..") &&
				    !remove_at(fd, e->d_name, depth - 1))
					removed++;
			}
	} while (removed);
	close(fd);
	return unlinkat(dirfd, name, AT_REMOVEDIR);
}

static void put_pipe_max(void)
{
	long v = atomic_load(&pipe_max_old);
	char buf[32];
	int fd, len;

	if (v < 0)
		return;
	fd = open("/proc/sys/fs/pipe-max-size", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	len = fmt_long(buf, v);
	buf[len++] = '\n';
	if (write(fd, buf, (size_t)len) < 0) {
		/* nothing more to do on the way out */
	}
	close(fd);
}

static void on_signal(int sig)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t set;

	if (getpid() == owner) {
		signal_children(SIGTERM);
		for (int ms = 0; !reap_children() && ms < GRACE_MS; ms += 10)
			sleep_ms(10);
		for (int i = 0; i < 50 && !reap_children(); i++) {
			signal_children(SIGKILL);
			sleep_ms(10);
		}
		for (int i = 0; i < NPATHS; i++)
			if (atomic_load(&path_used[i]))
				remove_at(AT_FDCWD, paths[i], 16);
		put_pipe_max();
	}
	sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);
}

void bench_cleanup_install(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = on_signal };

	owner = getpid();
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
		sigaction(sigs[i], &sa, NULL);
}
