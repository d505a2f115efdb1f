// SPDX-License-Identifier: Apache-2.0
/*
 * engine_client_exit.c - serving another process's uffd (the daemon's case)
 * and that process exiting mid-restore: the engine reports the client gone
 * (ESRCH) or simply stops cleanly, never hangs, and leaks no fd.  And a
 * client the engine kills (FL_ON_ERROR_KILL) is reported killed, however
 * many threads failed a page and however fast it was reaped; and one that
 * exited is never "killed" under a pid that now names another process.
 */
#include <dirent.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "faultline.h"
#include "fc_client.h"
#include "load.h"
#include "tap.h"
#include "util.h"

#define SEED 0xc1
#define LEN (64ull << 20)
#define KILL_SESSIONS 40

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static int recv_fd(int sock, uint64_t *addr)
{
	char c[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { addr, sizeof(*addr) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = c, .msg_controllen = sizeof(c) };

	if (recvmsg(sock, &mh, 0) != sizeof(*addr))
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	return cm ? *(int *)CMSG_DATA(cm) : -1;
}

/* Send the client's uffd and its region's address; -1 on failure. */
static int send_uffd(int sock, struct fc_client *c)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	uint64_t addr = (uintptr_t)c->regions[0].addr;
	struct iovec iov = { &addr, sizeof(addr) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	*(int *)CMSG_DATA(cm) = c->uffd;
	return sendmsg(sock, &mh, 0) < 0 ? -1 : 0;
}

/* Child: map, register, send the uffd and the address, touch everything. */
static void child(int sock)
{
	struct fc_client c;
	uint64_t size = LEN;

	if (fc_client_map(&c, 1, &size, PAGE) < 0)
		_exit(2);
	if (send_uffd(sock, &c))
		_exit(3);
	_exit(same_as_file(c.regions[0].addr, LEN, 0, SEED, 0) ? 0 : 1);
}

/* A client thread: read one page (of a truncated source: never served). */
static void *touch(void *p)
{
	return (void *)(uintptr_t)*(volatile uint8_t *)p;
}

/* A child dies with the test, whatever kills the test. */
static void die_with_parent(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(9);
}

/*
 * Child of a kill session: hand over the uffd, then fault pages the source
 * cannot produce from four threads at once.  The engine must kill it.
 */
static void doomed_child(int sock)
{
	struct fc_client c;
	uint64_t size = LEN;
	pthread_t t[4];

	if (fc_client_map(&c, 1, &size, PAGE) < 0 || send_uffd(sock, &c))
		_exit(2);
	close(c.uffd);	/* the engine's now: it alone answers */
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, touch, (uint8_t *)c.regions[0].addr +
			       LEN / 2 + i * (LEN / 8));
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	_exit(1);	/* served data the source does not have */
}

/* Child that hands over its uffd, then exits when its socket closes. */
static void quiet_child(int sock)
{
	struct fc_client c;
	uint64_t size = LEN;
	char b;

	if (fc_client_map(&c, 1, &size, PAGE) < 0 || send_uffd(sock, &c))
		_exit(2);
	_exit(read(sock, &b, 1) < 0);
}

/* One client process, and an engine (not started) adopting its uffd. */
struct client {
	pid_t pid;
	int sock;		/* ours of the socketpair */
	struct fl_engine *e;
};

/*
 * Reap pid, waiting at most ms (then SIGKILL it): its wait status, or -1
 * if it had to be killed.  Polls, so a child is reaped at once.
 */
static int reap(pid_t pid, int ms)
{
	int st;

	for (int i = 0; i < ms * 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		usleep(100);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	diag("child %d still running after %d ms: killed", (int)pid, ms);
	return -1;
}

/*
 * Fork a client running body, and make an engine for its uffd with the
 * given on_error policy.  0, or -1 with the client killed and reaped.
 */
static int client_start(struct client *c, void (*body)(int),
			struct fl_source *src, int on_error)
{
	pid_t parent = getpid();
	int sv[2], uffd;
	uint64_t addr = 0;

	c->e = NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		die_with_parent(parent);
		close(sv[0]);
		body(sv[1]);
	}
	close(sv[1]);
	c->sock = sv[0];
	if (c->pid < 0) {
		close(c->sock);
		return -1;
	}
	uffd = recv_fd(c->sock, &addr);
	struct fl_engine_opts o = { .uffd = uffd, .client_pid = c->pid,
				    .on_error = on_error,
				    .flags = FL_ENGINE_ADOPT | FL_ENGINE_OWN_UFFD };
	struct fl_region_desc d = { .addr = addr, .len = LEN,
				    .page_size = PAGE };

	if (uffd >= 0 && fl_engine_create(&o, &c->e) < 0) {
		close(uffd);	/* not the engine's: it was never made */
		c->e = NULL;
	}
	if (c->e && fl_engine_add_region(c->e, &d, src) == 0)
		return 0;
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
	fl_engine_destroy(c->e);
	close(c->sock);
	return -1;
}

/*
 * One session with FL_ON_ERROR_KILL and a source cut to a quarter of the
 * memory: every thread that fails a page (fault workers and fillers) may
 * try to kill the client, and the test reaps it at once.  Returns 1 if the
 * client died of SIGKILL and the engine says it killed it.
 */
static int kill_session(struct fl_source *src)
{
	struct client c;
	int st, fin;

	if (client_start(&c, doomed_child, src, FL_ON_ERROR_KILL))
		return 0;
	if (fl_engine_start(c.e, 4) < 0)
		kill(c.pid, SIGKILL);
	st = reap(c.pid, 10000);
	fl_engine_stop(c.e);	/* other threads may still be failing pages */
	fin = fl_engine_finished(c.e);
	fl_engine_destroy(c.e);
	close(c.sock);
	if (st < 0 || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL ||
	    fin != FL_FINISHED_KILLED)
		diag("kill session: client status 0x%x, engine finished %d "
		     "(want SIGKILL, %d)", st, fin, FL_FINISHED_KILLED);
	return st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL &&
	       fin == FL_FINISHED_KILLED;
}

/*
 * A process with the given pid (clone3's set_tid, root only) that sleeps
 * until killed; -1 if the pid cannot be had.  Called before any thread of
 * ours exists: the child only pauses.
 */
static pid_t spawn_with_pid(pid_t want)
{
	struct clone_args a = { .exit_signal = SIGCHLD,
				.set_tid = (uintptr_t)&want,
				.set_tid_size = 1 };
	pid_t parent = getpid();
	long pid = syscall(SYS_clone3, &a, sizeof(a));

	if (pid == 0) {
		die_with_parent(parent);
		for (;;)
			pause();
	}
	return pid == want ? (pid_t)pid : -1;
}

/*
 * The engine is made for a client that then exits and is reaped, and its
 * pid goes to an unrelated process before the first page fails (a source
 * cut to nothing, so the first read fails before any fill could see the
 * client gone; on_error kill).  Returns 1 if that process lives and the
 * engine says its client is gone, not killed; -1 if the pid was not had.
 */
static int reused_pid_session(struct fl_source *src)
{
	struct client c;
	int st, fin = 0, alive;
	pid_t other;

	if (client_start(&c, quiet_child, src, FL_ON_ERROR_KILL))
		return 0;
	close(c.sock);			/* the client exits... */
	reap(c.pid, 10000);		/* ...is reaped: its pid is free */
	other = spawn_with_pid(c.pid);
	if (other > 0 && fl_engine_start(c.e, 1) == 0)
		for (int i = 0; i < 500 && !fl_engine_finished(c.e); i++)
			usleep(2000);
	fl_engine_stop(c.e);	/* a kill under way has said how it went */
	fin = fl_engine_finished(c.e);
	fl_engine_destroy(c.e);
	if (other < 0)
		return -1;
	alive = waitpid(other, &st, WNOHANG) == 0;
	kill(other, SIGKILL);
	waitpid(other, &st, 0);
	if (!alive || fin != FL_FINISHED_GONE)
		diag("pid %d reused: %s, engine finished %d (want %d)", c.pid,
		     alive ? "its new process lives" : "its new process was "
		     "killed", fin, FL_FINISHED_GONE);
	return alive && fin == FL_FINISHED_GONE;
}

/* One session: returns 1 if it behaved. */
static int session(struct fl_source *src, int kill_after_us, int *finished)
{
	struct client c;
	int st = -1;

	if (client_start(&c, child, src, FL_ON_ERROR_POISON))
		return 0;
	if (fl_engine_start(c.e, 2) < 0)
		kill(c.pid, SIGKILL);
	if (kill_after_us) {
		usleep(kill_after_us);
		kill(c.pid, SIGKILL);
	}
	st = reap(c.pid, 30000);
	*finished = fl_engine_finished(c.e);
	fl_engine_destroy(c.e);	/* must not hang */
	close(c.sock);
	/* Killed mid-restore, or done (and right) before the kill landed. */
	return st >= 0 && ((kill_after_us && WIFSIGNALED(st)) ||
			   (WIFEXITED(st) && !WEXITSTATUS(st)));
}

int main(void)
{
	char *path;
	struct fl_source *src;
	int fin, good = 0, fds0;

	load_start();
	path = make_snapshot(LEN, SEED, NULL, 0);
	fl_source_open(path, &src);
	ok(session(src, 0, &fin), "another process's uffd: every byte right");
	fds0 = count_fds();
	for (int i = 0; i < 20; i++)
		good += session(src, 1000 + i * 500, &fin);
	is_int(good, 20, "20 clients killed mid-restore, engine stopped cleanly");
	is_int(count_fds(), fds0, "no fd leaked across those sessions");
	ok(session(src, 0, &fin), "a client after them is served in full");
	fl_source_put(src);
	drop_snapshot(path);

	path = make_snapshot(LEN, SEED, NULL, 0);
	good = 0;
	if (fl_source_open(path, &src) == 0 && truncate(path, LEN / 4) == 0)
		for (int i = 0; i < KILL_SESSIONS; i++)
			good += kill_session(src);
	is_int(good, KILL_SESSIONS, "on_error kill: every client the engine "
	       "killed was reported killed (FL_FINISHED_KILLED), though "
	       "several threads failed pages and it was reaped at once");
	fl_source_put(src);
	drop_snapshot(path);

	path = make_snapshot(LEN, SEED, NULL, 0);
	good = 0;
	if (fl_source_open(path, &src) == 0 && truncate(path, 0) == 0)
		good = reused_pid_session(src);
	if (good < 0)
		skip_missing(1, "root", "clone3 set_tid needs it to choose "
			     "a pid");
	else
		ok(good, "on_error kill: a client that exited is never killed "
		   "under its pid, now another process's; the engine says "
		   "it is gone");
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
