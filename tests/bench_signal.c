// SPDX-License-Identifier: Apache-2.0
/*
 * bench_signal.c - a `faultline bench` stopped mid-run by SIGTERM or
 * SIGINT leaves nothing behind: no process it started (its `faultline
 * serve` daemons, nginx, criu and what criu restored) is running once it
 * has gone, and its temporary files are removed; it dies of the signal.
 *
 * Decision: this test is a child subreaper, so whatever the bench started
 * and left running becomes ours when the bench dies, and is found by its
 * parent chain; "mid-run" is when the process the case waits for (a
 * daemon) runs, found the same way, so nothing is timed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

#define WAIT_S		240	/* for the daemon to run: a hang bound */

static const char *bin;

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* pid's parent and state from /proc/PID/stat: 0, or -1 if it is gone. */
static int proc_stat(pid_t pid, pid_t *ppid, char *state)
{
	char path[64], buf[512], *p;
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%c %d", state, ppid) != 2)
		return -1;
	return 0;
}

/* Is pid (alive, not a zombie) a descendant of anc? */
static bool descends(pid_t pid, pid_t anc)
{
	char st;
	pid_t pp;

	if (proc_stat(pid, &pp, &st) < 0 || st == 'Z')
		return false;
	for (int depth = 0; depth < 64 && pp > 1; depth++) {
		if (pp == anc)
			return true;
		if (proc_stat(pp, &pp, &st) < 0)
			return false;
	}
	return false;
}

/* pid's command line, its arguments joined by spaces. */
static void cmdline(pid_t pid, char *out, size_t len)
{
	char path[64];
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? 0 : (int)read(fd, out, len - 1);
	if (fd >= 0)
		close(fd);
	n = n > 0 ? n : 0;
	out[n] = 0;
	for (int i = 0; i + 1 < n; i++)
		if (!out[i])
			out[i] = ' ';
}

/*
 * Every live descendant of anc into pids (at most max): how many.  With
 * want, only those whose argv[1] is want.
 */
static int descendants(pid_t anc, const char *want, pid_t *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)) && n < max) {
		pid_t pid = (pid_t)atoi(e->d_name);
		char cl[512], *a1;

		if (pid <= 0 || !descends(pid, anc))
			continue;
		if (want) {
			cmdline(pid, cl, sizeof(cl));
			a1 = strchr(cl, ' ');
			if (!a1 || strncmp(a1 + 1, want, strlen(want)) ||
			    (a1[1 + strlen(want)] && a1[1 + strlen(want)] != ' '))
				continue;
		}
		pids[n++] = pid;
	}
	if (d)
		closedir(d);
	return n;
}

/*
 * The top-level /tmp entries named in the command lines of pids (a
 * daemon's socket, memory file, directory), added to tmp[] (at most 16
 * of 128 bytes), without repeats: how many tmp[] holds.
 */
static int tmp_paths(const pid_t *pids, int n, char tmp[][128], int have)
{
	for (int i = 0; i < n; i++) {
		char cl[1024], *p = cl;

		cmdline(pids[i], cl, sizeof(cl));
		while ((p = strstr(p, "/tmp/")) && have < 16) {
			size_t len = 5 + strcspn(p + 5, "/ ");
			bool dup = false;

			for (int k = 0; k < have; k++)
				dup |= strlen(tmp[k]) == len &&
				       !strncmp(tmp[k], p, len);
			if (!dup && len < 128)
				snprintf(tmp[have++], 128, "%.*s", (int)len, p);
			p += len;
		}
	}
	return have;
}

/* How many of paths exist (the pattern's matches, then tmp[]). */
static int still_there(const char *pattern, char tmp[][128], int ntmp)
{
	struct stat sb;
	glob_t g;
	int n = 0;

	if (glob(pattern, 0, NULL, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc; i++, n++)
			diag("  left: %s", g.gl_pathv[i]);
	globfree(&g);
	for (int i = 0; i < ntmp; i++)
		if (fnmatch(pattern, tmp[i], 0) && lstat(tmp[i], &sb) == 0) {
			diag("  left: %s", tmp[i]);
			n++;
		}
	return n;
}

static void show_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];

	for (int i = 0; f && i < 30 && fgets(line, sizeof(line), f); i++)
		diag("  %s", strtok(line, "\n") ? line : "");
	if (f)
		fclose(f);
}

struct scase {
	const char *bench;	/* faultline bench NAME --quick */
	int sig;
	const char *want;	/* mid-run: a descendant `faultline WANT` */
	const char *needs;	/* a file it needs, or NULL */
};

static void run_case(const struct scase *c, const char *dir)
{
	char log[300], name[64], cl[512], tmp[16][128];
	pid_t pids[64], bench, mid_pid = 0;
	int st = 0, n, ntmp, left = 0;
	bool mid = false;

	snprintf(name, sizeof(name), "bench %s, %s", c->bench,
		 strsignal(c->sig));
	snprintf(log, sizeof(log), "%s/%s.log", dir, c->bench);
	fflush(NULL);
	bench = fork();
	if (bench == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, "faultline", "bench", c->bench, "--quick",
		      (char *)NULL);
		_exit(127);
	}
	if (bench < 0)
		BAIL("fork: %s", strerror(errno));
	for (int i = 0; i < WAIT_S * 100 && !mid; i++) {
		mid = descendants(bench, c->want, &mid_pid, 1) > 0;
		if (!mid && waitpid(bench, &st, WNOHANG) == bench)
			break;
		if (!mid)
			sleep_ms(10);
	}
	if (!ok(mid, "%s: its `%s` process runs", name, c->want)) {
		diag("bench status 0x%x; its output:", st);
		show_file(log);
		kill(bench, SIGKILL);
		waitpid(bench, NULL, 0);
		return;
	}
	n = descendants(bench, NULL, pids, 64);
	ntmp = tmp_paths(pids, n, tmp, 0);
	cmdline(mid_pid, cl, sizeof(cl));
	diag("%s: %d processes under it, among them %s", name, n, cl);
	kill(bench, c->sig);
	for (int i = 0; i < 6000 && waitpid(bench, &st, WNOHANG) != bench; i++)
		sleep_ms(10);
	if (!ok(WIFSIGNALED(st) && WTERMSIG(st) == c->sig, "%s: the bench "
		"dies of the signal (status 0x%x)", name, st))
		kill(bench, SIGKILL);
	/* What it left is ours now: gone, or still running after 10 s. */
	for (int i = 0; i < 1000; i++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		left = descendants(getpid(), NULL, pids, 64);
		if (!left)
			break;
		sleep_ms(10);
	}
	ok(!left, "%s: no process it started is left (%d)", name, left);
	for (int i = 0; i < left; i++) {
		cmdline(pids[i], cl, sizeof(cl));
		diag("  left: %d %s", (int)pids[i], cl);
		kill(pids[i], SIGKILL);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0 || (left && errno == EINTR))
		;
	snprintf(log, sizeof(log), "/tmp/fl*-%d[-.]*", (int)bench);
	n = still_there(log, tmp, ntmp);
	ok(n == 0, "%s: its temporary files are removed (%d left)", name, n);
}

int main(void)
{
	static const struct scase cases[] = {
		{ "storage", SIGTERM, "serve", NULL },
		{ "fault-latency", SIGINT, "serve", NULL },
		{ "criu", SIGTERM, "lazy-pages", "build/criu/bin/criu" },
	};
	char dir[] = "/tmp/fl-bench-signal-XXXXXX", cmd[128];

	bin = getenv("FAULTLINE_BIN");
	if (!bin || !*bin)
		bin = "build/faultline";
	if (access(bin, X_OK))
		BAIL("%s not built (make)", bin);
	if (!mkdtemp(dir))
		BAIL("mkdtemp: %s", strerror(errno));
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		if (cases[i].needs && access(cases[i].needs, X_OK)) {
			char why[128];

			snprintf(why, sizeof(why), "not there: bench %s needs "
				 "it", cases[i].bench);
			skip_missing(4, cases[i].needs, why);
			continue;
		}
		run_case(&cases[i], dir);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		diag("cannot remove %s", dir);
	return done_testing();
}
