// SPDX-License-Identifier: Apache-2.0
/*
 * tests/criu_lazy.c - `faultline lazy-pages` serving the real CRIU: a
 * process this test starts is dumped (`criu dump`), then restored with
 * `criu restore --lazy-pages` while `faultline lazy-pages` serves its
 * memory, and the process itself checks every byte and writes what it
 * found to a file: one thread, four threads, a tree of three processes,
 * a fork after the restore while pages are still lazy (the child reads
 * inherited memory) and a fork of that fork, MADV_DONTNEED, mremap and
 * munmap on lazy memory, THP, a pages file cut, pages from a faultline
 * image (local, over HTTP) or from CRIU's own page server, and the
 * server killed mid-restore (its supervisor takes the sessions over).
 *
 * Decision: root only, CRIU_FAULT=130 for every criu run, --status-fd to
 * know the daemon listens, a dumped pid reaped before the restore, and no
 * time asserted anywhere (the bounds in criu_util.h only stop a hang), so
 * that it passes under load as the rest does.  Small processes (a few
 * MiB) keep `make check` short.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "criu_images.pb-c.h"
#include "criu_util.h"
#include "format/criu.h"
#include "bench.h"
#include "http_util.h"
#include "tap.h"

#define TASK_MIB 8	/* each process's memory */

struct scenario {
	const char *name;
	const char *kind;
	int threads;
	const char *roles[4];	/* result files: result.ROLE */
	const char *opt;	/* for faultline lazy-pages, or NULL */
	bool cut;		/* the pages files truncated after the restore */
	bool kill;		/* the daemon killed after the restore */
	int image;		/* --pages: a faultline image of the dump, 1
				 * in the test's directory, 2 over HTTP */
	bool record;		/* --record, then restored again, --prefetch */
	bool ps;		/* --page-server: `criu page-server --lazy-pages` */
	bool left;		/* the images as `criu dump --lazy-pages` writes */
};

static struct nginx ngx;	/* for image 2 */
static bool have_nginx;

/*
 * /proc/PID/NAME's first line until want(line) says yes: true; false
 * after the bound.
 */
static bool proc_until(pid_t pid, const char *name,
		       bool (*want)(const char *line), char *line, size_t n)
{
	char path[128];

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	for (int i = 0; i < CU_WAIT_S * 100; i++) {
		FILE *f = fopen(path, "re");

		line[0] = 0;
		if (f) {
			if (!fgets(line, (int)n, f))
				line[0] = 0;
			fclose(f);
		}
		if (want(line))
			return true;
		usleep(10000);
	}
	return false;
}

static bool has_pid(const char *l) { return atoi(l) > 0; }
/* In a fault, or in fork() waiting for its event to be read. */
static bool is_userfault(const char *l) { return strstr(l, "userfault"); }

/* The supervisor's child, the server (faultline lazy-pages is supervised). */
static pid_t server_of(pid_t sup)
{
	char name[64], buf[64];

	snprintf(name, sizeof(name), "task/%d/children", sup);
	return proc_until(sup, name, has_pid, buf, sizeof(buf)) ? atoi(buf) : -1;
}

/* pid sleeps in a userfault (its wchan), true; false after the bound. */
static bool in_userfault(pid_t pid)
{
	char w[64];

	return proc_until(pid, "wchan", is_userfault, w, sizeof(w));
}

/*
 * The server is killed mid-restore, its supervisor stopped meanwhile: the
 * supervisor holds the task's uffd, so its memory stays registered and its
 * first lazy fault waits (no zeros); once the supervisor runs again, a new
 * server takes the session over and the task reads every byte.
 */
static void kill_server(pid_t sup, pid_t task, const char *name,
			const char *go)
{
	pid_t server = server_of(sup);

	ok(server > 0 && kill(sup, SIGSTOP) == 0 && kill(server, SIGKILL) == 0,
	   "%s: the server killed (%d), its supervisor stopped", name, server);
	close(open(go, O_WRONLY | O_CREAT, 0644));
	ok(in_userfault(task), "%s: the task waits in its fault", name);
	kill(sup, SIGCONT);
}

/*
 * `criu page-server --lazy-pages` serving img's pages on loopback, as a
 * daemon (listening once criu returns): its pid, or -1.
 */
static pid_t page_server(const char *dir, const char *img, const char *log,
			 char *port, size_t plen)
{
	char pidf[300], buf[32] = "";
	const char *args[] = { "page-server", "--lazy-pages", "-D", img,
			       "--address", "127.0.0.1", "--port", port, "-d",
			       "--pidfile", pidf, NULL };

	snprintf(pidf, sizeof(pidf), "%s/ps.pid", dir);
	int fp = free_port();

	if (fp <= 0)
		return -1;
	snprintf(port, plen, "%d", fp);
	if (cu_run_criu(log, args) != 0 ||
	    cu_read_file(dir, "ps.pid", buf, sizeof(buf)) <= 0)
		return -1;
	return atoi(buf) > 0 ? atoi(buf) : -1;
}

/* The whole of path: its bytes (malloc'd) and *len, or NULL. */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	uint8_t *b = NULL;
	long n;

	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1)) &&
	    fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	if (b)
		*len = (size_t)n;
	if (f)
		fclose(f);
	return b;
}

/*
 * One task's pagemap and pages file in dir rewritten as `criu dump
 * --lazy-pages` leaves them: each lazy entry loses PE_PRESENT and its
 * bytes leave the pages file (they stay with the page server, which
 * serves them from the original images).  0, or -1.
 */
static int leave_lazy(const char *dir, int pid)
{
	char pm[400], pg[400];
	size_t pl, gl, pos = 8, goff = 0;
	uint8_t *p, *g = NULL;
	FILE *opm = NULL, *opg = NULL;
	uint32_t n, id = 0;
	int ret = -1;

	snprintf(pm, sizeof(pm), "%s/pagemap-%d.img", dir, pid);
	if (!(p = slurp(pm, &pl)) || pl < 12)
		goto out;
	memcpy(&n, p + pos, 4);
	FlCriuPagemapHead *h = pos + 4 + n <= pl ?
		fl_criu_pagemap_head__unpack(NULL, n, p + pos + 4) : NULL;

	if (!h)
		goto out;
	id = h->pages_id;
	fl_criu_pagemap_head__free_unpacked(h, NULL);
	snprintf(pg, sizeof(pg), "%s/pages-%u.img", dir, id);
	if (!(g = slurp(pg, &gl)) || !(opm = fopen(pm, "w")) ||
	    !(opg = fopen(pg, "w")))
		goto out;
	fwrite(p, 1, pos + 4 + n, opm);		/* magics and head */
	for (pos += 4 + n; pos + 4 <= pl; pos += 4 + n) {
		memcpy(&n, p + pos, 4);
		FlCriuPagemapEntry *e = pos + 4 + n <= pl ?
			fl_criu_pagemap_entry__unpack(NULL, n, p + pos + 4) :
			NULL;
		uint8_t out[256];

		if (!e)
			goto out;
		uint64_t len = (e->has_nr_pages ? e->nr_pages :
				e->compat_nr_pages) * 4096ull;
		bool present = !e->has_flags || e->flags & CRIU_PE_PRESENT;

		if (present && goff + len > gl) {
			fl_criu_pagemap_entry__free_unpacked(e, NULL);
			goto out;
		}
		if (present && !(e->has_flags && e->flags & CRIU_PE_LAZY))
			fwrite(g + goff, 1, len, opg);
		if (e->has_flags && e->flags & CRIU_PE_LAZY)
			e->flags &= ~CRIU_PE_PRESENT;
		goff += present ? len : 0;
		uint32_t m = (uint32_t)fl_criu_pagemap_entry__get_packed_size(e);

		if (m <= sizeof(out)) {
			fl_criu_pagemap_entry__pack(e, out);
			fwrite(&m, 4, 1, opm);
			fwrite(out, 1, m, opm);
		}
		fl_criu_pagemap_entry__free_unpacked(e, NULL);
		if (m > sizeof(out))
			goto out;
	}
	ret = pos == pl ? 0 : -1;
out:
	if (opm && fclose(opm))
		ret = -1;
	if (opg && fclose(opg))
		ret = -1;
	free(p);
	free(g);
	return ret;
}

/* faultline lazy-pages refuses a lazy dump without --page-server. */
static void refused_without_ps(const char *dir, const char *img,
			       const char *name)
{
	char cmd[900], out[1024] = "";

	snprintf(cmd, sizeof(cmd), "%s lazy-pages -D '%s' >'%s/refused' 2>&1",
		 cu_faultline_bin(), img, dir);
	int st = system(cmd);

	cu_read_file(dir, "refused", out, sizeof(out));
	if (!ok(st != 0 && strstr(out, "--page-server"), "%s: without "
		"--page-server, refused saying so", name))
		diag("exit 0x%x: %s", st, out);
}

/*
 * faultline lazy-pages with a page server nobody listens on: one line
 * saying so, exit 1, and no socket (criu restore fails at connect).
 */
static void refused_unreachable(const char *dir, const char *img,
				const char *name)
{
	char cmd[900], out[1024] = "", sock[400];
	int port = free_port();

	snprintf(cmd, sizeof(cmd), "%s lazy-pages -D '%s' --page-server "
		 "--address 127.0.0.1 --port %d >'%s/refused' 2>&1",
		 cu_faultline_bin(), img, port, dir);
	int st = system(cmd);

	cu_read_file(dir, "refused", out, sizeof(out));
	snprintf(sock, sizeof(sock), "%s/lazy-pages.socket", img);
	char bad[900], bout[1024] = "";

	snprintf(bad, sizeof(bad), "%s lazy-pages -D '%s' --page-server "
		 "--address 127.0.0.1 --port %d --page-server-criu banana "
		 ">'%s/bad' 2>&1", cu_faultline_bin(), img, port, dir);
	int bst = system(bad);

	cu_read_file(dir, "bad", bout, sizeof(bout));
	ok(WIFEXITED(bst) && WEXITSTATUS(bst) == 2 &&
	   strstr(bout, "--page-server-criu") && strstr(bout, "banana"),
	   "%s: --page-server-criu banana: refused, naming it", name);
	const char *nl = strchr(out, '\n');

	if (!ok(WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
		strstr(out, "cannot connect") && (!nl || !nl[1]) &&
		access(sock, F_OK) < 0, "%s: a page server not listening: "
		"refused in one line, no socket", name))
		diag("exit 0x%x: %s", st, out);
}

/* A copy of img beside it, its tasks' pages left lazy: 0 or -1. */
static int lazy_dump_copy(const char *img, char *copy, size_t len,
			  const pid_t *pids, int n)
{
	char cmd[700];

	snprintf(copy, len, "%s.left", img);
	snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", img, copy);
	if (system(cmd))
		return -1;
	for (int i = 0; i < n; i++)
		if (leave_lazy(copy, pids[i]) < 0)
			return -1;
	return 0;
}

/*
 * The same dump restored again, the working set the first restore
 * recorded (trace) replayed: every process reads every byte right, and
 * the stats say pages were replayed.  The processes wait for their go
 * file until the daemon is done (every page in), so no fault of theirs
 * races the replay: fillers replay the trace before any background
 * restore, and nothing else fills a page meanwhile.
 */
static void replayed(const struct scenario *sc, const char *dir,
		     const char *img, const char *trace)
{
	char js[200], log[200], buf[8192] = "";
	const char *args[] = { "--prefetch", trace, "--stats-json", js, NULL };
	const char *restore[] = { "restore", "-D", img, "-d", "--lazy-pages",
				  NULL };

	snprintf(js, sizeof(js), "%s/stats.json", dir);
	snprintf(log, sizeof(log), "%s/criu.log", dir);
	ok(access(trace, R_OK) == 0, "%s: a working set recorded", sc->name);
	for (int i = 0; sc->roles[i]; i++) {
		snprintf(buf, sizeof(buf), "%s/result.%s", dir, sc->roles[i]);
		unlink(buf);
	}
	snprintf(buf, sizeof(buf), "%s/go", dir);
	unlink(buf);
	pid_t daemon = cu_lazy_pages(dir, img, args);

	if (!ok(daemon > 0, "%s, again: faultline lazy-pages --prefetch "
		"listens", sc->name))
		return;
	is_int(cu_run_criu(log, restore), 0, "criu restore --lazy-pages, "
	       "again");
	is_int(cu_daemon_exit(daemon), 0, "faultline lazy-pages --prefetch is "
	       "done (every page in) before the processes read");
	snprintf(buf, sizeof(buf), "%s/go", dir);
	close(open(buf, O_WRONLY | O_CREAT, 0644));
	for (int i = 0; sc->roles[i]; i++) {
		char res[32], got[200] = "";

		snprintf(res, sizeof(res), "result.%s", sc->roles[i]);
		if (cu_wait_file(dir, res))
			cu_read_file(dir, res, got, sizeof(got));
		if (!ok(!strcmp(got, "ok"), "%s, replayed: process %s read "
			"every byte right", sc->name, sc->roles[i]))
			diag("it says: %s", got[0] ? got : "(nothing)");
	}
	cu_read_file(dir, "stats.json", buf, sizeof(buf));
	char *r = strstr(buf, "\"pages_replayed\":");

	ok(r && atol(r + strlen("\"pages_replayed\":")) > 0,
	   "%s, replayed: pages came ahead of faults from the trace",
	   sc->name);
}

/* One scenario's run, from the dump to the last process reaped. */
struct lazy_run {
	const struct scenario *sc;
	char dir[128], img[200], log[200];
	char flimg[300], url[128], trace[200], port[16], left[320];
	const char *rimg;	/* what restores: the dump, or as left */
	pid_t pids[4];		/* the dumped processes */
	int n;
	pid_t daemon, ps;	/* faultline lazy-pages, criu page-server */
};

/* The workload started, its processes ready, dumped and gone. */
static int lazy_dump(struct lazy_run *r)
{
	const struct scenario *sc = r->sc;
	char *tmp = cu_tmpdir("criu-lazy"), buf[1024];
	int ok_all = 1;

	if (!tmp)
		BAIL("cannot make a directory in /tmp");
	snprintf(r->dir, sizeof(r->dir), "%s", tmp);
	free(tmp);
	snprintf(r->img, sizeof(r->img), "%s/img", r->dir);
	snprintf(r->log, sizeof(r->log), "%s/criu.log", r->dir);
	mkdir(r->img, 0755);
	pid_t child = cu_start(r->dir, sc->kind, TASK_MIB, sc->threads);

	/* Every process of the dump has filled its memory. */
	for (int i = 0; sc->roles[i]; i++) {
		char ready[32];

		if (strstr(sc->roles[i], "child"))
			continue;	/* forks after the restore */
		snprintf(ready, sizeof(ready), "ready.%s", sc->roles[i]);
		if (!cu_wait_file(r->dir, ready) ||
		    cu_read_file(r->dir, ready, buf, sizeof(buf)) <= 0)
			BAIL("%s: the workload did not start", sc->name);
		r->pids[r->n++] = atoi(buf);
	}
	snprintf(buf, sizeof(buf), "%d", r->pids[0]);
	const char *dump[] = { "dump", "-t", buf, "-D", r->img, NULL };

	if (!is_int(cu_run_criu(r->log, dump), 0, "criu dump")) {
		cu_show_log(r->dir, "criu.log");
		kill(child, SIGKILL);
		cu_reap(child);
		return -1;
	}
	for (int i = 0; i < r->n; i++)
		ok_all &= cu_reap(r->pids[i]);
	ok(ok_all, "%s: the dumped processes are gone", sc->name);
	return 0;
}

/* The image and page server the scenario asks for; lazy-pages started. */
static int lazy_serve(struct lazy_run *r)
{
	const struct scenario *sc = r->sc;
	const char *args[12] = { 0 };
	char buf[1024];
	int na = 0;

	snprintf(r->flimg, sizeof(r->flimg), "%s/pages.flimg",
		 sc->image == 2 ? ngx.www : r->dir);
	snprintf(r->url, sizeof(r->url), "http://127.0.0.1:%d/pages.flimg",
		 ngx.port);
	if (sc->image) {
		snprintf(buf, sizeof(buf), "%s image create --criu %s %s "
			 ">/dev/null", cu_faultline_bin(), r->img, r->flimg);
		is_int(system(buf), 0, "faultline image create --criu");
	}
	if (sc->ps)
		r->ps = page_server(r->dir, r->img, r->log, r->port,
				    sizeof(r->port));
	if (sc->ps && !ok(r->ps > 0, "%s: criu page-server --lazy-pages "
			  "listens", sc->name)) {
		cu_show_log(r->dir, "criu.log");
		return -1;
	}
	r->rimg = r->img;	/* what restores: the dump, or as left */
	if (sc->left) {
		if (!ok(lazy_dump_copy(r->img, r->left, sizeof(r->left),
				       r->pids, r->n) == 0,
			"%s: the images rewritten as a lazy dump's", sc->name))
			return -1;
		r->rimg = r->left;
		refused_without_ps(r->dir, r->left, sc->name);
		refused_unreachable(r->dir, r->left, sc->name);
	}
	if (sc->ps) {
		args[na++] = "--page-server";
		args[na++] = "--address";
		args[na++] = "127.0.0.1";
		args[na++] = "--port";
		args[na++] = r->port;
	}
	if (sc->left) {		/* the server's CRIU named, as 4.1.1 is */
		args[na++] = "--page-server-criu";
		args[na++] = "4.1.1";
	}
	snprintf(r->trace, sizeof(r->trace), "%s/ws.trace", r->dir);
	if (sc->opt)
		args[na++] = sc->opt;
	if (sc->image) {
		args[na++] = "--pages";
		args[na++] = sc->image == 2 ? r->url : r->flimg;
	}
	if (sc->record) {
		args[na++] = "--record";
		args[na++] = r->trace;
	}
	r->daemon = cu_lazy_pages(r->dir, r->rimg, args);
	if (!ok(r->daemon > 0, "%s: faultline lazy-pages listens", sc->name)) {
		cu_show_log(r->dir, "lazy-pages.log");
		return -1;
	}
	return 0;
}

/* The restore, the scenario's harm, and what each process read. */
static void lazy_restore(struct lazy_run *r)
{
	const struct scenario *sc = r->sc;
	char buf[1024];
	const char *restore[] = { "restore", "-D", r->rimg, "-d",
				  "--lazy-pages", NULL };

	if (!is_int(cu_run_criu(r->log, restore), 0,
		    "criu restore --lazy-pages"))
		cu_show_log(r->dir, "criu.log");
	if (sc->cut) {
		snprintf(buf, sizeof(buf), "truncate -s 0 %s/pages-*.img",
			 r->img);
		if (system(buf))
			BAIL("cannot truncate the pages files");
	}
	snprintf(buf, sizeof(buf), "%s/go", r->dir);
	if (sc->kill)
		kill_server(r->daemon, r->pids[0], sc->name, buf);
	close(open(buf, O_WRONLY | O_CREAT, 0644));
	/*
	 * CRIU's page server serves one connection: the pages the killed
	 * server had not fetched are gone with it.
	 */
	bool dies = sc->cut || (sc->kill && sc->ps);

	if (dies) {
		/*
		 * The pages it cannot have are poisoned: it dies of that
		 * (SIGBUS; SIGKILL when the kernel itself met the page, e.g.
		 * its rseq area in poisoned TLS), and says nothing.
		 */
		char got[200] = "";

		cu_reap(r->pids[0]);
		int st = cu_status(r->pids[0]);

		cu_read_file(r->dir, "result.0", got, sizeof(got));
		if (!ok(st >= 0 && WIFSIGNALED(st) && !got[0], "%s: the process "
			"died of the poisoned pages, read no data", sc->name))
			diag("status 0x%x, it says: %s", st, got);
		else
			diag("killed by signal %d", WTERMSIG(st));
	}
	for (int i = 0; sc->roles[i] && !dies; i++) {
		char res[32], got[200] = "";

		snprintf(res, sizeof(res), "result.%s", sc->roles[i]);
		if (cu_wait_file(r->dir, res))
			cu_read_file(r->dir, res, got, sizeof(got));
		if (!ok(!strcmp(got, "ok"), "%s: process %s read every byte "
			"right", sc->name, sc->roles[i]))
			diag("it says: %s", got[0] ? got : "(nothing)");
	}
}

/* Every server's exit, the replay if recorded, the directory removed. */
static void lazy_end(struct lazy_run *r)
{
	const struct scenario *sc = r->sc;

	for (int i = 0; i < r->n; i++)
		cu_reap(r->pids[i]);
	if (r->daemon > 0 &&
	    !is_int(cu_daemon_exit(r->daemon), 0, "faultline lazy-pages exits "
		    "0 once every task is served"))
		cu_show_log(r->dir, "lazy-pages.log");
	/* Ours to reap: this test is the subreaper of what criu leaves. */
	if (r->ps > 0 && !sc->kill)
		is_int(cu_daemon_exit(r->ps), 0, "criu page-server exits 0 "
		       "once faultline is done with it");
	else if (r->ps > 0)
		cu_daemon_exit(r->ps);
	if (sc->kill) {
		char lg[16384];

		ok(cu_read_file(r->dir, "lazy-pages.log", lg, sizeof(lg)) > 0 &&
		   strstr(lg, "taken over: serving"), "%s: a new server took "
		   "the task's session over", sc->name);
	}
	if (sc->record && r->daemon > 0)
		replayed(sc, r->dir, r->img, r->trace);
	if (getenv("CRIU_TEST_LOGS"))
		cu_show_log(r->dir, "lazy-pages.log");
	if (tap_failures())
		diag("left for a look: %s", r->dir);
	else
		cu_rmdir(r->dir);
}

static void run(const struct scenario *sc)
{
	struct lazy_run r = { .sc = sc };

	if (lazy_dump(&r) < 0 || lazy_serve(&r) < 0)
		return;
	lazy_restore(&r);
	lazy_end(&r);
}

int main(int argc, char **argv)
{
	static const struct scenario sc[] = {
		{ "one thread", "plain", 1, { "0" }, NULL, false, false, 0,
		  false, false, false },
		/* Faults only: the memory is still lazy when it is touched. */
		{ "four threads", "plain", 4, { "0" }, "--no-background",
		  false, false, 0, false, false, false },
		{ "a process tree", "tree", 1, { "0", "1", "2" }, NULL,
		  false, false, 0, false, false, false },
		{ "a fork after the restore", "fork", 1, { "0", "child" },
		  "--no-background", false, false, 0, false, false, false },
		{ "MADV_DONTNEED, mremap, munmap", "madv", 1, { "0" },
		  "--no-background", false, false, 0, false, false, false },
		{ "THP-backed memory", "thp", 2, { "0" }, "--no-background",
		  false, false, 0, false, false, false },
		{ "pages files cut under the daemon", "plain", 1, { "0" },
		  "--no-background", true, false, 0, false, false, false },
		{ "pages from a faultline image (--pages)", "plain", 2, { "0" },
		  "--no-background", false, false, 1, false, false, false },
		{ "its server killed mid-restore", "plain", 1, { "0" },
		  "--no-background", false, true, 0, false, false, false },
		/* The server killed as the first fork's event waits. */
		{ "a fork of a fork, the server killed", "fork2", 1,
		  { "0", "child", "grandchild" }, "--no-background", false,
		  true, 0, false, false, false },
		{ "a process tree's working set recorded, replayed", "tree", 1,
		  { "0", "1", "2" }, "--no-background", false, false, 0, true, false, false },
		{ "pages from a faultline image over HTTP", "tree", 1,
		  { "0", "1", "2" }, NULL, false, false, 2, false, false, false },
		/* CRIU's page server: the same requests as a lazy dump's. */
		{ "pages from CRIU's page server", "tree", 1,
		  { "0", "1", "2" }, NULL, .ps = true },
		{ "pages from CRIU's page server, faults only", "plain", 4,
		  { "0" }, "--no-background", .ps = true },
		/* As a lazy migration leaves them: only there. */
		{ "pages left on the dumping host", "tree", 1,
		  { "0", "1", "2" }, NULL, .ps = true, .left = true },
		{ "CRIU's page server, the server killed mid-restore", "plain",
		  1, { "0" }, "--no-background", .kill = true, .ps = true },
	};

	cu_workload_main(argc, argv);
	cu_require(true);
	have_nginx = nginx_binary() && nginx_setup(&ngx) == 0 &&
		     nginx_start(&ngx) == 0;
	if (nginx_binary() && !have_nginx)
		ok(0, "nginx starts, for the case over HTTP");
	/* CRIU's page server needs it (bench.h says why) */
	long pipe_old = bench_pipe_max_raise(BENCH_CRIU_PIPE);

	for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++) {
		const char *only = getenv("CRIU_TEST_ONLY");

		if (only && !strstr(sc[i].name, only))
			continue;	/* a developer's run of some */
		if (sc[i].image == 2 && !nginx_binary())
			skip_missing(1, "nginx", "not installed (apt-get install "
				     "nginx-light): pages from a faultline "
				     "image over HTTP");
		else if (sc[i].image == 2 && !have_nginx)
			skip_missing(1, "nginx", "did not start");
		else
			run(&sc[i]);
	}
	if (have_nginx) {
		nginx_kill(&ngx);
		nginx_cleanup(&ngx);
	}
	bench_pipe_max_put(pipe_old);
	return done_testing();
}
