// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_peer_send.c - the live post-copy sender (send/send.c) facing a
 * receiver whose bytes are the input, on a demand and a stream connection.
 *
 * Input: bytes 0-1 (little-endian) are the length of the demand
 * connection's part (HELLO, REQs); the rest is the stream connection's
 * (HELLO and bitmap, HAVE_ALL).  The memory file is a memfd of five 4 KiB
 * blocks: data, zero, data, data, and 100 bytes of data.
 *
 * Decision: conn_thread() (hello, session, demand and stream service) is
 * static, so this file includes send.c and runs it as accept_conn() would,
 * on socketpairs instead of accepted sockets; the archive's send.o stays
 * out of the link.  The stream connection starts once the demand
 * connection's thread has ended or waits for bytes the input does not have
 * (asleep in recv() with nothing queued: /proc/self/task/N/syscall), and
 * the far ends are shut (EOF) once both are so, so that the order is the
 * input's, a crash reproduces, and no read waits for its timeout.  A drain
 * thread reads what the sender writes.
 */
#include "send/send.c"

#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define FILE_SIZE	(4 * 4096 + 100)
#define INPUT_MAX	(64 << 10)	/* fits the socket buffers */

struct job {
	struct conn *c;
	int fd;			/* the sender's end */
	atomic_bool done;
	pthread_t t;
};

static void *job_main(void *arg)
{
	struct job *j = arg;

	conn_thread(j->c);
	atomic_store(&j->done, true);
	return NULL;
}

/* A connection for conn_thread(), counted as accept_conn() counts it. */
static void start(struct job *j, struct sender *snd, int fd, const char *name)
{
	j->c = calloc(1, sizeof(*j->c));
	if (!j->c)
		abort();
	j->c->snd = snd;
	j->c->fd = j->fd = fd;
	snprintf(j->c->peer, sizeof(j->c->peer), "%s", name);
	atomic_init(&j->done, false);
	atomic_fetch_add(&snd->nthreads, 1);
	if (pthread_create(&j->t, NULL, job_main, j))
		abort();
}

/* Is a thread asleep in recv() on fd, with nothing queued on it? */
static bool starved(int fd)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	bool in_recv = false;
	int n;

	while (d && !in_recv && (e = readdir(d))) {
		char path[64];
		unsigned long a0;
		long nr;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%s/syscall",
			 e->d_name);
		f = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
		if (!f)
			continue;
		in_recv = fscanf(f, "%ld %lx", &nr, &a0) == 2 &&
			  nr == SYS_recvfrom && a0 == (unsigned long)fd;
		fclose(f);
	}
	if (d)
		closedir(d);
	return in_recv && ioctl(fd, FIONREAD, &n) == 0 && n == 0;
}

/* Until each job has ended or waits for bytes that will not come. */
static void settle(struct job *jobs, int n)
{
	for (int i = 0; i < n; i++)
		while (!atomic_load(&jobs[i].done) && !starved(jobs[i].fd))
			usleep(20);
}

static void *drain_main(void *arg)
{
	int *fd = arg;
	struct pollfd p[2] = { { fd[0], POLLIN, 0 },
			       { fd[1], POLLIN, 0 } };
	char buf[16384];

	while (p[0].fd >= 0 || p[1].fd >= 0) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++)
			if (p[i].revents &&
			    read(p[i].fd, buf, sizeof(buf)) <= 0)
				p[i].fd = -1;
	}
	return NULL;
}

static int memory_file(void)
{
	static const char data[] = "faultline";
	int fd = memfd_create("fuzz-send", MFD_CLOEXEC);
	char *b = calloc(1, FILE_SIZE);

	if (fd >= 0 && b) {
		for (size_t i = 0; i < FILE_SIZE; i++)
			if (i / 4096 != 1)	/* block 1 is zero */
				b[i] = data[i % 9];
		if (write(fd, b, FILE_SIZE) != FILE_SIZE) {
			close(fd);
			fd = -1;
		}
	}
	free(b);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sender snd = { .fd = -1, .done_fd = -1 };
	struct send_config cfg = { .block_size = 4096 };
	int dsp[2], ssp[2], far[2], mfd;
	struct job jobs[2];
	pthread_t drain;
	char path[64];

	if (size < 2 || size > INPUT_MAX)
		return 0;
	size_t dlen = data[0] | (size_t)data[1] << 8;

	if (dlen > size - 2)
		dlen = size - 2;
	mfd = memory_file();
	if (mfd < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	cfg.mem_file = path;
	if (sender_open(&snd, &cfg) < 0 ||
	    (snd.done_fd = eventfd(0, EFD_CLOEXEC)) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dsp) < 0)
		goto out;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ssp) < 0) {
		close(dsp[0]);
		close(dsp[1]);
		goto out;
	}
	snd.max_conns = max_conns();
	pthread_mutex_init(&snd.lock, NULL);
	if (send_full(dsp[1], data + 2, dlen) < 0 ||
	    send_full(ssp[1], data + 2 + dlen, size - 2 - dlen) < 0)
		abort();
	far[0] = dsp[1];
	far[1] = ssp[1];
	if (pthread_create(&drain, NULL, drain_main, far))
		abort();
	start(&jobs[0], &snd, dsp[0], "demand");
	settle(jobs, 1);
	start(&jobs[1], &snd, ssp[0], "stream");
	settle(jobs, 2);
	shutdown(dsp[1], SHUT_WR);
	shutdown(ssp[1], SHUT_WR);
	pthread_join(jobs[0].t, NULL);
	pthread_join(jobs[1].t, NULL);
	pthread_join(drain, NULL);
	close(dsp[1]);
	close(ssp[1]);
	pthread_mutex_destroy(&snd.lock);
out:
	if (snd.fd >= 0)
		close(snd.fd);
	if (snd.done_fd >= 0)
		close(snd.done_fd);
	close(mfd);
	return 0;
}
