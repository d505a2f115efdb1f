// SPDX-License-Identifier: Apache-2.0
/*
 * soak_criu.c - `make soak`'s lazy-pages part: one process tree of
 * SOAK_CRIU_TASKS tasks (4 by default: a parent and its children, each
 * SOAK_CRIU_MIB of its own pattern) dumped once by the real CRIU, then
 * restored SOAK_CRIU_RESTORES times in a row (20 under make soak, 3 when
 * run alone), each restore through a fresh `faultline lazy-pages`: each
 * daemon exits 0, every task reads every byte of its memory right, no
 * descriptor is left (not in a restored task, not in this process, no
 * socket file, no process), and each daemon's peak RSS stays under the
 * dump's pages plus SOAK_CRIU_HWM_MIB (48 by default), printed.
 *
 * Decisions: one dump restored again and again (the images are only
 * read; the pids come back free once the tasks are reaped), so the soak
 * is of the restores, not of criu dump; every other restore with
 * --no-background, so both the background restore and the tasks' own
 * faults bring the pages in; the peak RSS is wait4's ru_maxrss of the
 * daemon (its supervisor and the server it reaped), exact where a
 * /proc sample could miss the peak, and it counts the pages files'
 * pages the daemon has mapped (its file source reads through a shared
 * mapping: page cache, not the daemon's own), hence the bound above the
 * dump's size; not in make check's list.
 */
#define _GNU_SOURCE
#include <glob.h>

#include "criu_util.h"
#include "serve_util.h"

struct soak {
	char dir[128], img[200], log[200];
	int tasks;
	pid_t pids[16];
	long wrong, held, bad_exit, max_hwm;
};

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? atol(v) : dflt;
}

/* Processes this one has as children: the restores leave none. */
static int children(void)
{
	char path[64], buf[256] = "";
	int n = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", getpid());
	FILE *f = fopen(path, "re");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
		n++;
	return n;
}

/* The tree started, filled and dumped: its tasks' pids in s, or BAIL. */
static void dump_tree(struct soak *s, int mib)
{
	char buf[128];
	pid_t child = cu_start(s->dir, "tree", mib, s->tasks);

	for (int i = 0; i < s->tasks; i++) {
		char ready[32];

		snprintf(ready, sizeof(ready), "ready.%d", i);
		if (!cu_wait_file(s->dir, ready) ||
		    cu_read_file(s->dir, ready, buf, sizeof(buf)) <= 0)
			BAIL("the tree's task %d did not start", i);
		s->pids[i] = atoi(buf);
	}
	snprintf(buf, sizeof(buf), "%d", s->pids[0]);
	const char *dump[] = { "dump", "-t", buf, "-D", s->img, NULL };

	int r = cu_run_criu(s->log, dump);

	if (!ok(r == 0, "criu dump of a %d-task tree, %d MiB each (%d)",
		s->tasks, mib, r)) {
		cu_show_log(s->dir, "criu.log");
		kill(child, SIGKILL);
		cu_reap(child);
		BAIL("criu dump failed");
	}
	bool gone = true;

	for (int i = 0; i < s->tasks; i++)
		gone &= cu_reap(s->pids[i]);
	ok(gone, "the dumped tasks are gone");
}

/* Remove what the last restore left: go, results. */
static void reset_files(const struct soak *s)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/go", s->dir);
	unlink(path);
	for (int i = 0; i < s->tasks; i++) {
		snprintf(path, sizeof(path), "%s/result.%d", s->dir, i);
		unlink(path);
	}
}

/* One restore through a fresh daemon: 0 if all of it was right. */
static int restore_once(struct soak *s, int n)
{
	const char *args[] = { n % 2 ? "--no-background" : NULL, NULL };
	const char *restore[] = { "restore", "-D", s->img, "-d",
				  "--lazy-pages", NULL };
	char path[300];
	int wrong = 0, held = 0, st;

	reset_files(s);
	pid_t daemon = cu_lazy_pages(s->dir, s->img, args);

	if (daemon < 0) {
		diag("restore %d: faultline lazy-pages did not listen", n);
		cu_show_log(s->dir, "lazy-pages.log");
		s->bad_exit++;
		return -1;
	}
	if (cu_run_criu(s->log, restore) != 0) {
		diag("restore %d: criu restore failed", n);
		cu_show_log(s->dir, "criu.log");
	}
	/* Restored, not yet reading: CRIU closed each task's uffd. */
	for (int i = 0; i < s->tasks; i++)
		held += proc_fds(s->pids[i], "userfaultfd") > 0;
	snprintf(path, sizeof(path), "%s/go", s->dir);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	for (int i = 0; i < s->tasks; i++) {
		char res[32], got[200] = "";

		snprintf(res, sizeof(res), "result.%d", i);
		if (cu_wait_file(s->dir, res))
			cu_read_file(s->dir, res, got, sizeof(got));
		if (strcmp(got, "ok")) {
			diag("restore %d: task %d says: %s", n, i,
			     got[0] ? got : "(nothing)");
			wrong++;
		}
	}
	for (int i = 0; i < s->tasks; i++)
		cu_reap(s->pids[i]);
	st = cu_daemon_exit(daemon);
	long hwm = cu_maxrss_kb(daemon);

	snprintf(path, sizeof(path), "%s/lazy-pages.socket", s->img);
	held += access(path, F_OK) == 0;
	diag("restore %d%s: daemon exit %d, peak RSS %ld KiB, %d of %d tasks "
	     "wrong, %d descriptors held", n, n % 2 ? " (faults only)" : "",
	     st, hwm, wrong, s->tasks, held);
	if (st)
		cu_show_log(s->dir, "lazy-pages.log");
	s->wrong += wrong;
	s->held += held;
	s->bad_exit += st != 0;
	if (hwm > s->max_hwm)
		s->max_hwm = hwm;
	return st || wrong || held ? -1 : 0;
}

/* The dump's pages files, in KiB. */
static long pages_kb(const struct soak *s)
{
	char pat[300];
	glob_t g;
	long kb = 0;

	snprintf(pat, sizeof(pat), "%s/pages-*.img", s->img);
	if (glob(pat, 0, NULL, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc; i++)
			kb += su_file_size(g.gl_pathv[i]) / 1024;
	globfree(&g);
	return kb;
}

static int count_fds(void)
{
	return proc_fds(getpid(), NULL);
}

int main(int argc, char **argv)
{
	struct soak s = { .tasks = (int)env_long("SOAK_CRIU_TASKS", 4) };
	long restores = env_long("SOAK_CRIU_RESTORES", 3);
	long mib = env_long("SOAK_CRIU_MIB", 8);
	long bound = env_long("SOAK_CRIU_HWM_MIB", 48), pages;
	char *tmp;
	int fd0, fd1, good = 0;

	cu_workload_main(argc, argv);
	cu_require(true);
	if (s.tasks < 2 || s.tasks > 16)
		BAIL("SOAK_CRIU_TASKS=%d: 2 to 16", s.tasks);
	tmp = cu_tmpdir("soak-criu");
	if (!tmp)
		BAIL("cannot make a directory in /tmp");
	snprintf(s.dir, sizeof(s.dir), "%s", tmp);
	free(tmp);
	snprintf(s.img, sizeof(s.img), "%s/img", s.dir);
	snprintf(s.log, sizeof(s.log), "%s/criu.log", s.dir);
	mkdir(s.img, 0755);
	dump_tree(&s, (int)mib);
	pages = pages_kb(&s);
	fd0 = count_fds();
	for (int n = 0; n < restores; n++)
		good += restore_once(&s, n) == 0;
	fd1 = count_fds();
	ok(good == restores, "%d of %ld restores right (%d tasks each)", good,
	   restores, s.tasks);
	is_int(s.bad_exit, 0, "every faultline lazy-pages exited 0");
	is_int(s.wrong, 0, "every task of every restore read every byte "
	       "right");
	is_int(s.held, 0, "no uffd left in a restored task, no socket file "
	       "left by a daemon");
	ok(fd1 == fd0, "this process's descriptors back (%d -> %d)", fd0, fd1);
	is_int(children(), 0, "no process left behind (daemon, server, task)");
	ok(s.max_hwm > 0 && s.max_hwm <= pages + bound * 1024, "each daemon's "
	   "peak RSS under the dump's pages (%ld KiB) + %ld MiB (the largest: "
	   "%ld KiB)", pages, bound, s.max_hwm);
	if (tap_failures())
		diag("left for a look: %s", s.dir);
	else
		cu_rmdir(s.dir);
	return done_testing();
}
