// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_probe_criu.c - `faultline probe --criu`: can criu dump a process on
 * this machine, and if not, the exact line that makes it so.
 *
 * Decision: a real dump of a trivial child (a fork of this command that
 * only waits, in a session of its own) into a temporary directory, under
 * a bound, rather than guessing from the CPU or the hypervisor: where
 * hardware breakpoints never fire (PVM guests) `criu dump` hangs instead
 * of failing, and only CRIU's fault injection 130 (no breakpoints) gets
 * it through; so a dump that does not end in time is tried again with
 * CRIU_FAULT=130, and the fix printed is the one that worked.  criu is
 * looked for on PATH, then where `make criu` builds it (build/criu/bin,
 * from the current directory, then beside this binary).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "cli.h"

#define DUMP_BOUND_S	15	/* a dump of a waiting child takes < 1 s */
#define MAKE_CRIU	"build/criu/bin/criu"

struct criu_probe {
	char path[PATH_MAX];	/* the criu found, or "" */
	bool on_path;
	char version[32];
	bool fault_env;		/* CRIU_FAULT already set by the user */
	const char *dump;	/* "ok", "ok with CRIU_FAULT=130", or why not */
	double secs;
	char log[PATH_MAX];	/* the failing dump's log, kept */
};

static bool executable(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* criu on PATH, else make criu's build/criu/bin/criu: into p->path. */
static void find_criu(struct criu_probe *p)
{
	const char *path = getenv("PATH");
	char exe[PATH_MAX], *slash;
	ssize_t n;

	for (const char *d = path; d && *d;) {
		size_t len = strcspn(d, ":");

		if (len && snprintf(p->path, sizeof(p->path), "%.*s/criu",
				    (int)len, d) < (int)sizeof(p->path) &&
		    executable(p->path)) {
			p->on_path = true;
			return;
		}
		d += len + (d[len] == ':');
	}
	if (executable(MAKE_CRIU) && realpath(MAKE_CRIU, p->path))
		return;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	slash = strrchr(exe, '/');
	if (slash) {	/* build/faultline: build/criu/bin/criu beside it */
		snprintf(slash + 1, sizeof(exe) - (size_t)(slash + 1 - exe),
			 "criu/bin/criu");
		if (executable(exe) && realpath(exe, p->path))
			return;
	}
	p->path[0] = 0;
}

/* "Version: 4.1.1" from criu --version, into p->version. */
static void criu_version(struct criu_probe *p)
{
	char cmd[PATH_MAX + 32], line[128];
	FILE *f;

	snprintf(p->version, sizeof(p->version), "version unknown");
	snprintf(cmd, sizeof(cmd), "'%s' --version 2>/dev/null", p->path);
	f = popen(cmd, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Version: ", 9)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(p->version, sizeof(p->version), "%.24s",
				 line + 9);
		}
	pclose(f);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * The child criu dumps: in a session of its own, waiting to be killed,
 * and killed with this command should it die first (a probe stopped by
 * a timeout left it behind, paused for ever).
 */
static pid_t start_child(void)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		setsid();
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		closefrom(3);
		for (;;)
			pause();
	}
	return pid;
}

/* Reap pid within bound_s: its wait status, or -1 (it is killed then). */
static int reap(pid_t pid, double bound_s)
{
	double end = now_s() + bound_s;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(10000);
	}
}

/*
 * criu dump -t CHILD -D dir/tag (its log there), CRIU_FAULT=130 if fault:
 * 0 dumped, 1 failed, -1 not done within the bound.
 */
static int try_dump(const struct criu_probe *p, const char *dir,
		    const char *tag, bool fault, double *secs)
{
	char img[PATH_MAX], log[PATH_MAX], t[16];
	pid_t child = start_child(), criu;
	double t0 = now_s();
	int st;

	if (child < 0)
		return 1;
	snprintf(img, sizeof(img), "%s/%s", dir, tag);
	snprintf(log, sizeof(log), "%s/%s/dump.log", dir, tag);
	snprintf(t, sizeof(t), "%d", (int)child);
	mkdir(img, 0700);
	criu = fork();
	if (criu == 0) {
		int fd = open("/dev/null", O_RDWR);

		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		closefrom(3);
		if (fault)
			setenv("CRIU_FAULT", "130", 1);
		execl(p->path, "criu", "dump", "-t", t, "-D", img, "-o", log,
		      "-v4", (char *)NULL);
		_exit(127);
	}
	st = criu < 0 ? -1 : reap(criu, DUMP_BOUND_S);
	*secs = now_s() - t0;
	kill(child, SIGKILL);	/* dumped, criu killed it; else now */
	waitpid(child, NULL, 0);
	if (criu < 0)
		return 1;
	if (st == -1)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* The dump, as is, then (if it hung) with CRIU_FAULT=130. */
static void probe_dump(struct criu_probe *p, char *dir)
{
	int as_is, with;

	if (!mkdtemp(dir)) {
		p->dump = "cannot make a temporary directory";
		return;
	}
	as_is = try_dump(p, dir, "as-is", false, &p->secs);
	if (as_is == 0) {
		p->dump = "ok";
		return;
	}
	snprintf(p->log, sizeof(p->log), "%s/as-is/dump.log", dir);
	if (as_is > 0 || p->fault_env) {
		p->dump = as_is > 0 ? "failed" : "did not end";
		return;
	}
	with = try_dump(p, dir, "fault", true, &p->secs);
	if (with == 0)
		p->dump = "ok with CRIU_FAULT=130";
	else
		p->dump = with > 0 ? "hangs as is, fails with CRIU_FAULT=130" :
			  "did not end, with CRIU_FAULT=130 either";
	if (with)
		snprintf(p->log, sizeof(p->log), "%s/fault/dump.log", dir);
}

/* What to type, on stdout; the exit status. */
static int report(const struct criu_probe *p)
{
	char bin[PATH_MAX];
	bool dumps = p->dump && !strncmp(p->dump, "ok", 2);

	if (!p->path[0]) {
		printf("criu:   not on PATH, nor at %s\n", MAKE_CRIU);
		printf("fix:    make criu   (in faultline's source tree: builds "
		       "criu >= 4.1 into build/criu/bin), or install criu >= "
		       "4.1\n");
		return CLI_FAILED;
	}
	printf("criu:   %s (%s)%s\n", p->path, p->version,
	       p->on_path ? "" : ", not on PATH");
	if (!p->dump) {
		printf("dump:   not tried: criu dump needs root\n");
		printf("fix:    run as root (sudo faultline probe --criu)\n");
		return CLI_FAILED;
	}
	if (!strcmp(p->dump, "ok"))
		printf("dump:   ok (%.1f s)%s\n", p->secs, p->fault_env ?
		       " with CRIU_FAULT from the environment" : "");
	else if (dumps)
		printf("dump:   did not end in %d s as is (hardware breakpoints "
		       "never fire here, as on PVM guests); ok with "
		       "CRIU_FAULT=130 (%.1f s)\n", DUMP_BOUND_S, p->secs);
	else
		printf("dump:   %s; criu's log: %s\n", p->dump, p->log);
	snprintf(bin, sizeof(bin), "%s", p->path);
	*strrchr(bin, '/') = 0;
	if (dumps && !p->on_path)
		printf("fix:    export PATH=\"%s:$PATH\"\n", bin);
	if (dumps && strcmp(p->dump, "ok"))
		printf("fix:    export CRIU_FAULT=130\n");
	if (dumps && p->on_path && !strcmp(p->dump, "ok"))
		printf("fix:    none: criu dump works here as it is\n");
	if (!dumps)
		printf("fix:    none known: see criu's log (`criu check` may "
		       "say what is missing)\n");
	return dumps ? 0 : CLI_FAILED;
}

int probe_criu(void)
{
	struct criu_probe p = { .fault_env = getenv("CRIU_FAULT") != NULL };
	char dir[] = "/tmp/faultline-probe-criu-XXXXXX";
	int ret;

	find_criu(&p);
	if (p.path[0]) {
		criu_version(&p);
		if (geteuid() == 0)
			probe_dump(&p, dir);
	}
	ret = report(&p);
	if (!ret || !p.log[0]) {	/* a failing dump's log is kept */
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (strcmp(dir + strlen(dir) - 6, "XXXXXX") && system(cmd))
			fprintf(stderr, "faultline probe: could not remove "
				"%s\n", dir);
	}
	return ret;
}
