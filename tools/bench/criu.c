// SPDX-License-Identifier: Apache-2.0
/*
 * criu.c - `faultline bench criu`: a process of --size bytes (1 GiB) is
 * dumped by the real CRIU, then restored eagerly (`criu restore`), through
 * `criu lazy-pages` (at its default log level, and at -v4, which logs a
 * line per fault) and through `faultline lazy-pages`: the time until the
 * process runs, until its first full pass over its memory is done, until
 * every page is in, and the faults the daemons served.
 *
 * Decisions: one dump per run, restored once per candidate in an order
 * that rotates from run to run (the same bytes for all, drift spread over
 * all).  The process measures itself: it is this binary re-executed
 * (`bench --criu-workload`), it reads CLOCK_MONOTONIC (less the offset
 * of the time namespace CRIU restores it into: the host's clock then) and
 * writes its times and its verdict to a file.  The clock starts
 * when `criu restore` is forked, its go file already there, so the process
 * goes on the moment it is back; a lazy daemon listens before that.  The
 * process stays until the daemon has exited, so a daemon's exit means
 * every page is in, never that its process went away.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "cli.h"
#include "faultline.h"
#include "http_util.h"
#include "criu_bench.h"

const struct cand criu_cands[] = {
	{ "eager", "criu restore (eager)", EAGER, false, false },
	{ "criu", "criu lazy-pages", CRIU_LAZY, false, false },
	{ "criu_v4", "criu lazy-pages -v4", CRIU_LAZY, true, false },
	{ "faultline", "faultline lazy-pages", FL_LAZY, false, false },
	{ "criu_ps", "criu lazy-pages --page-server", CRIU_LAZY, false, true },
	{ "faultline_ps", "faultline lazy-pages --page-server", FL_LAZY, false,
	  true },
};

const struct metric criu_metrics[NMETRIC] = {
	{ "run", "runs", 1.05 },
	{ "pass", "first pass", 0.70 },
	{ "all_in", "all in", 0.40 },
};

static void at(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

/* ---- processes ----------------------------------------------------------- */

/*
 * Fork and exec argv with CRIU_FAULT=130 (criu hangs on these machines
 * without it: hardware breakpoints never fire), stdout and stderr to log
 * (truncated), stdin /dev/null, status_fd (if >= 0) as fd 3, nothing else
 * open.  The pid, or -errno.
 */
static pid_t spawn(const char *const *argv, const char *log, int status_fd)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (in < 0 || out < 0)
			_exit(127);
		dup2(in, 0);
		dup2(out, 1);
		dup2(out, 2);
		if (status_fd >= 0)
			dup2(status_fd, 3);	/* dup2 clears close-on-exec */
		closefrom(status_fd >= 0 ? 4 : 3);
		setenv("CRIU_FAULT", "130", 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/*
 * Reap pid, a child: its exit status (128 + signal if killed), or
 * -ETIMEDOUT after bound_s (it is killed and reaped then), or -errno.
 */
static int wait_exit(pid_t pid, double bound_s)
{
	double end = bench_now() + bound_s;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) :
			       128 + WTERMSIG(st);
		if (r < 0)
			return -errno;
		if (bench_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -ETIMEDOUT;
		}
		usleep(1000);
	}
}

/* Kill pid if it is a child of ours still running, and reap it. */
static void stop(pid_t pid)
{
	if (pid > 0 && waitpid(pid, NULL, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* Run argv to its end: its exit status, or -errno. */
static int run_cmd(const char *const *argv, const char *log)
{
	pid_t pid = spawn(argv, log, -1);

	return pid < 0 ? pid : wait_exit(pid, BOUND_S);
}

/*
 * Wait until path exists while pid (a child) runs: 0, -ECHILD if it ended
 * first (then reaped), -ETIMEDOUT after BOUND_S.
 */
static int wait_file(const char *path, pid_t pid)
{
	double end = bench_now() + BOUND_S;

	while (access(path, F_OK) < 0) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -ECHILD;
		if (bench_now() > end)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

/*
 * Wait until the restored process pid has written path and the daemon *d
 * (if > 0) has exited, noting when it exited (*exit_s, from t0; *d is 0
 * then) and its wait status (*st): 0, -ECHILD if the process ended first,
 * -ETIMEDOUT after BOUND_S.  Both are watched at once: a daemon done
 * before the process is timed then, not when the process is.
 */
static int await_restored(const char *path, pid_t pid, pid_t *d, double t0,
			  double *exit_s, int *st)
{
	double end = bench_now() + BOUND_S;
	bool have = false;

	for (;;) {
		if (*d > 0 && waitpid(*d, st, WNOHANG) == *d) {
			*exit_s = bench_now() - t0;
			*d = 0;
		}
		have = have || access(path, F_OK) == 0;
		if (have && *d <= 0)
			return 0;
		if (!have && waitpid(pid, NULL, WNOHANG) == pid)
			return -ECHILD;
		if (bench_now() > end)
			return -ETIMEDOUT;
		usleep(1000);
	}
}

/* A lazy-pages daemon of kind k, once it listens (its '\0' on fd 3). */
/*
 * `criu page-server --lazy-pages` over the dump on loopback, as a daemon
 * (listening once criu returns): its pid, its port in port; or -errno.
 */
static pid_t page_server(const struct crun *c, char *port, size_t n)
{
	char pidf[PATH_MAX], log[PATH_MAX], buf[32] = "";
	const char *a[] = { c->criu, "page-server", "--lazy-pages", "-D",
			    c->img, "--address", "127.0.0.1", "--port", port,
			    "-d", "--pidfile", pidf, NULL };
	int fp = free_port(), fd;

	at(pidf, sizeof(pidf), c->dir, "ps.pid");
	at(log, sizeof(log), c->dir, "page-server.log");
	unlink(pidf);
	snprintf(port, n, "%d", fp);
	if (fp <= 0 || run_cmd(a, log) != 0) {
		fprintf(stderr, "faultline bench criu: criu page-server did "
			"not start (see %s)\n", log);
		return -EIO;
	}
	fd = open(pidf, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		buf[0] = 0;
	if (fd >= 0)
		close(fd);
	return atoi(buf) > 0 ? atoi(buf) : -EIO;
}

/* The page server gone (it exits when the daemon hangs up), or killed. */
static void page_server_gone(pid_t pid)
{
	for (int i = 0; pid > 0 && i < (int)BOUND_S * 100; i++) {
		waitpid(pid, NULL, WNOHANG);	/* ours, as subreaper */
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return;
		usleep(10000);
	}
	stop(pid);
}

static int start_daemon(const struct crun *c, const struct cand *k,
			const char *log, const char *stats, const char *port,
			pid_t *pid)
{
	const char *fl[16] = { bench_faultline_exe(), "lazy-pages", "-D",
			       c->img, "--status-fd", "3", "--stats-json",
			       stats };
	const char *cr[16] = { c->criu, "lazy-pages", "-D", c->img,
			       "--status-fd", "3", k->verbose ? "-v4" : NULL };
	const char **a = k->kind == FL_LAZY ? fl : cr;
	int n = k->kind == FL_LAZY ? 8 : 6 + k->verbose;

	if (k->ps) {		/* as criu lazy-pages takes them */
		a[n++] = "--page-server";
		a[n++] = "--address";
		a[n++] = "127.0.0.1";
		a[n++] = "--port";
		a[n++] = port;
	}
	struct pollfd p;
	int fds[2];
	char ch = 1;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	*pid = spawn(a, log, fds[1]);
	close(fds[1]);
	p = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	if (*pid > 0 && (poll(&p, 1, (int)BOUND_S * 1000) != 1 ||
			 read(fds[0], &ch, 1) != 1 || ch)) {
		fprintf(stderr, "faultline bench criu: %s did not start "
			"listening (see %s)\n", k->label, log);
		stop(*pid);
		*pid = -ECHILD;
	}
	close(fds[0]);
	return *pid < 0 ? *pid : 0;
}

/* ---- what the daemons say ------------------------------------------------ */

/* criu lazy-pages -v4: a "#PF at" line per fault, pages copied per task. */
static void count_criu(const char *log, struct sample *s)
{
	FILE *f = fopen(log, "re");
	char *line = NULL, *q;
	size_t cap = 0;
	long long pages = 0, n;

	s->faults = 0;
	while (f && getline(&line, &cap, f) > 0) {
		s->faults += strstr(line, "#PF at") != NULL;
		q = strstr(line, "UFFD transferred pages: (");
		if (q && sscanf(q + strlen("UFFD transferred pages: ("),
				"%lld", &n) == 1)
			pages += n;
	}
	s->copied = (double)pages * PAGE;
	free(line);
	if (f)
		fclose(f);
}

static uint64_t json_u64(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ?
	       (uint64_t)json_object_get_int64(v) : 0;
}

/* Add one --stats-json line's counters and latency histogram to sum. */
static bool add_stats(struct fl_stats *sum, const char *line)
{
	json_object *j = json_tokener_parse(line), *st, *h;
	bool ok = j && json_object_object_get_ex(j, "stats", &st);

	if (ok) {
		uint64_t max = json_u64(st, "latency_ns_max");
		uint64_t ms = json_u64(st, "restore_ms");

		sum->faults += json_u64(st, "faults");
		sum->bytes_copied += json_u64(st, "bytes_copied");
		sum->lat_ns_max = max > sum->lat_ns_max ? max : sum->lat_ns_max;
		sum->restore_ms = ms > sum->restore_ms ? ms : sum->restore_ms;
		if (json_object_object_get_ex(st, "latency_log2_ns_hist", &h))
			for (size_t i = 0; i < FL_LAT_BUCKETS &&
			     i < json_object_array_length(h); i++)
				sum->lat_hist[i] += (uint64_t)json_object_get_int64(
					json_object_array_get_idx(h, i));
	}
	json_object_put(j);
	return ok;
}

/* faultline lazy-pages --stats-json: one line per session (task). */
static void count_faultline(const char *stats, struct sample *s)
{
	FILE *f = fopen(stats, "re");
	struct fl_stats sum = { 0 };
	char *line = NULL;
	size_t cap = 0;
	bool any = false;

	while (f && getline(&line, &cap, f) > 0)
		any |= add_stats(&sum, line);
	free(line);
	if (f)
		fclose(f);
	if (!any)
		return;
	s->faults = (double)sum.faults;
	s->copied = (double)sum.bytes_copied;
	s->p50_us = (double)fl_stats_percentile(&sum, 50) / 1e3;
	s->p99_us = (double)fl_stats_percentile(&sum, 99) / 1e3;
	s->restore_ms = (double)sum.restore_ms;
}

/* ---- one dump, one restore ----------------------------------------------- */

/* Start the process, let it fill its memory, dump it (it is killed). */
static int dump(struct crun *c, double *sec)
{
	char size[32], pid[16], path[PATH_MAX], log[PATH_MAX];
	const char *w[] = { "/proc/self/exe", "bench", "--criu-workload",
			    c->dir, size, NULL };
	const char *d[] = { c->criu, "dump", "-t", pid, "-D", c->img, NULL };
	double t0;
	int ret;

	if (mkdir(c->img, 0755) < 0)
		return -errno;
	snprintf(size, sizeof(size), "%llu", (unsigned long long)c->size);
	at(path, sizeof(path), c->dir, "go");
	unlink(path);
	at(path, sizeof(path), c->dir, "ready");
	unlink(path);
	at(log, sizeof(log), c->dir, "dump.log");
	c->pid = spawn(w, "/dev/null", -1);
	if (c->pid < 0)
		return c->pid;
	ret = wait_file(path, c->pid);
	if (ret < 0) {
		fprintf(stderr, "faultline bench criu: the process did not "
			"fill its memory: %s\n", strerror(-ret));
		stop(c->pid);
		return ret;
	}
	snprintf(pid, sizeof(pid), "%d", (int)c->pid);
	t0 = bench_now();
	ret = run_cmd(d, log);
	*sec = bench_now() - t0;
	if (ret) {
		fprintf(stderr, "faultline bench criu: criu dump: %s (see "
			"%s)\n", ret < 0 ? strerror(-ret) : "failed", log);
		stop(c->pid);
		return -EIO;
	}
	ret = wait_exit(c->pid, BOUND_S);	/* its pid free for restores */
	return ret < 0 ? ret : 0;
}

/* The process's result file: its times against t0, and its verdict. */
static int read_result(const char *path, double t0, struct sample *s)
{
	char verdict[16] = "";
	double run, pass;
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, "%lf %lf %15s", &run, &pass, verdict);
	fclose(f);
	if (n != 3)
		return -EPROTO;
	s->t[M_RUN] = run - t0;
	s->t[M_PASS] = pass - t0;
	s->ok = !strcmp(verdict, "ok");
	return 0;
}

/* One restore's files: its logs and faultline's stats in the bench's dir. */
struct rfiles {
	char log[PATH_MAX];	/* criu restore's output */
	char dlog[PATH_MAX];	/* the daemon's */
	char stats[PATH_MAX];	/* faultline lazy-pages --stats-json */
	char result[PATH_MAX];	/* what the process writes */
};

/* Name k's files, and remove what the last restore left. */
static void restore_files(const struct crun *c, const struct cand *k,
			  struct rfiles *f)
{
	char name[64], quit[PATH_MAX];

	snprintf(name, sizeof(name), "%s-restore.log", k->key);
	at(f->log, sizeof(f->log), c->dir, name);
	snprintf(name, sizeof(name), "%s-daemon.log", k->key);
	at(f->dlog, sizeof(f->dlog), c->dir, name);
	at(f->stats, sizeof(f->stats), c->dir, "stats.json");
	at(f->result, sizeof(f->result), c->dir, "result");
	unlink(f->stats);
	unlink(f->result);
	at(quit, sizeof(quit), c->dir, "exit");
	unlink(quit);
}

/* What the daemon served, where it says so; eager: in before it runs. */
static void count_served(const struct cand *k, const struct rfiles *f,
			 struct sample *s)
{
	if (k->kind == EAGER)
		s->t[M_ALL] = s->t[M_RUN];
	else if (k->kind == FL_LAZY)
		count_faultline(f->stats, s);
	else if (k->verbose)
		count_criu(f->dlog, s);
}

/* Restore the dump with candidate k; the process is reaped after. */
static int restore(struct crun *c, const struct cand *k, struct sample *s)
{
	struct rfiles f;
	const char *r[] = { c->criu, "restore", "-D", c->img, "-d",
			    k->kind == EAGER ? NULL : "--lazy-pages", NULL };
	pid_t d = 0, ps = 0;
	double t0 = bench_now();
	int ret, st = 0;
	char port[16] = "";

	*s = (struct sample){ .faults = -1, .copied = -1, .p50_us = -1,
			      .p99_us = -1, .restore_ms = -1 };
	restore_files(c, k, &f);
	if (k->ps && (ps = page_server(c, port, sizeof(port))) < 0)
		return ps;
	if (k->kind != EAGER) {
		t0 = bench_now();
		ret = start_daemon(c, k, f.dlog, f.stats, port, &d);
		if (ret < 0) {
			page_server_gone(ps);
			return ret;
		}
		s->listen = bench_now() - t0;
	}
	t0 = bench_now();
	ret = run_cmd(r, f.log);
	s->cmd = bench_now() - t0;
	if (ret) {
		fprintf(stderr, "faultline bench criu: criu restore with %s: "
			"%s (see %s)\n", k->label,
			ret < 0 ? strerror(-ret) : "failed", f.log);
		ret = -EIO;
		goto out;
	}
	ret = await_restored(f.result, c->pid, &d, t0, &s->t[M_ALL], &st);
	if (ret < 0) {
		fprintf(stderr, "faultline bench criu: %s: the restored "
			"process wrote no result, or the daemon did not exit: "
			"%s\n", k->label, strerror(-ret));
		goto out;
	}
	if (k->kind != EAGER && (!WIFEXITED(st) || WEXITSTATUS(st))) {
		fprintf(stderr, "faultline bench criu: %s ended with status "
			"0x%x (see %s)\n", k->label, st, f.dlog);
		ret = -EIO;
		goto out;
	}
	ret = read_result(f.result, t0, s);
	count_served(k, &f, s);
out:
	stop(d);
	page_server_gone(ps);
	criu_put_file(c->dir, "exit", "");
	if (wait_exit(c->pid, ret < 0 ? 0 : BOUND_S) < 0)
		stop(c->pid);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;	/* what else came to us (faultline's keeper) */
	return ret;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path) < 0 ? -errno : 0;
}

/* rm -r path: 0 or -errno. */
static int remove_tree(const char *path)
{
	return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * The loop's cases are the candidates in an order rotated by run, each
 * restoring that run's dump; before a run, the last run's dump goes and
 * a new one is made.
 */
static int start_run(void *ctx, int r)
{
	struct crun *c = ctx;
	int ret = r ? remove_tree(c->img) : 0;

	c->run = r;
	if (!ret)
		ret = dump(c, &c->runs[r].dump);
	if (!ret)
		ret = criu_put_file(c->dir, "go", "");
	return ret;
}

static int cand_of(const struct crun *c, int i)
{
	return (i + c->run) % NCAND;
}

static const char *cand_label(void *ctx, int i)
{
	return criu_cands[cand_of(ctx, i)].label;
}

static int restore_one(void *ctx, int r, int i, struct bench_sample *out)
{
	struct crun *c = ctx;
	int k = cand_of(c, i);
	struct sample *s = &c->runs[r].s[k];
	int ret = restore(c, &criu_cands[k], s);

	out->sec = s->t[M_ALL];
	out->ok = s->ok;
	return ret;
}

/* ---- criu, and whether to run at all ------------------------------------- */

/* criu's version as major * 100 + minor, or -1. */
static int criu_version(const char *path)
{
	char cmd[PATH_MAX + 32], line[128];
	int maj, min, v = -1;
	FILE *f;

	if (strchr(path, '\'') || access(path, X_OK) < 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "'%s' --version 2>/dev/null", path);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Version: %d.%d", &maj, &min) == 2)
			v = maj * 100 + min;
	if (f)
		pclose(f);
	return v;
}

/* "criu" in $PATH into buf, or "". */
static void criu_in_path(char *buf, size_t n)
{
	const char *p = getenv("PATH");

	buf[0] = 0;
	while (p && *p) {
		size_t len = strcspn(p, ":");

		snprintf(buf, n, "%.*s/criu", (int)len, p);
		if (len && access(buf, X_OK) == 0)
			return;
		p += len + (p[len] == ':');
	}
	buf[0] = 0;
}

/*
 * The criu to use: --criu, else build/criu/bin/criu beside this faultline
 * binary or under the current directory (tests/criu/get-criu.sh), else
 * $PATH's.  NULL if none is >= 4.1 (older ones fail on kernels that
 * split [vvar]).
 */
static const char *find_criu(const struct bench_opts *o, char *buf, size_t n)
{
	char exe[PATH_MAX], *sl;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (o->criu) {
		snprintf(buf, n, "%s", o->criu);
		return criu_version(buf) >= 401 ? buf : NULL;
	}
	exe[len > 0 ? len : 0] = 0;
	sl = strrchr(exe, '/');
	snprintf(buf, n, "%.*s/criu/bin/criu", sl ? (int)(sl - exe) : 1,
		 sl ? exe : ".");
	if (criu_version(buf) >= 401)
		return buf;
	snprintf(buf, n, "build/criu/bin/criu");
	if (criu_version(buf) >= 401)
		return buf;
	criu_in_path(buf, n);
	return buf[0] && criu_version(buf) >= 401 ? buf : NULL;
}

int bench_criu(const struct bench_opts *o, struct bench_table *t)
{
	static struct crun c;
	struct bench_loop l = {
		.bench = "criu", .runs = o->runs, .ncases = NCAND, .ctx = &c,
		.label = cand_label, .sample = restore_one, .start = start_run,
	};
	struct run *runs;
	int ret = 0, n = o->runs;

	if (geteuid() != 0) {
		t->skipped = "criu dump and restore need root";
		return 0;
	}
	if (!find_criu(o, c.criu, sizeof(c.criu))) {
		t->skipped = "no criu >= 4.1 (--criu PATH, build/criu/bin/criu "
			     "from `make criu`, or $PATH)";
		return 0;
	}
	c.size = o->size ? o->size : o->quick ? 16 * MIB : GIB;
	snprintf(c.dir, sizeof(c.dir), "/tmp/flb-criu-XXXXXX");
	if (!mkdtemp(c.dir))
		return -errno;
	bench_path_add(c.dir);
	at(c.img, sizeof(c.img), c.dir, "img");
	runs = calloc((size_t)n, sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	/* The restored process is ours to reap, and its pid free again. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	long pipe_old = bench_pipe_max_raise(BENCH_CRIU_PIPE);

	c.runs = runs;
	ret = bench_loop_run(&l);
	if (!ret)
		ret = remove_tree(c.img);
	bench_pipe_max_put(pipe_old);
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	if (ret < 0)
		fprintf(stderr, "faultline bench criu: left for a look: %s\n",
			c.dir);
	else {
		criu_fill_table(t, runs, n, c.size);
		remove_tree(c.dir);
	}
	bench_path_forget(c.dir);
	bench_loop_free(&l);
	free(runs);
	return ret;
}

