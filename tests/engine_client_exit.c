/*
 * engine_client_exit.c - serving another process's uffd (the daemon's case)
 * and that process exiting mid-restore: the engine reports the client gone
 * (ESRCH) or simply stops cleanly, never hangs, and leaks no fd.
 */
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "faultline.h"
#include "fc_client.h"
#include "tap.h"
#include "util.h"

#define SEED 0xc1
#define LEN (64ull << 20)

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

/* Child: map, register, send the uffd and the address, touch everything. */
static void child(int sock)
{
	struct fc_client c;
	uint64_t size = LEN;
	char ctl[CMSG_SPACE(sizeof(int))];

	if (fc_client_map(&c, 1, &size, PAGE) < 0)
		_exit(2);
	uint64_t addr = (uintptr_t)c.regions[0].addr;
	struct iovec iov = { &addr, sizeof(addr) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	*(int *)CMSG_DATA(cm) = c.uffd;
	if (sendmsg(sock, &mh, 0) < 0)
		_exit(3);
	_exit(same_as_file(c.regions[0].addr, LEN, 0, SEED, 0) ? 0 : 1);
}

/* One session: returns 1 if it behaved. */
static int session(struct fl_source *src, int kill_after_us, int *finished)
{
	int sv[2];

	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	pid_t pid = fork();

	if (pid == 0) {
		close(sv[0]);
		child(sv[1]);
	}
	close(sv[1]);
	uint64_t addr = 0;
	int uffd = recv_fd(sv[0], &addr);
	struct fl_engine_opts o = { .uffd = uffd, .client_pid = pid,
				    .flags = FL_ENGINE_ADOPT | FL_ENGINE_OWN_UFFD };
	struct fl_engine *e;
	struct fl_region_desc d = { .addr = addr, .len = LEN, .page_size = PAGE, .src_offset = 0, .flags = 0 };
	int st = -1;

	if (uffd < 0 || fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 || fl_engine_start(e, 2) < 0)
		return 0;
	if (kill_after_us) {
		usleep(kill_after_us);
		kill(pid, SIGKILL);
	}
	waitpid(pid, &st, 0);
	*finished = fl_engine_finished(e);
	fl_engine_destroy(e);	/* must not hang */
	close(sv[0]);
	/* Killed mid-restore, or done (and right) before the kill landed. */
	return (kill_after_us && WIFSIGNALED(st)) ||
	       (WIFEXITED(st) && !WEXITSTATUS(st));
}

int main(void)
{
	char *path = make_snapshot(LEN, SEED, NULL, 0);
	struct fl_source *src;
	int fin, good = 0, fds0;

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
	return done_testing();
}
